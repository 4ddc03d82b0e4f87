"""The SGLang 0.5.23 command line, as one table (the only place that knows the flags).

Unknown flags fail exactly like SGLang's argparse parser: `usage: ...` then
`launch_server.py: error: unrecognized arguments: --foo`, exit code 2.
"""
import argparse

ATTENTION_BACKENDS = ["triton", "fa3", "fa4", "flashinfer", "flashmla", "trtllm_mla", "cutedsl_mla", "trtllm_mha",
                      "torch_native", "flex_attention", "aiter", "wave", "ascend", "intel_amx"]
SPECULATIVE_ALGORITHMS = ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"]
KV_CACHE_DTYPES = ["auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1"]
LOG_LEVELS = ["debug", "info", "warning", "error", "critical"]

# (names, kind, default, choices). kind: str | int | float | bool | ints (nargs="+").
# `--json-model-override-args` is a string on purpose: SGLang parses the JSON later (a traceback, not a usage error).
FLAGS = [
    (("--model-path", "--model"), "str", None, None),
    (("--tokenizer-path",), "str", None, None),
    (("--tokenizer-mode",), "str", "auto", ["auto", "slow"]),
    (("--served-model-name",), "str", None, None),
    (("--chat-template",), "str", None, None),
    (("--revision",), "str", None, None),
    (("--download-dir",), "str", None, None),
    (("--load-format",), "str", "auto", None),
    (("--dtype",), "str", "auto", None),
    (("--host",), "str", "127.0.0.1", None),
    (("--port",), "int", 30000, None),
    (("--tp-size", "--tp"), "int", 1, None),
    (("--dp-size", "--dp"), "int", 1, None),
    (("--ep-size", "--ep"), "int", 1, None),
    (("--pp-size", "--pp"), "int", 1, None),
    (("--context-length",), "int", None, None),
    (("--mem-fraction-static",), "float", None, None),
    (("--max-running-requests",), "int", None, None),
    (("--max-total-tokens",), "int", None, None),
    (("--max-prefill-tokens",), "int", 16384, None),
    (("--chunked-prefill-size",), "int", None, None),
    (("--page-size",), "int", None, None),
    (("--schedule-policy",), "str", "fcfs", None),
    (("--attention-backend",), "str", None, ATTENTION_BACKENDS),
    (("--prefill-attention-backend",), "str", None, ATTENTION_BACKENDS),
    (("--decode-attention-backend",), "str", None, ATTENTION_BACKENDS),
    (("--mm-attention-backend",), "str", None, None),
    (("--moe-runner-backend",), "str", "auto", None),
    (("--sampling-backend",), "str", None, None),
    (("--tool-call-parser",), "str", None, None),
    (("--reasoning-parser",), "str", None, None),
    (("--api-key",), "str", None, None),
    (("--kv-cache-dtype",), "str", "auto", KV_CACHE_DTYPES),
    (("--quantization",), "str", None, None),
    (("--watchdog-timeout",), "float", 300.0, None),
    (("--dist-timeout",), "int", None, None),
    (("--random-seed",), "int", None, None),
    (("--stream-interval",), "int", 1, None),
    (("--device",), "str", None, None),
    (("--base-gpu-id",), "int", 0, None),
    (("--log-level",), "str", "info", LOG_LEVELS),
    (("--log-level-http",), "str", None, None),
    (("--decode-log-interval",), "int", 40, None),
    (("--speculative-algorithm",), "str", None, SPECULATIVE_ALGORITHMS),
    (("--speculative-draft-model-path",), "str", None, None),
    (("--speculative-num-steps",), "int", None, None),
    (("--speculative-eagle-topk",), "int", None, None),
    (("--speculative-num-draft-tokens",), "int", None, None),
    (("--nnodes",), "int", 1, None),
    (("--node-rank",), "int", 0, None),
    (("--dist-init-addr", "--nccl-init-addr"), "str", None, None),
    (("--json-model-override-args",), "str", "{}", None),
    (("--model-loader-extra-config",), "str", "{}", None),
    (("--cuda-graph-max-bs",), "int", None, None),
    (("--cuda-graph-max-bs-decode",), "int", None, None),
    (("--cuda-graph-max-bs-prefill",), "int", None, None),
    (("--cuda-graph-bs",), "ints", None, None),
    (("--torch-compile-max-bs",), "int", 32, None),
    (("--trust-remote-code",), "bool", False, None),
    (("--enable-metrics",), "bool", False, None),
    (("--skip-server-warmup",), "bool", False, None),
    (("--enable-p2p-check",), "bool", False, None),
    (("--disable-custom-all-reduce",), "bool", False, None),
    (("--enable-multimodal",), "bool", False, None),
    (("--enable-nccl-nvls",), "bool", False, None),
    (("--enable-symm-mem",), "bool", False, None),
    (("--disable-cuda-graph",), "bool", False, None),
    (("--disable-radix-cache",), "bool", False, None),
    (("--enable-torch-compile",), "bool", False, None),
    (("--enable-dp-attention",), "bool", False, None),
    (("--enable-mixed-chunk",), "bool", False, None),
    (("--enable-cache-report",), "bool", False, None),
    (("--enable-deterministic-inference",), "bool", False, None),
    (("--log-requests",), "bool", False, None),
    (("--show-time-cost",), "bool", False, None),
    (("--skip-tokenizer-init",), "bool", False, None),
    (("--sleep-on-idle",), "bool", False, None),
]

KINDS = {"str": str, "int": int, "float": float}


def build_parser(prog="launch_server.py"):
    """The argparse parser of ServerArgs.add_cli_args, from the FLAGS table."""
    parser = argparse.ArgumentParser(prog=prog)
    for names, kind, default, choices in FLAGS:
        kwargs = {"default": default}
        if kind == "bool":
            kwargs["action"] = "store_true"
        elif kind == "ints":
            kwargs.update(type=int, nargs="+")
        else:
            kwargs["type"] = KINDS[kind]
            if choices:
                kwargs["choices"] = choices
        if names[0] == "--model-path":
            kwargs["required"] = True
        parser.add_argument(*names, **kwargs)
    return parser


def parse_args(argv, prog="launch_server.py"):
    """Parse like SGLang (exit 2 with argparse's message on unknown flags) and fill derived defaults."""
    args = build_parser(prog).parse_args(argv)
    if args.served_model_name is None:
        args.served_model_name = args.model_path
    if args.tokenizer_path is None:
        args.tokenizer_path = args.model_path
    return args


def public_args(args):
    """The server args as SGLang reports them, with the api key masked (secrets never leave the process)."""
    shown = dict(vars(args))
    if shown.get("api_key"):
        shown["api_key"] = "<redacted>"
    return shown
