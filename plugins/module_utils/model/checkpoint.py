# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checkpoint integrity gate's decisions: download in progress, safetensors framing, manifest. No I/O.

The adapters (checkpoint_adapters) list, stat, read headers and hash; these functions judge. They take a directory's
facts, not the directory, so whatever verifies a checkpoint (the preflight's gate, the model sync's staging
directory) asks the same questions the same way.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import struct

CHECKPOINT_CHECKS = ('download_in_progress', 'shard_growing', 'shard_invalid', 'manifest_missing', 'manifest_size',
                     'manifest_hash')

# aria2 keeps FILE.aria2 next to a file it is still downloading; huggingface_hub writes BLOB.incomplete and holds
# BLOB.lock (its cache, or LOCAL_DIR/.cache/huggingface/download/ for --local-dir) until a file is complete.
MARKER_SUFFIXES = ('.aria2', '.incomplete', '.lock')

# safetensors refuses a header longer than this (safetensors/src/tensor.rs: MAX_HEADER_SIZE = 100_000_000).
MAX_HEADER_SIZE = 100000000

# The texts real safetensors raises (`SafetensorError: Error while deserializing header: TEXT`), from running
# safetensors 0.6.2 and 0.8.0 on crafted files (tensor.rs read_metadata: `buffer_end + 8 + n != buffer_len` is
# MetadataIncompleteBuffer, whose message is the one below).
ERR_TOO_SMALL = 'header too small'
ERR_TOO_LARGE = 'header too large'
ERR_HEADER_LENGTH = 'invalid header length'
ERR_INCOMPLETE = 'incomplete metadata, file not fully covered'


def download_markers(relpaths):
    """The files of a directory listing that say a download is still running (sorted)."""
    return sorted(p for p in relpaths if p.endswith(MARKER_SUFFIXES))


def header_length(head):
    """The 8-byte little-endian header length at the start of a safetensors file; None when shorter than 8."""
    if len(head) < 8:
        return None
    return struct.unpack('<Q', head[:8])[0]


def safetensors_problem(head, header, file_size):
    """None when a shard's framing is whole, else (safetensors' error text, an explanation).

    ``head``: the file's first 8 bytes; ``header``: the following header_length(head) bytes as read (shorter when
    the file is); ``file_size``: its size. Checks what safetensors checks when it opens a file, without reading
    tensor data: the header length, the JSON header, and that the largest declared data offset ends the file.
    """
    n = header_length(head)
    if n is None:
        return ERR_TOO_SMALL, 'the file is %d bytes, shorter than the 8-byte header length' % file_size
    if n > MAX_HEADER_SIZE:
        return ERR_TOO_LARGE, 'it declares a %d-byte header (the limit is %d): not a safetensors file' % (n, MAX_HEADER_SIZE)
    if 8 + n > file_size or len(header) < n:
        return ERR_HEADER_LENGTH, 'it declares a %d-byte header but the file is %d bytes: truncated' % (n, file_size)
    try:
        text = header.decode('utf-8')
    except UnicodeDecodeError as exc:
        return 'invalid UTF-8 in header: %s' % exc, 'the header is not text: not a safetensors file'
    try:
        meta = json.loads(text)
    except ValueError as exc:
        return 'invalid JSON in header: %s' % exc, 'the header is not JSON: not a safetensors file, or damaged'
    if not isinstance(meta, dict):
        return 'invalid JSON in header: not an object', 'the header is not a JSON object'
    end = 0
    for name, info in meta.items():
        if name == '__metadata__':
            continue
        try:
            start, stop = info['data_offsets']
            start, stop = int(start), int(stop)
        except (TypeError, KeyError, ValueError):
            return 'invalid JSON in header: tensor %s has no data_offsets' % name, 'the header is damaged'
        if stop < start:
            return 'invalid offset for tensor `%s`' % name, 'its data_offsets end before they start'
        end = max(end, stop)
    expected = 8 + n + end
    if expected != file_size:
        how = 'truncated: %d bytes missing' % (expected - file_size) if expected > file_size else \
            '%d bytes longer than declared' % (file_size - expected)
        return ERR_INCOMPLETE, 'the file is %d bytes, its header declares %d (8 + %d header + %d data): %s' % (
            file_size, expected, n, end, how)
    return None


def growth(before, after):
    """Files whose (size, mtime_ns) changed between two looks: [(name, size before, size after)], sorted."""
    changed = []
    for name in sorted(set(before) | set(after)):
        if before.get(name) != after.get(name):
            changed.append((name, (before.get(name) or (None,))[0], (after.get(name) or (None,))[0]))
    return changed


