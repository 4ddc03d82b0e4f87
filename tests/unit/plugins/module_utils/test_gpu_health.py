# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU health gate: parsers on a real H200's output (fixtures/nvidia-smi/h200-full), and every decision."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.host import gpu_health, nvidia_smi

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures', 'nvidia-smi', 'h200-full')
UNIT = 'sglang-k26.service'


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def real_row():
    """The real H200 row, reduced to the health query's fields in its order (same values, same formats)."""
    header = [h.split(' [')[0] for h in fixture('query-gpu-header.csv').splitlines()[0].split(', ')]
    values = fixture('query-gpu.csv').splitlines()[0].split(', ')
    row = dict(zip(header, values))
    return ', '.join(row[field] for field in nvidia_smi.HEALTH_FIELDS)


def eight(**changes):
    """8 GPUs parsed from the real row (index and uuid varied), with per-GPU changes {index: {key: value}}."""
    base = nvidia_smi.parse_health(real_row())[0]
    gpus = []
    for i in range(8):
        gpu = dict(base, index=i, uuid='GPU-%d000-aaaa' % i, bus_id='00000000:00:%02X.0' % (6 + i))
        gpu.update(changes.get('g%d' % i, {}))
        gpus.append(gpu)
    return gpus


def checks(findings, waived=None):
    return sorted((f['check'], f['gpu']) for f in findings if waived is None or f['waived'] == waived)


def test_health_row_of_a_real_idle_h200():
    assert nvidia_smi.parse_health(real_row()) == [{
        'index': 0, 'name': 'NVIDIA H200', 'uuid': 'GPU-4e0800b5-2cd8-d7d9-5d84-402ac831bbfd',
        'bus_id': '00000000:00:06.0', 'driver_version': '580.159.04', 'persistence_mode': True,
        'memory_used_mib': 0, 'memory_total_mib': 143771, 'ecc_mode': True, 'ecc_uncorrected_volatile': 0,
        'retired_pages_pending': None,  # [N/A] on Hopper: it remaps rows instead
        'remapped_rows_pending': False, 'remapped_rows_failure': False, 'compute_cap': '9.0'}]


def test_health_parser_skips_headers_and_errors():
    assert nvidia_smi.parse_health('index, name\nField "x" is not a valid field to query.\n') == []


def test_compute_apps_with_and_without_header():
    busy = fixture('busy.txt')
    with_header = busy.split('--format=csv\n')[1].split('\n\n')[0]
    without = busy.split('--format=csv,noheader,nounits\n')[1].split('\n\n')[0]
    expected = [{'pid': 452, 'process_name': 'python3', 'used_memory_mib': 21090,
                 'gpu_uuid': 'GPU-4e0800b5-2cd8-d7d9-5d84-402ac831bbfd'}]
    assert nvidia_smi.parse_compute_apps(without) == expected
    # the csv-with-units form has a 5th field (bus id) in the fixture: not this query's shape, so not parsed as one
    assert nvidia_smi.parse_compute_apps(with_header) == []
    assert nvidia_smi.parse_compute_apps('') == []


def test_version_from_real_q_head():
    assert nvidia_smi.parse_version(fixture('q.txt')) == {'driver_version': '580.159.04', 'cuda_version': '13.0'}
    assert nvidia_smi.parse_version('') == {'driver_version': None, 'cuda_version': None}


def test_healthy_box_passes():
    assert gpu_health.judge(eight(), [], UNIT, set(), 8) == []


