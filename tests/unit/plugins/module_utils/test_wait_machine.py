# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The wait state machine, driven by scripted observation timelines on a fake clock (nothing sleeps)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import random

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.wait import probe as P
from ansible_collections.llmops.sglang.plugins.module_utils.wait import wait_driver
from ansible_collections.llmops.sglang.plugins.module_utils.wait import wait_report as R
from ansible_collections.llmops.sglang.plugins.module_utils.host.systemd_props import JournalEntry, UnitProps
from ansible_collections.llmops.sglang.plugins.module_utils.formats import fmt_duration
from ansible_collections.llmops.sglang.plugins.module_utils.wait.wait_machine import (
    BAD_RESPONSE_LIMIT, ENDED_REASONS, INACTIVE_GRACE, JITTER, REASONS, SETTLE_DELAY, SETTLE_READS, UNIT_QUERY_ATTEMPTS, Config,
    Failure, WaitMachine,
)

UNIT = 'sglang-k26.service'
URL = 'http://127.0.0.1:30001'
MONO0 = 5000.0          # monotonic clock at the start of the wait
WALL0 = 1780151760.0    # wall clock at the start of the wait


def cfg(**kw):
    base = dict(timeout=1800.0, request_timeout=30.0, stall_timeout=900.0, max_restarts=0, poll_interval=0.5,
                max_poll_interval=10.0, probe='chat', unit=UNIT, url=URL, model=None)
    base.update(kw)
    return Config(**base)


def props(active='activating', sub='start', result='success', n=0, pid=4242, inv='inv-1', code='', status=0, load='loaded', job=''):
    return UnitProps(name=UNIT, load_state=load, active_state=active, sub_state=sub, result=result, n_restarts=n,
                     exec_main_status=status, exec_main_code=code, main_pid=pid, invocation_id=inv,
                     exec_main_start_monotonic_us=0, control_group='/system.slice/' + UNIT, job=job)


def line(t, text, inv='inv-1', manager=False):
    return (t, JournalEntry(text, 'c%s' % t, int((WALL0 + t) * 1e6), 0, inv, manager))


def outcome(kind, status=None, detail='', value=None, latency=0.05):
    return P.Outcome(kind, status, detail or kind, value, latency)


REFUSED = outcome(P.REFUSED)
CONNECTED = outcome(P.OK, detail='port open', latency=0.001)
MODELS = outcome(P.OK, 200, 'models kimi-k2.6', ['kimi-k2.6'])
READY = outcome(P.OK, 200, 'HTTP 200 with a generated token', latency=0.41)
UNAVAILABLE = outcome(P.WAIT, 503, 'HTTP 503: starting')


class FakeClock(object):
    """The driver's clock: sleeping moves time on at once (a zero sleep by a millisecond, so a bug cannot spin)."""

    def __init__(self, max_sleeps=200000):
        self.now = MONO0
        self.sleeps = []
        self.max_sleeps = max_sleeps

    def monotonic(self):
        return self.now

    def time(self):
        return WALL0 + (self.now - MONO0)

    def sleep(self, seconds):
        assert seconds >= 0
        self.sleeps.append(seconds)
        if len(self.sleeps) > self.max_sleeps:
            raise AssertionError('the machine never decided')
        self.now += max(seconds, 1e-3)


class FakeHost(object):
    """What a host shows at each moment of a scripted timeline, through the Host adapter's interface."""

    nvidia_smi = None
    systemctl = '/usr/bin/systemctl'
    journal_warning = None

    def __init__(self, sim):
        self.sim = sim

    def show(self):
        sim = self.sim
        t = sim.t()
        sim.unit_polls.append(t)
        if len(sim.unit_polls) - 1 in sim.show_errors:
            return None, 'Failed to connect to bus: No such file or directory'
        return sim.props_at(t), None

    def first_journal(self, props, since, mono_now, wall_now):
        assert mono_now == self.sim.clock.now and wall_now == self.sim.clock.time()
        return self.next_journal()

    def next_journal(self):
        sim = self.sim
        sim.journal_reads.append(sim.t())
        if sim.machine.ended_at is not None:
            sim.settle_reads += 1
        new = [e for (lt, e) in sim.journal[sim.read:] if lt <= sim.t()]
        sim.read += len(new)
        return new

    def pid_alive(self, pid):
        self.sim.pid_checks += 1
        cur = self.sim.props_at(self.sim.t())
        return cur is not None and cur.main_pid == pid and pid > 0

    def port_owner(self, port, props):
        assert port == 30001 and props is not None
        self.sim.owner_checks += 1
        return self.sim.owner

    def port_holder(self):
        return 'held by pid 999: python3 -m sglang.launch_server --port 30001'

    def gpus(self):
        return []


