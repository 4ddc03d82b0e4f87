"""The sglang-router wheels for the fleet's package mirror (kept out of fleet.py until its split: see the h-router
report; fold ROUTER_WHEEL_RECIPE into MIRROR_WHEEL_RECIPE's place then).

sglang-router 0.3.2 is a manylinux wheel (the Rust router, abi3) with compiled dependencies (aiohttp, orjson,
pydantic-core, ...): they are downloaded for the hosts' CPython 3.11 on x86_64 with their dependencies, once, into the
shared cache (`router-wheels-HASH`), and linked into a fleet's served wheels/ directory.

    python3 tests/fleet/router_wheels.py --state-dir /var/lib/llmops-fleet-ro   # after `fleet.py up`
"""
import argparse
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet  # noqa: E402  (tests/fleet/fleet.py)

ROUTER_WHEEL_RECIPE = {
    "revision": 1,
    "python_version": "3.11",
    "platform": "manylinux2014_x86_64",
    "requirements": ["sglang-router==0.3.2"],
}


def ensure_router_wheels(cache_dir):
    def build(tmp):
        tmp.mkdir(parents=True)
        fleet.run(fleet.pip_command() + [
            "download", "-q", "--only-binary=:all:", "--platform", ROUTER_WHEEL_RECIPE["platform"],
            "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux_2_28_x86_64", "--platform", "any",
            "--python-version", ROUTER_WHEEL_RECIPE["python_version"], "--implementation", "cp",
            "-d", str(tmp)] + ROUTER_WHEEL_RECIPE["requirements"], capture=True, env=fleet.pip_env())
        return tmp
    return fleet.cached_build(Path(cache_dir), "router-wheels", ROUTER_WHEEL_RECIPE, "sglang-router wheels", build)


def add_to_mirror(mirror_root, cache_dir=fleet.DEFAULT_CACHE_DIR):
    """Link the router wheels into MIRROR_ROOT/wheels (the directory the fleet's mirror serves as find-links)."""
    source = ensure_router_wheels(cache_dir)
    wheels = Path(mirror_root) / "wheels"
    if not wheels.is_dir():
        raise fleet.FleetError("no mirror at %s; run `fleet.py up` first" % mirror_root)
    for wheel in source.glob("*.whl"):
        target = wheels / wheel.name
        if target.exists():
            continue
        try:
            os.link(wheel, target)
        except OSError:
            shutil.copy2(wheel, target)
    return sorted(w.name for w in source.glob("*.whl"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args(argv)
    mirror_root = Path(args.state_dir) / "mirror"  # fleet.Fleet.mirror_root
    names = add_to_mirror(mirror_root, Path(args.cache_dir) if args.cache_dir else fleet.DEFAULT_CACHE_DIR)
    print("\n".join(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
