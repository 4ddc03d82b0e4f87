# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters through which the router role and the drain-aware rollout apply module_utils/router/router_rotation.py and
module_utils/router/router_inputs.py (the role's input rules)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The collection's module_utils are imported inside each filter: to find one filter of the collection, Ansible imports
# every filter file of it (plugins/loader.py Jinja2Loader), in every worker process (one per host and task); a
# filter pays only for what it calls (tests/unit/test_architecture.py).


def sglang_router_input_problems(values):
    """Filter: the router role's variables by name -> one message per failed rule (empty list: all good)."""
    from ansible_collections.llmops.sglang.plugins.module_utils.router.router_inputs import router_problems
    if not isinstance(values, dict):
        raise AnsibleFilterError('sglang_router_input_problems expects a dict of the role\'s variables, got %s'
                                 % type(values).__name__)
    return router_problems(values)


def sglang_router_fleet_workers(hosts, hostvars, groups=None):
    """Filter: the worker URLs routers route to, from the inventory ([{host, instance, url}])."""
    from ansible_collections.llmops.sglang.plugins.module_utils.router.router_rotation import fleet_workers
    return fleet_workers(list(hosts or []), hostvars, dict(groups or {}))


def sglang_in_flight(metrics_text):
    """Filter: running + queued requests from an SGLang /metrics text, or None."""
    from ansible_collections.llmops.sglang.plugins.module_utils.sglang_metrics import in_flight
    return in_flight(metrics_text)


def sglang_router_capacity(leaving, fleet_urls, in_rotation, min_serving=None):
    """Filter: the capacity guard's verdict {ok, serving, min_serving, msg}."""
    from ansible_collections.llmops.sglang.plugins.module_utils.router.router_rotation import capacity
    try:
        return capacity(list(fleet_urls or []), dict(in_rotation or {}), list(leaving or []), min_serving)
    except ValueError as err:
        raise AnsibleFilterError(str(err))


def sglang_router_rotation_report(workers, in_rotation):
    """Filter: the rotation report's lines."""
    from ansible_collections.llmops.sglang.plugins.module_utils.router.router_rotation import rotation_report
    return rotation_report(list(workers or []), dict(in_rotation or {}))


class FilterModule(object):
    """llmops.sglang router decisions."""

    def filters(self):
        return {
            "sglang_router_input_problems": sglang_router_input_problems,
            "sglang_router_fleet_workers": sglang_router_fleet_workers,
            "sglang_in_flight": sglang_in_flight,
            "sglang_router_capacity": sglang_router_capacity,
            "sglang_router_rotation_report": sglang_router_rotation_report,
        }
