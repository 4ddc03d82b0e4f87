"""Every failure text the stand-in prints, in one table (see sglang.md "Fatal startup failures").

Tracebacks name the running venv's real site-packages and stdlib paths, so they look like the ones
SGLang's processes print from the same venv. Line numbers inside SGLang/torch frames are illustrative.
"""
import os
import re
import socket
import sysconfig
import tempfile

SITE = sysconfig.get_paths()["purelib"]
STDLIB = sysconfig.get_paths()["stdlib"]

REPO_ID = re.compile(r"^[\w.-]+(/[\w.-]+)?$")
SIGQUIT_LINE = "Received sigquit from a child process. It usually means the child failed."
# 0.5.23 managers/tokenizer_manager.py:4072-4075 (after the first request) and utils/watchdog.py:214-221.
SIGQUIT_RUNNING = "SIGQUIT received. signum=None, frame=None. It usually means one child failed."
SUBPROCESS_CRASHED = "Subprocess %(name)s (pid=%(pid)d) crashed with exit code %(code)s. Triggering SIGQUIT for cleanup..."
# 0.5.23 model_executor/runner_backend_utils/__init__.py:14-20 CUDA_GRAPH_CAPTURE_FAILED_MSG
CUDA_GRAPH_HELP = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
    "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled. "
    "(Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n")
CUSTOM_ALLREDUCE_P2P = ("Setup Custom allreduce failed with CUDART error: peer access is not supported between these two "
                        "devices. To silence this warning, specify --disable-custom-all-reduce explicitly.")
CUSTOM_ALLREDUCE_PCIE = ("Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs. "
                         "To silence this warning, specify --disable-custom-all-reduce explicitly.")
PACKAGE_WALK = "Unexpected error during package walk: cutlass.cute.experimental"


def _site(rel):
    return os.path.join(SITE, rel)


def frame(path, line, func, code):
    return '  File "%s", line %d, in %s\n    %s' % (path, line, func, code)


def sg(rel, line, func, code):
    """A frame inside the installed sglang package."""
    return frame(_site("sglang/srt/" + rel), line, func, code)


def traceback_text(frames, exception):
    return "Traceback (most recent call last):\n" + "\n".join(frames) + "\n" + exception


SCHEDULER_ROOT = [
    sg("managers/scheduler.py", 3166, "run_scheduler_process", "scheduler = Scheduler("),
    sg("managers/scheduler.py", 364, "__init__", "self.init_model_worker()"),
    sg("managers/scheduler.py", 549, "init_model_worker", "self.tp_worker = TpModelWorker("),
    sg("managers/tp_worker.py", 248, "__init__", "self._init_model_runner()"),
    sg("managers/tp_worker.py", 331, "_init_model_runner", "self._model_runner = ModelRunner("),
    sg("model_executor/model_runner.py", 402, "__init__", "self.initialize(min_per_gpu_memory)"),
]
PHASE_FRAMES = {
    "init": [sg("model_executor/model_runner.py", 447, "initialize", "min_per_gpu_memory = self.init_torch_distributed()"),
             sg("model_executor/model_runner.py", 873, "init_torch_distributed", "initialize_model_parallel("),
             sg("distributed/parallel_state.py", 1655, "initialize_model_parallel", "_TP = init_model_parallel_group("),
             sg("distributed/parallel_state.py", 1342, "init_model_parallel_group", "return GroupCoordinator("),
             sg("distributed/parallel_state.py", 301, "__init__", "device_group = torch.distributed.new_group(")],
    "weights": [sg("model_executor/model_runner.py", 486, "initialize", "self.load_model()"),
                sg("model_executor/model_runner.py", 1034, "load_model", "self.model = self.loader.load_model("),
                sg("model_loader/loader.py", 672, "load_model", "model = _initialize_model("),
                sg("model_loader/loader.py", 263, "_initialize_model", "quant_config = _get_quantization_config("),
                sg("model_loader/loader.py", 207, "_get_quantization_config", "quant_config = get_quant_config("),
                sg("model_loader/weight_utils.py", 190, "get_quant_config", "return quant_cls.from_config(hf_quant_config)")],
    "weights_files": [sg("model_executor/model_runner.py", 486, "initialize", "self.load_model()"),
                      sg("model_executor/model_runner.py", 1034, "load_model", "self.model = self.loader.load_model("),
                      sg("model_loader/loader.py", 696, "load_model", "self.load_weights_and_postprocess("),
                      sg("model_loader/loader.py", 704, "load_weights_and_postprocess", "model.load_weights(weights)"),
                      sg("model_loader/weight_utils.py", 681, "safetensors_weights_iterator",
                         'with safe_open(st_file, framework="pt") as f:')],
    "kv_cache": [sg("model_executor/model_runner.py", 571, "initialize", "self.init_memory_pool("),
                 sg("model_executor/model_runner.py", 1893, "init_memory_pool", "raise RuntimeError(")],
    "cuda_graph": [sg("model_executor/model_runner.py", 598, "initialize", "self.init_device_graphs()"),
                   sg("model_executor/model_runner.py", 2279, "init_device_graphs", "self.graph_runner = graph_runners[self.device](self)"),
                   sg("model_executor/cuda_graph_runner.py", 394, "__init__", "self.capture()"),
                   sg("model_executor/cuda_graph_runner.py", 531, "capture", ") = self.capture_one_batch_size(bs, forward)"),
                   sg("model_executor/cuda_graph_runner.py", 703, "capture_one_batch_size", "run_once()")],
    "serving": [sg("managers/scheduler.py", 3192, "run_scheduler_process", "scheduler.event_loop_overlap()"),
                sg("managers/scheduler.py", 1047, "event_loop_overlap", "batch_result = self.run_batch(batch)"),
                sg("managers/scheduler.py", 2214, "run_batch", "batch_result = self.model_worker.forward_batch_generation("),
                sg("managers/tp_worker.py", 441, "forward_batch_generation", "logits_output, can_run_cuda_graph = self.model_runner.forward(")],
}

