# The preamble the bench scripts share. Source it first thing, from the script's own folder:
#
#   . "$(dirname "$0")/lib.sh"
#
# It turns on bash's strict mode, moves to the repository root, stops every background
# process it was given (and runs the exit steps) when the script exits, and defines:
#
#   bench_out NAME         OUT=bench/out/NAME-<UTC time>, created
#   wirebench_bin          WB: $WIREBENCH_BIN, or this tree's release build (built here);
#                          BEFORE: $WIREBENCH_BEFORE, or empty; both made absolute
#   need PKG...            installs (apt) each Debian package whose command of the same name
#                          is missing (iperf3, iperf, sockperf)
#   start_bg CMD...        starts CMD in the background, its output appended to
#                          $OUT/servers.log, its pid kept in pids (scripts may add their own)
#   stop_bg                stops the last one started and waits for it
#   at_exit 'COMMAND'      on exit, after every pid in pids got SIGTERM and was waited for,
#                          runs COMMAND (e.g. removing the script's network namespaces)
#   wait_port tcp|udp PORT until something listens on PORT (bounded; no fixed sleep)
#   cpu_ticks PID          the process's utime + stime from /proc/PID/stat, in ticks of 1/HZ s
#   ctxt PID               its threads' context switches (voluntary + involuntary) so far
#   HZ                     the clock ticks per second (getconf CLK_TCK)

set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bench_out() {
  OUT=bench/out/$1-$(date -u +%Y%m%dT%H%M%SZ)
  mkdir -p "$OUT"
}

wirebench_bin() {
  WB=${WIREBENCH_BIN:-}
  if [ -z "$WB" ]; then
    cargo build --release -q -p wirebench
    WB=target/release/wirebench
  fi
  WB=$(realpath "$WB")
  BEFORE=${WIREBENCH_BEFORE:+$(realpath "$WIREBENCH_BEFORE")}
}

need() {
  local p missing=()
  for p in "$@"; do command -v "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  fi
}

pids=()
exit_steps=()
at_exit() { exit_steps+=("$1"); }
cleanup() {
  local p s
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for s in "${exit_steps[@]}"; do eval "$s" || true; done
}
trap cleanup EXIT

start_bg() { "$@" >>"$OUT/servers.log" 2>&1 & pids+=($!); }
stop_bg() { kill "${pids[-1]}" 2>/dev/null || true; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'; }

wait_port() {
  for _ in $(seq 1 200); do
    if [ "$1" = tcp ]; then ss -Htln "sport = :$2" | grep -q . && return; else ss -Huln "sport = :$2" | grep -q . && return; fi
    sleep 0.02
  done
}

HZ=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
ctxt() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s + 0}'; }
