#!/usr/bin/env bash
# A mesh agent probing a serve (the good peer) while another peer floods its TCP probe
# connection with valid-looking probe frames without end (bench/mesh_flood_peer.py): the
# agent's CPU and peak RSS, how often the flood was cut (wirebench_mesh_tcp_not_probes_total),
# and the good peer's cells (received/sent) in each 1 s window. With WIREBENCH_BEFORE set, the
# same for that build in the same run.
#
#   bench/mesh-flood.sh [SECONDS]      (WIREBENCH_BIN, WIREBENCH_BEFORE: the builds to run)
. "$(dirname "$0")/lib.sh"
bench_out mesh-flood
wirebench_bin
SECS=${1:-8}

run() { # BIN LABEL
  local bin=$1 label=$2 base=$((20000 + RANDOM % 20000))
  printf '127.0.0.1:%d name=good\n127.0.0.1:%d name=flood\n' "$base" $((base + 1)) >"$OUT/peers"
  start_bg "$bin" serve --listen 127.0.0.1:$base
  local serve=$!
  python3 bench/mesh_flood_peer.py $((base + 1)) $((SECS + 4)) >"$OUT/flood-$label.out" &
  local flood=$!
  start_bg "$bin" mesh agent --listen 127.0.0.1:$((base + 2)) --http 127.0.0.1:$((base + 3)) \
    --peers "file:$OUT/peers" --window 1s --timeout 400ms --rate 20/s
  local agent=$! http=127.0.0.1:$((base + 3))
  wait_port tcp $((base + 3))
  sleep 2 # the first windows close (the agent's own pace, not a synchronisation)
  local c0 t0 rss=0 r windows=""
  c0=$(cpu_ticks $agent)
  t0=$(date +%s.%N)
  for _ in $(seq "$SECS"); do
    sleep 1
    r=$(awk '/VmRSS/{print $2}' /proc/$agent/status)
    [ "$r" -gt "$rss" ] && rss=$r
    windows+=$(curl -s "http://$http/v1/matrix" | python3 -c "
import json, sys
m = json.load(sys.stdin)
g = [c for c in m['cells'] if c['peer']['addr'].endswith(':$base')]
print(' '.join(f\"{c['proto']} {c['received']}/{c['sent']}\" for c in g) or 'no cell', end='; ')")
  done
  local c1 t1 cut
  c1=$(cpu_ticks $agent)
  t1=$(date +%s.%N)
  cut=$(curl -s "http://$http/metrics" | awk '/^wirebench_mesh_tcp_not_probes_total/{print $2}')
  kill -TERM $agent $serve
  wait $agent $serve 2>/dev/null || true
  wait $flood
  echo "$label: agent CPU $(python3 -c "print(f'{100 * ($c1 - $c0) / $HZ / ($t1 - $t0):.1f}')") % of a core, peak RSS $rss KiB, flood cut ${cut:-(no counter)} times; $(cat "$OUT/flood-$label.out")" | tee -a "$OUT/summary.txt"
  echo "$label: good peer per window: $windows" | tee -a "$OUT/summary.txt"
}

run "$WB" after
[ -n "$BEFORE" ] && run "$BEFORE" before
echo "results: $OUT"
