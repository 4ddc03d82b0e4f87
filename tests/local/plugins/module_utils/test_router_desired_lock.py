# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The desired-workers file under calls at once (real processes, the real file and its flock).

A batch's hosts are admitted in parallel: each runs sglang_router_workers delegated to the router host, each reads
the file, adds its own worker and writes it back. Found by CI (tests/integration/test_router.py: the router role's
second run re-added a worker to the file after a deploy of three hosts in one batch): without the lock two calls that
read the same list each wrote back only their own change, and a router restarting later came back without a worker.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import multiprocessing
import os
import time

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.router import router_desired_adapters
from ansible_collections.llmops.sglang.plugins.module_utils.router import router_workers as rw
from ansible_collections.llmops.sglang.plugins.module_utils.router.router_workers_adapters import DesiredFile

WORKERS = ["http://10.0.0.%d:30001" % n for n in range(1, 5)]
READ_TO_WRITE = 0.3  # how long each call holds what it read before writing (a slow host, in slow motion)


class SlowFile(DesiredFile):
    """The real file; each read also records that it happened, then waits as a loaded router host would."""

    def __init__(self, path, reads, lock=True):
        DesiredFile.__init__(self, path)
        self.reads = reads
        self.lock = lock

    def load(self):
        urls = DesiredFile.load(self)
        self.reads.put(urls)
        time.sleep(READ_TO_WRITE)
        return urls

    def locked(self):
        return DesiredFile.locked(self) if self.lock else contextlib.nullcontext()


class Router(object):
    """The router's side, in each process (the file is what the processes share)."""

    url = "http://127.0.0.1:30080"

    def workers(self):
        return {}

    def add(self, url, api_key):
        pass


class Clock(object):
    def monotonic(self):
        return 0.0

    def sleep(self, seconds):
        pass


def admit(path, worker, start, reads, lock):
    start.wait()
    params = dict(url=Router.url, workers=[worker], state="present", prune=False, wait=0, verify=False,
                  verify_requests=1, worker_api_key=None)
    rw.run(params, Router(), SlowFile(path, reads, lock), Clock())


def admit_at_once(path, lock):
    context = multiprocessing.get_context("fork")
    start = context.Barrier(len(WORKERS))
    reads = context.Queue()
    procs = [context.Process(target=admit, args=(path, worker, start, reads, lock)) for worker in WORKERS]
    for proc in procs:
        proc.start()
    try:
        # read before joining: a process that put on a queue exits only once the queue's pipe is drained
        seen = [reads.get(timeout=60) for _worker in WORKERS]
        for proc in procs:
            proc.join(60)
            assert proc.exitcode == 0, proc.exitcode
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.kill()
    return router_desired_adapters.load(path), seen


@pytest.fixture
def desired_path(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the file is root's: run as root")
    directory = tmp_path / "router"
    directory.mkdir(mode=0o700)
    path = str(directory / "sglang-router.workers.json")
    router_desired_adapters.store(path, [])
    return path


def test_calls_at_once_each_add_their_worker(desired_path):
    final, seen = admit_at_once(desired_path, lock=True)
    assert final == sorted(WORKERS)
    # every call read the file, each saw what the ones before it wrote (one after the other, not all the same list)
    assert sorted(len(urls) for urls in seen) == list(range(len(WORKERS)))


def test_without_the_lock_the_same_calls_lose_updates(desired_path):
    """What the lock prevents happens here without it (so the test above can fail)."""
    final, seen = admit_at_once(desired_path, lock=False)
    assert len(seen) == len(WORKERS) and all(urls == [] for urls in seen)
    assert len(final) < len(WORKERS)


def test_the_lock_waits_for_the_holder_and_needs_no_directory(tmp_path, desired_path):
    """Order, not durations (a loaded machine may start the child late): the child asks for the lock while the
    holder has it, and gets it only after the holder let go (CLOCK_MONOTONIC is one clock for both processes)."""
    held = router_desired_adapters.lock(desired_path)
    context = multiprocessing.get_context("fork")
    asked, got = context.Value("d", -1.0), context.Value("d", -1.0)
    try:
        def other():
            os.close(held)  # the forked copy of the holder's descriptor (the lock is its open file's, not the fd's)
            asked.value = time.monotonic()
            fd = router_desired_adapters.lock(desired_path)
            got.value = time.monotonic()
            router_desired_adapters.unlock(fd)

        proc = context.Process(target=other)
        proc.start()
        deadline = time.monotonic() + 30
        while asked.value < 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert asked.value >= 0, "the child never asked for the lock"
        time.sleep(0.5)
        assert proc.is_alive() and got.value < 0  # still waiting for the holder
    finally:
        released = time.monotonic()
        router_desired_adapters.unlock(held)
    proc.join(30)
    assert proc.exitcode == 0 and asked.value < released <= got.value, (asked.value, released, got.value)
    # a fresh host (check mode, before the router role made the directory): nothing to lock, no error
    assert router_desired_adapters.lock(str(tmp_path / "missing" / "w.json")) is None
