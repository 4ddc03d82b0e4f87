# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report: one line per host and instance, readable at a glance. Pure formatting, no I/O."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.sglang_signatures import PHASES

PHASE_LABELS = dict((phase.name, phase.label) for phase in PHASES)
COLUMNS = ('host', 'instance', 'state', 'time to ready', 'phases (s since start-up began)', 'sglang / compressed-tensors / torch',
           'GPU memory')


def _seconds(value):
    if value is None or value == '':
        return '-'
    value = float(value)
    if value >= 60:
        return '%dm%02ds' % (value // 60, value % 60)
    return '%.1fs' % value


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
    return _seconds(time_to_ready_seconds(dep))


def _versions(packages):
    packages = packages or {}
    return ' / '.join(str(packages.get(name) or '-') for name in ('sglang', 'compressed-tensors', 'torch'))


def _gpu_memory(gpus):
    if not gpus:
        return '-'
    used = sum(g.get('memory_used_mib') or 0 for g in gpus) / 1024.0
    total = sum(g.get('memory_total_mib') or 0 for g in gpus) / 1024.0
    return '%d/%d GiB on %d GPU%s' % (round(used), round(total), len(gpus), '' if len(gpus) == 1 else 's')


def report_rows(host, deployments, info=None):
    """Rows for one host from the server role's ``sglang_deployments`` fact and/or an sglang_info result."""
    rows = []
    info = info or {}
    services = info.get('services') or {}
    packages = (info.get('venv') or {}).get('packages') or {}
    seen = set()
    for unit, dep in sorted((deployments or {}).items()):
        seen.add(unit)
        state = 'ready' if dep.get('ready') else (dep.get('reason') or dep.get('state') or 'not ready')
        if dep.get('rolled_back'):
            state += ' (rolled back)'
        rows.append([host, unit, state, _time_to_ready(dep) if dep.get('ready') else '-',
                     _timeline(dep.get('phases')), _versions(dep.get('packages') or packages), _gpu_memory(dep.get('gpus'))])
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
                     _versions(packages), _gpu_memory(info.get('gpus'))])
    if not rows:
        rows.append([host, '-', 'not reached', '-', '-', '-', '-'])
    return rows


def format_table(rows, columns=COLUMNS):
    """Aligned plain-text table (no colours: it is read in terminals and in CI logs alike)."""
    table = [list(columns)] + [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(columns))]
    lines = ['  '.join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in table]
    lines.insert(1, '  '.join('-' * w for w in widths))
    return lines
