# -*- coding: utf-8 -*-
"""Day 2 behind two real sglang-router 0.3.2 hosts (issue 23): the first deploy, a stop, a restart.

One fleet of six hosts for the whole file: three workers (the SGLang stand-in, keyed with the routers' key) on four
hosts - two single-node servers and one multi-node server over two hosts (rank 0 is the worker) - and two routers.
In order, each test building on the one before:

- the first deploy onto the fresh fleet (nothing serves, the routers list nothing) with the default policy (canary,
  then quarters: three batches, the group whole in one) passes the capacity guard and ends with every worker listed
  by both routers;
- stop.yml of one worker: refused by the capacity guard when k26_min_serving asks for more than would stay (nothing
  stopped, nothing drained); then, under a load through both routers, stop.yml of a single-node worker and of the
  multi-node group's rank 1 (the group stops whole): both workers leave both routers before their units stop (the
  routers' listings polled against the units' journals), no request fails, the report shows the single one OUT, and
  neither router was installed, restarted or changed (unit InvocationID, ActiveEnterTimestamp, files);
- restart.yml of those hosts: a bad k26_deploy_routers refused before anything changes; then both workers started
  again and admitted to both routers by the drain-aware path, still without deploying the routers;
- a change of the multi-node group's configuration that the capacity guard refuses on rank 0's host (through
  deploy_k26.yml, then the role in a play of its own): rank 1's host, whose restart reaches every rank, refuses too,
  and neither rank restarts while both routers list the worker.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import http.client
import json
import os
import re
import shutil
import tempfile
import time

import pytest

from conftest import REPO_ROOT
from fleet import load as fleet_load  # tests/ is on sys.path (conftest)
from router_helpers import router_fleet

UNIT = 'sglang-k26.service'
ROUTER_UNIT = 'sglang-router.service'
ROUTER_PORT = 30080
ROUTER_KEY = 'rk-day2-3c9e41f0b2'
MODEL = 'kimi-k2.6'
REQUEST_LOG = '/var/lib/sglang/sglang-k26/requests.jsonl'
TOKEN_SECONDS = 0.1
LONG_TOKENS = 60  # a 6 s stream: in flight when the drain starts, it keeps the drain's in-flight wait busy
TEST_ENV = {'SGLANG_STANDIN_PACE': '0.02', 'SGLANG_STANDIN_GPU': 'rtx_pro_6000',
            'SGLANG_STANDIN_STATE_DIR': '/var/lib/sglang/sglang-k26',
            'SGLANG_STANDIN_TOKEN_SECONDS': str(TOKEN_SECONDS), 'SGLANG_STANDIN_REQUEST_LOG': REQUEST_LOG}
FLEET_SIZE = 6
GROUP = 'day2_tp'  # hosts[2] (rank 0, the worker) and hosts[3] (rank 1)
# What a router deploy would change on a router host: its unit, launcher, secrets, the venv's router package.
ROUTER_FILES = ('/etc/systemd/system/sglang-router.service /usr/local/lib/llmops-sglang/router_launch.py '
                '/var/lib/llmops-sglang/router/sglang-router.secrets')
ROUTER_STATE = ('systemctl show -p InvocationID -p ActiveEnterTimestamp -p MainPID -p NRestarts %s; '
                'sha256sum %s; stat -c "%%n %%Y %%Z" %s /opt/sglang-router/venv/lib/python3*/site-packages/sglang_router*'
                % (ROUTER_UNIT, ROUTER_FILES, ROUTER_FILES))


@pytest.fixture(scope='module')
def dfleet():
    """Six hosts on this file's fleet (four worker hosts, two routers); brought down at the end if this file booted it."""
    yield from router_fleet(FLEET_SIZE)


