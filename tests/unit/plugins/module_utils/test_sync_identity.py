# -*- coding: utf-8 -*-
"""module_utils/model/sync_identity: what sglang_sync_identity makes and reads of a host's peer-transfer identity."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.model.sync_identity import (
    host_key_lines,
    key_steps,
    keygen_argv,
    public_key,
    public_key_argv,
)


def test_the_key_is_made_only_when_the_role_makes_it_and_it_is_missing():
    assert key_steps(True, True, False) == {'make': False, 'read': True, 'changed': False}
    assert key_steps(True, False, False) == {'make': True, 'read': True, 'changed': True}
    # check mode: said, not made, and nothing to read yet
    assert key_steps(True, False, True) == {'make': False, 'read': False, 'changed': True}
    assert key_steps(True, True, True) == {'make': False, 'read': True, 'changed': False}
    # the operator's key is never made; read also when missing, so that the read says why it cannot be
    assert key_steps(False, False, False) == {'make': False, 'read': True, 'changed': False}
    assert key_steps(False, False, True) == {'make': False, 'read': True, 'changed': False}


def test_argv_make_an_ed25519_key_without_passphrase_and_read_the_public_half_from_the_private_key():
    assert keygen_argv('/k/id', 'llmops-sglang-sync:h1') == [
        'ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C', 'llmops-sglang-sync:h1', '-f', '/k/id']
    assert public_key_argv('/k/id') == ['ssh-keygen', '-y', '-f', '/k/id']


def test_a_public_key_that_cannot_be_read_fails_naming_the_variable_except_in_check_mode():
    assert public_key(0, 'ssh-ed25519 AAAA x\n', '', '/k/id', False, 'key') == ('ssh-ed25519 AAAA x', None)
    line, why = public_key(255, '', '/k/id: No such file or directory\n', '/k/id', False, 'sglang_model_source.ssh_key')
    assert line == '' and why == ('sglang_model_source.ssh_key=/k/id: its public key cannot be read '
                                  '(/k/id: No such file or directory)')
    assert public_key(1, '', '', '/k/id', False, 'key')[1] == 'key=/k/id: its public key cannot be read (ssh-keygen -y exited 1)'
    assert public_key(0, '\n', '', '/k/id', False, 'key')[1].startswith('key=/k/id')   # rc 0 but no line
    assert public_key(255, '', 'missing', '/k/id', True, 'key') == ('', None)


def test_host_key_lines_drop_blanks_and_comments_in_file_order():
    assert host_key_lines(['ssh-ed25519 AAAA root@h\n\n', None, '# a comment\n ssh-rsa BBBB root@h \n']) == [
        'ssh-ed25519 AAAA root@h', 'ssh-rsa BBBB root@h']
    assert host_key_lines([]) == []
