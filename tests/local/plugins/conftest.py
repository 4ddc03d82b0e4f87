# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures the local plugin tests share (servers: servers.py; pure helpers: tests/unit/plugins/fakes.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.llmops.sglang.tests.local.plugins.servers import FakeServer


@pytest.fixture
def server():
    """A FakeServer on 127.0.0.1, stopped after the test."""
    with FakeServer() as srv:
        yield srv
