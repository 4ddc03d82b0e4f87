# -*- coding: utf-8 -*-
"""Fixtures of the module tests that write as root into a tree another user owns (sglang_textfile,
sglang_deploy_metrics)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

OTHER_UID = 4321  # any uid that is not root


@pytest.fixture
def trees(tmp_path):
    """(a directory another user owns, as Debian's /var/lib/prometheus is prometheus's; a root-only control
    directory), both empty."""
    os.chmod(str(tmp_path), 0o755)
    other, control = tmp_path / 'prometheus', tmp_path / 'control'
    other.mkdir(mode=0o755)
    os.chown(str(other), OTHER_UID, OTHER_UID)
    control.mkdir(mode=0o700)
    return other, control
