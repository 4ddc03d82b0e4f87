# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The signature table against the exact lines SGLang prints (shared/reference/sglang.md)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import sglang_signatures as sig

# (line as printed, expected signature name). Lines from sglang.md's failure table, with the
# prefix SGLang adds where the line comes from its logger.
FATAL_LINES = [
    ('/tmp/tmpq3k1x9zd/cuda_utils.c:6:10: fatal error: Python.h: No such file or directory', 'python_headers'),
    ("AttributeError: type object 'CompressionFormat' has no attribute 'nvfp4_pack_quantized'", 'compressed_tensors_too_old'),
    ("ValueError: 'nvfp4-pack-quantized' is not a valid CompressionFormat", 'compressed_tensors_too_old'),
    # layers/quantization/compressed_tensors/compressed_tensors.py:862, a linear layer no scheme fits (0.5.23)
    ('NotImplementedError: No compressed-tensors compatible scheme was found.', 'compressed_tensors_too_old'),
    ('RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.', 'not_enough_memory'),
    ('[2026-05-30 14:39:28 TP2] Not enough memory. Please try to increase --mem-fraction-static.', 'not_enough_memory'),
    # mem_cache/kv_cache_configurator.py:3154, mamba_checkpoint_pool.py:358, unified_memory_pool.py:1564 (0.5.23)
    ('RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests. '
     'max_mamba_cache_size=0, mamba_ratio=2, resulting max_num_reqs=0. Try: (1) reduce --max-running-requests, '
     '(2) increase --mem-fraction-static, or (3) use GPUs with more memory.', 'not_enough_memory'),
    ('RuntimeError: int8 mamba checkpoint pool needs ~12.34GB but only 3.10GB HBM is free. Lower '
     '--int8-mamba-ckpt-size (currently 8) or --mem-fraction-static.', 'not_enough_memory'),
    ('RuntimeError: [unified-memory-pool] init_unified_swa_pools: byte budget 123 cannot fit ONE worst-case request '
     '(bs=1 floor 456 = full=400 + swa=56). A pool this size retract-livelocks at runtime. Raise --mem-fraction-static, '
     'lower the model context length, or reduce reserved memory.', 'not_enough_memory'),
    ('[2026-05-30 14:41:02 TP0] Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB', 'cuda_oom'),
    ('Exception: Capture cuda graph failed: an illegal memory access was encountered', 'cuda_graph_failed'),
    ('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 3 has a total capacity of 94.97 GiB',
     'cuda_oom'),
    ('[2026-05-30 14:39:30] Rank 3 scheduler died during initialization (exit code: -9)', 'scheduler_oom_killed'),
    ('[2026-05-30 14:39:30] Rank 0 scheduler died during initialization (exit code: 1)', 'scheduler_died'),
    ('[2026-05-30 14:39:28 TP1] Scheduler hit an exception: Traceback (most recent call last):', 'subprocess_exception'),
    ('[2026-05-30 14:39:28] Received sigquit from a child process. It usually means the child failed.', 'child_failed'),
    ('RuntimeError: Initialization failed. warmup error: Traceback (most recent call last):', 'warmup_failed'),
    ('[2026-05-30 14:36:11 TP0] Port is already in use', 'port_in_use'),
    ('RuntimeError: Port 30005 is not available in 30 seconds', 'port_in_use'),
    ('ERROR:    [Errno 98] error while attempting to bind on address (\'0.0.0.0\', 30001): address already in use',
     'http_port_in_use'),
    ('launch_server.py: error: unrecognized arguments: --foo', 'unrecognized_arguments'),
    ("launch_server.py: error: argument --tp-size/--tp: invalid int value: 'eight'", 'bad_argument'),
    ('gpu-01:1234:1290 [3] NCCL WARN Cuda failure \'invalid device ordinal\'', 'nccl'),
    ('torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, '
     'internal error - please report this issue to the NCCL developers, NCCL version 2.27.3', 'nccl'),
    ('ncclInternalError: Internal check failed.', 'nccl'),
    ('ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.', 'nccl'),
    ('[rank3]:[E530 14:52:10.123 ProcessGroupNCCL.cpp:616] Watchdog caught collective operation timeout: '
     'WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.', 'nccl'),
    ("ModuleNotFoundError: No module named 'sgl_kernel'", 'missing_module'),
    ('torch.AcceleratorError: CUDA error: no kernel image is available for execution on the device', 'no_kernel_image'),
]

