#!/usr/bin/env bash
# The stream receiver's packet rate before and after a change to its receive loop, with
# iperf3 as the anchor, in one go: flat-out 64 B UDP on loopback (the receiver is the limit
# there), interleaved repetitions of BEFORE, AFTER and iperf3 (-u -b 0 -l 64); prints the
# medians of the received packets per second and the ratios AFTER/BEFORE and each/iperf3.
#
# Run it alone, under the bench lock:
#   flock /tmp/bench.lock bench/stream-rx.sh BEFORE_BINARY [AFTER_BINARY] [REPS] [SECONDS]
# AFTER defaults to target/release/wirebench (built if missing); 3 repetitions of 3 s.
. "$(dirname "$0")/lib.sh"
BEFORE=${1:?usage: bench/stream-rx.sh BEFORE_BINARY [AFTER_BINARY] [REPS] [SECONDS]}
AFTER=${2:-target/release/wirebench}
REPS=${3:-3}
SECS=${4:-3}
bench_out stream-rx
[ -x "$AFTER" ] || cargo build --release -q
need iperf3

wb() { # tag binary -> received pkt/s over the sending time
  start_bg "$2" serve --listen 127.0.0.1:17611; wait_port udp 17611
  "$2" stream 127.0.0.1:17611 --size 64 --duration "${SECS}s" -q --no-hiccup --json "$OUT/$1.json" >/dev/null
  stop_bg
  python3 - "$OUT/$1.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]["receivers"][0]
t = r["total"]; span = (r.get("send_ns") or t["last_ns"] - t["first_ns"]) / 1e9
print(t["received"] / span)
PY
}
anchor() {
  start_bg iperf3 -s -B 127.0.0.1 -p 17612; wait_port tcp 17612
  iperf3 -c 127.0.0.1 -p 17612 -u -b 0 -l 64 -t "$SECS" -J >"$OUT/iperf3-$1.json" || true
  stop_bg
  python3 - "$OUT/iperf3-$1.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["end"]["sum"]
print((s["packets"] - s["lost_packets"]) / s["seconds"])
PY
}

: >"$OUT/results.tsv"
for rep in $(seq 1 "$REPS"); do
  echo -e "$rep\tbefore\t$(wb "before-$rep" "$BEFORE")" | tee -a "$OUT/results.tsv"
  echo -e "$rep\tafter\t$(wb "after-$rep" "$AFTER")" | tee -a "$OUT/results.tsv"
  echo -e "$rep\tiperf3\t$(anchor "$rep")" | tee -a "$OUT/results.tsv"
done
python3 - "$OUT" "$AFTER" <<'PY'
import json, statistics, sys
out = sys.argv[1]
rows = [l.split("\t") for l in open(f"{out}/results.tsv").read().split("\n") if l]
med = lambda tool: statistics.median(float(r[2]) for r in rows if r[1] == tool)
b, a, i = med("before"), med("after"), med("iperf3")
print()
print(f"{'tool':<8} {'recv pkt/s (median)':>20}")
for tool, v in (("before", b), ("after", a), ("iperf3", i)):
    print(f"{tool:<8} {v:>20.0f}")
print(f"after / before = {a / b:.3f}")
print(f"before / iperf3 = {b / i:.2f}   after / iperf3 = {a / i:.2f}")
# the receiver's own wake-up delay the AFTER binary reports (what the change adds)
w = [json.load(open(f"{out}/after-{r[0]}.json"))["results"]["receivers"][0].get("wake") for r in rows if r[1] == "after"]
for x in w:
    if x:
        print(f"after: receiver wake-up p50 {x['p50_ns'] / 1e3:.1f} us p99 {x['p99_ns'] / 1e3:.1f} us max {x['max_ns'] / 1e3:.0f} us over {x['stamped']} datagrams (available {x['available']})")
PY
echo "raw results: $OUT"
