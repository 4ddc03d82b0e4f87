# -*- coding: utf-8 -*-
"""sglang_model_source on three real systemd hosts: one mirror, peers serve the rest, a resumed transfer.

Three hosts serve instance sy-k26 from an old checkpoint. A mirror started by this test on the controller (one
HTTP server per host's outer address, one record of what it sent) holds a new version: a small synthetic
safetensors checkpoint (real framing, 4 x 1 MiB shards). The role is asked to move all three to it:
- check mode on the first host reports what it would fetch and fetches nothing;
- the mirror cuts the first host's transfer of one shard short: the role fails, the old server serves on, the
  partial file stays;
- all three at once: the first host resumes from the byte it had (Range), the other two are served by peers, so the
  mirror sent every file exactly once in total; each host verified the version, its unit loads that version's
  directory, its last-known-good copy names it, and its old server answered every poll until its own restart.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from model_mirror import Mirror  # tests/model_mirror.py (tests/ is on sys.path through tests/conftest.py)

PLAYBOOK = 'tests/integration/playbooks/model_sync.yml'
UNIT = 'sy-k26.service'
OLD_MODEL = '/models/sy-old'
NEW_MODEL = '/models/sy-k26'
VERSION = 'v1'
VERSION_DIR = NEW_MODEL + '.versions/' + VERSION
PEER_KEY = '/root/.ssh/sy_peer_key'
POLL_LOG = '/root/sy-poll.log'
CUT_FILE = 'model-00002-of-00004.safetensors'
CUT_AT = 300000
ROOT = Path(__file__).resolve().parents[2]

BASE = {'sglang_service_name': 'sy-k26', 'sglang_port': 30021, 'sglang_tp_size': 8,
        'sglang_env': {'SGLANG_STANDIN_PACE': '0.02', 'SGLANG_STANDIN_GPU': 'h200',
                       'SGLANG_STANDIN_STATE_DIR': '/var/lib/sglang/sy-k26'},
        'sglang_preflight_growth_interval': 0.2, 'sglang_wait': {'timeout': 300, 'stall_timeout': 120}}

POLLER = r"""
import sys, time, urllib.request
with open(sys.argv[1], 'a', buffering=1) as log:
    while True:
        try:
            urllib.request.urlopen('http://127.0.0.1:30021/health', timeout=2).read()
            log.write('%f ok\n' % time.time())
        except Exception as exc:
            log.write('%f fail %s\n' % (time.time(), type(exc).__name__))
        time.sleep(0.25)
