# -*- coding: utf-8 -*-
"""A model mirror for tests: an HTTP directory with Range support that records every byte it sends and can cut a
transfer short (once per file), as a mirror whose connection drops would. Used by tests/integration/test_sync.py
(bound to the fleet hosts' outer addresses) and tests/local/plugins/modules/test_sglang_model_sync_mirror.py (loopback)."""

from __future__ import absolute_import, division, print_function

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote


class Mirror:
    """The model mirror: serves DIR's files with Range support on each given address, records what it sent."""

    def __init__(self, directory, addresses):
        self.directory = Path(directory)
        self.lock = threading.Lock()
        self.sent = {}         # file -> [(range start, bytes sent)]
        self.cut = {}          # file -> bytes to send before dropping the connection (once)
        self.servers = []
        port = 0
        for address in addresses:
            server = ThreadingHTTPServer((address, port), self.handler())
            port = server.server_address[1]
            self.servers.append(server)
            threading.Thread(target=server.serve_forever, daemon=True).start()
        self.port = port

    def handler(self):
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args):
                pass

            def do_GET(self):  # noqa: N802
                name = unquote(self.path.lstrip('/'))
                path = mirror.directory / name
                if '..' in name.split('/') or not path.is_file():
                    self.send_error(404)
                    return
                size = path.stat().st_size
                start = 0
                ranged = self.headers.get('Range', '')
                if ranged.startswith('bytes=') and ranged.endswith('-'):
                    start = int(ranged[len('bytes='):-1])
                    self.send_response(206)
                    self.send_header('Content-Range', 'bytes %d-%d/%d' % (start, size - 1, size))
                else:
                    self.send_response(200)
                self.send_header('Content-Length', str(size - start))
                self.end_headers()
                with mirror.lock:
                    limit = mirror.cut.pop(name, None)
                with open(path, 'rb') as handle:
                    handle.seek(start)
                    data = handle.read() if limit is None else handle.read(limit)
                # Recorded before the bytes go out (it was recorded after, also when the write failed): a client that
                # has read them all may finish, and its test read `sent`, before this thread runs again.
                with mirror.lock:
                    mirror.sent.setdefault(name, []).append((start, len(data)))
                self.wfile.write(data)
                self.wfile.flush()
                if limit is not None:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)

        return Handler

    def stop(self):
        for server in self.servers:
            server.shutdown()
            server.server_close()
