# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The waiting logic of sglang_wait_ready, free of I/O and of the real clock.

The module drives it in a loop:

    plan = machine.plan(now)            # what to observe now (unit poll, PID check, which probe step)
    ...observe what the plan asks...
    decision = machine.step(now, unit=..., journal=..., pid_alive=..., probe=(step, outcome))
    if decision.action != 'wait': stop, else sleep(decision.delay)

Polling is split in two speeds so that waiting costs almost nothing and the answer still
comes within a second: every `poll_interval` a cheap check (is the main PID alive, does the
port accept a TCP connection or answer the HTTP probe); the full unit poll (`systemctl show`
+ the new journal lines) on a capped, jittered backoff, at once when the PID vanished.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import random
from collections import namedtuple

from ansible_collections.llmops.sglang.plugins.module_utils.journal_digest import JournalDigest
from ansible_collections.llmops.sglang.plugins.module_utils.probe import (
    BAD, COMPLETION_PROBES, FOREIGN, MODEL_INFO_PATH, MODELS_PATH, OK, PROBE_PATHS, REFUSED, REJECTED, TIMEOUT, UNSERVED_MODEL_HINT,
    join_url,
)
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_signatures import (
    PHASES, phase_by_name, phase_index, phase_label,
)
from ansible_collections.llmops.sglang.plugins.module_utils.systemd_props import unit_summary

REASONS = ('unit_failed', 'unit_inactive', 'crash_loop', 'start_limit', 'stalled', 'timeout', 'rejected', 'bad_response')

Config = namedtuple('Config', [
    'timeout', 'request_timeout', 'stall_timeout', 'max_restarts', 'poll_interval', 'max_poll_interval',
    'probe', 'unit', 'url', 'model',
])
Plan = namedtuple('Plan', ['poll_unit', 'check_pid', 'probe_step', 'request_timeout'])
Decision = namedtuple('Decision', ['action', 'reason', 'delay'])

JITTER = 0.2                 # +-20 % on every sleep: a fleet started together does not poll in lockstep
BACKOFF = 1.5
CONNECT_TIMEOUT = 2.0        # a TCP connect to a loaded host answers in ms; a filtered port must not eat the poll
INACTIVE_GRACE = 5.0         # a unit inactive from the start may still have a start job queued
BAD_RESPONSE_LIMIT = 3       # consecutive well-formed HTTP 200 answers that are not a generation
NEAR_READY_UNIT_POLL = 2.0   # once the port is up, read the journal often (warmup, ready lines)
NO_PID_UNIT_POLL = 1.0       # no main process to watch cheaply (ExecStartPre, auto-restart, stopping)
START_LIMIT_HINT = ('The unit failed too often in a row (StartLimitBurst within StartLimitIntervalSec): fix the failure the '
                    'journal shows, then run systemctl reset-failed on the unit before starting it again.')
TIMEOUT_HINT = ('The server was still starting: raise timeout if the phases show steady progress, '
                'otherwise read journal and journal_cmd for where it stopped.')
# The server logged its ready line, yet real requests time out: not "still starting". SGLang before 0.5.23 has no
# scheduler watchdog, so a scheduler that died after the warmup leaves an HTTP server that answers /v1/models only.
SILENT_AFTER_READY_HINT = ('The server logged that it is ready but its requests time out: its scheduler may have died while '
                           'the HTTP server lives on (no watchdog before SGLang 0.5.23), or it is overloaded. Check the '
                           'unit\'s processes and journal_cmd, then restart it; raise request_timeout only for a very slow model.')


