# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Turn the role's argument variables into SGLang's argv, and that argv into a systemd ExecStart= line.

Pure functions, no I/O. The rules live here once; the server role reaches them through the
``llmops.sglang.sglang_argv`` and ``llmops.sglang.systemd_exec_line`` filters.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.llmops.sglang.plugins.module_utils.secret_flags import (
    CREDENTIAL_CONFIG_FLAGS,
    SECRET_FLAGS,
    env_name,
    secret_flag_for,
    variable_for,
)

# A flag name as SGLang's argparse knows them: lowercase words joined by dashes.
_FLAG_NAME = re.compile(r'^[a-z0-9][a-z0-9-]*$')
# Characters after which systemd would split, unquote or unescape a word.
_NEEDS_QUOTES = re.compile(r'[\s"\'\\;]')


class ServerArgsError(ValueError):
    """Raised with a message that names the offending variable, key and what was expected."""


def normalize_flag(name, where='sglang_server_args'):
    """Return the bare flag name (``tp-size``) for ``tp-size``, ``--tp-size`` or ``tp_size``."""
    if not isinstance(name, str):
        raise ServerArgsError('%s: flag names must be strings, got %r' % (where, name))
    flag = name[2:] if name.startswith('--') else name
    flag = flag.replace('_', '-')
    if not _FLAG_NAME.match(flag):
        raise ServerArgsError(
            '%s: %r is not a flag name; expected lowercase words joined by dashes, e.g. attention-backend' % (where, name))
    return flag


def reserved_owner(flag, reserved):
    """The variable that owns ``flag`` (bare name, e.g. ``tp`` or ``nccl-init-addr``) when it is reserved, else None.

    ``reserved`` maps every option string of a reserved SGLang argument (its name and its aliases, e.g.
    ``dist-init-addr`` and ``nccl-init-addr``) to the variable that sets it. SGLang's parser is a plain
    ``argparse.ArgumentParser`` (``server_args.py:679``, allow_abbrev left on), so an unambiguous prefix such as
    ``--tp`` means ``--tp-size`` and an ambiguous one fails the start; either way a prefix of a reserved option
    string is refused. In 0.5.23 no other option string is a prefix of a reserved one (``--model`` is itself the
    alias of ``--model-path``), so this refuses nothing the parser would give to another argument.
    """
    if flag in reserved:
        return reserved[flag]
    for name in sorted(reserved):
        if name.startswith(flag):
            return reserved[name]
    return None


# A key of an inline JSON config that names a credential (seaweedfs' access_key / secret_key, a password, a token).
_CREDENTIAL_KEY = re.compile(r'(?i)key|secret|passw|token|credential')


def secret_problem(flag, where):
    """Why ``flag`` (bare name, or an abbreviation argparse would expand) may not be given in ``where``, or None:
    a secret flag of SGLang 0.5.23 (module_utils/secret_flags.py) belongs in its own variable, never on the command
    line (the journal, /proc/PID/cmdline and the 0644 unit show it to every local user)."""
    secret = secret_flag_for(flag)
    if secret is None:
        return None
    spelled = '--%s' % flag if flag == secret else '--%s (a prefix of --%s, which argparse takes for it)' % (flag, secret)
    return ('%s: %s takes a secret, which on the command line every local user reads (/proc/PID/cmdline, the '
            'journal, the unit file); set it in %s instead (handed to SGLang inside the process)'
            % (where, spelled, variable_for(secret) if variable_for(secret) == 'sglang_api_key'
               else '%s[%r]' % (variable_for(secret), secret)))


def credential_keys(value):
    """The credential-like keys of an inline JSON config (a dict, or a JSON object as text); [] for '@FILE', a path
    or anything else."""
    if isinstance(value, str):
        if value.startswith('@'):
            return []
        try:
            value = json.loads(value)
        except ValueError:
            return []
    if not isinstance(value, dict):
        return []
    return sorted(str(key) for key in value if _CREDENTIAL_KEY.search(str(key)))


