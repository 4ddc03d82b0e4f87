# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The local tests' servers (imported from here, never from another test module): a real HTTP server on 127.0.0.1
whose answers a test scripts, and a free port. Unit tests start none (tests/unit/test_architecture.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeServer(object):
    """A tiny HTTP server whose answers the test scripts per path: (status, body, delay seconds).

    body: dict/list (sent as JSON), str/bytes (sent as is), or a callable(request) -> (status, body, delay).
    """

    def __init__(self):
        self.routes = {}
        self.requests = []
        self._stop = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'

            def log_message(self, *args):
                pass

            def _answer(self):
                length = int(self.headers.get('Content-Length') or 0)
                raw = self.rfile.read(length) if length else b''
                req = {'method': self.command, 'path': self.path, 'headers': dict(self.headers),
                       'json': json.loads(raw.decode('utf-8')) if raw else None}
                outer.requests.append(req)
                spec = outer.routes.get(self.path, (404, {'detail': 'Not Found'}, 0))
                if callable(spec):
                    spec = spec(req)
                status, body, delay = spec
                if delay:
                    outer._stop.wait(delay)
                if isinstance(body, (dict, list)):
                    data, ctype = json.dumps(body).encode('utf-8'), 'application/json'
                else:
                    data, ctype = body if isinstance(body, bytes) else body.encode('utf-8'), 'text/plain'
                try:
                    self.send_response(status)
                    self.send_header('Content-Type', ctype)
                    self.send_header('Content-Length', str(len(data)))
                    if 300 <= status < 400:
                        self.send_header('Location', '/elsewhere')
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = _answer
            do_POST = _answer

        self.httpd = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = 'http://127.0.0.1:%d' % self.port
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={'poll_interval': 0.05})
        self.thread.daemon = True

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port