@pytest.fixture(scope='module')
def inventory(dfleet):
    """k26_servers (two hosts and the two of a multi-node group, keyed with the routers' key), k26_routers (two),
    the local fleet's group vars."""
    singles, group, routers = dfleet.hosts[:2], dfleet.hosts[2:4], dfleet.hosts[4:6]
    root = tempfile.mkdtemp(prefix='day2-inv-')
    os.mkdir(os.path.join(root, 'group_vars'))
    os.symlink(os.path.join(str(REPO_ROOT), 'inventories', 'local', 'group_vars', 'local_fleet.yml'),
               os.path.join(root, 'group_vars', 'local_fleet.yml'))
    with open(os.path.join(root, 'day2.yml'), 'w') as handle:
        json.dump({'all': {'children': {
            'k26_servers': {'hosts': dict((h.name, {}) for h in singles),
                            'children': {GROUP: {'hosts': dict((h.name, {}) for h in group),
                                                 'vars': {'sglang_multinode_group': GROUP, 'sglang_tp_size': 16}}},
                            'vars': {'sglang_host': '0.0.0.0', 'sglang_api_key': ROUTER_KEY}},
            'k26_routers': {'hosts': dict((h.name, {}) for h in routers), 'vars': {
                'router_port': ROUTER_PORT, 'router_api_key': ROUTER_KEY,
                'router_pip_find_links': ['{{ fleet_mirror_url }}/wheels/'],
                'router_pip_trusted_hosts': ["{{ fleet_mirror_url | urlsplit('hostname') }}"],
                'router_pip_extra_args': ['--no-index'],
                'router_health_check_interval_secs': 2,
                # The stop test needs every worker it stops to have served some of the load before its drain.
                # cache_aware (the default) may keep the load's requests, which share their opening words, on fewer
                # workers: in one make test run fd-02 served none of 188. round_robin spreads them; test_router_claims
                # measures cache_aware itself.
                'router_policy': 'round_robin',
                # the first deploy: no worker serves yet; the role reports them unlisted after this wait, not a failure
                'router_worker_wait': 5}}}}}, handle)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope='module')
def cleanup(dfleet):
    """Stops what the file started, also when a test failed (the fleet itself is removed by dfleet)."""
    yield dfleet
    for host in dfleet.hosts[:4]:
        dfleet.run(host, 'systemctl disable --now %s; systemctl reset-failed %s 2>/dev/null; rm -f %s; true'
                   % (UNIT, UNIT, REQUEST_LOG))
    for host in dfleet.hosts[4:6]:
        dfleet.run(host, 'systemctl disable --now %s; true' % ROUTER_UNIT)


def play(fleet, inventory, playbook, check_rc=True, **extra_vars):
    extra = {'sglang_env': TEST_ENV}
    extra.update(extra_vars)
    result = fleet.playbook(playbook, extra, extra_args=['-i', inventory])
    if check_rc:
        assert result.rc == 0, result
    return result


def router_call(router, method, path):
    conn = http.client.HTTPConnection(router.address, ROUTER_PORT, timeout=30)
    conn.request(method, path, None, {'Authorization': 'Bearer ' + ROUTER_KEY})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, json.loads(data.decode() or 'null')


def listing(router):
    """The router's workers: {url: is_healthy}."""
    status, answer = router_call(router, 'GET', '/workers')
    assert status == 200, answer
    return dict((w['url'], w['is_healthy']) for w in answer['workers'])


def url(host):
    return 'http://%s:30001' % host.address


def main_pid(fleet, host):
    return fleet.run(host, 'systemctl show -p MainPID --value %s' % UNIT, check=True).stdout.strip()


def router_states(fleet):
    return dict((h.name, fleet.run(h, ROUTER_STATE, check=True).stdout) for h in fleet.hosts[4:6])


def report_cells(result, names):
    """host name -> the text of its row in the last fleet report the playbook printed (whitespace collapsed)."""
    report = re.split(r'TASK \[Fleet report', result.stdout)[-1].split('TASK [')[0].split('PLAY RECAP')[0]
    text = ' '.join(report.replace('\\n', '\n').split())
    starts = sorted((m.start(), n) for n in names for m in [re.search(r'(?<!\S)%s (?:%s|-) ' % (re.escape(n), re.escape(UNIT)), text)] if m)
    assert len(starts) == len(names), text
    return dict((n, text[p:(starts[i + 1][0] if i + 1 < len(starts) else len(text))]) for i, (p, n) in enumerate(starts))


