# -*- coding: utf-8 -*-
"""The real sglang-router 0.3.2 (llmops.sglang.router) in front of three worker hosts.

One fleet of four hosts for the whole file (module fixture): the last is the router, the other three run the SGLang
stand-in streaming token by token. The first deploy goes through the drain-aware path (capacity guard, admit after a
real completion, route check). Then, under a bounded load through the router (tests/fleet/load.py: three clients,
short chat requests mixed with streams of LONG_TOKENS x TOKEN_SECONDS = 20 s): a rolling change of every worker host
with zero failed or truncated responses and no request served by a loading worker; and a canary whose wait fails
stays out of rotation while the other two serve the load, the rollout stopping before the next batch.
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

from conftest import REPO_ROOT, Fleet, require_fleet, shared_fleet_tool
from fleet import load as fleet_load, router_wheels  # tests/ is on sys.path (conftest)

UNIT = 'sglang-k26.service'
ROUTER_PORT = 30080
ROUTER_KEY = 'rk-test-5b1e0c9d7a'
REQUEST_LOG = '/var/lib/sglang/sglang-k26/requests.jsonl'
EVENT_LOG = '/var/lib/sglang/sglang-k26/events.jsonl'
FAULT_FILE = '/etc/sglang-standin/faults'
TOKEN_SECONDS = 0.1
LONG_TOKENS = 200  # a long stream: 20 s
MODEL = 'kimi-k2.6'
TEST_ENV = {'SGLANG_STANDIN_PACE': '0.02', 'SGLANG_STANDIN_GPU': 'rtx_pro_6000',
            'SGLANG_STANDIN_STATE_DIR': '/var/lib/sglang/sglang-k26',
            'SGLANG_STANDIN_TOKEN_SECONDS': str(TOKEN_SECONDS), 'SGLANG_STANDIN_REQUEST_LOG': REQUEST_LOG,
            'SGLANG_STANDIN_EVENT_LOG': EVENT_LOG, 'SGLANG_STANDIN_FAULT_FILE': FAULT_FILE}
FLEET_SIZE = 4


@pytest.fixture(scope='module')
def rfleet():
    """Four hosts (three workers, one router) on this group's fleet; brought down at the end if this file booted it."""
    require_fleet()
    tool = shared_fleet_tool()
    before = tool.status()
    was_up = before.get('status') != 'down'
    try:
        if before.get('healthy') and before.get('count', 0) == FLEET_SIZE:
            tool.refresh_mirror()
        else:
            tool.up(FLEET_SIZE)
        fleet = Fleet(tool, tool.status())
        router_wheels.add_to_mirror(os.path.join(fleet.state_dir, 'mirror'))
        yield fleet
    finally:
        if not was_up:
            tool.down()


@pytest.fixture(scope='module')
def inventory(rfleet):
    """A directory inventory: k26_servers (three hosts), k26_routers (one), and the local fleet's group vars."""
    workers, router = rfleet.hosts[:3], rfleet.hosts[3]
    root = tempfile.mkdtemp(prefix='router-inv-')
    os.mkdir(os.path.join(root, 'group_vars'))
    os.symlink(os.path.join(str(REPO_ROOT), 'inventories', 'local', 'group_vars', 'local_fleet.yml'),
               os.path.join(root, 'group_vars', 'local_fleet.yml'))
    path = os.path.join(root, 'router.yml')
    with open(path, 'w') as handle:
        json.dump({'all': {'children': {
            # The router reaches the workers over the fleet network (the role's default binds 127.0.0.1).
            'k26_servers': {'hosts': dict((h.name, {}) for h in workers), 'vars': {'sglang_host': '0.0.0.0'}},
            'k26_routers': {'hosts': {router.name: {}}, 'vars': {
                'router_port': ROUTER_PORT, 'router_api_key': ROUTER_KEY,
                'router_pip_find_links': ['{{ fleet_mirror_url }}/wheels/'],
                'router_pip_trusted_hosts': ["{{ fleet_mirror_url | urlsplit('hostname') }}"],
                'router_pip_extra_args': ['--no-index'],
                'router_health_check_interval_secs': 2, 'router_worker_wait': 60}}}}}, handle)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def play(fleet, inventory, playbook, check_rc=True, **extra_vars):
    extra = {'sglang_env': TEST_ENV}
    extra.update(extra_vars)
    result = fleet.playbook(playbook, extra, extra_args=['-i', inventory])
    if check_rc:
        assert result.rc == 0, result
    return result


