#!/usr/bin/env bash
# bench/load.sh: wirebench load against k6 (issue 4), both against the same `wirebench room`.
# Not CI. Run alone: the machine has 2 cores; the load average is recorded with the results.
#
#   bench/load.sh              # 1,000 and 2,000 clients x 2 msg/s, rooms of 5, 30 s each,
#                              # both generators; then wirebench alone at 10,000 clients
#   DUR=10 BIG=5000 bench/load.sh
#
# Per run: RSS per client (peak RSS / clients, and the marginal KB per client between the
# two sizes), CPU us per message event (one send or one receive: process CPU over sent +
# received), achieved send rate, delay p50/p99 (k6: whole ms, Date.now(); wirebench: us).
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-30}
BIG=${BIG:-10000}
SIZES=${SIZES:-"1000 2000"}
PORT=${PORT:-18181}
OUT=${OUT:-target/bench-load}
mkdir -p "$OUT"

cargo build --release -p wirebench
WB=target/release/wirebench
K6=${K6:-$(command -v k6 || echo "$(go env GOPATH)/bin/k6")}
if [ ! -x "$K6" ]; then
    echo "building k6 (go install go.k6.io/k6@latest)..."
    go install go.k6.io/k6@latest
fi
"$K6" version | head -1 > "$OUT/k6-version.txt"
ulimit -n "$(ulimit -Hn)"

"$WB" room --listen "127.0.0.1:$PORT" --interval 0s > "$OUT/room.log" 2>&1 &
ROOM=$!
trap 'kill -INT $ROOM 2>/dev/null || true' EXIT
sleep 1

# The same scenario in k6: one VU per client, rooms of 5, 2 events/s at a fixed interval
# from a random phase, the collab-ide mix, 128-byte messages; the delay trend is
# Date.now() - ts (whole milliseconds: the resolution k6 gives a script).
cat > "$OUT/collab.js" <<'JS'
import ws from 'k6/ws';
import { Counter, Trend } from 'k6/metrics';
const delay = new Trend('delay_ms');
const reply = new Trend('reply_ms');
const sent = new Counter('msgs_sent');
const received = new Counter('msgs_received');
const N = parseInt(__ENV.N), DUR = parseInt(__ENV.DUR);
export const options = {
  scenarios: { ws: { executor: 'per-vu-iterations', vus: N, iterations: 1, maxDuration: `${DUR + 30}s` } },
  summaryTrendStats: ['avg', 'med', 'p(50)', 'p(99)', 'max'],
};
const mix = [['cursor', 40, false], ['modify', 30, false], ['save', 10, true], ['open', 10, true],
             ['list', 7, true], ['comment', 2.5, false], ['question', 0.5, false]];
function pick() {
  let u = Math.random() * 100;
  for (const m of mix) { if (u < m[1]) return m; u -= m[1]; }
  return mix[0];
}
export default function () {
  const me = __VU, room = Math.floor((__VU - 1) / 5);
  let seq = 0;
  ws.connect(`${__ENV.URL}-${room}`, {}, function (socket) {
    socket.on('open', function () {
      socket.setTimeout(function () {
        socket.setInterval(function () {
          const m = pick(), ts = Date.now() * 1000;
          let msg = `{"type":"${m[0]}","req":${m[2]},"sender":${me},"room":${room},"seq":${seq++},"ts":${ts},"it":${ts},"pad":"`;
          msg += 'x'.repeat(Math.max(0, 126 - msg.length)) + '"}';
          socket.send(msg);
          sent.add(1);
        }, 500);
      }, Math.random() * 500);
      socket.setTimeout(function () { socket.close(); }, DUR * 1000);
    });
    socket.on('message', function (data) {
      received.add(1);
      const v = JSON.parse(data);
      const d = Date.now() - v.ts / 1000;
      if (v.sender === me) { reply.add(d); } else { delay.add(d); }
    });
  });
}
export function handleSummary(data) { return { [__ENV.SUMMARY]: JSON.stringify(data) }; }
JS

