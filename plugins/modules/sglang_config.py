#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: sglang_config
short_description: Write an instance's configuration (directories, files, secrets) in one module run as root
version_added: 0.1.0
description:
  - The server role's configuration step in one module run instead of one per file or directory (issue 24). In this
    order, the server's arguments checked by SGLang's own parser (O(parse)), the directories (C(/etc/sglang), the
    state directory and its parents, the root-only control directories, the shim's directory), then the secrets
    file, then the files (the environment file, the shim, the unit last).
  - Every option is validated, and every path looked at, before anything is written. A refusal (a bad mode, a
    missing parent, a symlink where a directory or file belongs, a file in a directory another user can change, an
    owner the host does not have) fails the task naming the option, the path and what was expected, and nothing is
    changed.
  - A directory is created, or its owner, group and mode set when they differ (as M(ansible.builtin.file) does). A
    file is written whole (a temporary name in the same directory, fsync, one rename), root-owned, only when its
    bytes, mode or owner differ; its directory must be changeable by root alone, and the path is reached through no
    symlink a user other than root could have placed (docs/security.md).
  - A secret's content never appears in the diff, the result or the log; only its path does, in RV(written) or
    RV(removed).
author:
  - llmops.sglang maintainers (@llmops)
options:
  directories:
    description: Directories, made or set in list order.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The directory, an absolute path. A symlink in its place is refused.
        type: path
        required: true
      owner:
        description: Its owner, a user name or numeric id.
        type: str
        default: root
      group:
        description: Its group, a group name or numeric id.
        type: str
        default: root
      mode:
        description:
          - Its permission bits, an octal string such as C('0755'). A number is taken as YAML read it (C(0755)
            unquoted is 493, that is 0o755); a number above 0o777 is refused as a decimal mistake (C(755) is 0o1363).
        type: raw
        required: true
      parents:
        description: Create the missing parents, root:root C(0755), as C(install -d) does; existing ones are left as
          they are. Without it a missing parent is refused.
        type: bool
        default: false
  files:
    description: Files, root:root, written after the secrets in list order; shown in the diff.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The file, an absolute path in a directory only root can change (or one O(directories) makes).
        type: path
        required: true
      content:
        description: Its text (written as UTF-8); required with O(files[].state=present).
        type: str
      mode:
        description: Its permission bits, an octal string such as C('0644') (a number as for O(directories[].mode)).
        type: raw
        required: true
      state:
        description: V(present) writes the file; V(absent) removes it (a symlink there too) when it is there.
        type: str
        choices: [present, absent]
        default: present
  secrets:
    description:
      - Files that hold secrets, root:root, written first, as O(files) but never in the diff, in RV(checksums) or in
        the log. Their contents are marked C(no_log); their paths are returned in RV(written) and RV(removed).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The file, an absolute path in a directory only root can change (or one O(directories) makes).
        type: path
        required: true
      content:
        description: Its text (written as UTF-8); required with O(secrets[].state=present).
        type: str
      mode:
        description: Its permission bits, an octal string such as C('0600') (a number as for O(directories[].mode)).
        type: raw
        required: true
      state:
        description: V(present) writes the file; V(absent) removes it (a symlink there too) when it is there.
        type: str
        choices: [present, absent]
        default: present
  parse:
    description:
      - >-
        The server's arguments, parsed with the venv's own SGLang parser before anything is looked at or written, also
        in check mode (it builds the parser SGLang 0.5.23 builds, C(server_args.py:679-680), and parses, C(:696): no
        GPU, no process, no port). The server role passes them when the unit changes, so that a value or flag SGLang
        refuses fails here, while the old server keeps serving its configuration untouched, instead of in a crash
        loop after the restart.
      - >-
        A refusal fails the task naming the role variable that holds the flag and SGLang's own words, and nothing is
        written. An SGLang without C(sglang.srt.server_args) (older than the releases the role knows) cannot be asked:
        a warning says so, and the files are written.
    type: dict
    suboptions:
      python:
        description: The venv's Python (the unit's launcher); run as root, so it must be one only root can change
          (the server role's decision refuses a venv another user can change before this runs).
        type: path
        required: true
      argv:
        description: The arguments, as the unit passes them to SGLang.
        type: list
        elements: str
        required: true
      server_args:
        description: The role's C(sglang_server_args), to name the key that holds a refused flag.
        type: dict
        default: {}
      extra_args:
        description: The role's C(sglang_extra_args), to name the item that holds a refused flag.
        type: list
        elements: raw
        default: []
      reserved:
        description: The flags the role sets from its own variables, flag name to variable, to name that variable.
        type: dict
        default: {}
      unit:
        description: The instance's unit, named in the refusal.
        type: str
        required: true
      version:
        description: The SGLang version in the venv, named in the refusal.
        type: str
        default: ''
attributes:
  check_mode:
    support: full
    description: Says exactly what would change and writes nothing; a file in a directory still to be made would be
      written, and an owner the host does not have yet (a user the same check run did not create) only makes its
      directory one that would change.
  diff_mode:
    support: full
    description: A list of diffs, one per changed file of O(files) (its text; its mode and owner when only they
      change) and one per directory made or set (path, owner, group, mode); never a secret.
  platform:
    support: full
    platforms: posix
    description: Linux hosts (C(O_NOFOLLOW), descriptors relative to a directory).
notes:
  - Runs on the managed host as root; Linux only.
seealso:
  - module: llmops.sglang.sglang_last_good
"""

EXAMPLES = r"""
- name: Write the instance's configuration
  llmops.sglang.sglang_config:
    directories:
      - {path: /etc/sglang, mode: '0755'}
      - {path: /var/lib/sglang/sglang-k26, owner: sglang, group: sglang, mode: '0750', parents: true}
      - {path: /var/lib/llmops-sglang, mode: '0700'}
      - {path: /var/lib/llmops-sglang/server, mode: '0700'}
      - {path: /var/lib/llmops-sglang/server/sglang-k26, mode: '0700'}
      - {path: /usr/local/lib/llmops-sglang, mode: '0755'}
    secrets:
      - path: /etc/sglang/sglang-k26.secrets.env
        content: "SGLANG_API_KEY={{ vault_sglang_api_key }}\n"
        mode: '0600'
    files:
      - path: /etc/sglang/sglang-k26.env
        content: "{{ lookup('ansible.builtin.template', 'sglang.env.j2') }}"
        mode: '0600'
      - path: /usr/local/lib/llmops-sglang/sglang_launch.py
        content: "{{ lookup('ansible.builtin.file', 'sglang_launch.py', rstrip=false) }}"
        mode: '0644'
      - path: /etc/systemd/system/sglang-k26.service
        content: "{{ lookup('ansible.builtin.template', 'sglang.service.j2') }}"
        mode: '0644'
  register: config

- name: Write the unit only if SGLang's own parser accepts its arguments
  llmops.sglang.sglang_config:
    parse:
      python: /opt/sglang/venv/bin/python
      argv: [--model-path, /models/kimi-k2.6, --tp-size, '8', --reasoning-parser, kimi_k2]
      server_args: {reasoning-parser: kimi_k2}
      unit: sglang-k26.service
    files:
      - path: /etc/systemd/system/sglang-k26.service
        content: "{{ lookup('ansible.builtin.template', 'sglang.service.j2') }}"
        mode: '0644'

- name: No secrets any more
  llmops.sglang.sglang_config:
    secrets:
      - {path: /etc/sglang/sglang-k26.secrets.env, mode: '0600', state: absent}

- name: Reload systemd when the unit changed
  ansible.builtin.systemd_service:
    daemon_reload: true
  when: "'/etc/systemd/system/sglang-k26.service' in config.written"
"""

RETURN = r"""
written:
  description: The files and secrets written (or that would be, in check mode), in the order written.
  returned: always
  type: list
  elements: str
  sample: [/etc/sglang/sglang-k26.secrets.env, /etc/systemd/system/sglang-k26.service]
removed:
  description: The files and secrets removed (or that would be).
  returned: always
  type: list
  elements: str
directories:
  description: The directories created or whose owner, group or mode was set (or would be), missing parents
    included, in that order.
  returned: always
  type: list
  elements: str
  sample: [/var/lib/sglang, /var/lib/sglang/sglang-k26]
checksums:
  description: The SHA-1 of each present file of O(files) as it is after the run (or would be), by path; never a
    secret's.
  returned: always
  type: dict
  sample: {/etc/systemd/system/sglang-k26.service: 3c1b0a5e0d6c2f4a9f0e2b7d8a1c4e6f5b3d2a19}
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.sglang.plugins.module_utils.host.config_files import (
    ConfigError, account_names, check_options, plan, wanted,
)
from ansible_collections.llmops.sglang.plugins.module_utils.host.file_adapters import (
    UnsafePath, account_id, lookup, peek_file, put_dir, put_file, remove_file,
)
from ansible_collections.llmops.sglang.plugins.module_utils.rollout.server_args import PARSE_SCRIPT, parse_verdict

FILE = dict(path=dict(type='path', required=True), content=dict(type='str'), mode=dict(type='raw', required=True),
            state=dict(type='str', choices=['present', 'absent'], default='present'))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            directories=dict(type='list', elements='dict', default=[], options=dict(
                path=dict(type='path', required=True), owner=dict(type='str', default='root'),
                group=dict(type='str', default='root'), mode=dict(type='raw', required=True),
                parents=dict(type='bool', default=False))),
            files=dict(type='list', elements='dict', default=[], options=FILE),
            # no_log on the contents only: on the whole list, Ansible would mask each of its strings (every path,
            # mode and 'present') wherever it appears in the result, the secret's path in `written` included
            secrets=dict(type='list', elements='dict', default=[], no_log=False,
                         options=dict(FILE, content=dict(type='str', no_log=True))),
            parse=dict(type='dict', options=dict(
                python=dict(type='path', required=True), argv=dict(type='list', elements='str', required=True),
                server_args=dict(type='dict', default={}), extra_args=dict(type='list', elements='raw', default=[]),
                reserved=dict(type='dict', default={}), unit=dict(type='str', required=True),
                version=dict(type='str', default=''))),
        ),
        supports_check_mode=True,
    )
    done = {'changed': False, 'written': [], 'removed': [], 'directories': []}
    parse = module.params['parse']
    if parse:
        rc, _out, err = module.run_command([parse['python'], '-c', PARSE_SCRIPT] + parse['argv'])
        refusal, note = parse_verdict(rc, err, parse)
        if refusal:
            module.fail_json(msg=refusal, **done)
        if note:
            module.warn(note)
    try:
        spec = check_options(module.params['directories'], module.params['files'], module.params['secrets'])
        dir_paths, file_paths = wanted(spec)
        users, groups = account_names(spec)
        todo = plan(spec, dict((path, lookup(path)) for path in dir_paths),
                    dict((path, peek_file(path)) for path in file_paths),
                    dict((name, account_id('user', name)) for name in users),
                    dict((name, account_id('group', name)) for name in groups), module.check_mode)
    except (ConfigError, UnsafePath, OSError) as exc:
        module.fail_json(msg='nothing written: %s' % exc, **done)
    try:
        for step in [] if module.check_mode else todo['dirs']:
            put_dir(step['path'], step['uid'], step['gid'], step['mode'], step['create'])
            done['directories'].append(step['path'])
        for path, data, mode in [] if module.check_mode else todo['writes']:
            put_file(path, data, mode)
            done['written'].append(path)
        for path in [] if module.check_mode else todo['removes']:
            remove_file(os.path.dirname(path), os.path.basename(path))
            done['removed'].append(path)
    except (UnsafePath, OSError) as exc:
        done['changed'] = bool(done['directories'] or done['written'] or done['removed'])
        module.fail_json(msg='stopped: %s (done before it: %s)' % (exc, ', '.join(
            done['directories'] + done['written'] + done['removed']) or 'nothing'), **done)
    result = todo['result']
    if module._diff:  # pylint: disable=protected-access
        result['diff'] = todo['diff']
    module.exit_json(**result)


if __name__ == '__main__':
    main()
