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

from ansible.utils.display import Display

from ansible_collections.llmops.sglang.plugins.module_utils.progress_view import ProgressPrinter, final_line
from ansible_collections.llmops.sglang.plugins.plugin_utils.progress_reader import LiveProgressAction

display = Display()

MODULE = 'llmops.sglang.sglang_wait_ready'
PROGRESS_NAME = 'sglang_wait_ready.progress.json'


class ActionModule(LiveProgressAction):

    MODULE = MODULE
    PROGRESS_VAR = 'sglang_wait_progress'

    def progress_args(self, module_args):
        # Without a progress_file of the user's, the module writes one into the task's remote tmp dir.
        if not module_args.get('progress_file'):
            tmpdir = self._connection._shell.tmpdir or self._make_tmp_path()
            module_args['progress_file'] = self._connection._shell.join_path(tmpdir, PROGRESS_NAME)
        return module_args

    def printer(self, host):
        return ProgressPrinter(host)

    def final(self, host, module_args, module_result):
        if 'ready' in module_result:
            display.display(final_line(host, module_result, module_args.get('unit')),
                            color=None if module_result.get('ready') else 'red')
