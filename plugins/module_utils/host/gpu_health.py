# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU health gate's decisions: which GPUs an instance claims, and what is wrong with them. No I/O.

The preflight's adapters (preflight_adapters) run nvidia-smi and read files, preflight_driver hands what they found
to these functions, which judge it. Each finding names the check (the name an operator waives it by), the GPU, and what to do.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import shlex

# Every check of this gate, by the name sglang_preflight_waive takes.
GPU_CHECKS = ('nvidia_smi', 'gpu_count', 'gpu_model', 'gpu_claim', 'ecc_uncorrected', 'row_remap_pending',
              'row_remap_failure', 'retired_pages_pending', 'persistence_mode', 'foreign_process', 'cuda_driver')

# SGLang's flags that place ranks on GPUs (0.5.23): a rank's local GPU is
# base_gpu_id + (tp_rank % tp_size_per_node) * gpu_id_step (weight_cache/protocol.py:293-297, "single source of
# truth for the local GPU id"); base_gpu_id >= 0 and gpu_id_step >= 1 (arg_groups/validation_hook.py:204-205).
_TP_FLAGS = ('--tp-size', '--tp', '--tensor-parallel-size')


def parse_visible_devices(value, gpus):
    """CUDA_VISIBLE_DEVICES -> physical GPU indices in CUDA's order; None (unset) -> every GPU.

    Entries are indices or GPU UUIDs (`GPU-4e08...`, a unique prefix is enough as for CUDA). Raises ValueError for
    an entry that names no GPU of ``gpus`` (nvidia-smi's rows) or names one twice.
    """
    if value is None:
        return [g['index'] for g in gpus]
    out = []
    for entry in [e.strip() for e in str(value).split(',')]:
        if entry == '':
            continue
        if entry.isdigit():
            index = int(entry)
            if index not in [g['index'] for g in gpus]:
                raise ValueError('CUDA_VISIBLE_DEVICES=%s names GPU %d, but nvidia-smi shows GPUs %s'
                                 % (value, index, ', '.join(str(g['index']) for g in gpus) or 'none'))
        else:
            matches = [g['index'] for g in gpus if g.get('uuid') and g['uuid'].startswith(entry)]
            if len(matches) != 1:
                raise ValueError('CUDA_VISIBLE_DEVICES=%s: %r matches %d GPU UUIDs (nvidia-smi -L lists them)'
                                 % (value, entry, len(matches)))
            index = matches[0]
        if index in out:
            raise ValueError('CUDA_VISIBLE_DEVICES=%s names GPU %d twice' % (value, index))
        out.append(index)
    return out


def claimed_gpus(tp_per_node, visible, base_gpu_id=0, gpu_id_step=1):
    """Physical GPU indices the ranks of this node use: (claimed list, missing logical ids).

    ``visible`` is parse_visible_devices' result; logical id = base_gpu_id + rank * gpu_id_step.
    """
    claimed, missing = [], []
    for rank in range(int(tp_per_node)):
        logical = int(base_gpu_id) + rank * int(gpu_id_step)
        if logical < len(visible):
            claimed.append(visible[logical])
        else:
            missing.append(logical)
    return claimed, missing


def _env_value(env_text, key):
    """A KEY=value line of a systemd EnvironmentFile (quotes removed); None when absent."""
    value = None
    for line in env_text.splitlines():
        line = line.strip()
        if line.startswith('#') or '=' not in line:
            continue
        name, _eq, rest = line.partition('=')
        if name.strip() == key:
            rest = rest.strip()
            if len(rest) >= 2 and rest[0] == rest[-1] and rest[0] in '"\'':
                rest = rest[1:-1]
            value = rest
    return value


def _flag(argv, names, default):
    for i, word in enumerate(argv):
        for name in names:
            if word == name and i + 1 < len(argv):
                return argv[i + 1]
            if word.startswith(name + '='):
                return word.split('=', 1)[1]
    return default


