#!/usr/bin/env python3
"""Attacks on `wirebench mesh agent` and `serve` (the agent's HTTP side, the token
handshake, per-source shares): each starts the binary given, attacks it on loopback, prints
one figure, and stops it. Other source addresses are 127.0.0.x. Every loop is bounded.

usage: adversarial_mesh.py BINARY ATTACK   (ATTACK: see ATTACKS at the bottom)
"""

import atexit
import re
import socket
import subprocess
import sys
import threading
import time

CHILDREN = []
atexit.register(lambda: [c.kill() for c in CHILDREN])


def agent(binary, *extra):
    argv = [binary, "mesh", "agent", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
            "--peers", "127.0.0.1:1", "--proto", "udp"] + list(extra)
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    CHILDREN.append(p)
    line = p.stdout.readline()
    probe = int(re.search(r"udp\+tcp 127\.0\.0\.1:(\d+)", line).group(1))
    http = int(re.search(r"http 127\.0\.0\.1:(\d+)", line).group(1))
    return p, probe, http


def conn(src, port, timeout=3.0):
    s = socket.socket()
    s.settimeout(timeout)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def ask(s, path, close):
    hdr = "Connection: close\r\n" if close else ""
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{hdr}\r\n".encode())
    got = b""
    while b"\r\n\r\n" not in got:
        b = s.recv(4096)
        if not b:
            return 0
        got += b
    head, body = got.split(b"\r\n\r\n", 1)
    m = re.search(rb"(?i)content-length:\s*(\d+)", head)
    n = int(m.group(1)) if m else 0
    while len(body) < n:
        b = s.recv(4096)
        if not b:
            break
        body += b
    return int(head.split()[1])


def hogs_then_probe(binary, sources):
    """64 keep-alive connections asking /healthz every 4 s (spread over `sources` addresses),
    while a kubelet asks /healthz on a new connection every 0.25 s for 12 s."""
    p, _, port = agent(binary)
    stop = time.monotonic() + 14
    def hog(i):
        src = f"127.0.0.{10 + i % sources}"
        while time.monotonic() < stop:
            try:
                s = conn(src, port)
                while time.monotonic() < stop:
                    if ask(s, "/healthz", False) != 200:
                        break
                    time.sleep(4)
            except OSError:
                time.sleep(0.2)
    threads = [threading.Thread(target=hog, args=(i,), daemon=True) for i in range(64)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    ok = tries = 0
    end = time.monotonic() + 12
    while time.monotonic() < end:
        tries += 1
        try:
            if ask(conn("127.0.0.3", port), "/healthz", True) == 200:
                ok += 1
        except OSError:
            pass
        time.sleep(0.25)
    p.kill()
    print(f"64 keep-alive hogs from {sources} source(s): healthz answered {ok} of {tries}")


def hogs_one_source(b):
    hogs_then_probe(b, 1)


def hogs_many_sources(b):
    hogs_then_probe(b, 16)


def offline_oracle(binary):
    """One `hello` to a serve with the token `hunter2`, then guesses tested offline against
    what serve answered (version 2 answered with its proof before the client's)."""
    import hashlib, hmac, json, struct
    weak = ["--weak-token"] if "--weak-token" in subprocess.run(
        [binary, "serve", "--help"], capture_output=True, text=True).stdout else []
    p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--token", "hunter2"] + weak,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    CHILDREN.append(p)
    port = int(re.search(r"127\.0\.0\.1:(\d+)", p.stdout.readline()).group(1))
    nc = "00" * 16
    got = None
    for version in (3, 2):
        s = socket.create_connection(("127.0.0.1", port))
        s.settimeout(3)
        body = json.dumps({"type": "hello", "nonce": nc}).encode()
        s.sendall(b"\x57\x42" + bytes([version, 4]) + struct.pack(">I", len(body)) + body)
        h = s.recv(8)
        n = struct.unpack(">I", h[4:8])[0]
        b = b""
        while len(b) < n:
            b += s.recv(n - len(b))
        msg = json.loads(b)
        if msg.get("type") == "challenge":
            got = (version, msg)
            break
    p.kill()
    version, msg = got
    proof = msg.get("proof")
    if not proof:
        print(f"control v{version}: the challenge carries no proof: nothing to test guesses against offline")
        return
    words = ["123456", "password", "letmein", "qwerty", "s3cret", "hunter2", "dragon"]
    for i, w in enumerate(words, 1):
        t = hmac.new(w.encode(), f"wirebench control v2 serve{nc}|{msg['nonce']}".encode(), hashlib.sha256)
        if t.hexdigest() == proof:
            print(f"control v{version}: token {w!r} found offline after {i} guesses from one hello")
            return
    print(f"control v{version}: not found in {len(words)} guesses")


def one_source_holds_connections(binary):
    """1,024 TCP connections to serve from 127.0.0.2, then `ping --proto tcp --count 20`
    from 127.0.0.1."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    p = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    CHILDREN.append(p)
    port = int(re.search(r"127\.0\.0\.1:(\d+)", p.stdout.readline()).group(1))
    held = []
    for _ in range(1024):
        try:
            held.append(conn("127.0.0.2", port))
        except OSError:
            break
    time.sleep(0.5)
    r = subprocess.run([binary, "ping", f"127.0.0.1:{port}", "--proto", "tcp", "--count", "20"],
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"(\d+)/(\d+) received|received (\d+)", r.stdout)
    line = next((l for l in r.stdout.splitlines() if "received" in l or "lost" in l), r.stderr.strip()[:120])
    p.kill()
    print(f"one source holding {len(held)} connections: tcp ping from another source: exit {r.returncode}: {line.strip()}")


ATTACKS = {f.__name__: f for f in [hogs_one_source, hogs_many_sources, offline_oracle, one_source_holds_connections]}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ATTACKS:
        sys.exit(f"usage: {sys.argv[0]} BINARY {{{'|'.join(ATTACKS)}}}")
    ATTACKS[sys.argv[2]](sys.argv[1])
