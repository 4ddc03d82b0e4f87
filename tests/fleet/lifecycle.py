# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bringing a fleet up, tearing it down (everything it made, also after a crash) and its status."""

from __future__ import absolute_import, division, print_function

import contextlib
import functools
import os
import re
import signal
import time
from pathlib import Path

from .common import (FleetError, NET_LOCK, STATE_ENTRIES, SUBNET_PREFIX, ensure_inotify_instances, ensure_tools, file_lock, log,
                     parallel, run)
from .hosts import check_addresses_free, make_key, prepare_host, remove_fleet_route, start_host, wait_ready
from .image import ensure_base_image
from .inventory import remove_inventory, write_inventory
from .mirror import build_mirror
from .mirror_server import mirror_server_pids, start_mirror_server
from .model import host_answers, veth_name
from .procs import (
    cgroup_pss_kib,
    cgroup_roots,
    host_cgroups,
    kill_host_processes,
    process_alive,
    process_table,
    remove_cgroup,
    remove_tree,
    unmount_all,
    wait_gone,
)

__metaclass__ = type  # pylint: disable=invalid-name


def fleet_healthy(fleet, state, hosts):
    pids = [h.get("pid") for h in state.get("hosts", [])]
    if len(pids) != len(hosts) or not all(pid and process_alive(pid) for pid in pids):
        return False
    if not mirror_server_pids(fleet):
        return False
    return all(parallel(functools.partial(host_answers, fleet), hosts))


def allocate_first_index(count):
    """The highest block of free 10.231.X subnets (call with NET_LOCK held): fixed indexes tend to be low and round."""
    used = {int(x) for x in re.findall(r"\binet %s\.(\d+)\.\d+/" % re.escape(SUBNET_PREFIX),
                                       run(["ip", "-o", "-4", "addr", "show"], capture=True).stdout)}
    for first in range(255 - count, 0, -1):
        if not used.intersection(range(first, first + count)):
            return first
    raise FleetError("no block of %d free 10.231.X subnets left" % count)


def bring_up(fleet, args):
    timings = {}
    started = time.monotonic()
    ensure_tools()
    ensure_inotify_instances()
    fleet.cache_dir.mkdir(parents=True, exist_ok=True)
    base = ensure_base_image(fleet.cache_dir)
    timings["image"] = time.monotonic() - started
    state = {"status": "starting", "count": args.count, "prefix": fleet.prefix, "first_index": fleet.first_index,
             "inventory": str(fleet.inventory), "base_image": str(base), "started": time.time(), "hosts": [],
             "mirror_pid": None}
    # Recorded before anything is made, so `down` finds a half-made fleet.
    fleet.save_state(state)
    try:
        mark = time.monotonic()
        make_key(fleet)
        build_mirror(fleet, base, standin=not args.skip_standin)
        timings["mirror"] = time.monotonic() - mark
        mark = time.monotonic()
        deadline = mark + args.timeout
        # Addresses are claimed under a machine-wide lock: fleets of other state dirs may be coming up right now.
        with file_lock(NET_LOCK):
            if fleet.first_index is None:
                fleet.first_index = allocate_first_index(args.count)
            hosts = fleet.hosts(args.count)
            check_addresses_free(hosts)
            state.update(first_index=fleet.first_index, hosts=[dict(h.describe(), pid=None) for h in hosts])
            fleet.save_state(state)
            parallel(lambda h: prepare_host(fleet, h, base), hosts)
        state["mirror_pid"] = start_mirror_server(fleet, hosts, deadline)
        fleet.save_state(state)
        procs = {}
        for host, record in zip(hosts, state["hosts"]):
            procs[host.name] = start_host(host)
            record["pid"] = procs[host.name].pid
        fleet.save_state(state)
        parallel(lambda h: wait_ready(fleet, h, procs[h.name], deadline), hosts)
        timings["boot"] = time.monotonic() - mark
        write_inventory(fleet, hosts)
        state["status"] = "up"
        fleet.save_state(state)
    except BaseException:
        if args.keep_on_failure:
            log("--keep-on-failure: leaving the half-made fleet for inspection; `fleet.py down` removes it")
        else:
            log("up failed: removing what it made (rerun with --keep-on-failure to inspect hosts and console logs)")
            teardown(fleet, fleet.load_state(), args.timeout, quiet=True)
        raise
    timings["total"] = time.monotonic() - started
    log("up: %d hosts in %.1f s (base image %.1f s, mirror %.1f s, boot to ssh %.1f s)"
        % (len(hosts), timings["total"], timings["image"], timings["mirror"], timings["boot"]))
    print_summary(fleet, hosts)


