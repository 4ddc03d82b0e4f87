# -*- coding: utf-8 -*-
"""The canary's live baseline: a peer later in the rollout, of the same box class, on the same old configuration and
about to get the same new one, reachable, with the canary's key - one per canary (issue 26)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.rollout.canary_peers import (
    baseline_lines,
    canary_baselines,
)

UNIT = 'sglang-k26.service'
RESTART = {'action': 'restart', 'config_changed': True, 'changes': ['environment changed']}


def host(name, **overrides):
    """One host's facts as the filter builds them: the old configuration e1 running, e2 wanted."""
    facts = {
        'class': 'pcie', 'listen': '0.0.0.0', 'api_key': 'sk-1',
        'plans': {UNIT: dict(RESTART)},
        'wants': {UNIT: {'files': {'unit': 'u1', 'env': 'e2', 'shim': 'any'}, 'pins': {'sglang': '0.5.23'}}},
        'observed': {'instances': {UNIT: {'files': {'unit': 'u1', 'env': 'e1', 'shim': 's1'},
                                          'service': {'exists': True, 'active_state': 'active'}}},
                     'venvs': {'': {'packages': {'sglang': '0.5.23'}}}},
        'url': {UNIT: 'http://%s:30000' % name},
    }
    facts.update(overrides)
    return facts


def test_the_first_qualifying_peer_later_in_the_rollout_is_the_baseline():
    hosts = {'a': host('a'), 'b': host('b'), 'c': host('c')}
    assert canary_baselines(['a'], ['b', 'c'], hosts) == {'a': {UNIT: {'host': 'b', 'url': 'http://b:30000'}}}


def test_two_canaries_get_two_peers_and_a_third_gets_none():
    hosts = {'a': host('a'), 'b': host('b'), 'c': host('c'), 'd': host('d')}
    chosen = canary_baselines(['a', 'b', 'c'], ['d'], hosts)
    assert chosen['a'][UNIT]['host'] == 'd'
    assert 'why' in chosen['b'][UNIT] and 'why' in chosen['c'][UNIT]
    chosen = canary_baselines(['a', 'b'], ['c', 'd'], hosts)
    assert [chosen[h][UNIT]['host'] for h in ('a', 'b')] == ['c', 'd']


@pytest.mark.parametrize('peer, why', [
    (dict(**{'class': 'nvlink'}), 'box class nvlink, not pcie'),
    (dict(listen='127.0.0.1'), 'loopback'),
    (dict(listen=None), 'loopback'),
    (dict(api_key='sk-2'), 'another API key'),
    (dict(plans={UNIT: {'action': 'start', 'config_changed': True}}), 'its plan is start'),
    (dict(plans={UNIT: {'action': 'restart', 'config_changed': False}}), 'its plan is restart, not a restart'),
])
def test_a_peer_that_is_no_fair_yardstick_is_passed_over_and_the_plan_says_why(peer, why):
    hosts = {'a': host('a'), 'b': host('b', **peer)}
    choice = canary_baselines(['a'], ['b'], hosts)['a'][UNIT]
    assert 'host' not in choice and why in choice['why'] and choice['why'].startswith('no peer later in the rollout (b: ')


def test_a_peer_on_another_old_or_new_configuration_or_not_running_is_passed_over():
    other_old = host('b')
    other_old['observed']['instances'][UNIT]['files']['env'] = 'e0'
    other_new = host('b', wants={UNIT: {'files': {'unit': 'u1', 'env': 'e3', 'shim': 'any'}, 'pins': {'sglang': '0.5.23'}}})
    other_pin = host('b')
    other_pin['observed']['venvs']['']['packages']['sglang'] = '0.5.22'
    stopped = host('b')
    stopped['observed']['instances'][UNIT]['service']['active_state'] = 'failed'
    for peer, why in ((other_old, 'another old or new configuration'), (other_new, 'another old or new configuration'),
                      (other_pin, 'another old or new configuration'), (stopped, 'not a restart of a running server')):
        choice = canary_baselines(['a'], ['b'], {'a': host('a'), 'b': peer})['a'][UNIT]
        assert why in choice['why'], choice


def test_a_multi_node_canary_or_peer_has_no_live_baseline():
    ranked = {UNIT: {'files': {'unit': 'u1', 'env': 'e2'}, 'pins': {'sglang': '0.5.23'}, 'nodes': ['a', 'x']}}
    assert 'multi-node' in canary_baselines(['a'], ['b'], {'a': host('a', wants=ranked), 'b': host('b')})['a'][UNIT]['why']
    assert 'multi-node' in canary_baselines(['a'], ['b'], {'a': host('a'), 'b': host('b', wants=ranked)})['a'][UNIT]['why']


def test_recorded_mode_and_no_later_host_and_bad_mode():
    hosts = {'a': host('a'), 'b': host('b')}
    assert canary_baselines(['a'], ['b'], hosts, 'recorded')['a'][UNIT] == {'why': 'k26_canary_baseline=recorded'}
    assert canary_baselines(['a'], [], hosts)['a'][UNIT] == {'why': 'no host later in the rollout runs it'}
    with pytest.raises(ValueError, match=r"k26_canary_baseline='live': expected one of peer, recorded"):
        canary_baselines(['a'], ['b'], hosts, 'live')


def test_the_plan_prints_each_choice():
    lines = baseline_lines(canary_baselines(['a'], ['b'], {'a': host('a'), 'b': host('b')}))
    assert lines == ['canary a %s: live baseline b (http://b:30000: the same box class and old configuration)' % UNIT]
    lines = baseline_lines(canary_baselines(['a'], [], {'a': host('a')}))
    assert lines == ['canary a %s: no live baseline (no host later in the rollout runs it): the figures recorded at '
                     'its last passed analysis, if any' % UNIT]


def hostvars_of(name, **overrides):
    """What the filter reads of a host's hostvars after the plan play (the plan's facts and the inventory's)."""
    facts = host(name)
    values = {'k26_plan': facts['plans'], 'sglang_plan_desired': facts['wants'], '__k26_observed': facts['observed'],
              'sglang_hardware_profile': 'pcie', 'sglang_host': '0.0.0.0', 'sglang_api_key': 'sk-1',
              'ansible_host': '10.0.0.%d' % (ord(name) - 96), 'k26_instances': [{'name': 'sglang-k26', 'port': 30001}]}
    values.update(overrides)
    return values


def test_the_filter_reads_the_plan_and_the_inventory_and_skips_canaries_not_analysed():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.llmops.sglang.plugins.filter.rollout_plan import sglang_canary_baselines

    rollout = {'hosts': ['a', 'b', 'c'], 'batches': [1, 2]}
    hostvars = {'a': hostvars_of('a'), 'b': hostvars_of('b', k26_box_class='b300'), 'c': hostvars_of('c')}
    assert sglang_canary_baselines(rollout, hostvars) == {'a': {UNIT: {'host': 'c', 'url': 'http://10.0.0.3:30001'}}}
    # k26_box_class set on both: it decides over the hardware profile
    hostvars['a']['k26_box_class'] = 'b300'
    assert sglang_canary_baselines(rollout, hostvars)['a'][UNIT]['host'] == 'b'
    hostvars['a']['sglang_canary_analysis'] = 'never'
    assert sglang_canary_baselines(rollout, hostvars) == {}
    with pytest.raises(AnsibleFilterError, match='k26_canary_baseline=.yes.: expected one of peer, recorded'):
        sglang_canary_baselines(rollout, hostvars, 'yes')
