#!/usr/bin/env bash
# bench/load-shards.sh: one load scenario as N = 1, 2 and 4 shards (`load --shard K/N`) on this
# machine against one `wirebench room`, the shards started together (`--start-at`) and merged
# (`report --merge`). Not CI; run it alone (under `flock /tmp/bench.lock`), it uses every core.
#
#   bench/load-shards.sh                       # 1,000 clients x 2/s, rooms of 5, 10 s
#   CLIENTS=200 DUR=5 bench/load-shards.sh     # small
#
# Per N: the merged totals (sent, received, deliveries expected/arrived, delay p50/p99 from the
# merged histogram) and the CPU per message event of the generators: user + system of the
# shard processes from getrusage(RUSAGE_CHILDREN) around them, over merged sent + received;
# the reports' own figure (each process's getrusage(RUSAGE_SELF), summed by the merge) beside
# it as a check. Ratios against N = 1 in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${CLIENTS:-1000}
DUR=${DUR:-10}
RATE=${RATE:-2/s}
PORT=${PORT:-18191}
OUT=${OUT:-target/bench-load-shards}
WB=${WB:-target/release/wirebench}
mkdir -p "$OUT"
if [ -z "${NO_BUILD:-}" ]; then cargo build --release -p wirebench; fi
ulimit -n "$(ulimit -Hn)"

"$WB" room --listen "127.0.0.1:$PORT" --interval 0s > "$OUT/room.log" 2>&1 &
ROOM=$!
trap 'kill -INT $ROOM 2>/dev/null || true; wait $ROOM 2>/dev/null || true' EXIT
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
    sleep 0.1
done

echo "load-shards: $CLIENTS clients x $RATE, rooms of 5, ${DUR}s, against one room on 127.0.0.1:$PORT"
echo "host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
for N in 1 2 4; do
    rm -f "$OUT"/n$N-*.json
    # the shards as children of one python process: getrusage(RUSAGE_CHILDREN) covers them all
    python3 - "$WB" "$N" "$CLIENTS" "$DUR" "$RATE" "$PORT" "$OUT" <<'PY' > "$OUT/n$N.cpu"
import resource, subprocess, sys, time
wb, n, clients, dur, rate, port, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
at = f"{time.time() + 2:.3f}"
procs = [subprocess.Popen([wb, "load", f"ws://127.0.0.1:{port}/rooms/b{n}", "--clients", clients, "--room-size", "5",
                           "--rate", rate, "-d", f"{dur}s", "--shard", f"{k}/{n}", "--start-at", at, "-q",
                           "--no-hiccup", "--json", f"{out}/n{n}-{k}.json"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for k in range(1, n + 1)]
codes = [p.wait() for p in procs]
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{ru.ru_utime + ru.ru_stime:.6f} {' '.join(map(str, codes))}")
PY
    "$WB" report --merge "$OUT"/n$N-*.json --json "$OUT/n$N-merged.json" > /dev/null
done

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
rows = []
for n in (1, 2, 4):
    cpu, *codes = open(f"{out}/n{n}.cpu").read().split()
    r = json.load(open(f"{out}/n{n}-merged.json"))["results"]
    events = r["sent"] + r["received"]
    pct = {q["p"]: q["ns"] for q in r["overall"]["delay"]["summary"]["percentiles"]}
    rows.append(dict(n=n, sent=r["sent"], received=r["received"], exp=r["deliveries"]["expected"],
                     arr=r["deliveries"]["arrived"], p50=pct.get(50.0, 0) / 1e3, p99=pct.get(99.0, 0) / 1e3,
                     us=float(cpu) * 1e6 / max(events, 1), self_us=r["process"]["per_event_ns"] / 1e3,
                     codes=",".join(codes)))
base = rows[0]
print("measured under build load unless the machine was quiet (see the load average above)")
print(f"{'shards':>6} {'sent':>8} {'received':>9} {'expected':>9} {'arrived':>9} {'p50 us':>8} {'p99 us':>9} "
      f"{'cpu us/event':>12} {'x N=1':>6} {'(reports)':>10} exit")
for r in rows:
    print(f"{r['n']:>6} {r['sent']:>8} {r['received']:>9} {r['exp']:>9} {r['arr']:>9} {r['p50']:>8.0f} {r['p99']:>9.0f} "
          f"{r['us']:>12.2f} {r['us'] / base['us']:>6.2f} {r['self_us']:>10.2f} {r['codes']}")
PY
