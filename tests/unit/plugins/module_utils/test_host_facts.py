# -*- coding: utf-8 -*-
"""The pure side of sglang_info: venv probe parsing, checkpoint completeness, listening ports, argv redaction."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import sys

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.host.host_facts import (
    REDACTED,
    VENV_PROBE,
    checkpoint_status,
    listening_ports,
    parse_cmdline,
    parse_venv_probe,
    redact_argv,
)


def test_venv_probe_runs_in_a_real_python_and_parses(monkeypatch, capsys):
    # The script as `python -c VENV_PROBE NAMES` runs it, in this interpreter: argv[1] is the names, stdout the facts.
    monkeypatch.setattr(sys, 'argv', ['-c', json.dumps(['pytest', 'surely-not-installed'])])
    exec(compile(VENV_PROBE, '<VENV_PROBE>', 'exec'), {'__name__': '__main__'})  # pylint: disable=exec-used
    facts = parse_venv_probe(capsys.readouterr().out)
    assert facts['python_major_minor'] == '%d.%d' % sys.version_info[:2]
    assert facts['packages']['pytest'] == pytest.__version__
    assert facts['packages']['surely-not-installed'] is None
    assert isinstance(facts['python_h'], bool) and isinstance(facts['pip'], bool)


def test_venv_probe_rejects_other_output():
    with pytest.raises(ValueError):
        parse_venv_probe('[1, 2]')
    with pytest.raises(ValueError):
        parse_venv_probe('Traceback (most recent call last):')


INDEX = json.dumps({'metadata': {}, 'weight_map': {
    'a.weight': 'model-00001-of-00002.safetensors',
    'b.weight': 'model-00002-of-00002.safetensors',
    'c.weight': 'model-00002-of-00002.safetensors',
}})


def test_complete_checkpoint():
    status = checkpoint_status(True, INDEX, ['config.json', 'model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors'])
    assert status['complete'] and status['shards_expected'] == 2 and status['shards_missing'] == []


def test_missing_shard_is_named():
    status = checkpoint_status(True, INDEX, ['config.json', 'model-00001-of-00002.safetensors'])
    assert not status['complete']
    assert status['shards_missing'] == ['model-00002-of-00002.safetensors']
    assert '1 of 2 shards' in status['problem'] and 'model-00002-of-00002' in status['problem']


def test_missing_config_and_bad_index():
    assert checkpoint_status(False, INDEX, [])['problem'] == 'config.json is missing'
    assert 'not valid JSON' in checkpoint_status(True, '{nope', ['config.json'])['problem']
    assert 'no weight files' in checkpoint_status(True, None, ['config.json'])['problem']
    assert checkpoint_status(True, None, ['config.json', 'model.safetensors'])['complete']


PROC_NET_TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:7531 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0100007F:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0 100 0 0 10 0
   2: 0100007F:9C40 0100007F:7531 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 100 0 0 10 0
"""

PROC_NET_TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue
   0: 00000000000000000000000000000000:7532 00000000000000000000000000000000:0000 0A 00000000:00000000
"""


def test_listening_ports_only_counts_listen_state():
    assert listening_ports(PROC_NET_TCP) == {30001, 22}
    assert listening_ports(PROC_NET_TCP6) == {30002}


def test_secret_flags_are_redacted_in_both_spellings():
    argv = ['python', '-m', 'sglang.launch_server', '--api-key', 'sk-secret', '--port', '1', '--ssl-keyfile-password=pw',
            '--admin-api-key', 'adm']
    assert redact_argv(argv) == ['python', '-m', 'sglang.launch_server', '--api-key', REDACTED, '--port', '1',
                                 '--ssl-keyfile-password=' + REDACTED, '--admin-api-key', REDACTED]


def test_parse_cmdline():
    assert parse_cmdline(b'python\x00-m\x00a b\x00') == ['python', '-m', 'a b']
    assert parse_cmdline(b'') == []
