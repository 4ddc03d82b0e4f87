# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugins/module_utils/pins.py is the one place for the SGLang release and its pins: everything else reads it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest
import yaml

from ansible.errors import AnsibleFilterError
from ansible_collections.llmops.sglang.plugins.filter.pins import sglang_pin
from ansible_collections.llmops.sglang.plugins.module_utils import pins, sglang_signatures

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
CT = pins.PINS['compressed-tensors']


def load_yaml(*path):
    with open(os.path.join(ROOT, *path)) as handle:
        return yaml.safe_load(handle)


def test_sglang_signatures_release_is_the_pins_release():
    assert sglang_signatures.RELEASE is pins.RELEASE
    assert pins.PINS['sglang'] == pins.RELEASE


def test_the_too_old_compressed_tensors_hint_names_the_pin():
    hint = next(sig.hint for sig in sglang_signatures.FATAL_SIGNATURES if sig.name == 'compressed_tensors_too_old')
    assert '%s pins compressed-tensors==%s' % (pins.RELEASE, CT) in hint


def test_the_role_default_reads_the_pin_through_the_filter():
    default = load_yaml('roles', 'server', 'defaults', 'main.yml')['sglang_compressed_tensors_version']
    assert default == "{{ 'compressed-tensors' | llmops.sglang.sglang_pin }}"
    assert sglang_pin('compressed-tensors') == CT


def test_the_argument_specs_default_text_is_the_pin():
    spec = load_yaml('roles', 'server', 'meta', 'argument_specs.yml')
    assert spec['argument_specs']['main']['options']['sglang_compressed_tensors_version']['default'] == CT


def test_an_unknown_package_has_no_pin():
    with pytest.raises(AnsibleFilterError, match=r"sglang_pin: no pin for 'torch': pinned packages are compressed-tensors, sglang"):
        sglang_pin('torch')


def test_the_fleet_mirror_and_the_tests_read_the_same_pins():
    sys.path.insert(0, os.path.join(ROOT, 'tests'))
    try:
        from fleet import client, mirror  # tests/fleet: stdlib only, loads pins.py by path
    finally:
        sys.path.remove(os.path.join(ROOT, 'tests'))
    assert client.PINS == pins.PINS and client.RELEASE == pins.RELEASE
    assert ['compressed-tensors==%s' % CT] in mirror.MIRROR_WHEEL_RECIPE['downloads']
