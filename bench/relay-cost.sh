#!/usr/bin/env bash
# The relay's own cost per datagram, which the loss-free search (bench/relay.sh) shows only
# through a noisy search: two nodes routed through a router (no multicast routing), a relay on
# each, a serve on node 2 in the group; `wirebench stream --group` from node 1 at a fixed rate.
# Prints, for each binary: what the serve received, and each relay's CPU time per datagram
# (utime + stime from /proc, over the stream); with STRACE=1 also each relay's syscalls
# (`strace -c`, which slows the relays: the counts are what matters then, not the loss).
#
#   flock /tmp/bench.lock bench/relay-cost.sh [BINARY...]   # default target/release/wirebench
#
# RATE (default 20k/s), SIZE (64), SECS (3) size the stream. Needs root and iproute2.
set -euo pipefail
cd "$(dirname "$0")/.."
bins=("$@"); [ ${#bins[@]} -gt 0 ] || bins=(target/release/wirebench)
rate=${RATE:-20k/s}; size=${SIZE:-64}; secs=${SECS:-3}
tag="wbrc$$"; tmp=$(mktemp -d); pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for n in $(ip netns list | awk -v t="$tag" 'index($1, t) == 1 {print $1}'); do ip netns del "$n"; done
  rm -rf "$tmp"
}
trap cleanup EXIT
ns() { ip netns add "$tag-$1"; ip -n "$tag-$1" link set lo up; }
wait_for() { for _ in $(seq 100); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; cat "$1" >&2; exit 1; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

ns rt; ip netns exec "$tag-rt" sysctl -qw net.ipv4.ip_forward=1
for i in 1 2; do
  ns "n$i"
  ip link add "r$i" netns "$tag-rt" type veth peer name eth0 netns "$tag-n$i"
  ip -n "$tag-rt" addr add "10.78.3$i.1/24" dev "r$i"; ip -n "$tag-rt" link set "r$i" up
  ip -n "$tag-n$i" addr add "10.78.3$i.2/24" dev eth0; ip -n "$tag-n$i" link set eth0 up
  ip -n "$tag-n$i" route add default via "10.78.3$i.1"
done
S=239.255.78.9:5079
echo "relay cost: stream --group at $rate, $size B, ${secs}s, node 1 -> node 2; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for b in "${bins[@]}"; do
  wb=$(realpath "$b")
  ip netns exec "$tag-n1" "$wb" relay --interface 10.78.31.2 --peers 10.78.32.2 --group $S >"$tmp/r1.log" 2>&1 &
  pids+=($!); r1=$!
  ip netns exec "$tag-n2" "$wb" relay --interface 10.78.32.2 --peers 10.78.31.2 --group $S >"$tmp/r2.log" 2>&1 &
  pids+=($!); r2=$!
  ip netns exec "$tag-n2" "$wb" serve --listen 0.0.0.0:7878 --open --interface 10.78.32.2 >"$tmp/s.log" 2>&1 &
  pids+=($!)
  wait_for "$tmp/r1.log" "relay listening"; wait_for "$tmp/r2.log" "relay listening"; wait_for "$tmp/s.log" listening
  st=()
  if [ "${STRACE:-0}" = 1 ]; then
    strace -c -f -p "$r1" -o "$tmp/st1" 2>/dev/null & st+=($!)
    strace -c -f -p "$r2" -o "$tmp/st2" 2>/dev/null & st+=($!)
    sleep 0.5 # strace attaches
  fi
  c1=$(ticks "$r1"); c2=$(ticks "$r2")
  ip netns exec "$tag-n1" "$wb" stream 10.78.32.2:7878 --group $S --interface 10.78.31.2 --size "$size" \
    --rate "$rate" --duration "${secs}s" -q --json "$tmp/st.json" >/dev/null || true
  d1=$(( $(ticks "$r1") - c1 )); d2=$(( $(ticks "$r2") - c2 ))
  for p in "${st[@]}"; do kill -INT "$p"; wait "$p" || true; done
  python3 - "$tmp/st.json" "$d1" "$d2" "$b" <<'EOF'
import json, os, sys
r = json.load(open(sys.argv[1]))["results"]
sent = r["sender"]["messages"]
got = r["receivers"][0]["total"]["received"]
hz = os.sysconf("SC_CLK_TCK")
us = lambda t: int(t) / hz * 1e6 / max(sent, 1)
split = r["receivers"][0].get("loss_split") or {}
print(f"{sys.argv[4]}: sent {sent}, received {got} ({100 * (sent - got) / max(sent, 1):.1f} % lost);"
      f" CPU per datagram: relay 1 (forwards) {us(sys.argv[2]):.2f} µs, relay 2 (re-emits) {us(sys.argv[3]):.2f} µs")
print("  receiver's loss split:", ", ".join(f"{k} {v}" for k, v in split.items()))
EOF
  if [ "${STRACE:-0}" = 1 ]; then
    for i in 1 2; do echo "  relay $i syscalls:"; awk 'NR > 2 && $1 !~ /^-/ && $NF != "total" && NF >= 5 {printf "    %-14s %9s\n", $NF, $4}' "$tmp/st$i" | head -6; done
  fi
  for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
  # Where the rest went: each relay's kernel drops (full receive buffers) and its own drops.
  for i in 1 2; do
    echo "  relay $i: $(grep -h -E 'kernel drops|relay port' "$tmp/r$i.log" | sed -E 's/.*(drops: [^;]*; kernel drops [0-9]+).*/group \1/; s/.*relay port: (.*)/relay port: \1/' | paste -sd ' ' -)"
  done
done
