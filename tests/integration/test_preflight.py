# -*- coding: utf-8 -*-
"""The preflight gates on a real systemd host: every GPU and checkpoint fault refused before any change.

One host serves instance pf-a (the SGLang stand-in, TP 8 on 8 stand-in H200s). Each test injects one fault for real
(the stand-in nvidia-smi's fault file, real files in the model directory, a real foreign process), then asks the
role for a configuration change that would restart pf-a, and checks that the role refused it naming the cause while
pf-a kept running: same InvocationID, same unit file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import shlex

import pytest

PLAYBOOK = 'tests/integration/playbooks/preflight.yml'
MODEL = '/models/pf-k26'
VENV = '/opt/sglang/venv'
FAULT_FILE = '/etc/sglang-standin/nvidia-smi.faults'
SMI = '/usr/local/bin/nvidia-smi'
UNIT = 'pf-a.service'
SHARDS = ['model-%05d-of-00005.safetensors' % i for i in range(1, 6)]


def env_for(name):
    return {'SGLANG_STANDIN_PACE': '0.02', 'SGLANG_STANDIN_GPU': 'h200', 'SGLANG_STANDIN_STATE_DIR': '/var/lib/sglang/' + name}


BASE = {'sglang_service_name': 'pf-a', 'sglang_port': 30011, 'sglang_tp_size': 8, 'sglang_model_path': MODEL,
        'sglang_venv': VENV, 'sglang_env': env_for('pf-a'), 'sglang_server_args': {'mem-fraction-static': 0.85},
        'sglang_preflight_growth_interval': 0.5, 'sglang_wait': {'timeout': 300, 'stall_timeout': 120}}
# What every refused run asks for: a change that restarts pf-a if the gates let it through.
CHANGE = {'sglang_server_args': {'mem-fraction-static': 0.8}}


def apply(fleet, host, tmp_path, **overrides):
    """Run the role (or the module, with pf_module=...) on host; returns (AnsibleResult, saved outcome)."""
    result_file = tmp_path / 'outcome.json'
    if result_file.exists():
        result_file.unlink()
    extra = dict(BASE, pf_host=host.name, pf_result_file=str(result_file))
    extra.update(overrides)
    result = fleet.playbook(PLAYBOOK, extra, timeout=900)
    assert result_file.exists(), result
    return result, json.loads(result_file.read_text())


def unit_state(fleet, host, unit=UNIT):
    out = fleet.run(host, 'systemctl show -p InvocationID,ActiveState %s; md5sum /etc/systemd/system/%s' % (unit, unit),
                    check=True).stdout
    assert 'ActiveState=active' in out, out
    return out


@pytest.fixture(scope='module')
def served(fleet):
    """pf-a deployed and serving on the first host, with the stand-in nvidia-smi installed as nvidia-smi."""
    host = fleet.hosts[0]
    pip = shlex.join(['%s/bin/pip' % VENV, 'install', '-q', '--disable-pip-version-check', '--no-cache-dir', '--no-deps']
                     + host.pip_source_args)
    script = """set -e
