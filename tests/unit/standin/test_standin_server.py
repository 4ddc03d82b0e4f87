"""The stand-in as a real server process: flags, log lines, port behaviour, endpoints, shutdown."""
import os
import re
import signal
import socket
import threading
import time

import pytest

from standin_helpers import LINE_FORMAT, WAIT

PHASE_LINES = [r"Init torch distributed begin\.", r"Init torch distributed ends\. elapsed=[\d.]+ s, mem usage=",
               r"Load weight begin\. avail mem=[\d.]+ GB",
               r"Load weight end\. elapsed=[\d.]+ s, type=\w+, dtype=torch\.bfloat16, avail mem=[\d.]+ GB, mem usage=",
               r"KV Cache is allocated\. #tokens: \d+, K size: [\d.]+ GB, V size: [\d.]+ GB",
               r"Memory pool end\. avail mem=", r"Capture cuda graph begin\. This can take up to several minutes\.",
               r"Capture cuda graph end\. Time elapsed: [\d.]+ s\. mem usage=",
               r"max_total_num_tokens=\d+, chunked_prefill_size=\d+, max_prefill_tokens=\d+, max_running_requests=\d+, context_len=\d+"]
MAIN_LINES = [r"INFO:     Started server process \[\d+\]", r"INFO:     Waiting for application startup\.",
              r"INFO:     Application startup complete\.",
              r"INFO:     Uvicorn running on http://127\.0\.0\.1:\d+ \(Press CTRL\+C to quit\)",
              r'"GET /model_info HTTP/1\.1" 200', r"\[\d+-\d+-\d+ [\d:]+ TP0\] Prefill batch",
              r'"POST /generate HTTP/1\.1" 200', r"The server is fired up and ready to roll!"]


def index_of(lines, pattern, start=0):
    for number in range(start, len(lines)):
        if re.search(pattern, lines[number]):
            return number
    raise AssertionError("%r not found after line %d in:\n%s" % (pattern, start, "\n".join(lines)))


@pytest.mark.parametrize("entry,prog", [(("-m", "sglang.launch_server"), "launch_server.py"),
                                        (("-m", "sglang_standin.cli", "serve"), "sglang serve")])
def test_unknown_flag_is_argparse_error(launch, standin_python, model_dir, entry, prog):
    server = launch(standin_python, model_dir, "--foo", entry=entry)
    assert server.wait_exit() == 2
    assert "%s: error: unrecognized arguments: --foo" % prog in server.output
    assert server.output.startswith("usage: %s" % prog)


def test_model_path_errors(launch, standin_python, tmp_path):
    missing = launch(standin_python, str(tmp_path / "absent"))
    assert missing.wait_exit() == 1
    assert "OSError: Incorrect path_or_model_id: '%s'" % (tmp_path / "absent") in missing.output
    empty = launch(standin_python, str(tmp_path))
    assert empty.wait_exit() == 1
    assert "does not appear to have a file named config.json" in empty.output


def test_bad_json_model_override(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir, "--json-model-override-args", "{bad")
    assert server.wait_exit() == 1
    assert "json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes" in server.output


def test_startup_lines_per_rank_in_order(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir, "--tp", "2")
    server.wait_ready()
    lines = server.output.splitlines()
    for rank in (0, 1):
        tag = "TP%d] " % rank
        mine = [line for line in lines if tag in line]
        position = 0
        for pattern in PHASE_LINES:
            position = index_of(mine, pattern, position) + 1
        for pattern in PHASE_LINES[:-1]:
            assert len([line for line in mine if re.search(pattern, line)]) == 1, pattern
    position = index_of(lines, r"TP0\] max_total_num_tokens=")
    for pattern in MAIN_LINES:
        position = index_of(lines, pattern, position) + 1
    assert any(re.match(r"Loading safetensors checkpoint shards:  50% Completed \| 2/4 ", line) for line in lines)
    assert any(line.startswith("Capturing batches (bs=") for line in lines)
    for line in lines:
        if not line.startswith(("Loading safetensors", "Capturing batches")):
            assert LINE_FORMAT.match(line), line
    # one scheduler process per rank next to the main process, like SGLang
    assert len(server.descendants()) == 3
    names = [event["event"] + ":" + event["phase"] for event in server.events_list()]
    assert names == ["start:main", "phase:init", "phase:weights", "phase:kv_cache", "phase:cuda_graph",
                     "http_bound:http", "phase:warmup", "ready:ready"]


