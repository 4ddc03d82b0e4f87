# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Paths, the benchmark's constants, logging and running Ansible."""

from __future__ import absolute_import, division, print_function

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

__metaclass__ = type  # pylint: disable=invalid-name


REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
COLLECTIONS = REPO / ".build" / "collections"
# The sections of a run, in the order bench/cli.py runs them (--only / --skip choices).
SECTIONS = ("canary", "rollout", "scale", "distribution", "cost", "cpu", "lag", "sync", "router", "restart")
PORT = 30002
# The bench units listen on 0.0.0.0 (the seeds' loops probe them from the controller), which the server role refuses
# without an API key: every probe sends this one (a private fleet's throwaway value, not a secret).
API_KEY = "sk-bench-8c3e51a07d"
MODEL_NAME = "kimi-k2.6"
EVENT_LOG = "/var/lib/sglang-bench/events.jsonl"
TOOLS = ("waiter", "seed1", "seed2", "uri")
# The waiter again with sglang_wait_progress=false: what the action plugin's live progress costs in lag and CPU.
LAG_TOOLS = TOOLS + ("waiter_quiet",)
CPU_TOOLS = TOOLS + ("waiter_quiet",)   # as many as there are hosts besides the control host
TOOL_LABELS = {
    "waiter": "sglang_wait_ready (on host, via ansible)",
    "seed1": "seed 1: 10 s is-active + /v1/models (controller, ssh + curl)",
    "seed2": "seed 2: 15 s is-active + chat max_tokens 4 (controller, ssh + curl)",
    "uri": "ansible.builtin.uri until, delay 10 (on host, chat)",
    "waiter_quiet": "sglang_wait_ready with sglang_wait_progress=false (no live progress reads)",
}
SCENARIOS = ("ready", "crash", "crash_loop", "hang")
# The waiter's options in every lag trial: the same for all scenarios (an operator does not know what will happen).
# stall_timeout is small because these timelines are short; every silent gap of a healthy start here is under 12 s.
WAITER_STALL_TIMEOUT = 15.0
WAITER_TIMEOUT = 150.0
LOOP_CAP = [75.0]


def median(values):
    """The median of the values that are there (None left out), or None."""
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def log(message):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), message), flush=True)


def ansible_env():
    env = dict(os.environ)
    env.update({
        "PATH": "%s:%s" % (Path(sys.executable).parent, env.get("PATH", "")),
        "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS),
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_DEPRECATION_WARNINGS": "False",
    })
    return env


def recap(stdout):
    """The PLAY RECAP as {host: {"ok": N, "changed": N, ...}} (ok counts changed tasks too, as Ansible's does)."""
    stats = {}
    for line in stdout.splitlines():
        host, sep, rest = line.partition(" : ")
        if not sep or "ok=" not in rest:
            continue
        fields = dict(part.split("=", 1) for part in rest.split() if "=" in part)
        try:
            stats[host.strip()] = {key: int(value) for key, value in fields.items()}
        except ValueError:
            continue
    return stats


def run_playbook(fleet, path, limit=None, extra=None, timeout=1800):
    """Runs ansible-playbook; returns wall seconds, rc, the recap per host and the output's tail."""
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(fleet.inventory), str(path)]
    if limit:
        command += ["--limit", limit]
    if extra:
        command += ["-e", json.dumps(extra)]
    started = time.time()
    result = subprocess.run(command, capture_output=True, text=True, env=ansible_env(), cwd=str(REPO), timeout=timeout,
                            stdin=subprocess.DEVNULL, check=False)
    return {"wall_s": time.time() - started, "rc": result.returncode, "recap": recap(result.stdout),
            "tail": result.stdout[-3000:] + result.stderr[-2000:]}
