#!/usr/bin/env bash
# Floods, stalls and soaks against `wirebench serve`, before and after: each attack
# starts its own serve on loopback from the binary given, prints one figure, and stops it.
#
#   flock /tmp/bench.lock bench/adversarial.sh [AFTER_BINARY] [BEFORE_BINARY] [ATTACK...]
#
# AFTER_BINARY defaults to target/release/wirebench; BEFORE_BINARY (or $WB_BEFORE) is a build
# of the code before the hardening (e.g. `git worktree add /tmp/before c350fc6` and build it
# there); without one, only the "after" column is printed. Needs python3 and prlimit. Takes
# about two minutes per binary; figures move with machine load: run it alone.
set -euo pipefail
cd "$(dirname "$0")/.."
after=${1:-target/release/wirebench}
before=${2:-${WB_BEFORE:-}}
shift $(( $# > 2 ? 2 : $# ))
attacks=("$@")
if [ ${#attacks[@]} -eq 0 ]; then
  attacks=(tiny-rate-sigint stalled-header-sigint deaf-echo-sigint one-byte-forward-sigint zero-rate-bypass
           anonymous-reverse named-port megabyte-headers forward-windows idle-lockout emfile-spin udp-flood soak)
fi
[ -x "$after" ] || { echo "no binary at $after (cargo build --release)" >&2; exit 2; }
echo "wirebench serve under attack, $(date -u +%FT%TZ), $(nproc) CPUs, loopback"
echo "after:  $after ($("$after" --version 2>/dev/null || echo ?))"
[ -n "$before" ] && echo "before: $before"
echo
printf '%-24s | %-70s | %s\n' attack before after
printf '%s\n' "$(printf -- '-%.0s' {1..180})"
for a in "${attacks[@]}"; do
  fb="-"
  [ -n "$before" ] && fb=$(python3 bench/adversarial.py "$before" "$a")
  fa=$(python3 bench/adversarial.py "$after" "$a")
  printf '%-24s | %-70s | %s\n' "$a" "$fb" "$fa"
done
left=$(pgrep -f "wirebench serve --listen 127.0.0.1:0" || true)
[ -z "$left" ] || { echo "left behind: $left" >&2; exit 1; }
