# -*- coding: utf-8 -*-
"""The server role's input rules: each bad value gets one message naming the variable, the value and the rule."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
import yaml

from ansible_collections.llmops.sglang.plugins.filter.pins import sglang_pin
from ansible_collections.llmops.sglang.plugins.filter.role_inputs import sglang_fleet_instance_problems
from ansible_collections.llmops.sglang.plugins.module_utils.rollout.role_inputs import (
    fleet_instance_problems, instance_problems, server_problems,
)
from ansible_collections.llmops.sglang.plugins.module_utils.rollout.server_args import ServerArgsError, build_argv

from pathlib import Path

ROLE = Path(__file__).resolve().parents[4] / 'roles' / 'server'
RESERVED = yaml.safe_load((ROLE / 'vars' / 'main.yml').read_text())['__sglang_reserved_flags']


def good(**overrides):
    """The role's defaults (as the role renders them) with a model path: a valid set of inputs."""
    values = yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text())
    values.update({
        'sglang_launcher': ['/opt/sglang/venv/bin/python', '-m', 'sglang.launch_server'],
        'sglang_state_dir': '/var/lib/sglang/sglang',
        'sglang_compressed_tensors_version': sglang_pin('compressed-tensors'),
        'sglang_model_path': '/models/k26',
    })
    values.update(overrides)
    return values


def problems(**overrides):
    return server_problems(good(**overrides), RESERVED, None, 'gpu-01')


def test_the_defaults_with_a_model_path_are_valid():
    assert problems() == []


@pytest.mark.parametrize('name, value, fragment', [
    ('sglang_tp_size', 0, 'sglang_tp_size=0: expected an integer >= 1'),
    ('sglang_port', 99999, 'sglang_port=99999: expected a TCP port, an integer from 1 to 65535'),
    ('sglang_port', '30x', "sglang_port='30x': expected a TCP port"),
    ('sglang_service_name', 'x.service', "sglang_service_name='x.service': expected the unit name without its suffix"),
    ('sglang_service_name', 'a/b', "sglang_service_name='a/b': expected a unit name"),
    ('sglang_model_path', '', "sglang_model_path='': must be set to start a server"),
    ('sglang_model_path', '/models/k26\nExecStartPre=/bin/evil', 'sglang_model_path='),
    ('sglang_state_dir', 'relative/dir', "sglang_state_dir='relative/dir': expected an absolute path"),
    ('sglang_user', 'Bad User', "sglang_user='Bad User': expected a system account name"),
    ('sglang_limit_nofile', 'lots', "sglang_limit_nofile='lots': expected a number"),
    ('sglang_compressed_tensors_version', '0.18 ; rm', 'sglang_compressed_tensors_version='),
    ('sglang_apt_proxy', 'http://p"; evil "', 'sglang_apt_proxy='),
    ('sglang_wait', {'timout': 5}, "unknown option 'timout'"),
    ('sglang_lock_wait', -1, 'sglang_lock_wait=-1'),
    ('sglang_canary_analysis', 'sometimes', "sglang_canary_analysis='sometimes': expected one of canary, always, never"),
    ('sglang_canary', {'round': 3}, "unknown option 'round'"),
    ('sglang_canary', {'rounds': 1}, 'rounds: expected an integer >= 2'),
    ('sglang_canary', {'thresholds': {'tpot': 0.5}}, 'thresholds.tpot: expected a ratio >= 1'),
    ('sglang_canary', {'prompts': [{'prompt': 'q', 'expect': 'Paris'}]}, 'prompts[0].expect: expected a list'),
    ('sglang_canary', {'baseline_url': 'gpu-02:30000'}, 'baseline_url: expected http(s)://HOST:PORT'),
    ('sglang_canary', {'timeout': 0}, 'timeout: expected seconds > 0'),
])
def test_one_bad_value_gets_exactly_one_message_naming_it(name, value, fragment):
    found = problems(**{name: value})
    assert len(found) == 1, found
    assert found[0].startswith(name) and fragment in found[0], found


def test_messages_name_only_the_rules_that_failed():
    found = problems(sglang_tp_size=0, sglang_port=99999)
    assert len(found) == 2
    assert not any('sglang_launcher' in p or 'sglang_state_dir' in p for p in found)


