# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmarks of llmops.sglang on a private local fleet: detection lag, CPU cost of waiting, rollout at fleet scale
(and the canary analysis on stand-ins on this machine, no fleet).

Run as root from the repository root with the repo venv's Python (it needs ansible-core and PyYAML from there):

    .venv/bin/python bench/run.py            # full run, about 15 minutes on 2 cores
    .venv/bin/python bench/run.py --quick    # smoke run, a few minutes
    .venv/bin/python bench/run.py --render bench/results/XXX.json   # rewrite docs/benchmarks.md from raw results
    .venv/bin/python bench/run.py --only rollout   # one section; the page keeps the others from docs/benchmarks.json
    .venv/bin/python bench/run.py --only canary    # the canary analysis: local stand-ins, no fleet, about 7 minutes

It boots its own fleet (tests/fleet/fleet.py, own state dir, prefix and addresses, so the shared fleet and other
users are never touched), measures, writes bench/results/<stamp>.json, docs/benchmarks.json and docs/benchmarks.md,
and removes the fleet (also on failure and Ctrl-C) unless --keep-fleet.

Clocks: the fleet hosts are containers on this machine's kernel, so the stand-in's event times (time.time() on the
host) and this driver's time.time() are the same clock; a lag is verdict time (seen here) minus event time.
"""

from __future__ import absolute_import, division, print_function

import argparse
import datetime
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from .canary import TRIALS as CANARY_TRIALS, run_canary
from .common import BENCH, COLLECTIONS, LOOP_CAP, REPO, SECTIONS, log
from .cost import BASE, HOSTS as COST_HOSTS, ROUNDS as COST_ROUNDS, run_cost
from .cpu import run_cpu
from .distribution import MIB as DIST_MIB, RATE_MBIT as DIST_RATE_MBIT, SIZES as DIST_SIZES, run_distribution
from .hosts import BenchFleet, prepare_hosts
from .lag import run_lag
from .model_sync import run_model_sync
from .page import evaluate, render
from .rollout import SIZES, run_rollout
from .router_drain import run_router_drain
from .router_restart import run_router_restart
from .scale import SIZES as SCALE_SIZES, TRIALS as SCALE_TRIALS, run_scale
from .summary import LoadSampler, machine_info, summarize_lag

__metaclass__ = type  # pylint: disable=invalid-name


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


def carry_over(results, sections):
    """With --only: the other sections' results from the committed docs/benchmarks.json, so the page stays whole."""
    path = REPO / "docs" / "benchmarks.json"
    if not path.exists():
        return
    previous = json.loads(path.read_text(encoding="utf-8"))
    keys = {"cpu": ["cpu"], "lag": ["lag_trials", "lag_summary", "lag_hosts"], "sync": ["model_sync"],
            "rollout": ["rollout"], "scale": ["scale"], "distribution": ["distribution"], "cost": ["cost"], "router": ["router"],
            "restart": ["router_restart"], "canary": ["canary"]}
    carried = [section for section in SECTIONS if section not in sections
               and any(key in previous for key in keys[section])]
    for section in carried:
        for key in keys[section]:
            if key in previous:
                results[key] = previous[key]
    if carried:
        results["fleet_hosts"] = previous.get("fleet_hosts", results["fleet_hosts"])
        results["carried_over"] = {"sections": carried,
                                   "origins": dict((section, origin_of(previous, section)) for section in carried)}
        results["extra_notes"] = [note for note in results["extra_notes"] if "not measured" not in note]


def origin_of(previous, section):
    """The run a carried section was measured in: the previous page's own run, or, when that page carried it over
    too, the run it came from (so that a chain of --only runs keeps each section's date and load)."""
    before = previous.get("carried_over") or {}
    if section in (before.get("origins") or {}):
        return before["origins"][section]
    if section in before.get("sections", []):   # a page written before origins were recorded
        return {"started": before.get("started"), "duration_s": before.get("duration_s"),
                "load_average": before.get("load_average")}
    return {"started": previous.get("started"), "duration_s": previous.get("duration_s"),
            "load_average": previous.get("load_average")}


def guarded(results, section, key, run):
    """results[key] = run(); a section that fails is logged and named on the page (extra_notes, failed_sections) and
    the run goes on, so that one section's failure does not lose the others' measurements (the rollout alone is half
    an hour)."""
    try:
        results[key] = run()
        return True
    except (Exception, SystemExit) as error:  # pylint: disable=broad-except
        text = " ".join(str(error).split())[-600:]
        log("%s: FAILED: %s" % (section, text))
        results.setdefault("failed_sections", []).append(section)
        results["extra_notes"].append("Section %s FAILED in this run (no results): %s" % (section, text))
        return False


