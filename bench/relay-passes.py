#!/usr/bin/env python3
"""One relay pass, from the scheduler's events: bench/relay.sh PERF_SCHED=1 runs this on
`perf script` of a `perf sched record -a` taken while a row was measured.

    perf script -i ROW.sched -F comm,pid,tid,time,event,trace | relay-passes.py LABEL PID...

A pass of process P starts when something wakes P (sched_waking: a datagram reached one of
its sockets) and ends when P first wakes another task (its send reached the next hop's
socket, or handed the packet to a softirq thread). Per PID it prints the passes seen, how
long P waited for a CPU after the wake (sch delay), the pass (wake to first wake it makes,
p50 and p90, µs) and which tasks its first wakes went to. Wakes of P while it runs are not
events, so passes that found P busy are not counted, nor are wakes after which P sleeps
again without waking anyone (a datagram it dropped).
"""
import collections
import re
import statistics
import sys

label, tracked = sys.argv[1], [int(p) for p in sys.argv[2:]]
line_re = re.compile(r"^\s*(.+?)\s+(\d+)/(\d+)\s+([\d.]+):\s+sched:(\w+):\s+(.*)$")
tgid = {}  # tid -> tgid, learned from the events' current task
woken = {}  # tracked tgid -> time of the wake that started its pending pass
running = {}  # tracked tgid -> pass start, once it runs
delays = collections.defaultdict(list)
passes = collections.defaultdict(list)
to = collections.defaultdict(collections.Counter)

for line in sys.stdin:
    m = line_re.match(line)
    if not m:
        continue
    pid, tid, t, event, trace = int(m[2]), int(m[3]), float(m[4]) * 1e6, m[5], m[6]
    tgid[tid] = pid
    if event == "sched_waking":
        w = re.search(r"comm=(.+?) pid=(\d+)", trace)
        if not w:
            continue
        wcomm, wtid = w[1], int(w[2])
        wpid = tgid.get(wtid, wtid)
        if pid in running and wpid != pid:
            passes[pid].append(t - running.pop(pid))
            to[pid][re.sub(r"/\d+$", "", wcomm)] += 1
        if wpid in tracked and wpid != pid and wpid not in woken and wpid not in running:
            woken[wpid] = t
    elif event == "sched_switch":
        n = re.search(r"prev_pid=(\d+) prev_prio=\d+ prev_state=(\S+) ==> next_comm=.+? next_pid=(\d+)", trace)
        if not n:
            continue
        prev = tgid.get(int(n[1]), int(n[1]))
        if prev in running and not n[2].startswith("R"):
            del running[prev]  # went back to sleep without waking anyone: no pass
        n = (None, n[3])
        npid = tgid.get(int(n[1]), int(n[1]))
        if npid in woken:
            start = woken.pop(npid)
            delays[npid].append(t - start)
            running[npid] = start


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


for i, p in enumerate(tracked, 1):
    d, s = delays[p], passes[p]
    top = ", ".join(f"{c} {n * 100 // max(1, sum(to[p].values()))}%" for c, n in to[p].most_common(3))
    print(f"{label:12} node {i}: {len(s):6} passes, sch delay {q(d, .5):5.1f} {q(d, .9):5.1f},"
          f" pass {q(s, .5):5.1f} {q(s, .9):5.1f} (mean {statistics.fmean(s) if s else float('nan'):5.1f}); first wakes: {top}")
