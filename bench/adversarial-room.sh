#!/usr/bin/env bash
# Floods, stalls and slow clients against `wirebench room`, before and
# after: each attack starts its own room on loopback from the binary given, prints one
# figure, and stops it. The room's part of the adversarial suite (bench/adversarial.sh is
# serve's); the parts that run in seconds are crates/wirebench/tests/it/room.rs.
#
#   flock /tmp/bench.lock bench/adversarial-room.sh [AFTER_BINARY] [BEFORE_BINARY] [ATTACK...]
#
# AFTER_BINARY defaults to target/release/wirebench; BEFORE_BINARY (or $WB_BEFORE) is a build
# of the code before the hardening (e.g. `git worktree add /tmp/before c350fc6` and build it
# there); without one, only the "after" column is printed. Needs python3 and prlimit. Takes
# about a minute per binary; figures move with machine load: run it alone.
set -euo pipefail
cd "$(dirname "$0")/.."
after=${1:-target/release/wirebench}
before=${2:-${WB_BEFORE:-}}
shift $(( $# > 2 ? 2 : $# ))
attacks=("$@")
if [ ${#attacks[@]} -eq 0 ]; then
  attacks=(plain-http big-frames never-reads hogs slowloris emfile-spin idle sigint-stalled)
fi
[ -x "$after" ] || { echo "no binary at $after (cargo build --release)" >&2; exit 2; }
echo "wirebench room under attack, $(date -u +%FT%TZ), $(nproc) CPUs, loopback, load $(cut -d' ' -f1 /proc/loadavg)"
echo "after:  $after"
[ -n "$before" ] && echo "before: $before"
echo
printf '%-16s | %-80s | %s\n' attack before after
printf '%s\n' "$(printf -- '-%.0s' {1..200})"
for a in "${attacks[@]}"; do
  fb="-"
  [ -n "$before" ] && fb=$(python3 bench/adversarial_room.py "$before" "$a")
  fa=$(python3 bench/adversarial_room.py "$after" "$a")
  printf '%-16s | %-80s | %s\n' "$a" "$fb" "$fa"
done
left=$(pgrep -f "room --listen 127.0.0.1:0 --interval 0s" || true)
[ -z "$left" ] || { echo "left behind: $left" >&2; exit 1; }