@pytest.mark.parametrize('change,check', [
    ({'ecc_uncorrected_volatile': 2}, 'ecc_uncorrected'),
    ({'remapped_rows_pending': True}, 'row_remap_pending'),
    ({'remapped_rows_failure': True}, 'row_remap_failure'),
    ({'retired_pages_pending': True}, 'retired_pages_pending'),
    ({'persistence_mode': False}, 'persistence_mode'),
])
def test_each_gpu_fault_names_the_gpu_and_what_to_do(change, check):
    findings = gpu_health.judge(eight(g3=change), [], UNIT, set(), 8)
    assert checks(findings) == [(check, 3)]
    message = findings[0]['message']
    assert message.startswith('GPU 3 (GPU-3000-aaaa, 00000000:00:09.0)')
    assert any(word in message for word in ('reset', 'reboot', 'serviced', 'nvidia-persistenced'))


def test_unclaimed_gpus_are_not_judged():
    # a bad GPU 7 is not this instance's business when it runs on 0-3
    assert gpu_health.judge(eight(g7={'ecc_uncorrected_volatile': 5}), [], UNIT, set(), 4,
                            visible_devices='0,1,2,3') == []


def test_waived_findings_are_kept_and_marked():
    findings = gpu_health.judge(eight(g0={'persistence_mode': False}), [], UNIT, set(), 8, waive=['persistence_mode'])
    assert checks(findings, waived=True) == [('persistence_mode', 0)]
    assert gpu_health.outcome(findings) == 'waived'
    assert gpu_health.outcome([]) == 'ok' and gpu_health.outcome([], judged=False) == 'not_judged'
    assert gpu_health.outcome(gpu_health.judge(eight(g0={'persistence_mode': False}), [], UNIT, set(), 8)) == 'failed'


def test_too_few_gpus():
    findings = gpu_health.judge(eight()[:4], [], UNIT, set(), 8)
    assert checks(findings) == [('gpu_count', None)]
    assert 'needs 8 GPUs' in findings[0]['message'] and 'shows 4' in findings[0]['message']


def test_visible_devices_and_placement_flags():
    gpus = eight()
    assert gpu_health.parse_visible_devices(None, gpus) == list(range(8))
    assert gpu_health.parse_visible_devices('4,5,GPU-6000,7', gpus) == [4, 5, 6, 7]
    assert gpu_health.claimed_gpus(4, [4, 5, 6, 7]) == ([4, 5, 6, 7], [])
    # SGLang: gpu = base_gpu_id + rank * gpu_id_step (weight_cache/protocol.py:293-297)
    assert gpu_health.claimed_gpus(4, list(range(8)), base_gpu_id=1, gpu_id_step=2) == ([1, 3, 5, 7], [])
    assert gpu_health.claimed_gpus(4, [0, 1], base_gpu_id=0) == ([0, 1], [2, 3])
    for bad in ('9', 'GPU-', '1,1'):
        with pytest.raises(ValueError):
            gpu_health.parse_visible_devices(bad, gpus)
    findings = gpu_health.judge(gpus, [], UNIT, set(), 4, visible_devices='0,9')
    assert checks(findings) == [('gpu_count', None)] and 'CUDA_VISIBLE_DEVICES=0,9 names GPU 9' in findings[0]['message']


def test_two_instances_claiming_the_same_gpus():
    peer = {'name': 'sglang-k26-ddtree.service', 'cuda_visible_devices': None, 'tp_per_node': 8, 'base_gpu_id': 0,
            'gpu_id_step': 1}
    findings = gpu_health.judge(eight(), [], UNIT, set(), 8, peers=[peer])
    assert checks(findings) == [('gpu_claim', None)]
    assert 'GPUs 0,1,2,3,4,5,6,7 are claimed by sglang-k26.service and by sglang-k26-ddtree.service' in findings[0]['message']
    split = dict(peer, cuda_visible_devices='4,5,6,7', tp_per_node=4)
    assert gpu_health.judge(eight(), [], UNIT, set(), 4, visible_devices='0,1,2,3', peers=[split]) == []
    overlap = dict(split, cuda_visible_devices='3,4,5,6')
    assert 'GPUs 3 are claimed' in gpu_health.judge(eight(), [], UNIT, set(), 4, visible_devices='0,1,2,3',
                                                    peers=[overlap])[0]['message']


