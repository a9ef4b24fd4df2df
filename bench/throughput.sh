#!/usr/bin/env bash
# wirebench stream vs iperf3 and iperf (2) on loopback, in one go: UDP 64 B and 1468 B flat
# out (received packets/s, Gbit/s, loss) and TCP (Gbit/s); interleaved repetitions; prints
# the medians and the ratios, and the loss-free rate at 64 B and 1468 B.
#
# Run it alone (2 vCPUs: the sender and the receiver each take one; anything else running
# shows up). Not part of CI.
#
#   bench/throughput.sh [REPS] [SECONDS]      defaults: 3 repetitions, 5 s per run
. "$(dirname "$0")/lib.sh"
REPS=${1:-3}
SECS=${2:-5}
bench_out throughput
need iperf3 iperf
cargo build --release -q
WB=target/release/wirebench

# Each prints "received_pps gbit_per_s loss_share".
wb_udp() { # size
  start_bg $WB serve --listen 127.0.0.1:17411; wait_port udp 17411
  $WB stream 127.0.0.1:17411 --size "$1" --duration "${SECS}s" -q --json "$OUT/wb-udp-$1.json" >/dev/null
  stop_bg
  python3 - "$OUT/wb-udp-$1.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]["receivers"][0]
t = r["total"]; span = (r.get("send_ns") or t["last_ns"] - t["first_ns"]) / 1e9  # the sending time
print(t["received"] / span, t["bytes"] * 8 / span / 1e9, 1 - t["received"] / r["sent"])
PY
}
wb_tcp() {
  start_bg $WB serve --listen 127.0.0.1:17411; wait_port tcp 17411
  $WB stream 127.0.0.1:17411 --proto tcp --duration "${SECS}s" -q --json "$OUT/wb-tcp.json" >/dev/null
  stop_bg
  python3 - "$OUT/wb-tcp.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]["receivers"][0]
t = r["total"]; span = (r.get("send_ns") or t["last_ns"] - t["first_ns"]) / 1e9  # the sending time
print(t["received"] / span, t["bytes"] * 8 / span / 1e9, 0)
PY
}
iperf3_udp() { # size
  start_bg iperf3 -s -B 127.0.0.1 -p 17412; wait_port tcp 17412
  iperf3 -c 127.0.0.1 -p 17412 -u -b 0 -l "$1" -t "$SECS" -J >"$OUT/iperf3-udp-$1.json" || true
  stop_bg
  python3 - "$OUT/iperf3-udp-$1.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["end"]["sum"]
got = s["packets"] - s["lost_packets"]
print(got / s["seconds"], s["bits_per_second"] * (1 - s["lost_percent"] / 100) / 1e9, s["lost_percent"] / 100)
PY
}
iperf3_tcp() {
  start_bg iperf3 -s -B 127.0.0.1 -p 17412; wait_port tcp 17412
  iperf3 -c 127.0.0.1 -p 17412 -t "$SECS" -J >"$OUT/iperf3-tcp.json" || true
  stop_bg
  python3 - "$OUT/iperf3-tcp.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["end"]["sum_received"]
print(0, s["bits_per_second"] / 1e9, 0)
PY
}
iperf2_udp() { # size
  start_bg iperf -s -u -B 127.0.0.1 -p 17413; wait_port udp 17413
  iperf -c 127.0.0.1 -p 17413 -u -b 100G -l "$1" -t "$SECS" >"$OUT/iperf2-udp-$1.txt" 2>&1 || true
  stop_bg
  python3 - "$OUT/iperf2-udp-$1.txt" "$1" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
# the server report: "... 0.0000-5.0012 sec ... lost/total (x%)"
m = re.findall(r"(\d+\.\d+)-\s*(\d+\.\d+) sec.*?(\d+)/\s*(\d+)\s+\(([\d.e+-]+)%\)", t)
a, b, lost, total, pct = m[-1]
secs = float(b) - float(a); got = int(total) - int(lost)
print(got / secs, got * int(sys.argv[2]) * 8 / secs / 1e9, int(lost) / max(int(total), 1))
PY
}

: >"$OUT/results.tsv"
for rep in $(seq 1 "$REPS"); do
  for test in udp64 udp1468 tcp; do
    for tool in wirebench iperf3 iperf2; do
      case $test/$tool in
        udp64/wirebench) r=$(wb_udp 64) ;;
        udp1468/wirebench) r=$(wb_udp 1468) ;;
        tcp/wirebench) r=$(wb_tcp) ;;
        udp64/iperf3) r=$(iperf3_udp 64) ;;
        udp1468/iperf3) r=$(iperf3_udp 1468) ;;
        tcp/iperf3) r=$(iperf3_tcp) ;;
        udp64/iperf2) r=$(iperf2_udp 64) ;;
        udp1468/iperf2) r=$(iperf2_udp 1468) ;;
        tcp/iperf2) continue ;;
      esac
      echo -e "$rep\t$test\t$tool\t$r" | tr ' ' '\t' | tee -a "$OUT/results.tsv"
    done
  done
done

# The loss-free rates (wirebench only: no anchor searches for it).
start_bg $WB serve --listen 127.0.0.1:17411; wait_port udp 17411
for size in 64 1468; do
  $WB stream 127.0.0.1:17411 --size $size --find-max-rate --trial 1s -q --json "$OUT/wb-lossfree-$size.json" >/dev/null
done
stop_bg

python3 - "$OUT" <<'PY'
import json, statistics, sys
out = sys.argv[1]
rows = [l.split("\t") for l in open(f"{out}/results.tsv").read().split("\n") if l]
med = lambda test, tool, i: statistics.median(float(r[3 + i]) for r in rows if r[1] == test and r[2] == tool)
have = lambda test, tool: any(r[1] == test and r[2] == tool for r in rows)
print()
print(f"{'test':<9} {'tool':<10} {'recv pkt/s':>12} {'Gbit/s':>8} {'loss':>8}")
for test in ("udp64", "udp1468", "tcp"):
    for tool in ("wirebench", "iperf3", "iperf2"):
        if have(test, tool):
            print(f"{test:<9} {tool:<10} {med(test, tool, 0):>12.0f} {med(test, tool, 1):>8.2f} {100 * med(test, tool, 2):>7.2f}%")
print()
print(f"udp 64 B   received pkt/s  wirebench / iperf2 = {med('udp64', 'wirebench', 0) / med('udp64', 'iperf2', 0):.2f}  (target >= 3)")
print(f"udp 64 B   received pkt/s  wirebench / iperf3 = {med('udp64', 'wirebench', 0) / med('udp64', 'iperf3', 0):.2f}")
print(f"udp 1468 B Gbit/s          wirebench / iperf3 = {med('udp1468', 'wirebench', 1) / med('udp1468', 'iperf3', 1):.2f}  (target >= 2)")
print(f"tcp        Gbit/s          wirebench / iperf3 = {med('tcp', 'wirebench', 1) / med('tcp', 'iperf3', 1):.2f}  (target >= 0.95)")
for size in (64, 1468):
    s = json.load(open(f"{out}/wb-lossfree-{size}.json"))["results"]["search"]
    print(f"loss-free rate at {size} B: {s['best_per_s']:.0f} msg/s, {s['best_bits_per_s'] / 1e9:.2f} Gbit/s ({len(s['trials'])} trials)")
PY
echo "raw results: $OUT"
