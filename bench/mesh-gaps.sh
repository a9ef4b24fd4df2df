#!/usr/bin/env bash
# Does a round trip depend on how long its flow was idle, and so on a prober's gaps?
# Two namespaces on a veth pair, a C UDP echo in B (CPU 1), and four C pingers in A (CPU 0,
# as bench/mesh.sh accuracy places the agents) at once, 20 probes a second each, for SECONDS:
# gaps exponential (as `ping --poisson` and the mesh agent), uniform in
# 50 ms +-20 % (the agent before), exponential sent on a 3.125 ms grid (the agent's send slot
# at that rate, every send gathered), and exponential on a 1 ms grid. Prints each one's p50
# and the exponential pinger's p50 by the gap since its own previous probe. Written in C
# apart from wirebench, so it checks the agent's pacing without the agent.
# Root (namespaces). Run alone: flock /tmp/bench.lock bench/mesh-gaps.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
S=${1:-90}; N=$((S * 20))
OUT=bench/out/mesh-gaps-$(date -u +%Y%m%dT%H%M%SZ); mkdir -p "$OUT"
cc -O2 -o "$OUT/echo" bench/mesh-gaps/echo.c
cc -O2 -o "$OUT/gap" bench/mesh-gaps/gap.c -lm
A=wbgapA; B=wbgapB
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; ip netns del $A 2>/dev/null || true; ip netns del $B 2>/dev/null || true; }
trap cleanup EXIT
ip netns add $A; ip netns add $B
ip link add wbga0 netns $A type veth peer name wbgb0 netns $B
ip -n $A addr add 10.77.71.1/24 dev wbga0; ip -n $B addr add 10.77.71.2/24 dev wbgb0
for n in $A $B; do ip -n $n link set lo up; done
ip -n $A link set wbga0 up; ip -n $B link set wbgb0 up
ip netns exec $B taskset -c 1 "$OUT/echo" 10.77.71.2 9000 &
pids+=($!)
l0=$(cut -d' ' -f1 /proc/loadavg)
run() { ip netns exec $A taskset -c 0 "$OUT/gap" 10.77.71.2 9000 "$@" $N; }
run e 50000 >"$OUT/exp.txt" & p1=$!
run u 50000 >"$OUT/uniform.txt" & p2=$!
# The grid argument follows N: gap ADDR PORT MODE MEAN N GRID.
ip netns exec $A taskset -c 0 "$OUT/gap" 10.77.71.2 9000 e 50000 $N 3125 >"$OUT/grid3.txt" & p3=$!
ip netns exec $A taskset -c 0 "$OUT/gap" 10.77.71.2 9000 e 50000 $N 1000 >"$OUT/grid1.txt" & p4=$!
wait $p1 $p2 $p3 $p4
python3 - "$OUT" "$l0 to $(cut -d' ' -f1 /proc/loadavg)" <<'PY' | tee "$OUT/gaps.md"
import statistics as st, sys
out, load = sys.argv[1], sys.argv[2]
def rows(name):
    return [tuple(map(int, l.split())) for l in open(f"{out}/{name}.txt") if l.strip()]
p50 = lambda xs: st.median(xs) / 1000
runs = {k: rows(k) for k in ("exp", "uniform", "grid3", "grid1")}
print(f"load (1 min) {load}")
print("| pinger | probes answered | p50 (us) | / exponential |")
print("|---|---|---|---|")
e = p50([r for _, r in runs["exp"]])
for k, label in [("exp", "exponential gaps"), ("uniform", "uniform 50 ms +-20 %"), ("grid3", "exponential, 3.125 ms grid"), ("grid1", "exponential, 1 ms grid")]:
    v = p50([r for _, r in runs[k]])
    print(f"| {label} | {len(runs[k])} | {v:.1f} | {v / e:.3f} |")
print()
print("| exponential pinger: gap since its previous probe (ms) | probes | p50 (us) |")
print("|---|---|---|")
for lo, hi in [(0, 2), (2, 5), (5, 10), (10, 20), (20, 40), (40, 60), (60, None)]:
    b = [r for g, r in runs["exp"] if g >= lo * 1000 and (hi is None or g < hi * 1000)]
    if b:
        print(f"| {lo} to {hi if hi else 'more'} | {len(b)} | {p50(b):.1f} |")
PY
echo "results in $OUT"
