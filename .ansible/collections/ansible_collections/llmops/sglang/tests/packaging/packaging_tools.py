# -*- coding: utf-8 -*-
"""Helpers of the packaging tests: the real tools from the venv that runs pytest, and the checkout they run on."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import subprocess
import sys

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def tool(name):
    """The venv's own copy of a tool (tests/requirements.txt installs it there); never a PATH lookup."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.fail('%s is not installed next to %s: install tests/requirements.txt into this venv' % (name, sys.executable))
    return str(path)


def run(argv, cwd, **kwargs):
    """Run a tool; a failure shows its whole output."""
    proc = subprocess.run(argv, cwd=str(cwd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          check=False, **kwargs)
    assert proc.returncode == 0, '%s exited %d:\n%s' % (' '.join(argv), proc.returncode, proc.stdout)
    return proc.stdout
