# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Local test fleet: Debian 12 hosts with systemd as PID 1 and sshd, booted with systemd-nspawn.

Run as root on the controller (Python stdlib only, it runs before any venv exists), as `python3 tests/fleet/fleet.py ...`:

    fleet.py up --count 3      boot gpu-01..gpu-03, serve the package mirror, write inventories/local/hosts.yml
    fleet.py status [--json]   list the hosts and whether they answer over ssh
    fleet.py down              stop every host and remove every netns, veth, mount, cgroup and file the fleet made
    fleet.py down --all        the same for every fleet on this machine (a private one a killed run left behind)
    fleet.py mirror [--refresh-standin]   (re)build the package mirror, or only the SGLang stand-in wheel
    fleet.py image             build the cached base image only

Host N (1-based) is PREFIX-NN at 10.231.(FIRST_INDEX+N-1).2; the outer side of its veth is .1 and serves the
mirror at http://10.231.X.1:8080/ (apt/ is a flat apt repo, wheels/ a pip find-links directory).
See tests/fleet/README.md for the design and its traps.
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import re
import signal
import time

from .common import (
    DEFAULT_CACHE_DIR,
    DEFAULT_STATE_DIR,
    EXIT_FAILED,
    EXIT_NOT_UP,
    EXIT_OK,
    FleetError,
    MIRROR_PORT,
    STOPPING,
    ensure_tools,
    file_lock,
    log,
    require_root,
)
from .hosts import start_host, wait_ready
from .image import ensure_base_image
from .lifecycle import (
    bring_up,
    collect_status,
    fleet_healthy,
    fleets_on_this_machine,
    nspawn_processes,
    print_summary,
    stop_processes,
    teardown,
)
from .mirror import build_mirror, refresh_standin
from .mirror_server import serve_mirror
from .model import Fleet
from .procs import kill_host_processes

__metaclass__ = type  # pylint: disable=invalid-name


def cmd_up(fleet, args):
    require_root()
    if args.count < 1 or (fleet.first_index or 1) + args.count - 1 > 254:
        raise FleetError("--count %d does not fit: host addresses run from 10.231.%d.2 and must stay below 10.231.255"
                         % (args.count, fleet.first_index or 1))
    with file_lock(fleet.lock_path):
        state = fleet.load_state()
        if state and state.get("status") == "up" and state.get("count") == args.count and state.get("prefix") == fleet.prefix \
                and fleet.first_index in (None, state.get("first_index")):
            fleet.first_index = state["first_index"]
            hosts = fleet.hosts(args.count)
            if fleet_healthy(fleet, state, hosts):
                log("fleet of %d hosts is already up: nothing to do" % args.count)
                print_summary(fleet, hosts)
                return EXIT_OK
            log("the recorded fleet does not answer in full: rebuilding it")
        elif state:
            log("replacing the existing fleet (%s hosts, status %s) with %d hosts"
                % (state.get("count"), state.get("status"), args.count))
        # Also clears what a crashed run left without a state file.
        teardown(fleet, state, args.timeout, quiet=not state)
        bring_up(fleet, args)
    return EXIT_OK


def cmd_down(fleet, args):
    require_root()
    started = time.monotonic()
    if args.all:
        return down_all(fleet, args, started)
    with file_lock(fleet.lock_path):
        state = fleet.load_state()
        teardown(fleet, state, args.timeout)
    log("down in %.1f s" % (time.monotonic() - started))
    return EXIT_OK


def down_all(template, args, started):
    """down --all: every fleet on this machine, each as its own `down --state-dir` would remove it.

    For CI and the end of a session: a fleet left running (a helper's private fleet, a killed bench) keeps its hosts'
    systemd, sshd and servers busy, and a test run on 2 cores beside it takes twice as long.
    """
    fleets = fleets_on_this_machine()
    if not fleets:
        log("down --all: no fleet runs on this machine")
        return EXIT_OK
    failed = []
    for state_dir, prefix in sorted(fleets.items()):
        fleet = Fleet(state_dir, prefix or template.prefix, None, template.cache_dir, None)
        with file_lock(fleet.lock_path):
            state = fleet.load_state()
            if not state and not prefix:
                log("down --all: %s has no state file and no host names: left alone" % state_dir)
                continue
            found = "status %s" % state.get("status") if state else "no state file"
            log("down --all: %s (prefix %s, %s)" % (state_dir, (state or {}).get("prefix", prefix), found))
            try:
                teardown(fleet, state, args.timeout)
            except FleetError as exc:
                failed.append("%s: %s" % (state_dir, exc))
    log("down --all: %d fleets in %.1f s" % (len(fleets), time.monotonic() - started))
    if failed:
        raise FleetError("\n".join(failed))
    return EXIT_OK


