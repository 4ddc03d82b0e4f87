"""The main process of `python -m sglang.launch_server` (tokenizer manager + HTTP server), as SGLang 0.5.23 runs it.

Order (sglang.md "Startup order"): start one scheduler process per local TP rank, wait until all are ready
(the HTTP port refuses connections meanwhile), bind the port (uvicorn lines), warm up through the real
HTTP server, log `The server is fired up and ready to roll!`. Failures end like SGLang's kill_process_tree:
SIGKILL the children, then the main process itself (systemd: status=9/KILL).
"""
import fractions
import hmac
import json
import math
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from http import HTTPStatus
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sglang_standin import SGLANG_VERSION, faults as faults_mod, flags, generation, logfmt, model_dir, signatures
from sglang_standin import metrics as metrics_mod
from sglang_standin.scheduler import GPUS
from sglang.srt import server_args as server_args_module

DEFAULT_PHASE_SECONDS = {"init": 20.0, "weights": 300.0, "kv_cache": 5.0, "cuda_graph": 60.0, "warmup": 5.0}
UNGUARDED_PREFIXES = ("/health", "/ready", "/metrics")  # never need a key (0.5.23 utils/auth.py:101-106)
# The routes served here that 0.5.23 marks @auth_level(AuthLevel.ADMIN_OPTIONAL) (entrypoints/http_server.py:1254-1256);
# every other route served here is NORMAL. 0.5.23 marks no route ADMIN_FORCE (http_server.py:2253-2258).
ADMIN_OPTIONAL_PATHS = ("/freeze_gc",)
STARTING, UP, UNHEALTHY = "Starting", "Up", "UnHealthy"  # managers/io_struct ServerStatus
# The error_rate fault's failure: what 0.5.23 answers for a request its scheduler aborts with an internal server error,
# here retract_decode's last resort (managers/schedule_batch.py:3508-3519: FINISH_ABORT(message,
# status_code=HTTPStatus.INTERNAL_SERVER_ERROR)), sent as an AbortReq (managers/scheduler.py:4514-4518,6398-6409).
ABORT_MESSAGE = ("Out of memory even after retracting all other requests in the decode batch. "
                 "Aborting the last request.")


def phase_seconds(environ):
    """Default phase durations, overridable with SGLANG_STANDIN_PHASE_SECONDS="weights=30,cuda_graph=10"."""
    seconds = dict(DEFAULT_PHASE_SECONDS)
    for item in environ.get("SGLANG_STANDIN_PHASE_SECONDS", "").replace(";", ",").split(","):
        if "=" in item:
            key, value = item.split("=", 1)
            if key.strip() not in seconds:
                raise faults_mod.FaultError("unknown phase %r in SGLANG_STANDIN_PHASE_SECONDS" % key)
            seconds[key.strip()] = float(value)
    return seconds


def kill_process_tree(log, children, include_parent=True):
    """0.5.23 utils/common.py:2507-2560 kill_process_tree: an INFO line, SIGKILL to every child, then (include_parent)
    SIGKILL to this process itself (systemd: status=9/KILL)."""
    log.info("kill_process_tree called: parent_pid=%d, include_parent=%s, pid=%d" % (os.getpid(), include_parent, os.getpid()))
    for child in children:
        try:
            child.kill()
        except OSError:
            pass
    if include_parent:
        os.kill(os.getpid(), signal.SIGKILL)


class SchedulerClient(object):
    """The tokenizer manager's side of rank 0's scheduler: send generation requests, collect results."""

    def __init__(self, launcher, proc, cmd_file, status_file):
        self.launcher = launcher
        self.proc = proc
        self.cmd_file = cmd_file
        self.status_file = status_file
        self.lock = threading.Lock()
        self.pending = {}
        self.next_id = 0
        self.rid_to_state = {}  # in-flight requests by SGLang rid (the drain counts and names them)
        self.held = set()       # the /v1 requests among them, from hold() to release() (collapse_above counts them)
        self.last_receive = 0.0

    def delivered(self, rid):
        """Tell the scheduler a counted response reached the client (exit_after_requests crashes only after that)."""
        try:
            with self.lock:
                self.cmd_file.write(json.dumps({"type": "delivered", "id": rid}) + "\n")
                self.cmd_file.flush()
        except (OSError, ValueError):
            pass

    def start_reader(self):
        thread = threading.Thread(target=self._read, name="scheduler-reader")
        thread.daemon = True
        thread.start()

    def _read(self):
        for line in self.status_file:
            msg = json.loads(line)
            self.last_receive = time.time()
            if msg.get("type") == "result":
                if self.launcher.output_fault():
                    return  # the output never reaches its request: the process tree is going down
                with self.lock:
                    slot = self.pending.pop(msg["id"], None)
                if slot:
                    slot["result"] = msg
                    slot["event"].set()
        # The scheduler is gone: requests sent to it stay unanswered (SGLang's tokenizer manager waits forever).

    def hold(self, rid_prefix=""):
        """Register a request for as long as its response is being generated and streamed (0.5.23 keeps a rid in
        rid_to_state until its last output is sent, managers/tokenizer_manager.py: the drain counts it); release()."""
        sglang_rid = rid_prefix + uuid.uuid4().hex
        with self.lock:
            self.rid_to_state[sglang_rid] = None
            self.held.add(sglang_rid)
        return sglang_rid

    def release(self, sglang_rid):
        with self.lock:
            self.rid_to_state.pop(sglang_rid, None)
            self.held.discard(sglang_rid)

    def held_count(self):
        """How many requests hold() holds now: the /v1 requests in flight (health checks and /generate not)."""
        with self.lock:
            return len(self.held)

    def submit(self, prompt, prompt_tokens, max_tokens, thinking, counted=False, timeout=None, rid_prefix="",
               ignore_eos=False, held=None):
        """(ids, finish_reason, id), or None on timeout. `held`: a rid from hold() the caller releases."""
        slot = {"event": threading.Event(), "result": None}
        sglang_rid = held or rid_prefix + uuid.uuid4().hex
        with self.lock:
            self.next_id += 1
            rid = self.next_id
            self.pending[rid] = slot
            self.rid_to_state[sglang_rid] = rid
        try:
            msg = {"type": "generate", "id": rid, "prompt": prompt, "prompt_tokens": prompt_tokens,
                   "max_tokens": max_tokens, "thinking": thinking, "counted": counted, "ignore_eos": ignore_eos}
            try:
                with self.lock:
                    self.cmd_file.write(json.dumps(msg) + "\n")
                    self.cmd_file.flush()
            except (OSError, ValueError):
                pass  # dead scheduler: the request hangs like in SGLang
            if not slot["event"].wait(timeout):
                return None
            result = slot["result"]
            return result["ids"], result["finish_reason"], rid
        finally:
            with self.lock:
                self.pending.pop(rid, None)
                if held is None:
                    self.rid_to_state.pop(sglang_rid, None)


