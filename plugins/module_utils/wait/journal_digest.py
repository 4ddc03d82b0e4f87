# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Digest a unit's journal while waiting: phases, tracebacks, fatal lines, a bounded excerpt.

Fed incrementally (only new lines each poll) and bounded in memory however chatty the
server is. Lines are kept whole: an excerpt may omit lines, never characters.
Pure: no I/O.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections import deque, namedtuple

from ansible_collections.llmops.sglang.plugins.module_utils.sglang_signatures import (
    SIGQUIT_RE, has_log_prefix, is_benign, match_fatal, match_phase, phase_index, signature_hint,
    signature_priority, strip_prefix,
)

TRACEBACK_START = 'Traceback (most recent call last):'
_CHAIN_RE = re.compile(r'^(?:During handling of the above exception, another exception occurred:|'
                       r'The above exception was the direct cause of the following exception:)\s*$')
# The closing line of a traceback: "RuntimeError: ...", "KeyboardInterrupt", "subprocess.CalledProcessError: ...".
_EXCEPTION_LINE_RE = re.compile(r'^[A-Za-z_][\w.]*(?::|$)')
# systemd's own lines worth showing next to a failure.
_START_LIMIT_RE = re.compile(r'Start request repeated too quickly|start-limit-hit')
_MANAGER_RE = re.compile(r'Main process exited|Failed with result|Start request repeated too quickly|'
                         r'Scheduled restart job|Failed to start|start-limit-hit|Killing process|code=(?:killed|dumped|exited)')

MAX_EXCERPT_LINES = 60
MAX_TRACEBACK_EXCERPT = 40
MAX_FATAL_EXCERPT = 15
MAX_MANAGER_EXCERPT = 5
TAIL_LINES = 20
MAX_TRACEBACK_LINES = 400       # a single traceback kept in memory
MAX_INTERLEAVED = 200           # foreign lines tolerated inside an open traceback
MAX_TRACEBACKS = 16
MAX_FATALS = 200

Line = namedtuple('Line', ['seq', 'run', 'text'])
Fatal = namedtuple('Fatal', ['seq', 'run', 'name', 'text', 'hint', 'generic', 'summary'])
PhaseMark = namedtuple('PhaseMark', ['name', 'at', 'run', 'source'])


_DIGITS = re.compile(r'\d+')


class Traceback(object):
    __slots__ = ('start_seq', 'run', 'lines', 'dropped', 'complete', 'foreign')

    def __init__(self, seq, run, text):
        self.start_seq = seq
        self.run = run
        self.lines = [Line(seq, run, text)]
        self.dropped = 0
        self.complete = False
        self.foreign = 0

    def add(self, line):
        if len(self.lines) >= MAX_TRACEBACK_LINES:
            # keep the head (where it started) and the newest lines (the exception)
            del self.lines[10]
            self.dropped += 1
        self.lines.append(line)

    @property
    def exception_line(self):
        if not self.complete:
            return None
        return strip_prefix(self.lines[-1].text)[1].strip()


