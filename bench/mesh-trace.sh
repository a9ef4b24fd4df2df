#!/usr/bin/env bash
# Where a mesh agent's UDP round trip and `ping --poisson`'s differ, probe by probe.
# Two namespaces on a veth pair, an agent in each (A on CPU 0, B on CPU 1, as bench/mesh.sh
# accuracy), and `wirebench ping --poisson --no-timestamps` from A to B's agent at the same
# rate. `perf record -a` takes 8 s of scheduler, syscall and netif_rx tracepoints; each UDP
# round trip of A's prober (on its socket connected to B) and of ping is then split, in µs
# from its sendto: the sendto call, B's serve reading the probe and sending the reply (and
# its wake-up), the reply entering A (netif_rx), the pinger's wake-up (sched_waking), it
# running (sched_switch), its wait returning (epoll_pwait2 or ppoll), and its recvfrom
# returning; p50/mean/quartiles per step, the prober's rows also split by whether another
# of its probes went in the same send slot (within 1 ms). Prints ping's own p50 and the
# matrix's window after.
# Root (namespaces, perf). Run alone: flock /tmp/bench.lock bench/mesh-trace.sh BINARY [agent flags]
set -euo pipefail
cd "$(dirname "$0")/.."
WB=$(realpath "$1"); shift
OUT=bench/out/mesh-trace-$(date -u +%Y%m%dT%H%M%SZ); mkdir -p "$OUT"
A=wbtraceA; B=wbtraceB
pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; ip netns del $A 2>/dev/null || true; ip netns del $B 2>/dev/null || true; }
trap cleanup EXIT
ip netns add $A; ip netns add $B
ip link add wbta0 netns $A type veth peer name wbtb0 netns $B
ip -n $A addr add 10.77.69.1/24 dev wbta0; ip -n $B addr add 10.77.69.2/24 dev wbtb0
for n in $A $B; do ip -n $n link set lo up; done
ip -n $A link set wbta0 up; ip -n $B link set wbtb0 up
ip netns exec $B taskset -c 1 $WB mesh agent --listen 10.77.69.2:7878 --http 10.77.69.2:9878 --peers 10.77.69.1:7878 --window 20s --rate 20/s "$@" >$OUT/agentB.log 2>&1 &
PB=$!; pids+=($PB)
ip netns exec $A taskset -c 0 $WB mesh agent --listen 10.77.69.1:7878 --http 10.77.69.1:9878 --peers 10.77.69.2:7878 --window 20s --rate 20/s "$@" >$OUT/agentA.log 2>&1 &
PA=$!; pids+=($PA)
for _ in $(seq 300); do ip netns exec $A curl -sf http://10.77.69.1:9878/readyz >/dev/null 2>&1 && break; sleep 0.1; done
sleep 3
ip netns exec $A taskset -c 0 $WB ping 10.77.69.2:7878 --size 64 --rate 20/s --poisson --count 400 -q --no-timestamps --json $OUT/ping.json >/dev/null &
PP=$!; pids+=($PP)
sleep 2
PROBER=$(grep -l mesh-prober /proc/$PA/task/*/comm | head -1 | cut -d/ -f5)
BSERVE=$(grep -l serve-udp /proc/$PB/task/*/comm | head -1 | cut -d/ -f5)
PINGT=$(ls /proc/$PP/task | sort -n | sed -n 2p)
echo "prober=$PROBER bserve=$BSERVE pingpid=$PP tasks=$(ls /proc/$PP/task | tr '\n' ' ')" | tee $OUT/ids
ls -l /proc/$PA/fd > $OUT/agentA.fd; ip netns exec $A cat /proc/net/udp > $OUT/udpA
perf record -q -a -o $OUT/perf.data -e syscalls:sys_enter_sendto -e syscalls:sys_exit_sendto \
  -e syscalls:sys_enter_recvfrom -e syscalls:sys_exit_recvfrom -e syscalls:sys_exit_recvmsg \
  -e syscalls:sys_exit_epoll_pwait2 -e syscalls:sys_exit_ppoll -e net:netif_rx \
  -e sched:sched_waking -e sched:sched_switch -- sleep 8 2>$OUT/perf.err
wait $PP || true
perf script -i $OUT/perf.data -F comm,tid,cpu,time,event,trace > $OUT/script.txt 2>/dev/null
uptime | tee $OUT/uptime
python3 - $OUT $PROBER $BSERVE $PP <<'PY' | tee $OUT/decomp.txt
import sys, re, bisect, statistics as st
out, prober, bserve, pingpid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
# UDP fd of the prober connected to the peer
inode_fd = {}
for l in open(f"{out}/agentA.fd"):
    m = re.search(r" (\d+) -> socket:\[(\d+)\]", l)
    if m: inode_fd[m.group(2)] = int(m.group(1))
udp_fd = None
for l in open(f"{out}/udpA").readlines()[1:]:
    f = l.split()
    if f[2].endswith(":1EC6") and not f[2].startswith("00000000"):
        udp_fd = inode_fd.get(f[9], udp_fd)
print("prober udp fd", udp_fd)
ev = []
pat = re.compile(r"^\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)$")
for l in open(f"{out}/script.txt"):
    m = pat.match(l)
    if not m: continue
    comm, tid, cpu, t, e, rest = m.groups()
    ev.append((float(t) * 1e6, int(cpu), int(tid), comm, e.split(":")[-1] if ":" in e else e, rest))
ev.sort(key=lambda x: x[0])
def fd_of(rest):
    m = re.search(r"fd: 0x([0-9a-f]+)", rest); return int(m.group(1), 16) if m else None
def kv(rest, k):
    m = re.search(k + r"=(\S+)", rest); return m.group(1) if m else None
