"""Fault injection for tests: a tiny grammar read from the environment and a file at every start.

Items are separated by commas, semicolons, whitespace or newlines; `#` starts a comment (file only):
  crash@PHASE[:CAUSE]     fail in PHASE with CAUSE's real signature (default cause scheduler_exception)
  hang@PHASE              stop in PHASE: no more output, the process stays alive
  slow_warmup=SECONDS     the warmup generation takes SECONDS longer (absolute seconds, not paced)
  zombie                  after ready, the scheduler dies but HTTP stays up (an old release without the watchdog)
  exit_after_requests=N   rank 0's scheduler crashes right after answering the N-th client request
  crash_times=N           crash@, hang@, zombie and exit_after_requests apply to the first N starts only
                          (starts are counted in a counter file, see counter_path)

Degradations for the canary analysis tests (issue 26): a server that starts and answers, but worse. They are not
failure faults: crash_times leaves them in place.
  decode_slowdown=F       (float > 0) every decoded token after an answer's first (the first is the prefill's:
                          time to first token unchanged) takes F x SGLANG_STANDIN_TOKEN_SECONDS: /v1 chat and
                          completions, streamed or not, and /generate (otherwise unpaced); with TOKEN_SECONDS 0
                          there is nothing to scale
  answer_shift=N          (int >= 1) every generation's seed is salted with N: other tokens, the same lengths, the
                          same reasoning section (chat, completions, /generate, the warmup's, /health_generate's)
  error_rate=P            (0 < P <= 1) the k-th /v1/chat/completions or /v1/completions request since the start
                          fails when floor(k*P) > floor((k-1)*P), with the error 0.5.23 answers for a request
                          the scheduler aborts with 500 (server.py Handler.abort_answer); the warmup, health
                          checks and /generate are not counted
  collapse_above=N        (int >= 1) while more than N /v1 requests are held in flight, each of their tokens takes
                          (in_flight / N) ** 2 times its pace: aggregate throughput at 2N is half of that at N
"""
import math
import os
import re

PHASES = ("init", "weights", "kv_cache", "cuda_graph", "warmup")
# Which causes make sense where; the texts live in signatures.py.
CAUSES = {
    # missing_package: the main process' package check before any child (sglang-kernel too old); gpu_memory_unbalanced:
    # every rank but the one whose GPU another process holds memory on, right after `Init parallel ends`;
    # trust_remote_code: the checkpoint's tokenizer is its own code (K2.6's tokenization_kimi.py) and the start has no
    # --trust-remote-code: the main process' tokenizer manager refuses it (with the flag the fault does nothing);
    # no_gpu: the host shows the server no GPU, and the main process' argument resolution fails first, before any child
    "init": ("scheduler_exception", "nccl", "port_in_use", "oom_killer", "missing_package", "gpu_memory_unbalanced",
             "trust_remote_code", "no_gpu"),
    # other_rank: this node of a multi-node start (--nnodes >= 2) whose peer node never finishes loading: every local
    # rank loads, logs `Load weight end` and gives up at the post-load barrier (the peer's rendezvous is emulated)
    "weights": ("scheduler_exception", "oom", "oom_killer", "compressed_tensors_too_old", "other_rank"),
    "kv_cache": ("scheduler_exception", "oom", "oom_killer"),
    # capture_failed: a capture that fails on something other than memory (one rank's kernel faults)
    "cuda_graph": ("scheduler_exception", "oom", "nccl", "oom_killer", "capture_failed"),
    # the warmup's first output batch: the detokenizer process or the tokenizer manager raises on it, or its forward
    # never returns and the scheduler's watchdog fires (README "Fault grammar"), or the kernel's OOM killer takes rank 0's
    # scheduler in it (after the load: the subprocess watchdog's crash line, not the load's `scheduler died`)
    "warmup": ("warmup_error", "detokenizer_exception", "tokenizer_exception", "watchdog_timeout", "oom_killer"),
}
DEFAULT_CAUSE = {"warmup": "warmup_error"}


class FaultError(ValueError):
    """A fault spec the stand-in cannot parse: a test bug, reported loudly."""


class Faults(object):
    def __init__(self):
        self.crash = {}          # phase -> cause
        self.hang = set()        # phases
        self.slow_warmup = 0.0
        self.zombie = False
        self.exit_after_requests = None
        self.crash_times = None
        self.start_number = None
        # degradations (not failure faults: crash_times keeps them)
        self.decode_slowdown = None
        self.answer_shift = None
        self.error_rate = None
        self.collapse_above = None

    def crash_in(self, phase):
        return self.crash.get(phase)

    def hangs_in(self, phase):
        return phase in self.hang

    def as_dict(self):
        return {"crash": dict(self.crash), "hang": sorted(self.hang), "slow_warmup": self.slow_warmup,
                "zombie": self.zombie, "exit_after_requests": self.exit_after_requests,
                "crash_times": self.crash_times, "start_number": self.start_number,
                "decode_slowdown": self.decode_slowdown, "answer_shift": self.answer_shift,
                "error_rate": self.error_rate, "collapse_above": self.collapse_above}

    @classmethod
    def from_dict(cls, data):
        faults = cls()
        faults.crash = dict(data.get("crash", {}))
        faults.hang = set(data.get("hang", []))
        faults.slow_warmup = data.get("slow_warmup", 0.0)
        faults.zombie = data.get("zombie", False)
        faults.exit_after_requests = data.get("exit_after_requests")
        faults.crash_times = data.get("crash_times")
        faults.start_number = data.get("start_number")
        faults.decode_slowdown = data.get("decode_slowdown")
        faults.answer_shift = data.get("answer_shift")
        faults.error_rate = data.get("error_rate")
        faults.collapse_above = data.get("collapse_above")
        return faults


