# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for observability: the deployment-metrics textfile and Prometheus file_sd targets
(logic in module_utils/monitoring/deploy_metrics.py and module_utils/monitoring/scrape_targets.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.module_utils.monitoring.deploy_metrics import (
    file_name, marker_deadline_seconds, render, render_marker)
from ansible_collections.llmops.sglang.plugins.module_utils.monitoring.scrape_targets import TargetsError, file_sd_groups


def sglang_deploy_textfile(outcome, unit, now, config_checksum='', previous=''):
    """Filter: one unit's outcome (an entry of sglang_deployments) -> node_exporter textfile text."""
    if not isinstance(outcome, dict):
        raise AnsibleFilterError('sglang_deploy_textfile: expected the outcome dict of %s, got %r' % (unit, outcome))
    try:
        return render(unit, outcome, float(now), config_checksum or '', previous or '')
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError('sglang_deploy_textfile for %s: %s' % (unit, exc))


def sglang_deploy_marker(previous, unit, now, wait_timeout, stop_timeout, drain_timeout=0, reason='restart'):
    """Filter: the textfile's current text -> the same with the "deploying" marker of ``unit`` from ``now`` on."""
    try:
        seconds = marker_deadline_seconds(wait_timeout, stop_timeout, drain_timeout)
        return render_marker(unit, float(now), seconds, previous or '', reason)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError('sglang_deploy_marker for %s: %s' % (unit, exc))


def sglang_deploy_textfile_name(unit):
    """Filter: systemd unit -> its textfile name."""
    try:
        return file_name(unit)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def sglang_scrape_targets(hosts, hostvars, default_instances, node_exporter_port=9100, router_targets=None,
                          router_hosts=None, router_defaults=None, monitoring_host=None):
    """Filter: inventory host names -> {job: file_sd target groups, 'notes': [routers left out and why]}."""
    try:
        return file_sd_groups(hosts, hostvars, default_instances, node_exporter_port, router_targets,
                              router_hosts, router_defaults, monitoring_host)
    except TargetsError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    """llmops.sglang observability filters."""

    def filters(self):
        return {
            'sglang_deploy_marker': sglang_deploy_marker,
            'sglang_deploy_textfile': sglang_deploy_textfile,
            'sglang_deploy_textfile_name': sglang_deploy_textfile_name,
            'sglang_scrape_targets': sglang_scrape_targets,
        }
