/*
 * libFuzzer harness of a fabric link (hw/pvrdma/pvrdma_link.c, no QEMU):
 * the input is what a hostile peer writes on a TCP-style link (inline
 * data) to a fabric whose one device has an RC QP connected to that
 * peer, with receives posted and four requests of its own outstanding
 * at once (a SEND, a READ, a WRITE, an atomic: answers, READ responses,
 * DATA, RNR NAKs that drop the ones behind, answers out of order have
 * something to hit).  Before the input the harness plays the peer's
 * HELLO and a GIDS frame announcing the QP's partner; the input follows
 * in chunks, each followed by the link's I/O and, every few chunks, a
 * second of the fabric's clock and its timer.  Everything is freed at the
 * end of each input, so LeakSanitizer sees any leak.
 *
 * With -DFUZZ_LINK_SEEDS it is instead a program writing seed inputs
 * (valid frames for that QP) into the directory given as argument.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <glib.h>

#include "fake_guest.h"
#include "fake_verbs.h"
#include "pvrdma_core_int.h"
#include "pvrdma_link.h"

/* Our QP: port 1, handle 2; the peer's: port 2, handle 2. */
#define FL_OUR_QPN      0x10002u
#define FL_PEER_QPN     0x20002u
#define FL_VA           0x7f0000000000ull
#define FL_MR_LEN       (16 * 4096ull)
/* The peer port's life, and the one it announces after a move. */
#define FL_PEER_LIFE    0x1111111111111111ull
#define FL_PEER_LIFE2   0x2222222222222222ull

static void put_hdr(GByteArray *b, uint8_t type, uint16_t flags,
                    uint32_t len, uint32_t id)
{
    uint8_t h[PVRDMA_LINK_HDR_SIZE];
    uint32_t v;

    v = GUINT32_TO_LE(PVRDMA_LINK_MAGIC);
    memcpy(h, &v, 4);
    h[4] = PVRDMA_LINK_VERSION;
    h[5] = type;
    flags = GUINT16_TO_LE(flags);
    memcpy(h + 6, &flags, 2);
    v = GUINT32_TO_LE(len);
    memcpy(h + 8, &v, 4);
    v = GUINT32_TO_LE(id);
    memcpy(h + 12, &v, 4);
    g_byte_array_append(b, h, sizeof(h));
}

static void put32(uint8_t *p, uint32_t v)
{
    v = GUINT32_TO_LE(v);
    memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
    v = GUINT64_TO_LE(v);
    memcpy(p, &v, 8);
}

/* The peer's HELLO and its GIDS (port 2: the test GID 0). */
static GByteArray *preamble(void)
{
    GByteArray *b = g_byte_array_new();
    uint8_t body[PVRDMA_LINK_GIDS_MIN + 16] = { 2, 0, 1, 0 };
    uint8_t hello[PVRDMA_LINK_HELLO_SIZE] = { 0x77 };

    hello[16] = 1;              /* its serial of the link */

    put_hdr(b, PVRDMA_LINK_HELLO, 0, sizeof(hello), 0);
    g_byte_array_append(b, hello, sizeof(hello));
    put64(body + 68, FL_PEER_LIFE);
    fg_test_gid(0, body + PVRDMA_LINK_GIDS_MIN);
    put_hdr(b, PVRDMA_LINK_GIDS, 0, sizeof(body), 0);
    g_byte_array_append(b, body, sizeof(body));
    return b;
}

/* ---- seeds ------------------------------------------------------------- */

#ifdef FUZZ_LINK_SEEDS

static void req_gen(GByteArray *b, uint32_t id, uint32_t op, uint64_t addr,
                    uint32_t rkey, uint64_t len, uint32_t gen)
{
    uint8_t r[PVRDMA_LINK_REQ_SIZE] = { 0 };

    put32(r, op);
    put32(r + 60, gen);
    put32(r + 4, FL_PEER_QPN);
    put32(r + 8, FL_OUR_QPN);
    fg_test_gid(0, r + 12);
    fg_test_gid(0, r + 28);
    put32(r + 56, rkey);
    put64(r + 64, addr);
    put64(r + 88, len);
    put64(r + 112, FL_PEER_LIFE);
    put_hdr(b, PVRDMA_LINK_REQ, 0, sizeof(r), id);
    g_byte_array_append(b, r, sizeof(r));
}

