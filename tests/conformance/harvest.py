"""Every failure text the SGLang release can print while `sglang serve` starts or serves a request, read from the
wheel's source with the `ast` module.

What counts as a failure text (each with its file and line, relative to sglang/srt/ of the wheel):
  raise X(msg)                the message of a raised exception, shown as the traceback's last line "X: msg"
                              (msg: a string literal, an f-string, a %-format, a concatenation, a "...".format(), or
                              a local variable assigned one of those earlier in the same function)
  logger.error / critical / exception (msg, ...)
                              a record at ERROR or above
  logger.warning (msg, ...)   only where the same block then exits (sys.exit, os._exit, kill_process_tree, a raise)
  sys.exit(msg)               the message sys.exit prints to stderr
  any log or print call right before a silent sys.exit / os._exit / kill_process_tree that no rule above took
                              (the last words of that exit path)

Templates: f-string placeholders become "{expr}" with the expression's source text, %-formats stay as written,
concatenations join their string parts with "{expr}" for the other operands. A text's identity is (file, kind,
template): its line is where it is now, so a line that merely moved is the same text (see failure_coverage.yml).

SCOPE is the part of sglang/srt/ that a `sglang serve` start and its requests run; see the comment there.

Run as a script to print the harvest as JSON (`python tests/conformance/harvest.py [summary | draft | counts]`).
"""

import ast
import functools
import os
import sys
import warnings

import sglang_release

# The paths (under sglang/srt/) a start of `sglang serve` and its requests run, for the collection's deployments
# (one node or several, TP8, a text model such as K2.6, no disaggregation):
#   entrypoints/     the CLI, engine (launches and watches the subprocesses), HTTP server, OpenAI serving code
#   managers/        scheduler, tokenizer and detokenizer managers, data-parallel controller, their mixins
#   model_executor/  the model runner: memory pools sizing, CUDA graphs, forward
#   model_loader/    checkpoint discovery and weight loading (shards, safetensors)
#   distributed/     process groups, NCCL / custom all-reduce communicators
#   mem_cache/       KV cache pools, radix cache, allocators (and the hierarchical cache, when enabled)
#   layers/quantization/  the checkpoint's quantization config (K2.6: compressed-tensors)
#   utils/           what all of the above call (ports, processes, watchdog, HF config and tokenizer loading)
#   server_args.py, arg_groups/   ServerArgs.__post_init__ and the resolution hooks it runs: every start validates
#                    and resolves its flags there before anything loads
#   configs/model_config.py, load_config.py, device_config.py   the model's config.json read into a ModelConfig
#   models/registry.py   the architecture lookup (the one file of models/ every start runs)
# Left out: the rest of models/ (one file per architecture, K2.6's shared code is in layers/ and model_executor/) and
# of configs/ (other architectures' config classes),
# disaggregation/, speculative/, lora/, multimodal/, function_call/ and the other feature packages a start without
# their flags never imports, and the Rust router. A new release that moves start-up code elsewhere shows up in the
# fleet tests' journals, not here: widen SCOPE then.
SCOPE = ('entrypoints/', 'managers/', 'model_executor/', 'model_loader/', 'distributed/', 'mem_cache/',
         'layers/quantization/', 'utils/', 'server_args.py', 'arg_groups/', 'configs/model_config.py',
         'configs/load_config.py', 'configs/device_config.py', 'models/registry.py')

LOG_LEVELS_ALWAYS = ('error', 'exception', 'critical', 'fatal')
LOG_LEVELS = LOG_LEVELS_ALWAYS + ('warning', 'warn', 'warning_once', 'info', 'info_once', 'debug')
EXITS = ('sys.exit', 'exit', 'os._exit', 'kill_process_tree', 'kill_itself_when_parent_died')


def _is_logger(func):
    """logger.error, self.logger.error, logging.error, log.error, ..."""
    return isinstance(func, ast.Attribute) and 'log' in ast.unparse(func.value).lower()


