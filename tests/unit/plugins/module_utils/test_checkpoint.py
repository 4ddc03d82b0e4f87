# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checkpoint gate's decisions: download markers, safetensors framing (real safetensors' texts), manifest, cache."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import struct

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.model import checkpoint

SHA_A = 'a' * 64
SHA_B = 'b' * 64


def shard_bytes(data_len=24):
    header = json.dumps({'__metadata__': {'format': 'pt'},
                         'x': {'dtype': 'F32', 'shape': [4], 'data_offsets': [0, 16]},
                         'y': {'dtype': 'F32', 'shape': [2], 'data_offsets': [16, data_len]}}).encode()
    header += b' ' * (-len(header) % 8)
    return struct.pack('<Q', len(header)) + header + b'\0' * data_len


def problem(data):
    n = checkpoint.header_length(data[:8])
    return checkpoint.safetensors_problem(data[:8], data[8:8 + n] if n is not None else b'', len(data))


def test_whole_shard():
    assert problem(shard_bytes()) is None


def test_truncated_shard_like_safetensors():
    error, why = problem(shard_bytes()[:-100 + 90])  # 10 bytes short
    assert error == 'incomplete metadata, file not fully covered'
    assert 'truncated: 10 bytes missing' in why


def test_longer_than_declared():
    error, why = problem(shard_bytes() + b'junk')
    assert error == 'incomplete metadata, file not fully covered' and '4 bytes longer' in why


@pytest.mark.parametrize('data,error', [
    (b'\x01\x02', 'header too small'),
    (struct.pack('<Q', 200000000) + b'{}', 'header too large'),
    (shard_bytes()[:30], 'invalid header length'),
    (struct.pack('<Q', 8) + b'{nojson}', 'invalid JSON in header'),
    (struct.pack('<Q', 2) + b'\xff\xfe', 'invalid UTF-8 in header'),
])
def test_broken_framing(data, error):
    assert problem(data)[0].startswith(error)


def test_download_markers():
    names = ['config.json', 'model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors.aria2',
             '.cache/huggingface/download/model-00001-of-00002.safetensors.incomplete',
             '.cache/huggingface/download/model-00001-of-00002.safetensors.lock', 'notes.aria2x']
    assert checkpoint.download_markers(names) == [
        '.cache/huggingface/download/model-00001-of-00002.safetensors.incomplete',
        '.cache/huggingface/download/model-00001-of-00002.safetensors.lock',
        'model-00002-of-00002.safetensors.aria2']


def test_growth():
    before = {'a': (10, 1), 'b': (20, 2)}
    assert checkpoint.growth(before, dict(before)) == []
    assert checkpoint.growth(before, {'a': (10, 1), 'b': (30, 3)}) == [('b', 20, 30)]
    assert checkpoint.growth(before, {'a': (10, 1), 'b': (20, 2), 'c': (1, 4)}) == [('c', None, 1)]


def test_manifest_parsing():
    assert checkpoint.parse_manifest({'a': {'size': 3, 'sha256': SHA_A.upper()}, 'b': {'size': 1}}) == {
        'a': {'size': 3, 'sha256': SHA_A}, 'b': {'size': 1, 'sha256': None}}
    for bad in ([], {'a': 3}, {'a': {'size': -1}}, {'a': {'sha256': 'xyz'}}, {'/etc/passwd': {'size': 1}},
                {'../x': {'size': 1}}, {'a': {'size': 1, 'md5': 'x'}}, {'a': {'size': True}}):
        with pytest.raises(ValueError):
            checkpoint.parse_manifest(bad)


def test_manifest_findings():
    manifest = checkpoint.parse_manifest({'a': {'size': 3, 'sha256': SHA_A}, 'b': {'size': 5, 'sha256': SHA_B},
                                          'c': {'size': 1}, 'd': {'sha256': SHA_A}})
    stats = {'a': 3, 'b': 4, 'd': 9}
    assert checkpoint.to_hash(manifest, stats) == ['a', 'd']  # b has the wrong size already: no hashing
    findings = checkpoint.judge(manifest=manifest, stats=stats, digests={'a': SHA_A, 'd': SHA_B})
    assert [(f['check'], f['file']) for f in findings] == [('manifest_size', 'b'), ('manifest_missing', 'c'),
                                                           ('manifest_hash', 'd')]
    assert 'b is 4 bytes, sglang_model_manifest says 5' in findings[0]['message']


def test_judge_markers_growth_invalid_and_waiver():
    findings = checkpoint.judge(markers=['x.aria2'], growing=[('s', 1, 2)],
                                invalid=[('s2', ('incomplete metadata, file not fully covered', 'truncated'))],
                                waive=['shard_growing'])
    expected = [('download_in_progress', False), ('shard_growing', True), ('shard_invalid', False)]
    assert [(f['check'], f['waived']) for f in findings] == expected
    assert 'Error while deserializing header: incomplete metadata, file not fully covered' in findings[2]['message']


def test_cache_by_size_and_mtime():
    files = {'/m/a': {'size': 3, 'mtime_ns': 7, 'sha256': SHA_A}}
    cache = checkpoint.parse_cache(checkpoint.render_cache(files))
    assert checkpoint.cached_digest(cache, '/m/a', 3, 7) == SHA_A
    assert checkpoint.cached_digest(cache, '/m/a', 3, 8) is None  # touched: hash again
    assert checkpoint.cached_digest(cache, '/m/a', 4, 7) is None
    assert checkpoint.cached_digest(cache, '/m/b', 3, 7) is None
    assert checkpoint.parse_cache('not json') == {} and checkpoint.parse_cache('[]') == {}
