# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test helpers the plugin tests share (imported from here, never from another test module): a chat completion body,
a module's main() run in-process, a small checkpoint of whole safetensors shards. Pure: no server, process or PATH
stand-in (those are local tests', tests/local/plugins/servers.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import struct

import pytest


def chat_body(content='OK', reasoning=None, tokens=2, choices=True):
    msg = {'role': 'assistant', 'content': content}
    if reasoning is not None:
        msg['reasoning_content'] = reasoning
    body = {'id': 'x', 'object': 'chat.completion', 'model': 'kimi-k2.6',
            'choices': [{'index': 0, 'message': msg, 'finish_reason': 'length'}] if choices else [],
            'usage': {'prompt_tokens': 9, 'completion_tokens': tokens, 'total_tokens': 9 + (tokens or 0)}}
    if tokens is None:
        del body['usage']
    return body


def run_module(module, args, capsys, check_mode=False):
    """module.main() run for real with args (exiting through AnsibleModule, so no_log masking is exercised): the
    JSON it printed, plus `_rc` (its exit code) and `_raw` (the printed text)."""
    from ansible.module_utils.testing import patch_module_args
    args = dict(args)
    if check_mode:
        args['_ansible_check_mode'] = True
    with patch_module_args(args):
        with pytest.raises(SystemExit) as exc:
            module.main()
    out = capsys.readouterr().out
    result = json.loads(out)
    result['_rc'] = exc.value.code
    result['_raw'] = out
    return result


def make_model(path, shards=3, nbytes=4096):
    """A checkpoint directory at path (a pathlib.Path) of whole safetensors shards; returns its manifest."""
    path.mkdir()
    manifest = {}
    for i in range(1, shards + 1):
        header = json.dumps({'w': {'dtype': 'U8', 'shape': [nbytes], 'data_offsets': [0, nbytes]}}).encode()
        header += b' ' * (-len(header) % 8)
        data = struct.pack('<Q', len(header)) + header + bytes(bytearray((i * j) % 251 for j in range(nbytes)))
        name = 'model-%05d-of-%05d.safetensors' % (i, shards)
        (path / name).write_bytes(data)
        manifest[name] = {'size': len(data), 'sha256': hashlib.sha256(data).hexdigest()}
    return manifest


def preflight_model(tmp_path):
    """A checkpoint for sglang_preflight's checkpoint gate: its path, manifest and the digest cache's path."""
    manifest = make_model(tmp_path / 'model')
    state = tmp_path / 'state'
    state.mkdir()
    return {'path': str(tmp_path / 'model'), 'manifest': manifest, 'cache': str(state / '.preflight' / 'verified.json')}


def preflight_args(model, **extra):
    """sglang_preflight's arguments for the checkpoint gate of ``model`` (preflight_model), with ``extra``."""
    args = {'unit': 'u.service', 'checks': ['checkpoint'], 'model_path': model['path'], 'manifest': model['manifest'],
            'cache_path': model['cache'], 'growth_interval': 0}
    args.update(extra)
    return args
