# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether root may trust a file or directory: pure judgements of lstat()/fstat() records, no I/O.

Root reads, copies, runs or trusts only what no less trusted user could have written or replaced (docs/security.md).
A record here is the few fields of an ``os.stat_result`` that decide it: ``kind`` ('dir', 'file', 'link' or
'other'), ``uid``, ``gid``, ``mode`` (the permission bits) and ``nlink``. The adapters (file_adapters.py) take the
records from file descriptors they hold open, so what is judged is what is then read or written.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import stat

GROUP_WRITE = stat.S_IWGRP
OTHER_WRITE = stat.S_IWOTH


def record_of(st):
    """The fields judged here, from an os.stat_result (lstat or fstat)."""
    if stat.S_ISLNK(st.st_mode):
        kind = 'link'
    elif stat.S_ISDIR(st.st_mode):
        kind = 'dir'
    elif stat.S_ISREG(st.st_mode):
        kind = 'file'
    else:
        kind = 'other'
    return {'kind': kind, 'uid': st.st_uid, 'gid': st.st_gid, 'mode': stat.S_IMODE(st.st_mode), 'nlink': st.st_nlink}


def others_may_write(record):
    """Why a user other than root could change this entry (or, for a directory, rename or replace what is in it),
    None when only root can. A symlink's own bits mean nothing: it is judged by its owner alone (only the owner or
    the owner of its directory can replace it)."""
    if record['uid'] != 0:
        return 'owned by uid %d' % record['uid']
    if record['kind'] == 'link':
        return None
    if record['mode'] & OTHER_WRITE:
        return 'writable by every user (mode %04o)' % record['mode']
    if record['mode'] & GROUP_WRITE and record['gid'] != 0:
        return 'writable by group %d (mode %04o)' % (record['gid'], record['mode'])
    return None


def saved_entry_problem(record):
    """Why a file or directory of a saved root-only copy (last-good, a cache root trusts) may not be trusted, None
    when it may: a directory or a single-link regular file that only root can have written."""
    if record['kind'] not in ('dir', 'file'):
        return 'a %s, not a file or directory' % ('symlink' if record['kind'] == 'link' else 'special file')
    if record['kind'] == 'file' and record['nlink'] != 1:
        return 'a file with %d hard links' % record['nlink']
    return others_may_write(record)


def tree_problems(records):
    """path -> problem for the entries of a tree that root may not run or import from (a venv): every entry must be
    one only root can change. ``records``: path -> record. Sorted, so that a report names the same ones each time."""
    found = []
    for path in sorted(records):
        problem = others_may_write(records[path])
        if problem:
            found.append((path, problem))
    return found


def tree_refusal(root, problems, limit=3):
    """The sentence that refuses a tree, naming its first few unsafe entries; None when there are none."""
    if not problems:
        return None
    shown = '; '.join('%s is %s' % (path, problem) for path, problem in problems[:limit])
    more = ' (and %d more)' % (len(problems) - limit) if len(problems) > limit else ''
    return ('%s can be changed by a user other than root, and root runs its Python: %s%s. Make it root\'s alone '
            '(chown -R root:root %s; chmod -R go-w %s).' % (root, shown, more, root, root))
