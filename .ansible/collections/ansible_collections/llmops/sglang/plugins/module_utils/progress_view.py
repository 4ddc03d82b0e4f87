# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side wording of the waiter's live progress: one plain line per host and update.

Pure functions over the JSON status that sglang_wait_ready writes to its progress_file (and over its result):
what a line says, and when a line is due. No I/O and no clock of its own (callers pass `now`), so the action
plugin and the tests share it. Phase names and labels come from sglang_signatures, never from a copy here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.sglang_signatures import PHASES, phase_label
from ansible_collections.llmops.sglang.plugins.module_utils.formats import fmt_duration

# A host that stays in one phase is reprinted this often; with a read every few seconds the gap stays under 30 s.
REFRESH_EVERY = 25.0
# Labels are padded to the longest one so the durations of several hosts line up.
LABEL_WIDTH = max(len(p.label) for p in PHASES)
MIB_PER_GIB = 1024.0


def short_unit(unit):
    """`sglang-k26.service` -> `sglang-k26`; None stays None."""
    if unit and unit.endswith('.service'):
        return unit[:-len('.service')]
    return unit


def gpu_memory(gpus):
    """`GPU mem 71/96 GiB` for the fullest GPU (the one that runs out first), or None without GPU data."""
    best = None
    for gpu in gpus or ():
        used, total = gpu.get('memory_used_mib'), gpu.get('memory_total_mib')
        if used is None or not total:
            continue
        if best is None or used / float(total) > best[0] / float(best[1]):
            best = (used, total)
    if best is None:
        return None
    return 'GPU mem %d/%d GiB' % (round(best[0] / MIB_PER_GIB), round(best[1] / MIB_PER_GIB))


def time_in_phase(status):
    """Seconds the host has spent in its current phase (since the wait began when no phase was seen yet)."""
    elapsed = status.get('elapsed') or 0.0
    phase_at = status.get('phase_at')
    if status.get('phase') is None or phase_at is None:
        return elapsed
    # phase_at is negative for a phase that began before the wait (the unit was already loading)
    return max(0.0, elapsed - phase_at)


def _prefix(host, unit):
    unit = short_unit(unit)
    return '%s  %s' % (host, unit) if unit else host


def status_line(host, status):
    """`gpu-03  sglang-k26  loading weights        3m10s  (GPU mem 71/96 GiB)` from a progress_file status."""
    label = status.get('phase_label') or phase_label(status.get('phase'))
    extras = []
    gpus = gpu_memory(status.get('gpus'))
    if gpus:
        extras.append(gpus)
    if status.get('restarts'):
        extras.append('%d restart%s' % (status['restarts'], '' if status['restarts'] == 1 else 's'))
    if status.get('sub_state') in ('auto-restart', 'failed'):
        extras.append('unit %s' % status['sub_state'])
    line = '%s  %-*s  %s' % (_prefix(host, status.get('unit')), LABEL_WIDTH, label, fmt_duration(time_in_phase(status)))
    if extras:
        line += '  (%s)' % ', '.join(extras)
    return line


def phase_durations(phases, end):
    """[(label, seconds)] of each start-up phase of the last run, from the result's `phases` list."""
    marks = [m for m in phases or () if m.get('at') is not None]
    if marks:
        last_run = marks[-1].get('run', 0)
        marks = [m for m in marks if m.get('run', 0) == last_run]
    out = []
    for i, mark in enumerate(marks):
        if mark.get('name') == 'ready':
            break
        stop = marks[i + 1]['at'] if i + 1 < len(marks) else end
        out.append((mark.get('label') or phase_label(mark.get('name')), max(0.0, stop - mark['at'])))
    return out


def final_line(host, result, unit=None):
    """The line printed the moment the module returns: ready (with where the time went) or why it failed."""
    prefix = _prefix(host, unit)
    elapsed = result.get('elapsed')
    after = ' after %s' % fmt_duration(elapsed) if elapsed is not None else ''
    if result.get('ready'):
        spent = ', '.join('%s %s' % (label, fmt_duration(sec)) for label, sec in phase_durations(result.get('phases'), elapsed or 0.0))
        return '%s  READY%s%s' % (prefix, after, '  (%s)' % spent if spent else '')
    phases = [m for m in result.get('phases') or () if m.get('name')]
    where = ' during %s' % (phases[-1].get('label') or phase_label(phases[-1]['name'])) if phases else ''
    reason = result.get('reason')
    msg = (result.get('msg') or '').strip()
    return '%s  FAILED%s%s%s%s' % (prefix, ' (%s)' % reason if reason else '', where, after, ': %s' % msg if msg else '')


def finished_line(host, unit, label, seconds):
    """`gpu-03  sglang-k26  allocating KV cache    4s  (finished)` for a phase that ended between two reads."""
    return '%s  %-*s  %s  (finished)' % (_prefix(host, unit), LABEL_WIDTH, label, fmt_duration(seconds))


class ProgressPrinter(object):
    """Decides which lines a host's status deserves.

    A new phase (or restart) at once, with a `finished` line for each phase that began and ended since the last
    read (short phases would otherwise never show); the same phase again every REFRESH_EVERY seconds.
    """

    def __init__(self, host, every=REFRESH_EVERY):
        self.host = host
        self.every = every
        self.last_key = None
        self.last_at = None
        self.shown = set()     # (run, phase name) already printed

    def feed(self, status, now):
        """The lines (a list, often empty) to print for this status at monotonic time `now`.

        A status marked done is left to the module's result (final_line), which follows at once and is the
        authority on the outcome.
        """
        if not isinstance(status, dict) or status.get('done'):
            return []
        lines = []
        marks = [m for m in status.get('phases') or () if m.get('name') and m.get('at') is not None]
        for mark, following in zip(marks, marks[1:]):
            seen = (mark.get('run', 0), mark['name'])
            if seen in self.shown or following.get('run', 0) != mark.get('run', 0):
                continue
            self.shown.add(seen)
            if following['name'] == 'ready':
                continue
            lines.append(finished_line(self.host, status.get('unit'), mark.get('label') or phase_label(mark['name']),
                                       following['at'] - mark['at']))
        if marks:
            self.shown.add((marks[-1].get('run', 0), marks[-1]['name']))
        key = (status.get('phase'), status.get('restarts'), status.get('sub_state') in ('auto-restart', 'failed'))
        if lines or key != self.last_key or self.last_at is None or now - self.last_at >= self.every:
            self.last_key, self.last_at = key, now
            lines.append(status_line(self.host, status))
        return lines
