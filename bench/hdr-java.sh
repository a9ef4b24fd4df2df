#!/usr/bin/env bash
# wirebench's latency figures against HdrHistogram's own Java library (2.2.2, from Maven
# Central): a proxy run (its added-delay views) and three loopback ping runs (closed loop, open loop with both views, full-form probes with
# dwell and network views), each saved as JSON, .hgrm and .hlog; then bench/hdr-java/HdrCheck.java
# compares, value for value, every summary (count, min, max, mean, sd, each percentile) with
# getValueAtPercentile on the embedded histogram, the .hgrm file line for line with
# outputPercentileDistribution, and the .hlog's intervals with the main view.
# Needs java 11+ and mvn (to fetch the jar once). Not run in CI. Outputs in bench/out/hdr-java/.
#
#   bench/hdr-java.sh                                          # release build
#   WIREBENCH_BIN=target/debug/wirebench bench/hdr-java.sh     # no build
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/out/hdr-java
mkdir -p "$out"
version=2.2.2
jar=$HOME/.m2/repository/org/hdrhistogram/HdrHistogram/$version/HdrHistogram-$version.jar
if [ ! -f "$jar" ]; then
  mvn -q dependency:get -Dartifact=org.hdrhistogram:HdrHistogram:$version >/dev/null
fi

bin=${WIREBENCH_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release -q
  bin=target/release/wirebench
fi

"$bin" serve --listen 127.0.0.1:0 >"$out/serve.txt" 2>&1 &
serve_pid=$!
trap 'kill "$serve_pid" 2>/dev/null || true; wait "$serve_pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  target=$(grep -o '127\.0\.0\.1:[0-9]*' "$out/serve.txt" | head -1 || true)
  [ -n "$target" ] && break
  sleep 0.1
done
[ -n "$target" ] || { echo "serve did not start" >&2; exit 1; }

ps=50,90,99,99.9,99.99,99.999,12.5,33.3,100
runs=(
  "closed:--count 20000"
  "open:--rate 20k/s --duration 2s"
  "full:--count 10000 --size 48"
)
# A proxy run too (its added-delay views), with a ping through it.
"$bin" proxy --listen 127.0.0.1:0 --upstream "$target" --delay 500us --jitter 100us --duration 3s \
  --json "$out/proxy.json" >"$out/proxy-run.txt" 2>&1 &
proxy_pid=$!
for _ in $(seq 100); do
  via=$(grep -o 'udp 127\.0\.0\.1:[0-9]*' "$out/proxy-run.txt" | head -1 | cut -d' ' -f2 || true)
  [ -n "$via" ] && break
  sleep 0.1
done
[ -n "$via" ] || { echo "proxy did not start" >&2; exit 1; }
"$bin" ping "$via" --count 1000 --warmup 0 -q >/dev/null
wait "$proxy_pid"

status=0
check() {
  if java -cp "$jar" bench/hdr-java/HdrCheck.java "$@" >"${1%.json}-check.txt"; then
    tail -1 "${1%.json}-check.txt"
  else
    grep -E '^FAIL|^line|^  ' "${1%.json}-check.txt" || true
    tail -1 "${1%.json}-check.txt"
    status=1
  fi
}
echo "== proxy: added delay, both directions"
check "$out/proxy.json"
for r in "${runs[@]}"; do
  name=${r%%:*}
  # shellcheck disable=SC2086 # the flags are words
  "$bin" ping "$target" ${r#*:} --percentiles "$ps" -q \
    --json "$out/$name.json" --hgrm "$out/$name.hgrm" --hlog "$out/$name.hlog" >"$out/$name.txt"
  echo "== $name: $(head -1 "$out/$name.txt")"
  check "$out/$name.json" "$out/$name.hgrm" "$out/$name.hlog"
done
exit $status
