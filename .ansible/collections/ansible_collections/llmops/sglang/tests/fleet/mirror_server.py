# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Mirror server: one process, one ThreadingHTTPServer per host address (never 0.0.0.0)."""

from __future__ import absolute_import, division, print_function

import functools
import http.server
import signal
import socket
import subprocess
import sys
import threading
import time

from .client import FLEET_TOOL
from .common import FleetError, MIRROR_PORT, tail
from .procs import process_table

__metaclass__ = type  # pylint: disable=invalid-name


class MirrorHandler(http.server.SimpleHTTPRequestHandler):
    """Static files; the access log goes to stderr, which `up` points at mirror.log."""

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        sys.stderr.write("%s %s %s\n" % (time.strftime("%H:%M:%S"), self.client_address[0], format % args))


def serve_mirror(root, addresses, port):
    handler = functools.partial(MirrorHandler, directory=str(root))
    # Block the stop signals before the threads start, so only sigwait below receives them.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    servers = [http.server.ThreadingHTTPServer((address, port), handler) for address in addresses]
    for server in servers:
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stderr.write("serving %s on %s port %d\n" % (root, ", ".join(addresses), port))
    sys.stderr.flush()
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    for server in servers:
        server.shutdown()
        server.server_close()


def start_mirror_server(fleet, hosts, deadline):
    # Through the CLI entry: mirror_server_pids finds the server by that name.
    cmd = [sys.executable, str(FLEET_TOOL), "serve-mirror", "--root", str(fleet.mirror_root),
           "--port", str(MIRROR_PORT)] + [a for h in hosts for a in ("--address", h.outer_address)]
    with open(fleet.mirror_log, "ab") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out,  # pylint: disable=consider-using-with
                                start_new_session=True, cwd="/")
    pending = list(hosts)
    while pending:
        if proc.poll() is not None:
            raise FleetError("mirror server exited (rc=%s):\n%s" % (proc.returncode, tail(fleet.mirror_log)))
        if time.monotonic() > deadline:
            raise FleetError("mirror server did not listen on %s within the deadline" % pending[0].outer_address)
        try:
            socket.create_connection((pending[0].outer_address, MIRROR_PORT), timeout=0.5).close()
            pending.pop(0)
        except OSError:
            time.sleep(0.05)
    return proc.pid


def mirror_server_pids(fleet):
    root = str(fleet.mirror_root)
    return [pid for pid, argv in process_table()
            if "serve-mirror" in argv and root in argv and any(a.endswith("fleet.py") for a in argv)]
