# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deploy cost (issue 24): the server role before and after "observe once, decide once", side by side.

Part of `make bench` (section `cost`: bench/cli.py `--only cost` / `--skip cost`, `--cost-base`, `--cost-hosts`,
`--cost-rounds`; page.py renders it). Issue 24 restructured roles/server: it read each host five times (four
`sglang_info` calls and a `dpkg-query` per instance) and decided the restart twice; it now makes one
`sglang_observe` call and one decision (`sglang_decide`). Its "done when" asks that the rollout be no slower.

Two trees deploy `playbooks/deploy_k26.yml` to one private fleet, alternately: the **base** tree, a git revision
(BASE, the tree before the restructure, or `--cost-base REV`) checked out with `git worktree add --detach` into a
temporary directory (with its own `.build/collections` link; removed afterwards, also on failure), and the **new**
tree, the checkout the bench runs from. Each tree's playbook runs with cwd in that tree, its ansible.cfg and
ANSIBLE_COLLECTIONS_PATH at that tree's `.build/collections`, with the same inventory and extra vars.

Each round runs both trees in turn, base then new when r is even and new then base when r is odd (ABBA: a drift of the
machine's load over the run, and whatever the run before leaves warm, fall on both trees alike). A tree's turn begins
with a converging run of its own (`k26_serial: ['100%']`, kept apart, not in the medians): two trees may render the
unit or its files differently, and a tree's no-op right after the other tree's runs would then restart every host.
The first converging run is the fleet's first deploy. Then the tree's scenarios: `noop` (nothing to change),
`change_one` (a new environment value on the first host only: the plan pass over all hosts plus one restart) and
`change` (a new environment value on every host for each run, so every host restarts, waits and saves its
configuration).

Issue 27 (a restart costs the server's load and little else) is judged by the same section against main when that
issue was filed: `bench/run.py --only cost --cost-base 1a342cd --cost-hosts 24` (ISSUE27_BASE: a change on all hosts
at most 0.8x the base's wall time, one host's change and a no-op no slower).

Measured per run: wall seconds; the controller's CPU seconds (user + sys of ansible-playbook and every process it
waited for: RUSAGE_CHILDREN deltas); the hosts' CPU seconds (the cgroup v2 `cpu.stat` `usage_usec` of each nspawn
host, everything on the host, summed over the hosts); the task results per host (the recap's ok, which counts the
changed ones, + skipped + failed) and the module tasks per host (bench/callback_plugins/bench_count.py).
"""

from __future__ import absolute_import, division, print_function

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .common import BENCH, REPO, ansible_env, log, median, recap, run_playbook
from .hosts import BenchFleet

__metaclass__ = type  # pylint: disable=invalid-name

# The tree before issue 24's restructure of roles/server (its parent: sglang_state_adopt via replace_dir).
BASE = "c4d0ce2"
STATE_DIR = "/var/lib/llmops-sglang-bench-cost"
PREFIX = "bc"
HOSTS = 2
ROUNDS = 3
TREES = ("base", "new")
SCENARIOS = ("noop", "change_one", "change")
SCENARIO_LABELS = {"noop": "no-op re-run", "change_one": "a change that restarts one host of all",
                   "change": "a change that restarts every host"}
# Issue 27's baseline: main when the issue was filed (its rollout section measured this tree's 317 s for a change on
# all 24 hosts). `--cost-base 1a342cd --cost-hosts 24` judges its targets: a change on all hosts at most
# ISSUE27_CHANGE_ALL of the base's wall time, a change on one host and a no-op no slower.
ISSUE27_BASE = "1a342cd"
ISSUE27_CHANGE_ALL = 0.8
# The figures of each run, as (key, label, unit) in the page's order.
METRICS = (("wall_s", "wall", "s"), ("controller_cpu_s", "controller CPU (ansible-playbook, user+sys)", "s"),
           ("hosts_cpu_s", "hosts' CPU (cgroup, sum over the hosts)", "s"),
           ("tasks_per_host", "task results per host (recap)", ""),
           ("modules_per_host", "module tasks per host (callback)", ""))
PLAYBOOK = Path("playbooks") / "deploy_k26.yml"
# "Not slower" is judged with this much slack on the wall time's ratio (this machine is shared and loaded).
TOLERANCE = 0.10


def order(round_index):
    """Which tree runs first in a round: base in even rounds, new in odd ones (ABBA)."""
    return TREES if round_index % 2 == 0 else tuple(reversed(TREES))


def ratio(new, base):
    """new/base, None when either is missing or base is 0."""
    if new is None or not base:
        return None
    return new / base


def summarize(runs):
    """{scenario: {"base": {metric: median}, "new": {...}, "ratio": {metric: new/base}, "runs": {tree: n}}} over the
    runs that succeeded (rc 0); a scenario no run measured is left out."""
    out = {}
    for scenario in SCENARIOS:
        rows = [r for r in runs if r["scenario"] == scenario and r["rc"] == 0]
        if not rows:
            continue
        entry = {"runs": {}, "ratio": {}}
        for tree in TREES:
            mine = [r for r in rows if r["tree"] == tree]
            entry["runs"][tree] = len(mine)
            entry[tree] = dict((key, median([r.get(key) for r in mine])) for key, _label, _unit in METRICS)
        for key, _label, _unit in METRICS:
            entry["ratio"][key] = ratio(entry["new"][key], entry["base"][key])
        out[scenario] = entry
    return out


def fmt(value, unit=""):
    if value is None:
        return "-"
    if isinstance(value, float) and unit == "s":
        return "%.2f s" % value
    return "%g" % value


def fmt_ratio(value):
    return "%.2fx" % value if value is not None else "-"


def short(subject, width=60):
    """A commit subject cut at a word for the page's prose ("..." when cut); the JSON keeps it whole."""
    subject = " ".join(str(subject or "").split())
    if len(subject) <= width:
        return subject
    return subject[:width].rsplit(" ", 1)[0].rstrip(",;:(") + "..."


