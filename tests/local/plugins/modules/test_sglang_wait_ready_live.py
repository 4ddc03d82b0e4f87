# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sglang_wait_ready's main() on this machine: check mode, endpoint-only waits against a real local HTTP server, and
the unit path with stand-in systemctl/journalctl executables on PATH (the option checks are unit tests:
tests/unit/plugins/modules/test_sglang_wait_ready.py).

main() runs for real and exits through AnsibleModule (so no_log masking is exercised); the JSON it
prints is the result.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat
import textwrap

import pytest

pytest.importorskip('requests')

from ansible_collections.llmops.sglang.plugins.module_utils.wait.wait_adapters import Host  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.llmops.sglang.plugins.modules import sglang_wait_ready as mod  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.llmops.sglang.tests.local.plugins.servers import free_port  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.llmops.sglang.tests.unit.plugins import fakes  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.llmops.sglang.tests.unit.plugins.fakes import chat_body  # noqa: E402  pylint: disable=wrong-import-position

SECRET = 'sk-unit-secret-5150'


def run_module(args, capsys, check_mode=False):
    return fakes.run_module(mod, args, capsys, check_mode)


# ------------------------------------------------------------------ check mode
def test_check_mode_reports_what_it_would_watch(server, capsys):
    res = run_module({'url': server.url, 'unit': 'sglang-k26.service', 'timeout': 1800, 'api_key': SECRET}, capsys, check_mode=True)
    assert res['_rc'] == 0 and res['changed'] is False
    assert res['ready'] is False and res['reason'] is None
    assert res['msg'].startswith('check mode: would wait up to 1800s for sglang-k26.service and its endpoint')
    assert res['watch']['endpoint'] == server.url + '/v1/chat/completions'
    assert server.requests == [], 'check mode sends nothing'
    assert SECRET not in res['_raw']
    for key in ('elapsed', 'hint', 'journal', 'phases', 'restarts', 'unit', 'probe', 'gpus'):
        assert key in res


# --------------------------------------------------------------- endpoint-only
def test_endpoint_only_ready_with_model_discovery(server, capsys):
    server.routes['/v1/models'] = (200, {'data': [{'id': 'kimi-k2.6'}]}, 0)
    server.routes['/v1/chat/completions'] = (200, chat_body(None, reasoning='Okay', tokens=4), 0)
    res = run_module({'url': server.url, 'timeout': 30, 'api_key': SECRET}, capsys)
    assert res['_rc'] == 0 and res['ready'] is True and res['changed'] is False
    assert res['reason'] is None and res['hint'] is None
    assert res['probe']['status'] == 200 and res['probe']['model'] == 'kimi-k2.6'
    assert res['probe']['latency'] is not None
    assert res['phases'][-1]['name'] == 'ready'
    assert isinstance(res['gpus'], list)
    chat = [r for r in server.requests if r['path'] == '/v1/chat/completions'][0]
    assert chat['json']['temperature'] == 0 and chat['json']['max_tokens'] == 4 and chat['json']['model'] == 'kimi-k2.6'
    assert chat['headers']['Authorization'] == 'Bearer ' + SECRET
    assert SECRET not in res['_raw']


def test_a_model_the_server_does_not_serve_is_caught(server, capsys):
    """Like SGLang 0.5.23: the completion answers 200 whatever the model, /v1/models lists what is served."""
    server.routes['/v1/models'] = (200, {'object': 'list', 'data': [{'id': 'kimi-k2.6', 'object': 'model'}]}, 0)
    server.routes['/v1/chat/completions'] = (200, chat_body('OK'), 0)
    res = run_module({'url': server.url, 'model': 'kimi-k2', 'timeout': 30}, capsys)
    assert res['failed'] and res['reason'] == 'rejected' and res['ready'] is False
    assert "does not serve model 'kimi-k2': GET /v1/models lists kimi-k2.6" in res['msg'], res['msg']
    assert 'kimi-k2.6' in res['hint']
    res = run_module({'url': server.url, 'model': 'kimi-k2.6', 'timeout': 30}, capsys)
    assert res['ready'] is True and res['probe']['model'] == 'kimi-k2.6'


