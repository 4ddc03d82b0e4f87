# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filter through which the server role hands the model sync its peers (module_utils/model_sync.py decides)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.model_sync import peer_list


def sglang_model_peers(hosts, hostvars, dest):
    """Filter: the play's hosts -> [{name, address, have}] for those that have told (fact sglang_models) about dest."""
    facts = {}
    for host in hosts or []:
        if host not in hostvars:
            continue
        values = hostvars[host]
        facts[host] = {'sglang_models': values.get('sglang_models'), 'address': values.get('ansible_host') or host}
    return peer_list(hosts or [], facts, dest)


class FilterModule(object):
    """llmops.sglang model sync."""

    def filters(self):
        return {'sglang_model_peers': sglang_model_peers}