def render_cost(result):
    """The page's section (Markdown lines)."""
    summary = summarize(result["runs"])
    base, new = result["trees"]["base"], result["trees"]["new"]
    title = ("the server role before and after observe once, decide once (issue 24)" if base["rev"] != ISSUE27_BASE
             else "a restart's cost, today's tree against main when issue 27 was filed")
    lines = ["## Deploy cost: %s" % title, "",
             "`playbooks/deploy_k26.yml` from two trees, alternately, on one private fleet of %d real systemd hosts "
             "(`bench/cost.py`): **base** `%s` (%s), checked out in a temporary detached git worktree, and **new** "
             "`%s` (%s, the tree the bench ran from%s). Each tree runs with its own cwd, ansible.cfg and "
             "`.build/collections`, the same inventory and extra vars, default rollout policy (`[1, '25%%']`). "
             "Scenarios: **noop**, a re-run with nothing to change; **change_one**, a new environment value on the "
             "first host only (that host restarts, the others are planned and left alone); **change**, a new "
             "environment value on every "
             "host for each run (every host restarts, waits and saves its configuration, in both trees). %d "
             "round(s), each running both trees, each tree's turn beginning with a converging run of its own (two "
             "trees may render the unit differently)%s; round r runs base first when r is even, new first when "
             "odd. "
             "*Controller CPU* is user+sys of `ansible-playbook` and the processes it waited for "
             "(`RUSAGE_CHILDREN`; not the ssh ControlPersist masters, which outlive the run and are shared by both "
             "trees). *Hosts' CPU* is each nspawn host's cgroup `cpu.stat` `usage_usec` (everything on the host: "
             "sshd, the modules, systemd, the stand-in's restart) before and after, summed over the hosts; idle, "
             "the %d hosts use %.3f CPU s per second together. *Task results* are the recap's ok (changed included) "
             "+ skipped + failed per host; *module tasks* are the results that ran something for the host (not "
             "skipped, not an include, set_fact, debug, assert, fail or meta: `bench/callback_plugins/"
             "bench_count.py`); medians over the hosts, then over the runs." % (
                 result["hosts"], base["rev"], short(base.get("subject")) or base["commit"][:12], new["rev"],
                 short(new.get("subject")) or new["commit"][:12],
                 ", with uncommitted changes" if new.get("dirty") else "",
                 result["rounds"],
                 settle_text(result),
                 result["hosts"], result.get("idle_cpu_s_per_s") or 0.0), ""]
    first = result.get("first_deploy")
    if first:
        lines += ["Fleet up in %.0f s; first deploy by the %s tree (`k26_serial: ['100%%']`): %.1f s, rc %d, %d "
                  "changed." % (result.get("fleet_up_s") or 0, first.get("tree", "new"), first["wall_s"], first["rc"],
                                first["changed"]), ""]
    converge = result.get("converge") or []
    if len(converge) > 1:
        lines += ["Converging runs at the start of each tree's turn (not in the medians): " + "; ".join(
            "%s round %d: %.1f s, %d changed on %d host(s)" % (r["tree"], r["round"], r["wall_s"], r["changed"],
                                                               r["hosts_changed"]) for r in converge[1:]) + ".", ""]
    lines += ["| scenario | figure | base (median) | new (median) | new/base | base runs | new runs |",
              "|---|---|---|---|---|---|---|"]
    for scenario in SCENARIOS:
        if scenario not in summary:
            continue
        entry = summary[scenario]
        for key, label, unit in METRICS:
            cells = {}
            for tree in TREES:
                cells[tree] = ", ".join(fmt(r.get(key), unit).replace(" s", "")
                                        for r in result["runs"] if r["scenario"] == scenario and r["tree"] == tree
                                        and r["rc"] == 0) or "-"
            lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                scenario, label, fmt(entry["base"][key], unit), fmt(entry["new"][key], unit),
                fmt_ratio(entry["ratio"][key]), cells["base"], cells["new"]))
    lines += ["", "Every run in order (tree, scenario, round: rc, changed on how many hosts, load average at its "
              "start%s): " % (", CPU pressure then" if any("cpu_pressure_avg10" in r for r in result["runs"]) else "")
              + "; ".join("%s %s %d: rc %d, %d changed (%d hosts), load %.1f%s" % (
                  r["tree"], r["scenario"], r["round"], r["rc"], r["changed"], r["hosts_changed"], r["loadavg_1m"],
                  pressure_text(r)) for r in result["runs"]) + ".", ""]
    return lines


