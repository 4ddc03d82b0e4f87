# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the monitoring role: whose prometheus.yml it is and what it lacks, and node_exporter's flags
(logic in module_utils/monitoring/prometheus_config.py and module_utils/monitoring/node_exporter_flags.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.yaml import yaml_load

from ansible_collections.llmops.sglang.plugins.module_utils.monitoring import node_exporter_flags, prometheus_config


def sglang_dpkg_state(text):
    """Filter: dpkg-query's Package/Status/Conffiles output -> {installed: {pkg: bool}, conffiles: {path: md5}}."""
    return prometheus_config.dpkg_state(text or '')


def sglang_prometheus_config(stat, slurped, dpkg, config_dir, rule_file_name, alertmanagers):
    """Filter: the stat and slurp of prometheus.yml, the dpkg state -> the role's verdict (write, keep, refuse)."""
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
    return prometheus_config.owned_text(str(body))


def sglang_node_exporter_plan(defaults_text, textfile_dir, extra_flags, systemd_units=None):
    """Filter: /etc/default/prometheus-node-exporter's text -> {flags, problems} of the role's drop-in."""
    return node_exporter_flags.plan(defaults_text or '', textfile_dir, extra_flags,
                                    systemd_units=list(systemd_units) if systemd_units else None)


def sglang_node_exporter_dropin(flags):
    """Filter: the drop-in's flags -> its text."""
    return node_exporter_flags.dropin_text(list(flags))


class FilterModule(object):
    """llmops.sglang monitoring configuration filters."""

    def filters(self):
        return {
            'sglang_dpkg_state': sglang_dpkg_state,
            'sglang_prometheus_config': sglang_prometheus_config,
            'sglang_prometheus_owned': sglang_prometheus_owned,
            'sglang_node_exporter_plan': sglang_node_exporter_plan,
            'sglang_node_exporter_dropin': sglang_node_exporter_dropin,
        }
