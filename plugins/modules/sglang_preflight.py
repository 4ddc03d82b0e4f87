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

import glob
import json
import os
import stat
import time
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmops.sglang.plugins.module_utils import checkpoint, gpu_health, nvidia_smi
from ansible_collections.llmops.sglang.plugins.module_utils.checkpoint_adapters import sha256_file, shard_problem, write_cache
from ansible_collections.llmops.sglang.plugins.module_utils.fleet_report import health_summary
from ansible_collections.llmops.sglang.plugins.module_utils.systemd_props import parse_show

INDEX_FILE = 'model.safetensors.index.json'


def _read(path, limit=None):
    with open(path, 'rb') as handle:
        return handle.read() if limit is None else handle.read(limit)


def _text(path):
    try:
        return _read(path).decode('utf-8', 'replace')
    except (IOError, OSError):
        return None


# ---- GPU gate -------------------------------------------------------------------------------------------------

def unit_pids(module, unit):
    """PIDs in the unit's cgroup and its children: cgroup v2 (/sys/fs/cgroup) or a hybrid host's unified or
    name=systemd hierarchy; the main PID at least."""
    systemctl = module.get_bin_path('systemctl')
    if not systemctl:
        return set()
    rc, out, _err = module.run_command([systemctl, 'show', '-p', 'ControlGroup,MainPID', unit])
    if rc != 0:
        return set()
    props = parse_show(out)
    pids = set()
    if props.get('MainPID', '0') not in ('', '0'):
        pids.add(int(props['MainPID']))
    group = props.get('ControlGroup') or ''
    if not group:
        return pids
    for mount in ('/sys/fs/cgroup', '/sys/fs/cgroup/unified', '/sys/fs/cgroup/systemd'):
        top = mount + group
        if not os.path.isfile(os.path.join(top, 'cgroup.procs')):
            continue
        for root, _dirs, files in os.walk(top):
            if 'cgroup.procs' in files:
                text = _text(os.path.join(root, 'cgroup.procs')) or ''
                pids.update(int(p) for p in text.split() if p.isdigit())
        break
    return pids


def peers(module, config_dir, unit_dir, own_name):
    """The host's other instances of the role that run or will run (active, or enabled to start at boot)."""
    systemctl = module.get_bin_path('systemctl')
    out = []
    for env_path in sorted(glob.glob(os.path.join(config_dir, '*.env'))):
        name = os.path.basename(env_path)[:-len('.env')]
        if name == own_name or name.endswith('.secrets'):
            continue
        unit_text = _text(os.path.join(unit_dir, name + '.service'))
        if unit_text is None:
            continue
        claim = gpu_health.peer_claim(name + '.service', _text(env_path) or '', unit_text)
        if not claim:
            continue
        if systemctl:
            rc, show, _err = module.run_command([systemctl, 'show', '-p', 'ActiveState,UnitFileState', name + '.service'])
            props = parse_show(show) if rc == 0 else {}
            if props.get('ActiveState') in ('inactive', 'failed') and \
                    props.get('UnitFileState') not in ('enabled', 'enabled-runtime', 'linked', 'linked-runtime'):
                continue  # stopped and not started at boot: it claims nothing now
        out.append(claim)
    return out


def torch_cuda(venv):
    for path in sorted(glob.glob(os.path.join(venv, 'lib', 'python3*', 'site-packages', 'torch', 'version.py'))):
        return gpu_health.torch_cuda_version(_text(path)), path
    return None, None


