# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Local test fleet: Debian 12 hosts with systemd as PID 1 and sshd, booted with systemd-nspawn.

Run as root on the controller (Python stdlib only, it runs before any venv exists), as `python3 tests/fleet/fleet.py ...`:

    fleet.py up --count 3      boot gpu-01..gpu-03, serve the package mirror, write inventories/local/hosts.yml
    fleet.py status [--json]   list the hosts and whether they answer over ssh
    fleet.py down              stop every host and remove every netns, veth, mount, cgroup and file the fleet made
    fleet.py mirror [--refresh-standin]   (re)build the package mirror, or only the SGLang stand-in wheel
    fleet.py image             build the cached base image only

Host N (1-based) is PREFIX-NN at 10.231.(FIRST_INDEX+N-1).2; the outer side of its veth is .1 and serves the
mirror at http://10.231.X.1:8080/ (apt/ is a flat apt repo, wheels/ a pip find-links directory).
See tests/fleet/README.md for the design and its traps.
"""

from __future__ import absolute_import, division, print_function

import argparse
import concurrent.futures
import contextlib
import fcntl
import functools
import hashlib
import http.server
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
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

# The recipe is data so that its hash changes whenever it does; bump "revision" when the code that applies it changes.
BASE_RECIPE = {
    "revision": 1,
    "suite": "bookworm",
    "mirror": "http://deb.debian.org/debian",
    "variant": "minbase",
    # python3-dev must NOT be here: installing it is the role's job and tests must see the role do it.
    "include": ["systemd", "systemd-sysv", "dbus", "openssh-server", "python3", "python3-venv", "iproute2"],
    # Masked rather than only disabled: a first boot (empty machine-id) runs presets, which could re-enable them.
    "mask": [
        "apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer", "e2scrub_all.timer", "fstrim.timer",
        "getty@tty1.service", "console-getty.service", "systemd-pstore.service",
    ],
}

# What the roles may install from the distribution on a managed host; apt adds their dependencies and recommends.
# python3-apt: ansible.builtin.apt installs it on first use. acl: become_user to an unprivileged user needs setfacl.
MIRROR_APT_RECIPE = {
    "revision": 2,
    "packages": ["python3-dev", "python3.11-dev", "python3-requests", "python3-jmespath", "python3-pip", "python3-apt", "acl"],
    # The monitoring role installs these with --no-install-recommends; their recommends (node-exporter's collector
    # scripts, smartmontools...) stay out of the mirror.
    "packages_without_recommends": ["prometheus", "prometheus-node-exporter"],
}

# Each inner list is one `pip download` (pip refuses two versions of one project in a single call).
# 0.8.1 is the too-old compressed-tensors of the seed launch story; 0.18.0 is what sglang 0.5.23 pins.
MIRROR_WHEEL_RECIPE = {
    "revision": 1,
    "python_version": "3.11",
    "downloads": [
        ["compressed-tensors==0.8.1"],
        ["compressed-tensors==0.18.0"],
        ["requests", "jmespath", "charset-normalizer", "urllib3", "idna", "certifi"],
    ],
}

# Command -> Debian package that provides it, installed on demand so a fresh CI machine needs no manual step.
REQUIRED_TOOLS = {
    "systemd-nspawn": "systemd-container",
    "debootstrap": "debootstrap",
    "ip": "iproute2",
    "dpkg-scanpackages": "dpkg-dev",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
}

SSH_OPTIONS = [
    "-o", "BatchMode=yes",
    "-o", "StrictHostKeyChecking=no",
    "-o", "UserKnownHostsFile=/dev/null",
    "-o", "LogLevel=ERROR",
]

# The same options for ansible; BatchMode is left out as ansible sets its own.
INVENTORY_SSH_ARGS = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"

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


# ---------------------------------------------------------------------------------------------------------------
# Mounts, processes, cgroups: small helpers over /proc and /sys
# ---------------------------------------------------------------------------------------------------------------

def _unescape_mount_path(field):
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts_under(path):
    """Mount points at or below path, deepest first (the order to unmount them in)."""
    prefix = str(path).rstrip("/")
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            point = _unescape_mount_path(line.split()[4])
            if point == prefix or point.startswith(prefix + "/"):
                found.append(point)
    return sorted(set(found), key=lambda p: (-p.count("/"), p))


def unmount_all(path):
    for point in mounts_under(path):
        if run(["umount", point], check=False, capture=True).returncode != 0:
            # Lazy as a last resort: a stuck mount must not block removing the rest of the fleet.
            run(["umount", "-l", point], check=False, capture=True)
    left = mounts_under(path)
    if left:
        raise FleetError("could not unmount: %s" % ", ".join(left))


def remove_tree(path):
    """rm -rf that refuses to cross into mounts (a bound /proc under a crashed build dir must never be emptied)."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return
    unmount_all(path)
    run(["rm", "-rf", "--one-file-system", str(path)], capture=True)


