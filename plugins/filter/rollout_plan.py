# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters through which playbooks/deploy_k26.yml applies the rollout plan of module_utils/rollout/rollout_plan.py, and
the server role its one decision per instance (sglang_decide)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The collection's module_utils are imported inside each filter: to find one filter of the collection, Ansible imports
# every filter file of it (plugins/loader.py Jinja2Loader), in every worker process (one per host and task); a
# filter pays only for what it calls (tests/unit/test_architecture.py).


def sglang_plan(wants, observed, secrets=None):
    """Filter: the role's rendered instances (unit -> want) + sglang_observe's result (+ the secrets' digests)
    -> unit -> plan."""
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.rollout_plan import plan_host
    return plan_host(dict(wants or {}), dict(observed or {}), dict(secrets or {}))


def sglang_decide(want, observed, unit, secret_digest=None, planned=None, restart_forbidden=False):
    """Filter: one instance's want + the role's sglang_observe result + its unit (+ the wanted secrets' digest, + the
    plan's {decision, observed}, + whether a restart is refused) -> {action, changes, restart, why, source, moved,
    verified, unit_known, rounds, refusals}."""
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.rollout_plan import decide
    try:
        return decide(dict(want or {}), dict(observed or {}), unit, secret_digest, dict(planned) if planned else None,
                      bool(restart_forbidden))
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def sglang_plan_route(plans):
    """Filter: a host's plans -> 'rollout', 'apply' or 'done'."""
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.rollout_plan import host_route
    return host_route(dict(plans or {}))


def sglang_plan_table(hosts, hostvars):
    """Filter: host names + hostvars -> the plan table's lines (k26_plan of each host), then a summary line."""
    from ansible_collections.llmops.sglang.plugins.module_utils.monitoring.fleet_report import format_table
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.rollout_plan import (
        COLUMNS,
        host_route,
        plan_rows,
        plan_summary,
        refused_units,
    )
    rows, routes, refused = [], [], 0
    for host in hosts:
        values = hostvars[host] if host in hostvars else {}
        plans = values.get('k26_plan')
        rows.extend(plan_rows(host, plans))
        if plans is not None:
            routes.append(host_route(plans))
            refused += 1 if refused_units(plans) else 0
    return format_table(rows, COLUMNS) + [plan_summary(routes, refused)]


def sglang_rollout_order(hosts, hostvars, serial):
    """Filter: the plan's hosts + hostvars (each one's k26_route and sglang_plan_desired) + k26_serial -> {hosts,
    batches, apply}: the hosts whose plan restarts in order and their batch sizes (multi-node groups whole), and the
    hosts changed in place without a restart."""
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.rollout_plan import hosts_by_route, rollout_order
    units = {}
    try:
        routes = hosts_by_route([(host, (hostvars[host] if host in hostvars else {}).get('k26_route'))
                                 for host in hosts])
        for host in routes['rollout']:
            nodes = []
            for want in (hostvars[host].get('sglang_plan_desired') or {}).values():
                nodes.extend(n for n in want.get('nodes') or [] if n not in nodes)
            units[host] = nodes
        order = rollout_order(routes['rollout'], units, serial)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))
    order['apply'] = routes['apply']
    return order


def _peer_facts(host, values):
    """What canary_peers.canary_baselines reads of one host's hostvars (the plan play's facts)."""
    from ansible_collections.llmops.sglang.plugins.module_utils.fleet_defaults import DEFAULT_INSTANCES
    from ansible_collections.llmops.sglang.plugins.module_utils.router.router_rotation import worker_url
    address = values.get('sglang_router_worker_address') or values.get('ansible_host') or host
    urls = dict(('%s.service' % instance.get('name'), worker_url(address, instance.get('port', 30000)))
                for instance in values.get('k26_instances') or DEFAULT_INSTANCES)
    return {'class': values.get('k26_box_class') or values.get('sglang_hardware_profile') or 'none',
            'plans': values.get('k26_plan') or {}, 'wants': values.get('sglang_plan_desired') or {},
            'observed': values.get('__k26_observed') or {}, 'listen': values.get('sglang_host'),
            'api_key': values.get('sglang_api_key') or None, 'url': urls}


def sglang_canary_baselines(rollout, hostvars, mode='peer'):
    """Filter: sglang_rollout_order's result + hostvars (+ k26_canary_baseline) -> {canary host: {unit: {host, url}
    or {why}}}: each canary instance's live baseline (module_utils/rollout/canary_peers.py)."""
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.canary_peers import canary_baselines
    order = list((rollout or {}).get('hosts') or [])
    first = ((rollout or {}).get('batches') or [0])[0]
    facts = dict((host, _peer_facts(host, hostvars[host] if host in hostvars else {})) for host in order)
    # only canaries the role will analyse (sglang_canary_analysis: canary, its default, or always)
    canaries = [host for host in order[:first]
                if (hostvars[host] if host in hostvars else {}).get('sglang_canary_analysis', 'canary') != 'never']
    try:
        return canary_baselines(canaries, order[first:], facts, mode)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def sglang_canary_baseline_lines(baselines):
    """Filter: sglang_canary_baselines' result -> what the plan prints of it."""
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.canary_peers import baseline_lines
    return baseline_lines(dict(baselines or {}))


class FilterModule(object):
    """llmops.sglang rollout plan."""

    def filters(self):
        return {
            'sglang_plan': sglang_plan,
            'sglang_decide': sglang_decide,
            'sglang_plan_route': sglang_plan_route,
            'sglang_plan_table': sglang_plan_table,
            'sglang_rollout_order': sglang_rollout_order,
            'sglang_canary_baselines': sglang_canary_baselines,
            'sglang_canary_baseline_lines': sglang_canary_baseline_lines,
        }