def _positive(item, value, kind, at_most=None):
    """`value` as `kind` (int or float), finite and > 0 (and <= at_most), else FaultError naming `item`."""
    try:
        number = kind(value)
    except ValueError as err:
        raise FaultError("bad number in %r" % item) from err
    if not math.isfinite(number) or number <= 0 or (at_most is not None and number > at_most):
        bounds = "0 < value <= %s" % at_most if at_most is not None else "value > 0"
        raise FaultError("%r is out of range (%s)" % (item, bounds))
    return number


def parse(text):
    faults = Faults()
    for item in re.split(r"[,;\s]+", text.strip()):
        if not item:
            continue
        if item.startswith("crash@") or item.startswith("hang@"):
            kind, rest = item.split("@", 1)
            phase, cause = (rest.split(":", 1) + [""])[:2]
            if phase not in PHASES:
                raise FaultError("unknown phase %r in %r (phases: %s)" % (phase, item, ", ".join(PHASES)))
            if kind == "hang":
                if cause:
                    raise FaultError("hang@ takes no cause: %r" % item)
                faults.hang.add(phase)
                continue
            cause = cause or DEFAULT_CAUSE.get(phase, "scheduler_exception")
            if cause not in CAUSES[phase]:
                raise FaultError("cause %r is not possible in phase %s (causes: %s)" % (cause, phase, ", ".join(CAUSES[phase])))
            faults.crash[phase] = cause
        elif item == "zombie":
            faults.zombie = True
        elif "=" in item:
            key, value = item.split("=", 1)
            if key == "decode_slowdown":
                faults.decode_slowdown = _positive(item, value, float)
                continue
            if key == "answer_shift":
                faults.answer_shift = _positive(item, value, int)
                continue
            if key == "error_rate":
                faults.error_rate = _positive(item, value, float, at_most=1)
                continue
            if key == "collapse_above":
                faults.collapse_above = _positive(item, value, int)
                continue
            try:
                if key == "slow_warmup":
                    faults.slow_warmup = float(value)
                elif key == "exit_after_requests":
                    faults.exit_after_requests = int(value)
                elif key == "crash_times":
                    faults.crash_times = int(value)
                else:
                    raise FaultError("unknown fault %r" % item)
            except ValueError as err:
                raise FaultError("bad number in %r" % item) from err
        else:
            raise FaultError("unknown fault %r" % item)
    return faults


def _strip_comments(text):
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def read_spec(environ):
    """The spec of this start: $SGLANG_STANDIN_FAULT plus the file $SGLANG_STANDIN_FAULT_FILE (missing file = none)."""
    parts = [environ.get("SGLANG_STANDIN_FAULT", "")]
    path = environ.get("SGLANG_STANDIN_FAULT_FILE")
    if path and os.path.exists(path):
        with open(path) as handle:
            parts.append(_strip_comments(handle.read()))
    return "\n".join(parts)


def counter_path(environ):
    if environ.get("SGLANG_STANDIN_COUNTER_FILE"):
        return environ["SGLANG_STANDIN_COUNTER_FILE"]
    if environ.get("SGLANG_STANDIN_STATE_DIR"):
        return os.path.join(environ["SGLANG_STANDIN_STATE_DIR"], "start_count")
    if environ.get("SGLANG_STANDIN_FAULT_FILE"):
        return environ["SGLANG_STANDIN_FAULT_FILE"] + ".count"
    return None


def count_start(environ):
    """Increment and return this start's number (1 = first start), or None without a counter file."""
    path = counter_path(environ)
    if not path:
        return None
    number = 0
    if os.path.exists(path):
        with open(path) as handle:
            content = handle.read().strip()
        number = int(content) if content.isdigit() else 0
    number += 1
    tmp = path + ".tmp%d" % os.getpid()
    with open(tmp, "w") as handle:
        handle.write("%d\n" % number)
    os.replace(tmp, path)
    return number


def load(environ):
    """Parse this start's faults, count the start, and drop the failure faults after crash_times starts."""
    faults = parse(read_spec(environ))
    faults.start_number = count_start(environ)
    if faults.crash_times is not None:
        if faults.start_number is None:
            raise FaultError("crash_times needs a counter file: set SGLANG_STANDIN_COUNTER_FILE, "
                             "SGLANG_STANDIN_STATE_DIR or SGLANG_STANDIN_FAULT_FILE")
        if faults.start_number > faults.crash_times:
            faults.crash = {}
            faults.hang = set()
            faults.zombie = False
            faults.exit_after_requests = None
    return faults
