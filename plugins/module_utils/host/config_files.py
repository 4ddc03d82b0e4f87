# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What sglang_config does to an instance's configuration, decided from what is there (no I/O).

``check_options`` validates the module's three lists (directories, files, secrets) before anything is read or
written and returns them normalized; ``wanted`` says which paths the module must look at; ``plan`` says, from what
was found (file_adapters' ``lookup`` and ``peek_file``) and the accounts the owners name, which directories to create
or set, which files to write or remove, and what the module returns (``changed``, ``written``, ``removed``,
``directories``, ``checksums``, ``diff``). Every refusal is raised here, before the module writes anything. A secret
(the ``secrets`` list) never reaches a diff or a checksum: only its path is returned. The I/O is file_adapters'.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import posixpath
import re

from ansible_collections.llmops.sglang.plugins.module_utils.host.trust import others_may_write

OCTAL = re.compile(r'^[0-7]{3,4}$')
STATES = ('present', 'absent')
ROOT_DIR = {'kind': 'dir', 'uid': 0, 'gid': 0, 'mode': 0o755}  # a missing parent, as install -d makes it


class ConfigError(Exception):
    """Options or a host the module refuses to act on: the message names each option, path and what was expected."""


def parse_mode(value, where):
    """The permission bits of an octal string ('0644', '755') or of a number YAML already read (0644 unquoted is
    420, which is 0o644). A number with bits above 0o777 is refused: it is a decimal mistake (644 is 0o1204)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if 0 <= value <= 0o777:
            return value
        raise ConfigError('%s=%d: a number is read as the mode YAML gave (0644 unquoted is 420, i.e. 0o644), and '
                          '%d is 0o%o: quote the mode, e.g. "0644"' % (where, value, value, value))
    if isinstance(value, str) and OCTAL.match(value):
        return int(value, 8)
    raise ConfigError('%s=%r: expected an octal mode such as "0644"' % (where, value))


def format_mode(mode):
    return '%04o' % mode


def _path(value, where, problems):
    """An absolute path without '.' or '..' components, slashes collapsed and no trailing one; None when refused."""
    if not isinstance(value, str) or not value.startswith('/'):
        problems.append('%s.path=%r: expected an absolute path' % (where, value))
        return None
    parts = [part for part in value.split('/') if part]
    if not parts or any(part in ('.', '..') for part in parts):
        problems.append('%s.path=%r: expected an absolute path below / without "." or ".." components'
                        % (where, value))
        return None
    return '/' + '/'.join(parts)


def _mode(entry, where, path, problems):
    try:
        return parse_mode(entry.get('mode'), '%s.mode' % where)
    except ConfigError as exc:
        problems.append('%s (path %s)' % (exc, path))
        return None


def _account(entry, key, where, path, problems):
    value = entry.get(key)
    if value is None or value == '':
        value = 'root'
    if not isinstance(value, str) or not re.match(r'^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?$', value):
        problems.append('%s.%s=%r: expected a user or group name or a numeric id (path %s)' % (where, key, value, path))
    return value


def check_options(directories, files, secrets):
    """{'directories': [...], 'files': [...], 'secrets': [...]} normalized (paths, modes as numbers, defaults, each
    entry's label such as 'files[2]'), or ConfigError naming every problem. A secret's content is never named."""
    problems, spec, seen = [], {'directories': [], 'files': [], 'secrets': []}, {}
    for index, entry in enumerate(directories or []):
        where = 'directories[%d]' % index
        path = _path(entry.get('path'), where, problems)
        item = {'label': where, 'path': path, 'mode': _mode(entry, where, path, problems),
                'owner': _account(entry, 'owner', where, path, problems),
                'group': _account(entry, 'group', where, path, problems), 'parents': bool(entry.get('parents'))}
        spec['directories'].append(item)
    for option, entries in (('files', files), ('secrets', secrets)):
        for index, entry in enumerate(entries or []):
            where = '%s[%d]' % (option, index)
            path = _path(entry.get('path'), where, problems)
            state = entry.get('state') or 'present'
            item = {'label': where, 'path': path, 'state': state, 'mode': _mode(entry, where, path, problems),
                    'secret': option == 'secrets', 'data': None}
            if state not in STATES:
                problems.append('%s.state=%r: expected present or absent (path %s)' % (where, state, path))
            content = entry.get('content')
            if state == 'present' and content is None:
                problems.append('%s.content: required when state is present (path %s)' % (where, path))
            elif content is not None and not isinstance(content, str):
                problems.append('%s.content: expected a string (path %s)' % (where, path))
            elif content is not None:
                item['data'] = content.encode('utf-8')
            spec[option].append(item)
    for item in spec['directories'] + spec['files'] + spec['secrets']:
        if item['path'] is None:
            continue
        if item['path'] in seen:
            problems.append('%s.path=%s: also given as %s; each path once'
                            % (item['label'], item['path'], seen[item['path']]))
        seen.setdefault(item['path'], item['label'])
    if problems:
        raise ConfigError('; '.join(problems))
    return spec


def _ancestors(path):
    """/a/b/c -> ['/a/b', '/a'] (never '/')."""
    found = []
    parent = posixpath.dirname(path)
    while parent != '/':
        found.append(parent)
        parent = posixpath.dirname(parent)
    return found


def wanted(spec):
    """(directory paths to look up, file paths to peek at): every directory, its parent (all its ancestors with
    parents), and every file and secret."""
    dirs = []
    for item in spec['directories']:
        ancestors = _ancestors(item['path'])
        for path in [item['path']] + (ancestors if item['parents'] else ancestors[:1]):
            if path not in dirs:
                dirs.append(path)
    return dirs, [item['path'] for item in spec['secrets'] + spec['files']]


def account_names(spec):
    """(user names, group names) the directories give that are not numeric ids: what the adapter resolves."""
    users = sorted(set(item['owner'] for item in spec['directories'] if not item['owner'].isdigit()))
    groups = sorted(set(item['group'] for item in spec['directories'] if not item['group'].isdigit()))
    return users, groups


def _resolve(name, table):
    return int(name) if name.isdigit() else table.get(name)


def _is_dir(record):
    return record is not None and (record['kind'] == 'dir' or (record['kind'] == 'link' and record.get('to_dir')))


def _dir_state(path, record):
    if record is None:
        return {'path': path, 'state': 'absent'}
    return {'path': path, 'owner': record.get('owner', str(record['uid'])),
            'group': record.get('group', str(record['gid'])), 'mode': format_mode(record['mode'])}


def _plan_dirs(spec, lookups, users, groups, check_mode, problems):
    """([step], {path: record it will have}, {path created}) for the directories, in list order."""
    steps, planned, created = [], {}, set()
    for item in spec['directories']:
        path, where = item['path'], item['label']
        uid, gid = _resolve(item['owner'], users), _resolve(item['group'], groups)
        for kind, value, name in (('user', uid, 'owner'), ('group', gid, 'group')):
            if value is None and not check_mode:
                problems.append('%s.%s=%r: no such %s on this host (path %s)' % (where, name, item[name], kind, path))
        record = planned.get(path) or lookups.get(path)
        if record is None:
            missing, parent = [], posixpath.dirname(path)
            while parent != '/' and not _is_dir(planned.get(parent) or lookups.get(parent)):
                found = lookups.get(parent)
                if found is not None:
                    problems.append('%s.path=%s: %s is a %s, not a directory' % (where, path, parent, found['kind']))
                    break
                if not item['parents']:
                    problems.append('%s.path=%s: its parent %s does not exist (parents: true creates it, root:root '
                                    '0755)' % (where, path, parent))
                    break
                missing.append(parent)
                parent = posixpath.dirname(parent)
            for parent in reversed(missing):
                steps.append({'path': parent, 'create': True, 'uid': 0, 'gid': 0, 'mode': 0o755,
                              'before': None, 'after': dict(ROOT_DIR, owner='root', group='root')})
                planned[parent] = dict(ROOT_DIR, owner='root', group='root')
                created.add(parent)
        elif record['kind'] == 'link':
            problems.append('%s.path=%s: is a symlink (to %s), not a directory: refused; the directory is neither set '
                            'nor written through it' % (where, path, record.get('target', '?')))
            continue
        elif record['kind'] != 'dir':
            problems.append('%s.path=%s: is a %s, not a directory' % (where, path, record['kind']))
            continue
        after = {'kind': 'dir', 'uid': uid, 'gid': gid, 'mode': item['mode'], 'owner': item['owner'],
                 'group': item['group']}
        if record is None or (record['uid'], record['gid'], record['mode']) != (uid, gid, item['mode']):
            steps.append({'path': path, 'create': record is None, 'uid': uid, 'gid': gid, 'mode': item['mode'],
                          'before': record, 'after': after})
            if record is None:
                created.add(path)
        planned[path] = after
    return steps, planned, created


def _dir_problem(record):
    if record['uid'] is None:
        return 'to be owned by a user who does not exist yet'
    return others_may_write(record)


def _plan_file(item, peeked, planned, created, problems):
    """('write' | 'remove' | None, text before or None) for one file or secret."""
    path, where = item['path'], item['label']
    directory = posixpath.dirname(path)
    final_dir = planned.get(directory) or peeked['dir']
    entry = None if directory in created else peeked['entry']
    if item['state'] == 'absent' and entry is None:
        return None, None  # nothing to remove, wherever it would have been
    if final_dir is None:
        problems.append('%s.path=%s: its directory %s does not exist and directories does not make it'
                        % (where, path, directory))
        return None, None
    problem = _dir_problem(final_dir)
    if problem:
        problems.append('%s.path=%s: its directory %s is %s; files are written and removed only in a directory only '
                        'root can change' % (where, path, directory, problem))
        return None, None
    if entry is not None and entry['kind'] not in ('file', 'link'):
        problems.append('%s.path=%s: is a %s, not a file' % (where, path, entry['kind']))
        return None, None
    if item['state'] == 'absent':
        return 'remove', peeked.get('data')
    if entry is not None and entry['kind'] == 'link':
        problems.append('%s.path=%s: is a symlink (to %s, owned by uid %d): refused, nothing is written through or '
                        'over it; remove it first' % (where, path, entry.get('target', '?'), entry['uid']))
        return None, None
    data = None if entry is None else peeked.get('data')
    if entry is not None and data == item['data'] and (entry['uid'], entry['gid'], entry['mode']) == (0, 0, item['mode']):
        return None, None
    return 'write', data


def _file_diff(item, action, entry, before):
    """The diff entries of one changed file (never called for a secret): its text, and its mode or owner when only
    they change."""
    path = item['path']
    old = (before or b'').decode('utf-8', 'replace')
    if action == 'remove':
        return [{'before_header': path, 'after_header': path, 'before': old, 'after': ''}]
    diffs = []
    if before != item['data']:
        diffs.append({'before_header': path, 'after_header': path, 'before': old,
                      'after': item['data'].decode('utf-8', 'replace')})
    if entry is not None and entry['kind'] == 'file' and (entry['uid'], entry['gid'], entry['mode']) != (0, 0, item['mode']):
        diffs.append({'before_header': path, 'after_header': path,
                      'before': {'path': path, 'owner': entry.get('owner', str(entry['uid'])),
                                 'group': entry.get('group', str(entry['gid'])), 'mode': format_mode(entry['mode'])},
                      'after': {'path': path, 'owner': 'root', 'group': 'root', 'mode': format_mode(item['mode'])}})
    return diffs


def plan(spec, lookups, peeks, users, groups, check_mode):
    """What to do and what to return, or ConfigError naming every refusal (nothing has been written yet).

    ``lookups``: directory path -> lookup record (kind, uid, gid, mode, owner and group names; target and to_dir for
    a link) or None when absent; ``peeks``: file path -> {'dir': record of its directory or None, 'entry': record or
    None, 'data': bytes or None (not read)}; ``users`` / ``groups``: name -> id, None when the host has no such
    account (then refused, except in check mode, where the directory would change). Returns
    {'dirs': [step], 'writes': [(path, bytes, mode)], 'removes': [path], 'result': {...}, 'diff': [...]}; the
    directories first in list order, then the secrets, then the files (the unit, last, after what it refers to)."""
    problems = []
    steps, planned, created = _plan_dirs(spec, lookups, users, groups, check_mode, problems)
    writes, removes, diff, checksums = [], [], [], {}
    for step in steps:
        diff.append({'before_header': step['path'], 'after_header': step['path'],
                     'before': _dir_state(step['path'], step['before']), 'after': _dir_state(step['path'], step['after'])})
    for item in spec['secrets'] + spec['files']:
        peeked = peeks.get(item['path']) or {'dir': None, 'entry': None, 'data': None}
        action, before = _plan_file(item, peeked, planned, created, problems)
        if item['state'] == 'present' and not item['secret']:
            checksums[item['path']] = hashlib.sha1(item['data']).hexdigest()
        if action == 'write':
            writes.append((item['path'], item['data'], item['mode']))
        elif action == 'remove':
            removes.append(item['path'])
        if action and not item['secret']:
            entry = None if posixpath.dirname(item['path']) in created else peeked['entry']
            diff.extend(_file_diff(item, action, entry, before))
    if problems:
        raise ConfigError('; '.join(problems))
    result = {'changed': bool(steps or writes or removes), 'written': [path for path, _data, _mode in writes],
              'removed': removes, 'directories': [step['path'] for step in steps], 'checksums': checksums}
    return {'dirs': steps, 'writes': writes, 'removes': removes, 'result': result, 'diff': diff}
