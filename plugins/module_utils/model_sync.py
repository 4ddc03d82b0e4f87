# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model sync's decisions: which files to fetch from which offset, from which source, in which wave. No I/O.

The module (plugins/modules/sglang_model_sync.py) lists, transfers, hashes and renames; these functions decide.
Verification is the checkpoint gate's (module_utils/checkpoint.py), never a copy of it here.

Fan-out. A fleet must not pull a 595 GB checkpoint from one mirror N times: a host that has the verified version
serves the next ones. Hosts sync in waves: in a wave every host that already has the version serves one host that
does not (so the number of hosts that have it doubles per wave), and the mirror serves (one host) only in a wave
where no host has it yet. Every host computes the same plan from the same facts (the play's hosts in play order,
and which of them have the version), takes its own row, and waits for its source to finish before pulling from it.
A host's source always comes earlier in the play order, so hosts started in that order never wait on one that
has not started.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

from ansible_collections.llmops.sglang.plugins.module_utils.checkpoint import parse_manifest
from ansible_collections.llmops.sglang.plugins.module_utils import model_sync_access

# Written into the version directory, last, before it is renamed from its staging name: a host that has this file
# in the final directory has the whole version, verified. (The peers' serving script reads the same names.)
MARKER = model_sync_access.MARKER_NAME
FAILED = model_sync_access.FAILED_NAME
STAGING_PREFIX = model_sync_access.STAGING_PREFIX
MIRROR = None  # the source of a host that pulls from the mirror


def manifest_digest(manifest):
    """A short, stable name for a manifest's content (sha256 of its canonical JSON, 16 hex digits)."""
    text = json.dumps(parse_manifest(manifest), sort_keys=True, separators=(',', ':'))
    return hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]


def check_manifest(manifest):
    """parse_manifest(), plus what a sync needs: every entry with both a size and a sha256 (ValueError names one)."""
    parsed = parse_manifest(manifest)
    if not parsed:
        raise ValueError('sglang_model_manifest must list the checkpoint\'s files (file: {size, sha256}) when '
                         'sglang_model_source is set: the sync fetches and verifies exactly those')
    for name in sorted(parsed):
        if parsed[name]['size'] is None or not parsed[name]['sha256']:
            raise ValueError('sglang_model_manifest[%r] needs both size and sha256 when sglang_model_source is set'
                             % name)
    return parsed


def transfers(manifest, local):
    """What to do per file: [{file, size, offset, action}] in manifest order (sorted by name).

    ``local``: {file: size} of what the staging directory holds. ``action``: ``fetch`` (nothing local),
    ``resume`` (a shorter partial file: fetch from ``offset``), ``refetch`` (longer than declared: start over),
    ``have`` (the declared size: only hashing tells whether it is whole).
    """
    out = []
    for name in sorted(manifest):
        size = manifest[name]['size']
        got = local.get(name)
        if got is None:
            action, offset = 'fetch', 0
        elif got < size:
            action, offset = 'resume', got
        elif got == size:
            action, offset = 'have', size
        else:
            action, offset = 'refetch', 0
        out.append({'file': name, 'size': size, 'offset': offset, 'action': action})
    return out


def remaining_bytes(plan):
    return sum(item['size'] - item['offset'] for item in plan)


def fanout(order, have):
    """{host: {'wave': n, 'source': host or None (the mirror)}} for the hosts of ``order`` that lack the version.

    ``order``: the hosts taking part, in play order; ``have``: those of them that have the verified version.
    """
    sources = [h for h in order if h in have]
    pending = [h for h in order if h not in have]
    plan = {}
    wave = 0
    while pending:
        if sources:
            # every finished host serves one new host; the mirror is left alone
            served = list(zip(sources, pending))
        else:
            served = [(MIRROR, pending[0])]
        for src, dst in served:
            plan[dst] = {'wave': wave, 'source': src}
        done = [dst for _src, dst in served]
        pending = pending[len(done):]
        sources = sources + done
        wave += 1
    return plan