def roles(fleet):
    """(the worker hosts: two single-node and rank 0 of the group, the group's rank 1, the routers)."""
    return fleet.hosts[:3], fleet.hosts[3], fleet.hosts[4:6]


def test_first_deploy_onto_a_fresh_fleet_behind_two_routers_with_the_default_policy(dfleet, inventory, cleanup):
    fleet = cleanup
    workers, rank1, routers = roles(fleet)
    result = fleet.playbook('tests/fleet/demo_prepare.yml', {}, extra_args=['-i', inventory])
    assert result.rc == 0, result
    for host in workers + [rank1]:  # a fresh fleet: no unit on any worker host
        assert fleet.run(host, 'systemctl cat %s' % UNIT).returncode != 0
    began = time.time()
    result = play(fleet, inventory, 'playbooks/deploy_k26.yml')  # no k26_serial, no k26_min_serving: the defaults
    print('\nfirst deploy (canary, then batches of one host or one group): %.0f s' % (time.time() - began))
    # three batches (a host, a host, the group), each worker through the capacity guard, which took nothing away
    assert result.stdout.count('router : Refuse a batch that would leave too few workers in rotation') == 3, result
    assert 'refusing to take' not in result.stdout, result
    for host in workers + [rank1]:
        assert main_pid(fleet, host) not in ('', '0'), host.name
    for router in routers:
        assert listing(router) == dict((url(h), True) for h in workers), router.name
    rows = report_cells(result, [h.name for h in workers + [rank1]])
    for host in workers:
        assert '%s: in, %s: in' % (routers[0].name, routers[1].name) in rows[host.name], rows


def test_stop_refused_by_the_capacity_guard_changes_nothing(dfleet, inventory, cleanup):
    fleet = cleanup
    workers, _rank1, routers = roles(fleet)
    victim = workers[1]
    pid = main_pid(fleet, victim)
    result = play(fleet, inventory, 'playbooks/stop.yml', check_rc=False, k26_hosts=victim.name, k26_min_serving=3)
    assert result.rc != 0, result
    text = ' '.join(result.stdout.split())
    assert ('refusing to take %s out of rotation: fewer than k26_min_serving=3 workers would serve: %s would keep 2'
            % (url(victim), routers[0].name)) in text, result
    assert '%s would keep 2' % routers[1].name in text, result
    assert main_pid(fleet, victim) == pid
    for router in routers:
        assert listing(router) == dict((url(h), True) for h in workers), router.name


def test_a_group_whose_worker_the_capacity_guard_keeps_is_stopped_by_none_of_its_hosts(dfleet, inventory, cleanup):
    """A multi-node group's stop: its rank 0's host drains the group's worker, and the guard refuses. Its rank 1's host,
    which would stop every rank of the group by delegation, refuses too (stop.yml's "Refuse to stop a group whose
    worker is still in the routers", which no test provoked before): the group keeps serving, in both routers."""
    assert_group_refused(cleanup, lambda: play(cleanup, inventory, 'playbooks/stop.yml', check_rc=False,
                                               k26_hosts=GROUP, k26_min_serving=3), STOP_REFUSAL)


# rank 1's host's refusal of a group's stop, with the group's rank 0 URL and host, and the drainer (rank 0's host)
STOP_REFUSAL = '%s not stopped: its multi-node group\'s worker %s (rank 0, %s) was not taken out of the routers by %s'


