# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""config_files: what sglang_config creates, sets, writes and removes, decided from what it found (records only)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.host.config_files import (
    ConfigError, account_names, check_options, parse_mode, plan, wanted,
)

SECRET = 'SGLANG_API_KEY=sk-config-5e1d\n'
OLD_SECRET = 'SGLANG_API_KEY=sk-config-old-77\n'
ENV, UNIT = '/etc/sglang/k26.env', '/etc/systemd/system/k26.service'
SECRETS, SHIM = '/etc/sglang/k26.secrets.env', '/usr/local/lib/llmops-sglang/sglang_launch.py'
USERS, GROUPS = {'root': 0, 'sglang': 990}, {'root': 0, 'sglang': 990}


def record(kind='dir', uid=0, gid=0, mode=0o755, **extra):
    names = {0: 'root', 990: 'sglang'}
    return dict({'kind': kind, 'uid': uid, 'gid': gid, 'mode': mode, 'nlink': 1, 'owner': names.get(uid, str(uid)),
                 'group': names.get(gid, str(gid))}, **extra)


def options():
    """The server role's configuration of one instance, as the role will give it."""
    directories = [
        {'path': '/etc/sglang', 'mode': '0755'},
        {'path': '/var/lib/sglang/k26', 'owner': 'sglang', 'group': 'sglang', 'mode': '0750', 'parents': True},
        {'path': '/var/lib/llmops-sglang', 'mode': '0700'},
        {'path': '/var/lib/llmops-sglang/server', 'mode': '0700'},
        {'path': '/var/lib/llmops-sglang/server/k26', 'mode': '0700'},
        {'path': '/usr/local/lib/llmops-sglang', 'mode': '0755'},
    ]
    files = [{'path': ENV, 'content': 'A=1\n', 'mode': '0600'}, {'path': SHIM, 'content': 'print(1)\n', 'mode': '0644'},
             {'path': UNIT, 'content': '[Service]\nExecStart=/bin/true\n', 'mode': '0644'}]
    secrets = [{'path': SECRETS, 'content': SECRET, 'mode': '0600'}]
    return directories, files, secrets


def fresh_host():
    """Only the system's own directories: /etc, /var/lib, /usr/local/lib, /etc/systemd/system."""
    lookups = {'/etc': record(), '/var/lib': record(), '/var': record(), '/usr/local/lib': record()}
    peeks = {ENV: {'dir': None, 'entry': None, 'data': None}, SECRETS: {'dir': None, 'entry': None, 'data': None},
             SHIM: {'dir': None, 'entry': None, 'data': None},
             UNIT: {'dir': record(), 'entry': None, 'data': None}}
    return lookups, peeks


def configured_host(spec):
    """Everything already as the options say."""
    lookups = {'/etc': record(), '/var': record(), '/var/lib': record(), '/usr/local/lib': record(),
               '/etc/sglang': record(), '/var/lib/sglang': record(), '/var/lib/sglang/k26': record(uid=990, gid=990,
                                                                                                   mode=0o750),
               '/var/lib/llmops-sglang': record(mode=0o700), '/var/lib/llmops-sglang/server': record(mode=0o700),
               '/var/lib/llmops-sglang/server/k26': record(mode=0o700), '/usr/local/lib/llmops-sglang': record()}
    peeks = {}
    for item in spec['secrets'] + spec['files']:
        peeks[item['path']] = {'dir': record(), 'entry': record('file', mode=item['mode']), 'data': item['data']}
    return lookups, peeks


def run(spec, lookups, peeks, check_mode=False, users=None, groups=None):
    return plan(spec, lookups, peeks, USERS if users is None else users, GROUPS if groups is None else groups,
                check_mode)


def everything_said(done):
    """All the plan hands to the module, as text: what a secret must never be part of."""
    return repr((done['result'], done['diff']))


# --- the options ---------------------------------------------------------------------------------------------------

def test_the_options_are_normalized_with_their_defaults():
    spec = check_options(*options())
    assert [item['path'] for item in spec['directories']][:2] == ['/etc/sglang', '/var/lib/sglang/k26']
    assert spec['directories'][0] == {'label': 'directories[0]', 'path': '/etc/sglang', 'mode': 0o755, 'owner': 'root',
                                      'group': 'root', 'parents': False}
    assert spec['files'][0] == {'label': 'files[0]', 'path': ENV, 'state': 'present', 'mode': 0o600, 'secret': False,
                                'data': b'A=1\n'}
    assert spec['secrets'][0]['secret'] and spec['secrets'][0]['label'] == 'secrets[0]'
    assert check_options([{'path': '//etc//sglang/', 'mode': '755'}], [], [])['directories'][0]['path'] == '/etc/sglang'
    assert check_options([], [], []) == {'directories': [], 'files': [], 'secrets': []}
    assert account_names(spec) == (['root', 'sglang'], ['root', 'sglang'])
    assert account_names(check_options([{'path': '/x', 'mode': '0755', 'owner': '990', 'group': '0'}], [], [])) == ([], [])


