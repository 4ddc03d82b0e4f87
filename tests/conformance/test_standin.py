"""The stand-in (tests/standin) against the real release: its parser is the release's, and what it prints through each
start-up and each fault of its grammar lands where the same event of real 0.5.23 lands, in the release's own words.

The stand-in runs from its source tree (PYTHONPATH=tests/standin/src: it is stdlib-only) with the .venv's Python, as
`python -m sglang.launch_server`, at a fast pace, several at once. Each run's output goes line by line through a
JournalDigest (as the waiter reads the journal) and must reach the phase or name the signature real SGLang's would;
and every line of it that a phase or signature matches must be one of that row's real 0.5.23 format strings (the
row's cited lines, rendered as patterns), so the stand-in cannot drift from the release again.
"""

import concurrent.futures
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading

import pytest

import sglang_release
from citations import is_file, message_pattern, rows
from ansible_collections.llmops.sglang.plugins.module_utils import sglang_signatures as table
from ansible_collections.llmops.sglang.plugins.module_utils.wait.journal_digest import JournalDigest
from ansible_collections.llmops.sglang.plugins.module_utils.host.systemd_props import JournalEntry

ROOT = sglang_release.ROOT
STANDIN_SRC = os.path.join(ROOT, 'tests', 'standin', 'src')
PACE = '0.004'
RUN_TIMEOUT = 150  # an upper bound for a run that never ends (it is killed, the test then fails): not a timing assertion


# ---- the flag table -----------------------------------------------------------------------------------------------

GEN_FLAGS = os.path.join(ROOT, 'tests', 'standin', 'tools', 'gen_flags.py')


def test_the_standins_flag_table_is_the_releases(release):
    """The stand-in's committed table (src/sglang_standin/data/flags.json) is what its generator makes from
    flag_table() of the release now; the generator's own --check is the comparison (one place)."""
    run = subprocess.run([sys.executable, GEN_FLAGS, '--check'], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, check=False)
    assert run.returncode == 0, run.stdout
    with open(os.path.join(STANDIN_SRC, 'sglang_standin', 'data', 'flags.json')) as handle:
        data = json.load(handle)
    assert data['release'] == release.release()
    assert [row['option_strings'] for row in data['flags']] == [row['option_strings'] for row in release.flag_table()]


# ---- running it ---------------------------------------------------------------------------------------------------

def _env(extra=None):
    env = dict(os.environ)
    for key in list(env):
        if key.startswith('SGLANG_STANDIN_'):
            del env[key]
    env.update({'PYTHONPATH': STANDIN_SRC, 'SGLANG_STANDIN_PACE': PACE, 'PYTHONUNBUFFERED': '1'})
    env.update(extra or {})
    return env


