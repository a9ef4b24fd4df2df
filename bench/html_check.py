#!/usr/bin/env python3
"""Checks the charts of a wirebench HTML page (the DOM headless Chromium rendered, or the
page itself: it has no scripts). Used by bench/html-check.sh; CI runs both.

Every chart is an inline <svg> drawn by plotters: data lines are 2-px <polylines>, trial
markers <circle>s, and the axis labels are <text>s (the y label rotated). A chart fails when
  - it has no data at all;
  - a data line has fewer than 2 points, or all its points at one x (a single interval, or
    intervals that all carry the same time);
  - on a linear axis, a data line lies entirely on zero, except on a loss chart (no loss is
    a result);
  - on a percentile distribution (x: percentile), a data line is constant: the latency of a
    real run varies, so a flat distribution is a rendering of nothing.

  bench/html_check.py PAGE.html [CHROMIUM.log PNG]   check a page (and the console and PNG)
  bench/html_check.py --self-test                    the rules on fixtures, including the
                                                     suite's page as the first release wrote
                                                     it (its stream charts had one point)
"""
import gzip
import os
import re
import sys
from html.parser import HTMLParser

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "html-check")


class Chart:
    def __init__(self):
        self.texts = []  # (text, rotated)
        self.lines = []  # [[(x, y), ...], ...]
        self.markers = 0
        self.grid_bottom = None  # the plot area's bottom edge (largest y of vertical grid lines)

    def title(self):
        return self.texts[0][0] if self.texts else "?"

    def y_label(self):
        return next((t for t, rotated in self.texts if rotated), "")

    def x_label(self):
        plain = [t for t, rotated in self.texts if not rotated]
        return plain[1] if len(plain) > 1 else ""


class Charts(HTMLParser):
    def __init__(self):
        super().__init__()
        self.charts = []
        self.depth = 0
        self.in_text = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self.depth += 1
            if self.depth == 1:
                self.charts.append(Chart())
            return
        if not self.depth:
            return
        c = self.charts[-1]
        if tag == "polyline" and a.get("stroke-width") == "2":
            pts = [tuple(int(float(v)) for v in p.split(",")) for p in a.get("points", "").split() if "," in p]
            c.lines.append(pts)
        elif tag == "circle":
            c.markers += 1
        elif tag == "line" and a.get("x1") == a.get("x2") and a.get("y1") and a.get("y2"):
            bottom = max(int(float(a["y1"])), int(float(a["y2"])))
            c.grid_bottom = bottom if c.grid_bottom is None else max(c.grid_bottom, bottom)
        elif tag == "text":
            self.in_text = ["", "rotate(" in a.get("transform", "")]

    def handle_data(self, data):
        if self.in_text is not None:
            self.in_text[0] += data

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag == "svg":
            self.depth -= 1

    def handle_endtag(self, tag):
        if tag == "svg":
            self.depth -= 1
        elif tag == "text" and self.in_text is not None:
            if self.depth:
                self.charts[-1].texts.append((self.in_text[0].strip(), self.in_text[1]))
            self.in_text = None


def problems_of(chart):
    """The problems of one chart, as lines naming it."""
    out = []
    name = chart.title()
    if not chart.lines and not chart.markers:
        return [f"{name}: no data"]
    linear = "log scale" not in chart.y_label()
    loss = "loss" in chart.y_label()
    distribution = chart.x_label() == "percentile"
    for i, pts in enumerate(chart.lines, 1):
        what = f"{name}: line {i}"
        if len(pts) < 2:
            out.append(f"{what} has {len(pts)} point(s)")
            continue
        if len({x for x, _ in pts}) < 2:
            out.append(f"{what}: all {len(pts)} points at one x")
            continue
        ys = {y for _, y in pts}
        if linear and not loss and chart.grid_bottom is not None and ys <= {chart.grid_bottom}:
            out.append(f"{what}: every point is zero")
        if distribution and len(ys) < 2:
            out.append(f"{what}: a constant distribution")
    return out


def check_page(html):
    p = Charts()
    p.feed(html)
    problems = []
    if '<section class="run"' not in html:
        problems.append("the page has no run sections (did it render?)")
    if not p.charts:
        problems.append("no charts")
    for c in p.charts:
        problems += problems_of(c)
    return p.charts, problems


