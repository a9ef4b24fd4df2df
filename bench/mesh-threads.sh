#!/usr/bin/env bash
# Where a mesh agent's wake-ups and system calls come from, thread by thread: one
# agent probing PEERS addresses 127.1.x.y on loopback (all answered by one `wirebench serve`)
# with the default budget, as bench/mesh.sh's cost rows. After one window (the plan and the
# connections in place), every thread's context switches (voluntary + involuntary, from
# /proc/PID/task/*/status) are counted over SECONDS, then `strace -f -c` attaches for another
# SECONDS and counts the system calls. With WIREBENCH_BEFORE=path the same runs first with that
# binary, so the two are compared under the same minutes' load. Extra arguments go to the agent
# (e.g. --no-hiccup).
#
# strace attaches to a running process: root (or kernel.yama.ptrace_scope 0). Run alone: flock /tmp/bench.lock bench/mesh-threads.sh [SECONDS] [PEERS] [AGENT FLAGS...]
# (defaults 10 s, 1000 peers); WIREBENCH_BIN=path uses that binary instead of a release build.
. "$(dirname "$0")/lib.sh"
SECS=${1:-10}
N=${2:-1000}
shift $(($# < 2 ? $# : 2))
bench_out mesh-threads
wirebench_bin
command -v strace >/dev/null || need strace

: >"$OUT/peers.txt"
for i in $(seq 0 $((N - 1))); do echo "127.1.$((i / 250)).$((i % 250 + 1)):17990" >>"$OUT/peers.txt"; done
start_bg "$WB" serve --listen 0.0.0.0:17990
wait_port udp 17990

# name -> switches, one line per thread name (threads of one name summed: serve-tcp-conn)
per_thread() {
  for t in /proc/"$1"/task/*; do
    printf '%s %s\n' "$(cat "$t/comm" 2>/dev/null)" \
      "$(awk '/ctxt_switches/ {s += $2} END {print s + 0}' "$t/status" 2>/dev/null)"
  done | awk '{s[$1] += $2} END {for (k in s) print k, s[k]}' | sort
}

row() { # LABEL BINARY
  local label=$1 bin=$2; shift 2
  "$bin" mesh agent --listen 127.0.0.1:17991 --http 127.0.0.1:17992 --peers "file:$OUT/peers.txt" \
    --window 10s --name bench "$@" >"$OUT/agent-$label.log" 2>&1 &
  local agent=$!; pids+=("$agent")
  for _ in $(seq 300); do curl -sf http://127.0.0.1:17992/readyz >/dev/null 2>&1 && break; sleep 0.1; done
  sleep 12   # one window closed: the plan and the connections are in place
  local t0 t1 a0 a1
  per_thread "$agent" >"$OUT/threads0-$label.txt"; a0=$(cpu_ticks "$agent"); t0=$(date +%s.%N)
  sleep "$SECS"
  per_thread "$agent" >"$OUT/threads1-$label.txt"; a1=$(cpu_ticks "$agent"); t1=$(date +%s.%N)
  timeout -s INT "$SECS" strace -f -c -p "$agent" -o "$OUT/strace-$label.txt" >/dev/null 2>&1 || true
  kill -TERM "$agent"; wait "$agent" || true
  echo "### $label ($bin $*): context switches per second by thread over ${SECS} s, agent CPU" \
    "$(python3 -c "print(f'{100.0 * ($a1 - $a0) / $HZ / ($t1 - $t0):.2f}')") % of a core"
  join "$OUT/threads0-$label.txt" "$OUT/threads1-$label.txt" |
    awk -v dt="$(python3 -c "print($t1 - $t0)")" '{printf "| %s | %.1f |\n", $1, ($3 - $2) / dt}'
  echo "system calls over ${SECS} s (strace -f -c, its own overhead included):"
  awk 'NR > 2 && $0 !~ /^-/ {print "    " $0}' "$OUT/strace-$label.txt" | head -12
}
{
  [ -n "$BEFORE" ] && row before "$BEFORE" "$@"
  row "$([ -n "$BEFORE" ] && echo after || echo this)" "$WB" "$@"
} | tee "$OUT/threads.md"
echo "results in $OUT"
