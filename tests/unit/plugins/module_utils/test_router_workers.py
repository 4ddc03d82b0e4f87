# -*- coding: utf-8 -*-
"""One sglang_router_workers call on fakes: what it decides, the order it tells the router and the file, the wait on a
fake clock (no sleeping), the route check, and the result the roles read."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.router import router_workers as rw

A, B, C = "http://10.0.0.1:30001", "http://10.0.0.2:30001", "http://10.0.0.3:30001"
ROUTER = "http://127.0.0.1:30080"


class Clock(object):
    def __init__(self):
        self.now = 1000.0
        self.slept = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


class FakeRouter(object):
    """A router whose listing changes as told: an added worker shows after `admit_after` reads (never with None),
    a removed one goes at once unless `sticky`. Each call is logged in `calls` in order."""

    def __init__(self, listing, admit_after=0, sticky=(), healthy=True, routes_to=None, counters=None):
        self.url = ROUTER
        self.listing = dict((url, {"id": "id-" + url[-7:-6], "url": url, "is_healthy": healthy}) for url in listing)
        self.pending = {}
        self.admit_after = admit_after
        self.sticky = set(sticky)
        self.healthy = healthy
        self.routes_to = routes_to      # callable(attempt) -> URL the completion lands on
        self.counters = counters or {}  # worker URL -> its sglang:num_requests_total (absent: no metrics)
        self.calls = []
        self.completions = 0

    def workers(self):
        self.calls.append(("GET",))
        for url in list(self.pending):
            if self.pending[url] is not None:
                self.pending[url] -= 1
                if self.pending[url] < 0:
                    self.listing[url] = {"id": "new-" + url[-7:-6], "url": url, "is_healthy": self.healthy,
                                         "model_id": "kimi"}
                    del self.pending[url]
        return dict(self.listing)

    def remove(self, worker_id):
        self.calls.append(("DELETE", worker_id))
        for url, record in list(self.listing.items()):
            if record["id"] == worker_id and url not in self.sticky:
                del self.listing[url]

    def add(self, url, api_key=None):
        self.calls.append(("POST", url, api_key))
        self.pending[url] = self.admit_after

    def complete(self, model, prompt):
        self.calls.append(("COMPLETE", model, prompt))
        target = self.routes_to(self.completions) if self.routes_to else None
        self.completions += 1
        if target in self.counters:
            self.counters[target] += 1

    def metrics(self, worker):
        if worker not in self.counters:
            return None
        return "# TYPE sglang:num_requests_total counter\nsglang:num_requests_total{model_name=\"k\"} %d\n" % self.counters[worker]


class FakeFile(object):
    def __init__(self, path="/var/lib/llmops-sglang/router/r.workers.json", saved=None, log=None):
        self.path = path
        self.saved = saved
        self.log = log

        self.held = False
        self.outside = []  # what was read or written while the lock was not held

    @contextlib.contextmanager
    def locked(self):
        assert not self.held
        self.held = True
        if self.log is not None:
            self.log.append(("LOCK",))
        try:
            yield
        finally:
            self.held = False
            if self.log is not None:
                self.log.append(("UNLOCK",))

    def load(self):
        if not self.held:
            self.outside.append("load")
        return self.saved

    def store(self, urls):
        if not self.held:
            self.outside.append("store")
        if self.log is not None:
            self.log.append(("STORE", list(urls)))
        self.saved = list(urls)


def params(**over):
    out = dict(url=ROUTER, workers=[], state="listed", prune=False, wait=0, verify=False, verify_requests=20,
               worker_api_key=None)
    out.update(over)
    return out


def test_requests_total_sums_the_samples_and_is_none_without_the_counter():
    text = ('sglang:num_requests_total{rank="0"} 3\nsglang:num_requests_total{rank="1"} 4.0\n'
            'sglang:num_requests_total_other 9\nsglang:num_requests_total bad\n')
    assert rw.requests_total(text) == 7.0
    assert rw.requests_total("sglang:num_running_reqs 1\n") is None
    assert rw.requests_total(None) is None


def test_decide_present_absent_listed_and_the_desired_file():
    before = {A: {"id": "a"}, B: {"id": "b"}}
    call = rw.decide(before, [C], "present", True, saved=None, has_file=True)
    assert call["todo"] == {"add": [C], "remove": [(A, "a"), (B, "b")]}
    assert call["desired"] == [C] and call["desired_changed"] and call["changed"]
    call = rw.decide(before, [A], "absent", False, saved=[A, B], has_file=True)
    assert call["todo"] == {"add": [], "remove": [(A, "a")]} and call["desired"] == [B]
    # listed: nothing to do, and the file is only read (never "changed", even when it differs)
    call = rw.decide(before, [], "listed", False, saved=[C], has_file=True)
    assert call == {"todo": {"add": [], "remove": []}, "desired": [C], "desired_changed": False, "changed": False}
    # the file alone can make a call changed: the router lists the worker already, the file does not
    call = rw.decide(before, [A], "present", False, saved=[B], has_file=True)
    assert call["todo"] == {"add": [], "remove": []} and call["desired_changed"] and call["changed"]
    assert rw.decide(before, [A], "present", False)["desired"] is None


def test_the_file_is_written_before_the_router_is_told():
    log = []
    router = FakeRouter([A, B])
    router.calls = log
    desired = FakeFile(saved=[A, B], log=log)
    result = rw.run(params(workers=[A], state="absent"), router, desired, Clock())
    # the file is read, decided on and written under its lock, released before the router is told (a batch's hosts
    # call at once: tests/local/plugins/module_utils/test_router_desired_lock.py shows the update each would lose)
    assert log[:5] == [("GET",), ("LOCK",), ("STORE", [B]), ("UNLOCK",), ("DELETE", "id-1")]
    assert desired.outside == []
    assert result == {"changed": True, "workers": [router.listing[B]], "urls": [B], "added": [], "removed": [A],
                      "desired": [B], "desired_changed": True}


def test_check_mode_changes_nothing_and_reports_what_would_change():
    router = FakeRouter([A])
    desired = FakeFile(saved=[A])
    result = rw.run(params(workers=[B], state="present", prune=True, wait=30), router, desired, Clock(),
                    check_mode=True, want_diff=True)
    assert router.calls == [("GET",)] and desired.saved == [A]
    assert result["changed"] and result["added"] == [B] and result["removed"] == [A] and result["urls"] == [A]
    assert result["diff"][0] == {"before_header": "%s workers" % ROUTER, "after_header": "%s workers" % ROUTER,
                                 "before": A + "\n", "after": B + "\n"}
    assert result["diff"][1]["before"] == A + "\n" and result["diff"][1]["after"] == B + "\n"


def test_the_wait_reads_once_a_second_until_the_router_lists_the_worker():
    router = FakeRouter([A], admit_after=3)
    clock = Clock()
    result = rw.run(params(workers=[B], state="present", wait=30, worker_api_key="k"), router, FakeFile(None), clock)
    assert ("POST", B, "k") in router.calls
    assert clock.slept == [1, 1, 1] and result["urls"] == [A, B] and result["changed"]
    assert "desired" not in result and "verified" not in result and "diff" not in result


def test_a_wait_that_ends_first_fails_naming_the_workers():
    router = FakeRouter([A], admit_after=None, sticky=[A])
    clock = Clock()
    result = rw.run(params(workers=[B], state="present", prune=True, wait=5), router, FakeFile(None), clock)
    assert result["msg"] == ("after 5s the router %s does not list %s (its health check has not passed); still lists %s"
                             % (ROUTER, B, A))
    assert "changed" not in result and result["added"] == [B] and result["removed"] == [A] and result["urls"] == [A]
    assert sum(clock.slept) == 5


def test_without_a_wait_the_call_reads_once_and_does_not_fail():
    router = FakeRouter([], admit_after=None)
    clock = Clock()
    result = rw.run(params(workers=[A], state="present"), router, FakeFile(None), clock)
    assert clock.slept == [] and result["urls"] == [] and result["added"] == [A] and "msg" not in result


def test_verify_routed_when_the_workers_counter_went_up():
    router = FakeRouter([B], routes_to=lambda n: B if n < 2 else A, counters={A: 5, B: 0})
    result = rw.run(params(workers=[A], state="present", wait=10, verify=True), router, FakeFile(None), Clock())
    assert result["verified"] == {A: "routed"} and router.completions == 3
    prompts = [call[2] for call in router.calls if call[0] == "COMPLETE"]
    assert len(set(prompts)) == 3 and all(A in prompt for prompt in prompts)
    assert all(call[1] == "kimi" for call in router.calls if call[0] == "COMPLETE")


def test_verify_falls_back_to_the_listing_and_refuses_an_unhealthy_worker():
    # no metrics: the listing's is_healthy decides
    router = FakeRouter([], healthy=True)
    assert rw.verify(router, [A], {A: {"is_healthy": True}}, 20) == {A: "listed"}
    with pytest.raises(rw.RouterError, match="the router lists %s but not as healthy$" % A):
        rw.verify(router, [A], {A: {"is_healthy": False}}, 20)
    # metrics, but every request went elsewhere: healthy is "listed", unhealthy fails naming the count
    router = FakeRouter([], routes_to=lambda n: B, counters={A: 0, B: 0})
    assert rw.verify(router, [A], {A: {"is_healthy": True}}, 4, nonce=lambda: "n") == {A: "listed"}
    assert router.completions == 4
    with pytest.raises(rw.RouterError, match="not as healthy, and 2 requests through %s went to other workers" % ROUTER):
        rw.verify(router, [A], {A: {"is_healthy": False}}, 2)


def test_verify_only_with_state_present_and_never_in_check_mode():
    router = FakeRouter([A], counters={A: 0})
    assert "verified" not in rw.run(params(workers=[A], state="absent", verify=True), router, FakeFile(None), Clock())
    router = FakeRouter([], counters={A: 0})
    assert "verified" not in rw.run(params(workers=[A], state="present", verify=True), router, FakeFile(None), Clock(),
                                    check_mode=True)
    # a worker listed already is not checked again (verified is empty, not absent)
    router = FakeRouter([A], counters={A: 0})
    assert rw.run(params(workers=[A], state="present", verify=True), router, FakeFile(None), Clock())["verified"] == {}


def test_errors_of_the_adapters_pass_through_before_anything_changes():
    class Unreadable(FakeFile):
        def load(self):
            raise rw.DesiredFileError("desired_file: /x is a symlink")

    router = FakeRouter([A])
    with pytest.raises(rw.DesiredFileError):
        rw.run(params(workers=[A], state="absent"), router, Unreadable(), Clock())
    assert router.calls == [("GET",)]
