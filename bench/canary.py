# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""8. The canary analysis (issue 26): bad canaries stopped, good ones passed, and the seconds it adds to the canary.

Part of `make bench` (section `canary`: bench/cli.py `--only canary` / `--skip canary`; page.py renders it). No fleet:
SGLang stand-ins on 127.0.0.1, started by the local tests' own launcher (tests/local/standin/standin_helpers.py: a
throwaway venv with the stand-in, a small llama-like model, `Server`), each decoding at PACE seconds per token
(SGLANG_STANDIN_TOKEN_SECONDS) and degraded by its SGLANG_STANDIN_FAULT. The analysis is the module itself:
`llmops.sglang.sglang_canary`'s main() run as a process (`python -m ...sglang_canary ARGS.json`, as Ansible runs a
module: its argument spec, Endpoint, run_level, the record's read and write, the driver and the judgement), given only
the URL, the model, the API key, the record file and what a scenario declares (`baseline_url`, `answers`): every
other option is the module's default.

A trial starts fresh servers (one per scenario; the live baseline its own), makes the first analysis of a good
server (no baseline: it records the figures and answers, the yardstick), copies that record into a fresh root-only
directory per scenario that needs one, and runs the scenarios, LANES analyses at a time (each on its own servers; the
load is paced by the servers' token sleeps and needs little CPU). Measured per analysis: the verdict (passed, stopped
by the analysis, or no verdict: the module failed otherwise), what the failure named (figure@concurrency, errors,
answers), the module process's wall seconds.
"""

from __future__ import absolute_import, division, print_function

import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import yaml

from .common import COLLECTIONS, MODEL_NAME, REPO, log, median

__metaclass__ = type  # pylint: disable=invalid-name

MODULE_PATH = REPO / "plugins" / "modules" / "sglang_canary.py"
ANALYSIS_PATH = REPO / "plugins" / "module_utils" / "canary" / "analysis.py"
MODULE = "ansible_collections.llmops.sglang.plugins.modules.sglang_canary"
TRIALS = 5
# Seconds per decoded token of the stand-ins (50 tokens/s per stream); a K2.6 host's own pace differs.
PACE = 0.02
LANES = 3
MODULE_TIMEOUT = 900.0
# A throwaway key of these local servers (not a secret): the stand-ins require it as SGLang's --api-key does.
API_KEY = "sk-bench-canary-5b7e02"
RECORD = "canary.json"
# The scenarios. record: the scenario's record file is a copy of the trial's first analysis' (else an empty
# directory); named: what a stop must name to be the right one (a figure, at any level or at one: figure@level).
SCENARIOS = (
    {"name": "good_recorded", "label": "good canary vs its own recorded baseline (same config)", "fault": None,
     "expect": "pass", "record": True, "same_server": True},
    {"name": "good_live", "label": "good canary vs a live baseline (`baseline_url`: another unfaulted stand-in)",
     "fault": None, "expect": "pass", "record": False, "live": True},
    {"name": "decode_2x", "label": "decode 2x slower", "fault": "decode_slowdown=2", "expect": "stop",
     "record": True, "named": "tpot"},
    {"name": "decode_1_5x", "label": "decode 1.5x slower", "fault": "decode_slowdown=1.5", "expect": "stop",
     "record": True, "named": "tpot"},
    {"name": "answers_changed", "label": "answers changed", "fault": "answer_shift=1", "expect": "stop",
     "record": True, "named": "answers"},
    {"name": "errors_5pct", "label": "errors on 5% of requests", "fault": "error_rate=0.05", "expect": "stop",
     "record": True, "named": "errors"},
    {"name": "collapse_above_4", "label": "throughput collapses above concurrency 4 (judged at 8)",
     "fault": "collapse_above=4", "expect": "stop", "record": True, "named": "throughput@8"},
    {"name": "answers_declared", "label": "answers changed, declared by the operator (`answers: changed`)",
     "fault": "answer_shift=1", "expect": "pass", "record": True, "answers": "changed"},
)
# The order a trial's lanes take them after its first analysis: the longest first (at 0.02 s per token about 34 s for
# a live baseline or decode 2x, 29 s for the collapse, 25 s for decode 1.5x, 17 s for the others).
RUN_ORDER = ("good_live", "decode_2x", "collapse_above_4", "decode_1_5x", "good_recorded", "answers_changed",
             "errors_5pct", "answers_declared")
# The trial's first analysis: a good server against nothing (only errors and answers' declarations are judged); it
# records the yardstick. Shown on the page, not counted in the goals.
FIRST = {"name": "first", "label": "first analysis of a good server (no baseline; records the yardstick)",
         "fault": None, "expect": "pass"}
# Today's rollout figure the analysis is set beside: the 1-host change of the rollout section (bench/rollout.py).
ROLLOUT_SCENARIO = "change on 1 of 1"
ROLLOUT_PLAYBOOK = "new"
# How analysis.verdict() begins a failed figure's sentence (analysis.FIGURE_NAMES).
FIGURE_SENTENCES = ("time to first token at ", "time per output token at ", "throughput at ")


def literal(path, names):
    """The module-level constants `names` of a Python file, read off its AST (the collection is not imported here)."""
    with open(str(path), encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), str(path))
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in names:
                found[node.targets[0].id] = ast.literal_eval(node.value)
    return found


def module_defaults():
    """The options the analysis runs with: the module's documented defaults (ansible-test checks them against its
    argument spec) and analysis.py's default thresholds, floors and prompts (what `{}` and `[]` stand for)."""
    options = yaml.safe_load(literal(MODULE_PATH, ("DOCUMENTATION",))["DOCUMENTATION"])["options"]
    constants = literal(ANALYSIS_PATH, ("DEFAULT_THRESHOLDS", "DEFAULT_FLOORS", "DEFAULT_PROMPTS"))
    defaults = dict((name, spec.get("default")) for name, spec in options.items()
                    if name in ("concurrency", "rounds", "max_tokens", "answers", "timeout", "record"))
    defaults.update(thresholds=constants["DEFAULT_THRESHOLDS"], floors=constants["DEFAULT_FLOORS"],
                    prompts=[p["prompt"] for p in constants["DEFAULT_PROMPTS"]])
    return defaults


