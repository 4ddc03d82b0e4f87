# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one table of SGLang-version-specific knowledge used while waiting.

Startup phases (lenient patterns, stable names, human labels), fatal failure
signatures (pattern, short name, hint) and warnings known to be harmless.
Everything that depends on what a given SGLang release prints lives here, so a
new release means editing this file and its tests, nothing else.

Pure data and small helpers: no I/O, importable on Python 3.8+ on the managed
node and on the controller (a live progress display imports PHASES).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections import namedtuple

# The SGLang release this table was checked against (tests/conformance fetches exactly this wheel and holds every
# row below against its source). The one place for the SGLang pin.
RELEASE = '0.5.23'

# name: stable identifier other components rely on; label: for humans;
# pattern: compiled regex searched in a journal line (prefix included);
# stall_hint: what usually explains a stall in this phase.
Phase = namedtuple('Phase', ['name', 'label', 'pattern', 'stall_hint'])

# Ordered: a phase only ever moves forward within one run of the unit.
# Patterns are deliberately lenient (releases rename lines); they feed progress
# and stall detection only, never the readiness decision.
PHASES = (
    Phase('init', 'distributed init',
          re.compile(r'(?i)init(?:ialize)? torch distributed'),
          'Distributed init hangs when a rank cannot reach the others: check NCCL_* / GLOO_SOCKET_IFNAME, '
          '--dist-init-addr and that no other server holds the port range.'),
    Phase('weights', 'loading weights',
          re.compile(r'(?i)load(?:ing)? weights? begin|loading safetensors checkpoint shards|Load weight begin'),
          'Weight loading is bound by disk or network speed: check the model directory is local and readable, '
          'and raise stall_timeout for very large checkpoints on slow storage.'),
    Phase('kv_cache', 'allocating KV cache',
          re.compile(r'(?i)load weights? end|KV Cache is allocated|Memory pool end'),
          'KV cache allocation should take seconds: look for memory errors on the GPUs (nvidia-smi, dmesg).'),
    Phase('cuda_graph', 'capturing CUDA graphs',
          re.compile(r'(?i)captur\w*\b.*cuda graph|DeepGEMM JIT|Capturing batches'),
          'DeepGEMM/Triton JIT and CUDA graph capture can take 10-20 minutes on a cold cache: persist '
          '~/.cache/deep_gemm and ~/.triton across restarts, or raise stall_timeout.'),
    Phase('http_up', 'starting HTTP server',
          re.compile(r'Started server process|Waiting for application startup|Application startup complete|Uvicorn running on'),
          'The scheduler is up but the HTTP server did not finish starting: check the port is free.'),
    Phase('warmup', 'warming up',
          re.compile(r'"GET /model_info HTTP/1\.[01]"|"POST /generate HTTP/1\.[01]"|Prefill batch'),
          'The warmup request is stuck: SGLANG_WARMUP_TIMEOUT (default 600 s) bounds it; check the scheduler lines above.'),
    Phase('ready', 'ready',
          re.compile(r'The server is fired up and ready to roll'),
          ''),
)

PHASE_NAMES = tuple(p.name for p in PHASES)
_PHASE_INDEX = dict((p.name, i) for i, p in enumerate(PHASES))

# name: short identifier; pattern: regex searched in the line; hint: the fix a user
# needs (may use the pattern's named groups with str.format); generic: a marker that
# something failed without saying what (used only when nothing specific matched).
Signature = namedtuple('Signature', ['name', 'pattern', 'hint', 'generic'])

