# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter that turns the hosts' deployment facts into the fleet report (logic in module_utils/monitoring/fleet_report.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The collection's module_utils are imported inside each filter: to find one filter of the collection, Ansible imports
# every filter file of it (plugins/loader.py Jinja2Loader), in every worker process (one per host and task); a
# filter pays only for what it calls (tests/unit/test_architecture.py).


def fleet_report(hosts, hostvars, rotation=None, groups=None):
    """Filter: host names + hostvars -> report lines (sglang_deployments, sglang_preflight and sglang_report_info);
    with ``rotation`` ({router: [urls] or None}, non-empty: there are routers) one more column, per worker whether
    each router has it in rotation (``groups``: the play's groups, to find rank 0 of a multi-node group)."""
    from ansible_collections.llmops.sglang.plugins.module_utils.monitoring.fleet_report import (
        COLUMNS,
        ROTATION_COLUMN,
        format_table,
        report_rows,
        with_rotation,
    )
    from ansible_collections.llmops.sglang.plugins.module_utils.router.router_rotation import fleet_workers
    rows = []
    hosts = list(hosts)
    for host in hosts:
        values = hostvars[host] if host in hostvars else {}
        rows.extend(report_rows(host, values.get('sglang_deployments'), values.get('sglang_report_info'),
                                values.get('sglang_preflight')))
    if not rotation:
        return format_table(rows)
    workers = fleet_workers(hosts, dict((h, hostvars[h] if h in hostvars else {}) for h in hosts), dict(groups or {}))
    return format_table(with_rotation(rows, workers, dict(rotation)), COLUMNS + (ROTATION_COLUMN,))


class FilterModule(object):
    """llmops.sglang report filter."""

    def filters(self):
        return {'fleet_report': fleet_report}
