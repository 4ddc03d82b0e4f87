# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reads of sglang_sync_identity: whether the key is there, the host's SSH host keys, the sync account's
authorized_keys and whether its directory exists. What is made of them is decided in sync_identity (pure)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

from ansible_collections.llmops.sglang.plugins.module_utils.host.host_adapters import read_text

HOST_KEYS = '/etc/ssh/ssh_host_*_key.pub'


def identity_files(key, authorized_keys, host_keys=True, pattern=HOST_KEYS):
    """{key_exists, host_key_texts (in name order), authorized_keys (its text, '' when absent), home_ready}."""
    return {'key_exists': os.path.exists(key),
            'host_key_texts': [read_text(path) for path in sorted(glob.glob(pattern))] if host_keys else [],
            'authorized_keys': read_text(authorized_keys) or '',
            'home_ready': os.path.isdir(os.path.dirname(authorized_keys))}
