# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every failure family a real K2.6 TP8 start meets first, through llmops.sglang.sglang_wait_ready on a fleet host
(issue 25): out of GPU memory at the weights (torch) and for the KV cache (SGLang), the HTTP port taken on the
listening path `sglang serve` uses, a dead detokenizer and a dead tokenizer manager, the scheduler's watchdog, a
missing and a truncated shard, a quantization config the installed compressed-tensors does not know, the warmup
request that fails (main process, `Initialization failed. warmup error`), NCCL failing at init (a rank's socket
connect refused: the raw NCCL WARN lines and torch's DistBackendError), the GPUs' free memory unbalanced across the
ranks, a CUDA graph capture that fails on something other than memory, an sglang-kernel older than the release's
check, K2.6's own processor code without --trust-remote-code, a scheduler SIGKILLed in the warmup, a host that shows
the server no GPU, node 0 of a two-node TP16 start whose peer node never finishes loading, and an internal port of
SGLang's range (nccl_port) held by another process.

Each case starts a TP8 unit of the stand-in that fails the way 0.5.23 does (its texts are held to the release's
format strings by tests/conformance/test_standin.py) and asserts what the waiter makes of it: the signature that
names the cause, its hint, a verdict well before the timeout (also where SGLang lives on after the fatal line), and
that the journal line the signature matched is what the release prints (the row's cited format string, rendered from
the release's source by tests/conformance/citations.py). Where 0.5.23 prints a SIGQUIT line after the cause (the
child's SIGQUIT to the main process: `Received sigquit from a child process` during the load, `SIGQUIT received. ...`
after the first request), the case also asserts that the waiter read that line, as child_failed, and still names
the cause: every SIGQUIT sender of 0.5.23 logs its own line first, so child_failed is a fallback that never wins.

Reuses test_wait_ready's host (gpu-02, with Python headers: the CUDA graph phase needs them), unit fixture and play;
units wr-fam-*, ports 31100-31199, checkpoints /models/wr-fam-* (removed at the end).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import sys
import time
from collections import namedtuple

import pytest

from server_helpers import make_model
# test_wait_ready's fixtures (pytest takes fixtures from the test module's namespace) and helpers
from test_wait_ready import events, gpu02, host_changes, make_unit, wait  # noqa: F401  pylint: disable=unused-import

from ansible_collections.llmops.sglang.plugins.module_utils import sglang_signatures as table

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'conformance'))
from citations import source_pattern  # noqa: E402  pylint: disable=wrong-import-position,import-error

TIMEOUT = 300           # the wait's deadline; every verdict must come long before it
EARLY = 60              # "early": at pace 0.01 a start takes ~4 s, the slowest family here (the watchdog) ~12 s
CHECKPOINTS = '/models/wr-fam-'
PREFIX = r'^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d%s\] '

# 0.5.23's two SIGQUIT lines of the main process: the launch phase's handler (entrypoints/engine.py:1976-1980) and the
# tokenizer manager's, in place from the first request on (managers/tokenizer_manager.py:2454-2459, :4072-4075; an
# asyncio loop handler, called without signum and frame).
LAUNCH_SIGQUIT = 'Received sigquit from a child process. It usually means the child failed.'
RUNNING_SIGQUIT = 'SIGQUIT received. signum=None, frame=None. It usually means one child failed.'

# id, fault, checkpoint damage, entry, signature, (cited origin, line) of the row's source the line must be,
# words its hint must hold, the last phase, the line of the process that logs it (regex on the journal), the
# stand-in's crash event cause; the main process' SIGQUIT line that follows the cause (None: 0.5.23 prints none),
# more arguments for the unit.
Family = namedtuple('Family', 'id fault damage entry signature cited hint_words phase process cause sigquit args',
                    defaults=(None, ''))
