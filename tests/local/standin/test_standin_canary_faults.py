"""The degradations the canary analysis tests provoke (issue 26), each against a stand-in without it: decode_slowdown,
answer_shift, error_rate and collapse_above (tests/standin/README.md "Fault grammar"). Speeds are compared as ratios
with wide margins, never as absolute times; the error forms are 0.5.23's bytes (entrypoints/openai/serving_base.py
:119-122,205-237; serving_chat.py:2561-2579,2805; serving_completions.py:356-372,504)."""
import http.client
import json
import statistics
import threading
import time

from standin_helpers import WAIT

ABORT_MESSAGE = ("Out of memory even after retracting all other requests in the decode batch. "
                 "Aborting the last request.")  # managers/schedule_batch.py:3515-3519
# non-streamed: ORJSONResponse(ErrorResponse(...).model_dump(), 500) of handle_request's HTTPException branch
ABORT_BODY = ('{"object":"error","message":"%s","type":"500","param":null,"code":500}' % ABORT_MESSAGE).encode()
# streamed: create_streaming_error_response(message, code.name, code.value), json.dumps'd into one event
ABORT_EVENT = ('data: {"error": {"object": "error", "message": "%s", "type": "INTERNAL_SERVER_ERROR", "param": null, '
               '"code": 500}}\n\n' % ABORT_MESSAGE)
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"


def started(launch, python, model, *args, **faults):
    """Servers are started together and waited for together: (name -> Server) for each name=env of `faults`."""
    servers = {name: launch(python, model, *args, env=env) for name, env in faults.items()}
    for server in servers.values():
        server.wait_ready()
    return servers


