# -*- coding: utf-8 -*-
"""sglang_unit_hardening: the rules on its values (role_inputs.unit_hardening_problems) and how the unit template
renders the role's sandbox merged with it (docs/sandbox.md)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from pathlib import Path

import jinja2
import pytest
import yaml

from ansible_collections.llmops.sglang.plugins.module_utils.rollout.role_inputs import (
    UNIT_OWN_SETTINGS,
    server_problems,
    unit_hardening_problems,
)

ROLE = Path(__file__).resolve().parents[4] / 'roles' / 'server'
VARS = yaml.safe_load((ROLE / 'vars' / 'main.yml').read_text())
DEFAULTS = yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text())


class Problems(list):
    def add(self, name, value, expected):
        self.append('%s=%r: %s' % (name, value, expected))


def problems(hardening):
    found = Problems()
    unit_hardening_problems(found, hardening)
    return list(found)


def test_the_default_is_an_empty_dict_and_valid():
    assert DEFAULTS['sglang_unit_hardening'] == {}
    assert problems({}) == []
    assert 'sglang_unit_hardening' in VARS['__sglang_input_names']


def test_relaxing_adding_and_removing_settings_is_valid():
    assert problems({'ProtectClock': False, 'PrivateUsers': True, 'MemoryDenyWriteExecute': None, 'UMask': '0027',
                     'ReadWritePaths': ['/data/hf-cache'], 'DeviceAllow': [], 'CapabilityBoundingSet': ''}) == []


@pytest.mark.parametrize('hardening, fragment', [
    ({'UMask': 23}, "['UMask']=23: expected a string: quote it"),
    ({'ProtectHome': 'yes\nExecStartPre=/bin/evil'}, "['ProtectHome']='yes\\nExecStartPre=/bin/evil': expected a string "
                                                     "without line breaks"),
    ({'DeviceAllow': ['char-nvidia* rw', 'x\ny']}, "['DeviceAllow'][1]='x\\ny': expected a string without line breaks"),
    ({'DeviceAllow': ['char-nvidia* rw', 7]}, "['DeviceAllow'][1]=7: expected a string"),
    ({'ProtectSystem': {'strict': True}}, "['ProtectSystem']={'strict': True}: expected a string without line breaks"),
    ({'protect_clock': False}, 'expected systemd setting names such as ProtectClock'),
    ({'Protect Clock': False}, 'expected systemd setting names such as ProtectClock'),
    ({'ExecStart': '/bin/sh'}, "['ExecStart']='/bin/sh': the role sets ExecStart from its own variables"),
    ({'User': 'root'}, "['User']='root': the role sets User from its own variables"),
])
def test_one_bad_setting_gets_one_message_naming_it(hardening, fragment):
    found = problems(hardening)
    assert len(found) == 1 and found[0].startswith('sglang_unit_hardening') and fragment in found[0], found


def test_not_a_dict_is_refused():
    assert problems(['ProtectClock=no']) == ["sglang_unit_hardening=['ProtectClock=no']: expected a dict of systemd "
                                             "[Service] setting: value, e.g. {ProtectClock: false}"]


def test_the_role_refuses_it_with_its_other_inputs():
    values = dict(DEFAULTS, sglang_launcher=['/opt/sglang/venv/bin/python', '-m', 'sglang.launch_server'],
                  sglang_state_dir='/var/lib/sglang/sglang', sglang_compressed_tensors_version='0.18.0',
                  sglang_model_path='/models/k26', sglang_unit_hardening={'KillMode': 'process'})
    found = server_problems(values, {}, None, 'gpu-01')
    assert found == ["sglang_unit_hardening['KillMode']='process': the role sets KillMode from its own variables "
                     "(roles/server/defaults/main.yml); it is not a sandbox setting"], found


def test_every_setting_the_role_owns_is_in_the_template():
    template = (ROLE / 'templates' / 'sglang.service.j2').read_text()
    for setting in UNIT_OWN_SETTINGS:
        if setting != 'Environment':  # the role's environment is an EnvironmentFile; an Environment= line would win
            assert '\n%s=' % setting in template, setting


def render(hardening, state_dir='/var/lib/sglang/k26', rank=0):
    """The unit as the role renders it, with the role's sandbox merged with `hardening` (combine's semantics)."""
    env = jinja2.Environment(trim_blocks=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters['comment'] = lambda text: '# ' + text
    env.filters['basename'] = lambda path: path.rstrip('/').rsplit('/', 1)[-1]
    env.filters['llmops.sglang.systemd_exec_line'] = ' '.join
    defaults = dict(VARS['__sglang_unit_hardening_defaults'], ProtectHome='yes')
    merged = dict(defaults, **hardening)
    values = {
        'ansible_managed': 'managed', 'sglang_service_name': 'k26', 'sglang_model_path': '/models/k26', 'sglang_tp_size': 8,
        'sglang_port': 30000, 'sglang_start_limit_interval': 3600, 'sglang_start_limit_burst': 3, 'sglang_user': 'sglang',
        'sglang_group': 'sglang', 'sglang_state_dir': state_dir, '__sglang_env_path': '/etc/sglang/k26.env',
        '__sglang_secrets_path': '/etc/sglang/k26.secrets.env', '__sglang_command': ['/opt/sglang/venv/bin/python', '-m', 'x'],
        '__sglang_node_rank': rank, '__sglang_nodes': ['a', 'b'], 'sglang_multinode_follower_stop_timeout': 30,
        'sglang_stop_timeout': 600, 'sglang_restart_sec': 15, 'sglang_limit_nofile': '1048576', 'sglang_limit_memlock': 'infinity',
        '__sglang_unit_hardening': merged,
    }
    text = env.from_string((ROLE / 'templates' / 'sglang.service.j2').read_text()).render(values)
    return text.split('[Service]', 1)[1].split('\n[Install]', 1)[0].splitlines()


def test_the_default_sandbox_renders_one_line_per_value():
    lines = render({})
    assert 'ReadWritePaths=/var/lib/sglang/k26' in lines
    for line in ('NoNewPrivileges=yes', 'ProtectSystem=strict', 'ProtectHome=yes', 'PrivateTmp=yes', 'CapabilityBoundingSet=',
                 'AmbientCapabilities=', 'SystemCallFilter=@system-service', 'SystemCallFilter=pidfd_getfd',
                 'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK', 'UMask=0077', 'DevicePolicy=closed',
                 'DeviceAllow=char-nvidia* rw', 'DeviceAllow=/dev/infiniband/rdma_cm rw', 'ReadOnlyPaths=/run',
                 'InaccessiblePaths=-/var/lib/llmops-sglang', 'InaccessiblePaths=-/etc/sglang', 'ProtectProc=invisible'):
        assert line in lines, (line, lines)
    # Off on purpose (docs/sandbox.md): the GPUs, JIT compilers and the router's reach need them off.
    for setting in ('PrivateDevices', 'MemoryDenyWriteExecute', 'PrivateUsers', 'PrivateNetwork', 'IPAddressDeny', 'ProcSubset'):
        assert not [line for line in lines if line.startswith(setting + '=')], (setting, lines)


def test_a_rank_above_zero_gets_the_same_sandbox():
    def settings(lines):
        return [line for line in lines if line[:1].isupper() and not line.startswith('TimeoutStopSec=')]

    first, other = settings(render({}, rank=0)), settings(render({}, rank=1))
    assert first == other and 'NoNewPrivileges=yes' in other


def test_an_override_replaces_adds_and_removes():
    lines = render({'ProtectClock': False, 'PrivateUsers': True, 'ProtectProc': None, 'DeviceAllow': ['/dev/nvidia0 rw'],
                    'ReadWritePaths': ['/data/hf-cache']})
    assert 'ProtectClock=no' in lines and 'ProtectClock=yes' not in lines
    assert 'PrivateUsers=yes' in lines
    assert not [line for line in lines if line.startswith('ProtectProc=')]
    assert [line for line in lines if line.startswith('DeviceAllow=')] == ['DeviceAllow=/dev/nvidia0 rw']
    writable = [line for line in lines if line.startswith('ReadWritePaths=')]
    assert writable == ['ReadWritePaths=/var/lib/sglang/k26', 'ReadWritePaths=/data/hf-cache']
