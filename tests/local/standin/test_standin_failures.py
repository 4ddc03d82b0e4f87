"""Failures: injected faults, the real dependency checks, and how each start ends (SIGKILL of the whole tree)."""
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from standin_helpers import WAIT, include_dir_of

SIGQUIT_LINE = "Received sigquit from a child process. It usually means the child failed."  # engine.py:1977-1979
SIGQUIT_RUNNING = "SIGQUIT received. signum=None, frame=None. It usually means one child failed."  # tokenizer_manager.py:4073
NVFP4_ERROR = "ValueError: 'nvfp4-pack-quantized' is not a valid CompressionFormat"

CRASHES = [
    ("crash@weights:oom", ["Scheduler hit an exception: Traceback (most recent call last):",
                           "torch.OutOfMemoryError: CUDA out of memory.", SIGQUIT_LINE]),
    ("crash@kv_cache:oom", ["RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", SIGQUIT_LINE]),
    ("crash@cuda_graph:oom", ["Exception: Capture cuda graph failed: CUDA out of memory.", SIGQUIT_LINE]),
    ("crash@init:nccl", ["NCCL WARN socketStartConnect", "ncclSystemError: System call", SIGQUIT_LINE]),
    ("crash@cuda_graph:nccl", ["NCCL WARN Cuda failure", "ncclInternalError: Internal check failed.", SIGQUIT_LINE]),
    ("crash@kv_cache:scheduler_exception", ["Scheduler hit an exception:",
                                            "RuntimeError: CUDA error: an illegal memory access was encountered", SIGQUIT_LINE]),
    ("crash@weights:oom_killer", ["kill_process_tree called: parent_pid=", "Traceback (most recent call last):",
                                  "RuntimeError: Rank 0 scheduler died during initialization (exit code: -9). If exit code "
                                  "is -9 (SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` "
                                  "to check."]),
    ("crash@init:port_in_use", ["The port ", "Port is already in use. dist_init_port=",
                                "ValueError: nccl_port at ", "is not available in 30 seconds."]),
    ("crash@warmup", ["Initialization failed. warmup error: Traceback (most recent call last):"]),
    # issue 25's last families
    ("crash@init:gpu_memory_unbalanced", ["Init parallel ends.", "Load weight begin.", "Scheduler hit an exception:",
                                          "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by "
                                          "other processes. pre_model_load_memory=", SIGQUIT_LINE]),
    ("crash@cuda_graph:capture_failed", ["Scheduler hit an exception:",
                                         "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
                                         "During handling of the above exception, another exception occurred:",
                                         "Exception: Capture cuda graph failed: CUDA error: an illegal memory access",
                                         "--cuda-graph-backend-decode=disabled", SIGQUIT_LINE]),
    ("crash@init:missing_package", ["kill_process_tree called: parent_pid=", "Traceback (most recent call last):",
                                    "Exception: sglang-kernel is installed with version 0.4.8, which is less than the "
                                    "minimum required version 0.4.9."]),
    ("crash@init:trust_remote_code", ["kill_process_tree called: parent_pid=", "Traceback (most recent call last):",
                                      "ValueError: The repository ", "contains custom code which must be executed",
                                      "Please pass the argument `trust_remote_code=True` to allow custom code to be run."]),
    ("crash@warmup:oom_killer", ["Prefill batch", "Subprocess scheduler_0 (pid=",
                                 "crashed with exit code -9. Triggering SIGQUIT for cleanup..."]),
]


# How each failure ends (0.5.23): kill_process_tree(os.getpid()) SIGKILLs the tree (status=9/KILL), except an
# uncaught exception in the main process: launch_server.py's `finally` kills the children, Python exits 1.
EXIT_1 = ("crash@weights:oom_killer", "crash@init:port_in_use", "crash@init:missing_package", "crash@init:trust_remote_code")


