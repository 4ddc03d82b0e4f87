# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The model sync's decisions: resume offsets, the fan-out's waves and sources, the manifest rules, progress."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.model import model_sync

SHA = 'a' * 64
MANIFEST = {'a.safetensors': {'size': 100, 'sha256': SHA}, 'b.safetensors': {'size': 50, 'sha256': SHA},
            'c.json': {'size': 10, 'sha256': SHA}, 'd.safetensors': {'size': 7, 'sha256': SHA}}


def test_transfers_resume_partial_files_from_their_size_and_refetch_longer_ones():
    plan = model_sync.transfers(model_sync.check_manifest(MANIFEST), {'a.safetensors': 40, 'b.safetensors': 50,
                                                                      'd.safetensors': 9})
    assert [(i['file'], i['action'], i['offset']) for i in plan] == [
        ('a.safetensors', 'resume', 40), ('b.safetensors', 'have', 50), ('c.json', 'fetch', 0),
        ('d.safetensors', 'refetch', 0)]
    assert model_sync.remaining_bytes(plan) == 60 + 0 + 10 + 7


def test_first_wave_pulls_from_the_mirror_alone_then_finished_hosts_serve_doubling():
    plan = model_sync.fanout(['h1', 'h2', 'h3', 'h4', 'h5', 'h6'], set())
    assert plan == {'h1': {'wave': 0, 'source': None},
                    'h2': {'wave': 1, 'source': 'h1'},
                    'h3': {'wave': 2, 'source': 'h1'}, 'h4': {'wave': 2, 'source': 'h2'},
                    'h5': {'wave': 3, 'source': 'h1'}, 'h6': {'wave': 3, 'source': 'h2'}}
    assert sum(1 for row in plan.values() if row['source'] is None) == 1


def test_the_mirror_is_not_used_when_any_host_has_the_version():
    plan = model_sync.fanout(['h1', 'h2', 'h3', 'h4'], {'h3'})
    assert plan == {'h1': {'wave': 0, 'source': 'h3'}, 'h2': {'wave': 1, 'source': 'h3'},
                    'h4': {'wave': 1, 'source': 'h1'}}
    assert model_sync.fanout(['h1'], {'h1'}) == {}


def test_a_hosts_source_always_comes_before_it_in_play_order_or_already_has_it():
    order = ['h%02d' % i for i in range(20)]
    have = {'h05', 'h11'}
    plan = model_sync.fanout(order, have)
    assert set(plan) == set(order) - have
    for host, row in plan.items():
        assert row['source'] in have or order.index(row['source']) < order.index(host)
        if row['source'] not in have:
            assert plan[row['source']]['wave'] < row['wave']


def test_own_row_names_the_sources_address():
    peers = [{'name': 'a', 'address': '10.0.0.1', 'have': True}, {'name': 'b', 'address': '10.0.0.2', 'have': False}]
    assert model_sync.own_row(peers, 'b', 'waves') == {'wave': 0, 'source': 'a', 'source_address': '10.0.0.1', 'sources': []}
    assert model_sync.own_row(peers, 'a', 'waves')['wave'] is None
    # a host missing from the list (not reached by the play's facts) still gets a row: last in order
    assert model_sync.own_row(peers, 'c', 'waves') == {'wave': 1, 'source': 'a', 'source_address': '10.0.0.1', 'sources': []}
    assert model_sync.own_row([], 'solo', 'waves') == {'wave': 0, 'source': None, 'source_address': None, 'sources': []}


@pytest.mark.parametrize('manifest, fragment', [
    ({}, 'must list the checkpoint'),
    ({'a': {'size': 1}}, "sglang_model_manifest['a'] needs both size and sha256"),
    ({'a': {'sha256': SHA}}, 'needs both size and sha256'),
    ({'../a': {'size': 1, 'sha256': SHA}}, 'must be a path inside the model directory'),
])
def test_a_sync_needs_every_file_with_size_and_digest(manifest, fragment):
    with pytest.raises(ValueError, match='.*' + fragment.replace('[', r'\[').replace(']', r'\]')):
        model_sync.check_manifest(manifest)


def test_marker_matches_only_the_same_manifest():
    text = model_sync.marker_text('v1', MANIFEST, None)
    assert model_sync.marker_matches(text, MANIFEST)
    other = dict(MANIFEST, **{'c.json': {'size': 11, 'sha256': SHA}})
    assert not model_sync.marker_matches(text, other)
    assert not model_sync.marker_matches('garbage', MANIFEST)


def test_progress_rate_and_eta_and_line():
    status = model_sync.progress(50 << 20, 150 << 20, 2.0)
    assert status["rate"] == 25 << 20 and status['eta'] == 4.0
    assert model_sync.progress(0, 10, 0.0)['eta'] is None
    line = model_sync.progress_line('sy-02', dict(status, source='sy-01', state='transferring'))
    assert line == 'sy-02  model sync  from sy-01  50.0 MiB/150.0 MiB  25.0 MiB/s  ETA 4s'
    assert 'waiting for mirror' in model_sync.progress_line('sy-01', {'state': 'waiting', 'wave': 0})


