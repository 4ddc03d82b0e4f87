# -*- coding: utf-8 -*-
"""llmops.sglang.monitoring on a monitoring host that is not the collection's alone (issue 23), with Debian's real
prometheus 2.42 and prometheus-node-exporter 1.5 and the real sglang-router 0.3.2:

- `--check --diff` on a fresh host (no prometheus, no python3-apt) passes and installs or writes nothing;
- an operator's prometheus.yml that scrapes a job of its own and lacks the role's jobs is refused with the YAML to
  add, and nothing changes on the host; once the operator added it, the role keeps the file byte for byte, writes
  only its own files, and Prometheus really scrapes the operator's job and the role's (its HTTP API);
- node_exporter's ARGS file stays Debian's (dpkg's md5): the role's extra flags (the systemd collector's restart
  counts) reach node_exporter through the role's drop-in; a flag ARGS sets already is refused;
- the routers of k26_routers: the one on this host, whose Prometheus endpoint is on loopback (the router role's
  default), is scraped there; one on another host on loopback is left out with the note saying why.

One host of the fleet (the last), cleaned up afterwards: the packages purged, the router and its venv removed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

from fleet import router_wheels  # tests/ is on sys.path (conftest)

PLAYBOOK = 'tests/integration/playbooks/monitoring.yml'
ROUTER_VENV = '/opt/hm-router'
ROUTER_UNIT = 'hm-router'
DEADLINE = 120  # an upper bound for Prometheus to see a change; never a timing assertion
RESTARTS_FLAGS = ['--collector.systemd.enable-restarts-metrics',
                  r'--collector.systemd.unit-include=(prometheus.*|hm-router)\.service']
OPERATOR_JOB = """# the operator's own Prometheus: it scrapes itself as job "other"
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: other
    static_configs:
      - targets: ["localhost:9090"]
  - job_name: node
    static_configs:
      - targets: ["localhost:9100"]
"""
# What the role's refusal asks for, added by the operator (rule_files relative to the file, a glob for the targets)
OPERATOR_COMPLETE = OPERATOR_JOB + """    file_sd_configs:
      - files: ["/etc/prometheus/file_sd/llmops-sglang-node.json"]
  - job_name: sglang
    file_sd_configs:
      - files: ["file_sd/*-sglang.json"]
  - job_name: router
    file_sd_configs:
      - files: ["/etc/prometheus/file_sd/llmops-sglang-router.json"]
