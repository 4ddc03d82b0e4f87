# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One model sync's decisions (module_utils/model/model_sync) and order (model_sync_driver) on fakes: an in-memory
directory tree, a mirror and peers that answer from a script, and a fake clock (the peer wait sleeps on it only)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import struct

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.model import checkpoint, model_sync, model_sync_driver
from ansible_collections.llmops.sglang.plugins.module_utils.model.model_sync import TransferError

VERSIONS = '/models/k.versions'
DEST = VERSIONS + '/v1'
STAGING = VERSIONS + '/.staging-v1'


def shard(i, nbytes=100):
    header = json.dumps({'w': {'dtype': 'U8', 'shape': [nbytes], 'data_offsets': [0, nbytes]}}).encode()
    header += b' ' * (-len(header) % 8)
    return struct.pack('<Q', len(header)) + header + bytes(bytearray((i * j) % 251 for j in range(nbytes)))


SOURCE = {'model-00001-of-00002.safetensors': shard(1), 'model-00002-of-00002.safetensors': shard(2),
          'config.json': b'{"architectures": ["X"]}'}
MANIFEST = dict((n, {'size': len(d), 'sha256': hashlib.sha256(d).hexdigest()}) for n, d in SOURCE.items())


class FakeClock(object):
    def __init__(self, now=1000.0):
        self.now = now
        self.sleeps = []

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


class FakeProgress(object):
    def __init__(self):
        self.states = []
        self.started = None
        self.done = 0

    def set(self, force=False, **fields):
        if force and 'state' in fields:
            self.states.append(fields['state'])

    def add(self, n):
        self.done += n


class FakeFiles(object):
    """Files as {path: bytes}, directories as a set, symlinks and unsafe paths as given; nothing touches a disk."""

    def __init__(self, files=None, dirs=(VERSIONS,), links=(), unsafe=None):
        self.files = dict(files or {})
        self.dirs = set(dirs)
        self.links = set(links)
        self.unsafe_paths = dict(unsafe or {})
        self.progress_made = FakeProgress()
        self.published = None
        self.cache = None

    def exists(self, path):
        return path in self.files or path in self.dirs

    def lexists(self, path):
        return self.exists(path) or path in self.links

    def islink(self, path):
        return path in self.links

    def getsize(self, path):
        if path not in self.files:
            raise OSError('No such file or directory: %r' % path)
        return len(self.files[path])

    def unlink(self, path):
        del self.files[path]

    def unsafe(self, path):
        return self.unsafe_paths.get(path)

    def make_dirs(self, path):
        self.dirs.add(os.path.normpath(path))

    def read_text(self, path):
        return self.files[path].decode() if path in self.files else None

    def write_text(self, path, text):
        self.files[path] = text.encode()

    def sizes(self, staging, manifest):
        return dict((n, len(self.files[os.path.join(staging, n)])) for n in manifest if os.path.join(staging, n) in self.files)

    def shard_problem(self, full):
        data = self.files[full]
        n = checkpoint.header_length(data[:8])
        return checkpoint.safetensors_problem(data[:8], data[8:8 + (n or 0)], len(data))

    def sha256(self, full):
        return hashlib.sha256(self.files[full]).hexdigest()

    def publish(self, staging, dest, marker):
        self.files[os.path.join(staging, model_sync.MARKER)] = marker.encode()
        for path in [p for p in self.files if p.startswith(staging + '/')]:
            self.files[dest + path[len(staging):]] = self.files.pop(path)
        self.dirs.discard(staging)
        self.dirs.add(dest)
        self.published = dest

    def record_cache(self, path, dest, digests):
        self.cache = (path, dest, digests)
        return 'written'

    def progress(self, path, total, source, wave):
        self.progress_made.total = total
        return self.progress_made


