"""The real SGLang release the collection is checked against, without a GPU, torch or an install.

The version is `RELEASE` in plugins/module_utils/pins.py (the one place for the release and its pins).
`ensure_release()` fetches that wheel once with `pip download --no-deps` into .build/sglang-release/ and unpacks it
there (both cached: later runs, and runs without a network, use the copy). `server_args()` imports the release's own
`sglang.srt.server_args` from the unpacked tree with inert stand-ins for the heavy packages it imports at module
level (torch, triton, numpy, ...: `STUBBED`); the few light ones it needs for real (msgspec, packaging, requests,
typing_extensions, pydantic) come from tests/requirements.txt. Nothing else of SGLang is imported, so the stand-ins
are only ever asked for at import time (decorators, base classes, constants), never to compute.

API, for the conformance tests and the stand-in's flag-table generator:
  openai_protocol() (protocol, usage_processor) modules of the release: its OpenAI response models and usage
  real_parser()    the argparse parser exactly as server_args.py:679-680 builds it (prog "sglang serve")
  parse(argv)      -> Parsed(ok, error, exit_code, namespace): argparse's stderr and SystemExit captured
  flag_table()     JSON-able description of every action of the real parser, in parser order
  source(path)     lines of a file of the release, path relative to sglang/srt/ ("entrypoints/engine.py")
  release_file(p)  absolute path of a file of the unpacked release, relative to the wheel root ("sglang/...")
  requires()       the wheel's Requires-Dist lines (for pins such as compressed-tensors)
  messages()       every literal message the release logs or raises (file, line, kind, template), cached
  package_source(spec, path)  lines of a file of another wheel the table cites ('uvicorn==0.54.0'), fetched once

Run as a script to print flag_table() as JSON: `.venv/bin/python tests/conformance/sglang_release.py flags`.
Needs Python 3.11 (the wheel is cp311); `make conformance` runs it with the .venv.
"""

import abc
import argparse
import contextlib
import functools
import importlib.abc
import importlib.machinery
import io
import json
import os
import re
import shutil
import subprocess
import sys
import types
import zipfile
from collections import namedtuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CACHE = os.path.join(ROOT, '.build', 'sglang-release')
PINS_FILE = os.path.join(ROOT, 'plugins', 'module_utils', 'pins.py')

# Imported at module level by sglang.srt.server_args and what it imports, and not worth installing: each becomes an
# inert module (found by importing server_args with nothing stubbed and adding each ModuleNotFoundError's package).
STUBBED = ('torch', 'triton', 'numpy', 'psutil', 'orjson', 'pybase64', 'PIL', 'starlette', 'zmq',
           # and by entrypoints/openai/protocol.py (openai_protocol()): the OpenAI SDK's Responses types (annotations
           # and bases of the Responses API models only) and sglang/utils.py's notebook helpers
           'openai', 'IPython', 'tqdm')
# Attributes that must be absent from a stand-in: sglang probes them with hasattr() to detect other accelerators
# (utils/common.py:188-197 raises "torch_npu detected, but NPU device is not available" if torch.npu exists).
ABSENT = {'torch': frozenset(('npu', 'musa', 'hpu', 'mlu'))}
VERSIONS = {'torch': '2.14.1'}  # the torch pin of the wheel; utils/common.py:120 parses torch.__version__

Parsed = namedtuple('Parsed', 'ok error exit_code namespace')
PLACEHOLDER = '\x00'  # an f-string placeholder in messages() templates


def release():
    """The pinned SGLang version: RELEASE = '...' in pins.py (read as text: no import needed)."""
    with open(PINS_FILE) as handle:
        match = re.search(r"^RELEASE = '([^']+)'", handle.read(), re.M)
    if not match:
        raise RuntimeError('%s has no RELEASE = \'X.Y.Z\' line' % PINS_FILE)
    return match.group(1)


def _wheel_dir():
    return os.path.join(CACHE, release())


