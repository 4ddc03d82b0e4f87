# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every rule on the router role's inputs, in one place. Pure, no I/O.

``router_problems(values)`` returns one message per rule that fails (empty: all good), each naming the variable, its
value (the key masked) and what was expected. The role applies it through the ``llmops.sglang.sglang_router_input_problems``
filter in its first task (roles/router/tasks/validate.yml), on every router of the play at once
(``any_errors_fatal``), so a refused input changes nothing on any host.

The rule that matters most: a router that listens beyond loopback (``router_host`` not in 127.0.0.0/8, not ``::1``,
not ``localhost``) needs ``router_api_key``. Without one, anyone who reaches its port can ``DELETE /workers/ID``
every worker (an outage) or ``POST /workers`` a worker of their own (every client's prompts go to it): measured on
sglang-router 0.3.2, whose worker API has no other protection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# One rule for every listener of the collection: what counts as reachable from this host only.
from ansible_collections.llmops.sglang.plugins.module_utils.rollout.role_inputs import is_loopback

# useradd(8)'s default NAME_REGEX.
_ACCOUNT = re.compile(r'^[a-z_][a-z0-9_-]{0,31}$')
_UNIT_NAME = re.compile(r'^[A-Za-z0-9:_.-]+(@[A-Za-z0-9:_.-]+)?$')
_CONTROL = re.compile(r'[\x00-\x1f\x7f]')
SECRET_VARIABLES = ('router_api_key',)

# The flags the role renders from its own variables (roles/router/vars/main.yml __router_command), and the variable
# that sets each. In router_extra_args they would override the checked value (the router's parser takes the last),
# e.g. a `--host 0.0.0.0` there would undo the loopback rule; --api-key would put the key on the command line.
RESERVED_FLAGS = {
    '--api-key': 'router_api_key',
    '--worker-urls': 'router_worker_hosts (the workers are registered through the API)',
    '--host': 'router_host',
    '--port': 'router_port',
    '--prometheus-host': 'router_prometheus_host',
    '--prometheus-port': 'router_prometheus_port',
    '--policy': 'router_policy',
    '--log-level': 'router_log_level',
}
# Flags whose value is a secret: on the command line they would be in /proc/PID/cmdline and the journal.
SECRET_FLAGS = ('--api-key', '--control-plane-api-keys')
POLICIES = ('random', 'round_robin', 'cache_aware', 'power_of_two', 'manual')
LOG_LEVELS = ('debug', 'info', 'warn', 'error')


def shown(name, value):
    """How a value appears in a message: repr, or a mask for the key."""
    if name in SECRET_VARIABLES:
        return '<hidden, %d characters>' % len(value) if isinstance(value, str) else '<hidden>'
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + '...'


class _Problems(list):
    def add(self, name, value, expected):
        self.append('%s=%s: %s' % (name, shown(name, value), expected))


def _integer(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.match(r'^[0-9]+$', value.strip()):
        return int(value)
    return None


def _address(problems, name, value, what):
    if not isinstance(value, str) or not value.strip():
        problems.add(name, value, 'expected an address or host name (%s)' % what)
        return False
    if _CONTROL.search(value) or re.search(r'\s', value):
        problems.add(name, value, 'expected an address or host name without spaces or line breaks (%s)' % what)
        return False
    return True


def _port(problems, name, value):
    port = _integer(value)
    if port is None or not 0 < port < 65536:
        problems.add(name, value, 'expected a TCP port, an integer from 1 to 65535')
        return None
    return port


def extra_arg_problems(problems, extra_args):
    if not isinstance(extra_args, list):
        problems.add('router_extra_args', extra_args, 'expected a list of launch_router arguments')
        return
    for index, arg in enumerate(extra_args):
        name = 'router_extra_args[%d]' % index
        if not isinstance(arg, str):
            problems.add(name, arg, 'expected a string')
            continue
        if _CONTROL.search(arg):
            problems.add(name, arg, 'must not contain a line break or other control character')
            continue
        flag = arg.split('=', 1)[0]
        if not flag.startswith('--') or len(flag) < 3:
            continue
        # launch_router's argparse takes any unambiguous abbreviation (allow_abbrev), so "--ho" is "--host".
        secret = [name for name in SECRET_FLAGS if name.startswith(flag)]
        reserved = sorted(name for name in RESERVED_FLAGS if name.startswith(flag) and name not in SECRET_FLAGS)
        if secret:
            # the value may follow as the next word or after "=": neither is shown
            problems.append('%s: %s is not allowed in router_extra_args (a secret on the command line is in '
                            '/proc/PID/cmdline and the journal); set router_api_key, which the role hands over '
                            'through a root-only credential' % (name, flag))
        elif reserved:
            problems.add(name, arg, '%s is set by %s; set that variable instead'
                         % (' / '.join(reserved), ', '.join(RESERVED_FLAGS[r] for r in reserved)))


def router_problems(values):
    """The messages for every rule on the router role's variables that fails (empty: all good).

    ``values``: the role's variables by name (``router_*``).
    """
    problems = _Problems()
    get = values.get

    name = get('router_service_name')
    if not isinstance(name, str) or not _UNIT_NAME.match(name) or name.endswith('.service') or len(name) > 247:
        problems.add('router_service_name', name, 'expected a unit name of letters, digits and ":_.-" without ".service"')

    for var in ('router_user', 'router_group'):
        account = get(var)
        if not isinstance(account, str) or not _ACCOUNT.match(account):
            problems.add(var, account, 'expected a system account name (lowercase letters, digits, "_" and "-")')
        elif account == 'root':
            problems.add(var, account, 'the router must not run as root: expected an unprivileged system account '
                                       '(the role creates it), e.g. "sglang-router"')

    for var in ('router_venv', 'router_python'):
        path = get(var)
        if not isinstance(path, str) or not path.startswith('/') or _CONTROL.search(path) or re.search(r'\s', path):
            problems.add(var, path, 'expected an absolute path without spaces')

    host = get('router_host')
    host_ok = _address(problems, 'router_host', host, 'the address the router listens on')
    port = _port(problems, 'router_port', get('router_port'))
    prom_host = get('router_prometheus_host')
    _address(problems, 'router_prometheus_host', prom_host, "the address of the router's Prometheus endpoint")
    prom_port = _port(problems, 'router_prometheus_port', get('router_prometheus_port'))
    if port is not None and port == prom_port:
        problems.add('router_prometheus_port', get('router_prometheus_port'), 'must differ from router_port')

    key = get('router_api_key', '')
    if key is None:
        key = ''
    if not isinstance(key, str):
        problems.add('router_api_key', key, 'expected a string')
        key_set = True
    else:
        key_set = bool(key)
        if _CONTROL.search(key) or re.search(r'\s', key):
            problems.add('router_api_key', key, 'must not contain spaces, line breaks or other control characters '
                                                '(it is sent as "Authorization: Bearer KEY")')
    if host_ok and not key_set and not is_loopback(host):
        problems.add('router_host', host,
                     'the router would listen beyond loopback with router_api_key empty: anyone who reaches port %s '
                     'could remove every worker or add one of their own (its worker API has no other protection). '
                     'Set router_api_key (a secret from a vault, equal to the workers\' sglang_api_key), or bind '
                     'router_host to 127.0.0.1 for a router only this host uses' % (get('router_port'),))

    policy = get('router_policy')
    if policy not in POLICIES:
        problems.add('router_policy', policy, 'expected one of %s' % ', '.join(POLICIES))
    level = get('router_log_level')
    if level not in LOG_LEVELS:
        problems.add('router_log_level', level, 'expected one of %s' % ', '.join(LOG_LEVELS))
    extra_arg_problems(problems, get('router_extra_args', []))
    return list(problems)
