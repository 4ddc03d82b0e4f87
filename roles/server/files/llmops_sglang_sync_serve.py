# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The only command the model sync account runs; docs/model-sync.md. Its authorized_keys lines are
restrict,command="/usr/bin/python3 -I /usr/local/lib/llmops-sglang-sync/llmops_sglang_sync_serve.py" (-I: no
PYTHON* environment, no user site, not even this directory on sys.path until the line below puts it there).

Installed by the server role (tasks/model_sync.yml), root-owned, next to model_sync_access.py (the
collection's plugins/module_utils/model/model_sync_access.py, which decides whether a request is allowed). Answers:
- `state VERSIONS_DIR/VERSION`: ready, failed or pending;
- `read OFFSET VERSIONS_DIR/VERSION/FILE`: the file's bytes from OFFSET on, on stdout;
- `follow OFFSET SIZE STALL RATE VERSIONS_DIR/VERSION/FILE`: the file's bytes from OFFSET up to SIZE, from the
  complete version or, while this host still receives it, from its staging directory as the file grows
  (pipelined distribution), at most RATE bytes/s; an error when this host's own sync failed or nothing arrived for
  STALL seconds;
for the versions directories listed in ROOTS (root-owned, one file per server instance). Every component below the
versions directory is opened with O_NOFOLLOW relative to its parent: a symlink there is refused, never followed.
Everything else is refused on stderr with exit code 2 and logged to the journal (auth facility).
"""

import errno
import os
import stat
import sys
import syslog
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from model_sync_access import MARKER_NAME, FAILED_NAME, STAGING_PREFIX, Refused, follow_verdict, pace, parse_request, parse_roots  # noqa: E402 pylint: disable=wrong-import-position,import-error

ROOTS = '/etc/llmops-sglang-sync/roots.d'
CHUNK = 1 << 20


def roots():
    texts = []
    try:
        names = sorted(os.listdir(ROOTS))
    except OSError:
        return []
    for name in names:
        try:
            with open(os.path.join(ROOTS, name)) as handle:
                texts.append(handle.read())
        except OSError:
            continue
    return parse_roots(texts)


def open_beneath(root, parts, last_flags):
    """fd of root/parts[0]/.../parts[-1], each component opened with O_NOFOLLOW relative to its parent."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = child
        return os.open(parts[-1], last_flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    finally:
        os.close(fd)


def is_file(root, parts):
    try:
        fd = open_beneath(root, parts, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    finally:
        os.close(fd)


def refuse(reason):
    syslog.syslog(syslog.LOG_WARNING, 'refused: %s' % reason)
    sys.stderr.write('llmops-sglang-sync-serve: refused: %s\n' % reason)
    return 2


def write_all(out, block):
    view = memoryview(block)
    while view:
        view = view[os.write(out, view):]


def open_growing(root, parts, path):
    """fd of the file in the complete version (its marker is there) or else in the staging directory, or None
    when neither has it yet; Refused for a symlink or something else than a regular file."""
    version, rest = parts[0], parts[1:]
    top = version if is_file(root, [version, MARKER_NAME]) else STAGING_PREFIX + version
    try:
        fd = open_beneath(root, [top] + rest, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Refused('%s: %s (symlinks below %s are not followed)' % (path, exc.strerror, root))
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise Refused('%s is not a regular file' % path)
    return fd


def follow(req):
    """Sends the file from the offset up to the size the reader gave, as its bytes land here."""
    root, parts = req['root'], req['parts']
    path = '/'.join([root] + parts)
    failed = [STAGING_PREFIX + parts[0], FAILED_NAME]
    position, size, stall, rate = req['offset'], req['size'], req['stall'], req['rate']
    syslog.syslog(syslog.LOG_INFO, 'follow %s from byte %d to %d' % (path, position, size))
    started = last = time.monotonic()
    fd = None
    out = sys.stdout.fileno()
    try:
        while True:
            if fd is None:
                fd = open_growing(root, parts, path)
                if fd is not None:
                    os.lseek(fd, position, os.SEEK_SET)
            block = os.read(fd, min(CHUNK, size - position)) if fd is not None and position < size else b''
            now = time.monotonic()
            if block:
                write_all(out, block)
                position += len(block)
                last = now
                time.sleep(pace(position - req['offset'], now - started, rate))
                continue
            verdict = follow_verdict(position, size, is_file(root, failed), now - last, stall)
            if verdict == 'done':
                return 0
            if verdict == 'failed':
                why = '%s: this host\'s own sync of %s failed at byte %d (%s)'
                return refuse(why % (path, parts[0], position, FAILED_NAME))
            if verdict == 'stalled':
                return refuse('%s: stalled at byte %d of %d, nothing arrived for %ds' % (path, position, size, stall))
            time.sleep(0.05)
    except Refused as exc:
        return refuse(str(exc))
    finally:
        if fd is not None:
            os.close(fd)


def serve(text):
    try:
        req = parse_request(text, roots())
    except Refused as exc:
        return refuse(str(exc))
    root, parts = req['root'], req['parts']
    if req['op'] == 'state':
        version = parts[0]
        answer = 'ready' if is_file(root, [version, MARKER_NAME]) else (
            'failed' if is_file(root, [STAGING_PREFIX + version, FAILED_NAME]) else 'pending')
        sys.stdout.write(answer + '\n')
        return 0
    if req['op'] == 'follow':
        return follow(req)
    path = '/'.join([root] + parts)
    if not is_file(root, [parts[0], MARKER_NAME]):
        return refuse('%s: version %s is not complete here (no %s)' % (path, parts[0], MARKER_NAME))
    try:
        fd = open_beneath(root, parts, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return refuse('%s: %s (symlinks below %s are not followed)' % (path, exc.strerror, root))
        return refuse('%s: %s' % (path, exc.strerror))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return refuse('%s is not a regular file' % path)
        syslog.syslog(syslog.LOG_INFO, 'read %s from byte %d' % (path, req['offset']))
        os.lseek(fd, req['offset'], os.SEEK_SET)
        out = sys.stdout.fileno()
        while True:
            block = os.read(fd, CHUNK)
            if not block:
                return 0
            view = memoryview(block)
            while view:
                view = view[os.write(out, view):]
    finally:
        os.close(fd)


def main():
    syslog.openlog('llmops-sglang-sync-serve', syslog.LOG_PID, syslog.LOG_AUTH)
    try:
        return serve(os.environ.get('SSH_ORIGINAL_COMMAND', ''))
    except BrokenPipeError:
        return 1


if __name__ == '__main__':
    sys.exit(main())
