# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model sync's decisions: which files to fetch from which offset, from which source, in which wave. No I/O.

The module (plugins/modules/sglang_model_sync.py) wires model_sync_driver, which lists, transfers, hashes and renames
through the adapters (model_sync_adapters); these functions decide: the options, the paths that must be safe, the
plan, the peer wait and its fallback to the mirror, what verification removes. Verification is the checkpoint gate's
(module_utils/model/checkpoint.py), never a copy of it here.

Fan-out. A fleet must not pull a 595 GB checkpoint from one mirror N times: a host that has the verified version
serves the next ones. Hosts sync in waves: in a wave every host that already has the version serves one host that
does not (so the number of hosts that have it doubles per wave), and the mirror serves (one host) only in a wave
where no host has it yet. Every host computes the same plan from the same facts (the play's hosts in play order,
and which of them have the version), takes its own row, and waits for its source to finish before pulling from it.
A host's source always comes earlier in the play order, so hosts started in that order never wait on one that
has not started.

Pipelined distribution (``distribution: pipelined``, ``pipeline``). Waves move a whole copy per wave; instead every
host that lacks the version takes its source at once and reads each file from it while the source still receives
it (the peers' ``follow`` request): the first host from a host that has it whole (else the mirror), every next
one from an earlier host in play order that is still receiving, a chain (``fanout`` 1) or a tree of small
fan-out. Each row also lists where to go when its source fails or stalls: its source's sources in order, then the
other hosts that have the version whole, then the mirror; the receiver resumes there from the bytes it has.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os

from ansible_collections.llmops.sglang.plugins.module_utils.model.checkpoint import parse_manifest
from ansible_collections.llmops.sglang.plugins.module_utils.model import model_sync_access

# Written into the version directory, last, before it is renamed from its staging name: a host that has this file
# in the final directory has the whole version, verified. (The peers' serving script reads the same names.)
MARKER = model_sync_access.MARKER_NAME
FAILED = model_sync_access.FAILED_NAME
STAGING_PREFIX = model_sync_access.STAGING_PREFIX
MIRROR = None  # the source of a host that pulls from the mirror

ARGUMENT_SPEC = dict(
    dest=dict(type='path', required=True),
    version=dict(type='str', required=True),
    manifest=dict(type='dict', required=True),
    mirror=dict(type='str', default=''),
    host=dict(type='str', default=''),
    peers=dict(type='list', elements='dict', default=[]),
    ssh_key=dict(type='path', default='/var/lib/llmops-sglang/model-sync/id_ed25519'),
    ssh_user=dict(type='str', default='sglang-sync'),
    known_hosts=dict(type='path', default='/var/lib/llmops-sglang/model-sync/known_hosts'),
    ssh_options=dict(type='list', elements='str', default=[]),
    peer_wait=dict(type='int', default=3600),
    poll_interval=dict(type='float', default=2.0),
    timeout=dict(type='int', default=60),
    distribution=dict(type='str', default='pipelined', choices=['waves', 'pipelined']),
    fanout=dict(type='int', default=1),
    rate_limit=dict(type='int', default=0),
    progress_file=dict(type='path'),
    cache_path=dict(type='path'),
)

# What verification finds wrong with a file's bytes: such a file is removed, so the next run fetches it again.
REMOVED_CHECKS = ('shard_invalid', 'manifest_size', 'manifest_hash')


class TransferError(Exception):
    """A transfer that did not bring the whole file (the adapters raise it, the driver reports it)."""


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


def pipeline(order, have, fanout=1):
    """{host: {'wave': depth, 'source': host or None (the mirror), 'sources': [host or None, ...]}} for the hosts of
    ``order`` that lack the version, all at once (pipelined distribution).

    The first hosts lacking it (one per host that has it, at least one) read from a host that has it whole, or from
    the mirror when none has; every next one from an earlier one still receiving: with h such heads, the i-th host
    lacking it (i >= h) reads from the ((i - h) // fanout)-th, a chain for fanout 1, a tree otherwise. ``sources``:
    the source, then its sources in order up to the head's, then the other hosts that have it whole, then the
    mirror (None) -- where a receiver goes next when the one before fails or stalls.
    """
    if fanout < 1:
        raise ValueError('fanout must be at least 1, got %r' % (fanout,))
    wholes = [h for h in order if h in have]
    pending = [h for h in order if h not in have]
    heads = max(1, min(len(wholes), len(pending)))
    plan = {}
    for index, host in enumerate(pending):
        if index < heads:
            up = [wholes[index] if wholes else MIRROR]
        else:
            parent = pending[(index - heads) // fanout]
            up = [parent] + plan[parent]['up']
        rest = [h for h in wholes if h not in up] + [MIRROR]
        plan[host] = {'wave': len(up) - 1, 'source': up[0], 'up': up, 'sources': up + [s for s in rest if s not in up]}
    for row in plan.values():
        del row['up']
    return plan


def own_row(peers, me, distribution, fanout_k=1):
    """The plan row of host ``me`` from the role's peer list [{name, address, have}] (play order).

    Returns {'wave', 'source', 'source_address', 'sources': [{'name', 'address'}, ...]} ({'wave': None, ...} when
    ``me`` has the version or is not listed); ``sources`` (pipelined only, else []) are where to resume when the
    source fails, in order, the mirror as {'name': None, 'address': None}.
    """
    order = [p['name'] for p in peers]
    have = set(p['name'] for p in peers if p.get('have'))
    if me not in order:
        order.append(me)
    plans = pipeline(order, have, fanout_k) if distribution == 'pipelined' else fanout(order, have)
    row = plans.get(me)
    if row is None:
        return {'wave': None, 'source': None, 'source_address': None, 'sources': []}
    addresses = dict((p['name'], p.get('address') or p['name']) for p in peers)
    sources = [{'name': s, 'address': addresses.get(s)} for s in row.get('sources', [])]
    return {'wave': row['wave'], 'source': row['source'], 'source_address': addresses.get(row['source']),
            'sources': sources}


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


# ---- the module's decisions around the transfer (model_sync_driver asks them in order) ----------------------

def check_inputs(params):
    """The checked manifest (check_manifest); ValueError with the module's message for the first bad option."""
    manifest = check_manifest(params['manifest'])
    for peer in params['peers']:
        if not isinstance(peer.get('name'), str) or not peer['name']:
            raise ValueError('peers: every entry needs a name, got %r' % (peer,))
    if params['ssh_user'] == 'root':
        raise ValueError('ssh_user: peer transfers never log in as root; give the sync account (default sglang-sync)')
    problem = model_sync_access.ssh_options_problem(params['ssh_options'])
    if problem:
        raise ValueError('ssh_options: ' + problem)
    if not 1 <= params['fanout'] <= 16:
        raise ValueError('fanout: the hosts one host serves at once in pipelined distribution, 1 (a chain) to 16; '
                         'got %r' % (params['fanout'],))
    if params['rate_limit'] < 0:
        raise ValueError('rate_limit: bytes per second a transfer may take (0: no cap), not negative; got %r'
                         % (params['rate_limit'],))
    if not 1 <= params['timeout'] <= model_sync_access.MAX_STALL:
        raise ValueError('timeout: seconds (1 to %d), also how long a pipelined read waits for new bytes; got %r'
                         % (model_sync_access.MAX_STALL, params['timeout']))
    return manifest


def staging_dir(dest):
    return os.path.join(os.path.dirname(dest), STAGING_PREFIX + os.path.basename(dest))


def guarded_paths(dest, progress_file):
    """[(path, what)]: what root writes through; nobody but root (or us) may own or write any part of them."""
    return [(os.path.dirname(dest), 'the versions directory'), (staging_dir(dest), 'the staging directory'),
            (dest, 'the version directory'), (os.path.dirname(progress_file or '/'), 'progress_file\'s directory')]


def never_links(dest):
    """The directories that are never symlinks: the sync writes only into directories it made."""
    return (staging_dir(dest), dest)


def not_this_version(dest, version):
    return ('%s exists but is not a verified copy of version %s with this manifest (no matching %s): '
            'name a new sglang_model_source.version, or remove the directory.' % (dest, version, MARKER))


def source_problem(row, dest, manifest, mirror, version):
    """Why this host's sync cannot start (a peer source whose paths the forced command would refuse; no source at
    all), or None."""
    if row['source'] is not None:
        try:
            model_sync_access.check_state_request(dest)
            for name in manifest:
                model_sync_access.check_read_request(os.path.join(dest, name), os.path.dirname(dest))
        except model_sync_access.Refused as exc:
            return ('No peer could serve this version (%s): a version that peers sync needs plain directory and file '
                    'names' % exc)
    if (row['source'] or 'mirror') == 'mirror' and not mirror:
        return ('No host of the play has version %s yet and sglang_model_source.mirror is not set: give a mirror, or '
                'sync one host first.' % version)
    return None


def diff(dest, plan, manifest):
    return {'before': {'version_dir': dest, 'present': False,
                       'partial': dict((i['file'], i['offset']) for i in plan if i['offset'])},
            'after': {'version_dir': dest, 'present': True, 'files': len(manifest),
                      'bytes': sum(i['size'] for i in plan)}}


def staging_subdirs(plan):
    """The directories inside the staging directory the plan's files need ('' for the staging directory itself)."""
    return sorted(set(os.path.dirname(i['file']) for i in plan))


# Seconds an idle shared ssh connection to a peer outlives its last request when the module did not close it (it was
# killed): the module closes its connections itself at the end (ssh_close_argv).
CONTROL_PERSIST = 30


def ssh_argv(params, address, command, control_path=None):
    """ssh with host key checking fixed: ssh takes the first value it is given for an option, so these come first,
    and ssh_options may not name them anyway (model_sync_access.ssh_options_problem). With ``control_path`` (a
    socket path in a root-only directory the module made) every request to a peer shares one connection
    (ControlMaster): the key exchange, the login and the peer's PAM session happen once per peer and run, not once
    per file (measured: about 1.7 s of wall time each on a loaded host, bench/distribution.py's link probe)."""
    mux = (['-o', 'ControlMaster=auto', '-o', 'ControlPath=%s' % control_path,
            '-o', 'ControlPersist=%d' % CONTROL_PERSIST] if control_path else [])
    return (['ssh', '-i', params['ssh_key'], '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes',
             '-o', 'StrictHostKeyChecking=yes', '-o', 'UserKnownHostsFile=%s' % params['known_hosts'],
             '-o', 'GlobalKnownHostsFile=/dev/null', '-o', 'UpdateHostKeys=no', '-o', 'CheckHostIP=no',
             '-o', 'ConnectTimeout=%d' % min(30, params['timeout']), '-o', 'ServerAliveInterval=%d' % max(1, params['timeout'] // 3)]
            + mux + params['ssh_options'] + ['-l', params['ssh_user'], '--', address, command])


def ssh_close_argv(params, address, control_path):
    """Ends the shared connection to ``address`` (``ssh -O exit``), as the module does at the end of a run."""
    return (['ssh', '-o', 'ControlPath=%s' % control_path] + params['ssh_options']
            + ['-O', 'exit', '-l', params['ssh_user'], '--', address])


def host_key_problem(known_hosts, text, read_error, address, ssh_options):
    """Why this peer must not be connected to at all (known_hosts unreadable, or its host key not in it), or None.
    text: known_hosts' content; read_error: why it could not be read (then text is None)."""
    if read_error is not None:
        return 'known_hosts %s cannot be read (%s): nothing is read from a peer whose host key is not known' % (
            known_hosts, read_error)
    if not model_sync_access.known_keys(text, address, model_sync_access.ssh_port(ssh_options)):
        return ('its host key is not in %s (give it in sglang_model_source.known_hosts, or let the role read it over '
                'the Ansible connection): not connected to, nothing read from it' % known_hosts)
    return None


def peer_answer(rc, out, err):
    """The peer's state from its `state` request: 'ready', 'failed', 'pending' (its answer), or 'refused: ...' (a
    host key that does not match) or 'unreachable: ...' when ssh failed."""
    if rc != 0:
        why = model_sync_access.ssh_failure(rc, err or out)
        return ('refused: ' if 'host key' in why else 'unreachable: ') + why
    return out.strip()


def peer_wait(state, now, deadline, waited_for):
    """One look at the assigned peer while waiting for it: ('ready', None), ('wait', None) to look again after the
    poll interval, or ('fallback', why) to take the mirror instead (its own sync failed, it cannot be reached or
    was refused, or the wait of waited_for seconds ran out at deadline)."""
    if state == 'ready':
        return 'ready', None
    if state == 'failed' or state.startswith(('unreachable', 'refused')) or now >= deadline:
        why = {'failed': 'its own sync failed'}.get(state, state.split(': ', 1)[-1] if state != 'pending' else
                                                    'not ready after %ds' % waited_for)
        return 'fallback', why
    return 'wait', None


def no_fallback(peer, version, why):
    return ('The peer %s that was to serve version %s was not used: %s; and sglang_model_source.mirror is not set.'
            % (peer, version, why))


def short_transfer(got, size, count):
    """A connection closed early ends the body without an error (http.client's read(amt), ssh's pipe): the file's
    size after the transfer tells. The error's text, or None when the file is whole."""
    return None if got == size else 'the connection ended after %d bytes' % count


def interrupted(item, source, got, exc, staging):
    return ('Transfer of %s from %s interrupted at %d of %d bytes: %s. The staging directory %s keeps it; run again '
            'to resume from there.' % (item['file'], source, got, item['size'], exc, staging))


def framed(stats):
    """The files whose safetensors framing verification checks, of those present ({file: size})."""
    return [name for name in sorted(stats) if name.endswith('.safetensors')]


def to_remove(findings):
    """The files verification found damaged: removed, so the next run fetches them again."""
    return [f['file'] for f in findings if f['check'] in REMOVED_CHECKS]


def verify_failed(version, source, findings):
    return ('Version %s from %s failed verification (those files were removed; run again to fetch them): %s'
            % (version, source, ' '.join(f['message'] for f in findings)))