def assert_killed_tree(server, code=-signal.SIGKILL):
    """A failed start ends like SGLang's kill_process_tree: SIGKILL for the children, then for the main process."""
    assert server.wait_exit() == code
    assert server.wait_no_descendants() == []


@pytest.mark.parametrize("fault,signature", CRASHES, ids=[crash[0] for crash in CRASHES])
def test_crash_fault(launch, standin_python, model_dir, fault, signature):
    server = launch(standin_python, model_dir, "--tp", "2", env={"SGLANG_STANDIN_FAULT": fault})
    assert_killed_tree(server, 1 if fault in EXIT_1 else -signal.SIGKILL)
    position = 0
    for text in signature:
        position = server.output.index(text, position)
    assert "The server is fired up" not in server.output
    assert any(event["event"] == "crash" for event in server.events_list())
    if fault != "crash@warmup":
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", server.port), timeout=5).close()


def test_hang_stalls_silently(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir, "--tp", "2", env={"SGLANG_STANDIN_FAULT": "hang@cuda_graph"})
    server.wait_for(r"TP1\] Capture target decode CUDA graph begin")
    server.wait_for(r"TP0\] Capture target decode CUDA graph begin")
    hang = [event for event in server.events_list() if event["event"] == "hang"]
    while not hang:  # the event is written right after the begin line
        time.sleep(0.05)
        hang = [event for event in server.events_list() if event["event"] == "hang"]
    assert hang[0]["phase"] == "cuda_graph"
    assert server.proc.poll() is None and len(server.descendants()) == 3
    assert "CUDA graph end" not in server.output and "Capturing batches" not in server.output
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), timeout=5).close()


def test_zombie_keeps_http_without_scheduler(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir, env={"SGLANG_STANDIN_FAULT": "zombie", "SGLANG_HEALTH_CHECK_TIMEOUT": "0.5"})
    server.wait_ready()
    scheduler = [pid for pid in server.descendants() if pid != server.proc.pid]
    while scheduler:  # the scheduler dies just after the warmup
        time.sleep(0.05)
        scheduler = [pid for pid in server.descendants() if pid != server.proc.pid]
    assert server.request("GET", "/v1/models")[0] == 200
    assert server.request("GET", "/health")[0] == 503
    with pytest.raises(socket.timeout):
        server.request("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1},
                       timeout=1)
    assert server.proc.poll() is None


def test_exit_after_requests(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir, "--tp", "2", env={"SGLANG_STANDIN_FAULT": "exit_after_requests=2"})
    server.wait_ready()
    ask = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    assert server.request("GET", "/health")[0] == 200  # health checks are not client requests
    assert server.request("POST", "/v1/chat/completions", ask)[0] == 200
    assert server.request("POST", "/v1/chat/completions", ask)[0] == 200
    assert_killed_tree(server)
    crash = server.output.index("Scheduler hit an exception:", server.output.index("The server is fired up"))
    assert server.output.index(SIGQUIT_RUNNING) > crash and SIGQUIT_LINE not in server.output
    assert "in event_loop_overlap" in server.output


def test_crash_times_recovers_on_restart(launch, standin_python, model_dir, tmp_path):
    env = {"SGLANG_STANDIN_FAULT": "crash@weights:oom crash_times=1", "SGLANG_STANDIN_COUNTER_FILE": str(tmp_path / "starts")}
    first = launch(standin_python, model_dir, env=env)
    assert_killed_tree(first)
    second = launch(standin_python, model_dir, env=env)
    second.wait_ready()
    assert (tmp_path / "starts").read_text().strip() == "2"


def test_fault_file_changes_between_starts(launch, standin_python, model_dir, tmp_path):
    fault_file = tmp_path / "fault"
    fault_file.write_text("crash@init:nccl\n")
    env = {"SGLANG_STANDIN_FAULT_FILE": str(fault_file)}
    assert_killed_tree(launch(standin_python, model_dir, env=env))
    fault_file.write_text("# fixed\n")
    launch(standin_python, model_dir, env=env).wait_ready()