ILLEGAL_ACCESS = ("RuntimeError: CUDA error: an illegal memory access was encountered\n"
                  "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
                  "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
                  "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")
TORCH_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU %(gpu)d has a total capacity "
             "of 139.81 GiB of which 1.23 GiB is free. Including non-PyTorch memory, this process has 138.57 GiB memory "
             "in use. Of the allocated memory 136.90 GiB is allocated by PyTorch, and 112.45 MiB is reserved by PyTorch "
             "but unallocated. If reserved but unallocated memory is large try setting "
             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
             "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
NCCL_SYSTEM = ("torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3353, "
               "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.5\n"
               "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. \n"
               "Last error:\nsocketStartConnect: Connect to 127.0.0.1<43615> failed : Software caused connection abort")
NCCL_INTERNAL = ("torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, "
                 "internal error - please report this issue to the NCCL developers, NCCL version 2.27.5\n"
                 "ncclInternalError: Internal check failed.\nLast error:\nNVLS multicast support is not available on dev %(gpu)d")
# What the surviving node of a multi-node server prints when another node's process dies: its next collective
# fails on the broken connection.
NCCL_REMOTE = ("torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3353, "
               "remote process exited or there was a network error, NCCL version 2.27.5\n"
               "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.\n"
               "Last error:\nnet.cc:755 NCCL WARN NET/Socket : peer %(peer)s message truncated : receiving 1 bytes instead of 0.")


def nccl_warn_lines(rank, phase):
    host = socket.gethostname()
    pid = os.getpid()
    if phase == "init":
        return ["%s:%d:%d [%d] misc/socket.cc:568 NCCL WARN socketStartConnect: Connect to 127.0.0.1<43615> failed : "
                "Software caused connection abort" % (host, pid, pid + 17, rank),
                "%s:%d:%d [%d] NCCL INFO bootstrap.cc:104 -> 6" % (host, pid, pid + 17, rank)]
    return ["%s:%d:%d [%d] transport/nvls.cc:158 NCCL WARN Cuda failure 801 'operation not supported'" % (host, pid, pid + 9, rank)]


def scheduler_crash(phase, cause, gpu):
    """(raw lines printed before, the `Scheduler hit an exception:` message) of a crash in a scheduler process."""
    before = []
    if cause == "oom":
        if phase == "kv_cache":
            exc = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
        elif phase == "cuda_graph":
            exc = "Exception: Capture cuda graph failed: " + (TORCH_OOM % {"gpu": gpu}).split(": ", 1)[1] + "\n" + CUDA_GRAPH_HELP
        else:
            exc = TORCH_OOM % {"gpu": gpu}
    elif cause == "nccl":
        before = nccl_warn_lines(gpu, phase)
        exc = NCCL_SYSTEM if phase == "init" else NCCL_INTERNAL % {"gpu": gpu}
    else:
        exc = ILLEGAL_ACCESS.rstrip("\n")
    if phase == "serving":
        frames = PHASE_FRAMES["serving"]
    else:
        frames = SCHEDULER_ROOT + PHASE_FRAMES["weights_files" if phase == "weights" else phase]
    return before, "Scheduler hit an exception: " + traceback_text(frames, exc)


