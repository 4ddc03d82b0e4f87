#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: sglang_sync_identity
short_description: This host's identity for peer model transfers, in one read (its sync key made when missing)
version_added: 0.1.0
description:
  - What the server role's peer model transfers need of a host (docs/model-sync.md, "Security"), read in one module
    run instead of four tasks; the deciding is in C(module_utils/model/sync_identity.py).
  - Makes the sync client key O(key) (ed25519, no passphrase) when it is missing and O(generate) is true, and returns
    its public half, read from the private key with C(ssh-keygen -y) (a stale C(KEY.pub) beside it is not trusted).
  - Returns the host's own SSH host keys (C(/etc/ssh/ssh_host_*_key.pub)), which the peers write into their
    known_hosts. They are read over the Ansible connection, which Ansible authenticates.
  - Returns the text of the sync account's O(authorized_keys) as it is now, so that the lines of other plays' hosts
    stay when the role writes it again.
author:
  - llmops.sglang maintainers (@llmops)
options:
  key:
    description: The sync client's private key.
    type: path
    required: true
  generate:
    description:
      - Make O(key) when it is missing. False for a key the operator placed (C(sglang_model_source.ssh_key)), which
        is never made; one that cannot be read fails the task, naming O(key_name).
    type: bool
    default: true
  comment:
    description: The comment of a key this module makes.
    type: str
    default: llmops-sglang-sync
  key_name:
    description: What an error calls O(key) (the role passes the variable it came from).
    type: str
    default: key
  host_keys:
    description: Read the host's own SSH host keys (false returns none).
    type: bool
    default: true
  authorized_keys:
    description: The sync account's authorized_keys file; its text is returned (empty when it does not exist).
    type: path
    required: true
attributes:
  check_mode:
    support: full
    description: Makes no key; one that is missing is said (changed) and its public key returned empty, also for an
      operator's key not placed yet.
  diff_mode:
    support: none
    description: A key it makes is said by RV(public_key); there is no file content to diff.
  platform:
    support: full
    platforms: posix
    description: Linux hosts with OpenSSH's C(ssh-keygen).
notes:
  - Runs on the managed host as root, with C(ssh-keygen) (openssh-client).
seealso:
  - module: llmops.sglang.sglang_model_sync
"""

EXAMPLES = r"""
- name: Make or read this host's identity for peer model transfers
  llmops.sglang.sglang_sync_identity:
    key: /var/lib/llmops-sglang/model-sync/id_ed25519
    comment: "llmops-sglang-sync:{{ inventory_hostname }}"
    authorized_keys: /var/lib/llmops-sglang-sync/.ssh/authorized_keys
  register: identity
"""

RETURN = r"""
public_key:
  description: The key's public half, one OpenSSH line; empty in check mode when the key is not made yet.
  returned: always
  type: str
  sample: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI... llmops-sglang-sync:gpu-01
host_keys:
  description: The host's public SSH host keys, one line each.
  returned: always
  type: list
  elements: str
authorized_keys:
  description: The text of O(authorized_keys) before this play writes it ('' when absent).
  returned: always
  type: str
home_ready:
  description: Whether the directory of O(authorized_keys) exists (false only in check mode on a host where the
    role has not made the account's home yet, so there is nothing to write into).
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.sglang.plugins.module_utils.model import sync_identity
from ansible_collections.llmops.sglang.plugins.module_utils.model.sync_identity_adapters import identity_files


def main():
    module = AnsibleModule(
        argument_spec=dict(
            key=dict(type='path', required=True, no_log=False),
            generate=dict(type='bool', default=True),
            comment=dict(type='str', default='llmops-sglang-sync'),
            key_name=dict(type='str', default='key', no_log=False),
            host_keys=dict(type='bool', default=True, no_log=False),
            authorized_keys=dict(type='path', required=True, no_log=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    seen = identity_files(params['key'], params['authorized_keys'], params['host_keys'])
    steps = sync_identity.key_steps(params['generate'], seen['key_exists'], module.check_mode)
    if steps['make']:
        module.run_command(sync_identity.keygen_argv(params['key'], params['comment']), check_rc=True)
    public, problem = '', None
    if steps['read']:
        rc, out, err = module.run_command(sync_identity.public_key_argv(params['key']))
        public, problem = sync_identity.public_key(rc, out, err, params['key'], module.check_mode, params['key_name'])
    if problem:
        module.fail_json(msg=problem, changed=steps['make'])
    module.exit_json(changed=steps['changed'], public_key=public,
                     host_keys=sync_identity.host_key_lines(seen['host_key_texts']),
                     authorized_keys=seen['authorized_keys'], home_ready=seen['home_ready'])


if __name__ == '__main__':
    main()
