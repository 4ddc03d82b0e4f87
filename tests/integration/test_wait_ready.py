# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmops.sglang.sglang_wait_ready on real systemd hosts, each case with a real unit running the SGLang stand-in:
ready, crash during the load, crash loop, a tolerated restart, the start limit, the seeds' two signatures (Python.h,
nvfp4) and their fixes, an old server holding the port, stall, timeout, wrong API key, a zombie server, check mode,
a unit that is not running, and async/poll.

Hosts: gpu-02 for the cases that leave the host as they found it, gpu-03 for the two that change it (Python headers,
compressed-tensors); gpu-01 is left to other tests. Units are named wr-*, ports 31000-31999.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import shlex
import tempfile

import pytest

from server_helpers import VENV, make_model

PLAYBOOK = 'tests/integration/playbooks/wait_ready.yml'
MODEL = '/models/wr-k26'
PACE = '0.01'  # the default 390 s start-up in about 4 s
PHASE_ORDER = ['init', 'weights', 'kv_cache', 'cuda_graph', 'http_up', 'warmup', 'ready']
LAUNCH_SERVER = 'python -m sglang.launch_server'
RIGHT_KEY = 'wr-right-5ecret-k3y'
WRONG_KEY = 'wr-wrong-5ecret-k3y'

UNIT_TEMPLATE = """[Unit]
Description=sglang_wait_ready integration test {name}
{unit_section}

[Service]
Type=simple
KillMode=mixed
TimeoutStopSec=10
Restart={restart}
RestartSec={restart_sec}
{environment}
ExecStart={venv}/bin/{entry} --model-path {model} --tp 8 --port {port} --host 127.0.0.1 {args}
"""


class Wait(object):
    """The module's result as the play saved it, and the AnsibleResult of the play for assertion messages."""

    def __init__(self, run, result):
        self.run = run
        self.result = result

    def __getitem__(self, key):
        return self.result[key]

    def get(self, key, default=None):
        return self.result.get(key, default)

    def phase_names(self):
        return [phase['name'] for phase in self.result.get('phases', [])]

    def journal_text(self):
        return '\n'.join(self.result.get('journal') or [])

    def __str__(self):
        shown = dict((k, v) for k, v in self.result.items() if k != 'invocation')
        return '%s\n--- module result\n%s' % (self.run, json.dumps(shown, indent=1, sort_keys=True))

    __repr__ = __str__  # pytest shows the repr in assertion messages


ADDED_PACKAGES = ('python3-requests', 'python3-jmespath', 'python3-dev')
# what purging python3-dev must take too, or Python.h stays (the fleet's image has none of them)
HEADER_PACKAGES = ('python3-dev', 'python3.11-dev', 'libpython3.11-dev')


@pytest.fixture(scope='module')
def host_changes(fleet):
    """host name -> the packages this file added to it (absent before). At the end they go again, with the fake
    model, so the hosts stay as the fleet made them: without Python headers, for the tests that need that."""
    changes = {}
    yield changes
    for name, added in changes.items():
        purge = list(added) + (list(HEADER_PACKAGES) if 'python3-dev' in added else [])
        fleet.run(name, 'rm -rf %s; DEBIAN_FRONTEND=noninteractive apt-get purge -y -q %s >/dev/null; '
                        'DEBIAN_FRONTEND=noninteractive apt-get autoremove -y -q >/dev/null'
                  % (MODEL, ' '.join(purge)) if purge else 'rm -rf %s' % MODEL)


def prepare(fleet, standin_venv, host_changes, index, headers):  # pylint: disable=redefined-outer-name
    """The stand-in venv (compressed-tensors 0.18.0), the module's libraries, a fake K2.6 and, with headers, the Python
    headers the CUDA graph phase needs (gpu-03's tests install and remove them themselves)."""
    host = fleet.hosts[index]
    standin_venv(host)
    if host.name not in host_changes:
        absent = fleet.run(host, ['dpkg-query', '-W', '-f', '${Package} ${db:Status-Status}\\n'] + list(ADDED_PACKAGES)).stdout
        installed = set(line.split()[0] for line in absent.splitlines() if line.endswith(' installed'))
        host_changes[host.name] = [name for name in ADDED_PACKAGES if name not in installed]
        fleet.run(host, 'apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends %s >/dev/null'
                  % ' '.join(ADDED_PACKAGES if headers else ADDED_PACKAGES[:2]), check=True)
        make_model(fleet, host, MODEL)
    return host


