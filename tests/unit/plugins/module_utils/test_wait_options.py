# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The waiter's facts that must be written in more than one place agree: the module's documentation with the
argument spec and the machine's reasons, the server role's defaults and argument_specs text with the spec."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.llmops.sglang.plugins.module_utils.wait import wait_options
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_signatures import REDACTED, redact, secret_values
from ansible_collections.llmops.sglang.plugins.module_utils.wait.wait_machine import REASONS, Failure
from ansible_collections.llmops.sglang.plugins.modules import sglang_wait_ready as mod

ROLE = Path(__file__).resolve().parents[4] / 'roles' / 'server'
DOC = yaml.safe_load(mod.DOCUMENTATION)
RETURN = yaml.safe_load(mod.RETURN)


def test_the_documented_reasons_are_the_machines():
    first = RETURN['reason']['description'][1]
    assert first.startswith('One of ')
    assert tuple(re.findall(r'V\((\w+)\)', first)) == REASONS


def test_a_failure_takes_only_a_documented_reason():
    assert Failure('stalled', phase='weights', quiet=901.0).reason == 'stalled'
    with pytest.raises(ValueError, match="unknown failure reason 'unit_crashed'"):
        Failure('unit_crashed')


def test_the_spec_is_the_documentation():
    options = DOC['options']
    assert sorted(options) == sorted(wait_options.ARGUMENT_SPEC)
    for name, spec in wait_options.ARGUMENT_SPEC.items():
        doc = options[name]
        assert doc['type'] == spec['type'], name
        assert doc.get('default') == spec.get('default'), name
        assert doc.get('choices') == spec.get('choices'), name


def role_wait_defaults():
    return yaml.safe_load((ROLE / 'vars' / 'main.yml').read_text())['__sglang_wait_defaults']


def test_the_roles_wait_defaults_are_the_modules():
    """The role passes these four explicitly (the module_defaults of roles/server/tasks/main.yml), so they must be the module's own: an
    operator reading ansible-doc for the module learns what the role does."""
    defaults = role_wait_defaults()
    assert sorted(defaults) == ['max_restarts', 'probe', 'stall_timeout', 'timeout']
    for name, value in defaults.items():
        assert value == wait_options.ARGUMENT_SPEC[name]['default'], name


def test_the_roles_argument_specs_text_names_the_same_defaults():
    specs = yaml.safe_load((ROLE / 'meta' / 'argument_specs.yml').read_text())
    text = ' '.join(specs['argument_specs']['main']['options']['sglang_wait']['description'])
    named = dict(re.findall(r'C\((\w+)=([^)]+)\)', text))
    assert named == dict((name, str(value)) for name, value in role_wait_defaults().items())


def test_secret_headers_are_masked_with_the_api_key():
    values = secret_values('sk-key-1234', {'X-API-Key': 'k-5678', 'Cookie': 'session=abcd', 'X-Trace': 'trace-0001'})
    assert values == ['sk-key-1234', 'k-5678', 'session=abcd']
    line = redact('sent k-5678 and session=abcd and sk-key-1234 with trace-0001', values)
    assert line == 'sent %s and %s and %s with trace-0001' % (REDACTED, REDACTED, REDACTED)
    assert wait_options.secrets({'api_key': None, 'headers': {'Authorization': 'Bearer t-9999'}}) == [None, 'Bearer t-9999']


def spec_defaults(**changes):
    params = dict((name, spec.get('default')) for name, spec in wait_options.ARGUMENT_SPEC.items())
    params.update(changes)
    return params


def test_metrics_dir_needs_the_unit_and_an_absolute_path():
    assert wait_options.validate(spec_defaults(unit='sglang-k26.service', metrics_dir='/var/lib/prometheus/node-exporter')) == []
    assert wait_options.validate(spec_defaults(metrics_dir='/var/lib/prometheus/node-exporter')) == [
        'metrics_dir (the phase file is named after the unit) needs unit']
    assert wait_options.validate(spec_defaults(unit='sglang-k26.service', metrics_dir='node-exporter')) == [
        "metrics_dir must be an absolute path, e.g. /var/lib/prometheus/node-exporter (got 'node-exporter')"]
