# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's identity for peer model transfers, decided from what is on the host. Pure, no I/O.

What llmops.sglang.sglang_sync_identity reads and makes in one run on a host (the server role's model_sync.yml): the
sync client key (made when the role makes it and it is missing), its public half (which the peers authorize for the
sync account only), the host's own SSH host keys (which the peers trust, read over the Ansible connection that
Ansible authenticates) and the sync account's authorized_keys as it is (the lines of other plays' hosts stay:
model_sync_access.authorized_keys_text).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def keygen_argv(key, comment):
    """ssh-keygen for a new ed25519 key without a passphrase at ``key``, quiet."""
    return ['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C', comment, '-f', key]


def public_key_argv(key):
    """ssh-keygen printing the public half of the private key at ``key`` (it reads the private key, not KEY.pub)."""
    return ['ssh-keygen', '-y', '-f', key]


def key_steps(generate, key_exists, check_mode):
    """{'make': make the key now, 'read': read its public half, 'changed'}: a missing key is made when ``generate``
    (not in check mode, where it is only said); an operator's key (``generate`` false) is never made, and read
    also when missing, so that the read says why it cannot be."""
    make = bool(generate) and not key_exists
    return {'make': make and not check_mode, 'read': key_exists or not generate or not check_mode, 'changed': make}


def public_key(rc, out, err, key, check_mode, option):
    """(the public key line, None) or ('', why it cannot be read). In check mode a key that cannot be read is no
    failure: it may be the one the real run makes (or the operator's, not placed yet); its key is then ''."""
    line = (out or '').strip()
    if rc == 0 and line:
        return line, None
    if check_mode:
        return '', None
    why = (err or '').strip() or 'ssh-keygen -y exited %s' % rc
    return '', '%s=%s: its public key cannot be read (%s)' % (option, key, why)


def host_key_lines(texts):
    """The host's public host keys, one line each, from the texts of /etc/ssh/ssh_host_*_key.pub in name order
    (blank lines and comments dropped)."""
    lines = []
    for text in texts:
        for line in (text or '').splitlines():
            line = line.strip()
            if line and not line.startswith('#'):
                lines.append(line)
    return lines
