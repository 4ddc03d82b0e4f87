# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""wait_report.ProgressPacer: when the progress file is rewritten and when the GPUs are read for it (issue 27: the
GPU read is the costliest read of a wait, so at most once a minute between phase changes)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.wait import wait_report as R


def key(phases, state='activating', port=False, restarts=0):
    return (phases, state, port, restarts)


def gpu_reads(timeline):
    """The moments a pacer reads the GPUs, the driver's way (wait_driver.watch): only when a write is due."""
    pacer = R.ProgressPacer()
    reads = []
    for now, k in timeline:
        if pacer.due(now, k):
            if pacer.gpus_due(now, k):
                pacer.gpus_read(now, [{'index': 0}])
                reads.append(now)
            pacer.written(now, k)
    return reads


def test_gpus_are_read_at_the_start_at_each_new_phase_and_at_most_once_a_minute_between():
    # a poll every 0.5 s for 200 s: phase 1 from the start, phase 2 at 20 s, phase 3 at 150 s
    timeline = [(t / 2.0, key(1 if t < 40 else 2 if t < 300 else 3)) for t in range(400)]
    assert gpu_reads(timeline) == [0.0, 20.0, 80.0, 140.0, 150.0]
    assert R.PROGRESS_GPU_EVERY == 60.0


def test_a_change_that_is_not_a_phase_rewrites_the_file_without_reading_the_gpus():
    pacer = R.ProgressPacer()
    assert pacer.due(0.0, key(1)) and pacer.gpus_due(0.0, key(1))
    pacer.gpus_read(0.0, [])
    pacer.written(0.0, key(1))
    # the port opened 2 s later: written at once, the GPUs not read again
    assert pacer.due(2.0, key(1, port=True)) and not pacer.gpus_due(2.0, key(1, port=True))
    # nothing changed: the file at least every PROGRESS_EVERY seconds
    assert not pacer.due(4.0, key(1)) and pacer.due(R.PROGRESS_EVERY, key(1))
