# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/canary.py (issue 26's canary analysis bench): what a module result names, the verdict of a run, the summary
against the goals, today's rollout figure, the page's section and notes. Pure: no stand-in, no module run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def row(level, figure, failed=False, ratio=1.0):
    return {'level': level, 'figure': figure, 'canary': 10.0 * ratio, 'baseline': 10.0, 'ratio': ratio,
            'separated': failed, 'failed': failed, 'threshold': 1.25, 'p': 0.05, 'rounds': [3, 3]}


def module_result(passed, rows=(), failures=()):
    result = {'passed': passed, 'failures': list(failures), 'rows': list(rows), 'requests': 96, 'errors': 0,
              'baseline': 'recorded 2026-12-05T07:31:51Z', 'recorded': passed}
    if not passed:
        result['reason'] = 'canary_analysis'
    return result


def run(scenario, verdict, expect, trial=1, named=(), wall=17.4, ratios=None):
    return {'trial': trial, 'scenario': scenario, 'verdict': verdict, 'expect': expect, 'named': list(named),
            'wall_s': wall, 'ratios': ratios or {}, 'failures': [], 'error': 'boom' if verdict == 'error' else None}


def results(runs, rollout=30.0):
    return {'trials': 2, 'pace_s': 0.02, 'lanes': 3, 'module_start_s': 0.17, 'runs': runs,
            'defaults': {'concurrency': [1, 4, 8], 'rounds': 3, 'max_tokens': 32, 'answers': 'compare',
                         'thresholds': {'tpot': 1.25, 'ttft': 1.5, 'throughput': 0.8, 'errors': 0.0},
                         'floors': {'tpot': 2.0, 'ttft': 20.0}, 'prompts': ['a', 'b', 'c', 'd']},
            'rollout_change_1': {'wall_s': rollout, 'runs': 1, 'key': "rollout.runs[scenario='change on 1 of 1', "
                                 "playbook='new'].wall_s", 'measured': '2026-12-02 03:29 UTC'} if rollout else None}


def test_named_lists_failed_figures_errors_and_answers_once(canary):
    result = module_result(False, [row(1, 'tpot', True, 2.0), row(1, 'ttft'), row(8, 'throughput', True, 0.25)], [
        'errors 4 of 96 requests (4.2%, at most 0.0%) - first: HTTP 500',
        'time per output token at concurrency 1 2.00x the baseline (40.0 ms against 20.0 ms; at most 1.25x)',
        'throughput at concurrency 8 0.25x the baseline (97 tok/s against 388 tok/s; at least 0.8x)',
        'prompt "What is the capital of France? Answer i...": the answer changed from "a" to "b"',
        'prompt "What is 17 times 23? Answer with the num...": the answer changed from "c" to "d"'])
    assert canary.named(result) == ['tpot@1', 'throughput@8', 'errors', 'answers']
    assert canary.named(module_result(False, failures=['no request of the load was sent'])) == ['no requests']


def test_outcome_tells_a_pass_a_stop_and_no_verdict_apart(canary):
    passed = canary.outcome(0, module_result(True, [row(1, 'tpot'), row(8, 'throughput', ratio=0.97),
                                                    dict(row(4, 'ttft'), ratio=None)]))
    assert (passed['verdict'], passed['named'], passed['requests']) == ('pass', [], 96)
    assert passed['ratios'] == {'tpot@1': 1.0, 'throughput@8': 0.97}   # a row without a baseline has no ratio
    stopped = canary.outcome(1, module_result(False, [row(4, 'tpot', True, 1.5)]))
    assert (stopped['verdict'], stopped['named']) == ('stop', ['tpot@4'])
    # the module failed otherwise (a record it cannot trust, a traceback): no verdict, and why
    broken = canary.outcome(1, {'msg': 'the recorded canary figures cannot be trusted: x', 'passed': False})
    assert broken['verdict'] == 'error' and broken['error'].startswith('the recorded canary figures')
    assert canary.outcome(1, None)['error'] == 'no JSON from the module'


