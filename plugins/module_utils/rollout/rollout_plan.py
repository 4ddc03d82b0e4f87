# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollout plan: per instance what a run will do, and which hosts must go through the canary and batches.
Pure, no I/O.

``playbooks/deploy_k26.yml`` renders every instance's files on the controller (digests of the unit, environment,
secrets and shim the role would write), observes each host in one ``sglang_observe`` call and asks:

- ``instance_seen``: one instance's part of an observation (its files, unit, mtimes, last-good copy, model and
  port, its venv, and the host-wide facts narrowed to what this instance wants), the same whether the observation
  covered every instance of the host (the plan's) or only this one (the role's);
- ``plan_instance`` and ``plan_seen`` (plan_instance plus the venv's two overrides): nothing, change without
  restart, restart, start, roll back, verify or stop - and why; ``plan_host`` for every instance of a host;
- ``host_route``: whether the host is done after the plan (``done``), gets its non-restart changes in a parallel
  play (``apply``) or goes through the serialized rollout (``rollout``);
- ``rollout_order``: the rollout's hosts in order and the batch sizes that keep every multi-node group (all ranks of
  one server) in one batch, from the operator's ``k26_serial`` policy;
- ``plan_rows`` / the table columns: the plan as one table, printed before anything restarts.

The server role observes each instance once (``sglang_observe``), before it writes anything, and applies the one
decision ``decide`` takes from that observation - the plan's own rules, not a second set. When the plan pass already
decided for the instance, ``decide`` compares the plan's observation of it with the role's (compare-and-swap): the
host did not move since, so the plan's decision is applied as planned (``source: plan``); it moved, so it decides
anew from the role's observation (``source: replanned``, ``moved`` names what changed). When everything that moved
moved only towards what this instance wants, as an earlier instance of the same host leaves it in the same run
(packages installed, directories and accounts made, pins installed), it decides anew just the same but quietly
(``source: converged``): no other hand touched the host. Without a plan it decides from the observation
(``source: observed``). One observation, one decision per instance and run.

What counts as "the process runs the configuration on disk" and "the configuration is the verified one" is
rollout_state.py's (start_action, is_verified, config_verified).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.llmops.sglang.plugins.module_utils.rollout.rollout_state import (
    RUNNING,
    config_verified,
    is_verified,
    start_action,
)

# Actions that restart, start or stop a server: only hosts with one of these go through the canary and batches.
DISRUPTIVE = ('restart', 'start', 'rollback', 'verify', 'stop')
COLUMNS = ('host', 'instance', 'action', 'what changes', 'restart', 'why')
# A file's name in the plan (the role's files, vars/main.yml __sglang_config_files plus the shim) -> what it is.
FILE_LABELS = {'unit': 'unit', 'env': 'environment', 'secrets.env': 'secrets', 'shim': 'launcher shim'}
# What of a unit's facts says whether it moved between two reads: its identity (InvocationID, a new one for every
# start, also systemd's own restarts), its state and the main process' start. sub_state and since follow from these.
SERVICE_IDENTITY = ('exists', 'active_state', 'invocation_id', 'started_at', 'result')
# started_at is /proc/stat's btime (whole seconds, moved by a step of the wall clock) plus the process' start ticks:
# two reads of one process may differ by up to a second; a new process has a new invocation_id anyway.
STARTED_AT_SLACK = 1.0


def _file_changes(want_files, seen_files):
    """Names of the files whose wanted digest (None: must be absent) differs from the host's (None: absent)."""
    changes = []
    for name in sorted(want_files or {}):
        want = want_files[name]
        seen = (seen_files or {}).get(name)
        if want == 'any':
            continue
        if want != seen:
            changes.append(name)
    return changes


def _pin_changes(want_pins, packages):
    return ['%s %s -> %s' % (name, (packages or {}).get(name) or 'absent', version)
            for name, version in sorted((want_pins or {}).items())
            if version and (packages or {}).get(name) != version]


