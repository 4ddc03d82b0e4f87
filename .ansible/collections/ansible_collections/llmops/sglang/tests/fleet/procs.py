# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mounts, processes, cgroups: small helpers over /proc and /sys."""

from __future__ import absolute_import, division, print_function

import contextlib
import os
import re
import signal
import time
from pathlib import Path

from .common import FleetError, log, run

__metaclass__ = type  # pylint: disable=invalid-name


def _unescape_mount_path(field):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts_under(path):
    """Mount points at or below path, deepest first (the order to unmount them in)."""
    prefix = str(path).rstrip("/")
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            point = _unescape_mount_path(line.split()[4])
            if point == prefix or point.startswith(prefix + "/"):
                found.append(point)
    return sorted(set(found), key=lambda p: (-p.count("/"), p))


def unmount_all(path):
    for point in mounts_under(path):
        if run(["umount", point], check=False, capture=True).returncode != 0:
            # Lazy as a last resort: a stuck mount must not block removing the rest of the fleet.
            run(["umount", "-l", point], check=False, capture=True)
    left = mounts_under(path)
    if left:
        raise FleetError("could not unmount: %s" % ", ".join(left))


def remove_tree(path):
    """rm -rf that refuses to cross into mounts (a bound /proc under a crashed build dir must never be emptied)."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return
    unmount_all(path)
    run(["rm", "-rf", "--one-file-system", str(path)], capture=True)


def process_table():
    """(pid, argv) of every live process (zombies excluded: PID 1 here may not reap them)."""
    table = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                argv = handle.read().split(b"\0")
            if process_alive(int(entry)):
                table.append((int(entry), [a.decode(errors="replace") for a in argv if a]))
        except OSError:
            continue
    return table


def process_alive(pid):
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_gone(pids, deadline):
    while time.monotonic() < deadline:
        pids = [p for p in pids if process_alive(p)]
        if not pids:
            return []
        time.sleep(0.1)
    return [p for p in pids if process_alive(p)]


def cgroup_roots():
    """Where a host's cgroup goes: both hierarchies on a v1/v2 hybrid (this machine), the one root on pure v2."""
    base = Path("/sys/fs/cgroup")
    if (base / "cgroup.controllers").exists():
        return [base]
    return [base / name for name in ("systemd", "unified") if (base / name).is_dir()]


def host_cgroups(name):
    return [root / "nspawn" / name for root in cgroup_roots()]


def remove_cgroup(path, timeout=5.0):
    """Remove a host's cgroup tree, children first (systemd inside made init.scope, system.slice, ...).

    Retried for a while: the last processes of a stopped host may still be on their way out (EBUSY).
    """
    deadline = time.monotonic() + timeout
    while path.is_dir():
        try:
            for current, dirs, _files in os.walk(path, topdown=False):
                for child in dirs:
                    with contextlib.suppress(FileNotFoundError):
                        os.rmdir(os.path.join(current, child))
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(path)
        except OSError as exc:
            if time.monotonic() > deadline:
                raise FleetError("could not remove cgroup %s: %s" % (path, exc)) from exc
            time.sleep(0.1)


def cgroup_pids(name):
    """Every process of a host, found through its cgroups."""
    pids = set()
    for cgroup in host_cgroups(name):
        for current, _dirs, files in os.walk(cgroup):
            if "cgroup.procs" in files:
                with contextlib.suppress(OSError), open(os.path.join(current, "cgroup.procs"), encoding="utf-8") as handle:
                    pids.update(int(line) for line in handle if line.strip())
    return sorted(pids)


def kill_host_processes(name):
    """SIGKILL what is left of a host: a SIGKILLed nspawn leaves its container running."""
    pids = [pid for pid in cgroup_pids(name) if process_alive(pid)]
    if not pids:
        return
    log("%s: killing %d leftover processes" % (name, len(pids)))
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if wait_gone(pids, time.monotonic() + 10):
        raise FleetError("%s: processes survived SIGKILL" % name)


def cgroup_pss_kib(name):
    """Proportional memory of every process of a host (memory accounting does not work inside these hosts)."""
    total = 0
    for pid in cgroup_pids(name):
        with contextlib.suppress(OSError), open("/proc/%d/smaps_rollup" % pid, encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
    return total
