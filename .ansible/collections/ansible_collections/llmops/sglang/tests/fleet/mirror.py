# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The package mirror: apt repo, wheelhouse and the SGLang stand-in wheel (cached like the base image)."""

from __future__ import absolute_import, division, print_function

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .client import PINS
from .common import FleetError, STANDIN_SOURCE, log, run
from .image import cached_build
from .procs import remove_tree, unmount_all

__metaclass__ = type  # pylint: disable=invalid-name


# What the roles may install from the distribution on a managed host; apt adds their dependencies and recommends.
# python3-apt: ansible.builtin.apt installs it on first use. acl: become_user to an unprivileged user needs setfacl.
MIRROR_APT_RECIPE = {
    "revision": 2,
    "packages": ["python3-dev", "python3.11-dev", "python3-requests", "python3-jmespath", "python3-pip", "python3-apt", "acl"],
    # The monitoring role installs these with --no-install-recommends; their recommends (node-exporter's collector
    # scripts, smartmontools...) stay out of the mirror.
    "packages_without_recommends": ["prometheus", "prometheus-node-exporter"],
}

# Each inner list is one `pip download` (pip refuses two versions of one project in a single call).
# 0.8.1 is the too-old compressed-tensors of the seed launch story; the other is the collection's pin (what sglang
# 0.5.23 pins, plugins/module_utils/pins.py).
MIRROR_WHEEL_RECIPE = {
    "revision": 1,
    "python_version": "3.11",
    "downloads": [
        ["compressed-tensors==0.8.1"],
        ["compressed-tensors==" + PINS["compressed-tensors"]],
        ["requests", "jmespath", "charset-normalizer", "urllib3", "idna", "certifi"],
    ],
}


def ensure_apt_mirror(cache_dir, base):
    def build(tmp):
        download_debs(base, tmp)
        return tmp / "repo"
    return cached_build(cache_dir, "apt", dict(MIRROR_APT_RECIPE, base=base.name), "apt mirror", build)


def download_debs(base, work_dir):
    """apt-get --download-only in a throwaway overlay of the base image, then a flat repo of what it fetched."""
    upper, work, merged, repo = (work_dir / n for n in ("upper", "work", "merged", "repo"))
    for path in (upper, work, merged, repo):
        path.mkdir(parents=True)
    run(["mount", "-t", "overlay", "overlay", "-o",
         "lowerdir=%s,upperdir=%s,workdir=%s" % (base, upper, work), str(merged)], capture=True)
    try:
        resolv = merged / "etc" / "resolv.conf"
        resolv.unlink()
        resolv.write_text(Path("/etc/resolv.conf").read_text(encoding="utf-8"), encoding="utf-8")
        run(["mount", "--bind", "/proc", str(merged / "proc")], capture=True)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"}
        run(["chroot", str(merged), "apt-get", "update", "-q"], capture=True, env=env)
        run(["chroot", str(merged), "apt-get", "install", "--download-only", "-y", "-q"] + MIRROR_APT_RECIPE["packages"],
            capture=True, env=env)
        if MIRROR_APT_RECIPE.get("packages_without_recommends"):
            run(["chroot", str(merged), "apt-get", "install", "--download-only", "--no-install-recommends", "-y", "-q"]
                + MIRROR_APT_RECIPE["packages_without_recommends"], capture=True, env=env)
        debs = sorted((merged / "var" / "cache" / "apt" / "archives").glob("*.deb"))
        if not debs:
            raise FleetError("apt downloaded nothing for %s" % " ".join(MIRROR_APT_RECIPE["packages"]))
        for deb in debs:
            shutil.copy2(deb, repo / deb.name)
    finally:
        unmount_all(merged)
    with open(repo / "Packages", "w", encoding="utf-8") as packages:
        run(["dpkg-scanpackages", "-m", ".", "/dev/null"], cwd=repo, stdout=packages, stderr=subprocess.PIPE, text=True)


def pip_command():
    cmd = [sys.executable, "-m", "pip"]
    if subprocess.run(cmd + ["--version"], capture_output=True, check=False).returncode != 0:
        raise FleetError("pip is not available for %s; run fleet.py with a Python that has pip (e.g. .venv/bin/python)"
                         % sys.executable)
    return cmd


def pip_env():
    return dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_ROOT_USER_ACTION="ignore")


def ensure_wheelhouse(cache_dir):
    def build(tmp):
        tmp.mkdir(parents=True)
        pip = pip_command()
        for specs in MIRROR_WHEEL_RECIPE["downloads"]:
            # Pure-python wheels only, chosen for the hosts' Python, not the controller's.
            run(pip + ["download", "-q", "--no-deps", "--only-binary=:all:", "--implementation", "py", "--abi", "none",
                       "--platform", "any", "--python-version", MIRROR_WHEEL_RECIPE["python_version"],
                       "-d", str(tmp)] + specs, capture=True, env=pip_env())
        return tmp
    return cached_build(cache_dir, "wheels", MIRROR_WHEEL_RECIPE, "wheelhouse", build)


def assemble_mirror(fleet, apt_repo, wheelhouse):
    """The tree the mirror server serves: apt/ links to the cached repo, wheels/ gets copies (the stand-in is added)."""
    remove_tree(fleet.mirror_root)
    wheels = fleet.mirror_root / "wheels"
    wheels.mkdir(parents=True)
    (fleet.mirror_root / "apt").symlink_to(apt_repo)
    for wheel in wheelhouse.glob("*.whl"):
        try:
            os.link(wheel, wheels / wheel.name)
        except OSError:
            shutil.copy2(wheel, wheels / wheel.name)


def refresh_standin(fleet):
    """Build the SGLang stand-in wheel from tests/standin into the served wheels/ dir (its source changes often).

    Built from a copy so the build leaves no build/ or *.egg-info in the source tree.
    Returns the wheel path, or None when the stand-in does not exist yet.
    """
    if not (STANDIN_SOURCE / "pyproject.toml").is_file():
        log("WARNING: %s/pyproject.toml does not exist yet; the mirror has no SGLang stand-in wheel" % STANDIN_SOURCE)
        return None
    wheels = fleet.mirror_root / "wheels"
    if not wheels.is_dir():
        raise FleetError("no mirror at %s; run `fleet.py up` or `fleet.py mirror` first" % fleet.mirror_root)
    with tempfile.TemporaryDirectory(prefix="fleet-standin-") as tmp:
        source = Path(tmp) / "src"
        shutil.copytree(STANDIN_SOURCE, source, ignore=shutil.ignore_patterns(
            "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache"))
        out = Path(tmp) / "out"
        run(pip_command() + ["wheel", "-q", "--no-deps", str(source), "-w", str(out)], capture=True, env=pip_env())
        built = sorted(out.glob("*.whl"))
        if len(built) != 1:
            raise FleetError("expected one stand-in wheel, pip built: %s" % [w.name for w in built])
        for old in wheels.glob("sglang-*.whl"):
            old.unlink()
        target = wheels / built[0].name
        shutil.copy2(built[0], target)
    log("stand-in wheel: %s" % target.name)
    return target


def build_mirror(fleet, base, standin=True):
    apt_repo = ensure_apt_mirror(fleet.cache_dir, base)
    wheelhouse = ensure_wheelhouse(fleet.cache_dir)
    assemble_mirror(fleet, apt_repo, wheelhouse)
    if standin:
        refresh_standin(fleet)
