# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure decisions of the drain-aware rollout behind sglang-router 0.3.2 (no I/O; see docs/router.md).

What the router answers (measured on sglang-router 0.3.2, the `sglang_router_rs` binary, see docs/router.md):
- `GET /workers` -> {"workers": [{"id": UUID, "url": URL, "is_healthy": bool, "load": N, ...}], "total": N, ...}
- `POST /workers {"url": URL}` -> 202 {"status": "accepted", "worker_id": UUID, ...}: the worker is added in the
  background once its health check passes (it is absent from the listing until then).
- `DELETE /workers/{id}` -> 202: the worker leaves the rotation at once; requests already sent to it go on to their
  end (a stream keeps streaming). The id is the one the listing (or the POST) gave for that URL.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.fleet_defaults import DEFAULT_INSTANCES


def normalize_url(url):
    """Worker URLs as the router keeps them: scheme://host:port without a trailing slash."""
    url = (url or "").strip().rstrip("/")
    if url and "://" not in url:
        url = "http://" + url
    return url


def worker_url(address, port, scheme="http"):
    address = str(address)
    if ":" in address and not address.startswith("["):
        address = "[%s]" % address  # IPv6
    return "%s://%s:%d" % (scheme, address, int(port))


def listed(workers_answer):
    """{url: worker record} from the router's GET /workers answer."""
    out = {}
    for worker in (workers_answer or {}).get("workers") or []:
        url = normalize_url(worker.get("url"))
        if url:
            out[url] = worker
    return out


def plan(current, wanted, state, prune=False):
    """What to do on one router: {'add': [urls], 'remove': [(url, id)]}.

    state 'present': add the wanted URLs not listed (and with prune, remove the listed ones not wanted);
    state 'absent': remove the wanted URLs that are listed."""
    wanted = [normalize_url(url) for url in wanted]
    add, remove = [], []
    if state == "present":
        add = [url for url in wanted if url not in current]
        if prune:
            remove = [(url, current[url].get("id")) for url in sorted(current) if url not in wanted]
    elif state == "absent":
        remove = [(url, current[url].get("id")) for url in wanted if url in current]
    else:
        raise ValueError("state must be present or absent, got %r" % (state,))
    return {"add": add, "remove": remove}


def _serving(entries):
    """The worker URLs that serve on one router: its listing's URLs (strings, as the module's ``urls``) or records
    (its ``workers``: a record whose ``is_healthy`` is false is listed but gets no request, so it serves nothing)."""
    out = set()
    for entry in entries or []:
        if isinstance(entry, dict):
            if entry.get("is_healthy") is False:
                continue
            entry = entry.get("url")
        url = normalize_url(entry)
        if url:
            out.add(url)
    return out


def _min_serving(value, default):
    """k26_min_serving as an int >= 0; None or '' (unset): ``default``."""
    if value is None or value == "":
        return default, False
    if isinstance(value, bool):
        raise ValueError("k26_min_serving must be an integer >= 0, got %r" % (value,))
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        raise ValueError("k26_min_serving must be an integer >= 0, got %r" % (value,))
    if number < 0:
        raise ValueError("k26_min_serving must be an integer >= 0, got %r" % (value,))
    return number, True