[ -x {venv}/bin/python ] || python3 -m venv {venv}
{pip} --force-reinstall sglang compressed-tensors==0.18.0
test -f {model}/config.json || {venv}/bin/python -m sglang_standin.make_model {model} --arch kimi_k2 --quant nvfp4-pack-quantized --shards 5 >/dev/null
mkdir -p /root/pf-backup && cp -a {model}/. /root/pf-backup/
cat > {smi} <<'SH'
#!/bin/sh
# Test fleet only: the SGLang stand-in's nvidia-smi, with pf-a's GPU memory.
SGLANG_STANDIN_STATE_DIR=/var/lib/sglang/pf-a SGLANG_STANDIN_GPU=h200 exec {venv}/bin/sglang-standin-nvidia-smi "$@"
SH
chmod 0755 {smi}
mkdir -p /etc/sglang-standin && : > {faults}
""".format(model=MODEL, venv=VENV, smi=SMI, faults=FAULT_FILE, pip=pip)
    yield host, script
    fleet.run(host, 'systemctl stop pf-a pf-b pf-foreign 2>/dev/null; systemctl reset-failed 2>/dev/null; '
                    'rm -f {smi} {faults} /etc/systemd/system/pf-a.service /etc/systemd/system/pf-b.service '
                    '/etc/sglang/pf-a.env /etc/sglang/pf-b.env; rm -rf {model} /root/pf-backup /var/lib/sglang/pf-a '
                    '/var/lib/sglang/pf-b /var/lib/prometheus/node-exporter/pf-a.prom '
                    '/var/lib/prometheus/node-exporter/.pf-a.prom.staged; systemctl daemon-reload; true'.format(smi=SMI, faults=FAULT_FILE, model=MODEL))


@pytest.fixture(scope='module')
def deployed(fleet, served, tmp_path_factory):
    host, script = served
    fleet.run(host, script, check=True)
    result, outcome = apply(fleet, host, tmp_path_factory.mktemp('deploy'))
    assert outcome['failure'] is None, result
    # the healthy box passed both gates and the report says so
    assert outcome['preflight'][UNIT]['gpu']['status'] == 'ok', outcome
    assert outcome['preflight'][UNIT]['checkpoint']['status'] == 'ok', outcome
    assert any('8 GPUs ok; checkpoint ok (5 shards)' in line for line in outcome['report']), outcome['report']
    return host


@pytest.fixture
def restore(fleet, deployed):
    """Undo every fault after the test, also when it fails: no fault file, the model as it was, no foreign process."""
    yield deployed
    fleet.run(deployed, 'set -e; : > {faults}; systemctl stop pf-foreign 2>/dev/null || true; '
                        'rm -rf {model} && mkdir -p {model} && cp -a /root/pf-backup/. {model}/; '
                        'rm -rf $(echo {venv}/lib/python3*/site-packages)/torch; '
                        'test -e {smi} || mv {smi}.away {smi}'.format(faults=FAULT_FILE, model=MODEL, venv=VENV, smi=SMI),
              check=True)


def refused(fleet, host, tmp_path, inject, expected, check, **overrides):
    """Inject a fault, ask for a change, and check it was refused naming the cause with pf-a untouched."""
    before = unit_state(fleet, host)
    fleet.run(host, inject, check=True)
    extra = dict(CHANGE)
    extra.update(overrides)
    result, outcome = apply(fleet, host, tmp_path, **extra)
    assert outcome['failure'] and 'refused before any change' in outcome['failure'], result
    for text in expected:
        assert text in outcome['failure'], (text, outcome['failure'])
    assert unit_state(fleet, host) == before, 'pf-a was restarted or its unit file changed'
    summary = outcome['preflight'][overrides.get('sglang_service_name', 'pf-a') + '.service']
    gates = [g for g in ('gpu', 'checkpoint') if any(f.startswith(check) for f in summary[g]['failed'])]
    assert gates, summary
    assert any('refused by preflight' in line or 'FAILED: ' + check in line for line in outcome['report']), outcome['report']
    return outcome


GPU_FAULTS = [
    ('ecc@3=2', 'ecc_uncorrected', ['GPU 3 (GPU-', 'has 2 uncorrectable volatile ECC error(s)', 'nvidia-smi -r -i 3']),
    ('remap_pending@5', 'row_remap_pending', ['GPU 5 (GPU-', 'has a row remapping pending']),
    ('remap_failure@2', 'row_remap_failure', ['GPU 2 (GPU-', 'had a row remapping failure']),
    ('retired_pending@1', 'retired_pages_pending', ['GPU 1 (GPU-', 'pending retirement on the next reboot']),
    ('persistence_off@0', 'persistence_mode', ['GPU 0 (GPU-', 'persistence mode off', 'nvidia-persistenced']),
    ('gpus=4', 'gpu_count', ['pf-a.service needs 8 GPUs on this node', 'nvidia-smi shows 4']),
]


@pytest.mark.parametrize('fault,check,expected', GPU_FAULTS, ids=[f[1] for f in GPU_FAULTS])
def test_gpu_fault_is_refused_before_any_change(fleet, restore, tmp_path, fault, check, expected):
    refused(fleet, restore, tmp_path, 'echo %s > %s' % (shlex.quote(fault), FAULT_FILE), expected, check)


def test_foreign_compute_process_is_named_with_its_pid(fleet, restore, tmp_path):
    host = restore
    fleet.run(host, 'systemd-run --unit pf-foreign --quiet sleep 600', check=True)
    pid = fleet.run(host, 'systemctl show -p MainPID --value pf-foreign', check=True).stdout.strip()
    refused(fleet, host, tmp_path, 'echo process@4=%s:30000 > %s' % (pid, FAULT_FILE),
            ['GPU 4: sleep (PID %s) holds 30000 MiB and is not part of pf-a.service' % pid, 'kill %s' % pid],
            'foreign_process')


def test_own_processes_on_the_gpus_are_not_foreign(fleet, restore):
    """pf-a's schedulers hold memory on all 8 GPUs (nvidia-smi lists them): they are in its cgroup, so not refused."""
    host = restore
    apps = fleet.run(host, 'nvidia-smi --query-compute-apps=pid,gpu_uuid --format=csv,noheader', check=True).stdout
    assert len(apps.splitlines()) == 8, apps


