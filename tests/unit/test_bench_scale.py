# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/scale.py (issue 27, toward 1,000 hosts): the breakdown of a run's wall time, the fits, the model and the
page's section, and what the bench_timing callback records. Pure: no fleet, no ansible run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTROLLER_ONLY = frozenset(('set_fact', 'include_role', 'assert', 'debug'))


def task(name, action, start, end, sizes=()):
    return {'name': name, 'action': action, 'play': 'p', 'start': start, 'end': end, 'results': 3, 'sizes': list(sizes)}


def test_the_breakdown_splits_the_wall_time_by_where_tasks_run(scale):
    timing = {'tasks': [task('observe', 'sglang_observe', 2.0, 6.0, sizes=(1000, 3000, 2000)),
                        task('decide', 'set_fact', 6.0, 7.5), task('validate', 'include_role', 1.0, 2.0),
                        task('never answered', 'command', 8.0, None)]}
    out = scale.breakdown(timing, 12.0, CONTROLLER_ONLY)
    assert (out['host_tasks_s'], out['controller_tasks_s'], out['outside_tasks_s']) == (4.0, 2.5, 5.5)
    assert out['observe_bytes'] == 2000 and out['tasks'] == 4
    assert [t['name'] for t in out['top']][:2] == ['observe', 'decide']
    # a run whose callback wrote nothing: everything is outside
    assert scale.breakdown({}, 3.0, CONTROLLER_ONLY)['outside_tasks_s'] == 3.0


def test_the_fits_recover_known_lines_and_curves(scale):
    line = [(n, 2.0 + 0.5 * n) for n in (6, 12, 24, 48)]
    fit = scale.linear_fit(line)
    assert fit['intercept'] == pytest.approx(2.0) and fit['slope'] == pytest.approx(0.5) and fit['rss'] < 1e-9
    curve = [(n, 1.0 + 0.2 * n + 0.01 * n * n) for n in (6, 12, 24, 48)]
    quad = scale.quadratic_fit(curve)
    assert (quad['a'], quad['b'], quad['c']) == (pytest.approx(1.0), pytest.approx(0.2), pytest.approx(0.01))
    assert scale.linear_fit(curve)['rss'] > 1.0       # a line does not fit a curve: the page shows both residuals
    assert scale.linear_fit([(6, 1.0), (6, 2.0)]) is None and scale.quadratic_fit(line[:2]) is None
    assert scale.projection({'linear': fit, 'quadratic': quad}, 1000) == {
        'linear': pytest.approx(502.0), 'quadratic': pytest.approx(1.0 + 200.0 + 10000.0)}


def runs(walls):
    out = []
    for size, wall in walls:
        out.append({'hosts': size, 'rc': 0, 'wall_s': wall, 'controller_cpu_s': wall * 0.8, 'host_tasks_s': wall * 0.5,
                    'controller_tasks_s': wall * 0.2, 'outside_tasks_s': wall * 0.3, 'tasks_per_host': 12,
                    'observe_bytes': 4096, 'loadavg_1m': 2.0, 'trial': 0,
                    'top': [{'name': 'Observe', 'action': 'sglang_observe', 'span_s': wall / 2, 'results': size}]})
    return out


def test_summary_model_and_page(scale):
    measured = runs([(6, 6.0), (12, 9.0), (24, 15.0), (48, 27.0), (48, 29.0), (6, 7.0)])
    measured.append(dict(measured[0], hosts=12, rc=2, wall_s=999.0))     # a failed run is not a point
    summary = scale.summarize(measured, [6, 12, 24, 48])
    assert [row['hosts'] for row in summary['rows']] == [6, 12, 24, 48]
    assert summary['rows'][3]['wall_s'] == 28.0 and summary['rows'][1]['trials'] == 1
    model = scale.model(summary, 25, 2)
    assert model['rounds_per_task'] == 40 and model['observe_mib'] == pytest.approx(4096 * 1000 / 1048576.0)
    assert model['at']['wall_s']['linear'] == pytest.approx(
        summary['fits']['wall_s']['linear']['intercept'] + summary['fits']['wall_s']['linear']['slope'] * 1000)
    assert model['cpu_bound_wall_s'] == pytest.approx(model['at']['controller_cpu_s']['linear'] / 2)
    result = {'sizes': [6, 12, 24, 48], 'trials': 2, 'forks': 25, 'cores': 2, 'runs': measured,
              'first_deploy': {'wall_s': 300.0, 'rc': 0}, 'summary': summary, 'model': model}
    page = '\n'.join(scale.render_scale(result))
    assert '## Toward 1,000 hosts' in page and '| 48 | 2 | 28.0 s |' in page and 'The model: 1000 hosts' in page
    assert 'Observe (`sglang_observe`, 48 results)' in page
    notes = scale.scale_notes(result)
    assert notes[0].startswith('Target (issue 27) the plan pass measured up to 48 hosts and a 1,000-host model: met')
    small = dict(result, summary=scale.summarize(runs([(6, 6.0), (12, 9.0)]), [6, 12]))
    small['model'] = scale.model(small['summary'], 25, 2)
    assert 'missed (largest size 12)' in scale.scale_notes(small)[0]
    assert 'not measured' in scale.scale_notes({})[0]
    # a fit over noisy points that goes negative is said to be no figure, not printed as one
    falling = dict(result, summary=scale.summarize(runs([(6, 30.0), (12, 20.0), (24, 12.0), (48, 9.0)]), [6, 12, 24, 48]))
    falling['model'] = scale.model(falling['summary'], 25, 2)
    assert 'not meaningful' in scale.scale_notes(falling)[0] and 'not meaningful' in '\n'.join(scale.render_scale(falling))


def load_callback():
    path = os.path.join(ROOT, 'bench', 'callback_plugins', 'bench_timing.py')
    spec = importlib.util.spec_from_file_location('bench_timing', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Named(object):
    def __init__(self, name, action='x', uuid='u'):
        self.name, self.action, self._uuid = name, action, uuid

    def get_name(self):
        return self.name


class Result(object):
    def __init__(self, task_, host, data):
        self._task, self._host, self._result = task_, host, data


def test_the_timing_callback_records_spans_results_and_sizes(tmp_path, monkeypatch):
    out = tmp_path / 'timing.json'
    monkeypatch.setenv('BENCH_TIMING_FILE', str(out))
    monkeypatch.setenv('BENCH_TIMING_SIZES', 'sglang_observe')
    callback = load_callback().CallbackModule()
    callback.v2_playbook_on_play_start(Named('plan'))
    observe = Named('Observe', 'llmops.sglang.sglang_observe', 'u1')
    callback.v2_playbook_on_task_start(observe, False)
    callback.v2_runner_on_ok(Result(observe, Named('h1'), {'instances': {'a': 1}}))
    callback.v2_runner_on_skipped(Result(observe, Named('h2'), {'skipped': True}))
    decide = Named('Decide', 'ansible.builtin.set_fact', 'u2')
    callback.v2_playbook_on_task_start(decide, False)
    callback.v2_playbook_on_stats(None)
    written = json.loads(out.read_text())
    first, second = written['tasks']
    assert (first['action'], first['play'], first['results']) == ('sglang_observe', 'plan', 2)
    assert first['sizes'] == [len(json.dumps({'instances': {'a': 1}})), len(json.dumps({'skipped': True}))]
    assert first['end'] >= first['start'] and second['end'] is None and second['sizes'] == []
