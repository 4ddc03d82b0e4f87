# -*- coding: utf-8 -*-
"""One SGLang server over two hosts (TP 16, Kimi K2's multi-node guide) from the server role."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from server_helpers import MODEL, make_model

PLAYBOOK = 'tests/integration/playbooks/multinode.yml'
UNIT = 'sglang-tp16'
PORT = 30090
# Not in /etc/sglang, which the unit's sandbox hides (docs/sandbox.md); the stand-in counts its starts in its state
# directory (SGLANG_STANDIN_STATE_DIR), the one place the sandbox lets it write.
FAULT_FILE = '/etc/sglang-standin/multinode-fault'
# The group listens on 0.0.0.0 (rank 1 reaches rank 0 across the network), which the role refuses without a key.
KEY = 'sk-multinode-4b1e9d7c'
MODELS = ('python3 -c "import urllib.request as u; u.urlopen(u.Request(\'http://127.0.0.1:%d/v1/models\', '
          'headers={\'Authorization\': \'Bearer %s\'}))"' % (PORT, KEY))


@pytest.fixture
def group(fleet, standin_venv, tmp_path):
    """The last two fleet hosts as inventory group `multinode` (rank 0 first), ready to run the stand-in."""
    if len(fleet.hosts) < 2:
        pytest.skip('needs two hosts')
    ranks = fleet.hosts[-2:]
    for host in ranks:
        standin_venv(host)
        make_model(fleet, host)
        fleet.run(host, 'mkdir -p /etc/sglang-standin; rm -f %s' % FAULT_FILE, check=True)
    inventory = tmp_path / 'multinode.yml'
    inventory.write_text('all:\n  children:\n    multinode:\n      hosts:\n%s' % ''.join('        %s:\n' % h.name for h in ranks))
    yield ranks, str(inventory)
    for host in ranks:
        fleet.run(host, 'systemctl stop {0}.service; systemctl reset-failed {0}.service; rm -rf /etc/systemd/system/{0}.service '
                        '/etc/sglang/{0}.env /etc/sglang/{0}.secrets.env /var/lib/sglang/{0} /var/lib/llmops-sglang/server/{0} {1}; '
                        'systemctl daemon-reload'.format(UNIT, FAULT_FILE))


def deploy(fleet, inventory, limit=None, **overrides):
    values = {
        'sglang_service_name': UNIT, 'sglang_port': PORT, 'sglang_host': '0.0.0.0', 'sglang_api_key': KEY, 'sglang_model_path': MODEL,
        'sglang_tp_size': 16, 'sglang_user': 'root', 'sglang_group': 'root',
        'sglang_server_args': {'trust-remote-code': True, 'reasoning-parser': 'kimi_k2'},
        'sglang_env': {'SGLANG_STANDIN_PACE': '0.01', 'SGLANG_STANDIN_FAULT_FILE': FAULT_FILE,
                       'SGLANG_STANDIN_STATE_DIR': '/var/lib/sglang/' + UNIT},
        'sglang_wait': {'timeout': 120, 'stall_timeout': 60},
    }
    values.update(overrides)
    return fleet.playbook(PLAYBOOK, values, extra_args=['-i', inventory] + (['--limit', limit] if limit else []))


def test_two_nodes_serve_one_model_and_a_crash_on_rank_1_fails_the_group(fleet, group):
    (rank0, rank1), inventory = group
    result = deploy(fleet, inventory)
    assert result.rc == 0, result
    argv = fleet.run(rank1, 'tr "\\0" " " < /proc/$(systemctl show -p MainPID --value %s.service)/cmdline' % UNIT,
                     check=True).stdout
    assert '--nnodes 2 --node-rank 1 --dist-init-addr %s:50000' % rank0.address in argv, argv
    # Only rank 0 serves the API; rank 1's wait probed it across the network. Rank 1 answers a dummy /health
    # (SGLang 0.5.23 utils/common.py:3624) and nothing else.
    fleet.run(rank0, MODELS, check=True)
    assert '404' in fleet.run(rank1, 'python3 -c "import urllib.request as u; u.urlopen(\'http://127.0.0.1:%d/v1/models\')"'
                                     % PORT).stderr

    # Rank 1 crashes while loading weights on the next start; its peer's collectives fail and it dies too.
    fleet.run(rank1, 'echo "crash@weights:scheduler_exception" > %s' % FAULT_FILE, check=True)
    result = deploy(fleet, inventory, sglang_state='restarted')
    assert result.rc != 0
    out = result.stdout
    assert 'fatal: [%s]' % rank1.name in out and 'fatal: [%s]' % rank0.name in out, result
    # Each rank's verdict comes from its own journal: rank 1 the scheduler's exception (whose traceback the role
    # printed), rank 0 the NCCL failure its lost peer caused. Restart=on-failure makes both crash_loop at once.
    rank0_verdict = out[out.index('fatal: [%s]' % rank0.name):].split('fatal: [')[1]
    rank1_verdict = out[out.index('fatal: [%s]' % rank1.name):].split('fatal: [')[1]
    assert 'crash_loop' in rank1_verdict and 'A SGLang process (Scheduler; Scheduler is one TP rank) raised' in rank1_verdict, result
    assert 'crash_loop' in rank0_verdict and 'remote process exited' in rank0_verdict, result
    assert 'Scheduler hit an exception' in out, result


def stop_timed_out(fleet, host, since):
    """systemd's own words when a stop waited out TimeoutStopSec, in the unit's journal since `since` (epoch s)."""
    return fleet.run(host, "journalctl -u %s.service --since @%s -o cat | grep -E \"State 'stop-sigterm' timed out|"
                           "Failed with result 'timeout'|Killing process .* with signal SIGKILL\"" % (UNIT, since)).stdout


def test_restart_and_stop_go_rank_0_first_and_never_wait_out_the_stop_timeout(fleet, group):
    """SGLang 0.5.23: after the load a rank >= 1 ignores SIGTERM and waits for rank 0's ShutdownReq
    (entrypoints/engine.py:1262-1273). Restarting or stopping it alone would hang until TimeoutStopSec."""
    (rank0, rank1), inventory = group
    timeouts = {'sglang_stop_timeout': 60}
    assert deploy(fleet, inventory, **timeouts).rc == 0
    show = 'systemctl show -p InvocationID -p ActiveState -p Result -p TimeoutStopUSec %s.service' % UNIT
    assert 'TimeoutStopUSec=30s' in fleet.run(rank1, show, check=True).stdout, 'rank 1 has the short backstop'
    before = fleet.run(rank0, show, check=True).stdout
    since = {h.name: fleet.run(h, 'date +%s', check=True).stdout.strip() for h in (rank0, rank1)}

    # A restart asked of rank 1 alone restarts the group, rank 0 first.
    result = deploy(fleet, inventory, limit=rank1.name, sglang_state='restarted', **timeouts)
    assert result.rc == 0, result
    for host in (rank0, rank1):
        assert stop_timed_out(fleet, host, since[host.name]) == '', 'the stop of %s waited out its timeout' % host.name
    after = fleet.run(rank0, show, check=True).stdout
    assert after != before and 'ActiveState=active' in after, 'rank 0 restarted and runs: %s' % after
    # The group serves again (rank 1's wait already proved it; ask once more from rank 0 itself).
    fleet.run(rank0, MODELS, check=True)

    # The whole group stops, rank 0 first; rank 1 ends by itself on the ShutdownReq.
    result = deploy(fleet, inventory, sglang_state='stopped', **timeouts)
    assert result.rc == 0, result
    for host in (rank0, rank1):
        state = fleet.run(host, show, check=True).stdout
        assert 'ActiveState=inactive' in state and 'Result=success' in state, (host.name, state)
        assert stop_timed_out(fleet, host, since[host.name]) == '', 'the stop of %s waited out its timeout' % host.name


def env_file(fleet, host):
    return fleet.run(host, 'cat /etc/sglang/%s.env' % UNIT, check=True).stdout


def test_a_canary_failure_on_rank_0_rolls_the_whole_group_back(fleet, group):
    """Only rank 0 serves, so only rank 0 runs the canary analysis; rank 1's wait probes rank 0 and passes. When the
    analysis fails, rank 1 must not keep the configuration as its last good one, and the group rolls back whole: a
    rank 0 restored and restarted alone would wait for a rank 1 that its own stop ended (0.5.23 entrypoints/engine.py:
    1262-1273) or that runs the configuration that failed."""
    (rank0, rank1), inventory = group
    paced = {'SGLANG_STANDIN_PACE': '0.01', 'SGLANG_STANDIN_FAULT_FILE': FAULT_FILE,
             'SGLANG_STANDIN_STATE_DIR': '/var/lib/sglang/' + UNIT, 'SGLANG_STANDIN_TOKEN_SECONDS': '0.02'}
    canary = {'sglang_canary_analysis': 'always', 'sglang_wait': {'timeout': 90, 'stall_timeout': 60},
              'sglang_canary': {'concurrency': [1], 'rounds': 3, 'max_tokens': 16, 'floors': {'tpot': 5, 'ttft': 200}}}
    # The first deploy's analysis has no baseline: it passes and records rank 0's figures.
    result = deploy(fleet, inventory, sglang_env=paced, **canary)
    assert result.rc == 0, result
    assert 'canary analysis: passed (baseline: none' in ' '.join(result.stdout.split()), result.stdout[-6000:]
    # The change: decode 2x slower. Rank 0's analysis fails against the record.
    result = deploy(fleet, inventory, sglang_env=dict(paced, SGLANG_STANDIN_FAULT='decode_slowdown=2'), **canary)
    out = ' '.join(result.stdout.split())
    assert result.rc != 0, result
    assert 'canary analysis: FAILED (baseline: recorded ' in out, result.stdout[-8000:]
    for host in (rank0, rank1):
        assert 'decode_slowdown' not in env_file(fleet, host), (host.name, result.stdout[-8000:])
        # the host's last failure (rank 0's first is the analysis' own, inside the wait's block that rescues it)
        verdict = ' '.join(result.stdout[result.stdout.rindex('fatal: [%s]' % host.name):].split('fatal: [')[1].split())
        assert '%s.service is not ready (canary_analysis)' % UNIT in verdict and 'Rolled back:' in verdict, verdict
        assert fleet.run(host, 'systemctl is-active %s' % UNIT).stdout.strip() == 'active', host.name
    # the restored group serves: rank 0 answers (its wait, and rank 1's across the network, already proved it)
    fleet.run(rank0, MODELS, check=True)


def test_a_group_whose_rank_0_host_refuses_is_not_restarted_by_its_rank_1_host(fleet, group):
    """Every host of a group runs the group's restart, reaching rank 0 by delegation. When rank 0's host refuses before
    anything changes (here its model directory lost config.json: "Nothing was changed"), rank 1's host must not restart
    the group anyway: that would stop rank 0 and start it again on its old files and its broken checkpoint, beside a
    rank 1 on the new ones (run.yml's "Refuse to restart a group whose rank 0 is not ready for it")."""
    (rank0, rank1), inventory = group
    assert deploy(fleet, inventory).rc == 0
    show = 'systemctl show -p InvocationID -p ActiveState %s.service' % UNIT
    before = dict((host.name, fleet.run(host, show, check=True).stdout) for host in (rank0, rank1))
    assert all('ActiveState=active' in state for state in before.values()), before
    fleet.run(rank0, 'mv %s/config.json %s/config.json.away' % (MODEL, MODEL), check=True)
    try:
        changed = {'SGLANG_STANDIN_PACE': '0.01', 'SGLANG_STANDIN_FAULT_FILE': FAULT_FILE,
                   'SGLANG_STANDIN_STATE_DIR': '/var/lib/sglang/' + UNIT, 'MULTINODE_CHANGE': '1'}
        result = deploy(fleet, inventory, sglang_env=changed)
    finally:
        fleet.run(rank0, 'mv %s/config.json.away %s/config.json' % (MODEL, MODEL), check=True)
    assert result.rc != 0, result
    out = ' '.join(result.stdout.split())
    # rank 0's host refused what it cannot run, and rank 1's host said why it does not restart the group
    assert 'sglang_model_path=%s: config.json is missing' % MODEL in out, result
    assert ('%s.service not restarted: its multi-node group\'s rank 0 (%s) did not get as far as its restart in this run '
            '(see its error); the group keeps running.' % (UNIT, rank0.name)) in out, result
    assert 'fatal: [%s]' % rank1.name in result.stdout, result
    # rank 1's new files are on disk (the change reached it), and neither rank was stopped or started
    assert 'MULTINODE_CHANGE' in env_file(fleet, rank1)
    assert dict((host.name, fleet.run(host, show, check=True).stdout) for host in (rank0, rank1)) == before