def post(port, path, body):
    """(status, content type, raw body bytes) of one POST; http.client undoes the chunked framing of a stream."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.getheader("content-type"), response.read()
    finally:
        conn.close()


def timed_stream(port, path, body):
    """(seconds from the request to each `data:` event, the events' payloads) of one streamed request."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    sent = time.monotonic()
    conn.request("POST", path, json.dumps(dict(body, stream=True)), {"Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == 200
    times, payloads = [], []
    for raw in response:
        line = raw.decode().rstrip("\n")
        if line.startswith("data: "):
            times.append(time.monotonic() - sent)
            payloads.append(line[len("data: "):])
    conn.close()
    assert payloads[-1] == "[DONE]", payloads[-3:]
    return times, payloads


def logged(path, count):
    """The request log's records once it has `count` (each is written just after its response's last byte: a
    bounded poll, no timing assertion)."""
    deadline = time.monotonic() + WAIT
    while True:
        try:
            with open(path) as handle:
                records = [json.loads(line) for line in handle if line.strip()]
        except FileNotFoundError:
            records = []
        if len(records) >= count or time.monotonic() > deadline:
            return records
        time.sleep(0.05)


def events_of(raw):
    """The events of a stream's body, each with its blank line, as the release frames them."""
    parts = raw.decode().split("\n\n")
    assert parts[-1] == "", parts[-2:]
    return [part + "\n\n" for part in parts[:-1]]


# ---- decode_slowdown ----------------------------------------------------------------------------------------------

def test_decode_slowdown_stretches_the_gaps_between_tokens_not_the_first_token(launch, standin_python, model_dir):
    token = "0.03"
    servers = started(launch, standin_python, model_dir,
                      base={"SGLANG_STANDIN_TOKEN_SECONDS": token},
                      slow={"SGLANG_STANDIN_TOKEN_SECONDS": token, "SGLANG_STANDIN_FAULT": "decode_slowdown=3"})
    body = {"messages": [{"role": "user", "content": "pace me"}], "max_tokens": 16, "ignore_eos": True}
    ttft, gaps = {}, {}
    for name, server in servers.items():
        firsts, between = [], []
        for _attempt in range(3):
            times, payloads = timed_stream(server.port, CHAT, body)
            assert len(payloads) == 1 + 16 + 1 + 1  # role chunk, one per token, finish chunk, [DONE]
            tokens = times[1:17]  # the events carrying the 16 tokens
            firsts.append(tokens[0])
            between.extend(later - earlier for earlier, later in zip(tokens, tokens[1:]))
        ttft[name], gaps[name] = min(firsts), statistics.median(between)
    assert gaps["slow"] / gaps["base"] > 2.2, gaps  # 3 expected
    assert ttft["slow"] / ttft["base"] < 1.6, ttft  # 1 expected; a slowed first token would be about 3
    # non-streamed answers wait the same: the first token's pace plus 15 slowed ones, against 16 plain ones
    whole = {}
    for name, server in servers.items():
        tic = time.monotonic()
        status, answer = server.request("POST", COMPLETIONS, {"prompt": "pace me", "max_tokens": 16, "ignore_eos": True},
                                        timeout=WAIT)
        whole[name] = time.monotonic() - tic
        assert status == 200 and answer["usage"]["completion_tokens"] == 16
    assert whole["slow"] / whole["base"] > 2.0, whole  # (1 + 15 * 3) / 16 = 2.9 expected
    # /generate, otherwise unpaced, takes its 7 decoded tokens after the first at 3 x 0.03 s each (at least that)
    tic = time.monotonic()
    status, answer = servers["slow"].request("POST", "/generate", {
        "text": "pace me", "sampling_params": {"max_new_tokens": 8, "ignore_eos": True}}, timeout=WAIT)
    assert status == 200
    assert time.monotonic() - tic >= (len(answer["output_ids"]) - 1) * 3 * float(token) * 0.95


def test_decode_slowdown_without_token_seconds_has_nothing_to_scale(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir, env={"SGLANG_STANDIN_FAULT": "decode_slowdown=1000"})
    server.wait_ready()  # the warmup's /generate is not slowed by 1000 x 0
    status, answer = server.request("POST", CHAT, {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8},
                                    timeout=WAIT)
    assert status == 200 and answer["choices"][0]["message"]["content"]


# ---- answer_shift ----------------------------------------------------------------------------------------------------

def answers(server):
    """What a client sees of the same five requests: chat with thinking (non-streamed, streamed), completions
    (non-streamed, streamed), /generate."""
    chat = {"messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 60}
    status, whole = server.request("POST", CHAT, chat, timeout=WAIT)
    assert status == 200
    message = whole["choices"][0]["message"]
    _times, payloads = timed_stream(server.port, CHAT, dict(chat, stream_options={"include_usage": True}))
    chunks = [json.loads(payload) for payload in payloads[:-1]]
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks if chunk["choices"]]
    completion = {"prompt": "The capital of France is", "max_tokens": 12, "ignore_eos": True}
    status, text = server.request("POST", COMPLETIONS, completion, timeout=WAIT)
    assert status == 200
    _times, payloads = timed_stream(server.port, COMPLETIONS, completion)
    streamed_text = "".join(json.loads(payload)["choices"][0]["text"] for payload in payloads[:-1])
    status, native = server.request("POST", "/generate", {"text": "The capital of France is",
                                                          "sampling_params": {"max_new_tokens": 10}}, timeout=WAIT)
    assert status == 200
    return {
        "chat": message["content"], "chat_reasoning": message["reasoning_content"],
        "chat_counts": (whole["usage"]["completion_tokens"], whole["choices"][0]["finish_reason"]),
        "stream": "".join(delta.get("content") or "" for delta in deltas),
        "stream_reasoning": "".join(delta.get("reasoning_content") or "" for delta in deltas),
        "stream_counts": (len(deltas), chunks[-1]["usage"]["completion_tokens"], chunks[-1]["usage"]["reasoning_tokens"]),
        "completion": text["choices"][0]["text"], "completion_counts": text["usage"]["completion_tokens"],
        "completion_stream": streamed_text, "completion_stream_counts": len(payloads) - 1,
        "generate": native["text"], "generate_counts": (len(native["output_ids"]), native["meta_info"]["finish_reason"]),
    }


def test_answer_shift_changes_the_text_not_the_lengths_and_is_deterministic(launch, standin_python, model_dir):
    servers = started(launch, standin_python, model_dir, "--reasoning-parser", "kimi_k2",
                      base={}, shifted={"SGLANG_STANDIN_FAULT": "answer_shift=7"},
                      again={"SGLANG_STANDIN_FAULT": "answer_shift=7"}, other={"SGLANG_STANDIN_FAULT": "answer_shift=8"})
    seen = {name: answers(server) for name, server in servers.items()}
    base, shifted = seen["base"], seen["shifted"]
    for key in ("chat", "stream", "completion", "completion_stream", "generate"):
        assert shifted[key] != base[key], (key, base[key])
        assert shifted[key] != seen["other"][key], (key, shifted[key])
    for key in ("chat_counts", "stream_counts", "completion_counts", "completion_stream_counts", "generate_counts",
                "chat_reasoning", "stream_reasoning"):
        assert shifted[key] == base[key] == seen["other"][key], (key, base[key], shifted[key])
    assert base["chat_reasoning"] and base["stream_reasoning"]
    assert seen["again"] == shifted  # the same N on another server: the same answers
    assert shifted["stream"].strip() == shifted["chat"] and shifted["completion_stream"] == shifted["completion"]
    # the warmup generated (ready) and /health_generate still answers
    assert servers["shifted"].request("GET", "/health_generate")[0] == 200


# ---- error_rate ------------------------------------------------------------------------------------------------------

KINDS = [(CHAT, False), (CHAT, True), (COMPLETIONS, False), (COMPLETIONS, True)]


def request_body(path, streamed, number):
    body = {"max_tokens": 9, "ignore_eos": True, "user": "r%d" % number, "stream": streamed}
    if streamed:
        body["stream_options"] = {"include_usage": True}
    if path == CHAT:
        return dict(body, messages=[{"role": "user", "content": "request %d" % number}])
    return dict(body, prompt="request %d" % number)


def check_aborted_stream(path, raw):
    """Half of the 9 tokens (4), then 0.5.23's error event, no finish chunk, the usage chunk of the abort's output
    (no prompt tokens: managers/tokenizer_manager.py:3603-3628), `data: [DONE]`."""
    events = events_of(raw)
    assert events[-1] == "data: [DONE]\n\n"
    usage = json.loads(events[-2][len("data: "):])
    assert usage["choices"] == [] and usage["usage"]["prompt_tokens"] == 0 and usage["usage"]["completion_tokens"] == 4
    assert events[-3] == ABORT_EVENT
    tokens = [json.loads(event[len("data: "):]) for event in events[:-3]]
    if path == CHAT:
        assert tokens[0]["choices"][0]["delta"].get("role") == "assistant"
        tokens = tokens[1:]
    assert len(tokens) == 4 and all(chunk["choices"][0]["finish_reason"] is None for chunk in tokens), tokens


def test_error_rate_fails_every_fourth_request_in_the_releases_forms(launch, standin_python, model_dir, tmp_path):
    log = str(tmp_path / "requests.jsonl")
    server = launch(standin_python, model_dir, env={"SGLANG_STANDIN_FAULT": "error_rate=0.25",
                                                    "SGLANG_STANDIN_REQUEST_LOG": log})
    server.wait_ready()  # the warmup's /generate is not counted
    # 16 requests: in block b the 4th (the failing one) is KINDS[b], the other three the other kinds, so each of the
    # four forms fails once and answers three times; health checks and /generate between them are not counted.
    plan = []
    for block in range(4):
        plan.extend(kind for kind in KINDS if kind != KINDS[block])
        plan.append(KINDS[block])
    failed = []
    for number, (path, streamed) in enumerate(plan, 1):
        assert server.request("GET", "/health_generate")[0] == 200 and server.request("GET", "/health")[0] == 200
        assert server.request("POST", "/generate", {"text": "x", "sampling_params": {"max_new_tokens": 3}})[0] == 200
        status, content_type, raw = post(server.port, path, request_body(path, streamed, number))
        if streamed:
            assert status == 200 and content_type == "text/event-stream; charset=utf-8"
            if ABORT_EVENT in raw.decode():
                check_aborted_stream(path, raw)
                failed.append(number)
            else:
                assert raw.endswith(b"data: [DONE]\n\n") and b'"error"' not in raw
        elif status == 500:
            assert content_type == "application/json" and raw == ABORT_BODY
            failed.append(number)
        else:
            assert status == 200 and json.loads(raw)["usage"]["completion_tokens"] == 9
    assert failed == [4, 8, 12, 16]
    assert [plan[number - 1] for number in failed] == KINDS
    assert server.wait_for(r'"POST /v1/completions HTTP/1\.1" 500 Internal Server Error')
    served = {record["tag"]: record for record in logged(log, len(plan))}
    assert sorted(int(tag[1:]) for tag, record in served.items() if record.get("error") == ABORT_MESSAGE) == failed
    assert all(served["r%d" % number]["finish_reason"] == "abort" for number in failed)
    # counted across threads: 8 at once are the 17th to 24th, of which exactly the 20th and the 24th fail
    statuses = []
    threads = [threading.Thread(target=lambda n=n: statuses.append(post(server.port, COMPLETIONS, request_body(
        COMPLETIONS, False, 100 + n))[0])) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert sorted(statuses) == [200] * 6 + [500] * 2


def test_without_error_rate_nothing_fails(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir)
    server.wait_ready()
    for number, (path, streamed) in enumerate(KINDS * 2, 1):
        status, _content_type, raw = post(server.port, path, request_body(path, streamed, number))
        assert status == 200 and b'"error"' not in raw


# ---- collapse_above --------------------------------------------------------------------------------------------------

def aggregate_throughput(server, concurrency, max_tokens=24):
    """Tokens per second of `concurrency` streams started together: all their tokens over the wall time."""
    gate = threading.Barrier(concurrency + 1)
    counts = []

    def one(number):
        gate.wait()
        _times, payloads = timed_stream(server.port, CHAT, {
            "messages": [{"role": "user", "content": "load %d" % number}], "max_tokens": max_tokens, "ignore_eos": True})
        counts.append(len(payloads) - 3)  # the role and finish chunks and [DONE] are no tokens

    threads = [threading.Thread(target=one, args=(number,)) for number in range(concurrency)]
    for thread in threads:
        thread.start()
    gate.wait()
    tic = time.monotonic()
    for thread in threads:
        thread.join(WAIT)
    elapsed = time.monotonic() - tic
    assert counts == [max_tokens] * concurrency
    return sum(counts) / elapsed


def test_collapse_above_makes_more_concurrency_yield_less(launch, standin_python, model_dir):
    token = {"SGLANG_STANDIN_TOKEN_SECONDS": "0.02"}
    servers = started(launch, standin_python, model_dir, base=token,
                      collapsing=dict(token, SGLANG_STANDIN_FAULT="collapse_above=2"))
    throughput = {(name, concurrency): aggregate_throughput(server, concurrency)
                  for name, server in servers.items() for concurrency in (2, 4)}
    base = throughput[("base", 4)] / throughput[("base", 2)]
    collapsing = throughput[("collapsing", 4)] / throughput[("collapsing", 2)]
    assert base > 1.4, throughput            # continuous batching: about 2
    assert collapsing < 0.8, throughput      # (4 / 2) ** 2 slower per token at 4: about 0.5
    assert throughput[("collapsing", 4)] / throughput[("base", 4)] < 0.5, throughput  # about 0.25
    # at or below N in flight, nothing changes: the same throughput as the unfaulted server's, within a wide margin
    assert throughput[("collapsing", 2)] / throughput[("base", 2)] > 0.6, throughput


def test_the_degradations_combine_and_the_request_log_records_the_aborts(launch, standin_python, model_dir, tmp_path):
    """All four at once: the aborted requests are recorded with their error, the others as before."""
    log = str(tmp_path / "requests.jsonl")
    server = launch(standin_python, model_dir, env={
        "SGLANG_STANDIN_FAULT": "decode_slowdown=2 answer_shift=1 collapse_above=1 error_rate=0.5",
        "SGLANG_STANDIN_TOKEN_SECONDS": "0.001", "SGLANG_STANDIN_REQUEST_LOG": log})
    server.wait_ready()
    statuses = [post(server.port, COMPLETIONS, request_body(COMPLETIONS, False, number))[0] for number in range(4)]
    assert statuses == [200, 500, 200, 500]
    records = logged(log, 4)
    assert [record["completed"] for record in records] == [True] * 4
    assert [record.get("error") for record in records] == [None, ABORT_MESSAGE, None, ABORT_MESSAGE]
    assert [record["tokens_sent"] for record in records] == [9, 0, 9, 0]