def test_endpoint_only_waits_through_503(server, capsys):
    calls = []

    def health(req):
        calls.append(1)
        return (200, '', 0) if len(calls) >= 3 else (503, 'starting', 0)
    server.routes['/health_generate'] = health
    res = run_module({'url': server.url, 'probe': 'health_generate', 'timeout': 30, 'poll_interval': 0.1, 'max_poll_interval': 1},
                     capsys)
    assert res['ready'] is True and len(calls) == 3
    assert res['probe']['attempts'] == 3


def test_wrong_key_is_rejected_at_once_and_never_echoed(server, capsys):
    server.routes['/v1/chat/completions'] = (401, {'error': {'message': 'Invalid API Key: %s' % SECRET}}, 0)
    res = run_module({'url': server.url, 'model': 'kimi', 'api_key': SECRET, 'timeout': 60}, capsys)
    assert res['failed'] and res['reason'] == 'rejected' and res['ready'] is False
    assert 'HTTP 401' in res['msg'] and 'Invalid API Key' in res['msg']
    assert 'api_key' in res['hint']
    assert res['elapsed'] < 60
    assert SECRET not in res['_raw']


def test_zombie_answering_models_but_not_completions_is_not_ready(server, capsys):
    server.routes['/v1/models'] = (200, {'data': [{'id': 'kimi-k2.6'}]}, 0)
    server.routes['/v1/chat/completions'] = (200, chat_body(), 5)   # hangs past request_timeout
    res = run_module({'url': server.url, 'timeout': 1.5, 'request_timeout': 0.5, 'poll_interval': 0.1, 'max_poll_interval': 1},
                     capsys)
    assert res['failed'] and res['reason'] == 'timeout' and res['ready'] is False
    assert res['probe']['timeouts'] >= 1
    assert 'timed out' in res['msg']


def test_invalid_bodies_end_as_bad_response(server, capsys):
    server.routes['/v1/completions'] = (200, b'<html>maintenance</html>', 0)
    res = run_module({'url': server.url, 'probe': 'completion', 'model': 'm', 'timeout': 30, 'poll_interval': 0.05,
                      'max_poll_interval': 1}, capsys)
    assert res['reason'] == 'bad_response' and 'not JSON' in res['msg']


def test_expect_must_hold(server, capsys):
    server.routes['/v1/chat/completions'] = (200, chat_body('OK'), 0)
    res = run_module({'url': server.url, 'model': 'm', 'expect': "choices[0].message.content == 'OK'", 'timeout': 10}, capsys)
    assert res['ready'] is True


def test_refused_port_times_out(capsys):
    res = run_module({'url': 'http://127.0.0.1:%d' % free_port(), 'timeout': 1, 'poll_interval': 0.2, 'max_poll_interval': 1}, capsys)
    assert res['reason'] == 'timeout' and 'port closed' in res['msg']
    assert res['journal'] == [] and res['unit']['active_state'] is None