def gpu_gate(module, params):
    result = {'status': 'not_judged', 'reason': '', 'gpus': [], 'claimed': [], 'driver_cuda': None,
              'torch_cuda': None, 'findings': []}
    smi = module.get_bin_path('nvidia-smi')
    if not smi:
        result['reason'] = 'nvidia-smi is not installed: a host without NVIDIA GPUs (or drivers); GPUs not judged'
        return result
    timeout = params['nvidia_smi_timeout']

    def call(argv):
        # `timeout` ends an nvidia-smi hung on a GPU in a bad state (coreutils, present on every systemd host)
        wrapper = module.get_bin_path('timeout')
        return module.run_command(([wrapper, str(timeout)] if wrapper else []) + argv)

    rc, out, err = call(nvidia_smi.health_cmd(smi))
    gpus = nvidia_smi.parse_health(out) if rc == 0 else []
    if not gpus:
        finding = {'check': 'nvidia_smi', 'gpu': None, 'waived': 'nvidia_smi' in params['waive'],
                   'message': 'nvidia-smi --query-gpu failed (rc=%d%s): %s. Check the driver (nvidia-smi by hand, '
                              'dmesg for NVRM/Xid lines) before starting a server.'
                              % (rc, ', timed out after %ds' % timeout if rc == 124 else '',
                                 (err or out).strip()[:300] or 'no GPU rows')}
        result.update(status='failed' if not finding['waived'] else 'waived', findings=[finding],
                      reason='nvidia-smi did not answer')
        return result
    rc, apps_out, _err = call(nvidia_smi.apps_cmd(smi))
    apps = nvidia_smi.parse_compute_apps(apps_out) if rc == 0 else []
    rc, version_out, _err = call(nvidia_smi.version_cmd(smi))
    driver_cuda = nvidia_smi.parse_version(version_out)['cuda_version'] if rc == 0 else None
    built_for, _path = torch_cuda(params['venv']) if params['venv'] else (None, None)
    own = params['unit'][:-len('.service')] if params['unit'].endswith('.service') else params['unit']
    place = params['_placement']
    findings = gpu_health.judge(
        gpus, apps, params['unit'], unit_pids(module, params['unit']), place['tp_per_node'],
        visible_devices=place['cuda_visible_devices'], base_gpu_id=place['base_gpu_id'],
        gpu_id_step=place['gpu_id_step'], peers=peers(module, params['config_dir'], params['unit_dir'], own),
        driver_cuda=driver_cuda, torch_cuda=built_for, expected_name=params['gpu_name'], waive=params['waive'])
    try:
        visible = gpu_health.parse_visible_devices(place['cuda_visible_devices'], gpus)
        claimed = gpu_health.claimed_gpus(place['tp_per_node'], visible, place['base_gpu_id'], place['gpu_id_step'])[0]
    except ValueError:
        claimed = []
    result.update(status=gpu_health.outcome(findings), gpus=gpus, claimed=claimed, driver_cuda=driver_cuda,
                  torch_cuda=built_for, findings=findings,
                  reason='' if built_for else 'no CUDA build of torch found in the venv: the driver\'s CUDA version was not compared')
    return result


# ---- checkpoint gate ------------------------------------------------------------------------------------------

def snapshot(path):
    """{relative path: (size, mtime_ns)} of every regular file under path (hidden directories included)."""
    files = {}
    for root, _dirs, names in os.walk(path):
        for name in names:
            full = os.path.join(root, name)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                try:
                    st = os.stat(full)
                except OSError:
                    continue
                files[os.path.relpath(full, path)] = (st.st_size, st.st_mtime_ns)
    return files


def shard_names(path, files):
    index = os.path.join(path, INDEX_FILE)
    if os.path.exists(index):
        try:
            weight_map = json.loads(_read(index).decode('utf-8')).get('weight_map', {})
            return sorted(set(weight_map.values()) & set(files))
        except (ValueError, AttributeError, IOError, OSError):
            pass
    return sorted(name for name in files if name.endswith('.safetensors'))


def cache_trusted(path):
    """The cache (and its directory) must be root's and private, or it is not believed."""
    for candidate, is_dir in ((os.path.dirname(path), True), (path, False)):
        try:
            st = os.lstat(candidate)
        except OSError:
            return False
        if st.st_uid != 0 or st.st_mode & 0o077 or (stat.S_ISDIR(st.st_mode) != is_dir) or stat.S_ISLNK(st.st_mode):
            return False
    return True


