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
  - Returns as soon as the answer is known, with RV(ready=true) once a real request (by default a chat
    completion of at most O(max_tokens) tokens at temperature 0) returns a valid body.
  - Fails at once on a terminal unit state (V(failed), V(inactive) after it had started, C(Result=start-limit-hit),
    more automatic restarts than O(max_restarts)), on a 4xx answer other than 408/429, on a stall, or at the deadline.
  - Failures carry a RV(reason) from a fixed vocabulary, a one-sentence RV(msg), a RV(hint) for known SGLang
    failure signatures, the relevant journal lines (the last Python traceback and the known fatal lines, whole)
    and the start-up RV(phases) seen in the journal.
  - Polling is cheap. Every O(poll_interval) the module checks that the unit's main PID is alive and probes the
    port (a TCP connect while it refuses, the HTTP probe once it accepts). C(systemctl show) and one incremental
    C(journalctl) read run on a jittered backoff capped at O(max_poll_interval), and at once when the main
    process disappears.
  - With O(unit) set and a local URL, an open port only counts when a process of the unit holds the listening socket,
    so an old server left on the port (or another unit) cannot make a start look ready.
  - The phase table, the failure signatures and their hints live in
    C(plugins/module_utils/sglang_signatures.py) of this collection.
author:
  - llmops.sglang maintainers (@llmops)