def print_summary(fleet, hosts):
    for host in hosts:
        print("%s\t%s\t%s" % (host.name, host.address, host.mirror_url))
    print("inventory: %s" % fleet.inventory)


def host_names_to_clean(fleet, state):
    """Hosts of the recorded fleet plus what exists under its prefix (a crashed run leaves no record).

    The prefix is the recorded one; the command line's only counts when there is no record. Names whose nspawn runs
    from another state dir belong to another fleet and are left alone.
    """
    prefix = state.get("prefix", fleet.prefix) if state else fleet.prefix
    names = set()
    if state:
        names.update(h["name"] for h in state.get("hosts", []))
        # Before addresses are claimed the state lists no hosts yet; their names do not depend on the addresses.
        names.update("%s-%02d" % (prefix, n) for n in range(1, (state.get("count") or 0) + 1))
    pattern = re.compile(r"^%s-\d{2,3}$" % re.escape(prefix))
    listing = run(["ip", "netns", "list"], capture=True, check=False).stdout or ""
    names.update(line.split()[0] for line in listing.splitlines() if line.split() and pattern.match(line.split()[0]))
    hosts_dir = fleet.state_dir / "hosts"
    if hosts_dir.is_dir():
        names.update(p.name for p in hosts_dir.iterdir())
    for root in cgroup_roots():
        if (root / "nspawn").is_dir():
            names.update(p.name for p in (root / "nspawn").iterdir() if p.is_dir() and pattern.match(p.name))
    foreign = {machine for _pid, machine, directory in nspawn_processes() if not directory.startswith(str(hosts_dir) + "/")}
    return sorted(names - foreign)


def nspawn_processes():
    """(pid, machine name, root dir) of every running systemd-nspawn."""
    found = []
    for pid, argv in process_table():
        if argv and os.path.basename(argv[0]) == "systemd-nspawn":
            machine = argv[argv.index("-M") + 1] if "-M" in argv[:-1] else ""
            directory = argv[argv.index("-D") + 1] if "-D" in argv[:-1] else ""
            found.append((pid, machine, directory))
    return found


def fleets_on_this_machine():
    """{state dir: prefix} of every fleet that runs or left mounts here, whatever made it (a test's private fleet,
    a bench's, an earlier session's helper): found from the running systemd-nspawn processes (-D STATE/hosts/NAME/merged,
    -M NAME), the mirror servers (--root STATE/mirror) and the overlay mounts at STATE/hosts/NAME/merged. The prefix
    is the recorded one, else the one of its hosts' names, so that a fleet without a state file is cleaned by its own
    names only."""
    found = {}

    def add(merged, machine=""):
        path = Path(merged)
        if path.name == "merged" and path.parent.parent.name == "hosts":
            name = machine or path.parent.name
            prefix = name.rsplit("-", 1)[0] if re.match(r"^[a-z][a-z0-9]{0,8}-\d{2,3}$", name) else None
            found.setdefault(str(path.parents[2]), prefix)

    for _pid, machine, directory in nspawn_processes():
        add(directory, machine)
    for _pid, argv in process_table():
        if "serve-mirror" in argv and "--root" in argv[:-1] and any(a.endswith("fleet.py") for a in argv):
            root = Path(argv[argv.index("--root") + 1])
            if root.name == "mirror":
                found.setdefault(str(root.parent), None)
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            fields = line.split()
            if len(fields) > 2 and fields[2] == "overlay":
                add(fields[1].replace("\\040", " "))
    return found


