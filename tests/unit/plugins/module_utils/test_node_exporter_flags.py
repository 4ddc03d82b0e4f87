# -*- coding: utf-8 -*-
"""node_exporter's systemd collector flags for a host's SGLang units."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.node_exporter_flags import (
    args_conflict, exec_start_flags, unit_include)


def test_unit_include_names_each_unit_once_without_backslashes():
    include = unit_include(['sglang-k26.service', 'sglang-k26', 'b.x@1.service'])
    assert include == '(b[.]x@1|sglang-k26)[.]service'
    assert '\\' not in include
    anchored = re.compile('^(?:%s)$' % include)  # as node_exporter anchors it
    assert anchored.match('sglang-k26.service') and anchored.match('b.x@1.service')
    assert not anchored.match('sglang-k26Xservice') and not anchored.match('ssh.service')


@pytest.mark.parametrize('bad', [[], ['a b'], ['x$(id)'], ['%i.service']])
def test_unit_include_refuses_what_is_no_unit(bad):
    with pytest.raises(ValueError):
        unit_include(bad)


def test_flags():
    assert exec_start_flags(['u']) == ('--collector.systemd --collector.systemd.enable-restarts-metrics '
                                       '--collector.systemd.unit-include=(u)[.]service')


def test_args_conflict_sees_the_operators_systemd_flags_only():
    assert args_conflict('') == [] and args_conflict('ARGS=""\n') == []
    assert args_conflict('ARGS="--collector.textfile.directory=/x --collector.systemdish"') == []
    assert args_conflict('# ARGS="--collector.systemd"\nARGS=""') == []
    for line in ('ARGS="--collector.systemd"', "ARGS='--no-collector.systemd'", 'ARGS="--collector.systemd.unit-include=a"',
                 'ARGS="-x --collector.systemd --y"'):
        assert args_conflict('# c\n' + line + '\n') == [line]
