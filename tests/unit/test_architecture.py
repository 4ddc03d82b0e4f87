# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The import rules of docs/architecture.md: each room imports only what it may (read from the sources' ASTs)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import glob
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTION = 'ansible_collections.llmops.sglang.plugins.'
STDLIB = frozenset(sys.stdlib_module_names)


def imports(path):
    """Every module a file imports, also inside functions; relative imports keep their dots."""
    with open(path, encoding='utf-8') as handle:
        tree = ast.parse(handle.read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module != '__future__':
            found.add('.' * node.level + (node.module or ''))
    return found


def files(pattern):
    found = sorted(glob.glob(os.path.join(ROOT, pattern), recursive=True))
    assert found, pattern
    return found


def stdlib(name):
    return name.split('.')[0] in STDLIB


def broken(pattern, allowed):
    """{file: [imports it may not make]} for the files of pattern; allowed(file, name) says what it may."""
    problems = {}
    for path in files(pattern):
        bad = sorted(name for name in imports(path) if not stdlib(name) and not allowed(path, name))
        if bad:
            problems[os.path.relpath(path, ROOT)] = bad
    return problems


def test_module_utils_import_only_module_utils_and_third_party_only_in_adapters():
    # No AnsibleModule and no controller code: a unit is pure logic (or, as *_adapters.py, the I/O a module wires).
    def allowed(path, name):
        if name.startswith(COLLECTION + 'module_utils'):
            return True
        return os.path.basename(path).endswith('_adapters.py') and not name.startswith(('ansible', 'ansible_collections'))
    assert broken('plugins/module_utils/**/*.py', allowed) == {}


# The rooms of plugins/module_utils (issue 24: grouped by concern) and the rooms each may import. '' is the shared
# root (pins, sglang_signatures, secret_flags, formats, fleet_defaults, progress_view): it imports no room. The table
# is a one-way street (checked below: no cycle), in this order: root < host < model < rollout < router < monitoring,
# and wait, which imports host and monitoring (the deploy metrics' phase file) and is imported by no room; canary (the
# analysis after the wait) imports host (its record's safe read and write); rollout's input rules import it.
ROOM_IMPORTS = {
    '': (),
    'host': ('',),
    'model': ('', 'host'),
    'rollout': ('', 'model', 'canary'),
    'router': ('', 'host', 'rollout'),
    'monitoring': ('', 'rollout', 'router'),
    'wait': ('', 'host', 'monitoring'),
    'canary': ('', 'host'),
}
MODULE_UTILS = os.path.join(ROOT, 'plugins', 'module_utils')


def room_dirs():
    """The sub-packages of plugins/module_utils as they are in the tree."""
    return sorted(name for name in os.listdir(MODULE_UTILS)
                  if os.path.isdir(os.path.join(MODULE_UTILS, name)) and name != '__pycache__')


def room_of(path, top=MODULE_UTILS):
    """'' for a file of the shared root, else its room's name."""
    parts = os.path.relpath(path, top).split(os.sep)
    return parts[0] if len(parts) > 1 else ''


def imported_units(path, rooms):
    """The collection's module_utils units a file imports, as dotted paths below module_utils ('host.procfs',
    'pins'); `from ...module_utils.host import procfs` counts as 'host.procfs'."""
    with open(path, encoding='utf-8') as handle:
        tree = ast.parse(handle.read(), path)
    prefix = COLLECTION + 'module_utils'
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            found.add('.' * node.level + (node.module or ''))   # refused: the repo imports by the full name
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(prefix):
            below = node.module[len(prefix) + 1:]
            if below and below not in rooms:
                found.add(below)
            else:
                found.update('.'.join(part for part in (below, alias.name) if part) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name[len(prefix) + 1:] for alias in node.names if alias.name.startswith(prefix + '.'))
    return found


def room_problems(paths, rooms, room_imports, top=MODULE_UTILS):
    """{file: [what it imports that its room may not]} for module_utils files (below top), given the room directories
    and the table; a relative import is refused (the repo's form is the absolute ansible_collections one)."""
    problems = {}
    for path in paths:
        mine = room_of(path, top)
        bad = []
        for unit in sorted(imported_units(path, rooms)):
            if unit.startswith('.'):
                bad.append(unit)
                continue
            target = unit.split('.')[0] if unit.split('.')[0] in rooms else ''
            if target != mine and target not in room_imports.get(mine, ()):
                bad.append('%s (room %s)' % (unit, target or 'root'))
        if bad:
            problems[os.path.relpath(path, top)] = bad
    return problems


def test_module_utils_rooms_are_the_stated_ones_each_a_package_with_an_empty_init():
    rooms = room_dirs()
    assert sorted(room for room in ROOM_IMPORTS if room) == rooms
    for room in rooms:
        init = os.path.join(MODULE_UTILS, room, '__init__.py')
        assert os.path.isfile(init) and os.path.getsize(init) == 0, init   # ansible-test's empty-init rule
        assert [path for path in files('plugins/module_utils/%s/*.py' % room) if not path.endswith('__init__.py')], room
    assert not [path for path in files('plugins/module_utils/*.py') if path.endswith('__init__.py')]
    assert len(files('plugins/module_utils/**/*.py')) > 40   # the recursive glob sees the rooms


def test_each_module_utils_room_imports_only_the_rooms_it_may():
    # host never imports router, the root imports no room, ... (the table above, which docs/architecture.md states).
    assert room_problems(files('plugins/module_utils/**/*.py'), room_dirs(), ROOM_IMPORTS) == {}


def test_the_room_table_is_a_one_way_street():
    def reaches(start, goal, seen=()):
        return any(room == goal or (room not in seen and reaches(room, goal, seen + (room,)))
                   for room in ROOM_IMPORTS[start])
    assert [room for room in ROOM_IMPORTS if reaches(room, room)] == []
    assert set(room for allowed in ROOM_IMPORTS.values() for room in allowed) <= set(ROOM_IMPORTS)


def test_the_room_check_can_fail(tmp_path):
    # A root importing a room, host importing router (also in the `from ... import room` form), a relative import,
    # and a real file against a tighter table: each is refused.
    (tmp_path / 'host').mkdir()
    (tmp_path / 'pins.py').write_text('from %smodule_utils.host.procfs import parse_pids\n' % COLLECTION)
    (tmp_path / 'host' / 'lock.py').write_text('from %smodule_utils.router import router_rotation\n'
                                               'from %smodule_utils import formats\n'
                                               'from ..router.router_desired import parse\n' % (COLLECTION, COLLECTION))
    found = room_problems([str(tmp_path / 'pins.py'), str(tmp_path / 'host' / 'lock.py')], ['host', 'router'],
                          ROOM_IMPORTS, top=str(tmp_path))
    assert found == {'pins.py': ['host.procfs (room host)'],
                     os.path.join('host', 'lock.py'): ['..router.router_desired', 'router.router_rotation (room router)']}
    swapped = dict(ROOM_IMPORTS, wait=('',))
    found = room_problems(files('plugins/module_utils/wait/wait_adapters.py'), room_dirs(), swapped)
    assert 'host.procfs (room host)' in found['wait/wait_adapters.py'], found


def stated_rooms(page):
    """{room: set of rooms it may import} from the module_utils table of docs/architecture.md ('' for the root)."""
    section = page.split('### `plugins/module_utils/`', 1)[1].split('\n### ', 1)[0]
    table = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip('|').split('|')]
        if not line.startswith('|') or len(cells) != 3 or cells[0] in ('room', '') or set(cells[0]) <= set('-'):
            continue
        room = '' if cells[0].startswith('root') else cells[0].strip('`/')
        allowed = set(name.strip('/') for name in re.findall(r'`(\w+/)`', cells[2]))
        table[room] = allowed | ({''} if re.search(r'\broot\b', cells[2]) else set())
    return table


