# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The maps cannot go stale (issue 24): docs/architecture.md and the README's "## Layout" name every module, filter,
role and entry point, playbook, action plugin, plugin_utils file and module_utils room of the tree (the architecture
page also every module_utils unit), and nothing they name is gone. Pure: it reads files only.

The checker is a function over (page text, tree inventory), so the tests below also show it failing."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP_DIRS = ('.git', '.build', '.venv', '.venv-2.21', '.cache', '.pytest_cache', '__pycache__', 'output')
COLLECTION = 'llmops.sglang.'
# A backticked bare identifier that looks like a module, filter or unit name must be one.
NAME_LIKE = re.compile(r'^(sglang_\w+|\w+_adapters|\w+_driver)$')
# Where a backticked path may start; `module_utils/x` and `plugin_utils/x` are read below plugins/.
PATH_STARTS = ('plugins/', 'roles/', 'tests/', 'module_utils/', 'plugin_utils/', 'playbooks/', 'docs/', 'bench/',
               'inventories/', 'changelogs/', 'meta/', 'action/', 'filter/', 'modules/')
PATH_ENDS = ('.py', '.yml', '.yaml', '.md', '.json', '.j2', '.txt')


def _names(directory, ext, root):
    path = os.path.join(root, directory)
    return sorted(name[:-len(ext)] for name in os.listdir(path) if name.endswith(ext) and name != '__init__' + ext)


def inventory(root=ROOT):
    """What the maps must name, read from the tree: modules, filters (the names of plugins/filter/*.yml), roles with
    their entry points, playbooks, action plugins, plugin_utils, module_utils rooms and units; plus every file and
    directory (relative paths) and the role variables, to tell a stale name from a real one."""
    inv = {
        'modules': _names('plugins/modules', '.py', root),
        'filters': _names('plugins/filter', '.yml', root),
        'playbooks': _names('playbooks', '.yml', root),
        'action': _names('plugins/action', '.py', root),
        'plugin_utils': _names('plugins/plugin_utils', '.py', root),
        'roles': {}, 'rooms': [], 'units': [], 'variables': set(), 'paths': set(),
    }
    for role in sorted(os.listdir(os.path.join(root, 'roles'))):
        with open(os.path.join(root, 'roles', role, 'meta', 'argument_specs.yml'), encoding='utf-8') as handle:
            specs = yaml.safe_load(handle)['argument_specs']
        inv['roles'][role] = sorted(specs)
        for spec in specs.values():
            inv['variables'].update(spec.get('options') or {})
    module_utils = os.path.join(root, 'plugins', 'module_utils')
    for dirpath, dirnames, filenames in os.walk(module_utils):
        dirnames[:] = sorted(name for name in dirnames if name not in SKIP_DIRS)
        if dirpath != module_utils:
            inv['rooms'].append(os.path.relpath(dirpath, module_utils))
        inv['units'].extend(name[:-3] for name in filenames if name.endswith('.py') and name != '__init__.py')
    inv['units'].sort()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [name for name in dirnames if name not in SKIP_DIRS]
        rel = os.path.relpath(dirpath, root)
        if rel != '.':
            inv['paths'].add(rel.replace(os.sep, '/'))
        inv['paths'].update((os.path.join(rel, name) if rel != '.' else name).replace(os.sep, '/') for name in filenames)
    return inv


def _named(word, text):
    return re.search(r'(?<![\w.-])%s(?![\w-])' % re.escape(word), text) is not None


def missing(text, inv, units=False):
    """What of the tree a page does not name: ['module sglang_x', 'room wait/', ...]."""
    found = []
    for kind in ('modules', 'filters', 'playbooks', 'action', 'plugin_utils'):
        found.extend('%s %s' % (kind, name) for name in inv[kind] if not _named(name, text))
    for role, entry_points in inv['roles'].items():
        if not _named('roles/' + role, text):
            found.append('role %s' % role)
        found.extend('entry point %s of role %s' % (entry, role) for entry in entry_points if not _named(entry, text))
    found.extend('room %s/' % room for room in inv['rooms'] if not _named(room + '/', text))
    if units:
        found.extend('unit %s' % unit for unit in inv['units'] if not _named(unit, text))
    return found


def _resolves(span, inv):
    """Whether a path named on a page is a file or directory of the tree."""
    path = span.rstrip('/').split(':')[0]
    candidates = [path, path + '.py', 'plugins/' + path, 'plugins/' + path + '.py']
    if any(candidate in inv['paths'] for candidate in candidates):
        return True
    # a path given relative to its room (`tasks/fleet_report.yml`, `fleet.py`): some file of the tree ends with it
    return any(known.endswith('/' + path) or known.endswith('/' + path + '.py') for known in inv['paths'])


