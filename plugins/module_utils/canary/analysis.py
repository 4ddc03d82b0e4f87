# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Canary analysis: how a new configuration serves, judged against a baseline. Pure, no I/O.

The module (llmops.sglang.sglang_canary) sends a bounded streamed load straight to the new instance and, when there is
one, to a baseline instance on the old configuration in the same window (rounds alternate); canary_adapters.py does
the requests and hands each request's sample here. A sample is a dict: ``ok`` (a whole answer), ``error`` (why not),
``ttft`` (seconds to the first generated text), ``tpot`` (seconds per output token after the first), ``tokens``
(output tokens, usage.completion_tokens), ``start`` and ``end`` (monotonic seconds), ``text`` and ``reasoning`` (the
answer's content and reasoning content, for the answers).

The figures, per concurrency level and round: the median time to first token and the median time per output token of
the round's requests (milliseconds), and the round's throughput (output tokens per second of the round's wall time).
A figure fails only when all three hold:

- its median over the rounds is past the threshold, as a ratio to the baseline's median (latency at most
  ``threshold`` times, throughput at least ``threshold`` times);
- the difference is not noise: every canary round is worse than every baseline round (a one-sided rank test, the
  Mann-Whitney U at 0: with 3 rounds against 3, p = 1/20 = 0.05; the report prints p);
- for latency, the medians differ by more than an absolute floor (milliseconds), so sub-millisecond jitter of an
  idle server cannot fail a canary by ratio alone.

Errors fail on their own (default: none allowed), with no baseline. The answers: each prompt once at concurrency 1,
``temperature: 0``, must equal the last verified answers (or the live baseline's) unless the operator declares that
this deploy changes them (``answers: changed``); what a prompt declares (``expect`` substrings, ``reasoning``) is
always checked.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import math

FIGURES = ('ttft', 'tpot', 'throughput')
LOWER_IS_BETTER = {'ttft': True, 'tpot': True, 'throughput': False}
FIGURE_NAMES = {'ttft': 'time to first token', 'tpot': 'time per output token', 'throughput': 'throughput'}
UNITS = {'ttft': 'ms', 'tpot': 'ms', 'throughput': 'tok/s'}
# An operator's defaults: inter-token latency at most 1.25x, time to first token 1.5x (a prefill is noisier), throughput
# at least 0.8x, no failed request. Floors in ms below which a latency difference is not judged.
DEFAULT_THRESHOLDS = {'tpot': 1.25, 'ttft': 1.5, 'throughput': 0.8, 'errors': 0.0}
DEFAULT_FLOORS = {'tpot': 2.0, 'ttft': 20.0}
ANSWER_MODES = ('compare', 'changed', 'off')
RECORD_VERSION = 1
# Four short prompts whose greedy answers a model change moves: a fact, arithmetic, code, a format.
DEFAULT_PROMPTS = [
    {'prompt': 'What is the capital of France? Answer in one word.'},
    {'prompt': 'What is 17 times 23? Answer with the number only.'},
    {'prompt': 'Write a Python function that returns the square of its argument.'},
    {'prompt': 'List three primary colors as a JSON array of strings.'},
]


def median(values):
    values = sorted(values)
    if not values:
        return None
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0


def prompt_key(prompt, max_tokens):
    """What identifies a golden answer: the prompt's text and the answer's length limit."""
    return hashlib.sha256(json.dumps([prompt, max_tokens]).encode('utf-8')).hexdigest()[:16]


def settings_key(concurrency, max_tokens, prompts):
    """Figures are comparable only under the same load: levels, answer length and prompts."""
    return hashlib.sha256(json.dumps([sorted(concurrency), max_tokens, [p['prompt'] for p in prompts]],
                                     sort_keys=True).encode('utf-8')).hexdigest()[:16]


def check_options(prompts, concurrency, rounds, max_tokens, thresholds, floors, answers):
    """Problems with the options, each naming the option and what was expected (empty: fine)."""
    problems = []
    if not prompts:
        problems.append('prompts: expected at least one prompt')
    for index, prompt in enumerate(prompts or []):
        if not isinstance(prompt, dict) or not isinstance(prompt.get('prompt'), str) or not prompt['prompt'].strip():
            problems.append('prompts[%d]: expected a dict with a non-empty prompt string' % index)
            continue
        unknown = sorted(set(prompt) - {'prompt', 'expect', 'reasoning'})
        if unknown:
            problems.append('prompts[%d]: unknown keys %s (expected prompt, expect, reasoning)' % (index, ', '.join(unknown)))
        expect = prompt.get('expect', [])
        if not isinstance(expect, list) or not all(isinstance(item, str) and item for item in expect):
            problems.append('prompts[%d].expect: expected a list of non-empty strings' % index)
        if not isinstance(prompt.get('reasoning', False), bool):
            problems.append('prompts[%d].reasoning: expected true or false' % index)
    if not concurrency or any(not isinstance(level, int) or isinstance(level, bool) or level < 1 for level in concurrency):
        problems.append('concurrency: expected a list of integers >= 1, got %r' % (concurrency,))
    elif len(set(concurrency)) != len(concurrency):
        problems.append('concurrency: expected each level once, got %r' % (concurrency,))
    if not isinstance(rounds, int) or rounds < 2:
        problems.append('rounds: expected an integer >= 2 (a rank test needs repeated rounds), got %r' % (rounds,))
    if not isinstance(max_tokens, int) or max_tokens < 2:
        problems.append('max_tokens: expected an integer >= 2 (time per output token needs two tokens), got %r' % (max_tokens,))
    for name, value in sorted((thresholds or {}).items()):
        if name not in DEFAULT_THRESHOLDS:
            problems.append('thresholds.%s: unknown (expected %s)' % (name, ', '.join(sorted(DEFAULT_THRESHOLDS))))
        elif not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            problems.append('thresholds.%s: expected a number >= 0, got %r' % (name, value))
        elif name in ('tpot', 'ttft') and value < 1:
            problems.append('thresholds.%s: expected a ratio >= 1 (the canary at most this many times the baseline), got %r'
                            % (name, value))
        elif name == 'throughput' and value > 1:
            problems.append('thresholds.throughput: expected a ratio <= 1 (the canary at least this fraction of the baseline), '
                            'got %r' % (value,))
        elif name == 'errors' and value > 1:
            problems.append('thresholds.errors: expected a fraction of the requests from 0 to 1, got %r' % (value,))
    for name, value in sorted((floors or {}).items()):
        if name not in DEFAULT_FLOORS:
            problems.append('floors: unknown key %s (expected %s)' % (name, ', '.join(sorted(DEFAULT_FLOORS))))
        elif not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            problems.append('floors.%s: expected milliseconds >= 0, got %r' % (name, value))
    if answers not in ANSWER_MODES:
        problems.append('answers: expected one of %s, got %r' % (', '.join(ANSWER_MODES), answers))
    return problems


def round_figures(samples):
    """One round of one level: the medians of its whole answers, its throughput, and its errors."""
    good = [sample for sample in samples if sample.get('ok')]
    figures = {'requests': len(samples), 'errors': len(samples) - len(good), 'tokens': sum(s.get('tokens') or 0 for s in good)}
    ttft = [sample['ttft'] * 1000.0 for sample in good if sample.get('ttft') is not None]
    tpot = [sample['tpot'] * 1000.0 for sample in good if sample.get('tpot') is not None]
    figures['ttft'] = median(ttft)
    figures['tpot'] = median(tpot)
    if good:
        wall = max(s['end'] for s in samples) - min(s['start'] for s in samples)
        figures['throughput'] = figures['tokens'] / wall if wall > 0 else None
    else:
        figures['throughput'] = None
    return figures


def rounds_by_level(rounds):
    """[{level: round_figures}] -> {level: {figure: [value per round]}} (rounds without a value left out)."""
    table = {}
    for one in rounds:
        for level, figures in one.items():
            per = table.setdefault(str(level), dict((name, []) for name in FIGURES))
            for name in FIGURES:
                if figures.get(name) is not None:
                    per[name].append(round(float(figures[name]), 4))
    return table


def rank_p(canary_n, baseline_n):
    """The one-sided p of every canary round worse than every baseline round under no difference: 1 / C(n+m, n)."""
    if not canary_n or not baseline_n:
        return 1.0
    ways = math.factorial(canary_n + baseline_n) // (math.factorial(canary_n) * math.factorial(baseline_n))
    return 1.0 / ways


def judge_figure(name, canary, baseline, threshold, floor):
    """One figure at one level: {figure, canary, baseline, ratio, threshold, separated, p, failed}."""
    row = {'figure': name, 'canary': median(canary), 'baseline': median(baseline), 'threshold': threshold,
           'ratio': None, 'separated': False, 'p': None, 'failed': False, 'rounds': [len(canary), len(baseline)]}
    if row['canary'] is None or not row['baseline']:
        return row
    row['ratio'] = round(row['canary'] / row['baseline'], 3)
    lower = LOWER_IS_BETTER[name]
    row['separated'] = (min(canary) > max(baseline)) if lower else (max(canary) < min(baseline))
    row['p'] = round(rank_p(len(canary), len(baseline)), 4)
    beyond = row['ratio'] > threshold if lower else row['ratio'] < threshold
    big_enough = abs(row['canary'] - row['baseline']) > floor if lower else True
    row['failed'] = bool(beyond and row['separated'] and big_enough)
    return row


def judge_figures(canary, baseline, thresholds, floors):
    """canary, baseline: rounds_by_level() tables (baseline None: nothing to compare, every row unjudged). The rows,
    level by level, figure by figure."""
    rows = []
    for level in sorted(canary, key=int):
        theirs = (baseline or {}).get(level) or {}
        for name in FIGURES:
            row = judge_figure(name, canary[level][name], theirs.get(name) or [], thresholds[name], floors.get(name, 0.0))
            row['level'] = int(level)
            rows.append(row)
    return rows


def answer_of(sample):
    """What a golden answer is: the reasoning and the content, as a user reads them."""
    reasoning = sample.get('reasoning') or ''
    return (reasoning + '\n</think>\n' if reasoning else '') + (sample.get('text') or '')


def judge_answers(answers, reference, prompts, max_tokens, mode):
    """answers: {key: [sample per round]} of this canary (whole answers only); reference: {key: answer_of() text}
    (the last verified, or the live baseline's), or None. The problems, each naming the prompt, and the answers to
    record."""
    problems, record = [], {}
    for prompt in prompts:
        key = prompt_key(prompt['prompt'], max_tokens)
        samples = answers.get(key) or []
        label = _short(prompt['prompt'], 40)
        if not samples:
            problems.append('prompt "%s": no answer' % label)
            continue
        texts = [answer_of(sample) for sample in samples]
        record[key] = texts[0]
        content = samples[0].get('text') or ''
        for expected in prompt.get('expect') or []:
            if expected not in content:
                problems.append('prompt "%s": the answer lacks "%s" (declared in expect): "%s"' % (label, expected, _short(content, 60)))
        if prompt.get('reasoning') and not samples[0].get('reasoning'):
            problems.append('prompt "%s": no reasoning section (declared reasoning: true)' % label)
        if mode != 'compare' or not reference or key not in reference:
            continue
        if len(set(texts)) > 1:
            problems.append('prompt "%s": the answers differ between rounds at temperature 0, so they cannot be compared' % label)
        elif reference[key] != texts[0]:
            problems.append('prompt "%s": the answer changed from "%s" to "%s" (if this deploy is meant to change answers, '
                            'set answers: changed)' % (label, _short(reference[key], 60), _short(texts[0], 60)))
    return problems, record


def _short(text, limit):
    text = ' '.join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + '...'


def usable_baseline(record, key):
    """The recorded baseline's figures when they were measured under the same load (settings_key), else None."""
    if not isinstance(record, dict) or record.get('version') != RECORD_VERSION or record.get('settings') != key:
        return None
    figures = record.get('figures')
    return figures if isinstance(figures, dict) and figures else None


def new_record(key, figures, answers, when):
    return {'version': RECORD_VERSION, 'settings': key, 'recorded': when, 'figures': figures, 'answers': answers}


def verdict(rows, errors, requests, error_threshold, answer_problems, baseline_kind):
    """The analysis' verdict: {passed, failures: [text], baseline}. errors/requests count the canary's load."""
    failures = []
    rate = float(errors) / requests if requests else 0.0
    if requests == 0:
        failures.append('no request of the load was sent')
    elif rate > error_threshold:
        failures.append('errors %d of %d requests (%.1f%%, at most %.1f%%)' % (errors, requests, rate * 100, error_threshold * 100))
    for row in rows:
        if row['failed']:
            failures.append('%s at concurrency %d %.2fx the baseline (%s %s against %s %s; %s %sx)' % (
                FIGURE_NAMES[row['figure']], row['level'], row['ratio'], _fmt(row['canary']), UNITS[row['figure']],
                _fmt(row['baseline']), UNITS[row['figure']], 'at most' if LOWER_IS_BETTER[row['figure']] else 'at least', row['threshold']))
    failures.extend(answer_problems)
    return {'passed': not failures, 'failures': failures, 'baseline': baseline_kind, 'error_rate': round(rate, 4)}


def _fmt(value):
    if value is None:
        return '-'
    return '%.1f' % value if value < 100 else '%.0f' % value


def _rank_cell(row):
    if row['baseline'] is None:
        return '-'   # nothing to rank against (the first analysis, errors and answers judged alone)
    return ('p=%.2f' % row['p']) if row['separated'] and row['p'] is not None else 'overlap'


def report_lines(rows, result, errors, requests, answers_checked, baseline_kind, short=False):
    """The table an operator reads: canary against baseline, figure by figure, with the ratio and the threshold."""
    head = 'canary analysis: %s (baseline: %s; %d requests, %d errors; %d answers checked)' % (
        'passed' if result['passed'] else 'FAILED', baseline_kind, requests, errors, answers_checked)
    lines = [head]
    shown = [row for row in rows if row['failed'] or not short]
    if shown:
        columns = ('conc', 'figure', 'canary', 'baseline', 'ratio', 'threshold', 'rank test', 'verdict')
        lines.append('%-5s %-22s %10s %10s %7s %9s %-9s %s' % columns)
        for row in shown:
            lines.append('%-5d %-22s %10s %10s %7s %9s %-9s %s' % (
                row['level'], '%s (%s)' % (row['figure'], UNITS[row['figure']]), _fmt(row['canary']),
                _fmt(row['baseline']), '-' if row['ratio'] is None else '%.2fx' % row['ratio'],
                ('<=' if LOWER_IS_BETTER[row['figure']] else '>=') + '%sx' % row['threshold'],
                _rank_cell(row),
                'FAIL' if row['failed'] else 'ok'))
    for failure in result['failures']:
        lines.append('- ' + failure)
    return lines


def failure_sentence(result):
    """The failed analysis in one sentence, for the host's failure and the fleet report."""
    return 'the canary serves worse than it may (baseline: %s): %s.' % (result['baseline'], '; '.join(result['failures']))
