# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of llmops.sglang.sglang_host_lock: names the owner, waits, and takes over a dead holder's lock.

The owner is this controller's ansible-playbook process (the parent of this worker), identified by host name, pid
and the process' start time, so a reused pid is not mistaken for the holder. A lock held by a run of this
controller whose process is gone (a killed ansible-playbook) is broken at once; any other holder is waited for up
to ``wait`` seconds, retrying every POLL seconds, and then refused with a message naming it.
"""

from __future__ import annotations

import getpass
import os
import socket
import time

from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.llmops.sglang.plugins.module_utils.host.host_lock import owner_token, stale_on_this_controller

display = Display()

MODULE = 'llmops.sglang.sglang_host_lock'
POLL = 5.0


def pid_start_ticks(pid):
    """The process' start time in clock ticks (/proc), 'alive' without /proc, None when there is no such process."""
    try:
        with open('/proc/%d/stat' % pid) as handle:
            text = handle.read()
        return text[text.rindex(')') + 2:].split()[19]
    except (IOError, OSError, ValueError, IndexError):
        pass
    if os.path.isdir('/proc/self'):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return 'alive'


def controller_owner():
    pid = os.getppid()
    controller = socket.gethostname()
    ticks = pid_start_ticks(pid)
    try:
        user = getpass.getuser()
    except Exception:  # pylint: disable=broad-except
        user = str(os.getuid())
    return {'token': owner_token(controller, pid, ticks), 'controller': controller, 'pid': pid,
            'start_ticks': ticks, 'user': user}


class ActionModule(ActionBase):
    """Take/renew/release the host's rollout lock."""

    _VALID_ARGS = frozenset(('path', 'state', 'lease', 'wait', 'require_root'))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        args = dict(self._task.args)
        args['owner'] = controller_owner()
        try:
            wait = max(0, int(args.get('wait') or 0))
        except (TypeError, ValueError):
            return dict(result, failed=True, msg='wait=%r: expected seconds, an integer >= 0' % (args.get('wait'),))
        deadline = time.monotonic() + wait
        broke = None
        while True:
            answer = self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars)
            if answer.get('failed') or args.get('state', 'locked') == 'unlocked' or answer.get('locked'):
                if broke:
                    answer['broke_stale'] = broke
                    # Through Display (proxied from the worker): a result's 'warnings' must be strings on
                    # ansible-core 2.19 and warning objects on 2.21.
                    display.warning('Took over the rollout lock of ansible-playbook pid %s on %s, which is gone.'
                                    % (broke.get('pid'), broke.get('controller')))
                answer.pop('invocation', None)
                return dict(result, **answer)
            holder = answer.get('held_by') or {}
            if self._task.check_mode or self._play_context.check_mode:
                # Check mode takes no lock: it says who holds it (a real run would wait, then be refused) and goes on.
                answer.pop('invocation', None)
                return dict(result, **answer)
            if stale_on_this_controller(holder, args['owner']['controller'], pid_start_ticks):
                # ansible-playbook pid P of this controller is gone: its lock protects nothing any more.
                args['break_token'] = holder.get('token')
                broke = holder
                continue
            if time.monotonic() >= deadline:
                answer.pop('invocation', None)
                msg = answer.get('msg', 'the host is locked by another run')
                if wait:
                    msg += ' (waited %d s)' % wait
                return dict(result, failed=True, locked=False, held_by=holder, msg=msg)
            time.sleep(min(POLL, max(0.0, deadline - time.monotonic())))
