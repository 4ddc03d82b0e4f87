#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: sglang_textfile
short_description: Write a file as root into a directory another user's tree may hold, without following their links
version_added: 0.1.0
description:
  - Writes O(content) to O(path) whole (a temporary name in the same directory, fsync, one rename), so a reader such
    as node_exporter's textfile collector never sees half a file.
  - For a textfile of one's own; the server role's deployment metrics are written the same way by
    M(llmops.sglang.sglang_deploy_metrics), which also decides their text. Debian's
    C(/var/lib/prometheus/node-exporter) is root's, but
    C(/var/lib/prometheus) belongs to the C(prometheus) user, who could replace C(node-exporter) with a symlink to
    any directory. The path is opened one directory at a time without following a symlink a user other than root
    could have placed, and the last directory must be changeable by root alone; otherwise nothing is written and the
    task fails naming the entry and why.
author:
  - llmops.sglang maintainers (@llmops)
options:
  path:
    description: The file to write; its directory must exist.
    type: path
    required: true
  content:
    description: The text to write.
    type: str
    required: true
  mode:
    description: The file's permission bits, as an octal string.
    type: str
    default: '0644'
  create_dir:
    description:
      - Create O(path)'s directory (root's, C(0755)) when it does not exist, with its missing parents, as
        C(install -d) does. An existing directory is left as it is and judged like any other.
    type: bool
    default: false
  keep:
    description:
      - A second copy of O(content) (mode C(0600)), written the same way and first, for root to read back later
        instead of O(path) (which may sit in a tree another user owns). Its directory must be changeable by root
        alone. It is written also when O(path) is then refused.
    type: path
attributes:
  check_mode:
    support: full
    description: Says whether the file would change; writes nothing.
  diff_mode:
    support: full
    description: The old and new text.
  platform:
    support: full
    platforms: posix
    description: Linux hosts (C(O_NOFOLLOW), descriptors relative to a directory).
notes:
  - Runs on the managed host as root; Linux only.
"""

EXAMPLES = r"""
- name: Publish a deployment's outcome for node_exporter, and keep its text where only root can change it
  llmops.sglang.sglang_textfile:
    path: /var/lib/prometheus/node-exporter/sglang-k26.prom
    content: "{{ text }}"
    create_dir: true
    keep: /var/lib/llmops-sglang/server/sglang-k26/sglang-k26.prom
"""

RETURN = r"""
path:
  description: The file written (or that would be).
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.sglang.plugins.module_utils.host.file_adapters import UnsafePath, publish_file


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            content=dict(type='str', required=True),
            mode=dict(type='str', default='0644'),
            create_dir=dict(type='bool', default=False),
            keep=dict(type='path'),
        ),
        supports_check_mode=True,
    )
    path, text, keep = module.params['path'], module.params['content'], module.params['keep']
    try:
        mode = int(module.params['mode'], 8)
    except ValueError:
        module.fail_json(msg='mode must be an octal string such as 0644, got %r' % module.params['mode'])
    kept = False
    try:  # the kept copy first: root's own, it does not depend on what another user did to path's tree
        kept = bool(keep) and publish_file(keep, text, 0o600, module.check_mode)[0]
    except (UnsafePath, OSError) as exc:
        module.fail_json(msg='%s not written: %s' % (keep, exc), path=path)
    try:
        changed, before = publish_file(path, text, mode, module.check_mode, module.params['create_dir'])
    except (UnsafePath, OSError) as exc:
        module.fail_json(msg='%s not written: %s' % (path, exc), path=path, changed=kept)
    changed = changed or kept
    result = {'changed': changed, 'path': path}
    if module._diff:  # pylint: disable=protected-access
        result['diff'] = {'before': before, 'after': text, 'before_header': path, 'after_header': path}
    module.exit_json(**result)


if __name__ == '__main__':
    main()
