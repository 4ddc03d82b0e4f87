"""The SGLang 0.5.23 command line: every flag of the real parser, built from the generated table data/flags.json.

data/flags.json is written by tests/standin/tools/gen_flags.py from the release's own parser (the parser
prepare_server_args builds, 0.5.23 server_args.py:679-680): option strings, dest, action, nargs, const, type,
choices, default, required, in parser order. This module only turns each row back into an argparse action, so
abbreviations, ambiguity (`--cuda-graph-max-bs`), choices, types and deprecated spellings behave as in the release:
`usage: sglang serve ...` + `sglang serve: error: ...`, exit code 2.
"""
import argparse
import json
import os
import re
from decimal import Decimal

from sglang_standin import logfmt

TABLE_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "flags.json")


def _load_table():
    with open(TABLE_PATH) as handle:
        return json.load(handle)


TABLE = _load_table()
FLAGS = TABLE["flags"]
FIELDS = TABLE["fields"]
HIDDEN = {"watermark_key", "watermark_key_b", "watermark_config"}  # the only redactions (server_args.py:307-314)


# ---- the release's argparse `type=` functions, by name (argparse names them in its errors) ------------------------

def human_readable_int(value):
    """0.5.23 utils/common.py:3394-3429."""
    value = value.strip()
    si_multiplier = {"k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12}
    iec_multiplier = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match:
        number, suffix = match.groups()
        if suffix in iec_multiplier:
            if "." in number:
                raise argparse.ArgumentTypeError(
                    "Decimals are not allowed with IEC suffixes like '%s'. Use an integer IEC value such as '%d%s', "
                    "or an SI value such as '%s%s'." % (suffix, int(Decimal(number)), suffix, number, suffix[0]))
            return int(number) * iec_multiplier[suffix]
        return int(Decimal(number) * si_multiplier[suffix])
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            "Invalid integer value: '%s'. Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). "
            "Suffixes are case-sensitive." % value) from None


def nullable_str(val):
    """0.5.23 utils/common.py:3388-3391."""
    if not val or val == "None":
        return None
    return val


def json_list_type(value):
    """0.5.23 utils/common.py:4818-4824."""
    try:
        return json.loads(value)
    except ValueError:
        raise argparse.ArgumentTypeError("Invalid JSON list: %s. Please provide a valid JSON list." % value) from None


def parse_cuda_graph_backend_arg(raw):
    """0.5.23 model_executor/cuda_graph_config.py:237-243."""
    if raw == "tc_piecewise":
        raise argparse.ArgumentTypeError("tc_piecewise was removed; select breakable, full, or disabled")
    return raw


def parse_cuda_graph_config_arg(raw):
    """0.5.23 model_executor/cuda_graph_config.py:246-260 (the JSON-object checks; the per-key ones are left out)."""
    try:
        parsed = json.loads(raw)
    except ValueError as err:
        raise argparse.ArgumentTypeError("--cuda-graph-config must be JSON: %s" % err) from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError("--cuda-graph-config must be a JSON object, got %s" % type(parsed).__name__)
    return parsed


TYPES = {"str": str, "int": int, "float": float, "loads": json.loads, "human_readable_int": human_readable_int,
         "nullable_str": nullable_str, "json_list_type": json_list_type,
         "parse_cuda_graph_backend_arg": parse_cuda_graph_backend_arg,
         "parse_cuda_graph_config_arg": parse_cuda_graph_config_arg}


# ---- the release's custom actions (0.5.23 arg_groups/argparse_actions.py) -----------------------------------------

def _deprecation_warning(message):
    """argparse_actions.py:28-29: logger.warning in yellow. It runs inside parse_args, before prepare_server_args'
    logging.basicConfig, so Python's last-resort handler prints the bare message on stderr."""
    logfmt.raw_stderr("\033[1;33m%s\033[0m" % message)