def test_driver_too_old_for_the_venvs_torch(fleet, restore, tmp_path):
    host = restore
    # torch's own version.py layout (torch 2.x): the gate reads it without importing torch
    fleet.run(host, 'd=$(echo %s/lib/python3*/site-packages)/torch && mkdir -p $d && '
                    'printf "__version__ = \'2.14.1+cu129\'\\ncuda: Optional[str] = \'12.9\'\\n" > $d/version.py' % VENV,
              check=True)
    refused(fleet, host, tmp_path, 'echo cuda=12.2 driver=535.104.05 > %s' % FAULT_FILE,
            ['the driver 535.104.05 supports CUDA up to 12.2, but the venv\'s torch was built for CUDA 12.9'],
            'cuda_driver')


def test_second_instance_on_the_same_gpus_is_refused(fleet, restore, tmp_path):
    host = restore
    before = unit_state(fleet, host)
    result, outcome = apply(fleet, host, tmp_path, sglang_service_name='pf-b', sglang_port=30012,
                            sglang_env=env_for('pf-b'))
    assert outcome['failure'], result
    assert 'GPUs 0,1,2,3,4,5,6,7 are claimed by pf-b.service and by pf-a.service' in outcome['failure'], outcome
    assert 'CUDA_VISIBLE_DEVICES' in outcome['failure']
    # one row for pf-b, refused by the gates, the gates' findings in its health column
    rows = [line for line in outcome['report'] if ' pf-b.service ' in line]
    assert len(rows) == 1 and 'refused by preflight' in rows[0] and 'FAILED' in rows[0], outcome['report']
    assert unit_state(fleet, host) == before
    assert fleet.run(host, 'test ! -e /etc/systemd/system/pf-b.service && test ! -e /etc/sglang/pf-b.env').returncode == 0


def test_a_port_another_process_holds_and_an_incomplete_model_are_refused_together(fleet, restore, tmp_path):
    """From the role's one observation, before any change (rollout_plan.host_refusals), each naming its variable: a
    real listener on pf-b's port, and a real model directory with a shard gone (its index names five)."""
    host = restore
    before = unit_state(fleet, host)
    partial = '/models/pf-partial'
    fleet.run(host, 'rm -rf {p} && cp -a {m} {p} && rm {p}/{s}'.format(p=partial, m=MODEL, s=SHARDS[2]), check=True)
    try:
        fleet.run(host, 'systemd-run --unit pf-foreign --quiet python3 -m http.server 30019 --bind 127.0.0.1 && '
                        'for i in $(seq 100); do python3 -c "import socket; socket.create_connection((\'127.0.0.1\', '
                        '30019), 1)" 2>/dev/null && exit 0; sleep 0.1; done; exit 1', check=True)
        result, outcome = apply(fleet, host, tmp_path, sglang_service_name='pf-b', sglang_port=30019,
                                sglang_env=env_for('pf-b'), sglang_model_path=partial)
        assert outcome['failure'], result
        assert ('sglang_model_path=%s: 1 of 5 shards named in model.safetensors.index.json are missing (first: %s)'
                % (partial, SHARDS[2])) in outcome['failure'], outcome
        assert ('sglang_port=30019 is already in use by another process while pf-b.service is inactive; pick another '
                'port or stop that process.') in outcome['failure'], outcome
        # the fleet report says the role refused it, not that the host was not reached
        assert [line for line in outcome['report'] if ' pf-b.service ' in line and 'refused before any change' in line], \
            outcome['report']
        assert unit_state(fleet, host) == before
        assert fleet.run(host, 'test ! -e /etc/systemd/system/pf-b.service && test ! -e /etc/sglang/pf-b.env').returncode == 0
    finally:
        fleet.run(host, 'systemctl stop pf-foreign 2>/dev/null; rm -rf %s' % partial)


def test_waiver_passes_and_shows(fleet, restore, tmp_path):
    host = restore
    before = unit_state(fleet, host)
    fleet.run(host, 'echo persistence_off@0 > %s' % FAULT_FILE, check=True)
    result, outcome = apply(fleet, host, tmp_path, sglang_preflight_waive=['persistence_mode'])
    assert outcome['failure'] is None, result
    assert 'waived: persistence_mode' in result.stdout, result
    assert outcome['preflight'][UNIT]['gpu']['waived'] == ['persistence_mode']
    assert any('8 GPUs ok, waived: persistence_mode' in line for line in outcome['report']), outcome['report']
    assert unit_state(fleet, host) == before  # same configuration: nothing to restart


def test_host_without_nvidia_smi_is_not_judged_and_says_so(fleet, restore, tmp_path):
    host = restore
    fleet.run(host, 'mv %s %s.away' % (SMI, SMI), check=True)
    result, outcome = apply(fleet, host, tmp_path)
    assert outcome['failure'] is None, result
    assert 'GPUs not judged: nvidia-smi is not installed' in result.stdout, result
    assert any('GPUs not judged (no nvidia-smi)' in line for line in outcome['report']), outcome['report']