@functools.lru_cache(maxsize=None)
def ensure_release():
    """Path of the unpacked wheel (holding sglang/ and sglang-X.dist-info/), downloading and unpacking it once."""
    version = release()
    target = _wheel_dir()
    unpacked = os.path.join(target, 'src')
    marker = os.path.join(unpacked, '.unpacked')
    if os.path.exists(marker):
        return unpacked
    wheels = [name for name in os.listdir(target) if name.endswith('.whl')] if os.path.isdir(target) else []
    if not wheels:
        os.makedirs(target, exist_ok=True)
        subprocess.run([sys.executable, '-m', 'pip', 'download', '-q', '--no-deps', '--only-binary=:all:',
                        '--python-version', '3.11', '--platform', 'manylinux_2_34_x86_64',
                        'sglang==%s' % version, '-d', target], check=True)
        wheels = [name for name in os.listdir(target) if name.endswith('.whl')]
    wheels = [name for name in wheels if name.startswith('sglang-%s-' % version)]
    if len(wheels) != 1:
        raise RuntimeError('expected one sglang-%s wheel in %s, found %r' % (version, target, wheels))
    partial = unpacked + '.partial'
    if os.path.exists(partial):
        shutil.rmtree(partial)
    with zipfile.ZipFile(os.path.join(target, wheels[0])) as wheel:
        wheel.extractall(partial)
    if os.path.exists(unpacked):
        shutil.rmtree(unpacked)
    os.rename(partial, unpacked)
    with open(marker, 'w') as handle:
        handle.write(wheels[0] + '\n')
    return unpacked


def release_file(path):
    """Absolute path of `path` (relative to the wheel root, e.g. 'sglang/srt/server_args.py') in the release."""
    return os.path.join(ensure_release(), path)


def source(path):
    """Lines (without newlines) of sglang/srt/<path> of the release; source(p)[n - 1] is line n."""
    with open(release_file(os.path.join('sglang', 'srt', path)), encoding='utf-8') as handle:
        return handle.read().split('\n')


def requires():
    """The Requires-Dist values of the wheel's METADATA, e.g. 'compressed-tensors==0.18.0'."""
    meta = release_file('sglang-%s.dist-info/METADATA' % release())
    with open(meta, encoding='utf-8') as handle:
        return [line.split(':', 1)[1].strip() for line in handle if line.startswith('Requires-Dist:')]


@functools.lru_cache(maxsize=None)
def package(spec):
    """Unpacked wheel of another pure-Python package cited by the table (e.g. 'uvicorn==0.54.0'), fetched once."""
    target = os.path.join(CACHE, spec)
    unpacked = os.path.join(target, 'src')
    if os.path.exists(os.path.join(unpacked, '.unpacked')):
        return unpacked
    os.makedirs(target, exist_ok=True)
    if not [name for name in os.listdir(target) if name.endswith('.whl')]:
        subprocess.run([sys.executable, '-m', 'pip', 'download', '-q', '--no-deps', '--only-binary=:all:', spec,
                        '-d', target], check=True)
    wheels = [name for name in os.listdir(target) if name.endswith('.whl')]
    if len(wheels) != 1:
        raise RuntimeError('expected one wheel for %s in %s, found %r' % (spec, target, wheels))
    shutil.rmtree(unpacked, ignore_errors=True)
    with zipfile.ZipFile(os.path.join(target, wheels[0])) as wheel:
        wheel.extractall(unpacked)
    with open(os.path.join(unpacked, '.unpacked'), 'w') as handle:
        handle.write(wheels[0] + '\n')
    return unpacked


def package_source(spec, path):
    """Lines of `path` (relative to the wheel root) in the wheel of `spec`."""
    with open(os.path.join(package(spec), path), encoding='utf-8') as handle:
        return handle.read().split('\n')


def _template(node):
    """A string expression as a template: f-string placeholders become PLACEHOLDER, constants stay (None: not a
    string)."""
    import ast  # pylint: disable=import-outside-toplevel
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return ''.join(value.value if isinstance(value, ast.Constant) else PLACEHOLDER for value in node.values)
    return None


