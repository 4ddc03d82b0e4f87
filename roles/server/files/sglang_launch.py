# Installed by the llmops.sglang server role (root-owned, 0644); the unit runs:  PYTHON sglang_launch.py MODULE ARGS...
"""Start an SGLang launcher module with its secrets from the environment, where only the parts of SGLang that use
them can see them.

The secrets come from the root-only secrets EnvironmentFile: SGLANG_API_KEY (the API key, `sglang_api_key`) and one
LLMOPS_SGLANG_SECRET_<FIELD> per other secret flag (`sglang_secret_args`: --admin-api-key, --ssl-keyfile-password,
--watermark-config; plugins/module_utils/secret_flags.py lists them with their 0.5.23 sources, and SECRETS below
must equal it: tests/conformance/test_secret_flags.py). SGLang 0.5.23 takes each only as a flag (all four are plain
`str` fields, arg_groups/fields/serving.py:148,:160,:164, exec_.py:78), and then shows it in three places (paths in
sglang/srt/):
- the command line: /proc/PID/cmdline and the journal's _CMDLINE field. No secret is ever in argv here, nor in the
  environment of the program that runs SGLang (take_secrets).
- /server_info's `launch_command`: the argv given to prepare_server_args (server_args.py:715-719, :302-305).
  prepare_server_args gets the argv without the secrets, and each is set on the ServerArgs record it returns, before
  resolution seals it (server_args.py:244-261, :474-494), exactly as argparse would have stored it (a str); SGLang
  reads them from there (the auth middleware: arg_groups/fields/serving.py:160-167, projected into get_serving();
  entrypoints/http_server.py:2888-2897; uvicorn's ssl_keyfile_password: :2943-3066; the watermark keys resolved from
  watermark_config: model_executor/model_runner.py:638-639).
- every dump of the record: `server_args={...}` logged at INFO by the main process (entrypoints/engine.py:1185,
  :173-174) and /server_info's fields (utils/common.py:3589, entrypoints/http_server.py:863-891) come from
  ServerArgs.resolved_dict (server_args.py:316): it answers with the main-process secrets (api_key, admin_api_key,
  ssl_keyfile_password) masked in this process. The schedulers are spawned (engine.py:1995) with a pickled copy of the
  record (server_args.py:498-506), whose resolved dict /server_info shows as internal_states
  (managers/scheduler_components/internal_state.py:48): their copy carries none of those (they never use them).
  watermark_config stays in their copy, since their model runner needs the keys; SGLang redacts it itself in those
  dumps (sampling/watermarking/core.py:25-27, engine.py:174, http_server.py:882-891).
Anything else this process logs passes a log record factory that masks every secret (installed before SGLang
configures logging: basicConfig(force=True) replaces handlers, not the factory; server_args.py:703-708,
utils/common.py:2631-2637).
"""

import json
import logging
import os
import runpy
import sys

MASK = '<redacted>'
API_KEY_ENV = 'SGLANG_API_KEY'
SECRET_ENV_PREFIX = 'LLMOPS_SGLANG_SECRET_'
SECRETS_FD_ENV = 'LLMOPS_SGLANG_SECRETS_FD'
# ServerArgs field -> whether the spawned schedulers keep it in their copy (plugins/module_utils/secret_flags.py:
# 'children'); the others only the main process reads.
SECRETS = {'api_key': False, 'admin_api_key': False, 'ssl_keyfile_password': False, 'watermark_config': True}


def _replace_fields(value, fields, replacement):
    """A copy of a dict, and of the dicts in it (ServerArgs' _raw_input), with each set field of `fields` replaced."""
    if not isinstance(value, dict):
        return value
    out = dict((name, _replace_fields(item, fields, replacement)) for name, item in value.items())
    for field in fields:
        if out.get(field) is not None:
            out[field] = replacement
    return out


def mask_log_records(secrets):
    make = logging.getLogRecordFactory()
    values = sorted((value for value in secrets if value), key=len, reverse=True)

    def factory(*args, **kwargs):
        record = make(*args, **kwargs)
        try:
            text = record.getMessage()
        except Exception:  # pylint: disable=broad-except  # logging reports a bad format itself, later
            return record
        masked = text
        for value in values:
            masked = masked.replace(value, MASK)
        if masked != text:
            record.msg, record.args = masked, None
        return record

    logging.setLogRecordFactory(factory)


def hand_secrets_to_server_args(secrets):
    """Wrap the release's prepare_server_args and ServerArgs so that `secrets` (field -> value) are set on the record
    and masked in its dumps, and the main-process ones are left out of its pickled copies."""
    from sglang.srt import server_args as module  # the module sglang.launch_server imports prepare_server_args from

    prepare, record = module.prepare_server_args, module.ServerArgs
    resolved, reduce = record.resolved_dict, record.__reduce__
    main_only = sorted(field for field in secrets if not SECRETS[field])

    def prepare_server_args(argv):
        server_args = prepare(argv)
        for field, value in secrets.items():
            setattr(server_args, field, value)
        return server_args

    def resolved_dict(self):
        return _replace_fields(resolved(self), main_only, MASK)

    def __reduce__(self):
        rebuild, args = reduce(self)[:2]
        return rebuild, tuple(_replace_fields(arg, main_only, None) for arg in args)

    module.prepare_server_args = prepare_server_args
    record.resolved_dict = resolved_dict
    if '__reduce__' in vars(record):  # 0.5.23 pickles (constructor fields, bookkeeping) for its spawned children
        record.__reduce__ = __reduce__


def hand_key_to_server_args(secret):
    """The API key alone (tests/conformance/test_key_shim.py)."""
    hand_secrets_to_server_args({'api_key': secret})


def take_secrets():
    """The secrets (ServerArgs field -> value), gone from this process's environment, and from /proc/PID/environ too.

    /proc/PID/environ shows the environment a program was started with, whatever it unsets later: with a secret in
    it, this program starts itself again (same PID) with the secrets in a pipe instead of the environment. An unknown
    LLMOPS_SGLANG_SECRET_* variable (a role newer than this shim) stops the start rather than being dropped."""
    fd = os.environ.pop(SECRETS_FD_ENV, None)
    if fd is not None:
        with os.fdopen(int(fd), 'rb') as pipe:
            return json.loads(pipe.read().decode())
    secrets = {}
    key = os.environ.pop(API_KEY_ENV, '')
    if key:
        secrets['api_key'] = key
    for name in sorted(os.environ):
        if name.startswith(SECRET_ENV_PREFIX):
            value = os.environ.pop(name)
            field = name[len(SECRET_ENV_PREFIX):].lower()
            if field not in SECRETS or field == 'api_key':
                sys.exit('sglang_launch.py: %s is not a secret this launcher knows (%s)'
                         % (name, ', '.join(sorted(SECRETS))))
            if value:
                secrets[field] = value
    if secrets:
        data = json.dumps(secrets).encode()
        if len(data) > 60000:  # below a pipe's 64 KiB buffer, so the write never blocks
            sys.exit('sglang_launch.py: the secrets are too long (%d bytes)' % len(data))
        read_end, write_end = os.pipe()
        os.write(write_end, data)
        os.close(write_end)
        os.set_inheritable(read_end, True)
        os.environ[SECRETS_FD_ENV] = str(read_end)
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ))
    return secrets


def main():
    if len(sys.argv) < 2:
        sys.exit('usage: %s MODULE [ARGS...]' % sys.argv[0])
    secrets = take_secrets()
    if secrets:
        mask_log_records(secrets.values())
        hand_secrets_to_server_args(secrets)
    sys.argv = sys.argv[1:]
    runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)


if __name__ == '__main__':
    main()
