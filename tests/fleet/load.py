# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A bounded load through a router: a fixed number of requests at a few concurrent clients (stdlib only).

One implementation for tests/integration/test_router.py and bench/router_drain.py. Short chat requests (a few
tokens, not streamed) mixed with long streaming generations (`max_tokens` tokens at the stand-in's
SGLANG_STANDIN_TOKEN_SECONDS each: tens of seconds), all sent to one address (the router), with `ignore_eos` so that
the number of tokens to expect is known. The load stops by itself once every request of its plan was sent and
answered; `stop` (a threading.Event) ends it earlier: no new request is sent once it is set.

Per request: start, end, HTTP status, error (connection error, timeout, HTTP error), tokens received and expected,
whether the stream ended with its finish chunk and `data: [DONE]`. http.client's readline()/read() return a short
body without raising when the connection drops, so the tokens are counted: a stream is `truncated` when it got fewer
tokens than expected or no finish chunk or no `[DONE]`, whether or not an exception came.
"""

from __future__ import absolute_import, division, print_function

import http.client
import json
import socket
import threading
import time

__metaclass__ = type  # pylint: disable=invalid-name

SHORT, LONG = "short", "long"


def mix(count, long_every):
    """The plan: `count` request kinds, every `long_every`-th one long (the first one long, so streams start early)."""
    return [LONG if i % long_every == 0 else SHORT for i in range(count)]


class Load:
    """Send `kinds` (a list of SHORT/LONG) through host:port with `clients` concurrent clients.

    short_tokens / long_tokens: max_tokens of each kind (ignore_eos: exactly that many are generated);
    timeout: the socket timeout of each request (a read that waits longer is an error "timeout").
    """

    def __init__(self, host, port, kinds, clients=3, api_key=None, model="default", short_tokens=4, long_tokens=200,
                 timeout=120.0, tag="load"):
        self.host, self.port = host, port
        self.kinds = list(kinds)
        self.clients = clients
        self.api_key = api_key
        self.model = model
        self.tokens = {SHORT: short_tokens, LONG: long_tokens}
        self.timeout = timeout
        self.tag = tag
        self.results = []
        self.stop = threading.Event()
        self._next = 0
        self._lock = threading.Lock()
        self._threads = []

    # ---- running ------------------------------------------------------------------------------------------
    def start(self):
        for client in range(self.clients):
            thread = threading.Thread(target=self._client, args=(client,), name="load-%d" % client, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def join(self, timeout=None):
        deadline = None if timeout is None else time.time() + timeout
        for thread in self._threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.time()))
        return not any(t.is_alive() for t in self._threads)

    def run(self):
        """Start, wait until it stopped by itself, return the results."""
        self.start()
        self.join()
        return self.results

    def _take(self):
        with self._lock:
            if self.stop.is_set() or self._next >= len(self.kinds):
                return None
            index = self._next
            self._next += 1
            return index

    def _client(self, client):
        while True:
            index = self._take()
            if index is None:
                return
            record = self.request(index, self.kinds[index], client)
            with self._lock:
                self.results.append(record)

    # ---- one request --------------------------------------------------------------------------------------
    def body(self, index, kind):
        stream = kind == LONG
        body = {"model": self.model, "max_tokens": self.tokens[kind], "ignore_eos": True, "stream": stream,
                # no thinking: every generated token is one content delta (the stand-in's reasoning parser is off)
                "chat_template_kwargs": {"thinking": False},
                "user": "%s-%d" % (self.tag, index),
                "messages": [{"role": "user", "content": "request %d of %s: say something" % (index, self.tag)}]}
        if stream:
            body["stream_options"] = {"include_usage": True}
        return body

    def request(self, index, kind, client):
        record = {"index": index, "kind": kind, "client": client, "tag": "%s-%d" % (self.tag, index),
                  "start": time.time(), "end": None, "status": None, "error": None, "tokens": 0,
                  "expected": self.tokens[kind], "finished": False, "done": False}
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            conn.request("POST", "/v1/chat/completions", json.dumps(self.body(index, kind)), headers)
            response = conn.getresponse()
            record["status"] = response.status
            if response.status != 200:
                record["error"] = "HTTP %d: %s" % (response.status, response.read()[:200].decode("utf-8", "replace"))
            elif kind == LONG:
                read_stream(response, record)
            else:
                read_answer(response, record)
        except socket.timeout:
            record["error"] = "timeout"
        except (OSError, http.client.HTTPException, ValueError) as exc:
            record["error"] = "connection: %s: %s" % (type(exc).__name__, exc)
        finally:
            conn.close()
            record["end"] = time.time()
        return record


def read_answer(response, record):
    data = response.read()
    answer = json.loads(data.decode("utf-8"))
    choice = (answer.get("choices") or [{}])[0]
    record["tokens"] = int((answer.get("usage") or {}).get("completion_tokens") or 0)
    record["finished"] = choice.get("finish_reason") is not None
    record["done"] = True


def read_stream(response, record):
    """Count the content deltas of an SSE stream; note its finish chunk and its `data: [DONE]`."""
    while True:
        line = response.readline()
        if not line:
            return  # the body ended (cleanly or not): what was counted tells
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            record["done"] = True
            return
        chunk = json.loads(payload.decode("utf-8"))
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content") or delta.get("reasoning_content"):
                record["tokens"] += 1
            if choice.get("finish_reason") is not None:
                record["finished"] = True


def outcome(record):
    """'ok', 'failed' (no answer: connection error, timeout, HTTP error) or 'truncated' (an answer cut short)."""
    if record["status"] is None or record["status"] != 200:
        return "failed"
    if record["tokens"] < record["expected"] or not record["finished"] or not record["done"]:
        return "truncated"
    if record["error"]:
        return "failed"
    return "ok"


def summarize(results):
    """Counts and latencies per kind: {kind: {requests, ok, failed, truncated, latency_s: {median, p95, max}}, errors}."""
    out = {"requests": len(results), "errors": {}}
    for kind in (SHORT, LONG):
        rows = [r for r in results if r["kind"] == kind]
        counts = {"requests": len(rows), "ok": 0, "failed": 0, "truncated": 0}
        for row in rows:
            counts[outcome(row)] += 1
        latencies = sorted(r["end"] - r["start"] for r in rows if outcome(r) == "ok")
        counts["latency_s"] = {
            "median": round(latencies[len(latencies) // 2], 3) if latencies else None,
            "p95": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))], 3) if latencies else None,
            "max": round(latencies[-1], 3) if latencies else None}
        out[kind] = counts
    for row in results:
        if outcome(row) != "ok":
            key = row["error"] or "%s: %d of %d tokens%s%s" % (outcome(row), row["tokens"], row["expected"],
                                                               "" if row["finished"] else ", no finish chunk",
                                                               "" if row["done"] else ", no [DONE]")
            out["errors"][key[:160]] = out["errors"].get(key[:160], 0) + 1
    out["failed"] = out[SHORT]["failed"] + out[LONG]["failed"]
    out["truncated"] = out[SHORT]["truncated"] + out[LONG]["truncated"]
    if results:
        out["first_start"] = min(r["start"] for r in results)
        out["last_end"] = max(r["end"] for r in results)
    return out


def summary_line(summary):
    return ("%d requests: short %d (ok %d, failed %d, truncated %d; median %ss), long %d (ok %d, failed %d, "
            "truncated %d; median %ss)%s" % (
                summary["requests"], summary[SHORT]["requests"], summary[SHORT]["ok"], summary[SHORT]["failed"],
                summary[SHORT]["truncated"], summary[SHORT]["latency_s"]["median"], summary[LONG]["requests"],
                summary[LONG]["ok"], summary[LONG]["failed"], summary[LONG]["truncated"],
                summary[LONG]["latency_s"]["median"],
                ("; errors: " + "; ".join("%dx %s" % (n, e) for e, n in sorted(summary["errors"].items())))
                if summary["errors"] else ""))


class RotationPoller:
    """Poll each router's `GET /workers` about every `interval` seconds while it runs: [{time, router, listed,
    healthy, error}] (listed: the URLs the router lists; healthy: those it lists with is_healthy)."""

    def __init__(self, routers, api_key=None, interval=1.0, timeout=5.0):
        self.routers = list(routers)  # [(host, port)]
        self.api_key = api_key
        self.interval = interval
        self.timeout = timeout
        self.samples = []
        self.stop = threading.Event()
        self._thread = None

    def poll(self, host, port):
        sample = {"time": time.time(), "router": "%s:%d" % (host, port), "listed": [], "healthy": [], "error": None}
        headers = {"Authorization": "Bearer " + self.api_key} if self.api_key else {}
        conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
        try:
            conn.request("GET", "/workers", headers=headers)
            response = conn.getresponse()
            answer = json.loads(response.read().decode("utf-8") or "null")
            if response.status != 200:
                sample["error"] = "HTTP %d" % response.status
            else:
                workers = (answer or {}).get("workers") or []
                sample["listed"] = sorted(w.get("url") for w in workers)
                sample["healthy"] = sorted(w.get("url") for w in workers if w.get("is_healthy"))
        except (OSError, http.client.HTTPException, ValueError) as exc:
            sample["error"] = "%s: %s" % (type(exc).__name__, exc)
        finally:
            conn.close()
        return sample

    def _run(self):
        while not self.stop.is_set():
            began = time.time()
            for host, port in self.routers:
                self.samples.append(self.poll(host, port))
            self.stop.wait(max(0.0, self.interval - (time.time() - began)))

    def start(self):
        self._thread = threading.Thread(target=self._run, name="rotation-poller", daemon=True)
        self._thread.start()
        return self

    def finish(self):
        self.stop.set()
        if self._thread is not None:
            self._thread.join(30)
        return self.samples


def capacity_timeline(samples, since=None):
    """[(seconds since `since`, router, listed count, healthy count)] from RotationPoller samples."""
    since = since if since is not None else (samples[0]["time"] if samples else 0.0)
    return [(round(s["time"] - since, 1), s["router"], len(s["listed"]), len(s["healthy"])) for s in samples]


def sent_by(records, address):
    """The stand-in's request-log records of the requests that `address` sent: behind a router, the router host's.
    sglang-router 0.3.2 forwards neither the body's `user` field (the load's tag) nor an x-request-id of its own: in
    the stand-in's log both are null on every request it proxied. The sender's address is what tells the load from
    the server role's own readiness probes, which come from loopback."""
    return [record for record in records if (record.get("client") or "").rsplit(":", 1)[0] == address]


