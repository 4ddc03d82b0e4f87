# -*- coding: utf-8 -*-
"""sglang_model_source on three real systemd hosts: one mirror, peers serve the rest, a resumed transfer.

Three hosts serve instance sy-k26 from an old checkpoint. A mirror started by this test on the controller (one
HTTP server per host's outer address, one record of what it sent) holds a new version: a small synthetic
safetensors checkpoint (real framing, 4 x 1 MiB shards). The role is asked to move all three to it:
- check mode on the first host reports what it would fetch and fetches nothing;
- the mirror cuts the first host's transfer of one shard short: the role fails, the old server serves on, the
  partial file stays;
- all three at once, the role's default distribution (pipelined, a chain): the first host resumes from the byte it
  had (Range), the second follows the first's files as they arrive, the third the second's, so the mirror sent
  every file exactly once in total; each host verified the version, its unit loads that version's
  directory, its last-known-good copy names it, and its old server answered every poll until its own restart.
Peer access (docs/model-sync.md, "Security"), on the same hosts:
- each host of the chain reads from the one before it as the sync account with keys the role made on each host; no
  host's sync key is in root's authorized_keys anywhere, and each source's journal shows that login and one follow
  of every file as the sync account, none as root from a peer;
- the sync account cannot read outside the versions directory (another path, "..", a symlink out of it), cannot
  run a command or a shell, and owns and can write nothing of the role's;
- a peer whose host key does not match the known one (its sshd presents another key) or is not in known_hosts is
  refused before anything is read from it: with no mirror the host fails naming the peer and why, with a mirror
  it falls back to the mirror, and the peer's journal shows no login from that host.
- waves (`distribution: waves`) read a peer's files with its unpaced `read`; with `rate_limit` through its `follow`,
  which the peer paces (the transfer takes at least the bytes over the rate).
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
import yaml

from model_mirror import Mirror  # tests/model_mirror.py (tests/ is on sys.path through tests/conftest.py)

PLAYBOOK = 'tests/integration/playbooks/model_sync.yml'
UNIT = 'sy-k26.service'
OLD_MODEL = '/models/sy-old'
NEW_MODEL = '/models/sy-k26'
VERSION = 'v1'
VERSION_DIR = NEW_MODEL + '.versions/' + VERSION
VERSIONS = NEW_MODEL + '.versions'
SYNC_USER = 'sglang-sync'
SYNC_DIR = '/var/lib/llmops-sglang/model-sync'
SYNC_KEY = SYNC_DIR + '/id_ed25519'
KNOWN_HOSTS = SYNC_DIR + '/known_hosts'
SYNC_PATHS = '/var/lib/llmops-sglang-sync /usr/local/lib/llmops-sglang-sync /etc/llmops-sglang-sync'
IMPOSTOR = '/etc/ssh/sshd_config.d/zz-sy-impostor.conf'
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
    try:
        for host in hosts:
            venv = standin_venv(host)
            fleet.run(host, 'rm -rf {new} {new}.versions && '
                            '(test -f {old}/config.json || {venv}/bin/python -m sglang_standin.make_model {old} '
                            '--shards 4 >/dev/null)'.format(new=NEW_MODEL, old=OLD_MODEL, venv=venv), check=True)
        result, outcomes = apply(fleet, hosts, tmp_path_factory.mktemp('old'), sglang_model_path=OLD_MODEL,
                                 sglang_venv=venv)
        assert all(o['failure'] is None for o in outcomes.values()), result
        run_all(fleet, hosts, 'rm -f {log}; systemd-run --unit sy-poll --quiet python3 -c {code} {log}'.format(
            log=POLL_LOG, code=shlex.quote(POLLER)))
        yield hosts, venv
    finally:
        for host in hosts:
            fleet.run(host, 'systemctl stop sy-poll sy-k26 2>/dev/null; systemctl reset-failed 2>/dev/null; '
                            'rm -f /etc/systemd/system/{unit} /etc/sglang/sy-k26.env {log} {impostor} /etc/ssh/sy_impostor_key* '
                            '/var/lib/prometheus/node-exporter/sy-k26.prom; systemctl restart ssh; '
                            'rm -rf {old} {new} {new}.versions /var/lib/sglang/sy-k26 {sync_dir} {sync_paths}; '
                            'userdel {user}; systemctl daemon-reload; true'.format(
                                unit=UNIT, log=POLL_LOG, old=OLD_MODEL, new=NEW_MODEL, impostor=IMPOSTOR,
                                sync_dir=SYNC_DIR, sync_paths=SYNC_PATHS, user=SYNC_USER))


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
            'sglang_model_source': {'version': VERSION, 'peer_wait': 300,
                                    'mirror': "http://{{ fleet_mirror_url | urlsplit('hostname') }}:%d" % mirror.port}}


def invocation(fleet, host):
    out = fleet.run(host, 'systemctl show -p InvocationID,ActiveState %s' % UNIT, check=True).stdout
    assert 'ActiveState=active' in out, out
    return out


def polls(fleet, host):
    lines = fleet.run(host, 'cat %s' % POLL_LOG, check=True).stdout.split()
    return [(float(lines[i]), lines[i + 1]) for i in range(0, len(lines) - 1, 2) if lines[i + 1] in ('ok', 'fail')]


def clock(fleet, host):
    return int(fleet.run(host, 'date +%s', check=True).stdout)


def journal(fleet, host, since):
    """sshd's logins and the serving script's lines on a host since a time of its clock."""
    return fleet.run(host, 'journalctl --since @%d --no-pager -o short | grep -E "sshd|llmops-sglang-sync-serve"; true'
                     % since, check=True).stdout


def peer_ssh(fleet, client, server, request, more=()):
    """From ``client`` as root: the sync account's ssh to ``server``, as the module makes it (its key, known_hosts)."""
    argv = ['ssh', '-i', SYNC_KEY, '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=yes', '-o',
            'UserKnownHostsFile=' + KNOWN_HOSTS, '-o', 'GlobalKnownHostsFile=/dev/null']
    argv += list(more) + ['-l', SYNC_USER, server.address] + ([request] if request is not None else [])
    return fleet.run(client, shlex.join(argv) + ' </dev/null')