@pytest.fixture(scope='module')
def deployed(rfleet, inventory):
    fleet = rfleet
    workers = fleet.hosts[:3]
    result = fleet.playbook('tests/fleet/demo_prepare.yml', {}, extra_args=['-i', inventory])
    assert result.rc == 0, result
    for host in workers:
        fleet.run(host, 'mkdir -p /etc/sglang-standin && : > /etc/sglang-standin/faults', check=True)
    play(fleet, inventory, 'playbooks/deploy_k26.yml', k26_serial=3)
    yield fleet
    for host in workers:
        fleet.run(host, 'systemctl disable --now %s; systemctl reset-failed %s 2>/dev/null; rm -f %s %s %s*; true'
                  % (UNIT, UNIT, REQUEST_LOG, EVENT_LOG, FAULT_FILE))
    fleet.run(fleet.hosts[3], 'systemctl disable --now sglang-router.service; true')


def router_call(fleet, method, path, body=None, timeout=60):
    conn = http.client.HTTPConnection(fleet.hosts[3].address, ROUTER_PORT, timeout=timeout)
    conn.request(method, path, json.dumps(body) if body is not None else None,
                 {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + ROUTER_KEY})
    response = conn.getresponse()
    data = response.read()
    conn.close()
    return response.status, json.loads(data.decode() or 'null')


def rotation(fleet):
    status, answer = router_call(fleet, 'GET', '/workers')
    assert status == 200, answer
    return sorted(w['url'] for w in answer['workers'])


def worker_urls(fleet):
    return sorted('http://%s:30001' % h.address for h in fleet.hosts[:3])


def test_router_runs_with_the_key_off_its_command_line_and_lists_every_worker(deployed, inventory):
    fleet = deployed
    router = fleet.hosts[3]
    assert rotation(fleet) == worker_urls(fleet)
    pid = fleet.run(router, 'systemctl show -p MainPID --value sglang-router.service', check=True).stdout.strip()
    cmdline = fleet.run(router, 'tr "\\0" " " < /proc/%s/cmdline' % pid, check=True).stdout
    assert cmdline and ROUTER_KEY not in cmdline
    assert ROUTER_KEY not in fleet.run(router, 'cat /proc/%s/environ' % pid, check=True).stdout
    journal = fleet.run(router, 'journalctl -u sglang-router.service -o verbose --all --no-pager', check=True).stdout
    assert 'Starting router on' in journal and ROUTER_KEY not in journal
    assert fleet.run(router, 'stat -c %a /etc/sglang-router/sglang-router.secrets', check=True).stdout.strip() == '600'
    # without the key the router refuses its clients
    conn = http.client.HTTPConnection(router.address, ROUTER_PORT, timeout=30)
    conn.request('GET', '/workers')
    assert conn.getresponse().status == 401
    # its Prometheus endpoint
    assert 'smg_' in fleet.run(router, 'python3 -c "import urllib.request as u; print(u.urlopen(\'http://127.0.0.1:29000/metrics\').read().decode())"',
                               check=True).stdout
    # a second run changes nothing (no restart of the router, no re-registration)
    again = play(fleet, inventory, 'playbooks/router.yml')
    assert 'changed=0' in again.stdout.split('PLAY RECAP')[-1], again
    assert fleet.run(router, 'systemctl show -p MainPID --value sglang-router.service', check=True).stdout.strip() == pid


# ---- under load ---------------------------------------------------------------------------------------------
# At most this many requests (every 4th a 20 s stream); the test stops sending once the rollout ended, and fails
# if the plan ran out before that (the load must span the whole rollout).
LOAD_REQUESTS = 400
LOAD_CLIENTS = 3


def host_json_lines(fleet, host, path, since):
    """The JSON lines of a host's file whose `time` or `start` is >= since."""
    return fleet_load.json_lines_since(fleet.run(host, 'cat %s 2>/dev/null; true' % path, check=True).stdout, since)