static void req(GByteArray *b, uint32_t id, uint32_t op, uint64_t addr,
                uint32_t rkey, uint64_t len)
{
    req_gen(b, id, op, addr, rkey, len, 0);
}

static void data(GByteArray *b, uint32_t id, uint32_t n)
{
    uint8_t *z = g_malloc0(n);

    put_hdr(b, PVRDMA_LINK_DATA, 0, n, id);
    g_byte_array_append(b, z, n);
    g_free(z);
}

static void ack_rnr(GByteArray *b, uint32_t id, uint32_t status, bool rnr)
{
    uint8_t a[PVRDMA_LINK_ACK_SIZE] = { 0 };

    put32(a, status);
    a[4] = rnr;
    a[5] = 1;
    put_hdr(b, PVRDMA_LINK_ACK, 0, sizeof(a), id);
    g_byte_array_append(b, a, sizeof(a));
}

static void ack(GByteArray *b, uint32_t id, uint32_t status)
{
    ack_rnr(b, id, status, false);
}

/* The peer's port 0 in group ff0e::1, then a datagram to it of @n bytes. */
static void mcast(GByteArray *b, uint32_t n)
{
    uint8_t m[PVRDMA_LINK_MGIDS_MIN + 16] = { 0 };
    uint8_t r[PVRDMA_LINK_REQ_SIZE] = { 0 };
    uint8_t *z = g_malloc0(n);

    m[2] = 1;
    m[PVRDMA_LINK_MGIDS_MIN] = 0xff;
    m[PVRDMA_LINK_MGIDS_MIN + 1] = 0x0e;
    m[PVRDMA_LINK_MGIDS_MIN + 15] = 1;
    put_hdr(b, PVRDMA_LINK_MGIDS, 0, sizeof(m), 0);
    g_byte_array_append(b, m, sizeof(m));
    put32(r, PVRDMA_WR_SEND);
    put32(r + 4, FL_PEER_QPN);
    put32(r + 8, 0xFFFFFF);
    fg_test_gid(0, r + 12);
    memcpy(r + 28, m + PVRDMA_LINK_MGIDS_MIN, 16);
    put64(r + 88, n);
    put32(r + 96, 0x11111111);
    r[105] = 1;
    r[106] = 1;
    put_hdr(b, PVRDMA_LINK_MCAST, 0, sizeof(r) + n, 0);
    g_byte_array_append(b, r, sizeof(r));
    g_byte_array_append(b, z, n);
    g_free(z);
}

static void save(const char *dir, const char *name, GByteArray *b)
{
    char *path = g_strdup_printf("%s/%s", dir, name);

    g_file_set_contents(path, (const char *)b->data, b->len, NULL);
    g_free(path);
    g_byte_array_set_size(b, 0);
}

