# -*- coding: utf-8 -*-
"""Whose prometheus.yml it is, and what an operator's lacks (module_utils/monitoring/prometheus_config.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import os

import pytest
import yaml

from ansible_collections.llmops.sglang.plugins.module_utils.monitoring import prometheus_config as pc

HERE = os.path.dirname(os.path.abspath(__file__))
# Debian 12's packaged /etc/prometheus/prometheus.yml (prometheus 2.42.0+ds-5+deb12u1, from the .deb) and the md5 dpkg
# records for it (dpkg-query --showformat='${Conffiles}' prometheus on a fleet host).
with open(os.path.join(HERE, 'fixtures', 'debian-prometheus-2.42.0+ds-5+deb12u1.yml.orig'), 'rb') as _handle:
    DEBIAN = _handle.read()
DEBIAN_MD5 = '4fc5c1c94a4613d7a790ac4ed0b42070'
PATH = '/etc/prometheus/prometheus.yml'
NEEDS = pc.needs_of('/etc/prometheus', 'llmops-sglang.rules.yml', [])
DPKG = """prometheus installed
 /etc/default/prometheus 45c2bd19b810139320b45caed2e82c85
 /etc/prometheus/prometheus.yml 4fc5c1c94a4613d7a790ac4ed0b42070
prometheus-node-exporter installed
 /etc/default/prometheus-node-exporter 45c2bd19b810139320b45caed2e82c85
"""
COMPLETE = b"""# an operator's
global: {scrape_interval: 5s}
rule_files: ["rules/*.yml", "/srv/other/*.rules"]
scrape_configs:
  - job_name: other
    static_configs: [{targets: ["db-01:9187"]}]
  - job_name: node
    static_configs: [{targets: ["localhost:9100"]}]
    file_sd_configs: [{files: ["/etc/prometheus/file_sd/llmops-sglang-node.json"]}]
  - job_name: sglang
    file_sd_configs: [{files: ["file_sd/*-sglang.json"]}]
  - job_name: router
    file_sd_configs: [{files: ["/etc/prometheus/file_sd/llmops-sglang-router.json"]}]
"""


def judge(data, packaged=DEBIAN_MD5, needs=None, exists=True):
    needs = NEEDS if needs is None else needs
    content = base64.b64encode(data).decode() if data is not None else None
    return pc.judge(content, exists, PATH, packaged, needs, yaml.safe_load)


def test_dpkg_state_reads_installed_packages_and_conffile_md5s():
    state = pc.dpkg_state(DPKG + 'other deinstall\n')
    assert state['installed'] == {'prometheus': True, 'prometheus-node-exporter': True, 'other': False}
    assert state['conffiles'][PATH] == DEBIAN_MD5


def test_absent_file_is_written():
    verdict = judge(None, exists=False)
    assert (verdict['action'], verdict['owner']) == ('write', 'none')


def test_debians_packaged_default_unedited_is_written_whole():
    verdict = judge(DEBIAN)
    assert (verdict['action'], verdict['owner']) == ('write', 'debian'), verdict
    assert DEBIAN_MD5 in verdict['msg']


def test_debians_default_with_one_byte_changed_is_the_operators():
    verdict = judge(DEBIAN.replace(b'15s', b'30s', 1))
    assert (verdict['action'], verdict['owner']) == ('refuse', 'operator'), verdict
    # not even Debian's own default has what the role needs: its "node" job exists but reads no target file
    assert "scrape job 'node' does not read /etc/prometheus/file_sd/llmops-sglang-node.json" in verdict['msg']
    assert 'no scrape job \'sglang\' reads' in verdict['msg']


def test_without_a_packaged_md5_the_default_is_not_recognised():
    assert judge(DEBIAN, packaged=None)['owner'] == 'operator'


def test_the_roles_own_file_is_written_until_someone_edits_it():
    text = pc.owned_text('global:\n  scrape_interval: 15s\nrule_files: ["/etc/prometheus/rules/*.yml"]\n')
    assert text.startswith(pc.OWNED_MARK)
    assert (judge(text.encode())['owner']) == 'role'
    edited = judge(text.replace('15s', '5s').encode())
    assert edited['owner'] == 'operator' and edited['action'] == 'refuse', edited
    # a forged mark with the wrong digest is not the role's either
    forged = text.replace(text.split('sha256 of the lines below: ')[1][:64], '0' * 64)
    assert judge(forged.encode())['owner'] == 'operator'


def test_an_operators_complete_file_is_kept():
    verdict = judge(COMPLETE)
    assert (verdict['action'], verdict['owner'], verdict['missing']) == ('keep', 'operator', []), verdict
    assert 'monitoring_scrape_interval' in verdict['msg']


def test_an_operators_file_missing_things_is_refused_with_the_yaml_to_add():
    data = b"""rule_files: ["/etc/prometheus/rules/*.rules"]
