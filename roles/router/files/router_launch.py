"""Start sglang-router 0.3.2 with its API key handed over by systemd, never on the command line.

    python router_launch.py CREDENTIAL [launch_router flags...]

sglang-router 0.3.2 takes the key only as `--api-key KEY` (sglang_router/router_args.py: the `api_key` field, no
environment variable), which would put it in /proc/PID/cmdline and the journal's _CMDLINE. The unit runs this
launcher as the unprivileged router user with `LoadCredential=CREDENTIAL:/var/lib/llmops-sglang/router/NAME.secrets`:
systemd (as root) copies that root-only 0600 file into the service's private credentials directory
($CREDENTIALS_DIRECTORY, readable by the service's user only, on no disk the user can write), so the router user
never needs a right on the file itself. This launcher reads `ROUTER_API_KEY=KEY` from
$CREDENTIALS_DIRECTORY/CREDENTIAL (empty: no key), appends `--api-key KEY` to the argv it hands to the router's own
parser in this process (sglang_router/launch_router.py: parse_router_args, launch_router), so the key is only in
this process's memory: not in its argv, its environment or a log line (checked by tests/integration/test_router.py).
Without the credential (run outside its unit, or LoadCredential= missing) it refuses to start rather than start
without the key. Installed root-owned by the llmops.sglang.router role.
"""
import os
import sys


def read_key(path):
    with open(path) as handle:
        for line in handle:
            name, _sep, value = line.rstrip("\n").partition("=")
            if name == "ROUTER_API_KEY":
                return value
    return ""


def main(argv):
    if not argv:
        sys.stderr.write("usage: router_launch.py CREDENTIAL [launch_router flags...]\n")
        return 2
    directory = os.environ.get("CREDENTIALS_DIRECTORY", "")
    if not directory:
        sys.stderr.write("router_launch.py: no $CREDENTIALS_DIRECTORY: run me from the unit, whose LoadCredential=%s:... "
                         "hands over the router's secrets\n" % argv[0])
        return 2
    try:
        key = read_key(os.path.join(directory, argv[0]))
    except OSError as err:
        sys.stderr.write("router_launch.py: cannot read the credential %s: %s\n" % (argv[0], err.strerror))
        return 2
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
