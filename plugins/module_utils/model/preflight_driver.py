# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The order of sglang_preflight's two gates: what to read, through the adapters, and which pure unit judges it
(preflight, gpu_health, nvidia_smi, checkpoint). It decides nothing itself; the module runs it with the real
adapters, the unit tests with fakes and a fake clock.

Adapters: host (nvidia_smi() -> path | None, smi(argv) -> (rc, out, err), unit_props(unit, names) -> dict | None,
cgroup_procs(top) -> [text] | None, env_names(config_dir) -> [NAME], read(path) -> text | None,
torch_version_py(venv) -> text | None); files (isdir, snapshot, read_bytes, read_text, lstat, realpath, exists,
shard_problem, sha256_many(paths, workers), write_cache(path, files)); clock (time(), sleep(seconds)).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.llmops.sglang.plugins.module_utils.host import gpu_health, nvidia_smi

from ansible_collections.llmops.sglang.plugins.module_utils.model import checkpoint, preflight


def peer_claims(params, host, own):
    """The GPUs the host's other instances of the role claim (gpu_health.peer_claim), of those that count."""
    out = []
    for name in preflight.instance_names(host.env_names(params['config_dir']), own):
        unit_text = host.read(os.path.join(params['unit_dir'], name + '.service'))
        if unit_text is None:
            continue
        claim = gpu_health.peer_claim(name + '.service', host.read(os.path.join(params['config_dir'], name + '.env')) or '',
                                      unit_text)
        if claim and preflight.peer_counts(host.unit_props(name + '.service', ('ActiveState', 'UnitFileState'))):
            out.append(claim)
    return out


def unit_pids(host, unit):
    props = host.unit_props(unit, ('ControlGroup', 'MainPID'))
    for top in preflight.cgroup_tops(props):
        texts = host.cgroup_procs(top)
        if texts is not None:
            return preflight.unit_pids(props, texts)
    return preflight.unit_pids(props, ())


def gpu_gate(params, place, host):
    result = preflight.empty_gpu_gate()
    smi = host.nvidia_smi()
    if not smi:
        result['reason'] = preflight.NO_SMI
        return result
    rc, out, err = host.smi(nvidia_smi.health_cmd(smi))
    gpus = nvidia_smi.parse_health(out) if rc == 0 else []
    if not gpus:
        result.update(preflight.smi_failed(rc, out, err, params['nvidia_smi_timeout'], params['waive']))
        return result
    rc, apps_out, _err = host.smi(nvidia_smi.apps_cmd(smi))
    apps = nvidia_smi.parse_compute_apps(apps_out) if rc == 0 else []
    rc, version_out, _err = host.smi(nvidia_smi.version_cmd(smi))
    driver_cuda = nvidia_smi.parse_version(version_out)['cuda_version'] if rc == 0 else None
    built_for = gpu_health.torch_cuda_version(host.torch_version_py(params['venv'])) if params['venv'] else None
    findings = gpu_health.judge(
        gpus, apps, params['unit'], unit_pids(host, params['unit']), place['tp_per_node'],
        visible_devices=place['cuda_visible_devices'], base_gpu_id=place['base_gpu_id'],
        gpu_id_step=place['gpu_id_step'], peers=peer_claims(params, host, preflight.own_name(params['unit'])),
        driver_cuda=driver_cuda, torch_cuda=built_for, expected_name=params['gpu_name'], waive=params['waive'])
    result.update(status=gpu_health.outcome(findings), gpus=gpus, claimed=preflight.claimed(place, gpus),
                  driver_cuda=driver_cuda, torch_cuda=built_for, findings=findings,
                  reason='' if built_for else preflight.NO_TORCH_CUDA)
    return result


def invalid_shards(files, path, shards):
    invalid = []
    for name in shards:
        try:
            problem = files.shard_problem(os.path.join(path, name))
        except (IOError, OSError) as exc:
            problem = ('I/O error', 'it cannot be read: %s' % exc)
        if problem:
            invalid.append((name, problem))
    return invalid


def read_cache(files, cache_path):
    """The digest cache, when there is one to believe (preflight.cache_trusted), else an empty one."""
    if cache_path and files.exists(cache_path) and \
            preflight.cache_trusted(files.lstat(os.path.dirname(cache_path)), files.lstat(cache_path)):
        return checkpoint.parse_cache(files.read_text(cache_path) or '')
    return {}


def checkpoint_gate(params, manifest, files, clock, check_mode):
    started = clock.time()
    path = params['model_path']
    result = preflight.empty_checkpoint_gate()
    if not files.isdir(path):
        result.update(status='skipped', cache='unchanged')
        return result  # the completeness check (sglang_info) names a missing directory
    before = files.snapshot(path)
    markers = checkpoint.download_markers(before)
    shards = preflight.shard_names(files.read_bytes(os.path.join(path, preflight.INDEX_FILE)), before)
    invalid = invalid_shards(files, path, shards)
    result['shards'] = len(shards)
    wait = preflight.growth_wait(params['growth_interval'], clock.time() - started)
    if wait > 0:
        clock.sleep(wait)
    after = files.snapshot(path)
    growing = checkpoint.growth(before, after)
    stats = dict((name, after[name][0]) for name in manifest if name in after)
    digests = {}
    cache_path = params['cache_path']
    cache = read_cache(files, cache_path)
    if preflight.should_hash(manifest, markers, growing):
        names = checkpoint.to_hash(manifest, stats)
        realpaths = dict((name, files.realpath(os.path.join(path, name))) for name in names)
        digests, todo = preflight.split_cached(names, after, realpaths, cache)
        result['cached'] = len(digests)
        if todo:
            workers = preflight.hash_workers(params['hash_workers'], len(todo))
            for (name, full, size, mtime_ns), digest in zip(todo, files.sha256_many([t[1] for t in todo], workers)):
                digests[name] = digest
                cache[full] = {'size': size, 'mtime_ns': mtime_ns, 'sha256': digest}
                result['hashed'] += 1
                result['hashed_bytes'] += size
            if cache_path:
                if check_mode:
                    result['cache'] = 'not written (check mode)'
                else:
                    try:
                        result['cache'] = files.write_cache(cache_path, cache)
                    except (IOError, OSError) as exc:
                        result['cache'] = 'not written: %s' % exc
    findings = checkpoint.judge(markers=markers, growing=growing, invalid=invalid, manifest=manifest, stats=stats,
                                digests=digests, waive=params['waive'])
    result.update(findings=findings, status=gpu_health.outcome(findings), seconds=round(clock.time() - started, 3))
    return result


def run(params, place, manifest, host, files, clock, check_mode):
    """Both gates (those of params['checks']) -> the module's result (preflight.result)."""
    skipped = {'status': 'skipped', 'findings': []}
    gpu = gpu_gate(params, place, host) if 'gpu' in params['checks'] else dict(skipped)
    ckpt = checkpoint_gate(params, manifest, files, clock, check_mode) \
        if 'checkpoint' in params['checks'] and params['model_path'] else dict(skipped)
    return preflight.result(gpu, ckpt)