def nspawn_pids(fleet):
    """The nspawn processes of this fleet: every host runs from STATE/hosts/NAME/merged."""
    hosts_dir = str(fleet.state_dir / "hosts") + "/"
    return [pid for pid, _machine, directory in nspawn_processes() if directory.startswith(hosts_dir)]


def stop_processes(pids, what, timeout):
    """SIGTERM (nspawn then powers its host off cleanly), wait up to timeout, then SIGKILL."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    left = wait_gone(pids, time.monotonic() + timeout)
    if left:
        log("%s did not stop within %.0f s, killing: %s" % (what, timeout, " ".join(map(str, left))))
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        left = wait_gone(left, time.monotonic() + 10)
    if left:
        raise FleetError("%s survived SIGKILL: %s" % (what, " ".join(map(str, left))))


def teardown(fleet, state, timeout, quiet=False):
    """Stop and remove everything of this fleet; go on past errors and report them all at the end."""
    errors = []
    names = host_names_to_clean(fleet, state)
    if names and not quiet:
        log("stopping %s" % " ".join(names))

    def attempt(step, *step_args):
        try:
            step(*step_args)
        except (FleetError, OSError) as exc:
            errors.append(str(exc))

    attempt(lambda: stop_processes(nspawn_pids(fleet), "systemd-nspawn", timeout))
    attempt(lambda: stop_processes(mirror_server_pids(fleet), "mirror server", 5))
    for name in names:
        attempt(kill_host_processes, name)
    attempt(unmount_all, fleet.state_dir / "hosts")
    for name in names:
        if run(["ip", "netns", "del", name], check=False, capture=True).returncode != 0 \
                and Path("/run/netns", name).exists():
            errors.append("could not delete network namespace %s" % name)
        attempt(remove_veth, veth_name(name))
        for cgroup in host_cgroups(name):
            attempt(remove_cgroup, cgroup)
    for root in cgroup_roots():
        with contextlib.suppress(OSError):
            (root / "nspawn").rmdir()
    attempt(remove_fleet_route)
    remove_inventory(Path(state["inventory"]) if state and state.get("inventory") else fleet.inventory)
    attempt(remove_state_dir, fleet)
    if errors:
        raise FleetError("down left things behind:\n" + "\n".join(errors))


def remove_veth(name):
    """The veth normally goes with the namespace that held its peer, but the kernel frees namespaces asynchronously."""
    deadline = time.monotonic() + 5
    while run(["ip", "link", "show", "dev", name], check=False, capture=True).returncode == 0:
        if run(["ip", "link", "del", name], check=False, capture=True).returncode != 0 and time.monotonic() > deadline:
            raise FleetError("could not delete veth %s" % name)
        time.sleep(0.05)


def remove_state_dir(fleet):
    """Remove what the fleet put in its state dir, then the dir if nothing else is left (it may be a user's dir)."""
    for entry in STATE_ENTRIES:
        for path in fleet.state_dir.glob(entry):
            remove_tree(path)
    with contextlib.suppress(OSError):
        fleet.state_dir.rmdir()


def collect_status(fleet):
    state = fleet.load_state()
    if not state:
        return None
    fleet.adopt_state(state)
    # A fleet that failed before claiming its addresses has no hosts yet.
    hosts = fleet.hosts(state.get("count", 0)) if fleet.first_index is not None else []
    answers = parallel(functools.partial(host_answers, fleet), hosts) if hosts else []
    mirror = mirror_server_pids(fleet)
    report = {"state_dir": str(fleet.state_dir), "status": state.get("status"), "count": state.get("count"),
              "prefix": fleet.prefix, "first_index": fleet.first_index, "inventory": str(fleet.inventory),
              "key": str(fleet.key), "base_image": state.get("base_image"),
              "mirror": {"root": str(fleet.mirror_root), "running": bool(mirror), "pids": mirror}, "hosts": []}
    for host, record, answer in zip(hosts, state.get("hosts", []), answers):
        pid = record.get("pid")
        running = bool(pid) and process_alive(pid)
        report["hosts"].append(dict(host.describe(), pid=pid, running=running, answers=answer,
                                    pss_kib=cgroup_pss_kib(host.name) if running else 0))
    return report
