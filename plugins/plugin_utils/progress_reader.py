# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller side of the live progress lines, shared by the action plugins that show a module's progress
(sglang_wait_ready, sglang_model_sync): a thread that reads the module's progress file over a copy of the task's
connection and prints what a printer (module_utils/progress_view.py, model_sync.py) finds due.

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
from ansible.utils.display import Display

display = Display()

READ_EVERY = 3.0          # seconds between two reads of the progress file


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
