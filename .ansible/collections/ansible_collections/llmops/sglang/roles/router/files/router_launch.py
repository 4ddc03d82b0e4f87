"""Start sglang-router 0.3.2 with its API key read from a root-only file, never from the command line.

    python router_launch.py SECRETS_FILE [launch_router flags...]

sglang-router 0.3.2 takes the key only as `--api-key KEY` (sglang_router/router_args.py: the `api_key` field, no
environment variable), which would put it in /proc/PID/cmdline and the journal's _CMDLINE. This launcher reads
`ROUTER_API_KEY=KEY` from SECRETS_FILE (0600 root; missing or empty: no key), appends `--api-key KEY` to the argv it
hands to the router's own parser in this process (sglang_router/launch_router.py: parse_router_args,
launch_router), so the key is only in this process's memory: not in its argv, its environment or a log line (the
router logs its mode and policy at start, not its key: checked by tests/integration/test_router.py).
Installed root-owned by the llmops.sglang.router role.
"""
import sys


def read_key(path):
    try:
        with open(path) as handle:
            for line in handle:
                name, _sep, value = line.rstrip("\n").partition("=")
                if name == "ROUTER_API_KEY":
                    return value
    except FileNotFoundError:
        return ""
    return ""


def main(argv):
    if not argv:
        sys.stderr.write("usage: router_launch.py SECRETS_FILE [launch_router flags...]\n")
        return 2
    key = read_key(argv[0])
    args = list(argv[1:])
    if "--api-key" in args or any(arg.startswith("--api-key=") for arg in args):
        sys.stderr.write("router_launch.py: --api-key belongs in the secrets file, not on the command line\n")
        return 2
    if key:
        args += ["--api-key", key]
    from sglang_router.launch_router import launch_router, parse_router_args
    launch_router(parse_router_args(args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
