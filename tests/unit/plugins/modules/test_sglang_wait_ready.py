# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_wait_ready's main(): bad options fail before anything is watched (main() runs for real and exits through
AnsibleModule; the JSON it prints is the result). Waits against a real HTTP server and systemctl/journalctl
stand-ins are local tests: tests/local/plugins/modules/test_sglang_wait_ready_live.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

pytest.importorskip('requests')

from ansible_collections.llmops.sglang.plugins.modules import sglang_wait_ready as mod  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.llmops.sglang.tests.unit.plugins import fakes  # noqa: E402  pylint: disable=wrong-import-position


def run_module(args, capsys, check_mode=False):
    return fakes.run_module(mod, args, capsys, check_mode)


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize('args,words', [
    ({'url': 'ftp://127.0.0.1:30000'}, 'url must be an http:// or https:// URL'),
    ({'url': 'http://127.0.0.1:30000/v1'}, 'without /v1'),
    ({'url': 'http://127.0.0.1:99999'}, 'invalid port'),
    ({'timeout': 0}, 'timeout must be a number of seconds above 0'),
    ({'request_timeout': -1}, 'request_timeout must be'),
    ({'stall_timeout': -5}, 'stall_timeout must be 0 (off)'),
    ({'max_restarts': -1}, 'max_restarts must be 0 or more'),
    ({'max_tokens': 0}, 'max_tokens must be 1 or more'),
    ({'poll_interval': 5, 'max_poll_interval': 1}, 'max_poll_interval must be at least poll_interval'),
    ({'unit': 'sglang k26'}, 'unit must be a systemd unit name'),
    ({'unit': 'a.service', 'since': 'yesterday'}, "since must be 'invocation' or a journal cursor"),
    ({'since': 's=0123;i=4'}, 'since (a journal cursor) needs unit'),
    ({'probe': 'health', 'expect': 'choices'}, 'expect applies to the JSON body of probe chat or completion'),
    ({'headers': {'X-A': ['list']}}, 'headers must map header names to strings'),
    ({'expect': 'choices[0'}, 'expect is not a valid JMESPath expression'),
])
def test_bad_options_fail_before_waiting(args, words, capsys):
    res = run_module(args, capsys)
    assert res['failed'] and res['_rc'] == 1
    assert words in res['msg']
    assert res['ready'] is False


def test_bad_choice_is_ansibles_own_error(capsys):
    res = run_module({'probe': 'models'}, capsys)
    assert res['failed'] and 'probe' in res['msg'] and 'chat' in res['msg']