int main(int argc, char **argv)
{
    GByteArray *b = g_byte_array_new();
    uint8_t resp[8];

    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    req(b, 1, PVRDMA_WR_SEND, 0, 0, 300);
    data(b, 1, 300);
    save(argv[1], "send", b);
    /* rkey of the first MR: handle 1, key byte 0 (lkey == rkey). */
    req(b, 2, PVRDMA_WR_RDMA_WRITE, FL_VA + 100, 0x100, 5000);
    data(b, 2, 4000);
    data(b, 2, 1000);
    save(argv[1], "write", b);
    req(b, 3, PVRDMA_WR_RDMA_READ, FL_VA, 0x100, 4096);
    req(b, 4, PVRDMA_WR_ATOMIC_FETCH_AND_ADD, FL_VA + 64, 0x100, 8);
    req(b, 5, PVRDMA_WR_ATOMIC_WRITE, FL_VA + 72, 0x100, 8);
    save(argv[1], "read-atomic", b);
    mcast(b, 100);
    mcast(b, 0);
    save(argv[1], "mcast", b);
    /* XRC requests (transport 3): SRQ 0, then one over 24 bits. */
    req(b, 6, PVRDMA_WR_SEND, 0, 0, 64);
    b->data[b->len - PVRDMA_LINK_REQ_SIZE + 106] = 3;
    data(b, 6, 64);
    req(b, 7, PVRDMA_WR_RDMA_WRITE, FL_VA, 0x100, 32);
    b->data[b->len - PVRDMA_LINK_REQ_SIZE + 106] = 3;
    put32(b->data + b->len - PVRDMA_LINK_REQ_SIZE + 96, 0x1000000);
    save(argv[1], "xrc", b);
    /* Answers to our own SEND (id 1) and READ (id 2). */
    ack(b, 1, 0);
    put64(resp, 4096);
    put_hdr(b, PVRDMA_LINK_RESP, 0, 8, 2);
    g_byte_array_append(b, resp, 8);
    data(b, 2, 4096);
    ack(b, 2, 0);
    save(argv[1], "answers", b);
    /* Later answers first: held until the earlier ones come. */
    ack(b, 4, 0);
    ack(b, 3, 0);
    ack(b, 1, 0);
    put_hdr(b, PVRDMA_LINK_RESP, 0, 8, 2);
    g_byte_array_append(b, resp, 8);
    data(b, 2, 4096);
    ack(b, 2, 0);
    save(argv[1], "answers-out-of-order", b);
    /* RNR NAK of our SEND: the three behind it are dropped, late acks. */
    ack_rnr(b, 1, 0, true);
    ack(b, 3, 0);
    ack(b, 4, 0);
    save(argv[1], "rnr-window", b);
    /*
     * Three SENDs to our QP with two receives: the third is NAKed (RNR),
     * a WRITE of its generation is dropped, one of the next executes.
     */
    req(b, 5, PVRDMA_WR_SEND, 0, 0, 10);
    data(b, 5, 10);
    req(b, 6, PVRDMA_WR_SEND, 0, 0, 10);
    data(b, 6, 10);
    req(b, 7, PVRDMA_WR_SEND, 0, 0, 10);
    data(b, 7, 10);
    req_gen(b, 8, PVRDMA_WR_RDMA_WRITE, FL_VA + 100, 0x100, 10, 0);
    data(b, 8, 10);
    req_gen(b, 9, PVRDMA_WR_RDMA_WRITE, FL_VA + 100, 0x100, 10, 1);
    data(b, 9, 10);
    save(argv[1], "rnr-generations", b);
    /*
     * Members the peer knows: itself (this host), and one at 127.0.0.1
     * port 1 (refused: tried, then forgotten).
     */
    {
        uint8_t p[PVRDMA_LINK_PEERS_MIN + 2 * PVRDMA_LINK_PEER_SIZE] = { 2 };
        uint8_t *e = p + PVRDMA_LINK_PEERS_MIN;

        e[0] = 0x77;
        e[24] = 0x1f;
        e[25] = 0x1d;
        e += PVRDMA_LINK_PEER_SIZE;
        e[0] = 0x78;
        e[18] = e[19] = 0xff;
        e[20] = 127;
        e[23] = 1;
        e[24] = 1;
        put_hdr(b, PVRDMA_LINK_PEERS, 0, sizeof(p), 0);
        g_byte_array_append(b, p, sizeof(p));
        save(argv[1], "peers", b);
    }
    /*
     * The peer's port moves: it asks us to hold (our four requests are
     * answered, then QUIESCED goes out), announces again with a claim
     * whose proof proves nothing, then plainly (the hold ends).
     */
    {
        uint8_t q[PVRDMA_LINK_QUIESCE_SIZE] = { 2 };
        uint8_t g[PVRDMA_LINK_GIDS_MIN + 16] = { 2, PVRDMA_LINK_GIDS_CLAIM,
                                                 1, 0 };

        put_hdr(b, PVRDMA_LINK_QUIESCE, 0, sizeof(q), 0);
        g_byte_array_append(b, q, sizeof(q));
        ack(b, 1, 0);
        ack(b, 3, 0);
        ack(b, 4, 0);
        put_hdr(b, PVRDMA_LINK_RESP, 0, 8, 2);
        g_byte_array_append(b, resp, 8);
        data(b, 2, 4096);
        ack(b, 2, 0);
        fg_test_gid(0, g + PVRDMA_LINK_GIDS_MIN);
        /* A new life, the one we knew its ancestor. */
        put64(g + 68, FL_PEER_LIFE2);
        g[76] = 1;
        put64(g + 80, FL_PEER_LIFE);
        put_hdr(b, PVRDMA_LINK_GIDS, 0, sizeof(g), 0);
        g_byte_array_append(b, g, sizeof(g));
        g[1] = 0;
        put_hdr(b, PVRDMA_LINK_GIDS, 0, sizeof(g), 0);
        g_byte_array_append(b, g, sizeof(g));
        save(argv[1], "move", b);
    }
    /*
     * Lives (restored snapshots): a request from the new life (taken:
     * the old one is its ancestor), one from a life that parted (NAKed,
     * connection lost), and an ACK saying our connection is lost.
     */
    {
        GByteArray *l = g_byte_array_new();
        uint8_t a[PVRDMA_LINK_ACK_SIZE] = { PVRDMA_WC_RETRY_EXC_ERR, [6] = 1 };
        uint8_t g[PVRDMA_LINK_GIDS_MIN + 16] = { 2, 0, 1, 0 };

        req(l, 1, PVRDMA_WR_SEND, 0, 0, 10);
        data(l, 1, 10);
        put64(g + 68, FL_PEER_LIFE2);
        g[76] = 1;
        put64(g + 80, FL_PEER_LIFE);
        fg_test_gid(0, g + PVRDMA_LINK_GIDS_MIN);
        put_hdr(l, PVRDMA_LINK_GIDS, 0, sizeof(g), 0);
        g_byte_array_append(l, g, sizeof(g));
        req(l, 2, PVRDMA_WR_SEND, 0, 0, 10);
        put64(l->data + l->len - PVRDMA_LINK_REQ_SIZE + 112, FL_PEER_LIFE2);
        data(l, 2, 10);
        req(l, 3, PVRDMA_WR_SEND, 0, 0, 10);
        data(l, 3, 10);
        put_hdr(l, PVRDMA_LINK_ACK, 0, sizeof(a), 1);
        g_byte_array_append(l, a, sizeof(a));
        save(argv[1], "lives", l);
        g_byte_array_free(l, true);
    }
    g_byte_array_free(b, true);
    return 0;
}

