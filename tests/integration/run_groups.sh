#!/usr/bin/env bash
# The integration tests in groups run side by side, each on a fleet of its own (make integration; CI).
#
# Most of a fleet test's time is a stand-in loading at its pace, so the groups side by side on a 2-core machine take little
# more than the longest one. Group "default" keeps the shared fleet (inventories/local/hosts.yml, hosts gpu-*),
# which test_rollout and test_progress address through inventories/local; the other groups boot their own
# (LLMOPS_FLEET_STATE_DIR / LLMOPS_FLEET_PREFIX, tests/integration/conftest.py) and share nothing with it.
#
#   run_groups.sh [PYTEST ARGS...]   run every group, print each group's log, fail if any group failed
#   run_groups.sh down               remove the groups' private fleets (after a killed run; .ci/run calls it)
set -uo pipefail
cd "$(dirname "$0")/../.."

PYTHON=${PYTHON:-.venv/bin/python}
LOGS=.build/integration
# name, state dir ("" = the shared fleet), host prefix, test files. Balanced by measured wall time (a CI run under load:
# default 60 min with test_wait_ready, faults 45, hosts 34, router 25, plan 19, sync 13; measured alone on a loaded
# machine for issue 22: test_router 23 min, test_security about 8, test_sync 5-10): test_wait_ready (its own wr-*
# units, ports 31000-31999, hosts 2 and 3) shares the sync group's fleet (sy-k26, port 30021) without touching it.
# Issue 23 added test_day2 (six hosts, 14 min alone) as a group of its own rather than after test_router (17 min
# alone), and test_monitoring_host (2 min) and test_alerts (5 min) to the hosts group. Issue 27 added test_runner
# (ansible-runner; about 4 min alone on a loaded machine) to the faults group. Issue 25 added test_failure_families
# (4 min) to the sync group and test_router_claims (4-5 min, the router test's fixtures, a fleet of its own) to plan.
# Issue 26 added test_canary (two hosts, a rollout per bad canary) as a group of its own.
# test_multinode (two hosts; three tests, about 7 min alone) moved from default (45 min in a loaded local run) to day2
# (31 min there, 27 in CI) when it gained the group's canary rollback.
GROUPS_TABLE=(
  "default||gpu|tests/integration/test_fleet.py tests/integration/test_rollout.py tests/integration/test_progress.py tests/integration/test_server_role.py"
  "faults|/var/lib/llmops-sglang-fleet-faults|fb|tests/integration/test_faults.py tests/integration/test_bad_inputs.py tests/integration/test_runner.py"
  "hosts|/var/lib/llmops-sglang-fleet-hosts|fc|tests/integration/test_preflight.py tests/integration/test_observability.py tests/integration/test_become.py tests/integration/test_monitoring_host.py tests/integration/test_alerts.py"
  "plan|/var/lib/llmops-sglang-fleet-plan|fp|tests/integration/test_plan.py tests/integration/test_security.py tests/integration/test_router_claims.py"
  "sync|/var/lib/llmops-sglang-fleet-sync|fs|tests/integration/test_sync.py tests/integration/test_wait_ready.py tests/integration/test_sandbox.py tests/integration/test_failure_families.py"
  "router|/var/lib/llmops-sglang-fleet-router|fr|tests/integration/test_router.py tests/integration/test_canary_router.py"
  "day2|/var/lib/llmops-sglang-fleet-day2|fd|tests/integration/test_day2.py tests/integration/test_sync_pipeline.py tests/integration/test_multinode.py"
  "canary|/var/lib/llmops-sglang-fleet-canary|fk|tests/integration/test_canary.py"
)

down_private() {
  local row name state prefix files
  for row in "${GROUPS_TABLE[@]}"; do
    IFS='|' read -r name state prefix files <<<"$row"
    [ -z "$state" ] || python3 tests/fleet/fleet.py down --state-dir "$state" >/dev/null 2>&1 || true
  done
}

if [ "${1:-}" = down ]; then
  down_private
  exit 0
fi

