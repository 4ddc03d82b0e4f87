# -*- coding: utf-8 -*-
"""deploy_k26.yml's plan pass on a 3-host fleet: one host alone and a TP16 group over the other two.

The plan table (a no-op, one change, --check --diff), only the hosts that restart go through the serialized rollout,
the multi-node group rolls as one batch, and --tags sglang_preflight runs the preflight alone.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shlex
import signal
import subprocess
import time

import pytest
import yaml

from conftest import REPO_ROOT, local_groups_inventory, venv_tool
from server_helpers import MODEL, VENV, flat, make_model

UNIT = 'sglang-k26.service'
ENV_FILE = '/etc/sglang/sglang-k26.env'
LOCK_FILE = '/run/llmops-sglang/rollout.lock'
TEST_ENV = {'SGLANG_STANDIN_PACE': '0.02', 'SGLANG_STANDIN_GPU': 'rtx_pro_6000', 'SGLANG_STANDIN_STATE_DIR': '/var/lib/sglang/sglang-k26'}
ROLLOUT_PLAY = 'PLAY [Roll out the restarts of Kimi K2.6]'
# Two secrets, as a production fleet has (an API key, a Hugging Face token): the plan compares the secrets file by
# digest, and a no-op must find it unchanged (a digest rendered unlike the file would restart every host, every run).
# sglang_secret_args' values go to the same file (module_utils/secret_flags.py): unchanged, no restart; changed, one.
SECRETS = {'sglang_api_key': 'sk-plan-7d1c05e2b9', 'sglang_hf_token': 'hf_plan_3a8f60c41e',
           'sglang_secret_args': {'admin-api-key': 'sk-plan-admin-5e0c7a91'}}
SECRET_VALUES = ['sk-plan-7d1c05e2b9', 'hf_plan_3a8f60c41e', 'sk-plan-admin-5e0c7a91']
SECRETS_FILE = '/etc/sglang/sglang-k26.secrets.env'


def deploy(fleet, inventory, *args, **extra_vars):
    """deploy_k26.yml on the three hosts (a larger session fleet has more: they are not part of these tests)."""
    extra = dict(SECRETS, sglang_env=TEST_ENV, k26_hosts=','.join(h.name for h in fleet.hosts[:3]))
    extra.update(extra_vars)
    return fleet.playbook('playbooks/deploy_k26.yml', extra, extra_args=['-i', local_groups_inventory(), '-i', inventory] + list(args))


def invocation(fleet, host):
    return fleet.run(host, 'systemctl show -p InvocationID --value %s' % UNIT, check=True).stdout.strip()


def plan_rows(output):
    """host -> (action, restart) from the plan table (the lines of the task that prints it)."""
    table = output.split('TASK [The plan (nothing restarts before it is shown)]', 1)[1].split('TASK [', 1)[0]
    rows = {}
    for line in table.splitlines():
        match = re.match(r'^\s*(\S+)\s+%s\s+(\S+)\s+.*\s(yes|no)\s+' % re.escape(UNIT), line)
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3))
    return rows


def rollout_batches(output):
    """The hosts of each batch of the serialized play (a PLAY header per batch), from the task result lines."""
    batches = []
    for chunk in output.split(ROLLOUT_PLAY)[1:]:
        chunk = chunk.split('PLAY [Report the rollout')[0]
        batches.append(sorted(set(re.findall(r'^(?:ok|changed|fatal|skipping): \[([^\]\s]+)', chunk, re.M))))
    return batches


def break_env(fleet, host):
    """A drift only on this host: a line in its environment file that the role's template does not have."""
    fleet.run(host, 'echo "DRIFT=1" >> %s' % ENV_FILE, check=True)


def hold_lock(fleet, host):
    """Another run's rollout lock on host (the plan pass takes no lock, a role run waits for it): returns the command
    that releases it."""
    now = time.time()
    holder = {'token': 'test-holder:1:0', 'controller': 'test-holder', 'pid': 1, 'user': 'test', 'since': now,
              'expires': now + 900, 'path': LOCK_FILE}
    write_lock = 'mkdir -p %s && printf %%s %s > %s' % (os.path.dirname(LOCK_FILE), shlex.quote(json.dumps(holder)), LOCK_FILE)
    fleet.run(host, write_lock, check=True)
    return 'if grep -q test-holder %s; then rm -f %s; fi' % (LOCK_FILE, LOCK_FILE)


