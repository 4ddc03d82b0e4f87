"""The stand-in's /metrics: SGLang 0.5.23's names, types and labels, read by prometheus-client's own text parser,
moving as the server serves requests (sources cited in tests/standin/src/sglang_standin/metrics.py)."""
import pytest

from prometheus_client.parser import text_string_to_metric_families

import standin_helpers  # noqa: F401  pylint: disable=unused-import
from sglang_standin import metrics as metrics_mod

SCHEDULER_LABELS = {"model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"}
TOKENIZER_LABELS = {"model_name", "engine_type"}


def families(text):
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(fams, family, sample_name=None, **labels):
    """The one sample of `family` whose labels include `labels` (0.0 when there is none yet)."""
    found = [s.value for s in fams[family].samples
             if s.name == (sample_name or s.name) and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) <= 1, (family, labels, found)
    return found[0] if found else 0.0


def chat(server, stream=False, max_tokens=4):
    return server.request("POST", "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Say OK"}], "max_tokens": max_tokens, "stream": stream},
        headers={"Authorization": "Bearer sk-metrics"})


def test_metrics_names_types_labels_and_movement(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir, "--served-model-name", "k26", "--enable-metrics", "--api-key", "sk-metrics")
    server.wait_ready()
    status, text = server.request("GET", "/metrics")  # no Authorization header: exempt (utils/auth.py:93-104)
    assert status == 200, text
    before = families(text)
    for name in ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage", "sglang:gen_throughput",
                 "sglang:max_total_num_tokens", "sglang:weight_memory_usage_gb"):
        assert before[name].type == "gauge", name
        (sample,) = before[name].samples
        assert set(sample.labels) == SCHEDULER_LABELS, sample
        assert sample.labels["model_name"] == "k26" and sample.labels["engine_type"] == "unified"
    assert value(before, "sglang:max_total_num_tokens") > 0
    # prometheus-client's parser names counter families without _total; histograms with _bucket/_count/_sum
    for name in ("sglang:prompt_tokens", "sglang:generation_tokens", "sglang:num_requests", "sglang:http_requests"):
        assert before[name].type == "counter", name
    assert before["sglang:e2e_request_latency_seconds"].type == "histogram"
    assert before["sglang:time_to_first_token_seconds"].type == "histogram"

    assert chat(server)[0] == 200
    assert chat(server, stream=True)[0] == 200
    after = families(server.request("GET", "/metrics")[1])
    for streaming in ("false", "true"):
        assert value(after, "sglang:num_requests", is_streaming=streaming) == \
            value(before, "sglang:num_requests", is_streaming=streaming) + 1, streaming
        assert value(after, "sglang:generation_tokens", is_streaming=streaming) == \
            value(before, "sglang:generation_tokens", is_streaming=streaming) + 4, streaming
        assert value(after, "sglang:prompt_tokens", is_streaming=streaming) > \
            value(before, "sglang:prompt_tokens", is_streaming=streaming)
        count = value(after, "sglang:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds_count",
                      is_streaming=streaming)
        inf = value(after, "sglang:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds_bucket",
                    is_streaming=streaming, le="+Inf")
        assert count == inf >= 1
    for sample in after["sglang:num_requests"].samples:
        assert set(sample.labels) == TOKENIZER_LABELS | {"is_streaming"}
    chat_path = {"endpoint": "/v1/chat/completions", "method": "POST"}
    assert value(after, "sglang:http_requests", **chat_path) == value(before, "sglang:http_requests", **chat_path) + 2
    assert value(after, "sglang:http_responses", status_code="200", **chat_path) >= 2
    assert value(after, "sglang:http_requests", endpoint="/metrics", method="GET") >= 1
    # a request refused for its key still counts as an HTTP request, with its status
    assert server.request("GET", "/v1/models")[0] == 401
    refused = families(server.request("GET", "/metrics")[1])
    assert value(refused, "sglang:http_responses", endpoint="/v1/models", method="GET", status_code="401") == 1


def test_no_metrics_without_the_flag(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir)
    server.wait_ready()
    assert server.request("GET", "/metrics")[0] == 404


class FakeArgs(object):
    served_model_name = "m"
    tp_size = 8
    context_length = None


class FakeModel(object):
    declared_bytes = 8 * 1024 ** 3
    context_length = 4096


class FakeLauncher(object):
    args = FakeArgs()
    model = FakeModel()
    in_flight = 0
    scheduler_info = {"max_total_num_tokens": 1000, "max_running_requests": 2}

    def context_len(self):
        return 4096


def test_queue_and_token_usage_follow_requests_in_flight():
    launcher = FakeLauncher()
    registry = metrics_mod.Metrics(launcher, clock=lambda: 100.0)
    launcher.in_flight = 3
    registry.generation_started(250)
    registry.generation_started(250)
    fams = families(registry.render())
    assert value(fams, "sglang:num_running_reqs") == 2 and value(fams, "sglang:num_queue_reqs") == 1
    assert value(fams, "sglang:token_usage") == pytest.approx(0.5)
    assert value(fams, "sglang:weight_memory_usage_gb") == 1.0
    registry.generation_ended(250, 10, None, 0.1, False)
    assert value(families(registry.render()), "sglang:num_aborted_requests", model_name="m") == 1


def test_gen_throughput_counts_the_last_ten_seconds():
    now = [100.0]
    registry = metrics_mod.Metrics(FakeLauncher(), clock=lambda: now[0])
    registry.generation_started(20)
    registry.generation_ended(20, 10, 50, 0.5, False)
    assert value(families(registry.render()), "sglang:gen_throughput") == 5.0
    now[0] += registry.THROUGHPUT_WINDOW + 1
    assert value(families(registry.render()), "sglang:gen_throughput") == 0.0


@pytest.mark.parametrize("number,text", [(1, "1.0"), (0.5, "0.5"), (float("inf"), "+Inf"), (12000000.0, "1.2e+07"),
                                         (2400, "2400.0")])
def test_go_float_matches_prometheus_client(number, text):
    from prometheus_client.utils import floatToGoString
    assert metrics_mod.go_float(number) == text == floatToGoString(number)
