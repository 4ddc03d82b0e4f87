# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `follow` request of pipelined distribution: its rules (module_utils/model/model_sync_access.py). The forced
command that serves it on a real, growing tree is tested in tests/local/plugins/modules/test_sglang_model_sync_follow.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils.model import model_sync_access as access

ROOTS = ['/models/k26.versions']
F = '/models/k26.versions/v1/model-00001-of-00002.safetensors'


def test_a_follow_request_names_offset_size_stall_rate_and_a_file_of_a_version():
    assert access.parse_request('follow 5 100 30 0 ' + F, ROOTS) == {
        'op': 'follow', 'root': '/models/k26.versions', 'parts': ['v1', 'model-00001-of-00002.safetensors'],
        'offset': 5, 'size': 100, 'stall': 30, 'rate': 0}
    assert access.check_follow_request(F, '/models/k26.versions', 0, 100, 60, 1000) == 'follow 0 100 60 1000 ' + F


@pytest.mark.parametrize('text, why', [
    ('follow 101 100 30 0 ' + F, 'past the size'),
    ('follow 0 100 0 0 ' + F, 'stall 0 is not between'),
    ('follow 0 100 3601 0 ' + F, 'stall 3601 is not between'),
    ('follow -1 100 30 0 ' + F, 'not a whole number'),
    ('follow 0 1e3 30 0 ' + F, 'not a whole number'),
    ('follow 0 100 30 0 /models/k26.versions/.staging-v1/x', 'staging and hidden directories are not served'),
    ('follow 0 100 30 0 /models/k26.versions/v1', 'a version directory, not a file'),
    ('follow 0 100 30 0 /etc/shadow', 'outside the versions directories'),
    ('follow 0 100 30 0 /models/k26.versions/v1/../../../etc/shadow', 'not normalized'),
    ('follow 0 100 30 ' + F, 'not a request this account serves'),
    ('follow 0 100 30 0 %s; sh' % F, 'not a request this account serves'),
])
def test_a_follow_the_rules_refuse(text, why):
    with pytest.raises(access.Refused) as caught:
        access.parse_request(text, ROOTS)
    assert why in str(caught.value)


@pytest.mark.parametrize('position, failed, idle, verdict', [
    (100, True, 99, 'done'),     # the reader has all it asked for, whatever happened since
    (50, True, 0, 'failed'),
    (50, False, 30, 'stalled'),
    (50, False, 29.9, 'wait'),
])
def test_what_a_follow_does_when_nothing_new_is_there(position, failed, idle, verdict):
    assert access.follow_verdict(position, 100, failed, idle, 30) == verdict


def test_the_pace_keeps_the_rate():
    assert access.pace(1000, 0.5, 1000) == pytest.approx(0.5)
    assert access.pace(1000, 2.0, 1000) == 0.0
    assert access.pace(10 ** 9, 0.0, 0) == 0.0
