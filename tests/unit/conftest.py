# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bench's modules for its pure unit tests (test_bench_*.py): imported as bench/run.py runs them, with the repo
and tests/ on sys.path (bench's modules reach the fleet client as `fleet.*`), the path given back afterwards."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bench_module(name):
    sys.path[:0] = [ROOT, os.path.join(ROOT, 'tests')]
    try:
        return importlib.import_module('bench.' + name)
    finally:
        del sys.path[:2]


@pytest.fixture
def cli():
    return bench_module('cli')


@pytest.fixture
def cost():
    return bench_module('cost')


@pytest.fixture
def canary():
    return bench_module('canary')


@pytest.fixture
def scale():
    return bench_module('scale')


@pytest.fixture
def cpu():
    return bench_module('cpu')


@pytest.fixture
def dist():
    return bench_module('distribution')


@pytest.fixture
def bench_page():
    return bench_module('page')


@pytest.fixture
def bench_common():
    return bench_module('common')
