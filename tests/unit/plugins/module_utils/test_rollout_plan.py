# -*- coding: utf-8 -*-
"""The rollout plan: what each instance needs, where each host goes, and batches that keep multi-node groups whole;
the role's one decision per observation, the plan's own when the host did not move since (compare-and-swap)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.rollout.rollout_plan import (
    converged,
    decide,
    host_route,
    instance_seen,
    moved_keys,
    normalize_serial,
    plan_host,
    plan_instance,
    plan_rows,
    plan_seen,
    rounds,
    plan_summary,
    refused_units,
    host_refusals,
    hosts_by_route,
    rollout_order,
    start_steps,
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


def test_hosts_are_split_by_route_in_the_play_order():
    split = hosts_by_route([('h1', 'apply'), ('h2', 'rollout'), ('h3', 'done'), ('h4', 'apply')])
    assert split == {'rollout': ['h2'], 'apply': ['h1', 'h4'], 'done': ['h3']}
    assert hosts_by_route([]) == {'rollout': [], 'apply': [], 'done': []}


@pytest.mark.parametrize('route', [None, 'restart', ''])
def test_a_host_without_a_route_is_refused_by_name(route):
    with pytest.raises(ValueError, match=r"h2 has no route after the plan .*expected rollout, apply or done"):
        hosts_by_route([('h1', 'done'), ('h2', route)])


@pytest.mark.parametrize('bad', [[], 0, '0%', 'x', [1, 'ten'], -2, 1.5])
def test_a_bad_serial_is_refused(bad):
    with pytest.raises(ValueError, match='k26_serial'):
        normalize_serial(bad)


# --- decide: one observation, one decision, the plan's when the host did not move (compare-and-swap) ---

SAVED = {'unit': 'u1', 'env': 'e1', 'secrets.env': None}
LAST_GOOD = {'exists': True, 'same': {'unit': True, 'env': True, 'secrets.env': True}, 'digests': dict(SAVED),
             'pins': dict(PINS)}
SERVICE = {'exists': True, 'active_state': 'active', 'sub_state': 'running', 'result': 'success',
           'invocation_id': 'inv-1', 'since': 'Thu 2026-12-03 01:00:00 UTC', 'started_at': 1000.0}


def desired(name, **overrides):
    """One entry of sglang_plan_desired (the role's plan.yml/validate.yml)."""
    base = {'state': 'started', 'venv': '/opt/sglang/venv', 'python_headers': True, 'multinode_group': '', 'nodes': [],
            'pins': {'compressed-tensors': '0.18.0'}, 'files': {'unit': 'u1', 'env': 'e1', 'shim': 'any'},
            'apt': ['python3-dev', 'python{python_major_minor}-dev', 'python3-requests'],
            'directories': ['/etc/sglang', '/var/lib/llmops-sglang/server/%s' % name], 'users': ['sglang'],
            'groups': ['sglang'],
            'observe': {'unit': '%s.service' % name, 'files': {}, 'last_good_dir': '/lg/%s' % name, 'mtimes': [],
                        'model_path': '/models/%s' % name, 'port': 30000}}
    base.update(overrides)
    return base


def host(**overrides):
    """A host as sglang_observe would read it: installed Debian packages, directories, accounts, venvs, instances."""
    base = {'dpkg': {'python3-dev', 'python3-requests'}, 'dirs': {'/etc/sglang'}, 'users': {'root'},
            'groups': {'root'},
            'venvs': {'/opt/sglang/venv': {'path': '/opt/sglang/venv', 'exists': True, 'python_major_minor': '3.11',
                                           'python_version': '3.11.7', 'pip': True, 'python_h': True, 'packages': dict(PINS, torch=None)}},
            'instances': {}}
    base.update(overrides)
    return base


def instance(**overrides):
    base = {'files': {'unit': 'u1', 'env': 'e1', 'secrets.env': None, 'shim': None}, 'service': dict(SERVICE),
            'mtimes': [900.0, 950.0], 'last_good': LAST_GOOD,
            'model': {'path': '/models/x', 'exists': True, 'complete': True, 'problem': ''}, 'port_in_use': True}
    base.update(overrides)
    return base


def _union(wants, key):
    """deploy_k26.yml's `map(attribute=key) | flatten | unique`: the first occurrence's order."""
    out = []
    for want in wants:
        for item in ([want[key]] if isinstance(want[key], str) else want[key]):
            if item not in out:
                out.append(item)
    return out


def observe(state, wants):
    """What sglang_observe returns for these wants, the way the plan (every instance) and the role (one) call it:
    apt_packages, directories, users, groups the union over the wants; {python_major_minor} from the first venv."""
    venvs = _union(wants, 'venv')
    first = state['venvs'].get(venvs[0], {}) if venvs else {}
    names = sorted(set(name.replace('{python_major_minor}', first.get('python_major_minor') or '3')
                       for name in _union(wants, 'apt')))
    missing = ([d for d in _union(wants, 'directories') if d not in state['dirs']]
               + ['user %s' % u for u in _union(wants, 'users') if u not in state['users']]
               + ['group %s' % g for g in _union(wants, 'groups') if g not in state['groups']])
    units = [want['observe']['unit'] for want in wants]
    return {'changed': False,
            'instances': dict((unit, state['instances'][unit]) for unit in units if unit in state['instances']),
            'venvs': dict((path, state['venvs'][path]) for path in venvs if path in state['venvs']),
            'apt_missing': [name for name in names if name not in state['dpkg']], 'missing': missing}


def two_instance_host(**overrides):
    """Two instances on one venv: a.service wants python3-jmespath and user svc-a as well, b.service its own
    directory first; /var/lib/.../a and b, user sglang, svc-a, group sglang and python3.11-dev are missing."""
    wants = {
        'a.service': desired('a', apt=desired('a')['apt'] + ['python3-jmespath'], users=['sglang', 'svc-a']),
        'b.service': desired('b', directories=['/var/lib/llmops-sglang/server/b', '/etc/sglang']),
    }
    state = host(instances={'a.service': instance(), 'b.service': instance(service=dict(SERVICE, invocation_id='inv-2'))})
    state.update(overrides)
    return wants, state


def test_instance_seen_of_the_plans_observation_equals_the_roles_of_one_instance():
    wants, state = two_instance_host()
    whole = observe(state, list(wants.values()))
    # The plan's observation holds the union: both instances' directories, users and packages.
    assert whole['apt_missing'] == ['python3-jmespath', 'python3.11-dev']
    assert whole['missing'] == ['/var/lib/llmops-sglang/server/a', '/var/lib/llmops-sglang/server/b', 'user sglang',
                                'user svc-a', 'group sglang']
    for unit, want in wants.items():
        alone = observe(state, [want])
        assert instance_seen(whole, unit, want) == instance_seen(alone, unit, want), unit
    seen_a = instance_seen(whole, 'a.service', wants['a.service'])
    seen_b = instance_seen(whole, 'b.service', wants['b.service'])
    assert seen_a['apt_missing'] == ['python3-jmespath', 'python3.11-dev']
    assert seen_b['apt_missing'] == ['python3.11-dev']  # a's jmespath is not b's to install
    assert seen_a['missing'] == ['/var/lib/llmops-sglang/server/a', 'user sglang', 'user svc-a', 'group sglang']
    # In b's own order (its directory first), not the union's, so both scopes agree.
    assert seen_b['missing'] == ['/var/lib/llmops-sglang/server/b', 'user sglang', 'group sglang']
    assert seen_b['service']['invocation_id'] == 'inv-2' and seen_b['packages'] == dict(PINS, torch=None)
    assert (seen_b['venv_error'], seen_b['pip'], seen_b['python_h'], seen_b['port_in_use']) == (None, True, True, True)
    assert seen_b['model']['complete'] is True and seen_b['last_good'] == LAST_GOOD


def test_instance_seen_holds_what_plan_instance_and_plan_seen_read():
    wants, state = two_instance_host()
    seen_b = instance_seen(observe(state, list(wants.values())), 'b.service', wants['b.service'])
    assert set(seen_b) == {'files', 'service', 'mtimes', 'last_good', 'model', 'port_in_use', 'packages', 'pip',
                           'python_h', 'venv_error', 'apt_missing', 'missing'}
    # A venv that cannot be asked: its error, no packages; an unknown Python keeps the templated name as given.
    broken = dict(state, venvs={'/opt/sglang/venv': {'path': '/opt/sglang/venv', 'exists': False, 'error': 'no Python'}})
    seen = instance_seen(observe(broken, [wants['b.service']]), 'b.service', wants['b.service'])
    assert (seen['venv_error'], seen['packages'], seen['apt_missing']) == ('no Python', {}, [])
    assert instance_seen({}, 'x.service', {}) == {
        'files': {}, 'service': {}, 'mtimes': [], 'last_good': {}, 'model': {}, 'port_in_use': None, 'packages': {},
        'pip': True, 'python_h': True, 'venv_error': None, 'apt_missing': [], 'missing': []}


def test_a_fact_the_plan_never_asked_is_a_move_not_a_match():
    # Two venvs, two Pythons: the plan's one call fills {python_major_minor} with the first venv's (3.11), so it never
    # asked dpkg about b's python3.12-dev; the role's call for b does. The CAS sees a move and decides anew.
    wants, state = two_instance_host()
    wants['b.service'] = dict(wants['b.service'], venv='/opt/b/venv')
    state['venvs']['/opt/b/venv'] = dict(state['venvs']['/opt/sglang/venv'], path='/opt/b/venv', python_major_minor='3.12')
    whole = observe(state, list(wants.values()))
    alone = observe(state, [wants['b.service']])
    assert 'python3.12-dev' not in whole['apt_missing'] and 'python3.12-dev' in alone['apt_missing']
    planned = {'decision': plan_host(wants, whole)['b.service'], 'observed': whole}
    decision = decide(wants['b.service'], alone, 'b.service', None, planned)
    assert (decision['source'], decision['moved']) == ('replanned', ['apt_missing'])
    assert 'install python3.12-dev' in decision['changes']


def test_decide_without_a_plan_is_plan_hosts_decision_from_this_observation():
    wants, state = two_instance_host()
    alone = observe(state, [wants['b.service']])
    decision = decide(wants['b.service'], alone, 'b.service')
    plan = plan_host({'b.service': wants['b.service']}, alone)['b.service']
    assert decision == dict(plan, source='observed', moved=[], verified=True, unit_known=True,
                            rounds=rounds('none', [{'host': None, 'state': 'started', 'reload': False}], 'active'),
                            refusals=[])
    assert decision['action'] == 'change' and decision['restart'] is False


def test_decide_applies_the_plans_own_decision_on_a_host_that_did_not_move():
    wants, state = two_instance_host()
    whole = observe(state, list(wants.values()))
    plans = plan_host(wants, whole, {'a.service': None, 'b.service': None})
    # A marker: the plan's dict is returned as it is, not decided again (decided again it would be 'change').
    marked = dict(plans['b.service'], action='none', why='as planned', marker=1)
    state_later = dict(state, instances=dict(state['instances']))
    # The unit's sub_state and since are no identity; started_at read again may differ by btime's whole second.
    state_later['instances']['b.service'] = instance(service=dict(SERVICE, invocation_id='inv-2', sub_state='start',
                                                                  since='', started_at=1000.6))
    for observed in (observe(state, [wants['b.service']]), observe(state_later, [wants['b.service']])):
        decision = decide(wants['b.service'], observed, 'b.service', None, {'decision': marked, 'observed': whole})
        assert decision == dict(marked, source='plan', moved=[], verified=True, unit_known=True,
                                rounds=rounds('none', [{'host': None, 'state': 'started', 'reload': False}], 'active'),
                                refusals=[])


def _planned(wants, state):
    whole = observe(state, list(wants.values()))
    plans = plan_host(wants, whole)
    return {'decision': dict(plans['a.service'], marker=1), 'observed': whole}


@pytest.mark.parametrize('change, names, action', [
    # The service restarted since the plan (another run, an operator, systemd's Restart=): a new invocation.
    (lambda s: s['instances']['a.service']['service'].update(invocation_id='inv-9', started_at=2000.0),
     ['service'], 'none'),
    # Its main process started much later within the same invocation's facts: started_at beyond btime's second.
    (lambda s: s['instances']['a.service']['service'].update(started_at=1005.0), ['service'], 'none'),
    (lambda s: s['instances']['a.service']['service'].update(active_state='failed', result='exit-code'), ['service'],
     'start'),
    # A file changed on the host: written by someone else, the role now restarts to load it back.
    (lambda s: s['instances']['a.service'].update(files=dict(instance()['files'], env='e9'), mtimes=[900.0, 1500.0]),
     ['files', 'mtimes'], 'restart'),
    # The pins changed under it: another compressed-tensors installed into the venv.
    (lambda s: s['venvs']['/opt/sglang/venv'].update(packages=dict(PINS, **{'compressed-tensors': '0.8.1'})),
     ['packages'], 'restart'),
    # Saved as last known good since (a run that ended after the plan), the port, the checkpoint.
    (lambda s: s['instances']['a.service'].update(last_good=dict(LAST_GOOD, pins={'sglang': '0.5.22'})), ['last_good'],
     'verify'),
    (lambda s: s['instances']['a.service'].update(port_in_use=False), ['port_in_use'], 'none'),
    (lambda s: s['instances']['a.service'].update(model={'path': '/models/x', 'exists': False}), ['model'], 'none'),
    # Someone removed its state directory.
    (lambda s: s.update(dirs=s['dirs'] - {'/var/lib/llmops-sglang/server/a'}), ['missing'], 'change'),
])
def test_decide_on_a_host_that_moved_decides_anew_naming_what_moved(change, names, action):
    wants, state = two_instance_host(dirs={'/etc/sglang', '/var/lib/llmops-sglang/server/a'})
    wants['a.service'] = dict(wants['a.service'], apt=['python3-dev'], users=[], groups=[])
    planned = _planned(wants, state)
    assert planned['decision']['action'] == 'none'
    state['instances']['a.service'] = instance(service=dict(SERVICE))
    state['venvs']['/opt/sglang/venv'] = dict(state['venvs']['/opt/sglang/venv'])
    change(state)
    observed = observe(state, [wants['a.service']])
    decision = decide(wants['a.service'], observed, 'a.service', None, planned)
    assert (decision['source'], decision['moved']) == ('replanned', names)
    assert 'marker' not in decision and decision['action'] == action, decision
    expected = plan_host({'a.service': wants['a.service']}, observed)['a.service']
    assert dict((key, decision[key]) for key in expected) == expected


def test_a_restart_the_plan_did_not_foresee_is_the_first_refusal_naming_what_moved():
    wants, state = two_instance_host(dirs={'/etc/sglang', '/var/lib/llmops-sglang/server/a'})
    wants['a.service'] = dict(wants['a.service'], apt=['python3-dev'], users=[], groups=[])
    planned = _planned(wants, state)
    assert planned['decision']['action'] == 'none'
    state['instances']['a.service'] = instance(service=dict(SERVICE))
    state['venvs']['/opt/sglang/venv'] = dict(state['venvs']['/opt/sglang/venv'], python_version=None)
    del state['venvs']['/opt/sglang/venv']['python_version']
    unmoved = observe(state, [wants['a.service']])
    # Not moved (a venv refusal only): the plan's decision, no restart, nothing refused for it.
    decision = decide(wants['a.service'], unmoved, 'a.service', None, planned, restart_forbidden=True)
    assert decision['source'] == 'plan' and decision['refusals'] == [
        'sglang_venv=/opt/sglang/venv: its Python did not answer'], decision['refusals']
    # Moved so that it would restart (a file changed on the host): refused first, before the venv's refusal.
    state['instances']['a.service'] = instance(service=dict(SERVICE), files=dict(instance()['files'], env='e9'),
                                               mtimes=[900.0, 1500.0])
    moved = observe(state, [wants['a.service']])
    decision = decide(wants['a.service'], moved, 'a.service', None, planned, restart_forbidden=True)
    assert decision['refusals'] == [
        'a.service would restart now (%s), but the rollout plan found it needs no restart: the host changed since '
        'the plan (files, mtimes). Nothing was changed; run the playbook again to plan it anew.' % decision['why'],
        'sglang_venv=/opt/sglang/venv: its Python did not answer']
    # The same move without restart_forbidden (the role on its own, or a plan that foresaw a restart): only the venv.
    assert decide(wants['a.service'], moved, 'a.service', None, planned)['refusals'] == [
        'sglang_venv=/opt/sglang/venv: its Python did not answer']


def test_decide_verified_is_the_configuration_the_role_writes_with_the_pins_it_installs():
    wants, state = two_instance_host()
    want = wants['a.service']
    state['instances']['a.service'] = instance()
    observed = observe(state, [want])
    # No secrets file wanted and none saved: equal.
    assert decide(want, observed, 'a.service', None)['verified'] is True
    # A secrets file wanted, none saved; a file the role writes differs from the saved copy.
    assert decide(want, observed, 'a.service', 's1')['verified'] is False
    assert decide(dict(want, files=dict(want['files'], env='e2')), observed, 'a.service')['verified'] is False
    # The role installs compressed-tensors 0.18.0 before the restart: 0.8.1 in the venv now still verifies.
    old = dict(state, venvs={'/opt/sglang/venv': dict(state['venvs']['/opt/sglang/venv'],
                                                      packages=dict(PINS, **{'compressed-tensors': '0.8.1'}))})
    decision = decide(want, observe(old, [want]), 'a.service')
    assert (decision['action'], decision['verified']) == ('restart', True)
    # Pins the role installs that differ from the saved ones: not verified.
    assert decide(dict(want, pins={'compressed-tensors': '0.19.0'}), observed, 'a.service')['verified'] is False
    # The saved copy's secrets, and the same wanted: verified.
    saved = dict(state, instances={'a.service': instance(last_good=dict(LAST_GOOD, digests=dict(SAVED, **{'secrets.env': 's1'})))})
    assert decide(want, observe(saved, [want]), 'a.service', 's1')['verified'] is True


def test_decide_unit_known_and_refusals():
    wants, state = two_instance_host()
    want = wants['a.service']
    state['instances']['a.service'] = instance(service={'exists': False, 'active_state': 'inactive'})
    decision = decide(want, observe(state, [want]), 'a.service')
    assert (decision['unit_known'], decision['action']) == (False, 'start')
    # a new unit is started
    assert decision['rounds']['deploy']['steps'] == [{'host': None, 'state': 'started', 'reload': True}]
    with pytest.raises(ValueError, match='a.service is not in the observation'):
        decide(want, {'instances': {}}, 'a.service')
    with pytest.raises(ValueError, match='planned must be'):
        decide(want, observe(state, [want]), 'a.service', None, {'decision': None, 'observed': {}})
    # The plan's observation does not hold the instance (added since): a move, decided anew.
    decision = decide(want, observe(state, [want]), 'a.service', None,
                      {'decision': {'action': 'none'}, 'observed': {'instances': {}}})
    assert decision['source'] == 'replanned' and 'service' in decision['moved'] and 'files' in decision['moved']


def test_plan_seen_adds_the_venvs_two_overrides():
    base = seen(python_h=True, venv_error=None)
    assert plan_seen(want(), base)['action'] == 'none'
    assert plan_seen(want(), dict(base, venv_error='no Python'))['why'].startswith('the venv cannot be asked (no Python)')
    assert plan_seen(want(python_headers=True), dict(base, python_h=False))['changes'] == ['Python.h missing']
    assert plan_seen(want(python_headers=False), dict(base, python_h=False))['action'] == 'none'
    # A restart stays a restart: the overrides only turn nothing (or a change) into a change.
    assert plan_seen(want(state='restarted'), dict(base, venv_error='x'))['action'] == 'restart'


def test_moved_keys_compares_a_units_identity_only():
    before = {'service': dict(SERVICE), 'files': {'unit': 'u1'}}
    assert moved_keys(before, {'service': dict(SERVICE, sub_state='x', since='y'), 'files': {'unit': 'u1'}}) == []
    assert moved_keys(before, {'service': dict(SERVICE, started_at=None), 'files': {'unit': 'u2'}}) == ['files', 'service']
    assert moved_keys({}, {'port_in_use': None}) == []


@pytest.mark.parametrize('wanted, observed, action, start, files, config_changed', [
    # a fresh host: no unit, every file new; restarted (behind routers: drained first), as a changed unit always is
    (want(), seen(files={}, service={'exists': False}, last_good={}), 'start', 'restart', ['env', 'unit'], True),
    # a unit that crashed on a configuration that never served, nothing changed since: started once, then judged
    (want(), seen(service=dict(RUNNING, active_state='failed'), last_good=dict(VERIFIED, same={'unit': False})),
     'rollback', 'start', [], False),
    (want(), seen(service=dict(RUNNING, active_state='inactive')), 'start', 'start', [], False),
    (want(files=dict(FILES, env='e2')), seen(), 'restart', 'restart', ['env'], True),
    (want(pins={'compressed-tensors': '0.19.0'}), seen(), 'restart', 'restart', [], True),
    (want(state='restarted'), seen(), 'restart', 'restart', [], False),
    (want(), seen(last_good={}), 'verify', 'none', [], False),
    (want(), seen(), 'none', 'none', [], False),
    # a stop is stop.yml's, never a start; it writes no file
    (want(state='stopped', files=dict(FILES, env='e2')), seen(), 'stop', 'none', [], False),
])
def test_the_decision_says_what_the_role_does_to_the_unit(wanted, observed, action, start, files, config_changed):
    decision = plan_seen(wanted, observed)
    assert (decision['action'], decision['start'], decision['files'], decision['config_changed']) == (
        action, start, files, config_changed), decision


@pytest.mark.parametrize('wanted, observed, needed', [
    (want(), seen(), False),                                                   # everything in place: not entered
    (want(files=dict(FILES, env='e2')), seen(), False),                        # a file alone is configure's
    (want(), seen(apt_missing=['python3-dev']), True),
    (want(), seen(pip=False), True),
    (want(pins={'compressed-tensors': '0.19.0'}), seen(), True),
    (want(python_headers=True), seen(python_h=False), True),
    (want(python_headers=False), seen(python_h=False), False),                 # the operator installs them
    (want(state='stopped'), seen(apt_missing=['python3-dev'], pip=False), False),  # a stop installs nothing
])
def test_the_decision_says_whether_the_dependencies_step_has_work(wanted, observed, needed):
    """The role includes dependencies.yml only for this (a host with everything in place skips one task, not nine)."""
    assert plan_seen(wanted, observed)['dependencies'] is needed


def test_a_host_an_earlier_instance_of_the_same_run_converged_is_decided_anew_quietly():
    """b300's hosts run two instances: the first one's run installs the packages, pins, pip and directories both
    want, so the second one's observation differs from the plan's. It moved only towards what b wants: decided anew
    from this observation as ever, but as source 'converged' (the role says nothing of a change since the plan)."""
    wants, state = two_instance_host(dirs={'/etc/sglang'}, dpkg={'python3-requests'})
    mtimes = ['/etc/systemd/system/b.service', '/etc/sglang/b.env', '/opt/sglang/venv/lib/python3.11/site-packages/sglang-*.dist-info']
    wants['b.service'] = dict(wants['b.service'], observe=dict(wants['b.service']['observe'], mtimes=mtimes))
    state['venvs']['/opt/sglang/venv'] = dict(state['venvs']['/opt/sglang/venv'], pip=False, python_h=False,
                                              packages=dict(PINS, **{'compressed-tensors': '0.8.1'}))
    state['instances']['b.service'] = instance(mtimes=[900.0, 950.0, 800.0])
    whole = observe(state, list(wants.values()))
    planned = {'decision': dict(plan_host(wants, whole)['b.service'], marker=1), 'observed': whole}
    # a's run: python3-dev and python3.11-dev, the directories, the accounts, pip, Python.h, compressed-tensors 0.18.0
    # (a new install record: its mtime)
    state.update(dpkg=state['dpkg'] | {'python3-dev', 'python3.11-dev'}, users={'root', 'sglang', 'svc-a'},
                 groups={'root', 'sglang'}, dirs={'/etc/sglang', '/var/lib/llmops-sglang/server/a',
                                                  '/var/lib/llmops-sglang/server/b'})
    state['venvs']['/opt/sglang/venv'] = dict(state['venvs']['/opt/sglang/venv'], pip=True, python_h=True,
                                              packages=dict(PINS, torch=None))
    state['instances']['b.service'] = instance(mtimes=[900.0, 950.0, 2000.0])
    alone = observe(state, [wants['b.service']])
    decision = decide(wants['b.service'], alone, 'b.service', None, planned)
    assert decision['source'] == 'converged', decision
    assert decision['moved'] == ['apt_missing', 'missing', 'mtimes', 'packages', 'pip', 'python_h'], decision
    expected = plan_host({'b.service': wants['b.service']}, alone)['b.service']
    assert 'marker' not in decision and dict((key, decision[key]) for key in expected) == expected
    # b's own files and unit did not move: had they, someone else did it
    moved_file = dict(state, instances=dict(state['instances'], **{'b.service': instance(
        files=dict(instance()['files'], env='e9'), mtimes=[900.0, 1500.0, 2000.0])}))
    again = decide(wants['b.service'], observe(moved_file, [wants['b.service']]), 'b.service', None, planned)
    assert again['source'] == 'replanned' and 'files' in again['moved'] and 'mtimes' in again['moved']


@pytest.mark.parametrize('key, old, new, ok', [
    ('apt_missing', ['python3-dev', 'python3.11-dev'], ['python3.11-dev'], True),
    ('apt_missing', ['python3-dev'], ['python3-dev', 'python3.11-dev'], False),   # newly missing: removed by someone
    ('missing', ['/var/lib/b', 'user sglang'], [], True),
    ('missing', [], ['/var/lib/b'], False),
    ('packages', {'compressed-tensors': '0.8.1', 'sglang': '0.5.23'}, {'compressed-tensors': '0.18.0', 'sglang': '0.5.23'}, True),
    ('packages', {'compressed-tensors': '0.18.0'}, {'compressed-tensors': '0.8.1'}, False),   # away from the pin
    ('packages', {'torch': '2.8'}, {'torch': '2.9'}, False),   # a package the role does not pin
    ('pip', False, True, True),
    ('pip', True, False, False),
    ('python_h', False, True, True),
    ('mtimes', [900.0, 950.0, 800.0], [900.0, 950.0, 2000.0], True),   # the pinned packages' install records only
    ('mtimes', [900.0, 950.0], [900.0, 950.0, 2000.0], True),          # a record appeared
    ('mtimes', [900.0, 950.0, 800.0], [900.0, 1500.0, 800.0], False),  # the instance's own environment file
    ('files', {'env': 'e1'}, {'env': 'e9'}, False),
    ('files', {'shim': None, 'env': 'e1'}, {'shim': 's1', 'env': 'e1'}, True),   # the shared shim, as the role writes it
    ('files', {'shim': 's1'}, {'shim': 's9'}, False),
    ('files', {'env': 'e1'}, {'env': None}, False),    # removed by someone
    ('service', {}, {'invocation_id': 'x'}, False),
    ('last_good', {}, {'exists': True}, False),
])
def test_converged_is_a_move_towards_the_want_only(key, old, new, ok):
    want = {'pins': {'compressed-tensors': '0.18.0', 'sglang': None}, 'files': {'unit': 'u1', 'env': 'e1', 'shim': 's1'},
            'observe': {'mtimes': ['/etc/systemd/system/b.service', '/etc/sglang/b.env', '/v/sglang-*.dist-info']}}
    assert converged({key: old}, {key: new}, want, [key]) is ok
    assert converged({}, {}, want, []) is False   # nothing moved: not a move of any kind


def test_start_steps_apply_the_decisions_start():
    # one job on this host; systemd reads the unit file again whenever the decision starts it
    assert start_steps('restart', []) == [{'host': None, 'state': 'restarted', 'reload': True}]
    assert start_steps('start', []) == [{'host': None, 'state': 'started', 'reload': True}]
    assert start_steps('none', []) == [{'host': None, 'state': 'started', 'reload': False}]
    # a multi-node group's restart: every rank stopped, rank 0 first, each reading its unit file; then every rank started
    assert start_steps('restart', ['n0', 'n1', 'n2']) == [
        {'host': 'n0', 'state': 'stopped', 'reload': True}, {'host': 'n1', 'state': 'stopped', 'reload': True},
        {'host': 'n2', 'state': 'stopped', 'reload': True}, {'host': 'n0', 'state': 'started', 'reload': False},
        {'host': 'n1', 'state': 'started', 'reload': False}, {'host': 'n2', 'state': 'started', 'reload': False}]
    # a group that only needs starting starts on this host (each host of the group runs its own rank)
    assert start_steps('start', ['n0', 'n1']) == [{'host': None, 'state': 'started', 'reload': True}]


def test_decide_says_the_steps_of_a_multi_node_restart():
    wants, state = two_instance_host()
    want = dict(wants['a.service'], nodes=['h0', 'h1'], pins=dict(wants['a.service']['pins'], sglang='9.9.9'))
    decision = decide(want, observe(state, [want]), 'a.service')
    assert decision['start'] == 'restart'
    # the role's pip runs for exactly these
    assert decision['pin_changes'] == ['sglang %s -> 9.9.9' % PINS['sglang']]
    assert [(step['host'], step['state']) for step in decision['rounds']['deploy']['steps']] == [
        ('h0', 'stopped'), ('h1', 'stopped'), ('h0', 'started'), ('h1', 'started')]
    # the rollback round: each rank restores and restarts its own unit
    assert decision['rounds']['rollback']['steps'] == [{'host': None, 'state': 'restarted', 'reload': True}]


def test_rounds_say_what_each_round_of_run_yml_applies():
    steps = [{'host': None, 'state': 'restarted', 'reload': True}]
    deploy = rounds('restart', steps, 'failed')
    assert deploy['deploy'] == {'steps': steps, 'drain': True, 'marker': True, 'marker_reason': 'restart',
                                'marker_drain': True, 'reset_failed': True, 'canary': True}
    # a start drains nothing (the unit was not serving); nothing to start: no marker; only a failed unit is cleared
    started = rounds('start', [{'host': None, 'state': 'started', 'reload': False}], 'inactive')['deploy']
    assert (started['drain'], started['marker'], started['reset_failed']) == (False, True, False)
    kept = rounds('none', [{'host': None, 'state': 'started', 'reload': False}], 'active')['deploy']
    assert (kept['drain'], kept['marker'], kept['reset_failed']) == (False, False, False)
    # the rollback round is the same whatever the deploy round did: a restart of the restored unit, cleared first,
    # marked as a rollback without the drain in its deadline, no drain and no canary analysis
    for start, active in (('restart', 'active'), ('none', 'failed'), ('start', 'inactive')):
        assert rounds(start, [], active)['rollback'] == {
            'steps': [{'host': None, 'state': 'restarted', 'reload': True}], 'drain': False, 'marker': True,
            'marker_reason': 'rollback', 'marker_drain': False, 'reset_failed': True, 'canary': False}


# --- host_refusals: what stops the host from running the instance, each naming its variable ---

def refusals_of(want, **seen):
    state = host(instances={'a.service': instance(**seen)})
    return host_refusals(want, observe(state, [want]), 'a.service')


def test_a_healthy_host_refuses_nothing():
    assert refusals_of(desired('a')) == []
    # the unit holds its own port (active, or starting, or stopping)
    for state in ('active', 'activating', 'deactivating', 'reloading'):
        assert refusals_of(desired('a'), service=dict(SERVICE, active_state=state), port_in_use=True) == []


def test_each_refusal_names_its_variable_and_what_was_found():
    want = desired('a')
    state = host(instances={'a.service': instance(model={'path': '/models/a', 'exists': True, 'complete': False,
                                                         'problem': 'no config.json'},
                                                  service={'exists': False}, port_in_use=True)})
    state['venvs']['/opt/sglang/venv'] = {'path': '/opt/sglang/venv', 'exists': True,
                                          'error': '/opt/sglang/venv can be changed by a user other than root'}
    assert host_refusals(want, observe(state, [want]), 'a.service') == [
        'sglang_venv=/opt/sglang/venv: /opt/sglang/venv can be changed by a user other than root',
        'sglang_model_path=/models/a: no config.json',
        'sglang_port=30000 is already in use by another process while a.service is absent; pick another port or stop '
        'that process.']


def test_a_venv_that_did_not_answer_says_so():
    want = desired('a')
    state = host(instances={'a.service': instance()})
    del state['venvs']['/opt/sglang/venv']
    assert host_refusals(want, observe(state, [want]), 'a.service') == [
        'sglang_venv=/opt/sglang/venv: its Python did not answer']


def test_a_failed_unit_does_not_hold_its_port():
    found = refusals_of(desired('a'), service=dict(SERVICE, active_state='failed'), port_in_use=True)
    assert found == ['sglang_port=30000 is already in use by another process while a.service is failed; pick another '
                     'port or stop that process.']


def test_a_version_the_sync_brings_is_not_judged_here_and_a_stop_is_never_refused():
    incomplete = {'path': '/models/a', 'exists': False, 'complete': False, 'problem': 'does not exist'}
    assert refusals_of(desired('a', model_source='v2'), model=incomplete) == []
    assert refusals_of(desired('a'), model=incomplete) == ['sglang_model_path=/models/a: does not exist']
    for state in ('stopped', 'absent'):
        assert refusals_of(desired('a', state=state), model=incomplete, port_in_use=True,
                           service={'exists': False}) == []


# --- the plan's refusals: the same host_refusals, from the plan's observation, in the plan table ---

def test_the_plan_says_which_instances_the_role_will_refuse_and_why():
    wants = {'a.service': desired('a'), 'b.service': desired('b', observe=dict(desired('b')['observe'], port=30001))}
    state = host(instances={'a.service': instance(), 'b.service': instance(service={'exists': False}, port_in_use=True)})
    plans = plan_host(wants, observe(state, list(wants.values())))
    # the same refusals the role's decide takes from the same observation
    assert plans['b.service']['refusals'] == host_refusals(wants['b.service'], observe(state, list(wants.values())),
                                                           'b.service')
    assert plans['b.service']['refusals'] == [
        'sglang_port=30001 is already in use by another process while b.service is absent; pick another port or stop '
        'that process.']
    assert plans['a.service']['refusals'] == []
    assert refused_units(plans) == ['b.service']
    rows = dict((row[1], row) for row in plan_rows('h1', plans))
    assert rows['b.service'][2:5] == ['refused', rows['b.service'][3], 'no']
    assert rows['b.service'][5] == 'when its turn comes, before any change: ' + plans['b.service']['refusals'][0]
    # the other instance of the host keeps its own row
    assert rows['a.service'][2] == plans['a.service']['action']
    assert plan_summary(['rollout', 'done'], 1).endswith(
        '1 with nothing to do; 1 the role will refuse before any change (action refused: the table says why)')


def test_a_host_done_after_the_plan_refuses_nothing():
    """The role does not run on a host the plan leaves alone: a refusal there would stop nothing, so none is shown
    (its serving unit holds its port; a model directory made incomplete since the load is the next restart's)."""
    incomplete = {'path': '/models/a', 'exists': True, 'complete': False, 'problem': 'no config.json'}
    plans = {'a.service': {'action': 'none', 'changes': [], 'restart': False, 'why': 'w',
                           'refusals': ['sglang_model_path=/models/a: no config.json']}}
    assert refused_units(plans) == []
    assert plan_rows('h1', plans)[0][2] == 'none'
    assert refusals_of(desired('a'), model=incomplete) == ['sglang_model_path=/models/a: no config.json']
    assert refused_units(None) == [] and refused_units({}) == []