def deploy_while_held(fleet, inventory, hosts, held, until, move, timeout):
    """deploy_k26.yml on hosts while another run's rollout lock holds `held` (hold_lock; waiting up to 900 s for it):
    its output is read until a line for which until(line) is true, the run still going, then move() changes the host,
    the lock is released and the run finishes. -> (its exit code, its whole output). On every way out the run is
    killed and the lock released."""
    release = hold_lock(fleet, held)
    command = [venv_tool('ansible-playbook'), '-i', fleet.inventory, 'playbooks/deploy_k26.yml', '-e',
               json.dumps(dict(SECRETS, sglang_env=TEST_ENV, sglang_lock_wait=900, k26_hosts=','.join(h.name for h in hosts))),
               '-i', local_groups_inventory(), '-i', inventory]
    proc = subprocess.Popen(command, cwd=str(REPO_ROOT), env=fleet.ansible_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, stdin=subprocess.DEVNULL)
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if until(line):
                break
        assert proc.poll() is None, ''.join(lines)
        move()
        fleet.run(held, release, check=True)
        output = ''.join(lines) + proc.communicate(timeout=timeout)[0]
        return proc.returncode, output
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        fleet.run(held, release)


@pytest.fixture(scope='module')
def plan_fleet(fleet, tmp_path_factory):
    """The first host alone, the next two as the TP16 group `plan_tp16` (rank 0 first), rolled out once."""
    if len(fleet.hosts) < 3:
        pytest.skip('needs three hosts')
    single, rank0, rank1 = fleet.hosts[:3]
    inventory = tmp_path_factory.mktemp('plan') / 'plan.yml'
    # A child of local_fleet, so that its values win over the fleet's group_vars (a deeper group).
    inventory.write_text(
        'all:\n  children:\n    local_fleet:\n      children:\n        plan_tp16:\n          hosts:\n'
        '            %s: {}\n            %s: {}\n          vars:\n            sglang_multinode_group: plan_tp16\n'
        '            sglang_tp_size: 16\n            sglang_host: 0.0.0.0\n' % (rank0.name, rank1.name))
    result = fleet.playbook('tests/fleet/demo_prepare.yml', {'sglang_env': TEST_ENV, 'k26_hosts': ','.join(h.name for h in fleet.hosts[:3])},
                            extra_args=['-i', local_groups_inventory()])
    assert result.rc == 0, result
    result = deploy(fleet, str(inventory))
    assert result.rc == 0, result
    yield fleet, str(inventory), single, rank0, rank1
    for host in (single, rank0, rank1):
        fleet.run(host, 'systemctl disable --now %s; systemctl reset-failed %s 2>/dev/null; true' % (UNIT, UNIT))


def test_a_noop_rerun_plans_nothing_and_restarts_nothing(plan_fleet):
    fleet, inventory, single, rank0, rank1 = plan_fleet
    before = dict((h.name, invocation(fleet, h)) for h in (single, rank0, rank1))
    result = deploy(fleet, inventory)
    assert result.rc == 0, result
    rows = plan_rows(result.stdout)
    assert rows == dict((h.name, ('none', 'no')) for h in (single, rank0, rank1)), result
    assert '3 hosts: 0 through the canary and batches, 0 changed in place without a restart, 3 with nothing to do' in result.stdout
    assert rollout_batches(result.stdout) == [] or rollout_batches(result.stdout) == [[]], result
    assert re.findall(r'changed=(\d+)', result.stdout) and set(re.findall(r'changed=(\d+)', result.stdout)) == {'0'}, result
    assert dict((h.name, invocation(fleet, h)) for h in (single, rank0, rank1)) == before
    assert not [value for value in SECRET_VALUES if value in result.stdout], 'a secret in the output'
    # The fleet report still shows every host, from the plan's observation.
    for host in (single, rank0, rank1):
        assert re.search(r'%s\s+%s\s+active since' % (host.name, re.escape(UNIT)), result.stdout), result


