# -*- coding: utf-8 -*-
"""sglang_textfile run for real through ansible on this machine (root): the directory made when missing, the kept
copy written first and also when the published path is refused through another user's symlink, check mode."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.llmops.sglang.tests.local.plugins.adhoc import run_module

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='writes root-owned files and judges ownership')


def run(args, check=False, fail=False):
    return run_module('sglang_textfile', args, check, fail)[0]


def test_the_directory_is_made_when_missing_and_both_copies_are_written_once(trees):
    other, control = trees
    args = {'path': str(other / 'node-exporter' / 'x.prom'), 'content': 'a 1\n', 'create_dir': True,
            'keep': str(control / 'x.prom')}
    assert run(args, check=True)['changed'] is True
    assert not (other / 'node-exporter').exists()
    assert run(args)['changed'] is True
    st = os.stat(str(other / 'node-exporter'))
    assert (st.st_uid, st.st_mode & 0o7777) == (0, 0o755)
    assert (other / 'node-exporter' / 'x.prom').read_text() == 'a 1\n' == (control / 'x.prom').read_text()
    assert os.stat(str(control / 'x.prom')).st_mode & 0o7777 == 0o600
    assert run(args)['changed'] is False and run(args, check=True)['changed'] is False


def test_a_symlink_the_other_user_placed_is_refused_and_the_kept_copy_still_written(trees, tmp_path):
    other, control = trees
    target = tmp_path / 'target'
    target.mkdir()
    os.symlink(str(target), str(other / 'node-exporter'))
    os.lchown(str(other / 'node-exporter'), other.stat().st_uid, other.stat().st_gid)  # the other user's link
    refused = run({'path': str(other / 'node-exporter' / 'x.prom'), 'content': 'a 2\n', 'create_dir': True,
                   'keep': str(control / 'x.prom')}, fail=True)
    assert 'node-exporter' in refused['msg'] and 'symlink' in refused['msg'], refused
    assert os.listdir(str(target)) == []
    assert (control / 'x.prom').read_text() == 'a 2\n'
