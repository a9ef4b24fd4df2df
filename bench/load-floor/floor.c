// bench/load-floor/floor.c: the platform floor of `wirebench load`'s scenario.
// A minimal WebSocket load client that does on the wire what `wirebench load`
// does: the same clients joining at the same ramp slots (client i at ramp * i / clients),
// the same HTTP upgrade to the same room URLs (PATH-{i / room_size}), masked text frames
// in wirebench's default JSON layout padded to SIZE bytes, at the same intended times
// (fixed interval from a random phase, drawn from the same seeded SplitMix64 as wirebench's
// clients, so the phases and the event types are wirebench's own for the same seed), open
// loop, the collab-ide mix (save, open, list are requests the room answers to the sender
// only), every delivered frame read and timed from the "ts" in its payload, and at the end
// the close handshake. One thread, one epoll instance, non-blocking sockets, edge
// triggered; one epoll timeout for every client's schedule (a binary heap of due times),
// rounded up to 1 ms as tokio's timer wheel does; one recv per readable socket per
// wake-up unless it filled the buffer (as tokio does). No allocation after start-up.
//
//   floor HOST PORT PATH CLIENTS RATE_PER_S DURATION_S RAMP_S ROOM_SIZE SIZE [SEED]
//   floor 127.0.0.1 18181 /rooms/floor-1000 1000 2 10 2 5 128
//
// The last line is `floor-result key=value ...` for bench/load-floor.sh.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RXBUF 2048
#define TXBUF 1024
#define MAX_SIZE 512
#define TICK_NS 1000000ull
#define LINGER_NS 500000000ull    // clients stay this long after the last send (wirebench: 0.5 s)
#define CLOSE_WAIT_NS 2000000000ull // the close handshake's bound (wirebench: 2 s)
#define BUCKETS (2048 + 32 * 1024)

enum { WAITING, CONNECTING, HANDSHAKE, OPEN, CLOSING, DONE };

struct client {
    int fd;
    uint8_t state;
    uint16_t have, pend; // bytes in rx, bytes waiting in tx
    uint32_t id, room;
    uint64_t join_ns, next_ns, relay_seq, req_seq;
    uint64_t rng;  // the schedule and the mix: wirebench's draws, in wirebench's order
    uint64_t mrng; // handshake keys and masking keys
    uint8_t rx[RXBUF];
    uint8_t tx[TXBUF];
};

static struct client *cl;
static uint64_t nclients, interval_ns, end_ns, quit_ns, wall0_ns, room_size, size;
static struct timespec t0;
static struct sockaddr_in addr;
static const char *host_hdr, *path;
static int ep;
static volatile sig_atomic_t interrupted;

// counts
static uint64_t sent, received, deliveries, replies, bad, connected, failed, lost, done_n, forced;
static uint64_t slip_max, delay_max;
static uint64_t hist[BUCKETS];

// the collab-ide mix, as wirebench_core::load::Mix::collab_ide()
static const char *const TYPES[] = {"cursor", "modify", "save", "open", "list", "comment", "question"};
static const double WEIGHTS[] = {40, 30, 10, 10, 7, 2.5, 0.5};
static const int REQUEST[] = {0, 0, 1, 1, 1, 0, 0};
#define NTYPES 7
static double cumulative[NTYPES];

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int pick(uint64_t *rng) {
    double u = (double)(splitmix(rng) >> 11) / (double)(1ull << 53);
    for (int i = 0; i < NTYPES; i++)
        if (u < cumulative[i]) return i;
    return NTYPES - 1;
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)t.tv_nsec - (uint64_t)t0.tv_nsec;
}

// ---- the schedule: a binary min-heap of (due, client)
static uint64_t *hdue;
static uint32_t *hidx;
static size_t hlen;

static void heap_push(uint64_t due, uint32_t idx) {
    size_t i = hlen++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (hdue[p] <= due) break;
        hdue[i] = hdue[p];
        hidx[i] = hidx[p];
        i = p;
    }
    hdue[i] = due;
    hidx[i] = idx;
}

static uint32_t heap_pop(void) {
    uint32_t top = hidx[0];
    uint64_t due = hdue[--hlen];
    uint32_t idx = hidx[hlen];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= hlen) break;
        if (c + 1 < hlen && hdue[c + 1] < hdue[c]) c++;
        if (due <= hdue[c]) break;
        hdue[i] = hdue[c];
        hidx[i] = hidx[c];
        i = c;
    }
    hdue[i] = due;
    hidx[i] = idx;
    return top;
}

