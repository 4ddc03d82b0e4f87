"""Log lines in SGLang's format, written unbuffered, plus the benchmark event log.

SGLang's logger writes `[YYYY-MM-DD HH:MM:SS] msg` (main process) and `[YYYY-MM-DD HH:MM:SS TPn] msg`
(scheduler of TP rank n) to stderr; uvicorn's access log goes to stdout. Every line is one os.write so that
lines of several processes sharing the journal's pipe never interleave and journald sees them at once.
"""
import json
import os
import time

STDOUT = 1
STDERR = 2


def timestamp():
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())


def _write(fd, text):
    data = text.encode("utf-8", "replace")
    while data:
        try:
            written = os.write(fd, data)
        except InterruptedError:
            continue
        except OSError:
            return  # the reader is gone (journal pipe closed): logging must never crash the server
        data = data[written:]


class Logger(object):
    """One process's logger; `prefix` is '' for the main process and 'TPn' for a scheduler."""

    def __init__(self, prefix=""):
        self.prefix = prefix

    def info(self, msg):
        tag = timestamp() + (" " + self.prefix if self.prefix else "")
        _write(STDERR, "[%s] %s\n" % (tag, msg))

    warning = info
    error = info

    def raw(self, text, fd=STDERR):
        """Unprefixed output (tqdm bars, a compiler's stderr)."""
        _write(fd, text if text.endswith("\n") else text + "\n")

    def access(self, client, request_line, status, phrase):
        """uvicorn's access log line, with SGLang's date prefix."""
        _write(STDOUT, '[%s] INFO:     %s - "%s" %d %s\n' % (timestamp(), client, request_line, status, phrase))

    def uvicorn(self, msg):
        _write(STDERR, "[%s] INFO:     %s\n" % (timestamp(), msg))

    def uvicorn_error(self, msg):
        _write(STDERR, "[%s] ERROR:    %s\n" % (timestamp(), msg))


def event(name, **fields):
    """Append one JSON line to $SGLANG_STANDIN_EVENT_LOG (if set) at the moment of the event."""
    record = {"event": name, "time": time.time(), "monotonic": time.monotonic(), "pid": os.getpid()}
    record.update(fields)
    append_json_line(os.environ.get("SGLANG_STANDIN_EVENT_LOG"), record)


def append_json_line(path, record):
    """One JSON line appended to path (nothing when path is empty) in one write with O_APPEND, so the lines of
    several processes and threads stay whole; a path that cannot be opened is skipped (a test log, never fatal)."""
    if not path:
        return
    line = (json.dumps(record, sort_keys=True) + "\n").encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        return
    try:
        os.write(fd, line)  # O_APPEND + one write: lines from several processes stay whole
    finally:
        os.close(fd)


def format_tqdm(desc, done, total, elapsed):
    """A tqdm progress line as SGLang's loaders print it (one line per update, so a journal watcher sees progress)."""
    pct = int(100 * done / total) if total else 100
    rate = elapsed / done if done else 0.0
    remaining = rate * (total - done)
    if done:
        speed = ("%5.2fit/s" % (1.0 / rate)) if rate and rate < 1 else ("%5.2fs/it" % rate)
    else:
        speed = "?it/s"
    return "%s: %3d%% Completed | %d/%d [%s<%s, %s]" % (
        desc, pct, done, total, _clock(elapsed), _clock(remaining) if done else "?", speed)


def format_capture_bar(bs, avail_gb, done, total, elapsed):
    """The CUDA graph capture bar: `Capturing batches (bs=8 avail_mem=20.50 GB):  50%|#####     | 4/8 [...]`."""
    pct = int(100 * done / total) if total else 100
    filled = pct // 10
    blocks = "#" * filled + " " * (10 - filled)
    rate = (done / elapsed) if elapsed > 0 and done else 0.0
    remaining = ((total - done) / rate) if rate else 0.0
    return "Capturing batches (bs=%d avail_mem=%.2f GB): %3d%%|%s| %d/%d [%s<%s, %5.2fit/s]" % (
        bs, avail_gb, pct, blocks, done, total, _clock(elapsed), _clock(remaining), rate)


def _clock(seconds):
    seconds = int(seconds)
    return "%02d:%02d" % (seconds // 60, seconds % 60)


def raw_stderr(text):
    """A bare line on stderr (what Python's last-resort logging handler prints before logging is configured)."""
    _write(STDERR, text if text.endswith("\n") else text + "\n")
