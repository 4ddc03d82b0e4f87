# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The I/O of sglang_model_sync, as adapters model_sync_driver calls: the version and staging directories
(SyncFiles: ownership checks, directories, sizes, verification reads, the marker, the rename, the digest cache),
the progress file, the mirror (HTTP with Range) and the peers (ssh to their forced command). What they read is
decided on by the pure units (model_sync, model_sync_access, checkpoint)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import queue
import shutil
import tempfile
import threading
import time
from urllib.parse import quote

from ansible_collections.llmops.sglang.plugins.module_utils.model import checkpoint, model_sync, model_sync_access as access
from ansible_collections.llmops.sglang.plugins.module_utils.model.checkpoint_adapters import sha256_file, shard_problem, write_cache
from ansible_collections.llmops.sglang.plugins.module_utils.model.model_sync import TransferError

CHUNK = 1024 * 1024


class Progress(object):
    """The progress JSON (model_sync.progress), rewritten atomically at most once a second unless forced."""

    def __init__(self, path, total, source, wave, clock):
        self.path = path
        self.clock = clock
        self.status = {'state': 'transferring', 'source': source, 'wave': wave, 'done': 0, 'total': total,
                       'rate': 0.0, 'eta': None, 'file': None}
        self.started = clock.time()
        self.base = 0
        self.written = 0.0

    def set(self, force=False, **fields):
        self.status.update(fields)
        now = self.clock.time()
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


def file_identity(path):
    """(inode, size, mtime_ns) of a file: what must not change between its hashing and its check."""
    st = os.stat(path)
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class Hasher(object):
    """sha256 of whole files on one background thread, in the order they are handed over, while the transfer of the
    next files goes on (verification then waits only for the last file's digest, not for all of them). A digest
    counts at the check only if the file is still the one hashed (inode, size and mtime as while it was hashed, the
    trust the preflight gate's digest cache gives); else the check hashes it again."""

    def __init__(self, digest):
        self.digest = digest
        self.jobs = queue.Queue()
        self.thread = None

    def work(self):
        while True:
            path, box, done = self.jobs.get()
            try:
                before = file_identity(path)
                digest = self.digest(path)
                if file_identity(path) == before:
                    box['digest'], box['identity'] = digest, before
            except (IOError, OSError):
                pass
            done.set()

    def submit(self, path):
        """A function that returns the file's digest once computed, None when it could not be read or the file
        changed since (hash it then)."""
        if self.thread is None:
            self.thread = threading.Thread(target=self.work)
            self.thread.daemon = True
            self.thread.start()
        box, done = {}, threading.Event()
        self.jobs.put((path, box, done))

        def result():
            done.wait()
            try:
                same = box.get('identity') is not None and file_identity(path) == box['identity']
            except (IOError, OSError):
                same = False
            return box['digest'] if same else None
        return result


class SyncFiles(object):
    """This host's side: what root writes through, and the staging and version directories."""

    exists = staticmethod(os.path.exists)
    lexists = staticmethod(os.path.lexists)
    islink = staticmethod(os.path.islink)
    getsize = staticmethod(os.path.getsize)
    unlink = staticmethod(os.unlink)
    shard_problem = staticmethod(shard_problem)
    sha256 = staticmethod(sha256_file)

    def __init__(self, clock):
        self.clock = clock
        self.trusted = (0, os.geteuid())
        self.hasher = Hasher(sha256_file)

    def hash_soon(self, path):
        """The digest of a file that arrived whole, computed in the background (Hasher.submit)."""
        return self.hasher.submit(path)

    def unsafe(self, path):
        """Why root must not write through path (model_sync_access.unsafe_path_problem), or None."""
        return access.unsafe_path_problem(path_chain(path), self.trusted)

    def make_dirs(self, path):
        """os.makedirs(path, 0o755) with each new directory's mode set explicitly (no umask surprise), after
        checking that the existing part of the path is root's (or ours) alone."""
        missing = []
        current = os.path.normpath(path)
        while not os.path.lexists(current):
            missing.append(current)
            current = os.path.dirname(current)
        problem = self.unsafe(current)
        if problem:
            raise OSError(problem)
        for directory in reversed(missing):
            os.mkdir(directory, 0o755)
            os.chmod(directory, 0o755)

    @staticmethod
    def read_text(path):
        """The file's text, None when it does not exist."""
        if not os.path.exists(path):
            return None
        with open(path) as handle:
            return handle.read()

    @staticmethod
    def write_text(path, text):
        with open(path, 'w') as handle:
            handle.write(text)

    @staticmethod
    def sizes(staging, manifest):
        """{file: size} of the manifest's files the staging directory holds."""
        sizes = {}
        for name in manifest:
            try:
                sizes[name] = os.stat(os.path.join(staging, name)).st_size
            except OSError:
                pass
        return sizes

    @staticmethod
    def publish(staging, dest, marker_text):
        """The marker written (and synced) into the staging directory, then the directory renamed to dest."""
        with open(os.path.join(staging, model_sync.MARKER), 'w') as handle:
            handle.write(marker_text)
            handle.flush()
            os.fsync(handle.fileno())
        os.rename(staging, dest)

    @staticmethod
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

    def progress(self, path, total, source, wave):
        return Progress(path, total, source, wave, self.clock)


