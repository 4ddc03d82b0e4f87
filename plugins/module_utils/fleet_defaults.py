# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet's defaults, each in one place (no I/O): what the playbooks, the roles and the filters fall back to.

- ``k26_instances``: the instances of a host whose inventory has no ``k26_instances``: one, ``sglang-k26`` on port
  30000. Read by the playbooks (``playbooks/vars/fleet.yml``) and the monitoring role's default
  (``monitoring_default_instances``) through the filter ``llmops.sglang.sglang_default``, and by the router's fleet
  workers (``router_rotation.fleet_workers``) directly.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

DEFAULT_INSTANCES = [{'name': 'sglang-k26', 'port': 30000}]

DEFAULTS = {
    'k26_instances': DEFAULT_INSTANCES,
}


def default(name):
    """The collection's default of a fleet variable (a copy: the caller may change it); ValueError names the known."""
    if name not in DEFAULTS:
        raise ValueError('no default for %r: the fleet defaults are %s' % (name, ', '.join(sorted(DEFAULTS))))
    return copy.deepcopy(DEFAULTS[name])
