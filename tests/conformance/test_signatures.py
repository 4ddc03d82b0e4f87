"""Every phase and failure signature of sglang_signatures.py held against the text the real release prints.

Each row's `sources` cite where its text comes from. For SGLang's own lines (a path under sglang/srt/ of the wheel)
and uvicorn's (a file of the uvicorn wheel) the cited line must hold the cited text, verbatim: a new release fails
here naming exactly the rows whose lines moved. The whole string expression at that line (f-string or %-format,
implicit concatenation included) is then rendered with sample values, prefixed as SGLang's logger prints it
(utils/common.py:2630 "[%(asctime)s{prefix}] %(message)s", prefix " TP<n>" in schedulers, managers/scheduler.py:6289,
none in the main process) or bare (an exception's last traceback line), and fed through match_phase / match_fatal and
a JournalDigest: each lands on its row. Text of other programs (argparse, the import system, enum, asyncio) is
produced for real by running them; the rest (torch, NCCL, CUDA, transformers, gcc without a gcc) is rendered from
the cited text.
"""

import ast
import asyncio
import enum
import logging
import re
import shutil
import socket
import subprocess
import tempfile

import pytest

import sglang_release
from citations import PACKAGE_FILE, SGLANG_FILE, is_file, rows, source_lines, string_at, tree
from ansible_collections.llmops.sglang.plugins.module_utils import sglang_signatures as table
from ansible_collections.llmops.sglang.plugins.module_utils.wait.journal_digest import JournalDigest
from ansible_collections.llmops.sglang.plugins.module_utils.host.systemd_props import JournalEntry


# Sample values for the placeholders of the cited strings, by the placeholder's source text; per row when the value
# decides the row (an exit code of -9 is the OOM killer).
SAMPLES = {
    'cache_name': 'KV Cache',
    "'VA upper bound' if self.post_capture_active else 'is allocated'": 'is allocated',
    'self.dtype': 'torch.bfloat16',
    'capture_name': 'target decode',
    'graph_backend[model_runner.device]': 'CUDA graph',
    'iter_msg': '',
    'e': 'CUDA error: an illegal memory access was encountered',
    'rank': '3',
    'proc.exitcode': '1',
    'proc.pid': '48133',
    'name': 'scheduler_3',
    'last_traceback': 'Traceback (most recent call last):',
    'port_name': 'nccl_port',
    'error_message': '',
    'signum': 'None',
    'frame': 'None',
    'addr_format': 'http://0.0.0.0:30001',
    'traceback': 'Traceback (most recent call last):',
    'port': '30005',
    'timeout_s': '30',
    'path_or_repo_id': '/models/Kimi-K2.6',
    'filename': 'model.safetensors.index.json',
    'pretrained_model_name_or_path': '/models/Kimi-K2.6',
}
ROW_SAMPLES = {
    'scheduler_oom_killed': {'proc.exitcode': '-9'},
    'subprocess_crashed': {'proc.exitcode': '-9'},
    # the flash_attn.cute import K2.6's vision tower needs (seed 003 on CT200)
    'model_class_import_failed': {'name': 'sglang.srt.models.kimi_k25', 'e': "No module named 'flash_attn.cute'"},
}
PREFIXES = ('[%(asctime)s TP3] ', '[%(asctime)s] ', '')
# Rows that read only the last line of a traceback, never a logged record (the same words logged are warnings SGLang
# carries on past): each of their sources is the message of a `raise`, rendered as that line ("ImportError: ...").
TRACEBACK_ROWS = ('missing_package',)


def _sample(expr, samples, spec):
    key = ast.unparse(expr)
    if key in samples:
        return samples[key]
    if spec and spec.endswith('f'):
        return '12.34'
    if spec and spec.endswith('d'):
        return '7'
    return 'X'


def _percent(text):
    """Fill %-placeholders with sample values (%d 7, %s/%r a word, %.2f a float)."""
    return re.sub(r'%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?([sdrfx%])',
                  lambda m: {'d': '7', 's': 'X', 'r': "'X'", 'f': '12.34', 'x': 'ff', '%': '%'}[m.group(1)], text)


