/* The least a user-space multicast relay can do: the platform floor that bench/relay.sh
 * measures `wirebench relay` against. The same data path, nothing else:
 *
 *   group socket, one per group: joined to the group on the interface; each datagram read
 *     from it is sent once to each peer (unicast, to that peer's port for this group and
 *     this node);
 *   peer socket, one per (group, peer): bound to the port that peer sends this group to;
 *     each datagram read from it is sent into the local group (TTL 1, multicast loop on,
 *     so local members hear it). Each peer's datagrams leave from its own socket, so local
 *     receivers still tell the far senders apart (wirebench relay keeps one socket per
 *     original sender for the same reason).
 *
 * Default: a thread per socket, each in one blocking recvfrom. With --epoll: one thread, one
 * epoll over all the sockets (the shape of wirebench relay), reading each ready socket until
 * it is empty. No header, no MAC, no checks, no batching, no timestamps, no counters. The
 * only test is the one without which it would loop: a datagram whose source is this node's
 * own re-emitting socket (the interface address and a port in [BASE, BASE + 100)) is not
 * forwarded again. Ports: node I receives group G from node J on BASE + 10 * G + J.
 *
 *   floor [--epoll [--relay-like[=PARTS]]] IFACE_IP MY_INDEX BASE GROUP:PORT[,GROUP:PORT...] J=PEER_IP [J=PEER_IP...]
 *
 * Prints "floor listening" once every socket is bound and joined; runs until SIGINT or SIGTERM.
 * gcc -O2 -pthread -o floor floor.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/net_tstamp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_GROUPS 8
#define MAX_PEERS 8

static struct in_addr iface;
static int me, base, ngroups, npeers, out_sock;
static struct sockaddr_in groups[MAX_GROUPS];
static struct { int index; struct in_addr ip; } peers[MAX_PEERS];
static struct sockaddr_in dest[MAX_GROUPS][MAX_PEERS]; /* where group g goes for peer j */
static int gsock[MAX_GROUPS], psock[MAX_GROUPS][MAX_PEERS];
/* --relay-like (with --epoll): what wirebench relay does beyond this, to tell its costs
 * apart; PARTS, a comma list, takes some of them (default ts,mmsg,smmsg: what it does):
 *   ts       SO_TIMESTAMPING RX stamps on the group sockets, read with a control buffer;
 *   mmsg     recvmmsg (one slot) on the group sockets instead of recvfrom;
 *   smmsg    sendmmsg for the sends instead of a sendto per copy;
 *   timeout  a 100 ms timeout on every epoll wait instead of none (a stop check that way
 *            arms a kernel timer per wait; wirebench relay wakes on a timerfd instead). */
enum { LIKE_TS = 1, LIKE_MMSG = 2, LIKE_SMMSG = 4, LIKE_TIMEOUT = 8, LIKE_RELAY = 7 };
static int like;

static int like_parts(const char *arg) {
  if (!strcmp(arg, "--relay-like")) return LIKE_RELAY;
  if (strncmp(arg, "--relay-like=", 13)) return 0;
  int parts = 0;
  char buf[64];
  snprintf(buf, sizeof buf, "%s", arg + 13);
  for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
    if (!strcmp(t, "ts")) parts |= LIKE_TS;
    else if (!strcmp(t, "mmsg")) parts |= LIKE_MMSG;
    else if (!strcmp(t, "smmsg")) parts |= LIKE_SMMSG;
    else if (!strcmp(t, "timeout")) parts |= LIKE_TIMEOUT;
    else { fprintf(stderr, "--relay-like: unknown part %s (ts, mmsg, smmsg, timeout)\n", t); exit(2); }
  }
  return parts;
}

static void die(const char *what) { perror(what); exit(1); }

static int udp(void) {
  int s = socket(AF_INET, SOCK_DGRAM, 0), on = 1;
  if (s < 0) die("socket");
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  return s;
}