def test_sigquit_kills_tree_when_a_scheduler_crashes_while_serving(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir, "--tp", "2")
    server.wait_ready()
    victim = [pid for pid in server.descendants() if pid != server.proc.pid][0]
    os.kill(victim, signal.SIGKILL)  # e.g. the OOM killer; 0.5.23's SubprocessWatchdog notices (utils/watchdog.py:211-222)
    assert_killed_tree(server)
    assert re.search(r"\] Subprocess scheduler_[01] \(pid=%d\) crashed with exit code -9\. Triggering SIGQUIT for "
                     r"cleanup\.\.\.\n\[[\d\- :]+\] %s\n" % (victim, re.escape(SIGQUIT_RUNNING)), server.output + "\n")
    assert "scheduler is dead" not in server.output


def test_missing_shard_fails_at_weight_loading(launch, standin_python, model_dir):
    os.remove(os.path.join(model_dir, "model-00003-of-00004.safetensors"))
    server = launch(standin_python, model_dir)
    assert_killed_tree(server)
    # 0.5.23 model_loader/weight_utils.py:799-806: checked before the first shard is opened (no progress bar yet)
    missing = ("RuntimeError: model.safetensors.index.json references 1 shard file(s) missing from %s (incomplete "
               "download?): ['model-00003-of-00004.safetensors']" % model_dir)
    assert missing in server.output
    assert server.output.index("Load weight begin") < server.output.index(missing)
    assert "Loading safetensors checkpoint shards" not in server.output
    assert "Load weight end" not in server.output


def test_no_shard_at_all_is_cannot_find_any_model_weights(launch, standin_python, model_dir):
    for name in os.listdir(model_dir):
        if name.endswith(".safetensors"):
            os.remove(os.path.join(model_dir, name))
    server = launch(standin_python, model_dir)
    assert_killed_tree(server)
    assert "RuntimeError: Cannot find any model weights with `%s`" % model_dir in server.output  # loader.py:579-582


def test_nvfp4_needs_compressed_tensors_0_10(launch, standin_python, ct_old_python, ct_new_python, kimi_dir):
    args = ("--tp", "8", "--trust-remote-code", "--reasoning-parser", "kimi_k2")
    for python in (standin_python, ct_old_python):  # absent, 0.8.1
        server = launch(python, kimi_dir, *args)
        assert_killed_tree(server)
        assert NVFP4_ERROR in server.output and SIGQUIT_LINE in server.output
        assert server.output.index("Load weight begin") < server.output.index(NVFP4_ERROR)
    server = launch(ct_new_python, kimi_dir, *args)
    server.wait_ready()
    assert NVFP4_ERROR not in server.output
    assert "TP7] KV Cache is allocated. dtype: torch.bfloat16, #tokens: " in server.output  # memory_pool.py:2094
    assert ", KV size: " in server.output  # MLA form
    assert re.search(r"Load weight end\. elapsed=[\d.]+ s, type=KimiK25ForConditionalGeneration, quant=compressed-tensors, "
                     r"avail mem=", server.output)  # model_runner.py:1372-1380, model_config.py:1899-1919
    assert len(server.descendants()) == 9


def test_python_h_missing_fails_at_cuda_graph(launch, no_headers_python, model_dir):
    include = include_dir_of(no_headers_python)
    server = launch(no_headers_python, model_dir, "--tp", "2")
    assert_killed_tree(server)
    output = server.output
    assert "cuda_utils.c:6:10: fatal error: Python.h: No such file or directory" in output
    assert "compilation terminated." in output
    assert "subprocess.CalledProcessError: Command '" in output and "-I%s'" % include in output
    assert output.index("Capture target decode CUDA graph begin") < output.index("fatal error: Python.h")
    assert output.index("fatal error: Python.h") < output.index(SIGQUIT_LINE)


