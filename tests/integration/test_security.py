# -*- coding: utf-8 -*-
"""Least privilege on real systemd hosts (docs/security.md): nothing the service user can write is read, copied, run
or trusted by root. Each test provokes the attack for real: the service user plants a unit of its own where the role
once kept the last-known-good copy, an older release's layout is moved over (also when it was forged), a venv
the service user can change is refused before root runs its Python, and a textfile directory replaced by another
user's symlink is not written through."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from server_helpers import PACE, PLAYBOOK, VENV, completion, role_vars, unit_show

CRASH = {'SGLANG_STANDIN_PACE': PACE, 'SGLANG_STANDIN_FAULT': 'crash@weights:scheduler_exception'}
PWNED = '/root/pwned'
# A unit that proves root ran it: written where the role kept last-good before (and where the attack put it).
FORGED_UNIT = '[Unit]\nDescription=forged\n[Service]\nType=oneshot\nExecStart=/bin/sh -c "id > %s"\n' % PWNED


def as_service_user(fleet, host, script, check=True):
    return fleet.run(host, ['runuser', '-u', 'sglang', '--', 'sh', '-ec', script], check=check)


def service_vars(host, name, port, **overrides):
    """The role as production runs it: the unit as the unprivileged `sglang` account."""
    return role_vars(host, name, port, sglang_user='sglang', sglang_group='sglang', **overrides)


def forge_last_good(fleet, host, state_dir):
    """As the service user, what the issue did on today's layout: move a last-good aside, make one of its own."""
    as_service_user(fleet, host, 'cd %s; if [ -e last-good ]; then mv last-good lg.x; fi; mkdir last-good\n'
                                 "cat > last-good/unit <<'UNIT'\n%sUNIT\n"
                                 ': > last-good/env; echo {} > last-good/pins.json' % (state_dir, FORGED_UNIT))
    listing = fleet.run(host, 'stat -c "%%U %%n" %s/last-good %s/last-good/unit' % (state_dir, state_dir), check=True).stdout
    assert listing.split() == ['sglang', state_dir + '/last-good', 'sglang', state_dir + '/last-good/unit'], listing


def assert_root_never_ran_it(fleet, host, unit):
    assert fleet.run(host, 'test -e %s' % PWNED).returncode != 0, 'root ran the forged unit'
    installed = fleet.run(host, 'cat /etc/systemd/system/%s.service' % unit, check=True).stdout
    assert 'forged' not in installed and PWNED not in installed, installed


@pytest.fixture
def secured(fleet, standin_host):
    target, units = standin_host
    fleet.run(target, 'rm -f %s' % PWNED, check=True)
    yield fleet, target, units
    fleet.run(target, 'rm -rf %s /var/lib/sglang/sec-*' % PWNED)


def test_the_service_user_cannot_make_root_run_its_unit_and_the_rollback_still_restores(secured):
    fleet, target, units = secured
    unit, port, state = 'sec-a', 30041, '/var/lib/sglang/sec-a'
    units.append(unit)
    good = fleet.playbook(PLAYBOOK, service_vars(target, unit, port))
    assert good.rc == 0, good
    control = '/var/lib/llmops-sglang/server/' + unit
    assert fleet.run(target, 'stat -c "%%U:%%G %%a" /var/lib/llmops-sglang /var/lib/llmops-sglang/server %s %s/last-good'
                     % (control, control), check=True).stdout.split() == ['root:root', '700'] * 4
    fleet.run(target, 'test -f %s/last-good/unit && test ! -e %s/last-good' % (control, state), check=True)
    # The service user can neither read nor rename anything there: the attack of the issue has nothing to move.
    denied = as_service_user(fleet, target, 'ls %s || mv %s/last-good /tmp/lg || touch %s/x' % (control, control, control),
                             check=False)
    assert denied.returncode != 0 and 'Permission denied' in denied.stderr, denied
    # It plants a last-good of its own where older releases kept it, then a change fails during its load.
    forge_last_good(fleet, target, state)
    bad = fleet.playbook(PLAYBOOK, service_vars(target, unit, port, sglang_env=CRASH))
    assert bad.rc != 0
    assert 'Scheduler hit an exception' in bad.stdout and 'Rolled back' in bad.stdout, bad
    # The role saw the planted copy (not a vacuous pass) and refused it.
    assert '%s/last-good was not adopted and root will not use it' % state in bad.stderr, bad
    assert_root_never_ran_it(fleet, target, unit)
    assert unit_show(fleet, target, unit + '.service', 'ActiveState')['ActiveState'] == 'active'
    assert 'SGLANG_STANDIN_FAULT' not in fleet.run(target, 'cat /etc/sglang/%s.env' % unit, check=True).stdout
    assert completion(fleet, target, port)['choices']
    fleet.run(target, 'test -d %s/last-good' % state, check=True)  # left for the operator to look at


