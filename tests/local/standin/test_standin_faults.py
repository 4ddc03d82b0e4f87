"""The fault grammar and the start counter (pure logic); the last families' causes, run."""
import os
import re
import signal
import time

import pytest

# standin_helpers puts the stand-in's sources on sys.path.
import standin_helpers  # noqa: F401  pylint: disable=unused-import
from sglang_standin import faults


def test_parse_every_item():
    parsed = faults.parse("crash@weights:oom, hang@cuda_graph; slow_warmup=2.5 zombie\nexit_after_requests=3 crash_times=2")
    assert parsed.crash == {"weights": "oom"}
    assert parsed.hang == {"cuda_graph"}
    assert parsed.slow_warmup == 2.5
    assert parsed.zombie is True
    assert parsed.exit_after_requests == 3
    assert parsed.crash_times == 2


def test_default_causes():
    assert faults.parse("crash@kv_cache").crash == {"kv_cache": "scheduler_exception"}
    assert faults.parse("crash@warmup").crash == {"warmup": "warmup_error"}


def test_the_failure_families_causes():
    """The causes of issue 25's families, where 0.5.23 meets them (tests/integration/test_failure_families.py)."""
    for spec, crash in (("crash@warmup:detokenizer_exception", {"warmup": "detokenizer_exception"}),
                        ("crash@warmup:tokenizer_exception", {"warmup": "tokenizer_exception"}),
                        ("crash@warmup:watchdog_timeout", {"warmup": "watchdog_timeout"}),
                        ("crash@weights:compressed_tensors_too_old", {"weights": "compressed_tensors_too_old"}),
                        ("crash@init:missing_package", {"init": "missing_package"}),
                        ("crash@init:gpu_memory_unbalanced", {"init": "gpu_memory_unbalanced"}),
                        ("crash@cuda_graph:capture_failed", {"cuda_graph": "capture_failed"}),
                        ("crash@init:trust_remote_code", {"init": "trust_remote_code"}),
                        ("crash@warmup:oom_killer", {"warmup": "oom_killer"}),
                        ("crash@init:no_gpu", {"init": "no_gpu"}),
                        ("crash@weights:other_rank", {"weights": "other_rank"})):
        assert faults.parse(spec).crash == crash


@pytest.mark.parametrize("spec", ["crash@loading:oom", "crash@weights:port_in_use", "hang@init:oom", "explode",
                                  "slow_warmup=soon", "retries=3", "crash@init:watchdog_timeout",
                                  "crash@kv_cache:detokenizer_exception", "crash@warmup:compressed_tensors_too_old",
                                  "crash@weights:gpu_memory_unbalanced", "crash@warmup:capture_failed",
                                  "crash@cuda_graph:missing_package", "crash@weights:no_gpu", "crash@init:other_rank",
                                  "crash@kv_cache:other_rank"])
def test_rejects_bad_specs(spec):
    with pytest.raises(faults.FaultError):
        faults.parse(spec)


def test_file_is_read_at_each_start_and_comments_ignored(tmp_path):
    fault_file = tmp_path / "faults"
    env = {"SGLANG_STANDIN_FAULT_FILE": str(fault_file)}
    assert faults.load(env).crash == {}  # a missing file means no faults
    fault_file.write_text("# first runs crash\ncrash@init:nccl\n")
    assert faults.load(env).crash == {"init": "nccl"}
    fault_file.write_text("")
    assert faults.load(env).crash == {}


def test_crash_times_counts_starts(tmp_path):
    env = {"SGLANG_STANDIN_FAULT": "crash@weights:oom crash_times=2 zombie",
           "SGLANG_STANDIN_COUNTER_FILE": str(tmp_path / "count")}
    first, second, third = faults.load(env), faults.load(env), faults.load(env)
    assert (first.start_number, second.start_number, third.start_number) == (1, 2, 3)
    assert first.crash == second.crash == {"weights": "oom"} and second.zombie
    assert third.crash == {} and not third.zombie