def test_the_architecture_page_states_the_room_table():
    with open(os.path.join(ROOT, 'docs', 'architecture.md'), encoding='utf-8') as handle:
        page = handle.read()
    assert stated_rooms(page) == dict((room, set(allowed)) for room, allowed in ROOM_IMPORTS.items())
    # and the comparison can fail: a room that may import one more than the table says
    assert stated_rooms(page.replace('| root, `host/`, `monitoring/` |', '| root, `host/`, `router/` |'))['wait'] \
        == {'', 'host', 'router'}


# What a pure unit may not do (docs/architecture.md: "pure logic in module_utils, no I/O; I/O in *_adapters.py"):
# import what reads or writes the world, call open(), or call os beyond the path arithmetic of os.path.
IO_MODULES = ('subprocess', 'socket', 'socketserver', 'ssl', 'select', 'selectors', 'threading', 'multiprocessing',
              'tempfile', 'glob', 'shutil', 'io', 'http', 'urllib.request', 'requests', 'pty', 'fcntl', 'asyncio',
              'syslog', 'signal', 'pathlib')
PURE_OS_PATH = ('join', 'dirname', 'basename', 'normpath', 'split', 'splitext', 'isabs', 'relpath', 'commonpath', 'sep')
PURE_OS = ('path', 'sep', 'stat_result', 'linesep')


