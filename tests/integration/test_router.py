# -*- coding: utf-8 -*-
"""The real sglang-router 0.3.2 (llmops.sglang.router) in front of three worker hosts.

One fleet of four hosts for the whole file (module fixture): the last is the router, the other three run the SGLang
stand-in streaming token by token. The first deploy goes through the drain-aware path (capacity guard, admit after a
real completion, route check). Then, under a bounded load through the router (tests/fleet/load.py: three clients,
short chat requests mixed with streams of LONG_TOKENS x TOKEN_SECONDS = 20 s): a rolling change of every worker host
with zero failed or truncated responses and no request served by a loading worker; and a canary whose wait fails
stays out of rotation while the other two serve the load, the rollout stopping before the next batch.

Least privilege (issue 22): the role's defaults without a key are refused before anything changes on the host; the
router runs as its own unprivileged user in a systemd sandbox (systemd-analyze security <= 3.0) with its key handed
over by LoadCredential= (in no argv, environment or journal line); from another fleet host its worker API answers 401
without the key and its Prometheus port is not reachable; the workers are keyed with the router's key and registered
with it (listed with their model); it drains a stream on SIGTERM.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import http.client
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

from conftest import REPO_ROOT
from fleet import load as fleet_load  # tests/ is on sys.path (conftest)
# rfleet, inventory and deployed are fixtures (module scope): imported for pytest to find them here
from router_helpers import (  # noqa: F401  pylint: disable=unused-import
    EVENT_LOG, FAULT_FILE, LONG_TOKENS, MAX_EXPOSURE, MODEL, REQUEST_LOG, ROUTER_KEY, ROUTER_PORT,
    ROUTER_USER, SECRETS, TEST_ENV, TOKEN_SECONDS, UNIT, deployed, inventory, play, rfleet, rotation, router_call,
    worker_urls)

ROUTER_TRACES = ('getent passwd %s; getent group %s; ls -d /opt/sglang-router /etc/systemd/system/sglang-router.service '
                 '/var/lib/llmops-sglang/router /usr/local/lib/llmops-sglang/router_launch.py 2>/dev/null; true'
                 % (ROUTER_USER, ROUTER_USER))


def test_the_role_defaults_without_a_key_are_refused_and_change_nothing(rfleet):
    """A router host with the role's defaults (router_host 0.0.0.0, no router_api_key): refused before any change."""
    fleet = rfleet
    host = fleet.hosts[0]  # a host that never runs a router in this file
    assert fleet.run(host, ROUTER_TRACES, check=True).stdout.strip() == ''
    root = tempfile.mkdtemp(prefix='router-refused-')
    try:
        os.mkdir(os.path.join(root, 'group_vars'))
        os.symlink(os.path.join(str(REPO_ROOT), 'inventories', 'local', 'group_vars', 'local_fleet.yml'),
                   os.path.join(root, 'group_vars', 'local_fleet.yml'))
        with open(os.path.join(root, 'router.yml'), 'w') as handle:
            json.dump({'all': {'children': {'k26_routers': {'hosts': {host.name: {}}}}}}, handle)
        result = fleet.playbook('playbooks/router.yml', {}, extra_args=['-i', root])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert result.rc != 0, result
    text = ' '.join(result.stdout.split())
    assert 'fatal: [%s]' % host.name in result.stdout, result
    # (the value's quotes depend on the result callback)
    assert 'router_host=' in text and '0.0.0.0' in text, result
    assert 'the router would listen beyond loopback with router_api_key empty' in text, result
    assert 'Set router_api_key' in text, result
    recap = result.stdout.split('PLAY RECAP')[-1]
    assert re.search(r'%s\s*:\s*ok=\d+\s+changed=0\s.*failed=1' % re.escape(host.name), recap), recap
    # nothing on the host: no user, no group, no venv, no unit, no secrets directory, no launcher
    assert fleet.run(host, ROUTER_TRACES, check=True).stdout.strip() == ''