scrape_configs:
  - job_name: other
    static_configs: [{targets: ["db-01:9187"]}]
  - job_name: node
    static_configs: [{targets: ["localhost:9100"]}]
  - job_name: fleet
    file_sd_configs: [{files: ["/etc/prometheus/file_sd/llmops-sglang-sglang.json"]}]
"""
    verdict = judge(data, needs=pc.needs_of('/etc/prometheus', 'llmops-sglang.rules.yml', ['am-01:9093']))
    assert verdict['action'] == 'refuse'
    assert verdict['missing'] == [
        'rule_files has no pattern matching /etc/prometheus/rules/llmops-sglang.rules.yml',
        "scrape job 'node' does not read /etc/prometheus/file_sd/llmops-sglang-node.json",
        "no scrape job 'router' reads /etc/prometheus/file_sd/llmops-sglang-router.json",
        "no scrape job 'sglang' reads /etc/prometheus/file_sd/llmops-sglang-sglang.json (job fleet reads it, but the "
        'rules and the dashboard select job="sglang")',
        'alerting does not send to am-01:9093 (monitoring_alertmanagers)']
    # the snippet is YAML: the new top-level blocks parse, and merged into the file they complete it
    snippet = verdict['snippet']
    blocks = yaml.safe_load(snippet.split('# in the existing')[0])
    assert blocks['rule_files'] == ['/etc/prometheus/rules/*.yml']
    assert [j['job_name'] for j in blocks['scrape_configs']] == ['router', 'sglang']
    assert blocks['alerting']['alertmanagers'][0]['static_configs'][0]['targets'] == ['am-01:9093']
    config = yaml.safe_load(data)
    config['rule_files'] += blocks['rule_files']
    config['scrape_configs'] += blocks['scrape_configs']
    config['scrape_configs'][1]['file_sd_configs'] = [{'files': ['/etc/prometheus/file_sd/llmops-sglang-node.json']}]
    config['alerting'] = blocks['alerting']
    assert judge(yaml.safe_dump(config).encode(), needs=pc.needs_of('/etc/prometheus', 'llmops-sglang.rules.yml', ['am-01:9093']))['action'] == 'keep'


@pytest.mark.parametrize('pattern,matches', [
    ('/etc/prometheus/rules/*.yml', True),
    ('rules/*.yml', True),                      # relative to prometheus.yml's directory
    ('/etc/prometheus/rules/llmops-*', True),
    ('/etc/prometheus/*.yml', False),           # a '*' never crosses a '/'
    ('/etc/prometheus/*/*.yml', True),
    ('/etc/prometheus/rules/*.yaml', False),
])
def test_rule_file_patterns_match_as_prometheus_globs_them(pattern, matches):
    config = {'rule_files': [pattern], 'scrape_configs': []}
    lacks = [what for what, _where, _text in pc.missing(config, NEEDS, '/etc/prometheus')]
    assert (not any(what.startswith('rule_files') for what in lacks)) is matches


@pytest.mark.parametrize('data,why', [
    (b'scrape_configs: [\n', 'does not parse as YAML'),
    (b'- a list\n', 'not a YAML mapping'),
    (b'\xff\xfe', 'does not parse as YAML'),
])
def test_an_unreadable_file_is_refused_not_overwritten(data, why):
    verdict = judge(data)
    assert verdict['action'] == 'refuse' and why in verdict['msg'], verdict
