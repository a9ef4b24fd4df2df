#!/usr/bin/env bash
# Kernel timestamps on the probe path, on loopback, 64-byte probes, busy-poll and blocking:
# wirebench ping with kernel timestamps, the same with --no-timestamps (their own cost), and
# sockperf ping-pong on the same path (an independent round trip); interleaved repetitions.
# Prints RTT p50 of each, wirebench's stack-to-stack p50 and the hosts' share, and the
# ratios. What to expect: the RTTs agree with sockperf's; stack to stack hardly moves
# between busy-poll and blocking (the kernels' share does not depend on how the
# application waits) while the hosts' share carries the difference.
#
# Run it alone (timing-sensitive). Not part of CI.
#
#   bench/timestamps.sh [REPS] [SECONDS]      defaults: 3 repetitions, 3 s per run
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
SECS=${2:-3}
OUT=bench/out/timestamps-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
command -v sockperf >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sockperf; }
cargo build --release -q
WB=target/release/wirebench
PORT_S=11411
PORT_W=17412

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

wait_for() { for _ in $(seq 1 100); do grep -q "$2" "$1" 2>/dev/null && return; sleep 0.05; done; }

: >"$OUT/results.tsv"
# One server at a time: a busy-polling server left running would take a core from the other.
for mode in spin block; do
  spin=()
  nb=()
  [ "$mode" = spin ] && spin=(--spin) && nb=(--nonblocked)
  for rep in $(seq 1 "$REPS"); do
    for tool in stamps nostamps sockperf; do
      f="$OUT/$tool-$mode-$rep"
      if [ "$tool" = sockperf ]; then
        sockperf sr -i 127.0.0.1 -p $PORT_S "${nb[@]}" >"$f.server.log" 2>&1 &
        pids+=($!)
        wait_for "$f.server.log" "to block on socket\|busy\|poll"
        sockperf pp -i 127.0.0.1 -p $PORT_S -m 64 -t "$SECS" --full-rtt "${nb[@]}" >"$f.txt" 2>&1
        cleanup
        pids=()
        python3 - "$f.txt" <<'PY' >>"$OUT/results.tsv"
import re, sys
t = re.sub(r"\x1b\[[0-9;]*m", "", open(sys.argv[1]).read())
p = dict(re.findall(r"percentile (\d+\.\d+) =\s+([\d.]+)", t))
print(f"{sys.argv[1].split('/')[-1].rsplit('-', 1)[0]}\t{p['50.000']}\t\t")
PY
      else
        extra=()
        [ "$tool" = nostamps ] && extra+=(--no-timestamps)
        $WB serve --listen 127.0.0.1:$PORT_W "${spin[@]}" >"$f.server.log" 2>&1 &
        pids+=($!)
        wait_for "$f.server.log" listening
        $WB ping 127.0.0.1:$PORT_W --size 64 --duration "${SECS}s" --warmup 1000 --no-hiccup "${spin[@]}" "${extra[@]}" \
          --json "$f.json" >"$f.txt"
        cleanup
        pids=()
        python3 - "$f.json" <<'PY' >>"$OUT/results.tsv"
import json, sys
r = json.load(open(sys.argv[1]))["results"]["responders"][0]
p50 = lambda v: next(q["ns"] for q in v["summary"]["percentiles"] if q["p"] == 50.0) / 1000
k = r.get("kernel") or {}
stack = p50(k["stack"]) if k.get("stack") else ""
hosts = p50(k["hosts"]) if k.get("hosts") else ""
print(f"{sys.argv[1].split('/')[-1].rsplit('-', 1)[0]}\t{p50(r['latency'])}\t{stack}\t{hosts}")
PY
      fi
    done
  done
done

python3 - "$OUT/results.tsv" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
med = lambda key, i: statistics.median(float(r[i]) for r in rows if r[0] == key and r[i])
print(f"\n{'mode':<6} {'run':<28} {'RTT p50 us':>10} {'stack p50':>10} {'hosts p50':>10}")
for mode in ("spin", "block"):
    for tool, label in (("stamps", "wirebench, kernel stamps"), ("nostamps", "wirebench --no-timestamps"), ("sockperf", "sockperf pp")):
        key = f"{tool}-{mode}"
        s = f"{med(key, 2):>10.2f} {med(key, 3):>10.2f}" if tool == "stamps" else f"{'':>10} {'':>10}"
        print(f"{mode:<6} {label:<28} {med(key, 1):>10.2f} {s}")
    a, b, c = med(f"stamps-{mode}", 1), med(f"nostamps-{mode}", 1), med(f"sockperf-{mode}", 1)
    print(f"{mode:<6} ratios: stamps / no stamps {a / b:.3f}, stamps / sockperf {a / c:.3f}, no stamps / sockperf {b / c:.3f}")
s, b = med("stamps-spin", 2), med("stamps-block", 2)
print(f"stack to stack p50, blocking / busy-poll: {b / s:.2f}; RTT difference {med('stamps-block', 1) - med('stamps-spin', 1):.2f} us, "
      f"hosts' share difference {med('stamps-block', 3) - med('stamps-spin', 3):.2f} us (median of {len(rows) // 6} each)")
PY
echo "raw results: $OUT"