def compressed_tensors_format(fmt):
    """compressed-tensors older than the checkpoint's format: the enum lookup fails while reading the quant config."""
    enum_py = os.path.join(STDLIB, "enum.py")
    frames = SCHEDULER_ROOT + PHASE_FRAMES["weights"] + [
        sg("layers/quantization/compressed_tensors/compressed_tensors.py", 196, "from_config",
           "target_scheme_map = cls._quantization_scheme_map_from_config(config=config)"),
        sg("layers/quantization/compressed_tensors/compressed_tensors.py", 277, "_quantization_scheme_map_from_config",
           "if is_activation_quantization_format(quant_format):"),
        frame(_site("compressed_tensors/config/base.py"), 94, "is_activation_quantization_format",
              "return CompressionFormat(format) in _ACTIVATION_QUANTIZATION_FORMATS"),
        frame(enum_py, 757, "__call__", "return cls.__new__(cls, value)"),
        frame(enum_py, 1171, "__new__", "raise ve_exc"),
    ]
    return "Scheduler hit an exception: " + traceback_text(frames, "ValueError: '%s' is not a valid CompressionFormat" % fmt)


# DefaultModelLoader.load_model down to _prepare_weights (0.5.23 model_loader/loader.py:1020, :1063, models/kimi_k25.py:895,
# :874, loader.py:766, :616, :568): the index is checked before the first shard is opened.
PREPARE_FRAMES = [
    sg("model_executor/model_runner.py", 486, "initialize", "self.load_model()"),
    sg("model_executor/model_runner.py", 1034, "load_model", "self.model = self.loader.load_model("),
    sg("model_loader/loader.py", 1020, "load_model", "self.load_weights_and_postprocess("),
    sg("model_loader/loader.py", 1063, "load_weights_and_postprocess", "model.load_weights(weights)"),
    sg("models/kimi_k25.py", 895, "load_weights", "self.language_model.load_weights(stream_language_weights())"),
    sg("models/kimi_k25.py", 874, "stream_language_weights", "for name, loaded_weight in weights:"),
    sg("model_loader/loader.py", 766, "_get_all_weights", "yield from self._get_weights_iterator(primary_weights)"),
    sg("model_loader/loader.py", 616, "_get_weights_iterator",
       "hf_folder, hf_weights_files, use_safetensors = self._prepare_weights("),
    sg("model_loader/loader.py", 568, "_prepare_weights", "hf_weights_files = filter_duplicate_safetensors_files("),
    sg("model_loader/weight_utils.py", 802, "filter_duplicate_safetensors_files", "raise RuntimeError("),
]


def missing_shards(folder, names, index_file="model.safetensors.index.json"):
    """0.5.23 model_loader/weight_utils.py:799-806: shards the index names that are not on disk, raised on every rank
    before the first shard is read (index_file: transformers' SAFE_WEIGHTS_INDEX_NAME, loader.py:497)."""
    exc = ("RuntimeError: %s references %d shard file(s) missing from %s (incomplete download?): %r"
           % (index_file, len(names), folder, sorted(names)))
    return "Scheduler hit an exception: " + traceback_text(SCHEDULER_ROOT + PREPARE_FRAMES, exc)


def no_weights(model_path):
    """0.5.23 model_loader/loader.py:547-582: no *.safetensors (nor *.bin, *.pt) in the folder at all."""
    frames = SCHEDULER_ROOT + PREPARE_FRAMES[:-2] + [sg("model_loader/loader.py", 580, "_prepare_weights", "raise RuntimeError(")]
    return "Scheduler hit an exception: " + traceback_text(
        frames, "RuntimeError: Cannot find any model weights with `%s`" % model_path)


def corrupt_shard(reason):
    frames = SCHEDULER_ROOT + PHASE_FRAMES["weights_files"]
    return "Scheduler hit an exception: " + traceback_text(
        frames, "safetensors_rust.SafetensorError: Error while deserializing header: %s" % reason)