def assert_group_refused(fleet, run, refusal):
    """Runs run() (a stop or a restart of the group with k26_min_serving=3) and checks that the guard refused rank 0's
    host, that rank 1's host failed saying why it leaves the group alone (``refusal`` % (unit, rank 0's URL, rank 0's
    host, the drainer)), and that neither rank's server nor either router's listing changed (the group's main PIDs,
    asserted running before)."""
    workers, rank1, routers = roles(fleet)
    rank0 = workers[2]
    pids = dict((host.name, main_pid(fleet, host)) for host in (rank0, rank1))
    assert '' not in pids.values() and '0' not in pids.values(), pids
    for router in routers:
        assert listing(router) == dict((url(h), True) for h in workers), router.name
    result = run()
    assert result.rc != 0, result
    text = ' '.join(result.stdout.split())
    # the drainer (rank 0's host) was refused by the guard, and rank 1's host said why it does not stop or restart
    # the group
    assert 'refusing to take %s out of rotation' % url(rank0) in text, result
    assert (refusal % (UNIT, url(rank0), rank0.name, rank0.name)) in text, result
    assert re.search(r'fatal: \[%s\]' % re.escape(rank1.name), result.stdout), result
    assert dict((host.name, main_pid(fleet, host)) for host in (rank0, rank1)) == pids
    for router in routers:
        assert listing(router) == dict((url(h), True) for h in workers), router.name


# The server role in a play of one's own, without deploy_k26.yml's rescue: a host that fails leaves the play's batch.
STANDALONE_STOP = """
- name: Stop the multi-node group with the server role in a play of its own
  hosts: %s
  gather_facts: false
  tasks:
    - name: Stop the instance, drained from the routers first
      ansible.builtin.include_role:
        name: llmops.sglang.server
      vars:
        sglang_service_name: %s
        sglang_port: 30001
        sglang_state: stopped
        sglang_router_hosts: "{{ groups['k26_routers'] }}"
        sglang_router_fleet_workers: %s
"""


def test_a_group_whose_drainer_fails_in_a_play_without_a_rescue_is_not_stopped_by_its_next_host(
        dfleet, inventory, cleanup, tmp_path):
    """The same refusal with the role in a play of one's own: the failed drainer (rank 0's host) leaves the play's
    batch, and its rank 1's host must not take over as the drainer and stop every rank of a group still in the
    routers (stop.yml chooses the drainer among the play's hosts, not the active batch)."""
    workers = roles(cleanup)[0]
    playbook = tmp_path / 'stop_group.yml'
    playbook.write_text(STANDALONE_STOP % (GROUP, UNIT[:-len('.service')], json.dumps([url(h) for h in workers])))
    assert_group_refused(cleanup, lambda: play(cleanup, inventory, str(playbook), check_rc=False, k26_min_serving=3),
                         STOP_REFUSAL)


def journal_stop_time(fleet, host, since):
    """The journal's time (epoch seconds) at which the unit on host began to end since `since`: systemd's 'Stopping
    UNIT' line, or, on a multi-node rank >= 1 (it ends by itself once rank 0 stopped), its deactivation."""
    out = fleet.run(host, 'journalctl -u %s -o json --no-pager --since=@%d' % (UNIT, int(since) - 1), check=True).stdout
    entries = [e for e in map(json.loads, out.splitlines()) if e.get('_PID') == '1' or e.get('_COMM') == 'systemd']
    times = [int(e['__REALTIME_TIMESTAMP']) / 1e6 for e in entries
             if str(e.get('MESSAGE', '')).startswith('Stopping ') or 'Deactivated successfully' in str(e.get('MESSAGE'))]
    assert times, out[-3000:]
    return min(times)