#else /* the harness */

typedef struct FlHost {
    int64_t now;
    int64_t timer;
} FlHost;

static void fl_watch(void *o, int fd, bool w, void *tag)
{
    (void)o; (void)fd; (void)w; (void)tag;
}

static void fl_unwatch(void *o, int fd)
{
    (void)o; (void)fd;
}

static void fl_timer_mod(void *o, int64_t at)
{
    ((FlHost *)o)->timer = at;
}

static int64_t fl_clock(void *o)
{
    return ((FlHost *)o)->now;
}

static void drain(int fd)
{
    char buf[65536];

    while (read(fd, buf, sizeof(buf)) > 0) {
        /* what the fabric answers is not looked at */
    }
}

/* Let the link read and write, if it is still alive. */
static void poke(PvrdmaFabric *fab, PvrdmaLink *l, int peer)
{
    if (g_list_find(fab->links, l)) {
        pvrdma_fabric_fd_ready(fab, l, true, true);
    }
    drain(peer);
}

static void feed(PvrdmaFabric *fab, PvrdmaLink *l, int peer,
                 const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(peer, p, n);

        if (w < 0) {
            if (errno != EAGAIN) {
                return;         /* the link closed its end */
            }
            w = 0;
        }
        p += w;
        n -= w;
        poke(fab, l, peer);
        if (!g_list_find(fab->links, l)) {
            return;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const FvConnOpts opts = {
        .access = PVRDMA_ACCESS_LOCAL_WRITE | PVRDMA_ACCESS_REMOTE_WRITE |
                  PVRDMA_ACCESS_REMOTE_READ | PVRDMA_ACCESS_REMOTE_ATOMIC,
        .min_rnr_timer = 1, .rnr_retry = 7, .retry_cnt = 7,
    };
    FlHost host = { .now = 1000000000LL, .timer = -1 };
    PvrdmaFabricHost ops = {
        .watch = fl_watch, .unwatch = fl_unwatch,
        .timer_mod = fl_timer_mod, .clock_ns = fl_clock, .opaque = &host,
    };
    PvrdmaFabric *fab = pvrdma_fabric_new();
    FakeGuest *fg = fg_new(NULL);
    PvrdmaFabricPort *port;
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_sge s;
    GByteArray *pre;
    PvrdmaLink *l;
    uint32_t pd;
    FvCq *cq;
    FvQp *qp;
    FvMr *mr;
    char *msg = NULL;
    size_t off = 0;
    unsigned chunk = 0;
    int sv[2];

    pvrdma_fabric_set_host(fab, &ops);
    port = pvrdma_fabric_port_new(fab, fg->core, 1, &msg);
    g_assert(port);
    pvrdma_core_set_backend(fg->core, &pvrdma_fabric_backend_ops, port);
    fg_setup(fg);
    g_assert(fg_bind_gid(fg, 0) == 0);
    g_assert(fg_create_pd(fg, 0, &pd) == 0);
    cq = fv_cq_new(fg, 0, 64);
    qp = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, NULL, 16, 4, true);
    mr = fv_mr_new(fg, pd, FL_VA, FL_MR_LEN, opts.access);
    g_assert(qp->qpn == FL_OUR_QPN);
    g_assert(fv_qp_rts(qp, FL_PEER_QPN, 0, &opts) == 0);
    s = (struct pvrdma_sge){ .addr = FL_VA, .length = 4096,
                             .lkey = mr->lkey };
    fv_post_recv(qp, 1, &s, 1);
    fv_post_recv(qp, 2, &s, 1);
    fv_ring_rq(qp);

    g_assert(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    l = pvrdma_fabric_add_link(fab, sv[0], false, "fuzz");
    pre = preamble();
    feed(fab, l, sv[1], pre->data, pre->len);
    g_byte_array_free(pre, true);

    /*
     * Our own requests, all out at once: a SEND (id 1), a READ (id 2), a
     * WRITE (id 3), a FETCH_AND_ADD (id 4).
     */
    memset(&h, 0, sizeof(h));
    h.wr_id = 10;
    h.opcode = PVRDMA_WR_SEND;
    h.num_sge = 1;
    h.send_flags = PVRDMA_WR_FLAG_SIGNALED;
    s.length = 300;
    fv_post_send(qp, &h, &s, 1);
    h.wr_id = 11;
    h.opcode = PVRDMA_WR_RDMA_READ;
    h.wr.rdma.remote_addr = 0x1000;
    h.wr.rdma.rkey = 0x100;
    s.length = 4096;
    fv_post_send(qp, &h, &s, 1);
    h.wr_id = 12;
    h.opcode = PVRDMA_WR_RDMA_WRITE;
    s.length = 100;
    fv_post_send(qp, &h, &s, 1);
    h.wr_id = 13;
    h.opcode = PVRDMA_WR_ATOMIC_FETCH_AND_ADD;
    h.wr.atomic.remote_addr = 0x2000;
    h.wr.atomic.rkey = 0x100;
    h.wr.atomic.compare_add = 1;
    s.length = 8;
    fv_post_send(qp, &h, &s, 1);
    fv_ring_sq(qp);
    poke(fab, l, sv[1]);

    while (off < size && g_list_find(fab->links, l)) {
        size_t n = MIN(size - off, 1024);

        feed(fab, l, sv[1], data + off, n);
        off += n;
        if (++chunk % 4 == 0) {
            host.now += 1000000000LL;
            pvrdma_fabric_timer_expired(fab);
            if (g_list_find(fab->links, l)) {
                fv_ring_sq(qp);
            }
        }
    }
    /* The peer goes away: everything outstanding ends. */
    close(sv[1]);
    poke(fab, l, -1);
    pvrdma_fabric_timer_expired(fab);
    fg_free(fg);
    pvrdma_fabric_unref(fab);
    g_free(cq);
    g_free(qp);
    g_free(mr);
    return 0;
}

#endif
