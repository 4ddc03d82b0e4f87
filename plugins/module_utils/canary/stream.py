# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One streamed chat completion of the canary's load: the request, and the sample its events make. Pure, no I/O.

The adapter (canary_adapters.py) posts the body and hands every server-sent ``data:`` line here with the monotonic
time it arrived. SGLang 0.5.23 streams a chat completion as chunks with ``choices[0].delta`` (``content``,
``reasoning_content`` with a reasoning parser), then, asked with ``stream_options.include_usage``, a chunk with
``usage`` and no choices, then ``data: [DONE]``; a request that fails after the stream began sends a chunk with
``error`` instead.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json


def chat_body(prompt, model, max_tokens, fixed_length):
    """temperature 0 and a fixed length (``ignore_eos``: every answer runs to max_tokens) make rounds comparable; the
    golden answers end where the model ends them."""
    body = {'model': model, 'messages': [{'role': 'user', 'content': prompt}], 'max_tokens': max_tokens,
            'temperature': 0, 'stream': True, 'stream_options': {'include_usage': True}}
    if fixed_length:
        body['ignore_eos'] = True
    return body


def error_text(data):
    """The error a chunk or a JSON error body carries, or None."""
    if not isinstance(data, dict):
        return None
    error = data.get('error')
    if isinstance(error, dict):
        return str(error.get('message') or error)
    if error:
        return str(error)
    if data.get('object') == 'error':
        return str(data.get('message') or 'error')
    return None


def sample(start, events, end, status, failure=None):
    """events: [(monotonic time, the text after 'data: ')]. The sample analysis.round_figures reads."""
    result = {'start': start, 'end': end, 'ok': False, 'error': failure, 'ttft': None, 'tpot': None, 'tokens': 0,
              'text': '', 'reasoning': '', 'status': status}
    if failure:
        return result
    if status != 200:
        result['error'] = 'HTTP %s' % status
        return result
    first = last = None
    content, reasoning, done, usage = [], [], False, None
    for when, data in events:
        if data.strip() == '[DONE]':
            done = True
            continue
        try:
            chunk = json.loads(data)
        except ValueError:
            result['error'] = 'a chunk that is not JSON: %s' % data[:80]
            return result
        error = error_text(chunk)
        if error:
            result['error'] = error[:200]
            return result
        if chunk.get('usage'):
            usage = chunk['usage']
        for choice in chunk.get('choices') or []:
            delta = choice.get('delta') or {}
            text = (delta.get('content') or '') + (delta.get('reasoning_content') or '')
            if text:
                first = when if first is None else first
                last = when
            content.append(delta.get('content') or '')
            reasoning.append(delta.get('reasoning_content') or '')
    result.update(text=''.join(content).strip(), reasoning=''.join(reasoning).strip())
    tokens = (usage or {}).get('completion_tokens')
    if not done:
        result['error'] = 'the stream ended without [DONE]'
    elif first is None:
        result['error'] = 'no generated text'
    elif not isinstance(tokens, int):
        result['error'] = 'no usage chunk (completion_tokens)'
    else:
        result.update(ok=True, tokens=tokens, ttft=first - start,
                      tpot=(last - first) / (tokens - 1) if tokens > 1 else None)
    return result


def metric_total(text, name):
    """The sum of a Prometheus counter's samples (all label sets) in /metrics text, or None when it is absent."""
    total, seen = 0.0, False
    for line in (text or '').splitlines():
        if line.startswith('#') or not line.startswith(name):
            continue
        rest = line[len(name):]
        if not rest or rest[0] not in ' {':
            continue
        try:
            total += float(line.rsplit(None, 1)[-1])
            seen = True
        except ValueError:
            continue
    return total if seen else None
