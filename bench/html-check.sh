#!/usr/bin/env bash
# The suite's HTML in a real browser: runs `wirebench suite` into a temporary folder, opens
# wirebench-report/index.html in headless Chromium (Debian's `chromium`, installed if
# missing), and checks that
#   - every <svg> chart has data: a 2-px data polyline with points, or point markers;
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
chromium "${flags[@]}" --screenshot="$out/index.png" --window-size=1280,2000 "$url" >/dev/null 2>>"$out/chromium.log"

python3 - "$out/dom.html" "$out/chromium.log" "$out/index.png" <<'PY'
import re, sys
from html.parser import HTMLParser

dom_path, log_path, png_path = sys.argv[1:4]

class Charts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.charts = []  # per <svg>: [data polylines with points, markers]
        self.depth = 0
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.depth += 1
            if self.depth == 1:
                self.charts.append([0, 0])
        elif self.depth and tag == "polyline" and a.get("stroke-width") == "2":
            if re.search(r"\d+,\d+", a.get("points", "")):
                self.charts[-1][0] += 1
        elif self.depth and tag == "circle":
            self.charts[-1][1] += 1
    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag == "svg":
            self.depth -= 1
    def handle_endtag(self, tag):
        if tag == "svg":
            self.depth -= 1

dom = open(dom_path, encoding="utf-8").read()
p = Charts()
p.feed(dom)
problems = []
if "<section class=\"run\"" not in dom:
    problems.append("the DOM has no run sections (did the page render?)")
if not p.charts:
    problems.append("no charts in the DOM")
for i, (lines, markers) in enumerate(p.charts, 1):
    if lines == 0 and markers == 0:
        problems.append(f"chart {i} has no data")
console = [l for l in open(log_path, encoding="utf-8", errors="replace") if "CONSOLE" in l]
problems += [f"console: {l.strip()}" for l in console]
with open(png_path, "rb") as f:
    if f.read(8) != b"\x89PNG\r\n\x1a\n":
        problems.append("no PNG screenshot")
print(f"html-check: {len(p.charts)} charts, "
      f"{sum(c[0] for c in p.charts)} data lines, {sum(c[1] for c in p.charts)} markers, "
      f"{len(console)} console messages; screenshot {png_path}")
for pr in problems:
    print(f"html-check: FAIL {pr}")
sys.exit(1 if problems else 0)
PY