def process_table():
    """(pid, argv) of every live process (zombies excluded: PID 1 here may not reap them)."""
    table = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                argv = handle.read().split(b"\0")
            if process_alive(int(entry)):
                table.append((int(entry), [a.decode(errors="replace") for a in argv if a]))
        except OSError:
            continue
    return table


def process_alive(pid):
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def wait_gone(pids, deadline):
    while time.monotonic() < deadline:
        pids = [p for p in pids if process_alive(p)]
        if not pids:
            return []
        time.sleep(0.1)
    return [p for p in pids if process_alive(p)]


def cgroup_roots():
    """Where a host's cgroup goes: both hierarchies on a v1/v2 hybrid (this machine), the one root on pure v2."""
    base = Path("/sys/fs/cgroup")
    if (base / "cgroup.controllers").exists():
        return [base]
    return [base / name for name in ("systemd", "unified") if (base / name).is_dir()]


def host_cgroups(name):
    return [root / "nspawn" / name for root in cgroup_roots()]


def remove_cgroup(path, timeout=5.0):
    """Remove a host's cgroup tree, children first (systemd inside made init.scope, system.slice, ...).

    Retried for a while: the last processes of a stopped host may still be on their way out (EBUSY).
    """
    deadline = time.monotonic() + timeout
    while path.is_dir():
        try:
            for current, dirs, _files in os.walk(path, topdown=False):
                for child in dirs:
                    with contextlib.suppress(FileNotFoundError):
                        os.rmdir(os.path.join(current, child))
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(path)
        except OSError as exc:
            if time.monotonic() > deadline:
                raise FleetError("could not remove cgroup %s: %s" % (path, exc)) from exc
            time.sleep(0.1)


def cgroup_pids(name):
    """Every process of a host, found through its cgroups."""
    pids = set()
    for cgroup in host_cgroups(name):
        for current, _dirs, files in os.walk(cgroup):
            if "cgroup.procs" in files:
                with contextlib.suppress(OSError), open(os.path.join(current, "cgroup.procs"), encoding="utf-8") as handle:
                    pids.update(int(line) for line in handle if line.strip())
    return sorted(pids)


def kill_host_processes(name):
    """SIGKILL what is left of a host: a SIGKILLed nspawn leaves its container running."""
    pids = [pid for pid in cgroup_pids(name) if process_alive(pid)]
    if not pids:
        return
    log("%s: killing %d leftover processes" % (name, len(pids)))
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if wait_gone(pids, time.monotonic() + 10):
        raise FleetError("%s: processes survived SIGKILL" % name)


