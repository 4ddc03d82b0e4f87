# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""SGLang 0.5.23's flags whose value is a secret, and the judgement on every other flag that looks like one.

Pure data and small functions, no I/O. One place, read by the argv rules (``server_args.build_argv`` refuses these
flags in ``sglang_server_args`` / ``sglang_extra_args``), the input rules (``role_inputs``: ``sglang_secret_args``
takes exactly these), the role (vars/main.yml: the secrets file's lines) and the conformance suite
(tests/conformance/test_secret_flags.py holds this table to the release's own parser: every flag whose name or help
says key, password, token, secret or credential is in ``SECRET_FLAGS`` or judged in ``NOT_SECRET`` with a reason).

Paths are under ``sglang/srt/`` of the 0.5.23 wheel. A secret flag on the command line shows in ``/proc/PID/cmdline``
(world-readable), the journal's ``_CMDLINE`` field, the 0644 unit file and ``/server_info``'s ``launch_command``
(``server_args.py:715-719`` redacts only ``--watermark-config``). So the role never puts one in argv: it writes the
value to the root-only secrets EnvironmentFile and the launcher shim (roles/server/files/sglang_launch.py) sets it
on the ServerArgs record inside the process, before resolution (as the API key, ``sglang_api_key``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import hmac

# flag -> (ServerArgs field, where the release declares it, who reads it).
# 'main': only the HTTP server of the main process reads it; the shim masks it in every dump of the record
#   (resolved_dict: the `server_args=` log line, /server_info) and leaves it out of the copy pickled for the spawned
#   schedulers. 'children': the schedulers read it too, so their copy keeps it (SGLang redacts it itself).
SECRET_FLAGS = {
    # NORMAL endpoints need it when set (utils/auth.py:145-151); the auth middleware reads it in the main process
    # (entrypoints/http_server.py:2888-2897).
    'api-key': ('api_key', 'arg_groups/fields/serving.py:160', 'main'),
    # Admin endpoints (/freeze_gc, /flush_cache, /update_weights_from_disk, ... @auth_level(ADMIN_OPTIONAL),
    # entrypoints/http_server.py:898-1846) require it, and no longer accept the API key (utils/auth.py:128-143).
    'admin-api-key': ('admin_api_key', 'arg_groups/fields/serving.py:164', 'main'),
    # Decrypts --ssl-keyfile; handed to uvicorn by the main process (entrypoints/http_server.py:2943-3066).
    'ssl-keyfile-password': ('ssl_keyfile_password', 'arg_groups/fields/serving.py:148', 'main'),
    # A JSON file path or an inline JSON object whose key / key_b are the watermark keys: SGLang itself hides it from
    # repr, launch_command and its dumps (server_args.py:307-308, :715-719; sampling/watermarking/core.py:25-27,
    # :110-134), but not from the command line. The schedulers' model runner uses the resolved keys
    # (model_executor/model_runner.py:638-639), so their pickled copy keeps it.
    'watermark-config': ('watermark_config', 'arg_groups/fields/exec_.py:78', 'children'),
}

# The variable that takes each secret flag (the API key keeps its own variable).
SECRET_ARGS_VARIABLE = 'sglang_secret_args'
API_KEY_FLAG = 'api-key'


def variable_for(flag):
    """The role variable that takes the secret flag ``flag``."""
    return 'sglang_api_key' if flag == API_KEY_FLAG else SECRET_ARGS_VARIABLE


# Option strings of 0.5.23 that are a proper prefix of a secret flag and are flags of their own: argparse takes an
# exact option string before any abbreviation (argparse.ArgumentParser._parse_optional), so these are not refused.
# tests/conformance/test_secret_flags.py derives this set from the real parser and requires it equal.
PREFIX_FLAGS = frozenset(('ssl-keyfile',))

# Flags whose value carries credentials only in some forms: refused when the inline value has a credential-like
# key, with where the credential belongs instead.
CREDENTIAL_CONFIG_FLAGS = {
    # The seaweedfs backend takes access_key / secret_key from this JSON (mem_cache/storage/seaweedfs/
    # seaweedfs_store.py:44-70). The schedulers parse it (mem_cache/hybrid_cache/hybrid_cache_controller.py:378-392)
    # and /server_info shows their copy unredacted (internal_states: runtime_context.py:1164-1172,
    # managers/scheduler_components/internal_state.py:48), which the shim cannot reach; the release's own ways to
    # keep the credential out of it are a config file named as '@PATH' (arg_groups/fields/memory.py:177-179) or the
    # AWS credential chain (seaweedfs_store.py:11-13).
    'hicache-storage-backend-extra-config': (
        "an '@/path/to/config.json' file readable by the service user only, or the AWS credential chain "
        "(sglang_env AWS_* or a credentials file)"),
}

# Every other flag of 0.5.23 whose name or help says key, password, token, secret or credential (the conformance
# test's words) and whose value is text, judged not secret. Flags whose value is a number, a switch or one of fixed
# choices cannot carry a secret and are judged by that rule in the test, from the parser (not listed here).
NOT_SECRET = {
    'tokenizer-path': 'a directory path ("token" of "tokenizer")',
    'radix-eviction-policy-config': 'eviction tuning numbers as JSON ("keyword arguments")',
    'ssl-keyfile': 'the path of the TLS key file, not the key; the file is read by the server from disk',
    'hf-chat-template-name': 'the name of a chat template of the tokenizer',
    'default-chat-template-kwargs': 'chat template switches as JSON ("Keys must match" the template)',
    'tokenizer-metrics-custom-labels-header': 'the name of an HTTP header',
    'tokenizer-metrics-allowed-custom-labels': 'metric label names',
    'prompt-tokens-buckets': 'histogram bucket rules',
    'generation-tokens-buckets': 'histogram bucket rules',
    'speculative-token-map': 'the path of the draft vocabulary table',
    'mm-process-config': 'multimodal preprocessing settings as JSON ("contains keys: image, video, audio")',
    'disaggregation-ib-device': 'InfiniBand device names ("Mapping keys are ... GPU IDs")',
    'modelexpress-config': 'a gRPC address and a transport name as JSON ("Keys: url, transport")',
}


def secret_flag_for(flag):
    """The secret flag that ``flag`` (a bare name: ``admin-api-key``, or an abbreviation argparse would expand,
    ``admin-api``) names, or None. A prefix of several flags is ambiguous to argparse (refused at start) and
    is refused here too when one of them is secret; an option string that is a flag of its own (PREFIX_FLAGS) is
    itself."""
    if flag in SECRET_FLAGS:
        return flag
    if not flag or flag in PREFIX_FLAGS:
        return None
    for name in sorted(SECRET_FLAGS):
        if name.startswith(flag):
            return name
    return None


def env_name(flag):
    """The secrets file's variable for a secret flag given in sglang_secret_args: LLMOPS_SGLANG_SECRET_<FIELD>."""
    return 'LLMOPS_SGLANG_SECRET_' + SECRET_FLAGS[flag][0].upper()


# The secrets file's name among an instance's files (the server role's __sglang_config_files, the last-good copy).
SECRETS_FILE = 'secrets.env'

# What a secret shows as wherever it is masked (an argv word, a log line, a header), and the flags as argv words
# (sorted): host_facts' argv redaction reads them here, not from sglang_signatures, so that sglang_observe and
# sglang_info do not compile the signature table on the host at every call (about 11 ms of each call, measured on a
# fleet host with PYTHONPROFILEIMPORTTIME).
REDACTED = '********'
SECRET_ARGV_FLAGS = tuple('--' + name for name in sorted(SECRET_FLAGS))


def secrets_digest(data, key):
    """The digest of a secrets file's bytes that the rollout compares and may print: HMAC-SHA256 under key, a random
    value the run keeps to itself (no_log). A plain SHA-1 of the file in a task result (an AWX job event keeps every
    result whatever the verbosity) could be tested offline against guesses of a short API key; this one cannot
    without the key. data: bytes (a str is encoded as UTF-8); key: a non-empty str."""
    if not key:
        raise ValueError('the key of the secrets digest is empty')
    if not isinstance(data, bytes):
        data = data.encode('utf-8')
    return 'hmac-sha256:' + hmac.new(key.encode('utf-8'), data, hashlib.sha256).hexdigest()
