"""Thin SGLang import package of the test stand-in: the logic lives in sglang_standin."""
from sglang_standin import VERSION as __version__  # noqa: F401
