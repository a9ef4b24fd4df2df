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
x() { local n=$1; shift; ip netns exec "$tag-$n" "$@"; }
veth() { # veth NS_A IF_A ADDR_A NS_B IF_B [ADDR_B]
  ip link add "$2" netns "$tag-$1" type veth peer name "$5" netns "$tag-$4"
  ip -n "$tag-$1" addr add "$3" dev "$2"; ip -n "$tag-$1" link set "$2" up
  [ -n "${6:-}" ] && ip -n "$tag-$4" addr add "$6" dev "$5"
  ip -n "$tag-$4" link set "$5" up
}
bg() { # bg NS LOG CMD...: start in a namespace, remember the pid
  local n=$1 log=$2; shift 2
  ip netns exec "$tag-$n" "$@" >"$log" 2>&1 &
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
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (figures taken while others build are noisy)"

serves h2 10.78.1.2 h3 10.78.1.3 native
measure h1 10.78.1.1 10.78.1.2 10.78.1.3 native
stop_all

peers() { local out=(); for j in 1 2 3; do [ "$j" != "$1" ] && out+=("10.78.1$j.2:7880"); done; (IFS=,; echo "${out[*]}"); }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
relays() { # relays LABEL BINARY [BUSY_NODES BUSY_POLL]: the relays, then measure through them
  local label=$1 rb=$2 busy_nodes=${3:-} busy=${4:-} rpids=() t0 c0=() i extra
  for i in 1 2 3; do
    extra=()
    [[ " $busy_nodes " == *" $i "* ]] && extra=(--busy-poll "$busy")
    bg "n$i" "$tmp/$label-relay$i.log" "$rb" relay --interface "10.78.1$i.2" --peers "$(peers $i)" \
      --group $G --group $R --group $S --json "$tmp/$label-relay$i.json" "${extra[@]}"
    rpids+=("${pids[-1]}")
  done
  for i in 1 2 3; do wait_for "$tmp/$label-relay$i.log" "relay listening"; done
  serves n2 10.78.12.2 n3 10.78.13.2 "$label"
  t0=$(date +%s.%N); for p in "${rpids[@]}"; do c0+=("$(cpu_ticks "$p")"); done
  measure n1 10.78.11.2 10.78.12.2 10.78.13.2 "$label"
  # Each relay's CPU while measured, in % of one CPU (utime + stime from /proc).
  python3 -c 'import os,sys; t=float(sys.argv[1]); hz=os.sysconf("SC_CLK_TCK"); w=float(sys.argv[2])-t
print(" ".join(f"{(int(b)-int(a))/hz/w*100:.0f}" for a,b in zip(sys.argv[3:6], sys.argv[6:9])))' \
    "$t0" "$(date +%s.%N)" "${c0[@]}" $(for p in "${rpids[@]}"; do cpu_ticks "$p"; done) >"$tmp/$label-cpu.txt"
  stop_all
  echo "$label: relay on node 1 (summary on stop):"; sed -n '/^relay [0-9a-f]* on/,$p' "$tmp/$label-relay1.log"
}
relays relay "$wb"
modes="native relay"
if [ -n "${BEFORE:-}" ]; then
  before=$(realpath "$BEFORE"); [ -x "$before" ] || { echo "no BEFORE binary at $BEFORE" >&2; exit 2; }
  relays before "$before"; modes="$modes before"
fi
if [ -n "${BUSY_POLL:-}" ]; then relays busy "$wb" "${BUSY_NODES:-1}" "$BUSY_POLL"; modes="$modes busy"; fi

# The floor: floor.c on each node carrying G and R (what the ping needs), same topology;
# "floor" with a thread per socket in a blocking recv, "floor1" with one thread and one epoll
# (wirebench relay's shape), "floor1r" that plus the relay's system calls (RX timestamps and
# recvmmsg on the group sockets, sendmmsg, a 100 ms epoll timeout).
floors() { # floors LABEL BINARY [--epoll]
  local label=$1 fb=$2 fpids=() t0 c0=() i j args
  for i in 1 2 3; do
    args=(${3:-})
    args+=("10.78.1$i.2" "$i" 7900 "$G,$R")
    for j in 1 2 3; do [ "$j" != "$i" ] && args+=("$j=10.78.1$j.2"); done
    bg "n$i" "$tmp/$label$i.log" "$fb" "${args[@]}"
    fpids+=("${pids[-1]}")
  done
  for i in 1 2 3; do wait_for "$tmp/$label$i.log" "floor listening"; done
  serves n2 10.78.12.2 n3 10.78.13.2 "$label"
  t0=$(date +%s.%N); for p in "${fpids[@]}"; do c0+=("$(cpu_ticks "$p")"); done
  measure n1 10.78.11.2 10.78.12.2 10.78.13.2 "$label" ping
  python3 -c 'import os,sys; t=float(sys.argv[1]); hz=os.sysconf("SC_CLK_TCK"); w=float(sys.argv[2])-t
print(" ".join(f"{(int(b)-int(a))/hz/w*100:.0f}" for a,b in zip(sys.argv[3:6], sys.argv[6:9])))' \
    "$t0" "$(date +%s.%N)" "${c0[@]}" $(for p in "${fpids[@]}"; do cpu_ticks "$p"; done) >"$tmp/$label-cpu.txt"
  stop_all
}
if command -v gcc >/dev/null; then
  gcc -O2 -pthread -o "$tmp/floor" bench/relay-floor/floor.c
  floors floor "$tmp/floor"; floors floor1 "$tmp/floor" --epoll; floors floor1r "$tmp/floor" "--epoll --relay-like"
  modes="$modes floor floor1 floor1r"
else
  echo "gcc not installed: the floor row is skipped"
fi

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
    serves n2 10.79.0.2 n3 10.79.0.3 n2n
    # Every edge registered: two responders answer a short ping (up to 10 s).
    up=0
    for _ in $(seq 10); do
      if x n1 "$wb" ping $G --interface 10.79.0.1 --reply-group $R --responders 2 --count 20 --warmup 0 -q \
        >/dev/null 2>&1; then up=1; break; fi
      sleep 1
    done
    [ $up = 1 ] && measure n1 10.79.0.1 10.79.0.2 10.79.0.3 n2n && have_n2n=1
  fi
  stop_all
  [ $have_n2n = 1 ] || { echo "n2n did not carry multicast: edge logs follow"; for f in "$tmp"/edge*.log "$tmp"/supernode.log; do echo "== $f"; tail -n 5 "$f"; done; }
else
  echo "n2n (edge, supernode) not installed: its column is skipped"
fi

python3 - "$tmp" "$have_n2n" "$modes" <<'EOF'
import json, os, sys
tmp, have_n2n = sys.argv[1], sys.argv[2] == "1"
floors = [m for m in sys.argv[3].split() if m.startswith("floor")]
relay_modes = [m for m in sys.argv[3].split()[1:] if m not in floors]
floor = "floor" in floors
modes = ["native"] + relay_modes + floors + (["n2n"] if have_n2n else [])
def ping(m):
    r = json.load(open(f"{tmp}/{m}-ping.json"))["results"]
    c = r["combined"]["summary"]
    at = {p["p"]: p["ns"] for p in c["percentiles"]}
    lost = sum(x["lost"] for x in r["responders"])
    return at, lost, len(r["responders"])
def best(m, size):
    f = f"{tmp}/{m}-stream-{size}.json"
    return json.load(open(f))["results"]["search"]["best_per_s"] if os.path.exists(f) else None
cell = lambda v, w: f"{v:>{w},.0f}" if v is not None else f"{'-':>{w}}"
rows = {}
print(f"\n{'':8} {'responders':>10} {'lost':>6} {'p50 µs':>8} {'p99 µs':>8} {'p99.9 µs':>9} {'64 B loss-free/s':>17} {'1400 B loss-free/s':>19}")
for m in modes:
    at, lost, n = ping(m)
    b64, b1400 = best(m, 64), best(m, 1400)
    rows[m] = (at, b64, b1400)
    print(f"{m:8} {n:>10} {lost:>6} {at[50.0]/1e3:>8.1f} {at[99.0]/1e3:>8.1f} {at[99.9]/1e3:>9.1f} {cell(b64, 17)} {cell(b1400, 19)}")
n50 = rows["native"][0][50.0]
f_add = rows["floor"][0][50.0] - n50 if floor else None
print()
print(f"native multicast: p50 {n50/1e3:.1f} µs, p99 {rows['native'][0][99.0]/1e3:.1f} µs")
for m, what in (("floor", "a thread per socket"), ("floor1", "one thread, one epoll"),
                ("floor1r", "one epoll, the relay's system calls")):
    if m not in floors:
        continue
    cpu = open(f"{tmp}/{m}-cpu.txt").read().split()
    print(f"{m} (floor.c, {what}): adds {(rows[m][0][50.0] - n50)/1e3:.1f} µs p50 over native multicast"
          f" (the relay's goal: at most 30 µs); its CPU while measured (nodes 1 2 3): {' '.join(c + '%' for c in cpu)} of one CPU")
for m in relay_modes:
    r50 = rows[m][0][50.0]
    cpu = open(f"{tmp}/{m}-cpu.txt").read().split()
    print(f"{m}: adds {(r50 - n50)/1e3:.1f} µs p50 over native multicast (goal: at most 30 µs; ratio {r50/n50:.2f}x);"
          f" relays' CPU while measured (nodes 1 2 3): {' '.join(c + '%' for c in cpu)} of one CPU")
    if floor:
        ratio = (r50 - n50) / f_add if f_add > 0 else float("inf")
        print(f"  {m} / floor, added p50: {(r50 - n50)/1e3:.1f} / {f_add/1e3:.1f} µs = {ratio:.2f}x")
    if have_n2n and rows[m][1] is not None and rows["n2n"][1] is not None:
        for i, size in ((1, 64), (2, 1400)):
            ratio = rows[m][i] / rows["n2n"][i] if rows["n2n"][i] else float("inf")
            print(f"  {m} / n2n loss-free rate at {size} B: {ratio:.2f}x (goal: at least 2x)")
if "before" in rows:
    b, a = rows["before"], rows["relay"]
    line = f"relay after / before: added p50 {(a[0][50.0] - n50)/1e3:.1f} / {(b[0][50.0] - n50)/1e3:.1f} µs"
    if a[1] is not None and b[1] is not None:
        line += (f", loss-free 64 B {a[1]/b[1] if b[1] else float('inf'):.2f}x,"
                 f" 1400 B {a[2]/b[2] if b[2] else float('inf'):.2f}x")
    print(line)
if have_n2n:
    print(f"n2n p50 {rows['n2n'][0][50.0]/1e3:.1f} µs")
print(f"load average at end: {' '.join(open('/proc/loadavg').read().split()[:3])}")
EOF