def _free_port():
    sock = socket.socket()
    sock.bind(('127.0.0.1', 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def _make_model(path, arch):
    subprocess.run([sys.executable, '-m', 'sglang_standin.make_model', path, '--arch', arch, '--shards', '2'],
                   env=_env(), check=True, stdout=subprocess.DEVNULL)
    return path


def _run(model, args=(), fault=None, until=None, then=None, hold_port=False, python=sys.executable):
    """Run one stand-in start to its end; returns its output lines. `until`: a regex after whose line `then(proc, port,
    model)` is called (a request, a signal); a run that never ends is killed after RUN_TIMEOUT."""
    port = _free_port()
    holder = None
    if hold_port:
        holder = socket.socket()
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(('127.0.0.1', port))
        holder.listen(1)
    env = _env({'SGLANG_STANDIN_FAULT': fault} if fault else None)
    cmd = [python, '-m', 'sglang.launch_server', '--model-path', model, '--host', '127.0.0.1',
           '--port', str(port), '--tp-size', '2'] + list(args)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, universal_newlines=True,
                            start_new_session=True)
    lines = []
    watchdog = threading.Timer(RUN_TIMEOUT, _killpg, (proc,))
    watchdog.start()
    # As systemd does with a unit's cgroup: when the main process has exited, whatever of it is left is killed (and
    # stops holding the output pipe open).
    reaper = threading.Thread(target=lambda: (proc.wait(), _killpg(proc)))
    reaper.daemon = True
    reaper.start()
    try:
        for line in proc.stdout:
            lines.append(line.rstrip('\n'))
            if until and re.search(until, line):
                until = None
                if then is not None:
                    then(proc, port, model)
            elif until is None and then is None and 'fired up and ready to roll' in line:
                _sigterm(proc, port, model)  # a start that real 0.5.23 refuses got ready: end it, the test says so
        proc.wait()
    finally:
        watchdog.cancel()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()
        if holder is not None:
            holder.close()
    return lines


def _killpg(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def _sigterm(proc, _port, _model):
    os.kill(proc.pid, signal.SIGTERM)


def _one_chat(_proc, port, model):
    import urllib.request  # pylint: disable=import-outside-toplevel
    body = json.dumps({'model': model, 'messages': [{'role': 'user', 'content': 'hi'}], 'max_tokens': 4}).encode()
    request = urllib.request.Request('http://127.0.0.1:%d/v1/chat/completions' % port, data=body,
                                     headers={'Content-Type': 'application/json'})
    try:
        urllib.request.urlopen(request, timeout=60).read()
    except Exception:  # pylint: disable=broad-except
        pass  # the fault may cut the answer; what counts is what the server logs


def _kill_a_scheduler(proc, _port, _model):
    # After the load, the kernel OOM killer (or anything) SIGKILLs one scheduler: 0.5.23's watchdog notices.
    children = subprocess.run(['pgrep', '-P', str(proc.pid)], stdout=subprocess.PIPE, universal_newlines=True,
                              check=False)
    pids = [int(pid) for pid in children.stdout.split()]
    assert pids, 'the stand-in has no scheduler processes'
    os.kill(pids[0], signal.SIGKILL)


def _digest(lines):
    entries = [JournalEntry(text, 'c%d' % i, 0, 0, 'inv-1', False) for i, text in enumerate(lines)]
    digest = JournalDigest()
    digest.feed(entries, 0.0)
    return digest


# (id, model kind, args, fault, until, then, hold_port) -> what real 0.5.23 gives: ('phases', [...]) for a start that
# gets ready, ('phase', name) for a hang in that phase, ('cause', signature name) for a failure.
INIT_CAUSES = ('scheduler_exception', 'nccl', 'port_in_use', 'oom_killer', 'missing_package', 'gpu_memory_unbalanced',
               'trust_remote_code', 'no_gpu')
CUDA_GRAPH_CAUSES = ('scheduler_exception', 'oom', 'nccl', 'oom_killer', 'capture_failed')
FAULTS = ['crash@init:%s' % cause for cause in INIT_CAUSES] + \
    ['crash@weights:%s' % cause for cause in ('scheduler_exception', 'oom', 'oom_killer')] + \
    ['crash@kv_cache:%s' % cause for cause in ('scheduler_exception', 'oom', 'oom_killer')] + \
    ['crash@cuda_graph:%s' % cause for cause in CUDA_GRAPH_CAUSES] + \
    ['crash@weights:compressed_tensors_too_old'] + \
    ['crash@warmup:%s' % cause for cause in ('warmup_error', 'detokenizer_exception', 'tokenizer_exception',
                                             'watchdog_timeout', 'oom_killer')]
CAUSE_OF = {'scheduler_exception': 'subprocess_exception', 'nccl': 'nccl', 'port_in_use': 'port_in_use',
            'oom_killer': 'scheduler_oom_killed', 'warmup_error': 'warmup_failed',
            'compressed_tensors_too_old': 'compressed_tensors_too_old', 'detokenizer_exception': 'subprocess_exception',
            'tokenizer_exception': 'subprocess_exception', 'watchdog_timeout': 'watchdog_timeout',
            'missing_package': 'missing_package', 'gpu_memory_unbalanced': 'gpu_memory_unbalanced',
            'capture_failed': 'cuda_graph_failed', 'trust_remote_code': 'trust_remote_code', 'no_gpu': 'no_gpu'}
OOM_OF = {'weights': 'cuda_oom', 'kv_cache': 'not_enough_memory', 'cuda_graph': 'cuda_oom'}
HANG_UNTIL = {'init': r'Init parallel begin|Init torch distributed begin', 'weights': r'Load weight begin',
              'kv_cache': r'Load weight end', 'cuda_graph': r'(?i)Capture .*graph begin'}


def _scenarios():
    out = [('start', 'llama', (), None, r'fired up and ready to roll', _sigterm, False,
            ('phases', list(table.PHASE_NAMES)))]
    for fault in FAULTS:
        phase, cause = fault[len('crash@'):].split(':')
        expected = OOM_OF[phase] if cause == 'oom' else CAUSE_OF[cause]
        if (phase, cause) == ('warmup', 'oom_killer'):  # after the load: the subprocess watchdog reports it
            expected = 'subprocess_crashed'
        out.append((fault, 'llama', (), fault, None, None, False, ('cause', expected)))
    for phase, until in sorted(HANG_UNTIL.items()):
        out.append(('hang@' + phase, 'llama', (), 'hang@' + phase, until, _sigterm, False, ('phase', phase)))
    out += [
        ('exit_after_requests', 'llama', (), 'exit_after_requests=1', r'fired up and ready to roll',
         _one_chat, False, ('cause', 'subprocess_exception')),
        ('scheduler-killed-after-load', 'llama', (), None, r'fired up and ready to roll', _kill_a_scheduler,
         False, ('cause', 'subprocess_crashed')),
        ('http-port-busy', 'llama', (), None, None, None, True, ('cause', 'http_port_in_use')),
        ('unknown-flag', 'llama', ('--foo',), None, None, None, False, ('cause', 'unrecognized_arguments')),
        ('bad-value', 'llama', ('--mem-fraction-static', '0.9 x'), None, None, None, False, ('cause', 'bad_argument')),
        ('ambiguous-abbreviation', 'llama', ('--cuda-graph-max-bs', '8'), None, None, None, False,
         ('cause', 'bad_argument')),
        ('no-config-json', 'empty', (), None, None, None, False, ('cause', 'model_path')),
        # the loader on a checkpoint whose index names a shard that is not there, and on a shard cut short
        ('shard-missing', 'missing', (), None, None, None, False, ('cause', 'checkpoint_incomplete')),
        ('shard-truncated', 'truncated', (), None, None, None, False, ('cause', 'checkpoint_incomplete')),
        # the .venv has no compressed-tensors: for the checkpoint's nvfp4-pack-quantized format that is too old
        ('compressed-tensors-absent', 'kimi_k2', (), None, None, None, False, ('cause', 'compressed_tensors_too_old')),
        # node 0 of a TP4 start on two nodes whose peer node never finishes loading: both local ranks give up at the
        # post-load barrier (480 s x pace) with load_model_utils.py:393's ValueError, the generic row that points
        # at the other node outranks their `Scheduler hit an exception` and the SIGQUIT line
        ('crash@weights:other_rank', 'llama', ('--tp-size', '4', '--nnodes', '2', '--node-rank', '0'),
         'crash@weights:other_rank', None, None, False, ('cause', 'other_rank_failed')),
        # run by an interpreter whose include dir has no Python.h (Triton's helper build fails at the capture)
        ('python-headers-missing', 'llama', (), None, None, None, False, ('cause', 'python_headers')),
    ]
    return out


SCENARIOS = _scenarios()


def _headerless_python(root):
    """A copy of this interpreter without Python.h, made by the stand-in tests' own helper."""
    helpers = os.path.join(ROOT, 'tests', 'local', 'standin')
    sys.path.insert(0, helpers)
    try:
        import standin_helpers  # pylint: disable=import-outside-toplevel
    finally:  # it also puts the stand-in's sources on sys.path: this process keeps the release's sglang only
        sys.path[:] = [entry for entry in sys.path if entry not in (helpers, STANDIN_SRC)]
    python = standin_helpers.headerless_interpreter(root)
    assert python, 'cannot make a header-less copy of %s here' % sys.executable
    return python


@pytest.fixture(scope='module')
def runs():
    """{scenario id: output lines}, the runs made a few at a time."""
    with tempfile.TemporaryDirectory(prefix='conformance-standin-') as tmp:
        models = {'llama': _make_model(os.path.join(tmp, 'llama'), 'llama'),
                  'kimi_k2': _make_model(os.path.join(tmp, 'kimi'), 'kimi_k2'),
                  'empty': os.path.join(tmp, 'empty'),
                  'missing': _make_model(os.path.join(tmp, 'missing'), 'llama'),
                  'truncated': _make_model(os.path.join(tmp, 'truncated'), 'llama')}
        os.mkdir(models['empty'])
        os.remove(os.path.join(models['missing'], 'model-00002-of-00002.safetensors'))
        shard = os.path.join(models['truncated'], 'model-00001-of-00002.safetensors')
        os.truncate(shard, os.path.getsize(shard) - 1)  # an interrupted copy
        headerless = _headerless_python(os.path.join(tmp, 'no-headers'))
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            futures = {scenario[0]: pool.submit(_run, models[scenario[1]], scenario[2], scenario[3], scenario[4],
                                                scenario[5], scenario[6],
                                                headerless if scenario[0] == 'python-headers-missing' else sys.executable)
                       for scenario in SCENARIOS}
            return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize('scenario', SCENARIOS, ids=[scenario[0] for scenario in SCENARIOS])
def test_the_standin_lands_where_the_release_does(runs, scenario):
    name, expected = scenario[0], scenario[-1]
    lines = runs[name]
    digest = _digest(lines)
    shown = '\n'.join(lines[-40:])
    if expected[0] == 'phases':
        assert [mark.name for mark in digest.phases] == expected[1], shown
    elif expected[0] == 'phase':
        assert digest.phase == expected[1], shown
    else:
        assert digest.cause()[2] == expected[1], (digest.cause(), shown)
        who = WHO.get(name)
        if who:  # the family's member: the process the release logs it from
            assert [f for f in digest.fatals if f.name == expected[1] and '%s hit an exception' % who in f.text], shown


WHO = {'crash@warmup:detokenizer_exception': 'DetokenizerManager', 'crash@warmup:tokenizer_exception': 'TokenizerManager'}


# ---- its words are the release's ----------------------------------------------------------------------------------

def _formats():
    """{(kind, row name): ([compiled patterns of its SGLang/uvicorn lines], has sources of other programs)}"""
    formats = {}
    for kind, name, row in rows():
        patterns, other = [], False
        for source in row.sources:
            if is_file(source) and not source.origin.endswith('uvicorn/config.py'):
                try:
                    patterns.append(message_pattern(source.origin, source.line))
                except AssertionError:
                    other = True  # a cited line that is code, not a message (compressed_tensors/utils.py:18)
            else:
                other = True
        formats[(kind, name)] = (patterns, other)
    return formats


def test_every_line_the_table_reads_is_in_the_releases_words(release, runs):
    formats = _formats()
    drifted = {}
    for name, lines in sorted(runs.items()):
        for line in lines:
            _rank, message = table.strip_prefix(line)
            phase = table.match_phase(line)
            sig, _match = table.match_fatal(line)
            for key in (('phase', phase.name) if phase else None, ('signature', sig.name) if sig else None):
                if key is None:
                    continue
                patterns, other = formats[key]
                if any(pattern.search(message) for pattern in patterns) or other:
                    continue
                if key == ('phase', 'warmup') and 'HTTP/1.' in message:
                    continue  # uvicorn's access log (uvicorn/config.py:94), not a message of SGLang's
                drifted.setdefault('%s %s' % key, set()).add(message[:160])
    assert drifted == {}, '\n'.join('%s: the stand-in prints %s; 0.5.23 prints none of these' % (
        key, sorted(texts)[:3]) for key, texts in sorted(drifted.items()))


# ---- its stream is the release's, byte for byte --------------------------------------------------------------------

def _release_sse_utils():
    """The release's own entrypoints/openai/sse_utils.py (it imports only msgspec and typing), loaded from the wheel."""
    import importlib.util  # pylint: disable=import-outside-toplevel
    path = sglang_release.release_file('sglang/srt/entrypoints/openai/sse_utils.py')
    spec = importlib.util.spec_from_file_location('release_sse_utils', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stream_chat(streams, max_tokens, _proc, port, model):
    """One streamed chat completion; its raw body goes to `streams`, then the server is stopped."""
    import urllib.request  # pylint: disable=import-outside-toplevel
    body = json.dumps({'model': model, 'messages': [{'role': 'user', 'content': 'hi'}], 'max_tokens': max_tokens,
                       'stream': True, 'ignore_eos': True}).encode()
    request = urllib.request.Request('http://127.0.0.1:%d/v1/chat/completions' % port, data=body,
                                     headers={'Content-Type': 'application/json'})
    with urllib.request.urlopen(request, timeout=60) as answer:
        streams['content_type'] = answer.headers.get('Content-Type')
        streams['body'] = answer.read().decode('utf-8')
    _sigterm(_proc, port, model)


def test_a_streamed_chat_is_the_releases_chunks(release):
    """serving_chat.py:2587-2600 (first chunk), :960-1050 (a chunk per token), :2667-2686 (finish) all go through
    sse_utils.build_sse_content (:52-100): the stand-in's events, rebuilt from their own fields by the release's
    function, are the same bytes; then `data: [DONE]` (:2805), one event per decoded token."""
    build = _release_sse_utils().build_sse_content
    streams = {}
    max_tokens = 6
    with tempfile.TemporaryDirectory(prefix='conformance-stream-') as tmp:
        model = _make_model(os.path.join(tmp, 'llama'), 'llama')
        lines = _run(model, until=r'fired up and ready to roll',
                     then=lambda proc, port, name: _stream_chat(streams, max_tokens, proc, port, name))
    assert 'body' in streams, '\n'.join(lines[-30:])
    assert streams['content_type'].startswith('text/event-stream'), streams
    events = streams['body'].split('\n\n')
    assert events[-2:] == ['data: [DONE]', ''], events[-3:]
    chunks = events[:-2]
    assert len(chunks) == 1 + max_tokens + 1, chunks  # the role chunk, one per token (ignore_eos), the finish chunk
    for event in chunks:
        data = json.loads(event[len('data: '):])
        choice = data['choices'][0]
        delta = choice['delta']
        rebuilt = build(chunk_id=data['id'], created=data['created'], model=data['model'], index=choice['index'],
                        role=delta.get('role'), content=delta.get('content'),
                        reasoning_content=delta['reasoning_content'], finish_reason=choice['finish_reason'],
                        logprobs=choice['logprobs'], matched_stop=choice['matched_stop'], usage=data.get('usage'))
        assert event + '\n\n' == rebuilt
    first, last = json.loads(chunks[0][6:]), json.loads(chunks[-1][6:])
    assert first['choices'][0]['delta'] == {'reasoning_content': None, 'role': 'assistant', 'content': ''}
    assert last['choices'][0]['finish_reason'] == 'length'


# ---- usage chunks and the completion stream: rebuilt by the release's own models --------------------------------------

def _post_stream(port, path, body):
    """The events of one streamed request (its body split at blank lines), `data: [DONE]` checked and cut off."""
    import urllib.request  # pylint: disable=import-outside-toplevel
    request = urllib.request.Request('http://127.0.0.1:%d%s' % (port, path), data=json.dumps(body).encode(),
                                     headers={'Content-Type': 'application/json'})
    with urllib.request.urlopen(request, timeout=60) as answer:
        assert answer.headers.get('Content-Type').startswith('text/event-stream')
        events = answer.read().decode('utf-8').split('\n\n')
    assert events[-2:] == ['data: [DONE]', ''], events[-3:]
    return [event + '\n\n' for event in events[:-2]]


def _streams(args, bodies):
    """Run one stand-in with `args`; each (path, body) of `bodies` streamed through it, in order."""
    answers = []

    def then(proc, port, model):
        try:
            for path, body in bodies:
                answers.append(_post_stream(port, path, dict(body, model=model, stream=True)))
        finally:
            _sigterm(proc, port, model)

    with tempfile.TemporaryDirectory(prefix='conformance-usage-') as tmp:
        model = _make_model(os.path.join(tmp, 'llama'), 'llama')
        lines = _run(model, args=args, until=r'fired up and ready to roll', then=then)
    assert len(answers) == len(bodies), '\n'.join(lines[-30:])
    return answers


def _usage(usage_processor, protocol, fields):
    """UsageProcessor.calculate_token_usage (usage_processor.py:95-132) of the counts a chunk's usage states."""
    details = fields['prompt_tokens_details']
    return usage_processor.UsageProcessor.calculate_token_usage(
        prompt_tokens=fields['prompt_tokens'], completion_tokens=fields['completion_tokens'],
        reasoning_tokens=fields['reasoning_tokens'],
        cached_tokens=protocol.PromptTokensDetails(**details) if details is not None else None)


def _final_usage(usage_processor, fields, cache_report):
    """UsageProcessor.calculate_streaming_usage (usage_processor.py:56-93) as the end of a stream calls it
    (serving_chat.py:2779-2789, serving_completions.py:480-487), one choice."""
    cached = (fields.get('prompt_tokens_details') or {}).get('cached_tokens', 0)
    return usage_processor.UsageProcessor.calculate_streaming_usage(
        {0: fields['prompt_tokens']}, {0: fields.get('reasoning_tokens') or 0}, {0: fields['completion_tokens']},
        cached_tokens={0: cached}, n_choices=1, enable_cache_report=cache_report)


def _check_chat(events, body, cache_report, thinking):
    """Every chunk of a chat stream is the release's: the role, token and finish chunks rebuilt by
    sse_utils.build_sse_content (serving_chat.py:2587-2600, :960-1050, :2676-2686) with a continuous usage rebuilt
    by UsageProcessor.calculate_token_usage (:980-1000); the usage chunk by ChatCompletionStreamResponse(choices=[],
    usage=calculate_streaming_usage(...)).model_dump_json() (:2766-2797). Returns the usage chunk's usage."""
    protocol, usage_processor = sglang_release.openai_protocol()
    build = _release_sse_utils().build_sse_content
    options = body.get('stream_options') or {}
    tokens = [json.loads(event[6:]) for event in events if json.loads(event[6:])['choices']]
    usage_events = [json.loads(event[6:]) for event in events if not json.loads(event[6:])['choices']]
    assert len(tokens) + len(usage_events) == len(events)
    assert [json.loads(event[6:]) for event in events[len(tokens):]] == usage_events, events  # the usage one last
    for event, data in zip(events, tokens):
        choice = data['choices'][0]
        delta = choice['delta']
        usage = data.get('usage')
        if usage is not None:
            assert usage == _usage(usage_processor, protocol, usage).model_dump(), event
        assert event == build(chunk_id=data['id'], created=data['created'], model=data['model'], index=choice['index'],
                              role=delta.get('role'), content=delta.get('content'),
                              reasoning_content=delta['reasoning_content'], finish_reason=choice['finish_reason'],
                              logprobs=choice['logprobs'], matched_stop=choice['matched_stop'], usage=usage)
    middle = tokens[1:-1]
    assert middle and tokens[0]['choices'][0]['delta'].get('role') == 'assistant'
    assert tokens[-1]['choices'][0]['finish_reason'] in ('stop', 'length')
    reasoning = [data for data in middle if data['choices'][0]['delta']['reasoning_content'] is not None]
    assert bool(reasoning) == thinking, middle
    if options.get('continuous_usage_stats'):
        # the first and finish chunks carry none (serving_chat.py:2587-2600, :2676-2686); the others the counts so far
        assert 'usage' not in tokens[0] and 'usage' not in tokens[-1], (tokens[0], tokens[-1])
        counts = [data['usage']['completion_tokens'] for data in middle]
        assert counts == sorted(set(counts)) and counts[0] >= 1, counts
        assert [data['usage']['reasoning_tokens'] for data in reasoning] == list(range(1, len(reasoning) + 1))
        assert all((data['usage']['prompt_tokens_details'] is not None) == cache_report for data in middle)
    else:
        assert all('usage' not in data for data in tokens), tokens
    if not options.get('include_usage'):
        assert usage_events == [], usage_events
        return None
    assert len(usage_events) == 1, usage_events
    final = usage_events[0]
    rebuilt = protocol.ChatCompletionStreamResponse(
        id=final['id'], created=final['created'], choices=[], model=final['model'],
        usage=_final_usage(usage_processor, final['usage'], cache_report))
    assert events[-1] == 'data: %s\n\n' % rebuilt.model_dump_json()
    assert final['id'] == tokens[0]['id'] and final['created'] == tokens[0]['created']
    # the counts (schedule_batch.py:1509-1513,1872-1875: the end-of-sequence token that stops it is counted; the
    # end of thinking is a token too, schedule_batch.py:2240-2259)
    usage, stopped = final['usage'], tokens[-1]['choices'][0]['finish_reason'] == 'stop'
    answered = len(middle) - len(reasoning)
    thought = len(reasoning) + (1 if reasoning and answered else 0)
    assert usage['reasoning_tokens'] == thought, (usage, len(reasoning), answered)
    assert usage['completion_tokens'] == thought + answered + stopped, (usage, len(reasoning), answered)
    return final['usage']


def _check_completion(events, body, cache_report):
    """Every chunk of a completion stream is the release's: CompletionStreamResponse(object='text_completion',
    choices=[CompletionResponseStreamChoice(...)]).model_dump_json() per decode step (serving_completions.py:381-403),
    the step that finishes with the finish_reason (with "length" the last token's own chunk; with "stop" the end of
    sequence's, text ""), and the usage chunk dumped with exclude_none (:479-496). Returns the usage chunk's usage."""
    protocol, usage_processor = sglang_release.openai_protocol()
    options = body.get('stream_options') or {}
    datas = [json.loads(event[6:]) for event in events]
    tokens = [data for data in datas if data['choices']]
    assert datas[:len(tokens)] == tokens, events
    for event, data in zip(events, tokens):
        choice = data['choices'][0]
        usage = data['usage']
        rebuilt = protocol.CompletionStreamResponse(
            id=data['id'], created=data['created'], object='text_completion', model=data['model'],
            choices=[protocol.CompletionResponseStreamChoice(
                index=choice['index'], text=choice['text'], logprobs=choice['logprobs'],
                finish_reason=choice['finish_reason'], matched_stop=choice['matched_stop'])],
            usage=_usage(usage_processor, protocol, usage) if usage is not None else None)
        assert event == 'data: %s\n\n' % rebuilt.model_dump_json()
    finishes = [data['choices'][0]['finish_reason'] for data in tokens]
    assert finishes[:-1] == [None] * (len(tokens) - 1) and finishes[-1] in ('stop', 'length'), finishes
    last = tokens[-1]['choices'][0]
    if last['finish_reason'] == 'length':
        assert len(tokens) == body['max_tokens'] and last['text'] != '' and last['matched_stop'] is None, last
    else:
        assert last['text'] == '' and isinstance(last['matched_stop'], int), last
    if options.get('continuous_usage_stats'):
        assert [data['usage']['completion_tokens'] for data in tokens] == list(range(1, len(tokens) + 1))
        assert all(data['usage']['prompt_tokens_details'] is None for data in tokens)  # none here (:395-401)
    else:
        assert all(data['usage'] is None for data in tokens), tokens
    usage_events = datas[len(tokens):]
    if not options.get('include_usage'):
        assert usage_events == []
        return None
    assert len(usage_events) == 1, usage_events
    final = usage_events[0]
    rebuilt = protocol.CompletionStreamResponse(id=final['id'], created=final['created'], choices=[],
                                                model=final['model'],
                                                usage=_final_usage(usage_processor, final['usage'], cache_report))
    assert events[-1] == 'data: %s\n\n' % rebuilt.model_dump_json(exclude_none=True)
    assert final['usage']['completion_tokens'] == len(tokens), final  # one per step, the end of sequence's included
    assert final['usage']['reasoning_tokens'] == 0
    return final['usage']


CHAT_MESSAGES = [{'role': 'user', 'content': 'What is the capital of France?'}]
BOTH = {'include_usage': True, 'continuous_usage_stats': True}


def test_usage_chunks_and_the_completion_stream_are_the_releases():
    """The usage a stream reports (stream_options include_usage, continuous_usage_stats) and the completion stream's
    framing, for chat and completions, without a reasoning parser and with one (--reasoning-parser kimi_k2: its
    reasoning tokens, and --enable-cache-report: the cached details), each chunk rebuilt from its own fields by the
    release's protocol models and UsageProcessor, byte for byte."""
    plain = [('/v1/chat/completions', {'messages': CHAT_MESSAGES, 'max_tokens': 5, 'ignore_eos': True,
                                       'stream_options': BOTH}),
             ('/v1/chat/completions', {'messages': CHAT_MESSAGES, 'max_tokens': 50,
                                       'stream_options': {'include_usage': True}}),
             ('/v1/completions', {'prompt': 'The capital of France is', 'max_tokens': 4, 'ignore_eos': True}),
             ('/v1/completions', {'prompt': 'The capital of France is', 'max_tokens': 50, 'stream_options': BOTH}),
             ('/v1/completions', {'prompt': 'Say hi', 'max_tokens': 3, 'ignore_eos': True,
                                  'stream_options': {'include_usage': True}})]
    thinking = [('/v1/chat/completions', {'messages': CHAT_MESSAGES, 'max_tokens': 60, 'stream_options': BOTH}),
                ('/v1/chat/completions', {'messages': CHAT_MESSAGES, 'max_tokens': 5,
                                          'stream_options': {'include_usage': True}}),
                ('/v1/chat/completions', {'messages': CHAT_MESSAGES, 'max_tokens': 60,
                                          'chat_template_kwargs': {'thinking': False},
                                          'stream_options': {'include_usage': True}}),
                ('/v1/completions', {'prompt': 'Say hi', 'max_tokens': 50, 'stream_options': BOTH})]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(_streams, [], plain),
                pool.submit(_streams, ['--reasoning-parser', 'kimi_k2', '--enable-cache-report'], thinking)]
        plain_events, thinking_events = [run.result() for run in runs]
    finals = []
    for (path, body), events in zip(plain, plain_events):
        if path == '/v1/chat/completions':
            finals.append(_check_chat(events, body, cache_report=False, thinking=False))
        else:
            finals.append(_check_completion(events, body, cache_report=False))
    for (path, body), events in zip(thinking, thinking_events):
        if path == '/v1/chat/completions':
            finals.append(_check_chat(events, body, cache_report=True,
                                      thinking='chat_template_kwargs' not in body))
        else:
            finals.append(_check_completion(events, body, cache_report=True))
    # what each usage chunk said (None: not asked): plain chat, then completions; then with the reasoning parser
    assert [final is None for final in finals] == [False, False, True, False, False, False, False, False, False]
    reasoned = finals[5]
    assert reasoned['reasoning_tokens'] > 0 and reasoned['completion_tokens_details'] == {
        'reasoning_tokens': reasoned['reasoning_tokens']}, reasoned
    assert finals[6]['reasoning_tokens'] == finals[6]['completion_tokens'] == 5, finals[6]  # cut off while thinking
    assert finals[7]['reasoning_tokens'] == 0 and finals[7]['completion_tokens_details'] is None, finals[7]
    assert finals[5]['prompt_tokens_details'] == {'cached_tokens': 0} and 'prompt_tokens_details' not in finals[3]


def test_the_signal_handlers_the_standin_orders_are_the_releases(release):
    """The stand-in runs a SIGTERM and a SIGQUIT in arrival order, one after the other, from the first request on
    (Launcher.run_loop_signals: the asyncio loop's handlers, tokenizer_manager.py:2451-2459), and by CPython's signal
    number before it (Launcher.on_signal: engine.py:1982's signal.signal). Both citations, read in the release."""
    loop = '\n'.join(release.source('managers/tokenizer_manager.py')[2450:2459])
    assert 'loop.add_signal_handler(signal.SIGTERM, signal_handler.sigterm_handler)' in loop, loop
    assert re.search(r'loop\.add_signal_handler\(\s*signal\.SIGQUIT, signal_handler\.running_phase_sigquit_handler',
                     loop), loop
    launch = release.source('entrypoints/engine.py')[1981]
    assert 'signal.signal(signal.SIGQUIT, launch_phase_sigquit_handler)' in launch, launch