class FakeMirror(object):
    """Serves SOURCE; cut={file: bytes} ends a body early (as a closed connection does), sent records (file, offset)."""

    def __init__(self, files, source=None, cut=None, error=None):
        self.files = files
        self.source = dict(source or SOURCE)
        self.cut = dict(cut or {})
        self.error = error
        self.sent = []

    def fetch(self, name, path, offset, progress):
        if self.error:
            raise TransferError(self.error)
        data = self.source[name][offset:]
        if name in self.cut:
            data = data[:self.cut.pop(name)]
        self.sent.append((name, offset))
        self.files.files[path] = (self.files.files.get(path, b'')[:offset] if offset else b'') + data
        progress.add(len(data))
        return len(data)


class FakePeers(FakeMirror):
    """Answers `state` from a script (the last answer repeats) and serves like the mirror."""

    def __init__(self, files, states, **kw):
        super(FakePeers, self).__init__(files, **kw)
        self.states = list(states)
        self.asked = 0

    def state(self, address):
        self.asked += 1
        return self.states.pop(0) if len(self.states) > 1 else self.states[0]

    def fetch(self, address, name, path, offset, progress):  # pylint: disable=arguments-differ
        self.sent.append(address)
        return super(FakePeers, self).fetch(name, path, offset, progress)


def params(**more):
    out = {'dest': DEST + '/', 'version': 'v1', 'manifest': MANIFEST, 'mirror': 'http://mirror/v1', 'host': '', 'peers': [],
           'ssh_key': '/k', 'ssh_user': 'sglang-sync', 'known_hosts': '/kh', 'ssh_options': [], 'peer_wait': 60,
           'poll_interval': 2.0, 'timeout': 60, 'progress_file': None, 'cache_path': None, 'distribution': 'waves',
           'fanout': 1, 'rate_limit': 0}
    out.update(more)
    return out


PEERS = [{'name': 'a', 'address': '10.0.0.1', 'have': True}, {'name': 'b', 'address': '10.0.0.2', 'have': False}]


# ---- the peer wait ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize('state, now, step, why', [
    ('ready', 0, 'ready', None),
    ('pending', 10, 'wait', None),
    ('pending', 60, 'fallback', 'not ready after 60s'),
    ('failed', 0, 'fallback', 'its own sync failed'),
    ('unreachable: ssh: connect to host 10.0.0.1 port 22: Connection refused', 0, 'fallback',
     'ssh: connect to host 10.0.0.1 port 22: Connection refused'),
    ('refused: its host key does not match', 0, 'fallback', 'its host key does not match'),
    ('what?', 60, 'fallback', 'what?'),
])
def test_one_look_at_the_peer(state, now, step, why):
    assert model_sync.peer_wait(state, now, 60, 60) == (step, why)


def test_the_wait_polls_on_the_clock_until_the_peer_is_ready():
    clock = FakeClock()
    peers = FakePeers(None, ['pending', 'pending', 'pending', 'ready'])
    row = {'source': 'a', 'source_address': '10.0.0.1'}
    assert model_sync_driver.wait_for_peer(params(), row, peers, clock) is None
    assert clock.sleeps == [2.0, 2.0, 2.0] and peers.asked == 4


def test_the_wait_runs_out_after_peer_wait_seconds():
    clock = FakeClock()
    peers = FakePeers(None, ['pending'])
    row = {'source': 'a', 'source_address': '10.0.0.1'}
    assert model_sync_driver.wait_for_peer(params(peer_wait=9, poll_interval=2.0), row, peers, clock) == 'not ready after 9s'
    assert clock.sleeps == [2.0] * 5 and clock.now == 1010.0   # the look at 1010 is past the deadline of 1009


def test_a_peer_whose_sync_failed_hands_over_to_the_mirror_at_once():
    files = FakeFiles()
    peers = FakePeers(files, ['failed'])
    mirror = FakeMirror(files)
    clock = FakeClock()
    msg, result = model_sync_driver.run(params(host='b', peers=PEERS), files, mirror, peers, clock)
    assert msg is None and result['source'] == 'mirror' and result['fallback'] == 'a: its own sync failed'
    assert result['wave'] == 0 and clock.sleeps == [] and files.published == DEST
    assert files.progress_made.states == ['waiting', 'transferring', 'verifying', 'done']
    assert result['transferred_bytes'] == {'mirror': sum(len(d) for d in SOURCE.values())}