def placement(argv, env_text=''):
    """Where an instance's ranks go on this node, from its SGLang argv and its environment (EnvironmentFile lines).

    Returns {cuda_visible_devices, tp_per_node, base_gpu_id, gpu_id_step}; raises ValueError for a non-integer flag.
    """
    tp = int(_flag(argv, _TP_FLAGS, '1'))
    nnodes = int(_flag(argv, ('--nnodes',), '1'))
    return {'cuda_visible_devices': _env_value(env_text or '', 'CUDA_VISIBLE_DEVICES'),
            'tp_per_node': -(-tp // max(nnodes, 1)),
            'base_gpu_id': int(_flag(argv, ('--base-gpu-id',), '0')),
            'gpu_id_step': int(_flag(argv, ('--gpu-id-step',), '1'))}


def peer_claim(name, env_text, unit_text):
    """Another instance's placement from its EnvironmentFile and unit file, as the server role renders them.

    Returns placement() plus its name; None when the unit has no ExecStart that starts SGLang.
    """
    exec_line = None
    for line in unit_text.splitlines():
        if line.startswith('ExecStart='):
            exec_line = line[len('ExecStart='):]
    if not exec_line:
        return None
    try:
        argv = shlex.split(exec_line)
    except ValueError:
        return None
    if not any(w in ('sglang.launch_server', 'serve') or w.endswith('sglang.launch_server') for w in argv):
        return None
    try:
        claim = placement(argv, env_text)
    except ValueError:
        return None
    claim['name'] = name
    return claim


_TORCH_CUDA_RE = re.compile(r'''^cuda\s*(?::[^=]*)?=\s*(?:['"](?P<v>[0-9.]+)['"]|None)''', re.M)


def torch_cuda_version(version_py_text):
    """The CUDA version torch was built for, from its installed torch/version.py (`cuda: Optional[str] = '12.8'`);
    None for a CPU build (`cuda = None`) or text without the line."""
    m = _TORCH_CUDA_RE.search(version_py_text or '')
    return m.group('v') if m and m.group('v') else None


def _version_tuple(text):
    return tuple(int(p) for p in re.findall(r'\d+', text or '')[:2])


def _gpu_label(gpu):
    return 'GPU %d (%s, %s)' % (gpu['index'], gpu.get('uuid') or '?', gpu.get('bus_id') or '?')


def _ranges(indices):
    return ','.join(str(i) for i in sorted(indices)) or 'none'


def judge(gpus, apps, unit, unit_pids, tp_per_node, visible_devices=None, base_gpu_id=0, gpu_id_step=1,
          peers=(), driver_cuda=None, torch_cuda=None, expected_name='', waive=()):
    """Findings of the GPU gate: [{check, gpu, message, waived}] (gpu None for host-wide findings).

    ``gpus``/``apps``: nvidia_smi.parse_health / parse_compute_apps; ``unit_pids``: PIDs in this unit's cgroup
    (a process of this unit holding memory is expected); ``peers``: peer_claim() of the host's other instances.
    Only the GPUs this instance claims are judged for health: a bad GPU another instance uses is that one's gate.
    """
    waive = set(waive or ())
    findings = []

    def add(check, message, gpu=None):
        findings.append({'check': check, 'gpu': gpu, 'message': message, 'waived': check in waive})

    try:
        visible = parse_visible_devices(visible_devices, gpus)
    except ValueError as exc:
        add('gpu_count', '%s; fix CUDA_VISIBLE_DEVICES in sglang_env.' % exc)
        return findings
    claimed, missing = claimed_gpus(tp_per_node, visible, base_gpu_id, gpu_id_step)
    if missing:
        where = 'CUDA_VISIBLE_DEVICES=%s' % visible_devices if visible_devices is not None else 'nvidia-smi'
        add('gpu_count', '%s needs %d GPUs on this node (logical ids %s), but %s shows %d: %s. Use a host with '
            'more GPUs, lower sglang_tp_size, or give the instance more GPUs in CUDA_VISIBLE_DEVICES.'
            % (unit, tp_per_node, _ranges(int(base_gpu_id) + r * int(gpu_id_step) for r in range(int(tp_per_node))),
               where, len(visible), ', '.join('%d %s' % (g['index'], g['name']) for g in gpus if g['index'] in visible)
               or 'no GPU'))
    by_index = dict((g['index'], g) for g in gpus)
    mine = set(claimed)
    for peer in peers:
        try:
            peer_visible = parse_visible_devices(peer.get('cuda_visible_devices'), gpus)
        except ValueError:
            continue
        theirs = claimed_gpus(peer['tp_per_node'], peer_visible, peer.get('base_gpu_id', 0), peer.get('gpu_id_step', 1))[0]
        both = mine & set(theirs)
        if both:
            add('gpu_claim', 'GPUs %s are claimed by %s and by %s (CUDA_VISIBLE_DEVICES=%s, TP %d per node): two '
                'servers on one GPU run out of memory or crash. Give each instance its own GPUs with '
                'CUDA_VISIBLE_DEVICES in its env (k26_instances[].env), e.g. 0,1,2,3 and 4,5,6,7.'
                % (_ranges(both), unit, peer['name'], peer.get('cuda_visible_devices') or '(unset: all)',
                   peer['tp_per_node']))
    unit_pids = set(unit_pids or ())
    for index in claimed:
        gpu = by_index[index]
        label = _gpu_label(gpu)
        if expected_name and expected_name.lower() not in gpu['name'].lower():
            add('gpu_model', '%s is a %s, not a %s (sglang_preflight_gpu_name): this box is not the class the '
                'inventory says.' % (label, gpu['name'], expected_name), index)
        if gpu.get('ecc_uncorrected_volatile'):
            add('ecc_uncorrected', '%s has %d uncorrectable volatile ECC error(s) since the driver loaded: its memory '
                'returned bad data. Drain the box and reset the GPU (nvidia-smi -r -i %d) or have it serviced; do not '
                'load a model on it.' % (label, gpu['ecc_uncorrected_volatile'], index), index)
        if gpu.get('remapped_rows_pending'):
            add('row_remap_pending', '%s has a row remapping pending: the GPU needs a reset (nvidia-smi -r -i %d, with '
                'no process on it) or a reboot to complete it before it is reliable.' % (label, index), index)
        if gpu.get('remapped_rows_failure'):
            add('row_remap_failure', '%s had a row remapping failure: it has no spare rows for bad memory. Have it '
                'serviced (RMA), or leave it out with CUDA_VISIBLE_DEVICES.' % label, index)
        if gpu.get('retired_pages_pending'):
            add('retired_pages_pending', '%s has memory pages pending retirement on the next reboot (they can still '
                'be allocated): reboot the box, or reset the GPU, before loading a model.' % label, index)
        if gpu.get('persistence_mode') is False:
            add('persistence_mode', '%s has persistence mode off: the driver may unload and reinitialise between '
                'processes and a start can stall. Run nvidia-persistenced (or nvidia-smi -pm 1).' % label, index)
    uuids = dict((g.get('uuid'), g['index']) for g in gpus)
    for app in apps:
        index = uuids.get(app['gpu_uuid'])
        if index is None or index not in mine or app['pid'] in unit_pids:
            continue
        add('foreign_process', 'GPU %d: %s (PID %d) holds %s MiB and is not part of %s: stop it (kill %d) or wait '
            'for it, or the model will not fit.' % (index, app['process_name'], app['pid'],
                                                    app.get('used_memory_mib') if app.get('used_memory_mib') is not None
                                                    else '?', unit, app['pid']), index)
    if driver_cuda and torch_cuda and _version_tuple(driver_cuda) < _version_tuple(torch_cuda):
        driver = (gpus[0].get('driver_version') if gpus else None) or '?'
        add('cuda_driver', 'the driver %s supports CUDA up to %s, but the venv\'s torch was built for CUDA %s: CUDA '
            'initialisation will fail. Upgrade the driver, or install a torch built for CUDA <= %s.'
            % (driver, driver_cuda, torch_cuda, driver_cuda))
    return findings


def outcome(findings, judged=True, reason=''):
    """The gate's status from its findings: ok | failed | waived (only waived findings) | not_judged."""
    if not judged:
        return 'not_judged'
    if any(not f['waived'] for f in findings):
        return 'failed'
    return 'waived' if findings else 'ok'
