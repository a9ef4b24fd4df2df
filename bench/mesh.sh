#!/usr/bin/env bash
# What a mesh agent costs, and whether its matrix agrees with `wirebench ping`.
#
#  1. Cost: one agent probing 10, 100 and 1,000 peers with the default budget (and 1,000 in
#     a full mesh: --full-mesh-max 2000). The peers are 127.1.x.y addresses on loopback, all
#     answered by one `wirebench serve` on 0.0.0.0, which therefore shows what answering the
#     same probe rate costs. CPU from /proc/PID/stat (utime + stime) over the run, RSS from
#     /proc/PID/status (VmRSS) at the end, each checked against the agent's own /metrics;
#     probes per second from the agent's counters. Goal: under 1 % of one core
#     and under 50 MB RSS at 1,000 peers with the default budget.
#  2. Accuracy: two network namespaces on a veth pair, an agent in each; while they probe,
#     `wirebench ping` runs between the same namespaces at the same rate to the same serve
#     (UDP, then TCP), and sockperf ping-pong (--full-rtt, 64 B) at the same rate to its own
#     server beside it, both started at the start of an agent window and lasting exactly that
#     window (the load of a shared machine moves within a minute, so the three must cover the
#     same seconds), and that window is the cell read; the matrix cell's p50 must be within 5 % of
#     ping's (from actual send); sockperf is the outside anchor. ping runs as the agent
#     probes (no kernel timestamps: --no-timestamps), and for UDP a second ping with its
#     default kernel timestamps runs beside it in the same window: how far two pingers at the
#     same rate differ is the run's own noise floor for the matrix / ping ratio (a pinger at
#     a fixed period keeps one phase against the host's periodic wake-ups for the whole run;
#     the agent's jittered intervals sample every phase). A third ping, with --poisson
#     (exponential gaps, mean 1/rate: it cannot phase-lock either), runs beside them for
#     both transports: matrix / poisson ping is the like-for-like comparison.
#     Every process in A runs on
#     CPU 0 and every one in B on CPU 1: a blocking round trip on this machine kind is
#     bimodal (a wake-up on the same vCPU or the other one), and unpinned tools land in
#     different modes, which is not a difference between them.
#  Series: each cost run counts the agent's /metrics samples against the documented
#     arithmetic (58 + 17 per probed peer with UDP and TCP; core mesh::plan).
#
#  Wake-ups: the agent's context switches (every thread's, /proc/PID/task/*/status) per second
#     over the same seconds: the prober sleeps between sends and replies, so this is the count
#     its CPU follows.
#
# Root (namespaces). Run alone: flock /tmp/bench.lock bench/mesh.sh [SECONDS] [cost|accuracy|all]
# (defaults: 60 s, all); WIREBENCH_BIN=path uses that binary instead of a release build;
# WIREBENCH_BEFORE=path also runs every cost row, and every accuracy row's agents, with that
# binary, right before the same row with this one (a before/after comparison in one run: the
# same minutes' machine load; the pingers are always this binary). Accuracy: PAIRS=N repeats
# the (before and) after rows N times, PROTOS="udp" measures UDP only (default "udp tcp").
# PINGERS=poisson runs only the Poisson ping beside the agents (no sockperf, no fixed-period pings),
# and a second, identical Poisson ping beside it: the two pingers' ratio is the window's noise
# floor. The accuracy window is SECONDS too (WIN=S sets it apart): at 20 s a pinger has 400
# round trips, and a round trip here is bimodal, so a 20 s window's p50 moved by up to 6.5 %
# between two identical pingers on a quiet machine; at 60 s (1,200) by at most 2 %.
# Each row also gives the matrix's and the Poisson ping's p50 with its 95 % interval, read from
# their HdrHistograms by bench/hdr_median.py (independently of wirebench; the p50 it finds is
# asserted equal to the stated one): distribution-free, the ranks n/2 -/+ 1.96 sqrt(n)/2.
# AGENT_ARGS (and BEFORE_ARGS for the before rows) are added to the accuracy agents' command
# lines: WIREBENCH_BEFORE=<same binary> AGENT_ARGS="--proto tcp" PROTOS=tcp compares an agent
# probing TCP alone with one probing both transports.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-60}
PART=${2:-all}
OUT=bench/out/mesh-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$OUT"
WB=${WIREBENCH_BIN:-}
if [ -z "$WB" ]; then
  cargo build --release -q -p wirebench
  WB=target/release/wirebench