def test_without_a_mirror_the_fallback_fails_and_says_so_to_waiting_peers():
    files = FakeFiles()
    msg, result = model_sync_driver.run(params(host='b', peers=PEERS, mirror=''), files, FakeMirror(files),
                                        FakePeers(files, ['pending']), FakeClock())
    assert msg == model_sync.no_fallback('a', 'v1', 'not ready after 60s')
    assert result['fallback'] == 'a: not ready after 60s' and result['source'] == 'a'
    assert files.files[STAGING + '/' + model_sync.FAILED].decode() == msg + '\n'
    assert files.progress_made.states == ['waiting', 'failed']


def test_a_ready_peer_serves():
    files = FakeFiles()
    peers = FakePeers(files, ['ready'])
    msg, result = model_sync_driver.run(params(host='b', peers=PEERS), files, FakeMirror(files), peers, FakeClock())
    assert msg is None and result['source'] == 'a' and result['fallback'] == ''
    assert peers.sent.count('10.0.0.1') == len(SOURCE)


def test_with_a_rate_limit_a_waves_peer_serves_through_its_paced_follow():
    """`read` is not paced on the peer; `follow` is (the forced command, tests/local/.../test_sglang_model_sync_follow.py),
    and the source has the version whole, so the follow reads its complete files."""
    files = FakeFiles()
    peers = FakePeers(files, ['ready'])
    follows = []

    def follow(address, name, path, offset, size, progress):
        follows.append((address, name, offset, size))
        return FakeMirror.fetch(peers, name, path, offset, progress)

    peers.follow = follow
    msg, result = model_sync_driver.run(params(host='b', peers=PEERS, rate_limit=1000), files, FakeMirror(files), peers,
                                        FakeClock())
    assert msg is None and result['source'] == 'a'
    assert sorted(follows) == sorted(('10.0.0.1', name, 0, MANIFEST[name]['size']) for name in SOURCE)
    assert '10.0.0.1' not in peers.sent  # no unpaced read
    assert result['transferred_bytes'] == {'a': sum(len(d) for d in SOURCE.values())}


# ---- transfer and verification ---------------------------------------------------------------------------------

def test_a_closed_connection_is_an_interruption_and_the_rerun_resumes():
    files = FakeFiles()
    name = sorted(SOURCE)[1]
    mirror = FakeMirror(files, cut={name: 40})
    msg, result = model_sync_driver.run(params(), files, mirror, None, FakeClock())
    assert msg == model_sync.interrupted({'file': name, 'size': len(SOURCE[name])}, 'mirror', 40,
                                         'the connection ended after 40 bytes', STAGING)
    assert result['state'] == 'synced' and STAGING + '/' + model_sync.FAILED in files.files
    msg, result = model_sync_driver.run(params(), files, mirror, None, FakeClock())
    assert msg is None and [(f['file'], f['action'], f['offset']) for f in result['files']] == [
        ('config.json', 'have', len(SOURCE['config.json'])), (name, 'resume', 40), (sorted(SOURCE)[2], 'fetch', 0)]
    assert files.files[DEST + '/' + name] == SOURCE[name]
    assert STAGING + '/' + model_sync.FAILED not in files.files


def test_a_transfer_error_keeps_what_arrived():
    files = FakeFiles()
    msg, _result = model_sync_driver.run(params(), files, FakeMirror(files, error='GET x: timed out'), None, FakeClock())
    assert msg.startswith('Transfer of config.json from mirror interrupted at 0 of ') and 'GET x: timed out' in msg


