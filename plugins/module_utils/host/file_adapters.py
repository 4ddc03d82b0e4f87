# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""File I/O for root that no less trusted user can redirect (the judgements are trust.py's).

A path is opened one component at a time from ``/`` with O_NOFOLLOW, holding each directory open: a symlink on the
way is followed only when it sits in a directory only root can change (so only root can have put it there), and
whatever is read or written is judged by fstat() of the descriptor actually used. A user who renames, replaces or
links an entry between a check and a use therefore changes nothing root reads or writes.

- ``open_dir``: a descriptor of a directory reached that way.
- ``read_saved``: a root-only saved copy (a file, or a flat directory of files) as bytes, or why it is refused.
- ``write_file``: a file written whole (temporary name, fsync, rename) into a directory only root can change.
- ``remove_file``: a file removed from a directory only root can change.
- ``publish_file``: a text file written whole into a directory only root can change, made when missing (as
  ``make_dir``); what it held before (``sglang_textfile``, ``sglang_deploy_metrics``).
- ``make_dir``: a directory and its missing parents made (root's, 0755), as ``install -d``; an existing one is left.
- ``read_file``: a file (bytes) or flat directory ({name: bytes}) only root can have written, None when absent.
- ``replace_dir``: a flat directory of files written whole beside the old one and swapped in (two renames);
  ``finish_swap`` completes a swap stopped between them.
- ``tree_records``: lstat records of every entry of a tree (the venv check).
- for ``sglang_config`` (its plan is config_files'): ``lookup`` (a path's own lstat record, a symlink not followed),
  ``peek_file`` (a file, its directory, and its bytes when only root can change that directory), ``put_dir`` (a
  directory made or given its owner and mode through a descriptor), ``put_file`` (a file written whole, root:root),
  ``account_id`` (a user's or group's id by name).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import grp
import os
import pwd

from ansible_collections.llmops.sglang.plugins.module_utils.host.trust import (
    others_may_write, record_of, saved_entry_problem,
)

MAX_LINKS = 40
DIR_FLAGS = os.O_RDONLY | getattr(os, 'O_DIRECTORY', 0) | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_CLOEXEC', 0)
FILE_FLAGS = os.O_RDONLY | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_CLOEXEC', 0)


class UnsafePath(Exception):
    """A path root will not use: the message says which entry and why."""


def _components(path):
    return [part for part in path.split('/') if part and part != '.']


def open_dir(path):
    """A descriptor of the directory at an absolute path, reached without following a symlink a user other than root
    could have placed. Raises UnsafePath, or OSError (ENOENT when a component is missing)."""
    if not path.startswith('/'):
        raise UnsafePath('%s is not an absolute path' % path)
    fd = os.open('/', DIR_FLAGS)
    seen = []  # the directories walked, for '..'
    todo = _components(path)
    links = 0
    try:
        while todo:
            name = todo.pop(0)
            if name == '..':
                if seen:
                    os.close(fd)
                    fd = seen.pop()
                continue
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            record = record_of(st)
            if record['kind'] == 'link':
                # only root can have put a link into a directory only root can change
                holder = others_may_write(record_of(os.fstat(fd)))
                links += 1
                if holder:
                    raise UnsafePath('%s: the symlink %s is in a directory %s' % (path, name, holder))
                if links > MAX_LINKS:
                    raise UnsafePath('%s: more than %d symlinks on the way' % (path, MAX_LINKS))
                target = os.readlink(name, dir_fd=fd)
                if target.startswith('/'):
                    for held in seen:
                        os.close(held)
                    seen = []
                    os.close(fd)
                    fd = os.open('/', DIR_FLAGS)
                todo = _components(target) + todo
                continue
            if record['kind'] != 'dir':
                raise OSError(errno.ENOTDIR, '%s: %s is not a directory' % (path, name))
            child = os.open(name, DIR_FLAGS, dir_fd=fd)
            seen.append(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise
    finally:
        for held in seen:
            os.close(held)


def _read_all(fd):
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b''.join(chunks)
        chunks.append(chunk)


def _read_file(dir_fd, name, where):
    fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    try:
        problem = saved_entry_problem(record_of(os.fstat(fd)))
        if problem:
            raise UnsafePath('%s is %s' % (where, problem))
        return _read_all(fd)
    finally:
        os.close(fd)


def read_saved(path):
    """(kind, content) of a saved copy only root can have written: ('file', bytes) or ('dir', {name: bytes}) for a
    flat directory of files. Raises UnsafePath naming the first entry that is not root's alone (a symlink, a
    hard-linked file, an entry another user owns or may write), or OSError (ENOENT: nothing there)."""
    parent, name = os.path.split(path.rstrip('/'))
    parent_fd = open_dir(parent or '/')
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        record = record_of(st)
        if record['kind'] == 'file':
            return 'file', _read_file(parent_fd, name, path)
        problem = saved_entry_problem(record)
        if problem:
            raise UnsafePath('%s is %s' % (path, problem))
        fd = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    finally:
        os.close(parent_fd)
    try:
        problem = saved_entry_problem(record_of(os.fstat(fd)))
        if problem:  # what was opened, not what was looked at
            raise UnsafePath('%s is %s' % (path, problem))
        files = {}
        for entry in sorted(os.listdir(fd)):
            files[entry] = _read_file(fd, entry, os.path.join(path, entry))
        return 'dir', files
    finally:
        os.close(fd)


def root_only_dir(path):
    """A descriptor of a directory that only root can change (UnsafePath otherwise)."""
    fd = open_dir(path)
    problem = others_may_write(record_of(os.fstat(fd)))
    if problem:
        os.close(fd)
        raise UnsafePath('%s is %s' % (path, problem))
    return fd


def _same(dir_fd, name, data, mode):
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        st = os.fstat(fd)
        if record_of(st)['kind'] != 'file' or (st.st_mode & 0o7777) != mode or st.st_uid != 0 or st.st_size != len(data):
            return False
        return os.read(fd, len(data) + 1) == data
    finally:
        os.close(fd)


def write_file(directory, name, data, mode=0o644, dir_fd=None):
    """Write ``data`` as ``directory/name`` (root-owned, ``mode``) whole: a temporary name, fsync, one rename inside
    a directory only root can change. True when the file changed. Raises UnsafePath or OSError."""
    fd = root_only_dir(directory) if dir_fd is None else dir_fd
    try:
        if _same(fd, name, data, mode):
            return False
        _write_whole(fd, name, data, mode)
        return True
    finally:
        if dir_fd is None:
            os.close(fd)


def _write_whole(fd, name, data, mode, owner=None):
    """data as dir_fd/name: a temporary name, (owner,) mode, fsync, one rename over whatever entry is there."""
    temporary = '.%s.%d.tmp' % (name, os.getpid())
    try:
        os.unlink(temporary, dir_fd=fd)
    except OSError:
        pass
    out = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | FILE_FLAGS, mode, dir_fd=fd)
    try:
        if owner is not None:
            os.fchown(out, owner[0], owner[1])
        os.fchmod(out, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(out, view):]
        os.fsync(out)
    finally:
        os.close(out)
    os.rename(temporary, name, src_dir_fd=fd, dst_dir_fd=fd)


def make_dir(path, check_mode=False):
    """Make the directory at path (root's, 0755) when nothing is there, and its missing parents the same way (as
    ``install -d``); True when it was (or would be) made. The existing part of the path is reached through no
    symlink another user could place; an existing entry is left as it is for the caller to judge. Raises
    UnsafePath or OSError."""
    parent, name = os.path.split(path.rstrip('/'))
    try:
        fd = open_dir(parent or '/')
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
        if check_mode:
            return True
        make_dir(parent)
        fd = open_dir(parent)
    try:
        try:
            os.stat(name, dir_fd=fd, follow_symlinks=False)
            return False
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
        if check_mode:
            return True
        os.mkdir(name, 0o755, dir_fd=fd)
        made = os.open(name, DIR_FLAGS, dir_fd=fd)
        try:
            os.fchmod(made, 0o755)  # whatever the umask
        finally:
            os.close(made)
        return True
    finally:
        os.close(fd)


def remove_file(directory, name):
    """Remove ``directory/name`` from a directory only root can change; True when it was there. Raises UnsafePath or
    OSError (not ENOENT)."""
    fd = root_only_dir(directory)
    try:
        os.unlink(name, dir_fd=fd)
        return True
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return False
        raise
    finally:
        os.close(fd)


def publish_file(path, text, mode, check_mode, create_dir=False):
    """(changed, text before) of writing ``text`` to ``path`` whole through no other user's link; with ``create_dir``
    its directory is made first when missing. Raises UnsafePath or OSError."""
    directory, name = os.path.split(path)
    if create_dir and make_dir(directory, check_mode) and check_mode:
        return True, ''  # a directory still to be made holds nothing yet
    fd = root_only_dir(directory)
    try:
        try:
            before = read_saved(path)[1].decode('utf-8', 'replace')
        except (UnsafePath, OSError, AttributeError):
            before = ''
        if check_mode:
            return before != text, before
        return write_file(directory, name, text.encode('utf-8'), mode, dir_fd=fd), before
    finally:
        os.close(fd)


def read_file(path, kind='file'):
    """What only root can have written at path, None when there is nothing: a file's bytes (kind 'file') or a flat
    directory's {name: bytes} (kind 'dir'). UnsafePath for a link, a hard-linked file, an entry another user may
    change, or the other kind; OSError otherwise."""
    try:
        found, data = read_saved(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise
    if found != kind:
        names = {'dir': 'directory', 'file': 'file'}
        raise UnsafePath('%s is a %s, not a %s' % (path, names[found], names[kind]))
    return data


def _exists(dir_fd, name):
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        return True
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return False
        raise


def _remove_flat(dir_fd, name):
    """Remove the flat directory dir_fd/name and its files (the role's own copies in a directory only root can
    change); nothing when it is not there."""
    if not _exists(dir_fd, name):
        return
    fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    try:
        for entry in os.listdir(fd):
            os.unlink(entry, dir_fd=fd)  # a subdirectory fails here (EISDIR): nothing the role writes
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=dir_fd)


def finish_swap(directory, name):
    """A swap stopped between its two renames leaves name.old complete and no name: move it back. True when it did."""
    fd = root_only_dir(directory)
    try:
        if _exists(fd, name) or not _exists(fd, name + '.old'):
            return False
        os.rename(name + '.old', name, src_dir_fd=fd, dst_dir_fd=fd)
        os.fsync(fd)
        return True
    finally:
        os.close(fd)


def replace_dir(directory, name, files, mode=0o600):
    """Make directory/name (root 0700) hold exactly ``files`` ({file name: bytes}, each root-owned with ``mode``): written
    whole into name.new, then name -> name.old, name.new -> name, name.old removed. Stopped anywhere, it leaves the
    old copy whole, as name or as name.old (finish_swap). ``directory`` must be changeable by root alone."""
    fd = root_only_dir(directory)
    try:
        fresh = name + '.new'
        _remove_flat(fd, fresh)
        os.mkdir(fresh, 0o700, dir_fd=fd)
        new_fd = os.open(fresh, DIR_FLAGS, dir_fd=fd)
        try:
            os.fchmod(new_fd, 0o700)
            for entry, data in sorted(files.items()):
                write_file(None, entry, data, mode, dir_fd=new_fd)
            os.fsync(new_fd)
        finally:
            os.close(new_fd)
        _remove_flat(fd, name + '.old')
        if _exists(fd, name):
            os.rename(name, name + '.old', src_dir_fd=fd, dst_dir_fd=fd)
        os.rename(fresh, name, src_dir_fd=fd, dst_dir_fd=fd)
        _remove_flat(fd, name + '.old')
        os.fsync(fd)
    finally:
        os.close(fd)


def tree_records(root):
    """path -> trust record (lstat, links not followed) of the root and every entry below it."""
    records = {root: record_of(os.lstat(root))}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            try:
                records[path] = record_of(os.lstat(path))
            except OSError:  # removed while walking: nothing to judge
                pass
    return records


def _names(record):
    """A record with its owner's and group's names (the id, as text, for an id the host does not name)."""
    try:
        owner = pwd.getpwuid(record['uid']).pw_name
    except KeyError:
        owner = str(record['uid'])
    try:
        group = grp.getgrgid(record['gid']).gr_name
    except KeyError:
        group = str(record['gid'])
    return dict(record, owner=owner, group=group)


def lookup(path):
    """The lstat record of path's own entry (owner and group named; a symlink's ``target`` and ``to_dir``, whether it
    leads to a directory open_dir reaches) with its directory reached as open_dir reaches it; None when nothing is
    there (also when a parent is missing). Raises UnsafePath (another user's symlink on the way) or OSError."""
    parent, name = os.path.split(path.rstrip('/'))
    try:
        fd = open_dir(parent or '/')
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise
    try:
        try:
            record = _names(record_of(os.stat(name, dir_fd=fd, follow_symlinks=False)))
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return None
            raise
        if record['kind'] == 'link':
            record['target'] = os.readlink(name, dir_fd=fd)
            try:
                os.close(open_dir(path))
                record['to_dir'] = True
            except OSError:
                record['to_dir'] = False
        return record
    finally:
        os.close(fd)


def peek_file(path):
    """{'dir': fstat record of path's directory (None when missing), 'entry': lstat record of path's entry with its
    owner's names and a symlink's target (None when missing), 'data': its bytes when it is a regular file in a
    directory only root can change (None otherwise)}. Nothing is followed at the last entry, and a FIFO never
    blocks the read. Raises UnsafePath or OSError."""
    parent, name = os.path.split(path)
    try:
        fd = open_dir(parent)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return {'dir': None, 'entry': None, 'data': None}
        raise
    try:
        found = {'dir': record_of(os.fstat(fd)), 'entry': None, 'data': None}
        try:
            found['entry'] = _names(record_of(os.stat(name, dir_fd=fd, follow_symlinks=False)))
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return found
            raise
        if found['entry']['kind'] == 'link':
            found['entry']['target'] = os.readlink(name, dir_fd=fd)
        if found['entry']['kind'] == 'file' and others_may_write(found['dir']) is None:
            held = os.open(name, FILE_FLAGS | getattr(os, 'O_NONBLOCK', 0), dir_fd=fd)
            try:
                if record_of(os.fstat(held))['kind'] == 'file':  # what was opened, not what was looked at
                    found['data'] = _read_all(held)
            finally:
                os.close(held)
        return found
    finally:
        os.close(fd)


def put_dir(path, uid, gid, mode, create=False):
    """Make the directory at path (create) and give it uid:gid and mode, through a descriptor that follows no link
    at the last entry (a symlink there fails, ELOOP or ENOTDIR). Raises UnsafePath or OSError."""
    parent, name = os.path.split(path.rstrip('/'))
    fd = open_dir(parent or '/')
    try:
        if create:
            os.mkdir(name, 0o700, dir_fd=fd)  # nobody else's until it is given its owner and mode below
        held = os.open(name, DIR_FLAGS, dir_fd=fd)
        try:
            os.fchown(held, uid, gid)
            os.fchmod(held, mode)  # after chown, whatever the umask
        finally:
            os.close(held)
    finally:
        os.close(fd)


def put_file(path, data, mode):
    """Write data as path, root:root with mode, whole (temporary name, fsync, one rename that replaces the entry, never
    writes through it) into a directory only root can change. Raises UnsafePath or OSError."""
    directory, name = os.path.split(path)
    fd = root_only_dir(directory)
    try:
        _write_whole(fd, name, data, mode, owner=(0, 0))
    finally:
        os.close(fd)


def account_id(kind, name):
    """The id of the user (kind 'user') or group ('group') named, None when the host has none by that name."""
    try:
        return pwd.getpwnam(name).pw_uid if kind == 'user' else grp.getgrnam(name).gr_gid
    except KeyError:
        return None