def test_crash_times_needs_a_counter_file():
    with pytest.raises(faults.FaultError):
        faults.load({"SGLANG_STANDIN_FAULT": "crash@init crash_times=1"})


def test_round_trip_to_schedulers():
    parsed = faults.parse("crash@cuda_graph:nccl hang@warmup slow_warmup=1")
    again = faults.Faults.from_dict(parsed.as_dict())
    assert again.crash == parsed.crash and again.hang == parsed.hang and again.slow_warmup == 1


# ---- the canary analysis' degradations (issue 26): parsed, bounded, kept by crash_times, sent to the schedulers ----

def test_parse_the_degradations():
    parsed = faults.parse("decode_slowdown=2.5, answer_shift=7; error_rate=0.25\ncollapse_above=4")
    assert (parsed.decode_slowdown, parsed.answer_shift, parsed.error_rate, parsed.collapse_above) == (2.5, 7, 0.25, 4)
    assert isinstance(parsed.answer_shift, int) and isinstance(parsed.collapse_above, int)
    assert faults.parse("decode_slowdown=3").decode_slowdown == 3.0 and faults.parse("error_rate=1").error_rate == 1.0
    none = faults.parse("")
    assert (none.decode_slowdown, none.answer_shift, none.error_rate, none.collapse_above) == (None, None, None, None)


@pytest.mark.parametrize("spec", ["decode_slowdown=0", "decode_slowdown=-2", "decode_slowdown=fast", "decode_slowdown=",
                                  "decode_slowdown=nan", "decode_slowdown=inf", "answer_shift=0", "answer_shift=-1",
                                  "answer_shift=1.5", "answer_shift=x", "error_rate=0", "error_rate=-0.25",
                                  "error_rate=1.5", "error_rate=half", "error_rate=nan", "collapse_above=0",
                                  "collapse_above=-2", "collapse_above=2.5", "collapse_above=many"])
def test_rejects_bad_degradation_values(spec):
    with pytest.raises(faults.FaultError) as raised:
        faults.parse(spec)
    assert spec in str(raised.value)


def test_crash_times_keeps_the_degradations(tmp_path):
    """They are not failure faults: after crash_times starts the crash goes, the degradations stay."""
    env = {"SGLANG_STANDIN_FAULT": "crash@weights:oom crash_times=1 decode_slowdown=2 answer_shift=3 error_rate=0.5 "
                                   "collapse_above=2", "SGLANG_STANDIN_COUNTER_FILE": str(tmp_path / "count")}
    first, second = faults.load(env), faults.load(env)
    assert first.crash == {"weights": "oom"} and second.crash == {}
    for loaded in (first, second):
        assert (loaded.decode_slowdown, loaded.answer_shift, loaded.error_rate, loaded.collapse_above) == (2.0, 3, 0.5, 2)


def test_the_degradations_round_trip_to_schedulers():
    parsed = faults.parse("decode_slowdown=1.5 answer_shift=9 error_rate=0.1 collapse_above=3")
    again = faults.Faults.from_dict(parsed.as_dict())
    assert (again.decode_slowdown, again.answer_shift, again.error_rate, again.collapse_above) == (1.5, 9, 0.1, 3)
    assert faults.Faults.from_dict(faults.parse("").as_dict()).answer_shift is None


# ---- issue 25's last families, run: what the main process and the schedulers print, and how the start ends --------

NO_ACCELERATOR = "RuntimeError: No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) or platform plugin is available."


