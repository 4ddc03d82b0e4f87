# -*- coding: utf-8 -*-
"""What docs/router.md and roles/router/defaults/main.yml say sglang-router 0.3.2 does, provoked on the real router.

On the router fleet of test_router.py (router_helpers: three keyed stand-in workers, the role's router with a 2 s
health check) and routers of the role's venv started beside it on the router host (loopback, own ports, transient
units stopped at the end):
- what it forwards to a worker: the client's X-Request-Id as it is; with no key of its own, the client's
  Authorization header (a worker's 401 comes back to the client, one attempt, not retried, a breaker failure); with a
  key of its own, a worker registered with `api_key` gets that key, not the client's;
- what it retries, where: a worker killed (SIGKILL, its unit stopped) under sequential requests through a router with
  the role's flags (read from its unit: cache_aware, 5 attempts, breaker at 10), a round_robin one and a cache_aware one
  with its breaker at 4: how many requests fail, the retries and breaker counters (Prometheus); and how long until the
  role's router lists the killed worker unhealthy.
The numbers are those of docs/router.md ("What the router forwards to a worker", "What the router does with a failed
request").
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import time

# rfleet, inventory and deployed are fixtures (module scope): imported for pytest to find them here
from router_helpers import (  # noqa: F401  pylint: disable=unused-import
    MODEL, REQUEST_LOG, ROUTER_KEY, ROUTER_PORT, UNIT, deployed, inventory, rfleet, worker_urls)

VENV_PYTHON = '/opt/sglang-router/venv/bin/python'
ADHOC = 'hcl-claims-router'  # the transient unit of an ad-hoc router
ROLE_PROMETHEUS = 29000  # router_prometheus_port (127.0.0.1 on the router host)
OTHER_KEY = 'other-key-for-the-router-only'
ROUNDS = 30  # requests through each router after the kill

CLIENT = r"""
import http.client, json, sys, time
requests, pause, watch = json.loads(sys.stdin.read())
def call(port, method, path, body, headers):
    conn = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
    started = time.time()
    conn.request(method, path, json.dumps(body) if body is not None else None,
                 dict(headers, **{'Content-Type': 'application/json'}))
    answer = conn.getresponse()
    return {'status': answer.status, 'body': answer.read().decode(), 'seconds': time.time() - started,
            'start': started}
results, unhealthy = [], None
for port, method, path, body, headers in requests:
    result = call(port, method, path, body, headers)
    results.append(dict(result, body=result['body'][:300]))
    if watch and unhealthy is None:
        listing = json.loads(call(watch[0], 'GET', '/workers', None, watch[1])['body'] or '{}')
        if any(w['url'] == watch[2] and not w['is_healthy'] for w in listing.get('workers', [])):
            unhealthy = time.time()
    time.sleep(pause)
print(json.dumps({'results': results, 'unhealthy': unhealthy}))
"""
FETCH = """python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("%s", timeout=5).read().decode())'"""


def on_router_batch(fleet, requests, pause=0.0, watch=None):
    """Requests [(port, method, path, body, headers)] one after the other from the router host itself (ad-hoc routers
    listen on loopback), `pause` s apart; `watch` (port, headers, url): when that router first lists url unhealthy."""
    out = fleet.run(fleet.hosts[3], 'python3 -c %s' % _quote(CLIENT), check=True,
                    input=json.dumps([requests, pause, watch])).stdout
    return json.loads(out.strip().splitlines()[-1])


def on_router(fleet, method, port, path, body=None, headers=None):
    return on_router_batch(fleet, [(port, method, path, body, headers or {})])['results'][0]


def _quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


def start_adhoc(fleet, port, prometheus, args, health_interval=2):
    """An ad-hoc router (the role's venv, as the role's user) on 127.0.0.1:port; answers /health before return."""
    fleet.run(fleet.hosts[3], 'systemctl stop %s-%d 2>/dev/null; systemctl reset-failed %s-%d 2>/dev/null; true'
              % (ADHOC, port, ADHOC, port))
    fleet.run(fleet.hosts[3], 'systemd-run --unit %s-%d --uid sglang-router %s -m sglang_router.launch_router --host '
              '127.0.0.1 --port %d --prometheus-host 127.0.0.1 --prometheus-port %d --health-check-interval-secs %d %s'
              % (ADHOC, port, VENV_PYTHON, port, prometheus, health_interval, ' '.join(args)), check=True)
    for _attempt in range(100):
        if fleet.run(fleet.hosts[3], FETCH % ('http://127.0.0.1:%d/health' % port)).returncode == 0:
            return
        time.sleep(0.2)
    raise AssertionError('the ad-hoc router on %d did not answer' % port)