def test_a_mode_is_an_octal_string_or_the_number_yaml_read():
    assert parse_mode('0644', 'm') == 0o644 == parse_mode('644', 'm') == parse_mode(420, 'm')  # 0644 unquoted: 420
    assert parse_mode('2775', 'm') == 0o2775 and parse_mode(0, 'm') == 0
    with pytest.raises(ConfigError) as refused:
        check_options([], [{'path': '/a', 'content': '', 'mode': '0644'}, {'path': '/b', 'content': '', 'mode': '0644'},
                           {'path': '/etc/sglang/k26.env', 'content': '', 'mode': '644x'}], [])
    assert str(refused.value) == ('files[2].mode=\'644x\': expected an octal mode such as "0644" '
                                  '(path /etc/sglang/k26.env)')
    for bad in ('0o644', '64', '08', '', None, True, 1.5, '0644 '):
        with pytest.raises(ConfigError, match='expected an octal mode such as "0644"'):
            parse_mode(bad, 'files[0].mode')
    with pytest.raises(ConfigError, match=r'files\[0\].mode=644: .* 644 is 0o1204: quote the mode'):
        parse_mode(644, 'files[0].mode')  # a decimal 644 would be sticky and owner-writable-only


def test_every_problem_is_named_at_once_with_its_option_and_path():
    directories = [{'path': 'etc/sglang', 'mode': '0755'}, {'path': '/var/../etc', 'mode': '0755'},
                   {'path': '/srv', 'mode': '0755', 'owner': 'bad name'}]
    files = [{'path': '/etc/x', 'mode': '0644'}, {'path': '/etc/x', 'content': 'a', 'mode': '0644', 'state': 'gone'},
             {'path': '/etc/y', 'content': 7, 'mode': '0644'}]
    with pytest.raises(ConfigError) as refused:
        check_options(directories, files, [{'path': '/etc/x', 'content': SECRET, 'mode': 'rw'}])
    message = str(refused.value)
    for expected in ("directories[0].path='etc/sglang': expected an absolute path",
                     "directories[1].path='/var/../etc': expected an absolute path below / without",
                     "directories[2].owner='bad name': expected a user or group name or a numeric id (path /srv)",
                     'files[0].content: required when state is present (path /etc/x)',
                     "files[1].state='gone': expected present or absent (path /etc/x)",
                     'files[2].content: expected a string (path /etc/y)',
                     'secrets[0].mode=\'rw\': expected an octal mode such as "0644" (path /etc/x)',
                     'files[1].path=/etc/x: also given as files[0]; each path once',
                     'secrets[0].path=/etc/x: also given as files[0]; each path once'):
        assert expected in message
    assert SECRET.strip() not in message and 'sk-config' not in message


def test_an_absent_file_needs_no_content():
    spec = check_options([], [], [{'path': SECRETS, 'mode': '0600', 'state': 'absent'}])
    assert spec['secrets'][0]['state'] == 'absent' and spec['secrets'][0]['data'] is None


def test_the_paths_looked_at_are_each_directory_its_parent_or_all_its_ancestors_and_each_file():
    spec = check_options(*options())
    dirs, files = wanted(spec)
    assert dirs[:5] == ['/etc/sglang', '/etc', '/var/lib/sglang/k26', '/var/lib/sglang', '/var/lib']
    assert '/var' in dirs and '/' not in dirs and len(dirs) == len(set(dirs))
    assert files == [SECRETS, ENV, SHIM, UNIT]  # the secrets first: the order they are written in


# --- a fresh host, then an unchanged one ---------------------------------------------------------------------------