def main(argv):
    html = open(argv[0], encoding="utf-8").read()
    charts, problems = check_page(html)
    console = []
    if len(argv) > 1:
        console = [l.strip() for l in open(argv[1], encoding="utf-8", errors="replace") if "CONSOLE" in l]
        problems += [f"console: {l}" for l in console]
    if len(argv) > 2:
        with open(argv[2], "rb") as f:
            if f.read(8) != b"\x89PNG\r\n\x1a\n":
                problems.append("no PNG screenshot")
    lines = sum(len(c.lines) for c in charts)
    points = sum(len(l) for c in charts for l in c.lines)
    markers = sum(c.markers for c in charts)
    print(f"html-check: {len(charts)} charts, {lines} data lines ({points} points), {markers} markers, "
          f"{len(console)} console messages")
    for pr in problems:
        print(f"html-check: FAIL {pr}")
    return 1 if problems else 0


def svg(title, y_label, x_label, lines, markers=0, bottom=325):
    """A chart as plotters draws it, reduced to what the check reads."""
    parts = [f'<svg width="880" height="380"><text x="1" y="1">{title}</text>',
             f'<text x="1" y="1" transform="rotate(270, 12, 181)">{y_label}</text>',
             f'<text x="1" y="1">{x_label}</text>',
             f'<line opacity="0.1" stroke="#000000" stroke-width="1" x1="76" y1="{bottom}" x2="76" y2="37"/>']
    for pts in lines:
        joined = " ".join(f"{x},{y}" for x, y in pts)
        parts.append(f'<polyline fill="none" stroke-width="2" points="{joined} "/>')
    parts += ['<circle cx="1" cy="1" r="4"/>'] * markers
    return "".join(parts) + "</svg>"


def self_test():
    page = lambda *charts: '<section class="run">' + "".join(charts) + "</section>"
    good = [
        svg("a: throughput", "Mbit/s", "seconds", [[(100, 200), (300, 180), (500, 190)]]),
        svg("a: loss", "loss (%)", "seconds", [[(100, 325), (300, 325), (500, 325)]]),
        svg("a: latency by percentile", "latency (us), log scale", "percentile", [[(76, 300), (500, 250), (867, 40)]]),
        svg("b: rate search", "messages/s offered", "trial", [], markers=1),
        svg("c: messages per second", "messages/s", "seconds", [[(100, 100), (300, 100), (500, 100)]]),
    ]
    bad = {
        svg("d: throughput", "Mbit/s", "seconds", [[(867, 64)]]): "line 1 has 1 point(s)",
        svg("d: throughput", "Mbit/s", "seconds", [[(867, 64), (867, 70)]]): "all 2 points at one x",
        svg("d: throughput", "Mbit/s", "seconds", [[(100, 325), (500, 325)]]): "every point is zero",
        svg("d: latency by percentile", "latency (us)", "percentile", [[(76, 90), (867, 90)]]): "a constant distribution",
        svg("d: empty", "Mbit/s", "seconds", []): "no data",
    }
    failures = []
    _, p = check_page(page(*good))
    if p:
        failures.append(f"good charts were refused: {p}")
    for chart, want in bad.items():
        _, p = check_page(page(*good, chart))
        if len(p) != 1 or want not in p[0]:
            failures.append(f"expected one problem with '{want}', got {p}")
    # The suite's page from the first release (commit c350fc6): the six stream interval
    # charts had one point each (at 0 for loss); everything else had data.
    recorded = os.path.join(FIXTURES, "suite-c350fc6.html.gz")
    with gzip.open(recorded, "rt", encoding="utf-8") as f:
        charts, p = check_page(f.read())
    want = {f"{s}: {k}: line 1 has 1 point(s)" for s in ("stream-udp-1468", "stream-udp-64", "stream-tcp")
            for k in ("throughput", "loss")}
    if set(p) != want or len(charts) != 17:
        failures.append(f"the recorded suite page: expected {sorted(want)}, got {p} ({len(charts)} charts)")
    for f in failures:
        print(f"html-check self-test: FAIL {f}")
    print(f"html-check self-test: {len(bad) + 2 - len(failures)} of {len(bad) + 2} cases as expected")
    return 1 if failures else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    if not 1 <= len(sys.argv) - 1 <= 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1:]))
