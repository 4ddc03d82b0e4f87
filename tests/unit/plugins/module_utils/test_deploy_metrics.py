# -*- coding: utf-8 -*-
"""Deployment metrics textfile: read back with prometheus-client's real text-format parser."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.llmops.sglang.plugins.module_utils.monitoring import deploy_metrics as dm
from ansible_collections.llmops.sglang.plugins.module_utils.monitoring.deploy_metrics import (
    file_name, marker_deadline_seconds, phase_durations, render, render_marker)

UNIT = 'sglang-k26.service'
PHASES = [{'name': 'init', 'at': -4.2, 'run': 0}, {'name': 'weights', 'at': -2.0, 'run': 0},
          {'name': 'kv_cache', 'at': 28.1, 'run': 0}, {'name': 'cuda_graph', 'at': 28.6, 'run': 0},
          {'name': 'http_up', 'at': 34.6, 'run': 0}, {'name': 'warmup', 'at': 34.6, 'run': 0},
          {'name': 'ready', 'at': 35.1, 'run': 0}]
GPUS = [{'index': i, 'memory_used_mib': 1024, 'memory_total_mib': 2048} for i in range(8)]
PACKAGES = {'sglang': '0.5.23', 'compressed-tensors': '0.18.0', 'torch': None}
READY = {'ready': True, 'reason': None, 'elapsed': 35.2, 'phases': PHASES, 'gpus': GPUS, 'restarts': 0,
         'unit': {'invocation_id': 'abc123'}, 'packages': PACKAGES, 'rolled_back': False, 'changed_config': True}
FAILED = {'ready': False, 'reason': 'crash_loop', 'elapsed': 20.0, 'restarts': 1, 'gpus': [],
          'phases': [{'name': 'init', 'at': 0.5, 'run': 0}, {'name': 'weights', 'at': 1.0, 'run': 0},
                     {'name': 'init', 'at': 10.0, 'run': 1}, {'name': 'weights', 'at': 11.0, 'run': 1},
                     {'name': 'cuda_graph', 'at': 15.0, 'run': 1}],
          'unit': {'invocation_id': 'def456'}, 'packages': PACKAGES, 'rolled_back': True, 'changed_config': True}


def samples(text):
    """{(name, frozenset(labels)): value} and {family: type}, from prometheus-client's parser."""
    values, types = {}, {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            assert key not in values, key
            values[key] = sample.value
    return values, types


def one(values, name, **labels):
    labels.setdefault('unit', UNIT)
    return values[(name, frozenset(labels.items()))]


def test_ready_deployment():
    values, types = samples(render(UNIT, READY, 1796000000.0, 'c0ffee'))
    assert set(types.values()) == {'gauge'}
    assert one(values, 'sglang_deploy_ready') == 1
    assert one(values, 'sglang_deploy_info', sglang_version='0.5.23', compressed_tensors_version='0.18.0',
               torch_version='unknown', config_checksum='c0ffee', invocation_id='abc123', reason='none') == 1
    assert one(values, 'sglang_deploy_time_to_ready_seconds') == pytest.approx(39.3)
    assert one(values, 'sglang_deploy_phase_seconds', phase='weights') == pytest.approx(30.1)
    assert one(values, 'sglang_deploy_phase_seconds', phase='http_up') == 0
    assert ('sglang_deploy_phase_seconds', frozenset({('unit', UNIT), ('phase', 'ready')})) not in values
    assert one(values, 'sglang_deploy_restarts') == 0
    assert one(values, 'sglang_deploy_rolled_back') == 0
    assert one(values, 'sglang_deploy_config_changed') == 1
    assert one(values, 'sglang_deploy_timestamp_seconds') == 1796000000
    assert one(values, 'sglang_deploy_wait_seconds') == pytest.approx(35.2)
    assert one(values, 'sglang_deploy_gpus') == 8
    assert one(values, 'sglang_deploy_gpu_memory_used_bytes') == 8 * 1024 ** 3
    assert one(values, 'sglang_deploy_gpu_memory_total_bytes') == 16 * 1024 ** 3


def test_failed_deployment_says_why_and_where():
    values, _types = samples(render(UNIT, FAILED, 1796000000.0, 'c0ffee'))
    assert one(values, 'sglang_deploy_ready') == 0
    info = [dict(labels) for (name, labels) in values if name == 'sglang_deploy_info']
    assert [i['reason'] for i in info] == ['crash_loop'] and info[0]['invocation_id'] == 'def456'
    assert one(values, 'sglang_deploy_rolled_back') == 1
    assert one(values, 'sglang_deploy_restarts') == 1
    # only the last run's phases; the phase it failed in lasts until the wait ended
    assert one(values, 'sglang_deploy_phase_seconds', phase='init') == 1.0
    assert one(values, 'sglang_deploy_phase_seconds', phase='cuda_graph') == 5.0
    assert not [name for name, _l in values if name in ('sglang_deploy_time_to_ready_seconds', 'sglang_deploy_gpus')]


def test_failed_deployment_keeps_the_last_time_to_ready():
    before = render(UNIT, READY, 1000.0, 'c0ffee')
    values, _types = samples(render(UNIT, FAILED, 2000.0, 'beef', before))
    assert one(values, 'sglang_deploy_time_to_ready_seconds') == pytest.approx(39.3)
    assert one(values, 'sglang_deploy_ready') == 0


def test_a_wait_that_never_ran_still_renders():
    values, _types = samples(render(UNIT, {'failed': True, 'msg': 'boom'}, 1.0))
    assert one(values, 'sglang_deploy_ready') == 0
    assert [dict(labels)['reason'] for name, labels in values if name == 'sglang_deploy_info'] == ['error']


def test_label_values_are_escaped():
    odd = dict(READY, packages={'sglang': 'a"b\\c\nd'})
    values, _types = samples(render(UNIT, odd, 1.0))
    (info,) = [dict(labels) for name, labels in values if name == 'sglang_deploy_info']
    assert info['sglang_version'] == 'a"b\\c\nd'


def test_same_run_same_verdict_keeps_the_file():
    first = render(UNIT, READY, 1000.0, 'c0ffee')
    rerun = dict(READY, elapsed=0.3, phases=PHASES[:1] + [{'name': 'ready', 'at': 0.2}], changed_config=False)
    assert render(UNIT, rerun, 2000.0, 'c0ffee', first) is first
    # a new run, another configuration, another verdict or other versions: a new file
    assert render(UNIT, dict(rerun, unit={'invocation_id': 'zzz'}), 2000.0, 'c0ffee', first) != first
    assert render(UNIT, rerun, 2000.0, 'beef', first) != first
    assert render(UNIT, dict(rerun, ready=False, reason='stalled'), 2000.0, 'c0ffee', first) != first
    assert render(UNIT, dict(rerun, packages=dict(PACKAGES, sglang='0.5.24')), 2000.0, 'c0ffee', first) != first
    # without an InvocationID nothing identifies the run: always rewritten
    no_id = dict(READY, unit={})
    assert render(UNIT, no_id, 2000.0, 'c0ffee', render(UNIT, no_id, 1000.0, 'c0ffee')) != render(UNIT, no_id, 1000.0, 'c0ffee')


def test_phase_durations_without_phases():
    assert phase_durations({}) == []


def test_file_name():
    assert file_name('sglang-k26.service') == 'sglang-k26.prom'
    assert file_name('sglang-k26-ddtree') == 'sglang-k26-ddtree.prom'
    with pytest.raises(ValueError):
        file_name('../etc/passwd')


def test_marker_follows_the_last_verdict_and_the_next_verdict_drops_it():
    verdict = render(UNIT, READY, 1000.0, 'c0ffee')
    marked = render_marker(UNIT, 5000.7, 2400, verdict)
    values, types = samples(marked)
    assert one(values, 'sglang_deploy_in_progress', reason='restart') == 1
    assert one(values, 'sglang_deploy_started_timestamp_seconds') == 5000
    assert one(values, 'sglang_deploy_deadline_timestamp_seconds') == 7400
    assert types['sglang_deploy_in_progress'] == 'gauge'
    # the last verdict's series stay as they were while the deployment is under way
    assert one(values, 'sglang_deploy_ready') == 1 and one(values, 'sglang_deploy_timestamp_seconds') == 1000
    assert marked.startswith(verdict)
    # a rollback renews it (one marker, not two)
    renewed = render_marker(UNIT, 6000, 1200, marked, reason='rollback')
    values, _types = samples(renewed)
    assert one(values, 'sglang_deploy_in_progress', reason='rollback') == 1
    assert ('sglang_deploy_in_progress', frozenset({'unit': UNIT, 'reason': 'restart'}.items())) not in values
    assert one(values, 'sglang_deploy_deadline_timestamp_seconds') == 7200
    # the verdict: the marker is gone, also when the run and verdict are those of the file before it
    for outcome in (READY, FAILED):
        after = render(UNIT, outcome, 8000.0, 'c0ffee', renewed)
        assert 'in_progress' not in after and 'deadline' not in after and 'started_timestamp' not in after
        samples(after)
    assert render(UNIT, READY, 8000.0, 'c0ffee', renewed) == verdict


def test_marker_on_a_first_deployment_has_no_verdict_before_it():
    values, _types = samples(render_marker(UNIT, 100, 60))
    assert set(name for name, _labels in values) == {'sglang_deploy_in_progress', 'sglang_deploy_started_timestamp_seconds',
                                                     'sglang_deploy_deadline_timestamp_seconds'}


def test_marker_deadline_is_the_longest_the_role_can_take():
    assert marker_deadline_seconds(1800, 600) == 2400
    assert marker_deadline_seconds(1800, 600, 600) == 3000
    assert marker_deadline_seconds('120', '30', None) == 150
    for bad in ((0, 600), (1800, -1), (1800, 600, -5), ('x', 1)):
        with pytest.raises(ValueError):
            marker_deadline_seconds(*bad)


def test_marker_refuses_what_it_cannot_write():
    with pytest.raises(ValueError):
        render_marker(UNIT, 100, 0)
    with pytest.raises(ValueError):
        render_marker(UNIT, 100, 60, reason='maintenance')


def test_the_phase_file_names_the_phase_and_when_it_began():
    assert dm.phase_file_name('sglang-k26.service') == 'sglang-k26.phase.prom'
    text = dm.render_phase('sglang-k26.service', 'cuda_graph', 1764720000.7)
    assert text.splitlines() == [
        '# HELP sglang_deploy_phase_started_timestamp_seconds ' + dm.PHASE_METRIC[1],
        '# TYPE sglang_deploy_phase_started_timestamp_seconds gauge',
        'sglang_deploy_phase_started_timestamp_seconds{unit="sglang-k26.service",phase="cuda_graph"} 1764720000']
    family, = text_string_to_metric_families(text)  # Prometheus's own parser reads it
    assert family.samples[0].labels == {'unit': 'sglang-k26.service', 'phase': 'cuda_graph'}
    for bad in ('', None, 'Weights', 'a"b'):
        with pytest.raises(ValueError):
            dm.render_phase('sglang-k26.service', bad, 1.0)


def test_next_text_marks_records_and_removes():
    """sglang_deploy_metrics' one decision: the marker (deploying), the verdict (present), no file (absent)."""
    digests = {'unit': 'a' * 40, 'env': 'b' * 40, 'shim': 'any'}
    verdict = dm.next_text(UNIT, 'present', 1000.0, '', READY, digests)
    assert verdict == render(UNIT, READY, 1000.0, dm.config_checksum(digests))
    # the checksum the role computed in Jinja before: sha1 of the unit's digest then the environment's, 12 digits
    import hashlib
    assert dm.config_checksum(digests) == hashlib.sha1(('a' * 40 + 'b' * 40).encode()).hexdigest()[:12]
    assert dm.config_checksum(dict(digests, shim='other')) == dm.config_checksum(digests)
    marked = dm.next_text(UNIT, 'deploying', 5000.0, verdict, timeouts=(1800, 600, 300))
    assert marked == render_marker(UNIT, 5000.0, 2700, verdict, 'restart')
    assert dm.next_text(UNIT, 'deploying', 6000.0, marked, reason='rollback', timeouts=(1800, 600, 0)) == \
        render_marker(UNIT, 6000.0, 2400, marked, 'rollback')
    # the same run with the same verdict after its marker: the verdict's text as it was
    assert dm.next_text(UNIT, 'present', 9000.0, marked, READY, digests) == verdict
    assert dm.next_text(UNIT, 'absent', 9000.0, marked) is None


def test_next_text_refuses_what_it_cannot_decide():
    for state, outcome, timeouts in (('present', None, (0, 0, 0)), ('present', {}, (0, 0, 0)),
                                     ('deploying', None, (0, 600, 0)), ('stopped', READY, (1, 1, 1))):
        with pytest.raises(ValueError):
            dm.next_text(UNIT, state, 1.0, '', outcome, timeouts=timeouts)


def test_the_canary_analysis_lands_in_the_textfile():
    canary = {'passed': False, 'baseline': 'recorded T', 'requests': 36, 'errors': 0, 'rows': [
        {'level': 8, 'figure': 'tpot', 'canary': 41.0, 'baseline': 10.0, 'ratio': 4.1, 'threshold': 1.25, 'failed': True},
        {'level': 8, 'figure': 'throughput', 'canary': 90.0, 'baseline': None, 'ratio': None, 'threshold': 0.8, 'failed': False}]}
    values, _types = samples(render(UNIT, dict(FAILED, canary=canary), 1796000000.0, 'c0ffee'))
    assert one(values, 'sglang_deploy_canary_passed') == 0
    assert one(values, 'sglang_deploy_canary_ratio', figure='tpot', concurrency='8') == pytest.approx(4.1)
    assert one(values, 'sglang_deploy_canary_figure', figure='throughput', concurrency='8') == 90.0
    assert ('sglang_deploy_canary_ratio', frozenset({('unit', UNIT), ('figure', 'throughput'), ('concurrency', '8')})) not in values
    # no analysis ran: no canary line at all
    assert not [key for key in samples(render(UNIT, READY, 1796000000.0, 'c0ffee'))[0] if 'canary' in key[0]]