def credential_problem(flag, value, where):
    """Why the value of a config flag that may carry credentials (secret_flags.CREDENTIAL_CONFIG_FLAGS) is refused,
    or None. Only the offending key names are named, never a value."""
    if flag not in CREDENTIAL_CONFIG_FLAGS:
        return None
    keys = credential_keys(value)
    if not keys:
        return None
    return ('%s: --%s carries credentials inline (%s), which the command line and SGLang\'s /server_info show; '
            'put them in %s instead' % (where, flag, ', '.join(keys), CREDENTIAL_CONFIG_FLAGS[flag]))


def _extra_arg_flag(arg):
    """The bare flag name of a raw argument (``--api-key=x`` -> ``api-key``), or None for a value."""
    if not isinstance(arg, str) or not arg.startswith('--') or len(arg) < 3:
        return None
    return arg[2:].split('=', 1)[0].replace('_', '-')


def _value_to_str(flag, value, where):
    if isinstance(value, bool):
        raise ServerArgsError('%s[%r]: a true/false value inside a list is not an argument' % (where, flag))
    if isinstance(value, (dict, list)):
        # JSON-valued flags such as --json-model-override-args take the value as one compact JSON word.
        return json.dumps(value, separators=(',', ':'), sort_keys=True)
    if isinstance(value, (int, float, str)):
        return str(value)
    raise ServerArgsError('%s[%r]: unsupported value %r (expected a string, number, bool, list or dict)' % (where, flag, value))


def build_argv(server_args=None, extra_args=None, reserved=None):
    """Return SGLang's argument list (without the program) for the role's variables.

    ``server_args`` maps flag -> value: ``True`` renders the bare flag, ``False``/``None`` leave it out, a list
    repeats the flag once per item, a dict becomes compact JSON, anything else one value.
    ``extra_args`` is appended verbatim (raw arguments the dict cannot say).
    ``reserved`` maps flags that the role sets from dedicated variables to those variables' names, so that
    ``sglang_server_args: {port: 1}`` fails instead of silently fighting ``sglang_port``.
    """
    server_args = server_args or {}
    extra_args = extra_args or []
    reserved = reserved or {}
    if not isinstance(server_args, dict):
        raise ServerArgsError('sglang_server_args must be a dict of flag: value, got %s' % type(server_args).__name__)
    if not isinstance(extra_args, list):
        raise ServerArgsError('sglang_extra_args must be a list of raw arguments, got %s' % type(extra_args).__name__)

    argv = []
    seen = {}
    for name, value in server_args.items():
        flag = normalize_flag(name)
        if flag in seen:
            raise ServerArgsError('sglang_server_args: %r and %r are the same flag --%s' % (seen[flag], name, flag))
        seen[flag] = name
        owner = reserved_owner(flag, reserved)
        if owner:
            raise ServerArgsError('sglang_server_args: %r (--%s) is set by %s; set it there instead' % (name, flag, owner))
        why = secret_problem(flag, 'sglang_server_args[%r]' % name) or credential_problem(
            flag, value, 'sglang_server_args[%r]' % name)
        if why:
            raise ServerArgsError(why)
        if value is None or value is False:
            continue
        if value is True:
            argv.append('--' + flag)
        elif isinstance(value, list):
            for item in value:
                argv.extend(['--' + flag, _value_to_str(flag, item, 'sglang_server_args')])
        else:
            argv.extend(['--' + flag, _value_to_str(flag, value, 'sglang_server_args')])

    for index, arg in enumerate(extra_args):
        if not isinstance(arg, (str, int, float)) or isinstance(arg, bool):
            raise ServerArgsError('sglang_extra_args[%d]: expected a string, got %r' % (index, arg))
        flag = _extra_arg_flag(arg)
        owner = reserved_owner(flag, reserved) if flag else None
        if owner:
            # The value after it may be a secret (--api-key KEY): only the flag is named.
            raise ServerArgsError('sglang_extra_args[%d]: --%s is set by %s; set it there instead' % (index, flag, owner))
        if flag:
            inline = arg.split('=', 1)[1] if '=' in arg else None
            following = extra_args[index + 1] if index + 1 < len(extra_args) else None
            why = secret_problem(flag, 'sglang_extra_args[%d]' % index) or credential_problem(
                flag, inline if inline is not None else following, 'sglang_extra_args[%d]' % index)
            if why:
                raise ServerArgsError(why)
        argv.append(str(arg))
    return argv