def triton_python_h(include_dir):
    """Triton compiling its cuda_utils.c driver module without Python.h: gcc's stderr, then the traceback."""
    tmp = os.path.join(tempfile.gettempdir(), "tmp" + os.urandom(4).hex())
    src = os.path.join(tmp, "cuda_utils.c")
    so = os.path.join(tmp, "cuda_utils.cpython-%s.so" % sysconfig.get_config_var("SOABI"))
    nvidia = _site("triton/backends/nvidia")
    gcc = ["%s:6:10: fatal error: Python.h: No such file or directory" % src,
           "    6 | #include <Python.h>",
           "      |          ^~~~~~~~~~",
           "compilation terminated."]
    cmd = ["/usr/bin/gcc", src, "-O3", "-shared", "-fPIC", "-Wno-psabi", "-o", so, "-lcuda",
           "-L" + os.path.join(nvidia, "lib"), "-L/lib/x86_64-linux-gnu", "-I" + os.path.join(nvidia, "include"),
           "-I" + tmp, "-I" + include_dir]
    subprocess_py = os.path.join(STDLIB, "subprocess.py")
    frames = SCHEDULER_ROOT + PHASE_FRAMES["cuda_graph"] + [
        frame(_site("triton/runtime/jit.py"), 390, "<lambda>", "return lambda *args, **kwargs: self.run(grid=grid, warmup=False, *args, **kwargs)"),
        frame(_site("triton/runtime/jit.py"), 594, "run", "device = driver.active.get_current_device()"),
        frame(_site("triton/runtime/driver.py"), 23, "__getattr__", "self._initialize_obj()"),
        frame(_site("triton/runtime/driver.py"), 20, "_initialize_obj", "self._obj = self._init_fn()"),
        frame(_site("triton/runtime/driver.py"), 9, "_create_driver", "return actives[0]()"),
        frame(os.path.join(nvidia, "driver.py"), 535, "__init__", "self.utils = CudaUtils()  # TODO: make static"),
        frame(os.path.join(nvidia, "driver.py"), 89, "__init__", "mod = compile_module_from_src("),
        frame(_site("triton/runtime/build.py"), 88, "compile_module_from_src",
              "so = _build(name, src_path, tmpdir, library_dirs or [], include_dirs or [], libraries or [], ccflags or [])"),
        frame(_site("triton/runtime/build.py"), 51, "_build", "subprocess.check_call(cc_cmd, stdout=subprocess.DEVNULL)"),
        frame(subprocess_py, 413, "check_call", "raise CalledProcessError(retcode, cmd)"),
    ]
    exc = "subprocess.CalledProcessError: Command '%r' returned non-zero exit status 1." % (cmd,)
    return gcc, "Scheduler hit an exception: " + traceback_text(frames, exc)


def main_traceback(frames, exception):
    """An uncaught exception in the main process (what Python prints on stderr)."""
    return traceback_text(frames, exception)


# The main process' frames down to Engine._launch_subprocesses (0.5.23 launch_server.py:84, :67,
# entrypoints/http_server.py:3156), for `python -m sglang.launch_server` (runpy's frames first).
LAUNCH_FRAMES = [
    '  File "<frozen runpy>", line 198, in _run_module_as_main',
    '  File "<frozen runpy>", line 88, in _run_code',
    frame(_site("sglang/launch_server.py"), 84, "<module>", "run_server(server_args)"),
    frame(_site("sglang/launch_server.py"), 67, "run_server", "launch_server(server_args)"),
    sg("entrypoints/http_server.py", 3156, "launch_server", ") = Engine._launch_subprocesses("),
]


def scheduler_died(index, code, node_rank=0):
    """0.5.23 entrypoints/engine.py:2002-2010 + :2036-2040: an uncaught RuntimeError in the main process (exit 1)."""
    frames = LAUNCH_FRAMES + [
        sg("entrypoints/engine.py", 1236 if node_rank else 1350, "_launch_subprocesses",
           "scheduler_init_result.wait_for_ready()"),
        sg("entrypoints/engine.py", 995, "wait_for_ready",
           "infos = _wait_for_scheduler_ready(scheduler_pipe_readers, scheduler_procs)"),
        sg("entrypoints/engine.py", 2040, "_wait_for_scheduler_ready", "raise _scheduler_died_error(j, scheduler_procs[j])"),
    ]
    return main_traceback(frames, "RuntimeError: Rank %d scheduler died during initialization (exit code: %s). If exit "
                                  "code is -9 (SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i "
                                  "oom` to check." % (index, code))


def port_unavailable(port_name, port):
    """0.5.23 utils/network.py:101-104 via server_args.py:875 (raised in the main process, uncaught)."""
    frames = LAUNCH_FRAMES + [
        sg("entrypoints/engine.py", 1184, "_launch_subprocesses", "port_args = PortArgs.init_new(server_args)"),
        sg("server_args.py", 875, "init_new", 'wait_port_available(nccl_port, "nccl_port")'),
        frame(_site("sglang/srt/utils/network.py"), 102, "wait_port_available", "raise ValueError("),
    ]
    return main_traceback(frames, "ValueError: %s at %d is not available in 30 seconds. %s at %d is not available"
                          % (port_name, port, port_name, port))