def test_progress_file(server, capsys, tmp_path):
    server.routes['/health'] = (200, '', 0)
    path = tmp_path / 'wait.json'
    res = run_module({'url': server.url, 'probe': 'health', 'timeout': 10, 'progress_file': str(path)}, capsys)
    assert res['ready'] is True
    status = json.loads(path.read_text())
    assert status['done'] is True and status['ready'] is True and status['phase'] == 'ready'
    assert stat.S_IMODE(os.stat(str(path)).st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ['wait.json'], 'no temp files left behind'


# ------------------------------------------------ unit path, stand-in binaries
SHOW_RUNNING = """Id=sglang-k26.service
LoadState=loaded
ActiveState=activating
SubState=start
Result=success
NRestarts=0
ExecMainStatus=0
ExecMainCode=0
ExecMainPID={pid}
MainPID={pid}
InvocationID=inv2
ExecMainStartTimestampMonotonic=0
"""
SHOW_FAILED = """Id=sglang-k26.service
LoadState=loaded
ActiveState=failed
SubState=failed
Result=signal
NRestarts=0
ExecMainStatus=9
ExecMainCode=2
ExecMainPID=0
MainPID=0
InvocationID=inv2
ExecMainStartTimestampMonotonic=0
"""


def jrec(msg, inv='inv2', cursor='s=1;i=1', manager=False):
    rec = {'__CURSOR': cursor, '__REALTIME_TIMESTAMP': '1780151760000000', '__MONOTONIC_TIMESTAMP': '1',
           'MESSAGE': msg, '_SYSTEMD_UNIT': 'init.scope' if manager else 'sglang-k26.service'}
    if manager:
        rec.update(UNIT='sglang-k26.service', INVOCATION_ID=inv, _PID='1')
    else:
        rec['_SYSTEMD_INVOCATION_ID'] = inv
    return json.dumps(rec)


OLD_RUN = [jrec('[2026-05-30 14:30:00 TP0] RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.',
                inv='inv1', cursor='s=1;i=0')]
# the lines of a Python.h crash; a tuple marks systemd's own line
CRASH_LINES = [
    "[2026-05-30 14:36:02] server_args=ServerArgs(model_path='/m', api_key='%s')" % SECRET,
    '[2026-05-30 14:36:15 TP0] Load weight begin. avail mem=177.20 GB',
    '[2026-05-30 14:39:06 TP0] Capture cuda graph begin. This can take up to several minutes.',
    '/tmp/tmpq3k1x9zd/cuda_utils.c:6:10: fatal error: Python.h: No such file or directory',
    '[2026-05-30 14:39:28 TP1] Scheduler hit an exception: Traceback (most recent call last):',
    '  File "/x/triton/runtime/build.py", line 48, in _build',
    "subprocess.CalledProcessError: Command '['/usr/bin/gcc']' returned non-zero exit status 1.",
    '[2026-05-30 14:39:28] Received sigquit from a child process. It usually means the child failed.',
    ('sglang-k26.service: Main process exited, code=killed, status=9/KILL', True),
]
CRASH = [jrec(text[0] if isinstance(text, tuple) else text, manager=isinstance(text, tuple), cursor='s=1;i=%d' % (i + 1))
         for i, text in enumerate(CRASH_LINES)]


@pytest.fixture
def fake_systemd(tmp_path, monkeypatch):
    """systemctl/journalctl stand-ins on PATH: `show` answers from show.N files in turn (the last one
    repeats); journalctl -n prints `backfill`, --after-cursor prints and empties `new`."""
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    state = tmp_path / 'state'
    state.mkdir()
    (bindir / 'systemctl').write_text(textwrap.dedent('''\
        #!/bin/sh
        d=%s
        n=$(cat $d/count 2>/dev/null || echo 0)
        echo $((n + 1)) > $d/count
        [ -f $d/show-fails ] && { echo 'Failed to connect to bus: No such file or directory' >&2; exit 1; }
        f=$d/show.$n
        [ -f "$f" ] || f=$(ls $d/show.* | sort -t. -k2 -n | tail -1)
        cat "$f"
        ''' % state))
    (bindir / 'journalctl').write_text(textwrap.dedent('''\
        #!/bin/sh
        d=%s
        echo "$@" >> $d/journal-args
        case "$*" in
          *--after-cursor*) out=$(cat $d/new 2>/dev/null); : > $d/new ;;
          *) out=$(cat $d/backfill 2>/dev/null) ;;
        esac
        # systemd >= 255 style: exit 1 when nothing matched
        [ -z "$out" ] && [ -f $d/empty-rc-1 ] && exit 1
        [ -n "$out" ] && echo "$out"
        exit 0
        ''' % state))
    for name in ('systemctl', 'journalctl'):
        (bindir / name).chmod(0o755)
    monkeypatch.setenv('PATH', '%s:%s' % (bindir, os.environ.get('PATH', '')))
    return state


def test_unit_failed_before_the_wait_explains_itself(fake_systemd, capsys):
    (fake_systemd / 'show.0').write_text(SHOW_FAILED)
    (fake_systemd / 'backfill').write_text('\n'.join(OLD_RUN + CRASH) + '\n')
    res = run_module({'unit': 'sglang-k26.service', 'url': 'http://127.0.0.1:%d' % free_port(), 'timeout': 30}, capsys)
    assert res['failed'] and res['reason'] == 'unit_failed' and res['ready'] is False
    assert res['msg'].startswith('sglang-k26.service had already failed when the wait began')
    assert res['msg'].endswith(': fatal error: Python.h: No such file or directory')
    assert 'python3-dev' in res['hint']
    assert "subprocess.CalledProcessError: Command '['/usr/bin/gcc']' returned non-zero exit status 1." in res['journal']
    assert not any('14:30:00' in line for line in res['journal']), 'lines of an older run are not this start'
    assert res['journal'][-1] == 'sglang-k26.service: Main process exited, code=killed, status=9/KILL'
    assert res['journal_cmd'].startswith('journalctl -u sglang-k26.service --no-pager --since @')
    assert res['unit']['exec_main_code'] == 'killed' and res['unit']['invocation_id'] == 'inv2'
    assert SECRET not in res['_raw']


def test_unit_crash_during_the_wait(fake_systemd, capsys):
    (fake_systemd / 'show.0').write_text(SHOW_RUNNING.format(pid=os.getpid()))
    (fake_systemd / 'show.2').write_text(SHOW_FAILED)
    (fake_systemd / 'backfill').write_text('\n'.join(CRASH[:3]) + '\n')
    (fake_systemd / 'new').write_text('\n'.join(CRASH[3:]) + '\n')
    res = run_module({'unit': 'sglang-k26.service', 'url': 'http://127.0.0.1:%d' % free_port(), 'timeout': 60,
                      'max_poll_interval': 1}, capsys)
    assert res['reason'] == 'unit_failed'
    assert res['msg'].startswith("sglang-k26.service failed during 'capturing CUDA graphs' after ")
    assert [p['name'] for p in res['phases']] == ['weights', 'cuda_graph']
    args = (fake_systemd / 'journal-args').read_text().splitlines()
    assert '-n 400' in args[0] and '--all' in args[0]
    # incremental reads continue from the last line seen: after the backfill (3 lines), then after the crash lines
    assert '--after-cursor=s=1;i=3' in args[1]
    assert all('--after-cursor=s=1;i=%d' % len(CRASH) in a for a in args[2:])


def test_unit_that_is_not_running(fake_systemd, capsys):
    (fake_systemd / 'show.0').write_text(SHOW_FAILED.replace('ActiveState=failed', 'ActiveState=inactive')
                                         .replace('Result=signal', 'Result=success').replace('ExecMainCode=2', 'ExecMainCode=0')
                                         .replace('InvocationID=inv2', 'InvocationID='))
    res = run_module({'unit': 'sglang-k26.service', 'url': 'http://127.0.0.1:%d' % free_port(), 'timeout': 60}, capsys)
    assert res['reason'] == 'unit_inactive' and 'is not running' in res['msg']
    assert res['elapsed'] < 30


# ------------------------------------------------------ who holds the port
def bare_host():
    host = Host.__new__(Host)
    host._foreign_inodes = None   # pylint: disable=protected-access
    host._holder = (None, None)   # pylint: disable=protected-access
    return host


def test_port_owner_recognises_the_units_listener(server):
    from ansible_collections.llmops.sglang.plugins.module_utils.host.systemd_props import unit_props
    mine = unit_props({'MainPID': str(os.getpid()), 'ControlGroup': ''})
    assert bare_host().port_owner(server.port, mine) is True


def test_port_owner_spots_a_foreign_listener(server, tmp_path):
    from ansible_collections.llmops.sglang.plugins.module_utils.host.systemd_props import unit_props
    # Another live process of this user, whose descriptors are readable and hold no socket of the port: pytest's parent.
    host = bare_host()
    theirs = unit_props({'MainPID': str(os.getppid()), 'ControlGroup': ''})
    assert host.port_owner(server.port, theirs) is False
    assert host.port_owner(server.port, theirs) is False   # remembered, not rescanned
    assert host.port_owner(free_port(), theirs) is None     # nothing listens: cannot tell


def test_a_busy_http_port_is_named_as_the_cause_at_once(fake_systemd, server, capsys):
    """SGLang 0.5.23 after uvicorn's [Errno 98]: the unit stays active for 2 minutes (its warmup polls /model_info
    120 x 1 s) while another process answers on the port. The waiter ends as soon as both are seen."""
    # The unit's main process: another live process of this user that holds no socket of the port (pytest's parent).
    (fake_systemd / 'show.0').write_text(SHOW_RUNNING.format(pid=os.getppid()).replace('activating', 'active')
                                         .replace('SubState=start', 'SubState=running'))
    (fake_systemd / 'backfill').write_text('\n'.join([
        jrec('[2026-05-30 14:36:15 TP0] Load weight begin. avail mem=177.20 GB', cursor='s=1;i=1'),
        jrec("ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', %d): address already in use"
             % server.port, cursor='s=1;i=2'),
    ]) + '\n')
    res = run_module({'unit': 'sglang-k26.service', 'url': server.url, 'timeout': 100, 'max_poll_interval': 1}, capsys)
    assert res['failed'] and res['reason'] == 'unit_failed', res['msg']
    assert 'could not bind its port' in res['msg'] and 'address already in use' in res['msg'], res['msg']
    # The holder is this test process, which serves the port.
    assert 'held by pid %d' % os.getpid() in res['msg'], res['msg']
    assert 'port %d' % server.port in res['hint'] and 'held by pid %d' % os.getpid() in res['hint'], res['hint']
    assert res['elapsed'] < 100
    assert not [r for r in server.requests if r['path'] != '/'], 'nothing was asked of the foreign server'


def test_stall_with_a_journalctl_that_exits_1_when_nothing_is_new(fake_systemd, capsys):
    (fake_systemd / 'empty-rc-1').write_text('')
    (fake_systemd / 'show.0').write_text(SHOW_RUNNING.format(pid=os.getpid()))
    (fake_systemd / 'backfill').write_text('\n'.join(CRASH[:2]) + '\n')
    res = run_module({'unit': 'sglang-k26.service', 'url': 'http://127.0.0.1:%d' % free_port(), 'timeout': 30,
                      'stall_timeout': 1.5, 'max_poll_interval': 0.5}, capsys)
    assert res['reason'] == 'stalled', res['msg']
    assert "stalled during 'loading weights'" in res['msg']
    assert 'warnings' not in res


def test_systemctl_show_failing_three_times_in_a_row_ends_the_wait(fake_systemd, capsys, tmp_path):
    (fake_systemd / 'show-fails').write_text('')
    progress = tmp_path / 'wait.json'
    res = run_module({'unit': 'sglang-k26.service', 'url': 'http://127.0.0.1:%d' % free_port(), 'timeout': 60,
                      'progress_file': str(progress)}, capsys)
    assert res['failed'] and res['ready'] is False and res['reason'] is None
    assert res['msg'] == 'systemctl show sglang-k26.service failed: Failed to connect to bus: No such file or directory'
    assert (fake_systemd / 'count').read_text().strip() == '3'
    assert res['elapsed'] < 30
    status = json.loads(progress.read_text())
    assert status['done'] is True and status['reason'] is None and status['ready'] is False
