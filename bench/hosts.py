# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet and the hosts: a private fleet through the shared fleet client, the benchmark's units."""

from __future__ import absolute_import, division, print_function

import json
import shutil
import threading
import time
from pathlib import Path

from fleet.client import Fleet, FleetTool  # tests/fleet: run.py puts tests/ on sys.path

from .common import EVENT_LOG, MODEL_NAME, PORT, REPO

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


UNIT_TEMPLATE = """[Unit]
Description=SGLang stand-in for the benchmark ({restart})
StartLimitIntervalSec=3600
StartLimitBurst=3

[Service]
Type=simple
User=sglang
Group=sglang
WorkingDirectory=/var/lib/sglang-bench
EnvironmentFile=/etc/sglang-bench/env
ExecStart={venv}/bin/python -m sglang.launch_server --model-path {model} --served-model-name {name} --tp 8 \\
    --trust-remote-code --reasoning-parser kimi_k2 --tool-call-parser kimi_k2 --host 0.0.0.0 --port {port}
KillMode=mixed
TimeoutStopSec=30
Restart={restart}
RestartSec=15
LimitNOFILE=20000
"""

HOST_SETUP = """set -e
# What the waiter and the stand-in need, the way the role would install it (idempotent; after a deploy it finds all).
id sglang >/dev/null 2>&1 || useradd --system --user-group --home-dir /var/lib/sglang --shell /usr/sbin/nologin sglang
# Python.h too: the stand-in checks it like Triton does, and fails at CUDA graph capture without it.
PYH=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h
PYX=python$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')-dev
{{ python3 -c 'import requests, jmespath' 2>/dev/null && [ -f "$PYH" ]; }} || {{ apt-get update -q >/dev/null &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-requests python3-jmespath python3-dev $PYX >/dev/null; }}
V={venv}
[ -x $V/bin/python ] || python3 -m venv $V
have() {{ $V/bin/python -c 'import sys, importlib.metadata as m; print(m.version(sys.argv[1]))' "$1" 2>/dev/null || true; }}
if [ "$(have compressed-tensors)" != 0.18.0 ] || [ -z "$(have sglang)" ]; then
    [ -x $V/bin/pip ] || $V/bin/python -m ensurepip -q
    $V/bin/pip install -q --disable-pip-version-check --no-index --no-deps --find-links {mirror}/wheels/ \\
        --trusted-host {mirror_host} sglang compressed-tensors==0.18.0
fi
[ -f {model}/config.json ] || $V/bin/python -m sglang_standin.make_model {model} --arch kimi_k2 --quant nvfp4-pack-quantized
install -d -o sglang -g sglang /var/lib/sglang-bench
install -d -m 0755 /etc/sglang-bench
touch /etc/sglang-bench/env
cat > /etc/systemd/system/sglang-bench.service <<'UNIT'
{unit_restart}UNIT
cat > /etc/systemd/system/sglang-bench-once.service <<'UNIT'
{unit_once}UNIT
systemctl daemon-reload
"""


def prepare_hosts(fleet):
    """The benchmark's own units (same server, port 30002, both restart policies) on every host."""
    venv = fleet.group_vars.get("sglang_venv", "/opt/sglang/venv")
    model = fleet.group_vars.get("sglang_model_path", "/models/Kimi-K2.6-NVFP4")
    units = {key: UNIT_TEMPLATE.format(venv=venv, model=model, name=MODEL_NAME, port=PORT, restart=policy)
             for key, policy in (("unit_restart", "on-failure"), ("unit_once", "no"))}
    errors = []

    def setup(host):
        script = HOST_SETUP.format(venv=venv, model=model, mirror=host["mirror"],
                                   mirror_host=host["mirror"].split("//", 1)[1].split(":", 1)[0], **units)
        try:
            fleet.ssh(host, script)
        except Exception as error:  # pylint: disable=broad-except
            errors.append(str(error))

    threads = [threading.Thread(target=setup, args=(host,)) for host in fleet.hosts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError("host preparation failed:\n" + "\n".join(errors))


def start_server(fleet, host, unit, env):
    """Writes the stand-in's environment, empties the event log and (re)starts `unit` like the seeds did."""
    env_text = "".join("%s=%s\n" % item for item in sorted(env.items()))
    script = ("systemctl stop sglang-bench.service sglang-bench-once.service; "
              "systemctl reset-failed sglang-bench.service sglang-bench-once.service 2>/dev/null; "
              "cat > /etc/sglang-bench/env; : > %s; chown sglang: %s; systemctl restart %s") % (
                  EVENT_LOG, EVENT_LOG, unit)
    fleet.ssh(host, script, input_text=env_text)


def stop_server(fleet, host):
    fleet.ssh(host, "systemctl stop sglang-bench.service sglang-bench-once.service; "
                    "systemctl reset-failed sglang-bench.service sglang-bench-once.service 2>/dev/null; true",
              check=False)


def read_events(fleet, host):
    text = fleet.ssh(host, "cat %s" % EVENT_LOG, check=False).stdout
    events = []
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            pass
    return events
