# -*- coding: utf-8 -*-
"""Pipelined model distribution (sglang_model_sync, distribution: pipelined; docs/model-sync.md) on real hosts.

The first three or four hosts of the fleet get the server role's peer access (its own tasks, --tags
sglang_model_access: the sync account, its forced command, keys, known host keys), then all of them run
llmops.sglang.sglang_model_sync at once for a new version (a synthetic safetensors checkpoint, 4 x 2 MiB shards) with
each transfer capped at RATE bytes/s (rate_limit: the mirror read paced by the head, peer reads by the serving
peer's forced command), so a transfer lasts long enough to overlap and to be cut:
- a chain: the first host reads from the mirror, every next from the one before while it still receives; each
  host ends with the version whole and verified (sha256 on the host), the mirror sent every file exactly once, the
  serving hosts' journals show each receiver's `follow` of every file, and the last host of the chain finished well
  within the time waves would take (one whole copy per host);
- a middle host killed mid-file (its module and its ssh): the hosts behind it stall on it, continue from the bytes
  they have at the host before it (its journal shows a follow from a byte past zero) and finish whole and verified,
  the bytes each moved add up to the checkpoint exactly once, the mirror still sent every file once; the killed
  host's next run resumes from its partial file;
- a piece damaged on a middle host (bytes overwritten in its staging copy of a shard, on its disk, after it
  arrived and before the host behind it read them): the host behind it takes the damaged bytes, its check fails, it
  fetches that file again from the host before (which sent none of it) and publishes it whole; the middle host's own
  check fails too and it takes the file again from the host that sent it; the mirror still sent every file once;
- an interrupted run resumed: every host's module run killed mid-transfer (the module and its ssh, by pid: the
  run's processes on the hosts, which a controller's lost run leaves behind only until they die with their
  sessions), then the same run again: every host continues each file from the bytes it has (the mirror's second
  GET of the head's partial file starts at the head's byte, the hosts behind it ask their source from theirs, seen
  in its journal), no file a host had whole is asked for again, and the bytes the second run moved are exactly
  what was missing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from model_mirror import Mirror  # tests/model_mirror.py

ROOT = Path(__file__).resolve().parents[2]
MODEL = '/var/tmp/pl-model'
VERSIONS = MODEL + '.versions'
VERSION = 'v1'
DEST = VERSIONS + '/' + VERSION
STAGING = VERSIONS + '/.staging-' + VERSION
SHARDS = 4
SHARD_BYTES = 2 << 20
RATE = 512 * 1024   # bytes/s: one host's copy of the checkpoint takes about 16 s
LEFTOVERS = ('rm -rf {versions}; userdel sglang-sync; rm -rf /var/lib/llmops-sglang/model-sync /var/lib/llmops-sglang-sync '
             '/usr/local/lib/llmops-sglang-sync /etc/llmops-sglang-sync; true').format(versions=VERSIONS)
ACCESS_PLAY = '''- name: Peer access for the pipelined sync test (the server role's own tasks)
  hosts: "{hosts}"
  gather_facts: false
  vars:
    sglang_service_name: pl-sync
    sglang_model_path: {model}
    sglang_model_source: {{version: {version}, versions_dir: {versions}}}
    __sglang_sync_user: sglang-sync
    __sglang_sync_dir: /var/lib/llmops-sglang/model-sync
    __sglang_sync_key: /var/lib/llmops-sglang/model-sync/id_ed25519
    __sglang_sync_known_hosts: /var/lib/llmops-sglang/model-sync/known_hosts
    __sglang_sync_home: /var/lib/llmops-sglang-sync
    __sglang_sync_serve_dir: /usr/local/lib/llmops-sglang-sync
    __sglang_sync_roots_dir: /etc/llmops-sglang-sync/roots.d
    __sglang_sync_peers: "{{{{ ansible_play_hosts_all }}}}"
  tasks:
    - name: The role's peer access tasks (model_sync.yml's first block)
      ansible.builtin.include_role:
        name: llmops.sglang.server
        tasks_from: model_sync
      tags: [sglang_model_access]
'''


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory):
    directory = tmp_path_factory.mktemp('pl-mirror') / 'model'
    env = dict(os.environ, PYTHONPATH=str(ROOT / 'tests' / 'standin' / 'src'))
    subprocess.run([sys.executable, '-m', 'sglang_standin.make_model', str(directory), '--shards', str(SHARDS),
                    '--shard-bytes', str(SHARD_BYTES)], check=True, env=env, stdout=subprocess.DEVNULL)
    manifest = {p.name: {'size': p.stat().st_size, 'sha256': digest(p)} for p in sorted(directory.iterdir())}
    return directory, manifest


@pytest.fixture(scope='module')
def hosts(fleet, tmp_path_factory):
    """The first 3 or 4 hosts with the role's peer access; everything it made is removed afterwards."""
    chosen = fleet.hosts[:4]
    assert len(chosen) >= 3, 'this test needs a fleet of at least three hosts'
    play = tmp_path_factory.mktemp('pl-access') / 'access.yml'
    play.write_text(ACCESS_PLAY.format(hosts=','.join(h.name for h in chosen), model=MODEL, version=VERSION,
                                       versions=VERSIONS))
    try:
        done = fleet.playbook(play, extra_args=['--tags', 'sglang_model_access'], timeout=900)
        assert done.rc == 0, done
        yield chosen
    finally:
        for host in chosen:
            fleet.run(host, LEFTOVERS)