def test_check_mode_prints_the_same_table_and_changes_nothing(plan_fleet):
    fleet, inventory, single, rank0, rank1 = plan_fleet
    break_env(fleet, single)
    before = invocation(fleet, single)
    result = deploy(fleet, inventory, '--check', '--diff')
    assert result.rc == 0, result
    rows = plan_rows(result.stdout)
    assert rows == {single.name: ('restart', 'yes'), rank0.name: ('none', 'no'), rank1.name: ('none', 'no')}, result
    assert 'environment changed' in result.stdout
    assert 'DRIFT=1' in fleet.run(single, 'cat %s' % ENV_FILE, check=True).stdout, 'check mode wrote the file'
    assert invocation(fleet, single) == before


def test_the_plan_names_a_host_the_role_will_refuse_with_its_reason(plan_fleet):
    """A host that must restart, but whose checkpoint lost its config.json: the plan table says `refused` and why,
    from the plan's own observation, before the rollout reaches it; then the role refuses it with the same words
    (check mode: nothing changes on any host)."""
    fleet, inventory, single, rank0, rank1 = plan_fleet
    # the fleet's checkpoint (its group_vars), which the plan of this deploy checks
    model = yaml.safe_load((REPO_ROOT / 'inventories' / 'local' / 'group_vars' / 'local_fleet.yml').read_text())['sglang_model_path']
    break_env(fleet, single)
    before = invocation(fleet, single)
    fleet.run(single, 'mv %s/config.json %s/config.json.moved' % (model, model), check=True)
    try:
        result = deploy(fleet, inventory, '--check')
    finally:
        fleet.run(single, 'mv %s/config.json.moved %s/config.json' % (model, model), check=True)
    assert result.rc != 0, result
    refusal = 'sglang_model_path=%s: config.json is missing' % model
    table = result.stdout.split('TASK [The plan (nothing restarts before it is shown)]', 1)[1].split('TASK [', 1)[0]
    refused = [line for line in table.splitlines() if ' %s ' % single.name in ' %s ' % line and ' refused ' in line]
    assert len(refused) == 1 and refusal in refused[0], table
    assert '1 the role will refuse before any change' in table, table
    # the other hosts' rows are as before (the refusal is the one host's)
    rows = plan_rows(result.stdout)
    assert rows[rank0.name] == ('none', 'no') and rows[rank1.name] == ('none', 'no'), table
    # the role, in its batch, refused it with the same words, and the fleet report says so
    assert refusal in result.stdout.split(ROLLOUT_PLAY, 1)[1], result
    assert [line for line in result.stdout.splitlines()
            if single.name in line and UNIT in line and 'refused before any change' in line], result
    assert invocation(fleet, single) == before


def test_only_the_changed_host_goes_through_the_rollout(plan_fleet):
    fleet, inventory, single, rank0, rank1 = plan_fleet
    break_env(fleet, single)  # idempotent with the previous test's drift: one more line
    before = dict((h.name, invocation(fleet, h)) for h in (single, rank0, rank1))
    result = deploy(fleet, inventory)
    assert result.rc == 0, result
    assert plan_rows(result.stdout)[single.name] == ('restart', 'yes'), result
    assert rollout_batches(result.stdout) == [[single.name]], result
    after = dict((h.name, invocation(fleet, h)) for h in (single, rank0, rank1))
    assert after[single.name] != before[single.name]
    assert after[rank0.name] == before[rank0.name] and after[rank1.name] == before[rank1.name]
    assert 'DRIFT' not in fleet.run(single, 'cat %s' % ENV_FILE, check=True).stdout


def test_a_changed_secret_restarts_its_host_and_shows_no_value(plan_fleet):
    fleet, inventory, single, rank0, rank1 = plan_fleet
    # The host's admin key differs from the inventory's (as after a rotation on the controller): only the secrets
    # file's digest tells, and the plan must restart that host with the inventory's key.
    fleet.run(single, 'sed -i "s/sk-plan-admin-5e0c7a91/sk-plan-admin-rotated/" %s && grep -q rotated %s'
              % (SECRETS_FILE, SECRETS_FILE), check=True)
    before = dict((h.name, invocation(fleet, h)) for h in (single, rank0, rank1))
    result = deploy(fleet, inventory)
    assert result.rc == 0, result
    rows = plan_rows(result.stdout)
    assert rows == {single.name: ('restart', 'yes'), rank0.name: ('none', 'no'), rank1.name: ('none', 'no')}, result
    assert 'secrets changed' in result.stdout, result
    assert not [value for value in SECRET_VALUES + ['sk-plan-admin-rotated'] if value in result.stdout]
    after = dict((h.name, invocation(fleet, h)) for h in (single, rank0, rank1))
    assert after[single.name] != before[single.name]
    assert after[rank0.name] == before[rank0.name] and after[rank1.name] == before[rank1.name]
    assert 'LLMOPS_SGLANG_SECRET_ADMIN_API_KEY="sk-plan-admin-5e0c7a91"' in fleet.run(
        single, 'cat %s' % SECRETS_FILE, check=True).stdout


