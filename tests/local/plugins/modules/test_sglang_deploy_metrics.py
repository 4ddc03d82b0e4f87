# -*- coding: utf-8 -*-
"""sglang_deploy_metrics run for real through ansible on this machine (root): the marker, the verdict that drops it
and a re-run that changes nothing, read back from the kept copy only; a symlink of the other user's tree refused with
a warning (not a failure) and the kept copy still written; the removal, which follows no such symlink either."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
ANSIBLE = Path(sys.executable).parent / 'ansible'
UNIT = 'lt-dm.service'
OUTCOME = {'ready': True, 'reason': None, 'elapsed': 3.5, 'restarts': 0, 'unit': {'invocation_id': 'abc123'},
           'phases': [{'name': 'init', 'at': 0.5, 'run': 0}, {'name': 'ready', 'at': 3.0, 'run': 0}],
           'packages': {'sglang': '0.5.23'}, 'rolled_back': False, 'changed_config': True}

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='writes root-owned files and judges ownership')


def run(args, check=False):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / '.build' / 'collections'), ANSIBLE_LOCALHOST_WARNING='0',
               ANSIBLE_INVENTORY_UNPARSED_WARNING='0', ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_NOCOLOR='1',
               ANSIBLE_CALLBACK_RESULT_FORMAT='json')
    argv = [str(ANSIBLE), 'localhost', '-c', 'local', '-m', 'llmops.sglang.sglang_deploy_metrics', '-a',
            json.dumps(dict(args, unit=UNIT))]
    done = subprocess.run(argv + (['--check'] if check else []), capture_output=True, text=True, env=env, timeout=300,
                          check=False, cwd=str(ROOT))
    assert done.returncode == 0, done.stdout + done.stderr
    # the default callback (the one-line one drops a module's warnings), which prints them on stderr
    return json.loads(done.stdout.split(' => ', 1)[1]), ' '.join(done.stderr.split())


def test_marker_then_verdict_then_nothing_then_removed(trees):
    other, control = trees
    where = {'dir': str(other / 'node-exporter'), 'keep_dir': str(control)}
    published, kept = other / 'node-exporter' / 'lt-dm.prom', control / 'lt-dm.prom'
    marker = dict(where, state='deploying', wait_timeout=600, stop_timeout=60)
    assert run(marker, check=True)[0]['changed'] is True and not published.exists()
    result, _said = run(marker)
    assert result['changed'] is True and result['written'] is True and result['path'] == str(published)
    assert 'sglang_deploy_in_progress{unit="lt-dm.service",reason="restart"} 1' in published.read_text()
    assert published.read_text() == kept.read_text() and os.stat(str(kept)).st_mode & 0o7777 == 0o600
    verdict = dict(where, outcome=OUTCOME, digests={'unit': 'u', 'env': 'e'})
    assert run(verdict)[0]['changed'] is True
    text = published.read_text()
    assert 'in_progress' not in text and 'sglang_deploy_ready{unit="lt-dm.service"} 1' in text
    # read back from the kept copy alone: what the published file says is not believed
    published.write_text('written by someone else\n')
    assert run(verdict)[0]['changed'] is True and published.read_text() == text
    assert run(verdict)[0]['changed'] is False and run(verdict, check=True)[0]['changed'] is False
    gone = dict(where, state='absent')
    assert run(gone, check=True)[0]['changed'] is True and published.exists()
    assert run(gone)[0]['changed'] is True and not published.exists() and not kept.exists()
    assert run(gone)[0]['changed'] is False
    # a unit whose directories are gone (never deployed here, or removed by hand): nothing to remove, no warning
    result, said = run(dict(gone, dir=str(other / 'none'), keep_dir=str(control / 'none')))
    assert result['changed'] is False and result['written'] is True and 'WARNING' not in said, said


def test_a_symlink_the_other_user_placed_is_a_warning_and_followed_by_nothing(trees, tmp_path):
    other, control = trees
    where = {'dir': str(other / 'node-exporter'), 'keep_dir': str(control)}
    target = tmp_path / 'target'
    target.mkdir()
    (target / 'lt-dm.prom').write_text('root\'s own file, not the metrics\n')
    os.symlink(str(target), str(other / 'node-exporter'))
    os.lchown(str(other / 'node-exporter'), other.stat().st_uid, other.stat().st_gid)  # the other user's link
    result, said = run(dict(where, state='deploying', wait_timeout=600))
    assert result['written'] is False and result['changed'] is True, result  # the kept copy was written
    assert ('[WARNING]: the deployment metrics of lt-dm.service were not written to %s: %s/lt-dm.prom not written: '
            % (where['dir'], where['dir'])) in said and 'symlink' in said, said
    assert (target / 'lt-dm.prom').read_text() == 'root\'s own file, not the metrics\n'
    assert 'in_progress' in (control / 'lt-dm.prom').read_text()
    result, said = run(dict(where, state='absent'))
    assert result['written'] is False, result
    assert ('[WARNING]: the deployment metrics of lt-dm.service were not removed from %s: %s/lt-dm.prom not removed: '
            % (where['dir'], where['dir'])) in said and 'symlink' in said, said
    assert (target / 'lt-dm.prom').exists() and not (control / 'lt-dm.prom').exists()
