# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU gate's reads for sglang_preflight (preflight_driver.gpu_gate): nvidia-smi under coreutils' timeout,
`systemctl show`, the unit's cgroup.procs files, the role's EnvironmentFiles and unit files, the venv's
torch/version.py. What they say is judged by the pure units (preflight, gpu_health, nvidia_smi, systemd_props)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

from ansible_collections.llmops.sglang.plugins.module_utils.host.systemd_props import parse_show


def read_text(path):
    """A file's text (undecodable bytes replaced), None when it cannot be read."""
    try:
        with open(path, 'rb') as handle:
            return handle.read().decode('utf-8', 'replace')
    except (IOError, OSError):
        return None


class GpuHost(object):
    """The host as the GPU gate reads it, through the module's run_command and get_bin_path."""

    def __init__(self, module, timeout):
        self.module = module
        self.timeout = timeout

    def nvidia_smi(self):
        return self.module.get_bin_path('nvidia-smi')

    def smi(self, argv):
        # `timeout` ends an nvidia-smi hung on a GPU in a bad state (coreutils, present on every systemd host)
        wrapper = self.module.get_bin_path('timeout')
        return self.module.run_command(([wrapper, str(self.timeout)] if wrapper else []) + argv)

    def unit_props(self, unit, names):
        """`systemctl show -p NAMES unit` as a dict; None without systemctl or when it fails."""
        systemctl = self.module.get_bin_path('systemctl')
        if not systemctl:
            return None
        rc, out, _err = self.module.run_command([systemctl, 'show', '-p', ','.join(names), unit])
        return parse_show(out) if rc == 0 else None

    @staticmethod
    def cgroup_procs(top):
        """The cgroup.procs texts of top and every cgroup below it; None when top is no cgroup (no cgroup.procs)."""
        if not os.path.isfile(os.path.join(top, 'cgroup.procs')):
            return None
        texts = []
        for root, _dirs, files in os.walk(top):
            if 'cgroup.procs' in files:
                texts.append(read_text(os.path.join(root, 'cgroup.procs')) or '')
        return texts

    @staticmethod
    def env_names(config_dir):
        """NAME of every NAME.env in config_dir, in path order."""
        return [os.path.basename(p)[:-len('.env')] for p in sorted(glob.glob(os.path.join(config_dir, '*.env')))]

    @staticmethod
    def read(path):
        return read_text(path)

    @staticmethod
    def torch_version_py(venv):
        """The venv's torch/version.py text, None when there is none (or it cannot be read)."""
        for path in sorted(glob.glob(os.path.join(venv, 'lib', 'python3*', 'site-packages', 'torch', 'version.py'))):
            return read_text(path)
        return None
