# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One call of sglang_router_workers, decided and driven (no I/O of its own; docs/router.md).

``run`` reads the router's listing (and the desired-workers file) once, decides what to add and remove
(``router_rotation.plan``) and what the file lists after the call (``router_desired.after``), writes the file before
the router is told (read, decided and written under the file's lock: a batch's hosts call at once), tells the router,
waits until its listing shows the change (``settle``: a clock and a sleeper passed in), proves that the router routes
to each worker it added (``verify``) and builds the module's result.

Adapters (router_workers_adapters): router (``workers()`` -> {url: record}, ``remove(worker_id)``,
``add(url, api_key)``, ``complete(model, prompt)``, ``metrics(worker_url)`` -> text or None, ``url``); desired
(``locked()`` -> a context manager, ``load()`` -> [urls] or None, ``store(urls)``, ``path``); clock
(``monotonic()``, ``sleep(seconds)``). They raise
RouterError or DesiredFileError with the message the module fails with.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import uuid

from ansible_collections.llmops.sglang.plugins.module_utils.router.router_desired import after as desired_after
from ansible_collections.llmops.sglang.plugins.module_utils.router.router_rotation import normalize_url, plan

REQUESTS_COUNTER = "sglang:num_requests_total"


class RouterError(Exception):
    """The router (or its answer) cannot be used: the message says which call and what came back."""


class DesiredFileError(Exception):
    """The desired-workers file cannot be read or written: the message names it and says why."""


def requests_total(metrics_text):
    """A worker's sglang:num_requests_total summed over its samples, from its /metrics text; None without it."""
    total, seen = 0.0, False
    for line in (metrics_text or "").splitlines():
        if line.startswith(REQUESTS_COUNTER + "{") or line.startswith(REQUESTS_COUNTER + " "):
            try:
                total += float(line.rsplit(" ", 1)[1])
                seen = True
            except ValueError:
                pass
    return total if seen else None


def decide(before, wanted, state, prune, saved=None, has_file=False):
    """What one call changes: {'todo': {'add': [urls], 'remove': [(url, id)]}, 'desired': [urls] | None,
    'desired_changed': bool, 'changed': bool}. before: the router's listing {url: record}; saved: the desired-workers
    file's URLs (None: no file yet); has_file: the call keeps such a file."""
    todo = {"add": [], "remove": []}
    if state != "listed":
        todo = plan(before, wanted, state, prune)
    desired = desired_after(saved, list(before), wanted, state, prune) if has_file else None
    desired_changed = has_file and desired != saved and state != "listed"
    return {"todo": todo, "desired": desired, "desired_changed": desired_changed,
            "changed": bool(todo["add"] or todo["remove"]) or desired_changed}


def unsettled(listing, todo):
    """(added URLs the listing does not show yet, removed URLs it still shows)."""
    return ([url for url in todo["add"] if url not in listing],
            [url for url, _id in todo["remove"] if url in listing])


def settle(router, todo, wait, clock):
    """Re-read the listing until it shows every added worker and none removed, at most ``wait`` seconds (a read a
    second). Returns (listing, missing, stay)."""
    deadline = clock.monotonic() + max(0, wait)
    while True:
        listing = router.workers()
        missing, stay = unsettled(listing, todo)
        if not (missing or stay) or clock.monotonic() >= deadline:
            return listing, missing, stay
        clock.sleep(1)


def settle_failure(wait, url, missing, stay):
    """The message of a call whose wait ended before the listing showed the change; None when it did (or no wait)."""
    if wait <= 0 or not (missing or stay):
        return None
    return "after %ds the router %s %s" % (wait, url, "; ".join(
        (["does not list %s (its health check has not passed)" % ", ".join(missing)] if missing else [])
        + (["still lists %s" % ", ".join(stay)] if stay else [])))


def _nonce():
    return uuid.uuid4().hex


def verify(router, workers, listing, count, nonce=_nonce):
    """{url: 'routed'|'listed'} for the workers this call added, or raises RouterError naming the worker the router
    did not route to: completions through the router until the worker's own request counter went up; without the
    counter (no --enable-metrics) or when none of them reached it, the router's listing (is_healthy) decides."""
    out = {}
    for url in workers:
        record = listing.get(url) or {}
        before = requests_total(router.metrics(url))
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
            router.complete(model, "%s-%d llmops route check %s" % (nonce(), attempt, url))
            now = requests_total(router.metrics(url))
            if now is not None and now > before:
                out[url] = "routed"
                break
        if out[url] == "listed" and not record.get("is_healthy"):
            raise RouterError("the router lists %s but not as healthy, and %d requests through %s went to other "
                              "workers" % (url, count, router.url))
    return out


def _lines(urls):
    return "".join(url + "\n" for url in urls)


def diff(url, before, todo, desired_path=None, saved=None, desired=None):
    """The module's diff: the router's listed URLs before and after (and the desired-workers file's)."""
    projected = sorted((set(before) - set(u for u, _id in todo["remove"])) | set(todo["add"]))
    out = [{"before_header": "%s workers" % url, "after_header": "%s workers" % url,
            "before": "\n".join(sorted(before)) + "\n", "after": "\n".join(projected) + "\n"}]
    if desired is not None:
        out.append({"before_header": desired_path, "after_header": desired_path,
                    "before": _lines(saved or []), "after": _lines(desired)})
    return out


def run(params, router, desired, clock, check_mode=False, want_diff=False):
    """The whole call; returns the module's result (with ``msg`` when it failed: the wait ended first)."""
    wanted = [normalize_url(url) for url in params["workers"]]
    before = router.workers()
    # Read, change and write under the file's lock: a batch's hosts call this at once on one router host.
    with desired.locked():
        saved = desired.load() if desired.path else None
        call = decide(before, wanted, params["state"], params["prune"], saved, bool(desired.path))
        # Before the router is told: a router restarting between the two never gets back a worker removed here.
        if call["desired_changed"] and not check_mode:
            desired.store(call["desired"])
    todo = call["todo"]
    removed = [url for url, _id in todo["remove"]]
    listing = before
    if not check_mode:
        for _url, worker_id in todo["remove"]:
            router.remove(worker_id)
        for url in todo["add"]:
            router.add(url, params["worker_api_key"])
        listing, missing, stay = settle(router, todo, params["wait"], clock)
        failure = settle_failure(params["wait"], params["url"], missing, stay)
        if failure:
            return dict(msg=failure, workers=list(listing.values()), urls=sorted(listing), added=todo["add"],
                        removed=removed)
    result = dict(changed=call["changed"], workers=list(listing.values()), urls=sorted(listing), added=todo["add"],
                  removed=removed)
    if params["verify"] and params["state"] == "present" and not check_mode:
        # Only what this call added: a worker listed already is in rotation (the router health-checks it).
        result["verified"] = verify(router, todo["add"], listing, params["verify_requests"])
    if call["desired"] is not None:
        result.update(desired=call["desired"], desired_changed=call["desired_changed"])
    if want_diff:
        result["diff"] = diff(params["url"], before, todo, desired.path, saved, call["desired"])
    return result
