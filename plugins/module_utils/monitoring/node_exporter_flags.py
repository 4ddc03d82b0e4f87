# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What llmops.sglang.monitoring needs from node_exporter's flags, without editing the operator's ARGS. Pure, no I/O.

Debian's prometheus-node-exporter 1.5.0-1+b6 (measured on a fleet host): the unit runs
``ExecStart=/usr/bin/prometheus-node-exporter $ARGS`` with ``EnvironmentFile=/etc/default/prometheus-node-exporter``
(``ARGS=""`` as shipped); ``--help`` shows ``--collector.textfile.directory="/var/lib/prometheus/node-exporter"``
as the default and the systemd collector enabled by default; a flag given twice stops it at start
(``error: flag 'collector.systemd' cannot be repeated``).

So the role needs nothing from ARGS when ``monitoring_textfile_dir`` is Debian's default. Any flag it does need (the
textfile directory elsewhere, the systemd collector's restart count and unit filter for SGLangCrashLoop,
``monitoring_node_exporter_extra_flags``) goes into one systemd drop-in the role owns,
whose ExecStart is the packaged one with the flags after ``$ARGS``: the operator's ARGS keep working, and a flag the
operator's ARGS already sets is refused here (node_exporter would not start) instead of being given twice.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
import shlex

DEBIAN_TEXTFILE_DIR = '/var/lib/prometheus/node-exporter'
DEBIAN_EXEC_START = '/usr/bin/prometheus-node-exporter $ARGS'
DEFAULTS_FILE = '/etc/default/prometheus-node-exporter'
TEXTFILE_FLAG = 'collector.textfile.directory'
_FLAG = re.compile(r'^--(no-)?([A-Za-z0-9][A-Za-z0-9_.-]*)(=.*)?$', re.S)
_CONTROL = re.compile(r'[\x00-\x1f\x7f]')
_UNIT_RE = re.compile(r'^[A-Za-z0-9:_.@-]+$')
SYSTEMD_COLLECTOR = 'collector.systemd'
RESTARTS_FLAG = '--collector.systemd.enable-restarts-metrics'
UNIT_INCLUDE_FLAG = '--collector.systemd.unit-include'


def unit_include(units):
    """``['sglang-k26.service', 'b']`` -> ``(b|sglang-k26)[.]service`` (sorted, each name once).

    node_exporter anchors the Go regular expression itself; a dot is ``[.]`` so that no backslash has to survive
    the unit file's own escaping."""
    names = set()
    for unit in units or []:
        unit = str(unit)
        base = unit[:-len('.service')] if unit.endswith('.service') else unit
        if not _UNIT_RE.match(base):
            raise ValueError('%r is not a systemd service name (letters, digits, ":_.@-")' % unit)
        names.add(base.replace('.', '[.]'))
    if not names:
        raise ValueError('no SGLang unit to watch')
    return '(%s)[.]service' % '|'.join(sorted(names))


def systemd_collector_flags(units):
    """The flags for SGLangCrashLoop: systemd's own restart count (NRestarts) of the SGLang units of this host.
    The systemd collector itself is on by default in node_exporter 1.5 (``--help``), so it is not named again."""
    return [RESTARTS_FLAG, '%s=%s' % (UNIT_INCLUDE_FLAG, unit_include(units))]


def environment_args(text):
    """The words of ARGS in an EnvironmentFile (systemd reads KEY=VALUE lines; '#' and ';' start comments; the
    unit's unquoted $ARGS is split at whitespace, quotes group)."""
    value = ''
    for line in (text or '').splitlines():
        line = line.strip()
        if not line or line[0] in '#;':
            continue
        key, sep, rest = line.partition('=')
        if sep and key.strip() == 'ARGS':
            value = rest.strip()
    try:
        words = shlex.split(value)
    except ValueError:
        words = value.split()
    # ARGS="a b" is one value; its words are what the unit's $ARGS expands to
    return [word for item in words for word in item.split()]


def flag_name(word):
    """'--collector.systemd' and '--no-collector.systemd' -> 'collector.systemd'; None for a non-flag word."""
    match = _FLAG.match(word) if isinstance(word, str) else None
    return match.group(2) if match else None


def quoted(word):
    """One word for a unit file's ExecStart=: double-quoted, with systemd's specifiers (%) and variables ($) and
    the quote and backslash escaped, so the program gets exactly ``word``."""
    return '"%s"' % word.replace('\\', '\\\\').replace('"', '\\"').replace('%', '%%').replace('$', '$$')