@pytest.mark.parametrize('args', [
    {'port': 1234}, {'--port': 1}, {'tp': 2}, {'tensor_parallel_size': 2}, {'nccl-init-addr': 'a:1'},
    {'model': '/x'}, {'api-key': 'k'},
])
def test_reserved_flags_and_their_aliases_in_server_args(args):
    found = problems(sglang_server_args=args)
    assert len(found) == 1 and found[0].startswith('sglang_server_args: ') and ' is set by sglang_' in found[0], found


@pytest.mark.parametrize('extra, owner', [
    (['--model-path', '/etc'], 'sglang_model_path'),
    (['--nccl-init-addr=10.0.0.1:5000'], 'sglang_multinode_group'),
    (['--tp', '4'], 'sglang_tp_size'),
    (['--api-key', 'sk-secret-value'], 'sglang_api_key'),
])
def test_reserved_flags_in_extra_args_too(extra, owner):
    found = problems(sglang_extra_args=extra)
    assert len(found) == 1 and found[0].startswith('sglang_extra_args[0]: ') and owner in found[0], found
    assert 'sk-secret-value' not in found[0]


def test_flag_names_are_named_not_a_template_error():
    found = problems(sglang_server_args={'bad flag!': 1})
    assert found == ["sglang_server_args: 'bad flag!' is not a flag name; expected lowercase words joined by dashes, "
                     "e.g. attention-backend"]


def test_ordinary_flags_and_values_with_line_breaks_pass():
    # A chat template may hold line breaks; systemd_exec_line quotes them, so the argv stays intact.
    assert problems(sglang_server_args={'mem-fraction-static': 0.9, 'chat-template': 'a\nb', 'model-impl': 'sglang',
                                        'port-range': None, 'hostname-x': None},
                    sglang_extra_args=['--tool-call-parser', 'kimi_k2']) == []


@pytest.mark.parametrize('name', ['sglang_api_key', 'sglang_hf_token'])
def test_a_secret_with_a_line_break_is_refused_and_masked(name):
    found = problems(**{name: 'sk-abc\nINJECTED=1'})
    assert found == ['%s=<hidden, 17 characters>: must not contain a line break or other control character '
                     '(it is written to an EnvironmentFile and sent as an HTTP header)' % name]


def test_env_names_and_values():
    assert problems(sglang_env={'BAD NAME': 1})[0].startswith("sglang_env: 'BAD NAME' is not an environment variable")
    assert problems(sglang_env={'A': 'x\ny'}) == ['sglang_env[A]: a value cannot contain a line break in an EnvironmentFile']


def test_multinode_rules():
    values = good(sglang_multinode_group='k26_tp16', sglang_host='127.0.0.1', sglang_dist_init_port=30000)
    found = server_problems(values, RESERVED, ['gpu-01', 'gpu-02'], 'gpu-03')
    assert [p.split('=', 1)[0] for p in found] == ['sglang_multinode_group', 'sglang_host', 'sglang_dist_init_port']
    assert server_problems(good(sglang_multinode_group='nope', sglang_host='10.0.0.1', sglang_api_key='k'), RESERVED, None,
                           'gpu-01') == [
        "sglang_multinode_group='nope': expected the name of an inventory group"]


def test_behind_routers_the_server_must_not_listen_on_loopback():
    found = problems(sglang_router_hosts=['router-01'], sglang_host='127.0.0.1')
    assert found == ["sglang_host='127.0.0.1': behind routers (sglang_router_hosts=['router-01']) the server must listen "
                     "on an address the routers reach (e.g. 0.0.0.0), not loopback"]
    assert problems(sglang_router_hosts=['router-01'], sglang_host='0.0.0.0', sglang_api_key='k') == []
    assert problems(sglang_router_hosts=[], sglang_host='127.0.0.1') == []
    assert [p.split('=', 1)[0] for p in problems(sglang_router_hosts='router-01')] == ['sglang_router_hosts']


def test_api_key_needs_a_python_m_launcher():
    found = problems(sglang_api_key='k', sglang_launcher=['/opt/v/bin/sglang', 'serve'])
    assert len(found) == 1 and found[0].startswith('sglang_launcher=') and '[python, -m, module]' in found[0]


KEYLESS = ("reachable from the network (not 127.0.0.0/8, ::1 or localhost) without a key: set sglang_api_key (then "
           "every endpoint but /health, /ready and /metrics needs it), or bind sglang_host to 127.0.0.1")


