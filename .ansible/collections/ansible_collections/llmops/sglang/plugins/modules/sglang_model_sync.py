#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: sglang_model_sync
short_description: Bring a checkpoint version to a host from a mirror or from a peer that has it, resumably
version_added: 0.1.0
description:
  - Fills the version directory O(dest) with the files of O(manifest), while the server keeps running on whatever
    directory its unit names now. Files are written into a staging directory next to O(dest)
    (C(.staging-NAME)), verified there with the checkpoint gate's rules (safetensors framing against the file size,
    the manifest's sizes and sha256), and the staging directory is then renamed to O(dest) in one step, with a
    marker file (C(.llmops-model.json)) inside. A host whose O(dest) holds a marker for this manifest has the
    version; nothing is transferred.
  - B(Sources.) From the mirror O(mirror) (an HTTP directory, C(MIRROR/FILE) for each manifest file) or from a host
    of O(peers) that has the version already, over SSH (C(ssh PEER tail -c +OFFSET FILE); only ssh is needed on
    either side, and C(tail) seeks past the bytes already here, so a resumed file is not read again on the peer).
    Which source, and when, is decided by module_utils/model_sync.py from O(peers); hosts sync in waves, every host
    that has the version serves one that does not, and the mirror serves only in a wave where no host has it. A
    host waits (up to O(peer_wait) seconds) for its source to finish first; if the source fails or the wait runs
    out, it falls back to the mirror.
  - B(Resume.) A partial file in the staging directory is continued from its size (HTTP C(Range), or the peer's
    C(tail) offset); a file longer than declared is fetched again. A failed run leaves the staging directory as it
    is, so the next run continues; files that fail verification are removed so the next run fetches them again.
  - B(Progress) (bytes, rate, ETA) is written as JSON to O(progress_file) about once a second.
  - With O(cache_path), the digests verified here are recorded there (the preflight gate's verification cache,
    by the final path, size and mtime), so the gate that judges O(dest) next does not hash the files again.
author:
  - llmops.sglang maintainers (@llmops)
requirements:
  - C(ssh) (openssh-client) for peer transfers; the peers need C(sshd) and C(tail)
