# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""last_good: what a save writes into the copy and what a restore makes of the live files (contents only)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.host.last_good import (
    LastGoodError, check_names, parse_pins, pin_specs, pins_text, restore_plan, save_plan,
)

LIVE = {'unit': b'[Service]\n', 'env': b'A=1\n', 'secrets.env': b'KEY=s\n'}


def test_a_save_copies_the_live_files_and_the_pins_and_leaves_out_a_file_that_is_not_there():
    copy, changed = save_plan(dict(LIVE, **{'secrets.env': None}), {'sglang': '0.5.23'}, None)
    assert changed
    assert sorted(copy) == ['env', 'pins.json', 'unit']
    assert json.loads(copy['pins.json'].decode()) == {'sglang': '0.5.23'}


def test_a_save_equal_to_the_copy_changes_nothing_and_any_difference_does():
    copy, _changed = save_plan(LIVE, {'sglang': '0.5.23'}, None)
    assert save_plan(LIVE, {'sglang': '0.5.23'}, copy) == (copy, False)
    assert save_plan(LIVE, {'sglang': '0.5.24'}, copy)[1]
    assert save_plan(dict(LIVE, env=b'A=2\n'), {'sglang': '0.5.23'}, copy)[1]
    assert save_plan(dict(LIVE, **{'secrets.env': None}), {'sglang': '0.5.23'}, copy)[1]


def test_pins_are_written_as_the_role_wrote_them_and_read_back_without_missing_versions():
    assert pins_text({'sglang': '0.5.23', 'compressed-tensors': '0.12.2'}) == (
        '{\n    "compressed-tensors": "0.12.2",\n    "sglang": "0.5.23"\n}\n')
    assert parse_pins(b'{"sglang": "0.5.23", "compressed-tensors": null}') == {'sglang': '0.5.23'}
    assert parse_pins(b'[1]') == {} and parse_pins(b'not json') == {} and parse_pins(None) == {}
    assert pin_specs({'sglang': '0.5.23', 'compressed-tensors': '0.12.2'}) == [
        'compressed-tensors==0.12.2', 'sglang==0.5.23']


def test_nothing_to_save_without_a_unit():
    with pytest.raises(LastGoodError, match='the unit file is missing'):
        save_plan(dict(LIVE, unit=None), {}, None)


def test_a_restore_writes_what_differs_and_removes_what_the_copy_did_not_have():
    saved = {'unit': b'[Service]\nold\n', 'env': b'A=1\n', 'pins.json': b'{"sglang": "0.5.22"}'}
    writes, removals, pins = restore_plan(saved, LIVE)
    assert writes == {'unit': b'[Service]\nold\n'}
    assert removals == ['secrets.env']
    assert pins == {'sglang': '0.5.22'}
    # already restored: nothing left to do (a live file that is absent and not saved is not "removed")
    assert restore_plan(saved, dict(LIVE, unit=saved['unit'], **{'secrets.env': None})) == ({}, [], pins)


def test_a_restore_writes_a_saved_file_that_is_missing_live():
    saved = {'unit': b'u', 'env': b'e', 'secrets.env': b'KEY=s\n'}
    writes, removals, _pins = restore_plan(saved, {'unit': b'u', 'env': b'e', 'secrets.env': None})
    assert writes == {'secrets.env': b'KEY=s\n'} and removals == []


def test_no_copy_or_a_copy_without_a_unit_is_nothing_to_restore():
    for saved in (None, {'env': b'e'}):
        with pytest.raises(LastGoodError, match='nothing to restore'):
            restore_plan(saved, LIVE)


@pytest.mark.parametrize('files, message', [
    ({'env': '/etc/x.env'}, "must name the 'unit' file"),
    ({'unit': '/u', 'pins.json': '/p'}, "'pins.json' is not a name"),
    ({'unit': '/u', '../x': '/p'}, "'../x' is not a name"),
    ({'unit': '/u', '.hidden': '/p'}, "'.hidden' is not a name"),
])
def test_names_the_copy_cannot_hold_are_refused(files, message):
    with pytest.raises(LastGoodError, match=message):
        check_names(files)
    check_names({'unit': '/u', 'env': '/e', 'secrets.env': '/s'})