def test_on_a_fresh_host_everything_is_made_and_every_file_written_check_mode_alike():
    spec = check_options(*options())
    lookups, peeks = fresh_host()
    done = run(spec, lookups, peeks)
    assert done == run(spec, lookups, peeks, check_mode=True)  # check mode's answer is the plan itself
    assert done['result']['directories'] == [
        '/etc/sglang', '/var/lib/sglang', '/var/lib/sglang/k26', '/var/lib/llmops-sglang',
        '/var/lib/llmops-sglang/server', '/var/lib/llmops-sglang/server/k26', '/usr/local/lib/llmops-sglang']
    steps = dict((step['path'], step) for step in done['dirs'])
    assert all(step['create'] for step in done['dirs'])
    assert (steps['/var/lib/sglang']['uid'], steps['/var/lib/sglang']['mode']) == (0, 0o755)  # a parent, install -d's
    assert (steps['/var/lib/sglang/k26']['uid'], steps['/var/lib/sglang/k26']['gid']) == (990, 990)
    assert steps['/var/lib/sglang/k26']['mode'] == 0o750
    assert done['result']['written'] == [SECRETS, ENV, SHIM, UNIT] and done['result']['removed'] == []
    assert done['writes'][0] == (SECRETS, SECRET.encode(), 0o600)
    assert done['result']['changed'] is True
    assert done['result']['checksums'] == {
        ENV: hashlib.sha1(b'A=1\n').hexdigest(), SHIM: hashlib.sha1(b'print(1)\n').hexdigest(),
        UNIT: hashlib.sha1(b'[Service]\nExecStart=/bin/true\n').hexdigest()}
    texts = [entry for entry in done['diff'] if isinstance(entry['after'], str)]
    assert [(entry['before_header'], entry['before']) for entry in texts] == [(ENV, ''), (SHIM, ''), (UNIT, '')]
    dirs = [entry for entry in done['diff'] if isinstance(entry['after'], dict)]
    assert dirs[0] == {'before_header': '/etc/sglang', 'after_header': '/etc/sglang',
                       'before': {'path': '/etc/sglang', 'state': 'absent'},
                       'after': {'path': '/etc/sglang', 'owner': 'root', 'group': 'root', 'mode': '0755'}}
    assert SECRET.strip() not in everything_said(done) and SECRETS not in repr(done['diff'])


def test_an_unchanged_host_changes_nothing_and_still_says_the_checksums():
    spec = check_options(*options())
    done = run(spec, *configured_host(spec))
    assert done['result'] == {'changed': False, 'written': [], 'removed': [], 'directories': [],
                              'checksums': run(spec, *fresh_host())['result']['checksums']}
    assert done['dirs'] == [] and done['writes'] == [] and done['diff'] == []


def test_a_content_change_writes_that_file_only_and_its_diff_shows_the_text():
    spec = check_options(*options())
    lookups, peeks = configured_host(spec)
    peeks[UNIT]['data'] = b'[Service]\nExecStart=/bin/false\n'
    done = run(spec, lookups, peeks)
    assert done['result']['written'] == [UNIT] and done['result']['changed'] is True
    assert done['diff'] == [{'before_header': UNIT, 'after_header': UNIT, 'before': '[Service]\nExecStart=/bin/false\n',
                             'after': '[Service]\nExecStart=/bin/true\n'}]


def test_a_mode_or_owner_change_rewrites_the_file_and_the_diff_says_the_attributes():
    spec = check_options(*options())
    lookups, peeks = configured_host(spec)
    peeks[ENV]['entry'] = record('file', mode=0o644)
    peeks[SHIM]['entry'] = record('file', uid=990, mode=0o644)
    done = run(spec, lookups, peeks)
    assert done['result']['written'] == [ENV, SHIM]
    assert done['diff'][0] == {'before_header': ENV, 'after_header': ENV,
                               'before': {'path': ENV, 'owner': 'root', 'group': 'root', 'mode': '0644'},
                               'after': {'path': ENV, 'owner': 'root', 'group': 'root', 'mode': '0600'}}
    assert done['diff'][1]['before']['owner'] == 'sglang' and done['diff'][1]['after']['owner'] == 'root'


def test_a_directory_that_differs_is_set_and_one_that_is_a_symlink_or_a_file_refused():
    spec = check_options(*options())
    lookups, peeks = configured_host(spec)
    lookups['/var/lib/sglang/k26'] = record(uid=0, gid=0, mode=0o755)
    done = run(spec, lookups, peeks)
    assert done['dirs'] == [{'path': '/var/lib/sglang/k26', 'create': False, 'uid': 990, 'gid': 990, 'mode': 0o750,
                             'before': lookups['/var/lib/sglang/k26'], 'after': done['dirs'][0]['after']}]
    assert done['diff'][0]['before'] == {'path': '/var/lib/sglang/k26', 'owner': 'root', 'group': 'root', 'mode': '0755'}
    assert done['diff'][0]['after'] == {'path': '/var/lib/sglang/k26', 'owner': 'sglang', 'group': 'sglang',
                                        'mode': '0750'}
    lookups['/etc/sglang'] = record('link', target='/srv/sglang', to_dir=True)
    lookups['/usr/local/lib/llmops-sglang'] = record('file', mode=0o644)
    with pytest.raises(ConfigError) as refused:
        run(spec, lookups, peeks)
    assert 'directories[0].path=/etc/sglang: is a symlink (to /srv/sglang), not a directory: refused' in str(refused.value)
    assert 'directories[5].path=/usr/local/lib/llmops-sglang: is a file, not a directory' in str(refused.value)