def json_lines_since(text, since):
    """The JSON lines of a host's log (the stand-in's event or request log) whose `time` or `start` is >= since;
    lines that are not JSON (a line cut by a crash) are skipped."""
    out = []
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if (item.get("time") or item.get("start") or 0) >= since:
            out.append(item)
    return out


def loading_windows(events):
    """Per pid, the stand-in's loading window from its event log (SGLANG_STANDIN_EVENT_LOG lines): from its
    `start` event until its `ready` event, or open (until None) when it never got ready: [{pid, start, ready}]."""
    windows = {}
    for event in events:
        pid = event.get("pid")
        if event.get("event") == "start" and event.get("phase") == "main":
            windows[pid] = {"pid": pid, "start": event["time"], "ready": None}
        elif event.get("event") == "ready" and pid in windows and windows[pid]["ready"] is None:
            windows[pid]["ready"] = event["time"]
    return sorted(windows.values(), key=lambda w: w["start"])


def served_while_loading(records, windows):
    """The request log records (SGLANG_STANDIN_REQUEST_LOG) that arrived inside a loading window of the same host, or
    that the stand-in itself marked as arrived while `loading`."""
    bad = []
    for record in records:
        inside = any(w["start"] <= record["start"] and (w["ready"] is None or record["start"] < w["ready"])
                     for w in windows)
        if inside or record.get("state") == "loading":
            bad.append(record)
    return bad
