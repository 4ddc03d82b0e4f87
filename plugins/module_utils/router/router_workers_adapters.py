# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The I/O of sglang_router_workers (what it means is router_workers.py's): the router's worker API and client API,
a worker's /metrics, and the router host's desired-workers file (router_desired_adapters). Each raises the error the
module fails with (router_workers.RouterError, DesiredFileError), its message saying which call or file and why.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json
from urllib.parse import quote

from ansible_collections.llmops.sglang.plugins.module_utils.router import router_desired_adapters
from ansible_collections.llmops.sglang.plugins.module_utils.host.file_adapters import UnsafePath
from ansible_collections.llmops.sglang.plugins.module_utils.router.router_rotation import listed
from ansible_collections.llmops.sglang.plugins.module_utils.router.router_workers import DesiredFileError, RouterError


class Router(object):
    """One router over HTTP. open_url: ansible.module_utils.urls.open_url (the module passes it: this room imports no
    ansible); api_key is sent as a Bearer header, never logged."""

    def __init__(self, url, api_key, timeout, open_url):
        self.url = url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.open_url = open_url

    def call(self, method, path, body=None):
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        data = json.dumps(body) if body is not None else None
        try:
            response = self.open_url(self.url + path, method=method, data=data, headers=headers, timeout=self.timeout,
                                     validate_certs=True)
            raw = response.read()
        except Exception as err:  # HTTPError, URLError, socket errors: all say what went wrong
            detail = ""
            if hasattr(err, "read"):
                try:
                    detail = err.read().decode("utf-8", "replace")[:300]
                except Exception:
                    detail = ""
            raise RouterError("%s %s%s: %s %s" % (method, self.url, path, err, detail))
        try:
            return json.loads(raw.decode("utf-8") or "null")
        except ValueError:
            raise RouterError("%s %s%s: not JSON: %r" % (method, self.url, path, raw[:200]))

    def workers(self):
        return listed(self.call("GET", "/workers"))

    def remove(self, worker_id):
        self.call("DELETE", "/workers/" + quote(str(worker_id), safe=""))

    def add(self, url, api_key=None):
        body = {"url": url}
        if api_key:
            body["api_key"] = api_key
        self.call("POST", "/workers", body)

    def complete(self, model, prompt):
        self.call("POST", "/v1/completions", {"model": model, "prompt": prompt, "max_tokens": 1})

    def metrics(self, worker):
        """A worker's /metrics text (read from here, without the router's key), None when it cannot be read."""
        try:
            return self.open_url(worker + "/metrics", timeout=self.timeout).read().decode("utf-8", "replace")
        except Exception:
            return None


class DesiredFile(object):
    """The router host's desired-workers file (router_desired_adapters); path None: the call keeps none."""

    def __init__(self, path):
        self.path = path

    def _do(self, action, *args):
        try:
            return action(self.path, *args)
        except (UnsafePath, ValueError) as err:
            raise DesiredFileError("desired_file: %s" % err)
        except OSError as err:
            raise DesiredFileError("desired_file %s: %s" % (self.path, err))

    def load(self):
        return self._do(router_desired_adapters.load)

    def store(self, urls):
        return self._do(router_desired_adapters.store, urls)

    @contextlib.contextmanager
    def locked(self):
        """The file held against the other calls' read, change and write (nothing to hold without a path)."""
        fd = self._do(router_desired_adapters.lock) if self.path else None
        try:
            yield
        finally:
            router_desired_adapters.unlock(fd)
