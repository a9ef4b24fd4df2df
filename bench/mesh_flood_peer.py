#!/usr/bin/env python3
"""A mesh peer's TCP side that answers every connection with valid probe frames, without end
(bounded by a deadline). Prints the bytes the prober took when it stops."""
import socket, struct, sys, threading, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
frame = struct.pack(">HBBHBx", 0x5742, 1, 1, 64, 0) + struct.pack(">Q", 0xf100d) + bytes(48)
chunk = frame * 1024
written = [0]
end = time.time() + seconds
def feed(c):
    c.settimeout(0.2)
    while time.time() < end:
        try:
            written[0] += c.send(chunk)
        except socket.timeout:
            pass
        except OSError:
            return
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("127.0.0.1", port)); ls.listen(64); ls.settimeout(0.2)
conns = 0
while time.time() < end:
    try:
        c, _ = ls.accept()
    except socket.timeout:
        continue
    conns += 1
    threading.Thread(target=feed, args=(c,), daemon=True).start()
print(f"flood: {written[0]} bytes taken over {conns} connections", flush=True)