def standin_launcher():
    """tests/local/standin/standin_helpers.py, the launcher `make local` starts its stand-ins with (make_venv, run,
    Server: its own session on 127.0.0.1 and a free port, its whole process group killed at the end). run.py puts
    tests/ on sys.path; importing it also puts the stand-in's sources there (for the local tests' pure imports)."""
    from local.standin import standin_helpers  # pylint: disable=import-outside-toplevel
    return standin_helpers


def rollout_change_1(previous):
    """Today's rollout figure from a results dict (the committed docs/benchmarks.json): the median wall of the 1-host
    change by today's playbook, where it was read and when it was measured; None without it."""
    rollout = (previous or {}).get("rollout") or {}
    walls = [run["wall_s"] for run in rollout.get("runs", []) if run.get("scenario") == ROLLOUT_SCENARIO
             and run.get("playbook") == ROLLOUT_PLAYBOOK and run.get("rc") == 0 and run.get("wall_s") is not None]
    if not walls:
        return None
    origin = ((previous.get("carried_over") or {}).get("origins") or {}).get("rollout") or {}
    return {"wall_s": round(median(walls), 2), "runs": len(walls),
            "key": "rollout.runs[scenario=%r, playbook=%r].wall_s" % (ROLLOUT_SCENARIO, ROLLOUT_PLAYBOOK),
            "measured": origin.get("started") or previous.get("started")}


def named(result):
    """What a stopped analysis named: each failed figure as figure@concurrency, `errors`, `answers` (a prompt's
    answer changed, lacked what it declares or differed between rounds), `no requests`."""
    names = ["%s@%d" % (row["figure"], row["level"]) for row in result.get("rows") or [] if row.get("failed")]
    for failure in result.get("failures") or []:
        if failure.startswith(FIGURE_SENTENCES):
            continue   # a failed figure's sentence: its row is named above
        kind = ("errors" if failure.startswith("errors ") else "answers" if failure.startswith("prompt ")
                else "no requests" if failure.startswith("no request") else "other")
        if kind not in names:
            names.append(kind)
    return names


