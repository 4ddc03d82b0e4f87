# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""2. CPU cost of waiting on the GPU host."""

from __future__ import absolute_import, division, print_function

import json
import statistics
import time

from .common import BENCH, CPU_TOOLS, EVENT_LOG, PORT, log
from .hosts import start_server, stop_server
from .watchers import make_watchers

__metaclass__ = type  # pylint: disable=invalid-name


def host_cpu(fleet, host):
    return json.loads(fleet.ssh(host, "python3 -", input_text=(BENCH / "hostcpu.py").read_text(encoding="utf-8")).stdout)


def run_cpu_round(fleet, hosts, window):
    """One host per watcher plus a control host (the same loading server, nobody waiting), all at once."""
    roles = dict(zip(("control",) + CPU_TOOLS, hosts))
    env = {"SGLANG_STANDIN_PACE": "1", "SGLANG_STANDIN_GPU": "rtx_pro_6000",
           "SGLANG_STANDIN_STATE_DIR": "/var/lib/sglang-bench", "SGLANG_STANDIN_EVENT_LOG": EVENT_LOG}
    for host in roles.values():   # K2.6's real pace: 20 s init, 300 s of weights: the whole window is "loading"
        start_server(fleet, host, "sglang-bench.service", env)
    time.sleep(3)
    before = {role: host_cpu(fleet, host) for role, host in roles.items()}
    watchers = {}
    for role, host in roles.items():
        if role == "control":
            continue
        watcher = make_watchers(fleet, host, {"unit": "sglang-bench.service", "url": "http://127.0.0.1:%d" % PORT,
                                              "timeout": window, "stall_timeout": 0})[role]
        watcher.start()
        watchers[role] = watcher
    time.sleep(window)
    for role, watcher in watchers.items():
        if not role.startswith("waiter"):
            watcher.kill()
    for role, watcher in watchers.items():   # the waiters end by themselves at their timeout
        if role.startswith("waiter"):
            watcher.reader.join(60)
            watcher.kill()
    after = {role: host_cpu(fleet, host) for role, host in roles.items()}
    for host in roles.values():
        stop_server(fleet, host)
    result = {"window_s": window, "hosts": {role: host["name"] for role, host in roles.items()}, "raw": {},
              "ssh_trees": {role: {"before": before[role].get("sshd_members"), "after": after[role].get("sshd_members")}
                            for role in roles}}
    for role in roles:
        minutes = (after[role]["time"] - before[role]["time"]) / 60.0
        delta = {key: round((after[role][key] - before[role][key]) / minutes, 4)
                 for key in ("host_total", "sshd", "server", "journald", "pid1_self")}
        delta["minutes"] = round(minutes, 3)
        result["raw"][role] = delta
    control = result["raw"]["control"]
    result["per_tool"] = {}
    for tool in roles:
        if tool == "control":
            continue
        raw = result["raw"][tool]
        result["per_tool"][tool] = {
            "host_cpu_s_per_min": round(raw["host_total"] - control["host_total"], 4),
            "ssh_tree_cpu_s_per_min": round(raw["sshd"] - control["sshd"], 4),
            "server_cpu_s_per_min": round(raw["server"] - control["server"], 4),
        }
    result["waiter_outcome"] = watchers["waiter"].verdict()[2]
    return result


def run_cpu(fleet, hosts, window, rounds):
    """`rounds` rounds, the roles moved one host along each time, so that a host's own noise does not stick to one
    watcher; the figures are medians over the rounds."""
    result = {"window_s": window, "rounds": [], "per_tool": {}}
    for index in range(rounds):
        rotated = hosts[index % len(hosts):] + hosts[:index % len(hosts)]
        one = run_cpu_round(fleet, rotated, window)
        log("cpu round %d: %s" % (index + 1, json.dumps(one["per_tool"])))
        result["rounds"].append(one)
    for tool in result["rounds"][0]["per_tool"]:
        result["per_tool"][tool] = {
            key: round(statistics.median(r["per_tool"][tool][key] for r in result["rounds"]), 3)
            for key in ("host_cpu_s_per_min", "ssh_tree_cpu_s_per_min", "server_cpu_s_per_min")}
        result["per_tool"][tool]["host_cpu_rounds"] = [r["per_tool"][tool]["host_cpu_s_per_min"]
                                                       for r in result["rounds"]]
    result["control"] = {key: round(statistics.median(r["raw"]["control"][key] for r in result["rounds"]), 3)
                         for key in ("host_total", "sshd", "server")}
    return result