def test_stop_drains_the_workers_from_both_routers_first_and_leaves_the_routers_alone(dfleet, inventory, cleanup):
    fleet = cleanup
    workers, rank1, routers = roles(fleet)
    single, rank0 = workers[1], workers[2]
    before = router_states(fleet)
    poller = fleet_load.RotationPoller([(r.address, ROUTER_PORT) for r in routers], api_key=ROUTER_KEY,
                                       interval=0.25).start()
    loads = [fleet_load.Load(r.address, ROUTER_PORT, fleet_load.mix(400, 3), clients=2, api_key=ROUTER_KEY, model=MODEL,
                             long_tokens=LONG_TOKENS, timeout=120, tag='stop-%d' % i).start()
             for i, r in enumerate(routers)]
    try:
        time.sleep(4)  # streams in flight on every worker before the drain
        began = time.time()
        # a single-node host and the group's rank 1 only: the group stops whole, its worker (rank 0) drained first
        result = play(fleet, inventory, 'playbooks/stop.yml', k26_hosts='%s,%s' % (single.name, rank1.name))
        ended = time.time()
        time.sleep(2)
    finally:
        for load in loads:
            load.stop.set()
        for load in loads:
            assert load.join(LONG_TOKENS * TOKEN_SECONDS * 4 + 120), 'the load did not stop by itself'
        samples = poller.finish()
    print('\nstop.yml of a single-node host and of a multi-node group: %.0f s' % (ended - began))
    for host in (single, rank0, rank1):
        assert fleet.run(host, 'systemctl is-active %s' % UNIT).stdout.strip() == 'inactive', host.name
    assert fleet.run(workers[0], 'systemctl is-active %s' % UNIT).stdout.strip() == 'active'
    stopping = dict((h.name, journal_stop_time(fleet, h, began)) for h in (single, rank0, rank1))
    # the order: on each router the last listing with the worker came before its unit (both ranks of the group) began
    # to stop, and no later listing had it again
    for router in routers:
        mine = [s for s in samples if s['router'] == '%s:%d' % (router.address, ROUTER_PORT) and s['error'] is None]
        for host, units in ((single, [single]), (rank0, [rank0, rank1])):
            with_it = [s['time'] for s in mine if url(host) in s['listed'] and s['time'] >= began]
            without = [s['time'] for s in mine if url(host) not in s['listed'] and s['time'] >= began]
            assert with_it and without, (router.name, host.name, len(mine))  # seen in rotation during the run, then out
            first_stop = min(stopping[u.name] for u in units)
            assert max(with_it) < min(without) < first_stop, (router.name, host.name, max(with_it), min(without), stopping)
            print('%s: %s out of rotation %.1f s before its unit began to stop'
                  % (router.name, host.name, first_stop - min(without)))
        assert listing(router) == {url(workers[0]): True}, router.name
    # no request failed or was cut, through either router; the stopped workers served some of them before their
    # drain, and none reached them once they were stopping (the stand-in records a request received after SIGTERM
    # as "draining")
    results = [r for load in loads for r in load.results]
    summary = fleet_load.summarize(results)
    print('load through both routers: %s' % fleet_load.summary_line(summary))
    assert summary['failed'] == 0 and summary['truncated'] == 0, fleet_load.summary_line(summary)
    assert summary['long']['ok'] >= 2 and summary['first_start'] < began and summary['last_end'] > max(stopping.values())
    for host in (single, rank0):
        log = fleet.run(host, 'cat %s' % REQUEST_LOG, check=True).stdout
        served = [r for router in routers
                  for r in fleet_load.sent_by(fleet_load.json_lines_since(log, began - 4), router.address)]
        assert served, '%s served nothing through the routers during the test' % host.name
        assert not [r for r in served if r['state'] == 'draining'], served
    # the routers: no install, no restart, no file changed, but reached for the drain (the workers left both above)
    assert router_states(fleet) == before
    assert 'Leave the routers as they are' in result.stdout, result
    assert not re.search(r'TASK \[llmops\.sglang\.router : (?!Read every router|Refuse a batch|Take the workers out|'
                         r'Wait until the workers|Say what the drain|Remember what each router|Router rotation)',
                         result.stdout), result
    drains = ''.join(part.split('TASK [')[0] for part in result.stdout.split('Take the workers out of every router]')[1:])
    for router in routers:
        for host in (single, rank0):  # the group's worker drained by its rank 0's host, once
            assert len(re.findall(r'changed: \[%s -> %s[\](]' % (re.escape(host.name), re.escape(router.name)),
                                  drains)) == 1, result
        assert not re.search(r'\[%s -> %s[\](]' % (re.escape(rank1.name), re.escape(router.name)), drains), result
    # the report (the hosts of k26_hosts): the stopped unit inactive, OUT on both routers; rank 1 is no worker
    rows = report_cells(result, [single.name, rank1.name])
    assert rows[single.name].startswith('%s %s inactive ' % (single.name, UNIT)), rows
    assert '%s: OUT, %s: OUT' % (routers[0].name, routers[1].name) in rows[single.name], rows
    assert rows[rank1.name].startswith('%s %s inactive ' % (rank1.name, UNIT)), rows


