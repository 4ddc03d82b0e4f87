# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whose prometheus.yml is it, and does it have what llmops.sglang.monitoring needs? Pure logic, no I/O.

The monitoring host may scrape other things too: its prometheus.yml is the operator's. The role writes the whole
file only when nobody else's configuration can be lost (``judge``):

- the file is absent (a fresh host: the package is not installed yet);
- it is byte for byte Debian's packaged default: its md5 is the one dpkg recorded for the conffile
  (``dpkg-query --showformat='${Conffiles}'``), so nobody edited it;
- it is the role's own file, unedited: its first line is ``OWNED_MARK`` with the sha256 of the lines below it,
  and they still hash to that (``owned_text`` makes such a file).

Any other file is the operator's and is never rewritten. It is parsed (with the YAML loader the caller hands in) and
checked for what the role's files need: ``rule_files`` with a pattern that matches the role's rule file, for each of
the role's jobs (``sglang``, ``node``, ``router``; the rules and the dashboard select on these job names) a scrape
job of that name whose ``file_sd_configs`` read the role's target file, and the alertmanagers the role was given.
Complete: the role keeps it as it is. Not: the role stops before it changes anything, and the message says exactly
what to add (a YAML snippet).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import fnmatch
import hashlib
import posixpath
import re

OWNED_MARK = '# llmops.sglang.monitoring owns this file whole'
_OWNED_LINE = re.compile(r'^' + re.escape(OWNED_MARK) + r' \(sha256 of the lines below: ([0-9a-f]{64})\)\.')
OWNED_HINT = 'Edit it and the role leaves it to you (and only checks that it still reads the role\'s files).'
JOBS = ('sglang', 'node', 'router')


class ConfigError(ValueError):
    pass


def owned_text(body):
    """The role's whole prometheus.yml: the mark with the sha256 of ``body``, then ``body``."""
    if not body.endswith('\n'):
        body += '\n'
    digest = hashlib.sha256(body.encode('utf-8')).hexdigest()
    return '%s (sha256 of the lines below: %s). %s\n%s' % (OWNED_MARK, digest, OWNED_HINT, body)


def is_owned(data):
    """Whether ``data`` (bytes) is a file ``owned_text`` made, unedited since."""
    first, sep, rest = data.partition(b'\n')
    if not sep:
        return False
    match = _OWNED_LINE.match(first.decode('utf-8', 'replace'))
    return bool(match) and hashlib.sha256(rest).hexdigest() == match.group(1)


def dpkg_state(text):
    """``dpkg-query --show --showformat='${Package} ${db:Status-Status}\\n${Conffiles}\\n' PKG...`` output ->
    {'installed': {package: bool}, 'conffiles': {path: md5}} (conffile lines start with a space)."""
    installed = {}
    conffiles = {}
    for line in (text or '').splitlines():
        if line.startswith(' '):
            fields = line.split()
            if len(fields) >= 2 and re.match(r'^[0-9a-f]{32}$', fields[1]):
                conffiles[fields[0]] = fields[1]
        elif line.strip():
            fields = line.split()
            installed[fields[0]] = len(fields) > 1 and fields[1] == 'installed'
    return {'installed': installed, 'conffiles': conffiles}


def _glob_match(path, pattern, base):
    """Whether Prometheus's filepath.Glob of ``pattern`` (relative to ``base``) would find ``path``: one segment per
    '/' (a '*' never crosses one)."""
    if not isinstance(pattern, str) or not pattern:
        return False
    if not pattern.startswith('/'):
        pattern = posixpath.join(base, pattern)
    parts, wanted = posixpath.normpath(pattern).split('/'), posixpath.normpath(path).split('/')
    return len(parts) == len(wanted) and all(fnmatch.fnmatchcase(w, p) for w, p in zip(wanted, parts))


def _list(value):
    return value if isinstance(value, list) else []


def _dicts(value):
    return [item for item in _list(value) if isinstance(item, dict)]


def needs_of(config_dir, rule_file_name, alertmanagers):
    """What the role needs from prometheus.yml, given its directory."""
    return {
        'rule_file': posixpath.join(config_dir, 'rules', rule_file_name),
        'jobs': dict((job, posixpath.join(config_dir, 'file_sd', 'llmops-sglang-%s.json' % job)) for job in JOBS),
        'alertmanagers': list(alertmanagers or []),
    }


