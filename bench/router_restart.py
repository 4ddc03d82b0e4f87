# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A router restart under load, before and after the desired-workers list (issue 23), side by side.

Part of `make bench` (section `restart`: bench/cli.py `--only restart` / `--skip restart`; page.py renders it). On the
benchmark's fleet (the router section's inventory, bench/router_drain.py): hosts 1-3 keyed stand-in workers, host 4
the real sglang-router 0.3.2 (llmops.sglang.router). Three clients send short chat requests through the router (a
0.1 s pause after each) while `systemctl restart sglang-router.service` runs on the router host:

- **after** (this collection): the router starts with its desired workers (root-only list, LoadCredential=, the
  launcher's --worker-urls) and routes again by itself;
- **before** (main before issue 23): the same router started without the list (its file emptied just before the
  restart, so the launcher passes no --worker-urls: exactly the old unit's start). It lists no worker and answers
  503 until its workers are registered again: the bench watches it for OBSERVE_S seconds (it never came back by
  itself in any run), then runs `playbooks/router.yml`, the operator's fix, at once; its seconds are counted to the
  moment that run made the router route again (the best case: someone ran it the moment the router restarted).

Measured per trial: seconds from the restart until the router lists every worker and a completion through it
succeeds (polled every 0.2 s), and the clients' requests that failed (at this router: the only one).
"""

from __future__ import absolute_import, division, print_function

import http.client
import json
import os
import shutil
import threading
import time

from fleet import load as fleet_load, router_wheels  # tests/fleet: run.py puts tests/ on sys.path

from .common import REPO, log, run_playbook
from .hosts import remove_units
from .router_drain import ENV, REQUEST_LOG, EVENT_LOG, ROUTER_KEY, ROUTER_PORT, UNIT, _Inventory, write_inventory

__metaclass__ = type  # pylint: disable=invalid-name

MODEL = "kimi-k2.6"
CLIENTS = 3
PAUSE = 0.1
TRIALS = 3
OBSERVE_S = 20.0
LIMIT_S = 300.0
DESIRED = "/var/lib/llmops-sglang/router/sglang-router.workers.json"
MODES = ("after", "before")


class PacedLoad(fleet_load.Load):
    """Short requests until stopped, each client pausing PAUSE seconds after each one."""

    def __init__(self, *args, **kwargs):
        fleet_load.Load.__init__(self, *args, **kwargs)
        self.kinds = [fleet_load.SHORT] * 1000000

    def _client(self, client):
        while True:
            index = self._take()
            if index is None:
                return
            record = self.request(index, self.kinds[index], client)
            with self._lock:
                self.results.append(record)
            time.sleep(PAUSE)


def _call(address, method, path, body=None, timeout=5):
    conn = http.client.HTTPConnection(address, ROUTER_PORT, timeout=timeout)
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None,
                     {"Content-Type": "application/json", "Authorization": "Bearer " + ROUTER_KEY})
        response = conn.getresponse()
        return response.status, json.loads(response.read().decode() or "null")
    except (OSError, http.client.HTTPException, ValueError):
        return None, None
    finally:
        conn.close()


def routes_to_all(address, expected):
    status, answer = _call(address, "GET", "/workers")
    if status != 200 or sorted(w["url"] for w in answer["workers"]) != expected:
        return False
    status, _answer = _call(address, "POST", "/v1/completions",
                            {"model": MODEL, "prompt": "back %f" % time.time(), "max_tokens": 1}, timeout=10)
    return status == 200


def wait_routes(address, expected, since, limit):
    while time.time() - since < limit:
        if routes_to_all(address, expected):
            return time.time() - since
        time.sleep(0.2)
    return None


def one_restart(fleet, inventory, mode, trial):
    router = fleet.hosts[3]
    address = router["address"]
    expected = sorted("http://%s:30001" % h["address"] for h in fleet.hosts[:3])
    if not routes_to_all(address, expected):
        raise SystemExit("restart bench: the router does not route to every worker before trial %s %d" % (mode, trial))
    load = PacedLoad(address, ROUTER_PORT, [], clients=CLIENTS, api_key=ROUTER_KEY, model=MODEL, timeout=30,
                     tag="restart-%s-%d" % (mode, trial)).start()
    by_itself, fix_s = None, None
    try:
        time.sleep(3)
        if mode == "before":
            # the unit's start as it was before issue 23: no desired workers handed over (the launcher passes no
            # --worker-urls); router.yml below writes the file again
            fleet.ssh(router, "printf '{\"workers\": []}\\n' > %s" % DESIRED)
        began = time.time()
        fleet.ssh(router, "systemctl restart sglang-router.service")
        if mode == "after":
            seconds = wait_routes(address, expected, began, LIMIT_S)
        else:
            by_itself = wait_routes(address, expected, began, OBSERVE_S)
            seconds = by_itself
            if seconds is None:
                holder = {}
                fixer = threading.Thread(target=lambda: holder.update(
                    run=run_playbook(inventory, REPO / "playbooks" / "router.yml")))
                fixer.start()
                seconds = wait_routes(address, expected, began, LIMIT_S)
                fixer.join(LIMIT_S)
                fix = holder.get("run") or {}
                fix_s = round(fix.get("wall_s", 0.0), 1)
                if fix.get("rc"):
                    raise SystemExit("restart bench: router.yml failed: %s" % fix.get("tail"))
        time.sleep(3)
    finally:
        load.stop.set()
        load.join(60)
    results = load.results
    failed = [r for r in results if fleet_load.outcome(r) != "ok"]
    summary = fleet_load.summarize(results)
    log("restart %s #%d: routes again after %s s; %d requests, %d failed" % (
        mode, trial, "%.1f" % seconds if seconds is not None else "-", len(results), len(failed)))
    return {"mode": mode, "trial": trial, "seconds": round(seconds, 2) if seconds is not None else None,
            "by_itself": by_itself is not None if mode == "before" else True, "fix_playbook_s": fix_s,
            "requests": len(results), "failed": len(failed), "errors": summary["errors"],
            "ok_before": len([r for r in results if r["end"] < began and fleet_load.outcome(r) == "ok"]),
            "ok_after": len([r for r in results if seconds is not None and r["start"] > began + seconds
                             and fleet_load.outcome(r) == "ok"])}


def run_router_restart(fleet):
    """{plan, trials: [one_restart() per trial]}: the first deploy, then TRIALS restarts each way, alternating."""
    inventory = str(fleet.inventory) + "-restart"
    write_inventory(fleet, inventory)
    inv = _Inventory(inventory)
    router_wheels.add_to_mirror(os.path.join(str(fleet.state_dir), "mirror"))
    try:
        for host in fleet.hosts[:3]:
            remove_units(fleet, host)
        log("restart: first deploy (3 workers behind the router)")
        run = run_playbook(inv, REPO / "tests" / "fleet" / "demo_prepare.yml")
        if run["rc"]:
            raise SystemExit("restart bench: demo_prepare failed: %s" % run["tail"])
        run = run_playbook(inv, REPO / "playbooks" / "deploy_k26.yml",
                           extra={"sglang_env": dict(ENV, LLMOPS_BENCH_ROLL="0"), "k26_serial": 3})
        if run["rc"]:
            raise SystemExit("restart bench: first deploy failed: %s" % run["tail"])
        trials = []
        for trial in range(1, TRIALS + 1):
            for mode in MODES:
                trials.append(one_restart(fleet, inv, mode, trial))
    finally:
        for host in fleet.hosts[:3]:
            fleet.ssh(host, "systemctl disable --now %s; rm -f %s %s; true" % (UNIT, REQUEST_LOG, EVENT_LOG), check=False)
        fleet.ssh(fleet.hosts[3], "systemctl disable --now sglang-router.service; true", check=False)
        shutil.rmtree(inventory, ignore_errors=True)
    return {"plan": {"clients": CLIENTS, "pause_s": PAUSE, "trials": TRIALS, "observe_s": OBSERVE_S}, "trials": trials}


def _median(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0


def _ratio(before, after):
    if before is None or after is None:
        return "-"
    if after == 0:
        return "%s vs 0" % ("%.1f" % before if isinstance(before, float) else before)
    return "%.1fx" % (before / float(after))


def render_router_restart(results):
    """The page's section (Markdown lines)."""
    plan = results["plan"]
    lines = ["## A router restart under load: before and after the desired-workers list", "",
             "Three keyed worker hosts behind the real sglang-router 0.3.2 (llmops.sglang.router); %d clients send "
             "4-token chat requests through it, each pausing %.1f s after every answer, while `systemctl restart "
             "sglang-router.service` runs on the router host (what a crash with `Restart=on-failure` also does). "
             "**after**: the router starts with its desired workers (the root-only list handed over by "
             "`LoadCredential=` and the launcher, `--worker-urls`). **before**: the same router started without "
             "the list (its file emptied, so the launcher passes no workers: the unit's start before issue 23); it "
             "is watched %.0f s for coming back by itself (it never did), then `playbooks/router.yml` runs, the "
             "operator's fix: its seconds include that watch, so an operator who ran the playbook the very moment "
             "the router restarted would have waited the playbook's own time (in brackets), and one who did not "
             "would still be waiting. Seconds: from the restart until the router lists every worker and a "
             "completion through it succeeds. `bench/router_restart.py`." % (plan["clients"], plan["pause_s"],
                                                                             plan["observe_s"]), "",
             "| mode | trials | seconds until it routes to every worker (median; each) | failed requests at the "
             "router (median; each) | requests sent (each) | came back by itself |",
             "|---|---|---|---|---|---|"]
    medians = {}
    for mode in MODES:
        rows = [t for t in results["trials"] if t["mode"] == mode]
        if not rows:
            continue
        seconds, failed = _median([t["seconds"] for t in rows]), _median([t["failed"] for t in rows])
        medians[mode] = (seconds, failed)
        fixes = [t["fix_playbook_s"] for t in rows if t.get("fix_playbook_s")]
        lines.append("| %s | %d | %s; %s | %s; %s | %s | %s |" % (
            mode, len(rows), "%.1f s" % seconds if seconds is not None else "-",
            ", ".join("%.1f" % t["seconds"] if t["seconds"] is not None else "never" for t in rows),
            failed, ", ".join(str(t["failed"]) for t in rows), ", ".join(str(t["requests"]) for t in rows),
            "%d of %d%s" % (len([t for t in rows if t["by_itself"]]), len(rows),
                            (" (router.yml took %s s)" % ", ".join("%.0f" % f for f in fixes)) if fixes else "")))
    if "before" in medians and "after" in medians:
        lines += ["", "Before / after: seconds %s, failed requests %s." % (
            _ratio(medians["before"][0], medians["after"][0]), _ratio(medians["before"][1], medians["after"][1]))]
    errors = {}
    for trial in results["trials"]:
        for error, count in trial["errors"].items():
            errors.setdefault(trial["mode"], {}).setdefault(error, 0)
            errors[trial["mode"]][error] += count
    if errors:
        lines += ["", "What the clients got instead of an answer: " + " | ".join(
            "%s: %s" % (mode, "; ".join("%dx %s" % (n, e) for e, n in sorted(errs.items())))
            for mode, errs in sorted(errors.items()))]
    lines.append("")
    return lines
