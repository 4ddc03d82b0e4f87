# -*- coding: utf-8 -*-
"""Make the collection importable as ansible_collections.llmops.sglang when pytest runs from a checkout.

The checkout is not laid out under ansible_collections/llmops/sglang, so `make setup` links it there (in .build);
this does the same for a bare `pytest` run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(ROOT, '.build', 'collections')
LINK = os.path.join(COLLECTIONS, 'ansible_collections', 'llmops', 'sglang')

if not os.path.exists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(os.path.join('..', '..', '..', '..'), LINK)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