def test_restart_starts_and_admits_the_stopped_workers_without_deploying_the_routers(dfleet, inventory, cleanup):
    fleet = cleanup
    workers, rank1, routers = roles(fleet)
    single = workers[1]
    hosts = '%s,%s' % (single.name, rank1.name)
    before = router_states(fleet)
    # a bad value: refused on the routers' play, before anything changes anywhere
    refused = play(fleet, inventory, 'playbooks/restart.yml', check_rc=False, k26_hosts=hosts, k26_deploy_routers='maybe')
    assert refused.rc != 0, refused
    assert 'k26_deploy_routers=maybe: expected true or false' in ' '.join(refused.stdout.split()), refused
    assert 'Plan the rollout' not in refused.stdout, refused
    assert fleet.run(single, 'systemctl is-active %s' % UNIT).stdout.strip() == 'inactive'
    began = time.time()
    result = play(fleet, inventory, 'playbooks/restart.yml', k26_hosts=hosts)
    print('\nrestart.yml of the stopped hosts: %.0f s' % (time.time() - began))
    for host in workers + [rank1]:
        assert fleet.run(host, 'systemctl is-active %s' % UNIT).stdout.strip() == 'active', host.name
    for router in routers:
        assert listing(router) == dict((url(h), True) for h in workers), router.name
    assert 'router : Admit the workers to every router and verify it routes to them]' in result.stdout, result
    assert router_states(fleet) == before
    assert 'Leave the routers as they are' in result.stdout, result
    row = report_cells(result, [single.name, rank1.name])[single.name]
    assert row.startswith('%s %s ready ' % (single.name, UNIT)), row
    assert '%s: in, %s: in' % (routers[0].name, routers[1].name) in row, row


# rank 1's host's refusal of a group's restart (run.yml), with the same four values as STOP_REFUSAL
RESTART_REFUSAL = ('%s not restarted: its multi-node group\'s worker %s (rank 0, %s) was not taken out of the routers '
                   'by %s')
# A change of the group's configuration (its environment file): the plan restarts both ranks.
CHANGED_ENV = dict(TEST_ENV, DAY2_GROUP_CHANGE='1')


def test_a_group_whose_worker_the_capacity_guard_keeps_is_restarted_by_none_of_its_hosts(dfleet, inventory, cleanup):
    """A change of the multi-node group's configuration behind routers, as deploy_k26.yml rolls it: its rank 0's host
    drains the group's worker, and the guard refuses. Its rank 1's host, whose restart stops every rank of the group by
    delegation, rank 0 first, must not restart the group while both routers list rank 0 (run.yml's "Refuse to restart
    a group whose rank 0 is not ready for it"): the group keeps serving, in both routers. The last tests of the
    file: the group's files stay changed on disk, and nothing after them reads them."""
    assert_group_refused(cleanup, lambda: play(cleanup, inventory, 'playbooks/deploy_k26.yml', check_rc=False,
                                               k26_hosts=GROUP, k26_min_serving=3, sglang_env=CHANGED_ENV),
                         RESTART_REFUSAL)


def test_a_group_whose_drainer_fails_in_a_play_without_a_rescue_is_not_restarted_by_its_next_host(
        dfleet, inventory, cleanup, tmp_path):
    """The same refusal with the role in a play of one's own (no plan, no rescue): the failed rank 0's host leaves
    the play's batch, and its rank 1's host must not restart every rank of a group still in the routers."""
    workers = roles(cleanup)[0]
    playbook = tmp_path / 'restart_group.yml'
    playbook.write_text(STANDALONE_STOP.replace('sglang_state: stopped', 'sglang_state: started')
                        .replace('Stop the', 'Restart the') % (GROUP, UNIT[:-len('.service')],
                                                               json.dumps([url(h) for h in workers])))
    assert_group_refused(cleanup, lambda: play(cleanup, inventory, str(playbook), check_rc=False, k26_min_serving=3,
                                               sglang_env=dict(CHANGED_ENV, DAY2_GROUP_CHANGE='2')),
                         RESTART_REFUSAL)
