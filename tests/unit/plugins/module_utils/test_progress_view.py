# -*- coding: utf-8 -*-
"""The wording and timing decisions of the controller's live progress lines (pure, no clock: `now` is given)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.host.nvidia_smi import parse_query_gpu
from ansible_collections.llmops.sglang.plugins.module_utils.progress_view import (
    LABEL_WIDTH, REFRESH_EVERY, ProgressPrinter, final_line, gpu_memory, phase_durations, status_line, time_in_phase,
)
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_signatures import PHASES, phase_label

FIXTURES = Path(__file__).parent / 'fixtures' / 'nvidia-smi'
UNIT = 'sglang-k26.service'


def mark(name, at, run=0):
    return {'name': name, 'label': phase_label(name), 'at': at, 'run': run, 'source': 'journal'}


def status(phases, elapsed, **extra):
    """A progress_file status as WaitMachine.progress() writes it."""
    last = phases[-1] if phases else None
    value = {'unit': UNIT, 'phase': last and last['name'], 'phase_label': last and last['label'],
             'phase_at': last and last['at'], 'phases': phases, 'elapsed': elapsed, 'restarts': 0,
             'active_state': 'active', 'sub_state': 'running', 'gpus': [], 'done': False, 'ready': False, 'reason': None}
    value.update(extra)
    return value


def test_line_names_host_unit_phase_and_time_in_phase():
    line = status_line('gpu-03', status([mark('init', 1.0), mark('weights', 10.0)], elapsed=200.0))
    assert line == 'gpu-03  sglang-k26  %-*s  3m10s' % (LABEL_WIDTH, 'loading weights')


@pytest.mark.parametrize('phase', PHASES, ids=[p.name for p in PHASES])
def test_every_phase_is_worded_by_the_shared_table(phase):
    assert phase.label in status_line('gpu-01', status([mark(phase.name, 0.0)], elapsed=5.0))


def test_before_any_phase_counts_from_the_start_of_the_wait():
    line = status_line('gpu-01', status([], elapsed=42.0))
    assert phase_label(None) in line and line.endswith('42s')


def test_a_phase_begun_before_the_wait_counts_from_its_journal_line():
    # the unit was already loading for 30 s when the wait began: phase_at is negative
    assert time_in_phase(status([mark('weights', -30.0)], elapsed=10.0)) == 40.0


def test_gpu_memory_of_the_fullest_gpu_from_real_nvidia_smi_output():
    gpus = parse_query_gpu((FIXTURES / 'nvidia-smi-h200-busy.txt').read_text())
    assert gpu_memory(gpus) == 'GPU mem 19/140 GiB'
    line = status_line('gpu-03', status([mark('weights', 0.0)], elapsed=190.0, gpus=gpus))
    assert line.endswith('3m10s  (GPU mem 19/140 GiB)')


def test_no_gpu_data_no_gpu_part():
    assert gpu_memory([]) is None
    assert gpu_memory([{'index': 0, 'memory_used_mib': None, 'memory_total_mib': None}]) is None
    assert '(' not in status_line('gpu-01', status([mark('init', 0.0)], elapsed=3.0))


def test_restarts_and_a_pending_restart_are_shown():
    line = status_line('gpu-01', status([mark('init', 0.0, run=1)], elapsed=3.0, restarts=1, sub_state='auto-restart'))
    assert line.endswith('(1 restart, unit auto-restart)')


def test_endpoint_only_wait_has_no_unit_part():
    line = status_line('lb-01', status([], elapsed=3.0, unit=None))
    assert line.startswith('lb-01  %s' % phase_label(None))


def test_first_status_prints_then_only_every_refresh_interval():
    printer = ProgressPrinter('gpu-01')
    first = status([mark('init', 0.0), mark('weights', 2.0)], elapsed=5.0)
    lines = printer.feed(first, now=100.0)
    assert lines[-1] == status_line('gpu-01', first)
    assert printer.feed(status(first['phases'], elapsed=8.0), now=103.0) == []
    assert printer.feed(status(first['phases'], elapsed=8.0), now=100.0 + REFRESH_EVERY - 0.1) == []
    again = printer.feed(status(first['phases'], elapsed=30.0), now=100.0 + REFRESH_EVERY)
    assert len(again) == 1 and again[0].endswith('28s')


def test_refresh_interval_keeps_lines_under_thirty_seconds_apart():
    # reads every few seconds plus this interval must stay below the 30 s the operator is promised
    assert REFRESH_EVERY + 3.0 <= 30.0


def test_a_new_phase_prints_at_once():
    printer = ProgressPrinter('gpu-01')
    printer.feed(status([mark('weights', 0.0)], elapsed=5.0), now=0.0)
    lines = printer.feed(status([mark('weights', 0.0), mark('kv_cache', 6.0)], elapsed=7.0), now=1.0)
    assert lines == ['gpu-01  sglang-k26  %-*s  1s' % (LABEL_WIDTH, 'allocating KV cache')]


def test_phases_passed_between_two_reads_are_printed_in_order():
    # short phases (KV cache, HTTP start) often begin and end between two reads: they get a line of their own
    printer = ProgressPrinter('gpu-01')
    printer.feed(status([mark('init', 0.0)], elapsed=1.0), now=0.0)
    phases = [mark('init', 0.0), mark('weights', 3.0), mark('kv_cache', 48.0), mark('cuda_graph', 49.0)]
    lines = printer.feed(status(phases, elapsed=50.0), now=3.0)
    assert [line.split('  ')[2].strip() for line in lines] == ['loading weights', 'allocating KV cache', 'capturing CUDA graphs']
    assert lines[0].endswith('45s  (finished)') and lines[1].endswith('1s  (finished)') and lines[2].endswith('  1s')
    # nothing is printed twice
    assert printer.feed(status(phases, elapsed=51.0), now=4.0) == []


def test_phases_before_the_first_read_are_reported_finished_once():
    printer = ProgressPrinter('gpu-01')
    first = printer.feed(status([mark('init', 0.0), mark('weights', 2.0)], elapsed=3.0), now=0.0)
    assert first == ['gpu-01  sglang-k26  %-*s  2s  (finished)' % (LABEL_WIDTH, 'distributed init'),
                     'gpu-01  sglang-k26  %-*s  1s' % (LABEL_WIDTH, 'loading weights')]
    # a phase shown while it ran gets no "finished" line: its duration is in the READY line
    lines = printer.feed(status([mark('init', 0.0), mark('weights', 2.0), mark('kv_cache', 40.0)], elapsed=41.0), now=3.0)
    assert [line.split('  ')[2].strip() for line in lines] == ['allocating KV cache']


def test_a_restart_starts_the_phases_again():
    printer = ProgressPrinter('gpu-01')
    printer.feed(status([mark('init', 0.0), mark('weights', 2.0)], elapsed=3.0), now=0.0)
    phases = [mark('init', 0.0), mark('weights', 2.0), mark('init', 20.0, run=1)]
    lines = printer.feed(status(phases, elapsed=21.0, restarts=1), now=3.0)
    assert len(lines) == 1 and 'distributed init' in lines[0] and lines[0].endswith('(1 restart)')


def test_a_done_status_is_left_to_the_result():
    printer = ProgressPrinter('gpu-01')
    assert printer.feed(status([mark('ready', 3.0)], elapsed=3.0, done=True, ready=True), now=0.0) == []
    assert printer.feed(None, now=1.0) == [] and printer.feed(['not', 'a', 'status'], now=2.0) == []


def test_ready_line_says_where_the_time_went():
    phases = [mark('init', 0.5), mark('weights', 3.5), mark('kv_cache', 48.5), mark('cuda_graph', 49.5),
              mark('warmup', 62.0), mark('ready', 63.0)]
    result = {'ready': True, 'elapsed': 64.0, 'phases': phases}
    assert final_line('gpu-02', result, UNIT) == (
        'gpu-02  sglang-k26  READY after 1m04s  (distributed init 3s, loading weights 45s, allocating KV cache 1s, '
        'capturing CUDA graphs 12s, warming up 1s)')


def test_ready_without_journal_phases():
    assert final_line('lb-01', {'ready': True, 'elapsed': 2.0, 'phases': [mark('ready', 2.0)]}) == 'lb-01  READY after 2s'


def test_failure_line_names_reason_phase_and_message():
    result = {'ready': False, 'elapsed': 40.2, 'reason': 'unit_failed', 'phases': [mark('init', 0.0), mark('weights', 3.0)],
              'msg': "sglang-k26.service failed during 'loading weights' after 40s: Scheduler hit an exception"}
    assert final_line('gpu-03', result, UNIT) == (
        "gpu-03  sglang-k26  FAILED (unit_failed) during loading weights after 40s: "
        "sglang-k26.service failed during 'loading weights' after 40s: Scheduler hit an exception")


def test_durations_of_the_last_run_only():
    phases = [mark('init', 0.0), mark('weights', 2.0), mark('init', 30.0, run=1), mark('weights', 33.0, run=1)]
    assert phase_durations(phases, end=40.0) == [('distributed init', 3.0), ('loading weights', 7.0)]
