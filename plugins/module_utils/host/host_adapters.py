# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reads sglang_info and sglang_observe share: a file's text, a process's start time, a venv's facts (its Python
runs host_facts.VENV_PROBE), a unit's facts from `systemctl show`, and a last-known-good directory compared with
the live files; and sglang_info's own (a unit's restarts and argv, mtimes, a checkpoint directory, listening ports,
GPUs). What they return is parsed by the pure units (host_facts, systemd_props, rollout_state, nvidia_smi)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import hashlib
import json
import os
import time

from ansible_collections.llmops.sglang.plugins.module_utils.host.file_adapters import tree_records
from ansible_collections.llmops.sglang.plugins.module_utils.host.host_facts import (
    VENV_PROBE, checkpoint_status, listening_ports, parse_cmdline, parse_venv_probe, redact_argv,
)
from ansible_collections.llmops.sglang.plugins.module_utils.host.nvidia_smi import parse_query_gpu, query_cmd
from ansible_collections.llmops.sglang.plugins.module_utils.host.procfs import boot_time_of, process_started_at
from ansible_collections.llmops.sglang.plugins.module_utils.host.systemd_props import parse_show
from ansible_collections.llmops.sglang.plugins.module_utils.host.trust import record_of, tree_problems, tree_refusal
from ansible_collections.llmops.sglang.plugins.module_utils.secret_flags import SECRETS_FILE, secrets_digest

# What both modules read of a unit (sglang_info adds its own on top).
SERVICE_PROPERTIES = ('Id', 'LoadState', 'ActiveState', 'SubState', 'Result', 'MainPID', 'InvocationID',
                      'ActiveEnterTimestamp')


def read_text(path):
    """A file's text, None when it cannot be read."""
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def digest(path, key=None):
    """SHA-1 of a file's bytes (what ansible.builtin.template and copy compare), None when it does not exist; with
    key, the keyed digest of a secrets file (secret_flags.secrets_digest) instead."""
    try:
        with open(path, 'rb') as handle:
            data = handle.read()
    except (IOError, OSError):
        return None
    return secrets_digest(data, key) if key else hashlib.sha1(data).hexdigest()


def started_at(pid):
    """Epoch seconds the process started (for comparing with its configuration files' mtimes), None if unknown."""
    stat_text = read_text('/proc/%d/stat' % pid) if pid else None
    boot_time = boot_time_of(read_text('/proc/stat') or '')
    if not stat_text or boot_time is None:
        return None
    return process_started_at(stat_text, boot_time, os.sysconf('SC_CLK_TCK'))


def unit_facts(props):
    """The facts both modules report of a unit, from its parsed `systemctl show` properties."""
    pid = int(props.get('MainPID') or 0)
    return {
        'exists': props.get('LoadState') not in ('not-found', '', None),
        'active_state': props.get('ActiveState'),
        'sub_state': props.get('SubState'),
        'result': props.get('Result'),
        'invocation_id': props.get('InvocationID') or '',
        'since': props.get('ActiveEnterTimestamp') or '',
        'started_at': started_at(pid) if pid else None,
    }


def venv_refusal(path):
    """Why root must not run the venv's Python (an entry of it, or a directory above it, that a user other than root
    can change: a .pth file or a module there runs as root), None when only root can change it."""
    records = tree_records(path)
    parent = os.path.dirname(os.path.abspath(path))
    while parent != os.path.dirname(parent):
        records[parent] = record_of(os.lstat(parent))
        parent = os.path.dirname(parent)
    return tree_refusal(path, tree_problems(records))


def venv_facts(run_command, path, packages):
    """The venv's Python, its headers, pip and the versions of packages; `error` says why not. The Python is not run
    when a user other than root could have changed the venv (venv_refusal). run_command is AnsibleModule.run_command."""
    python = os.path.join(path, 'bin', 'python')
    facts = {'path': path, 'exists': os.path.exists(python)}
    if not facts['exists']:
        facts['error'] = 'no Python at %s: create the venv with SGLang in it first, or point sglang_venv at it' % python
        return facts
    refusal = venv_refusal(path)
    if refusal:
        facts['error'] = refusal
        return facts
    rc, out, err = run_command([python, '-c', VENV_PROBE, json.dumps(list(packages))])
    if rc != 0:
        facts['error'] = 'the venv Python failed (rc=%d): %s' % (rc, (err or out).strip())
        return facts
    try:
        facts.update(parse_venv_probe(out))
    except ValueError as exc:
        facts['error'] = str(exc)
    return facts