FAMILIES = [
    Family('cuda-oom-at-weights', 'crash@weights:oom', None, None, 'cuda_oom',
           ('torch (c10/cuda/CUDACachingAllocator.cpp)', None), ('--mem-fraction-static',), 'weights',
           PREFIX % r' TP\d' + r'Scheduler hit an exception: Traceback', 'oom', sigquit=LAUNCH_SIGQUIT),
    Family('kv-cache-not-enough-memory', 'crash@kv_cache:oom', None, None, 'not_enough_memory',
           ('model_executor/pool_configurator.py', 96), ('--mem-fraction-static', '--context-length'), 'kv_cache',
           PREFIX % r' TP\d' + r'Scheduler hit an exception: Traceback', 'oom', sigquit=LAUNCH_SIGQUIT),
    Family('http-port-taken-sglang-serve', None, None, 'sglang serve', 'http_port_in_use',
           ('asyncio (CPython 3.11) / uvloop create_server', None), ('port {port}', 'held by pid'), 'http_up',
           PREFIX % '' + r'ERROR: +\[Errno 98\] error while attempting to bind on address', 'http_bind'),
    Family('detokenizer-hit-an-exception', 'crash@warmup:detokenizer_exception', None, None, 'subprocess_exception',
           ('managers/detokenizer_manager.py', 566), ('DetokenizerManager', 'traceback'), 'warmup',
           PREFIX % '' + r'DetokenizerManager hit an exception: Traceback', 'detokenizer_exception', sigquit=RUNNING_SIGQUIT),
    Family('tokenizer-manager-hit-an-exception', 'crash@warmup:tokenizer_exception', None, None, 'subprocess_exception',
           ('managers/tokenizer_manager.py', 4043), ('TokenizerManager', 'traceback'), 'warmup',
           PREFIX % '' + r'TokenizerManager hit an exception: Traceback', 'tokenizer_exception'),
    Family('scheduler-watchdog-timeout', 'crash@warmup:watchdog_timeout', None, None, 'watchdog_timeout',
           ('utils/watchdog.py', 154), ('(Scheduler)', '--watchdog-timeout', 'NCCL'), 'warmup',
           PREFIX % ' TP0' + r'Scheduler watchdog timeout \(self\.watchdog_timeout=300, self\.soft=False\)$',
           'watchdog_timeout', sigquit=RUNNING_SIGQUIT),
    Family('shard-missing', None, 'rm', None, 'checkpoint_incomplete',
           ('model_loader/weight_utils.py', 802), ('shard is missing or cut short', 'model.safetensors.index.json'),
           'weights', PREFIX % r' TP\d' + r'Scheduler hit an exception: Traceback', 'missing_shard', sigquit=LAUNCH_SIGQUIT),
    Family('shard-truncated', None, 'truncate', None, 'checkpoint_incomplete',
           ('safetensors==0.8.0', None), ('shard is missing or cut short',), 'weights',
           PREFIX % r' TP\d' + r'Scheduler hit an exception: Traceback', 'corrupt_shard', sigquit=LAUNCH_SIGQUIT),
    Family('compressed-tensors-too-old-for-nvfp4', 'crash@weights:compressed_tensors_too_old', None, None,
           'compressed_tensors_too_old', ('enum (CPython 3.11)', None), ('compressed-tensors==', '0.10.0'), 'weights',
           PREFIX % r' TP\d' + r'Scheduler hit an exception: Traceback', 'compressed_tensors', sigquit=LAUNCH_SIGQUIT),
    Family('warmup-request-failed', 'crash@warmup:warmup_error', None, None, 'warmup_failed',
           ('entrypoints/http_server.py', 2533), ('warmup', 'SGLANG_WARMUP_TIMEOUT'), 'warmup',
           PREFIX % '' + r'Initialization failed\. warmup error: Traceback', 'warmup_error'),
    Family('nccl-at-init', 'crash@init:nccl', None, None, 'nccl',
           ('torch (distributed, NCCL result)', None), ('NCCL_P2P_LEVEL', 'NCCL_SOCKET_IFNAME'), 'init',
           PREFIX % r' TP\d' + r'Scheduler hit an exception: Traceback', 'nccl', sigquit=LAUNCH_SIGQUIT),
    # another process holds memory on one GPU: the other ranks refuse right after `Init parallel ends`, while the busy
    # rank, which passed the check, has gone on to `Load weight begin`
    Family('gpu-memory-unbalanced', 'crash@init:gpu_memory_unbalanced', None, None, 'gpu_memory_unbalanced',
           ('distributed/bootstrap.py', 445), ('nvidia-smi', 'stop it'), 'weights',
           PREFIX % r' TP[1-7]' + r'Scheduler hit an exception: Traceback', 'gpu_memory_unbalanced', sigquit=LAUNCH_SIGQUIT),
    # a capture that fails on something other than memory (cuda_oom outranks the OOM one)
    Family('cuda-graph-capture-failed', 'crash@cuda_graph:capture_failed', None, None, 'cuda_graph_failed',
           ('model_executor/runner/decode_cuda_graph_runner.py', 603), ('--cuda-graph-backend-decode=disabled',),
           'cuda_graph', PREFIX % r' TP\d' + r'Scheduler hit an exception: Traceback', 'capture_failed', sigquit=LAUNCH_SIGQUIT),
    # the main process' sglang-kernel check, before any child: no phase at all
    Family('sglang-kernel-too-old', 'crash@init:missing_package', None, None, 'missing_package',
           ('utils/common.py', 2430), ('install the one the message names',), None,
           r'^Exception: sglang-kernel is installed with version \S+, which is less than the minimum required',
           'missing_package'),
    # K2.6's processor and tokenizer are its own code: a unit without --trust-remote-code (the main process' tokenizer
    # manager, before any scheduler line)
    Family('custom-code-without-trust-remote-code', 'crash@init:trust_remote_code', None, None, 'trust_remote_code',
           ('transformers==5.19.0:transformers/dynamic_module_utils.py', 790), ('--trust-remote-code',), None,
           r'^ValueError: The repository \S+ contains custom code which must be executed to correctly load the model',
           'trust_remote_code'),
    # after the load the kernel's OOM killer takes a scheduler in the warmup's first forward: the subprocess watchdog
    Family('scheduler-killed-in-warmup', 'crash@warmup:oom_killer', None, None, 'subprocess_crashed',
           ('utils/watchdog.py', 217), ('-9 is SIGKILL', 'journalctl -k'), 'warmup',
           PREFIX % '' + r'Subprocess scheduler_0 \(pid=\d+\) crashed with exit code -9\. Triggering SIGQUIT',
           'oom_killer', sigquit=RUNNING_SIGQUIT),
    # a host that shows the server no GPU (no driver, CUDA_VISIBLE_DEVICES empty, /dev/nvidia* not visible to the
    # unit): `sglang serve` resolves its arguments before anything else and get_device() finds no accelerator
    # (arg_groups/serving_hook.py:652, utils/common.py:1121-1126): the main process' uncaught traceback, no phase
    Family('no-gpu-sglang-serve', 'crash@init:no_gpu', None, 'sglang serve', 'no_gpu', ('utils/common.py', 1125),
           ('nvidia-smi', 'driver', 'CUDA_VISIBLE_DEVICES', '/dev/nvidia*'), None,
           r'^RuntimeError: No accelerator \(CUDA, XPU, HPU, NPU, MUSA, MPS\) or platform plugin is available\.$',
           'no_gpu'),
    # node 0 of a two-node TP16 start (its 8 ranks) whose peer node never finishes loading: every rank here loads,
    # logs `Load weight end` (the waiter's kv_cache phase) and gives up at the post-load barrier after
    # UNBALANCED_MODEL_LOADING_TIMEOUT_S (480 s x pace, load_model_utils.py:56, :386-395); the row that points at the
    # other node's journal outranks each rank's `Scheduler hit an exception` and the SIGQUIT line
    Family('peer-node-never-loaded', 'crash@weights:other_rank', None, None, 'other_rank_failed',
           ('model_executor/model_runner_components/load_model_utils.py', 394), ('other node', 'journal'), 'kv_cache',
           PREFIX % r' TP[0-7]' + r'Scheduler hit an exception: Traceback', 'other_rank', sigquit=LAUNCH_SIGQUIT,
           args='--tp 16 --nnodes 2 --node-rank 0 --dist-init-addr 127.0.0.1:{dist_port}'),
    # an internal port derived from --port (here nccl_port, --port + 21) held by another process: PortArgs.init_new
    # waits 30 s (x pace) for it, logs the ports with logger.exception and raises, in the main process before any child
    Family('internal-port-taken', 'crash@init:port_in_use', None, None, 'port_in_use', ('server_args.py', 886),
           ('internal ports are derived from --port',), None,
           PREFIX % '' + r'Port is already in use\. dist_init_port=\d+ port_base=\d+', 'port_in_use'),
]
DAMAGE = {  # what an interrupted copy leaves: the index names a shard that is not there / a shard cut short
    'rm': 'rm {0}/model-00003-of-00004.safetensors',
    'truncate': 'truncate -s -100 {0}/model-00002-of-00004.safetensors',
}


