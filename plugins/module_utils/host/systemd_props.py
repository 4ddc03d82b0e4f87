# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for `systemctl show` and `journalctl -o json`, and the command lines that feed them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
from collections import namedtuple

# What one poll asks systemd (one `systemctl show` call).
SHOW_PROPERTIES = (
    'Id', 'LoadState', 'ActiveState', 'SubState', 'Result', 'NRestarts',
    'ExecMainStatus', 'ExecMainCode', 'MainPID', 'InvocationID', 'ExecMainStartTimestampMonotonic', 'ControlGroup', 'Job',
)

# Journal fields the waiter reads; -o json always adds __CURSOR and the timestamps.
JOURNAL_FIELDS = ('MESSAGE', '_SYSTEMD_UNIT', 'UNIT', '_SYSTEMD_INVOCATION_ID', 'INVOCATION_ID', '_PID')

# si_code values systemd stores in ExecMainCode (CLD_*).
EXEC_MAIN_CODES = {1: 'exited', 2: 'killed', 3: 'dumped', 4: 'trapped', 5: 'stopped', 6: 'continued'}

UnitProps = namedtuple('UnitProps', [
    'name', 'load_state', 'active_state', 'sub_state', 'result', 'n_restarts',
    'exec_main_status', 'exec_main_code', 'main_pid', 'invocation_id',
    'exec_main_start_monotonic_us', 'control_group', 'job',
])

JournalEntry = namedtuple('JournalEntry', [
    'message', 'cursor', 'realtime_us', 'monotonic_us', 'invocation_id', 'from_manager',
])


def _int(value, default=0):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def parse_show(text):
    """`systemctl show -p A,B UNIT` output -> {property: value} (values as strings)."""
    props = {}
    for line in text.splitlines():
        key, sep, value = line.partition('=')
        if sep and key:
            props[key.strip()] = value
    return props


def unit_props(props, unit=None):
    """Typed UnitProps from parse_show()'s dict."""
    code = _int(props.get('ExecMainCode'))
    return UnitProps(
        name=props.get('Id') or unit or '',
        load_state=props.get('LoadState', ''),
        active_state=props.get('ActiveState', ''),
        sub_state=props.get('SubState', ''),
        result=props.get('Result', ''),
        n_restarts=_int(props.get('NRestarts')),
        exec_main_status=_int(props.get('ExecMainStatus')),
        exec_main_code=EXEC_MAIN_CODES.get(code, str(code) if code else ''),
        main_pid=_int(props.get('MainPID')),
        invocation_id=props.get('InvocationID', '') or '',
        exec_main_start_monotonic_us=_int(props.get('ExecMainStartTimestampMonotonic')),
        control_group=props.get('ControlGroup', '') or '',
        job=(props.get('Job', '') or '').strip(),
    )


def unit_summary(p):
    """The `unit` return value."""
    if p is None:
        return dict(name=None, load_state=None, active_state=None, sub_state=None, result=None,
                    exec_main_status=None, exec_main_code=None, main_pid=None, n_restarts=None, invocation_id=None)
    return dict(name=p.name, load_state=p.load_state, active_state=p.active_state, sub_state=p.sub_state,
                result=p.result, exec_main_status=p.exec_main_status, exec_main_code=p.exec_main_code,
                main_pid=p.main_pid, n_restarts=p.n_restarts, invocation_id=p.invocation_id)


def _message(value):
    """MESSAGE is a string, null (too large without --all) or a list of byte values (not UTF-8)."""
    if value is None:
        return ''
    if isinstance(value, list):
        try:
            return bytes(bytearray(value)).decode('utf-8', 'replace')
        except (TypeError, ValueError):
            return ''
    return value if isinstance(value, str) else str(value)


def _field(record, name):
    value = record.get(name)
    if isinstance(value, list):
        # a field that occurs several times in one entry: the last one wins
        value = value[-1] if value and not isinstance(value[0], int) else _message(value)
    return value if isinstance(value, str) else ''


def parse_journal_json(text, unit=None):
    """`journalctl -o json` output (one object a line) -> list of JournalEntry, malformed lines skipped.

    from_manager marks lines that systemd (PID 1) logged about the unit (Started, Main process exited...).
    """
    entries = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith('{'):
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict):
            continue
        own_unit = _field(rec, '_SYSTEMD_UNIT')
        from_manager = bool(_field(rec, 'UNIT')) and (own_unit != _field(rec, 'UNIT') or _field(rec, '_PID') == '1')
        if unit and own_unit and own_unit != unit and not from_manager:
            from_manager = True
        entries.append(JournalEntry(
            message=_message(rec.get('MESSAGE')),
            cursor=_field(rec, '__CURSOR'),
            realtime_us=_int(_field(rec, '__REALTIME_TIMESTAMP')),
            monotonic_us=_int(_field(rec, '__MONOTONIC_TIMESTAMP')),
            invocation_id=_field(rec, '_SYSTEMD_INVOCATION_ID') or _field(rec, 'INVOCATION_ID'),
            from_manager=from_manager,
        ))
    return entries


def current_run_entries(entries, invocation_id, start_realtime_us=None):
    """The lines of the unit's current run out of a backfill read (the last lines of the unit).

    Lines carry the run's invocation id; a process that exits very fast can lose it, so lines
    without one count when they are not older than the run's start.
    """
    keep = []
    for e in entries:
        if e.invocation_id:
            if e.invocation_id == invocation_id:
                keep.append(e)
        elif start_realtime_us and e.realtime_us >= start_realtime_us:
            keep.append(e)
    return keep


def show_cmd(systemctl, unit):
    return [systemctl, 'show', '--no-pager', '-p', ','.join(SHOW_PROPERTIES), '--', unit]


def journal_cmd(journalctl, unit, after_cursor=None, lines=None):
    """argv of one incremental journal read: only the unit's lines after the cursor, whole (--all)."""
    cmd = [journalctl, '-u', unit, '-o', 'json', '--all', '--no-pager', '--output-fields=' + ','.join(JOURNAL_FIELDS)]
    if after_cursor:
        cmd.append('--after-cursor=' + after_cursor)
    if lines is not None:
        cmd.extend(['-n', str(int(lines))])
    return cmd


def operator_journal_cmd(unit, since_epoch=None, invocation_ids=()):
    """The command an operator runs to see every line of the runs the wait watched."""
    if len(invocation_ids) == 1 and since_epoch is None:
        return 'journalctl _SYSTEMD_INVOCATION_ID=%s --no-pager' % invocation_ids[0]
    cmd = 'journalctl -u %s --no-pager' % unit
    if since_epoch is not None:
        cmd += ' --since @%d' % int(since_epoch)
    return cmd