def template(node, names=None):
    """A string expression as a template, or None when it is not one."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.JoinedStr):
        out = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                out.append(value.value)
            else:
                spec = ''
                if value.format_spec is not None:
                    spec = ':' + (template(value.format_spec) or '')
                conv = '!' + chr(value.conversion) if value.conversion not in (-1, None) else ''
                out.append('{%s%s%s}' % (ast.unparse(value.value), conv, spec))
        return ''.join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return template(node.left, names)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = template(node.left, names), template(node.right, names)
        if left is None and right is None:
            return None
        return (left if left is not None else '{%s}' % ast.unparse(node.left)) + \
            (right if right is not None else '{%s}' % ast.unparse(node.right))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == 'format':
        return template(node.func.value, names)
    if isinstance(node, ast.Name) and names and node.id in names:
        return names[node.id]
    return None


def _call_name(node):
    if isinstance(node, ast.Call):
        return ast.unparse(node.func)
    return None


def _exit_call(stmt):
    """The exit call a statement makes directly (not inside a nested function), or None."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        name = _call_name(stmt.value)
        if name in EXITS or (name or '').endswith('.kill_process_tree'):
            return stmt.value
    return None


def _ends_in_exit(stmts):
    return any(_exit_call(s) is not None or isinstance(s, ast.Raise) for s in stmts)


class _Visitor(ast.NodeVisitor):
    def __init__(self, path):
        self.path = path
        self.found = []
        self.names = [{}]
        self.scopes = []

    def add(self, node, kind, text):
        if text is None or not text.strip():
            return
        self.found.append({'file': self.path, 'line': node.lineno, 'end_line': node.end_lineno, 'kind': kind,
                           'template': text, 'scope': self.scopes[0] if self.scopes else None})

    def _function(self, node):
        self.names.append({})
        self.scopes.append(node.name)
        self.generic_visit(node)
        self.scopes.pop()
        self.names.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _function  # noqa: N815

    def visit_ClassDef(self, node):  # noqa: N802
        self.scopes.append(node.name)
        self.generic_visit(node)
        self.scopes.pop()

    def _remember(self, stmt):
        """A local name bound to a message (msg = f"..."; msg += f"..."), for a later raise or log of it."""
        names = self.names[-1]
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            text = template(stmt.value, names)
            if text is not None:
                names[stmt.targets[0].id] = text
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add) and isinstance(stmt.target, ast.Name) \
                and stmt.target.id in names:
            more = template(stmt.value, names)
            names[stmt.target.id] += more if more is not None else '{%s}' % ast.unparse(stmt.value)

    def visit_Raise(self, node):
        exc = node.exc
        if isinstance(exc, ast.Call) and exc.args:
            text = template(exc.args[0], self.names[-1])
            self.add(exc.args[0], 'raise ' + ast.unparse(exc.func), text)
        self.generic_visit(node)

    def _block(self, stmts):
        taken = set()
        for index, stmt in enumerate(stmts):
            self._remember(stmt)
            call = stmt.value if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None
            if call is not None and _is_logger(call.func) and call.args and call.func.attr in LOG_LEVELS:
                level = call.func.attr
                exits = _ends_in_exit(stmts[index + 1:])
                text = template(call.args[0], self.names[-1])
                if text is None and exits and level in LOG_LEVELS_ALWAYS:
                    # logger.error(exc) and then an exit: the exception's own words are the last ones printed.
                    self.add(call.args[0], 'logger.%s before exit' % level, '{%s}' % ast.unparse(call.args[0]))
                    taken.add(index)
                elif level in LOG_LEVELS_ALWAYS or (level.startswith('warn') and exits):
                    self.add(call.args[0], 'logger.' + level, text)
                    taken.add(index)
            exit_call = _exit_call(stmt)
            if exit_call is None:
                continue
            name = _call_name(exit_call)
            if name in ('sys.exit', 'exit') and exit_call.args and template(exit_call.args[0], self.names[-1]):
                self.add(exit_call.args[0], name, template(exit_call.args[0], self.names[-1]))
                continue
            if index and (index - 1) not in taken:
                before = stmts[index - 1]
                call = before.value if isinstance(before, ast.Expr) and isinstance(before.value, ast.Call) else None
                if call is not None and call.args and (_is_logger(call.func) or _call_name(call) == 'print'):
                    text = template(call.args[0], self.names[-1])
                    what = 'print' if _call_name(call) == 'print' else 'logger.' + call.func.attr
                    self.add(call.args[0], '%s before %s' % (what, name.rsplit('.', maxsplit=1)[-1]), text)

    def generic_visit(self, node):
        for field in ('body', 'orelse', 'finalbody', 'handlers'):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                self._block(stmts)
        super().generic_visit(node)