class FakeHttp(object):
    """The endpoint's answers from sim.probe(t, step); a timed-out request takes its whole timeout."""

    port = 30001

    def __init__(self, sim):
        self.sim = sim
        self.closed = False

    def connect(self, timeout):
        return self._answer('connect', timeout)

    def request(self, step, model, timeout):
        return self._answer(step, timeout)

    def _answer(self, step, timeout):
        sim = self.sim
        o = sim.probe(sim.t(), step)
        if o.kind == P.TIMEOUT:
            o = o._replace(latency=timeout)
        sim.probes.append((sim.t(), step, timeout))
        sim.clock.now += o.latency or 0
        return o

    def close(self):
        self.closed = True


class Sim(object):
    """Runs wait_driver.watch, the loop production runs, on fake adapters and a fake clock.

    unit: [(t, UnitProps)] (each valid from t on); journal: [(t, JournalEntry)] (logged at t);
    probe(t, step) -> Outcome; owner: what port_owner answers (None: cannot tell); show_errors: the indexes of
    the `systemctl show` calls that fail. Times are seconds since the start of the wait.
    """

    def __init__(self, config, unit=(), journal=(), probe=None, seed=7, owner=None, show_errors=()):
        self.cfg = config
        self.unit = sorted(unit, key=lambda x: x[0])
        self.journal = sorted(journal, key=lambda x: x[0])
        self.probe = probe or (lambda t, step: REFUSED)
        self.seed = seed
        self.owner = owner
        self.show_errors = set(show_errors)
        self.unit_polls = []
        self.journal_reads = []
        self.probes = []
        self.pid_checks = 0
        self.owner_checks = 0
        self.settle_reads = 0
        self.read = 0
        self.clock = FakeClock()
        self.http = FakeHttp(self)
        self.host = FakeHost(self)
        self.machine = None

    def t(self):
        return self.clock.now - MONO0

    def props_at(self, t):
        current = None
        for start, p in self.unit:
            if start <= t:
                current = p
        return current

    def run(self, phase_file=None, warn=None):
        m = self.machine = WaitMachine(self.cfg, self.clock.now, WALL0, rng=random.Random(self.seed))
        d, dummy = wait_driver.watch(m, self.host, self.http, self.clock, phase_file=phase_file,
                                     warn=warn or wait_driver._no_warning)
        assert self.http.closed
        return d, m, m.ended_at - MONO0


def steps_of(sim):
    return [step for (at, step, timeout) in sim.probes]


def loading_journal(crash_at=None):
    lines = [
        line(0.2, '[2026-05-30 14:36:02] server_args=ServerArgs(model_path=/root/models/Kimi-K2.6, tp_size=8)'),
        line(2, '[2026-05-30 14:36:10 TP0] Init torch distributed begin.'),
        line(6, '[2026-05-30 14:36:15 TP0] Load weight begin. avail mem=177.20 GB'),
        line(40, '[2026-05-30 14:39:01 TP0] Load weight end. elapsed=165.90 s, avail mem=103.12 GB'),
        line(42, '[2026-05-30 14:39:05 TP0] KV Cache is allocated. #tokens: 1207680, KV size: 78.98 GB'),
        line(45, '[2026-05-30 14:39:06 TP0] Capture cuda graph begin. This can take up to several minutes.'),
    ]
    if crash_at is None:
        lines += [
            line(58, '[2026-05-30 14:40:02 TP0] Capture cuda graph end. Time elapsed: 56.12 s.'),
            line(59, 'INFO:     Uvicorn running on http://0.0.0.0:30001 (Press CTRL+C to quit)'),
            line(60, '[2026-05-30 14:40:04] INFO:     127.0.0.1:53512 - "GET /model_info HTTP/1.1" 200 OK'),
            line(64.8, '[2026-05-30 14:40:05] The server is fired up and ready to roll!'),
        ]
    else:
        lines += [
            line(crash_at - 0.2, '/tmp/tmpq3k1x9zd/cuda_utils.c:6:10: fatal error: Python.h: No such file or directory'),
            line(crash_at - 0.1, '[2026-05-30 14:39:28 TP1] Scheduler hit an exception: Traceback (most recent call last):'),
            line(crash_at - 0.1, '  File "/x/triton/runtime/build.py", line 48, in _build'),
            line(crash_at - 0.1, "subprocess.CalledProcessError: Command '['/usr/bin/gcc']' returned non-zero exit status 1."),
            line(crash_at, '[2026-05-30 14:39:28] Received sigquit from a child process. It usually means the child failed.'),
            line(crash_at, 'sglang-k26.service: Main process exited, code=killed, status=9/KILL', manager=True),
        ]
    return lines


def server_probe(up_at=60.0, ready_at=65.0):
    def probe(t, step):
        if t < up_at:
            return REFUSED
        if step == 'connect':
            return CONNECTED
        if step == 'models':
            return MODELS
        return READY if t >= ready_at else UNAVAILABLE
    return probe


