# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures for integration tests on the local fleet of real systemd hosts (tests/fleet/fleet.py).

fleet          session: the shared fleet (size LLMOPS_FLEET_SIZE, default 3). Booted if it is not up and then
               removed at the end of the session (also on failure or SIGTERM); a fleet that was already up is
               left up (a smaller or broken one is rebuilt first; a healthy one gets its mirror refreshed).
               LLMOPS_FLEET_STATE_DIR picks another state dir (a private fleet of a given checkout or CI job), and
               LLMOPS_FLEET_PREFIX its host names (default gpu; give each concurrent fleet its own).
standin_venv   function: standin_venv(host, compressed_tensors=the pin) makes /opt/sglang/venv on the host with
               the SGLang stand-in and that compressed-tensors from the host's mirror (pip --no-index --no-deps);
               returns the venv path.
standin_host   function: (host, units) - the shared fleet's first host with the stand-in venv and a K2.6-shaped
               checkpoint; every unit name a test appends to `units` is stopped and removed afterwards.
private_fleet  function: private_fleet(count=1, standin=False) boots a fleet of its own (own state dir, prefix
               pfPPPPPx, free addresses picked by fleet.py) and removes it after the test; for tests that change
               hosts beyond repair or test the fleet tool itself.

Without root or systemd-nspawn the tests that use these fixtures are skipped, unless LLMOPS_REQUIRE_FLEET=1
(`make integration`), which turns the skip into a failure: CI must never pass by skipping.
"""

from __future__ import absolute_import, division, print_function

import atexit
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

__metaclass__ = type  # pylint: disable=invalid-name

REPO_ROOT = Path(__file__).resolve().parents[2]
# The fleet package (tests/fleet) holds the one fleet client, shared with the bench.
if str(REPO_ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "tests"))
from fleet import client as fleet_client  # noqa: E402  pylint: disable=wrong-import-position
from server_helpers import VENV as STANDIN_VENV, make_model  # noqa: E402  pylint: disable=wrong-import-position

FleetHost = fleet_client.FleetHost
COLLECTIONS_PATH = REPO_ROOT / ".build" / "collections"
DEFAULT_COMPRESSED_TENSORS = fleet_client.PINS["compressed-tensors"]  # what sglang 0.5.23 pins (0.18.0)


def fleet_unavailable_reason():
    """Why the fleet cannot run here, or None. A missing systemd-nspawn only blocks when nobody asked for the fleet:
    with LLMOPS_REQUIRE_FLEET=1 fleet.py installs what it needs."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, overlay mounts, cgroups)"
    if shutil.which("systemd-nspawn") is None and not fleet_required():
        return "systemd-nspawn is missing (apt-get install systemd-container)"
    return None


def fleet_required():
    return os.environ.get("LLMOPS_REQUIRE_FLEET", "") == "1"


def require_fleet():
    reason = fleet_unavailable_reason()
    if reason is None:
        return
    if fleet_required():
        pytest.fail("LLMOPS_REQUIRE_FLEET=1 but the local fleet cannot run: %s" % reason, pytrace=False)
    pytest.skip("local fleet unavailable: %s" % reason)