// ---- delays: exact µs below 2,048 µs, then 1,024 buckets per power of two (< 0.1 %)
static void record(uint64_t ns) {
    uint64_t us = ns / 1000;
    size_t b;
    if (us < 2048) {
        b = us;
    } else {
        int e = 63 - __builtin_clzll(us);
        if (e > 11 + 31) e = 11 + 31, us = (2ull << e) - 1;
        b = 2048 + (size_t)(e - 11) * 1024 + ((us >> (e - 10)) & 1023);
    }
    hist[b]++;
    if (ns > delay_max) delay_max = ns;
}

static double bucket_ms(size_t b) {
    if (b < 2048) return b / 1e3;
    size_t e = (b - 2048) / 1024 + 11, m = (b - 2048) % 1024;
    return (double)((1ull << e) + (m << (e - 10))) / 1e3;
}

static double percentile(double p) {
    uint64_t n = 0, seen = 0;
    for (size_t b = 0; b < BUCKETS; b++) n += hist[b];
    if (n == 0) return 0;
    uint64_t want = (uint64_t)(p / 100.0 * (double)n + 0.5);
    if (want < 1) want = 1;
    for (size_t b = 0; b < BUCKETS; b++)
        if ((seen += hist[b]) >= want) return bucket_ms(b);
    return 0;
}

// ---- sockets
static void finish(struct client *c) {
    if (c->state == DONE) return;
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->state = DONE;
    done_n++;
}

// Sends `n` bytes, queueing what the socket does not take now (written on EPOLLOUT).
static void send_bytes(struct client *c, const uint8_t *b, size_t n) {
    if (c->pend == 0) {
        ssize_t w = send(c->fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno != EAGAIN && errno != EINTR) {
            if (c->state == OPEN && (uint64_t)now_ns() < quit_ns) lost++;
            finish(c);
            return;
        }
        if (w > 0) b += w, n -= (size_t)w;
        if (n == 0) return;
    }
    if (c->pend + n > TXBUF) { // more than 1 KiB backed up: the connection is dropped
        bad++;
        finish(c);
        return;
    }
    memcpy(c->tx + c->pend, b, n);
    c->pend += (uint16_t)n;
}

static void flush(struct client *c) {
    if (c->pend == 0 || c->state == DONE) return;
    ssize_t w = send(c->fd, c->tx, c->pend, MSG_NOSIGNAL);
    if (w < 0) {
        if (errno != EAGAIN && errno != EINTR) finish(c);
        return;
    }
    memmove(c->tx, c->tx + w, c->pend - (size_t)w);
    c->pend -= (uint16_t)w;
}

static uint32_t mask_key(struct client *c) { return (uint32_t)splitmix(&c->mrng); }

// A masked frame (FIN, opcode `op`) of `len` payload bytes into `f`; returns its length.
static size_t frame(uint8_t *f, int op, const uint8_t *p, size_t len, uint32_t key) {
    size_t h = 0;
    f[h++] = (uint8_t)(0x80 | op);
    if (len < 126) {
        f[h++] = (uint8_t)(0x80 | len);
    } else {
        f[h++] = 0x80 | 126;
        f[h++] = (uint8_t)(len >> 8);
        f[h++] = (uint8_t)len;
    }
    uint8_t k[4];
    memcpy(k, &key, 4);
    memcpy(f + h, k, 4);
    h += 4;
    for (size_t i = 0; i < len; i++) f[h + i] = p[i] ^ k[i & 3];
    return h + len;
}

static char *put(char *p, const char *s) {
    size_t n = strlen(s);
    memcpy(p, s, n);
    return p + n;
}

static char *put_u64(char *p, uint64_t v) {
    char t[20];
    int n = 0;
    do t[n++] = (char)('0' + v % 10), v /= 10;
    while (v);
    while (n) *p++ = t[--n];
    return p;
}

// wirebench's default layout (wirebench_core::load::msg::DEFAULT_TEMPLATE), padded to `size`.
static size_t render(char *out, int t, uint32_t sender, uint32_t room, uint64_t seq, uint64_t ts, uint64_t it) {
    char *p = out;
    p = put(p, "{\"type\":\"");
    p = put(p, TYPES[t]);
    p = put(p, REQUEST[t] ? "\",\"req\":true,\"sender\":" : "\",\"req\":false,\"sender\":");
    p = put_u64(p, sender);
    p = put(p, ",\"room\":");
    p = put_u64(p, room);
    p = put(p, ",\"seq\":");
    p = put_u64(p, seq);
    p = put(p, ",\"ts\":");
    p = put_u64(p, ts);
    p = put(p, ",\"it\":");
    p = put_u64(p, it);
    p = put(p, ",\"pad\":\"");
    size_t len = (size_t)(p - out) + 2;
    if (len < size) memset(p, 'x', size - len), p += size - len;
    p = put(p, "\"}");
    return (size_t)(p - out);
}