def outcome(rc, result):
    """The module's answer as a run's fields: verdict pass (passed), stop (failed by the analysis: reason
    canary_analysis) or error (anything else: no verdict), what it named, its load and its baseline."""
    result = result if isinstance(result, dict) else {}
    if rc == 0 and result.get("passed"):
        verdict = "pass"
    elif rc != 0 and result.get("reason") == "canary_analysis" and result.get("passed") is False:
        verdict = "stop"
    else:
        verdict = "error"
    out = {"verdict": verdict, "rc": rc, "named": named(result) if verdict == "stop" else [],
           "requests": result.get("requests"), "errors": result.get("errors"), "baseline": result.get("baseline"),
           "failures": [" ".join(f.split())[:300] for f in (result.get("failures") or [])[:6]],
           "ratios": dict(("%s@%d" % (row["figure"], row["level"]), row["ratio"]) for row in result.get("rows") or []
                          if row.get("ratio") is not None),
           "recorded": result.get("recorded")}
    if verdict == "error":
        out["error"] = " ".join(str(result.get("msg") or result.get("module_stderr") or "no JSON from the module")
                                .split())[:600]
    return out


def summarize(result):
    """Per scenario (the first analysis included): trials, stopped, passed, no verdict, what was named (how often),
    the right stops (naming the expected figure), the analysis wall; and the goals."""
    rows = []
    for spec in (FIRST,) + SCENARIOS:
        runs = [run for run in result["runs"] if run["scenario"] == spec["name"]]
        if not runs:
            continue
        counts = {}
        for run in runs:
            for name in run["named"]:
                counts[name] = counts.get(name, 0) + 1
        walls = [run["wall_s"] for run in runs if run["verdict"] != "error" and run.get("wall_s") is not None]
        want = spec.get("named")
        rows.append({"name": spec["name"], "label": spec["label"], "fault": spec["fault"], "expect": spec["expect"],
                     "trials": len(runs), "stopped": sum(1 for r in runs if r["verdict"] == "stop"),
                     "passed": sum(1 for r in runs if r["verdict"] == "pass"),
                     "no_verdict": sum(1 for r in runs if r["verdict"] == "error"),
                     "named": counts, "expected_named": want,
                     "right_named": (sum(1 for r in runs if r["verdict"] == "stop" and any(
                         n == want or n.startswith(want + "@") for n in r["named"])) if want else None),
                     "wall_median_s": round(median(walls), 2) if walls else None,
                     "wall_max_s": round(max(walls), 2) if walls else None})
    scored = [row for row in rows if row["name"] != FIRST["name"]]
    bad = [row for row in scored if row["expect"] == "stop"]
    good = [row for row in scored if row["expect"] == "pass"]
    worst = {}
    for run in result["runs"]:
        if run["expect"] != "pass":
            continue
        for key, ratio in (run.get("ratios") or {}).items():
            figure = key.split("@")[0]
            pick = min if figure == "throughput" else max
            worst[figure] = ratio if figure not in worst else pick(worst[figure], ratio)
    passing = [run["wall_s"] for run in result["runs"] if run["scenario"] == "good_recorded" and run["verdict"] == "pass"]
    added = round(median(passing), 2) if passing else None
    rollout = result.get("rollout_change_1") or {}
    return {"rows": rows, "bad_trials": sum(r["trials"] for r in bad), "bad_stopped": sum(r["stopped"] for r in bad),
            "good_trials": sum(r["trials"] for r in good), "good_stopped": sum(r["stopped"] for r in good),
            "no_verdict": sum(r["no_verdict"] for r in scored), "good_worst": worst, "added_s": added,
            "added_runs": len(passing),
            "rollout_s": rollout.get("wall_s"),
            "ratio": round(added / rollout["wall_s"], 2) if added is not None and rollout.get("wall_s") else None}


