# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Probe requests and classification against a real HTTP server on 127.0.0.1 (no mocked HTTP). The request's shape
and the body's quoting are unit tests (tests/unit/plugins/module_utils/test_probe.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

requests = pytest.importorskip('requests')
jmespath = pytest.importorskip('jmespath')

from ansible_collections.llmops.sglang.plugins.module_utils.wait import probe as P  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.llmops.sglang.tests.local.plugins.servers import free_port  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.llmops.sglang.tests.unit.plugins.fakes import chat_body  # noqa: E402  pylint: disable=wrong-import-position


def send(step, url, model='kimi-k2.6', timeout=5.0, expect=None, expect_text=None, **kw):
    """Build, send for real, classify: what the module does, minus the state machine."""
    req = P.build_request(step, url, model=model, **kw)
    try:
        resp = requests.request(req.method, req.url, headers=req.headers, json=req.body, timeout=timeout, allow_redirects=False)
    except requests.exceptions.Timeout:
        return P.classify_error('timeout', '%ss' % timeout)
    except requests.exceptions.ConnectionError:
        return P.classify_error('refused', '')
    return P.classify_http(step, resp.status_code, resp.content, 0.01, expect, expect_text)


def test_chat_ready_and_request_shape(server):
    server.routes['/v1/chat/completions'] = (200, chat_body('OK'), 0)
    out = send('chat', server.url, api_key='sk-test', prompt='Say OK', max_tokens=4)
    assert out.kind == P.OK and out.status == 200
    req = server.requests[-1]
    assert req['method'] == 'POST'
    assert req['json'] == {'model': 'kimi-k2.6', 'max_tokens': 4, 'temperature': 0, 'stream': False,
                           'messages': [{'role': 'user', 'content': 'Say OK'}]}
    assert req['headers']['Authorization'] == 'Bearer sk-test'


def test_thinking_model_answer_in_reasoning_content_is_ready(server):
    server.routes['/v1/chat/completions'] = (200, chat_body(None, reasoning='The user', tokens=None), 0)
    assert send('chat', server.url).kind == P.OK


def test_whitespace_answer_with_tokens_is_ready(server):
    server.routes['/v1/chat/completions'] = (200, chat_body('  \n', tokens=2), 0)
    assert send('chat', server.url).kind == P.OK


def test_completion_probe_text(server):
    server.routes['/v1/completions'] = (200, {'choices': [{'index': 0, 'text': ' Paris'}]}, 0)
    out = send('completion', server.url, prompt='The capital of France is')
    assert out.kind == P.OK
    assert server.requests[-1]['json']['prompt'] == 'The capital of France is'


@pytest.mark.parametrize('body,why', [
    (chat_body(choices=False), 'no choices'),
    (chat_body('', tokens=0), 'no token'),
    (chat_body(None, tokens=None), 'no token'),
    ([1, 2], 'not a JSON object'),
])
def test_bad_bodies(server, body, why):
    server.routes['/v1/chat/completions'] = (200, body, 0)
    out = send('chat', server.url)
    assert out.kind == P.BAD and why in out.detail


def test_non_json_200_never_crashes(server):
    server.routes['/v1/chat/completions'] = (200, b'<html>\xff\xfe proxy page</html>', 0)
    out = send('chat', server.url)
    assert out.kind == P.BAD and 'not JSON' in out.detail


def test_401_quotes_the_server_error(server):
    server.routes['/v1/chat/completions'] = (401, {'error': {'message': 'Invalid API Key', 'type': 'auth'}}, 0)
    out = send('chat', server.url, api_key='wrong')
    assert out.kind == P.REJECTED and out.status == 401
    assert 'Invalid API Key' in out.detail
    assert "api_key" in out.hint and out.value is None, "a hint is never the value of a discovery"


def test_400_model_complaint_hints_the_model(server):
    server.routes['/v1/chat/completions'] = (400, {'object': 'error', 'message': 'The model `gpt-4` does not exist.', 'code': 400}, 0)
    out = send('chat', server.url, model='gpt-4')
    assert out.kind == P.REJECTED and 'does not exist' in out.detail
    assert out.hint == P.MODEL_HINT


def test_404_wrong_path(server):
    out = send('ready', server.url)
    assert out.kind == P.REJECTED and out.status == 404 and 'Not Found' in out.detail
    assert "health_generate" in out.hint


@pytest.mark.parametrize('status', [408, 429, 500, 502, 503, 504])
def test_transient_statuses_keep_waiting(server, status):
    server.routes['/health_generate'] = (status, 'not yet', 0)
    out = send('health_generate', server.url)
    assert out.kind == P.WAIT and out.status == status


def test_redirect_is_rejected(server):
    server.routes['/v1/chat/completions'] = (302, '', 0)
    out = send('chat', server.url)
    assert out.kind == P.REJECTED and out.hint == P.REDIRECT_HINT


def test_slow_answer_is_a_timeout(server):
    server.routes['/v1/chat/completions'] = (200, chat_body(), 3)
    out = send('chat', server.url, timeout=0.2)
    assert out.kind == P.TIMEOUT


def test_refused_port():
    out = send('health', 'http://127.0.0.1:%d' % free_port())
    assert out.kind == P.REFUSED


def test_health_probes_only_need_the_status(server):
    server.routes['/health'] = (200, '', 0)
    server.routes['/ready'] = (200, 'whatever', 0)
    assert send('health', server.url).kind == P.OK
    assert send('ready', server.url).kind == P.OK
    assert server.requests[-1]['method'] == 'GET'


def test_model_discovery(server):
    server.routes['/v1/models'] = (200, {'object': 'list', 'data': [{'id': '/root/models/Kimi-K2.6', 'object': 'model'}]}, 0)
    out = send('models', server.url)
    assert out.kind == P.OK and out.value == ['/root/models/Kimi-K2.6']
    server.routes['/v1/models'] = (200, {'object': 'list', 'data': []}, 0)
    assert send('models', server.url).kind == P.BAD
    server.routes['/model_info'] = (200, {'model_path': '/m', 'served_model_name': 'kimi-k2.6', 'is_generation': True}, 0)
    out = send('model_info', server.url)
    assert out.kind == P.OK and out.value == 'kimi-k2.6'


def test_expect_jmespath(server):
    server.routes['/v1/chat/completions'] = (200, chat_body('OK'), 0)
    ok = jmespath.compile("choices[0].message.content == 'OK'").search
    assert send('chat', server.url, expect=ok, expect_text='...').kind == P.OK
    nope = jmespath.compile("choices[0].finish_reason == 'stop'").search
    out = send('chat', server.url, expect=nope, expect_text="choices[0].finish_reason == 'stop'")
    assert out.kind == P.BAD and 'not truthy' in out.detail
    # a runtime type error inside JMESPath is "not as expected", never a crash
    broken = jmespath.compile('abs(choices)').search
    assert send('chat', server.url, expect=broken, expect_text='abs(choices)').kind == P.BAD