class DeprecatedStoreTrueAction(argparse.Action):
    """argparse_actions.py:77-100: stores True and warns, naming the replacement."""

    def __init__(self, option_strings, dest, new_flag=None, nargs=0, const=True, default=False, **kwargs):
        self.new_flag = new_flag
        super(DeprecatedStoreTrueAction, self).__init__(option_strings, dest, nargs=nargs, const=const,
                                                        default=default, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        replacement = " Use '%s' instead." % self.new_flag if self.new_flag else ""
        _deprecation_warning("'%s' is deprecated and will be removed in a future release.%s"
                             % (option_string, replacement))
        setattr(namespace, self.dest, True)


class DeprecatedStoreConstAction(argparse.Action):
    """argparse_actions.py:103-134: warns and stores `const_value`."""

    def __init__(self, option_strings, dest, new_flag=None, const_value=None, nargs=0, default=None, **kwargs):
        self.new_flag = new_flag
        self.const_value = const_value
        super(DeprecatedStoreConstAction, self).__init__(option_strings, dest, nargs=nargs, default=default, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        replacement = " Use '%s' instead." % self.new_flag if self.new_flag else ""
        _deprecation_warning("'%s' is deprecated and will be removed in a future release.%s"
                             % (option_string, replacement))
        setattr(namespace, self.dest, self.const_value)


class LoRAPathAction(argparse.Action):
    """argparse_actions.py:8-25: JSON objects or plain paths, as a list."""

    def __call__(self, parser, namespace, values, option_string=None):
        lora_paths = []
        for lora_path in values or []:
            lora_path = lora_path.strip()
            lora_paths.append(json.loads(lora_path) if lora_path.startswith("{") and lora_path.endswith("}")
                              else lora_path)
        setattr(namespace, self.dest, lora_paths)


ACTIONS = {"_StoreAction": "store", "_StoreTrueAction": "store_true", "_StoreFalseAction": "store_false",
           "_StoreConstAction": "store_const", "_AppendAction": "append", "_CountAction": "count",
           "BooleanOptionalAction": getattr(argparse, "BooleanOptionalAction", None),
           "DeprecatedStoreTrueAction": DeprecatedStoreTrueAction,
           "DeprecatedStoreConstAction": DeprecatedStoreConstAction, "LoRAPathAction": LoRAPathAction}


def _kwargs(flag):
    """add_argument keywords that rebuild one row of the table."""
    action = ACTIONS.get(flag["action"])
    if action is None:
        raise ValueError("data/flags.json: unknown action %s for %s (teach flags.py)" % (flag["action"], flag["dest"]))
    kwargs = {"dest": flag["dest"], "default": flag["default"], "action": action}
    if flag["required"]:
        kwargs["required"] = True
    if action in ("store", "append", LoRAPathAction):
        if flag["type"] is not None:
            if flag["type"] not in TYPES:
                raise ValueError("data/flags.json: unknown type %s for %s (teach flags.py)" % (flag["type"], flag["dest"]))
            kwargs["type"] = TYPES[flag["type"]]
        if flag["nargs"] is not None:
            kwargs["nargs"] = flag["nargs"]
        if flag["const"] is not None:
            kwargs["const"] = flag["const"]
    if flag["choices"] is not None and action not in ("store_true", "store_false", argparse.BooleanOptionalAction):
        kwargs["choices"] = flag["choices"]
    if flag.get("metavar") is not None:
        kwargs["metavar"] = flag["metavar"] if not isinstance(flag["metavar"], list) else tuple(flag["metavar"])
    if action is DeprecatedStoreTrueAction:
        kwargs.pop("default")
        kwargs["new_flag"] = flag.get("new_flag")
    if action is DeprecatedStoreConstAction:
        kwargs.update(new_flag=flag.get("new_flag"), const_value=flag.get("const_value"), nargs=flag["nargs"])
        if flag["choices"] is not None:
            kwargs["choices"] = flag["choices"]
    return kwargs


def option_strings(flag):
    if flag["action"] == "BooleanOptionalAction":  # it adds the --no-X spelling itself
        return [name for name in flag["option_strings"] if not name.startswith("--no-")]
    return flag["option_strings"]


def add_cli_args(parser):
    """ServerArgs.add_cli_args: every flag of the release on `parser`, in the release's order."""
    for flag in FLAGS:
        parser.add_argument(*option_strings(flag), **_kwargs(flag))


def resolve(server_args):
    """The few resolutions the stand-in needs (0.5.23 does them in `resolve_once`, `server_args.py:244-300`)."""
    if getattr(server_args, "served_model_name", None) is None:
        server_args.served_model_name = server_args.model_path
    if getattr(server_args, "tokenizer_path", None) is None:
        server_args.tokenizer_path = server_args.model_path
    return server_args


def resolved_dict(server_args):
    """Every ServerArgs field in the release's order with its value, the API key included: 0.5.23 redacts only
    the watermark fields (`entrypoints/engine.py:173-174`, `sampling/watermarking/core.py:25-27`)."""
    values = vars(server_args)
    return {name: values.get(name) for name in FIELDS if name not in HIDDEN}