rule_files:
  - rules/*.yml
"""


def api(address, path, **params):
    url = 'http://%s:9090%s%s' % (address, path, '?' + urllib.parse.urlencode(params) if params else '')
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.loads(response.read().decode())
    assert body['status'] == 'success', body
    return body['data']


def until(what, check):
    deadline = time.monotonic() + DEADLINE
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail('never saw: %s' % what, pytrace=False)
        time.sleep(1)


def said(result):
    """The run's output with the callback's line wrapping and YAML quoting undone (compared word by word)."""
    return ' '.join(result.stdout.replace('\\n', '\n').replace("''", "'").split())


def sha256(fleet, host, path):
    return fleet.run(host, ['sha256sum', path], check=True).stdout.split()[0]


@pytest.fixture
def monitoring_host(fleet):
    """The fleet's last host with nothing of Prometheus on it (nor python3-apt); cleaned up afterwards."""
    target = fleet.hosts[-1]
    clean = ('systemctl stop %s.service prometheus prometheus-node-exporter 2>/dev/null; systemctl reset-failed %s.service 2>/dev/null; '
             'apt-get purge -y -q prometheus prometheus-node-exporter >/dev/null 2>&1; '
             'rm -rf /etc/prometheus /var/lib/prometheus /etc/default/prometheus-node-exporter '
             '/etc/systemd/system/prometheus-node-exporter.service.d %s; systemctl daemon-reload' % (ROUTER_UNIT, ROUTER_UNIT, ROUTER_VENV))
    # a fresh host: the apt module's check mode would need python3-apt (which an earlier test's real apt run installs)
    fleet.run(target, clean + '; apt-get purge -y -q python3-apt >/dev/null 2>&1; true', check=True)
    yield target
    fleet.run(target, clean)


def inventory(fleet, monitoring, other):
    """The fleet's hosts in k26_routers: the monitoring host and another, both with the router role's defaults."""
    handle, path = tempfile.mkstemp(prefix='monitoring-host-', suffix='.yml')
    with os.fdopen(handle, 'w') as out:
        json.dump({'all': {'children': {'k26_routers': {'hosts': {monitoring.name: {}, other.name: {}}}}}}, out)
    return path


def test_monitoring_host_of_an_operator(fleet, monitoring_host):
    target = monitoring_host
    other = fleet.hosts[0] if fleet.hosts[0] is not target else None
    assert other is not None, 'needs a fleet of two hosts or more'
    extra_inventory = inventory(fleet, target, other)
    try:
        run_scenario(fleet, target, other, ('-i', extra_inventory))
    finally:
        os.unlink(extra_inventory)


def run_scenario(fleet, target, other, inventory_args):
    variables = {'target_hosts': target.name, 'monitoring_sglang_hosts': [target.name],
                 'monitoring_scrape_interval': '1s', 'monitoring_scrape_timeout': '1s',
                 'monitoring_evaluation_interval': '1s', 'monitoring_node_exporter_extra_flags': RESTARTS_FLAGS,
                 # the role's own systemd collector flags (test_alerts.py) would repeat these: here the operator's
                 # extra flags are what is tested
                 'monitoring_systemd_collector': False}

    # --check --diff on a fresh host: passes, says what it would install and write, changes nothing
    assert fleet.run(target, 'dpkg -s python3-apt || dpkg -s prometheus || ls /etc/prometheus').returncode != 0
    checked = fleet.playbook(PLAYBOOK, variables, check=True, extra_args=inventory_args + ('--diff',))
    assert checked.rc == 0, checked
    assert 'would install: prometheus prometheus-node-exporter' in said(checked), checked
    assert '/etc/prometheus/prometheus.yml does not exist yet: the role writes it whole' in said(checked), checked
    assert '+++ after: /etc/prometheus/prometheus.yml' in checked.stdout, checked
    assert fleet.run(target, 'dpkg -s prometheus || dpkg -s prometheus-node-exporter || ls /etc/prometheus '
                             '/etc/systemd/system/prometheus-node-exporter.service.d').returncode != 0

    # the operator's Prometheus: Debian's packages, their own prometheus.yml scraping a job "other"
    fleet.run(target, 'apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends prometheus prometheus-node-exporter >/dev/null',
              check=True, timeout=900)
    fleet.run(target, 'cat > /etc/prometheus/prometheus.yml && systemctl reload prometheus', input=OPERATOR_JOB, check=True)
    before = sha256(fleet, target, '/etc/prometheus/prometheus.yml')
    refused = fleet.playbook(PLAYBOOK, variables, extra_args=inventory_args)
    assert refused.rc != 0, refused
    for expected in ("/etc/prometheus/prometheus.yml is the operator's", 'The role changed nothing',
                     "scrape job 'node' does not read /etc/prometheus/file_sd/llmops-sglang-node.json",
                     "no scrape job 'sglang' reads", 'rule_files: - /etc/prometheus/rules/*.yml'):
        assert expected in said(refused), (expected, refused)
    assert sha256(fleet, target, '/etc/prometheus/prometheus.yml') == before
    assert fleet.run(target, 'ls /etc/prometheus/rules /etc/prometheus/file_sd '
                             '/etc/systemd/system/prometheus-node-exporter.service.d').returncode != 0

    # the real router on this host, its Prometheus endpoint on loopback (the router role's default); no workers (the
    # router role registers them through its API), one request so that its request counter exists
    router_wheels.add_to_mirror(os.path.join(fleet.state_dir, 'mirror'))
    pip = ' '.join(['%s/bin/pip' % ROUTER_VENV, 'install', '-q', '--disable-pip-version-check'] + target.pip_source_args)
    fleet.run(target, 'apt-get install -y -q python3-venv >/dev/null && python3 -m venv %s && %s sglang-router==0.3.2'
              % (ROUTER_VENV, pip), check=True, timeout=900)
    fleet.run(target, ['systemd-run', '--unit', ROUTER_UNIT, '%s/bin/python' % ROUTER_VENV, '-m', 'sglang_router.launch_router',
                       '--host', '127.0.0.1', '--port', '30180', '--prometheus-host', '127.0.0.1', '--prometheus-port', '29000'],
              check=True)
    fleet.run(target, ['python3', '-c', 'import time, urllib.request as u\nfor _ in range(60):\n    try:\n'
                       '        u.urlopen("http://127.0.0.1:30180/health", timeout=2); break\n'
                       '    except OSError:\n        time.sleep(1)'], check=True)

    # the operator adds what the refusal asked for: the role keeps the file byte for byte and writes only its own
    fleet.run(target, 'cat > /etc/prometheus/prometheus.yml && systemctl reload prometheus', input=OPERATOR_COMPLETE, check=True)
    args_before = fleet.run(target, 'md5sum /etc/default/prometheus-node-exporter', check=True).stdout.split()[0]
    kept = sha256(fleet, target, '/etc/prometheus/prometheus.yml')
    monitored = fleet.playbook(PLAYBOOK, variables, extra_args=inventory_args)
    assert monitored.rc == 0, monitored
    assert "is the operator's and reads the role's rule and target files: the role keeps it" in said(monitored), monitored
    assert sha256(fleet, target, '/etc/prometheus/prometheus.yml') == kept
    # the other router (loopback on its own host) is left out, with the note saying how to make it reachable
    assert ('router %s is not scraped: its Prometheus endpoint listens on 127.0.0.1:29000' % other.name) in said(monitored), monitored
    routers = json.loads(fleet.run(target, 'cat /etc/prometheus/file_sd/llmops-sglang-router.json', check=True).stdout)
    assert routers == [{'targets': ['127.0.0.1:29000'], 'labels': {'host': target.name, 'unit': 'sglang-router.service'}}]
    # node_exporter's ARGS file is still Debian's (dpkg's md5), the role's flags are in its drop-in and in force
    conffiles = fleet.run(target, "dpkg-query -W -f='${Conffiles}' prometheus-node-exporter", check=True).stdout
    dpkg_md5 = [line.split()[1] for line in conffiles.splitlines() if '/etc/default/' in line]
    assert dpkg_md5 == [args_before], (dpkg_md5, args_before)
    assert fleet.run(target, 'md5sum /etc/default/prometheus-node-exporter', check=True).stdout.split()[0] == args_before
    argv = fleet.run(target, 'cat /proc/$(systemctl show -p MainPID --value prometheus-node-exporter)/cmdline', check=True).stdout
    assert argv.split('\0')[1:3] == RESTARTS_FLAGS, argv

    again = fleet.playbook(PLAYBOOK, variables, extra_args=inventory_args)
    assert again.rc == 0 and ' changed=0 ' in again.stdout, again

    # Prometheus scrapes the operator's job and the role's: node_exporter (with the restart counts), the router
    def jobs_up():
        targets = api(target.address, '/api/v1/targets')['activeTargets']
        health = dict(((t['labels']['job'], t['scrapeUrl']), t['health']) for t in targets)
        wanted = {('other', 'http://localhost:9090/metrics'), ('node', 'http://localhost:9100/metrics'),
                  ('node', 'http://%s:9100/metrics' % target.address), ('router', 'http://127.0.0.1:29000/metrics')}
        return wanted <= set(k for k, v in health.items() if v == 'up') and ('sglang', 'http://%s:30000/metrics' % target.address) in health
    until('jobs other, node, router up and the sglang target listed', jobs_up)
    assert api(target.address, '/api/v1/query', query='up{job="other"}')['result'][0]['value'][1] == '1'
    groups = [group['name'] for group in api(target.address, '/api/v1/rules')['groups']]
    assert 'llmops-sglang' in groups, groups
    router_query = 'smg_http_requests_total{job="router", host="%s", path="/health"}' % target.name
    until('the router\'s smg_* metrics', lambda: api(target.address, '/api/v1/query', query=router_query)['result'])
    restarts = until('node_exporter\'s restart counts of prometheus.service',
                     lambda: api(target.address, '/api/v1/query', query='node_systemd_service_restart_total{job="node", name="prometheus.service"}')['result'])
    assert restarts, restarts

    # a flag node_exporter's ARGS sets already: refused (node_exporter would not start), nothing changed
    fleet.run(target, "sed -i 's/^ARGS=.*/ARGS=\"--collector.systemd.enable-restarts-metrics\"/' /etc/default/prometheus-node-exporter",
              check=True)
    dropin = sha256(fleet, target, '/etc/systemd/system/prometheus-node-exporter.service.d/50-llmops-sglang.conf')
    conflict = fleet.playbook(PLAYBOOK, variables, extra_args=inventory_args)
    assert conflict.rc != 0, conflict
    assert ('ARGS in /etc/default/prometheus-node-exporter already sets --collector.systemd.enable-restarts-metrics'
            in said(conflict)), conflict
    assert sha256(fleet, target, '/etc/systemd/system/prometheus-node-exporter.service.d/50-llmops-sglang.conf') == dropin
