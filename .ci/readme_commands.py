#!/usr/bin/env python3
"""Runs every command README.md shows and fails if one exits non-zero or prints a number
that cannot be right. CI runs it (.ci/run) as root, with the binary it built:

    .ci/readme_commands.py target/debug/wirebench [README.md]
    .ci/readme_commands.py --self-test        # the impossible-number rules on made-up output

How. Every line of a fenced block that reads `HOST$ wirebench ...` or `$ cargo run ... --
...` is a command, run in README order. HOST is a network namespace of a lab on one bridge
(10.77.170.0/24), where `hostA`, `hostB`, ... resolve by /etc/netns/NS/hosts, so commands run
as written; `$` alone is this host (loopback). What the lab cannot run as written is changed
by the tables below, each entry with its reason, and anything else runs verbatim (an
`export NAME=VALUE` line sets NAME for that host's later commands): a new
README example either works here or needs a line in a table. Long runs are shortened
(SHORTER), servers run in the background until the end (SERVERS), a few commands are not run
(SKIP), some are run first (SETUP) or undone after (UNDO).

Bounded: a measuring command (ping, stream, load) as written must end on its own within
BUDGET_S (a count, a duration, or a search), so a reader who copies it gets an end.

Impossible numbers (checked in each command's output, and in its JSON report, which is
written to a file of its own when the command writes none):
  - a loss percentage below 0 or above 100;
  - "received X of Y sent" with X > Y (per receiver), a ping responder that received more
    replies than probes were sent, a proxy that delivered more than arrived;
  - a received (or proxy-achieved) bit rate above the lab link (each host's eth0 sends
    through a 1 Gbit/s tbf), for a command whose traffic crossed it.
"""
import glob
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time

# ---- the lab -----------------------------------------------------------------------------
SUBNET = "10.77.170"
HOSTS = {"hostA": 1, "hostB": 2, "hostC": 3, "gw": 4}
LINK_BPS = 1_000_000_000
LINK = "tbf rate 1gbit burst 256kb latency 50ms"

# ---- the tables --------------------------------------------------------------------------
# Not run: (command prefix as written, reason).
SKIP = [
    ("cargo test", "the test suite is CI's own last step"),
]
# Run before the README's commands: (host, command, reason).
SETUP = [
    ("hostC", "TOKEN=$(head -c 32 /dev/urandom | base64)", "one token for the lab's hosts, as a reader copies hostB's to the others"),
    ("hostC", 'wirebench serve --token "$TOKEN"', "the throughput block streams to hostC (with hostB's token) before the multicast block starts a serve there"),
]
# Commands that run until stopped: started in the background (ready at their first line),
# stopped with SIGINT at the end, or when the same host starts another of the same kind
# (the README's second `serve` on hostB replaces the first, as a user would).
SERVERS = {"serve", "room", "proxy"}
# Shorter runs, per subcommand: flag -> (cap, reason). A cap is the largest value kept
# (counts) or the value used (durations); `add` is appended when none of `unless` is there.
SHORTER = {
    # A lost probe costs the whole timeout (1 s): through the README's lossy proxy that is
    # most of the run, so the timeout is 200 ms unless the example sets one.
    "ping": {
        "--count": 1000,
        "--duration": "1s",
        "add": (["--count", "1000"], ["--count", "--duration"]),
        "add2": (["--timeout", "200ms"], ["--timeout"]),
    },
    "stream": {
        "--count": 20000,
        "--duration": "1s",
        "add": (["--duration", "1s"], ["--count", "--duration", "--find-max-rate"]),
    },
    "load": {
        "--clients": 500,
        "--duration": "2s",
        "--ramp": "500ms",
        "add": (["--duration", "2s"], ["--duration"]),
    },
    "suite": {"add": (["--scale", "0.1"], ["--scale"])},
}
SHORTER_WHY = "README examples run for seconds to minutes; CI has 15 minutes for everything"
# --find-max-rate's trials, shortened the same way.
TRIAL = ["--trial", "200ms"]
# Undone after the run: `shape tc --dev DEV --apply` is followed, at the end, by
# `shape tc --dev DEV --clear` (shaping stays on the device until cleared).
# Modes that write a JSON report with --json (added when the command has none).
JSON_MODES = {"ping", "stream", "load", "proxy"}

