# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the monitoring role: whose prometheus.yml it is and what it lacks, node_exporter's flags and the scrape
targets (logic in module_utils/monitoring/prometheus_config.py, node_exporter_flags.py and scrape_targets.py). The
deployment metrics' textfile is written by llmops.sglang.sglang_deploy_metrics."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.yaml import yaml_load

# The collection's module_utils are imported inside each filter: to find one filter of the collection, Ansible imports
# every filter file of it (plugins/loader.py Jinja2Loader), in every worker process (one per host and task); a
# filter pays only for what it calls (tests/unit/test_architecture.py).


def sglang_dpkg_state(text):
    """Filter: dpkg-query's Package/Status/Conffiles output -> {installed: {pkg: bool}, conffiles: {path: md5}}."""
    from ansible_collections.llmops.sglang.plugins.module_utils.monitoring import prometheus_config
    return prometheus_config.dpkg_state(text or '')


def sglang_prometheus_config(stat, slurped, dpkg, config_dir, rule_file_name, alertmanagers):
    """Filter: the stat and slurp of prometheus.yml, the dpkg state -> the role's verdict (write, keep, refuse)."""
    from ansible_collections.llmops.sglang.plugins.module_utils.monitoring import prometheus_config
    if not isinstance(stat, dict) or not isinstance(dpkg, dict):
        raise AnsibleFilterError('sglang_prometheus_config expects the stat result and sglang_dpkg_state')
    path = '%s/prometheus.yml' % str(config_dir).rstrip('/')
    exists = bool(stat.get('exists'))
    content = slurped.get('content') if isinstance(slurped, dict) else None
    needs = prometheus_config.needs_of(str(config_dir).rstrip('/'), rule_file_name, alertmanagers)
    try:
        return prometheus_config.judge(content, exists, path, dpkg.get('conffiles', {}).get(path), needs, yaml_load)
    except prometheus_config.ConfigError as exc:
        raise AnsibleFilterError(str(exc))


def sglang_prometheus_owned(body):
    """Filter: the role's prometheus.yml text -> the same with the mark that says the role wrote it whole."""
    from ansible_collections.llmops.sglang.plugins.module_utils.monitoring import prometheus_config
    return prometheus_config.owned_text(str(body))


def sglang_node_exporter_plan(defaults_text, textfile_dir, extra_flags, systemd_units=None):
    """Filter: /etc/default/prometheus-node-exporter's text -> {flags, problems} of the role's drop-in."""
    from ansible_collections.llmops.sglang.plugins.module_utils.monitoring import node_exporter_flags
    return node_exporter_flags.plan(defaults_text or '', textfile_dir, extra_flags,
                                    systemd_units=list(systemd_units) if systemd_units else None)


def sglang_node_exporter_dropin(flags):
    """Filter: the drop-in's flags -> its text."""
    from ansible_collections.llmops.sglang.plugins.module_utils.monitoring import node_exporter_flags
    return node_exporter_flags.dropin_text(list(flags))


def sglang_scrape_targets(hosts, hostvars, default_instances, node_exporter_port=9100, router_targets=None,
                          router_hosts=None, router_defaults=None, monitoring_host=None):
    """Filter: inventory host names -> {job: file_sd target groups, 'notes': [routers left out and why]}."""
    from ansible_collections.llmops.sglang.plugins.module_utils.monitoring.scrape_targets import (
        TargetsError,
        file_sd_groups,
    )
    try:
        return file_sd_groups(hosts, hostvars, default_instances, node_exporter_port, router_targets,
                              router_hosts, router_defaults, monitoring_host)
    except TargetsError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    """llmops.sglang monitoring configuration filters."""

    def filters(self):
        return {
            'sglang_dpkg_state': sglang_dpkg_state,
            'sglang_prometheus_config': sglang_prometheus_config,
            'sglang_prometheus_owned': sglang_prometheus_owned,
            'sglang_node_exporter_plan': sglang_node_exporter_plan,
            'sglang_node_exporter_dropin': sglang_node_exporter_dropin,
            'sglang_scrape_targets': sglang_scrape_targets,
        }
