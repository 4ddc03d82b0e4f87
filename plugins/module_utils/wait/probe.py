# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readiness probes for an SGLang server: build the requests, classify what came back.

Pure: the module performs the requests (with `requests`) and hands status and body here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
from collections import namedtuple

PROBES = ('chat', 'completion', 'health_generate', 'health', 'ready')
# Probes that send a real generation and validate its body (they need a model name).
COMPLETION_PROBES = ('chat', 'completion')
PROBE_PATHS = {
    'chat': '/v1/chat/completions',
    'completion': '/v1/completions',
    'health_generate': '/health_generate',
    'health': '/health',
    'ready': '/ready',
}
MODELS_PATH = '/v1/models'
MODEL_INFO_PATH = '/model_info'

# Outcome kinds: ok (this step passed), wait (not yet: try again), rejected (a 4xx that
# will not change: fail now), bad (answered, but not a valid answer), refused (nothing
# listens), timeout (no answer in time), foreign (the port is open, but no process of the
# watched unit holds it: another server answers there).
OK, WAIT, REJECTED, BAD, REFUSED, TIMEOUT, FOREIGN = 'ok', 'wait', 'rejected', 'bad', 'refused', 'timeout', 'foreign'

Request = namedtuple('Request', ['method', 'url', 'path', 'headers', 'body'])
# value: what a passed discovery step found (the served ids of /v1/models, the name of /model_info), else None.
# hint: the fix for an answer that ends or explains the wait (a rejection, a foreign port), else None.
Outcome = namedtuple('Outcome', ['kind', 'status', 'detail', 'value', 'latency', 'hint'], defaults=(None,))

MAX_QUOTE = 500
_MODEL_COMPLAINT_RE = re.compile(r'(?i)\bmodel\b')

REJECT_HINTS = {
    401: 'The server needs an API key: set api_key to the value of the server\'s --api-key (sent as "Authorization: Bearer KEY").',
    403: 'The API key was refused: set api_key to the value of the server\'s --api-key.',
    404: 'Wrong path or model: url is the server\'s base URL (no /v1), probe=ready needs SGLang >= 0.5.23 '
         '(use health_generate on older releases), and model must be a served model name (see GET /v1/models).',
    405: 'The endpoint does not accept this method: check url points at the SGLang server itself and probe matches its version.',
}
# Completions answer 200 whatever model is named (no model check in SGLang 0.5.23's entrypoints/openai/serving_chat.py);
# only GET /v1/models/{m} answers 404 (http_server.py:2025-2040). The waiter compares the name with the served ids.
UNSERVED_MODEL_HINT = ('Set model (the role: sglang_wait.model or sglang_served_model_name) to a model this server serves: %s. '
                       'Clients that name another model get answers from this one.')
MODEL_HINT = 'Wrong model name: set model to the server\'s --served-model-name (GET /v1/models lists it), or omit model to discover it.'
BAD_REQUEST_HINT = 'The server refused the request body: check prompt, max_tokens and headers.'
FOREIGN_DETAIL = 'port %d accepts connections, but no process of %s listens on it (%s)'
FOREIGN_HINT = ("Another process holds port %d (%s): stop it (`ss -ltnp 'sport = :%d'` shows it) or give the server "
                "another port; SGLang fails with 'address already in use' once loaded.")
REDIRECT_HINT = 'The URL redirects: set url to the final address (scheme, host and port of the SGLang server).'
TLS_HINT = 'TLS verification failed: fix the CA trust on the host, or set validate_certs: false for a self-signed test certificate.'


def join_url(base_url, path):
    return base_url.rstrip('/') + path


def build_request(probe, base_url, model=None, prompt='Say OK', max_tokens=4, api_key=None, headers=None):
    """The request of a probe step. probe: one of PROBES, or 'models' / 'model_info' for discovery."""
    hdrs = {'Accept': 'application/json', 'User-Agent': 'llmops.sglang.sglang_wait_ready'}
    if api_key:
        hdrs['Authorization'] = 'Bearer %s' % api_key
    if headers:
        hdrs.update(dict((str(k), str(v)) for k, v in headers.items()))
    if probe == 'models':
        return Request('GET', join_url(base_url, MODELS_PATH), MODELS_PATH, hdrs, None)
    if probe == 'model_info':
        return Request('GET', join_url(base_url, MODEL_INFO_PATH), MODEL_INFO_PATH, hdrs, None)
    path = PROBE_PATHS[probe]
    if probe not in COMPLETION_PROBES:
        return Request('GET', join_url(base_url, path), path, hdrs, None)
    body = {'model': model, 'max_tokens': int(max_tokens), 'temperature': 0, 'stream': False}
    if probe == 'chat':
        body['messages'] = [{'role': 'user', 'content': prompt}]
    else:
        body['prompt'] = prompt
    hdrs['Content-Type'] = 'application/json'
    return Request('POST', join_url(base_url, path), path, hdrs, body)


def decode_json(body):
    """bytes/str -> parsed JSON, or None when it is not JSON (never raises)."""
    if body is None:
        return None
    if isinstance(body, bytes):
        body = body.decode('utf-8', 'replace')
    try:
        return json.loads(body)
    except ValueError:
        return None


