# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What saving and restoring the last-known-good configuration does, decided from contents (no I/O).

The copy is a flat directory of files: one per live configuration file (``unit``, ``env``, ``secrets.env``, by the
names the role gives them) and ``pins.json``, the package versions that served. ``save_plan`` says what the copy
must hold so that it equals the live files; ``restore_plan`` what each live file must become (written, or removed
when it did not exist when the copy was made) and which pins to install. The I/O (descriptors that follow no other
user's links, whole writes and renames) is file_adapters'; the wiring is sglang_last_good's.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

PINS = 'pins.json'
REQUIRED = 'unit'  # without a unit there is nothing to start: neither saved nor restored
NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]*$')


class LastGoodError(Exception):
    """A save or restore that must not happen: the message says what is missing or wrong."""


def check_names(files):
    """The saved names must be plain file names, and none may be pins.json (the copy's own)."""
    if REQUIRED not in files:
        raise LastGoodError('files must name the %r file (the unit that serves), got %s'
                            % (REQUIRED, ', '.join(sorted(files)) or 'none'))
    for name in files:
        if not NAME.match(name) or name == PINS:
            raise LastGoodError('files: %r is not a name the copy can hold (a plain file name other than %s)'
                                % (name, PINS))


def pins_text(pins):
    """pins.json as the role always wrote it (to_nice_json): only versions, sorted, indented by four."""
    clean = dict((str(k), v) for k, v in (pins or {}).items())
    return json.dumps(clean, indent=4, sort_keys=True, separators=(',', ': ')) + '\n'


def save_plan(live, pins, saved):
    """The copy's files {name: bytes} for the live files {name: bytes, or None when absent} and the pins, and whether
    it differs from the copy saved now ({name: bytes}, or None when there is none). A live file that is absent is
    absent from the copy (a restore then removes it)."""
    if live.get(REQUIRED) is None:
        raise LastGoodError('the %s file is missing: there is no configuration to save' % REQUIRED)
    copy = dict((name, data) for name, data in live.items() if data is not None)
    copy[PINS] = pins_text(pins).encode('utf-8')
    return copy, copy != saved


def parse_pins(data):
    """{package: version} from pins.json's bytes ({} for none, or for anything that is not a JSON object)."""
    try:
        pins = json.loads((data or b'null').decode('utf-8'))
    except ValueError:
        return {}
    if not isinstance(pins, dict):
        return {}
    return dict((k, v) for k, v in pins.items() if v is not None)


def restore_plan(saved, live):
    """(writes {name: bytes}, removals [name], pins) that make each live file ({name: bytes or None}) what the copy
    ({name: bytes}) holds: written when it differs, removed when the copy has none of it."""
    if saved is None or REQUIRED not in saved:
        raise LastGoodError('no last-known-good copy (it has no %s file): nothing to restore' % REQUIRED)
    writes = dict((name, saved[name]) for name in live if name in saved and saved[name] != live[name])
    removals = sorted(name for name in live if name not in saved and live[name] is not None)
    return writes, removals, parse_pins(saved.get(PINS))


def pin_specs(pins):
    """['name==version', ...] for pip, sorted."""
    return ['%s==%s' % (name, version) for name, version in sorted(pins.items())]
