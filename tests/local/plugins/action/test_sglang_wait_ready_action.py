# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sglang_wait_ready action plugin: live progress lines on the controller, and pass-through where it must not
interfere (check mode, async, turned off).

The reader is tested with a connection that runs commands for real (sh -c); the plugin end to end with ad hoc
`ansible localhost -c local` runs of the real module against a real local HTTP server that turns ready after a few
seconds (no systemd here: endpoint-only waits, so the phase is "before the first start-up phase").
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ansible_collections.llmops.sglang.plugins.action import sglang_wait_ready as action
from ansible_collections.llmops.sglang.plugins.plugin_utils import progress_reader
from ansible_collections.llmops.sglang.plugins.module_utils.progress_view import ProgressPrinter
from ansible_collections.llmops.sglang.plugins.module_utils.sglang_signatures import phase_label
from ansible_collections.llmops.sglang.tests.local.plugins.servers import FakeServer

REPO_ROOT = Path(__file__).resolve().parents[4]
COLLECTIONS_PATH = REPO_ROOT / '.build' / 'collections'
READY_AFTER = progress_reader.READ_EVERY * 1.5   # seconds: longer than one read interval, so a progress line is due


class ShellConnection(object):
    """The part of a connection plugin the reader uses, running commands for real; counts calls per instance."""

    class _shell(object):  # pylint: disable=invalid-name
        quote = staticmethod(shlex.quote)

    def __init__(self):
        self.calls = 0

    def exec_command(self, cmd, in_data=None, sudoable=True):
        assert sudoable is False, 'progress reads must never use become'
        self.calls += 1
        done = subprocess.run(['sh', '-c', cmd], capture_output=True, check=False)
        return done.returncode, done.stdout, done.stderr


def wait_until(predicate, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


@pytest.fixture
def shown(monkeypatch):
    lines = []
    monkeypatch.setattr(action.display, 'display', lambda msg, *args, **kwargs: lines.append(msg))
    return lines


def write_status(path, phases, elapsed, done=False):
    last = phases[-1] if phases else None
    status = {'unit': 'sglang-k26.service', 'phase': last, 'phase_label': phase_label(last) if last else None,
              'phase_at': 0.0 if last else None, 'elapsed': elapsed, 'done': done, 'ready': done, 'restarts': 0,
              'phases': [{'name': name, 'label': phase_label(name), 'at': float(i), 'run': 0} for i, name in enumerate(phases)]}
    tmp = path.with_suffix('.tmp')
    tmp.write_text(json.dumps(status))
    tmp.rename(path)


def test_reader_prints_each_new_phase_and_nothing_after_stop(tmp_path, shown):
    path = tmp_path / 'progress.json'
    connection = ShellConnection()
    reader = progress_reader.ProgressReader(connection, str(path), ProgressPrinter('gpu-01'), every=0.05)
    reader.start()
    try:
        assert wait_until(lambda: reader.reads >= 2), 'the reader never read'
        assert shown == []  # no file yet: nothing to say, no error either
        write_status(path, ['init'], 1.0)
        assert wait_until(lambda: len(shown) == 1)
        write_status(path, ['init', 'weights'], 3.0)
        assert wait_until(lambda: len(shown) == 2)
    finally:
        reader.stop()
    assert 'distributed init' in shown[0] and 'loading weights' in shown[1]
    # the reader runs on its own copy of the connection: per-command state of the instance the module runs on
    # (ssh's become flags) is never touched from the reader's thread
    assert connection.calls == 0 and reader.connection is not connection and reader.connection.calls >= 3
    write_status(path, ['init', 'weights', 'kv_cache'], 5.0)
    time.sleep(0.3)
    assert len(shown) == 2 and not reader.is_alive()


def test_reader_survives_garbage_and_failing_reads(tmp_path, shown):
    path = tmp_path / 'progress.json'
    path.write_text('{not json')

    class Flaky(ShellConnection):
        def exec_command(self, cmd, in_data=None, sudoable=True):
            if self.calls < 2:
                self.calls += 1
                raise OSError('connection reset')
            return super(Flaky, self).exec_command(cmd, in_data, sudoable)

    reader = progress_reader.ProgressReader(Flaky(), str(path), ProgressPrinter('gpu-01'), every=0.05)
    reader.start()
    try:
        assert wait_until(lambda: reader.reads >= 2)
        write_status(path, ['weights'], 2.0)
        assert wait_until(lambda: len(shown) == 1)
    finally:
        reader.stop()
    assert 'loading weights' in shown[0]


@pytest.mark.parametrize('name,document', [('default', False), ('ansible.builtin.default', False), ('minimal', False),
                                           ('community.general.yaml', False), ('json', True), ('ansible.posix.json', True),
                                           ('ansible.posix.jsonl', True),
                                           # ansible-runner's (AWX): lines become job events of their own (verbose)
                                           ('awx_display', False)])
def test_no_lines_into_a_json_stdout(monkeypatch, name, document):
    monkeypatch.setenv('ANSIBLE_STDOUT_CALLBACK', name)
    assert progress_reader.stdout_is_a_document() is document


# ------------------------------------------------------------------ end to end, ad hoc on localhost
@pytest.fixture
def server():
    """/health answers 503 until READY_AFTER seconds after its first request, then 200."""
    with FakeServer() as srv:
        first = []

        def health(req):
            first.append(time.monotonic())
            return (200, 'ok', 0) if time.monotonic() - first[0] >= READY_AFTER else (503, 'loading', 0)

        srv.routes['/health'] = health
        yield srv


def adhoc(server, *extra, **module_args):
    args = {'url': server.url, 'probe': 'health', 'timeout': 60, 'poll_interval': 0.2}
    args.update(module_args)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS_PATH), ANSIBLE_NOCOLOR='1', ANSIBLE_FORCE_COLOR='0',
               ANSIBLE_CALLBACK_RESULT_FORMAT='json',
               ANSIBLE_LOCALHOST_WARNING='False', ANSIBLE_INVENTORY_UNPARSED_WARNING='False')
    command = [str(Path(sys.executable).parent / 'ansible'), 'localhost', '-c', 'local', '-i', 'localhost,',
               '-e', 'ansible_python_interpreter=%s' % sys.executable,
               '-m', 'llmops.sglang.sglang_wait_ready', '-a', json.dumps(args)] + list(extra)
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=str(REPO_ROOT), timeout=600,
                          stdin=subprocess.DEVNULL, check=False)
    return done


