#!/usr/bin/env python3
"""Attacks on `wirebench room` for bench/adversarial-room.sh: each starts a room from the binary
given (under `prlimit` when the attack needs few descriptors), attacks it, prints one figure,
and stops it. Loopback only; every loop is bounded in count and time.

usage: adversarial_room.py BINARY ATTACK   (ATTACK: see ATTACKS at the bottom)
"""

import atexit
import base64
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time

CHILDREN = []
atexit.register(lambda: [c.kill() for c in CHILDREN])


class Room:
    """A room child on 127.0.0.1 with an ephemeral port (killed at exit whatever happens)."""

    def __init__(self, binary, *extra, nofile=None):
        prefix = ["prlimit", f"--nofile={nofile}:{nofile}"] if nofile else []
        argv = prefix + [binary, "room", "--listen", "127.0.0.1:0", "--interval", "0s"] + list(extra)
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        CHILDREN.append(self)
        line = self.p.stdout.readline()
        m = re.search(r"127\.0\.0\.1:(\d+)", line)
        if not m:
            raise SystemExit(f"room did not start: {line!r}")
        self.addr = ("127.0.0.1", int(m.group(1)))

    def rss_mb(self):
        with open(f"/proc/{self.p.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def cpu_s(self):
        with open(f"/proc/{self.p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self, within=10.0):
        """SIGINT; seconds until it exited (or None), and its last line."""
        t0 = time.monotonic()
        self.p.send_signal(signal.SIGINT)
        try:
            out, _ = self.p.communicate(timeout=within)
            return time.monotonic() - t0, (out.strip().splitlines() or [""])[-1]
        except subprocess.TimeoutExpired:
            self.kill()
            return None, ""

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


KEY = base64.b64encode(b"wirebench-attack").decode()


def handshake(addr, path="/rooms/a", timeout=5.0):
    s = socket.create_connection(addr, timeout=timeout)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              f"Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(4096)
        if not b:
            raise EOFError("closed during the handshake")
        head += b
    if not head.startswith(b"HTTP/1.1 101"):
        raise EOFError(head.split(b"\r\n")[0].decode(errors="replace"))
    return s


def frame(payload, opcode=1, declared=None):
    n = len(payload) if declared is None else declared
    b = bytes([0x80 | opcode])
    if n < 126:
        b += bytes([0x80 | n])
    elif n < 65536:
        b += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        b += bytes([0x80 | 127]) + struct.pack(">Q", n)
    mask = b"\x01\x02\x03\x04"
    return b + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(payload))


def read_frame(s):
    def exact(n):
        b = b""
        while len(b) < n:
            c = s.recv(n - len(b))
            if not c:
                raise EOFError("closed")
            b += c
        return b
    b0, b1 = exact(2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack(">H", exact(2))[0]
    elif n == 127:
        n = struct.unpack(">Q", exact(8))[0]
    return b0 & 0x0F, exact(n)


def joins(addr, timeout=5.0):
    """Can a real client join and hear a message? ms it took, or why not."""
    t0 = time.monotonic()
    try:
        a, b = handshake(addr, "/rooms/real", timeout), handshake(addr, "/rooms/real", timeout)
        a.sendall(frame(b'{"type":"hi"}'))
        op, p = read_frame(b)
        a.close()
        b.close()
        return f"a real client joins and hears in {(time.monotonic() - t0) * 1000:.0f} ms" if p == b'{"type":"hi"}' else "wrong message"
    except (OSError, EOFError) as e:
        return f"a real client cannot join ({type(e).__name__}: {e})"


def slowloris(binary):
    """5,000 connections that never finish their handshake, at 4,096 descriptors."""
    r = Room(binary, nofile=4096)
    held = []
    for _ in range(5000):
        try:
            s = socket.create_connection(r.addr, timeout=2)
            s.sendall(b"GET /rooms/x HTTP/1.1\r\nHost: x\r\n")
            held.append(s)
        except OSError:
            break
    c0 = r.cpu_s()
    time.sleep(2)
    cpu = (r.cpu_s() - c0) / 2 * 100
    verdict = joins(r.addr)
    rss = r.rss_mb()
    for s in held:
        s.close()
    r.stop()
    return f"{verdict}; room cpu {cpu:.0f}% of a core, rss {rss:.0f} MB"


def big_frames(binary):
    """40 members each send a 16 MiB frame but its last byte (the frame never completes)."""
    r = Room(binary)
    base = r.rss_mb()
    socks, chunk = [], b"x" * (1 << 20)
    for _ in range(40):
        s = handshake(r.addr)
        socks.append(s)
        try:
            s.sendall(frame(b"", 1, declared=16 << 20))
            for i in range(16):
                s.sendall(chunk if i < 15 else chunk[:-1])
        except OSError:
            pass  # closed on the header
    time.sleep(1)
    closed = 0
    for s in socks:
        s.settimeout(0.5)
        try:
            op, p = read_frame(s)
            closed += op == 8 and p[:2] == struct.pack(">H", 1009)
        except (OSError, EOFError):
            pass
    grew = r.rss_mb() - base
    for s in socks:
        s.close()
    r.stop()
    return f"rss +{grew:.0f} MB; {closed}/40 closed with 1009"


def never_reads(binary):
    """A member that never reads; another sends 200 MB in the largest messages the room takes."""
    r = Room(binary)
    sleeper = handshake(r.addr, "/rooms/slow")
    sleeper.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sender = handshake(r.addr, "/rooms/slow")
    size = 1 << 20 if "--max-message" not in subprocess.run([binary, "room", "--help"], capture_output=True, text=True).stdout else 16 << 10
    body = b'{"type":"big","pad":"' + b"x" * (size - 30) + b'"}'
    sent, peak = 0, 0.0
    try:
        while sent < 200 << 20:
            sender.sendall(frame(body))
            sent += len(body)
            peak = max(peak, r.rss_mb())
    except OSError:
        pass
    time.sleep(1)
    dropped = "dropped" if _closed(sleeper) else "still a member"
    rss = r.rss_mb()
    took, last = r.stop()
    slow = re.search(r"slow \(1013\) (\d+)", last)
    if slow:
        dropped += f" (room: {slow.group(1)} dropped as slow)"
    return f"peak rss {peak:.0f} MB, {rss:.0f} MB after; the sleeper is {dropped}; {sent >> 20} MB sent"


def hogs(binary):
    """8 members of one room never read; one member floods that room while 10 pairs chat in
    rooms of their own (messages of the same 16 KB), each reading promptly. With --member-backlog 4MiB --max-backlog 8MiB
    the total budget binds before any member's own. Who is dropped, and what it costs."""
    r = Room(binary, "--member-backlog", "4MiB", "--max-backlog", "8MiB")
    sleepers = []
    for _ in range(8):
        s = handshake(r.addr, "/rooms/hogs")
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sleepers.append(s)
    sender = handshake(r.addr, "/rooms/hogs")
    pairs = [(handshake(r.addr, f"/rooms/chat-{i}"), handshake(r.addr, f"/rooms/chat-{i}")) for i in range(10)]
    for _, b in pairs:
        b.settimeout(2.0)
    body = b'{"type":"big","pad":"' + b"x" * 16_000 + b'"}'
    peak, lost = 0.0, set()
    for n in range(2000):
        try:
            sender.sendall(frame(body))
        except OSError:
            break
        for i, (a, b) in enumerate(pairs):
            if i in lost:
                continue
            msg = b'{"type":"chat","n":%d,"pad":"%s"}' % (n, b"y" * 16_000)
            try:
                a.sendall(frame(msg))
                op, p = read_frame(b)
                while op == 9:  # the room's idle ping (b only reads): answer it
                    b.sendall(frame(p, 10))
                    op, p = read_frame(b)
                if op != 1 or p != msg:
                    lost.add(i)
            except (OSError, EOFError):
                lost.add(i)
        if n % 50 == 0:
            peak = max(peak, r.rss_mb())
    took, last = r.stop()
    slow = re.search(r"slow \(1013\) (\d+)", last)
    for s in sleepers + [sender] + [x for p in pairs for x in p]:
        s.close()
    return (f"{len(lost)}/10 chatting members dropped; room: {slow.group(1) if slow else '?'} dropped as slow "
            f"(8 never read); peak rss {peak:.0f} MB")


def _closed(s, within=10.0):
    """Has the room closed `s`? Reads what it had queued until EOF (bounded)."""
    deadline = time.monotonic() + within
    s.settimeout(1.0)
    try:
        while time.monotonic() < deadline:
            try:
                if not s.recv(1 << 20):
                    return True
            except socket.timeout:
                pass
        return False
    except OSError:
        return True


def plain_http(binary):
    """A browser's GET (not an upgrade), and junk."""
    r = Room(binary)
    out = []
    for req in [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\x16\x03\x01junk\r\n\r\n"]:
        s = socket.create_connection(r.addr, timeout=5)
        s.sendall(req)
        try:
            first = s.recv(4096).split(b"\r\n")[0].decode(errors="replace")
        except OSError as e:
            first = type(e).__name__
        out.append(first or "closed, no answer")
        s.close()
    r.stop()
    return " / ".join(out)


def emfile_spin(binary):
    """400 connections against 256 descriptors: does accept spin?"""
    r = Room(binary, nofile=256)
    held = []
    for _ in range(400):
        try:
            held.append(socket.create_connection(r.addr, timeout=1))
        except OSError:
            break
    c0 = r.cpu_s()
    time.sleep(3)
    cpu = (r.cpu_s() - c0) / 3 * 100
    verdict = joins(r.addr, timeout=3)
    for s in held:
        s.close()
    r.stop()
    return f"room cpu {cpu:.0f}% of a core while over the limit; {verdict}"


def idle(binary):
    """1,000 members that complete the handshake, then never send nor answer pings."""
    extra = ["--idle-timeout", "4s"] if "--idle-timeout" in subprocess.run(
        [binary, "room", "--help"], capture_output=True, text=True).stdout else []
    r = Room(binary, *extra)
    socks = [handshake(r.addr, f"/rooms/idle-{i % 200}") for i in range(1000)]
    time.sleep(10)
    closed = sum(_closed(s, within=0.5) for s in socks)
    for s in socks:
        s.close()
    r.stop()
    return f"{closed}/1000 closed after 10 s" + (" (--idle-timeout 4s)" if extra else " (no idle timeout)")


def sigint_stalled(binary):
    """SIGINT while a member's socket is full and its queue is not empty."""
    r = Room(binary)
    sleeper = handshake(r.addr, "/rooms/stall")
    sleeper.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sender = handshake(r.addr, "/rooms/stall")
    body = b'{"type":"x","pad":"' + b"x" * 8000 + b'"}'
    for _ in range(2000):
        try:
            sender.sendall(frame(body))
        except OSError:
            break
    took, _ = r.stop()
    return "did not exit within 10 s (killed)" if took is None else f"exited {took:.2f} s after SIGINT"


ATTACKS = {
    "slowloris": slowloris,
    "big-frames": big_frames,
    "never-reads": never_reads,
    "hogs": hogs,
    "plain-http": plain_http,
    "emfile-spin": emfile_spin,
    "idle": idle,
    "sigint-stalled": sigint_stalled,
}

if __name__ == "__main__":
    binary, attack = sys.argv[1], sys.argv[2]
    try:
        print(ATTACKS[attack](binary))
    except Exception as e:  # one figure per attack, whatever happens
        print(f"error: {type(e).__name__}: {e}")
