# -*- coding: utf-8 -*-
"""sglang_sync_identity run for real through ansible on this machine (root, the real ssh-keygen): a key made once and
then only read, check mode making nothing, an operator's key that cannot be read naming its variable, the
authorized_keys text and whether its directory exists."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.model.sync_identity import host_key_lines
from ansible_collections.llmops.sglang.plugins.module_utils.model.sync_identity_adapters import identity_files
from ansible_collections.llmops.sglang.tests.local.plugins.adhoc import run_module

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='runs as root, as the role does')


def run(args, check=False, fail=False):
    return run_module('sglang_sync_identity', args, check, fail)[0]


def test_the_key_is_made_once_then_read_and_check_mode_makes_nothing(tmp_path):
    key = tmp_path / 'sync' / 'id_ed25519'
    key.parent.mkdir(mode=0o700)
    args = {'key': str(key), 'comment': 'llmops-sglang-sync:h1', 'authorized_keys': str(tmp_path / 'home' / '.ssh' / 'ak')}
    checked = run(args, check=True)
    assert (checked['changed'], checked['public_key'], checked['home_ready']) == (True, '', False)
    assert not key.exists()
    made = run(args)
    assert made['changed'] is True and key.exists()
    assert made['public_key'].startswith('ssh-ed25519 ') and made['public_key'].endswith(' llmops-sglang-sync:h1')
    again = run(args)
    assert again['changed'] is False and again['public_key'] == made['public_key']
    assert run(args, check=True)['public_key'] == made['public_key']
    # the host keys as /etc/ssh has them (this machine may have none: the adapter's own test below reads real files)
    wanted = [line.strip() for path in sorted(glob.glob('/etc/ssh/ssh_host_*_key.pub'))
              for line in Path(path).read_text().splitlines() if line.strip()]
    assert again['host_keys'] == wanted
    assert run(dict(args, host_keys=False))['host_keys'] == []


def test_the_authorized_keys_text_is_returned_as_it_is(tmp_path):
    key = tmp_path / 'id_ed25519'
    ssh = tmp_path / 'home' / '.ssh'
    ssh.mkdir(parents=True)
    args = {'key': str(key), 'authorized_keys': str(ssh / 'authorized_keys')}
    assert (run(args)['authorized_keys'], run(args)['home_ready']) == ('', True)
    (ssh / 'authorized_keys').write_text('ssh-ed25519 AAAA other-play\n')
    assert run(args)['authorized_keys'] == 'ssh-ed25519 AAAA other-play\n'


def test_an_operators_key_is_never_made_and_one_that_cannot_be_read_names_its_variable(tmp_path):
    key = tmp_path / 'operator_key'
    args = {'key': str(key), 'generate': False, 'key_name': 'sglang_model_source.ssh_key',
            'authorized_keys': str(tmp_path / 'ak')}
    failed = run(args, fail=True)
    assert failed['msg'].startswith('sglang_model_source.ssh_key=%s: its public key cannot be read (' % key), failed
    assert not key.exists()
    # check mode: the operator may place it before the real run
    assert run(args, check=True)['public_key'] == ''
    key.write_text('not a key\n')
    os.chmod(str(key), 0o600)
    assert 'its public key cannot be read' in run(args, fail=True)['msg']


def test_the_reads_see_real_host_keys_and_the_key_in_name_order(tmp_path):
    """The module's host-key read on real files (this machine's /etc/ssh may hold none, which would make the module
    test above compare two empty lists): two .pub files and one that does not match the pattern."""
    ssh = tmp_path / 'ssh'
    ssh.mkdir()
    (ssh / 'ssh_host_rsa_key.pub').write_text('ssh-rsa BBBB root@h\n')
    (ssh / 'ssh_host_ed25519_key.pub').write_text('ssh-ed25519 AAAA root@h\n')
    (ssh / 'ssh_host_ed25519_key').write_text('private, never read\n')
    key = tmp_path / 'id'
    key.write_text('x')
    seen = identity_files(str(key), str(tmp_path / 'home' / '.ssh' / 'ak'), pattern=str(ssh / 'ssh_host_*_key.pub'))
    assert host_key_lines(seen['host_key_texts']) == ['ssh-ed25519 AAAA root@h', 'ssh-rsa BBBB root@h']
    assert (seen['key_exists'], seen['authorized_keys'], seen['home_ready']) == (True, '', False)
    assert identity_files(str(tmp_path / 'none'), str(tmp_path / 'ak'), host_keys=False,
                          pattern=str(ssh / '*.pub'))['host_key_texts'] == []
