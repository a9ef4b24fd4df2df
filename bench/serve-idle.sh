#!/usr/bin/env bash
# What idle probe connections cost `wirebench serve`: one serve answers a mesh
# agent that probes N peers over TCP only (N addresses 127.1.x.y on loopback, all this one
# serve, a full mesh of N (`--full-mesh-max`) at the default budget: each connection carries
# a probe every N / 100 s or so, so it is idle nearly all the time). Once every connection is open (serve has N `serve-tcp-conn`
# threads), serve's context switches (every thread's voluntary + involuntary, from
# /proc/PID/task/*/status) and CPU (utime + stime from /proc/PID/stat) are counted over
# SECONDS. With WIREBENCH_BEFORE=path the same row runs first with that binary's serve (the
# agent is always this binary), so the ratio is taken in one run, under the same load.
#
# Root not needed. Run alone: flock /tmp/bench.lock bench/serve-idle.sh [SECONDS] [PEERS]
# (defaults 20 s, 1000 peers); WIREBENCH_BIN=path uses that binary instead of a release build.
. "$(dirname "$0")/lib.sh"
SECS=${1:-20}
N=${2:-1000}
bench_out serve-idle
wirebench_bin
ulimit -n 8192

conns() { grep -lx serve-tcp-conn /proc/"$1"/task/*/comm 2>/dev/null | wc -l; }
: >"$OUT/peers.txt"
for i in $(seq 0 $((N - 1))); do echo "127.1.$((i / 250)).$((i % 250 + 1)):17980" >>"$OUT/peers.txt"; done

echo "| serve binary | idle TCP connections | serve context switches/s | serve CPU (% of a core) | agent probes sent/s (closed windows) |" | tee "$OUT/idle.md"
echo "|---|---|---|---|---|" | tee -a "$OUT/idle.md"
row() { # LABEL BINARY
  local label=$1 bin=$2
  $bin serve --listen 0.0.0.0:17980 >"$OUT/serve-$label.log" 2>&1 &
  local serve=$!; pids+=("$serve")
  "$WB" mesh agent --listen 127.0.0.1:17981 --http 127.0.0.1:17982 --peers "file:$OUT/peers.txt" --proto tcp \
    --full-mesh-max $((N + 1)) --window 10s --no-hiccup --name bench >"$OUT/agent-$label.log" 2>&1 &
  local agent=$!; pids+=("$agent")
  # Every peer's connection open (the first probes go out within one interval), bounded.
  for _ in $(seq 600); do [ "$(conns "$serve")" -ge "$N" ] && break; sleep 0.1; done
  local open; open=$(conns "$serve")
  local c0 s0 t0 p0 c1 s1 t1 p1
  p0=$(curl -s http://127.0.0.1:17982/metrics | awk '/^wirebench_mesh_peer_probes_sent_total/ {s += $2} END {print s + 0}')
  c0=$(ctxt "$serve"); s0=$(cpu_ticks "$serve"); t0=$(date +%s.%N)
  sleep "$SECS"
  c1=$(ctxt "$serve"); s1=$(cpu_ticks "$serve"); t1=$(date +%s.%N)
  p1=$(curl -s http://127.0.0.1:17982/metrics | awk '/^wirebench_mesh_peer_probes_sent_total/ {s += $2} END {print s + 0}')
  kill -TERM "$agent" "$serve"; wait "$agent" "$serve" || true
  python3 - "$label" "$open" "$c0" "$c1" "$s0" "$s1" "$t0" "$t1" "$HZ" "$p0" "$p1" <<'EOF' | tee -a "$OUT/idle.md"
import sys
label, n, c0, c1, s0, s1, t0, t1, hz, p0, p1 = sys.argv[1:]
dt = float(t1) - float(t0)
print(f"| {label} | {n} | {(float(c1) - float(c0)) / dt:.0f} | {100.0 * (float(s1) - float(s0)) / float(hz) / dt:.2f} | "
      f"{(float(p1) - float(p0)) / dt:.1f} |")
EOF
}
[ -n "$BEFORE" ] && row before "$BEFORE"
row "$([ -n "$BEFORE" ] && echo after || echo this)" "$WB"
echo "results in $OUT"