requirements:
  - On the managed node (the GPU host, or the host the task is delegated to) the Python libraries C(requests)
    and, when O(expect) is used, C(jmespath). The collection's server role installs them.
  - C(systemctl) and C(journalctl) when O(unit) is set. C(nvidia-smi) is used when present.
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
      - Base URL of the server (scheme, host, port; no C(/v1)). Only V(http) and V(https).
    type: str
    default: http://127.0.0.1:30000
  probe:
    description:
      - What counts as ready.
      - V(chat) sends C(POST /v1/chat/completions) and V(completion) sends C(POST /v1/completions); both validate
        the body (see O(expect)).
      - V(health_generate) and V(health) need HTTP 200 from C(/health_generate) or C(/health) (SGLang runs a
        one-token generation for them). V(ready) needs HTTP 200 from C(/ready) (SGLang 0.5.23 and later).
      - C(GET /v1/models) is never taken as readiness; SGLang answers it before the model can serve.
    type: str
    choices: [chat, completion, health_generate, health, ready]
    default: chat
  model:
    description:
      - Model name sent in completions. When omitted it is discovered from C(GET /v1/models) (first id) or
        C(GET /model_info) (C(served_model_name)).
      - When given, it is checked after the completion answered, against the ids C(GET /v1/models) lists (SGLang
        answers a completion for any model name); a name the server does not serve fails with RV(reason=rejected)
        and a hint naming the served ids. A server without C(/v1/models) is not judged.
    type: str
  prompt:
    description:
      - The prompt (or user message for O(probe=chat)) of the probe request.
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
      - Pass the server's key with O(api_key), which is never logged; header values are not hidden from Ansible's
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
      - A JMESPath expression evaluated on the JSON body of a successful V(chat)/V(completion) probe; the server
        is ready only when the result is truthy. Needs C(jmespath) on the managed node.
      - Without it the default check applies, HTTP 200, at least one choice and at least one generated token
        (C(usage.completion_tokens >= 1), or a non-empty C(content), C(reasoning_content) or C(text)). A thinking
        model that answers only in C(reasoning_content), or answers with whitespace, is ready.
      - Three consecutive answers that fail the check end the wait with RV(reason=bad_response).
    type: str
  timeout:
    description:
      - Overall deadline in seconds, measured on a monotonic clock from the start of the module.
    type: float
    default: 1800
  request_timeout:
    description:
      - Time limit of one HTTP request in seconds, clipped to the time left before the deadline.
      - Timed-out requests mean "keep waiting" (warmup, JIT) and are counted in RV(probe.timeouts).
    type: float
    default: 30
  stall_timeout:
    description:
      - Fail with RV(reason=stalled) when the unit's journal shows no new line and no phase change for this many
        seconds. V(0) turns stall detection off. Needs O(unit).
    type: float
    default: 900
  max_restarts:
    description:
      - Automatic restarts of the unit (C(NRestarts), counted from the start of the wait) tolerated before the
        wait fails with RV(reason=crash_loop). With V(0) the first restart (or a pending C(auto-restart)) fails it.
    type: int
    default: 0
  since:
    description:
      - Which journal lines belong to "this start".
      - V(invocation) takes the unit's current run (its C(InvocationID)) and every run started during the wait.
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
        secrets masked. GPU memory in it is read at each new phase and otherwise at most every 60 seconds
        (C(nvidia-smi) is the costliest read of the wait).
      - When the module runs as root and the file's directory belongs to another user, the file is given to that
        user (the login user, when the directory is Ansible's remote tmp dir of a C(become) task).
      - The collection's action plugin sets it to a file in the task's remote tmp dir when it is not set (except
        under C(async), in check mode, for C(become) to an unprivileged user and with a JSON stdout callback),
        reads it every few seconds over the task's connection and prints a progress line per host on the
        controller, without C(-v). Set the variable C(sglang_wait_progress=false) to turn that display off.
    type: path
  metrics_dir:
    description:
      - When set (with O(unit)), node_exporter's textfile collector directory, where the wait keeps
        C(UNIT.phase.prom) while it lasts, with C(sglang_deploy_phase_started_timestamp_seconds{unit, phase}), the
        start-up phase the server is in and since when, so that an alert on a slow load can name the phase
        (C(llmops.sglang.monitoring)'s SGLangDeploySlow). Rewritten at each new phase, removed when the wait ends (and
        at its start, if an earlier wait was killed before its end).
      - Written as root, whole, into a directory only root can change, without following a link another user placed
        on the way (as M(llmops.sglang.sglang_textfile)). A failure to write is a warning, not a failed wait; nothing
        is written when the directory does not exist.
    type: path
notes:
  - Run it on the GPU host (the endpoint is often only reachable there), with C(become) so that the whole journal
    is readable. Use C(delegate_to) to probe an endpoint from another host (without O(unit)).
  - For long waits use C(async) with a value above O(timeout) and C(poll), so the wait does not depend on one SSH session.
  - "RV(reason) is null on success, and also when the module could not run at all (bad options, no C(systemctl)) or could
    not go on watching the unit (C(systemctl show) failed three times in a row)."
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
    - One of V(unit_failed), V(unit_inactive), V(crash_loop), V(start_limit), V(stalled), V(timeout),
      V(rejected) (a 4xx other than 408/429, a redirect, or a TLS error), V(bad_response).
    - V(unit_failed) also while the unit is still active, when its HTTP server could not bind the port
      (C([Errno 98] ... address already in use)) and another process holds it; SGLang would SIGKILL itself when its
      warmup gives up, about 2 minutes later; RV(msg) names the port and that process.
    - V(rejected) also when the completion answered but O(model) is not among the ids of C(GET /v1/models).
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
signature:
  description:
    - The name of the failure signature (the row of C(plugins/module_utils/sglang_signatures.py)) whose journal line
      names the cause, for example V(cuda_oom), V(checkpoint_incomplete), V(watchdog_timeout); RV(hint) is its hint.
    - Null on success and when no known line was seen.
  returned: always
  type: str
  sample: cuda_oom
journal:
  description:
    - The journal lines that explain the outcome, whole and in journal order, at most 60; the last Python
      traceback of the failed run (when a child process failed, the traceback before SGLang's
      C(Received sigquit) line), the known fatal lines (once each, not once per TP rank) and systemd's verdict.
    - Without a traceback or a fatal line, the last lines of the unit (where it stopped). Empty on a clean success
      and without O(unit).
  returned: always
  type: list
  elements: str
journal_cmd:
  description: The command that shows every journal line of the runs the wait watched.
  returned: when O(unit) is set
  type: str
  sample: journalctl -u sglang-k26.service --since @1795937836 --no-pager
phases:
  description:
    - Start-up phases seen in the journal, in order. A phase is recorded when its first line appears.
    - RV(phases[].at) is in seconds since the wait began, computed from the journal entry's realtime timestamp
      (RV(phases[].source=journal)); it is negative for a phase that began before the wait (the unit was already starting).
      The final V(ready) phase may come from the successful probe (RV(phases[].source=probe)).
    - RV(phases[].run) counts the unit's runs during the wait (0 for the first), for waits that tolerate restarts.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Stable identifier, one of V(init), V(weights), V(kv_cache), V(cuda_graph), V(http_up), V(warmup), V(ready).
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
      description: V(journal), V(observed) (time the line was read) or V(probe).
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
  description: The unit's state at the last poll (all values null without O(unit)).
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

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.llmops.sglang.plugins.module_utils.wait import wait_driver, wait_options
from ansible_collections.llmops.sglang.plugins.module_utils.wait.wait_adapters import (
    HAS_REQUESTS, REQUESTS_IMP_ERR, Host, Http, PhaseFile, ProgressFile,
)
from ansible_collections.llmops.sglang.plugins.module_utils.host.host_adapters import SystemClock
from ansible_collections.llmops.sglang.plugins.module_utils.wait.wait_machine import WaitMachine

JMESPATH_IMP_ERR = None
try:
    import jmespath
    HAS_JMESPATH = True
except ImportError:
    JMESPATH_IMP_ERR = traceback.format_exc()
    HAS_JMESPATH = False


def compile_expect(module, expect):
    if expect is None:
        return None
    if not HAS_JMESPATH:
        module.fail_json(msg=missing_required_lib('jmespath'), exception=JMESPATH_IMP_ERR, ready=False, reason=None)
    try:
        return jmespath.compile(expect).search
    except jmespath.exceptions.JMESPathError as exc:
        module.fail_json(msg='expect is not a valid JMESPath expression: %s' % exc, ready=False, reason=None)


def main():
    module = AnsibleModule(argument_spec=wait_options.ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    errors = wait_options.validate(params)
    if errors:
        module.fail_json(msg='; '.join(errors), ready=False, reason=None)
    if not HAS_REQUESTS:
        module.fail_json(msg=missing_required_lib('requests'), exception=REQUESTS_IMP_ERR, ready=False, reason=None)
    expect_fn = compile_expect(module, params['expect'])

    clock = SystemClock()
    machine = WaitMachine(wait_options.config(params), clock.monotonic(), clock.time())
    host = Host(module, params['unit'])
    if module.check_mode:
        module.exit_json(changed=False, **wait_driver.check(machine, host, params['since'], params['url']))

    progress = ProgressFile(params['progress_file']) if params['progress_file'] else None
    phase_file = PhaseFile(params['metrics_dir'], params['unit']) if params['metrics_dir'] else None
    result = wait_driver.run(machine, host, Http(params, expect_fn), clock, since=params['since'], progress=progress,
                             secrets=wait_options.secrets(params), warn=module.warn, phase_file=phase_file)
    if result['ready']:
        module.exit_json(changed=False, **result)
    module.fail_json(**result)


if __name__ == '__main__':
    main()