def test_reasons_vocabulary():
    assert REASONS == ('unit_failed', 'unit_inactive', 'crash_loop', 'start_limit', 'stalled', 'timeout', 'rejected', 'bad_response')


def test_ready_within_a_poll_of_the_server_answering():
    sim = Sim(cfg(), unit=[(0, props())], journal=loading_journal(), probe=server_probe())
    d, m, t = sim.run()
    assert d.action == 'ready'
    assert 65.0 <= t <= 65.0 + 0.5 * (1 + JITTER) + 0.5
    res = R.result(m)
    assert res['ready'] and res['reason'] is None and res['hint'] is None and res['signature'] is None
    assert [p['name'] for p in res['phases']] == ['init', 'weights', 'kv_cache', 'cuda_graph', 'http_up', 'warmup', 'ready']
    assert [p['at'] for p in res['phases']][:4] == [2.0, 6.0, 40.0, 45.0]
    # the journal's "ready to roll" line or, if the probe saw it first, the probe marks readiness
    assert res['phases'][-1]['source'] in ('journal', 'probe')
    assert 64.8 <= res['phases'][-1]['at'] <= t
    assert res['probe']['status'] == 200 and res['probe']['latency'] == 0.41 and res['probe']['model'] == 'kimi-k2.6'
    assert res['journal'] == []
    assert 'ready after 1m0' in res['msg']
    # discovery ran once, then the real completion
    steps = steps_of(sim)
    assert steps.count('models') == 1 and 'chat' in steps


def test_polling_stays_cheap_during_a_long_load():
    """A 20-minute load: full unit polls back off to the cap, cheap checks carry the rest."""
    journal = [line(float(t), '[2026-05-30 14:36:15 TP0] Load weight begin. shard %d' % t) for t in range(0, 1200, 30)]
    sim = Sim(cfg(timeout=1200.0), unit=[(0, props())], journal=journal)
    d, m, t = sim.run()
    assert d.reason == 'timeout' and 1200.0 <= t < 1201.0
    per_minute = len(sim.unit_polls) / 20.0
    assert per_minute <= 60.0 / 10.0 * 1.3 + 1, 'systemctl+journalctl at most about every max_poll_interval'
    gaps = [b - a for a, b in zip(sim.unit_polls, sim.unit_polls[1:])]
    assert max(gaps) <= 10.0 * (1 + JITTER) + 0.6
    assert gaps[-1] > 5.0
    # cheap checks (PID, connect) every poll_interval
    assert sim.pid_checks > 1000
    assert all(step == 'connect' for step in steps_of(sim))


def test_crash_during_load_ends_within_a_poll_with_cause():
    unit = [(0, props()), (200, props(active='failed', sub='failed', result='signal', pid=0, code='killed', status=9))]
    sim = Sim(cfg(), unit=unit, journal=loading_journal(crash_at=199.9))
    d, m, t = sim.run()
    assert d.action == 'fail' and d.reason == 'unit_failed'
    assert 200.0 <= t <= 200.0 + 0.5 * (1 + JITTER) + 0.01, 'the vanished main PID triggers an immediate unit poll'
    res = R.result(m)
    assert res['msg'] == ("sglang-k26.service failed during 'capturing CUDA graphs' after 3m20s: "
                          "fatal error: Python.h: No such file or directory")
    assert 'python3-dev' in res['hint'] and res['signature'] == 'python_headers'
    assert res['unit']['active_state'] == 'failed' and res['unit']['exec_main_status'] == 9
    assert "subprocess.CalledProcessError: Command '['/usr/bin/gcc']' returned non-zero exit status 1." in res['journal']
    assert res['journal'][-1] == 'sglang-k26.service: Main process exited, code=killed, status=9/KILL'


def test_crash_loop_fails_at_the_first_restart():
    unit = [(0, props()),
            (50, props(sub='auto-restart', result='signal', pid=0, code='killed', status=9)),
            (50.1, props(n=1, pid=5151, inv='inv-2'))]
    journal = loading_journal(crash_at=49.9)
    sim = Sim(cfg(), unit=unit, journal=journal)
    d, m, t = sim.run()
    assert d.reason == 'crash_loop'
    assert 50.0 <= t <= 51.0
    res = R.result(m)
    assert 'crash-looping: restart 1 during the wait is more than max_restarts=0' in res['msg']
    assert res['restarts'] == 1, 'the restart systemd scheduled counts'
    assert 'Python.h' in res['msg'] and 'python3-dev' in res['hint']


