#!/usr/bin/env bash
# wirebench ping vs sockperf ping-pong and a minimal C ping-pong (the floor,
# bench/latency-floor/floor.c) on loopback, 32-byte messages, equal counts: UDP busy-poll,
# UDP blocking, TCP busy-poll (the floor is UDP only); interleaved repetitions; prints p50,
# p99, p99.9 of each (median over the repetitions) and the ratios wirebench / sockperf and
# wirebench / floor. Every tool runs with its default flags on both ends (wirebench: kernel
# timestamps and the stall meter as a user gets them).
#
# Run it alone: busy-polling on both ends takes both cores of a 2-vCPU machine, so anything
# else running shows up in the tail. Not part of CI.
#
#   bench/latency.sh [REPS] [SECONDS]      defaults: 3 repetitions, 5 s per run
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
SECS=${2:-5}
OUT=bench/out/latency-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"

if ! command -v sockperf >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sockperf
fi
cargo build --release -q
WB=${CARGO_TARGET_DIR:-target}/release/wirebench
FLOOR=$OUT/floor
gcc -O2 -o "$FLOOR" bench/latency-floor/floor.c -lm
PORT_S=11311
PORT_W=17311
PORT_F=17312

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

start_server() { # tool mode
  local tool=$1 mode=$2 args=()
  if [ "$tool" = sockperf ]; then
    [[ $mode == *spin* ]] && args+=(--nonblocked)
    [[ $mode == tcp* ]] && args+=(--tcp)
    sockperf sr -i 127.0.0.1 -p $PORT_S "${args[@]}" >"$OUT/server.log" 2>&1 &
  elif [ "$tool" = floor ]; then
    [[ $mode == *spin* ]] && args+=(--spin)
    "$FLOOR" server 127.0.0.1:$PORT_F "${args[@]}" >"$OUT/server.log" 2>&1 &
  else
    [[ $mode == *spin* ]] && args+=(--spin)
    $WB serve --listen 127.0.0.1:$PORT_W "${args[@]}" >"$OUT/server.log" 2>&1 &
  fi
  pids+=($!)
  # wait until it listens (no fixed sleep): a UDP or TCP probe of the port
  for _ in $(seq 1 100); do
    if [ "$tool" = sockperf ]; then grep -q "to block on socket\|busy\|poll" "$OUT/server.log" 2>/dev/null && break
    else grep -q listening "$OUT/server.log" 2>/dev/null && break; fi  # wirebench and the floor
    sleep 0.05
  done
}

stop_server() { kill "${pids[-1]}" 2>/dev/null || true; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'; }

run_sockperf() { # mode rep -> prints "count p50 p99 p999"
  local mode=$1 rep=$2
  local args=(-m 32 -t "$SECS" --full-rtt)
  [[ $mode == *spin* ]] && args+=(--nonblocked)
  [[ $mode == tcp* ]] && args+=(--tcp)
  start_server sockperf "$mode"
  sockperf pp -i 127.0.0.1 -p $PORT_S "${args[@]}" >"$OUT/sockperf-$mode-$rep.txt" 2>&1
  stop_server
  python3 - "$OUT/sockperf-$mode-$rep.txt" <<'PY'
import re, sys
t = re.sub(r"\x1b\[[0-9;]*m", "", open(sys.argv[1]).read())
n = int(re.search(r"Total (\d+) observations", t).group(1))
p = {k: float(v) for k, v in re.findall(r"percentile (\d+\.\d+) =\s+([\d.]+)", t)}
print(n, p["50.000"], p["99.000"], p["99.900"])
PY
}

run_floor() { # mode rep count -> prints "count p50 p99 p999"
  local mode=$1 rep=$2 count=$3 args=()
  [[ $mode == *spin* ]] && args+=(--spin)
  start_server floor "$mode"
  "$FLOOR" client 127.0.0.1:$PORT_F "$count" 2000 "${args[@]}" | tee "$OUT/floor-$mode-$rep.txt"
  stop_server
}

run_wirebench() { # mode rep count -> prints "count p50 p99 p999"
  local mode=$1 rep=$2 count=$3
  local args=(--size 32 --count "$count" --warmup 2000 --percentiles 50,99,99.9)
  [[ $mode == *spin* ]] && args+=(--spin)
  [[ $mode == tcp* ]] && args+=(--proto tcp)
  start_server wirebench "$mode"
  $WB ping 127.0.0.1:$PORT_W "${args[@]}" --json "$OUT/wirebench-$mode-$rep.json" >"$OUT/wirebench-$mode-$rep.txt"
  stop_server
  python3 - "$OUT/wirebench-$mode-$rep.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]["responders"][0]["latency"]["summary"]
p = {q["p"]: q["ns"] / 1000 for q in r["percentiles"]}
print(r["count"], p[50.0], p[99.0], p[99.9])
PY
}

: >"$OUT/results.tsv"
declare -A counts # per mode: sockperf's observation count in the first repetition
for rep in $(seq 1 "$REPS"); do
  for mode in udp-spin udp-block tcp-spin; do
    # alternate which tool goes first, so drift on a shared machine cancels out
    if (( rep % 2 )); then order="sockperf wirebench floor"; else order="floor wirebench sockperf"; fi
    [[ $mode == udp* ]] || order=${order/floor/}
    if [ -z "${counts[$mode]:-}" ]; then order="sockperf ${order/sockperf/}"; fi
    for tool in $order; do
      # Equal counts: sockperf runs by time, so the others take the count sockperf made in
      # the first repetition (which runs sockperf first).
      case $tool in
        sockperf)
          r=$(run_sockperf "$mode" "$rep")
          [ -n "${counts[$mode]:-}" ] || counts[$mode]=${r%% *}
          ;;
        floor) r=$(run_floor "$mode" "$rep" "${counts[$mode]}") ;;
        *) r=$(run_wirebench "$mode" "$rep" "${counts[$mode]}") ;;
      esac
      echo -e "$rep\t$mode\t$tool\t$r" | tr ' ' '\t' | tee -a "$OUT/results.tsv"
    done
  done
done

python3 - "$OUT/results.tsv" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
med = {}
tools = ("floor", "sockperf", "wirebench")
for mode in ("udp-spin", "udp-block", "tcp-spin"):
    for tool in tools:
        rs = [r for r in rows if r[1] == mode and r[2] == tool]
        if rs:
            med[mode, tool] = [statistics.median(float(r[i]) for r in rs) for i in (3, 4, 5, 6)]
print()
print(f"{'mode':<10} {'tool':<10} {'count':>9} {'p50 us':>8} {'p99 us':>8} {'p99.9 us':>9}")
for mode in ("udp-spin", "udp-block", "tcp-spin"):
    for tool in tools:
        if (mode, tool) in med:
            n, a, b, c = med[mode, tool]
            print(f"{mode:<10} {tool:<10} {n:>9.0f} {a:>8.2f} {b:>8.2f} {c:>9.2f}")
    w = med[mode, "wirebench"]
    runs = len([r for r in rows if r[1] == mode and r[2] == "wirebench"])
    for anchor in ("floor", "sockperf"):
        if (mode, anchor) in med:
            s = med[mode, anchor]
            print(f"{mode:<10} {'/' + anchor:<10} {'':>9} {w[1]/s[1]:>8.3f} {w[2]/s[2]:>8.3f} {w[3]/s[3]:>9.3f}   (wirebench / {anchor}, medians of {runs} runs)")
PY
echo "raw results: $OUT"