def stop_adhoc(fleet, port):
    fleet.run(fleet.hosts[3], 'systemctl stop %s-%d; systemctl reset-failed %s-%d 2>/dev/null; true'
              % (ADHOC, port, ADHOC, port))


def metrics(fleet, port):
    """The smg_ samples of a router's Prometheus endpoint: {'name{labels}': value}."""
    text = fleet.run(fleet.hosts[3], FETCH % ('http://127.0.0.1:%d/metrics' % port), check=True).stdout
    return dict((m.group(1), float(m.group(2))) for m in re.finditer(r'^(smg_\S+) (\S+)$', text, re.M))


def sample(samples, name, **labels):
    """The sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for key, value in samples.items():
        if key.split('{')[0] == name and all('%s="%s"' % item in key for item in labels.items()):
            total += value
    return total


def served(fleet, host, since):
    lines = fleet.run(host, 'cat %s 2>/dev/null; true' % REQUEST_LOG, check=True).stdout.splitlines()
    return [r for r in (json.loads(line) for line in lines if line.strip()) if r['start'] >= since]


def warm_up(fleet, port, auth):
    """12 completions through a router, each a prompt of its own: how many each worker served."""
    since = time.time() - 0.5
    tag = 'claims-warm-%d-%f' % (port, since)
    warm = on_router_batch(fleet, [(port, 'POST', '/v1/completions', {
        'model': MODEL, 'prompt': 'warm %d' % i, 'max_tokens': 1, 'user': tag}, auth) for i in range(12)])
    assert [r['status'] for r in warm['results']] == [200] * 12, warm
    return [len([r for r in served(fleet, host, since) if r['tag'] == tag]) for host in fleet.hosts[:3]]


def test_what_the_router_forwards_to_a_worker(deployed):
    fleet = deployed
    urls = worker_urls(fleet)
    since = time.time() - 1
    # the role's router: the client's X-Request-Id reaches the worker as it is
    answer = on_router(fleet, 'POST', ROUTER_PORT, '/v1/completions',
                       {'model': MODEL, 'prompt': 'forwarded', 'max_tokens': 1, 'user': 'claims-rid'},
                       {'Authorization': 'Bearer ' + ROUTER_KEY, 'X-Request-Id': 'claims-request-7'})
    assert answer['status'] == 200, answer
    records = [r for host in fleet.hosts[:3] for r in served(fleet, host, since) if r['tag'] == 'claims-rid']
    assert [r['request_id'] for r in records] == ['claims-request-7'], records
    # a router without a key of its own: the client's Authorization goes on to the worker
    start_adhoc(fleet, 30181, 29181, ['--worker-urls'] + urls)
    try:
        keyed = on_router(fleet, 'POST', 30181, '/v1/completions', {'model': MODEL, 'prompt': 'k', 'max_tokens': 1},
                          {'Authorization': 'Bearer ' + ROUTER_KEY})
        before = metrics(fleet, 29181)
        bare = on_router(fleet, 'POST', 30181, '/v1/completions', {'model': MODEL, 'prompt': 'b', 'max_tokens': 1})
        after = metrics(fleet, 29181)
    finally:
        stop_adhoc(fleet, 30181)
    assert keyed['status'] == 200, keyed
    assert bare['status'] == 401, bare  # the worker's answer, passed back
    # one attempt, not retried, counted as a failure of that worker's breaker
    assert sample(after, 'smg_worker_retries_total') == sample(before, 'smg_worker_retries_total')
    assert sample(after, 'smg_worker_cb_outcomes_total', outcome='failure') == \
        sample(before, 'smg_worker_cb_outcomes_total', outcome='failure') + 1, (before, after)
    # a router with a key of its own: a worker registered with api_key gets that key, not the client's
    start_adhoc(fleet, 30182, 29182, ['--api-key', OTHER_KEY])
    try:
        added = on_router(fleet, 'POST', 30182, '/workers', {'url': urls[0], 'api_key': ROUTER_KEY},
                          {'Authorization': 'Bearer ' + OTHER_KEY})
        assert added['status'] == 202, added
        for _attempt in range(60):
            listing = on_router(fleet, 'GET', 30182, '/workers', None, {'Authorization': 'Bearer ' + OTHER_KEY})
            if '"is_healthy":true' in listing['body']:
                break
            time.sleep(0.5)
        other = on_router(fleet, 'POST', 30182, '/v1/completions', {'model': MODEL, 'prompt': 'o', 'max_tokens': 1},
                          {'Authorization': 'Bearer ' + OTHER_KEY})
    finally:
        stop_adhoc(fleet, 30182)
    assert other['status'] == 200, other  # the worker knows ROUTER_KEY only: it got the registered key
    print('\nforwarded: X-Request-Id as sent; no router key: client key on (200), none -> worker 401, 1 attempt; '
          'router key + registered api_key: the registered key (200)')


def test_a_dead_worker_costs_the_roles_cache_aware_two_requests_and_round_robin_none(deployed):
    fleet = deployed
    urls = worker_urls(fleet)
    # the role's router runs with the role's defaults: cache_aware, 5 attempts, breaker at 10 for 60 s
    unit = fleet.run(fleet.hosts[3], 'systemctl show -p ExecStart --value sglang-router.service', check=True).stdout
    role_flags = dict((flag, re.search(r' %s (\S+)' % flag, unit).group(1)) for flag in (
        '--policy', '--retry-max-retries', '--cb-failure-threshold', '--cb-timeout-duration-secs'))
    assert role_flags == {'--policy': 'cache_aware', '--retry-max-retries': '5', '--cb-failure-threshold': '10',
                          '--cb-timeout-duration-secs': '60'}, unit
    # Beside it, routers of the same venv with fresh state (the role's own has served the other tests): its flags,
    # round_robin, and cache_aware with the breaker below the attempts; health checks every 10 s, as in
    # docs/router.md's measurement (a check that took the worker out sooner would leave nothing to retry).
    auth = {'Authorization': 'Bearer ' + ROUTER_KEY}
    role_like = ['--api-key', ROUTER_KEY] + [item for pair in sorted(role_flags.items()) for item in pair]
    dead = None
    try:
        start_adhoc(fleet, 30185, 29185, role_like + ['--worker-urls'] + urls, health_interval=10)
        start_adhoc(fleet, 30183, 29183, ['--api-key', ROUTER_KEY, '--policy', 'round_robin', '--worker-urls'] + urls,
                    health_interval=10)
        counts = warm_up(fleet, 30185, auth)
        dead = fleet.hosts[counts.index(12)] if 12 in counts else None
        assert dead is not None, counts  # cache_aware sent the whole warm-up to one worker
        dead_url = 'http://%s:30001' % dead.address
        # Its first choice is its own (1 in 3 to match on each start): 6 starts failed 1 run in 11 (CI); 24 fail
        # about 1 in 16,000, at 3 starts on average.
        for order in (urls, urls[::-1]) * 12:
            start_adhoc(fleet, 30184, 29184, ['--api-key', ROUTER_KEY, '--cb-failure-threshold', '4',
                                              '--worker-urls'] + order, health_interval=10)
            counts4 = warm_up(fleet, 30184, auth)
            if counts4 == counts:
                break
        assert counts4 == counts, (counts4, counts)
        role0, rr0, cb0 = metrics(fleet, 29185), metrics(fleet, 29183), metrics(fleet, 29184)
        killed = time.time()
        fleet.run(dead, 'systemctl kill -s KILL %s; systemctl stop %s' % (UNIT, UNIT), check=True)
        ports = (30185, 30183, 30184)
        # one request every 0.2 s through each router in turn; when the role's router lists the worker unhealthy
        after = on_router_batch(fleet, [(port, 'POST', '/v1/completions', {
            'model': MODEL, 'prompt': 'after %d %d' % (port, i), 'max_tokens': 1}, auth)
            for i in range(ROUNDS) for port in ports], pause=0.2 / len(ports), watch=(ROUTER_PORT, auth, dead_url))
        results = dict((port, after['results'][n::len(ports)]) for n, port in enumerate(ports))
        unhealthy_after = after['unhealthy'] - killed if after['unhealthy'] else None
        role1, rr1, cb1 = metrics(fleet, 29185), metrics(fleet, 29183), metrics(fleet, 29184)
    finally:
        for port in (30183, 30184, 30185):
            stop_adhoc(fleet, port)
        if dead is not None:
            fleet.run(dead, 'systemctl start --no-block %s' % UNIT, check=True)  # back (the fixture stops it at the end)
    failed = dict((port, [r for r in rs if r['status'] != 200]) for port, rs in results.items())
    print('\nwarm-up: %s; cache_aware (role): %d of %d failed %s, retries %d, breaker failures %d, state %d; '
          'round_robin: %d of %d failed, retries %d, breaker failures %d, state %d; unhealthy in the listing after '
          '%s s' % (counts, len(failed[30185]), len(results[30185]),
                    [(r['status'], round(r['seconds'], 2), r['body'][:60]) for r in failed[30185]],
                    sample(role1, 'smg_worker_retries_total') - sample(role0, 'smg_worker_retries_total'),
                    sample(role1, 'smg_worker_cb_outcomes_total', worker=dead_url, outcome='failure'),
                    sample(role1, 'smg_worker_cb_state', worker=dead_url),
                    len(failed[30183]), len(results[30183]),
                    sample(rr1, 'smg_worker_retries_total') - sample(rr0, 'smg_worker_retries_total'),
                    sample(rr1, 'smg_worker_cb_outcomes_total', worker=dead_url, outcome='failure'),
                    sample(rr1, 'smg_worker_cb_state', worker=dead_url), unhealthy_after))
    print('cache_aware, breaker 4: %d of %d failed, retries %d, breaker failures %d, state %d' % (
        len(failed[30184]), len(results[30184]),
        sample(cb1, 'smg_worker_retries_total') - sample(cb0, 'smg_worker_retries_total'),
        sample(cb1, 'smg_worker_cb_outcomes_total', worker=dead_url, outcome='failure'),
        sample(cb1, 'smg_worker_cb_state', worker=dead_url)))
    # the role's router (cache_aware, 5 attempts, breaker at 10): 2 requests failed, 500 call_upstream_request_error,
    # all their 10 attempts at the dead worker (8 retries), then its breaker open and every request served elsewhere
    assert len(failed[30185]) == 2, failed[30185]
    assert all(r['status'] == 500 and 'call_upstream_request_error' in r['body'] for r in failed[30185])
    assert sample(role1, 'smg_worker_retries_total') - sample(role0, 'smg_worker_retries_total') == 8
    assert sample(role1, 'smg_worker_cb_outcomes_total', worker=dead_url, outcome='failure') - \
        sample(role0, 'smg_worker_cb_outcomes_total', worker=dead_url, outcome='failure') == 10
    assert sample(role1, 'smg_worker_cb_state', worker=dead_url) == 1
    assert all(r['status'] == 200 for r in results[30185][2:]), results[30185][:4]
    # round_robin (same attempts and breaker): each attempt at the dead worker retried on the next: none failed
    assert failed[30183] == [] and len(results[30183]) == ROUNDS
    assert sample(rr1, 'smg_worker_cb_outcomes_total', worker=dead_url, outcome='failure') == 10
    assert sample(rr1, 'smg_worker_retries_total') - sample(rr0, 'smg_worker_retries_total') == 10
    # cache_aware with the breaker at 4: the first request's 4 attempts at the dead worker opened it, its 5th went to
    # a live one: none failed
    assert failed[30184] == [] and len(results[30184]) == ROUNDS
    assert sample(cb1, 'smg_worker_cb_outcomes_total', worker=dead_url, outcome='failure') == 4
    assert sample(cb1, 'smg_worker_retries_total') - sample(cb0, 'smg_worker_retries_total') == 4
    assert sample(cb1, 'smg_worker_cb_state', worker=dead_url) == 1
    # the health check (every 2 s here, 3 failures) lists it unhealthy within 3 intervals and a timeout
    assert unhealthy_after is not None and unhealthy_after <= 2 * 3 + 5 + 2, unhealthy_after