@pytest.mark.parametrize('host', ['0.0.0.0', '::', '', '10.0.0.5', '192.0.2.10', 'gpu-01.example', '::ffff:10.0.0.1',
                                  '[2001:db8::1]'])
def test_a_server_reachable_from_the_network_needs_a_key(host):
    found = problems(sglang_host=host)
    assert "sglang_host=%r: %s" % (host, KEYLESS) in found
    assert 'sglang_host' in found[-1] and 'sglang_api_key' in found[-1]
    assert [p for p in problems(sglang_host=host, sglang_api_key='sk-x') if 'without a key' in p] == []


@pytest.mark.parametrize('host', ['127.0.0.1', '127.0.0.2', '127.255.255.254', '::1', '[::1]', 'localhost', 'LOCALHOST'])
def test_loopback_needs_no_key(host):
    assert [p for p in problems(sglang_host=host) if 'without a key' in p] == []


@pytest.mark.parametrize('state', ['stopped', 'absent'])
def test_a_server_that_is_not_started_is_not_refused_for_its_host(state):
    # stopping an open server must stay possible; only a start binds the address
    assert [p for p in problems(sglang_host='0.0.0.0', sglang_state=state) if 'without a key' in p] == []


def test_the_secret_args_take_exactly_the_secret_flags():
    assert problems(sglang_secret_args={'admin-api-key': 'sk-admin', '--ssl-keyfile-password': 'pw',
                                        'watermark_config': {'key': 'k1'}}) == []
    assert problems(sglang_secret_args={'admin-api-key': '', 'ssl-keyfile-password': None}) == []
    found = problems(sglang_secret_args={'tp-size': 'x'})
    assert found == ["sglang_secret_args: 'tp-size' is not a secret flag of SGLang 0.5.23; expected one of "
                     "admin-api-key, ssl-keyfile-password, watermark-config (every other flag goes in sglang_server_args)"]
    assert problems(sglang_secret_args={'api-key': 'sk'}) == [
        "sglang_secret_args: 'api-key' (--api-key) is set by sglang_api_key; set it there instead"]
    # an abbreviation is not a name here: the role writes the exact field
    assert 'is not a secret flag' in problems(sglang_secret_args={'admin-api': 'sk'})[0]
    assert 'the same flag' in problems(sglang_secret_args={'admin-api-key': 'a', 'admin_api_key': 'b'})[0]
    assert problems(sglang_secret_args=['admin-api-key']) == [
        'sglang_secret_args must be a dict of flag: secret value, got list']
    assert "expected a string, got bool" in problems(sglang_secret_args={'admin-api-key': True})[0]


def test_a_secret_arg_with_a_line_break_is_refused_and_masked():
    found = problems(sglang_secret_args={'admin-api-key': 'sk-top\nsecret'})
    assert len(found) == 1 and 'sk-top' not in found[0] and 'secret' not in found[0].replace('sglang_secret_args', '')
    assert found[0].startswith("sglang_secret_args['admin-api-key']=<hidden, 13 characters>: must not contain a line break")


def test_secret_args_need_a_python_m_launcher_too():
    found = problems(sglang_secret_args={'admin-api-key': 'sk'}, sglang_launcher=['/opt/v/bin/sglang', 'serve'])
    assert len(found) == 1 and found[0].startswith('sglang_launcher=') and 'sglang_secret_args' in found[0]


@pytest.mark.parametrize('args, extra, named', [
    ({'admin-api-key': 'sk-1'}, [], "sglang_server_args['admin-api-key']: --admin-api-key takes a secret"),
    ({'admin_api_key': 'sk-1'}, [], "sglang_server_args['admin_api_key']: --admin-api-key takes a secret"),
    ({'admin-api': 'sk-1'}, [], "--admin-api (a prefix of --admin-api-key, which argparse takes for it) takes a secret"),
    ({'ssl-keyfile-password': 'sk-1'}, [], "set it in sglang_secret_args['ssl-keyfile-password']"),
    ({'watermark-config': '{"key": "sk-1"}'}, [], "set it in sglang_secret_args['watermark-config']"),
    ({}, ['--admin-api-key', 'sk-1'], "sglang_extra_args[0]: --admin-api-key takes a secret"),
    ({}, ['--trust-remote-code', '--admin-api-key=sk-1'], "sglang_extra_args[1]: --admin-api-key takes a secret"),
    ({}, ['--ssl-keyfile-pass=sk-1'], "--ssl-keyfile-pass (a prefix of --ssl-keyfile-password, which argparse takes for it)"),
])
def test_secret_flags_in_server_or_extra_args_are_refused_naming_the_variable(args, extra, named):
    found = problems(sglang_server_args=args, sglang_extra_args=extra)
    assert len(found) == 1 and named in found[0] and 'sglang_secret_args' in found[0], found
    assert 'sk-1' not in found[0]