def settle_text(result):
    """How each tree's scenarios waited after its converging run (the runs before the settle on pressure: a pause)."""
    if not result.get("settle_s"):
        return ""
    if not result.get("quiet_pressure"):
        return " and a pause of %d s before its scenarios" % result["settle_s"]
    return (" and, before each scenario, a wait until the machine's CPU pressure (`/proc/pressure/cpu` some avg10) "
            "was at most %g%% (at least %d s after the converging run, at most %d s)"
            % (result["quiet_pressure"], result["settle_s"], result.get("settle_max_s") or 0))


def pressure_text(row):
    if "cpu_pressure_avg10" not in row:
        return ""
    if row["cpu_pressure_avg10"] is None:
        return ", no CPU pressure (no PSI) after %.0f s" % row["settled_s"]
    return ", CPU pressure %.0f%% after %.0f s" % (row["cpu_pressure_avg10"], row["settled_s"])


def verdict_not_slower(wall):
    return "met" if wall <= 1.0 else "met within %d%%" % (TOLERANCE * 100) if wall <= 1.0 + TOLERANCE \
        else "**missed**"


def cost_notes(result):
    """Issue 24's "not slower" (base BASE) or issue 27's targets (base ISSUE27_BASE), judged per scenario on the wall
    time's ratio, with the CPU ratios beside it."""
    notes = []
    issue27 = result["trees"]["base"]["rev"] == ISSUE27_BASE
    failed = [r for r in result["runs"] if r["rc"] != 0]
    if failed:
        notes.append("**%d deploy-cost run(s) failed** (rc != 0), left out of the medians: %s." % (
            len(failed), ", ".join("%s %s round %d" % (r["tree"], r["scenario"], r["round"]) for r in failed)))
    for scenario, entry in summarize(result["runs"]).items():
        wall = entry["ratio"]["wall_s"]
        if wall is None:
            continue
        figures = (fmt_ratio(wall), fmt(entry["new"]["wall_s"], "s"), fmt(entry["base"]["wall_s"], "s"),
                   fmt_ratio(entry["ratio"]["controller_cpu_s"]), fmt_ratio(entry["ratio"]["hosts_cpu_s"]),
                   fmt(entry["new"]["tasks_per_host"]), fmt(entry["base"]["tasks_per_host"]))
        if issue27:
            if scenario == "change":
                target = "at most %.1fx the wall time of" % ISSUE27_CHANGE_ALL
                verdict = "met" if wall <= ISSUE27_CHANGE_ALL else "**missed**"
            else:
                target, verdict = "no slower than", verdict_not_slower(wall)
            notes.append("Target (issue 27) %s on %d hosts, %s `%s` (main when the issue was filed): %s (wall "
                         "new/base %s: %s vs %s; controller CPU %s, hosts' CPU %s; task results per host %s vs %s)." % (
                             (SCENARIO_LABELS[scenario], result["hosts"], target, ISSUE27_BASE, verdict) + figures))
            continue
        verdict = verdict_not_slower(wall)
        notes.append("Target (issue 24) a deploy is not slower after the server role's restructure, %s: %s (wall "
                     "new/base %s: %s vs %s; controller CPU %s, hosts' CPU %s; task results per host %s vs %s, module "
                     "tasks per host %s vs %s)." % (
                         SCENARIO_LABELS[scenario], verdict, fmt_ratio(wall), fmt(entry["new"]["wall_s"], "s"),
                         fmt(entry["base"]["wall_s"], "s"), fmt_ratio(entry["ratio"]["controller_cpu_s"]),
                         fmt_ratio(entry["ratio"]["hosts_cpu_s"]), fmt(entry["new"]["tasks_per_host"]),
                         fmt(entry["base"]["tasks_per_host"]), fmt(entry["new"]["modules_per_host"]),
                         fmt(entry["base"]["modules_per_host"])))
    return notes


