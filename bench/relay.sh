#!/usr/bin/env bash
# Multicast three ways, in namespaces, in one run:
#   native  three hosts on one bridge: native multicast;
#   relay   three nodes routed through a router with no multicast routing, a
#           `wirebench relay` on each node;
#   n2n     the same routed nodes, an n2n supernode on the router and an edge (TAP device)
#           on each node: multicast across the L2 overlay.
#   floor   the same routed nodes, bench/relay-floor/floor.c on each node in place of
#           wirebench relay: the least a user-space relay can do on the same data path
#           (one recv and one sendto per copy, a thread per socket in a blocking recv,
#           nothing else), so the relay's added latency is read against this host's own
#           floor; floor1 is the same program with one thread in one epoll (the relay's
#           shape), floor1r that with the relay's system calls.
# Each: `wirebench ping GROUP` to two responders (RTT p50/p99/p99.9, closed loop) and
# `wirebench stream --group` to two receivers (highest loss-free rate, 64 B and 1400 B;
# not for the floor, which carries the ping's groups only).
# Prints a table, the ratios relay/native (added p50), relay/floor (added p50) and relay/n2n
# (loss-free rate), with each relay's CPU use while measured.
#
#   flock /tmp/bench.lock bench/relay.sh [BINARY]      # default target/release/wirebench
#
# Needs root, iproute2, python3, gcc (for the floor; without it the floor row is skipped) and
# Debian's n2n (edge, supernode); without n2n the n2n column is skipped and said so. PINGS
# (default 20000) and TRIAL (default 1s) size the runs; STREAMS=0 skips the loss-free searches
# (ping rows only), N2N=0 skips n2n.
# ROUNDS=N (default 1) measures every ping row N times, the rows' order rotated each round
# (neighbouring runs on a shared host differ by more than the goal's margin): the table shows
# each row's median, the ratios are given per round and as their median; the loss-free
# searches and n2n run in the first round only.
# FLOOR_PARTS="ts mmsg smmsg timeout" adds a row floor1+PART per part: floor1 with that one of
# the relay's system calls (floor.c --relay-like=PART), to tell which of them costs what.
# PIN=1 runs node 1's processes on CPU 0 and nodes 2 and 3's on CPU 1 (needs two CPUs): rounds
# then agree within a few µs, where unpinned they differ by tens with where the scheduler put
# six processes.
# PERF_DIR=DIR records a CPU profile (perf record -g) of node 1's relay or floor while each
# row is measured in the first round, DIR/ROW.data (`perf report -i DIR/relay.data`;
# PERF_EVENT=cpu-clock:u PERF_FREQ=20000 for user space only, finer); with
# PERF_SCHED=1 it records the scheduler instead (perf sched record -a, DIR/ROW.sched) and
# prints, per row and node, what one pass through the relay (or floor) takes: from a wake-up
# to the first task it wakes (bench/relay-passes.py).
# BEFORE=BINARY adds a row "before": the relays run from that binary (the measuring side
# stays BINARY), with after/before ratios. BUSY_POLL=DURATION adds a row "busy": the relay
# on node 1 (the pinger's, two of a round trip's four relay passes) runs with
# --busy-poll DURATION; BUSY_NODES="1 2 3" spins more of them (on a 2-vCPU machine three
# spinning relays starve the pinger).
set -euo pipefail
cd "$(dirname "$0")/.."
wb=$(realpath "${1:-target/release/wirebench}")
[ -x "$wb" ] || { echo "no binary at $wb (cargo build --release)" >&2; exit 2; }
pings=${PINGS:-20000}
trial=${TRIAL:-1s}
tag="wbrb$$"
tmp=$(mktemp -d)
pids=()

cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for n in $(ip netns list | awk -v t="$tag" 'index($1, t) == 1 {print $1}'); do ip netns del "$n"; done
  rm -rf "$tmp"
}
trap cleanup EXIT

