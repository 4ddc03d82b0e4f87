# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every rule on the server role's inputs and on the rollout's k26_instances, in one place. Pure, no I/O.

``server_problems(values, ...)`` and ``instance_problems(instances)`` return a list of messages, one per rule that
failed and only those, each naming the variable, its value (secrets masked) and what was expected. The role calls
them once, through the ``llmops.sglang.sglang_input_problems`` filter, before the first task that changes a host.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re

from ansible_collections.llmops.sglang.plugins.module_utils.rollout.server_args import (
    ServerArgsError,
    build_argv,
    environment_lines,
    secret_environment,
)
from ansible_collections.llmops.sglang.plugins.module_utils.canary import analysis
from ansible_collections.llmops.sglang.plugins.module_utils.model.model_sync import check_manifest
from ansible_collections.llmops.sglang.plugins.module_utils.model.model_sync_access import known_hosts_problem, ssh_options_problem

# A unit name systemd accepts (systemd.unit(5): letters, digits, ":-_.\\", "@" once for a template instance),
# without the ".service" the role appends.
_UNIT_NAME = re.compile(r'^[A-Za-z0-9:_.-]+(@[A-Za-z0-9:_.-]+)?$')
_UNIT_SUFFIXES = ('.service', '.socket', '.target', '.timer', '.mount', '.path', '.slice', '.scope', '.device', '.swap')
# useradd(8)'s default NAME_REGEX, plus "root".
_ACCOUNT = re.compile(r'^[a-z_][a-z0-9_-]{0,31}$')
# LimitNOFILE=/LimitMEMLOCK= values: a number (with a K/M/G/T suffix for memory), "infinity", or soft:hard.
_LIMIT_PART = r'(infinity|[0-9]+[KMGTPE]?)'
_LIMIT = re.compile(r'^%s(:%s)?$' % (_LIMIT_PART, _LIMIT_PART))
# A pip version specifier's version (PEP 440 characters).
_VERSION = re.compile(r'^[A-Za-z0-9][A-Za-z0-9.+!_-]*$')
_CONTROL = re.compile(r'[\x00-\x1f\x7f]')
STATES = ('started', 'stopped', 'restarted', 'absent')
# The waiter's options the role passes on (the module_defaults of roles/server/tasks/main.yml); sglang_wait may set only these.
WAIT_OPTIONS = ('timeout', 'stall_timeout', 'max_restarts', 'probe', 'request_timeout', 'prompt', 'max_tokens',
                'expect', 'headers', 'validate_certs', 'since', 'poll_interval', 'max_poll_interval', 'progress_file',
                'model')
INSTANCE_KEYS = ('name', 'port', 'server_args', 'env', 'extra_args', 'served_model_name', 'state')
SECRET_VARIABLES = ('sglang_api_key', 'sglang_hf_token', 'sglang_secret_args')


# Names Debian's /etc/hosts gives the loopback addresses.
LOOPBACK_NAMES = ('localhost', 'localhost.', 'localhost.localdomain', 'ip6-localhost', 'ip6-loopback')


def is_loopback(host):
    """Whether a listener bound to ``host`` (SGLang's, the router's) is reachable from this host only: 127.0.0.0/8,
    ::1 (also in brackets or as ::ffff:127.x) or localhost. The
    wildcards (0.0.0.0, ::, and '' which SGLang's url() also treats as 0.0.0.0, server_args.py:458-468), every other
    address and every other name count as reachable from the network."""
    if not isinstance(host, str):
        return False
    name = host.strip().lower()
    if name in LOOPBACK_NAMES:
        return True
    if name.startswith('[') and name.endswith(']'):
        name = name[1:-1]
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    mapped = getattr(address, 'ipv4_mapped', None)  # ::ffff:127.0.0.1 is loopback too
    return bool(address.is_loopback or (mapped is not None and mapped.is_loopback))


def shown(name, value):
    """How a value appears in a message: repr, or a mask for a secret."""
    if name in SECRET_VARIABLES:
        return '<hidden, %d characters>' % len(value) if isinstance(value, str) else '<hidden>'
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + '...'