def _called_at_import(tree):
    """Names of the module's functions that its top level calls (`_check_all_req_types()`): they run at import."""
    return set(stmt.value.func.id for stmt in tree.body if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
               and isinstance(stmt.value.func, ast.Name))


def in_scope(path):
    return any(path == s or (s.endswith('/') and path.startswith(s)) for s in SCOPE)


@functools.lru_cache(maxsize=None)
def harvest():
    """Every failure text of SCOPE: a tuple of dicts {file, line, end_line, kind, template, scope (the top-level
    function or class it is in, None at module level), import_time (scope is a function the module calls at import)},
    in file order. Cached
    next to the unpacked wheel under the hash of this file (a changed harvester harvests again)."""
    import hashlib  # pylint: disable=import-outside-toplevel
    import json  # pylint: disable=import-outside-toplevel
    with open(os.path.abspath(__file__), 'rb') as handle:
        digest = hashlib.sha256(handle.read()).hexdigest()[:16]
    cache = os.path.join(os.path.dirname(sglang_release.ensure_release()), 'harvest-%s.json' % digest)
    if os.path.exists(cache):
        with open(cache, encoding='utf-8') as handle:
            return tuple(json.load(handle))
    found = _harvest()
    with open(cache + '.tmp', 'w', encoding='utf-8') as handle:
        json.dump(found, handle)
    os.replace(cache + '.tmp', cache)
    for name in os.listdir(os.path.dirname(cache)):  # an older harvester's cache is never read again
        if name.startswith('harvest-') and name.endswith('.json') and name != os.path.basename(cache):
            os.remove(os.path.join(os.path.dirname(cache), name))
    return tuple(found)


def _harvest():
    root = os.path.join(sglang_release.ensure_release(), 'sglang', 'srt')
    found = []
    for dirpath, dirnames, files in os.walk(root):
        dirnames.sort()
        for name in sorted(files):
            path = os.path.relpath(os.path.join(dirpath, name), root)
            if not name.endswith('.py') or not in_scope(path):
                continue
            with open(os.path.join(root, path), encoding='utf-8') as handle, warnings.catch_warnings():
                warnings.simplefilter('ignore', (SyntaxWarning, DeprecationWarning))  # the release's own "\(" escapes
                visitor = _Visitor(path)
                tree = ast.parse(handle.read())
                visitor.visit(tree)
            at_import = _called_at_import(tree)
            for entry in visitor.found:
                entry['import_time'] = entry['scope'] in at_import
            found += sorted(visitor.found, key=lambda e: (e['line'], e['kind']))
    return found


def key(entry):
    """The stable identity of a text: what it says and how, not where."""
    return (entry['file'], entry['kind'], entry['template'])


def texts():
    """The harvest grouped by identity: {(file, kind, template): [lines]}, a text printed from several lines once."""
    grouped = {}
    for entry in harvest():
        grouped.setdefault(key(entry), []).append(entry['line'])
    return grouped


# ---- rendering a template as 0.5.23 prints it -------------------------------------------------------------------

LOG_PREFIX = '[2026-05-30 14:39:05 TP3] '  # utils/common.py:2630 with " TP<n>" (managers/scheduler.py:6289)