def test_a_missing_parent_is_made_only_with_parents_or_by_an_earlier_entry():
    lookups = {'/var': record(), '/var/lib': record()}
    spec = check_options([{'path': '/var/lib/a/b', 'mode': '0700'}], [], [])
    with pytest.raises(ConfigError, match=r'directories\[0\].path=/var/lib/a/b: its parent /var/lib/a does not exist '
                                          r'\(parents: true creates it'):
        run(spec, lookups, {})
    spec = check_options([{'path': '/var/lib/a', 'mode': '0700'}, {'path': '/var/lib/a/b', 'mode': '0700'}], [], [])
    assert run(spec, lookups, {})['result']['directories'] == ['/var/lib/a', '/var/lib/a/b']
    # a parent made by parents, then given its own mode by a later entry
    spec = check_options([{'path': '/var/lib/a/b', 'mode': '0700', 'parents': True}, {'path': '/var/lib/a', 'mode': '0711'}],
                         [], [])
    steps = run(spec, lookups, {})['dirs']
    assert [(step['path'], step['create'], step['mode']) for step in steps] == [
        ('/var/lib/a', True, 0o755), ('/var/lib/a/b', True, 0o700), ('/var/lib/a', False, 0o711)]
    # an existing parent that is a root-placed symlink to a directory is walked through; one to nothing is not
    lookups['/var/lib'] = record('link', target='/srv/lib', to_dir=True)
    assert run(check_options([{'path': '/var/lib/a', 'mode': '0700'}], [], []), lookups, {})['result']['changed']
    lookups['/var/lib'] = record('link', target='/gone', to_dir=False)
    with pytest.raises(ConfigError, match='/var/lib is a link, not a directory'):
        run(check_options([{'path': '/var/lib/a', 'mode': '0700'}], [], []), lookups, {})


def test_an_owner_the_host_lacks_is_refused_but_in_check_mode_only_makes_the_directory_change():
    spec = check_options(*options())
    lookups, peeks = configured_host(spec)
    with pytest.raises(ConfigError) as refused:
        run(spec, lookups, peeks, users={'root': 0, 'sglang': None}, groups={'root': 0, 'sglang': None})
    assert "directories[1].owner='sglang': no such user on this host (path /var/lib/sglang/k26)" in str(refused.value)
    assert "directories[1].group='sglang': no such group on this host" in str(refused.value)
    # check mode on a host where the role's user task (itself in check mode) created nobody
    lookups, peeks = fresh_host()
    done = run(spec, lookups, peeks, check_mode=True, users={'root': 0, 'sglang': None}, groups={'root': 0, 'sglang': None})
    assert '/var/lib/sglang/k26' in done['result']['directories'] and done['result']['written'] == [SECRETS, ENV, SHIM, UNIT]


# --- where a file may be written -----------------------------------------------------------------------------------

