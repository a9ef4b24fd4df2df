#!/usr/bin/env bash
# The suite's HTML in a real browser: runs `wirebench suite` into a temporary folder, opens
# wirebench-report/index.html in headless Chromium (Debian's `chromium`, installed if
# missing), and checks (bench/html_check.py, which first tests its own rules on fixtures)
#   - every <svg> chart has data, and no series is degenerate: a line of one point or with
#     every point at one x, a line of zeros (loss charts excepted), a constant latency
#     distribution;
#   - the page logged nothing to the console (it has no scripts and fetches nothing, so any
#     console message is an error such as a failed load);
# then saves a screenshot. Artifacts (page, DOM, console log, screenshot) go to
# ${HTML_CHECK_OUT:-target/html-check}/. CI runs it with the debug binary (.ci/run).
#
#   bench/html-check.sh                                   # release build, SCALE=0.2
#   WIREBENCH_BIN=target/debug/wirebench bench/html-check.sh   # no build (as CI does)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${HTML_CHECK_OUT:-target/html-check}
scale=${SCALE:-0.2}

if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi

python3 bench/html_check.py --self-test

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
out=$(cd "$out" && pwd)

bin=${WIREBENCH_BIN:-}
if [ -z "$bin" ]; then
  cargo build --release -q
  bin=target/release/wirebench
fi
"$bin" suite --out "$work/wirebench-report" --scale "$scale" >"$out/suite.txt"
cp "$work/wirebench-report/index.html" "$out/index.html"
url="file://$out/index.html"

flags=(--headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking
  --disable-component-update --disable-sync --user-data-dir="$work/profile")
chromium "${flags[@]}" --enable-logging=stderr --v=0 --dump-dom "$url" >"$out/dom.html" 2>"$out/chromium.log"
chromium "${flags[@]}" --screenshot="$out/index.png" --window-size=1400,2000 "$url" >/dev/null 2>>"$out/chromium.log"

python3 bench/html_check.py "$out/dom.html" "$out/chromium.log" "$out/index.png"
