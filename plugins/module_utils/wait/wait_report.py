# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reporting part of sglang_wait_ready: what a WaitMachine's state says, in the module's result, its message
and hint, and the status it writes to progress_file.

Reads the machine, never changes it: calling any of these at any time leaves the wait as it was. No I/O, no clock
of its own (callers pass `now`).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.formats import fmt_duration
from ansible_collections.llmops.sglang.plugins.module_utils.wait.probe import (
    FOREIGN, MODEL_INFO_PATH, MODELS_PATH, OK, PROBE_PATHS, REFUSED, TIMEOUT, join_url,
)
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_signatures import phase_by_name, phase_label, redact
from ansible_collections.llmops.sglang.plugins.module_utils.host.systemd_props import operator_journal_cmd, unit_summary
from ansible_collections.llmops.sglang.plugins.module_utils.wait.wait_machine import INACTIVE_GRACE

PROGRESS_EVERY = 5.0         # progress_file is rewritten at every change and at least this often
# nvidia-smi costs far more than a poll (the stand-in's 94 ms of CPU on a fleet host, a real one's NVML start on 8 GPUs
# more): at a phase change, else at most this often
PROGRESS_GPU_EVERY = 60.0

START_LIMIT_HINT = ('The unit failed too often in a row (StartLimitBurst within StartLimitIntervalSec): fix the failure the '
                    'journal shows, then run systemctl reset-failed on the unit before starting it again.')
TIMEOUT_HINT = ('The server was still starting: raise timeout if the phases show steady progress, '
                'otherwise read journal and journal_cmd for where it stopped.')
# The server logged its ready line, yet real requests time out: not "still starting". SGLang before 0.5.23 has no
# scheduler watchdog, so a scheduler that died after the warmup leaves an HTTP server that answers /v1/models only.
SILENT_AFTER_READY_HINT = ('The server logged that it is ready but its requests time out: its scheduler may have died while '
                           'the HTTP server lives on (no watchdog before SGLang 0.5.23), or it is overloaded. Check the '
                           'unit\'s processes and journal_cmd, then restart it; raise request_timeout only for a very slow model.')
NO_PHASE_STALL_HINT = 'Nothing that marks a start-up phase was logged: check the unit\'s ExecStart and its first journal lines.'
MODEL_INFO_HINT = 'Set model explicitly (the server\'s --served-model-name).'
BAD_BODY_HINT = 'Check expect and the probe: the server answers HTTP 200 but the body does not pass the check.'


# --------------------------------------------------------------------------- pieces
def target(m):
    return m.cfg.unit or m.cfg.url


def endpoint(m, step=None):
    step = step or m.cfg.probe
    path = {'models': MODELS_PATH, 'model_info': MODEL_INFO_PATH, 'connect': ''}.get(step, PROBE_PATHS.get(step, ''))
    return join_url(m.cfg.url, path)


def probe_state(m):
    """The last probe step in a few words: `port closed (connection refused)`, `URL: HTTP 503: starting`."""
    o = m.last_outcome
    if o is None:
        return 'no probe sent'
    if m.last_step == 'connect':
        if o.kind == OK:
            return 'port open'
        if o.kind in (REFUSED, TIMEOUT):
            return 'port closed (%s)' % o.detail
        return o.detail
    return '%s: %s' % (endpoint(m, m.last_step), o.detail)


def run_age(m, now):
    """How long the current run had been going: from its first journal line when known
    (it may have started before the wait), else since the wait began."""
    started = m.digest.run_started.get(m.digest.run)
    if started is None:
        return m.elapsed(now)
    return m.elapsed(now) - started


def unit_how(m):
    p = m.props
    if p is None:
        return ''
    how = 'Result=%s' % (p.result or '?')
    if p.exec_main_code:
        how += ', main process %s with status %s' % (p.exec_main_code, p.exec_main_status)
    return how


def _end_or(m, now):
    now = m.ended_at if now is None else now
    return m.start if now is None else now


