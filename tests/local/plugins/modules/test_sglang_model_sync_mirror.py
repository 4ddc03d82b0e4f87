# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_model_sync's main() run for real in this process against a loopback mirror: check mode, an interrupted transfer
and its resume from the byte it stopped at, a damaged file refused and removed, a version already present.

A local test (a real HTTP mirror on 127.0.0.1). The peer transport (ssh) needs a second host:
tests/integration/test_sync.py covers it on the fleet; the sync's decisions (the peer wait on a fake clock, the
fallback, what verification removes) are unit tests: tests/unit/plugins/module_utils/test_model_sync_driver.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import struct

import pytest

from model_mirror import Mirror  # tests/model_mirror.py

from ansible_collections.llmops.sglang.plugins.modules import sglang_model_sync as mod
from ansible_collections.llmops.sglang.tests.unit.plugins import fakes

SHARDS = ['model-%05d-of-00003.safetensors' % i for i in range(1, 4)]


def shard(size):
    header = json.dumps({'w': {'dtype': 'U8', 'shape': [size], 'data_offsets': [0, size]}}).encode()
    header += b' ' * (-len(header) % 8)
    return struct.pack('<Q', len(header)) + header + os.urandom(size)


@pytest.fixture
def mirror(tmp_path):
    source = tmp_path / 'mirror'
    source.mkdir()
    for name in SHARDS:
        (source / name).write_bytes(shard(200000))
    (source / 'config.json').write_text('{"architectures": ["X"]}')
    manifest = {p.name: {'size': p.stat().st_size, 'sha256': hashlib.sha256(p.read_bytes()).hexdigest()}
                for p in sorted(source.iterdir())}
    server = Mirror(source, ['127.0.0.1'])
    yield server, source, manifest
    server.stop()


@pytest.fixture
def run(capsys):
    """The module's main() run in-process: run(tmp_path, check=False, **options) -> its result."""
    def call(_tmp_path, check=False, **args):
        return fakes.run_module(mod, args, capsys, check_mode=check)
    return call


def args_for(tmp_path, server, manifest, **more):
    return dict({'dest': str(tmp_path / 'versions' / 'v1'), 'version': 'v1', 'manifest': manifest,
                 'mirror': 'http://127.0.0.1:%d/' % server.port, 'progress_file': str(tmp_path / 'progress.json')}, **more)


def test_check_mode_reports_and_fetches_nothing(tmp_path, mirror, run):
    server, _source, manifest = mirror
    result = run(tmp_path, check=True, **args_for(tmp_path, server, manifest))
    assert result['changed'] and result['state'] == 'would sync' and result['source'] == 'mirror', result
    assert result['transferred_bytes'] == {'mirror': sum(e['size'] for e in manifest.values())}
    assert server.sent == {} and not (tmp_path / 'versions').exists()


def test_an_interrupted_transfer_resumes_where_it_stopped_and_the_version_appears_whole(tmp_path, mirror, run):
    server, _source, manifest = mirror
    server.cut[SHARDS[1]] = 70000
    first = run(tmp_path, **args_for(tmp_path, server, manifest))
    assert first['failed'] and 'Transfer of %s from mirror interrupted at 70000 of %d bytes' % (
        SHARDS[1], manifest[SHARDS[1]]['size']) in first['msg'], first
    assert not (tmp_path / 'versions' / 'v1').exists()
    assert (tmp_path / 'versions' / '.staging-v1' / '.sync-failed').exists()  # what a waiting peer looks for
    second = run(tmp_path, **args_for(tmp_path, server, manifest))
    assert second['state'] == 'synced', second
    item = [f for f in second['files'] if f['file'] == SHARDS[1]][0]
    assert (item['action'], item['offset'], item['bytes']) == ('resume', 70000, manifest[SHARDS[1]]['size'] - 70000)
    assert server.sent[SHARDS[1]] == [(0, 70000), (70000, manifest[SHARDS[1]]['size'] - 70000)]
    for name, entry in manifest.items():  # every byte sent once in total
        assert sum(n for _s, n in server.sent[name]) == entry['size']
    dest = tmp_path / 'versions' / 'v1'
    assert sorted(os.listdir(dest)) == sorted(list(manifest) + ['.llmops-model.json'])
    assert not (tmp_path / 'versions' / '.staging-v1').exists()
    assert json.loads((tmp_path / 'progress.json').read_text())['state'] == 'done'
    third = run(tmp_path, **args_for(tmp_path, server, manifest))
    assert third['changed'] is False and third['state'] == 'present', third


def test_a_damaged_file_is_refused_removed_and_fetched_again(tmp_path, mirror, run):
    server, source, manifest = mirror
    good = (source / SHARDS[2]).read_bytes()
    (source / SHARDS[2]).write_bytes(good[:-1] + bytes([good[-1] ^ 1]))  # same size, one bit flipped
    result = run(tmp_path, **args_for(tmp_path, server, manifest))
    assert result['failed'] and 'failed verification' in result['msg'] and '%s has sha256' % SHARDS[2] in result['msg']
    staging = tmp_path / 'versions' / '.staging-v1'
    assert not (staging / SHARDS[2]).exists() and (staging / SHARDS[0]).exists()
    (source / SHARDS[2]).write_bytes(good)
    again = run(tmp_path, **args_for(tmp_path, server, manifest))
    assert again['state'] == 'synced', again
    assert [f['action'] for f in again['files'] if f['file'] == SHARDS[2]] == ['fetch']
    assert all(f['action'] == 'have' for f in again['files'] if f['file'] != SHARDS[2])


