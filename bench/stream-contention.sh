#!/usr/bin/env bash
# Flat-out 64 B UDP streams on loopback beside a CPU hog (`yes` pinned to the last CPU), the
# case that used to report near-total loss: per run the sent and received rates (both over the
# sending time), the loss, and the kernel's Udp RcvbufErrors over the run from the report
# (one overflow drops a whole GRO run of up to 64 datagrams, so missing <= 64 x overflows);
# then iperf3 (-u -b 0 -l 64) beside the same hog as the anchor; medians and ratios.
# The same with no hog for comparison.
#
# Run it alone, under the bench lock: flock /tmp/bench.lock bench/stream-contention.sh
#
#   bench/stream-contention.sh [RUNS] [SECONDS] [WIREBENCH]   defaults: 5 runs, 2 s, a release build
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
SECS=${2:-2}
WB=${3:-}
OUT=bench/out/contention-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
if [ -z "$WB" ]; then
  cargo build --release -q
  WB=target/release/wirebench
fi
command -v iperf3 >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iperf3; }
LAST_CPU=$(( $(nproc) - 1 ))
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
bg() { "$@" >>"$OUT/servers.log" 2>&1 & pids+=($!); }
# SIGINT lets serve print its counters; a background `yes` ignores SIGINT (non-interactive
# shells start background jobs with it ignored), so it gets SIGTERM.
stop_last() { kill -"${1:-INT}" "${pids[-1]}" 2>/dev/null || true; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'; }
wait_port() { # proto port
  for _ in $(seq 1 200); do
    if [ "$1" = tcp ]; then ss -Htln "sport = :$2" | grep -q . && return; else ss -Huln "sport = :$2" | grep -q . && return; fi
    sleep 0.02
  done
}

wb_run() { # tag n -> "loss sent_pps recv_pps rcvbuf_errors"
  $WB stream 127.0.0.1:17511 --size 64 --duration "${SECS}s" -q --json "$OUT/wb-$1-$2.json" >/dev/null
  python3 - "$OUT/wb-$1-$2.json" "$SECS" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["results"]
r = s["receivers"][0]
# the sending time (a build before it was recorded: the nominal duration)
t = (r.get("send_ns") or float(sys.argv[2]) * 1e9) / 1e9
k = (r.get("kernel") or {}).get("Udp", {}).get("RcvbufErrors", "-")
print(1 - r["total"]["received"] / r["sent"], s["sender"]["messages"] / t, r["total"]["received"] / t, k, r.get("foreign", 0))
PY
}
iperf3_run() { # tag n -> "loss sent_pps recv_pps"
  iperf3 -c 127.0.0.1 -p 17512 -u -b 0 -l 64 -t "$SECS" -J >"$OUT/iperf3-$1-$2.json" || true
  python3 - "$OUT/iperf3-$1-$2.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["end"]["sum"]
got = s["packets"] - s["lost_packets"]
print(s["lost_percent"] / 100, s["packets"] / s["seconds"], got / s["seconds"], "-", "-")
PY
}

for hog in yes no; do
  if [ $hog = yes ]; then taskset -c "$LAST_CPU" yes >/dev/null & pids+=($!); fi
  bg $WB serve --listen 127.0.0.1:17511; wait_port udp 17511
  for n in $(seq "$RUNS"); do echo "wirebench hog=$hog $(wb_run "$hog" "$n")" | tee -a "$OUT/runs.txt"; done
  stop_last
  bg iperf3 -s -B 127.0.0.1 -p 17512; wait_port tcp 17512
  for n in $(seq "$RUNS"); do echo "iperf3 hog=$hog $(iperf3_run "$hog" "$n")" | tee -a "$OUT/runs.txt"; done
  stop_last
  if [ $hog = yes ]; then stop_last TERM; fi
done

python3 - "$OUT/runs.txt" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    tool, hog, loss, sent, got, *_ = line.split()
    rows.setdefault((tool, hog), []).append((float(loss), float(sent), float(got)))
print(f"\n{'tool':10} {'hog':8} {'runs':>4} {'loss median':>12} {'loss max':>9} {'recv pkt/s median':>18}")
for (tool, hog), v in sorted(rows.items()):
    loss = [x[0] for x in v]; got = [x[2] for x in v]
    print(f"{tool:10} {hog:8} {len(v):4} {100*statistics.median(loss):11.3f}% {100*max(loss):8.3f}% {statistics.median(got):18,.0f}")
for hog in ("hog=yes", "hog=no"):
    w, i = rows.get(("wirebench", hog)), rows.get(("iperf3", hog))
    if w and i:
        r = statistics.median(x[2] for x in w) / max(1.0, statistics.median(x[2] for x in i))
        print(f"{hog}: wirebench / iperf3 received pkt/s (median): {r:.2f}")
PY
echo "runs and reports: $OUT"
