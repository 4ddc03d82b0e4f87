# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter through which the server role reads the release pins of module_utils/pins.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

# The collection's module_utils are imported inside each filter: to find one filter of the collection, Ansible imports
# every filter file of it (plugins/loader.py Jinja2Loader), in every worker process (one per host and task); a
# filter pays only for what it calls (tests/unit/test_architecture.py).


def sglang_pin(package):
    """Filter: a package name -> the version this collection pins with its SGLang release."""
    from ansible_collections.llmops.sglang.plugins.module_utils.pins import pin
    try:
        return pin(package)
    except ValueError as exc:
        raise AnsibleFilterError('sglang_pin: %s' % exc)


class FilterModule(object):
    """llmops.sglang release pins."""

    def filters(self):
        return {'sglang_pin': sglang_pin}