def copy_stream(read, handle, progress, rate=0):
    """Copies until the end, at most ``rate`` bytes/s (0: no cap; model_sync_access.pace)."""
    count = 0
    started = time.monotonic()
    while True:
        block = read(CHUNK)
        if not block:
            return count
        handle.write(block)
        handle.flush()  # a host following this file (pipelined) sees each block as it lands
        count += len(block)
        progress.add(len(block))
        time.sleep(access.pace(count, time.monotonic() - started, rate))


class Mirror(object):
    """The mirror: GET MIRROR/FILE, from an offset with Range; open_url is Ansible's (the module passes it)."""

    def __init__(self, params, open_url):
        self.params = params
        self.open_url = open_url

    def fetch(self, name, path, offset, progress):
        url = self.params['mirror'].rstrip('/') + '/' + quote(name)
        headers = {'Range': 'bytes=%d-' % offset} if offset else {}
        try:
            response = self.open_url(url, headers=headers, timeout=self.params['timeout'])
        # urllib's errors have no common base
        except Exception as exc:  # pylint: disable=broad-except
            raise TransferError('GET %s: %s' % (url, exc))
        if offset and response.getcode() != 206:
            offset = 0  # the server ignored the Range: start over
        count = 0
        try:
            with open(path, 'ab' if offset else 'wb') as handle:
                count = copy_stream(response.read, handle, progress, self.params['rate_limit'])
        # a reset connection, a timeout
        except Exception as exc:  # pylint: disable=broad-except
            raise TransferError('GET %s: interrupted: %s' % (url, exc))
        return count


class Peers(object):
    """The peers, over ssh as the sync account, whose forced command answers `state` and `read` requests."""

    def __init__(self, module, params):
        self.module = module
        self.params = params
        self.control_dir = None
        self.used = []

    def argv(self, address, request):
        """ssh for one request, sharing one connection per peer for the whole run (a root-only 0700 directory from
        mkdtemp holds the sockets; close() ends the connections and removes it)."""
        if self.control_dir is None:
            self.control_dir = tempfile.mkdtemp(prefix='llmops-sync-ssh-')
        if address not in self.used:
            self.used.append(address)
        return model_sync.ssh_argv(self.params, address, request, os.path.join(self.control_dir, '%C'))

    def close(self):
        """Ends every shared connection of this run and removes the sockets' directory."""
        if self.control_dir is None:
            return
        for address in self.used:
            self.module.run_command(model_sync.ssh_close_argv(self.params, address,
                                                              os.path.join(self.control_dir, '%C')))
        shutil.rmtree(self.control_dir, ignore_errors=True)
        self.control_dir = None

    def key_problem(self, address):
        """Why this peer is not connected to at all (its host key is not known), or None."""
        known_hosts = self.params['known_hosts']
        text = error = None
        try:
            with open(known_hosts) as handle:
                text = handle.read()
        except (IOError, OSError) as exc:
            error = exc
        return model_sync.host_key_problem(known_hosts, text, error, address, self.params['ssh_options'])

    def state(self, address):
        """'ready', 'failed', 'pending', 'refused: ...' or 'unreachable: ...' (model_sync.peer_answer); a peer whose
        host key is not known is not connected to at all."""
        problem = self.key_problem(address)
        if problem:
            return 'refused: ' + problem
        rc, out, err = self.module.run_command(self.argv(address, access.check_state_request(self.params['dest'])))
        return model_sync.peer_answer(rc, out, err)

    def fetch(self, address, name, path, offset, progress):
        """ssh's stdout goes straight into the file (a shell redirect: never through this process's memory); a
        thread reports the file's growth as progress while run_command waits."""
        dest = self.params['dest']
        remote = os.path.join(dest, name)
        request = access.check_read_request(remote, os.path.dirname(dest), offset)
        return self.stream(address, request, remote, path, offset, progress)

    def follow(self, address, name, path, offset, size, progress):
        """The peer's `follow`: the file up to ``size`` while it may still be arriving there (pipelined), paced
        by the peer to rate_limit, ending with an error when the peer's sync failed or stalled for `timeout` s."""
        problem = self.key_problem(address)
        if problem:
            raise TransferError(problem)
        dest = self.params['dest']
        remote = os.path.join(dest, name)
        request = access.check_follow_request(remote, os.path.dirname(dest), offset, size, self.params['timeout'],
                                              self.params['rate_limit'])
        return self.stream(address, request, remote, path, offset, progress)

    def stream(self, address, request, remote, path, offset, progress):
        """Runs one request on the peer with its stdout appended to path (truncated first when offset is 0)."""
        argv = self.argv(address, request)
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
            rc, _out, err = self.module.run_command(['sh', '-c', 'f=$1; shift; exec "$@" >> "$f"', 'sh', path] + argv)
        finally:
            stop.set()
            watcher.join()
        count = os.path.getsize(path) - start
        if rc != 0:
            raise TransferError('ssh %s %s %s: %s' % (address, request.split(' ', 1)[0], remote, access.ssh_failure(rc, err)))
        return count
