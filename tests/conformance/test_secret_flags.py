"""SGLang 0.5.23's secret-valued flags (plugins/module_utils/secret_flags.py) against the release's own parser, and
the launcher shim (roles/server/files/sglang_launch.py) handing them to the real sglang.srt.server_args.

Every flag whose name or help says key, password, token, secret or credential is either a secret flag (the role
hands it over in-process, and refuses it in sglang_server_args / sglang_extra_args) or judged not secret: by rule (a
number, a switch or one of fixed choices carries no secret) or in NOT_SECRET with the reason. A new release that adds
such a flag fails here until someone judges it.
"""

import argparse
import logging
import pickle
import re
import secrets

import pytest

from ansible_collections.llmops.sglang.plugins.module_utils import secret_flags
from conftest import load_shim, shim_applied
from ansible_collections.llmops.sglang.plugins.module_utils.rollout.server_args import ServerArgsError, build_argv

WORDS = re.compile(r'(?i)key|passw|token|secret|credential')
ARGV = ['--model-path', '/models/k26', '--host', '0.0.0.0', '--port', '30000', '--tp-size', '8']


def _flag(row):
    return next(opt[2:] for opt in row['option_strings'] if opt.startswith('--'))


def _by_rule(row):
    """Why a flag's value cannot be a secret, judged from the parser alone, or None."""
    if row['action'] in ('_StoreTrueAction', '_StoreFalseAction', 'BooleanOptionalAction', '_StoreConstAction',
                         'DeprecatedStoreTrueAction', 'DeprecatedStoreConstAction', '_CountAction'):
        return 'a switch'
    if row['type'] in ('int', 'float', 'human_readable_int'):
        return 'a number'
    if row['choices'] is not None:
        return 'one of fixed choices'
    return None


def test_every_flag_that_looks_secret_is_judged(release):
    unjudged, seen = [], 0
    for row in release.flag_table():
        flag = _flag(row)
        if not (WORDS.search(' '.join(row['option_strings'])) or WORDS.search(row['help'] or '')):
            continue
        seen += 1
        if flag in secret_flags.SECRET_FLAGS or flag in secret_flags.NOT_SECRET or _by_rule(row):
            continue
        unjudged.append('--%s: %s' % (flag, (row['help'] or '')[:100]))
    assert seen >= 20  # the scan sees the parser's flags (70 in 0.5.23)
    assert unjudged == [], 'judge each: secret_flags.SECRET_FLAGS or NOT_SECRET (with why)'


def test_the_judgements_name_real_flags_of_the_release(release):
    table = {_flag(row): row for row in release.flag_table()}
    for flag in list(secret_flags.NOT_SECRET) + list(secret_flags.CREDENTIAL_CONFIG_FLAGS):
        assert flag in table, '--%s is no flag of sglang %s' % (flag, release.release())
    for flag in secret_flags.NOT_SECRET:
        assert _by_rule(table[flag]) is None, '--%s is judged by rule already: drop it from NOT_SECRET' % flag


@pytest.mark.parametrize('flag', sorted(secret_flags.SECRET_FLAGS))
def test_each_secret_flag_is_a_plain_string_field_where_cited(release, flag):
    field, where, _holder = secret_flags.SECRET_FLAGS[flag]
    row = [row for row in release.flag_table() if '--' + flag in row['option_strings']]
    assert len(row) == 1 and row[0]['dest'] == field
    # What the shim sets is what argparse would store: a str, no choices, no conversion, no aliases.
    assert (row[0]['action'], row[0]['type'], row[0]['choices'], row[0]['nargs']) == ('_StoreAction', 'str', None, None)
    assert row[0]['option_strings'] == ['--' + flag]
    path, line = where.split(':')
    assert release.source(path[len(''):])[int(line) - 1].strip().startswith(field + ': A['), where


def test_prefix_flags_are_exactly_the_flags_that_abbreviate_a_secret_one(release):
    options = {opt[2:] for row in release.flag_table() for opt in row['option_strings'] if opt.startswith('--')}
    prefixes = {opt for opt in options for secret in secret_flags.SECRET_FLAGS if secret != opt and secret.startswith(opt)}
    assert prefixes == set(secret_flags.PREFIX_FLAGS)


def _refusal(args=None, extra=None):
    try:
        build_argv(args or {}, extra or [], {'api-key': 'sglang_api_key'})
    except ServerArgsError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize('flag', sorted(set(secret_flags.SECRET_FLAGS) - {'api-key'}))
