#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: sglang_observe
short_description: Everything the rollout plan needs about a host's SGLang instances, in one read-only call
version_added: 0.1.0
description:
  - The observation half of the plan pass of C(playbooks/deploy_k26.yml), and the server role's one read of an
    instance before it decides (plugins/module_utils/rollout/rollout_plan.py decide). For each instance, the SHA-1 digest of
    each of its files (unit, environment, secrets, launcher shim; no content is returned), the unit's state and its
    main process' start time, the modification times of its configuration, and how the files compare with the
    configuration saved as last known good (equality, and the saved copies' SHA-1 digests) plus the saved package
    pins.
  - For each venv, its Python and package versions, whether pip and C(Python.h) are present.
  - Which of the Debian packages, directories, users and groups the server role would create are missing.
  - The controller renders the wanted files and compares digests (plugins/module_utils/rollout/rollout_plan.py), so a host with
    nothing to do costs this one module call.
author:
  - llmops.sglang maintainers (@llmops)
requirements:
  - systemd (C(systemctl)); C(dpkg-query) for O(apt_packages)
options:
  instances:
    description:
      - One entry per instance. V(unit) is the systemd unit; V(files) maps a name (V(unit), V(env), V(secrets.env),
        V(shim)) to the live file's path; V(last_good_dir) is the directory of the last-known-good copy (its files
        are named like those of V(files), with C(pins.json) for the package versions); V(mtimes) lists paths or glob
        patterns whose modification times the process start is compared with.
      - Optional, V(model_path) is the instance's checkpoint directory, reported as C(model) (whether it
        is complete, as M(llmops.sglang.sglang_info) reports C(model)); V(port) (an int) is the instance's port,
        reported as C(port_in_use) (whether something listens on it).
    type: list
    elements: dict
    default: []
  venvs:
    description: Virtual environments to describe.
    type: list
    elements: path
    default: []
  packages:
    description: Distribution names whose versions to report from each venv.
    type: list
    elements: str
    default: [sglang, compressed-tensors, torch]
  apt_packages:
    description:
      - Debian packages that must be installed; C({python_major_minor}) in a name is replaced with the first venv's
        Python version (C(python{python_major_minor}-dev) is C(python3.11-dev) for a 3.11 venv).
    type: list
    elements: str
    default: []
  directories:
    description: Directories that must exist.
    type: list
    elements: path
    default: []
  users:
    description: Users that must exist.
    type: list
    elements: str
    default: []
  groups:
    description: Groups that must exist.
    type: list
    elements: str
    default: []
  secrets_key:
    description:
      - The key of the secrets files' digests (HMAC-SHA256, C(plugins/module_utils/secret_flags.py) secrets_digest),
        a random value the run keeps to itself. The digest of an instance's V(secrets.env) file, live and saved, is
        keyed with it, so that no result carries a plain digest of a secret that could be tested offline against
        guesses (an AWX job event keeps every result). Required when an instance lists a V(secrets.env) file.
    type: str
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to diff.
  platform:
    support: full
    platforms: posix
    description: Linux hosts with systemd and C(/proc).
"""

EXAMPLES = r"""
- name: Observe an instance
  llmops.sglang.sglang_observe:
    instances:
      - unit: sglang-k26.service
        files: {unit: /etc/systemd/system/sglang-k26.service, env: /etc/sglang/sglang-k26.env,
                secrets.env: /etc/sglang/sglang-k26.secrets.env}
        last_good_dir: /var/lib/llmops-sglang/server/sglang-k26/last-good
        mtimes: [/etc/systemd/system/sglang-k26.service, /etc/sglang/sglang-k26.env]
    venvs: [/opt/sglang/venv]
    apt_packages: [python3-dev, "python{python_major_minor}-dev"]
    # the run's own random key (a no_log fact): the secrets file's digest is keyed with it
    secrets_key: "{{ __secrets_key }}"
  register: observed

