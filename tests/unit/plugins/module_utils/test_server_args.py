# -*- coding: utf-8 -*-
"""Argument rendering: what the dict means, and how each word is quoted for systemd."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import hmac

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmops.sglang.plugins.filter.server_args import FilterModule
from ansible_collections.llmops.sglang.plugins.module_utils.secret_flags import secrets_digest
from ansible_collections.llmops.sglang.plugins.module_utils.rollout.server_args import (
    ServerArgsError,
    build_argv,
    normalize_flag,
    parse_verdict,
    parser_refusal,
    systemd_exec_line,
    systemd_quote,
)


def test_bool_none_list_dict_and_scalars():
    argv = build_argv({
        'tp-size': 8,
        'trust-remote-code': True,
        'enable-metrics': False,
        'served-model-name': None,
        'mem-fraction-static': 0.9,
        'lora-paths': ['a=/x', 'b=/y'],
        'json-model-override-args': {'rope_scaling': {'factor': 2}},
    })
    assert argv == [
        '--tp-size', '8', '--trust-remote-code', '--mem-fraction-static', '0.9',
        '--lora-paths', 'a=/x', '--lora-paths', 'b=/y',
        '--json-model-override-args', '{"rope_scaling":{"factor":2}}',
    ]


def test_flag_spellings_are_normalized():
    assert normalize_flag('--tp-size') == 'tp-size'
    assert normalize_flag('tp_size') == 'tp-size'
    assert build_argv({'--attention_backend': 'triton'}) == ['--attention-backend', 'triton']


@pytest.mark.parametrize('name', ['TP', '-x', 'a b', '', '--', 'tp=8'])
def test_bad_flag_names_name_the_variable(name):
    with pytest.raises(ServerArgsError, match='sglang_server_args'):
        build_argv({name: 1})


def test_same_flag_twice_is_an_error():
    with pytest.raises(ServerArgsError, match='same flag --tp-size'):
        build_argv({'tp-size': 8, 'tp_size': 4})


def test_reserved_flags_point_at_their_variable():
    with pytest.raises(ServerArgsError, match=r'\(--port\) is set by sglang_port'):
        build_argv({'port': 1}, reserved={'port': 'sglang_port'})


def test_extra_args_are_appended_verbatim_and_checked():
    assert build_argv({'tp': 2}, ['--foo', 'bar baz', 3]) == ['--tp', '2', '--foo', 'bar baz', '3']
    with pytest.raises(ServerArgsError, match=r'sglang_extra_args\[1\]'):
        build_argv({}, ['--ok', {'no': 1}])
    with pytest.raises(ServerArgsError, match='sglang_extra_args must be a list'):
        build_argv({}, '--foo')
    with pytest.raises(ServerArgsError, match='sglang_server_args must be a dict'):
        build_argv(['--foo'])


def test_bool_inside_a_list_is_refused():
    with pytest.raises(ServerArgsError, match='inside a list'):
        build_argv({'x': [True]})


@pytest.mark.parametrize('word, expected', [
    ('plain', 'plain'),
    ('/opt/sglang/venv/bin/python', '/opt/sglang/venv/bin/python'),
    ('50%', '50%%'),
    ('$HOME', '$$HOME'),
    ('${X}', '$${X}'),
    ('two words', '"two words"'),
    ('', '""'),
    ('say "hi"', '"say \\"hi\\""'),
    ("it's", '"it\'s"'),
    ('back\\slash', '"back\\\\slash"'),
    ('line\nbreak', '"line\\nbreak"'),
    (';', '";"'),
    ('{"a":"b c"}', '"{\\"a\\":\\"b c\\"}"'),
])
def test_systemd_quote(word, expected):
    assert systemd_quote(word) == expected


def test_exec_line_joins_quoted_words():
    assert systemd_exec_line(['/bin/echo', 'a b', '100%']) == '/bin/echo "a b" 100%%'
    with pytest.raises(ServerArgsError):
        systemd_exec_line([])


def test_environment_lines_quote_and_sort():
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.server_args import environment_lines
    assert environment_lines({'B': 'x y', 'A': 1, 'C': None, 'D': True, 'E': 'a"b\\c', 'F': '$HOME %h'}) == [
        'A="1"', 'B="x y"', 'D="1"', 'E="a\\"b\\\\c"', 'F="$HOME %h"']


@pytest.mark.parametrize('env, message', [
    ({'1BAD': 'x'}, 'not an environment variable name'),
    ({'A-B': 'x'}, 'not an environment variable name'),
    ({'A': 'x\ny'}, 'line break'),
    ({'A': ['x']}, r'sglang_env\[A\]: expected a string'),
    (['A=1'], 'must be a dict'),
])
def test_environment_lines_refuse_bad_input(env, message):
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.server_args import environment_lines
    with pytest.raises(ServerArgsError, match=message):
        environment_lines(env)


def test_a_reserved_flag_in_extra_args_points_at_its_variable():
    # argparse keeps the last of two --model-path without a word: the role's value would silently lose
    for arg in ('--model-path', '--model-path=/other'):
        with pytest.raises(ServerArgsError, match=r"sglang_extra_args\[1\]: --model-path is set by sglang_model_path"):
            build_argv({}, ['--log-level', arg], {'model-path': 'sglang_model_path'})


def argparse_stderr(argv):
    """What argparse itself prints for SGLang-shaped flags (prog and flag names as in SGLang 0.5.23)."""
    import argparse
    import contextlib
    import io
    parser = argparse.ArgumentParser(prog='sglang serve')
    parser.add_argument('--mem-fraction-static', type=float)
    parser.add_argument('--cuda-graph-max-bs-decode', type=int)
    parser.add_argument('--cuda-graph-max-bs-prefill', type=int)
    parser.add_argument('--port', type=int)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit):
        parser.parse_args(argv)
    return 'some warning first\n' + err.getvalue()


@pytest.mark.parametrize('argv, server_args, extra_args, variable, words', [
    (['--mem-fraction-static', '0.9 x'], {'mem_fraction_static': '0.9 x'}, [],
     "sglang_server_args['mem_fraction_static']", "argument --mem-fraction-static: invalid float value: '0.9 x'"),
    (['--cuda-graph-max-bs', '64'], {'cuda-graph-max-bs': 64}, [],
     "sglang_server_args['cuda-graph-max-bs']", 'ambiguous option: --cuda-graph-max-bs could match'),
    (['--log-levle', 'info'], {}, ['--log-levle', 'info'], 'sglang_extra_args[0]', 'unrecognized arguments: --log-levle info'),
    (['--port', 'x'], {}, [], 'sglang_port', "argument --port: invalid int value: 'x'"),
])
def test_parser_refusal_names_the_variable_and_keeps_sglangs_words(argv, server_args, extra_args, variable, words):
    refusal = parser_refusal(argparse_stderr(argv), server_args, extra_args, {'port': 'sglang_port'})
    assert refusal['variable'] == variable
    assert refusal['error'].startswith('sglang serve: error: ') and words in refusal['error'], refusal


def test_parser_refusal_without_an_argparse_line():
    refusal = parser_refusal('Traceback (most recent call last):\n  File "x"\nValueError: bad\n')
    assert refusal == {'error': 'ValueError: bad', 'variable': 'sglang_server_args / sglang_extra_args'}


PARSE = {'python': '/opt/sglang/venv/bin/python', 'server_args': {'mem-fraction-static': '0.9 x'}, 'extra_args': [],
         'reserved': {'port': 'sglang_port'}, 'unit': 'sglang-k26.service', 'version': '0.5.23'}


def test_parse_verdict_accepts_refuses_naming_the_variable_or_cannot_ask():
    assert parse_verdict(0, '', PARSE) == (None, None)
    refusal, note = parse_verdict(2, argparse_stderr(['--mem-fraction-static', '0.9 x']), PARSE)
    assert note is None
    assert refusal == (
        "sglang_server_args['mem-fraction-static']: SGLang 0.5.23 (/opt/sglang/venv/bin/python) refuses the arguments: "
        "sglang serve: error: argument --mem-fraction-static: invalid float value: '0.9 x'. Nothing was changed: "
        "sglang-k26.service keeps its running configuration.")
    # Exit 3: PARSE_SCRIPT could not import SGLang's parser (an older release): said, not refused.
    words = 'cannot check the arguments: sglang.srt.server_args does not import (No module named sglang)'
    assert parse_verdict(3, words + '\n', PARSE) == (None, words + "; the server's own start will judge them")
    # Any other exit (a crash of the Python itself) is a refusal, with its last words.
    refusal, note = parse_verdict(1, 'Traceback (most recent call last):\nValueError: bad\n', dict(PARSE, version=''))
    assert note is None and refusal.startswith('sglang_server_args / sglang_extra_args: SGLang (/opt/sglang/venv/bin/'
                                               'python) refuses the arguments: ValueError: bad.'), refusal


def test_secret_environment_names_each_flag_by_its_field():
    from ansible_collections.llmops.sglang.plugins.module_utils.rollout.server_args import secret_environment
    assert secret_environment({'admin-api-key': 'sk-a', '--ssl_keyfile_password': 'pw',
                               'watermark-config': {'key_b': 'b', 'key': 'k'}}) == {
        'LLMOPS_SGLANG_SECRET_ADMIN_API_KEY': 'sk-a',
        'LLMOPS_SGLANG_SECRET_SSL_KEYFILE_PASSWORD': 'pw',
        'LLMOPS_SGLANG_SECRET_WATERMARK_CONFIG': '{"key":"k","key_b":"b"}',
    }
    assert secret_environment({}) == {} and secret_environment(None) == {}
    assert secret_environment({'admin-api-key': ''}) == {}
    with pytest.raises(ServerArgsError, match=r"sglang_secret_args\['admin-api-key'\]: expected a string, got dict"):
        secret_environment({'admin-api-key': {'a': 1}})


def test_secrets_digest_is_keyed_and_never_the_plain_sha1():
    text = 'SGLANG_API_KEY="k"\n'
    one = secrets_digest(text, 'a' * 64)
    assert one == 'hmac-sha256:' + hmac.new(b'a' * 64, text.encode(), hashlib.sha256).hexdigest()
    # bytes as the host reads the file, text as the controller renders it: the same digest
    assert secrets_digest(text.encode(), 'a' * 64) == one
    # another key, another digest; no key is refused rather than falling back to a plain hash
    assert secrets_digest(text, 'b' * 64) != one
    assert hashlib.sha1(text.encode()).hexdigest() not in one and hashlib.sha256(text.encode()).hexdigest() not in one
    with pytest.raises(ValueError):
        secrets_digest(text, '')


def test_the_secrets_digest_filter_as_the_role_calls_it():
    filters = FilterModule().filters()
    assert filters['sglang_secrets_digest'](None, 'k') is None    # no secrets file
    assert filters['sglang_secrets_digest']('X="1"\n', 'k') == secrets_digest('X="1"\n', 'k')
    with pytest.raises(AnsibleFilterError, match='sglang_secrets_digest: the key of the secrets digest is empty'):
        filters['sglang_secrets_digest']('X="1"\n', '')
