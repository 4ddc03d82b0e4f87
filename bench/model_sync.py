# -*- coding: utf-8 -*-
"""Model sync throughput, mirror vs peer, and checkpoint verification cold vs warm, side by side with ratios.

Not part of `make test`; root. Boots a private two-host fleet (tests/fleet/fleet.py, prefix `bs`), generates a
checkpoint of TOTAL_MIB (SHARDS safetensors files, bench/checkpoint_verify.py's generator) on the controller, serves
it from an HTTP mirror on the first host's outer address, and runs llmops.sglang.sglang_model_sync the way the
server role does (`ansible HOST -m ...`, so the figures include Ansible's own cost):

- mirror: the first host pulls the version from the mirror (HTTP);
- peer: the second host pulls it from the first (ssh + tail);
- present: the second host again (the marker says it is there: nothing moves).

Then bench/checkpoint_verify.py (the preflight gate, cold and warm) on the controller with the same size.

  python3 bench/model_sync.py [--total-mib 512] [--shards 8] [--keep-fleet]

Prints a Markdown table and writes it to bench/results/model_sync.md (gitignored with the rest of bench/results).
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'bench'))
from checkpoint_verify import write_shard  # noqa: E402  pylint: disable=wrong-import-position

COLLECTIONS = os.path.join(ROOT, '.build', 'collections')
FLEET = [sys.executable if os.path.basename(sys.executable).startswith('python3') else 'python3',
         os.path.join(ROOT, 'tests', 'fleet', 'fleet.py')]
DEST = '/var/tmp/bench-model.versions/v1'


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *_args):
        pass


def module(inventory, host, args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_HOST_KEY_CHECKING='False',
               ANSIBLE_STDOUT_CALLBACK='json', ANSIBLE_LOAD_CALLBACK_PLUGINS='1')
    started = time.monotonic()
    done = subprocess.run([os.path.join(ROOT, '.venv', 'bin', 'ansible'), host, '-i', inventory, '-m',
                           'llmops.sglang.sglang_model_sync', '-a', json.dumps(args)],
                          env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    try:
        result = json.loads(done.stdout)['plays'][0]['tasks'][0]['hosts'][host]
    except (ValueError, KeyError, IndexError):
        raise SystemExit('ansible failed: %s %s' % (done.stdout[-2000:], done.stderr[-2000:]))
    if result.get('failed'):
        raise SystemExit('%s: %s' % (host, result.get('msg')))
    return wall, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--total-mib', type=int, default=512)
    parser.add_argument('--shards', type=int, default=8)
    parser.add_argument('--keep-fleet', action='store_true')
    parser.add_argument('--output', default=os.path.join(ROOT, 'bench', 'results', 'model_sync.md'))
    args = parser.parse_args()
    state = tempfile.mkdtemp(prefix='bench-sync-', dir='/var/tmp')
    work = tempfile.mkdtemp(prefix='bench-sync-model-', dir='/var/tmp')
    rows = []
    try:
        subprocess.run(FLEET + ['up', '--count', '2', '--state-dir', state, '--prefix', 'bs', '--first-index', 'auto',
                                '--skip-standin'], check=True, stdout=subprocess.DEVNULL)
        status = json.loads(subprocess.run(FLEET + ['status', '--json', '--state-dir', state], check=True,
                                           capture_output=True, text=True).stdout)
        hosts = status['hosts']
        inventory = os.path.join(state, 'hosts.yml')
        per = args.total_mib * (1 << 20) // args.shards
        manifest = {}
        for i in range(args.shards):
            name = 'model-%05d-of-%05d.safetensors' % (i + 1, args.shards)
            manifest[name] = write_shard(os.path.join(work, name), per)
        total = sum(e['size'] for e in manifest.values())
        gateway = urlsplit(hosts[0]['mirror_url']).hostname
        server = ThreadingHTTPServer((gateway, 0), partial(Quiet, directory=work))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        key = open(os.path.join(state, 'id_ed25519')).read()
        for host in hosts:
            subprocess.run(['ssh', '-i', status['key'], '-o', 'StrictHostKeyChecking=no', '-o', 'UserKnownHostsFile=/dev/null',
                            '-o', 'LogLevel=ERROR', 'root@' + host['address'],
                            'install -d -m 0700 /root/.ssh && cat > /root/.ssh/bench_key && chmod 0600 /root/.ssh/bench_key'],
                           input=key, text=True, check=True)
        common = {'dest': DEST, 'version': 'v1', 'manifest': manifest, 'ssh_key': '/root/.ssh/bench_key',
                  'mirror': 'http://%s:%d' % (gateway, server.server_address[1])}
        a, b = hosts[0], hosts[1]
        for label, host, peers in (
                ('mirror (HTTP) -> %s' % a['name'], a['name'], []),
                ('peer %s (ssh + tail) -> %s' % (a['name'], b['name']), b['name'],
                 [{'name': a['name'], 'address': a['address'], 'have': True}, {'name': b['name'], 'address': b['address'], 'have': False}]),
                ('already present on %s' % b['name'], b['name'], [])):
            wall, result = module(inventory, host, dict(common, host=host, peers=peers))
            moved = sum(result['transferred_bytes'].values())
            rows.append((label, wall, result['seconds'], result['verify_seconds'], moved))
        server.shutdown()
    finally:
        if not args.keep_fleet:
            subprocess.run(FLEET + ['down', '--state-dir', state], check=False, stdout=subprocess.DEVNULL)
        subprocess.run(['rm', '-rf', work], check=False)
    mib = total / float(1 << 20)
    base = rows[0][2] or 1e-9
    lines = ['# Model sync: %d MiB in %d shards (%s)' % (mib, args.shards, time.strftime('%Y-%m-%d')), '',
             '| run | wall (s, with Ansible) | transfer (s) | MiB/s | vs mirror | verify (s) | bytes moved |',
             '|-----|------|------|------|------|------|------|']
    for label, wall, seconds, verify_s, moved in rows:
        rate = moved / float(1 << 20) / seconds if seconds else 0.0
        lines.append('| %s | %.1f | %.2f | %.0f | %s | %.2f | %d |' % (
            label, wall, seconds, rate, '%.2fx' % (base / seconds) if seconds else '-', verify_s, moved))
    print('\n'.join(lines))
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, 'w') as handle:
        handle.write('\n'.join(lines) + '\n')
    print('checkpoint verification, cold vs warm (bench/checkpoint_verify.py):')
    return subprocess.call([sys.executable, os.path.join(ROOT, 'bench', 'checkpoint_verify.py'),
                            '--total-mib', str(args.total_mib), '--shards', str(args.shards)])


if __name__ == '__main__':
    raise SystemExit(main())
