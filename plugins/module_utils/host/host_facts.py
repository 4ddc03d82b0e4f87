# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers behind llmops.sglang.sglang_info: the venv probe, checkpoint completeness, listening ports, argv.

No I/O here: the module runs the commands and reads the files, these functions interpret what came back.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.llmops.sglang.plugins.module_utils.host.procfs import listening_sockets
from ansible_collections.llmops.sglang.plugins.module_utils.secret_flags import REDACTED, SECRET_ARGV_FLAGS

# Packages whose versions decide whether a K2.6 launch works (compressed-tensors: nvfp4; torch: CUDA build).
DEFAULT_PACKAGES = ('sglang', 'compressed-tensors', 'torch', 'transformers', 'sgl-kernel', 'flashinfer-python', 'pip')

# Run by the venv's own Python: everything comes from metadata, nothing is imported (importing sglang loads torch:
# seconds of CPU on every poll of a fleet).
VENV_PROBE = r'''
import importlib.util, json, os, sys, sysconfig
try:
    from importlib import metadata
except ImportError:
    metadata = None
names = json.loads(sys.argv[1])
versions = {}
for name in names:
    try:
        versions[name] = metadata.version(name) if metadata else None
    except Exception:
        versions[name] = None
include = sysconfig.get_paths().get("include") or ""
print(json.dumps({
    "python_version": "%d.%d.%d" % sys.version_info[:3],
    "executable": sys.executable,
    "base_prefix": sys.base_prefix,
    "include_dir": include,
    "python_h": os.path.exists(os.path.join(include, "Python.h")),
    "pip": importlib.util.find_spec("pip") is not None,
    "packages": versions,
}))
'''


def parse_venv_probe(stdout):
    """The probe's JSON -> dict with python_major_minor added; raises ValueError on anything else."""
    data = json.loads(stdout)
    if not isinstance(data, dict) or 'python_version' not in data:
        raise ValueError('unexpected venv probe output: %r' % stdout[:200])
    data['python_major_minor'] = '.'.join(data['python_version'].split('.')[:2])
    return data


def checkpoint_status(config_present, index_text, present_files):
    """Whether a model directory is complete.

    ``index_text`` is the content of ``model.safetensors.index.json`` (None when absent); ``present_files`` the
    names of the files in the directory. Returns {complete, config, index, shards_expected, shards_missing, problem}.
    """
    status = {'config': bool(config_present), 'index': index_text is not None,
              'shards_expected': 0, 'shards_missing': [], 'problem': ''}
    if not config_present:
        status['problem'] = 'config.json is missing'
    if index_text is not None:
        try:
            weight_map = json.loads(index_text).get('weight_map', {})
            shards = sorted(set(weight_map.values()))
        except (ValueError, AttributeError) as exc:
            shards = []
            status['problem'] = status['problem'] or 'model.safetensors.index.json is not valid JSON: %s' % exc
        present = set(present_files)
        status['shards_expected'] = len(shards)
        status['shards_missing'] = [s for s in shards if s not in present]
        if status['shards_missing'] and not status['problem']:
            status['problem'] = '%d of %d shards named in model.safetensors.index.json are missing (first: %s)' % (
                len(status['shards_missing']), len(shards), status['shards_missing'][0])
    elif not any(name.endswith('.safetensors') or name.endswith('.bin') for name in present_files):
        status['problem'] = status['problem'] or 'no weight files (*.safetensors, *.bin) and no safetensors index'
    status['complete'] = not status['problem']
    return status


def listening_ports(proc_net_text):
    """Local ports in LISTEN state in the text of /proc/net/tcp or /proc/net/tcp6."""
    return set(listening_sockets(proc_net_text))


def redact_argv(argv):
    """argv with the values of secret flags replaced (both ``--api-key X`` and ``--api-key=X``)."""
    out = []
    hide_next = False
    for word in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag, eq, _value = word.partition('=')
        if flag in SECRET_ARGV_FLAGS:
            if eq:
                out.append(flag + '=' + REDACTED)
            else:
                out.append(word)
                hide_next = True
            continue
        out.append(word)
    return out


def parse_cmdline(raw):
    """/proc/PID/cmdline bytes or text -> argv list."""
    if isinstance(raw, bytes):
        raw = raw.decode('utf-8', 'replace')
    if raw.endswith('\0'):
        raw = raw[:-1]
    return raw.split('\0') if raw else []
