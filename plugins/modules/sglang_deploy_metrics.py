#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: sglang_deploy_metrics
short_description: Publish one SGLang instance's deployment metrics for node_exporter's textfile collector
version_added: 0.1.0
description:
  - Writes the instance's C(<unit>.prom) file (Prometheus text format) to O(dir), whole (a temporary name, fsync, one
    rename), so a scrape never reads half a file. What it says is decided from the text written before
    (C(plugins/module_utils/monitoring/deploy_metrics.py) C(next_text)); the same run of the unit with the same
    verdict leaves the file as it is, so a re-run changes nothing.
  - The text written before is read back from a copy in O(keep_dir), which only root can change, never from O(dir),
    because Debian's textfile directory sits in a tree the C(prometheus) user owns. O(dir) is reached through no
    symlink such a user could place, as M(llmops.sglang.sglang_textfile) does, and made (root's, C(0755)) when missing.
  - A failure to write is a warning, not a failed task; a deployment that answered must not be rolled back for it.
author:
  - llmops.sglang maintainers (@llmops)
options:
  unit:
    description: The systemd unit, such as C(sglang-k26.service); the file is named after it.
    type: str
    required: true
  dir:
    description: node_exporter's C(--collector.textfile.directory).
    type: path
    required: true
  keep_dir:
    description: A directory only root can change, for the copy of the text that is read back.
    type: path
    required: true
  state:
    description:
      - C(deploying) - the last verdict's lines plus the "deploying" marker, from now until the deadline of
        O(wait_timeout) + O(stop_timeout) + O(drain_timeout), for the moment the unit is taken down on purpose.
      - C(present) - the verdict of O(outcome); it drops the marker.
      - C(absent) - remove the file and its kept copy.
    type: str
    choices: [deploying, present, absent]
    default: present
  reason:
    description: What takes the unit down, with O(state=deploying) (the marker's C(reason) label).
    type: str
    choices: [restart, rollback]
    default: restart
  wait_timeout:
    description: With O(state=deploying), the wait's timeout in seconds.
    type: int
    default: 0
  stop_timeout:
    description: With O(state=deploying), the unit's stop timeout in seconds.
    type: int
    default: 0
  drain_timeout:
    description: With O(state=deploying), the drain out of the routers in seconds (0 without routers).
    type: int
    default: 0
  outcome:
    description: With O(state=present), the instance's outcome (an entry of the server role's C(sglang_deployments)).
    type: dict
  digests:
    description: With O(state=present), the configuration's digests (C(unit), C(env)), for the C(config_checksum) label.
    type: dict
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
  - Runs on the managed host as root; Linux only. The timestamps are the managed host's clock.
"""

EXAMPLES = r"""
- name: Mark sglang-k26 as deploying while it restarts
  llmops.sglang.sglang_deploy_metrics:
    unit: sglang-k26.service
    dir: /var/lib/prometheus/node-exporter
    keep_dir: /var/lib/llmops-sglang/server/sglang-k26
    state: deploying
    wait_timeout: 1800
    stop_timeout: 120

- name: Record its verdict
  llmops.sglang.sglang_deploy_metrics:
    unit: sglang-k26.service
    dir: /var/lib/prometheus/node-exporter
    keep_dir: /var/lib/llmops-sglang/server/sglang-k26
    outcome: "{{ sglang_deployments['sglang-k26.service'] }}"
    digests: {unit: 0a1b..., env: 2c3d...}
"""

RETURN = r"""
path:
  description: The textfile.
  returned: always
  type: str
  sample: /var/lib/prometheus/node-exporter/sglang-k26.prom
written:
  description: Whether the text is in place, or with O(state=absent) gone (false when that failed; see the warning).
  returned: always
  type: bool
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.llmops.sglang.plugins.module_utils.host.file_adapters import (
    UnsafePath, publish_file, read_saved, remove_file,
)
from ansible_collections.llmops.sglang.plugins.module_utils.monitoring.deploy_metrics import file_name, next_text


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type='str', required=True),
            dir=dict(type='path', required=True),
            keep_dir=dict(type='path', required=True),
            state=dict(type='str', default='present', choices=['deploying', 'present', 'absent']),
            reason=dict(type='str', default='restart', choices=['restart', 'rollback']),
            wait_timeout=dict(type='int', default=0),
            stop_timeout=dict(type='int', default=0),
            drain_timeout=dict(type='int', default=0),
            outcome=dict(type='dict'),
            digests=dict(type='dict'),
        ),
        required_if=[('state', 'present', ('outcome',))],
        supports_check_mode=True,
    )
    p = module.params
    try:
        name = file_name(p['unit'])
    except ValueError as exc:
        module.fail_json(msg='unit: %s' % exc)
    path, kept = os.path.join(p['dir'], name), os.path.join(p['keep_dir'], name)
    try:
        previous = read_saved(kept)[1].decode('utf-8', 'replace')
    except (UnsafePath, OSError, AttributeError):
        previous = ''
    try:
        text = next_text(p['unit'], p['state'], time.time(), previous, p['outcome'], p['digests'], p['reason'],
                         (p['wait_timeout'], p['stop_timeout'], p['drain_timeout']))
    except ValueError as exc:
        module.fail_json(msg='%s: %s' % (p['unit'], exc))
    changed, written, before, target = False, True, previous, kept
    try:
        if text is None:
            for target in (kept, path):
                if module.check_mode:
                    changed = changed or os.path.lexists(target)
                elif os.path.lexists(os.path.dirname(target)):  # no directory: nothing to remove
                    changed = remove_file(*os.path.split(target)) or changed
        else:  # the kept copy first: root's own, it does not depend on what another user did to dir's tree
            changed = publish_file(kept, text, 0o600, module.check_mode)[0]
            target = path
            changed = publish_file(path, text, 0o644, module.check_mode, create_dir=True)[0] or changed
    except (UnsafePath, OSError) as exc:
        written = False
        done = 'removed from' if text is None else 'written to'
        module.warn('the deployment metrics of %s were not %s %s: %s not %s: %s'
                    % (p['unit'], done, p['dir'], target, done.split()[0], exc))
    result = {'changed': changed, 'path': path, 'written': written}
    if module._diff:  # pylint: disable=protected-access
        result['diff'] = {'before': before, 'after': text or '', 'before_header': path, 'after_header': path}
    module.exit_json(**result)


if __name__ == '__main__':
    main()