BIN = None
WORK = None
# `HOST$ export NAME=VALUE` lines: the variables each host's later commands run with.
ENV = {}
# `HOST$ NAME=VALUE` lines (shell variables, `$(...)` evaluated by bash): `$NAME` in later
# commands on any host, as a reader copies a value from one host to the next. The first
# value stays (the lab's hosts share SETUP's token); a later line is still evaluated.
VARS = {}
ASSIGN = re.compile(r"^([A-Z_][A-Z0-9_]*)=(.+?)\s*(#.*)?$")


def expand(arg):
    """`$NAME` and `${NAME}` of VARS in one argument."""
    return re.sub(r"\$\{?([A-Z_][A-Z0-9_]*)\}?", lambda m: VARS.get(m.group(1), m.group(0)), arg)
TAG = f"wbrd{os.getpid()}"


def sh(*args, check=True):
    r = subprocess.run(args, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise SystemExit(f"readme-check: {' '.join(args)}: {r.stderr.strip()}")
    return r


def ns(host):
    return f"{TAG}-{host}"


def lab_up():
    sw = ns("sw")
    sh("ip", "netns", "add", sw)
    sh("ip", "-n", sw, "link", "add", "br0", "type", "bridge")
    sh("ip", "-n", sw, "link", "set", "br0", "up")
    hosts = "\n".join(f"{SUBNET}.{i} {h}" for h, i in HOSTS.items())
    for h, i in HOSTS.items():
        n = ns(h)
        sh("ip", "netns", "add", n)
        sh("ip", "-n", n, "link", "set", "lo", "up")
        sh("ip", "link", "add", "eth0", "netns", n, "type", "veth", "peer", "name", f"p{i}", "netns", sw)
        sh("ip", "-n", n, "addr", "add", f"{SUBNET}.{i}/24", "dev", "eth0")
        sh("ip", "-n", n, "link", "set", "eth0", "up")
        sh("ip", "-n", sw, "link", "set", f"p{i}", "master", "br0")
        sh("ip", "-n", sw, "link", "set", f"p{i}", "up")
        sh("ip", "netns", "exec", n, "tc", "qdisc", "add", "dev", "eth0", "root", *LINK.split())
        # As on a host whose default route leads to its network: multicast finds eth0 without
        # --interface (a serve's stream session joins the group this way).
        sh("ip", "-n", n, "route", "add", "224.0.0.0/4", "dev", "eth0")
        os.makedirs(f"/etc/netns/{n}", exist_ok=True)
        with open(f"/etc/netns/{n}/hosts", "w") as f:
            f.write(f"127.0.0.1 localhost\n{hosts}\n")
    # gw shapes its eth1 (`shape tc --dev eth1`): a second link, to a namespace of its own.
    far = ns("far")
    sh("ip", "netns", "add", far)
    sh("ip", "link", "add", "eth1", "netns", ns("gw"), "type", "veth", "peer", "name", "eth0", "netns", far)
    sh("ip", "-n", ns("gw"), "link", "set", "eth1", "up")


def lab_down():
    for h in [*HOSTS, "sw", "far"]:
        sh("ip", "netns", "del", ns(h), check=False)
        if os.path.isdir(f"/etc/netns/{ns(h)}"):
            for f in os.listdir(f"/etc/netns/{ns(h)}"):
                os.remove(f"/etc/netns/{ns(h)}/{f}")
            os.rmdir(f"/etc/netns/{ns(h)}")


def commands(readme):
    """(host or None, argv) for every command line in a fenced block, in order."""
    out, fenced = [], False
    for line in open(readme, encoding="utf-8"):
        if line.startswith("```"):
            fenced = not fenced
            continue
        m = re.match(r"^(\w*)\$ (.+)$", line.rstrip("\n")) if fenced else None
        if m:
            out.append((m.group(1) or None, m.group(2), shlex.split(m.group(2), comments=True)))
    return out


def skipped(text):
    return next((why for prefix, why in SKIP if text.startswith(prefix)), None)


def to_binary(argv):
    """`cargo run --release -- ARGS` and `wirebench ARGS` as the binary under test."""
    if argv[:2] == ["cargo", "run"] and "--" in argv:
        return [BIN, *argv[argv.index("--") + 1:]]
    if argv[0] == "wirebench":
        return [BIN, *argv[1:]]
    raise SystemExit(f"readme-check: not a wirebench command: {' '.join(argv)} (add it to SKIP with a reason)")


# Every measuring command the README shows ends on its own, within this as written (a reader
# copies it; CI then shortens it, SHORTER): it gives a count or a duration, or a search
# with its own trial budget.
BUDGET_S = 120
BOUNDED = {
    "ping": ("--count", "--duration"),
    "stream": ("--count", "--duration", "--find-max-rate"),
    "load": ("--duration",),
}


def seconds(span):
    """A duration flag's value in seconds (`30s`, `2m`, `500ms`), None if unreadable."""
    m = re.fullmatch(r"([\d.]+)(ms|s|m|h)", span)
    if not m:
        return None
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def unbounded(argv):
    """Why a README command as written would not end within BUDGET_S, or None."""
    mode = argv[1] if len(argv) > 1 else ""
    bounds = BOUNDED.get(mode)
    if bounds is None:
        return None
    given = [b for b in bounds if b in argv]
    if not given:
        return f"`{mode}` without {' or '.join(bounds)} runs for its default length: give one"
    total = 0.0
    for flag in ("--duration", "--ramp"):
        if flag in argv and argv.index(flag) + 1 < len(argv):
            s = seconds(argv[argv.index(flag) + 1])
            if s is None:
                return f"{flag} {argv[argv.index(flag) + 1]}: not a duration this check reads"
            total += s
    if total > BUDGET_S:
        return f"runs {total:.0f} s as written, over the README's budget of {BUDGET_S} s"
    return None


def shorten(argv):
    mode = argv[1]
    rules = SHORTER.get(mode, {})
    out, i = [argv[0], mode], 2
    while i < len(argv):
        a = argv[i]
        if a in rules and i + 1 < len(argv):
            cap, value = rules[a], argv[i + 1]
            if isinstance(cap, int):
                value = str(min(int(value), cap))
            else:
                value = cap
            out += [a, value]
            i += 2
            continue
        out.append(a)
        i += 1
    for key in ("add", "add2"):
        add, unless = rules.get(key, ([], []))
        if add and not any(u in argv for u in unless):
            out += add
    if mode == "stream" and "--find-max-rate" in argv and "--trial" not in argv:
        out += TRIAL
    return out


def drain(p, into):
    """Keeps reading a server's output so it never blocks on a full pipe."""
    for stream in (p.stdout, p.stderr):
        threading.Thread(target=lambda s=stream: into.extend(s), daemon=True).start()


def globbed(argv):
    """Shell globs expanded in the working folder, as a shell would (kept when nothing matches)."""
    out = []
    for a in argv:
        hits = sorted(os.path.relpath(h, WORK) for h in glob.glob(os.path.join(WORK, a))) if "*" in a else []
        out += hits or [a]
    return out


def run_in(host, argv, **kw):
    argv = globbed(argv)
    full = argv if host is None else ["ip", "netns", "exec", ns(host), *argv]
    env = {**os.environ, **ENV.get(host, {})}
    return subprocess.Popen(full, cwd=WORK, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def rates_bps(text):
    """Every `N Gbit/s`, `N mbit/s`, ... in the text, in bit/s."""
    mult = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}
    return [float(v) * mult[u.lower()] for v, u in re.findall(r"(\d+(?:\.\d+)?) ?([kKmMgG]?)bit/s", text)]


def impossible(text, report, crossed_link):
    out = []
    for v in re.findall(r"loss (-?\d+(?:\.\d+)?)%", text):
        if not 0 <= float(v) <= 100:
            out.append(f"loss {v}%")
    for got, sent in re.findall(r"received (\d+) of (\d+) sent", text):
        if int(got) > int(sent):
            out.append(f"received {got} of {sent} sent")
    if crossed_link:
        # What arrived (a receiver, the proxy's achieved side) crossed the link; what a sender
        # handed its kernel need not have (a full qdisc drops multicast without slowing it).
        # A search's trial line gives the rate sent, then the counts: what arrived is that
        # rate times received / sent (a flat-out trial may hand its kernel 1.5 Gbit/s).
        lines = text.splitlines()
        trials = [l for l in lines if "trial at" in l]
        arrived = "\n".join(l for l in lines if ("received" in l or "achieved" in l) and l not in trials)
        rates = rates_bps(arrived)
        for l in trials:
            m = re.search(r"\(\s*([\d.]+ ?[kKmMgG]?bit/s)\): sent\s+(\d+) received\s+(\d+)", l)
            if m and int(m.group(2)) > 0:
                rates += [r * int(m.group(3)) / int(m.group(2)) for r in rates_bps(m.group(1))]
        out += [f"{r / 1e9:.3f} Gbit/s arrived over a 1 Gbit/s link" for r in rates if r > LINK_BPS * 1.05]
    res = (report or {}).get("results", {})
    mode = res.get("mode")
    if mode == "ping":
        for r in res.get("responders", []):
            if r["received"] > res["sent"] or r["lost"] > res["sent"]:
                out.append(f"ping {r['addr']}: received {r['received']}, lost {r['lost']} of {res['sent']} sent")
    elif mode == "stream":
        for r in res.get("receivers", []):
            if r["total"]["received"] > r["sent"] > 0:
                out.append(f"stream {r['addr']}: received {r['total']['received']} of {r['sent']} sent")
    elif mode == "proxy":
        for d in ("up", "down"):
            a = res[d]["achieved"]
            if a["packets_out"] > a["packets_in"] or not 0 <= a["loss_pct"] <= 100:
                out.append(f"proxy {d}: {a['packets_out']} delivered of {a['packets_in']}, loss {a['loss_pct']}%")
    elif mode == "load":
        if res["received"] > res["sent"] * max(res["room_size"], 1):
            out.append(f"load: received {res['received']} > sent {res['sent']} x room size {res['room_size']}")
    return out


def self_test():
    """The impossible-number rules on made-up output, each case once right and once wrong."""
    ping = lambda received, lost: {"results": {"mode": "ping", "sent": 100, "responders": [
        {"addr": "b", "received": received, "lost": lost}]}}
    stream = lambda received: {"results": {"mode": "stream", "receivers": [
        {"addr": "b", "sent": 100, "total": {"received": received}}]}}
    cases = [
        ("b: received 90 of 100 sent (10 missing, loss 10.0000%), 80.4k msg/s 944.2 Mbit/s", None, True, 0),
        ("b: received 90 of 100 sent (10 missing, loss 100.5000%)", None, False, 1),
        ("b: received 101 of 100 sent (0 missing, loss 0.0000%)", None, False, 1),
        ("b: received 90 of 100 sent, 80.4k msg/s 1.2 Gbit/s", None, True, 1),
        ("b: received 90 of 100 sent, 80.4k msg/s 1.2 Gbit/s", None, False, 0),
        ("sender: sent 1140348 messages, 1.141M msg/s 13.39 Gbit/s (UDP GSO)", None, True, 0),
        ("  trial at            max (  1.460 Gbit/s): sent     570000 received     285000 loss  50.0000%  FAIL", None, True, 0),
        ("  trial at            max (  1.460 Gbit/s): sent     570000 received     570000 loss   0.0000%  pass", None, True, 1),
        ("", ping(90, 10), False, 0),
        ("", ping(101, 0), False, 1),
        ("", stream(100), False, 0),
        ("", stream(120), False, 1),
    ]
    bad = [(t, r, c, n, impossible(t, r, c)) for t, r, c, n in cases if len(impossible(t, r, c)) != n]
    for t, r, c, n, got in bad:
        print(f"readme-check self-test: FAIL {t!r} {r} crossed={c}: expected {n} problem(s), got {got}")
    bounds = [
        ("wirebench ping hostB:7878", True),
        ("wirebench ping hostB:7878 --count 1000", False),
        ("wirebench stream hostB:7878 --size 64 --find-max-rate", False),
        ("wirebench stream hostB:7878 --duration 30m", True),
        ("wirebench load ws://b/r --preset collab-ide", True),
        ("wirebench load ws://b/r --duration 60s --ramp 10s", False),
        ("wirebench load ws://b/r --duration 2m --ramp 10s", True),
        ("wirebench serve", False),
    ]
    wrong = [(c, w) for c, w in bounds if (unbounded(shlex.split(c)) is not None) != w]
    for c, w in wrong:
        print(f"readme-check self-test: FAIL {c!r}: expected {'unbounded' if w else 'bounded'}")
    n = len(cases) + len(bounds)
    print(f"readme-check self-test: {n - len(bad) - len(wrong)} of {n} cases as expected")
    return 1 if bad or wrong else 0


def main():
    global BIN, WORK
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if os.geteuid() != 0:
        raise SystemExit("readme-check: needs root (network namespaces)")
    if self_test() != 0:
        return 1
    BIN = os.path.abspath(sys.argv[1])
    readme = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "README.md")
    WORK = tempfile.mkdtemp(prefix="readme-check-")
    servers, failures, undo, ran = {}, [], [], 0
    t0 = time.monotonic()
    try:
        lab_up()  # inside the try: a lab that fails half-way up is still taken down
        for h, c, why in SETUP:
            print(f"readme-check: setup {h}$ {c}  ({why})")
        steps = [(h, c, shlex.split(c)) for h, c, _ in SETUP] + commands(readme)
        for host, text, argv in steps:
            why = skipped(text)
            if why:
                print(f"readme-check: skip  {text}  ({why})")
                continue
            m = ASSIGN.match(text)
            if m:
                # `$(wirebench token)` runs the binary under test, as the reader's PATH would.
                path = f"{os.path.dirname(BIN)}:{os.environ.get('PATH', '')}"
                r = subprocess.run(["bash", "-c", f"{m.group(1)}={m.group(2)}; printf %s \"${m.group(1)}\""],
                                   capture_output=True, text=True, env={**os.environ, "PATH": path})
                if r.returncode != 0 or not r.stdout:
                    failures.append(f"{host or 'local'}$ {text}: no value ({r.stderr.strip()})")
                    continue
                VARS.setdefault(m.group(1), r.stdout)
                print(f"readme-check: var   {host or 'local'}$ {m.group(1)}=... ({len(r.stdout)} characters)")
                continue
            argv = [expand(a) for a in argv]
            if argv[0] == "export":
                for a in argv[1:]:
                    name, _, value = a.partition("=")
                    ENV.setdefault(host, {})[name] = value
                print(f"readme-check: env   {host or 'local'}$ {' '.join(argv)}")
                continue
            why = unbounded(argv)
            if why:
                failures.append(f"{host or 'local'}$ {text}: {why}")
            argv = shorten(to_binary(argv))
            mode = argv[1]
            shown = " ".join(shlex.quote(a) for a in [os.path.basename(argv[0]), *argv[1:]])
            where = host or "local"
            if mode in SERVERS:
                old = servers.pop((host, mode), None)
                if old:
                    old.send_signal(signal.SIGINT)
                    old.wait(10)
                p = run_in(host, argv)
                line = p.stdout.readline()
                if not line:
                    failures.append(f"{where}$ {shown}: exited before it was ready: {p.stderr.read().strip()}")
                    continue
                servers[(host, mode)] = p
                drain(p, [])
                print(f"readme-check: start {where}$ {shown}")
                continue
            report_path = None
            if mode in JSON_MODES and "--json" not in argv:
                report_path = os.path.join(WORK, f"check-{ran}.json")
                argv = [*argv, "--json", report_path]
            elif "--json" in argv:
                report_path = os.path.join(WORK, argv[argv.index("--json") + 1])
            p = run_in(host, argv)
            try:
                out, err = p.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
                failures.append(f"{where}$ {shown}: still running after 120 s")
                continue
            ran += 1
            if mode == "shape" and "--apply" in argv and "--dev" in argv:
                undo.append((host, [argv[0], "shape", "tc", "--dev", argv[argv.index("--dev") + 1], "--clear"]))
            print(f"readme-check: {'ok   ' if p.returncode == 0 else 'FAIL '} {where}$ {shown}  (exit {p.returncode})")
            if p.returncode != 0:
                failures.append(f"{where}$ {shown}: exit {p.returncode}: {(err.strip() or out.strip())[-400:]}")
                continue
            report = None
            if report_path and os.path.exists(report_path):
                with open(report_path, encoding="utf-8") as f:
                    report = json.load(f)
            crossed = host is not None and not any("127.0.0.1" in a or a == "suite" for a in argv)
            for problem in impossible(out + err, report, crossed):
                failures.append(f"{where}$ {shown}: impossible: {problem}")
    finally:
        for p in servers.values():
            p.send_signal(signal.SIGINT)
        for (host, mode), p in servers.items():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                failures.append(f"{host}$ {mode}: did not stop within 10 s of Ctrl-C")
                continue
            if p.returncode != 0:
                failures.append(f"{host}$ {mode}: exit {p.returncode} on Ctrl-C")
        for host, argv in undo:
            r = run_in(host, argv)
            out, err = r.communicate()
            print(f"readme-check: undo  {host}$ {' '.join(argv[1:])}  (exit {r.returncode})")
            if r.returncode != 0:
                failures.append(f"{host}$ {' '.join(argv[1:])}: the undo failed: {err.strip()}")
        lab_down()
    took = time.monotonic() - t0
    print(f"readme-check: {ran} commands run, {len(failures)} failed, {took:.0f} s")
    for f in failures:
        print(f"readme-check: FAIL {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