def test_verification_removes_the_damaged_files_only():
    files = FakeFiles()
    name = sorted(SOURCE)[2]
    damaged = dict(SOURCE, **{name: SOURCE[name][:-1] + b'\x00'})
    msg, result = model_sync_driver.run(params(), files, FakeMirror(files, source=damaged), None, FakeClock())
    assert msg.startswith('Version v1 from mirror failed verification (those files were removed; run again to fetch them): ')
    assert '%s has sha256' % name in msg
    assert STAGING + '/' + name not in files.files and STAGING + '/config.json' in files.files
    assert files.published is None and result['verify_seconds'] == 0.0
    findings = [{'check': c, 'file': c} for c in ('shard_invalid', 'manifest_size', 'manifest_hash', 'manifest_missing')]
    assert model_sync.to_remove(findings) == ['shard_invalid', 'manifest_size', 'manifest_hash']


def test_published_whole_with_its_marker_and_the_digests_recorded():
    files = FakeFiles()
    msg, result = model_sync_driver.run(params(cache_path='/state/c.json'), files, FakeMirror(files), None, FakeClock())
    assert msg is None and result['cache'] == 'written' and result['state'] == 'synced'
    assert model_sync.marker_matches(files.read_text(DEST + '/' + model_sync.MARKER), MANIFEST)
    assert files.cache == ('/state/c.json', DEST, dict((n, e['sha256']) for n, e in MANIFEST.items()))
    mirror = FakeMirror(files)
    msg, again = model_sync_driver.run(params(), files, mirror, None, FakeClock())
    assert msg is None and (again['state'], again['changed'], again['source'], mirror.sent) == ('present', False, None, [])


# ---- before anything is written ----------------------------------------------------------------------------------

def test_check_mode_and_diff_transfer_nothing():
    files = FakeFiles()
    mirror = FakeMirror(files)
    msg, result = model_sync_driver.run(params(), files, mirror, None, FakeClock(), check_mode=True, diff=True)
    assert msg is None and result['state'] == 'would sync' and mirror.sent == [] and files.files == {}
    assert result['transferred_bytes'] == {'mirror': sum(len(d) for d in SOURCE.values())}
    assert result['diff']['after'] == {'version_dir': DEST, 'present': True, 'files': 3,
                                       'bytes': sum(len(d) for d in SOURCE.values())}


@pytest.mark.parametrize('more, fragment', [
    ({'ssh_user': 'root'}, 'ssh_user: peer transfers never log in as root'),
    ({'ssh_options': ['-oUserKnownHostsFile=/dev/null']}, 'ssh_options: '),
    ({'peers': [{'address': 'x'}]}, 'peers: every entry needs a name'),
    ({'manifest': {'a': {'size': 1}}}, "needs both size and sha256"),
])
def test_bad_options_fail_without_a_result(more, fragment):
    assert model_sync_driver.run(params(**more), FakeFiles(), None, None, FakeClock())[0].find(fragment) >= 0
    assert model_sync_driver.run(params(**more), FakeFiles(), None, None, FakeClock())[1] == {}


def test_unsafe_paths_and_symlinks_are_refused_before_anything_is_written():
    files = FakeFiles(unsafe={VERSIONS: 'writable by its group or others (mode 0777)'})
    msg, result = model_sync_driver.run(params(), files, FakeMirror(files), None, FakeClock())
    assert msg == 'Refusing to write through %s (the versions directory): writable by its group or others (mode 0777)' % VERSIONS
    assert result == {} and files.files == {}
    files = FakeFiles(links=[STAGING])
    msg, result = model_sync_driver.run(params(), files, FakeMirror(files), None, FakeClock())
    assert msg == '%s (the staging directory) is a symlink: the sync writes only into directories it made' % STAGING
    files = FakeFiles(files={DEST + '/x': b''}, dirs=[VERSIONS, DEST])
    msg, result = model_sync_driver.run(params(), files, FakeMirror(files), None, FakeClock())
    assert msg == model_sync.not_this_version(DEST, 'v1') and result['state'] == 'present' and result['changed'] is False


