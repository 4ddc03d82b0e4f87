# -*- coding: utf-8 -*-
"""sglang_canary's main() against real stand-in servers on this machine: a first analysis records, a slower server
fails against the record and against a live baseline side by side, a server that answers differently fails unless
the change is declared, errors fail, and the server's own /metrics saw the load (so no pass is vacuous).

The stand-in paces each decoded token by SGLANG_STANDIN_TOKEN_SECONDS; its serving-quality faults
(SGLANG_STANDIN_FAULT: decode_slowdown, answer_shift, error_rate, collapse_above) make the bad canaries."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

pytest.importorskip('requests')

from ansible_collections.llmops.sglang.plugins.module_utils.canary.stream import metric_total  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.llmops.sglang.plugins.modules import sglang_canary as mod  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.llmops.sglang.tests.unit.plugins import fakes  # noqa: E402  pylint: disable=wrong-import-position

# 20 ms tokens and floors wider than the defaults (as tests/integration/test_canary.py): `make test` runs these beside
# the fleet groups on 2 cores, where 10 ms tokens drowned in scheduling noise (a declared answer change failed on a
# first-token time, a collapse at concurrency 8 showed in tpot but not clearly in throughput).
TOKEN = '0.02'
SECRET = 'sk-canary-local-8d21'
# small and quick: 2 levels, 3 rounds, 16 tokens (about 5 s against one stand-in)
OPTIONS = {'concurrency': [1, 4], 'rounds': 3, 'max_tokens': 16, 'model': 'default', 'api_key': SECRET,
           'floors': {'tpot': 5, 'ttft': 200},
           'prompts': [{'prompt': 'What is the capital of France?'}, {'prompt': 'Say OK'}]}


def start(launch, python, model, fault=None, metrics=True):
    env = {'SGLANG_STANDIN_TOKEN_SECONDS': TOKEN}
    if fault:
        env['SGLANG_STANDIN_FAULT'] = fault
    server = launch(python, model, '--api-key', SECRET, *(['--enable-metrics'] if metrics else []), env=env)
    server.wait_ready()
    return server


def analyse(server, capsys, record_file, **extra):
    args = dict(OPTIONS, url='http://127.0.0.1:%d' % server.port, record_file=str(record_file))
    args.update(extra)
    return fakes.run_module(mod, args, capsys)


@pytest.fixture
def record_file(tmp_path):
    control = tmp_path / 'control'
    control.mkdir(mode=0o700)
    return control / 'canary.json'


def test_a_first_analysis_passes_records_and_the_server_saw_the_load(launch, standin_python, model_dir, record_file, capsys):
    server = start(launch, standin_python, model_dir)
    res = analyse(server, capsys, record_file)
    assert res['_rc'] == 0 and res['passed'] and res['recorded'], res['msg']
    assert res['baseline'] == 'none (the first analysis of this instance)'
    # 3 rounds x (2 golden + 2 at concurrency 1 + 8 at 4), every one answered, counted by the server itself
    assert res['requests'] == 36 and res['errors'] == 0
    # every load request runs to max_tokens (ignore_eos): 3 rounds x 10 x 16 tokens, and the server counted them too
    # (its counter leaves out the end-of-sequence token usage counts for the golden answers that stopped)
    assert res['client_tokens'] >= 3 * 10 * 16 and res['server_generation_tokens'] >= 3 * 10 * 16
    assert SECRET not in res['_raw']
    record = json.loads(record_file.read_text())
    assert (os.stat(str(record_file)).st_mode & 0o777) == 0o600
    assert sorted(record['figures']) == ['1', '4'] and len(record['answers']) == 2
    tpot = record['figures']['1']['tpot']
    assert len(tpot) == 3 and all(16.0 < value < 80.0 for value in tpot), tpot   # about TOKEN seconds per token

    # the same server again: the same figures within the thresholds, the same answers
    again = analyse(server, capsys, record_file)
    assert again['passed'] and again['baseline'].startswith('recorded '), again['report']
    assert [row['figure'] for row in again['rows']] == ['ttft', 'tpot', 'throughput'] * 2


def test_a_slower_server_fails_against_the_record_and_side_by_side(launch, standin_python, model_dir, record_file, capsys):
    good = start(launch, standin_python, model_dir)
    assert analyse(good, capsys, record_file)['passed']
    slow = start(launch, standin_python, model_dir, fault='decode_slowdown=2')
    res = analyse(slow, capsys, record_file)
    assert res['_rc'] == 1 and not res['passed'] and res['reason'] == 'canary_analysis'
    failed = sorted((row['level'], row['figure']) for row in res['rows'] if row['failed'])
    assert (1, 'tpot') in failed and (4, 'tpot') in failed, res['report']
    assert 'time per output token at concurrency 1' in res['msg'] and 'at most 1.25x' in res['msg']
    assert not res['recorded']
    # side by side: the live baseline is the good server, measured in the same rounds
    live = analyse(slow, capsys, record_file, baseline_url='http://127.0.0.1:%d' % good.port)
    assert not live['passed'] and live['baseline'] == 'live, http://127.0.0.1:%d' % good.port
    assert any(row['failed'] and row['figure'] == 'tpot' for row in live['rows'])


# For a test about the answers alone: figures judged only past 4x, so that the load `make test` puts beside these
# tests between a record and a later analysis (a throughput row at 0.7x failed a CI-like run) cannot fail one.
ANSWERS_ONLY = {'thresholds': {'tpot': 4.0, 'ttft': 4.0, 'throughput': 0.25}}


def test_changed_answers_fail_unless_declared(launch, standin_python, model_dir, record_file, capsys):
    assert analyse(start(launch, standin_python, model_dir), capsys, record_file, **ANSWERS_ONLY)['passed']
    shifted = start(launch, standin_python, model_dir, fault='answer_shift=1')
    res = analyse(shifted, capsys, record_file, **ANSWERS_ONLY)
    assert not res['passed'] and 'the answer changed from' in res['msg'], res['msg']
    assert all(row['failed'] is False for row in res['rows']), res['report']   # only the answers moved
    declared = analyse(shifted, capsys, record_file, answers='changed', **ANSWERS_ONLY)
    assert declared['passed'] and declared['recorded'], declared['report']
    # the new answers are the verified ones now
    assert analyse(shifted, capsys, record_file, **ANSWERS_ONLY)['passed']


def test_errors_fail_and_name_the_first(launch, standin_python, model_dir, record_file, capsys):
    server = start(launch, standin_python, model_dir, fault='error_rate=0.05')
    res = analyse(server, capsys, record_file)
    assert not res['passed'] and res['errors'] >= 1, res['report']
    assert 'errors %d of 36 requests' % res['errors'] in res['msg']


def test_throughput_that_collapses_at_concurrency_fails(launch, standin_python, model_dir, record_file, capsys):
    """Against a good server measured in the same rounds (a live baseline): a record made minutes earlier, under
    another load, once let the collapse pass (the record's own throughput at 8 was low)."""
    opts = {'concurrency': [1, 8]}
    good = start(launch, standin_python, model_dir)
    collapsed = start(launch, standin_python, model_dir, fault='collapse_above=4')
    res = analyse(collapsed, capsys, record_file, baseline_url='http://127.0.0.1:%d' % good.port, **opts)
    assert not res['passed'] and res['baseline'] == 'live, http://127.0.0.1:%d' % good.port, res['report']
    failed = [(row['level'], row['figure']) for row in res['rows'] if row['failed']]
    assert (8, 'throughput') in failed and (1, 'throughput') not in failed, res['report']


def test_check_mode_sends_nothing(launch, standin_python, model_dir, record_file, capsys):
    server = start(launch, standin_python, model_dir)

    def generated():
        status, body = server.request('GET', '/metrics', headers={'Authorization': 'Bearer ' + SECRET})
        assert status == 200, body
        return metric_total(body, 'sglang:generation_tokens_total') or 0.0

    before = generated()
    args = dict(OPTIONS, url='http://127.0.0.1:%d' % server.port, record_file=str(record_file))
    res = fakes.run_module(mod, args, capsys, check_mode=True)
    assert res['passed'] and res['skipped'] and not record_file.exists()
    assert generated() == before
    analyse(server, capsys, record_file)
    assert generated() > before   # (the counter moves when a load is sent)


def test_a_record_another_user_could_change_is_refused(launch, standin_python, model_dir, tmp_path, capsys):
    shared = tmp_path / 'shared'
    shared.mkdir()
    os.chmod(str(shared), 0o777)
    (shared / 'canary.json').write_text('{}')
    os.chmod(str(shared / 'canary.json'), 0o666)
    server = start(launch, standin_python, model_dir, metrics=False)
    res = analyse(server, capsys, shared / 'canary.json')
    assert res['_rc'] == 1 and 'cannot be trusted' in res['msg'], res['msg']


@pytest.mark.parametrize('bad, expected', [
    ({'rounds': 1}, 'rounds: expected an integer >= 2'),
    ({'thresholds': {'tpot': 0.5}}, 'thresholds.tpot: expected a ratio >= 1'),
])
def test_bad_options_fail_before_any_request(bad, expected, tmp_path, capsys):
    args = dict(OPTIONS, url='http://127.0.0.1:9', record_file=str(tmp_path / 'x.json'))
    args.update(bad)
    res = fakes.run_module(mod, args, capsys)
    assert res['_rc'] == 1 and expected in res['msg']
