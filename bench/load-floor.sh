#!/usr/bin/env bash
# bench/load-floor.sh: `wirebench load` against the platform floor of its scenario:
# bench/load-floor/floor.c, a minimal C WebSocket client (one thread, epoll, one
# timeout for every client's schedule) that does on the wire what `wirebench load` does:
# the same clients, ramp slots, room URLs, JSON frames, send times and mix (the same seeded
# draws), and times every delivered frame. The method is bench/load.sh's: each point starts
# a fresh `wirebench room`, the generator's user + system CPU (/usr/bin/time) over its
# sent + received is the CPU per message event, and the room's own counts (its receives and
# sends) are set against the generator's. Not CI; run alone, under `flock /tmp/bench.lock`.
#
#   bench/load-floor.sh                                # 1,000, 2,000, 10,000 clients, 10 s each
#   SIZES=1000 DUR=8 bench/load-floor.sh
#   WB=/tmp/wb-after BEFORE=/tmp/wb-before bench/load-floor.sh   # also an older build, as
#                                                      #   shipped and --no-hiccup ("/ before")
#   PERF=1 bench/load-floor.sh                         # + system calls and context switches per
#                                                      #   event (perf stat) for every generator
#   ROUNDS=3 SIZES="1000 2000" bench/load-floor.sh     # every point three times, the generators'
#                                                      #   order rotated each round: medians, and
#                                                      #   wb / floor per round
# With two sizes or more, a second table: peak RSS per client added from one size to the
# next, where the fixed part of each program (code, libraries) cancels out.
#
# Generators per point: floor, wb (wirebench load as shipped, with its stall meter),
# wb-nohiccup (--no-hiccup: the stall meter's 1,000 wake-ups/s left out, like for like with
# the floor), and with BEFORE=: before (as shipped) and before-nohiccup; the "/ before"
# column sets wb against before and wb-nohiccup against before-nohiccup, same point, same run.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-10}
SIZES=${SIZES:-"1000 2000 10000"}
BEFORE=${BEFORE:-}
ROUNDS=${ROUNDS:-1}
PORT=${PORT:-18185}
OUT=${OUT:-target/bench-load-floor}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -f "$OUT"/*.time "$OUT"/*.log "$OUT"/*.json "$OUT"/*.load "$OUT"/*.server "$OUT"/*.perf
if [ -z "${WB:-}" ]; then
    cargo build --release -p wirebench
    WB=target/release/wirebench
fi
gcc -O2 -Wall -o "$OUT/floor" bench/load-floor/floor.c
ulimit -n "$(ulimit -Hn)"

SERVER=""
start_server() {
    "$WB" room --listen "127.0.0.1:$PORT" --interval 0s > "$OUT/server.log" 2>&1 &
    SERVER=$!
    for _ in $(seq 100); do # wait for the port (bounded), not a fixed time
        (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "the room did not start" >&2; return 1
}
stop_server() {
    kill -INT "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
    # The room's stop line, folded at 100 columns, joined back into one.
    awk '/^room: received/ { s = "" } { s = s " " $0 } END { print s }' "$OUT/server.log" > "$OUT/$1.server"
    SERVER=""
}
trap '[ -n "$SERVER" ] && kill -INT $SERVER 2>/dev/null; true' EXIT

# perf stat around /usr/bin/time around the generator (perf's own CPU is not in the figure).
EVENTS=raw_syscalls:sys_enter,context-switches,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendto
run() {
    local gen=$1 n=$2 name="$1-$2-r$round"; shift 2
    local wrap=()
    [ -n "${PERF:-}" ] && wrap=(perf stat -x, -o "$OUT/$name.perf" -e "$EVENTS" --)
    start_server
    "${wrap[@]}" /usr/bin/time -f '%M %U %S %e' -o "$OUT/$name.time" "$@" > "$OUT/$name.log" 2>&1 || true
    cat /proc/loadavg > "$OUT/$name.load"
    stop_server "$name"
}

wb() { # wirebench load as bench/load.sh runs it: GEN BINARY [extra flags]
    local gen=$1 bin=$2; shift 2
    run "$gen" "$n" "$bin" load "ws://127.0.0.1:$PORT/rooms/$gen-$n" --clients "$n" --rate 2/s \
        --duration "${DUR}s" --ramp "${ramp}s" --room-size 5 --size '*=128' -q \
        --json "$OUT/$gen-$n-r$round.json" "$@"
}
gens=(floor wb wb-nohiccup)
[ -n "$BEFORE" ] && gens+=(before before-nohiccup)
point() { # GEN: one generator at the current size
    case $1 in
        floor) run floor "$n" "$OUT/floor" 127.0.0.1 "$PORT" "/rooms/floor-$n" "$n" 2 "$DUR" "$ramp" 5 128 ;;
        wb) wb wb "$WB" ;;
        wb-nohiccup) wb wb-nohiccup "$WB" --no-hiccup ;;
        before) wb before "$BEFORE" ;;
        before-nohiccup) wb before-nohiccup "$BEFORE" --no-hiccup ;;
    esac
}
for round in $(seq "$ROUNDS"); do
    for n in $SIZES; do
        ramp=$(( n / 2000 > 2 ? n / 2000 : 2 )) # bench/load.sh's ramp: 2,000 handshakes/s
        k=$(( (round - 1) % ${#gens[@]} ))    # rotate: each generator goes first in turn
        for g in "${gens[@]:k}" "${gens[@]:0:k}"; do point "$g"; done
    done
done
trap - EXIT

python3 - "$OUT" "$DUR" "$SIZES" "$ROUNDS" <<'PY'
import json, os, re, statistics, sys
out, dur, sizes, rounds = sys.argv[1], int(sys.argv[2]), [int(s) for s in sys.argv[3].split()], int(sys.argv[4])
def read(p):
    return open(p).read() if os.path.exists(p) else ""
rows, cpu, per_round = [], {}, {}
for n in sizes:
  for rnd in range(1, rounds + 1):
    for gen in ["floor", "wb", "wb-nohiccup", "before", "before-nohiccup"]:
        name = f"{gen}-{n}-r{rnd}"
        if not os.path.exists(f"{out}/{name}.time"):
            continue
        t = read(f"{out}/{name}.time").split()
        rss_kb, secs = int(t[-4]), float(t[-3]) + float(t[-2])
        if gen == "floor":
            m = re.search(r"floor-result (.*)", read(f"{out}/{name}.log"))
            if not m:
                rows.append([gen, n, f"no result (round {rnd})"]); continue
            r = dict(kv.split("=") for kv in m.group(1).split())
            sent, recv = int(r["sent"]), int(r["received"])
            p50, p99 = float(r["p50_ms"]), float(r["p99_ms"])
        else:
            if not os.path.exists(f"{out}/{name}.json"):
                rows.append([gen, n, f"no result (round {rnd})"]); continue
            r = json.load(open(f"{out}/{name}.json"))["results"]
            sent, recv = r["sent"], r["received"]
            v = {p["p"]: p["ns"] for p in r["overall"]["delay"]["summary"]["percentiles"]}
            p50, p99 = v.get(50.0, 0) / 1e6, v.get(99.0, 0) / 1e6
        us = secs * 1e6 / max(sent + recv, 1)
        srv = read(f"{out}/{name}.server")
        m = re.search(r"received (\d+) sent (\d+)", srv)
        room = f"{m.group(1)} / {m.group(2)}" if m else "-"
        agree = bool(m) and int(m.group(1)) == sent and int(m.group(2)) == recv
        m = re.search(r"([0-9.]+) us per message\s+event", srv)
        perf = ""
        if os.path.exists(f"{out}/{name}.perf"):
            c = {}
            for line in read(f"{out}/{name}.perf").splitlines():
                f = line.split(",")
                if len(f) > 2 and f[0].replace(".", "").isdigit():
                    c[f[2]] = float(f[0])
            ev = max(sent + recv, 1)
            g = lambda k: c.get(k, 0) / ev
            perf = (f"{g('raw_syscalls:sys_enter'):.2f} / {g('syscalls:sys_enter_epoll_wait'):.2f} / "
                    f"{g('syscalls:sys_enter_recvfrom'):.2f} / {g('syscalls:sys_enter_sendto'):.2f} / "
                    f"{g('context-switches'):.2f}")
        ramp = max(n // 2000, 2)  # as above; client i sends from ramp * i / n to ramp + DUR
        per_round.setdefault((gen, n), []).append(dict(
            rnd=rnd, us=us, sends=f"{sent} / {round(2 * n * (dur + ramp / 2))}", gen_counts=f"{sent} / {recv}",
            room=room, agree=agree, p50=p50, p99=p99, rss=rss_kb / n, room_us=float(m.group(1)) if m else None,
            perf=perf, load=float(read(f"{out}/{name}.load").split()[0])))
med = statistics.median
for (gen, n), runs in per_round.items():
    cpu[(gen, n)] = {r["rnd"]: r["us"] for r in runs}
against = {"wb": "before", "wb-nohiccup": "before-nohiccup"}
def ratio(gen, n, base):
    """Per round: gen / base in the same round, and their median."""
    a, b = cpu.get((gen, n), {}), cpu.get((base, n), {})
    by = [a[k] / b[k] for k in sorted(a) if k in b and b[k] > 0]
    return (f"{med(by):.2f}" if by else ""), " ".join(f"{x:.2f}" for x in by)
for (gen, n), runs in per_round.items():
    last = runs[-1]
    f_med, f_by = ratio(gen, n, "floor")
    b_med, _ = ratio(gen, n, against.get(gen, ""))
    room_us = [r["room_us"] for r in runs if r["room_us"] is not None]
    rows.append([gen, n, f"{med(r['us'] for r in runs):.2f}", f_med if gen != "floor" else "1.00",
                 f_by if gen != "floor" else "", b_med, last["sends"], last["gen_counts"], last["room"],
                 "yes" if all(r["agree"] for r in runs) else "NO", f"{med(r['p50'] for r in runs):.3f}",
                 f"{med(r['p99'] for r in runs):.3f}", f"{med(r['rss'] for r in runs):.1f}",
                 f"{med(room_us):.2f}" if room_us else "-", last["perf"],
                 " ".join(f"{r['load']:.2f}" for r in runs)])
print(f"load-floor: {dur} s per point, rooms of 5, 2 msg/s per client, 128 B, the collab-ide mix, "
      f"{rounds} round(s): medians; counts of the last round; counts agree only if every round's do")
print("| generator | clients | CPU µs/event | / floor | / floor by round | / before | sends (made / intended) "
      "| generator sent / received | room received / sent | counts agree | delay p50 ms | delay p99 ms "
      "| RSS KB/client | room CPU µs/event "
      "| syscalls / epoll_wait / recvfrom / sendto / context switches per event | load avg (1 min) by round |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print("| " + " | ".join(str(x) for x in r) + " |")
# Peak RSS counts the program's fixed part (its code and libraries, resident as mapped file
# pages) in every client's share; between two sizes it cancels out: what one more client costs.
total = {k: med(r["rss"] * k[1] for r in runs) for k, runs in per_round.items()}
steps = [(a, b) for a, b in zip(sorted(sizes), sorted(sizes)[1:])]
if steps:
    print()
    print("| generator | clients | RSS KB per added client | / floor |")
    print("|---|---|---|---|")
    for gen in ["floor", "wb", "wb-nohiccup", "before", "before-nohiccup"]:
        for a, b in steps:
            if (gen, a) not in total or (gen, b) not in total:
                continue
            kb = (total[(gen, b)] - total[(gen, a)]) / (b - a)
            fl = (total.get(("floor", b), 0) - total.get(("floor", a), 0)) / (b - a)
            print(f"| {gen} | {a} -> {b} | {kb:.2f} | {kb / fl:.2f} |" if fl > 0 else f"| {gen} | {a} -> {b} | {kb:.2f} | - |")
PY
