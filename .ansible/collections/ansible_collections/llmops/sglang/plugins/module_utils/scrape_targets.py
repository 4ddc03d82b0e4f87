# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus file_sd target groups for an SGLang fleet. Pure logic, no I/O.

Jobs: ``sglang`` (each instance's /metrics, served with --enable-metrics and exempt from the API key),
``node`` (node_exporter on each host, which also serves the role's deployment metrics from its textfile
collector) and ``router`` (the router's metrics endpoints, when the operator lists any). Every group carries a
``host`` label (the inventory name); SGLang groups also the systemd ``unit``, so server metrics, node metrics and
deployment metrics join on ``host`` and ``unit``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

JOBS = ('sglang', 'node', 'router')
_NAME_RE = re.compile(r'^[A-Za-z0-9:_.@-]+$')
SKIPPED_STATES = ('stopped', 'absent')


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
    addr = str(values.get('ansible_host') or host)
    return '[%s]' % addr if ':' in addr and not addr.startswith('[') else addr


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


def file_sd_groups(hosts, hostvars, default_instances, node_exporter_port=9100, router_targets=None):
    """{job: [{targets: [host:port], labels: {...}}]} for the hosts (inventory names) and their hostvars."""
    node_port = _port(node_exporter_port, 'monitoring_node_exporter_port')
    groups = dict((job, []) for job in JOBS)
    for host in hosts:
        values = hostvars[host] if host in hostvars else {}
        addr = address(host, values)
        for unit, port in instances_of(host, values, default_instances):
            groups['sglang'].append({'targets': ['%s:%d' % (addr, port)], 'labels': {'host': host, 'unit': unit}})
        groups['node'].append({'targets': ['%s:%d' % (addr, node_port)], 'labels': {'host': host}})
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
        groups['router'].append({'targets': [router['target']], 'labels': dict((str(k), str(v)) for k, v in labels.items())})
    return groups
