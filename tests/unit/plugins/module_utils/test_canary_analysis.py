# -*- coding: utf-8 -*-
"""Canary analysis: the figures of a round, the judgement against a baseline, the answers, the stream's samples and
the driver's loop on fake endpoints (no process, no socket)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.canary import analysis, canary_driver, stream

PROMPTS = [{'prompt': 'What is the capital of France?', 'expect': ['Paris']}, {'prompt': 'Say OK'}]


def one(start, ttft, tpot, tokens=32, ok=True, text='Paris', reasoning=''):
    end = start + ttft + tpot * (tokens - 1)
    return {'ok': ok, 'error': None if ok else 'HTTP 500', 'start': start, 'end': end, 'ttft': ttft if ok else None,
            'tpot': tpot if ok else None, 'tokens': tokens if ok else 0, 'text': text, 'reasoning': reasoning}


def test_round_figures_are_medians_and_throughput_of_the_round():
    samples = [one(0.0, 0.05, 0.010), one(0.0, 0.07, 0.012), one(0.0, 0.06, 0.011, ok=False)]
    figures = analysis.round_figures(samples)
    assert figures['requests'] == 3 and figures['errors'] == 1 and figures['tokens'] == 64
    assert figures['ttft'] == pytest.approx(60.0) and figures['tpot'] == pytest.approx(11.0)
    wall = max(s['end'] for s in samples)
    assert figures['throughput'] == pytest.approx(64 / wall)


def test_rank_p_is_one_over_the_ways_to_order_the_rounds():
    assert analysis.rank_p(3, 3) == pytest.approx(0.05)
    assert analysis.rank_p(2, 2) == pytest.approx(1 / 6.0)
    assert analysis.rank_p(0, 3) == 1.0


@pytest.mark.parametrize('canary, baseline, failed, separated', [
    ([20.0, 21.0, 19.5], [10.0, 10.5, 9.8], True, True),        # 2x slower, every round: fails
    ([11.0, 10.2, 10.9], [10.0, 10.5, 9.8], False, False),      # within 1.25x and overlapping: passes
    ([13.5, 12.0, 13.0], [10.0, 10.5, 9.8], False, True),       # every round slower, but 1.3x is within 1.4x
    ([30.0, 9.0, 31.0], [10.0, 10.5, 9.8], False, False),       # 3x median but one round as fast: noise, passes
])
def test_a_latency_fails_only_past_its_threshold_and_separated(canary, baseline, failed, separated):
    row = analysis.judge_figure('tpot', canary, baseline, 1.4, 2.0)
    assert row['failed'] is failed and row['separated'] is separated
    assert row['ratio'] == pytest.approx(analysis.median(canary) / analysis.median(baseline), abs=1e-3)


def test_a_latency_difference_below_the_floor_is_not_judged():
    # an idle server's 0.2 ms against 0.1 ms is 2x, and nothing an operator should be paged for
    assert not analysis.judge_figure('tpot', [0.2, 0.21, 0.22], [0.1, 0.1, 0.11], 1.25, 2.0)['failed']
    assert analysis.judge_figure('tpot', [0.2, 0.21, 0.22], [0.1, 0.1, 0.11], 1.25, 0.0)['failed']


def test_throughput_fails_below_its_fraction():
    row = analysis.judge_figure('throughput', [250.0, 240.0, 260.0], [1000.0, 980.0, 1010.0], 0.8, 0)
    assert row['failed'] and row['ratio'] == pytest.approx(0.25, abs=1e-3)
    assert not analysis.judge_figure('throughput', [900.0, 1020.0, 950.0], [1000.0, 980.0, 1010.0], 0.8, 0)['failed']


def test_verdict_names_each_failed_figure_and_the_errors():
    rows = analysis.judge_figures({'8': {'ttft': [50.0] * 3, 'tpot': [40.0, 41.0, 42.0], 'throughput': [100.0] * 3}},
                                  {'8': {'ttft': [50.0] * 3, 'tpot': [10.0, 10.0, 11.0], 'throughput': [100.0] * 3}},
                                  analysis.DEFAULT_THRESHOLDS, analysis.DEFAULT_FLOORS)
    result = analysis.verdict(rows, 2, 40, 0.0, [], 'recorded x')
    assert not result['passed']
    assert result['failures'][0] == 'errors 2 of 40 requests (5.0%, at most 0.0%)'
    assert result['failures'][1] == ('time per output token at concurrency 8 4.10x the baseline (41.0 ms against 10.0 ms; at most 1.25x)')
    lines = analysis.report_lines(rows, result, 2, 40, 2, 'recorded x')
    assert lines[0].startswith('canary analysis: FAILED (baseline: recorded x; 40 requests, 2 errors')
    assert any('FAIL' in line and 'p=0.05' in line for line in lines)
    assert analysis.failure_sentence(result) == ('the canary serves worse than it may (baseline: recorded x): '
                                                 + '; '.join(result['failures']) + '.')


def test_no_baseline_judges_errors_and_answers_only():
    rows = analysis.judge_figures({'1': {'ttft': [1.0], 'tpot': [1.0], 'throughput': [1.0]}}, None,
                                  analysis.DEFAULT_THRESHOLDS, analysis.DEFAULT_FLOORS)
    assert [(row['figure'], row['canary'], row['baseline'], row['ratio'], row['failed']) for row in rows] == [
        ('ttft', 1.0, None, None, False), ('tpot', 1.0, None, None, False), ('throughput', 1.0, None, None, False)]
    assert analysis.verdict([], 0, 10, 0.0, [], 'none')['passed']
    # the table shows no ratio and no rank test where there is nothing to compare with
    lines = analysis.report_lines(rows, analysis.verdict(rows, 0, 10, 0.0, [], 'none'), 0, 10, 0, 'none')
    expected = [['-', '<=1.5x', '-', 'ok'], ['-', '<=1.25x', '-', 'ok'], ['-', '>=0.8x', '-', 'ok']]
    assert [line.split()[-4:] for line in lines[2:]] == expected
    assert not analysis.verdict([], 0, 0, 0.0, [], 'none')['passed']  # no load sent is no pass


def test_answers_equal_the_reference_unless_declared_changed():
    key = analysis.prompt_key(PROMPTS[0]['prompt'], 32)
    key2 = analysis.prompt_key(PROMPTS[1]['prompt'], 32)
    answers = {key: [one(0, 0.1, 0.01, text='Paris')] * 2, key2: [one(0, 0.1, 0.01, text='OK')] * 2}
    same = {key: 'Paris', key2: 'OK'}
    assert analysis.judge_answers(answers, same, PROMPTS, 32, 'compare') == ([], same)
    moved = {key: 'Paris', key2: 'Sure'}
    problems, record = analysis.judge_answers(answers, moved, PROMPTS, 32, 'compare')
    assert len(problems) == 1 and 'the answer changed from "Sure" to "OK"' in problems[0] and record == same
    assert analysis.judge_answers(answers, moved, PROMPTS, 32, 'changed')[0] == []
    # a declaration holds whatever the mode
    wrong = {key: [one(0, 0.1, 0.01, text='Lyon')], key2: [one(0, 0.1, 0.01, text='OK')]}
    assert 'lacks "Paris"' in analysis.judge_answers(wrong, None, PROMPTS, 32, 'changed')[0][0]
    # nondeterministic at temperature 0: said, not compared
    flaky = {key: [one(0, 0.1, 0.01, text='Paris'), one(0, 0.1, 0.01, text='Paris!')], key2: answers[key2]}
    assert 'differ between rounds' in analysis.judge_answers(flaky, same, PROMPTS, 32, 'compare')[0][0]


def test_reasoning_is_part_of_the_answer_and_can_be_required():
    sample = one(0, 0.1, 0.01, text='Paris', reasoning='The user asks.')
    assert analysis.answer_of(sample) == 'The user asks.\n</think>\nParis'
    key = analysis.prompt_key('q', 8)
    problems = analysis.judge_answers({key: [one(0, 0.1, 0.01)]}, None, [{'prompt': 'q', 'reasoning': True}], 8, 'off')[0]
    assert problems == ['prompt "q": no reasoning section (declared reasoning: true)']


def test_a_recorded_baseline_counts_only_under_the_same_load():
    key = analysis.settings_key([1, 4], 32, PROMPTS)
    record = analysis.new_record(key, {'1': {'tpot': [1.0]}}, {}, 'now')
    assert analysis.usable_baseline(record, key) == {'1': {'tpot': [1.0]}}
    assert analysis.usable_baseline(record, analysis.settings_key([1, 8], 32, PROMPTS)) is None
    assert analysis.usable_baseline(dict(record, version=0), key) is None
    assert analysis.usable_baseline(None, key) is None


@pytest.mark.parametrize('kwargs, expected', [
    (dict(prompts=[]), 'prompts: expected at least one prompt'),
    (dict(prompts=[{'prompt': 'x', 'expected': ['y']}]), 'prompts[0]: unknown keys expected'),
    (dict(concurrency=[0, 4]), 'concurrency: expected a list of integers >= 1'),
    (dict(rounds=1), 'rounds: expected an integer >= 2'),
    (dict(max_tokens=1), 'max_tokens: expected an integer >= 2'),
    (dict(thresholds={'tpot': 0.9}), 'thresholds.tpot: expected a ratio >= 1'),
    (dict(thresholds={'throughput': 1.2}), 'thresholds.throughput: expected a ratio <= 1'),
    (dict(thresholds={'latency': 1.2}), 'thresholds.latency: unknown'),
    (dict(floors={'tpot': -1}), 'floors.tpot: expected milliseconds >= 0'),
    (dict(answers='maybe'), 'answers: expected one of compare, changed, off'),
])
def test_bad_options_name_the_option_and_what_was_expected(kwargs, expected):
    options = dict(prompts=PROMPTS, concurrency=[1, 4, 8], rounds=3, max_tokens=32, thresholds={}, floors={}, answers='compare')
    options.update(kwargs)
    problems = analysis.check_options(**options)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


# ---- the stream ---------------------------------------------------------------------------------------------------

def chunk(content=None, reasoning=None, usage=None):
    delta = {}
    if content is not None:
        delta['content'] = content
    if reasoning is not None:
        delta['reasoning_content'] = reasoning
    data = {'choices': [{'index': 0, 'delta': delta, 'finish_reason': None}] if usage is None else [], 'usage': usage}
    return json.dumps(data)


def test_a_stream_makes_a_sample_with_ttft_and_time_per_token():
    events = [(10.0, chunk(content='')), (10.2, chunk(content='Par')), (10.3, chunk(content='is')),
              (10.4, chunk(content='!')), (10.4, chunk(usage={'completion_tokens': 3})), (10.4, '[DONE]')]
    got = stream.sample(10.0, events, 10.5, 200)
    assert got['ok'] and got['tokens'] == 3 and got['text'] == 'Paris!'
    assert got['ttft'] == pytest.approx(0.2) and got['tpot'] == pytest.approx(0.1)


@pytest.mark.parametrize('events, status, error', [
    ([], 500, 'HTTP 500'),
    ([(1.0, json.dumps({'error': {'message': 'Internal server error', 'code': 500}}))], 200, 'Internal server error'),
    ([(1.0, chunk(content='x')), (1.1, chunk(usage={'completion_tokens': 1}))], 200, 'the stream ended without [DONE]'),
    ([(1.0, chunk(content='x')), (1.1, '[DONE]')], 200, 'no usage chunk (completion_tokens)'),
    ([(1.0, 'not json')], 200, 'a chunk that is not JSON: not json'),
])
def test_a_stream_that_is_not_a_whole_answer_is_an_error(events, status, error):
    got = stream.sample(0.0, events, 2.0, status)
    assert not got['ok'] and got['error'] == error


def test_the_request_is_greedy_streamed_and_counts_usage():
    body = stream.chat_body('q', 'm', 16, True)
    assert body['temperature'] == 0 and body['stream'] and body['stream_options'] == {'include_usage': True}
    assert body['ignore_eos'] is True and 'ignore_eos' not in stream.chat_body('q', 'm', 16, False)


def test_metric_total_sums_every_label_set_of_one_counter():
    text = ('# TYPE sglang:generation_tokens_total counter\n'
            'sglang:generation_tokens_total{is_streaming="true"} 30.0\n'
            'sglang:generation_tokens_total{is_streaming="false"} 12.0\n'
            'sglang:generation_tokens_created{is_streaming="true"} 1.7e9\n')
    assert stream.metric_total(text, 'sglang:generation_tokens_total') == 42.0
    assert stream.metric_total(text, 'sglang:num_requests_total') is None


# ---- the driver on fake endpoints ----------------------------------------------------------------------------------

class FakeServer(object):
    """A server whose time per token, answers and errors a test sets; run_level() below asks it."""

    def __init__(self, url, tpot=0.01, answer='Paris', error_every=0, metrics=True):
        self.url, self.tpot, self.answer, self.error_every, self.sent = url, tpot, answer, error_every, 0
        self.tokens = 0.0
        self.with_metrics = metrics

    def metrics(self):
        return 'sglang:generation_tokens_total{is_streaming="true"} %s\n' % self.tokens if self.with_metrics else None

    def settle(self):
        self.settled = True
        return 0 if self.with_metrics else None


class BusyServer(FakeServer):
    """A live baseline that other clients load during the window (a peer still in a router's rotation)."""

    def metrics(self):
        self.tokens += 500   # another client's answers between two reads
        return FakeServer.metrics(self)


def fake_run_level(endpoint, prompts, model, concurrency, count, max_tokens, fixed):
    results = []
    for index in range(count):
        endpoint.sent += 1
        prompt = prompts[index % len(prompts)]
        tokens = max_tokens if fixed else 4
        failed = endpoint.error_every and endpoint.sent % endpoint.error_every == 0
        sample = one(float(index // concurrency), 0.05, endpoint.tpot * (1 + 0.01 * (index % 3)), tokens=tokens,
                     ok=not failed, text=endpoint.answer if 'France' in prompt else 'OK')
        endpoint.tokens += sample['tokens']
        results.append((prompt, sample))
    return results


OPTS = dict(prompts=PROMPTS, concurrency=[1, 4], rounds=3, max_tokens=16, thresholds={}, floors={}, answers='compare',
            model='m')


def test_driver_first_analysis_has_no_baseline_and_records_figures_and_answers():
    canary = FakeServer('c')
    result = canary_driver.analyse(OPTS, canary, None, fake_run_level, None, 'T')
    assert result['passed'] and result['baseline'] == 'none (the first analysis of this instance)'
    # 3 rounds x (2 golden + 2 at level 1 + 8 at level 4)
    assert result['requests'] == canary.sent == 36 and result['errors'] == 0
    assert result['server_generation_tokens'] == result['client_tokens'] > 0
    record = result['record']
    assert sorted(record['figures']) == ['1', '4'] and len(record['figures']['4']['tpot']) == 3
    assert sorted(record['answers'].values()) == ['OK', 'Paris']


def test_driver_against_its_record_fails_a_slower_canary_and_a_changed_answer():
    first = canary_driver.analyse(OPTS, FakeServer('c'), None, fake_run_level, None, 'T')['record']
    slow = canary_driver.analyse(OPTS, FakeServer('c', tpot=0.02), None, fake_run_level, first, 'T2')
    assert not slow['passed'] and slow['baseline'] == 'recorded T'
    assert [row['level'] for row in slow['rows'] if row['failed']] == [1, 4]
    assert all(row['figure'] == 'tpot' for row in slow['rows'] if row['failed'])
    changed = canary_driver.analyse(OPTS, FakeServer('c', answer='Paris, France'), None, fake_run_level, first, 'T2')
    assert not changed['passed'] and 'the answer changed from "Paris" to "Paris, France"' in changed['failures'][0]
    declared = canary_driver.analyse(dict(OPTS, answers='changed'), FakeServer('c', answer='Paris, France'), None,
                                     fake_run_level, first, 'T2')
    assert declared['passed'] and declared['record']['answers'][analysis.prompt_key(PROMPTS[0]['prompt'], 16)] == 'Paris, France'


def test_driver_with_a_live_baseline_compares_in_the_same_window_and_counts_only_the_canary():
    canary, live = FakeServer('c', tpot=0.03), FakeServer('http://b:1')
    result = canary_driver.analyse(OPTS, canary, live, fake_run_level, None, 'T')
    assert not result['passed'] and result['baseline'] == 'live, http://b:1'
    assert live.sent == 2 + 3 * 10 and result['requests'] == canary.sent == 36


def test_driver_fails_on_errors_and_quotes_the_first():
    result = canary_driver.analyse(OPTS, FakeServer('c', error_every=20), None, fake_run_level, None, 'T')
    assert not result['passed'] and result['errors'] == 1
    assert result['failures'][0].startswith('errors 1 of 36 requests') and 'first: HTTP 500' in result['failures'][0]


def test_driver_does_not_take_a_failing_live_baseline_as_its_yardstick():
    first = canary_driver.analyse(OPTS, FakeServer('c'), None, fake_run_level, None, 'T')['record']
    broken = FakeServer('http://b:1', tpot=0.1, error_every=3)
    result = canary_driver.analyse(OPTS, FakeServer('c'), broken, fake_run_level, first, 'T2')
    assert result['passed'] and result['baseline'].startswith('recorded T (the live baseline http://b:1 failed ')
    assert all(row['baseline'] is not None for row in result['rows'])


def test_driver_sets_aside_a_live_baseline_that_served_other_clients_in_the_window():
    first = canary_driver.analyse(OPTS, FakeServer('c'), None, fake_run_level, None, 'T')['record']
    busy = BusyServer('http://b:1')
    result = canary_driver.analyse(OPTS, FakeServer('c'), busy, fake_run_level, first, 'T2')
    assert busy.settled and busy.sent == 32   # it was asked, settled first, and measured
    assert result['passed'] and result['baseline'].startswith(
        'recorded T (the live baseline http://b:1 generated 500 tokens for other clients during the window')
    # with no recorded figures either, nothing stands in: errors and answers only, and the report says why
    alone = canary_driver.analyse(OPTS, FakeServer('c'), BusyServer('http://b:1'), fake_run_level, None, 'T')
    assert alone['baseline'].startswith('none (the first analysis of this instance) (the live baseline http://b:1 generated')


def test_driver_says_when_it_cannot_tell_whether_others_loaded_the_live_baseline():
    result = canary_driver.analyse(OPTS, FakeServer('c'), FakeServer('http://b:1', metrics=False), fake_run_level, None, 'T')
    assert result['baseline'] == 'live, http://b:1 (its load by other clients unknown: no /metrics)'


def test_foreign_tokens_read_0_5_23_metrics():
    assert canary_driver.foreign_tokens('sglang:generation_tokens_total 10\n', 'sglang:generation_tokens_total 70\n', 60) == 0
    assert canary_driver.foreign_tokens('sglang:generation_tokens_total 10\n', 'sglang:generation_tokens_total 99\n', 60) == 29
    assert canary_driver.foreign_tokens(None, 'sglang:generation_tokens_total 99\n', 60) is None