def test_router_runs_with_the_key_off_its_command_line_and_lists_every_worker(deployed, inventory):
    fleet = deployed
    router = fleet.hosts[3]
    assert rotation(fleet) == worker_urls(fleet)
    # the traces the refusal test looks for are all there on a real router host (that test's checks see them)
    traces = fleet.run(router, ROUTER_TRACES, check=True).stdout
    assert traces.count('\n') >= 6 and ROUTER_USER in traces, traces
    pid = fleet.run(router, 'systemctl show -p MainPID --value sglang-router.service', check=True).stdout.strip()
    assert pid not in ('', '0')
    # it runs as its own unprivileged user, with no capability
    uid = fleet.run(router, 'id -u %s' % ROUTER_USER, check=True).stdout.strip()
    status = fleet.run(router, 'cat /proc/%s/status' % pid, check=True).stdout
    assert uid != '0' and re.search(r'^Uid:\s+%s\s+%s\s+%s\s+%s$' % (uid, uid, uid, uid), status, re.M), status
    assert re.search(r'^CapEff:\s+0+$', status, re.M) and re.search(r'^NoNewPrivs:\s+1$', status, re.M), status
    cmdline = fleet.run(router, 'tr "\\0" " " < /proc/%s/cmdline' % pid, check=True).stdout
    assert cmdline and ROUTER_KEY not in cmdline
    assert ROUTER_KEY not in fleet.run(router, 'cat /proc/%s/environ' % pid, check=True).stdout
    journal = fleet.run(router, 'journalctl -u sglang-router.service -o verbose --all --no-pager', check=True).stdout
    assert 'Starting router on' in journal and ROUTER_KEY not in journal
    # the workers were registered with their key: the router's discovery calls to them passed (0.3.2 otherwise logs
    # "Adding worker ... without API key" and lists model_id "unknown")
    assert 'Adding worker' not in journal and 'without API key' not in journal
    status_code, answer = router_call(fleet, 'GET', '/workers')
    assert status_code == 200 and [w['model_id'] for w in answer['workers']] == [MODEL] * 3, answer
    assert ROUTER_KEY not in json.dumps(answer)
    # the key's file: root only, not readable by the router's user (systemd hands it over)
    assert fleet.run(router, 'stat -c "%U:%G %a" {0} $(dirname {0})'.format(SECRETS), check=True).stdout.split() == \
        ['root:root', '600', 'root:root', '700']
    denied = fleet.run(router, 'runuser -u %s -- cat %s' % (ROUTER_USER, SECRETS))
    assert denied.returncode != 0 and 'Permission denied' in denied.stderr, denied
    assert fleet.run(router, 'test -e /etc/sglang-router/sglang-router.secrets').returncode == 1
    # without the key the router refuses its clients
    conn = http.client.HTTPConnection(router.address, ROUTER_PORT, timeout=30)
    conn.request('GET', '/workers')
    assert conn.getresponse().status == 401
    # its Prometheus endpoint: on loopback (the role's default)
    assert 'smg_' in fleet.run(router, 'python3 -c "import urllib.request as u; print(u.urlopen(\'http://127.0.0.1:29000/metrics\').read().decode())"',
                               check=True).stdout
    # the desired-workers file lists all three, though the batch admitted them at once (each host's call read,
    # changed and wrote it: before its lock, two calls reading the same list each wrote back only their own worker)
    assert json.loads(fleet.run(router, 'cat %s' % DESIRED, check=True).stdout) == {'workers': worker_urls(fleet)}
    # a second run changes nothing (no restart of the router, no re-registration)
    again = play(fleet, inventory, 'playbooks/router.yml')
    assert 'changed=0' in again.stdout.split('PLAY RECAP')[-1], again
    assert fleet.run(router, 'systemctl show -p MainPID --value sglang-router.service', check=True).stdout.strip() == pid