def progress_lines(stdout):
    return [line for line in stdout.splitlines() if line.startswith('localhost  ')]


def test_plain_run_prints_progress_then_ready(server):
    done = adhoc(server)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = progress_lines(done.stdout)
    assert lines, done.stdout
    assert phase_label(None) in lines[0]
    assert lines[-1].startswith('localhost  READY after ')
    # the final line comes before the callback's own result
    assert done.stdout.index(lines[-1]) < done.stdout.index('localhost | SUCCESS')


def test_failure_line_names_the_reason(server):
    server.routes['/health'] = (401, {'detail': 'bad key'}, 0)
    done = adhoc(server)
    assert done.returncode != 0
    assert progress_lines(done.stdout)[-1].startswith('localhost  FAILED (rejected) after '), done.stdout


def test_users_progress_file_is_used_and_kept(server, tmp_path):
    path = tmp_path / 'wait.json'
    done = adhoc(server, progress_file=str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(path.read_text())['ready'] is True
    assert progress_lines(done.stdout)


@pytest.mark.parametrize('extra', [['--check'], ['-B', '60', '-P', '1'], ['-e', 'sglang_wait_progress=false']],
                         ids=['check_mode', 'async', 'turned_off'])
def test_pass_through_prints_no_progress(server, extra):
    done = adhoc(server, *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    assert progress_lines(done.stdout) == []
    if extra == ['--check']:
        assert 'check mode: would wait' in done.stdout
    else:
        assert '"ready": true' in done.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason='needs root: the module hands the file over with chown')
def test_module_hands_its_file_to_the_owner_of_the_remote_tmp_dir(tmp_path):
    # become root from a login user: Ansible's remote tmp dir belongs to the login user, who reads the file without become
    from ansible_collections.llmops.sglang.plugins.module_utils.wait.wait_adapters import ProgressFile
    login_uid = 65534
    tmpdir = tmp_path / 'ansible-tmp-1'
    tmpdir.mkdir(mode=0o700)
    os.chown(str(tmpdir), login_uid, -1)
    path = tmpdir / action.PROGRESS_NAME
    ProgressFile(str(path)).write({'phase': 'weights', 'last_line': 'x'})
    info = path.stat()
    assert info.st_uid == login_uid and oct(info.st_mode & 0o777) == oct(0o600)
    # a directory of root's own (e.g. /run) keeps the file root's
    ProgressFile(str(tmp_path / 'root.json')).write({'phase': 'weights'})
    assert (tmp_path / 'root.json').stat().st_uid == 0