def _integer(value):
    """An int from an int or a string of digits (the argument spec accepts both); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.match(r'^-?[0-9]+$', value.strip()):
        return int(value)
    return None


class _Problems(list):
    def add(self, name, value, expected):
        self.append('%s=%s: %s' % (name, shown(name, value), expected))


def unit_name_problem(value):
    """Why ``value`` is not a unit name without ".service", or None."""
    if not isinstance(value, str) or not value:
        return 'expected a non-empty unit name'
    if value.endswith(_UNIT_SUFFIXES):
        return 'expected the unit name without its suffix (the role appends ".service"), e.g. %r' % value.rsplit('.', 1)[0]
    if not _UNIT_NAME.match(value) or len(value) > 247:
        return ('expected a unit name of letters, digits and ":_.-" (at most one "@" with an instance after it), '
                'at most 247 characters, without ".service"')
    return None


def _port(problems, name, value):
    port = _integer(value)
    if port is None or not 0 < port < 65536:
        problems.add(name, value, 'expected a TCP port, an integer from 1 to 65535')
    return port


def _plain_text(problems, name, value, what, required=False):
    """A string that ends up in a file or an argv: no control characters (a line break would start a new line)."""
    if not isinstance(value, str):
        problems.add(name, value, 'expected a string (%s)' % what)
        return False
    if required and not value:
        problems.add(name, value, 'must be set: %s' % what)
        return False
    if _CONTROL.search(value):
        problems.add(name, value, 'must not contain a line break or other control character (%s)' % what)
        return False
    return True


def _absolute_path(problems, name, value, what):
    if _plain_text(problems, name, value, what, required=True):
        if not value.startswith('/'):
            problems.add(name, value, 'expected an absolute path (%s)' % what)
        elif '/../' in value + '/' or value.rstrip('/') == '':
            problems.add(name, value, 'expected an absolute path without ".." and not "/" (%s)' % what)


def _non_negative(problems, name, value, what, minimum=0):
    number = _integer(value)
    if number is None or number < minimum:
        problems.add(name, value, 'expected an integer >= %d (%s)' % (minimum, what))


def _string_list(problems, name, value, what):
    if not isinstance(value, list):
        problems.add(name, value, 'expected a list of strings (%s)' % what)
        return
    for index, item in enumerate(value):
        _plain_text(problems, '%s[%d]' % (name, index), item, what)


def server_problems(values, reserved=None, group_hosts=None, inventory_hostname=None):
    """The messages for every rule on the role's variables that fails (empty: all good).

    ``values``: the role's variables by name (``sglang_*``). ``reserved``: the role's reserved-flag table
    (option string -> the variable that sets it). ``group_hosts``: the hosts of ``sglang_multinode_group`` in the
    inventory, None when there is no such group.
    """
    problems = _Problems()
    get = values.get
    state = get('sglang_state', 'started')
    starting = state in ('started', 'restarted')
    if state not in STATES:
        problems.add('sglang_state', state, 'expected one of %s' % ', '.join(STATES))

    name = get('sglang_service_name')
    why = unit_name_problem(name)
    if why:
        problems.add('sglang_service_name', name, why)

    _port(problems, 'sglang_port', get('sglang_port'))
    tp_size = _integer(get('sglang_tp_size'))
    if tp_size is None or tp_size < 1:
        problems.add('sglang_tp_size', get('sglang_tp_size'), 'expected an integer >= 1 (the number of GPUs)')

    model = get('sglang_model_path', '')
    if _plain_text(problems, 'sglang_model_path', model, 'the checkpoint directory, in the unit and its argv'):
        if starting and not model:
            problems.add('sglang_model_path', model, 'must be set to start a server (sglang_state=%s)' % state)
        elif model and not model.startswith('/'):
            problems.add('sglang_model_path', model, 'expected an absolute path to a local checkpoint directory')
    _plain_text(problems, 'sglang_served_model_name', get('sglang_served_model_name', ''), 'the name clients send')
    host = get('sglang_host', '')
    if _plain_text(problems, 'sglang_host', host, 'the address SGLang binds', required=True) and re.search(r'\s', host):
        problems.add('sglang_host', host, 'expected an address or host name without spaces')

    launcher = get('sglang_launcher')
    if not isinstance(launcher, list) or not launcher:
        problems.add('sglang_launcher', launcher, 'expected a non-empty list: the command that starts SGLang')
        launcher = []
    else:
        for index, word in enumerate(launcher):
            if not isinstance(word, str) or not word:
                problems.add('sglang_launcher[%d]' % index, word, 'expected a non-empty string')
    _absolute_path(problems, 'sglang_venv', get('sglang_venv'), 'the server\'s virtual environment')
    _absolute_path(problems, 'sglang_state_dir', get('sglang_state_dir'), 'the unit\'s HOME and JIT caches')

    for var, account in (('sglang_user', get('sglang_user')), ('sglang_group', get('sglang_group'))):
        if not isinstance(account, str) or not _ACCOUNT.match(account):
            problems.add(var, account, 'expected a system account name (lowercase letters, digits, "_" and "-")')

    for var in ('sglang_api_key', 'sglang_hf_token'):
        secret = get(var, '')
        if secret is None:
            continue
        if not isinstance(secret, str):
            problems.add(var, secret, 'expected a string')
        elif _CONTROL.search(secret):
            problems.add(var, secret, 'must not contain a line break or other control character '
                                      '(it is written to an EnvironmentFile and sent as an HTTP header)')
    secret_args = get('sglang_secret_args', {})
    secret_env = {}
    try:
        secret_env = secret_environment(secret_args)
    except ServerArgsError as exc:
        problems.append(str(exc))
    for flag in sorted(secret_args if isinstance(secret_args, dict) else {}, key=str):
        value = secret_args[flag]
        if isinstance(value, str) and _CONTROL.search(value):
            problems.append('sglang_secret_args[%r]=<hidden, %d characters>: must not contain a line break or other '
                            'control character (it is written to an EnvironmentFile)' % (flag, len(value)))
    if (get('sglang_api_key') or secret_env) and launcher and (len(launcher) < 3 or launcher[1] != '-m'):
        problems.add('sglang_launcher', launcher, 'with sglang_api_key or sglang_secret_args set, expected the form '
                                                  '[python, -m, module] (the secrets are handed to SGLang in-process, '
                                                  'never on a command line)')
    # Beyond loopback without a key, anyone who reaches the port drives the server. SGLang 0.5.23 then asks for the
    # key on every endpoint but /health*, /ready* and /metrics* (utils/auth.py:101-106, :145-151).
    if starting and isinstance(host, str) and not is_loopback(host) and not get('sglang_api_key'):
        problems.add('sglang_host', host, 'reachable from the network (not 127.0.0.0/8, ::1 or localhost) without a key: '
                                          'set sglang_api_key (then every endpoint but /health, /ready and /metrics '
                                          'needs it), or bind sglang_host to 127.0.0.1')

    group = get('sglang_multinode_group', '')
    if group:
        if not isinstance(group, str) or group_hosts is None:
            problems.add('sglang_multinode_group', group, 'expected the name of an inventory group')
        elif inventory_hostname not in group_hosts:
            problems.add('sglang_multinode_group', group, 'expected a group this host (%s) is in' % inventory_hostname)
        if is_loopback(host):
            problems.add('sglang_host', host, 'a multi-node server (sglang_multinode_group=%r) needs an address the '
                                              'other nodes reach, not loopback' % group)
        dist_port = _port(problems, 'sglang_dist_init_port', get('sglang_dist_init_port'))
        if dist_port is not None and dist_port == _integer(get('sglang_port')):
            problems.add('sglang_dist_init_port', get('sglang_dist_init_port'), 'must differ from sglang_port')

    routers = get('sglang_router_hosts', [])
    _string_list(problems, 'sglang_router_hosts', routers, 'inventory host names of the routers')
    if isinstance(routers, list) and routers and is_loopback(host):
        problems.add('sglang_host', host, 'behind routers (sglang_router_hosts=%r) the server must listen on an address '
                                          'the routers reach (e.g. 0.0.0.0), not loopback' % (routers,))

    # Flags: the same code that renders them (server_args.build_argv) judges them, reserved names included.
    server_args = get('sglang_server_args', {})
    extra_args = get('sglang_extra_args', [])
    if not isinstance(server_args, dict):
        problems.add('sglang_server_args', server_args, 'expected a dict of flag: value')
        server_args = {}
    if not isinstance(extra_args, list):
        problems.add('sglang_extra_args', extra_args, 'expected a list of raw arguments')
        extra_args = []
    # Each word reaches SGLang intact (systemd_exec_line quotes line breaks too), so only names and types are judged.
    for args, extra in ((server_args, None), ({}, extra_args)):
        try:
            build_argv(args, extra, reserved or {})
        except ServerArgsError as exc:
            problems.append(str(exc))

    env = get('sglang_env', {})
    try:
        environment_lines(env, 'sglang_env')
    except ServerArgsError as exc:
        problems.append(str(exc))
    profile = get('sglang_hardware_profile', 'none')
    if profile not in ('pcie', 'nvlink', 'none'):
        problems.add('sglang_hardware_profile', profile, 'expected one of pcie, nvlink, none')

    for var in ('sglang_stop_timeout', 'sglang_restart_sec', 'sglang_start_limit_interval'):
        _non_negative(problems, var, get(var, 0), 'seconds, in the unit')
    _non_negative(problems, 'sglang_start_limit_burst', get('sglang_start_limit_burst', 1), 'starts, in the unit', 1)
    for var in ('sglang_limit_nofile', 'sglang_limit_memlock'):
        limit = get(var, 'infinity')
        if not _LIMIT.match(str(limit)):
            problems.add(var, limit, 'expected a number, "infinity" or SOFT:HARD (systemd.exec(5) Limit*=)')
    for var in ('sglang_version', 'sglang_compressed_tensors_version'):
        version = get(var, '')
        if not isinstance(version, str) or (version and not _VERSION.match(version)):
            problems.add(var, version, 'expected a version such as 0.18.0, or empty to leave the package alone')
    for var in ('sglang_pip_find_links', 'sglang_pip_trusted_hosts', 'sglang_pip_extra_args'):
        _string_list(problems, var, get(var, []), 'pip options')
    _plain_text(problems, 'sglang_pip_index_url', get('sglang_pip_index_url', ''), 'a pip option')
    proxy = get('sglang_apt_proxy', '')
    if _plain_text(problems, 'sglang_apt_proxy', proxy, 'a line of apt.conf') and ('"' in proxy or ';' in proxy):
        problems.add('sglang_apt_proxy', proxy, 'expected a URL without quotes or ";" (it is written into apt.conf)')

    wait = get('sglang_wait', {})
    if not isinstance(wait, dict):
        problems.add('sglang_wait', wait, 'expected a dict of sglang_wait_ready options')
    else:
        for key in sorted(set(wait) - set(WAIT_OPTIONS)):
            problems.add('sglang_wait', wait, 'unknown option %r; expected some of %s' % (key, ', '.join(WAIT_OPTIONS)))
        for key in ('timeout', 'stall_timeout'):
            if key in wait and not (isinstance(wait[key], (int, float)) and not isinstance(wait[key], bool) and wait[key] > 0):
                problems.add('sglang_wait', wait, '%s must be a positive number of seconds' % key)
    canary_problems(problems, get('sglang_canary_analysis', 'canary'), get('sglang_canary', {}))
    lock_wait = get('sglang_lock_wait', 0)
    if _integer(lock_wait) is None or _integer(lock_wait) < 0:
        problems.add('sglang_lock_wait', lock_wait, 'expected an integer >= 0 (seconds to wait for another run)')
    model_source_problems(problems, get('sglang_model_source', {}), get('sglang_model_manifest', {}),
                          get('sglang_user', 'sglang'))
    unit_hardening_problems(problems, get('sglang_unit_hardening', {}))
    return list(problems)


CANARY_MODES = ('canary', 'always', 'never')
# sglang_canary's options the role passes on (roles/server/tasks/run.yml); url, model, api_key and record_file are its own.
CANARY_OPTIONS = ('prompts', 'concurrency', 'rounds', 'max_tokens', 'thresholds', 'floors', 'answers', 'timeout',
                  'baseline_url')


def canary_problems(problems, mode, canary):
    """sglang_canary_analysis and sglang_canary, by the module's own rules (canary/analysis.py check_options)."""
    if mode not in CANARY_MODES:
        problems.add('sglang_canary_analysis', mode, 'expected one of %s' % ', '.join(CANARY_MODES))
    if not isinstance(canary, dict):
        problems.add('sglang_canary', canary, 'expected a dict of sglang_canary options')
        return
    for key in sorted(set(canary) - set(CANARY_OPTIONS)):
        problems.add('sglang_canary', canary, 'unknown option %r; expected some of %s' % (key, ', '.join(CANARY_OPTIONS)))
    prompts = canary.get('prompts') or analysis.DEFAULT_PROMPTS
    for problem in analysis.check_options(prompts if isinstance(prompts, list) else [None], canary.get('concurrency', [1, 4, 8]),
                                          canary.get('rounds', 3), canary.get('max_tokens', 32), canary.get('thresholds') or {},
                                          canary.get('floors') or {}, canary.get('answers', 'compare')):
        problems.add('sglang_canary', canary, problem)
    timeout = canary.get('timeout', 120)
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        problems.add('sglang_canary', canary, 'timeout: expected seconds > 0, got %r' % (timeout,))
    url = canary.get('baseline_url', '')
    if url and (not isinstance(url, str) or not re.match(r'^https?://[^/\s]+', url)):
        problems.add('sglang_canary', canary, 'baseline_url: expected http(s)://HOST:PORT, got %r' % (url,))


