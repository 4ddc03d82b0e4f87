"""The 0.5.23 flag table (pure parsing)."""
import pytest

# standin_helpers puts the stand-in's sources on sys.path.
import standin_helpers  # noqa: F401  pylint: disable=unused-import
from sglang_standin import flags

KIMI_UNIT = ["--model-path", "/root/models/Kimi-K2.6", "--tp", "8", "--trust-remote-code", "--tool-call-parser", "kimi_k2",
             "--reasoning-parser", "kimi_k2", "--attention-backend", "triton", "--mem-fraction-static", "0.90",
             "--host", "0.0.0.0", "--port", "30001", "--cuda-graph-max-bs-decode", "64", "--cuda-graph-max-bs-prefill", "16",
             "--json-model-override-args", '{"rope_scaling": null}', "--enable-nccl-nvls", "--api-key", "k",
             "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--enable-metrics"]


def test_production_command_line_parses():
    args = flags.parse_args(KIMI_UNIT)
    assert args.tp_size == 8 and args.port == 30001 and args.mem_fraction_static == 0.9
    assert args.cuda_graph_max_bs_decode == 64 and args.enable_nccl_nvls and args.trust_remote_code
    assert args.served_model_name == "/root/models/Kimi-K2.6"  # defaults to the model path, like SGLang


def test_aliases_and_multi_node():
    args = flags.parse_args(["--model", "m", "--tp-size", "16", "--nnodes", "2", "--node-rank", "1",
                             "--dist-init-addr", "10.231.1.2:5000", "--cuda-graph-max-bs", "32"])
    assert (args.model_path, args.tp_size, args.nnodes, args.node_rank) == ("m", 16, 2, 1)
    assert args.dist_init_addr == "10.231.1.2:5000" and args.cuda_graph_max_bs == 32


@pytest.mark.parametrize("argv", [["--model-path", "m", "--foo"], ["--model-path", "m", "--attention-backend", "cutlass_mla"],
                                  ["--tp", "8"], ["--model-path", "m", "--tp", "eight"]])
def test_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        flags.parse_args(argv)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith("launch_server.py: error: ")


def test_api_key_is_masked():
    assert flags.public_args(flags.parse_args(["--model-path", "m", "--api-key", "secret"]))["api_key"] == "<redacted>"