def render(origin, line, row=None):
    """The message the cited string expression produces, with sample values."""
    node = string_at(origin, line)
    samples = dict(SAMPLES, **ROW_SAMPLES.get(row, {}))
    if isinstance(node, ast.Constant):
        return _percent(node.value)
    out = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            out.append(value.value)
        else:
            spec = ''.join(part.value for part in value.format_spec.values) if value.format_spec else ''
            out.append(_sample(value.value, samples, spec))
    return _percent(''.join(out)) if '%' in ''.join(out) and not isinstance(node, ast.JoinedStr) else ''.join(out)


def prefixed(message):
    """A message as journald gets it, one variant per prefix SGLang's logger uses (and bare): the logger prefixes
    only the first line of a record, the others are continuation lines."""
    first, _newline, rest = message.partition('\n')
    stamp = '2026-05-30 14:39:05'
    return [[prefix % {'asctime': stamp} + first] + (rest.split('\n') if rest else []) for prefix in PREFIXES]


def digest(lines):
    entries = [JournalEntry(text, 'c%d' % i, 0, 0, 'inv-1', False) for i, text in enumerate(lines)]
    result = JournalDigest()
    result.feed(entries, 0.0)
    return result


def _cited(kind_filter):
    for kind, name, row in rows():
        for source in row.sources:
            if kind_filter(source):
                yield pytest.param(kind, row, source, id='%s-%s-%s:%s' % (kind, name, source.origin, source.line))


# ---- the table's shape --------------------------------------------------------------------------------------------

def test_every_row_cites_its_sources():
    for kind, name, row in rows():
        assert row.sources, '%s %s cites no source' % (kind, name)
        for source in row.sources:
            assert isinstance(source, table.Source) and source.text, (name, source)
            if is_file(source):
                assert isinstance(source.line, int) and source.line > 0, (name, source)
            else:
                assert source.line is None and not source.origin.endswith('.py'), (name, source)


# ---- SGLang's (and uvicorn's) own lines ---------------------------------------------------------------------------

@pytest.mark.parametrize('kind,row,source', list(_cited(is_file)))
def test_the_cited_line_holds_the_text(release, kind, row, source):
    lines = source_lines(source.origin)
    assert source.line <= len(lines), '%s:%d: past the end of the file' % (source.origin, source.line)
    got = lines[source.line - 1]
    moved = [n for n, text in enumerate(lines, 1) if source.text in text]
    assert source.text in got, '%s %s: %s:%d no longer holds %r (now at %s); it reads %r' % (
        kind, row.name, source.origin, source.line, source.text, moved or 'no line', got.strip())


# Each variant is the journal lines of one record. Lines whose message is not the string at the cited line itself:
# the access log line is uvicorn's format filled with the warmup's request (entrypoints/http_server.py:2374).
def _rendered_variants(kind, row, source):
    if source.origin == 'uvicorn==0.54.0:uvicorn/config.py' and source.text == 'logger.error(exc)':
        return [[_uvicorn_prefix('ERROR') + _socket_bind_error()]]  # bind_socket: config.py:603 sock.bind
    if source.origin == 'uvicorn==0.54.0:uvicorn/config.py':
        return [['INFO:     127.0.0.1:53512 - "GET /model_info HTTP/1.1" 200 OK']]
    if source.origin == 'entrypoints/http_server.py' and 'model_info' in source.text:
        return [['[2026-05-30 14:40:04] INFO:     127.0.0.1:53512 - "GET /model_info HTTP/1.1" 200 OK']]
    if source.origin == 'uvicorn==0.54.0:uvicorn/server.py' and source.text == 'logger.error(exc)':
        return [[_uvicorn_prefix('ERROR') + _bind_error()]]
    if source.origin == 'entrypoints/http_server.py' and source.text == 'logger.error(error)':
        return prefixed(_socket_bind_error())  # _reserve_reuseport_socket: the OSError of probe.bind / sock.bind
    if source.origin == 'layers/quantization/compressed_tensors/utils.py':
        return [[line] for line in _compressed_tensors_too_old()]  # what this line raises with an old compressed-tensors
    message = render(source.origin, source.line, row.name)
    if row.name in TRACEBACK_ROWS:
        return [['%s: %s' % (_raised_at(source.origin, source.line), message.split('\n', 1)[0])]]
    if source.origin.startswith('uvicorn=='):
        return [[_uvicorn_prefix('INFO') + message.split('\n', 1)[0]]]
    return prefixed(message)


