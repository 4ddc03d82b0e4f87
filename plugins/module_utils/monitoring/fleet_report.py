# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report: one line per host and instance, readable at a glance. Pure formatting, no I/O."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.formats import fmt_seconds
from ansible_collections.llmops.sglang.plugins.module_utils.router.router_rotation import rotation_column

COLUMNS = ('host', 'instance', 'state', 'time to ready', 'phases (s since start-up began)', 'sglang / compressed-tensors / torch',
           'GPU memory', 'health (GPUs; checkpoint)')
# Behind routers only: per worker, whether each router has it in rotation.
ROTATION_COLUMN = 'routers (in rotation)'
# The state of an instance whose role run stopped before the waiter's verdict, by its outcome's reason
# (module_utils/rollout/rollout_state.py stopped_outcome; step_failed names its step).
STOPPED_STATES = {'refused': 'refused before any change', 'preflight': 'refused by preflight'}


def _timeline(phases):
    """[{name, at}] -> 'init 0 > weights 2.2 > ... > ready 35.1', counted from the first phase.

    The waiter counts from when the wait began, which may be after the unit started; the first phase seen is
    when start-up began, the moment an operator counts from.
    """
    if not phases:
        return '-'
    start = float(phases[0].get('at') or 0)
    return ' > '.join('%s %.1f' % (p.get('name'), float(p.get('at') or 0) - start) for p in phases)


def time_to_ready_seconds(dep):
    """Start-up time in seconds: first phase to ready; the wait's own elapsed time when no phases were seen."""
    phases = dep.get('phases') or []
    if phases and phases[-1].get('name') == 'ready':
        return float(phases[-1].get('at') or 0) - float(phases[0].get('at') or 0)
    if dep.get('elapsed') is None or dep.get('elapsed') == '':
        return None
    return float(dep.get('elapsed'))


def _time_to_ready(dep):
    return fmt_seconds(time_to_ready_seconds(dep))


def _versions(packages):
    packages = packages or {}
    return ' / '.join(str(packages.get(name) or '-') for name in ('sglang', 'compressed-tensors', 'torch'))


def _gpu_memory(gpus):
    if not gpus:
        return '-'
    used = sum(g.get('memory_used_mib') or 0 for g in gpus) / 1024.0
    total = sum(g.get('memory_total_mib') or 0 for g in gpus) / 1024.0
    return '%d/%d GiB on %d GPU%s' % (round(used), round(total), len(gpus), '' if len(gpus) == 1 else 's')


def _gate_text(label, gate):
    status = gate.get('status') or 'skipped'
    if status == 'skipped':
        return '%s -' % label
    if status == 'not_judged':
        return '%s not judged (no nvidia-smi)' % label if label == 'GPUs' else '%s not judged' % label
    if status == 'failed':
        failed = gate.get('failed') or []
        return '%s FAILED: %s%s' % (label, ', '.join(failed[:3]), ' +%d more' % (len(failed) - 3) if len(failed) > 3 else '')
    if label == 'GPUs':
        text = '%d GPU%s ok' % (gate.get('count') or 0, '' if gate.get('count') == 1 else 's')
    else:
        text = 'checkpoint ok (%d shards%s)' % (gate.get('count') or 0,
                                                ', %d hashed files match' % gate['verified'] if gate.get('verified') else '')
    if gate.get('waived'):
        text += ', waived: %s' % ', '.join(gate['waived'])
    return text


def _health(summary):
    """'8 GPUs ok; checkpoint ok (64 shards)' or '-' when no preflight ran for the instance."""
    if not summary:
        return '-'
    return '%s; %s' % (_gate_text('GPUs', summary.get('gpu') or {}), _gate_text('checkpoint', summary.get('checkpoint') or {}))


def report_rows(host, deployments, info=None, health=None):
    """Rows for one host from the server role's ``sglang_deployments`` fact and/or an sglang_info result.

    A deployment's state is ``ready``, the waiter's reason (with `` (rolled back)``), or for a role run that stopped
    before any verdict (rollout_state.stopped_outcome) ``refused before any change``, ``refused by preflight`` or
    ``failed at "STEP"``. ``health``: the role's ``sglang_preflight`` fact (unit -> preflight.health_summary()); an
    instance with a preflight and no deployment (a run of the preflight alone: --tags sglang_preflight) is reported
    as its gates found it.
    """
    rows = []
    info = info or {}
    health = health or {}
    services = info.get('services') or {}
    packages = (info.get('venv') or {}).get('packages') or {}
    seen = set()
    for unit, dep in sorted((deployments or {}).items()):
        seen.add(unit)
        state = 'ready' if dep.get('ready') else (dep.get('reason') or dep.get('state') or 'not ready')
        if dep.get('outcome') == 'refused':
            state = STOPPED_STATES.get(dep.get('reason'), 'refused')
        elif dep.get('reason') == 'step_failed':
            state = 'failed at "%s"' % (dep.get('step') or '?')
        if dep.get('rolled_back'):
            state += ' (rolled back)'
        rows.append([host, unit, state, _time_to_ready(dep) if dep.get('ready') else '-',
                     _timeline(dep.get('phases')), _versions(dep.get('packages') or packages), _gpu_memory(dep.get('gpus')),
                     _health(health.get(unit))])
    for unit, summary in sorted(health.items()):
        if unit in seen:
            continue
        seen.add(unit)
        refused = any((summary.get(g) or {}).get('status') == 'failed' for g in ('gpu', 'checkpoint'))
        rows.append([host, unit, STOPPED_STATES['preflight'] if refused else 'preflight passed', '-', '-',
                     _versions(packages), '-', _health(summary)])
    for unit, facts in sorted(services.items()):
        if unit in seen:
            continue
        state = facts.get('active_state') or 'unknown'
        if facts.get('sub_state') and facts.get('sub_state') not in ('running', 'dead'):
            state += '/' + facts['sub_state']
        if not facts.get('exists', True):
            state = 'absent'
        since = facts.get('since') or ''
        rows.append([host, unit, state + (' since ' + since if since and state.startswith('active') else ''), '-', '-',
                     _versions(packages), _gpu_memory(info.get('gpus')), '-'])
    if not rows:
        rows.append([host, '-', 'not reached', '-', '-', '-', '-', '-'])
    return rows


def with_rotation(rows, workers, in_rotation):
    """Rows of report_rows() with one more cell: each router's verdict on the row's worker ('router-a: in, router-b:
    OUT'; 'router-a: ?' when that router could not be read). ``workers``: [{host, instance, url}] (instance without
    '.service'); ``in_rotation``: {router: [urls] or None}. A row that is no worker (a rank >= 1 host, a stopped
    instance, a host not reached) gets '-'."""
    urls = dict(((w.get('host'), (w.get('instance') or '') + '.service'), w['url']) for w in workers or [])
    out = []
    for row in rows:
        url = urls.get((row[0], row[1]))
        out.append(list(row) + [(rotation_column(url, in_rotation) or '-') if url else '-'])
    return out


def format_table(rows, columns=COLUMNS):
    """Aligned plain-text table (no colours: it is read in terminals and in CI logs alike)."""
    table = [list(columns)] + [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(columns))]
    lines = ['  '.join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in table]
    lines.insert(1, '  '.join('-' * w for w in widths))
    return lines