def io_calls(path):
    """What in a file does I/O by the rule above: an import of an I/O module, open(), or an os call."""
    with open(path, encoding='utf-8') as handle:
        tree = ast.parse(handle.read(), path)
    found = set()
    for name in imports(path):
        if name in IO_MODULES or name.split('.')[0] in IO_MODULES:
            found.add('import %s' % name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == 'open':
            found.add('open()')
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == 'os':
            if node.attr not in PURE_OS:
                found.add('os.%s' % node.attr)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                and isinstance(node.value.value, ast.Name) and node.value.value.id == 'os' and node.value.attr == 'path':
            if node.attr not in PURE_OS_PATH:
                found.add('os.path.%s' % node.attr)
    return sorted(found)


def test_module_utils_units_do_no_io_only_adapters_do():
    units = [path for path in files('plugins/module_utils/**/*.py') if not path.endswith('_adapters.py')]
    assert len(units) > 30 and any(room_of(path) == 'model' for path in units)   # the rooms are read too
    problems = {os.path.relpath(path, ROOT): io_calls(path) for path in units}
    assert {path: found for path, found in problems.items() if found} == {}


def test_the_io_check_sees_what_the_adapters_do():
    seen = {os.path.basename(path): io_calls(path) for path in files('plugins/module_utils/**/*_adapters.py')}
    assert {'import socket', 'import tempfile'} <= set(seen['wait_adapters.py'])
    assert {'os.open', 'os.lstat'} <= set(seen['file_adapters.py'])
    assert 'open()' in seen['checkpoint_adapters.py'] and 'os.path.exists' in seen['host_adapters.py']


def test_modules_import_module_utils_only():
    def allowed(_path, name):
        if name.startswith(('ansible.module_utils.', COLLECTION + 'module_utils')):
            return True
        # libraries of the managed host, imported guarded and reported with missing_required_lib
        return not name.startswith(('ansible', COLLECTION))
    assert broken('plugins/modules/*.py', allowed) == {}


MODULE_CODE_LINES = 100  # issue 24: every module as thin as the waiter (docs plus wiring)
DOC_STRINGS = ('DOCUMENTATION', 'EXAMPLES', 'RETURN')


def code_lines(path):
    """Non-blank, non-comment lines of a module outside its DOCUMENTATION, EXAMPLES and RETURN strings."""
    with open(path) as handle:
        source = handle.read()
    docs = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(target, 'id', None) in DOC_STRINGS for target in node.targets):
            docs.update(range(node.lineno, node.end_lineno + 1))
    return sum(1 for number, line in enumerate(source.splitlines(), 1)
               if number not in docs and line.strip() and not line.strip().startswith('#'))


def test_modules_are_docs_plus_wiring():
    modules = sorted(glob.glob(os.path.join(ROOT, 'plugins', 'modules', '*.py')))
    sizes = dict((os.path.basename(path), code_lines(path)) for path in modules)
    assert len(sizes) >= 9 and all(size > 10 for size in sizes.values()), sizes  # the count sees code
    assert dict((name, size) for name, size in sizes.items() if size > MODULE_CODE_LINES) == {}


@pytest.mark.parametrize('room', ['action', 'filter'])
def test_controller_plugins_import_ansible_module_utils_and_plugin_utils_never_modules(room):
    def allowed(_path, name):
        return name == 'ansible' or name.startswith(('ansible.', COLLECTION + 'module_utils', COLLECTION + 'plugin_utils'))
    assert broken('plugins/%s/*.py' % room, allowed) == {}


