"""The sglang-router wheels for the fleet's package mirror (tests/integration/test_router.py adds them to its fleet).

sglang-router 0.3.2 is a manylinux wheel (the Rust router, abi3) with compiled dependencies (aiohttp, orjson,
pydantic-core, ...): they are downloaded for the hosts' CPython 3.11 on x86_64 with their dependencies, once, into the
shared cache (`router-wheels-HASH`), and linked into a fleet's served wheels/ directory.
"""

from __future__ import absolute_import, division, print_function

import os
import shutil
from pathlib import Path

from .common import DEFAULT_CACHE_DIR, FleetError, run
from .image import cached_build
from .mirror import pip_command, pip_env

__metaclass__ = type  # pylint: disable=invalid-name

ROUTER_WHEEL_RECIPE = {
    "revision": 1,
    "python_version": "3.11",
    "platform": "manylinux2014_x86_64",
    "requirements": ["sglang-router==0.3.2"],
}


def ensure_router_wheels(cache_dir):
    def build(tmp):
        tmp.mkdir(parents=True)
        run(pip_command() + [
            "download", "-q", "--only-binary=:all:", "--platform", ROUTER_WHEEL_RECIPE["platform"],
            "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux_2_28_x86_64", "--platform", "any",
            "--python-version", ROUTER_WHEEL_RECIPE["python_version"], "--implementation", "cp",
            "-d", str(tmp)] + ROUTER_WHEEL_RECIPE["requirements"], capture=True, env=pip_env())
        return tmp
    return cached_build(Path(cache_dir), "router-wheels", ROUTER_WHEEL_RECIPE, "sglang-router wheels", build)


def add_to_mirror(mirror_root, cache_dir=DEFAULT_CACHE_DIR):
    """Link the router wheels into MIRROR_ROOT/wheels (the directory the fleet's mirror serves as find-links)."""
    source = ensure_router_wheels(cache_dir)
    wheels = Path(mirror_root) / "wheels"
    if not wheels.is_dir():
        raise FleetError("no mirror at %s; run `fleet.py up` first" % mirror_root)
    for wheel in source.glob("*.whl"):
        target = wheels / wheel.name
        if target.exists():
            continue
        try:
            os.link(wheel, target)
        except OSError:
            shutil.copy2(wheel, target)
    return sorted(w.name for w in source.glob("*.whl"))