def test_router_unit_sandbox_exposure_is_at_most_3(deployed):
    fleet = deployed
    out = fleet.run(fleet.hosts[3], 'systemd-analyze security --no-pager sglang-router.service', check=True).stdout
    match = re.search(r'Overall exposure level for sglang-router\.service: ([0-9.]+) (\S+)', out)
    assert match, out
    print('\nsystemd-analyze security sglang-router.service: %s %s' % match.groups())
    assert float(match.group(1)) <= MAX_EXPOSURE, out


# Run on another fleet host (a worker host: neither the router host nor the controller): each request's status.
API_PROBE = r"""
import json, sys, urllib.request, urllib.error
base = sys.argv[1]
def call(method, path, body=None, key=None):
    headers = {'Content-Type': 'application/json'}
    if key:
        headers['Authorization'] = 'Bearer ' + key
    data = json.dumps(body).encode() if body is not None else None
    try:
        response = urllib.request.urlopen(urllib.request.Request(base + path, data=data, method=method, headers=headers),
                                          timeout=10)
        return response.status, json.loads(response.read().decode() or 'null')
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()[:200]
    except OSError as err:
        return None, str(err)
out = {}
out['get_keyed'] = call('GET', '/workers', key=key)
victim = out['get_keyed'][1]['workers'][0]['id']
out['get'] = call('GET', '/workers')
out['post'] = call('POST', '/workers', {'url': 'http://203.0.113.7:30001'})
out['post_bad_key'] = call('POST', '/workers', {'url': 'http://203.0.113.7:30001'}, key='not-the-key')
out['delete'] = call('DELETE', '/workers/' + victim)
out['victim'] = victim
print(json.dumps(out))
"""


def test_worker_api_refuses_another_host_without_the_key(deployed):
    fleet = deployed
    router, other = fleet.hosts[3], fleet.hosts[0]
    _s, before = router_call(fleet, 'GET', '/workers')
    # the key in the script (stdin), not on the probe's command line
    script = fleet.run(other, ['python3', '-', 'http://%s:%d' % (router.address, ROUTER_PORT)],
                       input='key = %r\n' % ROUTER_KEY + API_PROBE, check=True).stdout
    out = json.loads(script)
    assert out['get_keyed'][0] == 200 and len(out['get_keyed'][1]['workers']) == 3, out  # not vacuous: it reaches it
    for name in ('get', 'post', 'post_bad_key', 'delete'):
        assert out[name][0] == 401, (name, out)
    time.sleep(3)  # the router adds and removes workers in the background: a change would show by now
    _s, after = router_call(fleet, 'GET', '/workers')
    assert sorted((w['id'], w['url']) for w in after['workers']) == sorted((w['id'], w['url']) for w in before['workers'])
    assert out['victim'] in [w['id'] for w in after['workers']]
    # the router's Prometheus endpoint is not reachable from there (router_prometheus_host: 127.0.0.1 by default)
    probe = fleet.run(other, ['python3', '-c', 'import socket; socket.create_connection((%r, 29000), timeout=5)'
                              % router.address])
    assert probe.returncode != 0 and 'Connection refused' in probe.stderr, probe


# ---- a router that restarts by itself (issue 23) --------------------------------------------------------------
DESIRED = '/var/lib/llmops-sglang/router/sglang-router.workers.json'
# Short answers only, each client pausing between requests (a client hammering a refused port would count thousands
# of failures a millisecond each, which says nothing more).
RESTART_CLIENTS = 3
RESTART_PAUSE = 0.1
# What a restart may cost at most: seconds from the restart until the router lists every worker and a completion
# through it succeeds, and failed client requests (measured: see the test's printed line and docs/router.md).
RESTART_MAX_SECONDS = 20
REBOOT_MAX_SECONDS = 150