def _raised_at(origin, line):
    """The name of the exception that the raise statement spanning the cited line raises."""
    for node in ast.walk(tree(origin)):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.lineno <= line <= node.end_lineno:
            return ast.unparse(node.exc.func).rsplit('.', maxsplit=1)[-1]
    raise AssertionError('%s:%d is in no raise statement' % (origin, line))


def _uvicorn_prefix(level):
    # uvicorn/logging.py:58-64 levelprefix = levelname + ":" + " " * (8 - len(levelname)); config.py:89 fmt
    # "%(levelprefix)s %(message)s"
    return level + ':' + ' ' * (8 - len(level)) + ' '


def _bind_error():
    """The OSError asyncio's create_server raises for a port another socket holds, produced for real."""
    holder = socket.socket()
    holder.bind(('127.0.0.1', 0))
    holder.listen(1)
    try:
        async def bind():
            await asyncio.get_running_loop().create_server(asyncio.Protocol, host='127.0.0.1',
                                                           port=holder.getsockname()[1])
        try:
            asyncio.run(bind())
        except OSError as exc:
            return str(exc)
        raise AssertionError('binding a held port succeeded')
    finally:
        holder.close()


@pytest.mark.parametrize('kind,row,source', list(_cited(is_file)))
def test_the_rendered_line_lands_on_its_row(release, kind, row, source):
    for lines in _rendered_variants(kind, row, source):
        if kind == 'phase':
            phase = table.match_phase(lines[0])
            assert phase is not None and phase.name == row.name, (lines[0], phase and phase.name)
            assert [table.match_fatal(line) for line in lines] == [(None, None)] * len(lines), lines
            assert digest(lines).phases[0].name == row.name, lines
        else:
            names = [getattr(table.match_fatal(line)[0], 'name', None) for line in lines]
            assert row.name in names, (lines, names)
            assert digest(lines).cause()[2] == row.name, lines


# ---- other programs' text, produced for real where it can run ----------------------------------------------------

def _socket_bind_error():
    """str() of the OSError a plain socket.bind gets on a port another socket holds, produced for real."""
    holder = socket.socket()
    holder.bind(('127.0.0.1', 0))
    holder.listen(1)
    other = socket.socket()
    try:
        other.bind(('127.0.0.1', holder.getsockname()[1]))
    except OSError as exc:
        return str(exc)
    finally:
        other.close()
        holder.close()
    raise AssertionError('binding a held port succeeded')


def _argparse_error(argv):
    result = sglang_release.parse(argv)
    assert result.exit_code == 2, argv
    return result.error.rstrip('\n').split('\n')[-1]


def _exception_line(exc):
    return '%s: %s' % (type(exc).__name__, exc)


def _module_not_found():
    try:
        __import__('sgl_kernel_conformance_absent')
    except ModuleNotFoundError as exc:
        return _exception_line(exc)
    raise AssertionError('the absent module imported')


def _compressed_tensors_too_old():
    # What an old compressed-tensors gives layers/quantization/compressed_tensors/utils.py:18 and the checkpoint's
    # format: an enum without the member (CPython's enum messages, for real).
    old = enum.Enum('CompressionFormat', {'dense': 'dense', 'pack_quantized': 'pack-quantized'})
    lines = []
    try:
        getattr(old, 'nvfp4_pack_quantized')
    except AttributeError as exc:
        lines.append(_exception_line(exc))
    try:
        old('nvfp4-pack-quantized')
    except ValueError as exc:
        lines.append(_exception_line(exc))
    return lines


def _file_not_found():
    try:
        open('/models/absent-conformance/config.json')
    except FileNotFoundError as exc:
        return _exception_line(exc)
    raise AssertionError('opened an absent file')