def cmd_status(fleet, args):
    report = collect_status(fleet)
    if report is None:
        if args.json:
            print(json.dumps({"state_dir": str(fleet.state_dir), "status": "down", "hosts": []}))
        else:
            print("no fleet in %s" % fleet.state_dir)
        return EXIT_NOT_UP
    healthy = report["status"] == "up" and report["mirror"]["running"] and all(h["answers"] for h in report["hosts"])
    if args.json:
        print(json.dumps(dict(report, healthy=healthy), indent=2))
    else:
        print("fleet %s: %s, %d hosts, mirror %s, inventory %s" % (
            report["state_dir"], report["status"], report["count"] or 0,
            "running" if report["mirror"]["running"] else "NOT running", report["inventory"]))
        for host in report["hosts"]:
            print("%-10s %-14s %-9s %-16s %6.1f MiB PSS" % (
                host["name"], host["address"], "running" if host["running"] else "stopped",
                "answers" if host["answers"] else "DOES NOT ANSWER", host["pss_kib"] / 1024.0))
    return EXIT_OK if healthy else EXIT_FAILED


def cmd_reboot(fleet, args):
    """Power a host off and boot it again, as a reboot of a real machine would (its disk - the overlay - stays).

    `systemctl reboot` inside a host ends its systemd-nspawn for good (nothing boots it again), so tests that need a
    host to reboot ask the fleet tool: SIGTERM to that host's nspawn (a clean poweroff; SIGKILL after --timeout,
    like a power cut), then the same nspawn command as `up`, and the wait for ssh.
    """
    require_root()
    with file_lock(fleet.lock_path):
        state = fleet.load_state()
        if not state or state.get("status") != "up":
            raise FleetError("no fleet is up in %s" % fleet.state_dir)
        fleet.adopt_state(state)
        names = [record["name"] for record in state["hosts"]]
        if args.name not in names:
            raise FleetError("no host %s in this fleet (%s)" % (args.name, " ".join(names)))
        host = fleet.hosts(len(names))[names.index(args.name)]
        merged = str(host.merged)
        pids = [pid for pid, _machine, directory in nspawn_processes() if directory == merged]
        stop_processes(pids, "systemd-nspawn of %s" % host.name, args.timeout)
        kill_host_processes(host.name)
        proc = start_host(host)
        state["hosts"][names.index(args.name)]["pid"] = proc.pid
        fleet.save_state(state)
        wait_ready(fleet, host, proc, time.monotonic() + 120)
    log("%s rebooted" % host.name)
    return 0


def cmd_mirror(fleet, args):
    require_root()
    with file_lock(fleet.lock_path):
        state = fleet.load_state()
        fleet.adopt_state(state)
        if args.refresh_standin:
            return EXIT_OK if refresh_standin(fleet) else EXIT_FAILED
        ensure_tools()
        fleet.cache_dir.mkdir(parents=True, exist_ok=True)
        build_mirror(fleet, ensure_base_image(fleet.cache_dir))
    print(fleet.mirror_root)
    return EXIT_OK


def cmd_image(fleet, _args):
    require_root()
    ensure_tools()
    fleet.cache_dir.mkdir(parents=True, exist_ok=True)
    print(ensure_base_image(fleet.cache_dir))
    return EXIT_OK


def cmd_serve_mirror(_fleet, args):
    serve_mirror(args.root, args.address, args.port)
    return EXIT_OK


def prefix_arg(value):
    if not re.match(r"^[a-z][a-z0-9]{0,8}$", value):
        raise argparse.ArgumentTypeError("must be 1-9 lowercase letters/digits, starting with a letter")
    return value


def index_arg(value):
    if value == "auto":
        return None
    number = int(value)
    if not 1 <= number <= 254:
        raise argparse.ArgumentTypeError("must be 1..254")
    return number