static void open_sockets(void) {
  int on = 1, off = 0, ttl = 1;
  out_sock = udp();
  for (int g = 0; g < ngroups; g++) {
    int s = gsock[g] = udp();
    setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on);
    if (bind(s, (struct sockaddr *)&groups[g], sizeof groups[g])) die("bind group");
    struct ip_mreq m = {.imr_multiaddr = groups[g].sin_addr, .imr_interface = iface};
    if (setsockopt(s, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof m)) die("join");
    setsockopt(s, IPPROTO_IP, IP_MULTICAST_ALL, &off, sizeof off);
    if (like & LIKE_TS) {
      int ts = SOF_TIMESTAMPING_SOFTWARE | SOF_TIMESTAMPING_RX_SOFTWARE;
      if (setsockopt(s, SOL_SOCKET, SO_TIMESTAMPING, &ts, sizeof ts)) die("SO_TIMESTAMPING");
    }
    for (int j = 0; j < npeers; j++) {
      dest[g][j] = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr = peers[j].ip,
                                        .sin_port = htons(base + 10 * g + me)};
      s = psock[g][j] = udp();
      struct sockaddr_in at = {.sin_family = AF_INET, .sin_addr = iface,
                               .sin_port = htons(base + 10 * g + peers[j].index)};
      if (bind(s, (struct sockaddr *)&at, sizeof at)) die("bind peer port");
      setsockopt(s, IPPROTO_IP, IP_MULTICAST_IF, &iface, sizeof iface);
      setsockopt(s, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl);
      setsockopt(s, IPPROTO_IP, IP_MULTICAST_LOOP, &on, sizeof on);
    }
  }
}

/* Sends buf to each of n addresses: n sendto, or one sendmmsg (--relay-like=smmsg). */
static void send_all(int s, const char *buf, size_t len, struct sockaddr_in *to, int n) {
  if (!(like & LIKE_SMMSG)) {
    for (int j = 0; j < n; j++) sendto(s, buf, len, 0, (struct sockaddr *)&to[j], sizeof to[j]);
    return;
  }
  struct mmsghdr m[MAX_PEERS];
  struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
  memset(m, 0, sizeof m);
  for (int j = 0; j < n; j++) {
    m[j].msg_hdr.msg_name = &to[j];
    m[j].msg_hdr.msg_namelen = sizeof to[j];
    m[j].msg_hdr.msg_iov = &iov;
    m[j].msg_hdr.msg_iovlen = 1;
  }
  sendmmsg(s, m, n, MSG_DONTWAIT);
}

/* One datagram from group g's socket (flags: 0 blocks, MSG_DONTWAIT not); -1 when none. */
static int from_group(int g, int flags) {
  static __thread char buf[65536], ctl[128];
  struct sockaddr_in from;
  ssize_t n;
  if (like & (LIKE_TS | LIKE_MMSG)) {
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
    struct mmsghdr m = {.msg_hdr = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov,
                                    .msg_iovlen = 1}};
    if (like & LIKE_TS) {
      m.msg_hdr.msg_control = ctl;
      m.msg_hdr.msg_controllen = sizeof ctl;
    }
    if (like & LIKE_MMSG)
      n = recvmmsg(gsock[g], &m, 1, flags | MSG_WAITFORONE, NULL) == 1 ? (ssize_t)m.msg_len : -1;
    else
      n = recvmsg(gsock[g], &m.msg_hdr, flags);
  } else {
    socklen_t fl = sizeof from;
    n = recvfrom(gsock[g], buf, sizeof buf, flags, (struct sockaddr *)&from, &fl);
  }
  if (n < 0) return -1;
  int port = ntohs(from.sin_port);
  if (from.sin_addr.s_addr == iface.s_addr && port >= base && port < base + 100) return 0;
  send_all(out_sock, buf, n, dest[g], npeers);
  return 0;
}