@pytest.fixture(scope='module')
def checkpoints(fleet):
    """The damaged checkpoints made on gpu-02 (path by damage), removed at the end."""
    made = {}
    yield made
    for path in made.values():
        fleet.run(fleet.hosts[1], ['rm', '-rf', path])


def cited_pattern(sig, cited):
    origin, line = cited
    sources = [s for s in sig.sources if s.origin.startswith(origin) and (line is None or s.line == line)]
    assert len(sources) == 1, 'the table row %s cites %r once: %r' % (sig.name, cited, sig.sources)
    return source_pattern(sources[0])


@pytest.mark.parametrize('family', FAMILIES, ids=[f.id for f in FAMILIES])
def test_the_waiter_names_the_family(fleet, gpu02, make_unit, checkpoints, family):  # pylint: disable=redefined-outer-name
    port = 31100 + FAMILIES.index(family)
    name = 'wr-fam-%d' % FAMILIES.index(family)
    options = {}
    if family.damage:
        model = checkpoints.setdefault(family.damage, CHECKPOINTS + family.damage)
        make_model(fleet, gpu02, model)
        fleet.run(gpu02, DAMAGE[family.damage].format(model), check=True)
        options['model'] = model
    holder_unit = None
    if family.signature == 'http_port_in_use':
        holder_unit = 'wr-fam-holder-%d.service' % os.getpid()
        fleet.run(gpu02, 'systemd-run --unit %s python3 -m http.server %d --bind 127.0.0.1' % (holder_unit, port), check=True)
    try:
        if holder_unit:
            fleet.run(gpu02, 'for i in $(seq 50); do ss -ltn | grep -q "127.0.0.1:%d " && exit 0; sleep 0.2; done; exit 1'
                      % port, check=True)
        # pace 0.1 for the busy port: SGLang gives up ~120 x 1 s (x pace) after the bind error, a window the verdict
        # must not need; 0.01 elsewhere (a start in ~4 s, the watchdog's 300 s in 3 s)
        unit = make_unit(gpu02, name, port, fault=family.fault, pace='0.1' if holder_unit else '0.01',
                         entry=family.entry, args=family.args.format(dist_port=port + 50), **options)
        started = time.monotonic()
        outcome = wait(fleet, gpu02, unit, port, timeout=TIMEOUT, stall_timeout=60)
        took = time.monotonic() - started
    finally:
        if holder_unit:
            fleet.run(gpu02, 'systemctl stop %s; systemctl reset-failed %s' % (holder_unit, holder_unit))

    assert outcome.get('failed') is True and outcome['ready'] is False, outcome
    assert outcome['reason'] == 'unit_failed', outcome
    assert outcome['signature'] == family.signature, outcome
    # early: well before the deadline, measured by the module and around the whole play
    assert outcome['elapsed'] < EARLY and took < EARLY + 30, (took, outcome)
    # the last phase reached (none: the main process failed before any scheduler started)
    assert outcome.phase_names()[-1:] == ([family.phase] if family.phase else []), outcome

    # the line the signature matched, in the journal as the waiter read it, is the release's text
    sig = table.FATAL_SIGNATURES[table.signature_priority(family.signature)]
    matched = [(line, m) for line, (s, m) in ((line, table.match_fatal(line)) for line in outcome['journal'])
               if s is not None and s.name == family.signature]
    assert matched, outcome
    pattern = cited_pattern(sig, family.cited)
    released = [line for line, _m in matched if pattern.search(table.strip_prefix(line)[1])]
    assert released, 'no line matched by %s is %s:%s (%s):\n%s' % (
        family.signature, family.cited[0], family.cited[1], pattern.pattern, '\n'.join(line for line, _m in matched))
    # ... logged by the process 0.5.23 logs it from, with its prefix
    assert any(re.search(family.process, line) for line in outcome['journal']), outcome

    # the hint: the signature's own (filled from that line), actionable
    if family.signature == 'http_port_in_use':
        # the waiter found the process that holds the port: its hint names it (better than the row's general one)
        assert outcome['unit']['active_state'] == 'active', 'the verdict came after SGLang gave up: %s' % outcome
    else:
        assert outcome['hint'] in [table.signature_hint(sig, m) for _line, m in matched], outcome
        assert outcome['unit']['active_state'] == 'failed', outcome
    for words in family.hint_words:
        assert words.format(port=port) in outcome['hint'], (words, outcome)

    # the child's SIGQUIT to the main process, where 0.5.23 prints it: read (as child_failed), yet not the verdict
    quits = [line for line in outcome['journal'] if table.SIGQUIT_RE.search(line)]
    if family.sigquit:
        assert quits, 'no SIGQUIT line in the journal the waiter returned: %s' % outcome
        for line in quits:
            assert re.match(PREFIX % '', line) and table.strip_prefix(line)[1] == family.sigquit, (line, family.sigquit)
            assert table.match_fatal(line)[0].name == 'child_failed', line
        assert outcome['signature'] == family.signature != 'child_failed', outcome

    # the failure was provoked for real: the stand-in says so in its event log
    crashes = [e for e in events(fleet, gpu02, name) if e['event'] == 'crash']
    assert family.cause in [e.get('cause') for e in crashes], crashes