def parse_manifest(manifest):
    """sglang_model_manifest: {relative file: {size: int, sha256: hex}} -> the same, checked; ValueError names the entry.

    Either key may be left out (size only: a cheap check; sha256 only: hash only).
    """
    if not isinstance(manifest, dict):
        raise ValueError('sglang_model_manifest must be a mapping of file name to {size, sha256}, got %s'
                         % type(manifest).__name__)
    out = {}
    for name, entry in manifest.items():
        if not isinstance(entry, dict) or not (set(entry) & {'size', 'sha256'}) or set(entry) - {'size', 'sha256'}:
            raise ValueError('sglang_model_manifest[%r] must be {size: BYTES, sha256: HEX}, got %r' % (name, entry))
        if name.startswith('/') or '..' in name.split('/'):
            raise ValueError('sglang_model_manifest[%r] must be a path inside the model directory' % name)
        size = entry.get('size')
        digest = entry.get('sha256')
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
            raise ValueError('sglang_model_manifest[%r].size must be a byte count, got %r' % (name, size))
        if digest is not None:
            digest = str(digest).lower()
            if len(digest) != 64 or any(c not in '0123456789abcdef' for c in digest):
                raise ValueError('sglang_model_manifest[%r].sha256 must be 64 hex digits' % name)
        out[name] = {'size': size, 'sha256': digest}
    return out


def cached_digest(cache, path, size, mtime_ns):
    """The sha256 a previous run computed for this file, if it still has the same size and mtime; else None."""
    entry = (cache or {}).get(path)
    if isinstance(entry, dict) and entry.get('size') == size and entry.get('mtime_ns') == mtime_ns:
        digest = entry.get('sha256')
        return digest if isinstance(digest, str) else None
    return None


def parse_cache(text):
    """The verification cache's JSON -> {path: {size, mtime_ns, sha256}}; anything else is an empty cache."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    files = data.get('files') if isinstance(data, dict) else None
    return files if isinstance(files, dict) else {}


def render_cache(files):
    return json.dumps({'version': 1, 'files': files}, sort_keys=True, indent=0) + '\n'


def judge(markers=(), growing=(), invalid=(), manifest=None, stats=None, digests=None, waive=()):
    """Findings of the checkpoint gate: [{check, file, message, waived}].

    ``markers``: download_markers(); ``growing``: growth(); ``invalid``: [(file, (error, explanation))];
    ``manifest``: parse_manifest(); ``stats``: {file: size} of the manifest's files that exist; ``digests``:
    {file: sha256} of those hashed (or taken from the cache).
    """
    waive = set(waive or ())
    findings = []

    def add(check, name, message):
        findings.append({'check': check, 'file': name, 'message': message, 'waived': check in waive})

    if markers:
        shown = ', '.join(markers[:5]) + (' ...' if len(markers) > 5 else '')
        add('download_in_progress', markers[0], 'a download is still in progress: %s (%d marker file%s: aria2 '
            'control files, Hugging Face .incomplete/.lock). Wait for it to finish (or remove stale markers of a '
            'download you know ended), then deploy.' % (shown, len(markers), '' if len(markers) == 1 else 's'))
    for name, size_before, size_after in growing:
        add('shard_growing', name, '%s is still being written (%s -> %s bytes between two looks): wait for the '
            'copy or download to finish, then deploy.' % (name, size_before, size_after))
    for name, (error, why) in invalid:
        add('shard_invalid', name, '%s is not a whole safetensors file: %s. SGLang would fail loading it with '
            '"SafetensorError: Error while deserializing header: %s". Download it again.' % (name, why, error))
    manifest = manifest or {}
    stats = stats or {}
    digests = digests or {}
    for name in sorted(manifest):
        want = manifest[name]
        if name not in stats:
            add('manifest_missing', name, '%s is in sglang_model_manifest but not in the model directory.' % name)
            continue
        if want.get('size') is not None and stats[name] != want['size']:
            add('manifest_size', name, '%s is %d bytes, sglang_model_manifest says %d: download it again.'
                % (name, stats[name], want['size']))
            continue
        if want.get('sha256') and name in digests and digests[name] != want['sha256']:
            add('manifest_hash', name, '%s has sha256 %s, sglang_model_manifest says %s: the file is damaged or '
                'another revision; download it again.' % (name, digests[name], want['sha256']))
    return findings


def to_hash(manifest, stats):
    """The manifest files worth hashing: present, with the declared size, and a declared sha256."""
    return sorted(name for name, want in (manifest or {}).items()
                  if want.get('sha256') and name in stats and (want.get('size') is None or stats[name] == want['size']))
