# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Runs ON a fleet host (python3 - < hostcpu.py): cumulative CPU seconds of process trees, from /proc.

systemd's CPUAccounting does not work inside the nspawn hosts (no cpu controller delegated), so this reads the kernel's
own per-process accounting instead: a tree's total is each live process's utime+stime plus cutime+cstime (the CPU of
its children that have exited and were waited for), summed over the live processes of the tree. The tree of PID 1 is
the whole host (orphans are re-parented to it), the tree of sshd's listener is everything that came in over ssh.
Prints one JSON object: seconds per tree and the host's clock.
"""

import json
import os
import subprocess
import time

TICK = float(os.sysconf("SC_CLK_TCK"))


def read_processes():
    """pid -> (ppid, own+reaped-children CPU seconds)."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, encoding="utf-8", errors="replace") as handle:
                data = handle.read()
        except OSError:
            continue
        fields = data[data.rindex(")") + 2:].split()
        # fields[0] is state (field 3); utime stime cutime cstime are fields 14-17.
        ppid = int(fields[1])
        cpu = sum(int(value) for value in fields[11:15]) / TICK
        table[int(name)] = (ppid, cpu)
    return table


def tree_members(table, root):
    children = {}
    for pid, (ppid, _cpu) in table.items():
        children.setdefault(ppid, []).append(pid)
    members, stack = [], [root]
    while stack:
        pid = stack.pop()
        if pid in table:
            members.append(pid)
            stack.extend(children.get(pid, ()))
    return members


def command(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode("utf-8", "replace")[:80]
    except OSError:
        return "?"


def tree_total(table, root):
    children = {}
    for pid, (ppid, _cpu) in table.items():
        children.setdefault(ppid, []).append(pid)
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        if pid in table:
            total += table[pid][1]
            stack.extend(children.get(pid, ()))
    return total


def main_pid(unit):
    result = subprocess.run(["systemctl", "show", "-p", "MainPID", "--value", unit], capture_output=True, text=True,
                            check=False)
    try:
        return int(result.stdout.strip() or 0)
    except ValueError:
        return 0


def main():
    units = {"sshd": "ssh.service", "journald": "systemd-journald.service", "server": "sglang-bench.service"}
    pids = {name: main_pid(unit) for name, unit in units.items()}
    table = read_processes()
    report = {"time": time.time(), "host_total": tree_total(table, 1), "pid1_self": table.get(1, (0, 0.0))[1]}
    for name, pid in pids.items():
        report[name] = tree_total(table, pid) if pid else 0.0
    # What the ssh tree held, to explain a jump between two readings.
    report["sshd_members"] = [[pid, round(table[pid][1], 2), command(pid)] for pid in tree_members(table, pids["sshd"])
                              if table[pid][1] >= 0.05] if pids["sshd"] else []
    print(json.dumps(report))


if __name__ == "__main__":
    main()