def test_crash_loop_tolerates_max_restarts():
    unit = [(0, props()),
            (50, props(n=1, pid=5151, inv='inv-2')),
            (100, props(n=2, pid=6161, inv='inv-3'))]
    sim = Sim(cfg(max_restarts=1), unit=unit)
    d, m, t = sim.run()
    assert d.reason == 'crash_loop' and 100.0 <= t <= 101.0
    assert m.restarts == 2


def test_restart_counter_reset_by_a_manual_start_is_not_lost():
    unit = [(0, props(n=3)), (20, props(n=4, pid=2, inv='b')), (40, props(n=0, pid=3, inv='c')), (60, props(n=1, pid=4, inv='d'))]
    sim = Sim(cfg(max_restarts=5, timeout=70.0), unit=unit)
    d, m, t = sim.run()
    assert d.reason == 'timeout'
    assert m.restarts == 2


def test_start_limit():
    unit = [(0, props()), (10, props(active='failed', sub='failed', result='start-limit-hit', pid=0))]
    d, m, t = Sim(cfg(max_restarts=10), unit=unit).run()
    assert d.reason == 'start_limit' and 10 <= t <= 11
    assert 'start limit' in R.result(m)['msg']


def test_start_limit_as_systemd_252_reports_it():
    # 252 keeps the last run's Result (exit-code) and logs "Start request repeated too quickly."
    unit = [(0, props(active='failed', sub='failed', result='exit-code', pid=0, code='exited', status=1, n=3))]
    journal = [line(0, 'sglang-k26.service: Start request repeated too quickly.', manager=True),
               line(0, 'Failed to start sglang-k26.service.', manager=True)]
    d, m, t = Sim(cfg(max_restarts=10), unit=unit, journal=journal).run()
    res = R.result(m)
    assert res['reason'] == 'start_limit'
    assert 'reset-failed' in res['msg'] and 'reset-failed' in res['hint']


def test_inactive_after_start():
    unit = [(0, props()), (30, props(active='inactive', sub='dead', pid=0, code='exited', status=0))]
    d, m, t = Sim(cfg(), unit=unit).run()
    assert d.reason == 'unit_inactive' and 30 <= t <= 31
    assert 'stopped' in R.result(m)['msg']


def test_never_started_unit_fails_fast():
    unit = [(0, props(active='inactive', sub='dead', pid=0, inv=''))]
    d, m, t = Sim(cfg(), unit=unit).run()
    assert d.reason == 'unit_inactive'
    assert INACTIVE_GRACE <= t <= INACTIVE_GRACE + 2
    assert 'is not running' in R.result(m)['msg']


def test_inactive_with_a_failed_result_fails_at_once():
    unit = [(0, props(active='inactive', sub='dead', result='exit-code', pid=0, code='exited', status=1))]
    d, m, t = Sim(cfg(), unit=unit).run()
    assert d.reason == 'unit_inactive' and t < 0.1


def test_a_queued_start_job_is_not_terminal():
    # failed from an earlier run, `systemctl restart --no-block` queued: systemd shows Job=N until it runs
    unit = [(0, props(active='failed', sub='failed', result='exit-code', pid=0, job='2042')),
            (3, props(pid=77, inv='inv-2')),
            (30, props(active='failed', sub='failed', result='signal', pid=0, inv='inv-2', code='killed', status=9))]
    d, m, t = Sim(cfg(), unit=unit).run()
    assert d.reason == 'unit_failed' and 30 <= t <= 31
    assert 'had already failed' not in R.result(m)['msg']


def test_failed_before_the_wait():
    unit = [(0, props(active='failed', sub='failed', result='exit-code', pid=0, code='exited', status=2))]
    d, m, t = Sim(cfg(), unit=unit).run()
    assert d.reason == 'unit_failed' and t < 0.1
    assert 'had already failed when the wait began' in R.result(m)['msg']


def test_unit_not_found():
    d, m, t = Sim(cfg(), unit=[(0, props(active='inactive', load='not-found', pid=0, inv=''))]).run()
    assert d.reason == 'unit_inactive' and 'LoadState=not-found' in R.result(m)['msg']


def test_stall_names_the_phase():
    journal = loading_journal()[:3]   # init, then "Load weight begin" at 6 s, then silence
    d, m, t = Sim(cfg(stall_timeout=300.0), unit=[(0, props())], journal=journal).run()
    assert d.reason == 'stalled'
    # counted from when the last line was logged (6 s), judged right at the deadline, not a backoff poll later
    assert 306.0 <= t <= 306.0 + 0.6
    res = R.result(m)
    assert "stalled during 'loading weights'" in res['msg'] and 'no new journal line' in res['msg']
    assert 'stall_timeout' in res['hint']
    assert res['journal'], 'without a traceback the last lines show where it stopped'


def test_stall_detection_off():
    journal = loading_journal()[:3]
    d, m, t = Sim(cfg(stall_timeout=0.0, timeout=2000.0), unit=[(0, props())], journal=journal).run()
    assert d.reason == 'timeout'


