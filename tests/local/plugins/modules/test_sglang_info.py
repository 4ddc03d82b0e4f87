# -*- coding: utf-8 -*-
"""sglang_info run for real on this machine through ansible: a hanging nvidia-smi is cut off; last-good comparison."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
ANSIBLE = Path(sys.executable).parent / 'ansible'


def adhoc(module_args, env=None, timeout=600):
    """`ansible localhost -m llmops.sglang.sglang_info -a ARGS -o` -> the module's result."""
    full_env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / '.build' / 'collections'), ANSIBLE_LOCALHOST_WARNING='0',
                    ANSIBLE_INVENTORY_UNPARSED_WARNING='0',
                    ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    full_env.update(env or {})
    # `timeout` is a guard against the hang this test is about, not a measurement.
    done = subprocess.run([str(ANSIBLE), 'localhost', '-c', 'local', '-m', 'llmops.sglang.sglang_info', '-o',
                           '-a', json.dumps(module_args)], capture_output=True, text=True, env=full_env, timeout=timeout,
                          check=False, cwd=str(ROOT))
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.split(' => ', 1)[1])


@pytest.mark.skipif(not os.path.exists('/usr/bin/timeout'), reason='needs coreutils timeout')
def test_a_hanging_nvidia_smi_does_not_hang_the_task(tmp_path):
    fake = tmp_path / 'bin' / 'nvidia-smi'
    fake.parent.mkdir()
    marker = tmp_path / 'started'
    # Ignores SIGTERM, like a driver call stuck in the kernel: only the KILL after the grace period ends it.
    fake.write_text('#!%s\nimport signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n'
                    'open(%r, "w").close()\ntime.sleep(100000)\n' % (sys.executable, str(marker)))
    fake.chmod(0o755)
    result = adhoc({'gpus': True}, env={'PATH': '%s:%s' % (fake.parent, os.environ['PATH'])})
    assert marker.exists(), 'the fake nvidia-smi never ran'
    assert result['gpus'] == []
    ps = subprocess.run(['pgrep', '-f', str(fake)], capture_output=True, text=True, check=False)
    assert ps.stdout.strip() == '', 'the hanging nvidia-smi was left running'


def test_last_good_equality_and_mtimes(tmp_path):
    live = tmp_path / 'etc'
    saved = tmp_path / 'last-good'
    live.mkdir()
    saved.mkdir()
    for name, text in (('unit', 'A'), ('env', 'B')):
        (live / name).write_text(text)
        (saved / name).write_text(text)
    (live / 'env').write_text('B2')
    (saved / 'pins.json').write_text('{"sglang": "0.5.23", "compressed-tensors": "0.18.0"}')
    result = adhoc({'gpus': False, 'mtimes': [str(live / 'unit'), str(live / 'nope'), str(live / 'u*')],
                    'last_good': {'dir': str(saved), 'files': {'unit': str(live / 'unit'), 'env': str(live / 'env'),
                                                               'secrets.env': str(live / 'secrets.env')}}})
    assert result['last_good'] == {'exists': True, 'same': {'unit': True, 'env': False, 'secrets.env': True},
                                   'digests': {'unit': hashlib.sha1(b'A').hexdigest(), 'env': hashlib.sha1(b'B').hexdigest(),
                                               'secrets.env': None},
                                   'pins': {'sglang': '0.5.23', 'compressed-tensors': '0.18.0'}}
    assert result['mtimes'][str(live / 'nope')] is None
    assert result['mtimes'][str(live / 'unit')] == os.stat(str(live / 'unit')).st_mtime
