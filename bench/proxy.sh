#!/usr/bin/env bash
# What `wirebench proxy` adds with no impairment, on loopback:
#  1. round trip: `wirebench ping` direct to serve vs through the proxy (32-byte UDP probes,
#     equal counts), for the thread layouts a 2-vCPU machine allows (three busy-pollers on
#     two cores starve each other, so one of the three always blocks); p50/p99/min of each
#     and the difference, plus the proxy's own view (release minus arrival stamp);
#  2. TCP throughput: iperf3 direct vs iperf3 through `wirebench proxy --proto tcp`.
# Targets: added round trip p50 <= 10 us; >= 5 Gbit/s TCP through the proxy.
#
# Run it alone (it busy-polls); not part of CI.
#
#   bench/proxy.sh [COUNT] [SECONDS]      defaults: 50000 probes, 5 s of iperf3
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${1:-50000}
SECS=${2:-5}
OUT=bench/out/proxy-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"

if ! command -v iperf3 >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3
fi
cargo build --release -q
WB=target/release/wirebench
S=127.0.0.1:17500
P=127.0.0.1:17501

pids=()
cleanup() { for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# Waits until a UDP probe through ADDR is answered (no fixed sleep).
wait_up() { for _ in $(seq 100); do $WB ping "$1" --count 1 --warmup 0 --timeout 50ms -q >/dev/null 2>&1 && return 0; done; echo "no answer from $1" >&2; exit 1; }
field() { # json-file percentile -> us
  python3 -c "import json,sys;r=json.load(open(sys.argv[1]))['results']['responders'][0]['latency']['summary'];p={q['p']:q['ns'] for q in r['percentiles']};print(f\"{p[float(sys.argv[2])]/1000:.1f}\" if sys.argv[2]!='min' else f\"{r['min_ns']/1000:.1f}\")" "$1" "$2"
}
own() { python3 -c "import json,sys;a=json.load(open(sys.argv[1]))['results']['up']['achieved']['added_delay']['summary'];print(f\"{[q['ns'] for q in a['percentiles'] if q['p']==50.0][0]}ns\")" "$1"; }

echo "| serve | proxy | ping | direct p50 / p99 / min (us) | through p50 / p99 / min (us) | added p50 (us) | added min (us) | proxy's own p50 |" | tee "$OUT/table.md"
echo "|---|---|---|---|---|---|---|---|" | tee -a "$OUT/table.md"
for layout in "block block spin" "spin block spin" "block spin spin" "block block block"; do
  read -r sv px pg <<<"$layout"
  flag() { [ "$1" = spin ] && echo --spin || true; }
  $WB serve --listen $S $(flag "$sv") >"$OUT/serve.log" 2>&1 & pids+=($!)
  $WB proxy --listen $P --upstream $S $(flag "$px") -q --json "$OUT/proxy-$sv-$px-$pg.json" >"$OUT/proxy.log" 2>&1 & ppid=$!; pids+=($ppid)
  wait_up $S; wait_up $P
  $WB ping $S $(flag "$pg") --count "$COUNT" --warmup 2000 -q --json "$OUT/direct-$sv-$px-$pg.json" >/dev/null
  $WB ping $P $(flag "$pg") --count "$COUNT" --warmup 2000 -q --json "$OUT/through-$sv-$px-$pg.json" >/dev/null
  kill -INT "$ppid"; wait "$ppid" || true
  kill "${pids[0]}"; wait "${pids[0]}" 2>/dev/null || true; pids=()
  d="$OUT/direct-$sv-$px-$pg.json"; t="$OUT/through-$sv-$px-$pg.json"
  added=$(python3 -c "print(f'{float(\"$(field "$t" 50)\")-float(\"$(field "$d" 50)\"):.1f}')")
  addmin=$(python3 -c "print(f'{float(\"$(field "$t" min)\")-float(\"$(field "$d" min)\"):.1f}')")
  echo "| $sv | $px | $pg | $(field "$d" 50) / $(field "$d" 99) / $(field "$d" min) | $(field "$t" 50) / $(field "$t" 99) / $(field "$t" min) | $added | $addmin | $(own "$OUT/proxy-$sv-$px-$pg.json") |" | tee -a "$OUT/table.md"
done

iperf3 -s -p 17502 >"$OUT/iperf3-server.log" 2>&1 & ipid=$!; pids+=($ipid)
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/17502) 2>/dev/null && break; done
gbps() { python3 -c "import json,sys;print(f\"{json.load(open(sys.argv[1]))['end']['sum_received']['bits_per_second']/1e9:.2f}\")" "$1"; }
iperf3 -c 127.0.0.1 -p 17502 -t "$SECS" -J >"$OUT/iperf3-direct.json"
$WB proxy --proto tcp --listen 127.0.0.1:17503 --upstream 127.0.0.1:17502 -q --json "$OUT/proxy-tcp.json" >"$OUT/proxy-tcp.log" 2>&1 & ppid=$!; pids+=($ppid)
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/17503) 2>/dev/null && break; done
iperf3 -c 127.0.0.1 -p 17503 -t "$SECS" -J >"$OUT/iperf3-proxy.json"
kill -INT "$ppid"; wait "$ppid" || true
kill "$ipid"; wait "$ipid" 2>/dev/null || true; pids=()
echo | tee -a "$OUT/table.md"
echo "| TCP, ${SECS} s, 1 stream | iperf3 direct | iperf3 through wirebench proxy | ratio |" | tee -a "$OUT/table.md"
echo "|---|---|---|---|" | tee -a "$OUT/table.md"
dg=$(gbps "$OUT/iperf3-direct.json"); pg=$(gbps "$OUT/iperf3-proxy.json")
echo "| Gbit/s | $dg | $pg | $(python3 -c "print(f'{$pg/$dg:.2f}')") |" | tee -a "$OUT/table.md"
echo "results in $OUT"
