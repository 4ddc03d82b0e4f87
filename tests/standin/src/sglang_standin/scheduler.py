"""One scheduler process per TP rank, like SGLang's `run_scheduler_process`.

Started by the main process as `python -m sglang_standin.scheduler CONFIG_JSON`. It prints its rank's startup
lines (`[time TPn] ...`), runs the real dependency checks, reports phase completions on its status pipe and
waits for the main process' "go" between phases (the collective barrier of a real TP group). After it is ready,
rank 0 answers generation requests: this is the path /health, the warmup and the completions all go through.
"""
import ctypes
import json
import os
import signal
import sys
import threading
import time

from sglang_standin import generation, logfmt, model_dir, signatures
from sglang_standin.faults import Faults

PR_SET_PDEATHSIG = 1
DECODE_SECONDS_PER_TOKEN = 0.02  # times the pace factor
# 0.5.23 model_executor/model_runner_components/load_model_utils.py:56: how long a rank that loaded waits for the
# others at the post-load barrier (times the pace factor)
UNBALANCED_MODEL_LOADING_TIMEOUT_S = 480
GPUS = {  # total memory (GiB as SGLang prints "GB"), nvidia-smi MiB, PCIe-only box
    "h200": (139.81, 143771, False, "NVIDIA H200"),
    "b300": (267.71, 275040, False, "NVIDIA B300 SXM6 AC"),
    "rtx_pro_6000": (94.97, 97887, True, "NVIDIA RTX PRO 6000 Blackwell Server Edition"),
}


