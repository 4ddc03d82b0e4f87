# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The router's desired workers: what a router that restarts by itself comes back with (no I/O; docs/router.md).

sglang-router 0.3.2 keeps its workers in memory only. The role keeps, on the router's host, the list of the workers
that router should route to in a root-only file (``/var/lib/llmops-sglang/router/NAME.workers.json``, root 0600 in
a root 0700 directory), changed in step with every registration and every drain by ``sglang_router_workers``
(``desired_file``), and handed to the router at every start by systemd (``LoadCredential=``) and the launcher
(``roles/router/files/router_launch.py``, which gives it to the router as ``--worker-urls``).

The file: ``{"workers": ["http://HOST:PORT", ...]}`` (sorted, one URL once), nothing else: no key (the router uses
its own ``--api-key`` for the workers it is started with, measured on 0.3.2: they are listed with their model).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.llmops.sglang.plugins.module_utils.router.router_rotation import normalize_url

MAX_WORKERS = 4096


def _valid_url(url):
    """A worker URL as the router takes it: http(s)://HOST:PORT with nothing else (no user, path, space)."""
    if not isinstance(url, str) or not url.startswith(('http://', 'https://')):
        return False
    rest = url.split('://', 1)[1]
    if not rest or any(ch in rest for ch in '/?#@ \t\r\n\\"\''):
        return False
    return True


def parse(data):
    """The worker URLs of a desired-workers file's bytes (or text); raises ValueError saying what is wrong."""
    if isinstance(data, bytes):
        data = data.decode('utf-8')
    problem = None
    try:
        doc = json.loads(data or '')
    except ValueError as err:
        problem = 'not JSON (%s)' % err
    if problem:
        raise ValueError(problem)
    if not isinstance(doc, dict) or not isinstance(doc.get('workers'), list):
        raise ValueError('expected {"workers": [URL, ...]}')
    urls = doc['workers']
    if len(urls) > MAX_WORKERS:
        raise ValueError('%d workers: more than %d' % (len(urls), MAX_WORKERS))
    bad = [url for url in urls if not _valid_url(url)]
    if bad:
        raise ValueError('not a worker URL (http://HOST:PORT): %r' % (bad[0],))
    return sorted(set(normalize_url(url) for url in urls))


def render(urls):
    """The file's bytes for these worker URLs (sorted, each once; a trailing newline)."""
    urls = sorted(set(normalize_url(url) for url in urls))
    bad = [url for url in urls if not _valid_url(url)]
    if bad:
        raise ValueError('not a worker URL (http://HOST:PORT): %r' % (bad[0],))
    return (json.dumps({'workers': urls}, indent=1) + '\n').encode('utf-8')


def after(saved, listing, wanted, state, prune=False):
    """The desired workers after one ``sglang_router_workers`` call, sorted.

    saved: the file's URLs, or None when there is no file yet (then the router's listing before the call is the
    starting point: a router deployed before the file existed keeps what it routes to); listing: the URLs the router
    lists; wanted: the call's workers; state: present (added, and with prune the file becomes exactly ``wanted``),
    absent (removed), listed (unchanged)."""
    base = set(normalize_url(url) for url in (listing if saved is None else saved))
    wanted = set(normalize_url(url) for url in wanted)
    if state == 'present':
        base = set(wanted) if prune else base | wanted
    elif state == 'absent':
        base = base - wanted
    elif state != 'listed':
        raise ValueError('state must be present, absent or listed, got %r' % (state,))
    return sorted(base)
