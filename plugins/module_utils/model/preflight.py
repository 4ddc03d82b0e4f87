# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_preflight's decisions around the two gates' verdicts (gpu_health and checkpoint judge): its options, which
processes are the unit's (the cgroup walk), which other instances of the role count, which shards there are, whether
to hash and whether to believe the digest cache, and the module's result. Pure, no I/O: the adapters
(preflight_adapters, checkpoint_adapters) pass what they read in, preflight_driver runs the gates in order."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import stat

from ansible_collections.llmops.sglang.plugins.module_utils.host import gpu_health

from ansible_collections.llmops.sglang.plugins.module_utils.model import checkpoint

ARGUMENT_SPEC = dict(
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
)

INDEX_FILE = 'model.safetensors.index.json'
# Where a unit's cgroup may be: cgroup v2, then a hybrid host's unified or name=systemd hierarchy (the first that has
# the unit's cgroup.procs is walked).
CGROUP_MOUNTS = ('/sys/fs/cgroup', '/sys/fs/cgroup/unified', '/sys/fs/cgroup/systemd')
# UnitFileStates that start a unit at boot: a stopped instance in one of them still claims its GPUs.
STARTS_AT_BOOT = ('enabled', 'enabled-runtime', 'linked', 'linked-runtime')
NO_SMI = 'nvidia-smi is not installed: a host without NVIDIA GPUs (or drivers); GPUs not judged'
NO_TORCH_CUDA = 'no CUDA build of torch found in the venv: the driver\'s CUDA version was not compared'


def inputs(params):
    """The checked options: (placement, manifest); ValueError with the module's message for the first bad one."""
    known = gpu_health.GPU_CHECKS + checkpoint.CHECKPOINT_CHECKS
    unknown = [name for name in params['waive'] if name not in known]
    if unknown:
        raise ValueError('waive: unknown check(s) %s; the checks are %s' % (', '.join(unknown), ', '.join(known)))
    try:
        place = gpu_health.placement(params['server_argv'], '\n'.join(params['environment']))
    except ValueError as exc:
        raise ValueError('server_argv: --tp-size, --nnodes, --base-gpu-id and --gpu-id-step must be integers (%s)' % exc)
    if place['tp_per_node'] < 1 or place['base_gpu_id'] < 0 or place['gpu_id_step'] < 1:
        raise ValueError('server_argv: SGLang needs --tp-size >= 1, --base-gpu-id >= 0 and --gpu-id-step >= 1 '
                         '(arg_groups/validation_hook.py:204-205)')
    if params['hash_workers'] < 1 or params['growth_interval'] < 0:
        raise ValueError('hash_workers must be >= 1 and growth_interval >= 0')
    return place, checkpoint.parse_manifest(params['manifest'])


# ---- GPU gate -------------------------------------------------------------------------------------------------

def own_name(unit):
    return unit[:-len('.service')] if unit.endswith('.service') else unit


def cgroup_tops(props):
    """The directories to look for the unit's cgroup in, in order, from `systemctl show` (none without a group)."""
    group = (props or {}).get('ControlGroup') or ''
    return [mount + group for mount in CGROUP_MOUNTS] if group else []


def unit_pids(props, procs_texts):
    """The unit's PIDs: its MainPID and every PID of the cgroup.procs texts of its cgroup tree; props None (no
    systemctl, or it failed) is no PID at all."""
    if props is None:
        return set()
    pids = set()
    if props.get('MainPID', '0') not in ('', '0'):
        pids.add(int(props['MainPID']))
    for text in procs_texts or ():
        pids.update(int(p) for p in (text or '').split() if p.isdigit())
    return pids


def instance_names(env_names, own):
    """Of the EnvironmentFile names (NAME for NAME.env) in the config dir, the other instances of the role."""
    return [name for name in env_names if name != own and not name.endswith('.secrets')]


def peer_counts(props):
    """Whether another instance claims its GPUs: unless it is stopped (inactive, failed) and not started at boot.
    props None (no systemctl, or it failed) counts: it may run."""
    props = props or {}
    return not (props.get('ActiveState') in ('inactive', 'failed') and props.get('UnitFileState') not in STARTS_AT_BOOT)


def smi_failed(rc, out, err, timeout, waive):
    """The GPU gate when `nvidia-smi --query-gpu` gave no rows: one nvidia_smi finding."""
    finding = {'check': 'nvidia_smi', 'gpu': None, 'waived': 'nvidia_smi' in waive,
               'message': 'nvidia-smi --query-gpu failed (rc=%d%s): %s. Check the driver (nvidia-smi by hand, '
                          'dmesg for NVRM/Xid lines) before starting a server.'
                          % (rc, ', timed out after %ds' % timeout if rc == 124 else '',
                             (err or out).strip()[:300] or 'no GPU rows')}
    return {'status': 'failed' if not finding['waived'] else 'waived', 'findings': [finding],
            'reason': 'nvidia-smi did not answer'}


