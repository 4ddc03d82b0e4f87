# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The local fleet is what the other integration tests take it for: real systemd hosts, reachable by Ansible,
installing only from the outer machine's mirror, and gone without a trace after `down`."""

from __future__ import absolute_import, division, print_function

import os
import re
from pathlib import Path

from fleet import lifecycle  # tests/ is on sys.path (conftest)

__metaclass__ = type  # pylint: disable=invalid-name

PYTHON_H = "/usr/include/python3.11/Python.h"


def test_hosts_run_systemd_as_pid1(fleet):
    for host in fleet.hosts:
        assert fleet.run(host, "cat /proc/1/comm", check=True).stdout.strip() == "systemd", host
        # --wait: a host that just booted may still be "starting".
        state = fleet.run(host, "systemctl is-system-running --wait", timeout=120).stdout.strip()
        assert state in ("running", "degraded"), "%s: %s" % (host.name, state)


def test_hosts_are_distinct_machines(fleet):
    machine_ids = {}
    for host in fleet.hosts:
        machine_ids[host.name] = fleet.run(host, "cat /etc/machine-id", check=True).stdout.strip()
        assert re.fullmatch(r"[0-9a-f]{32}", machine_ids[host.name]), machine_ids
        assert fleet.run(host, "hostname", check=True).stdout.strip() == host.name
    assert len(set(machine_ids.values())) == len(fleet.hosts), machine_ids


def test_hosts_have_sudo_and_rsync(fleet):
    """The base image has sudo (tests become an unprivileged user) and rsync (copies between hosts)."""
    for host in fleet.hosts:
        result = fleet.run(host, "command -v sudo rsync", check=True)
        assert result.stdout.split() == ["/usr/bin/sudo", "/usr/bin/rsync"], (host.name, result.stdout)


def test_ansible_reaches_every_host(fleet):
    result = fleet.ansible("local_fleet", "ansible.builtin.ping")
    assert result.rc == 0, result
    for host in fleet.hosts:
        assert re.search(r"^%s \| SUCCESS" % re.escape(host.name), result.stdout, re.M), result


def test_playbook_runner_passes_extra_vars_and_check_mode(fleet, tmp_path):
    playbook = tmp_path / "probe.yml"
    playbook.write_text(
        "- name: Probe\n"
        "  hosts: local_fleet\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - name: Extra vars and host vars arrive\n"
        "      ansible.builtin.assert:\n"
        "        that:\n"
        "          - probe_marker == 'from-test'\n"
        "          - fleet_mirror_url is match('http://10[.]231[.][0-9]+[.]1:8080$')\n"
        "    - name: Check mode arrives\n"
        "      ansible.builtin.assert:\n"
        "        that: ansible_check_mode\n", encoding="utf-8")
    result = fleet.playbook(playbook, extra_vars={"probe_marker": "from-test"}, check=True)
    assert result.rc == 0, result
    assert re.search(r"ok=2 .*failed=0", result.stdout), result
    failed = fleet.playbook(playbook, extra_vars={"probe_marker": "other"}, check=True)
    assert failed.rc != 0, failed


def test_standin_venv_installs_from_the_mirror(fleet, standin_venv):
    host = fleet.hosts[0]
    versions = '%s/bin/python -c "import importlib.metadata as m; print(m.version(\'sglang\'), m.version(\'compressed-tensors\'))"'
    venv = standin_venv(host, compressed_tensors="0.8.1")
    assert fleet.run(host, versions % venv, check=True).stdout.split() == ["0.5.23+standin", "0.8.1"]
    standin_venv(host, compressed_tensors="0.18.0")
    assert fleet.run(host, versions % venv, check=True).stdout.split() == ["0.5.23+standin", "0.18.0"]
    fleet.run(host, "%s/bin/python -c 'import sglang.launch_server, sglang_standin'" % venv, check=True)


def test_python3_dev_comes_only_from_the_mirror(private_fleet):
    """The base image lacks python3-dev (installing it is the role's job), and the mirror is the only source."""
    own = private_fleet(count=1)
    host = own.hosts[0]
    assert own.run(host, "test -e %s" % PYTHON_H).returncode == 1
    status = own.run(host, "dpkg-query -W -f='${db:Status-Status}' python3-dev").stdout
    assert status != "installed", status
    sources = own.run(host, "cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null").stdout
    assert sources.strip() == "deb [trusted=yes] %s/apt ./" % host.mirror_url
    install = own.run(host, "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-dev")
    assert install.returncode == 0, install.stdout + install.stderr
    own.run(host, "test -f %s" % PYTHON_H, check=True)
    assert own.run(host, "dpkg-query -W -f='${db:Status-Status}' python3-dev").stdout == "installed"


def fleet_traces(state_dir, prefix):
    """Everything a fleet makes on the outer machine, as found on the machine itself."""
    traces = []
    netns = Path("/run/netns")
    traces += ["netns " + p.name for p in (netns.iterdir() if netns.is_dir() else []) if p.name.startswith(prefix + "-")]
    traces += ["link " + p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith("vf-" + prefix + "-")]
    traces += ["cgroup " + str(p) for p in Path("/sys/fs/cgroup").glob("*/nspawn/%s-*" % prefix)]
    traces += ["cgroup " + str(p) for p in Path("/sys/fs/cgroup").glob("nspawn/%s-*" % prefix)]
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        traces += ["mount " + line.split()[4] for line in mountinfo if str(state_dir) in line.split()[4]]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as cmdline:
                argv = cmdline.read().decode(errors="replace")
        except OSError:
            continue
        if str(state_dir) in argv:
            traces.append("process %s: %s" % (pid, argv.replace("\0", " ")))
    if Path(state_dir).exists():
        traces.append("state dir " + str(state_dir))
    return traces


def test_down_leaves_nothing_behind(private_fleet):
    own = private_fleet(count=2)
    prefix = own.hosts[0].name.rsplit("-", 1)[0]
    inventory = Path(own.inventory)
    while_up = fleet_traces(own.state_dir, prefix)
    # The check below must be able to see a fleet at all: every kind of trace exists while it is up.
    for kind in ("netns", "link", "cgroup", "mount", "process", "state dir"):
        assert any(t.startswith(kind + " ") for t in while_up), (kind, while_up)
    assert inventory.is_file()
    # `down --all` (.ci/run's cleanup) finds it among the machine's fleets by its running hosts, with its prefix, also
    # without its state file: a run killed before writing one leaves a fleet that only its hosts name (read-only here:
    # down --all itself would also stop the fleets of the integration groups running beside this one).
    state_dir = str(Path(own.state_dir).resolve())
    assert lifecycle.fleets_on_this_machine().get(state_dir) == prefix, lifecycle.fleets_on_this_machine()
    state_file = Path(own.state_dir) / "state.json"
    kept = state_file.read_bytes()
    state_file.unlink()
    try:
        assert lifecycle.fleets_on_this_machine().get(state_dir) == prefix, lifecycle.fleets_on_this_machine()
    finally:
        state_file.write_bytes(kept)
    own.tool.down()
    assert fleet_traces(own.state_dir, prefix) == []
    assert not inventory.exists()
    assert state_dir not in lifecycle.fleets_on_this_machine()