def last_good_facts(directory, files, secrets_key=None):
    """Whether each live file equals its last-known-good copy in directory (both absent counts as equal), the saved
    copies' SHA-1 (digests: None for one not saved; what the role will write is compared with them, not only what is
    on disk now) and the saved pins (pins.json); files maps a saved name to the live file's path. A save stopped
    between its two renames (file_adapters.replace_dir) left no directory and a whole directory.old: that is the copy
    (sglang_last_good moves it back before it saves or restores). The secrets file's digest is keyed with
    secrets_key (secret_flags.secrets_digest); without a key it is None, never a plain SHA-1."""
    if not os.path.isdir(directory) and os.path.isdir(directory + '.old'):
        directory += '.old'
    facts = {'exists': os.path.isfile(os.path.join(directory, 'unit')), 'same': {}, 'digests': {}, 'pins': None}
    for name, live in sorted(files.items()):
        saved = digest(os.path.join(directory, name))
        facts['same'][name] = saved == digest(live)
        if name == SECRETS_FILE:
            saved = digest(os.path.join(directory, name), secrets_key) if secrets_key and saved else None
        facts['digests'][name] = saved
    try:
        pins = json.loads(read_text(os.path.join(directory, 'pins.json')) or 'null')
        facts['pins'] = pins if isinstance(pins, dict) else None
    except ValueError:
        pass
    return facts


# sglang_info's own reads (its module is wiring only).
INFO_PROPERTIES = SERVICE_PROPERTIES + ('NRestarts', 'FragmentPath')
LISTEN_TABLES = ('/proc/net/tcp', '/proc/net/tcp6')


def service_info(run_command, systemctl, unit):
    """A unit's facts for sglang_info: unit_facts plus restarts, main PID, unit file and the main process's argv
    (secrets redacted); {'exists': False, 'error': ...} when systemctl cannot show it."""
    rc, out, err = run_command([systemctl, 'show', '-p', ','.join(INFO_PROPERTIES), unit])
    if rc != 0:
        return {'exists': False, 'error': (err or out).strip()}
    props = parse_show(out)
    facts = unit_facts(props)
    facts.update(restarts=int(props.get('NRestarts') or 0), main_pid=int(props.get('MainPID') or 0),
                 fragment_path=props.get('FragmentPath') or '', argv=[])
    if facts['main_pid']:
        try:
            with open('/proc/%d/cmdline' % facts['main_pid'], 'rb') as handle:
                facts['argv'] = redact_argv(parse_cmdline(handle.read()))
        except (IOError, OSError):
            pass  # the process ended between the two reads
    return facts


def mtime_facts(patterns):
    """{path: mtime or None} for each path, a glob pattern by each path it matches (None for one that matches none)."""
    result = {}
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        if not matches:
            result[pattern] = None
        for path in matches:
            try:
                result[path] = os.stat(path).st_mtime
            except OSError:
                result[path] = None
    return result


def model_facts(path, marker=None):
    """Whether a checkpoint directory is complete (host_facts.checkpoint_status judges what is read here); with
    ``marker`` (a file name), also whether that file is in it (``marker``: true or false)."""
    facts = {'path': path, 'exists': os.path.isdir(path)}
    if marker:
        facts['marker'] = facts['exists'] and os.path.isfile(os.path.join(path, marker))
    if not facts['exists']:
        facts.update(complete=False, problem='%s is not a directory' % path)
        return facts
    index_path = os.path.join(path, 'model.safetensors.index.json')
    index_text = None
    if os.path.exists(index_path):
        with open(index_path) as handle:
            index_text = handle.read()
    facts.update(checkpoint_status(os.path.exists(os.path.join(path, 'config.json')), index_text, os.listdir(path)))
    return facts


def port_facts(ports, tables=LISTEN_TABLES):
    """{'PORT': whether something listens on it} from the kernel's TCP tables."""
    listening = set()
    for name in tables:
        if os.path.exists(name):
            with open(name) as handle:
                listening |= listening_ports(handle.read())
    return dict((str(port), port in listening) for port in ports)


def gpu_facts(run_command, nvidia_smi, timeout_bin):
    """nvidia-smi's GPUs (bounded by timeout, nvidia_smi.query_cmd); [] without nvidia-smi or when it fails."""
    if not nvidia_smi:
        return []
    rc, out, _err = run_command(query_cmd(nvidia_smi, timeout_bin))
    return parse_query_gpu(out) if rc == 0 else []


class SystemClock(object):
    """The real clocks, for every module that waits: monotonic for deadlines, wall time for timestamps, sleep."""

    @staticmethod
    def monotonic():
        return time.monotonic()

    @staticmethod
    def time():
        return time.time()

    @staticmethod
    def sleep(seconds):
        time.sleep(seconds)