def report_rows(result, hosts):
    """host name -> its row in the last fleet report the playbook printed (the report play's, or the last batch's when
    the rollout stopped), whitespace collapsed: the result callback wraps a long row over several lines."""
    # deploy_k26.yml's report tasks are "Fleet report ...", status.yml's (report.yml's) "Print one line per host ..."
    report = re.split(r'TASK \[(?:Fleet report|Print one line per host)', result.stdout)[-1]
    report = report.split('TASK [')[0].split('PLAY RECAP')[0]
    text = ' '.join(report.replace('\\n', '\n').split())  # a JSON-style callback escapes the newlines
    # a row starts with the host and its instance (or '-' for a host the rollout did not reach)
    starts = sorted((match.start(), name) for name in hosts
                    for match in [re.search(r'(?<!\S)%s (?:%s|-) ' % (re.escape(name), re.escape(UNIT)), text)] if match)
    assert len(starts) == len(hosts), text
    return dict((name, text[pos:(starts[i + 1][0] if i + 1 < len(starts) else len(text))])
                for i, (pos, name) in enumerate(starts))


def main_pid(fleet, host):
    return fleet.run(host, 'systemctl show -p MainPID --value %s' % UNIT, check=True).stdout.strip()


def rollout_under_load(fleet, inventory, roll, check_rc=True):
    """deploy_k26.yml with a changed environment (every worker's unit changes: each restarts, canary first, then
    batches of one) while the bounded load runs through the router and a poller reads its /workers every second.
    Returns (playbook result, load summary, load results, poller samples, rollout start, rollout end)."""
    router = fleet.hosts[3]
    poller = fleet_load.RotationPoller([(router.address, ROUTER_PORT)], api_key=ROUTER_KEY, interval=1.0).start()
    load = fleet_load.Load(router.address, ROUTER_PORT, fleet_load.mix(LOAD_REQUESTS, 4), clients=LOAD_CLIENTS,
                           api_key=ROUTER_KEY, model=MODEL, long_tokens=LONG_TOKENS, timeout=120,
                           tag='roll%s' % roll).start()
    try:
        time.sleep(3)  # streams in flight before the first drain
        began = time.time()
        result = play(fleet, inventory, 'playbooks/deploy_k26.yml', check_rc=check_rc,
                      sglang_env=dict(TEST_ENV, LLMOPS_TEST_ROLL=roll))
        ended = time.time()
        exhausted = load._next >= len(load.kinds)  # pylint: disable=protected-access
    finally:
        load.stop.set()
        assert load.join(LONG_TOKENS * TOKEN_SECONDS * 4 + 120), 'the load did not stop by itself'
        samples = poller.finish()
    assert not exhausted, 'the load ran out of requests before the rollout ended: raise LOAD_REQUESTS'
    summary = fleet_load.summarize(load.results)
    print('\nrollout %s: %.1f s; load: %s' % (roll, ended - began, fleet_load.summary_line(summary)))
    timeline = fleet_load.capacity_timeline([s for s in samples if began <= s['time'] <= ended], since=began)
    print('workers listed by the router during the rollout (s, listed, healthy): %s'
          % ' '.join('%s:%d/%d' % (t, listed, healthy) for t, _r, listed, healthy in timeline))
    return result, summary, load.results, samples, began, ended


def served_during(fleet, since):
    """{host: (request log records, loading windows)} of the three workers since `since`: the requests the router
    sent (fleet_load.sent_by: from the router's address), not the server role's own readiness probes on loopback."""
    out = {}
    for host in fleet.hosts[:3]:
        records = fleet_load.sent_by(host_json_lines(fleet, host, REQUEST_LOG, since), fleet.hosts[3].address)
        windows = fleet_load.loading_windows(host_json_lines(fleet, host, EVENT_LOG, since))
        out[host.name] = (records, windows)
    return out


