# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Traceback extraction, causes and excerpts from recorded multi-rank journal output."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.wait.journal_digest import JournalDigest, MAX_EXCERPT_LINES
from ansible_collections.llmops.sglang.plugins.module_utils.host.systemd_props import JournalEntry

UNIT = 'sglang-k26.service'
T0 = 1780151760 * 1000000   # 2026-05-30 14:36:00 UTC, in microseconds

GCC_CMD = ("subprocess.CalledProcessError: Command '['/usr/bin/gcc', '/tmp/tmpq3k1x9zd/cuda_utils.c', '-O3', '-shared', "
           "'-fPIC', '-Wno-psabi', '-o', '/tmp/tmpq3k1x9zd/cuda_utils.cpython-312-x86_64-linux-gnu.so', '-lcuda', "
           "'-L/opt/sglang/venv/lib/python3.12/site-packages/triton/backends/nvidia/lib', '-L/usr/lib/x86_64-linux-gnu', "
           "'-I/opt/sglang/venv/lib/python3.12/site-packages/triton/backends/nvidia/include', '-I/tmp/tmpq3k1x9zd', "
           "'-I/usr/include/python3.12']' returned non-zero exit status 1.")

# A Python.h failure at CUDA graph capture on 8 ranks (B300 story), as journald stores it: the
# logger prefixes only the first line of a record, ranks interleave, gcc writes straight to stderr.
PYTHON_H_RUN = [
    (0, "[2026-05-30 14:36:02] server_args=ServerArgs(model_path='/root/models/Kimi-K2.6', tp_size=8, api_key='sk-live-42', port=30001)"),
    (5, '[2026-05-30 14:36:05] Unexpected error during package walk: cutlass.cute.experimental'),
    (10, '[2026-05-30 14:36:10 TP0] Init torch distributed begin.'),
    (10, '[2026-05-30 14:36:10 TP1] Init torch distributed begin.'),
    (14, '[2026-05-30 14:36:14 TP0] Init torch distributed ends. elapsed=3.91 s, mem usage=1.12 GB'),
    (15, '[2026-05-30 14:36:15 TP0] Load weight begin. avail mem=177.20 GB'),
    (16, '[2026-05-30 14:36:16 TP3] Setup Custom allreduce failed with CUDART error: peer access is not supported'),
    (20, 'Loading safetensors checkpoint shards:   0% Completed | 0/64 [00:00<?, ?it/s]'),
    (181, '[2026-05-30 14:39:01 TP0] Load weight end. elapsed=165.90 s, type=DeepseekV3ForCausalLM, avail mem=103.12 GB, mem usage=74.08 GB.'),
    (185, '[2026-05-30 14:39:05 TP0] KV Cache is allocated. #tokens: 1207680, KV size: 78.98 GB'),
    (185, '[2026-05-30 14:39:05 TP0] Memory pool end. avail mem=22.10 GB'),
    (186, '[2026-05-30 14:39:06 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=21.90 GB'),
    (207, '/tmp/tmpq3k1x9zd/cuda_utils.c:6:10: fatal error: Python.h: No such file or directory'),
    (207, '    6 | #include <Python.h>'),
    (207, '      |          ^~~~~~~~~~'),
    (207, 'compilation terminated.'),
    (208, '/tmp/tmpa81b2c3d/cuda_utils.c:6:10: fatal error: Python.h: No such file or directory'),
    (208, '[2026-05-30 14:39:28 TP1] Scheduler hit an exception: Traceback (most recent call last):'),
    (208, '  File "/opt/sglang/venv/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py", line 2871, in run_scheduler_process'),
    (208, '    scheduler = Scheduler('),
    (208, '                ^^^^^^^^^^'),
    (208, '[2026-05-30 14:39:28 TP5] Capture cuda graph begin. This can take up to several minutes. avail mem=21.90 GB'),
    (208, '  File "/opt/sglang/venv/lib/python3.12/site-packages/sglang/srt/model_executor/model_runner.py", line 1810, in init_device_graphs'),
    (208, '    self.graph_runner = CudaGraphRunner(self)'),
    (208, '  File "/opt/sglang/venv/lib/python3.12/site-packages/triton/runtime/build.py", line 48, in _build'),
    (208, '    subprocess.check_call(cc_cmd, stdout=subprocess.DEVNULL)'),
    (208, '  File "/usr/lib/python3.12/subprocess.py", line 413, in check_call'),
    (208, '    raise CalledProcessError(retcode, cmd)'),
    (208, GCC_CMD),
    (208, ''),
    (208, '[2026-05-30 14:39:28] Received sigquit from a child process. It usually means the child failed.'),
    (209, 'Traceback (most recent call last):'),
    (209, '  File "<frozen runpy>", line 198, in _run_module_as_main'),
    (209, '  File "/opt/sglang/venv/lib/python3.12/site-packages/sglang/launch_server.py", line 14, in <module>'),
    (209, '    launch_server(server_args)'),
    (209, 'RuntimeError: Initialization failed. Please see the error messages above.'),
]
MANAGER_LINES = [
    (210, 'sglang-k26.service: Main process exited, code=killed, status=9/KILL'),
    (210, "sglang-k26.service: Failed with result 'signal'."),
    (210, 'sglang-k26.service: Consumed 2h 3min 4.512s CPU time.'),
]