static uint64_t field(const uint8_t *p, size_t n, const char *key, int *ok) {
    const uint8_t *f = memmem(p, n, key, strlen(key));
    uint64_t v = 0;
    *ok = 0;
    if (!f) return 0;
    for (f += strlen(key); f < p + n && *f >= '0' && *f <= '9'; f++) v = v * 10 + (uint64_t)(*f - '0'), *ok = 1;
    return v;
}

static void on_text(struct client *c, const uint8_t *p, size_t n, uint64_t now) {
    int ok_ts, ok_sender;
    uint64_t ts = field(p, n, "\"ts\":", &ok_ts);
    uint64_t sender = field(p, n, "\"sender\":", &ok_sender);
    uint64_t at = wall0_ns + now;
    if (!ok_ts || ts * 1000 > at) {
        bad++;
        return;
    }
    received++;
    if (ok_sender && sender == c->id) {
        replies++;
    } else {
        deliveries++;
        record(at - ts * 1000);
    }
}

static void start_close(struct client *c) {
    uint8_t f[16], code[2] = {0x03, 0xE8}; // 1000, normal
    c->state = CLOSING;
    send_bytes(c, f, frame(f, 8, code, 2, mask_key(c)));
}

// Frames in rx: handled, the rest kept for the next read.
static void parse(struct client *c, uint64_t now) {
    size_t at = 0;
    while (c->state == OPEN || c->state == CLOSING) {
        const uint8_t *b = c->rx + at;
        size_t have = c->have - at;
        if (have < 2) break;
        size_t h = 2, len = b[1] & 0x7f;
        if (b[1] & 0x80) { // a server never masks
            bad++;
            finish(c);
            return;
        }
        if (len == 126) {
            if (have < 4) break;
            len = (size_t)b[2] << 8 | b[3];
            h = 4;
        } else if (len == 127) {
            bad++; // more than 64 KiB: not this scenario
            finish(c);
            return;
        }
        if (h + len > RXBUF) {
            bad++;
            finish(c);
            return;
        }
        if (have < h + len) break;
        int op = b[0] & 0x0f;
        if (op == 1 || op == 2) {
            on_text(c, b + h, len, now);
        } else if (op == 8) {
            if (c->state == OPEN) start_close(c); // the server closes first: answer it
        } else if (op == 9) {
            uint8_t f[160];
            if (len <= 125) send_bytes(c, f, frame(f, 10, b + h, len, mask_key(c)));
        }
        at += h + len;
    }
    if (c->state == DONE) return;
    memmove(c->rx, c->rx + at, c->have - at);
    c->have -= (uint16_t)at;
}

static void on_handshake(struct client *c, uint64_t now) {
    uint8_t *end = memmem(c->rx, c->have, "\r\n\r\n", 4);
    if (!end) {
        if (c->have == RXBUF) failed++, finish(c);
        return;
    }
    if (c->have < 12 || memcmp(c->rx, "HTTP/1.1 101", 12) != 0) {
        failed++;
        finish(c);
        return;
    }
    size_t hl = (size_t)(end + 4 - c->rx);
    memmove(c->rx, c->rx + hl, c->have - hl);
    c->have -= (uint16_t)hl;
    c->state = OPEN;
    connected++;
    uint64_t from = now > c->join_ns ? now : c->join_ns;
    c->next_ns = from + splitmix(&c->rng) % interval_ns;
    if (c->next_ns < end_ns) heap_push(c->next_ns, c->id);
    parse(c, now);
}

// One recv per wake-up unless it filled the buffer or the peer has closed (`hup`: with edge
// triggering no further event comes for the end of the stream).
static void on_readable(struct client *c, uint64_t now, int hup) {
    for (;;) {
        size_t space = RXBUF - c->have;
        ssize_t n = recv(c->fd, c->rx + c->have, space, 0);
        if (n > 0) {
            c->have += (uint16_t)n;
            if (c->state == HANDSHAKE)
                on_handshake(c, now);
            else
                parse(c, now);
            if (c->state == DONE || ((size_t)n < space && !hup)) return;
            continue;
        }
        if (n == 0) { // the server closed TCP: after our close frame, the normal end
            if (c->state == OPEN) lost++;
            if (c->state == HANDSHAKE || c->state == CONNECTING) failed++;
            finish(c);
            return;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN) {
            if (c->state == OPEN) lost++;
            if (c->state == HANDSHAKE) failed++;
            finish(c);
        }
        return;
    }
}

