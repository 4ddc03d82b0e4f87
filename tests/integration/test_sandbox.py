# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The server unit's systemd sandbox (docs/sandbox.md) on a real systemd host with the SGLang stand-in.

systemd-analyze's exposure score; what the running server's processes are (no capabilities, no new privileges, a
seccomp filter, read-only mounts) and what a process with the unit's own sandbox can and cannot do (write its state
directory and /dev/shm; not /usr, /etc, /var/lib/sglang, the control tree, /etc/sglang, /root; no packet sockets, no
user namespaces, no ptrace); that it still serves, keeps its JIT cache across a restart and drains on SIGTERM; the
same with sglang_user root; an operator relaxing one setting, and a bad sglang_unit_hardening refused before anything
changes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pylint: disable=invalid-name

import json
import re
import shlex
import uuid

import pytest

from server_helpers import PLAYBOOK, VENV, completion, make_model, role_vars, unit_show

MAX_EXPOSURE = 5.0
CONTROL_TREE = '/var/lib/llmops-sglang'
SCORE = re.compile(r'Overall exposure level for (?P<unit>\S+): (?P<score>\d+(\.\d+)?) (?P<verdict>\S+)')
# [Service] lines a probe does not take over from the unit: how it starts and stops, not what it may do.
NOT_SANDBOX = ('Type', 'ExecStart', 'Restart', 'RestartSec', 'KillMode', 'TimeoutStopSec', 'EnvironmentFile')

# Runs under the unit's own sandbox (systemd-run with its [Service] lines) and says, as JSON, what each attempt gave.
PROBE = r'''
import ctypes, errno, json, os, socket, sys
state_dir = sys.argv[1]
out = {"uid": os.getuid(), "status": {}}
for line in open("/proc/self/status"):
    key = line.split(":")[0]
    if key in ("NoNewPrivs", "Seccomp", "CapEff", "CapBnd", "CapPrm"):
        out["status"][key] = line.split(":", 1)[1].strip()

def attempt(what, action):
    try:
        action()
        out[what] = "ok"
    except OSError as exc:
        out[what] = errno.errorcode.get(exc.errno, str(exc.errno))

def write(path):
    with open(path, "w") as handle:
        handle.write("probe\n")

for path in ("/usr/sbx-probe", "/etc/sbx-probe", "/var/lib/sglang/sbx-probe", "/run/sbx-probe", "/run/lock/sbx-probe",
             state_dir + "/.cache/sbx-probe", "/dev/shm/sbx-probe-%d" % os.getpid(), "/tmp/sbx-probe"):
    attempt("write " + path, lambda path=path: (os.makedirs(os.path.dirname(path), exist_ok=True), write(path)))
for path in ("/etc/sglang", "/var/lib/llmops-sglang", "/root", "/etc/ssh"):
    attempt("list " + path, lambda path=path: out.__setitem__("entries " + path, os.listdir(path)))
attempt("read /usr/lib/os-release", lambda: open("/usr/lib/os-release").read())
attempt("read /etc/shadow", lambda: open("/etc/shadow").read())
for name in ("AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET"):
    family = getattr(socket, name)
    kind = socket.SOCK_RAW if name in ("AF_NETLINK", "AF_PACKET") else socket.SOCK_DGRAM
    attempt("socket " + name, lambda family=family, kind=kind: socket.socket(family, kind).close())
libc = ctypes.CDLL(None, use_errno=True)

def call(what, result):
    out[what] = "ok" if result == 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))

call("unshare user namespace", libc.unshare(0x10000000))
call("unshare mount namespace", libc.unshare(0x00020000))
call("ptrace traceme", libc.ptrace(0, 0, 0, 0))
attempt("chown state dir", lambda: os.chown(state_dir, 1, 1))
os.unlink(state_dir + "/.cache/sbx-probe") if out["write " + state_dir + "/.cache/sbx-probe"] == "ok" else None
print(json.dumps(out))
'''


def exposure(fleet, host, unit):
    """systemd-analyze security's overall exposure of the unit, as a number (printed for the test's log)."""
    out = fleet.run(host, ['systemd-analyze', 'security', '--no-pager', unit], check=True).stdout
    match = SCORE.search(out)
    assert match and match.group('unit') == unit, out
    print('systemd-analyze security %s on %s: %s %s' % (unit, host.name, match.group('score'), match.group('verdict')))
    return float(match.group('score'))


def unit_processes(fleet, host, unit):
    """The PIDs in the unit's control group (cgroup v2, or the name=systemd hierarchy of a hybrid host)."""
    group = unit_show(fleet, host, unit, 'ControlGroup')['ControlGroup']
    out = fleet.run(host, 'cat /sys/fs/cgroup/systemd%s/cgroup.procs 2>/dev/null || cat /sys/fs/cgroup%s/cgroup.procs'
                    % (group, group), check=True).stdout
    return [int(pid) for pid in out.split()]