def plan_instance(want, seen):
    """{action, changes, restart, why} for one instance.

    ``want`` (rendered on the controller): state (sglang_state), files (name -> sha1 of the content the role writes,
    None for a file it removes, 'any' for one it leaves alone), pins (package -> version), apt (packages that must be
    installed). ``seen`` (instance_seen(): sglang_observe's instance result, its venv's and its share of the host-wide
    facts): files (name -> sha1 or None), service (exists, active_state, result, started_at), mtimes (list),
    last_good (exists, same, pins), packages, pip, python_h, apt_missing, missing (directories, users, groups the
    role creates).
    """
    state = want.get('state') or 'started'
    service = seen.get('service') or {}
    running = service.get('active_state') in RUNNING
    if state in ('stopped', 'absent'):
        present = service.get('exists') and (running or state == 'absent')
        if not present:
            return {'action': 'none', 'changes': [], 'restart': False, 'why': 'already %s' % state}
        return {'action': 'stop', 'changes': ['unit %s' % ('removed' if state == 'absent' else 'stopped')],
                'restart': True, 'why': 'sglang_state=%s' % state}

    files = _file_changes(want.get('files'), seen.get('files'))
    pins = _pin_changes(want.get('pins'), seen.get('packages'))
    quiet = []
    if seen.get('apt_missing'):
        quiet.append('install %s' % ' '.join(seen['apt_missing']))
    if not seen.get('pip', True):
        quiet.append('bootstrap pip')
    if seen.get('missing'):
        quiet.append('create %s' % ', '.join(seen['missing']))
    changes = ['%s changed' % FILE_LABELS.get(name, name) for name in files] + ['pin %s' % pin for pin in pins] + quiet

    if state == 'restarted':
        return {'action': 'restart', 'changes': changes, 'restart': True, 'why': 'sglang_state=restarted'}
    if files or pins:
        if not running:
            return {'action': 'start', 'changes': changes, 'restart': True,
                    'why': 'the configuration changes and the unit is %s' % (service.get('active_state') or 'absent')}
        return {'action': 'restart', 'changes': changes, 'restart': True,
                'why': 'the running server must load the new configuration'}
    verified = is_verified(seen.get('last_good'), seen.get('packages'))
    action = start_action(state, False, service, seen.get('mtimes'))
    if action == 'start':
        if not verified and (seen.get('last_good') or {}).get('exists') and service.get('active_state') == 'failed':
            return {'action': 'rollback', 'changes': changes, 'restart': True,
                    'why': 'the unit failed on a configuration that never served: started once, the last known good '
                           'one is restored if it does not answer'}
        return {'action': 'start', 'changes': changes, 'restart': True,
                'why': 'the unit is %s' % (service.get('active_state') or 'absent')}
    if action == 'restart':
        return {'action': 'restart', 'changes': changes, 'restart': True,
                'why': 'the process is older than its files: an earlier run changed them and stopped before the restart'}
    if not verified:
        return {'action': 'verify', 'changes': changes + ['save as last known good'], 'restart': False,
                'why': 'the running configuration never answered a completion: waited for, then saved (restored if '
                       'it does not answer)'}
    if changes:
        return {'action': 'change', 'changes': changes, 'restart': False, 'why': 'the server keeps running'}
    return {'action': 'none', 'changes': [], 'restart': False, 'why': 'the verified configuration runs'}