@pytest.fixture
def gpu02(fleet, standin_venv, host_changes):  # pylint: disable=redefined-outer-name
    return prepare(fleet, standin_venv, host_changes, 1, headers=True)


@pytest.fixture
def gpu03(fleet, standin_venv, host_changes):  # pylint: disable=redefined-outer-name
    return prepare(fleet, standin_venv, host_changes, 2, headers=False)


@pytest.fixture
def make_unit(fleet):
    """make_unit(host, name, port, fault=None, pace=PACE, restart='no', restart_sec=1, env=None, args='', unit_section='',
    model=MODEL, entry=LAUNCH_SERVER) writes /etc/systemd/system/NAME.service (not started) and removes it, its state
    and its processes after the test. entry: the venv's program and its first words (`sglang serve`)."""
    made = []

    def make(host, name, port, fault=None, pace=PACE, restart='no', restart_sec=1, env=None, args='', unit_section='',
             model=MODEL, entry=None):
        assert name.startswith('wr-') and 31000 <= port <= 31999
        made.append((host, name))
        variables = {'SGLANG_STANDIN_PACE': pace, 'SGLANG_STANDIN_EVENT_LOG': '/run/%s.events' % name}
        if fault:
            variables['SGLANG_STANDIN_FAULT'] = fault
        variables.update(env or {})
        # quoted: a fault spec may hold spaces
        environment = '\n'.join('Environment="%s=%s"' % item for item in sorted(variables.items()))
        text = UNIT_TEMPLATE.format(name=name, unit_section=unit_section, restart=restart, restart_sec=restart_sec, environment=environment,
                                    venv=VENV, model=model, port=port, args=args, entry=entry or LAUNCH_SERVER)
        fleet.run(host, 'rm -f /run/{0}.events /run/{0}.count && cat > /etc/systemd/system/{0}.service && '
                        'systemctl daemon-reload'.format(name), input=text, check=True)
        return name + '.service'

    yield make
    for host, name in made:
        fleet.run(host, 'systemctl stop {0}.service; systemctl reset-failed {0}.service; '
                        'rm -f /etc/systemd/system/{0}.service /run/{0}.events /run/{0}.count; '
                        'systemctl daemon-reload'.format(shlex.quote(name)))


def wait(fleet, host, unit, port, start=True, check=False, **options):
    """Restart UNIT (unless start=False) and run the module on it; options are the module's (wr_ prefixed in the play).
    The play saves the registered result as JSON on the controller: read, not scraped from the output."""
    handle, result_file = tempfile.mkstemp(prefix='wr-result-', suffix='.json')
    os.close(handle)
    try:
        extra = {'wr_host': host.name, 'wr_unit': unit, 'wr_url': 'http://127.0.0.1:%d' % port, 'wr_start': start,
                 'wr_result_file': result_file}
        extra.update(('wr_' + key, value) for key, value in options.items())
        run = fleet.playbook(PLAYBOOK, extra, check=check, timeout=600)
        with open(result_file) as saved:
            text = saved.read()
    finally:
        os.unlink(result_file)
    try:
        result = json.loads(text)
    except ValueError:
        raise AssertionError('the play saved no result (%r):\n%s' % (text[:200], run))
    assert result, 'the wait did not run:\n%s' % run
    # the play fails exactly when the wait does
    assert (run.rc == 0) == (not result.get('failed')), run
    return Wait(run, result)


def events(fleet, host, name):
    """The stand-in's JSON events of the unit (SGLANG_STANDIN_EVENT_LOG)."""
    out = fleet.run(host, 'cat /run/%s.events 2>/dev/null' % name).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def http_status(fleet, host, port, path):
    """The status of GET PATH from the host itself (an error string when there is no answer)."""
    script = ('import sys, urllib.request, urllib.error\n'
              'try:\n    print(urllib.request.urlopen(sys.argv[1], timeout=5).status)\n'
              'except urllib.error.HTTPError as e:\n    print(e.code)\n'
              'except Exception as e:\n    print(type(e).__name__)\n')
    return fleet.run(host, ['python3', '-c', script, 'http://127.0.0.1:%d%s' % (port, path)], check=True).stdout.strip()


