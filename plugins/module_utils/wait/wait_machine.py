# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deciding part of sglang_wait_ready, free of I/O and of the real clock.

The driver loop (wait_driver.watch) runs it:

    plan = machine.plan(now)            # what to observe now (unit poll, PID check, which probe step); no side effects
    ...observe what the plan asks...
    decision = machine.step(now, unit=..., unit_error=..., journal=..., pid_alive=..., probe=(step, outcome),
                            port_holder=...)
    if decision.action != 'wait': stop, else sleep(decision.delay)

Polling is split in two speeds so that waiting costs almost nothing and the answer still
comes within a second: every `poll_interval` a cheap check (is the main PID alive, does the
port accept a TCP connection or answer the HTTP probe); the full unit poll (`systemctl show`
+ the new journal lines) on a capped, jittered backoff, at once when the PID vanished.

The machine's state changes only through its own methods. What it decided is read by wait_report, which turns it
into the result, the message and the progress status.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import random
from collections import namedtuple
from urllib.parse import urlparse

from ansible_collections.llmops.sglang.plugins.module_utils.wait.journal_digest import JournalDigest
from ansible_collections.llmops.sglang.plugins.module_utils.wait.probe import (
    BAD, COMPLETION_PROBES, OK, REFUSED, REJECTED, TIMEOUT, UNSERVED_MODEL_HINT, foreign_connect,
)
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_signatures import phase_index

# Why a wait failed: the module's RETURN documents the same list (tests/unit/.../test_wait_report.py checks it).
REASONS = ('unit_failed', 'unit_inactive', 'crash_loop', 'start_limit', 'stalled', 'timeout', 'rejected', 'bad_response')

Config = namedtuple('Config', [
    'timeout', 'request_timeout', 'stall_timeout', 'max_restarts', 'poll_interval', 'max_poll_interval',
    'probe', 'unit', 'url', 'model',
])
Plan = namedtuple('Plan', ['poll_unit', 'check_pid', 'probe_step', 'request_timeout'])
# action: wait | ready | fail | error (the wait could not go on: systemctl show failed UNIT_QUERY_ATTEMPTS times)
Decision = namedtuple('Decision', ['action', 'reason', 'delay'])

JITTER = 0.2                 # +-20 % on every sleep: a fleet started together does not poll in lockstep
BACKOFF = 1.5
CONNECT_TIMEOUT = 2.0        # a TCP connect to a loaded host answers in ms; a filtered port must not eat the poll
INACTIVE_GRACE = 5.0         # a unit inactive from the start may still have a start job queued
BAD_RESPONSE_LIMIT = 3       # consecutive well-formed HTTP 200 answers that are not a generation
NEAR_READY_UNIT_POLL = 2.0   # once the port is up, read the journal often (warmup, ready lines)
NO_PID_UNIT_POLL = 1.0       # no main process to watch cheaply (ExecStartPre, auto-restart, stopping)
UNIT_QUERY_ATTEMPTS = 3      # `systemctl show` failing this many times in a row ends the wait (reason null)
UNIT_QUERY_RETRY = 1.0       # seconds before asking systemctl again after a failed `show`
SETTLE_READS = 2             # extra journal reads after a unit failure when no cause was found yet
ENDED_REASONS = ('unit_failed', 'unit_inactive', 'crash_loop', 'start_limit')   # the unit's process ended
SETTLE_DELAY = 0.3           # seconds between two of them