run_k6() {
    local n=$1
    /usr/bin/time -f '%M %U %S %e' -o "$OUT/k6-$n.time" \
        "$K6" run -q --no-color -e N="$n" -e DUR="$DUR" -e URL="ws://127.0.0.1:$PORT/rooms/k6-$n" \
        -e SUMMARY="$OUT/k6-$n.json" "$OUT/collab.js" > "$OUT/k6-$n.log" 2>&1 || true
    cat /proc/loadavg > "$OUT/k6-$n.load"
}

run_wb() {
    local n=$1
    /usr/bin/time -f '%M %U %S %e' -o "$OUT/wb-$n.time" \
        "$WB" load "ws://127.0.0.1:$PORT/rooms/wb-$n" --clients "$n" --rate 2/s --duration "${DUR}s" \
        --ramp 2s --room-size 5 --size '*=128' --json "$OUT/wb-$n.json" -q > "$OUT/wb-$n.log" 2>&1 || true
    cat /proc/loadavg > "$OUT/wb-$n.load"
}

for n in $SIZES; do
    run_k6 "$n"
    run_wb "$n"
done
run_wb "$BIG"
kill -INT $ROOM; wait $ROOM || true
trap - EXIT

python3 - "$OUT" "$DUR" "$BIG" $SIZES <<'PY'
import json, os, sys
out, dur, big, sizes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), [int(s) for s in sys.argv[4:]]
def tm(name):
    rss_kb, u, s, e = open(f"{out}/{name}.time").read().split()[-4:]
    return int(rss_kb), float(u) + float(s)
def load(name):
    return open(f"{out}/{name}.load").read().split()[0]
rows, notes = [], []
for gen in ["k6", "wb"]:
    for n in sizes + ([big] if gen == "wb" else []):
        name = f"{gen}-{n}"
        if not os.path.exists(f"{out}/{name}.json"):
            rows.append((gen, n, "no result", "", "", "", "", "", "", load(name) if os.path.exists(f"{out}/{name}.load") else "")); continue
        rss_kb, cpu = tm(name)
        j = json.load(open(f"{out}/{name}.json"))
        if gen == "k6":
            m = j["metrics"]
            sent, recv = m["msgs_sent"]["values"]["count"], m["msgs_received"]["values"]["count"]
            d = m.get("delay_ms", {}).get("values", {})
            p50, p99 = d.get("med", 0), d.get("p(99)", 0)
            rate = sent / dur
            arrived = "-"  # k6 does not know who should have received what
        else:
            r = j["results"]
            sent, recv = r["sent"], r["received"]
            v = {p["p"]: p["ns"] for p in r["overall"]["delay"]["summary"]["percentiles"]}
            p50, p99 = v.get(50.0, 0) / 1e6, v.get(99.0, 0) / 1e6
            rate = r["achieved_send_per_s"]
            a = r["deliveries"]
            arrived = f"{100 * a['arrived'] / max(a['expected'], 1):.2f}% of {a['expected']}"
            if a["missing"]:
                why = [f"dropped {a['dropped']}", f"late {a['late']}"] + [f"{k} {v}" for k, v in a["closed"].items()]
                notes.append(f"wb-{n}: {a['missing']} deliveries missing: " + ", ".join(why))
        events = sent + recv
        rows.append((gen, n, f"{rss_kb / n:.1f}", f"{cpu * 1e6 / max(events, 1):.2f}", f"{rate:.0f} / {2 * n}",
                     arrived, f"{p50:.3f}", f"{p99:.3f}", f"{events}", load(name)))
print("| generator | clients | RSS KB/client | CPU us/event | sent/s (achieved / requested) | deliveries arrived | delay p50 ms | delay p99 ms | message events | load avg (1 min) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(str(x) for x in r) + " |")
for gen in ["k6", "wb"]:
    try:
        a, b = tm(f"{gen}-{sizes[0]}")[0], tm(f"{gen}-{sizes[-1]}")[0]
        print(f"\n{gen}: marginal RSS {(b - a) / (sizes[-1] - sizes[0]):.1f} KB per client between {sizes[0]} and {sizes[-1]} clients")
    except Exception:
        pass
for note in notes:
    print(note)
print("\nroom:", open(f"{out}/room.log").read().strip().splitlines()[-1])
PY