def keyed_secrets_digests(output):
    """host -> the keyed digests (hmac-sha256:...) in its result of the plan's observe task (-v prints results)."""
    section = output.split('TASK [Observe every instance of the host in one call]', 1)[1].split('\nTASK [', 1)[0]
    parts = re.split(r'^(?:ok|changed): \[([^\]]+)\] => ', section, flags=re.M)
    return dict((host, set(re.findall(r'hmac-sha256:[0-9a-f]+', body))) for host, body in zip(parts[1::2], parts[2::2]))


def test_one_run_keys_every_hosts_secrets_digest_with_one_key_and_the_next_run_with_another(plan_fleet):
    """The plan makes one key per run for all its hosts (validate.yml, run_once): byte-identical secrets files show one
    keyed digest in a run, and another in the next run (a random key, never printed)."""
    fleet, inventory, single, rank0, rank1 = plan_fleet
    hosts = (single, rank0, rank1)
    files = set(fleet.run(h, 'sha256sum < %s' % SECRETS_FILE, check=True).stdout for h in hosts)
    assert len(files) == 1, 'the three secrets files differ: %s' % files
    runs = []
    for run in (1, 2):
        result = deploy(fleet, inventory, '--check', '-v')
        assert result.rc == 0, result
        assert not [value for value in SECRET_VALUES if value in result.stdout], 'a secret in the output'
        digests = keyed_secrets_digests(result.stdout)
        assert sorted(digests) == sorted(h.name for h in hosts), result
        # each host's live file and its last-known-good copy (the same bytes): one digest per host
        assert all(len(found) == 1 for found in digests.values()), digests
        assert len(set.union(*digests.values())) == 1, ('run %d' % run, digests)
        runs.append(set.union(*digests.values()))
    assert runs[0] != runs[1], runs


def test_a_change_on_rank_1_rolls_the_whole_group_in_one_batch(plan_fleet):
    fleet, inventory, single, rank0, rank1 = plan_fleet
    break_env(fleet, rank1)
    before = dict((h.name, invocation(fleet, h)) for h in (single, rank0, rank1))
    result = deploy(fleet, inventory)
    assert result.rc == 0, result
    rows = plan_rows(result.stdout)
    assert rows[rank1.name] == ('restart', 'yes') and rows[rank0.name] == ('none', 'no'), result
    # Rank 0 joined its group's batch although its own plan is empty, and the default policy's canary of one host
    # became the whole group.
    assert rollout_batches(result.stdout) == [sorted([rank0.name, rank1.name])], result
    after = dict((h.name, invocation(fleet, h)) for h in (single, rank0, rank1))
    assert after[rank0.name] != before[rank0.name] and after[rank1.name] != before[rank1.name]
    assert after[single.name] == before[single.name]
    fleet.run(rank0, 'python3 -c "import urllib.request as u; u.urlopen(u.Request(\'http://127.0.0.1:30001/v1/models\', '
                     'headers={\'Authorization\': \'Bearer %s\'}))"' % SECRETS['sglang_api_key'], check=True)