def entries(lines, inv='inv-1', manager=()):
    out = [JournalEntry(text, 'c%d' % i, T0 + int(t * 1e6), 0, inv, False) for i, (t, text) in enumerate(lines)]
    out += [JournalEntry(text, 'm%d' % i, T0 + int(t * 1e6), 0, inv, True) for i, (t, text) in enumerate(manager)]
    return out


def digest_of(lines, **kw):
    d = JournalDigest(clock_offset=lambda rt: (rt - T0) / 1e6)
    d.feed(entries(lines, **kw), 1000.0)
    return d


def test_python_h_failure_cause_and_hint():
    d = digest_of(PYTHON_H_RUN, manager=MANAGER_LINES)
    summary, hint, name = d.cause()
    assert name == 'python_headers'
    assert summary == 'fatal error: Python.h: No such file or directory'
    assert 'python3-dev' in hint


def test_traceback_before_sigquit_is_chosen_and_deinterleaved():
    d = digest_of(PYTHON_H_RUN)
    tb = d.chosen_traceback()
    assert tb.complete
    assert tb.lines[0].text.endswith('Scheduler hit an exception: Traceback (most recent call last):')
    assert tb.exception_line == GCC_CMD
    texts = [line.text for line in tb.lines]
    assert not any('TP5' in t for t in texts), 'the interleaved rank-5 line is not part of the traceback'
    assert '    self.graph_runner = CudaGraphRunner(self)' in texts
    # the aftermath traceback of the main process exists, but is not the cause
    assert d.tracebacks[-1].exception_line == 'RuntimeError: Initialization failed. Please see the error messages above.'


def test_excerpt_is_whole_ordered_bounded_and_deduplicated():
    d = digest_of(PYTHON_H_RUN, manager=MANAGER_LINES)
    ex = d.excerpt()
    assert GCC_CMD in ex, 'long lines are kept whole'
    assert len(GCC_CMD) > 160
    assert ex.count('/tmp/tmpq3k1x9zd/cuda_utils.c:6:10: fatal error: Python.h: No such file or directory') == 1
    # the same error from a second rank, with another temp dir before it, is shown once
    assert not any('tmpa81b2c3d' in line for line in ex)
    assert len(ex) <= MAX_EXCERPT_LINES
    # journal order: the gcc error comes before the traceback, systemd's verdict last
    assert ex.index('/tmp/tmpq3k1x9zd/cuda_utils.c:6:10: fatal error: Python.h: No such file or directory') < ex.index(GCC_CMD)
    assert ex[-1] == "sglang-k26.service: Failed with result 'signal'."
    assert 'sglang-k26.service: Main process exited, code=killed, status=9/KILL' in ex
    assert not any('Custom allreduce' in line for line in ex)
    assert not any('package walk' in line for line in ex)
    assert not any('Consumed' in line for line in ex)


def test_phases_with_journal_timestamps():
    d = digest_of(PYTHON_H_RUN)
    assert [(m.name, m.at) for m in d.phases] == [('init', 10.0), ('weights', 15.0), ('kv_cache', 181.0), ('cuda_graph', 186.0)]
    assert d.phase == 'cuda_graph'
    assert all(m.source == 'journal' for m in d.phases)