def _gcc_python_h():
    gcc = shutil.which('gcc')
    if gcc is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        src = tmp + '/cuda_utils.c'
        with open(src, 'w') as handle:
            handle.write('#include <Python.h>\nint main(void) { return 0; }\n')
        run = subprocess.run([gcc, '-nostdinc', '-I' + tmp, '-c', src, '-o', tmp + '/cuda_utils.o'],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert run.returncode != 0
    return [line for line in run.stdout.splitlines() if 'fatal error' in line][0]


def _produced(row, source):
    """Real text for the external origins that can run here; None to render the cited text instead."""
    if source.origin.startswith('argparse'):
        argv = {
            'unrecognized arguments: %s': ['--model-path', '/m', '--foo'],
            'argument %(argument_name)s: %(message)s': ['--model-path', '/m', '--tp-size', 'eight'],
            'the following arguments are required: %s': [],
            'ambiguous option: %(option)s could match %(matches)s': ['--model-path', '/m', '--cuda-graph-max-bs', '8'],
        }[source.text]
        return [_argparse_error(argv)]
    if source.origin.startswith('import system'):
        return [_module_not_found()]
    if source.origin.startswith('enum'):
        return _compressed_tensors_too_old()
    if source.origin.startswith('OSError'):
        return [_file_not_found()]
    if source.origin.startswith('socket (CPython'):
        return ['OSError: ' + _socket_bind_error()]
    if source.origin.startswith('asyncio'):
        return [_uvicorn_prefix('ERROR') + _bind_error()]
    if source.origin.startswith('gcc'):
        produced = _gcc_python_h()
        return [produced] if produced else None
    return None


@pytest.mark.parametrize('kind,row,source', list(_cited(lambda source: not is_file(source))))
def test_other_programs_text_lands_on_its_row(release, kind, row, source):
    lines = _produced(row, source)
    if lines is None:
        lines = [_percent(line) for line in source.text.split('\n')[:1]]
    for line in lines:
        sig, _match = table.match_fatal(line)
        assert sig is not None and sig.name == row.name, (line, sig and sig.name)
        assert digest([line]).cause()[2] == row.name, line


def test_the_argparse_texts_are_sglang_serves():
    # prog "sglang serve" (server_args.py:679) whatever the entry point: the pattern must not need another prog.
    line = _argparse_error(['--model-path', '/m', '--cuda-graph-max-bs', '8'])
    assert line.startswith('sglang serve: error: ambiguous option: --cuda-graph-max-bs could match')
    sig, match = table.match_fatal(line)
    assert sig.name == 'bad_argument' and match.group('option') == '--cuda-graph-max-bs'


# ---- the log format the prefixes above assume ---------------------------------------------------------------------

def test_sglang_log_prefix_is_the_releases(release):
    assert 'format = f"[%(asctime)s{maybe_ms}{prefix}] %(message)s"' in release.source('utils/common.py')[2629]
    assert 'datefmt="%Y-%m-%d %H:%M:%S"' in release.source('utils/common.py')[2635]
    assert 'prefix += f" TP{shown_tp}"' in release.source('managers/scheduler.py')[6288]
    formatter = logging.Formatter('[%(asctime)s TP3] %(message)s', datefmt='%Y-%m-%d %H:%M:%S')
    record = logging.LogRecord('sglang', logging.INFO, __file__, 1, 'Init parallel begin.', None, None)
    line = formatter.format(record)
    assert table.strip_prefix(line) == ('TP3', 'Init parallel begin.')
    assert table.has_log_prefix(line)


# ---- a whole start, and what must stay benign ---------------------------------------------------------------------

def test_a_real_start_walks_every_phase_in_order(release):
    lines = []
    for phase in table.PHASES:
        lines += _rendered_variants('phase', phase, phase.sources[0])[0]
    assert [mark.name for mark in digest(lines).phases] == list(table.PHASE_NAMES)


# Real 0.5.23 lines that alarm words make look fatal but are not.
BENIGN_SOURCES = (
    ('utils/network.py', 33, 'Port %d is already in use, trying port %d'),
    ('utils/network.py', 91, 'f"The port {port} is in use, but we could not find the process that uses it."'),
    ('utils/hf_transformers/tokenizer.py', 246, '"Tokenizer for %s is still TokenizersBackend after retries "'),
    ('managers/tokenizer_manager.py', 4068,
     'f"SIGTERM received. {signum=} {frame=}. Draining requests and shutting down..."'),
    ('model_executor/model_runner_components/cuda_graph_setup.py', 788,
     'f"Capture {capture_name} {graph_backend[model_runner.device]} end. "'),
    ('model_executor/model_runner_components/startup_weight_load.py', 538,
     '"Load weight end. Committed real weights after CUDA graph capture in %.2f s "'),
    ('entrypoints/engine.py', 1185, 'logger.info(f"server_args={_server_args_for_logging(server_args)}")'),
)


@pytest.mark.parametrize('origin,line,text', BENIGN_SOURCES)
def test_benign_real_lines_stay_benign(release, origin, line, text):
    assert text in release.source(origin)[line - 1], '%s:%d moved' % (origin, line)
    if 'server_args=' in text:
        # The dump of every field (engine.py:1185): the real field names with their defaults, K2.6's values set.
        fields = ', '.join('%s=%r' % (row['dest'], row['default']) for row in release.flag_table()
                           if row['dest'] not in ('model_path', 'trust_remote_code', 'api_key'))
        message = ("server_args=ServerArgs(model_path='/models/Kimi-K2.6', trust_remote_code=True, "
                   "api_key='********', %s)" % fields)
    else:
        message = render(origin, line)
    for lines in prefixed(message):
        assert [table.match_fatal(line) for line in lines] == [(None, None)] * len(lines), lines
        assert digest(lines).cause() == (None, None, None), lines


def test_the_other_wheels_cited_are_what_the_release_pins(release):
    from packaging.requirements import Requirement
    pins = {Requirement(line).name: Requirement(line) for line in release.requires() if ';' not in line}
    specs = {PACKAGE_FILE.match(source.origin).group('spec') for _kind, _name, row in rows()
             for source in row.sources if PACKAGE_FILE.match(source.origin)}
    assert specs == {'uvicorn==0.54.0', 'transformers==5.19.0'}
    for spec in specs:
        name, version = spec.split('==')
        assert pins[name].specifier.contains(version), '%s: sglang %s requires %s' % (spec, release.release(), pins[name])


# ---- nothing else of the release matches ------------------------------------------------------------------------

# Messages of the release that match a row without being cited by it, each with why that is right.
UNCITED_OK = {
    'model_executor/model_runner_components/startup_weight_load.py:538':
        'overlap mode commits the weights after the capture: a kv_cache line after cuda_graph, and phases only move '
        'forward',
    'speculative/frozen_kv_mtp_worker_v2.py:411': 'the end of a draft capture, inside the cuda_graph phase',
    'speculative/multi_layer_eagle_draft_extend_cuda_graph_runner.py:641':
        'the end of a draft capture, inside the cuda_graph phase',
}


def _messagelines(message):
    template = message['template']
    text = template.replace(sglang_release.PLACEHOLDER, 'X') if sglang_release.PLACEHOLDER in template else \
        _percent(template)
    if message['kind'].startswith('raise '):
        text = message['kind'].split(' ', 1)[1].split('.')[-1] + ': ' + text
    return text.split('\n')


def _citations():
    cited = {}
    for kind, name, row in rows():
        for source in row.sources:
            if SGLANG_FILE.match(source.origin):
                cited.setdefault(source.origin, []).append((source.line, kind, name))
    return cited


def test_no_other_line_of_the_release_matches_a_row(release):
    """Every literal message SGLang logs or raises that a phase or signature matches is one that row cites: a line
    the table would misread (a start-up warning that jumps the phase, a benign line called fatal) fails here, and so
    does a new release's line that a row now matches by accident."""
    cited = _citations()
    wrong = []
    for message in release.messages():
        for line in _messagelines(message):
            phase = table.match_phase(line)
            sig, _match = table.match_fatal(line)
            for kind, name in (('phase', phase and phase.name), ('signature', sig and sig.name)):
                if not name:
                    continue
                rows = {(k, n) for at, k, n in cited.get(message['file'], ())
                        if message['line'] <= at <= message['end_line']}
                where = '%s:%d' % (message['file'], message['line'])
                if (kind, name) not in rows and where not in UNCITED_OK:
                    wrong.append('%s %s (%s) matches %s %s' % (where, message['kind'], line[:100], kind, name))
    assert wrong == [], "\n".join(wrong)