def test_inline_storage_credentials_are_refused_a_file_is_not():
    creds = {'endpoint': 'http://s3:8333', 'access_key': 'AKIA1', 'secret_key': 'sk-1'}
    found = problems(sglang_server_args={'hicache-storage-backend-extra-config': creds})
    assert len(found) == 1 and 'access_key, secret_key' in found[0] and "'@/path/to/config.json'" in found[0]
    assert 'AKIA1' not in found[0] and 'sk-1' not in found[0]
    import json
    found = problems(sglang_extra_args=['--hicache-storage-backend-extra-config', json.dumps(creds)])
    assert len(found) == 1 and found[0].startswith('sglang_extra_args[0]') and 'sk-1' not in found[0]
    assert problems(sglang_server_args={'hicache-storage-backend-extra-config': '@/etc/sglang/hicache.json'}) == []
    assert problems(sglang_server_args={'hicache-storage-backend-extra-config': {'endpoint': 'http://s3:8333'}}) == []


def test_ssl_keyfile_itself_is_an_ordinary_flag():
    assert problems(sglang_server_args={'ssl-keyfile': '/etc/ssl/k.pem', 'ssl-certfile': '/etc/ssl/c.pem'}) == []


def test_build_argv_refuses_reserved_prefixes_and_keeps_others():
    with pytest.raises(ServerArgsError, match='sglang_tp_size'):
        build_argv({}, ['--tp-s', '8'], RESERVED)
    assert build_argv({}, ['--mem-fraction-static', '0.9', '--', '-x'], RESERVED) == [
        '--mem-fraction-static', '0.9', '--', '-x']


def test_instances_unique_names_and_ports():
    found = instance_problems([{'name': 'a', 'port': 30000}, {'name': 'b', 'port': 30000}, {'name': 'a', 'port': 30001}])
    assert found == [
        "k26_instances[1].port=30000: is also the port of k26_instances[0] (a); each instance on a host needs its own port",
        "k26_instances[2].name='a': is also k26_instances[0].name; each instance on a host needs its own name",
    ]


def test_instances_shape():
    assert instance_problems([{'name': 'a.service', 'port': 0, 'extra': 1}]) == [
        "k26_instances[0]='a.service': unknown key 'extra'; expected some of name, port, server_args, env, extra_args, "
        "served_model_name, state",
        "k26_instances[0].name='a.service': expected the unit name without its suffix (the role appends \".service\"), e.g. 'a'",
        'k26_instances[0].port=0: expected a TCP port, an integer from 1 to 65535',
    ]
    assert instance_problems([]) == ["k26_instances=[]: expected a non-empty list of {name, port, ...}"]
    assert instance_problems([{'name': 'a', 'port': '30000'}]) == []


ONE_PORT = [{'name': 'a', 'port': 30000}, {'name': 'b', 'port': 30000}]
ONE_PORT_TEXT = "k26_instances[1].port=30000: is also the port of k26_instances[0] (a); each instance on a host needs its own port"


def test_the_fleet_with_one_list_reads_as_one_host():
    # every host with the same list (a group or extra variable): the messages of that list, named as on one host
    assert fleet_instance_problems({'h1': ONE_PORT, 'h2': list(ONE_PORT), 'h3': ONE_PORT}) == [ONE_PORT_TEXT]
    assert fleet_instance_problems({'h1': [{'name': 'a', 'port': 1}], 'h2': [{'name': 'a', 'port': 1}]}) == []
    assert fleet_instance_problems({}) == []