def claimed(place, gpus):
    """Physical indices of the GPUs this instance's ranks use ([] when CUDA_VISIBLE_DEVICES does not fit)."""
    try:
        visible = gpu_health.parse_visible_devices(place['cuda_visible_devices'], gpus)
        return gpu_health.claimed_gpus(place['tp_per_node'], visible, place['base_gpu_id'], place['gpu_id_step'])[0]
    except ValueError:
        return []


def empty_gpu_gate():
    return {'status': 'not_judged', 'reason': '', 'gpus': [], 'claimed': [], 'driver_cuda': None,
            'torch_cuda': None, 'findings': []}


# ---- checkpoint gate ------------------------------------------------------------------------------------------

def empty_checkpoint_gate():
    return {'status': 'ok', 'shards': 0, 'hashed': 0, 'cached': 0, 'hashed_bytes': 0, 'cache': 'unchanged',
            'findings': [], 'seconds': 0.0}


def shard_names(index_bytes, files):
    """The shards to check: those the index's weight_map names that exist, else every *.safetensors file.
    index_bytes: model.safetensors.index.json's content, None when absent or unreadable; files: the listing."""
    if index_bytes is not None:
        try:
            weight_map = json.loads(index_bytes.decode('utf-8')).get('weight_map', {})
            return sorted(set(weight_map.values()) & set(files))
        except (ValueError, AttributeError):
            pass
    return sorted(name for name in files if name.endswith('.safetensors'))


def growth_wait(interval, elapsed):
    """Seconds still to wait before the second look (0 when the first look took the interval already)."""
    return max(0.0, interval - elapsed)


def should_hash(manifest, markers, growing):
    """No hashing while a download runs or a file grows (the answer would be stale at once), nor without a manifest."""
    return bool(manifest) and not markers and not growing


def cache_trusted(dir_stat, file_stat):
    """Whether the digest cache may be believed: it and its directory root's, private, a directory and a regular
    file (no symlink). dir_stat, file_stat: (uid, mode) from lstat, None when absent."""
    for st, is_dir in ((dir_stat, True), (file_stat, False)):
        if st is None:
            return False
        uid, mode = st
        if uid != 0 or mode & 0o077 or (stat.S_ISDIR(mode) != is_dir) or stat.S_ISLNK(mode):
            return False
    return True


def split_cached(names, listing, realpaths, cache):
    """({name: digest} the cache still vouches for, [(name, real path, size, mtime_ns)] to hash), names in order."""
    known, todo = {}, []
    for name in names:
        size, mtime_ns = listing[name]
        digest = checkpoint.cached_digest(cache, realpaths[name], size, mtime_ns)
        if digest:
            known[name] = digest
        else:
            todo.append((name, realpaths[name], size, mtime_ns))
    return known, todo


def hash_workers(wanted, files):
    return max(1, min(wanted, files))


def result(gpu, ckpt):
    """The module's result from the two gates: ok, failures (not waived), waived checks, both gates, the summary."""
    findings = gpu['findings'] + ckpt['findings']
    failures = [f['message'] for f in findings if not f['waived']]
    waived = sorted(set(f['check'] for f in findings if f['waived']))
    return dict(ok=not failures, failures=failures, waived=waived, gpu=gpu, checkpoint=ckpt,
                summary=health_summary(gpu, ckpt))


def _finding_label(finding):
    where = finding.get('gpu') if finding.get('gpu') is not None else finding.get('file')
    return '%s (%s)' % (finding['check'], 'GPU %s' % where if finding.get('gpu') is not None else where) if where \
        else finding['check']


def health_summary(gpu, checkpoint):
    """The part of sglang_preflight's result the fleet report shows: per gate its status, size, failed and waived."""
    out = {}
    for name, gate in (('gpu', gpu or {}), ('checkpoint', checkpoint or {})):
        findings = gate.get('findings') or []
        out[name] = {
            'status': gate.get('status') or 'skipped',
            'count': len(gate.get('claimed') or []) if name == 'gpu' else gate.get('shards') or 0,
            'verified': (gate.get('hashed') or 0) + (gate.get('cached') or 0),
            'reason': gate.get('reason') or '',
            'failed': [_finding_label(f) for f in findings if not f.get('waived')],
            'waived': sorted(set(f['check'] for f in findings if f.get('waived'))),
        }
    return out
