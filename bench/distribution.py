# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Distribution (issue 28): time until a checkpoint version is whole on N hosts, mirror alone vs waves vs pipelined.

Part of `make bench` (section `distribution`: bench/cli.py `--only distribution` / `--skip distribution`,
`--distribution-sizes`, `--distribution-mib`, `--distribution-rate-mbit`; page.py renders it). One private fleet of
max(sizes) hosts (its own state dir and prefix `bd`), each host's link limited with `tc` in both directions (tbf on
the host's outer veth, vf-HOST: what it receives; and on its inner host0: what it sends), the mirror on the
controller one uplink of the same rate shared by all its connections. After the server role's peer access tasks
(as bench/model_sync.py), llmops.sglang.sglang_model_sync runs on the first N hosts at once (one ansible-playbook
run with forks >= N, as an operator's play would) for a generated checkpoint, four ways side by side at each size:
every host from the mirror (peers: []), waves, pipelined as a chain (fanout 1) and as a tree (fanout 2); then the
same play again with the version present on all N (the fixed cost: Ansible's start, the module's start and
return on N hosts). Per run: the wall time until the last host returned, against one transfer time (the
checkpoint's bytes / RATE), the mirror's GETs and bytes, and CPU: the hosts' (each nspawn host's cgroup), the
controller's (ansible-playbook and its children) and the whole machine's busy share (/proc/stat).

Then a link probe (no tc, no rate limit): one host reads a complete file from another with the sync account's
`follow` request, default cipher and aes128-gcm, to show what one peer link costs in CPU and how fast it can go on
this machine when the link is not the limit.

Standalone on a booted fleet (no tc on a fleet another session uses):

    PYTHONPATH=.:tests .venv/bin/python -m bench.distribution --state-dir /var/lib/llmops-it-hb --prefix hb \
        --hosts 1,4 --mib 32 --rate-mbit 16
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from .checkpoint_verify import write_shard
from .common import REPO, log
from .model_sync import DEST, SYNC_LEFTOVERS, _env, _peer_access
from .scale import linear_fit

__metaclass__ = type  # pylint: disable=invalid-name

SIZES = (1, 6, 12, 24)
# 32 MiB at 8 Mbit/s: one copy takes 33.6 s, so the mirror alone on 24 hosts takes 24 copies (about 13.5 minutes) and
# the whole section about 50 minutes on this 2-core machine; the "a few GiB" is for a real machine (the
# ratios, not the seconds, are the result). At 16 Mbit/s (16.8 s a copy) the section takes half as long, but Ansible's
# fixed cost of a run (4 to 5 s at 24 hosts) is then a quarter of a transfer time: the 24-host chain measured 1.76
# transfer times there, 1.38 at 8 Mbit/s, where a real fleet's transfer time of minutes would put it near 1.
MIB = 32
SHARDS = 8
RATE_MBIT = 8
WAYS = ("mirror", "waves", "chain", "tree")
TREE_FANOUT = 2
WAY_LABELS = {"mirror": "mirror alone", "waves": "waves", "chain": "pipelined chain (fanout 1, default)",
              "tree": "pipelined tree (fanout %d)" % TREE_FANOUT, "present": "already present (fixed cost)"}
TARGET_HOSTS = 24
TARGET_RATIO = 1.5
PREFIX = "bd"
PLAY = """- name: The model sync on every host at once (bench/distribution.py)
  hosts: "{{ dist_hosts }}"
  gather_facts: false
  tasks:
    - name: sglang_model_sync
      llmops.sglang.sglang_model_sync:
        dest: "{{ dist.dest }}"
        version: "{{ dist.version }}"
        manifest: "{{ dist.manifest }}"
        host: "{{ inventory_hostname }}"
        mirror: "{{ dist_mirror[inventory_hostname] }}"
        peers: "{{ dist.peers }}"
        distribution: "{{ dist.distribution }}"
        fanout: "{{ dist.fanout }}"
        peer_wait: 1800
        poll_interval: 1.0
        timeout: 60
"""


# ---- pure: ratios, fits, the verdict (tests/unit/test_bench_distribution.py) ----

def transfer_seconds(total_bytes, rate_bytes_s):
    """One transfer time: the checkpoint's bytes over one link's rate."""
    return total_bytes / float(rate_bytes_s)


def way_args(way, hosts):
    """The module options that make a way: (peers, distribution, fanout). hosts: [{name, address}] in play order."""
    peers = [{"name": h["name"], "address": h["address"], "have": False} for h in hosts]
    return {"mirror": ([], "waves", 1), "waves": (peers, "waves", 1), "chain": (peers, "pipelined", 1),
            "tree": (peers, "pipelined", TREE_FANOUT), "present": (peers, "waves", 1)}[way]


def expected_transfer_times(way, hosts, fanout=TREE_FANOUT):
    """What the link model alone predicts, in transfer times (no start-up, no per-hop delay): the mirror alone
    shares one uplink among all (N); waves double per wave (1 + ceil(log2 N) waves, the mirror's first included);
    a pipelined chain is one transfer whatever N; in a tree of fanout k an inner host sends k copies through its
    own link of the same rate, so each child gets 1/k of it: min(k, N - 1) transfer times."""
    if hosts < 1:
        raise ValueError("hosts must be at least 1")
    if way == "mirror":
        return float(hosts)
    if way == "waves":
        waves, have = 0, 0
        while have < hosts:
            have = max(1, have * 2)
            waves += 1
        return float(waves)
    if way == "chain":
        return 1.0
    if way == "tree":
        return float(max(1, min(fanout, hosts - 1)))
    raise ValueError("unknown way %r" % way)


def summarize(runs, transfer_s):
    """Rows per (hosts, way) with the ratios: to one transfer time, to the 1-host mirror run (one copy plus Ansible),
    and net of the fixed cost (the same play with the version present on those hosts); fits of wall over hosts per
    way (seconds per extra host)."""
    single = [r["wall_s"] for r in runs if r["hosts"] == 1 and r["way"] == "mirror" and r.get("ok", True)]
    single = single[0] if single else None
    fixed = dict((r["hosts"], r["wall_s"]) for r in runs if r["way"] == "present" and r.get("ok", True))
    fixed_rows = sorted([hosts, wall] for hosts, wall in fixed.items())
    rows = []
    for run in runs:
        if run["way"] == "present":
            continue
        row = dict(run)
        row["per_transfer"] = round(run["wall_s"] / transfer_s, 2) if run.get("ok", True) else None
        row["per_single_host"] = round(run["wall_s"] / single, 2) if single and run.get("ok", True) else None
        base = fixed.get(run["hosts"])
        row["fixed_s"] = base
        row["net_per_transfer"] = (round(max(0.0, run["wall_s"] - base) / transfer_s, 2)
                                   if base is not None and run.get("ok", True) else None)
        row["expected"] = expected_transfer_times(run["way"], run["hosts"])
        rows.append(row)
    fits = {}
    for way in WAYS:
        points = [(r["hosts"], r["wall_s"]) for r in rows if r["way"] == way and r.get("ok", True)]
        fit = linear_fit(points)
        fits[way] = None if fit is None else {"intercept": fit["intercept"], "slope": fit["slope"],
                                              "slope_per_transfer": fit["slope"] / transfer_s}
    return {"rows": rows, "fits": fits, "single_s": single, "fixed": fixed_rows}


RESULT_LINE = re.compile(r"^(?:ok|changed|fatal|failed): \[([^\]]+)\](?:: FAILED!)? => ", re.M)


def parse_results(stdout):
    """{host: result} from ansible-playbook -v's default output with ANSIBLE_CALLBACK_RESULT_FORMAT=json."""
    results = {}
    decoder = json.JSONDecoder()
    for match in RESULT_LINE.finditer(stdout):
        try:
            value, _end = decoder.raw_decode(stdout, match.end())
        except ValueError:
            continue
        if isinstance(value, dict):
            results[match.group(1)] = value
    return results


def best_pipelined(summary, hosts):
    """The faster pipelined row at ``hosts`` (chain or tree), or None."""
    rows = [r for r in summary["rows"] if r["hosts"] == hosts and r["way"] in ("chain", "tree")
            and r.get("per_transfer") is not None]
    return min(rows, key=lambda r: r["wall_s"]) if rows else None


def target_note(summary, hosts=TARGET_HOSTS, ratio=TARGET_RATIO):
    """The page's target line: "24 hosts within 1.5 transfer times", met or missed with the figure."""
    best = best_pipelined(summary, hosts) if summary else None
    if best is None:
        return "Target (issue 28) %d hosts within %.1f transfer times: not measured (no pipelined run on %d hosts)." % (
            hosts, ratio, hosts)
    waves = [r for r in summary["rows"] if r["hosts"] == hosts and r["way"] == "waves" and r.get("per_transfer")]
    met = best["per_transfer"] <= ratio
    text = ("Target (issue 28) %d hosts within %.1f transfer times: %s (%s: %.1f s, %.2f transfer times of %.1f s; "
            % (hosts, ratio, "met" if met else "**missed**", WAY_LABELS[best["way"]], best["wall_s"],
               best["per_transfer"], best["wall_s"] / best["per_transfer"]))
    if best.get("net_per_transfer") is not None:
        text += "%.2f net of the %.1f s the same play takes with the version present; " % (
            best["net_per_transfer"], best["fixed_s"])
    if waves:
        text += "waves %.2f" % waves[0]["per_transfer"]
    else:
        text += "waves not measured"
    return text + ")."


def default_note(summary):
    """Whether the measurement bears out the default (pipelined, since issue 28's measurement; waves before): pipelined
    faster than waves at every size > 1."""
    sizes = sorted(set(r["hosts"] for r in summary["rows"] if r["hosts"] > 1))
    if not sizes:
        return None
    faster = []
    for size in sizes:
        best = best_pipelined(summary, size)
        waves = [r for r in summary["rows"] if r["hosts"] == size and r["way"] == "waves" and r.get("ok", True)]
        if best is None or not waves:
            return None
        faster.append(best["wall_s"] < waves[0]["wall_s"])
    return all(faster)


# ---- the measurement ----

class Uplink(object):
    """One shared uplink: send(n) returns when n more bytes fit into RATE bytes/s since the start."""

    def __init__(self, rate):
        self.rate = float(rate)
        self.lock = threading.Lock()
        self.sent = 0
        self.started = time.monotonic()

    def reset(self):
        with self.lock:
            self.sent, self.started = 0, time.monotonic()

    def send(self, count):
        with self.lock:
            self.sent += count
            due = self.started + self.sent / self.rate
        time.sleep(max(0.0, due - time.monotonic()))


def mirror_server(directory, address, uplink, requests):
    """HTTP directory with Range, paced by the shared uplink; requests: [(file, from byte, bytes sent)]."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args):
            pass

        def do_GET(self):  # noqa: N802
            name = unquote(self.path.lstrip('/'))
            path = os.path.join(directory, name)
            if '/' in name or not os.path.isfile(path):
                self.send_error(404)
                return
            size = os.path.getsize(path)
            start = 0
            ranged = self.headers.get('Range', '')
            if ranged.startswith('bytes=') and ranged.endswith('-'):
                start = int(ranged[len('bytes='):-1])
                self.send_response(206)
            else:
                self.send_response(200)
            self.send_header('Content-Length', str(size - start))
            self.end_headers()
            entry = [name, start, 0]
            requests.append(entry)
            with open(path, 'rb') as handle:
                handle.seek(start)
                while True:
                    block = handle.read(64 * 1024)
                    if not block:
                        break
                    uplink.send(len(block))
                    self.wfile.write(block)
                    entry[2] += len(block)

    server = ThreadingHTTPServer((address, 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def cgroup_cpu(name):
    """A fleet host's CPU seconds so far (its nspawn cgroup's cpu.stat usage_usec), None when not found."""
    for root in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup"):
        path = os.path.join(root, "nspawn", name, "cpu.stat")
        if os.path.exists(path):
            with open(path) as handle:
                for line in handle:
                    key, _sep, value = line.partition(" ")
                    if key == "usage_usec":
                        return int(value) / 1e6
    return None


def machine_busy():
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    with open("/proc/stat") as handle:
        fields = [int(v) for v in handle.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def parallel(function, items):
    threads = [threading.Thread(target=function, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


class Bench(object):
    """The fleet's hosts ([{name, address, mirror}]), its inventory, a run() of shell commands on a host."""

    def __init__(self, hosts, inventory, run, work):
        self.hosts = hosts
        self.inventory = str(inventory)
        self.run = run
        self.work = work

    def clean(self, hosts):
        parallel(lambda h: self.run(h["name"], "rm -rf %s" % os.path.dirname(DEST)), hosts)

    def play(self, hosts, way, manifest, urls):
        """One ansible-playbook run of the module on `hosts` at once: wall, per-host results, CPU figures."""
        peers, distribution, fanout = way_args(way, hosts)
        extra = {"dist_hosts": ",".join(h["name"] for h in hosts),
                 "dist_mirror": dict((h["name"], urls[h["name"]]) for h in hosts),
                 "dist": {"dest": DEST, "version": "v1", "manifest": manifest, "peers": peers,
                          "distribution": distribution, "fanout": fanout}}
        vars_file = os.path.join(self.work, "vars.json")
        with open(vars_file, "w") as handle:
            json.dump(extra, handle)
        play = os.path.join(self.work, "dist.yml")
        with open(play, "w") as handle:
            handle.write(PLAY)
        env = dict(_env(), ANSIBLE_FORKS=str(max(5, len(hosts))), ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
        command = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-v", "-i", self.inventory, play,
                   "-e", "@" + vars_file]
        names = [h["name"] for h in hosts]
        cpu_before = dict((n, cgroup_cpu(n)) for n in names)
        busy_before = machine_busy()
        rusage = resource.getrusage(resource.RUSAGE_CHILDREN)
        load = os.getloadavg()[0]
        started = time.monotonic()
        done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, check=False, cwd=str(REPO))
        wall = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        busy_after = machine_busy()
        cpu_after = dict((n, cgroup_cpu(n)) for n in names)
        results = parse_results(done.stdout)
        failed = dict((n, (results.get(n) or {}).get("msg") or "no result") for n in names
                      if n not in results or results[n].get("failed"))
        hosts_cpu = (sum(cpu_after[n] - cpu_before[n] for n in names)
                     if all(cpu_before[n] is not None and cpu_after[n] is not None for n in names) else None)
        jiffies = busy_after[1] - busy_before[1]
        row = {"way": way, "hosts": len(hosts), "wall_s": round(wall, 1), "rc": done.returncode, "ok": not failed,
               "loadavg_1m": round(load, 2),
               "controller_cpu_s": round((after.ru_utime - rusage.ru_utime) + (after.ru_stime - rusage.ru_stime), 1),
               "hosts_cpu_s": round(hosts_cpu, 1) if hosts_cpu is not None else None,
               "machine_busy": round((busy_after[0] - busy_before[0]) / float(jiffies), 2) if jiffies else None,
               "sources": dict((n, (results.get(n) or {}).get("source")) for n in names),
               "fallbacks": dict((n, results[n].get("fallback")) for n in names
                                 if (results.get(n) or {}).get("fallback")),
               "seconds": dict((n, (results.get(n) or {}).get("seconds")) for n in names)}
        if failed:
            row["failed"] = dict(list(failed.items())[:3])
            row["tail"] = (done.stdout[-1500:] + done.stderr[-1500:]) if not results else ""
        return row