def capacity(fleet_workers, in_rotation, leaving, min_serving=None):
    """The capacity guard of one batch: it protects what serves now.

    fleet_workers: every worker URL of the fleet; in_rotation: {router: its listing}, as URLs or as the router's
    records (a record with ``is_healthy`` false is listed but serves nothing); leaving: the URLs this batch takes out;
    min_serving (k26_min_serving): the fewest workers every router must keep serving; None or '' (unset): all but
    this batch, i.e. after the batch every worker of the fleet outside it serves there.

    A router on which none of the batch's workers serves loses nothing to this batch and is never a reason to refuse
    (a fleet that serves nothing yet, a worker that is down or already out): the batch is refused only where it takes
    a serving worker away and leaves fewer than the minimum.
    Returns {'ok': bool, 'serving': {router: N serving after the batch}, 'taken': {router: [URLs this batch takes
    out of its serving workers]}, 'min_serving': N, 'msg': str}."""
    fleet = set(normalize_url(url) for url in fleet_workers or [])
    leaving = set(normalize_url(url) for url in leaving or []) - set([""])
    others = fleet - leaving
    floor, explicit = _min_serving(min_serving, len(others))
    serving, taken, short = {}, {}, []
    for router in sorted(in_rotation):
        now = _serving(in_rotation[router])
        left = now - leaving
        serving[router] = len(left)
        taken[router] = sorted(now & leaving)
        if not taken[router] or len(left) >= floor:
            continue
        line = "%s would keep %d (%s)" % (router, len(left), ", ".join(sorted(left)) or "none")
        missing = sorted(others - left)
        if missing and not explicit:
            line += ", %s not serving there already" % ", ".join(missing)
        short.append(line)
    rule = ("k26_min_serving=%d workers" % floor if explicit
            else "%d workers (k26_min_serving unset: every worker outside this batch)" % floor)
    if short:
        msg = ("refusing to take %s out of rotation: fewer than %s would serve: %s. Bring the missing workers back "
               "(or set k26_min_serving to the fewest workers each router must keep, or make the batch smaller with "
               "k26_serial)" % (", ".join(sorted(leaving)) or "nothing", rule, "; ".join(short)))
        return {"ok": False, "serving": serving, "taken": taken, "min_serving": floor, "msg": msg}
    untouched = [router for router in sorted(taken) if not taken[router]]
    msg = "%d worker(s) leave; every router that loses one keeps >= %s" % (len(leaving), rule)
    if untouched:
        msg += "; %s: none of them serves there, nothing taken away" % ", ".join(untouched)
    return {"ok": True, "serving": serving, "taken": taken, "min_serving": floor, "msg": msg}


def rotation_column(url, in_rotation):
    """The fleet report's cell for one worker: 'router-a: in, router-b: OUT' (empty without routers); a router whose
    listing is None (it could not be read) shows '?'."""
    url = normalize_url(url)
    cells = []
    for router in sorted(in_rotation):
        if in_rotation[router] is None:
            cells.append("%s: ?" % router)
            continue
        rotation = set(normalize_url(u) for u in in_rotation[router])
        cells.append("%s: %s" % (router, "in" if url in rotation else "OUT"))
    return ", ".join(cells)


def fleet_workers(hosts, hostvars, groups=None):
    """[{'host', 'instance', 'url'}] of every worker the routers route to: each instance of each host, except the
    hosts of rank >= 1 in a multi-node group (only rank 0, the first host of sglang_multinode_group, serves HTTP).
    Address: the host's sglang_router_worker_address, else ansible_host, else its inventory name."""
    groups = groups or {}
    out = []
    for host in hosts:
        hv = hostvars.get(host) or {}
        group = hv.get("sglang_multinode_group") or ""
        if group and (groups.get(group) or [host])[0] != host:
            continue
        address = hv.get("sglang_router_worker_address") or hv.get("ansible_host") or host
        for instance in hv.get("k26_instances") or DEFAULT_INSTANCES:
            state = instance.get("state") or hv.get("sglang_state") or "started"
            if state in ("stopped", "absent"):
                continue
            out.append({"host": host, "instance": instance.get("name"),
                        "url": worker_url(address, instance.get("port", 30000))})
    return out


def rotation_report(workers, in_rotation):
    """The lines of the rotation report: one per worker (host, instance, URL, each router's in/OUT)."""
    rows = [("host", "instance", "worker", "in rotation")]
    for worker in workers:
        rows.append((worker.get("host", ""), worker.get("instance", ""), worker["url"],
                     rotation_column(worker["url"], in_rotation) or "-"))
    widths = [max(len(str(row[i])) for row in rows) for i in range(4)]
    lines = ["  ".join(str(cell).ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines
