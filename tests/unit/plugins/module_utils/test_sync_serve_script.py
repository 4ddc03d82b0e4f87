# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/server/files/llmops_sglang_sync_serve.py (the sync account's forced command) on a real directory tree: it
serves a complete version's file from an offset, answers state, and refuses a symlink anywhere below the versions
directory, an incomplete version, and a request the rules refuse. The fleet test runs it behind sshd."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.machinery
import importlib.util
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))
SCRIPT = os.path.join(ROOT, 'roles', 'server', 'files', 'llmops_sglang_sync_serve.py')


@pytest.fixture
def serve(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, 'plugins', 'module_utils', 'model'))
    loader = importlib.machinery.SourceFileLoader('llmops_sglang_sync_serve', SCRIPT)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    script = importlib.util.module_from_spec(spec)
    loader.exec_module(script)
    roots = tmp_path / 'roots.d'
    roots.mkdir()
    versions = tmp_path / 'k26.versions'
    (roots / 'k26').write_text('%s\n' % versions)
    monkeypatch.setattr(script, 'ROOTS', str(roots))
    logged = []
    monkeypatch.setattr(script.syslog, 'syslog', lambda _prio, text: logged.append(text))
    version = versions / 'v1'
    (version / 'sub').mkdir(parents=True)
    (version / 'config.json').write_bytes(b'0123456789')
    (version / 'sub' / 'tok.json').write_bytes(b'abc')
    (version / '.llmops-model.json').write_text('{}')
    secret = tmp_path / 'secret'
    secret.write_text('secret')
    os.symlink(str(secret), str(version / 'escape'))
    os.symlink(str(tmp_path), str(version / 'up'))
    (versions / 'v2').mkdir()  # no marker: incomplete
    (versions / 'v2' / 'config.json').write_text('x')
    (versions / '.staging-v3').mkdir()
    (versions / '.staging-v3' / '.sync-failed').write_text('failed')
    return script, str(versions), logged


def test_a_file_of_a_complete_version_is_served_from_its_offset(serve, capfd):
    script, versions, logged = serve
    assert script.serve('read 4 %s/v1/config.json' % versions) == 0
    assert capfd.readouterr().out == '456789'
    assert script.serve('read 0 %s/v1/sub/tok.json' % versions) == 0
    assert capfd.readouterr().out == 'abc'
    assert logged == ['read %s/v1/config.json from byte 4' % versions, 'read %s/v1/sub/tok.json from byte 0' % versions]


def test_state_says_ready_failed_or_pending(serve, capfd):
    script, versions, _logged = serve
    for version, answer in (('v1', 'ready'), ('v3', 'failed'), ('v2', 'pending'), ('v9', 'pending')):
        assert script.serve('state %s/%s' % (versions, version)) == 0
        assert capfd.readouterr().out == answer + '\n'


@pytest.mark.parametrize('request_text, why', [
    ('read 0 {v}/v1/escape', 'symlinks below'),
    ('read 0 {v}/v1/up/secret', 'symlinks below'),
    ('read 0 {v}/v2/config.json', 'is not complete here'),
    ('read 0 {v}/v1/sub', 'not a regular file'),
    ('read 0 {v}/v1/missing', 'No such file'),
    ('read 0 {v}/../secret', 'not normalized'),
    ('cat {v}/v1/config.json', 'not a request this account serves'),
])
def test_everything_else_is_refused_and_nothing_is_written_to_stdout(serve, capfd, request_text, why):
    script, versions, logged = serve
    assert script.serve(request_text.format(v=versions)) == 2
    out = capfd.readouterr()
    assert out.out == '' and why in out.err and 'refused' in out.err, out
    assert len(logged) == 1 and logged[0].startswith('refused: ')
