# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet description: one fleet's paths and settings, and its hosts' names, addresses and files."""

from __future__ import absolute_import, division, print_function

import json
import os
import subprocess
from pathlib import Path

from .client import ssh_argv
from .common import (
    DEFAULT_INVENTORY,
    DEFAULT_STATE_DIR,
    FleetError,
    KEY_NAME,
    MIRROR_PORT,
    STATE_FILE,
    SUBNET_PREFIX,
    log,
)

__metaclass__ = type  # pylint: disable=invalid-name


class Host:
    """One host of the fleet: its name, addresses and files, all derived from its position."""

    def __init__(self, fleet, number):
        self.number = number
        self.name = "%s-%02d" % (fleet.prefix, number)
        self.net_index = fleet.first_index + number - 1
        self.address = "%s.%d.2" % (SUBNET_PREFIX, self.net_index)
        self.outer_address = "%s.%d.1" % (SUBNET_PREFIX, self.net_index)
        self.mirror_url = "http://%s:%d" % (self.outer_address, MIRROR_PORT)
        self.outer_veth = veth_name(self.name)
        self.dir = fleet.state_dir / "hosts" / self.name
        self.upper = self.dir / "upper"
        self.work = self.dir / "work"
        self.merged = self.dir / "merged"
        self.console_log = self.dir / "console.log"

    def describe(self):
        return {"name": self.name, "address": self.address, "outer_address": self.outer_address,
                "mirror_url": self.mirror_url, "console_log": str(self.console_log)}


def veth_name(host_name):
    # Interface names are limited to 15 characters.
    return ("vf-" + host_name)[:15]


class Fleet:
    """Paths and settings of one fleet; several fleets can coexist with different state dirs, prefixes and indexes."""

    def __init__(self, state_dir, prefix, first_index, cache_dir, inventory):
        self.state_dir = Path(state_dir).resolve()
        if self.state_dir == Path("/"):
            raise FleetError("--state-dir must not be /")
        self.prefix = prefix
        self.first_index = first_index
        self.cache_dir = Path(cache_dir).resolve()
        if inventory is None:
            inventory = DEFAULT_INVENTORY if self.state_dir == DEFAULT_STATE_DIR else self.state_dir / "hosts.yml"
        self.inventory = Path(inventory).resolve()
        self.state_file = self.state_dir / STATE_FILE
        self.key = self.state_dir / KEY_NAME
        self.mirror_root = self.state_dir / "mirror"
        self.mirror_log = self.state_dir / "mirror.log"
        # Outside the state dir, which `down` removes.
        self.lock_path = self.state_dir.parent / (".%s.lock" % self.state_dir.name)

    def hosts(self, count):
        return [Host(self, number) for number in range(1, count + 1)]

    def load_state(self):
        try:
            return json.loads(self.state_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except ValueError as exc:
            log("ignoring unreadable %s: %s" % (self.state_file, exc))
            return None

    def save_state(self, state):
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, self.state_file)

    def adopt_state(self, state):
        """Take prefix and index from a recorded fleet: `down` must clean what was made, whatever the flags now."""
        if state:
            self.prefix = state.get("prefix", self.prefix)
            self.first_index = state.get("first_index", self.first_index)
            if state.get("inventory"):
                self.inventory = Path(state["inventory"])


def ssh_command(fleet, host, command, timeout=5):
    return ssh_argv(fleet.key, host.address, command, connect_timeout=timeout)


def host_answers(fleet, host):
    try:
        result = subprocess.run(ssh_command(fleet, host, "true", timeout=2), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10, check=False)
    except subprocess.TimeoutExpired:
        return False
    return result.returncode == 0