def test_no_source_at_all_and_a_peer_source_the_forced_command_would_refuse():
    row = {'source': None, 'wave': 0, 'source_address': None}
    assert 'sglang_model_source.mirror is not set' in model_sync.source_problem(row, DEST, MANIFEST, '', 'v1')
    assert model_sync.source_problem(row, DEST, MANIFEST, 'http://m', 'v1') is None
    peer = {'source': 'a', 'wave': 0, 'source_address': '10.0.0.1'}
    assert model_sync.source_problem(peer, '/models/k v/v1', MANIFEST, '', 'v1').startswith('No peer could serve this version')
    assert model_sync.short_transfer(10, 10, 3) is None
    assert model_sync.staging_subdirs([{'file': 'a/b.json'}, {'file': 'c'}, {'file': 'a/d'}]) == ['', 'a']


def test_an_untrusted_known_hosts_stops_a_peer_sync():
    files = FakeFiles(files={'/kh': b''}, unsafe={'/kh': 'owned by uid 1000'})
    msg, result = model_sync_driver.run(params(host='b', peers=PEERS), files, None, FakePeers(files, ['ready']), FakeClock())
    assert msg == 'known_hosts /kh is not trusted: owned by uid 1000' and result['source'] == 'a'


def test_the_host_key_and_the_peers_answer():
    assert model_sync.host_key_problem('/kh', None, 'Permission denied', '10.0.0.1', []).startswith(
        'known_hosts /kh cannot be read (Permission denied)')
    assert 'its host key is not in /kh' in model_sync.host_key_problem('/kh', '', None, '10.0.0.1', [])
    assert model_sync.peer_answer(0, 'ready\n', '') == 'ready'
    assert model_sync.peer_answer(255, '', 'Host key verification failed.').startswith('refused: ')
    assert model_sync.peer_answer(255, '', 'ssh: connect to host x port 22: No route to host').startswith('unreachable: ')
    argv = model_sync.ssh_argv(params(ssh_options=['-c', 'aes128-gcm@openssh.com']), '10.0.0.1', 'state /v')
    assert argv.index('StrictHostKeyChecking=yes') < argv.index('-c') and argv[-3:] == ['--', '10.0.0.1', 'state /v']
    assert not [a for a in argv if a.startswith('Control')]
    # one connection per peer for the run: the module's options (and the shared socket) before the operator's
    shared = model_sync.ssh_argv(params(ssh_options=['-p', '2222']), '10.0.0.1', 'state /v', '/tmp/d/%C')
    assert shared[shared.index('ControlMaster=auto') - 1] == '-o' and 'ControlPath=/tmp/d/%C' in shared
    assert shared.index('ControlPersist=%d' % model_sync.CONTROL_PERSIST) < shared.index('-p')
    assert model_sync.ssh_close_argv(params(ssh_options=['-p', '2222']), '10.0.0.1', '/tmp/d/%C') == [
        'ssh', '-o', 'ControlPath=/tmp/d/%C', '-p', '2222', '-O', 'exit', '-l', 'sglang-sync', '--', '10.0.0.1']


# ---- pipelined distribution ------------------------------------------------------------------------------------

class FollowPeers(FakeMirror):
    """Peers answering `follow`: per address, how many bytes of each file they can give before failing (None: all)."""

    def __init__(self, files, fail_after=None, damaged=None):
        super(FollowPeers, self).__init__(files)
        self.fail_after = dict(fail_after or {})
        self.damaged = dict(damaged or {})   # {address: {file: bytes it serves instead}}
        self.follows = []

    def state(self, address):
        raise AssertionError('a pipelined receiver does not wait for its source to finish')

    def follow(self, address, name, path, offset, size, progress):
        self.follows.append((address, name, offset))
        assert size == MANIFEST[name]['size']
        limit = self.fail_after.get(address)
        served = self.damaged.get(address, {}).get(name, SOURCE[name])
        data = served[offset:] if limit is None else served[offset:limit]
        self.files.files[path] = (self.files.files.get(path, b'')[:offset] if offset else b'') + data
        progress.add(len(data))
        if limit is not None and offset + len(data) < size:
            raise TransferError('ssh %s follow: it refused the request: stalled' % address)
        return len(data)