ns() { ip netns add "$tag-$1"; ip -n "$tag-$1" link set lo up; }
# PIN=1: node 1's processes (the pinger, its relay or floor) run on CPU 0, nodes 2 and 3's on
# CPU 1, in every row: a hop between nodes is a hop between CPUs, as between hosts, and the
# rows do not differ by where the scheduler happened to put six processes.
[ "${PIN:-0}" != 1 ] || [ "$(nproc)" -ge 2 ] || { echo "PIN=1 needs two CPUs, this host has $(nproc)" >&2; exit 2; }
pin() { [ "${PIN:-0}" = 1 ] || return 0; case $1 in h1 | n1) echo taskset -c 0 ;; h[23] | n[23]) echo taskset -c 1 ;; esac; }
x() { local n=$1; shift; ip netns exec "$tag-$n" $(pin "$n") "$@"; }
veth() { # veth NS_A IF_A ADDR_A NS_B IF_B [ADDR_B]
  ip link add "$2" netns "$tag-$1" type veth peer name "$5" netns "$tag-$4"
  ip -n "$tag-$1" addr add "$3" dev "$2"; ip -n "$tag-$1" link set "$2" up
  [ -n "${6:-}" ] && ip -n "$tag-$4" addr add "$6" dev "$5"
  ip -n "$tag-$4" link set "$5" up
}
bg() { # bg NS LOG CMD...: start in a namespace, remember the pid
  local n=$1 log=$2; shift 2
  ip netns exec "$tag-$n" $(pin "$n") "$@" >"$log" 2>&1 &
  pids+=($!)
}
wait_for() { # wait_for FILE TEXT: up to 10 s for a line in a log
  for _ in $(seq 100); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "timed out waiting for '$2' in $1:" >&2; cat "$1" >&2; exit 1
}

# Topologies. Native: h1..h3 on a bridge, 10.78.1.0/24. Routed: n1..n3 on 10.78.1{1,2,3}.0/24
# behind router rt (.1 on each), no multicast routing.
ns sw; ip -n "$tag-sw" link add br0 type bridge; ip -n "$tag-sw" link set br0 up
for i in 1 2 3; do
  ns "h$i"; veth "h$i" eth0 "10.78.1.$i/24" sw "p$i"; ip -n "$tag-sw" link set "p$i" master br0
done
ns rt; x rt sysctl -qw net.ipv4.ip_forward=1
for i in 1 2 3; do
  ns "n$i"; veth rt "r$i" "10.78.1$i.1/24" "n$i" eth0 "10.78.1$i.2/24"
  ip -n "$tag-n$i" route add default via "10.78.1$i.1"
done

G=239.255.78.1:7877; R=239.255.78.2:7879; S=239.255.78.3:5079
term=() # processes that ignore SIGINT (n2n's, started in the background: bash ignores it for them)
stop_all() { # stop every process started so far (the next setup reuses the namespaces)
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for p in "${term[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=(); term=()
}
serves() { # serves NS2 IP2 NS3 IP3 LABEL
  bg "$1" "$tmp/$5-s2.log" "$wb" serve --listen 0.0.0.0:7878 --open --join $G --interface "$2" --reply-group $R
  bg "$3" "$tmp/$5-s3.log" "$wb" serve --listen 0.0.0.0:7878 --open --join $G --interface "$4" --reply-group $R
  wait_for "$tmp/$5-s2.log" listening; wait_for "$tmp/$5-s3.log" listening
}
measure() { # measure NS1 IP1 IP2 IP3 LABEL [ping]: ping then loss-free search at 64 and 1400 B
  x "$1" "$wb" ping $G --interface "$2" --reply-group $R --loop --responders 2 --count "$pings" \
    --warmup 1000 --json "$tmp/$5-ping.json" >/dev/null
  if [ "${6:-}" = ping ] || [ "${STREAMS:-1}" = 0 ]; then return 0; fi
  for size in 64 1400; do
    x "$1" "$wb" stream "$3:7878" "$4:7878" --group $S --interface "$2" --size $size --find-max-rate \
      --rate 2gbit --trial "$trial" -q --json "$tmp/$5-stream-$size.json" >/dev/null
  done
}

echo "multicast: native vs wirebench relay vs n2n, $(date -u +%FT%TZ), $(nproc) CPUs, $("$wb" --version)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (figures taken while others build are noisy)${PIN:+; PIN=$PIN}"

