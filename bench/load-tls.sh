#!/usr/bin/env bash
# bench/load-tls.sh: what TLS costs `wirebench load` and `wirebench room`.
# Not CI. Run alone, under the bench lock: flock /tmp/bench.lock bench/load-tls.sh
#
#   bench/load-tls.sh                # 1,000 clients x 2 msg/s, rooms of 5, 10 s: ws:// then wss://
#   N=2000 DUR=20 bench/load-tls.sh
#
# The same scenario against two rooms, one plain and one with --tls-cert/--tls-key (a
# P-256 certificate made here with openssl), each in its own process so each room's CPU is
# its own. Per run: the generator's CPU us per message event (user + system from
# /usr/bin/time over sent + received), delay p50/p99, the room's CPU per event (its own
# getrusage line); then wss/ws ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000}
DUR=${DUR:-10}
PORT=${PORT:-18281}
OUT=${OUT:-target/bench-load-tls}
mkdir -p "$OUT"

# WB=path/to/wirebench uses that binary instead of building this tree's.
if [ -z "${WB:-}" ]; then
    [ -n "${SKIP_BUILD:-}" ] || cargo build --release -p wirebench
    WB=target/release/wirebench
fi
ulimit -n "$(ulimit -Hn)"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -addext "basicConstraints=critical,CA:FALSE" \
    -keyout "$OUT/key.pem" -out "$OUT/cert.pem" 2> /dev/null

"$WB" room --listen "127.0.0.1:$PORT" --interval 0s > "$OUT/room-ws.log" 2>&1 &
R1=$!
"$WB" room --listen "127.0.0.1:$((PORT + 1))" --interval 0s --tls-cert "$OUT/cert.pem" --tls-key "$OUT/key.pem" \
    > "$OUT/room-wss.log" 2>&1 &
R2=$!
trap 'kill -INT $R1 $R2 2>/dev/null || true' EXIT
for p in $PORT $((PORT + 1)); do
    for _ in $(seq 100); do (exec 3<> "/dev/tcp/127.0.0.1/$p") 2> /dev/null && break; sleep 0.05; done
done

run() { # scheme port [flags...]
    local scheme=$1 port=$2
    shift 2
    /usr/bin/time -f '%M %U %S %e' -o "$OUT/$scheme.time" \
        "$WB" load "$scheme://127.0.0.1:$port/rooms/b" --clients "$N" --rate 2/s --duration "${DUR}s" --ramp 2s \
        --room-size 5 --size '*=128' --json "$OUT/$scheme.json" -q "$@" > "$OUT/$scheme.log" 2>&1 || true
    cat /proc/loadavg > "$OUT/$scheme.load"
}
run ws "$PORT"
run wss $((PORT + 1)) --ca "$OUT/cert.pem"
kill -INT $R1 $R2; wait $R1 $R2 || true
trap - EXIT

python3 - "$OUT" "$N" <<'PY'
import json, re, sys
out, n = sys.argv[1], int(sys.argv[2])
rows = {}
for s in ["ws", "wss"]:
    rss_kb, u, sy, e = open(f"{out}/{s}.time").read().split()[-4:]
    cpu = float(u) + float(sy)
    r = json.load(open(f"{out}/{s}.json"))["results"]
    events = r["sent"] + r["received"]
    v = {p["p"]: p["ns"] for p in r["overall"]["delay"]["summary"]["percentiles"]}
    room = open(f"{out}/room-{s}.log").read()
    m = re.search(r"([0-9.]+) us per message event", room)
    a = r["deliveries"]
    rows[s] = dict(cpu_us=cpu * 1e6 / max(events, 1), p50=v.get(50.0, 0) / 1e6, p99=v.get(99.0, 0) / 1e6,
                   room_us=float(m.group(1)) if m else float("nan"), rss=int(rss_kb) / n, events=events,
                   arrived=f"{100 * a['arrived'] / max(a['expected'], 1):.2f}%", load=open(f"{out}/{s}.load").read().split()[0])
print(f"{n} clients x 2/s, rooms of 5, 128 B messages, loopback")
print("| scheme | load CPU us/event | delay p50 ms | delay p99 ms | room CPU us/event | load RSS KB/client | deliveries arrived | message events | load avg |")
print("|---|---|---|---|---|---|---|---|---|")
for s, r in rows.items():
    print(f"| {s} | {r['cpu_us']:.2f} | {r['p50']:.3f} | {r['p99']:.3f} | {r['room_us']:.2f} | {r['rss']:.1f} | {r['arrived']} | {r['events']} | {r['load']} |")
w, t = rows["ws"], rows["wss"]
ratio = lambda a, b: f"{b / a:.2f}x" if a else "-"
print(f"| wss/ws | {ratio(w['cpu_us'], t['cpu_us'])} | {ratio(w['p50'], t['p50'])} | {ratio(w['p99'], t['p99'])} | "
      f"{ratio(w['room_us'], t['room_us'])} | {ratio(w['rss'], t['rss'])} | | | |")
PY