def instance_seen(observed, unit, want):
    """One instance's part of sglang_observe's result, as plan_instance and plan_seen read it: a plain dict.

    The instance's own facts (files, service, mtimes, last_good, model, port_in_use), its venv's (packages, pip,
    python_h, venv_error) and the host-wide ones narrowed to this instance: ``apt_missing`` only the packages
    ``want['apt']`` names (``{python_major_minor}`` filled in with this instance's venv's version; a name is kept as
    given when that is unknown), ``missing`` only ``want``'s directories, ``user X`` and ``group X``. So the plan's
    observation of every instance of a host (apt packages, directories, users and groups the union of theirs) and the
    role's of this one instance give the same dict for an unchanged host (decide compares them).
    """
    observed = observed or {}
    want = want or {}
    instance = (observed.get('instances') or {}).get(unit) or {}
    venv = (observed.get('venvs') or {}).get(want.get('venv') or '') or {}
    version = venv.get('python_major_minor')
    wanted_apt = set(name.replace('{python_major_minor}', version) if version else name for name in want.get('apt') or [])
    host_missing = set(observed.get('missing') or [])
    wanted_missing = (list(want.get('directories') or []) + ['user %s' % name for name in want.get('users') or []]
                      + ['group %s' % name for name in want.get('groups') or []])
    missing = []
    for entry in wanted_missing:
        if entry in host_missing and entry not in missing:
            missing.append(entry)
    return {
        'files': instance.get('files') or {},
        'service': instance.get('service') or {},
        'mtimes': instance.get('mtimes') or [],
        'last_good': instance.get('last_good') or {},
        'model': instance.get('model') or {},
        'port_in_use': instance.get('port_in_use'),
        'packages': venv.get('packages') or {},
        'pip': venv.get('pip', True),
        'python_h': venv.get('python_h', True),
        'venv_error': venv.get('error') or None,
        'apt_missing': sorted(set(name for name in observed.get('apt_missing') or [] if name in wanted_apt)),
        'missing': missing,
    }


# What the role does to the unit for each action before its wait: restart it (behind routers: drained first), start
# it (a no-op when it runs), or leave it. A unit that does not run but whose configuration changes is restarted, as a
# changed one always is (a crashed worker may still be listed by a router: the restart's drain takes it out first).
# A rollback's first step is a start of the configuration on disk (restored if it does not answer).
START = {'restart': 'restart', 'start': 'start', 'rollback': 'start'}


def _applied(plan, want, seen):
    """The plan with what the role's tasks apply: ``start`` (restart, start or none), ``files`` (the names of the
    files whose content changes: the role parses a changed unit's argv first), ``config_changed`` (a file or a pin
    changes: the deployment metrics' config_changed) and ``dependencies`` (the role's dependencies step has work:
    a Debian package missing, a venv without pip, a pin that differs, or Python.h missing where the role installs
    it; without it the role does not enter that step at all) and ``pin_changes`` (each pin that differs, 'NAME OLD ->
    NEW': the role's pip runs only for these)."""
    stopping = (want.get('state') or 'started') in ('stopped', 'absent')
    files = [] if stopping else _file_changes(want.get('files'), seen.get('files'))
    pins = [] if stopping else _pin_changes(want.get('pins'), seen.get('packages'))
    start = START.get(plan['action'], 'none')
    if start == 'start' and (files or pins):
        start = 'restart'
    dependencies = not stopping and bool(seen.get('apt_missing') or not seen.get('pip', True) or pins
                                         or (want.get('python_headers') and not seen.get('python_h', True)))
    return dict(plan, start='none' if stopping else start, files=files, config_changed=bool(files or pins),
                dependencies=dependencies, pin_changes=pins)


def plan_seen(want, seen):
    """plan_instance(), then what the venv adds: a venv that cannot be asked is reported (a change), and missing
    Python headers are installed when the role installs them (a change); with _applied()'s keys."""
    plan = plan_instance(want, seen)
    if seen.get('venv_error') and plan['action'] in ('none', 'change'):
        plan = {'action': 'change', 'changes': plan['changes'], 'restart': False,
                'why': 'the venv cannot be asked (%s): the role reports it' % seen['venv_error']}
    elif not seen.get('python_h', True) and plan['action'] == 'none' and want.get('python_headers'):
        plan = {'action': 'change', 'changes': ['Python.h missing'], 'restart': False,
                'why': 'Triton needs the headers: the role installs and checks them'}
    return _applied(plan, want, seen)


def _with_secrets(want, secret_digest):
    """The want with the wanted secrets file's digest among its files (kept apart from the rendered want)."""
    return dict(want or {}, files=dict((want or {}).get('files') or {}, **{'secrets.env': secret_digest}))