class Launcher(object):
    def __init__(self, args, model, faults, environ):
        self.args = args
        self.model = model
        self.faults = faults
        self.environ = environ
        self.log = logfmt.Logger("")
        self.pace = float(environ.get("SGLANG_STANDIN_PACE", "1.0"))
        self.durations = phase_seconds(environ)
        self.gpu_kind = environ.get("SGLANG_STANDIN_GPU", "h200")
        if self.gpu_kind not in GPUS:
            raise faults_mod.FaultError("SGLANG_STANDIN_GPU must be one of %s" % ", ".join(sorted(GPUS)))
        self.children = []
        self.cmd_files = []
        self.status_files = []
        self.status = STARTING          # tokenizer_manager.server_status: Starting, Up, UnHealthy
        self.gracefully_exit = False    # set by the SIGTERM handler (tokenizer_manager.py:4065-4070)
        self.client = None
        self.httpd = None
        self.scheduler_info = {}
        self.created = int(time.time())
        self.peers = []                 # node-to-node connections (the NCCL/TCPStore emulation)
        self.shutdown_broadcast = False  # rank >= 1: rank 0's ShutdownReq arrived
        self.watchdog_stopped = False
        self.running_phase = False      # the tokenizer manager's loop handlers are in place
        self.follower_sigterm = None    # node_rank >= 1 after the load
        self.shutdown_ready = False     # node_rank >= 1: its schedulers are ready (serving)
        self.uvicorn_serving = False    # uvicorn's signal handlers are in place
        self.should_exit = False
        self.ready = False              # the ready line was logged (the warmup is done)
        self.token_seconds = float(environ.get("SGLANG_STANDIN_TOKEN_SECONDS", "0") or 0)
        self.openai_requests = 0        # /v1 chat and completion requests since the start (error_rate counts them)
        self.openai_lock = threading.Lock()
        self.request_log = environ.get("SGLANG_STANDIN_REQUEST_LOG") or None
        self.local_ranks = max(1, args.tp_size // max(1, args.nnodes))
        if faults.crash_in("weights") == "other_rank" and args.nnodes < 2:
            raise faults_mod.FaultError("crash@weights:other_rank emulates one node of a multi-node start whose peer "
                                        "node never finishes loading: it needs --nnodes 2 or more")

    # ---- failure paths --------------------------------------------------------------------------------------
    def die(self, cause):
        """kill_process_tree(os.getpid()): the children and this process get SIGKILL."""
        logfmt.event("crash", phase="main", cause=cause)
        kill_process_tree(self.log, self.children)

    def launch_phase_sigquit(self, signum, frame):
        """0.5.23 entrypoints/engine.py:1976-1982 (until the tokenizer manager's loop replaces it)."""
        self.log.error(signatures.SIGQUIT_LINE)
        self.die("sigquit")

    def running_phase_sigquit(self, signum=None, frame=None):
        """0.5.23 managers/tokenizer_manager.py:4072-4082 (installed with the SIGTERM handler, first request on)."""
        self.log.error(signatures.SIGQUIT_RUNNING)
        self.watchdog_stopped = True
        self.die("sigquit")

    def on_sigterm(self, signum=None, frame=None):
        """0.5.23 managers/tokenizer_manager.py:4065-4070: a loop signal handler, so signum/frame are None; the
        requests keep coming in (nothing refuses them), the drain is the sigterm_watchdog below."""
        self.log.warning("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
        self.gracefully_exit = True

    def output_fault(self):
        """crash@warmup:detokenizer_exception|tokenizer_exception, on the first output batch (the warmup's): True when
        it fails. The detokenizer is a process of its own in 0.5.23 (detokenizer_manager.py:545-570): a forked child
        logs its exception and SIGQUITs this process, whose handler of the moment ends the tree. The tokenizer
        manager is this process: print_exception_wrapper logs, then kill_process_tree(include_parent=True)
        (tokenizer_manager.py:4034-4045): 9/KILL."""
        cause = self.faults.crash_in("warmup")
        if cause not in ("detokenizer_exception", "tokenizer_exception"):
            return False
        logfmt.event("crash", phase="warmup", cause=cause)
        if cause == "tokenizer_exception":
            self.log.error(signatures.tokenizer_exception())
            kill_process_tree(self.log, self.children)
            return True
        parent = os.getpid()
        if os.fork() == 0:  # the detokenizer process
            try:
                signal.set_wakeup_fd(-1)  # the pipe is the parent's
                logfmt.Logger("").error(signatures.detokenizer_exception(163839))
                os.kill(parent, signal.SIGQUIT)
            finally:
                os._exit(0)
        return True

    def install_running_handlers(self):
        """auto_create_handle_loop (tokenizer_manager.py:2440-2462), first run by the warmup's first request. (Python
        sets handlers in the main thread only: the dispatchers installed at start switch on this flag.)"""
        self.running_phase = True

    def on_signal(self, signum, frame):
        """In which order a SIGTERM and a SIGQUIT that are both pending are handled. CPython runs pending Python-level
        handlers by signal number (SIGQUIT, 3, before SIGTERM, 15), one may run inside another, and 0.5.23's
        launch-phase handler is one of those (engine.py:1982). From the first request on, both are the asyncio loop's
        (tokenizer_manager.py:2451-2459): the Python-level handler does nothing (asyncio's _sighandler_noop), and the
        loop reads the wakeup fd's bytes and runs the handlers one after another in the order the signals arrived
        (serve_http's loop, below): a SIGTERM to the whole cgroup is logged before the SubprocessWatchdog's SIGQUIT
        that the dying schedulers cause, however late the main thread gets a core, as long as the SIGTERM reached this
        process before the schedulers': systemd signals the main PID first (src/core/unit.c unit_kill_context). A
        killpg() does not (kernel/pid.c attach_pid puts the newest member at the head of the group's list)."""
        if self.running_phase:
            return
        try:
            os.read(self.arrivals, 64)  # its byte: this handler runs it, the loop must not run it again
        except BlockingIOError:
            pass
        self.dispatch(signum)

    def run_loop_signals(self, timeout):
        """One turn of the tokenizer manager's loop, as far as signals go: wait up to `timeout` for the wakeup fd,
        then run each signal's handler in arrival order, each to its end before the next (asyncio's _read_from_self
        and _handle_signal). Before the first request the bytes are the CPython handlers' (on_signal) and stay."""
        readable = select.select([self.arrivals], [], [], timeout)[0]
        if not readable:
            return
        if not self.running_phase:
            time.sleep(0.05)  # on_signal reads it; the loop's handlers are not in place yet
            return
        try:
            arrived = os.read(self.arrivals, 64)
        except BlockingIOError:
            return
        for number in arrived:
            self.dispatch(number)

    def dispatch(self, number):
        if number == signal.SIGQUIT:
            self.dispatch_sigquit(number, None)
        elif number == signal.SIGTERM:
            self.dispatch_sigterm(number, None)

    def dispatch_sigterm(self, signum, frame):
        if self.follower_sigterm is not None:
            self.follower_sigterm()
        elif self.running_phase:
            self.on_sigterm()
        elif self.uvicorn_serving:
            self.uvicorn_exit()
        else:  # no handler yet: the default action, the process ends by SIGTERM (systemd: 15/TERM)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    def uvicorn_exit(self):
        """uvicorn's own handler (0.54 server.py capture_signals/handle_exit), in place from `Started server process`
        until the first request replaces it: should_exit, then (if bound) `Shutting down` and the listener closed
        (server.py:282-287) and the lifespan shutdown, which joins the warmup thread (http_server.py:464-468). That
        thread's polls then fail: its error and kill_process_tree (9/KILL). Not bound (busy port): nothing more."""
        if self.should_exit:
            return
        self.should_exit = True
        if self.httpd is None:
            return

        def shutdown():
            self.log.uvicorn("Shutting down")
            self.httpd.shutdown()
            self.httpd.server_close()
            self.log.uvicorn("Waiting for application shutdown.")

        thread = threading.Thread(target=shutdown, name="uvicorn-shutdown")
        thread.daemon = True
        thread.start()

    def dispatch_sigquit(self, signum, frame):
        if self.running_phase:
            self.running_phase_sigquit()
        else:
            self.launch_phase_sigquit(signum, frame)

    def sigterm_watchdog(self):
        """0.5.23 managers/tokenizer_manager.py:3508-3571: poll every 5 s (x pace) for the SIGTERM flag, drain with no
        timeout, ShutdownReq to every TP rank (all nodes), wait <= 15 s for the schedulers, exit 0."""
        step = 5.0 * self.pace
        while not self.gracefully_exit:
            time.sleep(step)
        logfmt.event("shutdown", phase="drain")
        while True:
            with self.client.lock:
                rids = list(self.client.rid_to_state)
            if self.status == UNHEALTHY:
                self.log.error("Signal SIGTERM received while health check failed. Force exiting.")
                break
            self.log.info("Gracefully exiting... Remaining number of requests %d. Remaining requests remaining_rids=%r."
                          % (len(rids), rids))
            if rids:
                time.sleep(step)
            else:
                break
        self.watchdog_stopped = True
        self.broadcast_shutdown()
        deadline = time.monotonic() + 15
        for child in self.children:
            while child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
        stragglers = [child.pid for child in self.children if child.poll() is None]
        if stragglers:
            self.log.warning("Schedulers still alive 15s after ShutdownReq, killing them before they released: %s"
                             % stragglers)
        kill_process_tree(self.log, self.children, include_parent=False)
        # The server stop hook: uvicorn shuts down (uvicorn/server.py:282, lifespan/on.py:67-76, server.py:110-113),
        # launch_server returns, launch_server.py's `finally` runs kill_process_tree(include_parent=False), exit 0.
        self.log.uvicorn("Shutting down")
        self.log.uvicorn("Waiting for application shutdown.")
        self.log.uvicorn("Application shutdown complete.")
        self.log.uvicorn("Finished server process [%d]" % os.getpid())
        kill_process_tree(self.log, [], include_parent=False)
        logfmt.event("shutdown", phase="exit")
        os._exit(0)

    def broadcast_shutdown(self):
        """ShutdownReq: the local schedulers exit, and rank 0's scheduler broadcasts it to the other nodes' ranks."""
        for cmd in self.cmd_files:
            try:
                cmd.write(json.dumps({"type": "shutdown"}) + "\n")
                cmd.flush()
            except (OSError, ValueError):
                pass
        for conn in self.peers:
            try:
                conn.sendall(b"shutdown\n")
            except OSError:
                pass

    # ---- startup --------------------------------------------------------------------------------------------
    def run(self):
        # During the load only the launch-phase SIGQUIT handler exists (engine.py:1982): SIGTERM kills (15/TERM).
        self.arrivals, wakeup = os.pipe()
        os.set_blocking(self.arrivals, False)
        os.set_blocking(wakeup, False)
        signal.set_wakeup_fd(wakeup, warn_on_full_buffer=False)
        signal.signal(signal.SIGQUIT, self.on_signal)
        signal.signal(signal.SIGTERM, self.on_signal)
        logfmt.event("start", phase="main", start_number=self.faults.start_number)
        if self.faults.crash_in("init") == "no_gpu":
            self.no_accelerator()
        if self.faults.crash_in("init") == "missing_package":
            self.kernel_too_old()
        if self.faults.crash_in("init") == "port_in_use":
            self.port_in_use()
        # 0.5.23 entrypoints/engine.py:1185 (after PortArgs.init_new, before the schedulers start), on every node:
        # the resolved fields with only the watermark ones redacted, so `'api_key': 'KEY'` is in the journal. Read
        # through ServerArgs.resolved_dict() as the release does (engine.py:173-174), not a copy of it.
        self.log.info("server_args=%s" % (self.args.resolved_dict(),))
        if self.faults.crash_in("init") == "trust_remote_code" and not self.args.trust_remote_code:
            self.custom_tokenizer_refused()
        self.spawn_schedulers()
        self.wait_for_schedulers()
        if self.args.node_rank > 0:
            self.serve_follower()
        self.serve_http()

    def no_accelerator(self):
        """A host that shows the server no GPU: 0.5.23 fails in run_server's argument resolution, before
        _launch_subprocesses and its sglang-kernel check (launch_server.py:29, arg_groups/serving_hook.py:652,
        utils/common.py:1121-1126): the entry's `finally` kill_process_tree(include_parent=False) (cli/serve.py:224-225,
        launch_server.py:85-86) while the exception unwinds, then Python prints the chained traceback, exit 1."""
        logfmt.event("crash", phase="main", cause="no_gpu")
        kill_process_tree(self.log, [], include_parent=False)
        # `python -m sglang.launch_server` runs launch_server.py; `sglang serve` the console script (or the CLI module)
        self.log.raw(signatures.no_accelerator(serve=os.path.basename(sys.argv[0]) != "launch_server.py"))
        os._exit(1)

    def kernel_too_old(self):
        """0.5.23 _set_envs_and_config's sglang-kernel check (entrypoints/engine.py:1961-1966, utils/common.py:2422-2437),
        before PortArgs and any child: launch_server.py:85-86's `finally` kill_process_tree(include_parent=False) while
        the exception unwinds, then Python prints the uncaught traceback on stderr, exit 1."""
        logfmt.event("crash", phase="main", cause="missing_package")
        kill_process_tree(self.log, [], include_parent=False)
        self.log.raw(signatures.kernel_too_old())
        os._exit(1)

    def custom_tokenizer_refused(self):
        """0.5.23 launches the schedulers and the detokenizer, then builds the tokenizer manager in the main process
        (entrypoints/engine.py:1221, :1329, :1339, init_tokenizer_manager :196-203, TokenizerManager :556).
        K2.6 is multimodal (tokenizer_manager.py:612-634): get_processor (tokenizer_manager.py:4050-4059,
        utils/hf_transformers/processor.py:340) calls AutoProcessor.from_pretrained, which meets the checkpoint's
        auto_map without trust_remote_code; transformers 5.19.0 raises ValueError (processing_auto.py:332,
        dynamic_module_utils.py:787-791), which get_processor re-raises as is (processor.py:348-378).
        Uncaught: launch_server.py:85-86 kills the children, exit 1. The children are spawned first in 0.5.23 but are
        still importing torch then (no line of theirs): here the check runs before they are started at all."""
        logfmt.event("crash", phase="main", cause="trust_remote_code")
        kill_process_tree(self.log, self.children, include_parent=False)
        self.log.raw(signatures.custom_tokenizer_refused(self.args.tokenizer_path or self.args.model_path))
        os._exit(1)

    def port_in_use(self):
        """PortArgs.init_new's port checks (0.5.23 server_args.py:868-888, utils/network.py:64-105): 30 x 1 s (x pace),
        a log line at 15, 20, 25 s, then logger.exception + the uncaught ValueError: exit 1, before any child."""
        nccl_port = self.args.port + 21
        for second in range(30):
            if second > 10 and second % 5 == 0:
                self.log.warning("The port %d is in use, but we could not find the process that uses it." % nccl_port)
            time.sleep(1.0 * self.pace)
        logfmt.event("crash", phase="main", cause="port_in_use")
        self.log.error("Port is already in use. dist_init_port=%d port_base=%d detokenizer_port=%d nccl_port=%d "
                       "scheduler_input_port=%d" % (self.args.port + 233, self.args.port + 234, self.args.port + 235,
                                                    nccl_port, self.args.port + 238))
        self.log.raw(signatures.port_unavailable("nccl_port", nccl_port))
        kill_process_tree(self.log, [], include_parent=False)  # launch_server.py:85-86
        os._exit(1)

    def spawn_schedulers(self):
        public = vars(self.args)
        sched_args = {key: public.get(key) for key in (
            "cuda_graph_backend_decode", "cuda_graph_backend_prefill",
            "model_path", "tp_size", "disable_custom_all_reduce", "mem_fraction_static", "max_total_tokens",
            "cuda_graph_bs_decode", "cuda_graph_max_bs_decode", "disable_cuda_graph", "watchdog_timeout",
            "context_length", "chunked_prefill_size", "max_running_requests", "max_prefill_tokens")}
        for index in range(self.local_ranks):
            status_r, status_w = os.pipe()
            cmd_r, cmd_w = os.pipe()
            conf = {"rank": self.args.node_rank * self.local_ranks + index, "local_index": index,
                    "gpu_id": self.args.base_gpu_id + index, "gpu_kind": self.gpu_kind, "args": sched_args,
                    "faults": self.faults.as_dict(), "pace": self.pace, "durations": self.durations,
                    "status_fd": status_w, "cmd_fd": cmd_r}
            proc = subprocess.Popen([sys.executable, "-m", "sglang_standin.scheduler", json.dumps(conf)],
                                    pass_fds=(status_w, cmd_r), close_fds=True)
            os.close(status_w)
            os.close(cmd_r)
            self.children.append(proc)
            self.status_files.append(os.fdopen(status_r, "r"))
            self.cmd_files.append(os.fdopen(cmd_w, "w"))

    def send_all(self, msg):
        for cmd in self.cmd_files:
            cmd.write(json.dumps(msg) + "\n")
            cmd.flush()

    def wait_for_schedulers(self):
        """Collect every rank's phase completions (the barrier), then its ready message."""
        selector = selectors.DefaultSelector()
        for index, status in enumerate(self.status_files):
            selector.register(status, selectors.EVENT_READ, index)
        arrived = {}
        ready = set()
        while len(ready) < len(self.children):
            for key, _events in selector.select(timeout=0.5):
                index = key.data
                line = key.fileobj.readline()
                if not line:
                    selector.unregister(key.fileobj)
                    self.scheduler_died_during_init(index)
                msg = json.loads(line)
                if msg["type"] == "phase_done":
                    arrived.setdefault(msg["phase"], set()).add(index)
                    if len(arrived[msg["phase"]]) == len(self.children):
                        if msg["phase"] == "init":
                            self.rendezvous()
                        self.send_all({"type": "go"})
                elif msg["type"] == "ready":
                    ready.add(index)
                    if index == 0:
                        self.scheduler_info = msg
        selector.close()

    def scheduler_died_during_init(self, index):
        """0.5.23 _wait_for_scheduler_ready (entrypoints/engine.py:2014-2042) polls every 5 s and raises
        RuntimeError; launch_server.py's `finally` kills the other children (kill_process_tree(include_parent=False),
        launch_server.py:85-86), then Python prints the traceback and exits 1 (systemd: status=1/FAILURE)."""
        child = self.children[index]
        try:
            code = child.wait(timeout=10)  # _scheduler_died_error: proc.join(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        logfmt.event("crash", phase="main", cause="scheduler_died")
        kill_process_tree(self.log, self.children, include_parent=False)
        self.log.raw(signatures.scheduler_died(index, code, self.args.node_rank))
        os._exit(1)

    def rendezvous(self):
        """torch.distributed's TCPStore at --dist-init-addr across --nnodes (single node: nothing to do)."""
        if self.args.nnodes <= 1:
            return
        if self.faults.crash_in("weights") == "other_rank":
            return  # the peer node joined (emulated): it fails to finish loading later, at the post-load barrier
        host, port = (self.args.dist_init_addr or "127.0.0.1:29500").rsplit(":", 1)
        timeout = self.args.dist_timeout or 600
        deadline = time.monotonic() + timeout
        if self.args.node_rank == 0:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("", int(port)))
            listener.listen(16)
            joined = []
            while len(joined) < self.args.nnodes - 1:
                listener.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    conn = listener.accept()[0]
                except socket.timeout:
                    self.log.raw(signatures.main_traceback(
                        signatures.LAUNCH_FRAMES, "torch.distributed.DistStoreError: Timed out after %d seconds waiting "
                        "for clients. %d/%d clients joined." % (timeout, len(joined) + 1, self.args.nnodes)))
                    self.die("rendezvous_timeout")
                conn.recv(64)
                joined.append(conn)
            for conn in joined:
                conn.sendall(b"go\n")
                self.watch_peer(conn)
            listener.close()
            return
        while True:
            try:
                conn = socket.create_connection((host, int(port)), timeout=5)
                conn.sendall(b"node %d\n" % self.args.node_rank)
                conn.settimeout(max(1.0, deadline - time.monotonic()))
                conn.recv(64)
                self.watch_peer(conn)
                return
            except (OSError, socket.timeout):
                if time.monotonic() > deadline:
                    self.log.raw(signatures.main_traceback(
                        signatures.LAUNCH_FRAMES, "torch.distributed.DistNetworkError: The client socket has timed out "
                        "after %ds while trying to connect to (%s, %s)." % (timeout, host, port)))
                    self.die("rendezvous_timeout")
                time.sleep(1)

    def watch_peer(self, conn):
        """Keep the connection to the other node open, as NCCL's are. Rank 0's ShutdownReq travels on it
        (`shutdown`): a rank >= 1 node's schedulers then exit and so does its main process. When the other node's
        process dies instead, this one's next collective fails, so a multi-node server dies as a whole."""
        peer = "%s<%d>" % conn.getpeername()[:2]
        self.peers.append(conn)

        def watch():
            conn.settimeout(None)
            reader = conn.makefile("rb")
            try:
                for line in reader:
                    if line.strip() == b"shutdown" and self.args.node_rank > 0:
                        self.shutdown_broadcast = True
                        self.broadcast_shutdown()  # to the local schedulers: they leave their event loop
                        return
            except OSError:
                pass
            if self.gracefully_exit or self.watchdog_stopped or self.shutdown_broadcast:
                return
            # This node's first scheduler hits the broken collective: its exception, its SIGQUIT to this process
            # (managers/scheduler.py:6368-6373), and this process' SIGQUIT handler of the moment.
            rank = self.args.node_rank * self.local_ranks
            scheduler_log = logfmt.Logger("TP%d" % rank if self.args.tp_size > 1 else "")
            phase = "serving" if self.client is not None or self.args.node_rank > 0 and self.shutdown_ready else "init"
            scheduler_log.error("Scheduler hit an exception: " + signatures.traceback_text(
                signatures.PHASE_FRAMES["serving"] if phase == "serving" else signatures.SCHEDULER_ROOT + signatures.PHASE_FRAMES["init"],
                signatures.NCCL_REMOTE % {"peer": peer}))
            logfmt.event("crash", phase="main", cause="nccl_remote")
            if self.running_phase:
                self.running_phase_sigquit()
            else:
                self.launch_phase_sigquit(signal.SIGQUIT, None)

        thread = threading.Thread(target=watch, name="peer-%s" % peer)
        thread.daemon = True
        thread.start()

    # ---- node_rank >= 1 -------------------------------------------------------------------------------------
    def serve_follower(self):
        """0.5.23 entrypoints/engine.py:1232-1290: no tokenizer manager; SIGTERM only logs (the node waits for rank
        0's ShutdownReq); a dummy /health server on --host:--port (utils/common.py:3624-3667, uvicorn at log level
        warning: no access lines); block until the schedulers exit, log each, return: launch_server.py's `finally`
        kill_process_tree(include_parent=False), exit 0."""
        node_rank = self.args.node_rank

        def on_sigterm():
            self.log.warning("SIGTERM received on node_rank %d; waiting for the rank-0 ShutdownReq broadcast to stop "
                             "the schedulers." % node_rank)

        self.follower_sigterm = on_sigterm
        self.shutdown_ready = True
        handler = type("FollowerHandler", (FollowerHandler,), {"launcher": self})
        try:
            self.httpd = ThreadingHTTPServer((self.args.host, self.args.port), handler)
        except OSError as err:
            # the dummy server runs in a daemon thread: its bind error is logged, the node keeps running
            self.log.uvicorn_error("[Errno %d] error while attempting to bind on address (%r, %d): %s"
                                   % (err.errno, self.args.host, self.args.port, (err.strerror or "").lower()))
        else:
            self.httpd.daemon_threads = True
            logfmt.event("http_bound", phase="http", port=self.args.port)
            thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2}, name="http")
            thread.daemon = True
            thread.start()
        for child in self.children:  # block_until_scheduler_exits (engine.py:1015-1029)
            while child.poll() is None:
                time.sleep(0.2)
            self.log.error("Scheduler or DataParallelController %d terminated with %d" % (child.pid, child.returncode))
        kill_process_tree(self.log, [], include_parent=False)
        logfmt.event("shutdown", phase="exit")
        os._exit(0)

    # ---- HTTP -----------------------------------------------------------------------------------------------
    def serve_http(self):
        self.client = SchedulerClient(self, self.children[0], self.cmd_files[0], self.status_files[0])
        self.client.start_reader()
        self.watchdog = threading.Thread(target=self.watch_children, name="subprocess-watchdog")
        self.watchdog.daemon = True
        self.watchdog.start()  # after wait_for_ready (engine.py:1358-1368)
        # uvicorn (0.54 server.py:100-113, lifespan/on.py:48-62): the lifespan starts the warmup thread
        # (entrypoints/http_server.py:449-454) before the socket is bound.
        self.uvicorn_serving = True  # Server.serve enters capture_signals first (uvicorn/server.py:87-89)
        self.log.uvicorn("Started server process [%d]" % os.getpid())
        self.log.uvicorn("Waiting for application startup.")
        warmup = threading.Thread(target=self.warmup, name="warmup")
        warmup.daemon = True
        warmup.start()
        self.log.uvicorn("Application startup complete.")
        handler = type("Handler", (Handler,), {"launcher": self})
        try:
            httpd = ThreadingHTTPServer((self.args.host, self.args.port), handler)
        except OSError as err:
            # uvicorn server.py:189-192: log, lifespan shutdown, which joins the warmup thread (http_server.py:464-468):
            # its 120 polls of /model_info on the port, then `Initialization failed. warmup error:` and
            # kill_process_tree (9/KILL). If whoever holds the port answers /model_info 200, the warmup goes on
            # against it and may even log the ready line; then uvicorn's sys.exit(STARTUP_FAILURE) (config.py:81:
            # 3) ends launch_server through its `finally` kill_process_tree(include_parent=False): exit 3.
            self.log.uvicorn_error("[Errno %d] error while attempting to bind on address (%r, %d): %s"
                                   % (err.errno, self.args.host, self.args.port, (err.strerror or "").lower()))
            logfmt.event("crash", phase="http", cause="http_bind")
            self.log.uvicorn("Waiting for application shutdown.")
            warmup.join()
            self.log.uvicorn("Application shutdown complete.")
            kill_process_tree(self.log, self.children, include_parent=False)
            os._exit(3)
        httpd.daemon_threads = True
        self.httpd = httpd
        logfmt.event("http_bound", phase="http", port=self.args.port)
        self.log.uvicorn("Uvicorn running on http://%s:%d (Press CTRL+C to quit)" % (self.args.host, self.args.port))
        server_thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2}, name="http")
        server_thread.daemon = True
        server_thread.start()
        drain = threading.Thread(target=self.sigterm_watchdog, name="sigterm-watchdog")
        drain.daemon = True
        drain.start()
        while True:  # the main thread stays free for signal handlers, and from the first request on runs the loop's
            self.run_loop_signals(1.0)

    def watch_children(self):
        """0.5.23 utils/watchdog.py:166-222 SubprocessWatchdog: every 1 s (x pace); a scheduler gone with a non-zero code
        logs the crash and SIGQUITs this process. (`zombie` simulates an older release without it.)"""
        if self.faults.zombie:
            return
        while not self.watchdog_stopped:
            time.sleep(1.0 * self.pace)
            for index, child in enumerate(self.children):
                code = child.poll()
                if code is None or code == 0 or self.watchdog_stopped:
                    continue
                self.log.error(signatures.SUBPROCESS_CRASHED % {"name": "scheduler_%d" % index, "pid": child.pid,
                                                                "code": code})
                os.kill(os.getpid(), signal.SIGQUIT)
                return

    def request_self(self, method, path, body=None, timeout=600.0, key=None):
        host = self.args.host if self.args.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        conn = HTTPConnection(host, self.args.port, timeout=timeout)
        headers = {"Content-Type": "application/json"}
        key = key or self.args.api_key
        if key:
            headers["Authorization"] = "Bearer " + key
        try:
            conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
            response = conn.getresponse()
            data = response.read()
        finally:
            conn.close()
        return response.status, data

    def warmup(self):
        """0.5.23 entrypoints/http_server.py:2360-2400 _execute_server_warmup: up to 120 x (sleep 1 s, GET
        /model_info, 5 s timeout) against --host:--port (paced: 1 s and 5 s x SGLANG_STANDIN_PACE, timeout >= 0.05 s),
        then POST /generate (timeout SGLANG_WARMUP_TIMEOUT, default 600). Any failure: `Initialization failed.
        warmup error: TRACEBACK`, kill_process_tree (status=9/KILL)."""
        if self.args.skip_server_warmup:
            self.status = UP
            self.freeze_gc()
            self.become_ready()
            return
        last = None
        for _attempt in range(120):
            time.sleep(1.0 * self.pace)
            try:
                status, data = self.request_self("GET", "/model_info", timeout=max(0.05, 5.0 * self.pace))
                if status == 200:
                    last = None
                    break
                last = signatures.warmup_poll_error("assert", self.args.port, (status, data))
            except socket.timeout:
                last = signatures.warmup_poll_error("timeout", self.args.port)
            except OSError:
                last = signatures.warmup_poll_error("refused", self.args.port)
        if last is not None:
            self.log.error("Initialization failed. warmup error: " + last)
            self.die("warmup_error")
        logfmt.event("phase", phase="warmup")  # the warmup generation (after the bind, as before)
        timeout = float(self.environ.get("SGLANG_WARMUP_TIMEOUT", "600"))
        try:
            if self.faults.crash_in("warmup") == "warmup_error":
                raise OSError("injected")
            status, data = self.request_self("POST", "/generate", {
                "text": "The capital city of France is",
                "sampling_params": {"temperature": 0, "max_new_tokens": 8}}, timeout=timeout if timeout > 0 else 600)
            if status != 200:
                raise OSError(data)
        except (OSError, socket.timeout):
            self.log.error(signatures.warmup_error() % {"port": self.args.port})
            self.die("warmup_error")
        self.status = UP
        self.freeze_gc()
        self.become_ready()

    def freeze_gc(self):
        """_freeze_gc_after_server_warmup (0.5.23 http_server.py:2551-2569): POST /freeze_gc, timeout 10 s; a failure
        (e.g. not bound yet when the warmup is skipped) is only a warning."""
        try:
            # 0.5.23 http_server.py:2556-2559: the admin key when there is one, else the API key
            self.request_self("POST", "/freeze_gc", timeout=10,
                              key=getattr(self.args, "admin_api_key", None) or self.args.api_key)
        except OSError as err:
            self.log.warning("post-warmup freeze_gc failed\n" + signatures.traceback_text(
                [signatures.sg("entrypoints/http_server.py", 2561, "_freeze_gc_after_server_warmup", "res = requests.post(")],
                "requests.exceptions.ConnectionError: %s" % err))

    def become_ready(self):
        # The event first: whoever sees the server answer as ready finds it already recorded (benchmarks measure
        # detection lag from it, tests read the event log right after the ready line).
        logfmt.event("ready", phase="ready")
        self.ready = True
        self.log.info("The server is fired up and ready to roll!")

    def model_card(self, name=None):
        """0.5.23 entrypoints/openai/protocol.py:87-96 ModelCard."""
        name = name or self.args.served_model_name
        return {"id": name, "object": "model", "created": int(time.time()), "owned_by": "sglang", "root": name,
                "parent": None, "max_model_len": self.context_len()}

    def context_len(self):
        return self.scheduler_info.get("context_len") or self.args.context_length or self.model.context_length

    def count_openai_request(self):
        """Count one /v1/chat/completions or /v1/completions request; True when the error_rate fault fails it: the
        k-th fails when floor(k*P) > floor((k-1)*P) (P as the decimal it was written, exactly: 0.1 is 1/10)."""
        with self.openai_lock:
            self.openai_requests += 1
            number = self.openai_requests
        if not self.faults.error_rate:
            return False
        rate = fractions.Fraction(repr(self.faults.error_rate))
        return math.floor(number * rate) > math.floor((number - 1) * rate)

    @property
    def in_flight(self):
        """Requests rank 0's scheduler holds now (what /metrics counts as running or queued)."""
        return len(self.client.rid_to_state) if self.client else 0