def assert_start_phases(outcome, run=0):
    """Every phase of RUN in start-up order, ready last. Only when the ready line itself was not read yet (ready came
    from the probe, as the RETURN docs allow) may http_up and warmup, printed in the same millisecond, be missing."""
    phases = [phase for phase in outcome['phases'] if phase['run'] == run]
    names = [phase['name'] for phase in phases]
    assert phases and names[-1] == 'ready', outcome
    if phases[-1]['source'] == 'journal':
        assert names == PHASE_ORDER, outcome
    else:
        assert names[:4] == PHASE_ORDER[:4] and set(names[4:-1]) <= set(['http_up', 'warmup']), outcome
        assert [PHASE_ORDER.index(name) for name in names] == sorted(PHASE_ORDER.index(name) for name in names), outcome
    times = [phase['at'] for phase in phases]
    assert times == sorted(times), outcome


def assert_failed_with(outcome, reason):
    assert outcome.get('failed') is True, outcome
    assert outcome['ready'] is False, outcome
    assert outcome['reason'] == reason, outcome


def test_ready_with_every_phase_in_order(fleet, gpu02, make_unit):
    unit = make_unit(gpu02, 'wr-ready', 31001)
    outcome = wait(fleet, gpu02, unit, 31001, timeout=120, stall_timeout=60)
    assert outcome['ready'] is True and not outcome.get('failed'), outcome
    assert outcome['changed'] is False and outcome['reason'] is None, outcome
    assert_start_phases(outcome)
    assert all(phase['run'] == 0 for phase in outcome['phases']), outcome
    assert outcome['probe']['status'] == 200 and outcome['probe']['model'] == MODEL, outcome
    assert 0 < outcome['elapsed'] < 120, outcome
    assert outcome['restarts'] == 0 and outcome['unit']['active_state'] == 'active', outcome
    # The stand-in really reached its ready line, and the server now serves.
    assert 'ready' in [e['event'] for e in events(fleet, gpu02, 'wr-ready')]
    assert http_status(fleet, gpu02, 31001, '/health_generate') == '200'


def test_crash_during_weight_loading_fails_at_once_with_the_traceback(fleet, gpu02, make_unit):
    # pace 0.02: the OOM comes about 6 s into the start, well after the wait began
    unit = make_unit(gpu02, 'wr-crash', 31002, fault='crash@weights:oom', pace='0.02')
    outcome = wait(fleet, gpu02, unit, 31002, timeout=300)
    assert_failed_with(outcome, 'unit_failed')
    journal = outcome.journal_text()
    assert 'Traceback (most recent call last):' in journal, outcome
    assert 'torch.OutOfMemoryError: CUDA out of memory' in journal, outcome
    assert 'mem-fraction-static' in outcome['hint'], outcome
    assert 'loading weights' in outcome['msg'], outcome
    assert outcome.phase_names()[-1] == 'weights', outcome
    assert outcome['unit']['active_state'] == 'failed' and outcome['unit']['result'] == 'signal', outcome
    assert outcome['unit']['exec_main_status'] == 9, outcome
    crashes = [e for e in events(fleet, gpu02, 'wr-crash') if e['event'] == 'crash']
    assert crashes and crashes[0]['phase'] == 'weights' and crashes[0]['cause'] == 'oom', crashes
    # Ended by the failure, not by the deadline.
    assert outcome['elapsed'] < 60, outcome


def test_crash_loop_fails_at_the_first_restart(fleet, gpu02, make_unit):
    unit = make_unit(gpu02, 'wr-loop', 31003, fault='crash@weights', restart='on-failure', restart_sec=1)
    outcome = wait(fleet, gpu02, unit, 31003, timeout=120, max_restarts=0)
    assert_failed_with(outcome, 'crash_loop')
    assert outcome['restarts'] == 1, outcome
    journal = outcome.journal_text()
    assert 'Scheduler hit an exception' in journal and 'Traceback (most recent call last):' in journal, outcome
    assert 'illegal memory access' in journal, outcome
    assert outcome['elapsed'] < 60, outcome
    # systemd would go on restarting it: the wait ended at the first restart (scheduled or done), not at a later one
    assert outcome['unit']['n_restarts'] <= 1, outcome


def test_tolerated_restart_then_ready(fleet, gpu02, make_unit):
    """crash_times=1: the first start crashes, the restart serves; max_restarts=1 tolerates it."""
    unit = make_unit(gpu02, 'wr-retry', 31004, fault='crash@weights crash_times=1', restart='on-failure',
                     restart_sec=1, env={'SGLANG_STANDIN_COUNTER_FILE': '/run/wr-retry.count'})
    outcome = wait(fleet, gpu02, unit, 31004, timeout=120, max_restarts=1)
    assert outcome['ready'] is True, outcome
    assert outcome['restarts'] == 1, outcome
    runs = [phase['run'] for phase in outcome['phases'] if phase['name'] == 'weights']
    assert runs == [0, 1], outcome
    assert_start_phases(outcome, run=1)


