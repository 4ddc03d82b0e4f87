# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""file_adapters on real files in a temporary directory: ownership is what is judged, so these need root (chown)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.host.file_adapters import (
    UnsafePath, account_id, finish_swap, lookup, make_dir, open_dir, peek_file, put_dir, put_file, read_file,
    read_saved, remove_file, replace_dir, write_file,
)
from ansible_collections.llmops.sglang.plugins.module_utils.wait.wait_adapters import PhaseFile

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='judges ownership: needs root to chown')
USER = 4321  # any uid that is not root


@pytest.fixture
def tree(tmp_path):
    base = tmp_path / 'base'
    base.mkdir(mode=0o755)
    os.chmod(str(tmp_path), 0o755)
    return base


def saved(parent, name='last-good', files=None, uid=0, mode=0o700):
    path = parent / name
    path.mkdir(mode=mode)
    for entry, text in (files or {'unit': u'[Unit]\n', 'env': u''}).items():
        (path / entry).write_text(text)
        os.chmod(str(path / entry), 0o600)
    os.chown(str(path), uid, 0)
    return path


def test_a_copy_root_wrote_is_read_whole(tree):
    path = saved(tree)
    assert read_saved(str(path)) == ('dir', {'env': b'', 'unit': b'[Unit]\n'})
    (tree / 'cache.json').write_text(u'{}')
    assert read_saved(str(tree / 'cache.json')) == ('file', b'{}')


def test_a_copy_another_user_made_or_can_change_is_refused(tree):
    forged = saved(tree, uid=USER)
    with pytest.raises(UnsafePath, match='last-good is owned by uid %d' % USER):
        read_saved(str(forged))
    mixed = saved(tree, 'mixed')
    os.chown(str(mixed / 'unit'), USER, 0)
    with pytest.raises(UnsafePath, match='mixed/unit is owned by uid %d' % USER):
        read_saved(str(mixed))
    linked = saved(tree, 'linked')
    os.link(str(linked / 'unit'), str(tree / 'hardlink'))
    with pytest.raises(UnsafePath, match='2 hard links'):
        read_saved(str(linked))


def test_a_symlink_another_user_could_place_is_not_followed(tree):
    holder = tree / 'holder'
    holder.mkdir()
    target = saved(holder, 'last-good')
    users = tree / 'users'
    users.mkdir()
    os.chown(str(users), USER, 0)
    os.symlink(str(holder), str(users / 'state'))
    with pytest.raises(UnsafePath, match='the symlink state is in a directory owned by uid %d' % USER):
        read_saved(str(users / 'state' / 'last-good'))
    with pytest.raises(UnsafePath, match='the symlink state is in a directory owned by uid %d' % USER):
        write_file(str(users / 'state'), 'x', b'x')
    assert not os.path.exists(str(holder / 'x'))
    # the same link in a directory only root can change is root's own, and is followed
    os.symlink(str(holder), str(tree / 'alias'))
    assert read_saved(str(tree / 'alias' / 'last-good'))[0] == 'dir'
    # the copy itself is never a link
    os.symlink(str(target), str(tree / 'lg-link'))
    with pytest.raises(UnsafePath, match='lg-link is a symlink, not a file or directory'):
        read_saved(str(tree / 'lg-link'))


def test_write_file_is_whole_idempotent_and_refuses_a_directory_others_may_change(tree):
    assert write_file(str(tree), 'a.prom', b'x 1\n') is True
    assert (tree / 'a.prom').read_bytes() == b'x 1\n'
    assert oct(os.stat(str(tree / 'a.prom')).st_mode & 0o777) == oct(0o644)
    assert write_file(str(tree), 'a.prom', b'x 1\n') is False
    assert write_file(str(tree), 'a.prom', b'x 1\n', 0o600) is True
    assert sorted(os.listdir(str(tree))) == ['a.prom']  # no temporary left
    open_dir(str(tree))  # reachable
    os.chmod(str(tree), 0o777)
    with pytest.raises(UnsafePath, match='writable by every user'):
        write_file(str(tree), 'b.prom', b'')


def test_remove_file_is_idempotent_and_refuses_a_directory_others_may_change(tree):
    write_file(str(tree), 'a.prom', b'x 1\n')
    assert remove_file(str(tree), 'a.prom') is True
    assert remove_file(str(tree), 'a.prom') is False
    write_file(str(tree), 'a.prom', b'x 1\n')
    os.chmod(str(tree), 0o777)
    with pytest.raises(UnsafePath, match='writable by every user'):
        remove_file(str(tree), 'a.prom')
    assert (tree / 'a.prom').exists()


