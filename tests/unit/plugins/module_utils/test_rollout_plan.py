# -*- coding: utf-8 -*-
"""The rollout plan: what each instance needs, where each host goes, and batches that keep multi-node groups whole."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.rollout.rollout_plan import (
    host_route,
    normalize_serial,
    plan_host,
    plan_instance,
    plan_rows,
    plan_summary,
    rollout_order,
)

PINS = {'sglang': '0.5.23+standin', 'compressed-tensors': '0.18.0'}
FILES = {'unit': 'u1', 'env': 'e1', 'secrets.env': None, 'shim': 'any'}
RUNNING = {'exists': True, 'active_state': 'active', 'result': 'success', 'started_at': 1000.0}
VERIFIED = {'exists': True, 'same': {'unit': True, 'env': True, 'secrets.env': True}, 'pins': dict(PINS)}


def want(**overrides):
    base = {'state': 'started', 'files': dict(FILES), 'pins': {'compressed-tensors': '0.18.0'}}
    base.update(overrides)
    return base


def seen(**overrides):
    base = {'files': {'unit': 'u1', 'env': 'e1', 'secrets.env': None, 'shim': None}, 'service': dict(RUNNING),
            'mtimes': [900.0, 950.0], 'last_good': VERIFIED, 'packages': dict(PINS), 'pip': True, 'apt_missing': [],
            'missing': []}
    base.update(overrides)
    return base


def test_a_verified_running_instance_needs_nothing():
    plan = plan_instance(want(), seen())
    assert plan == {'action': 'none', 'changes': [], 'restart': False, 'why': 'the verified configuration runs'}


def test_a_changed_file_or_pin_restarts():
    plan = plan_instance(want(files=dict(FILES, env='e2')), seen())
    assert (plan['action'], plan['restart'], plan['changes']) == ('restart', True, ['environment changed'])
    plan = plan_instance(want(pins={'compressed-tensors': '0.19.0'}), seen())
    assert plan['action'] == 'restart' and plan['changes'] == ['pin compressed-tensors 0.18.0 -> 0.19.0']


def test_a_new_secrets_file_and_a_removed_one_both_count():
    assert plan_instance(want(files=dict(FILES, **{'secrets.env': 's1'})), seen())['changes'] == ['secrets changed']
    removed = seen(files={'unit': 'u1', 'env': 'e1', 'secrets.env': 's0', 'shim': None})
    assert plan_instance(want(), removed)['action'] == 'restart'


def test_a_change_on_a_stopped_unit_starts_it():
    plan = plan_instance(want(files=dict(FILES, unit='u2')), seen(service={'exists': False}))
    assert plan['action'] == 'start' and 'absent' in plan['why']


def test_a_stopped_verified_unit_is_started():
    plan = plan_instance(want(), seen(service={'exists': True, 'active_state': 'inactive'}))
    assert (plan['action'], plan['restart']) == ('start', True)


def test_a_failed_unverified_configuration_with_a_last_good_one_rolls_back():
    lg = dict(VERIFIED, same={'unit': False, 'env': True, 'secrets.env': True})
    plan = plan_instance(want(), seen(service={'exists': True, 'active_state': 'failed'}, last_good=lg))
    assert plan['action'] == 'rollback' and 'last known good' in plan['why']


def test_a_process_older_than_its_files_restarts():
    plan = plan_instance(want(), seen(mtimes=[900.0, 1010.0]))
    assert plan['action'] == 'restart' and 'older than its files' in plan['why']


def test_an_unverified_running_configuration_is_verified():
    plan = plan_instance(want(), seen(last_good={'exists': False}))
    assert (plan['action'], plan['restart']) == ('verify', False)


def test_packages_pip_and_directories_change_without_a_restart():
    plan = plan_instance(want(), seen(apt_missing=['python3.11-dev'], pip=False, missing=['/etc/sglang']))
    assert (plan['action'], plan['restart']) == ('change', False)
    assert plan['changes'] == ['install python3.11-dev', 'bootstrap pip', 'create /etc/sglang']


def test_restarted_and_stopped_states():
    assert plan_instance(want(state='restarted'), seen())['action'] == 'restart'
    assert plan_instance(want(state='stopped'), seen())['action'] == 'stop'
    assert plan_instance(want(state='stopped'), seen(service={'exists': True, 'active_state': 'inactive'}))['action'] == 'none'
    assert plan_instance(want(state='absent'), seen(service={'exists': False}))['action'] == 'none'


def test_plan_host_reads_the_observation_and_keeps_secrets_apart():
    observed = {'instances': {'a.service': {'files': {'unit': 'u1', 'env': 'e1', 'secrets.env': 's1', 'shim': None},
                                            'service': RUNNING, 'mtimes': [1.0], 'last_good': VERIFIED}},
                'venvs': {'/v': {'packages': PINS, 'pip': True, 'python_h': True}}, 'apt_missing': [], 'missing': []}
    wants = {'a.service': want(venv='/v')}
    assert plan_host(wants, observed, {'a.service': 's1'})['a.service']['action'] == 'none'
    assert plan_host(wants, observed, {'a.service': None})['a.service']['action'] == 'restart'
    broken = dict(observed, venvs={'/v': {'error': 'no Python at /v/bin/python'}})
    assert plan_host(wants, broken, {'a.service': 's1'})['a.service']['action'] == 'restart'  # pins unknown: absent


def test_routes_and_summary():
    assert host_route({'a': {'action': 'none'}, 'b': {'action': 'change'}}) == 'apply'
    assert host_route({'a': {'action': 'change'}, 'b': {'action': 'verify'}}) == 'rollout'
    assert host_route({'a': {'action': 'none'}}) == 'done'
    assert host_route({}) == 'done'
    assert plan_summary(['done', 'rollout', 'done']) == (
        '3 hosts: 1 through the canary and batches, 0 changed in place without a restart, 2 with nothing to do')


def test_rows():
    rows = plan_rows('h1', {'a.service': {'action': 'restart', 'changes': ['unit changed'], 'restart': True, 'why': 'w'}})
    assert rows == [['h1', 'a.service', 'restart', 'unit changed', 'yes', 'w']]
    assert plan_rows('h2', None)[0][2] == 'not planned'


def test_batches_follow_the_policy():
    hosts = ['h%d' % i for i in range(1, 10)]
    assert rollout_order(hosts, {}, [1, '25%']) == {'hosts': hosts, 'batches': [1, 2, 2, 2, 2]}
    assert rollout_order(hosts, {}, '100%')['batches'] == [9]
    assert rollout_order(hosts, {}, 4)['batches'] == [4, 4, 1]
    assert rollout_order([], {}, [1, '25%']) == {'hosts': [], 'batches': []}


def test_a_multinode_group_is_pulled_in_whole_and_never_split():
    units = {'r0': ['r0', 'r1'], 'r1': ['r0', 'r1']}
    # Only rank 1 changed: rank 0 joins it, and the canary batch holds both.
    order = rollout_order(['r1', 'h1', 'h2'], units, [1, '25%'])
    assert order['hosts'] == ['r1', 'r0', 'h1', 'h2']
    assert order['batches'] == [2, 1, 1]
    order = rollout_order(['h1', 'r0', 'r1', 'h2'], units, [1, 2])
    assert order == {'hosts': ['h1', 'r0', 'r1', 'h2'], 'batches': [1, 2, 1]}


@pytest.mark.parametrize('bad', [[], 0, '0%', 'x', [1, 'ten'], -2, 1.5])
def test_a_bad_serial_is_refused(bad):
    with pytest.raises(ValueError, match='k26_serial'):
        normalize_serial(bad)