BENIGN_LINES = [
    '[2026-05-30 14:36:16 TP3] Setup Custom allreduce failed with CUDART error: peer access is not supported',
    "[2026-05-30 14:36:16 TP0] Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs.",
    "[2026-05-30 14:36:16 TP0] Custom all-reduce is disabled because it's not supported on more than two PCIe-only GPUs",
    '[2026-05-30 14:36:05] Unexpected error during package walk: cutlass.cute.experimental',
]

# Start-up lines in order (sglang.md "Startup log lines, in order") and the phase each opens.
PHASE_LINES = [
    ('[2026-05-30 14:36:10 TP0] Init torch distributed begin.', 'init'),
    ('[2026-05-30 14:36:14 TP0] Init torch distributed ends. elapsed=3.91 s, mem usage=1.12 GB', 'init'),
    ('[2026-05-30 14:36:15 TP0] Load weight begin. avail mem=177.20 GB', 'weights'),
    ('[2026-05-30 14:39:01 TP0] Load weight end. elapsed=165.90 s, type=DeepseekV3ForCausalLM, avail mem=103.12 GB, '
     'mem usage=74.08 GB.', 'kv_cache'),
    ('[2026-05-30 14:39:05 TP0] KV Cache is allocated. #tokens: 1207680, KV size: 78.98 GB', 'kv_cache'),
    ('[2026-05-30 14:39:05 TP0] KV Cache is allocated. #tokens: 702336, K size: 30.12 GB, V size: 30.12 GB', 'kv_cache'),
    ('[2026-05-30 14:39:05 TP0] Memory pool end. avail mem=22.10 GB', 'kv_cache'),
    ('[2026-05-30 14:39:06 TP0] Entering DeepGEMM JIT Pre-Compile session. It may take a long time (typically 10-20 mins)',
     'cuda_graph'),
    ('[2026-05-30 14:39:06 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=21.90 GB', 'cuda_graph'),
    ('Capturing batches (bs=160 avail_mem=21.41 GB): 100%|##########| 23/23 [00:31<00:00,  1.37s/it]', 'cuda_graph'),
    ('[2026-05-30 14:40:02 TP0] Capture cuda graph end. Time elapsed: 56.12 s. mem usage=1.46 GB. avail mem=20.44 GB.', 'cuda_graph'),
    ('[2026-05-30 14:40:02 TP0] Capture target decode CUDA graph end. elapsed=12.01 s', 'cuda_graph'),
    ('[2026-05-30 14:40:03] INFO:     Started server process [48121]', 'http_up'),
    ('INFO:     Waiting for application startup.', 'http_up'),
    ('INFO:     Application startup complete.', 'http_up'),
    ('INFO:     Uvicorn running on http://0.0.0.0:30001 (Press CTRL+C to quit)', 'http_up'),
    ('[2026-05-30 14:40:04] INFO:     127.0.0.1:53512 - "GET /model_info HTTP/1.1" 200 OK', 'warmup'),
    ('[2026-05-30 14:40:04 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00', 'warmup'),
    ('[2026-05-30 14:40:05] INFO:     127.0.0.1:53514 - "POST /generate HTTP/1.1" 200 OK', 'warmup'),
    ('[2026-05-30 14:40:05] The server is fired up and ready to roll!', 'ready'),
]

