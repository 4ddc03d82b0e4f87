# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The I/O of sglang_canary: streamed chat completions at a concurrency level (threads, one requests session each),
/metrics, and the recorded baseline in root's control directory. What comes back is read by stream.py and judged by
analysis.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import threading
import time
import traceback

from ansible_collections.llmops.sglang.plugins.module_utils.canary.stream import chat_body, error_text, sample
from ansible_collections.llmops.sglang.plugins.module_utils.host.file_adapters import read_file, write_file
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_metrics import in_flight

REQUESTS_IMP_ERR = None
try:
    import requests
    HAS_REQUESTS = True
except ImportError:
    REQUESTS_IMP_ERR = traceback.format_exc()
    HAS_REQUESTS = False


class Endpoint(object):
    """One server (the canary or the live baseline): its base URL and the headers every request carries."""

    def __init__(self, url, api_key=None, headers=None, validate_certs=True, timeout=120.0):
        self.url = url.rstrip('/')
        self.headers = dict(headers or {})
        if api_key:
            self.headers['Authorization'] = 'Bearer %s' % api_key
        self.validate_certs = validate_certs
        self.timeout = timeout
        local = any(name in self.url for name in ('://127.0.0.1', '://localhost', '://[::1]'))
        self.trust_env = not local

    def session(self):
        session = requests.Session()
        session.verify = self.validate_certs
        session.trust_env = self.trust_env  # proxies from the environment must not capture the local server
        return session

    def stream(self, session, body):
        """One streamed chat completion: the sample of what arrived when."""
        start = time.monotonic()
        events, status = [], None
        try:
            with session.post(self.url + '/v1/chat/completions', json=body, headers=self.headers, stream=True,
                              timeout=(5.0, self.timeout)) as resp:
                status = resp.status_code
                if status != 200:
                    try:
                        message = error_text(resp.json())
                    except ValueError:
                        message = None
                    return sample(start, [], time.monotonic(), status,
                                  'HTTP %d%s' % (status, (': ' + message[:200]) if message else ''))
                pending = b''
                for chunk in resp.iter_content(chunk_size=None):
                    now = time.monotonic()
                    pending += chunk
                    while b'\n' in pending:
                        line, pending = pending.split(b'\n', 1)
                        line = line.strip()
                        if line.startswith(b'data:'):
                            events.append((now, line[5:].strip().decode('utf-8', 'replace')))
        except requests.exceptions.Timeout:
            return sample(start, events, time.monotonic(), status, 'no answer within %.0f s' % self.timeout)
        except requests.exceptions.RequestException as exc:
            return sample(start, events, time.monotonic(), status, 'request error: %s' % exc.__class__.__name__)
        return sample(start, events, time.monotonic(), status)

    def settle(self, seconds=30.0, every=1.0):
        """Wait (bounded) until the server holds no request of other clients; the count still held at the end
        (0: idle; None: its /metrics cannot say). The role took a live baseline out of the routers just before."""
        deadline = time.monotonic() + seconds
        while True:
            held = in_flight(self.metrics())
            if not held or time.monotonic() >= deadline:
                return held
            time.sleep(every)

    def metrics(self):
        """/metrics text, or None (no --enable-metrics, or not reachable)."""
        try:
            with self.session() as session:
                resp = session.get(self.url + '/metrics', headers=self.headers, timeout=(5.0, 30.0))
        except requests.exceptions.RequestException:
            return None
        return resp.text if resp.status_code == 200 else None


def run_level(endpoint, prompts, model, concurrency, requests_count, max_tokens, fixed_length):
    """requests_count requests, concurrency at a time (each worker its own keep-alive session), prompts in turn.
    Returns [(prompt, sample)] in the order they were sent."""
    results = [None] * requests_count
    lock = threading.Lock()
    order = iter(range(requests_count))

    def worker():
        with endpoint.session() as session:
            while True:
                with lock:
                    index = next(order, None)
                if index is None:
                    return
                prompt = prompts[index % len(prompts)]
                results[index] = (prompt, endpoint.stream(session, chat_body(prompt, model, max_tokens, fixed_length)))

    threads = [threading.Thread(target=worker) for _thread in range(min(concurrency, requests_count))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def read_record(path):
    """The recorded baseline, or None when there is none or it is not JSON. Only what root alone can have written is
    read (file_adapters.read_file: UnsafePath for a link, a hard link, or an entry another user may change)."""
    data = read_file(path)
    if data is None:
        return None
    try:
        return json.loads(data.decode('utf-8'))
    except ValueError:
        return None


def write_record(path, record):
    """Whole, root-only (0600), in root's control directory, through no symlink (file_adapters.write_file)."""
    directory, name = os.path.split(path)
    return write_file(directory, name, (json.dumps(record, sort_keys=True, indent=1) + '\n').encode('utf-8'), mode=0o600)
