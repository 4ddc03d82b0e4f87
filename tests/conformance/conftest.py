"""The conformance suite: the collection's knowledge of SGLang held against the real release (sglang_release.py).

Run with the .venv's Python 3.11 (`make conformance`); the first run downloads the pinned wheel into
.build/sglang-release/, later runs work offline.
"""

import contextlib
import importlib.util
import logging
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import sglang_release  # noqa: E402  pylint: disable=wrong-import-position

# The role's launcher shim (roles/server/files/sglang_launch.py), which wraps the release's own server_args.
SHIM = os.path.join(os.path.dirname(os.path.dirname(HERE)), 'roles', 'server', 'files', 'sglang_launch.py')


def load_shim(name='sglang_launch'):
    """The shim as a module of its own (its import changes nothing; its functions patch server_args)."""
    spec = importlib.util.spec_from_file_location(name, SHIM)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


@contextlib.contextmanager
def shim_applied(values):
    """The shim's patches applied to the real server_args with these secrets (ServerArgs field -> value), undone
    afterwards. Yields the release's server_args module."""
    module = sglang_release.server_args()
    record = module.ServerArgs
    saved = (module.prepare_server_args, record.resolved_dict, record.__reduce__, logging.getLogRecordFactory())
    loaded = load_shim()
    loaded.mask_log_records(values.values())
    loaded.hand_secrets_to_server_args(values)
    try:
        yield module
    finally:
        module.prepare_server_args, record.resolved_dict, record.__reduce__ = saved[:3]
        logging.setLogRecordFactory(saved[3])


@pytest.fixture(scope='session')
def release():
    """The sglang_release module, with the wheel fetched and server_args imported."""
    sglang_release.server_args()
    return sglang_release