"""


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    """The new version on the controller (the mirror's directory) and its manifest."""
    directory = tmp_path_factory.mktemp('mirror') / 'k26'
    env = dict(os.environ, PYTHONPATH=str(ROOT / 'tests' / 'standin' / 'src'))
    subprocess.run([sys.executable, '-m', 'sglang_standin.make_model', str(directory), '--shards', '4',
                    '--shard-bytes', str(1 << 20)], check=True, env=env, stdout=subprocess.DEVNULL)
    manifest = {p.name: {'size': p.stat().st_size, 'sha256': digest(p)} for p in sorted(directory.iterdir())}
    return directory, manifest


@pytest.fixture(scope='module')
def mirror(fleet, checkpoint):
    server = Mirror(checkpoint[0], [urlsplit(h.mirror_url).hostname for h in fleet.hosts[:3]])
    yield server
    server.stop()


def run_all(fleet, hosts, command):
    for host in hosts:
        fleet.run(host, command, check=True)


@pytest.fixture
def serving(fleet, standin_venv, tmp_path_factory):
    """sy-k26 serving the old checkpoint on three hosts; the hosts' peer key; a poller of each old server."""
    hosts = fleet.hosts[:3]
    assert len(hosts) == 3, 'this test needs a fleet of three hosts (LLMOPS_FLEET_SIZE=3)'
    key = Path(fleet.state_dir) / 'id_ed25519'
    try:
        for host in hosts:
            venv = standin_venv(host)
            fleet.run(host, 'install -d -m 0700 /root/.ssh && cat > {k} && chmod 0600 {k} && rm -rf {new} {new}.versions && '
                            '(test -f {old}/config.json || {venv}/bin/python -m sglang_standin.make_model {old} '
                            '--shards 4 >/dev/null)'.format(k=PEER_KEY, new=NEW_MODEL, old=OLD_MODEL, venv=venv),
                      check=True, input=key.read_text())
        result, outcomes = apply(fleet, hosts, tmp_path_factory.mktemp('old'), sglang_model_path=OLD_MODEL,
                                 sglang_venv=venv)
        assert all(o['failure'] is None for o in outcomes.values()), result
        run_all(fleet, hosts, 'rm -f {log}; systemd-run --unit sy-poll --quiet python3 -c {code} {log}'.format(
            log=POLL_LOG, code=shlex.quote(POLLER)))
        yield hosts, venv
    finally:
        for host in hosts:
            fleet.run(host, 'systemctl stop sy-poll sy-k26 2>/dev/null; systemctl reset-failed 2>/dev/null; '
                            'rm -f /etc/systemd/system/{unit} /etc/sglang/sy-k26.env {key} {log} /root/.ssh/known_hosts '
                            '/var/lib/prometheus/node-exporter/sy-k26.prom; rm -rf {old} {new} {new}.versions '
                            '/var/lib/sglang/sy-k26; systemctl daemon-reload; true'.format(
                                unit=UNIT, key=PEER_KEY, log=POLL_LOG, old=OLD_MODEL, new=NEW_MODEL))


def apply(fleet, hosts, result_dir, check=False, **overrides):
    for stale in Path(result_dir).glob('*.json'):
        stale.unlink()
    extra = dict(BASE, ms_hosts=','.join(h.name for h in hosts), ms_result_dir=str(result_dir))
    extra.update(overrides)
    result = fleet.playbook(PLAYBOOK, extra, check=check, timeout=900)
    outcomes = {}
    for host in hosts:
        path = Path(result_dir) / (host.name + '.json')
        assert path.exists(), result
        outcomes[host.name] = json.loads(path.read_text())
    return result, outcomes


def sync_vars(mirror, manifest, venv):
    return {'sglang_model_path': NEW_MODEL, 'sglang_venv': venv, 'sglang_model_manifest': manifest,
            'sglang_model_source': {'version': VERSION, 'ssh_key': PEER_KEY, 'peer_wait': 300,
                                    'mirror': "http://{{ fleet_mirror_url | urlsplit('hostname') }}:%d" % mirror.port}}


def invocation(fleet, host):
    out = fleet.run(host, 'systemctl show -p InvocationID,ActiveState %s' % UNIT, check=True).stdout
    assert 'ActiveState=active' in out, out
    return out


def polls(fleet, host):
    lines = fleet.run(host, 'cat %s' % POLL_LOG, check=True).stdout.split()
    return [(float(lines[i]), lines[i + 1]) for i in range(0, len(lines) - 1, 2) if lines[i + 1] in ('ok', 'fail')]


def test_three_hosts_one_mirror_peers_serve_an_interrupted_transfer_resumes(fleet, serving, mirror, checkpoint,
                                                                            tmp_path):
    hosts, venv = serving
    first = hosts[0]
    _directory, manifest = checkpoint
    sync = sync_vars(mirror, manifest, venv)
    old_units = {h.name: invocation(fleet, h) for h in hosts}

    # Check mode: says what it would fetch from where, fetches nothing, creates nothing.
    result, outcomes = apply(fleet, [first], tmp_path, check=True, **sync)
    out = outcomes[first.name]
    assert out['failure'] is None, result
    assert out['sync']['state'] == 'would sync' and out['sync']['source'] == 'mirror', out['sync']
    assert out['sync']['transferred_bytes'] == {'mirror': sum(e['size'] for e in manifest.values())}
    assert mirror.sent == {}
    assert fleet.run(first, 'test -e %s.versions' % NEW_MODEL).returncode != 0

    # The mirror drops the connection 300000 bytes into one shard: the host fails, the partial file stays.
    mirror.cut[CUT_FILE] = CUT_AT
    result, outcomes = apply(fleet, [first], tmp_path, **sync)
    failure = outcomes[first.name]['failure'] or ''
    assert 'Transfer of %s from mirror interrupted at %d of %d bytes' % (
        CUT_FILE, CUT_AT, manifest[CUT_FILE]['size']) in failure, result
    assert 'run again to resume' in failure
    assert invocation(fleet, first) == old_units[first.name], 'the old server was restarted by a failed sync'
    assert mirror.sent[CUT_FILE] == [(0, CUT_AT)]

    # All three at once: the first resumes from the mirror, the others get it from peers.
    result, outcomes = apply(fleet, hosts, tmp_path, **sync)
    assert all(o['failure'] is None for o in outcomes.values()), result
    rows = {name: (o['sync']['source'], o['sync']['wave']) for name, o in outcomes.items()}
    assert rows == {hosts[0].name: ('mirror', 0), hosts[1].name: (hosts[0].name, 1), hosts[2].name: (hosts[0].name, 2)}, rows
    resumed = [f for f in outcomes[first.name]['sync']['files'] if f['file'] == CUT_FILE][0]
    assert resumed['action'] == 'resume' and resumed['offset'] == CUT_AT, resumed
    # the resumed request began where the cut one ended: the mirror sent every byte of every file exactly once
    assert mirror.sent[CUT_FILE] == [(0, CUT_AT), (CUT_AT, manifest[CUT_FILE]['size'] - CUT_AT)]
    for name, entry in manifest.items():
        assert sum(n for _start, n in mirror.sent[name]) == entry['size'], (name, mirror.sent[name])
    for host in hosts[1:]:
        assert outcomes[host.name]['sync']['transferred_bytes'] == {
            hosts[0].name: sum(e['size'] for e in manifest.values())}, outcomes[host.name]['sync']

    for host in hosts:
        out = outcomes[host.name]
        # verified: the preflight gate judged the version directory, with the digests the sync recorded
        gate = out['preflight'][UNIT]['checkpoint']
        assert gate['status'] == 'ok', gate
        assert out['gates']['cached'] == len(manifest) and out['gates']['hashed'] == 0, out['gates']
        listing = fleet.run(host, 'ls -A {d}; systemctl show -p ExecStart {u}; cat /var/lib/sglang/sy-k26/last-good/unit; '
                                  'curl -s http://127.0.0.1:30021/v1/models || python3 -c "import urllib.request; '
                                  'print(urllib.request.urlopen(\'http://127.0.0.1:30021/v1/models\').read().decode())"'
                            .format(d=VERSION_DIR, u=UNIT), check=True).stdout
        assert '.llmops-model.json' in listing and CUT_FILE in listing, listing
        assert listing.count('--model-path %s' % VERSION_DIR) >= 2, listing  # the running unit and last-good's copy
        assert '"id": "%s"' % NEW_MODEL in listing or '"id":"%s"' % NEW_MODEL in listing, listing
        # the old server answered every poll until the version was there (its own restart came after)
        synced_at = float(fleet.run(host, "stat -c %%.6Y %s/.llmops-model.json" % VERSION_DIR, check=True).stdout)
        before = [state for at, state in polls(fleet, host) if at < synced_at]
        assert before and 'fail' not in before, (host.name, before[-20:])