def test_every_spelling_the_real_parser_takes_for_a_secret_flag_is_refused(release, flag):
    field = secret_flags.SECRET_FLAGS[flag][0]
    value = 'sekrit-' + secrets.token_hex(4)
    # each abbreviation argparse expands to the flag (allow_abbrev, server_args.py:679), then the flag itself
    parsed = dict((n, release.parse(ARGV + ['--' + flag[:n], value])) for n in range(2, len(flag) + 1))
    spellings = [flag[:n] for n in sorted(parsed) if parsed[n].ok and getattr(parsed[n].namespace, field) == value]
    assert flag in spellings and len(spellings) > 1
    for spelled in spellings:
        for where, message in (('sglang_server_args', _refusal({spelled: value})),
                               ('sglang_extra_args', _refusal(extra=['--' + spelled, value])),
                               ('sglang_extra_args', _refusal(extra=['--%s=%s' % (spelled, value)]))):
            assert message and message.startswith(where) and "sglang_secret_args['%s']" % flag in message, spelled
            assert value not in message


def test_a_flag_named_like_a_prefix_of_a_secret_one_is_itself(release):
    # --ssl-keyfile is the key file's path: argparse takes the exact option before an abbreviation
    parsed = release.parse(ARGV + ['--ssl-keyfile', '/etc/ssl/k.pem'])
    assert parsed.ok and parsed.namespace.ssl_keyfile == '/etc/ssl/k.pem' and parsed.namespace.ssl_keyfile_password is None
    assert _refusal({'ssl-keyfile': '/etc/ssl/k.pem'}) is None


def test_the_shim_knows_exactly_the_secret_flags():
    loaded = load_shim('sglang_launch_table')
    assert loaded.SECRETS == {field: holder == 'children'
                              for field, _where, holder in secret_flags.SECRET_FLAGS.values()}
    assert {secret_flags.env_name(flag) for flag in secret_flags.SECRET_FLAGS if flag != 'api-key'} == {
        loaded.SECRET_ENV_PREFIX + field.upper() for field in loaded.SECRETS if field != 'api_key'}


@pytest.fixture
def shim(release):  # pylint: disable=unused-argument
    """The shim's patches applied to the real server_args with fresh secrets, undone afterwards."""
    values = {'api_key': 'sk-' + secrets.token_hex(12), 'admin_api_key': 'sk-admin-' + secrets.token_hex(12),
              'ssl_keyfile_password': 'pw-' + secrets.token_hex(12),
              'watermark_config': '{"key":"wm-%s","key_b":"wmb-%s"}' % (secrets.token_hex(8), secrets.token_hex(8))}
    with shim_applied(values) as module:
        yield module, values


def test_the_shim_sets_each_secret_where_sglang_reads_it_and_shows_none(shim):
    module, values = shim
    args = module.prepare_server_args(ARGV)
    from sglang.srt.arg_groups.overrides import resolution_result
    for field, value in values.items():
        assert getattr(args, field) == value and resolution_result(args, field) == value
    assert args.launch_command == ' '.join(ARGV)
    dumped = args.resolved_dict()
    for field in ('api_key', 'admin_api_key', 'ssl_keyfile_password'):
        assert dumped[field] == '<redacted>'
    # the scheduler's copy: the main-process secrets gone, the watermark config kept (its model runner needs the keys)
    child = pickle.loads(pickle.dumps(args))
    assert (child.api_key, child.admin_api_key, child.ssl_keyfile_password) == (None, None, None)
    assert child.watermark_config == values['watermark_config']
    for value in (values['api_key'], values['admin_api_key'], values['ssl_keyfile_password']):
        assert value not in repr(dumped) and value not in repr(child.resolved_dict())
    # SGLang's own redaction covers the watermark config in every dump it serves (watermarking/core.py:25-27, :34-108)
    from sglang.srt.sampling.watermarking.core import redact_watermark_secrets
    assert values['watermark_config'] not in repr(redact_watermark_secrets(dumped))
    assert dumped['model_path'] == '/models/k26' and child.tp_size == 8


def test_a_log_record_never_shows_a_secret(shim):
    _module, values = shim
    import io
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger = logging.getLogger('sglang.srt.entrypoints.http_server')
    logger.addHandler(handler)
    try:
        for value in values.values():
            logger.warning('value %s', value)
    finally:
        logger.removeHandler(handler)
    text = stream.getvalue()
    assert text.count('<redacted>') == len(values) and not [v for v in values.values() if v in text]


def test_argparse_would_store_the_same_as_the_shim_sets(release):
    # the shim sets str values; the parser's conversion for these flags is str() (no type function, no choices)
    parser = release.real_parser()
    for flag, (field, _where, _holder) in secret_flags.SECRET_FLAGS.items():
        action = [a for a in parser._actions if '--' + flag in a.option_strings][0]
        assert isinstance(action, argparse._StoreAction) and action.type in (str, None), flag
        assert field == action.dest
