#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: sglang_preflight
short_description: Judge a host's GPUs and a checkpoint before an SGLang server is (re)started
version_added: 0.1.0
description:
  - Read-only gates that the M(llmops.sglang.server) role runs before it changes anything, so that a restart that
    would cost 15-40 minutes of a box's GPUs and then fail is refused while the old server still serves.
  - B(GPU health), from C(nvidia-smi) queries. The GPUs this instance's ranks use (C(CUDA_VISIBLE_DEVICES),
    C(--base-gpu-id) + rank * C(--gpu-id-step), as SGLang places ranks) must exist and must not be claimed by another
    instance of the role on this host that is active or enabled (read from C(/etc/sglang/*.env) and their unit
    files); on those GPUs no
    uncorrectable volatile ECC error, no pending or failed row remapping, no page pending retirement, persistence
    mode on, no compute process that is not in this unit's cgroup; the driver's CUDA version at least the one the
    venv's torch was built for (read from the installed C(torch/version.py), torch is not imported).
  - A host without C(nvidia-smi) (a CPU host) is not judged, and the result says so.
  - B(Checkpoint integrity). Refuses a download in progress (C(*.aria2) control files, Hugging Face C(.incomplete)
    and C(.lock) files, a file whose size or mtime changes between two looks O(growth_interval) apart), a shard
    whose safetensors framing is not whole (8-byte header length, JSON header, the largest declared data offset
    against the file size, as safetensors checks it; no tensor data is read), and, with O(manifest), a missing
    file, a size or a sha256 that differs. Hashes run in O(hash_workers) threads, once per file content; the
    digests are kept by path, size and mtime in O(cache_path) (root-only), so a re-run costs seconds.
  - Every finding names the check, the GPU or file, and what to do. A check named in O(waive) is still run and
    reported (RV(gpu.findings), RV(waived)) but does not fail the gate.
  - The gates never fail the task themselves; the caller asserts RV(ok) (the role does, after recording the result
    for the fleet report). Bad input fails the task before anything is read.
author:
  - llmops.sglang maintainers (@llmops)
requirements:
  - systemd (C(systemctl)) to find the unit's processes; C(nvidia-smi) on GPU hosts
options:
  unit:
    description: The instance's unit, for example C(sglang-k26.service); its cgroup's processes are its own.
    type: str
    required: true
  checks:
    description: Which gates to run.
    type: list
    elements: str
    choices: [gpu, checkpoint]
    default: [gpu, checkpoint]
  server_argv:
    description:
      - The server's arguments as the unit will run them (C(--tp-size), C(--nnodes), C(--base-gpu-id), C(--gpu-id-step)
        decide which GPUs its ranks use on this node).
    type: list
    elements: str
    default: []
  environment:
    description: The unit's EnvironmentFile lines (C(KEY="value")); C(CUDA_VISIBLE_DEVICES) there selects the GPUs.
    type: list
    elements: str
    default: []
  gpu_name:
    description: A text every GPU this instance uses must have in its name (for example C(H200)); empty skips.
    type: str
    default: ""
  config_dir:
    description: Where the role keeps each instance's EnvironmentFile (C(NAME.env)); other instances' placements come from there.
    type: path
    default: /etc/sglang
  unit_dir:
    description: Where the role writes unit files.
    type: path
    default: /etc/systemd/system
  venv:
    description: The server's venv, to read the CUDA version its torch was built for.
    type: path
  model_path:
    description: The checkpoint directory to judge.
    type: path
  manifest:
    description:
      - Relative file name to C({size, sha256}) (either may be left out). Sizes are compared first (cheap),
        then the files with the right size are hashed.
    type: dict
    default: {}
  cache_path:
    description:
      - File that remembers verified digests by path, size and mtime. Created root-only (directory C(0700), file
        C(0600)) when the directory above its own exists; ignored when it is not root's and private. Not written in
        check mode.
    type: path
  hash_workers:
    description: Files hashed at once.
    type: int
    default: 4
  growth_interval:
    description: Seconds between the two looks at the directory that find a file still growing.
    type: float
    default: 1.0
  waive:
    description: Checks that are reported but do not fail the gate, by name (see RV(gpu.findings)).
    type: list
    elements: str
    default: []
  nvidia_smi_timeout:
    description: Seconds each C(nvidia-smi) call may take (a GPU in a bad state can hang it).
    type: int
    default: 30
attributes:
  check_mode:
    support: full
    description: Read-only; in check mode the digest cache is not written.
  diff_mode:
    support: none
    description: Changes nothing on the host, so there is nothing to diff.
  platform:
    support: full
    platforms: posix
    description: Linux hosts with systemd.
notes:
  - Check names - GPU gate C(nvidia_smi), C(gpu_count), C(gpu_model), C(gpu_claim), C(ecc_uncorrected),
    C(row_remap_pending), C(row_remap_failure), C(retired_pages_pending), C(persistence_mode), C(foreign_process),
    C(cuda_driver); checkpoint gate C(download_in_progress), C(shard_growing), C(shard_invalid),
    C(manifest_missing), C(manifest_size), C(manifest_hash).
"""

EXAMPLES = r"""
- name: Judge the GPUs and the checkpoint of sglang-k26 before changing it
  llmops.sglang.sglang_preflight:
    unit: sglang-k26.service
    server_argv: [--model-path, /models/Kimi-K2.6, --tp-size, "8"]
    environment: ['CUDA_VISIBLE_DEVICES="0,1,2,3,4,5,6,7"']
    venv: /opt/sglang/venv
    model_path: /models/Kimi-K2.6
    cache_path: /var/lib/llmops-sglang/server/sglang-k26/checkpoint-verified.json
    waive: [persistence_mode]
  register: preflight

- name: Refuse what the gates found
  ansible.builtin.assert:
    that: preflight.ok
    fail_msg: "{{ preflight.failures | join(' ') }}"
"""

RETURN = r"""
ok:
  description: Whether both gates passed (waived findings do not count).
  returned: always
  type: bool
failures:
  description: The messages of findings that were not waived.
  returned: always
  type: list
  elements: str
waived:
  description: Checks that found something and were waived.
  returned: always
  type: list
  elements: str
summary:
  description: What the fleet report shows per gate (status, GPUs or shards, failed and waived checks).
  returned: always
  type: dict
  sample: {gpu: {status: ok, count: 8, verified: 0, reason: "", failed: [], waived: []},
           checkpoint: {status: failed, count: 64, verified: 0, reason: "", failed: ["shard_invalid (model-00002-of-00064.safetensors)"], waived: []}}
gpu:
  description: The GPU gate.
  returned: always
  type: dict
  contains:
    status: {description: "C(ok), C(failed), C(waived) (only waived findings), C(not_judged) or C(skipped).", type: str}
    reason: {description: Why the GPUs were not judged., type: str}
    gpus: {description: "nvidia-smi's rows: index, name, uuid, ECC, row remapping, persistence mode and so on.", type: list, elements: dict}
    claimed: {description: Physical indices of the GPUs this instance uses., type: list, elements: int}
    driver_cuda: {description: The newest CUDA the driver supports., type: str}
    torch_cuda: {description: The CUDA the venv's torch was built for; null when not found., type: str}
    findings: {description: "[{check, gpu, message, waived}].", type: list, elements: dict}
  sample: {status: failed, claimed: [0, 1, 2, 3, 4, 5, 6, 7], driver_cuda: "13.0", torch_cuda: "12.9",
           findings: [{check: ecc_uncorrected, gpu: 3, waived: false,
                       message: "GPU 3 (GPU-..., 00000000:00:09.0) has 2 uncorrectable volatile ECC error(s) ..."}]}
checkpoint:
  description: The checkpoint gate.
  returned: always
  type: dict
  contains:
    status: {description: "C(ok), C(failed), C(waived) or C(skipped).", type: str}
    shards: {description: Shards whose framing was checked., type: int}
    hashed: {description: Files hashed in this run., type: int}
    cached: {description: Files whose digest came from the cache., type: int}
    hashed_bytes: {description: Bytes hashed in this run., type: int}
    seconds: {description: Time the gate took., type: float}
    cache: {description: "What happened to the cache: C(written), C(unchanged), or C(not written) and why.", type: str}
    findings: {description: "[{check, file, message, waived}].", type: list, elements: dict}
  sample: {status: ok, shards: 64, hashed: 0, cached: 64, hashed_bytes: 0, seconds: 1.2, cache: unchanged, findings: []}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils.model import preflight, preflight_driver
from ansible_collections.llmops.sglang.plugins.module_utils.host.host_adapters import SystemClock
from ansible_collections.llmops.sglang.plugins.module_utils.model.checkpoint_adapters import CheckpointFiles
from ansible_collections.llmops.sglang.plugins.module_utils.model.preflight_adapters import GpuHost


def main():
    module = AnsibleModule(argument_spec=preflight.ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    try:
        place, manifest = preflight.inputs(params)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    result = preflight_driver.run(params, place, manifest, GpuHost(module, params['nvidia_smi_timeout']), CheckpointFiles(),
                                  SystemClock(), module.check_mode)
    module.exit_json(changed=False, **result)


if __name__ == '__main__':
    main()