def plan_host(wants, observed, secrets=None):
    """unit -> plan_seen() for every instance of a host, with ``refusals`` (host_refusals: what the server role will
    refuse the instance for, from this same observation, when the host is not done after the plan);
    ``observed``: sglang_observe's whole result; ``secrets``: unit -> the wanted secrets file's digest (None: no
    secrets file), kept apart from ``wants``."""
    secrets = secrets or {}
    plans = {}
    for unit, want in sorted((wants or {}).items()):
        want = _with_secrets(want, secrets.get(unit))
        plans[unit] = dict(plan_seen(want, instance_seen(observed, unit, want)),
                           refusals=host_refusals(want, observed, unit))
    return plans


def _same_service(before, after):
    """Whether two reads of a unit's facts show the same run of it (SERVICE_IDENTITY; started_at within a second)."""
    for key in SERVICE_IDENTITY:
        first, second = (before or {}).get(key), (after or {}).get(key)
        if key == 'started_at' and first is not None and second is not None:
            if abs(float(first) - float(second)) > STARTED_AT_SLACK:
                return False
        elif first != second:
            return False
    return True


def moved_keys(before, after):
    """The top-level keys of two instance_seen() dicts that differ, sorted (``service``: its identity only)."""
    before, after = before or {}, after or {}
    moved = []
    for key in sorted(set(before) | set(after)):
        same = (_same_service(before.get(key), after.get(key)) if key == 'service'
                else before.get(key) == after.get(key))
        if not same:
            moved.append(key)
    return moved


def _fixed_mtimes(want):
    """How many of the instance's mtimes entries are its own configuration files: the leading plain paths of
    want['observe']['mtimes'] (one entry each); the pinned packages' install records after them are patterns."""
    count = 0
    for pattern in ((want.get('observe') or {}).get('mtimes') or []):
        if any(char in str(pattern) for char in '*?['):
            break
        count += 1
    return count


def converged(before, after, want, moved):
    """Whether every key in moved (moved_keys of two instance_seen() dicts) moved only towards want: Debian packages
    and directories, users or groups no longer missing, pinned packages now at their pin, pip and Python.h now there,
    files now as the role writes them (the launcher shim every instance of a host shares), and of the mtimes only the
    pinned packages' install records - what an earlier instance of the same host leaves in the same run. Anything
    else (a file unlike the role's, the unit, the last-good copy, a package moved elsewhere, something newly missing)
    is someone else's move."""
    pins = dict((name, version) for name, version in (want.get('pins') or {}).items() if version)
    fixed = _fixed_mtimes(want)
    for key in moved:
        old, new = before.get(key), after.get(key)
        if key in ('apt_missing', 'missing'):
            ok = set(new or []) <= set(old or [])
        elif key == 'packages':
            names = set(old or {}) | set(new or {})
            ok = all(name in pins and (new or {}).get(name) == pins[name]
                     for name in names if (old or {}).get(name) != (new or {}).get(name))
        elif key == 'files':
            # the launcher shim is one file for every instance of a host: the first instance's run installs it
            wanted = want.get('files') or {}
            ok = all((new or {}).get(name) == wanted.get(name) and wanted.get(name) != 'any'
                     for name in set(old or {}) | set(new or {}) if (old or {}).get(name) != (new or {}).get(name))
        elif key in ('pip', 'python_h'):
            ok = bool(new) and not old
        elif key == 'mtimes':
            ok = list(old or [])[:fixed] == list(new or [])[:fixed] and len(old or []) >= fixed
        else:
            ok = False
        if not ok:
            return False
    return bool(moved)


