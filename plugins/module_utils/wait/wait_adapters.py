# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The I/O of sglang_wait_ready, as adapters the driver loop calls (wait_driver.watch): the host (systemctl,
journalctl, /proc, nvidia-smi), the endpoint (a TCP connect, HTTP through requests), the progress file and the
clock. What they return is parsed and classified by the pure units (systemd_props, procfs, probe, nvidia_smi);
what it means is decided by wait_machine. The unit tests drive the same loop with fakes of these four.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import socket
import tempfile
import time
import traceback
from urllib.parse import urlparse

from ansible_collections.llmops.sglang.plugins.module_utils.monitoring.deploy_metrics import phase_file_name, render_phase
from ansible_collections.llmops.sglang.plugins.module_utils.host.file_adapters import UnsafePath, remove_file, write_file
from ansible_collections.llmops.sglang.plugins.module_utils.host.nvidia_smi import parse_query_gpu, query_cmd
from ansible_collections.llmops.sglang.plugins.module_utils.wait.probe import OK, Outcome, build_request, classify_error, classify_http
from ansible_collections.llmops.sglang.plugins.module_utils.host.procfs import (
    cgroup_procs_paths, listening_inodes, parse_pids, socket_inode,
)
from ansible_collections.llmops.sglang.plugins.module_utils.host.systemd_props import (
    current_run_entries, journal_cmd, parse_journal_json, parse_show, show_cmd, unit_props,
)

REQUESTS_IMP_ERR = None
try:
    import requests
    HAS_REQUESTS = True
except ImportError:
    REQUESTS_IMP_ERR = traceback.format_exc()
    HAS_REQUESTS = False

BACKFILL_LINES = 400


class Host(object):
    """systemctl / journalctl / nvidia-smi on the managed node, through module.run_command."""

    def __init__(self, module, unit):
        self.module = module
        self.unit = unit
        self.systemctl = module.get_bin_path('systemctl', required=bool(unit) and not module.check_mode)
        self.journalctl = module.get_bin_path('journalctl')
        self.nvidia_smi = module.get_bin_path('nvidia-smi')
        self.timeout_bin = module.get_bin_path('timeout')
        self.cursor = None
        self.env = {'LC_ALL': 'C', 'SYSTEMD_PAGER': '', 'SYSTEMD_COLORS': '0'}
        self.journal_warning = None
        self._foreign_inodes = None
        self._holder = (None, None)

    def show(self):
        rc, out, err = self.module.run_command(show_cmd(self.systemctl, self.unit), environ_update=self.env)
        if rc != 0:
            return None, (err or out).strip()
        return unit_props(parse_show(out), self.unit), None

    def _journal(self, after_cursor=None, lines=None):
        if not self.journalctl:
            self.journal_warning = 'journalctl not found: no journal excerpt, no phases, no stall detection'
            return None
        cmd = journal_cmd(self.journalctl, self.unit, after_cursor=after_cursor, lines=lines)
        rc, out, err = self.module.run_command(cmd, environ_update=self.env)
        if rc != 0 and not out.strip() and (not err.strip() or 'No entries' in err):
            return []   # newer journalctl versions exit 1 when nothing matched: no new lines, not an error
        if rc != 0 or 'insufficient permissions' in (err or ''):
            self.journal_warning = ('cannot read the journal (%s): run the module with become so that it can; '
                                    'no phases, no stall detection' % (err or 'rc=%d' % rc).strip().splitlines()[0])
            return None
        entries = parse_journal_json(out, self.unit)
        if entries and entries[-1].cursor:
            self.cursor = entries[-1].cursor
        return entries

    def first_journal(self, props, since, mono_now, wall_now):
        """The lines that already belong to this start, and the cursor for the next reads."""
        if since != 'invocation':
            self.cursor = since
            return self._journal(after_cursor=since)
        entries = self._journal(lines=BACKFILL_LINES)
        if entries is None:
            return None
        if props is None or not props.invocation_id or props.active_state == 'inactive':
            return []
        start_rt = None
        if props.exec_main_start_monotonic_us:
            start_rt = int((wall_now - (mono_now - props.exec_main_start_monotonic_us / 1e6)) * 1e6)
        return current_run_entries(entries, props.invocation_id, start_rt)

    def next_journal(self):
        return self._journal(after_cursor=self.cursor)

    def port_owner(self, port, props):
        """Whether the unit's processes hold the listening socket of the port: True, False, or None
        (cannot tell: not a local port, no permission)."""
        inodes = set()
        for path in ('/proc/net/tcp', '/proc/net/tcp6'):
            text = _read(path)
            if text:
                inodes |= listening_inodes(text, port)
        if not inodes:
            return None
        if inodes == self._foreign_inodes:
            return False   # the same foreign socket as last time: no need to look again
        pids = [props.main_pid] if props.main_pid > 0 else []
        for path in cgroup_procs_paths(props.control_group):
            text = _read(path)
            if text is not None:
                pids += [pid for pid in parse_pids(text) if pid not in pids]
                break
        readable = False
        for pid in pids:
            fd_dir = '/proc/%d/fd' % pid
            try:
                fds = os.listdir(fd_dir)
            except OSError:
                continue
            readable = True
            for fd in fds:
                try:
                    if socket_inode(os.readlink(os.path.join(fd_dir, fd))) in inodes:
                        self._foreign_inodes = None
                        return True
                except OSError:
                    continue
        if not readable:
            return None
        self._foreign_inodes = inodes
        return False

    def port_holder(self):
        """Who holds the foreign listening socket port_owner found: 'pid N: command line', looked up once per socket."""
        inodes = self._foreign_inodes or set()
        if self._holder[0] != inodes:
            self._holder = (inodes, 'held by a process this user cannot see')
            for pid in [d for d in os.listdir('/proc') if d.isdigit()]:
                try:
                    fds = os.listdir('/proc/%s/fd' % pid)
                except OSError:
                    continue
                if any(socket_inode(_readlink('/proc/%s/fd/%s' % (pid, fd))) in inodes for fd in fds):
                    cmdline = (_read('/proc/%s/cmdline' % pid) or '').replace('\0', ' ').strip()
                    self._holder = (inodes, 'held by pid %s: %s' % (pid, cmdline[:200] or '?'))
                    break
        return self._holder[1]

    def pid_alive(self, pid):
        return os.path.exists('/proc/%d' % pid)

    def gpus(self):
        if not self.nvidia_smi:
            return []
        cmd = query_cmd(self.nvidia_smi, self.timeout_bin)  # bounded as sglang_info's: one place for the timeout
        rc, out, dummy = self.module.run_command(cmd, environ_update=self.env)
        if rc != 0:
            return []
        return parse_query_gpu(out)


