"""Start sglang-router 0.3.2 with its API key and its workers handed over by systemd, the key never on a command line.

    python router_launch.py CREDENTIAL [--llmops-workers-credential WORKERS] [launch_router flags...]

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

The workers: 0.3.2 keeps its workers in memory, so a router restarted by itself (a crash, a reboot, `systemctl
restart`) would come back with none. With `--llmops-workers-credential WORKERS` (the unit's second
`LoadCredential=WORKERS:/var/lib/llmops-sglang/router/NAME.workers.json`, the desired-workers file that the role's
`sglang_router_workers` keeps in step with every registration and drain, root 0600) this launcher reads
`{"workers": [URL, ...]}` there and hands the URLs to the router as `--worker-urls`. Measured on 0.3.2: the router
answers at once (`Router ready | workers: []`) and adds them in the background, each once its health check passed,
discovering each with its own `--api-key` (listed with its model); a worker that is down at that moment is retried
(every 1 to 5 s) and added when it comes up, without holding back the others. A file that cannot be read or is not
such a list: the router starts without workers (and says so on stderr), as it would without this option; the next
playbook run registers them.
"""
import json
import os
import sys

WORKERS_OPTION = "--llmops-workers-credential"


def read_workers(path):
    """The worker URLs of the desired-workers file (the same rules as plugins/module_utils/router/router_desired.py)."""
    with open(path) as handle:
        doc = json.load(handle)
    if not isinstance(doc, dict) or not isinstance(doc.get("workers"), list):
        raise ValueError('expected {"workers": [URL, ...]}')
    urls = []
    for url in doc["workers"]:
        rest = url.split("://", 1)[1] if isinstance(url, str) and url.startswith(("http://", "https://")) else ""
        if not rest or any(ch in rest for ch in "/?#@ \t\r\n\\\"'"):
            raise ValueError("not a worker URL (http://HOST:PORT): %r" % (url,))
        if url not in urls:
            urls.append(url)
    return urls


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
    workers_credential = None
    if args[:1] == [WORKERS_OPTION] and len(args) >= 2:
        workers_credential, args = args[1], args[2:]
    if "--api-key" in args or any(arg.startswith("--api-key=") for arg in args):
        sys.stderr.write("router_launch.py: --api-key belongs in the secrets file, not on the command line\n")
        return 2
    if workers_credential and any(arg == "--worker-urls" or arg.startswith("--worker-urls=") for arg in args):
        sys.stderr.write("router_launch.py: --worker-urls comes from the desired-workers file, not the command line\n")
        return 2
    if key:
        args += ["--api-key", key]
    if workers_credential:
        try:
            urls = read_workers(os.path.join(directory, workers_credential))
        except (OSError, ValueError) as err:
            # Serving without workers (503) until a playbook registers them beats not serving at all.
            sys.stderr.write("router_launch.py: starting without workers: cannot use the desired-workers credential "
                             "%s: %s\n" % (workers_credential, getattr(err, "strerror", None) or err))
            urls = []
        sys.stderr.write("router_launch.py: %d desired worker(s) from the credential %s: %s\n"
                         % (len(urls), workers_credential, " ".join(urls) or "none"))
        if urls:
            args += ["--worker-urls"] + urls
    from sglang_router.launch_router import launch_router, parse_router_args
    launch_router(parse_router_args(args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