class PacedLoad(fleet_load.Load):
    """fleet_load.Load whose clients send short requests until stopped, pausing RESTART_PAUSE between requests."""

    def __init__(self, *args, **kwargs):
        fleet_load.Load.__init__(self, *args, **kwargs)
        self.kinds = [fleet_load.SHORT] * 100000

    def _client(self, client):
        while True:
            index = self._take()
            if index is None:
                return
            record = self.request(index, self.kinds[index], client)
            with self._lock:
                self.results.append(record)
            time.sleep(RESTART_PAUSE)


def listed_models(fleet):
    """{url: model_id} of the router's listing, or None when it does not answer."""
    try:
        status, answer = router_call(fleet, 'GET', '/workers', timeout=5)
    except (OSError, http.client.HTTPException, ValueError):
        return None
    if status != 200:
        return None
    return dict((w['url'], w['model_id']) for w in answer['workers'])


def routes(fleet):
    try:
        body = {'model': MODEL, 'prompt': 'back %f' % time.time(), 'max_tokens': 1}
        status, _answer = router_call(fleet, 'POST', '/v1/completions', body, timeout=10)
    except (OSError, http.client.HTTPException, ValueError):
        return False
    return status == 200


def wait_back(fleet, expected, since, limit):
    """Seconds from `since` until the router lists exactly `expected` and a completion through it succeeds."""
    while time.time() - since < limit:
        models = listed_models(fleet)
        if models is not None and sorted(models) == sorted(expected) and routes(fleet):
            return time.time() - since
        time.sleep(0.2)
    raise AssertionError('the router did not list %s and route within %d s: it lists %s'
                         % (expected, limit, listed_models(fleet)))


def router_outage_under_load(fleet, action, limit, tag):
    """Short requests through the router while `action()` restarts it: (seconds until it routes to every worker
    again, failed requests, the load's records, when the action began)."""
    router = fleet.hosts[3]
    load = PacedLoad(router.address, ROUTER_PORT, [], clients=RESTART_CLIENTS, api_key=ROUTER_KEY, model=MODEL,
                     timeout=30, tag=tag).start()
    try:
        time.sleep(4)
        began = time.time()
        action()
        seconds = wait_back(fleet, worker_urls(fleet), began, limit)
        time.sleep(4)
    finally:
        load.stop.set()
        assert load.join(60), 'the load did not stop'
    results = load.results
    failed = [r for r in results if fleet_load.outcome(r) != 'ok']
    before = [r for r in results if r['end'] < began]
    after = [r for r in results if r['start'] > began + seconds]
    print('\n%s: the router routed to every worker again after %.1f s; %d requests, %d failed (%s); %d ok before, '
          '%d ok after' % (tag, seconds, len(results), len(failed),
                           fleet_load.summary_line(fleet_load.summarize(results)), len(before), len(after)))
    # requests were sent and served before the restart and after it: the counts are not vacuous
    assert len(before) >= 5 and all(fleet_load.outcome(r) == 'ok' for r in before), before[:3]
    assert len(after) >= 5 and all(fleet_load.outcome(r) == 'ok' for r in after), [r for r in after if r['error']][:3]
    # every failure is inside the outage
    assert all(began - 1 <= r['start'] <= began + seconds + 1 for r in failed), failed[:3]
    return seconds, failed, results, began


def assert_keyed_and_listed_with_their_model(fleet, since):
    """Every worker listed with the served model (the router's discovery of the keyed workers passed), and the router
    did not add one without the key since `since`."""
    assert listed_models(fleet) == dict((url, MODEL) for url in worker_urls(fleet))
    journal = fleet.run(fleet.hosts[3], 'journalctl -u sglang-router.service --no-pager --since @%d' % int(since),
                        check=True).stdout
    assert 'desired worker(s) from the credential router-workers' in journal, journal[-2000:]
    assert 'without API key' not in journal