def _read(path):
    try:
        with open(path, encoding='utf-8', errors='replace') as f:
            return f.read()
    except (IOError, OSError):
        return None


def _readlink(path):
    try:
        return os.readlink(path)
    except OSError:
        return None


class Http(object):
    """The probe's I/O: a TCP connect, then HTTP through one keep-alive requests session."""

    def __init__(self, params, expect_fn):
        parsed = urlparse(params['url'])
        self.host = parsed.hostname
        self.port = parsed.port or (443 if parsed.scheme == 'https' else 80)
        self.params = params
        self.expect_fn = expect_fn
        self.session = requests.Session()
        self.session.verify = params['validate_certs']
        # proxies from the environment must not capture a probe of the local server
        self.session.trust_env = self.host not in ('127.0.0.1', 'localhost', '::1')

    def connect(self, timeout):
        t0 = time.monotonic()
        try:
            sock = socket.create_connection((self.host, self.port), timeout=timeout)
            sock.close()
        except ConnectionRefusedError:
            return classify_error('refused', '', time.monotonic() - t0)
        except socket.timeout:
            return classify_error('timeout', 'connect', time.monotonic() - t0)
        except (OSError, socket.error) as exc:
            return classify_error('error', 'connect: %s' % exc, time.monotonic() - t0)
        return Outcome(OK, None, 'port open', None, time.monotonic() - t0)

    def request(self, step, model, timeout):
        p = self.params
        req = build_request(step, p['url'], model=model, prompt=p['prompt'], max_tokens=p['max_tokens'],
                            api_key=p['api_key'], headers=p['headers'])
        t0 = time.monotonic()
        try:
            resp = self.session.request(req.method, req.url, headers=req.headers, json=req.body,
                                        timeout=(min(2.0, timeout), timeout), allow_redirects=False)
            body = resp.content
        except requests.exceptions.SSLError as exc:
            return classify_error('tls', str(exc), time.monotonic() - t0)
        except requests.exceptions.Timeout:
            return classify_error('timeout', '%.1fs' % timeout, time.monotonic() - t0)
        except requests.exceptions.ConnectionError as exc:
            if 'refused' in str(exc).lower():
                return classify_error('refused', '', time.monotonic() - t0)
            return classify_error('error', 'connection error: %s' % exc.__class__.__name__, time.monotonic() - t0)
        except requests.exceptions.RequestException as exc:
            return classify_error('error', 'request error: %s' % exc.__class__.__name__, time.monotonic() - t0)
        latency = time.monotonic() - t0
        return classify_http(step, resp.status_code, body, latency, self.expect_fn, p['expect'])

    def close(self):
        self.session.close()


class ProgressFile(object):
    """progress_file on the managed node: each status is written to a temp file and renamed into place, mode 0600."""

    def __init__(self, path):
        self.path = path

    def write(self, status):
        directory = os.path.dirname(os.path.abspath(self.path))
        fd, tmp = tempfile.mkstemp(dir=directory, prefix='.%s.' % os.path.basename(self.path))
        try:
            os.fchmod(fd, 0o600)
            owner = os.stat(directory).st_uid
            if os.geteuid() == 0 and owner != 0:
                # become root from a login user: hand the file to the owner of the directory (Ansible's remote tmp
                # dir), so the controller's live display can read it over the connection without become
                os.fchown(fd, owner, -1)
            with os.fdopen(fd, 'w') as f:
                json.dump(status, f, sort_keys=True)
            os.rename(tmp, self.path)
        except (IOError, OSError):
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise


class PhaseFile(object):
    """metrics_dir on the managed node: ``<unit>.phase.prom`` for node_exporter's textfile collector, the start-up
    phase the server is in while the wait lasts (deploy_metrics.render_phase), removed when the wait ends, so that
    SGLangDeploySlow can name the phase. Written as root through file_adapters (no other user's link followed)."""

    def __init__(self, directory, unit):
        self.directory = directory
        self.unit = unit
        self.path = os.path.join(directory, phase_file_name(unit))

    def show(self, phase, started):
        if os.path.isdir(self.directory):  # no textfile directory: no node_exporter reads one here
            self._do(write_file, render_phase(self.unit, phase, started).encode())

    def clear(self):
        if os.path.isdir(self.directory):
            self._do(remove_file)

    def _do(self, action, *args):
        try:
            action(self.directory, os.path.basename(self.path), *args)
        except UnsafePath as exc:
            raise OSError(str(exc))
