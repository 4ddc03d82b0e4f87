# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for nvidia-smi output (GPU memory while a model loads)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

QUERY_FIELDS = ('index', 'name', 'memory.used', 'memory.total')


# A wedged driver makes nvidia-smi hang for minutes; every caller bounds it with coreutils' timeout(1).
QUERY_TIMEOUT = 10


def query_cmd(nvidia_smi, timeout_bin=None, seconds=QUERY_TIMEOUT):
    """The GPU memory query; under ``timeout_bin SECONDS`` (SIGTERM, then KILL 2 s later) when timeout(1) exists."""
    cmd = [nvidia_smi, '--query-gpu=' + ','.join(QUERY_FIELDS), '--format=csv,noheader,nounits']
    if timeout_bin:
        cmd = [timeout_bin, '-k', '2', str(seconds)] + cmd
    return cmd


def _mib(value):
    """'19601', '19601 MiB' -> 19601; '[N/A]', '[Not Supported]' -> None."""
    m = re.match(r'^\s*(\d+(?:\.\d+)?)\s*(?:MiB)?\s*$', value)
    if not m:
        return None
    return int(float(m.group(1)))


def parse_query_gpu(text):
    """Output of `nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv[,noheader][,nounits]`.

    Returns [{index, name, memory_used_mib, memory_total_mib}], skipping the header and any line that
    is not such a row (other queries' rows, the table view), so mixed captures parse safely.
    """
    gpus = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(',')]
        if len(fields) != 4 or not fields[0].isdigit():
            continue
        used, total = _mib(fields[2]), _mib(fields[3])
        if total is None:
            # every GPU row has a total; other queries' rows (compute apps: pid, name, mem, uuid) do not
            continue
        gpus.append({'index': int(fields[0]), 'name': fields[1], 'memory_used_mib': used, 'memory_total_mib': total})
    return gpus


# The GPU health gate's query (every field is in the driver's `--help-query-gpu`; see
# tests/unit/plugins/module_utils/fixtures/nvidia-smi/h200-full/query-gpu.csv for a real H200 row).
HEALTH_FIELDS = ('index', 'name', 'uuid', 'pci.bus_id', 'driver_version', 'persistence_mode', 'memory.used',
                 'memory.total', 'ecc.mode.current', 'ecc.errors.uncorrected.volatile.total', 'retired_pages.pending',
                 'remapped_rows.pending', 'remapped_rows.failure', 'compute_cap')
APP_FIELDS = ('pid', 'process_name', 'used_memory', 'gpu_uuid')


def health_cmd(nvidia_smi):
    return [nvidia_smi, '--query-gpu=' + ','.join(HEALTH_FIELDS), '--format=csv,noheader,nounits']


def apps_cmd(nvidia_smi):
    return [nvidia_smi, '--query-compute-apps=' + ','.join(APP_FIELDS), '--format=csv,noheader,nounits']


def version_cmd(nvidia_smi):
    return [nvidia_smi, '--version']


def _na(value):
    """'[N/A]', 'N/A', '[Not Supported]', '' -> None (the field does not apply to this GPU), else the stripped text."""
    value = value.strip()
    if value in ('', 'N/A') or (value.startswith('[') and value.endswith(']')):
        return None
    return value


def _int_or_none(value):
    value = _na(value)
    if value is None:
        return None
    m = re.match(r'^(\d+)', value)
    return int(m.group(1)) if m else None


def _yes(value):
    """'Yes'/'Enabled' -> True, 'No'/'Disabled' -> False, N/A -> None."""
    value = _na(value)
    if value is None:
        return None
    return value.lower() in ('yes', 'enabled', 'on')


def parse_health(text):
    """`nvidia-smi --query-gpu=HEALTH_FIELDS --format=csv,noheader,nounits` -> one dict per GPU.

    Values that do not apply to a GPU (`[N/A]`: an H200 has remapped rows instead of retired pages) are None.
    Lines that are not rows of this query (a header, an error) are skipped; a caller that gets no rows for a
    successful call reports the text.
    """
    gpus = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(',')]
        if len(fields) != len(HEALTH_FIELDS) or not fields[0].isdigit():
            continue
        row = dict(zip(HEALTH_FIELDS, fields))
        gpus.append({
            'index': int(row['index']),
            'name': row['name'],
            'uuid': row['uuid'],
            'bus_id': row['pci.bus_id'],
            'driver_version': row['driver_version'],
            'persistence_mode': _yes(row['persistence_mode']),
            'memory_used_mib': _int_or_none(row['memory.used']),
            'memory_total_mib': _int_or_none(row['memory.total']),
            'ecc_mode': _yes(row['ecc.mode.current']),
            'ecc_uncorrected_volatile': _int_or_none(row['ecc.errors.uncorrected.volatile.total']),
            'retired_pages_pending': _yes(row['retired_pages.pending']),
            'remapped_rows_pending': _yes(row['remapped_rows.pending']),
            'remapped_rows_failure': _yes(row['remapped_rows.failure']),
            'compute_cap': _na(row['compute_cap']),
        })
    return gpus


def parse_compute_apps(text):
    """`nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv,noheader,nounits`.

    Returns [{pid, process_name, used_memory_mib, gpu_uuid}]; the header line of `--format=csv` is skipped. An
    idle GPU prints nothing (no line at all), so an empty text is an empty list.
    """
    apps = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(',')]
        if len(fields) != len(APP_FIELDS) or not fields[0].isdigit():
            continue
        apps.append({'pid': int(fields[0]), 'process_name': fields[1], 'used_memory_mib': _int_or_none(fields[2]),
                     'gpu_uuid': fields[3]})
    return apps


_VERSION_RE = re.compile(r'^\s*(?P<key>DRIVER version|CUDA Version|NVIDIA-SMI version)\s*:\s*(?P<value>\S+)', re.M)


def parse_version(text):
    """`nvidia-smi --version` (also the head of `-q`) -> {driver_version, cuda_version}; None where absent.

    The CUDA version is the newest CUDA runtime this driver supports (see fixtures h200-full/q.txt: 13.0).
    """
    found = dict((m.group('key'), m.group('value')) for m in _VERSION_RE.finditer(text))
    return {'driver_version': found.get('DRIVER version'), 'cuda_version': found.get('CUDA Version')}
