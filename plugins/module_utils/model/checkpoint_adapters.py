# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checkpoint reads and the digest cache's write that sglang_preflight's checkpoint gate and sglang_model_sync's
verification share: a shard's safetensors framing, a file's sha256, and the root-only cache of verified digests.
What the bytes mean is decided by the pure unit (checkpoint: framing rules, the cache's format, the verdict)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import stat
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.llmops.sglang.plugins.module_utils.model import checkpoint

CHUNK = 8 * 1024 * 1024   # bytes per read while hashing


def shard_problem(full):
    """What is wrong with a .safetensors file's framing (checkpoint.safetensors_problem), None when nothing is."""
    with open(full, 'rb') as handle:
        head = handle.read(8)
        n = checkpoint.header_length(head)
        header = handle.read(n) if n is not None and n <= checkpoint.MAX_HEADER_SIZE else b''
        size = os.fstat(handle.fileno()).st_size
    return checkpoint.safetensors_problem(head, header, size)


def sha256_file(full):
    digest = hashlib.sha256()
    with open(full, 'rb') as handle:
        while True:
            block = handle.read(CHUNK)
            if not block:
                return digest.hexdigest()
            digest.update(block)


def write_cache(path, files):
    """Writes the cache of verified digests (checkpoint.render_cache of files) atomically, root-only, into a private
    directory it makes inside an existing state directory; says 'written' or why not."""
    directory = os.path.dirname(path)
    if not os.path.isdir(os.path.dirname(directory)):
        # The state directory is made (with its owner and mode) by the role after the preflight: never make it here.
        return 'not written: %s does not exist yet (the first deployment makes it)' % os.path.dirname(directory)
    if not os.path.isdir(directory):
        os.mkdir(directory, 0o700)
    st = os.lstat(directory)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077 or not stat.S_ISDIR(st.st_mode):
        return 'not written: %s is not a private directory of this user' % directory
    tmp = '%s.%d.tmp' % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_NOFOLLOW', 0), 0o600)
    with os.fdopen(fd, 'w') as handle:
        handle.write(checkpoint.render_cache(files))
    os.rename(tmp, path)
    return 'written'


class CheckpointFiles(object):
    """A checkpoint directory as the checkpoint gate reads it (preflight_driver.checkpoint_gate)."""

    isdir = staticmethod(os.path.isdir)
    exists = staticmethod(os.path.exists)
    realpath = staticmethod(os.path.realpath)
    shard_problem = staticmethod(shard_problem)
    write_cache = staticmethod(write_cache)

    @staticmethod
    def snapshot(path):
        """{relative path: (size, mtime_ns)} of every regular file (or symlink to one) under path, hidden ones too."""
        files = {}
        for root, _dirs, names in os.walk(path):
            for name in names:
                full = os.path.join(root, name)
                try:
                    st = os.lstat(full)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                    try:
                        st = os.stat(full)
                    except OSError:
                        continue
                    files[os.path.relpath(full, path)] = (st.st_size, st.st_mtime_ns)
        return files

    @staticmethod
    def read_bytes(path):
        """The file's bytes, None when it is absent or cannot be read."""
        try:
            with open(path, 'rb') as handle:
                return handle.read()
        except (IOError, OSError):
            return None

    @classmethod
    def read_text(cls, path):
        data = cls.read_bytes(path)
        return None if data is None else data.decode('utf-8', 'replace')

    @staticmethod
    def lstat(path):
        """(uid, mode) of path itself (a symlink is not followed), None when absent."""
        try:
            st = os.lstat(path)
        except OSError:
            return None
        return st.st_uid, st.st_mode

    @staticmethod
    def sha256_many(paths, workers):
        """sha256 of each file, in order, `workers` files at once."""
        with ThreadPoolExecutor(max_workers=workers) as pool:
            return list(pool.map(sha256_file, paths))
