# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The order of one model sync: check the options and the paths, plan, wait for the assigned peer (or fall back to
the mirror), transfer, verify, publish. It decides nothing itself (model_sync, model_sync_access and checkpoint
do); the module runs it with the real adapters (model_sync_adapters), the unit tests with fakes and a fake clock.

Adapters: files (exists, lexists, islink, getsize, unlink, unsafe(path), make_dirs(path), read_text, write_text,
sizes(staging, manifest), shard_problem, sha256, publish(staging, dest, marker), record_cache(path, dest, digests),
progress(path, total, source, wave) -> set(force, **fields), add(n), started); mirror (fetch(file, path, offset,
progress) -> bytes); peers (state(address) -> str, fetch(address, file, path, offset, progress) -> bytes,
follow(address, file, path, offset, size, progress) -> bytes); clock (time(), sleep(seconds)).

Pipelined distribution (``distribution: pipelined``): no wait for the source to finish; each file is followed
from the source while it still arrives there, and when the source fails or stalls the file is continued from the
bytes this host has, from the next of the row's ``sources`` (its source's source, ..., the hosts that have the
version whole, the mirror).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.llmops.sglang.plugins.module_utils.model import checkpoint, model_sync
from ansible_collections.llmops.sglang.plugins.module_utils.model.model_sync import TransferError


class Failed(Exception):
    """The sync stops: msg, and whether the result so far goes with it (after the plan) or not (bad input)."""

    def __init__(self, msg, with_result=True):
        super(Failed, self).__init__(msg)
        self.msg = msg
        self.with_result = with_result


def check_paths(files, dest, progress_file):
    for path, what in model_sync.guarded_paths(dest, progress_file):
        # checked as it exists now
        if files.lexists(path) and path != '/':
            if files.islink(path) and path in model_sync.never_links(dest):
                raise Failed('%s (%s) is a symlink: the sync writes only into directories it made' % (path, what), False)
            problem = files.unsafe(path)
            if problem:
                raise Failed('Refusing to write through %s (%s): %s' % (path, what, problem), False)


def wait_for_peer(params, row, peers, clock):
    """Looks at the assigned peer every poll_interval until it has the version: None, or why the mirror serves
    instead (model_sync.peer_wait)."""
    deadline = clock.time() + params['peer_wait']
    while True:
        step, why = model_sync.peer_wait(peers.state(row['source_address']), clock.time(), deadline, params['peer_wait'])
        if step == 'ready':
            return None
        if step == 'fallback':
            return why
        clock.sleep(params['poll_interval'])


def verify(files, staging, manifest, early=None):
    """The checkpoint gate's findings on the staging directory (framing, sizes, sha256) and the digests. ``early``:
    {file: function -> digest or None} of files hashed while the transfer went on (hash_early); the others are hashed
    now."""
    stats = files.sizes(staging, manifest)
    invalid = []
    for name in model_sync.framed(stats):
        problem = files.shard_problem(os.path.join(staging, name))
        if problem:
            invalid.append((name, problem))
    early = early or {}
    digests = {}
    for name in checkpoint.to_hash(manifest, stats):
        digests[name] = (early[name]() if name in early else None) or files.sha256(os.path.join(staging, name))
    return checkpoint.judge(invalid=invalid, manifest=manifest, stats=stats, digests=digests), digests


def hash_early(files, early, name, path):
    """Hands a file that arrived whole to the background hasher (when the files adapter has one)."""
    if hasattr(files, 'hash_soon'):
        early[name] = files.hash_soon(path)


def transfer(plan, result, source, row, staging, files, mirror, peers, progress, early=None, rate_limit=0):
    """Waves: every file from the one source. With rate_limit a peer's files come through its ``follow`` (the
    source has the version whole: it reads the complete files), which the peer paces as for pipelined reads; its
    ``read`` is not paced."""
    transferred = result['transferred_bytes'] = {source: 0}
    early = {} if early is None else early
    for item, shown in zip(plan, result['files']):
        if item['action'] == 'have':
            continue
        path = os.path.join(staging, item['file'])
        progress.set(file=item['file'])
        try:
            if source == 'mirror':
                count = mirror.fetch(item['file'], path, item['offset'], progress)
            elif rate_limit:
                count = peers.follow(row['source_address'], item['file'], path, item['offset'], item['size'], progress)
            else:
                count = peers.fetch(row['source_address'], item['file'], path, item['offset'], progress)
            short = model_sync.short_transfer(files.getsize(path), item['size'], count)
            if short:
                raise TransferError(short)
        except (TransferError, IOError, OSError) as exc:
            got = files.getsize(path) if files.exists(path) else 0
            raise Failed(model_sync.interrupted(item, source, got, exc, staging))
        shown['bytes'] = count
        transferred[source] += count
        hash_early(files, early, item['file'], path)


def pipelined_sources(params, row):
    """The row's sources a pipelined receiver may use, in order (the mirror only when one is set)."""
    return [s for s in row['sources'] if s['name'] is not None or params['mirror']]


