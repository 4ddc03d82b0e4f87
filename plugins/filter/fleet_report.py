# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter that turns the hosts' deployment facts into the fleet report (logic in module_utils/fleet_report.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.fleet_report import format_table, report_rows


def fleet_report(hosts, hostvars):
    """Filter: host names + hostvars -> report lines (sglang_deployments, sglang_preflight and sglang_report_info)."""
    rows = []
    for host in hosts:
        values = hostvars[host] if host in hostvars else {}
        rows.extend(report_rows(host, values.get('sglang_deployments'), values.get('sglang_report_info'),
                                values.get('sglang_preflight')))
    return format_table(rows)


class FilterModule(object):
    """llmops.sglang report filter."""

    def filters(self):
        return {'fleet_report': fleet_report}
