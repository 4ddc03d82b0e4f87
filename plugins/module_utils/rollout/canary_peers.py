# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The canary's live baseline: for each instance of the canary batch, a peer of the same box class still on the old
configuration, chosen by the plan before anything restarts. Pure, no I/O.

A peer is a fair yardstick only when the one difference between it and the canary during the analysis is the change
itself. So a peer qualifies for the canary's instance when it is

- later in the rollout (it restarts after the canary batch, if at all in this run: it runs the old configuration
  while the canary is judged), and its plan restarts that instance for a changed configuration while it runs;
- of the same box class (``k26_box_class``, else ``sglang_hardware_profile``): an H200 is no yardstick for a B300;
- on the same old configuration as the canary had (the same digests of the unit, environment and launcher shim, the
  same versions of the pinned packages) and about to get the same new one (the same wanted digests and pins);
- one host (not a rank of a multi-node group) whose server listens beyond loopback (the canary's host must reach it)
  with the same API key as the canary's;
- no other canary's baseline (two canaries measured against one peer at once would load it twice).

Whatever the plan chose, the analysis checks again on the wire: a baseline that fails requests or serves other
clients' requests during the window is set aside for the recorded figures (canary_driver.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.rollout.rollout_plan import instance_seen

MODES = ('peer', 'recorded')
# The files of a configuration that make it the same on two hosts (the secrets file differs by design: its digest is
# keyed per host).
COMPARED_FILES = ('unit', 'env', 'shim')
LOOPBACK = ('127.0.0.1', 'localhost', '::1', '[::1]')


def configuration(want, seen):
    """(old, new) of one instance: what runs (observed digests, pinned packages' versions) and what it will run."""
    pins = sorted((want.get('pins') or {}).items())
    old = (tuple((name, (seen.get('files') or {}).get(name)) for name in COMPARED_FILES),
           tuple((name, (seen.get('packages') or {}).get(name)) for name, _version in pins))
    new = (tuple((name, (want.get('files') or {}).get(name)) for name in COMPARED_FILES), tuple(pins))
    return old, new


def candidate(host, unit):
    """One host's facts for one instance, as canary_baselines reads them (the filter builds these from hostvars):
    host: {class, plans: unit -> plan, wants: unit -> want, observed: sglang_observe's result, listen, api_key,
    url: unit -> the worker URL}."""
    want = (host.get('wants') or {}).get(unit) or {}
    seen = instance_seen(host.get('observed'), unit, want)
    return {'plan': (host.get('plans') or {}).get(unit) or {}, 'want': want, 'seen': seen,
            'configuration': configuration(want, seen) if want else None}


def _qualifies(canary, peer):
    """None when peer is a fair live baseline for canary (both: this module's host facts of one instance), else why
    not."""
    if peer['class'] != canary['class']:
        return 'box class %s, not %s' % (peer['class'], canary['class'])
    if peer['want'].get('nodes'):
        return 'a rank of a multi-node group'
    plan = peer['plan']
    running = (peer['seen'].get('service') or {}).get('active_state') == 'active'
    if plan.get('action') != 'restart' or not plan.get('config_changed') or not running:
        return 'its plan is %s, not a restart of a running server for a changed configuration' % (plan.get('action') or 'none')
    if str(peer['listen'] or '127.0.0.1') in LOOPBACK:
        return 'it listens on loopback only (sglang_host)'
    if peer['api_key'] != canary['api_key']:
        return 'another API key'
    if peer['configuration'] != canary['configuration']:
        return 'another old or new configuration'
    return None


def canary_baselines(canaries, later, hosts, mode='peer'):
    """{canary host: {unit: {'host', 'url'} or {'why'}}} for every instance of every canary host.

    ``canaries``: the canary batch's hosts; ``later``: the rollout's hosts after it, in order; ``hosts``: host -> its
    facts (see candidate()). ``mode``: 'peer' (choose one) or 'recorded' (the operator wants the recorded figures).
    """
    if mode not in MODES:
        raise ValueError('k26_canary_baseline=%r: expected one of %s' % (mode, ', '.join(MODES)))
    taken = set()
    out = {}
    for name in canaries:
        facts = hosts.get(name) or {}
        out[name] = {}
        for unit in sorted(facts.get('wants') or {}):
            if mode == 'recorded':
                out[name][unit] = {'why': 'k26_canary_baseline=recorded'}
                continue
            canary = dict(candidate(facts, unit), **{k: facts.get(k) for k in ('class', 'listen', 'api_key')})
            if canary['want'].get('nodes'):
                out[name][unit] = {'why': 'a multi-node server has no peer of its shape'}
                continue
            reasons = []
            for other in later:
                if other == name or (other, unit) in taken:
                    continue
                facts_other = hosts.get(other) or {}
                if unit not in (facts_other.get('wants') or {}):
                    continue
                peer = dict(candidate(facts_other, unit), **{k: facts_other.get(k) for k in ('class', 'listen', 'api_key')})
                why = _qualifies(canary, peer)
                if why is None:
                    taken.add((other, unit))
                    out[name][unit] = {'host': other, 'url': (facts_other.get('url') or {}).get(unit)}
                    break
                reasons.append('%s: %s' % (other, why))
            else:
                out[name][unit] = {'why': ('no peer later in the rollout (%s)' % '; '.join(reasons[:3]) if reasons
                                           else 'no host later in the rollout runs it')}
    return out


def baseline_lines(baselines):
    """What the plan prints of the choice: one line per canary instance."""
    lines = []
    for name in sorted(baselines):
        for unit, choice in sorted(baselines[name].items()):
            if choice.get('host'):
                lines.append('canary %s %s: live baseline %s (%s: the same box class and old configuration)'
                             % (name, unit, choice['host'], choice['url']))
            else:
                lines.append('canary %s %s: no live baseline (%s): the figures recorded at its last passed analysis, if any'
                             % (name, unit, choice['why']))
    return lines
