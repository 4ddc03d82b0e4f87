# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The filters through which the server role hands the model sync its peers, and writes who may read from whom
(module_utils/model/model_sync.py and module_utils/model/model_sync_access.py decide)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The collection's module_utils are imported inside each filter: to find one filter of the collection, Ansible imports
# every filter file of it (plugins/loader.py Jinja2Loader), in every worker process (one per host and task); a
# filter pays only for what it calls (tests/unit/test_architecture.py).

IDENTITY = '__sglang_sync_identity'


def sglang_model_peers(hosts, hostvars, dest):
    """Filter: the play's hosts -> [{name, address, have}] for those that have told (fact sglang_models) about dest."""
    from ansible_collections.llmops.sglang.plugins.module_utils.model.model_sync import peer_list
    facts = {}
    for host in hosts or []:
        if host not in hostvars:
            continue
        values = hostvars[host]
        facts[host] = {'sglang_models': values.get('sglang_models'), 'address': values.get('ansible_host') or host}
    return peer_list(hosts or [], facts, dest)


def _identities(hosts, hostvars, me):
    out = []
    for host in hosts or []:
        if host == me or host not in hostvars:
            continue
        values = hostvars[host]
        identity = values.get(IDENTITY)  # the host's sglang_sync_identity result
        if isinstance(identity, dict) and not identity.get('skipped'):
            out.append(dict(identity, name=host, address=values.get('ansible_host') or host))
    return out


def sglang_sync_authorized_keys(before, hostvars, hosts, command, me):
    """Filter: host ``me``'s sync account authorized_keys text (its current text ``before``) with the sync keys of
    the other ``hosts`` that have told theirs (fact __sglang_sync_identity), each restricted to ``command``."""
    from ansible_collections.llmops.sglang.plugins.module_utils.model.model_sync_access import authorized_keys_text
    return authorized_keys_text(before, [{'name': i['name'], 'public_key': i.get('public_key')}
                                         for i in _identities(hosts, hostvars, me)], command)


def sglang_sync_known_hosts(given, hostvars, hosts, me):
    """Filter: the known_hosts text for host ``me``: the inventory's lines ``given``, then the host keys the other
    ``hosts`` read from their own /etc/ssh over the Ansible connection (fact __sglang_sync_identity)."""
    from ansible_collections.llmops.sglang.plugins.module_utils.model.model_sync_access import known_hosts_text
    peers = [{'name': i['name'], 'address': i.get('address'), 'keys': i.get('host_keys')}
             for i in _identities(hosts, hostvars, me)]
    return known_hosts_text(given, peers)


class FilterModule(object):
    """llmops.sglang model sync."""

    def filters(self):
        return {'sglang_model_peers': sglang_model_peers,
                'sglang_sync_authorized_keys': sglang_sync_authorized_keys,
                'sglang_sync_known_hosts': sglang_sync_known_hosts}
