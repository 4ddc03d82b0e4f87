# -*- coding: utf-8 -*-
"""Checkpoint verification, cold (every file hashed) vs warm (digests from the cache), side by side.

Not part of `make test`. Runs llmops.sglang.sglang_preflight's checkpoint gate the way the server role does
(`ansible localhost -m llmops.sglang.sglang_preflight`, so the figures include Ansible's own cost) on a generated
checkpoint: SHARDS safetensors files of TOTAL_MIB together, plus a manifest with their sizes and sha256.

  python3 bench/checkpoint_verify.py [--total-mib 2048] [--shards 8] [--workers 1,4] [--dir /var/tmp/...]

Cold runs first evict the files from the page cache (posix_fadvise DONTNEED on these files only, nothing else on
the machine), so they read from the disk as a first verification after a download would, not from RAM. Prints a
Markdown table and writes it to bench/results/checkpoint_verify.md (gitignored with the rest of bench/results).
"""

from __future__ import absolute_import, division, print_function

import argparse
import hashlib
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, '.build', 'collections')


def write_shard(path, nbytes):
    """A valid safetensors file with one U8 tensor of nbytes (random-ish content, so nothing compresses it away)."""
    header = json.dumps({'w': {'dtype': 'U8', 'shape': [nbytes], 'data_offsets': [0, nbytes]}}).encode()
    header += b' ' * (-len(header) % 8)
    digest = hashlib.sha256()
    with open(path, 'wb') as handle:
        head = struct.pack('<Q', len(header)) + header
        handle.write(head)
        digest.update(head)
        block = os.urandom(1 << 20)
        left = nbytes
        while left:
            chunk = block[:min(left, len(block))]
            handle.write(chunk)
            digest.update(chunk)
            left -= len(chunk)
    return {'size': os.path.getsize(path), 'sha256': digest.hexdigest()}


def evict(directory):
    for name in os.listdir(directory):
        fd = os.open(os.path.join(directory, name), os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def run_gate(model, manifest, cache, workers):
    args = {'unit': 'bench.service', 'checks': ['checkpoint'], 'model_path': model, 'manifest': manifest,
            'cache_path': cache, 'hash_workers': workers, 'growth_interval': 1.0}
    ansible = os.path.join(os.path.dirname(sys.executable), 'ansible')
    if not os.path.exists(ansible):
        ansible = shutil.which('ansible') or 'ansible'
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS, ANSIBLE_CALLBACK_RESULT_FORMAT='json',
               ANSIBLE_LOCALHOST_WARNING='0', ANSIBLE_INVENTORY_UNPARSED_WARNING='0', ANSIBLE_NOCOLOR='1')
    started = time.monotonic()
    out = subprocess.run([ansible, 'localhost', '-c', 'local', '-m', 'llmops.sglang.sglang_preflight',
                          '-a', json.dumps(args)], check=True, stdout=subprocess.PIPE, env=env, cwd=ROOT,
                         universal_newlines=True).stdout
    wall = time.monotonic() - started
    result = json.loads(out.split(' => ', 1)[1])  # "localhost | SUCCESS => {...}"
    gate = result['checkpoint']
    if gate['status'] != 'ok':
        raise SystemExit('the gate did not pass: %s' % json.dumps(gate['findings'])[:2000])
    return wall, gate


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--total-mib', type=int, default=2048)
    parser.add_argument('--shards', type=int, default=8)
    parser.add_argument('--workers', default='1,4', help='hash_workers values for the cold runs, comma-separated')
    parser.add_argument('--dir', default=None, help='where to generate the checkpoint (default: a temp dir in /var/tmp)')
    parser.add_argument('--output', default=os.path.join(ROOT, 'bench', 'results', 'checkpoint_verify.md'))
    opts = parser.parse_args()
    base = opts.dir or tempfile.mkdtemp(prefix='llmops-ckpt-bench-', dir='/var/tmp')
    model = os.path.join(base, 'model')
    state = os.path.join(base, 'state')
    os.makedirs(model, exist_ok=True)
    os.makedirs(state, exist_ok=True)
    cache = os.path.join(state, '.preflight', 'checkpoint-verified.json')
    try:
        per_shard = opts.total_mib * (1 << 20) // opts.shards
        manifest = {}
        for i in range(1, opts.shards + 1):
            name = 'model-%05d-of-%05d.safetensors' % (i, opts.shards)
            manifest[name] = write_shard(os.path.join(model, name), per_shard)
        total = sum(entry['size'] for entry in manifest.values())
        rows = []
        for workers in [int(w) for w in opts.workers.split(',')]:
            if os.path.exists(cache):
                os.remove(cache)
            evict(model)
            wall, gate = run_gate(model, manifest, cache, workers)
            assert gate['hashed'] == opts.shards and gate['cached'] == 0, gate
            rows.append(('cold, %d hash worker%s' % (workers, '' if workers == 1 else 's'), wall, gate))
        evict(model)  # warm = cached digests: nothing is read but headers, so the page cache does not matter
        wall, gate = run_gate(model, manifest, cache, max(int(w) for w in opts.workers.split(',')))
        assert gate['hashed'] == 0 and gate['cached'] == opts.shards, gate
        rows.append(('warm (cache by size and mtime)', wall, gate))
    finally:
        if not opts.dir:
            shutil.rmtree(base, ignore_errors=True)
    warm = rows[-1]
    machine = (opts.shards, total / 2.0 ** 30, platform.machine(), os.cpu_count() or 0, platform.python_version())
    lines = ['# Checkpoint verification: cold vs warm', '',
             '%d shards, %.2f GiB, sha256 of every shard against a manifest; machine: %s, %d CPUs, Python %s. '
             'Wall time of `ansible localhost -m llmops.sglang.sglang_preflight` (checkpoint gate, growth interval '
             '1.0 s included) and the gate\'s own time.' % machine, '',
             '| run | wall s | gate s | hashed | from cache | MiB/s hashed | wall / warm wall | gate / warm gate |',
             '|---|---:|---:|---:|---:|---:|---:|---:|']
    rates = []
    for label, wall_s, g in rows:
        rate = g['hashed_bytes'] / 2.0 ** 20 / max(g['seconds'] - 1.0, 1e-3) if g['hashed'] else 0
        rates.append(rate)
        lines.append('| %s | %.2f | %.2f | %d | %d | %s | %.1fx | %.1fx |' % (
            label, wall_s, g['seconds'], g['hashed'], g['cached'], '%.0f' % rate if rate else '-', wall_s / warm[1],
            g['seconds'] / max(warm[2]['seconds'], 1e-3)))
    minutes = 595e9 / 2.0 ** 20 / max(rates + [1e-3]) / 60
    lines += ['', 'At the best cold rate the 595 GB of Kimi K2.6 would take about %.0f minutes here; warm costs the '
              'same as above (headers and stat only).' % minutes]
    text = '\n'.join(lines) + '\n'
    sys.stdout.write(text)
    os.makedirs(os.path.dirname(opts.output), exist_ok=True)
    with open(opts.output, 'w') as handle:
        handle.write(text)


if __name__ == '__main__':
    main()