def _is_path(span):
    if any(char in span for char in ' *{}<>$|()\'"=,') or span.startswith(('/', 'http', '~', '.')):
        return False
    return span.startswith(PATH_STARTS) or span.endswith(PATH_ENDS)


def stale(text, inv, blocks=False):
    """What a page names that the tree does not have: backticked paths that resolve to nothing, backticked names that
    look like a module, filter or unit and are none (nor a role variable, nor a directory of the tree such as the
    stand-in's `sglang_standin` package); with blocks, also the first column of
    the page's code blocks (the README's layout)."""
    known = set(inv['modules']) | set(inv['filters']) | set(inv['units']) | set(inv['action']) \
        | set(inv['plugin_utils']) | set(inv['playbooks']) | inv['variables'] | set(path.rsplit('/', 1)[-1] for path in inv['paths'])
    found = []
    spans = re.findall(r'(?<!`)`([^`\n]+)`(?!`)', text)
    if blocks:
        for block in re.findall(r'```[^\n]*\n(.*?)```', text, re.S):
            spans.extend(line.split()[0] for line in block.splitlines() if line.strip() and '/' in line.split()[0])
    for span in spans:
        span = span.strip().rstrip(',')
        if _is_path(span):
            if not _resolves(span, inv):
                found.append('path %s' % span)
            continue
        name = span[len(COLLECTION):] if span.startswith(COLLECTION) else span
        name = name.split('.')[0]
        if NAME_LIKE.match(name) and name not in known:
            found.append('name %s' % name)
    return sorted(set(found))


def layout_section(readme):
    """The README's "## Layout" section, up to the next heading of its level."""
    match = re.search(r'^## Layout\n(.*?)(?=^## )', readme + '\n## end', re.S | re.M)
    assert match, 'README.md has no "## Layout" section'
    return match.group(1)


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding='utf-8') as handle:
        return handle.read()


def test_the_inventory_sees_the_tree():
    inv = inventory()
    assert len(inv['modules']) >= 9 and len(inv['filters']) >= 30 and len(inv['units']) > 40
    assert set(inv['roles']) == {'server', 'router', 'monitoring'} and 'drain' in inv['roles']['router']
    assert {'deploy_k26', 'router'} <= set(inv['playbooks']) and 'wait' in inv['rooms']
    assert 'plugins/module_utils/wait/wait_machine.py' in inv['paths'] and 'roles/router' in inv['paths']


def test_the_architecture_page_names_the_tree_and_nothing_gone():
    inv, page = inventory(), read('docs', 'architecture.md')
    assert missing(page, inv, units=True) == []
    assert stale(page, inv) == []


def test_the_readme_layout_names_the_tree_and_nothing_gone():
    inv, layout = inventory(), layout_section(read('README.md'))
    assert missing(layout, inv) == []
    assert stale(layout, inv, blocks=True) == []


def test_the_checker_fails_on_a_stale_name_and_a_missing_module():
    inv = inventory()
    page = read('docs', 'architecture.md')
    # a module that is gone, a unit renamed, a path moved, a filter that never was
    worse = page + ('\n`sglang_restart` calls `restart_driver` (`plugins/module_utils/wait_machine.py`, '
                    '`llmops.sglang.sglang_undo`); `roles/server/tasks/gone.yml`.\n')
    assert stale(worse, inv) == ['name restart_driver', 'name sglang_restart', 'name sglang_undo',
                                 'path plugins/module_utils/wait_machine.py', 'path roles/server/tasks/gone.yml']
    # a module, a room and an entry point no longer named
    thinner = page.replace('sglang_textfile', 'the textfile module').replace('monitoring/', 'monitoring')
    thinner = re.sub(r'(?<![\w.-])drain(?![\w-])', 'DRAIN', thinner)
    assert missing(thinner, inv, units=True) == ['modules sglang_textfile', 'entry point drain of role router',
                                                 'room monitoring/']
    # a code block's first column is a path too (the README's layout)
    assert stale('```\nplugins/gone/   nothing\n```\n', inv, blocks=True) == ['path plugins/gone/']
    # the tree's own names and variables are not stale
    assert stale('`sglang_wait_ready`, `wait_adapters`, `sglang_extra_args`, `fleet.client`', inv) == []