def test_port_refused_until_load_ends(launch, standin_python, model_dir):
    refused_at = []
    connected = threading.Event()
    server = launch(standin_python, model_dir, env={"SGLANG_STANDIN_PACE": "0.02"})

    def poll():
        while server.proc.poll() is None and not connected.is_set():
            started = time.monotonic()
            try:
                socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
                connected.set()
            except ConnectionRefusedError:
                refused_at.append(started)
                time.sleep(0.02)

    poller = threading.Thread(target=poll)
    poller.start()
    server.wait_ready()
    poller.join(WAIT)
    assert connected.is_set()
    events = {event["event"] + ":" + event["phase"]: event["monotonic"] for event in server.events_list()}
    # refused while the weights were loading, never after the bind
    assert any(events["phase:weights"] < when < events["phase:kv_cache"] for when in refused_at)
    assert all(when < events["http_bound:http"] for when in refused_at)


def test_starting_status_then_up(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir, env={"SGLANG_STANDIN_FAULT": "slow_warmup=600"})
    server.wait_for(r"Uvicorn running on")
    assert server.request("GET", "/health")[0] == 503
    assert server.request("GET", "/health_generate")[0] == 503
    assert server.request("GET", "/ready")[0] == 503
    status, body = server.request("GET", "/v1/models")
    assert status == 200 and body["data"][0]["id"] == model_dir  # NOT a readiness signal
    status, body = server.request("GET", "/model_info")
    assert status == 200 and body["model_path"] == model_dir and body["served_model_name"] == model_dir
    assert "The server is fired up" not in server.output


def test_up_endpoints(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir, "--served-model-name", "kimi-k2.6", "--enable-metrics")
    server.wait_ready()
    assert server.request("GET", "/health")[0] == 200
    assert server.request("GET", "/ready")[0] == 200
    assert server.request("GET", "/v1/models")[1]["data"][0]["id"] == "kimi-k2.6"
    assert server.request("GET", "/get_model_info")[1]["served_model_name"] == "kimi-k2.6"
    status, info = server.request("GET", "/server_info")
    assert status == 200 and info["version"] == "0.5.23" and info["tp_size"] == 1
    assert "sglang:num_running_reqs" in server.request("GET", "/metrics")[1]
    assert server.request("GET", "/nope")[0] == 404
    # /health really generates: the scheduler logs a 1-token prefill for it
    assert re.search(r'TP0\] Prefill batch, #new-seq: 1, #new-token: 1,.*\n.*"GET /health HTTP/1.1" 200', server.output)