CHAIN = [{'name': 'a', 'address': '10.0.0.1', 'have': False}, {'name': 'b', 'address': '10.0.0.2', 'have': False},
         {'name': 'c', 'address': '10.0.0.3', 'have': False}]
FIRST = 'model-00001-of-00002.safetensors'


def test_pipelined_follows_its_source_without_waiting_and_publishes_verified():
    files = FakeFiles()
    mirror, peers = FakeMirror(files), FollowPeers(files)
    msg, result = model_sync_driver.run(params(host='c', peers=CHAIN, distribution='pipelined'), files, mirror, peers,
                                        FakeClock())
    assert msg is None, msg
    assert result['source'] == 'b' and result['wave'] == 2 and result['fallback'] == ''
    assert [f[0] for f in peers.follows] == ['10.0.0.2'] * 3 and mirror.sent == []
    assert result['transferred_bytes'] == {'b': sum(len(d) for d in SOURCE.values())}
    assert files.published == DEST


def test_pipelined_a_failed_source_hands_over_to_its_source_from_the_bytes_here():
    files = FakeFiles()
    mirror, peers = FakeMirror(files), FollowPeers(files, fail_after={'10.0.0.2': 40})
    msg, result = model_sync_driver.run(params(host='c', peers=CHAIN, distribution='pipelined'), files, mirror, peers,
                                        FakeClock())
    assert msg is None, msg
    # config.json is 25 bytes: whole from b; the first shard stops at 40 and continues from 40 at a, not from 0
    assert peers.follows == [('10.0.0.2', 'config.json', 0), ('10.0.0.2', FIRST, 0), ('10.0.0.1', FIRST, 40),
                             ('10.0.0.1', 'model-00002-of-00002.safetensors', 0)]
    assert result['source'] == 'a' and result['fallback'].startswith('b: ssh 10.0.0.2 follow')
    assert '%s at byte 40' % FIRST in result['fallback']
    assert mirror.sent == [] and files.published == DEST
    assert result['transferred_bytes']['b'] == len(SOURCE['config.json']) + 40


def test_pipelined_the_mirror_is_the_last_resort_and_without_one_the_host_fails_keeping_its_bytes():
    files = FakeFiles()
    mirror = FakeMirror(files)
    peers = FollowPeers(files, fail_after={'10.0.0.1': 30, '10.0.0.2': 20})
    msg, result = model_sync_driver.run(params(host='c', peers=CHAIN, distribution='pipelined'), files, mirror, peers,
                                        FakeClock())
    assert msg is None, msg
    # config.json (25 bytes): 20 from b, the rest from a; the shard: 30 from a, then the mirror from byte 30 (Range)
    assert peers.follows[:3] == [('10.0.0.2', 'config.json', 0), ('10.0.0.1', 'config.json', 20),
                                 ('10.0.0.1', FIRST, 0)]
    assert mirror.sent == [(FIRST, 30), ('model-00002-of-00002.safetensors', 0)]
    assert result['source'] == 'mirror' and files.published == DEST
    files = FakeFiles()
    peers = FollowPeers(files, fail_after={'10.0.0.1': 30, '10.0.0.2': 20})
    msg, result = model_sync_driver.run(params(host='c', peers=CHAIN, distribution='pipelined', mirror=''), files,
                                        None, peers, FakeClock())
    assert msg.startswith('Transfer of %s from a interrupted at 30 of' % FIRST), msg
    assert files.files[STAGING + '/.sync-failed'].startswith(msg[:40].encode())
    assert len(files.files[STAGING + '/' + FIRST]) == 30 and result['fallback'].startswith('b: ')