class JournalDigest(object):
    """Incremental reader of one unit's journal lines across the runs of one wait."""

    def __init__(self, clock_offset=None):
        # clock_offset(realtime_us) -> seconds since the wait began (None: observation time is used)
        self._clock_offset = clock_offset
        self.seq = 0
        self.run = 0
        self._invocations = []
        self.tail = deque(maxlen=TAIL_LINES)
        self.manager_lines = deque(maxlen=MAX_MANAGER_EXCERPT * 4)
        self.fatals = deque(maxlen=MAX_FATALS)
        self._fatal_seen = set()
        self.tracebacks = deque(maxlen=MAX_TRACEBACKS)
        self._open = None
        self._last_closed = None
        self._pending_chain = []
        self.sigquits = deque(maxlen=64)
        self.phases = []
        self.phase = None             # current phase name of the current run
        self.last_line = None
        self.first_realtime_us = None
        self.start_limit_hit = False
        self.run_started = {}         # run -> seconds since the wait began of its first line

    # ----------------------------------------------------------------- feeding
    def feed(self, entries, elapsed_now):
        """Digest new JournalEntry rows. Returns the list of PhaseMark added (for progress reporting)."""
        added = []
        for entry in entries:
            mark = self._feed_one(entry, elapsed_now)
            if mark is not None:
                added.append(mark)
        return added

    def _feed_one(self, entry, elapsed_now):
        self.seq += 1
        if entry.realtime_us and self.first_realtime_us is None:
            self.first_realtime_us = entry.realtime_us
        inv = entry.invocation_id
        if inv and inv not in self._invocations:
            self._invocations.append(inv)
            if len(self._invocations) > 1:
                self._new_run()
        if self.run not in self.run_started and self._clock_offset is not None and entry.realtime_us:
            self.run_started[self.run] = min(self._clock_offset(entry.realtime_us), elapsed_now)
        text = entry.message
        line = Line(self.seq, self.run, text)
        if entry.from_manager:
            if _MANAGER_RE.search(text):
                self.manager_lines.append(line)
            if _START_LIMIT_RE.search(text):
                self.start_limit_hit = True
            return None
        self.tail.append(line)
        self.last_line = text
        if SIGQUIT_RE.search(text):
            self.sigquits.append((self.seq, self.run))
        self._track_traceback(line)
        self._track_fatal(line)
        return self._track_phase(entry, line, elapsed_now)

    def _new_run(self):
        self._close_open(complete=False)
        self._last_closed = None
        self._pending_chain = []
        self.run += 1
        self.phase = None

    # ------------------------------------------------------------------ phases
    def _track_phase(self, entry, line, elapsed_now):
        phase = match_phase(line.text)
        if phase is None or phase_index(phase.name) <= phase_index(self.phase):
            return None
        self.phase = phase.name
        at = elapsed_now
        source = 'observed'
        if self._clock_offset is not None and entry.realtime_us:
            at = min(self._clock_offset(entry.realtime_us), elapsed_now)
            source = 'journal'
        mark = PhaseMark(phase.name, round(at, 1), self.run, source)
        self.phases.append(mark)
        return mark

    def add_phase(self, name, at, source='probe'):
        """Record a phase seen by other means (the probe proved readiness)."""
        if phase_index(name) > phase_index(self.phase):
            self.phase = name
            self.phases.append(PhaseMark(name, round(at, 1), self.run, source))

    # -------------------------------------------------------------- tracebacks
    def _close_open(self, complete):
        tb = self._open
        if tb is None:
            return
        tb.complete = complete
        if complete or len(tb.lines) > 1:
            if not self.tracebacks or self.tracebacks[-1] is not tb:
                self.tracebacks.append(tb)
        self._last_closed = tb if complete else None
        self._pending_chain = []
        self._open = None

    def _track_traceback(self, line):
        text = line.text
        if TRACEBACK_START in text:
            self._close_open(complete=False)
            last = self._last_closed
            if last is not None and any(_CHAIN_RE.match(pending.text) for pending in self._pending_chain):
                # "During handling of the above exception..." then a new header: one chained traceback
                for pending in self._pending_chain:
                    last.add(pending)
                last.add(line)
                last.complete = False
                self._open = last
            else:
                self._open = Traceback(line.seq, line.run, text)
            self._last_closed = None
            self._pending_chain = []
            return
        tb = self._open
        if tb is None:
            if self._last_closed is not None:
                if not text.strip() or _CHAIN_RE.match(text):
                    self._pending_chain.append(line)
                else:
                    self._last_closed = None
                    self._pending_chain = []
            return
        if has_log_prefix(text):
            # a record of another process (another TP rank) interleaved with this traceback
            tb.foreign += 1
            if tb.foreign > MAX_INTERLEAVED:
                self._close_open(complete=False)
            return
        if not text.strip() or text[:1] in (' ', '\t') or _CHAIN_RE.match(text):
            tb.add(line)
            return
        if _EXCEPTION_LINE_RE.match(text):
            tb.add(line)
            self._close_open(complete=True)
            return
        # unprefixed noise (compiler output, progress bars) from elsewhere: not part of it
        tb.foreign += 1

    # ------------------------------------------------------------ fatal lines
    def _track_fatal(self, line):
        sig, m = match_fatal(line.text)
        if sig is None:
            return
        stripped = strip_prefix(line.text)[1].strip()
        summary = line.text[m.start():].strip() if not sig.generic else stripped
        # the same error from each TP rank (or with another temp path before it, or another GPU number or memory
        # figure in it): keep the first
        key = (line.run, sig.name, _DIGITS.sub('N', summary))
        if key in self._fatal_seen:
            return
        if len(self._fatal_seen) < 4 * MAX_FATALS:
            self._fatal_seen.add(key)
        self.fatals.append(Fatal(line.seq, line.run, sig.name, line.text, signature_hint(sig, m), sig.generic, summary))

    # ------------------------------------------------------------- conclusions
    def _cause_run(self):
        """The run whose failure explains the outcome: the last one with a traceback or a fatal line."""
        runs = [tb.run for tb in self.tracebacks] + [f.run for f in self.fatals]
        if self._open is not None:
            runs.append(self._open.run)
        return max(runs) if runs else self.run

    def chosen_traceback(self):
        """The last traceback of the failed run; when a child failed (sigquit), the last one before that line."""
        run = self._cause_run()
        candidates = [tb for tb in self.tracebacks if tb.run == run]
        if self._open is not None and self._open.run == run and len(self._open.lines) > 1:
            candidates.append(self._open)
        if not candidates:
            return None
        quits = [seq for seq, r in self.sigquits if r == run]
        if quits:
            before = [tb for tb in candidates if tb.start_seq < quits[0]]
            if before:
                return before[-1]
        return candidates[-1]

    def cause(self):
        """(summary, hint, signature name) explaining a failure, best first; (None, None, None) if nothing is known."""
        run = self._cause_run()
        specific = [f for f in self.fatals if f.run == run and not f.generic]
        tb = self.chosen_traceback()
        if specific:
            best = min(specific, key=lambda f: (signature_priority(f.name), f.seq))
            return best.summary, best.hint, best.name
        generic = [f for f in self.fatals if f.run == run and f.generic]
        hint = None
        name = None
        if generic:
            best = min(generic, key=lambda f: (signature_priority(f.name), f.seq))
            hint, name = best.hint, best.name
        if tb is not None and tb.exception_line:
            return tb.exception_line, hint, name
        if generic:
            return min(generic, key=lambda f: f.seq).summary, hint, name
        if self.manager_lines:
            return self.manager_lines[-1].text.strip(), None, None
        return None, None, None

    def excerpt(self, max_lines=MAX_EXCERPT_LINES, tail_fallback=True):
        """The lines that explain a failure, in journal order: the chosen traceback, the fatal
        lines and systemd's verdict. Without any of these: the last lines (where it stopped)."""
        picked = {}
        tb = self.chosen_traceback()
        if tb is not None:
            lines = list(tb.lines)
            omitted = tb.dropped
            if len(lines) > MAX_TRACEBACK_EXCERPT:
                keep_head = 3
                omitted += len(lines) - MAX_TRACEBACK_EXCERPT
                lines = lines[:keep_head] + lines[-(MAX_TRACEBACK_EXCERPT - keep_head):]
                picked[lines[keep_head].seq - 0.5] = '[... %d traceback lines omitted, see journal_cmd ...]' % omitted
            elif omitted:
                picked[lines[min(10, len(lines) - 1)].seq - 0.5] = '[... %d traceback lines omitted, see journal_cmd ...]' % omitted
            for tb_line in lines:
                picked[tb_line.seq] = tb_line.text
        run = self._cause_run()
        fatal_lines = [f for f in self.fatals if f.run == run and f.seq not in picked]
        for f in fatal_lines[:MAX_FATAL_EXCERPT]:
            picked[f.seq] = f.text
        verdicts = [v for v in self.manager_lines if v.run == run] or list(self.manager_lines)
        for verdict in verdicts[-MAX_MANAGER_EXCERPT:]:
            picked[verdict.seq] = verdict.text
        if tail_fallback and tb is None and not fatal_lines:
            for recent in self.tail:
                if not is_benign(recent.text):
                    picked[recent.seq] = recent.text
        ordered = [picked[k] for k in sorted(picked)]
        if len(ordered) > max_lines:
            ordered = ordered[-max_lines:]
        return ordered
