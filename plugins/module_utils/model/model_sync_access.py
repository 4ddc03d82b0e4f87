# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who may read what during a peer model sync, and which host keys are known. No I/O, standard library only.

Peer transfers (docs/model-sync.md, "Security") run as a dedicated account on the peer (default ``sglang-sync``)
whose authorized_keys entries force one command, the role's ``llmops_sglang_sync_serve.py``
(roles/server/files/). That script reads SSH_ORIGINAL_COMMAND and asks ``parse_request`` here whether it is one of
the two requests the module sends:

- ``state PATH``: does the version directory PATH exist whole (its marker), or did its sync fail, or neither;
- ``read OFFSET PATH``: the bytes of the file PATH from OFFSET on (what ``tail -c +OFFSET+1`` did before);
- ``follow OFFSET SIZE STALL RATE PATH``: the bytes of PATH from OFFSET up to SIZE (the reader's manifest size), also
  while the peer is still receiving that file (pipelined distribution: the script reads it from the peer's staging
  directory, ``.staging-VERSION/FILE``, as it grows), at most RATE bytes/s (0: no cap); it ends with an error when
  the peer's own sync failed (its ``.sync-failed``) or nothing arrived for STALL seconds (``follow_verdict``).

PATH must be a normalized absolute path strictly inside one of the versions directories this host serves (the
role's root-owned ``roots.d``), in a version directory whose name does not start with a dot (never a staging
directory); the script then opens it component by component with O_NOFOLLOW below that root, so a symlink never
leads out of it. Anything else is refused with the reason. The module checks its own requests with the same rules
(``check_read_request``, ``check_state_request``), so a name no peer could serve is found before any connection.

This file is also installed on the hosts next to that script (it imports it): it must stay importable without
Ansible, with nothing but the standard library.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import hashlib
import hmac
import posixpath
import re
import stat

# The characters a path component may have in a request: what checkpoint file names use (HF shards, tokenizer
# files, configuration_*.py); no spaces, quotes, globs or shell syntax, so a request is one unambiguous line.
# The names both sides agree on (module_utils/model/model_sync.py re-exports them): the marker a whole, verified version
# directory holds, the staging directory's prefix, and the note a failed sync leaves in it.
MARKER_NAME = '.llmops-model.json'
STAGING_PREFIX = '.staging-'
FAILED_NAME = '.sync-failed'

_COMPONENT = re.compile(r'^[A-Za-z0-9_.+@=,-]{1,255}$')
_OFFSET = re.compile(r'^[0-9]{1,20}$')
MAX_REQUEST = 4096
MAX_STALL = 3600  # seconds a follow may wait for bytes to arrive; a longer silence is a stalled upstream


class Refused(ValueError):
    """A request the serving side does not answer; the message says why."""


def check_root(root):
    """A versions directory as given in roots.d: absolute, normalized, not '/'. Returns it, or raises Refused."""
    if not isinstance(root, str) or not root.startswith('/') or root == '/' or posixpath.normpath(root) != root \
            or root.startswith('//') or '\n' in root or '\x00' in root:
        raise Refused('not an absolute, normalized directory: %r' % (root,))
    return root


def parse_roots(texts):
    """The versions directories named by roots.d's files (one path per line, '#' comments); bad lines are skipped."""
    roots = []
    for text in texts:
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            try:
                roots.append(check_root(line))
            except Refused:
                continue
    return sorted(set(roots))


def split_path(path, roots):
    """(root, [version, file components...]) for an absolute PATH inside one of ``roots``; Refused says why not."""
    if not isinstance(path, str) or not path.startswith('/'):
        raise Refused('expected an absolute path, got %r' % (path,))
    if path.startswith('//') or posixpath.normpath(path) != path:
        raise Refused('path %r is not normalized (no "..", ".", "//" or trailing "/")' % path)
    for root in sorted(roots, key=len, reverse=True):
        if path.startswith(root + '/'):
            parts = path[len(root) + 1:].split('/')
            for part in parts:
                if part in ('.', '..') or not _COMPONENT.match(part):
                    raise Refused('path component %r of %r is not allowed (letters, digits and "_.+@=,-" only)'
                                  % (part, path))
            if parts[0].startswith('.'):
                raise Refused('%r is not inside a version directory (%s/VERSION/...; staging and hidden '
                              'directories are not served)' % (path, root))
            return root, parts
    raise Refused('%r is outside the versions directories this host serves (%s)'
                  % (path, ', '.join(roots) or 'none configured'))


def parse_request(text, roots):
    """SSH_ORIGINAL_COMMAND -> {'op': 'read'|'state', 'root', 'parts', 'offset'}, or Refused naming the reason."""
    if not isinstance(text, str) or not text.strip():
        raise Refused('no command given (this account only serves model files: %s)' % ' | '.join(
            ('read OFFSET PATH', 'state PATH', 'follow OFFSET SIZE STALL RATE PATH')))
    if len(text) > MAX_REQUEST or any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise Refused('request too long or with control characters')
    words = text.split(' ')
    op = words[0]
    if op == 'read' and len(words) == 3:
        if not _OFFSET.match(words[1]):
            raise Refused('offset %r is not a byte count' % words[1])
        root, parts = split_path(words[2], roots)
        if len(parts) < 2:
            raise Refused('%r is a version directory, not a file in one' % words[2])
        return {'op': 'read', 'root': root, 'parts': parts, 'offset': int(words[1])}
    if op == 'follow' and len(words) == 6:
        for what, word in zip(('offset', 'size', 'stall', 'rate'), words[1:5]):
            if not _OFFSET.match(word):
                raise Refused('%s %r is not a whole number' % (what, word))
        offset, size, stall, rate = [int(w) for w in words[1:5]]
        if offset > size:
            raise Refused('offset %d is past the size %d' % (offset, size))
        if not 1 <= stall <= MAX_STALL:
            raise Refused('stall %d is not between 1 and %d seconds' % (stall, MAX_STALL))
        root, parts = split_path(words[5], roots)
        if len(parts) < 2:
            raise Refused('%r is a version directory, not a file in one' % words[5])
        return {'op': 'follow', 'root': root, 'parts': parts, 'offset': offset, 'size': size, 'stall': stall,
                'rate': rate}
    if op == 'state' and len(words) == 2:
        root, parts = split_path(words[1], roots)
        if len(parts) != 1:
            raise Refused('state takes a version directory (%s/VERSION), got %r' % (root, words[1]))
        return {'op': 'state', 'root': root, 'parts': parts, 'offset': 0}
    raise Refused('not a request this account serves: %r (only "read OFFSET PATH", "state PATH" and '
                  '"follow OFFSET SIZE STALL RATE PATH")' % text[:200])


def check_read_request(path, versions_dir, offset=0):
    """The read request for ``path`` in ``versions_dir``; Refused (a ValueError) if a peer would refuse it."""
    text = 'read %d %s' % (offset, path)
    parse_request(text, [check_root(versions_dir)])
    return text


def check_follow_request(path, versions_dir, offset, size, stall, rate):
    """The follow request for ``path`` (a file of a version in ``versions_dir``); Refused if a peer would refuse it."""
    text = 'follow %d %d %d %d %s' % (offset, size, stall, rate, path)
    parse_request(text, [check_root(versions_dir)])
    return text


def follow_verdict(position, size, failed, idle, stall):
    """What a follow does when no new byte is there to send: 'done' (SIZE reached), 'failed' (the peer's own sync
    failed: its .sync-failed exists), 'stalled' (nothing arrived for ``stall`` seconds) or 'wait' (look again)."""
    if position >= size:
        return 'done'
    if failed:
        return 'failed'
    if idle >= stall:
        return 'stalled'
    return 'wait'


def pace(sent, elapsed, rate):
    """Seconds to sleep so that ``sent`` bytes in ``elapsed`` seconds stay within ``rate`` bytes/s (0: no cap)."""
    if rate <= 0:
        return 0.0
    return max(0.0, sent / float(rate) - elapsed)


def check_state_request(version_dir):
    """The state request for a version directory; Refused if a peer would refuse it."""
    text = 'state %s' % version_dir
    parse_request(text, [check_root(posixpath.dirname(version_dir))])
    return text


def state_answer(marker_is_file, failed_is_file):
    """What ``state`` answers: ready (the marker is a regular file), failed (the staging's failure note), pending."""
    if marker_is_file:
        return 'ready'
    if failed_is_file:
        return 'failed'
    return 'pending'


# ---- host keys ----------------------------------------------------------------------------------------------

_KEY_TYPES = ('ssh-ed25519', 'ssh-rsa', 'ecdsa-sha2-nistp256', 'ecdsa-sha2-nistp384', 'ecdsa-sha2-nistp521',
              'sk-ssh-ed25519@openssh.com', 'sk-ecdsa-sha2-nistp256@openssh.com')
_HOST_PATTERN = re.compile(r'^[A-Za-z0-9_.:\[\]*?!|=+/-]+$')
# ssh options that would change which host keys count as known: the module sets them, ssh_options may not.
HOST_KEY_OPTIONS = ('stricthostkeychecking', 'userknownhostsfile', 'globalknownhostsfile', 'knownhostscommand',
                    'updatehostkeys', 'hostkeyalias', 'verifyhostkeydns', 'checkhostip')


def parse_public_key(text):
    """'TYPE BASE64 [comment]' -> (TYPE, BASE64); ValueError unless it is one public key of a known type."""
    words = (text or '').split()
    if len(words) < 2 or words[0] not in _KEY_TYPES:
        raise ValueError('expected "TYPE BASE64 [comment]" with TYPE one of %s' % ', '.join(_KEY_TYPES))
    try:
        blob = base64.b64decode(words[1].encode('ascii'), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        raise ValueError('the key is not base64')
    # the blob starts with its own type as an SSH string: a line whose two halves disagree is a paste error
    if len(blob) < 4 or blob[4:4 + int.from_bytes(blob[:4], 'big')] != words[0].encode('ascii'):
        raise ValueError('the key data is not a %s key' % words[0])
    return words[0], words[1]


def known_hosts_problem(line):
    """Why a known_hosts line given in the inventory is unusable, or None ('HOSTS TYPE BASE64 [comment]')."""
    if not isinstance(line, str) or '\n' in line:
        return 'expected one known_hosts line as a string'
    words = line.split()
    if words and words[0].startswith('@'):
        if words[0] != '@revoked':
            return 'only @revoked is allowed as a marker (a @cert-authority line would trust every key it signed)'
        words = words[1:]
    if len(words) < 3:
        return 'expected "HOSTS TYPE BASE64 [comment]", e.g. the output of ssh-keyscan -t ed25519 HOST'
    if not all(_HOST_PATTERN.match(h) for h in words[0].split(',')):
        return 'the host field %r has characters a host pattern cannot have' % words[0]
    try:
        parse_public_key(' '.join(words[1:]))
    except ValueError as exc:
        return str(exc)
    return None


def _host_field_matches(field, names):
    for pattern in field.split(','):
        if pattern.startswith('|1|'):
            try:
                salt, digest = pattern[3:].split('|', 1)
                salt = base64.b64decode(salt)
                want = base64.b64decode(digest)
            except (ValueError, binascii.Error):
                continue
            if any(hmac.compare_digest(hmac.new(salt, n.encode('utf-8'), hashlib.sha1).digest(), want) for n in names):
                return True
        elif pattern in names:
            return True
    return False


def host_lookup_names(address, port=22):
    """The names ssh looks a host up by in known_hosts: ADDRESS on port 22, else [ADDRESS]:PORT."""
    return [address] if port in (22, None) else ['[%s]:%d' % (address, port)]


def known_keys(text, address, port=22):
    """The (TYPE, BASE64) keys known_hosts ``text`` holds for ``address`` (plain or hashed names; wildcards and
    @revoked lines are not counted as known)."""
    names = host_lookup_names(address, port)
    found = []
    for line in (text or '').splitlines():
        words = line.split()
        if len(words) < 3 or words[0].startswith('#') or words[0].startswith('@'):
            continue
        if _host_field_matches(words[0], names):
            try:
                found.append(parse_public_key(' '.join(words[1:])))
            except ValueError:
                continue
    return found


def known_hosts_text(given, peers):
    """The known_hosts file the role writes: the inventory's lines, then one line per key of each peer read over
    the Ansible connection ({name, address, keys: ['TYPE BASE64 ...']}), keyed by its name and address."""
    lines = ['# Written by llmops.sglang (server role, model sync): the host keys peer transfers accept.']
    lines += [line.strip() for line in given or [] if line and line.strip()]
    for peer in peers or []:
        hosts = ','.join(sorted(set(h for h in (peer.get('name'), peer.get('address')) if h)))
        for key in peer.get('keys') or []:
            try:
                key_type, blob = parse_public_key(key)
            except ValueError:
                continue
            lines.append('%s %s %s' % (hosts, key_type, blob))
    return '\n'.join(lines) + '\n'


def ssh_options_problem(options):
    """Why ``ssh_options`` may not be used (it changes host key checking), or None."""
    for index, option in enumerate(options or []):
        text = option.strip().lower()
        previous = (options[index - 1] if index else '').strip()
        if previous == '-o' or text.startswith('-o'):
            name = text[2:].strip() if text.startswith('-o') else text
            if re.split(r'[=\s]', name, 1)[0] in HOST_KEY_OPTIONS:
                return ('%r: host key checking is fixed (StrictHostKeyChecking=yes against the role\'s known_hosts); '
                        'give the peers\' keys in sglang_model_source.known_hosts instead' % option)
    return None


# ---- ownership of the paths root writes through ----------------------------------------------------------------

def unsafe_path_problem(chain, trusted_uids=(0,)):
    """Why root must not write through a path, or None. ``chain``: [(path, st_uid, st_mode)] from '/' down to the
    path (lstat of each existing component). Every component must belong to a trusted user (root; the module adds
    the user it runs as) and be writable by nobody else (a trusted sticky directory such as /tmp or /var/tmp is
    allowed: others cannot rename what is not theirs in it). The module checks the resolved path, so a symlink in
    the chain means one appeared after it was resolved: refused unless a trusted user owns it."""
    for path, uid, mode in chain:
        if stat.S_ISLNK(mode):
            if uid not in trusted_uids:
                return '%s is a symlink owned by uid %d (root writes only through paths root owns)' % (path, uid)
            continue
        if uid not in trusted_uids:
            return ('%s belongs to uid %d, not root: that user could replace what root writes below it (chown '
                    'root:root and chmod go-w, or choose another sglang_model_source.versions_dir)' % (path, uid))
        if mode & 0o022 and not (stat.S_ISDIR(mode) and mode & stat.S_ISVTX):
            return ('%s is writable by its group or others (mode %04o): they could replace what root writes '
                    'there (chmod go-w)' % (path, stat.S_IMODE(mode)))
    return None


def ssh_port(options):
    """The port ``ssh_options`` make ssh connect to (``-p N``, ``-o Port=N``), 22 if none."""
    port = 22
    for index, option in enumerate(options or []):
        previous = (options[index - 1] if index else '').strip()
        text = option.replace(' ', '')
        if previous == '-p' and text.isdigit():
            port = int(text)
        elif text.startswith('-p') and text[2:].isdigit():
            port = int(text[2:])
        elif (previous == '-o' or text.startswith('-o')) and text.lstrip('-o').lower().startswith('port='):
            value = text.split('=', 1)[1]
            if value.isdigit():
                port = int(value)
        if port != 22:
            return port
    return port


def ssh_failure(rc, stderr):
    """Why an ssh to a peer failed, in a few words an operator can act on (the peer's name is added by the caller)."""
    text = (stderr or '').strip()
    if 'REMOTE HOST IDENTIFICATION HAS CHANGED' in text or 'Host key verification failed' in text:
        if re.search(r'No \S+ host key is known for', text):
            return 'its host key is not known (StrictHostKeyChecking=yes): refused, nothing read from it'
        return 'its host key does not match the known one (StrictHostKeyChecking=yes): refused, nothing read from it'
    if 'Permission denied' in text:
        return 'it does not accept this host\'s sync key for the sync account (%s)' % text.splitlines()[-1][:200]
    if 'refused:' in text:
        return 'it refused the request: %s' % text.split('refused:', 1)[1].strip()[:300]
    return 'unreachable (ssh rc=%s): %s' % (rc, text[-300:])


# ---- the sync account's authorized_keys ------------------------------------------------------------------------

KEY_COMMENT = 'llmops-sglang-sync:'


def authorized_key_line(command, public_key, host):
    """One entry: the host's key, restricted (no pty, forwarding, agent, X11, user rc) to the forced command."""
    key_type, blob = parse_public_key(public_key)
    if '"' in command or '\\' in command:
        raise ValueError('the forced command may not contain quotes or backslashes: %r' % command)
    return 'restrict,command="%s" %s %s %s%s' % (command, key_type, blob, KEY_COMMENT, host)


def authorized_keys_text(before, entries, command):
    """The sync account's authorized_keys: the lines of ``before`` that are not ours for a host of ``entries``
    ([{name, public_key}]), then one restricted line per entry with a usable key. Lines of other plays' hosts stay."""
    names = set(entry['name'] for entry in entries)
    kept = []
    for line in (before or '').splitlines():
        words = line.split()
        if words and words[-1].startswith(KEY_COMMENT) and words[-1][len(KEY_COMMENT):] in names:
            continue
        if line.strip():
            kept.append(line.rstrip())
    for entry in sorted(entries, key=lambda e: e['name']):
        try:
            kept.append(authorized_key_line(command, entry.get('public_key') or '', entry['name']))
        except ValueError:
            continue
    return '\n'.join(kept) + '\n'
