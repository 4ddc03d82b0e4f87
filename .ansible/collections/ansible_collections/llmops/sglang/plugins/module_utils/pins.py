# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SGLang release this collection knows and the packages it pins with it: the one place for these facts.

Read by sglang_signatures (RELEASE), the server role (its default sglang_compressed_tensors_version, through the
filter llmops.sglang.sglang_pin), the local fleet's package mirror, the bench and the integration tests
(tests/fleet/client.py loads this file by path: the fleet runs before any venv exists), and tests/conformance, which
fetches exactly this release and holds PINS against the wheel's Requires-Dist. Pure data, no imports: keep it so.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The SGLang release every table of this collection was checked against (tests/conformance reads this line).
RELEASE = '0.5.23'

# package -> version pinned with RELEASE (compressed-tensors: what sglang 0.5.23 pins, Requires-Dist
# compressed-tensors==0.18.0; >= 0.10.0 is needed for nvfp4-pack-quantized checkpoints such as Kimi K2.6's).
PINS = {
    'sglang': RELEASE,
    'compressed-tensors': '0.18.0',
}


def pin(package):
    """The version pinned for package; a clear error for a package that has no pin."""
    try:
        return PINS[package]
    except KeyError:
        raise ValueError('no pin for %r: pinned packages are %s' % (package, ', '.join(sorted(PINS))))