static void on_connected(struct client *c) {
    int err = 0;
    socklen_t l = sizeof err;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0 || err != 0) {
        failed++;
        finish(c);
        return;
    }
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint8_t key[18] = {0};
    for (int i = 0; i < 16; i++) key[i] = (uint8_t)splitmix(&c->mrng);
    char k64[25];
    for (int i = 0, j = 0; i < 18; i += 3) {
        uint32_t v = (uint32_t)key[i] << 16 | (uint32_t)key[i + 1] << 8 | key[i + 2];
        for (int s = 18; s >= 0 && j < 24; s -= 6) k64[j++] = b64[(v >> s) & 63];
    }
    k64[22] = k64[23] = '=';
    k64[24] = 0;
    char req[512];
    int n = snprintf(req, sizeof req,
                     "GET %s-%u HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                     "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n",
                     path, c->room, host_hdr, k64);
    if (n <= 0 || send(c->fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        failed++;
        finish(c);
        return;
    }
    c->state = HANDSHAKE;
}

static void join(struct client *c) {
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        failed++;
        c->state = DONE, done_n++;
        return;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.u32 = c->id};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0 ||
        (connect(c->fd, (struct sockaddr *)&addr, sizeof addr) != 0 && errno != EINPROGRESS)) {
        failed++;
        finish(c);
        return;
    }
    c->state = CONNECTING;
}

// Every send that is due goes now, however late (open loop), then one write.
static void send_due(struct client *c, uint64_t now) {
    uint8_t out[4 * (MAX_SIZE + 8)];
    size_t o = 0;
    while (c->next_ns <= now && c->next_ns < end_ns && o + MAX_SIZE + 8 <= sizeof out) {
        int t = pick(&c->rng);
        uint64_t seq = REQUEST[t] ? c->req_seq++ : c->relay_seq++;
        char msg[MAX_SIZE + 64];
        size_t n = render(msg, t, c->id, c->room, seq, (wall0_ns + now) / 1000, (wall0_ns + c->next_ns) / 1000);
        o += frame(out + o, 1, (const uint8_t *)msg, n, mask_key(c));
        if (now - c->next_ns > slip_max) slip_max = now - c->next_ns;
        sent++;
        c->next_ns += interval_ns;
    }
    send_bytes(c, out, o);
    if (c->state == OPEN && c->next_ns < end_ns) heap_push(c->next_ns, c->id);
}

static void on_sigint(int s) {
    (void)s;
    interrupted = 1;
}

