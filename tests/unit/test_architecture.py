# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The import rules of docs/architecture.md: each room imports only what it may (read from the sources' ASTs)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import glob
import os
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
    assert broken('plugins/module_utils/*.py', allowed) == {}


def test_modules_import_module_utils_only():
    def allowed(_path, name):
        if name.startswith(('ansible.module_utils.', COLLECTION + 'module_utils')):
            return True
        # libraries of the managed host, imported guarded and reported with missing_required_lib
        return not name.startswith(('ansible', COLLECTION))
    assert broken('plugins/modules/*.py', allowed) == {}


@pytest.mark.parametrize('room', ['action', 'filter'])
def test_controller_plugins_import_ansible_module_utils_and_plugin_utils_never_modules(room):
    def allowed(_path, name):
        return name == 'ansible' or name.startswith(('ansible.', COLLECTION + 'module_utils', COLLECTION + 'plugin_utils'))
    assert broken('plugins/%s/*.py' % room, allowed) == {}


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
        # import load, router_wheels`: the load generator and the router's wheels the router test uses too
        return name.startswith('.') or name in ('bench.cli', 'fleet', 'fleet.client', 'fleet.load', 'fleet.router_wheels',
                                                'yaml')
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