- name: Observe one instance, with its checkpoint and its port (what the server role reads before it decides)
  llmops.sglang.sglang_observe:
    instances:
      - unit: sglang-k26.service
        files: {unit: /etc/systemd/system/sglang-k26.service, env: /etc/sglang/sglang-k26.env}
        last_good_dir: /var/lib/llmops-sglang/server/sglang-k26/last-good
        mtimes: [/etc/systemd/system/sglang-k26.service, /etc/sglang/sglang-k26.env]
        model_path: /models/Kimi-K2.6
        port: 30000
    venvs: [/opt/sglang/venv]
  register: observed
"""

RETURN = r"""
instances:
  description:
    - Unit to what was seen of its instance. C(files), name to the live file's SHA-1 (null when it does not exist);
      the V(secrets.env) file's is keyed with O(secrets_key) (C(hmac-sha256:...)), never a plain digest.
      C(service), the unit's facts (exists, active_state, sub_state, result, invocation_id, since, started_at).
      C(mtimes), the modification times of the instance's C(mtimes) paths and matches (null when absent).
    - C(last_good), the last-known-good copy. C(exists), whether a unit is saved; C(same), name to whether the live
      file equals the saved copy (both absent counts as equal); C(digests), name to the saved copy's SHA-1 (null
      when not saved; the secrets file's keyed as in C(files)); C(pins), the saved package versions (null when not
      saved).
    - C(model), with the instance's C(model_path), the checkpoint's completeness (exists, complete, problem, ...; as
      M(llmops.sglang.sglang_info) returns C(model)), and C(marker), whether the directory holds the marker of a
      version M(llmops.sglang.sglang_model_sync) verified (C(.llmops-model.json)); empty without it.
    - C(port_in_use), with the instance's C(port), whether something listens on it; null without it.
  returned: always
  type: dict
  sample:
    sglang-k26.service:
      files: {unit: 3f786850e387550fdab836ed7e6dc881de23001b, env: 89e6c98d92887913cadf06b2adb97f26cde4849b, secrets.env: null}
      service: {exists: true, active_state: active, sub_state: running, result: success, invocation_id: 9f1c0d5e...,
                since: "Mon 2026-11-30 09:01:02 UTC", started_at: 1764493262.31}
      mtimes: [1764493200.5, 1764493201.0]
      last_good: {exists: true, same: {unit: true, env: true, secrets.env: true},
                  digests: {unit: 3f786850e387550fdab836ed7e6dc881de23001b, env: 89e6c98d92887913cadf06b2adb97f26cde4849b,
                            secrets.env: null},
                  pins: {sglang: 0.5.23}}
      model: {path: /models/Kimi-K2.6, exists: true, marker: false, complete: true, config: true, index: true,
              shards_expected: 64, shards_missing: [], problem: ""}
      port_in_use: true