def fetch_from(source, item, path, offset, files, mirror, peers, progress):
    """One try at the file from ``source`` from ``offset`` on: the bytes it brought; TransferError when it ended
    before the file is whole (the bytes stay)."""
    if source['name'] is None:
        mirror.fetch(item['file'], path, offset, progress)
    else:
        peers.follow(source['address'], item['file'], path, offset, item['size'], progress)
    got = files.getsize(path)
    short = model_sync.short_transfer(got, item['size'], got - offset)
    if short:
        raise TransferError(short)
    return got - offset


def transfer_pipelined(params, plan, result, row, staging, files, mirror, peers, progress, used=None, early=None):
    """Each file from the first of the row's sources that brings it whole; the next one continues from the bytes
    this host has. A source that failed once is not asked again for the next files. ``used`` ({file: [names]})
    records who sent bytes of each file (a file that fails its check is fetched again from someone else)."""
    chain = pipelined_sources(params, row)
    transferred = result['transferred_bytes'] = {}
    used = {} if used is None else used
    early = {} if early is None else early
    fell = []
    at = 0
    for item, shown in zip(plan, result['files']):
        if item['action'] == 'have':
            continue
        path = os.path.join(staging, item['file'])
        offset = first = item['offset']
        while True:
            name = chain[at]['name'] or 'mirror'
            progress.set(force=True, file=item['file'], source=name)
            used.setdefault(item['file'], [])
            if name not in used[item['file']]:
                used[item['file']].append(name)
            try:
                count = fetch_from(chain[at], item, path, offset, files, mirror, peers, progress)
            except (TransferError, IOError, OSError) as exc:
                got = files.getsize(path) if files.exists(path) else 0
                if got > offset:  # a source that sent nothing is in the fallback, not in what was transferred
                    transferred[name] = transferred.get(name, 0) + got - offset
                if at + 1 >= len(chain):
                    result['fallback'] = '; '.join(fell)
                    if chain[at]['name'] is not None and got == offset:
                        # the last source, a peer (no mirror after it), sent nothing: running again resumes nothing
                        raise Failed(model_sync.no_fallback(name, params['version'], exc))
                    raise Failed(model_sync.interrupted(item, name, got, exc, staging))
                fell.append('%s: %s (%s at byte %d)' % (name, exc, item['file'], got))
                at += 1
                offset = got
                continue
            transferred[name] = transferred.get(name, 0) + count
            break
        shown['bytes'] = files.getsize(path) - first
        hash_early(files, early, item['file'], path)
    result['fallback'] = '; '.join(fell)
    result['source'] = chain[at]['name'] or 'mirror'
    return result['source']


def refetch_order(chain, sent):
    """Where a file that failed its check is fetched again, in order: the row's peers that sent none of its bytes,
    then the peers that did (the damage may be this host's own, or the wire's), then the mirror (once more: only when
    no peer brings it whole)."""
    peers = [s for s in chain if s['name'] is not None]
    return ([s for s in peers if s['name'] not in sent] + [s for s in peers if s['name'] in sent]
            + [s for s in chain if s['name'] is None])


def refetch(params, findings, manifest, row, staging, files, mirror, peers, progress, used, result):
    """Pipelined: each file that failed its check (size, framing, sha256) is removed and fetched again from byte 0
    (refetch_order: first from a peer that sent none of its bytes), then checked again; each source at most once per
    file, until every file passes or no source is left. Returns the findings that remain and the digests of the
    files fetched again."""
    chain = pipelined_sources(params, row)
    transferred = result['transferred_bytes']
    again = result.setdefault('refetched', [])
    queues = {}
    digests = {}
    while findings:
        bad = model_sync.to_remove(findings)
        if not bad or len(bad) != len(set(f['file'] for f in findings)):
            return findings, digests      # something a new copy cannot fix (a file missing from the manifest's list)
        for name in bad:
            item = {'file': name, 'size': manifest[name]['size']}
            path = os.path.join(staging, name)
            sent = used.setdefault(name, [])
            queue = queues.setdefault(name, refetch_order(chain, sent))
            while True:
                if not queue:
                    return findings, digests
                source = queue.pop(0)
                label = source['name'] or 'mirror'
                if files.exists(path):
                    files.unlink(path)
                progress.set(force=True, state='transferring', file=name, source=label)
                try:
                    count = fetch_from(source, item, path, 0, files, mirror, peers, progress)
                except (TransferError, IOError, OSError) as exc:
                    got = files.getsize(path) if files.exists(path) else 0
                    transferred[label] = transferred.get(label, 0) + got
                    again.append('%s from %s: %s (at byte %d)' % (name, label, exc, got))
                    continue
                transferred[label] = transferred.get(label, 0) + count
                again.append('%s from %s (it failed its check with bytes from %s)' % (name, label, ', '.join(sent)))
                sent.append(label)
                break
        progress.set(force=True, state='verifying')
        findings, more = verify(files, staging, dict((name, manifest[name]) for name in bad))
        digests.update(more)
    return findings, digests


