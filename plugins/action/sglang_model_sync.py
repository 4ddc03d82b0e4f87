# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of llmops.sglang.sglang_model_sync: runs the module and shows its progress live, per host.

The same mechanism as the waiter's (plugins/action/sglang_wait_ready.py; both use plugins/plugin_utils/progress_reader.py): a
thread reads the module's progress_file over a copy of the task's connection every few seconds and prints a plain
line per host when module_utils/model_sync.SyncPrinter says one is due; the outcome's line the moment the module
returns. Passed through untouched (no live lines): async tasks, check mode, become to an unprivileged user, a JSON
stdout callback, `sglang_model_sync_progress: false`, or no progress_file given.
"""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible.utils.vars import merge_hash

from ansible_collections.llmops.sglang.plugins.plugin_utils.progress_reader import ProgressReader, stdout_is_a_document
from ansible_collections.llmops.sglang.plugins.module_utils.model_sync import SyncPrinter, final_line

display = Display()

MODULE = 'llmops.sglang.sglang_model_sync'


class ActionModule(ActionBase):

    _supports_check_mode = True
    _supports_async = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        wrap_async = self._task.async_val and not self._connection.has_native_async
        path = self._task.args.get('progress_file')
        if not path or not self._live_progress(task_vars):
            result = merge_hash(result, self._execute_module(module_name=MODULE, task_vars=task_vars, wrap_async=wrap_async))
            if not wrap_async:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            return result
        host = task_vars.get('inventory_hostname') or self._play_context.remote_addr
        reader = ProgressReader(self._connection, path, SyncPrinter(host))
        reader.start()
        try:
            module_result = self._execute_module(module_name=MODULE, task_vars=task_vars)
        finally:
            reader.stop()
            self._remove_tmp_path(self._connection._shell.tmpdir)
        display.display(final_line(host, module_result), color='red' if module_result.get('failed') else None)
        return merge_hash(result, module_result)

    def _live_progress(self, task_vars):
        if self._task.async_val or self._task.check_mode or self._play_context.check_mode:
            return False
        if getattr(self._connection._shell, '_IS_WINDOWS', False) or self._is_become_unprivileged():
            return False
        if stdout_is_a_document():
            return False
        wanted = task_vars.get('sglang_model_sync_progress', True)
        return boolean(self._templar.template(wanted), strict=False)