def test_unreadable_journal_disables_stall_detection():
    m = WaitMachine(cfg(stall_timeout=5.0, timeout=20.0), MONO0, WALL0, rng=random.Random(1))
    m.journal_unreadable()
    d = m.step(MONO0 + 10, unit=props())
    assert d.action == 'wait'


def test_timeout_message_and_clipped_request_timeout():
    sim = Sim(cfg(timeout=100.0), unit=[(0, props())], journal=loading_journal()[:6], probe=server_probe(up_at=50, ready_at=10 ** 9))
    d, m, t = sim.run()
    assert d.reason == 'timeout' and 100.0 <= t < 101.0
    res = R.result(m)
    assert "not ready after 1m40s: last phase 'capturing CUDA graphs'" in res['msg']
    assert 'HTTP 503' in res['msg']
    for (pt, step, rt) in sim.probes:
        assert rt <= 100.0 - pt + 1e-9
        assert rt <= (2.0 if step == 'connect' else 30.0)


def test_probe_timeouts_are_counted_and_waited_through():
    calls = []

    def probe(t, step):
        if step == 'connect':
            return CONNECTED
        calls.append(t)
        return outcome(P.TIMEOUT) if len(calls) <= 2 else READY
    d, m, t = Sim(cfg(model='kimi', request_timeout=30.0), unit=[(0, props())], probe=probe).run()
    assert d.action == 'ready'
    assert R.result(m)['probe']['timeouts'] == 2
    assert t >= 60.0


def test_rejected_fails_at_once_with_the_server_words():
    def probe(t, step):
        if step == 'connect':
            return CONNECTED
        return P.Outcome(P.REJECTED, 401, 'HTTP 401: Invalid API Key', None, 0.01, P.REJECT_HINTS[401])
    d, m, t = Sim(cfg(model='kimi'), unit=[(0, props())], probe=probe).run()
    assert d.reason == 'rejected' and t < 0.1
    res = R.result(m)
    assert res['msg'] == 'http://127.0.0.1:30001/v1/chat/completions rejected the probe: HTTP 401: Invalid API Key'
    assert 'api_key' in res['hint'] and res['probe']['status'] == 401


def test_bad_response_after_repeated_invalid_bodies():
    def probe(t, step):
        if step == 'connect':
            return CONNECTED
        return outcome(P.BAD, 200, 'the body has no choices')
    d, m, t = Sim(cfg(model='kimi'), unit=[(0, props())], probe=probe).run()
    assert d.reason == 'bad_response'
    assert '(%d times in a row)' % BAD_RESPONSE_LIMIT in R.result(m)['msg']


def test_model_discovery_falls_back_to_model_info():
    def probe(t, step):
        return {'connect': CONNECTED,
                'models': outcome(P.REJECTED, 404, 'HTTP 404: Not Found'),
                'model_info': outcome(P.OK, 200, 'model m', 'served-name'),
                'chat': READY}[step]
    sim = Sim(cfg(unit=None), probe=probe)
    d, m, t = sim.run()
    assert d.action == 'ready' and m.model == 'served-name'
    assert steps_of(sim) == ['connect', 'models', 'model_info', 'chat']


def test_a_model_the_server_does_not_serve_fails_naming_the_served_ids():
    """SGLang 0.5.23 answers a completion for any model name with 200: only the served ids tell the truth."""
    served = outcome(P.OK, 200, 'models kimi-k2.6, lora-a', ['kimi-k2.6', 'lora-a'])
    probe = {'connect': CONNECTED, 'models': served, 'chat': READY}
    sim = Sim(cfg(model='kimi-k2'), unit=[(0, props())], probe=lambda t, step: probe[step])
    d, m, t = sim.run()
    assert d.action == 'fail' and d.reason == 'rejected'
    res = R.result(m)
    assert res['msg'] == "%s does not serve model 'kimi-k2': GET /v1/models lists kimi-k2.6, lora-a" % URL
    assert 'kimi-k2.6, lora-a' in res['hint'] and 'sglang_served_model_name' in res['hint']
    # The completion (which named the wrong model) answered 200; the served ids then decided.
    assert steps_of(sim) == ['connect', 'chat', 'models']
    # The served name, or one of the adapters, passes the check.
    for name in ('kimi-k2.6', 'lora-a'):
        sim = Sim(cfg(model=name), unit=[(0, props())], probe=lambda t, step: probe[step])
        d, m, t = sim.run()
        assert d.action == 'ready' and m.model == name and steps_of(sim) == ['connect', 'chat', 'models']
        assert R.result(m)['probe']['status'] == 200 and 'generated token' in R.result(m)['probe']['detail']
    # A server without /v1/models (404) is not judged: the completion was the proof.
    probe['models'] = outcome(P.REJECTED, 404, 'HTTP 404: Not Found')
    d, m, t = Sim(cfg(model='kimi-k2'), unit=[(0, props())], probe=lambda t, step: probe[step]).run()
    assert d.action == 'ready'