def shape(hosts, rate_mbit):
    """tbf at rate_mbit on each host's outer veth (what it receives) and inner host0 (what it sends)."""
    shaped = []
    spec = ["root", "tbf", "rate", "%dmbit" % rate_mbit, "burst", "64kb", "latency", "100ms"]
    for host in hosts:
        outer = ("vf-" + host["name"])[:15]
        subprocess.run(["tc", "qdisc", "replace", "dev", outer] + spec, check=True)
        shaped.append(["tc", "qdisc", "del", "dev", outer, "root"])
        subprocess.run(["ip", "netns", "exec", host["name"], "tc", "qdisc", "replace", "dev", "host0"] + spec,
                       check=True)
        shaped.append(["ip", "netns", "exec", host["name"], "tc", "qdisc", "del", "dev", "host0", "root"])
    return shaped


PROBE_MIB = 64
SSH = ("ssh -i /var/lib/llmops-sglang/model-sync/id_ed25519 -o IdentitiesOnly=yes -o BatchMode=yes "
       "-o StrictHostKeyChecking=yes -o UserKnownHostsFile=/var/lib/llmops-sglang/model-sync/known_hosts "
       "-o GlobalKnownHostsFile=/dev/null")


def probe_link(bench, rounds=5):
    """One peer link without tc or a rate limit, as the module's ssh runs it: (1) `rounds` follows of one byte (a
    connection's cost: ssh's handshake, the login, the forced command's start), (2) one follow of a PROBE_MIB file
    (streaming), with the default cipher and with aes128-gcm; CPU of both ends from their cgroups."""
    first, second = bench.hosts[0], bench.hosts[1]
    path = "%s/probe.bin" % DEST
    size = PROBE_MIB << 20
    bench.run(first["name"], "head -c %d /dev/urandom > %s" % (size, path))
    out = []
    for cipher in (None, "aes128-gcm@openssh.com"):
        ssh = "%s %s -l sglang-sync %s" % (SSH, "-c %s" % cipher if cipher else "", first["address"])
        entry = {"cipher": cipher or "default"}
        shared = ("-o ControlMaster=auto -o ControlPath=/run/bench-probe-%C -o ControlPersist=30")
        for what, count, length in (("connect", rounds, 1), ("shared", rounds, 1), ("stream", 1, size)):
            via = ssh.replace(" -l ", " %s -l " % shared) if what == "shared" else ssh
            # the shared connection is opened before the clock starts, as the module's first request opens it
            warm = "%s 'follow 0 1 30 0 %s' > /dev/null; " % (via, path) if what == "shared" else ""
            command = ("%ss=$(date +%%s.%%N); for i in $(seq %d); do %s 'follow 0 %d 30 0 %s' > /dev/null || exit 1; "
                       "done; e=$(date +%%s.%%N); echo \"$s $e\"" % (warm, count, via, length, path))
            if what == "shared":
                command += "; ssh -o ControlPath=/run/bench-probe-%%C -O exit -l sglang-sync %s 2>/dev/null" % (
                    first["address"])
            before = (cgroup_cpu(first["name"]), cgroup_cpu(second["name"]))
            text = bench.run(second["name"], command).strip().split()
            after = (cgroup_cpu(first["name"]), cgroup_cpu(second["name"]))
            seconds = float(text[1]) - float(text[0])
            cpu = (None if None in before or None in after else (after[0] - before[0], after[1] - before[1]))
            if what in ("connect", "shared"):
                entry[what + "_s"] = round(seconds / count, 3)
                if cpu:
                    entry[what + "_cpu_s"] = round((cpu[0] + cpu[1]) / count, 3)
            else:
                entry["stream_mib_s"] = round(size / seconds / (1 << 20), 1)
                if cpu:
                    gib = size / float(1 << 30)
                    connect = entry.get("connect_cpu_s", 0.0) / 2
                    entry["server_cpu_s_per_gib"] = round(max(0.0, cpu[0] - connect) / gib, 2)
                    entry["client_cpu_s_per_gib"] = round(max(0.0, cpu[1] - connect) / gib, 2)
        out.append(entry)
    bench.run(first["name"], "rm -f %s" % path)
    return out