# --------------------------------------------------------------------------- message
def conclude(m, now=None):
    """(msg, hint) of the outcome, computed from everything seen so far."""
    now = _end_or(m, now)
    elapsed = fmt_duration(m.elapsed(now))
    unit = m.cfg.unit
    label = phase_label(m.digest.phase)
    during = "during '%s'" % label if m.digest.phase else 'before any start-up phase'
    if m.ready:
        o = m.ready_outcome
        what = 'probe %s' % m.cfg.probe
        if o is not None and o.latency is not None:
            what += ' answered in %.2fs' % o.latency
        return '%s is ready after %s (%s)' % (target(m), elapsed, what), None
    if m.error is not None:
        return m.error, None
    f = m.failure
    if f is None:
        return 'still waiting after %s' % elapsed, None
    reason = m.reason()
    cause, hint, _sig = m.digest.cause()
    if reason == 'unit_failed' and f.kind == 'http_port_in_use':
        o, bind = f.outcome, m.http_bind_failure()
        held = o.detail if o.kind == FOREIGN else 'no process of %s listens on it' % unit
        msg = ('%s cannot serve: its HTTP server could not bind its port (%s), and %s; SGLang kills itself when '
               'its warmup gives up, about 2 minutes later' % (unit, bind.summary if bind else cause, held))
        return msg, o.hint if o.kind == FOREIGN and o.hint else hint
    if reason == 'unit_failed':
        if f.before_wait:
            msg = '%s had already failed when the wait began (%s)' % (unit, unit_how(m))
        else:
            msg = '%s failed %s after %s' % (unit, during, fmt_duration(run_age(m, now)))
        msg += ': %s' % cause if cause else ' (%s); no known error line, see journal_cmd' % unit_how(m)
        return msg, hint
    if reason == 'crash_loop':
        msg = '%s is crash-looping: restart %d during the wait is more than max_restarts=%d; the last run failed %s' % (
            unit, f.restarts, m.cfg.max_restarts, during)
        return msg + (': %s' % cause if cause else ''), hint
    if reason == 'start_limit':
        msg = '%s hit its start limit: systemd refuses to start it again until `systemctl reset-failed %s`' % (unit, unit)
        return msg + ('; last error: %s' % cause if cause else ''), hint or START_LIMIT_HINT
    if reason == 'unit_inactive':
        if f.kind == 'load':
            return '%s cannot be watched: LoadState=%s (check the unit name)' % (unit, f.load_state), None
        if f.kind == 'never_started':
            return ('%s is not running (inactive, not started within %ds of the wait): start or restart it before waiting'
                    % (unit, int(min(INACTIVE_GRACE, m.cfg.timeout)))), None
        msg = '%s stopped %s after %s (inactive, %s)' % (unit, during, fmt_duration(run_age(m, now)), unit_how(m))
        return msg + (': %s' % cause if cause else ''), hint
    if reason == 'stalled':
        phase = phase_by_name(f.phase)
        msg = '%s stalled %s: no new journal line and no phase change for %s' % (unit, during, fmt_duration(f.quiet))
        return msg, phase.stall_hint if phase is not None else NO_PHASE_STALL_HINT
    if reason == 'timeout':
        where = ''
        if unit:
            where = 'last phase %s, ' % ("'%s'" % label if m.digest.phase else 'none seen')
        msg = '%s not ready after %s: %slast probe: %s' % (target(m), elapsed, where, probe_state(m))
        if m.timeouts:
            msg += ' (%d probe request(s) timed out)' % m.timeouts
        o = m.last_outcome
        if m.last_step == 'connect' and o is not None and o.hint:
            return msg, o.hint
        if m.timeouts and m.digest.phase == 'ready':
            return msg, SILENT_AFTER_READY_HINT
        return msg, TIMEOUT_HINT
    o = f.outcome
    if reason == 'rejected' and f.kind == 'model':
        return ("%s does not serve model '%s': GET %s lists %s" % (
            m.cfg.url, m.cfg.model, MODELS_PATH, ', '.join(f.served))), o.hint
    if reason == 'rejected':
        return '%s rejected the probe: %s' % (endpoint(m, f.step), o.detail), o.hint
    # bad_response
    msg = '%s answered but not with a valid %s: %s' % (endpoint(m, f.step), f.step, o.detail)
    if f.count > 1:
        msg += ' (%d times in a row)' % f.count
    return msg, MODEL_INFO_HINT if f.step == 'model_info' else BAD_BODY_HINT


# --------------------------------------------------------------------------- result
def phases(m):
    """The start-up phases seen, and `ready` from the probe when the answer proved readiness before the journal's
    ready line was read (or without a journal)."""
    marks = [{'name': p.name, 'label': phase_label(p.name), 'at': p.at, 'run': p.run, 'source': p.source}
             for p in m.digest.phases]
    if m.ready and m.digest.phase != 'ready':
        marks.append({'name': 'ready', 'label': phase_label('ready'), 'at': round(m.elapsed(m.ended_at), 1),
                      'run': m.digest.run, 'source': 'probe'})
    return marks


def current_phase(m):
    """(phase name, Unix time it began) of the last start-up phase seen, None before the first."""
    marks = phases(m)
    if not marks:
        return None
    return marks[-1]['name'], round(m.wall_start + marks[-1]['at'], 1)