def build_parser():
    """bench/run.py's options (also read by tests/conformance, which must not take them for SGLang flags)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: one trial per scenario, short windows")
    parser.add_argument("--state-dir", default="/tmp/llmops-bench-fleet-%d" % os.getpid())
    parser.add_argument("--prefix", default="bn%04d" % (os.getpid() % 10000))
    parser.add_argument("--keep-fleet", action="store_true")
    parser.add_argument("--seed", type=int, default=None, help="random seed of the timelines")
    parser.add_argument("--output", default=str(REPO / "docs" / "benchmarks.md"))
    parser.add_argument("--render", metavar="RESULTS_JSON", help="only rewrite the page from raw results")
    parser.add_argument("--skip", action="append", default=[], choices=SECTIONS)
    parser.add_argument("--only", action="append", default=[], choices=SECTIONS,
                        help="run only these sections (the page keeps the others' last results)")
    # Hidden: the rollout's fleet sizes, to validate the section on a small fleet (--quick --only rollout).
    parser.add_argument("--rollout-sizes", default=",".join(str(s) for s in SIZES), help=argparse.SUPPRESS)
    # Toward 1,000 hosts (section scale): the no-op's fleet sizes and trials per size.
    parser.add_argument("--scale-sizes", default=",".join(str(s) for s in SCALE_SIZES),
                        help="hosts of each no-op of the scale section (default %(default)s; the fleet is the largest)")
    parser.add_argument("--scale-trials", type=int, default=SCALE_TRIALS, help="trials per size (default %(default)s)")
    # Model distribution (section distribution, issue 28): fleet sizes, the checkpoint's MiB and each link's rate.
    parser.add_argument("--distribution-sizes", default=",".join(str(s) for s in DIST_SIZES),
                        help="hosts of each distribution run (default %(default)s; the fleet is the largest)")
    parser.add_argument("--distribution-mib", type=int, default=DIST_MIB,
                        help="the distribution's checkpoint in MiB (default %(default)s)")
    parser.add_argument("--distribution-rate-mbit", type=int, default=DIST_RATE_MBIT,
                        help="each host's link and the mirror's uplink, Mbit/s (default %(default)s)")
    # The deploy cost (section cost): the base tree, the fleet's size and the rounds (default 3, 1 with --quick).
    parser.add_argument("--cost-base", default=BASE, metavar="REV",
                        help="git revision of the base tree the deploy cost compares with (default %(default)s)")
    parser.add_argument("--cost-hosts", type=int, default=COST_HOSTS, help="hosts of the deploy cost's fleet")
    parser.add_argument("--cost-rounds", type=int, default=None,
                        help="rounds of the deploy cost (each: both trees, both scenarios; default %d, 1 with --quick)"
                        % COST_ROUNDS)
    # The canary analysis (section canary): trials of every scenario (default 5, 1 with --quick).
    parser.add_argument("--canary-trials", type=int, default=None,
                        help="trials of each canary scenario (default %d, 1 with --quick)" % CANARY_TRIALS)
    return parser


def main():
    args = build_parser().parse_args()
    sections = [s for s in (args.only or SECTIONS) if s not in args.skip]

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
        # A smoke run: one trial per scenario, a short CPU window, no rollout unless --only rollout (its fleet and
        # first deploy alone take minutes); the crash loop trial ends before the seeds' loops could see the start limit.
        plan = {"hosts": 5, "lag_hosts": 4, "lag_trials": 1, "cpu_window": 20.0, "cpu_rounds": 1, "loop_cap": 30.0,
                "rollout": "rollout" in args.only, "scale": "scale" in args.only, "cost": "cost" in args.only,
                "distribution": "distribution" in args.only,
                "cost_rounds": 1, "canary_trials": 1}
    else:
        plan = {"hosts": 6, "lag_hosts": 5, "lag_trials": 5, "cpu_window": 60.0, "cpu_rounds": 3, "loop_cap": 85.0,
                "rollout": True, "scale": True, "cost": True, "distribution": True, "cost_rounds": COST_ROUNDS, "canary_trials": CANARY_TRIALS}
    plan["rollout_sizes"] = [int(size) for size in args.rollout_sizes.split(",")]
    if args.cost_rounds is not None:
        plan["cost_rounds"] = args.cost_rounds
    if args.canary_trials is not None:
        plan["canary_trials"] = args.canary_trials
    plan.update({"cost_base": args.cost_base, "cost_hosts": args.cost_hosts,
                 "scale_sizes": [int(size) for size in args.scale_sizes.split(",")], "scale_trials": args.scale_trials,
                 "distribution_sizes": [int(size) for size in args.distribution_sizes.split(",")],
                 "distribution_mib": args.distribution_mib, "distribution_rate_mbit": args.distribution_rate_mbit})
    LOOP_CAP[0] = plan["loop_cap"]
    started = time.time()
    results = {"quick": args.quick, "seed": seed, "started": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
               "machine": machine_info(), "fleet_hosts": plan["hosts"], "lag_hosts": plan["lag_hosts"],
               "plan": plan, "extra_notes": [], "sections": sections}
    fleet = BenchFleet(args.state_dir, args.prefix, plan["hosts"])
    load = LoadSampler()
    load.start()
    previous = signal.getsignal(signal.SIGTERM)

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt()
    signal.signal(signal.SIGTERM, interrupt)
    booted = False
    try:
        load.phase = "canary"
        if "canary" in sections:
            # No fleet: stand-ins on 127.0.0.1, started and ended by the section itself.
            log("canary: %d trial(s) of each scenario, stand-ins on 127.0.0.1" % plan["canary_trials"])
            guarded(results, "canary", "canary", lambda: run_canary(plan["canary_trials"]))
        load.phase = "rollout"
        if "rollout" in sections and plan["rollout"]:
            # Its own fleet of 24 hosts, down again before the other sections' fleet comes up (same state dir).
            guarded(results, "rollout", "rollout",
                    lambda: run_rollout(args.state_dir, args.prefix, plan["rollout_sizes"], {1: 2}))
        else:
            results["extra_notes"].append("Rollout at fleet scale not measured in this run (%s)." % (
                "--quick" if args.quick else "not selected"))
        load.phase = "scale"
        if "scale" in sections and plan["scale"]:
            # Its own fleet (own state dir and prefix) of the largest size, down again before the next section.
            log("scale: no-ops at %s hosts, %d trial(s) each" % (plan["scale_sizes"], plan["scale_trials"]))
            guarded(results, "scale", "scale", lambda: run_scale(plan["scale_sizes"], plan["scale_trials"]))
        else:
            results["extra_notes"].append("The plan pass toward 1,000 hosts not measured in this run (%s)." % (
                "--quick" if args.quick else "not selected"))
        load.phase = "distribution"
        if "distribution" in sections and plan["distribution"]:
            # Its own fleet (own state dir, prefix bd) of the largest size, tc on its links, down before the next.
            log("distribution: mirror alone, waves and pipelined at %s hosts, %d MiB, %d Mbit/s" % (
                plan["distribution_sizes"], plan["distribution_mib"], plan["distribution_rate_mbit"]))
            guarded(results, "distribution", "distribution",
                    lambda: run_distribution(plan["distribution_sizes"], plan["distribution_mib"],
                                             plan["distribution_rate_mbit"], state_dir=args.state_dir + "-dist"))
        else:
            results["extra_notes"].append("Model distribution (issue 28) not measured in this run (%s)." % (
                "--quick" if args.quick else "not selected"))
        load.phase = "cost"
        if "cost" in sections and plan["cost"]:
            # Its own fleet (own state dir and prefix) and the base tree's worktree, both gone before the next section.
            guarded(results, "cost", "cost",
                    lambda: run_cost(plan["cost_base"], plan["cost_hosts"], plan["cost_rounds"]))
        else:
            results["extra_notes"].append("Deploy cost (issue 24) not measured in this run (%s)." % (
                "--quick" if args.quick else "not selected"))
        booted = any(section in sections for section in ("cpu", "lag", "sync", "router", "restart"))
        if booted:
            load.phase = "setup"
            log("fleet up: %d hosts in %s" % (plan["hosts"], args.state_dir))
            results["fleet_up_s"] = round(fleet.up(), 1)
            log("preparing the benchmark's units")
            prepare_hosts(fleet)
        load.phase = "cpu"
        if "cpu" in sections:
            log("cpu: %d s window, one watcher per host + a control host" % plan["cpu_window"])
            guarded(results, "cpu", "cpu", lambda: run_cpu(fleet, fleet.hosts, plan["cpu_window"], plan["cpu_rounds"]))
        load.phase = "lag"
        if "lag" in sections:
            log("lag: %d trial(s) per scenario on %d hosts" % (plan["lag_trials"], plan["lag_hosts"]))
            lag_hosts = fleet.hosts[:plan["lag_hosts"]]
            if guarded(results, "lag", "lag_trials", lambda: run_lag(fleet, lag_hosts, plan["lag_trials"], rng)):
                results["lag_summary"] = summarize_lag(results["lag_trials"])
        load.phase = "sync"
        if "sync" in sections:
            log("model sync: mirror vs peer, checkpoint verification cold vs warm")
            guarded(results, "sync", "model_sync", lambda: run_model_sync(fleet, total_mib=32 if args.quick else 256))
        load.phase = "router"
        if "router" in sections:
            log("router: a rolling change under load, with the drain and without")
            guarded(results, "router", "router", lambda: run_router_drain(fleet))
        load.phase = "restart"
        if "restart" in sections:
            log("restart: the router restarted under load, before and after the desired-workers list")
            guarded(results, "restart", "router_restart", lambda: run_router_restart(fleet))
    finally:
        signal.signal(signal.SIGTERM, previous)
        if booted and not args.keep_fleet:
            log("fleet down")
            fleet.down()
    load.stop_event.set()
    results["load_average"] = load.summary()
    results["duration_s"] = round(time.time() - started, 1)
    if args.only and not args.quick:
        carry_over(results, sections)
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
    if results.get("failed_sections"):
        log("FAILED sections: %s (the page says so; the others' results are written)" % ", ".join(results["failed_sections"]))
        return 1
    return 0