def cgroup_pss_kib(name):
    """Proportional memory of every process of a host (memory accounting does not work inside these hosts)."""
    total = 0
    for pid in cgroup_pids(name):
        with contextlib.suppress(OSError), open("/proc/%d/smaps_rollup" % pid, encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
    return total


# ---------------------------------------------------------------------------------------------------------------
# Fleet description
# ---------------------------------------------------------------------------------------------------------------

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
    return ["ssh", "-i", str(fleet.key), "-o", "ConnectTimeout=%d" % timeout] + SSH_OPTIONS + \
        ["root@%s" % host.address, command]


def host_answers(fleet, host):
    try:
        result = subprocess.run(ssh_command(fleet, host, "true", timeout=2), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10, check=False)
    except subprocess.TimeoutExpired:
        return False
    return result.returncode == 0


# ---------------------------------------------------------------------------------------------------------------
# Tools, base image and package mirror (cached under the cache dir, each keyed by the hash of its recipe)
# ---------------------------------------------------------------------------------------------------------------

def ensure_tools():
    missing = sorted({pkg for cmd, pkg in REQUIRED_TOOLS.items() if shutil.which(cmd) is None})
    if not missing:
        return
    log("installing missing tools: %s" % " ".join(missing))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run(["apt-get", "update", "-q"], capture=True, env=env)
    run(["apt-get", "install", "-y", "-q", "--no-install-recommends"] + missing, capture=True, env=env)


def require_root():
    if os.geteuid() != 0:
        raise FleetError("must run as root (it makes network namespaces, mounts and cgroups)")


def clean_stale_builds(cache_dir):
    """Remove build dirs of crashed runs (call with the cache lock held, so no build is in progress)."""
    if cache_dir.is_dir():
        for stale in cache_dir.glob(".tmp-*"):
            log("removing stale build dir %s" % stale)
            remove_tree(stale)


def cached_build(cache_dir, kind, recipe, what, build):
    """The cache entry `KIND-<hash of recipe>`, built once by build(tmp) -> the directory to keep.

    Built under a temp name and renamed, under the cache lock: a crash leaves a .tmp dir (removed by the next
    build), never a half-built entry under the final name. Superseded entries of the same kind are pruned.
    """
    key = recipe_hash(recipe)
    final = cache_dir / ("%s-%s" % (kind, key))
    if final.is_dir():
        return final
    with file_lock(cache_dir / ".lock"):
        if final.is_dir():
            return final
        clean_stale_builds(cache_dir)
        tmp = cache_dir / (".tmp-%s-%s-%d" % (kind, key, os.getpid()))
        started = time.monotonic()
        log("building %s %s" % (what, final.name))
        try:
            os.rename(build(tmp), final)
        finally:
            remove_tree(tmp)
        log("%s built in %.1f s" % (what, time.monotonic() - started))
        prune_old(cache_dir, kind + "-", final)
        return final


def ensure_base_image(cache_dir):
    def build(tmp):
        run(["debootstrap", "--variant=" + BASE_RECIPE["variant"], "--include=" + ",".join(BASE_RECIPE["include"]),
             BASE_RECIPE["suite"], str(tmp), BASE_RECIPE["mirror"]], capture=True)
        configure_base_image(tmp)
        return tmp
    return cached_build(cache_dir, "base", BASE_RECIPE, "base image (debootstrap, about a minute)", build)


def configure_base_image(root):
    etc = root / "etc"
    # Empty machine-id: every host gets its own at boot. Never boot the base image itself.
    (etc / "machine-id").write_text("", encoding="utf-8")
    dbus_id = root / "var" / "lib" / "dbus" / "machine-id"
    dbus_id.parent.mkdir(parents=True, exist_ok=True)
    if dbus_id.exists() or dbus_id.is_symlink():
        dbus_id.unlink()
    dbus_id.symlink_to("/etc/machine-id")
    with contextlib.suppress(FileNotFoundError):
        (etc / "hostname").unlink()
    # Hosts reach nothing but the outer machine: no resolver, so name lookups fail at once instead of timing out.
    (etc / "resolv.conf").unlink()
    (etc / "resolv.conf").write_text("", encoding="utf-8")
    (etc / "hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n", encoding="utf-8")
    units = etc / "systemd" / "system"
    for unit in BASE_RECIPE["mask"]:
        for link in units.glob("*.wants/" + unit):
            link.unlink()
        target = units / unit
        if target.exists() or target.is_symlink():
            target.unlink()
        target.symlink_to("/dev/null")
    # Host keys are made per host at `up`: hosts sharing keys would be indistinguishable.
    for key in (etc / "ssh").glob("ssh_host_*"):
        key.unlink()
    for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for item in (root / leftover).glob("*"):
            if item.is_file():
                item.unlink()


def prune_old(cache_dir, kind, keep):
    """Remove superseded cache entries of one kind, unless a running fleet still uses them."""
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        in_use = handle.read()  # base images: overlay lowerdirs
    for _pid, argv in process_table():
        if "serve-mirror" in argv and "--root" in argv[:-1]:
            # apt repos: the served tree links to them
            in_use += " " + os.path.realpath(os.path.join(argv[argv.index("--root") + 1], "apt"))
    for old in cache_dir.glob(kind + "*"):
        if old != keep and old.is_dir() and str(old) not in in_use:
            log("removing superseded %s" % old)
            remove_tree(old)


def ensure_apt_mirror(cache_dir, base):
    def build(tmp):
        download_debs(base, tmp)
        return tmp / "repo"
    return cached_build(cache_dir, "apt", dict(MIRROR_APT_RECIPE, base=base.name), "apt mirror", build)


def download_debs(base, work_dir):
    """apt-get --download-only in a throwaway overlay of the base image, then a flat repo of what it fetched."""
    upper, work, merged, repo = (work_dir / n for n in ("upper", "work", "merged", "repo"))
    for path in (upper, work, merged, repo):
        path.mkdir(parents=True)
    run(["mount", "-t", "overlay", "overlay", "-o",
         "lowerdir=%s,upperdir=%s,workdir=%s" % (base, upper, work), str(merged)], capture=True)
    try:
        resolv = merged / "etc" / "resolv.conf"
        resolv.unlink()
        resolv.write_text(Path("/etc/resolv.conf").read_text(encoding="utf-8"), encoding="utf-8")
        run(["mount", "--bind", "/proc", str(merged / "proc")], capture=True)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"}
        run(["chroot", str(merged), "apt-get", "update", "-q"], capture=True, env=env)
        run(["chroot", str(merged), "apt-get", "install", "--download-only", "-y", "-q"] + MIRROR_APT_RECIPE["packages"],
            capture=True, env=env)
        if MIRROR_APT_RECIPE.get("packages_without_recommends"):
            run(["chroot", str(merged), "apt-get", "install", "--download-only", "--no-install-recommends", "-y", "-q"]
                + MIRROR_APT_RECIPE["packages_without_recommends"], capture=True, env=env)
        debs = sorted((merged / "var" / "cache" / "apt" / "archives").glob("*.deb"))
        if not debs:
            raise FleetError("apt downloaded nothing for %s" % " ".join(MIRROR_APT_RECIPE["packages"]))
        for deb in debs:
            shutil.copy2(deb, repo / deb.name)
    finally:
        unmount_all(merged)
    with open(repo / "Packages", "w", encoding="utf-8") as packages:
        run(["dpkg-scanpackages", "-m", ".", "/dev/null"], cwd=repo, stdout=packages, stderr=subprocess.PIPE, text=True)


def pip_command():
    cmd = [sys.executable, "-m", "pip"]
    if subprocess.run(cmd + ["--version"], capture_output=True, check=False).returncode != 0:
        raise FleetError("pip is not available for %s; run fleet.py with a Python that has pip (e.g. .venv/bin/python)"
                         % sys.executable)
    return cmd


def pip_env():
    return dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_ROOT_USER_ACTION="ignore")