fi
WB=$(realpath "$WB")
BEFORE=${WIREBENCH_BEFORE:+$(realpath "$WIREBENCH_BEFORE")}
HZ=$(getconf CLK_TCK)

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  ip netns del wbmeshA 2>/dev/null || true
  ip netns del wbmeshB 2>/dev/null || true
}
trap cleanup EXIT

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
ctxt() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s + 0}'; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
# Waits until URL answers 200 (bounded).
wait_ok() { for _ in $(seq 300); do curl -sf "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "no answer from $1" >&2; exit 1; }
metric() { curl -s "$1/metrics" | awk -v m="$2" '$1 == m {print $2}'; }
sent_total() { curl -s "$1/metrics" | awk '/^wirebench_mesh_peer_probes_sent_total/ {s += $2} END {print s + 0}'; }

# ---------------------------------------------------------------- 1. cost ----
if [ "$PART" != accuracy ]; then
$WB serve --listen 0.0.0.0:17970 >"$OUT/serve.log" 2>&1 &
SERVE=$!; pids+=("$SERVE")
echo "| binary | peers | probed | planned probes/s | sent probes/s | agent CPU (% of a core) | agent wake-ups/s | agent RSS (MB) | /metrics RSS (MB) | answering serve CPU (% of a core) | series (documented) | targets with no probe in the last window |" | tee "$OUT/cost.md"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|" | tee -a "$OUT/cost.md"
run_cost() { # N [extra agent flags]: with the before binary (if any), then this one
  if [ -n "$BEFORE" ]; then run_cost_with before "$BEFORE" "$@"; fi
  run_cost_with "$([ -n "$BEFORE" ] && echo after || echo this)" "$WB" "$@"
}
run_cost_with() { # LABEL BINARY N [extra agent flags]
  local label=$1 bin=$2 n=$3; shift 3
  local f="$OUT/peers-$n.txt" http=http://127.0.0.1:17972
  : >"$f"
  for i in $(seq 0 $((n - 1))); do echo "127.1.$((i / 250)).$((i % 250 + 1)):17970" >>"$f"; done
  $bin mesh agent --listen 127.0.0.1:17971 --http 127.0.0.1:17972 --peers "file:$f" --window 10s --name bench "$@" \
    >"$OUT/agent-$n.log" 2>&1 &
  local agent=$!; pids+=("$agent")
  wait_ok "$http/readyz"
  sleep 12   # one window closed: the plan and the connections are in place
  local a0 s0 p0 t0 c0 a1 s1 p1 t1 c1
  a0=$(cpu_ticks "$agent"); s0=$(cpu_ticks "$SERVE"); p0=$(sent_total "$http"); c0=$(ctxt "$agent"); t0=$(date +%s.%N)
  sleep "$SECS"
  a1=$(cpu_ticks "$agent"); s1=$(cpu_ticks "$SERVE"); p1=$(sent_total "$http"); c1=$(ctxt "$agent"); t1=$(date +%s.%N)
  local probed planned rss mrss
  probed=$(curl -s "$http/v1/peers" | python3 -c 'import json,sys; p=json.load(sys.stdin); print(sum(x["probed"] for x in p["peers"]))')
  planned=$(curl -s "$http/v1/peers" | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["probes_per_s"], 1))')
  rss=$(rss_kb "$agent"); mrss=$(metric "$http" process_resident_memory_bytes)
  # One scrape: its samples, and the targets with no probe in the last window (a running
  # total but no window count: such a target has no cell, 6 series fewer than documented).
  local mf; mf="$OUT/metrics-$label-$(echo "$n $*" | sed 's/ *$//; s/[^a-z0-9]\+/-/g').txt"
  curl -s "$http/metrics" >"$mf"
  series=$(grep -cv '^#' "$mf")
  silent=$(( $(grep -c '^wirebench_mesh_peer_probes_sent_total{' "$mf" || true) -
    $(grep -c '^wirebench_mesh_peer_window_sent{' "$mf" || true) ))
  kill -TERM "$agent"; wait "$agent" || true
  python3 - "$label" "$n $*" "$probed" "$planned" "$a0" "$a1" "$s0" "$s1" "$p0" "$p1" "$t0" "$t1" "$rss" "$mrss" "$HZ" "$series" "$c0" "$c1" "$silent" <<'EOF' | tee -a "$OUT/cost.md"
import sys
label, n, probed, planned, a0, a1, s0, s1, p0, p1, t0, t1, rss, mrss, hz, series, c0, c1, silent = sys.argv[1:]
dt = float(t1) - float(t0)
cpu = lambda x, y: 100.0 * (float(y) - float(x)) / float(hz) / dt
print(f"| {label} | {n.strip()} | {probed} | {planned} | {(float(p1) - float(p0)) / dt:.1f} | {cpu(a0, a1):.2f} | "
      f"{(float(c1) - float(c0)) / dt:.0f} | {int(rss) / 1024:.1f} | "
      f"{float(mrss) / 2**20:.1f} | {cpu(s0, s1):.2f} | {series} ({58 + 17 * int(probed)}) | {silent} |")
EOF
}
run_cost 10
run_cost 100
run_cost 1000
run_cost 1000 --full-mesh-max 2000
kill -TERM "$SERVE"; wait "$SERVE" || true
fi
[ "$PART" = cost ] && { echo "results in $OUT"; exit 0; }