def _goal(count, trials, want_all):
    if not trials:
        return "not measured"
    return "met" if (count == trials if want_all else count == 0) else "**missed**"


def render_canary(result):
    """The page's section (Markdown lines)."""
    summary = summarize(result)
    defaults = result["defaults"]
    lines = ["## Canary analysis: bad canaries stopped, good ones passed (issue 26)", "",
             "No fleet: SGLang stand-ins on 127.0.0.1, started by the local tests' launcher "
             "(`tests/local/standin/standin_helpers.py`: a throwaway venv with the stand-in, a small llama-like model) "
             "with `--api-key`, `--enable-metrics` and `SGLANG_STANDIN_TOKEN_SECONDS` **%g** (%.0f tokens/s per "
             "stream; a K2.6 host decodes at its own pace, and the analysis' seconds are mostly decode steps at that "
             "pace), each bad one degraded by its `SGLANG_STANDIN_FAULT`. The analysis is the module itself: "
             "`llmops.sglang.sglang_canary`'s main() run as a process as Ansible runs a module (`python -m "
             "...sglang_canary ARGS.json`: its argument spec, the driver, the real adapters `Endpoint` and "
             "`run_level`, the record's read and write), given the URL, the model, the API key, the record file and "
             "what the scenario declares; everything else is the module's default: concurrency %s, %d rounds, "
             "max_tokens %d, the %d built-in prompts, thresholds %s, floors (ms) %s, answers `%s`." % (
                 result["pace_s"], 1.0 / result["pace_s"], defaults["concurrency"], defaults["rounds"],
                 defaults["max_tokens"], len(defaults["prompts"]),
                 ", ".join("%s %s" % item for item in sorted(defaults["thresholds"].items())),
                 ", ".join("%s %s" % item for item in sorted(defaults["floors"].items())), defaults["answers"]), "",
             "%d trial(s). A trial starts fresh servers (one per scenario, the live baseline its own), makes the first "
             "analysis of a good server (it records the yardstick: figures and answers), copies that record into a "
             "fresh root-only (0700) directory per scenario that uses one, then runs the scenarios %d at a time, each "
             "on its own servers (the load is paced by the servers' token sleeps; the analyses need little CPU). "
             "*Stopped*: the module failed the analysis (`reason: canary_analysis`); *named*: the figures "
             "(figure@concurrency), `errors` or `answers` the failure named, in how many trials; *wall*: the module "
             "process, its start included (%.2f s of it: the same module in check mode, which sends nothing). "
             "`bench/canary.py`." % (result["trials"], result["lanes"], result["module_start_s"]), "",
             "| scenario | `SGLANG_STANDIN_FAULT` | expected | stopped / trials | named (trials) | analysis wall "
             "median / max |", "|---|---|---|---|---|---|"]
    for row in summary["rows"]:
        named_cell = ", ".join("%s (%d)" % item for item in row["named"].items()) or "-"
        if row["no_verdict"]:
            named_cell += "; no verdict in %d" % row["no_verdict"]
        lines.append("| %s | %s | %s | %d / %d | %s | %s |" % (
            row["label"], "`%s`" % row["fault"] if row["fault"] else "-", row["expect"], row["stopped"],
            row["trials"], named_cell, "%.1f / %.1f s" % (row["wall_median_s"], row["wall_max_s"])
            if row["wall_median_s"] is not None else "-"))
    lines += ["", "**Bad canaries stopped: %d / %d trials (goal all: %s). Good canaries falsely stopped: %d / %d "
              "trials (goal none: %s).**" % (
                  summary["bad_stopped"], summary["bad_trials"], _goal(summary["bad_stopped"], summary["bad_trials"], True),
                  summary["good_stopped"], summary["good_trials"],
                  _goal(summary["good_stopped"], summary["good_trials"], False)), ""]
    if summary["good_worst"]:
        thresholds = result["defaults"]["thresholds"]
        lines += ["The good canaries' margin: their worst ratio to the baseline over every level and trial, %s. The "
                  "stand-in's token sleeps are steadier than a GPU host's decode; a real host's noise is not measured "
                  "here." % ", ".join("%s %.2fx (%s %sx)" % (
                      figure, summary["good_worst"][figure], "at least" if figure == "throughput" else "at most",
                      thresholds[figure]) for figure in ("ttft", "tpot", "throughput") if figure in summary["good_worst"]),
                  ""]
    lines.extend(_added_lines(result, summary))
    errors = [run for run in result["runs"] if run["verdict"] == "error"]
    if errors:
        lines += ["No verdict (the module failed otherwise): %s." % "; ".join(
            "trial %d %s: %s" % (run["trial"], run["scenario"], run.get("error")) for run in errors[:3]), ""]
    return lines