def run(params, files, mirror, peers, clock, check_mode=False, diff=False):
    """One sync -> (msg, result): msg None on success (or nothing to do), else why it failed."""
    result = {}
    try:
        return None, sync(params, result, files, mirror, peers, clock, check_mode, diff)
    except Failed as exc:
        return exc.msg, result if exc.with_result else {}


def sync(params, result, files, mirror, peers, clock, check_mode, diff):
    try:
        manifest = model_sync.check_inputs(params)
    except ValueError as exc:
        raise Failed(str(exc), with_result=False)
    dest = params['dest'] = params['dest'].rstrip('/')
    check_paths(files, dest, params['progress_file'])
    result.update(changed=False, version_dir=dest, state='present', source=None, wave=None, fallback='', files=[],
                  transferred_bytes={}, seconds=0.0, verify_seconds=0.0)
    marker = files.read_text(os.path.join(dest, model_sync.MARKER))
    if marker is not None and model_sync.marker_matches(marker, manifest):
        return result
    if files.lexists(dest):
        raise Failed(model_sync.not_this_version(dest, params['version']))
    staging = model_sync.staging_dir(dest)
    plan = model_sync.transfers(manifest, files.sizes(staging, manifest))
    row = model_sync.own_row(params['peers'], params['host'] or '', params['distribution'], params['fanout'])
    source = row['source'] or 'mirror'
    problem = model_sync.source_problem(row, dest, manifest, params['mirror'], params['version'])
    if problem:
        raise Failed(problem)
    result.update(changed=True, state='would sync' if check_mode else 'synced', source=source, wave=row['wave'],
                  files=[dict(item, bytes=0) for item in plan])
    if diff:
        result['diff'] = model_sync.diff(dest, plan, manifest)
    if check_mode:
        result['transferred_bytes'] = {source: model_sync.remaining_bytes(plan)}
        return result

    if row['source'] is not None:
        problem = files.unsafe(params['known_hosts']) if files.exists(params['known_hosts']) else None
        if problem:
            raise Failed('known_hosts %s is not trusted: %s' % (params['known_hosts'], problem))
    try:
        files.make_dirs(os.path.dirname(dest))
        for sub in model_sync.staging_subdirs(plan):
            files.make_dirs(os.path.join(staging, sub))
    except OSError as exc:
        raise Failed('Refusing to create the staging directory %s: %s' % (staging, exc))
    failed_marker = os.path.join(staging, model_sync.FAILED)
    if files.exists(failed_marker):
        files.unlink(failed_marker)
    progress = files.progress(params['progress_file'], model_sync.remaining_bytes(plan), source, row['wave'])
    try:
        source = wait_transfer_verify(params, result, plan, row, source, manifest, staging, files, mirror, peers,
                                      clock, progress)
    except Failed as exc:
        # what a waiting peer looks for (model_sync_access.state_answer)
        files.write_text(failed_marker, exc.msg[:1000] + '\n')
        progress.set(force=True, state='failed')
        raise
    return result


def wait_transfer_verify(params, result, plan, row, source, manifest, staging, files, mirror, peers, clock, progress):
    pipelined = params['distribution'] == 'pipelined'
    if row['source'] is not None and not pipelined:
        progress.set(force=True, state='waiting')
        why = wait_for_peer(params, row, peers, clock)
        if why is not None:
            result['fallback'] = '%s: %s' % (row['source'], why)
            if not params['mirror']:
                raise Failed(model_sync.no_fallback(row['source'], params['version'], why))
            source = result['source'] = 'mirror'

    started = clock.time()
    progress.started = started
    progress.set(force=True, state='transferring', source=source)
    used, early = {}, {}
    if pipelined:
        source = transfer_pipelined(params, plan, result, row, staging, files, mirror, peers, progress, used, early)
    else:
        transfer(plan, result, source, row, staging, files, mirror, peers, progress, early, params['rate_limit'])
    result['seconds'] = round(clock.time() - started, 3)

    progress.set(force=True, state='verifying')
    before = clock.time()
    findings, digests = verify(files, staging, manifest, early)
    if findings and pipelined:
        findings, again = refetch(params, findings, manifest, row, staging, files, mirror, peers, progress, used,
                                  result)
        digests.update(again)
    result['verify_seconds'] = round(clock.time() - before, 3)
    if findings:
        for name in model_sync.to_remove(findings):
            if files.exists(os.path.join(staging, name)):
                files.unlink(os.path.join(staging, name))
        raise Failed(model_sync.verify_failed(params['version'], source, findings))
    files.publish(staging, params['dest'], model_sync.marker_text(params['version'], manifest, source))
    if params['cache_path']:
        try:
            result['cache'] = files.record_cache(params['cache_path'], params['dest'], digests)
        except (IOError, OSError) as exc:
            result['cache'] = 'not written: %s' % exc
    progress.set(force=True, state='done')
    return source