def ensure_wheelhouse(cache_dir):
    def build(tmp):
        tmp.mkdir(parents=True)
        pip = pip_command()
        for specs in MIRROR_WHEEL_RECIPE["downloads"]:
            # Pure-python wheels only, chosen for the hosts' Python, not the controller's.
            run(pip + ["download", "-q", "--no-deps", "--only-binary=:all:", "--implementation", "py", "--abi", "none",
                       "--platform", "any", "--python-version", MIRROR_WHEEL_RECIPE["python_version"],
                       "-d", str(tmp)] + specs, capture=True, env=pip_env())
        return tmp
    return cached_build(cache_dir, "wheels", MIRROR_WHEEL_RECIPE, "wheelhouse", build)


def assemble_mirror(fleet, apt_repo, wheelhouse):
    """The tree the mirror server serves: apt/ links to the cached repo, wheels/ gets copies (the stand-in is added)."""
    remove_tree(fleet.mirror_root)
    wheels = fleet.mirror_root / "wheels"
    wheels.mkdir(parents=True)
    (fleet.mirror_root / "apt").symlink_to(apt_repo)
    for wheel in wheelhouse.glob("*.whl"):
        try:
            os.link(wheel, wheels / wheel.name)
        except OSError:
            shutil.copy2(wheel, wheels / wheel.name)


