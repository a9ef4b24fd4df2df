/* The least a UDP ping-pong can do: the platform floor that bench/latency.sh measures
 * `wirebench ping` and sockperf against. The same data path, nothing else: one connected
 * socket each side, a 32-byte datagram (the size of wirebench's compact probe) sent with
 * send(), read with recv(); the round trip is CLOCK_MONOTONIC read before the send and
 * after the reply's read. No header check, no timestamps, no other thread.
 *
 *   floor server IP:PORT [--spin]
 *   floor client IP:PORT COUNT WARMUP [--spin]
 *
 * The server echoes every datagram to its sender until SIGINT or SIGTERM and prints
 * "floor listening" once bound. The client sends WARMUP probes, then COUNT measured ones,
 * each after the previous reply (closed loop), and prints "count p50 p99 p99.9" in
 * microseconds from a sorted array of the measured round trips (exact percentiles, the
 * nearest-rank definition HdrHistogram uses). --spin: non-blocking sockets read in a busy
 * loop (sockperf's --nonblocked, wirebench's --spin); without it, blocking reads.
 *
 * gcc -O2 -o floor floor.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SIZE 32

static volatile sig_atomic_t stop;
static void on_signal(int sig) { (void)sig; stop = 1; }
static void die(const char *what) { perror(what); exit(1); }

static struct sockaddr_in parse(const char *s) {
  struct sockaddr_in a = {.sin_family = AF_INET};
  char host[64];
  const char *colon = strrchr(s, ':');
  if (!colon || colon - s >= (long)sizeof host) { fprintf(stderr, "expected IP:PORT, got %s\n", s); exit(2); }
  memcpy(host, s, colon - s);
  host[colon - s] = 0;
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) { fprintf(stderr, "bad IP %s\n", host); exit(2); }
  a.sin_port = htons(atoi(colon + 1));
  return a;
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + t.tv_nsec;
}

/* One datagram into buf: spins on EAGAIN with --spin; -1 once stopped. */
static ssize_t get(int s, char *buf, struct sockaddr_in *from, socklen_t *len) {
  for (;;) {
    ssize_t n = from ? recvfrom(s, buf, SIZE * 4, 0, (struct sockaddr *)from, len) : recv(s, buf, SIZE * 4, 0);
    if (n >= 0) return n;
    if (stop) return -1;
    if (errno != EAGAIN && errno != EINTR) die("recv");
  }
}

static int cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Nearest rank: the smallest value with at least p % of the values at or below it. */
static double pct(const uint64_t *v, size_t n, double p) {
  size_t rank = (size_t)ceil(p / 100.0 * n);
  if (rank < 1) rank = 1;
  return v[rank - 1] / 1000.0;
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: floor server IP:PORT [--spin] | floor client IP:PORT COUNT WARMUP [--spin]\n"); return 2; }
  int spin = strcmp(argv[argc - 1], "--spin") == 0;
  struct sockaddr_in addr = parse(argv[2]);
  int s = socket(AF_INET, SOCK_DGRAM | (spin ? SOCK_NONBLOCK : 0), 0);
  if (s < 0) die("socket");
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  char buf[SIZE * 4] = {0};
  if (strcmp(argv[1], "server") == 0) {
    if (bind(s, (struct sockaddr *)&addr, sizeof addr) < 0) die("bind");
    printf("floor listening\n");
    fflush(stdout);
    for (;;) {
      struct sockaddr_in from;
      socklen_t len = sizeof from;
      ssize_t n = get(s, buf, &from, &len);
      if (n < 0) return 0;
      sendto(s, buf, n, 0, (struct sockaddr *)&from, len);
    }
  }
  if (argc < 5) { fprintf(stderr, "client needs COUNT WARMUP\n"); return 2; }
  size_t count = strtoull(argv[3], NULL, 10), warmup = strtoull(argv[4], NULL, 10);
  if (count == 0) { fprintf(stderr, "COUNT must be at least 1\n"); return 2; }
  if (connect(s, (struct sockaddr *)&addr, sizeof addr) < 0) die("connect");
  uint64_t *rtt = malloc(count * sizeof *rtt);
  if (!rtt) die("malloc");
  size_t m = 0; /* measured round trips */
  for (size_t i = 0; i < warmup + count && !stop; i++) {
    uint64_t t1 = now_ns();
    if (send(s, buf, SIZE, 0) < 0) die("send");
    if (get(s, buf, NULL, NULL) < 0) break;
    uint64_t t4 = now_ns();
    if (i >= warmup) rtt[m++] = t4 - t1;
  }
  if (m == 0) { fprintf(stderr, "stopped before a measured round trip\n"); return 1; }
  qsort(rtt, m, sizeof *rtt, cmp);
  printf("%zu %.3f %.3f %.3f\n", m, pct(rtt, m, 50), pct(rtt, m, 99), pct(rtt, m, 99.9));
  return 0;
}
