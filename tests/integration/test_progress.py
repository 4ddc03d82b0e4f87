# -*- coding: utf-8 -*-
"""Live per-host progress of playbooks/deploy_k26.yml on a 3-host fleet (issue 7's "Done when").

The playbook runs with the repository's ansible.cfg (yaml results, forks > hosts) and without -v; its output is read
line by line with arrival times and compared with the SGLang stand-in's event log (written on the hosts at the
moment of each event; the hosts share the controller's clock). Two hosts load for about a minute and become ready,
the third crashes while capturing CUDA graphs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from ansible_collections.llmops.sglang.plugins.module_utils.sglang_signatures import PHASES

REPO_ROOT = Path(__file__).resolve().parents[2]
UNIT_SHORT = 'sglang-k26'
STATE_DIR = '/var/lib/sglang/sglang-k26'     # the unit's writable state dir (it runs as the sglang user)
EVENT_LOG = STATE_DIR + '/standin-events.jsonl'
PACE = '0.15'
# At this pace: init 3 s, weights 45 s, KV cache 1 s, CUDA graphs 22 s, warmup 1 s; about 75 s of load. CUDA graph
# capture is made longer than the stand-in's default (60 s unpaced, 9 s here) so that it outlasts the waiter's journal
# read interval (a backoff capped at 10 s) and must be shown while it runs.
PHASE_SECONDS = 'cuda_graph=150'
# What each host must show before its outcome line: phases that run long enough to be seen, and the phases that
# began and ended between two reads (shown as finished). The crashing host dies early in CUDA graph capture.
MUST_SHOW = ('init', 'weights', 'kv_cache', 'cuda_graph')
MUST_SHOW_CRASHING = ('init', 'weights')
LABELS = sorted(((p.label, p.name) for p in PHASES), key=lambda item: -len(item[0]))
# Generous bounds (a busy 2-core CI machine): the issue asks for a line "within a few seconds" of the outcome
# and at least every 30 s while a host loads.
OUTCOME_LAG = 10.0
PHASE_LAG = 25.0        # the waiter reads the journal on a backoff capped at 10 s, the controller every 5 s
REFRESH_GAP = 40.0


def run_timed(command, env, timeout):
    """Run a command; returns (rc, [(arrival time, line)]) with each line stamped when it was read."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env,
                            cwd=str(REPO_ROOT), stdin=subprocess.DEVNULL)
    killer = threading.Timer(timeout, proc.kill)
    killer.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append((time.time(), line.rstrip('\n')))
    finally:
        killer.cancel()
        proc.stdout.close()
    return proc.wait(), lines


def transcript(lines, start=None):
    start = lines[0][0] if start is None and lines else start or 0.0
    return '\n'.join('%7.1f  %s' % (at - start, line) for at, line in lines)


def classify(rest):
    """('phase', name, finished) / ('ready',) / ('failed', text) for the text after `host  unit  `."""
    if rest.startswith('READY'):
        return ('ready',)
    if rest.startswith('FAILED'):
        return ('failed', rest)
    for label, name in LABELS:
        if rest.startswith(label):
            return ('phase', name, rest.endswith('(finished)'))
    return ('other', rest)


def host_lines(lines, host):
    """[(arrival, classification, line)] of the progress lines of one host."""
    prefix = re.compile(r'^%s  %s  (?P<rest>.*)$' % (re.escape(host), re.escape(UNIT_SHORT)))
    found = []
    for at, line in lines:
        match = prefix.match(line)
        if match:
            found.append((at, classify(match.group('rest')), line))
    return found


def events(fleet, host):
    """The stand-in's events of the host's first start: {'start': t, 'phase': {name: first t}, 'ready': t, 'crash': t}."""
    out = fleet.run(host, 'cat %s' % EVENT_LOG, check=True).stdout
    records = [json.loads(raw) for raw in out.splitlines() if raw.strip()]
    starts = [r['time'] for r in records if r['event'] == 'start']
    assert starts, 'no start in the event log of %s:\n%s' % (host.name, out)
    # the outcome belongs to the first start (a crashed unit is restarted later by systemd)
    first_start = starts[0]
    end = starts[1] if len(starts) > 1 else float('inf')
    mine = [r for r in records if first_start <= r['time'] < end]
    found = {'start': first_start, 'phase': {}, 'ready': None, 'crash': None}
    for record in mine:
        if record['event'] == 'phase':
            found['phase'].setdefault(record['phase'], record['time'])
        elif record['event'] in ('ready', 'crash') and found[record['event']] is None:
            found[record['event']] = record['time']
    return found


@pytest.fixture
def k26_fleet(private_fleet, tmp_path):
    """A private 3-host fleet (the rollout changes hosts beyond what other tests expect) and an inventory dir like
    inventories/local for it: its hosts.yml, the committed k26.yml and group_vars, and host_vars that set the pace,
    the event log, and a crash on the last host."""
    fleet = private_fleet(count=3, standin=True)
    inventory = tmp_path / 'inventory'
    (inventory / 'host_vars').mkdir(parents=True)
    shutil.copy(fleet.inventory, str(inventory / 'hosts.yml'))
    local = REPO_ROOT / 'inventories' / 'local'
    os.symlink(str(local / 'k26.yml'), str(inventory / 'k26.yml'))
    os.symlink(str(local / 'group_vars'), str(inventory / 'group_vars'))
    group_env = yaml.safe_load((local / 'group_vars' / 'local_fleet.yml').read_text()).get('sglang_env') or {}
    for index, host in enumerate(fleet.hosts):
        env = dict(group_env, SGLANG_STANDIN_PACE=PACE, SGLANG_STANDIN_PHASE_SECONDS=PHASE_SECONDS,
                   SGLANG_STANDIN_EVENT_LOG=EVENT_LOG)
        if index == len(fleet.hosts) - 1:
            env['SGLANG_STANDIN_FAULT'] = 'crash@cuda_graph'
        # host_vars replace the group's sglang_env whole, hence the copy of it above
        (inventory / 'host_vars' / ('%s.yml' % host.name)).write_text(yaml.safe_dump({'sglang_env': env}))
    return fleet, str(inventory)


