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