NEUTRAL_LINES = [
    "[2026-05-30 14:36:02] server_args=ServerArgs(model_path='/root/models/Kimi-K2.6', skip_server_warmup=False, "
    "quantization_config={'format': 'nvfp4-pack-quantized'})",
    '[2026-05-30 14:39:06 TP0] max_total_num_tokens=1207680, chunked_prefill_size=8192, max_running_requests=2048, context_len=262144',
    'Loading safetensors checkpoint shards:  50% Completed | 32/64 [01:20<01:20,  2.51s/it]',
]


@pytest.mark.parametrize('line,name', FATAL_LINES)
def test_fatal_lines_match_their_signature(line, name):
    found, match = sig.match_fatal(line)
    assert found is not None, line
    assert found.name == name
    assert match is not None
    assert sig.signature_hint(found, match)


@pytest.mark.parametrize('line', BENIGN_LINES)
def test_benign_warnings_are_not_fatal(line):
    assert sig.is_benign(line)
    assert sig.match_fatal(line) == (None, None)


@pytest.mark.parametrize('line', NEUTRAL_LINES)
def test_neutral_lines_are_not_fatal(line):
    assert sig.match_fatal(line) == (None, None)


@pytest.mark.parametrize('line,phase', PHASE_LINES)
def test_phase_lines(line, phase):
    found = sig.match_phase(line)
    assert found is not None, line
    assert found.name == phase


def test_phase_table_api():
    names = [p.name for p in sig.PHASES]
    assert names == ['init', 'weights', 'kv_cache', 'cuda_graph', 'http_up', 'warmup', 'ready']
    assert sig.PHASE_NAMES == tuple(names)
    for p in sig.PHASES:
        assert p.label and p.pattern.search and isinstance(p.stall_hint, str)
    assert sig.phase_by_name('weights').label == 'loading weights'
    assert sig.phase_index('ready') == 6 and sig.phase_index(None) == -1
    assert sig.phase_label(None) == 'before the first start-up phase'


def test_signature_names_unique_and_hinted():
    names = [s.name for s in sig.FATAL_SIGNATURES]
    assert len(names) == len(set(names))
    for s in sig.FATAL_SIGNATURES:
        assert s.hint


def test_hints_name_the_fix():
    s, m = sig.match_fatal('launch_server.py: error: unrecognized arguments: --foo --bar 3')
    assert "--foo --bar 3" in sig.signature_hint(s, m)
    s, m = sig.match_fatal('/tmp/x/cuda_utils.c:6:10: fatal error: Python.h: No such file or directory')
    assert 'python3-dev' in sig.signature_hint(s, m)
    s, m = sig.match_fatal("ValueError: 'nvfp4-pack-quantized' is not a valid CompressionFormat")
    assert '0.10.0' in sig.signature_hint(s, m)
    s, m = sig.match_fatal('torch.OutOfMemoryError: CUDA out of memory.')
    assert 'mem-fraction-static' in sig.signature_hint(s, m)
    s, m = sig.match_fatal("ModuleNotFoundError: No module named 'sgl_kernel'")
    assert 'sgl_kernel' in sig.signature_hint(s, m)


def test_specific_signatures_rank_before_generic_ones():
    generic = [i for i, s in enumerate(sig.FATAL_SIGNATURES) if s.generic]
    specific = [i for i, s in enumerate(sig.FATAL_SIGNATURES) if not s.generic]
    assert max(specific) < min(generic)
    assert sig.signature_priority('python_headers') < sig.signature_priority('nccl') < sig.signature_priority('child_failed')


def test_strip_prefix():
    assert sig.strip_prefix('[2026-05-30 14:39:28 TP1] Load weight begin.') == ('TP1', 'Load weight begin.')
    assert sig.strip_prefix('[2026-05-30 14:39:28 DP0 TP3 EP3] x') == ('DP0 TP3 EP3', 'x')
    assert sig.strip_prefix('[2026-05-30 14:39:28] main') == ('', 'main')
    assert sig.strip_prefix('  File "x.py", line 1') == (None, '  File "x.py", line 1')
    assert sig.has_log_prefix('INFO:     Started server process [1]')
    assert not sig.has_log_prefix('RuntimeError: boom')


