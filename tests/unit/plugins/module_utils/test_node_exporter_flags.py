# -*- coding: utf-8 -*-
"""node_exporter's flags next to the operator's ARGS (module_utils/monitoring/node_exporter_flags.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import shlex

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.monitoring import node_exporter_flags as nef

DEBIAN_DEFAULTS = '# Set the command-line arguments to pass to the server.\n# ...\nARGS=""\n'
TEXTFILE = '/var/lib/prometheus/node-exporter'
SYSTEMD = ['--collector.systemd.enable-restarts-metrics', r'--collector.systemd.unit-include=(sglang-.*|sglang-router)\.service']


def test_debians_defaults_need_no_drop_in():
    assert nef.plan(DEBIAN_DEFAULTS, TEXTFILE, []) == {'flags': [], 'problems': []}
    assert nef.plan('', TEXTFILE + '/', []) == {'flags': [], 'problems': []}  # no ARGS file yet (fresh host)


def test_extra_flags_and_another_textfile_dir_go_into_the_drop_in():
    result = nef.plan(DEBIAN_DEFAULTS, '/srv/textfiles', SYSTEMD)
    assert result == {'flags': ['--collector.textfile.directory=/srv/textfiles'] + SYSTEMD, 'problems': []}


def test_the_drop_in_keeps_the_operators_args_and_passes_each_flag_exactly():
    text = nef.dropin_text(SYSTEMD + ['--web.telemetry-path=/m$x%i "q"'])
    line = [l for l in text.splitlines() if l.startswith('ExecStart=/')][0]
    assert line.startswith('ExecStart=/usr/bin/prometheus-node-exporter $ARGS "')
    assert '[Service]\nExecStart=\nExecStart=' in text
    # systemd: %% -> %, $$ -> $, then C-style unquoting inside the double quotes (shlex does the last part alike)
    words = shlex.split(line[len('ExecStart='):].replace('%%', '%').replace('$$', '$'))
    assert words[2:] == SYSTEMD + ['--web.telemetry-path=/m$x%i "q"']


@pytest.mark.parametrize('args', [
    'ARGS="--collector.systemd.enable-restarts-metrics"',
    "ARGS='--web.listen-address=:9100 --collector.systemd.enable-restarts-metrics'",
    'ARGS="--no-collector.systemd.enable-restarts-metrics"',
])
def test_a_flag_args_sets_already_is_refused(args):
    result = nef.plan(args + '\n', TEXTFILE, SYSTEMD[:1])
    assert result['flags'] == []
    (problem,) = result['problems']
    assert problem.startswith('monitoring_node_exporter_extra_flags[0]=') and 'already sets --collector.systemd.enable-restarts-metrics' in problem


@pytest.mark.parametrize('args,ok', [
    ('ARGS="--collector.textfile.directory=/var/lib/prometheus/node-exporter"', True),   # the old role's own line
    ('ARGS="--collector.textfile.directory /var/lib/prometheus/node-exporter/"', True),
    ('ARGS="--collector.textfile.directory=/srv/elsewhere"', False),
])
def test_an_args_textfile_directory_must_be_the_roles(args, ok):
    result = nef.plan(args, TEXTFILE, [])
    assert result['flags'] == []
    assert (result['problems'] == []) is ok, result
    if not ok:
        assert "monitoring_textfile_dir='/var/lib/prometheus/node-exporter': ARGS in /etc/default/prometheus-node-exporter reads" in result['problems'][0]


@pytest.mark.parametrize('flags,message', [
    ('--x', 'expected a list'),
    (['collector.systemd'], r'\[0\]=.*expected one node_exporter flag'),
    (['--a\n--b'], 'without line breaks'),
    (['--collector.textfile.directory=/x'], 'set monitoring_textfile_dir instead'),
    (['--collector.systemd', '--no-collector.systemd'], r'\[1\]=.*given twice'),
])
def test_bad_extra_flags_name_the_variable(flags, message):
    problems = nef.plan(DEBIAN_DEFAULTS, TEXTFILE, flags)['problems']
    assert len(problems) == 1
    assert problems[0].startswith('monitoring_node_exporter_extra_flags')
    assert __import__('re').search(message, problems[0]), problems


def test_unit_include_names_each_unit_once_without_backslashes():
    include = nef.unit_include(['sglang-k26.service', 'sglang-k26', 'b.x@1.service'])
    assert include == '(b[.]x@1|sglang-k26)[.]service'
    assert '\\' not in include
    anchored = re.compile('^(?:%s)$' % include)  # as node_exporter anchors it
    assert anchored.match('sglang-k26.service') and anchored.match('b.x@1.service')
    assert not anchored.match('sglang-k26Xservice') and not anchored.match('ssh.service')


@pytest.mark.parametrize('bad', [[], ['a b'], ['x$(id)'], ['%i.service']])
def test_unit_include_refuses_what_is_no_unit(bad):
    with pytest.raises(ValueError):
        nef.unit_include(bad)
    assert nef.plan(DEBIAN_DEFAULTS, TEXTFILE, [], systemd_units=bad)['problems'][0].startswith('monitoring_systemd_collector: ')


def test_the_systemd_collector_flags_go_into_the_same_drop_in():
    result = nef.plan(DEBIAN_DEFAULTS, '/srv/t', ['--web.max-requests=5'], systemd_units=['sglang-k26.service'])
    assert result == {'problems': [], 'flags': [
        '--collector.textfile.directory=/srv/t', '--collector.systemd.enable-restarts-metrics',
        '--collector.systemd.unit-include=(sglang-k26)[.]service', '--web.max-requests=5']}
    # the collector itself is on by default in 1.5: an operator's --collector.systemd is no conflict
    assert nef.plan('ARGS="--collector.systemd"', TEXTFILE, [], systemd_units=['u'])['problems'] == []


@pytest.mark.parametrize('args, word', [
    ('ARGS="--collector.systemd.unit-include=a"', 'unit-include'),
    ('ARGS="-x --collector.systemd.enable-restarts-metrics"', 'enable-restarts-metrics'),
    ('ARGS="--no-collector.systemd"', 'turns the systemd collector off'),
])
def test_args_that_set_the_systemd_flags_are_refused_with_the_way_out(args, word):
    problems = nef.plan(args, TEXTFILE, [], systemd_units=['u'])['problems']
    assert len(problems) == 1 and word in problems[0] and 'monitoring_systemd_collector: false' in problems[0]
    assert nef.plan(args, TEXTFILE, [], systemd_units=None)['problems'] == []  # collector off: nothing to refuse


def test_an_extra_flag_the_role_sets_for_the_collector_is_a_repeat():
    problems = nef.plan(DEBIAN_DEFAULTS, TEXTFILE, ['--collector.systemd.enable-restarts-metrics'], systemd_units=['u'])['problems']
    assert len(problems) == 1 and 'given twice' in problems[0]
