# -*- coding: utf-8 -*-
"""Decisions of the drain-aware rollout: what to add/remove on a router, whether a worker is idle, the capacity
guard, the fleet report's rotation cell."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.router_rotation import (
    capacity,
    in_flight,
    listed,
    normalize_url,
    plan,
    rotation_column,
    worker_url,
)

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
    # another worker already out on one router (a failed host kept out): the batch is refused
    refused = capacity([A, B, C], {"r1": [A, B, C], "r2": [A, B]}, [A])
    assert not refused["ok"] and "r2 would keep 1" in refused["msg"] and "k26_min_serving=2" in refused["msg"]


def test_capacity_explicit_minimum():
    rotation = {"r1": [A, B, C]}
    assert capacity([A, B, C], rotation, [A, B], min_serving=1)["ok"]
    assert not capacity([A, B, C], rotation, [A, B], min_serving=2)["ok"]
    assert capacity([A, B, C], {"r1": [B, C]}, [A], min_serving="2")["ok"]  # the leaving one was out already
    for bad in (-1, "two"):
        with pytest.raises(ValueError, match="k26_min_serving"):
            capacity([A], rotation, [A], min_serving=bad)


def test_rotation_column():
    assert rotation_column(A, {"r2": [B], "r1": [A]}) == "r1: in, r2: OUT"
    assert rotation_column(A, {}) == ""
    assert rotation_column(A, {"r1": None, "r2": [A]}) == "r1: ?, r2: in"


def test_fleet_workers_rank0_only_and_every_instance():
    from ansible_collections.llmops.sglang.plugins.module_utils.router_rotation import fleet_workers
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
    from ansible_collections.llmops.sglang.plugins.module_utils.router_rotation import rotation_report
    lines = rotation_report([{"host": "h1", "instance": "sglang-k26", "url": A},
                             {"host": "h2", "instance": "sglang-k26", "url": B}], {"r1": [A]})
    assert lines[0].split() == ["host", "instance", "worker", "in", "rotation"]
    assert lines[2].split()[-2:] == ["r1:", "in"] and lines[3].split()[-2:] == ["r1:", "OUT"]