def refresh_standin(fleet):
    """Build the SGLang stand-in wheel from tests/standin into the served wheels/ dir (its source changes often).

    Built from a copy so the build leaves no build/ or *.egg-info in the source tree.
    Returns the wheel path, or None when the stand-in does not exist yet.
    """
    if not (STANDIN_SOURCE / "pyproject.toml").is_file():
        log("WARNING: %s/pyproject.toml does not exist yet; the mirror has no SGLang stand-in wheel" % STANDIN_SOURCE)
        return None
    wheels = fleet.mirror_root / "wheels"
    if not wheels.is_dir():
        raise FleetError("no mirror at %s; run `fleet.py up` or `fleet.py mirror` first" % fleet.mirror_root)
    with tempfile.TemporaryDirectory(prefix="fleet-standin-") as tmp:
        source = Path(tmp) / "src"
        shutil.copytree(STANDIN_SOURCE, source, ignore=shutil.ignore_patterns(
            "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache"))
        out = Path(tmp) / "out"
        run(pip_command() + ["wheel", "-q", "--no-deps", str(source), "-w", str(out)], capture=True, env=pip_env())
        built = sorted(out.glob("*.whl"))
        if len(built) != 1:
            raise FleetError("expected one stand-in wheel, pip built: %s" % [w.name for w in built])
        for old in wheels.glob("sglang-*.whl"):
            old.unlink()
        target = wheels / built[0].name
        shutil.copy2(built[0], target)
    log("stand-in wheel: %s" % target.name)
    return target


def build_mirror(fleet, base, standin=True):
    apt_repo = ensure_apt_mirror(fleet.cache_dir, base)
    wheelhouse = ensure_wheelhouse(fleet.cache_dir)
    assemble_mirror(fleet, apt_repo, wheelhouse)
    if standin:
        refresh_standin(fleet)


# ---------------------------------------------------------------------------------------------------------------
# Mirror server: one process, one ThreadingHTTPServer per host address (never 0.0.0.0)
# ---------------------------------------------------------------------------------------------------------------

class MirrorHandler(http.server.SimpleHTTPRequestHandler):
    """Static files; the access log goes to stderr, which `up` points at mirror.log."""

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        sys.stderr.write("%s %s %s\n" % (time.strftime("%H:%M:%S"), self.client_address[0], format % args))


def serve_mirror(root, addresses, port):
    handler = functools.partial(MirrorHandler, directory=str(root))
    # Block the stop signals before the threads start, so only sigwait below receives them.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    servers = [http.server.ThreadingHTTPServer((address, port), handler) for address in addresses]
    for server in servers:
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stderr.write("serving %s on %s port %d\n" % (root, ", ".join(addresses), port))
    sys.stderr.flush()
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    for server in servers:
        server.shutdown()
        server.server_close()


