# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Toward 1,000 hosts (issue 27): the plan pass of playbooks/deploy_k26.yml measured at 6, 12, 24 and 48 hosts on
this machine, fitted, and carried to a 1,000-host fleet on one controller: a model with its measured inputs.

Part of `make bench` (section `scale`: bench/cli.py `--only scale` / `--skip scale`, `--scale-sizes`,
`--scale-trials`; page.py renders it). One private fleet of max(sizes) hosts, deployed once by today's playbook
(`k26_serial: ['100%']`), then no-op re-runs (the plan pass: every host observed, planned, nothing to roll out)
limited to the first N hosts, for each size, TRIALS times (sizes ascending in even trials, descending in odd ones,
so that a drift of the machine's load falls on the small and the large runs alike).

Measured per run: wall seconds; the controller's CPU seconds (user + sys of ansible-playbook and every process it
waited for, RUSAGE_CHILDREN deltas: its workers, their ssh clients, not the ControlPersist masters that outlive
the run); and, from bench/callback_plugins/bench_timing.py, where the wall time went: in tasks that run a module on
the hosts, in tasks that stay on the controller (set_fact, include_role, the plan's filters, assert, debug), and
outside any task (Python start-up, parsing the playbook and the collection, the inventory, play set-up, the
recap), plus the size of each host's sglang_observe result (the fact every later task's templating carries).
"""

from __future__ import absolute_import, division, print_function

import configparser
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import BENCH, REPO, ansible_env, log, median, recap, run_playbook
from .hosts import BenchFleet

__metaclass__ = type  # pylint: disable=invalid-name

SIZES = (6, 12, 24, 48)
TRIALS = 2
STATE_DIR = "/var/lib/llmops-sglang-bench-scale"
PREFIX = "bs"
TARGET_HOSTS = 1000
PLAYBOOK = REPO / "playbooks" / "deploy_k26.yml"
SIZED_ACTIONS = ("sglang_observe",)


def _controller_only():
    """bench_count's set of actions that never reach a host (one list for both callbacks' readers)."""
    spec = importlib.util.spec_from_file_location("bench_count", str(BENCH / "callback_plugins" / "bench_count.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CONTROLLER_ONLY


def forks():
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(str(REPO / "ansible.cfg"))
    return int(parser.get("defaults", "forks", fallback="5"))


# ---- pure: the breakdown, the fits and the model (tests/unit/test_bench_scale.py) ----

def breakdown(timing, wall, controller_only):
    """Where a run's wall time went: seconds in host tasks, controller-only tasks and outside any task; the five
    longest tasks; the median sglang_observe result size per host (bytes). Spans are first start to last result of
    a task (the linear strategy runs one task at a time on every host)."""
    spans = []
    for task in timing.get("tasks") or []:
        span = max(0.0, (task["end"] if task.get("end") is not None else task["start"]) - task["start"])
        spans.append((span, task))
    host = sum(span for span, task in spans if task["action"] not in controller_only)
    controller = sum(span for span, task in spans if task["action"] in controller_only)
    sizes = [size for _span, task in spans for size in task.get("sizes") or []]
    top = sorted(spans, key=lambda pair: -pair[0])[:5]
    return {"host_tasks_s": round(host, 2), "controller_tasks_s": round(controller, 2),
            "outside_tasks_s": round(max(0.0, wall - host - controller), 2),
            "tasks": len(spans), "observe_bytes": median(sizes),
            "top": [{"name": task["name"], "action": task["action"], "span_s": round(span, 2),
                     "results": task["results"]} for span, task in top]}


def linear_fit(points):
    """Least squares y = a + b x over [(x, y)]: {intercept, slope, rss} (None when fewer than two distinct x)."""
    xs = [float(x) for x, _y in points]
    if len(set(xs)) < 2:
        return None
    n = float(len(points))
    mean_x = sum(xs) / n
    mean_y = sum(float(y) for _x, y in points) / n
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x in xs)
    intercept = mean_y - slope * mean_x
    rss = sum((y - intercept - slope * x) ** 2 for x, y in points)
    return {"intercept": intercept, "slope": slope, "rss": rss}


def _det3(m):
    return (m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]))


def quadratic_fit(points):
    """Least squares y = a + b x + c x^2 (normal equations, Cramer's rule): {a, b, c, rss}; None below 3 distinct x."""
    if len(set(float(x) for x, _y in points)) < 3:
        return None
    s = [sum(float(x) ** k for x, _y in points) for k in range(5)]
    t = [sum(float(y) * float(x) ** k for x, y in points) for k in range(3)]
    matrix = [[s[0], s[1], s[2]], [s[1], s[2], s[3]], [s[2], s[3], s[4]]]
    det = _det3(matrix)
    if abs(det) < 1e-12:
        return None
    coef = []
    for column in range(3):
        swapped = [row[:] for row in matrix]
        for row in range(3):
            swapped[row][column] = t[row]
        coef.append(_det3(swapped) / det)
    a, b, c = coef
    rss = sum((y - a - b * x - c * x * x) ** 2 for x, y in points)
    return {"a": a, "b": b, "c": c, "rss": rss}


def summarize(runs, sizes):
    """Medians per size (wall, controller CPU, the breakdown's parts, tasks per host) and the fits over sizes."""
    rows = []
    for size in sizes:
        mine = [run for run in runs if run["hosts"] == size and run["rc"] == 0]
        if not mine:
            continue
        pick = dict((key, median([run[key] for run in mine])) for key in (
            "wall_s", "controller_cpu_s", "host_tasks_s", "controller_tasks_s", "outside_tasks_s", "tasks_per_host",
            "observe_bytes"))
        pick.update(hosts=size, trials=len(mine), walls=[run["wall_s"] for run in mine],
                    cpus=[run["controller_cpu_s"] for run in mine])
        rows.append(pick)
    fits = {}
    for key in ("wall_s", "controller_cpu_s", "host_tasks_s", "controller_tasks_s", "outside_tasks_s"):
        points = [(row["hosts"], row[key]) for row in rows if row[key] is not None]
        fits[key] = {"linear": linear_fit(points), "quadratic": quadratic_fit(points)}
    return {"rows": rows, "fits": fits}


def projection(fit, hosts=TARGET_HOSTS):
    """y at `hosts` by the linear fit and by the quadratic one ({linear, quadratic}, None where there is no fit)."""
    linear, quadratic = fit.get("linear"), fit.get("quadratic")
    return {"linear": linear["intercept"] + linear["slope"] * hosts if linear else None,
            "quadratic": quadratic["a"] + quadratic["b"] * hosts + quadratic["c"] * hosts * hosts if quadratic else None}


def model(summary, fork_count, cores, hosts=TARGET_HOSTS):
    """The 1,000-host model's figures from the summary: each fitted figure at `hosts` (both fits), the per-host
    costs at the largest measured size, the memory the observations take, and the rounds a task needs with the
    configured forks."""
    rows = summary["rows"]
    if not rows:
        return None
    largest = rows[-1]
    out = {"hosts": hosts, "forks": fork_count, "cores": cores, "largest": largest["hosts"],
           "at": dict((key, projection(fit, hosts)) for key, fit in summary["fits"].items()),
           "per_host_at_largest": dict((key, (largest[key] / largest["hosts"]) if largest[key] is not None else None)
                                       for key in ("wall_s", "controller_cpu_s", "host_tasks_s", "controller_tasks_s",
                                                   "outside_tasks_s")),
           "rounds_per_task": -(-hosts // fork_count),
           "observe_mib": (largest["observe_bytes"] or 0) * hosts / 1048576.0}
    cpu = summary["fits"]["controller_cpu_s"]["linear"]
    out["cpu_bound_wall_s"] = ((cpu["intercept"] + cpu["slope"] * hosts) / cores) if cpu else None
    return out


# ---- the measurement ----

def timing_env(timing_file):
    env = ansible_env()
    env.update({"ANSIBLE_CALLBACK_PLUGINS": str(BENCH / "callback_plugins"),
                "ANSIBLE_CALLBACKS_ENABLED": "bench_timing",
                "BENCH_TIMING_FILE": str(timing_file),
                "BENCH_TIMING_SIZES": ",".join(SIZED_ACTIONS)})
    return env


def run_noop(fleet, names, controller_only, timeout=1800):
    """One no-op of deploy_k26.yml limited to `names`: wall, controller CPU, the breakdown, tasks per host."""
    handle, timing_file = tempfile.mkstemp(prefix="llmops-bench-scale-", suffix=".json")
    os.close(handle)
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(fleet.inventory), str(PLAYBOOK),
               "--limit", ",".join(names)]
    load = os.getloadavg()[0]
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.time()
        proc = subprocess.run(command, capture_output=True, text=True, env=timing_env(timing_file), cwd=str(REPO),
                              timeout=timeout, stdin=subprocess.DEVNULL, check=False)
        wall = time.time() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            with open(timing_file, encoding="utf-8") as stream:
                timing = json.load(stream)
        except ValueError:
            timing = {}
    finally:
        os.unlink(timing_file)
    stats = recap(proc.stdout)
    tasks = [stats.get(name, {}).get("ok", 0) + stats.get(name, {}).get("skipped", 0)
             + stats.get(name, {}).get("failed", 0) for name in names]
    changed = sum(stats.get(name, {}).get("changed", 0) for name in names)
    row = {"hosts": len(names), "wall_s": round(wall, 2), "rc": proc.returncode, "changed": changed,
           "controller_cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2),
           "tasks_per_host": median(tasks), "loadavg_1m": round(load, 2)}
    row.update(breakdown(timing, wall, controller_only))
    if proc.returncode != 0 or changed:
        row["tail"] = proc.stdout[-3000:] + proc.stderr[-2000:]
    log("scale: no-op on %d hosts: %.1f s wall, %.1f s controller CPU, rc=%d, changed=%d, load %.1f" % (
        len(names), wall, row["controller_cpu_s"], proc.returncode, changed, load))
    return row


def run_scale(sizes=SIZES, trials=TRIALS, state_dir=STATE_DIR, prefix=PREFIX):
    """Boots a private fleet of max(sizes) hosts, deploys it once, measures the no-ops, removes the fleet (also on
    failure)."""
    sizes = sorted(set(sizes))
    controller_only = _controller_only()
    fleet = BenchFleet(state_dir, prefix, sizes[-1])
    result = {"sizes": sizes, "trials": trials, "forks": forks(), "cores": os.cpu_count(), "runs": []}
    try:
        log("scale: fleet up, %d hosts in %s" % (sizes[-1], state_dir))
        result["fleet_up_s"] = round(fleet.up(), 1)
        names = [host["name"] for host in fleet.hosts]
        prepared = run_playbook(fleet, REPO / "tests" / "fleet" / "demo_prepare.yml", limit=",".join(names))
        if prepared["rc"] != 0:
            raise RuntimeError("demo_prepare.yml failed:\n" + prepared["tail"])
        log("scale: first deploy on %d hosts (serial 100%%)" % len(names))
        first = run_playbook(fleet, PLAYBOOK, limit=",".join(names), extra={"k26_serial": ["100%"]}, timeout=3600)
        result["first_deploy"] = {"wall_s": round(first["wall_s"], 1), "rc": first["rc"]}
        if first["rc"] != 0:
            raise RuntimeError("first deploy failed:\n" + first["tail"])
        for trial in range(trials):
            for size in (sizes if trial % 2 == 0 else list(reversed(sizes))):
                result["runs"].append(dict(run_noop(fleet, names[:size], controller_only), trial=trial))
    finally:
        log("scale: fleet down")
        fleet.down()
    result["summary"] = summarize(result["runs"], sizes)
    result["model"] = model(result["summary"], result["forks"], result["cores"])
    return result


# ---- the page ----

def _fmt(value, digits=1, unit=" s"):
    return "-" if value is None else ("%.*f%s" % (digits, value, unit))


def _minutes(value, unit=" min"):
    """A projection in minutes; a negative one is a fit dominated by noise, not a figure."""
    if value is None:
        return "-"
    return _fmt(value / 60.0, 1, unit) if value >= 0 else "not meaningful (the fit goes negative: noise dominates)"


def render_scale(result):
    lines = []
    add = lines.append
    summary = result["summary"]
    add("## Toward 1,000 hosts: the plan pass at %s hosts (issue 27)" % ", ".join(str(s) for s in result["sizes"]))
    add("")
    add("`bench/scale.py`: one private fleet of %d real systemd hosts on this %d-core machine, deployed once by "
        "today's `playbooks/deploy_k26.yml` (%s s, rc %d), then no-op re-runs (the plan pass: every host observed "
        "and planned, nothing to roll out) limited to the first N hosts, %d trial(s) per size (ascending, then "
        "descending). Forks %d (the collection's `ansible.cfg`, pipelining and ControlPersist on). *Controller CPU* "
        "is user+sys of `ansible-playbook` and every process it waited for (its workers and their ssh clients). "
        "Where the wall time went (`bench/callback_plugins/bench_timing.py`): *host tasks* run a module on the "
        "hosts (connection, module transfer and run, result), *controller tasks* never leave the controller "
        "(set_fact, include_role, the plan's filters, assert, debug), *outside* is the rest (Python start-up, parsing "
        "the playbook and the collection, the inventory, play set-up, the recap). *Observe result* is the median "
        "size of one host's `sglang_observe` result as JSON." % (
            max(result["sizes"]), result["cores"], result.get("first_deploy", {}).get("wall_s", "-"),
            result.get("first_deploy", {}).get("rc", -1), result["trials"], result["forks"]))
    add("")
    add("| hosts | trials | wall (median) | controller CPU | wall per host | CPU per host | host tasks | "
        "controller tasks | outside | observe result | task results per host | walls | loads |")
    add("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in summary["rows"]:
        loads = [run["loadavg_1m"] for run in result["runs"] if run["hosts"] == row["hosts"]]
        add("| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            row["hosts"], row["trials"], _fmt(row["wall_s"]), _fmt(row["controller_cpu_s"]),
            _fmt(row["wall_s"] / row["hosts"], 2), _fmt(row["controller_cpu_s"] / row["hosts"], 2),
            _fmt(row["host_tasks_s"]), _fmt(row["controller_tasks_s"]), _fmt(row["outside_tasks_s"]),
            _fmt(row["observe_bytes"] / 1024.0 if row["observe_bytes"] else None, 1, " KiB"),
            _fmt(row["tasks_per_host"], 0, ""), ", ".join("%.1f" % w for w in row["walls"]),
            ", ".join("%.1f" % load for load in loads)))
    add("")
    fits = summary["fits"]
    add("Fits over the medians (least squares; *quadratic* has one more parameter than four points can pin down "
        "well, so it is shown to see curvature, not to trust its projection alone):")
    add("")
    add("| figure | linear: intercept + slope x hosts | residual | quadratic: a + b x + c x^2 | residual |")
    add("|---|---|---|---|---|")
    for key, label in (("wall_s", "wall"), ("controller_cpu_s", "controller CPU"), ("host_tasks_s", "host tasks"),
                       ("controller_tasks_s", "controller tasks"), ("outside_tasks_s", "outside tasks")):
        linear, quadratic = fits[key]["linear"], fits[key]["quadratic"]
        add("| %s | %s | %s | %s | %s |" % (
            label, ("%.2f + %.3f x" % (linear["intercept"], linear["slope"])) if linear else "-",
            ("%.2f" % linear["rss"]) if linear else "-",
            ("%.2f + %.3f x + %.5f x^2" % (quadratic["a"], quadratic["b"], quadratic["c"])) if quadratic else "-",
            ("%.2f" % quadratic["rss"]) if quadratic else "-"))
    add("")
    add("Per run, the five longest tasks at the largest size (trial 0):")
    add("")
    largest = [run for run in result["runs"] if run["hosts"] == max(result["sizes"]) and run.get("trial") == 0]
    for task in (largest[0]["top"] if largest else []):
        add("- %s (`%s`, %d results): %.1f s" % (task["name"], task["action"], task["results"], task["span_s"]))
    add("")
    lines.extend(render_model(result.get("model")))
    return lines


def render_model(figures):
    if not figures:
        return []
    lines = []
    add = lines.append
    at = figures["at"]
    per = figures["per_host_at_largest"]
    add("### The model: %d hosts on one controller" % figures["hosts"])
    add("")
    bound = figures["cpu_bound_wall_s"]
    busy = (per["controller_cpu_s"] / per["wall_s"]) if per["wall_s"] else None
    pace = ("at %d hosts the run used %s CPU s per second of wall time (the controller's CPU, measured on a shared "
            "machine whose other load competed for the same 2 cores: a quiet controller with more cores would get "
            "closer to that bound, by how much is not measured here)" % (figures["largest"], _fmt(busy, 2, "")))
    add("- **Wall time of the plan pass** (a no-op; every rollout starts with it): %s by the linear fit, %s by the "
        "quadratic one. **Controller CPU**: %s (linear), %s (quadratic); on this machine's %d cores the CPU alone "
        "bounds the wall time below at %s; %s." % (
            _minutes(at["wall_s"]["linear"]), _minutes(at["wall_s"]["quadratic"]),
            _minutes(at["controller_cpu_s"]["linear"], " CPU min"), _minutes(at["controller_cpu_s"]["quadratic"], " CPU min"),
            figures["cores"], _minutes(bound), pace))
    add("- **Where it goes**, per host at %d hosts: %s wall in tasks that reach the hosts, %s in tasks that stay on "
        "the controller, %s outside any task; %s controller CPU. At %d hosts with forks %d every task that reaches "
        "the hosts runs in %d rounds of %d workers; a controller-only task (a set_fact, an include, an assert) still "
        "costs one worker fork per host." % (
            figures["largest"], _fmt(per["host_tasks_s"], 3), _fmt(per["controller_tasks_s"], 3),
            _fmt(per["outside_tasks_s"], 3), _fmt(per["controller_cpu_s"], 3), figures["hosts"], figures["forks"],
            figures["rounds_per_task"], figures["forks"]))
    add("- **Facts**: the plan keeps every host's observation for the rollout's later plays: about %.0f MiB of "
        "results at %d hosts (the median observe result times the hosts), held by the controller and templated "
        "into every task that reads `hostvars`." % (figures["observe_mib"], figures["hosts"]))
    add("- **Past one controller**: the plan needs every host's observation in one place only for the plan's table, "
        "the rollout order and the canary's live baseline (computed on localhost from hostvars); the observation and the "
        "apply are per host. So (1) more forks on a controller with more cores scale the host tasks until its CPU "
        "is the bound above; (2) AWX / Automation Platform *job slicing* runs the playbook as N jobs over N slices "
        "of the inventory on N execution nodes: each slice plans, canaries and batches its own hosts (N canaries, "
        "not one: choose N with that in mind, e.g. one slice per box class); (3) `strategy: free` for the plan "
        "pass's per-host play would let a fast host run ahead instead of waiting at every task for the slowest, "
        "which matters once a fleet's round trips differ; the localhost plan play after it is the one barrier the "
        "rollout needs. None of these is measured here beyond the fit above.")
    add("")
    return lines


def scale_notes(result):
    figures = result.get("model")
    rows = result.get("summary", {}).get("rows") or []
    if not figures or not rows:
        return ["Target (issue 27) the 48-host points and the 1,000-host model on the page: not measured (no run)."]
    sizes = ", ".join(str(row["hosts"]) for row in rows)
    at = figures["at"]["wall_s"]["linear"]
    return ["Target (issue 27) the plan pass measured up to 48 hosts and a 1,000-host model: %s (no-op points at %s "
            "hosts; the linear fit puts a %d-host plan pass at %s on one controller of this machine)." % (
                "met" if max(row["hosts"] for row in rows) >= 48 else "missed (largest size %d)" % rows[-1]["hosts"],
                sizes, figures["hosts"], _minutes(at))]
