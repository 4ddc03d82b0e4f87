# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Watchers: the waiter and the baselines, each a process on this machine whose output lines are time-stamped here."""

from __future__ import absolute_import, division, print_function

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import hostcpu  # bench/hostcpu.py: the same /proc process table on this machine as on the hosts
from .common import API_KEY, BENCH, MODEL_NAME, PORT, REPO, ansible_env

__metaclass__ = type  # pylint: disable=invalid-name

# The waiter action's verdict line (module_utils/progress_view.py final_line): "HOST  UNIT  READY after ..." or
# "HOST  UNIT  FAILED (reason) ...".
FINAL_LINE = re.compile(r"\S  (?:READY|FAILED)(?: |$)")


def descendants(root):
    """PIDs of every live descendant of `root` on this machine, parents before children (hostcpu's /proc reading)."""
    return [pid for pid in hostcpu.tree_members(hostcpu.read_processes(), root) if pid != root]


class Watcher:
    def __init__(self, name, argv, env=None):
        self.name = name
        self.argv = argv
        self.env = env
        self.lines = []
        self.exit_time = None
        self.rc = None
        self.proc = None
        self.reader = None
        self.start_time = None

    def start(self):
        self.start_time = time.time()
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=self.env, cwd=str(REPO), stdin=subprocess.DEVNULL, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.time(), line.rstrip("\n")))
        self.rc = self.proc.wait()
        self.exit_time = time.time()

    def done(self):
        return self.exit_time is not None

    def kill(self):
        """Kills the watcher and every process under it. Not just its process group: Ansible's worker processes
        call setsid(), and a surviving uri worker would go on retrying for 20 minutes, loading the next trials."""
        if self.proc:
            for pid in descendants(self.proc.pid) + [self.proc.pid]:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        if self.reader:
            self.reader.join(10)

    def verdict(self):
        """(verdict, time, detail): verdict is ready | failed | gave_up | none (still watching when stopped)."""
        if self.name == "waiter":
            for stamp, line in self.lines:
                if " => {" in line:
                    try:
                        result = json.loads(line.split(" => ", 1)[1])
                    except ValueError:
                        continue
                    detail = {"reason": result.get("reason"), "elapsed": result.get("elapsed"),
                              "msg": (result.get("msg") or "")[:200],
                              "phases": [(p.get("name"), p.get("at"), p.get("source"), p.get("run"))
                                         for p in result.get("phases") or []]}
                    # The verdict is known when ansible prints it (its exit comes a little later): the action's own
                    # line (READY / FAILED, printed the moment the module returns, before the clean-up on the host)
                    # when the live progress is on, else the task's result.
                    finals = [when for when, text in self.lines if FINAL_LINE.search(text)]
                    return ("ready" if result.get("ready") else "failed"), min(finals + [stamp]), detail
            return "none", None, {"tail": [line for _stamp, line in self.lines[-3:]]}
        if self.name == "uri":
            if not self.done() or self.rc is None or self.rc < 0:
                return "none", None, {}
            # The task's result line ("ok: [host]" / "fatal: [host]") is when the verdict is known.
            stamps = [stamp for stamp, line in self.lines if line.startswith(("ok: [", "fatal: [", "failed: ["))]
            return ("ready" if self.rc == 0 else "failed"), (stamps[-1] if stamps else self.exit_time), {"rc": self.rc}
        for stamp, line in self.lines:
            if line.endswith("] READY"):
                return "ready", stamp, {"line": line}
            if line.endswith("] FAILED"):
                return "failed", stamp, {"line": line}
        if self.done() and self.rc == 0:
            return "gave_up", self.exit_time, {}
        return "none", None, {}


def make_watchers(fleet, host, waiter_args):
    env = ansible_env()
    waiter_args = dict(waiter_args, api_key=API_KEY)  # the units are keyed (bench/playbooks/tasks/unit.yml)
    venv_bin = Path(sys.executable).parent
    waiter_argv = [str(venv_bin / "ansible"), host["name"], "-i", str(fleet.inventory), "-o", "-m",
                   "llmops.sglang.sglang_wait_ready", "-a", json.dumps(waiter_args)]
    waiter = Watcher("waiter", waiter_argv, env)
    # The action plugin's live progress reads the module's progress file over ssh every few seconds; without them:
    waiter_quiet = Watcher("waiter", waiter_argv + ["-e", "sglang_wait_progress=false"], env)
    seed1 = Watcher("seed1", ["bash", str(BENCH / "baselines" / "seed1_models_loop.sh"), host["address"], str(PORT),
                              waiter_args["unit"], fleet.key, API_KEY])
    seed2 = Watcher("seed2", ["bash", str(BENCH / "baselines" / "seed2_chat_loop.sh"), host["address"], str(PORT),
                              waiter_args["unit"], fleet.key, MODEL_NAME, API_KEY])
    uri = Watcher("uri", [str(venv_bin / "ansible-playbook"), "-i", str(fleet.inventory),
                          str(BENCH / "playbooks" / "uri_until.yml"), "-e",
                          json.dumps({"bench_host": host["name"], "bench_port": PORT, "bench_model": MODEL_NAME,
                                      "bench_api_key": API_KEY})], env)
    return {"waiter": waiter, "seed1": seed1, "seed2": seed2, "uri": uri, "waiter_quiet": waiter_quiet}
