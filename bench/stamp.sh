#!/usr/bin/env bash
# STAMP against wirebench's own probe on the same path, and against stamp-suite's sender, on
# loopback, interleaved repetitions; prints medians over the repetitions.
#
#   busy-poll: `serve --spin --stamp`, then `ping --spin` closed loop with wirebench's 48-byte
#              full-form probe (it carries the responder's two timestamps, as STAMP does) and
#              with 44-byte STAMP packets to the same serve: p50, p99 and the ratio stamp/native.
#   paced:     1,000 packets a second to the same reflector (blocking, no --spin), from
#              `ping stamp:// --rate 1k/s` and from `stamp-suite --send-delay 1ms`: median
#              round trip of each.
#
# Run it alone (busy-polling takes both cores of a 2-vCPU machine). Not part of CI. Needs
# stamp-suite (`cargo install --locked stamp-suite --version 1.0.0`).
#
#   bench/stamp.sh [REPS] [COUNT]      defaults: 3 repetitions, 100000 probes per busy-poll run
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
COUNT=${2:-100000}
PACED=5000
OUT=bench/out/stamp-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
command -v stamp-suite >/dev/null || { echo "stamp-suite is missing: cargo install --locked stamp-suite --version 1.0.0" >&2; exit 1; }
cargo build --release -q
WB=${CARGO_TARGET_DIR:-target}/release/wirebench
PORT=17411
SPORT=18411

pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT

serve() { # extra serve flags...
  $WB serve --listen 127.0.0.1:$PORT --stamp 127.0.0.1:$SPORT --stamp-max-rate max "$@" >"$OUT/serve.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 200); do grep -q "STAMP reflector" "$OUT/serve.log" 2>/dev/null && return; sleep 0.05; done
  echo "serve did not start" >&2; exit 1
}
unserve() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=; }

summary() { # json -> "p50 p99" in us
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]["responders"][0]["latency"]["summary"]
p = {q["p"]: q["ns"] / 1000 for q in r["percentiles"]}
print(p[50.0], p[99.0])
PY
}

: >"$OUT/results.tsv"
for rep in $(seq 1 "$REPS"); do
  serve --spin
  if (( rep % 2 )); then order="native stamp"; else order="stamp native"; fi
  for kind in $order; do
    if [ "$kind" = native ]; then target=127.0.0.1:$PORT; size=(--size 48); else target=stamp://127.0.0.1:$SPORT; size=(); fi
    $WB ping "$target" "${size[@]}" --spin --count "$COUNT" --warmup 5000 --percentiles 50,99 \
      --json "$OUT/$kind-spin-$rep.json" >"$OUT/$kind-spin-$rep.txt"
    echo -e "$rep\tspin\t$kind\t$(summary "$OUT/$kind-spin-$rep.json")" | tr ' ' '\t' | tee -a "$OUT/results.tsv"
  done
  unserve
  serve
  if (( rep % 2 )); then order="wirebench stamp-suite"; else order="stamp-suite wirebench"; fi
  for tool in $order; do
    if [ "$tool" = wirebench ]; then
      $WB ping stamp://127.0.0.1:$SPORT --rate 1k/s --count $PACED --warmup 500 --percentiles 50,99 \
        --json "$OUT/wb-paced-$rep.json" >"$OUT/wb-paced-$rep.txt"
      r=$(summary "$OUT/wb-paced-$rep.json")
    else
      stamp-suite --remote-addr 127.0.0.1 --remote-port $SPORT --count $PACED --send-delay 1ms --timeout 1 \
        >"$OUT/ss-paced-$rep.txt" 2>/dev/null
      r=$(python3 -c "
import re, sys
t = open(sys.argv[1]).read()
med = float(re.search(r'Median RTT: ([\d.]+) ms', t).group(1)) * 1000
p99 = float(re.search(r'P99 RTT: ([\d.]+) ms', t).group(1)) * 1000
print(med, p99)" "$OUT/ss-paced-$rep.txt")
    fi
    echo -e "$rep\tpaced\t$tool\t$r" | tr ' ' '\t' | tee -a "$OUT/results.tsv"
  done
  unserve
done

python3 - "$OUT/results.tsv" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
def med(mode, tool, i):
    return statistics.median(float(r[i]) for r in rows if r[1] == mode and r[2] == tool)
print()
print(f"{'mode':<6} {'sender':<12} {'p50 us':>8} {'p99 us':>8}")
for mode, tools in (("spin", ("native", "stamp")), ("paced", ("wirebench", "stamp-suite"))):
    for t in tools:
        print(f"{mode:<6} {t:<12} {med(mode, t, 3):>8.2f} {med(mode, t, 4):>8.2f}")
    a, b = tools
    print(f"{mode:<6} {b + '/' + a:<12} {med(mode, b, 3) / med(mode, a, 3):>8.3f} {med(mode, b, 4) / med(mode, a, 4):>8.3f}")
PY
echo "raw results: $OUT"
