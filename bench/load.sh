#!/usr/bin/env bash
# bench/load.sh: wirebench load against k6, both against the same server:
# the reference `wirebench room` and an independent room server in Go (bench/go-room,
# gorilla/websocket), so the server's own speed is not what is compared.
# Not CI. Run alone (under `flock /tmp/bench.lock`): the machine has 2 cores; the load average
# is recorded with every point.
#
#   bench/load.sh                          # 1,000, 2,000 and 10,000 clients x 2 msg/s, rooms of 5,
#                                          # 15 s each, both servers, both generators
#   DUR=10 SIZES="1000 2000" bench/load.sh
#   BEFORE=/tmp/wirebench-old bench/load.sh   # also an older wirebench build, same points
#   WB=/tmp/wirebench-new bench/load.sh       # this binary instead of building the tree
#   WB_FLAGS=--no-hiccup bench/load.sh        # extra flags for every wirebench load run
#                                             # (here: without the stall meter, to separate its cost)
#   K6_MAX=0 bench/load.sh                    # no k6 points
#
# Every point starts a fresh server, so each server's CPU is its own point's. Per point: RSS
# per client (the generator's peak RSS / clients), CPU us per message event (one send, or
# one delivery to one receiver: the generator's user + system CPU over the whole run, ramp
# and handshakes included, over sent + received; /usr/bin/time, the same for both tools),
# achieved send rate, delay p50/p99 (k6: whole ms, Date.now(); wirebench: us), and the
# server's CPU per message event (it counts its own receives + sends).
# k6 needs ~350 KB and ~55 us per event per client: 10,000 VUs would need ~3.5 GB and more
# than 5 cores, so k6 runs up to K6_MAX clients (2,000) and the 10,000 row has no k6 ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-15}
SIZES=${SIZES:-"1000 2000 10000"}
K6_MAX=${K6_MAX:-2000}
SERVERS=${SERVERS:-"room go"}
BEFORE=${BEFORE:-}
PORT=${PORT:-18181}
OUT=${OUT:-target/bench-load}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -f "$OUT"/*.time "$OUT"/*.json "$OUT"/*.load "$OUT"/*.server

# WB=path/to/wirebench uses that binary instead of building this tree's.
if [ -z "${WB:-}" ]; then
    cargo build --release -p wirebench
    WB=target/release/wirebench
fi
K6=${K6:-$(command -v k6 || echo "$(go env GOPATH)/bin/k6")}
if [ ! -x "$K6" ]; then
    echo "building k6 (go install go.k6.io/k6@v1.8.1)..."
    go install go.k6.io/k6@v1.8.1
fi
"$K6" version | head -1 > "$OUT/k6-version.txt"
(cd bench/go-room && go build -o "$OUT/go-room" .)
ulimit -n "$(ulimit -Hn)"

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

SERVER=""
start_server() {
    case $1 in
        room) "$WB" room --listen "127.0.0.1:$PORT" --interval 0s > "$OUT/server.log" 2>&1 & ;;
        go) "$OUT/go-room" -listen "127.0.0.1:$PORT" > "$OUT/server.log" 2>&1 & ;;
    esac
    SERVER=$!
    # Wait for the port (bounded), not a fixed time.
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "server $1 did not start" >&2; return 1
}
stop_server() {
    kill -INT "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
    # The room's stop line, folded at 100 columns, joined back into one (the Go room's is one).
    awk '/^room: received/ { s = "" } { s = s " " $0 } END { print s }' "$OUT/server.log" > "$OUT/$1.server"
    SERVER=""
}
trap '[ -n "$SERVER" ] && kill -INT $SERVER 2>/dev/null; true' EXIT

run_k6() {
    local srv=$1 n=$2 name="$1-k6-$2"
    /usr/bin/time -f '%M %U %S %e' -o "$OUT/$name.time" \
        "$K6" run -q --no-color -e N="$n" -e DUR="$DUR" -e URL="ws://127.0.0.1:$PORT/rooms/k6-$n" \
        -e SUMMARY="$OUT/$name.json" "$OUT/collab.js" > "$OUT/$name.log" 2>&1 || true
    cat /proc/loadavg > "$OUT/$name.load"
}

run_wb() {
    local srv=$1 gen=$2 bin=$3 n=$4 name="$1-$2-$4"
    # A ramp of 0.5 s per 1,000 clients (at least 2 s): 2,000 handshakes/s.
    local ramp=$(( n / 2000 > 2 ? n / 2000 : 2 ))
    /usr/bin/time -f '%M %U %S %e' -o "$OUT/$name.time" \
        "$bin" load "ws://127.0.0.1:$PORT/rooms/$gen-$n" --clients "$n" --rate 2/s --duration "${DUR}s" \
        --ramp "${ramp}s" --room-size 5 --size '*=128' --json "$OUT/$name.json" -q ${WB_FLAGS:-} > "$OUT/$name.log" 2>&1 || true
    cat /proc/loadavg > "$OUT/$name.load"
}

for srv in $SERVERS; do
    for n in $SIZES; do
        if [ "$n" -le "$K6_MAX" ]; then
            start_server "$srv"; run_k6 "$srv" "$n"; stop_server "$srv-k6-$n"
        fi
        start_server "$srv"; run_wb "$srv" wb "$WB" "$n"; stop_server "$srv-wb-$n"
        if [ -n "$BEFORE" ]; then
            start_server "$srv"; run_wb "$srv" before "$BEFORE" "$n"; stop_server "$srv-before-$n"
        fi
    done
done
trap - EXIT

python3 - "$OUT" "$DUR" "$SERVERS" "$SIZES" <<'PY'
import json, os, re, sys
out, dur = sys.argv[1], int(sys.argv[2])
servers, sizes = sys.argv[3].split(), [int(s) for s in sys.argv[4].split()]
def tm(name):
    rss_kb, u, s, e = open(f"{out}/{name}.time").read().split()[-4:]
    return int(rss_kb), float(u) + float(s)
def load(name):
    p = f"{out}/{name}.load"
    return open(p).read().split()[0] if os.path.exists(p) else ""
def server_us(name):
    p = f"{out}/{name}.server"
    m = re.search(r"([0-9.]+) us per message\s+event", open(p).read()) if os.path.exists(p) else None
    return m.group(1) if m else "-"
rows, notes, cpu = [], [], {}
for srv in servers:
    for n in sizes:
        for gen in ["k6", "wb", "before"]:
            name = f"{srv}-{gen}-{n}"
            if not os.path.exists(f"{out}/{name}.time"):
                continue
            if not os.path.exists(f"{out}/{name}.json"):
                rows.append([srv, gen, n, "no result"] + [""] * 8 + [load(name)]); continue
            rss_kb, secs = tm(name)
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
                arrived = f"{100 * a['arrived'] / max(a['expected'], 1):.2f}%"
                if a["missing"]:
                    why = [f"dropped {a['dropped']}", f"late {a['late']}"] + [f"{k} {v}" for k, v in a["closed"].items()]
                    notes.append(f"{name}: {a['missing']} deliveries missing: " + ", ".join(why))
                own = r["process"]["per_event_ns"] / 1e3
                notes.append(f"{name}: its own report says {own:.2f} us per event (getrusage from the runtime's start)")
            events = sent + recv
            us = secs * 1e6 / max(events, 1)
            kb = rss_kb / n
            cpu[(srv, gen, n)] = (us, kb)
            rows.append([srv, gen, n, f"{kb:.1f}", f"{us:.2f}", "", f"{rate:.0f} / {2 * n}", arrived,
                         f"{p50:.3f}", f"{p99:.3f}", f"{events}", server_us(name), load(name)])
for r in rows:
    k6 = cpu.get((r[0], "k6", r[2]))
    me = cpu.get((r[0], r[1], r[2]))
    if r[1] != "k6" and k6 and me:
        r[5] = f"{k6[0] / me[0]:.1f}x CPU, {k6[1] / me[1]:.1f}x RSS"
    elif r[1] != "k6" and len(r) > 5:
        r[5] = "no k6 point" if r[3] != "no result" else ""
print("| server | generator | clients | RSS KB/client | CPU µs/event | k6 / this | sent/s (achieved / requested) | deliveries arrived | delay p50 ms | delay p99 ms | message events | server CPU µs/event | load avg (1 min) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(str(x) for x in r) + " |")
print()
for note in notes:
    print(note)
PY
