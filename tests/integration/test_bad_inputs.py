# -*- coding: utf-8 -*-
"""Bad input is refused before anything changes, one message per failed rule naming the variable (issue 12).

The role's own runs on this machine (connection local, --check, only the validation tags: nothing here can change
this machine even if a rule let a value through), then on a fleet host, where the files are shown unchanged.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys

import pytest

from conftest import COLLECTIONS_PATH, REPO_ROOT, venv_tool
from server_helpers import MODEL, PLAYBOOK, VENV, flat, make_model, role_vars


def validate_locally(extra):
    """The server role's validation (and nothing else) on localhost; returns (rc, flattened output)."""
    values = {'target_hosts': 'localhost', 'fleet_mirror_url': 'http://192.0.2.1:8080', 'sglang_model_path': MODEL,
              'ansible_python_interpreter': sys.executable}
    values.update(extra)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS_PATH), ANSIBLE_NOCOLOR='1',
               ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_INVENTORY_UNPARSED_WARNING='0')
    done = subprocess.run([venv_tool('ansible-playbook'), '-i', 'localhost,', '-c', 'local', '--check', '--tags',
                           'sglang_validate', str(PLAYBOOK), '-e', json.dumps(values)], capture_output=True, text=True,
                          env=env, cwd=str(REPO_ROOT), timeout=300, check=False, stdin=subprocess.DEVNULL)
    return done.returncode, flat(done.stdout + done.stderr)


@pytest.mark.parametrize('extra, expected', [
    ({'sglang_server_args': {'port': 1234}},
     "Invalid input (1): sglang_server_args: 'port' (--port) is set by sglang_port; set it there instead"),
    ({'sglang_server_args': {'bad flag!': 1}},
     "Invalid input (1): sglang_server_args: 'bad flag!' is not a flag name"),
    ({'sglang_tp_size': 0}, 'Invalid input (1): sglang_tp_size=0: expected an integer >= 1'),
    ({'sglang_port': 99999}, 'Invalid input (1): sglang_port=99999: expected a TCP port, an integer from 1 to 65535'),
    ({'sglang_extra_args': ['--model-path', '/etc']},
     'Invalid input (1): sglang_extra_args[0]: --model-path is set by sglang_model_path'),
    ({'sglang_server_args': {'nccl-init-addr': '10.0.0.1:5000'}},
     "Invalid input (1): sglang_server_args: 'nccl-init-addr' (--nccl-init-addr) is set by sglang_multinode_group"),
    ({'sglang_service_name': 'x.service'},
     "Invalid input (1): sglang_service_name='x.service': expected the unit name without its suffix"),
    ({'sglang_api_key': 'sk-line\nbreak'},
     'Invalid input (1): sglang_api_key=<hidden, 13 characters>: must not contain a line break'),
])
def test_each_bad_input_is_named_alone(extra, expected):
    rc, out = validate_locally(extra)
    assert rc != 0, out
    assert expected in out, out
    assert 'CapturedExceptionMarker' not in out and 'can only concatenate' not in out, out
    assert 'sk-line' not in out


def test_a_good_input_passes_the_same_check():
    rc, out = validate_locally({})
    assert rc == 0, out


@pytest.fixture
def target(fleet, standin_venv):
    host = fleet.hosts[0]
    standin_venv(host)
    make_model(fleet, host)
    yield host
    remove_units(fleet, host)


def remove_units(fleet, host, names=('sglang-b1', 'sglang-b2a', 'sglang-b2b')):
    for name in names:
        fleet.run(host, 'systemctl stop {0}.service; systemctl reset-failed {0}.service; rm -rf /etc/systemd/system/'
                        '{0}.service /etc/sglang/{0}.env /etc/sglang/{0}.secrets.env /var/lib/sglang/{0}; '
                        'systemctl daemon-reload'.format(name))