def build_parser():
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--state-dir", default=str(DEFAULT_STATE_DIR),
                        help="where the fleet keeps its hosts, key, mirror tree and state (default %(default)s)")
    common.add_argument("--prefix", type=prefix_arg, default="gpu",
                        help="host and network namespace name prefix (default %(default)s)")
    common.add_argument("--first-index", type=index_arg, default=1,
                        help="host N gets 10.231.(FIRST_INDEX+N-1).2 (default %(default)s); `auto` takes the highest free "
                             "block (for private fleets; down and status read it from the state)")
    common.add_argument("--cache-dir", default=str(DEFAULT_CACHE_DIR),
                        help="base image and mirror cache (default %(default)s)")
    common.add_argument("--inventory", default=None,
                        help="inventory to write (default inventories/local/hosts.yml for the default state dir, "
                             "else STATE_DIR/hosts.yml)")
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    # serve-mirror is internal (the process `up` starts), so the listing leaves it out.
    sub = parser.add_subparsers(dest="command", required=True, metavar="{up,down,status,mirror,reboot,image}")
    up = sub.add_parser("up", parents=[common], help="boot the fleet (a no-op when it is already up with this count)")
    up.add_argument("--count", type=int, default=3, help="number of hosts (default %(default)s)")
    up.add_argument("--timeout", type=float, default=120.0, help="seconds for all hosts to answer over ssh")
    up.add_argument("--skip-standin", action="store_true",
                    help="do not build the SGLang stand-in wheel (a fleet for tests that do not install it)")
    up.add_argument("--keep-on-failure", action="store_true", help="leave a failed fleet in place for inspection")
    up.set_defaults(func=cmd_up)
    down = sub.add_parser("down", parents=[common], help="stop the fleet and remove everything it made")
    down.add_argument("--timeout", type=float, default=20.0, help="seconds for a clean poweroff before SIGKILL")
    down.add_argument("--all", action="store_true",
                      help="every fleet on this machine, whatever its state dir (found from its running hosts, mirror "
                           "servers and mounts); --state-dir and --prefix are then not used")
    down.set_defaults(func=cmd_down)
    status = sub.add_parser("status", parents=[common], help="list the hosts and whether they answer")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)
    mirror = sub.add_parser("mirror", parents=[common], help="build the package mirror into the state dir")
    mirror.add_argument("--refresh-standin", action="store_true", help="only rebuild the SGLang stand-in wheel")
    mirror.set_defaults(func=cmd_mirror)
    reboot = sub.add_parser("reboot", parents=[common], help="power one host off and boot it again")
    reboot.add_argument("name", help="the host, e.g. gpu-02")
    reboot.add_argument("--timeout", type=float, default=20.0, help="seconds for a clean poweroff before SIGKILL")
    reboot.set_defaults(func=cmd_reboot)
    image = sub.add_parser("image", parents=[common], help="build the cached base image")
    image.set_defaults(func=cmd_image)
    serve = sub.add_parser("serve-mirror")  # internal: the mirror server process started by `up`
    serve.add_argument("--root", required=True)
    serve.add_argument("--address", action="append", required=True)
    serve.add_argument("--port", type=int, default=MIRROR_PORT)
    serve.set_defaults(func=cmd_serve_mirror)
    return parser


def _interrupt(_signum, _frame):
    STOPPING.set()
    raise KeyboardInterrupt


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.command != "serve-mirror":
        # A cancelled CI job sends SIGTERM: unwind like Ctrl-C, so a half-made fleet is removed on the way out.
        signal.signal(signal.SIGTERM, _interrupt)
        signal.signal(signal.SIGINT, _interrupt)
    try:
        fleet = Fleet(getattr(args, "state_dir", DEFAULT_STATE_DIR), getattr(args, "prefix", "gpu"),
                      getattr(args, "first_index", 1), getattr(args, "cache_dir", DEFAULT_CACHE_DIR),
                      getattr(args, "inventory", None))
        return args.func(fleet, args)
    except FleetError as exc:
        log("ERROR: %s" % exc)
        return EXIT_FAILED
    except KeyboardInterrupt:
        log("interrupted")
        return 130
