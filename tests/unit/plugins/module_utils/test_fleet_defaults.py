# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/module_utils/fleet_defaults.py is the one home of the default instance list: everything else reads it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError
from ansible_collections.llmops.sglang.plugins.filter.fleet_defaults import sglang_default
from ansible_collections.llmops.sglang.plugins.module_utils import fleet_defaults
from ansible_collections.llmops.sglang.plugins.module_utils.router import router_rotation

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def load_yaml(*path):
    with open(os.path.join(ROOT, *path)) as handle:
        return yaml.safe_load(handle)


def test_the_filter_gives_a_copy_of_the_default():
    instances = sglang_default('k26_instances')
    assert instances == [{'name': 'sglang-k26', 'port': 30000}]
    instances[0]['port'] = 1
    assert sglang_default('k26_instances') == fleet_defaults.DEFAULT_INSTANCES == [{'name': 'sglang-k26', 'port': 30000}]


def test_an_unknown_name_has_no_default():
    with pytest.raises(AnsibleFilterError, match=r"sglang_default: no default for 'k26_hosts': the fleet defaults are k26_instances"):
        sglang_default('k26_hosts')


def test_the_router_workers_of_a_host_without_k26_instances_are_the_default():
    assert router_rotation.fleet_workers(['gpu-01'], {'gpu-01': {'ansible_host': '10.0.0.1'}}) == [
        {'host': 'gpu-01', 'instance': 'sglang-k26', 'url': 'http://10.0.0.1:30000'}]


def test_the_monitoring_argument_specs_default_text_is_the_default():
    specs = load_yaml('roles', 'monitoring', 'meta', 'argument_specs.yml')['argument_specs']
    documented = [entry['options']['monitoring_default_instances']['default'] for entry in specs.values()
                  if 'monitoring_default_instances' in entry.get('options', {})]
    assert len(documented) == 2 and all(value == fleet_defaults.DEFAULT_INSTANCES for value in documented)


def test_the_playbooks_and_the_monitoring_role_read_it_through_the_filter():
    assert (load_yaml('playbooks', 'vars', 'fleet.yml')['__k26_instances']
            == "{{ k26_instances | default('k26_instances' | llmops.sglang.sglang_default) }}")
    assert (load_yaml('roles', 'monitoring', 'defaults', 'main.yml')['monitoring_default_instances']
            == "{{ 'k26_instances' | llmops.sglang.sglang_default }}")
