#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: sglang_wait_ready
short_description: Wait until an SGLang server answers a real request, or explain why it will not
version_added: 0.1.0
description:
  - Watches a systemd unit running SGLang and the server's HTTP endpoint together, on the host that runs it.
  - Returns as soon as the answer is known, with I(ready=true) once a real request (by default a chat
    completion of at most I(max_tokens) tokens at temperature 0) returns a valid body.
  - Fails at once on a terminal unit state (C(failed), C(inactive) after it had started, C(Result=start-limit-hit),
    more automatic restarts than I(max_restarts)), on a 4xx answer other than 408/429, on a stall, or at the deadline.
  - Failures carry a I(reason) from a fixed vocabulary, a one-sentence I(msg), a I(hint) for known SGLang
    failure signatures, the relevant journal lines (the last Python traceback and the known fatal lines, whole)
    and the start-up I(phases) seen in the journal.
  - Polling is cheap. Every I(poll_interval) the module checks that the unit's main PID is alive and probes the
    port (a TCP connect while it refuses, the HTTP probe once it accepts). C(systemctl show) and one incremental
    C(journalctl) read run on a jittered backoff capped at I(max_poll_interval), and at once when the main
    process disappears.
  - With I(unit) set and a local URL, an open port only counts when a process of the unit holds the listening socket,
    so an old server left on the port (or another unit) cannot make a start look ready.
  - The phase table, the failure signatures and their hints live in
    C(plugins/module_utils/sglang_signatures.py) of this collection.
author:
  - llmops.sglang maintainers (@llmops)
