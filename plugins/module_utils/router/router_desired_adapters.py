# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""I/O of the router's desired-workers file (the decisions are router_desired.py's).

Read and written by root through file_adapters (each path component opened with O_NOFOLLOW, judged by fstat of the
descriptor used): the file must be root's alone (one link, no other writer) in a directory only root can change, and
it is replaced whole (temporary name, fsync, rename), root 0600. Its readers and writers hold ``lock`` around a
read, change and write: the hosts of one batch are admitted (and drained) in parallel, each through a call delegated
to the router host, and without the lock two calls that read the same list each wrote back their own change only.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import os

from ansible_collections.llmops.sglang.plugins.module_utils.host.file_adapters import (
    UnsafePath, read_saved, root_only_dir, write_file)
from ansible_collections.llmops.sglang.plugins.module_utils.router.router_desired import parse, render

MODE = 0o600


def load(path):
    """The URLs the file lists, or None when there is no file. Raises UnsafePath (not root's alone) or ValueError
    (not a desired-workers file), each naming the path."""
    try:
        kind, data = read_saved(path)
    except OSError as err:
        if err.errno == errno.ENOENT:
            return None
        raise
    if kind != 'file':
        raise UnsafePath('%s is a directory, not a file' % path)
    problem = None
    try:
        return parse(data)
    except ValueError as err:
        problem = '%s: %s' % (path, err)
    raise ValueError(problem)


def store(path, urls):
    """Write the file (root 0600) listing these URLs; True when its content changed."""
    directory, name = os.path.split(path)
    return write_file(directory, name, render(urls), mode=MODE)


def lock(path):
    """Take an exclusive flock on the file's directory (root's alone: root_only_dir) and return its descriptor (None:
    no directory yet, nothing to lock; the router role creates it). Blocks while another call holds it. Raises
    UnsafePath or OSError."""
    try:
        fd = root_only_dir(os.path.dirname(path))
    except OSError as err:
        if err.errno != errno.ENOENT:
            raise
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def unlock(fd):
    """Release what ``lock`` took (closing the descriptor releases the flock)."""
    if fd is not None:
        os.close(fd)