def messages():
    """Every message the release's own code logs or raises with a literal text, as dicts {file (under sglang/srt/),
    line, end_line, kind ('logger.warning', 'raise ValueError', ...), template (PLACEHOLDER for each f-string
    placeholder, %-placeholders as written)}. Parsing 2000 files takes a while: cached next to the unpacked wheel."""
    import ast  # pylint: disable=import-outside-toplevel
    cache = os.path.join(_wheel_dir(), 'messages-v1.json')  # bump when this function changes
    if os.path.exists(cache):
        with open(cache) as handle:
            return json.load(handle)
    root = os.path.join(ensure_release(), 'sglang', 'srt')
    found = []
    for dirpath, dirnames, files in os.walk(root):
        dirnames.sort()
        for name in sorted(files):
            if not name.endswith('.py'):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding='utf-8') as handle:
                text = handle.read()
            if 'logger' not in text and 'raise' not in text:
                continue
            for node in ast.walk(ast.parse(text)):
                call, kind = None, None
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args and \
                        node.func.attr in ('debug', 'info', 'warning', 'error', 'exception', 'critical',
                                           'info_once', 'warning_once') and 'log' in ast.unparse(node.func.value):
                    call, kind = node, 'logger.' + node.func.attr
                elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                    call, kind = node.exc, 'raise ' + ast.unparse(node.exc.func)
                if call is None:
                    continue
                template = _template(call.args[0])
                if template is not None:
                    found.append({'file': os.path.relpath(path, root), 'line': call.args[0].lineno,
                                  'end_line': call.args[0].end_lineno, 'kind': kind, 'template': template})
    with open(cache + '.tmp', 'w') as handle:
        json.dump(found, handle)
    os.rename(cache + '.tmp', cache)
    return found


# ---- inert stand-ins for the heavy imports -------------------------------------------------------------------------

class _Inert(abc.ABCMeta):
    """Metaclass of everything a stand-in module hands out: a class (so it can be subclassed, also next to ABC) that
    answers any attribute, call, subscript, `|`, context or number protocol with another inert class or a zero."""

    def __getattr__(cls, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return _Inert(name, (_Stand,), {})

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]  # used as a decorator: keep the function
        return _Inert('result', (_Stand,), {})

    def __getitem__(cls, key):
        return cls

    def __or__(cls, other):
        return cls

    __ror__ = __or__

    def __iter__(cls):
        return iter(())

    def __bool__(cls):
        return False

    def __int__(cls):
        return 0

    __index__ = __int__

    def __float__(cls):
        return 0.0

    def __len__(cls):
        return 0

    def __contains__(cls, item):
        return False

    def __enter__(cls):
        return cls

    def __exit__(cls, *exc):
        return False


class _Stand(metaclass=_Inert):
    def __init_subclass__(cls, **kwargs):  # `class X(TypedDictStandIn, total=False)` (protocol.py:1901)
        super().__init_subclass__()

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        # a stand-in type as a pydantic field (protocol.py's Responses API models): anything validates
        from pydantic_core import core_schema  # pylint: disable=import-outside-toplevel
        return core_schema.any_schema()


class _StandModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith('__') or name in ABSENT.get(self.__name__, ()):
            raise AttributeError(name)
        return _Inert(name, (_Stand,), {})


class _StandFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in STUBBED:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _StandModule(spec.name)

    def exec_module(self, module):
        module.__path__ = []
        module.__version__ = VERSIONS.get(module.__name__, '0.0.0')