class Failure(object):
    """Why the wait failed: a reason of REASONS and the facts the message is made of.

    kind: what within the reason (unit_inactive: load | stopped | never_started; unit_failed: http_port_in_use;
    rejected: model); step and outcome: the probe step and its Outcome that decided; count: consecutive bad
    answers; restarts: restarts counted with a scheduled one (crash_loop); phase and quiet: where and for how long
    the journal was silent (stalled); before_wait: the unit had failed before the wait began; load_state: the
    unit's LoadState (kind load); served: the ids GET /v1/models listed (kind model).
    """

    __slots__ = ('reason', 'kind', 'step', 'outcome', 'count', 'restarts', 'phase', 'quiet', 'before_wait',
                 'load_state', 'served')

    def __init__(self, reason, kind=None, step=None, outcome=None, count=1, restarts=0, phase=None, quiet=0.0,
                 before_wait=False, load_state=None, served=()):
        if reason not in REASONS:
            raise ValueError('unknown failure reason %r (one of %s)' % (reason, ', '.join(REASONS)))
        self.reason, self.kind, self.step, self.outcome = reason, kind, step, outcome
        self.count, self.restarts, self.phase, self.quiet = count, restarts, phase, quiet
        self.before_wait, self.load_state, self.served = before_wait, load_state, tuple(served)

    def __eq__(self, other):
        return isinstance(other, Failure) and all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __ne__(self, other):
        return not self == other

    __hash__ = None

    def __repr__(self):
        return 'Failure(%s)' % ', '.join('%s=%r' % (k, getattr(self, k)) for k in self.__slots__)


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
        self.port = _port_of(cfg.url)
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
        self._unit_errors = 0
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
        self.failure = None           # a Failure once the wait failed
        self.error = None             # why the wait could not go on (no reason: the module could not watch)
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
    def step(self, now, unit=None, unit_error=None, journal=None, pid_alive=None, probe=None, port_holder=None):
        """Digest one round of observations.

        unit: the UnitProps of a `systemctl show`, or unit_error: why it failed; journal: new JournalEntry rows;
        pid_alive: the answer of a PID check (None: not checked); probe: (step, Outcome) or None; port_holder: who
        holds the port when a connect succeeded but no process of the unit listens on it (None: the unit's, or
        cannot tell).
        """
        if unit_error is not None:
            self._unit_errors += 1
            if self._unit_errors >= UNIT_QUERY_ATTEMPTS:
                self.error = 'systemctl show %s failed: %s' % (self.cfg.unit, unit_error)
                return self._end(now, 'error')
            self.next_unit_poll = now + UNIT_QUERY_RETRY
        if journal:
            self.absorb_journal(journal, now)
        if unit is not None:
            self._unit_errors = 0
            if self._on_unit(unit, now):
                return self._end(now, 'fail')
        if pid_alive is not None:
            self.next_pid_check = now + self._jitter(self.cfg.poll_interval)
        if pid_alive is False:
            # the main process is gone: ask systemd what happened right away
            self.next_unit_poll = now
        if probe is not None:
            step, outcome = probe
            if step == 'connect' and outcome.kind == OK and port_holder is not None:
                # a 200 from a port proves nothing when another process (an old server) holds it
                outcome = foreign_connect(outcome, self.port, self.cfg.unit, port_holder)
            verdict = self._on_probe(step, outcome, now)
            if verdict:
                return self._end(now, verdict)
        if now >= self.deadline:
            self.failure = Failure('timeout')
            return self._end(now, 'fail')
        if self._stall_on() and now - self.last_activity >= self.cfg.stall_timeout:
            self.failure = Failure('stalled', phase=self.digest.phase, quiet=now - self.last_activity)
            return self._end(now, 'fail')
        return Decision('wait', None, self._delay(now))

    def settle_reads(self):
        """How many more journal reads to try after the end when no cause is known yet: the last lines (a crash's
        traceback, "ready to roll") can reach the journal just after the state change or the answer that ended
        the wait. The driver always reads once; a failure of the unit (it ended: ENDED_REASONS) earns SETTLE_READS
        more, SETTLE_DELAY apart. A server that is still running (a stall, the deadline, answers refused) has no
        last lines on their way: waiting for them would only delay the verdict (0.6 s of a stall's)."""
        if not self.cfg.unit or not self.journal_ok:
            return None
        return SETTLE_READS if self.failure is not None and self.failure.reason in ENDED_REASONS else 0

    def cause_known(self):
        return self.digest.cause()[0] is not None

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
        if self.failure.reason == 'unit_failed' and self.digest.start_limit_hit:
            return 'start_limit'
        return self.failure.reason

    def _stall_on(self):
        return bool(self.cfg.unit) and self.cfg.stall_timeout > 0 and self.journal_ok

    def _end(self, now, action):
        self.ended_at = now
        if action == 'ready':
            self.ready = True
            return Decision('ready', None, 0.0)
        if action == 'error':
            return Decision('error', None, 0.0)
        return Decision('fail', self.failure.reason, 0.0)

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
            self.failure = Failure('unit_inactive', kind='load', load_state=p.load_state)
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
            self.failure = Failure('start_limit')
            return True
        if pending > self.cfg.max_restarts:
            # a restart systemd has scheduled (SubState=auto-restart) counts: it will happen
            self.restarts = pending
            self.failure = Failure('crash_loop', restarts=pending)
            return True
        if p.active_state == 'failed':
            self.failure = Failure('unit_failed', before_wait=first)
            return True
        if p.active_state == 'inactive':
            if self.started or p.result not in ('success', ''):
                self.failure = Failure('unit_inactive', kind='stopped')
                return True
            if self._inactive_since is None:
                self._inactive_since = now
            if now - self._inactive_since >= min(INACTIVE_GRACE, self.cfg.timeout):
                self.failure = Failure('unit_inactive', kind='never_started')
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
                if self.http_bind_failure() is not None:
                    # uvicorn could not bind and the port is not this unit's: SGLang 0.5.23 now polls /model_info
                    # 120 x 1 s and SIGKILLs itself (http_server.py:449-468, :2370); the verdict is known already
                    self.failure = Failure('unit_failed', kind='http_port_in_use', step=step, outcome=o)
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
            self.failure = Failure('rejected', step=step, outcome=o)
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
                self.failure = Failure('bad_response', step=step, outcome=o, count=1)
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
                self.failure = Failure('bad_response', step=step, outcome=o, count=self._bad)
                return 'fail'
        else:
            self._bad = 0
        self._next_probe_soon(now)
        return None

    def http_bind_failure(self):
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
            self.failure = Failure('rejected', kind='model', step='models', served=served,
                                   outcome=o._replace(kind=REJECTED, hint=UNSERVED_MODEL_HINT % ', '.join(served)))
            return 'fail'
        return 'ready'


def _port_of(url):
    parsed = urlparse(url or '')
    try:
        return parsed.port or (443 if parsed.scheme == 'https' else 80)
    except ValueError:
        return None


__all__ = ['Config', 'Decision', 'Failure', 'Plan', 'REASONS', 'WaitMachine']
