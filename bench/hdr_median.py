"""A p50 and its 95 % interval from an HdrHistogram blob (V2, compressed or not, base64), read
here independently of wirebench's Rust code (the p50 it finds is checked against the one the
report states).

The interval is distribution-free: the median of n samples lies between the order statistics
of ranks n/2 -/+ 1.96 * sqrt(n) / 2 with about 95 % confidence, whatever the distribution (a
round trip on a VM is bimodal, so a normal approximation would not hold). Two p50s whose
intervals are each several % wide cannot be told apart to 5 %.
"""

import base64
import math
import struct
import zlib

COMPRESSED = (0x1C849304, 0x1C849314)


def decode(b64):
    """(highest equivalent value, count) pairs, ascending, of the non-empty buckets."""
    raw = base64.b64decode(b64)
    cookie, length = struct.unpack(">ii", raw[:8])
    if cookie in COMPRESSED:
        raw = zlib.decompress(raw[8 : 8 + length])
    _, payload_len, _, sigfig, lowest, _, _ = struct.unpack(">iiiiqqd", raw[:40])
    payload = raw[40 : 40 + payload_len]
    sub = 2 ** math.ceil(math.log2(2 * 10**sigfig))
    half, sub_mag = sub // 2, int(math.log2(sub)) - 1
    unit = int(math.floor(math.log2(lowest)))
    out, index, i = [], 0, 0
    while i < len(payload):
        v, shift = 0, 0
        while True:
            b = payload[i]
            i += 1
            if shift == 56:  # the ninth byte of a 64-bit LEB128 carries 8 bits
                v |= b << 56
                break
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        v = (v >> 1) ^ -(v & 1)
        if v < 0:
            index += -v
            continue
        if v:
            bucket, sub_index = (index >> sub_mag) - 1, (index & (half - 1)) + half
            if bucket < 0:
                bucket, sub_index = 0, sub_index - half
            shift_by = bucket + unit
            out.append(((sub_index << shift_by) + (1 << shift_by) - 1, v))
        index += 1
    return out


def at_rank(values, rank):
    """The value of the rank-th smallest sample (1-based, clamped to the count)."""
    total = sum(c for _, c in values)
    rank, seen = min(max(1, rank), total), 0
    for value, count in values:
        seen += count
        if seen >= rank:
            return value
    raise ValueError("empty histogram")


def median_interval(b64):
    """(count, p50, low, high): the p50 as HdrHistogram reports it and its 95 % interval."""
    values = decode(b64)
    n = sum(c for _, c in values)
    half_width = 1.96 * math.sqrt(n) / 2
    return n, at_rank(values, math.ceil(n / 2)), at_rank(values, math.floor(n / 2 - half_width)), at_rank(
        values, math.ceil(n / 2 + half_width)
    )