def test_pcie_warnings_are_not_fatal(launch, standin_python, model_dir):
    server = launch(standin_python, model_dir, "--tp", "2", env={"NCCL_P2P_DISABLE": "1"})
    server.wait_ready()
    assert "Setup Custom allreduce failed with CUDART error: peer access is not supported" in server.output
    quiet = launch(standin_python, model_dir, "--tp", "2", "--disable-custom-all-reduce", env={"NCCL_P2P_DISABLE": "1"})
    quiet.wait_ready()
    assert "Custom allreduce" not in quiet.output


def test_header_check_uses_the_running_interpreter(standin_python):
    """The plain venv's interpreter has Python.h, so the check passes there (guards against a check that always fails)."""
    include = include_dir_of(standin_python)
    assert os.path.exists(os.path.join(include, "Python.h"))
    code = "from sglang_standin import model_dir; print(model_dir.python_headers_missing())"
    assert subprocess.run([standin_python, "-c", code], check=False, stdout=subprocess.PIPE, universal_newlines=True,
                          timeout=WAIT).stdout.strip() == "False"


def test_http_port_busy_fails_after_the_load(launch, standin_python, model_dir):
    busy = socket.socket()
    try:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        server = launch(standin_python, model_dir, port=busy.getsockname()[1])
        assert_killed_tree(server)
    finally:
        busy.close()
    assert "Capture target decode CUDA graph end" in server.output  # only after the full model load
    # uvicorn server.py:189-192, then the lifespan shutdown joins the warmup thread: 120 polls of /model_info
    # (http_server.py:2370-2386), its error, kill_process_tree: status=9/KILL.
    position = 0
    for text in ("ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', %d): address already "
                 "in use" % server.port, "INFO:     Waiting for application shutdown.",
                 "] Initialization failed. warmup error: Traceback (most recent call last):",
                 "kill_process_tree called: parent_pid=%d, include_parent=True" % server.proc.pid):
        position = server.output.index(text, position)
    assert "Application shutdown complete." not in server.output


def test_sigterm_while_the_busy_port_warmup_polls_is_swallowed(launch, standin_python, model_dir):
    """uvicorn's own handler is in place from `Started server process` until the first request (uvicorn/server.py
    capture_signals); with the bind failed it only sets should_exit: the warmup's polls go on, then the SIGKILL."""
    busy = socket.socket()
    try:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        server = launch(standin_python, model_dir, port=busy.getsockname()[1],
                        env={"SGLANG_STANDIN_PACE": "0.05"})  # 120 polls of >= 0.3 s: time to send the signal
        server.wait_for(r"INFO:     Waiting for application shutdown\.")
        server.signal(signal.SIGTERM)
        assert_killed_tree(server)
    finally:
        busy.close()
    assert "Initialization failed. warmup error: Traceback" in server.output
    assert "SIGTERM received" not in server.output


def test_http_port_held_by_another_sglang_warms_up_against_it_and_exits_3(launch, standin_python, model_dir):
    """The warmup polls --host:--port whoever holds it (0.5.23 http_server.py:2363-2376): another SGLang answers, so
    the unit that could not bind logs the ready line, then uvicorn's sys.exit(3) (uvicorn/config.py:81) ends it."""
    old = launch(standin_python, model_dir)
    old.wait_ready()
    clash = launch(standin_python, model_dir, port=old.port)
    assert clash.wait_exit() == 3
    position = 0
    for text in ("ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', %d): address already "
                 "in use" % old.port, "INFO:     Waiting for application shutdown.",
                 "] The server is fired up and ready to roll!", "INFO:     Application shutdown complete.",
                 "kill_process_tree called: parent_pid=%d, include_parent=False" % clash.proc.pid):
        position = clash.output.index(text, position)
    assert "Initialization failed" not in clash.output
    assert clash.wait_no_descendants() == []
    assert old.request("GET", "/health")[0] == 200 and old.output.count('"POST /generate HTTP/1.1" 200') == 2