# Realistic values for placeholders, by the placeholder's source text; anything else is 'X' (or a number for
# %d/%f and {..:.2f}). A table entry may give its own (`sample`) where the value decides the reading.
SAMPLES = {
    'traceback': 'Traceback (most recent call last):',
    'last_traceback': 'Traceback (most recent call last):',
    'self.debug_name': 'Scheduler',
    'name': 'scheduler_3',
    'proc.pid': '48133',
    'proc.exitcode': '1',
    'rank': '3',
    'port': '30005',
    'port_name': 'nccl_port',
    'bootstrap_port': '8998',
    'timeout_s': '30',
    'error_message': '',
    'self.watchdog_timeout': '300',
    'self.soft': 'False',
}


def _placeholders(text):
    """(start, end, inner) of each top-level {...} of a template ('{{' is a literal brace)."""
    out, depth, start, i = [], 0, None, 0
    while i < len(text):
        char = text[i]
        if depth == 0 and text.startswith('{{', i):
            i += 2
            continue
        if char == '{':
            if depth == 0:
                start = i
            depth += 1
        elif char == '}' and depth:
            depth -= 1
            if depth == 0:
                out.append((start, i + 1, text[start + 1:i]))
        i += 1
    return out


def _value(inner, samples):
    expr, spec = inner, ''
    for sep in ('!r:', '!s:', '!r', '!s', ':'):
        head, found, tail = inner.rpartition(sep)
        if found and head and head.count('[') == head.count(']') and head.count('(') == head.count(')') \
                and not head.endswith(('=', '!', '<', '>')) and "'" not in tail and '"' not in tail:
            expr, spec = head, tail
            break
    if expr in samples:
        return samples[expr]
    if spec.endswith(('f', 'g', 'e')):
        return '12.34'
    if spec.endswith('d'):
        return '7'
    return 'X'


def percent(text):
    """Fill %-placeholders with sample values (%d 7, %s/%r a word, %.2f a float)."""
    import re  # pylint: disable=import-outside-toplevel
    return re.sub(r'%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?([sdrfxgi%])',
                  lambda m: {'d': '7', 'i': '7', 's': 'X', 'r': "'X'", 'f': '12.34', 'g': '12.34', 'x': 'ff',
                             '%': '%'}[m.group(1)], text)


def render(entry, samples=None):
    """The journal lines a text makes, as 0.5.23 prints it: a log record with SGLang's prefix on its first line, a
    raised exception as its traceback's last line ("RuntimeError: ..."), sys.exit's message bare."""
    values = dict(SAMPLES, **(samples or {}))
    text = entry['template']
    if '%' in text:
        text = percent(text)
    holes = _placeholders(text)
    for start, end, inner in reversed(holes):
        text = text[:start] + _value(inner, values) + text[end:]
    text = text.replace('{{', '{').replace('}}', '}')
    kind = entry['kind']
    if kind.startswith('raise '):
        name = kind.split(' ', 1)[1].split('.')[-1]
        lines = (name + ': ' + text).split('\n')
    elif kind.startswith('logger.') or ' before ' in kind:
        lines = (LOG_PREFIX + text).split('\n') if not kind.startswith('print') else text.split('\n')
    else:
        lines = text.split('\n')
    return lines


# ---- a first classification of new texts (a drafting aid: failure_coverage.yml, reviewed, is the truth) ----------

