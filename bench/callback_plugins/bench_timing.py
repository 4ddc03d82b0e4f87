# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench_timing: the benchmark's own callback (bench/scale.py enables it; never part of the collection).

Records, per task of a playbook run, where the controller's time went: the task's name, action and play, when it
started (v2_playbook_on_task_start) and when its last host result arrived, how many host results it had, and, for
the tasks named in $BENCH_TIMING_SIZES (comma-separated actions, e.g. sglang_observe), the size of each host's
result as JSON (what the controller keeps in memory per host for the rest of the run). Writes one JSON document to
$BENCH_TIMING_FILE when the playbook ends.
"""

from __future__ import absolute_import, division, print_function

import json
import os
import time

from ansible.plugins.callback import CallbackBase

__metaclass__ = type  # pylint: disable=invalid-name


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_timing"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self.started = time.time()
        self.tasks = []
        self.current = {}
        self.play = None
        self.sized = set(filter(None, os.environ.get("BENCH_TIMING_SIZES", "").split(",")))

    def v2_playbook_on_play_start(self, play):
        self.play = play.get_name()

    def v2_playbook_on_task_start(self, task, is_conditional):
        entry = {"name": task.get_name(), "action": str(task.action or "").rsplit(".", 1)[-1], "play": self.play,
                 "start": time.time() - self.started, "end": None, "results": 0, "sizes": []}
        self.current[task._uuid] = entry
        self.tasks.append(entry)

    def _result(self, result):
        entry = self.current.get(result._task._uuid)
        if entry is None:
            return
        entry["end"] = time.time() - self.started
        entry["results"] += 1
        if entry["action"] in self.sized:
            entry["sizes"].append(len(json.dumps(result._result, default=str)))

    def v2_runner_on_ok(self, result):
        self._result(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._result(result)

    def v2_runner_on_skipped(self, result):
        self._result(result)

    def v2_runner_on_unreachable(self, result):
        self._result(result)

    def v2_playbook_on_stats(self, stats):
        path = os.environ.get("BENCH_TIMING_FILE")
        if path:
            with open(path, "w", encoding="utf-8") as handle:
                json.dump({"elapsed": time.time() - self.started, "tasks": self.tasks}, handle)
