"""The role's API-key launcher shim (roles/server/files/sglang_launch.py) against the real release's own modules.

What the unit runs with a key is `python sglang_launch.py sglang.launch_server ARGS`: the shim wraps the release's
prepare_server_args and ServerArgs, then runs sglang.launch_server's __main__. This holds that wrapping to the real
sglang.srt.server_args: the record it returns carries the key where the auth middleware reads it, and the key is
in none of the release's dumps of that record (launch_command, resolved_dict, the pickled copy a scheduler gets).
"""

import io
import logging
import pickle
import re
import secrets

import pytest

from conftest import shim_applied

ARGV = ['--model-path', '/models/k26', '--host', '0.0.0.0', '--port', '30000', '--tp-size', '8', '--trust-remote-code']


@pytest.fixture
def shim(release):  # pylint: disable=unused-argument
    """The shim's patches applied to the real server_args with a fresh API key, undone afterwards."""
    key = 'sk-' + secrets.token_hex(12)
    with shim_applied({'api_key': key}) as module:
        yield module, key


def test_launch_server_takes_the_parser_the_shim_wraps(release):
    # launch_server.py:10 and :82: the name is looked up in sglang.srt.server_args when the module runs
    text = ''.join(release.source('../launch_server.py'))
    assert 'from sglang.srt.server_args import prepare_server_args' in text
    assert 'server_args = prepare_server_args(sys.argv[1:])' in text


def test_the_key_is_on_the_record_where_the_middleware_reads_it(shim, release):
    module, key = shim
    args = module.prepare_server_args(ARGV)
    assert args.api_key == key
    # get_serving().api_key (http_server.py:2888-2897) is the `serving` bag's leaf of the field api_key, projected
    # from resolution_result (runtime_context.py:869-905); before resolution that is the field itself.
    from sglang.srt.arg_groups.arg_utils import namespace_of
    from sglang.srt.arg_groups.overrides import resolution_result
    assert namespace_of(type(args))['api_key'] == 'serving'
    assert resolution_result(args, 'api_key') == key
    middleware = ''.join(release.source('entrypoints/http_server.py'))
    assert re.search(r'add_api_key_middleware\(\s*app,\s*api_key=get_serving\(\)\.api_key', middleware)


def test_no_dump_of_the_record_holds_the_key(shim):
    module, key = shim
    args = module.prepare_server_args(ARGV)
    # /server_info's launch_command (utils/common.py:3590): the argv the parser was given
    assert args.launch_command == ' '.join(ARGV)
    # the `server_args=` log line (engine.py:173-174, :1185) and /server_info's fields (utils/common.py:3589)
    dumped = args.resolved_dict()
    assert dumped['api_key'] == '<redacted>' and key not in repr(dumped)
    assert dumped['model_path'] == '/models/k26', 'the other fields are untouched'
    # the copy a spawned scheduler gets (engine.py:1995, server_args.py:498-506): its internal_states dump
    child = pickle.loads(pickle.dumps(args))
    assert child.api_key is None and key not in repr(child.resolved_dict())
    assert child.model_path == '/models/k26' and child.tp_size == 8


def test_a_log_record_of_the_main_process_never_shows_the_key(shim):
    module, key = shim
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger('sglang.srt.entrypoints.engine')
    logger.addHandler(handler)
    try:
        logger.warning('auth header Bearer %s', key)
        logger.warning(f'plain {key} text')  # pylint: disable=logging-fstring-interpolation  # as engine.py:1185 logs
    finally:
        logger.removeHandler(handler)
    assert key not in stream.getvalue() and stream.getvalue().count('<redacted>') == 2
