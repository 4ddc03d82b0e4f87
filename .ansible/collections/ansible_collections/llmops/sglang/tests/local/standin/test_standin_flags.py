"""The 0.5.23 parser entry point, `sglang.srt.server_args` (pure parsing, in-process)."""
import argparse

import pytest

# standin_helpers puts the stand-in's sources on sys.path.
import standin_helpers  # noqa: F401  pylint: disable=unused-import
from sglang.srt.server_args import ServerArgs, prepare_server_args
from sglang_standin import flags

KIMI_UNIT = ["--model-path", "/root/models/Kimi-K2.6", "--tp", "8", "--trust-remote-code", "--tool-call-parser", "kimi_k2",
             "--reasoning-parser", "kimi_k2", "--attention-backend", "triton", "--mem-fraction-static", "0.90",
             "--host", "0.0.0.0", "--port", "30001", "--cuda-graph-max-bs-decode", "64", "--cuda-graph-max-bs-prefill", "16",
             "--json-model-override-args", '{"rope_scaling": null}', "--enable-nccl-nvls", "--api-key", "k",
             "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--enable-metrics"]


def test_production_command_line_parses():
    args = flags.resolve(prepare_server_args(KIMI_UNIT))
    assert args.tp_size == 8 and args.port == 30001 and args.mem_fraction_static == 0.9
    assert args.cuda_graph_max_bs_decode == 64 and args.enable_nccl_nvls and args.trust_remote_code
    assert args.served_model_name == "/root/models/Kimi-K2.6"  # resolution defaults it to the model path


def test_add_cli_args_and_from_cli_args_like_the_release():
    """The second documented call (0.5.23 server_args.py:350-451): the caller's own parser."""
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    args = ServerArgs.from_cli_args(parser.parse_args(["--model", "m", "--nnodes", "2", "--node-rank", "1",
                                                       "--dist-init-addr", "10.231.1.2:5000"]))
    assert (args.model_path, args.nnodes, args.node_rank, args.dist_init_addr) == ("m", 2, 1, "10.231.1.2:5000")
    assert args.launch_command is None  # only prepare_server_args records it


@pytest.mark.parametrize("argv,message", [
    (["--model-path", "m", "--foo"], "unrecognized arguments: --foo"),
    (["--model-path", "m", "--attention-backend", "cutlass_mla"], "argument --attention-backend: invalid choice: 'cutlass_mla'"),
    (["--tp", "8"], "the following arguments are required: --model-path"),
    (["--model-path", "m", "--tp", "eight"], "invalid int value: 'eight'"),
    (["--model-path", "m", "--cuda-graph-max-bs", "16"],
     "ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"),
])
def test_usage_errors_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        prepare_server_args(argv)
    assert exit_info.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("sglang serve: error: ") and message in last


def test_launch_command_and_resolved_dict_keep_the_api_key():
    """0.5.23 redacts only watermark secrets (server_args.py:307-333, sampling/watermarking/core.py:110-134)."""
    args = flags.resolve(prepare_server_args(["--model-path", "m", "--api-key", "secret", "--watermark-config", "wm"]))
    assert args.launch_command == "--model-path m --api-key secret --watermark-config <redacted>"
    resolved = flags.resolved_dict(args)
    assert resolved["api_key"] == "secret" and "watermark_config" not in resolved
    assert list(resolved)[:3] == ["model_path", "tokenizer_path", "tokenizer_mode"]  # ServerArgs field order
    assert "api_key='secret'" in repr(args) and "wm" not in repr(args)


def test_watermark_command_line_redaction():
    from sglang.srt.server_args import redact_watermark_command_line
    assert redact_watermark_command_line(["--api-key", "k", "--watermark-config", "s", "--x=s"], "s") == \
        "--api-key k --watermark-config <redacted> --x=<redacted>"
    assert redact_watermark_command_line(["--watermark-config=abc"]) == "--watermark-config=<redacted>"


def test_deprecated_disable_cuda_graph_warns(capfd):
    args = prepare_server_args(["--model-path", "m", "--disable-cuda-graph"])
    assert args.disable_cuda_graph is True
    assert capfd.readouterr().err == ("\033[1;33m'--disable-cuda-graph' is deprecated and will be removed in a future "
                                      "release. Use '--cuda-graph-backend-{decode,prefill}=disabled' instead.\033[0m\n")