# ping engine tid: the thread of pingpid doing sendto (ping's tids are pingpid..)
tids_sending = {}
for t, cpu, tid, comm, e, rest in ev:
    if e == "sys_enter_sendto": tids_sending.setdefault(tid, 0); tids_sending[tid] += 1
ping_tid = None
for tid in sorted(tids_sending):
    if pingpid <= tid < pingpid + 10 and tid != pingpid: ping_tid = tid
if ping_tid is None and pingpid in tids_sending: ping_tid = pingpid
print("ping tid", ping_tid)
def analyse(T, fd):
    rows = []
    sends = [i for i in range(len(ev)) if ev[i][2] == T and ev[i][4] == "sys_enter_sendto" and (fd is None or fd_of(ev[i][5]) == fd)]
    for k, si in enumerate(sends):
        end = sends[k + 1] if k + 1 < len(sends) else len(ev)
        ts0 = ev[si][0]
        ts1 = ts_rcv = ts_wk = ts_in = ts_wx = None; idle = None; last_wk = last_in = last_wx = None; cpu_wk = None
        pending_fd = None
        b = {}
        for j in range(si + 1, end):
            t, cpu, tid, comm, e, rest = ev[j]
            if t - ts0 > 5000: break
            if tid == T and e == "sys_exit_sendto" and ts1 is None: ts1 = t
            if e == "sched_waking" and kv(rest, "pid") == str(T): last_wk = (t, cpu)
            if e == "sched_switch" and kv(rest, "next_pid") == str(T): last_in = (t, kv(rest, "prev_comm"))
            if tid == T and e in ("sys_exit_epoll_pwait2", "sys_exit_ppoll"): last_wx = t
            if tid == T and e == "sys_enter_recvfrom": pending_fd = fd_of(rest)
            if tid == T and e == "sys_exit_recvfrom" and (fd is None or pending_fd == fd) and rest.strip() == "0x40":
                ts_rcv = t; break
            # B's serve
            if e == "sched_waking" and kv(rest, "pid") == str(bserve) and "bwk" not in b: b["bwk"] = t
            if e == "sched_switch" and kv(rest, "next_pid") == str(bserve) and "bin" not in b: b["bin"] = t; b["bprev"] = kv(rest, "prev_comm")
            if tid == bserve and e == "sys_exit_recvmsg" and "brcv" not in b: b["brcv"] = t
            if tid == bserve and e == "sys_enter_sendto" and "bsnd" not in b and "brcv" in b: b["bsnd"] = t
        if ts_rcv is None or ts1 is None: continue
        r = {"total": ts_rcv - ts0, "sendto": ts1 - ts0}
        # another send by this thread (another target, e.g. the peer's TCP probe) within 1 ms
        near = [x for x in ev[max(0, si - 400):min(len(ev), si + 400)] if x[2] == T and x[4] == "sys_enter_sendto" and x is not ev[si] and abs(x[0] - ts0) < 1000]
        r["coslot"] = bool(near)
        if last_wk and last_wk[0] > ts1:
            r["wake_to_run"] = (last_in[0] - last_wk[0]) if last_in and last_in[0] >= last_wk[0] else None
            # reply netif_rx: last netif_rx on A's veth before the waking
            rx = [x for x in ev[si:j] if x[4] == "netif_rx" and "wbta0" in x[5] and x[0] <= last_wk[0]]
            if rx: r["rx_to_wake"] = last_wk[0] - rx[-1][0]; r["send_to_rx"] = rx[-1][0] - ts0
        if last_wx and last_in and last_wx >= last_in[0]: r["run_to_waitret"] = last_wx - last_in[0]
        if last_wx: r["waitret_to_recv"] = ts_rcv - last_wx
        if "bsnd" in b and b["bsnd"] < ts_rcv:
            r["b_send_at"] = b["bsnd"] - ts0
            if "brcv" in b: r["b_recv_at"] = b["brcv"] - ts0
            if "bwk" in b and "bin" in b and b["bin"] >= b["bwk"]:
                r["b_wake_to_run"] = b["bin"] - b["bwk"]
            if last_wk and last_wk[0] > b["bsnd"]: r["bsend_to_wake"] = last_wk[0] - b["bsnd"]
        rows.append(r)
    return rows
def summary(name, rows):
    keys = ["coslot", "total", "sendto", "b_recv_at", "b_send_at", "b_wake_to_run", "send_to_rx", "bsend_to_wake", "rx_to_wake", "wake_to_run", "run_to_waitret", "waitret_to_recv"]
    print(f"{name}: {len(rows)} round trips")
    for k in keys:
        v = [r[k] for r in rows if r.get(k) is not None]
        if not v: continue
        if isinstance(v[0], bool): print(f"  {k:16s} {sum(v)}/{len(v)} = {sum(v)/len(v):.2f}")
        else: print(f"  {k:16s} n={len(v):4d} p50 {st.median(v):8.1f} mean {st.mean(v):8.1f} p25 {st.quantiles(v, n=4)[0]:8.1f} p75 {st.quantiles(v, n=4)[2]:8.1f}")
rows = analyse(prober, udp_fd)
summary("prober", rows)
summary("prober, alone in its slot", [r for r in rows if not r["coslot"]])
summary("prober, sharing its slot", [r for r in rows if r["coslot"]])
summary("ping", analyse(ping_tid, None))
PY
python3 - $OUT/ping.json <<'PY'
import json,sys
r=json.load(open(sys.argv[1]))["results"]["responders"][0]; v=r["uncorrected"] or r["latency"]
print("ping --poisson p50 us", [q["ns"] for q in v["summary"]["percentiles"] if q["p"]==50.0][0]/1000)
PY
ip netns exec $A curl -s http://10.77.69.1:9878/v1/matrix > $OUT/matrix.json
echo "out $OUT"