# [Service] settings the unit template sets from the role's own variables: not for sglang_unit_hardening.
UNIT_OWN_SETTINGS = ('Type', 'User', 'Group', 'WorkingDirectory', 'Environment', 'EnvironmentFile', 'ExecStart',
                     'KillMode', 'TimeoutStopSec', 'Restart', 'RestartSec', 'LimitNOFILE', 'LimitMEMLOCK')
_UNIT_SETTING = re.compile(r'^[A-Z][A-Za-z0-9]{1,63}$')


def unit_hardening_problems(problems, hardening):
    """sglang_unit_hardening: [Service] setting -> a string, a boolean, a list of strings or null (removes it)."""
    name = 'sglang_unit_hardening'
    if not isinstance(hardening, dict):
        problems.add(name, hardening, 'expected a dict of systemd [Service] setting: value, e.g. {ProtectClock: false}')
        return
    for setting in sorted(hardening, key=str):
        value = hardening[setting]
        label = '%s[%r]' % (name, setting)
        if not isinstance(setting, str) or not _UNIT_SETTING.match(setting):
            problems.add(name, hardening, 'expected systemd setting names such as ProtectClock, not %r' % (setting,))
        elif setting in UNIT_OWN_SETTINGS:
            problems.add(label, value, 'the role sets %s from its own variables (roles/server/defaults/main.yml); '
                                       'it is not a sandbox setting' % setting)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if not isinstance(item, str) or _CONTROL.search(item):
                    problems.add('%s[%d]' % (label, index), item, 'expected a string without line breaks (one line '
                                 'of the unit each)')
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            problems.add(label, value, 'expected a string: quote it (YAML reads UMask: 0027 as the number 23)')
        elif not (value is None or isinstance(value, bool) or (isinstance(value, str) and not _CONTROL.search(value))):
            problems.add(label, value, 'expected a string without line breaks, true/false, a list of strings, '
                                       'or null to remove the setting')


