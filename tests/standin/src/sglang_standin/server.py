"""The main process of `python -m sglang.launch_server` (tokenizer manager + HTTP server), as SGLang 0.5.23 runs it.

Order (sglang.md "Startup order"): start one scheduler process per local TP rank, wait until all are ready
(the HTTP port refuses connections meanwhile), bind the port (uvicorn lines), warm up through the real
HTTP server, log `The server is fired up and ready to roll!`. Failures end like SGLang's kill_process_tree:
SIGKILL the children, then the main process itself (systemd: status=9/KILL).
"""
import hmac
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from http import HTTPStatus
from http.client import HTTPConnection
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sglang_standin import SGLANG_VERSION, faults as faults_mod, flags, generation, logfmt, model_dir, signatures
from sglang_standin import metrics as metrics_mod
from sglang_standin.scheduler import GPUS

DEFAULT_PHASE_SECONDS = {"init": 20.0, "weights": 300.0, "kv_cache": 5.0, "cuda_graph": 60.0, "warmup": 5.0}
UNGUARDED_PREFIXES = ("/health", "/ready", "/metrics")  # never need the api key
STARTING, UP, DRAINING = "Starting", "Up", "Draining"


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


def kill_tree(children, code_for_log=None):
    """SGLang's kill_process_tree(include_parent=True): SIGKILL every child, then this process."""
    for child in children:
        try:
            child.kill()
        except OSError:
            pass
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
            if msg.get("type") == "result":
                with self.lock:
                    slot = self.pending.pop(msg["id"], None)
                if slot:
                    slot["result"] = msg
                    slot["event"].set()
        # The scheduler is gone: requests sent to it stay unanswered (SGLang's tokenizer manager waits forever).

    def submit(self, prompt, prompt_tokens, max_tokens, thinking, counted=False, timeout=None):
        """(ids, finish_reason), or None on timeout / while the server drains with a dead scheduler."""
        slot = {"event": threading.Event(), "result": None}
        with self.lock:
            self.next_id += 1
            rid = self.next_id
            self.pending[rid] = slot
            self.launcher.in_flight += 1
        try:
            msg = {"type": "generate", "id": rid, "prompt": prompt, "prompt_tokens": prompt_tokens,
                   "max_tokens": max_tokens, "thinking": thinking, "counted": counted}
            try:
                with self.lock:
                    self.cmd_file.write(json.dumps(msg) + "\n")
                    self.cmd_file.flush()
            except (OSError, ValueError):
                pass  # dead scheduler: the request hangs like in SGLang
            deadline = None if timeout is None else time.monotonic() + timeout
            while not slot["event"].wait(0.2):
                if deadline is not None and time.monotonic() > deadline:
                    return None
                if self.launcher.status == DRAINING and self.proc.poll() is not None:
                    return None
            result = slot["result"] or {}
            return result["ids"], result["finish_reason"], rid
        finally:
            with self.lock:
                self.pending.pop(rid, None)
                self.launcher.in_flight -= 1


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
        self.status = STARTING
        self.in_flight = 0
        self.client = None
        self.httpd = None
        self.scheduler_info = {}
        self.created = int(time.time())
        self.shutting_down = False
        self.local_ranks = max(1, args.tp_size // max(1, args.nnodes))

    # ---- failure paths --------------------------------------------------------------------------------------
    def die(self, cause):
        """End a failed server: the tree and this process get SIGKILL (SGLang's kill_process_tree)."""
        logfmt.event("crash", phase="main", cause=cause)
        kill_tree(self.children)

    def on_sigquit(self, signum, frame):
        self.log.error(signatures.SIGQUIT_LINE)
        self.die("sigquit")

    def on_sigterm(self, signum, frame):
        if self.shutting_down:
            return
        self.shutting_down = True
        self.log.warning("SIGTERM received. signum=%d frame=None. Draining requests and shutting down..." % signum)
        self.status = DRAINING
        thread = threading.Thread(target=self.drain_and_exit, name="drain")
        thread.daemon = True
        thread.start()

    def drain_and_exit(self):
        """No drain timeout (as SGLang): wait for in-flight requests, stop the schedulers, exit 0."""
        logfmt.event("shutdown", phase="drain")
        if self.client is None:  # still loading: nothing to drain, schedulers are stopped at once
            for child in self.children:
                child.kill()
            os._exit(0)
        while self.in_flight > 0:
            time.sleep(0.05)
        for cmd in self.cmd_files:
            try:
                cmd.write(json.dumps({"type": "shutdown"}) + "\n")
                cmd.flush()
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 15
        for child in self.children:
            while child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if child.poll() is None:
                child.kill()
        logfmt.event("shutdown", phase="exit")
        os._exit(0)

    # ---- startup --------------------------------------------------------------------------------------------
    def run(self):
        signal.signal(signal.SIGQUIT, self.on_sigquit)
        signal.signal(signal.SIGTERM, self.on_sigterm)
        logfmt.event("start", phase="main", start_number=self.faults.start_number)
        self.log.info("server_args=ServerArgs(%s)" % ", ".join(
            "%s=%r" % item for item in sorted(flags.public_args(self.args).items())))
        if self.faults.crash_in("init") == "port_in_use":
            self.port_in_use()
        self.spawn_schedulers()
        self.wait_for_schedulers()
        if self.args.node_rank > 0:
            # Only node 0 serves HTTP; the others keep their schedulers running.
            while True:
                time.sleep(3600)
        self.serve_http()

    def port_in_use(self):
        nccl_port = self.args.port + 21
        for _attempt in range(3):
            self.log.warning("nccl_port %d: Port is already in use. You can kill the corresponding process or use "
                             "another port." % nccl_port)
            time.sleep(10 * self.pace)
        self.log.raw(signatures.port_unavailable("nccl_port", nccl_port))
        self.die("port_in_use")

    def spawn_schedulers(self):
        public = vars(self.args)
        sched_args = {key: public[key] for key in (
            "model_path", "tp_size", "disable_custom_all_reduce", "mem_fraction_static", "max_total_tokens",
            "cuda_graph_bs", "cuda_graph_max_bs", "cuda_graph_max_bs_decode", "disable_cuda_graph",
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
        time.sleep(0.5)  # under KillMode=control-group the SIGTERM reaching this process may still be on its way
        if self.shutting_down:  # stopped by SIGTERM: the drain thread exits 0
            while True:
                time.sleep(1)
        child = self.children[index]
        try:
            code = child.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self.log.error("Rank %d scheduler died during initialization (exit code: %s)" % (index, code))
        self.log.raw(signatures.init_failed())
        self.die("scheduler_died")

    def rendezvous(self):
        """torch.distributed's TCPStore at --dist-init-addr across --nnodes (single node: nothing to do)."""
        if self.args.nnodes <= 1:
            return
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
        """Keep the connection to the other node open, as NCCL's are: when that node's process dies, this one's
        next collective fails, so a multi-node server dies as a whole (and a waiter on any node sees it)."""
        peer = "%s<%d>" % conn.getpeername()[:2]

        def watch():
            conn.settimeout(None)
            try:
                while conn.recv(64):
                    pass
            except OSError:
                pass
            if self.shutting_down:
                return
            self.log.raw(signatures.main_traceback(signatures.LAUNCH_FRAMES, signatures.NCCL_REMOTE % {"peer": peer}))
            self.die("nccl_remote")

        thread = threading.Thread(target=watch, name="peer-%s" % peer)
        thread.daemon = True
        thread.start()

    # ---- HTTP -----------------------------------------------------------------------------------------------
    def serve_http(self):
        self.client = SchedulerClient(self, self.children[0], self.cmd_files[0], self.status_files[0])
        self.client.start_reader()
        self.log.uvicorn("Started server process [%d]" % os.getpid())
        self.log.uvicorn("Waiting for application startup.")
        self.log.uvicorn("Application startup complete.")
        handler = type("Handler", (Handler,), {"launcher": self})
        try:
            self.httpd = ThreadingHTTPServer((self.args.host, self.args.port), handler)
        except OSError as err:
            self.log.uvicorn_error("[Errno %d] error while attempting to bind on address (%r, %d): %s"
                                   % (err.errno, self.args.host, self.args.port, (err.strerror or "").lower()))
            self.die("http_bind")
        self.httpd.daemon_threads = True
        logfmt.event("http_bound", phase="http", port=self.args.port)
        self.log.uvicorn("Uvicorn running on http://%s:%d (Press CTRL+C to quit)" % (self.args.host, self.args.port))
        server_thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2}, name="http")
        server_thread.daemon = True
        server_thread.start()
        watchdog = threading.Thread(target=self.watch_children, name="watchdog")
        watchdog.daemon = True
        watchdog.start()
        self.warmup()
        while True:  # the main thread stays free for signal handlers
            time.sleep(1)

    def watch_children(self):
        """0.5.23's watchdog: a dead scheduler kills the tree (the zombie fault simulates an old release without it)."""
        if self.faults.zombie:
            return
        while True:
            for index, child in enumerate(self.children):
                if child.poll() is not None and not self.shutting_down:
                    time.sleep(0.5)  # a SIGTERM to the whole cgroup may be arriving too
                    if self.shutting_down:
                        return
                    self.log.error("Rank %d scheduler is dead. Please check if there are relevant logs." % index)
                    self.die("scheduler_dead")
            time.sleep(0.2)

    def request_self(self, method, path, body=None, timeout=600.0):
        host = self.args.host if self.args.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        conn = HTTPConnection(host, self.args.port, timeout=timeout)
        headers = {"Content-Type": "application/json"}
        if self.args.api_key:
            headers["Authorization"] = "Bearer " + self.args.api_key
        conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        response = conn.getresponse()
        data = response.read()
        conn.close()
        return response.status, data

    def warmup(self):
        """SGLang's _wait_and_warmup: GET /model_info, then a real /generate through the HTTP server."""
        if self.args.skip_server_warmup:
            self.become_ready()
            return
        logfmt.event("phase", phase="warmup")
        timeout = float(self.environ.get("SGLANG_WARMUP_TIMEOUT", "600"))
        try:
            self.request_self("GET", "/model_info", timeout=timeout)
            if self.faults.crash_in("warmup"):
                raise OSError("injected")
            status, data = self.request_self("POST", "/generate", {
                "text": "The capital city of France is",
                "sampling_params": {"temperature": 0, "max_new_tokens": 8}}, timeout=timeout)
            if status != 200:
                raise OSError(data)
        except (OSError, socket.timeout):
            self.log.error(signatures.warmup_error() % {"port": self.args.port})
            self.die("warmup_error")
        self.become_ready()

    def become_ready(self):
        if self.shutting_down:
            return
        # The event first: whoever sees the server answer as ready finds it already recorded (benchmarks measure
        # detection lag from it, tests read the event log right after the ready line).
        logfmt.event("ready", phase="ready")
        self.status = UP
        self.log.info("The server is fired up and ready to roll!")

    def model_card(self):
        return {"id": self.args.served_model_name, "object": "model", "created": self.created, "owned_by": "sglang",
                "root": self.args.served_model_name, "max_model_len": self.context_len()}

    def context_len(self):
        return self.scheduler_info.get("context_len") or self.args.context_length or self.model.context_length


class Handler(BaseHTTPRequestHandler):
    launcher = None
    protocol_version = "HTTP/1.1"
    delivery_id = None  # the counted generation whose response is being sent
    server_version = "uvicorn"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass  # the access line is written by send_json/send_sse in uvicorn's format

    def access(self, status):
        client = "%s:%d" % self.client_address[:2]
        self.launcher.log.access(client, "%s %s HTTP/1.1" % (self.command, self.path), status, HTTPStatus(status).phrase)

    def send_body(self, status, body, content_type="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response_only(status)
        self.send_header("date", self.date_time_string())
        self.send_header("server", "uvicorn")
        self.send_header("content-length", str(len(data)))
        self.send_header("content-type", content_type)
        self.end_headers()
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
        key = self.launcher.args.api_key
        if not key or self.path.startswith(UNGUARDED_PREFIXES):
            return True
        given = self.headers.get("Authorization", "")
        if hmac.compare_digest(given.encode(), ("Bearer " + key).encode()):
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
        launcher = self.launcher
        if launcher.status != UP:
            self.send_body(503, b"", "text/plain")
            return
        if self.path.startswith("/health_generate") or os.environ.get("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "1") != "0":
            timeout = float(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT", "20"))
            result = launcher.client.submit("health", 1, 1, False, timeout=timeout)
            if result is None:
                self.send_body(503, b"", "text/plain")
                return
        self.send_body(200, b"", "text/plain")

    def ready(self):
        if self.launcher.status == UP:
            self.send_body(200, {"status": "ready"})
        else:
            self.send_body(503, {"status": self.launcher.status.lower()})

    def models(self):
        self.send_body(200, {"object": "list", "data": [self.launcher.model_card()]})

    def model_info(self):
        launcher = self.launcher
        self.send_body(200, {
            "model_path": launcher.args.model_path, "tokenizer_path": launcher.args.tokenizer_path,
            "is_generation": True, "preferred_sampling_params": None, "weight_version": "default",
            "has_image_understanding": False, "has_audio_understanding": False,
            "model_type": launcher.model.config.get("model_type"), "architectures": launcher.model.config.get("architectures"),
            "served_model_name": launcher.args.served_model_name})

    def server_info(self):
        info = flags.public_args(self.launcher.args)
        info.update({"version": SGLANG_VERSION, "status": self.launcher.status,
                     "internal_states": [dict(self.launcher.scheduler_info, last_gen_throughput=0.0)]})
        self.send_body(200, info)

    # ---- generation ---------------------------------------------------------------------------------------------
    def check_serving(self, body):
        """Common checks of the OpenAI endpoints; returns False after sending an error."""
        launcher = self.launcher
        if launcher.status == DRAINING:
            self.error(503, "The server is shutting down.", "ServiceUnavailableError")
            return False
        model = body.get("model")
        served = launcher.args.served_model_name
        if model and model != served and model.split(":", 1)[0] != served:
            self.error(400, "The model `%s` does not exist. The served model name is `%s`." % (model, served))
            return False
        return True

    def run_generation(self, prompt, prompt_tokens, max_tokens, thinking, counted):
        result = self.launcher.client.submit(prompt, prompt_tokens, max_tokens, thinking, counted=counted)
        if result is None:
            self.error(500, "The scheduler died while the server was shutting down.", "InternalServerError")
            return None
        if counted:
            self.delivery_id = result[2]
        return result[:2]

    def native_generate(self):
        body = self.read_json()
        if body is None:
            return
        if self.launcher.status == DRAINING:
            self.error(503, "The server is shutting down.", "ServiceUnavailableError")
            return
        text = body.get("text") or ""
        params = body.get("sampling_params") or {}
        prompt_tokens = generation.count_prompt_tokens(text)
        started = time.time()
        result = self.run_generation(text, prompt_tokens, params.get("max_new_tokens", 128), False, False)
        if result is None:
            return
        ids, finish = result
        finish_reason = {"type": "length", "length": len(ids)} if finish == "length" else {"type": "stop", "matched": generation.EOS}
        self.send_body(200, {"text": generation.detokenize(ids), "output_ids": ids, "meta_info": {
            "id": uuid.uuid4().hex, "finish_reason": finish_reason, "prompt_tokens": prompt_tokens,
            "completion_tokens": len(ids), "cached_tokens": 0, "e2e_latency": time.time() - started}})

    def chat_completions(self):
        body = self.read_json()
        if body is None or not self.check_serving(body):
            return
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
        if reasoning:
            reasoning_content, content = generation.split_reasoning(ids)
        else:
            reasoning_content, content = None, generation.detokenize(ids).strip() or None
        message = {"role": "assistant", "content": content, "reasoning_content": reasoning_content, "tool_calls": None}
        response = self.openai_envelope("chat.completion", prompt_tokens, len(ids))
        response["choices"] = [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish,
                                "matched_stop": generation.EOS if finish == "stop" else None}]
        if body.get("stream"):
            delta = {"role": "assistant", "content": content, "reasoning_content": reasoning_content}
            self.send_sse(response, "chat.completion.chunk", {"index": 0, "delta": delta, "finish_reason": finish})
        else:
            self.send_body(200, response)

    def completions(self):
        body = self.read_json()
        if body is None or not self.check_serving(body):
            return
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
        text = generation.detokenize(ids)
        response = self.openai_envelope("text_completion", prompt_tokens, len(ids))
        response["choices"] = [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish,
                                "matched_stop": generation.EOS if finish == "stop" else None}]
        if body.get("stream"):
            self.send_sse(response, "text_completion", {"index": 0, "text": text, "finish_reason": finish})
        else:
            self.send_body(200, response)

    def openai_envelope(self, obj, prompt_tokens, completion_tokens):
        return {"id": uuid.uuid4().hex, "object": obj, "created": int(time.time()),
                "model": self.launcher.args.served_model_name,
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens, "prompt_tokens_details": None}}

    def send_sse(self, response, obj, choice):
        """A one-chunk event stream (whole answer in one delta), then the usage-less [DONE] marker."""
        chunk = {"id": response["id"], "object": obj, "created": response["created"], "model": response["model"],
                 "choices": [choice]}
        data = ("data: %s\n\ndata: [DONE]\n\n" % json.dumps(chunk)).encode()
        self.send_body(200, data, "text/event-stream; charset=utf-8")


POST_ROUTES = {"/generate": "native_generate", "/v1/chat/completions": "chat_completions", "/v1/completions": "completions"}
metrics_mod.instrument(Handler)  # /metrics, and the requests and generations that move it (metrics.py)


def main(argv, prog="launch_server.py"):
    args = flags.parse_args(argv, prog)  # exits 2 on bad flags, like SGLang
    log = logfmt.Logger("")
    try:
        json.loads(args.json_model_override_args)
    except ValueError as err:
        log.raw(signatures.json_override_error(args.json_model_override_args, err))
        return 1
    model, exists = model_dir.read_model(args.model_path)
    if model is None:
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