def decide(want, observed, unit, secret_digest=None, planned=None, restart_forbidden=False):
    """The one decision the server role applies for one instance, from its one observation of it.

    ``want``: the instance's entry of the plan's ``sglang_plan_desired`` (state, venv, python_headers, pins, files,
    apt, directories, users, groups, ...); ``observed``: sglang_observe's result (it must hold ``unit``);
    ``secret_digest``: the wanted secrets file's keyed digest (secret_flags.secrets_digest; None: none); ``planned``: None, or the plan pass's
    {decision: its plan_host() entry for this unit, observed: its sglang_observe result for the host}.

    Returns plan_seen()'s {action, changes, restart, why} plus ``source`` (``plan``: the host did not move since the
    plan's observation, so the plan's decision itself; ``replanned``: it moved, decided anew from this observation;
    ``converged``: decided anew too, everything that moved moved towards ``want`` (``converged``); ``observed``: no
    plan), ``moved`` (the instance_seen keys that differ from the plan's observation, [] unless decided anew),
    ``verified`` (rollout_state.config_verified: the configuration the role writes, with the pins it
    installs, is the last known good one), ``unit_known`` (the unit exists on the host), ``rounds`` (rounds: what
    run.yml applies in the deploy round, with start_steps' systemd jobs that apply ``start``, and in the rollback
    round) and ``refusals`` (what refuses the instance before anything changes: first, with ``restart_forbidden``, a
    restart the plan did not foresee, since playbooks/deploy_k26.yml applies with it what its plan found to need no
    restart and a host that moved since so that it would now restart, stop or start is refused rather than restarted
    outside the canary and batches; then host_refusals, why the host cannot run it as wanted).
    """
    if unit not in ((observed or {}).get('instances') or {}):
        raise ValueError('decide: %s is not in the observation (observed.instances has %s)'
                         % (unit, ', '.join(sorted((observed or {}).get('instances') or {})) or 'no instance'))
    want = _with_secrets(want, secret_digest)
    seen = instance_seen(observed, unit, want)
    if planned:
        if not isinstance(planned, dict) or not isinstance(planned.get('decision'), dict) \
                or not isinstance(planned.get('observed'), dict):
            raise ValueError('decide: planned must be {decision: the plan of %s, observed: the plan pass\'s '
                             'sglang_observe result}, got %r' % (unit, planned))
        before = instance_seen(planned['observed'], unit, want)
        changed = moved_keys(before, seen)
        if changed:
            decision = dict(plan_seen(want, seen), moved=changed,
                            source='converged' if converged(before, seen, want, changed) else 'replanned')
        else:
            decision = dict(planned['decision'], source='plan', moved=[])
    else:
        decision = dict(plan_seen(want, seen), source='observed', moved=[])
    pins = dict((name, version) for name, version in (want.get('pins') or {}).items() if version)
    steps = start_steps(decision.get('start', 'none'), want.get('nodes') or [])
    decision.update(verified=config_verified(want['files'], seen['last_good'], dict(seen['packages'], **pins)),
                    unit_known=bool(seen['service'].get('exists')),
                    rounds=rounds(decision.get('start', 'none'), steps, seen['service'].get('active_state')),
                    refusals=host_refusals(want, observed, unit))
    if restart_forbidden and decision.get('start', 'none') != 'none':
        decision['refusals'].insert(0, '%s would %s now (%s), but the rollout plan found it needs no restart: the host '
                                       'changed since the plan (%s). Nothing was changed; run the playbook again to '
                                       'plan it anew.' % (unit, decision['start'], decision.get('why'),
                                                          ', '.join(decision['moved'])))
    return decision


def rounds(start, steps, active_state):
    """What each round of the server role's run.yml applies: {deploy: ..., rollback: ...}, each {steps (start_steps'
    systemd jobs), drain (out of every router first), marker (mark the instance deploying until its verdict),
    marker_reason, marker_drain (the marker's deadline counts the drain), reset_failed, canary (the analysis may
    run)}.

    ``deploy``: the decision's start (``start``, ``steps``); a unit observed ``failed`` (``active_state``) is cleared
    first. ``rollback`` (rollback.yml, after it stopped the failed configuration and restored the files that served):
    this host's unit restarted, systemd reading the restored unit first; it was out of the routers since the deploy
    round and was stopped, so no drain and always a reset-failed; no canary analysis (the configuration is the one
    that served). A multi-node group's ranks each restore and restart their own unit."""
    return {
        'deploy': {'steps': steps, 'drain': start == 'restart', 'marker': start != 'none', 'marker_reason': 'restart',
                   'marker_drain': True, 'reset_failed': active_state == 'failed', 'canary': True},
        'rollback': {'steps': [{'host': None, 'state': 'restarted', 'reload': True}], 'drain': False, 'marker': True,
                     'marker_reason': 'rollback', 'marker_drain': False, 'reset_failed': True, 'canary': False},
    }