def test_filter_files_import_the_collection_only_inside_their_filters():
    """To find one filter of the collection, Ansible imports every filter file of it (ansible/plugins/loader.py,
    Jinja2Loader.get_with_context: a later file may override a name), in every worker process (one per host and
    task): a module_utils import at a filter file's top level is paid by every task of every host that uses any of the
    collection's filters (measured: 19% of the controller's CPU of a no-op deploy on 8 hosts)."""
    top = {}
    for path in files('plugins/filter/*.py'):
        with open(path, encoding='utf-8') as handle:
            tree = ast.parse(handle.read(), path)
        names = [node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module
                 and node.module.startswith(COLLECTION)]
        names += [alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names
                  if alias.name.startswith(COLLECTION)]
        if names:
            top[os.path.relpath(path, ROOT)] = names
    assert top == {}
    # not vacuous: the filters do import module_utils (inside the functions)
    assert all(any(name.startswith(COLLECTION + 'module_utils') for name in imports(path))
               for path in files('plugins/filter/*.py'))


def test_the_stand_in_is_stdlib_only():
    def allowed(_path, name):
        return name.split('.')[0] in ('sglang', 'sglang_standin')
    assert broken('tests/standin/src/**/*.py', allowed) == {}


def test_the_fleet_tool_is_stdlib_only():
    def allowed(_path, name):
        return name.startswith('.') or name.startswith('fleet.')
    assert broken('tests/fleet/*.py', allowed) == {}


def test_the_bench_uses_the_fleet_only_through_its_client():
    def allowed(_path, name):
        # yaml: from the repo venv, which the bench runs with (ansible-core depends on it); `fleet` for `from fleet
        # import load, router_wheels`: the load generator and the router's wheels the router test uses too;
        # `local.standin`: the canary section starts its stand-ins with the local tests' launcher (no fleet)
        return name.startswith('.') or name in ('bench.cli', 'fleet', 'fleet.client', 'fleet.load', 'fleet.router_wheels',
                                                'local.standin', 'yaml')
    assert broken('bench/*.py', allowed) == {}


def test_the_integration_tests_use_the_fleet_only_through_its_client():
    def allowed(_path, name):
        return not name.startswith('fleet') or name in ('fleet', 'fleet.client')
    problems = broken('tests/integration/*.py', allowed)
    assert problems == {}


def test_the_collection_imports_nothing_of_the_tests_or_the_bench():
    def allowed(_path, name):
        return name.split('.')[0] not in ('tests', 'bench', 'fleet', 'conftest', 'sglang_standin')
    assert broken('plugins/**/*.py', allowed) == {}


# What starts another process: a unit test that does is a local test (tests/local, `make local`) by another name.
SPAWNING_MODULES = ('subprocess', 'multiprocessing', 'pty', 'pexpect', 'concurrent.futures.process')
SPAWNING_CALLS = ('os.system', 'os.popen', 'os.fork', 'os.forkpty', 'os.posix_spawn', 'os.posix_spawnp')
SPAWNING_PREFIXES = ('os.spawn', 'os.exec')
ANSIBLE_COMMANDS = ('ansible', 'ansible-playbook', 'ansible-test', 'ansible-galaxy')