def test_a_directory_that_is_not_this_version_is_refused(tmp_path, mirror, run):
    server, _source, manifest = mirror
    (tmp_path / 'versions' / 'v1').mkdir(parents=True)
    result = run(tmp_path, **args_for(tmp_path, server, manifest))
    assert result['failed'] and 'is not a verified copy of version v1' in result['msg'], result
    assert server.sent == {}


def test_no_mirror_and_no_peer_with_it_is_refused_naming_the_input(tmp_path, mirror, run):
    _server, _source, manifest = mirror
    result = run(tmp_path, dest=str(tmp_path / 'v' / 'v1'), version='v1', manifest=manifest, host='a',
                 peers=[{'name': 'a', 'address': '10.0.0.1', 'have': False}])
    assert result['failed'] and 'sglang_model_source.mirror is not set' in result['msg'], result


def test_a_peer_whose_host_key_is_not_known_is_not_connected_to_and_the_mirror_serves(tmp_path, mirror, run):
    server, _source, manifest = mirror
    known = tmp_path / 'known_hosts'
    known.write_text('10.0.0.9 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIH7Xl12Kh1z5uS7RIlrdO1a9JvDy0Jx3kQ3M9aWmZ1cz\n')
    known.chmod(0o600)
    # 10.0.0.1 is not in known_hosts: no ssh is started (there is no host there either), the mirror serves
    peers = [{'name': 'a', 'address': '10.0.0.1', 'have': True}, {'name': 'b', 'address': '10.0.0.2', 'have': False}]
    result = run(tmp_path, **args_for(tmp_path, server, manifest, host='b', peers=peers, known_hosts=str(known)))
    assert result['state'] == 'synced' and result['source'] == 'mirror', result
    assert result['fallback'].startswith('a: its host key is not in %s' % known) and 'not connected to' in result['fallback']
    alone = run(tmp_path, dest=str(tmp_path / 'other' / 'v1'), version='v1', manifest=manifest, host='b', peers=peers,
                known_hosts=str(known))
    assert alone['failed'] and 'The peer a that was to serve version v1 was not used: its host key is not in' in alone['msg']


@pytest.mark.parametrize('more, fragment', [
    ({'ssh_user': 'root'}, 'ssh_user: peer transfers never log in as root'),
    ({'ssh_options': ['-o', 'StrictHostKeyChecking=accept-new']}, 'ssh_options: '),
    ({'ssh_options': ['-oUserKnownHostsFile=/dev/null']}, 'host key checking is fixed'),
])
def test_root_logins_and_host_key_overrides_are_refused(tmp_path, mirror, run, more, fragment):
    server, _source, manifest = mirror
    result = run(tmp_path, **args_for(tmp_path, server, manifest, **more))
    assert result['failed'] and fragment in result['msg'], result
    assert server.sent == {}


def test_a_versions_directory_others_can_write_is_refused_before_anything_is_written(tmp_path, mirror, run):
    server, _source, manifest = mirror
    versions = tmp_path / 'versions'
    versions.mkdir()
    versions.chmod(0o777)
    result = run(tmp_path, **args_for(tmp_path, server, manifest))
    assert result['failed'] and 'Refusing to write through %s (the versions directory)' % versions in result['msg']
    assert 'writable by its group or others (mode 0777)' in result['msg'], result
    assert server.sent == {} and os.listdir(str(versions)) == []


def test_a_staging_directory_replaced_by_a_symlink_is_refused(tmp_path, mirror, run):
    server, _source, manifest = mirror
    versions = tmp_path / 'versions'
    elsewhere = tmp_path / 'elsewhere'
    versions.mkdir()
    elsewhere.mkdir()
    os.symlink(str(elsewhere), str(versions / '.staging-v1'))
    result = run(tmp_path, **args_for(tmp_path, server, manifest))
    assert result['failed'] and 'is a symlink: the sync writes only into directories it made' in result['msg'], result
    assert server.sent == {} and os.listdir(str(elsewhere)) == []


def test_files_are_hashed_in_the_background_and_a_digest_counts_only_for_the_file_hashed(tmp_path):
    """The background hasher (model_sync_adapters.Hasher) behind hash_soon: digests of files that arrived whole, in
    order, on its own thread; a file changed since it was hashed (bytes overwritten in place: its mtime moves) or
    gone gives no digest, so the check hashes it again."""
    from ansible_collections.llmops.sglang.plugins.module_utils.model.checkpoint_adapters import sha256_file
    from ansible_collections.llmops.sglang.plugins.module_utils.model.model_sync_adapters import Hasher
    first, second = tmp_path / 'a', tmp_path / 'b'
    first.write_bytes(b'x' * 100000)
    second.write_bytes(b'y' * 100000)
    hasher = Hasher(sha256_file)
    one, two = hasher.submit(str(first)), hasher.submit(str(second))
    assert one() == hashlib.sha256(b'x' * 100000).hexdigest()
    assert two() == hashlib.sha256(b'y' * 100000).hexdigest()
    with open(str(second), 'r+b') as handle:
        handle.seek(500)
        handle.write(b'z')
    os.utime(str(second), ns=(1, 1))
    assert two() is None
    assert hasher.submit(str(tmp_path / 'missing'))() is None
