# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_wait_ready's options: the argument spec (the one place of the waiter's defaults), the checks of their
values, and the Config the machine runs on. Pure, no I/O."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from urllib.parse import urlparse

from ansible_collections.llmops.sglang.plugins.module_utils.wait.probe import COMPLETION_PROBES, PROBES
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_signatures import secret_values
from ansible_collections.llmops.sglang.plugins.module_utils.wait.wait_machine import Config

CURSOR_RE = re.compile(r'^[a-z]=[0-9a-f]+(?:;[a-z]=[0-9a-f]+)*$')
UNIT_RE = re.compile(r'^[A-Za-z0-9:_.@\\-]+$')

ARGUMENT_SPEC = dict(
    unit=dict(type='str'),
    url=dict(type='str', default='http://127.0.0.1:30000'),
    probe=dict(type='str', default='chat', choices=list(PROBES)),
    model=dict(type='str'),
    prompt=dict(type='str', default='Say OK'),
    max_tokens=dict(type='int', default=4, no_log=False),
    api_key=dict(type='str', no_log=True),
    headers=dict(type='dict', default={}),
    validate_certs=dict(type='bool', default=True),
    expect=dict(type='str'),
    timeout=dict(type='float', default=1800),
    request_timeout=dict(type='float', default=30),
    stall_timeout=dict(type='float', default=900),
    max_restarts=dict(type='int', default=0),
    since=dict(type='str', default='invocation'),
    poll_interval=dict(type='float', default=0.5),
    max_poll_interval=dict(type='float', default=10),
    progress_file=dict(type='path'),
    metrics_dir=dict(type='path'),
)


def validate(params):
    """Problems with option values (type checks are AnsibleModule's), each naming the option and what it expects."""
    errors = []
    url = params['url'] or ''
    parsed = urlparse(url)
    if parsed.scheme not in ('http', 'https') or not parsed.hostname:
        errors.append("url must be an http:// or https:// URL with a host, e.g. http://127.0.0.1:30000 (got %r)" % url)
    else:
        try:
            parsed.port
        except ValueError:
            errors.append('url has an invalid port (got %r)' % url)
        if parsed.query or parsed.fragment:
            errors.append('url is the base URL of the server, without query or fragment (got %r)' % url)
        if parsed.path.rstrip('/').endswith('/v1'):
            errors.append('url is the base URL of the server without /v1, e.g. http://127.0.0.1:30000 (got %r)' % url)
    for name in ('timeout', 'request_timeout', 'poll_interval', 'max_poll_interval'):
        if params[name] <= 0:
            errors.append('%s must be a number of seconds above 0 (got %s)' % (name, params[name]))
    if params['stall_timeout'] < 0:
        errors.append('stall_timeout must be 0 (off) or a number of seconds above 0 (got %s)' % params['stall_timeout'])
    if params['poll_interval'] > 0 and params['max_poll_interval'] < params['poll_interval']:
        errors.append('max_poll_interval must be at least poll_interval (got %s < %s)' % (params['max_poll_interval'], params['poll_interval']))
    if params['max_restarts'] < 0:
        errors.append('max_restarts must be 0 or more (got %d)' % params['max_restarts'])
    if params['max_tokens'] < 1:
        errors.append('max_tokens must be 1 or more (got %d)' % params['max_tokens'])
    unit = params['unit']
    if unit is not None and (not unit or not UNIT_RE.match(unit)):
        errors.append('unit must be a systemd unit name such as sglang-k26.service (got %r)' % unit)
    since = params['since']
    if since != 'invocation' and not CURSOR_RE.match(since or ''):
        errors.append("since must be 'invocation' or a journal cursor as printed by journalctl --show-cursor (got %r)" % since)
    if since != 'invocation' and not unit:
        errors.append('since (a journal cursor) needs unit')
    if params['expect'] is not None and params['probe'] not in COMPLETION_PROBES:
        errors.append('expect applies to the JSON body of probe chat or completion, not probe %s' % params['probe'])
    if params['model'] is not None and not params['model'].strip():
        errors.append('model must be a model name, or omitted to discover it')
    for key, value in (params['headers'] or {}).items():
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            errors.append('headers must map header names to strings (header %r has a %s)' % (key, type(value).__name__))
    if params.get('metrics_dir') is not None and not unit:
        errors.append('metrics_dir (the phase file is named after the unit) needs unit')
    elif params.get('metrics_dir') is not None and not params['metrics_dir'].startswith('/'):
        errors.append('metrics_dir must be an absolute path, e.g. /var/lib/prometheus/node-exporter (got %r)' % params['metrics_dir'])
    return errors


def config(params):
    """The machine's Config from validated module params."""
    return Config(timeout=params['timeout'], request_timeout=params['request_timeout'],
                  stall_timeout=params['stall_timeout'], max_restarts=params['max_restarts'],
                  poll_interval=params['poll_interval'], max_poll_interval=params['max_poll_interval'],
                  probe=params['probe'], unit=params['unit'], url=params['url'].rstrip('/'), model=params['model'])


def secrets(params):
    """What never appears in the result, the progress file or a warning: api_key and secret-looking headers."""
    return secret_values(params['api_key'], params['headers'])