def die_with_parent():
    """SGLang's children die when the main process dies; do the same with PR_SET_PDEATHSIG where available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    parent = os.getppid()

    def watch():
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(0.5)

    thread = threading.Thread(target=watch, name="parent-watch")
    thread.daemon = True
    thread.start()


class Scheduler(object):
    def __init__(self, conf):
        self.conf = conf
        self.rank = conf["rank"]
        self.local_index = conf["local_index"]
        self.gpu = conf["gpu_id"]
        self.args = conf["args"]
        self.faults = Faults.from_dict(conf["faults"])
        self.pace = conf["pace"]
        self.durations = conf["durations"]
        # configure_scheduler_process (0.5.23 managers/scheduler.py:6270-6298): " TPn" only when tp_size > 1
        self.log = logfmt.Logger("TP%d" % self.rank if self.args["tp_size"] > 1 else "")
        self.status = os.fdopen(conf["status_fd"], "w", buffering=1)
        self.commands = os.fdopen(conf["cmd_fd"], "r")
        self.model = model_dir.read_model(self.args["model_path"])[0]
        total_gb, self.total_mib, self.pcie = GPUS[conf["gpu_kind"]][:3]
        self.total_gb = total_gb
        self.used_gb = 0.0
        self.phase = None
        self.generations = 0
        self.counted_requests = 0
        self.max_total_tokens = 0

    # ---- plumbing -------------------------------------------------------------------------------------------
    def send(self, **msg):
        self.status.write(json.dumps(msg) + "\n")
        self.status.flush()

    def wait_go(self):
        """Block like a rank at a collective until the main process says every rank got there."""
        line = self.commands.readline()
        if not line:
            os._exit(1)
        msg = json.loads(line)
        if msg.get("type") == "shutdown":
            os._exit(0)

    def sleep(self, phase_seconds):
        time.sleep(max(0.0, phase_seconds * self.pace))

    @property
    def avail_gb(self):
        return self.total_gb - self.used_gb

    def enter(self, phase):
        self.phase = phase
        if self.local_index == 0:
            logfmt.event("phase", phase=phase, rank=self.rank)
        self.publish_gpu_state()

    def maybe_hang(self):
        """hang@phase: stall right after the phase's begin line (alive, silent, port closed)."""
        if self.faults.hangs_in(self.phase):
            if self.local_index == 0:
                logfmt.event("hang", phase=self.phase, rank=self.rank)
            while True:
                time.sleep(3600)

    def publish_gpu_state(self):
        """Memory in use on this rank's GPU, for the nvidia-smi stand-in ($SGLANG_STANDIN_STATE_DIR/gpuN.json)."""
        state_dir = os.environ.get("SGLANG_STANDIN_STATE_DIR")
        if not state_dir:
            return
        path = os.path.join(state_dir, "gpu%d.json" % self.gpu)
        tmp = path + ".tmp"
        with open(tmp, "w") as handle:
            json.dump({"pid": os.getpid(), "used_mib": int(self.used_gb * 1024) + 500, "phase": self.phase,
                       "gpu_kind": self.conf["gpu_kind"], "total_mib": self.total_mib}, handle)
        os.replace(tmp, path)

    def crash(self, message, before=(), cause="scheduler_exception"):
        """Print the exception like SGLang's scheduler, SIGQUIT the main process, wait to be killed."""
        for line in before:
            self.log.raw(line)
        self.log.error(message)
        logfmt.event("crash", phase=self.phase, cause=cause, rank=self.rank)
        os.kill(os.getppid(), signal.SIGQUIT)
        time.sleep(60)
        os._exit(0)  # run_scheduler_process returns after the SIGQUIT (managers/scheduler.py:6368-6380)

    def fault(self, phase):
        """Apply crash@phase: scheduler_exception/oom_killer hit one rank, oom/nccl every rank."""
        cause = self.faults.crash_in(phase)
        if not cause:
            return
        if cause == "gpu_memory_unbalanced":
            return  # after `Init parallel ends` (phase_init)
        if cause == "other_rank":
            return  # after `Load weight end` (phase_weights)
        if cause in ("scheduler_exception", "oom_killer", "capture_failed") and self.local_index != 0:
            return
        if cause == "capture_failed":
            self.crash(signatures.capture_failed(), cause=cause)
        if cause == "oom_killer":
            logfmt.event("crash", phase=phase, cause=cause, rank=self.rank)
            os.kill(os.getpid(), signal.SIGKILL)
        before, message = signatures.scheduler_crash(phase, cause, self.gpu)
        self.crash(message, before, cause)

    # ---- startup phases ------------------------------------------------------------------------------------
    def run(self):
        self.phase_init()
        self.phase_weights()
        self.phase_kv_cache()
        self.phase_cuda_graph()
        self.serve()

    def phase_init(self):
        self.enter("init")
        started = time.time()
        self.log.info("Init parallel begin.")  # 0.5.23 distributed/bootstrap.py:115
        self.maybe_hang()
        self.sleep(self.durations["init"])
        if self.conf["gpu_kind"] in ("b300", "rtx_pro_6000"):
            self.log.info(signatures.PACKAGE_WALK)
        if not self.args["disable_custom_all_reduce"] and self.args["tp_size"] > 1:
            if self.pcie and self.args["tp_size"] > 2:
                self.log.warning(signatures.CUSTOM_ALLREDUCE_PCIE)
            elif os.environ.get("NCCL_P2P_DISABLE") == "1" or self.pcie:
                self.log.warning(signatures.CUSTOM_ALLREDUCE_P2P)
        self.fault("init")
        self.send(type="phase_done", phase="init")
        self.wait_go()  # rendezvous of the whole TP group (across nodes)
        self.used_gb = 0.62
        self.log.info("Init parallel ends. elapsed=%.2f s" % (time.time() - started))  # distributed/bootstrap.py:190
        if self.faults.crash_in("init") == "gpu_memory_unbalanced":
            # 0.5.23 distributed/bootstrap.py:193-220 + :441-450: another process holds 38.5 GiB on the GPU of local
            # rank 0; get_available_gpu_memory (utils/common.py:427) is free bytes / 2**30, so the values are floats.
            # Every rank leaves the WORLD all-reduce of the minimum together: the busy rank, which passes the check,
            # goes on into load_model and logs `Load weight begin` (model_runner.py:1274) while the other ranks
            # format and log their tracebacks; they SIGQUIT the main process a moment after it.
            local = (self.total_mib - 500) / 1024.0
            busiest = local - 38.5
            if self.local_index != 0:
                time.sleep(1.0)
                self.crash(signatures.memory_unbalanced(busiest, local), cause="gpu_memory_unbalanced")

    def phase_weights(self):
        self.enter("weights")
        started = time.time()
        self.log.info("Load weight begin. avail mem=%.2f GB" % self.avail_gb)
        self.maybe_hang()
        fmt = model_dir.compressed_tensors_problem(self.model)
        if not fmt and self.faults.crash_in("weights") == "compressed_tensors_too_old":
            # the text an old compressed-tensors gives for this checkpoint, without changing the venv
            fmt = self.model.quant_config.get("format") or "nvfp4-pack-quantized"
        if fmt:
            self.crash(signatures.compressed_tensors_format(fmt), cause="compressed_tensors")
        shards = self.model.shard_files()
        weight_gb = self.model.declared_bytes / float(1024 ** 3) / self.args["tp_size"]
        if weight_gb > self.total_gb * 0.98:
            self.crash(signatures.scheduler_crash("weights", "oom", self.gpu)[1], cause="oom")
        # _prepare_weights (0.5.23 model_loader/loader.py:547-582, weight_utils.py:799-806), on every rank before
        # the first shard is opened: shards the index names but the folder lacks, or no weights at all.
        missing = [name for name in shards if not os.path.isfile(os.path.join(self.model.path, name))]
        if missing and len(missing) == len(shards):
            self.crash(signatures.no_weights(self.args["model_path"]), cause="missing_shard")
        if missing and self.model.index:
            self.crash(signatures.missing_shards(self.model.path, missing), cause="missing_shard")
        per_shard = self.durations["weights"] / max(1, len(shards))
        desc = "Loading safetensors checkpoint shards"
        if self.rank == 0:
            self.log.raw(logfmt.format_tqdm(desc, 0, len(shards), 0.0))
        for done, name in enumerate(shards, 1):
            self.sleep(per_shard)
            path = os.path.join(self.model.path, name)
            problem = model_dir.check_shard(path)
            if problem:
                self.crash(signatures.corrupt_shard(problem), cause="corrupt_shard")
            self.used_gb = 0.62 + weight_gb * done / len(shards)
            self.publish_gpu_state()
            if self.rank == 0:
                self.log.raw(logfmt.format_tqdm(desc, done, len(shards), time.time() - started))
        self.fault("weights")
        # 0.5.23 model_executor/model_runner.py:1372-1380 + configs/model_config.py:1899-1919 (quant=, no dtype=)
        quant = self.model.quant_config
        quant_str = ""
        if quant:
            quant_str = "quant=%s" % quant.get("quant_method", "quantized")
            for field in ("bits", "quant_algo", "fmt", "requantization_method"):
                if field in quant:
                    quant_str += ", %s=%s" % (field, quant[field])
            quant_str += ", "
        self.log.info("Load weight end. elapsed=%.2f s, type=%s, %savail mem=%.2f GB, mem usage=%.2f GB."
                      % (time.time() - started, self.model.architecture, quant_str, self.avail_gb, weight_gb))
        if self.faults.crash_in("weights") == "other_rank":
            self.other_ranks_never_arrive()
        self.barrier("weights")

    def other_ranks_never_arrive(self):
        """crash@weights:other_rank: the peer node's ranks never reach 0.5.23's post-load barrier
        (dist_barrier_after_load, model_runner.py:1405-1410, load_model_utils.py:374-395): every rank here waits
        UNBALANCED_MODEL_LOADING_TIMEOUT_S (x pace) in monitored_barrier, then raises ValueError; each scheduler logs it
        and SIGQUITs the main process (whose launch-phase handler kills the tree)."""
        time.sleep(UNBALANCED_MODEL_LOADING_TIMEOUT_S * self.pace)
        self.crash(signatures.other_ranks_not_loaded(self.rank), cause="other_rank")

    def barrier(self, phase):
        self.send(type="phase_done", phase=phase)
        self.wait_go()

    def kv_layout(self):
        cfg = self.model.text_config
        layers = int(cfg.get("num_hidden_layers", 32))
        if self.model.is_mla:
            per_token = (int(cfg["kv_lora_rank"]) + int(cfg.get("qk_rope_head_dim", 64))) * layers * 2
        else:
            heads = int(cfg.get("num_key_value_heads", cfg.get("num_attention_heads", 32)))
            head_dim = int(cfg.get("head_dim", int(cfg.get("hidden_size", 4096)) // int(cfg.get("num_attention_heads", 32))))
            per_token = 2 * max(1, heads // self.args["tp_size"]) * head_dim * layers * 2
        return per_token

    def phase_kv_cache(self):
        self.enter("kv_cache")
        self.maybe_hang()  # KV cache allocation prints nothing before it is done
        self.sleep(self.durations["kv_cache"])
        self.fault("kv_cache")
        fraction = self.args["mem_fraction_static"] or 0.88
        kv_gb = self.total_gb * fraction - self.used_gb
        if kv_gb <= 0:
            self.crash(signatures.scheduler_crash("kv_cache", "oom", self.gpu)[1], cause="oom")
        per_token = self.kv_layout()
        self.max_total_tokens = int(kv_gb * 1024 ** 3 / per_token)
        if self.args["max_total_tokens"]:
            self.max_total_tokens = min(self.max_total_tokens, self.args["max_total_tokens"])
            kv_gb = self.max_total_tokens * per_token / float(1024 ** 3)
        self.used_gb += kv_gb
        self.publish_gpu_state()
        # 0.5.23 mem_cache/memory_pool.py:2073-2099
        if self.model.is_mla:
            self.log.info("KV Cache is allocated. dtype: torch.bfloat16, #tokens: %d, KV size: %.2f GB"
                          % (self.max_total_tokens, kv_gb))
        else:
            self.log.info("KV Cache is allocated. dtype: torch.bfloat16, #tokens: %d, K size: %.2f GB, V size: %.2f GB"
                          % (self.max_total_tokens, kv_gb / 2, kv_gb / 2))
        self.log.info("Memory pool end. avail mem=%.2f GB" % self.avail_gb)
        self.barrier("kv_cache")

    def capture_sizes(self):
        if self.args["cuda_graph_bs_decode"]:
            return sorted(self.args["cuda_graph_bs_decode"], reverse=True)
        max_bs = self.args["cuda_graph_max_bs_decode"] or 256
        sizes = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512]
        return sorted([bs for bs in sizes if bs <= max_bs] or [max_bs], reverse=True)

    def phase_cuda_graph(self):
        if self.args["disable_cuda_graph"] or self.args.get("cuda_graph_backend_decode") == "disabled":
            return  # capture_decode_graph returns before its begin line (cuda_graph_setup.py:730-733)
        self.enter("cuda_graph")
        started = time.time()
        # 0.5.23 model_executor/model_runner_components/cuda_graph_setup.py:495-500 (prefill, default disabled here),
        # :757-762 (decode begin), :786-791 (decode end)
        prefill = self.args.get("cuda_graph_backend_prefill")
        if prefill in ("full", "breakable"):
            self.log.info("Capture target prefill CUDA graph begin. backend=%s, num_tokens=%s, avail mem=%.2f GB"
                          % (prefill, [512, 1024, 2048, 4096, 8192], self.avail_gb))
            self.log.info("Capture target prefill CUDA graph end. elapsed=%.2f s, mem usage=0.50 GB, avail mem=%.2f GB."
                          % (time.time() - started, self.avail_gb - 0.5))
            self.used_gb += 0.5
        else:
            self.log.info("Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' "
                          "(e.g. via --cuda-graph-backend-prefill=disabled or auto-disable rules).")
        self.log.info("Capture target decode CUDA graph begin. backend=%s, num_tokens_per_req=1, avail mem=%.2f GB"
                      % (self.args.get("cuda_graph_backend_decode") or "full", self.avail_gb))
        self.maybe_hang()
        if model_dir.python_headers_missing():  # Triton JIT-compiles its driver at the first captured kernel
            gcc, message = signatures.triton_python_h(model_dir.python_include_dir())
            for line in gcc:
                self.log.raw(line)
            self.crash(message, cause="python_h")
        sizes = self.capture_sizes()
        graph_gb = 0.02 * len(sizes) + 0.5
        for done, bs in enumerate(sizes, 1):
            self.sleep(self.durations["cuda_graph"] / len(sizes))
            if self.rank == 0:
                self.log.raw(logfmt.format_capture_bar(bs, self.avail_gb - graph_gb * done / len(sizes), done, len(sizes),
                                                       time.time() - started))
            if done == len(sizes) // 2 + 1:
                self.fault("cuda_graph")
        self.used_gb += graph_gb
        self.publish_gpu_state()
        self.log.info("Capture target decode CUDA graph end. bs=%s, elapsed=%.2f s, mem usage=%.2f GB, avail mem=%.2f GB."
                      % (sorted(sizes), time.time() - started, graph_gb, self.avail_gb))
        self.barrier("cuda_graph")

    # ---- serving --------------------------------------------------------------------------------------------
    def serve(self):
        context_len = self.args["context_length"] or self.model.context_length
        chunked = self.args["chunked_prefill_size"] or 8192
        running = self.args["max_running_requests"] or min(4096, max(1, self.max_total_tokens // 64))
        if self.rank == 0:  # 0.5.23 managers/scheduler.py:1267-1276: tp_rank 0 only
            self.log.info("max_total_num_tokens=%d, chunked_prefill_size=%d, max_prefill_tokens=%d, "
                          "max_running_requests=%d, context_len=%d, available_gpu_mem=%.2f GB"
                          % (self.max_total_tokens, chunked, self.args["max_prefill_tokens"], running, context_len,
                             self.avail_gb))
        self.phase = "serving"
        self.send(type="ready", max_total_num_tokens=self.max_total_tokens, max_running_requests=running,
                  context_len=context_len, chunked_prefill_size=chunked)
        while True:
            line = self.commands.readline()
            if not line:
                os._exit(0)
            msg = json.loads(line)
            if msg["type"] == "shutdown":
                os._exit(0)
            if msg["type"] == "generate":
                self.generate(msg)

    def generate(self, msg):
        first = self.generations == 0
        self.generations += 1
        # 0.5.23 managers/scheduler_components/metrics_reporter.py:753-778
        self.log.info("Prefill batch, #new-seq: 1, #new-token: %d, #cached-token: 0, token usage: 0.00, #running-req: 0, "
                      "#queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): %.2f"
                      % (msg["prompt_tokens"], 1000.0 * msg["prompt_tokens"]))
        if first:  # the first batch pays the JIT/warmup cost
            if self.faults.crash_in("warmup") == "watchdog_timeout":
                self.watchdog_fires(msg)
            if self.faults.crash_in("warmup") == "oom_killer" and self.local_index == 0:
                # the kernel's OOM killer (host RAM) takes rank 0's scheduler in the warmup's first forward: no
                # traceback; 0.5.23's SubprocessWatchdog (utils/watchdog.py:166-222, started after the load) notices
                logfmt.event("crash", phase="warmup", cause="oom_killer", rank=self.rank)
                os.kill(os.getpid(), signal.SIGKILL)
            if self.faults.hangs_in("warmup"):
                logfmt.event("hang", phase="warmup", rank=self.rank)
                while True:
                    time.sleep(3600)
            self.sleep(self.durations["warmup"])
            time.sleep(self.faults.slow_warmup)
        ids, finish = generation.generate_ids(msg["prompt"], msg["max_tokens"], msg["thinking"],
                                              msg.get("ignore_eos", False), self.faults.answer_shift)
        # One batch at a time here; a long generation's token-by-token pace is the main process's
        # (SGLANG_STANDIN_TOKEN_SECONDS, server.py Handler.paced), so concurrent streams overlap as in continuous
        # batching: the scheduler's own cost is capped at a short answer's.
        self.sleep(DECODE_SECONDS_PER_TOKEN * min(len(ids), 20))
        self.send(type="result", id=msg["id"], ids=ids, finish_reason=finish)
        if first and self.faults.zombie:
            # Dies the way a C++-level crash does: no Python traceback; the old HTTP process keeps serving.
            logfmt.event("crash", phase="serving", cause="zombie", rank=self.rank)
            time.sleep(0.2)
            os.kill(os.getpid(), signal.SIGKILL)
        if msg.get("counted"):
            self.counted_requests += 1
            limit = self.faults.exit_after_requests
            if limit is not None and self.counted_requests >= limit:
                self.wait_delivered(msg["id"])
                self.crash(signatures.scheduler_crash("serving", "scheduler_exception", self.gpu)[1])

    def watchdog_fires(self, msg):
        """crash@warmup:watchdog_timeout: the warmup's forward never returns (a collective that hangs). 0.5.23's
        scheduler watchdog (managers/scheduler.py:1482-1486, active while a batch runs, invariant_checker.py:518-527)
        checks every timeout/2 and fires once the forward counter has not moved for --watchdog-timeout (x pace);
        utils/watchdog.py:150-164: its lines, a blank line on stderr and stdout, 5 s (x pace), SIGQUIT to the parent
        (the main process: its running-phase handler kills the tree). The forward stays stuck meanwhile."""
        timeout = self.args.get("watchdog_timeout") or 300
        logfmt.event("hang", phase="warmup", rank=self.rank)
        time.sleep(timeout * self.pace)
        rid = "%032x" % (0x5f1a2b3c4d5e6f708192a3b4c5d6e7f0 + msg["id"])
        input_ids = [163584 + (i * 7919) % 256 for i in range(max(1, msg["prompt_tokens"]))]
        for line in signatures.watchdog_timeout_lines(os.getpid(), timeout, rid, input_ids):
            self.log.error(line)
        self.log.raw("")
        self.log.raw("", fd=logfmt.STDOUT)
        logfmt.event("crash", phase="warmup", cause="watchdog_timeout", rank=self.rank)
        time.sleep(5 * self.pace)
        os.kill(os.getppid(), signal.SIGQUIT)
        while True:
            time.sleep(3600)

    def wait_delivered(self, rid):
        """Block until the main process has sent the response of request `rid` (other requests queue meanwhile)."""
        while True:
            line = self.commands.readline()
            if not line:
                os._exit(1)
            msg = json.loads(line)
            if msg["type"] == "shutdown":
                os._exit(0)
            if msg["type"] == "delivered" and msg["id"] == rid:
                return


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    conf = json.loads(argv[0])
    die_with_parent()
    # Like SGLang's scheduler, no SIGTERM handler: under KillMode=control-group a scheduler dies at once.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    Scheduler(conf).run()


if __name__ == "__main__":
    main()
