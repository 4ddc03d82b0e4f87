"""Helpers of the stand-in tests: venvs, a server runner (a unique module name: every conftest.py is `conftest`).

Importing this module also puts tests/standin/src on sys.path for the pure-logic tests.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

STANDIN_DIR = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "standin"))
# The pure-logic tests import sglang_standin from the source tree; servers run from installed venvs.
sys.path.insert(0, os.path.join(STANDIN_DIR, "src"))
PACE = "0.005"
WAIT = 120  # generous upper bound for anything to happen; never a timing assertion


def run(cmd, **kwargs):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, **kwargs)


def make_venv(path, python=sys.executable, extra=()):
    run([python, "-m", "venv", path])
    vpy = os.path.join(path, "bin", "python")
    # Build from a copy: setuptools leaves build/ and *.egg-info next to the sources it builds.
    source = path + "-src"
    shutil.copytree(STANDIN_DIR, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    run([vpy, "-m", "pip", "install", "-q", "--no-deps", source])
    for requirement in extra:
        run([vpy, "-m", "pip", "install", "-q", "--no-deps", requirement])
    return vpy


def headerless_interpreter(root):
    """A real CPython install without include/ (like Debian's python3.X without python3.X-dev).

    The interpreter binary is copied and its stdlib linked, so sys.prefix (found from the binary's location)
    points at a tree whose include dir has no Python.h. Returns None where the binary cannot be relocated.
    """
    base = sys.base_prefix
    version = "python%d.%d" % sys.version_info[:2]
    binary = os.path.realpath(os.path.join(base, "bin", version))
    stdlib = os.path.join(base, "lib", version)
    if not (os.path.isfile(binary) and os.path.isdir(stdlib)):
        return None
    os.makedirs(os.path.join(root, "bin"))
    os.makedirs(os.path.join(root, "lib"))
    shutil.copy2(binary, os.path.join(root, "bin", version))
    os.symlink(stdlib, os.path.join(root, "lib", version))
    python = os.path.join(root, "bin", version)
    probe = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"], check=False,
                           stdout=subprocess.PIPE, universal_newlines=True)
    include = probe.stdout.strip()
    if probe.returncode != 0 or os.path.exists(os.path.join(include, "Python.h")):
        return None
    return python


# Ports this process handed out: the kernel may give the port it just freed to the next bind(0), and two servers
# started together (test_standin_canary_faults' base and slow) then shared one port: every request reached one of them.
_GIVEN = set()


def free_port():
    """A free port on 127.0.0.1 that this process has not handed out before."""
    while True:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


class Server(object):
    """One stand-in launch: output collected line by line, HTTP helpers, cleanup of its whole process group."""

    def __init__(self, python, model, args=(), env=None, tmp=None, entry=("-m", "sglang.launch_server"), port=None):
        self.port = port or free_port()
        self.model = model
        self.events = os.path.join(str(tmp), "events-%d.jsonl" % self.port)
        environ = dict(os.environ)
        environ.update({"SGLANG_STANDIN_PACE": PACE, "SGLANG_STANDIN_EVENT_LOG": self.events, "PYTHONUNBUFFERED": "1"})
        for key in ("SGLANG_STANDIN_FAULT", "SGLANG_STANDIN_FAULT_FILE", "SGLANG_STANDIN_COUNTER_FILE",
                    "SGLANG_STANDIN_STATE_DIR", "SGLANG_STANDIN_GPU", "NCCL_P2P_DISABLE"):
            environ.pop(key, None)
        environ.update(env or {})
        cmd = [python] + list(entry) + ["--model-path", model, "--host", "127.0.0.1", "--port", str(self.port)] + list(args)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=environ,
                                     start_new_session=True, universal_newlines=True)
        self.lines = []
        self.cond = threading.Condition()
        self.reader = threading.Thread(target=self._read)
        self.reader.daemon = True
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    @property
    def output(self):
        with self.cond:
            return "\n".join(self.lines)

    def wait_for(self, pattern, timeout=WAIT):
        """Block until a line matches `pattern`; fail with the output if the process ends first."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.lines:
                    if regex.search(line):
                        return line
                if (self.proc.poll() is not None and not self.reader.is_alive()) or time.monotonic() > deadline:
                    raise AssertionError("no line matching %r; rc=%s; output:\n%s"
                                         % (pattern, self.proc.poll(), "\n".join(self.lines[-60:])))
                self.cond.wait(0.2)

    def wait_ready(self):
        return self.wait_for(r"The server is fired up and ready to roll!")

    def wait_exit(self, timeout=WAIT):
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return code

    def request(self, method, path, body=None, headers=None, timeout=30):
        """(status, parsed JSON or raw text) of one HTTP request to the server."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), data=data, method=method,
                                     headers=dict({"Content-Type": "application/json"}, **(headers or {})))
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as err:
            status, raw = err.code, err.read()
        try:
            return status, json.loads(raw.decode() or "null")
        except ValueError:
            return status, raw.decode()

    def events_list(self):
        if not os.path.exists(self.events):
            return []
        with open(self.events) as handle:
            return [json.loads(line) for line in handle if line.strip()]

    def signal(self, signum):
        os.kill(self.proc.pid, signum)

    def descendants(self):
        """PIDs of live processes in this server's session (main + schedulers)."""
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % entry) as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            # fields[0] = state, [3] = session id
            if fields[0] != "Z" and int(fields[3]) == self.proc.pid:
                pids.append(int(entry))
        return pids

    def wait_no_descendants(self, timeout=WAIT):
        """SIGKILLed processes vanish asynchronously: wait (boundedly) until none of the session is left."""
        deadline = time.monotonic() + timeout
        while self.descendants() and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.descendants()

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()
        self.reader.join(timeout=10)


LINE_FORMAT = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d( TP\d+)?\] ")


def include_dir_of(python):
    return subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['include'])"],
                          stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout.strip()
