"""Write the stand-in's flag table from the real SGLang release's parser.

    .venv/bin/python tests/standin/tools/gen_flags.py           # (re)write src/sglang_standin/data/flags.json
    .venv/bin/python tests/standin/tools/gen_flags.py --check   # exit 1 if the committed file differs

The parser is the release's own (`tests/conformance/sglang_release.py`: `flag_table()` of the parser
prepare_server_args builds, 0.5.23 server_args.py:679-680), imported from the pinned wheel with inert stand-ins for
torch & co. Every action is kept in parser order without its help text, plus the two attributes the deprecated
actions carry (`new_flag`, `const_value`, argparse_actions.py:77-160), set-valued choices sorted and the ServerArgs field order (the order
resolved_dict() and so the `server_args={...}` log line use, server_args.py:316-333).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
OUT = os.path.join(HERE, "..", "src", "sglang_standin", "data", "flags.json")
sys.path.insert(0, os.path.join(ROOT, "tests", "conformance"))

import sglang_release  # noqa: E402  pylint: disable=wrong-import-position


def table():
    flags = sglang_release.flag_table()
    actions = [action for action in sglang_release.real_parser()._actions  # pylint: disable=protected-access
               if not isinstance(action, argparse._HelpAction)]  # pylint: disable=protected-access
    assert len(actions) == len(flags)
    for entry, action in zip(flags, actions):
        assert entry["dest"] == action.dest
        entry.pop("help")
        for extra in ("new_flag", "const_value"):
            if hasattr(action, extra):
                entry[extra] = getattr(action, extra)
        if isinstance(action.choices, (set, frozenset)):  # a set (server_args.py:356-362): no order to keep
            entry["choices"] = sorted(entry["choices"])
            entry["choices_unordered"] = True
        for key, value in entry.items():
            if isinstance(value, dict) and set(value) == {"repr"}:
                raise SystemExit("%s: %s is not JSON (%s): teach gen_flags.py and flags.py about it"
                                 % (entry["option_strings"], key, value["repr"]))
    module = sglang_release.server_args()
    fields = [field.name for field in module.record_fields(module.ServerArgs)]
    return {"release": sglang_release.release(), "generated_by": "tests/standin/tools/gen_flags.py",
            "fields": fields, "flags": flags}


def render(data):
    # one flag per line: readable diffs when a release moves a flag
    lines = ['{"release": %s, "generated_by": %s,' % (json.dumps(data["release"]), json.dumps(data["generated_by"])),
             ' "fields": %s,' % json.dumps(data["fields"]), ' "flags": [']
    lines += ["  %s%s" % (json.dumps(flag, sort_keys=True), "," if index < len(data["flags"]) - 1 else "")
              for index, flag in enumerate(data["flags"])]
    lines.append(" ]}")
    return "\n".join(lines) + "\n"


def main(argv):
    text = render(table())
    if argv[:1] == ["--check"]:
        with open(OUT) as handle:
            if handle.read() != text:
                sys.stderr.write("%s is stale: run tests/standin/tools/gen_flags.py\n" % OUT)
                return 1
        return 0
    with open(OUT, "w") as handle:
        handle.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