"""

import glob
import grp
import os
import pwd

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.host.host_adapters import (
    SERVICE_PROPERTIES, digest, last_good_facts, model_facts, port_facts, unit_facts, venv_facts,
)
from ansible_collections.llmops.sglang.plugins.module_utils.model.model_sync_access import MARKER_NAME
from ansible_collections.llmops.sglang.plugins.module_utils.secret_flags import SECRETS_FILE
from ansible_collections.llmops.sglang.plugins.module_utils.host.systemd_props import parse_show


def services(module, units):
    """All units in one `systemctl show` (blocks in the order asked, separated by a blank line)."""
    if not units:
        return {}
    systemctl = module.get_bin_path('systemctl', required=True)
    _rc, out, _err = module.run_command([systemctl, 'show', '-p', ','.join(SERVICE_PROPERTIES)] + list(units))
    blocks = out.strip().split('\n\n') if out.strip() else []
    return dict((unit, unit_facts(parse_show(blocks[index]) if index < len(blocks) else {}))
                for index, unit in enumerate(units))


def last_good(directory, files, secrets_key):
    """Whether each live file equals its last-known-good copy (both absent counts as equal), the saved copies'
    digests, and the saved pins."""
    # The shim is not part of a saved configuration (vars/main.yml __sglang_config_files).
    return last_good_facts(directory, dict((name, path) for name, path in files.items() if name != 'shim'), secrets_key)


def mtimes(patterns):
    found = []
    for pattern in patterns:
        for path in (sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]):
            try:
                found.append(os.stat(path).st_mtime)
            except OSError:
                found.append(None)
    return found


def apt_missing(module, names):
    if not names:
        return []
    dpkg = module.get_bin_path('dpkg-query')
    if not dpkg:
        return list(names)
    _rc, out, _err = module.run_command([dpkg, '--show', '--showformat=${Package} ${db:Status-Status}\\n'] + list(names))
    installed = set(line.split()[0] for line in out.splitlines() if line.endswith(' installed'))
    return [name for name in names if name not in installed]


def missing(directories, users, groups):
    result = [path for path in directories if not os.path.isdir(path)]
    for kind, names, lookup in (('user', users, pwd.getpwnam), ('group', groups, grp.getgrnam)):
        for name in names:
            try:
                lookup(name)
            except KeyError:
                result.append('%s %s' % (kind, name))
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            instances=dict(type='list', elements='dict', default=[]),
            venvs=dict(type='list', elements='path', default=[]),
            packages=dict(type='list', elements='str', default=['sglang', 'compressed-tensors', 'torch']),
            apt_packages=dict(type='list', elements='str', default=[]),
            directories=dict(type='list', elements='path', default=[]),
            users=dict(type='list', elements='str', default=[]),
            groups=dict(type='list', elements='str', default=[]),
            secrets_key=dict(type='str', no_log=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for index, spec in enumerate(params['instances']):
        if not spec.get('unit') or not isinstance(spec.get('files') or {}, dict) or not str(spec.get('port') or 0).isdigit():
            module.fail_json(msg='instances[%d]: expected a dict with unit (a string) and files (name -> path), '
                                 'optionally port (an int), got %r' % (index, spec))
        if SECRETS_FILE in (spec.get('files') or {}) and not params['secrets_key']:
            module.fail_json(msg='instances[%d] (%s) lists a %s file: secrets_key is required to digest it'
                                 % (index, spec['unit'], SECRETS_FILE))
    venvs = dict((path, venv_facts(module.run_command, path, params['packages'])) for path in params['venvs'])
    first = venvs.get(params['venvs'][0], {}) if params['venvs'] else {}
    names = [name.replace('{python_major_minor}', first.get('python_major_minor') or '3')
             for name in params['apt_packages']]
    units = [spec['unit'] for spec in params['instances']]
    seen_services = services(module, units)
    # One read of the kernel's TCP tables for every instance's port.
    listening = port_facts(sorted(set(int(spec['port']) for spec in params['instances'] if spec.get('port'))))
    instances = {}
    for spec in params['instances']:
        files = spec.get('files') or {}
        instances[spec['unit']] = {
            'files': dict((name, digest(path, name == SECRETS_FILE and params['secrets_key'])) for name, path in files.items()),
            'service': seen_services.get(spec['unit']) or {},
            'mtimes': mtimes(spec.get('mtimes') or []),
            'last_good': last_good(spec.get('last_good_dir') or '/nonexistent', files, params['secrets_key']),
            'model': model_facts(spec['model_path'], MARKER_NAME) if spec.get('model_path') else {},
            'port_in_use': listening[str(int(spec['port']))] if spec.get('port') else None,
        }
    module.exit_json(changed=False, instances=instances, venvs=venvs, apt_missing=apt_missing(module, sorted(set(names))),
                     missing=missing(params['directories'], params['users'], params['groups']))


if __name__ == '__main__':
    main()
