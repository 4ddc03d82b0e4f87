# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that render SGLang's argv and a systemd ExecStart= line (logic in module_utils/rollout/server_args.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The collection's module_utils are imported inside each filter: to find one filter of the collection, Ansible imports
# every filter file of it (plugins/loader.py Jinja2Loader), in every worker process (one per host and task); a
# filter pays only for what it calls (tests/unit/test_architecture.py).


def sglang_argv(server_args, extra_args=None, reserved=None):
    """Filter: dict of flags (+ raw extras) -> argv list."""
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.server_args import ServerArgsError, build_argv
    try:
        return build_argv(server_args, extra_args, reserved)
    except ServerArgsError as exc:
        raise AnsibleFilterError(str(exc))


def systemd_exec(argv):
    """Filter: argv list -> one ExecStart= value that systemd splits back into exactly that argv."""
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.server_args import (
        ServerArgsError,
        systemd_exec_line,
    )
    try:
        return systemd_exec_line(argv)
    except ServerArgsError as exc:
        raise AnsibleFilterError(str(exc))


def systemd_environment_lines(env, where='sglang_env'):
    """Filter: dict of environment variables -> sorted KEY="value" lines for an EnvironmentFile=."""
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.server_args import (
        ServerArgsError,
        environment_lines,
    )
    try:
        return environment_lines(env, where)
    except ServerArgsError as exc:
        raise AnsibleFilterError(str(exc))


def sglang_secret_environment(secret_args):
    """Filter: sglang_secret_args (secret flag -> value) -> the secrets file's LLMOPS_SGLANG_SECRET_* variables."""
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.server_args import (
        ServerArgsError,
        secret_environment,
    )
    try:
        return secret_environment(secret_args)
    except ServerArgsError as exc:
        raise AnsibleFilterError(str(exc))


def sglang_secrets_digest(content, key):
    """Filter: the secrets file's text (None: no file) -> its digest keyed with key, as sglang_observe reports it."""
    from ansible_collections.llmops.sglang.plugins.module_utils.secret_flags import secrets_digest
    if content is None:
        return None
    try:
        return secrets_digest(content, key)
    except (ValueError, TypeError, AttributeError) as exc:
        raise AnsibleFilterError('sglang_secrets_digest: %s' % exc)


def sglang_parser_refusal(stderr, server_args=None, extra_args=None, reserved=None):
    """Filter: SGLang's parser output -> {error, variable}: its words and the role variable they point at."""
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.server_args import parser_refusal
    return parser_refusal(stderr, server_args, extra_args, reserved)


class FilterModule(object):
    """llmops.sglang argument filters."""

    def filters(self):
        return {
            'sglang_argv': sglang_argv,
            'systemd_exec_line': systemd_exec,
            'systemd_environment_lines': systemd_environment_lines,
            'sglang_parser_refusal': sglang_parser_refusal,
            'sglang_secret_environment': sglang_secret_environment,
            'sglang_secrets_digest': sglang_secrets_digest,
        }
