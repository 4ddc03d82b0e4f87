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


_LIST_RE = re.compile(r'^GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>[^)]+)\)\s*$')


def parse_list(text):
    """`nvidia-smi -L` -> [{index, name, uuid}]."""
    out = []
    for line in text.splitlines():
        m = _LIST_RE.match(line.strip())
        if m:
            out.append({'index': int(m.group('index')), 'name': m.group('name'), 'uuid': m.group('uuid')})
    return out


_TABLE_GPU_RE = re.compile(r'^\|\s+(?P<index>\d+)\s+(?P<name>.+?)\s+(?:On|Off)\s+\|')
_TABLE_MEM_RE = re.compile(r'\|\s+(?P<used>\d+)MiB\s*/\s*(?P<total>\d+)MiB\s+\|')


def parse_table(text):
    """The default `nvidia-smi` table -> [{index, name, memory_used_mib, memory_total_mib}] (fallback view)."""
    gpus = []
    current = None
    for line in text.splitlines():
        m = _TABLE_GPU_RE.match(line)
        if m:
            current = {'index': int(m.group('index')), 'name': m.group('name').strip(),
                       'memory_used_mib': None, 'memory_total_mib': None}
            gpus.append(current)
            continue
        m = _TABLE_MEM_RE.search(line)
        if m and current is not None and current['memory_total_mib'] is None:
            current['memory_used_mib'] = int(m.group('used'))
            current['memory_total_mib'] = int(m.group('total'))
        if line.startswith('| Processes'):
            break
    return gpus
