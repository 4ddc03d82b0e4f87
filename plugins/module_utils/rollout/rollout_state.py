# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the server role does next, decided from the host's state, not from what this run changed. Pure, no I/O.

The host keeps the configuration that last answered a real completion under ``/var/lib/llmops-sglang/server/<name>/last-good`` (unit,
environment, secrets, package pins). The role compares the configuration it leaves on the host with that copy
(``sglang_info``'s ``last_good``) and with the running process (``started_at`` against the files' mtimes), then:

- ``is_verified`` / ``config_verified``: whether the configuration on disk / the one the role writes (its rendered
  digests against the saved copies') is the last known good one;
- ``start_action``: restart, start or leave the unit, so that the process runs the files on disk;
- ``after_wait``: keep a configuration that answered (and remember it when it was not the verified one), restore
  the verified one when an unverified one does not answer, or fail;
- ``after_rollback``: report what the single restore achieved (the rollback round: the restore, then the same restart
  and wait as the first round);
- ``outcome``: the instance's outcome, made once from the wait's verdict and what followed it, or from the step that
  stopped the role run before any verdict (a refusal, a gate, a task that failed): the record the fleet report, the
  deployment metrics and the host's failure all read.

A run killed at any point therefore leaves a state the next run finishes: an unverified configuration is waited for
and kept if it answers, replaced by the last good one (once per run) if it does not.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

RUNNING = ('active', 'activating', 'reloading')
START_SLACK = 2.0

# The files of a configuration, by their name in the last-good directory.
SAVED_FILES = ('unit', 'env', 'secrets.env')
PINNED_PACKAGES = ('sglang', 'compressed-tensors')


def pins_of(packages):
    """The pinned packages' versions (None when absent) from a venv's package dict."""
    packages = packages or {}
    return dict((name, packages.get(name)) for name in PINNED_PACKAGES)


def is_verified(last_good, current_pins):
    """Whether the configuration on the host is the one that last served: same files and same package versions.

    ``last_good``: sglang_info's ``last_good`` ({exists, same: {name: bool}, pins}); ``current_pins``: pins_of().
    """
    if not last_good or not last_good.get('exists'):
        return False
    same = last_good.get('same') or {}
    if not all(same.get(name) for name in SAVED_FILES):
        return False
    saved = last_good.get('pins')
    if saved is None:
        return False
    return pins_of(saved) == pins_of(current_pins)


def config_verified(want_files, last_good, packages):
    """Whether the configuration the role WRITES is the last known good one, decided before it is written: the
    rendered digests of the saved files against the saved copies' (sglang_observe's ``last_good.digests``; None ==
    None, so a secrets file absent from both counts as equal) and the saved pins against ``packages``, the versions
    that will run (the venv's with the role's pins over them).

    ``want_files``: name -> sha1 of what the role writes (None: it removes the file); ``last_good``: {exists,
    digests, pins}. A last_good without digests (an older module) is never verified.
    """
    last_good = last_good or {}
    if not last_good.get('exists'):
        return False
    digests = last_good.get('digests') or {}
    want_files = want_files or {}
    if any(want_files.get(name) != digests.get(name) for name in SAVED_FILES):
        return False
    saved = last_good.get('pins')
    if saved is None:
        return False
    return pins_of(saved) == pins_of(packages)


def start_action(sglang_state, changed, service, config_mtimes):
    """'restart', 'start' or 'none': what makes the unit's process run the configuration on disk.

    ``changed``: this run changed a file or a package. ``service``: sglang_info's facts of the unit (active_state,
    started_at: epoch of the main process' start or None). ``config_mtimes``: epoch mtimes of the unit, env, secrets
    and the venv's site-packages (None for an absent file). A process older than one of them runs a configuration
    that is no longer on disk - an earlier run changed it and was stopped before its restart - and is restarted.
    """
    if sglang_state == 'restarted' or changed:
        return 'restart'
    service = service or {}
    if service.get('active_state') not in RUNNING:
        return 'start'
    started_at = service.get('started_at')
    mtimes = [m for m in (config_mtimes or []) if m is not None]
    # /proc/stat's btime has whole seconds: a process started just after its files were written may look up to a
    # second older than it is, so only a file newer by more than START_SLACK counts.
    if started_at is not None and mtimes and max(mtimes) > started_at + START_SLACK:
        return 'restart'
    return 'none'


def after_wait(wait_ok, verified, has_last_good, rollback_enabled):
    """What follows the wait: {'action': keep|remember|rollback|fail, 'note': why, for the operator}."""
    if wait_ok:
        if verified:
            return {'action': 'keep', 'note': 'The verified configuration serves.'}
        return {'action': 'remember', 'note': 'This configuration served; it becomes the last known good one.'}
    if verified:
        return {'action': 'fail', 'note': 'This is the last configuration known to work, so there was nothing else to '
                                          'restore: the host, not the configuration, needs attention.'}
    if not has_last_good:
        return {'action': 'fail', 'note': 'No configuration of this unit was known to work before, so nothing was '
                                          'rolled back.'}
    if not rollback_enabled:
        return {'action': 'fail', 'note': 'sglang_rollback is false, so the last known good configuration was not '
                                          'restored.'}
    return {'action': 'rollback', 'note': 'Restoring the last known good configuration.'}


def group_verdict(own, rank0_failure, rank0_host):
    """A multi-node group's verdict on one of its ranks >= 1: ``own`` (this rank's failure, or None) when it has one,
    else rank 0's failure (``rank0_failure``, None when rank 0 passed or is not in this run), its message naming
    ``rank0_host``. Only rank 0 serves HTTP, so only its canary analysis runs and a rank >= 1's wait passes whenever
    rank 0 answers; a configuration that rank 0 failed is the group's, and every rank rolls back from it together (a
    rank 0 restored alone would wait for peers on the configuration that failed). Rank 0's journal lines stay
    rank 0's."""
    if own is not None or not rank0_failure:
        return own
    record = dict((key, value) for key, value in rank0_failure.items() if key != 'journal')
    record['msg'] = 'rank 0 of its multi-node group, on %s, failed: %s' % (rank0_host, rank0_failure.get('msg') or '')
    return record


def after_rollback(wait_ok, elapsed=None, reason=None, message=None):
    """The note after the one restore: it serves again, or the restore failed too (with the restore's own reason)."""
    if wait_ok:
        return {'action': 'fail', 'rolled_back': True,
                'note': 'Rolled back: the last known good configuration was restored and is serving again '
                        '(ready after %.1f s).' % float(elapsed or 0)}
    return {'action': 'fail', 'rolled_back': False,
            'note': 'Rolling back failed too (%s: %s); this host needs attention.' % (reason or 'error', message or '')}


def canary_summary(result):
    """What the outcome keeps of a canary analysis (sglang_canary's result, passed or failed): None when none ran."""
    if not isinstance(result, dict) or 'rows' not in result or result.get('skipped'):
        return None
    rows = [dict((key, row.get(key)) for key in ('level', 'figure', 'canary', 'baseline', 'ratio', 'threshold', 'failed'))
            for row in result.get('rows') or []]
    return {'passed': bool(result.get('passed')), 'baseline': result.get('baseline'), 'rows': rows,
            'requests': result.get('requests'), 'errors': result.get('errors')}


def outcome(unit, wait_result, failure, next_step=None, rollback_failure=None, packages=None, config_changed=False,
            canary=None, stopped=None):
    """The instance's outcome, made in this one place: the waiter's result (``failure``'s when the wait failed) plus
    ``packages``, ``rolled_back``, ``changed_config``, ``outcome`` (ready, failed, rolled_back, rollback_failed, refused)
    and ``message`` (None when ready: the text the host fails with, the waiter's reason, message and hint, then what the
    rollout did about it).

    ``stopped``: the role run ended before any verdict, {step: the task that failed, msg: its message, refusals: the
    decision's refusals, gates_ok: the GPU and checkpoint gates' verdict (None: not judged)}; the outcome is then
    stopped_outcome()'s and the other arguments but ``packages`` are not read.

    ``next_step``: after_wait()'s result. When its action is ``rollback`` the rollback round ran (the role includes it
    on exactly that action): ``rollback_failure`` is that round's own failure (its restore's or its wait's, a task
    result with ``reason`` and ``msg``), None when the restored configuration answered, and ``wait_result`` is then the
    restored configuration's wait. ``canary``: sglang_canary's result (kept as canary_summary() under ``canary``), or
    None.
    """
    if stopped is not None:
        return stopped_outcome(unit, stopped, packages)
    rollback = {}
    if (next_step or {}).get('action') == 'rollback':
        if rollback_failure is None:
            rollback = after_rollback(True, (wait_result or {}).get('elapsed'))
        else:
            rollback = after_rollback(False, None, rollback_failure.get('reason') or 'error', rollback_failure.get('msg') or '')
    record = dict(failure if failure is not None else (wait_result or {}))
    rolled_back = bool(rollback.get('rolled_back'))
    record.update(packages=dict(packages or {}), rolled_back=rolled_back, changed_config=bool(config_changed),
                  canary=canary_summary(canary))
    if record['canary'] is None:
        del record['canary']
    if failure is None:
        record.update(outcome='ready', message=None)
        return record
    if rolled_back:
        state = 'rolled_back'
    elif rollback:
        state = 'rollback_failed'
    else:
        state = 'failed'
    hint = failure.get('hint') or ''
    note = rollback.get('note') or (next_step or {}).get('note') or ''
    parts = ['%s is not ready (%s):' % (unit, failure.get('reason') or 'error'), failure.get('msg') or '',
             ('Hint: %s' % hint) if hint else '', note]
    record.update(outcome=state, message=' '.join(part.strip() for part in parts if part and part.strip()))
    return record


def stopped_outcome(unit, stopped, packages=None):
    """The outcome of an instance whose role run stopped before the waiter's verdict (outcome()'s ``stopped``).

    ``refused`` when the host refused it before anything changed: the decision's refusals (the venv, the model
    directory, the port, a restart the rollout plan did not foresee; reason ``refused``), or the GPU and checkpoint
    gates (``gates_ok`` false; reason ``preflight``); else ``failed`` at a step (reason ``step_failed``, ``step`` the
    task that failed). ``message`` is the failed task's own message: the text the host fails with."""
    stopped = stopped or {}
    step = stopped.get('step') or 'a task'
    if stopped.get('refusals'):
        state, reason = 'refused', 'refused'
    elif stopped.get('gates_ok') is False:
        state, reason = 'refused', 'preflight'
    else:
        state, reason = 'failed', 'step_failed'
    msg = stopped.get('msg')
    message = ('' if msg is None else msg if isinstance(msg, str) else str(msg)).strip() or '%s: %s failed' % (unit, step)
    return {'ready': False, 'reason': reason, 'step': step, 'outcome': state, 'message': message,
            'packages': dict(packages or {}), 'rolled_back': False, 'changed_config': False}