# Every test file belongs to exactly one group: a new file that is in none would silently never run.
listed=" $(for row in "${GROUPS_TABLE[@]}"; do IFS='|' read -r _n _s _p files <<<"$row"; echo -n "$files "; done)"
for file in tests/integration/test_*.py; do
  case "$listed" in
    *" $file "*) ;;
    *) echo "run_groups.sh: $file is in no group of GROUPS_TABLE" >&2; exit 2 ;;
  esac
done

# Where CI's time goes: each group runs in a cpuacct cgroup of its own (cgroup v1, as this machine kind mounts it), which
# also holds its fleet's hosts (systemd-nspawn leaves the cpuacct hierarchy alone), so a group's CPU seconds count its
# pytest, its ansible-playbook runs, its hosts and their stand-ins. Printed with each group's wall time at the end.
CPUACCT=/sys/fs/cgroup/cpuacct
account_join() {  # account_join NAME: move this shell (and so what it starts) into the group's cgroup
  [ -w "$CPUACCT/cgroup.procs" ] || return 0
  rmdir "$CPUACCT/llmops-it-$1" 2>/dev/null
  mkdir -p "$CPUACCT/llmops-it-$1" && echo "$BASHPID" >"$CPUACCT/llmops-it-$1/cgroup.procs" || true
}
account_report() {  # one line per group: wall minutes, CPU minutes (all its processes and hosts), CPU/wall
  local name
  echo
  echo "==== integration groups: wall and CPU (cpuacct), this machine has $(nproc) cores ===="
  printf '%-8s %9s %9s %9s\n' group wall_min cpu_min cpu/wall
  for name in "${names[@]}"; do
    local usage=0
    [ -r "$CPUACCT/llmops-it-$name/cpuacct.usage" ] && usage=$(cat "$CPUACCT/llmops-it-$name/cpuacct.usage")
    awk -v n="$name" -v w="${walls[$name]:-0}" -v u="$usage" \
      'BEGIN { c = u / 1e9; printf "%-8s %9.1f %9.1f %9.2f\n", n, w / 60, c / 60, (w > 0 ? c / w : 0) }'
    rmdir "$CPUACCT/llmops-it-$name" 2>/dev/null || true
  done
  [ ! -r /proc/pressure/cpu ] || echo "CPU pressure (some: share of time a runnable task waited for a core): $(head -1 /proc/pressure/cpu)"
}

mkdir -p "$LOGS"
started=$(date +%s)
pids=()
names=()
trap 'kill "${pids[@]}" 2>/dev/null; wait; down_private' INT TERM
for row in "${GROUPS_TABLE[@]}"; do
  IFS='|' read -r name state prefix files <<<"$row"
  # shellcheck disable=SC2086  # files is a word list
  (
    account_join "$name"
    if [ -n "$state" ]; then export LLMOPS_FLEET_STATE_DIR="$state" LLMOPS_FLEET_PREFIX="$prefix"; fi
    # A group that hangs is stopped (SIGTERM: its fixtures still remove its fleet) so that its log gets printed; 75 min,
    # inside CI's 90, as the groups share 2 cores with make static.
    # Its own --basetemp: pytest prunes all but the newest three /tmp/pytest-of-USER/pytest-N dirs, so pytest runs
    # started beside it (the other groups, make static's unit tests) would delete this one's tmp_path dirs mid-run.
    rm -rf "$LOGS/tmp-$name"
    LLMOPS_REQUIRE_FLEET=1 exec timeout -k 60 "${GROUP_TIMEOUT:-4500}" "$PYTHON" -m pytest -q -p no:cacheprovider --durations=12 \
      --basetemp "$LOGS/tmp-$name" $files "$@"
  ) >"$LOGS/$name.log" 2>&1 &
  pids+=($!)
  names+=("$name")
  echo "integration group $name: pid $!, log $LOGS/$name.log"
done

status=0
declare -A walls=()
for i in "${!pids[@]}"; do
  rc=0
  wait "${pids[$i]}" || rc=$?
  # a group's log is written until its pytest ends: its last change is the group's end
  walls[${names[$i]}]=$(( $(stat -c %Y "$LOGS/${names[$i]}.log") - started ))
  echo
  echo "==== integration group ${names[$i]} (exit $rc) ===="
  cat "$LOGS/${names[$i]}.log"
  [ "$rc" -eq 0 ] || status=1
done
down_private
account_report
exit "$status"