# --- measuring (needs root, git and the fleet) ---------------------------------------------------------------------

def _git(*args, cwd=REPO):
    return subprocess.run(["git"] + list(args), cwd=str(cwd), capture_output=True, text=True, check=True).stdout.strip()


def describe(tree, rev=None):
    return {"rev": rev or _git("rev-parse", "--short", "HEAD", cwd=tree), "commit": _git("rev-parse", "HEAD", cwd=tree),
            "subject": _git("log", "-1", "--format=%s", cwd=tree),
            "dirty": bool(_git("status", "--porcelain", "--untracked-files=no", cwd=tree))}


def link_collection(tree):
    """tree/.build/collections/ansible_collections/llmops/sglang -> the tree (make setup's link)."""
    parent = Path(tree) / ".build" / "collections" / "ansible_collections" / "llmops"
    parent.mkdir(parents=True, exist_ok=True)
    link = parent / "sglang"
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink("../../../..", str(link))
    return Path(tree) / ".build" / "collections"


class BaseTree:
    """The base revision in a temporary detached worktree, removed on exit (also on failure)."""

    def __init__(self, rev):
        self.rev = rev
        self.path = None

    def __enter__(self):
        commit = _git("rev-parse", "--verify", "%s^{commit}" % self.rev)
        self.path = Path(tempfile.mkdtemp(prefix="llmops-bench-cost-base-"))
        try:
            _git("worktree", "add", "--detach", str(self.path), commit)
            link_collection(self.path)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self.path

    def __exit__(self, *_exc):
        result = subprocess.run(["git", "worktree", "remove", "--force", str(self.path)], cwd=str(REPO),
                                capture_output=True, text=True, check=False)
        if result.returncode != 0:
            log("cost: git worktree remove: %s" % result.stderr.strip())
        shutil.rmtree(str(self.path), ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=str(REPO), capture_output=True, check=False)
        return False


