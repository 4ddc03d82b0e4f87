#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: sglang_canary
short_description: Judge a new SGLang configuration by how it serves - latency, throughput, errors and its answers
version_added: 0.1.0
description:
  - Sends a bounded, streamed load straight to a server that has just answered its first completion
    (M(llmops.sglang.sglang_wait_ready)) and judges it against a baseline, on the host that runs it.
  - "The load: O(rounds) rounds, each the golden answers (every prompt once, concurrency 1, temperature 0, the
    answer as long as the model makes it) and then each concurrency level of O(concurrency) (twice as many requests
    as the level, at least one per prompt; temperature 0, C(ignore_eos), so every answer is O(max_tokens) long)."
  - "Figures per level and round, measured by the client from the stream: the median time to first token, the
    median time per output token after the first, and the throughput (output tokens per second of the round). A
    figure fails when its median is past the threshold as a ratio to the baseline's, every canary round is worse
    than every baseline round (a one-sided rank test; with 3 rounds against 3, p = 0.05), and a latency differs by
    more than O(floors) milliseconds."
  - "The baseline: a live instance on the old configuration (O(baseline_url)), measured in the same window (rounds
    alternate); else the figures recorded at this instance's last passed analysis (O(record_file)); else none, and
    only the errors and the answers are judged. A live baseline first gets up to 30 s to finish other clients'
    requests; one that fails a request, or generates tokens for other clients during the window (its
    C(sglang:generation_tokens_total) against what the analysis asked of it), is set aside for the recorded figures,
    and the table says why."
  - "Errors fail on their own (O(thresholds).errors, default none). Each golden answer must equal the last verified
    one (or the live baseline's), unless O(answers=changed) declares that this deploy changes answers; what a prompt
    declares in O(prompts) (C(expect), C(reasoning)) is always checked."
  - On a pass it records the figures and the answers in O(record_file) (root-only, written whole). A failed analysis
    fails the task with the table of canary against baseline, figure by figure.
  - The judgement lives in C(plugins/module_utils/canary/analysis.py), the loop in C(canary_driver.py), the
    requests in C(canary_adapters.py).
author:
  - llmops.sglang maintainers (@llmops)
requirements:
  - On the managed node the Python library C(requests) (the collection's server role installs it).
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: In check mode no request is sent and nothing is recorded.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
options:
  url:
    description: Base URL of the canary (its C(/v1/chat/completions) and C(/metrics) are used).
    type: str
    required: true
  model:
    description: The served model name the requests ask for.
    type: str
    required: true
  api_key:
    description: Bearer token of the canary and of the baseline.
    type: str
  baseline_url:
    description:
      - Base URL of an instance of the same box class still on the old configuration, measured side by side.
      - The server role passes the peer that C(playbooks/deploy_k26.yml)'s plan chose, out of the routers for the window.
        An instance that serves other clients meanwhile is no yardstick (see the description).
    type: str
  record_file:
    description: Where the figures and answers of the last passed analysis are kept (a root-only directory).
    type: path
    required: true
  record:
    description: Record the figures and answers when the analysis passes.
    type: bool
    default: true
  prompts:
    description:
      - The golden prompts, each a dict with C(prompt) and optionally C(expect) (substrings the answer must contain)
        and C(reasoning) (true - the answer must have a reasoning section). Empty - four built-in prompts.
    type: list
    elements: dict
    default: []
  concurrency:
    description: The concurrency levels of each round.
    type: list
    elements: int
    default: [1, 4, 8]
  rounds:
    description: Rounds (at least 2). More rounds make the rank test stronger and the analysis longer.
    type: int
    default: 3
  max_tokens:
    description: Output tokens of each answer.
    type: int
    default: 32
  thresholds:
    description:
      - "Ratios to the baseline: C(tpot) (time per output token, default 1.25 - at most 1.25x), C(ttft) (time to
        first token, default 1.5), C(throughput) (default 0.8 - at least 0.8x); C(errors) the fraction of failed
        requests allowed (default 0)."
    type: dict
    default: {}
  floors:
    description: Milliseconds a latency must differ by to be judged, C(tpot) (default 2) and C(ttft) (default 20).
    type: dict
    default: {}
  answers:
    description:
      - V(compare) the golden answers with the last verified ones; V(changed) this deploy is meant to change them
        (not compared, recorded anew); V(off) only the prompts' declarations are checked.
    type: str
    choices: [compare, changed, 'off']
    default: compare
  timeout:
    description: Seconds one request may take.
    type: float
    default: 120
  validate_certs:
    description: Verify TLS certificates.
    type: bool
    default: true
'''

EXAMPLES = r'''
- name: Judge the canary against the figures of its last passed analysis
  llmops.sglang.sglang_canary:
    url: http://127.0.0.1:30000
    model: kimi-k2.6
    api_key: "{{ sglang_api_key }}"
    record_file: /var/lib/llmops-sglang/server/sglang-k26/canary.json

- name: Side by side with an instance on the old configuration, declaring that answers change
  llmops.sglang.sglang_canary:
    url: http://127.0.0.1:30000
    baseline_url: http://gpu-02:30000
    model: kimi-k2.6
    record_file: /var/lib/llmops-sglang/server/sglang-k26/canary.json
    answers: changed
    prompts:
      - prompt: What is the capital of France? Answer in one word.
        expect: [Paris]
'''

RETURN = r'''
passed:
  description: Whether the analysis passed.
  returned: always
  type: bool
reason:
  description: V(canary_analysis) when it failed (the fleet report's reason).
  returned: on failure
  type: str
failures:
  description: One sentence per failed figure, error count or answer.
  returned: always
  type: list
  elements: str
report:
  description: The table of canary against baseline, figure by figure, with ratio, threshold and rank test.
  returned: always
  type: list
  elements: str
rows:
  description: The table's rows (level, figure, canary, baseline, ratio, threshold, separated, p, failed).
  returned: always
  type: list
  elements: dict
baseline:
  description: What the canary was compared with (live URL, recorded date, or none and why).
  returned: always
  type: str
requests:
  description: Requests sent to the canary, and RV(errors) of them failed.
  returned: always
  type: int
errors:
  description: Failed requests of the canary.
  returned: always
  type: int
figures:
  description: The canary's figures, per level and figure, one value per round.
  returned: always
  type: dict
server_generation_tokens:
  description: Output tokens the canary's own C(/metrics) counted during the analysis (null without metrics).
  returned: always
  type: float
recorded:
  description: Whether the figures and answers were recorded.
  returned: always
  type: bool
'''

import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.llmops.sglang.plugins.module_utils.canary import analysis, canary_driver
from ansible_collections.llmops.sglang.plugins.module_utils.canary.canary_adapters import (
    HAS_REQUESTS, REQUESTS_IMP_ERR, Endpoint, read_record, run_level, write_record,
)
from ansible_collections.llmops.sglang.plugins.module_utils.host.file_adapters import UnsafePath


def main():
    module = AnsibleModule(argument_spec=dict(
        url=dict(type='str', required=True), model=dict(type='str', required=True), api_key=dict(type='str', no_log=True),
        baseline_url=dict(type='str'), record_file=dict(type='path', required=True), record=dict(type='bool', default=True),
        prompts=dict(type='list', elements='dict', default=[]), concurrency=dict(type='list', elements='int', default=[1, 4, 8]),
        rounds=dict(type='int', default=3), max_tokens=dict(type='int', default=32, no_log=False), thresholds=dict(type='dict', default={}),
        floors=dict(type='dict', default={}), answers=dict(type='str', choices=['compare', 'changed', 'off'], default='compare'),
        timeout=dict(type='float', default=120.0), validate_certs=dict(type='bool', default=True),
    ), supports_check_mode=True)
    opts = dict(module.params, prompts=module.params['prompts'] or analysis.DEFAULT_PROMPTS)
    problems = analysis.check_options(opts['prompts'], opts['concurrency'], opts['rounds'], opts['max_tokens'],
                                      opts['thresholds'], opts['floors'], opts['answers'])
    if problems:
        module.fail_json(msg='Invalid canary analysis options: %s' % '; '.join(problems), passed=False)
    if not HAS_REQUESTS:
        module.fail_json(msg=missing_required_lib('requests'), exception=REQUESTS_IMP_ERR, passed=False)
    if module.check_mode:
        module.exit_json(changed=False, passed=True, skipped=True, msg='check mode: no load sent, nothing recorded')
    try:
        recorded = read_record(opts['record_file'])
    except (UnsafePath, OSError) as exc:
        module.fail_json(msg='the recorded canary figures cannot be trusted: %s' % exc, passed=False)

    def endpoint(url):
        return Endpoint(url, opts['api_key'], validate_certs=opts['validate_certs'], timeout=opts['timeout'])

    baseline = endpoint(opts['baseline_url']) if opts['baseline_url'] else None
    result = canary_driver.analyse(opts, endpoint(opts['url']), baseline, run_level, recorded,
                                   time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()))
    record = result.pop('record')
    result['recorded'] = False
    if result['passed'] and opts['record']:
        try:
            result['recorded'] = write_record(opts['record_file'], record) or True
        except (UnsafePath, OSError) as exc:
            module.warn('the canary figures of %s were not recorded in %s: %s' % (opts['url'], opts['record_file'], exc))
    if result['passed']:
        module.exit_json(changed=False, msg=result['report'][0], **result)
    module.fail_json(reason='canary_analysis', msg=analysis.failure_sentence(result), **result)


if __name__ == '__main__':
    main()
