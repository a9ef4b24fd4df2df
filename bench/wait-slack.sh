#!/usr/bin/env bash
# How late a wait's timeout ends, against an absolute timerfd in the same wait (the
# mesh agent's stall samples are how late its prober's send-slot wake-ups come, so the wait
# must not add lateness of its own). A C program (cc) with 1 ns timer slack, or the slack
# given, waits N times for each timeout: once in `ppoll` with that relative timeout, once in
# `ppoll` with no timeout on a timerfd armed to the same absolute time; it prints how late each
# returned (µs: min, p50, max). The kernel gives poll-family timeouts a slack of the larger of
# the thread's timer slack and 0.1 % of the timeout (`select_estimate_accuracy`), a timerfd none.
#
# Run alone: flock /tmp/bench.lock bench/wait-slack.sh [N] [SLACK_NS]   (defaults 40, 1)
. "$(dirname "$0")/lib.sh"
N=${1:-40}
SLACK=${2:-1}
bench_out wait-slack
cat >"$OUT/wait-slack.c" <<'C'
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
static long long now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
static int cmp(const void *a, const void *b) { long long x = *(const long long *)a, y = *(const long long *)b; return (x > y) - (x < y); }
int main(int argc, char **argv) {
  int n = atoi(argv[1]);
  prctl(PR_SET_TIMERSLACK, strtoul(argv[2], 0, 10), 0, 0, 0);
  int s = socket(AF_INET, SOCK_DGRAM, 0), tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  long long *a = calloc(n, 8), *b = calloc(n, 8), ms[] = {10, 50, 100};
  printf("| timeout | ppoll timeout: late min / p50 / max (µs) | timerfd: late min / p50 / max (µs) |\n|---|---|---|\n");
  for (int m = 0; m < 3; m++) {
    long long T = ms[m] * 1000000LL;
    for (int i = 0; i < n; i++) {
      long long due = now() + T, r = due - now();
      struct timespec ts = {r / 1000000000, r % 1000000000};
      struct pollfd p = {s, POLLIN, 0};
      ppoll(&p, 1, &ts, NULL);
      a[i] = now() - due;
      due = now() + T;
      struct itimerspec it = {{0, 0}, {due / 1000000000, due % 1000000000}};
      timerfd_settime(tfd, TFD_TIMER_ABSTIME, &it, NULL);
      struct pollfd q[2] = {{s, POLLIN, 0}, {tfd, POLLIN, 0}};
      ppoll(q, 2, NULL, NULL);
      b[i] = now() - due;
    }
    qsort(a, n, 8, cmp);
    qsort(b, n, 8, cmp);
    printf("| %lld ms | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f |\n", ms[m], a[0] / 1e3, a[n / 2] / 1e3, a[n - 1] / 1e3,
           b[0] / 1e3, b[n / 2] / 1e3, b[n - 1] / 1e3);
  }
  return 0;
}
C
cc -O2 -o "$OUT/wait-slack" "$OUT/wait-slack.c"
echo "timer slack $SLACK ns, $N waits each, load average $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/wait-slack.md"
"$OUT/wait-slack" "$N" "$SLACK" | tee -a "$OUT/wait-slack.md"
echo "results in $OUT"
