# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tools and the base image (cached under the cache dir, keyed by the hash of its recipe)."""

from __future__ import absolute_import, division, print_function

import contextlib
import os
import time

from .common import file_lock, log, recipe_hash, run
from .procs import process_table, remove_tree

__metaclass__ = type  # pylint: disable=invalid-name


# The recipe is data so that its hash changes whenever it does; bump "revision" when the code that applies it changes.
BASE_RECIPE = {
    "revision": 1,
    "suite": "bookworm",
    "mirror": "http://deb.debian.org/debian",
    "variant": "minbase",
    # python3-dev must NOT be here: installing it is the role's job and tests must see the role do it.
    # sudo: tests become an unprivileged user that may sudo; rsync: ansible.posix.synchronize between hosts.
    "include": ["systemd", "systemd-sysv", "dbus", "openssh-server", "python3", "python3-venv", "iproute2", "sudo", "rsync"],
    # Masked rather than only disabled: a first boot (empty machine-id) runs presets, which could re-enable them.
    "mask": [
        "apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer", "e2scrub_all.timer", "fstrim.timer",
        "getty@tty1.service", "console-getty.service", "systemd-pstore.service",
    ],
}


def clean_stale_builds(cache_dir):
    """Remove build dirs of crashed runs (call with the cache lock held, so no build is in progress)."""
    if cache_dir.is_dir():
        for stale in cache_dir.glob(".tmp-*"):
            log("removing stale build dir %s" % stale)
            remove_tree(stale)


def cached_build(cache_dir, kind, recipe, what, build):
    """The cache entry `KIND-<hash of recipe>`, built once by build(tmp) -> the directory to keep.

    Built under a temp name and renamed, under the cache lock: a crash leaves a .tmp dir (removed by the next
    build), never a half-built entry under the final name. Superseded entries of the same kind are pruned.
    """
    key = recipe_hash(recipe)
    final = cache_dir / ("%s-%s" % (kind, key))
    if final.is_dir():
        return final
    with file_lock(cache_dir / ".lock"):
        if final.is_dir():
            return final
        clean_stale_builds(cache_dir)
        tmp = cache_dir / (".tmp-%s-%s-%d" % (kind, key, os.getpid()))
        started = time.monotonic()
        log("building %s %s" % (what, final.name))
        try:
            os.rename(build(tmp), final)
        finally:
            remove_tree(tmp)
        log("%s built in %.1f s" % (what, time.monotonic() - started))
        prune_old(cache_dir, kind + "-", final)
        return final


def ensure_base_image(cache_dir):
    def build(tmp):
        run(["debootstrap", "--variant=" + BASE_RECIPE["variant"], "--include=" + ",".join(BASE_RECIPE["include"]),
             BASE_RECIPE["suite"], str(tmp), BASE_RECIPE["mirror"]], capture=True)
        configure_base_image(tmp)
        return tmp
    return cached_build(cache_dir, "base", BASE_RECIPE, "base image (debootstrap, about a minute)", build)


def configure_base_image(root):
    etc = root / "etc"
    # Empty machine-id: every host gets its own at boot. Never boot the base image itself.
    (etc / "machine-id").write_text("", encoding="utf-8")
    dbus_id = root / "var" / "lib" / "dbus" / "machine-id"
    dbus_id.parent.mkdir(parents=True, exist_ok=True)
    if dbus_id.exists() or dbus_id.is_symlink():
        dbus_id.unlink()
    dbus_id.symlink_to("/etc/machine-id")
    with contextlib.suppress(FileNotFoundError):
        (etc / "hostname").unlink()
    # Hosts reach nothing but the outer machine: no resolver, so name lookups fail at once instead of timing out.
    (etc / "resolv.conf").unlink()
    (etc / "resolv.conf").write_text("", encoding="utf-8")
    (etc / "hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n", encoding="utf-8")
    units = etc / "systemd" / "system"
    for unit in BASE_RECIPE["mask"]:
        for link in units.glob("*.wants/" + unit):
            link.unlink()
        target = units / unit
        if target.exists() or target.is_symlink():
            target.unlink()
        target.symlink_to("/dev/null")
    # Host keys are made per host at `up`: hosts sharing keys would be indistinguishable.
    for key in (etc / "ssh").glob("ssh_host_*"):
        key.unlink()
    for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for item in (root / leftover).glob("*"):
            if item.is_file():
                item.unlink()


def prune_old(cache_dir, kind, keep):
    """Remove superseded cache entries of one kind, unless a running fleet still uses them."""
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        in_use = handle.read()  # base images: overlay lowerdirs
    for _pid, argv in process_table():
        if "serve-mirror" in argv and "--root" in argv[:-1]:
            # apt repos: the served tree links to them
            in_use += " " + os.path.realpath(os.path.join(argv[argv.index("--root") + 1], "apt"))
    for old in cache_dir.glob(kind + "*"):
        if old != keep and old.is_dir() and str(old) not in in_use:
            log("removing superseded %s" % old)
            remove_tree(old)
