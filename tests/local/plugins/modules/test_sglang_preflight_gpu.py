# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_preflight's main() for real on this machine: a file written meanwhile (a writer thread, a real growth
interval), and the GPU gate against the SGLang stand-in's nvidia-smi and a systemctl stand-in on PATH. The checkpoint
gate's other cases are unit tests (tests/unit/plugins/modules/test_sglang_preflight.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys
import threading
import time

import pytest

from ansible_collections.llmops.sglang.plugins.modules import sglang_preflight as mod
from ansible_collections.llmops.sglang.tests.unit.plugins import fakes

STANDIN_SRC = os.path.normpath(os.path.join(os.path.dirname(__file__), '..', '..', '..', 'standin', 'src'))


def run_module(args, capsys, check_mode=False):
    return fakes.run_module(mod, args, capsys, check_mode)


@pytest.fixture
def model(tmp_path):
    return fakes.preflight_model(tmp_path)


gate = fakes.preflight_args


def test_wrong_hash_and_a_file_written_meanwhile(capsys, model):
    name = sorted(model['manifest'])[1]
    path = os.path.join(model['path'], name)
    with open(path, 'r+b') as handle:
        handle.seek(-1, 2)
        handle.write(b'\xff')
    result = run_module(gate(model, cache_path=None), capsys)
    assert [f['check'] for f in result['checkpoint']['findings']] == ['manifest_hash'] and not result['ok']
    stop = threading.Event()

    def grow():
        with open(os.path.join(model['path'], 'partial.bin'), 'ab') as handle:
            while not stop.is_set():
                handle.write(b'x')
                handle.flush()
                time.sleep(0.02)
    writer = threading.Thread(target=grow)
    writer.start()
    try:
        result = run_module(gate(model, growth_interval=0.5, manifest={}), capsys)
    finally:
        stop.set()
        writer.join()
    assert [f['check'] for f in result['checkpoint']['findings']] == ['shard_growing']
    assert 'partial.bin is still being written' in result['failures'][0]


@pytest.fixture
def smi(tmp_path, monkeypatch):
    """The stand-in's nvidia-smi as the only nvidia-smi on PATH; returns its fault file."""
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    faults = tmp_path / 'faults'
    faults.write_text('')
    script = bindir / 'nvidia-smi'
    script.write_text('#!/bin/sh\nPYTHONPATH=%s SGLANG_STANDIN_SMI_FAULT_FILE=%s exec %s -m sglang_standin.nvidia_smi "$@"\n'
                      % (STANDIN_SRC, faults, sys.executable))
    script.chmod(0o755)
    monkeypatch.setenv('PATH', '%s:%s' % (bindir, os.environ.get('PATH', '')))
    return faults


def gpu_args(tmp_path, **extra):
    args = {'unit': 'a.service', 'checks': ['gpu'], 'server_argv': ['--tp-size', '8'],
            'config_dir': str(tmp_path / 'etc'), 'unit_dir': str(tmp_path / 'units')}
    args.update(extra)
    return args


def test_gpu_gate_healthy_faulty_and_waived(capsys, smi, tmp_path):
    ok = run_module(gpu_args(tmp_path), capsys)
    assert ok['ok'] and ok['gpu']['status'] == 'ok' and ok['gpu']['claimed'] == list(range(8))
    assert ok['gpu']['driver_cuda'] == '13.0'
    smi.write_text('ecc@2=3\npersistence_off@6\n')
    bad = run_module(gpu_args(tmp_path, waive=['persistence_mode']), capsys)
    assert not bad['ok'] and bad['waived'] == ['persistence_mode']
    assert [(f['check'], f['gpu'], f['waived']) for f in bad['gpu']['findings']] == [
        ('ecc_uncorrected', 2, False), ('persistence_mode', 6, True)]
    assert bad['summary']['gpu'] == {'status': 'failed', 'count': 8, 'verified': 0, 'reason': bad['gpu']['reason'],
                                     'failed': ['ecc_uncorrected (GPU 2)'], 'waived': ['persistence_mode']}


def fake_systemctl(bindir, active, enabled):
    """A systemctl that answers `show` for every unit with the given states (the real one needs systemd as PID 1)."""
    script = bindir / 'systemctl'
    script.write_text('#!/bin/sh\nprintf "ActiveState=%s\\nUnitFileState=%s\\nControlGroup=\\nMainPID=0\\n"\n'
                      % (active, enabled))
    script.chmod(0o755)


def test_gpu_gate_sees_another_instance_of_the_role(capsys, smi, tmp_path):
    fake_systemctl(tmp_path / 'bin', 'active', 'enabled')
    (tmp_path / 'etc').mkdir()
    (tmp_path / 'units').mkdir()
    (tmp_path / 'etc' / 'b.env').write_text('HOME="/var/lib/sglang/b"\nCUDA_VISIBLE_DEVICES="4,5,6,7"\n')
    (tmp_path / 'etc' / 'b.secrets.env').write_text('SGLANG_API_KEY="x"\n')
    (tmp_path / 'units' / 'b.service').write_text(
        '[Service]\nExecStart=/opt/v/bin/python -m sglang.launch_server --model-path /m --tp-size 4\n')
    env = ['CUDA_VISIBLE_DEVICES="0,1,2,3"']
    assert run_module(gpu_args(tmp_path, server_argv=['--tp-size', '4'], environment=env), capsys)['ok']
    clash = run_module(gpu_args(tmp_path, server_argv=['--tp-size', '4'], environment=['CUDA_VISIBLE_DEVICES="2,3,4,5"']),
                       capsys)
    assert clash['gpu']['findings'][0]['check'] == 'gpu_claim'
    assert 'GPUs 4,5 are claimed by a.service and by b.service' in clash['failures'][0]
    # stopped and disabled, b claims nothing: it neither runs nor starts at boot
    fake_systemctl(tmp_path / 'bin', 'inactive', 'disabled')
    assert run_module(gpu_args(tmp_path, server_argv=['--tp-size', '4'], environment=['CUDA_VISIBLE_DEVICES="2,3,4,5"']),
                      capsys)['ok']
    fake_systemctl(tmp_path / 'bin', 'failed', 'enabled')  # failed but enabled: it starts again at boot
    assert not run_module(gpu_args(tmp_path, server_argv=['--tp-size', '4'],
                                   environment=['CUDA_VISIBLE_DEVICES="2,3,4,5"']), capsys)['ok']


def test_no_nvidia_smi_is_not_judged_and_says_so(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv('PATH', str(tmp_path))
    result = run_module(gpu_args(tmp_path), capsys)
    assert result['ok'] and result['gpu']['status'] == 'not_judged'
    assert 'nvidia-smi is not installed' in result['gpu']['reason']


def test_an_nvidia_smi_that_fails_is_a_finding(capsys, smi, tmp_path):
    smi.write_text('nonsense@1\n')
    result = run_module(gpu_args(tmp_path), capsys)
    assert not result['ok'] and result['gpu']['findings'][0]['check'] == 'nvidia_smi'
    assert 'nvidia-smi --query-gpu failed (rc=2' in result['failures'][0]
