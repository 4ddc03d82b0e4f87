"""The parser entry point of SGLang 0.5.23 (`sglang/srt/server_args.py`), in the test stand-in.

The same calls work here and on the real release (0.5.23 `server_args.py:350-451`, `:668-720`):

    from sglang.srt.server_args import prepare_server_args
    prepare_server_args(argv)          # argparse prog "sglang serve"; exit 2 + usage on a bad argv

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    ServerArgs.from_cli_args(parser.parse_args(argv))

Neither resolves anything (0.5.23 `ServerArgs.__post_init__` is empty, `server_args.py:241-242`; resolution is
`resolve_once()`, called by the launcher): no config.json is read, no GPU is touched, nothing is started.
"""
import argparse
import logging

from sglang_standin import flags


class ServerArgs(object):
    """The operator's raw input: one attribute per parser dest, plus the launch command."""

    def __init__(self, **fields):
        for name, value in fields.items():
            setattr(self, name, value)
        self._launch_command = None

    @staticmethod
    def add_cli_args(parser):
        """Every flag of 0.5.23's parser (the generated table in sglang_standin/data/flags.json)."""
        flags.add_cli_args(parser)

    @classmethod
    def from_cli_args(cls, args):
        return cls(**vars(args))

    @property
    def launch_command(self):
        """0.5.23 `server_args.py:302-305`: the original argv joined by spaces; only watermark secrets are redacted."""
        return self._launch_command

    def resolved_dict(self):
        """The field values after the launcher's resolution (0.5.23 `server_args.py:316-333`), as a plain dict."""
        return flags.resolved_dict(self)

    def __repr__(self):
        hidden = {"watermark_key", "watermark_key_b", "watermark_config"}  # 0.5.23 server_args.py:307-314
        return "ServerArgs(%s)" % ", ".join("%s=%r" % (name, value) for name, value in vars(self).items()
                                            if not name.startswith("_") and name not in hidden)


def redact_watermark_command_line(argv, watermark_config=None):
    """0.5.23 `sampling/watermarking/core.py:110-134`: nothing but the watermark config is redacted."""
    result = []
    redact_next = False
    for argument in argv:
        if redact_next:
            result.append("<redacted>")
            redact_next = False
        elif watermark_config is not None and argument == watermark_config:
            result.append("<redacted>")
        elif watermark_config is not None and "=" in argument and argument.split("=", 1)[1] == watermark_config:
            result.append("%s=<redacted>" % argument.split("=", 1)[0])
        elif argument == "--watermark-config":
            result.append(argument)
            redact_next = True
        elif argument.startswith("--watermark-config="):
            result.append("--watermark-config=<redacted>")
        else:
            result.append(argument)
    return " ".join(result)


def prepare_server_args(argv):
    """0.5.23 `server_args.py:668-720`: parse argv with prog `sglang serve`, set up logging, keep the command."""
    argv = list(argv)
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    raw_args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, raw_args.log_level.upper()), format="[%(asctime)s] %(message)s",
                        datefmt="%Y-%m-%d %H:%M:%S", force=True)
    server_args = ServerArgs.from_cli_args(raw_args)
    server_args._launch_command = redact_watermark_command_line(argv, getattr(raw_args, "watermark_config", None))
    return server_args