@functools.lru_cache(maxsize=None)
def server_args():
    """The release's sglang.srt.server_args module (imported once per process, from the unpacked wheel)."""
    if sys.version_info[:2] != (3, 11):
        raise RuntimeError('the sglang %s wheel is cp311: run this with Python 3.11 (the .venv)' % release())
    unpacked = ensure_release()
    loaded = sys.modules.get('sglang')
    if loaded is not None and getattr(loaded, '__path__', [None])[0] != os.path.join(unpacked, 'sglang'):
        raise RuntimeError('another sglang is already imported: %r' % loaded)
    if not any(isinstance(finder, _StandFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _StandFinder())
    # sglang/__init__.py pulls in the whole frontend language (and torch for real); server_args needs none of it,
    # so the top package is an empty one over the unpacked directory.
    package = types.ModuleType('sglang')
    package.__path__ = [os.path.join(unpacked, 'sglang')]
    package.__file__ = os.path.join(unpacked, 'sglang', '__init__.py')
    sys.modules['sglang'] = package
    import sglang.srt.server_args as module  # pylint: disable=import-outside-toplevel
    return module


@functools.lru_cache(maxsize=None)
def openai_protocol():
    """The release's entrypoints/openai/protocol.py and usage_processor.py (its pydantic response models and
    UsageProcessor), imported as server_args() imports its module: (protocol, usage_processor)."""
    server_args()
    from sglang.srt.entrypoints.openai import protocol  # pylint: disable=import-outside-toplevel
    from sglang.srt.entrypoints.openai import usage_processor as usage  # pylint: disable=import-outside-toplevel
    return protocol, usage


def real_parser():
    """A fresh parser exactly as prepare_server_args builds it (server_args.py:679-680)."""
    parser = argparse.ArgumentParser(prog='sglang serve')
    server_args().ServerArgs.add_cli_args(parser)
    return parser


@functools.lru_cache(maxsize=1)
def _cached_parser():
    return real_parser()


def parse(argv):
    """Parse argv (without the program) with the real parser: Parsed(ok, error text, exit code, namespace).

    error is argparse's stderr (usage plus `sglang serve: error: ...`), exit_code the SystemExit code (2 for a
    bad argument, as a real `sglang serve` exits), namespace the parsed argparse.Namespace when ok.
    """
    parser = _cached_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            namespace = parser.parse_args(list(argv))
    except SystemExit as exc:
        return Parsed(False, err.getvalue(), exc.code, None)
    return Parsed(True, err.getvalue(), 0, namespace)


def _jsonable(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_jsonable(item) for item in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, dict):
        return {str(key): _jsonable(item) for key, item in value.items()}
    if value is argparse.SUPPRESS:
        return value
    if isinstance(value, type) and isinstance(value, _Inert):
        raise TypeError('a stand-in object leaked into the parser: %r' % value)
    return {'repr': repr(value)}


def _type_name(kind):
    if kind is None:
        return None
    if isinstance(kind, _Inert):
        raise TypeError('a stand-in type leaked into the parser: %r' % kind)
    return getattr(kind, '__qualname__', None) or getattr(kind, '__name__', None) or type(kind).__name__


def flag_table():
    """Every action of the real parser, in order, as JSON-able dicts (the stand-in's flag table is generated from
    this and must stay equal to it)."""
    table = []
    for action in _cached_parser()._actions:  # pylint: disable=protected-access
        if isinstance(action, argparse._HelpAction):  # pylint: disable=protected-access
            continue
        help_text = action.help if isinstance(action.help, str) else None
        table.append({
            'option_strings': list(action.option_strings),
            'dest': action.dest,
            'action': type(action).__name__,
            'nargs': action.nargs,
            'const': _jsonable(action.const),
            'type': _type_name(action.type),
            'choices': _jsonable(list(action.choices)) if action.choices is not None else None,
            'default': _jsonable(action.default),
            'required': bool(action.required),
            'metavar': _jsonable(action.metavar),
            'deprecated': bool(getattr(action, 'deprecated', False)) or bool(
                help_text and re.search(r'\bdeprecated\b', help_text, re.I)),
            'help': help_text,
        })
    return table


def main(argv):
    if argv[:1] == ['flags']:
        json.dump({'release': release(), 'flags': flag_table()}, sys.stdout, indent=1, sort_keys=True)
        sys.stdout.write('\n')
        return 0
    if argv[:1] == ['parse']:
        result = parse(argv[1:])
        sys.stderr.write(result.error)
        return result.exit_code
    sys.stderr.write('usage: sglang_release.py flags | parse ARGS...\n')
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
