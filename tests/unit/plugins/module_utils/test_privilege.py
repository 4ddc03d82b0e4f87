# -*- coding: utf-8 -*-
"""The refusal of a task that needs root and runs as a login user without become."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.host.privilege import root_refusal


def test_root_is_not_refused():
    assert root_refusal(0, 'root', 'the server role') is None
    assert root_refusal(0, None, 'the server role') is None


def test_a_login_user_is_told_who_it_is_and_what_to_set():
    msg = root_refusal(1000, 'deploy', 'llmops.sglang.server')
    assert msg.startswith('llmops.sglang.server needs root on the host, and this task runs as deploy (uid 1000): ')
    for setting in ('ansible_become: true', 'ansible_user', 'become: true'):
        assert setting in msg


def test_a_uid_without_a_name_is_named_by_its_number():
    assert 'runs as uid 4242:' in root_refusal(4242, None, 'x')
