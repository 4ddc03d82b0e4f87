# -*- coding: utf-8 -*-
"""The router fleet of tests/integration/test_router.py and test_router_claims.py: four hosts (three stand-in
workers, keyed with the router's key, and one router host), the inventory, the deploy of both roles and a client of the
router's API. Fixtures: rfleet, inventory, deployed (module scope, imported by the test files)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import http.client
import json
import os
import shutil
import tempfile

import pytest

from conftest import REPO_ROOT, require_fleet, shared_fleet_tool, Fleet
from fleet import router_wheels  # tests/ is on sys.path (conftest)

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
ROUTER_USER = 'sglang-router'
SECRETS = '/var/lib/llmops-sglang/router/sglang-router.secrets'
MAX_EXPOSURE = 3.0


def router_fleet(size):
    """Generator for a module fixture: ``size`` hosts of this group's fleet with the sglang-router wheels in its
    mirror (booted when the fleet is down or of another size, its mirror refreshed otherwise); brought down at the end
    if it was booted here."""
    require_fleet()
    tool = shared_fleet_tool()
    before = tool.status()
    was_up = before.get('status') != 'down'
    try:
        if before.get('healthy') and before.get('count', 0) == size:
            tool.refresh_mirror()
        else:
            tool.up(size)
        fleet = Fleet(tool, tool.status())
        router_wheels.add_to_mirror(os.path.join(fleet.state_dir, 'mirror'))
        yield fleet
    finally:
        if not was_up:
            tool.down()


@pytest.fixture(scope='module')
def rfleet():
    """Four hosts (three workers, one router) on this group's fleet; brought down at the end if this file booted it."""
    yield from router_fleet(FLEET_SIZE)


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
            # The router reaches the workers over the fleet network (the role's default binds 127.0.0.1); beyond
            # loopback they have a key, the router's (the router registers them with it: POST /workers api_key).
            'k26_servers': {'hosts': dict((h.name, {}) for h in workers),
                            'vars': {'sglang_host': '0.0.0.0', 'sglang_api_key': ROUTER_KEY}},
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
