# -*- coding: utf-8 -*-
"""sglang_observe run for real on this machine through ansible: digests, last-good equality and digests, what is
missing, an instance's checkpoint and port."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from ansible_collections.llmops.sglang.plugins.module_utils.secret_flags import secrets_digest

ROOT = Path(__file__).resolve().parents[4]
ANSIBLE = Path(sys.executable).parent / 'ansible'


def run_observe(module_args, *options):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / '.build' / 'collections'), ANSIBLE_LOCALHOST_WARNING='0',
               ANSIBLE_INVENTORY_UNPARSED_WARNING='0', ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    return subprocess.run([str(ANSIBLE), 'localhost', '-c', 'local', '-m', 'llmops.sglang.sglang_observe', '-o',
                           '-a', json.dumps(module_args)] + list(options), capture_output=True, text=True, env=env,
                          timeout=600, check=False, cwd=str(ROOT))


def observe(module_args):
    done = run_observe(module_args)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.split(' => ', 1)[1])


def test_one_call_sees_files_last_good_and_what_is_missing(tmp_path):
    live, saved = tmp_path / 'etc', tmp_path / 'last-good'
    live.mkdir()
    saved.mkdir()
    (live / 'unit').write_text('[Unit]\n')
    (saved / 'unit').write_text('[Unit]\n')
    (live / 'env').write_text('A=1\n')
    (saved / 'env').write_text('A=2\n')
    (saved / 'pins.json').write_text('{"sglang": "0.5.23"}')
    files = {'unit': str(live / 'unit'), 'env': str(live / 'env'), 'secrets.env': str(live / 'secrets.env'),
             'shim': str(live / 'shim.py')}
    result = observe({
        'instances': [{'unit': 'llmops-no-such-unit.service', 'files': files, 'last_good_dir': str(saved),
                       'mtimes': [str(live / 'unit'), str(live / 'nope')]}],
        'venvs': [str(Path(sys.executable).parent.parent)],
        'packages': ['pytest', 'no-such-distribution'],
        'directories': [str(live), str(tmp_path / 'absent')],
        'users': ['root', 'llmops-no-such-user'], 'groups': ['llmops-no-such-group'],
        'secrets_key': 'k' * 64,
    })
    seen = result['instances']['llmops-no-such-unit.service']
    assert seen['files'] == {'unit': hashlib.sha1(b'[Unit]\n').hexdigest(), 'env': hashlib.sha1(b'A=1\n').hexdigest(),
                             'secrets.env': None, 'shim': None}
    assert seen['service']['exists'] is False and seen['service']['started_at'] is None
    assert seen['last_good'] == {'exists': True, 'same': {'unit': True, 'env': False, 'secrets.env': True},
                                 'digests': {'unit': hashlib.sha1(b'[Unit]\n').hexdigest(),
                                             'env': hashlib.sha1(b'A=2\n').hexdigest(), 'secrets.env': None},
                                 'pins': {'sglang': '0.5.23'}}
    assert seen['mtimes'][0] == os.stat(str(live / 'unit')).st_mtime and seen['mtimes'][1] is None
    venv = result['venvs'][str(Path(sys.executable).parent.parent)]
    assert venv['packages']['pytest'] and venv['packages']['no-such-distribution'] is None
    assert result['missing'] == [str(tmp_path / 'absent'), 'user llmops-no-such-user', 'group llmops-no-such-group']
    assert result['changed'] is False


def test_an_instances_checkpoint_and_port_only_when_asked(tmp_path):
    model = tmp_path / 'model'
    model.mkdir()
    (model / 'config.json').write_text('{}')
    (model / 'model.safetensors.index.json').write_text(json.dumps({'weight_map': {'w1': 'a.safetensors',
                                                                                   'w2': 'b.safetensors'}}))
    (model / 'a.safetensors').write_text('x')
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(('127.0.0.1', 0))
    listener.listen(1)
    busy = listener.getsockname()[1]
    free = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    free.bind(('127.0.0.1', 0))  # bound, never listening: nothing listens on it while the module runs
    idle = free.getsockname()[1]
    try:
        result = observe({'instances': [
            {'unit': 'llmops-a.service', 'files': {}, 'model_path': str(model), 'port': busy},
            # A port as a string, as a template may render it.
            {'unit': 'llmops-b.service', 'files': {}, 'model_path': str(tmp_path / 'none'), 'port': str(idle)},
            {'unit': 'llmops-c.service', 'files': {}},
        ]})
    finally:
        listener.close()
        free.close()
    seen = result['instances']
    assert seen['llmops-a.service']['port_in_use'] is True
    assert seen['llmops-a.service']['model']['exists'] is True and seen['llmops-a.service']['model']['complete'] is False
    assert seen['llmops-a.service']['model']['shards_missing'] == ['b.safetensors']
    assert seen['llmops-b.service']['port_in_use'] is False
    assert seen['llmops-b.service']['model'] == {'path': str(tmp_path / 'none'), 'exists': False, 'marker': False,
                                                 'complete': False, 'problem': '%s is not a directory' % (tmp_path / 'none')}
    assert seen['llmops-c.service']['model'] == {} and seen['llmops-c.service']['port_in_use'] is None
    (model / 'b.safetensors').write_text('y')
    again = observe({'instances': [{'unit': 'llmops-a.service', 'files': {}, 'model_path': str(model)}]})
    assert again['instances']['llmops-a.service']['model']['complete'] is True
    assert again['instances']['llmops-a.service']['model']['marker'] is False
    # the marker sglang_model_sync writes once it verified a version (model_sync.yml reads it from here)
    (model / '.llmops-model.json').write_text('{}')
    synced = observe({'instances': [{'unit': 'llmops-a.service', 'files': {}, 'model_path': str(model)}]})
    assert synced['instances']['llmops-a.service']['model']['marker'] is True


def test_a_malformed_instance_is_refused_naming_it():
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / '.build' / 'collections'), ANSIBLE_LOCALHOST_WARNING='0',
               ANSIBLE_INVENTORY_UNPARSED_WARNING='0', ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    done = subprocess.run([str(ANSIBLE), 'localhost', '-c', 'local', '-m', 'llmops.sglang.sglang_observe', '-o',
                           '-a', json.dumps({'instances': [{'files': {}}]})], capture_output=True, text=True, env=env,
                          timeout=600, check=False, cwd=str(ROOT))
    assert done.returncode != 0 and 'instances[0]: expected a dict with unit' in done.stdout, done.stdout
    done = subprocess.run([str(ANSIBLE), 'localhost', '-c', 'local', '-m', 'llmops.sglang.sglang_observe', '-o',
                           '-a', json.dumps({'instances': [{'unit': 'a.service', 'port': 'http'}]})], capture_output=True,
                          text=True, env=env, timeout=600, check=False, cwd=str(ROOT))
    assert done.returncode != 0 and 'instances[0]: expected a dict with unit' in done.stdout, done.stdout
    assert 'optionally port (an int)' in done.stdout, done.stdout


def test_the_secrets_files_digests_are_keyed_and_the_key_is_never_shown(tmp_path):
    """A plain SHA-1 of a secrets file in a result could be tested offline against guesses of a short API key: the
    live and saved secrets files' digests are HMAC-SHA256 under secrets_key, which no output shows, and without the key
    a secrets file is not digested at all."""
    live, saved = tmp_path / 'etc', tmp_path / 'last-good'
    live.mkdir()
    saved.mkdir()
    (live / 'secrets.env').write_text('SGLANG_API_KEY="short"\n')
    (saved / 'secrets.env').write_text('SGLANG_API_KEY="older"\n')
    (live / 'env').write_text('A=1\n')
    key = 'c0ffee' * 8
    files = {'env': str(live / 'env'), 'secrets.env': str(live / 'secrets.env')}
    args = {'instances': [{'unit': 'llmops-s.service', 'files': files, 'last_good_dir': str(saved)}], 'secrets_key': key}
    done = run_observe(args, '-vvv')
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.split(' => ', 1)[1])['instances']['llmops-s.service']
    assert seen['files']['secrets.env'] == secrets_digest(b'SGLANG_API_KEY="short"\n', key)
    assert seen['files']['env'] == hashlib.sha1(b'A=1\n').hexdigest()   # only the secrets file is keyed
    assert seen['last_good']['digests']['secrets.env'] == secrets_digest(b'SGLANG_API_KEY="older"\n', key)
    assert seen['last_good']['same']['secrets.env'] is False
    output = done.stdout + done.stderr
    for plain in (b'SGLANG_API_KEY="short"\n', b'SGLANG_API_KEY="older"\n'):
        assert hashlib.sha1(plain).hexdigest() not in output and hashlib.sha256(plain).hexdigest() not in output
    # the key itself: nowhere; masked where ansible-core prints the invocation (2.19 at -vvv; 2.21 does not print it)
    assert key not in output, output
    assert '"invocation"' not in output or 'VALUE_SPECIFIED_IN_NO_LOG_PARAMETER' in output, output
    refused = run_observe(dict(args, secrets_key=None))
    assert refused.returncode != 0
    assert 'instances[0] (llmops-s.service) lists a secrets.env file: secrets_key is required' in refused.stdout, refused.stdout
