# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench_count: the benchmark's own callback (bench/cost.py enables it; never part of the collection).

Counts, per host, the task results that ran something for the host: ok or failed, not skipped, and not an action
that stays on the controller (includes, set_fact, debug, assert, fail, meta, ...); a loop counts its items that were
not skipped. Writes {host: count} as JSON to $BENCH_COST_COUNT_FILE when the playbook ends. An action plugin that
runs several modules (template: stat then copy) counts once: the figure is *module tasks*, not processes.
"""

from __future__ import absolute_import, division, print_function

import json
import os

from ansible.plugins.callback import CallbackBase

__metaclass__ = type  # pylint: disable=invalid-name

CONTROLLER_ONLY = frozenset((
    "include_role", "include_tasks", "import_role", "import_tasks", "import_playbook", "include_vars", "set_fact",
    "debug", "assert", "fail", "meta", "add_host", "group_by", "set_stats", "pause", "validate_argument_spec", "noop",
))


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_count"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self.counts = {}

    def _count(self, result):
        action = str(result._task.action or "").rsplit(".", 1)[-1]
        host = result._host.get_name()
        self.counts.setdefault(host, 0)
        if action in CONTROLLER_ONLY:
            return
        data = result._result
        items = data.get("results") if isinstance(data, dict) else None
        if isinstance(items, list):
            self.counts[host] += sum(1 for item in items if not (isinstance(item, dict) and item.get("skipped")))
        elif not data.get("skipped"):
            self.counts[host] += 1

    def v2_runner_on_ok(self, result):
        self._count(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._count(result)

    def v2_playbook_on_stats(self, stats):
        path = os.environ.get("BENCH_COST_COUNT_FILE")
        if path:
            with open(path, "w", encoding="utf-8") as handle:
                json.dump(self.counts, handle)
