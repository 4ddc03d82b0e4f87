# -*- coding: utf-8 -*-
"""The alerts a pager can live with, on a real fleet host: Debian's prometheus 2.42 and prometheus-node-exporter 1.5
(from the fleet's mirror, installed by llmops.sglang.monitoring, its systemd collector added by the role's drop-in)
scrape the stand-in and the server role's deployment textfile, evaluating the role's rules every second with short
waits (monitoring_alert_for 3s, monitoring_expected_load 8s):

- a planned restart (the role, a slow load) fires no SGLangServerNotReady while Prometheus saw the server down and
  the deploying marker, and SGLangDeploySlow warns during it (so the rules were evaluated during the load), naming the
  start-up phase the waiter's phase file shows; the phase file is gone after the verdict;
- `systemctl kill` outside a deploy fires SGLangServerNotReady;
- a crash loop while loading (the server never answers /metrics) fires SGLangCrashLoop, from systemd's own count.

Prometheus runs on the SGLang host and scrapes it through its fleet address, as in test_observability.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import threading
import time

import pytest

from server_helpers import role_vars
from test_observability import Prometheus

SERVER_PLAYBOOK = 'tests/integration/playbooks/server_role.yml'
MONITORING_PLAYBOOK = 'tests/integration/playbooks/monitoring.yml'
UNIT = 'sglang-alr'
SERVICE = UNIT + '.service'
STATE_DIR = '/var/lib/sglang/sglang-alr'  # the unit's state dir: removed with it by the host fixture
FAULT_FILE = STATE_DIR + '/fault'  # read by the stand-in at every start (none: no fault)
PORT = 30042
KEY = 'sk-alr-6c1e93b0'  # it listens on 0.0.0.0 (scraped through the fleet address); /metrics needs no key
ALERT_FOR = 3
MONITORING_VARS = {
    'monitoring_scrape_interval': '1s', 'monitoring_scrape_timeout': '1s', 'monitoring_evaluation_interval': '1s',
    'monitoring_alert_for': '%ds' % ALERT_FOR, 'monitoring_expected_load': '8s',
    'monitoring_crash_loop_restarts': 3, 'monitoring_crash_loop_window': '10m',
    'monitoring_restart_count_missing_for': '5s',
    'monitoring_default_instances': [{'name': UNIT, 'port': PORT}],
}


@pytest.fixture
def alerting(fleet, standin_host):
    """The role's host with the stand-in (its own unit) and Prometheus + node_exporter on it; all removed after."""
    target, units = standin_host
    units.append(UNIT)
    yield target
    fleet.run(target, 'systemctl stop prometheus prometheus-node-exporter; '
                      'apt-get purge -y -q prometheus prometheus-node-exporter >/dev/null; '
                      'rm -rf /etc/prometheus /var/lib/prometheus /etc/default/prometheus-node-exporter '
                      '/etc/systemd/system/prometheus-node-exporter.service.d /var/lib/llmops-sglang/server/%s; '
                      'systemctl daemon-reload' % UNIT)


def deploy(fleet, target, pace):
    # cuda_graph=200: 10 s at pace 0.05 (3 s by default), so that a phase after weights lasts several 1 s scrapes even
    # when CI's load delays the waiter's journal reads (3 s of it was missed once: only weights was scraped)
    env = {'SGLANG_STANDIN_PACE': pace, 'SGLANG_STANDIN_STATE_DIR': STATE_DIR, 'SGLANG_STANDIN_FAULT_FILE': FAULT_FILE,
           'SGLANG_STANDIN_PHASE_SECONDS': 'cuda_graph=200'}
    variables = role_vars(target, UNIT, PORT, sglang_host='0.0.0.0', sglang_api_key=KEY, sglang_env=env,
                          sglang_restart_sec=1, sglang_start_limit_burst=50)
    return fleet.playbook(SERVER_PLAYBOOK, variables)


def series(prom, expr, start, end):
    """[(labels, [values])] of expr between start and end (Unix seconds), one sample a second."""
    data = prom.get('/api/v1/query_range', query=expr, start='%.3f' % start, end='%.3f' % end, step='1s')
    return [(r['metric'], [float(v) for _t, v in r['values']]) for r in data['result']]


def firing(prom, name):
    return [a for a in prom.alerts(name) if a['state'] == 'firing' and a['labels'].get('unit') == SERVICE]


