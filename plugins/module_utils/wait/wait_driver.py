# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one loop of sglang_wait_ready: asks the machine what to observe, observes it through the adapters, hands
the observations back, sleeps as long as the machine says; then reads the journal's last lines and builds the
result with wait_report.

The module runs it with the real adapters (wait_adapters); the unit tests run the same functions with fake ones
and a fake clock. Every decision is the machine's: this file only moves observations and sleeps.

Adapters: host (show() -> (UnitProps | None, error), first_journal(props, since, mono, wall), next_journal() ->
[JournalEntry] | None, pid_alive(pid), port_owner(port, props) -> True | False | None, port_holder(), gpus(),
nvidia_smi, systemctl, journal_warning); http (port, connect(timeout), request(step, model, timeout) -> Outcome,
close()); progress (write(status)) or None; phase_file (show(phase, started_unix_time), clear()) or None; clock
(monotonic(), time(), sleep(seconds)).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.wait import wait_report
from ansible_collections.llmops.sglang.plugins.module_utils.wait.probe import OK
from ansible_collections.llmops.sglang.plugins.module_utils.wait.wait_machine import SETTLE_DELAY


def _no_warning(msg):
    return None


class PhaseShown(object):
    """The phase file's writes: one at each new phase (wait_report.current_phase), none after a failed one."""

    def __init__(self, phase_file, warn):
        self.file = phase_file
        self.warn = warn
        self.shown = None

    def _do(self, action, *args):
        if self.file is None:
            return
        try:
            getattr(self.file, action)(*args)
        except (IOError, OSError) as exc:
            self.warn('could not write the phase file %s: %s' % (self.file.path, exc))
            self.file = None

    def update(self, machine):
        current = wait_report.current_phase(machine)
        if current is not None and current != self.shown:
            self.shown = current
            self._do('show', *current)

    def clear(self):
        self._do('clear')


def watch(machine, host, http, clock, since='invocation', progress=None, secrets=(), warn=_no_warning, phase_file=None):
    """Run the wait to its end; returns the machine's last Decision (action ready, fail or error) and the progress
    file still in use (None once a write failed: it is not tried again)."""
    pacer = wait_report.ProgressPacer()
    phase = PhaseShown(phase_file, warn)
    phase.clear()  # one a wait killed before its end left behind
    first_poll = True
    try:
        while True:
            now = clock.monotonic()
            plan = machine.plan(now)
            props = unit_error = entries = pid_alive = probe = holder = None
            if plan.poll_unit:
                props, unit_error = host.show()
                if props is not None:
                    unit_error = None
                    if first_poll:
                        entries = host.first_journal(props, since, clock.monotonic(), clock.time())
                        first_poll = False
                    else:
                        entries = host.next_journal()
                    if entries is None:
                        machine.journal_unreadable()
                elif unit_error is None:
                    unit_error = 'no answer'
            elif plan.check_pid:
                pid_alive = host.pid_alive(machine.main_pid)
            if plan.probe_step == 'connect':
                outcome = http.connect(plan.request_timeout)
                known = props or machine.props
                if outcome.kind == OK and known is not None and host.port_owner(http.port, known) is False:
                    holder = host.port_holder()
                probe = ('connect', outcome)
            elif plan.probe_step is not None:
                probe = (plan.probe_step, http.request(plan.probe_step, machine.model, plan.request_timeout))
            now = clock.monotonic()
            decision = machine.step(now, unit=props, unit_error=unit_error, journal=entries, pid_alive=pid_alive,
                                    probe=probe, port_holder=holder)
            phase.update(machine)
            if progress is not None:
                key = wait_report.progress_key(machine)
                if pacer.due(now, key):
                    if host.nvidia_smi and pacer.gpus_due(now, key):
                        pacer.gpus_read(now, host.gpus())
                    pacer.written(now, key)
                    try:
                        progress.write(wait_report.progress_status(machine, now, secrets, pacer.gpus, clock.time()))
                    except (IOError, OSError) as exc:
                        warn('could not write progress_file %s: %s' % (progress.path, exc))
                        progress = None
            if decision.action != 'wait':
                break
            clock.sleep(decision.delay)
        settle(machine, host, clock)
    finally:
        http.close()
        phase.clear()
    return decision, progress


def settle(machine, host, clock):
    """Read the journal's last lines after the end, as many times as the machine asks while no cause is known."""
    reads = machine.settle_reads()
    if reads is None:
        return
    for attempt in range(reads + 1):
        late = host.next_journal()
        if late:
            machine.absorb_journal(late, clock.monotonic())
        if machine.cause_known() or attempt == reads:
            return
        clock.sleep(SETTLE_DELAY)


def finish(machine, host, clock, progress=None, secrets=(), warn=_no_warning):
    """The module's result after watch(): the GPUs now, the last progress status, the journal warning."""
    gpus = host.gpus()
    if progress is not None:
        try:
            progress.write(wait_report.progress_status(machine, machine.ended_at, secrets, gpus, clock.time()))
        except (IOError, OSError) as exc:
            warn('could not write progress_file: %s' % exc)
    if host.journal_warning:
        warn(host.journal_warning)
    return wait_report.result(machine, secrets=secrets, gpus=gpus)


def run(machine, host, http, clock, since='invocation', progress=None, secrets=(), warn=_no_warning, phase_file=None):
    """watch() then finish(): what the module returns."""
    dummy, progress = watch(machine, host, http, clock, since=since, progress=progress, secrets=secrets, warn=warn,
                            phase_file=phase_file)
    return finish(machine, host, clock, progress=progress, secrets=secrets, warn=warn)


def check(machine, host, since, url):
    """Check mode: no wait; what would be watched and the unit's state now."""
    props = note = None
    if machine.cfg.unit and host.systemctl:
        props, note = host.show()
        if props is not None:
            note = None
    return wait_report.check_result(machine, props, note, since, url)
