"""The stand-in's parser is the release's: the committed table equals the real parser's, and argvs fail alike.

The real side runs in a subprocess (tests/conformance/sglang_release.py imports the release's own `sglang` package,
which cannot share a process with the stand-in's); it needs the cached or downloadable sglang==0.5.23 wheel.
"""
import json
import os
import subprocess
import sys

import pytest

# standin_helpers puts the stand-in's sources on sys.path.
from standin_helpers import STANDIN_DIR
from sglang.srt.server_args import prepare_server_args
from sglang_standin import flags

ROOT = os.path.normpath(os.path.join(STANDIN_DIR, "..", ".."))
RELEASE = os.path.join(ROOT, "tests", "conformance", "sglang_release.py")
GENERATOR = os.path.join(STANDIN_DIR, "tools", "gen_flags.py")

ARGVS = [
    ["--model-path", "m", "--tp", "8", "--trust-remote-code", "--reasoning-parser", "kimi_k2"],
    ["--model-path", "m", "--cuda-graph-max-bs", "16"],
    ["--model-path", "m", "--cuda-graph-max-bs-decode", "16", "--cuda-graph-backend-decode", "tc_piecewise"],
    ["--model-path", "m", "--mem-fraction-static", "0.9 x"],
    ["--model-path", "m", "--context-length", "128Ki", "--max-total-tokens", "1.5k"],
    ["--model-path", "m", "--context-length", "1.5Ki"],
    ["--model-path", "m", "--reasoning-parser", "nope"],
    ["--model-path", "m", "--model-path", "n"],
    ["--model-path", "m", "--disable-cuda-graph", "--enable-dp-attention"],
    ["--model-path", "m", "--monokernel-backend", "amd"],
    ["--model-path", "m", "--enable-tf32-matmul", "--no-enable-tf32-matmul"],
    ["--model-path", "m", "--preferred-sampling-params", "{bad"],
    ["--tp", "2"],
    ["--model-path", "m", "--foo"],
]


def real(*args):
    if sys.version_info[:2] != (3, 11):
        pytest.skip("the sglang 0.5.23 wheel is cp311: run with the .venv (Python 3.11)")
    return subprocess.run([sys.executable, RELEASE] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=600, check=False)


def test_committed_table_is_the_release_parser():
    done = real("flags")
    assert done.returncode == 0, done.stderr
    release = json.loads(done.stdout)
    assert release["release"] == flags.TABLE["release"]
    committed = [{key: value for key, value in flag.items() if key not in ("new_flag", "const_value", "choices_unordered")}
                 for flag in flags.FLAGS]
    unordered = [flag.get("choices_unordered", False) for flag in flags.FLAGS]
    assert committed == [{key: (sorted(value) if key == "choices" and unordered[index] else value)
                          for key, value in flag.items() if key != "help"}
                         for index, flag in enumerate(release["flags"])]
    check = subprocess.run([sys.executable, GENERATOR, "--check"], stderr=subprocess.PIPE, universal_newlines=True,
                           timeout=600, check=False)
    assert check.returncode == 0, check.stderr


@pytest.mark.parametrize("argv", ARGVS, ids=[" ".join(argv[2:4]) or argv[0] for argv in ARGVS])
def test_argv_parses_or_fails_like_the_release(argv, capfd):
    done = real("parse", *argv)
    try:
        prepare_server_args(argv)
        code = 0
    except SystemExit as exit_info:
        code = exit_info.code
    err = capfd.readouterr().err
    assert code == done.returncode
    if code:
        assert err.splitlines()[-1] == done.stderr.splitlines()[-1]
        assert err.startswith("usage: sglang serve ")


REAL_PREPARE = """
import json, os, sys, threading
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import sglang_release
args = sglang_release.server_args().prepare_server_args(sys.argv[2:])
print(json.dumps({"launch_command": args.launch_command, "api_key": args.api_key, "threads": threading.active_count()}))
"""


def test_prepare_server_args_like_the_release():
    """The release's own prepare_server_args (torch & co inert) on a model that does not exist: it returns (nothing
    is resolved or started, no thread), and launch_command keeps `--api-key KEY`, redacting only the watermark."""
    argv = ["--model-path", "/nonexistent/model", "--tp", "8", "--api-key", "sk-x", "--watermark-config", "wm"]
    if sys.version_info[:2] != (3, 11):
        pytest.skip("the sglang 0.5.23 wheel is cp311: run with the .venv (Python 3.11)")
    done = subprocess.run([sys.executable, "-c", REAL_PREPARE, RELEASE] + argv, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    release = json.loads(done.stdout.splitlines()[-1])
    assert release["threads"] == 1 and release["api_key"] == "sk-x"
    assert release["launch_command"] == \
        "--model-path /nonexistent/model --tp 8 --api-key sk-x --watermark-config <redacted>"
    assert prepare_server_args(argv).launch_command == release["launch_command"]