CHECKPOINT_FAULTS = [
    ('truncated', 'truncate -s -100 {m}/model-00002-of-00005.safetensors', 'shard_invalid',
     ['model-00002-of-00005.safetensors is not a whole safetensors file', 'truncated: 100 bytes missing',
      'Error while deserializing header: incomplete metadata, file not fully covered']),
    ('aria2', 'touch {m}/model-00003-of-00005.safetensors.aria2', 'download_in_progress',
     ['a download is still in progress: model-00003-of-00005.safetensors.aria2']),
    ('incomplete', 'mkdir -p {m}/.cache/huggingface/download && '
                   'touch {m}/.cache/huggingface/download/Xb2c.incomplete',
     'download_in_progress', ['.cache/huggingface/download/Xb2c.incomplete']),
    ('lock', 'mkdir -p {m}/.cache/huggingface/download && touch {m}/.cache/huggingface/download/Xb2c.lock',
     'download_in_progress', ['.cache/huggingface/download/Xb2c.lock']),
]


@pytest.mark.parametrize('name,inject,check,expected', CHECKPOINT_FAULTS, ids=[f[0] for f in CHECKPOINT_FAULTS])
def test_checkpoint_fault_is_refused_before_any_change(fleet, restore, tmp_path, name, inject, check, expected):
    refused(fleet, restore, tmp_path, inject.format(m=MODEL), expected, check)


def test_growing_shard_is_refused(fleet, restore, tmp_path):
    host = restore
    # a writer appending to a shard for as long as the run takes, like a copy or a download in progress
    fleet.run(host, 'systemd-run --unit pf-grow --quiet sh -c "while :; do printf x >> %s/model-00005-of-00005.safetensors; '
                    'sleep 0.1; done"' % MODEL, check=True)
    try:
        refused(fleet, host, tmp_path, 'true', ['model-00005-of-00005.safetensors is still being written'],
                'shard_growing')
    finally:
        fleet.run(host, 'systemctl stop pf-grow; systemctl reset-failed pf-grow 2>/dev/null; true')


def manifest(fleet, host):
    out = fleet.run(host, 'cd %s && for f in *; do echo "$f $(stat -c %%s "$f") $(sha256sum "$f" | cut -d" " -f1)"; done'
                    % MODEL, check=True).stdout
    return dict((name, {'size': int(size), 'sha256': digest})
                for name, size, digest in (line.split() for line in out.splitlines()))


def test_manifest_wrong_size_and_wrong_hash(fleet, restore, tmp_path):
    host = restore
    good = manifest(fleet, host)
    wrong_size = json.loads(json.dumps(good))
    wrong_size[SHARDS[0]]['size'] += 1
    refused(fleet, host, tmp_path, 'true', ['%s is %d bytes, sglang_model_manifest says %d'
                                            % (SHARDS[0], good[SHARDS[0]]['size'], good[SHARDS[0]]['size'] + 1)],
            'manifest_size', sglang_model_manifest=wrong_size)
    # same size, other content: only the hash can tell
    fleet.run(host, "printf 'Z' | dd of=%s/%s bs=1 seek=%d conv=notrunc status=none"
              % (MODEL, SHARDS[3], good[SHARDS[3]]['size'] - 1), check=True)  # a byte of tensor data
    refused(fleet, host, tmp_path, 'true', ['%s has sha256 ' % SHARDS[3], 'sglang_model_manifest says %s'
                                            % good[SHARDS[3]]['sha256']],
            'manifest_hash', sglang_model_manifest=good)


def test_verified_digests_are_remembered_by_size_and_mtime(fleet, restore, tmp_path):
    host = restore
    good = manifest(fleet, host)
    cache = '/var/lib/sglang/pf-a/.preflight/checkpoint-verified.json'
    fleet.run(host, 'rm -f %s' % cache, check=True)
    args = {'unit': UNIT, 'checks': ['checkpoint'], 'model_path': MODEL, 'manifest': good, 'cache_path': cache,
            'growth_interval': 0}
    first = apply(fleet, host, tmp_path, pf_module=args)[1]['module']['checkpoint']
    assert (first['status'], first['hashed'], first['cached'], first['cache']) == ('ok', len(good), 0, 'written'), first
    mode = fleet.run(host, 'stat -c "%%U %%a" %s $(dirname %s)' % (cache, cache), check=True).stdout.split()
    assert mode == ['root', '600', 'root', '700']
    second = apply(fleet, host, tmp_path, pf_module=args)[1]['module']['checkpoint']
    assert (second['status'], second['hashed'], second['cached']) == ('ok', 0, len(good)), second
    fleet.run(host, 'touch %s/%s' % (MODEL, SHARDS[1]), check=True)
    third = apply(fleet, host, tmp_path, pf_module=args)[1]['module']['checkpoint']
    assert (third['hashed'], third['cached']) == (1, len(good) - 1), third
