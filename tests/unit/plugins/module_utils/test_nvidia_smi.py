# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia-smi parsing against real captures (shared/fixtures/nvidia-smi)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.host import nvidia_smi

# Real captures: a copy next to this file when the repo carries one, else the shared reference set.
_HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures', 'nvidia-smi')
FIXTURES = os.environ.get('SGLANG_NVIDIA_SMI_FIXTURES') or (_HERE if os.path.isdir(_HERE) else '/work/shared/fixtures/nvidia-smi')


def sections(name):
    path = os.path.join(FIXTURES, name)
    if not os.path.exists(path):
        pytest.skip('fixture %s not available' % path)
    with open(path) as f:
        return f.read().split('\n---\n')


def test_busy_h200_query_csv_noheader_nounits():
    # first section: --query-gpu=index,name,memory.used,memory.total --format=csv,noheader,nounits
    # followed by a --query-compute-apps row ("610, python3, 19592, GPU-...") that must not parse as a GPU
    text = sections('nvidia-smi-h200-busy.txt')[0]
    assert nvidia_smi.parse_query_gpu(text) == [
        {'index': 0, 'name': 'NVIDIA H200', 'memory_used_mib': 19601, 'memory_total_mib': 143771},
        {'index': 1, 'name': 'NVIDIA H200', 'memory_used_mib': 4, 'memory_total_mib': 143771},
    ]


def test_idle_h200_with_header_and_units():
    parts = sections('nvidia-smi-h200.txt')
    text = [p for p in parts if p.startswith('index, name')][0]
    assert nvidia_smi.parse_query_gpu(text) == [
        {'index': 0, 'name': 'NVIDIA H200', 'memory_used_mib': 0, 'memory_total_mib': 143771},
        {'index': 1, 'name': 'NVIDIA H200', 'memory_used_mib': 0, 'memory_total_mib': 143771},
    ]


def test_idle_h200_other_sections_are_not_memory_rows():
    parts = sections('nvidia-smi-h200.txt')
    # neither `nvidia-smi -L`, an 8-column query nor the table view is the 4-column memory query
    assert nvidia_smi.parse_query_gpu(parts[0]) == []
    assert nvidia_smi.parse_query_gpu(parts[1]) == []
    assert nvidia_smi.parse_query_gpu([p for p in parts if 'NVIDIA-SMI' in p][0]) == []


def test_whole_files_parse_without_error():
    for name in ('nvidia-smi-h200.txt', 'nvidia-smi-h200-busy.txt'):
        text = '\n---\n'.join(sections(name))
        for gpu in nvidia_smi.parse_query_gpu(text):
            assert gpu['memory_total_mib'] == 143771


def test_unsupported_values_and_garbage():
    text = '0, NVIDIA GB10, [N/A], [N/A]\n1, NVIDIA B300, 1200, 275040\nNo devices were found\n'
    assert nvidia_smi.parse_query_gpu(text) == [
        {'index': 1, 'name': 'NVIDIA B300', 'memory_used_mib': 1200, 'memory_total_mib': 275040}]
    assert nvidia_smi.parse_query_gpu('') == []


def test_query_cmd():
    assert nvidia_smi.query_cmd('/usr/bin/nvidia-smi') == [
        '/usr/bin/nvidia-smi', '--query-gpu=index,name,memory.used,memory.total', '--format=csv,noheader,nounits']


def test_query_cmd_bounded_by_timeout():
    assert nvidia_smi.query_cmd('/usr/bin/nvidia-smi', '/usr/bin/timeout') == [
        '/usr/bin/timeout', '-k', '2', '10', '/usr/bin/nvidia-smi', '--query-gpu=index,name,memory.used,memory.total',
        '--format=csv,noheader,nounits']