def test_the_waiters_phase_file_is_written_cleared_and_refused_where_others_may_write(tree):
    phase_file = PhaseFile(str(tree), 'sglang-k26.service')
    assert phase_file.path == str(tree / 'sglang-k26.phase.prom')
    phase_file.clear()  # nothing there yet
    phase_file.show('weights', 1764720000.4)
    assert 'sglang_deploy_phase_started_timestamp_seconds{unit="sglang-k26.service",phase="weights"} 1764720000' in (
        tree / 'sglang-k26.phase.prom').read_text()
    phase_file.clear()
    assert os.listdir(str(tree)) == []
    PhaseFile(str(tree / 'absent'), 'sglang-k26.service').show('weights', 1.0)  # no textfile directory: nothing
    os.chmod(str(tree), 0o777)
    with pytest.raises(OSError, match='writable by every user'):
        phase_file.show('weights', 1.0)
    assert os.listdir(str(tree)) == []


def test_replace_dir_swaps_a_whole_copy_in_and_leaves_nothing_beside_it(tree):
    os.chmod(str(tree), 0o700)
    replace_dir(str(tree), 'last-good', {'unit': b'one', 'env': b'e'})
    assert read_file(str(tree / 'last-good'), 'dir') == {'unit': b'one', 'env': b'e'}
    assert os.stat(str(tree / 'last-good')).st_mode & 0o7777 == 0o700
    assert os.stat(str(tree / 'last-good' / 'unit')).st_mode & 0o7777 == 0o600
    # a second save replaces the copy whole: a file the new one does not hold is gone
    (tree / 'last-good.new').mkdir()  # a save killed before its renames left this
    (tree / 'last-good.new' / 'half').write_text(u'x')
    replace_dir(str(tree), 'last-good', {'unit': b'two'})
    assert read_file(str(tree / 'last-good'), 'dir') == {'unit': b'two'}
    assert sorted(os.listdir(str(tree))) == ['last-good']


def test_a_swap_stopped_between_its_renames_is_finished_and_nothing_else_is_moved(tree):
    saved(tree, 'last-good.old')
    assert finish_swap(str(tree), 'last-good') is True
    assert sorted(os.listdir(str(tree))) == ['last-good']
    assert read_file(str(tree / 'last-good'), 'dir') == {'env': b'', 'unit': b'[Unit]\n'}
    assert finish_swap(str(tree), 'last-good') is False  # nothing to finish
    saved(tree, 'last-good.old', files={'unit': u'older'})
    assert finish_swap(str(tree), 'last-good') is False  # the copy is there: .old is the next save's to remove
    assert read_file(str(tree / 'last-good'), 'dir')['unit'] == b'[Unit]\n'


def test_replace_dir_refuses_a_directory_others_may_change(tree):
    os.chown(str(tree), USER, 0)
    with pytest.raises(UnsafePath, match='owned by uid %d' % USER):
        replace_dir(str(tree), 'last-good', {'unit': b'u'})
    assert os.listdir(str(tree)) == []


def test_read_file_says_none_for_nothing_and_refuses_the_other_kind_or_a_link(tree):
    assert read_file(str(tree / 'missing')) is None and read_file(str(tree / 'missing'), 'dir') is None
    (tree / 'f').write_text(u'x')
    assert read_file(str(tree / 'f')) == b'x'
    with pytest.raises(UnsafePath, match='is a file, not a directory'):
        read_file(str(tree / 'f'), 'dir')
    saved(tree, 'd')
    with pytest.raises(UnsafePath, match='is a directory, not a file'):
        read_file(str(tree / 'd'))
    os.symlink(str(tree / 'f'), str(tree / 'link'))
    with pytest.raises(UnsafePath, match='symlink'):
        read_file(str(tree / 'link'))


def test_make_dir_makes_a_missing_directory_root_0755_and_leaves_an_existing_entry(tree):
    old = os.umask(0o077)
    try:
        assert make_dir(str(tree / 'metrics'), check_mode=True) is True
        assert not (tree / 'metrics').exists()  # check mode makes nothing
        assert make_dir(str(tree / 'metrics')) is True
    finally:
        os.umask(old)
    st = os.stat(str(tree / 'metrics'))
    assert (st.st_uid, st.st_mode & 0o7777) == (0, 0o755)
    assert make_dir(str(tree / 'metrics')) is False
    # an entry another user placed is left as it is, for the writer to judge (and refuse)
    os.symlink('/etc', str(tree / 'link'))
    assert make_dir(str(tree / 'link')) is False and os.path.islink(str(tree / 'link'))
    # missing parents are made too, as install -d makes them (the textfile directory before its package is installed)
    assert make_dir(str(tree / 'lib' / 'prometheus' / 'node-exporter'), check_mode=True) is True
    assert not (tree / 'lib').exists()
    assert make_dir(str(tree / 'lib' / 'prometheus' / 'node-exporter')) is True
    for made in (tree / 'lib', tree / 'lib' / 'prometheus', tree / 'lib' / 'prometheus' / 'node-exporter'):
        st = os.stat(str(made))
        assert (st.st_uid, st.st_mode & 0o7777) == (0, 0o755)
    # a path through a file fails
    (tree / 'file').write_text(u'x')
    with pytest.raises(OSError):
        make_dir(str(tree / 'file' / 'metrics'))


