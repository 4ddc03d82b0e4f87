# -*- coding: utf-8 -*-
"""playbooks/deploy_k26.yml through `ansible-runner run`, the engine of AWX and Ansible Automation Platform (issue 27).

The job runs in a private data directory laid out as AWX lays out a job's (docs/conventions.md, "Running from AWX /
ansible-runner"): project/ holds the job template's playbook (one line importing llmops.sglang.deploy_k26) and its
ansible.cfg, inventory/ the hosts and their group_vars, env/ the extra vars, the environment (the collections path,
which an execution environment has built in) and the machine credential's ssh key (env/ssh_key: ansible-runner hands
it to an ssh-agent, as AWX does; no key path in the inventory). What AWX shows of a job is its job events
(artifacts/IDENT/job_events/*.json, one file each, written as the job runs): the test watches that directory while the
job runs and stamps each event with the moment it appeared, so "while the wait is still running" is measured where
AWX would read it, not only by the event's own time.

On two hosts of the group's fleet, with an instance of its own (sglang-ru, port 30131) so that it meets no other
test's unit: one deploy that succeeds (both hosts in one batch), then a change whose canary crashes while loading its
weights (the stand-in's SGLANG_STANDIN_FAULT), which must end the job failed with the reason in its events.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from conftest import COLLECTIONS_PATH, REPO_ROOT
from server_helpers import MODEL, make_model

NAME = 'sglang-ru'
UNIT = NAME + '.service'
PORT = 30131
STATE_DIR = '/var/lib/sglang/' + NAME
CONTROL_DIR = '/var/lib/llmops-sglang/server/' + NAME
# At this pace a load takes about 16 s (weights 12 s): several of the action plugin's reads (every 5 s) and the
# waiter's journal reads fall inside it, so phase lines must come before the verdict.
PACE = '0.04'
CRASH = 'crash@weights:scheduler_exception'
JOB_TIMEOUT = 900
ANSI = re.compile(r'\x1b\[[0-9;]*m')   # AWX's job output keeps the colours: a FAILED line comes in red


def runner_command():
    """The real ansible-runner of the running Python (tests/requirements.txt); -m so that a copy installed with
    pip --target next to PYTHONPATH works too."""
    try:
        import ansible_runner  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
    except ImportError:
        pytest.fail('ansible-runner is not installed for %s (tests/requirements.txt)' % sys.executable, pytrace=False)
    return [sys.executable, '-m', 'ansible_runner']


class Job:
    """One `ansible-runner run` and its events, each with the time it appeared in job_events/."""

    def __init__(self, data_dir, ident, rc, status, seen, stdout):
        self.ident = ident
        self.rc = rc
        self.status = status
        self.stdout = stdout
        self.events = []
        artifacts = Path(data_dir) / 'artifacts' / ident
        for path in sorted((artifacts / 'job_events').glob('*.json'), key=lambda p: int(p.name.split('-', 1)[0])):
            if path.name.endswith('-partial.json'):
                continue
            event = json.loads(path.read_text())
            event.setdefault('event_data', {})   # ansible-runner's own lines (ssh-add's) have none
            event['_seen'] = seen.get(path.name)
            self.events.append(event)

    def __str__(self):
        return 'Job(%s, rc=%s, status=%s)\n%s' % (self.ident, self.rc, self.status, self.stdout[-20000:])

    def of(self, kind, task=None, host=None):
        return [e for e in self.events if e['event'] == kind
                and (task is None or e['event_data'].get('task', '') == task)
                and (host is None or e['event_data'].get('host') == host)]

    def progress(self, host):
        """(event, rest of the line) of the verbose events that are the host's progress lines."""
        found = []
        for event in self.of('verbose'):
            for line in ANSI.sub('', event.get('stdout') or '').splitlines():
                match = re.match(r'^%s  %s  (?P<rest>.+)$' % (re.escape(host), re.escape(NAME)), line.strip())
                if match:
                    found.append((event, match.group('rest')))
        return found

    def wait_result(self, host, kind):
        """The host's event of kind for the waiter's task (the role's "Wait for sglang-ru.service")."""
        found = [e for e in self.of(kind, host=host)
                 if e['event_data'].get('resolved_action', e['event_data'].get('task_action')) in
                 ('llmops.sglang.sglang_wait_ready', 'sglang_wait_ready')]
        assert len(found) == 1, (host, kind, [e['event_data'].get('task') for e in self.of(kind, host=host)], str(self))
        return found[0]


def created(event):
    """An event's own time (the callback's, in the ansible-playbook process: ISO 8601 with its UTC offset), as epoch
    seconds."""
    return datetime.fromisoformat(event['created']).timestamp()


