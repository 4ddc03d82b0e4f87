"""The SGLang 0.5.23 command line, as one table (the only place that knows the flags).

Unknown flags fail exactly like SGLang's argparse parser: `usage: ...` then
`sglang serve: error: unrecognized arguments: --foo` (prog `sglang serve` under every entry point), exit code 2.
"""
import argparse

from sglang_standin import logfmt

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
    (("--cuda-graph-backend-decode",), "str", None, ["full", "breakable", "disabled"]),
    (("--cuda-graph-backend-prefill",), "str", None, ["full", "breakable", "disabled"]),
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
    (("--disable-radix-cache",), "bool", False, None),
    (("--enable-torch-compile",), "bool", False, None),
    (("--enable-mixed-chunk",), "bool", False, None),
    (("--enable-cache-report",), "bool", False, None),
    (("--enable-deterministic-inference",), "bool", False, None),
    (("--log-requests",), "bool", False, None),
    (("--show-time-cost",), "bool", False, None),
    (("--skip-tokenizer-init",), "bool", False, None),
    (("--sleep-on-idle",), "bool", False, None),
]

KINDS = {"str": str, "int": int, "float": float}


def _deprecation_warning(message):
    """0.5.23 `arg_groups/argparse_actions.py:28-29`: logger.warning in yellow. It runs inside parse_args, before
    prepare_server_args' logging.basicConfig, so Python's last-resort handler prints the bare message on stderr."""
    logfmt.raw_stderr("\033[1;33m%s\033[0m" % message)


class DeprecatedStoreTrueAction(argparse.Action):
    """0.5.23 `arg_groups/argparse_actions.py:77-100`: stores True and warns, naming the replacement."""

    def __init__(self, option_strings, dest, new_flag=None, nargs=0, const=True, default=False, **kwargs):
        self.new_flag = new_flag
        super(DeprecatedStoreTrueAction, self).__init__(option_strings, dest, nargs=nargs, const=const,
                                                        default=default, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        replacement = " Use '%s' instead." % self.new_flag if self.new_flag else ""
        _deprecation_warning("'%s' is deprecated and will be removed in a future release.%s"
                             % (option_string, replacement))
        setattr(namespace, self.dest, True)


# Deprecated spellings 0.5.23 registers by hand (`server_args.py:407-424`).
DEPRECATED = [
    (("--disable-cuda-graph",), "disable_cuda_graph", "--cuda-graph-backend-{decode,prefill}=disabled"),
    (("--enable-dp-attention",), "enable_dp_attention", "--attn-dp-size <dp-size>"),
]


def add_cli_args(parser):
    """ServerArgs.add_cli_args: every flag of the table on `parser`."""
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
            kwargs["required"] = True  # 0.5.23 arg_groups/arg_utils.py:413-416: no default -> required
        parser.add_argument(*names, **kwargs)
    for names, dest, new_flag in DEPRECATED:
        parser.add_argument(*names, dest=dest, action=DeprecatedStoreTrueAction, new_flag=new_flag)


def resolve(server_args):
    """The few resolutions the stand-in needs (0.5.23 does them in `resolve_once`, `server_args.py:244-300`)."""
    if getattr(server_args, "served_model_name", None) is None:
        server_args.served_model_name = server_args.model_path
    if getattr(server_args, "tokenizer_path", None) is None:
        server_args.tokenizer_path = server_args.model_path
    return server_args


def resolved_dict(server_args):
    """Every field with its value, the API key included: 0.5.23 redacts only the watermark fields
    (`entrypoints/engine.py:173-174`, `sampling/watermarking/core.py` WATERMARK_SECRET_FIELD_NAMES)."""
    hidden = {"watermark_key", "watermark_key_b", "watermark_config"}
    return {name: value for name, value in vars(server_args).items() if not name.startswith("_") and name not in hidden}