def test_lookup_says_what_is_at_a_path_without_following_it(tree):
    assert lookup(str(tree / 'missing')) is None and lookup(str(tree / 'missing' / 'below')) is None
    (tree / 'd').mkdir(mode=0o750)
    os.chown(str(tree / 'd'), USER, USER)
    found = lookup(str(tree / 'd'))
    assert (found['kind'], found['uid'], found['gid'], found['mode']) == ('dir', USER, USER, 0o750)
    assert (found['owner'], found['group']) == (str(USER), str(USER))  # an id the host does not name
    assert lookup(str(tree))['owner'] == 'root'
    os.symlink(str(tree / 'd'), str(tree / 'to-d'))
    os.symlink(str(tree / 'missing'), str(tree / 'to-nothing'))
    assert lookup(str(tree / 'to-d'))['kind'] == 'link' and lookup(str(tree / 'to-d'))['to_dir'] is True
    assert lookup(str(tree / 'to-nothing')) == dict(lookup(str(tree / 'to-nothing')), target=str(tree / 'missing'),
                                                    to_dir=False)
    # another user's directory may hold a symlink to anywhere: looking below it is refused
    os.symlink('/etc', str(tree / 'd' / 'etc'))
    with pytest.raises(UnsafePath, match='the symlink etc is in a directory owned by uid %d' % USER):
        lookup(str(tree / 'd' / 'etc' / 'passwd'))


def test_peek_file_reads_only_a_plain_file_of_a_directory_only_root_can_change(tree):
    assert peek_file(str(tree / 'missing' / 'x')) == {'dir': None, 'entry': None, 'data': None}
    assert peek_file(str(tree / 'x'))['entry'] is None and peek_file(str(tree / 'x'))['dir']['kind'] == 'dir'
    (tree / 'x').write_text(u'A=1\n')
    assert peek_file(str(tree / 'x'))['data'] == b'A=1\n'
    os.symlink(str(tree / 'x'), str(tree / 'link'))
    linked = peek_file(str(tree / 'link'))
    assert (linked['entry']['kind'], linked['entry']['target'], linked['data']) == ('link', str(tree / 'x'), None)
    os.mkfifo(str(tree / 'fifo'))
    assert peek_file(str(tree / 'fifo'))['entry']['kind'] == 'other'  # looked at, never opened: nothing blocks
    os.chmod(str(tree), 0o777)
    assert peek_file(str(tree / 'x'))['data'] is None  # not read where another user could have swapped it


def test_put_dir_makes_or_sets_a_directory_whatever_the_umask_and_never_through_a_symlink(tree):
    old = os.umask(0o077)
    try:
        put_dir(str(tree / 'state'), USER, USER, 0o750, create=True)
    finally:
        os.umask(old)
    st = os.stat(str(tree / 'state'))
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (USER, USER, 0o750)
    put_dir(str(tree / 'state'), 0, 0, 0o700)
    st = os.stat(str(tree / 'state'))
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (0, 0, 0o700)
    with pytest.raises(OSError):
        put_dir(str(tree / 'state'), 0, 0, 0o700, create=True)  # it is there: never taken over silently
    (tree / 'target').mkdir(mode=0o755)
    os.symlink(str(tree / 'target'), str(tree / 'link'))
    with pytest.raises(OSError):
        put_dir(str(tree / 'link'), USER, USER, 0o777)
    st = os.stat(str(tree / 'target'))
    assert (st.st_uid, st.st_mode & 0o7777) == (0, 0o755)


def test_put_file_writes_root_root_whole_and_replaces_a_symlink_without_writing_through_it(tree):
    os.chown(str(tree), 0, USER)
    os.chmod(str(tree), 0o2755)  # a setgid directory would give a new file its group
    put_file(str(tree / 'k26.env'), b'A=1\n', 0o600)
    st = os.stat(str(tree / 'k26.env'))
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (0, 0, 0o600)
    assert (tree / 'k26.env').read_bytes() == b'A=1\n' and sorted(os.listdir(str(tree))) == ['k26.env']
    (tree / 'target').write_text(u'untouched')
    os.symlink(str(tree / 'target'), str(tree / 'k26.service'))
    put_file(str(tree / 'k26.service'), b'[Unit]\n', 0o644)
    assert not os.path.islink(str(tree / 'k26.service')) and (tree / 'target').read_text() == u'untouched'
    os.chmod(str(tree), 0o777)
    with pytest.raises(UnsafePath, match='writable by every user'):
        put_file(str(tree / 'k26.env'), b'A=2\n', 0o600)
    assert (tree / 'k26.env').read_bytes() == b'A=1\n'


def test_account_id_names_root_and_says_none_for_an_unknown_name():
    assert account_id('user', 'root') == 0 and account_id('group', 'root') == 0
    assert account_id('user', 'no-such-user-k26') is None and account_id('group', 'no-such-group-k26') is None