def run_module(fleet, host, args):
    """llmops.sglang.sglang_model_sync run ad hoc on a host -> its result (failed ones too)."""
    result = fleet.ansible(host.name, 'llmops.sglang.sglang_model_sync', args, timeout=300)
    assert ' => ' in result.stdout, result
    head, body = result.stdout.split(' => ', 1)
    out = yaml.safe_load(body)  # the result, as the callback prints it (YAML or JSON)
    out['failed'] = 'FAILED!' in head
    return out


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

    # All three at once, the role's default distribution (pipelined, a chain): the first resumes from the mirror,
    # the second follows the first's files as they arrive there, the third the second's.
    since = {h.name: clock(fleet, h) for h in hosts}
    result, outcomes = apply(fleet, hosts, tmp_path, **sync)
    assert all(o['failure'] is None for o in outcomes.values()), result
    rows = {name: (o['sync']['source'], o['sync']['wave']) for name, o in outcomes.items()}
    assert rows == {hosts[0].name: ('mirror', 0), hosts[1].name: (hosts[0].name, 1), hosts[2].name: (hosts[1].name, 2)}, rows
    resumed = [f for f in outcomes[first.name]['sync']['files'] if f['file'] == CUT_FILE][0]
    assert resumed['action'] == 'resume' and resumed['offset'] == CUT_AT, resumed
    # the resumed request began where the cut one ended: the mirror sent every byte of every file exactly once
    assert mirror.sent[CUT_FILE] == [(0, CUT_AT), (CUT_AT, manifest[CUT_FILE]['size'] - CUT_AT)]
    for name, entry in manifest.items():
        assert sum(n for _start, n in mirror.sent[name]) == entry['size'], (name, mirror.sent[name])
    for source, host in zip(hosts, hosts[1:]):
        assert outcomes[host.name]['sync']['transferred_bytes'] == {
            source.name: sum(e['size'] for e in manifest.values())}, outcomes[host.name]['sync']

    for host in hosts:
        out = outcomes[host.name]
        # verified: the preflight gate judged the version directory, with the digests the sync recorded
        gate = out['preflight'][UNIT]['checkpoint']
        assert gate['status'] == 'ok', gate
        assert out['gates']['cached'] == len(manifest) and out['gates']['hashed'] == 0, out['gates']
        listing = fleet.run(host, 'ls -A {d}; systemctl show -p ExecStart {u}; cat /var/lib/llmops-sglang/server/sy-k26/last-good/unit; '
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

    peer_access_is_the_sync_account_only(fleet, hosts, manifest, since)
    the_sync_account_reads_only_the_model_tree(fleet, hosts[0], hosts[1])
    unknown_or_changed_host_keys_are_refused(fleet, hosts, mirror, manifest)
    a_versions_directory_the_service_user_could_change_is_refused(fleet, hosts[2], mirror, manifest)


def peer_access_is_the_sync_account_only(fleet, hosts, manifest, since):
    """Each host has its own sync key, authorized on its peers for the sync account only, never for root; the peers
    logged in to the first host as that account and read every file from it; no root login from a peer anywhere."""
    keys = {h.name: fleet.run(h, 'ssh-keygen -y -f %s' % SYNC_KEY, check=True).stdout.split()[1] for h in hosts}
    assert len(set(keys.values())) == len(hosts), keys
    for host in hosts:
        out = fleet.run(host, 'stat -c "%U:%G %a" {d} {k}; cat /root/.ssh/authorized_keys; echo ===; '
                              'cat /var/lib/llmops-sglang-sync/.ssh/authorized_keys'.format(d=SYNC_DIR, k=SYNC_KEY),
                        check=True).stdout
        modes, rest = out.split('\n', 2)[:2], out.split('\n', 2)[2]
        assert modes == ['root:root 700', 'root:root 600'], (host.name, modes)
        root_keys, sync_keys = rest.split('===\n')
        assert not any(key in root_keys for key in keys.values()), (host.name, 'a sync key is in root\'s authorized_keys')
        for other in hosts:
            line = 'restrict,command="/usr/bin/python3 -I /usr/local/lib/llmops-sglang-sync/llmops_sglang_sync_serve.py" ssh-ed25519 %s ' \
                   'llmops-sglang-sync:%s' % (keys[other.name], other.name)
            assert (line in sync_keys) == (other is not host), (host.name, other.name, sync_keys)
    for host in hosts:
        log = journal(fleet, host, since[host.name])
        for peer in hosts:
            assert 'Accepted publickey for root from %s ' % peer.address not in log, (host.name, log)
    for source, peer in zip(hosts, hosts[1:]):
        # not vacuous: the logins were there to be seen, as the sync account, and each file was followed once, from
        # byte 0, from the host before it in the chain
        log = journal(fleet, source, since[source.name])
        assert 'Accepted publickey for %s from %s ' % (SYNC_USER, peer.address) in log, log
        for name in manifest:
            assert log.count('follow %s/%s from byte 0 to ' % (VERSION_DIR, name)) == 1, (name, log)


def the_sync_account_reads_only_the_model_tree(fleet, first, second):
    """As the second host's sync key on the first host: one file of the version is served (the control); another
    path, "..", a symlink out of the version, a hidden or staging directory, a command, a shell, a terminal are
    refused with nothing on stdout; the account owns nothing and can write nothing of the role's."""
    served = peer_ssh(fleet, second, first, 'read 0 %s/config.json' % VERSION_DIR)
    assert served.returncode == 0 and served.stdout == fleet.run(
        first, 'cat %s/config.json' % VERSION_DIR, check=True).stdout and served.stdout, served
    fleet.run(first, 'ln -s /etc/shadow {v}/escape && ln -s / {v}/up && mkdir -p {s} && cp {v}/config.json {s}/'.format(
        v=VERSION_DIR, s=VERSIONS + '/.staging-x'), check=True)
    try:
        for request, why in [
                ('cat /etc/shadow', 'not a request this account serves'),
                ('read 0 /etc/shadow', 'outside the versions directories'),
                ('read 0 %s/../../../etc/shadow' % VERSION_DIR, 'not normalized'),
                ('read 0 %s/escape' % VERSION_DIR, 'symlinks below %s are not followed' % VERSIONS),
                ('read 0 %s/up/etc/shadow' % VERSION_DIR, 'symlinks below %s are not followed' % VERSIONS),
                ('read 0 %s/.staging-x/config.json' % VERSIONS, 'staging and hidden directories are not served'),
                ('read 0 %s/config.json; sh' % VERSION_DIR, 'not a request this account serves'),
                ('sh', 'not a request this account serves'),
                (None, 'no command given')]:
            out = peer_ssh(fleet, second, first, request)
            assert out.returncode == 2 and out.stdout == '' and why in out.stderr, (request, out)
        # a terminal: `restrict` refuses the pty, and ssh -tt gives up (no shell, no forced command either)
        shell = peer_ssh(fleet, second, first, None, more=['-tt'])
        assert shell.returncode == 255 and shell.stdout == '' and 'PTY allocation request failed' in shell.stderr, shell
    finally:
        fleet.run(first, 'rm -rf {v}/escape {v}/up {s}'.format(v=VERSION_DIR, s=VERSIONS + '/.staging-x'), check=True)
    out = fleet.run(first, 'find / -xdev -user {u} 2>/dev/null; for p in {vs} {v} {v}/config.json {paths} '
                           '/var/lib/llmops-sglang-sync/.ssh /var/lib/llmops-sglang-sync/.ssh/authorized_keys '
                           '/etc/llmops-sglang-sync/roots.d /usr/local/lib/llmops-sglang-sync/llmops_sglang_sync_serve.py; '
                           'do runuser -u {u} -- test -w $p && echo writable $p; done; '
                           'runuser -u {u} -- cat {key} >/dev/null 2>&1 && echo key readable; '
                           'runuser -u {u} -- test -r {v}/config.json && echo control readable; true'.format(
                               u=SYNC_USER, vs=VERSIONS, v=VERSION_DIR, paths=SYNC_PATHS, key=SYNC_KEY),
                    check=True).stdout
    assert out.strip() == 'control readable', out


def unknown_or_changed_host_keys_are_refused(fleet, hosts, mirror, manifest):
    """The first host's sshd presents another key than the one the role read from its /etc/ssh: the third host,
    sent to it, is refused by ssh before anything is read (no mirror: fails naming the peer; a mirror: falls back
    to it). Then, the first's key restored, the second host with a known_hosts that lacks the first does not even
    connect; with the role's known_hosts it reads from the first (the control)."""
    first, second, third = hosts
    total = sum(e['size'] for e in manifest.values())
    v2 = VERSIONS + '/v2'
    fleet.run(first, 'cp -a {v} {v2}'.format(v=VERSION_DIR, v2=v2), check=True)  # the same files, a second version

    def args(host, **more):
        return dict({'dest': v2, 'version': 'v2', 'manifest': manifest, 'host': host.name, 'peer_wait': 30,
                     'peers': [{'name': first.name, 'address': first.address, 'have': True},
                               {'name': host.name, 'address': host.address, 'have': False}]}, **more)

    fleet.run(first, 'ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/sy_impostor_key && echo "HostKey /etc/ssh/sy_impostor_key" '
                     '> {c} && systemctl restart ssh'.format(c=IMPOSTOR), check=True)
    try:
        since = clock(fleet, first)
        alone = run_module(fleet, third, args(third))
        assert alone.get('failed') and first.name in alone['msg'] and \
            'host key does not match the known one' in alone['msg'], alone
        sent_before = {name: list(mirror.sent.get(name, [])) for name in manifest}
        url = 'http://%s:%d' % (urlsplit(third.mirror_url).hostname, mirror.port)
        fell_back = run_module(fleet, third, args(third, mirror=url))
        assert not fell_back.get('failed') and fell_back['source'] == 'mirror', fell_back
        # the module's default (pipelined): "PEER: ssh ADDRESS follow FILE: its host key does not match ... (FILE at
        # byte 0)", then the rest from the mirror
        assert fell_back['fallback'].startswith(first.name + ': ') and \
            'its host key does not match the known one' in fell_back['fallback'], fell_back
        assert fell_back['transferred_bytes'] == {'mirror': total}, fell_back
        for name, entry in manifest.items():
            assert mirror.sent[name] == sent_before[name] + [(0, entry['size'])], name
        log = journal(fleet, first, since)
        # the first host saw the third connect (twice, one per run) and close before logging in: nothing was read
        assert log.count('Connection closed by %s ' % third.address) >= 2, log
        assert 'Accepted publickey for %s from %s ' % (SYNC_USER, third.address) not in log, log
        assert 'read %s/' % v2 not in log and 'follow %s/' % v2 not in log, log
    finally:
        fleet.run(first, 'rm -f {c} /etc/ssh/sy_impostor_key*; systemctl restart ssh'.format(c=IMPOSTOR), check=True)

    since = clock(fleet, first)
    fleet.run(second, 'grep -v "^[^#]*{n}[, ]" {k} > {k}.sy-test; chmod 0600 {k}.sy-test'.format(
        n=first.name, k=KNOWN_HOSTS), check=True)
    try:
        unknown = run_module(fleet, second, args(second, known_hosts=KNOWN_HOSTS + '.sy-test'))
    finally:
        fleet.run(second, 'rm -f %s.sy-test' % KNOWN_HOSTS, check=True)
    assert unknown.get('failed') and first.name in unknown['msg'] and 'host key is not in' in unknown['msg'] and \
        'not connected to' in unknown['msg'], unknown
    assert second.address not in journal(fleet, first, since)
    known = run_module(fleet, second, args(second))
    assert not known.get('failed') and known['source'] == first.name, known
    assert known['transferred_bytes'] == {first.name: total}, known
    log = journal(fleet, first, since)
    assert 'Accepted publickey for %s from %s ' % (SYNC_USER, second.address) in log, log

    # waves: the peer's `read` (not paced) without a rate limit; with one, its `follow` of the complete files, which
    # the peer paces: the transfer takes at least the bytes over the rate (a lower bound: load only adds to it)
    rate = total // 3
    for version, more in (('v3', {}), ('v4', {'rate_limit': rate})):
        fleet.run(first, 'cp -a {v} {vs}/{n}'.format(v=VERSION_DIR, vs=VERSIONS, n=version), check=True)
        since = clock(fleet, first)
        waves = run_module(fleet, second, dict(args(second), dest=VERSIONS + '/' + version, version=version,
                                               distribution='waves', **more))
        assert not waves.get('failed') and waves['source'] == first.name, waves
        assert waves['transferred_bytes'] == {first.name: total}, waves
        log = journal(fleet, first, since)
        reads = log.count('read %s/%s/' % (VERSIONS, version))
        follows = log.count('follow %s/%s/' % (VERSIONS, version))
        assert (reads, follows) == ((len(manifest), 0) if not more else (0, len(manifest))), (version, log)
        if more:
            assert waves['seconds'] >= 0.9 * total / rate, waves


def a_versions_directory_the_service_user_could_change_is_refused(fleet, host, mirror, manifest):
    """The service user (sglang) given the versions directory: the sync refuses to write through it, before anything
    is fetched, naming the path; given back to root, the same sync runs (the control)."""
    url = 'http://%s:%d' % (urlsplit(host.mirror_url).hostname, mirror.port)
    args = {'dest': VERSIONS + '/v3', 'version': 'v3', 'manifest': manifest, 'host': host.name, 'mirror': url}
    sent = dict((name, list(mirror.sent.get(name, []))) for name in manifest)
    fleet.run(host, 'chown sglang %s' % VERSIONS, check=True)
    try:
        refused = run_module(fleet, host, args)
    finally:
        fleet.run(host, 'chown root %s' % VERSIONS, check=True)
    assert refused['failed'] and 'Refusing to write through %s (the versions directory)' % VERSIONS in refused['msg'] \
        and 'belongs to uid' in refused['msg'], refused
    assert dict((name, mirror.sent.get(name, [])) for name in manifest) == sent, 'something was fetched'
    assert fleet.run(host, 'test -e %s/.staging-v3' % VERSIONS).returncode != 0
    synced = run_module(fleet, host, args)
    assert not synced['failed'] and synced['source'] == 'mirror', synced
