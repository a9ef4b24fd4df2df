/* One pinger of bench/mesh-gaps.sh: N 64-byte UDP probes to ADDR:PORT, gaps exponential
 * (MODE e) or uniform in the mean +-20 % (MODE u, the mesh agent's earlier pacing),
 * mean MEAN_US; with GRID_US, each send waits for the next multiple of it (a send grid).
 * Waits with ppoll as wirebench does; the round trip is from the clock read before send()
 * to the one after the matching reply's recv(). Prints "gap_us rtt_ns" per answered probe
 * (gap: since this pinger's previous send; -1 for the first). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 6) { fprintf(stderr, "usage: gap ADDR PORT e|u MEAN_US N [GRID_US]\n"); return 2; }
  char mode = argv[3][0];
  double mean = atof(argv[4]) * 1000;
  int n = atoi(argv[5]);
  long long grid = argc > 6 ? atoll(argv[6]) * 1000 : 0;
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons(atoi(argv[2]));
  if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1 || connect(s, (void *)&a, sizeof a)) { perror("connect"); return 1; }
  srand48(now_ns());
  char b[64] = {0}, r[2048];
  long long due = now_ns() + 100000000LL, last = 0;
  for (int i = 0; i < n; i++) {
    double g = mode == 'u' ? mean * (1.0 + 0.2 * (2 * drand48() - 1)) : -log(1.0 - drand48()) * mean;
    long long at = grid ? ((due + grid - 1) / grid) * grid : due;
    for (;;) {
      long long t = now_ns();
      if (t >= at) break;
      struct timespec ts = {(at - t) / 1000000000LL, (at - t) % 1000000000LL};
      struct pollfd p = {s, POLLIN, 0};
      ppoll(&p, 1, &ts, NULL);
      if (p.revents) recv(s, r, sizeof r, MSG_DONTWAIT); /* a late reply: dropped */
    }
    long long t1 = now_ns();
    memcpy(b, &t1, 8);
    send(s, b, sizeof b, 0);
    int answered = 0;
    for (;;) {
      struct timespec ts = {1, 0};
      struct pollfd p = {s, POLLIN, 0};
      if (ppoll(&p, 1, &ts, NULL) <= 0) break;
      ssize_t k = recv(s, r, sizeof r, 0);
      if (k >= 8 && !memcmp(r, &t1, 8)) { answered = 1; break; }
    }
    long long t2 = now_ns();
    if (answered) printf("%lld %lld\n", last ? (t1 - last) / 1000 : -1, t2 - t1);
    last = t1;
    due += (long long)g;
  }
  return 0;
}