/* One datagram from peer j's socket for group g into the group; -1 when none. */
static int from_peer(int g, int j, int flags) {
  static __thread char buf[65536];
  ssize_t n = recv(psock[g][j], buf, sizeof buf, flags);
  if (n < 0) return -1;
  send_all(psock[g][j], buf, n, &groups[g], 1);
  return 0;
}

static void *group_thread(void *arg) {
  for (;;) from_group((int)(long)arg, 0);
  return NULL;
}

static void *peer_thread(void *arg) {
  for (;;) from_peer((int)(long)arg / MAX_PEERS, (int)(long)arg % MAX_PEERS, 0);
  return NULL;
}

static void one_epoll(void) {
  int ep = epoll_create1(0);
  if (ep < 0) die("epoll");
  for (int g = 0; g < ngroups; g++) {
    struct epoll_event e = {.events = EPOLLIN, .data.u64 = ((uint64_t)g << 8) | 0xff};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, gsock[g], &e)) die("epoll_ctl");
    for (int j = 0; j < npeers; j++) {
      e.data.u64 = ((uint64_t)g << 8) | (uint64_t)j;
      if (epoll_ctl(ep, EPOLL_CTL_ADD, psock[g][j], &e)) die("epoll_ctl");
    }
  }
  printf("floor listening: %d groups, %d peers, one epoll\n", ngroups, npeers);
  fflush(stdout);
  struct epoll_event ev[64];
  for (;;) {
    int n = epoll_wait(ep, ev, 64, like & LIKE_TIMEOUT ? 100 : -1);
    for (int i = 0; i < n; i++) {
      int g = (int)(ev[i].data.u64 >> 8), j = (int)(ev[i].data.u64 & 0xff);
      if (j == 0xff)
        while (from_group(g, MSG_DONTWAIT) == 0) {}
      else
        while (from_peer(g, j, MSG_DONTWAIT) == 0) {}
    }
  }
}

int main(int argc, char **argv) {
  /* A background job of a script starts with SIGINT ignored: the bench stops us with it. */
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  int epoll = argc > 1 && !strcmp(argv[1], "--epoll");
  argv += epoll;
  argc -= epoll;
  like = epoll && argc > 1 ? like_parts(argv[1]) : 0;
  argv += like != 0;
  argc -= like != 0;
  if (argc < 6) {
    fprintf(stderr, "usage: floor [--epoll [--relay-like[=PARTS]]] IFACE_IP MY_INDEX BASE GROUP:PORT[,...] J=PEER_IP...\n");
    return 2;
  }
  if (!inet_aton(argv[1], &iface)) return 2;
  me = atoi(argv[2]);
  base = atoi(argv[3]);
  for (char *t = strtok(argv[4], ","); t && ngroups < MAX_GROUPS; t = strtok(NULL, ",")) {
    char *colon = strchr(t, ':');
    if (!colon) return 2;
    *colon = 0;
    groups[ngroups].sin_family = AF_INET;
    if (!inet_aton(t, &groups[ngroups].sin_addr)) return 2;
    groups[ngroups++].sin_port = htons(atoi(colon + 1));
  }
  for (int i = 5; i < argc && npeers < MAX_PEERS; i++) {
    char *eq = strchr(argv[i], '=');
    if (!eq || !inet_aton(eq + 1, &peers[npeers].ip)) return 2;
    peers[npeers++].index = atoi(argv[i]);
  }
  open_sockets();
  if (epoll) one_epoll();
  pthread_t t;
  for (int g = 0; g < ngroups; g++) {
    pthread_create(&t, NULL, group_thread, (void *)(long)g);
    for (int j = 0; j < npeers; j++) pthread_create(&t, NULL, peer_thread, (void *)(long)(g * MAX_PEERS + j));
  }
  printf("floor listening: %d groups, %d peers, a thread per socket\n", ngroups, npeers);
  fflush(stdout);
  pause();
  return 0;
}