def plan(defaults_text, textfile_dir, extra_flags, default_textfile_dir=DEBIAN_TEXTFILE_DIR, systemd_units=None):
    """{'flags': [...], 'problems': [...]}: the flags the role's drop-in must add (empty: no drop-in), and the
    messages for what cannot work, each naming the variable or file. ``systemd_units``: the SGLang units whose
    restarts node_exporter counts (monitoring_systemd_collector), None for none."""
    problems = []
    own = []
    if systemd_units is not None:
        try:
            own = [('monitoring_systemd_collector', flag) for flag in systemd_collector_flags(systemd_units)]
        except ValueError as exc:
            problems.append('monitoring_systemd_collector: %s' % exc)
    operator = environment_args(defaults_text)
    operator_names = {}
    for word in operator:
        name = flag_name(word)
        if name:
            operator_names.setdefault(name, word)
    flags = []
    seen = {}
    if own and operator_names.get(SYSTEMD_COLLECTOR, '').startswith('--no-'):
        problems.append('monitoring_systemd_collector: ARGS in %s turns the systemd collector off (--no-%s), and '
                        'SGLangCrashLoop counts its restarts. Take it out of ARGS, or set monitoring_systemd_collector: '
                        'false' % (DEFAULTS_FILE, SYSTEMD_COLLECTOR))
        own = []
    for where, flag in own:
        name = flag_name(flag)
        if name in operator_names:
            problems.append('%s: ARGS in %s already sets --%s (%r), which the role sets for SGLangCrashLoop; '
                            'node_exporter refuses a repeated flag. Take it out of ARGS, or set '
                            'monitoring_systemd_collector: false and keep yours (it must count the SGLang units\' '
                            'restarts)' % (where, DEFAULTS_FILE, name, operator_names[name]))
        else:
            seen[name] = flag
            flags.append(flag)
    if not isinstance(extra_flags, list):
        problems.append('monitoring_node_exporter_extra_flags=%r: expected a list of node_exporter flags '
                        '("--name" or "--name=value")' % (extra_flags,))
        extra_flags = []
    for index, flag in enumerate(extra_flags):
        where = 'monitoring_node_exporter_extra_flags[%d]=%r' % (index, flag)
        name = flag_name(flag) if isinstance(flag, str) and not _CONTROL.search(flag) else None
        if name is None:
            problems.append('%s: expected one node_exporter flag, "--name" or "--name=value", without line breaks' % where)
        elif name == TEXTFILE_FLAG:
            problems.append('%s: set monitoring_textfile_dir instead (the server role writes there too)' % where)
        elif name in seen:
            problems.append('%s: --%s is given twice (also %r, the role\'s or yours); node_exporter refuses a repeated '
                            'flag' % (where, name, seen[name]))
        elif name in operator_names:
            problems.append('%s: ARGS in %s already sets --%s (%r); node_exporter refuses a repeated flag. Keep one: '
                            'remove it from ARGS or from monitoring_node_exporter_extra_flags'
                            % (where, DEFAULTS_FILE, name, operator_names[name]))
        else:
            seen[name] = flag
            flags.append(flag)
    textfile_word = operator_names.get(TEXTFILE_FLAG)
    if textfile_word is not None:
        operator_dir = textfile_word.partition('=')[2] if '=' in textfile_word else None
        if operator_dir is None:
            index = operator.index(textfile_word)
            operator_dir = operator[index + 1] if index + 1 < len(operator) else ''
        if operator_dir.rstrip('/') != str(textfile_dir).rstrip('/'):
            problems.append('monitoring_textfile_dir=%r: ARGS in %s reads the textfile collector from %r instead. '
                            'Set monitoring_textfile_dir (and the server role\'s sglang_deploy_metrics_dir) to %r, '
                            'or take --%s out of ARGS' % (textfile_dir, DEFAULTS_FILE, operator_dir, operator_dir, TEXTFILE_FLAG))
    elif str(textfile_dir).rstrip('/') != default_textfile_dir:
        flags.insert(0, '--%s=%s' % (TEXTFILE_FLAG, textfile_dir))
    return {'flags': flags, 'problems': problems}


def dropin_text(flags, exec_start=DEBIAN_EXEC_START):
    """The role's drop-in: the packaged ExecStart (with the operator's $ARGS) and the role's flags after it."""
    return ('# llmops.sglang.monitoring: node_exporter flags the role needs (monitoring_textfile_dir,\n'
            '# monitoring_systemd_collector, monitoring_node_exporter_extra_flags), after the ARGS of %s, which stay the operator\'s.\n'
            '[Service]\nExecStart=\nExecStart=%s %s\n' % (DEFAULTS_FILE, exec_start, ' '.join(quoted(f) for f in flags)))
