# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/cpu.py (issue 27): a watcher's host CPU split into what recurs while it waits and what a wait costs once,
and the page's target line. Pure: no fleet."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest


def test_the_steady_span_leaves_out_the_start_and_the_end(cpu):
    assert cpu.steady_span(60.0) == (15.0, 5.0)
    # a short (quick) window keeps most of itself
    assert cpu.steady_span(20.0) == (5.0, 2.5)


def test_one_off_costs_are_the_window_less_the_steady_rate(cpu):
    # a watcher whose host used 1.0 s/min more than control over a 1.1-minute window, 0.4 s/min more while waiting:
    # 1.1 s in all, of which 0.44 s recur at the steady rate, 0.66 s once
    raw = {'host_total': 1.3, 'minutes': 1.1, 'steady_host_total': 0.7}
    control = {'host_total': 0.3, 'minutes': 1.1, 'steady_host_total': 0.3}
    out = cpu.split_costs(raw, control)
    assert out['steady_cpu_s_per_min'] == pytest.approx(0.4)
    assert out['oneoff_cpu_s'] == pytest.approx(0.66)


def cpu_results(waiter_steady, quiet_steady=0.3):
    def tool(total, steady):
        return {'host_cpu_s_per_min': total, 'ssh_tree_cpu_s_per_min': total, 'server_cpu_s_per_min': 0.0,
                'host_cpu_rounds': [total], 'steady_cpu_s_per_min': steady, 'oneoff_cpu_s': 0.5}
    per = {'waiter': tool(1.0, waiter_steady), 'waiter_quiet': tool(0.7, quiet_steady), 'uri': tool(1.6, 1.5),
           'seed1': tool(0.2, 0.2), 'seed2': tool(0.1, 0.1)}
    return {'window_s': 60.0, 'rounds': [{}, {}, {}], 'per_tool': per,
            'control': {'host_total': 0.3, 'sshd': 0.07, 'server': 0.1}}


@pytest.mark.parametrize('steady, verdict', [(0.55, 'met'), (0.61, '**missed**')])
def test_the_page_judges_the_target_on_the_rate_while_waiting(cpu, steady, verdict):
    notes = cpu.cpu_notes(cpu_results(steady))
    line = [n for n in notes if n.startswith('Target (issue 27) the waiter\'s host CPU')]
    assert len(line) == 1 and (': %s (%.2f s/min while waiting' % (verdict, steady)) in line[0], notes


def test_the_table_shows_both_figures_when_the_run_has_them(cpu):
    text = '\n'.join(cpu.render_cpu(cpu_results(0.42)))
    assert '| while waiting, s/min | once per wait, s |' in text and '| 0.420 | 0.50 |' in text, text