def measure(bench, sizes, mib, rate_mbit, ways=WAYS, shards=SHARDS):
    """Every size, every way, then the fixed cost at that size; the link probe at the end."""
    rate = rate_mbit * 1000 * 1000 // 8
    hosts = bench.hosts[:max(sizes)]
    result = {"sizes": list(sizes), "ways": list(ways), "mib": mib, "shards": shards, "rate_mbit": rate_mbit,
              "rate_bytes_s": rate, "cores": os.cpu_count(), "tree_fanout": TREE_FANOUT, "runs": []}
    servers = []
    shaped = []
    try:
        model = os.path.join(bench.work, "model")
        os.makedirs(model)
        manifest = {}
        for i in range(1, shards + 1):
            name = "model-%05d-of-%05d.safetensors" % (i, shards)
            manifest[name] = write_shard(os.path.join(model, name), mib * (1 << 20) // shards)
        total = sum(e["size"] for e in manifest.values())
        result["total_bytes"] = total
        result["transfer_s"] = round(transfer_seconds(total, rate), 2)
        uplink = Uplink(rate)
        requests = []
        urls, by_gateway = {}, {}
        for host in hosts:
            gateway = urlsplit(host["mirror"]).hostname
            if gateway not in by_gateway:
                servers.append(mirror_server(model, gateway, uplink, requests))
                by_gateway[gateway] = "http://%s:%d" % (gateway, servers[-1].server_address[1])
            urls[host["name"]] = by_gateway[gateway]
        log("distribution: peer access on %d hosts (the role's tasks)" % len(hosts))
        _peer_access(bench.inventory, bench.work, [h["name"] for h in hosts])
        shaped = shape(hosts, rate_mbit)
        for count in sorted(sizes):
            chosen = hosts[:count]
            for way in ways:
                if count == 1 and way != "mirror":
                    continue  # one host: every way is one mirror read
                bench.clean(chosen)
                uplink.reset()
                del requests[:]
                log("distribution: %s on %d host(s)" % (way, count))
                row = bench.play(chosen, way, manifest, urls)
                row["mirror_gets"] = len(requests)
                row["mirror_bytes"] = sum(r[2] for r in requests)
                row["mirror_repeats"] = len(requests) - len(set(r[0] for r in requests))
                result["runs"].append(row)
                log("  %.1f s (%.2f transfer times), mirror GETs %d, hosts CPU %s s, machine busy %s, ok %s" % (
                    row["wall_s"], row["wall_s"] / result["transfer_s"], row["mirror_gets"], row["hosts_cpu_s"],
                    row["machine_busy"], row["ok"]))
            log("distribution: already present on %d host(s)" % count)
            row = bench.play(chosen, "present", manifest, urls)
            row["mirror_gets"] = len(requests)
            result["runs"].append(row)
        for command in shaped:
            subprocess.run(command, check=False, stderr=subprocess.DEVNULL)
        shaped = []
        if len(hosts) >= 2:
            log("distribution: link probe (no tc, no rate limit)")
            try:
                result["probe"] = probe_link(bench)
            except (subprocess.CalledProcessError, IndexError, ValueError, RuntimeError) as exc:
                result["probe_error"] = str(exc)[-500:]
    finally:
        for command in shaped:
            subprocess.run(command, check=False, stderr=subprocess.DEVNULL)
        parallel(lambda h: bench.run(h["name"], "rm -rf %s; %s" % (os.path.dirname(DEST), SYNC_LEFTOVERS)), hosts)
        for server in servers:
            server.shutdown()
            server.server_close()
    result["summary"] = summarize(result["runs"], result["transfer_s"])
    return result


def run_distribution(sizes=SIZES, mib=MIB, rate_mbit=RATE_MBIT, state_dir=None, prefix=PREFIX):
    """Boots a private fleet of max(sizes) hosts, measures, removes the fleet (also on failure)."""
    from .hosts import BenchFleet  # pylint: disable=import-outside-toplevel
    sizes = sorted(set(sizes))
    state_dir = state_dir or "/tmp/llmops-bench-fleet-%d-dist" % os.getpid()
    fleet = BenchFleet(state_dir, prefix, sizes[-1])
    work = tempfile.mkdtemp(prefix="bench-dist-", dir="/var/tmp")
    try:
        log("distribution: fleet up, %d hosts in %s" % (sizes[-1], state_dir))
        up = fleet.up()
        bench = Bench(fleet.hosts, fleet.client.inventory,
                      lambda name, command: fleet.client.run(name, command, check=True, timeout=600).stdout, work)
        result = measure(bench, sizes, mib, rate_mbit)
        result["fleet_up_s"] = round(up, 1)
        return result
    finally:
        log("distribution: fleet down")
        fleet.down()
        shutil.rmtree(work, ignore_errors=True)


# ---- the page ----

def _fmt(value, digits=1, unit=" s"):
    return "-" if value is None else ("%.*f%s" % (digits, value, unit))


def render_distribution(result):
    lines = []
    add = lines.append
    summary = result["summary"]
    add("## Model distribution: mirror alone, waves, pipelined at %s hosts (issue 28)" % ", ".join(
        str(s) for s in result["sizes"]))
    add("")
    add("`bench/distribution.py`: a private fleet of %d real systemd hosts on this %d-core machine, each host's link "
        "limited to %d Mbit/s with `tc` tbf in both directions (its outer veth: what it receives; its `host0`: what "
        "it sends), the mirror on the controller one uplink of the same rate shared by all its connections. A "
        "checkpoint of %d MiB in %d safetensors shards: **one transfer time is %.1f s** (bytes / rate). All N hosts "
        "run `llmops.sglang.sglang_model_sync` at once (one `ansible-playbook`, forks >= N); the wall time is until "
        "the last host returned, the version whole and verified on every host. *Fixed cost* is the same play with "
        "the version already present on those hosts (Ansible's and the module's start and return, no byte moved); "
        "*net* is the wall time minus it. *Link model* is what the link rates alone predict, in transfer times. "
        "*Hosts CPU* is the sum of the N hosts' cgroup CPU seconds; *busy* is the whole machine's CPU share during "
        "the run (other sessions' load included). The checkpoint is %d MiB, not the issue's few GiB: the mirror "
        "alone on 24 hosts costs 24 transfer times, and with a GiB that is hours on this machine; the ratios, not "
        "the seconds, carry over to a real fleet, where a transfer time is minutes and the fixed cost the same few "
        "seconds." % (
            max(result["sizes"]), result["cores"], result["rate_mbit"], result["mib"], result["shards"],
            result["transfer_s"], result["mib"]))
    add("")
    add("| hosts | way | wall | transfer times | net of fixed cost | link model | x 1 host from the mirror | "
        "mirror GETs (repeats) | hosts CPU | controller CPU | busy | load |")
    add("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in summary["rows"]:
        if not row.get("ok", True):
            add("| %d | %s | FAILED: %s | | | | | | | | | |" % (
                row["hosts"], WAY_LABELS[row["way"]],
                "; ".join("%s: %s" % (h, " ".join(str(m).split())[:160]) for h, m in (row.get("failed") or {}).items())))
            continue
        add("| %d | %s | %s | %.2f | %s | %.0f | %s | %d (%d) | %s | %s | %s | %.1f |" % (
            row["hosts"], WAY_LABELS[row["way"]], _fmt(row["wall_s"]), row["per_transfer"],
            _fmt(row.get("net_per_transfer"), 2, ""), row["expected"], _fmt(row.get("per_single_host"), 2, ""),
            row.get("mirror_gets", 0), row.get("mirror_repeats", 0), _fmt(row.get("hosts_cpu_s")),
            _fmt(row.get("controller_cpu_s")), _fmt(row.get("machine_busy"), 2, ""), row.get("loadavg_1m", 0.0)))
    fixed = summary.get("fixed") or []
    if fixed:
        add("")
        add("Fixed cost (the version present): %s." % ", ".join("%d hosts %.1f s" % (hosts, wall) for hosts, wall in fixed))
    fits = summary.get("fits") or {}
    if any(fits.values()):
        add("")
        add("Least-squares slope of the wall time over the hosts (seconds each extra host adds): %s." % "; ".join(
            "%s %.2f s (%.2f transfer times)" % (WAY_LABELS[way], fit["slope"], fit["slope_per_transfer"])
            for way, fit in ((w, fits.get(w)) for w in WAYS) if fit))
    if result.get("probe"):
        add("")
        add("One peer link without `tc` or a rate limit, as the module's ssh runs it (a host reads from another with "
            "the sync account's `follow`): a request on a connection of its own (handshake, login, the peer's PAM "
            "session, the forced command's start; 5 follows of one byte), the same on one shared connection "
            "(ControlMaster, as the module does since issue 28's bench) and a %d MiB stream: %s. Twenty-four links at %d "
            "Mbit/s move %.0f MiB/s in all; at these "
            "streaming costs that needs about %.2f cores for ssh and the forced command." % (
                PROBE_MIB,
                "; ".join("%s cipher: a request on its own connection %s s wall, %s CPU s (both ends), on a shared "
                          "one %s s, %s CPU s; streaming %s MiB/s, %s CPU s per GiB on the serving host, %s on the "
                          "receiving host" % (
                              p["cipher"], _fmt(p.get("connect_s"), 2, ""), _fmt(p.get("connect_cpu_s"), 2, ""),
                              _fmt(p.get("shared_s"), 2, ""), _fmt(p.get("shared_cpu_s"), 2, ""),
                              _fmt(p.get("stream_mib_s"), 1, ""), _fmt(p.get("server_cpu_s_per_gib"), 2, ""),
                              _fmt(p.get("client_cpu_s_per_gib"), 2, "")) for p in result["probe"]),
                result["rate_mbit"], 24 * result["rate_bytes_s"] / float(1 << 20),
                cores_needed(result)))
    add("")
    return lines


def cores_needed(result, hosts=TARGET_HOSTS):
    """Cores the peer links' ssh + forced command would take with `hosts` links busy at the rate (default cipher)."""
    probe = (result.get("probe") or [{}])[0]
    per_gib = (probe.get("server_cpu_s_per_gib") or 0.0) + (probe.get("client_cpu_s_per_gib") or 0.0)
    return hosts * result["rate_bytes_s"] / float(1 << 30) * per_gib


def distribution_notes(result):
    summary = (result or {}).get("summary")
    if not summary:
        return [target_note(None)]
    notes = [target_note(summary)]
    changes = default_note(summary)
    if changes is not None:
        notes.append("Default `distribution: pipelined` (a chain; issue 28 chose it because it was faster than waves at "
                     "every size): pipelined was %s in this run." % (
                         "faster at every size" if changes else "**not** faster at every size"))
    repeats = [r for r in summary["rows"] if r["way"] != "mirror" and r.get("mirror_repeats")]
    notes.append("Mirror read once per file by waves and pipelined: %s." % (
        "met" if not repeats else "**missed** (%s)" % ", ".join(
            "%s on %d hosts: %d repeats" % (WAY_LABELS[r["way"]], r["hosts"], r["mirror_repeats"]) for r in repeats)))
    return notes


# ---- standalone ----

def build_parser():
    """The script's options (also read by tests/conformance/test_argv.py, which must not take them for SGLang flags)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--state-dir', required=True)
    parser.add_argument('--prefix', required=True)
    parser.add_argument('--hosts', default='1,4', help='fleet sizes, comma-separated (each at most the fleet)')
    parser.add_argument('--mib', type=int, default=MIB, help='checkpoint size in MiB (%d shards)' % SHARDS)
    parser.add_argument('--rate-mbit', type=int, default=RATE_MBIT, help='each link (and the mirror uplink), Mbit/s')
    parser.add_argument('--ways', default=','.join(WAYS))
    parser.add_argument('--json', help='write the results here too')
    return parser


def main(argv=None):
    from fleet.client import Fleet, FleetTool  # pylint: disable=import-error,import-outside-toplevel
    args = build_parser().parse_args(argv)
    sizes = sorted(int(n) for n in args.hosts.split(','))
    tool = FleetTool(state_dir=args.state_dir, prefix=args.prefix, first_index='auto')
    fleet = Fleet(tool, tool.status())
    hosts = [{"name": h.name, "address": h.address, "mirror": h.mirror_url} for h in fleet.hosts[:max(sizes)]]
    if len(hosts) < max(sizes):
        raise SystemExit('distribution bench: the fleet has %d hosts, not %d' % (len(hosts), max(sizes)))
    work = tempfile.mkdtemp(prefix='bench-dist-', dir='/var/tmp')
    try:
        bench = Bench(hosts, fleet.inventory, lambda name, command: fleet.run(name, command, check=True).stdout, work)
        result = measure(bench, sizes, args.mib, args.rate_mbit, ways=args.ways.split(','))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=1, sort_keys=True)
    print("\n".join(render_distribution(result) + distribution_notes(result)))
    if args.json:
        with open(args.json, 'w') as handle:
            handle.write(text + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
