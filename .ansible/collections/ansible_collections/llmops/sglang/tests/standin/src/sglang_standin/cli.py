"""The `sglang` console script of 0.5.23: `sglang serve <launch_server flags>` (the recommended entrypoint)."""
import argparse
import sys

from sglang_standin import SGLANG_VERSION, server


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "serve":
        return server.main(argv[1:])
    parser = argparse.ArgumentParser(prog="sglang")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("serve", help="Launch the SGLang server.", add_help=False)
    sub.add_parser("version", help="Print the SGLang version.")
    args = parser.parse_args(argv)
    if args.command == "version":
        print("sglang version: %s" % SGLANG_VERSION)
        return 0
    parser.print_help()
    return 1


if __name__ == "__main__":
    sys.exit(main())
