# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that list what is wrong with the server role's inputs and k26_instances (logic in module_utils/rollout/role_inputs.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The collection's module_utils are imported inside each filter: to find one filter of the collection, Ansible imports
# every filter file of it (plugins/loader.py Jinja2Loader), in every worker process (one per host and task); a
# filter pays only for what it calls (tests/unit/test_architecture.py).


def sglang_input_problems(values, reserved=None, groups=None, inventory_hostname=None):
    """Filter: the role's variables by name -> one message per failed rule (empty list: all good)."""
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.role_inputs import server_problems
    if not isinstance(values, dict):
        raise AnsibleFilterError('sglang_input_problems expects a dict of the role\'s variables, got %s' % type(values).__name__)
    group = values.get('sglang_multinode_group') or ''
    group_hosts = None
    if isinstance(group, str) and group and isinstance(groups, dict) and group in groups:
        group_hosts = list(groups[group])
    return server_problems(values, reserved or {}, group_hosts, inventory_hostname)


def sglang_instance_problems(instances, where='k26_instances'):
    """Filter: a rollout's instance list -> one message per failed rule (empty list: all good)."""
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.role_inputs import instance_problems
    return instance_problems(instances, where)


def sglang_fleet_instance_problems(hosts, hostvars):
    """Filter: the run's hosts + hostvars -> the messages of every failed rule on their instance lists (each host's
    k26_instances, else the collection's default), each distinct list judged once (empty list: all good)."""
    from ansible_collections.llmops.sglang.plugins.module_utils.fleet_defaults import default
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.role_inputs import fleet_instance_problems
    fallback = default('k26_instances')
    per_host = {}
    for host in hosts or []:
        values = hostvars[host]
        per_host[host] = values['k26_instances'] if 'k26_instances' in values else fallback
    return fleet_instance_problems(per_host)


class FilterModule(object):
    """llmops.sglang input checks."""

    def filters(self):
        return {
            'sglang_input_problems': sglang_input_problems,
            'sglang_instance_problems': sglang_instance_problems,
            'sglang_fleet_instance_problems': sglang_fleet_instance_problems,
        }