rounds=${ROUNDS:-1}
only() { [ "${1#*@}" = 1 ] || echo ping; } # only LABEL: "ping" after the first round
native() { # native LABEL
  serves h2 10.78.1.2 h3 10.78.1.3 "$1"
  measure h1 10.78.1.1 10.78.1.2 10.78.1.3 "$1" "$(only "$1")"
  stop_all
}

peers() { local out=(); for j in 1 2 3; do [ "$j" != "$1" ] && out+=("10.78.1$j.2:7880"); done; (IFS=,; echo "${out[*]}"); }
profiler=
profile_start() { # profile_start LABEL PID1 PID2 PID3: perf record of PID1 into PERF_DIR (first round only)
  [ -n "${PERF_DIR:-}" ] && [ -z "$(only "$1")" ] || return 0
  mkdir -p "$PERF_DIR"
  echo "${@:2}" >"$PERF_DIR/${1%@*}.pids"
  local f="$PERF_DIR/${1%@*}"
  if [ -n "${PERF_SCHED:-}" ]; then f+=.sched; perf sched record -a -o "$f" >/dev/null 2>&1 &
  elif [ -n "${PERF_TRACE:-}" ]; then f+=.trace; perf trace -s -p "$2" -o "$f" >/dev/null 2>&1 &
  else f+=.data; perf record -q ${PERF_G:--g} -F "${PERF_FREQ:-1999}" ${PERF_EVENT:+-e "$PERF_EVENT"} -p "$2" -o "$f" >/dev/null 2>&1 &
  fi
  profiler=$!
  # measure once perf has written its file's header (its events are open then), up to 5 s
  for _ in $(seq 50); do [ -s "$f" ] && break; sleep 0.1; done
}
profile_stop() { [ -z "$profiler" ] || { kill -INT "$profiler"; wait "$profiler" || true; profiler=; }; }
# measured LABEL ONLY PID1 PID2 PID3: measure through node 1 (ONLY "ping": no stream
# searches), writing the three nodes' CPU while measured: % of one CPU each (utime + stime
# from /proc), then their sum in seconds, then the sum of their utime.
measured() {
  local label=$1 only=$2 t0 c0=() p
  shift 2
  t0=$(date +%s.%N); for p in "$@"; do c0+=("$(cpu_ticks "$p")"); done
  profile_start "$label" "$@"
  measure n1 10.78.11.2 10.78.12.2 10.78.13.2 "$label" "$only"
  profile_stop
  python3 -c 'import os,sys; t=float(sys.argv[1]); hz=os.sysconf("SC_CLK_TCK"); w=float(sys.argv[2])-t
d=[[(int(y)-int(x))/hz for x,y in zip(a.split(","), b.split(","))] for a,b in zip(sys.argv[3:6], sys.argv[6:9])]
c=[u+s for u,s in d]; print(" ".join(f"{x/w*100:.0f}" for x in c), sum(c), sum(u for u,_ in d))' \
    "$t0" "$(date +%s.%N)" "${c0[@]}" $(for p in "$@"; do cpu_ticks "$p"; done) >"$tmp/$label-cpu.txt"
}
cpu_ticks() { awk '{print $14 "," $15}' "/proc/$1/stat" 2>/dev/null || echo 0,0; }
relays() { # relays LABEL BINARY [BUSY_NODES BUSY_POLL]: the relays, then measure through them
  local label=$1 rb=$2 busy_nodes=${3:-} busy=${4:-} rpids=() i extra
  for i in 1 2 3; do
    extra=()
    [[ " $busy_nodes " == *" $i "* ]] && extra=(--busy-poll "$busy")
    bg "n$i" "$tmp/$label-relay$i.log" "$rb" relay --interface "10.78.1$i.2" --peers "$(peers $i)" \
      --group $G --group $R --group $S --json "$tmp/$label-relay$i.json" "${extra[@]}"
    rpids+=("${pids[-1]}")
  done
  for i in 1 2 3; do wait_for "$tmp/$label-relay$i.log" "relay listening"; done
  serves n2 10.78.12.2 n3 10.78.13.2 "$label"
  measured "$label" "$(only "$label")" "${rpids[@]}"
  stop_all
  [ -n "$(only "$label")" ] && return 0
  echo "$label: relay on node 1 (summary on stop):"; sed -n '/^relay [0-9a-f]* on/,$p' "$tmp/$label-relay1.log"
}
modes="native relay"
if [ -n "${BEFORE:-}" ]; then
  before=$(realpath "$BEFORE"); [ -x "$before" ] || { echo "no BEFORE binary at $BEFORE" >&2; exit 2; }
  modes="$modes before"