def test_tags_sglang_preflight_runs_the_preflight_alone(plan_fleet):
    fleet, inventory, single, rank0, rank1 = plan_fleet
    break_env(fleet, single)
    before = invocation(fleet, single)
    result = deploy(fleet, inventory, '--tags', 'sglang_preflight')
    assert result.rc == 0, result
    judged = re.findall(r'TASK \[llmops\.sglang\.server : Judge the GPUs and the checkpoint\]', result.stdout)
    assert judged, result
    for host in (single, rank0, rank1):
        assert re.search(r'%s\s+%s\s+preflight passed' % (host.name, re.escape(UNIT)), result.stdout), result
    assert 'Render the unit' not in result.stdout.split(ROLLOUT_PLAY, 1)[-1] and 'Wait for %s' % UNIT not in result.stdout
    # The pending change stays pending and nothing restarted.
    assert 'DRIFT=1' in fleet.run(single, 'cat %s' % ENV_FILE, check=True).stdout
    assert invocation(fleet, single) == before
    # Put it back (a normal run) so that the module's last state is a deployed fleet.
    assert deploy(fleet, inventory).rc == 0


def test_a_host_that_moves_between_the_plan_and_its_batch_is_planned_anew(plan_fleet):
    """Observe once, decide once: a batch applies the plan's decision only while the host is as the plan saw it.

    The single host and the group's rank 1 both drift, so the canary batch is the single host and the group follows.
    While the canary loads, rank 1's environment file drifts again: its batch must see that (compare-and-swap on
    what the plan's decision rested on), say so and decide anew; rank 0 and the canary, unmoved, apply the plan's
    decision without a word about it.

    The order is made, not raced: another run's rollout lock on rank 1 (the plan pass takes no lock) keeps its batch
    from observing it until the second drift is written. Without it, a canary that loads in a few seconds on a busy
    machine let rank 1's batch observe before the drift landed (CI, stop 34)."""
    fleet, inventory, single, rank0, rank1 = plan_fleet
    break_env(fleet, single)
    break_env(fleet, rank1)
    # Once the canary's wait has begun (its live progress line), the plan is made and the group's batch is ahead.
    returncode, output = deploy_while_held(
        fleet, inventory, (single, rank0, rank1), rank1,
        until=lambda line: re.match(r'^\s*%s\s+sglang-k26\s' % re.escape(single.name), line),
        move=lambda: fleet.run(rank1, 'echo "DRIFT=2" >> %s' % ENV_FILE, check=True), timeout=1500)
    assert returncode == 0, output
    rows = plan_rows(output)
    assert rows[single.name] == ('restart', 'yes') and rows[rank1.name] == ('restart', 'yes'), output
    assert rollout_batches(output) == [[single.name], sorted([rank0.name, rank1.name])], output
    # (the result callback prints the message as YAML or as JSON, after the assert's "changed: false")
    moved = re.findall(r'ok: \[([^\]]+)\] =>\s*\{?\s*(?:"?changed"?: false,?\s*)?"?msg"?: ["\']?(\S+) changed since the plan '
                       r'\(([^)]*)\): now (\S+)', output)
    # Only rank 1 moved, and only its files; it is still a restart, of the file as it is after the second drift. The
    # other hosts were seen by their batches too (not a vacuous pass: each ran the decision and restarted).
    assert [(host, unit, action) for host, unit, _keys, action in moved] == [(rank1.name, UNIT, 'restart')], output
    assert 'files' in moved[0][2].split(', '), output
    for host in (single, rank0, rank1):
        assert re.search(r'TASK \[llmops\.sglang\.server : Decide what the instance needs\][^\n]*\n(?:[^\n]*\n)*?ok: \[%s\]'
                         % re.escape(host.name), output), output
    for host in (single, rank1):
        assert 'DRIFT' not in fleet.run(host, 'cat %s' % ENV_FILE, check=True).stdout