def test_peer_list_leaves_out_hosts_that_have_not_looked_yet():
    facts = {'a': {'sglang_models': {'/m/v1': True}, 'address': '10.0.0.1'},
             'b': {'sglang_models': {'/m/v1': False}, 'address': None},
             'c': {'sglang_models': None, 'address': '10.0.0.3'},
             'd': {'sglang_models': {'/m/v0': True}, 'address': '10.0.0.4'}}
    assert model_sync.peer_list(['b', 'a', 'c', 'd', 'e'], facts, '/m/v1') == [
        {'name': 'b', 'address': 'b', 'have': False}, {'name': 'a', 'address': '10.0.0.1', 'have': True}]


def test_sync_printer_prints_on_a_new_state_or_source_and_refreshes():
    printer = model_sync.SyncPrinter('sy-02', every=10)
    wait = {'state': 'waiting', 'source': 'sy-01', 'wave': 1}
    assert printer.feed(wait, 0.0) == ['sy-02  model sync  waiting for sy-01 to finish (wave 1)']
    assert printer.feed(wait, 5.0) == []
    assert len(printer.feed(wait, 10.0)) == 1
    moving = {'state': 'transferring', 'source': 'sy-01', 'done': 1 << 20, 'total': 4 << 20, 'rate': 1 << 20, 'eta': 3}
    assert printer.feed(moving, 11.0) == ['sy-02  model sync  from sy-01  1.0 MiB/4.0 MiB  1.0 MiB/s  ETA 3s']
    assert printer.feed(None, 12.0) == [] and printer.feed({'state': 'done'}, 13.0) == []


def test_final_line_says_what_moved_from_where():
    line = model_sync.final_line('sy-03', {'state': 'synced', 'source': 'sy-01', 'transferred_bytes': {'sy-01': 4 << 20},
                                           'seconds': 2.0, 'verify_seconds': 0.5})
    assert line == 'sy-03  model sync  done: 4.0 MiB from sy-01 in 2.0s  2.0 MiB/s, verified in 0.5s'
    assert 'FAILED: boom' in model_sync.final_line('sy-03', {'failed': True, 'msg': 'boom'})
    assert 'already here' in model_sync.final_line('sy-03', {'state': 'present', 'version_dir': '/m/v1'})


# ---- pipelined distribution ------------------------------------------------------------------------------------

def test_a_chain_the_first_from_the_mirror_every_next_from_the_one_before_all_at_once():
    plan = model_sync.pipeline(['h1', 'h2', 'h3', 'h4'], set())
    assert plan == {'h1': {'wave': 0, 'source': None, 'sources': [None]},
                    'h2': {'wave': 1, 'source': 'h1', 'sources': ['h1', None]},
                    'h3': {'wave': 2, 'source': 'h2', 'sources': ['h2', 'h1', None]},
                    'h4': {'wave': 3, 'source': 'h3', 'sources': ['h3', 'h2', 'h1', None]}}


def test_the_first_reads_from_a_host_that_has_it_whole_and_the_mirror_comes_last():
    plan = model_sync.pipeline(['h1', 'h2', 'h3', 'h4'], {'h3'})
    assert plan == {'h1': {'wave': 0, 'source': 'h3', 'sources': ['h3', None]},
                    'h2': {'wave': 1, 'source': 'h1', 'sources': ['h1', 'h3', None]},
                    'h4': {'wave': 2, 'source': 'h2', 'sources': ['h2', 'h1', 'h3', None]}}
    # two hosts that have it: two chains, and each chain falls back on the other whole host before the mirror
    plan = model_sync.pipeline(['a', 'b', 'c', 'd', 'e', 'f'], {'a', 'b'})
    assert plan['c']['sources'] == ['a', 'b', None] and plan['d']['sources'] == ['b', 'a', None]
    assert plan['e']['sources'] == ['c', 'a', 'b', None] and plan['f']['sources'] == ['d', 'b', 'a', None]
    assert model_sync.pipeline(['a'], {'a'}) == {}


def test_a_tree_of_fan_out_two_and_the_mirror_read_by_one_host_only():
    order = ['h%02d' % i for i in range(24)]
    plan = model_sync.pipeline(order, set(), fanout=2)
    assert [h for h, row in plan.items() if row['source'] is None] == ['h00']
    assert plan['h01']['source'] == 'h00' and plan['h02']['source'] == 'h00' and plan['h03']['source'] == 'h01'
    served = {}
    for host, row in plan.items():
        served[row['source']] = served.get(row['source'], 0) + 1
        # a source always comes earlier in play order, and its own sources follow it in the fallback list
        assert row['source'] is None or order.index(row['source']) < order.index(host)
        if row['source'] is not None:
            assert row['sources'] == [row['source']] + plan[row['source']]['sources']
    assert max(served.values()) == 2
    assert max(row['wave'] for row in plan.values()) == 4  # depth log2(24): 24 hosts, 5 links deep
    with pytest.raises(ValueError):
        model_sync.pipeline(order, set(), fanout=0)


def test_every_host_computes_the_same_plan_and_takes_its_row_with_addresses():
    peers = [{'name': 'a', 'address': '10.0.0.1', 'have': False}, {'name': 'b', 'address': '10.0.0.2', 'have': False},
             {'name': 'c', 'address': '10.0.0.3', 'have': False}]
    assert model_sync.own_row(peers, 'c', 'pipelined') == {
        'wave': 2, 'source': 'b', 'source_address': '10.0.0.2',
        'sources': [{'name': 'b', 'address': '10.0.0.2'}, {'name': 'a', 'address': '10.0.0.1'},
                    {'name': None, 'address': None}]}
    assert model_sync.own_row(peers, 'a', 'pipelined')['sources'] == [{'name': None, 'address': None}]
