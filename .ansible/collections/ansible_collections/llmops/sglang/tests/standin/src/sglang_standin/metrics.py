"""`/metrics` of the stand-in: the names, types, labels and text format SGLang 0.5.23 serves with --enable-metrics.

Source of truth (sglang==0.5.23, paths under sglang/srt/):
- `/metrics` is a Starlette Mount of prometheus_client's `make_asgi_app` over a MultiProcessCollector registry,
  added only when --enable-metrics is set (utils/common.py:2843-2853, called from entrypoints/http_server.py:314).
  The multiprocess collector emits no `_created` samples; prometheus_client's text format 0.0.4 names a counter's
  family `<name>_total` in HELP/TYPE and sorts each sample's labels.
- `/metrics` never needs the API key (utils/auth.py:93-104: health, readiness and metrics paths are always allowed).
- --enable-metrics is `enable_metrics`, default False (arg_groups/fields/observability.py:70).
- Scheduler gauges carry model_name, engine_type, tp_rank, pp_rank, moe_ep_rank
  (observability/metrics_collector.py:1382-1388); engine_type is "unified" without disaggregation
  (disaggregation/utils.py:156-161). Tokenizer metrics carry model_name and engine_type
  (observability/metrics_collector.py:1804-1819), plus is_streaming "true"/"false" where declared (:2105-2108).
- HTTP metrics carry endpoint (the route path) and method, responses also status_code
  (observability/http_request_metrics.py:28-45, 87-106); every request counts, /metrics itself too.

What moves: every request through the HTTP server (http_*), every generation served through run_generation (the
OpenAI endpoints and /generate; /health_generate does not count, as in SGLang where it passes log_metrics=False,
entrypoints/http_server.py:761), the running/queued requests and the KV tokens they hold.
Only the metric families an operator's dashboard needs are served, not all of SGLang's ~200.
"""
import threading
import time

# Buckets from observability/metrics_collector.py:1972-2010 (time to first token, e2e latency).
TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)