fi
[ -n "${BUSY_POLL:-}" ] && modes="$modes busy"

# The floor: floor.c on each node carrying G and R (what the ping needs), same topology;
# "floor" with a thread per socket in a blocking recv, "floor1" with one thread and one epoll
# (wirebench relay's shape), "floor1r" that plus the relay's system calls (RX timestamps and
# recvmmsg on the group sockets, sendmmsg), "floor1+PART" floor1 with one of those or with a
# timeout on every wait (FLOOR_PARTS; floor.c --relay-like).
floors() { # floors LABEL BINARY [--epoll]
  local label=$1 fb=$2 fpids=() i j args
  for i in 1 2 3; do
    args=(${3:-})
    args+=("10.78.1$i.2" "$i" 7900 "$G,$R")
    for j in 1 2 3; do [ "$j" != "$i" ] && args+=("$j=10.78.1$j.2"); done
    bg "n$i" "$tmp/$label$i.log" "$fb" "${args[@]}"
    fpids+=("${pids[-1]}")
  done
  for i in 1 2 3; do wait_for "$tmp/$label$i.log" "floor listening"; done
  serves n2 10.78.12.2 n3 10.78.13.2 "$label"
  measured "$label" ping "${fpids[@]}"
  stop_all
}
if command -v gcc >/dev/null; then
  gcc -O2 -pthread -o "$tmp/floor" bench/relay-floor/floor.c
  modes="$modes floor floor1 floor1r"
  for part in ${FLOOR_PARTS:-}; do modes="$modes floor1+$part"; done
else
  echo "gcc not installed: the floor row is skipped"
fi

run_mode() { # run_mode MODE ROUND
  local l="$1@$2"
  case $1 in
    native) native "$l" ;;
    relay) relays "$l" "$wb" ;;
    before) relays "$l" "$before" ;;
    busy) relays "$l" "$wb" "${BUSY_NODES:-1}" "$BUSY_POLL" ;;
    floor) floors "$l" "$tmp/floor" ;;
    floor1) floors "$l" "$tmp/floor" --epoll ;;
    floor1r) floors "$l" "$tmp/floor" "--epoll --relay-like" ;;
    floor1+*) floors "$l" "$tmp/floor" "--epoll --relay-like=${1#floor1+}" ;;
  esac
}
read -ra order <<<"$modes"
for round in $(seq "$rounds"); do
  for k in "${!order[@]}"; do run_mode "${order[(k + round - 1) % ${#order[@]}]}" "$round"; done
done

have_n2n=0
if [ "${N2N:-1}" = 0 ]; then
  echo "N2N=0: the n2n column is skipped"