# The unit's states in which the port it is configured for is its own (a unit starting, serving or stopping holds it).
PORT_HOLDING_STATES = ('active', 'activating', 'deactivating', 'reloading')


def host_refusals(want, observed, unit):
    """Why this host cannot run the instance as wanted, from the one observation, before anything changes: each a
    message naming the variable and what was found. [] when nothing refuses, and for a state that does not run the
    server (stopped, absent).

    - the venv: its Python did not answer, or a user other than root can change it (sglang_observe's venv ``error``);
      root would run it for the argument check and pip;
    - the model directory is not complete (sglang_observe's ``model.problem``); not when ``want['model_source']``
      names a version: sglang_model_sync brings and verifies that one after this, and the checkpoint gate judges it;
    - the port is held by another process while the unit is not starting, serving or stopping."""
    if want.get('state') not in ('started', 'restarted'):
        return []
    observed = observed or {}
    instance = (observed.get('instances') or {}).get(unit) or {}
    venv = (observed.get('venvs') or {}).get(want.get('venv') or '') or {}
    spec = want.get('observe') or {}
    found = []
    if 'python_version' not in venv:
        found.append('sglang_venv=%s: %s' % (want.get('venv'), venv.get('error') or 'its Python did not answer'))
    model = instance.get('model') or {}
    if not want.get('model_source') and model and not model.get('complete'):
        found.append('sglang_model_path=%s: %s' % (spec.get('model_path'), model.get('problem')))
    state = (instance.get('service') or {}).get('active_state') or ''
    if instance.get('port_in_use') and state not in PORT_HOLDING_STATES:
        found.append('sglang_port=%s is already in use by another process while %s is %s; pick another port or stop '
                     'that process.' % (spec.get('port'), unit, state or 'absent'))
    return found


def start_steps(start, nodes):
    """The systemd jobs that apply ``start`` (restart, start or none), in order: [{host, state, reload}], ``host``
    None for this host (the role runs none for a unit that is not on the host in check mode). A multi-node group's
    restart stops every rank, rank 0 first (it drains its requests, then broadcasts the ShutdownReq that ends every rank: SGLang 0.5.23
    entrypoints/engine.py:1262-1273; a rank >= 1 ignores SIGTERM after the load), each rank's systemd reading its new
    unit file before its stop, then starts every rank, also those outside this batch (a rank 0 alone would wait for
    its peers forever). Anything else is one job on this host: restarted or started, systemd reading the unit file
    again first whenever the decision starts it; ``none`` still makes sure the unit runs."""
    if start == 'restart' and nodes:
        return ([{'host': node, 'state': 'stopped', 'reload': True} for node in nodes]
                + [{'host': node, 'state': 'started', 'reload': False} for node in nodes])
    return [{'host': None, 'state': 'restarted' if start == 'restart' else 'started', 'reload': start != 'none'}]


def host_route(plans):
    """'rollout' when an instance restarts, starts, stops, rolls back or must be verified; 'apply' when it only
    changes without a restart; else 'done'."""
    actions = set(plan['action'] for plan in (plans or {}).values())
    if actions & set(DISRUPTIVE):
        return 'rollout'
    if 'change' in actions:
        return 'apply'
    return 'done'


def hosts_by_route(routes):
    """[(host, route)] in the play's order -> {'rollout': [...], 'apply': [...], 'done': [...]}, each in that order. A
    route that is not one of host_route's three is refused, naming the host."""
    split = dict((name, []) for name in ('rollout', 'apply', 'done'))
    for host, route in routes:
        if route not in split:
            raise ValueError('%s has no route after the plan (k26_route=%r): expected rollout, apply or done'
                             % (host, route))
        split[route].append(host)
    return split


def refused_units(plans):
    """The instances of a host that the server role will refuse before any change (their plan's ``refusals``), in
    order; none when the host is done after the plan (the role does not run there)."""
    if not plans or host_route(plans) == 'done':
        return []
    return [unit for unit, plan in sorted(plans.items()) if plan.get('refusals')]