def test_phase_at_is_capped_at_observation_time_and_may_be_negative():
    d = JournalDigest(clock_offset=lambda rt: (rt - T0) / 1e6 - 100)
    d.feed(entries([(10, '[x] Init torch distributed begin.'), (500, '[2026-05-30 14:36:15 TP0] Load weight begin.')]), 50.0)
    assert [m.at for m in d.phases] == [-90.0, 50.0]


def test_phases_without_timestamps_use_observation_time():
    d = JournalDigest()
    d.feed(entries([(1, '[2026-05-30 14:36:10 TP0] Init torch distributed begin.')]), 12.5)
    assert d.phases[0].at == 12.5 and d.phases[0].source == 'observed'


def test_phases_only_move_forward_within_a_run_and_restart_with_a_new_run():
    d = JournalDigest()
    lines = [(1, '[t TP0] x'), (2, '[2026-05-30 14:36:15 TP0] Load weight begin.'),
             (3, '[2026-05-30 14:36:10 TP7] Init torch distributed begin.')]
    d.feed(entries(lines), 5)
    assert [m.name for m in d.phases] == ['weights']
    d.feed(entries([(9, '[2026-05-30 14:36:10 TP0] Init torch distributed begin.')], inv='inv-2'), 9)
    assert [(m.name, m.run) for m in d.phases] == [('weights', 0), ('init', 1)]


def test_crash_loop_keeps_the_cause_of_the_failed_run():
    # run 1 fails (OOM), run 2 has just started: the cause comes from run 1
    run1 = [(1, '[2026-05-30 14:36:15 TP0] Load weight begin.'),
            (2, '[2026-05-30 14:37:15 TP2] Scheduler hit an exception: Traceback (most recent call last):'),
            (2, '  File "/x/model_runner.py", line 10, in init_memory_pool'),
            (2, 'RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.'),
            (3, '[2026-05-30 14:37:15] Received sigquit from a child process. It usually means the child failed.')]
    run2 = [(9, '[2026-05-30 14:37:30 TP0] Init torch distributed begin.')]
    d = JournalDigest()
    d.feed(entries(run1, inv='a'), 5)
    d.feed(entries(run2, inv='b'), 10)
    summary, hint, name = d.cause()
    assert name == 'not_enough_memory'
    assert 'mem-fraction-static' in hint
    assert d.chosen_traceback().run == 0
    assert 'RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.' in d.excerpt()


def test_excerpt_shows_systemds_verdict_of_the_failed_run_only():
    d = JournalDigest()
    d.feed(entries([(1, 'RuntimeError: Initialization failed. Please see the error messages above.')], inv='a',
                   manager=[(1, 'u: Main process exited, code=killed, status=9/KILL'), (1, 'u: Scheduled restart job, restart counter is at 1.')]), 1)
    d.feed(entries([(5, 'RuntimeError: Initialization failed. Please see the error messages above.')], inv='b',
                   manager=[(6, 'u: Main process exited, code=exited, status=1/FAILURE')]), 6)
    ex = d.excerpt()
    assert 'u: Main process exited, code=exited, status=1/FAILURE' in ex
    assert not any('status=9/KILL' in line or 'Scheduled restart' in line for line in ex)


def test_chained_traceback_is_one_block():
    lines = [(1, 'Traceback (most recent call last):'),
             (1, '  File "a.py", line 1, in <module>'),
             (1, 'KeyError: \'x\''),
             (1, ''),
             (1, 'During handling of the above exception, another exception occurred:'),
             (1, ''),
             (1, 'Traceback (most recent call last):'),
             (1, '  File "a.py", line 3, in <module>'),
             (1, 'ValueError: compressed format unknown')]
    d = digest_of(lines)
    assert len(d.tracebacks) == 1
    tb = d.chosen_traceback()
    assert tb.exception_line == 'ValueError: compressed format unknown'
    assert [line.text for line in tb.lines][:3] == ['Traceback (most recent call last):', '  File "a.py", line 1, in <module>', "KeyError: 'x'"]
    assert d.cause()[0] == 'ValueError: compressed format unknown'


