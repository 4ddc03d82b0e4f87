# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/distribution.py (issue 28, model distribution): the link model, the ratios, the fits, the target's verdict,
the results parsed from ansible-playbook's output and the page's section. Pure: no fleet, no ansible run."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest


TRANSFER = 16.8


def run(way, hosts, wall, gets=8, repeats=0, ok=True):
    return {'way': way, 'hosts': hosts, 'wall_s': wall, 'ok': ok, 'mirror_gets': gets, 'mirror_repeats': repeats,
            'hosts_cpu_s': 1.0, 'controller_cpu_s': 2.0, 'machine_busy': 0.5, 'loadavg_1m': 3.0}


def measured(chain24=22.0, tree24=40.0, waves24=110.0):
    return [run('mirror', 1, 20.0), run('present', 1, 2.0),
            run('mirror', 6, 102.0, 48, 40), run('waves', 6, 70.0), run('chain', 6, 21.0), run('tree', 6, 36.0),
            run('present', 6, 3.0),
            run('mirror', 24, 405.0, 192, 184), run('waves', 24, waves24), run('chain', 24, chain24),
            run('tree', 24, tree24), run('present', 24, 6.0)]


def test_the_link_model_in_transfer_times(dist):
    assert dist.transfer_seconds(32 << 20, 2000000) == pytest.approx(16.777216)
    assert [dist.expected_transfer_times('mirror', n) for n in (1, 6, 24)] == [1.0, 6.0, 24.0]
    # waves: the mirror's wave, then the hosts that have it double: 1, 2, 4, 8, 16, 32
    assert [dist.expected_transfer_times('waves', n) for n in (1, 2, 3, 6, 12, 24, 64)] == [1, 2, 3, 4, 5, 6, 7]
    assert [dist.expected_transfer_times('chain', n) for n in (1, 6, 24)] == [1.0, 1.0, 1.0]
    # a tree's inner host shares its link among its children
    assert [dist.expected_transfer_times('tree', n) for n in (1, 2, 3, 24)] == [1.0, 1.0, 2.0, 2.0]
    assert dist.expected_transfer_times('tree', 24, fanout=3) == 3.0
    with pytest.raises(ValueError):
        dist.expected_transfer_times('swarm', 4)
    with pytest.raises(ValueError):
        dist.expected_transfer_times('chain', 0)


def test_each_way_is_a_set_of_module_options(dist):
    hosts = [{'name': 'a', 'address': '10.0.0.1'}, {'name': 'b', 'address': '10.0.0.2'}]
    peers, distribution, fanout = dist.way_args('tree', hosts)
    assert (distribution, fanout) == ('pipelined', dist.TREE_FANOUT)
    assert peers == [{'name': 'a', 'address': '10.0.0.1', 'have': False}, {'name': 'b', 'address': '10.0.0.2', 'have': False}]
    assert dist.way_args('mirror', hosts) == ([], 'waves', 1)       # no peers: every host from the mirror
    assert dist.way_args('chain', hosts)[1:] == ('pipelined', 1) and dist.way_args('waves', hosts)[1:] == ('waves', 1)


def test_the_ratios_the_fixed_cost_and_the_fits(dist):
    summary = dist.summarize(measured(), TRANSFER)
    assert summary['single_s'] == 20.0 and summary['fixed'] == [[1, 2.0], [6, 3.0], [24, 6.0]]
    rows = dict(((r['hosts'], r['way']), r) for r in summary['rows'])
    assert ('present' not in set(way for _hosts, way in rows))
    chain = rows[(24, 'chain')]
    assert chain['per_transfer'] == round(22.0 / TRANSFER, 2) and chain['per_single_host'] == 1.1
    assert chain['net_per_transfer'] == round(16.0 / TRANSFER, 2) and chain['fixed_s'] == 6.0
    assert rows[(24, 'waves')]['expected'] == 6.0 and rows[(6, 'mirror')]['expected'] == 6.0
    # the mirror alone: about one transfer time per extra host; a chain: almost nothing per host
    assert summary['fits']['mirror']['slope_per_transfer'] == pytest.approx(1.0, abs=0.05)
    assert summary['fits']['chain']['slope'] == pytest.approx(1.0 / 18, abs=1e-6)
    # a failed run is no ratio and no point of a fit
    failed = dist.summarize(measured() + [run('chain', 12, 999.0, ok=False)], TRANSFER)
    row = [r for r in failed['rows'] if r['hosts'] == 12][0]
    assert row['per_transfer'] is None and row['net_per_transfer'] is None
    assert failed['fits']['chain'] == summary['fits']['chain']


def test_the_target_line_met_missed_or_not_measured(dist):
    met = dist.target_note(dist.summarize(measured(chain24=24.0), TRANSFER))
    assert met.startswith('Target (issue 28) 24 hosts within 1.5 transfer times: met (pipelined chain (fanout 1, default): '
                          '24.0 s, 1.43 transfer times of 16.8 s; 1.07 net of the 6.0 s')
    assert 'waves 6.55' in met
    missed = dist.target_note(dist.summarize(measured(chain24=30.0, tree24=29.0), TRANSFER))
    assert '**missed** (pipelined tree (fanout 2): 29.0 s, 1.73 transfer times' in missed
    assert 'not measured' in dist.target_note(dist.summarize(measured()[:7], TRANSFER))
    assert 'not measured' in dist.target_note(None)


