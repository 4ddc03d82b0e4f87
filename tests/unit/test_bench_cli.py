# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/cli.py: a section that fails is named on the page and the run keeps the other sections' results."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest


def fail(error):
    raise error


def test_a_failing_section_is_named_and_the_others_are_kept(cli):
    results = {'extra_notes': []}
    assert cli.guarded(results, 'rollout', 'rollout', lambda: {'sizes': [1, 6]})
    # the router section raises SystemExit (router_drain.py), an exception another section might raise too
    assert not cli.guarded(results, 'router', 'router', lambda: fail(SystemExit('router bench: first deploy failed')))
    assert not cli.guarded(results, 'sync', 'model_sync', lambda: fail(RuntimeError('mirror\n  unreachable')))
    assert results['rollout'] == {'sizes': [1, 6]}
    assert 'router' not in results and 'model_sync' not in results
    assert results['failed_sections'] == ['router', 'sync']
    assert results['extra_notes'] == [
        'Section router FAILED in this run (no results): router bench: first deploy failed',
        'Section sync FAILED in this run (no results): mirror unreachable']


def test_an_interrupt_is_not_a_section_failure(cli):
    with pytest.raises(KeyboardInterrupt):
        cli.guarded({'extra_notes': []}, 'cpu', 'cpu', lambda: fail(KeyboardInterrupt()))


def test_a_chain_of_only_runs_keeps_each_sections_own_run(cli):
    first = {'started': 'A', 'duration_s': 60, 'load_average': {'cpu': {'median': 1, 'max': 2}}}
    # the page of run B measured the rollout and carried cpu over from run A (the format before origins, too)
    legacy = {'started': 'B', 'duration_s': 120, 'load_average': {'rollout': {'median': 3, 'max': 4}},
              'carried_over': dict(first, sections=['cpu'])}
    current = {'started': 'B', 'duration_s': 120, 'load_average': {'rollout': {'median': 3, 'max': 4}},
               'carried_over': {'sections': ['cpu'], 'origins': {'cpu': first}}}
    for previous in (legacy, current):
        assert cli.origin_of(previous, 'cpu')['started'] == 'A'
        rollout = cli.origin_of(previous, 'rollout')
        assert rollout == {'started': 'B', 'duration_s': 120, 'load_average': {'rollout': {'median': 3, 'max': 4}}}
