# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.llmops.sglang.plugins.module_utils.host.trust import (
    others_may_write, record_of, saved_entry_problem, tree_problems, tree_refusal,
)


def rec(kind='file', uid=0, gid=0, mode=0o644, nlink=1):
    return {'kind': kind, 'uid': uid, 'gid': gid, 'mode': mode, 'nlink': nlink}


def test_only_root_may_write_root_owned_entries_without_group_or_other_write():
    assert others_may_write(rec()) is None
    assert others_may_write(rec('dir', mode=0o775)) is None  # group root
    assert others_may_write(rec(uid=998)) == 'owned by uid 998'
    assert others_may_write(rec('dir', mode=0o1777)) == 'writable by every user (mode 1777)'
    assert others_may_write(rec(gid=998, mode=0o664)) == 'writable by group 998 (mode 0664)'
    # a link's bits mean nothing, its owner does
    assert others_may_write(rec('link', mode=0o777)) is None
    assert others_may_write(rec('link', uid=5, mode=0o777)) == 'owned by uid 5'


def test_a_saved_copy_holds_only_root_files_and_directories_with_one_link():
    assert saved_entry_problem(rec()) is None
    assert saved_entry_problem(rec('dir', mode=0o700)) is None
    assert saved_entry_problem(rec('link')) == 'a symlink, not a file or directory'
    assert saved_entry_problem(rec('other')) == 'a special file, not a file or directory'
    assert saved_entry_problem(rec(nlink=2)) == 'a file with 2 hard links'
    assert saved_entry_problem(rec('dir', uid=998, mode=0o755)) == 'owned by uid 998'


def test_a_tree_is_refused_naming_its_first_unsafe_entries_in_order():
    records = {'/v': rec('dir', mode=0o755), '/v/b': rec(uid=7), '/v/a': rec(mode=0o666), '/v/c': rec(uid=7),
               '/v/d': rec(uid=7), '/v/ok': rec()}
    problems = tree_problems(records)
    assert [entry[0] for entry in problems] == ['/v/a', '/v/b', '/v/c', '/v/d']
    text = tree_refusal('/v', problems)
    assert text.startswith('/v can be changed by a user other than root, and root runs its Python: '
                           '/v/a is writable by every user (mode 0666); /v/b is owned by uid 7; /v/c is owned by uid 7 '
                           '(and 1 more).')
    assert 'chown -R root:root /v; chmod -R go-w /v' in text
    assert tree_refusal('/v', []) is None


def test_record_of_reads_the_kind_from_stat(tmp_path):
    os.symlink('x', str(tmp_path / 'l'))
    assert record_of(os.lstat(str(tmp_path / 'l')))['kind'] == 'link'
    assert record_of(os.lstat(str(tmp_path)))['kind'] == 'dir'
    (tmp_path / 'f').write_text(u'x')
    assert record_of(os.lstat(str(tmp_path / 'f')))['kind'] == 'file'