@pytest.fixture
def mirror(fleet, hosts, checkpoint):
    server = Mirror(checkpoint[0], sorted(set(urlsplit(h.mirror_url).hostname for h in hosts)))
    try:
        yield server
    finally:
        server.stop()


def fresh(fleet, hosts):
    for host in hosts:
        fleet.run(host, 'rm -rf %s' % VERSIONS, check=True)


def module_args(hosts, host, manifest, mirror, url_host, **more):
    args = {'dest': DEST, 'version': VERSION, 'manifest': manifest, 'host': host.name,
            'mirror': 'http://%s:%d' % (url_host, mirror.port), 'distribution': 'pipelined', 'rate_limit': RATE,
            'peers': [{'name': h.name, 'address': h.address, 'have': False} for h in hosts]}
    args.update(more)
    return args


def run_module(fleet, host, args, out):
    started = time.monotonic()
    done = fleet.ansible(host.name, 'llmops.sglang.sglang_model_sync', args, timeout=600)
    try:
        # the ad hoc callback prints HOST | STATE => the result, as JSON or YAML (callback_result_format)
        result = yaml.safe_load(done.stdout.split(' => ', 1)[1])
        assert isinstance(result, dict)
    except (IndexError, ValueError, AssertionError, yaml.YAMLError):
        result = {'failed': True, 'msg': str(done)}
    result['wall'] = time.monotonic() - started
    out[host.name] = result


def run_all(fleet, hosts, manifest, mirror, per_host=None, **more):
    """All hosts at once, as Ansible's forks would: {host: result (with wall seconds)}; per_host: {name: {option:
    value}} over `more` for one host."""
    out = {}
    threads = [threading.Thread(target=run_module, args=(fleet, h, module_args(
        hosts, h, manifest, mirror, urlsplit(h.mirror_url).hostname, **dict(more, **(per_host or {}).get(h.name, {}))),
        out)) for h in hosts]
    for thread in threads:
        thread.start()
    return threads, out


def assert_whole_and_verified(fleet, host, manifest):
    listing = fleet.run(host, 'cd %s && test -f .llmops-model.json && sha256sum %s' % (
        DEST, ' '.join(sorted(manifest))), check=True).stdout
    got = dict(reversed(line.split()) for line in listing.splitlines())
    assert got == {name: entry['sha256'] for name, entry in manifest.items()}, (host.name, listing)


def assert_mirror_sent_every_file_once(mirror, manifest):
    assert sorted(mirror.sent) == sorted(manifest), mirror.sent
    for name, entry in manifest.items():
        assert mirror.sent[name] == [(0, entry['size'])], (name, mirror.sent[name])


def follows(fleet, host, since):
    """[(file, from byte)] of the follow requests host's forced command served since the epoch second `since`."""
    text = fleet.run(host, 'journalctl --since @%d --no-pager -o cat -t llmops-sglang-sync-serve; true' % since).stdout
    return [(os.path.basename(m.group(1)), int(m.group(2)))
            for m in re.finditer(r'follow (\S+) from byte (\d+) to \d+', text)]


