# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_exporter's systemd collector flags for the SGLang units of a host. Pure, no I/O.

SGLangCrashLoop counts systemd's own restarts of each SGLang unit (NRestarts) through node_exporter 1.5's systemd
collector (``node_systemd_service_restart_total``, with ``--collector.systemd.enable-restarts-metrics``). Its
``--collector.systemd.unit-include`` is a Go regular expression, anchored by node_exporter; it is written into a
systemd drop-in's ``ExecStart=``, where a backslash is an escape of systemd's own, so a dot is ``[.]`` here, never
``\\.``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_UNIT_RE = re.compile(r'^[A-Za-z0-9:_.@-]+$')
FLAGS = ('--collector.systemd', '--collector.systemd.enable-restarts-metrics')
# The flags the drop-in sets; node_exporter (kingpin) refuses to start when one of them is given twice.
OWN_FLAG_RE = re.compile(r'--(?:no-)?collector\.systemd(?:[.=\s"\']|$)')


def unit_include(units):
    """``['sglang-k26.service', 'b']`` -> ``(b|sglang-k26)[.]service`` (sorted, each name once)."""
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


def exec_start_flags(units):
    """The flags the drop-in appends to node_exporter's command line after the operator's $ARGS."""
    return ' '.join(FLAGS + ('--collector.systemd.unit-include=' + unit_include(units),))


def args_conflict(default_file_text):
    """The operator's ARGS line(s) of /etc/default/prometheus-node-exporter that set a flag the drop-in sets, else []."""
    found = []
    for line in (default_file_text or '').splitlines():
        stripped = line.strip()
        if stripped.startswith('ARGS=') and OWN_FLAG_RE.search(stripped):
            found.append(stripped)
    return found
