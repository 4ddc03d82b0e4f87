# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every filter's documentation (plugins/filter/NAME.yml, which ansible-doc and ansible-test sanity read) parses and
matches its function: one file per filter, named as the filter, its options the function's own parameters.

A description item with an unquoted ': ' is a YAML mapping, not a string: ansible-doc then cannot read the file,
and only `make sanity` (minutes) used to say so. Pure: it reads files and imports the filter plugins."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import importlib
import inspect
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def filters():
    """{filter name: function} of every filter plugin file."""
    found = {}
    for path in sorted(glob.glob(os.path.join(ROOT, 'plugins', 'filter', '*.py'))):
        module = importlib.import_module('ansible_collections.llmops.sglang.plugins.filter.'
                                         + os.path.basename(path)[:-3])
        found.update(module.FilterModule().filters())
    return found


def docs():
    return sorted(glob.glob(os.path.join(ROOT, 'plugins', 'filter', '*.yml')))


def problems(name, doc, function):
    """What is wrong with one filter's parsed documentation against its function ([] when nothing)."""
    found = []
    if not isinstance(doc, dict) or not isinstance(doc.get('DOCUMENTATION'), dict):
        return ['%s: no DOCUMENTATION mapping' % name]
    documentation = doc['DOCUMENTATION']
    if documentation.get('name') != name:
        found.append('%s: DOCUMENTATION.name is %r' % (name, documentation.get('name')))
    description = documentation.get('description')
    items = description if isinstance(description, list) else [description]
    found.extend('%s: a description item is not text (an unquoted ": " makes it a mapping): %r' % (name, item)
                 for item in items if not isinstance(item, str))
    options = documentation.get('options') or {}
    for option, spec in options.items():
        text = (spec or {}).get('description')
        for item in (text if isinstance(text, list) else [text]):
            if not isinstance(item, str):
                found.append('%s: option %s has a description item that is not text: %r' % (name, option, item))
    if not isinstance(doc.get('EXAMPLES'), str) or not isinstance(doc.get('RETURN'), dict):
        found.append('%s: EXAMPLES (text) or RETURN (mapping) missing' % name)
    params = list(inspect.signature(function).parameters)
    named = [option for option in options if option != '_input']
    unknown = [option for option in named if option not in params[1:]]
    if unknown:
        found.append('%s: documented options %s are not parameters of %s%s'
                     % (name, unknown, function.__name__, inspect.signature(function)))
    undocumented = [param for param in params[1:] if param not in options]
    if undocumented:
        found.append('%s: parameters %s are not documented' % (name, undocumented))
    return found


def test_every_filter_has_one_doc_file_and_every_doc_file_a_filter():
    names = set(os.path.basename(path)[:-4] for path in docs())
    assert names == set(filters()), (sorted(names - set(filters())), sorted(set(filters()) - names))


@pytest.mark.parametrize('path', docs(), ids=os.path.basename)
def test_the_doc_parses_and_matches_the_function(path):
    name = os.path.basename(path)[:-4]
    with open(path, encoding='utf-8') as handle:
        doc = yaml.safe_load(handle)
    assert problems(name, doc, filters()[name]) == []


def test_the_check_finds_an_unquoted_colon_and_options_that_drift():
    def sample(_input, unit, stopped=None):
        return _input, unit, stopped
    good = {'DOCUMENTATION': {'name': 'sample', 'description': ['One.'], 'options': {
        '_input': {'description': 'x'}, 'unit': {'description': 'y'}, 'stopped': {'description': ['z']}}},
        'EXAMPLES': '- x\n', 'RETURN': {'_value': {}}}
    assert problems('sample', good, sample) == []
    # the mistake this test was written for: a list item 'With O(x), the outcome: C(y)' parses as a mapping
    broken = yaml.safe_load('DOCUMENTATION:\n  name: sample\n  description:\n    - With O(stopped), the outcome: C(refused)\n')
    assert any('is not text' in problem for problem in problems('sample', broken, sample)), broken
    options = {'_input': {'description': 'x'}, 'unit': {'description': 'y'}, 'gone': {'description': 'z'}}
    drifted = {'DOCUMENTATION': dict(good['DOCUMENTATION'], options=options), 'EXAMPLES': '', 'RETURN': {}}
    assert problems('sample', drifted, sample) == [
        "sample: documented options ['gone'] are not parameters of sample(_input, unit, stopped=None)",
        "sample: parameters ['stopped'] are not documented"]
