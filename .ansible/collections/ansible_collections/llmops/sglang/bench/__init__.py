# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmarks on a private local fleet: `python bench/run.py [--quick]` is the entry (bench/cli.py).

Modules: common (paths, constants, Ansible runs), hosts (the private fleet through the shared fleet client
tests/fleet/client.py, the benchmark's units), watchers (the waiter and the baselines), lag, cpu, fleet_cost (the
three measurements), summary and page (the results and docs/benchmarks.md), cli. hostcpu.py runs on the hosts too.
"""
