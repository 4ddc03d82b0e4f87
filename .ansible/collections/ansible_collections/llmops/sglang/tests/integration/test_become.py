# -*- coding: utf-8 -*-
"""playbooks/deploy_k26.yml logging in as an unprivileged user (the fleet's LOGIN_USER, passwordless sudo), the way
most GPU fleets are reached: with become it deploys, and a re-run changes nothing; without become it is refused by
the role's first task on the host, in words that name the login user and the settings, and nothing changes.

The login user and become come from an inventory source of their own, layered over the fleet's (as an operator's
group_vars would: inventories/ct200/group_vars/ct200.yml); sudo's journal lines prove who logged in."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from conftest import local_groups_inventory
from fleet.client import LOGIN_USER
from server_helpers import make_model, recap

NAME = 'sglang-become'
UNIT = NAME + '.service'
PORT = 30011
MODEL = '/models/become'
TEST_ENV = {'SGLANG_STANDIN_PACE': '0.02', 'SGLANG_STANDIN_GPU': 'rtx_pro_6000',
            'SGLANG_STANDIN_STATE_DIR': '/var/lib/sglang/' + NAME}
FILES = '/etc/systemd/system/%s /etc/sglang/%s.env' % (UNIT, NAME)
REFUSAL = ('Deploying SGLang (llmops.sglang.server) needs root on the host, and this task runs as %s (uid '
           % LOGIN_USER)


def login_inventory(tmp_path, become):
    path = tmp_path / ('login-%s.yml' % ('become' if become else 'plain'))
    path.write_text('all:\n  children:\n    local_fleet:\n      vars:\n        ansible_user: %s\n'
                    '        ansible_become: %s\n' % (LOGIN_USER, 'true' if become else 'false'))
    return str(path)


def deploy(fleet, host, inventory, check=False, **extra):
    extra_vars = {'sglang_env': TEST_ENV, 'sglang_model_path': MODEL, 'k26_hosts': host.name,
                  'k26_instances': [{'name': NAME, 'port': PORT}]}
    extra_vars.update(extra)
    return fleet.playbook('playbooks/deploy_k26.yml', extra_vars, check=check,
                          extra_args=['-i', local_groups_inventory(), '-i', inventory])


def host_clock(fleet, host):
    return fleet.run(host, 'date +%s.%N', check=True).stdout.strip()


def sudo_by_login(fleet, host, since):
    """sudo's log lines of commands LOGIN_USER ran as root since `since` (the host's clock)."""
    out = fleet.run(host, 'journalctl -q --no-pager -o cat _COMM=sudo --since @%s' % since, check=True).stdout
    return [line for line in out.splitlines() if line.strip().startswith(LOGIN_USER + ' :') and 'USER=root' in line]


def snapshot(fleet, host):
    """The unit's run and its files: what a refused run must leave as it was."""
    return fleet.run(host, 'systemctl show -p InvocationID,ActiveState %s; md5sum %s; stat -c "%%n %%Y %%s" '
                     '/run/llmops-sglang/rollout.lock' % (UNIT, FILES), check=False).stdout


@pytest.fixture(scope='module')
def host(fleet):
    target = fleet.hosts[-1]
    yield target
    # Gone again, also when a test failed: an enabled unit would claim its GPUs for other tests' instances.
    fleet.run(target, 'systemctl disable --now %s; systemctl reset-failed %s; rm -f %s /etc/sglang/%s.secrets.env '
              '/var/lib/prometheus/node-exporter/%s.prom; rm -rf /var/lib/sglang/%s %s; systemctl daemon-reload; true'
              % (UNIT, UNIT, FILES, NAME, NAME, NAME, MODEL))


def test_with_become_it_deploys_then_changes_nothing(fleet, host, standin_venv, tmp_path):
    standin_venv(host)
    make_model(fleet, host, MODEL)
    inventory = login_inventory(tmp_path, become=True)
    since = host_clock(fleet, host)
    first = deploy(fleet, host, inventory)
    assert first.rc == 0, first
    assert recap(first, host.name)['changed'] > 0, first
    # The controller's live lines: the action plugin reads the progress file as the login user, without become.
    assert '%s  %s  READY after' % (host.name, NAME) in first.stdout, first
    assert fleet.run(host, 'systemctl is-active %s' % UNIT).stdout.strip() == 'active'
    # Root-only as with a root login: the environment file, the lock; the login user owns nothing the role made.
    modes = fleet.run(host, 'stat -c "%%U %%a %%n" /etc/sglang/%s.env /run/llmops-sglang' % NAME, check=True).stdout
    assert modes.split('\n')[:2] == ['root 600 /etc/sglang/%s.env' % NAME, 'root 700 /run/llmops-sglang'], modes
    assert sudo_by_login(fleet, host, since), 'no sudo by %s: the run did not log in as it' % LOGIN_USER

    again = deploy(fleet, host, inventory)
    assert again.rc == 0, again
    stats = recap(again, host.name)
    assert (stats['changed'], stats['failed'], stats['unreachable']) == (0, 0, 0), again


@pytest.mark.parametrize('check', [False, True], ids=['run', 'check'])
def test_without_become_it_is_refused_before_any_change(fleet, host, tmp_path, check):
    before = snapshot(fleet, host)
    since = host_clock(fleet, host)
    result = deploy(fleet, host, login_inventory(tmp_path, become=False), check=check)
    assert result.rc != 0, result
    words = ' '.join(result.stdout.split())
    assert REFUSAL in words and 'ansible_become: true' in words, result
    assert recap(result, host.name)['failed'] == 1, result
    assert snapshot(fleet, host) == before
    assert sudo_by_login(fleet, host, since) == []
