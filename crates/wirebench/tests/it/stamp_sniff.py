#!/usr/bin/env python3
"""Captures the STAMP packets on one interface and decodes each with an implementation
independent of wirebench: scapy's STAMP classes (scapy.contrib.stamp) for unauthenticated
packets; for authenticated ones (scapy has no classes for them) the RFC 8762 4.2.2/4.3.2
offsets read here, with the HMAC checked by Python's hmac module.

Usage: stamp_sniff.py IFACE PORT [HEXKEY]
Prints "ready" once capturing. Then reads from stdin the number of packets the run put on the
wire at least, waits until it has decoded that many (at most 30 s: the capture reads behind
the wire), and prints one JSON object per packet: dir ("sender" toward PORT, "reflector" from
it), len, ip_ttl and the fields, with timestamps as Unix ns.
"""
import hashlib
import hmac
import json
import select
import struct
import sys
import threading
from decimal import Decimal

from scapy.all import IP, UDP, AsyncSniffer
import scapy.contrib.stamp as stamp

NTP_UNIX = 2208988800


def err_dict(e):
    return {"S": int(e.S), "Z": int(e.Z), "scale": int(e.scale), "multiplier": int(e.multiplier)}


def ts_ns(value, z):
    """scapy gives NTP timestamps as decimal seconds since 1900, PTP ones as the raw 64 bits."""
    if z:
        raw = int(value)
        return (raw >> 32) * 10**9 + (raw & 0xFFFFFFFF)
    return int((Decimal(value) - NTP_UNIX) * 10**9)


def raw_ts_ns(raw, z):
    hi, lo = raw >> 32, raw & 0xFFFFFFFF
    if z:
        return hi * 10**9 + lo
    return (hi - NTP_UNIX) * 10**9 + (lo * 10**9 + (1 << 31) >> 32)


def raw_err(v):
    return {"S": v >> 15, "Z": (v >> 14) & 1, "scale": (v >> 8) & 0x3F, "multiplier": v & 0xFF}


def decode_unauth(payload, sender):
    if sender:
        p = stamp.STAMPSessionSenderTestUnauthenticated(payload)
        z = int(p.err_estimate.Z)
        return {"seq": int(p.seq), "ts": ts_ns(p.ts, z), "err": err_dict(p.err_estimate), "ssid": int(p.ssid)}
    p = stamp.STAMPSessionReflectorTestUnauthenticated(payload)
    z = int(p.err_estimate.Z)
    zs = int(p.err_estimate_sender.Z)
    return {
        "seq": int(p.seq),
        "ts": ts_ns(p.ts, z),
        "err": err_dict(p.err_estimate),
        "ssid": int(p.ssid),
        "ts_rx": ts_ns(p.ts_rx, z),
        "seq_sender": int(p.seq_sender),
        "ts_sender": ts_ns(p.ts_sender, zs),
        "err_sender": err_dict(p.err_estimate_sender),
        "ttl_sender": int(p.ttl_sender),
    }


def decode_auth(payload, sender, key):
    mac = hmac.new(key, payload[:96], hashlib.sha256).digest()[:16]
    seq = struct.unpack_from(">I", payload, 0)[0]
    ts, err, ssid = struct.unpack_from(">QHH", payload, 16)
    out = {"seq": seq, "ts": raw_ts_ns(ts, err >> 14 & 1), "err": raw_err(err), "ssid": ssid,
           "hmac_ok": hmac.compare_digest(mac, payload[96:112])}
    if not sender:
        ts_rx = struct.unpack_from(">Q", payload, 32)[0]
        seq_s = struct.unpack_from(">I", payload, 48)[0]
        ts_s, err_s = struct.unpack_from(">QH", payload, 64)
        out.update({
            "ts_rx": raw_ts_ns(ts_rx, err >> 14 & 1),
            "seq_sender": seq_s,
            "ts_sender": raw_ts_ns(ts_s, err_s >> 14 & 1),
            "err_sender": raw_err(err_s),
            "ttl_sender": payload[80],
        })
    return out


def main():
    iface, port = sys.argv[1], int(sys.argv[2])
    key = bytes.fromhex(sys.argv[3]) if len(sys.argv) > 3 else None
    started = threading.Event()
    # A Python filter: a BPF one needs libpcap to compile it.
    def ours(p):
        return UDP in p and port in (p[UDP].sport, p[UDP].dport)

    seen = threading.Condition()
    count = [0]

    def on_packet(_):
        with seen:
            count[0] += 1
            seen.notify_all()

    sniffer = AsyncSniffer(iface=iface, lfilter=ours, prn=on_packet, store=True, started_callback=started.set)
    sniffer.start()
    if not started.wait(20):
        sys.exit("the capture did not start")
    print("ready", flush=True)
    ready, _, _ = select.select([sys.stdin], [], [], 120)
    want = int(sys.stdin.readline() or 0) if ready else 0
    with seen:
        seen.wait_for(lambda: count[0] >= want, timeout=30)
    sniffer.stop()
    for pkt in sniffer.results or []:
        if IP not in pkt or UDP not in pkt:
            continue
        payload = bytes(pkt[UDP].payload)
        sender = pkt[UDP].dport == port
        fields = decode_auth(payload, sender, key) if key else decode_unauth(payload, sender)
        fields.update({"dir": "sender" if sender else "reflector", "len": len(payload), "ip_ttl": pkt[IP].ttl})
        print(json.dumps(fields), flush=True)


if __name__ == "__main__":
    main()
