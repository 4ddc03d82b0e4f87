"""The conformance suite: the collection's knowledge of SGLang held against the real release (sglang_release.py).

Run with the .venv's Python 3.11 (`make conformance`); the first run downloads the pinned wheel into
.build/sglang-release/, later runs work offline.
"""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import sglang_release  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture(scope='session')
def release():
    """The sglang_release module, with the wheel fetched and server_args imported."""
    sglang_release.server_args()
    return sglang_release