# Order is priority: when several signatures match lines of the failed run, the
# earliest row names the cause (root causes first, cascades and generic markers last).
FATAL_SIGNATURES = (
    Signature('python_headers',
              re.compile(r'fatal error: Python\.h: No such file or directory'),
              'Triton compiles a C helper at start-up and needs the Python headers: install python3-dev AND '
              'python3.X-dev for the Python version X of the server\'s venv.',
              False),
    Signature('compressed_tensors_too_old',
              re.compile(r"AttributeError:.*nvfp4_pack_quantized|'nvfp4-pack-quantized' is not a valid CompressionFormat"),
              'compressed-tensors is too old for this checkpoint (nvfp4-pack-quantized needs >= 0.10.0): install the '
              'version SGLang pins (0.5.23 pins compressed-tensors==0.18.0) in the server\'s venv.',
              False),
    Signature('unrecognized_arguments',
              re.compile(r'error: unrecognized arguments: (?P<args>.*)'),
              'This SGLang version does not know the flag(s) {args}: remove or rename them in the unit\'s command line.',
              False),
    Signature('bad_argument',
              re.compile(r'\S+: error: (?:argument \S+|the following arguments are required)'),
              'A flag has a wrong value or a required flag is missing: fix the unit\'s command line as the error says.',
              False),
    Signature('missing_module',
              re.compile(r"ModuleNotFoundError: No module named '(?P<module>[^']+)'"),
              'Python module {module} is missing from the server\'s venv: install it (or the SGLang extra that brings it).',
              False),
    Signature('model_path',
              re.compile(r"does not appear to have a file named|is not a local folder and is not a valid model identifier|"
                         r"Can't load the configuration of|No such file or directory: '[^']*config\.json'"),
              'The model could not be found: check --model-path points at a complete local checkpoint readable by the service user.',
              False),
    Signature('trust_remote_code',
              re.compile(r'requires you to execute the (?:configuration|modeling) file|set the option `trust_remote_code=True`'),
              'This model ships its own code: add --trust-remote-code to the server\'s flags.',
              False),
    Signature('no_kernel_image',
              re.compile(r'no kernel image is available for execution on the device'),
              'A CUDA binary was not built for this GPU architecture: install torch / sgl-kernel / SGLang builds for this GPU (e.g. sm_100/sm_103).',
              False),
    Signature('scheduler_oom_killed',
              re.compile(r'scheduler died during initialization \(exit code: -9\)'),
              'A scheduler was SIGKILLed (-9), usually by the kernel OOM killer on host RAM: check `journalctl -k | grep -i oom`, '
              'free host memory or lower the load-time memory use.',
              False),
    Signature('not_enough_memory',
              re.compile(r'Not enough memory\. Please try to increase --mem-fraction-static'),
              'GPU memory left for the KV cache is too small: raise --mem-fraction-static a little, lower --context-length, '
              'or use more GPUs (--tp-size).',
              False),
    Signature('cuda_oom',
              re.compile(r'CUDA out of memory|OutOfMemoryError'),
              'The GPUs ran out of memory: lower --mem-fraction-static (leaves room for activations and CUDA graphs) or '
              'lower the CUDA graph batch size (--cuda-graph-max-bs-decode).',
              False),
    Signature('cuda_graph_failed',
              re.compile(r'Capture cuda graph failed'),
              'CUDA graph capture failed (usually memory): lower --mem-fraction-static or the CUDA graph batch size '
              '(--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill), or run once with '
              '--cuda-graph-backend-decode=disabled to confirm.',
              False),
    Signature('warmup_failed',
              re.compile(r'Initialization failed\. warmup error'),
              'The server loaded but its first (warmup) request failed: read the warmup error; SGLANG_WARMUP_TIMEOUT bounds it.',
              False),
    Signature('port_in_use',
              re.compile(r'Port is already in use|is not available in \d+ seconds'),
              'Another process holds a port in SGLang\'s range (internal ports are derived from --port): stop the other '
              'server or choose another --port.',
              False),
    Signature('http_port_in_use',
              re.compile(r'\[Errno 98\].*address already in use'),
              'The HTTP port is taken by another process: find it with `ss -ltnp` and stop it, or change --port.',
              False),
    Signature('nccl',
              re.compile(r'NCCL WARN|NCCL error|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|ncclRemoteError|'
                         r'Watchdog caught collective operation timeout'),
              'NCCL failed: check the NCCL_* environment (on PCIe-only boxes NCCL_P2P_LEVEL / --enable-p2p-check / '
              'NCCL_P2P_DISABLE=1), NCCL_SOCKET_IFNAME and NCCL_IB_DISABLE.',
              False),
    # Generic markers: they say that something failed, the cause is elsewhere.
    Signature('scheduler_died',
              re.compile(r'scheduler died during initialization|scheduler is dead'),
              'A scheduler (one TP rank) died: its traceback above is the cause.',
              True),
    Signature('scheduler_exception',
              re.compile(r'Scheduler hit an exception'),
              'A scheduler (one TP rank) raised: the traceback that follows this line is the cause.',
              True),
    Signature('child_failed',
              re.compile(r'Received sigquit from a child process'),
              'SGLang stopped because a child process failed: the real cause is the traceback before this line.',
              True),
    Signature('init_failed',
              re.compile(r'Initialization failed\. Please see the error messages above'),
              'Start-up failed: the error messages above this line name the cause.',
              True),
)

_SIGNATURE_INDEX = dict((s.name, i) for i, s in enumerate(FATAL_SIGNATURES))