def cgroup_cpu_file(name):
    """The cgroup v2 cpu.stat of a fleet host (tests/fleet: /sys/fs/cgroup/{systemd,unified}/nspawn/NAME on this
    hybrid machine, /sys/fs/cgroup/nspawn/NAME on pure v2)."""
    for root in (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup")):
        path = root / "nspawn" / name / "cpu.stat"
        if path.exists():
            return path
    raise RuntimeError("no cgroup v2 cpu.stat for fleet host %s under /sys/fs/cgroup" % name)


def read_usage_usec(text):
    for line in text.splitlines():
        key, _sep, value = line.partition(" ")
        if key == "usage_usec":
            return int(value)
    raise ValueError("no usage_usec in cpu.stat")


def hosts_cpu(names):
    """{host: CPU seconds so far}: everything the host's processes used."""
    return dict((name, read_usage_usec(cgroup_cpu_file(name).read_text(encoding="ascii")) / 1e6) for name in names)


def tree_env(tree, count_file):
    env = ansible_env()
    env.pop("PYTHONPATH", None)
    env.update({"ANSIBLE_COLLECTIONS_PATH": str(Path(tree) / ".build" / "collections"),
                "ANSIBLE_CONFIG": str(Path(tree) / "ansible.cfg"),
                "ANSIBLE_CALLBACK_PLUGINS": str(BENCH / "callback_plugins"),
                "ANSIBLE_CALLBACKS_ENABLED": "bench_count",
                "BENCH_COST_COUNT_FILE": str(count_file)})
    return env


def run_tree(fleet, tree, names, extra=None, timeout=1800):
    """deploy_k26.yml from one tree: wall, controller CPU (RUSAGE_CHILDREN deltas), hosts' CPU (cgroup deltas),
    the recap and the module tasks per host."""
    handle, count_file = tempfile.mkstemp(prefix="llmops-bench-cost-count-", suffix=".json")
    os.close(handle)
    command = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(fleet.inventory),
               str(Path(tree) / PLAYBOOK), "--limit", ",".join(names)]
    if extra:
        command += ["-e", json.dumps(extra)]
    try:
        hosts_before = hosts_cpu(names)
        usage_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.time()
        proc = subprocess.run(command, capture_output=True, text=True, env=tree_env(tree, count_file), cwd=str(tree),
                              timeout=timeout, stdin=subprocess.DEVNULL, check=False)
        wall = time.time() - started
        usage_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        hosts_after = hosts_cpu(names)
        try:
            with open(count_file, encoding="utf-8") as stream:
                modules = json.load(stream)
        except ValueError:
            modules = {}
    finally:
        os.unlink(count_file)
    return {"wall_s": wall, "rc": proc.returncode, "recap": recap(proc.stdout),
            "controller_user_s": usage_after.ru_utime - usage_before.ru_utime,
            "controller_sys_s": usage_after.ru_stime - usage_before.ru_stime,
            "hosts_cpu": dict((name, hosts_after[name] - hosts_before[name]) for name in names),
            "modules": modules, "tail": proc.stdout[-3000:] + proc.stderr[-2000:]}


