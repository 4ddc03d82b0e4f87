# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""3. Fleet cost: wall time of playbooks/deploy_k26.yml re-runs."""

from __future__ import absolute_import, division, print_function

import configparser
import os

from .common import REPO, log, playbook

__metaclass__ = type  # pylint: disable=invalid-name


def ansible_settings():
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(str(REPO / "ansible.cfg"))
    ssh_args = parser.get("ssh_connection", "ssh_args", fallback="")
    persist = [part.split("=", 1)[1] for part in ssh_args.split() if part.startswith("ControlPersist=")]
    return {"forks": parser.get("defaults", "forks", fallback="5 (default)"),
            "pipelining": parser.get("ssh_connection", "pipelining", fallback="False (default)"),
            "control_persist": persist[0] if persist else "60s (ansible default)",
            "gathering": parser.get("defaults", "gathering", fallback="implicit"),
            "serial": "[1, '25%'] (playbooks/deploy_k26.yml default)"}


def run_fleet_cost(fleet, plan):
    deploy = REPO / "playbooks" / "deploy_k26.yml"
    names = [host["name"] for host in fleet.hosts]
    result = {"settings": ansible_settings(), "first_deploy": None, "noop": [], "noop_serial_all": [], "rollout": []}
    largest = max(plan["noop"])
    # Where the seeds started: a venv without pip, compressed-tensors too old, no Python headers.
    wall, rc, _changed, tail = playbook(fleet, REPO / "tests" / "fleet" / "demo_prepare.yml",
                                        limit=",".join(names[:largest]))
    if rc != 0:
        raise RuntimeError("demo_prepare.yml failed:\n" + tail)
    log("fleet: first deploy of deploy_k26.yml on %d hosts (all at once)" % largest)
    wall, rc, changed, tail = playbook(fleet, deploy, limit=",".join(names[:largest]), extra={"k26_serial": ["100%"]})
    result["first_deploy"] = {"hosts": largest, "wall_s": round(wall, 2), "rc": rc, "changed": changed}
    if rc != 0:
        raise RuntimeError("first deploy failed:\n" + tail)
    for size, trials in sorted(plan["noop"].items()):
        for _trial in range(trials):
            wall, rc, changed, tail = playbook(fleet, deploy, limit=",".join(names[:size]))
            log("fleet: no-op re-run, %d host(s): %.1f s, rc=%d, changed=%d" % (size, wall, rc, changed))
            result["noop"].append({"hosts": size, "wall_s": round(wall, 2), "rc": rc, "changed": changed})
    for _run in range(plan.get("noop_serial_all", 0)):
        wall, rc, changed, tail = playbook(fleet, deploy, limit=",".join(names[:largest]), extra={"k26_serial": ["100%"]})
        log("fleet: no-op re-run, %d hosts, serial 100%%: %.1f s" % (largest, wall))
        result["noop_serial_all"].append({"hosts": largest, "wall_s": round(wall, 2), "rc": rc, "changed": changed})
    for trial in range(plan.get("rollout", 0)):
        fleet.set_host_env(names[0], {"BENCH_ROLLOUT_MARK": "%d-%d" % (os.getpid(), trial)})
        wall, rc, changed, tail = playbook(fleet, deploy, limit=",".join(names[:largest]))
        log("fleet: rollout changing %s, %d hosts: %.1f s, rc=%d, changed=%d" % (names[0], largest, wall, rc, changed))
        result["rollout"].append({"hosts": largest, "wall_s": round(wall, 2), "rc": rc, "changed": changed})
    return result