def test_a_host_that_moves_before_its_change_in_place_so_that_it_would_restart_is_refused(plan_fleet):
    """The plan sends a host whose instance changes without a restart to the play that applies such changes to all
    hosts at once, outside the canary and the batches. If the host moves before that play reads it, so that it would
    now restart, the role refuses (main.yml's check of the decision) and changes nothing: a restart there would skip
    the canary and the batches.

    The plan's change in place: the venv's Python.h is gone (the plan installs the headers, the server keeps
    running). The move is made, not raced: another run's lock on the host keeps the in-place play from observing it
    until the environment file has drifted and Python.h is back."""
    fleet, inventory, single, rank0, rank1 = plan_fleet
    header = fleet.run(single, [VENV + '/bin/python', '-c', 'import os, sysconfig; '
                                'print(os.path.join(sysconfig.get_paths()["include"], "Python.h"))'], check=True).stdout.strip()
    fleet.run(single, 'test -f %s && mv %s %s.away' % (header, header, header), check=True)
    before = invocation(fleet, single)

    def move():
        break_env(fleet, single)
        fleet.run(single, 'mv %s.away %s' % (header, header), check=True)

    try:
        returncode, output = deploy_while_held(
            fleet, inventory, (single, rank0, rank1), single,
            until=lambda line: line.startswith('PLAY [Apply the changes that need no restart'), move=move, timeout=900)
    finally:
        fleet.run(single, 'if [ -f %s.away ]; then mv %s.away %s; fi' % (header, header, header))
    assert returncode != 0, output
    rows = plan_rows(output)
    assert rows == {single.name: ('change', 'no'), rank0.name: ('none', 'no'), rank1.name: ('none', 'no')}, output
    assert ('%s would restart now (the running server must load the new configuration), but the rollout plan found it '
            'needs no restart: the host changed since the plan (' % UNIT) in flat(output), output
    moved = re.search(r'the host changed since the plan \(([^)]*)\)\. Nothing was changed; run the playbook again to plan '
                      r'it anew\.', flat(output))
    assert moved and 'files' in moved.group(1).split(', '), output
    assert rollout_batches(output) in ([], [[]]), output  # nothing went through the canary and batches
    assert invocation(fleet, single) == before
    assert 'DRIFT=1' in fleet.run(single, 'cat %s' % ENV_FILE, check=True).stdout
    # Back to a deployed fleet for what follows (a run that plans the drift anew: a restart, through the rollout).
    again = deploy(fleet, inventory)
    assert again.rc == 0, again
    assert plan_rows(again.stdout)[single.name] == ('restart', 'yes'), again


def test_a_fresh_host_with_two_instances_says_no_move_its_first_instance_made(private_fleet, standin_venv):
    """b300's hosts run two instances. On a fresh host the first instance's run installs the Python headers and makes
    the directories and the service account both want, so the second instance's own read differs from the plan's:
    a move towards what it wants (source converged), decided anew from that read, and not reported as a change since
    the plan. Both serve, and the second run is a no-op."""
    own = private_fleet(count=1, standin=True)
    host = own.hosts[0]
    standin_venv(host, on=own)
    make_model(own, host, MODEL)
    # the headers the role installs (the base image has none): both instances want them, the first installs them
    assert own.run(host, "dpkg-query -W -f='${db:Status-Status}' python3-dev").stdout != 'installed'
    instances = [{'name': name, 'port': port, 'env': dict(TEST_ENV, SGLANG_STANDIN_STATE_DIR='/var/lib/sglang/' + name)}
                 for name, port in (('sglang-c1', 30141), ('sglang-c2', 30142))]
    # each instance's own env (a -e sglang_env would win over it), its stand-in's state in its own state directory
    extra = dict(SECRETS, sglang_model_path=MODEL, k26_hosts=host.name, k26_instances=instances)
    result = own.playbook('playbooks/deploy_k26.yml', extra, extra_args=['-i', local_groups_inventory(), '-v'])
    assert result.rc == 0, result
    # each instance decided from its own read (not vacuous): c2's moved, only towards what it wants
    decided = [chunk.split('TASK [', 1)[0] for chunk in
               result.stdout.split('TASK [llmops.sglang.server : Decide what the instance needs]')[1:]]
    decisions = re.findall(r"\bsource'?:\s*'?(plan|replanned|converged)\b", ''.join(decided))
    assert sorted(decisions) == ['converged', 'plan'], '\n'.join(decided)
    assert 'changed since the plan' not in result.stdout, result
    assert own.run(host, "dpkg-query -W -f='${db:Status-Status}' python3-dev").stdout == 'installed'
    for name in ('sglang-c1', 'sglang-c2'):
        assert own.run(host, 'systemctl is-active %s.service' % name).stdout.strip() == 'active', name
    again = own.playbook('playbooks/deploy_k26.yml', extra, extra_args=['-i', local_groups_inventory()])
    assert again.rc == 0, again
    assert set(re.findall(r'changed=(\d+)', again.stdout)) == {'0'}, again