@pytest.fixture(scope='module')
def awx_job(fleet, tmp_path_factory):
    """run(ident, extravars) -> Job: the private data directory of one job template on two hosts of the fleet."""
    hosts = fleet.hosts[:2]
    data = tmp_path_factory.mktemp('runner')
    project, inventory, env = data / 'project', data / 'inventory', data / 'env'
    for path in (project, inventory / 'group_vars', env):
        path.mkdir(parents=True)
    # The project (AWX: a source control checkout): the job template's playbook and the project's ansible.cfg.
    (project / 'deploy_k26.yml').write_text('---\n- name: Roll out Kimi K2.6\n  ansible.builtin.import_playbook: llmops.sglang.deploy_k26\n')
    (project / 'ansible.cfg').write_text('[defaults]\nforks = 25\ngathering = explicit\ninterpreter_python = auto_silent\n'
                                         'internal_poll_interval = 0.01\n'
                                         '[ssh_connection]\npipelining = True\n'
                                         'ssh_args = -o ControlMaster=auto -o ControlPersist=120s -o ServerAliveInterval=15\n')
    # The inventory (AWX: an inventory source synced into the job): the fleet's hosts without the key path, the
    # k26_servers group and the fleet's group_vars, as inventories/local has them.
    hosts_yml = yaml.safe_load(Path(fleet.inventory).read_text())
    fleet_vars = hosts_yml['all']['children']['local_fleet']['vars']
    key = fleet_vars.pop('ansible_ssh_private_key_file')
    (inventory / 'hosts.yml').write_text(yaml.safe_dump(hosts_yml))
    shutil.copy(str(REPO_ROOT / 'inventories' / 'local' / 'k26.yml'), str(inventory / 'k26.yml'))
    shutil.copy(str(REPO_ROOT / 'inventories' / 'local' / 'group_vars' / 'local_fleet.yml'), str(inventory / 'group_vars'))
    # The machine credential (AWX: its ssh key goes to an ssh-agent of the job, never to a file the playbook names).
    shutil.copy(key, str(env / 'ssh_key'))
    os.chmod(str(env / 'ssh_key'), 0o600)
    # Where the collection is: an execution environment has it installed; here the checkout (.build/collections).
    (env / 'envvars').write_text(yaml.safe_dump({'ANSIBLE_COLLECTIONS_PATH': str(COLLECTIONS_PATH),
                                                 'ANSIBLE_HOST_KEY_CHECKING': 'False'}))
    (env / 'settings').write_text(yaml.safe_dump({'job_timeout': JOB_TIMEOUT}))
    # The process's own environment: no ANSIBLE_* of the test run leaks into the job; ansible-playbook from this venv.
    process_env = dict((k, v) for k, v in os.environ.items() if not k.startswith('ANSIBLE_'))
    process_env['PATH'] = os.pathsep.join([str(Path(sys.executable).parent), process_env.get('PATH', '')])

    for host in hosts:
        cleanup(fleet, host)

    def run(ident, extravars):
        values = {'k26_hosts': ':'.join(h.name for h in hosts), 'k26_instances': [{'name': NAME, 'port': PORT}],
                  'sglang_model_path': MODEL, 'sglang_wait': {'timeout': 300, 'stall_timeout': 120}}
        values.update(extravars)
        (env / 'extravars').write_text(yaml.safe_dump(values))
        command = runner_command() + ['run', str(data), '-p', 'deploy_k26.yml', '--ident', ident]
        proc = subprocess.Popen(command, cwd=str(data), env=process_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        events_dir = data / 'artifacts' / ident / 'job_events'
        seen = {}
        deadline = time.monotonic() + JOB_TIMEOUT + 60
        try:
            while proc.poll() is None:
                now = time.time()
                if events_dir.is_dir():
                    for name in os.listdir(str(events_dir)):
                        seen.setdefault(name, now)
                if time.monotonic() > deadline:
                    pytest.fail('ansible-runner still running after %d s' % (JOB_TIMEOUT + 60), pytrace=False)
                time.sleep(0.2)
            stdout = proc.stdout.read()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
            proc.stdout.close()
        now = time.time()
        for name in os.listdir(str(events_dir)):
            seen.setdefault(name, now)
        status_file = data / 'artifacts' / ident / 'status'
        status = status_file.read_text().strip() if status_file.exists() else None
        return Job(data, ident, proc.returncode, status, seen, stdout)

    run.hosts = hosts
    yield run
    for host in hosts:
        cleanup(fleet, host)


def cleanup(fleet, host):
    """No sglang-ru unit, state or last-good left on the host (also the first time: a killed earlier run)."""
    fleet.run(host, 'systemctl stop {0}; systemctl reset-failed {0}; systemctl disable {0}; rm -rf /etc/systemd/system/{0} '
                    '/etc/systemd/system/{0}.d /etc/sglang/{1}.env /etc/sglang/{1}.secrets.env; systemctl daemon-reload; '
                    'for d in {2} {3}; do mountpoint -q $d && umount -l $d; rm -rf $d; done'.format(
                        shlex.quote(UNIT), NAME, STATE_DIR, CONTROL_DIR), check=False)


@pytest.fixture
def prepared(awx_job, fleet, standin_venv):
    for host in awx_job.hosts:
        standin_venv(host)
        if fleet.run(host, 'test -f %s/config.json' % MODEL, check=False).returncode != 0:
            make_model(fleet, host)
    return awx_job


def env_vars(**more):
    env = {'SGLANG_STANDIN_PACE': PACE, 'SGLANG_STANDIN_GPU': 'rtx_pro_6000', 'SGLANG_STANDIN_STATE_DIR': STATE_DIR}
    env.update(more)
    return {'sglang_env': env}


def report_events(job):
    """The fleet report's runner_on_ok events (after each batch, and the final one), with their table."""
    return [(e, e['event_data']['res'].get('msg', '')) for e in job.events
            if e['event'] == 'runner_on_ok' and e['event_data'].get('task', '').startswith('Fleet report')]


def test_deploy_under_ansible_runner_streams_progress_and_the_report_as_events(prepared):
    # Both hosts in one batch: the canary path is the next test's; this one needs a wait on each host.
    values = env_vars()
    values['k26_serial'] = 2
    job = prepared('deploy', values)
    assert job.rc == 0 and job.status == 'successful', job
    # The machine credential went through ansible-runner's ssh-agent (the inventory names no key).
    assert [e for e in job.of('verbose') if (e.get('stdout') or '').startswith('Identity added:')], str(job)
    for host in prepared.hosts:
        ok = job.wait_result(host.name, 'runner_on_ok')
        lines = job.progress(host.name)
        phases = [(e, rest) for e, rest in lines if not rest.startswith(('READY', 'FAILED'))]
        ready = [(e, rest) for e, rest in lines if rest.startswith('READY')]
        assert phases and len(ready) == 1, (host.name, [rest for _event, rest in lines], str(job))
        # Live: the first phase line was an event (in job_events/, where AWX reads it) seconds before the wait ended,
        # by its own time and by when it appeared.
        first = phases[0][0]
        assert created(first) < created(ok) - 3, (first, ok)
        assert first['_seen'] < ok['_seen'] - 3, (first['_seen'], ok['_seen'], first['stdout'])
        # And in order within the job's stdout (AWX's job output orders by counter).
        assert first['counter'] < ready[0][0]['counter'] < ok['counter']
    # The fleet report: a runner_on_ok event whose message is the table, each host's instance in it.
    reports = report_events(job)
    assert reports, str(job)
    final = reports[-1][1].splitlines()
    for host in prepared.hosts:
        assert [l for l in final if l.strip().startswith(host.name + ' ') and NAME in l and ' ready ' in l], final
    # The job's last event: the recap, no host failed.
    stats = job.of('playbook_on_stats')
    assert len(stats) == 1 and not stats[0]['event_data'].get('failures'), stats


def test_a_failed_canary_fails_the_job_with_its_reason_in_the_events(prepared):
    canary, other = prepared.hosts
    job = prepared('canary-crash', env_vars(SGLANG_STANDIN_FAULT=CRASH))
    assert job.rc != 0 and job.status == 'failed', job
    # The waiter's verdict is the waiter task's runner_on_failed (rescued by the role, which rolls back), and its
    # FAILED line came before it as a progress event: the stand-in's fault, named.
    failed = job.wait_result(canary.name, 'runner_on_failed')
    reason = failed['event_data']['res'].get('msg', '')
    assert 'crash-looping' in reason and 'illegal memory access' in reason, failed['event_data']['res']
    lines = [(e, rest) for e, rest in job.progress(canary.name) if rest.startswith('FAILED (crash_loop)')]
    assert len(lines) == 1 and lines[0][0]['counter'] < failed['counter'], [rest for _event, rest in job.progress(canary.name)]
    # The host fails the job at the end of its batch with that reason and the rollback's outcome.
    final = job.of('runner_on_failed', task='Fail the hosts whose rollout failed (this stops the rollout before the next batch)',
                   host=canary.name)
    assert len(final) == 1, str(job)
    assert reason in final[0]['event_data']['res']['msg'] and 'Rolled back' in final[0]['event_data']['res']['msg'], final
    stats = job.of('playbook_on_stats')[0]['event_data']
    assert stats.get('failures') == {canary.name: 1}, stats
    # The other host never reached its batch: no event of the waiter's task for it, and the report says so.
    assert not [e for e in job.events if e['event_data'].get('host') == other.name
                and e['event_data'].get('resolved_action') == 'llmops.sglang.sglang_wait_ready'], str(job)
    reports = report_events(job)
    assert reports, str(job)
    table = reports[-1][1].splitlines()
    assert [l for l in table if l.strip().startswith(canary.name + ' ') and '(rolled back)' in l], table
    assert [l for l in table if l.strip().startswith(other.name + ' ') and 'not reached' in l], table