def test_summary_counts_the_goals_and_the_right_figure(canary):
    runs = [run('first', 'pass', 'pass'), run('first', 'pass', 'pass', trial=2),
            run('good_recorded', 'pass', 'pass', wall=17.0, ratios={'tpot@1': 1.1, 'throughput@1': 0.95}),
            run('good_recorded', 'stop', 'pass', 2, ['ttft@1'], 18.0, {'ttft@1': 1.6, 'throughput@8': 0.9}),
            run('good_live', 'pass', 'pass', wall=34.0, ratios={'tpot@4': 1.02}),
            run('decode_2x', 'stop', 'stop', named=['tpot@1', 'throughput@1'], wall=33.0,
                ratios={'tpot@1': 2.0, 'throughput@1': 0.5}),
            run('decode_2x', 'pass', 'stop', 2, wall=32.0),
            run('errors_5pct', 'stop', 'stop', named=['ttft@8']),
            run('collapse_above_4', 'stop', 'stop', named=['tpot@8', 'throughput@8']),
            run('collapse_above_4', 'error', 'stop', 2, wall=None)]
    summary = canary.summarize(results(runs))
    rows = dict((one['name'], one) for one in summary['rows'])
    assert [one['name'] for one in summary['rows']] == ['first', 'good_recorded', 'good_live', 'decode_2x',
                                                        'errors_5pct', 'collapse_above_4']
    assert (summary['bad_stopped'], summary['bad_trials']) == (3, 5)
    assert (summary['good_stopped'], summary['good_trials']) == (1, 3)   # the first analysis is not counted
    assert summary['no_verdict'] == 1
    # the good canaries' margin: the worst ratio of each figure (highest latency, lowest throughput), bad ones left out
    assert summary['good_worst'] == {'tpot': 1.1, 'ttft': 1.6, 'throughput': 0.9}
    assert rows['decode_2x']['named'] == {'tpot@1': 1, 'throughput@1': 1}
    assert (rows['decode_2x']['right_named'], rows['errors_5pct']['right_named']) == (1, 0)
    assert rows['collapse_above_4']['right_named'] == 1 and rows['collapse_above_4']['no_verdict'] == 1
    assert (rows['decode_2x']['wall_median_s'], rows['decode_2x']['wall_max_s']) == (32.5, 33.0)
    assert rows['collapse_above_4']['wall_max_s'] == 17.4   # a run without a verdict has no wall
    # the seconds added: the passing good-vs-recorded analyses only, beside the rollout's 1-host change
    assert (summary['added_s'], summary['added_runs'], summary['ratio']) == (17.0, 1, 0.57)


def test_rollout_change_1_reads_todays_playbook_on_one_host(canary):
    previous = {'started': '2026-12-04 10:00 UTC', 'rollout': {'runs': [
        {'scenario': 'change on 1 of 1', 'playbook': 'old', 'rc': 0, 'wall_s': 28.2},
        {'scenario': 'change on 1 of 1', 'playbook': 'new', 'rc': 0, 'wall_s': 30.0},
        {'scenario': 'change on 1 of 1', 'playbook': 'new', 'rc': 0, 'wall_s': 34.0},
        {'scenario': 'change on 1 of 1', 'playbook': 'new', 'rc': 2, 'wall_s': 3.0},
        {'scenario': 'change on 1 of 24', 'playbook': 'new', 'rc': 0, 'wall_s': 51.1}]},
        'carried_over': {'sections': ['rollout'], 'origins': {'rollout': {'started': '2026-12-02 03:29 UTC'}}}}
    figure = canary.rollout_change_1(previous)
    assert figure == {'wall_s': 32.0, 'runs': 2, 'measured': '2026-12-02 03:29 UTC',
                      'key': "rollout.runs[scenario='change on 1 of 1', playbook='new'].wall_s"}
    del previous['carried_over']
    assert canary.rollout_change_1(previous)['measured'] == '2026-12-04 10:00 UTC'
    assert canary.rollout_change_1({'started': 'x'}) is None


def test_module_defaults_are_the_modules_own(canary):
    defaults = canary.module_defaults()
    assert (defaults['concurrency'], defaults['rounds'], defaults['max_tokens']) == ([1, 4, 8], 3, 32)
    assert defaults['answers'] == 'compare' and len(defaults['prompts']) == 4
    assert defaults['thresholds'] == {'tpot': 1.25, 'ttft': 1.5, 'throughput': 0.8, 'errors': 0.0}
    assert defaults['floors'] == {'tpot': 2.0, 'ttft': 20.0}