elif command -v edge >/dev/null && command -v supernode >/dev/null; then
  # Debian's n2n is v1.3 (no -E). Three things make multicast cross it:
  # - the supernode must be bound before the edges start: an edge whose first REGISTER
  #   meets a closed port is not registered for tens of seconds, and the supernode only
  #   broadcasts to registered edges (the old bench's node 1 never got a reply);
  # - edge -r: without it an edge drops every IP packet not addressed to its own n2n
  #   address ("Discarding routed packet [rcvd=239.255.78.1][expected=10.79.0.2]"), so
  #   every multicast datagram;
  # - edge -M 1500: the default TAP MTU is 1400, so a 1,400 B UDP payload (1,428 B IP)
  #   does not fit ("Message too long"); with 1500 the encapsulated frame is IP-fragmented
  #   on the 1,500 B underlay instead.
  # No -v: its per-frame logging would be measured too.
  bg rt "$tmp/supernode.log" supernode -l 7654; term+=("${pids[-1]}")
  for _ in $(seq 100); do [[ "$(x rt ss -Huln 'sport = :7654')" == *7654* ]] && break; sleep 0.1; done
  for i in 1 2 3; do
    bg "n$i" "$tmp/edge$i.log" edge -d n2n0 -a "10.79.0.$i" -s 255.255.255.0 -c wirebench -k benchkey \
      -l "10.78.1$i.1:7654" -r -M 1500
    term+=("${pids[-1]}")
  done
  up=1
  for i in 1 2 3; do
    # (not `ip | grep -q`: with pipefail, grep's early exit fails the pipeline)
    for _ in $(seq 100); do [[ "$(ip -n "$tag-n$i" addr show n2n0 2>/dev/null)" == *10.79.0.* ]] && break; sleep 0.1; done
    [[ "$(ip -n "$tag-n$i" addr show n2n0 2>/dev/null)" == *10.79.0.* ]] || up=0
  done
  if [ $up = 1 ]; then
    serves n2 10.79.0.2 n3 10.79.0.3 n2n@1
    # Every edge registered: two responders answer a short ping (up to 10 s).
    up=0
    for _ in $(seq 10); do
      if x n1 "$wb" ping $G --interface 10.79.0.1 --reply-group $R --responders 2 --count 20 --warmup 0 -q \
        >/dev/null 2>&1; then up=1; break; fi
      sleep 1
    done
    [ $up = 1 ] && measure n1 10.79.0.1 10.79.0.2 10.79.0.3 n2n@1 && have_n2n=1
  fi
  stop_all
  [ $have_n2n = 1 ] || { echo "n2n did not carry multicast: edge logs follow"; for f in "$tmp"/edge*.log "$tmp"/supernode.log; do echo "== $f"; tail -n 5 "$f"; done; }
else
  echo "n2n (edge, supernode) not installed: its column is skipped"
fi

python3 - "$tmp" "$have_n2n" "$modes" "$rounds" "$((pings + 1000))" "${STREAMS:-1}" <<'EOF'
import json, os, statistics, sys
tmp, have_n2n, rounds = sys.argv[1], sys.argv[2] == "1", int(sys.argv[4])
round_trips, streams = int(sys.argv[5]), sys.argv[6] != "0"
floors = [m for m in sys.argv[3].split() if m.startswith("floor")]
relay_modes = [m for m in sys.argv[3].split()[1:] if m not in floors]
modes = ["native"] + relay_modes + floors + (["n2n"] if have_n2n else [])
def ping(m, r):
    res = json.load(open(f"{tmp}/{m}@{r}-ping.json"))["results"]
    at = {p["p"]: p["ns"] for p in res["combined"]["summary"]["percentiles"]}
    return at, sum(x["lost"] for x in res["responders"]), len(res["responders"])
def best(m, size):
    f = f"{tmp}/{m}@1-stream-{size}.json"
    return json.load(open(f))["results"]["search"]["best_per_s"] if os.path.exists(f) else None
cell = lambda v, w: f"{v:>{w},.0f}" if v is not None else f"{'-':>{w}}"
med = statistics.median
runs = {m: [ping(m, r) for r in range(1, (1 if m == "n2n" else rounds) + 1)] for m in modes}
p = lambda m, q: med(at[q] for at, _, _ in runs[m])  # a row's median percentile, ns
added = lambda m, r: runs[m][r][0][50.0] - runs["native"][r][0][50.0]  # added p50 in round r, ns
cpu = lambda m, r=1: open(f"{tmp}/{m}@{r}-cpu.txt").read().split()
def per_trip(m):  # CPU of the three nodes' relays per round trip, µs: median of the rounds that only pinged
    rs = [r for r in range(1, rounds + 1) if r > 1 or not streams or m.startswith("floor")]
    if not rs:
        return "-"
    trip = lambda k: med(float(cpu(m, r)[k]) for r in rs) / round_trips * 1e6
    return f"{trip(3):.1f} µs ({trip(4):.1f} in user space)"