def test_traceback_without_known_signature_gives_its_exception_line():
    lines = [(1, '[2026-05-30 14:39:28 TP0] Scheduler hit an exception: Traceback (most recent call last):'),
             (1, '  File "/x/scheduler.py", line 5, in f'),
             (1, 'AssertionError: speculative_num_draft_tokens must be >= 2'),
             (2, '[2026-05-30 14:39:29] Received sigquit from a child process. It usually means the child failed.')]
    d = digest_of(lines)
    summary, hint, name = d.cause()
    assert summary == 'AssertionError: speculative_num_draft_tokens must be >= 2'
    assert name == 'subprocess_exception' and 'traceback' in hint


def test_unrecognized_argument_exit():
    lines = [(0, 'usage: launch_server.py [-h] --model-path MODEL_PATH [--tp-size TP_SIZE]'),
             (0, 'launch_server.py: error: unrecognized arguments: --cuda-graph-max-bs 64')]
    d = digest_of(lines, manager=[(0, 'sglang-k26.service: Main process exited, code=exited, status=2/INVALIDARGUMENT')])
    summary, hint, name = d.cause()
    assert name == 'unrecognized_arguments'
    assert summary == 'error: unrecognized arguments: --cuda-graph-max-bs 64'
    assert '--cuda-graph-max-bs 64' in hint


def test_no_cause_gives_the_tail_for_a_stall():
    lines = [(i, '[2026-05-30 14:36:%02d TP0] Load weight begin. shard %d' % (i % 60, i)) for i in range(100)]
    d = digest_of(lines)
    assert d.cause() == (None, None, None)
    ex = d.excerpt()
    assert len(ex) == 20 and ex[-1].endswith('shard 99')
    assert d.excerpt(tail_fallback=False) == []


def test_memory_stays_bounded_with_chatty_logs():
    d = JournalDigest()
    for chunk in range(50):
        d.feed(entries([(chunk, '[2026-05-30 14:40:04 TP0] Decode batch. #running-req: 1 %d' % i) for i in range(1000)]), chunk)
    assert len(d.tail) <= 20
    assert d.seq == 50000 and d.last_line.endswith(" 999")


def test_huge_traceback_is_shortened_with_a_marker_not_cut():
    lines = [(1, 'Traceback (most recent call last):')]
    lines += [(1, '  File "deep.py", line %d, in recurse' % i) for i in range(500)]
    lines += [(1, 'RecursionError: maximum recursion depth exceeded')]
    d = digest_of(lines)
    ex = d.excerpt()
    assert len(ex) <= MAX_EXCERPT_LINES
    assert ex[0] == 'Traceback (most recent call last):'
    assert ex[-1] == 'RecursionError: maximum recursion depth exceeded'
    assert any(line.startswith('[... ') and 'omitted' in line for line in ex)


def test_the_same_oom_on_every_gpu_is_shown_once():
    oom = ('[2026-05-30 14:39:28 TP%d] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. '
           'GPU %d has a total capacity of 139.81 GiB of which %d.50 MiB is free.')
    d = digest_of([(10 + rank, oom % (rank, rank, 100 + rank)) for rank in range(8)])
    assert sum('OutOfMemoryError' in line for line in d.excerpt()) == 1


def test_an_exception_is_the_cause_when_the_teardown_then_shows_a_scheduler_killed():
    # tokenizer_manager.py:4043 logs the exception, the teardown SIGKILLs the schedulers, and the SubprocessWatchdog
    # (utils/watchdog.py:217) may log one of them as crashed before the main process ends (a loaded machine: the
    # conformance run of crash@warmup:tokenizer_exception once saw it)
    d = digest_of([
        (100, '[2026-12-03 14:54:14] TokenizerManager hit an exception: Traceback (most recent call last):'),
        (100, '  File "/venv/sglang/srt/managers/tokenizer_manager.py", line 4040, in print_exception_wrapper'),
        (100, '    await func()'),
        (100, "AttributeError: 'NoneType' object has no attribute 'convert_to_output_meta_info'"),
        (101, '[2026-12-03 14:54:15] Subprocess scheduler_0 (pid=6636) crashed with exit code -9. Triggering SIGQUIT '
              'for cleanup...'),
    ])
    summary, _hint, name = d.cause()
    assert name == 'subprocess_exception'
    assert summary == "AttributeError: 'NoneType' object has no attribute 'convert_to_output_meta_info'"
    # alone, the crash line is still its own cause (a scheduler the OOM killer took leaves no traceback)
    assert digest_of([(101, '[2026-12-03 14:54:15] Subprocess scheduler_0 (pid=6636) crashed with exit code -9. '
                            'Triggering SIGQUIT for cleanup...')]).cause()[2] == 'subprocess_crashed'


