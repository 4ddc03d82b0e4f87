# -*- coding: utf-8 -*-
"""sglang_config run for real through ansible on this machine (root), in a temporary tree laid out as an instance's:
the first write, an unchanged second run, one changed file, check mode, the diff (with the secret never in any
output), state absent, a symlink refused where a file or a directory belongs, directories with owner, mode and
parents."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
ANSIBLE = Path(sys.executable).parent / 'ansible'
USER = 4321  # any uid that is not root: the service user of the state directory
SECRET = 'sk-config-9b4e71'

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='writes root-owned files and sets owners')


def run(args, check=False, fail=False, extra=()):
    """(result, everything ansible printed) of one sglang_config run; a diff is printed only without -o."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / '.build' / 'collections'), ANSIBLE_LOCALHOST_WARNING='0',
               ANSIBLE_INVENTORY_UNPARSED_WARNING='0', ANSIBLE_PYTHON_INTERPRETER=sys.executable,
               ANSIBLE_CALLBACK_RESULT_FORMAT='json', ANSIBLE_NOCOLOR='1')
    argv = [str(ANSIBLE), 'localhost', '-c', 'local', '-m', 'llmops.sglang.sglang_config', '-a', json.dumps(args)]
    argv += (['--check'] if check else []) + (list(extra) or ['-o'])
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False, cwd=str(ROOT))
    printed = done.stdout + done.stderr
    assert (done.returncode != 0) == fail, printed
    assert SECRET not in printed  # whatever the run, the verbosity or the diff
    return json.loads(done.stdout.split(' => ', 1)[1].strip()), printed


def mode_of(path):
    st = os.lstat(str(path))
    return st.st_uid, st.st_gid, st.st_mode & 0o7777


@pytest.fixture
def host(tmp_path):
    """An instance's configuration, its paths below tmp_path, as the server role gives it."""
    os.chmod(str(tmp_path), 0o755)
    etc, units = tmp_path / 'etc' / 'sglang', tmp_path / 'etc' / 'systemd' / 'system'
    state, control = tmp_path / 'var' / 'lib' / 'sglang' / 'k26', tmp_path / 'var' / 'lib' / 'llmops-sglang'
    shim = tmp_path / 'usr' / 'local' / 'lib' / 'llmops-sglang'
    units.mkdir(parents=True)
    paths = {'env': etc / 'k26.env', 'secrets': etc / 'k26.secrets.env', 'unit': units / 'k26.service',
             'shim': shim / 'sglang_launch.py', 'etc': etc, 'state': state, 'control': control, 'shim_dir': shim}
    args = {
        'directories': [
            {'path': str(etc), 'mode': '0755'},
            {'path': str(state), 'owner': str(USER), 'group': str(USER), 'mode': '0750', 'parents': True},
            {'path': str(control), 'mode': '0700'},
            {'path': str(control / 'server'), 'mode': '0700'},
            {'path': str(control / 'server' / 'k26'), 'mode': '0700'},
            {'path': str(shim), 'mode': '0755', 'parents': True},
        ],
        'files': [
            {'path': str(paths['env']), 'content': 'SGLANG_PORT=30000\n', 'mode': '0600'},
            {'path': str(paths['shim']), 'content': 'print("shim")\n', 'mode': '0644'},
            {'path': str(paths['unit']), 'content': '[Service]\nExecStart=/bin/true\n', 'mode': '0644'},
        ],
        'secrets': [{'path': str(paths['secrets']), 'content': 'SGLANG_API_KEY=%s\n' % SECRET, 'mode': '0600'}],
    }
    return paths, args


