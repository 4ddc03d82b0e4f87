# -*- coding: utf-8 -*-
"""The router role's input rules (module_utils/router/router_inputs.py): above all, no keyless router beyond loopback."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from pathlib import Path

import pytest
import yaml

from ansible_collections.llmops.sglang.plugins.filter.router import sglang_router_input_problems
from ansible_collections.llmops.sglang.plugins.module_utils.router.router_inputs import is_loopback, router_problems

ROLE = Path(__file__).resolve().parents[4] / 'roles' / 'router'
DEFAULTS = yaml.safe_load((ROLE / 'defaults' / 'main.yml').read_text())
VALIDATE = yaml.safe_load((ROLE / 'tasks' / 'validate.yml').read_text())
KEY = 'rk-0123456789abcdef'


def values(**overrides):
    out = dict(DEFAULTS)
    out.update(overrides)
    return out


def test_the_defaults_without_a_key_are_refused_naming_router_host_and_router_api_key():
    assert DEFAULTS['router_host'] == '0.0.0.0' and DEFAULTS['router_api_key'] == ''
    found = router_problems(values())
    assert len(found) == 1, found
    assert found[0].startswith("router_host='0.0.0.0': ")
    assert 'router_api_key' in found[0] and 'Set router_api_key' in found[0] and '127.0.0.1' in found[0]


def test_the_defaults_with_a_key_are_valid():
    assert router_problems(values(router_api_key=KEY)) == []


@pytest.mark.parametrize('host', ['127.0.0.1', '127.3.2.1', '::1', '[::1]', 'localhost', 'LOCALHOST',
                                  '::ffff:127.0.0.1'])
def test_loopback_without_a_key_is_allowed(host):
    assert is_loopback(host)
    assert router_problems(values(router_host=host)) == []


@pytest.mark.parametrize('host', ['0.0.0.0', '::', '10.0.0.5', 'fe80::1', 'router-01', 'router-01.example.com',
                                  '128.0.0.1', 'localhost.evil.example'])
def test_beyond_loopback_without_a_key_is_refused(host):
    assert not is_loopback(host)
    found = router_problems(values(router_host=host, router_api_key=''))
    assert [p for p in found if p.startswith('router_host=') and 'router_api_key' in p], found
    assert router_problems(values(router_host=host, router_api_key=None)) == found
    assert router_problems(values(router_host=host, router_api_key=KEY)) == []


def test_the_key_is_never_shown():
    found = router_problems(values(router_api_key='bad key\nwith a line break'))
    assert found == ['router_api_key=<hidden, 25 characters>: must not contain spaces, line breaks or other control '
                     'characters (it is sent as "Authorization: Bearer KEY")']


@pytest.mark.parametrize('args, flag', [
    (['--api-key', KEY], '--api-key'),
    (['--api-key=' + KEY], '--api-key'),
    (['--api-k', KEY], '--api-k'),  # argparse takes the abbreviation
    (['--control-plane-api-keys', 'k1:ops:admin:' + KEY], '--control-plane-api-keys'),
])
def test_secret_flags_in_extra_args_are_refused_without_showing_the_value(args, flag):
    found = router_problems(values(router_api_key=KEY, router_extra_args=args))
    assert len(found) == 1 and found[0].startswith('router_extra_args[0]: %s is not allowed' % flag), found
    assert KEY not in found[0]


@pytest.mark.parametrize('arg, variable', [
    ('--host', 'router_host'), ('--host=0.0.0.0', 'router_host'), ('--ho', 'router_host'),
    ('--port', 'router_port'), ('--prometheus-host', 'router_prometheus_host'),
    ('--prometheus-port', 'router_prometheus_port'), ('--policy', 'router_policy'), ('--log-level', 'router_log_level'),
    ('--worker-urls', 'router_worker_hosts'),
])
def test_flags_the_role_sets_are_refused_in_extra_args(arg, variable):
    # a --host in router_extra_args would come after the checked one and win: the loopback rule would be undone
    found = router_problems(values(router_host='127.0.0.1', router_extra_args=[arg, '0.0.0.0']))
    assert len(found) == 1 and found[0].startswith('router_extra_args[0]=%r' % arg) and variable in found[0], found


def test_other_extra_args_pass():
    extra = ['--max-concurrent-requests', '256', '--disable-retries']
    assert router_problems(values(router_api_key=KEY, router_extra_args=extra)) == []


@pytest.mark.parametrize('var', ['router_user', 'router_group'])
def test_the_router_never_runs_as_root(var):
    found = router_problems(values(router_api_key=KEY, **{var: 'root'}))
    assert len(found) == 1 and found[0].startswith("%s='root': the router must not run as root" % var), found
    found = router_problems(values(router_api_key=KEY, **{var: 'Bad User'}))
    assert len(found) == 1 and found[0].startswith(var + "='Bad User': expected a system account name"), found


def test_addresses_ports_and_choices():
    found = router_problems(values(router_api_key=KEY, router_port=70000, router_prometheus_port='30080x',
                                   router_prometheus_host='', router_policy='fastest', router_log_level='trace',
                                   router_service_name='sglang-router.service', router_venv='opt/venv'))
    names = sorted(p.split('=', 1)[0] for p in found)
    assert names == ['router_log_level', 'router_policy', 'router_port', 'router_prometheus_host',
                     'router_prometheus_port', 'router_service_name', 'router_venv'], found
    found = router_problems(values(router_api_key=KEY, router_prometheus_port=30080))
    assert found == ['router_prometheus_port=30080: must differ from router_port']


def test_a_host_with_spaces_is_refused_and_not_judged_for_loopback():
    found = router_problems(values(router_host='0.0.0.0 --api-key x'))
    assert len(found) == 1 and 'without spaces' in found[0], found


def test_the_filter_and_the_role_task_apply_the_same_rules():
    assert sglang_router_input_problems(values()) == router_problems(values())
    # validate.yml checks every variable the rules read (a name missing there would be judged as unset)
    names = VALIDATE[0]['vars']['__router_input_names']
    for var in ('router_host', 'router_api_key', 'router_user', 'router_group', 'router_extra_args',
                'router_prometheus_host', 'router_prometheus_port', 'router_port'):
        assert var in names, var
    assert VALIDATE[0].get('any_errors_fatal') is True