MODEL_SOURCE_KEYS = ('mirror', 'version', 'versions_dir', 'peers', 'ssh_key', 'ssh_user', 'ssh_options', 'peer_wait',
                     'known_hosts', 'host_keys_from_ansible')
_MODEL_VERSION = re.compile(r'^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$')


def model_source_problems(problems, source, manifest, service_user='sglang'):
    """sglang_model_source (empty: no sync) and, when it is set, the manifest the sync fetches and verifies."""
    name = 'sglang_model_source'
    if source in (None, {}):
        return
    if not isinstance(source, dict):
        problems.add(name, source, 'expected a dict ({version, mirror, peers, ...}) or {} for no sync')
        return
    for key in sorted(set(source) - set(MODEL_SOURCE_KEYS)):
        problems.add(name, source, 'unknown key %r; expected some of %s' % (key, ', '.join(MODEL_SOURCE_KEYS)))
    version = source.get('version')
    if not isinstance(version, str) or not _MODEL_VERSION.match(version):
        problems.add(name + '.version', version, 'expected a directory name for this checkpoint version (letters, '
                     'digits, "._-", not starting with "."), e.g. "k26-2026-11-30"')
    mirror = source.get('mirror', '')
    if _plain_text(problems, name + '.mirror', mirror, 'a URL') and mirror and \
            not re.match(r'^https?://[^/\s]+(/.*)?$', mirror):
        problems.add(name + '.mirror', mirror, 'expected an http:// or https:// URL of the directory holding the files')
    if 'versions_dir' in source:
        _absolute_path(problems, name + '.versions_dir', source['versions_dir'], 'where versions of the model live')
    if 'ssh_key' in source:
        _absolute_path(problems, name + '.ssh_key', source['ssh_key'], 'a private key on the host, for its peers')
    if 'ssh_user' in source and not (isinstance(source['ssh_user'], str) and _ACCOUNT.match(source['ssh_user'])):
        problems.add(name + '.ssh_user', source['ssh_user'], 'expected a user name on the peers')
    elif source.get('ssh_user') in ('root', service_user):
        problems.add(name + '.ssh_user', source['ssh_user'], 'expected the model sync account (default sglang-sync), '
                     'never root or the service user sglang_user: the role restricts this account to reading model '
                     'files, on every host')
    if 'known_hosts' in source:
        _string_list(problems, name + '.known_hosts', source['known_hosts'], 'known_hosts lines ("HOSTS TYPE BASE64")')
        for line in source['known_hosts'] if isinstance(source['known_hosts'], list) else []:
            problem = known_hosts_problem(line) if isinstance(line, str) else None
            if problem:
                problems.add(name + '.known_hosts', line, problem)
    if not isinstance(source.get('host_keys_from_ansible', True), bool):
        problems.add(name + '.host_keys_from_ansible', source['host_keys_from_ansible'], 'expected true or false')
    if isinstance(source.get('ssh_options'), list) and ssh_options_problem(source['ssh_options']):
        problems.add(name + '.ssh_options', source['ssh_options'], ssh_options_problem(source['ssh_options']))
    for key in ('peers', 'ssh_options'):
        if key in source:
            _string_list(problems, '%s.%s' % (name, key), source[key], 'host names' if key == 'peers' else 'ssh options')
    if 'peer_wait' in source:
        _non_negative(problems, name + '.peer_wait', source['peer_wait'], 'seconds to wait for a peer to finish')
    if not mirror and source.get('peers') == []:
        problems.add(name, source, 'needs a mirror, or peers that may have the version')
    try:
        check_manifest(manifest)
    except ValueError as exc:
        problems.append(str(exc))


