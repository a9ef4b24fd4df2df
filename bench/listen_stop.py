#!/usr/bin/env python3
"""How long `wirebench listen` takes to stop after Ctrl-C when it tracks many publishers.

    bench/listen_stop.py BINARY [PUBLISHERS] [-- LISTEN FLAGS...]

Starts `listen --max-publishers 65536` on loopback, sends one sequenced datagram for each of
PUBLISHERS (default 35000) sessions, then SIGINT, and prints the seconds from the signal to
the exit. The listener's text is read through a pipe, as a terminal would read it. Loopback only; bounded by its count.
"""
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

args = sys.argv[1:]
extra = args[args.index("--") + 1:] if "--" in args else []
args = args[: args.index("--")] if "--" in args else args
binary = args[0]
n = int(args[1]) if len(args) > 1 else 35000

rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rx.bind(("127.0.0.1", 0))
port = rx.getsockname()[1]
rx.close()
cmd = [binary, "listen", "--listen", f"127.0.0.1:{port}", "--max-publishers", "65536", "-t", "120s", *extra]
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
p.stdout.readline()  # "receiving on ...": the socket is bound
done = threading.Event()


def drain():
    # As a terminal would: read everything, so the listener never waits on a full pipe.
    while p.stdout.read(1 << 16):
        pass
    done.set()


threading.Thread(target=drain, daemon=True).start()
tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(n):
    # magic, version 1, kind 3 (stream data), size, publisher 0, session, sequence 0, time 0
    d = b"\x57\x42" + bytes([1, 3]) + struct.pack(">HHQQQ", 64, 0, 5000 + i, 0, 0) + bytes(32)
    tx.sendto(d, ("127.0.0.1", port))
    if i % 2000 == 1999:
        time.sleep(0.01)  # within the receive buffer
time.sleep(2)
t = time.monotonic()
p.send_signal(signal.SIGINT)
p.wait(timeout=60)
done.wait(timeout=60)
print(f"{n} publishers: stopped {time.monotonic() - t:.2f} s after SIGINT (exit {p.returncode})")
