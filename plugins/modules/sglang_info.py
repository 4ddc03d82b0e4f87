#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: sglang_info
short_description: Read-only facts about a host's SGLang services, venv, model directory, ports and GPUs
version_added: 0.1.0
description:
  - Reports what an operator checks by hand before and after a launch, in one call and without changing anything.
  - For each unit, its state and since when, InvocationID, restart count and the running command line (secret flag
    values redacted).
  - For the venv, its Python version, whether C(Python.h) exists at that Python's include path (Triton needs it),
    whether pip is present, and the versions of the packages that decide whether a launch works. Versions come from
    package metadata; nothing is imported.
  - For a model directory, whether it is complete (C(config.json) and every shard the safetensors index names).
  - GPUs from C(nvidia-smi) when it exists (bounded by C(timeout) like the waiter's, so a wedged driver does not hang
    the task), and the TCP ports in LISTEN state.
  - With O(last_good), whether the configuration files on the host are the ones saved as last known good, the saved
    copies' SHA-1 digests (no content is returned; none of the secrets file, whose plain digest could be tested
    offline against guessed keys, which is why M(llmops.sglang.sglang_observe) keys it), and the saved package pins; with
    O(mtimes), files' modification times.
author:
  - llmops.sglang maintainers (@llmops)
requirements:
  - systemd (C(systemctl)) for O(services)