# name, type, help, labels beyond the collector's own, source line in observability/metrics_collector.py
SCHEDULER_GAUGES = (
    ("sglang:num_running_reqs", "The number of running requests.", 364),
    ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", 370),
    ("sglang:gen_throughput", "The generation throughput (token/s).", 382),
    ("sglang:cache_hit_rate", "The prefix cache hit rate.", 388),
    ("sglang:token_usage", "The token usage.", 404),
    ("sglang:num_used_tokens", "The number of used tokens.", 432),
    ("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", 1289),
    ("sglang:weight_memory_usage_gb", "Memory used by model weights in GB.", 1301),
    ("sglang:kv_cache_memory_usage_gb", "Memory used by the KV cache pools in GB.", 1307),
    ("sglang:context_len", "Maximum context length.", 1337),
)
TOKENIZER_COUNTERS = (  # (name without _total, help, labels beyond model_name/engine_type)
    ("sglang:prompt_tokens", "Number of prefill tokens processed.", ("is_streaming",)),           # :1855
    ("sglang:generation_tokens", "Number of generation tokens processed.", ("is_streaming",)),    # :1860
    ("sglang:num_requests", "Number of requests processed.", ("is_streaming",)),                 # :1940
    ("sglang:num_aborted_requests", "Number of requests aborted.", ()),                          # :1959
)
TOKENIZER_HISTOGRAMS = (
    ("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS),  # :2040
    ("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", E2E_BUCKETS),  # :2067
)
HTTP_HELP = {  # observability/http_request_metrics.py:28-45
    "sglang:http_requests": "Total number of HTTP requests by endpoint and method",
    "sglang:http_responses": "Total number of HTTP responses by endpoint and status code",
    "sglang:http_requests_active": "Number of currently active HTTP requests",
}
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # prometheus_client's CONTENT_TYPE_LATEST


def go_float(value):
    """prometheus_client's floatToGoString: 1.0, 0.5, +Inf, 1.2e+07."""
    value = float(value)
    if value == float("inf"):
        return "+Inf"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = ("%s.%s%s" % (text[0], text[1:dot], text[dot + 1:])).rstrip("0.")
        return "%se+%02d" % (mantissa, dot - 1)
    return text


def _escape(value):
    return str(value).replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


def _sample(name, labels, value):
    body = ",".join('%s="%s"' % (key, _escape(val)) for key, val in sorted(labels.items()))
    return "%s%s %s\n" % (name, "{%s}" % body if body else "", go_float(value))


class Metrics(object):
    """Counters of one stand-in server process; thread-safe (ThreadingHTTPServer)."""

    def __init__(self, launcher, clock=time.monotonic):
        self.launcher = launcher
        self.clock = clock
        self.lock = threading.Lock()
        self.counters = {}      # (family, label items) -> value
        self.histograms = {}    # (family, label items) -> [bucket counts..., sum, count]
        self.active = {}        # (endpoint, method) -> requests in flight
        self.reserved_tokens = 0
        self.recent = []        # (time, generated tokens) over the last THROUGHPUT_WINDOW seconds

    THROUGHPUT_WINDOW = 10.0

    # ---- labels ---------------------------------------------------------------------------------------------
    def tokenizer_labels(self):
        return {"model_name": self.launcher.args.served_model_name, "engine_type": "unified"}

    def scheduler_labels(self):
        return dict(self.tokenizer_labels(), tp_rank="0", pp_rank="0", moe_ep_rank="0")

    # ---- recording ------------------------------------------------------------------------------------------
    def _inc(self, family, labels, amount=1.0):
        key = (family, tuple(sorted(labels.items())))
        self.counters[key] = self.counters.get(key, 0.0) + amount

    def _observe(self, family, buckets, labels, value):
        key = (family, tuple(sorted(labels.items())))
        slot = self.histograms.setdefault(key, [0] * len(buckets) + [0.0, 0])
        for index, bound in enumerate(buckets):
            if value <= bound:
                slot[index] += 1
        slot[-2] += value
        slot[-1] += 1

    def request_started(self, endpoint, method):
        with self.lock:
            self._inc("sglang:http_requests", {"endpoint": endpoint, "method": method})
            self.active[(endpoint, method)] = self.active.get((endpoint, method), 0) + 1

    def response_started(self, endpoint, method, status):
        """Counted when the response starts (SGLang's middleware counts once call_next returned the response, before
        its body is sent), so a client's next scrape sees it."""
        with self.lock:
            self._inc("sglang:http_responses", {"endpoint": endpoint, "method": method, "status_code": str(status)})

    def request_ended(self, endpoint, method):
        with self.lock:
            self.active[(endpoint, method)] -= 1

    def generation_started(self, tokens):
        with self.lock:
            self.reserved_tokens += tokens

    def generation_ended(self, tokens, prompt_tokens, generated, seconds, streaming):
        """One finished (or, with generated None, aborted) generation."""
        now = self.clock()
        labels = self.tokenizer_labels()
        stream_labels = dict(labels, is_streaming="true" if streaming else "false")
        with self.lock:
            self.reserved_tokens -= tokens
            if generated is None:
                self._inc("sglang:num_aborted_requests", labels)
                return
            self._inc("sglang:prompt_tokens", stream_labels, prompt_tokens)
            self._inc("sglang:generation_tokens", stream_labels, generated)
            self._inc("sglang:num_requests", stream_labels)
            # The stand-in answers in one piece: the first token arrives with the last.
            self._observe("sglang:time_to_first_token_seconds", TTFT_BUCKETS, stream_labels, seconds)
            self._observe("sglang:e2e_request_latency_seconds", E2E_BUCKETS, stream_labels, seconds)
            self.recent.append((now, generated))

    # ---- exposition -----------------------------------------------------------------------------------------
    def scheduler_values(self):
        launcher = self.launcher
        info = launcher.scheduler_info or {}
        total = float(info.get("max_total_num_tokens") or 0)
        running_cap = int(info.get("max_running_requests") or 0) or None
        in_flight = max(0, launcher.in_flight)
        running = min(in_flight, running_cap) if running_cap else in_flight
        now = self.clock()
        self.recent = [item for item in self.recent if now - item[0] <= self.THROUGHPUT_WINDOW]
        used = min(total, max(0, self.reserved_tokens)) if total else 0
        # Weights per GPU: the formula the scheduler uses when it loads them (scheduler.py phase_weights).
        weight_gb = launcher.model.declared_bytes / float(1024 ** 3) / max(1, launcher.args.tp_size)
        values = {
            "sglang:num_running_reqs": running,
            "sglang:num_queue_reqs": in_flight - running,
            "sglang:gen_throughput": sum(tokens for _t, tokens in self.recent) / self.THROUGHPUT_WINDOW,
            "sglang:cache_hit_rate": 0.0,
            "sglang:token_usage": (used / total) if total else 0.0,
            "sglang:num_used_tokens": used,
            "sglang:max_total_num_tokens": total,
            "sglang:weight_memory_usage_gb": round(weight_gb, 2),
            "sglang:context_len": float(launcher.context_len() or 0),
        }
        if info.get("kv_cache_gb") is not None:
            values["sglang:kv_cache_memory_usage_gb"] = float(info["kv_cache_gb"])
        return values

    def render(self):
        """The whole /metrics body, in prometheus_client's text format 0.0.4."""
        out = []
        with self.lock:
            values = self.scheduler_values()
            labels = self.scheduler_labels()
            for name, doc, _line in SCHEDULER_GAUGES:
                if name in values:
                    out.append("# HELP %s %s\n# TYPE %s gauge\n" % (name, doc, name))
                    out.append(_sample(name, labels, values[name]))
            for family, doc, _extra in TOKENIZER_COUNTERS:
                self._family(out, family, doc)
            for family, doc, buckets in TOKENIZER_HISTOGRAMS:
                out.append("# HELP %s %s\n# TYPE %s histogram\n" % (family, doc, family))
                for key, slot in sorted(self.histograms.items()):
                    if key[0] != family:
                        continue
                    labels = dict(key[1])
                    for bound, count in zip(buckets, slot):
                        out.append(_sample(family + "_bucket", dict(labels, le=go_float(bound)), count))
                    out.append(_sample(family + "_bucket", dict(labels, le="+Inf"), slot[-1]))
                    out.append(_sample(family + "_count", labels, slot[-1]))
                    out.append(_sample(family + "_sum", labels, slot[-2]))
            self._family(out, "sglang:http_requests", HTTP_HELP["sglang:http_requests"])
            self._family(out, "sglang:http_responses", HTTP_HELP["sglang:http_responses"])
            name = "sglang:http_requests_active"
            out.append("# HELP %s %s\n# TYPE %s gauge\n" % (name, HTTP_HELP[name], name))
            for (endpoint, method), count in sorted(self.active.items()):
                out.append(_sample(name, {"endpoint": endpoint, "method": method}, count))
        return "".join(out)

    def _family(self, out, family, doc):
        name = family + "_total"
        out.append("# HELP %s %s\n# TYPE %s counter\n" % (name, doc, name))
        for key, value in sorted(self.counters.items()):
            if key[0] == family:
                out.append(_sample(name, dict(key[1]), value))


def instrument(handler_cls):
    """Wrap the stand-in's request handler so that every request and generation moves the metrics, and serve
    /metrics (404 without --enable-metrics, as SGLang mounts it only then). The endpoint label is the request's path
    without query (SGLang records the route's path, and the raw path for an unknown route)."""

    def registry(handler):
        launcher = handler.launcher
        if getattr(launcher, "metrics", None) is None:
            launcher.metrics = Metrics(launcher)
        return launcher.metrics

    def wrap_method(method_name):
        original = getattr(handler_cls, method_name)

        def wrapped(self):
            if not self.launcher.args.enable_metrics:
                return original(self)
            endpoint = self.path.split("?", 1)[0]
            metrics = registry(self)
            metrics.request_started(endpoint, self.command)
            self._metrics_status = None
            self._metrics_endpoint = endpoint
            self._metrics_stream = False
            try:
                return original(self)
            finally:
                self._metrics_endpoint = None
                metrics.request_ended(endpoint, self.command)
        setattr(handler_cls, method_name, wrapped)

    original_access = handler_cls.access

    def access(self, status):
        self._metrics_status = status
        if getattr(self, "_metrics_endpoint", None) is not None:
            registry(self).response_started(self._metrics_endpoint, self.command, status)
        return original_access(self, status)

    original_read_json = handler_cls.read_json

    def read_json(self):
        body = original_read_json(self)
        self._metrics_stream = bool(isinstance(body, dict) and body.get("stream"))
        return body

    original_generation = handler_cls.run_generation

    def run_generation(self, prompt, prompt_tokens, max_tokens, thinking, counted):
        if not self.launcher.args.enable_metrics:
            return original_generation(self, prompt, prompt_tokens, max_tokens, thinking, counted)
        metrics = registry(self)
        reserved = int(prompt_tokens or 0) + int(max_tokens or 0)
        started = metrics.clock()
        metrics.generation_started(reserved)
        result = None
        try:
            result = original_generation(self, prompt, prompt_tokens, max_tokens, thinking, counted)
            return result
        finally:
            generated = None if result is None else len(result[0])
            metrics.generation_ended(reserved, int(prompt_tokens or 0), generated, metrics.clock() - started,
                                     getattr(self, "_metrics_stream", False))

    def serve_metrics(self):
        if not self.launcher.args.enable_metrics:
            self.send_body(404, {"detail": "Not Found"})
            return
        self.send_body(200, registry(self).render().encode(), CONTENT_TYPE)

    handler_cls.access = access
    handler_cls.read_json = read_json
    handler_cls.run_generation = run_generation
    handler_cls.metrics = serve_metrics
    wrap_method("do_GET")
    wrap_method("do_POST")
    return handler_cls