def test_peer_claim_from_the_files_the_role_renders():
    unit = ('[Service]\nEnvironmentFile=/etc/sglang/b.env\n'
            'ExecStart=/opt/sglang/venv/bin/python -m sglang.launch_server --model-path /m --tp-size 4 '
            '--base-gpu-id 4\n')
    env = '# managed\nHOME=/var/lib/sglang/b\nCUDA_VISIBLE_DEVICES="0,1,2,3,4,5,6,7"\n'
    assert gpu_health.peer_claim('b.service', env, unit) == {
        'name': 'b.service', 'cuda_visible_devices': '0,1,2,3,4,5,6,7', 'tp_per_node': 4, 'base_gpu_id': 4,
        'gpu_id_step': 1}
    multinode = unit.replace('--tp-size 4', '--tp-size 16 --nnodes 2')
    assert gpu_health.peer_claim('b.service', '', multinode)['tp_per_node'] == 8
    assert gpu_health.peer_claim('x.service', '', '[Service]\nExecStart=/usr/bin/sleep 1\n') is None


def test_foreign_process_named_with_pid_but_not_this_units():
    apps = [{'pid': 4242, 'process_name': 'python3', 'used_memory_mib': 21090, 'gpu_uuid': 'GPU-2000-aaaa'},
            {'pid': 900, 'process_name': 'python3', 'used_memory_mib': 80000, 'gpu_uuid': 'GPU-5000-aaaa'}]
    findings = gpu_health.judge(eight(), apps, UNIT, {900, 901}, 8)
    assert checks(findings) == [('foreign_process', 2)]
    assert findings[0]['message'].startswith('GPU 2: python3 (PID 4242) holds 21090 MiB and is not part of sglang-k26.service')


def test_torch_cuda_and_driver():
    assert gpu_health.torch_cuda_version("__version__ = '2.9.1+cu128'\ncuda: Optional[str] = '12.8'\n") == '12.8'
    assert gpu_health.torch_cuda_version("cuda = '13.0'\n") == '13.0'
    assert gpu_health.torch_cuda_version("cuda: Optional[str] = None\n") is None
    assert gpu_health.torch_cuda_version('') is None
    old = gpu_health.judge(eight(), [], UNIT, set(), 8, driver_cuda='12.2', torch_cuda='12.8')
    assert checks(old) == [('cuda_driver', None)]
    assert 'the driver 580.159.04 supports CUDA up to 12.2, but the venv\'s torch was built for CUDA 12.8' in old[0]['message']
    assert gpu_health.judge(eight(), [], UNIT, set(), 8, driver_cuda='13.0', torch_cuda='12.8') == []
    assert gpu_health.judge(eight(), [], UNIT, set(), 8, driver_cuda='12.10', torch_cuda='12.9') == []
    assert gpu_health.judge(eight(), [], UNIT, set(), 8, driver_cuda=None, torch_cuda='12.8') == []


def test_gpu_model():
    findings = gpu_health.judge(eight(), [], UNIT, set(), 2, expected_name='B300')
    assert checks(findings) == [('gpu_model', 0), ('gpu_model', 1)]
    assert gpu_health.judge(eight(), [], UNIT, set(), 2, expected_name='h200') == []


def test_placement_from_the_argv_and_env_lines_the_role_renders():
    argv = ['--model-path', '/m', '--tp-size', '8', '--base-gpu-id=0', '--nnodes', '2']
    assert gpu_health.placement(argv, 'CUDA_VISIBLE_DEVICES=0,1,2,3\nHOME=/x') == {
        'cuda_visible_devices': '0,1,2,3', 'tp_per_node': 4, 'base_gpu_id': 0, 'gpu_id_step': 1}
    assert gpu_health.placement([], '')['cuda_visible_devices'] is None
    with pytest.raises(ValueError):
        gpu_health.placement(['--tp-size', 'eight'])
