# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet client: drive a fleet through fleet.py and run commands on its hosts over ssh (stdlib only).

The one client of the fleet: the fleet tool itself (its ssh probes), tests/integration/conftest.py (its fixtures)
and the bench use it. Failures go through FleetTool.fail, which raises FleetClientError; the integration tests'
subclass turns them into pytest failures.
"""

from __future__ import absolute_import, division, print_function

import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path

__metaclass__ = type  # pylint: disable=invalid-name

FLEET_TOOL = Path(__file__).resolve().parent / "fleet.py"
PINS_FILE = Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "pins.py"


def _load_pins():
    """The collection's release pins (plugins/module_utils/pins.py: pure data), loaded by path: the fleet runs before
    any venv or collection path exists."""
    spec = importlib.util.spec_from_file_location("llmops_sglang_pins", str(PINS_FILE))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_PINS = _load_pins()
# The SGLang release and package -> version pinned with it, e.g. PINS["compressed-tensors"].
RELEASE = _PINS.RELEASE
PINS = dict(_PINS.PINS)

SSH_OPTIONS = [
    "-o", "BatchMode=yes",
    "-o", "StrictHostKeyChecking=no",
    "-o", "UserKnownHostsFile=/dev/null",
    "-o", "LogLevel=ERROR",
]

# The same options for ansible; BatchMode is left out as ansible sets its own.
INVENTORY_SSH_ARGS = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"

# Every host also has this unprivileged login (the fleet's key, passwordless sudo), as operators' GPU fleets do:
# ansible_user: deploy with ansible_become: true (inventories/ct200, b300; tests/integration/test_become.py).
LOGIN_USER = "deploy"


class FleetClientError(RuntimeError):
    """A fleet.py call or a command on a host failed; the message says which and how."""


def ssh_argv(key, address, command, connect_timeout=5):
    """ssh as root to a fleet host with the fleet's key; command is a shell command (str) or an argv (list)."""
    if not isinstance(command, str):
        command = shlex.join(command)
    return ["ssh", "-i", str(key), "-o", "ConnectTimeout=%d" % connect_timeout] + SSH_OPTIONS + \
        ["root@%s" % address, command]


class FleetHost:
    """One host: name, address, and the mirror the outer machine serves to it."""

    def __init__(self, record):
        self.name = record["name"]
        self.address = record["address"]
        self.outer_address = record["outer_address"]
        self.mirror_url = record["mirror_url"]
        self.console_log = record["console_log"]

    @property
    def wheels_url(self):
        return self.mirror_url + "/wheels/"

    @property
    def pip_source_args(self):
        """The options a pip on this host needs to install from the mirror (plain http needs --trusted-host)."""
        return ["--no-index", "--find-links", self.wheels_url, "--trusted-host", self.outer_address]

    def __repr__(self):
        return "FleetHost(%s, %s)" % (self.name, self.address)


class FleetTool:
    """tests/fleet/fleet.py for one state dir (None: the tool's default, the shared fleet)."""

    def __init__(self, state_dir=None, prefix=None, first_index=None):
        self.options = []
        if state_dir:
            self.options += ["--state-dir", str(state_dir)]
        if prefix:
            self.options += ["--prefix", prefix]
        if first_index:
            self.options += ["--first-index", str(first_index)]

    def fail(self, message):
        """Report a failure: raises FleetClientError (subclasses may fail a test instead)."""
        raise FleetClientError(message)

    def call(self, command, *args):
        return subprocess.run([sys.executable, str(FLEET_TOOL), command] + self.options + list(args),
                              capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)

    def checked(self, command, *args):
        result = self.call(command, *args)
        if result.returncode != 0:
            self.fail("fleet.py %s failed (rc=%d):\n%s" % (command, result.returncode, result.stderr[-6000:]))
        return result

    def status(self):
        """The tool's JSON status: status "down" and no hosts when there is no fleet."""
        result = self.call("status", "--json")
        try:
            return json.loads(result.stdout)
        except ValueError:
            self.fail("fleet.py status --json gave no JSON (rc=%d):\n%s" % (result.returncode, result.stderr))
        return None  # not reached: fail raises

    def up(self, count, *args):
        return self.checked("up", "--count", str(count), *args)

    def down(self):
        return self.checked("down")

    def refresh_standin(self):
        return self.checked("mirror", "--refresh-standin")

    def refresh_mirror(self):
        return self.checked("mirror")


class Fleet:
    """A booted fleet (FleetTool.status() of an up fleet) and running commands on its hosts."""

    def __init__(self, tool, status):
        self.tool = tool
        self.status = status
        self.hosts = [FleetHost(record) for record in status["hosts"]]
        self.inventory = status["inventory"]
        self.key = status["key"]
        self.state_dir = status["state_dir"]

    def host(self, host):
        """A FleetHost from a FleetHost or a name."""
        if isinstance(host, FleetHost):
            return host
        for candidate in self.hosts:
            if candidate.name == host:
                return candidate
        raise KeyError("no host %r in the fleet (%s)" % (host, ", ".join(h.name for h in self.hosts)))

    def ssh_command(self, host, command, connect_timeout=5):
        return ssh_argv(self.key, self.host(host).address, command, connect_timeout=connect_timeout)

    def run(self, host, command, check=False, timeout=600, input=None, connect_timeout=5):  # pylint: disable=redefined-builtin
        """Run a shell command (str) or argv (list) on a host over ssh; returns the CompletedProcess."""
        result = subprocess.run(self.ssh_command(host, command, connect_timeout), capture_output=True, text=True,
                                timeout=timeout, input=input, stdin=None if input is not None else subprocess.DEVNULL,
                                check=False)
        if check and result.returncode != 0:
            self.tool.fail("on %s: %r failed (rc=%d)\nstdout:\n%s\nstderr:\n%s" % (
                self.host(host).name, command, result.returncode, result.stdout[-3000:], result.stderr[-3000:]))
        return result
