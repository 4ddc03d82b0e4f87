# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus file_sd target groups for an SGLang fleet. Pure logic, no I/O.

Jobs: ``sglang`` (each instance's /metrics, served with --enable-metrics and exempt from the API key),
``node`` (node_exporter on each host, which also serves the role's deployment metrics from its textfile
collector) and ``router`` (the Prometheus endpoint of each sglang-router of the inventory's routers, from the router
role's own variables, plus any endpoint the operator lists). Every group carries a ``host`` label (the inventory
name); SGLang and router groups also the systemd ``unit``, so server metrics, node metrics and deployment metrics
join on ``host`` and ``unit``.

A router's endpoint is where the router role binds it (``router_prometheus_host``:``router_prometheus_port`` of the
router's host vars, else the router role's defaults): a wildcard (0.0.0.0, ::) is scraped at the router's address
(``ansible_host``), any other address as it is. On loopback (the router role's default, issue 22) only the router's
own host reaches it: scraped there when Prometheus runs on that very host, else left out with a note saying how to
make it reachable; a loopback address of another host is never a target (it would be Prometheus's own host).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.llmops.sglang.plugins.module_utils.rollout.role_inputs import is_loopback

JOBS = ('sglang', 'node', 'router')
_NAME_RE = re.compile(r'^[A-Za-z0-9:_.@-]+$')
SKIPPED_STATES = ('stopped', 'absent')
WILDCARDS = ('0.0.0.0', '::', '[::]', '')
# The router role's variables a target is made of (roles/router/defaults/main.yml gives their defaults).
ROUTER_VARIABLES = ('router_prometheus_host', 'router_prometheus_port', 'router_service_name')


class TargetsError(ValueError):
    pass


def _port(value, where):
    try:
        port = int(value)
    except (TypeError, ValueError):
        port = 0
    if isinstance(value, bool) or not 1 <= port <= 65535:
        raise TargetsError('%s must be a port number 1-65535, got %r' % (where, value))
    return port


def address(host, values):
    return _bracketed(str(values.get('ansible_host') or host))


def instances_of(host, values, default_instances):
    """The host's SGLang instances that should be serving: [(unit, port)]."""
    instances = values.get('k26_instances')
    if instances is None:
        instances = default_instances
    if not isinstance(instances, list):
        raise TargetsError('k26_instances of %s must be a list of {name, port}, got %r' % (host, instances))
    found = []
    for index, instance in enumerate(instances):
        where = 'k26_instances[%d] of %s' % (index, host)
        if not isinstance(instance, dict) or not instance.get('name'):
            raise TargetsError('%s must be a dict with name and port, got %r' % (where, instance))
        name = str(instance['name'])
        if not _NAME_RE.match(name):
            raise TargetsError('%s: name %r is not a systemd unit name' % (where, name))
        if str(instance.get('state') or values.get('sglang_state') or 'started') in SKIPPED_STATES:
            continue
        unit = name if name.endswith('.service') else name + '.service'
        found.append((unit, _port(instance.get('port', values.get('sglang_port', 30000)), where + '.port')))
    return found


def _bracketed(addr):
    return '[%s]' % addr if ':' in addr and not addr.startswith('[') else addr


def router_groups(router_hosts, hostvars, router_defaults, monitoring_host=None):
    """([file_sd groups], [notes]) for the routers (inventory names): where each one's Prometheus endpoint listens,
    from its host vars over the router role's defaults (``router_defaults``: ROUTER_VARIABLES by name)."""
    groups, notes = [], []
    defaults = router_defaults if isinstance(router_defaults, dict) else {}
    for router in router_hosts or []:
        values = hostvars[router] if router in hostvars else {}

        def get(name, values=values):
            value = values.get(name)
            return defaults.get(name) if value is None else value
        where = 'router_prometheus_port of %s' % router
        port = _port(get('router_prometheus_port'), where)
        listen = get('router_prometheus_host')
        if not isinstance(listen, str):
            raise TargetsError('router_prometheus_host of %s must be an address, got %r' % (router, listen))
        listen = listen.strip()
        service = str(get('router_service_name') or 'sglang-router')
        if is_loopback(listen):
            if router != monitoring_host:
                notes.append('router %s is not scraped: its Prometheus endpoint listens on %s:%d '
                             '(router_prometheus_host), which only %s itself reaches. To scrape it from %s, set '
                             'router_prometheus_host for %s to an address this host reaches (its own address, or '
                             '0.0.0.0 behind a firewall that lets only the monitoring host in: the endpoint has no '
                             'authentication) and run the router role again'
                             % (router, listen, port, router, monitoring_host or 'the monitoring host', router))
                continue
            addr = listen  # Prometheus runs on the router's own host
        elif listen.lower() in WILDCARDS:
            addr = address(router, values)
        else:
            addr = listen
        groups.append({'targets': ['%s:%d' % (_bracketed(addr), port)],
                       'labels': {'host': router, 'unit': service if service.endswith('.service') else service + '.service'}})
    return groups, notes


def file_sd_groups(hosts, hostvars, default_instances, node_exporter_port=9100, router_targets=None,
                   router_hosts=None, router_defaults=None, monitoring_host=None):
    """{job: [{targets: [host:port], labels: {...}}], 'notes': [...]} for the hosts (inventory names), the routers
    and their hostvars; 'notes' says which router is left out and why."""
    node_port = _port(node_exporter_port, 'monitoring_node_exporter_port')
    groups = dict((job, []) for job in JOBS)
    for host in hosts:
        values = hostvars[host] if host in hostvars else {}
        addr = address(host, values)
        for unit, port in instances_of(host, values, default_instances):
            groups['sglang'].append({'targets': ['%s:%d' % (addr, port)], 'labels': {'host': host, 'unit': unit}})
        groups['node'].append({'targets': ['%s:%d' % (addr, node_port)], 'labels': {'host': host}})
    groups['router'], notes = router_groups(router_hosts, hostvars, router_defaults, monitoring_host)
    listed = set(t for g in groups['router'] for t in g['targets'])
    for index, router in enumerate(router_targets or []):
        where = 'monitoring_router_targets[%d]' % index
        if isinstance(router, str):
            router = {'target': router}
        if not isinstance(router, dict) or not isinstance(router.get('target'), str) or ':' not in router['target']:
            raise TargetsError('%s must be "host:port" or {target: "host:port", labels: {...}}, got %r' % (where, router))
        _port(router['target'].rsplit(':', 1)[1], where + ' port')
        labels = router.get('labels') or {}
        if not isinstance(labels, dict):
            raise TargetsError('%s.labels must be a dict, got %r' % (where, labels))
        if router['target'] in listed:
            notes.append('%s (%s) is a router of the inventory already: listed once' % (where, router['target']))
            continue
        groups['router'].append({'targets': [router['target']], 'labels': dict((str(k), str(v)) for k, v in labels.items())})
    groups['notes'] = notes
    return groups