def test_the_first_run_writes_everything_and_the_second_changes_nothing(host):
    paths, args = host
    result, _printed = run(args)
    assert result['changed'] is True
    assert result['written'] == [str(paths[name]) for name in ('secrets', 'env', 'shim', 'unit')]
    assert result['removed'] == []
    state = paths['state']
    made = [paths['etc'], state.parents[2], state.parents[1], state.parent, state]  # var and var/lib made too
    assert result['directories'][:5] == [str(path) for path in made]
    assert str(paths['control'] / 'server' / 'k26') in result['directories']
    assert paths['env'].read_text() == 'SGLANG_PORT=30000\n' and paths['unit'].read_text().startswith('[Service]')
    assert paths['secrets'].read_text() == 'SGLANG_API_KEY=%s\n' % SECRET
    for name, mode in (('env', 0o600), ('secrets', 0o600), ('shim', 0o644), ('unit', 0o644)):
        assert mode_of(paths[name]) == (0, 0, mode), name
    assert mode_of(state) == (USER, USER, 0o750)
    assert mode_of(state.parent) == (0, 0, 0o755) and mode_of(state.parent.parent) == (0, 0, 0o755)  # install -d's
    assert mode_of(paths['control'] / 'server' / 'k26') == (0, 0, 0o700) and mode_of(paths['shim_dir']) == (0, 0, 0o755)
    assert result['checksums'] == {
        str(paths['env']): hashlib.sha1(b'SGLANG_PORT=30000\n').hexdigest(),
        str(paths['shim']): hashlib.sha1(b'print("shim")\n').hexdigest(),
        str(paths['unit']): hashlib.sha1(b'[Service]\nExecStart=/bin/true\n').hexdigest()}
    again, _printed = run(args)
    assert again == dict(result, changed=False, written=[], removed=[], directories=[])
    assert run(args, check=True)[0]['changed'] is False


def test_a_changed_file_or_mode_is_the_only_thing_written(host):
    paths, args = host
    run(args)
    args['files'][2]['content'] = '[Service]\nExecStart=/bin/false\n'
    os.chmod(str(paths['state']), 0o755)  # and a directory someone loosened
    result, _printed = run(args)
    assert (result['written'], result['directories']) == ([str(paths['unit'])], [str(paths['state'])])
    assert paths['unit'].read_text().endswith('/bin/false\n') and mode_of(paths['state']) == (USER, USER, 0o750)
    os.chmod(str(paths['env']), 0o644)
    args['files'][0]['mode'] = 384  # a mode YAML read as a number (0600 unquoted) is that number
    assert run(args)[0]['written'] == [str(paths['env'])] and mode_of(paths['env']) == (0, 0, 0o600)


def test_check_mode_on_a_fresh_host_writes_nothing_and_says_all_it_would(host):
    paths, args = host
    result, _printed = run(args, check=True)
    assert result['changed'] is True
    assert result['written'] == [str(paths[name]) for name in ('secrets', 'env', 'shim', 'unit')]
    assert str(paths['etc']) in result['directories'] and str(paths['state'].parent) in result['directories']
    assert not paths['etc'].exists() and not paths['state'].parent.exists() and not paths['unit'].exists()
    assert result == run(args)[0]  # what it said is what it then did
    args['files'][0]['content'] = 'SGLANG_PORT=30001\n'
    assert run(args, check=True)[0]['written'] == [str(paths['env'])]
    assert paths['env'].read_text() == 'SGLANG_PORT=30000\n'


def test_the_diff_shows_the_files_and_never_the_secret(host):
    paths, args = host
    run(args)
    args['files'][0]['content'] = 'SGLANG_PORT=30001\n'
    args['files'][2]['content'] = '[Service]\nExecStart=/bin/false\n'
    args['secrets'][0]['content'] = 'SGLANG_API_KEY=%s-rotated\n' % SECRET
    for extra in (['--diff', '-v'], ['--diff', '-vvv']):
        result, printed = run(args, check=True, extra=extra)
        # the secret would be written (so the check below is not vacuous), and run() found no trace of its value
        assert str(paths['secrets']) in result['written'] and len(result['written']) == 3
        assert '-SGLANG_PORT=30000' in printed and '+SGLANG_PORT=30001' in printed
        assert '-ExecStart=/bin/true' in printed and '+ExecStart=/bin/false' in printed
        assert 'before: %s' % paths['env'] in printed and 'before: %s' % paths['unit'] in printed
        assert 'before: %s' % paths['secrets'] not in printed and 'after: %s' % paths['secrets'] not in printed
        assert 'sk-config' not in printed and 'rotated' not in printed
    # ansible-core 2.19 shows the module's arguments at -vvv (2.21 does not): the secret's content masked there
    assert '"invocation"' not in printed or 'VALUE_SPECIFIED_IN_NO_LOG_PARAMETER' in printed
    result, printed = run(args, extra=['--diff', '-v'])
    assert str(paths['secrets']) in result['written'] and paths['secrets'].read_text().endswith('-rotated\n')


def test_state_absent_removes_the_file_and_then_nothing(host):
    paths, args = host
    run(args)
    args['secrets'] = [{'path': str(paths['secrets']), 'mode': '0600', 'state': 'absent'}]
    result, _printed = run(args)
    assert (result['changed'], result['removed'], result['written']) == (True, [str(paths['secrets'])], [])
    assert not paths['secrets'].exists()
    assert run(args)[0]['changed'] is False