def fmt_duration(seconds):
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return '%ds' % seconds
    if seconds < 3600:
        return '%dm%02ds' % divmod(seconds, 60)
    hours, rest = divmod(seconds, 3600)
    return '%dh%02dm' % (hours, rest // 60)


class WaitMachine(object):
    """Decides keep-waiting / ready / fail from observations and a monotonic `now`."""

    def __init__(self, cfg, now, wall_now=None, rng=None):
        self.cfg = cfg
        self.start = now
        self.deadline = now + cfg.timeout
        self.wall_start = wall_now
        self.rng = rng if rng is not None else random.Random()
        self.digest = JournalDigest(clock_offset=self._since_start if wall_now is not None else None)
        self.journal_ok = True
        # unit
        self.props = None
        self.invocation = None
        self._baseline = None
        self._last_n = None
        self._offset = 0
        self.restarts = 0
        self.started = False
        self._inactive_since = None
        self._unit_interval = cfg.poll_interval * 2
        self.next_unit_poll = now
        self.next_pid_check = now
        self.main_pid = 0
        # probe
        self.model = cfg.model
        self.stage = 'connect'
        self.next_probe = now
        self.port_open = False
        self.last_step = None
        self.last_outcome = None
        self.ready_outcome = None
        self.timeouts = 0
        self.attempts = 0
        self._bad = 0
        self._verifying = False
        # activity (for stall detection)
        self.last_activity = now
        # end
        self.failure = None
        self.ready = False
        self.ended_at = None

    # ----------------------------------------------------------------- helpers
    def _since_start(self, realtime_us):
        """A journal entry's realtime timestamp as seconds since the wait began."""
        return realtime_us / 1e6 - self.wall_start

    def _jitter(self, seconds):
        return seconds * self.rng.uniform(1 - JITTER, 1 + JITTER)

    @property
    def final_step(self):
        return self.cfg.probe

    def _near_ready(self):
        return self.port_open or phase_index(self.digest.phase) >= phase_index('http_up')

    def _unit_running(self):
        if not self.cfg.unit or self.props is None:
            return True
        p = self.props
        return p.active_state in ('activating', 'active', 'reloading') and not p.sub_state.startswith('auto-restart')

    def elapsed(self, now):
        return now - self.start

    # -------------------------------------------------------------------- plan
    def plan(self, now):
        """What to observe at `now`."""
        # at the stall deadline, read the journal once more before judging: silence is only known once looked at
        stall_due = self._stall_on() and now >= self.last_activity + self.cfg.stall_timeout
        poll_unit = bool(self.cfg.unit) and (now >= self.next_unit_poll or stall_due)
        check_pid = bool(self.cfg.unit) and not poll_unit and self.main_pid > 0 and now >= self.next_pid_check
        if check_pid:
            self.next_pid_check = now + self._jitter(self.cfg.poll_interval)
        probe_step = None
        if now >= self.next_probe and self._unit_running():
            probe_step = self.stage
        left = max(0.0, self.deadline - now)
        request_timeout = min(self.cfg.request_timeout, left)
        if probe_step == 'connect':
            request_timeout = min(CONNECT_TIMEOUT, request_timeout)
        if probe_step is not None and request_timeout < 0.05:
            probe_step = None
        return Plan(poll_unit, check_pid, probe_step, request_timeout)

    # -------------------------------------------------------------------- step
    def step(self, now, unit=None, journal=None, pid_alive=None, probe=None):
        """Digest one round of observations. probe: (step, Outcome) or None."""
        if journal:
            self.absorb_journal(journal, now)
        if unit is not None:
            if self._on_unit(unit, now):
                return self._end(now, 'fail')
        if pid_alive is False:
            # the main process is gone: ask systemd what happened right away
            self.next_unit_poll = now
        if probe is not None:
            verdict = self._on_probe(probe[0], probe[1], now)
            if verdict:
                return self._end(now, verdict)
        if now >= self.deadline:
            self.failure = {'reason': 'timeout'}
            return self._end(now, 'fail')
        if self._stall_on() and now - self.last_activity >= self.cfg.stall_timeout:
            self.failure = {'reason': 'stalled', 'phase': self.digest.phase,
                            'quiet': now - self.last_activity}
            return self._end(now, 'fail')
        return Decision('wait', None, self._delay(now))

    def absorb_journal(self, entries, now):
        """New journal lines (also usable after the end, to catch the last lines of a failure).

        Quiet time counts from when the newest line was logged, not from when it was read: the journal is read on
        a backoff, and a stall must be reported stall_timeout after the last output, not up to a poll later.
        """
        if not entries:
            return []
        logged = [e.realtime_us for e in entries if e.realtime_us]
        last_logged = self.start + (max(logged) / 1e6 - self.wall_start) if logged else now
        self.last_activity = max(self.last_activity, min(now, last_logged))
        return self.digest.feed(entries, self.elapsed(now))

    def journal_unreadable(self):
        """The journal cannot be read (no permission, no journalctl): stall detection is off."""
        self.journal_ok = False

    def reason(self):
        """The failure reason; systemd 252 reports a start-limit refusal as the last run's Result
        (exit-code...), so the journal's "Start request repeated too quickly" also means start_limit."""
        if self.failure is None:
            return None
        if self.failure['reason'] == 'unit_failed' and self.digest.start_limit_hit:
            return 'start_limit'
        return self.failure['reason']

    def _stall_on(self):
        return bool(self.cfg.unit) and self.cfg.stall_timeout > 0 and self.journal_ok

    def _end(self, now, action):
        self.ended_at = now
        if action == 'ready':
            self.ready = True
            return Decision('ready', None, 0.0)
        return Decision('fail', self.failure['reason'], 0.0)

    def _delay(self, now):
        wake = [self.deadline]
        if self.cfg.unit:
            wake.append(self.next_unit_poll)
            if self.main_pid > 0:
                wake.append(self.next_pid_check)
        if self._unit_running():
            wake.append(self.next_probe)
        if self._stall_on():
            wake.append(self.last_activity + self.cfg.stall_timeout)
        return max(0.0, min(wake) - now)

    # -------------------------------------------------------------------- unit
    def _on_unit(self, p, now):
        """Update from a `systemctl show`; True when the unit's state ends the wait."""
        first = self.props is None
        self.props = p
        if p.load_state in ('not-found', 'masked', 'error', 'bad-setting'):
            self.failure = {'reason': 'unit_inactive', 'kind': 'load', 'load_state': p.load_state}
            return True
        # restarts: NRestarts counts automatic restarts; a manual start resets it to 0
        if self._baseline is None:
            self._baseline = p.n_restarts
        elif p.n_restarts < self._last_n:
            self._offset += self._last_n - self._baseline
            self._baseline = p.n_restarts
        self._last_n = p.n_restarts
        self.restarts = self._offset + p.n_restarts - self._baseline
        if p.invocation_id and p.invocation_id != self.invocation:
            if self.invocation is not None:
                self.started = True
                self.last_activity = now
            self.invocation = p.invocation_id
        if p.active_state in ('activating', 'active', 'reloading'):
            self.started = True
        if p.main_pid != self.main_pid:
            self.main_pid = p.main_pid
            self.next_pid_check = now
        if not self._unit_running() and self.port_open:
            self.port_open = False
            self.stage = 'connect'

        auto_restart = p.sub_state.startswith('auto-restart')
        pending = self.restarts + (1 if auto_restart else 0)
        if p.job and p.active_state in ('failed', 'inactive') and p.result != 'start-limit-hit':
            # a start/restart job is queued (systemctl restart --no-block, a dependency): not terminal yet
            self._inactive_since = None
            self.next_unit_poll = now + self._jitter(NO_PID_UNIT_POLL)
            return False
        if p.result == 'start-limit-hit' and p.active_state in ('failed', 'inactive'):
            self.failure = {'reason': 'start_limit'}
            return True
        if pending > self.cfg.max_restarts:
            # a restart systemd has scheduled (SubState=auto-restart) counts: it will happen
            self.restarts = pending
            self.failure = {'reason': 'crash_loop', 'restarts': pending}
            return True
        if p.active_state == 'failed':
            self.failure = {'reason': 'unit_failed', 'before_wait': first}
            return True
        if p.active_state == 'inactive':
            if self.started or p.result not in ('success', ''):
                self.failure = {'reason': 'unit_inactive', 'kind': 'stopped'}
                return True
            if self._inactive_since is None:
                self._inactive_since = now
            if now - self._inactive_since >= min(INACTIVE_GRACE, self.cfg.timeout):
                self.failure = {'reason': 'unit_inactive', 'kind': 'never_started'}
                return True
        else:
            self._inactive_since = None

        interval = self._unit_interval
        self._unit_interval = min(self.cfg.max_poll_interval, self._unit_interval * BACKOFF)
        if p.main_pid <= 0 or auto_restart or p.active_state not in ('active', 'activating'):
            interval = min(interval, NO_PID_UNIT_POLL)
        elif self._near_ready():
            interval = min(interval, NEAR_READY_UNIT_POLL)
        self.next_unit_poll = now + self._jitter(interval)
        return False

    # ------------------------------------------------------------------- probe
    def _next_probe_soon(self, now):
        self.next_probe = now + self._jitter(self.cfg.poll_interval)

    def _on_probe(self, step, o, now):
        """Update from one probe step; returns 'ready', 'fail' or None."""
        self.last_step, self.last_outcome = step, o
        if step == 'connect':
            if o.kind == OK:
                if not self.port_open:
                    self.last_activity = now
                self.port_open = True
                need_model = self.final_step in COMPLETION_PROBES and not self.model
                self.stage = 'models' if need_model else self.final_step
                self.next_probe = now
            else:
                self.port_open = False
                if self._http_bind_failure() is not None:
                    # uvicorn could not bind and the port is not this unit's: SGLang 0.5.23 now polls /model_info
                    # 120 x 1 s and SIGKILLs itself (http_server.py:449-468, :2370); the verdict is known already
                    self.failure = {'reason': 'unit_failed', 'kind': 'http_port_in_use', 'outcome': o}
                    return 'fail'
                self._next_probe_soon(now)
            return None

        self.attempts += 1
        if self._verifying and step == 'models' and o.kind != REFUSED:
            return self._verify_model(o)
        if o.kind == REJECTED:
            if step == 'models' and o.status == 404:
                self.stage = 'model_info'
                self.next_probe = now
                return None
            self.failure = {'reason': 'rejected', 'step': step, 'outcome': o}
            return 'fail'
        if o.kind == REFUSED:
            # the server went away (restart?): back to the cheap connect check
            self.port_open = False
            self.stage = 'connect'
            self._bad = 0
            self._verifying = False
            self._next_probe_soon(now)
            return None
        if o.kind == TIMEOUT:
            self.timeouts += 1
        if step in ('models', 'model_info'):
            if o.kind == OK:
                self.model = o.value[0] if isinstance(o.value, list) else o.value
                self.stage = self.final_step
                self.next_probe = now
                return None
            if o.kind == BAD and step == 'models':
                self.stage = 'model_info'
                self.next_probe = now
                return None
            if o.kind == BAD:
                self.failure = {'reason': 'bad_response', 'step': step, 'outcome': o, 'count': 1}
                return 'fail'
            self._next_probe_soon(now)
            return None
        if o.kind == OK:
            self.ready_outcome = o
            if self.cfg.model and step in COMPLETION_PROBES:
                # SGLang answers a completion whatever model it names: only the served ids say whether it is this one
                self._verifying = True
                self.stage = 'models'
                self.next_probe = now
                return None
            return 'ready'
        if o.kind == BAD:
            self._bad += 1
            if self._bad >= BAD_RESPONSE_LIMIT:
                self.failure = {'reason': 'bad_response', 'step': step, 'outcome': o, 'count': self._bad}
                return 'fail'
        else:
            self._bad = 0
        self._next_probe_soon(now)
        return None

    def _http_bind_failure(self):
        """The line of this run in which uvicorn said `[Errno 98] ... address already in use`, or None."""
        for fatal in self.digest.fatals:
            if fatal.name == 'http_port_in_use' and fatal.run == self.digest.run:
                return fatal
        return None

    def _verify_model(self, o):
        """After a completion answered: is the model it named one of the server's ids? (SGLang 0.5.23 answers a
        completion for any model name with 200: entrypoints/openai/serving_chat.py has no model check; only
        GET /v1/models/{m} answers 404, http_server.py:2025-2040.) A server without /v1/models is not judged."""
        self._verifying = False
        served = o.value if o.kind == OK and isinstance(o.value, list) else []
        if served and self.cfg.model not in served:
            self.failure = {'reason': 'rejected', 'step': 'models', 'kind': 'model', 'served': served,
                            'outcome': o._replace(kind=REJECTED, value=UNSERVED_MODEL_HINT % ', '.join(served))}
            return 'fail'
        return 'ready'

    # ----------------------------------------------------------------- results
    def _target(self):
        return self.cfg.unit or self.cfg.url

    def _endpoint(self, step=None):
        step = step or self.final_step
        path = {'models': MODELS_PATH, 'model_info': MODEL_INFO_PATH, 'connect': ''}.get(step, PROBE_PATHS.get(step, ''))
        return join_url(self.cfg.url, path)

    def _probe_state(self):
        if self.last_outcome is None:
            return 'no probe sent'
        if self.last_step == 'connect':
            o = self.last_outcome
            if o.kind == OK:
                return 'port open'
            if o.kind in (REFUSED, TIMEOUT):
                return 'port closed (%s)' % o.detail
            return o.detail
        return '%s: %s' % (self._endpoint(self.last_step), self.last_outcome.detail)

    def _run_age(self, now):
        """How long the current run had been going: from its first journal line when known
        (it may have started before the wait), else since the wait began."""
        started = self.digest.run_started.get(self.digest.run)
        if started is None:
            return self.elapsed(now)
        return self.elapsed(now) - started

    def _unit_how(self):
        p = self.props
        if p is None:
            return ''
        how = 'Result=%s' % (p.result or '?')
        if p.exec_main_code:
            how += ', main process %s with status %s' % (p.exec_main_code, p.exec_main_status)
        return how

    def conclude(self, now=None):
        """(msg, hint) of the outcome, computed from everything seen so far."""
        now = self.ended_at if now is None else now
        elapsed = fmt_duration(self.elapsed(now))
        unit = self.cfg.unit
        label = phase_label(self.digest.phase)
        during = "during '%s'" % label if self.digest.phase else 'before any start-up phase'
        if self.ready:
            o = self.ready_outcome
            what = 'probe %s' % self.cfg.probe
            if o is not None and o.latency is not None:
                what += ' answered in %.2fs' % o.latency
            return '%s is ready after %s (%s)' % (self._target(), elapsed, what), None
        f = self.failure
        if f is None:
            return 'still waiting after %s' % elapsed, None
        reason = self.reason()
        cause, hint, _sig = self.digest.cause()
        if reason == 'unit_failed' and f.get('kind') == 'http_port_in_use':
            o, bind = f['outcome'], self._http_bind_failure()
            held = o.detail if o.kind == FOREIGN else 'no process of %s listens on it' % unit
            msg = ('%s cannot serve: its HTTP server could not bind its port (%s), and %s; SGLang kills itself when '
                   'its warmup gives up, about 2 minutes later' % (unit, bind.summary if bind else cause, held))
            return msg, o.value if o.kind == FOREIGN and isinstance(o.value, str) else hint
        if reason == 'unit_failed':
            if f.get('before_wait'):
                msg = '%s had already failed when the wait began (%s)' % (unit, self._unit_how())
            else:
                msg = '%s failed %s after %s' % (unit, during, fmt_duration(self._run_age(now)))
            msg += ': %s' % cause if cause else ' (%s); no known error line, see journal_cmd' % self._unit_how()
            return msg, hint
        if reason == 'crash_loop':
            msg = '%s is crash-looping: restart %d during the wait is more than max_restarts=%d; the last run failed %s' % (
                unit, f['restarts'], self.cfg.max_restarts, during)
            return msg + (': %s' % cause if cause else ''), hint
        if reason == 'start_limit':
            msg = '%s hit its start limit: systemd refuses to start it again until `systemctl reset-failed %s`' % (unit, unit)
            return msg + ('; last error: %s' % cause if cause else ''), hint or START_LIMIT_HINT
        if reason == 'unit_inactive':
            kind = f.get('kind')
            if kind == 'load':
                return '%s cannot be watched: LoadState=%s (check the unit name)' % (unit, f['load_state']), None
            if kind == 'never_started':
                return ('%s is not running (inactive, not started within %ds of the wait): start or restart it before waiting'
                        % (unit, int(min(INACTIVE_GRACE, self.cfg.timeout)))), None
            msg = '%s stopped %s after %s (inactive, %s)' % (unit, during, fmt_duration(self._run_age(now)), self._unit_how())
            return msg + (': %s' % cause if cause else ''), hint
        if reason == 'stalled':
            phase = phase_by_name(f['phase'])
            msg = '%s stalled %s: no new journal line and no phase change for %s' % (unit, during, fmt_duration(f['quiet']))
            if phase is None:
                return msg, 'Nothing that marks a start-up phase was logged: check the unit\'s ExecStart and its first journal lines.'
            return msg, phase.stall_hint
        if reason == 'timeout':
            where = ''
            if unit:
                where = 'last phase %s' % ("'%s'" % label if self.digest.phase else 'none seen')
                where += ', '
            msg = '%s not ready after %s: %slast probe: %s' % (self._target(), elapsed, where, self._probe_state())
            if self.timeouts:
                msg += ' (%d probe request(s) timed out)' % self.timeouts
            o = self.last_outcome
            if self.last_step == 'connect' and o is not None and isinstance(o.value, str):
                return msg, o.value
            if self.timeouts and self.digest.phase == 'ready':
                return msg, SILENT_AFTER_READY_HINT
            return msg, TIMEOUT_HINT
        o = f['outcome']
        if reason == 'rejected' and f.get('kind') == 'model':
            return ("%s does not serve model '%s': GET %s lists %s" % (
                self.cfg.url, self.cfg.model, MODELS_PATH, ', '.join(f['served']))), o.value
        if reason == 'rejected':
            return '%s rejected the probe: %s' % (self._endpoint(f['step']), o.detail), o.value
        # bad_response
        msg = '%s answered but not with a valid %s: %s' % (self._endpoint(f['step']), f['step'], o.detail)
        if f.get('count', 1) > 1:
            msg += ' (%d times in a row)' % f['count']
        if f['step'] == 'model_info':
            return msg, 'Set model explicitly (the server\'s --served-model-name).'
        return msg, 'Check expect and the probe: the server answers HTTP 200 but the body does not pass the check.'

    def phases(self):
        if self.ready and self.digest.phase != 'ready':
            # the answer proved readiness before the journal's "ready" line was read (or without a journal)
            self.digest.add_phase('ready', self.elapsed(self.ended_at), 'probe')
        return [{'name': m.name, 'label': phase_label(m.name), 'at': m.at, 'run': m.run, 'source': m.source}
                for m in self.digest.phases]

    def probe_summary(self):
        o = self.ready_outcome or self.last_outcome
        status = None
        if o is not None:
            status = o.status if o.status is not None else o.kind
        return {
            'endpoint': self._endpoint(),
            'status': status,
            'latency': round(o.latency, 3) if o is not None and o.latency is not None else None,
            'model': self.model,
            'attempts': self.attempts,
            'timeouts': self.timeouts,
            'detail': o.detail if o is not None else None,
        }

    def result(self, now=None):
        """Everything the module returns except gpus and journal_cmd (added by the module)."""
        now = self.ended_at if now is None else now
        if now is None:
            now = self.start
        msg, hint = self.conclude(now)
        journal = self.digest.excerpt(tail_fallback=not self.ready) if self.cfg.unit else []
        return {
            'ready': self.ready,
            'elapsed': round(self.elapsed(now), 3),
            'reason': None if self.ready else self.reason(),
            'msg': msg,
            'hint': hint,
            'journal': journal,
            'phases': self.phases(),
            'restarts': self.restarts,
            'unit': unit_summary(self.props),
            'probe': self.probe_summary(),
        }

    def progress(self, now):
        """A small status for a controller-side live display (written to progress_file)."""
        marks = self.digest.phases
        last = marks[-1] if marks else None
        return {
            'unit': self.cfg.unit,
            'url': self.cfg.url,
            'phase': last.name if last else None,
            'phase_label': phase_label(last.name) if last else None,
            'phase_at': last.at if last else None,
            'phases': self.phases(),
            'elapsed': round(self.elapsed(now), 1),
            'timeout': self.cfg.timeout,
            'restarts': self.restarts,
            'active_state': self.props.active_state if self.props else None,
            'sub_state': self.props.sub_state if self.props else None,
            'port_open': self.port_open,
            'probe': self._probe_state(),
            'last_line': self.digest.last_line,
            'done': self.ended_at is not None,
            'ready': self.ready,
            'reason': self.reason(),
        }


__all__ = ['Config', 'Decision', 'Plan', 'PHASES', 'REASONS', 'WaitMachine', 'fmt_duration']