int main(int argc, char **argv) {
    if (argc < 10) {
        fprintf(stderr, "usage: floor HOST PORT PATH CLIENTS RATE_PER_S DURATION_S RAMP_S ROOM_SIZE SIZE [SEED]\n");
        return 2;
    }
    nclients = strtoull(argv[4], 0, 10);
    double rate = strtod(argv[5], 0), dur = strtod(argv[6], 0), ramp = strtod(argv[7], 0);
    room_size = strtoull(argv[8], 0, 10);
    size = strtoull(argv[9], 0, 10);
    uint64_t seed = argc > 10 ? strtoull(argv[10], 0, 10) : 1;
    if (nclients == 0 || nclients > 1000000 || !(rate > 0) || !(dur > 0) || ramp < 0 || room_size == 0 ||
        size > MAX_SIZE || inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) {
        fprintf(stderr, "floor: bad arguments (clients 1..1e6, rate > 0, size <= %d, an IPv4 host)\n", MAX_SIZE);
        return 2;
    }
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)atoi(argv[2]));
    path = argv[3];
    static char hh[300];
    snprintf(hh, sizeof hh, "%s:%s", argv[1], argv[2]);
    host_hdr = hh;
    interval_ns = (uint64_t)(1e9 / rate);
    uint64_t ramp_ns = (uint64_t)(ramp * 1e9);
    end_ns = ramp_ns + (uint64_t)(dur * 1e9);
    quit_ns = end_ns + LINGER_NS;
    double acc = 0, total = 0;
    for (int i = 0; i < NTYPES; i++) total += WEIGHTS[i];
    for (int i = 0; i < NTYPES; i++) cumulative[i] = (acc += WEIGHTS[i] / total);

    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) rl.rlim_cur = rl.rlim_max, setrlimit(RLIMIT_NOFILE, &rl);
    signal(SIGINT, on_sigint);
    signal(SIGPIPE, SIG_IGN);
    cl = calloc(nclients, sizeof *cl);
    hdue = calloc(nclients, sizeof *hdue);
    hidx = calloc(nclients, sizeof *hidx);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (!cl || !hdue || !hidx || ep < 0) {
        fprintf(stderr, "floor: out of memory\n");
        return 1;
    }
    struct timespec w;
    clock_gettime(CLOCK_REALTIME, &w);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    wall0_ns = (uint64_t)w.tv_sec * 1000000000ull + (uint64_t)w.tv_nsec;
    for (uint64_t i = 0; i < nclients; i++) {
        struct client *c = &cl[i];
        c->fd = -1;
        c->id = (uint32_t)i;
        c->room = (uint32_t)(i / room_size);
        c->rng = seed ^ (i * 0x9E3779B97F4A7C15ull);
        c->mrng = ~c->rng * 0xD1B54A32D192ED03ull;
        c->join_ns = (uint64_t)((unsigned __int128)ramp_ns * i / nclients);
        heap_push(c->join_ns, c->id);
    }

    static struct epoll_event evs[1024];
    int quitting = 0;
    while (done_n < nclients) {
        uint64_t now = now_ns();
        uint64_t due = quitting ? quit_ns + CLOSE_WAIT_NS : quit_ns;
        if (hlen && hdue[0] < due) due = hdue[0];
        due = (due + TICK_NS - 1) / TICK_NS * TICK_NS; // tokio's 1 ms timer wheel
        int ms = due <= now ? 0 : (int)((due - now + 999999) / 1000000);
        int n = epoll_wait(ep, evs, 1024, ms);
        now = now_ns();
        if (interrupted && !quitting) quit_ns = now;
        for (int i = 0; i < n; i++) {
            struct client *c = &cl[evs[i].data.u32];
            uint32_t e = evs[i].events;
            if (c->state == DONE) continue;
            if (c->state == CONNECTING) {
                if (e & (EPOLLOUT | EPOLLERR | EPOLLHUP)) on_connected(c);
                if (c->state == DONE) continue;
            } else if (e & EPOLLOUT) {
                flush(c);
            }
            if (e & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) on_readable(c, now, (e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0);
        }
        while (hlen && hdue[0] <= now && !quitting) {
            struct client *c = &cl[heap_pop()];
            if (c->state == WAITING)
                join(c);
            else if (c->state == OPEN)
                send_due(c, now);
        }
        if (!quitting && now >= quit_ns) {
            quitting = 1;
            for (uint64_t i = 0; i < nclients; i++) {
                if (cl[i].state == OPEN)
                    start_close(&cl[i]);
                else if (cl[i].state != CLOSING && cl[i].state != DONE)
                    failed += cl[i].state != WAITING, finish(&cl[i]);
            }
        }
        if (quitting && now >= quit_ns + CLOSE_WAIT_NS) {
            for (uint64_t i = 0; i < nclients; i++) {
                if (cl[i].state == DONE) continue;
                struct linger lg = {1, 0}; // a reset, as wirebench after its close wait
                setsockopt(cl[i].fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
                forced++;
                finish(&cl[i]);
            }
        }
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
                 ru.ru_stime.tv_usec / 1e6;
    uint64_t events = sent + received;
    double p50 = percentile(50), p99 = percentile(99);
    printf("floor: %llu clients in rooms of %llu, %llu connected, %llu failed, %llu lost, %llu reset at the end\n",
           (unsigned long long)nclients, (unsigned long long)room_size, (unsigned long long)connected,
           (unsigned long long)failed, (unsigned long long)lost, (unsigned long long)forced);
    printf("sent %llu, received %llu (deliveries %llu, replies %llu), bad %llu; send slip max %.3f ms\n",
           (unsigned long long)sent, (unsigned long long)received, (unsigned long long)deliveries,
           (unsigned long long)replies, (unsigned long long)bad, slip_max / 1e6);
    printf("delay p50 %.3f ms p99 %.3f ms max %.3f ms; cpu %.2f s user+sys, %.2f us per message event\n", p50, p99,
           delay_max / 1e6, cpu, events ? cpu * 1e6 / (double)events : 0.0);
    printf("floor-result sent=%llu received=%llu connected=%llu failed=%llu lost=%llu bad=%llu p50_ms=%.3f "
           "p99_ms=%.3f slip_max_ms=%.3f cpu_s=%.3f\n",
           (unsigned long long)sent, (unsigned long long)received, (unsigned long long)connected,
           (unsigned long long)failed, (unsigned long long)lost, (unsigned long long)bad, p50, p99, slip_max / 1e6,
           cpu);
    return connected == 0 ? 1 : 0;
}
