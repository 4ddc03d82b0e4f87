# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The forced command's `follow` (roles/server/files/llmops_sglang_sync_serve.py) on a real tree: it serves a file
that is still arriving in the peer's staging directory (a writer thread appends to it), stops at the size the
reader gave, keeps to the rate asked, and ends with an error when the peer's own sync failed or nothing arrived
for the stall period. Its refusals keep the read's: no symlink followed, no staging path in a request. (Threads and
real sleeps: tests/local, not tests/unit.)"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.machinery
import importlib.util
import os
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))
SCRIPT = os.path.join(ROOT, 'roles', 'server', 'files', 'llmops_sglang_sync_serve.py')


@pytest.fixture
def serve(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, 'plugins', 'module_utils', 'model'))
    loader = importlib.machinery.SourceFileLoader('llmops_sglang_sync_serve_follow', SCRIPT)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    script = importlib.util.module_from_spec(spec)
    loader.exec_module(script)
    roots = tmp_path / 'roots.d'
    roots.mkdir()
    versions = tmp_path / 'k26.versions'
    (roots / 'k26').write_text('%s\n' % versions)
    monkeypatch.setattr(script, 'ROOTS', str(roots))
    logged = []
    monkeypatch.setattr(script.syslog, 'syslog', lambda _prio, text: logged.append(text))
    (versions / 'v1').mkdir(parents=True)
    (versions / 'v1' / 'config.json').write_bytes(b'0123456789')
    (versions / 'v1' / '.llmops-model.json').write_text('{}')
    (versions / '.staging-v2').mkdir()
    secret = tmp_path / 'secret'
    secret.write_text('secret')
    os.symlink(str(secret), str(versions / '.staging-v2' / 'escape'))
    return script, versions, logged


def test_a_file_of_a_complete_version_is_followed_up_to_the_size(serve, capfd):
    script, versions, logged = serve
    assert script.serve('follow 2 10 5 0 %s/v1/config.json' % versions) == 0
    assert capfd.readouterr().out == '23456789'
    assert logged == ['follow %s/v1/config.json from byte 2 to 10' % versions]


def test_a_file_still_arriving_is_sent_as_it_lands_and_only_up_to_the_size_asked(serve, capfd):
    script, versions, _logged = serve
    growing = versions / '.staging-v2' / 'w.bin'

    def arrive():
        time.sleep(0.3)  # the file does not exist yet when the follow starts
        with open(str(growing), 'ab', buffering=0) as handle:
            for piece in (b'aaaa', b'bbbb', b'ccccEXTRA'):
                handle.write(piece)
                time.sleep(0.2)

    writer = threading.Thread(target=arrive)
    writer.start()
    started = time.monotonic()
    assert script.serve('follow 0 12 5 0 %s/v2/w.bin' % versions) == 0
    writer.join()
    assert capfd.readouterr().out == 'aaaabbbbcccc'
    assert time.monotonic() - started >= 0.6  # it waited for the bytes, it did not end at the first empty read


def test_a_follow_ends_with_an_error_when_the_peer_s_own_sync_failed(serve, capfd):
    script, versions, logged = serve
    (versions / '.staging-v2' / 'w.bin').write_bytes(b'abc')
    (versions / '.staging-v2' / '.sync-failed').write_text('failed\n')
    assert script.serve('follow 0 10 5 0 %s/v2/w.bin' % versions) == 2
    out = capfd.readouterr()
    assert out.out == 'abc' and 'own sync of v2 failed at byte 3' in out.err and 'refused' in out.err


def test_a_follow_ends_with_an_error_when_nothing_arrives_for_the_stall_period(serve, capfd):
    script, versions, _logged = serve
    (versions / '.staging-v2' / 'w.bin').write_bytes(b'abc')
    started = time.monotonic()
    assert script.serve('follow 1 10 1 0 %s/v2/w.bin' % versions) == 2
    out = capfd.readouterr()
    assert out.out == 'bc' and 'stalled at byte 3 of 10, nothing arrived for 1s' in out.err
    assert 1.0 <= time.monotonic() - started < 5


@pytest.mark.parametrize('request_text, why', [
    ('follow 0 6 1 0 {v}/v2/escape', 'symlinks below'),
    ('follow 0 6 1 0 {v}/.staging-v2/escape', 'staging and hidden directories are not served'),
    ('follow 0 6 1 0 {v}/../secret', 'not normalized'),
])
def test_a_follow_is_refused_like_a_read_with_nothing_on_stdout(serve, capfd, request_text, why):
    script, versions, logged = serve
    assert script.serve(request_text.format(v=versions)) == 2
    out = capfd.readouterr()
    assert out.out == '' and why in out.err, out
    assert logged[-1].startswith('refused: ')


def test_a_follow_keeps_to_the_rate_asked(serve, capfd):
    script, versions, _logged = serve
    (versions / '.staging-v2' / 'big.bin').write_bytes(b'x' * (3 << 20))
    monkey_chunk = script.CHUNK
    script.CHUNK = 1 << 20
    started = time.monotonic()
    assert script.serve('follow 0 %d 5 %d %s/v2/big.bin' % (3 << 20, 4 << 20, versions)) == 0
    script.CHUNK = monkey_chunk
    assert len(capfd.readouterr().out) == 3 << 20
    assert time.monotonic() - started >= 0.7  # 3 MiB at 4 MiB/s: 0.75 s (unpaced it takes milliseconds)