def test_redact():
    line = "[2026-05-30 14:36:02] server_args=ServerArgs(api_key='sk-abc123', admin_api_key=\"adm-9\", port=30001)"
    out = sig.redact(line)
    assert 'sk-abc123' not in out and 'adm-9' not in out
    assert "api_key='********'" in out
    assert 'sk-xyz' not in sig.redact('ExecStart=... --api-key sk-xyz --port 1')
    assert 'TOPSECRET' not in sig.redact('custom TOPSECRET shown', secrets=['TOPSECRET'])
    assert sig.redact('nothing to hide') == 'nothing to hide'


# ---- SGLang 0.5.23 as it really prints (file:line in the 0.5.23 wheel, under sglang/srt/; tests/conformance checks
# each row's cited lines against the wheel itself). Each of these fails on the table before it was held to 0.5.23.

REAL_0523_PHASE_LINES = [
    ('[2026-05-30 14:36:10 TP0] Init parallel begin.', 'init'),                       # distributed/bootstrap.py:115
    ('[2026-05-30 14:36:14 TP0] Init parallel ends. elapsed=3.91 s', 'init'),         # distributed/bootstrap.py:190
    ('[2026-05-30 14:39:01 TP0] Load weight end. elapsed=165.90 s, type=KimiK25ForConditionalGeneration, '
     'quant=compressed-tensors, avail mem=103.12 GB, mem usage=74.08 GB.', 'kv_cache'),  # model_runner.py:1373
    ('[2026-05-30 14:39:05 TP0] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 1207680, KV size: 78.98 GB',
     'kv_cache'),                                                                      # mem_cache/memory_pool.py:2096
    ('[2026-05-30 14:39:06 TP0] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, '
     'avail mem=21.90 GB', 'cuda_graph'),                                              # cuda_graph_setup.py:759
    ('[2026-05-30 14:39:40 TP0] Capture target prefill CUDA graph begin. backend=breakable, num_tokens=8192, '
     'avail mem=20.10 GB', 'cuda_graph'),                                              # cuda_graph_setup.py:685
]


@pytest.mark.parametrize('line,phase', REAL_0523_PHASE_LINES)
def test_real_0523_phase_lines(line, phase):
    found = sig.match_phase(line)
    assert found is not None and found.name == phase, line
    assert sig.match_fatal(line) == (None, None)


REAL_0523_FATAL_LINES = [
    # argparse with prog "sglang serve" (server_args.py:679): an abbreviation that 0.5.23 made ambiguous
    ('sglang serve: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, '
     '--cuda-graph-max-bs-prefill', 'bad_argument'),
    # utils/watchdog.py:217 after the load (a scheduler SIGKILLed by the OOM killer leaves no traceback)
    ('[2026-05-30 15:02:11] Subprocess scheduler_3 (pid=48133) crashed with exit code -9. Triggering SIGQUIT for '
     'cleanup...', 'subprocess_crashed'),
    # managers/tokenizer_manager.py:4074, the running phase's SIGQUIT handler
    ('[2026-05-30 15:02:11] SIGQUIT received. signum=None, frame=None. It usually means one child failed.',
     'child_failed'),
    # entrypoints/engine.py:2005-2010, raised uncaught (the process exits 1)
    ('RuntimeError: Rank 3 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), a '
     'common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.', 'scheduler_oom_killed'),
    ('RuntimeError: Rank 0 scheduler died during initialization (exit code: 1). If exit code is -9 (SIGKILL), a '
     'common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.', 'scheduler_died'),
    # model_executor/runner/prefill_cuda_graph_runner.py:521
    ('RuntimeError: Capture prefill CUDA graph failed: an illegal memory access was encountered', 'cuda_graph_failed'),
    # transformers 5.19.0 (the pin of 0.5.23): dynamic_module_utils.py:703 and :790
    ('ValueError: Loading this model requires you to execute custom code contained in the model repository on your '
     'local machine. Please set the option `trust_remote_code=True` to permit loading of this model.',
     'trust_remote_code'),
    ('Please pass the argument `trust_remote_code=True` to allow custom code to be run.', 'trust_remote_code'),
    # model_executor/model_runner_components/load_model_utils.py:393-395, the last line of the traceback that follows
    # a rank's "Scheduler hit an exception" after 480 s at the post-load barrier
    ("ValueError: TP rank 5 could finish the model loading, but there are other ranks that didn't finish loading. It "
     "is likely due to unexpected failures (e.g., OOM) or a slow node.", 'other_rank_failed'),
]


