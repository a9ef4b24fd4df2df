#!/usr/bin/env python3
"""Attacks on `wirebench serve` for bench/adversarial.sh: each starts a serve from the binary
given, attacks it, prints one figure, and stops it. Speaks control version 1 (before the
hardening) and 2 (after), picked by what the serve answers. Loopback only; every loop is
bounded in count and time.

usage: adversarial.py BINARY ATTACK   (ATTACK: see ATTACKS at the bottom)
"""

import atexit
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

MAGIC = b"\x57\x42"


def frame(obj, version):
    body = json.dumps(obj, separators=(",", ":")).encode()
    return MAGIC + bytes([version, 4]) + struct.pack(">I", len(body)) + body


def read_frame(s, timeout=5.0):
    s.settimeout(timeout)
    h = b""
    while len(h) < 8:
        b = s.recv(8 - len(h))
        if not b:
            raise EOFError("closed")
        h += b
    n = struct.unpack(">I", h[4:8])[0]
    body = b""
    while len(body) < n:
        b = s.recv(n - len(body))
        if not b:
            raise EOFError("closed")
        body += b
    return json.loads(body)


CHILDREN = []
atexit.register(lambda: [c.kill() for c in CHILDREN])


class Serve:
    """A serve child on 127.0.0.1 with an ephemeral port (killed at exit whatever happens)."""

    def __init__(self, binary, *extra, prefix=()):
        argv = list(prefix) + [binary, "serve", "--listen", "127.0.0.1:0"] + list(extra)
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        CHILDREN.append(self)
        line = self.p.stdout.readline()
        m = re.search(r"127\.0\.0\.1:(\d+)", line)
        if not m:
            raise RuntimeError(f"no address in {line!r}")
        self.port = int(m.group(1))
        self.addr = ("127.0.0.1", self.port)
        # v1 serves accept any flag they know; a v2 serve prints a second line.
        self.version = None

    def wire(self):
        """Control version this serve speaks: 2 answers a hello, 1 closes on it."""
        if self.version is None:
            s = socket.create_connection(self.addr)
            s.sendall(frame({"type": "hello", "nonce": "00" * 16}, 2))
            try:
                read_frame(s, 2.0)
                self.version = 2
            except (EOFError, OSError):
                self.version = 1
            s.close()
        return self.version

    def rss_kib(self):
        for line in open(f"/proc/{self.p.pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def vsz_kib(self):
        for line in open(f"/proc/{self.p.pid}/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1])
        return 0

    def cpu_ticks(self):
        stat = open(f"/proc/{self.p.pid}/stat").read()
        f = stat[stat.rfind(")") + 2 :].split()
        return int(f[11]) + int(f[12])

    def sigint_exit_s(self, limit=10.0):
        """Seconds from SIGINT to exit; `limit` then SIGKILL (reported as '>limit')."""
        t = time.monotonic()
        self.p.send_signal(signal.SIGINT)
        try:
            self.p.wait(limit)
            return f"{time.monotonic() - t:.3f} s"
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            return f">{limit:.0f} s (hung; SIGKILL)"

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def start(srv, req, knock_from=None):
    """Asks for a stream the way this serve's version wants; returns (conn, answer)."""
    s = socket.create_connection(srv.addr)
    if srv.wire() == 1:
        r = dict(req, type="start", token=None)
        if knock_from is not None:
            r["client_port"] = knock_from.getsockname()[1]
        s.sendall(frame(r, 1))
        return s, read_frame(s)
    s.sendall(frame({"type": "hello", "nonce": "11" * 16}, 2))
    ch = read_frame(s)
    if ch.get("type") != "challenge":
        return s, ch
    r = dict(req, type="start")
    r.pop("client_port", None)
    s.sendall(frame(r, 2))
    m = read_frame(s)
    if m.get("type") == "knock" and knock_from is not None:
        k = MAGIC + bytes([2, 4]) + bytes.fromhex(m["secret"])
        knock_from.sendto(k, ("127.0.0.1", m["port"]))
        m = read_frame(s)
    return s, m


def req(direction="reverse", proto="udp", publishers=1, rate=None, size=1468, duration_s=60):
    return {
        "session": 7,
        "proto": proto,
        "size": size,
        "direction": direction,
        "publishers": publishers,
        "rate_per_s": rate,
        "duration_ns": int(duration_s * 1e9),
        "count": None,
        "client_port": None,
        "group": None,
    }


def drain_rate(sock, secs):
    """Bits per second arriving at `sock` over `secs`."""
    sock.settimeout(0.2)
    total, t = 0, time.monotonic()
    while time.monotonic() - t < secs:
        try:
            total += len(sock.recv(65536))
        except socket.timeout:
            pass
    return total * 8 / secs


def udp_rx():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    u.bind(("127.0.0.1", 0))
    return u


def mbit(bps):
    return f"{bps / 1e6:.1f} Mbit/s"


# --- attacks: each returns one figure as text ---------------------------------------------


def tiny_rate_then_sigint(b):
    """Reverse streams at 1e-5 msg/s (UDP and TCP); where that is refused, at the slowest
    rate the serve admits (1e-3)."""
    srv = Serve(b)
    u = udp_rx()
    conns = []
    for proto in ("udp", "tcp"):
        c, m = start(srv, req(proto=proto, rate=1e-5), u if proto == "udp" else None)
        if m.get("type") == "error":
            c, m = start(srv, req(proto=proto, rate=1e-3), u if proto == "udp" else None)
            m = dict(m, type="refused; 1e-3: " + m.get("type", "?"))
        conns.append((c, m))
    answers = ",".join(m.get("type") for _, m in conns)
    return f"SIGINT exit {srv.sigint_exit_s()} ({answers})"


def stalled_header_then_sigint(b):
    srv = Serve(b)
    s = socket.create_connection(srv.addr)
    # A whole header declaring 100 bytes, then 3 of them: the frame stalls part-way.
    s.sendall(MAGIC + bytes([srv.wire(), 4]) + struct.pack(">I", 100) + b'{"t')
    time.sleep(0.3)
    return f"SIGINT exit {srv.sigint_exit_s()}"


def deaf_echo_client_then_sigint(b):
    srv = Serve(b)
    s = socket.create_connection(srv.addr)
    p = bytearray(65507)
    p[0:8] = MAGIC + bytes([1, 1]) + struct.pack(">H", 65507) + b"\0\0"
    s.settimeout(0.5)
    for _ in range(200):
        try:
            s.sendall(p)
        except OSError:
            break
    return f"SIGINT exit {srv.sigint_exit_s()}"


def one_byte_forward_then_sigint(b):
    srv = Serve(b)
    s, m = start(srv, req(direction="forward", proto="tcp"))
    # After the data: the first bytes of a control frame (the finish), then nothing.
    s.sendall(MAGIC + bytes([srv.wire(), 4, 0]))
    time.sleep(0.3)
    return f"SIGINT exit {srv.sigint_exit_s()} (answer {m.get('type')})"


def zero_rate_bypasses_max_rate(b):
    srv = Serve(b, "--max-rate", "10mbit")
    u = udp_rx()
    c, m = start(srv, req(publishers=64, rate=0.0), u)
    got = drain_rate(u, 2.0)
    srv.kill()
    return f"{mbit(got)} received (cap 10 Mbit/s; answer {m.get('type')})"


def anonymous_reverse_default(b):
    """One anonymous `stream --reverse --parallel 8`, measured by the binary's own client."""
    srv = Serve(b, *(["--open"] if "--open" in HELP.get(b, "") else []))
    out = "/tmp/adv-reverse.json"
    subprocess.run(
        [b, "stream", f"127.0.0.1:{srv.port}", "--reverse", "--parallel", "8", "--duration", "3s", "-q", "--json", out],
        capture_output=True,
        timeout=60,
    )
    srv.kill()
    try:
        t = json.load(open(out))["results"]["receivers"][0]["total"]
        span = max(t["last_ns"] - t["first_ns"], 1)
        return f"{mbit(t['bytes'] * 8e9 / span)} received by one anonymous request"
    except (OSError, ValueError, KeyError, IndexError) as e:
        return f"error: {e}"


def reverse_to_a_named_port(b):
    srv = Serve(b)
    victim = udp_rx()
    mine = udp_rx()
    if srv.wire() == 1:
        c, m = start(srv, req(rate=1000.0), victim)  # v1: the client names the victim's port
    else:
        r = req(rate=1000.0)
        c, m = start(srv, r, None)  # v2: no knock from the victim's port: nothing is sent
    got = drain_rate(victim, 1.0)
    srv.kill()
    return f"{mbit(got)} at a port the client named ({m.get('type')})"


def declared_megabyte_headers(b):
    srv = Serve(b)
    base_v, base_r = srv.vsz_kib(), srv.rss_kib()
    socks = []
    for _ in range(500):
        s = socket.create_connection(srv.addr)
        s.sendall(MAGIC + bytes([srv.wire(), 4]) + struct.pack(">I", 1 << 20))
        socks.append(s)
    time.sleep(1.0)
    dv, dr = srv.vsz_kib() - base_v, srv.rss_kib() - base_r
    srv.kill()
    return f"500 headers declaring 1 MiB: +{dv / 1024:.0f} MiB virtual, +{dr / 1024:.0f} MiB RSS"


def forward_windows(b):
    srv = Serve(b, *(["--max-sessions-per-source", "64"] if "--max-sessions" in HELP.get(b, "") else []))
    base = srv.rss_kib()
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    held, admitted = [], 0
    for i in range(60):
        c, m = start(srv, dict(req(direction="forward", publishers=64, size=64), session=1000 + i))
        held.append(c)
        if m.get("type") != "ready":
            continue
        admitted += 1
        for p in range(64):
            for seq in (0, 1 << 21):  # a gap wider than the window: every word is written
                d = MAGIC + bytes([1, 3]) + struct.pack(">HHQQQ", 64, p, 1000 + i, seq, 0) + bytes(32)
                tx.sendto(d, ("127.0.0.1", m["data_port"]))
    time.sleep(1.5)
    grew = srv.rss_kib() - base
    srv.kill()
    return f"{admitted} of 60 sessions of 64 publishers admitted; RSS +{grew / 1024:.0f} MiB"


def idle_connections_lock_out_ping(b):
    srv = Serve(b)
    socks = []
    for _ in range(1100):
        try:
            socks.append(socket.create_connection(srv.addr))
        except OSError:
            break
    time.sleep(6.0)  # past the first-frame timeout (5 s), if there is one
    r = subprocess.run(
        [b, "ping", f"127.0.0.1:{srv.port}", "--proto", "tcp", "--count", "20", "-q"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    srv.kill()
    why = r.stderr.strip().splitlines()[-1][:90] if r.returncode else "ok"
    return f"TCP ping 6 s after 1100 idle connections: exit {r.returncode} ({why})"


def emfile_spin(b):
    srv = Serve(b, prefix=("prlimit", "--nofile=256:256"))
    socks = []
    for _ in range(600):
        try:
            socks.append(socket.create_connection(srv.addr, timeout=1))
        except OSError:
            break
    time.sleep(0.5)
    t0 = srv.cpu_ticks()
    time.sleep(2.0)
    cpu = (srv.cpu_ticks() - t0) / os.sysconf("SC_CLK_TCK") / 2.0 * 100
    srv.kill()
    return f"CPU {cpu:.0f} % of a core while out of descriptors ({len(socks)} clients)"


def udp_flood_ping_loss(b):
    srv = Serve(b)
    stop = threading.Event()

    def flood():
        f = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        junk = bytes(1400)
        n = 0
        while not stop.is_set() and n < 3_000_000:
            try:
                f.sendto(junk, srv.addr)
            except OSError:
                pass
            n += 1

    threads = [threading.Thread(target=flood) for _ in range(2)]
    for t in threads:
        t.start()
    r = subprocess.run(
        [b, "ping", f"127.0.0.1:{srv.port}", "--count", "2000", "--rate", "1k/s", "--json", "/tmp/adv-ping.json", "-q"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    stop.set()
    for t in threads:
        t.join()
    srv.p.send_signal(signal.SIGINT)
    out, _ = srv.p.communicate(timeout=10)
    lost = "?"
    try:
        lost = json.load(open("/tmp/adv-ping.json"))["results"]["responders"][0]["lost"]
    except (OSError, ValueError, KeyError, IndexError):
        lost = f"? (ping exit {r.returncode})"
    drops = re.search(r"(\d+) datagrams dropped by the kernel", out)
    return f"ping lost {lost} of 2000 under a flood; serve reports kernel drops: {drops.group(1) if drops else 'not reported'}"


def soak_garbage_and_churn(b):
    srv = Serve(b)
    g = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    r0 = srv.rss_kib()
    for _ in range(200_000):
        g.sendto(b"junk" * 10, srv.addr)
    for _ in range(2000):
        s = socket.create_connection(srv.addr)
        s.close()
    time.sleep(1.0)
    r1 = srv.rss_kib()
    exit_s = srv.sigint_exit_s()
    return f"RSS {r0 / 1024:.1f} -> {r1 / 1024:.1f} MiB after 200k junk datagrams and 2000 connections; exit {exit_s}"


ATTACKS = {
    "tiny-rate-sigint": tiny_rate_then_sigint,
    "stalled-header-sigint": stalled_header_then_sigint,
    "deaf-echo-sigint": deaf_echo_client_then_sigint,
    "one-byte-forward-sigint": one_byte_forward_then_sigint,
    "zero-rate-bypass": zero_rate_bypasses_max_rate,
    "anonymous-reverse": anonymous_reverse_default,
    "named-port": reverse_to_a_named_port,
    "megabyte-headers": declared_megabyte_headers,
    "forward-windows": forward_windows,
    "idle-lockout": idle_connections_lock_out_ping,
    "emfile-spin": emfile_spin,
    "udp-flood": udp_flood_ping_loss,
    "soak": soak_garbage_and_churn,
}

HELP = {}

if __name__ == "__main__":
    binary, attack = sys.argv[1], sys.argv[2]
    HELP[binary] = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True).stdout
    try:
        print(ATTACKS[attack](binary))
    except Exception as e:  # one attack's failure is a figure too
        print(f"error: {type(e).__name__}: {e}")
