# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One module of the collection run for real on this machine, as `ansible localhost -m llmops.sglang.NAME` (the local
module tests' shared runner)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
ANSIBLE = Path(sys.executable).parent / 'ansible'


def run_module(name, args, check=False, fail=False):
    """(the module's result, ansible's stdout + stderr); asserts that it failed exactly when ``fail``."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / '.build' / 'collections'), ANSIBLE_LOCALHOST_WARNING='0',
               ANSIBLE_INVENTORY_UNPARSED_WARNING='0', ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    argv = [str(ANSIBLE), 'localhost', '-c', 'local', '-m', 'llmops.sglang.' + name, '-o', '-a', json.dumps(args)]
    done = subprocess.run(argv + (['--check'] if check else []), capture_output=True, text=True, env=env, timeout=300,
                          check=False, cwd=str(ROOT))
    output = done.stdout + done.stderr
    assert (done.returncode != 0) == fail, output
    return json.loads(done.stdout.split(' => ', 1)[1]), output