def probe_summary(m):
    o = m.ready_outcome or m.last_outcome
    status = None
    if o is not None:
        status = o.status if o.status is not None else o.kind
    return {
        'endpoint': endpoint(m),
        'status': status,
        'latency': round(o.latency, 3) if o is not None and o.latency is not None else None,
        'model': m.model,
        'attempts': m.attempts,
        'timeouts': m.timeouts,
        'detail': o.detail if o is not None else None,
    }


def journal_cmd(m):
    """The command that shows every journal line of the runs the wait watched (from the first line it read)."""
    since = m.wall_start
    first = m.digest.first_realtime_us
    if first:
        since = min(since, first / 1e6)
    return operator_journal_cmd(m.cfg.unit, since_epoch=since - 1)


def result(m, now=None, secrets=(), gpus=()):
    """Everything the module returns, secrets masked in the journal lines and the message."""
    now = _end_or(m, now)
    msg, hint = conclude(m, now)
    journal = m.digest.excerpt(tail_fallback=not m.ready) if m.cfg.unit else []
    out = {
        'ready': m.ready,
        'elapsed': round(m.elapsed(now), 3),
        'reason': None if m.ready else m.reason(),
        'msg': redact(msg, secrets),
        'hint': hint,
        'signature': None if m.ready else m.digest.cause()[2],
        'journal': [redact(line, secrets) for line in journal],
        'phases': phases(m),
        'restarts': m.restarts,
        'unit': unit_summary(m.props),
        'probe': probe_summary(m),
        'gpus': list(gpus),
    }
    if m.cfg.unit and m.wall_start is not None:
        out['journal_cmd'] = journal_cmd(m)
    return out


def check_result(m, props, unit_query_error, since, url):
    """What check mode returns: what the wait would watch, and the unit's current state (props, or the error of
    asking for it)."""
    cfg = m.cfg
    timeout = int(cfg.timeout) if cfg.timeout == int(cfg.timeout) else cfg.timeout
    msg = 'check mode: would wait up to %ss for %s%s to answer probe %s at %s' % (
        timeout, cfg.unit or 'the endpoint', ' and its endpoint' if cfg.unit else '', cfg.probe, endpoint(m))
    out = result(m, m.start)
    out.pop('journal_cmd', None)
    out.update(msg=msg, reason=None, hint=None, signature=None, gpus=[], unit=unit_summary(props))
    out['watch'] = {
        'unit': cfg.unit, 'url': url, 'probe': cfg.probe, 'endpoint': endpoint(m), 'model': cfg.model,
        'timeout': cfg.timeout, 'stall_timeout': cfg.stall_timeout, 'max_restarts': cfg.max_restarts, 'since': since,
        'unit_query_error': unit_query_error,
    }
    return out


# --------------------------------------------------------------------------- progress
def progress_status(m, now, secrets=(), gpus=(), wall_now=None):
    """The small status written to progress_file for a controller-side live display (progress_view reads it)."""
    marks = phases(m)
    last = marks[-1] if marks else None
    status = {
        'unit': m.cfg.unit,
        'url': m.cfg.url,
        'phase': last['name'] if last else None,
        'phase_label': last['label'] if last else None,
        'phase_at': last['at'] if last else None,
        'phases': marks,
        'elapsed': round(m.elapsed(now), 1),
        'timeout': m.cfg.timeout,
        'restarts': m.restarts,
        'active_state': m.props.active_state if m.props else None,
        'sub_state': m.props.sub_state if m.props else None,
        'port_open': m.port_open,
        'probe': probe_state(m),
        'last_line': redact(m.digest.last_line, secrets) if m.digest.last_line else m.digest.last_line,
        'done': m.ended_at is not None,
        'ready': m.ready,
        'reason': m.reason(),
        'gpus': list(gpus),
    }
    if wall_now is not None:
        status['updated'] = round(wall_now, 1)
    return status


def progress_key(m):
    """What, when it changes, makes the progress status worth writing at once."""
    return (len(m.digest.phases), m.props and m.props.active_state, m.port_open, m.restarts)


class ProgressPacer(object):
    """When to rewrite progress_file and when to read the GPUs for it: at every change of progress_key, at least
    every PROGRESS_EVERY seconds; nvidia-smi at a phase change, else at most every PROGRESS_GPU_EVERY seconds."""

    def __init__(self):
        self.last_write = None
        self.last_key = None
        self.gpus = []
        self.gpus_at = None

    def due(self, now, key):
        return self.last_write is None or key != self.last_key or now - self.last_write >= PROGRESS_EVERY

    def gpus_due(self, now, key):
        phase_changed = self.last_key is None or key[0] != self.last_key[0]
        return phase_changed or self.gpus_at is None or now - self.gpus_at >= PROGRESS_GPU_EVERY

    def gpus_read(self, now, gpus):
        self.gpus, self.gpus_at = gpus, now

    def written(self, now, key):
        self.last_write, self.last_key = now, key
