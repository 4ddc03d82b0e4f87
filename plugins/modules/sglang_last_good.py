#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: sglang_last_good
short_description: Save the configuration that served as last known good, or put it back, in one step as root
version_added: 0.1.0
description:
  - The server role's rollback target. With O(state=saved), the live configuration files (O(files)) and the package
    versions that served (O(pins)) become the copy in O(dir), written whole into C(DIR.new) and swapped in by two
    renames, so a run stopped anywhere leaves the previous copy whole (as C(DIR), or as C(DIR.old), which the next
    call moves back). A live file that does not exist (no secrets) is left out of the copy.
  - With O(state=restored), each live file becomes its saved copy again (written whole, root-owned, O(modes)), and a
    live file the copy does not hold is removed. RV(pins) says which package versions to install back.
  - Root reads and writes only through descriptors that follow no symlink a user other than root could have placed,
    the copy's directory must be changeable by root alone, and every file read must be root's alone (a single link,
    no other writer); otherwise nothing is changed and the task fails naming the entry and why (docs/security.md).
  - Contents never appear in the result (the secrets file is one of the files).
author:
  - llmops.sglang maintainers (@llmops)
options:
  dir:
    description: The copy, a flat directory of files, in a directory only root can change.
    type: path
    required: true
  state:
    description: V(saved) makes the copy equal the live files; V(restored) makes the live files equal the copy.
    type: str
    required: true
    choices: [saved, restored]
  files:
    description: The live files by the name their copy has in O(dir); it must name C(unit).
    type: dict
    required: true
  modes:
    description: The permission bits of a restored live file by name, as octal strings (C('0644')) or numbers;
      C(0600) for a name not given. The copies are always C(0600).
    type: dict
    default: {}
  pins:
    description: With O(state=saved), the package versions that served (C(pins.json) in the copy).
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: Reads and compares, reports whether it would change anything, and writes nothing.
  diff_mode:
    support: none
    description: The files hold secrets; no diff is shown.
  platform:
    support: full
    platforms: posix
    description: Linux hosts (C(O_NOFOLLOW), descriptors relative to a directory).
notes:
  - Runs on the managed host as root; Linux only.
"""

EXAMPLES = r"""
- name: Save the configuration that served
  llmops.sglang.sglang_last_good:
    dir: /var/lib/llmops-sglang/server/sglang-k26/last-good
    state: saved
    files:
      unit: /etc/systemd/system/sglang-k26.service
      env: /etc/sglang/sglang-k26.env
      secrets.env: /etc/sglang/sglang-k26.secrets.env
    pins: {sglang: 0.5.23, compressed-tensors: 0.12.2}

- name: Put it back
  llmops.sglang.sglang_last_good:
    dir: /var/lib/llmops-sglang/server/sglang-k26/last-good
    state: restored
    files:
      unit: /etc/systemd/system/sglang-k26.service
      env: /etc/sglang/sglang-k26.env
      secrets.env: /etc/sglang/sglang-k26.secrets.env
    modes: {unit: '0644'}
  register: restored
"""

RETURN = r"""
files:
  description: The names of the files written (the copy's with O(state=saved), the live ones with O(state=restored)).
  returned: always
  type: list
  elements: str
removed:
  description: With O(state=restored), the live files removed because the copy does not hold them.
  returned: always
  type: list
  elements: str
pins:
  description: With O(state=restored), the saved package versions as pip requirements (C(name==version)).
  returned: always
  type: list
  elements: str
  sample: [compressed-tensors==0.12.2, sglang==0.5.23]
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.sglang.plugins.module_utils.host.file_adapters import (
    UnsafePath, finish_swap, read_file, remove_file, replace_dir, write_file,
)
from ansible_collections.llmops.sglang.plugins.module_utils.host.last_good import (
    LastGoodError, check_names, pin_specs, restore_plan, save_plan,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dir=dict(type='path', required=True),
            state=dict(type='str', required=True, choices=['saved', 'restored']),
            files=dict(type='dict', required=True),
            modes=dict(type='dict', default={}),
            pins=dict(type='dict', default={}),
        ),
        supports_check_mode=True,
    )
    copy_dir, files = module.params['dir'].rstrip('/'), module.params['files']
    parent, name = os.path.split(copy_dir)
    result = dict(changed=False, files=[], removed=[], pins=[])
    try:
        check_names(files)
        # an octal string ('0644'), or a number YAML already read as octal (0644 unquoted is 420)
        modes = dict((key, value if isinstance(value, int) else int(str(value), 8))
                     for key, value in module.params['modes'].items())
        if not module.check_mode:
            finish_swap(parent, name)
        saved = read_file(copy_dir, 'dir')
        if saved is None and module.check_mode:  # a swap stopped half way: finish_swap would bring it back
            saved = read_file(copy_dir + '.old', 'dir')
        live = dict((key, read_file(path)) for key, path in files.items())
        if module.params['state'] == 'saved':
            copy, result['changed'] = save_plan(live, module.params['pins'], saved)
            result['files'] = sorted(copy)
            if result['changed'] and not module.check_mode:
                replace_dir(parent, name, copy)
        else:
            writes, removals, pins = restore_plan(saved, live)
            result.update(changed=bool(writes or removals), files=sorted(writes), removed=removals,
                          pins=pin_specs(pins))
            for key in [] if module.check_mode else sorted(writes):
                write_file(os.path.dirname(files[key]), os.path.basename(files[key]), writes[key], modes.get(key, 0o600))
            for key in [] if module.check_mode else removals:
                remove_file(os.path.dirname(files[key]), os.path.basename(files[key]))
    except ValueError:
        module.fail_json(msg='modes must map names to octal strings such as 0644, got %r' % module.params['modes'])
    except (LastGoodError, UnsafePath, OSError) as exc:
        module.fail_json(msg='%s not %s: %s' % (copy_dir, module.params['state'], exc), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