# Paths of features a `sglang serve` of K2.6 as the collection deploys it does not turn on (each needs its flag, another
# checkpoint format or another accelerator): texts there are waived `feature_off`. Not all of mem_cache/unified_cache/:
# the default tree cache is UnifiedRadixCache (mem_cache/registry.py:83-165) with the FULL component and the Rust tree
# core (environ.py:741), so its registry, base and FULL components and tree-core interface run at every start; its
# storage linkers (hierarchical cache), SWA and Mamba components (hybrid models) and the Python tree core (a fallback
# from the Rust one, tree_core_registry.py:44-121) do not.
FEATURE_OFF = (
    'mem_cache/storage/', 'mem_cache/hybrid_cache/', 'mem_cache/pool_host/', 'mem_cache/unified_cache/linker',
    'mem_cache/unified_cache/unified_cache_linker.py', 'mem_cache/unified_cache/storage_attachment.py',
    'mem_cache/unified_cache/unified_tree_core.py', 'mem_cache/unified_cache/components/swa.py',
    'mem_cache/unified_cache/components/mamba.py', 'mem_cache/buffer_mode/', 'mem_cache/hicache',
    'mem_cache/memory_pool_host.py', 'managers/cache_controller.py',
    'managers/hisparse', 'mem_cache/embedding_cache', 'mem_cache/sparsity/', 'mem_cache/hisparse',
    'entrypoints/grpc', 'entrypoints/anthropic/', 'entrypoints/openai/realtime/', 'entrypoints/openai/serving_transcription',
    'entrypoints/openai/streaming_asr', 'entrypoints/openai/responses_tools/', 'entrypoints/tool.py',
    'entrypoints/openai/encoding_dsv32', 'entrypoints/sidecar', 'entrypoints/http_server_engine.py',
    'entrypoints/engine_info_bootstrap', 'model_loader/expert_pack', 'model_loader/kimi_k3_gguf',
    'model_loader/deepseek4_gguf', 'model_loader/ci_weight_validation', 'model_loader/remote_instance',
    'model_executor/model_runner_components/remote_instance', 'model_executor/model_runner_components/weight_exporter',
    'distributed/device_communicators/mooncake', 'distributed/device_communicators/pymscclpp',
    'distributed/device_communicators/npu', 'distributed/device_communicators/hpu', 'distributed/device_communicators/xpu',
    'distributed/device_communicators/quick_all_reduce', 'utils/cuda_vmm', 'utils/profile_merger',
    'utils/cudacore_pyspy_dump_utils', 'managers/scheduler_components/profiler_manager', 'utils/hf_transformers/mistral',
)
# layers/quantization/: only the checkpoint's own method runs (K2.6: compressed-tensors) and what every method shares.
QUANT_SHARED = ('layers/quantization/compressed_tensors/', 'layers/quantization/__init__.py',
                'layers/quantization/base_config.py', 'layers/quantization/utils.py', 'layers/quantization/unquant.py',
                'layers/quantization/kv_cache.py', 'layers/quantization/fp8_utils.py', 'layers/quantization/fp8_kernel.py',
                'layers/quantization/int8_kernel.py', 'layers/quantization/marlin_utils.py')
PROGRAMMING = ('NotImplementedError', 'AssertionError', 'TypeError', 'AttributeError', 'IndexError', 'KeyError',
               'NotImplemented')
# Where ServerArgs resolves and validates the flags: a refusal there is a configuration's, whatever the exception.
CONFIG_PATHS = ('server_args.py', 'arg_groups/', 'configs/')
# A request's failure, answered to that client (HTTP 4xx/5xx): the server keeps serving. The modules that only serve
# requests: the OpenAI APIs and their request types, scoring, the /v1/systemone API, the Responses API's harmony
# messages and its web-search tool, tool-call context, the kv_hints envelope and the /set_internal_state admin request
# (UpdateRejected, caught and answered).
REQUEST_PATHS = ('entrypoints/openai/', 'managers/io_struct.py', 'managers/tokenizer_manager_score_mixin.py',
                 'managers/scheduler_components/batch_result_processor.py', 'managers/async_dynamic_batch_tokenizer.py',
                 'entrypoints/http_server.py:[http_server] Error', 'entrypoints/systemone/', 'entrypoints/harmony_utils.py',
                 'entrypoints/search/', 'entrypoints/context.py', 'managers/kv_hints.py',
                 'managers/scheduler_components/internal_state.py')
NON_FATAL = ('continu', 'Continu', 'Falling back', 'falling back', 'retrying', 'skipping', 'ignored', 'Ignored',
             'This is normal', 'It is expected', 'Failed to stop', 'Failed to release', 'cleanly', 'cleanup',
             'Failed to abort', 'Failed to merge', 'Failed to snapshot', 'Failed to pickle', 'Dumping requests',
             'Dumped ', 'Succeeded')
