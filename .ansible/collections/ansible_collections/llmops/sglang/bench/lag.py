# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""1. Detection lag: event on the server -> verdict."""

from __future__ import absolute_import, division, print_function

import statistics
import threading
import time

from .common import EVENT_LOG, LOOP_CAP, PORT, SCENARIOS, WAITER_STALL_TIMEOUT, WAITER_TIMEOUT, log
from .hosts import read_events, start_server, stop_server
from .watchers import make_watchers

__metaclass__ = type  # pylint: disable=invalid-name


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