def test_a_file_goes_only_into_a_directory_only_root_can_change_and_that_exists_or_is_made():
    spec = check_options([], [{'path': '/etc/sglang/k26.env', 'content': 'A=1\n', 'mode': '0600'}], [])
    with pytest.raises(ConfigError, match=r'files\[0\].path=/etc/sglang/k26.env: its directory /etc/sglang does not '
                                          r'exist and directories does not make it'):
        run(spec, {}, {ENV: {'dir': None, 'entry': None, 'data': None}})
    with pytest.raises(ConfigError, match='its directory /etc/sglang is owned by uid 990; files are written and removed '
                                          'only in a directory only root can change'):
        run(spec, {}, {ENV: {'dir': record(uid=990), 'entry': None, 'data': None}})
    with pytest.raises(ConfigError, match='is writable by every user'):
        run(spec, {}, {ENV: {'dir': record(mode=0o777), 'entry': None, 'data': None}})
    # the state directory is the service user's: no file of root's goes there, also when it is still to be made
    spec = check_options([{'path': '/var/lib/k26', 'owner': 'sglang', 'group': 'sglang', 'mode': '0750'}],
                         [{'path': '/var/lib/k26/x', 'content': '', 'mode': '0600'}], [])
    with pytest.raises(ConfigError, match='its directory /var/lib/k26 is owned by uid 990'):
        run(spec, {'/var/lib': record()}, {'/var/lib/k26/x': {'dir': None, 'entry': None, 'data': None}})
    # a directory another user can change now, which the same run makes root's: the file is written (its text unknown)
    spec = check_options([{'path': '/etc/sglang', 'mode': '0755'}], [{'path': ENV, 'content': 'A=1\n', 'mode': '0600'}],
                         [])
    done = run(spec, {'/etc': record(), '/etc/sglang': record(mode=0o777)},
               {ENV: {'dir': record(mode=0o777), 'entry': record('file', mode=0o600), 'data': None}})
    assert done['result']['directories'] == ['/etc/sglang'] and done['result']['written'] == [ENV]


def test_a_symlink_in_the_place_of_a_file_is_refused_a_directory_too():
    spec = check_options(*options())
    lookups, peeks = configured_host(spec)
    peeks[UNIT] = {'dir': record(), 'entry': record('link', uid=4321, target='/root/.ssh/authorized_keys'), 'data': None}
    peeks[SECRETS] = {'dir': record(), 'entry': record('dir', mode=0o700), 'data': None}
    with pytest.raises(ConfigError) as refused:
        run(spec, lookups, peeks)
    assert ('files[2].path=%s: is a symlink (to /root/.ssh/authorized_keys, owned by uid 4321): refused, nothing is '
            'written through or over it' % UNIT) in str(refused.value)
    assert 'secrets[0].path=%s: is a dir, not a file' % SECRETS in str(refused.value)


def test_absent_removes_a_file_or_a_symlink_that_is_there_and_nothing_else():
    spec = check_options([], [{'path': ENV, 'mode': '0600', 'state': 'absent'}],
                         [{'path': SECRETS, 'mode': '0600', 'state': 'absent'}])
    peeks = {ENV: {'dir': record(), 'entry': record('file', mode=0o600), 'data': b'A=1\n'},
             SECRETS: {'dir': record(), 'entry': record('link', target='/x'), 'data': None}}
    done = run(spec, {}, peeks)
    assert done['removes'] == [SECRETS, ENV] and done['result']['removed'] == [SECRETS, ENV]
    assert done['result']['changed'] and done['result']['written'] == [] and done['result']['checksums'] == {}
    assert done['diff'] == [{'before_header': ENV, 'after_header': ENV, 'before': 'A=1\n', 'after': ''}]
    gone = {ENV: {'dir': record(), 'entry': None, 'data': None}, SECRETS: {'dir': None, 'entry': None, 'data': None}}
    assert run(spec, {}, gone)['result']['changed'] is False  # also when its directory is not there
    # nothing to remove needs no safe directory; something to remove does
    assert run(spec, {}, {ENV: {'dir': record(uid=990), 'entry': None, 'data': None}, SECRETS: gone[SECRETS]})['removes'] == []
    with pytest.raises(ConfigError, match='owned by uid 990'):
        run(spec, {}, {ENV: {'dir': record(uid=990), 'entry': record('file'), 'data': None}, SECRETS: gone[SECRETS]})


# --- secrets -------------------------------------------------------------------------------------------------------

def test_a_secret_is_written_and_named_but_never_in_a_diff_or_a_checksum():
    spec = check_options(*options())
    lookups, peeks = configured_host(spec)
    peeks[SECRETS] = {'dir': record(), 'entry': record('file', mode=0o644), 'data': OLD_SECRET.encode()}
    done = run(spec, lookups, peeks)
    assert done['result']['written'] == [SECRETS] and done['writes'] == [(SECRETS, SECRET.encode(), 0o600)]
    assert done['diff'] == [] and SECRETS not in done['result']['checksums']
    said = everything_said(done)
    assert 'sk-config' not in said and hashlib.sha1(SECRET.encode()).hexdigest() not in said
    # and when it goes
    spec = check_options([], [], [{'path': SECRETS, 'mode': '0600', 'state': 'absent'}])
    done = run(spec, {}, {SECRETS: peeks[SECRETS]})
    assert done['result']['removed'] == [SECRETS] and done['diff'] == [] and 'sk-config' not in everything_said(done)
