# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deployment metrics: one node_exporter textfile-collector file per SGLang instance. Pure rendering, no I/O.

The input is the server role's outcome for one unit (an entry of its ``sglang_deployments`` fact: the
sglang_wait_ready result plus ``packages``, ``rolled_back`` and ``changed_config``). The text is Prometheus's text
exposition format 0.0.4, which node_exporter's textfile collector reads from ``*.prom`` files.

A re-run that finds the same run of the unit (same InvocationID) with the same verdict, configuration and
versions returns the previous text unchanged, so the role's write is idempotent: the numbers describe the start-up
the run went through, not the latest look at it.

The "deploying" marker (``render_marker``): from the moment the role takes an instance down on purpose (its drain out
of the routers, or its restart when there are none; a rollback's restart renews it) until its verdict, the file also
carries ``sglang_deploy_in_progress`` with the moment it began and a deadline (the longest the role can take: drain,
stop and wait). The alert rules leave an instance whose marker's deadline has not passed out of SGLangServerNotReady;
a marker left by a controller that was killed stops counting at its deadline. ``render`` (the verdict) drops it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import re

from ansible_collections.llmops.sglang.plugins.module_utils.monitoring.fleet_report import time_to_ready_seconds

PREFIX = 'sglang_deploy_'
# name (without the prefix), help; every metric is a gauge labelled with the systemd unit.
METRICS = (
    ('info', 'The last deployment of the unit: versions, configuration checksum, systemd run and failure reason '
             '("none" when ready); always 1.'),
    ('ready', 'Whether the last deployment\'s wait saw the server answer a real completion (1) or not (0).'),
    ('time_to_ready_seconds', 'Start-up time of the last deployment that became ready: first start-up phase to ready '
                              '(a failed deployment keeps the value before it).'),
    ('wait_seconds', 'How long the last deployment\'s wait took.'),
    ('phase_seconds', 'Time spent in each start-up phase during the last deployment (the phase it failed in: until the '
                      'wait ended).'),
    ('restarts', 'Automatic restarts of the unit seen during the last deployment\'s wait.'),
    ('rolled_back', 'Whether the last deployment failed and the last known good configuration was restored (1).'),
    ('config_changed', 'Whether the last deployment changed the unit\'s configuration (1) or found it current (0).'),
    ('timestamp_seconds', 'When the last deployment\'s verdict was recorded (Unix time).'),
    ('gpus', 'GPUs nvidia-smi listed at the end of the last deployment\'s wait.'),
    ('gpu_memory_used_bytes', 'GPU memory in use on all GPUs at the end of the last deployment\'s wait.'),
    ('gpu_memory_total_bytes', 'GPU memory of all GPUs at the end of the last deployment\'s wait.'),
    ('canary_passed', 'Whether the canary analysis of the last deployment passed (1) or failed (0); absent when none ran.'),
    ('canary_figure', 'A figure of the last deployment\'s canary analysis at a concurrency level (median over its '
                      'rounds; milliseconds for ttft and tpot, output tokens per second for throughput).'),
    ('canary_ratio', 'The canary\'s figure as a ratio to its baseline\'s (absent without a baseline).'),
)
# The marker of a deployment under way (render_marker); its lines follow the last verdict's.
MARKER_METRICS = (
    ('in_progress', 'A deployment of the unit is under way (1): taken down on purpose, no verdict yet; its reason '
                    'label says what took it down (restart, rollback).'),
    ('started_timestamp_seconds', 'When the deployment under way took the unit down (Unix time).'),
    ('deadline_timestamp_seconds', 'When the deployment under way must have reached its verdict (Unix time): past it, '
                                   'the alerts treat the unit as not deploying (a controller killed mid-way).'),
)
MARKER_REASONS = ('restart', 'rollback')
_MARKER_RE = re.compile(r'^(# (HELP|TYPE) )?' + PREFIX + r'(' + '|'.join(name for name, _d in MARKER_METRICS) + r')\b')
VERSION_LABELS = (('sglang', 'sglang_version'), ('compressed-tensors', 'compressed_tensors_version'),
                  ('torch', 'torch_version'))
# Labels of the info metric that identify "the same deployment" for idempotence.
IDENTITY = ('invocation_id', 'config_checksum', 'reason') + tuple(label for _p, label in VERSION_LABELS)
_INFO_RE = re.compile(r'^' + PREFIX + r'info\{(?P<labels>.*)\} ')
_LABEL_RE = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_READY_RE = re.compile(r'^' + PREFIX + r'ready\{[^}]*\} (?P<value>\S+)$')
_TTR_RE = re.compile(r'^' + PREFIX + r'time_to_ready_seconds\{[^}]*\} (?P<value>\S+)$')
_UNESCAPE_RE = re.compile(r'\\(.)')
MIB = 1024 * 1024


def _unescape(match):
    return '\n' if match.group(1) == 'n' else match.group(1)


def escape(value):
    """A label value in the text format: backslash, double quote and newline escaped."""
    return str(value).replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')


def _number(value):
    value = float(value)
    if value == int(value) and abs(value) < 1e15:
        return '%d' % value
    return repr(round(value, 3))


def _line(name, labels, value):
    body = ','.join('%s="%s"' % (key, escape(val)) for key, val in labels)
    return '%s%s{%s} %s' % (PREFIX, name, body, _number(value))


def phase_durations(outcome):
    """[(phase name, seconds)] of the wait's last run, in order; the last phase lasts until the wait ended.

    The final ``ready`` mark is an instant, not a phase, and is left out.
    """
    phases = [p for p in (outcome.get('phases') or []) if isinstance(p, dict) and p.get('name')]
    if not phases:
        return []
    last_run = max(int(p.get('run') or 0) for p in phases)
    phases = [p for p in phases if int(p.get('run') or 0) == last_run]
    durations = []
    for index, phase in enumerate(phases):
        if phase['name'] == 'ready':
            break
        start = float(phase.get('at') or 0)
        if index + 1 < len(phases):
            end = float(phases[index + 1].get('at') or 0)
        else:
            end = float(outcome.get('elapsed') or start)
        durations.append((phase['name'], max(0.0, end - start)))
    return durations


def info_labels(unit, outcome, config_checksum):
    packages = outcome.get('packages') or {}
    unit_state = outcome.get('unit') or {}
    labels = [('unit', unit)]
    labels.extend((label, packages.get(package) or 'unknown') for package, label in VERSION_LABELS)
    labels.append(('config_checksum', config_checksum or 'unknown'))
    labels.append(('invocation_id', unit_state.get('invocation_id') or 'none'))
    labels.append(('reason', 'none' if outcome.get('ready') else (outcome.get('reason') or 'error')))
    return labels


def parse_previous(text):
    """(info labels dict, ready value, time to ready) of a file this module wrote; None for what it lacks."""
    info, ready, time_to_ready = None, None, None
    for line in (text or '').splitlines():
        match = _INFO_RE.match(line)
        if match:
            info = dict((key, _UNESCAPE_RE.sub(_unescape, value)) for key, value in _LABEL_RE.findall(match.group('labels')))
        match = _READY_RE.match(line)
        if match:
            ready = match.group('value')
        match = _TTR_RE.match(line)
        if match:
            time_to_ready = float(match.group('value'))
    return info, ready, time_to_ready


def render(unit, outcome, now, config_checksum='', previous=''):
    """The textfile for one unit's outcome at Unix time ``now``; ``previous`` is the file's current text ('' if none).

    Returns ``previous`` itself when it describes the same run with the same verdict (see the module's docstring).
    """
    outcome = outcome or {}
    previous = strip_marker(previous)
    info = info_labels(unit, outcome, config_checksum)
    ready = 1 if outcome.get('ready') else 0
    old_info, old_ready, old_time_to_ready = parse_previous(previous)
    same = (old_info is not None and old_ready == str(ready) and dict(info)['invocation_id'] != 'none'
            and all(old_info.get(key) == value for key, value in info if key in IDENTITY))
    if same:
        return previous
    unit_label = [('unit', unit)]
    values = {
        'info': [(info, 1)],
        'ready': [(unit_label, ready)],
        'wait_seconds': [(unit_label, float(outcome.get('elapsed') or 0))],
        'phase_seconds': [(unit_label + [('phase', name)], seconds) for name, seconds in phase_durations(outcome)],
        'restarts': [(unit_label, int(outcome.get('restarts') or 0))],
        'rolled_back': [(unit_label, 1 if outcome.get('rolled_back') else 0)],
        'config_changed': [(unit_label, 1 if outcome.get('changed_config') else 0)],
        'timestamp_seconds': [(unit_label, int(now))],
    }
    # Of the last deployment that became ready: a failed one keeps the previous file's value.
    seconds = time_to_ready_seconds(outcome) if ready else old_time_to_ready
    if seconds is not None:
        values['time_to_ready_seconds'] = [(unit_label, seconds)]
    gpus = [g for g in (outcome.get('gpus') or []) if isinstance(g, dict)]
    if gpus:
        values['gpus'] = [(unit_label, len(gpus))]
        values['gpu_memory_used_bytes'] = [(unit_label, sum(int(g.get('memory_used_mib') or 0) for g in gpus) * MIB)]
        values['gpu_memory_total_bytes'] = [(unit_label, sum(int(g.get('memory_total_mib') or 0) for g in gpus) * MIB)]
    canary = outcome.get('canary') if isinstance(outcome.get('canary'), dict) else None
    if canary:
        values['canary_passed'] = [(unit_label, 1 if canary.get('passed') else 0)]
        for row in canary.get('rows') or []:
            labels = unit_label + [('figure', str(row.get('figure'))), ('concurrency', str(row.get('level')))]
            if row.get('canary') is not None:
                values.setdefault('canary_figure', []).append((labels, float(row['canary'])))
            if row.get('ratio') is not None:
                values.setdefault('canary_ratio', []).append((labels, float(row['ratio'])))
    lines = []
    for name, doc in METRICS:
        if not values.get(name):
            continue
        lines.append('# HELP %s%s %s' % (PREFIX, name, doc))
        lines.append('# TYPE %s%s gauge' % (PREFIX, name))
        lines.extend(_line(name, labels, value) for labels, value in values[name])
    return '\n'.join(lines) + '\n'


def strip_marker(text):
    """The text without a deployment marker's lines (the last verdict's alone); ``text`` itself when it has none."""
    text = text or ''
    lines = [line for line in text.splitlines() if not _MARKER_RE.match(line)]
    if len(lines) == len(text.splitlines()):
        return text
    return '\n'.join(lines) + '\n' if lines else ''


def marker_deadline_seconds(wait_timeout, stop_timeout, drain_timeout=0):
    """How long a deployment may keep its marker: the longest the role can take from the marker to the verdict.

    The drain out of the routers (0 without routers), the stop of the running server and the waiter's timeout. A
    rollback renews the marker at its own restart, with its own stop and wait.
    """
    parts = (wait_timeout, stop_timeout, drain_timeout)
    seconds = [float(part or 0) for part in parts]
    if any(part < 0 for part in seconds):
        raise ValueError('marker deadline parts must not be negative: %r' % (parts,))
    if seconds[0] <= 0:
        raise ValueError('the wait timeout must be positive, got %r' % (wait_timeout,))
    return int(sum(seconds))


def render_marker(unit, now, seconds, previous='', reason='restart'):
    """The textfile while a deployment is under way: the last verdict's lines, then the marker (see the docstring).

    ``now``: Unix time the unit is taken down; ``seconds``: how long until its deadline (marker_deadline_seconds).
    """
    if reason not in MARKER_REASONS:
        raise ValueError('marker reason must be one of %s, got %r' % (', '.join(MARKER_REASONS), reason))
    if float(seconds) <= 0:
        raise ValueError('marker seconds must be positive, got %r' % (seconds,))
    unit_label = [('unit', unit)]
    values = {
        'in_progress': [(unit_label + [('reason', reason)], 1)],
        'started_timestamp_seconds': [(unit_label, int(now))],
        'deadline_timestamp_seconds': [(unit_label, int(now) + int(seconds))],
    }
    lines = strip_marker(previous).splitlines()
    for name, doc in MARKER_METRICS:
        lines.append('# HELP %s%s %s' % (PREFIX, name, doc))
        lines.append('# TYPE %s%s gauge' % (PREFIX, name))
        lines.extend(_line(name, labels, value) for labels, value in values[name])
    return '\n'.join(lines) + '\n'


PHASE_METRIC = ('phase_started_timestamp_seconds',
                'While sglang_wait_ready waits for the unit: the start-up phase it is in (phase label) and when that '
                'phase began (Unix time). Gone once the wait has its verdict.')


def render_phase(unit, phase, started):
    """The waiter's file while it waits (phase_file_name): the phase the server is in and since when."""
    if not phase or not re.match(r'^[a-z_]+$', phase):
        raise ValueError('phase must be a phase name such as weights, got %r' % (phase,))
    name, doc = PHASE_METRIC
    return '\n'.join(['# HELP %s%s %s' % (PREFIX, name, doc), '# TYPE %s%s gauge' % (PREFIX, name),
                      _line(name, [('unit', unit), ('phase', phase)], int(float(started)))]) + '\n'


STATES = ('deploying', 'present', 'absent')


def config_checksum(digests):
    """The info metric's config_checksum: 12 hex digits of the unit's and the environment file's digests (the
    decision's ``files``: sha1 of each as the role renders it)."""
    digests = digests or {}
    return hashlib.sha1((str(digests.get('unit', '')) + str(digests.get('env', ''))).encode('utf-8')).hexdigest()[:12]


def next_text(unit, state, now, previous='', outcome=None, digests=None, reason='restart', timeouts=(0, 0, 0)):
    """What the unit's textfile says next (None: removed), from the text written before (``previous``).

    ``deploying``: the last verdict's lines plus the marker of a deployment under way (``reason``), with the deadline
    of ``timeouts`` (wait, stop, drain: marker_deadline_seconds); ``present``: the verdict of ``outcome`` (an entry
    of the role's sglang_deployments), its configuration named by ``digests``; ``absent``: no file.
    """
    if state not in STATES:
        raise ValueError('state must be one of %s, got %r' % (', '.join(STATES), state))
    if state == 'absent':
        return None
    if state == 'deploying':
        return render_marker(unit, now, marker_deadline_seconds(*timeouts), previous, reason)
    if not isinstance(outcome, dict) or not outcome:
        raise ValueError('the outcome of %s is needed to record its verdict, got %r' % (unit, outcome))
    return render(unit, outcome, now, config_checksum(digests), previous)


def phase_file_name(unit):
    """``sglang-k26.service`` -> ``sglang-k26.phase.prom``: the waiter's own file beside the role's."""
    return file_name(unit)[:-len('.prom')] + '.phase.prom'


def file_name(unit):
    """``sglang-k26.service`` -> ``sglang-k26.prom`` (node_exporter reads ``*.prom``)."""
    base = unit[:-len('.service')] if unit.endswith('.service') else unit
    if not re.match(r'^[A-Za-z0-9:_.@-]+$', base):
        raise ValueError('unit %r is not a systemd unit name' % unit)
    return base + '.prom'
