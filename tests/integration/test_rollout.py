# -*- coding: utf-8 -*-
"""playbooks/deploy_k26.yml, restart.yml and status.yml on the 3-host local fleet with the SGLang stand-in."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from conftest import local_groups_inventory

UNIT = 'sglang-k26.service'
# Fast loads for tests; the GPU stand-in settings of group_vars/local_fleet.yml, which extra vars replace whole.
TEST_ENV = {'SGLANG_STANDIN_PACE': '0.02', 'SGLANG_STANDIN_GPU': 'rtx_pro_6000', 'SGLANG_STANDIN_STATE_DIR': '/var/lib/sglang/sglang-k26'}
GOOD_ARGS = {'attention-backend': 'triton', 'mem-fraction-static': 0.9, 'trust-remote-code': True,
             'tool-call-parser': 'kimi_k2', 'reasoning-parser': 'kimi_k2'}


def k26(fleet, playbook, check_rc=True, **extra_vars):
    """Run a playbook of the collection against the fleet (its hosts.yml + inventories/local's k26.yml + group_vars)."""
    extra = {'sglang_env': TEST_ENV}
    extra.update(extra_vars)
    result = fleet.playbook(playbook, extra, extra_args=['-i', local_groups_inventory()])
    if check_rc:
        assert result.rc == 0, result
    return result


def unit_state(fleet, host):
    out = fleet.run(host, 'systemctl show -p InvocationID,ActiveState %s; md5sum /etc/systemd/system/%s' % (UNIT, UNIT)).stdout
    return out


def journal(fleet, host, since_us):
    """(realtime seconds, message) of the unit's journal lines after since_us, manager lines included."""
    out = fleet.run(host, 'journalctl -u %s -o json --output-fields=MESSAGE --since @%f' % (UNIT, since_us / 1e6), check=True).stdout
    lines = []
    for raw in out.splitlines():
        record = json.loads(raw)
        lines.append((int(record['__REALTIME_TIMESTAMP']) / 1e6, record.get('MESSAGE') or ''))
    return lines


def report_lines(output, host):
    """The fleet report's lines for a host (the last report printed, when there are several)."""
    return [l.strip() for l in output.splitlines() if l.strip().startswith(host.name + ' ') and '.service' in l]


def host_clock_us(fleet, host):
    return int(fleet.run(host, 'date +%s%6N', check=True).stdout.strip())


@pytest.fixture(scope='module')
def deployed(fleet):
    """Every host prepared like the seeds' boxes, then rolled out once (all in one batch: the baseline)."""
    result = k26(fleet, 'tests/fleet/demo_prepare.yml')
    assert result.rc == 0, result
    k26(fleet, 'playbooks/deploy_k26.yml', k26_serial=len(fleet.hosts))
    yield fleet
    # Disabled too: an enabled unit claims its GPUs for the next boot, and the preflight gate refuses a later test's
    # instance on the same GPUs (module_utils/host/gpu_health.py).
    for host in fleet.hosts:
        fleet.run(host, 'systemctl disable --now %s; systemctl reset-failed %s 2>/dev/null; true' % (UNIT, UNIT))


def test_report_after_rollout_and_status(deployed):
    fleet = deployed
    status = k26(fleet, 'playbooks/status.yml')
    for host in fleet.hosts:
        line = report_lines(status.stdout, host)
        assert len(line) == 1, status
        assert 'active since' in line[0] and '0.5.23+standin / 0.18.0' in line[0] and 'on 8 GPUs' in line[0], line


def test_canary_failure_stops_the_rollout_before_other_hosts(deployed):
    fleet = deployed
    canary, others = fleet.hosts[0], fleet.hosts[1:]
    before = dict((h.name, unit_state(fleet, h)) for h in fleet.hosts)
    # A flag SGLang's parser refuses: the canary fails before its unit changes, its old server keeps serving.
    bad = dict(GOOD_ARGS, **{'enable-warp-drive': True})
    result = k26(fleet, 'playbooks/deploy_k26.yml', check_rc=False, sglang_server_args=bad)
    assert result.rc != 0
    assert 'unrecognized arguments: --enable-warp-drive' in result.stdout, result
    assert 'keeps its running configuration' in result.stdout, result
    assert unit_state(fleet, canary) == before[canary.name]
    assert_untouched(fleet, others, before, result)
    # The report names the step that refused it (the configuration's argument check), not "preflight passed".
    report = result.stdout.split('TASK [Fleet report')[-1]
    assert 'failed at "Render the unit, its environment and secrets files and the launcher shim"' in \
        report_lines(report, canary)[0], report
    # A change that only fails once started (a crash while loading): rolled back to the configuration that served.
    crash = dict(TEST_ENV, SGLANG_STANDIN_FAULT='crash@weights:scheduler_exception')
    result = k26(fleet, 'playbooks/deploy_k26.yml', check_rc=False, sglang_env=crash)
    assert result.rc != 0
    assert 'Rolled back' in result.stdout, result
    assert_untouched(fleet, others, before, result)
    # The canary serves its previous configuration again.
    assert 'ActiveState=active' in unit_state(fleet, canary)
    # The report still lists every host, the canary as failed and rolled back.
    report = result.stdout.split('TASK [Fleet report')[-1]
    assert '(rolled back)' in report_lines(report, canary)[0], report
    for host in others:
        assert [l for l in report.splitlines() if l.strip().startswith(host.name + ' ') and 'not reached' in l], report


def rollout_play(output):
    """The output of deploy_k26.yml's serialized play (its batches), without the plan pass and the final report."""
    parts = output.split('PLAY [Roll out the restarts of Kimi K2.6]')
    return ''.join(part.split('\nPLAY [')[0] for part in parts[1:])


def assert_untouched(fleet, others, before, result):
    """The other hosts were never touched: same process, same unit file, never in a batch of the rollout play (the
    plan pass before it reads every host and changes nothing: changed=0 in the recap)."""
    batches = rollout_play(result.stdout)
    recap = result.stdout.split('PLAY RECAP')[-1].splitlines()
    for host in others:
        assert unit_state(fleet, host) == before[host.name]
        assert '[%s]' % host.name not in batches and '[%s ->' % host.name not in batches, batches
        assert [l for l in recap if l.startswith(host.name + ' ') and ' changed=0 ' in l], recap


def test_rolling_restart_keeps_at_most_one_batch_down(deployed):
    fleet = deployed
    since = dict((h.name, host_clock_us(fleet, h)) for h in fleet.hosts)
    k26(fleet, 'playbooks/restart.yml')
    windows = []
    for host in fleet.hosts:
        lines = journal(fleet, host, since[host.name])
        stops = [t for t, m in lines if m.startswith('Stopping ')]
        readies = [t for t, m in lines if 'The server is fired up and ready to roll' in m]
        assert len(stops) == 1 and len(readies) == 1, lines
        windows.append((stops[0], readies[0], host.name))
    windows.sort()
    # Batches of one host: each host is back (ready) before the next one stops.
    for (_s1, ready1, name1), (stop2, _r2, name2) in zip(windows, windows[1:]):
        assert ready1 < stop2, '%s was still down when %s stopped' % (name1, name2)