def test_completion_bodies(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir)
    server.wait_ready()
    status, chat = server.request("POST", "/v1/chat/completions", {
        "model": model_dir, "messages": [{"role": "user", "content": "Say OK"}], "max_tokens": 4, "temperature": 0})
    assert status == 200
    assert chat["object"] == "chat.completion" and chat["model"] == model_dir and chat["id"] and chat["created"]
    assert chat["choices"][0]["message"]["role"] == "assistant" and chat["choices"][0]["message"]["content"]
    assert chat["choices"][0]["finish_reason"] == "length"
    assert chat["usage"]["completion_tokens"] == 4 and chat["usage"]["prompt_tokens"] > 0
    again = server.request("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "Say OK"}], "max_tokens": 4})[1]
    assert again["choices"][0]["message"]["content"] == chat["choices"][0]["message"]["content"]  # deterministic
    status, text = server.request("POST", "/v1/completions", {"prompt": "The capital of France is", "max_tokens": 64})
    assert status == 200 and text["object"] == "text_completion"
    assert text["choices"][0]["text"] and text["choices"][0]["finish_reason"] == "stop"
    assert text["usage"]["total_tokens"] == text["usage"]["prompt_tokens"] + text["usage"]["completion_tokens"]


def test_reasoning_content_with_kimi_parser(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir, "--reasoning-parser", "kimi_k2", "--tool-call-parser", "kimi_k2")
    server.wait_ready()
    ask = {"messages": [{"role": "user", "content": "Say OK"}], "temperature": 0}
    short = server.request("POST", "/v1/chat/completions", dict(ask, max_tokens=4))[1]["choices"][0]
    assert short["message"]["content"] is None and short["message"]["reasoning_content"]
    assert short["finish_reason"] == "length"
    full = server.request("POST", "/v1/chat/completions", dict(ask, max_tokens=200))[1]["choices"][0]
    assert full["message"]["content"] and full["message"]["reasoning_content"] and full["finish_reason"] == "stop"
    direct = server.request("POST", "/v1/chat/completions",
                            dict(ask, max_tokens=4, chat_template_kwargs={"thinking": False}))[1]["choices"][0]
    assert direct["message"]["content"] and direct["message"]["reasoning_content"] is None


def test_wrong_model_is_400(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir, "--served-model-name", "k26")
    server.wait_ready()
    for path, body in (("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
                       ("/v1/completions", {"prompt": "hi"})):
        status, error = server.request("POST", path, dict(body, model="wrong"))
        assert status == 400
        assert error["message"].startswith("The model `wrong` does not exist.") and error["object"] == "error"


def test_api_key(launch, standin_python, model_dir):
    key = "sk-standin-secret-4711"
    server = launch(standin_python, model_dir, "--api-key", key)
    server.wait_ready()  # the warmup itself sends the key
    assert server.request("GET", "/v1/models")[0] == 401
    assert server.request("GET", "/v1/models", headers={"Authorization": "Bearer wrong"})[0] == 401
    assert server.request("POST", "/v1/completions", {"prompt": "hi"})[0] == 401
    assert server.request("GET", "/v1/models", headers={"Authorization": "Bearer " + key})[0] == 200
    assert server.request("POST", "/v1/completions", {"prompt": "hi"}, headers={"Authorization": "Bearer " + key})[0] == 200
    for path in ("/health", "/health_generate", "/ready"):
        assert server.request("GET", path)[0] == 200
    assert server.request("GET", "/server_info", headers={"Authorization": "Bearer " + key})[1]["api_key"] == "<redacted>"
    server.signal(signal.SIGTERM)
    assert server.wait_exit() == 0
    assert key not in server.output


def test_sigterm_drains_in_flight_request(launch, standin_python, model_dir):
    # Without warmup the first client request is the scheduler's first batch, made slow here.
    server = launch(standin_python, model_dir, "--skip-server-warmup", env={"SGLANG_STANDIN_FAULT": "slow_warmup=2"})
    server.wait_ready()
    result = {}

    def ask():
        result["response"] = server.request("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 2}, timeout=WAIT)

    client = threading.Thread(target=ask)
    client.start()
    server.wait_for(r"TP0\] Prefill batch")
    server.signal(signal.SIGTERM)
    server.wait_for(r"SIGTERM received\. .*Draining requests and shutting down\.\.\.")
    assert server.wait_exit() == 0
    client.join(WAIT)
    assert result["response"][0] == 200
    assert server.wait_no_descendants() == []


def test_multi_node_rendezvous(launch, standin_python, model_dir):
    from standin_helpers import free_port
    addr = "127.0.0.1:%d" % free_port()
    common = ("--tp", "4", "--nnodes", "2", "--dist-init-addr", addr)
    worker = launch(standin_python, model_dir, *(common + ("--node-rank", "1")))
    head = launch(standin_python, model_dir, *(common + ("--node-rank", "0")))
    head.wait_ready()
    worker.wait_for(r"TP3\] max_total_num_tokens=")
    assert "TP2]" in worker.output and "TP0]" not in worker.output and "Uvicorn" not in worker.output
    assert "TP1]" in head.output and "TP2]" not in head.output


def test_cuda_graph_flags(launch, standin_python, model_dir):
    limited = launch(standin_python, model_dir, "--cuda-graph-max-bs-decode", "16")
    skipped = launch(standin_python, model_dir, "--disable-cuda-graph")
    limited.wait_ready()
    skipped.wait_ready()
    assert limited.output.count("Capturing batches (bs=16 ") == 1 and "Capturing batches (bs=24 " not in limited.output
    assert "Capture cuda graph" not in skipped.output and "Capturing batches" not in skipped.output


def test_sigterm_to_the_whole_cgroup_still_exits_0(launch, standin_python, model_dir):
    """KillMode=control-group: every process gets SIGTERM; schedulers die at once, the main process exits 0."""
    server = launch(standin_python, model_dir, "--tp", "2")
    server.wait_ready()
    os.killpg(server.proc.pid, signal.SIGTERM)
    assert server.wait_exit() == 0
    assert "Draining requests and shutting down..." in server.output
    assert "scheduler is dead" not in server.output
