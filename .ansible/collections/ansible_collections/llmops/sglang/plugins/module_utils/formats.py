# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the collection writes a duration for people: the waiter's messages, the live progress lines and the fleet
report all format through here. Pure, no I/O."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def fmt_duration(seconds):
    """Whole seconds, for messages and progress lines: `59s`, `3m12s`, `1h02m`."""
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return '%ds' % seconds
    if seconds < 3600:
        return '%dm%02ds' % divmod(seconds, 60)
    hours, rest = divmod(seconds, 3600)
    return '%dh%02dm' % (hours, rest // 60)


def fmt_seconds(value):
    """A tenth of a second below a minute, for the fleet report's time to ready: `39.3s`, `15m02s`; `-` for none."""
    if value is None or value == '':
        return '-'
    value = float(value)
    if value >= 60:
        return '%dm%02ds' % (value // 60, value % 60)
    return '%.1fs' % value
