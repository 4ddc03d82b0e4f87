# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hosts: key, root overlay, network, boot under systemd-nspawn and the wait for ssh."""

from __future__ import absolute_import, division, print_function

import contextlib
import os
import re
import shlex
import subprocess
import time
from pathlib import Path

from .client import LOGIN_USER
from .common import FleetError, STOPPING, SUBNET_PREFIX, run, tail
from .model import ssh_command
from .procs import host_cgroups

__metaclass__ = type  # pylint: disable=invalid-name


def make_key(fleet):
    for path in (fleet.key, fleet.key.with_suffix(".pub")):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "llmops-sglang-fleet", "-f", str(fleet.key)], capture=True)
    os.chmod(fleet.key, 0o600)


def prepare_host(fleet, host, base):
    """Everything a host needs before boot: root overlay, files in its upper layer, network, cgroups."""
    for path in (host.upper, host.work, host.merged):
        path.mkdir(parents=True, exist_ok=True)
    run(["mount", "-t", "overlay", "overlay", "-o",
         "lowerdir=%s,upperdir=%s,workdir=%s" % (base, host.upper, host.work), str(host.merged)], capture=True)
    # Written through the merged view, so overlayfs copies parent dirs up with their owners and modes.
    root = host.merged
    ssh_dir = root / "root" / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    authorized = ssh_dir / "authorized_keys"
    authorized.write_text(fleet.key.with_suffix(".pub").read_text(encoding="utf-8"), encoding="utf-8")
    os.chmod(authorized, 0o600)
    add_login_user(fleet, root)
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "root@" + host.name,
         "-f", str(root / "etc" / "ssh" / "ssh_host_ed25519_key")], capture=True)
    # The only package source is the outer machine, like an air-gapped GPU fleet with an internal mirror.
    (root / "etc" / "apt" / "sources.list").write_text(
        "deb [trusted=yes] %s/apt ./\n" % host.mirror_url, encoding="utf-8")
    for extra in (root / "etc" / "apt" / "sources.list.d").glob("*"):
        extra.unlink()
    with open(root / "etc" / "hosts", "a", encoding="utf-8") as hosts_file:
        hosts_file.write("127.0.1.1\t%s\n" % host.name)
    setup_network(host)
    for cgroup in host_cgroups(host.name):
        cgroup.mkdir(parents=True, exist_ok=True)


def add_login_user(fleet, root):
    """LOGIN_USER: an unprivileged login with the fleet's key and passwordless sudo (the base image has sudo)."""
    run(["useradd", "--root", str(root), "--create-home", "--shell", "/bin/bash", "--user-group", LOGIN_USER],
        capture=True)
    entry = [line.split(":") for line in (root / "etc" / "passwd").read_text(encoding="utf-8").splitlines()
             if line.startswith(LOGIN_USER + ":")][0]
    uid, gid, home = int(entry[2]), int(entry[3]), root / entry[5].lstrip("/")
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(mode=0o700, exist_ok=True)
    authorized = ssh_dir / "authorized_keys"
    authorized.write_text(fleet.key.with_suffix(".pub").read_text(encoding="utf-8"), encoding="utf-8")
    os.chmod(authorized, 0o600)
    for path in (ssh_dir, authorized):
        os.chown(path, uid, gid)
    sudoers = root / "etc" / "sudoers.d" / LOGIN_USER
    sudoers.write_text("%s ALL=(ALL:ALL) NOPASSWD: ALL\n" % LOGIN_USER, encoding="utf-8")
    os.chmod(sudoers, 0o440)


# Hosts reach each other through the outer machine (multi-node servers rendezvous across hosts) and nothing else:
# their only route is the fleet range, the outer machine forwards only what arrives on fleet veths, and a fleet
# address that no host holds is unreachable rather than sent out of the machine.
FLEET_RANGE = SUBNET_PREFIX + ".0.0/16"


def setup_network(host):
    run(["ip", "netns", "add", host.name], capture=True)
    run(["ip", "link", "add", host.outer_veth, "type", "veth", "peer", "name", "host0", "netns", host.name], capture=True)
    run(["ip", "addr", "add", host.outer_address + "/30", "dev", host.outer_veth], capture=True)
    run(["ip", "link", "set", host.outer_veth, "up"], capture=True)
    run(["ip", "route", "replace", "unreachable", FLEET_RANGE], capture=True)
    Path("/proc/sys/net/ipv4/conf", host.outer_veth, "forwarding").write_text("1\n")
    inner = ["ip", "-n", host.name]
    run(inner + ["link", "set", "lo", "up"], capture=True)
    run(inner + ["addr", "add", host.address + "/30", "dev", "host0"], capture=True)
    run(inner + ["link", "set", "host0", "up"], capture=True)
    run(inner + ["route", "add", FLEET_RANGE, "via", host.outer_address], capture=True)


def remove_fleet_route():
    """The unreachable route for the fleet range, once no fleet (this or another state dir's) has a host left."""
    links = run(["ip", "-o", "addr", "show"], check=False, capture=True).stdout
    if (" inet %s." % SUBNET_PREFIX) not in links:
        run(["ip", "route", "del", "unreachable", FLEET_RANGE], check=False, capture=True)


def start_host(host):
    """Start systemd-nspawn in the host's own session and cgroups; return its Popen."""
    nspawn = ["systemd-nspawn", "-q", "-D", str(host.merged), "-M", host.name, "-b", "--register=no", "--keep-unit",
              "--network-namespace-path=/run/netns/" + host.name, "--console=read-only",
              # Hosts resolve nothing: without a resolver they fail at once rather than time out on the outer one.
              "--resolv-conf=off"]
    # Move the shell into the host's cgroups first, then exec nspawn: without it two hosts collide.
    script = "".join("echo $$ > %s && " % shlex.quote(str(c / "cgroup.procs")) for c in host_cgroups(host.name))
    script += "exec " + shlex.join(nspawn)
    with open(host.console_log, "ab") as console:
        return subprocess.Popen(["sh", "-c", script], stdin=subprocess.DEVNULL, stdout=console,  # pylint: disable=consider-using-with
                                stderr=subprocess.STDOUT, start_new_session=True, cwd="/")


def wait_ready(fleet, host, proc, deadline):
    while True:
        if proc.poll() is not None:
            raise FleetError("%s: systemd-nspawn exited (rc=%s) before sshd answered; console log %s ends with:\n%s"
                             % (host.name, proc.returncode, host.console_log, tail(host.console_log)))
        probe = subprocess.run(ssh_command(fleet, host, "true", timeout=1), stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        if probe.returncode == 0:
            return
        if STOPPING.is_set():
            raise FleetError("%s: interrupted while waiting for ssh" % host.name)
        if time.monotonic() > deadline:
            raise FleetError("%s (%s): no ssh answer within the deadline; console log %s ends with:\n%s"
                             % (host.name, host.address, host.console_log, tail(host.console_log)))
        time.sleep(0.1)


def check_addresses_free(hosts):
    used = run(["ip", "-o", "-4", "addr", "show"], capture=True).stdout
    netns = run(["ip", "netns", "list"], capture=True).stdout.split()
    for host in hosts:
        if re.search(r"\binet %s/" % re.escape(host.outer_address), used):
            raise FleetError("%s is already configured on this machine (another fleet? use --first-index)"
                             % host.outer_address)
        if host.name in netns:
            raise FleetError("network namespace %s already exists (another fleet? use --prefix)" % host.name)
