# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Local test fleet: `python3 tests/fleet/fleet.py up|down|status|mirror|reboot|image` (see fleet/cli.py, --help).

The thin entry of the package tests/fleet (importable as `fleet` with tests/ on sys.path); stdlib only.
"""

from __future__ import absolute_import, division, print_function

import os
import sys

__metaclass__ = type  # pylint: disable=invalid-name

if __name__ == "__main__":
    # Run as a script, this directory is sys.path[0]: put its parent there instead, so that `fleet` is the package
    # (this directory), not this file.
    HERE = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != HERE]
    sys.path.insert(0, os.path.dirname(HERE))
    from fleet.cli import main  # pylint: disable=import-error,wrong-import-position
    sys.exit(main())