def test_pipelined_without_a_mirror_a_last_peer_that_sent_nothing_is_named_not_resumed():
    """Nothing came from the last source, a peer: 'run again to resume' would be the wrong advice (the waves' text)."""
    files = FakeFiles()
    peers = FollowPeers(files, fail_after={'10.0.0.1': 0, '10.0.0.2': 0})
    msg, result = model_sync_driver.run(params(host='c', peers=CHAIN, distribution='pipelined', mirror=''), files,
                                        None, peers, FakeClock())
    assert peers.follows == [('10.0.0.2', 'config.json', 0), ('10.0.0.1', 'config.json', 0)]
    assert msg == model_sync.no_fallback('a', 'v1', 'ssh 10.0.0.1 follow: it refused the request: stalled'), msg
    assert result['fallback'].startswith('b: ssh 10.0.0.2 follow')
    assert result['transferred_bytes'] == {}  # neither sent a byte: no entry of 0 for either


def corrupt(data, at):
    return data[:at] + bytes(bytearray([data[at] ^ 0xff])) + data[at + 1:]


def test_pipelined_a_file_that_fails_its_check_is_fetched_again_from_a_source_that_sent_none_of_it():
    files = FakeFiles()
    mirror = FakeMirror(files)
    # b passes on bytes it holds damaged (one byte flipped in the shard's data): c checks, removes it and takes it
    # again from byte 0 from a, which sent none of it; the version is published whole, the mirror never asked
    peers = FollowPeers(files, damaged={'10.0.0.2': {FIRST: corrupt(SOURCE[FIRST], len(SOURCE[FIRST]) - 5)}})
    msg, result = model_sync_driver.run(params(host='c', peers=CHAIN, distribution='pipelined'), files, mirror, peers,
                                        FakeClock())
    assert msg is None, msg
    assert peers.follows[-1] == ('10.0.0.1', FIRST, 0) and len(peers.follows) == 4
    assert mirror.sent == [] and files.published == DEST
    assert files.files[DEST + '/' + FIRST] == SOURCE[FIRST]
    assert result['refetched'] == ['%s from a (it failed its check with bytes from b)' % FIRST]
    total = sum(len(d) for d in SOURCE.values())
    assert result['transferred_bytes'] == {'b': total, 'a': len(SOURCE[FIRST])}
    assert files.cache is None or files.cache[2][FIRST] == MANIFEST[FIRST]['sha256']


def test_pipelined_refetch_goes_down_the_row_to_the_mirror_and_fails_when_every_source_sent_bad_bytes():
    bad = corrupt(SOURCE[FIRST], len(SOURCE[FIRST]) - 5)
    files = FakeFiles()
    mirror = FakeMirror(files)
    peers = FollowPeers(files, damaged={'10.0.0.2': {FIRST: bad}, '10.0.0.1': {FIRST: bad}})
    msg, result = model_sync_driver.run(params(host='c', peers=CHAIN, distribution='pipelined', cache_path='/c'),
                                        files, mirror, peers, FakeClock())
    assert msg is None, msg
    # a (sent none of it), then b again (its bytes may have been damaged on the way), then the mirror
    assert [f for f in peers.follows if f[1] == FIRST] == [
        ('10.0.0.2', FIRST, 0), ('10.0.0.1', FIRST, 0), ('10.0.0.2', FIRST, 0)]
    assert mirror.sent == [(FIRST, 0)] and files.published == DEST
    assert [r.split(' (')[0] for r in result['refetched']] == ['%s from %s' % (FIRST, s) for s in ('a', 'b', 'mirror')]
    assert result['refetched'][2].endswith('(it failed its check with bytes from b, a, b)')
    assert files.cache[2][FIRST] == MANIFEST[FIRST]['sha256']
    # without a mirror: the host fails naming the file, removes it, and leaves the failure note for its receivers
    files = FakeFiles()
    peers = FollowPeers(files, damaged={'10.0.0.2': {FIRST: bad}, '10.0.0.1': {FIRST: bad}})
    msg, result = model_sync_driver.run(params(host='c', peers=CHAIN, distribution='pipelined', mirror=''), files,
                                        None, peers, FakeClock())
    assert msg.startswith('Version v1 from b failed verification') and '%s has sha256' % FIRST in msg, msg
    assert STAGING + '/' + FIRST not in files.files and STAGING + '/.sync-failed' in files.files
    assert files.published is None and len(result['refetched']) == 2


