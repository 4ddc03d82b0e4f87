# Installed by the llmops.sglang server role (root-owned, 0644); the unit runs:  PYTHON sglang_launch.py MODULE ARGS...
"""Start an SGLang launcher module with the API key from SGLANG_API_KEY, where only the server's auth can see it.

SGLang 0.5.23 takes the key only as --api-key, and then shows it in three places (paths in sglang/srt/):
- the command line: /proc/PID/cmdline and the journal's _CMDLINE field. The key is never in argv here, nor in the
  environment of the program that runs SGLang (take_secret).
- /server_info's `launch_command`: the argv given to prepare_server_args (server_args.py:717, :302-305).
  prepare_server_args gets the argv without the key, and the key is set on the ServerArgs record it returns, before
  resolution seals it (server_args.py:244-261, :474-494); the auth middleware reads it from there
  (arg_groups/fields/serving.py:160, projected into get_serving(); entrypoints/http_server.py:2888-2897).
- every dump of the record: `server_args={...}` logged at INFO by the main process (entrypoints/engine.py:1185,
  :173-174, which redacts only watermark fields) and /server_info's fields (utils/common.py:3589,
  entrypoints/http_server.py:863-891) come from ServerArgs.resolved_dict (server_args.py:316): it answers with the
  key masked in this process. The schedulers are spawned (engine.py:1995) with a pickled copy of the record
  (server_args.py:498-506), whose resolved dict /server_info shows as internal_states
  (managers/scheduler_components/internal_state.py:48): their copy carries no key (they never use it).
Anything else this process logs passes a log record factory that masks the key (installed before SGLang configures
logging: basicConfig(force=True) replaces handlers, not the factory; server_args.py:703-708, utils/common.py:2631-2637).
"""

import logging
import os
import runpy
import sys

MASK = '<redacted>'


def _replace_key(value, replacement):
    """A copy of a dict, and of the dicts in it (ServerArgs' _raw_input), with a set `api_key` replaced."""
    if not isinstance(value, dict):
        return value
    out = dict((name, _replace_key(item, replacement)) for name, item in value.items())
    if out.get('api_key') is not None:
        out['api_key'] = replacement
    return out


def mask_log_records(secret):
    make = logging.getLogRecordFactory()

    def factory(*args, **kwargs):
        record = make(*args, **kwargs)
        try:
            text = record.getMessage()
        except Exception:  # pylint: disable=broad-except  # logging reports a bad format itself, later
            return record
        if secret in text:
            record.msg, record.args = text.replace(secret, MASK), None
        return record

    logging.setLogRecordFactory(factory)


def hand_key_to_server_args(secret):
    from sglang.srt import server_args as module  # the module sglang.launch_server imports prepare_server_args from

    prepare, record = module.prepare_server_args, module.ServerArgs
    resolved, reduce = record.resolved_dict, record.__reduce__

    def prepare_server_args(argv):
        server_args = prepare(argv)
        server_args.api_key = secret
        return server_args

    def resolved_dict(self):
        return _replace_key(resolved(self), MASK)

    def __reduce__(self):
        rebuild, args = reduce(self)[:2]
        return rebuild, tuple(_replace_key(arg, None) for arg in args)

    module.prepare_server_args = prepare_server_args
    record.resolved_dict = resolved_dict
    if '__reduce__' in vars(record):  # 0.5.23 pickles (constructor fields, bookkeeping) for its spawned children
        record.__reduce__ = __reduce__


def take_secret():
    """The key, gone from this process's environment, and from /proc/PID/environ too.

    /proc/PID/environ shows the environment a program was started with, whatever it unsets later: with the key in
    it, this program starts itself again (same PID) with the key in a pipe instead of the environment."""
    fd = os.environ.pop('LLMOPS_SGLANG_KEY_FD', None)
    if fd is not None:
        with os.fdopen(int(fd), 'rb') as pipe:
            return pipe.read().decode()
    secret = os.environ.pop('SGLANG_API_KEY', '')
    if secret:
        read_end, write_end = os.pipe()
        os.write(write_end, secret.encode())  # a key is far below a pipe's buffer: this never blocks
        os.close(write_end)
        os.set_inheritable(read_end, True)
        os.environ['LLMOPS_SGLANG_KEY_FD'] = str(read_end)
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ))
    return secret


def main():
    if len(sys.argv) < 2:
        sys.exit('usage: %s MODULE [ARGS...]' % sys.argv[0])
    secret = take_secret()
    if secret:
        mask_log_records(secret)
        hand_key_to_server_args(secret)
    sys.argv = sys.argv[1:]
    runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)


if __name__ == '__main__':
    main()