def test_server_going_away_returns_to_connect_checks():
    def probe(t, step):
        # up but starting until 5 s, gone (restarting) until 20 s, then ready
        if 5 <= t <= 20:
            return REFUSED
        if step == 'connect':
            return CONNECTED
        return UNAVAILABLE if t < 5 else READY
    sim = Sim(cfg(unit=None, model='m'), probe=probe)
    d, m, t = sim.run()
    assert d.action == 'ready' and t > 20
    gone = [step for (at, step, dummy) in sim.probes if 5 <= at <= 20]
    assert gone.count('chat') <= 1, 'a refused HTTP probe falls back to the cheap connect check'
    assert gone.count('connect') > 10


def test_endpoint_only_health_probe():
    sim = Sim(cfg(unit=None, probe='health_generate'), probe=server_probe(up_at=3, ready_at=7))
    d, m, t = sim.run()
    assert d.action == 'ready' and 7 <= t <= 8
    assert R.result(m)['unit']['active_state'] is None
    assert 'models' not in steps_of(sim)


def test_no_probe_while_the_unit_waits_to_restart():
    unit = [(0, props(sub='auto-restart', result='exit-code', pid=0))]
    sim = Sim(cfg(max_restarts=3, timeout=20.0), unit=unit, probe=server_probe(up_at=0, ready_at=0))
    d, m, t = sim.run()
    assert d.reason == 'timeout'
    # only the very first round probes, before systemd's answer is known
    assert [at for (at, step, dummy) in sim.probes if at > 0] == []


def test_jitter_keeps_a_fleet_out_of_lockstep():
    delays = []
    for seed in range(5):
        m = WaitMachine(cfg(unit=None), MONO0, WALL0, rng=random.Random(seed))
        m.plan(MONO0)
        delays.append(m.step(MONO0, probe=('connect', REFUSED)).delay)
    assert len(set(delays)) == 5
    assert all(0.5 * (1 - JITTER) <= x <= 0.5 * (1 + JITTER) for x in delays)


class FakePhaseFile(object):
    """The phase file's calls, with the fake clock's time of each; fails from the ``fail_at``-th call on."""

    path = '/var/lib/prometheus/node-exporter/sglang-k26.phase.prom'

    def __init__(self, sim, fail_at=None):
        self.sim = sim
        self.calls = []
        self.fail_at = fail_at

    def _call(self, *call):
        self.calls.append((round(self.sim.t(), 1),) + call)
        if self.fail_at is not None and len(self.calls) >= self.fail_at:
            raise OSError('read-only file system')

    def show(self, phase, started):
        self._call('show', phase, started)

    def clear(self):
        self._call('clear')


def test_the_phase_file_shows_each_phase_once_from_when_it_began_and_is_cleared_at_both_ends():
    sim = Sim(cfg(), unit=[(0, props())], journal=loading_journal(), probe=server_probe())
    phase_file = FakePhaseFile(sim)
    d, m, t = sim.run(phase_file=phase_file)
    assert d.action == 'ready'
    calls = phase_file.calls
    assert calls[0] == (0.0, 'clear') and calls[-1][1] == 'clear' and calls[-1][0] == round(t, 1)
    shown = [call[2:] for call in calls if call[1] == 'show']
    # the phase at each poll, once: phases that began between two polls are not shown (kv_cache 5 s before
    # cuda_graph); each with the wall time it began (its journal line, or the probe's answer): WALL0 + its offset
    phases = [(p['name'], round(WALL0 + p['at'], 1)) for p in R.result(m)['phases']]
    assert len(set(shown)) == len(shown) and [p for p in phases if p in shown] == shown[:-1]
    assert shown[-1][0] == phases[-1][0] == 'ready' and abs(shown[-1][1] - phases[-1][1]) <= 1.0
    assert shown[:2] == [('init', WALL0 + 2.0), ('weights', WALL0 + 6.0)] and shown[-1][0] == 'ready' and len(shown) >= 4
    # written when the phase was seen, not long after: within a poll of its journal line
    weights_written = [call[0] for call in calls if call[1:3] == ('show', 'weights')][0]
    assert 6.0 <= weights_written <= 6.0 + 10.0


def test_a_phase_file_that_cannot_be_written_is_a_warning_once_and_the_wait_goes_on():
    sim = Sim(cfg(), unit=[(0, props())], journal=loading_journal(), probe=server_probe())
    warnings = []
    phase_file = FakePhaseFile(sim, fail_at=2)
    d, m, t = sim.run(phase_file=phase_file, warn=warnings.append)
    assert d.action == 'ready'
    assert [call[1] for call in phase_file.calls] == ['clear', 'show']  # nothing tried after the failure
    assert warnings == ['could not write the phase file %s: read-only file system' % FakePhaseFile.path]


