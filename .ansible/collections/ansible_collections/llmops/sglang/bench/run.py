#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmarks of llmops.sglang on a private local fleet: `.venv/bin/python bench/run.py [--quick]` (bench/cli.py).

The thin entry of the package bench/; it puts the repository root (for `bench`) and tests/ (for the shared fleet
client, `fleet.client`) on sys.path.
"""

from __future__ import absolute_import, division, print_function

import os
import sys

__metaclass__ = type  # pylint: disable=invalid-name

if __name__ == "__main__":
    HERE = os.path.dirname(os.path.abspath(__file__))
    ROOT = os.path.dirname(HERE)
    # Run as a script, this directory is sys.path[0]: drop it, so that bench's modules are only reachable as `bench.*`.
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != HERE]
    sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]
    from bench.cli import main  # pylint: disable=import-error,wrong-import-position
    sys.exit(main())
