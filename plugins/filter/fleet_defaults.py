# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter through which the playbooks and roles read the fleet's defaults of module_utils/fleet_defaults.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The collection's module_utils are imported inside each filter: to find one filter of the collection, Ansible imports
# every filter file of it (plugins/loader.py Jinja2Loader), in every worker process (one per host and task); a
# filter pays only for what it calls (tests/unit/test_architecture.py).


def sglang_default(name):
    """Filter: a fleet variable's name -> the collection's default for it."""
    from ansible_collections.llmops.sglang.plugins.module_utils.fleet_defaults import default
    try:
        return default(name)
    except ValueError as exc:
        raise AnsibleFilterError('sglang_default: %s' % exc)


class FilterModule(object):
    """llmops.sglang fleet defaults."""

    def filters(self):
        return {'sglang_default': sglang_default}
