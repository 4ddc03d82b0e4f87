# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The canary analysis' loop: rounds of golden answers and load levels against the canary, and in the same window
against a live baseline when there is one, then one judgement (analysis.py). The I/O comes in as adapters
(canary_adapters.Endpoint, run_level, the record's reader): the unit tests drive this loop with fakes of them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.canary import analysis
from ansible_collections.llmops.sglang.plugins.module_utils.canary.stream import metric_total

GENERATION_TOKENS = 'sglang:generation_tokens_total'  # 0.5.23 srt/observability/metrics_collector.py:1861 (stand-in metrics.py:44)


def requests_at(level, prompts):
    """Two waves of the level, and every prompt at least once."""
    return max(2 * level, len(prompts))


def _golden(endpoint, run_level, prompts, opts, answers, tally):
    for prompt, one in run_level(endpoint, prompts, opts['model'], 1, len(prompts), opts['max_tokens'], False):
        if tally is not None:
            tally['requests'] += 1
            tally['errors'] += 0 if one['ok'] else 1
            tally['tokens'] += one['tokens']
            tally['examples'].extend([one['error']] if not one['ok'] and len(tally['examples']) < 3 else [])
        if one['ok']:
            answers.setdefault(analysis.prompt_key(prompt, opts['max_tokens']), []).append(one)


def _levels(endpoint, run_level, prompts, opts, tally):
    figures = {}
    for level in opts['concurrency']:
        samples = [one for _prompt, one in run_level(endpoint, prompts, opts['model'], level, requests_at(level, prompts),
                                                     opts['max_tokens'], True)]
        figures[level] = analysis.round_figures(samples)
        if tally is not None:
            tally['requests'] += len(samples)
            tally['errors'] += figures[level]['errors']
            tally['tokens'] += figures[level]['tokens']
            tally['examples'].extend(s['error'] for s in samples if not s['ok'] and len(tally['examples']) < 3)
    return figures


def foreign_tokens(before, after, ours):
    """Tokens the baseline generated during the window for other clients, or None when its /metrics cannot say."""
    totals = [metric_total(text, GENERATION_TOKENS) for text in (before, after)]
    if None in totals:
        return None
    return max(0, int(round(totals[1] - totals[0] - ours)))


def live_problem(baseline, tally, held, before, after):
    """Why the live baseline's figures are no yardstick (' (...)', appended to the baseline's name), or ''."""
    if baseline is None:
        return ''
    if tally['errors']:
        return ' (the live baseline %s failed %d of %d requests, first: %s)' % (
            baseline.url, tally['errors'], tally['requests'], (tally['examples'] or ['?'])[0])
    foreign = foreign_tokens(before, after, tally['tokens'])
    # one foreign request's worth: a real client's answer is longer than a few tokens; rounding of the counters is not
    if foreign is not None and foreign > max(4, tally['tokens'] // 100):
        return (' (the live baseline %s generated %d tokens for other clients during the window%s: its figures were '
                'measured under another load)' % (baseline.url, foreign,
                                                  ', %d of their requests still in flight when it began' % held if held else ''))
    return ''


def analyse(opts, canary, baseline, run_level, recorded, now):
    """opts: the module's options (checked); canary/baseline: endpoints (baseline None: none live); recorded: the
    record read from opts' baseline file, or None. Returns the result: passed, failures, rows, report, record."""
    prompts = [prompt['prompt'] for prompt in opts['prompts']]
    key = analysis.settings_key(opts['concurrency'], opts['max_tokens'], opts['prompts'])
    thresholds = dict(analysis.DEFAULT_THRESHOLDS, **(opts.get('thresholds') or {}))
    floors = dict(analysis.DEFAULT_FLOORS, **(opts.get('floors') or {}))
    tally = {'requests': 0, 'errors': 0, 'tokens': 0, 'examples': []}
    live_tally = {'requests': 0, 'errors': 0, 'tokens': 0, 'examples': []}
    answers, live_answers, canary_rounds, live_rounds = {}, {}, [], []
    # The baseline's requests of other clients in flight end first (behind routers the role took it out of them), and
    # its /metrics before and after show whether anyone else was served during the window (foreign_tokens).
    held = baseline.settle() if baseline is not None else None
    live_before = baseline.metrics() if baseline is not None else None
    before = canary.metrics()
    for index in range(opts['rounds']):
        _golden(canary, run_level, prompts, opts, answers, tally)
        if baseline is not None and index == 0:
            _golden(baseline, run_level, prompts, opts, live_answers, live_tally)
        canary_rounds.append(_levels(canary, run_level, prompts, opts, tally))
        if baseline is not None:
            live_rounds.append(_levels(baseline, run_level, prompts, opts, live_tally))
    after = canary.metrics()
    live_after = baseline.metrics() if baseline is not None else None
    figures = analysis.rounds_by_level(canary_rounds)
    saved = analysis.usable_baseline(recorded, key)
    # A live baseline that failed a request, or served other clients during the window, is no yardstick (its figures
    # would flatter or fail the canary): the recorded figures stand in, and the report says why.
    note = live_problem(baseline, live_tally, held, live_before, live_after)
    live_failed = bool(note)
    if baseline is not None and not live_failed:
        unchecked = foreign_tokens(live_before, live_after, live_tally['tokens']) is None
        kind = 'live, %s%s' % (baseline.url, ' (its load by other clients unknown: no /metrics)' if unchecked else '')
        reference_figures = analysis.rounds_by_level(live_rounds)
    elif saved:
        kind, reference_figures = 'recorded %s%s' % (recorded.get('recorded', '?'), note), saved
    else:
        kind = 'none (%s)%s' % ('the recorded figures were measured under other settings' if recorded
                                else 'the first analysis of this instance', note)
        reference_figures = None
    reference_answers = (recorded or {}).get('answers') or None
    if reference_answers is None and live_answers and not live_failed:
        reference_answers = dict((k, analysis.answer_of(v[0])) for k, v in live_answers.items())
    rows = analysis.judge_figures(figures, reference_figures, thresholds, floors)
    problems, record_answers = analysis.judge_answers(answers, reference_answers, opts['prompts'], opts['max_tokens'],
                                                      opts['answers'])
    result = analysis.verdict(rows, tally['errors'], tally['requests'], thresholds['errors'], problems, kind)
    if tally['examples'] and tally['errors']:
        result['failures'] = [f + (' - first: %s' % '; '.join(tally['examples']) if f.startswith('errors ') else '')
                              for f in result['failures']]
    checked = len(record_answers)
    result.update(rows=rows, figures=figures, requests=tally['requests'], errors=tally['errors'],
                  answers_checked=checked, settings=key,
                  report=analysis.report_lines(rows, result, tally['errors'], tally['requests'], checked, kind),
                  record=analysis.new_record(key, figures, record_answers, now))
    server = [metric_total(text, GENERATION_TOKENS) for text in (before, after)]
    result['server_generation_tokens'] = (server[1] - server[0]) if None not in server else None
    result['client_tokens'] = tally['tokens']
    return result