def test_rolling_change_of_every_worker_under_load_drops_no_request(deployed, inventory):
    fleet = deployed
    since = time.time()
    pids = dict((h.name, main_pid(fleet, h)) for h in fleet.hosts[:3])
    result, summary, results, samples, began, ended = rollout_under_load(fleet, inventory, '1')
    # every worker host was restarted (a new main process), one at a time behind the drain
    for host in fleet.hosts[:3]:
        assert main_pid(fleet, host) != pids[host.name], '%s was not restarted' % host.name
    assert result.stdout.count('router : Take the workers out of every router]') >= 3, result
    # zero failed or truncated responses, short and long, with long streams in flight throughout
    assert summary['failed'] == 0 and summary['truncated'] == 0, fleet_load.summary_line(summary)
    assert summary['long']['ok'] >= 6 and summary['short']['ok'] >= 20, fleet_load.summary_line(summary)
    assert summary['first_start'] < began and summary['last_end'] > ended
    # a stream was in flight at the moment each worker's new process started loading (the drain let it finish)
    served = served_during(fleet, since)
    for name, (records, windows) in served.items():
        assert windows, '%s: no start in its event log since the test began' % name
        loading = fleet_load.served_while_loading(records, windows)
        assert not loading, '%s served while loading: %s' % (name, loading[:3])
        # nothing arrived at a worker after SIGTERM: the router had stopped sending to it before the stop
        late = [r for r in records if r['state'] == 'draining']
        assert not late, '%s accepted requests while draining: %s' % (name, late[:3])
        assert records, '%s: its log has no request the router sent since the test began' % name
        assert all(r['completed'] for r in records), name
    streams_cut_short = [r for r in results if r['kind'] == 'long' and r['tokens'] != LONG_TOKENS]
    assert not streams_cut_short
    # the router never listed fewer than two of the three workers (capacity guard: all but one batch)
    during = [s for s in samples if began <= s['time'] <= ended and s['error'] is None]
    assert during and min(len(s['listed']) for s in during) >= 2, [len(s['listed']) for s in during]
    assert min(len(s['listed']) for s in during) == 2  # and each worker did leave it
    assert rotation(fleet) == worker_urls(fleet)
    served_counts = dict((name, len(records)) for name, (records, _w) in served.items())
    print('load requests served per worker: %s' % served_counts)
    # the fleet report's rotation column: every worker in the router's rotation
    rows = report_rows(result, [host.name for host in fleet.hosts[:3]])
    for host in fleet.hosts[:3]:
        assert rows[host.name].rstrip(" '\"").endswith('%s: in' % fleet.hosts[3].name), rows


def test_canary_that_fails_its_wait_stays_out_while_the_others_serve(deployed, inventory):
    fleet = deployed
    canary, others = fleet.hosts[0], fleet.hosts[1:3]
    pids = dict((h.name, main_pid(fleet, h)) for h in others)
    # every start of the canary fails in its weights phase: the new configuration and the rollback alike
    fleet.run(canary, 'rm -f %s.count; echo crash@weights:oom > %s' % (FAULT_FILE, FAULT_FILE), check=True)
    try:
        result, summary, _results, samples, began, ended = rollout_under_load(fleet, inventory, '2', check_rc=False)
        assert result.rc != 0, result
        # the rollout stopped at the canary: the other two were neither drained nor restarted
        for host in others:
            assert main_pid(fleet, host) == pids[host.name], '%s was restarted after the canary failed' % host.name
        assert result.stdout.count('router : Take the workers out of every router]') >= 1
        canary_url = 'http://%s:30001' % canary.address
        assert canary_url not in rotation(fleet), rotation(fleet)
        assert rotation(fleet) == sorted('http://%s:30001' % h.address for h in others)
        # once out, the router never listed the canary again while the rollout went on
        out_at = min(s['time'] for s in samples if s['error'] is None and canary_url not in s['listed'])
        assert not [s for s in samples if s['time'] > out_at and canary_url in s['listed']]
        # the other workers served the whole load: zero failures
        assert summary['failed'] == 0 and summary['truncated'] == 0, fleet_load.summary_line(summary)
        assert summary['long']['ok'] >= 2 and summary['short']['ok'] >= 10, fleet_load.summary_line(summary)
        records = fleet_load.sent_by(host_json_lines(fleet, canary, REQUEST_LOG, began), fleet.hosts[3].address)
        assert not [r for r in records if r['start'] > out_at + 1], records
        # the fleet report (rotation column) says OUT for the canary
        rows = report_rows(result, [host.name for host in fleet.hosts[:3]])
        assert rows[canary.name].rstrip(" '\"").endswith('%s: OUT' % fleet.hosts[3].name), rows
        # and so does the read-only status.yml, which reads the routers' listings itself
        rows = report_rows(play(fleet, inventory, 'playbooks/status.yml'), [host.name for host in fleet.hosts[:3]])
        assert rows[canary.name].rstrip(" '\"").endswith('%s: OUT' % fleet.hosts[3].name), rows
        for host in others:
            assert rows[host.name].rstrip(" '\"").endswith('%s: in' % fleet.hosts[3].name), rows
    finally:
        # clean up: no fault, the canary back on the configuration the others serve, and in rotation again
        fleet.run(canary, 'rm -f %s %s.count' % (FAULT_FILE, FAULT_FILE), check=True)
        play(fleet, inventory, 'playbooks/deploy_k26.yml', sglang_env=dict(TEST_ENV, LLMOPS_TEST_ROLL='1'))
    assert rotation(fleet) == worker_urls(fleet)