# ------------------------------------------------------------ 2. accuracy ----
ip netns add wbmeshA; ip netns add wbmeshB
ip link add wbma0 netns wbmeshA type veth peer name wbmb0 netns wbmeshB
ip -n wbmeshA addr add 10.77.68.1/24 dev wbma0; ip -n wbmeshB addr add 10.77.68.2/24 dev wbmb0
for n in wbmeshA wbmeshB; do ip -n $n link set lo up; done
ip -n wbmeshA link set wbma0 up; ip -n wbmeshB link set wbmb0 up
# The agents of one accuracy row: LABEL BINARY (both namespaces run that binary; every
# `ping` is this run's binary, the reference, whichever agents run).
ROW=0
accuracy_with() {
local label=$1 bin=$2 tag extra
ROW=$((ROW + 1)); tag="$label-$ROW"
read -ra extra <<<"$([ "$label" = before ] && echo "${BEFORE_ARGS:-}" || echo "${AGENT_ARGS:-}")"
ip netns exec wbmeshB taskset -c 1 $bin mesh agent --listen 10.77.68.2:7878 --http 10.77.68.2:9878 --peers 10.77.68.1:7878 \
  --window "${WIN}s" --rate 20/s "${extra[@]}" >"$OUT/agentB-$tag.log" 2>&1 &
local agent_b=$!; pids+=($agent_b)
ip netns exec wbmeshA taskset -c 0 $bin mesh agent --listen 10.77.68.1:7878 --http 10.77.68.1:9878 --peers 10.77.68.2:7878 \
  --window "${WIN}s" --rate 20/s "${extra[@]}" >"$OUT/agentA-$tag.log" 2>&1 &
local agent_a=$!; pids+=($agent_a)
for _ in $(seq 300); do ip netns exec wbmeshA curl -sf http://10.77.68.1:9878/readyz >/dev/null 2>&1 && break; sleep 0.1; done
# The agent's latest closed window: "index start_unix_ns" (index -1 before the first closes).
window() {
  ip netns exec wbmeshA curl -s http://10.77.68.1:9878/v1/matrix |
    python3 -c 'import json,sys; w=json.load(sys.stdin).get("window"); print(*(w and (w["index"], w["start_unix_ns"]) or (-1, 0)))'
}
for proto in ${PROTOS:-udp tcp}; do
  read -r k start < <(window)
  for _ in $(seq 600); do [ "$k" -ge 0 ] && break; sleep 0.1; read -r k start < <(window); done
  # The window after the open one: ping and sockperf run exactly through it.
  target=$((k + 2)); at=$((start + 2 * WIN * 1000000000))
  sp=(); [ "$proto" = tcp ] && sp=(--tcp)
  if [ "$ALL" = 1 ]; then
    ip netns exec wbmeshB taskset -c 1 sockperf sr -i 10.77.68.2 -p 11111 "${sp[@]}" >"$OUT/sockperf-server-$proto-$tag.log" 2>&1 &
    SP=$!; pids+=("$SP")
    for _ in $(seq 100); do grep -q "to block on socket\|poll\|busy" "$OUT/sockperf-server-$proto-$tag.log" 2>/dev/null && break; sleep 0.05; done
  fi
  sleep "$(python3 -c "import time; print(max(0.0, ($at - time.time_ns()) / 1e9))")"
  l0=$(cut -d' ' -f1 /proc/loadavg)
  if [ "$ALL" = 1 ]; then
    ip netns exec wbmeshA taskset -c 0 sockperf pp -i 10.77.68.2 -p 11111 "${sp[@]}" -m 64 --mps 20 -t "$WIN" --full-rtt \
      >"$OUT/sockperf-$proto-$tag.txt" 2>&1 &
    SPC=$!
    # ping as the agent probes (no kernel timestamps: the agent takes none), and ping with its
    # default kernel timestamps beside it (UDP only: TCP probes have none).
    if [ "$proto" = udp ]; then
      ip netns exec wbmeshA taskset -c 0 $WB ping 10.77.68.2:7878 --proto "$proto" --size 64 --rate 20/s --count $((WIN * 20)) -q \
        --json "$OUT/ping-stamped-$proto-$tag.json" >/dev/null &
      PST=$!
    fi
  fi
  # Poisson sampling at the same mean rate, as the agent probes (no kernel timestamps).
  ip netns exec wbmeshA taskset -c 0 $WB ping 10.77.68.2:7878 --proto "$proto" --size 64 --rate 20/s --poisson \
    --count $((WIN * 20)) -q --no-timestamps --json "$OUT/ping-poisson-$proto-$tag.json" >/dev/null &
  PPO=$!; pids+=("$PPO")
  # PINGERS=poisson: a second Poisson ping, the same in every way, beside the first: how far
  # the two read apart is this window's noise floor for the matrix / ping ratio.
  PP2=
  if [ "$ALL" = 0 ]; then
    ip netns exec wbmeshA taskset -c 0 $WB ping 10.77.68.2:7878 --proto "$proto" --size 64 --rate 20/s --poisson \
      --count $((WIN * 20)) -q --no-timestamps --json "$OUT/ping-poisson2-$proto-$tag.json" >/dev/null &
    PP2=$!; pids+=("$PP2")
  fi
  if [ "$ALL" = 1 ]; then
    ip netns exec wbmeshA taskset -c 0 $WB ping 10.77.68.2:7878 --proto "$proto" --size 64 --rate 20/s --count $((WIN * 20)) -q \
      --no-timestamps --json "$OUT/ping-$proto-$tag.json" >/dev/null
    [ "$proto" = udp ] && wait "$PST"
  fi
  wait "$PPO"
  [ -n "$PP2" ] && wait "$PP2"
  if [ "$ALL" = 1 ]; then
    wait "$SPC"
    kill -TERM "$SP"; wait "$SP" 2>/dev/null || true
  fi
  for _ in $(seq 600); do read -r k start < <(window); [ "$k" -ge "$target" ] && break; sleep 0.1; done
  ip netns exec wbmeshA curl -s http://10.77.68.1:9878/v1/matrix >"$OUT/matrix-$proto-$tag.json"
  [ "$k" -eq "$target" ] || echo "warning: read window $k, not $target" >&2
  python3 - "$proto" "$OUT/ping-$proto-$tag.json" "$OUT/matrix-$proto-$tag.json" "$OUT/sockperf-$proto-$tag.txt" "$label" "$l0 to $(cut -d' ' -f1 /proc/loadavg)" <<'EOF' | tee -a "$OUT/accuracy.md"
import json, os, re, sys
sys.path.insert(0, os.path.dirname(os.path.abspath("bench/hdr_median.py")))
import hdr_median
proto, ping, matrix, sockperf, label, load = sys.argv[1:]
def ping_view(path):
    r = json.load(open(path))["results"]["responders"][0]
    return r["uncorrected"] or r["latency"]
def ping_p50(path):
    return [q["ns"] for q in ping_view(path)["summary"]["percentiles"] if q["p"] == 50.0][0]
def interval(b64, p50):
    # the p50 read again from the histogram (independently of wirebench) and its 95 % interval
    n, again, lo, hi = hdr_median.median_interval(b64)
    assert again == p50, f"the histogram's p50 {again} is not the stated {p50}"
    return f"{lo / 1000:.1f} to {hi / 1000:.1f}"
import os
have = lambda path: os.path.exists(path)
p50 = ping_p50(ping) if have(ping) else None
stamped_path = ping.replace("ping-", "ping-stamped-")
stamped = ping_p50(stamped_path) if proto == "udp" and have(stamped_path) else None
poisson = ping_p50(ping.replace("ping-", "ping-poisson-"))
poisson_ci = interval(ping_view(ping.replace("ping-", "ping-poisson-"))["histogram"], poisson)
poisson2_path = ping.replace("ping-", "ping-poisson2-")
poisson2 = ping_p50(poisson2_path) if have(poisson2_path) else None
cell = [c for c in json.load(open(matrix))["cells"] if c["proto"] == proto][0]
m = cell["rtt"]["p50_ns"]
m_ci = interval(cell["histogram"], m)
sp = None
if have(sockperf):
    t = re.sub(r"\x1b\[[0-9;]*m", "", open(sockperf).read())
    sp = float(re.search(r"percentile 50\.000 =\s+([\d.]+)", t).group(1)) * 1000
us = lambda x: f"{x / 1000:.1f}" if x else "-"
ratio = lambda x: f"{m / x:.3f}" if x else "-"
within = lambda x: ("yes" if abs(m / x - 1) <= 0.05 else "NO") if x else "-"
print(f"| {label} | {load} | {proto} | {us(m)} | {us(p50)} | {us(sp)} | {ratio(p50)} | {within(p50)} | {ratio(sp)} | "
      f"{us(stamped)} | {ratio(stamped)} | {us(poisson)} | {ratio(poisson)} | {within(poisson)} | "
      f"{f'{poisson2 / poisson:.3f}' if poisson2 else '-'} | {m_ci} | {poisson_ci} |")
EOF
done
kill -TERM "$agent_a" "$agent_b"; wait "$agent_a" "$agent_b" 2>/dev/null || true
}
WIN=${WIN:-$SECS}
# PINGERS=poisson: only the Poisson `ping` beside the agents (no sockperf, no fixed-period
# pings): every other pinger on CPU 0 is a process that the agent's and that ping's replies
# can find running, which need not delay both alike.
ALL=1; [ "${PINGERS:-all}" = poisson ] && ALL=0
echo | tee -a "$OUT/accuracy.md"
echo "| binary | load (1 min) | transport | matrix p50 (us) | ping p50 (us) | sockperf p50 (us) | matrix / ping | within 5 % | matrix / sockperf | ping with kernel timestamps p50 (us) | matrix / it | ping --poisson p50 (us) | matrix / poisson ping | within 5 % | second poisson ping / first (noise floor) | matrix p50 95 % interval (us) | poisson ping p50 95 % interval (us) |" | tee -a "$OUT/accuracy.md"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" | tee -a "$OUT/accuracy.md"
for _ in $(seq "${PAIRS:-1}"); do
  if [ -n "$BEFORE" ]; then accuracy_with before "$BEFORE"; fi
  accuracy_with "$([ -n "$BEFORE" ] && echo after || echo this)" "$WB"
done
echo "results in $OUT"
