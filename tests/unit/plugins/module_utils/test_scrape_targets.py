# -*- coding: utf-8 -*-
"""Prometheus file_sd targets for the fleet."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.monitoring.scrape_targets import TargetsError, file_sd_groups

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


ROUTER_DEFAULTS = {'router_prometheus_host': '127.0.0.1', 'router_prometheus_port': 29000, 'router_service_name': 'sglang-router'}


def test_routers_from_the_router_roles_variables():
    hostvars = {
        'rt-wild': {'ansible_host': '10.0.0.9', 'router_prometheus_host': '0.0.0.0'},
        'rt-addr': {'ansible_host': '10.0.0.8', 'router_prometheus_host': '192.168.5.8', 'router_prometheus_port': '29100',
                    'router_service_name': 'edge-router'},
        'rt-v6': {'ansible_host': 'fd00::7', 'router_prometheus_host': '::'},
        'rt-loop': {'ansible_host': '10.0.0.6'},             # the router role's default: loopback
        'mon': {'ansible_host': '10.0.0.5'},                 # a router on the monitoring host itself, on loopback
    }
    groups = file_sd_groups([], hostvars, DEFAULT, 9100, ['10.9.9.9:29000', '10.0.0.9:29000'],
                            ['rt-wild', 'rt-addr', 'rt-v6', 'rt-loop', 'mon'], ROUTER_DEFAULTS, 'mon')
    assert groups['router'] == [
        {'targets': ['10.0.0.9:29000'], 'labels': {'host': 'rt-wild', 'unit': 'sglang-router.service'}},
        {'targets': ['192.168.5.8:29100'], 'labels': {'host': 'rt-addr', 'unit': 'edge-router.service'}},
        {'targets': ['[fd00::7]:29000'], 'labels': {'host': 'rt-v6', 'unit': 'sglang-router.service'}},
        {'targets': ['127.0.0.1:29000'], 'labels': {'host': 'mon', 'unit': 'sglang-router.service'}},
        {'targets': ['10.9.9.9:29000'], 'labels': {}}]
    (loopback, listed) = groups['notes']
    assert loopback.startswith('router rt-loop is not scraped: its Prometheus endpoint listens on 127.0.0.1:29000 '
                               '(router_prometheus_host), which only rt-loop itself reaches')
    assert 'set router_prometheus_host for rt-loop to an address this host reaches' in loopback
    assert listed == 'monitoring_router_targets[1] (10.0.0.9:29000) is a router of the inventory already: listed once'


def test_a_loopback_router_is_never_a_target_of_another_host():
    for listen in ('127.0.0.1', 'localhost', '::1', '127.0.1.1'):
        groups = file_sd_groups([], {'r': {'router_prometheus_host': listen}}, DEFAULT, 9100, [], ['r'], ROUTER_DEFAULTS, 'mon')
        assert groups['router'] == [] and len(groups['notes']) == 1, listen


@pytest.mark.parametrize('values,message', [
    ({'router_prometheus_port': 0}, 'router_prometheus_port of r must be a port'),
    ({'router_prometheus_host': 5}, 'router_prometheus_host of r must be an address'),
])
def test_bad_router_variables_name_the_variable_and_router(values, message):
    with pytest.raises(TargetsError, match=message):
        file_sd_groups([], {'r': values}, DEFAULT, 9100, [], ['r'], ROUTER_DEFAULTS, 'mon')