def test_progress_snapshot():
    sim = Sim(cfg(timeout=100.0), unit=[(0, props())], journal=loading_journal()[:6])
    d, m, t = sim.run()
    snap = R.progress_status(m, MONO0 + t)
    assert snap['phase'] == 'cuda_graph' and snap['phase_label'] == 'capturing CUDA graphs' and snap['phase_at'] == 45.0
    assert snap['done'] and snap['reason'] == 'timeout' and not snap['ready']
    assert snap['last_line'].startswith('[2026-05-30 14:39:06 TP0] Capture cuda graph begin')
    assert snap['active_state'] == 'activating' and snap['elapsed'] == round(t, 1)


@pytest.mark.parametrize('secs,text', [(0, '0s'), (59.4, '59s'), (192, '3m12s'), (3725, '1h02m')])
def test_fmt_duration(secs, text):
    assert fmt_duration(secs) == text


def test_requests_timing_out_after_the_ready_line_are_not_still_starting():
    """A zombie: the server logged ready, /v1/models answers, completions time out until the deadline."""

    def probe(t, step):
        if step == 'connect':
            return CONNECTED
        return outcome(P.TIMEOUT)
    d, m, t = Sim(cfg(model='kimi', timeout=120.0, request_timeout=10.0), unit=[(0, props())],
                  journal=loading_journal(), probe=probe).run()
    assert d.reason == 'timeout'
    assert R.result(m)['hint'] == R.SILENT_AFTER_READY_HINT


# ------------------------------------------------ decisions the module used to make on its own
def test_a_third_failed_systemctl_show_in_a_row_ends_the_wait_without_a_reason():
    """Two failed `systemctl show` calls are retried a second apart; the third in a row ends the wait (the module
    cannot watch the unit: reason null, like bad options)."""
    sim = Sim(cfg(), unit=[(0, props())], show_errors=(0, 1, 2))
    d, m, t = sim.run()
    assert d.action == 'error' and d.reason is None
    assert len(sim.unit_polls) == UNIT_QUERY_ATTEMPTS
    gaps = [b - a for a, b in zip(sim.unit_polls, sim.unit_polls[1:])]
    assert all(0.99 <= gap <= 1.2 for gap in gaps), gaps
    res = R.result(m)
    assert res['ready'] is False and res['reason'] is None
    assert res['msg'] == 'systemctl show %s failed: Failed to connect to bus: No such file or directory' % UNIT


def test_failed_systemctl_shows_that_are_not_in_a_row_do_not_end_the_wait():
    sim = Sim(cfg(), unit=[(0, props())], journal=loading_journal(), probe=server_probe(), show_errors=(0, 1, 3, 4))
    d, m, t = sim.run()
    assert d.action == 'ready', R.result(m)['msg']
    assert len(sim.unit_polls) > 5


def test_an_open_port_held_by_another_process_is_not_the_server():
    """The unit's port answers, but no process of the unit listens on it: never probed over HTTP, and the hint
    names who holds it at the deadline."""
    sim = Sim(cfg(timeout=30.0), unit=[(0, props())], probe=server_probe(up_at=0, ready_at=0), owner=False)
    d, m, t = sim.run()
    assert d.reason == 'timeout'
    assert set(steps_of(sim)) == {'connect'}, 'nothing was asked of the foreign server'
    assert sim.owner_checks > 10
    res = R.result(m)
    assert 'port 30001 accepts connections, but no process of %s listens on it (held by pid 999: ' % UNIT in res['msg']
    assert res['hint'].startswith('Another process holds port 30001 (held by pid 999: ')
    assert res['probe']['status'] == P.FOREIGN


def test_a_busy_port_with_the_bind_error_in_the_journal_fails_at_once():
    bind = line(3, "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30001): "
                   "address already in use")
    sim = Sim(cfg(), unit=[(0, props(active='active', sub='running'))], journal=loading_journal()[:3] + [bind],
              probe=server_probe(up_at=0, ready_at=0), owner=False)
    d, m, t = sim.run()
    assert d.reason == 'unit_failed' and m.failure.kind == 'http_port_in_use'
    assert t < 10.0 * (1 + JITTER) + 1, 'within a unit poll of the bind error, not 2 minutes later'
    res = R.result(m)
    assert 'could not bind its port' in res['msg'] and 'held by pid 999' in res['msg']
    assert res['hint'].startswith('Another process holds port 30001')


@pytest.mark.parametrize('owner', [True, None])
def test_a_port_the_unit_holds_or_that_cannot_be_judged_is_probed(owner):
    sim = Sim(cfg(), unit=[(0, props())], journal=loading_journal(), probe=server_probe(), owner=owner)
    d, m, t = sim.run()
    assert d.action == 'ready' and 'chat' in steps_of(sim)


