# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsing /proc/net/tcp* and cgroup files (lines recorded on a Debian 12 test host)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.host import procfs

TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 149006 1 0000000041cbe98d 100 0 0 10 0
   1: 0100007F:7531 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 159387 1 00000000063e7da5 100 0 0 10 0
   2: 0100007F:7531 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 161111 1 0000000000000000 20 4 30 10 -1
"""
TCP6 = ("  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when "
        "retrnsmt   uid  timeout inode\n"
        "   0: 00000000000000000000000000000000:7531 00000000000000000000000000000000:0000 0A 00000000:00000000 "
        "00:00000000 00000000     0        0 170001 1 00000000b12e6416 100 0 0 10 0\n")


def test_listening_inodes():
    assert procfs.listening_inodes(TCP, 30001) == {159387}     # 0x7531; the ESTABLISHED row is ignored
    assert procfs.listening_inodes(TCP, 22) == {149006}
    assert procfs.listening_inodes(TCP6, 30001) == {170001}
    assert procfs.listening_inodes(TCP, 30000) == set()
    assert procfs.listening_inodes('', 1) == set()
    assert procfs.listening_inodes('header\n garbage line\n', 1) == set()


def test_socket_inode():
    assert procfs.socket_inode('socket:[159387]') == 159387
    assert procfs.socket_inode('/dev/null') is None
    assert procfs.socket_inode('anon_inode:[eventfd]') is None
    assert procfs.socket_inode(None) is None


def test_cgroup_paths_and_pids():
    assert procfs.cgroup_procs_paths('/system.slice/sglang-k26.service') == [
        '/sys/fs/cgroup/system.slice/sglang-k26.service/cgroup.procs',
        '/sys/fs/cgroup/unified/system.slice/sglang-k26.service/cgroup.procs',
        '/sys/fs/cgroup/systemd/system.slice/sglang-k26.service/cgroup.procs',
    ]
    assert procfs.cgroup_procs_paths('') == []
    assert procfs.parse_pids('327\n330\n\n') == [327, 330]
