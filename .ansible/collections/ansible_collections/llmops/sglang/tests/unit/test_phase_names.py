# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The phase names are sglang_signatures.PHASES'; the stand-in (stdlib only, it runs on the fleet's hosts and cannot
import the collection) and the bench keep copies of the names they time, held here against the table."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import os
import random
import sys

from ansible_collections.llmops.sglang.plugins.module_utils.sglang_signatures import PHASES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The phases a server goes through on its own clock; http_up and ready are moments, not timed phases.
TIMED = [phase.name for phase in PHASES if phase.name not in ('http_up', 'ready')]


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_stand_ins_phases_are_the_tables_timed_phases_in_order():
    faults = load('tests/standin/src/sglang_standin/faults.py', 'standin_faults_for_test')
    assert list(faults.PHASES) == TIMED
    assert sorted(faults.CAUSES) == sorted(TIMED)


def test_the_benchs_timelines_name_the_tables_phases():
    sys.path[:0] = [ROOT, os.path.join(ROOT, 'tests')]
    try:
        from bench import lag  # pylint: disable=import-outside-toplevel
    finally:
        del sys.path[:2]
    for scenario in ('ready', 'crash', 'crash_loop', 'hang'):
        plan = lag.timeline(scenario, random.Random(1))
        assert list(plan['phases']) == TIMED, scenario
        named = [item.split('=')[0] for item in plan['env']['SGLANG_STANDIN_PHASE_SECONDS'].split(',')]
        assert named == TIMED, scenario
        if '@' in plan['fault']:
            assert plan['fault'].split('@')[1] in TIMED, scenario