def warmup_poll_error(kind, port, response=None):
    """The last traceback of _execute_server_warmup's /model_info polls (0.5.23 http_server.py:2370-2382)."""
    first = sg("entrypoints/http_server.py", 2373, "_execute_server_warmup", "res = requests.get(")
    if kind == "assert":
        status, body = response
        frames = [sg("entrypoints/http_server.py", 2376, "_execute_server_warmup",
                     'assert res.status_code == 200, f"{res=}, {res.text=}"')]
        exc = "AssertionError: res=<Response [%d]>, res.text=%r" % (status, body.decode("utf-8", "replace"))
    elif kind == "timeout":
        frames = [first, frame(_site("requests/adapters.py"), 690, "send", "raise ReadTimeout(e, request=request)")]
        exc = ("requests.exceptions.ReadTimeout: HTTPConnectionPool(host='127.0.0.1', port=%d): Read timed out. "
               "(read timeout=5)" % port)
    else:
        frames = [first, frame(_site("requests/adapters.py"), 677, "send", "raise ConnectionError(e, request=request)")]
        exc = ("requests.exceptions.ConnectionError: HTTPConnectionPool(host='127.0.0.1', port=%d): Max retries exceeded "
               "with url: /model_info (Caused by NewConnectionError('<urllib3.connection.HTTPConnection object at "
               "0x7f3c5a1b2d10>: Failed to establish a new connection: [Errno 111] Connection refused'))" % port)
    return traceback_text(frames, exc)


def warmup_error():
    frames = [sg("entrypoints/http_server.py", 2494, "_execute_server_warmup", "res = requests.post("),
              frame(_site("requests/api.py"), 115, "post", 'return request("post", url, data=data, json=json, **kwargs)'),
              frame(_site("requests/adapters.py"), 690, "send", "raise ReadTimeout(e, request=request)")]
    return "Initialization failed. warmup error: " + traceback_text(
        frames, "requests.exceptions.ReadTimeout: HTTPConnectionPool(host='127.0.0.1', port=%(port)d): Read timed out. "
                "(read timeout=600)")


def config_missing(model_path, exists):
    """transformers' AutoConfig on a missing dir / a dir without config.json (uncaught in the main process)."""
    # Resolution runs in the launcher (0.5.23 entrypoints/engine.py:1153, server_args.py:277), before the
    # server_args= line; the inner frames are illustrative.
    frames = LAUNCH_FRAMES + [
        sg("entrypoints/engine.py", 1153, "_launch_subprocesses", "server_args.resolve_once()"),
        sg("server_args.py", 277, "resolve_once", "run_resolution_pipeline(self)"),
        sg("utils/hf_transformers_utils.py", 231, "get_config", "config = AutoConfig.from_pretrained("),
        frame(_site("transformers/utils/hub.py"), 567, "cached_files", "raise OSError(")]
    if exists:
        msg = ("OSError: %s does not appear to have a file named config.json. Checkout "
               "'https://huggingface.co/%s/tree/main' for available files." % (model_path, model_path))
    elif REPO_ID.match(model_path):  # looks like a Hub repo id: transformers asks the Hub (offline here)
        msg = ("OSError: %s is not a local folder and is not a valid model identifier listed on "
               "'https://huggingface.co/models'\nIf this is a private repository, make sure to pass a token having "
               "permission to this repo either by logging in with `hf auth login` or by passing `token=<your_token>`"
               % model_path)
    else:
        msg = ("OSError: Incorrect path_or_model_id: '%s'. Please provide either the path to a local folder or the "
               "repo_id of a model on the Hub." % model_path)
    return main_traceback(frames, msg)


def json_override_error(text, err):
    frames = LAUNCH_FRAMES + [
        sg("entrypoints/engine.py", 1153, "_launch_subprocesses", "server_args.resolve_once()"),
        sg("server_args.py", 277, "resolve_once", "run_resolution_pipeline(self)"),
        sg("configs/model_config.py", 108, "__init__", "json.loads(model_override_args)"),
        frame(os.path.join(STDLIB, "json/decoder.py"), 353, "raw_decode", "obj, end = self.scan_once(s, idx)")]
    return main_traceback(frames, "json.decoder.JSONDecodeError: %s" % err)


# ---- the other managers: the detokenizer process, the tokenizer manager (main process) ---------------------------

