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
    of O(peers) that has the version already, over SSH as O(ssh_user) with the key O(ssh_key). On the peer that
    account runs nothing but the role's forced command C(llmops_sglang_sync_serve.py), which answers two requests,
    C(state VERSION_DIR) and C(read OFFSET FILE) (it seeks past the bytes already here, so a resumed file is not
    read again), for files inside the peer's versions directories only (module_utils/model_sync_access.py).
  - B(Host keys.) Every connection uses C(StrictHostKeyChecking=yes) against O(known_hosts) only. A peer whose key
    is not in that file is not connected to; one whose key does not match is refused by ssh before anything is
    read. Either way the result's RV(fallback) names the peer and why, and the host falls back to the mirror (a
    different source, nothing read from that peer) or fails if there is no mirror. O(ssh_options) may not change
    host key checking.
  - B(Ownership.) Root writes only through paths that root (or the user the module runs as) owns and nobody else
    can write. The versions directory and its parents, the staging directory, the progress file's directory and
    O(known_hosts) are checked (resolved, then each component with C(lstat)) before anything is written, and the
    module fails naming the path otherwise. The directories it creates are 0755, the files 0644.
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
  - C(ssh) (openssh-client) for peer transfers; the peers need C(sshd), the account O(ssh_user) and its forced command
    (the M(llmops.sglang.server) role sets both up, tasks/model_sync_access.yml)
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
    description: Private key on this host that the peers accept for O(ssh_user) (the role generates one per host).
    type: path
    default: /var/lib/llmops-sglang/model-sync/id_ed25519
  ssh_user:
    description: The account on the peers (restricted to the forced command that serves model files). Never C(root).
    type: str
    default: sglang-sync
  known_hosts:
    description:
      - The only known_hosts file peer connections trust (C(StrictHostKeyChecking=yes), C(UserKnownHostsFile) set
        to it, C(GlobalKnownHostsFile=/dev/null)). The role writes it from C(sglang_model_source.known_hosts) and
        the peers' own host keys read over the Ansible connection.
      - It must belong to root (or the user the module runs as) and be writable by nobody else, like its directories.
    type: path
    default: /var/lib/llmops-sglang/model-sync/known_hosts
  ssh_options:
    description:
      - More C(ssh) options, for example C([-c, aes128-gcm@openssh.com]).
      - Options about host key checking (C(StrictHostKeyChecking), C(UserKnownHostsFile), C(GlobalKnownHostsFile),
        C(KnownHostsCommand), C(UpdateHostKeys), C(HostKeyAlias), C(VerifyHostKeyDNS), C(CheckHostIP)) are refused.
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

- name: Peers only, with an operator's key and known_hosts file
  llmops.sglang.sglang_model_sync:
    dest: /models/Kimi-K2.6.versions/k26-2026-11-30
    version: k26-2026-11-30
    manifest: "{{ k26_manifest }}"
    host: "{{ inventory_hostname }}"
    peers: "{{ k26_peers }}"
    ssh_key: /etc/llmops/model-peer-key
    known_hosts: /etc/llmops/model-peer-known-hosts
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
  description:
    - "Why the assigned peer was not used, empty when it was: C(PEER: reason), for example its own sync failed,
      the wait ran out, its host key is not in O(known_hosts) or does not match, it refused the request."
  returned: always
  type: str
  sample: "gpu-01: its host key does not match the known one (StrictHostKeyChecking=yes): refused, nothing read from it"

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
import threading
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.parse import quote
from ansible.module_utils.urls import open_url

from ansible_collections.llmops.sglang.plugins.module_utils import checkpoint, model_sync, model_sync_access as access
from ansible_collections.llmops.sglang.plugins.module_utils.checkpoint_adapters import sha256_file, shard_problem, write_cache