class Handler(BaseHTTPRequestHandler):
    launcher = None
    protocol_version = "HTTP/1.1"
    delivery_id = None  # the counted generation whose response is being sent
    aborted = False     # the error_rate fault fails the /v1 request being served
    server_version = "uvicorn"
    sys_version = ""
    access_log = True

    def log_message(self, fmt, *args):
        pass  # the access line is written by send_json/send_sse in uvicorn's format

    def access(self, status):
        client = "%s:%d" % self.client_address[:2]
        self.launcher.log.access(client, "%s %s HTTP/1.1" % (self.command, self.path), status, HTTPStatus(status).phrase)

    def send_body(self, status, body, content_type="application/json"):
        """One response; content_type None = starlette's bare Response (no content-type, e.g. /health, /ready)."""
        data = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()
        self.send_response_only(status)
        self.send_header("date", self.date_time_string())
        self.send_header("server", "uvicorn")
        self.send_header("content-length", str(len(data)))
        if content_type:
            self.send_header("content-type", content_type)
        self.end_headers()
        if self.access_log:
            self.access(status)  # uvicorn logs when the response starts
        self.wfile.write(data)
        self.wfile.flush()
        if self.delivery_id is not None:
            self.launcher.client.delivered(self.delivery_id)
            self.delivery_id = None

    def error(self, status, message, err_type="BadRequestError"):
        self.send_body(status, {"object": "error", "message": message, "type": err_type, "param": None, "code": status})

    def read_json(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw.decode("utf-8") or "{}")
        except ValueError as err:
            self.error(400, "JSON decode error: %s" % err)
            return None

    def authorized(self):
        """0.5.23 utils/auth.py:74-151 decide_request_auth and :192-204 (401 `{"error":"Unauthorized"}`): /health*,
        /ready*, /metrics* and OPTIONS are open (:98-106); an ADMIN_OPTIONAL route needs the admin key when one is
        set, and then not the API key, else the API key when one is set (:128-143); a NORMAL route needs the API key
        when one is set, the admin key never opens it (:145-151)."""
        api_key = self.launcher.args.api_key
        admin_key = getattr(self.launcher.args, "admin_api_key", None)
        if self.command == "OPTIONS" or self.path.startswith(UNGUARDED_PREFIXES):
            return True
        key = api_key
        if self.path.split("?", 1)[0] in ADMIN_OPTIONAL_PATHS:
            key = admin_key or api_key
        if not key:
            return True
        parts = self.headers.get("Authorization", "").split(" ", 1)
        if len(parts) == 2 and parts[0].lower() == "bearer" and hmac.compare_digest(parts[1].encode(), key.encode()):
            return True
        self.send_body(401, {"error": "Unauthorized"})
        return False

    def do_GET(self):
        if not self.authorized():
            return
        path = self.path.split("?", 1)[0]
        routes = {"/health": self.health, "/health_generate": self.health, "/ready": self.ready,
                  "/v1/models": self.models, "/model_info": self.model_info, "/get_model_info": self.model_info,
                  "/server_info": self.server_info, "/get_server_info": self.server_info, "/metrics": self.metrics}
        route = routes.get(path)
        if route:
            route()
        elif path.startswith("/v1/models/"):
            self.retrieve_model(urllib.parse.unquote(path[len("/v1/models/"):]))
        elif path == "/freeze_gc":
            self.freeze_gc()
        elif path in POST_ROUTES:
            self.send_body(405, {"detail": "Method Not Allowed"})
        else:
            self.send_body(404, {"detail": "Not Found"})

    def do_POST(self):
        if not self.authorized():
            return
        path = self.path.split("?", 1)[0]
        name = POST_ROUTES.get(path)
        if name:
            getattr(self, name)()
        else:
            self.send_body(404, {"detail": "Not Found"})

    # ---- status endpoints -------------------------------------------------------------------------------------
    def health(self):
        """0.5.23 entrypoints/http_server.py:720-790: 503 while draining (with a log line) or Starting; else a 1-token
        generation through the scheduler within SGLANG_HEALTH_CHECK_TIMEOUT (default 20 s), or 503 + UnHealthy."""
        launcher = self.launcher
        if launcher.gracefully_exit:
            launcher.log.info("Health check request received during shutdown. Returning 503.")
            self.send_body(503, b"", None)
            return
        if launcher.status == STARTING:
            self.send_body(503, b"", None)
            return
        path = self.path.split("?", 1)[0]
        if os.environ.get("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "1").lower() in ("0", "false") and path == "/health":
            self.send_body(200, b"", None)
            return
        timeout = float(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT", "20"))
        tic = time.time()
        launcher.install_running_handlers()
        result = launcher.client.submit("health", 1, 1, False, timeout=timeout, rid_prefix="HEALTH_CHECK_")
        if result is None and launcher.client.last_receive <= tic:
            launcher.log.error("Health check failed. Server couldn't get a response from detokenizer for last %d seconds. "
                               "tic start time: %s. last_heartbeat time: %s" % (
                                   timeout, time.strftime("%H:%M:%S", time.localtime(tic)),
                                   time.strftime("%H:%M:%S", time.localtime(launcher.client.last_receive))))
            launcher.status = UNHEALTHY
            self.send_body(503, b"", None)
            return
        launcher.status = UP
        self.send_body(200, b"", None)

    def ready(self):
        """0.5.23 entrypoints/http_server.py:714-718: empty body, 200 only when Up and not draining."""
        launcher = self.launcher
        self.send_body(200 if launcher.status == UP and not launcher.gracefully_exit else 503, b"", None)

    def retrieve_model(self, model):
        """0.5.23 entrypoints/http_server.py:2025-2047."""
        if model != self.launcher.args.served_model_name:
            self.send_body(404, {"error": {"message": "The model '%s' does not exist" % model,
                                           "type": "invalid_request_error", "param": "model",
                                           "code": "model_not_found"}})
            return
        self.send_body(200, self.launcher.model_card(model))

    def freeze_gc(self):
        self.send_body(200, b"Garbage collection frozen.\n", "text/plain; charset=utf-8")

    def models(self):
        self.send_body(200, {"object": "list", "data": [self.launcher.model_card()]})

    def model_info(self):
        launcher = self.launcher
        self.send_body(200, {
            "model_path": launcher.args.model_path, "tokenizer_path": launcher.args.tokenizer_path,
            "is_generation": True, "preferred_sampling_params": None, "weight_version": "default",
            "has_image_understanding": False, "has_audio_understanding": False,
            "model_type": launcher.model.config.get("model_type"), "architectures": launcher.model.config.get("architectures"),
            "served_model_name": launcher.args.served_model_name, "load_format": launcher.args.load_format,
            "reasoning_parser": launcher.args.reasoning_parser, "tool_call_parser": launcher.args.tool_call_parser,
            "disaggregation_mode": "null"})

    def server_info(self):
        # 0.5.23 entrypoints/http_server.py:863-891 + utils/common.py:3583-3593 (build_server_info): the resolved
        # fields (api_key included), `launch_command` (argv joined, `--api-key KEY` in it), the scheduler info.
        launcher = self.launcher
        info = launcher.args.resolved_dict()   # utils/common.py:3589: server_args.resolved_dict()
        info["launch_command"] = launcher.args.launch_command
        info.update({key: value for key, value in launcher.scheduler_info.items() if key != "type"})
        info["kv_events"] = None
        info.update({"startup_time": None, "version": SGLANG_VERSION, "frontend": "python",
                     "internal_states": [dict(launcher.scheduler_info, last_gen_throughput=0.0)]})
        self.send_body(200, info)

    # ---- generation ---------------------------------------------------------------------------------------------
    def check_serving(self, body):
        """No model check and no refusal while draining (0.5.23 entrypoints/openai/serving_chat.py,
        serving_completions.py; the drain, tokenizer_manager.py:3508-3540, lets requests in)."""
        return True

    def run_generation(self, prompt, prompt_tokens, max_tokens, thinking, counted):
        self.launcher.install_running_handlers()  # generate_request -> auto_create_handle_loop
        options = getattr(self, "gen_options", None) or {}
        result = self.launcher.client.submit(prompt, prompt_tokens, max_tokens, thinking, counted=counted, **options)
        if counted:
            self.delivery_id = result[2]
        return result[:2]

    def native_generate(self):
        body = self.read_json()
        if body is None:
            return
        text = body.get("text") or ""
        params = body.get("sampling_params") or {}
        prompt_tokens = generation.count_prompt_tokens(text)
        started = time.time()
        result = self.run_generation(text, prompt_tokens, params.get("max_new_tokens", 128), False, False)
        if result is None:
            return
        ids, finish = result
        slowdown = self.launcher.faults.decode_slowdown
        if slowdown and len(ids) > 1:
            # otherwise unpaced; under decode_slowdown every decoded token after the first takes F x TOKEN_SECONDS
            time.sleep(self.launcher.token_seconds * slowdown * (len(ids) - 1))
        finish_reason = {"type": "length", "length": len(ids)} if finish == "length" else {"type": "stop", "matched": generation.EOS}
        self.send_body(200, {"text": generation.detokenize(ids), "output_ids": ids, "meta_info": {
            "id": uuid.uuid4().hex, "finish_reason": finish_reason, "prompt_tokens": prompt_tokens,
            "completion_tokens": generation.counted(ids, finish), "cached_tokens": 0, "e2e_latency": time.time() - started}})

    # ---- the OpenAI endpoints: held in flight until the last byte, paced token by token, recorded ----------
    def serve_openai(self, produce):
        """Run `produce(body, record)` for one /v1 request while its rid is held (so the SIGTERM drain and
        /metrics count it until its last token is sent, as 0.5.23's rid_to_state does), then append what was served
        when to $SGLANG_STANDIN_REQUEST_LOG."""
        body = self.read_json()
        if body is None or not self.check_serving(body):
            return
        launcher = self.launcher
        state = "draining" if launcher.gracefully_exit else ("ready" if launcher.ready else "loading")
        record = {"path": self.path.split("?", 1)[0], "port": launcher.args.port, "pid": os.getpid(),
                  "client": "%s:%d" % self.client_address[:2], "stream": bool(body.get("stream")),
                  "start": time.time(), "state": state, "tokens_sent": 0, "completion_tokens": None,
                  "finish_reason": None, "completed": False, "tag": body.get("user"),
                  "request_id": self.headers.get("x-request-id")}
        self.aborted = launcher.count_openai_request()
        held = launcher.client.hold()
        self.gen_options = {"ignore_eos": bool(body.get("ignore_eos")), "held": held}
        try:
            produce(body, record)
        except (BrokenPipeError, ConnectionResetError):
            record["error"] = "client went away"
            self.close_connection = True
        finally:
            launcher.client.release(held)
            self.gen_options = None
            record["end"] = time.time()
            record["state_at_end"] = "draining" if launcher.gracefully_exit else state
            request_log(launcher.request_log, record)

    def paced(self, tokens, first=1):
        """SGLANG_STANDIN_TOKEN_SECONDS per decoded token (absolute, not multiplied by the pace), for the answer's tokens
        number `first` to `first + tokens - 1`. The degradation faults: decode_slowdown=F makes every token after the
        first (the first is the prefill's) take F times as long; collapse_above=N makes each token take
        (held / N) ** 2 times as long while more than N /v1 requests are held (looked up at each token)."""
        seconds = self.launcher.token_seconds
        if seconds <= 0 or tokens <= 0:
            return
        slowdown, limit = self.launcher.faults.decode_slowdown, self.launcher.faults.collapse_above
        if not slowdown and not limit:
            time.sleep(seconds * tokens)
            return
        for number in range(first, first + tokens):
            pace = seconds * (slowdown if slowdown and number > 1 else 1.0)
            held = self.launcher.client.held_count() if limit else 0
            if limit and held > limit:
                pace *= (float(held) / limit) ** 2
            time.sleep(pace)

    def abort_point(self, ids):
        """How many tokens the client gets before the error_rate fault's abort (None: no abort): the scheduler
        aborts the request halfway through its decoding (retract_decode runs before a decode step)."""
        return len(ids) // 2 if self.aborted else None

    def abort_answer(self, record):
        """A non-streamed request the scheduler aborted with 500 (0.5.23): the tokenizer manager raises
        fastapi.HTTPException(status_code=500, detail=message) for a non-stream abort with a status code
        (managers/tokenizer_manager.py:1891-1921, via :2041-2047), which handle_request turns into
        create_error_response(message=e.detail, err_type=str(e.status_code), status_code=e.status_code)
        (entrypoints/openai/serving_base.py:119-122, :205-221): HTTP 500, ORJSONResponse of ErrorResponse
        (entrypoints/openai/protocol.py:106-111), `type` the string "500"."""
        self.error(500, ABORT_MESSAGE, "500")
        record.update(finish_reason="abort", error=ABORT_MESSAGE, completed=True)

    @staticmethod
    def abort_event():
        """The same abort in a stream (entrypoints/openai/serving_chat.py:2561-2579, serving_completions.py:356-372):
        finish_reason abort with an HTTPStatus status_code (the AbortReq is pickled, so it stays one:
        scheduler_components/output_sender.py:29, managers/io_struct.py:2732-2737, environ.py:366
        SGLANG_USE_PICKLE_IPC default True) -> create_streaming_error_response(message,
        code.name, code.value) (serving_base.py:223-237: json.dumps, so `": "` and `", "`), then the loop breaks:
        no finish chunk; the usage chunk when asked; `data: [DONE]` (serving_chat.py:2805). The stream's HTTP status
        stays 200 (a StreamingResponse, serving_chat.py:2413-2439)."""
        error = {"object": "error", "message": ABORT_MESSAGE, "type": HTTPStatus.INTERNAL_SERVER_ERROR.name, "param": None,
                 "code": HTTPStatus.INTERNAL_SERVER_ERROR.value}
        return "data: %s\n\n" % json.dumps({"error": error})

    def chat_completions(self):
        self.serve_openai(self.produce_chat)

    def produce_chat(self, body, record):
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            self.error(400, "messages: Field required")
            return
        prompt, prompt_tokens = generation.chat_prompt(messages)
        kwargs = body.get("chat_template_kwargs") or {}
        reasoning = self.launcher.args.reasoning_parser
        thinking = bool(reasoning) and kwargs.get("thinking", kwargs.get("enable_thinking", True)) is not False
        max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
        result = self.run_generation(prompt, prompt_tokens, max_tokens, thinking, True)
        if result is None:
            return
        ids, finish = result
        record.update(completion_tokens=len(ids), finish_reason=finish)
        response = self.openai_envelope("chat.completion", prompt_tokens, generation.counted(ids, finish), body)
        abort = self.abort_point(ids)
        if abort is not None:
            record["completion_tokens"] = abort  # what it had generated when it was aborted
        if body.get("stream"):
            self.stream_chat(response, ids, finish, bool(reasoning), body, record, abort)
            return
        if abort is not None:
            self.paced(abort)
            self.abort_answer(record)
            return
        if reasoning:
            reasoning_content, content = generation.split_reasoning(ids)
        else:
            reasoning_content, content = None, generation.detokenize(ids).strip() or None
        message = {"role": "assistant", "content": content, "reasoning_content": reasoning_content, "tool_calls": None}
        response["choices"] = [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish,
                                "matched_stop": generation.EOS if finish == "stop" else None}]
        self.paced(len(ids))
        self.send_body(200, response)
        record.update(tokens_sent=len(ids), completed=True)

    def completions(self):
        self.serve_openai(self.produce_completion)

    def produce_completion(self, body, record):
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            prompt = " ".join(str(part) for part in prompt)
        if prompt is None:
            self.error(400, "prompt: Field required")
            return
        prompt_tokens = generation.count_prompt_tokens(prompt)
        max_tokens = body.get("max_tokens", 16)
        result = self.run_generation(prompt, prompt_tokens, max_tokens, False, True)
        if result is None:
            return
        ids, finish = result
        record.update(completion_tokens=len(ids), finish_reason=finish)
        response = self.openai_envelope("text_completion", prompt_tokens, generation.counted(ids, finish), body)
        abort = self.abort_point(ids)
        if abort is not None:
            record["completion_tokens"] = abort  # what it had generated when it was aborted
        if body.get("stream"):
            self.stream_completion(response, ids, finish, body, record, abort)
            return
        if abort is not None:
            self.paced(abort)
            self.abort_answer(record)
            return
        response["choices"] = [{"index": 0, "text": generation.detokenize(ids), "logprobs": None,
                                "finish_reason": finish, "matched_stop": generation.EOS if finish == "stop" else None}]
        self.paced(len(ids))
        self.send_body(200, response)
        record.update(tokens_sent=len(ids), completed=True)

    def openai_envelope(self, obj, prompt_tokens, completion_tokens, body):
        # `model` echoes the request's (protocol.py:368-371: default "default"), whatever name it is.
        return {"id": uuid.uuid4().hex, "object": obj, "created": int(time.time()), "model": body.get("model", "default"),
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens, "prompt_tokens_details": None}}

    # ---- server-sent events: one event per token, as 0.5.23 streams ------------------------------------------
    def start_stream(self):
        """starlette's StreamingResponse under uvicorn: chunked transfer, the access line when the response starts."""
        self.send_response_only(200)
        self.send_header("date", self.date_time_string())
        self.send_header("server", "uvicorn")
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        if self.access_log:
            self.access(200)

    def send_event(self, text):
        data = text.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_stream(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        if self.delivery_id is not None:
            self.launcher.client.delivered(self.delivery_id)
            self.delivery_id = None

    def stream_events(self, ids, first, token_event, final, usage, record, abort=None):
        """The first event at once (after the prefill), each token's event after its decode step (`token_event(i,
        token)`, i counting from 1, may return None: no event), the finish event (None: none), the usage event when
        asked (`usage()`, rendered after the tokens it counts), `data: [DONE]`. `abort` (the error_rate fault): only
        the first `abort` tokens, then the error event instead of the finish event (with no token before it, no first
        event either: the abort is the first output the serving layer gets)."""
        self.start_stream()
        if first is not None and abort != 0:
            self.send_event(sse(first))
        for count, token in enumerate(ids if abort is None else ids[:abort], 1):
            self.paced(1, count)
            event = token_event(count, token)
            if event is not None:
                self.send_event(sse(event))
            record["tokens_sent"] += 1
        if abort is not None:
            self.send_event(self.abort_event())
            record.update(finish_reason="abort", error=ABORT_MESSAGE)
        elif final is not None:
            self.send_event(sse(final))
        if usage is not None:
            self.send_event(usage())
        self.send_event("data: [DONE]\n\n")
        self.end_stream()
        record["completed"] = True

    def stream_usage(self, body):
        """(include_usage, continuous_usage_stats): 0.5.23 entrypoints/openai/utils.py:250-264 should_include_usage,
        with --stream-response-default-include-usage (stream_options.include_usage or it; continuous only when
        asked)."""
        options = body.get("stream_options") or {}
        default = bool(getattr(self.launcher.args, "stream_response_default_include_usage", False))
        if options:
            return bool(options.get("include_usage")) or default, bool(options.get("continuous_usage_stats"))
        return default, False

    def cached_details(self):
        """PromptTokensDetails (protocol.py:190-212) only with --enable-cache-report (usage_processor.py:75-83,
        serving_chat.py:834-841): the stand-in caches nothing, so 0."""
        return {"cached_tokens": 0} if getattr(self.launcher.args, "enable_cache_report", False) else None

    @staticmethod
    def usage_info(prompt_tokens, completion_tokens, reasoning_tokens=0, cached=None):
        """UsageInfo as 0.5.23 builds it (usage_processor.py:95-132, protocol.py:221-229), in its field order:
        completion_tokens_details only when there are reasoning tokens."""
        return {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
                "completion_tokens": completion_tokens, "prompt_tokens_details": cached,
                "reasoning_tokens": reasoning_tokens,
                "completion_tokens_details": {"reasoning_tokens": reasoning_tokens} if reasoning_tokens else None}

    def stream_chat(self, response, ids, finish, reasoning, body, record, abort=None):
        """0.5.23 entrypoints/openai/serving_chat.py:2441-2805 _generate_chat_stream: a first chunk with
        role "assistant" and content "" (:2587-2600), one chunk per token delta (content, or reasoning_content
        while thinking with a reasoning parser, :960-1050), a finish chunk with finish_reason and matched_stop
        (:2667-2686), the usage chunk with `choices: []` when asked (:2766-2797), `data: [DONE]` (:2805). Chunks are
        built like entrypoints/openai/sse_utils.py:52-100: a delta omits role/content when None but always has
        reasoning_content; the chunk omits usage when None. With stream_options.continuous_usage_stats each content
        or reasoning chunk (not the first or the finish one) carries the usage so far (:980-1000, :1030-1050).
        Reasoning tokens are counted as the scheduler does while a request is thinking
        (schedule_batch.py:2240-2259: every token up to and including the end-of-thinking one). After an abort
        (`abort`, the error_rate fault) the usage chunk counts what the abort's output states: the tokens so far, no
        prompt or reasoning tokens (managers/tokenizer_manager.py:3603-3628: _handle_abort_req's meta_info has none,
        completion_tokens the tokens so far; serving_chat.py:2498-2506 reads them with .get(..., 0))."""
        head = {"id": response["id"], "object": "chat.completion.chunk", "created": response["created"],
                "model": response["model"]}
        include_usage, continuous = self.stream_usage(body)
        prompt_tokens = response["usage"]["prompt_tokens"]
        cached = self.cached_details()

        def chunk(delta, finish_reason=None, matched_stop=None, usage=None):
            event = dict(head, choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason,
                                         "matched_stop": matched_stop}])
            if usage is not None:
                event["usage"] = usage
            return event

        thinking = [reasoning and bool(ids) and ids[0] >= 1000]
        reasoning_tokens = [0]

        def token_event(count, token):
            if thinking[0]:
                reasoning_tokens[0] += 1
            if token == generation.THINK_END:
                thinking[0] = False
                return None
            text = generation.token_text(token)
            if not text:
                return None
            usage = self.usage_info(prompt_tokens, count, reasoning_tokens[0], cached) if continuous else None
            if thinking[0]:
                return chunk({"reasoning_content": text}, usage=usage)
            return chunk({"reasoning_content": None, "content": text}, usage=usage)

        def usage_event():
            if abort is not None:
                usage = self.usage_info(0, abort, 0, cached)
            else:
                usage = self.usage_info(prompt_tokens, response["usage"]["completion_tokens"], reasoning_tokens[0], cached)
            return "data: %s\n\n" % json.dumps(dict(head, choices=[], usage=usage), separators=(",", ":"))

        final = chunk({"reasoning_content": None}, finish, generation.EOS if finish == "stop" else None)
        self.stream_events(ids, chunk({"reasoning_content": None, "role": "assistant", "content": ""}), token_event,
                           final, usage_event if include_usage else None, record, abort)

    def stream_completion(self, response, ids, finish, body, record, abort=None):
        """0.5.23 entrypoints/openai/serving_completions.py:225-504 _generate_completion_stream: one
        CompletionStreamResponse per decode step (:381-403; model_dump_json, so `usage: null`), its text the step's
        delta; the step that finishes carries the finish_reason and matched_stop (:381-392): with "length" the last
        token's own chunk, with "stop" the end-of-sequence step, whose delta is "". With
        stream_options.continuous_usage_stats every chunk has the usage so far without cached details (:395-401);
        the usage chunk when asked is dumped with exclude_none (:479-496); then `data: [DONE]` (:504). After an abort
        (the error_rate fault) the usage chunk counts the abort output's: the tokens so far, no prompt tokens
        (:262-266 read them with .get(..., 0))."""
        head = {"id": response["id"], "object": "text_completion", "created": response["created"],
                "model": response["model"]}
        include_usage, continuous = self.stream_usage(body)
        prompt_tokens = response["usage"]["prompt_tokens"]
        last = len(ids) if finish == "length" else None

        def chunk(count, text, finish_reason=None, matched_stop=None):
            usage = self.usage_info(prompt_tokens, count) if continuous else None
            return dict(head, choices=[{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason,
                                        "matched_stop": matched_stop}], usage=usage)

        def token_event(count, token):
            if count == last:
                return chunk(count, generation.token_text(token), "length")
            return chunk(count, generation.token_text(token))

        final = chunk(len(ids) + 1, "", "stop", generation.EOS) if finish == "stop" else None

        def usage_event():
            if abort is not None:
                whole = self.usage_info(0, abort, 0, self.cached_details())
            else:
                whole = self.usage_info(prompt_tokens, response["usage"]["completion_tokens"], 0, self.cached_details())
            usage = {key: value for key, value in whole.items() if value is not None}
            return "data: %s\n\n" % json.dumps(dict(head, choices=[], usage=usage), separators=(",", ":"))

        self.stream_events(ids, None, token_event, final, usage_event if include_usage else None, record, abort)