def test_the_fleet_with_several_lists_names_the_hosts_of_each_bad_one():
    good = [{'name': 'a', 'port': 30000}]
    hosts = dict(('h%d' % i, ONE_PORT) for i in range(5))
    hosts.update({'g1': good, 'e1': []})
    assert fleet_instance_problems(hosts) == [
        'on h0, h1, h2 (and 2 more): ' + ONE_PORT_TEXT,
        'on e1: k26_instances=[]: expected a non-empty list of {name, port, ...}',
    ]


def test_the_fleet_filter_reads_each_host_and_falls_back_to_the_default():
    hostvars = {'h1': {'k26_instances': ONE_PORT}, 'h2': {}, 'h3': {'k26_instances': [{'name': 'x', 'port': 0}]}}
    assert sglang_fleet_instance_problems(['h2'], hostvars) == []  # the default: one sglang-k26 on 30000
    assert sglang_fleet_instance_problems(['h1', 'h2', 'h3'], hostvars) == [
        'on h1: ' + ONE_PORT_TEXT,
        'on h3: k26_instances[0].port=0: expected a TCP port, an integer from 1 to 65535',
    ]
    # only the run's hosts are read
    assert sglang_fleet_instance_problems(['h2'], dict(hostvars, h1=None)) == []


SHA = 'c' * 64
SYNC = {'sglang_model_source': {'version': 'k26-a', 'mirror': 'http://10.0.0.1:8080/k26'},
        'sglang_model_manifest': {'model-00001-of-00001.safetensors': {'size': 10, 'sha256': SHA}}}


def test_a_model_source_with_a_full_manifest_is_valid():
    assert problems(**SYNC) == []
    assert problems(sglang_model_source={}) == []


@pytest.mark.parametrize('source, manifest, fragment', [
    ({'mirror': 'http://m/'}, None, 'sglang_model_source.version=None: expected a directory name'),
    ({'version': '.hidden', 'mirror': 'http://m/'}, None, "sglang_model_source.version='.hidden'"),
    ({'version': 'v', 'mirror': 'ftp://m/'}, None, 'expected an http:// or https:// URL'),
    ({'version': 'v', 'mirror': 'http://m/', 'bogus': 1}, None, "unknown key 'bogus'"),
    ({'version': 'v', 'mirror': 'http://m/', 'versions_dir': 'rel'}, None, 'sglang_model_source.versions_dir'),
    ({'version': 'v', 'peers': []}, None, 'needs a mirror, or peers'),
    ({'version': 'v', 'mirror': 'http://m/', 'peer_wait': -1}, None, 'sglang_model_source.peer_wait=-1'),
    ({'version': 'v', 'mirror': 'http://m/', 'ssh_user': 'root'}, None, "sglang_model_source.ssh_user='root': expected the model sync account"),
    ({'version': 'v', 'mirror': 'http://m/', 'ssh_user': 'sglang'}, None, "sglang_model_source.ssh_user='sglang'"),
    ({'version': 'v', 'mirror': 'http://m/', 'ssh_options': ['-o', 'StrictHostKeyChecking=accept-new']}, None,
     'sglang_model_source.ssh_options=[\'-o\', \'StrictHostKeyChecking=accept-new\']: \'StrictHostKeyChecking=accept-new\': host key checking is fixed'),
    ({'version': 'v', 'mirror': 'http://m/', 'known_hosts': ['gpu-01 ssh-ed25519']}, None, "sglang_model_source.known_hosts='gpu-01 ssh-ed25519'"),
    ({'version': 'v', 'mirror': 'http://m/', 'known_hosts': 'gpu-01'}, None, 'sglang_model_source.known_hosts'),
    ({'version': 'v', 'mirror': 'http://m/', 'host_keys_from_ansible': 'yes'}, None, 'sglang_model_source.host_keys_from_ansible'),
    ({'version': 'v', 'mirror': 'http://m/'}, {}, 'sglang_model_manifest must list the checkpoint'),
    ({'version': 'v', 'mirror': 'http://m/'}, {'a': {'size': 3}}, "sglang_model_manifest['a'] needs both size and sha256"),
])
def test_bad_model_source_is_named(source, manifest, fragment):
    values = dict(SYNC)
    values['sglang_model_source'] = source
    if manifest is not None:
        values['sglang_model_manifest'] = manifest
    found = problems(**values)
    assert len(found) == 1 and fragment in found[0], found