def row_of(run, tree, scenario, round_index, names, load):
    """One run's figures, as the results and the page keep them."""
    stats = [run["recap"].get(name, {}) for name in names]
    tasks = [s.get("ok", 0) + s.get("skipped", 0) + s.get("failed", 0) for s in stats]
    modules = [run["modules"][name] for name in names if name in run["modules"]]
    row = {"tree": tree, "scenario": scenario, "round": round_index, "hosts": len(names), "rc": run["rc"],
           "wall_s": round(run["wall_s"], 2),
           "controller_cpu_s": round(run["controller_user_s"] + run["controller_sys_s"], 2),
           "controller_user_s": round(run["controller_user_s"], 2),
           "controller_sys_s": round(run["controller_sys_s"], 2),
           "hosts_cpu_s": round(sum(run["hosts_cpu"].values()), 2),
           "hosts_cpu_per_host_s": dict((name, round(value, 2)) for name, value in run["hosts_cpu"].items()),
           "tasks_per_host": median(tasks), "tasks": dict(zip(names, tasks)),
           "modules_per_host": median(modules), "modules": dict((name, run["modules"].get(name)) for name in names),
           "changed": sum(s.get("changed", 0) for s in stats),
           "hosts_changed": sum(1 for s in stats if s.get("changed", 0) > 0),
           "loadavg_1m": round(load, 2)}
    if run["rc"] != 0:
        row["tail"] = run["tail"]
    return row


def measure_one(fleet, tree_dir, tree, scenario, round_index, names, extra=None):
    load = os.getloadavg()[0]
    row = row_of(run_tree(fleet, tree_dir, names, extra=extra), tree, scenario, round_index, names, load)
    log("cost: %s %s round %d: %.1f s wall, %.1f s controller CPU, %.1f s hosts' CPU, %s tasks/host, %s module "
        "tasks/host, rc=%d, changed=%d on %d host(s)" % (
            tree, scenario, round_index, row["wall_s"], row["controller_cpu_s"], row["hosts_cpu_s"],
            row["tasks_per_host"], row["modules_per_host"], row["rc"], row["changed"], row["hosts_changed"]))
    return row


def run_cost(base_rev=BASE, hosts=HOSTS, rounds=ROUNDS, state_dir=STATE_DIR, prefix=PREFIX):
    """Boots a private fleet, checks the base tree out, measures both trees in every round, removes both (also on
    failure)."""
    fleet = BenchFleet(state_dir, prefix, hosts)
    result = {"hosts": hosts, "rounds": rounds, "playbook": str(PLAYBOOK), "runs": [],
              "trees": {"new": describe(REPO)}}
    try:
        with BaseTree(base_rev) as base_dir:
            result["trees"]["base"] = describe(base_dir, base_rev)
            log("cost: base tree %s (%s) in %s" % (base_rev, result["trees"]["base"]["commit"][:12], base_dir))
            log("cost: fleet up, %d hosts in %s" % (hosts, state_dir))
            result["fleet_up_s"] = round(fleet.up(), 1)
            measure(fleet, {"base": base_dir, "new": REPO}, rounds, result)
    finally:
        log("cost: fleet down")
        fleet.down()
    return result


# Before each scenario the machine settles (both trees alike): at least SETTLE_S after a converging run, then until the
# CPU pressure's 10-second average (/proc/pressure/cpu `some avg10`: the share of time a runnable task waited for a
# core) is at most QUIET_PRESSURE %, for at most SETTLE_MAX_S. A fixed 30 s was not enough: the 2026-12-06 run's new
# tree converged 2-3x faster than the base, and its no-ops right after started at load 25-29 against the base's 11-14.
SETTLE_S = 30
QUIET_PRESSURE = 20.0
SETTLE_MAX_S = 180
PRESSURE_FILE = "/proc/pressure/cpu"


