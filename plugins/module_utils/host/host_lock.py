# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-host rollout lock's rules: a lease with an owner. Pure, no I/O.

A record ``{token, controller, pid, user, since, expires}`` in a file on the host says which ansible-playbook run
changes the host. ``token`` is ``controller:pid:process-start-ticks`` of that run's ansible-playbook process, so
one run re-enters its own lock (several instances, the rollback) and another run is refused. A lock whose holder
is gone is stale, and taken over:

- at once, when the holder ran on the same controller and its process no longer exists (the next run's controller
  checks the pid and its start time: a killed ``ansible-playbook`` leaves no doubt there);
- after the lease expires otherwise (a controller that vanished elsewhere): the lease covers the longest step of a
  run (the wait's timeout plus the stop timeout) and is renewed before each long step.

The file lives under ``/run``, so a reboot, which ends every holder's work on the host, also clears it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time


def owner_token(controller, pid, start_ticks):
    return '%s:%d:%s' % (controller, pid, start_ticks)


def decide(record, token, now, break_token=None):
    """'take' (free, expired, ours, or the stale one we were told to break) or 'held'."""
    if not record or not isinstance(record, dict) or not record.get('token'):
        return 'take'
    if record.get('token') == token:
        return 'take'
    if break_token and record.get('token') == break_token:
        return 'take'
    try:
        if float(record.get('expires', 0)) <= now:
            return 'take'
    except (TypeError, ValueError):
        return 'take'
    return 'held'


def new_record(record, owner, now, lease):
    """The record after taking or renewing: ``since`` is kept when the same run renews."""
    since = record.get('since') if record and record.get('token') == owner['token'] else now
    result = dict(owner)
    result.update({'since': since, 'expires': now + lease, 'renewed': now})
    return result


def _when(epoch):
    return time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(float(epoch)))


def holder_message(record, host, now):
    """What an operator needs to know about the run that holds the lock."""
    return ('%s is being changed by another run: ansible-playbook pid %s of %s on controller %s, since %s; its lease '
            'ends %s (in %d s) unless it renews it. Wait for that run to finish; if it is gone from another controller, '
            'the lock is free once the lease ends (or remove %s on the host).' % (
                host, record.get('pid'), record.get('user') or '?', record.get('controller') or '?',
                _when(record.get('since', now)), _when(record.get('expires', now)),
                max(0, int(float(record.get('expires', now)) - now)), record.get('path', 'the lock file')))


def stale_on_this_controller(record, controller, pid_start_ticks):
    """Whether the holder ran on this controller and its process is gone.

    ``pid_start_ticks(pid)`` returns the process' start time in clock ticks, or None when there is no such process.
    """
    if not record or record.get('controller') != controller:
        return False
    try:
        pid = int(record.get('pid'))
    except (TypeError, ValueError):
        return True
    ticks = pid_start_ticks(pid)
    return ticks is None or str(ticks) != str(record.get('start_ticks'))
