# -*- coding: utf-8 -*-
"""sglang_last_good run for real through ansible on this machine (root): save, an interrupted swap, restore, check
mode, and no content of the files (a secret among them) in what it returns."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.llmops.sglang.tests.local.plugins.adhoc import run_module

SECRET = 'sk-last-good-7f3a'

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='writes root-owned files and judges ownership')


def run(args, check=False, fail=False):
    result, output = run_module('sglang_last_good', args, check, fail)
    assert SECRET not in output
    return result


@pytest.fixture
def host(tmp_path):
    os.chmod(str(tmp_path), 0o755)
    etc, control = tmp_path / 'etc', tmp_path / 'control'
    etc.mkdir(mode=0o755)
    control.mkdir(mode=0o700)
    files = {'unit': etc / 'x.service', 'env': etc / 'x.env', 'secrets.env': etc / 'x.secrets.env'}
    files['unit'].write_text(u'[Service]\nExecStart=/bin/true\n')
    files['env'].write_text(u'A=1\n')
    files['secrets.env'].write_text(u'KEY=%s\n' % SECRET)
    for path in files.values():
        os.chmod(str(path), 0o600)
    args = {'dir': str(control / 'last-good'), 'files': dict((k, str(v)) for k, v in files.items()),
            'modes': {'unit': '0644'}}
    return control, files, args


def test_save_then_restore_brings_back_what_served_and_removes_what_it_did_not_have(host):
    control, files, args = host
    saved = run(dict(args, state='saved', pins={'sglang': '0.5.23', 'compressed-tensors': None}))
    assert saved['changed'] and saved['files'] == ['env', 'pins.json', 'secrets.env', 'unit']
    assert sorted(os.listdir(str(control))) == ['last-good']
    assert run(dict(args, state='saved', pins={'sglang': '0.5.23', 'compressed-tensors': None}))['changed'] is False

    # a bad change: another unit, no secrets any more
    files['unit'].write_text(u'[Service]\nExecStart=/bin/false\n')
    files['secrets.env'].unlink()
    preview = run(dict(args, state='restored'), check=True)
    assert preview['changed'] and preview['files'] == ['secrets.env', 'unit'] and preview['removed'] == []
    assert 'false' in files['unit'].read_text() and not files['secrets.env'].exists()  # check mode wrote nothing

    restored = run(dict(args, state='restored'))
    assert restored['changed'] and restored['files'] == ['secrets.env', 'unit']
    assert restored['pins'] == ['sglang==0.5.23']
    assert 'true' in files['unit'].read_text() and SECRET in files['secrets.env'].read_text()
    assert os.stat(str(files['unit'])).st_mode & 0o7777 == 0o644
    # a mode YAML read as a number (0640 unquoted) is taken as the number it is
    files['unit'].write_text(u'[Service]\nExecStart=/bin/false\n')
    run(dict(args, state='restored', modes={'unit': 0o640}))
    assert os.stat(str(files['unit'])).st_mode & 0o7777 == 0o640
    assert os.stat(str(files['secrets.env'])).st_mode & 0o7777 == 0o600
    assert run(dict(args, state='restored'))['changed'] is False


def test_a_secret_the_copy_did_not_have_is_removed_on_restore(host):
    _control, files, args = host
    files['secrets.env'].unlink()
    run(dict(args, state='saved'))
    files['secrets.env'].write_text(u'KEY=%s\n' % SECRET)
    os.chmod(str(files['secrets.env']), 0o600)
    restored = run(dict(args, state='restored'))
    assert restored['removed'] == ['secrets.env'] and not files['secrets.env'].exists()


def test_a_save_stopped_between_its_renames_is_finished_by_the_next_call(host):
    control, _files, args = host
    run(dict(args, state='saved'))
    os.rename(str(control / 'last-good'), str(control / 'last-good.old'))  # killed after the first rename
    assert run(dict(args, state='restored'), check=True)['changed'] is False  # .old is read as the copy
    assert sorted(os.listdir(str(control))) == ['last-good.old']  # check mode moves nothing
    assert run(dict(args, state='restored'))['changed'] is False
    assert sorted(os.listdir(str(control))) == ['last-good']


def test_a_copy_another_user_could_have_written_is_refused_and_nothing_changes(host):
    control, files, args = host
    run(dict(args, state='saved'))
    os.chown(str(control / 'last-good' / 'unit'), 4321, 0)
    files['unit'].write_text(u'[Service]\nExecStart=/bin/false\n')
    refused = run(dict(args, state='restored'), fail=True)
    assert 'last-good/unit is owned by uid 4321' in refused['msg'], refused
    assert 'false' in files['unit'].read_text()
    nothing = run(dict(args, state='restored', dir=str(control / 'none')), fail=True)
    assert 'nothing to restore' in nothing['msg'], nothing
