# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the integration tests share about llmops.sglang.server on a fleet host (one place, imported by the tests):
the role's test playbook and its variables, the stand-in's K2.6-shaped checkpoint, and what a test reads back from a
host (the PLAY RECAP, unit properties, a venv's package versions, a real completion)."""

from __future__ import absolute_import, division, print_function

import json
import re

__metaclass__ = type  # pylint: disable=invalid-name

PLAYBOOK = 'tests/integration/playbooks/server_role.yml'
MODEL = '/models/k26'
VENV = '/opt/sglang/venv'  # where standin_venv() (conftest) installs the stand-in
PACE = '0.01'  # a 600 GB load in about 4 s
SERVER_ARGS = {'trust-remote-code': True, 'tool-call-parser': 'kimi_k2', 'reasoning-parser': 'kimi_k2'}
RECAP = re.compile(r'^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)\s+'
                   r'failed=(?P<failed>\d+)', re.M)


def flat(text):
    """The output with every run of whitespace made one space (the result callback wraps long messages)."""
    return ' '.join(text.split())


def make_model(owner, host, path=MODEL, shards=4):
    """A K2.6-shaped checkpoint (kimi_k2, nvfp4-pack-quantized, valid safetensors shards) at `path` on the host,
    made by the stand-in's own tool from the venv standin_venv() installed."""
    owner.run(host, [VENV + '/bin/python', '-m', 'sglang_standin.make_model', path, '--arch', 'kimi_k2',
                     '--quant', 'nvfp4-pack-quantized', '--shards', str(shards)], check=True)


def recap(result, host):
    for match in RECAP.finditer(result.stdout):
        if match.group('host') == host:
            return dict((k, int(v)) for k, v in match.groupdict().items() if k != 'host')
    raise AssertionError('no PLAY RECAP line for %s in\n%s' % (host, result))


def role_vars(host, name, port, **overrides):
    values = {
        'target_hosts': host.name,
        'sglang_service_name': name,
        'sglang_port': port,
        'sglang_model_path': MODEL,
        'sglang_served_model_name': 'kimi-k2.6',
        'sglang_tp_size': 8,
        'sglang_user': 'root',
        'sglang_group': 'root',
        'sglang_server_args': dict(SERVER_ARGS),
        'sglang_env': {'SGLANG_STANDIN_PACE': PACE},
        'sglang_wait': {'timeout': 120, 'stall_timeout': 60},
    }
    values.update(overrides)
    return values


def unit_show(fleet, host, unit, *props):
    out = fleet.run(host, ['systemctl', 'show', '-p', ','.join(props), unit], check=True).stdout
    return dict(line.split('=', 1) for line in out.splitlines() if '=' in line)


def venv_version(fleet, host, package):
    out = fleet.run(host, [VENV + '/bin/python', '-c',
                           'import importlib.metadata as m, sys\ntry: print(m.version(sys.argv[1]))\nexcept Exception: print("absent")',
                           package], check=True).stdout
    return out.strip()


def completion(fleet, host, port, model='kimi-k2.6', api_key=None):
    """A real chat completion from the host itself, as JSON (or the curl-less python equivalent)."""
    script = ('import json, sys, urllib.request\n'
              'req = urllib.request.Request("http://127.0.0.1:%d/v1/chat/completions", method="POST",\n'
              '  data=json.dumps({"model": %r, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}).encode(),\n'
              '  headers=dict([("Content-Type", "application/json")] + (%r and [("Authorization", "Bearer " + %r)] or [])))\n'
              'print(urllib.request.urlopen(req, timeout=10).read().decode())\n') % (port, model, api_key or '', api_key or '')
    return json.loads(fleet.run(host, ['python3', '-c', script], check=True).stdout)