def checkpoint_gate(module, params):
    started = time.time()
    path = params['model_path']
    result = {'status': 'ok', 'shards': 0, 'hashed': 0, 'cached': 0, 'hashed_bytes': 0, 'cache': 'unchanged',
              'findings': [], 'seconds': 0.0}
    if not os.path.isdir(path):
        result.update(status='skipped', cache='unchanged')
        return result  # the completeness check (sglang_info) names a missing directory
    before = snapshot(path)
    markers = checkpoint.download_markers(before)
    shards = shard_names(path, before)
    invalid = []
    for name in shards:
        try:
            problem = shard_problem(os.path.join(path, name))
        except (IOError, OSError) as exc:
            problem = ('I/O error', 'it cannot be read: %s' % exc)
        if problem:
            invalid.append((name, problem))
    result['shards'] = len(shards)
    wait = params['growth_interval'] - (time.time() - started)
    if wait > 0:
        time.sleep(wait)
    after = snapshot(path)
    growing = checkpoint.growth(before, after)
    manifest = params['_manifest']
    stats = dict((name, after[name][0]) for name in manifest if name in after)
    digests = {}
    cache_path = params['cache_path']
    cache = {}
    if cache_path and os.path.exists(cache_path) and cache_trusted(cache_path):
        cache = checkpoint.parse_cache(_text(cache_path) or '')
    # No hashing while a download runs or a file grows: the answer would be stale at once.
    if manifest and not markers and not growing:
        todo = []
        for name in checkpoint.to_hash(manifest, stats):
            full = os.path.realpath(os.path.join(path, name))
            size, mtime_ns = after[name]
            known = checkpoint.cached_digest(cache, full, size, mtime_ns)
            if known:
                digests[name] = known
                result['cached'] += 1
            else:
                todo.append((name, full, size, mtime_ns))
        if todo:
            workers = max(1, min(params['hash_workers'], len(todo)))
            with ThreadPoolExecutor(max_workers=workers) as pool:
                for (name, full, size, mtime_ns), digest in zip(todo, pool.map(lambda t: sha256_file(t[1]), todo)):
                    digests[name] = digest
                    cache[full] = {'size': size, 'mtime_ns': mtime_ns, 'sha256': digest}
                    result['hashed'] += 1
                    result['hashed_bytes'] += size
            if cache_path:
                if module.check_mode:
                    result['cache'] = 'not written (check mode)'
                else:
                    try:
                        result['cache'] = write_cache(cache_path, cache)
                    except (IOError, OSError) as exc:
                        result['cache'] = 'not written: %s' % exc
    findings = checkpoint.judge(markers=markers, growing=growing, invalid=invalid, manifest=manifest, stats=stats,
                                digests=digests, waive=params['waive'])
    result.update(findings=findings, status=gpu_health.outcome(findings), seconds=round(time.time() - started, 3))
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type='str', required=True),
            checks=dict(type='list', elements='str', choices=['gpu', 'checkpoint'], default=['gpu', 'checkpoint']),
            server_argv=dict(type='list', elements='str', default=[]),
            environment=dict(type='list', elements='str', default=[]),
            gpu_name=dict(type='str', default=''),
            config_dir=dict(type='path', default='/etc/sglang'),
            unit_dir=dict(type='path', default='/etc/systemd/system'),
            venv=dict(type='path'),
            model_path=dict(type='path'),
            manifest=dict(type='dict', default={}),
            cache_path=dict(type='path'),
            hash_workers=dict(type='int', default=4),
            growth_interval=dict(type='float', default=1.0),
            waive=dict(type='list', elements='str', default=[]),
            nvidia_smi_timeout=dict(type='int', default=30),
        ),
        supports_check_mode=True,
    )
    params = module.params
    known = gpu_health.GPU_CHECKS + checkpoint.CHECKPOINT_CHECKS
    unknown = [name for name in params['waive'] if name not in known]
    if unknown:
        module.fail_json(msg='waive: unknown check(s) %s; the checks are %s' % (', '.join(unknown), ', '.join(known)))
    try:
        params['_placement'] = place = gpu_health.placement(params['server_argv'], '\n'.join(params['environment']))
    except ValueError as exc:
        module.fail_json(msg='server_argv: --tp-size, --nnodes, --base-gpu-id and --gpu-id-step must be integers (%s)' % exc)
    if place['tp_per_node'] < 1 or place['base_gpu_id'] < 0 or place['gpu_id_step'] < 1:
        module.fail_json(msg='server_argv: SGLang needs --tp-size >= 1, --base-gpu-id >= 0 and --gpu-id-step >= 1 '
                             '(arg_groups/validation_hook.py:204-205)')
    if params['hash_workers'] < 1 or params['growth_interval'] < 0:
        module.fail_json(msg='hash_workers must be >= 1 and growth_interval >= 0')
    try:
        params['_manifest'] = checkpoint.parse_manifest(params['manifest'])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    skipped = {'status': 'skipped', 'findings': []}
    gpu = gpu_gate(module, params) if 'gpu' in params['checks'] else dict(skipped)
    ckpt = checkpoint_gate(module, params) if 'checkpoint' in params['checks'] and params['model_path'] else dict(skipped)
    findings = gpu['findings'] + ckpt['findings']
    failures = [f['message'] for f in findings if not f['waived']]
    waived = sorted(set(f['check'] for f in findings if f['waived']))
    module.exit_json(changed=False, ok=not failures, failures=failures, waived=waived, gpu=gpu, checkpoint=ckpt,
                     summary=health_summary(gpu, ckpt))


if __name__ == '__main__':
    main()