def _added_lines(result, summary):
    rollout = result.get("rollout_change_1")
    if summary["added_s"] is None:
        return ["The seconds the analysis adds: not measured (no passing good-vs-recorded analysis).", ""]
    text = ("**The analysis adds %.1f s to the canary** (median wall of the %d passing %s of a good canary against "
            "its recorded baseline, the module's defaults; against a live baseline both are loaded in turn, so about "
            "twice that)." % (summary["added_s"], summary["added_runs"],
                              "analysis" if summary["added_runs"] == 1 else "analyses"))
    if rollout:
        text += (" Today's rollout: a change on 1 host takes %.1f s (`docs/benchmarks.json`, `%s`, median of %d, "
                 "measured %s; its stand-in loads in about 5 s, so that figure is mostly Ansible): the analysis is "
                 "%.2fx of it. On a K2.6 host both differ: the restart waits minutes for the weights, and the "
                 "analysis' load runs at the host's decode pace." % (
                     rollout["wall_s"], rollout["key"], rollout["runs"], rollout["measured"], summary["ratio"]))
    else:
        text += " Today's rollout figure: not found in `docs/benchmarks.json` (no 1-host change by today's playbook)."
    return [text, ""]


def canary_notes(result):
    """The targets of issue 26, met or not, with the figures they are judged on."""
    summary = summarize(result)
    notes = ["Target (issue 26) every bad canary stopped: %s (%d of %d trials; %s)." % (
        _goal(summary["bad_stopped"], summary["bad_trials"], True), summary["bad_stopped"], summary["bad_trials"],
        "; ".join("%s %d/%d" % (row["name"], row["stopped"], row["trials"]) for row in summary["rows"]
                  if row["expect"] == "stop")),
             "Target (issue 26) no good canary stopped: %s (%d of %d trials stopped; %s)." % (
                 _goal(summary["good_stopped"], summary["good_trials"], False), summary["good_stopped"],
                 summary["good_trials"], "; ".join("%s %d/%d" % (row["name"], row["stopped"], row["trials"])
                                                   for row in summary["rows"] if row["expect"] == "pass"
                                                   and row["name"] != FIRST["name"]))]
    wrong = [row for row in summary["rows"] if row["right_named"] is not None and row["right_named"] < row["stopped"]]
    if wrong:
        notes.append("Stopped without naming the expected figure: %s." % "; ".join(
            "%s (expected %s) %d of %d stops" % (row["name"], row["expected_named"], row["stopped"] - row["right_named"],
                                                 row["stopped"]) for row in wrong))
    if summary["no_verdict"]:
        notes.append("**%d canary %s ended without a verdict** (the module failed otherwise); see the section." % (
            summary["no_verdict"], "analysis" if summary["no_verdict"] == 1 else "analyses"))
    if summary["added_s"] is not None:
        notes.append("The canary analysis adds %.1f s to the canary (defaults, stand-in decoding %g s per token)%s." % (
            summary["added_s"], result["pace_s"], ", %.2fx today's 1-host change (%.1f s)" % (
                summary["ratio"], summary["rollout_s"]) if summary["ratio"] is not None else ""))
    return notes


