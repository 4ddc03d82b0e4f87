# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""3. Rollout at fleet scale (issue 14): today's playbooks/deploy_k26.yml (plan first) side by side with the playbook
as it was before the plan-first rewrite (bench/baselines/deploy_k26_7a5ff7a.yml), on the same private fleet, in the
same run, with the default rollout policy (`k26_serial` unset: [1, '25%']).

Scenarios: no-op re-runs at each size; a restart-needing change on 1 host run alone (`--limit` that host: the
1-host restart time); the same kind of change on 1 host of all; a change on all hosts. A change is an environment
variable in the host's host_vars (BenchFleet.set_host_env): the unit's environment file differs, so the server must
restart. Every run of either playbook gets a change of its own (a new value), so both do the same work.
"""

from __future__ import absolute_import, division, print_function

import configparser
import os
import statistics

from .common import BENCH, REPO, log, run_playbook
from .hosts import BenchFleet

__metaclass__ = type  # pylint: disable=invalid-name

SIZES = (1, 6, 12, 24)
PLAYBOOKS = {"new": REPO / "playbooks" / "deploy_k26.yml", "old": BENCH / "baselines" / "deploy_k26_7a5ff7a.yml"}
LABELS = {"new": "today's `playbooks/deploy_k26.yml` (plan first)",
          "old": "`bench/baselines/deploy_k26_7a5ff7a.yml` (before the plan-first rewrite)"}
# Targets of issue 14 on this 2-core machine.
TARGET_SLOPE_S = 1.0
TARGET_NOOP_24_S = 35.0
# "About 35 s" and "the plan pass plus one host's restart" are judged with this much slack (and at least 5 s).
TOLERANCE = 0.10


def ansible_settings():
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(str(REPO / "ansible.cfg"))
    ssh_args = parser.get("ssh_connection", "ssh_args", fallback="")
    persist = [part.split("=", 1)[1] for part in ssh_args.split() if part.startswith("ControlPersist=")]
    return {"forks": parser.get("defaults", "forks", fallback="5 (default)"),
            "pipelining": parser.get("ssh_connection", "pipelining", fallback="False (default)"),
            "control_persist": persist[0] if persist else "60s (ansible default)",
            "gathering": parser.get("defaults", "gathering", fallback="implicit"),
            "serial": "[1, '25%'] (the default of both playbooks' k26_serial)"}


def run_rollout(state_dir, prefix, sizes=SIZES, noop_trials=None):
    """Boots a private fleet of max(sizes) hosts, measures every scenario, removes the fleet (also on failure)."""
    sizes = sorted(set(sizes))
    fleet = BenchFleet(state_dir, prefix, sizes[-1])
    result = {"sizes": sizes, "hosts": sizes[-1], "settings": ansible_settings(), "runs": [],
              "playbooks": {key: str(path.relative_to(REPO)) for key, path in PLAYBOOKS.items()}}
    try:
        log("rollout: fleet up, %d hosts in %s" % (sizes[-1], state_dir))
        result["fleet_up_s"] = round(fleet.up(), 1)
        measure(fleet, sizes, noop_trials or {}, result)
    finally:
        log("rollout: fleet down")
        fleet.down()
    return result


def _run(fleet, key, scenario, names, extra=None):
    load = os.getloadavg()[0]
    run = run_playbook(fleet, PLAYBOOKS[key], limit=",".join(names), extra=extra)
    stats = [run["recap"].get(name, {}) for name in names]
    # Tasks a host ran as the recap counts them: ok (which includes changed) + skipped + failed.
    tasks = [s.get("ok", 0) + s.get("skipped", 0) + s.get("failed", 0) for s in stats]
    row = {"playbook": key, "scenario": scenario, "hosts": len(names), "wall_s": round(run["wall_s"], 2),
           "rc": run["rc"], "changed": sum(s.get("changed", 0) for s in stats),
           "hosts_changed": sum(1 for s in stats if s.get("changed", 0) > 0),
           "hosts_in_recap": sum(1 for s in stats if s),
           "tasks_per_host": statistics.median(tasks), "tasks_min": min(tasks), "tasks_max": max(tasks),
           "loadavg_1m": round(load, 2)}
    if run["rc"] != 0:
        row["tail"] = run["tail"]
    log("rollout: %s %s on %d host(s): %.1f s, rc=%d, changed=%d on %d host(s), %s tasks/host" % (
        key, scenario, len(names), row["wall_s"], row["rc"], row["changed"], row["hosts_changed"],
        row["tasks_per_host"]))
    return row


def measure(fleet, sizes, noop_trials, result):
    names = [host["name"] for host in fleet.hosts]
    run = run_playbook(fleet, REPO / "tests" / "fleet" / "demo_prepare.yml", limit=",".join(names))
    if run["rc"] != 0:
        raise RuntimeError("demo_prepare.yml failed:\n" + run["tail"])
    log("rollout: first deploy of deploy_k26.yml on %d hosts (serial 100%%)" % len(names))
    first = _run(fleet, "new", "first deploy", names, extra={"k26_serial": ["100%"]})
    result["first_deploy"] = first
    if first["rc"] != 0:
        raise RuntimeError("first deploy failed:\n" + first["tail"])
    runs = result["runs"]
    # Which playbook goes first alternates from scenario to scenario: neither always finds the other's warm ssh
    # connections (ControlPersist) or page cache.
    orders = [("new", "old"), ("old", "new")]
    step = [0]

    def pair(scenario, hosts, change=None):
        for key in orders[step[0] % 2]:
            if change is not None:
                for name in change:
                    mark = "%s-%s-%d" % (key, scenario.replace(" ", "_"), step[0])
                    fleet.set_host_env(name, {"BENCH_ROLLOUT_MARK": mark})
            runs.append(_run(fleet, key, scenario, hosts))
        step[0] += 1

    for size in sizes:
        for _trial in range(noop_trials.get(size, 1)):
            pair("no-op", names[:size])
    pair("change on 1 of 1", names[:1], change=names[:1])
    pair("change on 1 of %d" % len(names), names, change=names[:1])
    pair("change on all %d" % len(names), names, change=names)


def _median(runs, key, scenario, hosts):
    walls = [r["wall_s"] for r in runs if r["playbook"] == key and r["scenario"] == scenario and r["hosts"] == hosts]
    return statistics.median(walls) if walls else None


def slope(points):
    """Least-squares slope and intercept of wall time over hosts: [(hosts, wall)]."""
    xs = [x for x, _wall in points]
    ys = [y for _hosts, y in points]
    if len(set(xs)) < 2:
        return None, None
    mean_x = statistics.mean(xs)
    mean_y = statistics.mean(ys)
    num = sum((x - mean_x) * (y - mean_y) for x, y in points)
    den = sum((x - mean_x) ** 2 for x in xs)
    return num / den, mean_y - num / den * mean_x


def summarize(result):
    """Medians per playbook and scenario, the no-op slopes, and the figures the targets are judged on."""
    runs = result["runs"]
    sizes = result["sizes"]
    out = {"slope": {}, "intercept": {}}
    for key in PLAYBOOKS:
        points = [(s, _median(runs, key, "no-op", s)) for s in sizes if _median(runs, key, "no-op", s) is not None]
        out["slope"][key], out["intercept"][key] = slope(points)
    largest = result["hosts"]
    out["noop_small"] = {k: _median(runs, k, "no-op", sizes[0]) for k in PLAYBOOKS}
    out["noop_large"] = {k: _median(runs, k, "no-op", largest) for k in PLAYBOOKS}
    out["restart_1"] = {k: _median(runs, k, "change on 1 of 1", 1) for k in PLAYBOOKS}
    out["change_1"] = {k: _median(runs, k, "change on 1 of %d" % largest, largest) for k in PLAYBOOKS}
    out["change_all"] = {k: _median(runs, k, "change on all %d" % largest, largest) for k in PLAYBOOKS}
    return out


def _ratio(new, old):
    return "%.2fx" % (new / old) if new is not None and old else "-"


def _scenarios(runs):
    seen = []
    for row in runs:
        if (row["scenario"], row["hosts"]) not in seen:
            seen.append((row["scenario"], row["hosts"]))
    return seen


def render_rollout(result):
    """The page's section (Markdown lines)."""
    settings = result["settings"]
    runs = result["runs"]
    summary = summarize(result)
    lines = ["## 3. Rollout at fleet scale: `deploy_k26.yml`, plan first vs before the plan (issue 14)", "",
             "Side by side on one private fleet of %d real systemd hosts, in one run (`bench/rollout.py`): %s and %s "
             "(the same tasks as commit 7a5ff7a; its header says what changed). Default rollout policy of both "
             "(`k26_serial` unset: `[1, '25%%']`, a canary then quarters). Settings (the collection's `ansible.cfg`): "
             "forks %s, pipelining %s, ControlPersist %s, gathering %s. Wall time of `ansible-playbook` on the "
             "controller; the stand-in loads in about 5 s (pace 0.01), so a restart's figure is mostly Ansible. A "
             "*change* is a new environment variable in the host's host_vars (the unit's environment file differs: a "
             "restart); each run gets its own value, so both playbooks do the same work. Which playbook runs first "
             "alternates per scenario. *Tasks/host* is the recap's ok (changed included) + skipped + failed per "
             "host, median over the hosts. One trial per row unless the trials column says more; the load column is "
             "this machine's 1-minute load average when each run started (new / old)." % (
                 result["hosts"], LABELS["new"], LABELS["old"], settings["forks"], settings["pipelining"],
                 settings["control_persist"], settings["gathering"]), ""]
    first = result["first_deploy"]
    lines.append("Fleet up in %.0f s; first deploy (installs headers, pip, compressed-tensors on every host; today's "
                 "playbook with `k26_serial: ['100%%']`): %.1f s on %d hosts, rc %d, %d changed." % (
                     result["fleet_up_s"], first["wall_s"], first["hosts"], first["rc"], first["changed"]))
    lines += ["", "| scenario | hosts | trials | new: wall | old: wall | new/old | new: changed (hosts) | "
              "old: changed (hosts) | tasks/host new / old | rc new / old | load new / old |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for scenario, hosts in _scenarios(runs):
        rows = {k: [r for r in runs if r["playbook"] == k and r["scenario"] == scenario and r["hosts"] == hosts]
                for k in PLAYBOOKS}
        new, old = _median(runs, "new", scenario, hosts), _median(runs, "old", scenario, hosts)

        def cell(key, fmt):
            return ", ".join(fmt(r) for r in rows[key]) or "-"
        lines.append("| %s | %d | %d | %s | %s | %s | %s | %s | %s / %s | %s / %s | %s / %s |" % (
            scenario, hosts, max(len(rows["new"]), len(rows["old"])),
            "%.1f s" % new if new is not None else "-", "%.1f s" % old if old is not None else "-", _ratio(new, old),
            cell("new", lambda r: "%d (%d)" % (r["changed"], r["hosts_changed"])),
            cell("old", lambda r: "%d (%d)" % (r["changed"], r["hosts_changed"])),
            cell("new", lambda r: "%g" % r["tasks_per_host"]), cell("old", lambda r: "%g" % r["tasks_per_host"]),
            cell("new", lambda r: str(r["rc"])), cell("old", lambda r: str(r["rc"])),
            cell("new", lambda r: "%.1f" % r["loadavg_1m"]), cell("old", lambda r: "%.1f" % r["loadavg_1m"])))
    lines.append("")
    parts = []
    for key in PLAYBOOKS:
        if summary["slope"][key] is not None:
            parts.append("%s %.2f s per extra host (intercept %.1f s)" % (
                "plan first" if key == "new" else "before the plan", summary["slope"][key], summary["intercept"][key]))
    if parts:
        lines.append("Controller cost per extra host of a no-op (least-squares slope of the medians over %s hosts): "
                     "%s; ratio new/old %s." % (", ".join(str(s) for s in result["sizes"]), "; ".join(parts),
                                                _ratio(summary["slope"]["new"], summary["slope"]["old"])))
        lines.append("")
    return lines


def rollout_notes(result):
    """The targets of issue 14, met or not, with the figures they are judged on."""
    summary = summarize(result)
    notes = []
    failed = [r for r in result["runs"] if r["rc"] != 0]
    if failed:
        notes.append("**%d rollout run(s) failed** (rc != 0): %s; their figures are not valid measurements." % (
            len(failed), ", ".join("%s %s on %d" % (r["playbook"], r["scenario"], r["hosts"]) for r in failed)))
    slope_new = summary["slope"]["new"]
    if slope_new is not None:
        notes.append("Target a no-op adds at most %.0f s per extra host: %s (plan first: %.2f s per host; before the "
                     "plan: %.2f s)." % (TARGET_SLOPE_S, "met" if slope_new <= TARGET_SLOPE_S else "**missed**",
                                         slope_new, summary["slope"]["old"]))
    large = summary["noop_large"]
    if result["hosts"] == 24 and large["new"] is not None:
        verdict = ("met" if large["new"] <= TARGET_NOOP_24_S else
                   "met within %d%%" % (TOLERANCE * 100) if large["new"] <= TARGET_NOOP_24_S * (1 + TOLERANCE)
                   else "**missed**")
        notes.append("Target a no-op on 24 hosts within about %.0f s: %s (%.1f s; before the plan %.1f s, ratio "
                     "%s)." % (TARGET_NOOP_24_S, verdict, large["new"], large["old"], _ratio(large["new"], large["old"])))
    elif large["new"] is not None:
        notes.append("Target a no-op on 24 hosts within about %.0f s: not judged (this run's largest size is %d "
                     "hosts: %.1f s)." % (TARGET_NOOP_24_S, result["hosts"], large["new"]))
    parts = [summary["noop_large"]["new"], summary["restart_1"]["new"], summary["noop_small"]["new"],
             summary["change_1"]["new"]]
    if None not in parts:
        noop_large, restart_1, noop_1, change_1 = parts
        expected = noop_large + (restart_1 - noop_1)
        slack = max(5.0, expected * TOLERANCE)
        notes.append("Target a change on 1 of %d costs the plan pass plus that host's restart: %s (%.1f s measured; "
                     "expected %.1f s = the %d-host no-op %.1f s + the 1-host restart %.1f s - the 1-host no-op %.1f s, "
                     "judged with %.1f s of slack; before the plan it took %.1f s, ratio %s)." % (
                         result["hosts"], "met" if change_1 <= expected + slack else "**missed**", change_1, expected,
                         result["hosts"], noop_large, restart_1, noop_1, slack, summary["change_1"]["old"],
                         _ratio(change_1, summary["change_1"]["old"])))
    change_all = summary["change_all"]
    if change_all["new"] is not None:
        notes.append("A change on all %d hosts (every host restarts, canary then quarters in both): plan first %.1f s, "
                     "before the plan %.1f s, ratio %s." % (result["hosts"], change_all["new"], change_all["old"],
                                                            _ratio(change_all["new"], change_all["old"])))
    return notes