def test_a_chain_brings_every_file_to_every_host_at_once_with_one_mirror_read(fleet, hosts, checkpoint, mirror):
    _directory, manifest = checkpoint
    total = sum(e['size'] for e in manifest.values())
    fresh(fleet, hosts)
    since = int(time.time()) - 1
    threads, results = run_all(fleet, hosts, manifest, mirror)
    for thread in threads:
        thread.join()
    names = [h.name for h in hosts]
    for index, host in enumerate(hosts):
        result = results[host.name]
        assert not result.get('failed'), (host.name, result.get('msg'))
        assert result['state'] == 'synced' and result['wave'] == index and result['fallback'] == '', result
        assert result['source'] == ('mirror' if index == 0 else names[index - 1]), result
        assert result['transferred_bytes'] == {result['source']: total}, result
        assert_whole_and_verified(fleet, host, manifest)
    assert_mirror_sent_every_file_once(mirror, manifest)
    # each host but the last served its successor every file, from byte 0 (the observation, not an absence)
    for host in hosts[:-1]:
        assert sorted(follows(fleet, host, since)) == sorted((name, 0) for name in manifest), host.name
    assert not follows(fleet, hosts[-1], since)
    # pipelined, not in turn: one copy takes total/RATE s (paced); in turn the last host would need len(hosts) copies
    # (all started at the same moment: `wall` is when each host's run returned; in turn, the last host would return
    # (hosts - 1) copies after the first, at least 2 x 16 s; pipelined, within about one link's delay of it)
    one_copy = total / float(RATE)
    assert results[names[0]]['seconds'] >= 0.9 * one_copy, results[names[0]]
    walls = {n: round(results[n]['wall'], 1) for n in names}
    assert walls[names[-1]] - walls[names[0]] < 1.5 * one_copy, (one_copy, walls)


def test_a_middle_host_killed_mid_file_is_routed_around_and_the_hosts_behind_resume(fleet, hosts, checkpoint, mirror):
    _directory, manifest = checkpoint
    total = sum(e['size'] for e in manifest.values())
    cut_file = sorted(manifest)[1]
    middle = hosts[1]
    fresh(fleet, hosts)
    since = int(time.time()) - 1
    threads, results = run_all(fleet, hosts, manifest, mirror, timeout=8)
    try:
        deadline = time.monotonic() + 120
        while True:
            size = fleet.run(middle, 'stat -c %%s %s/%s 2>/dev/null || echo 0' % (STAGING, cut_file)).stdout.strip()
            if int(size or 0) >= 256 * 1024:
                break
            assert time.monotonic() < deadline, 'the middle host never got 256 KiB of %s' % cut_file
            time.sleep(0.2)
        # the middle host dies mid-file: its module (the parent of the ssh it reads with; Ansible's pipelining
        # leaves no module name on the command line) and that ssh, by pid (no failure note is written)
        # (the ssh that reads is a client of the run's shared connection; its master, re-parented to PID 1, keeps
        # the first request's command line: killed too, its parent is not)
        killed = fleet.run(middle, 'for p in $(pgrep -f "[f]ollow [0-9]+ [0-9]+ "); do '
                                   'pp=$(ps -o ppid= -p $p | tr -d " "); [ "$pp" = 1 ] && pp=; '
                                   'kill -KILL $pp $p && echo $pp $p; done',
                           check=True).stdout.split()
        assert killed, 'nothing to kill on the middle host'
    finally:
        for thread in threads:
            thread.join()
    assert results[middle.name].get('module_stderr', '').strip() == 'Killed', results[middle.name]
    assert_mirror_sent_every_file_once(mirror, manifest)
    for host in [hosts[0]] + list(hosts[2:]):
        result = results[host.name]
        assert not result.get('failed'), (host.name, result.get('msg'))
        assert_whole_and_verified(fleet, host, manifest)
        # every byte arrived once: the hosts behind the killed one continued from what they had, not from zero
        assert sum(result['transferred_bytes'].values()) == total, (host.name, result['transferred_bytes'])
    behind = results[hosts[2].name]
    assert behind['fallback'].startswith('%s: ' % middle.name) and 'stalled' in behind['fallback'], behind['fallback']
    assert behind['transferred_bytes'].get(middle.name, 0) > 0 and behind['transferred_bytes'].get(hosts[0].name, 0) > 0
    # where it gave up on the killed host (its fallback says FILE at byte N), the first host served it from byte N
    given_up = re.search(r'\((\S+) at byte (\d+)\)', behind['fallback'])
    assert given_up and int(given_up.group(2)) > 0, behind['fallback']
    served = follows(fleet, hosts[0], since)
    assert (given_up.group(1), int(given_up.group(2))) in served, (behind['fallback'], served)
    assert all(results[h.name]['source'] != 'mirror' for h in hosts[2:])

    # the killed host's next run resumes its partial file (now from a host that has the version whole)
    had = int(fleet.run(middle, 'cat %s/* 2>/dev/null | wc -c' % STAGING, check=True).stdout.strip() or 0)
    assert had > 0
    again = {}
    run_module(fleet, middle, module_args(hosts, middle, manifest, mirror, urlsplit(middle.mirror_url).hostname,
                                          peers=[{'name': h.name, 'address': h.address, 'have': h is not middle}
                                                 for h in hosts]), again)
    result = again[middle.name]
    assert not result.get('failed'), result.get('msg')
    assert result['source'] == hosts[0].name and sum(result['transferred_bytes'].values()) == total - had, result
    assert_whole_and_verified(fleet, middle, manifest)
    assert_mirror_sent_every_file_once(mirror, manifest)


