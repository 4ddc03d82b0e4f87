# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The probe's request shape and its quoting of a body, without a server (the requests sent for real and classified
are local tests: tests/local/plugins/module_utils/test_probe_http.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.wait import probe as P


def test_quote_body_is_bounded():
    assert P.quote_body(b'x' * 5000).endswith('...')
    assert len(P.quote_body(b'x' * 5000)) <= P.MAX_QUOTE + 3
    assert P.quote_body(b'') == '(empty body)'
    assert P.quote_body(b'{"detail": [{"loc": ["body"], "msg": "field required"}]}') == '[{"loc": ["body"], "msg": "field required"}]'


def test_custom_headers_win_and_paths():
    req = P.build_request('chat', 'http://h:1/', model='m', headers={'X-Trace': 1, 'Authorization': 'Bearer other'}, api_key='k')
    assert req.url == 'http://h:1/v1/chat/completions'
    assert req.headers['X-Trace'] == '1' and req.headers['Authorization'] == 'Bearer other'
    assert P.build_request('health_generate', 'http://h:1').url == 'http://h:1/health_generate'