@pytest.mark.parametrize('line,name', REAL_0523_FATAL_LINES)
def test_real_0523_fatal_lines(line, name):
    found, _match = sig.match_fatal(line)
    assert found is not None and found.name == name, line


def test_after_load_crash_hint_names_the_exit_code():
    found, match = sig.match_fatal('[2026-05-30 15:02:11] Subprocess scheduler_3 (pid=48133) crashed with exit code -9. '
                                   'Triggering SIGQUIT for cleanup...')
    hint = sig.signature_hint(found, match)
    assert 'scheduler_3' in hint and '-9' in hint and 'OOM' in hint
    assert found.generic and sig.SIGQUIT_RE.search('SIGQUIT received. signum=None, frame=None. It usually means one '
                                                   'child failed.')


def test_busy_http_port_outranks_the_warmup_that_fails_because_of_it():
    # uvicorn fails at once; the warmup thread polls /model_info 120 x 1 s (http_server.py:2370-2379) and then logs
    # http_server.py:2384. The port is the cause, the warmup the cascade.
    assert sig.signature_priority('http_port_in_use') < sig.signature_priority('warmup_failed')


def test_hints_name_no_ambiguous_or_deprecated_flag():
    # --cuda-graph-max-bs is ambiguous in 0.5.23 (arg_groups/fields/exec_.py:629-634), --disable-cuda-graph
    # deprecated (server_args.py:410-415), --tp an abbreviation; tests/conformance checks each hint flag for real.
    import re
    for row in list(sig.FATAL_SIGNATURES) + list(sig.PHASES):
        text = getattr(row, 'hint', None) or getattr(row, 'stall_hint', '')
        assert not re.search(r'--cuda-graph-max-bs(?![-\w])|--disable-cuda-graph|--tp(?![-\w])', text), row.name


# Start-up warnings (printed by the main process before distributed init) that only mention CUDA graphs or DeepGEMM:
# they must not open the cuda_graph phase, which would hide init, weights and kv_cache and their stall hints.
NOT_A_PHASE_0523 = [
    # arg_groups/cuda_graph_hook.py:299, DeepSeek-V3 architecture on the trtllm_mla backend (inventories/b300)
    '[2026-05-30 14:36:03] Disabling prefill CUDA graph (breakable) by default for the DeepSeek-V3 arch on the trtllm_mla '
    'attention backend (a captured prefill graph forces a FlashAttention fallback that regresses prefill). Set the '
    'prefill cuda graph backend explicitly (e.g. --cuda-graph-backend-prefill breakable) to override.',
    # arg_groups/serving_hook.py:486
    '[2026-05-30 14:36:03] Disabling SGLANG_OPT_FP8_WO_A_GEMM: requires DeepGEMM JIT and a compatible sm100/sm120 '
    'build, or explicit opt-in on sm90; detected sm103.',
]


@pytest.mark.parametrize('line', NOT_A_PHASE_0523)
def test_startup_warnings_open_no_phase(line):
    assert sig.match_phase(line) is None
    assert sig.match_fatal(line) == (None, None)


def test_every_capture_failure_is_cuda_graph_failed():
    # speculative/frozen_kv_mtp_cuda_graph_runner.py:198
    found, _match = sig.match_fatal('Exception: Capture frozen-KV MTP cuda graph failed: CUDA error: out of memory')
    assert found.name == 'cuda_oom'  # the memory error in it outranks the capture
    found, _match = sig.match_fatal('Exception: Capture frozen-KV MTP cuda graph failed: illegal memory access')
    assert found.name == 'cuda_graph_failed'


