# -*- coding: utf-8 -*-
"""Decisions of the drain-aware rollout: what to add/remove on a router, whether a worker is idle, the capacity
guard, the fleet report's rotation cell."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.router.router_rotation import (
    capacity,
    listed,
    normalize_url,
    plan,
    rotation_column,
    worker_url,
)
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_metrics import in_flight

# sglang-router 0.3.2's GET /workers answer (captured from the real router, one worker)
ANSWER = {"workers": [{"id": "253bc484-e0ad-4b03-a749-6b1b8c864b63", "url": "http://10.0.0.1:30000",
                       "is_healthy": True, "load": 0, "worker_type": "regular"}],
          "total": 1, "stats": {"prefill_count": 0, "decode_count": 0, "regular_count": 1}}
A, B, C = "http://10.0.0.1:30000", "http://10.0.0.2:30000", "http://10.0.0.3:30000"


def test_urls():
    assert normalize_url("10.0.0.1:30000/") == A
    assert worker_url("10.0.0.1", 30000) == A
    assert worker_url("fd00::1", "30000") == "http://[fd00::1]:30000"


def test_plan_present_absent_prune():
    current = listed(ANSWER)
    assert list(current) == [A]
    assert plan(current, [A, B], "present") == {"add": [B], "remove": []}
    assert plan(current, [B], "present", prune=True) == {"add": [B], "remove": [(A, ANSWER["workers"][0]["id"])]}
    assert plan(current, [A + "/"], "absent") == {"add": [], "remove": [(A, ANSWER["workers"][0]["id"])]}
    assert plan(current, [B], "absent") == {"add": [], "remove": []}
    with pytest.raises(ValueError):
        plan(current, [A], "gone")


def test_in_flight_sums_running_and_queued_over_ranks():
    text = "\n".join([
        "# HELP sglang:num_running_reqs The number of running requests.",
        "# TYPE sglang:num_running_reqs gauge",
        'sglang:num_running_reqs{engine_type="unified",model_name="m",tp_rank="0"} 2.0',
        'sglang:num_queue_reqs{engine_type="unified",model_name="m",tp_rank="0"} 1.0',
        'sglang:num_running_reqs_total{x="y"} 9',
        'sglang:gen_throughput{tp_rank="0"} 50.0'])
    assert in_flight(text) == 3
    assert in_flight(text.replace(" 2.0", " 0.0").replace(" 1.0", " 0.0")) == 0
    assert in_flight('{"detail":"Not Found"}') is None
    assert in_flight("") is None


def test_capacity_default_is_all_but_this_batch():
    rotation = {"r1": [A, B, C], "r2": [A, B, C]}
    ok = capacity([A, B, C], rotation, [A])
    assert ok["ok"] and ok["min_serving"] == 2 and ok["serving"] == {"r1": 2, "r2": 2}
    assert ok["taken"] == {"r1": [A], "r2": [A]}
    # another worker already out on one router (a failed host kept out): the batch is refused, naming that router,
    # what it would keep and what is out there already; the router that is whole is not named
    refused = capacity([A, B, C], {"r1": [A, B, C], "r2": [A, B]}, [A])
    assert not refused["ok"] and refused["min_serving"] == 2
    assert "r2 would keep 1 (%s), %s not serving there already" % (B, C) in refused["msg"], refused["msg"]
    assert "r1 would keep" not in refused["msg"] and "k26_min_serving unset" in refused["msg"]


def test_capacity_a_fleet_that_serves_nothing_yet_deploys_with_the_default_policy():
    # the first deploy: two routers that list nothing, three workers, the canary then one at a time (issue 23:
    # "refusing to take ...:30001 out of rotation: fewer than k26_min_serving=2 workers would serve: gpu-04 would keep 0")
    empty = {"r1": [], "r2": []}
    for batch in ([A], [B, C], [A, B, C]):
        verdict = capacity([A, B, C], empty, batch)
        assert verdict["ok"], verdict
        assert verdict["serving"] == {"r1": 0, "r2": 0} and verdict["taken"] == {"r1": [], "r2": []}
        assert "r1, r2: none of them serves there, nothing taken away" in verdict["msg"]
    # also with an explicit minimum the routers cannot meet: nothing is taken away from them
    assert capacity([A, B, C], empty, [A], min_serving=2)["ok"]
    # the next batch of that first deploy: the canary serves now (admitted), B is not in rotation yet
    assert capacity([A, B, C], {"r1": [A], "r2": [A]}, [B])["ok"]


def test_capacity_refuses_a_batch_that_takes_the_only_serving_worker():
    # what serves now is protected: A serves alone, a batch of A and B would leave the routers with nothing
    verdict = capacity([A, B, C], {"r1": [A], "r2": [A]}, [A, B])
    assert not verdict["ok"] and verdict["serving"] == {"r1": 0, "r2": 0}
    assert "r1 would keep 0 (none)" in verdict["msg"] and "r2 would keep 0 (none)" in verdict["msg"]
    assert "refusing to take %s, %s out of rotation" % (A, B) in verdict["msg"]
    assert not capacity([A, B, C], {"r1": [A]}, [A, B], min_serving=1)["ok"]
    assert capacity([A, B, C], {"r1": [A]}, [A, B], min_serving=0)["ok"]


def test_capacity_a_worker_in_rotation_on_one_router_only():
    # r2 lost A (it restarted, say): taking A out takes nothing from r2; r1 keeps the other two
    rotation = {"r1": [A, B, C], "r2": [B, C]}
    verdict = capacity([A, B, C], rotation, [A])
    assert verdict["ok"] and verdict["taken"] == {"r1": [A], "r2": []} and verdict["serving"] == {"r1": 2, "r2": 2}
    assert "r2: none of them serves there" in verdict["msg"]
    # r2 has A, r1 does not, and r2 misses C: r2 is the one that would drop below all-but-the-batch
    verdict = capacity([A, B, C], {"r1": [B, C], "r2": [A, B]}, [A])
    assert not verdict["ok"] and "r2 would keep 1 (%s)" % B in verdict["msg"] and "r1 would" not in verdict["msg"]
    # ... which an explicit minimum of 1 accepts
    assert capacity([A, B, C], {"r1": [B, C], "r2": [A, B]}, [A], min_serving=1)["ok"]


def test_capacity_explicit_minimum():
    rotation = {"r1": [A, B, C]}
    assert capacity([A, B, C], rotation, [A, B], min_serving=1)["ok"]
    verdict = capacity([A, B, C], rotation, [A, B], min_serving=2)
    assert not verdict["ok"] and "fewer than k26_min_serving=2 workers would serve: r1 would keep 1" in verdict["msg"]
    assert "not serving there already" not in verdict["msg"]  # with a minimum, only the count matters
    assert capacity([A, B, C], {"r1": [B, C]}, [A], min_serving="2")["ok"]  # the leaving one was out already
    # an explicit minimum lower than all-but-the-batch lets a batch go while another worker is out
    assert capacity([A, B, C], {"r1": [A, B]}, [A], min_serving=1)["ok"]
    assert not capacity([A, B, C], {"r1": [A, B]}, [A])["ok"]
    # unset: None or '' (the drain task passes k26_min_serving | default('', true))
    assert capacity([A, B, C], rotation, [A], min_serving="")["min_serving"] == 2
    for bad in (-1, "two", True, "1.5"):
        with pytest.raises(ValueError, match="k26_min_serving"):
            capacity([A], rotation, [A], min_serving=bad)


def test_capacity_a_worker_down_but_listed_serves_nothing():
    # the router's records (sglang_router_workers' `workers`): a listed worker whose health check fails gets no request
    def records(*pairs):
        return [{"id": str(i), "url": url, "is_healthy": healthy} for i, (url, healthy) in enumerate(pairs)]
    # C is listed but down: taking A out would leave B alone serving, one less than all but the batch
    verdict = capacity([A, B, C], {"r1": records((A, True), (B, True), (C, False))}, [A])
    assert not verdict["ok"] and "r1 would keep 1 (%s), %s not serving there already" % (B, C) in verdict["msg"]
    assert capacity([A, B, C], {"r1": records((A, True), (B, True), (C, True))}, [A])["ok"]
    # the batch's own worker listed but down: it serves nothing, so nothing is taken away even with C down too
    verdict = capacity([A, B, C], {"r1": records((A, False), (B, True), (C, False))}, [A])
    assert verdict["ok"] and verdict["taken"] == {"r1": []}
    # a record without is_healthy counts as serving; URLs are normalized on both sides
    assert capacity([A, B], {"r1": [{"url": A + "/"}, {"url": "10.0.0.2:30000"}]}, [A], min_serving=1)["ok"]


def test_capacity_counts_workers_outside_the_fleet_and_ignores_an_empty_batch():
    extra = "http://10.0.0.9:30000"  # listed by the router, not in this inventory: it serves all the same
    assert capacity([A, B, C], {"r1": [A, B, extra]}, [A], min_serving=2)["ok"]
    assert capacity([A, B, C], {"r1": [A, B, C]}, [])["ok"]
    assert capacity([A, B, C], {}, [A])["ok"]  # no router: nothing to protect


def test_rotation_column():
    assert rotation_column(A, {"r2": [B], "r1": [A]}) == "r1: in, r2: OUT"
    assert rotation_column(A, {}) == ""
    assert rotation_column(A, {"r1": None, "r2": [A]}) == "r1: ?, r2: in"


def test_fleet_workers_rank0_only_and_every_instance():
    from ansible_collections.llmops.sglang.plugins.module_utils.router.router_rotation import fleet_workers
    hostvars = {
        "a": {"ansible_host": "10.0.0.1"},
        "b": {"ansible_host": "10.0.0.2", "k26_instances": [{"name": "x", "port": 30001},
                                                            {"name": "y", "port": 30002, "state": "stopped"}]},
        "n0": {"ansible_host": "10.0.1.1", "sglang_multinode_group": "pair"},
        "n1": {"ansible_host": "10.0.1.2", "sglang_multinode_group": "pair"},
        "c": {"sglang_router_worker_address": "c.example"},
    }
    got = fleet_workers(["a", "b", "n0", "n1", "c"], hostvars, {"pair": ["n0", "n1"]})
    assert [w["url"] for w in got] == ["http://10.0.0.1:30000", "http://10.0.0.2:30001", "http://10.0.1.1:30000",
                                       "http://c.example:30000"]
    assert got[1] == {"host": "b", "instance": "x", "url": "http://10.0.0.2:30001"}


def test_rotation_report():
    from ansible_collections.llmops.sglang.plugins.module_utils.router.router_rotation import rotation_report
    lines = rotation_report([{"host": "h1", "instance": "sglang-k26", "url": A},
                             {"host": "h2", "instance": "sglang-k26", "url": B}], {"r1": [A]})
    assert lines[0].split() == ["host", "instance", "worker", "in", "rotation"]
    assert lines[2].split()[-2:] == ["r1:", "in"] and lines[3].split()[-2:] == ["r1:", "OUT"]