def test_the_default_changes_only_if_pipelined_wins_at_every_size(dist):
    assert dist.default_note(dist.summarize(measured(), TRANSFER)) is True
    assert dist.default_note(dist.summarize(measured(chain24=200.0, tree24=150.0), TRANSFER)) is False
    assert dist.default_note(dist.summarize(measured()[:2], TRANSFER)) is None


def test_results_are_read_from_the_playbooks_verbose_output(dist):
    stdout = ('TASK [sglang_model_sync] ****\n'
              'changed: [bd-01] => {\n    "changed": true,\n    "source": "mirror",\n    "msg": "a } in text"\n}\n'
              'fatal: [bd-02]: FAILED! => {\n    "changed": false,\n    "failed": true,\n    "msg": "nope"\n}\n'
              'ok: [bd-03] => {"changed": false, "state": "present"}\n'
              'ok: [bd-04] => not json\n\nPLAY RECAP ****\nbd-01 : ok=1 changed=1\n')
    results = dist.parse_results(stdout)
    assert results == {'bd-01': {'changed': True, 'source': 'mirror', 'msg': 'a } in text'},
                       'bd-02': {'changed': False, 'failed': True, 'msg': 'nope'},
                       'bd-03': {'changed': False, 'state': 'present'}}


def test_the_page_section_and_its_notes(dist):
    summary = dist.summarize(measured(chain24=24.0), TRANSFER)
    result = {'sizes': [1, 6, 24], 'cores': 2, 'rate_mbit': 16, 'rate_bytes_s': 2000000, 'mib': 32, 'shards': 8,
              'transfer_s': TRANSFER, 'runs': measured(chain24=24.0), 'summary': summary,
              'probe': [{'cipher': 'default', 'connect_s': 0.3, 'connect_cpu_s': 0.12, 'stream_mib_s': 60.0,
                         'server_cpu_s_per_gib': 10.0, 'client_cpu_s_per_gib': 8.0}]}
    page = '\n'.join(dist.render_distribution(result))
    assert '## Model distribution: mirror alone, waves, pipelined at 1, 6, 24 hosts (issue 28)' in page
    assert '**one transfer time is 16.8 s**' in page and 'not the issue\'s few GiB' in page
    assert '| 24 | pipelined chain (fanout 1, default) | 24.0 s | 1.43 | 1.07 | 1 | 1.20 | 8 (0) |' in page
    assert '| 24 | mirror alone | 405.0 s | 24.11 |' in page and '192 (184)' in page
    assert 'Fixed cost (the version present): 1 hosts 2.0 s, 6 hosts 3.0 s, 24 hosts 6.0 s.' in page
    assert 'streaming 60.0 MiB/s, 10.00 CPU s per GiB on the serving host' in page
    # 24 links x 2 MB/s x 18 CPU s/GiB
    assert dist.cores_needed(result) == pytest.approx(24 * 2000000 / float(1 << 30) * 18.0)
    broken = dict(run('waves', 12, 5.0, ok=False), failed={'bd-03': 'Transfer of x interrupted'})
    failed = dict(result, summary=dist.summarize(measured() + [broken], TRANSFER))
    assert '| 12 | waves | FAILED: bd-03: Transfer of x interrupted |' in '\n'.join(
        dist.render_distribution(failed))
    notes = dist.distribution_notes(result)
    assert notes[0].startswith('Target (issue 28) 24 hosts within 1.5 transfer times: met')
    assert 'pipelined was faster at every size' in notes[1]
    assert notes[2] == 'Mirror read once per file by waves and pipelined: met.'
    repeated = dict(result, summary=dist.summarize(measured() + [run('waves', 12, 70.0, 9, 1)], TRANSFER))
    assert '**missed** (waves on 12 hosts: 1 repeats)' in dist.distribution_notes(repeated)[-1]
    assert dist.distribution_notes({})[0].endswith('not measured (no pipelined run on 24 hosts).')


def test_the_section_is_wired_into_make_bench(dist, cli, bench_page, bench_common):
    common = bench_common
    assert 'distribution' in common.SECTIONS
    args = cli.build_parser().parse_args(['--only', 'distribution', '--distribution-sizes', '1,2',
                                          '--distribution-mib', '8', '--distribution-rate-mbit', '24'])
    assert (args.only, args.distribution_sizes, args.distribution_mib, args.distribution_rate_mbit) == (
        ['distribution'], '1,2', 8, 24)
    assert cli.build_parser().parse_args([]).distribution_sizes == '1,6,12,24'
    page = bench_page
    summary = dist.summarize(measured(chain24=24.0), TRANSFER)
    notes = page.evaluate({'distribution': {'summary': summary}, 'extra_notes': []})
    assert any(note.startswith('Target (issue 28) 24 hosts within 1.5 transfer times: met') for note in notes)