CHUNK = 1024 * 1024
FAILED = model_sync.FAILED


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
    """ssh with host key checking fixed: ssh takes the first value it is given for an option, so these come first,
    and ssh_options may not name them anyway (access.ssh_options_problem)."""
    return (['ssh', '-i', params['ssh_key'], '-o', 'IdentitiesOnly=yes', '-o', 'BatchMode=yes',
             '-o', 'StrictHostKeyChecking=yes', '-o', 'UserKnownHostsFile=%s' % params['known_hosts'],
             '-o', 'GlobalKnownHostsFile=/dev/null', '-o', 'UpdateHostKeys=no', '-o', 'CheckHostIP=no',
             '-o', 'ConnectTimeout=%d' % min(30, params['timeout']), '-o', 'ServerAliveInterval=%d' % max(1, params['timeout'] // 3)]
            + params['ssh_options'] + ['-l', params['ssh_user'], '--', address, command])


def host_key_problem(params, address):
    """Why this peer must not be connected to at all (its host key is not in known_hosts), or None."""
    try:
        with open(params['known_hosts']) as handle:
            text = handle.read()
    except (IOError, OSError) as exc:
        return 'known_hosts %s cannot be read (%s): nothing is read from a peer whose host key is not known' % (
            params['known_hosts'], exc)
    if not access.known_keys(text, address, access.ssh_port(params['ssh_options'])):
        return ('its host key is not in %s (give it in sglang_model_source.known_hosts, or let the role read it over '
                'the Ansible connection): not connected to, nothing read from it' % params['known_hosts'])
    return None


def peer_state(module, params, address):
    """'ready' (the peer has the version), 'failed' (its sync failed), 'pending', or 'refused: ...' (its host key is
    unknown or does not match: nothing may be read from it), or 'unreachable: ...'."""
    problem = host_key_problem(params, address)
    if problem:
        return 'refused: ' + problem
    rc, out, err = module.run_command(ssh_argv(params, address, access.check_state_request(params['dest'])))
    if rc != 0:
        why = access.ssh_failure(rc, err or out)
        return ('refused: ' if 'host key' in why else 'unreachable: ') + why
    return out.strip()


def path_chain(path):
    """[(path, uid, mode)] of the resolved path's existing components, from '/' down (lstat each)."""
    real = os.path.realpath(path)
    chain = []
    current = '/'
    for part in [''] + [p for p in real.split('/') if p]:
        current = os.path.join(current, part) if part else '/'
        try:
            st = os.lstat(current)
        except OSError:
            break
        chain.append((current, st.st_uid, st.st_mode))
    return chain


def unsafe(path, trusted):
    return access.unsafe_path_problem(path_chain(path), trusted)


def make_dirs(path, trusted):
    """os.makedirs(path, 0o755) with each new directory's mode set explicitly (no umask surprise), after checking
    that the existing part of the path is root's (or ours) alone."""
    missing = []
    current = os.path.normpath(path)
    while not os.path.lexists(current):
        missing.append(current)
        current = os.path.dirname(current)
    problem = unsafe(current, trusted)
    if problem:
        raise OSError(problem)
    for directory in reversed(missing):
        os.mkdir(directory, 0o755)
        os.chmod(directory, 0o755)


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
    argv = ssh_argv(params, address, access.check_read_request(remote, os.path.dirname(params['dest']), offset))
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
        raise TransferError('ssh %s read %s: %s' % (address, remote, access.ssh_failure(rc, err)))
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
            ssh_key=dict(type='path', default='/var/lib/llmops-sglang/model-sync/id_ed25519'),
            ssh_user=dict(type='str', default='sglang-sync'),
            known_hosts=dict(type='path', default='/var/lib/llmops-sglang/model-sync/known_hosts'),
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
    if params['ssh_user'] == 'root':
        module.fail_json(msg='ssh_user: peer transfers never log in as root; give the sync account (default sglang-sync)')
    problem = access.ssh_options_problem(params['ssh_options'])
    if problem:
        module.fail_json(msg='ssh_options: ' + problem)
    dest = params['dest'].rstrip('/')
    params['dest'] = dest
    trusted = (0, os.geteuid())
    for path, what in ((os.path.dirname(dest), 'the versions directory'), (staging_dir(dest), 'the staging directory'),
                       (dest, 'the version directory'), (os.path.dirname(params['progress_file'] or '/'), 'progress_file\'s directory')):
        # what root writes through: nobody but root (or us) may own or write any part of it (checked as it exists now)
        if os.path.lexists(path) and path != '/':
            if os.path.islink(path) and path in (staging_dir(dest), dest):
                module.fail_json(msg='%s (%s) is a symlink: the sync writes only into directories it made' % (path, what))
            problem = unsafe(path, trusted)
            if problem:
                module.fail_json(msg='Refusing to write through %s (%s): %s' % (path, what, problem))
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
    if row['source'] is not None:
        try:
            access.check_state_request(dest)
            for name in manifest:
                access.check_read_request(os.path.join(dest, name), os.path.dirname(dest))
        except access.Refused as exc:
            module.fail_json(msg='No peer could serve this version (%s): a version that peers sync needs plain '
                                 'directory and file names' % exc, **result)
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

    if row['source'] is not None:
        problem = unsafe(params['known_hosts'], trusted) if os.path.exists(params['known_hosts']) else None
        if problem:
            module.fail_json(msg='known_hosts %s is not trusted: %s' % (params['known_hosts'], problem), **result)
    try:
        make_dirs(os.path.dirname(dest), trusted)
        for sub in sorted(set(os.path.dirname(i['file']) for i in plan)):
            make_dirs(os.path.join(staging, sub), trusted)
    except OSError as exc:
        module.fail_json(msg='Refusing to create the staging directory %s: %s' % (staging, exc), **result)
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
            if state == 'failed' or state.startswith(('unreachable', 'refused')) or time.time() >= deadline:
                why = {'failed': 'its own sync failed'}.get(state, state.split(': ', 1)[-1] if state != 'pending' else
                                                            'not ready after %ds' % params['peer_wait'])
                result['fallback'] = '%s: %s' % (row['source'], why)
                if not params['mirror']:
                    failed('The peer %s that was to serve version %s was not used: %s; and '
                           'sglang_model_source.mirror is not set.' % (row['source'], params['version'], why))
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