def sse(obj):
    return "data: %s\n\n" % json.dumps(obj, separators=(",", ":"))


def request_log(path, record):
    """One JSON line per /v1 request, for tests: what was served when, in what state."""
    logfmt.append_json_line(path, record)


class FollowerHandler(Handler):
    """The dummy health server of a node_rank >= 1 node (0.5.23 utils/common.py:3624-3667): /ping, /health,
    /health_generate answer 200 with an empty body; /metrics with --enable-metrics; everything else 404. uvicorn runs
    it at log level warning: no access lines."""
    access_log = False

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path in ("/ping", "/health", "/health_generate"):
            self.send_body(200, b"", None)
        elif path == "/metrics" and self.launcher.args.enable_metrics:
            self.send_body(200, b"", "text/plain; version=0.0.4; charset=utf-8")
        else:
            self.send_body(404, {"detail": "Not Found"})

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        self.send_body(405 if path in ("/ping", "/health", "/health_generate") else 404,
                       {"detail": "Method Not Allowed" if path in ("/ping", "/health", "/health_generate") else "Not Found"})


metrics_mod.instrument(Handler)  # /metrics, and the requests and generations that move it (metrics.py)


POST_ROUTES = {"/freeze_gc": "freeze_gc", "/generate": "native_generate", "/v1/chat/completions": "chat_completions", "/v1/completions": "completions"}


def main(argv):
    """`sglang serve ARGV` / `python -m sglang.launch_server ARGV` (0.5.23 launch_server.py:75-86)."""
    # looked up at call time, as launch_server.py's import is: a launcher may wrap it (the role's key shim does)
    args = flags.resolve(server_args_module.prepare_server_args(argv))  # exit 2 on bad flags (server_args.py:679)
    log = logfmt.Logger("")
    # Resolution errors are uncaught in the main process: launch_server.py's `finally` (0.5.23
    # sglang/launch_server.py:83-86) logs its kill_process_tree, then Python prints the traceback, exit 1.
    try:
        json.loads(args.json_model_override_args)
    except ValueError as err:
        kill_process_tree(log, [], include_parent=False)
        log.raw(signatures.json_override_error(args.json_model_override_args, err))
        return 1
    model, exists = model_dir.read_model(args.model_path)
    if model is None:
        kill_process_tree(log, [], include_parent=False)
        log.raw(signatures.config_missing(args.model_path, exists))
        return 1
    try:
        faults = faults_mod.load(os.environ)
        launcher = Launcher(args, model, faults, os.environ)
    except faults_mod.FaultError as err:
        log.raw("sglang-standin: %s" % err)
        return 2
    launcher.run()
    return 0
