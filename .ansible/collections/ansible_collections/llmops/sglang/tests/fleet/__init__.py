# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The local test fleet (stdlib only): `python3 tests/fleet/fleet.py <cmd>` is its CLI (fleet/cli.py).

Modules: common (paths, errors, helpers), procs (/proc, mounts, cgroups), model (a fleet's and its hosts' names and
paths), image (base image), mirror and mirror_server (the package mirror), hosts (overlay, network, boot),
inventory, lifecycle (up, down, status), cli, and client: the one fleet client the integration tests and the
bench use (fleet.py calls, ssh to the hosts).
"""