def instance_problems(instances, where='k26_instances'):
    """The messages for every rule on the rollout's instance list that fails: shape, names and ports unique."""
    problems = _Problems()
    if not isinstance(instances, list) or not instances:
        problems.add(where, instances, 'expected a non-empty list of {name, port, ...}')
        return list(problems)
    names = {}
    ports = {}
    for index, instance in enumerate(instances):
        label = '%s[%d]' % (where, index)
        if not isinstance(instance, dict):
            problems.add(label, instance, 'expected a dict with at least name and port')
            continue
        for key in sorted(set(instance) - set(INSTANCE_KEYS)):
            problems.add(label, instance.get('name', index), 'unknown key %r; expected some of %s' % (key, ', '.join(INSTANCE_KEYS)))
        name = instance.get('name')
        why = unit_name_problem(name)
        if why:
            problems.add(label + '.name', name, why)
        elif name in names:
            problems.add(label + '.name', name, 'is also %s[%d].name; each instance on a host needs its own name' % (where, names[name]))
        else:
            names[name] = index
        port = _port(problems, label + '.port', instance.get('port'))
        if port is not None and 0 < port < 65536:
            if port in ports:
                problems.add(label + '.port', instance.get('port'),
                             'is also the port of %s[%d] (%s); each instance on a host needs its own port'
                             % (where, ports[port], instances[ports[port]].get('name')))
            else:
                ports[port] = index
        if instance.get('state', 'started') not in STATES:
            problems.add(label + '.state', instance.get('state'), 'expected one of %s' % ', '.join(STATES))
    return list(problems)


def fleet_instance_problems(per_host, where='k26_instances', shown=3):
    """instance_problems for a whole run at once ({host: its instance list}), each distinct list judged once. When
    every host has the same list (the usual case: a group or extra variable), its messages as they are; else each
    failing list's messages with the hosts that have it ('on a-01, a-02: k26_instances[1].port=...'), the first
    ``shown`` hosts named and the rest counted."""
    lists = []  # [(instances, [hosts])], in the hosts' order
    for host, instances in per_host.items():
        for seen, hosts in lists:
            if seen == instances:
                hosts.append(host)
                break
        else:
            lists.append((instances, [host]))
    if len(lists) <= 1:
        return instance_problems(lists[0][0], where) if lists else []
    found = []
    for instances, hosts in lists:
        names = ', '.join(hosts[:shown]) + (' (and %d more)' % (len(hosts) - shown) if len(hosts) > shown else '')
        found.extend('on %s: %s' % (names, problem) for problem in instance_problems(instances, where))
    return found