# The scheduler's result processing: its errors logged for one request are that request's, but nothing between it and
# run_scheduler_process (managers/scheduler.py:6370) catches what it raises, so a raise there is an invariant of
# SGLang's that kills the server, not a request's refusal.
SCHEDULER_RESULT_PATHS = ('managers/scheduler_components/batch_result_processor.py',)
# compressed-tensors' schemes call helper functions of other methods' modules (marlin_utils_fp4's NVFP4 Marlin kernels
# for W4A16 NVFP4, modelopt_quant's fp4_gemm for W4A4 NVFP4): those functions run under compressed-tensors too. The
# classes it imports (Fp8LinearMethod, Mxfp4MoEMethod) are those methods, for checkpoints of theirs.
SHARED_FROM = 'layers/quantization/compressed_tensors/'


@functools.lru_cache(maxsize=None)
def quant_shared_functions():
    """{path: names} of the top-level functions of other layers/quantization/ modules that SHARED_FROM imports."""
    root = os.path.join(sglang_release.ensure_release(), 'sglang', 'srt')
    imported = {}
    for dirpath, _dirnames, files in os.walk(os.path.join(root, SHARED_FROM)):
        for name in files:
            if not name.endswith('.py'):
                continue
            with open(os.path.join(dirpath, name), encoding='utf-8') as handle:
                tree = ast.parse(handle.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or '').startswith('sglang.srt.layers.quantization.'):
                    path = node.module[len('sglang.srt.'):].replace('.', '/') + '.py'
                    if not path.startswith(SHARED_FROM):
                        imported.setdefault(path, set()).update(alias.name for alias in node.names)
    out = {}
    for path, names in imported.items():
        if not os.path.exists(os.path.join(root, path)):
            continue
        with open(os.path.join(root, path), encoding='utf-8') as handle:
            tree = ast.parse(handle.read())
        functions = set(node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))
        if names & functions:
            out[path] = frozenset(names & functions)
    return out


def suggest(entry, signatures):
    """(status, value) for a text nobody classified yet: ('matched', signature name) when the table reads it,
    else a waiver or benign reason key of failure_coverage.yml by the rules above."""
    for lines in (render(entry),):
        for line in lines:
            sig, _match = signatures.match_fatal(line)
            if sig is not None:
                return 'matched', sig.name
    path, kind, text = entry['file'], entry['kind'], entry['template']
    if path.startswith(FEATURE_OFF):
        return 'waived', 'feature_off'
    if path.startswith('layers/quantization/') and not path.startswith(QUANT_SHARED) \
            and entry.get('scope') not in quant_shared_functions().get(path, ()):
        return 'waived', 'other_quantization'
    exc = kind.split(' ', 1)[1].split('.')[-1] if kind.startswith('raise ') else None
    if exc in ('NotImplementedError', 'AssertionError') and path.startswith(CONFIG_PATHS):
        return 'waived', 'names_its_cause'  # the flag resolution refuses a combination with these too
    if exc in PROGRAMMING:
        return 'waived', 'programming'
    if exc and (entry.get('import_time') or path.startswith(SCHEDULER_RESULT_PATHS)):
        return 'waived', 'programming'  # SGLang checking itself at import, or an invariant the scheduler dies of
    if path.startswith(REQUEST_PATHS) or (path + ':' + text).startswith(REQUEST_PATHS):
        return 'benign', 'request'
    if kind.startswith('logger.') and any(word in text for word in NON_FATAL):
        return 'benign', 'non_fatal'
    if kind.startswith('raise '):
        return 'waived', 'names_its_cause'
    return 'waived', 'logged_cause'


# ---- the coverage table ------------------------------------------------------------------------------------------

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'failure_coverage.yml')
STATUSES = ('matched', 'benign', 'waived')


def load_table(path=TABLE):
    """The committed table: (header dict, {(file, kind, text): entry}) where entry holds its status key
    (matched: signature name, benign / waived: a reason key of the header's `reasons`), lines and optional sample."""
    import yaml  # pylint: disable=import-outside-toplevel
    with open(path, encoding='utf-8') as handle:
        data = yaml.load(handle, Loader=getattr(yaml, 'CSafeLoader', yaml.SafeLoader))
    entries = {}
    for path_, rows in (data.get('texts') or {}).items():
        for row in rows:
            entries[(path_, row['kind'], row['text'])] = row
    return data, entries


