# -*- coding: utf-8 -*-
"""The rollout's next step from the host's state: restart or not, keep, remember, roll back or fail."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.rollout.rollout_state import (
    after_rollback,
    after_wait,
    config_verified,
    group_verdict,
    is_verified,
    outcome,
    pins_of,
    start_action,
    stopped_outcome,
)
from ansible_collections.llmops.sglang.plugins.module_utils.host.procfs import boot_time_of, process_started_at

PINS = {'sglang': '0.5.23', 'compressed-tensors': '0.18.0'}
SAME = {'unit': True, 'env': True, 'secrets.env': True}


def test_process_start_from_proc():
    stat = '4242 (python (x) y) S 1 4242 4242 0 -1 4194560 1 0 0 0 5 3 0 0 20 0 9 0 123456 1000 10 1844 0 0 0'
    assert process_started_at(stat, 1764000000, 100) == 1764000000 + 1234.56
    assert process_started_at('garbage', 1, 100) is None
    assert boot_time_of('cpu 1 2\nbtime 1764000000\nprocesses 9\n') == 1764000000
    assert boot_time_of('cpu 1') is None


@pytest.mark.parametrize('last_good, pins, verified', [
    ({'exists': True, 'same': SAME, 'pins': PINS}, PINS, True),
    ({'exists': True, 'same': dict(SAME, env=False), 'pins': PINS}, PINS, False),
    ({'exists': True, 'same': SAME, 'pins': PINS}, dict(PINS, **{'compressed-tensors': '0.8.1'}), False),
    ({'exists': True, 'same': SAME, 'pins': None}, PINS, False),
    ({'exists': False, 'same': SAME, 'pins': PINS}, PINS, False),
    ({}, PINS, False),
    # Packages other than the pinned ones do not count.
    ({'exists': True, 'same': SAME, 'pins': PINS}, dict(PINS, torch='2.9'), True),
])
def test_verified_means_same_files_and_same_pins(last_good, pins, verified):
    assert is_verified(last_good, pins) is verified


DIGESTS = {'unit': 'u1', 'env': 'e1', 'secrets.env': None}
WANT = {'unit': 'u1', 'env': 'e1', 'secrets.env': None, 'shim': 's1'}


@pytest.mark.parametrize('want_files, last_good, packages, verified', [
    # No secrets file wanted nor saved (None == None); the shim is no part of a saved configuration.
    (WANT, {'exists': True, 'digests': DIGESTS, 'pins': PINS}, PINS, True),
    (dict(WANT, env='e2'), {'exists': True, 'digests': DIGESTS, 'pins': PINS}, PINS, False),
    # A secrets file the role writes, none saved; and the other way round.
    (dict(WANT, **{'secrets.env': 's1'}), {'exists': True, 'digests': DIGESTS, 'pins': PINS}, PINS, False),
    (WANT, {'exists': True, 'digests': dict(DIGESTS, **{'secrets.env': 's1'}), 'pins': PINS}, PINS, False),
    (dict(WANT, **{'secrets.env': 's1'}), {'exists': True, 'digests': dict(DIGESTS, **{'secrets.env': 's1'}),
                                           'pins': PINS}, PINS, True),
    (WANT, {'exists': True, 'digests': DIGESTS, 'pins': PINS}, dict(PINS, sglang='0.5.24'), False),
    (WANT, {'exists': True, 'digests': DIGESTS, 'pins': PINS}, dict(PINS, torch='2.9'), True),
    (WANT, {'exists': True, 'digests': DIGESTS, 'pins': None}, PINS, False),
    (WANT, {'exists': False, 'digests': DIGESTS, 'pins': PINS}, PINS, False),
    # An observation without digests (an older module) never verifies.
    (WANT, {'exists': True, 'same': SAME, 'pins': PINS}, PINS, False),
    (WANT, None, PINS, False),
    ({}, {'exists': True, 'digests': DIGESTS, 'pins': PINS}, PINS, False),
])
def test_config_verified_compares_what_the_role_writes_with_the_saved_copy(want_files, last_good, packages, verified):
    assert config_verified(want_files, last_good, packages) is verified


def test_config_verified_is_not_the_live_files_equality():
    # On disk the files still equal the saved copy (same), but the role will write a new environment: not verified.
    last_good = {'exists': True, 'same': SAME, 'digests': DIGESTS, 'pins': PINS}
    assert is_verified(last_good, PINS) is True
    assert config_verified(dict(WANT, env='e2'), last_good, PINS) is False
    # On disk they differ (an earlier run wrote the new files and was stopped), but the role writes the saved ones.
    last_good = dict(last_good, same=dict(SAME, env=False))
    assert is_verified(last_good, PINS) is False
    assert config_verified(WANT, last_good, PINS) is True


def test_pins_of_absent_packages():
    assert pins_of({}) == {'sglang': None, 'compressed-tensors': None}


@pytest.mark.parametrize('state, changed, service, mtimes, action', [
    ('started', True, {'active_state': 'active', 'started_at': 100.0}, [50.0], 'restart'),
    ('restarted', False, {'active_state': 'active', 'started_at': 100.0}, [50.0], 'restart'),
    ('started', False, {'active_state': 'active', 'started_at': 100.0}, [50.0, None], 'none'),
    # An earlier run wrote the files, then was killed before its restart: the process runs the old configuration.
    ('started', False, {'active_state': 'active', 'started_at': 100.0}, [50.0, 300.0], 'restart'),
    # Started just after its files were written (btime has whole seconds): not stale.
    ('started', False, {'active_state': 'active', 'started_at': 100.0}, [101.5], 'none'),
    # Rebooted during the load: the unit is enabled and loads again; no second restart.
    ('started', False, {'active_state': 'activating', 'started_at': 500.0}, [50.0], 'none'),
    ('started', False, {'active_state': 'failed', 'started_at': None}, [50.0], 'start'),
    ('started', False, {'active_state': 'inactive'}, [], 'start'),
    ('started', False, {}, [], 'start'),
    # Crash-looping between two starts: no process to compare; the wait judges it.
    ('started', False, {'active_state': 'activating', 'started_at': None}, [50.0], 'none'),
])
def test_start_action(state, changed, service, mtimes, action):
    assert start_action(state, changed, service, mtimes) == action


@pytest.mark.parametrize('ok, verified, has, enabled, action', [
    (True, True, True, True, 'keep'),
    (True, False, True, True, 'remember'),
    (True, False, False, True, 'remember'),
    (False, False, True, True, 'rollback'),
    # Whatever earlier runs did: an unverified configuration that fails is replaced, also with nothing changed now.
    (False, False, True, False, 'fail'),
    (False, True, True, True, 'fail'),
    (False, False, False, True, 'fail'),
])
def test_after_wait(ok, verified, has, enabled, action):
    assert after_wait(ok, verified, has, enabled)['action'] == action


def test_after_wait_notes_say_why():
    assert 'nothing was rolled back' in after_wait(False, False, False, True)['note']
    assert 'sglang_rollback is false' in after_wait(False, False, True, False)['note']
    assert 'the host, not the configuration' in after_wait(False, True, True, True)['note']


def test_after_rollback_reports_the_restores_own_failure():
    good = after_rollback(True, elapsed=12.34)
    assert good['rolled_back'] and 'serving again (ready after 12.3 s)' in good['note']
    bad = after_rollback(False, reason='crash_loop', message='restart 1 during the wait')
    assert not bad['rolled_back']
    assert bad['note'] == 'Rolling back failed too (crash_loop: restart 1 during the wait); this host needs attention.'


def test_group_verdict_gives_a_rank_that_passed_rank_0s_failure_without_its_journal():
    canary = {'ready': False, 'reason': 'canary_analysis', 'msg': 'the canary serves worse than it may', 'hint': 'h',
              'journal': ['rank 0 line']}
    taken = group_verdict(None, canary, 'gpu-07')
    assert taken == {'ready': False, 'reason': 'canary_analysis', 'hint': 'h',
                     'msg': 'rank 0 of its multi-node group, on gpu-07, failed: the canary serves worse than it may'}
    assert canary['journal'] == ['rank 0 line'], "rank 0's own record is not changed"
    # a rank's own failure stays its own; rank 0 passed (or is not in this run): nothing to take
    own = {'reason': 'crash_loop', 'msg': 'restart 1'}
    assert group_verdict(own, canary, 'gpu-07') is own
    assert group_verdict(None, None, 'gpu-07') is None
    assert group_verdict(None, {}, 'gpu-07') is None


READY = {'ready': True, 'reason': None, 'elapsed': 12.5, 'msg': 'ready after 12.5 s'}
CRASH = {'ready': False, 'reason': 'scheduler_exception', 'msg': 'Scheduler hit an exception',
         'hint': 'install python3-dev AND python3.X-dev'}


def test_outcome_of_a_ready_instance_has_no_message():
    record = outcome('a.service', READY, None, after_wait(True, False, True, True), {}, PINS, True)
    assert record['outcome'] == 'ready' and record['message'] is None
    assert record['elapsed'] == 12.5 and record['packages'] == PINS
    assert record['rolled_back'] is False and record['changed_config'] is True


def test_outcome_of_a_failed_wait_says_why_and_what_followed():
    # the rollback round answered: the waiter's result is the restored one's (its elapsed), the outcome the failed one's
    restored = dict(READY, elapsed=8.0)
    record = outcome('a.service', restored, CRASH, after_wait(False, False, True, True), None, PINS, True)
    assert record['outcome'] == 'rolled_back' and record['rolled_back'] is True
    assert record['reason'] == 'scheduler_exception' and record['ready'] is False
    assert record['message'] == ('a.service is not ready (scheduler_exception): Scheduler hit an exception '
                                 'Hint: install python3-dev AND python3.X-dev ' + after_rollback(True, 8.0)['note'])
    assert 'ready after 8.0 s' in record['message']
    # the rollback round failed: its own reason and message (the restore's task result, or its wait's)
    failed_too = outcome('a.service', {}, CRASH, after_wait(False, False, True, True),
                         {'reason': 'timeout', 'msg': 'no answer'}, {}, False)
    assert failed_too['outcome'] == 'rollback_failed' and 'Rolling back failed too (timeout: no answer)' in failed_too['message']
    copy_failed = outcome('a.service', {}, CRASH, after_wait(False, False, True, True), {'msg': 'pip: no such version'})
    assert 'Rolling back failed too (error: pip: no such version)' in copy_failed['message']
    # no rollback round (the next step was not a rollback): a rollback failure passed anyway is not read
    not_run = outcome('a.service', {}, CRASH, after_wait(False, False, True, False), {'reason': 'timeout'}, {}, False)
    assert not_run['outcome'] == 'failed' and 'sglang_rollback is false' in not_run['message']
    nothing = outcome('a.service', {}, dict(CRASH, hint=''), after_wait(False, False, False, True), {}, {}, False)
    assert nothing['outcome'] == 'failed' and 'Hint' not in nothing['message']
    assert nothing['message'].endswith('No configuration of this unit was known to work before, so nothing was rolled back.')
    assert '  ' not in nothing['message']


def test_the_outcome_keeps_what_the_canary_analysis_found():
    analysis = {'passed': False, 'baseline': 'recorded T', 'requests': 36, 'errors': 0, 'report': ['...'],
                'figures': {'8': {}}, 'rows': [{'level': 8, 'figure': 'tpot', 'canary': 41.0, 'baseline': 10.0, 'ratio': 4.1,
                                                'threshold': 1.25, 'failed': True, 'separated': True, 'p': 0.05}]}
    failure = dict(analysis, reason='canary_analysis', msg='the canary serves worse than it may')
    record = outcome('u.service', {'ready': True}, failure, canary=analysis)
    assert record['outcome'] == 'failed' and record['message'].startswith('u.service is not ready (canary_analysis): the canary')
    assert record['canary'] == {'passed': False, 'baseline': 'recorded T', 'requests': 36, 'errors': 0, 'rows': [
        {'level': 8, 'figure': 'tpot', 'canary': 41.0, 'baseline': 10.0, 'ratio': 4.1, 'threshold': 1.25, 'failed': True}]}
    # no analysis (skipped, or none ran): no canary key
    assert 'canary' not in outcome('u.service', {'ready': True}, None, canary={'skipped': True})
    assert 'canary' not in outcome('u.service', {'ready': True}, None)


def test_a_run_stopped_before_the_verdict_is_refused_or_failed_at_its_step():
    refused = outcome('a.service', {}, None, stopped={'step': 'Refuse what the host cannot run', 'refusals': ['sglang_port=1'],
                                                      'msg': 'sglang_port=1 is already in use', 'gates_ok': None})
    assert refused == {'ready': False, 'reason': 'refused', 'step': 'Refuse what the host cannot run', 'outcome': 'refused',
                       'message': 'sglang_port=1 is already in use', 'packages': {}, 'rolled_back': False,
                       'changed_config': False}
    gates = stopped_outcome('a.service', {'step': 'The GPUs and the checkpoint pass the gates', 'refusals': [],
                                          'gates_ok': False, 'msg': 'a.service refused before any change: x'})
    assert (gates['outcome'], gates['reason'], gates['message']) == ('refused', 'preflight', 'a.service refused before any change: x')
    # the decision's refusals come first: the gates never ran after them
    assert stopped_outcome('a.service', {'refusals': ['x'], 'gates_ok': False})['reason'] == 'refused'
    # gates that passed, or did not judge, refuse nothing: a later step failed
    for gates_ok in (True, None):
        failed = stopped_outcome('a.service', {'step': 'Render the unit', 'msg': ' unrecognized arguments: --x ',
                                               'gates_ok': gates_ok}, {'sglang': '0.5.23'})
        assert (failed['outcome'], failed['reason'], failed['step']) == ('failed', 'step_failed', 'Render the unit')
        assert failed['message'] == 'unrecognized arguments: --x' and failed['packages'] == {'sglang': '0.5.23'}
    # a failure without a message still says what failed
    assert stopped_outcome('a.service', {})['message'] == 'a.service: a task failed'
    assert stopped_outcome('a.service', None)['step'] == 'a task'
    # whatever a module put in its msg, the rescue that calls this must not fail on it
    assert stopped_outcome('a.service', {'msg': ['x', 1]})['message'] == "['x', 1]"
