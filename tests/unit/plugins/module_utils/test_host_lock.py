# -*- coding: utf-8 -*-
"""The rollout lock's rules: who may take it, when a holder counts as gone, what a refused run is told."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.host.host_lock import (
    decide,
    holder_message,
    new_record,
    owner_token,
    stale_on_this_controller,
)

ME = {'token': owner_token('ctl', 100, '555'), 'controller': 'ctl', 'pid': 100, 'start_ticks': '555', 'user': 'root'}
OTHER = {'token': owner_token('ctl', 200, '777'), 'controller': 'ctl', 'pid': 200, 'start_ticks': '777', 'user': 'ops',
         'since': 1000.0, 'expires': 5000.0, 'path': '/run/llmops-sglang/rollout.lock'}


def test_free_ours_expired_or_broken_can_be_taken():
    assert decide({}, ME['token'], 2000) == 'take'
    assert decide(None, ME['token'], 2000) == 'take'
    assert decide(dict(OTHER, token=ME['token']), ME['token'], 2000) == 'take'
    assert decide(OTHER, ME['token'], 5000.5) == 'take'
    assert decide(OTHER, ME['token'], 2000, break_token=OTHER['token']) == 'take'
    assert decide({'token': 'x', 'expires': 'garbage'}, ME['token'], 2000) == 'take'


def test_another_live_run_holds_it():
    assert decide(OTHER, ME['token'], 2000) == 'held'
    # A break token for some other record does not break this one.
    assert decide(OTHER, ME['token'], 2000, break_token='ctl:9:9') == 'held'


def test_renewal_keeps_since_and_moves_the_lease():
    first = new_record({}, ME, 2000.0, 600)
    assert first['since'] == 2000.0 and first['expires'] == 2600.0
    again = new_record(first, ME, 2300.0, 600)
    assert again['since'] == 2000.0 and again['expires'] == 2900.0
    taken = new_record(OTHER, ME, 6000.0, 600)
    assert taken['since'] == 6000.0 and taken['token'] == ME['token']


def test_message_names_the_holder_and_when():
    msg = holder_message(OTHER, 'gpu-01', 2000.0)
    assert msg.startswith('gpu-01 is being changed by another run: ansible-playbook pid 200 of ops on controller ctl, '
                          'since 1970-01-01 00:16:40 UTC; its lease ends 1970-01-01 01:23:20 UTC (in 3000 s)')
    assert '/run/llmops-sglang/rollout.lock' in msg


def test_a_dead_process_of_this_controller_is_stale_a_live_one_or_another_controller_is_not():
    assert stale_on_this_controller(OTHER, 'ctl', lambda pid: None)
    # The pid was reused by another process: its start time differs.
    assert stale_on_this_controller(OTHER, 'ctl', lambda pid: '999')
    assert not stale_on_this_controller(OTHER, 'ctl', lambda pid: '777')
    assert not stale_on_this_controller(OTHER, 'elsewhere', lambda pid: None)
    assert not stale_on_this_controller({}, 'ctl', lambda pid: None)