def missing(config, needs, base):
    """What a parsed prometheus.yml lacks: [(what, section, text)]; section: rule_files, scrape_configs, alerting
    (lines under that top-level key) or amend (an existing job's)."""
    if not isinstance(config, dict):
        raise ConfigError('it is not a YAML mapping (got %s)' % type(config).__name__)
    found = []
    if not any(_glob_match(needs['rule_file'], p, base) for p in _list(config.get('rule_files'))):
        found.append(('rule_files has no pattern matching %s' % needs['rule_file'], 'rule_files',
                      '  - %s/*.yml' % posixpath.dirname(needs['rule_file'])))
    jobs = _dicts(config.get('scrape_configs'))

    def reads(job, target_file):
        return any(_glob_match(target_file, f, base) for sd in _dicts(job.get('file_sd_configs')) for f in _list(sd.get('files')))
    for job, target_file in sorted(needs['jobs'].items()):
        named = [j for j in jobs if j.get('job_name') == job]
        if any(reads(j, target_file) for j in named):
            continue
        entry = '      - files: ["%s"]' % target_file
        if named:
            found.append(('scrape job %r does not read %s' % (job, target_file), 'amend',
                          '# in the existing job_name: %s (one more entry where it has file_sd_configs already):\n'
                          '    file_sd_configs:\n%s' % (job, entry)))
        else:
            others = [str(j.get('job_name')) for j in jobs if reads(j, target_file)]
            why = ' (job %s reads it, but the rules and the dashboard select job="%s")' % (', '.join(others), job) if others else ''
            found.append(('no scrape job %r reads %s%s' % (job, target_file, why), 'scrape_configs',
                          '  - job_name: %s\n    file_sd_configs:\n%s' % (job, entry)))
    if needs['alertmanagers']:
        alerting = config.get('alerting') if isinstance(config.get('alerting'), dict) else {}
        have = set(str(t) for am in _dicts(alerting.get('alertmanagers')) for sc in _dicts(am.get('static_configs'))
                   for t in _list(sc.get('targets')))
        lacking = [t for t in needs['alertmanagers'] if t not in have]
        if lacking:
            found.append(('alerting does not send to %s (monitoring_alertmanagers)' % ', '.join(lacking), 'alerting',
                          '  alertmanagers:\n    - static_configs:\n        - targets: [%s]'
                          % ', '.join('"%s"' % t for t in lacking)))
    return found


def snippet(lacks):
    """The YAML to add for ``missing()``'s findings, one block per top-level key."""
    blocks = []
    for section in ('rule_files', 'scrape_configs', 'alerting'):
        parts = [text for _what, where, text in lacks if where == section]
        if parts:
            blocks.append('%s:\n%s' % (section, '\n'.join(parts)))
    blocks.extend(text for _what, where, text in lacks if where == 'amend')
    return '\n'.join(blocks)


def judge(content, exists, path, packaged_md5, needs, load):
    """The role's verdict on the prometheus.yml at ``path``.

    content: the file's bytes base64-encoded (``slurp``), or None; exists: whether the file is there;
    packaged_md5: dpkg's md5 of the conffile (None or '' when the package is not installed);
    needs: ``needs_of(...)``; load: a YAML loader (text -> data) that raises on bad YAML.
    Returns {'action': 'write' | 'keep' | 'refuse', 'owner': 'none' | 'debian' | 'role' | 'operator',
    'missing': [what...], 'msg': str}.
    """
    if not exists:
        return {'action': 'write', 'owner': 'none', 'missing': [],
                'msg': '%s does not exist yet: the role writes it whole' % path}
    try:
        data = base64.b64decode(content or '', validate=True)
    except (binascii.Error, ValueError, TypeError):
        raise ConfigError('the content of %s is not base64 (slurp)' % path)
    if packaged_md5 and hashlib.md5(data).hexdigest() == packaged_md5:  # dpkg's own conffile digest, no security
        return {'action': 'write', 'owner': 'debian', 'missing': [],
                'msg': '%s is Debian\'s packaged default, unedited (dpkg\'s md5 %s): the role writes it whole'
                       % (path, packaged_md5)}
    if is_owned(data):
        return {'action': 'write', 'owner': 'role', 'missing': [],
                'msg': '%s is the role\'s own, unedited since it wrote it: the role writes it whole' % path}
    base = posixpath.dirname(path)
    try:
        config = load(data.decode('utf-8'))
        lacks = missing(config, needs, base)
    except ConfigError as exc:
        return {'action': 'refuse', 'owner': 'operator', 'missing': [str(exc)],
                'msg': '%s is not the role\'s (edited, or written by someone else) and %s; the role changed nothing'
                       % (path, exc)}
    except Exception as exc:  # pylint: disable=broad-except  # the loader's own error: YAML, UnicodeDecodeError
        return {'action': 'refuse', 'owner': 'operator', 'missing': ['it does not parse as YAML'],
                'msg': '%s is not the role\'s and does not parse as YAML (%s); the role changed nothing'
                       % (path, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}
    if not lacks:
        return {'action': 'keep', 'owner': 'operator', 'missing': [],
                'msg': '%s is the operator\'s and reads the role\'s rule and target files: the role keeps it as it '
                       'is (its global settings and alerting are the operator\'s; monitoring_scrape_interval, '
                       'monitoring_scrape_timeout and monitoring_evaluation_interval do not apply)' % path}
    return {'action': 'refuse', 'owner': 'operator', 'missing': [lack[0] for lack in lacks],
            'snippet': snippet(lacks),
            'msg': '%s is the operator\'s (not Debian\'s default, not the role\'s file) and lacks what the role '
                   'needs: %s. The role changed nothing and never rewrites it. Add (merging with what is there):\n%s\n'
                   'then run the role again (promtool check config %s checks the result).'
                   % (path, '; '.join(lack[0] for lack in lacks), snippet(lacks), path)}
