# -*- coding: utf-8 -*-
"""The rollout lock through real ansible-playbook runs on this machine (connection local): a second run is refused
naming the first, waits for it when asked, and a killed run's lock is taken over at once."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
BIN = Path(sys.executable).parent

HOLDER = """
- hosts: localhost
  gather_facts: false
  tasks:
    - llmops.sglang.sglang_host_lock: {{path: {path}, lease: 600}}
    - ansible.builtin.wait_for: {{path: {go}, timeout: 300}}
    - llmops.sglang.sglang_host_lock: {{path: {path}, state: unlocked}}
"""


def env():
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / '.build' / 'collections'), ANSIBLE_LOCALHOST_WARNING='0',
                ANSIBLE_INVENTORY_UNPARSED_WARNING='0', ANSIBLE_NOCOLOR='1',
                ANSIBLE_PYTHON_INTERPRETER=sys.executable)


def adhoc(args, timeout=600, said=False):
    """(rc, result), and with said=True what Ansible printed on stderr too: the default callback then, which prints the
    result's warnings there (the one-line callback drops them)."""
    done = subprocess.run([str(BIN / 'ansible'), 'localhost', '-c', 'local'] + ([] if said else ['-o'])
                          + ['-m', 'llmops.sglang.sglang_host_lock', '-a', json.dumps(args)], capture_output=True,
                          text=True, env=dict(env(), ANSIBLE_CALLBACK_RESULT_FORMAT='json'), timeout=timeout, check=False)
    assert ' => ' in done.stdout, done.stdout + done.stderr
    result = json.loads(done.stdout.split(' => ', 1)[1])
    return (done.returncode, result, ' '.join(done.stderr.split())) if said else (done.returncode, result)


def start_holder(tmp_path):
    book = tmp_path / 'hold.yml'
    go = tmp_path / 'go'
    lock = tmp_path / 'run' / 'rollout.lock'
    book.write_text(HOLDER.format(path=lock, go=go))
    proc = subprocess.Popen([str(BIN / 'ansible-playbook'), '-i', 'localhost,', '-c', 'local', str(book)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env(), start_new_session=True)
    # The moment the holder has the lock, read from the lock itself (a bounded poll, not a timed assertion).
    for dummy in range(6000):
        if lock.exists() and lock.read_text().strip() not in ('', '{}'):
            return proc, lock, go
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise AssertionError('the holder never took the lock:\n%s' % proc.communicate()[0])


def read(lock):
    return json.loads(lock.read_text() or '{}')


def test_second_run_is_refused_naming_the_first_then_waits_for_it(tmp_path):
    proc, lock, go = start_holder(tmp_path)
    try:
        holder = read(lock)
        assert holder['pid'] == proc.pid and holder['controller']
        rc, refused = adhoc({'path': str(lock), 'wait': 0})
        assert rc != 0 and refused['locked'] is False
        assert 'is being changed by another run: ansible-playbook pid %d of ' % proc.pid in refused['msg']
        assert ' since ' in refused['msg'] and 'lease ends' in refused['msg'], refused['msg']
        # A waiting run gets it once the holder releases it.
        waiter = subprocess.Popen([str(BIN / 'ansible'), 'localhost', '-c', 'local', '-o', '-m',
                                   'llmops.sglang.sglang_host_lock', '-a', json.dumps({'path': str(lock), 'wait': 120})],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env())
        go.touch()
        assert proc.wait(timeout=600) == 0, proc.communicate()[0]
        out = waiter.communicate(timeout=650)[0]
        assert waiter.returncode == 0, out
        assert json.loads(out.split(' => ', 1)[1])['locked'] is True
        assert read(lock)['pid'] == waiter.pid
    finally:
        go.touch()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_killed_runs_lock_is_taken_over_at_once(tmp_path):
    proc, lock, go = start_holder(tmp_path)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert read(lock)['pid'] == proc.pid
        rc, taken, said = adhoc({'path': str(lock), 'wait': 0}, said=True)
        assert rc == 0 and taken['locked'] is True, taken
        assert taken['broke_stale']['pid'] == proc.pid
        assert '[WARNING]: Took over the rollout lock of ansible-playbook pid %d on ' % proc.pid in said, said
    finally:
        go.touch()


def test_release_leaves_another_runs_lock_alone(tmp_path):
    proc, lock, go = start_holder(tmp_path)
    try:
        rc, result = adhoc({'path': str(lock), 'state': 'unlocked'})
        assert rc == 0 and result['released'] is False
        assert read(lock)['pid'] == proc.pid
    finally:
        go.touch()
        proc.wait(timeout=600)
    assert read(lock) == {}
