#!/usr/bin/env bash
# What a paced stream's sender costs and how closely it keeps its schedule, before and after
# a change to its waiting: on loopback, 16 Mbit/s (--rate 10k/s --size 200), 800 Mbit/s of
# 1468 B and 800 Mbit/s of 200 B, interleaved repetitions of BEFORE and AFTER. Per run, the
# report's own figures: the sending thread's CPU share (its thread CPU clock over the send
# loop) and the schedule slip (a send's time minus the time it was due: the mean and the
# worst, over the sends: one per batch of messages). Prints the medians and the load average
# before and after.
#
# Run it alone, under the bench lock:
#   flock /tmp/bench.lock bench/stream-pacing.sh BEFORE_BINARY [AFTER_BINARY] [REPS] [SECONDS]
# AFTER defaults to target/release/wirebench (built if missing); 3 repetitions of 5 s. One
# serve (AFTER's) receives every run.
. "$(dirname "$0")/lib.sh"
BEFORE=$(realpath "${1:?usage: bench/stream-pacing.sh BEFORE_BINARY [AFTER_BINARY] [REPS] [SECONDS]}")
AFTER=${2:-target/release/wirebench}
REPS=${3:-3}
SECS=${4:-5}
bench_out stream-pacing
[ -x "$AFTER" ] || cargo build --release -q -p wirebench
AFTER=$(realpath "$AFTER")
PORT=17621

start_bg "$AFTER" serve --listen 127.0.0.1:$PORT --open
wait_port tcp $PORT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/load.txt"

cases=("16mbit:--rate 10k/s --size 200" "800mbit:--rate 800mbit" "800mbit-200B:--rate 800mbit --size 200")
: >"$OUT/results.tsv"
for rep in $(seq 1 "$REPS"); do
  for c in "${cases[@]}"; do
    name=${c%%:*}
    read -r -a args <<<"${c#*:}"
    for tool in before after; do
      bin=$BEFORE; [ "$tool" = after ] && bin=$AFTER
      json="$OUT/$name-$tool-$rep.json"
      "$bin" stream 127.0.0.1:$PORT "${args[@]}" -d "${SECS}s" -q --no-hiccup --json "$json" >/dev/null
      python3 - "$json" "$name" "$tool" <<'PY' | tee -a "$OUT/results.tsv"
import json, sys
r = json.load(open(sys.argv[1]))["results"]
g, s = r["generator"], r["sender"]
print(f"{sys.argv[2]}\t{sys.argv[3]}\t{g['cpu_share']:.4f}\t{s['slip_mean_ns']}\t{s['slip_max_ns']}\t{s['bits_per_s']:.0f}")
PY
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/load.txt"
python3 - "$OUT" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(f"{sys.argv[1]}/results.tsv").read().split("\n") if l]
med = lambda name, tool, k: statistics.median(float(r[k]) for r in rows if r[0] == name and r[1] == tool)
print()
print(f"{'stream':<14} {'tool':<7} {'sender CPU':>10} {'slip mean':>10} {'slip max':>10} {'sent':>14}")
for name in dict.fromkeys(r[0] for r in rows):
    for tool in ("before", "after"):
        print(f"{name:<14} {tool:<7} {med(name, tool, 2) * 100:>9.1f}% {med(name, tool, 3) / 1e3:>8.1f}us"
              f" {med(name, tool, 4) / 1e6:>8.2f}ms {med(name, tool, 5) / 1e6:>9.1f} Mbit/s")
print("medians of each figure over the repetitions (slip: per send, one per batch)")
PY
echo "raw results: $OUT"
