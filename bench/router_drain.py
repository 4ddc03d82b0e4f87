# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A rolling change behind the real sglang-router 0.3.2, with the drain and without it, under the same load.

Part of `make bench` (section `router`: bench/cli.py `--only router` / `--skip router`; page.py renders it). On the
benchmark's fleet: hosts 1-3 are workers (the SGLang stand-in streaming token by token), host 4 runs the router
(llmops.sglang.router with the role's defaults: health check every 10 s, 3 failures, 2 successes, 5 retries).
The same bounded load (tests/fleet/load.py, the integration test's generator) runs through the router during a
rolling change of every worker (`deploy_k26.yml` with a changed environment: canary, then batches of one), once
each way:

- **drain**: the inventory's `k26_routers` is known to the server role (as deploy_k26.yml sets it): each worker
  leaves every router before its restart and comes back after a real completion;
- **no drain**: the same inventory and router, the workers registered with it, but the rollout runs with
  `sglang_router_hosts: []` (an extra var over deploy_k26.yml's play var): the server role knows no router, so only
  the router's health checks and retries stand between the clients and a restarting worker.

A poller reads the router's `GET /workers` every second (capacity in rotation over time); the stand-ins' request
logs say which requests arrived while a worker was loading or draining (SIGTERM received).
"""

from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import time

from fleet import load as fleet_load, router_wheels  # tests/fleet: run.py puts tests/ on sys.path

from .common import REPO, log, run_playbook
from .hosts import remove_units

__metaclass__ = type  # pylint: disable=invalid-name

UNIT = "sglang-k26.service"
ROUTER_PORT = 30080
ROUTER_KEY = "rk-bench-router-drain"
STATE = "/var/lib/sglang/sglang-k26"
REQUEST_LOG = STATE + "/requests.jsonl"
EVENT_LOG = STATE + "/events.jsonl"
TOKEN_SECONDS = 0.1
LONG_TOKENS = 200   # 20 s streams
PLAN = {"requests": 600, "long_every": 4, "clients": 3}
ENV = {"SGLANG_STANDIN_PACE": "0.02", "SGLANG_STANDIN_GPU": "rtx_pro_6000", "SGLANG_STANDIN_STATE_DIR": STATE,
       "SGLANG_STANDIN_TOKEN_SECONDS": str(TOKEN_SECONDS), "SGLANG_STANDIN_REQUEST_LOG": REQUEST_LOG,
       "SGLANG_STANDIN_EVENT_LOG": EVENT_LOG}
MODES = (("drain", {}), ("no drain", {"sglang_router_hosts": []}))


def write_inventory(fleet, root):
    """k26_servers (hosts 1-3), k26_routers (host 4), the fleet's hosts.yml and the local fleet's group vars."""
    workers, router = fleet.hosts[:3], fleet.hosts[3]
    if os.path.isdir(root):
        shutil.rmtree(root)
    os.makedirs(os.path.join(root, "group_vars"))
    shutil.copy(str(fleet.inventory / "hosts.yml"), os.path.join(root, "hosts.yml"))
    with open(os.path.join(root, "group_vars", "local_fleet.yml"), "w") as handle:
        json.dump(fleet.group_vars, handle)
    with open(os.path.join(root, "router.yml"), "w") as handle:
        json.dump({"all": {"children": {
            # Keyed workers with the router's key (a router with a key registers them with it, docs/router.md).
            "k26_servers": {"hosts": dict((h["name"], {}) for h in workers),
                            "vars": {"sglang_host": "0.0.0.0", "sglang_api_key": ROUTER_KEY}},
            "k26_routers": {"hosts": {router["name"]: {}}, "vars": {
                "router_port": ROUTER_PORT, "router_api_key": ROUTER_KEY,
                "router_pip_find_links": ["{{ fleet_mirror_url }}/wheels/"],
                "router_pip_trusted_hosts": ["{{ fleet_mirror_url | urlsplit('hostname') }}"],
                "router_pip_extra_args": ["--no-index"]}}}}}, handle)


class _Inventory:
    """What common.playbook needs of a fleet: the inventory path."""

    def __init__(self, path):
        self.inventory = path


def host_lines(fleet, host, path, since):
    return fleet_load.json_lines_since(fleet.ssh(host, "cat %s 2>/dev/null; true" % path).stdout, since)


def one_rollout(fleet, inventory, label, extra, roll):
    router = fleet.hosts[3]
    poller = fleet_load.RotationPoller([(router["address"], ROUTER_PORT)], api_key=ROUTER_KEY, interval=1.0).start()
    load = fleet_load.Load(router["address"], ROUTER_PORT, fleet_load.mix(PLAN["requests"], PLAN["long_every"]),
                           clients=PLAN["clients"], api_key=ROUTER_KEY, model="kimi-k2.6", long_tokens=LONG_TOKENS,
                           timeout=120, tag="bench-%s" % roll).start()
    since = time.time()
    try:
        time.sleep(3)
        began = time.time()
        run = run_playbook(inventory, REPO / "playbooks" / "deploy_k26.yml",
                           extra=dict(extra, sglang_env=dict(ENV, LLMOPS_BENCH_ROLL=roll)))
        wall, rc, tail = run["wall_s"], run["rc"], run["tail"]
        changed = sum(stats.get("changed", 0) for stats in run["recap"].values())
        ended = time.time()
        exhausted = load._next >= len(load.kinds)  # pylint: disable=protected-access
    finally:
        load.stop.set()
        load.join(LONG_TOKENS * TOKEN_SECONDS * 4 + 120)
        samples = poller.finish()
    summary = fleet_load.summarize(load.results)
    log("router %s: rollout %.0f s, rc %d; %s" % (label, wall, rc, fleet_load.summary_line(summary)))
    served = {"loading": 0, "draining": 0, "total": 0}
    for host in fleet.hosts[:3]:
        # the router's requests, not the server role's probes
        records = fleet_load.sent_by(host_lines(fleet, host, REQUEST_LOG, since), router["address"])
        windows = fleet_load.loading_windows(host_lines(fleet, host, EVENT_LOG, since))
        served["total"] += len(records)
        served["loading"] += len(fleet_load.served_while_loading(records, windows))
        served["draining"] += len([r for r in records if r.get("state") == "draining"])
    during = [s for s in samples if began <= s["time"] <= ended and s["error"] is None]
    return {"mode": label, "rc": rc, "changed": changed, "rollout_s": round(wall, 1), "load_exhausted": exhausted,
            "summary": summary, "served": served, "tail": tail[-1500:] if rc else "",
            "min_listed": min((len(s["listed"]) for s in during), default=None),
            "min_healthy": min((len(s["healthy"]) for s in during), default=None),
            "timeline": fleet_load.capacity_timeline([s for s in samples if s["error"] is None], since=began),
            "poll_errors": len([s for s in samples if s["error"]])}


def run_router_drain(fleet):
    """{plan, modes: [one_rollout() per mode]}: the first deploy, then the rolling change each way."""
    inventory = str(fleet.inventory) + "-router"
    write_inventory(fleet, inventory)
    inv = _Inventory(inventory)
    router_wheels.add_to_mirror(os.path.join(str(fleet.state_dir), "mirror"))
    try:
        for host in fleet.hosts[:3]:
            remove_units(fleet, host)   # the lag/cpu sections' units claim the same (simulated) GPUs
        log("router: first deploy (3 workers behind the router)")
        run = run_playbook(inv, REPO / "tests" / "fleet" / "demo_prepare.yml")
        if run["rc"]:
            raise SystemExit("router bench: demo_prepare failed: %s" % run["tail"])
        run = run_playbook(inv, REPO / "playbooks" / "deploy_k26.yml",
                           extra={"sglang_env": dict(ENV, LLMOPS_BENCH_ROLL="0"), "k26_serial": 3})
        if run["rc"]:
            raise SystemExit("router bench: first deploy failed: %s" % run["tail"])
        modes = []
        for number, (label, extra) in enumerate(MODES, start=1):
            log("router: rolling change %s, under load" % label)
            modes.append(one_rollout(fleet, inv, label, extra, str(number)))
    finally:
        for host in fleet.hosts[:3]:
            fleet.ssh(host, "systemctl disable --now %s; rm -f %s %s; true" % (UNIT, REQUEST_LOG, EVENT_LOG), check=False)
        fleet.ssh(fleet.hosts[3], "systemctl disable --now sglang-router.service; true", check=False)
        shutil.rmtree(inventory, ignore_errors=True)
    return {"plan": dict(PLAN, long_tokens=LONG_TOKENS, token_seconds=TOKEN_SECONDS), "modes": modes}


def _capacity_series(timeline, step=10.0):
    """'0s 3, 10s 2, ...': the fewest workers listed in each `step`-second slice of the rollout."""
    slices = {}
    for at, _router, listed, _healthy in timeline:
        if at < 0:
            continue
        key = int(at // step)
        slices[key] = min(slices.get(key, listed), listed)
    return ", ".join("%ds %d" % (k * step, v) for k, v in sorted(slices.items()))


def render_router_drain(results):
    """The page's section (Markdown lines)."""
    plan = results["plan"]
    lines = ["## Rolling change behind sglang-router: with the drain and without", "",
             "Three worker hosts behind the real sglang-router 0.3.2 (llmops.sglang.router, role defaults: health "
             "check every 10 s, 3 failures out, 2 successes in, 5 retries); `deploy_k26.yml` changes every worker "
             "(canary, then batches of one) under the same bounded load through the router (`tests/fleet/load.py`, "
             "the integration test's generator): up to %d requests at %d clients, every %dth a stream of %d tokens "
             "at %.1f s each (%.0f s), the others 4-token chat answers; the load stops when the rollout ends. "
             "**drain**: the server role knows the router (takes each worker out before its restart, back after a "
             "real completion). **no drain**: same inventory, same router, the workers registered, but "
             "`-e '{\"sglang_router_hosts\": []}'`: only the router's health checks and retries. `bench/router_drain.py`."
             % (plan["requests"], plan["clients"], plan["long_every"], plan["long_tokens"], plan["token_seconds"],
                plan["long_tokens"] * plan["token_seconds"]), "",
             "| rollout | wall | requests | failed | truncated streams | short median / p95 latency | "
             "long median latency | arrived at a loading worker | arrived at a draining worker | fewest workers listed |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for mode in results["modes"]:
        summary = mode["summary"]
        short, long_ = summary["short"], summary["long"]
        served = mode["served"]
        # of the requests the workers' logs show from the router (none read: the columns say so, not 0)
        arrived = [("%d of %d" % (served[state], served["total"])) if served["total"] else "- (none read)"
                   for state in ("loading", "draining")]
        lines.append("| %s%s | %.0f s | %d (%d streams) | %d | %d | %s / %s s | %s s | %s | %s | %s of 3 |" % (
            mode["mode"], "" if mode["rc"] == 0 else " (rc %d)" % mode["rc"], mode["rollout_s"], summary["requests"],
            long_["requests"], summary["failed"], summary["truncated"], short["latency_s"]["median"],
            short["latency_s"]["p95"], long_["latency_s"]["median"], arrived[0], arrived[1], mode["min_listed"]))
    lines += ["", "Capacity in rotation over the rollout (the fewest workers the router listed in each 10 s):", ""]
    for mode in results["modes"]:
        lines.append("- %s: %s" % (mode["mode"], _capacity_series(mode["timeline"])))
    errors = ["%s: %s" % (m["mode"], "; ".join("%dx %s" % (n, e) for e, n in sorted(m["summary"]["errors"].items())))
              for m in results["modes"] if m["summary"]["errors"]]
    if errors:
        lines += ["", "What the clients got instead of an answer: " + " | ".join(errors)]
    exhausted = [m["mode"] for m in results["modes"] if m["load_exhausted"]]
    if exhausted:
        lines += ["", "**The load ran out before the rollout ended** in: %s (the figures cover only part of it)."
                  % ", ".join(exhausted)]
    lines.append("")
    return lines