def test_a_host_whose_own_copy_is_damaged_takes_it_again_from_the_peer_that_sent_it_before_the_mirror():
    chain = model_sync_driver.pipelined_sources(params(mirror='http://m'), {'sources': [
        {'name': 'a', 'address': '1'}, {'name': 'b', 'address': '2'}, {'name': None, 'address': None}]})
    assert [s['name'] for s in model_sync_driver.refetch_order(chain, ['a'])] == ['b', 'a', None]
    assert [s['name'] for s in model_sync_driver.refetch_order(chain, ['mirror'])] == ['a', 'b', None]
    assert [s['name'] for s in model_sync_driver.refetch_order(chain[:1], ['a'])] == ['a']


class EarlyFiles(FakeFiles):
    """Files whose digests are taken when each arrives whole (hash_soon), as the background hasher does."""

    def __init__(self, *args, **kw):
        super(EarlyFiles, self).__init__(*args, **kw)
        self.early = []
        self.late = []

    def hash_soon(self, path):
        self.early.append(os.path.basename(path))
        digest = hashlib.sha256(self.files[path]).hexdigest()
        return lambda: digest

    def sha256(self, full):
        self.late.append(os.path.basename(full))
        return super(EarlyFiles, self).sha256(full)


@pytest.mark.parametrize('distribution', ['waves', 'pipelined'])
def test_each_file_is_hashed_as_it_arrives_and_verification_takes_those_digests(distribution):
    files = EarlyFiles()
    peers = FollowPeers(files)
    msg, result = model_sync_driver.run(params(host='a', peers=CHAIN, distribution=distribution), files,
                                        FakeMirror(files), peers, FakeClock())
    assert msg is None and files.published == DEST, msg
    assert files.early == sorted(SOURCE) and files.late == []
    # a file whose early digest is wrong for the manifest is caught the same (the bytes changed after they came: the
    # early digest is of what arrived), and one fetched again is hashed anew at its check
    files = EarlyFiles()
    peers = FollowPeers(files, damaged={'10.0.0.2': {FIRST: corrupt(SOURCE[FIRST], len(SOURCE[FIRST]) - 5)}})
    msg, result = model_sync_driver.run(params(host='c', peers=CHAIN, distribution='pipelined'), files,
                                        FakeMirror(files), peers, FakeClock())
    assert msg is None and files.late == [FIRST] and result['refetched'], (msg, files.late)


def test_waves_do_not_refetch_a_damaged_file():
    files = FakeFiles()
    name = sorted(SOURCE)[2]
    damaged = dict(SOURCE, **{name: SOURCE[name][:-1] + b'\x00'})
    msg, result = model_sync_driver.run(params(), files, FakeMirror(files, source=damaged), None, FakeClock())
    assert msg.startswith('Version v1 from mirror failed verification') and 'refetched' not in result


@pytest.mark.parametrize('more, fragment', [
    ({'fanout': 0}, 'fanout: '),
    ({'fanout': 17}, 'fanout: '),
    ({'rate_limit': -1}, 'rate_limit: '),
    ({'timeout': 0}, 'timeout: '),
])
def test_bad_pipelined_options_name_the_option(more, fragment):
    msg, result = model_sync_driver.run(params(distribution='pipelined', **more), FakeFiles(), None, None, FakeClock())
    assert msg.startswith(fragment) and result == {}
