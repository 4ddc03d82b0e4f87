# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Paths, constants, errors and small helpers every part of the fleet tool uses."""

from __future__ import absolute_import, division, print_function

import concurrent.futures
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

__metaclass__ = type  # pylint: disable=invalid-name


REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_STATE_DIR = Path("/var/lib/llmops-sglang-fleet")
DEFAULT_CACHE_DIR = Path("/var/cache/llmops-sglang")
DEFAULT_INVENTORY = REPO_ROOT / "inventories" / "local" / "hosts.yml"
STANDIN_SOURCE = REPO_ROOT / "tests" / "standin"
SUBNET_PREFIX = "10.231"
MIRROR_PORT = 8080
STATE_FILE = "state.json"
# Everything a fleet writes into its state dir (globs); `down` removes these and no more.
# (A generated hosts.yml there goes with remove_inventory, which checks it is ours.)
STATE_ENTRIES = ("hosts", "mirror", "mirror.log", "id_ed25519", "id_ed25519.pub", "state.json", "state.tmp", "hosts.yml.tmp")
# Machine-wide, whatever the state dir: taken while a fleet claims its addresses and network namespaces.
NET_LOCK = Path("/run/lock/llmops-sglang-fleet.net.lock")
KEY_NAME = "id_ed25519"

# Command -> Debian package that provides it, installed on demand so a fresh CI machine needs no manual step.
REQUIRED_TOOLS = {
    "systemd-nspawn": "systemd-container",
    "debootstrap": "debootstrap",
    "ip": "iproute2",
    "dpkg-scanpackages": "dpkg-dev",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
}

# Set when a stop signal arrives, so boot threads give up waiting instead of holding up the cleanup.
STOPPING = threading.Event()

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_NOT_UP = 3


class FleetError(Exception):
    """A failure the user can act on; the message says what failed."""


def log(message):
    print("fleet: %s" % message, file=sys.stderr, flush=True)


def run(cmd, check=True, capture=False, **kwargs):
    """Run a command; on failure raise FleetError naming the command and its stderr."""
    if capture:
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        kwargs.setdefault("text", True)
    result = subprocess.run(cmd, check=False, **kwargs)  # pylint: disable=subprocess-run-check
    if check and result.returncode != 0:
        detail = (result.stderr or "").strip() if capture else ""
        raise FleetError("command failed (rc=%d): %s%s" % (result.returncode, shlex.join(str(c) for c in cmd),
                                                           ("\n" + detail[-2000:]) if detail else ""))
    return result


def recipe_hash(recipe):
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


@contextlib.contextmanager
def file_lock(path):
    """Serialise fleet operations: two concurrent `up`s must never make two fleets."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_tools():
    missing = sorted({pkg for cmd, pkg in REQUIRED_TOOLS.items() if shutil.which(cmd) is None})
    if not missing:
        return
    log("installing missing tools: %s" % " ".join(missing))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run(["apt-get", "update", "-q"], capture=True, env=env)
    run(["apt-get", "install", "-y", "-q", "--no-install-recommends"] + missing, capture=True, env=env)


# Every booted host's systemd, journald and logind take inotify instances (about 7 a host), all counted against
# root's limit in the machine's user namespace, which every fleet on the machine shares: the kernel default (128)
# runs out at about 18 hosts (CI boots six groups side by side), and a host then fails to boot ("Too many open files").
INOTIFY_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")
INOTIFY_WANTED = 1024


def ensure_inotify_instances():
    try:
        current = int(INOTIFY_INSTANCES.read_text().strip())
    except (OSError, ValueError):
        return
    if current >= INOTIFY_WANTED:
        return
    try:
        INOTIFY_INSTANCES.write_text("%d\n" % INOTIFY_WANTED)
        log("raised fs.inotify.max_user_instances from %d to %d (each fleet host takes about 7)" % (current, INOTIFY_WANTED))
    except OSError as exc:
        log("fs.inotify.max_user_instances is %d and cannot be raised (%s): more than about %d hosts on this machine "
            "will not boot" % (current, exc, current // 7))


def require_root():
    if os.geteuid() != 0:
        raise FleetError("must run as root (it makes network namespaces, mounts and cgroups)")


def tail(path, lines=25):
    """The last lines of a log, without the console's colour codes, carriage returns and blank lines."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return "(no log: %s)" % exc
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    kept = [line.rstrip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
    return "\n".join("  | " + line for line in kept[-lines:])


def parallel(func, items):
    """Run func on every item in threads; raise the first error after all finished."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(items))) as pool:
        futures = [pool.submit(func, item) for item in items]
        results, errors = [], []
        for future in futures:
            try:
                results.append(future.result())
            except (FleetError, OSError, subprocess.SubprocessError) as exc:
                errors.append(exc)
    if errors:
        raise FleetError("\n".join(str(e) for e in errors))
    return results