def cpu_pressure_avg10(text):
    """`some avg10` of /proc/pressure/cpu's text, a percentage."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "some":
            for field in fields[1:]:
                key, _sep, value = field.partition("=")
                if key == "avg10":
                    return float(value)
    raise ValueError("no 'some avg10' in %r" % text)


def read_cpu_pressure():
    """The machine's CPU pressure (cpu_pressure_avg10), None where the kernel has no PSI."""
    try:
        with open(PRESSURE_FILE, encoding="ascii") as handle:
            return cpu_pressure_avg10(handle.read())
    except (OSError, ValueError):
        return None


def settle(read_pressure, sleep, clock, minimum=SETTLE_S, maximum=SETTLE_MAX_S, quiet=QUIET_PRESSURE, step=2.0):
    """Wait `minimum` s, then until read_pressure() is at most `quiet` (or None: no PSI) or `maximum` s have passed
    since the start. -> (seconds waited, the last pressure read)."""
    started = clock()
    if minimum > 0:
        sleep(minimum)
    while True:
        pressure = read_pressure()
        waited = clock() - started
        if pressure is None or pressure <= quiet or waited >= maximum:
            return round(waited, 1), pressure
        sleep(step)


def measure(fleet, trees, rounds, result):
    """Each round, each tree in turn (ABBA): first a converging run of that tree (`k26_serial: ['100%']`, kept as a
    "converge" row, not in the medians), then its scenarios. Two trees may render the unit or its files differently
    (the base 1a342cd does): without it, a tree's no-op after the other tree's runs would restart every host. Where
    the trees render alike, the converging run is itself a no-op."""
    names = [host["name"] for host in fleet.hosts]
    run = run_playbook(fleet, REPO / "tests" / "fleet" / "demo_prepare.yml", limit=",".join(names))
    if run["rc"] != 0:
        raise RuntimeError("demo_prepare.yml failed:\n" + run["tail"])
    for round_index in range(rounds):
        for tree in order(round_index):
            log("cost: %s converges the fleet (%d hosts)" % (tree, len(names)))
            converge = measure_one(fleet, trees[tree], tree, "converge", round_index, names,
                                   extra={"k26_serial": ["100%"]})
            result.setdefault("converge", []).append(converge)
            if converge["rc"] != 0:
                raise RuntimeError("%s could not converge the fleet:\n%s" % (tree, converge["tail"]))
            # A converging run that restarted hosts leaves their stand-ins' loads and the playbook's own exit on the
            # CPUs for some seconds: both trees' scenarios start on a machine as quiet, not on the heels of it.
            pause = settle(read_cpu_pressure, time.sleep, time.monotonic)
            result["settle_s"] = SETTLE_S
            result["quiet_pressure"] = QUIET_PRESSURE
            result["settle_max_s"] = SETTLE_MAX_S
            if "first_deploy" not in result:
                result["first_deploy"] = converge
                # The hosts' own CPU while nobody deploys (the stand-in serving nothing, systemd, journald): the
                # floor under the hosts' figures, which are deltas over a whole run.
                before, started = hosts_cpu(names), time.time()
                time.sleep(10)
                after = hosts_cpu(names)
                result["idle_cpu_s_per_s"] = round(sum(after[n] - before[n] for n in names) / (time.time() - started), 4)
            for index, scenario in enumerate(SCENARIOS):
                if scenario in ("change", "change_one"):
                    for name in names if scenario == "change" else names[:1]:
                        fleet.set_host_env(name, {"BENCH_COST_MARK": "%s-%s-%d" % (tree, scenario, round_index)})
                if index > 0:  # after a scenario, no minimum: only until the machine is quiet
                    pause = settle(read_cpu_pressure, time.sleep, time.monotonic, minimum=0)
                row = measure_one(fleet, trees[tree], tree, scenario, round_index, names)
                row["settled_s"], row["cpu_pressure_avg10"] = pause
                result["runs"].append(row)
