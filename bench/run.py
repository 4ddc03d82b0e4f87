#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmarks of llmops.sglang on a private local fleet: detection lag, CPU cost of waiting, fleet rollout cost.

Run as root from the repository root with the repo venv's Python (it needs ansible-core and PyYAML from there):

    .venv/bin/python bench/run.py            # full run, about 15 minutes on 2 cores
    .venv/bin/python bench/run.py --quick    # smoke run, a few minutes
    .venv/bin/python bench/run.py --render bench/results/XXX.json   # rewrite docs/benchmarks.md from raw results

It boots its own fleet (tests/fleet/fleet.py, own state dir, prefix and addresses, so the shared fleet and other
users are never touched), measures, writes bench/results/<stamp>.json, docs/benchmarks.json and docs/benchmarks.md,
and removes the fleet (also on failure and Ctrl-C) unless --keep-fleet.

Clocks: the fleet hosts are containers on this machine's kernel, so the stand-in's event times (time.time() on the
host) and this driver's time.time() are the same clock; a lag is verdict time (seen here) minus event time.
"""

from __future__ import absolute_import, division, print_function

import argparse
import configparser
import datetime
import json
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import hostcpu  # bench/hostcpu.py: the same /proc process table on this machine as on the hosts

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
FLEET_TOOL = REPO / "tests" / "fleet" / "fleet.py"
COLLECTIONS = REPO / ".build" / "collections"
PORT = 30002
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


def log(message):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), message), flush=True)


# ---------------------------------------------------------------------------------------------------------------
# The fleet and the hosts
# ---------------------------------------------------------------------------------------------------------------
class BenchFleet:
    """A private fleet: fleet.py with our own state dir, plus an inventory dir made for the benchmark."""

    def __init__(self, state_dir, prefix, count):
        self.state_dir = Path(state_dir)
        self.prefix = prefix
        self.count = count
        self.hosts = []
        self.key = None
        self.group_vars = {}
        self.inventory = self.state_dir.parent / (self.state_dir.name + "-inventory")

    def tool(self, *args):
        return subprocess.run([sys.executable, str(FLEET_TOOL)] + list(args) + ["--state-dir", str(self.state_dir)],
                              capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)

    def up(self):
        started = time.time()
        result = self.tool("up", "--count", str(self.count), "--prefix", self.prefix, "--first-index", "auto")
        if result.returncode != 0:
            raise RuntimeError("fleet.py up failed:\n" + result.stderr[-4000:])
        status = json.loads(self.tool("status", "--json").stdout)
        self.hosts = [{"name": h["name"], "address": h["address"], "mirror": h["mirror_url"]} for h in status["hosts"]]
        self.key = status["key"]
        self.write_inventory(Path(status["inventory"]))
        return time.time() - started

    def down(self):
        result = self.tool("down")
        shutil.rmtree(str(self.inventory), ignore_errors=True)
        return result.returncode == 0

    def write_inventory(self, hosts_yml):
        """hosts.yml of the fleet + the repo's local inventory (k26 group, group_vars) with a faster stand-in pace."""
        import yaml  # from the repo venv (ansible-core depends on it)
        local = REPO / "inventories" / "local"
        (self.inventory / "group_vars").mkdir(parents=True, exist_ok=True)
        (self.inventory / "host_vars").mkdir(parents=True, exist_ok=True)
        shutil.copy(str(hosts_yml), str(self.inventory / "hosts.yml"))
        shutil.copy(str(local / "k26.yml"), str(self.inventory / "k26.yml"))
        group_vars = {}
        for path in sorted((local / "group_vars").glob("local_fleet*.yml")):
            group_vars.update(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
        # A 0.01 pace makes the role's own start-up wait a few seconds: the fleet figures are Ansible's cost,
        # not the stand-in's load time.
        group_vars.setdefault("sglang_env", {})["SGLANG_STANDIN_PACE"] = "0.01"
        self.group_vars = group_vars
        (self.inventory / "group_vars" / "local_fleet.yml").write_text(json.dumps(group_vars, indent=1), encoding="utf-8")
        for path in (self.inventory / "host_vars").glob("*.yml"):
            path.unlink()

    def set_host_env(self, host, extra):
        """host_vars for one host: the group's sglang_env plus `extra` (a change only that host sees)."""
        env = dict(self.group_vars.get("sglang_env", {}))
        env.update(extra)
        (self.inventory / "host_vars" / (host + ".yml")).write_text(json.dumps({"sglang_env": env}), encoding="utf-8")

    def ssh_argv(self, host, command):
        return ["ssh", "-i", self.key, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
                "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10",
                "root@" + host["address"], command]

    def ssh(self, host, command, check=True, timeout=300, input_text=None):
        result = subprocess.run(self.ssh_argv(host, command), capture_output=True, text=True, timeout=timeout,
                                input=input_text, stdin=None if input_text is not None else subprocess.DEVNULL,
                                check=False)
        if check and result.returncode != 0:
            raise RuntimeError("on %s: %s failed (rc=%d): %s %s" % (
                host["name"], command[:200], result.returncode, result.stdout[-2000:], result.stderr[-2000:]))
        return result


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


def playbook(fleet, path, limit=None, extra=None, timeout=1800):
    """Runs ansible-playbook; returns (wall seconds, rc, changed count, output tail)."""
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(fleet.inventory), str(path)]
    if limit:
        command += ["--limit", limit]
    if extra:
        command += ["-e", json.dumps(extra)]
    started = time.time()
    result = subprocess.run(command, capture_output=True, text=True, env=ansible_env(), cwd=str(REPO), timeout=timeout,
                            stdin=subprocess.DEVNULL, check=False)
    wall = time.time() - started
    changed = sum(int(part.split("=", 1)[1]) for line in result.stdout.splitlines() if "changed=" in line and " : ok=" in line
                  for part in line.split() if part.startswith("changed="))
    return wall, result.returncode, changed, result.stdout[-3000:] + result.stderr[-2000:]