def spawns(path):
    """What in a file starts a process: the modules it imports for that, os calls, or an ansible command it names."""
    with open(path, encoding='utf-8') as handle:
        tree = ast.parse(handle.read(), path)
    found = set()
    for name in imports(path):
        if name.lstrip('.') in SPAWNING_MODULES or name.split('.')[0] in SPAWNING_MODULES:
            found.add('import %s' % name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            dotted = '%s.%s' % (node.value.id, node.attr)
            if dotted in SPAWNING_CALLS or dotted.startswith(SPAWNING_PREFIXES):
                found.add(dotted)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in ANSIBLE_COMMANDS:
            found.add('runs %r' % node.value)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and isinstance(node.right, ast.Constant):
            if node.right.value in ANSIBLE_COMMANDS:   # Path(sys.executable).parent / 'ansible'
                found.add('runs %r' % node.right.value)
    return sorted(found)


def test_unit_tests_start_no_process():
    # No venv, fleet, network or ansible run under tests/unit: such tests live in tests/local (or tests/integration).
    # (This file only names the commands, in ANSIBLE_COMMANDS.)
    problems = {os.path.relpath(path, ROOT): spawns(path) for path in files('tests/unit/**/*.py')
                if path != os.path.abspath(__file__)}
    assert {path: found for path, found in problems.items() if found} == {}


def test_the_spawn_check_sees_what_the_local_tests_do():
    # The check above can fail: the tests that moved to tests/local are what it would refuse.
    seen = {os.path.basename(path): spawns(path) for path in files('tests/local/plugins/**/*.py')}
    assert 'import subprocess' in seen['test_sglang_host_lock.py'] and "runs 'ansible'" in seen['test_sglang_observe.py']


# What else makes a unit test impure (issue 24: "Unit tests stay pure ... or move to tests/local; the rule is
# checked"): a socket or a server of its own (the network), a thread beside the test (a server's or a writer's, on
# real time), real sleeping, or a stand-in executable put on PATH (a process by another name). Such tests live in
# tests/local. The repository's own helpers a test imports (tests/**/*.py: fakes, servers, model_mirror) are read
# too, so a server cannot hide in a helper. No allow-list: every unit test is pure.
IMPURE_MODULES = ('socket', 'socketserver', 'http.server', 'http.client', 'urllib.request', 'ssl', 'asyncio',
                  'threading', 'selectors')
SLEEPS = ('time.sleep', 'asyncio.sleep')
ENV_SETTERS = ('setenv', 'putenv', 'setdefault', 'update')
COLLECTION_TESTS = 'ansible_collections.llmops.sglang.tests.'


def helper_path(name):
    """The repository file a test's import names (its fakes, servers, model_mirror), None for anything else."""
    if name.startswith(COLLECTION_TESTS):
        candidate = os.path.join(ROOT, 'tests', *name[len(COLLECTION_TESTS):].split('.')) + '.py'
    elif '.' not in name:
        candidate = os.path.join(ROOT, 'tests', name + '.py')
    else:
        return None
    return candidate if os.path.isfile(candidate) else None


def names_path(node):
    """Whether an expression is the string 'PATH'."""
    return isinstance(node, ast.Constant) and node.value == 'PATH'


def impurities(path, seen=None):
    """What in a file (or a helper of the repository it imports) starts a process, opens a socket, runs a thread,
    sleeps for real or puts a stand-in on PATH."""
    seen = set() if seen is None else seen
    seen.add(path)
    found = set(spawns(path))
    with open(path, encoding='utf-8') as handle:
        tree = ast.parse(handle.read(), path)
    for name in imports(path):
        if name in IMPURE_MODULES or name.split('.')[0] in IMPURE_MODULES or name.startswith(('http.server', 'http.client')):
            found.add('import %s' % name)
        helper = helper_path(name)
        if helper and helper not in seen:
            found.update('%s (in %s)' % (what, os.path.relpath(helper, ROOT)) for what in impurities(helper, seen))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == 'time' and any(a.name == 'sleep' for a in node.names):
            found.add('time.sleep')
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if '%s.%s' % (node.value.id, node.attr) in SLEEPS:
                found.add('%s.%s' % (node.value.id, node.attr))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ENV_SETTERS:
            # monkeypatch.setenv('PATH', ...), os.putenv('PATH', ...), os.environ.update(PATH=...)
            if (node.args and names_path(node.args[0])) or any(k.arg == 'PATH' for k in node.keywords):
                found.add('sets PATH')
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and names_path(node.slice):
            found.add('sets PATH')   # os.environ['PATH'] = ...
        elif isinstance(node, ast.Dict) and any(names_path(key) for key in node.keys):
            found.add('sets PATH')   # env={'PATH': ...} for a process
    return sorted(found)


def test_unit_tests_are_pure():
    # No socket, server, thread, real sleep or PATH stand-in under tests/unit (nor in a helper they import): such
    # tests live in tests/local. (This file only names them.)
    problems = {os.path.relpath(path, ROOT): impurities(path) for path in files('tests/unit/**/*.py')
                if path != os.path.abspath(__file__)}
    assert {path: found for path, found in problems.items() if found} == {}


def test_the_purity_check_sees_what_the_local_tests_do():
    # The check above can fail: the tests that moved to tests/local are what it would refuse, each for its reason.
    seen = {os.path.relpath(path, os.path.join(ROOT, 'tests', 'local', 'plugins')): impurities(path)
            for path in files('tests/local/plugins/**/*.py')}
    assert 'sets PATH' in seen['modules/test_sglang_preflight_gpu.py']
    assert {'import threading', 'time.sleep'} <= set(seen['modules/test_sglang_preflight_gpu.py'])
    assert 'sets PATH' in seen['modules/test_sglang_wait_ready_live.py']
    assert 'import socket (in tests/local/plugins/servers.py)' in seen['modules/test_sglang_wait_ready_live.py']
    assert 'import http.server (in tests/local/plugins/servers.py)' in seen['module_utils/test_probe_http.py']
    assert any(what.endswith('(in tests/model_mirror.py)') for what in seen['modules/test_sglang_model_sync_mirror.py'])