def detokenizer_exception(token_id):
    """0.5.23 managers/detokenizer_manager.py:556-570 run_detokenizer_process: the exception of its event loop, logged
    by the detokenizer process (main-process prefix: configure_logger(server_args) without a rank), then SIGQUIT to its
    parent. Here: K2.6's tiktoken tokenizer asked to decode an id of the model's padded vocabulary it does not have
    (the inner frames and the tokenizer's words are illustrative)."""
    remote = os.path.expanduser("~/.cache/huggingface/modules/transformers_modules/Kimi_hyphen_K2_dot_6/tokenization_kimi.py")
    frames = [
        sg("managers/detokenizer_manager.py", 561, "run_detokenizer_process", "manager.event_loop()"),
        sg("managers/detokenizer_manager.py", 189, "event_loop", "output = self._request_dispatcher(recv_obj)"),
        frame(_site("sglang/utils.py"), 627, "__call__", "return fn(obj)"),
        sg("managers/detokenizer_manager.py", 462, "handle_batch_token_id_out", "self._decode_batch_token_id_output(recv_obj)"),
        sg("managers/detokenizer_manager.py", 345, "_decode_batch_token_id_output", "surr_texts = self._grouped_batch_decode("),
        sg("managers/detokenizer_manager.py", 282, "_grouped_batch_decode", "decoded = self.tokenizer.batch_decode("),
        frame(_site("transformers/tokenization_utils_base.py"), 3021, "batch_decode", "self.decode("),
        frame(remote, 234, "decode", "return self.model.decode(token_ids)"),
        frame(_site("tiktoken/core.py"), 284, "decode", 'return self._core_bpe.decode_bytes(tokens).decode("utf-8", errors=errors)'),
    ]
    return "DetokenizerManager hit an exception: " + traceback_text(
        frames, "KeyError: 'Invalid token for decoding: %d'" % token_id)


def tokenizer_exception():
    """0.5.23 managers/tokenizer_manager.py:4034-4045 print_exception_wrapper around handle_loop (created by the first
    request, :2440-2448), in the main process; then kill_process_tree(os.getpid(), include_parent=True). Here: an
    output batch without its time stats under --enable-metrics (:2516-2518; illustrative)."""
    frames = [
        sg("managers/tokenizer_manager.py", 4040, "print_exception_wrapper", "await func()"),
        sg("managers/tokenizer_manager.py", 2474, "handle_loop", "await self._handle_batch_output(recv_obj)"),
        sg("managers/tokenizer_manager.py", 2518, "_handle_batch_output",
           "meta_info.update(scheduler_time_stats.convert_to_output_meta_info())"),
    ]
    return "TokenizerManager hit an exception: " + traceback_text(
        frames, "AttributeError: 'NoneType' object has no attribute 'convert_to_output_meta_info'")


# ---- the scheduler's watchdog ---------------------------------------------------------------------------------------

def pyspy_failed(pid):
    """0.5.23 utils/cudacore_pyspy_dump_utils.py:70-92 pyspy_dump_schedulers() as the watchdog calls it (its own pid):
    `py-spy` through /bin/sh, which does not find it on systemd's default PATH (the venv's bin is not on it)."""
    lines = []
    for native_flag in ("--native", ""):
        cmd = ("py-spy dump %s --pid %d" % (native_flag, pid)).strip()
        lines.append("Pyspy failed (%s). Error: /bin/sh: 1: py-spy: not found\n" % cmd)
    lines.append("All pyspy dump attempts failed for PID %d." % pid)
    return lines


def watchdog_timeout_lines(pid, timeout, rid, input_ids):
    """What 0.5.23 utils/watchdog.py:150-164 (WatchdogRaw._watchdog_once) logs when the scheduler's forward counter
    did not move for --watchdog-timeout seconds while a batch runs (invariant_checker.py:494-527): the debug info
    (:510-515), the py-spy attempts, the timeout line. Then (not soft) it sleeps 5 s and SIGQUITs its parent."""
    info = ("Scheduler debug info:\nscheduler.cur_batch_for_debug.batch_size()=1\n"
            "scheduler.cur_batch_for_debug.reqs=[Req(rid=%s, input_ids=%r, output_ids=[], self.grammar=None, "
            "self.sampling_params=<sglang.srt.sampling.sampling_params.SamplingParams object at 0x7f3a2c1e5f90>)]"
            % (rid, input_ids))
    return [info] + pyspy_failed(pid) + ["Scheduler watchdog timeout (self.watchdog_timeout=%r, self.soft=False)" % timeout]


# ---- more of the load's own checks (issue 25's last families) -----------------------------------------------------

def memory_unbalanced(pre_model_load_memory, local_gpu_memory):
    """0.5.23 distributed/bootstrap.py:441-450 _check_tp_memory_balance, called by measure_pre_model_load_memory
    (:193-220, from ModelRunner.init_torch_distributed, model_runner.py:1262) right after `Init parallel ends`: the
    WORLD minimum of the free memory (pre_model_load_memory) is below 0.9 x this rank's own, and
    SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK (environ.py:500, default True) makes it a RuntimeError on every rank
    whose GPU has more free memory than the busiest one."""
    frames = SCHEDULER_ROOT + PHASE_FRAMES["init"][:1] + [
        sg("model_executor/model_runner.py", 1262, "init_torch_distributed",
           "self.pre_model_load_memory = bootstrap.measure_pre_model_load_memory("),
        sg("distributed/bootstrap.py", 215, "measure_pre_model_load_memory", "_check_tp_memory_balance("),
        sg("distributed/bootstrap.py", 450, "_check_tp_memory_balance", "raise RuntimeError(msg)"),
    ]
    msg = "The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
    msg += "pre_model_load_memory=%r, local_gpu_memory=%r, local_gpu_memory * 0.9=%r" % (
        pre_model_load_memory, local_gpu_memory, local_gpu_memory * 0.9)
    return "Scheduler hit an exception: " + traceback_text(frames, "RuntimeError: " + msg)


