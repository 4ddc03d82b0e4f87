# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of llmops.sglang.sglang_wait_ready: runs the module and shows its progress live, per host.

While the module waits on the GPU host, a thread of this worker reads the module's progress_file over the task's
own connection every few seconds (one `cat` of a file of a few hundred bytes) and prints a plain line per host
with display.display: at once on a phase change, else every REFRESH_EVERY seconds; and the module's outcome the
moment it returns. Works with any stdout callback (lines go through Display, not a callback method) and without -v.

The module runs exactly as without this plugin, in the worker's main thread. Passed through untouched (no live
lines): async tasks, check mode, become to an unprivileged user (it could not write to the remote tmp dir, nor
could the login user read its file), `sglang_wait_progress: false`, and a JSON stdout callback (its output is one
document that extra lines would break).

Why a copy of the connection: connection plugins keep per-command state on the instance (ssh's `_flags` during
privilege escalation), so the reader must not share the instance the module's command runs on. The copy shares
options and the ssh ControlMaster socket; each read is one short process (ssh, local) or channel (paramiko), and the
reads never use become (the module hands the file to the login user that owns the remote tmp dir).
"""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible.utils.vars import merge_hash

from ansible_collections.llmops.sglang.plugins.module_utils.progress_view import ProgressPrinter, final_line
from ansible_collections.llmops.sglang.plugins.plugin_utils.progress_reader import ProgressReader, stdout_is_a_document

display = Display()

MODULE = 'llmops.sglang.sglang_wait_ready'
PROGRESS_NAME = 'sglang_wait_ready.progress.json'


class ActionModule(ActionBase):

    _supports_check_mode = True
    _supports_async = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # tmp no longer has any effect

        wrap_async = self._task.async_val and not self._connection.has_native_async
        if not self._live_progress(task_vars):
            result = merge_hash(result, self._execute_module(module_name=MODULE, task_vars=task_vars, wrap_async=wrap_async))
            if not wrap_async:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            return result

        module_args = dict(self._task.args)
        if not module_args.get('progress_file'):
            tmpdir = self._connection._shell.tmpdir or self._make_tmp_path()
            module_args['progress_file'] = self._connection._shell.join_path(tmpdir, PROGRESS_NAME)
        host = task_vars.get('inventory_hostname') or self._play_context.remote_addr
        if self._task.delegate_to:
            host = '%s via %s' % (host, self._task.delegate_to)

        reader = ProgressReader(self._connection, module_args['progress_file'], ProgressPrinter(host))
        reader.start()
        try:
            module_result = self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)
        finally:
            reader.stop()
            # the user's own progress_file stays; ours goes with the tmp dir
            self._remove_tmp_path(self._connection._shell.tmpdir)
        if 'ready' in module_result:
            display.display(final_line(host, module_result, module_args.get('unit')),
                            color=None if module_result.get('ready') else 'red')
        return merge_hash(result, module_result)

    def _live_progress(self, task_vars):
        if self._task.async_val or self._task.check_mode or self._play_context.check_mode:
            return False
        if getattr(self._connection._shell, '_IS_WINDOWS', False) or self._is_become_unprivileged():
            return False
        if stdout_is_a_document():
            return False
        wanted = task_vars.get('sglang_wait_progress', True)
        return boolean(self._templar.template(wanted), strict=False)