# utils/watchdog.py:150-164 (0.5.23): a hard watchdog (the scheduler's, --watchdog-timeout) SIGQUITs its parent 5 s
# after its line; a soft one (the tokenizer and detokenizer managers', --soft-watchdog-timeout) only logs: a warning.
@pytest.mark.parametrize('line,name', [
    ('[2026-05-30 15:07:42 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)', 'watchdog_timeout'),
    ('[2026-05-30 15:07:42 TP3] Scheduler watchdog timeout (self.watchdog_timeout=600.0, self.soft=False)', 'watchdog_timeout'),
    ('[2026-05-30 15:07:42] TokenizerManager watchdog timeout (self.watchdog_timeout=60.0, self.soft=True)', None),
    ('[2026-05-30 15:07:42] DetokenizerManager watchdog timeout (self.watchdog_timeout=60.0, self.soft=True)', None),
    ('[2026-05-30 15:07:42 TP0] Scheduler watchdog timeout (self.watchdog_timeout=60.0, self.soft=True)', None),
])
def test_only_a_hard_watchdog_is_a_cause(line, name):
    found, match = sig.match_fatal(line)
    assert (found and found.name) == name, line
    if name:
        hint = sig.signature_hint(found, match)
        assert '(Scheduler)' in hint and '--watchdog-timeout' in hint
        # on a systemd unit the release's py-spy dump fails (not on PATH): the hint says so and how to get one
        assert 'PATH' in hint and "venv's `py-spy dump` on the hung process" in hint


# Texts no row reads any more (issue 25): what the waiter cannot meet in a start of 0.5.23.
# entrypoints/engine.py:2030-2033 raises it for a scheduler pipe message whose status is not "ready", and every sender
# sends "ready" (managers/scheduler.py:1944, managers/data_parallel_controller.py:986-987).
# managers/detokenizer_manager.py:386: a crash while serving (no collection reader watches a serving server's journal);
# its text names its fix, the waiter would show it as the traceback's last line under the detokenizer's exception.
@pytest.mark.parametrize('line', [
    'RuntimeError: Initialization failed. Please see the error messages above.',
    'RuntimeError: Decode status not found for request 3f2a9c1e0b4d. It may be due to the request being evicted from '
    'the decode status due to memory pressure. Please increase the maximum number of requests by setting the '
    'SGLANG_DETOKENIZER_MAX_STATES environment variable to a bigger value than the default value. The current value is '
    '65536. For more details, see: https://github.com/sgl-project/sglang/issues/2812',
])
def test_texts_the_waiter_cannot_meet_have_no_row(line):
    assert sig.match_fatal(line) == (None, None)
    names = set(row.name for row in sig.FATAL_SIGNATURES)
    assert not names & set(['init_failed', 'detokenizer_state_evicted'])


def test_a_rank_left_at_the_post_load_barrier_outranks_its_own_exception_line():
    # load_model_utils.py:393 is raised inside a scheduler: its "Scheduler hit an exception" (generic) always comes
    # with it, and the SIGQUIT line after. The row that says where the cause is (another rank, another node) wins;
    # every specific row still outranks it (a rank of this node that failed for a known reason names that reason).
    order = [sig.signature_priority(name) for name in
             ('other_rank_failed', 'scheduler_died', 'subprocess_exception', 'subprocess_crashed', 'child_failed')]
    assert order == sorted(order)
    row = sig.FATAL_SIGNATURES[sig.signature_priority('other_rank_failed')]
    assert row.generic
    assert all(sig.signature_priority(s.name) < order[0] for s in sig.FATAL_SIGNATURES if not s.generic)
    assert "other node" in row.hint and 'journal' in row.hint


