# -*- coding: utf-8 -*-
"""The fleet report: what one line per host and instance says."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.monitoring.fleet_report import (
    COLUMNS, ROTATION_COLUMN, format_table, report_rows, with_rotation)
from ansible_collections.llmops.sglang.plugins.module_utils.model.preflight import health_summary

PHASES = [{'name': 'init', 'at': -4.2}, {'name': 'weights', 'at': -2.0}, {'name': 'kv_cache', 'at': 28.1},
          {'name': 'cuda_graph', 'at': 28.6}, {'name': 'http_up', 'at': 34.6}, {'name': 'warmup', 'at': 34.6},
          {'name': 'ready', 'at': 35.1}]
GPUS = [{'index': i, 'name': 'NVIDIA RTX PRO 6000', 'memory_used_mib': 75776, 'memory_total_mib': 97887} for i in range(8)]


def test_ready_deployment_counts_from_start_up():
    rows = report_rows('gpu-01', {'sglang-k26.service': {
        'ready': True, 'elapsed': 35.2, 'phases': PHASES, 'gpus': GPUS,
        'packages': {'sglang': '0.5.23', 'compressed-tensors': '0.18.0', 'torch': None}}})
    assert rows == [['gpu-01', 'sglang-k26.service', 'ready', '39.3s',
                     'init 0.0 > weights 2.2 > kv_cache 32.3 > cuda_graph 32.8 > http_up 38.8 > warmup 38.8 > ready 39.3',
                     '0.5.23 / 0.18.0 / -', '592/765 GiB on 8 GPUs', '-']]


def test_failed_and_rolled_back_deployment_says_why():
    rows = report_rows('gpu-02', {'sglang-k26.service': {'ready': False, 'reason': 'unit_failed', 'rolled_back': True,
                                                         'elapsed': 12.0, 'phases': PHASES[:2]}})
    assert rows[0][2] == 'unit_failed (rolled back)' and rows[0][3] == '-'
    assert rows[0][4] == 'init 0.0 > weights 2.2'


def test_status_rows_from_sglang_info():
    info = {'venv': {'packages': {'sglang': '0.5.23', 'compressed-tensors': '0.8.1', 'torch': '2.14.1'}},
            'services': {'sglang-k26.service': {'exists': True, 'active_state': 'active', 'sub_state': 'running',
                                                'since': 'Mon 2026-11-30 09:01:02 UTC'},
                         'sglang-k26-ddtree.service': {'exists': True, 'active_state': 'activating', 'sub_state': 'auto-restart'},
                         'sglang-old.service': {'exists': False, 'active_state': 'inactive', 'sub_state': 'dead'}},
            'gpus': []}
    rows = report_rows('b300-01', None, info)
    states = dict((row[1], row[2]) for row in rows)
    assert states == {'sglang-k26.service': 'active since Mon 2026-11-30 09:01:02 UTC',
                      'sglang-k26-ddtree.service': 'activating/auto-restart', 'sglang-old.service': 'absent'}
    assert all(row[5] == '0.5.23 / 0.8.1 / 2.14.1' for row in rows)


def test_table_is_aligned_with_a_rule_under_the_header():
    lines = format_table([['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'], ['long-host', 'x', 'y', 'z', 'w', 'v', 'u', 't']])
    assert lines[0].startswith('host     ') and set(lines[1].replace(' ', '')) == {'-'}
    assert len(lines) == 4 and lines[3].startswith('long-host  x')
    assert len(COLUMNS) == 8


def test_host_without_facts_is_not_reached():
    assert report_rows('gpu-03', None, None) == [['gpu-03', '-', 'not reached', '-', '-', '-', '-', '-']]


GPU_OK = {'status': 'ok', 'claimed': list(range(8)), 'findings': []}
CKPT_OK = {'status': 'ok', 'shards': 64, 'hashed': 60, 'cached': 4, 'findings': []}


def test_health_column_for_a_deployed_instance():
    health = {'sglang-k26.service': health_summary(GPU_OK, CKPT_OK)}
    rows = report_rows('gpu-01', {'sglang-k26.service': {'ready': True, 'phases': PHASES}}, None, health)
    assert rows[0][7] == '8 GPUs ok; checkpoint ok (64 shards, 64 hashed files match)'


def test_health_column_shows_waivers_and_hosts_without_nvidia_smi():
    gpu = {'status': 'waived', 'claimed': [0, 1], 'findings': [{'check': 'persistence_mode', 'gpu': 0, 'waived': True}]}
    ckpt = {'status': 'ok', 'shards': 5, 'findings': []}
    rows = report_rows('gpu-01', {'a.service': {'ready': True}}, None, {'a.service': health_summary(gpu, ckpt)})
    assert rows[0][7] == '2 GPUs ok, waived: persistence_mode; checkpoint ok (5 shards)'
    cpu = {'status': 'not_judged', 'reason': 'nvidia-smi is not installed', 'findings': []}
    rows = report_rows('cpu-01', {'a.service': {'ready': True}}, None, {'a.service': health_summary(cpu, ckpt)})
    assert rows[0][7] == 'GPUs not judged (no nvidia-smi); checkpoint ok (5 shards)'


def test_an_instance_refused_by_preflight_is_reported_as_refused():
    gpu = {'status': 'failed', 'claimed': list(range(8)), 'findings': [
        {'check': 'ecc_uncorrected', 'gpu': 3, 'waived': False}, {'check': 'persistence_mode', 'gpu': 1, 'waived': True}]}
    ckpt = {'status': 'failed', 'shards': 64, 'findings': [
        {'check': 'shard_invalid', 'file': 'model-00002-of-00064.safetensors', 'waived': False}]}
    rows = report_rows('gpu-02', None, None, {'sglang-k26.service': health_summary(gpu, ckpt)})
    assert rows == [['gpu-02', 'sglang-k26.service', 'refused by preflight', '-', '-', '- / - / -', '-',
                     'GPUs FAILED: ecc_uncorrected (GPU 3); checkpoint FAILED: shard_invalid (model-00002-of-00064.safetensors)']]


def test_an_instance_stopped_before_its_verdict_says_refused_or_where_it_failed():
    gpu = {'status': 'failed', 'claimed': [0], 'findings': [{'check': 'ecc_uncorrected', 'gpu': 0, 'waived': False}]}
    deployments = {'a.service': {'ready': False, 'outcome': 'refused', 'reason': 'refused', 'step': 'Refuse'},
                   'b.service': {'ready': False, 'outcome': 'refused', 'reason': 'preflight', 'step': 'The GPUs'},
                   'c.service': {'ready': False, 'outcome': 'failed', 'reason': 'step_failed', 'step': 'Render the unit'},
                   # a waiter's reason is its own, whatever its word
                   'd.service': {'ready': False, 'outcome': 'failed', 'reason': 'unit_failed'}}
    rows = report_rows('gpu-02', deployments, None, {'b.service': health_summary(gpu, CKPT_OK)})
    assert [(row[1], row[2]) for row in rows] == [('a.service', 'refused before any change'),
                                                  ('b.service', 'refused by preflight'),
                                                  ('c.service', 'failed at "Render the unit"'), ('d.service', 'unit_failed')]
    # one row per instance: the gates' summary is the refused deployment's health column, not a row of its own
    assert len(rows) == 4
    assert rows[1][7] == 'GPUs FAILED: ecc_uncorrected; checkpoint ok (64 shards, 64 hashed files match)'


WORKERS = [{'host': 'gpu-01', 'instance': 'sglang-k26', 'url': 'http://10.0.0.1:30000'},
           {'host': 'gpu-02', 'instance': 'sglang-k26', 'url': 'http://10.0.0.2:30000'}]


def test_rotation_column_says_per_router_whether_the_worker_is_in_rotation():
    rows = (report_rows('gpu-01', {'sglang-k26.service': {'ready': True, 'elapsed': 3.0}})
            + report_rows('gpu-02', {'sglang-k26.service': {'ready': False, 'reason': 'unit_failed'}})
            + report_rows('gpu-03', None))
    out = with_rotation(rows, WORKERS, {'rt-2': ['http://10.0.0.1:30000/'], 'rt-1': ['http://10.0.0.1:30000']})
    assert [row[-1] for row in out] == ['rt-1: in, rt-2: in', 'rt-1: OUT, rt-2: OUT', '-']
    assert out[0][:-1] == rows[0]  # the other cells as they were
    lines = format_table(out, COLUMNS + (ROTATION_COLUMN,))
    assert lines[0].endswith('routers (in rotation)') and lines[3].endswith('rt-1: OUT, rt-2: OUT')


def test_rotation_column_for_a_router_that_could_not_be_read_and_an_instance_that_is_no_worker():
    rows = report_rows('gpu-01', {'sglang-k26.service': {'ready': True, 'elapsed': 3.0},
                                  'sglang-k26-ddtree.service': {'ready': True, 'elapsed': 3.0}})
    out = with_rotation(rows, WORKERS, {'rt-1': None, 'rt-2': []})
    assert dict((row[1], row[-1]) for row in out) == {'sglang-k26.service': 'rt-1: ?, rt-2: OUT',
                                                      'sglang-k26-ddtree.service': '-'}
