#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: sglang_state_adopt
short_description: Move root's saved state out of a directory the service user owns, trusting only what root wrote
version_added: 0.1.0
description:
  - Earlier versions of this collection kept the last-known-good configuration and the checkpoint cache inside the unit's state
    directory, which belongs to the service user. That user could rename them and put its own in their place, and
    root would later install and start what it found (docs/security.md). The server role now keeps them in a
    root-only tree; this module brings an old host's copies over once.
  - For each item, when O(moves[].dest) does not exist and O(moves[].src) does, the source (a file, or a flat
    directory of files) is read through descriptors that follow no symlink a user other than root could have placed,
    and is adopted only when every entry is a root-owned, single-link file or directory that no other user can
    write. It is written whole under a temporary name into the destination's directory, which only root may be able
    to change, and renamed into place; the source is then removed.
  - A source that fails that test is not read further, not adopted and left where it is, and the result says why
    (a warning too), since this role did not write it and root must not use it.
  - When the destination exists already, a source only root could have written is removed (the role's own leftover);
    any other is left alone and reported.
author:
  - llmops.sglang maintainers (@llmops)
options:
  moves:
    description: What to adopt, in order.
    type: list
    elements: dict
    required: true
    suboptions:
      src:
        description: The old place, inside the service user's state directory.
        type: path
        required: true
      dest:
        description: The new place; its directory must exist and be changeable by root alone.
        type: path
        required: true
attributes:
  check_mode:
    support: full
    description: Reads and judges the sources, reports what it would adopt, refuse or remove, and writes nothing.
  diff_mode:
    support: none
    description: Moves files whose content is not shown (the saved secrets among them).
  platform:
    support: full
    platforms: posix
    description: Linux hosts (C(O_NOFOLLOW), descriptors relative to a directory).
notes:
  - Runs on the managed host as root (the role's become); Linux only (C(O_NOFOLLOW), descriptors relative to a
    directory).
"""

EXAMPLES = r"""
- name: Move the last-known-good copy of an older release into the root-only tree
  llmops.sglang.sglang_state_adopt:
    moves:
      - src: /var/lib/sglang/sglang-k26/last-good
        dest: /var/lib/llmops-sglang/server/sglang-k26/last-good
      - src: /var/lib/sglang/sglang-k26/.preflight/checkpoint-verified.json
        dest: /var/lib/llmops-sglang/server/sglang-k26/checkpoint-verified.json
"""

RETURN = r"""
adopted:
  description: Sources moved to their destination.
  returned: always
  type: list
  elements: str
  sample: [/var/lib/sglang/sglang-k26/last-good]
refused:
  description: Sources not adopted and left in place, with why (an entry another user owns or may write, a symlink).
  returned: always
  type: list
  elements: dict
  sample: [{path: /var/lib/sglang/sglang-k26/last-good, why: "/var/lib/sglang/sglang-k26/last-good is owned by uid 998"}]
removed:
  description: Root's own leftovers removed because the destination already existed.
  returned: always
  type: list
  elements: str
"""

import os
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.sglang.plugins.module_utils.host.file_adapters import (
    UnsafePath, read_saved, replace_dir, root_only_dir, write_file,
)


def adopt(src, dest, check_mode):
    """'adopted', 'removed', None (nothing there or nothing to do) or ('refused', why)."""
    try:
        kind, content = read_saved(src)
    except UnsafePath as exc:
        return 'refused', str(exc)
    except OSError:
        return None
    if os.path.lexists(dest):
        if not check_mode:
            remove(src, kind)
        return 'removed'
    if check_mode:
        return 'adopted'
    parent, name = os.path.split(dest)
    if kind == 'file':
        fd = root_only_dir(parent)
        try:
            write_file(parent, name, content, 0o600, dir_fd=fd)
            os.fsync(fd)
        finally:
            os.close(fd)
    else:
        replace_dir(parent, name, content)  # written whole beside it, then renamed in (dest does not exist)
    remove(src, kind)
    return 'adopted'


def remove(path, kind):
    # rmtree deletes through descriptors on Linux (no symlink is followed), the single file with unlink
    if kind == 'file':
        os.unlink(path)
    else:
        shutil.rmtree(path)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            moves=dict(type='list', elements='dict', required=True, options=dict(
                src=dict(type='path', required=True),
                dest=dict(type='path', required=True),
            )),
        ),
        supports_check_mode=True,
    )
    result = {'changed': False, 'adopted': [], 'refused': [], 'removed': []}
    for move in module.params['moves']:
        try:
            outcome = adopt(move['src'], move['dest'], module.check_mode)
        except (UnsafePath, OSError) as exc:
            module.fail_json(msg='%s could not be moved to %s: %s' % (move['src'], move['dest'], exc), **result)
        if isinstance(outcome, tuple):
            result['refused'].append({'path': move['src'], 'why': outcome[1]})
            module.warn('%s was not adopted and root will not use it: %s. It was not written by this role; it stays '
                        'where it is for you to look at.' % (move['src'], outcome[1]))
        elif outcome:
            result[outcome].append(move['src'])
            result['changed'] = True
    module.exit_json(**result)


if __name__ == '__main__':
    main()
