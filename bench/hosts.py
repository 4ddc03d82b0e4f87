# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet and the hosts: a private fleet through the shared fleet client, the benchmark's units (the role's)."""

from __future__ import absolute_import, division, print_function

import json
import shutil
import time
from pathlib import Path

from fleet.client import Fleet, FleetTool  # tests/fleet: run.py puts tests/ on sys.path

from .common import API_KEY, BENCH, EVENT_LOG, MODEL_NAME, PORT, REPO, run_playbook

__metaclass__ = type  # pylint: disable=invalid-name


class BenchFleet:
    """A private fleet: fleet.py with our own state dir (the shared fleet client), plus an inventory dir made for the
    benchmark."""

    def __init__(self, state_dir, prefix, count):
        self.state_dir = Path(state_dir)
        self.prefix = prefix
        self.count = count
        self.tool = FleetTool(state_dir=self.state_dir, prefix=prefix, first_index="auto")
        self.client = None
        self.hosts = []
        self.key = None
        self.group_vars = {}
        self.inventory = self.state_dir.parent / (self.state_dir.name + "-inventory")

    def up(self):
        started = time.time()
        self.tool.up(self.count)
        self.client = Fleet(self.tool, self.tool.status())
        self.hosts = [{"name": h.name, "address": h.address, "mirror": h.mirror_url} for h in self.client.hosts]
        self.key = self.client.key
        self.write_inventory(Path(self.client.inventory))
        return time.time() - started

    def down(self):
        result = self.tool.call("down")
        shutil.rmtree(str(self.inventory), ignore_errors=True)
        return result.returncode == 0

    def write_inventory(self, hosts_yml):
        """hosts.yml of the fleet + the repo's local inventory (k26 group, group_vars) with a faster stand-in pace."""
        import yaml  # from the repo venv (ansible-core depends on it)
        local = REPO / "inventories" / "local"
        (self.inventory / "group_vars").mkdir(parents=True, exist_ok=True)
        (self.inventory / "host_vars").mkdir(parents=True, exist_ok=True)
        shutil.copy(str(hosts_yml), str(self.inventory / "hosts.yml"))
        shutil.copy(str(local / "k26.yml"), str(self.inventory / "k26.yml"))
        group_vars = {}
        for path in sorted((local / "group_vars").glob("local_fleet*.yml")):
            group_vars.update(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
        # A 0.01 pace makes the role's own start-up wait a few seconds: the fleet figures are Ansible's cost,
        # not the stand-in's load time.
        group_vars.setdefault("sglang_env", {})["SGLANG_STANDIN_PACE"] = "0.01"
        self.group_vars = group_vars
        (self.inventory / "group_vars" / "local_fleet.yml").write_text(json.dumps(group_vars, indent=1), encoding="utf-8")
        for path in (self.inventory / "host_vars").glob("*.yml"):
            path.unlink()

    def set_host_env(self, host, extra):
        """host_vars for one host: the group's sglang_env plus `extra` (a change only that host sees)."""
        env = dict(self.group_vars.get("sglang_env", {}))
        env.update(extra)
        (self.inventory / "host_vars" / (host + ".yml")).write_text(json.dumps({"sglang_env": env}), encoding="utf-8")

    def ssh(self, host, command, check=True, timeout=300, input_text=None):
        """Run a shell command on a host (a dict of self.hosts) through the shared fleet client."""
        return self.client.run(host["name"], command, check=check, timeout=timeout, input=input_text,
                               connect_timeout=10)


def prepare_hosts(fleet):
    """The benchmark's two units on every host, deployed by the collection's role (bench/playbooks/units.yml): hosts
    not prepared yet become what the seeds found (tests/fleet/demo_prepare.yml)."""
    names = [host["name"] for host in fleet.hosts]
    bare = [host["name"] for host in fleet.hosts
            if fleet.ssh(host, "test -x /opt/sglang/venv/bin/python", check=False).returncode != 0]
    if bare:
        run = run_playbook(fleet, REPO / "tests" / "fleet" / "demo_prepare.yml", limit=",".join(bare))
        if run["rc"] != 0:
            raise RuntimeError("demo_prepare.yml failed:\n" + run["tail"])
    run = run_playbook(fleet, BENCH / "playbooks" / "units.yml", limit=",".join(names),
                       extra={"bench_hosts": ",".join(names), "bench_port": PORT, "bench_model": MODEL_NAME, "bench_api_key": API_KEY,
                              "bench_env": fleet.group_vars.get("sglang_env", {})})
    if run["rc"] != 0:
        raise RuntimeError("the benchmark's units (bench/playbooks/units.yml) failed:\n" + run["tail"])


# The benchmark's two units (bench/playbooks/units.yml deploys them with the role).
UNITS = "sglang-bench.service sglang-bench-once.service"
STOP_UNITS = "systemctl stop {0}; systemctl reset-failed {0} 2>/dev/null; ".format(UNITS)


def start_server(fleet, host, unit, env):
    """Writes the stand-in's environment, empties the event log and (re)starts `unit` like the seeds did."""
    env_text = "".join("%s=%s\n" % item for item in sorted(env.items()))
    script = STOP_UNITS + "cat > /etc/sglang-bench/env; : > %s; chown sglang: %s; systemctl restart %s" % (
        EVENT_LOG, EVENT_LOG, unit)
    fleet.ssh(host, script, input_text=env_text)


def stop_server(fleet, host):
    fleet.ssh(host, STOP_UNITS + "true", check=False)


def remove_units(fleet, host):
    """The benchmark's two units gone from a host (units.yml's files and drop-ins), for a section that deploys the
    fleet's own sglang-k26 there: the server role's preflight refuses an instance whose GPUs another unit claims."""
    files = " ".join("/etc/systemd/system/{0} /etc/systemd/system/{0}.d".format(unit) for unit in UNITS.split())
    fleet.ssh(host, STOP_UNITS + "systemctl disable %s 2>/dev/null; rm -rf %s; systemctl daemon-reload" % (UNITS, files))


def read_events(fleet, host):
    text = fleet.ssh(host, "cat %s" % EVENT_LOG, check=False).stdout
    events = []
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    return events