def plan_rows(host, plans):
    """Table rows of one host: one per instance, '-' when the host has no plan (it failed before the plan). An
    instance the role will refuse (refused_units) says ``refused``, restarts nothing, and says why: the same
    refusals, from the same observation, that stop it when its turn comes."""
    if plans is None:
        return [[host, '-', 'not planned', '-', '-', 'failed before the plan (see its error above)']]
    refused = refused_units(plans)
    rows = []
    for unit, plan in sorted(plans.items()):
        if unit in refused:
            rows.append([host, unit, 'refused', ', '.join(plan['changes']) or '-', 'no',
                         'when its turn comes, before any change: %s' % '; '.join(plan['refusals'])])
        else:
            rows.append([host, unit, plan['action'], ', '.join(plan['changes']) or '-',
                         'yes' if plan['restart'] else 'no', plan['why']])
    return rows


def plan_summary(routes, refused=0):
    """'3 hosts: 1 through the canary and batches, 0 changed in place, 2 with nothing to do', and how many hosts the
    role will refuse (``refused``: hosts with refused_units), when any."""
    counts = dict((name, 0) for name in ('rollout', 'apply', 'done'))
    for route in routes:
        if route in counts:
            counts[route] += 1
    summary = '%d host%s: %d through the canary and batches, %d changed in place without a restart, %d with nothing to do' % (
        len(routes), '' if len(routes) == 1 else 's', counts['rollout'], counts['apply'], counts['done'])
    if refused:
        summary += '; %d the role will refuse before any change (action refused: the table says why)' % refused
    return summary


def _batch_target(policy, index, total):
    """Ansible's serial semantics: the index-th entry (the last one repeats), an int or 'N%' of all hosts."""
    entry = policy[min(index, len(policy) - 1)]
    text = str(entry).strip()
    if text.endswith('%'):
        size = int(total * float(text[:-1]) / 100.0)
    else:
        size = int(text)
    return max(size, 1)


def normalize_serial(serial):
    """k26_serial as a list: an int, 'N%' or a list of those (Ansible's serial)."""
    if isinstance(serial, (list, tuple)):
        policy = list(serial)
    else:
        policy = [serial]
    if not policy:
        raise ValueError('k26_serial is empty: expected an int, "N%%" or a list of those')
    for entry in policy:
        text = str(entry).strip()
        number = text[:-1] if text.endswith('%') else text
        try:
            ok = float(number) > 0 and (text.endswith('%') or float(number) == int(float(number)))
        except ValueError:
            ok = False
        if not ok:
            raise ValueError('k26_serial=%r: expected a positive int, "N%%" or a list of those' % (serial,))
    return policy


def rollout_order(hosts, units, serial):
    """{hosts: the rollout's hosts in order, batches: host count per batch}.

    ``hosts``: the hosts whose plan restarts (inventory order). ``units``: host -> the hosts that must restart with
    it (its multi-node groups' ranks; a single host is its own unit). Every host of a unit is pulled in, and a unit
    is never split across batches: a batch takes whole units until it reaches the policy's size (at least one).
    """
    policy = normalize_serial(serial)
    ordered, seen = [], set()
    groups = []
    for host in hosts:
        if host in seen:
            continue
        members = [host] + [m for m in (units or {}).get(host) or [] if m != host]
        # A rank pulled in by another's unit may have its own groups: take them along too (a closure).
        index = 1
        while index < len(members):
            for extra in (units or {}).get(members[index]) or []:
                if extra not in members:
                    members.append(extra)
            index += 1
        members = [m for m in members if m not in seen]
        seen.update(members)
        ordered.extend(members)
        groups.append(members)
    batches = []
    position = 0
    while position < len(groups):
        target = _batch_target(policy, len(batches), len(ordered))
        size = 0
        while position < len(groups) and (size == 0 or size + len(groups[position]) <= target):
            size += len(groups[position])
            position += 1
        batches.append(size)
    return {'hosts': ordered, 'batches': batches}