def test_a_crash_whose_traceback_arrives_late_is_explained_by_the_settle_reads():
    """systemd reports the failure before the journal holds the crash's last lines: the driver reads again."""
    unit = [(0, props()), (200, props(active='failed', sub='failed', result='signal', pid=0, code='killed', status=9))]
    late = [(200.55, e) for (dummy, e) in loading_journal(crash_at=199.9)[-6:]]
    sim = Sim(cfg(), unit=unit, journal=loading_journal()[:6] + late)
    d, m, t = sim.run()
    assert d.reason == 'unit_failed' and t < 200.5
    assert 2 <= sim.settle_reads <= SETTLE_READS + 1
    assert sim.clock.sleeps[-1] == SETTLE_DELAY
    res = R.result(m)
    assert res['msg'].endswith(': fatal error: Python.h: No such file or directory'), res['msg']
    assert 'python3-dev' in res['hint']


def test_settle_reads_stop_after_their_count_when_no_cause_comes():
    unit = [(0, props()), (20, props(active='failed', sub='failed', result='exit-code', pid=0, code='exited', status=1))]
    sim = Sim(cfg(), unit=unit, journal=loading_journal()[:3])
    d, m, t = sim.run()
    assert d.reason == 'unit_failed'
    assert sim.settle_reads == SETTLE_READS + 1
    assert sim.clock.sleeps[-SETTLE_READS:] == [SETTLE_DELAY] * SETTLE_READS
    assert 'no known error line' in R.result(m)['msg']


def test_a_stall_is_reported_without_waiting_for_last_lines_that_are_not_coming():
    """A stalled server still runs: the driver reads the journal once more, at once, and does not sleep for the
    settle reads a dead unit earns (a stall verdict must come within stall_timeout + 1 s)."""
    journal = loading_journal()[:3]
    sim = Sim(cfg(stall_timeout=15.0), unit=[(0, props())], journal=journal)
    d, m, t = sim.run()
    assert d.reason == 'stalled' and m.settle_reads() == 0
    assert sim.settle_reads == 1 and SETTLE_DELAY not in sim.clock.sleeps[-2:], sim.clock.sleeps[-4:]
    # a unit that died still earns them (test_settle_reads_stop_after_their_count_when_no_cause_comes)
    assert set(ENDED_REASONS) < set(REASONS) and 'stalled' not in ENDED_REASONS


def test_a_ready_server_gets_one_more_journal_read_for_its_ready_line():
    journal = loading_journal()
    journal[-1] = (65.3, journal[-1][1])   # "ready to roll" (stamped 64.8) reaches the journal while the answer comes
    sim = Sim(cfg(), unit=[(0, props())], journal=journal, probe=server_probe(ready_at=65.0))
    d, m, t = sim.run()
    assert d.action == 'ready' and t >= 65.3
    assert sim.settle_reads == 1
    assert max(sim.journal_reads[:-1]) < 65.3, 'only the read after the end could see the line'
    assert R.phases(m)[-1] == {'name': 'ready', 'label': 'ready', 'at': 64.8, 'run': 0, 'source': 'journal'}


def test_an_endpoint_only_wait_reads_no_journal():
    sim = Sim(cfg(unit=None, probe='health'), probe=server_probe(up_at=1, ready_at=1))
    d, m, t = sim.run()
    assert d.action == 'ready' and sim.journal_reads == [] and sim.unit_polls == []


# ------------------------------------------------ deciding apart from reporting
def state(m):
    snapshot = dict(vars(m))
    snapshot['digest'] = dict((k, repr(v)) for k, v in vars(m.digest).items())
    snapshot.pop('rng')
    return repr(sorted(snapshot.items()))


def test_plan_and_the_report_leave_the_machine_as_it_was():
    sim = Sim(cfg(), unit=[(0, props())], journal=loading_journal(), probe=server_probe())
    d, m, t = sim.run()
    before = state(m)
    rng_before = m.rng.getstate()
    for dummy in range(3):
        m.plan(m.ended_at + 1.0)
    R.result(m)
    R.progress_status(m, m.ended_at)
    R.conclude(m)
    R.check_result(m, None, None, 'invocation', URL)
    assert state(m) == before and m.rng.getstate() == rng_before
    assert [p['name'] for p in R.phases(m)][-1] == 'ready'


def test_the_failure_is_a_typed_record():
    unit = [(0, props()), (50, props(sub='auto-restart', result='signal', pid=0, code='killed', status=9))]
    d, m, t = Sim(cfg(), unit=unit).run()
    assert m.failure == Failure('crash_loop', restarts=1)
    assert m.failure.kind is None and m.failure.outcome is None