def _rank_left_at_the_barrier(rank, t):
    """0.5.23 load_model_utils.py:393-395 in TP rank `rank`'s scheduler (scheduler.py:6372), as journald stores it."""
    return [
        (t, '[2026-12-05 19:40:02 TP%d] Scheduler hit an exception: Traceback (most recent call last):' % rank),
        (t, '  File "/venv/sglang/srt/model_executor/model_runner.py", line 1406, in load_model'),
        (t, '    dist_barrier_after_load('),
        (t, '  File "/venv/sglang/srt/model_executor/model_runner_components/load_model_utils.py", line 393, in '
            'dist_barrier_after_load'),
        (t, '    raise ValueError('),
        (t, "ValueError: TP rank %d could finish the model loading, but there are other ranks that didn't finish "
            "loading. It is likely due to unexpected failures (e.g., OOM) or a slow node." % rank),
    ]


def test_a_node_whose_peer_never_loaded_points_at_the_other_node():
    # Node 0 of a TP16 start: every local rank loaded and gave up at the post-load barrier after 480 s; then the
    # launch-phase SIGQUIT line (engine.py:1978). Not "read the traceback": the traceback is this rank's wait.
    lines = [(10, '[2026-12-05 19:32:02 TP%d] Load weight end. elapsed=3.00 s' % rank) for rank in range(8)]
    for rank in range(8):
        lines += _rank_left_at_the_barrier(rank, 490)
    lines.append((491, '[2026-12-05 19:40:03] Received sigquit from a child process. It usually means the child failed.'))
    d = digest_of(lines)
    summary, hint, name = d.cause()
    assert name == 'other_rank_failed'
    assert summary.startswith('ValueError: TP rank ') and 'could finish the model loading' in summary
    assert 'other node' in hint and 'journal' in hint
    # every rank's exception line and the SIGQUIT line were read too, as the generic rows they are
    assert set(f.name for f in d.fatals) == set(['other_rank_failed', 'subprocess_exception', 'child_failed'])
    # a specific cause on this node still names itself (a rank out of memory while the others waited)
    oom = [(300, '[2026-12-05 19:35:00 TP3] Scheduler hit an exception: Traceback (most recent call last):'),
           (300, 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.')]
    assert digest_of(oom + lines).cause()[2] == 'cuda_oom'


def test_an_evicted_detokenizer_state_is_shown_in_its_own_words():
    # managers/detokenizer_manager.py:383-392, a crash while serving no row reads: the detokenizer's exception line
    # (generic) gives the hint, the traceback's last line, which names SGLANG_DETOKENIZER_MAX_STATES, the message.
    d = digest_of([
        (100, '[2026-12-05 19:40:02] DetokenizerManager hit an exception: Traceback (most recent call last):'),
        (100, '  File "/venv/sglang/srt/managers/detokenizer_manager.py", line 385, in _decode_batch_token_id_output'),
        (100, '    raise RuntimeError('),
        (100, 'RuntimeError: Decode status not found for request 3f2a9c1e0b4d. It may be due to the request being '
              'evicted from the decode status due to memory pressure. Please increase the maximum number of requests '
              'by setting the SGLANG_DETOKENIZER_MAX_STATES environment variable to a bigger value than the default '
              'value. The current value is 65536. For more details, see: https://github.com/sgl-project/sglang/issues/2812'),
        (101, '[2026-12-05 19:40:02] SIGQUIT received. signum=None, frame=None. It usually means one child failed.'),
    ])
    summary, hint, name = d.cause()
    assert name == 'subprocess_exception' and 'DetokenizerManager' in hint
    assert 'SGLANG_DETOKENIZER_MAX_STATES' in summary
