# -*- coding: utf-8 -*-
"""The router's desired workers (what a router restarted by itself comes back with): the file's format, how each
sglang_router_workers call changes it, its root-only I/O, and the launcher that hands it to the router."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import json
import os
import sys
import types

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.host.file_adapters import UnsafePath
from ansible_collections.llmops.sglang.plugins.module_utils.router.router_desired import after, parse, render
from ansible_collections.llmops.sglang.plugins.module_utils.router.router_desired_adapters import load, store

A, B, C = "http://10.0.0.1:30001", "http://10.0.0.2:30001", "http://10.0.0.3:30001"
LAUNCHER = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "router", "files", "router_launch.py")


def test_render_and_parse_round_trip_sorted_and_unique():
    data = render([B, A, B + "/"])
    assert json.loads(data.decode()) == {"workers": [A, B]}
    assert parse(data) == [A, B]
    assert parse('{"workers": []}') == []


@pytest.mark.parametrize("text, says", [
    ("", "not JSON"),
    ("[]", 'expected {"workers"'),
    ('{"workers": "http://a:1"}', 'expected {"workers"'),
    ('{"workers": ["ftp://a:1"]}', "not a worker URL"),
    ('{"workers": ["http://a:1/x"]}', "not a worker URL"),
    ('{"workers": ["http://u@a:1"]}', "not a worker URL"),
    ('{"workers": ["http://a:1 --api-key x"]}', "not a worker URL"),
    ('{"workers": [1]}', "not a worker URL"),
])
def test_parse_refuses_what_is_not_a_list_of_worker_urls(text, says):
    with pytest.raises(ValueError, match=says.replace("{", r"\{").replace("[", r"\[")):
        parse(text)


def test_after_each_state():
    # present adds; with prune the file becomes exactly the workers given
    assert after([A], [A], [B], "present") == [A, B]
    assert after([A, C], [A, C], [A, B], "present", prune=True) == [A, B]
    # absent removes (also a worker the router does not list: a drain of a worker down at the time)
    assert after([A, B, C], [A, C], [B], "absent") == [A, C]
    # listed: unchanged
    assert after([A], [A, B], [], "listed") == [A]
    with pytest.raises(ValueError):
        after([A], [A], [A], "gone")


def test_without_a_file_the_routers_listing_is_the_start():
    # a router deployed before the file existed: a drain keeps every other worker it routes to
    assert after(None, [A, B, C], [B], "absent") == [A, C]
    assert after(None, [A], [B], "present") == [A, B]


def test_store_and_load_root_only(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the file is root's: run as root")
    directory = tmp_path / "router"
    directory.mkdir(mode=0o700)
    path = str(directory / "sglang-router.workers.json")
    assert load(path) is None  # no file yet
    assert load(str(tmp_path / "missing" / "x.json")) is None  # not even the directory (a fresh host, check mode)
    assert store(path, [B, A]) is True
    assert (os.stat(path).st_mode & 0o7777) == 0o600 and os.stat(path).st_uid == 0
    assert load(path) == [A, B]
    assert store(path, [A, B]) is False  # unchanged
    with open(path, "w") as handle:
        handle.write("nonsense")
    with pytest.raises(ValueError, match="sglang-router.workers.json: not JSON"):
        load(path)


def test_load_refuses_a_file_another_user_could_have_written(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to give the file away")
    directory = tmp_path / "router"
    directory.mkdir(mode=0o700)
    path = str(directory / "w.json")
    store(path, [A])
    os.chown(path, 65534, 65534)
    with pytest.raises(UnsafePath, match="owned by uid 65534"):
        load(path)
    os.unlink(path)
    os.symlink("/etc/passwd", path)
    with pytest.raises(UnsafePath, match="symlink"):
        load(path)


def test_store_refuses_a_directory_others_may_write(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the file is root's: run as root")
    directory = tmp_path / "open"
    directory.mkdir()
    os.chmod(str(directory), 0o777)
    with pytest.raises(UnsafePath, match="writable by every user"):
        store(str(directory / "w.json"), [A])


@pytest.fixture
def launcher(monkeypatch, tmp_path):
    """The launcher module with a stand-in sglang_router.launch_router that records the argv it is handed."""
    seen = {}
    fake = types.ModuleType("sglang_router.launch_router")
    fake.parse_router_args = list
    fake.launch_router = lambda args: seen.setdefault("args", args)
    monkeypatch.setitem(sys.modules, "sglang_router", types.ModuleType("sglang_router"))
    monkeypatch.setitem(sys.modules, "sglang_router.launch_router", fake)
    spec = importlib.util.spec_from_file_location("router_launch_under_test", LAUNCHER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(tmp_path))
    (tmp_path / "router-secrets").write_text("ROUTER_API_KEY=k-123\n")
    return module, seen, tmp_path


def test_launcher_hands_the_desired_workers_over_as_worker_urls(launcher):
    module, seen, creds = launcher
    (creds / "router-workers").write_text(render([B, A]).decode())
    assert module.main(["router-secrets", "--llmops-workers-credential", "router-workers", "--port", "1"]) == 0
    assert seen["args"] == ["--port", "1", "--api-key", "k-123", "--worker-urls", A, B]


def test_launcher_with_an_empty_or_broken_list_starts_without_workers(launcher, capsys):
    module, seen, creds = launcher
    (creds / "router-workers").write_text('{"workers": []}')
    assert module.main(["router-secrets", "--llmops-workers-credential", "router-workers"]) == 0
    assert seen.pop("args") == ["--api-key", "k-123"]
    (creds / "router-workers").write_text('{"workers": ["http://a:1 --x"]}')
    assert module.main(["router-secrets", "--llmops-workers-credential", "router-workers"]) == 0
    assert seen.pop("args") == ["--api-key", "k-123"]
    assert "starting without workers" in capsys.readouterr().err


def test_launcher_refuses_worker_urls_on_its_command_line_with_the_credential(launcher):
    module, seen, creds = launcher
    (creds / "router-workers").write_text('{"workers": []}')
    assert module.main(["router-secrets", "--llmops-workers-credential", "router-workers", "--worker-urls", A]) == 2
    assert "args" not in seen
    # without the option (a unit of an earlier version): as before
    assert module.main(["router-secrets", "--port", "1"]) == 0
    assert seen["args"] == ["--port", "1", "--api-key", "k-123"]
