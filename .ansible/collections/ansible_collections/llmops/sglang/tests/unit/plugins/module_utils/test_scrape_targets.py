# -*- coding: utf-8 -*-
"""Prometheus file_sd targets for the fleet."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.scrape_targets import TargetsError, file_sd_groups

DEFAULT = [{'name': 'sglang-k26', 'port': 30000}]


def test_instances_nodes_and_routers():
    hostvars = {
        'gpu-01': {'ansible_host': '10.0.0.1'},
        'gpu-02': {'ansible_host': 'fd00::2', 'k26_instances': [
            {'name': 'sglang-k26', 'port': 30000}, {'name': 'sglang-k26-ddtree', 'port': 30001},
            {'name': 'old', 'port': 30002, 'state': 'absent'}]},
        'gpu-03': {'sglang_state': 'stopped'},
    }
    groups = file_sd_groups(['gpu-01', 'gpu-02', 'gpu-03'], hostvars, DEFAULT, 9100, ['router-1:29000'])
    assert groups['sglang'] == [
        {'targets': ['10.0.0.1:30000'], 'labels': {'host': 'gpu-01', 'unit': 'sglang-k26.service'}},
        {'targets': ['[fd00::2]:30000'], 'labels': {'host': 'gpu-02', 'unit': 'sglang-k26.service'}},
        {'targets': ['[fd00::2]:30001'], 'labels': {'host': 'gpu-02', 'unit': 'sglang-k26-ddtree.service'}}]
    assert [g['targets'] for g in groups['node']] == [['10.0.0.1:9100'], ['[fd00::2]:9100'], ['gpu-03:9100']]
    assert groups['router'] == [{'targets': ['router-1:29000'], 'labels': {}}]


@pytest.mark.parametrize('hostvars,routers,node_port,message', [
    ({'h': {'k26_instances': {'name': 'x'}}}, [], 9100, 'k26_instances of h must be a list'),
    ({'h': {'k26_instances': [{'port': 1}]}}, [], 9100, r'k26_instances\[0\] of h must be a dict with name'),
    ({'h': {'k26_instances': [{'name': 'a b', 'port': 1}]}}, [], 9100, 'is not a systemd unit name'),
    ({'h': {'k26_instances': [{'name': 'a', 'port': 'x'}]}}, [], 9100, r'k26_instances\[0\] of h.port must be a port'),
    ({'h': {}}, [], 0, 'monitoring_node_exporter_port must be a port'),
    ({'h': {}}, ['nohost'], 9100, r'monitoring_router_targets\[0\] must be "host:port"'),
    ({'h': {}}, ['r:99999'], 9100, r'monitoring_router_targets\[0\] port must be a port'),
])
def test_bad_input_names_the_variable(hostvars, routers, node_port, message):
    with pytest.raises(TargetsError, match=message):
        file_sd_groups(['h'], hostvars, DEFAULT, node_port, routers)
