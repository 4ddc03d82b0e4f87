# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of the live progress lines, shared by the action plugins that show a module's progress
(sglang_wait_ready, sglang_model_sync): a thread that reads the module's progress file over a copy of the task's
connection and prints what a printer (module_utils/progress_view.py, model_sync.py) finds due, and LiveProgressAction,
the action plugin both are: run the module, with the reader beside it when live lines are wanted, else untouched.

Why a copy of the connection: connection plugins keep per-command state on the instance (ssh's `_flags` during
privilege escalation), so the reader must not share the instance the module's command runs on.
"""

from __future__ import annotations

import copy
import json
import threading
import time

from ansible import constants as C
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible.utils.vars import merge_hash

display = Display()

# seconds between two reads of the progress file: the module rewrites it at least this often (wait_report.PROGRESS_EVERY)
# and at every change; each read is an ssh session on the host
READ_EVERY = 5.0


def stdout_is_a_document():
    """True when the stdout callback prints machine-readable JSON (json, ansible.posix.jsonl, ...)."""
    name = C.config.get_config_value('DEFAULT_STDOUT_CALLBACK') or ''
    return 'json' in name.rsplit('.', 1)[-1].lower()


class ProgressReader(threading.Thread):
    """Reads the progress file every READ_EVERY seconds and prints what the printer finds due."""

    def __init__(self, connection, path, printer, every=READ_EVERY):
        super(ProgressReader, self).__init__(name='sglang-wait-progress', daemon=True)
        self.original = connection
        self.connection = None
        self.command = 'cat -- %s' % connection._shell.quote(path)
        self.printer = printer
        self.every = every
        self.stopped = threading.Event()
        # held while printing, so no progress line can follow the final line
        self.print_lock = threading.Lock()
        self.reads = 0

    def read(self):
        if self.connection is None:
            # copied after the module's command has begun, so a plugin that connects lazily has connected by now
            self.connection = copy.copy(self.original)
        rc, out, err = self.connection.exec_command(self.command, sudoable=False)
        self.reads += 1
        if rc != 0:
            # not written yet (the module is starting), or gone; the next read tries again
            display.vvvv('sglang_wait_ready progress: %s: rc=%s %s' % (self.command, rc, to_text(err).strip()))
            return None
        try:
            return json.loads(to_text(out))
        except ValueError:
            return None

    def run(self):
        while not self.stopped.wait(self.every):
            try:
                status = self.read()
            except Exception as exc:  # pylint: disable=broad-except
                # a progress display must never break the wait: report at -vvvv and keep trying
                display.vvvv('sglang_wait_ready progress: read failed: %s' % to_text(exc))
                continue
            lines = self.printer.feed(status, time.monotonic())
            if lines:
                with self.print_lock:
                    if not self.stopped.is_set():
                        for line in lines:
                            display.display(line)

    def stop(self):
        """No line is printed after this returns. A read still in flight is not waited for: the verdict must not
        wait on a progress display (benchmarks measured half a second); the daemon thread ends with the worker."""
        with self.print_lock:
            self.stopped.set()


class LiveProgressAction(ActionBase):
    """Runs MODULE and, while it runs, prints its progress file live per host (a ProgressReader over a copy of the
    connection). Passed through untouched: async tasks, check mode, become to an unprivileged user (it could not write
    to the remote tmp dir, nor could the login user read its file), a JSON stdout callback (one document that extra
    lines would break), the task variable PROGRESS_VAR false, or no progress file (progress_args returns None).

    A subclass names MODULE and PROGRESS_VAR and says how its module is watched: progress_args, printer, final."""

    MODULE = None
    PROGRESS_VAR = None

    _supports_check_mode = True
    _supports_async = True

    def progress_args(self, module_args):
        """The module's arguments with a progress_file to read, or None to run it without live lines."""
        return module_args if module_args.get('progress_file') else None

    def printer(self, host):
        """What turns the file's states into lines (a ProgressPrinter or SyncPrinter for host)."""
        raise NotImplementedError

    def final(self, host, module_args, module_result):
        """The outcome's line, the moment the module returned."""
        raise NotImplementedError

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super(LiveProgressAction, self).run(tmp, task_vars)
        del tmp  # tmp no longer has any effect

        wrap_async = self._task.async_val and not self._connection.has_native_async
        module_args = self.progress_args(dict(self._task.args)) if self._live_progress(task_vars) else None
        if module_args is None:
            result = merge_hash(result, self._execute_module(module_name=self.MODULE, task_vars=task_vars,
                                                             wrap_async=wrap_async))
            if not wrap_async:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            return result

        host = task_vars.get('inventory_hostname') or self._play_context.remote_addr
        if self._task.delegate_to:
            host = '%s via %s' % (host, self._task.delegate_to)
        reader = ProgressReader(self._connection, module_args['progress_file'], self.printer(host))
        reader.start()
        try:
            module_result = self._execute_module(module_name=self.MODULE, module_args=module_args, task_vars=task_vars)
            # the verdict's line first: the clean-up below is one more command on the host (a round trip under load)
            reader.stop()
            self.final(host, module_args, module_result)
        finally:
            reader.stop()
            # the user's own progress_file stays; one made in the tmp dir goes with it
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return merge_hash(result, module_result)

    def _live_progress(self, task_vars):
        if self._task.async_val or self._task.check_mode or self._play_context.check_mode:
            return False
        if getattr(self._connection._shell, '_IS_WINDOWS', False) or self._is_become_unprivileged():
            return False
        if stdout_is_a_document():
            return False
        wanted = task_vars.get(self.PROGRESS_VAR, True)
        return boolean(self._templar.template(wanted), strict=False)