UNIT_TEMPLATE = """[Unit]
Description=SGLang stand-in for the benchmark ({restart})
StartLimitIntervalSec=3600
StartLimitBurst=3

[Service]
Type=simple
User=sglang
Group=sglang
WorkingDirectory=/var/lib/sglang-bench
EnvironmentFile=/etc/sglang-bench/env
ExecStart={venv}/bin/python -m sglang.launch_server --model-path {model} --served-model-name {name} --tp 8 \\
    --trust-remote-code --reasoning-parser kimi_k2 --tool-call-parser kimi_k2 --host 0.0.0.0 --port {port}
KillMode=mixed
TimeoutStopSec=30
Restart={restart}
RestartSec=15
LimitNOFILE=20000
"""

HOST_SETUP = """set -e
# What the waiter and the stand-in need, the way the role would install it (idempotent; after a deploy it finds all).
id sglang >/dev/null 2>&1 || useradd --system --user-group --home-dir /var/lib/sglang --shell /usr/sbin/nologin sglang
# Python.h too: the stand-in checks it like Triton does, and fails at CUDA graph capture without it.
PYH=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h
PYX=python$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')-dev
{{ python3 -c 'import requests, jmespath' 2>/dev/null && [ -f "$PYH" ]; }} || {{ apt-get update -q >/dev/null &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-requests python3-jmespath python3-dev $PYX >/dev/null; }}
V={venv}
[ -x $V/bin/python ] || python3 -m venv $V
have() {{ $V/bin/python -c 'import sys, importlib.metadata as m; print(m.version(sys.argv[1]))' "$1" 2>/dev/null || true; }}
if [ "$(have compressed-tensors)" != 0.18.0 ] || [ -z "$(have sglang)" ]; then
    [ -x $V/bin/pip ] || $V/bin/python -m ensurepip -q
    $V/bin/pip install -q --disable-pip-version-check --no-index --no-deps --find-links {mirror}/wheels/ \\
        --trusted-host {mirror_host} sglang compressed-tensors==0.18.0
fi
[ -f {model}/config.json ] || $V/bin/python -m sglang_standin.make_model {model} --arch kimi_k2 --quant nvfp4-pack-quantized
install -d -o sglang -g sglang /var/lib/sglang-bench
install -d -m 0755 /etc/sglang-bench
touch /etc/sglang-bench/env
cat > /etc/systemd/system/sglang-bench.service <<'UNIT'
{unit_restart}UNIT
cat > /etc/systemd/system/sglang-bench-once.service <<'UNIT'
{unit_once}UNIT
systemctl daemon-reload
"""


