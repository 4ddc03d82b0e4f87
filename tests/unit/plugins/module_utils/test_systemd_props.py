# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsing `systemctl show` and `journalctl -o json` output (recorded from systemd 252)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.llmops.sglang.plugins.module_utils.host import systemd_props as sp

SHOW_FAILED = """Id=sglang-k26.service
ExecMainStartTimestampMonotonic=5123456789
ExecMainPID=48121
ExecMainCode=2
ExecMainStatus=9
MainPID=0
NRestarts=0
Result=signal
LoadState=loaded
ActiveState=failed
SubState=failed
InvocationID=0e2c1e4f7a3b4d0c9f8e7d6c5b4a3921
ActiveEnterTimestampMonotonic=5123456900
"""

SHOW_NOT_FOUND = """Id=nope.service
LoadState=not-found
ActiveState=inactive
SubState=dead
Result=success
NRestarts=0
ExecMainStatus=0
ExecMainCode=0
ExecMainPID=0
MainPID=0
InvocationID=
"""


def test_parse_show_failed_unit():
    p = sp.unit_props(sp.parse_show(SHOW_FAILED))
    assert p.name == 'sglang-k26.service'
    assert (p.active_state, p.sub_state, p.result) == ('failed', 'failed', 'signal')
    assert (p.exec_main_code, p.exec_main_status, p.main_pid) == ("killed", 9, 0)
    assert p.invocation_id == '0e2c1e4f7a3b4d0c9f8e7d6c5b4a3921'
    assert p.exec_main_start_monotonic_us == 5123456789
    summary = sp.unit_summary(p)
    assert summary['active_state'] == 'failed' and summary['exec_main_status'] == 9


def test_parse_show_not_found_and_empty():
    p = sp.unit_props(sp.parse_show(SHOW_NOT_FOUND))
    assert p.load_state == 'not-found' and p.invocation_id == '' and p.exec_main_code == ''
    empty = sp.unit_props(sp.parse_show(''), 'x.service')
    assert empty.name == 'x.service' and empty.n_restarts == 0
    assert sp.unit_summary(None)['active_state'] is None


def rec(**fields):
    base = {'__CURSOR': 's=ab;i=1', '__REALTIME_TIMESTAMP': '1780151760000000', '__MONOTONIC_TIMESTAMP': '5123456789'}
    base.update(fields)
    return json.dumps(base)


def test_parse_journal_json():
    text = '\n'.join([
        rec(MESSAGE='[2026-05-30 14:36:10 TP0] Init torch distributed begin.', _SYSTEMD_UNIT='sglang-k26.service',
            _SYSTEMD_INVOCATION_ID='inv1', __CURSOR='s=ab;i=2'),
        rec(MESSAGE=list(bytearray(u'caf\u00e9 \xff'.encode('latin-1'))), _SYSTEMD_UNIT='sglang-k26.service'),
        rec(MESSAGE=None, _SYSTEMD_UNIT='sglang-k26.service'),
        rec(MESSAGE="sglang-k26.service: Failed with result 'signal'.", _SYSTEMD_UNIT='init.scope', UNIT='sglang-k26.service',
            INVOCATION_ID='inv1', _PID='1', __CURSOR='s=ab;i=9'),
        'not json',
        '',
    ])
    entries = sp.parse_journal_json(text, 'sglang-k26.service')
    assert len(entries) == 4
    first = entries[0]
    assert first.message.endswith('Init torch distributed begin.')
    assert (first.invocation_id, first.from_manager, first.cursor) == ('inv1', False, 's=ab;i=2')
    assert first.realtime_us == 1780151760000000 and first.monotonic_us == 5123456789
    assert entries[1].message.startswith('caf')          # bytes that are not UTF-8 do not crash
    assert entries[2].message == ''
    assert entries[3].from_manager and entries[3].invocation_id == 'inv1'
    assert entries[-1].cursor == 's=ab;i=9'


def test_long_lines_are_kept_whole():
    long_line = 'x' * 70000
    entries = sp.parse_journal_json(rec(MESSAGE=long_line, _SYSTEMD_UNIT='u.service'))
    assert entries[0].message == long_line


def test_current_run_entries():
    e = sp.JournalEntry
    entries = [e('old', 'c1', 100, 0, 'old-inv', False), e('fast exit line', 'c2', 250, 0, '', False),
               e('older id-less', 'c3', 150, 0, '', False), e('current', 'c4', 300, 0, 'cur', False)]
    assert [x.message for x in sp.current_run_entries(entries, 'cur', 200)] == ['fast exit line', 'current']
    assert [x.message for x in sp.current_run_entries(entries, 'cur', None)] == ['current']


def test_commands():
    assert sp.show_cmd('/bin/systemctl', 'u.service')[:4] == ['/bin/systemctl', 'show', '--no-pager', '-p']
    assert 'NRestarts' in sp.show_cmd('/bin/systemctl', 'u.service')[4]
    cmd = sp.journal_cmd('/bin/journalctl', 'u.service', after_cursor='s=1;i=2')
    assert cmd[:3] == ['/bin/journalctl', '-u', 'u.service'] and '--all' in cmd and '--after-cursor=s=1;i=2' in cmd
    assert sp.journal_cmd('/bin/journalctl', 'u.service', lines=400)[-2:] == ['-n', '400']
    assert sp.operator_journal_cmd('u.service', since_epoch=1780151760.7) == 'journalctl -u u.service --no-pager --since @1780151760'
    assert sp.operator_journal_cmd('u.service', invocation_ids=['abc']) == 'journalctl _SYSTEMD_INVOCATION_ID=abc --no-pager'
