# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection reads of an SGLang server's own /metrics (0.5.23's Prometheus names). Pure, no I/O.

Read by the drain (router/: a worker's requests in flight before its restart) and by the canary analysis (canary/: a
live baseline left alone by other clients before the window)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# srt/observability/metrics_collector.py:365,371 (gauges, one sample per rank)
IN_FLIGHT_GAUGES = ("sglang:num_running_reqs", "sglang:num_queue_reqs")
_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s+(\S+)")


def in_flight(metrics_text):
    """Requests an SGLang server holds (running + queued), summed over its ranks' samples, from its /metrics text;
    None when the text has neither gauge (metrics off, or not SGLang)."""
    total, seen = 0.0, False
    for line in (metrics_text or "").splitlines():
        match = _SAMPLE.match(line)
        if not match or match.group(1) not in IN_FLIGHT_GAUGES:
            continue
        try:
            total += float(match.group(3))
        except ValueError:
            continue
        seen = True
    return int(total) if seen else None
