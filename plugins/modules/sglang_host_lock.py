#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: sglang_host_lock
short_description: One rollout per host at a time - a lease with an owner, taken over when its holder is gone
version_added: 0.1.0
description:
  - Takes, renews or releases the host's rollout lock, a small JSON record under C(/run) naming the
    C(ansible-playbook) run that changes the host (controller, pid, user, since when, lease end).
  - The same run re-enters its own lock; another run is refused (or waits, with O(wait)) with a message naming the
    holder. A lock whose holder is gone is taken over - at once when the holder ran on the same controller and its
    process is gone, else when its lease ends. C(/run) is a tmpfs, so a reboot clears it.
  - Taking and releasing the lock is bookkeeping of the run, not a change of the host; the task reports
    C(changed=false), so an idempotent rollout still shows C(changed=0).
  - The action plugin of the same name computes the owner on the controller, waits and retries, and decides
    staleness; the module only reads and writes the record under C(flock).
author:
  - llmops.sglang maintainers (@llmops)
options:
  path:
    description: The lock file on the host.
    type: path
    default: /run/llmops-sglang/rollout.lock
  state:
    description: V(locked) takes or renews the lock; V(unlocked) releases it if this run holds it.
    type: str
    choices: [locked, unlocked]
    default: locked
  lease:
    description: Seconds the lock stays valid without a renewal (cover the longest step of a run).
    type: int
    default: 3600
  wait:
    description: Seconds to wait for another run's lock before failing (the action plugin retries every 5 s).
    type: int
    default: 0
  owner:
    description: Set by the action plugin (the controller's ansible-playbook process); do not set it.
    type: dict
  break_token:
    description: Set by the action plugin to take over a stale lock whose holder it found gone.
    type: str
  require_root:
    description:
      - Refuse to run, before reading or writing anything, unless the module runs as root, with a message that names
        the login user and the C(become) settings to use. Also in check mode.
      - The server role sets it, as its lock is the first thing it does on a host and everything after needs root.
    type: bool
    default: false
    version_added: 0.1.0
attributes:
  action:
    support: full
    description: The action plugin waits, retries and decides whether a holder is gone.
  check_mode:
    support: full
    description: Reports whether the lock could be taken, and writes nothing.
  diff_mode:
    support: none
    description: No diff.
  platform:
    support: full
    platforms: posix
    description: Linux hosts (C(/run), C(flock)).
"""

EXAMPLES = r"""
- name: One rollout at a time on this host
  llmops.sglang.sglang_host_lock:
    wait: 60
    lease: 3600

- name: Release it
  llmops.sglang.sglang_host_lock:
    state: unlocked

- name: A play that logs in as an unprivileged user must escalate (become) before it changes anything
  llmops.sglang.sglang_host_lock:
    require_root: true
  become: true
"""

RETURN = r"""
locked:
  description: Whether this run holds the lock after the task.
  returned: always
  type: bool
held_by:
  description: The holder's record when another run holds the lock.
  returned: when another run holds it
  type: dict
  sample: {controller: ops-01, pid: 4242, user: root, since: 1764601200.0, expires: 1764604800.0}
record:
  description: This run's record after taking or renewing.
  returned: when locked
  type: dict
released:
  description: Whether this run held the lock and released it.
  returned: with O(state=unlocked)
  type: bool
euid:
  description: The user id the module ran as, when O(require_root) refused it.
  returned: when refused for not running as root
  type: int
  sample: 1000
broke_stale:
  description: >-
    The record of a holder found gone (a killed ansible-playbook of this controller) whose lock was taken over; the
    task also warns, naming its pid and controller.
  returned: when that happened
  type: dict
"""

import fcntl
import json
import os
import pwd
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.host.host_lock import decide, holder_message, new_record
from ansible_collections.llmops.sglang.plugins.module_utils.host.privilege import root_refusal


def read_record(handle):
    handle.seek(0)
    text = handle.read()
    try:
        record = json.loads(text) if text.strip() else {}
    except ValueError:
        record = {}
    return record if isinstance(record, dict) else {}


def write_record(handle, record):
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps(record, sort_keys=True))
    handle.flush()
    os.fsync(handle.fileno())


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', default='/run/llmops-sglang/rollout.lock'),
            state=dict(type='str', choices=['locked', 'unlocked'], default='locked'),
            lease=dict(type='int', default=3600),
            wait=dict(type='int', default=0),
            owner=dict(type='dict'),
            break_token=dict(type='str', no_log=False),
            require_root=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params['require_root']:
        euid = os.geteuid()
        try:
            user = pwd.getpwuid(euid).pw_name
        except KeyError:
            user = None
        refusal = root_refusal(euid, user, 'Deploying SGLang (llmops.sglang.server)')
        if refusal:
            module.fail_json(msg=refusal, locked=False, euid=euid)
    owner = params['owner'] or {}
    if not owner.get('token'):
        module.fail_json(msg='sglang_host_lock needs its action plugin (owner is not set): call it as llmops.sglang.sglang_host_lock')
    path = params['path']
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        if module.check_mode:
            module.exit_json(changed=False, locked=params['state'] == 'locked')
        os.makedirs(directory, 0o700)
    owner = dict(owner, path=path)
    flags = os.O_RDWR | os.O_CREAT
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, 'r+') as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        record = read_record(handle)
        now = time.time()
        if params['state'] == 'unlocked':
            ours = record.get('token') == owner['token']
            if ours and not module.check_mode:
                write_record(handle, {})
            module.exit_json(changed=False, locked=False, released=ours)
        if decide(record, owner['token'], now, params['break_token']) == 'held':
            module.exit_json(changed=False, locked=False, held_by=record,
                             msg=holder_message(record, os.uname()[1], now))
        mine = new_record(record, owner, now, params['lease'])
        if not module.check_mode:
            write_record(handle, mine)
        module.exit_json(changed=False, locked=True, record=mine)


if __name__ == '__main__':
    main()