def capture_failed():
    """A CUDA graph capture that fails on something other than memory: 0.5.23
    model_executor/runner/decode_cuda_graph_runner.py:597-604 wraps the RuntimeError of self.capture() (here torch's
    AcceleratorError, a RuntimeError, for a kernel's illegal memory access) in
    Exception(f"Capture cuda graph failed: {e}\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}"); the scheduler logs the chain
    (get_exception_traceback, scheduler.py:6372)."""
    inner = SCHEDULER_ROOT + PHASE_FRAMES["cuda_graph"][:2] + [
        sg("model_executor/runner/decode_cuda_graph_runner.py", 600, "__init__", "self.capture()"),
        sg("model_executor/runner/decode_cuda_graph_runner.py", 1402, "run_once", "logits_output_or_pp_proxy_tensors = forward("),
    ]
    outer = SCHEDULER_ROOT + PHASE_FRAMES["cuda_graph"][:2] + [
        sg("model_executor/runner/decode_cuda_graph_runner.py", 602, "__init__", "raise Exception("),
    ]
    error = ILLEGAL_ACCESS
    return "Scheduler hit an exception: " + traceback_text(inner, "torch.AcceleratorError: " + error.split(": ", 1)[1].rstrip("\n")) + \
        "\n\nDuring handling of the above exception, another exception occurred:\n\n" + \
        traceback_text(outer, "Exception: Capture cuda graph failed: %s\n%s" % (error.split(": ", 1)[1], CUDA_GRAPH_HELP))


def kernel_too_old(installed="0.4.8"):
    """0.5.23 entrypoints/engine.py:1961-1966 (_set_envs_and_config, :1155, before PortArgs and any child) on every
    CUDA start: assert_pkg_version("sglang-kernel", "0.4.9", ...) (utils/common.py:2422-2437) raises an uncaught
    Exception in the main process."""
    frames = LAUNCH_FRAMES + [
        sg("entrypoints/engine.py", 1155, "_launch_subprocesses", "_set_envs_and_config(server_args)"),
        sg("entrypoints/engine.py", 1962, "_set_envs_and_config", "assert_pkg_version("),
        sg("utils/common.py", 2429, "assert_pkg_version", "raise Exception("),
    ]
    return main_traceback(frames, "Exception: sglang-kernel is installed with version %s, which is less than the "
                                  "minimum required version 0.4.9. Please reinstall the latest version with "
                                  "`pip install sglang-kernel --force-reinstall`" % installed)


def custom_tokenizer_refused(model_path):
    """The main process' tokenizer manager on a checkpoint whose processor/tokenizer is its own code (K2.6's auto_map:
    kimi_k25_processor.py, tokenization_kimi.py) without --trust-remote-code: transformers 5.19.0
    resolve_trust_remote_code (dynamic_module_utils.py:741-746 the message for a local folder, :787-791 the raise;
    processing_auto.py passes upstream_repo in error_message's place, None here), uncaught."""
    transformers = _site("transformers")
    frames = LAUNCH_FRAMES + [
        sg("entrypoints/engine.py", 1339, "_launch_subprocesses",
           "tokenizer_manager, template_manager = init_tokenizer_manager_func("),
        sg("entrypoints/engine.py", 203, "init_tokenizer_manager",
           "tokenizer_manager = TokenizerManagerClass(server_args, port_args)"),
        sg("managers/tokenizer_manager.py", 556, "__init__", "self.init_tokenizer_and_processor()"),
        sg("managers/tokenizer_manager.py", 616, "init_tokenizer_and_processor", "_processor = get_processor_wrapper()"),
        sg("managers/tokenizer_manager.py", 4051, "get_processor_wrapper", "return get_processor("),
        sg("utils/hf_transformers/processor.py", 340, "get_processor", "processor = AutoProcessor.from_pretrained("),
        frame(os.path.join(transformers, "models/auto/processing_auto.py"), 332, "from_pretrained",
              "trust_remote_code = resolve_trust_remote_code("),
        frame(os.path.join(transformers, "dynamic_module_utils.py"), 788, "resolve_trust_remote_code", "raise ValueError("),
    ]
    error_message = ("The repository %s contains custom code which must be executed to correctly load the model. You "
                     "can inspect the repository content at %s .\n" % (model_path, os.path.abspath(model_path)))
    return main_traceback(frames, "ValueError: %s You can inspect the repository content at https://hf.co/%s.\n"
                                  "Please pass the argument `trust_remote_code=True` to allow custom code to be run."
                          % (error_message, model_path))