def secret_environment(secret_args, where='sglang_secret_args'):
    """The secrets file's variables for ``sglang_secret_args`` (flag -> value): {LLMOPS_SGLANG_SECRET_<FIELD>: text}.

    Only SGLang 0.5.23's secret flags (module_utils/secret_flags.py) are taken, by their exact name (``admin-api-key``,
    ``--admin-api-key`` or ``admin_api_key``); the API key has its own variable. An empty or null value sets nothing.
    A dict value (``watermark-config``'s inline JSON) becomes compact JSON. Messages name the flag, never a value.
    """
    if secret_args is None:
        return {}
    if not isinstance(secret_args, dict):
        raise ServerArgsError('%s must be a dict of flag: secret value, got %s' % (where, type(secret_args).__name__))
    env = {}
    seen = {}
    takes = ', '.join(sorted(flag for flag in SECRET_FLAGS if variable_for(flag) == where))
    for name in sorted(secret_args, key=str):
        value = secret_args[name]
        flag = normalize_flag(name, where)
        if flag in seen:
            raise ServerArgsError('%s: %r and %r are the same flag --%s' % (where, seen[flag], name, flag))
        seen[flag] = name
        if flag in SECRET_FLAGS and variable_for(flag) != where:
            raise ServerArgsError('%s: %r (--%s) is set by %s; set it there instead' % (where, name, flag, variable_for(flag)))
        if flag not in SECRET_FLAGS:
            raise ServerArgsError('%s: %r is not a secret flag of SGLang 0.5.23; expected one of %s (every other flag '
                                  'goes in sglang_server_args)' % (where, name, takes))
        if value is None or value == '' or value == {}:
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int, float, dict)):
            raise ServerArgsError('%s[%r]: expected a string%s, got %s' % (
                where, name, ' or a dict (inline JSON)' if flag == 'watermark-config' else '', type(value).__name__))
        if isinstance(value, dict):
            if flag != 'watermark-config':
                raise ServerArgsError('%s[%r]: expected a string, got dict' % (where, name))
            value = json.dumps(value, separators=(',', ':'), sort_keys=True)
        env[env_name(flag)] = str(value)
    return env


# argparse's own last words, as SGLang 0.5.23 prints them: "sglang serve: error: argument --x: invalid float value"
# (server_args.py:679: ArgumentParser(prog="sglang serve")), "ambiguous option: --a could match --a-b, --a-c",
# "unrecognized arguments: --x 1".
_PARSER_ERROR = re.compile(r'^\S.*?: error: .+$', re.M)
_FLAG_IN_ERROR = re.compile(r'(?<![\w-])--([A-Za-z0-9][A-Za-z0-9_-]*)')


def parser_refusal(stderr, server_args=None, extra_args=None, reserved=None):
    """What SGLang's parser said about the role's argv, and the role variable that holds the flag it names.

    Returns {'error': the parser's error line (or the last line of its output), 'variable': e.g.
    ``sglang_server_args['mem-fraction-static']``, ``sglang_extra_args[2]``, ``sglang_port``, or the two argument
    variables when no flag is named}.
    """
    text = stderr or ''
    errors = _PARSER_ERROR.findall(text)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    error = errors[-1].strip() if errors else (lines[-1] if lines else 'the parser failed without a message')
    keys = {}
    for name in (server_args or {}):
        try:
            keys.setdefault(normalize_flag(name), name)
        except ServerArgsError:
            continue
    for flag in _FLAG_IN_ERROR.findall(error):
        if flag in keys:
            return {'error': error, 'variable': 'sglang_server_args[%r]' % keys[flag]}
        for index, arg in enumerate(extra_args or []):
            if str(arg) == '--' + flag or str(arg).startswith('--%s=' % flag):
                return {'error': error, 'variable': 'sglang_extra_args[%d]' % index}
        if flag in (reserved or {}):
            return {'error': error, 'variable': reserved[flag]}
    return {'error': error, 'variable': 'sglang_server_args / sglang_extra_args'}