requirements:
  - On the managed node (the GPU host, or the host the task is delegated to) the Python libraries C(requests)
    and, when I(expect) is used, C(jmespath). The collection's server role installs them.
  - C(systemctl) and C(journalctl) when I(unit) is set. C(nvidia-smi) is used when present.
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: In check mode the module does not wait; it reports what it would watch and the unit's current state.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
options:
  unit:
    description:
      - The systemd unit running the server, for example C(sglang-k26.service).
      - Without it only the endpoint is watched (no journal, no failure causes, no stall detection).
    type: str
  url:
    description:
      - Base URL of the server (scheme, host, port; no C(/v1)). Only C(http) and C(https).
    type: str
    default: http://127.0.0.1:30000
  probe:
    description:
      - What counts as ready.
      - C(chat) sends C(POST /v1/chat/completions) and C(completion) sends C(POST /v1/completions); both validate
        the body (see I(expect)).
      - C(health_generate) and C(health) need HTTP 200 from C(/health_generate) or C(/health) (SGLang runs a
        one-token generation for them). C(ready) needs HTTP 200 from C(/ready) (SGLang 0.5.23 and later).
      - C(GET /v1/models) is never taken as readiness; SGLang answers it before the model can serve.
    type: str
    choices: [chat, completion, health_generate, health, ready]
    default: chat
  model:
    description:
      - Model name sent in completions. When omitted it is discovered from C(GET /v1/models) (first id) or
        C(GET /model_info) (C(served_model_name)).
      - When given, it is checked after the completion answered, against the ids C(GET /v1/models) lists (SGLang
        answers a completion for any model name); a name the server does not serve fails with I(reason=rejected)
        and a hint naming the served ids. A server without C(/v1/models) is not judged.
    type: str
  prompt:
    description:
      - The prompt (or user message for I(probe=chat)) of the probe request.
    type: str
    default: Say OK
  max_tokens:
    description:
      - C(max_tokens) of the probe request (1 or more; keep it small).
    type: int
    default: 4
  api_key:
    description:
      - The server's C(--api-key), sent as C(Authorization Bearer). Never logged or returned.
    type: str
  headers:
    description:
      - Extra HTTP headers sent with every probe request.
      - Pass the server's key with I(api_key), which is never logged; header values are not hidden from Ansible's
        own invocation output (values of headers whose name looks secret are masked in the journal excerpt only).
    type: dict
    default: {}
  validate_certs:
    description:
      - Verify the server's TLS certificate for C(https) URLs.
    type: bool
    default: true
  expect:
    description:
      - A JMESPath expression evaluated on the JSON body of a successful C(chat)/C(completion) probe; the server
        is ready only when the result is truthy. Needs C(jmespath) on the managed node.
      - Without it the default check applies, HTTP 200, at least one choice and at least one generated token
        (C(usage.completion_tokens >= 1), or a non-empty C(content), C(reasoning_content) or C(text)). A thinking
        model that answers only in C(reasoning_content), or answers with whitespace, is ready.
      - Three consecutive answers that fail the check end the wait with I(reason=bad_response).
    type: str
  timeout:
    description:
      - Overall deadline in seconds, measured on a monotonic clock from the start of the module.
    type: float
    default: 1800
  request_timeout:
    description:
      - Time limit of one HTTP request in seconds, clipped to the time left before the deadline.
      - Timed-out requests mean "keep waiting" (warmup, JIT) and are counted in I(probe.timeouts).
    type: float
    default: 30
  stall_timeout:
    description:
      - Fail with I(reason=stalled) when the unit's journal shows no new line and no phase change for this many
        seconds. C(0) turns stall detection off. Needs I(unit).
    type: float
    default: 900
  max_restarts:
    description:
      - Automatic restarts of the unit (C(NRestarts), counted from the start of the wait) tolerated before the
        wait fails with I(reason=crash_loop). With C(0) the first restart (or a pending C(auto-restart)) fails it.
    type: int
    default: 0
  since:
    description:
      - Which journal lines belong to "this start".
      - C(invocation) takes the unit's current run (its C(InvocationID)) and every run started during the wait.
      - Any other value is a journal cursor, for example taken before a restart with C(journalctl -n 0 --show-cursor);
        every line of the unit after it is read.
    type: str
    default: invocation
  poll_interval:
    description:
      - Seconds between two cheap checks (main PID alive, TCP connect or HTTP probe). Bounds how fast readiness
        and a dying main process are seen. Each sleep is jittered by 20 percent.
    type: float
    default: 0.5
  max_poll_interval:
    description:
      - Cap of the backoff between two full unit polls (C(systemctl show) plus the new journal lines).
    type: float
    default: 10
  progress_file:
    description:
      - When set, a path on the managed node where a small JSON status (current phase, since when, elapsed, last
        journal line, restarts, probe state, GPU memory, done/ready/reason) is rewritten atomically at every
        change and at least every 5 seconds, for a live display on the controller. Written with mode 0600, with
        secrets masked. GPU memory in it is refreshed at most every 30 seconds.
      - When the module runs as root and the file's directory belongs to another user, the file is given to that
        user (the login user, when the directory is Ansible's remote tmp dir of a C(become) task).
      - The collection's action plugin sets it to a file in the task's remote tmp dir when it is not set (except
        under C(async), in check mode, for C(become) to an unprivileged user and with a JSON stdout callback),
        reads it every few seconds over the task's connection and prints a progress line per host on the
        controller, without C(-v). Set the variable C(sglang_wait_progress=false) to turn that display off.
    type: path
notes:
  - Run it on the GPU host (the endpoint is often only reachable there), with C(become) so that the whole journal
    is readable. Use C(delegate_to) to probe an endpoint from another host (without I(unit)).
  - For long waits use C(async) with a value above I(timeout) and C(poll), so the wait does not depend on one SSH session.
  - "I(reason) is null on success, and also when the module could not run at all (bad options, no C(systemctl))."
seealso:
  - module: ansible.builtin.wait_for
  - module: ansible.builtin.uri
  - module: ansible.builtin.systemd_service
'''

EXAMPLES = r'''
- name: Restart the K2.6 server on the PCIe box (port 30001) and wait until it answers a chat completion
  become: true
  block:
    - name: Restart sglang-k26
      ansible.builtin.systemd_service:
        name: sglang-k26.service
        state: restarted

    - name: Wait for sglang-k26 to serve
      llmops.sglang.sglang_wait_ready:
        unit: sglang-k26.service
        url: http://127.0.0.1:30001
        model: /root/models/Kimi-K2.6
        timeout: 1800
      register: k26_ready

- name: Wait for the DDTree server on the B300 box, a cold DeepGEMM cache may take 20 minutes of JIT
  become: true
  llmops.sglang.sglang_wait_ready:
    unit: sglang-k26-ddtree.service
    url: http://127.0.0.1:30001
    probe: chat
    prompt: Say OK
    max_tokens: 4
    timeout: 2700
    stall_timeout: 1500
    progress_file: /run/sglang-k26-ddtree.wait.json
  async: 2800
  poll: 15
  register: ddtree_ready

- name: Show why it failed
  ansible.builtin.debug:
    msg: "{{ ddtree_ready.reason }}: {{ ddtree_ready.msg }} / hint: {{ ddtree_ready.hint }} / see: {{ ddtree_ready.journal_cmd }}"
  when: not ddtree_ready.ready

- name: Probe from the load balancer host that the server answers there too (endpoint only)
  llmops.sglang.sglang_wait_ready:
    url: https://gpu-01.example.net:30001
    api_key: "{{ sglang_api_key }}"
    validate_certs: false
    timeout: 120
    expect: "choices[0].finish_reason != null"
  delegate_to: lb-01

- name: Tolerate one automatic restart and accept a bare /health_generate
  llmops.sglang.sglang_wait_ready:
    unit: sglang-k26.service
    url: http://127.0.0.1:30001
    probe: health_generate
    max_restarts: 1
'''

RETURN = r'''
ready:
  description: Whether the server answered the probe as required.
  returned: always
  type: bool
  sample: true
elapsed:
  description: Seconds since the wait began (monotonic clock).
  returned: always
  type: float
  sample: 734.2
reason:
  description:
    - Why the wait failed; null on success.
    - One of C(unit_failed), C(unit_inactive), C(crash_loop), C(start_limit), C(stalled), C(timeout),
      C(rejected) (a 4xx other than 408/429, a redirect, or a TLS error), C(bad_response).
    - C(unit_failed) also while the unit is still active, when its HTTP server could not bind the port
      (C([Errno 98] ... address already in use)) and another process holds it; SGLang would SIGKILL itself when its
      warmup gives up, about 2 minutes later; C(msg) names the port and that process.
    - C(rejected) also when the completion answered but C(model) is not among the ids of C(GET /v1/models).
  returned: always
  type: str
  sample: unit_failed
msg:
  description:
    - One sentence a human can act on. For unit failures, "after" counts from the failed run's first journal line
      (the run may have started before the wait).
  returned: always
  type: str
  sample: "sglang-k26.service failed during 'capturing CUDA graphs' after 3m12s: fatal error: Python.h: No such file or directory"
hint:
  description: The fix for a known failure signature (or for the HTTP status of a rejection); null when none applies.
  returned: always
  type: str
  sample: "Triton compiles a C helper at start-up and needs the Python headers: install python3-dev AND python3.X-dev ..."
journal:
  description:
    - The journal lines that explain the outcome, whole and in journal order, at most 60; the last Python
      traceback of the failed run (when a child process failed, the traceback before SGLang's
      C(Received sigquit) line), the known fatal lines (once each, not once per TP rank) and systemd's verdict.
    - Without a traceback or a fatal line, the last lines of the unit (where it stopped). Empty on a clean success
      and without I(unit).
  returned: always
  type: list
  elements: str
journal_cmd:
  description: The command that shows every journal line of the runs the wait watched.
  returned: when I(unit) is set
  type: str
  sample: journalctl -u sglang-k26.service --since @1795937836 --no-pager
phases:
  description:
    - Start-up phases seen in the journal, in order. A phase is recorded when its first line appears.
    - C(at) is in seconds since the wait began, computed from the journal entry's realtime timestamp
      (C(source=journal)); it is negative for a phase that began before the wait (the unit was already starting).
      The final C(ready) phase may come from the successful probe (C(source=probe)).
    - C(run) counts the unit's runs during the wait (0 for the first), for waits that tolerate restarts.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Stable identifier, one of C(init), C(weights), C(kv_cache), C(cuda_graph), C(http_up), C(warmup), C(ready).
      type: str
    label:
      description: Human-readable name, for example C(loading weights).
      type: str
    at:
      description: Seconds since the wait began.
      type: float
    run:
      description: Run number within the wait.
      type: int
    source:
      description: C(journal), C(observed) (time the line was read) or C(probe).
      type: str
  sample: [{"name": "init", "label": "distributed init", "at": 0.4, "run": 0, "source": "journal"}]
restarts:
  description:
    - Automatic restarts of the unit during the wait, counting one that systemd has scheduled (C(SubState=auto-restart)).
    - Restarts reset by a manual C(systemctl restart) during the wait are not lost.
  returned: always
  type: int
  sample: 0
unit:
  description: The unit's state at the last poll (all values null without I(unit)).
  returned: always
  type: dict
  contains:
    name: {description: Unit name, type: str}
    load_state: {description: LoadState, type: str}
    active_state: {description: ActiveState, type: str}
    sub_state: {description: SubState, type: str}
    result: {description: Result, type: str}
    exec_main_status: {description: Exit status or signal number of the main process, type: int}
    exec_main_code: {description: "How the main process ended: exited, killed, dumped", type: str}
    main_pid: {description: 'Main PID (0 when there is none)', type: int}
    n_restarts: {description: NRestarts as systemd reports it, type: int}
    invocation_id: {description: InvocationID of the current run, type: str}
probe:
  description: The probe's last (or successful) request.
  returned: always
  type: dict
  contains:
    endpoint: {description: URL of the readiness request, type: str}
    status: {description: "HTTP status, or refused/timeout/wait when no HTTP answer came", type: raw}
    latency: {description: Seconds the request took, type: float}
    model: {description: Model name used (given or discovered), type: str}
    attempts: {description: HTTP requests sent, type: int}
    timeouts: {description: HTTP requests that timed out, type: int}
    detail: {description: What the last answer was, type: str}
gpus:
  description: Per-GPU memory from nvidia-smi at the end of the wait; empty when nvidia-smi is absent or fails.
  returned: always
  type: list
  elements: dict
  sample: [{"index": 0, "name": "NVIDIA H200", "memory_used_mib": 19601, "memory_total_mib": 143771}]
watch:
  description: In check mode, what the module would watch.
  returned: in check mode
  type: dict
'''

import json
import os
import re
import socket
import tempfile
import time
import traceback
from urllib.parse import urlparse

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.llmops.sglang.plugins.module_utils.nvidia_smi import parse_query_gpu, query_cmd
from ansible_collections.llmops.sglang.plugins.module_utils.probe import (
    COMPLETION_PROBES, FOREIGN, PROBES, Outcome, OK, build_request, classify_error, classify_http,
)
from ansible_collections.llmops.sglang.plugins.module_utils.procfs import (
    cgroup_procs_paths, listening_inodes, parse_pids, socket_inode,
)
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_signatures import redact
from ansible_collections.llmops.sglang.plugins.module_utils.systemd_props import (
    current_run_entries, journal_cmd, operator_journal_cmd, parse_journal_json, parse_show, show_cmd, unit_props,
)
from ansible_collections.llmops.sglang.plugins.module_utils.wait_machine import Config, WaitMachine

REQUESTS_IMP_ERR = None
try:
    import requests
    HAS_REQUESTS = True
except ImportError:
    REQUESTS_IMP_ERR = traceback.format_exc()
    HAS_REQUESTS = False

JMESPATH_IMP_ERR = None
try:
    import jmespath
    HAS_JMESPATH = True
except ImportError:
    JMESPATH_IMP_ERR = traceback.format_exc()
    HAS_JMESPATH = False

CURSOR_RE = re.compile(r'^[a-z]=[0-9a-f]+(?:;[a-z]=[0-9a-f]+)*$')
UNIT_RE = re.compile(r'^[A-Za-z0-9:_.@\\-]+$')
BACKFILL_LINES = 400
PROGRESS_EVERY = 5.0
PROGRESS_GPU_EVERY = 30.0
SETTLE_READS = 2            # extra journal reads after a unit failure when no cause was found yet
SETTLE_DELAY = 0.3
SECRET_HEADER_RE = re.compile(r'(?i)authorization|api[-_]?key|token|secret|cookie')
FOREIGN_DETAIL = 'port %d accepts connections, but no process of %s listens on it (%s)'
FOREIGN_HINT = ("Another process holds port %d (%s): stop it (`ss -ltnp 'sport = :%d'` shows it) or give the server "
                "another port; SGLang fails with 'address already in use' once loaded.")

ARGUMENT_SPEC = dict(
    unit=dict(type='str'),
    url=dict(type='str', default='http://127.0.0.1:30000'),
    probe=dict(type='str', default='chat', choices=list(PROBES)),
    model=dict(type='str'),
    prompt=dict(type='str', default='Say OK'),
    max_tokens=dict(type='int', default=4, no_log=False),
    api_key=dict(type='str', no_log=True),
    headers=dict(type='dict', default={}),
    validate_certs=dict(type='bool', default=True),
    expect=dict(type='str'),
    timeout=dict(type='float', default=1800),
    request_timeout=dict(type='float', default=30),
    stall_timeout=dict(type='float', default=900),
    max_restarts=dict(type='int', default=0),
    since=dict(type='str', default='invocation'),
    poll_interval=dict(type='float', default=0.5),
    max_poll_interval=dict(type='float', default=10),
    progress_file=dict(type='path'),
)


def validate(params):
    """Problems with option values (type checks are AnsibleModule's), each naming the option and what it expects."""
    errors = []
    url = params['url'] or ''
    parsed = urlparse(url)
    if parsed.scheme not in ('http', 'https') or not parsed.hostname:
        errors.append("url must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:30000 (got %r)" % url)
    else:
        try:
            parsed.port
        except ValueError:
            errors.append('url has an invalid port (got %r)' % url)
        if parsed.query or parsed.fragment:
            errors.append('url is the base URL of the server, without query or fragment (got %r)' % url)
        if parsed.path.rstrip('/').endswith('/v1'):
            errors.append('url is the base URL of the server without /v1, e.g. http://127.0.0.1:30000 (got %r)' % url)
    for name in ('timeout', 'request_timeout', 'poll_interval', 'max_poll_interval'):
        if params[name] <= 0:
            errors.append('%s must be a number of seconds above 0 (got %s)' % (name, params[name]))
    if params['stall_timeout'] < 0:
        errors.append('stall_timeout must be 0 (off) or a number of seconds above 0 (got %s)' % params['stall_timeout'])
    if params['poll_interval'] > 0 and params['max_poll_interval'] < params['poll_interval']:
        errors.append('max_poll_interval must be at least poll_interval (got %s < %s)' % (params['max_poll_interval'], params['poll_interval']))
    if params['max_restarts'] < 0:
        errors.append('max_restarts must be 0 or more (got %d)' % params['max_restarts'])
    if params['max_tokens'] < 1:
        errors.append('max_tokens must be 1 or more (got %d)' % params['max_tokens'])
    unit = params['unit']
    if unit is not None and (not unit or not UNIT_RE.match(unit)):
        errors.append('unit must be a systemd unit name such as sglang-k26.service (got %r)' % unit)
    since = params['since']
    if since != 'invocation' and not CURSOR_RE.match(since or ''):
        errors.append("since must be 'invocation' or a journal cursor as printed by journalctl --show-cursor (got %r)" % since)
    if since != 'invocation' and not unit:
        errors.append('since (a journal cursor) needs unit')
    if params['expect'] is not None and params['probe'] not in COMPLETION_PROBES:
        errors.append('expect applies to the JSON body of probe chat or completion, not probe %s' % params['probe'])
    if params['model'] is not None and not params['model'].strip():
        errors.append('model must be a model name, or omitted to discover it')
    for key, value in (params['headers'] or {}).items():
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            errors.append('headers must map header names to strings (header %r has a %s)' % (key, type(value).__name__))
    return errors


class Host(object):
    """systemctl / journalctl / nvidia-smi on the managed node, through module.run_command."""

    def __init__(self, module, unit):
        self.module = module
        self.unit = unit
        self.systemctl = module.get_bin_path('systemctl', required=bool(unit) and not module.check_mode)
        self.journalctl = module.get_bin_path('journalctl')
        self.nvidia_smi = module.get_bin_path('nvidia-smi')
        self.timeout_bin = module.get_bin_path('timeout')
        self.cursor = None
        self.env = {'LC_ALL': 'C', 'SYSTEMD_PAGER': '', 'SYSTEMD_COLORS': '0'}
        self.journal_warning = None
        self._foreign_inodes = None
        self._holder = (None, None)

    def show(self):
        rc, out, err = self.module.run_command(show_cmd(self.systemctl, self.unit), environ_update=self.env)
        if rc != 0:
            return None, (err or out).strip()
        return unit_props(parse_show(out), self.unit), None

    def _journal(self, after_cursor=None, lines=None):
        if not self.journalctl:
            self.journal_warning = 'journalctl not found: no journal excerpt, no phases, no stall detection'
            return None
        cmd = journal_cmd(self.journalctl, self.unit, after_cursor=after_cursor, lines=lines)
        rc, out, err = self.module.run_command(cmd, environ_update=self.env)
        if rc != 0 and not out.strip() and (not err.strip() or 'No entries' in err):
            return []   # newer journalctl versions exit 1 when nothing matched: no new lines, not an error
        if rc != 0 or 'insufficient permissions' in (err or ''):
            self.journal_warning = ('cannot read the journal (%s): run the module with become so that it can; '
                                    'no phases, no stall detection' % (err or 'rc=%d' % rc).strip().splitlines()[0])
            return None
        entries = parse_journal_json(out, self.unit)
        if entries and entries[-1].cursor:
            self.cursor = entries[-1].cursor
        return entries

    def first_journal(self, props, since, mono_now, wall_now):
        """The lines that already belong to this start, and the cursor for the next reads."""
        if since != 'invocation':
            self.cursor = since
            return self._journal(after_cursor=since)
        entries = self._journal(lines=BACKFILL_LINES)
        if entries is None:
            return None
        if props is None or not props.invocation_id or props.active_state == 'inactive':
            return []
        start_rt = None
        if props.exec_main_start_monotonic_us:
            start_rt = int((wall_now - (mono_now - props.exec_main_start_monotonic_us / 1e6)) * 1e6)
        return current_run_entries(entries, props.invocation_id, start_rt)

    def next_journal(self):
        return self._journal(after_cursor=self.cursor)

    def port_owner(self, port, props):
        """Whether the unit's processes hold the listening socket of the port: True, False, or None
        (cannot tell: not a local port, no permission)."""
        inodes = set()
        for path in ('/proc/net/tcp', '/proc/net/tcp6'):
            text = _read(path)
            if text:
                inodes |= listening_inodes(text, port)
        if not inodes:
            return None
        if inodes == self._foreign_inodes:
            return False   # the same foreign socket as last time: no need to look again
        pids = [props.main_pid] if props.main_pid > 0 else []
        for path in cgroup_procs_paths(props.control_group):
            text = _read(path)
            if text is not None:
                pids += [pid for pid in parse_pids(text) if pid not in pids]
                break
        readable = False
        for pid in pids:
            fd_dir = '/proc/%d/fd' % pid
            try:
                fds = os.listdir(fd_dir)
            except OSError:
                continue
            readable = True
            for fd in fds:
                try:
                    if socket_inode(os.readlink(os.path.join(fd_dir, fd))) in inodes:
                        self._foreign_inodes = None
                        return True
                except OSError:
                    continue
        if not readable:
            return None
        self._foreign_inodes = inodes
        return False

    def port_holder(self):
        """Who holds the foreign listening socket port_owner found: 'pid N: command line', looked up once per socket."""
        inodes = self._foreign_inodes or set()
        if self._holder[0] != inodes:
            self._holder = (inodes, 'held by a process this user cannot see')
            for pid in [d for d in os.listdir('/proc') if d.isdigit()]:
                try:
                    fds = os.listdir('/proc/%s/fd' % pid)
                except OSError:
                    continue
                if any(socket_inode(_readlink('/proc/%s/fd/%s' % (pid, fd))) in inodes for fd in fds):
                    cmdline = (_read('/proc/%s/cmdline' % pid) or '').replace('\0', ' ').strip()
                    self._holder = (inodes, 'held by pid %s: %s' % (pid, cmdline[:200] or '?'))
                    break
        return self._holder[1]

    def gpus(self):
        if not self.nvidia_smi:
            return []
        cmd = query_cmd(self.nvidia_smi, self.timeout_bin)  # bounded as sglang_info's: one place for the timeout
        rc, out, dummy = self.module.run_command(cmd, environ_update=self.env)
        if rc != 0:
            return []
        return parse_query_gpu(out)


def _read(path):
    try:
        with open(path, encoding='utf-8', errors='replace') as f:
            return f.read()
    except (IOError, OSError):
        return None


def _readlink(path):
    try:
        return os.readlink(path)
    except OSError:
        return None


class Http(object):
    """The probe's I/O: a TCP connect, then HTTP through one keep-alive requests session."""

    def __init__(self, params, expect_fn):
        parsed = urlparse(params['url'])
        self.host = parsed.hostname
        self.port = parsed.port or (443 if parsed.scheme == 'https' else 80)
        self.params = params
        self.expect_fn = expect_fn
        self.session = requests.Session()
        self.session.verify = params['validate_certs']
        # proxies from the environment must not capture a probe of the local server
        self.session.trust_env = self.host not in ('127.0.0.1', 'localhost', '::1')

    def connect(self, timeout):
        t0 = time.monotonic()
        try:
            sock = socket.create_connection((self.host, self.port), timeout=timeout)
            sock.close()
        except ConnectionRefusedError:
            return classify_error('refused', '', time.monotonic() - t0)
        except socket.timeout:
            return classify_error('timeout', 'connect', time.monotonic() - t0)
        except (OSError, socket.error) as exc:
            return classify_error('error', 'connect: %s' % exc, time.monotonic() - t0)
        return Outcome(OK, None, 'port open', None, time.monotonic() - t0)

    def request(self, step, model, timeout):
        p = self.params
        req = build_request(step, p['url'], model=model, prompt=p['prompt'], max_tokens=p['max_tokens'],
                            api_key=p['api_key'], headers=p['headers'])
        t0 = time.monotonic()
        try:
            resp = self.session.request(req.method, req.url, headers=req.headers, json=req.body,
                                        timeout=(min(2.0, timeout), timeout), allow_redirects=False)
            body = resp.content
        except requests.exceptions.SSLError as exc:
            return classify_error('tls', str(exc), time.monotonic() - t0)
        except requests.exceptions.Timeout:
            return classify_error('timeout', '%.1fs' % timeout, time.monotonic() - t0)
        except requests.exceptions.ConnectionError as exc:
            if 'refused' in str(exc).lower():
                return classify_error('refused', '', time.monotonic() - t0)
            return classify_error('error', 'connection error: %s' % exc.__class__.__name__, time.monotonic() - t0)
        except requests.exceptions.RequestException as exc:
            return classify_error('error', 'request error: %s' % exc.__class__.__name__, time.monotonic() - t0)
        latency = time.monotonic() - t0
        return classify_http(step, resp.status_code, body, latency, self.expect_fn, p['expect'])

    def close(self):
        self.session.close()


class Progress(object):
    """Atomically rewritten JSON status for a controller-side live display."""

    def __init__(self, path, secrets):
        self.path = path
        self.secrets = secrets
        self.last_write = None
        self.last_key = None
        self.gpus = []
        self.gpus_at = None

    def due(self, now, key):
        return self.last_write is None or key != self.last_key or now - self.last_write >= PROGRESS_EVERY

    def gpus_due(self, now, key):
        # nvidia-smi costs far more than a poll: at a phase change, else at most every PROGRESS_GPU_EVERY
        phase_changed = self.last_key is None or key[0] != self.last_key[0]
        return phase_changed or self.gpus_at is None or now - self.gpus_at >= PROGRESS_GPU_EVERY

    def write(self, now, key, status):
        self.last_write, self.last_key = now, key
        status = dict(status)
        if status.get('last_line'):
            status['last_line'] = redact(status['last_line'], self.secrets)
        status['gpus'] = self.gpus
        status['updated'] = round(time.time(), 1)
        directory = os.path.dirname(os.path.abspath(self.path))
        fd, tmp = tempfile.mkstemp(dir=directory, prefix='.%s.' % os.path.basename(self.path))
        try:
            os.fchmod(fd, 0o600)
            owner = os.stat(directory).st_uid
            if os.geteuid() == 0 and owner != 0:
                # become root from a login user: hand the file to the owner of the directory (Ansible's remote tmp
                # dir), so the controller's live display can read it over the connection without become
                os.fchown(fd, owner, -1)
            with os.fdopen(fd, 'w') as f:
                json.dump(status, f, sort_keys=True)
            os.rename(tmp, self.path)
        except (IOError, OSError):
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


def compile_expect(module, expect):
    if expect is None:
        return None
    if not HAS_JMESPATH:
        module.fail_json(msg=missing_required_lib('jmespath'), exception=JMESPATH_IMP_ERR, ready=False, reason=None)
    try:
        return jmespath.compile(expect).search
    except jmespath.exceptions.JMESPathError as exc:
        module.fail_json(msg='expect is not a valid JMESPath expression: %s' % exc, ready=False, reason=None)


def finish(module, machine, host, params, secrets, progress, extra=None):
    """Build the result (both outcomes) and exit."""
    result = machine.result()
    result['journal'] = [redact(line, secrets) for line in result['journal']]
    result['msg'] = redact(result['msg'], secrets)
    if params['unit']:
        since = machine.wall_start
        first = machine.digest.first_realtime_us
        if first:
            since = min(since, first / 1e6)
        result['journal_cmd'] = operator_journal_cmd(params['unit'], since_epoch=since - 1)
    result['gpus'] = host.gpus()
    if extra:
        result.update(extra)
    if progress is not None:
        try:
            progress.gpus = result['gpus']
            progress.write(time.monotonic(), None, machine.progress(machine.ended_at))
        except (IOError, OSError) as exc:
            module.warn('could not write progress_file: %s' % exc)
    if host.journal_warning:
        module.warn(host.journal_warning)
    if result['ready']:
        module.exit_json(changed=False, **result)
    module.fail_json(**result)


def run_check_mode(module, params, machine, host):
    props = None
    note = None
    if params['unit'] and host.systemctl:
        props, err = host.show()
        if props is not None:
            machine.props = props
        else:
            note = err
    endpoint = machine.probe_summary()['endpoint']
    msg = 'check mode: would wait up to %ss for %s%s to answer probe %s at %s' % (
        int(params['timeout']) if params['timeout'] == int(params['timeout']) else params['timeout'],
        params['unit'] or 'the endpoint', '' if not params['unit'] else ' and its endpoint', params['probe'], endpoint)
    result = machine.result(machine.start)
    result.update(msg=msg, reason=None, hint=None, gpus=[])
    result['watch'] = {
        'unit': params['unit'], 'url': params['url'], 'probe': params['probe'], 'endpoint': endpoint,
        'model': params['model'], 'timeout': params['timeout'], 'stall_timeout': params['stall_timeout'],
        'max_restarts': params['max_restarts'], 'since': params['since'], 'unit_query_error': note,
    }
    module.exit_json(changed=False, **result)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    errors = validate(params)
    if errors:
        module.fail_json(msg='; '.join(errors), ready=False, reason=None)
    if not HAS_REQUESTS:
        module.fail_json(msg=missing_required_lib('requests'), exception=REQUESTS_IMP_ERR, ready=False, reason=None)
    expect_fn = compile_expect(module, params['expect'])

    cfg = Config(timeout=params['timeout'], request_timeout=params['request_timeout'],
                 stall_timeout=params['stall_timeout'], max_restarts=params['max_restarts'],
                 poll_interval=params['poll_interval'], max_poll_interval=params['max_poll_interval'],
                 probe=params['probe'], unit=params['unit'], url=params['url'].rstrip('/'), model=params['model'])
    machine = WaitMachine(cfg, time.monotonic(), time.time())
    host = Host(module, params['unit'])
    if module.check_mode:
        run_check_mode(module, params, machine, host)

    secrets = [params['api_key']] + [str(v) for k, v in params['headers'].items() if SECRET_HEADER_RE.search(k)]
    progress = Progress(params['progress_file'], secrets) if params['progress_file'] else None
    http = Http(params, expect_fn)
    first_poll = True
    show_errors = 0
    try:
        while True:
            now = time.monotonic()
            plan = machine.plan(now)
            props = entries = pid_alive = probe = None
            if plan.poll_unit:
                props, err = host.show()
                if props is None:
                    show_errors += 1
                    if show_errors >= 3:
                        module.fail_json(msg='systemctl show %s failed: %s' % (params['unit'], err), ready=False, reason=None,
                                         elapsed=round(time.monotonic() - machine.start, 3))
                    machine.next_unit_poll = now + 1.0
                else:
                    show_errors = 0
                    if first_poll:
                        entries = host.first_journal(props, params['since'], time.monotonic(), time.time())
                        first_poll = False
                    else:
                        entries = host.next_journal()
                    if entries is None:
                        machine.journal_unreadable()
            elif plan.check_pid:
                pid_alive = os.path.exists('/proc/%d' % machine.main_pid)
            if plan.probe_step == 'connect':
                outcome = http.connect(plan.request_timeout)
                known = props or machine.props
                if outcome.kind == OK and known is not None and host.port_owner(http.port, known) is False:
                    # a 200 from a port proves nothing when another process (an old server) holds it
                    holder = host.port_holder()
                    outcome = Outcome(FOREIGN, None, FOREIGN_DETAIL % (http.port, params['unit'], holder),
                                      FOREIGN_HINT % (http.port, holder, http.port), outcome.latency)
                probe = ('connect', outcome)
            elif plan.probe_step is not None:
                probe = (plan.probe_step, http.request(plan.probe_step, machine.model, plan.request_timeout))
            now = time.monotonic()
            decision = machine.step(now, unit=props, journal=entries, pid_alive=pid_alive, probe=probe)
            if progress is not None:
                key = (len(machine.digest.phases), machine.props and machine.props.active_state, machine.port_open, machine.restarts)
                if progress.due(now, key):
                    if host.nvidia_smi and progress.gpus_due(now, key):
                        progress.gpus, progress.gpus_at = host.gpus(), now
                    try:
                        progress.write(now, key, machine.progress(now))
                    except (IOError, OSError) as exc:
                        module.warn('could not write progress_file %s: %s' % (params['progress_file'], exc))
                        progress = None
            if decision.action != 'wait':
                break
            time.sleep(decision.delay)

        if params['unit'] and machine.journal_ok:
            # the last lines (a crash's traceback, "ready to roll") can reach the journal just after
            # the state change or the answer that ended the wait
            settle = SETTLE_READS if machine.failure is not None else 0
            for attempt in range(settle + 1):
                late = host.next_journal()
                if late:
                    machine.absorb_journal(late, time.monotonic())
                if machine.digest.cause()[0] is not None or attempt == settle:
                    break
                time.sleep(SETTLE_DELAY)
    finally:
        http.close()
    finish(module, machine, host, params, secrets, progress)


if __name__ == '__main__':
    main()