def proc_status(fleet, host, pid):
    out = fleet.run(host, 'cat /proc/%d/status' % pid, check=True).stdout
    return dict(line.split(':', 1) for line in out.splitlines() if ':' in line)


def mount_of(mountinfo, path):
    """(mount point, per-mount options, root) of the mount that holds path, from a /proc/PID/mountinfo text."""
    best = None
    for line in mountinfo.splitlines():
        fields = line.split()
        point = fields[4]
        if path == point or path.startswith(point.rstrip('/') + '/'):
            if best is None or len(point) >= len(best[0]):  # later lines (mounted on top) win on the same point
                best = (point, fields[5].split(','), fields[3])
    return best


def sandbox_lines(fleet, host, unit_name):
    """The unit file's [Service] settings that make up its sandbox (and its user), as KEY=VALUE lines."""
    text = fleet.run(host, ['cat', '/etc/systemd/system/%s.service' % unit_name], check=True).stdout
    section = text.split('[Service]', 1)[1].split('\n[', 1)[0]
    lines = [line for line in section.splitlines() if re.match(r'^[A-Z][A-Za-z]+=', line)]
    return [line for line in lines if line.split('=', 1)[0] not in NOT_SANDBOX]


def probe(fleet, host, unit_name, state_dir):
    """What a process under the unit's own sandbox (its user, mounts, filters, device policy) can and cannot do."""
    argv = ['systemd-run', '--wait', '--pipe', '--quiet', '--unit', 'sbx-probe-%s' % uuid.uuid4().hex[:8]]
    for line in sandbox_lines(fleet, host, unit_name):
        argv += ['-p', line]
    result = fleet.run(host, argv + ['/usr/bin/python3', '-c', PROBE, state_dir], check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def as_service_user_in_its_namespace(fleet, host, pid, user, command):
    """A shell command run as the service's user inside the mount namespace of the server's process `pid`."""
    return fleet.run(host, 'nsenter -t %d -m -S $(id -u %s) -G $(id -g %s) -- sh -c %s'
                     % (pid, user, user, shlex.quote(command)))


@pytest.fixture
def sandbox_host(fleet, standin_venv):
    """The fleet's first host with the stand-in and a checkpoint; the root-only control tree exists (as the lead's
    role makes it) so that its InaccessiblePaths line applies; every unit a test names is removed afterwards."""
    host = fleet.hosts[0]
    standin_venv(host)
    make_model(fleet, host)
    made_tree = fleet.run(host, 'test -d %s' % CONTROL_TREE).returncode != 0
    fleet.run(host, 'install -d -m 0700 -o root -g root %s && echo secret > %s/.sbx-marker' % (CONTROL_TREE, CONTROL_TREE),
              check=True)
    units = []
    yield host, units
    for name in units:
        fleet.run(host, 'systemctl stop {0}.service; systemctl reset-failed {0}.service; rm -rf /etc/systemd/system/{0}.service '
                        '/etc/sglang/{0}.env /etc/sglang/{0}.secrets.env /var/lib/sglang/{0} /var/lib/sglang/{0}.extra '
                        '/dev/shm/sbx-probe-*; systemctl daemon-reload'.format(shlex.quote(name)))
    fleet.run(host, 'rm -f %s/.sbx-marker' % CONTROL_TREE)
    if made_tree:
        fleet.run(host, 'rmdir %s' % CONTROL_TREE)


def deploy(fleet, host, name, port, user='sglang', **overrides):
    state_dir = '/var/lib/sglang/' + name
    values = role_vars(host, name, port, sglang_user=user, sglang_group=user,
                       sglang_env={'SGLANG_STANDIN_PACE': '0.01', 'SGLANG_STANDIN_STATE_DIR': state_dir})
    values.update(overrides)
    return fleet.playbook(PLAYBOOK, values)


def assert_confined(found, state_dir):
    """The probe's findings: what the sandbox allows and what it refuses."""
    assert found['status']['NoNewPrivs'] == '1' and found['status']['Seccomp'] == '2', found
    assert int(found['status']['CapBnd'], 16) == 0 and int(found['status']['CapEff'], 16) == 0, found
    for path in ('/usr/sbx-probe', '/etc/sbx-probe', '/var/lib/sglang/sbx-probe'):
        assert found['write ' + path] == 'EROFS', (path, found)
    assert found['write /run/sbx-probe'] == 'EROFS' and found['write /run/lock/sbx-probe'] == 'EROFS', found
    assert found['write %s/.cache/sbx-probe' % state_dir] == 'ok', found
    assert found['write /tmp/sbx-probe'] == 'ok', found
    assert [key for key in found if key.startswith('write /dev/shm/')] and \
        [value for key, value in found.items() if key.startswith('write /dev/shm/')] == ['ok'], found
    assert found['read /usr/lib/os-release'] == 'ok', found
    # Hidden: the control tree and every instance's configuration and secrets, and root's home.
    assert found['list /etc/sglang'] == 'EACCES' and found['list %s' % CONTROL_TREE] == 'EACCES', found
    assert found['list /root'] == 'EACCES' and found['list /etc/ssh'] == 'EACCES', found
    assert found['read /etc/shadow'] == 'EACCES', found
    for family in ('AF_UNIX', 'AF_INET', 'AF_INET6', 'AF_NETLINK'):
        assert found['socket ' + family] == 'ok', (family, found)
    assert found['socket AF_PACKET'] == 'EAFNOSUPPORT', found
    assert found['unshare user namespace'] == 'EPERM' and found['unshare mount namespace'] == 'EPERM', found
    assert found['ptrace traceme'] == 'EPERM', found
    assert found['chown state dir'] == 'EPERM', found


def test_the_server_runs_sandboxed_serves_keeps_its_jit_cache_and_drains(fleet, sandbox_host):
    host, units = sandbox_host
    name, port = 'sbx-k26', 30150
    unit = name + '.service'
    state_dir = '/var/lib/sglang/' + name
    units.append(name)
    result = deploy(fleet, host, name, port)
    assert result.rc == 0, result
    assert exposure(fleet, host, unit) <= MAX_EXPOSURE

    # The running server: every process of the unit (main + 8 schedulers) as the service user, without capabilities
    # or a way to gain them, under a seccomp filter.
    uid = fleet.run(host, 'id -u sglang', check=True).stdout.strip()
    pids = unit_processes(fleet, host, unit)
    assert len(pids) >= 9, pids
    for pid in pids:
        status = proc_status(fleet, host, pid)
        assert status['Uid'].split()[0] == uid, (pid, status)
        assert status['NoNewPrivs'].strip() == '1' and status['Seccomp'].strip() == '2', (pid, status)
        for caps in ('CapBnd', 'CapEff', 'CapPrm', 'CapAmb'):
            assert int(status[caps], 16) == 0, (pid, caps, status)
    # Its mounts: the OS read-only, its state directory writable, a /tmp of its own.
    main = int(unit_show(fleet, host, unit, 'MainPID')['MainPID'])
    mountinfo = fleet.run(host, 'cat /proc/%d/mountinfo' % main, check=True).stdout
    for path in ('/usr/bin', '/etc/passwd', '/opt/sglang/venv', '/models/k26', '/var/lib/sglang'):
        point, options, _root = mount_of(mountinfo, path)
        assert 'ro' in options, (path, point, options)
    point, options, _root = mount_of(mountinfo, state_dir)
    assert point == state_dir and 'rw' in options, (point, options)
    point, options, root = mount_of(mountinfo, '/tmp')
    assert point == '/tmp' and '/systemd-private-' in root and root.endswith('/tmp'), (point, root)

    # What a process under the unit's own sandbox can and cannot do.
    assert_confined(probe(fleet, host, name, state_dir), state_dir)

    # It serves; the stand-in's nvidia-smi (root, outside) reads the schedulers' GPU state from the state directory.
    assert completion(fleet, host, port)['choices']
    smi = fleet.run(host, 'SGLANG_STANDIN_STATE_DIR=%s %s/bin/sglang-standin-nvidia-smi --query-compute-apps=pid '
                          '--format=csv,noheader' % (state_dir, VENV), check=True).stdout.split()
    assert sorted(int(pid) for pid in smi) == sorted(pid for pid in pids if pid != main), (smi, pids)

    # A JIT cache the server built (written as its user inside its own namespace) survives a restart.
    cache = state_dir + '/.cache/sglang/triton/sbx/kernel.cubin'
    made = as_service_user_in_its_namespace(fleet, host, main, 'sglang',
                                            'mkdir -p %s && echo kernel > %s' % (cache.rsplit('/', 1)[0], cache))
    assert made.returncode == 0, made
    refused = as_service_user_in_its_namespace(fleet, host, main, 'sglang', 'echo x > /var/lib/sglang/sbx-cache')
    assert refused.returncode != 0 and 'Read-only file system' in refused.stderr, refused
    restarted = deploy(fleet, host, name, port, sglang_state='restarted')
    assert restarted.rc == 0, restarted
    new_main = int(unit_show(fleet, host, unit, 'MainPID')['MainPID'])
    assert new_main != main
    kept = as_service_user_in_its_namespace(fleet, host, new_main, 'sglang', 'cat %s' % cache)
    assert kept.returncode == 0 and kept.stdout == 'kernel\n', kept
    # The new schedulers wrote their GPU state into the state directory again, from inside the sandbox.
    owner = fleet.run(host, 'stat -c %%U:%%a %s/gpu0.json; cat %s/gpu0.json' % (state_dir, state_dir), check=True).stdout
    assert owner.startswith('sglang:600\n'), owner
    assert json.loads(owner.split('\n', 1)[1])['pid'] in unit_processes(fleet, host, unit), owner
    assert completion(fleet, host, port)['choices']

    # SIGTERM drains and ends the server cleanly.
    since = fleet.run(host, 'date +%s', check=True).stdout.strip()
    fleet.run(host, ['systemctl', 'stop', unit], check=True)
    journal = fleet.run(host, 'journalctl -u %s --since @%s -o cat --no-pager' % (unit, since), check=True).stdout
    assert 'SIGTERM received' in journal and 'Gracefully exiting' in journal, journal
    assert unit_show(fleet, host, unit, 'Result')['Result'] == 'success'


def test_a_root_service_user_is_sandboxed_too(fleet, sandbox_host):
    """sglang_user root: uid 0 without any capability; what it owns outside its state directory stays read-only or
    hidden (the control tree and /etc/sglang are root's, 0700/0600: only the sandbox keeps them from uid 0)."""
    host, units = sandbox_host
    name, port = 'sbx-root', 30151
    state_dir = '/var/lib/sglang/' + name
    units.append(name)
    result = deploy(fleet, host, name, port, user='root')
    assert result.rc == 0, result
    assert exposure(fleet, host, name + '.service') <= MAX_EXPOSURE
    found = probe(fleet, host, name, state_dir)
    assert found['uid'] == 0, found
    assert_confined(found, state_dir)
    main = int(unit_show(fleet, host, name + '.service', 'MainPID')['MainPID'])
    status = proc_status(fleet, host, main)
    assert status['Uid'].split()[0] == '0' and int(status['CapEff'], 16) == 0 and int(status['CapBnd'], 16) == 0, status
    assert completion(fleet, host, port)['choices']


def test_an_operator_relaxes_a_setting_and_a_bad_one_is_refused_before_any_change(fleet, sandbox_host):
    host, units = sandbox_host
    name, port = 'sbx-relax', 30152
    extra = '/var/lib/sglang/%s.extra' % name
    units.append(name)
    fleet.run(host, 'install -d -m 1777 %s' % extra, check=True)
    relaxed = {'ProtectClock': False, 'ProtectProc': None, 'ReadWritePaths': [extra]}
    result = deploy(fleet, host, name, port, sglang_unit_hardening=relaxed)
    assert result.rc == 0, result
    lines = sandbox_lines(fleet, host, name)
    assert 'ProtectClock=no' in lines and not [line for line in lines if line.startswith('ProtectProc=')], lines
    assert lines.count('ReadWritePaths=/var/lib/sglang/%s' % name) == 1 and 'ReadWritePaths=' + extra in lines, lines
    assert 'NoNewPrivileges=yes' in lines and 'CapabilityBoundingSet=' in lines, lines
    assert exposure(fleet, host, name + '.service') <= MAX_EXPOSURE
    written = fleet.run(host, ['systemd-run', '--wait', '--pipe', '--quiet'] + [arg for line in lines for arg in ('-p', line)]
                        + ['/bin/sh', '-c', 'echo x > %s/probe && echo written' % extra])
    assert written.stdout.strip() == 'written', written
    assert completion(fleet, host, port)['choices']

    before = fleet.run(host, 'md5sum /etc/systemd/system/%s.service; systemctl show -p InvocationID %s.service'
                       % (name, name), check=True).stdout
    for bad, fragment in (({'UMask': 23}, "sglang_unit_hardening['UMask']=23: expected a string: quote it"),
                          ({'ExecStart': '/bin/sh'}, "sglang_unit_hardening['ExecStart']='/bin/sh': the role sets ExecStart"),
                          ({'ProtectHome': 'yes\nExecStartPre=/bin/evil'}, "sglang_unit_hardening['ProtectHome']=")):
        refused = deploy(fleet, host, name, port, sglang_unit_hardening=bad)
        assert refused.rc != 0 and 'Invalid input (1)' in refused.stdout and fragment in refused.stdout, refused
    after = fleet.run(host, 'md5sum /etc/systemd/system/%s.service; systemctl show -p InvocationID %s.service'
                      % (name, name), check=True).stdout
    assert after == before
