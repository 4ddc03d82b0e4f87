# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_preflight's main() for real: input validation, the checkpoint gate on real files (hashing, the cache and
its trust rules, check mode). A file growing meanwhile and the GPU gate against the SGLang stand-in's nvidia-smi on
PATH are local tests (tests/local/plugins/modules/test_sglang_preflight_gpu.py); the gates' decisions on fakes:
tests/unit/plugins/module_utils/test_preflight.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat
import time

import pytest

from ansible_collections.llmops.sglang.plugins.modules import sglang_preflight as mod
from ansible_collections.llmops.sglang.tests.unit.plugins import fakes


def run_module(args, capsys, check_mode=False):
    return fakes.run_module(mod, args, capsys, check_mode)


@pytest.fixture
def model(tmp_path):
    return fakes.preflight_model(tmp_path)


gate = fakes.preflight_args


def test_unknown_waiver_and_bad_manifest_are_refused(capsys, model):
    result = run_module(gate(model, waive=['persistence', 'ecc_uncorrected']), capsys)
    assert result['failed'] and 'waive: unknown check(s) persistence; the checks are nvidia_smi' in result['msg']
    result = run_module(gate(model, manifest={'a': {'size': 'big'}}), capsys)
    assert result['failed'] and "sglang_model_manifest['a'].size must be a byte count" in result['msg']
    result = run_module(gate(model, server_argv=['--tp-size', 'x']), capsys)
    assert result['failed'] and 'server_argv' in result['msg']


@pytest.mark.skipif(os.geteuid() != 0, reason='the cache is believed only when root owns it')
def test_cold_then_warm_then_touched(capsys, model):
    cold = run_module(gate(model), capsys)['checkpoint']
    assert (cold['status'], cold['hashed'], cold['cached'], cold['cache']) == ('ok', 3, 0, 'written')
    assert stat.S_IMODE(os.stat(model['cache']).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(model['cache'])).st_mode) == 0o700
    warm = run_module(gate(model), capsys)['checkpoint']
    assert (warm['hashed'], warm['cached']) == (0, 3)
    first = os.path.join(model['path'], sorted(model['manifest'])[0])
    os.utime(first, ns=(time.time_ns(), time.time_ns() + 10 ** 9))
    touched = run_module(gate(model), capsys)['checkpoint']
    assert (touched['hashed'], touched['cached']) == (1, 2)


@pytest.mark.skipif(os.geteuid() != 0, reason='the cache is believed only when root owns it')
def test_a_cache_others_can_write_is_not_believed(capsys, model):
    run_module(gate(model), capsys)
    os.chmod(model['cache'], 0o666)
    again = run_module(gate(model), capsys)['checkpoint']
    assert (again['hashed'], again['cached']) == (3, 0)


def test_check_mode_does_not_write_the_cache(capsys, model):
    result = run_module(gate(model), capsys, check_mode=True)['checkpoint']
    assert result['hashed'] == 3 and result['cache'] == 'not written (check mode)'
    assert not os.path.exists(os.path.dirname(model['cache']))


def test_missing_state_dir_is_never_created(capsys, model, tmp_path):
    result = run_module(gate(model, cache_path=str(tmp_path / 'nope' / '.preflight' / 'c.json')), capsys)['checkpoint']
    assert result['cache'].startswith('not written: ') and not os.path.exists(str(tmp_path / 'nope'))