options:
  dest:
    description: The version directory, for example C(/models/Kimi-K2.6.versions/k26-2026-11-30). Its parent is created.
    type: path
    required: true
  version:
    description: The version's name (recorded in the marker).
    type: str
    required: true
  manifest:
    description: Relative file name to C({size, sha256}); both are required for every file.
    type: dict
    required: true
  mirror:
    description: URL of the HTTP directory that holds the files (C(MIRROR/FILE)); empty when only peers serve.
    type: str
    default: ""
  host:
    description: This host's name in O(peers).
    type: str
    default: ""
  peers:
    description:
      - The hosts taking part, in play order, as C({name, address, have}); C(have) is whether that host has the
        version. Every host must be given the same list (the role builds it from the play's hosts).
      - The peers hold the version at the same O(dest) path.
    type: list
    elements: dict
    default: []
  ssh_key:
    description: Private key on this host that the peers accept (for C(ssh_user)).
    type: path
    default: /root/.ssh/id_ed25519
  ssh_user:
    description: User on the peers.
    type: str
    default: root
  ssh_options:
    description: More C(ssh) options, for example C([-o, StrictHostKeyChecking=yes]).
    type: list
    elements: str
    default: []
  peer_wait:
    description: Seconds to wait for the assigned peer to have the version before falling back to the mirror.
    type: int
    default: 3600
  poll_interval:
    description: Seconds between two looks at the assigned peer while waiting.
    type: float
    default: 2.0
  timeout:
    description: Seconds a connection may stay silent before the transfer counts as interrupted.
    type: int
    default: 60
  progress_file:
    description: Where to write the progress JSON (state, source, done, total, rate, eta); not written when unset.
    type: path
  cache_path:
    description: The preflight gate's verification cache to record the verified digests in (see M(llmops.sglang.sglang_preflight)).
    type: path
attributes:
  check_mode:
    support: full
    description: Reports what would be transferred, from where, and from which offsets; transfers nothing.
  diff_mode:
    support: full
    description: The version directory before (absent, or its staging directory's partial files) and after.
  platform:
    support: full
    platforms: posix
    description: Linux hosts (C(ssh) and C(sh) for peer transfers).
notes:
  - The server is not touched; pointing the unit at O(dest) is the caller's (the M(llmops.sglang.server) role puts
    O(dest) into the unit's C(--model-path), so its last-known-good copy records which version served).
"""

EXAMPLES = r"""
- name: Bring version k26-2026-11-30 here, from the mirror or from a peer that has it
  llmops.sglang.sglang_model_sync:
    dest: /models/Kimi-K2.6.versions/k26-2026-11-30
    version: k26-2026-11-30
    manifest: "{{ k26_manifest }}"
    mirror: http://models.example.internal/k26-2026-11-30
    host: "{{ inventory_hostname }}"
    peers:
      - {name: gpu-01, address: 10.0.0.1, have: true}
      - {name: gpu-02, address: 10.0.0.2, have: false}
  register: sync
"""

RETURN = r"""
state:
  description: C(present) (had it already), C(synced), or C(would sync) (check mode).
  returned: always
  type: str
version_dir:
  description: The version directory (O(dest)).
  returned: always
  type: str
source:
  description: Where the bytes came from - C(mirror), a peer's name, or null when nothing was needed.
  returned: always
  type: str
wave:
  description: This host's wave in the fan-out (0 = first), null when it had the version.
  returned: always
  type: int
fallback:
  description: Why the assigned peer was not used (it failed, or the wait ran out), empty when it was.
  returned: always
  type: str
files:
  description: "Per file: [{file, size, offset, action, bytes}] (action fetch, resume, refetch or have; bytes transferred)."
  returned: always
  type: list
  elements: dict
transferred_bytes:
  description: Bytes transferred in this run (from each source).
  returned: always
  type: dict
  sample: {mirror: 0, gpu-01: 4194304}
seconds:
  description: Time the transfer took (waiting for the source excluded).
  returned: always
  type: float
verify_seconds:
  description: Time the verification took.
  returned: always
  type: float
"""

import json
import os
import shlex
import threading
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.parse import quote
from ansible.module_utils.urls import open_url

from ansible_collections.llmops.sglang.plugins.module_utils import checkpoint, model_sync
from ansible_collections.llmops.sglang.plugins.module_utils.checkpoint_adapters import sha256_file, shard_problem, write_cache

CHUNK = 1024 * 1024
FAILED = '.sync-failed'


class TransferError(Exception):
    pass


class Progress(object):
    def __init__(self, path, total, source, wave):
        self.path = path
        self.status = {'state': 'transferring', 'source': source, 'wave': wave, 'done': 0, 'total': total,
                       'rate': 0.0, 'eta': None, 'file': None}
        self.started = time.time()
        self.base = 0
        self.written = 0.0

    def set(self, force=False, **fields):
        self.status.update(fields)
        now = time.time()
        if not self.path or (not force and now - self.written < 1.0):
            return
        self.written = now
        self.status.update(model_sync.progress(self.status['done'], self.status['total'], now - self.started))
        tmp = self.path + '.tmp'
        try:
            with open(tmp, 'w') as handle:
                json.dump(self.status, handle)
            os.rename(tmp, self.path)
        except (IOError, OSError):
            pass  # a progress display never fails the sync

    def add(self, n):
        self.set(done=self.status['done'] + n)


def local_sizes(staging, manifest):
    sizes = {}
    for name in manifest:
        try:
            sizes[name] = os.stat(os.path.join(staging, name)).st_size
        except OSError:
            pass
    return sizes


def ssh_argv(params, address, command):
    return (['ssh', '-i', params['ssh_key'], '-o', 'BatchMode=yes', '-o', 'StrictHostKeyChecking=accept-new',
             '-o', 'ConnectTimeout=%d' % min(30, params['timeout']), '-o', 'ServerAliveInterval=%d' % max(1, params['timeout'] // 3)]
            + params['ssh_options'] + ['%s@%s' % (params['ssh_user'], address), command])


def peer_state(module, params, address):
    """'ready' (the peer has the version), 'failed' (its sync failed), 'pending', or 'unreachable: ...'."""
    dest = params['dest']
    staging = staging_dir(dest)
    command = 'if test -f %s; then echo ready; elif test -f %s; then echo failed; else echo pending; fi' % (
        shlex.quote(os.path.join(dest, model_sync.MARKER)), shlex.quote(os.path.join(staging, FAILED)))
    rc, out, err = module.run_command(ssh_argv(params, address, command))
    if rc != 0:
        return 'unreachable: %s' % (err or out).strip()[:200]
    return out.strip()


def staging_dir(dest):
    return os.path.join(os.path.dirname(dest), model_sync.STAGING_PREFIX + os.path.basename(dest))


def copy_stream(read, handle, progress):
    count = 0
    while True:
        block = read(CHUNK)
        if not block:
            return count
        handle.write(block)
        count += len(block)
        progress.add(len(block))


def fetch_http(params, name, path, offset, progress):
    url = params['mirror'].rstrip('/') + '/' + quote(name)
    headers = {'Range': 'bytes=%d-' % offset} if offset else {}
    try:
        response = open_url(url, headers=headers, timeout=params['timeout'])
    # urllib's errors have no common base
    except Exception as exc:  # pylint: disable=broad-except
        raise TransferError('GET %s: %s' % (url, exc))
    if offset and response.getcode() != 206:
        offset = 0  # the server ignored the Range: start over
    count = 0
    try:
        with open(path, 'ab' if offset else 'wb') as handle:
            count = copy_stream(response.read, handle, progress)
    # a reset connection, a timeout
    except Exception as exc:  # pylint: disable=broad-except
        raise TransferError('GET %s: interrupted: %s' % (url, exc))
    return count


def fetch_peer(module, params, address, name, path, offset, progress):
    """ssh's stdout goes straight into the file (a shell redirect: never through this process's memory); a thread
    reports the file's growth as progress while run_command waits."""
    remote = os.path.join(params['dest'], name)
    argv = ssh_argv(params, address, 'exec tail -c +%d -- %s' % (offset + 1, shlex.quote(remote)))
    if not offset:
        open(path, 'wb').close()
    start = os.path.getsize(path)
    stop = threading.Event()

    def watch():
        seen = start
        while not stop.wait(1.0):
            now = os.path.getsize(path)
            progress.add(now - seen)
            seen = now

    watcher = threading.Thread(target=watch)
    watcher.daemon = True
    watcher.start()
    try:
        rc, _out, err = module.run_command(['sh', '-c', 'f=$1; shift; exec "$@" >> "$f"', 'sh', path] + argv)
    finally:
        stop.set()
        watcher.join()
    count = os.path.getsize(path) - start
    if rc != 0:
        raise TransferError('ssh %s tail %s: rc=%d %s' % (address, remote, rc, (err or '').strip()[:300]))
    return count


def verify(staging, manifest):
    """The checkpoint gate's findings on the staging directory (framing, sizes, sha256) and the digests."""
    stats = local_sizes(staging, manifest)
    invalid = []
    for name in sorted(stats):
        problem = shard_problem(os.path.join(staging, name)) if name.endswith('.safetensors') else None
        if problem:
            invalid.append((name, problem))
    digests = dict((name, sha256_file(os.path.join(staging, name))) for name in checkpoint.to_hash(manifest, stats))
    return checkpoint.judge(invalid=invalid, manifest=manifest, stats=stats, digests=digests), digests


def record_cache(path, dest, digests):
    """Adds the verified digests to the preflight gate's cache (checkpoint_adapters.write_cache: root-only)."""
    files = {}
    if os.path.exists(path):
        with open(path) as handle:
            files = checkpoint.parse_cache(handle.read())
    for name, digest in digests.items():
        full = os.path.realpath(os.path.join(dest, name))
        st = os.stat(full)
        files[full] = {'size': st.st_size, 'mtime_ns': st.st_mtime_ns, 'sha256': digest}
    return write_cache(path, files)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type='path', required=True),
            version=dict(type='str', required=True),
            manifest=dict(type='dict', required=True),
            mirror=dict(type='str', default=''),
            host=dict(type='str', default=''),
            peers=dict(type='list', elements='dict', default=[]),
            ssh_key=dict(type='path', default='/root/.ssh/id_ed25519'),
            ssh_user=dict(type='str', default='root'),
            ssh_options=dict(type='list', elements='str', default=[]),
            peer_wait=dict(type='int', default=3600),
            poll_interval=dict(type='float', default=2.0),
            timeout=dict(type='int', default=60),
            progress_file=dict(type='path'),
            cache_path=dict(type='path'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        manifest = model_sync.check_manifest(params['manifest'])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    for peer in params['peers']:
        if not isinstance(peer.get('name'), str) or not peer['name']:
            module.fail_json(msg='peers: every entry needs a name, got %r' % (peer,))
    dest = params['dest'].rstrip('/')
    params['dest'] = dest
    marker = os.path.join(dest, model_sync.MARKER)
    result = dict(changed=False, version_dir=dest, state='present', source=None, wave=None, fallback='', files=[],
                  transferred_bytes={}, seconds=0.0, verify_seconds=0.0)
    if os.path.exists(marker):
        with open(marker) as handle:
            if model_sync.marker_matches(handle.read(), manifest):
                module.exit_json(**result)
    if os.path.lexists(dest):
        module.fail_json(msg='%s exists but is not a verified copy of version %s with this manifest (no matching %s): '
                             'name a new sglang_model_source.version, or remove the directory.'
                         % (dest, params['version'], model_sync.MARKER), **result)

    staging = staging_dir(dest)
    plan = model_sync.transfers(manifest, local_sizes(staging, manifest))
    row = model_sync.own_row(params['peers'], params['host'] or '')
    source = row['source'] or 'mirror'
    if source == 'mirror' and not params['mirror']:
        module.fail_json(msg='No host of the play has version %s yet and sglang_model_source.mirror is not set: '
                             'give a mirror, or sync one host first.' % params['version'], **result)
    result.update(changed=True, state='would sync' if module.check_mode else 'synced', source=source,
                  wave=row['wave'], files=[dict(item, bytes=0) for item in plan])
    if module._diff:
        result['diff'] = {'before': {'version_dir': dest, 'present': False,
                                     'partial': dict((i['file'], i['offset']) for i in plan if i['offset'])},
                          'after': {'version_dir': dest, 'present': True, 'files': len(manifest),
                                    'bytes': sum(i['size'] for i in plan)}}
    if module.check_mode:
        result['transferred_bytes'] = {source: model_sync.remaining_bytes(plan)}
        module.exit_json(**result)

    parent = os.path.dirname(dest)
    if not os.path.isdir(parent):
        os.makedirs(parent, 0o755)
    for sub in sorted(set(os.path.dirname(i['file']) for i in plan)):
        path = os.path.join(staging, sub)
        if not os.path.isdir(path):
            os.makedirs(path, 0o755)
    if os.path.exists(os.path.join(staging, FAILED)):
        os.unlink(os.path.join(staging, FAILED))
    progress = Progress(params['progress_file'], model_sync.remaining_bytes(plan), source, row['wave'])

    def failed(msg):
        with open(os.path.join(staging, FAILED), 'w') as handle:
            handle.write(msg[:1000] + '\n')
        progress.set(force=True, state='failed')
        module.fail_json(msg=msg, **result)

    if row['source'] is not None:
        progress.set(force=True, state='waiting')
        deadline = time.time() + params['peer_wait']
        while True:
            state = peer_state(module, params, row['source_address'])
            if state == 'ready':
                break
            if state == 'failed' or state.startswith('unreachable') or time.time() >= deadline:
                why = {'failed': 'its own sync failed'}.get(state, state if state != 'pending' else
                                                            'not ready after %ds' % params['peer_wait'])
                result['fallback'] = '%s: %s' % (row['source'], why)
                if not params['mirror']:
                    failed('The peer %s that was to serve version %s %s, and sglang_model_source.mirror is not '
                           'set.' % (row['source'], params['version'], why))
                source = result['source'] = 'mirror'
                break
            time.sleep(params['poll_interval'])

    started = time.time()
    progress.started = started
    progress.set(force=True, state='transferring', source=source)
    transferred = result['transferred_bytes'] = {source: 0}
    for item, shown in zip(plan, result['files']):
        if item['action'] == 'have':
            continue
        path = os.path.join(staging, item['file'])
        progress.set(file=item['file'])
        try:
            if source == 'mirror':
                count = fetch_http(params, item['file'], path, item['offset'], progress)
            else:
                count = fetch_peer(module, params, row['source_address'], item['file'], path, item['offset'], progress)
            got = os.path.getsize(path)
            if got != item['size']:
                # a connection closed early ends the body without an error (http.client's read(amt), ssh's pipe)
                raise TransferError('the connection ended after %d bytes' % count)
        except (TransferError, IOError, OSError) as exc:
            got = os.path.getsize(path) if os.path.exists(path) else 0
            failed('Transfer of %s from %s interrupted at %d of %d bytes: %s. The staging directory %s keeps it; '
                   'run again to resume from there.' % (item['file'], source, got, item['size'], exc, staging))
        shown['bytes'] = count
        transferred[source] += count
    result['seconds'] = round(time.time() - started, 3)

    progress.set(force=True, state='verifying')
    before = time.time()
    findings, digests = verify(staging, manifest)
    result['verify_seconds'] = round(time.time() - before, 3)
    if findings:
        for finding in findings:
            bad = os.path.join(staging, finding['file'])
            if finding['check'] in ('shard_invalid', 'manifest_size', 'manifest_hash') and os.path.exists(bad):
                os.unlink(bad)
        failed('Version %s from %s failed verification (those files were removed; run again to fetch them): %s'
               % (params['version'], source, ' '.join(f['message'] for f in findings)))
    with open(os.path.join(staging, model_sync.MARKER), 'w') as handle:
        handle.write(model_sync.marker_text(params['version'], manifest, source))
        handle.flush()
        os.fsync(handle.fileno())
    os.rename(staging, dest)
    if params['cache_path']:
        try:
            result['cache'] = record_cache(params['cache_path'], dest, digests)
        except (IOError, OSError) as exc:
            result['cache'] = 'not written: %s' % exc
    progress.set(force=True, state='done')
    module.exit_json(**result)


if __name__ == '__main__':
    main()
