"""Token-by-token streaming, the drain of a long stream after SIGTERM, and the per-request record (SGLANG_STANDIN_
TOKEN_SECONDS, SGLANG_STANDIN_REQUEST_LOG). Shapes from 0.5.23 entrypoints/openai/serving_chat.py:2441-2805 and
entrypoints/openai/sse_utils.py:52-100; the drain from managers/tokenizer_manager.py:3508-3571."""
import http.client
import json
import os
import signal
import threading

from standin_helpers import WAIT


def stream(port, path, body, on_event=None):
    """(status, [decoded data payloads], ended_with_done) of one streamed request, read event by event."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    conn.request("POST", path, json.dumps(dict(body, stream=True)), {"Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.getheader("content-type") == "text/event-stream; charset=utf-8"
    assert response.getheader("transfer-encoding") == "chunked"
    events, done = [], False
    for raw in response:
        line = raw.decode().rstrip("\n")
        if not line.startswith("data: "):
            continue
        if line == "data: [DONE]":
            done = True
            continue
        events.append(json.loads(line[len("data: "):]))
        if on_event:
            on_event(len(events))
    conn.close()
    return response.status, events, done


def records(path):
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def test_chat_stream_one_event_per_token(launch, standin_python, model_dir, tmp_path):
    log = str(tmp_path / "requests.jsonl")
    server = launch(standin_python, model_dir, env={"SGLANG_STANDIN_REQUEST_LOG": log})
    server.wait_ready()
    status, events, done = stream(server.port, "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "hi"}], "max_tokens": 12, "ignore_eos": True,
        "stream_options": {"include_usage": True}, "user": "t1"})
    assert status == 200 and done
    first, tokens, final, usage = events[0], events[1:-2], events[-2], events[-1]
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"] == {"reasoning_content": None, "role": "assistant", "content": ""}
    assert len(tokens) == 12  # ignore_eos: the generation runs to max_tokens
    assert all(len(event["choices"][0]["delta"]["content"]) >= 1 and event["choices"][0]["finish_reason"] is None
               for event in tokens)
    assert final["choices"][0]["delta"] == {"reasoning_content": None}
    assert final["choices"][0]["finish_reason"] == "length"
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 12
    assert len({event["id"] for event in events}) == 1
    # the same text as the non-streamed answer
    status, whole = server.request("POST", "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "hi"}], "max_tokens": 12, "ignore_eos": True})
    assert "".join(e["choices"][0]["delta"]["content"] for e in tokens).strip() == whole["choices"][0]["message"]["content"]
    served = [r for r in records(log) if r["tag"] == "t1"]
    assert len(served) == 1
    assert served[0]["state"] == "ready" and served[0]["completed"] and served[0]["tokens_sent"] == 12
    assert served[0]["stream"] and served[0]["start"] <= served[0]["end"]


def test_completion_stream_without_usage_by_default(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir)
    server.wait_ready()
    status, events, done = stream(server.port, "/v1/completions", {"prompt": "The capital of France is", "max_tokens": 3})
    assert status == 200 and done
    # one chunk per decoded token, the last one carrying "length" (0.5.23 serving_completions.py:381-403; held to
    # the release's own models by tests/conformance/test_standin.py)
    assert [event["object"] for event in events] == ["text_completion"] * 3
    assert [event["choices"][0]["finish_reason"] for event in events] == [None, None, "length"]
    assert all(event["choices"][0]["text"] for event in events)
    assert all("usage" in event and event["usage"] is None for event in events)


def test_long_stream_survives_sigterm_and_new_requests_are_served_while_draining(
        launch, standin_python, model_dir, tmp_path):
    """The drain waits for a stream still sending tokens (its rid stays held until the last one), and a request
    arriving after SIGTERM is answered in full and recorded as served while draining."""
    log = str(tmp_path / "requests.jsonl")
    server = launch(standin_python, model_dir, "--enable-metrics",
                    env={"SGLANG_STANDIN_TOKEN_SECONDS": "0.05", "SGLANG_STANDIN_REQUEST_LOG": log})
    server.wait_ready()
    started = threading.Event()
    result = {}

    def long_stream():
        result["long"] = stream(server.port, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "a long one"}], "max_tokens": 80, "ignore_eos": True,
            "user": "long"}, on_event=lambda n: n == 3 and started.set())

    client = threading.Thread(target=long_stream)
    client.start()
    assert started.wait(WAIT)
    metrics = server.request("GET", "/metrics")[1]
    assert any(line.startswith("sglang:num_running_reqs{") and line.endswith(" 1.0") for line in metrics.splitlines())
    server.signal(signal.SIGTERM)
    server.wait_for(r"Gracefully exiting\.\.\. Remaining number of requests 1\.")
    late = server.request("POST", "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "late"}], "max_tokens": 4, "user": "late"}, timeout=WAIT)
    assert late[0] == 200 and late[1]["usage"]["completion_tokens"] == 4
    client.join(WAIT)
    status, events, done = result["long"]
    assert status == 200 and done and len(events) == 1 + 80 + 1
    assert server.wait_exit() == 0
    by_tag = {r["tag"]: r for r in records(log)}
    assert by_tag["long"]["state"] == "ready" and by_tag["long"]["state_at_end"] == "draining"
    assert by_tag["long"]["completed"] and by_tag["long"]["tokens_sent"] == 80
    assert by_tag["late"]["state"] == "draining" and by_tag["late"]["completed"]


def test_a_client_that_goes_away_mid_stream_is_recorded_incomplete(launch, standin_python, model_dir, tmp_path):
    log = str(tmp_path / "requests.jsonl")
    server = launch(standin_python, model_dir, env={"SGLANG_STANDIN_TOKEN_SECONDS": "0.05",
                                                    "SGLANG_STANDIN_REQUEST_LOG": log})
    server.wait_ready()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=WAIT)
    conn.request("POST", "/v1/chat/completions", json.dumps({
        "messages": [{"role": "user", "content": "x"}], "max_tokens": 200, "ignore_eos": True, "stream": True,
        "user": "gone"}), {"Content-Type": "application/json"})
    response = conn.getresponse()
    response.readline()
    conn.sock.close()
    conn.close()
    gone = []
    for _attempt in range(WAIT * 10):  # the server notices at its next write; bounded poll, no timing assertion
        gone = [r for r in records(log) if r["tag"] == "gone"]
        if gone:
            break
        threading.Event().wait(0.1)
    assert gone and not gone[0]["completed"] and gone[0]["tokens_sent"] < 200
