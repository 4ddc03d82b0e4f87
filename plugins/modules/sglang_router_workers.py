#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: sglang_router_workers
short_description: List, add and remove the workers of an sglang-router 0.3.2
version_added: 0.1.0
description:
  - Talks to the router's worker API (C(GET /workers), C(POST /workers), C(DELETE /workers/{id}); see docs/router.md)
    and makes the listed workers match O(workers) and O(state).
  - The router adds a worker in the background, once its health check passes; with O(wait) the module waits until
    every added worker is listed (and every removed one gone), at most O(wait) seconds, and fails naming the workers
    that did not get there.
  - Removing a worker takes it out of the rotation at once; requests the router already sent to it run to their end.
  - With O(desired_file), the router host's list of the workers that router should come back with after a restart
    of its own (a crash, a reboot) is kept in step. It is written before the router is told, so a router that restarts
    between the two never gets back a worker this call removes. See docs/router.md.
author:
  - llmops.sglang maintainers (@llmops)
options:
  url:
    description: The router's base URL, e.g. V(http://127.0.0.1:30080).
    type: str
    required: true
  api_key:
    description: The router's API key (C(--api-key)), sent as an C(Authorization) Bearer header. Never logged.
    type: str
  worker_api_key:
    description:
      - The workers' API key (their C(sglang_api_key)), sent in the C(api_key) field of C(POST /workers) for every
        worker this call adds. Never logged, never returned (the router's listing does not show it).
      - sglang-router 0.3.2 then sends it on its own calls to that worker (its discovery of C(/server_info) and
        C(/model_info), health checks); without it a keyed worker answers those 401, the router lists it with
        C(model_id) C(unknown) and logs C(Adding worker ... without API key while router has API key configured)
        (measured, docs/router.md).
      - A worker already listed is left as it is (the key of a listed worker cannot be read back); the router role
        restarts the router when its key changes, which registers every worker anew.
    type: str
  workers:
    description: Worker URLs (V(http://HOST:PORT)) this task is about. Empty with O(state=listed).
    type: list
    elements: str
    default: []
  state:
    description:
      - V(present) adds the workers the router does not list; V(absent) removes the listed ones; V(listed) only
        reads.
    type: str
    choices: [present, absent, listed]
    default: listed
  prune:
    description: With O(state=present), also remove listed workers that are not in O(workers).
    type: bool
    default: false
  wait:
    description: Seconds to wait until the router's listing shows the change (0 does not wait).
    type: int
    default: 0
  timeout:
    description: Seconds for each HTTP request.
    type: int
    default: 10
  verify:
    description:
      - With O(state=present), prove that the router routes to each worker this call added - sends short completions (distinct
        prompts, C(max_tokens) 1) through the router, at most O(verify_requests), until the worker's own
        C(sglang:num_requests_total) (its C(/metrics), read from where this module runs) went up.
      - When none of those requests reached it (a policy may prefer others) or it has no C(--enable-metrics), the
        router's listing decides (C(is_healthy)); RV(verified) says which (C(routed) or C(listed)).
    type: bool
    default: false
  verify_requests:
    description: The most requests O(verify) sends per worker.
    type: int
    default: 20
  desired_file:
    description:
      - The router's desired-workers file on the host this module runs on (the router role's
        C(/var/lib/llmops-sglang/router/NAME.workers.json), a JSON object whose C(workers) lists the URLs), which the role's launcher
        hands to the router at every start (C(--worker-urls)). Unset, no file is read or written.
      - O(state=present) adds O(workers) to it (with O(prune) it becomes exactly O(workers)); O(state=absent) removes
        them; O(state=listed) only reads it. Without the file yet, the router's listing before the call is the
        starting point.
      - Written whole (root 0600, temporary name and rename) B(before) any C(POST) or C(DELETE), into a directory only
        root can change, without following a symlink another user could have placed; a file that is not root's alone
        or not such a list is refused, naming it.
    type: path
attributes:
  check_mode:
    support: full
    description: Reads the listing and reports what would be added or removed, changes nothing.
  diff_mode:
    support: full
    description: The listed worker URLs before and after (and those of O(desired_file)).
  platform:
    support: full
    platforms: posix
    description: Any host that reaches the router's URL (usually the router's own, with C(delegate_to)).
"""

EXAMPLES = r"""
- name: Take a worker out of rotation on a router (on the router's host)
  llmops.sglang.sglang_router_workers:
    url: http://127.0.0.1:30080
    api_key: "{{ router_api_key }}"
    workers: [http://10.0.0.11:30000]
    state: absent
    wait: 30
    # the router host's list of what it comes back with after a restart of its own: written before the DELETE
    desired_file: /var/lib/llmops-sglang/router/sglang-router.workers.json

- name: Admit it again (a keyed worker, with its key) and wait until the router lists it
  llmops.sglang.sglang_router_workers:
    url: http://127.0.0.1:30080
    api_key: "{{ router_api_key }}"
    worker_api_key: "{{ sglang_api_key }}"
    workers: [http://10.0.0.11:30000]
    state: present
    wait: 120
"""

RETURN = r"""
workers:
  description: The router's listing after the change (its C(GET /workers) C(workers) records).
  returned: always
  type: list
  elements: dict
urls:
  description: The listed worker URLs after the change.
  returned: always
  type: list
  elements: str
added:
  description: Worker URLs added (or that would be, in check mode).
  returned: always
  type: list
  elements: str
removed:
  description: Worker URLs removed (or that would be, in check mode).
  returned: always
  type: list
  elements: str
verified:
  description: With O(verify), per worker URL how it was shown to serve through the router (C(routed) or C(listed)).
  returned: when O(verify) is set
  type: dict
desired:
  description: The worker URLs O(desired_file) lists after the call (what it would list, in check mode).
  returned: when O(desired_file) is set
  type: list
  elements: str
desired_changed:
  description: Whether O(desired_file) changed (or would, in check mode).
  returned: when O(desired_file) is set
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.llmops.sglang.plugins.module_utils.router import router_workers
from ansible_collections.llmops.sglang.plugins.module_utils.router.router_workers_adapters import DesiredFile, Router
from ansible_collections.llmops.sglang.plugins.module_utils.host.host_adapters import SystemClock


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            api_key=dict(type="str", no_log=True),
            worker_api_key=dict(type="str", no_log=True),
            workers=dict(type="list", elements="str", default=[]),
            state=dict(type="str", choices=["present", "absent", "listed"], default="listed"),
            prune=dict(type="bool", default=False),
            wait=dict(type="int", default=0),
            timeout=dict(type="int", default=10),
            verify=dict(type="bool", default=False),
            verify_requests=dict(type="int", default=20),
            desired_file=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    router = Router(params["url"], params["api_key"], params["timeout"], open_url)
    try:
        # The deciding is router_workers.run's (docs/router.md); the adapters do the I/O and name what failed.
        result = router_workers.run(params, router, DesiredFile(params["desired_file"]), SystemClock(),
                                    check_mode=module.check_mode, want_diff=module._diff)
    except (router_workers.RouterError, router_workers.DesiredFileError) as err:
        module.fail_json(msg=str(err))
    if "msg" in result:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