def test_router_restarted_under_load_comes_back_with_its_workers(deployed):
    """`systemctl restart` of the router (what a crash with Restart=on-failure also does): it starts with the
    desired-workers list (root 0600, handed over by LoadCredential=) and routes to every worker again by itself."""
    fleet = deployed
    router = fleet.hosts[3]
    assert fleet.run(router, 'stat -c "%U:%G %a" ' + DESIRED, check=True).stdout.split() == ['root:root', '600']
    assert json.loads(fleet.run(router, 'cat ' + DESIRED, check=True).stdout) == {'workers': worker_urls(fleet)}
    denied = fleet.run(router, 'runuser -u %s -- cat %s' % (ROUTER_USER, DESIRED))
    assert denied.returncode != 0 and 'Permission denied' in denied.stderr, denied
    pid = fleet.run(router, 'systemctl show -p MainPID --value sglang-router.service', check=True).stdout.strip()
    seconds, failed, _results, began = router_outage_under_load(
        fleet, lambda: fleet.run(router, 'systemctl restart sglang-router.service', check=True),
        RESTART_MAX_SECONDS, 'restart')
    assert fleet.run(router, 'systemctl show -p MainPID --value sglang-router.service', check=True).stdout.strip() != pid
    assert seconds <= RESTART_MAX_SECONDS
    # at most one failure per client per pause while it was away (a refused connection fails at once)
    assert len(failed) <= RESTART_CLIENTS * (seconds / RESTART_PAUSE + 2), (len(failed), seconds)
    assert_keyed_and_listed_with_their_model(fleet, began)


def test_router_host_rebooted_comes_back_with_its_workers(deployed):
    """The router host powered off and booted again (fleet.py reboot): the enabled unit starts at boot with the
    desired workers and routes to every one of them without a playbook run."""
    fleet = deployed
    router = fleet.hosts[3]
    boot_id = fleet.run(router, 'cat /proc/sys/kernel/random/boot_id', check=True).stdout.strip()
    seconds, failed, _results, began = router_outage_under_load(
        fleet, lambda: fleet.tool.checked('reboot', router.name), REBOOT_MAX_SECONDS, 'reboot')
    assert fleet.run(router, 'cat /proc/sys/kernel/random/boot_id', check=True).stdout.strip() != boot_id
    assert seconds <= REBOOT_MAX_SECONDS
    assert len(failed) <= RESTART_CLIENTS * (seconds / RESTART_PAUSE + 2), (len(failed), seconds)
    assert_keyed_and_listed_with_their_model(fleet, began)


DRAIN_PLAY = """
- name: Take one worker out of the router, as a rollout does just before its restart (drain.yml)
  hosts: {worker}
  gather_facts: false
  tasks:
    - name: Drain
      ansible.builtin.include_role:
        name: llmops.sglang.router
        tasks_from: {tasks}
      vars:
        router_hosts: [{router}]
        router_drain_workers: [{url}]
        router_admit_workers: [{url}]
        router_admit_wait: 60
        router_fleet_workers: {fleet_urls}
        router_batch_workers: [{url}]
        router_drain_metrics_ports: [30001]
        router_drain_timeout: 10
"""