def test_api_key_with_a_line_break_changes_no_file(fleet, target):
    first = fleet.playbook(PLAYBOOK, role_vars(target, 'sglang-b1', 30111, sglang_api_key='sk-good',
                                               sglang_env={'SGLANG_STANDIN_PACE': '0.01'}, sglang_lock_wait=900))
    assert first.rc == 0, first
    files = 'md5sum /etc/sglang/sglang-b1.env /etc/sglang/sglang-b1.secrets.env /etc/systemd/system/sglang-b1.service'
    before = fleet.run(target, files, check=True).stdout
    # The environment file would change too (another env value): nothing may be written before the key is refused.
    bad = fleet.playbook(PLAYBOOK, role_vars(target, 'sglang-b1', 30111, sglang_api_key='sk-good\nEVIL=1',
                                             sglang_env={'SGLANG_STANDIN_PACE': '0.02'}))
    assert bad.rc != 0
    assert 'sglang_api_key=<hidden, 14 characters>: must not contain a line break' in flat(bad.stdout), bad
    assert 'EVIL' not in bad.stdout
    assert fleet.run(target, files, check=True).stdout == before


def test_two_instances_on_one_port_are_refused_before_the_first_is_deployed(fleet, target):
    instances = [{'name': 'sglang-b2a', 'port': 30112}, {'name': 'sglang-b2b', 'port': 30112}]
    result = fleet.playbook('playbooks/deploy_k26.yml', {'k26_hosts': target.name, 'k26_instances': instances,
                                                         'sglang_model_path': MODEL, 'sglang_venv': VENV})
    assert result.rc != 0
    assert ('k26_instances[1].port=30112: is also the port of k26_instances[0] (sglang-b2a); each instance on a host '
            'needs its own port') in flat(result.stdout), result
    fleet.run(target, 'test ! -e /etc/systemd/system/sglang-b2a.service && test ! -e /etc/sglang/sglang-b2a.env',
              check=True)


def test_a_bad_second_instance_is_refused_before_the_first_is_deployed(fleet, target):
    instances = [{'name': 'sglang-b2a', 'port': 30113},
                 {'name': 'sglang-b2b', 'port': 30114, 'extra_args': ['--model-path', '/etc']}]
    result = fleet.playbook('playbooks/deploy_k26.yml', {'k26_hosts': target.name, 'k26_instances': instances,
                                                         'sglang_model_path': MODEL, 'sglang_venv': VENV})
    assert result.rc != 0
    assert 'sglang_extra_args[0]: --model-path is set by sglang_model_path' in flat(result.stdout), result
    fleet.run(target, 'test ! -e /etc/systemd/system/sglang-b2a.service', check=True)


def test_each_hosts_own_bad_instance_list_is_named_with_that_host(fleet, target, tmp_path):
    """The run's instance check judges each host's own k26_instances (here from host_vars, through Ansible's real
    hostvars, not from -e, which would give every host the same list) and names the hosts of each failing list. Both
    hosts get a different bad list, so that each message's host name is seen, not only its absence elsewhere."""
    other = fleet.hosts[1]
    inventory = tmp_path / 'instances.yml'
    inventory.write_text(json.dumps({'all': {'hosts': {
        target.name: {'k26_instances': [{'name': 'sglang-b2a', 'port': 30115}, {'name': 'sglang-b2a', 'port': 30116}]},
        other.name: {'k26_instances': [{'name': 'sglang-b2b', 'port': 30117}, {'name': 'sglang-b1', 'port': 30117}]},
    }}}))
    try:
        result = fleet.playbook('playbooks/deploy_k26.yml', {'k26_hosts': '%s:%s' % (target.name, other.name),
                                                             'sglang_model_path': MODEL, 'sglang_venv': VENV},
                                extra_args=['-i', str(inventory)])
        out = flat(result.stdout)
        assert result.rc != 0, result
        assert 'Invalid input (2): ' in out, result
        assert ("on %s: k26_instances[1].name='sglang-b2a': is also k26_instances[0].name; each instance on a host "
                'needs its own name' % target.name) in out, out
        assert ('on %s: k26_instances[1].port=30117: is also the port of k26_instances[0] (sglang-b2b)'
                % other.name) in out, out
        # Refused before the plan: no host was observed, and neither host got a unit.
        assert 'Observe every instance of the host in one call' not in out, out
        for host, names in ((target, ['sglang-b2a']), (other, ['sglang-b2b', 'sglang-b1'])):
            for name in names:
                fleet.run(host, 'test ! -e /etc/systemd/system/%s.service' % name, check=True)
    finally:
        remove_units(fleet, other)  # only if the check let a list through (target's are the fixture's)