def _yaml_str(text):
    import json  # pylint: disable=import-outside-toplevel
    return json.dumps(text, ensure_ascii=False)


HEADER = """# Every failure text of SGLang %(release)s that a `sglang serve` start or a request can print, as
# tests/conformance/harvest.py reads it from the wheel (AST; SCOPE there says which paths and why), and how the
# collection reads it. Keyed by file (under sglang/srt/), kind and text (the template: f-string placeholders as
# {expr}, %%-formats as written): `lines` only say where it is now, a moved line is the same text.
#   matched: NAME   a FATAL_SIGNATURES row of plugins/module_utils/sglang_signatures.py reads it (the test renders it
#                   with sample values, `sample` overriding them, and the 0.5.23 log prefix, and checks match_fatal)
#   benign: REASON  not a failure of the server (see reasons)
#   waived: REASON  a failure the table deliberately has no row for (see reasons)
# tests/conformance/test_harvest.py fails on a harvested text missing here and on an entry whose text is gone.
# After an upgrade: `python tests/conformance/harvest.py draft > /tmp/t.yml` keeps every entry here and adds the
# new texts with a suggested classification (marked "# new"): review each, then replace this file.
"""

REASONS = {
    'request': 'benign: raised or logged while serving one request and answered to that client (HTTP 4xx/5xx, an '
               'error chunk); the server keeps serving, the waiter\'s probe sees the answer itself',
    'shutdown': 'benign: printed when someone stops the server (SIGTERM), not a failure of the start',
    'non_fatal': 'benign: logged and then carried on (a fallback, a retry, a clean-up or dump that failed, a '
                 'diagnostic printed with it)',
    'feature_off': 'waived: code of a feature the collection\'s K2.6 serve does not enable (hierarchical-cache '
                   'storage backends, gRPC, Anthropic/realtime/ASR APIs, GGUF and expert-pack loaders, remote-instance '
                   'weights, mooncake/MSCCL++, other accelerators, CI-only validation, profiling and crash dumps): '
                   'unreachable from the deployed `sglang serve` flags',
    'other_quantization': 'waived: a quantization method other than the checkpoint\'s (K2.6: compressed-tensors); '
                          'SGLang imports only the method the checkpoint\'s quant_method names',
    'programming': 'waived: a programming assertion (NotImplementedError, AssertionError, TypeError, KeyError, ...): '
                   'a bug in SGLang, no operator action; the waiter shows the traceback\'s last line',
    'names_its_cause': 'waived: a start-up refusal whose exception text names the flag, model or checkpoint property '
                       'it refuses; the waiter\'s msg is that traceback line, a hint could only repeat it (config '
                       'validation argparse cannot do, unsupported model/flag combinations)',
    'unreachable': 'waived: no path of the release reaches it, so no test through the waiter can provoke it (the '
                   'evidence, per text: entrypoints/engine.py:2030-2033 raises `Initialization failed. Please see the '
                   'error messages above.` for a scheduler-pipe message whose status is not "ready", and both senders '
                   'on that pipe send "ready": managers/scheduler.py:1944 get_init_info, '
                   'managers/data_parallel_controller.py:986-987)',
    'serving_crash': "waived: a crash while serving, after the start the waiter (the table's only reader) watched; no "
                     "collection reader watches a serving server's journal, and the text names its own fix "
                     '(docs/reading-failures.md says where). managers/detokenizer_manager.py:386: the decode state of '
                     'a request still in flight, evicted from the at most SGLANG_DETOKENIZER_MAX_STATES (default '
                     "65536) states the detokenizer keeps; a start has a handful of requests in flight (the warmup's, "
                     "the waiter's probe, a health check)",
    'logged_cause': 'waived: an error record that names its own cause (a failed optional step, a component the start '
                    'reports and then raises from, with the raise harvested too); the waiter shows it in the journal '
                    'excerpt',
}