class Runner:
    """The run's servers, module processes and directories, all ended by close() (also on failure)."""

    def __init__(self, helpers, tmp, pace):
        self.helpers = helpers
        self.tmp = tmp
        self.pace = pace
        self.lock = threading.Lock()
        self.servers = []
        self.procs = []
        self.closed = False
        self.python = None
        self.model = None

    def prepare(self):
        self.python = self.helpers.make_venv(os.path.join(self.tmp, "venv"))
        self.model = os.path.join(self.tmp, "model")
        self.helpers.run([self.python, "-m", "sglang_standin.make_model", self.model, "--arch", "llama", "--shards", "4"])

    def start(self, fault, directory):
        env = {"SGLANG_STANDIN_TOKEN_SECONDS": str(self.pace)}
        if fault:
            env["SGLANG_STANDIN_FAULT"] = fault
        with self.lock:   # under the lock: close() ends every server started
            if self.closed:
                raise RuntimeError("the canary bench is ending: no new server")
            server = self.helpers.Server(self.python, self.model, ("--api-key", API_KEY, "--enable-metrics",
                                                                   "--served-model-name", MODEL_NAME),
                                         env=env, tmp=directory)
            self.servers.append(server)
        return server

    def stop(self, servers):
        for server in servers:
            server.kill()
            with self.lock:
                self.servers.remove(server)

    def analyse(self, directory, url, record_file, check_mode=False, **extra):
        """One run of the module: (rc, its JSON result or None, wall seconds)."""
        args = dict({"url": url, "model": MODEL_NAME, "api_key": API_KEY, "record_file": record_file}, **extra)
        if check_mode:
            args["_ansible_check_mode"] = True
        handle, path = tempfile.mkstemp(prefix="args-", suffix=".json", dir=directory)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump({"ANSIBLE_MODULE_ARGS": args}, out)
        env = dict(os.environ, PYTHONPATH=str(COLLECTIONS), ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS))
        started = time.monotonic()
        with self.lock:   # under the lock: close() ends every process started
            if self.closed:
                raise RuntimeError("the canary bench is ending: no new analysis")
            proc = subprocess.Popen([sys.executable, "-m", MODULE, path], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env, cwd=directory)
            self.procs.append(proc)
        try:
            stdout, stderr = proc.communicate(timeout=MODULE_TIMEOUT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            with self.lock:
                self.procs.remove(proc)
        wall = time.monotonic() - started
        try:
            result = json.loads(stdout)
        except ValueError:
            result = {"msg": "rc %s, no JSON: %s" % (proc.returncode, (stdout + stderr).strip()[-400:])}
        return proc.returncode, result, wall

    def close(self):
        with self.lock:
            self.closed = True
            procs, servers = list(self.procs), list(self.servers)
        for proc in procs:
            try:
                proc.kill()
            except OSError:
                pass
        for server in servers:
            server.kill()


def record_dir(parent, name, source=None):
    """A fresh root-only directory for a scenario's record file, with a copy of the trial's record when given."""
    directory = os.path.join(parent, name)
    os.mkdir(directory, 0o700)
    os.chmod(directory, 0o700)
    target = os.path.join(directory, RECORD)
    if source:
        shutil.copyfile(source, target)
        os.chmod(target, 0o600)
    return target


def in_lanes(tasks, lanes):
    """Runs the callables `lanes` at a time, in their order; their results in that order. The first exception is
    raised once every lane has ended (a lane takes no new task after one)."""
    results = [None] * len(tasks)
    order = iter(range(len(tasks)))
    lock = threading.Lock()
    errors = []

    def lane():
        while True:
            with lock:
                index = None if errors else next(order, None)
            if index is None:
                return
            try:
                results[index] = tasks[index]()
            except BaseException as error:  # pylint: disable=broad-except
                with lock:
                    errors.append(error)
                return

    threads = [threading.Thread(target=lane, daemon=True) for _lane in range(min(lanes, len(tasks)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


def run_trial(runner, trial, lanes):
    """One trial: fresh servers, the first analysis records, then every scenario; the runs, the servers stopped."""
    base = os.path.join(runner.tmp, "trial%d" % trial)
    os.mkdir(base, 0o700)
    servers = {}
    try:
        servers["first"] = runner.start(None, base)
        for spec in SCENARIOS:
            if not spec.get("same_server"):
                servers[spec["name"]] = runner.start(spec["fault"], base)
            if spec.get("live"):
                servers["live_baseline"] = runner.start(None, base)
        for server in servers.values():
            server.wait_ready()
        servers["good_recorded"] = servers["first"]
        first_record = record_dir(base, "first")
        recorded = threading.Event()

        def url(name):
            return "http://127.0.0.1:%d" % servers[name].port

        def run(spec, record_file, **extra):
            rc, result, wall = runner.analyse(base, url(spec["name"]), record_file, **extra)
            return dict(outcome(rc, result), trial=trial, scenario=spec["name"], expect=spec["expect"],
                        wall_s=round(wall, 2))

        def first():
            try:
                return run(FIRST, first_record)
            finally:
                recorded.set()

        def task(spec):
            def go():
                source = None
                if spec["record"]:
                    recorded.wait(MODULE_TIMEOUT)
                    if not os.path.exists(first_record):
                        return {"trial": trial, "scenario": spec["name"], "expect": spec["expect"], "verdict": "error",
                                "named": [], "wall_s": None, "rows": [], "failures": [],
                                "error": "not run: the trial's first analysis recorded nothing"}
                    source = first_record
                extra = {}
                if spec.get("live"):
                    extra["baseline_url"] = url("live_baseline")
                if spec.get("answers"):
                    extra["answers"] = spec["answers"]
                return run(spec, record_dir(base, spec["name"], source), **extra)
            return go

        specs = dict((spec["name"], spec) for spec in SCENARIOS)
        runs = in_lanes([first] + [task(specs[name]) for name in RUN_ORDER], lanes)
    finally:
        runner.stop(list(dict((id(s), s) for s in servers.values()).values()))
    for one in runs:
        log("canary: trial %d %-17s %-5s (expected %s) %s%.1f s" % (
            trial, one["scenario"], one["verdict"], one["expect"],
            ("named %s, " % ", ".join(one["named"])) if one["named"] else "", one["wall_s"] or 0.0))
    return runs


def run_canary(trials=TRIALS, pace=PACE, lanes=LANES):
    """The section: `trials` trials of every scenario. Every server, module process and directory is gone
    afterwards, also on failure and Ctrl-C."""
    result = {"trials": trials, "pace_s": pace, "lanes": lanes, "defaults": module_defaults(), "runs": [],
              "scenarios": [dict(spec) for spec in (FIRST,) + SCENARIOS]}
    committed = REPO / "docs" / "benchmarks.json"
    if committed.exists():
        result["rollout_change_1"] = rollout_change_1(json.loads(committed.read_text(encoding="utf-8")))
    helpers = standin_launcher()
    tmp = tempfile.mkdtemp(prefix="llmops-bench-canary-")   # 0700
    runner = Runner(helpers, tmp, pace)
    started = time.time()
    try:
        log("canary: a venv with the stand-in in %s" % tmp)
        runner.prepare()
        rc, checked, wall = runner.analyse(tmp, "http://127.0.0.1:9", os.path.join(tmp, RECORD), check_mode=True)
        if rc != 0 or not checked.get("skipped"):
            raise RuntimeError("the canary module in check mode: rc %s, %s" % (rc, checked.get("msg")))
        result["module_start_s"] = round(wall, 2)
        for trial in range(1, trials + 1):
            log("canary: trial %d of %d (%d scenarios, %d at a time, %g s per token)" % (
                trial, trials, len(SCENARIOS), lanes, pace))
            result["runs"].extend(run_trial(runner, trial, lanes))
    finally:
        runner.close()
        shutil.rmtree(tmp, ignore_errors=True)
    result["duration_s"] = round(time.time() - started, 1)
    summary = summarize(result)
    log("canary: bad stopped %d/%d, good stopped %d/%d, no verdict %d; a passing analysis %s s" % (
        summary["bad_stopped"], summary["bad_trials"], summary["good_stopped"], summary["good_trials"],
        summary["no_verdict"], summary["added_s"]))
    return result