# ---- a start without a GPU, and a node whose peer node never finished loading (issue 25's last families) -----------

# The `sglang` console script's frames down to run_server (0.5.23 cli/main.py:51, cli/serve.py:223 and :106) for
# `sglang serve`: pip's script wrapper, then the CLI; `python -m sglang.launch_server` enters at launch_server.py:84.
SERVE_FRAMES = [
    frame(os.path.join(sysconfig.get_paths()["scripts"], "sglang"), 8, "<module>", "sys.exit(main())"),
    frame(_site("sglang/cli/main.py"), 51, "main", "serve(args, extra_argv)"),
    frame(_site("sglang/cli/serve.py"), 223, "serve", "registered.backend.run(request)"),
    frame(_site("sglang/cli/serve.py"), 106, "_run_llm", "run_server(server_args)"),
]
NO_ACCELERATOR = "No accelerator (CUDA, XPU, HPU, NPU, MUSA, MPS) or platform plugin is available."


def no_accelerator(serve=True):
    """A start that sees no GPU (no driver, CUDA_VISIBLE_DEVICES empty, /dev/nvidia* not visible to the unit): 0.5.23
    prepare_server_args only parses (server_args.py:668-720); run_server (launch_server.py:29) resolves the arguments
    (server_args.py:277, arg_groups/pipeline.py:132, resolution_hooks.py:139), and handle_missing_default_values
    asks get_device() for the unset --device (arg_groups/serving_hook.py:652). utils/common.py:1072-1126 finds no CUDA,
    XPU, NPU, HPU, MUSA or MPS and asks the platform: with none detected it is the base SRTPlatform
    (platforms/__init__.py:185-186), whose get_device raises NotImplementedError (platforms/device_mixin.py:187-189);
    the except re-raises RuntimeError without `from`, so Python prints both, chained. Uncaught in the main process,
    before any child: what Python prints on stderr (no log prefix). serve: the `sglang serve` entry, else
    `python -m sglang.launch_server`."""
    entry = SERVE_FRAMES if serve else LAUNCH_FRAMES[:3]
    inner = [sg("utils/common.py", 1122, "get_device", "return current_platform.get_device(device_id)"),
             sg("platforms/device_mixin.py", 189, "get_device", "raise NotImplementedError")]
    outer = entry + [
        frame(_site("sglang/launch_server.py"), 29, "run_server", "server_args.resolve_once()"),
        sg("server_args.py", 277, "resolve_once", "run_resolution_pipeline(self)"),
        sg("arg_groups/pipeline.py", 132, "run_resolution_pipeline", "run_hook(handle_missing_default_values, server_args)"),
        sg("arg_groups/resolution_hooks.py", 139, "run_hook", "step(server_args)"),
        sg("arg_groups/serving_hook.py", 652, "handle_missing_default_values", "device=get_device(),"),
        sg("utils/common.py", 1124, "get_device", "raise RuntimeError("),
    ]
    return main_traceback(inner, "NotImplementedError") + \
        "\n\nDuring handling of the above exception, another exception occurred:\n\n" + \
        main_traceback(outer, "RuntimeError: " + NO_ACCELERATOR)


def other_ranks_not_loaded(tp_rank):
    """0.5.23 ModelRunner.load_model ends with dist_barrier_after_load (model_runner.py:1405-1410, after `Load weight
    end`): monitored_barrier on the TP group's gloo group, timeout UNBALANCED_MODEL_LOADING_TIMEOUT_S
    (model_runner_components/load_model_utils.py:56, :386-391); its RuntimeError becomes this ValueError `from None`
    (:392-395: no chained traceback), logged by the scheduler's run_scheduler_process (scheduler.py:6370-6373)."""
    frames = SCHEDULER_ROOT + [
        sg("model_executor/model_runner.py", 715, "initialize", "self.load_model()"),
        sg("model_executor/model_runner.py", 1406, "load_model", "dist_barrier_after_load("),
        sg("model_executor/model_runner_components/load_model_utils.py", 393, "dist_barrier_after_load",
           "raise ValueError("),
    ]
    return "Scheduler hit an exception: " + traceback_text(
        frames, "ValueError: TP rank %d could finish the model loading, but there are other ranks that didn't finish "
                "loading. It is likely due to unexpected failures (e.g., OOM) or a slow node." % tp_rank)