def start_mirror_server(fleet, hosts, deadline):
    cmd = [sys.executable, str(Path(__file__).resolve()), "serve-mirror", "--root", str(fleet.mirror_root),
           "--port", str(MIRROR_PORT)] + [a for h in hosts for a in ("--address", h.outer_address)]
    with open(fleet.mirror_log, "ab") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=out,  # pylint: disable=consider-using-with
                                start_new_session=True, cwd="/")
    pending = list(hosts)
    while pending:
        if proc.poll() is not None:
            raise FleetError("mirror server exited (rc=%s):\n%s" % (proc.returncode, tail(fleet.mirror_log)))
        if time.monotonic() > deadline:
            raise FleetError("mirror server did not listen on %s within the deadline" % pending[0].outer_address)
        try:
            socket.create_connection((pending[0].outer_address, MIRROR_PORT), timeout=0.5).close()
            pending.pop(0)
        except OSError:
            time.sleep(0.05)
    return proc.pid


def mirror_server_pids(fleet):
    root = str(fleet.mirror_root)
    return [pid for pid, argv in process_table()
            if "serve-mirror" in argv and root in argv and any(a.endswith("fleet.py") for a in argv)]


# ---------------------------------------------------------------------------------------------------------------
# Hosts
# ---------------------------------------------------------------------------------------------------------------

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


def tail(path, lines=25):
    """The last lines of a log, without the console's colour codes, carriage returns and blank lines."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return "(no log: %s)" % exc
    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    kept = [line.rstrip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
    return "\n".join("  | " + line for line in kept[-lines:])


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


# ---------------------------------------------------------------------------------------------------------------
# Inventory
# ---------------------------------------------------------------------------------------------------------------

def write_inventory(fleet, hosts):
    # JSON strings are valid YAML double-quoted scalars: no YAML library needed on the controller.
    q = json.dumps
    lines = [
        "# Generated by tests/fleet/fleet.py up; removed by fleet.py down. Do not edit.",
        "all:",
        "  children:",
        "    local_fleet:",
        "      vars:",
        "        ansible_user: root",
        "        ansible_ssh_private_key_file: %s" % q(str(fleet.key)),
        "        ansible_ssh_common_args: %s" % q(INVENTORY_SSH_ARGS),
        "        ansible_python_interpreter: /usr/bin/python3",
        "      hosts:",
    ]
    for host in hosts:
        lines += ["        %s:" % host.name,
                  "          ansible_host: %s" % host.address,
                  "          fleet_mirror_url: %s" % q(host.mirror_url)]
    fleet.inventory.parent.mkdir(parents=True, exist_ok=True)
    tmp = fleet.inventory.with_name(fleet.inventory.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, fleet.inventory)


def remove_inventory(path):
    """Remove the inventory only if this tool wrote it (never a hand-written file of the same name)."""
    with contextlib.suppress(FileNotFoundError):
        if path.read_text(encoding="utf-8").startswith("# Generated by tests/fleet/fleet.py"):
            path.unlink()


# ---------------------------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------------------------

def fleet_healthy(fleet, state, hosts):
    pids = [h.get("pid") for h in state.get("hosts", [])]
    if len(pids) != len(hosts) or not all(pid and process_alive(pid) for pid in pids):
        return False
    if not mirror_server_pids(fleet):
        return False
    return all(parallel(functools.partial(host_answers, fleet), hosts))


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


def cmd_down(fleet, args):
    require_root()
    started = time.monotonic()
    with file_lock(fleet.lock_path):
        state = fleet.load_state()
        teardown(fleet, state, args.timeout)
    log("down in %.1f s" % (time.monotonic() - started))
    return EXIT_OK


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


if __name__ == "__main__":
    sys.exit(main())
