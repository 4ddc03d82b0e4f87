# -*- coding: utf-8 -*-
"""sglang_observe run for real on this machine through ansible: digests, last-good equality, what is missing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
ANSIBLE = Path(sys.executable).parent / 'ansible'


def observe(module_args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / '.build' / 'collections'), ANSIBLE_LOCALHOST_WARNING='0',
               ANSIBLE_INVENTORY_UNPARSED_WARNING='0', ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    done = subprocess.run([str(ANSIBLE), 'localhost', '-c', 'local', '-m', 'llmops.sglang.sglang_observe', '-o',
                           '-a', json.dumps(module_args)], capture_output=True, text=True, env=env, timeout=600,
                          check=False, cwd=str(ROOT))
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.split(' => ', 1)[1])


def test_one_call_sees_files_last_good_and_what_is_missing(tmp_path):
    live, saved = tmp_path / 'etc', tmp_path / 'last-good'
    live.mkdir()
    saved.mkdir()
    (live / 'unit').write_text('[Unit]\n')
    (saved / 'unit').write_text('[Unit]\n')
    (live / 'env').write_text('A=1\n')
    (saved / 'env').write_text('A=2\n')
    (saved / 'pins.json').write_text('{"sglang": "0.5.23"}')
    files = {'unit': str(live / 'unit'), 'env': str(live / 'env'), 'secrets.env': str(live / 'secrets.env'),
             'shim': str(live / 'shim.py')}
    result = observe({
        'instances': [{'unit': 'llmops-no-such-unit.service', 'files': files, 'last_good_dir': str(saved),
                       'mtimes': [str(live / 'unit'), str(live / 'nope')]}],
        'venvs': [str(Path(sys.executable).parent.parent)],
        'packages': ['pytest', 'no-such-distribution'],
        'directories': [str(live), str(tmp_path / 'absent')],
        'users': ['root', 'llmops-no-such-user'], 'groups': ['llmops-no-such-group'],
    })
    seen = result['instances']['llmops-no-such-unit.service']
    assert seen['files'] == {'unit': hashlib.sha1(b'[Unit]\n').hexdigest(), 'env': hashlib.sha1(b'A=1\n').hexdigest(),
                             'secrets.env': None, 'shim': None}
    assert seen['service']['exists'] is False and seen['service']['started_at'] is None
    assert seen['last_good'] == {'exists': True, 'same': {'unit': True, 'env': False, 'secrets.env': True},
                                 'digests': {'unit': hashlib.sha1(b'[Unit]\n').hexdigest(),
                                             'env': hashlib.sha1(b'A=2\n').hexdigest(), 'secrets.env': None},
                                 'pins': {'sglang': '0.5.23'}}
    assert seen['mtimes'][0] == os.stat(str(live / 'unit')).st_mtime and seen['mtimes'][1] is None
    venv = result['venvs'][str(Path(sys.executable).parent.parent)]
    assert venv['packages']['pytest'] and venv['packages']['no-such-distribution'] is None
    assert result['missing'] == [str(tmp_path / 'absent'), 'user llmops-no-such-user', 'group llmops-no-such-group']
    assert result['changed'] is False


def test_a_malformed_instance_is_refused_naming_it():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / '.build' / 'collections'), ANSIBLE_LOCALHOST_WARNING='0',
               ANSIBLE_INVENTORY_UNPARSED_WARNING='0', ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    done = subprocess.run([str(ANSIBLE), 'localhost', '-c', 'local', '-m', 'llmops.sglang.sglang_observe', '-o',
                           '-a', json.dumps({'instances': [{'files': {}}]})], capture_output=True, text=True, env=env,
                          timeout=600, check=False, cwd=str(ROOT))
    assert done.returncode != 0 and 'instances[0]: expected a dict with unit' in done.stdout, done.stdout
