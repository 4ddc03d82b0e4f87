# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for the few /proc and cgroup files the waiter reads (and the process start time sglang_info reads).

Used to check that the process answering on the server's port belongs to the watched unit: a
previous server left behind, or another unit on the same port, must not make a start look ready.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

TCP_LISTEN = '0A'
_SOCKET_LINK_RE = re.compile(r'^socket:\[(\d+)\]$')

# Where a unit's cgroup.procs lives: cgroup v2, then the v1/v2 hybrid hierarchies.
CGROUP_ROOTS = ('/sys/fs/cgroup', '/sys/fs/cgroup/unified', '/sys/fs/cgroup/systemd')


def listening_sockets(text):
    """{port: set of socket inodes} for the sockets in LISTEN state in /proc/net/tcp or /proc/net/tcp6 text.

    An inode of 0 (a socket whose owner is gone) still marks the port as listening, with no inode to match.
    """
    sockets = {}
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 4 or fields[3] != TCP_LISTEN:
            continue
        try:
            local_port = int(fields[1].rsplit(':', 1)[1], 16)
        except (IndexError, ValueError):
            continue
        inodes = sockets.setdefault(local_port, set())
        if len(fields) >= 10 and fields[9].isdigit() and fields[9] != '0':
            inodes.add(int(fields[9]))
    return sockets


def listening_inodes(text, port):
    """Inodes of the sockets listening on a TCP port, from /proc/net/tcp or /proc/net/tcp6 text."""
    return listening_sockets(text).get(port, set())


def socket_inode(link):
    """readlink() of /proc/PID/fd/N -> the socket inode, or None for anything else."""
    m = _SOCKET_LINK_RE.match(link or '')
    return int(m.group(1)) if m else None


def parse_pids(text):
    """cgroup.procs content -> list of PIDs."""
    return [int(x) for x in text.split() if x.isdigit()]


def cgroup_procs_paths(control_group):
    """Candidate cgroup.procs files of a unit's ControlGroup (as `systemctl show` prints it)."""
    if not control_group or not control_group.startswith('/'):
        return []
    return ['%s%s/cgroup.procs' % (root, control_group.rstrip('/')) for root in CGROUP_ROOTS]


def process_started_at(stat_text, boot_time, clock_ticks):
    """Epoch seconds a process started, from its /proc/PID/stat, /proc/stat's btime and SC_CLK_TCK; None if unknown."""
    try:
        # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
        fields = stat_text[stat_text.rindex(')') + 2:].split()
        return boot_time + int(fields[19]) / float(clock_ticks)
    except (ValueError, IndexError, ZeroDivisionError):
        return None


def boot_time_of(proc_stat_text):
    for line in proc_stat_text.splitlines():
        if line.startswith('btime '):
            return int(line.split()[1])
    return None