def test_missing_python_headers_then_installed(fleet, gpu03, make_unit):
    fleet.run(gpu03, 'DEBIAN_FRONTEND=noninteractive apt-get purge -y -q %s >/dev/null; '
                     'test ! -e /usr/include/python3.11/Python.h' % ' '.join(HEADER_PACKAGES), check=True)
    unit = make_unit(gpu03, 'wr-pyh', 31005)
    broken = wait(fleet, gpu03, unit, 31005, timeout=300)
    assert_failed_with(broken, 'unit_failed')
    assert 'fatal error: Python.h: No such file or directory' in broken.journal_text(), broken
    assert 'python3-dev' in broken['hint'] and re.search(r'python3\.(X|11)-dev', broken['hint']), broken
    assert 'capturing CUDA graphs' in broken['msg'] and 'Python.h' in broken['msg'], broken
    assert broken.phase_names()[-1] == 'cuda_graph', broken

    fleet.run(gpu03, 'DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-dev >/dev/null', check=True)
    fixed = wait(fleet, gpu03, unit, 31005, timeout=120)
    assert fixed['ready'] is True, fixed
    assert_start_phases(fixed)


def test_old_compressed_tensors_then_upgraded(fleet, gpu03, standin_venv, make_unit):
    fleet.run(gpu03, 'DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-dev >/dev/null', check=True)
    standin_venv(gpu03, compressed_tensors='0.8.1')
    # the check comes right after 'Load weight begin': a 3 s init makes the wait see the crash, not its aftermath
    unit = make_unit(gpu03, 'wr-nvfp4', 31006, env={'SGLANG_STANDIN_PHASE_SECONDS': 'init=300'})
    broken = wait(fleet, gpu03, unit, 31006, timeout=300)
    assert_failed_with(broken, 'unit_failed')
    assert "'nvfp4-pack-quantized' is not a valid CompressionFormat" in broken.journal_text(), broken
    assert 'compressed-tensors' in broken['hint'] and '0.10.0' in broken['hint'], broken
    assert 'loading weights' in broken['msg'], broken
    assert broken.phase_names()[-1] == 'weights', broken

    standin_venv(gpu03, compressed_tensors='0.18.0')
    fixed = wait(fleet, gpu03, unit, 31006, timeout=120)
    assert fixed['ready'] is True, fixed
    assert_start_phases(fixed)


def test_start_limit(fleet, gpu02, make_unit):
    unit = make_unit(gpu02, 'wr-limit', 31014, fault='crash@init', restart='on-failure', restart_sec='0.2',
                     unit_section='StartLimitBurst=2\nStartLimitIntervalSec=120')
    outcome = wait(fleet, gpu02, unit, 31014, timeout=120, max_restarts=5)
    assert_failed_with(outcome, 'start_limit')
    # systemd 252 keeps Result=signal after an automatic restart hits the limit: the journal line tells
    # 1 or 2: the first crash may come before the wait begins (restarts count from the start of the wait)
    assert outcome['unit']['active_state'] == 'failed' and outcome['restarts'] in (1, 2), outcome
    assert 'Start request repeated too quickly' in outcome.journal_text(), outcome
    assert 'reset-failed' in outcome['msg'], outcome
    assert 'illegal memory access' in outcome['msg'] + outcome.journal_text(), outcome
    assert outcome['elapsed'] < 60, outcome


def test_an_old_server_on_the_port_is_not_mistaken_for_the_unit(fleet, gpu02, make_unit):
    old = make_unit(gpu02, 'wr-old', 31015)
    assert wait(fleet, gpu02, old, 31015, timeout=120)['ready'] is True
    # The new unit never gets to bind; the old server answers every probe on the port meanwhile.
    new = make_unit(gpu02, 'wr-new', 31015, fault='hang@init')
    outcome = wait(fleet, gpu02, new, 31015, timeout=8, stall_timeout=0)
    assert_failed_with(outcome, 'timeout')
    assert '31015' in outcome['msg'] + outcome['hint'], outcome
    assert outcome['probe']['status'] != 200, outcome
    # Without the hang it reaches the bind and fails there, and says so. (Its warmup polls /model_info on the port,
    # which the old server answers: SGLang 0.5.23 then warms up against it and exits 1 soon after.)
    clash = make_unit(gpu02, 'wr-clash', 31015)
    outcome = wait(fleet, gpu02, clash, 31015, timeout=120)
    assert_failed_with(outcome, 'unit_failed')
    assert 'address already in use' in outcome['msg'] + outcome.journal_text(), outcome
    assert 'port' in outcome['hint'].lower(), outcome