def prepare_hosts(fleet):
    """The benchmark's own units (same server, port 30002, both restart policies) on every host."""
    venv = fleet.group_vars.get("sglang_venv", "/opt/sglang/venv")
    model = fleet.group_vars.get("sglang_model_path", "/models/Kimi-K2.6-NVFP4")
    units = {key: UNIT_TEMPLATE.format(venv=venv, model=model, name=MODEL_NAME, port=PORT, restart=policy)
             for key, policy in (("unit_restart", "on-failure"), ("unit_once", "no"))}
    errors = []

    def setup(host):
        script = HOST_SETUP.format(venv=venv, model=model, mirror=host["mirror"],
                                   mirror_host=host["mirror"].split("//", 1)[1].split(":", 1)[0], **units)
        try:
            fleet.ssh(host, script)
        except Exception as error:  # pylint: disable=broad-except
            errors.append(str(error))

    threads = [threading.Thread(target=setup, args=(host,)) for host in fleet.hosts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError("host preparation failed:\n" + "\n".join(errors))


def start_server(fleet, host, unit, env):
    """Writes the stand-in's environment, empties the event log and (re)starts `unit` like the seeds did."""
    env_text = "".join("%s=%s\n" % item for item in sorted(env.items()))
    script = ("systemctl stop sglang-bench.service sglang-bench-once.service; "
              "systemctl reset-failed sglang-bench.service sglang-bench-once.service 2>/dev/null; "
              "cat > /etc/sglang-bench/env; : > %s; chown sglang: %s; systemctl restart %s") % (
                  EVENT_LOG, EVENT_LOG, unit)
    fleet.ssh(host, script, input_text=env_text)


def stop_server(fleet, host):
    fleet.ssh(host, "systemctl stop sglang-bench.service sglang-bench-once.service; "
                    "systemctl reset-failed sglang-bench.service sglang-bench-once.service 2>/dev/null; true",
              check=False)


def read_events(fleet, host):
    text = fleet.ssh(host, "cat %s" % EVENT_LOG, check=False).stdout
    events = []
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    return events


# ---------------------------------------------------------------------------------------------------------------
# Watchers: the waiter and the baselines, each a process on this machine whose output lines are time-stamped here
# ---------------------------------------------------------------------------------------------------------------
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
                    # The verdict is known when ansible prints it (its exit comes a little later).
                    return ("ready" if result.get("ready") else "failed"), stamp, detail
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
    venv_bin = Path(sys.executable).parent
    waiter_argv = [str(venv_bin / "ansible"), host["name"], "-i", str(fleet.inventory), "-o", "-m",
                   "llmops.sglang.sglang_wait_ready", "-a", json.dumps(waiter_args)]
    waiter = Watcher("waiter", waiter_argv, env)
    # The action plugin's live progress reads the module's progress file over ssh every few seconds; without them:
    waiter_quiet = Watcher("waiter", waiter_argv + ["-e", "sglang_wait_progress=false"], env)
    seed1 = Watcher("seed1", ["bash", str(BENCH / "baselines" / "seed1_models_loop.sh"), host["address"], str(PORT),
                              waiter_args["unit"], fleet.key])
    seed2 = Watcher("seed2", ["bash", str(BENCH / "baselines" / "seed2_chat_loop.sh"), host["address"], str(PORT),
                              waiter_args["unit"], fleet.key, MODEL_NAME])
    uri = Watcher("uri", [str(venv_bin / "ansible-playbook"), "-i", str(fleet.inventory),
                          str(BENCH / "playbooks" / "uri_until.yml"), "-e",
                          json.dumps({"bench_host": host["name"], "bench_port": PORT, "bench_model": MODEL_NAME})], env)
    return {"waiter": waiter, "seed1": seed1, "seed2": seed2, "uri": uri, "waiter_quiet": waiter_quiet}


# ---------------------------------------------------------------------------------------------------------------
# 1. Detection lag
# ---------------------------------------------------------------------------------------------------------------
def timeline(scenario, rng):
    """The stand-in's environment, unit and expected event offset for one trial (seconds at pace 1)."""
    init = rng.uniform(2, 5)
    weights = rng.uniform(4, 16)
    phases = {"init": init, "weights": weights, "kv_cache": 0.5, "cuda_graph": rng.uniform(1, 4), "warmup": 1.0}
    unit, fault, cap = "sglang-bench.service", "", 30.0
    planned = init + weights + 0.5
    if scenario == "ready":
        slow = rng.uniform(4, 10)   # the warmup window: /v1/models answers 200, nothing can generate yet
        fault = "slow_warmup=%.2f" % slow
        planned += phases["cuda_graph"] + phases["warmup"] + slow
    elif scenario == "crash":
        unit, fault = "sglang-bench-once.service", "crash@cuda_graph"   # Restart=no: one crash, unit failed
    elif scenario == "crash_loop":
        # Every start crashes at the end of a short load, Restart=on-failure, RestartSec=15, StartLimitBurst=3: the
        # unit is `activating` between starts and `failed` only after the third crash (about 2 loads + 45 s later).
        phases.update(init=rng.uniform(1, 3), weights=rng.uniform(1, 3))
        planned = phases["init"] + phases["weights"]
        fault = "crash@weights"
        cap = LOOP_CAP[0]           # is-active says "failed" only after the start limit (about 48 s + 3 loads)
    elif scenario == "hang":
        fault = "hang@cuda_graph"
        cap = WAITER_STALL_TIMEOUT + 20.0
    env = {
        "SGLANG_STANDIN_PACE": "1",
        "SGLANG_STANDIN_PHASE_SECONDS": ",".join("%s=%.2f" % item for item in phases.items()),
        "SGLANG_STANDIN_FAULT": fault,
        "SGLANG_STANDIN_GPU": "rtx_pro_6000",
        "SGLANG_STANDIN_STATE_DIR": "/var/lib/sglang-bench",
        "SGLANG_STANDIN_EVENT_LOG": EVENT_LOG,
    }
    return {"unit": unit, "env": env, "planned_event": planned, "cap": planned + cap, "fault": fault,
            "phases": phases}


def event_of(scenario, events):
    """The true event of the scenario, from the stand-in's log: (time, name), or (None, None)."""
    wanted = {"ready": "ready", "crash": "crash", "crash_loop": "crash", "hang": "hang"}[scenario]
    for event in events:
        if event.get("event") == wanted:
            return event["time"], "%s/%s" % (event["event"], event.get("phase"))
    return None, None


def module_verdict_time(detail, events):
    """When the module itself decided, on the host: its start (wall clock) + its `elapsed`.

    The start is not returned, but each phase's `at` is the journal line's time minus the module's start, and the
    stand-in logs the same phase change in its event log within milliseconds: start = event time - at (median over
    the phases of the first run). Precision about 0.1 s (`at` is rounded to 0.1 s).
    """
    firsts = {}
    for event in events:
        if event.get("event") == "phase" and event.get("phase") in ("init", "weights", "kv_cache", "cuda_graph") \
                and event.get("phase") not in firsts:
            firsts[event["phase"]] = event["time"]
    starts = [firsts[name] - at for name, at, source, run in detail.get("phases", [])
              if source == "journal" and not run and name in firsts and at is not None]
    if not starts or detail.get("elapsed") is None:
        return None
    return statistics.median(starts) + detail["elapsed"]


def first_event(events, name):
    for event in events:
        if event.get("event") == name:
            return event["time"]
    return None


def run_trial(fleet, host, scenario, rng):
    plan = timeline(scenario, rng)
    waiter_args = {"unit": plan["unit"], "url": "http://127.0.0.1:%d" % PORT, "timeout": WAITER_TIMEOUT,
                   "stall_timeout": WAITER_STALL_TIMEOUT}
    start_server(fleet, host, plan["unit"], plan["env"])
    t0 = time.time()
    watchers = make_watchers(fleet, host, waiter_args)
    for watcher in watchers.values():
        watcher.start()
    deadline = t0 + plan["cap"]
    while time.time() < deadline and not all(w.done() for w in watchers.values()):
        time.sleep(0.2)
    stopped_at = time.time()
    for watcher in watchers.values():
        watcher.kill()
    events = read_events(fleet, host)
    stop_server(fleet, host)
    event_time, event_name = event_of(scenario, events)
    ready_time = first_event(events, "ready")
    trial = {"scenario": scenario, "host": host["name"], "t0": t0, "cap_s": round(plan["cap"], 2),
             "fault": plan["fault"], "unit": plan["unit"], "event": event_name, "event_time": event_time,
             "event_after_start_s": round(event_time - t0, 3) if event_time else None,
             "http_bound_time": first_event(events, "http_bound"), "starts": sum(1 for e in events if e.get("event") == "start"),
             "tools": {}}
    for name, watcher in watchers.items():
        verdict, stamp, detail = watcher.verdict()
        if verdict == "none":
            stamp = stopped_at
        lag = round(stamp - event_time, 3) if (stamp and event_time) else None
        if scenario == "ready":
            right = verdict == "ready" and ready_time is not None and stamp >= ready_time
            if verdict == "ready" and not right:
                detail["false_ready"] = True
        else:
            right = verdict == "failed" and event_time is not None and stamp >= event_time
        if name.startswith("waiter") and verdict != "none" and event_time:
            on_host = module_verdict_time(detail, events)
            detail["module_lag_s"] = round(on_host - event_time, 3) if on_host else None
            detail.pop("phases", None)
        trial["tools"][name] = {"verdict": verdict, "right": right, "lag_s": lag,
                                "censored": verdict in ("none", "gave_up"), "detail": detail,
                                "started_after_t0_s": round(watcher.start_time - t0, 3)}
    return trial


def run_lag(fleet, hosts, trials_per_scenario, rng):
    queue = [scenario for _trial in range(trials_per_scenario) for scenario in SCENARIOS]
    lock = threading.Lock()
    results = []

    def worker(host):
        while True:
            with lock:
                if not queue:
                    return
                scenario = queue.pop(0)
            try:
                trial = run_trial(fleet, host, scenario, rng)
            except Exception as error:  # pylint: disable=broad-except
                trial = {"scenario": scenario, "host": host["name"], "error": str(error)[:500]}
            with lock:
                results.append(trial)
                brief = ", ".join("%s %s %s" % (n, t["verdict"], t["lag_s"]) for n, t in trial.get("tools", {}).items())
                log("lag %-10s %s: %s" % (scenario, host["name"], brief or trial.get("error")))

    threads = []
    for index, host in enumerate(hosts):
        thread = threading.Thread(target=worker, args=(host,))
        thread.start()
        threads.append(thread)
        time.sleep(2.5 + index * 0.3)  # staggered, so that the hosts' ansible start-ups do not all coincide
    for thread in threads:
        thread.join()
    return results


# ---------------------------------------------------------------------------------------------------------------
# 2. CPU cost of waiting
# ---------------------------------------------------------------------------------------------------------------
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


# ---------------------------------------------------------------------------------------------------------------
# 3. Fleet cost
# ---------------------------------------------------------------------------------------------------------------
def ansible_settings():
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(str(REPO / "ansible.cfg"))
    ssh_args = parser.get("ssh_connection", "ssh_args", fallback="")
    persist = [part.split("=", 1)[1] for part in ssh_args.split() if part.startswith("ControlPersist=")]
    return {"forks": parser.get("defaults", "forks", fallback="5 (default)"),
            "pipelining": parser.get("ssh_connection", "pipelining", fallback="False (default)"),
            "control_persist": persist[0] if persist else "60s (ansible default)",
            "gathering": parser.get("defaults", "gathering", fallback="implicit"),
            "serial": "[1, '25%'] (playbooks/deploy_k26.yml default)"}


def run_fleet_cost(fleet, plan):
    deploy = REPO / "playbooks" / "deploy_k26.yml"
    names = [host["name"] for host in fleet.hosts]
    result = {"settings": ansible_settings(), "first_deploy": None, "noop": [], "noop_serial_all": [], "rollout": []}
    largest = max(plan["noop"])
    # Where the seeds started: a venv without pip, compressed-tensors too old, no Python headers.
    wall, rc, _changed, tail = playbook(fleet, REPO / "tests" / "fleet" / "demo_prepare.yml",
                                        limit=",".join(names[:largest]))
    if rc != 0:
        raise RuntimeError("demo_prepare.yml failed:\n" + tail)
    log("fleet: first deploy of deploy_k26.yml on %d hosts (all at once)" % largest)
    wall, rc, changed, tail = playbook(fleet, deploy, limit=",".join(names[:largest]), extra={"k26_serial": ["100%"]})
    result["first_deploy"] = {"hosts": largest, "wall_s": round(wall, 2), "rc": rc, "changed": changed}
    if rc != 0:
        raise RuntimeError("first deploy failed:\n" + tail)
    for size, trials in sorted(plan["noop"].items()):
        for _trial in range(trials):
            wall, rc, changed, tail = playbook(fleet, deploy, limit=",".join(names[:size]))
            log("fleet: no-op re-run, %d host(s): %.1f s, rc=%d, changed=%d" % (size, wall, rc, changed))
            result["noop"].append({"hosts": size, "wall_s": round(wall, 2), "rc": rc, "changed": changed})
    for _run in range(plan.get("noop_serial_all", 0)):
        wall, rc, changed, tail = playbook(fleet, deploy, limit=",".join(names[:largest]), extra={"k26_serial": ["100%"]})
        log("fleet: no-op re-run, %d hosts, serial 100%%: %.1f s" % (largest, wall))
        result["noop_serial_all"].append({"hosts": largest, "wall_s": round(wall, 2), "rc": rc, "changed": changed})
    for trial in range(plan.get("rollout", 0)):
        fleet.set_host_env(names[0], {"BENCH_ROLLOUT_MARK": "%d-%d" % (os.getpid(), trial)})
        wall, rc, changed, tail = playbook(fleet, deploy, limit=",".join(names[:largest]))
        log("fleet: rollout changing %s, %d hosts: %.1f s, rc=%d, changed=%d" % (names[0], largest, wall, rc, changed))
        result["rollout"].append({"hosts": largest, "wall_s": round(wall, 2), "rc": rc, "changed": changed})
    return result


# ---------------------------------------------------------------------------------------------------------------
# Summaries and the page
# ---------------------------------------------------------------------------------------------------------------
def percentile(values, fraction):
    ordered = sorted(values)
    if not ordered:
        return None
    index = min(len(ordered) - 1, max(0, int(round(fraction * (len(ordered) - 1) + 0.4999))))
    return ordered[index]


def summarize_lag(trials):
    summary = {}
    for scenario in SCENARIOS:
        rows = [t for t in trials if t.get("scenario") == scenario and "tools" in t and t.get("event_time")]
        summary[scenario] = {"trials": len(rows), "errors": sum(1 for t in trials if t.get("scenario") == scenario
                                                                and "error" in t), "tools": {}}
        for tool in LAG_TOOLS:
            results = [t["tools"][tool] for t in rows if tool in t["tools"]]
            if not results:
                continue
            lags = [r["lag_s"] for r in results if r["lag_s"] is not None and r["right"]]
            censored = [r["lag_s"] for r in results if r["censored"] and r["lag_s"] is not None]
            module = [r["detail"]["module_lag_s"] for r in results
                      if r["right"] and r["detail"].get("module_lag_s") is not None]
            summary[scenario]["tools"][tool] = {
                "right": sum(1 for r in results if r["right"]),
                "wrong": sum(1 for r in results if r["verdict"] in ("ready", "failed") and not r["right"]),
                "false_ready": sum(1 for r in results if r["detail"].get("false_ready")),
                "no_verdict": sum(1 for r in results if r["censored"]),
                "median_lag_s": round(statistics.median(lags), 2) if lags else None,
                "p95_lag_s": round(percentile(lags, 0.95), 2) if lags else None,
                "min_lag_s": round(min(lags), 2) if lags else None,
                "max_lag_s": round(max(lags), 2) if lags else None,
                "waited_at_least_s": round(min(censored), 1) if censored else None,
                "reasons": sorted({str(r["detail"].get("reason")) for r in results if r["detail"].get("reason")}),
                "module_median_lag_s": (round(statistics.median(module), 2) if module else None),
            }
        waiter = summary[scenario]["tools"]["waiter"]["median_lag_s"]
        for tool in summary[scenario]["tools"]:
            entry = summary[scenario]["tools"][tool]
            entry["ratio_to_waiter"] = (round(entry["median_lag_s"] / waiter, 1)
                                        if waiter and entry["median_lag_s"] is not None else None)
    return summary


class LoadSampler(threading.Thread):
    """This machine's 1-minute load average every 10 s: the noise the figures were measured under."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples = []
        self.phase = "setup"
        self.stop_event = threading.Event()

    def run(self):
        while not self.stop_event.wait(10):
            self.samples.append((self.phase, os.getloadavg()[0]))

    def summary(self):
        out = {}
        for phase in dict.fromkeys(sample[0] for sample in self.samples):
            values = [v for p, v in self.samples if p == phase]
            out[phase] = {"samples": len(values), "min": round(min(values), 2),
                          "median": round(statistics.median(values), 2), "max": round(max(values), 2)}
        return out


def machine_info():
    mem_kib = 0
    with open("/proc/meminfo", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    load = os.getloadavg()
    return {"nproc": os.cpu_count(), "memory_gib": round(mem_kib / 1048576.0, 1), "kernel": platform.release(),
            "python": platform.python_version(), "loadavg_at_start": [round(v, 2) for v in load]}


def fmt(value, unit=""):
    if value is None:
        return "-"
    if isinstance(value, float):
        return ("%.2f" % value) + unit
    return str(value) + unit


def render(results):
    lines = []
    add = lines.append
    machine = results["machine"]
    add("# Benchmarks")
    add("")
    add("Generated by `make bench%s` (`bench/run.py%s`) on %s, %s. Raw results: `%s` (every trial, every verdict)." % (
        "-quick" if results["quick"] else "", " --quick" if results["quick"] else "", results["started"],
        "quick smoke run: few trials, read the numbers as indicative only" if results["quick"] else "full run",
        "bench/results/*-quick.json" if results["quick"] else "docs/benchmarks.json"))
    add("")
    add("**Machine**: %s cores, %s GiB, kernel %s, Python %s; load average at start %s. The fleet is a private one "
        "of %d real systemd hosts (systemd-nspawn containers on this machine, `tests/fleet/fleet.py`) running the "
        "SGLang stand-in (`tests/standin`); the run took %.1f min." % (
            machine["nproc"], machine["memory_gib"], machine["kernel"], machine["python"], machine["loadavg_at_start"],
            results["fleet_hosts"], results["duration_s"] / 60.0))
    add("")
    if results.get("load_average"):
        add("**Noise**: this machine is shared (other sessions run tests and fleets at the same time); its 1-minute "
            "load average during each part of the run (2 cores, so above 2 means waiting for a CPU): %s. Lags of a "
            "second or less and CPU figures under about 0.1 s/min are within that noise." % "; ".join(
                "%s min %.1f / median %.1f / max %.1f" % (phase, v["min"], v["median"], v["max"])
                for phase, v in results["load_average"].items()))
        add("")
    lag = results.get("lag_summary")
    if lag:
        add("## 1. Detection lag: event on the server -> verdict")
        add("")
        add("All watchers watch **the same start of the same unit at the same time** (one trial = one restart; "
            "%d hosts run trials in parallel). The true event time is the stand-in's own record "
            "(`SGLANG_STANDIN_EVENT_LOG`, `time.time()` at the moment it happened; hosts share this machine's clock). "
            "The verdict time is when the watcher's process on the controller printed it (the waiter: when `ansible` "
            "returned the module's result). Lags are medians over right verdicts; *no verdict* = still polling when "
            "the trial ended (`waited >= N s` gives the shortest such wait after the event); *wrong* = the opposite "
            "verdict (`false ready`: ready before the server could serve). A fifth watcher, the waiter with "
            "`sglang_wait_progress: false` (no live progress lines), runs in the same trials. *On-host lag* is when "
            "the module itself decided: its start (from the phase times it returns, matched to the stand-in's event "
            "log, about 0.1 s precise) plus its `elapsed`." % results["lag_hosts"])
        add("")
        add("Timelines (pace 1, random per trial): init 2-5 s, weights 4-16 s, CUDA graphs 1-4 s; "
            "**ready**: then a warmup of 5-11 s during which `/v1/models` already answers 200; "
            "**crash**: `crash@cuda_graph` in a `Restart=no` unit; **crash loop**: `crash@weights` at every start in a "
            "`Restart=on-failure`, `RestartSec=15`, `StartLimitBurst=3` unit (the role's policy), the event is the "
            "first crash; **hang**: `hang@cuda_graph` (alive, silent, port closed). The waiter runs with the same "
            "options in every trial: `timeout: %d, stall_timeout: %d` (defaults otherwise: `poll_interval` 0.5 s)."
            % (WAITER_TIMEOUT, WAITER_STALL_TIMEOUT))
        add("")
        add("| scenario | watcher | trials | right | wrong (false ready) | no verdict | median lag | p95 lag | "
            "ratio to waiter | waiter: reason, on-host median lag |")
        add("|---|---|---|---|---|---|---|---|---|---|")
        for scenario in SCENARIOS:
            block = lag[scenario]
            for tool in [t for t in LAG_TOOLS if t in block["tools"]]:
                entry = block["tools"][tool]
                nov = str(entry["no_verdict"])
                if entry["no_verdict"] and entry["waited_at_least_s"] is not None:
                    nov += " (waited >= %.0f s)" % entry["waited_at_least_s"]
                add("| %s | %s | %d | %d | %d (%d) | %s | %s | %s | %s | %s |" % (
                    scenario, TOOL_LABELS[tool], block["trials"], entry["right"], entry["wrong"], entry["false_ready"],
                    nov, fmt(entry["median_lag_s"], " s"), fmt(entry["p95_lag_s"], " s"),
                    ("%sx" % entry["ratio_to_waiter"]) if entry["ratio_to_waiter"] is not None and tool != "waiter"
                    else "-", ("%s, %s" % (", ".join(entry["reasons"]) or "ready", fmt(entry.get("module_median_lag_s"), " s"))
                               if tool.startswith("waiter") else "")))
        add("")
    cpu = results.get("cpu")
    if cpu:
        add("## 2. CPU cost of waiting on the GPU host")
        add("")
        add("Each watcher waits alone on its own host for %.0f s while the server loads at K2.6's real pace "
            "(stand-in pace 1: 20 s init, 300 s of weights); a control host runs the same load with nobody waiting. "
            "systemd's CPU accounting does not work inside these hosts (`CPUUsageNSec` is not set: no cpu controller "
            "is delegated to nspawn), so the figures come from the kernel's per-process accounting in `/proc/PID/stat` "
            "(utime+stime of live processes plus cutime+cstime of the exited children they reaped, `bench/hostcpu.py`), "
            "read before and after on the host. *host* = the whole host (the tree of its PID 1) minus the control "
            "host; *ssh-borne* = the tree of sshd (everything the watcher ran on the host: the waiter's module and its "
            "`systemctl`/`journalctl`, the seeds' per-poll ssh sessions, uri's module runs) minus control; *server* = "
            "the server's unit (answering probes). %d round(s), the roles moved to another host each round; "
            "medians, with each round's host figure to show the spread."
            % (cpu["window_s"], len(cpu["rounds"])))
        add("")
        add("| watcher | host CPU s per min of waiting | ssh-borne | server | rounds (host) | ratio to waiter |")
        add("|---|---|---|---|---|---|")
        waiter_cpu = cpu["per_tool"]["waiter"]["host_cpu_s_per_min"]
        for tool in [t for t in CPU_TOOLS if t in cpu["per_tool"]]:
            entry = cpu["per_tool"][tool]
            ratio = ("%.2fx" % (entry["host_cpu_s_per_min"] / waiter_cpu)) if tool != "waiter" and waiter_cpu > 0 else "-"
            add("| %s | %.3f | %.3f | %.3f | %s | %s |" % (
                TOOL_LABELS[tool], entry["host_cpu_s_per_min"], entry["ssh_tree_cpu_s_per_min"],
                entry["server_cpu_s_per_min"], ", ".join("%.3f" % v for v in entry["host_cpu_rounds"]), ratio))
        control = cpu["control"]
        add("")
        add("Control host (server loading, nobody waiting): %.3f CPU s/min for the whole host, of which the server "
            "%.3f and sshd %.3f (the measurement's own ssh sessions)." % (control["host_total"], control["server"],
                                                                          control["sshd"]))
        add("")
    fleet = results.get("fleet")
    if fleet:
        settings = fleet["settings"]
        add("## 3. Fleet cost: `playbooks/deploy_k26.yml`")
        add("")
        add("Settings in effect (the collection's `ansible.cfg`): forks %s, pipelining %s, ControlPersist %s, "
            "gathering %s, serial %s. Wall time of `ansible-playbook` on the controller; the stand-in loads in about "
            "5 s (pace 0.01), so a rollout's figure is mostly Ansible." % (
                settings["forks"], settings["pipelining"], settings["control_persist"], settings["gathering"],
                settings["serial"]))
        add("")
        add("| run | hosts | trials | median wall | min-max | per host | changed |")
        add("|---|---|---|---|---|---|---|")
        first = fleet["first_deploy"]
        add("| first deploy (installs headers, pip, compressed-tensors; serial 100%%) | %d | 1 | %.1f s | - | %.1f s | %d |"
            % (first["hosts"], first["wall_s"], first["wall_s"] / first["hosts"], first["changed"]))
        for label, rows in (("no-op re-run", fleet["noop"]), ("no-op re-run, serial 100%", fleet["noop_serial_all"]),
                            ("rollout changing 1 host", fleet["rollout"])):
            for size in sorted({r["hosts"] for r in rows}):
                walls = [r["wall_s"] for r in rows if r["hosts"] == size]
                changed = max(r["changed"] for r in rows if r["hosts"] == size)
                add("| %s | %d | %d | %.1f s | %.1f-%.1f s | %.1f s | %d |" % (
                    label, size, len(walls), statistics.median(walls), min(walls), max(walls),
                    statistics.median(walls) / size, changed))
        sizes = sorted({r["hosts"] for r in fleet["noop"]})
        if len(sizes) > 1:
            def med(rows, size):
                return statistics.median(r["wall_s"] for r in rows if r["hosts"] == size)
            small, large = sizes[0], sizes[-1]
            slope = (med(fleet["noop"], large) - med(fleet["noop"], small)) / float(large - small)
            add("")
            add("Growth: a no-op re-run costs about %.1f s more per extra host (%d -> %d hosts, medians). The "
                "playbook's default `serial: [1, '25%%']` makes the canary batch 1 host and every further batch "
                "int(25%% of the hosts) = 1 host below 8 hosts, so on a small fleet the hosts are walked one at a time "
                "and the time grows linearly; `forks` only helps within a batch." % (slope, small, large))
            if fleet["noop_serial_all"]:
                one_batch = statistics.median(r["wall_s"] for r in fleet["noop_serial_all"])
                add("With one batch (`-e '{\"k26_serial\": [\"100%%\"]}'`) the same no-op on %d hosts takes %.1f s "
                    "(%.1fx faster): the batch policy, not Ansible's per-host cost, dominates a re-run." % (
                        large, one_batch, med(fleet["noop"], large) / one_batch))
        add("")
    add("## Targets and notes")
    add("")
    for note in results.get("notes", []):
        add("- " + note)
    add("")
    return "\n".join(lines)


def evaluate(results):
    notes = []
    lag = results.get("lag_summary")
    if lag:
        waiter = {s: lag[s]["tools"]["waiter"] for s in SCENARIOS}
        for scenario in ("ready", "crash"):
            median = waiter[scenario]["median_lag_s"]
            met = median is not None and median < 1.0 and waiter[scenario]["wrong"] == 0
            module = waiter[scenario].get("module_median_lag_s")
            notes.append("Target waiter median lag < 1 s for **%s**: %s as seen on the controller (median %s over %d "
                         "right verdicts of %d); on the host, when the module itself decided: median %s." % (
                             scenario, "met" if met else "**missed**", fmt(median, " s"), waiter[scenario]["right"],
                             lag[scenario]["trials"], fmt(module, " s")))
        hang = waiter["hang"]
        hang_max = hang["max_lag_s"]
        met = hang_max is not None and hang_max <= WAITER_STALL_TIMEOUT + 1.0 and hang["right"] == lag["hang"]["trials"]
        notes.append("Target stall detected within stall_timeout + 1 s (%.0f s): %s (median %s, worst %s, %d/%d trials)." % (
            WAITER_STALL_TIMEOUT + 1, "met" if met else "**missed**", fmt(hang["median_lag_s"], " s"), fmt(hang_max, " s"),
            hang["right"], lag["hang"]["trials"]))
        false_ready = waiter["ready"]["false_ready"]
        notes.append("Target no false ready from the waiter: %s (%d false ready; seed 1's /v1/models loop: %d of %d)." % (
            "met" if false_ready == 0 else "**missed**", false_ready, lag["ready"]["tools"]["seed1"]["false_ready"],
            lag["ready"]["trials"]))
        notes.extend(why_notes(results, waiter))
    notes.extend(results.get("extra_notes", []))
    return notes


def why_notes(results, waiter):
    """Why the figures are what they are (the closing note of the page)."""
    notes = []
    for scenario in ("ready", "crash"):
        median, module = waiter[scenario]["median_lag_s"], waiter[scenario].get("module_median_lag_s")
        if median is not None and median >= 1.0 and module is not None and module < 1.0:
            notes.append("Why the %s lag misses 1 s on the controller but not on the host: the module decided %.2f s "
                         "after the event (median); the other %.2f s is Ansible bringing the result back (module exit, "
                         "ssh, the worker, the callback) on this loaded 2-core machine, with up to 5 trials of 3 "
                         "Ansible processes each running at once." % (scenario, module, median - module))
    quiet = results["lag_summary"]["ready"]["tools"].get("waiter_quiet")
    if quiet:
        pairs = ["%s %s vs %s" % (scenario, fmt(waiter[scenario]["median_lag_s"], " s"),
                                  fmt(results["lag_summary"][scenario]["tools"]["waiter_quiet"]["median_lag_s"], " s"))
                 for scenario in SCENARIOS]
        notes.append("Lag on the controller with the live progress lines vs without (`sglang_wait_progress: false`, "
                     "same trials): %s. The action plugin does not hold the verdict for a progress read in flight; "
                     "what differs is the reads' share of the host's and the controller's CPU." % "; ".join(pairs))
    if waiter["hang"]["median_lag_s"] is not None and waiter["hang"]["median_lag_s"] > WAITER_STALL_TIMEOUT + 1.0:
        notes.append("Why stalls are late: the waiter counts quiet time from when it *read* the last journal line, "
                     "and it reads the journal only at its full unit polls, on a jittered backoff capped at "
                     "`max_poll_interval` (10 s). A hang is therefore reported stall_timeout + 0..10 s after the last "
                     "line (plus Ansible's return). The fix belongs in `plugins/module_utils/wait_machine.py`: take "
                     "the last entry's own journal timestamp (`__REALTIME_TIMESTAMP`) as the last activity, and read "
                     "the journal once more when the stall deadline comes.")
    notes.append("Baselines, faithfully: the seeds' loops run from the controller as the seeds did (curl to the "
                 "host's address, a fresh `ssh` per `systemctl is-active`), `bench/baselines/*.sh`; "
                 "`ansible.builtin.uri` runs on the host like the waiter (`bench/playbooks/uri_until.yml`). "
                 "Seed 1 takes `/v1/models` as ready, and SGLang answers it as soon as the port is bound, before the "
                 "warmup: every trial whose warmup spans one of its polls is a false ready. Seed 2 and uri send a "
                 "real chat completion, so they are right but late by up to one period (15 s, 10 s). Neither seed "
                 "sees a crash loop until systemd gives up (`StartLimitBurst=3`, `RestartSec=15`: about 45 s and "
                 "three loads after the first crash): `is-active` says `activating` in between. uri never looks at "
                 "the unit: a crashed server costs it all its retries (120 x 10 s). No baseline detects a hang.")
    cpu = results.get("cpu")
    if cpu:
        per = cpu["per_tool"]
        quiet = per.get("waiter_quiet")
        text = ("CPU: the waiter costs the GPU host %.2f CPU s per minute of waiting, %.1f%% of one core; uri + until "
                "costs %.2f (a new Python module process every 10 s); the seeds' loops cost the host least (%.2f and "
                "%.2f), because their loop runs on the controller and the host only sees one ssh login and a "
                "`systemctl is-active` per period." % (
                    per["waiter"]["host_cpu_s_per_min"], per["waiter"]["host_cpu_s_per_min"] / 60.0 * 100,
                    per["uri"]["host_cpu_s_per_min"], per["seed1"]["host_cpu_s_per_min"],
                    per["seed2"]["host_cpu_s_per_min"]))
        if quiet:
            text += (" Without the action plugin's live progress (`sglang_wait_progress: false`, no `cat` of the "
                     "progress file over ssh every few seconds) the waiter costs %.2f." % quiet["host_cpu_s_per_min"])
        text += (" The rest is the module's own polling: a TCP connect and a /proc read every 0.5 s, `systemctl show` "
                 "and `journalctl` on the backoff, and its start-up (AnsiballZ, imports) spread over the window.")
        notes.append(text)
    return notes


# ---------------------------------------------------------------------------------------------------------------
def ensure_tools():
    missing = [tool for tool in ("curl", "ssh") if shutil.which(tool) is None]
    if missing:
        packages = {"curl": "curl", "ssh": "openssh-client"}
        subprocess.run(["apt-get", "install", "-y", "-q"] + [packages[m] for m in missing], check=True,
                       stdout=subprocess.DEVNULL)
    if not (Path(sys.executable).parent / "ansible-playbook").exists():
        raise SystemExit("run with the repo venv's python (make setup): ansible-playbook is not next to %s"
                         % sys.executable)
    if not (COLLECTIONS / "ansible_collections" / "llmops" / "sglang").exists():
        raise SystemExit("%s is missing: run `make setup` first" % COLLECTIONS)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: one trial per scenario, short windows")
    parser.add_argument("--state-dir", default="/tmp/llmops-bench-fleet-%d" % os.getpid())
    parser.add_argument("--prefix", default="bn%04d" % (os.getpid() % 10000))
    parser.add_argument("--keep-fleet", action="store_true")
    parser.add_argument("--seed", type=int, default=None, help="random seed of the timelines")
    parser.add_argument("--output", default=str(REPO / "docs" / "benchmarks.md"))
    parser.add_argument("--render", metavar="RESULTS_JSON", help="only rewrite the page from raw results")
    parser.add_argument("--skip", action="append", default=[], choices=["lag", "cpu", "fleet"])
    args = parser.parse_args()

    if args.render:
        results = json.loads(Path(args.render).read_text(encoding="utf-8"))
        if results.get("lag_trials"):
            results["lag_summary"] = summarize_lag(results["lag_trials"])
        results["notes"] = evaluate(results)
        Path(args.output).write_text(render(results), encoding="utf-8")
        return 0
    if os.geteuid() != 0:
        raise SystemExit("needs root (the fleet: network namespaces, overlay mounts, cgroups)")
    ensure_tools()
    seed = args.seed if args.seed is not None else int(time.time())
    rng = random.Random(seed)
    if args.quick:
        # A smoke run: one trial per scenario, a short CPU window, no fleet cost (its first deploy alone takes
        # minutes); the crash loop trial ends before the seeds' loops could see the start limit.
        plan = {"hosts": 5, "lag_hosts": 4, "lag_trials": 1, "cpu_window": 20.0, "cpu_rounds": 1, "fleet": None, "loop_cap": 30.0}
    else:
        plan = {"hosts": 6, "lag_hosts": 5, "lag_trials": 5, "cpu_window": 60.0, "cpu_rounds": 3,
                "fleet": {"noop": {1: 3, 3: 1, 6: 1}, "noop_serial_all": 1, "rollout": 1}, "loop_cap": 85.0}
    LOOP_CAP[0] = plan["loop_cap"]
    started = time.time()
    results = {"quick": args.quick, "seed": seed, "started": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
               "machine": machine_info(), "fleet_hosts": plan["hosts"], "lag_hosts": plan["lag_hosts"],
               "plan": {k: v for k, v in plan.items() if k != "fleet"}, "extra_notes": []}
    fleet = BenchFleet(args.state_dir, args.prefix, plan["hosts"])
    load = LoadSampler()
    load.start()
    previous = signal.getsignal(signal.SIGTERM)

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, interrupt)
    try:
        log("fleet up: %d hosts in %s" % (plan["hosts"], args.state_dir))
        results["fleet_up_s"] = round(fleet.up(), 1)
        load.phase = "fleet"
        if "fleet" not in args.skip and plan["fleet"]:
            results["fleet"] = run_fleet_cost(fleet, plan["fleet"])
        else:
            results["extra_notes"].append("Fleet cost not measured in this run (%s)." % (
                "--quick" if args.quick else "--skip fleet"))
        log("preparing the benchmark's units")
        prepare_hosts(fleet)
        load.phase = "cpu"
        if "cpu" not in args.skip:
            log("cpu: %d s window, one watcher per host + a control host" % plan["cpu_window"])
            results["cpu"] = run_cpu(fleet, fleet.hosts, plan["cpu_window"], plan["cpu_rounds"])
        load.phase = "lag"
        if "lag" not in args.skip:
            log("lag: %d trial(s) per scenario on %d hosts" % (plan["lag_trials"], plan["lag_hosts"]))
            results["lag_trials"] = run_lag(fleet, fleet.hosts[:plan["lag_hosts"]], plan["lag_trials"], rng)
            results["lag_summary"] = summarize_lag(results["lag_trials"])
    finally:
        signal.signal(signal.SIGTERM, previous)
        if not args.keep_fleet:
            log("fleet down")
            fleet.down()
    load.stop_event.set()
    results["load_average"] = load.summary()
    results["duration_s"] = round(time.time() - started, 1)
    results["notes"] = evaluate(results)
    (BENCH / "results").mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
    raw = json.dumps(results, indent=1, sort_keys=True)
    (BENCH / "results" / ("%s%s.json" % (stamp, "-quick" if args.quick else ""))).write_text(raw, encoding="utf-8")
    if not args.quick:
        (REPO / "docs" / "benchmarks.json").write_text(raw, encoding="utf-8")
    page = Path(args.output if not args.quick else str(BENCH / "results" / "benchmarks-quick.md"))
    page.write_text(render(results), encoding="utf-8")
    log("done in %.1f min" % (results["duration_s"] / 60.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