def safetensors_names(manifest):
    return [name for name in sorted(manifest) if name.endswith('.safetensors')]


def test_a_piece_damaged_on_a_middle_host_is_fetched_again_from_another_source(fleet, hosts, checkpoint, mirror):
    _directory, manifest = checkpoint
    total = sum(e['size'] for e in manifest.values())
    head, middle, last = hosts[:3]
    damaged = safetensors_names(manifest)[0]
    size = manifest[damaged]['size']
    at = size - 4096                     # the shard's data, not its header: only the sha256 tells
    fresh(fleet, hosts[:3])
    since = int(time.time()) - 1
    # On the middle host, the moment its copy of the shard is whole: 4 KiB overwritten in place (same inode, as a
    # disk or memory fault would leave it), before the last host, reading at half the rate, got there.
    script = ('f=%s/%s; for i in $(seq 1200); do [ "$(stat -c %%s $f 2>/dev/null || echo 0)" -ge %d ] && break; '
              'sleep 0.05; done; head -c 4096 /dev/urandom | dd of=$f bs=4096 seek=%d oflag=seek_bytes conv=notrunc '
              'status=none && echo spoiled' % (STAGING, damaged, size, at))
    spoiled = {}
    spoil = threading.Thread(target=lambda: spoiled.update(out=fleet.run(middle, script, timeout=120).stdout))
    spoil.start()
    time.sleep(1)
    threads, results = run_all(fleet, hosts[:3], manifest, mirror, rate_limit=2 * RATE,
                               per_host={last.name: {'rate_limit': RATE // 2}})
    for thread in threads + [spoil]:
        thread.join()
    assert spoiled.get('out', '').strip() == 'spoiled', spoiled
    for host in (head, middle, last):
        result = results[host.name]
        assert not result.get('failed'), (host.name, result.get('msg'))
        assert_whole_and_verified(fleet, host, manifest)
    assert_mirror_sent_every_file_once(mirror, manifest)
    # the last host took the damaged bytes from the middle one, found them bad and took the file from the head
    assert results[last.name]['refetched'] == ['%s from %s (it failed its check with bytes from %s)' % (
        damaged, head.name, middle.name)], results[last.name]
    assert results[last.name]['transferred_bytes'] == {middle.name: total, head.name: size}, results[last.name]
    # the middle host's own copy was the damaged one: it took the file again from the head, which had sent it
    assert results[middle.name]['refetched'] == ['%s from %s (it failed its check with bytes from %s)' % (
        damaged, head.name, head.name)], results[middle.name]
    assert not results[head.name].get('refetched'), results[head.name]
    # the head served the shard from byte 0 three times: the middle's first read, its refetch and the last's
    assert follows(fleet, head, since).count((damaged, 0)) == 3, follows(fleet, head, since)


def staged(fleet, host):
    """{file: bytes} of the host's staging directory."""
    text = fleet.run(host, 'cd %s 2>/dev/null && stat -c "%%n %%s" * 2>/dev/null; true' % STAGING).stdout
    return dict((name, int(size)) for name, size in (line.rsplit(' ', 1) for line in text.splitlines() if ' ' in line))


KILL_RUN = ('for p in $(pgrep -x python3); do pp=$(ps -o ppid= -p $p | tr -d " "); '
            'case "$(tr "\\0" " " < /proc/$pp/cmdline 2>/dev/null)" in *"python3 && sleep 0"*) '
            'kids=$(pgrep -P $p | tr "\\n" " "); kill -KILL $p $kids && echo $p $kids;; esac; done')


def test_an_interrupted_run_resumes_on_every_host_from_its_bytes(fleet, hosts, checkpoint, mirror):
    _directory, manifest = checkpoint
    total = sum(e['size'] for e in manifest.values())
    chain = hosts[:3]
    fresh(fleet, chain)
    # At half the test's rate (8 s a shard, 32 s for the head's whole copy): the cut below needs the last host at a
    # third while the head is inside a shard, and each check is two ssh calls. At RATE the head's windows were 1.75 s
    # of every 4 s and only one or two were left once the last host had its third: in a loaded make test (stop 46)
    # the checks missed them, the head finished, and the loop waited out its deadline.
    threads, results = run_all(fleet, chain, manifest, mirror, timeout=8, rate_limit=RATE // 2)
    try:
        deadline = time.monotonic() + 120
        while True:
            # cut when the last host has a third of it and the head is inside a shard (its Range resume is seen). The
            # head is read last, just before its kill, and must be at least 1 MiB (4 s at this rate) from its shard's
            # end: in a loaded make test 640 KiB at RATE (1.25 s) was once not enough, the head finished its shard
            # before the kill reached it and no host had a partial file.
            last = sum(staged(fleet, chain[-1]).values())
            if last >= total // 3:
                head = staged(fleet, chain[0])
                if any(128 * 1024 <= head.get(n, 0) <= manifest[n]['size'] - 1024 * 1024
                       for n in safetensors_names(manifest)):
                    break
            # a run that ended before the cut can never be cut: say so now, not after the deadline
            assert any(thread.is_alive() for thread in threads), (
                'every host finished before the cut (the last host had %d of %d bytes): %r' % (last, total, results))
            assert time.monotonic() < deadline, 'the last host never got a third of the checkpoint'
            time.sleep(0.2)
        # the run cut on every host at once: each host's module (the python3 Ansible's pipelining started: its
        # parent is `sh -c '/usr/bin/python3 && sleep 0'`) and its children (the ssh it reads with), by pid; the
        # head first (chain's order)
        killed = dict((h.name, fleet.run(h, KILL_RUN, check=True).stdout.split()) for h in chain)
        assert all(killed.values()), killed
    finally:
        for thread in threads:
            thread.join()
    for host in chain:
        assert results[host.name].get('module_stderr', '').strip() == 'Killed', (host.name, results[host.name])
    had = dict((h.name, staged(fleet, h)) for h in chain)
    first_gets = dict((name, list(sent)) for name, sent in mirror.sent.items())
    partial = dict((h.name, [n for n, got in had[h.name].items() if 0 < got < manifest[n]['size']]) for h in chain)
    assert all(had[h.name] for h in chain) and any(partial.values()), had
    since = int(time.time()) - 1
    threads, results = run_all(fleet, chain, manifest, mirror, rate_limit=2 * RATE)
    for thread in threads:
        thread.join()
    names = [h.name for h in chain]
    for index, host in enumerate(chain):
        result = results[host.name]
        assert not result.get('failed'), (host.name, result.get('msg'))
        assert_whole_and_verified(fleet, host, manifest)
        # every host moved exactly what it lacked: nothing it had was read again, from anyone
        kept = sum(had[host.name].values())
        assert sum(result['transferred_bytes'].values()) == total - kept, (host.name, had[host.name], result)
        if index:
            # its source saw it ask each file from the bytes it had (a partial file from past zero), and never a
            # file it had whole
            want = sorted((n, had[host.name].get(n, 0)) for n in manifest
                          if had[host.name].get(n, 0) < manifest[n]['size'])
            assert sorted(follows(fleet, chain[index - 1], since)) == want, (host.name, had[host.name])
            assert result['source'] == names[index - 1], result
    # the mirror: in the second run one GET per file the head lacked, from the head's byte (Range) -- the files it
    # had whole not at all; over both runs no file from byte 0 twice
    head = had[names[0]]
    second = dict((name, sent[len(first_gets.get(name, [])):]) for name, sent in mirror.sent.items())
    for name, entry in manifest.items():
        got = head.get(name, 0)
        starts = [start for start, _count in second.get(name, [])]
        assert starts == ([] if got == entry['size'] else [got]), (name, got, mirror.sent[name])
        assert [start for start, _count in mirror.sent[name]].count(0) == 1, (name, mirror.sent[name])
    assert partial[names[0]] and all(head[n] > 0 for n in partial[names[0]]), head
