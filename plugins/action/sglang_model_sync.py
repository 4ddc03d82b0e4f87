# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of llmops.sglang.sglang_model_sync: runs the module and shows its progress live, per host.

The same mechanism as the waiter's (plugins/action/sglang_wait_ready.py; both use plugins/plugin_utils/progress_reader.py): a
thread reads the module's progress_file over a copy of the task's connection every few seconds and prints a plain
line per host when module_utils/model/model_sync.SyncPrinter says one is due; the outcome's line the moment the module
returns. Passed through untouched (no live lines): async tasks, check mode, become to an unprivileged user, a JSON
stdout callback, `sglang_model_sync_progress: false`, or no progress_file given.
"""

from __future__ import annotations

from ansible.utils.display import Display

from ansible_collections.llmops.sglang.plugins.plugin_utils.progress_reader import LiveProgressAction
from ansible_collections.llmops.sglang.plugins.module_utils.model.model_sync import SyncPrinter, final_line

display = Display()

MODULE = 'llmops.sglang.sglang_model_sync'


class ActionModule(LiveProgressAction):

    MODULE = MODULE
    PROGRESS_VAR = 'sglang_model_sync_progress'

    def printer(self, host):
        return SyncPrinter(host)

    def final(self, host, module_args, module_result):
        display.display(final_line(host, module_result), color='red' if module_result.get('failed') else None)