def venv_tool(name):
    """ansible and friends next to the running Python (the project venv), else from PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        pytest.fail("%s not found next to %s nor on PATH" % (name, sys.executable), pytrace=False)
    return found


_LOCAL_GROUPS = []


def local_groups_inventory():
    """inventories/local without its hosts.yml: the k26_servers group (k26.yml) and the fleet's group_vars.

    For a private fleet, whose own hosts.yml the Fleet passes with -i: `-i inventories/local` would also load the
    shared fleet's generated hosts.yml when that fleet is up (the integration groups run side by side), and its
    local_fleet vars (the shared fleet's ssh key) would override the private fleet's. Made once per pytest process.
    """
    if not _LOCAL_GROUPS:
        root = Path(tempfile.mkdtemp(prefix='llmops-local-groups-'))
        atexit.register(shutil.rmtree, str(root), True)
        source = REPO_ROOT / 'inventories' / 'local'
        (root / 'group_vars').mkdir()
        os.symlink(str(source / 'k26.yml'), str(root / 'k26.yml'))
        for item in sorted((source / 'group_vars').iterdir()):
            os.symlink(str(item), str(root / 'group_vars' / item.name))
        _LOCAL_GROUPS.append(str(root))
    return _LOCAL_GROUPS[0]


class AnsibleResult(str):
    """rc, stdout and stderr of one ansible or ansible-playbook run.

    Also a str, the full report: pytest cuts the repr of other objects in `assert result.rc == 0, result` to a few
    hundred characters, and a failed play needs its whole output to be understood.
    """

    def __new__(cls, command, completed):
        report = "AnsibleResult(rc=%d, command=%s)\n--- stdout\n%s\n--- stderr\n%s" % (
            completed.returncode, shlex.join(command), completed.stdout[-20000:], completed.stderr[-8000:])
        self = super().__new__(cls, report)
        self.command = command
        self.rc = completed.returncode
        self.stdout = completed.stdout
        self.stderr = completed.stderr
        return self


class FleetTool(fleet_client.FleetTool):
    """The shared fleet client's FleetTool; its failures fail the test."""

    def fail(self, message):
        pytest.fail(message, pytrace=False)


class Fleet(fleet_client.Fleet):
    """A booted fleet and the helpers tests drive it with (ssh from the shared client, ansible runs here)."""

    def ansible_env(self):
        env = dict(os.environ)
        env.update({
            "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS_PATH),
            "ANSIBLE_INVENTORY": self.inventory,
            "ANSIBLE_HOST_KEY_CHECKING": "False",
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
        })
        return env

    def _ansible(self, command, timeout):
        completed = subprocess.run(command, capture_output=True, text=True, env=self.ansible_env(), cwd=str(REPO_ROOT),
                                   timeout=timeout, stdin=subprocess.DEVNULL, check=False)
        return AnsibleResult(command, completed)

    def ansible(self, pattern, module, args=None, extra_args=(), timeout=900):
        """Ad hoc `ansible PATTERN -m MODULE -a ARGS` against the fleet's inventory."""
        command = [venv_tool("ansible"), pattern, "-i", self.inventory, "-m", module]
        if args:
            command += ["-a", args if isinstance(args, str) else json.dumps(args)]
        return self._ansible(command + list(extra_args), timeout)

    def playbook(self, path, extra_vars=None, check=False, limit=None, extra_args=(), timeout=1800):
        """`ansible-playbook PATH` against the fleet's inventory; extra_vars is a dict passed as JSON."""
        command = [venv_tool("ansible-playbook"), "-i", self.inventory, str(path)]
        if extra_vars:
            command += ["-e", json.dumps(extra_vars)]
        if check:
            command.append("--check")
        if limit:
            command += ["--limit", limit]
        return self._ansible(command + list(extra_args), timeout)


def _group_cgroup_usage_path():
    """The cpuacct.usage file of the group's cgroup when run_groups.sh put this pytest in one (llmops-it-GROUP: its
    pytest, ansible runs and fleet hosts), else None: outside it the cgroup is the whole machine's."""
    try:
        with open("/proc/self/cgroup") as handle:
            for line in handle:
                controllers, path = line.rstrip("\n").split(":", 2)[1:]
                if "cpuacct" in controllers.split(",") and "/llmops-it-" in path:
                    return "/sys/fs/cgroup/cpuacct%s/cpuacct.usage" % path
    except (OSError, ValueError):
        return None
    return None


_USAGE_PATH = _group_cgroup_usage_path()
_TEST_COSTS = []


def _group_cpu_seconds():
    with open(_USAGE_PATH) as handle:
        return int(handle.read()) / 1e9


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):  # pylint: disable=unused-argument
    """Each test's wall time and the CPU its group spent meanwhile (setup, call and teardown; a session fixture's boot
    counts in the first test that uses it), for the table at the end: where CI's CPU goes, test by test."""
    if _USAGE_PATH is None:
        yield
        return
    cpu, wall = _group_cpu_seconds(), time.monotonic()
    yield
    _TEST_COSTS.append((_group_cpu_seconds() - cpu, time.monotonic() - wall, item.nodeid))


def pytest_terminal_summary(terminalreporter):
    if not _TEST_COSTS:
        return
    total_cpu = sum(cost[0] for cost in _TEST_COSTS)
    terminalreporter.write_sep("=", "CPU per test, most first (the group's cgroup: pytest, ansible, its fleet's hosts)")
    for cpu, wall, nodeid in sorted(_TEST_COSTS, reverse=True):
        terminalreporter.write_line("%7.1f s CPU %7.1f s wall  %s" % (cpu, wall, nodeid))
    terminalreporter.write_line("%7.1f s CPU in %d tests" % (total_cpu, len(_TEST_COSTS)))


def _raise_interrupt(_signum, _frame):
    raise KeyboardInterrupt("SIGTERM")


def shared_fleet_tool():
    """The session's fleet: the default one, or LLMOPS_FLEET_STATE_DIR's with prefix LLMOPS_FLEET_PREFIX (default
    "gpu") on free addresses, so that two checkouts can run their integration tests at once."""
    state_dir = os.environ.get("LLMOPS_FLEET_STATE_DIR") or None
    if state_dir is None:
        return FleetTool()
    return FleetTool(state_dir=state_dir, prefix=os.environ.get("LLMOPS_FLEET_PREFIX") or None, first_index="auto")