def test_the_page_section_and_its_verdict(canary):
    runs = []
    for trial in (1, 2):
        runs += [run('first', 'pass', 'pass', trial),
                 run('good_recorded', 'pass', 'pass', trial, wall=17.0 + trial,
                     ratios={'ttft@1': 1.02, 'tpot@8': 1.003, 'throughput@8': 0.998}),
                 run('answers_declared', 'pass', 'pass', trial),
                 run('decode_1_5x', 'stop', 'stop', trial, ['tpot@1', 'tpot@4'], 25.0 + trial),
                 run('answers_changed', 'stop', 'stop', trial, ['answers'])]
    lines = canary.render_canary(results(runs))
    text = '\n'.join(lines)
    assert lines[0] == '## Canary analysis: bad canaries stopped, good ones passed (issue 26)'
    assert '`SGLANG_STANDIN_TOKEN_SECONDS` **0.02** (50 tokens/s per stream' in text
    assert 'concurrency [1, 4, 8], 3 rounds, max_tokens 32, the 4 built-in prompts' in text
    assert '| decode 1.5x slower | `decode_slowdown=1.5` | stop | 2 / 2 | tpot@1 (2), tpot@4 (2) | 26.5 / 27.0 s |' in lines
    assert ('| first analysis of a good server (no baseline; records the yardstick) | - | pass | 0 / 2 | - | '
            '17.4 / 17.4 s |') in lines
    assert ('**Bad canaries stopped: 4 / 4 trials (goal all: met). Good canaries falsely stopped: 0 / 4 trials '
            '(goal none: met).**') in lines
    assert ('**The analysis adds 18.5 s to the canary** (median wall of the 2 passing analyses of a good canary '
            'against its recorded baseline') in text
    assert ("The good canaries' margin: their worst ratio to the baseline over every level and trial, ttft 1.02x "
            "(at most 1.5x), tpot 1.00x (at most 1.25x), throughput 1.00x (at least 0.8x).") in text
    assert 'a change on 1 host takes 30.0 s' in text and 'the analysis is 0.62x of it' in text
    notes = canary.canary_notes(results(runs))
    assert notes[0] == ('Target (issue 26) every bad canary stopped: met (4 of 4 trials; decode_1_5x 2/2; '
                        'answers_changed 2/2).')
    assert notes[1] == ('Target (issue 26) no good canary stopped: met (0 of 4 trials stopped; good_recorded 0/2; '
                        'answers_declared 0/2).')
    assert notes[2] == ('The canary analysis adds 18.5 s to the canary (defaults, stand-in decoding 0.02 s per token), '
                        '0.62x today\'s 1-host change (30.0 s).')


def test_a_missed_goal_and_no_verdict_are_said(canary):
    runs = [run('good_live', 'stop', 'pass', named=['ttft@1']), run('decode_2x', 'pass', 'stop'),
            run('errors_5pct', 'error', 'stop', wall=None)]
    text = '\n'.join(canary.render_canary(results(runs, rollout=None)))
    assert ('**Bad canaries stopped: 0 / 2 trials (goal all: **missed**). Good canaries falsely stopped: 1 / 1 '
            'trials (goal none: **missed**).**') in text
    assert 'The seconds the analysis adds: not measured' in text
    assert 'No verdict (the module failed otherwise): trial 1 errors_5pct: boom.' in text
    notes = canary.canary_notes(results(runs, rollout=None))
    assert notes[0].startswith('Target (issue 26) every bad canary stopped: **missed** (0 of 2 trials;')
    assert notes[1].startswith('Target (issue 26) no good canary stopped: **missed** (1 of 1 trials stopped;')
    assert notes[2] == '**1 canary analysis ended without a verdict** (the module failed otherwise); see the section.'


def test_the_canary_section_and_its_option(cli):
    assert cli.SECTIONS[0] == 'canary'   # no fleet: it runs before the fleet sections
    assert cli.build_parser().parse_args(['--only', 'canary']).only == ['canary']
    assert cli.build_parser().parse_args(['--canary-trials', '2']).canary_trials == 2
    assert cli.build_parser().parse_args([]).canary_trials is None