def playbook(fleet, inventory, path, *extra, **kwargs):
    env = fleet.ansible_env()
    env.pop('ANSIBLE_INVENTORY', None)
    beside = Path(sys.executable).parent / 'ansible-playbook'
    command = [str(beside) if beside.exists() else 'ansible-playbook', '-i', inventory, path] + list(extra)
    return run_timed(command, env, kwargs.get('timeout', 1200))


def test_deploy_shows_each_hosts_phases_live_and_the_outcome_at_once(k26_fleet, tmp_path):
    fleet, inventory = k26_fleet
    rc, lines = playbook(fleet, inventory, 'tests/fleet/demo_prepare.yml')
    assert rc == 0, transcript(lines)

    rc, lines = playbook(fleet, inventory, 'playbooks/deploy_k26.yml', '-e', 'k26_serial=3')
    (tmp_path / 'deploy.log').write_text(transcript(lines))
    report = 'deploy_k26.yml output (s since its first line):\n' + transcript(lines)
    crashing, loading = fleet.hosts[-1], fleet.hosts[:-1]
    timings = {}  # measured lags, kept next to deploy.log for whoever tunes the bounds
    assert rc == 2, report
    assert re.search(r'^%s\s*:.*failed=1' % re.escape(crashing.name), '\n'.join(line for dummy, line in lines), re.M), report

    for host in fleet.hosts:
        seen = host_lines(lines, host.name)
        happened = events(fleet, host)
        outcome_kind = 'failed' if host is crashing else 'ready'
        outcomes = [item for item in seen if item[1][0] in ('ready', 'failed')]
        # the first outcome is this wait's (a later one could come from a rollback's wait)
        assert outcomes and outcomes[0][1][0] == outcome_kind, report
        outcome_at = outcomes[0][0]
        progress = [item for item in seen if item[1][0] == 'phase' and item[0] <= outcome_at]

        # every phase of a run appears, in the order of the phase table, before the outcome
        order = [PHASES.index(next(p for p in PHASES if p.name == item[1][1])) for item in progress]
        assert order == sorted(order), report
        shown = set(item[1][1] for item in progress)
        must = set(MUST_SHOW_CRASHING if host is crashing else MUST_SHOW)
        assert must <= shown, '%s: %s missing\n%s' % (host.name, must - shown, report)

        # live, not replayed at the end: a phase that was running when its line came is shown after it began and
        # within a read or two of the waiter seeing it; weight loading (45 s) long before the outcome
        first_lines = {}
        for at, (kind, name, finished), line in progress:
            first_lines.setdefault(name, (at, finished, line))
        for name, (at, finished, line) in first_lines.items():
            if not finished and name in happened['phase']:
                assert happened['phase'][name] - 1.0 <= at <= happened['phase'][name] + PHASE_LAG, \
                    '%s (line at %.1f, phase began %.1f)\n%s' % (line, at, happened['phase'][name], report)
        first_weights = min(at for at, item, dummy in progress if item[1] == 'weights')
        assert outcome_at - first_weights >= 20.0, report

        # refreshed while waiting: no silence longer than REFRESH_GAP between the first line and the outcome
        stamps = [item[0] for item in seen if item[0] <= outcome_at]
        gaps = [later - earlier for earlier, later in zip(stamps, stamps[1:])]
        assert max(gaps) <= REFRESH_GAP, '%s: gaps %s\n%s' % (host.name, gaps, report)

        # the outcome line the moment it happened
        event_at = happened['crash'] if host is crashing else happened['ready']
        assert event_at is not None, '%s: no %s event' % (host.name, outcome_kind)
        event_at = float(event_at)
        timings[host.name] = {'outcome_lag': round(outcome_at - event_at, 2), 'max_gap': round(max(gaps), 2),
                              'first_line_lag': dict((name, round(at - happened['phase'][name], 2))
                                                     for name, (at, finished, dummy) in first_lines.items()
                                                     if not finished and name in happened['phase'])}
        (tmp_path / 'timings.json').write_text(json.dumps(timings, indent=1, sort_keys=True))
        assert event_at - 1.0 <= outcome_at <= event_at + OUTCOME_LAG, \
            '%s: %s line at %.1f, event at %.1f\n%s' % (host.name, outcome_kind, outcome_at, event_at, report)
        if host is crashing:
            assert re.search(r'FAILED \((unit_failed|crash_loop)\) during capturing CUDA graphs', outcomes[0][2]), report
    for host in loading:
        ready_line = [item[2] for item in host_lines(lines, host.name) if item[1][0] == 'ready'][0]
        assert 'loading weights' in ready_line and 'capturing CUDA graphs' in ready_line, report