def test_planned_restart_is_quiet_a_kill_and_a_crash_loop_while_loading_page(fleet, alerting):
    target = alerting
    started = time.monotonic()
    first = deploy(fleet, target, '0.01')
    assert first.rc == 0, first
    monitored = fleet.playbook(MONITORING_PLAYBOOK, dict(MONITORING_VARS, target_hosts=target.name,
                                                         monitoring_sglang_hosts=[target.name]))
    assert monitored.rc == 0, monitored
    dropin = fleet.run(target, 'cat /etc/systemd/system/prometheus-node-exporter.service.d/50-llmops-sglang.conf',
                       check=True).stdout
    assert '$ARGS "--collector.systemd.enable-restarts-metrics"' in dropin, dropin
    assert 'unit-include=(%s)[.]service' % UNIT in dropin, dropin
    prom = Prometheus(target.address)
    up = 'up{job="sglang", unit="%s"}' % SERVICE
    prom.until_value(up, 1)
    # node_exporter's systemd collector works on this host (D-Bus, as the prometheus user): the unit's restart count
    restarts = 'node_systemd_service_restart_total{name="%s"}' % SERVICE
    prom.until(restarts, lambda: prom.query(restarts))
    prom.until('no SGLangRestartCountMissing', lambda: not prom.alerts('SGLangRestartCountMissing'))

    # 1. A planned restart with a slow load (pace 0.01 -> 0.05: a changed environment, so the role restarts it)
    # The playbook runs beside a reader of Prometheus's alerts: SGLangDeploySlow's description, rendered by Prometheus
    # while it fires, names the phase the waiter's file shows.
    t0 = time.time()
    outcome = {}
    runner = threading.Thread(target=lambda: outcome.update(result=deploy(fleet, target, '0.05')))
    runner.start()
    descriptions = set()
    while runner.is_alive():
        descriptions.update(a['annotations']['description'] for a in firing(prom, 'SGLangDeploySlow'))
        time.sleep(1)
    runner.join()
    planned = outcome['result']
    t1 = time.time()
    assert planned.rc == 0, planned
    time.sleep(2)  # the last scrape and evaluation of the range
    window = (t0, time.time())
    down = series(prom, up + ' == 0', *window)
    assert down and len(down[0][1]) > ALERT_FOR + 2, ('Prometheus never saw the load: the server was not down long enough', down)
    marker = series(prom, 'sglang_deploy_in_progress{unit="%s"}' % SERVICE, *window)
    assert marker and marker[0][0]['reason'] == 'restart', marker
    # the rules were evaluated during the load: the slow-load warning fired, naming the step
    slow = series(prom, 'ALERTS{alertname="SGLangDeploySlow", alertstate="firing", unit="%s"}' % SERVICE, *window)
    assert slow and slow[0][0]['reason'] == 'restart' and slow[0][0]['severity'] == 'warning', slow
    # ... and the phase: the waiter's phase file was scraped during the load, and the warning named its phases
    phases = series(prom, 'sglang_deploy_phase_started_timestamp_seconds{unit="%s"}' % SERVICE, *window)
    seen = set(labels['phase'] for labels, _values in phases)
    assert 'weights' in seen and len(seen) >= 2, seen
    named = set(re.findall(r'In start-up phase (\w+) for ', ' '.join(descriptions)))
    assert named and named <= seen, (named, seen, descriptions)
    # and no critical alert, not even pending
    assert series(prom, 'ALERTS{alertname="SGLangServerNotReady"}', *window) == []
    assert series(prom, 'ALERTS{severity="critical"}', *window) == []
    # the verdict cleared the marker
    prom.until('the marker gone', lambda: not prom.query('sglang_deploy_in_progress{unit="%s"}' % SERVICE))
    prom.until_value('sglang_deploy_ready{unit="%s"}' % SERVICE, 1)
    prom.until('the phase file gone', lambda: not prom.query('sglang_deploy_phase_started_timestamp_seconds{unit="%s"}' % SERVICE))
    assert fleet.run(target, 'test -e /var/lib/prometheus/node-exporter/%s.prom && '
                             '! test -e /var/lib/prometheus/node-exporter/%s.phase.prom' % (UNIT, UNIT)).returncode == 0
    print('planned restart: playbook %.0f s, server down %d s seen by Prometheus, marker %d s, SGLangDeploySlow %d s '
          '(phases named: %s; scraped: %s), no critical alert'
          % (t1 - t0, len(down[0][1]), len(marker[0][1]), len(slow[0][1]), sorted(named), sorted(seen)))

    # 2. Down outside a deploy: systemctl kill (SIGTERM to its processes; systemd may start it again, and it loads)
    killed = time.time()
    fleet.run(target, ['systemctl', 'kill', SERVICE], check=True)
    prom.until('SGLangServerNotReady firing after systemctl kill', lambda: firing(prom, 'SGLangServerNotReady'))
    (alert,) = firing(prom, 'SGLangServerNotReady')
    assert alert['labels']['severity'] == 'critical' and alert['labels']['host'] == target.name, alert
    print('systemctl kill: SGLangServerNotReady firing after %.1f s (monitoring_alert_for %d s)'
          % (time.time() - killed, ALERT_FOR))

    # 3. A crash loop while loading: every start crashes in weight loading (before /metrics ever answers); systemd
    # restarts it every second. Restarted by hand, outside any deploy (which also sets NRestarts back to 0).
    fleet.run(target, 'echo crash@weights:oom > %s && systemctl restart %s' % (FAULT_FILE, SERVICE), check=True)
    looping = time.time()
    try:
        prom.until('SGLangCrashLoop firing', lambda: firing(prom, 'SGLangCrashLoop'))
    except BaseException:
        print(fleet.run(target, 'systemctl show -p NRestarts,ActiveState,SubState,Result %s; journalctl -q -n 30 -u %s'
                        % (SERVICE, SERVICE)).stdout)
        print(prom.query(restarts), prom.query('increase(%s[10m])' % restarts))
        raise
    fired = time.time() - looping
    (alert,) = firing(prom, 'SGLangCrashLoop')
    assert alert['labels']['severity'] == 'critical' and alert['labels']['host'] == target.name, alert
    assert float(alert['value']) >= 3, alert
    # the loop alone reaches the threshold (the kill above may have added one automatic restart to the window)
    prom.until('3 automatic restarts since the manual one', lambda: prom.query(restarts + ' >= 3'))
    assert firing(prom, 'SGLangCrashLoop')
    # it never answered during the loop: the count is systemd's, not the server's
    assert series(prom, up + ' == 1', looping, time.time()) == []
    shown = fleet.run(target, ['systemctl', 'show', '-p', 'NRestarts', SERVICE], check=True).stdout.strip()
    print('crash loop while loading: SGLangCrashLoop firing after %.1f s (%s %.0f s after the loop began)'
          % (fired, shown, time.time() - looping))
    fleet.run(target, 'rm -f %s; systemctl stop %s' % (FAULT_FILE, SERVICE), check=True)
    print('test wall time %.0f s' % (time.monotonic() - started))