def own_row(peers, me):
    """The plan row of host ``me`` from the role's peer list [{name, address, have}] (play order).

    Returns {'wave', 'source', 'source_address'} ({'wave': None, ...} when ``me`` has the version or is not listed).
    """
    order = [p['name'] for p in peers]
    have = set(p['name'] for p in peers if p.get('have'))
    if me not in order:
        order.append(me)
    row = fanout(order, have).get(me)
    if row is None:
        return {'wave': None, 'source': None, 'source_address': None}
    address = None
    if row['source'] is not None:
        address = [p.get('address') or p['name'] for p in peers if p['name'] == row['source']][0]
    return {'wave': row['wave'], 'source': row['source'], 'source_address': address}


def progress(done, total, elapsed):
    """{done, total, rate (bytes/s), eta (s or None)} of a transfer ``elapsed`` seconds in."""
    rate = done / elapsed if elapsed > 0 else 0.0
    left = max(0, total - done)
    eta = left / rate if rate > 0 else None
    return {'done': done, 'total': total, 'rate': rate, 'eta': eta}


def human_bytes(n):
    for unit, size in (('GiB', 1 << 30), ('MiB', 1 << 20), ('KiB', 1 << 10)):
        if n >= size:
            return '%.1f %s' % (n / float(size), unit)
    return '%d B' % n


def progress_line(host, status):
    """One plain line per host, like the waiter's: `gpu-02  model sync  from gpu-01  1.2 GiB/4.0 GiB  310.0 MiB/s  ETA 9s`."""
    source = status.get('source') or 'mirror'
    text = '%s  model sync  from %s  %s/%s' % (host, source, human_bytes(status.get('done', 0)),
                                               human_bytes(status.get('total', 0)))
    if status.get('state') == 'waiting':
        return '%s  model sync  waiting for %s to finish (wave %s)' % (host, source, status.get('wave'))
    if status.get('state') == 'verifying':
        return text + '  verifying'
    rate = status.get('rate') or 0.0
    eta = status.get('eta')
    return text + '  %s/s  ETA %s' % (human_bytes(int(rate)), '%ds' % round(eta) if eta is not None else '-')


def marker_text(version, manifest, source):
    return json.dumps({'version': version, 'manifest': manifest_digest(manifest), 'files': len(manifest),
                       'source': source or 'mirror'}, sort_keys=True) + '\n'


def marker_matches(text, manifest):
    """Whether a version directory's marker was written for this manifest."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        return False
    return isinstance(data, dict) and data.get('manifest') == manifest_digest(manifest)


def peer_list(hosts, facts, dest):
    """[{name, address, have}] in ``hosts`` order for the hosts whose facts say anything about ``dest``.

    ``facts``: {host: {'sglang_models': {dest: bool} or None, 'address': str}}.
    """
    out = []
    for host in hosts:
        known = (facts.get(host) or {}).get('sglang_models')
        if not isinstance(known, dict) or dest not in known:
            continue
        out.append({'name': host, 'address': facts[host].get('address') or host, 'have': bool(known[dest])})
    return out


class SyncPrinter(object):
    """When a host's sync progress line is due: at a new state or source, else every REFRESH_EVERY seconds (the
    waiter's cadence, module_utils/progress_view.py). ``feed(status, now)`` -> lines to print (maybe none)."""

    def __init__(self, host, every=None):
        from ansible_collections.llmops.sglang.plugins.module_utils.progress_view import REFRESH_EVERY
        self.host = host
        self.every = REFRESH_EVERY if every is None else every
        self.key = None
        self.at = None

    def feed(self, status, now):
        if not isinstance(status, dict) or status.get('state') in (None, 'done', 'failed'):
            return []
        key = (status.get('state'), status.get('source'))
        if key != self.key or self.at is None or now - self.at >= self.every:
            self.key, self.at = key, now
            return [progress_line(self.host, status)]
        return []


def final_line(host, result):
    """The line printed the moment the module returns."""
    if result.get('failed'):
        return '%s  model sync  FAILED: %s' % (host, result.get('msg', ''))
    if result.get('state') == 'present':
        return '%s  model sync  %s already here' % (host, result.get('version_dir'))
    moved = sum((result.get('transferred_bytes') or {}).values())
    seconds = result.get('seconds') or 0.0
    rate = '  %s/s' % human_bytes(int(moved / seconds)) if seconds > 0 else ''
    return '%s  model sync  %s: %s from %s in %.1fs%s, verified in %.1fs' % (
        host, 'would fetch' if result.get('state') == 'would sync' else 'done', human_bytes(moved),
        result.get('source'), seconds, rate, result.get('verify_seconds') or 0.0)
