# -*- coding: utf-8 -*-
"""Behind the real sglang-router 0.3.2: the canary's live baseline leaves the router for the analysis and comes back
(issue 26).

Three stand-in workers and a router (router_helpers' fleet), a load of short requests through the router the whole
time. The change slows decoding 2x; the rollout's canary is the first worker, and the plan chooses the second - the
same box class, still on the old configuration - as its live baseline. For the analysis window the router no longer
lists the peer, so no user request reaches it (a baseline that served others during the window would be set aside, and
the table would not say "live"); the analysis stops the canary against it; afterwards the router lists the peer again,
which was never restarted and served the analysis' own requests. The load saw no failure."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from fleet import load as fleet_load  # tests/ is on sys.path (conftest)
# rfleet, inventory and deployed are fixtures (module scope): imported for pytest to find them here
from router_helpers import (  # noqa: F401  pylint: disable=unused-import
    MODEL, REQUEST_LOG, ROUTER_KEY, ROUTER_PORT, TEST_ENV, UNIT, deployed, inventory, play, rfleet, rotation,
    worker_urls)

# Tokens of 0.1 s here (router_helpers): few and short requests keep the window near a minute; the floors are wide
# for a loaded CI machine (a 2x slower decode is 100 ms per token more).
CANARY = {'concurrency': [1, 4], 'rounds': 3, 'max_tokens': 8, 'floors': {'tpot': 20, 'ttft': 400}}


def json_lines(fleet, host, path, since):
    return fleet_load.json_lines_since(fleet.run(host, 'cat %s 2>/dev/null; true' % path, check=True).stdout, since)


def main_pid(fleet, host):
    return fleet.run(host, 'systemctl show -p MainPID --value %s' % UNIT, check=True).stdout.strip()


def test_the_live_baseline_leaves_the_router_for_the_analysis_and_comes_back(deployed, inventory):
    fleet = deployed
    canary, peer, third, router = fleet.hosts[0], fleet.hosts[1], fleet.hosts[2], fleet.hosts[3]
    peer_url = 'http://%s:30001' % peer.address
    pid = main_pid(fleet, peer)
    poller = fleet_load.RotationPoller([(router.address, ROUTER_PORT)], api_key=ROUTER_KEY, interval=0.5).start()
    load = fleet_load.Load(router.address, ROUTER_PORT, [fleet_load.SHORT] * 3000, clients=2, api_key=ROUTER_KEY,
                           model=MODEL, timeout=120, tag='canary-peer').start()
    began = time.time()
    try:
        result = play(fleet, inventory, 'playbooks/deploy_k26.yml', check_rc=False,
                      sglang_env=dict(TEST_ENV, SGLANG_STANDIN_FAULT='decode_slowdown=2'),
                      sglang_canary_analysis='canary', sglang_canary=CANARY, k26_serial=[1, 1, 1])
    finally:
        load.stop.set()
        assert load.join(180), 'the load did not stop by itself'
        samples = poller.finish()
    ended = time.time()
    output = ' '.join(result.stdout.split())
    # the plan chose the peer, and the analysis measured against it, live, and stopped the canary
    assert 'canary %s %s: live baseline %s (%s: the same box class and old configuration)' % (
        canary.name, UNIT, peer.name, peer_url) in output, result.stdout[-8000:]
    assert result.rc != 0, result.stdout[-8000:]
    assert 'canary analysis: FAILED (baseline: live, %s;' % peer_url in output, result.stdout[-8000:]
    assert 'time per output token at concurrency 1' in output
    assert 'TASK [llmops.sglang.router : Take the workers out of every router]' in result.stdout
    assert 'TASK [llmops.sglang.router : Admit the workers to every router and verify it routes to them]' in result.stdout
    # the router lists the peer again, and the peer was never restarted (the rollout stopped at its canary)
    assert peer_url in rotation(fleet), rotation(fleet)
    assert main_pid(fleet, peer) == pid
    # the window: the router's listings without the peer, while the third worker was listed
    listed = [s for s in samples if s['error'] is None and began <= s['time'] <= ended]
    out = [s['time'] for s in listed if peer_url not in s['listed']]
    assert out, 'the router listed the peer throughout: %s' % [(round(s['time'] - began), len(s['listed'])) for s in listed]
    assert all('http://%s:30001' % third.address in s['listed'] for s in listed)
    window = (min(out), max(out))
    # long enough to mean something (the analysis' rounds), and users kept sending through the router during it
    assert window[1] - window[0] >= 5, window
    assert [r for r in load.results if window[0] + 1 < r['start'] < window[1] - 1], 'no user request during the window'
    records = json_lines(fleet, peer, REQUEST_LOG, began)
    from_router = fleet_load.sent_by(records, router.address)
    from_canary = fleet_load.sent_by(records, canary.address)
    # the analysis' requests reached the peer, all inside the window; the users' (through the router) none inside it
    assert len(from_canary) >= 3 * (2 + 8), len(from_canary)
    assert all(window[0] - 1 <= r['start'] <= window[1] + 1 for r in from_canary), (window, [r['start'] for r in from_canary])
    inside = [r for r in from_router if window[0] + 1 < r['start'] < window[1] - 1]
    assert not inside, inside[:3]
    # and the users' load was served throughout, also by the peer before and after the window
    summary = fleet_load.summarize(load.results)
    assert summary['failed'] == 0 and summary['short']['ok'] >= 20, fleet_load.summary_line(summary)
    assert from_router, 'the router sent the peer nothing during the whole run'
