# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Distribution (issue 28): time until a checkpoint version is whole on N hosts, mirror alone vs waves vs pipelined.

Not yet a section of `make bench` (bench/cli.py does not call it): run it alone on a booted fleet,

    PYTHONPATH=.:tests .venv/bin/python -m bench.distribution --state-dir /var/lib/llmops-it-hb --prefix hb \
        --hosts 1,4 --mib 64 --rate-mbit 32

Each fleet host's link is limited with `tc` (tbf on the host's outer veth, vf-PREFIX-NN: what the host receives, from
the mirror or a peer, at most RATE), and the mirror on the controller sends at most RATE in total (one uplink of the
same rate, shared by its connections). On the first N hosts, after the server role's peer access tasks (as
bench/model_sync.py), llmops.sglang.sglang_model_sync runs on all N at once (one `ansible HOST -m` each, as
Ansible's forks would) for a generated checkpoint, three ways: every host from the mirror (peers: []), waves and
pipelined (a chain). The figure is the wall time until the last host returned, against one transfer time (the
checkpoint's bytes / RATE) and against the measured single host from the mirror (which includes Ansible's own
cost). The tbf qdiscs, the versions directory and the sync account are removed afterwards.
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from fleet.client import Fleet, FleetTool  # pylint: disable=import-error

from .checkpoint_verify import write_shard
from .common import log
from .model_sync import DEST, SYNC_LEFTOVERS, _env, _peer_access

__metaclass__ = type  # pylint: disable=invalid-name


class Uplink(object):
    """One shared uplink: send(n) returns when n more bytes fit into RATE bytes/s since the start."""

    def __init__(self, rate):
        self.rate = float(rate)
        self.lock = threading.Lock()
        self.sent = 0
        self.started = time.monotonic()

    def send(self, count):
        with self.lock:
            self.sent += count
            due = self.started + self.sent / self.rate
        time.sleep(max(0.0, due - time.monotonic()))


def mirror_server(directory, address, uplink, requests):
    """HTTP directory with Range, paced by the shared uplink; requests[file] counts the GETs."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args):
            pass

        def do_GET(self):  # noqa: N802
            name = unquote(self.path.lstrip('/'))
            path = os.path.join(directory, name)
            if '/' in name or not os.path.isfile(path):
                self.send_error(404)
                return
            requests[name] = requests.get(name, 0) + 1
            size = os.path.getsize(path)
            start = 0
            ranged = self.headers.get('Range', '')
            if ranged.startswith('bytes=') and ranged.endswith('-'):
                start = int(ranged[len('bytes='):-1])
                self.send_response(206)
            else:
                self.send_response(200)
            self.send_header('Content-Length', str(size - start))
            self.end_headers()
            with open(path, 'rb') as handle:
                handle.seek(start)
                while True:
                    block = handle.read(256 * 1024)
                    if not block:
                        break
                    uplink.send(len(block))
                    self.wfile.write(block)

    server = ThreadingHTTPServer((address, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def run_module(inventory, host, args, out):
    ansible = os.path.join(os.path.dirname(sys.executable), 'ansible')
    done = subprocess.run([ansible, host, '-i', inventory, '-m', 'llmops.sglang.sglang_model_sync', '-a',
                           json.dumps(args)], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)
    try:
        out[host] = json.loads(done.stdout.split(' => ', 1)[1])
    except (IndexError, ValueError):
        out[host] = {'failed': True, 'msg': (done.stdout + done.stderr)[-2000:]}


def one_run(fleet, hosts, manifest, mirror_url, way):
    """Seconds until the version is whole on every host of `hosts` (all started at once), and the results."""
    for host in hosts:
        fleet.run(host.name, 'rm -rf %s' % os.path.dirname(DEST), check=True)
    peers = [] if way == 'mirror' else [{'name': h.name, 'address': h.address, 'have': False} for h in hosts]
    out = {}
    started = time.monotonic()
    threads = []
    for host in hosts:
        args = {'dest': DEST, 'version': 'v1', 'manifest': manifest, 'host': host.name, 'mirror': mirror_url(host),
                'peers': peers, 'distribution': 'pipelined' if way == 'pipelined' else 'waves', 'peer_wait': 1800,
                'poll_interval': 1.0}
        threads.append(threading.Thread(target=run_module, args=(fleet.inventory, host.name, args, out)))
        threads[-1].start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    failed = dict((h, r.get('msg')) for h, r in out.items() if r.get('failed'))
    if failed:
        raise SystemExit('distribution bench: %s: %s' % (way, failed))
    return wall, out


def build_parser():
    """The script's options (also read by tests/conformance/test_argv.py, which must not take them for SGLang flags)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--state-dir', required=True)
    parser.add_argument('--prefix', required=True)
    parser.add_argument('--hosts', default='1,4', help='fleet sizes, comma-separated (each at most the fleet)')
    parser.add_argument('--mib', type=int, default=64, help='checkpoint size in MiB (8 shards)')
    parser.add_argument('--rate-mbit', type=int, default=32, help='each link (and the mirror uplink), Mbit/s')
    parser.add_argument('--ways', default='mirror,waves,pipelined')
    parser.add_argument('--json', help='write the results here too')
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    sizes = [int(n) for n in args.hosts.split(',')]
    ways = args.ways.split(',')
    tool = FleetTool(state_dir=args.state_dir, prefix=args.prefix, first_index='auto')
    fleet = Fleet(tool, tool.status())
    hosts = fleet.hosts[:max(sizes)]
    if len(hosts) < max(sizes):
        raise SystemExit('distribution bench: the fleet has %d hosts, not %d' % (len(hosts), max(sizes)))
    rate = args.rate_mbit * 1000 * 1000 // 8
    work = tempfile.mkdtemp(prefix='bench-dist-', dir='/var/tmp')
    servers = []
    shaped = []
    results = {'rate_bytes_s': rate, 'hosts': sizes, 'runs': []}
    try:
        model = os.path.join(work, 'model')
        os.makedirs(model)
        manifest = {}
        for i in range(1, 9):
            name = 'model-%05d-of-00008.safetensors' % i
            manifest[name] = write_shard(os.path.join(model, name), args.mib * (1 << 20) // 8)
        total = sum(e['size'] for e in manifest.values())
        results['total_bytes'] = total
        results['transfer_s'] = round(total / float(rate), 2)
        uplink = Uplink(rate)
        requests = {}
        urls = {}
        for host in hosts:
            gateway = urlsplit(host.mirror_url).hostname
            if gateway not in urls:
                servers.append(mirror_server(model, gateway, uplink, requests))
                urls[gateway] = 'http://%s:%d' % (gateway, servers[-1].server_address[1])
        _peer_access(fleet.inventory, work, [h.name for h in hosts])
        for index in range(len(hosts)):
            dev = 'vf-%s-%02d' % (args.prefix, index + 1)
            subprocess.run(['tc', 'qdisc', 'replace', 'dev', dev, 'root', 'tbf', 'rate', '%dmbit' % args.rate_mbit,
                            'burst', '64kb', 'latency', '100ms'], check=True)
            shaped.append(dev)
        for count in sizes:
            for way in ways:
                if count == 1 and way != 'mirror':
                    continue  # one host: all three are one mirror read
                uplink.sent, uplink.started = 0, time.monotonic()
                requests.clear()
                log('distribution: %s on %d host(s)' % (way, count))
                wall, out = one_run(fleet, hosts[:count], manifest,
                                    lambda h: urls[urlsplit(h.mirror_url).hostname], way)
                results['runs'].append({
                    'way': way, 'hosts': count, 'wall_s': round(wall, 1),
                    'per_transfer': round(wall / results['transfer_s'], 2),
                    'mirror_gets': sum(requests.values()),
                    'sources': dict((h, r.get('source')) for h, r in sorted(out.items()))})
                log('  %.1f s (%.2f transfer times), mirror GETs %d' % (
                    wall, wall / results['transfer_s'], sum(requests.values())))
    finally:
        for dev in shaped:
            subprocess.run(['tc', 'qdisc', 'del', 'dev', dev, 'root'], check=False)
        for host in hosts:
            fleet.run(host.name, 'rm -rf %s; %s' % (os.path.dirname(DEST), SYNC_LEFTOVERS))
        for server in servers:
            server.shutdown()
            server.server_close()
        shutil.rmtree(work, ignore_errors=True)
    single = [r['wall_s'] for r in results['runs'] if r['hosts'] == 1 and r['way'] == 'mirror']
    for run in results['runs']:
        run['per_single_host'] = round(run['wall_s'] / single[0], 2) if single else None
    text = json.dumps(results, indent=1, sort_keys=True)
    print(text)
    if args.json:
        with open(args.json, 'w') as handle:
            handle.write(text + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
