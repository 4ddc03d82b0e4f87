# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters through which the server role applies the rollout decisions of module_utils/rollout/rollout_state.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The collection's module_utils are imported inside each filter: to find one filter of the collection, Ansible imports
# every filter file of it (plugins/loader.py Jinja2Loader), in every worker process (one per host and task); a
# filter pays only for what it calls (tests/unit/test_architecture.py).


def sglang_after_wait(wait_ok, verified, has_last_good, rollback_enabled):
    """Filter: {action: keep|remember|rollback|fail, note}."""
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.rollout_state import after_wait
    return after_wait(bool(wait_ok), bool(verified), bool(has_last_good), bool(rollback_enabled))


def sglang_after_rollback(wait_ok, elapsed=None, reason=None, message=None):
    """Filter: {action, rolled_back, note} after the one restore."""
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.rollout_state import after_rollback
    return after_rollback(bool(wait_ok), elapsed, reason, message)


def sglang_group_verdict(own, rank0_failure=None, rank0_host=''):
    """Filter: a multi-node group's rank >= 1 takes rank 0's failure when it has none of its own."""
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.rollout_state import group_verdict
    return group_verdict(own, rank0_failure, rank0_host)


def sglang_outcome(wait_result, unit, failure=None, next_step=None, rollback_failure=None, packages=None,
                   config_changed=False, canary=None, stopped=None):
    """Filter: the waiter's result + what followed it -> the instance's outcome (with ``outcome`` and ``message``,
    and ``canary`` when a canary analysis ran); with ``stopped``, the outcome of a run that ended before the verdict."""
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.rollout_state import outcome
    return outcome(unit, wait_result, failure, next_step, rollback_failure, packages, config_changed, canary, stopped)


class FilterModule(object):
    """llmops.sglang rollout decisions."""

    def filters(self):
        return {
            'sglang_after_wait': sglang_after_wait,
            'sglang_after_rollback': sglang_after_rollback,
            'sglang_group_verdict': sglang_group_verdict,
            'sglang_outcome': sglang_outcome,
        }