def test_a_symlink_where_a_file_or_a_directory_belongs_is_refused_before_anything_is_written(host, tmp_path):
    paths, args = host
    target = tmp_path / 'elsewhere'
    target.write_text(u'untouched\n')
    paths['etc'].parent.mkdir(exist_ok=True)
    os.symlink(str(target), str(paths['unit']))
    os.lchown(str(paths['unit']), USER, USER)
    refused, _printed = run(args, fail=True)
    assert 'files[2].path=%s: is a symlink (to %s, owned by uid %d): refused' % (paths['unit'], target, USER) \
        in refused['msg'], refused
    assert refused['changed'] is False and refused['written'] == []
    assert target.read_text() == u'untouched\n' and os.path.islink(str(paths['unit']))
    assert not paths['etc'].exists() and not paths['state'].parent.exists()  # validated before anything was made
    os.unlink(str(paths['unit']))
    (tmp_path / 'real-etc').mkdir()
    os.symlink(str(tmp_path / 'real-etc'), str(paths['etc']))
    refused, _printed = run(args, fail=True)
    assert 'directories[0].path=%s: is a symlink (to %s), not a directory: refused' % (paths['etc'], tmp_path / 'real-etc') \
        in refused['msg'], refused
    assert os.listdir(str(tmp_path / 'real-etc')) == []


def test_bad_options_are_refused_naming_the_option_and_path(host):
    paths, args = host
    args['files'][1]['mode'] = '644x'
    args['directories'][2].pop('mode')
    refused, _printed = run(args, fail=True)
    assert refused['msg'] == 'missing required arguments: mode found in directories'  # Ansible's own check
    args['directories'][2]['mode'] = '0700'
    refused, _printed = run(args, fail=True)
    assert refused['msg'] == ('nothing written: files[1].mode=\'644x\': expected an octal mode such as "0644" '
                              '(path %s)' % paths['shim'])
    assert not paths['etc'].exists()


def standin_python(tmp_path, importable=True):
    """A Python whose `sglang` is the test stand-in's (its parser has SGLang 0.5.23's flags), or one with no SGLang."""
    path = tmp_path / ('python' if importable else 'python-without-sglang')
    path.write_text('#!/bin/sh\n%sexec %s "$@"\n' % (
        'PYTHONPATH=%s ' % (ROOT / 'tests' / 'standin' / 'src') if importable else 'PYTHONPATH= ', sys.executable))
    path.chmod(0o755)
    return str(path)


def test_arguments_sglangs_parser_refuses_write_nothing_also_in_check_mode(host, tmp_path):
    paths, args = host
    parse = {'python': standin_python(tmp_path), 'unit': 'k26.service', 'version': '0.5.23',
             'server_args': {'mem-fraction-static': '0.9 x'}, 'reserved': {'port': 'sglang_port'},
             'argv': ['--model-path', '/models/k26', '--port', '30000', '--mem-fraction-static', '0.9 x']}
    for check in (True, False):
        result, printed = run(dict(args, parse=parse), check=check, fail=True)
        assert result['msg'] == (
            "sglang_server_args['mem-fraction-static']: SGLang 0.5.23 (%s) refuses the arguments: sglang serve: error: "
            "argument --mem-fraction-static: invalid float value: '0.9 x'. Nothing was changed: k26.service keeps its "
            "running configuration." % parse['python']), printed
        assert (result['written'], result['directories']) == ([], [])
        assert not paths['etc'].exists() and not paths['unit'].exists()
    # Accepted: written as without the check (the same parser, a value it takes).
    accepted = dict(parse, argv=parse['argv'][:-1] + ['0.9'], server_args={'mem-fraction-static': 0.9})
    result, printed = run(dict(args, parse=accepted))
    assert result['written'] == [str(paths[name]) for name in ('secrets', 'env', 'shim', 'unit')], printed
    assert 'warnings' not in result and 'will judge them' not in printed, printed
    # An SGLang whose parser cannot be imported cannot be asked: a warning, and the files are written.
    args['files'][2]['content'] = '[Service]\nExecStart=/bin/false\n'
    result, printed = run(dict(args, parse=dict(parse, python=standin_python(tmp_path, importable=False))), extra=['-v'])
    assert result['written'] == [str(paths['unit'])], printed
    assert ("sglang.srt.server_args does not import (No module named 'sglang'); the server's own start will judge them"
            in printed), printed