by_round = rounds > 1
print(f"\n{'':12} {'responders':>10} {'lost':>6} {'p50 µs':>8} {'p99 µs':>8} {'p99.9 µs':>9} {'64 B loss-free/s':>17} {'1400 B loss-free/s':>19}"
      + ("  p50 by round, µs" if by_round else ""))
for m in modes:
    lost, n = sum(x[1] for x in runs[m]), runs[m][0][2]
    line = (f"{m:12} {n:>10} {lost:>6} {p(m, 50.0)/1e3:>8.1f} {p(m, 99.0)/1e3:>8.1f} {p(m, 99.9)/1e3:>9.1f}"
            f" {cell(best(m, 64), 17)} {cell(best(m, 1400), 19)}")
    if by_round and m != "n2n":
        line += "  " + " ".join(f"{at[50.0]/1e3:.1f}" for at, _, _ in runs[m])
    print(line)
print()
print(f"native multicast: p50 {p('native', 50.0)/1e3:.1f} µs, p99 {p('native', 99.0)/1e3:.1f} µs"
      + (f" (medians of {rounds} rounds)" if by_round else ""))
what = {"floor": "a thread per socket", "floor1": "one thread, one epoll", "floor1r": "one epoll, the relay's system calls"}
def adds(m):
    a = [added(m, r) / 1e3 for r in range(rounds)]
    return f"{med(a):.1f} µs" + (f" (by round {' '.join(f'{x:.1f}' for x in a)})" if by_round else "")
for m in floors:
    desc = what.get(m, f"floor1 with --relay-like={m.removeprefix('floor1+')}")
    print(f"{m} (floor.c, {desc}): adds {adds(m)} p50 over native multicast;"
          f" its CPU while measured (nodes 1 2 3): {' '.join(c + '%' for c in cpu(m)[:3])} of one CPU,"
          f" {per_trip(m)} a round trip")
for m in relay_modes:
    print(f"{m}: adds {adds(m)} p50 over native multicast;"
          f" relays' CPU while measured (nodes 1 2 3): {' '.join(c + '%' for c in cpu(m)[:3])} of one CPU,"
          f" {per_trip(m)} a round trip")
    for f, goal in (("floor1", " (goal: at most 1.15x)"), ("floor1r", " (the same system calls)"), ("floor", "")):
        if f not in floors:
            continue
        ratios = [added(m, r) / added(f, r) if added(f, r) > 0 else float("inf") for r in range(rounds)]
        by = f" by round {' '.join(f'{x:.2f}' for x in ratios)}, median" if by_round else ""
        print(f"  {m} / {f}, added p50:{by} {med(ratios):.2f}x{goal}")
    if have_n2n and best(m, 64) is not None and best("n2n", 64) is not None:
        for size in (64, 1400):
            b = best("n2n", size)
            print(f"  {m} / n2n loss-free rate at {size} B: {best(m, size) / b if b else float('inf'):.2f}x (goal: at least 2x)")
if "before" in runs:
    line = f"relay after / before: added p50 {adds('relay')} / {adds('before')}"
    if best("relay", 64) is not None and best("before", 64) is not None:
        r = lambda size: best("relay", size) / best("before", size) if best("before", size) else float("inf")
        line += f", loss-free 64 B {r(64):.2f}x, 1400 B {r(1400):.2f}x"
    print(line)
if have_n2n:
    print(f"n2n p50 {p('n2n', 50.0)/1e3:.1f} µs")
print(f"load average at end: {' '.join(open('/proc/loadavg').read().split()[:3])}")
EOF

if [ -n "${PERF_SCHED:-}" ] && [ -n "${PERF_DIR:-}" ]; then
  echo
  echo "one pass through each node's relay or floor (first round; bench/relay-passes.py): from"
  echo "a wake-up of the process to the first task it wakes, µs, p50 p90"
  for m in $modes; do
    [ -f "$PERF_DIR/$m.sched" ] || continue
    perf script --ns -i "$PERF_DIR/$m.sched" -F comm,pid,tid,time,event,trace 2>/dev/null |
      python3 bench/relay-passes.py "$m" $(cat "$PERF_DIR/$m.pids")
  done
fi
