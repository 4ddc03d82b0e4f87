# -*- coding: utf-8 -*-
"""sglang_info's reads (host_adapters) on fakes: systemctl and nvidia-smi as a fake run_command, files in tmp_path."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.llmops.sglang.plugins.module_utils.host import host_adapters as ha

SHOW = ('Id=sglang-k26.service\nLoadState=loaded\nActiveState=active\nSubState=running\nResult=success\nMainPID=0\n'
        'InvocationID=abc\nActiveEnterTimestamp=Thu 2026-12-03 01:00:00 UTC\nNRestarts=2\n'
        'FragmentPath=/etc/systemd/system/sglang-k26.service\n')


class RunCommand(object):
    def __init__(self, *answers):
        self.answers = list(answers)
        self.argvs = []

    def __call__(self, argv):
        self.argvs.append(argv)
        return self.answers.pop(0)


def test_service_info_adds_restarts_pid_and_unit_file_to_the_unit_facts():
    run = RunCommand((0, SHOW, ''))
    facts = ha.service_info(run, '/bin/systemctl', 'sglang-k26.service')
    assert run.argvs == [['/bin/systemctl', 'show', '-p', ','.join(ha.INFO_PROPERTIES), 'sglang-k26.service']]
    assert facts == {'exists': True, 'active_state': 'active', 'sub_state': 'running', 'result': 'success',
                     'invocation_id': 'abc', 'since': 'Thu 2026-12-03 01:00:00 UTC', 'started_at': None,
                     'restarts': 2, 'main_pid': 0, 'fragment_path': '/etc/systemd/system/sglang-k26.service', 'argv': []}


def test_service_info_of_a_unit_systemctl_cannot_show():
    facts = ha.service_info(RunCommand((1, '', 'Failed to connect to bus\n')), '/bin/systemctl', 'x.service')
    assert facts == {'exists': False, 'error': 'Failed to connect to bus'}


def test_mtime_facts_paths_and_patterns(tmp_path):
    (tmp_path / 'a.conf').write_text('a')
    (tmp_path / 'b.conf').write_text('b')
    facts = ha.mtime_facts([str(tmp_path / '*.conf'), str(tmp_path / 'none*'), str(tmp_path / 'gone')])
    assert facts == {str(tmp_path / 'a.conf'): os.stat(str(tmp_path / 'a.conf')).st_mtime,
                     str(tmp_path / 'b.conf'): os.stat(str(tmp_path / 'b.conf')).st_mtime,
                     str(tmp_path / 'none*'): None, str(tmp_path / 'gone'): None}


def test_model_facts_of_a_missing_and_of_an_incomplete_checkpoint(tmp_path):
    missing = str(tmp_path / 'nope')
    assert ha.model_facts(missing) == {'path': missing, 'exists': False, 'complete': False,
                                       'problem': '%s is not a directory' % missing}
    model = tmp_path / 'model'
    model.mkdir()
    (model / 'config.json').write_text('{}')
    (model / 'model.safetensors.index.json').write_text(json.dumps({'weight_map': {'w1': 'a.safetensors',
                                                                                   'w2': 'b.safetensors'}}))
    (model / 'a.safetensors').write_text('x')
    facts = ha.model_facts(str(model))
    assert facts['exists'] is True and facts['complete'] is False and 'marker' not in facts


def test_model_facts_say_whether_the_marker_is_there(tmp_path):
    """sglang_observe asks for the marker model_sync writes after verifying a version (model_sync.yml reads it)."""
    model = tmp_path / 'v1'
    assert ha.model_facts(str(model), '.llmops-model.json')['marker'] is False  # no directory
    model.mkdir()
    assert ha.model_facts(str(model), '.llmops-model.json')['marker'] is False
    (model / '.llmops-model.json').mkdir()  # not a file
    assert ha.model_facts(str(model), '.llmops-model.json')['marker'] is False
    (model / '.llmops-model.json').rmdir()
    (model / '.llmops-model.json').write_text('{}')
    assert ha.model_facts(str(model), '.llmops-model.json')['marker'] is True


def test_port_facts_from_the_kernels_tables(tmp_path):
    table = tmp_path / 'tcp'
    # 0x7530 = 30000 listening (state 0A), 0x7531 = 30001 established (01)
    table.write_text('  sl  local_address rem_address   st\n'
                     '   0: 0100007F:7530 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0 0 111 1\n'
                     '   1: 0100007F:7531 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0 0 112 1\n')
    assert ha.port_facts([30000, 30001], tables=(str(table), str(tmp_path / 'tcp6'))) == {'30000': True, '30001': False}


def test_gpu_facts_none_without_nvidia_smi_and_when_it_fails():
    assert ha.gpu_facts(RunCommand(), None, '/usr/bin/timeout') == []
    run = RunCommand((124, '', 'timed out'))
    assert ha.gpu_facts(run, '/usr/bin/nvidia-smi', '/usr/bin/timeout') == []
    assert run.argvs[0][0] == '/usr/bin/timeout' and '/usr/bin/nvidia-smi' in run.argvs[0]


def test_last_good_facts_digests_of_the_saved_copies(tmp_path):
    live, saved = tmp_path / 'etc', tmp_path / 'last-good'
    live.mkdir()
    saved.mkdir()
    (live / 'unit').write_text('[Unit]\n')
    (saved / 'unit').write_text('[Unit]\n')
    (live / 'env').write_text('A=1\n')
    (saved / 'env').write_text('A=2\n')
    (saved / 'pins.json').write_text('{"sglang": "0.5.23"}')
    files = {'unit': str(live / 'unit'), 'env': str(live / 'env'), 'secrets.env': str(live / 'secrets.env')}
    facts = ha.last_good_facts(str(saved), files)
    # The saved copy's digest, not the live file's: A=2, not A=1; None for a file not saved.
    assert facts == {'exists': True, 'same': {'unit': True, 'env': False, 'secrets.env': True},
                     'digests': {'unit': ha.digest(str(saved / 'unit')), 'env': ha.digest(str(saved / 'env')),
                                 'secrets.env': None},
                     'pins': {'sglang': '0.5.23'}}
    assert facts['digests']['env'] != ha.digest(str(live / 'env'))


def test_last_good_facts_of_no_copy_and_of_a_copy_left_as_old(tmp_path):
    files = {'unit': str(tmp_path / 'unit')}
    (tmp_path / 'unit').write_text('[Unit]\n')
    assert ha.last_good_facts(str(tmp_path / 'none'), files) == {
        'exists': False, 'same': {'unit': False}, 'digests': {'unit': None}, 'pins': None}
    old = tmp_path / 'last-good.old'
    old.mkdir()
    (old / 'unit').write_text('[Unit]\n')
    facts = ha.last_good_facts(str(tmp_path / 'last-good'), files)
    assert facts['exists'] and facts['same'] == {'unit': True} and facts['digests'] == {'unit': ha.digest(str(old / 'unit'))}