@pytest.fixture(scope="session")
def fleet():
    """The shared fleet for the whole session."""
    require_fleet()
    size = int(os.environ.get("LLMOPS_FLEET_SIZE", "3"))
    tool = shared_fleet_tool()
    before = tool.status()
    was_up = before.get("status") != "down"
    if not was_up and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        # A cancelled CI job gets SIGTERM: turn it into KeyboardInterrupt so the teardown below still runs.
        signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        if before.get("healthy") and before.get("count", 0) >= size:
            # Reused: bring its mirror up to today's recipe and stand-in code (cached parts cost nothing).
            tool.refresh_mirror()
        else:
            tool.up(size)
        yield Fleet(tool, tool.status())
    finally:
        # Also after an interrupted `up`, whose half-made fleet `down` knows how to remove.
        if not was_up:
            tool.down()


STANDIN_SCRIPT = """set -e
V={venv}
[ -x "$V/bin/python" ] || python3 -m venv "$V"
have() {{ "$V/bin/python" -c 'import sys, importlib.metadata as m; print(m.version(sys.argv[1]))' "$1" 2>/dev/null || true; }}
# The mirror's only sglang is the stand-in; its version never changes, so a rebuilt wheel needs --force-reinstall.
case "$(have sglang)" in
  *+standin) if [ {force} = 1 ]; then {pip} --force-reinstall sglang; fi ;;
  *) {pip} sglang ;;
esac
"""


@pytest.fixture(scope="session")
def _standin_installed():
    """(state dir, host name) of the hosts whose stand-in was reinstalled from this session's wheel."""
    return set()


@pytest.fixture
def standin_venv(fleet, _standin_installed):  # pylint: disable=redefined-outer-name
    """standin_venv(host, compressed_tensors=the pin, on=None) -> venv path with the stand-in and that compressed-tensors.

    on: the Fleet the host belongs to (default the shared fleet; pass a private_fleet's Fleet for its hosts).
    Idempotent: once per host per session the stand-in is reinstalled from the current wheel; after that only what
    differs from the request is installed (tests may change the venv, e.g. a role upgrading compressed-tensors).
    compressed_tensors=None leaves compressed-tensors as it is (absent in a new venv).
    """
    def install(host, compressed_tensors=DEFAULT_COMPRESSED_TENSORS, on=None):
        owner = on or fleet
        host = owner.host(host)
        key = (owner.state_dir, host.name)
        pip = shlex.join(["%s/bin/pip" % STANDIN_VENV, "install", "-q", "--disable-pip-version-check", "--no-cache-dir",
                          "--no-deps"] + host.pip_source_args)
        script = STANDIN_SCRIPT.format(venv=STANDIN_VENV, pip=pip, force=0 if key in _standin_installed else 1)
        if compressed_tensors:
            script += '[ "$(have compressed-tensors)" = %s ] || %s %s\n' % (
                shlex.quote(compressed_tensors), pip, shlex.quote("compressed-tensors==" + compressed_tensors))
        owner.run(host, script, check=True)
        _standin_installed.add(key)
        return STANDIN_VENV
    return install


@pytest.fixture
def standin_host(fleet, standin_venv):  # pylint: disable=redefined-outer-name
    """gpu-01 with the stand-in venv, a fake K2.6 checkpoint, and no unit left behind afterwards."""
    target = fleet.hosts[0]
    standin_venv(target)
    make_model(fleet, target)
    units = []
    yield target, units
    for unit in units:
        fleet.run(target, 'systemctl stop {0}.service; systemctl reset-failed {0}.service; '
                          'rm -rf /etc/systemd/system/{0}.service /etc/sglang/{0}.env /etc/sglang/{0}.secrets.env '
                          '/var/lib/sglang/{0}; systemctl daemon-reload'.format(shlex.quote(unit)))


@pytest.fixture
def private_fleet(tmp_path_factory):
    """private_fleet(count=1, standin=False) -> Fleet of its own, removed after the test (also on failure)."""
    require_fleet()
    tools = []

    def boot(count=1, standin=False):
        # Unique per session and call, so concurrent sessions and the shared fleet never meet; addresses are picked
        # by fleet.py among the free ones.
        prefix = "pf%05d%s" % (os.getpid() % 100000, "abcdefghijklmnopqrstuvwxyz"[len(tools) % 26])
        tool = FleetTool(state_dir=tmp_path_factory.mktemp("fleet") / "state", prefix=prefix, first_index="auto")
        tools.append(tool)
        tool.up(count, *([] if standin else ["--skip-standin"]))
        return Fleet(tool, tool.status())

    yield boot
    for tool in tools:
        tool.down()