# Lines known to be harmless even though they contain alarming words; they never
# count as fatal and never appear in the failure excerpt.
BENIGN_PATTERNS = (
    re.compile(r'Setup Custom allreduce failed with CUDART error: peer access is not supported'),
    re.compile(r"(?i)custom all-?reduce.*disabled because it's not supported on more than two PCIe-only GPUs"),
    re.compile(r'Unexpected error during package walk: cutlass\.cute\.experimental'),
)

# SGLang's logging prefix: "[2026-05-30 14:39:28 TP1] ", "[2026-05-30 14:39:28 DP0 TP3 EP3] ",
# "[2026-05-30 14:39:28] " (main process). Lines without it are continuation lines
# (tracebacks, compiler output, uvicorn, tqdm).
LOG_PREFIX_RE = re.compile(r'^\[(?P<time>\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)(?: (?P<rank>[^\]]*))?\] ?')
# Other loggers writing whole lines of their own (uvicorn, python warnings, NCCL "host:pid:tid [n] NCCL ...").
OTHER_LOGGER_RE = re.compile(r'^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s|^\S+:\d+:\d+ \[\d+\] NCCL ')

# The line that means "a child failed, the cause is above".
SIGQUIT_RE = FATAL_SIGNATURES[_SIGNATURE_INDEX['child_failed']].pattern

# Secrets that SGLang itself prints (server_args=ServerArgs(... api_key='...')).
_SECRET_RES = (
    re.compile(r"(?P<key>\b(?:admin_)?api_key\s*=\s*)(?P<q>['\"])(?P<value>[^'\"]+)(?P=q)"),
    re.compile(r"(?P<key>--(?:admin-)?api-key[ =])(?P<q>['\"]?)(?P<value>[^\s'\"]+)(?P=q)"),
    re.compile(r"(?P<key>\b(?:hf_token|HF_TOKEN|token)\s*=\s*)(?P<q>['\"])(?P<value>[^'\"]+)(?P=q)"),
    re.compile(r"(?P<key>Authorization:\s*Bearer\s+)(?P<q>)(?P<value>\S+)"),
)
REDACTED = '********'
# SGLang flags whose value is a secret (argv words; the patterns above cover them inside printed lines).
SECRET_FLAGS = ('--api-key', '--admin-api-key', '--hf-token')


def phase_index(name):
    """Position of a phase in PHASES (-1 for None/unknown)."""
    return _PHASE_INDEX.get(name, -1)


def phase_by_name(name):
    """The Phase row for a name, or None."""
    idx = _PHASE_INDEX.get(name)
    return None if idx is None else PHASES[idx]


def phase_label(name):
    phase = phase_by_name(name)
    return phase.label if phase else 'before the first start-up phase'


def match_phase(line):
    """The latest Phase whose pattern matches the line, or None."""
    for phase in reversed(PHASES):
        if phase.pattern.search(line):
            return phase
    return None


def is_benign(line):
    return any(p.search(line) for p in BENIGN_PATTERNS)


def match_fatal(line):
    """(Signature, match) for the highest-priority fatal signature in the line, or (None, None).

    Known-harmless warnings never match.
    """
    if is_benign(line):
        return None, None
    for sig in FATAL_SIGNATURES:
        m = sig.pattern.search(line)
        if m:
            return sig, m
    return None, None


def signature_priority(name):
    return _SIGNATURE_INDEX.get(name, len(FATAL_SIGNATURES))


def signature_hint(sig, match=None):
    """The hint of a signature, filled with the pattern's named groups when it uses them."""
    if match is not None and match.groupdict():
        try:
            return sig.hint.format(**dict((k, (v or '').strip()) for k, v in match.groupdict().items()))
        except (KeyError, IndexError, ValueError):
            pass
    return sig.hint.replace('{', '').replace('}', '')


def strip_prefix(line):
    """Split SGLang's log prefix off: returns (rank or '', text). rank is '' for the main process."""
    m = LOG_PREFIX_RE.match(line)
    if not m:
        return None, line
    return (m.group('rank') or ''), line[m.end():]


def has_log_prefix(line):
    """True when the line starts a log record of its own (SGLang's or another logger's)."""
    return bool(LOG_PREFIX_RE.match(line) or OTHER_LOGGER_RE.match(line))


def redact(line, secrets=()):
    """Mask api keys and tokens in a line (given secret values and the patterns SGLang prints)."""
    for secret in secrets:
        if secret and len(secret) >= 4 and secret in line:
            line = line.replace(secret, REDACTED)
    for rx in _SECRET_RES:
        line = rx.sub(lambda m: m.group('key') + m.group('q') + REDACTED + m.group('q'), line)
    return line