def draft(signatures, table_path=TABLE):
    """The table with every current text: existing entries kept (lines refreshed), new ones suggested."""
    known = load_table(table_path)[1] if os.path.exists(table_path) else {}
    out = [HEADER % {'release': sglang_release.release()}, 'release: %s' % sglang_release.release(), 'reasons:']
    for name in sorted(REASONS):
        out.append('  %s: %s' % (name, _yaml_str(REASONS[name])))
    out.append('texts:')
    entries = {}
    for entry in harvest():
        entries.setdefault(key(entry), dict(entry, lines=[]))['lines'].append(entry['line'])
    current = None
    for (path, kind, text), entry in entries.items():
        if path != current:
            out.append('  %s:' % path)
            current = path
        row = known.get((path, kind, text))
        new = row is None
        if new:
            status, value = suggest(entry, signatures)
            row = {status: value}
        status = [s for s in STATUSES if s in row][0]
        extra = ', sample: {%s}' % ', '.join('%s: %s' % (_yaml_str(k), _yaml_str(v)) for k, v in row['sample'].items()) \
            if row.get('sample') else ''
        out.append('  - {kind: %s, text: %s, lines: %s, %s: %s%s}%s' % (
            _yaml_str(kind), _yaml_str(text), entry['lines'], status, row[status], extra, '  # new' if new else ''))
    return '\n'.join(out) + '\n'


def counts(entries):
    """{'harvested': n, 'matched': n, 'benign': n, 'waived': n} of the table's entries (distinct texts)."""
    out = dict.fromkeys(('harvested',) + STATUSES, 0)
    for row in entries.values():
        out['harvested'] += 1
        for status in STATUSES:
            if status in row:
                out[status] += 1
    return out


COUNTS_BEGIN = '<!-- harvest counts: `python tests/conformance/harvest.py counts`; test_harvest.py checks them -->'
COUNTS_END = '<!-- end of harvest counts -->'


def counts_block(entries):
    """The docs' block of numbers (docs/reading-failures.md), generated from the table."""
    numbers = counts(entries)
    by_name = {}
    for row in entries.values():
        if 'matched' in row:
            by_name[row['matched']] = by_name.get(row['matched'], 0) + 1
    return '\n'.join([
        COUNTS_BEGIN,
        '| release | harvested texts | matched | benign | waived |',
        '|---|---|---|---|---|',
        '| %s | %s | %s | %s | %s |' % (
            sglang_release.release(), numbers['harvested'], numbers['matched'], numbers['benign'], numbers['waived']),
        '',
        'Matched, by signature: ' + ', '.join('`%s` %d' % item for item in sorted(by_name.items())) + '.',
        COUNTS_END])


def main(argv):
    found = harvest()
    if 'draft' in argv:
        from ansible_collections.llmops.sglang.plugins.module_utils import sglang_signatures  # noqa: E501 pylint: disable=import-outside-toplevel
        sys.stdout.write(draft(sglang_signatures))
        return 0
    if 'counts' in argv:
        print(counts_block(load_table()[1]))
        return 0
    if 'summary' in argv:
        counts = {}
        for entry in found:
            top = entry['file'].split('/')[0]
            counts[(top, entry['kind'].split(' ')[0])] = counts.get((top, entry['kind'].split(' ')[0]), 0) + 1
        for (top, kind), n in sorted(counts.items()):
            print('%-20s %-22s %5d' % (top, kind, n))
        print('total %d, distinct %d' % (len(found), len(texts())))
        return 0
    import json  # pylint: disable=import-outside-toplevel
    json.dump(list(found), sys.stdout, indent=1)
    return 0


if __name__ == '__main__':
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if 'draft' in sys.argv[1:]:  # the checkout as ansible_collections.llmops.sglang, as tests/conftest.py makes it for pytest
        import importlib.util  # pylint: disable=import-outside-toplevel
        _SPEC = importlib.util.spec_from_file_location(
            'collection_link', os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'conftest.py'))
        _SPEC.loader.exec_module(importlib.util.module_from_spec(_SPEC))
    sys.exit(main(sys.argv[1:]))