options:
  venv:
    description: Path of the server's virtual environment.
    type: path
  packages:
    description: Distribution names whose versions to report from the venv.
    type: list
    elements: str
    default: [sglang, compressed-tensors, torch, transformers, sgl-kernel, flashinfer-python, pip]
  services:
    description: Units to describe, for example C(sglang-k26.service).
    type: list
    elements: str
    default: []
  model_path:
    description: A model directory to check for completeness.
    type: path
  ports:
    description: TCP ports to report as listening or not.
    type: list
    elements: int
    default: []
  gpus:
    description: Query C(nvidia-smi) for GPU memory when it is installed.
    type: bool
    default: true
  last_good:
    description:
      - The last-known-good directory (V(dir)) and the files to compare with it (V(files), saved name to the live
        file's path, for example C(unit) to C(/etc/systemd/system/sglang-k26.service)). C(pins.json) in the
        directory holds the saved package versions.
    type: dict
  mtimes:
    description: Paths (or glob patterns, each match reported) whose modification times (epoch seconds; null when absent) to report.
    type: list
    elements: path
    default: []
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
    description: Linux hosts with systemd; C(/proc) for ports and command lines.
"""

EXAMPLES = r"""
- name: What is running, and with which compressed-tensors?
  llmops.sglang.sglang_info:
    venv: /opt/sglang/venv
    services: [sglang-k26.service, sglang-k26-ddtree.service]
    model_path: /models/Kimi-K2.6
    ports: [30001]
  register: info

- name: Fail early when Triton will not find Python.h
  ansible.builtin.assert:
    that: info.venv.python_h
    fail_msg: "Install python3-dev and python{{ info.venv.python_major_minor }}-dev"
"""

RETURN = r"""
venv:
  description: The venv, or empty when O(venv) was not given.
  returned: always
  type: dict
  contains:
    path: {description: The venv path., type: str}
    exists: {description: Whether C(bin/python) exists there., type: bool}
    python_version: {description: "The venv Python's version (C(3.11.2)); absent when it does not run.", type: str}
    python_major_minor: {description: "For example C(3.11): the X of the C(python3.X-dev) package.", type: str}
    include_dir: {description: "That Python's sysconfig include path.", type: str}
    python_h: {description: "Whether C(Python.h) exists in RV(venv.include_dir).", type: bool}
    pip: {description: Whether pip is importable in the venv (a venv made by uv has none)., type: bool}
    packages: {description: "Distribution name to installed version; null when not installed.", type: dict}
    error: {description: "Why the venv Python could not be asked, when it could not.", type: str}
  sample: {path: /opt/sglang/venv, exists: true, python_version: 3.11.2, python_major_minor: "3.11", python_h: false, pip: true,
           include_dir: /usr/include/python3.11, packages: {sglang: 0.5.23, compressed-tensors: 0.8.1}}
services:
  description: Unit name to its facts.
  returned: always
  type: dict
  sample:
    sglang-k26.service: {exists: true, active_state: active, sub_state: running, result: success, restarts: 0,
                         invocation_id: 9f1c..., since: "Mon 2026-11-30 09:01:02 UTC", main_pid: 4242,
                         started_at: 1764493262.31,
                         argv: [/opt/sglang/venv/bin/python, -m, sglang.launch_server, --api-key, "********"]}
model:
  description: Completeness of O(model_path), empty when it was not given.
  returned: always
  type: dict
  sample: {path: /models/Kimi-K2.6, exists: true, complete: false, config: true, index: true, shards_expected: 64,
           shards_missing: [model-00063-of-00064.safetensors], problem: 1 of 64 shards named in ... are missing}
ports:
  description: Requested port to whether something listens on it.
  returned: always
  type: dict
  sample: {"30001": true}
last_good:
  description: Comparison with O(last_good); empty when it was not given.
  returned: always
  type: dict
  contains:
    exists: {description: Whether a last-known-good unit is saved., type: bool}
    same: {description: "Saved name to whether the live file equals the saved one (both absent counts as equal).", type: dict}
    digests:
      description: >-
        Saved name to the SHA-1 of the saved copy (null when it is not saved, and always for C(secrets.env)), to compare
        a file not yet written with it.
      type: dict
    pins: {description: "The saved package versions (C(pins.json)); null when not saved or unreadable.", type: dict}
  sample: {exists: true, same: {unit: true, env: false, secrets.env: true},
           digests: {unit: 3f786850e387550fdab836ed7e6dc881de23001b, env: 89e6c98d92887913cadf06b2adb97f26cde4849b, secrets.env: null},
           pins: {sglang: 0.5.23, compressed-tensors: 0.18.0}}
mtimes:
  description: Path to its modification time (epoch seconds), null when it does not exist.
  returned: always
  type: dict
  sample: {/etc/sglang/sglang-k26.env: 1764601200.5}
gpus:
  description: Per-GPU memory from nvidia-smi; empty without nvidia-smi.
  returned: always
  type: list
  elements: dict
  sample: [{index: 0, name: NVIDIA H200, memory_used_mib: 19601, memory_total_mib: 143771}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.host.host_adapters import (
    gpu_facts, last_good_facts, model_facts, mtime_facts, port_facts, service_info, venv_facts,
)
from ansible_collections.llmops.sglang.plugins.module_utils.host.host_facts import DEFAULT_PACKAGES


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type='path'),
            packages=dict(type='list', elements='str', default=list(DEFAULT_PACKAGES)),
            services=dict(type='list', elements='str', default=[]),
            model_path=dict(type='path'),
            ports=dict(type='list', elements='int', default=[]),
            gpus=dict(type='bool', default=True),
            last_good=dict(type='dict'),
            mtimes=dict(type='list', elements='path', default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    result = dict(changed=False, venv={}, services={}, model={}, ports={}, gpus=[], last_good={}, mtimes={})
    if params['venv']:
        result['venv'] = venv_facts(module.run_command, params['venv'], params['packages'])
    if params['services']:
        systemctl = module.get_bin_path('systemctl', required=True)
        result['services'] = dict((unit, service_info(module.run_command, systemctl, unit)) for unit in params['services'])
    if params['model_path']:
        result['model'] = model_facts(params['model_path'])
    result['ports'] = port_facts(params['ports'])
    if params['gpus']:
        result['gpus'] = gpu_facts(module.run_command, module.get_bin_path('nvidia-smi'), module.get_bin_path('timeout'))
    if params['last_good']:
        result['last_good'] = last_good_facts(params['last_good'].get('dir') or '', params['last_good'].get('files') or {})
    result['mtimes'] = mtime_facts(params['mtimes'])
    module.exit_json(**result)


if __name__ == '__main__':
    main()