def test_router_restarted_mid_drain_does_not_readmit_the_drained_worker(deployed, inventory):
    """drain.yml takes a worker out (the state of a rollout between its drain and its admit); the router restarts:
    it comes back with the other two and without that one, although it is up and healthy; admit.yml brings it back."""
    fleet = deployed
    router, drained = fleet.hosts[3], fleet.hosts[0]
    url = 'http://%s:30001' % drained.address
    others = [u for u in worker_urls(fleet) if u != url]
    handle, path = tempfile.mkstemp(prefix='router-drain-', suffix='.yml')
    os.close(handle)

    def run(tasks):
        with open(path, 'w') as handle:
            handle.write(DRAIN_PLAY.format(worker=drained.name, router=router.name, url=url, tasks=tasks,
                                           fleet_urls=json.dumps(worker_urls(fleet))))
        return play(fleet, inventory, path)
    try:
        run('drain.yml')
        assert rotation(fleet) == others
        assert json.loads(fleet.run(router, 'cat ' + DESIRED, check=True).stdout) == {'workers': others}
        began = time.time()
        fleet.run(router, 'systemctl restart sglang-router.service', check=True)
        seconds = wait_back(fleet, others, began, RESTART_MAX_SECONDS)
        # the drained worker is up and healthy (a router given it would list it within a health check: the others
        # were back after `seconds`); three intervals later it is still not listed
        probe = ('import urllib.request as u\nu.urlopen(u.Request("http://127.0.0.1:30001/health", '
                 'headers={"Authorization": "Bearer " + key}), timeout=10)\n')
        assert fleet.run(drained, ['python3', '-'], input='key = %r\n' % ROUTER_KEY + probe).returncode == 0
        time.sleep(3 * 2 + 2)
        assert rotation(fleet) == others
        print('\nrestarted mid-drain: back with the other two after %.1f s, the drained worker not listed' % seconds)
        run('admit.yml')
        assert rotation(fleet) == worker_urls(fleet)
        assert json.loads(fleet.run(router, 'cat ' + DESIRED, check=True).stdout) == {'workers': worker_urls(fleet)}
    finally:
        if os.path.exists(path):
            os.unlink(path)
        if rotation(fleet) != worker_urls(fleet):
            play(fleet, inventory, 'playbooks/router.yml')


# ---- under load ---------------------------------------------------------------------------------------------
# At most this many requests (every 4th a 20 s stream); the test stops sending once the rollout ended, and fails
# if the plan ran out before that (the load must span the whole rollout). 400 (about 11 min at 3 clients) ran out in
# a CI run whose rollout took longer under load: the cap is only a bound, 2000 spans about 55 min.
LOAD_REQUESTS = 2000
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


STREAM = r"""
import http.client, json, sys, time
host, port, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
conn = http.client.HTTPConnection(host, port, timeout=300)
conn.request('POST', '/v1/completions', json.dumps({'model': 'kimi-k2.6', 'prompt': 'drain %f' % time.time(),
             'max_tokens': tokens, 'ignore_eos': True, 'stream': True}),
             {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + key})
response = conn.getresponse()
events, done = 0, False
for line in response:
    line = line.strip()
    if line == b'data: [DONE]':
        done = True
    elif line.startswith(b'data:'):
        events += 1
print(json.dumps({'status': response.status, 'events': events, 'done': done}))
"""


def test_sandboxed_router_drains_a_stream_on_sigterm(deployed, inventory):
    """A 10 s stream through the router; `systemctl stop` 3 s in: the stream ends with [DONE], the stop waited."""
    fleet = deployed
    router = fleet.hosts[3]
    tokens = 100  # x TOKEN_SECONDS = 10 s
    script = '/root/llmops-test-stream.py'
    # the key in the script (umask 077), not on its command line
    fleet.run(router, 'umask 077; cat > %s' % script, input='key = %r\n' % ROUTER_KEY + STREAM, check=True)
    proc = subprocess.Popen(fleet.ssh_command(router, ['python3', script, '127.0.0.1', str(ROUTER_PORT), str(tokens)], 5),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3)
        began = time.time()
        fleet.run(router, 'systemctl stop sglang-router.service', check=True)
        stopped = time.time() - began
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        # back as it was: started, and its workers registered again (a router keeps them in memory)
        fleet.run(router, 'rm -f %s; systemctl start sglang-router.service' % script, check=True)
        play(fleet, inventory, 'playbooks/router.yml')
    record = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    print('\nstream through the router stopped after 3 s: %s; systemctl stop took %.1f s' % (record, stopped))
    assert record.get('status') == 200 and record.get('done') and record.get('events', 0) >= tokens, (record, err)
    assert stopped >= 3, stopped  # the stop waited for the stream
    journal = fleet.run(router, 'journalctl -u sglang-router.service --no-pager --since -5min', check=True).stdout
    assert 'starting graceful shutdown' in journal
    assert rotation(fleet) == worker_urls(fleet)