def test_an_older_layout_moves_over_and_stays_the_rollback_target(secured):
    fleet, target, units = secured
    unit, port, state = 'sec-b', 30042, '/var/lib/sglang/sec-b'
    units.append(unit)
    good = fleet.playbook(PLAYBOOK, service_vars(target, unit, port))
    assert good.rc == 0, good
    control = '/var/lib/llmops-sglang/server/' + unit
    saved = fleet.run(target, 'cat %s/last-good/unit' % control, check=True).stdout
    # The layout of releases before 0.2.0: last-good (root's, 0700) inside the service user's state directory.
    fleet.run(target, 'mv %s/last-good %s/last-good && rm -rf %s' % (control, state, control), check=True)
    bad = fleet.playbook(PLAYBOOK, service_vars(target, unit, port, sglang_env=CRASH))
    assert bad.rc != 0 and 'Rolled back' in bad.stdout, bad
    assert 'adopt' not in bad.stderr, bad
    fleet.run(target, 'test ! -e %s/last-good' % state, check=True)
    assert fleet.run(target, 'cat %s/last-good/unit' % control, check=True).stdout == saved
    assert fleet.run(target, 'stat -c "%%U %%a" %s/last-good' % control, check=True).stdout.split() == ['root', '700']
    assert completion(fleet, target, port)['choices']


def test_an_older_layout_whose_last_good_was_forged_is_never_installed(secured):
    fleet, target, units = secured
    unit, port, state = 'sec-c', 30043, '/var/lib/sglang/sec-c'
    units.append(unit)
    good = fleet.playbook(PLAYBOOK, service_vars(target, unit, port))
    assert good.rc == 0, good
    control = '/var/lib/llmops-sglang/server/' + unit
    fleet.run(target, 'mv %s/last-good %s/last-good && rm -rf %s' % (control, state, control), check=True)
    forge_last_good(fleet, target, state)  # exactly the attack on the old layout
    bad = fleet.playbook(PLAYBOOK, service_vars(target, unit, port, sglang_env=CRASH))
    assert bad.rc != 0
    assert '%s/last-good was not adopted and root will not use it' % state in bad.stderr, bad
    assert '%s/last-good is owned by uid' % state in bad.stderr, bad
    assert 'Rolled back' not in bad.stdout, bad
    assert_root_never_ran_it(fleet, target, unit)
    fleet.run(target, 'test ! -e %s/last-good' % control, check=True)


def test_a_venv_the_service_user_can_change_is_refused_before_root_runs_it(secured):
    fleet, target, units = secured
    unit, port = 'sec-d', 30044
    units.append(unit)
    good = fleet.playbook(PLAYBOOK, service_vars(target, unit, port))
    assert good.rc == 0, good
    before = unit_show(fleet, target, unit + '.service', 'InvocationID')['InvocationID']
    site = fleet.run(target, [VENV + '/bin/python', '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
                     check=True).stdout.strip()
    # The service user gets one directory of the venv, and a .pth file there would run as root in any venv Python.
    fleet.run(target, 'chown sglang %s' % site, check=True)
    try:
        as_service_user(fleet, target, "echo 'import os; open(\"/root/venv-pwned\", \"w\")' > %s/zz-pwn.pth" % site)
        refused = fleet.playbook(PLAYBOOK, service_vars(target, unit, port, sglang_server_args={'trust-remote-code': True}))
        assert refused.rc != 0
        assert 'sglang_venv=%s: %s can be changed by a user other than root' % (VENV, VENV) in refused.stdout, refused
        assert '%s is owned by uid' % site in refused.stdout, refused
        assert fleet.run(target, 'test -e /root/venv-pwned').returncode != 0, 'root ran the venv after the service user changed it'
        assert unit_show(fleet, target, unit + '.service', 'InvocationID')['InvocationID'] == before
    finally:
        fleet.run(target, 'rm -f %s/zz-pwn.pth /root/venv-pwned; chown root %s' % (site, site))


def test_deploy_metrics_are_not_written_through_another_users_symlink(secured):
    fleet, target, units = secured
    unit, port = 'sec-e', 30045
    units.append(unit)
    # A textfile directory inside a tree another account owns, as Debian's /var/lib/prometheus is prometheus's.
    fleet.run(target, 'id promx >/dev/null 2>&1 || useradd --system promx; rm -rf /var/lib/promx /etc/promx-target; '
                      'install -d -o promx /var/lib/promx; install -d /var/lib/promx/node-exporter /etc/promx-target',
              check=True)
    try:
        variables = service_vars(target, unit, port, sglang_deploy_metrics_dir='/var/lib/promx/node-exporter')
        good = fleet.playbook(PLAYBOOK, variables)
        assert good.rc == 0, good
        written = fleet.run(target, 'ls -A /var/lib/promx/node-exporter', check=True).stdout.split()
        assert written == [unit + '.prom'], written
        # The owner of the tree swaps the directory for a link to one of root's; a change then runs.
        fleet.run(target, ['runuser', '-u', 'promx', '--', 'sh', '-ec',
                           'cd /var/lib/promx; mv node-exporter ne.x; ln -s /etc/promx-target node-exporter'], check=True)
        changed = fleet.playbook(PLAYBOOK, dict(variables, sglang_env={'SGLANG_STANDIN_PACE': PACE, 'X_CHANGE': '1'}))
        assert changed.rc == 0, changed
        # a module warning (Ansible prints it on stderr, wrapped)
        said = ' '.join((changed.stdout + changed.stderr).split())
        assert ('[WARNING]: the deployment metrics of %s.service were not written to /var/lib/promx/node-exporter: '
                '/var/lib/promx/node-exporter/%s.prom not written: /var/lib/promx/node-exporter: the symlink node-exporter '
                'is in a directory owned by uid' % (unit, unit)) in said, changed
        assert fleet.run(target, 'ls -A /etc/promx-target', check=True).stdout.strip() == ''
    finally:
        fleet.run(target, 'rm -rf /var/lib/promx /etc/promx-target; userdel promx')