# models/registry.py:132 (0.5.23) warns for any model module that fails to import and drops its architecture: only
# K2.6's own modules name a cause, another model's optional dependency warns at every start.
@pytest.mark.parametrize('line,module', [
    ("[2026-05-30 14:39:05 TP3] Ignore import error when loading sglang.srt.models.kimi_k25: No module named "
     "'flash_attn.cute'", 'kimi_k25'),
    ("[2026-05-30 14:39:05 TP0] Ignore import error when loading sglang.srt.models.deepseek_v2: cannot import name "
     "'fused_marlin_moe' from 'sgl_kernel'", 'deepseek_v2'),
    ("[2026-05-30 14:39:05 TP0] Ignore import error when loading sglang.srt.models.kimi_k25_eagle3: No module named "
     "'flash_attn.cute'", 'kimi_k25_eagle3'),
    ("[2026-05-30 14:39:05 TP0] Ignore import error when loading sglang.srt.models.qwen3_vl: No module named 'decord'",
     None),
    ("[2026-05-30 14:39:05 TP0] Ignore import error when loading sglang.srt.models.deepseek_v2_extra: No module named "
     "'x'", None),
    ("[2026-05-30 14:39:05] Ignore import error when loading sglang.srt.multimodal.processors.kimi_k25: No module "
     "named 'decord'", None),
])
def test_only_k26s_own_model_modules_failing_to_import_name_a_cause(line, module):
    found, match = sig.match_fatal(line)
    if module is None:
        assert (found, match) == (None, None), line
        return
    assert found.name == 'model_class_import_failed' and not found.generic
    hint = sig.signature_hint(found, match)
    assert 'sglang.srt.models.%s: ' % module in hint and match.group('error') in hint
    # SGLang carries on past the warning: every other specific row of the same run names the cause first
    assert all(sig.signature_priority(row.name) < sig.signature_priority('model_class_import_failed')
               for row in sig.FATAL_SIGNATURES if not row.generic and row.name != 'model_class_import_failed')


# SGLang's own "please install" texts (0.5.23): the last line of the traceback of the exception it raises, never the
# same words in a logged record (warnings SGLang carries on past).
@pytest.mark.parametrize('line,name', [
    # layers/quantization/modelopt_quant.py:163, fp4_gemm of the compressed-tensors NVFP4 linear scheme
    ("RuntimeError: NVFP4 GEMM requires flashinfer's mm_fp4; please install flashinfer.", 'missing_package'),
    # utils/common.py:2430 and :2435, the sglang-kernel check of every CUDA start (entrypoints/engine.py:1962)
    ('Exception: sglang-kernel is installed with version 0.4.1, which is less than the minimum required version 0.4.9. '
     'Please reinstall the latest version with `pip install sglang-kernel --force-reinstall`', 'missing_package'),
    ('Exception: sglang-kernel with minimum required version 0.4.9 is not installed. Please reinstall the latest version '
     'with `pip install sglang-kernel --force-reinstall`', 'missing_package'),
    # model_loader/weight_utils.py:1280
    ('ImportError: Please install fastsafetensors via `pip install fastsafetensors`', 'missing_package'),
    # the import system's own words stay missing_module, which names the module
    ("ModuleNotFoundError: No module named 'flashinfer'", 'missing_module'),
    # look-alikes: warnings logged at a start that goes on
    ('[2026-05-30 14:39:05 TP0] Ignore import error when loading sglang.srt.models.deepseek_vl2: Please install timm', None),
    ('[2026-05-30 14:39:05] torchaudio is not installed; audio inputs will fail at request time', None),
    ('[2026-05-30 14:39:05] enable_memory_saver is enabled, but torch-memory-saver is not installed. Please install it '
     'via `pip3 install torch-memory-saver`. ', None),
    ("/venv/lib/python3.11/site-packages/x.py:12: UserWarning: x is not installed, please install it", None),
])
def test_sglangs_own_install_texts_are_missing_package(line, name):
    found, match = sig.match_fatal(line)
    assert (found and found.name) == name, line
    if name == 'missing_package':
        assert "server's venv" in sig.signature_hint(found, match) and not found.generic
        assert sig.signature_priority('missing_module') < sig.signature_priority('missing_package')
