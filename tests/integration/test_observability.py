# -*- coding: utf-8 -*-
"""Observability on a real fleet host: Debian's prometheus 2.42 and prometheus-node-exporter 1.5 (from the fleet's
mirror, installed by llmops.sglang.monitoring) scrape the stand-in's /metrics and the server role's deployment
textfile; checked through Prometheus's HTTP API after a deploy and after a failed (rolled back) one. Every query of
the shipped dashboard and every alert expression must evaluate and return series, and an alert must fire when the
server stops and clear when it is back.

The fleet's hosts reach only the outer machine (no forwarding between them), so Prometheus runs on the SGLang host
and scrapes it through its fleet address, as a separate monitoring host would.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from server_helpers import VENV, completion, flat, role_vars
# the stand-in host fixture

SERVER_PLAYBOOK = 'tests/integration/playbooks/server_role.yml'
MONITORING_PLAYBOOK = 'tests/integration/playbooks/monitoring.yml'
ROLE_FILES = Path(__file__).resolve().parents[2] / 'roles' / 'monitoring' / 'files'
UNIT = 'sglang-obs'
STATE_DIR = '/var/lib/sglang/sglang-obs'  # the unit's state dir: removed with it by the host fixture
PORT = 30040
# It listens on 0.0.0.0 (Prometheus scrapes it through the fleet address), which the role refuses without a key;
# /metrics needs none (SGLang 0.5.23 utils/auth.py:101-106), which the scrape below shows.
KEY = 'sk-obs-2f8a61d3'
DEADLINE = 180  # an upper bound for Prometheus to see a change; never a timing assertion
MONITORING_VARS = {
    'monitoring_scrape_interval': '1s', 'monitoring_scrape_timeout': '1s', 'monitoring_evaluation_interval': '1s',
    'monitoring_alert_for': '3s', 'monitoring_crash_loop_restarts': 1, 'monitoring_crash_loop_window': '10m',
    'monitoring_default_instances': [{'name': UNIT, 'port': PORT}],
}


class Prometheus(object):
    def __init__(self, address):
        self.base = 'http://%s:9090' % address

    def get(self, path, **params):
        url = self.base + path + ('?' + urllib.parse.urlencode(params) if params else '')
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.loads(response.read().decode())
        assert body['status'] == 'success', body
        return body['data']

    def query(self, expr):
        """The instant vector (list of {metric, value}) of expr; fails on any PromQL error."""
        data = self.get('/api/v1/query', query=expr)
        return data['result']

    def value(self, expr):
        result = self.query(expr)
        assert len(result) == 1, (expr, result)
        return float(result[0]['value'][1])

    def until(self, what, check):
        """Poll until check() returns something truthy (then return it); fail with `what` after DEADLINE."""
        deadline = time.monotonic() + DEADLINE
        while True:
            found = check()
            if found:
                return found
            if time.monotonic() > deadline:
                pytest.fail('Prometheus never saw: %s' % what, pytrace=False)
            time.sleep(1)

    def until_value(self, expr, expected):
        def check():
            result = self.query(expr)
            return len(result) == 1 and float(result[0]['value'][1]) == expected
        self.until('%s == %s' % (expr, expected), check)

    def alerts(self, name):
        return [a for a in self.get('/api/v1/alerts')['alerts'] if a['labels'].get('alertname') == name]


# Panels this host cannot fill: no router runs here (the router job has no target; test_monitoring_host.py scrapes a
# real one), and the stand-in answers in one piece, so SGLang would observe no inter-token latency for it either
# (a request's chunks after its first; tests/conformance/test_dashboard.py holds both against their sources).
NOT_HERE = ('smg_', 'job="router"', 'sglang:inter_token_latency_seconds')


def dashboard_queries():
    dashboard = json.loads((ROLE_FILES / 'grafana-dashboard-sglang.json').read_text())
    queries = [(panel['title'], target['expr']) for panel in dashboard['panels'] for target in panel['targets']]
    queries = [(title, expr) for title, expr in queries if not any(part in expr for part in NOT_HERE)]
    assert len(queries) >= 16
    return [(title, expr.replace('$host', '.*').replace('$__rate_interval', '1m')) for title, expr in queries]


@pytest.fixture
def observed(fleet, standin_host):
    """The role's host with the stand-in deployed on 0.0.0.0 and Prometheus + node_exporter on it; cleaned up after."""
    target, units = standin_host
    units.append(UNIT)
    # nvidia-smi of 8 GPUs whose memory follows the stand-in's schedulers (as tests/fleet/demo_prepare.yml does)
    script = '#!/bin/sh\nSGLANG_STANDIN_STATE_DIR=%s exec %s/bin/sglang-standin-nvidia-smi "$@"\n' % (STATE_DIR, VENV)
    fleet.run(target, 'cat > /usr/local/bin/nvidia-smi && chmod 0755 /usr/local/bin/nvidia-smi', input=script, check=True)
    yield target
    fleet.run(target, 'systemctl stop prometheus prometheus-node-exporter; '
                      'apt-get purge -y -q prometheus prometheus-node-exporter >/dev/null; '
                      'rm -rf /etc/prometheus /var/lib/prometheus /etc/default/prometheus-node-exporter /usr/local/bin/nvidia-smi '
                      '/etc/systemd/system/prometheus-node-exporter.service.d; systemctl daemon-reload')


