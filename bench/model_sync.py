# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bringing the model there: sync throughput mirror vs peer, and checkpoint verification cold vs warm.

Part of `make bench` (bench/cli.py calls run_model_sync on the benchmark's fleet, page.py renders the section).
On the fleet's first two hosts, llmops.sglang.sglang_model_sync runs the way the server role runs it (`ansible HOST
-m ...`, so the figures include Ansible's own cost) on a generated checkpoint of TOTAL_MIB in SHARDS safetensors
files: the first host from an HTTP mirror on its outer address, the second from the first (ssh as the sync account,
whose forced command reads from the offset: the module's default distribution, pipelined, whose `follow` of a
version the peer has whole reads its complete files; the peer access block of the server role's tasks/model_sync.yml sets up
the account, the keys and the known host keys on both first, as for a real sync), then the second again (already
present: the marker, nothing moves). Then bench/checkpoint_verify.py's gate runs on the
controller: cold (page cache evicted, no digest cache) and warm (digests cached by size and mtime).
"""

from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from .checkpoint_verify import evict, run_gate, write_shard
from .common import COLLECTIONS, log

__metaclass__ = type  # pylint: disable=invalid-name

DEST = '/var/tmp/bench-model.versions/v1'
# What the role's peer access set-up leaves on the two hosts (removed afterwards).
SYNC_LEFTOVERS = ('userdel sglang-sync; rm -rf /var/lib/llmops-sglang/model-sync /var/lib/llmops-sglang-sync '
                  '/usr/local/lib/llmops-sglang-sync /etc/llmops-sglang-sync')
ACCESS_PLAY = '''- name: Peer access for the model sync bench (the server role's own tasks)
  hosts: "{hosts}"
  gather_facts: false
  vars:
    sglang_service_name: bench-sync
    sglang_model_path: /var/tmp/bench-model
    sglang_model_source: {{version: v1, versions_dir: /var/tmp/bench-model.versions}}
    __sglang_sync_user: sglang-sync
    __sglang_sync_dir: /var/lib/llmops-sglang/model-sync
    __sglang_sync_key: /var/lib/llmops-sglang/model-sync/id_ed25519
    __sglang_sync_known_hosts: /var/lib/llmops-sglang/model-sync/known_hosts
    __sglang_sync_home: /var/lib/llmops-sglang-sync
    __sglang_sync_serve_dir: /usr/local/lib/llmops-sglang-sync
    __sglang_sync_roots_dir: /etc/llmops-sglang-sync/roots.d
    __sglang_sync_peers: "{{{{ ansible_play_hosts_all }}}}"
  tasks:
    - name: The role's peer access tasks (model_sync.yml's first block, run alone with --tags sglang_model_access)
      ansible.builtin.include_role:
        name: llmops.sglang.server
        tasks_from: model_sync
      tags: [sglang_model_access]
'''


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *_args):
        pass


def _env():
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_HOST_KEY_CHECKING='False',
                ANSIBLE_CALLBACK_RESULT_FORMAT='json', ANSIBLE_NOCOLOR='1')


def _peer_access(inventory, work, hosts):
    """The sync account, each host's key authorized on the other, the known host keys: the role's own tasks."""
    play = os.path.join(work, 'access.yml')
    with open(play, 'w') as handle:
        handle.write(ACCESS_PLAY.format(hosts=','.join(hosts)))
    playbook = os.path.join(os.path.dirname(sys.executable), 'ansible-playbook')
    done = subprocess.run([playbook, '-i', inventory, play, '--tags', 'sglang_model_access'], env=_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    if done.returncode != 0:
        raise SystemExit('model sync bench: peer access set-up failed: %s' % done.stdout[-3000:])


def _module(inventory, host, args):
    env = _env()
    ansible = os.path.join(os.path.dirname(sys.executable), 'ansible')
    started = time.monotonic()
    done = subprocess.run([ansible, host, '-i', inventory, '-m', 'llmops.sglang.sglang_model_sync', '-a',
                           json.dumps(args)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)
    wall = time.monotonic() - started
    try:
        result = json.loads(done.stdout.split(' => ', 1)[1])
    except (IndexError, ValueError):
        raise SystemExit('model sync bench: ansible failed: %s %s' % (done.stdout[-2000:], done.stderr[-2000:]))
    if result.get('failed'):
        raise SystemExit('model sync bench: %s: %s' % (host, result.get('msg')))
    return wall, result


def run_model_sync(fleet, total_mib=256, shards=8):
    """{total_bytes, shards, sync: [{run, wall_s, transfer_s, verify_s, bytes}], verify: [{run, wall_s, seconds, hashed, cached}]}."""
    first, second = fleet.hosts[0], fleet.hosts[1]
    inventory = fleet.client.inventory
    work = tempfile.mkdtemp(prefix='bench-sync-', dir='/var/tmp')
    model = os.path.join(work, 'model')
    os.makedirs(model)
    server = None
    try:
        per = total_mib * (1 << 20) // shards
        manifest = {}
        for i in range(1, shards + 1):
            name = 'model-%05d-of-%05d.safetensors' % (i, shards)
            manifest[name] = write_shard(os.path.join(model, name), per)
        total = sum(e['size'] for e in manifest.values())
        gateway = urlsplit(first['mirror']).hostname
        server = ThreadingHTTPServer((gateway, 0), partial(_Quiet, directory=model))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        for host in (first, second):
            fleet.ssh(host, 'rm -rf %s' % os.path.dirname(DEST))
        _peer_access(inventory, work, [first['name'], second['name']])
        common = {'dest': DEST, 'version': 'v1', 'manifest': manifest,
                  'mirror': 'http://%s:%d' % (gateway, server.server_address[1])}
        peers = [{'name': first['name'], 'address': first['address'], 'have': True},
                 {'name': second['name'], 'address': second['address'], 'have': False}]
        sync = []
        for label, host, hosts in (('mirror (HTTP) -> host 1', first, []), ('peer host 1 (ssh, sync account) -> host 2', second, peers),
                                   ('already present on host 2', second, peers)):
            log('model sync: %s' % label)
            wall, result = _module(inventory, host['name'], dict(common, host=host['name'], peers=hosts))
            sync.append({'run': label, 'wall_s': round(wall, 2), 'transfer_s': result['seconds'],
                         'verify_s': result['verify_seconds'], 'bytes': sum(result['transferred_bytes'].values()),
                         'source': result['source']})
        for host in (first, second):
            fleet.ssh(host, 'rm -rf %s; %s' % (os.path.dirname(DEST), SYNC_LEFTOVERS), check=False)
        verify = []
        cache = os.path.join(work, 'state', '.preflight', 'checkpoint-verified.json')
        os.makedirs(os.path.dirname(os.path.dirname(cache)), mode=0o700)
        for label in ('cold (no digest cache, page cache evicted)', 'warm (digests cached by size and mtime)'):
            log('checkpoint verify: %s' % label)
            evict(model)
            wall, gate = run_gate(model, manifest, cache, 4)
            verify.append({'run': label, 'wall_s': round(wall, 2), 'seconds': gate['seconds'],
                           'hashed': gate['hashed'], 'cached': gate['cached']})
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        shutil.rmtree(work, ignore_errors=True)
    return {'total_bytes': total, 'shards': shards, 'sync': sync, 'verify': verify}


def render_model_sync(results):
    """The page's section (Markdown lines)."""
    mib = results['total_bytes'] / float(1 << 20)
    lines = ['## Bringing the model there: sync throughput and verification', '',
             '%.0f MiB in %d safetensors shards (generated; `bench/model_sync.py`). Sync: '
             '`llmops.sglang.sglang_model_sync` through `ansible`, into a staging directory, verified (sha256 of '
             'every file), renamed (docs/model-sync.md). Verify: the preflight gate on the controller, 4 hash workers.'
             % (mib, results['shards']), '',
             '| sync | source | wall (s, with Ansible) | transfer (s) | MiB/s | vs mirror | verify (s) | bytes moved |',
             '|------|--------|------|------|------|------|------|------|']
    base = results['sync'][0]['transfer_s'] or None
    for row in results['sync']:
        rate = row['bytes'] / float(1 << 20) / row['transfer_s'] if row['transfer_s'] else None
        ratio = '%.2fx' % (base / row['transfer_s']) if base and row['transfer_s'] and row['bytes'] else '-'
        lines.append('| %s | %s | %.2f | %.2f | %s | %s | %.2f | %d |' % (
            row['run'], row['source'] or '-', row['wall_s'], row['transfer_s'], '%.0f' % rate if rate else '-', ratio,
            row['verify_s'], row['bytes']))
    lines += ['', '| verify | wall (s, with Ansible) | gate (s) | files hashed | from cache | vs cold |',
              '|--------|------|------|------|------|------|']
    cold = results['verify'][0]['seconds'] or None
    for row in results['verify']:
        lines.append('| %s | %.2f | %.2f | %d | %d | %s |' % (
            row['run'], row['wall_s'], row['seconds'], row['hashed'], row['cached'],
            '%.1fx faster' % (cold / row['seconds']) if cold and row['seconds'] and row is not results['verify'][0] else '-'))
    lines.append('')
    return lines
