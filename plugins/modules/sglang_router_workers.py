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

import json
import time
import uuid

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.parse import quote
from ansible.module_utils.urls import open_url

from ansible_collections.llmops.sglang.plugins.module_utils.file_adapters import UnsafePath
from ansible_collections.llmops.sglang.plugins.module_utils.router_desired import after as desired_after
from ansible_collections.llmops.sglang.plugins.module_utils.router_desired_adapters import load as load_desired
from ansible_collections.llmops.sglang.plugins.module_utils.router_desired_adapters import store as store_desired
from ansible_collections.llmops.sglang.plugins.module_utils.router_rotation import listed, normalize_url, plan

REQUESTS_COUNTER = "sglang:num_requests_total"


class RouterError(Exception):
    pass


class Router(object):
    def __init__(self, url, api_key, timeout):
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout

    def call(self, method, path, body=None):
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        data = json.dumps(body) if body is not None else None
        try:
            response = open_url(self.url + path, method=method, data=data, headers=headers, timeout=self.timeout,
                                validate_certs=True)
            raw = response.read()
        except Exception as err:  # HTTPError, URLError, socket errors: all say what went wrong
            detail = ""
            if hasattr(err, "read"):
                try:
                    detail = err.read().decode("utf-8", "replace")[:300]
                except Exception:
                    detail = ""
            raise RouterError("%s %s%s: %s %s" % (method, self.url, path, err, detail))
        try:
            return json.loads(raw.decode("utf-8") or "null")
        except ValueError:
            raise RouterError("%s %s%s: not JSON: %r" % (method, self.url, path, raw[:200]))

    def workers(self):
        return listed(self.call("GET", "/workers"))


def requests_served(worker, timeout):
    """The worker's sglang:num_requests_total summed over its samples, or None without metrics."""
    try:
        text = open_url(worker + "/metrics", timeout=timeout).read().decode("utf-8", "replace")
    except Exception:
        return None
    total, seen = 0.0, False
    for line in text.splitlines():
        if line.startswith(REQUESTS_COUNTER + "{") or line.startswith(REQUESTS_COUNTER + " "):
            try:
                total += float(line.rsplit(" ", 1)[1])
                seen = True
            except ValueError:
                pass
    return total if seen else None


def verify_routes(router, workers, listing, count, timeout):
    """{url: 'routed'|'listed'} or raises RouterError naming the worker the router did not route to."""
    out = {}
    for url in workers:
        record = listing.get(url) or {}
        before = requests_served(url, timeout)
        if before is None:
            if not record.get("is_healthy"):
                raise RouterError("the router lists %s but not as healthy" % url)
            out[url] = "listed"
            continue
        model = record.get("model_id") or "default"
        out[url] = "listed"
        for attempt in range(max(1, count)):
            # A prefix of its own each time: cache_aware sends a prompt that matches no worker's prefix tree to the
            # worker with the smallest tree, which a worker just admitted has.
            router.call("POST", "/v1/completions", {"model": model, "prompt": "%s-%d llmops route check %s"
                                                    % (uuid.uuid4().hex, attempt, url), "max_tokens": 1})
            now = requests_served(url, timeout)
            if now is not None and now > before:
                out[url] = "routed"
                break
        if out[url] == "listed" and not record.get("is_healthy"):
            raise RouterError("the router lists %s but not as healthy, and %d requests through %s went to other "
                              "workers" % (url, count, router.url))
    return out


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
    router = Router(params["url"], params["api_key"], params["timeout"])
    wanted = [normalize_url(url) for url in params["workers"]]
    try:
        before = router.workers()
        todo = {"add": [], "remove": []}
        if params["state"] != "listed":
            todo = plan(before, wanted, params["state"], params["prune"])
        changed = bool(todo["add"] or todo["remove"])
        saved = desired = None
        if params["desired_file"]:
            saved = load_desired(params["desired_file"])
            desired = desired_after(saved, list(before), wanted, params["state"], params["prune"])
            # Before the router is told: a router restarting between the two never gets back a worker removed here.
            if desired != saved and params["state"] != "listed":
                changed = True
                if not module.check_mode:
                    store_desired(params["desired_file"], desired)
        if (todo["add"] or todo["remove"]) and not module.check_mode:
            for url, worker_id in todo["remove"]:
                router.call("DELETE", "/workers/" + quote(str(worker_id), safe=""))
            for url in todo["add"]:
                body = {"url": url}
                if params["worker_api_key"]:
                    body["api_key"] = params["worker_api_key"]
                router.call("POST", "/workers", body)
        after = before
        if not module.check_mode:
            deadline = time.time() + max(0, params["wait"])
            while True:
                after = router.workers()
                missing = [url for url in todo["add"] if url not in after]
                stay = [url for url, _id in todo["remove"] if url in after]
                if not (missing or stay) or time.time() >= deadline:
                    break
                time.sleep(1)
            if params["wait"] > 0 and (missing or stay):
                module.fail_json(
                    msg="after %ds the router %s %s" % (params["wait"], params["url"], "; ".join(
                        (["does not list %s (its health check has not passed)" % ", ".join(missing)] if missing else [])
                        + (["still lists %s" % ", ".join(stay)] if stay else []))),
                    workers=list(after.values()), urls=sorted(after), added=todo["add"],
                    removed=[url for url, _id in todo["remove"]])
        verified = None
        if params["verify"] and params["state"] == "present" and not module.check_mode:
            # Only what this call added: a worker listed already is in rotation (the router health-checks it).
            verified = verify_routes(router, todo["add"], after, params["verify_requests"], params["timeout"])
    except RouterError as err:
        module.fail_json(msg=str(err))
    except (UnsafePath, ValueError) as err:
        module.fail_json(msg="desired_file: %s" % err)
    except OSError as err:
        module.fail_json(msg="desired_file %s: %s" % (params["desired_file"], err))
    result = dict(changed=changed, workers=list(after.values()), urls=sorted(after), added=todo["add"],
                  removed=[url for url, _id in todo["remove"]])
    if verified is not None:
        result["verified"] = verified
    if desired is not None:
        result["desired"] = desired
        result["desired_changed"] = desired != saved and params["state"] != "listed"
    if module._diff:
        projected = sorted((set(before) - set(url for url, _id in todo["remove"])) | set(todo["add"]))
        result["diff"] = [{"before_header": "%s workers" % params["url"], "after_header": "%s workers" % params["url"],
                           "before": "\n".join(sorted(before)) + "\n", "after": "\n".join(projected) + "\n"}]
        if desired is not None:
            result["diff"].append({"before_header": params["desired_file"], "after_header": params["desired_file"],
                                   "before": "".join(url + "\n" for url in (saved or [])),
                                   "after": "".join(url + "\n" for url in desired)})
    module.exit_json(**result)


if __name__ == "__main__":
    main()