def test_a_busy_http_port_is_named_at_once(fleet, gpu02, make_unit):
    """Another program (no SGLang) holds the port: SGLang 0.5.23 logs uvicorn's [Errno 98], then lives on for about
    2 minutes (its warmup polls /model_info 120 x 1 s, http_server.py:449-468, :2370) before it SIGKILLs itself.
    The waiter does not wait for that: it names the port and the process that holds it."""
    holder_unit = 'wr-holder-%d.service' % os.getpid()
    fleet.run(gpu02, 'systemd-run --unit %s python3 -m http.server 31017 --bind 127.0.0.1' % holder_unit, check=True)
    try:
        fleet.run(gpu02, 'for i in $(seq 50); do ss -ltn | grep -q "127.0.0.1:31017 " && exit 0; sleep 0.2; done; exit 1',
                  check=True)
        holder = fleet.run(gpu02, 'systemctl show -p MainPID --value %s' % holder_unit, check=True).stdout.strip()
        # The stand-in compresses the warmup's 120 x 1 s like everything else (by its pace): at 0.1 it gives up after
        # 12 s, a window that the waiter's verdict does not need to race.
        unit = make_unit(gpu02, 'wr-busy', 31017, pace='0.1')
        outcome = wait(fleet, gpu02, unit, 31017, timeout=300)
        assert_failed_with(outcome, 'unit_failed')
        assert 'could not bind its port' in outcome['msg'] and 'address already in use' in outcome['msg'], outcome
        assert 'held by pid %s: /usr/bin/python3 -m http.server 31017' % holder in outcome['msg'], outcome
        assert 'port 31017' in outcome['hint'] and 'held by pid %s' % holder in outcome['hint'], outcome
        assert outcome['unit']['active_state'] == 'active', 'the verdict came before SGLang gave up: %s' % outcome
    finally:
        fleet.run(gpu02, 'systemctl stop %s; systemctl reset-failed %s' % (holder_unit, holder_unit))


def test_hang_in_cuda_graph_capture_is_a_stall(fleet, gpu02, make_unit):
    unit = make_unit(gpu02, 'wr-stall', 31007, fault='hang@cuda_graph')
    outcome = wait(fleet, gpu02, unit, 31007, timeout=120, stall_timeout=5)
    assert_failed_with(outcome, 'stalled')
    assert 'CUDA graph' in outcome['msg'], outcome
    assert outcome.phase_names()[-1] == 'cuda_graph', outcome
    assert outcome['hint'] and 'stall_timeout' in outcome['hint'], outcome
    # A stall is only declared after stall_timeout without news.
    assert outcome['elapsed'] >= 5, outcome
    assert outcome['unit']['active_state'] == 'active', outcome
    assert 'hang' in [e['event'] for e in events(fleet, gpu02, 'wr-stall')]


def test_deadline_names_the_phase_it_was_in(fleet, gpu02, make_unit):
    # pace 0.05: distributed init takes 1 s, the weights 15 s: the deadline of 5 s falls in the load
    unit = make_unit(gpu02, 'wr-timeout', 31008, pace='0.05')
    outcome = wait(fleet, gpu02, unit, 31008, timeout=5, stall_timeout=0)
    assert_failed_with(outcome, 'timeout')
    assert outcome.phase_names() and outcome.phase_names()[-1] in ('init', 'weights'), outcome
    label = {'init': 'distributed init', 'weights': 'loading weights'}[outcome.phase_names()[-1]]
    assert label in outcome['msg'], outcome
    assert outcome['elapsed'] >= 5, outcome
    assert outcome['unit']['active_state'] == 'active', outcome


