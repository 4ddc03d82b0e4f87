# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Summaries of the raw results, and the machine and its noise."""

from __future__ import absolute_import, division, print_function

import os
import platform
import statistics
import threading

from .common import LAG_TOOLS, SCENARIOS

__metaclass__ = type  # pylint: disable=invalid-name


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
                "module_max_lag_s": (round(max(module), 2) if module else None),
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
