"""Where the signature table's rows cite the release, and what stands at a cited line: shared by the conformance
tests of the table (test_signatures.py) and of the stand-in (test_standin.py).

A source's origin is a path under sglang/srt/ of the wheel ("managers/scheduler.py") or a file of another wheel the
release pins ("uvicorn==0.54.0:uvicorn/server.py"); anything else is text of another program, produced for real.
"""

import ast
import re

import sglang_release
from ansible_collections.llmops.sglang.plugins.module_utils import sglang_signatures as table

SGLANG_FILE = re.compile(r'^[\w/]+\.py$')
PACKAGE_FILE = re.compile(r'^(?P<spec>[\w.-]+==[\w.]+):(?P<path>[\w/.]+\.py)$')


def tree(origin):
    """The cited file parsed."""
    if SGLANG_FILE.match(origin):
        path = 'sglang/srt/' + origin
        with open(sglang_release.release_file(path), encoding='utf-8') as handle:
            return ast.parse(handle.read())
    spec, path = PACKAGE_FILE.match(origin).group('spec', 'path')
    return ast.parse('\n'.join(sglang_release.package_source(spec, path)))


def source_lines(origin):
    """The cited file's lines (1-based index: [line - 1])."""
    if SGLANG_FILE.match(origin):
        return sglang_release.source(origin)
    match = PACKAGE_FILE.match(origin)
    return sglang_release.package_source(match.group('spec'), match.group('path'))


def string_at(origin, line):
    """The outermost string expression (a str constant or an f-string) spanning the cited line."""
    found = None
    for node in ast.walk(tree(origin)):
        if isinstance(node, (ast.JoinedStr, ast.Constant)) and node.lineno <= line <= node.end_lineno:
            if isinstance(node, ast.Constant) and not isinstance(node.value, str):
                continue
            if found is None or (node.end_lineno - node.lineno) > (found.end_lineno - found.lineno):
                found = node
    assert found is not None, 'no string expression at %s:%d' % (origin, line)
    return found


def rows():
    """(kind, name, row) of every phase and signature of the table."""
    return [('phase', phase.name, phase) for phase in table.PHASES] + [
        ('signature', sig.name, sig) for sig in table.FATAL_SIGNATURES]


def is_file(source):
    """Whether the source cites a file (of the release or a wheel it pins) rather than another program's text."""
    return bool(SGLANG_FILE.match(source.origin) or PACKAGE_FILE.match(source.origin))


# Cited messages the release extends after the cited expression (`msg += ...`): matched as a prefix.
# tqdm lines are the description then the bar.
# distributed/bootstrap.py:445 `msg = "..."` then `msg += f"{pre_model_load_memory=}, ..."` (:446-448);
# utils/common.py:2430 and :2435 `f"..." + message` (assert_pkg_version's caller's advice).
EXTENDED = {('managers/scheduler_components/metrics_reporter.py', 754), ('model_loader/weight_utils.py', 1166),
            ('model_executor/runner/decode_cuda_graph_runner.py', 1343), ('distributed/bootstrap.py', 445),
            ('utils/common.py', 2430), ('utils/common.py', 2435)}
_EXCEPTION = r'(?:[A-Za-z_][\w.]*: )?'          # "RuntimeError: " when it is an exception's traceback line
_UVICORN = r'(?:(?:INFO|WARNING|ERROR): +)?'     # uvicorn's levelprefix (uvicorn/logging.py:58-64)


def message_pattern(origin, line):
    """The cited message as a regex for a journal line's message (its log prefix stripped): placeholders match
    anything, the first line only (journald splits the rest off), an exception's type or uvicorn's level may lead."""
    node = string_at(origin, line)
    if isinstance(node, ast.Constant):
        parts = re.split(r'(%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrf])', node.value)
        body = ''.join('.*?' if index % 2 else re.escape(part) for index, part in enumerate(parts))
    else:
        body = ''.join(re.escape(value.value) if isinstance(value, ast.Constant) else '.*?' for value in node.values)
    # One line of the message: journald gets each line apart (the first with the log prefix). The first, unless the
    # cited source line is the one that writes a later line (transformers' `f"{error_message} ...\n"
    # f"Please pass the argument ..."`, dynamic_module_utils.py:788-791): the line whose words the cited line holds.
    lines = body.split('\\\n')
    cited = source_lines(origin)[line - 1]
    later = [index for index, text in enumerate(lines[1:], 1)
             if any(len(word) >= 12 and word in cited for word in re.split(r'\.\*\?', text.replace('\\', '')))]
    body = lines[later[0]] if later and not any(
        len(word) >= 12 and word in cited for word in re.split(r'\.\*\?', lines[0].replace('\\', ''))) else lines[0]
    tail = '' if (origin, line) in EXTENDED else '$'
    return re.compile('^' + _EXCEPTION + _UVICORN + body + tail)


def source_pattern(source):
    """What the release (or the other program a source names) prints for one source of a table row, as a regex for a
    journal line's message: the cited message (message_pattern); for another program's text, or a cited line that is
    code (uvicorn's `logger.error(exc)`), the row's sample text with its %-placeholders matching anything (a prefix:
    samples may be shortened; ' / ' separates alternatives)."""
    if is_file(source):
        try:
            return message_pattern(source.origin, source.line)
        except AssertionError:
            pass
    bodies = []
    for sample in source.text.split(' / '):
        parts = re.split(r'(%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdrf])', sample.split('\n', 1)[0])
        bodies.append(''.join('.*?' if index % 2 else re.escape(part) for index, part in enumerate(parts)))
    return re.compile('^' + _EXCEPTION + _UVICORN + '(?:%s)' % '|'.join(bodies))