def test_wrong_api_key_is_rejected_and_no_key_is_shown(fleet, gpu02, make_unit):
    unit = make_unit(gpu02, 'wr-key', 31009, args='--api-key ' + RIGHT_KEY)
    outcome = wait(fleet, gpu02, unit, 31009, timeout=120, api_key=WRONG_KEY)
    assert_failed_with(outcome, 'rejected')
    assert outcome['probe']['status'] == 401, outcome
    assert 'api_key' in (outcome['hint'] or '') + outcome['msg'], outcome
    for key in (RIGHT_KEY, WRONG_KEY):
        assert key not in outcome.run.stdout and key not in outcome.run.stderr, 'a key leaked:\n%s' % outcome
    # Nothing on the host either from the module. (SGLang 0.5.23 itself logs the --api-key it was given in
    # server_args=...: the server role's launcher shim keeps it out, see test_server_role's secrets test.)
    leaked = fleet.run(gpu02, 'journalctl -u %s --no-pager | grep -c -e %s' % (unit, WRONG_KEY)).stdout
    assert leaked.strip() == '0', leaked


def test_a_model_name_the_server_does_not_serve_is_caught(fleet, gpu02, make_unit):
    # SGLang 0.5.23 answers a chat completion for any model name with 200; GET /v1/models lists the served name.
    unit = make_unit(gpu02, 'wr-model', 31016, args='--served-model-name kimi-k2.6')
    outcome = wait(fleet, gpu02, unit, 31016, timeout=120, model='kimi-k2')
    assert_failed_with(outcome, 'rejected')
    assert "does not serve model 'kimi-k2': GET /v1/models lists kimi-k2.6" in outcome['msg'], outcome
    assert 'kimi-k2.6' in outcome['hint'], outcome
    assert wait(fleet, gpu02, unit, 31016, start=False, timeout=60, model='kimi-k2.6')['ready'] is True


def test_zombie_answering_models_but_not_completions_is_not_ready(fleet, gpu02, make_unit):
    unit = make_unit(gpu02, 'wr-zombie', 31010, fault='zombie')
    outcome = wait(fleet, gpu02, unit, 31010, timeout=9, request_timeout=2, stall_timeout=0)
    assert_failed_with(outcome, 'timeout')
    assert outcome['probe']['status'] == 'timeout' and outcome['probe']['timeouts'] >= 1, outcome
    assert "last phase 'ready'" in outcome['msg'] and 'timed out' in outcome['msg'], outcome
    # not "still starting": the hint points at the dead scheduler
    assert 'scheduler' in outcome['hint'], outcome
    # The server did print its ready line, and still answers /v1/models: only a real request tells.
    assert 'ready' in outcome.phase_names(), outcome
    assert http_status(fleet, gpu02, 31010, '/v1/models') == '200'
    assert [e for e in events(fleet, gpu02, 'wr-zombie') if e.get('cause') == 'zombie']


def test_check_mode_reports_and_does_not_wait(fleet, gpu02, make_unit):
    unit = make_unit(gpu02, 'wr-check', 31011, fault='hang@init')
    fleet.run(gpu02, ['systemctl', 'start', unit], check=True)
    outcome = wait(fleet, gpu02, unit, 31011, start=False, check=True, timeout=600, stall_timeout=0)
    assert outcome.get('failed') is not True, outcome
    assert outcome['changed'] is False and outcome['reason'] is None, outcome
    assert outcome['msg'].startswith('check mode: would wait up to 600s for %s' % unit), outcome
    assert outcome['watch']['unit'] == unit and outcome['watch']['url'] == 'http://127.0.0.1:31011', outcome
    assert outcome['unit']['active_state'] == 'active', outcome
    assert outcome['elapsed'] < 60, outcome  # a real wait on this hung unit would take 600 s


@pytest.mark.parametrize('name, write', [('wr-never', True), ('wr-nosuch', False)])
def test_unit_that_is_not_running_is_inactive_at_once(fleet, gpu02, make_unit, name, write):
    unit = make_unit(gpu02, name, 31012) if write else name + '.service'
    outcome = wait(fleet, gpu02, unit, 31012, start=False, timeout=300)
    assert_failed_with(outcome, 'unit_inactive')
    assert unit in outcome['msg'], outcome
    assert outcome['elapsed'] < 60, outcome


def test_async_poll_wait(fleet, gpu02, make_unit):
    unit = make_unit(gpu02, 'wr-async', 31013)
    outcome = wait(fleet, gpu02, unit, 31013, timeout=120, **{'async': 200, 'poll': 1})
    assert outcome['ready'] is True, outcome
    assert outcome.get('ansible_job_id') and outcome.get('finished') == 1, outcome
    assert_start_phases(outcome)