@pytest.mark.parametrize("serve", [False, True], ids=["launch_server", "sglang-serve"])
def test_no_gpu_is_the_main_process_traceback_before_any_child(launch, standin_python, model_dir, serve):
    """0.5.23: run_server resolves the arguments first (launch_server.py:29), get_device() finds no accelerator
    (arg_groups/serving_hook.py:652, utils/common.py:1121-1126, chained on the base platform's NotImplementedError,
    platforms/device_mixin.py:189); the entry's `finally` logs its kill_process_tree, Python prints the traceback
    (no log prefix) and exits 1. No server_args line (engine.py:1185 comes later), no scheduler."""
    entry = (os.path.join(os.path.dirname(standin_python), "sglang"), "serve") if serve else ("-m", "sglang.launch_server")
    server = launch(standin_python, model_dir, "--tp", "2", env={"SGLANG_STANDIN_FAULT": "crash@init:no_gpu"}, entry=entry)
    assert server.wait_exit() == 1
    lines = server.lines
    start = lines.index("Traceback (most recent call last):")
    assert re.match(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] kill_process_tree called: parent_pid=\d+, "
                    r"include_parent=False", lines[start - 1]), lines
    expected = ['platforms/device_mixin.py", line 189, in get_device', "NotImplementedError",
                "During handling of the above exception, another exception occurred:",
                'sglang/cli/serve.py", line 106, in _run_llm' if serve else 'sglang/launch_server.py", line 84, in <module>',
                'sglang/launch_server.py", line 29, in run_server', 'arg_groups/serving_hook.py", line 652, in '
                'handle_missing_default_values', 'utils/common.py", line 1124, in get_device']
    position = start
    for text in expected:
        position = next(i for i in range(position, len(lines)) if text in lines[i])
    assert lines[-1] == NO_ACCELERATOR
    assert not any("server_args=" in line or "Init parallel" in line for line in lines)
    assert [event.get("cause") for event in server.events_list() if event["event"] == "crash"] == ["no_gpu"]


def test_other_rank_waits_the_paced_barrier_then_every_local_rank_gives_up(launch, standin_python, model_dir):
    """Node 0 of a TP4 start on two nodes whose peer node never loads: each local rank logs `Load weight end`, waits
    UNBALANCED_MODEL_LOADING_TIMEOUT_S (480 s) x pace at the post-load barrier, then logs the release's ValueError
    (load_model_utils.py:393-395, `from None`: no chained traceback) and SIGQUITs the main process: the launch phase's
    SIGQUIT line, kill_process_tree, 9/KILL."""
    server = launch(standin_python, model_dir, "--tp", "4", "--nnodes", "2", "--node-rank", "0",
                    env={"SGLANG_STANDIN_FAULT": "crash@weights:other_rank", "SGLANG_STANDIN_PACE": "0.01"})
    server.wait_for(r"TP[01]\] Load weight end\.")
    loaded = time.monotonic()
    server.wait_for(r"^ValueError: TP rank [01] could finish")
    assert time.monotonic() - loaded > 480 * 0.01 * 0.9  # the paced wait (a lower bound only: the host may be slow)
    assert server.wait_exit() == -signal.SIGKILL
    output = server.output
    # the ranks give up together; the first one's SIGQUIT may end the tree before another has logged (as in 0.5.23)
    ranks = [int(rank) for rank in re.findall(r"^ValueError: TP rank (\d) could finish", output, re.M)]
    assert ranks and set(ranks) <= set([0, 1]), output
    for rank in ranks:
        assert re.search(r"TP%d\] Scheduler hit an exception: Traceback \(most recent call last\):" % rank, output)
        assert ("ValueError: TP rank %d could finish the model loading, but there are other ranks that didn't finish "
                "loading. It is likely due to unexpected failures (e.g., OOM) or a slow node." % rank) in output.splitlines()
    assert "During handling of the above exception" not in output
    assert output.index("Received sigquit from a child process. It usually means the child failed.") > \
        output.index("ValueError: TP rank")
    assert "other_rank" in [event.get("cause") for event in server.events_list() if event["event"] == "crash"]


def test_other_rank_needs_a_multi_node_start(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir, "--tp", "2", env={"SGLANG_STANDIN_FAULT": "crash@weights:other_rank"})
    assert server.wait_exit() == 2
    assert "needs --nnodes 2 or more" in server.output