# Parses an argv with the installed SGLang's own parser and starts nothing: the parser prepare_server_args builds
# (SGLang 0.5.23 server_args.py:679-680, prog "sglang serve"), then its parse_args (:696); exit 2 and argparse's
# words on a refusal, 3 when SGLang cannot be imported. `python -c PARSE_SCRIPT ARGS...` (sglang_config's parse).
PARSE_CANNOT_ASK = 3
PARSE_SCRIPT = """import argparse, sys
try:
    from sglang.srt.server_args import ServerArgs
except ImportError as exc:
    print('cannot check the arguments: sglang.srt.server_args does not import (%%s)' %% exc, file=sys.stderr)
    sys.exit(%d)
parser = argparse.ArgumentParser(prog='sglang serve')
ServerArgs.add_cli_args(parser)
parser.parse_args(sys.argv[1:])
""" % PARSE_CANNOT_ASK


def parse_verdict(rc, stderr, parse):
    """What SGLang's parser said of the role's argv (PARSE_SCRIPT's exit code and stderr): (refusal, note).

    ``parse``: sglang_config's option (python, server_args, extra_args, reserved, unit, version). Exit 0: (None,
    None). Exit 3 (an SGLang older than the releases the role knows, without sglang.srt.server_args): it cannot be
    asked, (None, its words and that the server's own start will judge the arguments). Anything else: the refusal,
    naming the role variable that holds the flag and SGLang's own words, and that nothing changed (None)."""
    if rc == 0:
        return None, None
    lines = [line.strip() for line in (stderr or '').splitlines() if line.strip()]
    if rc == PARSE_CANNOT_ASK:
        return None, "%s; the server's own start will judge them" % (lines[-1] if lines else 'SGLang cannot be asked')
    refusal = parser_refusal(stderr, parse.get('server_args'), parse.get('extra_args'), parse.get('reserved'))
    version = (' ' + parse['version']) if parse.get('version') else ''
    return ('%s: SGLang%s (%s) refuses the arguments: %s. Nothing was changed: %s keeps its running configuration.'
            % (refusal['variable'], version, parse.get('python'), refusal['error'], parse.get('unit'))), None


def systemd_quote(word):
    """Quote one argv word so that systemd's ExecStart= parser hands it to the program unchanged.

    systemd expands %-specifiers and $VARIABLES in ExecStart=, so ``%`` and ``$`` are doubled;
    inside double quotes it understands C escapes, so backslashes, quotes and control characters are escaped.
    """
    word = str(word)
    escaped = word.replace('%', '%%').replace('$', '$$')
    if word and not _NEEDS_QUOTES.search(word):
        return escaped
    escaped = (escaped.replace('\\', '\\\\').replace('"', '\\"')
               .replace('\n', '\\n').replace('\t', '\\t').replace('\r', '\\r'))
    return '"%s"' % escaped


def systemd_exec_line(argv):
    """Join argv into one ExecStart= value, each word quoted for systemd as needed."""
    if not isinstance(argv, (list, tuple)) or not argv:
        raise ServerArgsError('an ExecStart command needs a non-empty list of words, got %r' % (argv,))
    return ' '.join(systemd_quote(word) for word in argv)


# What systemd accepts as an environment variable name in EnvironmentFile=.
_ENV_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')


def environment_lines(env, where='sglang_env'):
    """Return ``KEY="value"`` lines for a systemd EnvironmentFile=, sorted by key.

    EnvironmentFile= does not expand variables or specifiers, but it does unquote and unescape double-quoted
    values, so backslashes and quotes are escaped. Newlines cannot be expressed and are refused.
    """
    if env is None:
        env = {}
    if not isinstance(env, dict):
        raise ServerArgsError('%s must be a dict of NAME: value, got %s' % (where, type(env).__name__))
    lines = []
    for name in sorted(env):
        value = env[name]
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise ServerArgsError('%s: %r is not an environment variable name (letters, digits, _; not starting with a digit)' % (where, name))
        if value is None:
            continue
        if isinstance(value, bool):
            value = '1' if value else '0'
        if not isinstance(value, (str, int, float)):
            raise ServerArgsError('%s[%s]: expected a string or number, got %s' % (where, name, type(value).__name__))
        value = str(value)
        if '\n' in value or '\r' in value:
            raise ServerArgsError('%s[%s]: a value cannot contain a line break in an EnvironmentFile' % (where, name))
        lines.append('%s="%s"' % (name, value.replace('\\', '\\\\').replace('"', '\\"')))
    return lines
