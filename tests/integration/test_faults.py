# -*- coding: utf-8 -*-
"""The faults of a real rollout, each provoked for real on a fleet host with the SGLang stand-in (issue 12).

Each test ends by checking that the host serves a verified configuration (the unit's files equal the last-known-good
copy and a real completion answers) and that nothing was lost: the last-known-good copy, the secrets file, the JIT
caches under the state directory. The moment of each fault is read from the host (the stand-in's event log, the
unit's state, the process table), never guessed with a sleep. Every test uses its own unit, port and event log and
waits for the host's rollout lock as long as a whole run takes, so the tests can share hosts and run side by side.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import secrets
import shlex
import signal
import subprocess
import time

import pytest

from server_helpers import PLAYBOOK, SERVER_ARGS, VENV, completion, flat, make_model, role_vars, unit_show

from conftest import REPO_ROOT, venv_tool

BAD_FAULT = 'crash@cuda_graph:oom'
EVENTS_DIR = '/var/lib/sglang-fault-events'  # the stand-in's event logs


class Faulty:
    """One unit on one host, its configurations, and the helpers to break a run of it."""

    def __init__(self, fleet, host, name, port):
        self.fleet = fleet
        self.host = host
        self.name = name
        self.unit = name + '.service'
        self.port = port
        self.key = 'sk-fault-' + secrets.token_hex(6)
        # Not /var/tmp, which the unit's PrivateTmp makes its own, nor /dev/shm, which a reboot empties: a directory
        # the unit may write (sglang_unit_hardening's ReadWritePaths, docs/sandbox.md) that outlives a reboot.
        self.events = '%s/%s.events.jsonl' % (EVENTS_DIR, name)
        self.state_dir = '/var/lib/sglang/' + name
        # root's own state of the instance: last-good (docs/security.md)
        self.control_dir = '/var/lib/llmops-sglang/server/' + name

    def vars(self, fault=None, pace='0.01', **overrides):
        env = {'SGLANG_STANDIN_PACE': pace, 'SGLANG_STANDIN_EVENT_LOG': self.events}
        if fault:
            env['SGLANG_STANDIN_FAULT'] = fault
        values = role_vars(self.host, self.name, self.port, sglang_env=env, sglang_api_key=self.key,
                           sglang_lock_wait=900, sglang_wait={'timeout': 300, 'stall_timeout': 120},
                           sglang_unit_hardening={'ReadWritePaths': [EVENTS_DIR]})
        values.update(overrides)
        return values

    def deploy(self, **kwargs):
        return self.fleet.playbook(PLAYBOOK, self.vars(**kwargs))

    def start(self, **kwargs):
        """ansible-playbook in its own process group, for a test to kill."""
        command = [venv_tool('ansible-playbook'), '-i', self.fleet.inventory, str(PLAYBOOK), '-e',
                   json.dumps(self.vars(**kwargs))]
        return subprocess.Popen(command, cwd=str(REPO_ROOT), env=self.fleet.ansible_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True, stdin=subprocess.DEVNULL)

    def sh(self, command, check=True, timeout=600):
        return self.fleet.run(self.host, command, check=check, timeout=timeout)

    def event_count(self, event, phase=None):
        script = ('import json, sys\nn = 0\ntry:\n  lines = open(sys.argv[1]).read().splitlines()\nexcept OSError:\n'
                  '  lines = []\nfor line in lines:\n  try:\n    e = json.loads(line)\n  except ValueError:\n    continue\n'
                  '  n += e.get("event") == sys.argv[2] and (sys.argv[3] == "" or e.get("phase") == sys.argv[3])\nprint(n)\n')
        return int(self.sh(['python3', '-c', script, self.events, event, phase or '']).stdout.strip())

    def wait_on_host(self, what, probe, proc=None, tries=1200):
        """Poll the host (0.25 s apart) until probe() is true; fail if the playbook ends first."""
        for dummy in range(tries):
            if probe():
                return
            if proc is not None and proc.poll() is not None:
                pytest.fail('the playbook ended before %s:\n%s' % (what, proc.communicate()[0][-6000:]))
            time.sleep(0.25)
        pytest.fail('never saw %s on %s' % (what, self.host.name))

    def start_count(self):
        return self.event_count('start', 'main')

    def prepare_caches(self):
        """A JIT cache the server would have built (Triton's under HOME = the state directory)."""
        self.sh('install -d %s/.triton/cache && echo kernel > %s/.triton/cache/marker.so' % (self.state_dir, self.state_dir))

    def first_deploy(self):
        """The starting point of every fault: a verified configuration serving, with a JIT cache to keep."""
        self.sh('install -d -m 1777 %s' % EVENTS_DIR)
        self.prepare_caches()
        assert self.deploy().rc == 0

    def start_loading(self, procs, **kwargs):
        """A change started (kwargs: deploy's), returned once the new configuration is loading its weights: the moment
        a fault during the wait strikes."""
        proc = self.start(**kwargs)
        procs.append(proc)
        self.wait_on_host('the new configuration loading weights', lambda: self.start_count() >= 2
                          and self.event_count('phase', 'weights') >= 2, proc)
        return proc

    def assert_serves_verified(self):
        """The unit runs the last-known-good configuration, answers, and the state directory lost nothing."""
        show = unit_show(self.fleet, self.host, self.unit, 'ActiveState', 'SubState')
        assert show == {'ActiveState': 'active', 'SubState': 'running'}, show
        for live, saved in (('/etc/systemd/system/%s' % self.unit, 'unit'), ('/etc/sglang/%s.env' % self.name, 'env'),
                            ('/etc/sglang/%s.secrets.env' % self.name, 'secrets.env')):
            self.sh('cmp %s %s/last-good/%s' % (live, self.control_dir, saved))
        self.sh('test -s %s/last-good/pins.json' % self.control_dir)
        self.sh('grep -q "^SGLANG_API_KEY=\\"%s\\"$" /etc/sglang/%s.secrets.env' % (self.key, self.name))
        self.sh('grep -qx kernel %s/.triton/cache/marker.so' % self.state_dir)
        env = self.sh('cat /etc/sglang/%s.env' % self.name).stdout
        assert BAD_FAULT not in env, env
        assert completion(self.fleet, self.host, self.port, api_key=self.key)['choices']

    def cleanup(self):
        self.sh('systemctl stop {0}; systemctl reset-failed {0}; systemctl disable {0}; rm -rf /etc/systemd/system/{0} '
                '/etc/systemd/system/{0}.d '
                '/etc/sglang/{1}.env /etc/sglang/{1}.secrets.env {2} {2}.new {2}.old {3}; systemctl daemon-reload; '
                'for d in {2} {4}; do mountpoint -q $d && umount -l $d; rm -rf $d; done'.format(
                    shlex.quote(self.unit), shlex.quote(self.name), self.state_dir, self.events, self.control_dir),
                check=False)


def kill_controller(proc):
    """SIGKILL to ansible-playbook and everything it started on the controller (workers, ssh)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return proc.communicate()[0]


@pytest.fixture
def faulty(fleet, standin_venv):
    made = []

    def make(name, port, on=None):
        owner = on or fleet
        target = owner.hosts[-1]
        standin_venv(target, on=owner)
        make_model(owner, target)
        unit = Faulty(owner, target, name, port)
        unit.cleanup()
        made.append(unit)
        return unit

    procs = []
    yield make, procs
    for proc in procs:
        if proc.poll() is None:
            kill_controller(proc)
    for unit in made:
        unit.cleanup()


def test_controller_killed_during_the_wait_then_a_rerun_rolls_back(faulty):
    """Issue 12's first finding: the rerun used to skip the rollback because nothing changed in that run."""
    make, procs = faulty
    unit = make('sglang-f1', 30101)
    unit.first_deploy()
    # A change that crashes in CUDA graph capture, slow enough to kill the controller while it waits.
    proc = unit.start_loading(procs, fault=BAD_FAULT, pace='0.05')
    kill_controller(proc)
    # The same command again: nothing changes in this run, and the unverified configuration is still not verified.
    rerun = unit.deploy(fault=BAD_FAULT, pace='0.05')
    write = 'TASK [llmops.sglang.server : Render the unit, its environment and secrets files and the launcher shim]'
    assert 'changed' not in rerun.stdout.split(write, 1)[1].split('TASK', 1)[0]
    assert rerun.rc != 0, rerun
    assert 'Rolled back: the last known good configuration was restored and is serving again' in flat(rerun.stdout), rerun
    unit.assert_serves_verified()


def test_controller_killed_during_the_wait_for_a_good_change_then_the_rerun_keeps_it(faulty):
    make, procs = faulty
    unit = make('sglang-f2', 30102)
    unit.first_deploy()
    changed = dict(SERVER_ARGS, **{'mem-fraction-static': 0.85})
    proc = unit.start_loading(procs, pace='0.05', sglang_server_args=changed)
    kill_controller(proc)
    starts = unit.start_count()
    rerun = unit.deploy(pace='0.05', sglang_server_args=changed)
    assert rerun.rc == 0, rerun
    # It waited for the unverified configuration instead of restarting it, and saved it once it answered.
    assert unit.start_count() == starts
    unit.sh('grep -q -- "--mem-fraction-static 0.85" %s/last-good/unit' % unit.control_dir)
    unit.assert_serves_verified()


def test_controller_killed_during_the_restart(faulty):
    make, procs = faulty
    unit = make('sglang-f3', 30103)
    unit.first_deploy()
    proc = unit.start(fault=BAD_FAULT)
    procs.append(proc)
    # The old server's drain begins: systemd is restarting the unit for the new configuration.
    unit.wait_on_host('the old server stopping', lambda: unit.event_count('shutdown', 'drain') > 0, proc)
    kill_controller(proc)
    rerun = unit.deploy(fault=BAD_FAULT)
    assert rerun.rc != 0 and 'Rolled back' in flat(rerun.stdout), rerun
    unit.assert_serves_verified()


def test_a_start_job_systemd_fails_at_once_goes_to_the_waiter_and_the_rollback(faulty):
    """systemd itself fails the new configuration's start job (here a site drop-in's ExecStartPre= refuses the new
    environment; in a loaded CI run a crashing configuration did). The restart task must leave the verdict to the
    waiter rather than fail the host there, with no rollback: the waiter names the unit's failure and the rollback
    restores the last good configuration, which the same drop-in lets start."""
    make, procs = faulty
    unit = make('sglang-f10', 30110)
    unit.first_deploy()
    # "+": outside the unit's sandbox, which hides /etc/sglang from its processes (docs/sandbox.md).
    unit.sh("install -d /etc/systemd/system/{0}.d && printf '%s\\n' '[Service]' "
            "\"ExecStartPre=+/bin/sh -c '! grep -q crash@ /etc/sglang/{1}.env'\" "
            "> /etc/systemd/system/{0}.d/zz-site-check.conf".format(unit.unit, unit.name))
    starts = unit.start_count()
    # systemd retries the refused start every 2 s (no start limit): one of those retries comes while the rollback
    # restores the files, as a 15 s one did in a loaded CI run. It must not start anything (the rollback stops the
    # unit first), or the restored configuration would start twice.
    change = unit.deploy(fault=BAD_FAULT, sglang_restart_sec=2, sglang_start_limit_burst=1000)
    out = flat(change.stdout)
    assert change.rc != 0, change
    assert 'Restart the server for the configuration on disk' in out and 'Rolled back' in out, change
    assert 'control process exited' in out or 'ExecStartPre' in out or 'exit-code' in out, change
    # The new configuration never ran (its start job failed before ExecStart); the restored one started once.
    assert unit.start_count() == starts + 1
    unit.assert_serves_verified()


def test_a_rollback_whose_restored_configuration_does_not_start_either_fails_the_host_saying_so(faulty):
    """The rollback round fails too: a site drop-in's ExecStartPre= refuses every start, the new configuration's and
    then the restored one's. The restore happens (the files are the last good ones again), the rollback round's
    restart goes to the waiter as the deploy round's does, and the host fails with the deploy round's reason and
    the rollback round's own ("Rolling back failed too (REASON: ...)"), the waiter's, not a bare systemd error. Once
    the drop-in is gone, the verified configuration starts (systemd's retry, or the re-run) and serves."""
    make, procs = faulty
    unit = make('sglang-f15', 30118)
    unit.first_deploy()
    starts = unit.start_count()
    unit.sh("install -d /etc/systemd/system/{0}.d && printf '%s\\n' '[Service]' 'ExecStartPre=+/bin/false' "
            "> /etc/systemd/system/{0}.d/zz-site-check.conf".format(unit.unit))
    change = unit.deploy(fault=BAD_FAULT, sglang_restart_sec=2, sglang_start_limit_burst=1000)
    out = flat(change.stdout)
    assert change.rc != 0, change
    assert "is not ready (" in out and 'Rolling back failed too (' in out, change
    found = re.search(r"Rolling back failed too \(([a-z_]+): ", out)
    assert found and found.group(1) != 'error', out[-3000:]
    assert 'Rolled back' not in out, change
    # the restore took place: the files on disk are the last good ones, and neither configuration ever ran
    for live, saved in (('/etc/systemd/system/%s' % unit.unit, 'unit'), ('/etc/sglang/%s.env' % unit.name, 'env')):
        unit.sh('cmp %s %s/last-good/%s' % (live, unit.control_dir, saved))
    assert unit.start_count() == starts
    unit.sh('rm -rf /etc/systemd/system/%s.d && systemctl daemon-reload' % unit.unit)
    # systemd keeps retrying the restored unit (Restart=on-failure) until its start limit fails it; a re-run that
    # finds it between two attempts is judged crash-looping at once (rollout_state.start_action leaves such a unit to
    # the waiter, which counts the pending restart). With the drop-in gone its next attempt starts it; wait for that,
    # or for the start limit, then re-run.
    unit.wait_on_host('the unit out of its restart loop', lambda: unit_show(
        unit.fleet, unit.host, unit.unit, 'SubState')['SubState'] in ('running', 'failed', 'dead'))
    rerun = unit.deploy()
    assert rerun.rc == 0, rerun
    assert unit.start_count() == starts + 1
    unit.assert_serves_verified()


def test_controller_killed_during_the_pin_install(faulty):
    make, procs = faulty
    unit = make('sglang-f4', 30104)
    unit.first_deploy()
    # An upgrade of compressed-tensors, through a package source that accepts connections and never answers: pip
    # is still fetching when the controller is killed (the moment: the black hole's first connection).
    unit.sh([VENV + '/bin/pip', 'install', '-q', '--no-deps', '--force-reinstall', 'compressed-tensors==0.8.1']
            + unit.host.pip_source_args)
    hole = ('import socket, time\ns = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n'
            's.bind(("127.0.0.1", 30999)); s.listen(8)\nkeep = []\nwhile True:\n  c, _ = s.accept(); keep.append(c)\n'
            '  open("/var/tmp/sglang-f4.hole", "a").write("x")\n')
    unit.sh(['sh', '-c', 'rm -f /var/tmp/sglang-f4.hole; systemctl stop fa-hole 2>/dev/null; systemctl reset-failed fa-hole 2>/dev/null; '
             'systemd-run -q --unit fa-hole python3 -c "$1"', 'sh', hole])
    try:
        proc = unit.start(fault=BAD_FAULT, sglang_pip_extra_args=['--no-index', '--no-deps', '--retries', '0',
                                                                  '--find-links', 'http://127.0.0.1:30999/'])
        procs.append(proc)
        unit.wait_on_host('pip fetching the pins', lambda: unit.sh('test -s /var/tmp/sglang-f4.hole', check=False)
                          .returncode == 0, proc, tries=2400)
        kill_controller(proc)
    finally:
        # The black hole goes, so the orphaned pip on the host fails at once instead of racing the rerun's.
        unit.sh('systemctl stop fa-hole; rm -f /var/tmp/sglang-f4.hole; '
                'for i in $(seq 100); do pgrep -f "pip.*30999" >/dev/null || exit 0; sleep 0.2; done; exit 1', check=False)
    rerun = unit.deploy(fault=BAD_FAULT)
    assert rerun.rc != 0 and 'Rolled back' in flat(rerun.stdout), rerun
    unit.assert_serves_verified()
    assert unit.sh([VENV + '/bin/python', '-c', 'import importlib.metadata as m; print(m.version("compressed-tensors"))']
                   ).stdout.strip() == '0.18.0'


def test_a_second_concurrent_run_is_refused_naming_the_first(faulty):
    make, procs = faulty
    unit = make('sglang-f5', 30105)
    unit.first_deploy()
    changed = dict(SERVER_ARGS, **{'mem-fraction-static': 0.8})
    first = unit.start(pace='0.05', sglang_server_args=changed)
    procs.append(first)
    unit.wait_on_host('the first run waiting for its restart', lambda: unit.start_count() >= 2, first)
    second = unit.deploy(sglang_server_args=changed, sglang_lock_wait=0)
    assert second.rc != 0, second
    assert 'is being changed by another run: ansible-playbook pid %d of ' % first.pid in flat(second.stdout), second
    out = first.communicate(timeout=900)[0]
    assert first.returncode == 0, out
    # One restart: the second run touched nothing.
    assert unit.start_count() == 2
    unit.assert_serves_verified()


def test_the_control_directory_full_during_a_change(faulty):
    make, procs = faulty
    unit = make('sglang-f6', 30106)
    # Root's control directory of the instance (the last-known-good copy) on its own small filesystem.
    unit.sh('install -d -m 0700 {0} && mount -t tmpfs -o size=256k,mode=0700 tmpfs {0}'.format(unit.control_dir))
    unit.first_deploy()
    saved = unit.sh('cat %s/last-good/unit' % unit.control_dir).stdout
    unit.sh('dd if=/dev/zero of=%s/filler bs=4k 2>/dev/null; test "$(df --output=avail %s | tail -1)" -eq 0'
            % (unit.control_dir, unit.control_dir), check=False)
    changed = dict(SERVER_ARGS, **{'mem-fraction-static': 0.8})
    full = unit.deploy(sglang_server_args=changed)
    assert full.rc != 0, full
    assert 'answers with the new configuration, but saving it as last known good' in flat(full.stdout), full
    assert 'No space left on device' in flat(full.stdout), full
    # Nothing was rolled back (it serves), and the previous copy is whole.
    assert 'Rolled back' not in flat(full.stdout)
    assert unit.sh('cat %s/last-good/unit' % unit.control_dir).stdout == saved
    assert completion(unit.fleet, unit.host, unit.port, api_key=unit.key)['choices']
    # Room again: the next run waits for the unverified configuration (no restart) and saves it.
    unit.sh('rm -f %s/filler' % unit.control_dir)
    starts = unit.start_count()
    again = unit.deploy(sglang_server_args=changed)
    assert again.rc == 0, again
    assert unit.start_count() == starts
    unit.assert_serves_verified()


def test_the_config_directory_full_during_a_change(faulty):
    make, procs = faulty
    unit = make('sglang-f7', 30107)
    unit.first_deploy()
    before = unit.sh('md5sum /etc/sglang/%s.env; systemctl show -p InvocationID %s' % (unit.name, unit.unit)).stdout
    # /etc/sglang on a full filesystem (the other units' files copied in, then filled).
    unit.sh('set -e; d=$(mktemp -d); cp -a /etc/sglang/. $d/; mount -t tmpfs -o size=64k tmpfs /etc/sglang; '
            'cp -a $d/. /etc/sglang/; rm -rf $d; dd if=/dev/zero of=/etc/sglang/.filler bs=1k 2>/dev/null || true')
    try:
        full = unit.deploy(sglang_env={'SGLANG_STANDIN_PACE': '0.01', 'SGLANG_STANDIN_EVENT_LOG': unit.events,
                                       'NCCL_DEBUG': 'INFO'})
        assert full.rc != 0, full
        assert 'No space left on device' in flat(full.stdout), full
        # Refused before the restart: the old process and its files are unchanged.
        assert unit.sh('md5sum /etc/sglang/%s.env; systemctl show -p InvocationID %s' % (unit.name, unit.unit)).stdout == before
    finally:
        unit.sh('set -e; d=$(mktemp -d); rm -f /etc/sglang/.filler; cp -a /etc/sglang/. $d/; umount /etc/sglang; '
                'cp -a $d/. /etc/sglang/; rm -rf $d', check=False)
    unit.assert_serves_verified()


def test_the_ssh_connection_dropped_during_the_wait(faulty):
    make, procs = faulty
    unit = make('sglang-f8', 30108)
    unit.first_deploy()
    changed = dict(SERVER_ARGS, **{'mem-fraction-static': 0.8})
    proc = unit.start_loading(procs, pace='0.05', sglang_server_args=changed)
    # Cut every SSH session of the controller on the host (its sshd children), as a network drop would.
    unit.sh('for p in $(pgrep -f "^sshd: root@"); do [ "$p" = "$PPID" ] || kill -9 "$p"; done', check=False)
    out = proc.communicate(timeout=900)[0]
    assert proc.returncode != 0, out
    starts = unit.start_count()
    rerun = unit.deploy(pace='0.05', sglang_server_args=changed)
    assert rerun.rc == 0, rerun
    assert unit.start_count() == starts
    unit.assert_serves_verified()


def test_the_host_rebooted_during_the_load(faulty, private_fleet):
    """The unit is enabled: after the reboot it loads the new configuration by itself; the rerun waits for that
    load instead of restarting it, and saves the configuration once it answers. A host of its own: a reboot would
    break other tests' runs on a shared host."""
    make, procs = faulty
    unit = make('sglang-f9', 30109, on=private_fleet(count=1, standin=True))
    unit.first_deploy()
    changed = dict(SERVER_ARGS, **{'mem-fraction-static': 0.8})
    proc = unit.start_loading(procs, pace='0.05', sglang_server_args=changed)
    unit.fleet.tool.checked('reboot', unit.host.name)
    out = proc.communicate(timeout=900)[0]
    assert proc.returncode != 0, out
    unit.wait_on_host('the unit starting at boot', lambda: unit.start_count() >= 3)
    starts = unit.start_count()
    rerun = unit.deploy(pace='0.05', sglang_server_args=changed)
    assert rerun.rc == 0, rerun
    assert unit.start_count() == starts
    unit.sh('grep -q -- "--mem-fraction-static 0.8" %s/last-good/unit' % unit.control_dir)
    unit.assert_serves_verified()