def deploy(fleet, target, fault=None):
    env = {'SGLANG_STANDIN_PACE': '0.01', 'SGLANG_STANDIN_STATE_DIR': STATE_DIR}
    if fault:
        env['SGLANG_STANDIN_FAULT'] = fault
    variables = role_vars(target, UNIT, PORT, sglang_host='0.0.0.0', sglang_api_key=KEY, sglang_env=env)
    return fleet.playbook(SERVER_PLAYBOOK, variables)


def test_prometheus_sees_deploys_failures_and_alerts(fleet, observed):
    target = observed
    first = deploy(fleet, target)
    assert first.rc == 0, first
    monitoring_vars = dict(MONITORING_VARS, target_hosts=target.name, monitoring_sglang_hosts=[target.name])
    # check mode on a host without the packages: runs, and installs or writes nothing
    checked = fleet.playbook(MONITORING_PLAYBOOK, monitoring_vars, check=True)
    assert checked.rc == 0, checked
    assert fleet.run(target, 'ls /etc/prometheus || dpkg -s prometheus-node-exporter').returncode != 0
    monitored = fleet.playbook(MONITORING_PLAYBOOK, monitoring_vars)
    assert monitored.rc == 0, monitored
    again = fleet.playbook(MONITORING_PLAYBOOK, monitoring_vars)
    assert again.rc == 0 and ' changed=0 ' in again.stdout, again
    for check in (['promtool', 'check', 'config', '/etc/prometheus/prometheus.yml'],
                  ['promtool', 'check', 'rules', '/etc/prometheus/rules/llmops-sglang.rules.yml']):
        result = fleet.run(target, check)
        assert result.returncode == 0, (check, result.stdout, result.stderr)
    # (the directory is the host's: other tests' units may have left theirs; this unit's is its own file alone, written
    # whole with no staged copy beside it)
    files = [name for name in fleet.run(target, 'ls -A /var/lib/prometheus/node-exporter', check=True).stdout.split()
             if UNIT in name]
    assert files == ['%s.prom' % UNIT], files

    prom = Prometheus(target.address)

    def all_up():
        """sglang's /metrics (no API key needed), node_exporter, Prometheus itself."""
        targets = prom.get('/api/v1/targets')['activeTargets']
        return len(targets) == 3 and all(t['health'] == 'up' for t in targets)
    prom.until('all targets up', all_up)
    assert prom.value('up{job="sglang", host="%s", unit="%s.service"}' % (target.name, UNIT)) == 1
    # the deployment: ready, how long, which phases, versions
    prom.until_value('sglang_deploy_ready{unit="%s.service"}' % UNIT, 1)
    assert prom.value('node_textfile_scrape_error') == 0  # node_exporter parsed the file
    (info,) = prom.query('sglang_deploy_info{unit="%s.service"}' % UNIT)
    assert info['metric']['sglang_version'] == '0.5.23+standin' and info['metric']['compressed_tensors_version'] == '0.18.0'
    assert info['metric']['reason'] == 'none' and info['metric']['host'] == target.name
    good_checksum = info['metric']['config_checksum']
    assert len(good_checksum) == 12, info
    time_to_ready = prom.value('sglang_deploy_time_to_ready_seconds{unit="%s.service"}' % UNIT)
    assert time_to_ready > 0
    phases = dict((r['metric']['phase'], float(r['value'][1])) for r in prom.query('sglang_deploy_phase_seconds{unit="%s.service"}' % UNIT))
    assert {'init', 'weights', 'kv_cache', 'cuda_graph'} <= set(phases), phases
    assert prom.value('sglang_deploy_rolled_back{unit="%s.service"}' % UNIT) == 0
    assert prom.value('sglang_deploy_config_changed{unit="%s.service"}' % UNIT) == 1
    assert prom.value('sglang_deploy_gpus') == 8 and prom.value('sglang_deploy_gpu_memory_used_bytes') > 0
    # SGLang's own metrics move with requests
    requests_before = prom.value('sum(sglang:num_requests_total{unit="%s.service"})' % UNIT)
    for _request in range(3):
        completion(fleet, target, PORT, api_key=KEY)
    prom.until('3 more requests', lambda: prom.value('sum(sglang:num_requests_total)') >= requests_before + 3)
    (tokens,) = prom.query('sglang:max_total_num_tokens{unit="%s.service"}' % UNIT)
    assert tokens['metric']['model_name'] == 'kimi-k2.6' and float(tokens['value'][1]) > 0
    # a re-run with nothing to do keeps the metrics file as it is
    rerun = deploy(fleet, target)
    assert rerun.rc == 0 and ' changed=0 ' in rerun.stdout, rerun

    # a failed deploy: crash in CUDA graph capture, rolled back to the configuration that served
    failed_from = time.time()
    failed = deploy(fleet, target, fault='crash@cuda_graph:oom')
    # (the outcome's message, made once: rollout_state.after_rollback's note)
    assert failed.rc != 0 and 'Rolled back: the last known good configuration was restored and is serving again' \
        in flat(failed.stdout), failed
    time.sleep(2)  # the last scrape of the deploy
    # the deploying marker (test_alerts.py): set at the restart, renewed by the rollback's, gone with the verdict
    marked = prom.get('/api/v1/query_range', query='sglang_deploy_in_progress{unit="%s.service"}' % UNIT,
                      start='%.3f' % failed_from, end='%.3f' % time.time(), step='1s')['result']
    assert {'restart', 'rollback'} <= set(r['metric']['reason'] for r in marked), marked
    prom.until('the marker gone with the verdict', lambda: not prom.query('sglang_deploy_in_progress{unit="%s.service"}' % UNIT))
    prom.until_value('sglang_deploy_ready{unit="%s.service"}' % UNIT, 0)
    prom.until_value('sglang_deploy_rolled_back{unit="%s.service"}' % UNIT, 1)
    (info,) = prom.query('sglang_deploy_info{unit="%s.service"}' % UNIT)
    assert info['metric']['reason'] in ('crash_loop', 'unit_failed'), info
    assert info['metric']['config_checksum'] not in (good_checksum, 'unknown'), info  # the failed configuration's
    assert 'cuda_graph' in [r['metric']['phase'] for r in prom.query('sglang_deploy_phase_seconds{unit="%s.service"}' % UNIT)]
    # time to ready stays that of the last deploy that became ready
    assert prom.value('sglang_deploy_time_to_ready_seconds') == time_to_ready
    # the rolled-back server answers again
    prom.until('sglang target up after the rollback', lambda: prom.query('up{job="sglang"} == 1'))

    seen = set()
    rules = prom.get('/api/v1/rules')['groups']
    exprs = dict((rule['name'], rule['query']) for group in rules for rule in group['rules'])
    assert set(exprs) == {'SGLangServerNotReady', 'SGLangCrashLoop', 'SGLangRestartedDuringDeploy', 'SGLangDeployFailed',
                          'SGLangRolledBack', 'SGLangMetricsTargetDown', 'SGLangDeploySlow', 'SGLangRestartCountMissing'}, exprs
    # provoked for real in test_alerts.py (a slow planned restart, a crash loop while loading; the restart count is
    # there, so SGLangRestartCountMissing stays quiet), and in tests/rules' promtool tests
    elsewhere = {'SGLangCrashLoop', 'SGLangDeploySlow', 'SGLangRestartCountMissing'}
    assert all(rule['health'] == 'ok' for group in rules for rule in group['rules']), rules

    def evaluate_alerts():
        for name, expr in exprs.items():
            if prom.query(expr):
                seen.add(name)
    evaluate_alerts()
    assert {'SGLangDeployFailed', 'SGLangRolledBack'} <= seen, seen

    # the server stops: its alert fires; it starts again: the alert clears
    fleet.run(target, ['systemctl', 'stop', UNIT + '.service'], check=True)
    prom.until('SGLangServerNotReady firing', lambda: [a for a in prom.alerts('SGLangServerNotReady') if a['state'] == 'firing'])
    evaluate_alerts()
    fleet.run(target, ['systemctl', 'start', UNIT + '.service'], check=True)
    prom.until('SGLangServerNotReady cleared', lambda: prom.query('up{job="sglang"} == 1') and not prom.alerts('SGLangServerNotReady'))
    evaluate_alerts()
    fleet.run(target, ['systemctl', 'stop', 'prometheus-node-exporter'], check=True)
    prom.until('node target down', lambda: prom.query('up{job="node"} == 0'))
    evaluate_alerts()
    fleet.run(target, ['systemctl', 'start', 'prometheus-node-exporter'], check=True)
    prom.until('node target up', lambda: prom.query('up{job="node"} == 1'))
    # restarts during the deploy come from the waiter (crash_loop counts one); unit_failed may have none
    if prom.query('sglang_deploy_restarts{unit="%s.service"} > 0' % UNIT) or info['metric']['reason'] == 'crash_loop':
        evaluate_alerts()
    else:
        seen.add('SGLangRestartedDuringDeploy (no restart during the failed wait)')
    missing = [name for name in exprs if name not in elsewhere and not any(s.startswith(name) for s in seen)]
    assert not missing, 'alert expressions that never returned series: %s' % missing

    # every dashboard query evaluates and returns series (after traffic, the failed deploy and the restart)
    for _request in range(2):
        completion(fleet, target, PORT, api_key=KEY)
    for title, expr in dashboard_queries():
        prom.until('%s: %s returns series' % (title, expr), lambda expr=expr: prom.query(expr))

    # removing the instance removes its deployment metrics
    removed = fleet.playbook(SERVER_PLAYBOOK, role_vars(target, UNIT, PORT, sglang_state='absent'))
    assert removed.rc == 0, removed
    assert fleet.run(target, 'ls -A /var/lib/prometheus/node-exporter', check=True).stdout.split() == []