def quote_body(body, limit=MAX_QUOTE):
    """The server's error in a few words: the JSON error message if there is one, else the text."""
    data = decode_json(body)
    msg = None
    if isinstance(data, dict):
        err = data.get('error')
        if isinstance(err, dict):
            msg = err.get('message')
        elif isinstance(err, str):
            msg = err
        msg = msg or data.get('message') or data.get('detail')
        if msg is not None and not isinstance(msg, str):
            msg = json.dumps(msg, sort_keys=True)
    if msg is None:
        if isinstance(body, bytes):
            body = body.decode('utf-8', 'replace')
        msg = (body or '').strip()
    msg = ' '.join(msg.split())
    if len(msg) > limit:
        msg = msg[:limit] + '...'
    return msg or '(empty body)'


def generated_tokens(data):
    """Why a completion body is not a generation ('' when it is). Default readiness check."""
    if not isinstance(data, dict):
        return 'the body is not a JSON object'
    choices = data.get('choices')
    if not isinstance(choices, list) or not choices:
        return 'the body has no choices'
    usage = data.get('usage')
    if isinstance(usage, dict):
        tokens = usage.get('completion_tokens')
        if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 1:
            return ''
    first = choices[0] if isinstance(choices[0], dict) else {}
    texts = [first.get('text')]
    message = first.get('message')
    if isinstance(message, dict):
        # a thinking model (reasoning parser) answers in reasoning_content first, content stays null
        texts.extend([message.get('content'), message.get('reasoning_content')])
    if any(isinstance(t, str) and t for t in texts):
        return ''
    return 'no token was generated (usage.completion_tokens < 1 and no content, reasoning_content or text)'


def classify_http(step, status, body, latency=None, expect=None, expect_text=None):
    """Classify one HTTP answer of a probe step.

    step: a PROBES name or 'models' / 'model_info'. expect: optional callable(data) -> value that
    must be truthy (a compiled JMESPath search), expect_text: its source for messages.
    """
    if status in (408, 429) or 500 <= status <= 599:
        return Outcome(WAIT, status, 'HTTP %d: %s' % (status, quote_body(body, 200)), None, latency)
    if 300 <= status <= 399:
        return Outcome(REJECTED, status, 'HTTP %d redirect: %s' % (status, quote_body(body, 200)), None, latency, REDIRECT_HINT)
    if 400 <= status <= 499:
        quoted = quote_body(body)
        hint = REJECT_HINTS.get(status)
        if status in (400, 404, 422) and step in COMPLETION_PROBES and _MODEL_COMPLAINT_RE.search(quoted):
            hint = MODEL_HINT
        elif status in (400, 422):
            hint = BAD_REQUEST_HINT
        return Outcome(REJECTED, status, 'HTTP %d: %s' % (status, quoted), None, latency, hint)
    if not 200 <= status <= 299:
        return Outcome(WAIT, status, 'HTTP %d' % status, None, latency)

    if step == 'models':
        data = decode_json(body)
        ids = []
        if isinstance(data, dict) and isinstance(data.get('data'), list):
            ids = [m.get('id') for m in data['data'] if isinstance(m, dict) and isinstance(m.get('id'), str) and m.get('id')]
        if ids:
            # value: every served id (SGLang 0.5.23: the served model name, then LoRA adapters; http_server.py:1993-2022)
            return Outcome(OK, status, 'models %s' % ', '.join(ids), ids, latency)
        return Outcome(BAD, status, 'GET %s lists no model' % MODELS_PATH, None, latency)
    if step == 'model_info':
        data = decode_json(body)
        name = None
        if isinstance(data, dict):
            name = data.get('served_model_name') or data.get('model_path')
        if isinstance(name, str) and name:
            return Outcome(OK, status, 'model %s' % name, name, latency)
        return Outcome(BAD, status, 'GET %s has no served_model_name' % MODEL_INFO_PATH, None, latency)
    if step not in COMPLETION_PROBES:
        # /health, /health_generate, /ready: the status is the answer
        return Outcome(OK, status, 'HTTP %d' % status, None, latency)

    if status != 200:
        return Outcome(BAD, status, 'HTTP %d instead of 200' % status, None, latency)
    data = decode_json(body)
    if data is None:
        return Outcome(BAD, status, 'the body is not JSON: %s' % quote_body(body, 200), None, latency)
    problem = generated_tokens(data)
    if problem:
        return Outcome(BAD, status, problem, None, latency)
    if expect is not None:
        try:
            value = expect(data)
        except Exception as exc:  # pylint: disable=broad-except
            # a JMESPath runtime error on an unexpected shape means "not as expected", not a crash
            return Outcome(BAD, status, 'expect %r failed: %s' % (expect_text, exc), None, latency)
        if not value:
            return Outcome(BAD, status, 'expect %r is not truthy (got %s)' % (expect_text, json.dumps(value)), None, latency)
    return Outcome(OK, status, 'HTTP 200 with a generated token', None, latency)


def classify_error(kind, detail, latency=None):
    """A request that got no HTTP answer. kind: refused | timeout | tls | error."""
    if kind == 'tls':
        return Outcome(REJECTED, None, 'TLS error: %s' % detail, None, latency, TLS_HINT)
    if kind == 'timeout':
        return Outcome(TIMEOUT, None, 'no answer in time (%s)' % detail, None, latency)
    if kind == 'refused':
        return Outcome(REFUSED, None, 'connection refused', None, latency)
    return Outcome(WAIT, None, detail, None, latency)


def foreign_connect(outcome, port, unit, holder):
    """A TCP connect that succeeded on a port no process of the watched unit listens on: an old server (or another
    unit) answers there, so the open port proves nothing. holder: who holds it, e.g. 'held by pid N: cmdline'."""
    return Outcome(FOREIGN, None, FOREIGN_DETAIL % (port, unit, holder), None, outcome.latency,
                   FOREIGN_HINT % (port, holder, port))
