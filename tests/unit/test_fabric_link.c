/*
 * Unit tests: links between fabric objects (docs/fabric.md).  Two
 * fabrics in this process stand for two QEMU processes: each has its own
 * host (a poll loop and a manual clock here) and its own fake guest, and
 * they talk only through a socket pair, in shared-ring mode (unix, with
 * memfds) or inline mode (as over TCP).  The rings are made small
 * (Makefile) so that messages wrap them and wait for credit.
 *
 * Also: a raw peer that writes hostile frames, a peer that dies or goes
 * silent with requests outstanding, and the discovery of path=DIR.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE             /* memfd_create, F_ADD_SEALS */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>

#include "fake_guest.h"
#include "fake_host.h"
#include "fake_tls.h"
#include "fake_verbs.h"
#include "pvrdma_core_int.h"
#include "pvrdma_link.h"

#define ALL_ACCESS  (PVRDMA_ACCESS_LOCAL_WRITE | PVRDMA_ACCESS_REMOTE_WRITE | \
                     PVRDMA_ACCESS_REMOTE_READ | PVRDMA_ACCESS_REMOTE_ATOMIC)
#define SIG         PVRDMA_WR_FLAG_SIGNALED
#define VA_A        0x7f0000000800ull
#define VA_B        0x7e0000000100ull
#define MR_LEN      (60 * 4096ull)

/* ---- two guests, one per host, linked -------------------------------- */

typedef struct Net {
    Host *ha, *hb;
    FakeGuest *fa, *fb;
    uint32_t pda, pdb;
    FvCq *cqa, *cqb;
    FvQp *a, *b;
    FvMr *ma, *mb;
    int sv[2];
} Net;

static const FvConnOpts conn_opts = {
    .access = ALL_ACCESS, .min_rnr_timer = 1, .rnr_retry = 7,
    .retry_cnt = 7,
};

/* Wait until both sides see the link up and each other's GIDs. */
static void net_link(Net *n, bool shm)
{
    unsigned i;

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
                                n->sv), 0);
    pvrdma_fabric_add_link(n->ha->fab, n->sv[0], shm, "test-a");
    pvrdma_fabric_add_link(n->hb->fab, n->sv[1], shm, "test-b");
    for (i = 0; i < 100 && (pvrdma_fabric_links_up(n->ha->fab) != 1 ||
                            pvrdma_fabric_links_up(n->hb->fab) != 1); i++) {
        run(n->ha, n->hb, 1);
    }
    run(n->ha, n->hb, 3);       /* GIDS frames */
    assert_int_equal(pvrdma_fabric_links_up(n->ha->fab), 1);
    assert_int_equal(pvrdma_fabric_links_up(n->hb->fab), 1);
}

/* PDs, CQs, an RC QP each, connected, and an MR each. */
static void net_qps(Net *n)
{
    assert_int_equal(fg_create_pd(n->fa, 0, &n->pda), 0);
    assert_int_equal(fg_create_pd(n->fb, 0, &n->pdb), 0);
    n->cqa = fv_cq_new(n->fa, 0, 64);
    n->cqb = fv_cq_new(n->fb, 0, 64);
    n->a = fv_qp_new(n->fa, PVRDMA_QPT_RC, n->pda, n->cqa, n->cqa, NULL, 16,
                     4, false);
    n->b = fv_qp_new(n->fb, PVRDMA_QPT_RC, n->pdb, n->cqb, n->cqb, NULL, 16,
                     4, false);
    n->ma = fv_mr_new(n->fa, n->pda, VA_A, MR_LEN, ALL_ACCESS);
    n->mb = fv_mr_new(n->fb, n->pdb, VA_B, MR_LEN, ALL_ACCESS);
    fv_connect(n->a, n->b, &conn_opts);
}

static Net *net_new(bool shm)
{
    Net *n = g_new0(Net, 1);

    n->ha = host_new();
    n->hb = host_new();
    /* Same GID on both (fake guests bind one test GID): QPN tells. */
    n->fa = host_guest(n->ha, 1);
    n->fb = host_guest(n->hb, 2);
    net_link(n, shm);
    net_qps(n);
    return n;
}

static void net_free(Net *n)
{
    fg_free(n->fa);
    fg_free(n->fb);
    host_free(n->ha);
    host_free(n->hb);
    g_free(n->cqa);
    g_free(n->cqb);
    g_free(n->a);
    g_free(n->b);
    g_free(n->ma);
    g_free(n->mb);
    g_free(n);
}

static struct pvrdma_sge sge(FvMr *mr, uint64_t va, uint32_t len)
{
    struct pvrdma_sge s = { .addr = va, .length = len, .lkey = mr->lkey };

    return s;
}

static struct pvrdma_sq_wqe_hdr wqe(uint64_t id, uint32_t op, uint32_t nsge)
{
    struct pvrdma_sq_wqe_hdr h;

    memset(&h, 0, sizeof(h));
    h.wr_id = id;
    h.opcode = op;
    h.send_flags = SIG;
    h.num_sge = nsge;
    return h;
}

/* Run both hosts until @cq has a CQE (at most ~2000 rounds), take it. */
static struct pvrdma_cqe wait_cqe(Net *n, FvCq *cq)
{
    struct pvrdma_cqe c;
    unsigned i;

    for (i = 0; i < 2000; i++) {
        if (fv_cq_poll(cq, &c)) {
            return c;
        }
        run(n->ha, n->hb, 1);
    }
    fail_msg("no completion");
    return c;
}

static void expect(struct pvrdma_cqe c, uint64_t wr_id, uint32_t opcode,
                   uint32_t status, uint32_t len)
{
    assert_int_equal(c.wr_id, wr_id);
    assert_int_equal(c.opcode, opcode);
    assert_int_equal(c.status, status);
    if (status == PVRDMA_WC_SUCCESS) {
        assert_int_equal(c.byte_len, len);
    }
}

static void expect_same(FvMr *x, uint64_t xva, FvMr *y, uint64_t yva,
                        uint64_t len)
{
    uint64_t i;

    for (i = 0; i < len; i++) {
        if (*fv_mr_ptr(x, xva + i) != *fv_mr_ptr(y, yva + i)) {
            fail_msg("byte %" PRIu64 " differs", i);
        }
    }
}

/* ---- every opcode across a link -------------------------------------- */

static void do_ops_on(Net *n)
{
    uint32_t big = 200 * 1024 + 17;      /* wraps the test ring (64 KiB) */
    struct pvrdma_sge s, r;
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_cqe c;
    uint64_t v;

    /* SEND of a large message into two receive SGEs. */
    fv_mr_fill(n->ma, VA_A + 5, big, 7);
    r = sge(n->mb, VA_B + 3, big);
    fv_post_recv(n->b, 0xb1, &r, 1);
    fv_ring_rq(n->b);
    s = sge(n->ma, VA_A + 5, big);
    h = wqe(0xa1, PVRDMA_WR_SEND_WITH_IMM, 1);
    h.ex.imm_data = 0xabcdef01;
    fv_post_send(n->a, &h, &s, 1);
    fv_ring_sq(n->a);
    expect(wait_cqe(n, n->cqa), 0xa1, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, big);
    c = wait_cqe(n, n->cqb);
    expect(c, 0xb1, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS, big);
    assert_int_equal(c.imm_data, 0xabcdef01);
    assert_int_equal(c.src_qp, n->a->qpn);
    assert_true(fv_mr_check(n->mb, VA_B + 3, big, 7));

    /* RDMA WRITE, then READ it back elsewhere. */
    fv_mr_fill(n->ma, VA_A, big, 9);
    s = sge(n->ma, VA_A, big);
    h = wqe(0xa2, PVRDMA_WR_RDMA_WRITE, 1);
    h.wr.rdma.remote_addr = VA_B + 100;
    h.wr.rdma.rkey = n->mb->rkey;
    fv_post_send(n->a, &h, &s, 1);
    fv_ring_sq(n->a);
    expect(wait_cqe(n, n->cqa), 0xa2, PVRDMA_WC_RDMA_WRITE,
           PVRDMA_WC_SUCCESS, big);
    assert_true(fv_mr_check(n->mb, VA_B + 100, big, 9));

    fv_mr_fill(n->mb, VA_B + 1000, big, 11);
    s = sge(n->ma, VA_A + 64, big);
    h = wqe(0xa3, PVRDMA_WR_RDMA_READ, 1);
    h.wr.rdma.remote_addr = VA_B + 1000;
    h.wr.rdma.rkey = n->mb->rkey;
    fv_post_send(n->a, &h, &s, 1);
    fv_ring_sq(n->a);
    expect(wait_cqe(n, n->cqa), 0xa3, PVRDMA_WC_RDMA_READ,
           PVRDMA_WC_SUCCESS, big);
    expect_same(n->ma, VA_A + 64, n->mb, VA_B + 1000, big);

    /* FETCH_AND_ADD and CMP_AND_SWP on b's memory. */
    v = 40;
    memcpy(fv_mr_ptr(n->mb, VA_B + 8 * 100), &v, 8);
    s = sge(n->ma, VA_A + 8 * 10, 8);
    h = wqe(0xa4, PVRDMA_WR_ATOMIC_FETCH_AND_ADD, 1);
    h.wr.atomic.remote_addr = VA_B + 8 * 100;
    h.wr.atomic.rkey = n->mb->rkey;
    h.wr.atomic.compare_add = 2;
    fv_post_send(n->a, &h, &s, 1);
    fv_ring_sq(n->a);
    expect(wait_cqe(n, n->cqa), 0xa4, PVRDMA_WC_FETCH_ADD,
           PVRDMA_WC_SUCCESS, 8);
    memcpy(&v, fv_mr_ptr(n->ma, VA_A + 8 * 10), 8);
    assert_int_equal(v, 40);
    memcpy(&v, fv_mr_ptr(n->mb, VA_B + 8 * 100), 8);
    assert_int_equal(v, 42);
    h = wqe(0xa5, PVRDMA_WR_ATOMIC_CMP_AND_SWP, 1);
    h.wr.atomic.remote_addr = VA_B + 8 * 100;
    h.wr.atomic.rkey = n->mb->rkey;
    h.wr.atomic.compare_add = 42;
    h.wr.atomic.swap = 7;
    fv_post_send(n->a, &h, &s, 1);
    fv_ring_sq(n->a);
    expect(wait_cqe(n, n->cqa), 0xa5, PVRDMA_WC_COMP_SWAP,
           PVRDMA_WC_SUCCESS, 8);
    memcpy(&v, fv_mr_ptr(n->mb, VA_B + 8 * 100), 8);
    assert_int_equal(v, 7);

    /* ATOMIC_WRITE: its 8 bytes stored on b's memory, nothing read. */
    h = wqe(0xa8, PVRDMA_WR_ATOMIC_WRITE, 0);
    h.wr.atomic.remote_addr = VA_B + 8 * 100;
    h.wr.atomic.rkey = n->mb->rkey;
    h.wr.atomic.swap = 0x0102030405060708ull;
    fv_post_send(n->a, &h, NULL, 0);
    fv_ring_sq(n->a);
    expect(wait_cqe(n, n->cqa), 0xa8, PVRDMA_WC_ATOMIC_WRITE,
           PVRDMA_WC_SUCCESS, 8);
    memcpy(&v, fv_mr_ptr(n->mb, VA_B + 8 * 100), 8);
    assert_int_equal(v, 0x0102030405060708ull);

    /* Zero-length WRITE_WITH_IMM consumes a receive WQE. */
    fv_post_recv(n->b, 0xb2, NULL, 0);
    fv_ring_rq(n->b);
    h = wqe(0xa6, PVRDMA_WR_RDMA_WRITE_WITH_IMM, 0);
    h.ex.imm_data = 5;
    fv_post_send(n->a, &h, NULL, 0);
    fv_ring_sq(n->a);
    expect(wait_cqe(n, n->cqa), 0xa6, PVRDMA_WC_RDMA_WRITE,
           PVRDMA_WC_SUCCESS, 0);
    expect(wait_cqe(n, n->cqb), 0xb2, PVRDMA_WC_RECV_RDMA_WITH_IMM,
           PVRDMA_WC_SUCCESS, 0);

    /* The other way round: b sends to a. */
    fv_mr_fill(n->mb, VA_B, 3000, 13);
    r = sge(n->ma, VA_A, 4096);
    fv_post_recv(n->a, 0xa7, &r, 1);
    fv_ring_rq(n->a);
    s = sge(n->mb, VA_B, 3000);
    h = wqe(0xb3, PVRDMA_WR_SEND, 1);
    fv_post_send(n->b, &h, &s, 1);
    fv_ring_sq(n->b);
    expect(wait_cqe(n, n->cqb), 0xb3, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS,
           3000);
    expect(wait_cqe(n, n->cqa), 0xa7, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS,
           3000);
    assert_true(fv_mr_check(n->ma, VA_A, 3000, 13));

    assert_int_equal(n->fa->guest_errors, 0);
    assert_int_equal(n->fb->guest_errors, 0);
}

static void do_ops(bool shm)
{
    Net *n = net_new(shm);

    do_ops_on(n);
    net_free(n);
}

static void test_ops_shm(void **state)
{
    (void)state;
    do_ops(true);
}

static void test_ops_inline(void **state)
{
    (void)state;
    do_ops(false);
}

/* ---- counters (the device's stats) ------------------------------------ */

static PvrdmaLinkStats link_stats(Host *h)
{
    PvrdmaLinkStats st;

    assert_int_equal(pvrdma_fabric_link_stats(h->fab, &st, 1), 1);
    return st;
}

/*
 * A 4 KiB WRITE: the requester's link counts its REQ and DATA frames
 * (on shm links the payload goes through the data ring and counts
 * there), the responder's the ACK (and a CREDIT for the ring's bytes);
 * what one side counts out the other counts in; the request is counted
 * outstanding until answered.
 */
static void do_counters(bool shm)
{
    Net *n = net_new(shm);
    const uint32_t len = 4096;
    const uint64_t hdr = PVRDMA_LINK_HDR_SIZE;
    PvrdmaLinkStats a0, b0, a1, b1;
    struct pvrdma_sge s = sge(n->ma, VA_A, len);
    struct pvrdma_sq_wqe_hdr h = wqe(1, PVRDMA_WR_RDMA_WRITE, 1);
    uint64_t ca0[PVRDMA_CTR_NUM], cb0[PVRDMA_CTR_NUM];
    uint64_t ca1[PVRDMA_CTR_NUM], cb1[PVRDMA_CTR_NUM];
    unsigned i;

    fg_counters(n->fa, ca0);
    fg_counters(n->fb, cb0);
    a0 = link_stats(n->ha);
    b0 = link_stats(n->hb);
    assert_true(a0.up && b0.up);
    assert_int_equal(a0.shm, shm);
    assert_string_equal(a0.name, "test-a");
    /* (HELLO and GIDS went both ways) */
    assert_true(a0.frames_out >= 2 && a0.frames_out == b0.frames_in);
    assert_true(a0.bytes_out == b0.bytes_in && b0.bytes_out == a0.bytes_in);

    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = n->mb->rkey;
    fv_post_send(n->a, &h, &s, 1);
    fv_ring_sq(n->a);
    a1 = link_stats(n->ha);
    assert_int_equal(a1.requests_out, 1);
    assert_int_equal(a1.frames_out - a0.frames_out, 2);
    assert_int_equal(a1.bytes_out - a0.bytes_out,
                     2 * hdr + PVRDMA_LINK_REQ_SIZE +
                     (shm ? PVRDMA_LINK_SHM_DATA_SIZE : 0) + len);
    expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS,
           len);
    run(n->ha, n->hb, 3);
    a1 = link_stats(n->ha);
    b1 = link_stats(n->hb);
    assert_int_equal(a1.requests_out, 0);
    assert_int_equal(a1.streams_out, 0);
    assert_int_equal(b1.frames_in - b0.frames_in, 2);
    assert_int_equal(b1.bytes_in - b0.bytes_in, a1.bytes_out - a0.bytes_out);
    /* ACK, and on shm a CREDIT giving the ring's bytes back */
    assert_int_equal(b1.frames_out - b0.frames_out, shm ? 2 : 1);
    assert_int_equal(b1.bytes_out - b0.bytes_out,
                     hdr + PVRDMA_LINK_ACK_SIZE +
                     (shm ? hdr + PVRDMA_LINK_CREDIT_SIZE : 0));
    assert_int_equal(a1.frames_in, b1.frames_out);
    assert_int_equal(a1.bytes_in, b1.bytes_out);
    assert_int_equal(a1.kicks_out, b1.kicks_in);
    assert_int_equal(b1.kicks_out, a1.kicks_in);

    /* The ports' counters: 4 packets at path MTU 1024, the link up. */
    fg_counters(n->fa, ca1);
    fg_counters(n->fb, cb1);
    for (i = 0; i < PVRDMA_CTR_NUM; i++) {
        ca1[i] -= ca0[i];
        cb1[i] -= cb0[i];
    }
    assert_int_equal(ca1[PVRDMA_CTR_SENT_PKTS], 4);
    assert_int_equal(ca1[PVRDMA_CTR_SENT_BYTES], len);
    assert_int_equal(ca1[PVRDMA_CTR_RDMA_WRITES], 1);
    assert_int_equal(ca1[PVRDMA_CTR_RCVD_PKTS], 0);
    assert_int_equal(cb1[PVRDMA_CTR_RCVD_PKTS], 4);
    assert_int_equal(cb1[PVRDMA_CTR_RCVD_BYTES], len);
    assert_int_equal(cb1[PVRDMA_CTR_RDMA_WRITES_RCVD], 1);
    assert_int_equal(cb1[PVRDMA_CTR_SENT_PKTS], 0);
    assert_int_equal(ca0[PVRDMA_CTR_LINKS_UP], 1);
    assert_int_equal(cb0[PVRDMA_CTR_LINKS_UP], 1);
    assert_int_equal(ca0[PVRDMA_CTR_LINK_DOWNED], 0);
    /* The link goes: a level of 0 links, one that went down. */
    pvrdma_link_close(n->ha->fab->links->data, "test");
    fg_counters(n->fa, ca1);
    assert_int_equal(ca1[PVRDMA_CTR_LINKS_UP], 0);
    assert_int_equal(ca1[PVRDMA_CTR_LINK_DOWNED], 1);
    net_free(n);
}

static void test_counters_shm(void **state)
{
    (void)state;
    do_counters(true);
}

static void test_counters_inline(void **state)
{
    (void)state;
    do_counters(false);
}

/* Many messages in both directions at once: streams share the link. */
static void test_both_ways_busy(void **state)
{
    Net *n = net_new(true);
    uint32_t len = 100 * 1024;
    struct pvrdma_sge s, r;
    struct pvrdma_sq_wqe_hdr h;
    unsigned i;

    (void)state;
    for (i = 0; i < 5; i++) {
        fv_mr_fill(n->ma, VA_A, len, 20 + i);
        fv_mr_fill(n->mb, VA_B + 110 * 1024, len, 40 + i);
        r = sge(n->mb, VA_B, len);
        fv_post_recv(n->b, i, &r, 1);
        fv_ring_rq(n->b);
        r = sge(n->ma, VA_A + 110 * 1024, len);
        fv_post_recv(n->a, i, &r, 1);
        fv_ring_rq(n->a);
        s = sge(n->ma, VA_A, len);
        h = wqe(i, PVRDMA_WR_SEND, 1);
        fv_post_send(n->a, &h, &s, 1);
        s = sge(n->mb, VA_B + 110 * 1024, len);
        fv_post_send(n->b, &h, &s, 1);
        fv_ring_sq(n->a);
        fv_ring_sq(n->b);
        /* two CQEs on each side, in either order */
        wait_cqe(n, n->cqa);
        wait_cqe(n, n->cqa);
        wait_cqe(n, n->cqb);
        wait_cqe(n, n->cqb);
        assert_true(fv_mr_check(n->mb, VA_B, len, 20 + i));
        assert_true(fv_mr_check(n->ma, VA_A + 110 * 1024, len, 40 + i));
    }
    net_free(n);
}

/* ---- errors across a link -------------------------------------------- */

static void test_remote_errors(void **state)
{
    Net *n = net_new(false);
    struct pvrdma_sge s;
    struct pvrdma_sq_wqe_hdr h;
    uint32_t t, info;

    (void)state;
    /* A bad rkey: REM_ACCESS_ERR here, the responder QP goes to ERR. */
    s = sge(n->ma, VA_A, 100000);
    h = wqe(1, PVRDMA_WR_RDMA_WRITE, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = n->mb->rkey ^ 0x100;
    fv_post_send(n->a, &h, &s, 1);
    fv_ring_sq(n->a);
    expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_RDMA_WRITE,
           PVRDMA_WC_REM_ACCESS_ERR, 0);
    assert_int_equal(fv_qp_state(n->b), PVRDMA_QPS_ERR);
    assert_true(fv_async_next(n->fb, &t, &info));
    assert_int_equal(t, PVRDMA_EQE_TYPE_QP_ACCESS_ERR);
    net_free(n);
}

/*
 * UC across a link (shared memory): what the peer drops (no receive WQE,
 * a bad rkey) completes SUCCESS here and leaves the peer's QP as it was;
 * then a SEND arrives, data checked.
 */
static void test_uc_link(void **state)
{
    Net *n = net_new(true);
    FvQp *ua = fv_qp_new(n->fa, PVRDMA_QPT_UC, n->pda, n->cqa, n->cqa, NULL,
                         16, 2, false);
    FvQp *ub = fv_qp_new(n->fb, PVRDMA_QPT_UC, n->pdb, n->cqb, n->cqb, NULL,
                         16, 2, false);
    struct pvrdma_sge s, r;
    struct pvrdma_sq_wqe_hdr h;

    (void)state;
    fv_connect(ua, ub, &conn_opts);
    fv_mr_fill(n->ma, VA_A, 5000, 9);
    s = sge(n->ma, VA_A, 5000);
    h = wqe(1, PVRDMA_WR_SEND, 1);
    fv_post_send(ua, &h, &s, 1);
    h = wqe(2, PVRDMA_WR_RDMA_WRITE, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = n->mb->rkey ^ 0x100;
    fv_post_send(ua, &h, &s, 1);
    fv_ring_sq(ua);
    expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 5000);
    expect(wait_cqe(n, n->cqa), 2, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS,
           5000);
    assert_false(fv_cq_poll(n->cqb, &(struct pvrdma_cqe){ 0 }));
    assert_int_equal(fv_qp_state(ub), PVRDMA_QPS_RTS);
    assert_int_equal(*fv_mr_ptr(n->mb, VA_B), 0);

    r = sge(n->mb, VA_B, 8192);
    fv_post_recv(ub, 3, &r, 1);
    fv_ring_rq(ub);
    h = wqe(4, PVRDMA_WR_SEND, 1);
    fv_post_send(ua, &h, &s, 1);
    fv_ring_sq(ua);
    expect(wait_cqe(n, n->cqa), 4, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 5000);
    expect(wait_cqe(n, n->cqb), 3, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS, 5000);
    assert_true(fv_mr_check(n->mb, VA_B, 5000, 9));
    g_free(ua);
    g_free(ub);
    net_free(n);
}

/* No receive WQE: RNR NAK; posting one wakes the requester at once. */
static void test_rnr_then_recv(void **state)
{
    Net *n = net_new(true);
    struct pvrdma_sge s, r;
    struct pvrdma_sq_wqe_hdr h;

    (void)state;
    fv_mr_fill(n->ma, VA_A, 5000, 3);
    s = sge(n->ma, VA_A, 5000);
    h = wqe(1, PVRDMA_WR_SEND, 1);
    fv_post_send(n->a, &h, &s, 1);
    fv_ring_sq(n->a);
    run(n->ha, n->hb, 50);
    assert_false(fv_cq_poll(n->cqa, &(struct pvrdma_cqe){ 0 }));
    assert_true(pvrdma_core_rnr_waiting(pvrdma_table_lookup(
                    &n->fa->core->qp_tbl, n->a->handle)));
    r = sge(n->mb, VA_B, 8192);
    fv_post_recv(n->b, 2, &r, 1);
    fv_ring_rq(n->b);
    /* No clock moves: only RECV_POSTED can retry it. */
    expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 5000);
    expect(wait_cqe(n, n->cqb), 2, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS, 5000);
    assert_true(fv_mr_check(n->mb, VA_B, 5000, 3));
    /* traced: the wait ended by the receive, not by the timer */
    assert_int_equal(n->fa->rnr_waits, 1);
    assert_int_equal(n->fa->rnr_kicks, 1);
    assert_int_equal(n->fa->rnr_timeouts, 0);
    net_free(n);
}

/*
 * Datagrams across a link: a UD SEND_WITH_IMM lands with its GRH, the
 * sender completes; one to a QP the peer does not have is lost and still
 * completes successfully at the sender.
 */
static void do_ud_link(bool shm)
{
    Net *n = net_new(shm);
    FvQp *ua = fv_qp_new(n->fa, PVRDMA_QPT_UD, n->pda, n->cqa, n->cqa, NULL,
                         16, 2, false);
    FvQp *ub = fv_qp_new(n->fb, PVRDMA_QPT_UD, n->pdb, n->cqb, n->cqb, NULL,
                         16, 2, false);
    struct pvrdma_sge sa = sge(n->ma, VA_A, 1000);
    struct pvrdma_sge sb = sge(n->mb, VA_B, 40 + 1000);
    struct pvrdma_sq_wqe_hdr h = wqe(1, PVRDMA_WR_SEND_WITH_IMM, 1);
    struct pvrdma_cqe c;
    unsigned i;

    assert_int_equal(fg_qp_to_rts(n->fa, ua->handle, PVRDMA_QPT_UD), 0);
    assert_int_equal(fg_qp_to_rts(n->fb, ub->handle, PVRDMA_QPT_UD), 0);
    for (i = 0; i < 1000; i++) {
        *fv_mr_ptr(n->ma, VA_A + i) = i * 3 + 1;
    }
    fv_post_recv(ub, 7, &sb, 1);
    fv_ring_rq(ub);
    h.ex.imm_data = 0x5a5a;
    h.wr.ud.remote_qpn = ub->qpn;
    h.wr.ud.remote_qkey = 0x11111111;
    h.wr.ud.av.hop_limit = 9;
    fg_test_gid(0, h.wr.ud.av.dgid);
    fv_post_send(ua, &h, &sa, 1);
    fv_ring_sq(ua);
    c = wait_cqe(n, n->cqb);
    expect(c, 7, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS, 40 + 1000);
    assert_int_equal(c.src_qp, ua->qpn);
    assert_int_equal(c.wc_flags, PVRDMA_WC_GRH | PVRDMA_WC_WITH_IMM |
                                 PVRDMA_WC_WITH_NETWORK_HDR_TYPE);
    assert_int_equal(c.imm_data, 0x5a5a);
    assert_int_equal(*fv_mr_ptr(n->mb, VA_B) >> 4, 6);     /* IPv6 */
    assert_int_equal(*fv_mr_ptr(n->mb, VA_B + 7), 9);       /* hop limit */
    expect_same(n->ma, VA_A, n->mb, VA_B + 40, 1000);
    expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 1000);
    /* No such QP over there: lost, and a success here. */
    h.wr_id = 2;
    h.wr.ud.remote_qpn = ub->qpn + 77;
    fv_post_send(ua, &h, &sa, 1);
    fv_ring_sq(ua);
    expect(wait_cqe(n, n->cqa), 2, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 1000);
    run(n->ha, n->hb, 5);
    assert_false(fv_cq_poll(n->cqb, &c));
    g_free(ua);
    g_free(ub);
    net_free(n);
}

static void test_ud_link_shm(void **state)
{
    (void)state;
    do_ud_link(true);
}

static void test_ud_link_inline(void **state)
{
    (void)state;
    do_ud_link(false);
}


/*
 * Multicast across a link: b's QP joins a group, which its host
 * announces (MGIDS); a datagram to the group from a's QP (QPN 0xFFFFFF)
 * goes as one MCAST frame and lands in b's receive, GRH to the group; a
 * QP of b's host not attached gets nothing; after b leaves, the next is
 * not even sent (nobody announced), and a's send still completes.
 */
static void do_mcast_link(bool shm)
{
    static const uint8_t mgid[16] = { [10] = 0xff, [11] = 0xff,
                                      239, 9, 8, 7 };
    Net *n = net_new(shm);
    FvQp *ua = fv_qp_new(n->fa, PVRDMA_QPT_UD, n->pda, n->cqa, n->cqa, NULL,
                         16, 2, false);
    FvQp *ub = fv_qp_new(n->fb, PVRDMA_QPT_UD, n->pdb, n->cqb, n->cqb, NULL,
                         16, 2, false);
    FvQp *uc = fv_qp_new(n->fb, PVRDMA_QPT_UD, n->pdb, n->cqb, n->cqb, NULL,
                         16, 2, false);
    struct pvrdma_cmd_mcast m = { .hdr.cmd = PVRDMA_CMD_ATTACH_MCAST };
    struct pvrdma_sge sa = sge(n->ma, VA_A, 3000);
    struct pvrdma_sge sb = sge(n->mb, VA_B, 40 + 3000);
    struct pvrdma_sge sc = sge(n->mb, VA_B + 0x4000, 40 + 3000);
    struct pvrdma_sq_wqe_hdr h = wqe(1, PVRDMA_WR_SEND_WITH_IMM, 1);
    PvrdmaLinkStats st;
    struct pvrdma_cqe c;
    unsigned i;

    assert_int_equal(fg_qp_to_rts(n->fa, ua->handle, PVRDMA_QPT_UD), 0);
    assert_int_equal(fg_qp_to_rts(n->fb, ub->handle, PVRDMA_QPT_UD), 0);
    assert_int_equal(fg_qp_to_rts(n->fb, uc->handle, PVRDMA_QPT_UD), 0);
    m.qp_handle = ub->handle;
    memcpy(m.mgid, mgid, 16);
    assert_int_equal(fg_cmd(n->fb, &m, sizeof(m), NULL), 0);
    run(n->ha, n->hb, 3);           /* MGIDS */
    for (i = 0; i < 3000; i++) {
        *fv_mr_ptr(n->ma, VA_A + i) = i * 5 + 3;
    }
    fv_post_recv(ub, 7, &sb, 1);
    fv_ring_rq(ub);
    fv_post_recv(uc, 8, &sc, 1);
    fv_ring_rq(uc);
    h.ex.imm_data = 0x4d43;
    h.wr.ud.remote_qpn = PVRDMA_QPN_MULTICAST;
    h.wr.ud.remote_qkey = 0x11111111;
    h.wr.ud.av.hop_limit = 1;
    memcpy(h.wr.ud.av.dgid, mgid, 16);
    fv_post_send(ua, &h, &sa, 1);
    fv_ring_sq(ua);
    expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 3000);
    c = wait_cqe(n, n->cqb);
    expect(c, 7, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS, 40 + 3000);
    assert_int_equal(c.qp, ub->handle);
    assert_int_equal(c.src_qp, ua->qpn);
    assert_int_equal(c.imm_data, 0x4d43);
    assert_memory_equal(fv_mr_ptr(n->mb, VA_B + 24), mgid, 16);
    expect_same(n->ma, VA_A, n->mb, VA_B + 40, 3000);
    run(n->ha, n->hb, 5);
    assert_false(fv_cq_poll(n->cqb, &c));       /* uc: not attached */

    /* b leaves: the next datagram is not sent over the link at all. */
    m.hdr.cmd = PVRDMA_CMD_DETACH_MCAST;
    assert_int_equal(fg_cmd(n->fb, &m, sizeof(m), NULL), 0);
    run(n->ha, n->hb, 5);
    fv_post_recv(ub, 9, &sb, 1);
    fv_ring_rq(ub);
    st = link_stats(n->ha);
    h.wr_id = 2;
    fv_post_send(ua, &h, &sa, 1);
    fv_ring_sq(ua);
    expect(wait_cqe(n, n->cqa), 2, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 3000);
    run(n->ha, n->hb, 5);
    assert_false(fv_cq_poll(n->cqb, &c));
    assert_int_equal(link_stats(n->ha).frames_out, st.frames_out);
    assert_int_equal(n->fa->guest_errors + n->fb->guest_errors, 0);
    g_free(ua);
    g_free(ub);
    g_free(uc);
    net_free(n);
}

static void test_mcast_link_shm(void **state)
{
    (void)state;
    do_mcast_link(true);
}

static void test_mcast_link_inline(void **state)
{
    (void)state;
    do_mcast_link(false);
}

/*
 * A send doorbell behind an outstanding request reads the link itself:
 * the answer waiting in the socket completes the request and lets the
 * next one go without the requester's event loop.
 */
static void test_doorbell_polls_link(void **state)
{
    Net *n = net_new(true);
    struct pvrdma_sge s = sge(n->ma, VA_A, 64);
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_cqe c;
    Host *only_b[1];
    unsigned i;

    (void)state;
    only_b[0] = n->hb;
    h = wqe(1, PVRDMA_WR_RDMA_WRITE, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = n->mb->rkey;
    fv_post_send(n->a, &h, &s, 1);
    fv_ring_sq(n->a);
    /* b answers; a's event loop does not run. */
    for (i = 0; i < 10; i++) {
        hosts_step(only_b, 1, 1);
    }
    assert_false(fv_cq_poll(n->cqa, &c));
    h.wr_id = 2;
    fv_post_send(n->a, &h, &s, 1);
    fv_ring_sq(n->a);
    assert_true(fv_cq_poll(n->cqa, &c));
    expect(c, 1, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 64);
    expect(wait_cqe(n, n->cqa), 2, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS,
           64);
    net_free(n);
}

/*
 * A guest polling an empty CQ (CQ_POLL doorbell) takes in what its peer
 * sent, without its event loop: the responder's poll delivers a SEND and
 * answers it, the requester's poll completes it.  With nothing pending,
 * a poll reads nothing.
 */
static void test_cq_poll_takes_in(void **state)
{
    Net *n = net_new(true);
    struct pvrdma_sge sa = sge(n->ma, VA_A, 100), sb = sge(n->mb, VA_B, 128);
    struct pvrdma_sq_wqe_hdr h = wqe(1, PVRDMA_WR_SEND, 1);
    struct pvrdma_cqe c;
    unsigned i;

    (void)state;
    for (i = 0; i < 100; i++) {
        *fv_mr_ptr(n->ma, VA_A + i) = i * 7 + 1;
    }
    fv_post_recv(n->b, 9, &sb, 1);
    fv_ring_rq(n->b);
    fv_cq_poll_doorbell(n->cqb);
    assert_false(fv_cq_poll(n->cqb, &c));
    fv_post_send(n->a, &h, &sa, 1);
    fv_ring_sq(n->a);
    assert_false(fv_cq_poll(n->cqb, &c));
    fv_cq_poll_doorbell(n->cqb);
    assert_true(fv_cq_poll(n->cqb, &c));
    expect(c, 9, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS, 100);
    expect_same(n->ma, VA_A, n->mb, VA_B, 100);
    assert_false(fv_cq_poll(n->cqa, &c));
    fv_cq_poll_doorbell(n->cqa);
    assert_true(fv_cq_poll(n->cqa, &c));
    expect(c, 1, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 100);
    net_free(n);
}

/* Whether the peer woke the process behind @fd (a kick byte waits). */
static bool kicked(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };

    return poll(&p, 1, 0) == 1;
}

/* A sends 16 bytes to B (a receive posted first), without any event loop. */
static void send_one(Net *n, uint64_t id)
{
    struct pvrdma_sge sa = sge(n->ma, VA_A, 16), sb = sge(n->mb, VA_B, 16);
    struct pvrdma_sq_wqe_hdr h = wqe(id, PVRDMA_WR_SEND, 1);

    fv_post_recv(n->b, id + 100, &sb, 1);
    fv_ring_rq(n->b);
    fv_post_send(n->a, &h, &sa, 1);
    fv_ring_sq(n->a);
}

static void cq_arm(FvCq *cq)
{
    pvrdma_core_uar_write(cq->fg->core, PVRDMA_UAR_CQ_OFFSET,
                          PVRDMA_DB_CQ_ARM | cq->handle);
}

/* Run both event loops until neither has a kick left to read. */
/* Both event loops quiet: no kick unread, no stream's linger on. */
static bool quiet(Net *n)
{
    return !kicked(n->sv[0]) && !kicked(n->sv[1]) &&
           !n->ha->fab->linger_at && !n->hb->fab->linger_at;
}

static void settle(Net *n)
{
    unsigned i;

    for (i = 0; i < 50 && !quiet(n); i++) {
        run(n->ha, n->hb, 1);
    }
    assert_true(quiet(n));
}

/*
 * A poll of an empty CQ promises the peer that this side looks without
 * a kick, but only while that polling goes on: a CQE landing in the CQ
 * (its poller got what it waited for), an arm (its poller goes to
 * sleep) end it, and an armed CQ's poll promises nothing.  While another
 * CQ polled within the window still waits, the promise stands.  The kick
 * is what a peer writes on the socket when no promise holds.
 */
static void test_cq_poll_promise_ends(void **state)
{
    Net *n = net_new(true);
    FvCq *idle = fv_cq_new(n->fb, 0, 16);
    struct pvrdma_cqe c;

    (void)state;
    /* polled, empty: A's SEND goes without a kick, B's next poll takes it */
    fv_cq_poll_doorbell(n->cqb);
    send_one(n, 1);
    assert_false(kicked(n->sv[1]));
    fv_cq_poll_doorbell(n->cqb);
    assert_true(fv_cq_poll(n->cqb, &c));
    expect(c, 101, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS, 16);
    /* that CQE ended the promise: the next SEND kicks */
    send_one(n, 2);
    assert_true(kicked(n->sv[1]));
    expect(wait_cqe(n, n->cqb), 102, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS, 16);
    expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 16);
    expect(wait_cqe(n, n->cqa), 2, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 16);
    settle(n);

    /* polled, then armed: the arm ends the promise */
    fv_cq_poll_doorbell(n->cqb);
    cq_arm(n->cqb);
    send_one(n, 3);
    assert_true(kicked(n->sv[1]));
    expect(wait_cqe(n, n->cqb), 103, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS, 16);
    expect(wait_cqe(n, n->cqa), 3, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 16);
    settle(n);

    /* armed, then polled empty: no promise */
    cq_arm(n->cqb);
    fv_cq_poll_doorbell(n->cqb);
    send_one(n, 4);
    assert_true(kicked(n->sv[1]));
    expect(wait_cqe(n, n->cqb), 104, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS, 16);
    expect(wait_cqe(n, n->cqa), 4, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 16);
    settle(n);

    /*
     * Two CQs polled: a CQE in one leaves the other's promise; once that
     * one's window has passed, the promise is gone.
     */
    fv_cq_poll_doorbell(idle);
    fv_cq_poll_doorbell(n->cqb);
    send_one(n, 5);
    assert_false(kicked(n->sv[1]));
    fv_cq_poll_doorbell(n->cqb);
    expect(wait_cqe(n, n->cqb), 105, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS, 16);
    send_one(n, 6);
    assert_false(kicked(n->sv[1]));
    fv_cq_poll_doorbell(idle);
    expect(wait_cqe(n, n->cqb), 106, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS, 16);
    expect(wait_cqe(n, n->cqa), 5, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 16);
    expect(wait_cqe(n, n->cqa), 6, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 16);
    settle(n);
    n->ha->now += PVRDMA_LINK_POLL_WINDOW_NS + 1;   /* one host clock */
    n->hb->now += PVRDMA_LINK_POLL_WINDOW_NS + 1;
    run(n->ha, n->hb, 2);
    send_one(n, 7);
    assert_true(kicked(n->sv[1]));
    expect(wait_cqe(n, n->cqb), 107, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS, 16);
    expect(wait_cqe(n, n->cqa), 7, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 16);
    settle(n);
    g_free(idle);
    net_free(n);
}

/* ---- several requests of a QP in flight -------------------------------- */

/* The requests @qp of @fg has out at its backend (the core's window). */
static uint32_t nout(FakeGuest *fg, FvQp *qp)
{
    return ((PvrdmaQp *)pvrdma_table_lookup(&fg->core->qp_tbl,
                                            qp->handle))->wq.nout;
}

/* Post (not ring) a WRITE of @len bytes from VA_A + @off to VA_B + @off. */
static void post_write(Net *n, uint64_t id, uint64_t off, uint32_t len,
                       uint32_t rkey)
{
    struct pvrdma_sge s = sge(n->ma, VA_A + off, len);
    struct pvrdma_sq_wqe_hdr h = wqe(id, PVRDMA_WR_RDMA_WRITE, 1);

    h.wr.rdma.remote_addr = VA_B + off;
    h.wr.rdma.rkey = rkey;
    fv_post_send(n->a, &h, &s, 1);
}

/*
 * One doorbell puts every WQE of a batch on the link at once (up to the
 * send queue's depth): WRITEs, SENDs, READs within max_rd_atomic (4 in
 * these tests) and atomics; they complete in order, every byte checked;
 * a READ behind a WRITE to the same bytes (no fence needed: the WRITE's
 * payload precedes the READ on the link) reads what the WRITE wrote.
 */
static void do_window(bool shm)
{
    Net *n = net_new(shm);
    struct pvrdma_sge s, r;
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_cqe c;
    uint64_t v = 100, i;

    fv_mr_fill(n->ma, VA_A, 16 * 4096, 21);
    for (i = 0; i < 8; i++) {
        post_write(n, i, i * 4096, 3000 + i, n->mb->rkey);
    }
    fv_ring_sq(n->a);
    assert_int_equal(nout(n->fa, n->a), 8);
    for (i = 0; i < 8; i++) {
        expect(wait_cqe(n, n->cqa), i, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_SUCCESS, 3000 + i);
        expect_same(n->ma, VA_A + i * 4096, n->mb, VA_B + i * 4096, 3000 + i);
    }

    /* SENDs, a WRITE, READs of it, atomics: a full queue of 16 */
    memcpy(fv_mr_ptr(n->mb, VA_B + 40 * 4096), &v, 8);
    for (i = 0; i < 4; i++) {
        r = sge(n->mb, VA_B + (20 + i) * 4096, 4096);
        fv_post_recv(n->b, 0xb0 + i, &r, 1);
    }
    fv_ring_rq(n->b);
    fv_mr_fill(n->ma, VA_A + 8 * 4096, 8 * 4096, 22);
    for (i = 0; i < 4; i++) {
        s = sge(n->ma, VA_A + (8 + i) * 4096, 1000 * (i + 1));
        h = wqe(0x10 + i, PVRDMA_WR_SEND, 1);
        fv_post_send(n->a, &h, &s, 1);
    }
    post_write(n, 0x14, 12 * 4096, 4096, n->mb->rkey);
    for (i = 0; i < 6; i++) {
        s = sge(n->ma, VA_A + (24 + i) * 4096, 2048);
        h = wqe(0x15 + i, PVRDMA_WR_RDMA_READ, 1);
        h.wr.rdma.remote_addr = VA_B + 12 * 4096 + i * 256;
        h.wr.rdma.rkey = n->mb->rkey;
        fv_post_send(n->a, &h, &s, 1);
    }
    for (i = 0; i < 5; i++) {
        s = sge(n->ma, VA_A + 31 * 4096 + i * 8, 8);
        h = wqe(0x1b + i, PVRDMA_WR_ATOMIC_FETCH_AND_ADD, 1);
        h.wr.atomic.remote_addr = VA_B + 40 * 4096;
        h.wr.atomic.rkey = n->mb->rkey;
        h.wr.atomic.compare_add = i + 1;
        fv_post_send(n->a, &h, &s, 1);
    }
    fv_ring_sq(n->a);
    /* the READs wait behind the payloads that are not out yet, or count */
    assert_true(nout(n->fa, n->a) >= 5 && nout(n->fa, n->a) <= 16);
    for (i = 0; i < 4; i++) {
        expect(wait_cqe(n, n->cqa), 0x10 + i, PVRDMA_WC_SEND,
               PVRDMA_WC_SUCCESS, 1000 * (i + 1));
        expect(wait_cqe(n, n->cqb), 0xb0 + i, PVRDMA_WC_RECV,
               PVRDMA_WC_SUCCESS, 1000 * (i + 1));
        expect_same(n->ma, VA_A + (8 + i) * 4096, n->mb,
                    VA_B + (20 + i) * 4096, 1000 * (i + 1));
    }
    expect(wait_cqe(n, n->cqa), 0x14, PVRDMA_WC_RDMA_WRITE,
           PVRDMA_WC_SUCCESS, 4096);
    for (i = 0; i < 6; i++) {
        expect(wait_cqe(n, n->cqa), 0x15 + i, PVRDMA_WC_RDMA_READ,
               PVRDMA_WC_SUCCESS, 2048);
        expect_same(n->ma, VA_A + (24 + i) * 4096, n->ma,
                    VA_A + 12 * 4096 + i * 256, 2048);
    }
    for (i = 0; i < 5; i++) {
        c = wait_cqe(n, n->cqa);
        expect(c, 0x1b + i, PVRDMA_WC_FETCH_ADD, PVRDMA_WC_SUCCESS, 8);
        memcpy(&v, fv_mr_ptr(n->ma, VA_A + 31 * 4096 + i * 8), 8);
        assert_int_equal(v, 100 + i * (i + 1) / 2);
    }
    memcpy(&v, fv_mr_ptr(n->mb, VA_B + 40 * 4096), 8);
    assert_int_equal(v, 115);
    assert_int_equal(n->fa->guest_errors, 0);
    assert_int_equal(n->fb->guest_errors, 0);
    net_free(n);
}

/* Bytes waiting to be read on @fd (kick bytes on a shm link's socket). */
static int queued(int fd)
{
    int n = 0;

    assert_int_equal(ioctl(fd, FIONREAD, &n), 0);
    return n;
}

/*
 * A sender kicks only a peer that took in everything before: frames
 * written while earlier ones still wait for the peer's event loop (one
 * kick is on its way) go without a kick of their own.
 */
static void test_kick_once(void **state)
{
    Net *n = net_new(true);
    uint64_t i;

    (void)state;
    fv_mr_fill(n->ma, VA_A, 4 * 4096, 30);
    for (i = 0; i < 4; i++) {
        post_write(n, i, i * 4096, 100, n->mb->rkey);
        fv_ring_sq(n->a);
    }
    assert_int_equal(nout(n->fa, n->a), 4);
    assert_int_equal(queued(n->sv[1]), 1);
    for (i = 0; i < 4; i++) {
        expect(wait_cqe(n, n->cqa), i, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_SUCCESS, 100);
        expect_same(n->ma, VA_A + i * 4096, n->mb, VA_B + i * 4096, 100);
    }
    settle(n);
    post_write(n, 4, 0, 100, n->mb->rkey);
    fv_ring_sq(n->a);
    assert_int_equal(queued(n->sv[1]), 1);
    expect(wait_cqe(n, n->cqa), 4, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS,
           100);
    net_free(n);
}

/*
 * A stream into a guest that does not poll: an event-loop wakeup that
 * takes in two requests or more lingers, so the peer's next requests go
 * without kicks and are taken in by the linger's looks, except the one
 * that fills its QP's window (here its READ window: the QP then waits,
 * so it kicks).  A look that
 * finds no request ends the linger; one request per wakeup (a ping-pong)
 * starts none.
 */
static void test_stream_linger(void **state)
{
    Net *n = net_new(true);
    PvrdmaFabric *fb = n->hb->fab;
    int64_t t0;
    uint64_t i;

    (void)state;
    fv_mr_fill(n->ma, VA_A, 8 * 4096, 32);
    fv_mr_fill(n->mb, VA_B + 30 * 4096, 4 * 4096, 33);
    /* one wakeup, two requests: the linger starts */
    for (i = 0; i < 2; i++) {
        post_write(n, i, i * 4096, 100, n->mb->rkey);
        fv_ring_sq(n->a);
    }
    assert_int_equal(queued(n->sv[1]), 1);
    t0 = n->hb->now;
    run(n->hb, NULL, 1);
    assert_int_equal(queued(n->sv[1]), 0);
    assert_int_equal(fb->linger_at, t0 + PVRDMA_FABRIC_LINGER_NS);
    assert_int_equal(n->hb->timer, fb->linger_at);
    /* each request waits for the next look, which renews the linger */
    for (i = 2; i < 6; i++) {
        post_write(n, i, i * 4096, 100, n->mb->rkey);
        fv_ring_sq(n->a);
        assert_false(kicked(n->sv[1]));
        run(n->hb, NULL, 1);
        assert_int_equal(n->hb->now, t0 + (i - 1) * PVRDMA_FABRIC_LINGER_NS);
        assert_int_equal(fb->linger_at, t0 + i * PVRDMA_FABRIC_LINGER_NS);
        expect_same(n->ma, VA_A + i * 4096, n->mb, VA_B + i * 4096, 100);
    }
    /*
     * Still lingering (B's loop not run since): READs go without a kick
     * until the one that fills the QP's READ window (max_rd_atomic 4).
     */
    assert_true(fb->linger_at > n->hb->now);
    for (i = 0; i < 4; i++) {
        struct pvrdma_sge r = sge(n->ma, VA_A + (20 + i) * 4096, 512);
        struct pvrdma_sq_wqe_hdr h = wqe(100 + i, PVRDMA_WR_RDMA_READ, 1);

        assert_false(kicked(n->sv[1]));
        h.wr.rdma.remote_addr = VA_B + (30 + i) * 4096;
        h.wr.rdma.rkey = n->mb->rkey;
        fv_post_send(n->a, &h, &r, 1);
        fv_ring_sq(n->a);
    }
    assert_int_equal(queued(n->sv[1]), 1);
    for (i = 0; i < 6; i++) {
        expect(wait_cqe(n, n->cqa), i, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_SUCCESS, 100);
    }
    for (i = 0; i < 4; i++) {
        expect(wait_cqe(n, n->cqa), 100 + i, PVRDMA_WC_RDMA_READ,
               PVRDMA_WC_SUCCESS, 512);
        expect_same(n->ma, VA_A + (20 + i) * 4096, n->mb,
                    VA_B + (30 + i) * 4096, 512);
    }
    /* a look that finds no request ends it: withdrawn, no timer left */
    for (i = 0; i < 10 && fb->linger_at; i++) {
        run(n->hb, NULL, 1);
    }
    assert_int_equal(fb->linger_at, 0);
    /* no look left (only the tick that gives idle rings back) */
    assert_true(n->hb->timer == -1 ||
                n->hb->timer - n->hb->now > PVRDMA_LINK_POLL_WINDOW_NS);
    settle(n);
    /* one request per wakeup: kicked, and no linger after it */
    post_write(n, 6, 6 * 4096, 100, n->mb->rkey);
    fv_ring_sq(n->a);
    assert_int_equal(queued(n->sv[1]), 1);
    run(n->hb, NULL, 1);
    assert_int_equal(queued(n->sv[1]), 0);
    assert_int_equal(fb->linger_at, 0);
    expect(wait_cqe(n, n->cqa), 6, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS,
           100);
    expect_same(n->ma, VA_A + 6 * 4096, n->mb, VA_B + 6 * 4096, 100);
    net_free(n);
}

/* The host memory the rings of @h's only link hold now (shm links). */
static uint64_t ring_bytes(Host *h, uint64_t *shrinks)
{
    PvrdmaLinkStats st;

    if (pvrdma_fabric_link_stats(h->fab, &st, 1) != 1) {
        fail_msg("links: %u, reports %u, last report %s", pvrdma_fabric_link_stats(h->fab, &st, 1), h->reports, h->last_report);
    }
    assert_true(st.shm);
    *shrinks = st.shrinks;
    return st.ring_bytes;
}

/* A 64-byte WRITE from @qp of A at @off into B's MR, same offset. */

/*
 * A shm link gives its rings' pages back once it was quiet for
 * PVRDMA_LINK_SHRINK_NS: after WRITEs and READs that filled the data
 * rings both ways, each side's memfd keeps only its counters page; not
 * while a stream is open nor before the quiet time, and the link works
 * as before on fresh pages (every byte checked).
 */
static void test_ring_shrink(void **state)
{
    Net *n = net_new(true);
    uint32_t len = 48 * 1024;
    struct pvrdma_sge r;
    struct pvrdma_sq_wqe_hdr h;
    uint64_t sa, sb, round;

    (void)state;
    for (round = 0; round < 2; round++) {
        fv_mr_fill(n->ma, VA_A, len, 60 + round);
        fv_mr_fill(n->mb, VA_B + 100 * 1024, len, 70 + round);
        post_write(n, 1, 0, len, n->mb->rkey);
        fv_ring_sq(n->a);
        r = sge(n->ma, VA_A + 100 * 1024, len);
        h = wqe(2, PVRDMA_WR_RDMA_READ, 1);
        h.wr.rdma.remote_addr = VA_B + 100 * 1024;
        h.wr.rdma.rkey = n->mb->rkey;
        fv_post_send(n->a, &h, &r, 1);
        fv_ring_sq(n->a);
        expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_SUCCESS, len);
        expect(wait_cqe(n, n->cqa), 2, PVRDMA_WC_RDMA_READ,
               PVRDMA_WC_SUCCESS, len);
        assert_true(fv_mr_check(n->mb, VA_B, len, 60 + round));
        assert_true(fv_mr_check(n->ma, VA_A + 100 * 1024, len, 70 + round));
        settle(n);
        /* A's WRITE and B's READ response went through the data rings */
        assert_true(ring_bytes(n->ha, &sa) >= len);
        assert_true(ring_bytes(n->hb, &sb) >= len);
        assert_int_equal(sa, round);
        assert_int_equal(sb, round);
        /* quiet, but not long enough: kept */
        n->ha->now += PVRDMA_LINK_SHRINK_NS / 2;
        n->hb->now += PVRDMA_LINK_SHRINK_NS / 2;
        run(n->ha, n->hb, 3);
        assert_true(ring_bytes(n->ha, &sa) >= len);
        /* the ticks go on while pages are held, and give them back */
        for (int i = 0; i < 4; i++) {
            assert_true(ring_bytes(n->ha, &sa) <= 8192 || n->ha->timer >= 0);
            assert_true(ring_bytes(n->hb, &sb) <= 8192 || n->hb->timer >= 0);
            n->ha->now += PVRDMA_LINK_SHRINK_NS / 2;
            n->hb->now += PVRDMA_LINK_SHRINK_NS / 2;
            run(n->ha, n->hb, 3);
        }
        /* (this build's frame ring ends within the counters' page) */
        assert_true(ring_bytes(n->ha, &sa) <= 8192);
        assert_true(ring_bytes(n->hb, &sb) <= 8192);
        assert_int_equal(sa, round + 1);
        assert_int_equal(sb, round + 1);
        /* and no timer is left for them */
        assert_int_equal(n->ha->timer, -1);
        assert_int_equal(n->hb->timer, -1);
    }
    net_free(n);
}

static void post_write_on(Net *n, FvQp *qp, uint64_t id, uint64_t off)
{
    struct pvrdma_sge s = sge(n->ma, VA_A + off, 64);
    struct pvrdma_sq_wqe_hdr h = wqe(id, PVRDMA_WR_RDMA_WRITE, 1);

    h.wr.rdma.remote_addr = VA_B + off;
    h.wr.rdma.rkey = n->mb->rkey;
    fv_post_send(qp, &h, &s, 1);
    fv_ring_sq(qp);
}

/*
 * While the peer lingers, a request that fills its QP's window kicks only
 * when the window is shallow (PVRDMA_LINK_KICK_WINDOW: 16, 2 in this
 * build, whose frame ring holds 6 WRITEs): a QP of depth 4 fills its
 * window without a kick and the next look answers it; one of depth 2
 * kicks with the request that fills it.
 */
static void test_stream_linger_window(void **state)
{
    Net *n = net_new(true);
    FvQp *qp[2], *peer[2];
    PvrdmaFabric *fb = n->hb->fab;
    uint64_t i, k;

    (void)state;
    for (k = 0; k < 2; k++) {
        qp[k] = fv_qp_new(n->fa, PVRDMA_QPT_RC, n->pda, n->cqa, n->cqa, NULL,
                          4 >> k, 1, false);
        peer[k] = fv_qp_new(n->fb, PVRDMA_QPT_RC, n->pdb, n->cqb, n->cqb,
                            NULL, 4 >> k, 1, false);
        fv_connect(qp[k], peer[k], &conn_opts);
    }
    fv_mr_fill(n->ma, VA_A, 4096, 35);
    /* two WRITEs in one wakeup of B: it lingers */
    post_write_on(n, n->a, 0, 0);
    post_write_on(n, n->a, 1, 64);
    run(n->hb, NULL, 1);
    assert_int_equal(queued(n->sv[1]), 0);
    /*
     * Depth 4, then depth 2, B's loop running only for one look between
     * them (which finds WRITEs: it lingers on): only the second window's
     * last WRITE kicks.
     */
    for (k = 0; k < 2; k++) {
        assert_true(fb->linger_at > 0);
        for (i = 0; i < 4u >> k; i++) {
            assert_false(kicked(n->sv[1]));
            post_write_on(n, qp[k], 10 * k + 10 + i, 64 * (10 * k + 10 + i));
        }
        assert_int_equal(nout(n->fa, qp[k]), 4 >> k);
        assert_int_equal(queued(n->sv[1]), k);
        if (!k) {
            run(n->hb, NULL, 1);
        }
    }
    for (i = 0; i < 8; i++) {
        uint64_t id = i < 2 ? i : i < 6 ? i + 8 : i + 14;

        expect(wait_cqe(n, n->cqa), id, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_SUCCESS, 64);
    }
    expect_same(n->ma, VA_A, n->mb, VA_B, 2 * 64);
    expect_same(n->ma, VA_A + 640, n->mb, VA_B + 640, 4 * 64);
    expect_same(n->ma, VA_A + 1280, n->mb, VA_B + 1280, 2 * 64);
    settle(n);
    for (k = 0; k < 2; k++) {
        g_free(qp[k]);
        g_free(peer[k]);
    }
    net_free(n);
}

/* ---- send doorbells on demand (PVRDMA_EX_CAP_SQ_DB_HINT) ---------------- */

static uint32_t sq_hint(FvQp *qp)
{
    return fg_read32(qp->fg,
                     qp->pages[0] + PVRDMA_RING_STATE_SQ_DB_HINT_OFFSET);
}

/*
 * SKIP while requests of the RC QP are out on a link: WQEs posted then
 * without a doorbell go out when an answer comes, also one posted after
 * the answer reached the link but before the device read it; the last
 * answer clears it.  In ERR a post must ring.  x-sq-db-hint=off: never
 * written.
 */
static void test_sq_doorbell_hint(void **state)
{
    Net *n = net_new(true);
    PvrdmaCoreConfig cfg;
    FakeGuest *fg;
    FvCq *cq;
    FvQp *qp;
    uint32_t pd;
    uint64_t i;

    (void)state;
    assert_true(fg_caps(n->fa)->ex_comp_mask & PVRDMA_EX_CAP_SQ_DB_HINT);
    assert_int_equal(sq_hint(n->a), 0);
    fv_mr_fill(n->ma, VA_A, 8 * 4096, 34);
    post_write(n, 0, 0, 100, n->mb->rkey);
    fv_ring_sq(n->a);
    assert_int_equal(nout(n->fa, n->a), 1);
    assert_int_equal(sq_hint(n->a), PVRDMA_SQ_DB_SKIP);
    /* posted without a doorbell: out when the first answer comes */
    post_write(n, 1, 4096, 100, n->mb->rkey);
    post_write(n, 2, 2 * 4096, 100, n->mb->rkey);
    assert_int_equal(nout(n->fa, n->a), 1);
    for (i = 0; i < 3; i++) {
        expect(wait_cqe(n, n->cqa), i, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_SUCCESS, 100);
        expect_same(n->ma, VA_A + i * 4096, n->mb, VA_B + i * 4096, 100);
    }
    assert_int_equal(nout(n->fa, n->a), 0);
    assert_int_equal(sq_hint(n->a), 0);
    /* the guest reads SKIP and leaves the doorbell out, an answer waiting */
    post_write(n, 3, 3 * 4096, 100, n->mb->rkey);
    fv_ring_sq(n->a);
    assert_int_equal(sq_hint(n->a), PVRDMA_SQ_DB_SKIP);
    run(n->hb, NULL, 5);                /* B answers; A has not read it */
    post_write(n, 4, 4 * 4096, 100, n->mb->rkey);
    for (i = 3; i < 5; i++) {
        expect(wait_cqe(n, n->cqa), i, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_SUCCESS, 100);
        expect_same(n->ma, VA_A + i * 4096, n->mb, VA_B + i * 4096, 100);
    }
    assert_int_equal(sq_hint(n->a), 0);
    /* ERR with a request out: 0 at once (posts are flushed by doorbells) */
    post_write(n, 5, 5 * 4096, 100, n->mb->rkey);
    fv_ring_sq(n->a);
    assert_int_equal(sq_hint(n->a), PVRDMA_SQ_DB_SKIP);
    assert_int_equal(fv_qp_modify_state(n->a, PVRDMA_QPS_ERR), 0);
    assert_int_equal(sq_hint(n->a), 0);
    expect(wait_cqe(n, n->cqa), 5, PVRDMA_WC_RDMA_WRITE,
           PVRDMA_WC_WR_FLUSH_ERR, 0);
    post_write(n, 6, 6 * 4096, 100, n->mb->rkey);
    fv_ring_sq(n->a);
    expect(wait_cqe(n, n->cqa), 6, PVRDMA_WC_RDMA_WRITE,
           PVRDMA_WC_WR_FLUSH_ERR, 0);
    assert_int_equal(sq_hint(n->a), 0);
    net_free(n);

    /* x-sq-db-hint=off: not announced, never written */
    pvrdma_core_default_config(&cfg);
    cfg.no_sq_db_hint = true;
    fg = fg_new(&cfg);
    fg_join_fabric(fg);
    fg_setup(fg);
    assert_false(fg_caps(fg)->ex_comp_mask & PVRDMA_EX_CAP_SQ_DB_HINT);
    cq = fv_cq_new(fg, 0, 16);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    qp = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, NULL, 16, 4, false);
    *(uint32_t *)fg_ptr(fg, qp->pages[0] +
                        PVRDMA_RING_STATE_SQ_DB_HINT_OFFSET) = 0xdead;
    assert_int_equal(fv_qp_modify_state(qp, PVRDMA_QPS_ERR), 0);
    assert_int_equal(sq_hint(qp), 0xdead);
    fg_free(fg);
    g_free(cq);
    g_free(qp);
}

/*
 * WQEs posted without a doorbell behind one that rang (a burst that began
 * with nothing out) go out at the next poll of the QP's send CQ, not a
 * round trip later with the first one's answer.
 */
static void test_sq_doorbell_hint_cq_poll(void **state)
{
    Net *n = net_new(true);
    uint64_t i;

    (void)state;
    fv_mr_fill(n->ma, VA_A, 4 * 4096, 36);
    post_write(n, 0, 0, 100, n->mb->rkey);
    fv_ring_sq(n->a);
    assert_int_equal(sq_hint(n->a), PVRDMA_SQ_DB_SKIP);
    post_write(n, 1, 4096, 100, n->mb->rkey);
    post_write(n, 2, 2 * 4096, 100, n->mb->rkey);
    assert_int_equal(nout(n->fa, n->a), 1);
    /* B has not looked: no answer yet, the CQ poll sends them */
    fv_cq_poll_doorbell(n->cqa);
    assert_int_equal(nout(n->fa, n->a), 3);
    /* A promised to poll (no kicks for it): B answers, A's poll takes it */
    run(n->hb, NULL, 50);
    fv_cq_poll_doorbell(n->cqa);
    for (i = 0; i < 3; i++) {
        expect(wait_cqe(n, n->cqa), i, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_SUCCESS, 100);
        expect_same(n->ma, VA_A + i * 4096, n->mb, VA_B + i * 4096, 100);
    }
    assert_int_equal(sq_hint(n->a), 0);
    settle(n);
    net_free(n);
}

/*
 * A send completion with more of the QP's requests still out keeps the
 * poller's promise (it polls on for them); the last one ends it.
 */
static void test_cq_poll_promise_more(void **state)
{
    Net *n = net_new(true);
    uint32_t big = 200 * 1024;       /* its stream waits for credit */
    struct pvrdma_cqe c;
    unsigned i;

    (void)state;
    fv_mr_fill(n->ma, VA_A, big + 4096, 31);
    post_write(n, 1, 0, 100, n->mb->rkey);
    post_write(n, 2, 4096, big, n->mb->rkey);
    fv_ring_sq(n->a);
    fv_cq_poll_doorbell(n->cqa);
    for (i = 0; i < 100 && !fv_cq_poll(n->cqa, &c); i++) {
        run(n->hb, NULL, 1);
        fv_cq_poll_doorbell(n->cqa);
    }
    expect(c, 1, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 100);
    assert_int_equal(nout(n->fa, n->a), 1);
    assert_true(n->ha->fab->poll_until > n->ha->now);
    for (i = 0; i < 2000 && !fv_cq_poll(n->cqa, &c); i++) {
        run(n->hb, NULL, 1);
        fv_cq_poll_doorbell(n->cqa);
    }
    expect(c, 2, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, big);
    expect_same(n->ma, VA_A + 4096, n->mb, VA_B + 4096, big);
    assert_int_equal(n->ha->fab->poll_until, 0);
    net_free(n);
}

static void test_window_shm(void **state)
{
    (void)state;
    do_window(true);
}

static void test_window_inline(void **state)
{
    (void)state;
    do_window(false);
}

/*
 * More requests out on one link than its first table of ids holds (64
 * slots, half used at most): five QP pairs with 16 WRITEs each out at
 * once; the table grows under them and every WRITE lands once.
 */
static void test_many_out_on_a_link(void **state)
{
    Net *n = net_new(true);
    FvQp *a[5], *b[5];
    struct pvrdma_cqe c;
    unsigned q, i, done = 0;

    (void)state;
    fv_mr_fill(n->ma, VA_A, 80 * 256, 41);
    for (q = 0; q < 5; q++) {
        a[q] = q ? fv_qp_new(n->fa, PVRDMA_QPT_RC, n->pda, n->cqa, n->cqa,
                             NULL, 16, 1, false) : n->a;
        b[q] = q ? fv_qp_new(n->fb, PVRDMA_QPT_RC, n->pdb, n->cqb, n->cqb,
                             NULL, 16, 1, false) : n->b;
        if (q) {
            fv_connect(a[q], b[q], &conn_opts);
        }
    }
    for (q = 0; q < 5; q++) {
        for (i = 0; i < 16; i++) {
            uint64_t off = (q * 16 + i) * 256;
            struct pvrdma_sge s = sge(n->ma, VA_A + off, 256);
            struct pvrdma_sq_wqe_hdr h = wqe(q * 16 + i, PVRDMA_WR_RDMA_WRITE,
                                             1);

            h.wr.rdma.remote_addr = VA_B + off;
            h.wr.rdma.rkey = n->mb->rkey;
            fv_post_send(a[q], &h, &s, 1);
        }
        fv_ring_sq(a[q]);
    }
    for (q = 0; q < 5; q++) {
        assert_int_equal(nout(n->fa, a[q]), 16);
    }
    while (done < 80) {
        c = wait_cqe(n, n->cqa);
        assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
        done++;
    }
    run(n->ha, n->hb, 5);
    assert_false(fv_cq_poll(n->cqa, &c));
    expect_same(n->ma, VA_A, n->mb, VA_B, 80 * 256);
    for (q = 1; q < 5; q++) {
        g_free(a[q]);
        g_free(b[q]);
    }
    net_free(n);
}

/* READs and atomics out at once: at most max_rd_atomic (4 here). */
static void test_window_rd_atomic(void **state)
{
    Net *n = net_new(true);
    struct pvrdma_sge s;
    struct pvrdma_sq_wqe_hdr h;
    uint64_t i;

    (void)state;
    fv_mr_fill(n->mb, VA_B, 16 * 512, 23);
    for (i = 0; i < 12; i++) {
        s = sge(n->ma, VA_A + i * 512, 512);
        h = wqe(i, PVRDMA_WR_RDMA_READ, 1);
        h.wr.rdma.remote_addr = VA_B + i * 512;
        h.wr.rdma.rkey = n->mb->rkey;
        fv_post_send(n->a, &h, &s, 1);
    }
    fv_ring_sq(n->a);
    assert_int_equal(nout(n->fa, n->a), 4);
    for (i = 0; i < 12; i++) {
        expect(wait_cqe(n, n->cqa), i, PVRDMA_WC_RDMA_READ,
               PVRDMA_WC_SUCCESS, 512);
        assert_true(nout(n->fa, n->a) <= 4);
    }
    expect_same(n->ma, VA_A, n->mb, VA_B, 12 * 512);
    net_free(n);
}

/*
 * Streams of READs larger than the link's buffers, max_rd_atomic of them
 * out at once, the SQ kept full (as ib_read_bw does): every READ
 * completes once, in order, with its bytes, over either kind of link.
 */
static void do_read_stream(bool shm)
{
    Net *n = net_new(shm);
    const uint32_t len = 48 * 1024;
    struct pvrdma_sge s;
    struct pvrdma_sq_wqe_hdr h;
    uint64_t posted = 0, done = 0;

    fv_mr_fill(n->mb, VA_B, MR_LEN, 41);
    while (done < 300) {
        while (posted < 300 && posted - done < 16) {
            uint64_t off = posted % 4 * len;

            s = sge(n->ma, VA_A + off, len);
            h = wqe(posted, PVRDMA_WR_RDMA_READ, 1);
            h.wr.rdma.remote_addr = VA_B + off;
            h.wr.rdma.rkey = n->mb->rkey;
            fv_post_send(n->a, &h, &s, 1);
            posted++;
        }
        fv_ring_sq(n->a);
        expect(wait_cqe(n, n->cqa), done, PVRDMA_WC_RDMA_READ,
               PVRDMA_WC_SUCCESS, len);
        done++;
    }
    expect_same(n->ma, VA_A, n->mb, VA_B, 4 * len);
    assert_int_equal(fv_qp_state(n->a), PVRDMA_QPS_RTS);
    net_free(n);
}

static void test_read_stream_shm(void **state)
{
    (void)state;
    do_read_stream(true);
}

static void test_read_stream_inline(void **state)
{
    (void)state;
    do_read_stream(false);
}

/*
 * READ responses queued behind one that filled the responder's socket:
 * the writable socket takes the rest of that output at once, and the
 * queued responses must follow (found by ib_read_bw between two hosts:
 * the pump only flushed what it had made when its output had been full,
 * and nothing made more, so the requester's READs timed out).  The
 * responder's socket is small, and the requester posts nothing more
 * while it waits (its window of max_rd_atomic READs all out).
 */
static void test_read_responses_resume(void **state)
{
    Net *n = net_new(false);
    const uint32_t len = 48 * 1024;
    int sz = 32 * 1024;
    struct pvrdma_sge s;
    struct pvrdma_sq_wqe_hdr h;
    uint64_t i;

    (void)state;
    assert_int_equal(setsockopt(n->sv[1], SOL_SOCKET, SO_SNDBUF, &sz,
                                sizeof(sz)), 0);
    fv_mr_fill(n->mb, VA_B, MR_LEN, 43);
    for (i = 0; i < 4; i++) {
        s = sge(n->ma, VA_A + i * len, len);
        h = wqe(i, PVRDMA_WR_RDMA_READ, 1);
        h.wr.rdma.remote_addr = VA_B + i * len;
        h.wr.rdma.rkey = n->mb->rkey;
        fv_post_send(n->a, &h, &s, 1);
    }
    fv_ring_sq(n->a);
    for (i = 0; i < 4; i++) {
        expect(wait_cqe(n, n->cqa), i, PVRDMA_WC_RDMA_READ,
               PVRDMA_WC_SUCCESS, len);
    }
    expect_same(n->ma, VA_A, n->mb, VA_B, 4 * len);
    net_free(n);
}

/*
 * RNR with a window: the second of three SENDs finds no receive; the
 * responder drops what follows it (the third SEND and a WRITE: never
 * executed, the WRITE's bytes not written), the requester sends them all
 * again once receives are posted: each message lands once, in order.
 */
static void test_window_rnr(void **state)
{
    Net *n = net_new(true);
    struct pvrdma_sge s, r;
    struct pvrdma_sq_wqe_hdr h;
    uint64_t i;

    (void)state;
    fv_mr_fill(n->ma, VA_A, 4 * 4096, 24);
    fv_mr_fill(n->mb, VA_B + 3 * 4096, 4096, 28);
    r = sge(n->mb, VA_B, 4096);
    fv_post_recv(n->b, 0xb0, &r, 1);
    fv_ring_rq(n->b);
    for (i = 0; i < 3; i++) {
        s = sge(n->ma, VA_A + i * 4096, 100 + i);
        h = wqe(i, PVRDMA_WR_SEND, 1);
        fv_post_send(n->a, &h, &s, 1);
    }
    post_write(n, 3, 3 * 4096, 4096, n->mb->rkey);
    fv_ring_sq(n->a);
    assert_int_equal(nout(n->fa, n->a), 4);
    expect(wait_cqe(n, n->cqa), 0, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 100);
    expect(wait_cqe(n, n->cqb), 0xb0, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS, 100);
    run(n->ha, n->hb, 50);
    assert_false(fv_cq_poll(n->cqa, &(struct pvrdma_cqe){ 0 }));
    assert_false(fv_cq_poll(n->cqb, &(struct pvrdma_cqe){ 0 }));
    assert_true(pvrdma_core_rnr_waiting(pvrdma_table_lookup(
                    &n->fa->core->qp_tbl, n->a->handle)));
    assert_int_equal(nout(n->fa, n->a), 0);
    assert_true(fv_mr_check(n->mb, VA_B + 3 * 4096, 4096, 28));
    for (i = 1; i < 3; i++) {
        r = sge(n->mb, VA_B + i * 4096, 4096);
        fv_post_recv(n->b, 0xb0 + i, &r, 1);
    }
    fv_ring_rq(n->b);
    for (i = 1; i < 3; i++) {
        expect(wait_cqe(n, n->cqa), i, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS,
               100 + i);
        expect(wait_cqe(n, n->cqb), 0xb0 + i, PVRDMA_WC_RECV,
               PVRDMA_WC_SUCCESS, 100 + i);
        expect_same(n->ma, VA_A + i * 4096, n->mb, VA_B + i * 4096, 100 + i);
    }
    expect(wait_cqe(n, n->cqa), 3, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS,
           4096);
    expect_same(n->ma, VA_A + 3 * 4096, n->mb, VA_B + 3 * 4096, 4096);
    run(n->ha, n->hb, 20);
    assert_false(fv_cq_poll(n->cqb, &(struct pvrdma_cqe){ 0 }));
    assert_int_equal(n->fa->rnr_waits, 1);
    net_free(n);
}

/*
 * An error with requests behind it: the second of four WRITEs has a bad
 * rkey; the first completes, the second with REM_ACCESS_ERR, the others
 * are flushed and their bytes never reach the responder.
 */
static void test_window_error(void **state)
{
    Net *n = net_new(true);
    uint64_t i;

    (void)state;
    fv_mr_fill(n->ma, VA_A, 4 * 4096, 25);
    fv_mr_fill(n->mb, VA_B + 4096, 3 * 4096, 26);
    for (i = 0; i < 4; i++) {
        post_write(n, i, i * 4096, 2000, i == 1 ? n->mb->rkey ^ 0x100 :
                                                 n->mb->rkey);
    }
    fv_ring_sq(n->a);
    assert_int_equal(nout(n->fa, n->a), 4);
    expect(wait_cqe(n, n->cqa), 0, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS,
           2000);
    expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_RDMA_WRITE,
           PVRDMA_WC_REM_ACCESS_ERR, 0);
    expect(wait_cqe(n, n->cqa), 2, PVRDMA_WC_RDMA_WRITE,
           PVRDMA_WC_WR_FLUSH_ERR, 0);
    expect(wait_cqe(n, n->cqa), 3, PVRDMA_WC_RDMA_WRITE,
           PVRDMA_WC_WR_FLUSH_ERR, 0);
    run(n->ha, n->hb, 20);
    expect_same(n->ma, VA_A, n->mb, VA_B, 2000);
    assert_true(fv_mr_check(n->mb, VA_B + 4096, 3 * 4096, 26));
    net_free(n);
}

/*
 * The same, with every answer taken in at once by a guest's poll of its
 * CQ (inside the doorbell, where the core flushes the QP only when the
 * doorbell ends): the answers that came for the requests behind the error
 * do not complete them.
 */
static void test_window_error_polled(void **state)
{
    Net *n = net_new(true);
    uint64_t i;

    (void)state;
    fv_mr_fill(n->ma, VA_A, 4 * 4096, 25);
    fv_mr_fill(n->mb, VA_B + 4096, 3 * 4096, 26);
    fv_cq_poll_doorbell(n->cqa);         /* A promises: no kicks for it */
    for (i = 0; i < 4; i++) {
        post_write(n, i, i * 4096, 2000, i == 1 ? n->mb->rkey ^ 0x100 :
                                                 n->mb->rkey);
    }
    fv_ring_sq(n->a);
    assert_int_equal(nout(n->fa, n->a), 4);
    run(n->hb, NULL, 50);                /* B answers all four */
    fv_cq_poll_doorbell(n->cqa);
    expect(wait_cqe(n, n->cqa), 0, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS,
           2000);
    expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_RDMA_WRITE,
           PVRDMA_WC_REM_ACCESS_ERR, 0);
    expect(wait_cqe(n, n->cqa), 2, PVRDMA_WC_RDMA_WRITE,
           PVRDMA_WC_WR_FLUSH_ERR, 0);
    expect(wait_cqe(n, n->cqa), 3, PVRDMA_WC_RDMA_WRITE,
           PVRDMA_WC_WR_FLUSH_ERR, 0);
    expect_same(n->ma, VA_A, n->mb, VA_B, 2000);
    assert_true(fv_mr_check(n->mb, VA_B + 4096, 3 * 4096, 26));
    net_free(n);
}

/*
 * Requests outstanding when the QP goes to ERR, or when the peer dies:
 * every WQE completes once (RETRY_EXC_ERR for the oldest when the peer
 * is gone, WR_FLUSH_ERR after), late answers are ignored.
 */
static void test_window_teardown(void **state)
{
    Net *n = net_new(true);
    struct pvrdma_cqe c;
    uint64_t i;

    (void)state;
    fv_mr_fill(n->ma, VA_A, 8 * 4096, 27);
    for (i = 0; i < 4; i++) {
        post_write(n, i, i * 4096, 4096, n->mb->rkey);
    }
    fv_ring_sq(n->a);
    assert_int_equal(nout(n->fa, n->a), 4);
    assert_int_equal(fv_qp_modify_state(n->a, PVRDMA_QPS_ERR), 0);
    for (i = 0; i < 4; i++) {
        expect(wait_cqe(n, n->cqa), i, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_WR_FLUSH_ERR, 0);
    }
    run(n->ha, n->hb, 30);
    assert_false(fv_cq_poll(n->cqa, &c));

    /* a new pair of QPs; the peer dies with four out */
    g_free(n->a);
    g_free(n->b);
    n->a = fv_qp_new(n->fa, PVRDMA_QPT_RC, n->pda, n->cqa, n->cqa, NULL, 16,
                     4, false);
    n->b = fv_qp_new(n->fb, PVRDMA_QPT_RC, n->pdb, n->cqb, n->cqb, NULL, 16,
                     4, false);
    fv_connect(n->a, n->b, &conn_opts);
    n->hb->frozen = true;
    for (i = 0; i < 4; i++) {
        post_write(n, 10 + i, i * 4096, 4096, n->mb->rkey);
    }
    fv_ring_sq(n->a);
    assert_int_equal(nout(n->fa, n->a), 4);
    close(n->sv[1]);
    c = wait_cqe(n, n->cqa);
    expect(c, 10, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_RETRY_EXC_ERR, 0);
    for (i = 1; i < 4; i++) {
        expect(wait_cqe(n, n->cqa), 10 + i, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_WR_FLUSH_ERR, 0);
    }
    assert_int_equal(fv_async_count(n->fa, PVRDMA_EQE_TYPE_QP_FATAL,
                                    n->a->handle), 1);
    n->hb->frozen = false;
    net_free(n);
}

/*
 * A QP destroyed with four requests out: its requests leave the link, the
 * answers that come are late and ignored, and a new QP of the same peer
 * works (its responder takes requests of the new generation).
 */
static void test_window_destroy(void **state)
{
    Net *n = net_new(true);
    uint64_t i;

    (void)state;
    fv_mr_fill(n->ma, VA_A, 8 * 4096, 32);
    for (i = 0; i < 4; i++) {
        post_write(n, i, i * 4096, 4096, n->mb->rkey);
    }
    fv_ring_sq(n->a);
    assert_int_equal(nout(n->fa, n->a), 4);
    assert_int_equal(fg_destroy_qp(n->fa, n->a->handle), 0);
    run(n->ha, n->hb, 50);
    assert_false(fv_cq_poll(n->cqa, &(struct pvrdma_cqe){ 0 }));
    g_free(n->a);
    n->a = fv_qp_new(n->fa, PVRDMA_QPT_RC, n->pda, n->cqa, n->cqa, NULL, 16,
                     4, false);
    assert_int_equal(fv_qp_modify_state(n->b, PVRDMA_QPS_RESET), 0);
    fv_connect(n->a, n->b, &conn_opts);
    for (i = 0; i < 4; i++) {
        post_write(n, 10 + i, (4 + i) * 4096, 4096, n->mb->rkey);
    }
    fv_ring_sq(n->a);
    for (i = 0; i < 4; i++) {
        expect(wait_cqe(n, n->cqa), 10 + i, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_SUCCESS, 4096);
        expect_same(n->ma, VA_A + (4 + i) * 4096, n->mb,
                    VA_B + (4 + i) * 4096, 4096);
    }
    net_free(n);
}

/*
 * The responder's QP is gone (a peer that finished and destroyed it): it
 * drops the requests, and the requester gives up as a real one does when
 * its retries run out, after its local ACK timeout (at least 2 s here),
 * not at once.  The WQEs behind the first are flushed; no QP_FATAL (a
 * completion error, not a dead link).
 */
static void test_dropped_waits_timeout(void **state)
{
    Net *n = net_new(true);
    struct pvrdma_cqe c;
    uint64_t i;

    (void)state;
    assert_int_equal(fg_destroy_qp(n->fb, n->b->handle), 0);
    for (i = 0; i < 3; i++) {
        post_write(n, i, i * 4096, 4096, n->mb->rkey);
    }
    fv_ring_sq(n->a);
    run(n->ha, n->hb, 20);
    assert_false(fv_cq_poll(n->cqa, &c));
    assert_int_equal(nout(n->fa, n->a), 3);
    n->ha->now += PVRDMA_LINK_MIN_TIMEOUT_NS - 1000000;
    run(n->ha, n->hb, 5);
    assert_false(fv_cq_poll(n->cqa, &c));
    n->ha->now += 200 * 1000 * 1000;
    expect(wait_cqe(n, n->cqa), 0, PVRDMA_WC_RDMA_WRITE,
           PVRDMA_WC_RETRY_EXC_ERR, 0);
    for (i = 1; i < 3; i++) {
        expect(wait_cqe(n, n->cqa), i, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_WR_FLUSH_ERR, 0);
    }
    assert_int_equal(fv_qp_state(n->a), PVRDMA_QPS_ERR);
    assert_int_equal(fv_async_count(n->fa, PVRDMA_EQE_TYPE_QP_FATAL,
                                    n->a->handle), 0);
    run(n->ha, n->hb, 5);
    assert_false(fv_cq_poll(n->cqa, &c));
    net_free(n);
}

/*
 * The responder's QP is not ready yet (RESET, then made again as an
 * application does while the requester already sends): the dropped
 * request is sent again on the next ticks, as a real requester
 * retransmits, and lands once the QP is in RTR; the ones behind it
 * follow, in order.  Across a link and within one process.
 */
static void test_dropped_then_ready(void **state)
{
    Net *n = net_new(true);
    Host *h = host_new();
    FakeGuest *fa = host_guest(h, 1), *fb = host_guest(h, 2);
    uint32_t pda, pdb;
    FvCq *cqa, *cqb;
    FvQp *a, *b;
    FvMr *ma, *mb;
    struct pvrdma_cqe c;
    struct pvrdma_sge s;
    struct pvrdma_sq_wqe_hdr w;
    uint64_t i;

    (void)state;
    /* Across the link: b back to RESET, a writes three times. */
    assert_int_equal(fv_qp_modify_state(n->b, PVRDMA_QPS_RESET), 0);
    fv_qp_zero_indexes(n->b);
    for (i = 0; i < 3; i++) {
        fv_mr_fill(n->ma, VA_A + i * 4096, 4096, 0x40 + i);
        post_write(n, i, i * 4096, 4096, n->mb->rkey);
    }
    fv_ring_sq(n->a);
    run(n->ha, n->hb, 20);
    assert_false(fv_cq_poll(n->cqa, &c));
    n->ha->now += 300 * 1000 * 1000;
    run(n->ha, n->hb, 10);
    assert_false(fv_cq_poll(n->cqa, &c));
    assert_int_equal(fv_qp_rts(n->b, n->a->qpn, 0, &conn_opts), 0);
    n->ha->now += 150 * 1000 * 1000;
    for (i = 0; i < 3; i++) {
        expect(wait_cqe(n, n->cqa), i, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_SUCCESS, 4096);
        expect_same(n->ma, VA_A + i * 4096, n->mb, VA_B + i * 4096, 4096);
    }
    net_free(n);

    /* In one process: b made only after a's WRITE was dropped. */
    assert_int_equal(fg_create_pd(fa, 0, &pda), 0);
    assert_int_equal(fg_create_pd(fb, 0, &pdb), 0);
    cqa = fv_cq_new(fa, 0, 64);
    cqb = fv_cq_new(fb, 0, 64);
    ma = fv_mr_new(fa, pda, VA_A, MR_LEN, ALL_ACCESS);
    mb = fv_mr_new(fb, pdb, VA_B, MR_LEN, ALL_ACCESS);
    a = fv_qp_new(fa, PVRDMA_QPT_RC, pda, cqa, cqa, NULL, 16, 4, false);
    b = fv_qp_new(fb, PVRDMA_QPT_RC, pdb, cqb, cqb, NULL, 16, 4, false);
    assert_int_equal(fv_qp_rts(a, b->qpn, 0, &conn_opts), 0);
    fv_mr_fill(ma, VA_A, 64, 0x77);
    s = sge(ma, VA_A, 64);
    w = wqe(1, PVRDMA_WR_RDMA_WRITE, 1);
    w.wr.rdma.remote_addr = VA_B;
    w.wr.rdma.rkey = mb->rkey;
    fv_post_send(a, &w, &s, 1);
    fv_ring_sq(a);
    run(h, NULL, 5);
    assert_false(fv_cq_poll(cqa, &c));
    assert_int_equal(fv_qp_rts(b, a->qpn, 0, &conn_opts), 0);
    h->now += 150 * 1000 * 1000;
    run(h, NULL, 5);
    assert_true(fv_cq_poll(cqa, &c));
    expect(c, 1, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 64);
    assert_true(fv_mr_check(mb, VA_B, 64, 0x77));
    fg_free(fa);
    fg_free(fb);
    host_free(h);
    g_free(cqa);
    g_free(cqb);
    g_free(a);
    g_free(b);
    g_free(ma);
    g_free(mb);
}

/*
 * A save (live migration) does not wait for a dropped request's timeout:
 * it fails at once, RETRY_EXC_ERR, and the port moves out with nothing
 * in flight, though the clock did not move.
 */
static void test_dropped_move_out(void **state)
{
    Net *n = net_new(true);
    struct pvrdma_cqe c;
    char *err = NULL;
    unsigned i;

    (void)state;
    assert_int_equal(fg_destroy_qp(n->fb, n->b->handle), 0);
    post_write(n, 1, 0, 4096, n->mb->rkey);
    fv_ring_sq(n->a);
    run(n->ha, n->hb, 20);
    assert_false(fv_cq_poll(n->cqa, &c));
    for (i = 0; i < 50; i++) {
        if (pvrdma_core_move_out(n->fa->core, 0, &err)) {
            break;
        }
        g_free(err);
        err = NULL;
        run(n->ha, n->hb, 1);
    }
    assert_true(i < 50);
    assert_int_equal(nout(n->fa, n->a), 0);
    assert_true(fv_cq_poll(n->cqa, &c));
    expect(c, 1, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_RETRY_EXC_ERR, 0);
    pvrdma_core_move_back(n->fa->core);
    net_free(n);
}

/*
 * The same between two devices of one process, and the requester's QP
 * destroyed while its dropped request waits: nothing completes, nothing
 * is left behind (ASan), and a new QP works.
 */
static void test_dropped_local_cancel(void **state)
{
    Host *h = host_new();
    FakeGuest *fa = host_guest(h, 1), *fb = host_guest(h, 2);
    uint32_t pda, pdb;
    FvCq *cqa, *cqb;
    FvQp *a, *b;
    FvMr *ma, *mb;
    struct pvrdma_cqe c;
    struct pvrdma_sge s;
    struct pvrdma_sq_wqe_hdr w;
    int round;

    (void)state;
    assert_int_equal(fg_create_pd(fa, 0, &pda), 0);
    assert_int_equal(fg_create_pd(fb, 0, &pdb), 0);
    cqa = fv_cq_new(fa, 0, 64);
    cqb = fv_cq_new(fb, 0, 64);
    ma = fv_mr_new(fa, pda, VA_A, MR_LEN, ALL_ACCESS);
    mb = fv_mr_new(fb, pdb, VA_B, MR_LEN, ALL_ACCESS);
    for (round = 0; round < 2; round++) {
        a = fv_qp_new(fa, PVRDMA_QPT_RC, pda, cqa, cqa, NULL, 16, 4, false);
        b = fv_qp_new(fb, PVRDMA_QPT_RC, pdb, cqb, cqb, NULL, 16, 4, false);
        fv_connect(a, b, &conn_opts);
        assert_int_equal(fg_destroy_qp(fb, b->handle), 0);
        s = sge(ma, VA_A, 64);
        w = wqe(1, PVRDMA_WR_RDMA_WRITE, 1);
        w.wr.rdma.remote_addr = VA_B;
        w.wr.rdma.rkey = mb->rkey;
        fv_post_send(a, &w, &s, 1);
        fv_ring_sq(a);
        run(h, NULL, 5);
        assert_false(fv_cq_poll(cqa, &c));
        if (round == 0) {
            h->now += PVRDMA_LINK_MIN_TIMEOUT_NS + 200 * 1000 * 1000;
            run(h, NULL, 5);
            assert_true(fv_cq_poll(cqa, &c));
            expect(c, 1, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_RETRY_EXC_ERR, 0);
        } else {
            assert_int_equal(fg_destroy_qp(fa, a->handle), 0);
            h->now += PVRDMA_LINK_MIN_TIMEOUT_NS + 200 * 1000 * 1000;
            run(h, NULL, 5);
            assert_false(fv_cq_poll(cqa, &c));
        }
        g_free(a);
        g_free(b);
    }
    fg_free(fa);
    fg_free(fb);
    host_free(h);
    g_free(cqa);
    g_free(cqb);
    g_free(ma);
    g_free(mb);
}

/*
 * The responder's guest changes its address (DESTROY_BIND, CREATE_BIND):
 * the fabric forgets the GID at once and learns it again.
 */
static void test_address_change(void **state)
{
    Net *n = net_new(true);
    struct pvrdma_cmd_destroy_bind c = {
        .hdr.cmd = PVRDMA_CMD_DESTROY_BIND, .index = 0,
    };
    struct pvrdma_sge s, r;
    struct pvrdma_sq_wqe_hdr h;
    FvQp *q;

    (void)state;
    fg_test_gid(0, c.dest_gid);
    assert_int_equal(fg_cmd(n->fb, &c, sizeof(c), NULL), 0);
    run(n->ha, n->hb, 5);
    s = sge(n->ma, VA_A, 64);
    h = wqe(1, PVRDMA_WR_SEND, 1);
    fv_post_send(n->a, &h, &s, 1);
    fv_ring_sq(n->a);
    /* No route: dropped at once, as by a network without that address. */
    expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_SEND, PVRDMA_WC_RETRY_EXC_ERR,
           0);
    /* Bound again: a new QP pair reaches it. */
    assert_int_equal(fg_bind_gid(n->fb, 0), 0);
    run(n->ha, n->hb, 5);
    q = fv_qp_new(n->fa, PVRDMA_QPT_RC, n->pda, n->cqa, n->cqa, NULL, 4, 1,
                  false);
    assert_int_equal(fv_qp_modify_state(n->b, PVRDMA_QPS_RESET), 0);
    fv_qp_zero_indexes(n->b);
    fv_connect(q, n->b, &conn_opts);
    fv_mr_fill(n->ma, VA_A, 64, 5);
    r = sge(n->mb, VA_B, 64);
    fv_post_recv(n->b, 2, &r, 1);
    fv_ring_rq(n->b);
    h = wqe(3, PVRDMA_WR_SEND, 1);
    fv_post_send(q, &h, &s, 1);
    fv_ring_sq(q);
    expect(wait_cqe(n, n->cqa), 3, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 64);
    expect(wait_cqe(n, n->cqb), 2, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS, 64);
    assert_true(fv_mr_check(n->mb, VA_B, 64, 5));
    g_free(q);
    net_free(n);
}

/* ---- failure of the peer --------------------------------------------- */

/* The peer's process dies with a request outstanding. */
static void test_peer_dies(void **state)
{
    Net *n = net_new(true);
    struct pvrdma_sge s;
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_cqe c;

    (void)state;
    /* b's host stops handling its socket: the READ stays outstanding. */
    n->hb->frozen = true;
    s = sge(n->ma, VA_A, 4096);
    h = wqe(1, PVRDMA_WR_RDMA_READ, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = n->mb->rkey;
    fv_post_send(n->a, &h, &s, 1);
    fv_ring_sq(n->a);
    run(n->ha, NULL, 20);
    assert_false(fv_cq_poll(n->cqa, &c));
    /* SIGKILL: the kernel closes the socket.  (Or B's last device is
     * unplugged: nothing but B's glue holds its fabric then, and the
     * glue drops it, closing the link the same way.) */
    fg_free(n->fb);
    n->fb = NULL;
    assert_true(pvrdma_fabric_unused(n->hb->fab));
    assert_false(pvrdma_fabric_unused(n->ha->fab));
    host_free(n->hb);
    n->hb = NULL;
    run(n->ha, NULL, 5);
    c = wait_cqe(n, n->cqa);
    expect(c, 1, PVRDMA_WC_RDMA_READ, PVRDMA_WC_RETRY_EXC_ERR, 0);
    assert_int_equal(fv_qp_state(n->a), PVRDMA_QPS_ERR);
    assert_int_equal(fv_async_count(n->fa, PVRDMA_EQE_TYPE_QP_FATAL,
                                    n->a->handle), 1);
    assert_int_equal(pvrdma_fabric_links_up(n->ha->fab), 0);
    assert_non_null(strstr(n->ha->last_report, "down"));
    /* A new QP to the same address now fails at once: no route. */
    {
        FvQp *q = fv_qp_new(n->fa, PVRDMA_QPT_RC, n->pda, n->cqa, n->cqa,
                            NULL, 4, 1, false);

        assert_int_equal(fv_qp_rts(q, n->b->qpn, 0, &conn_opts), 0);
        h = wqe(2, PVRDMA_WR_SEND, 1);
        fv_post_send(q, &h, &s, 1);
        fv_ring_sq(q);
        expect(wait_cqe(n, n->cqa), 2, PVRDMA_WC_SEND,
               PVRDMA_WC_RETRY_EXC_ERR, 0);
        g_free(q);
    }
    fg_free(n->fa);
    host_free(n->ha);
    g_free(n->cqa);
    g_free(n->cqb);
    g_free(n->a);
    g_free(n->b);
    g_free(n->ma);
    g_free(n->mb);
    g_free(n);
}

/* ---- a port that moves to another process (migration) ------------------ */

static void run3(Host *a, Host *b, Host *c, unsigned rounds)
{
    Host *hs[3];
    unsigned n = 0;

    hs[n++] = a;
    if (b) {
        hs[n++] = b;
    }
    if (c) {
        hs[n++] = c;
    }
    while (rounds--) {
        hosts_step(hs, n, 1);
    }
}

/* Link @x and @y (shared rings) and let HELLO and GIDS through. */
static void link_hosts(Host *x, Host *y, Host *other)
{
    unsigned ux = pvrdma_fabric_links_up(x->fab);
    int sv[2];

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
                     0);
    pvrdma_fabric_add_link(x->fab, sv[0], true, "move-x");
    pvrdma_fabric_add_link(y->fab, sv[1], true, "move-y");
    run3(x, y, other, 30);
    assert_int_equal(pvrdma_fabric_links_up(x->fab), ux + 1);
}

/* b's guest stops for a save: quiesce until a has answered. */
static void move_out(Net *n)
{
    char *err = NULL;
    unsigned i;

    for (i = 0; i < 50; i++) {
        if (pvrdma_core_move_out(n->fb->core, 0, &err)) {
            return;
        }
        g_free(err);
        err = NULL;
        run(n->ha, NULL, 1);
    }
    fail_msg("the peer never answered QUIESCE");
}

/* a SENDs 4 KiB to b, whose receive is posted; true if it completed. */
static void post_send_to_b(Net *n, uint64_t id)
{
    struct pvrdma_sge s = sge(n->ma, VA_A, 4096);
    struct pvrdma_sge r = sge(n->mb, VA_B, 4096);
    struct pvrdma_sq_wqe_hdr h = wqe(id, PVRDMA_WR_SEND, 1);
    uint32_t i;

    for (i = 0; i < 4096; i++) {
        *fv_mr_ptr(n->ma, VA_A + i) = (uint8_t)(i * 7 + id);
    }
    fv_post_recv(n->b, id, &r, 1);
    fv_ring_rq(n->b);
    fv_post_send(n->a, &h, &s, 1);
    fv_ring_sq(n->a);
}

/* b stops for a save; a's SEND to it is parked: nothing completes. */
/* Returns A's clock before the move (its hold starts after). */
static int64_t move_out_and_send(Net *n)
{
    struct pvrdma_cqe c;
    int64_t before = n->ha->now;

    move_out(n);
    post_send_to_b(n, 1);
    run(n->ha, n->hb, 20);
    assert_false(fv_cq_poll(n->cqa, &c));
    assert_false(fv_cq_poll(n->cqb, &c));
    assert_int_equal(nout(n->fa, n->a), 1);
    return before;
}

static Host *move_dest;

static struct pvrdma_cqe wait_cqe3(FvCq *cq, Host *a, Host *b, Host *c)
{
    struct pvrdma_cqe e;
    unsigned i;

    for (i = 0; i < 2000; i++) {
        if (fv_cq_poll(cq, &e)) {
            return e;
        }
        run3(a, b, c, 1);
    }
    fail_msg("no completion");
    return e;
}

static void move_rejoin(FakeGuest *fg)
{
    char *msg = NULL;
    PvrdmaFabricPort *port = pvrdma_fabric_port_new(move_dest->fab, fg->core,
                                                    2, &msg);

    assert_non_null(port);
    pvrdma_core_set_backend(fg->core, &pvrdma_fabric_backend_ops, port);
}

/*
 * b moves from host B to host C while a's SEND to it waits: a holds it
 * (nothing is sent, nothing completes) while b is quiesced, also when a
 * stranger D announces b's GID, plainly and with a claim whose proof is
 * wrong; C's claim, proved with the token the saved state carries, takes
 * b's GID over, and the SEND completes once, at C.  Then C dies: a's
 * READ to it completes with RETRY_EXC_ERR.
 */
static void test_move_claim(void **state)
{
    Net *n = net_new(true);
    Host *hc = host_new(), *hd = host_new();
    FakeGuest *fd;
    PvrdmaMoveState bogus = { .life = 0x4242 };
    struct pvrdma_cqe c;

    (void)state;
    move_out_and_send(n);

    /* D, another process, announces b's GID on port index 2. */
    fd = host_guest(hd, 2);
    link_hosts(n->ha, hd, n->hb);
    memset(bogus.token, 0x42, sizeof(bogus.token));
    pvrdma_fabric_move_in(fd->core->be, &bogus);
    run3(n->ha, n->hb, hd, 30);
    if (fv_cq_poll(n->cqa, &c)) {
        fail_msg("completed (status %u) while b moved", c.status);
    }

    /* b's state moves to C, which joins a and claims b's GIDs. */
    move_dest = hc;
    link_hosts(n->ha, hc, hd);
    fg_migrate(n->fb, move_rejoin);
    expect(wait_cqe3(n->cqa, n->ha, hc, hd), 1, PVRDMA_WC_SEND,
           PVRDMA_WC_SUCCESS, 4096);
    expect(wait_cqe3(n->cqb, n->ha, hc, hd), 1, PVRDMA_WC_RECV,
           PVRDMA_WC_SUCCESS, 4096);
    expect_same(n->ma, VA_A, n->mb, VA_B, 4096);
    assert_int_equal(fv_qp_state(n->a), PVRDMA_QPS_RTS);
    /* Once, and the connection goes on at C. */
    run3(n->ha, hc, hd, 20);
    assert_false(fv_cq_poll(n->cqa, &c));
    assert_false(fv_cq_poll(n->cqb, &c));
    post_send_to_b(n, 2);
    expect(wait_cqe3(n->cqa, n->ha, hc, hd), 2, PVRDMA_WC_SEND,
           PVRDMA_WC_SUCCESS, 4096);
    expect(wait_cqe3(n->cqb, n->ha, hc, hd), 2, PVRDMA_WC_RECV,
           PVRDMA_WC_SUCCESS, 4096);
    assert_int_equal(fd->guest_errors, 0);
    fg_free(fd);
    host_free(hd);
    /*
     * The destination dies after the switch (SIGKILL: its sockets close)
     * with a READ of a's outstanding: RETRY_EXC_ERR, as with any dead peer.
     */
    hc->frozen = true;
    {
        struct pvrdma_sge s = sge(n->ma, VA_A, 4096);
        struct pvrdma_sq_wqe_hdr h = wqe(3, PVRDMA_WR_RDMA_READ, 1);

        h.wr.rdma.remote_addr = VA_B;
        h.wr.rdma.rkey = n->mb->rkey;
        fv_post_send(n->a, &h, &s, 1);
        fv_ring_sq(n->a);
    }
    run(n->ha, NULL, 10);
    assert_false(fv_cq_poll(n->cqa, &c));
    fg_free(n->fb);
    n->fb = NULL;
    host_free(hc);
    expect(wait_cqe3(n->cqa, n->ha, NULL, NULL), 3, PVRDMA_WC_RDMA_READ,
           PVRDMA_WC_RETRY_EXC_ERR, 0);
    assert_int_equal(fv_qp_state(n->a), PVRDMA_QPS_ERR);
    fg_free(n->fa);
    host_free(n->ha);
    host_free(n->hb);
    g_free(n->cqa);
    g_free(n->cqb);
    g_free(n->a);
    g_free(n->b);
    g_free(n->ma);
    g_free(n->mb);
    g_free(n);
}

/* The source goes on (a failed migration): what a held is sent to it. */
static void test_move_back(void **state)
{
    Net *n = net_new(false);

    (void)state;
    move_out_and_send(n);
    pvrdma_core_move_back(n->fb->core);
    expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 4096);
    expect_same(n->ma, VA_A, n->mb, VA_B, 4096);
    net_free(n);
}

/*
 * A peer that does not answer QUIESCE (its process stopped): the move is
 * refused with a message naming the link; once back, the source goes on.
 */
static void test_move_peer_stopped(void **state)
{
    Net *n = net_new(true);
    char *err = NULL;
    unsigned i;

    (void)state;
    n->ha->frozen = true;
    for (i = 0; i < 5; i++) {
        assert_false(pvrdma_core_move_out(n->fb->core, 0, &err));
        assert_non_null(strstr(err, "did not answer"));
        assert_non_null(strstr(err, "test-b"));
        g_free(err);
        err = NULL;
        run(n->ha, n->hb, 1);
    }
    pvrdma_core_move_back(n->fb->core);
    n->ha->frozen = false;
    post_send_to_b(n, 1);
    expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 4096);
    expect_same(n->ma, VA_A, n->mb, VA_B, 4096);
    net_free(n);
}

/* A port that never lands: after the hold, as a request to a dead peer. */
static void test_move_hold_expires(void **state)
{
    Net *n = net_new(true);
    struct pvrdma_cqe c;
    int64_t before;

    (void)state;
    before = move_out_and_send(n);
    /* (the clock moved on a little since: the links' linger looks) */
    n->ha->now = before + PVRDMA_FABRIC_HOLD_NS - 1;
    run(n->ha, n->hb, 5);
    assert_false(fv_cq_poll(n->cqa, &c));
    n->ha->now += 200 * 1000 * 1000;
    expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_SEND, PVRDMA_WC_RETRY_EXC_ERR,
           0);
    assert_int_equal(fv_qp_state(n->a), PVRDMA_QPS_ERR);
    assert_int_equal(fv_async_count(n->fa, PVRDMA_EQE_TYPE_QP_FATAL,
                                    n->a->handle), 1);
    net_free(n);
}

/* ---- a snapshot restored after its peers moved on ----------------------- */

/*
 * a and b exchange a SEND; b's state is saved while its guest is stopped
 * (savevm); b runs on and, with @went_on, exchanges once more with a (a's
 * QP hears b's new life).  Then b's process ends and a new one, *@hc,
 * restores the snapshot.
 */
static void restore_setup(Net *n, bool went_on, Host **hc)
{
    FgSnapshot *snap;

    post_send_to_b(n, 1);
    expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 4096);
    expect(wait_cqe(n, n->cqb), 1, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS, 4096);
    move_out(n);
    snap = fg_snapshot(n->fb);
    pvrdma_core_move_back(n->fb->core);
    if (went_on) {
        post_send_to_b(n, 2);
        expect(wait_cqe(n, n->cqa), 2, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS,
               4096);
        expect(wait_cqe(n, n->cqb), 2, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS,
               4096);
    }
    *hc = move_dest = host_new();
    link_hosts(n->ha, *hc, n->hb);
    fg_restore(n->fb, snap, move_rejoin);
    fg_snapshot_free(snap);
    run3(n->ha, n->hb, *hc, 20);
}

static void restore_free(Net *n, Host *hc)
{
    assert_int_equal(n->fa->guest_errors, 0);
    assert_int_equal(n->fb->guest_errors, 0);
    net_free(n);
    host_free(hc);
}

/* b (restored) SENDs 100 bytes to a, whose receive is posted. */
static void post_send_to_a(Net *n, uint64_t id)
{
    struct pvrdma_sge s = sge(n->mb, VA_B, 100);
    struct pvrdma_sge r = sge(n->ma, VA_A, 100);
    struct pvrdma_sq_wqe_hdr h = wqe(id, PVRDMA_WR_SEND, 1);

    fv_post_recv(n->a, id, &r, 1);
    fv_ring_rq(n->a);
    fv_post_send(n->b, &h, &s, 1);
    fv_ring_sq(n->b);
}

/*
 * a heard from b after the snapshot; the restored b SENDs first: a
 * refuses it unexecuted (b's life is not the one it knew nor a later
 * one), b's SEND completes with RETRY_EXC_ERR, b's QP goes to ERR with
 * QP_FATAL; a's QP is untouched (a copy that parted cannot break a
 * connection), then learns as it sends to b: RETRY_EXC_ERR, QP_FATAL.
 */
static void test_restore_parted_peer_sends(void **state)
{
    Net *n = net_new(true);
    struct pvrdma_cqe c;
    Host *hc;

    (void)state;
    restore_setup(n, true, &hc);
    post_send_to_a(n, 3);
    expect(wait_cqe3(n->cqb, n->ha, n->hb, hc), 3, PVRDMA_WC_SEND,
           PVRDMA_WC_RETRY_EXC_ERR, 0);
    assert_int_equal(fv_qp_state(n->b), PVRDMA_QPS_ERR);
    assert_int_equal(fv_async_count(n->fb, PVRDMA_EQE_TYPE_QP_FATAL,
                                    n->b->handle), 1);
    run3(n->ha, n->hb, hc, 20);
    assert_false(fv_cq_poll(n->cqa, &c));
    assert_int_equal(fv_qp_state(n->a), PVRDMA_QPS_RTS);
    assert_int_equal(fv_async_count(n->fa, PVRDMA_EQE_TYPE_QP_FATAL,
                                    n->a->handle), 0);
    /*
     * Its own SEND to b, whose QP is in ERR now, fails: b drops it, so a
     * gives up when its local ACK timeout (at least 2 s) runs out.
     */
    post_send_to_b(n, 4);
    run3(n->ha, n->hb, hc, 20);
    assert_false(fv_cq_poll(n->cqa, &c));
    n->ha->now += PVRDMA_LINK_MIN_TIMEOUT_NS;
    expect(wait_cqe3(n->cqa, n->ha, n->hb, hc), 4, PVRDMA_WC_SEND,
           PVRDMA_WC_RETRY_EXC_ERR, 0);
    assert_int_equal(fv_qp_state(n->a), PVRDMA_QPS_ERR);
    restore_free(n, hc);
}

/*
 * a heard from b after the snapshot and SENDs first to the restored b:
 * b sees a request for a life of its port that is not its own nor an
 * earlier one, so its QP goes to ERR with QP_FATAL (its posted receive
 * flushed, nothing written); a's SEND completes with RETRY_EXC_ERR and
 * QP_FATAL.  Both reconnected (RESET, new connection) work again.
 */
static void test_restore_parted_peer_answers(void **state)
{
    Net *n = net_new(true);
    Host *hc;

    (void)state;
    restore_setup(n, true, &hc);
    memset(fv_mr_ptr(n->mb, VA_B), 0, 4096);
    post_send_to_b(n, 3);
    expect(wait_cqe3(n->cqa, n->ha, n->hb, hc), 3, PVRDMA_WC_SEND,
           PVRDMA_WC_RETRY_EXC_ERR, 0);
    assert_int_equal(fv_qp_state(n->a), PVRDMA_QPS_ERR);
    assert_int_equal(fv_async_count(n->fa, PVRDMA_EQE_TYPE_QP_FATAL,
                                    n->a->handle), 1);
    expect(wait_cqe3(n->cqb, n->ha, n->hb, hc), 3, PVRDMA_WC_RECV,
           PVRDMA_WC_WR_FLUSH_ERR, 0);
    assert_int_equal(fv_qp_state(n->b), PVRDMA_QPS_ERR);
    assert_int_equal(fv_async_count(n->fb, PVRDMA_EQE_TYPE_QP_FATAL,
                                    n->b->handle), 1);
    assert_int_equal(*fv_mr_ptr(n->mb, VA_B + 1), 0);
    /* A new connection, between new QPs. */
    g_free(n->a);
    g_free(n->b);
    n->a = fv_qp_new(n->fa, PVRDMA_QPT_RC, n->pda, n->cqa, n->cqa, NULL, 16,
                     4, false);
    n->b = fv_qp_new(n->fb, PVRDMA_QPT_RC, n->pdb, n->cqb, n->cqb, NULL, 16,
                     4, false);
    fv_connect(n->a, n->b, &conn_opts);
    post_send_to_b(n, 5);
    expect(wait_cqe3(n->cqa, n->ha, n->hb, hc), 5, PVRDMA_WC_SEND,
           PVRDMA_WC_SUCCESS, 4096);
    expect(wait_cqe3(n->cqb, n->ha, n->hb, hc), 5, PVRDMA_WC_RECV,
           PVRDMA_WC_SUCCESS, 4096);
    expect_same(n->ma, VA_A, n->mb, VA_B, 4096);
    post_send_to_a(n, 6);
    expect(wait_cqe3(n->cqb, n->ha, n->hb, hc), 6, PVRDMA_WC_SEND,
           PVRDMA_WC_SUCCESS, 100);
    expect(wait_cqe3(n->cqa, n->ha, n->hb, hc), 6, PVRDMA_WC_RECV,
           PVRDMA_WC_SUCCESS, 100);
    restore_free(n, hc);
}

/*
 * Nothing passed between a and b after the snapshot: restoring it loses
 * nothing of that connection, which goes on both ways.
 */
static void test_restore_unparted(void **state)
{
    Net *n = net_new(true);
    Host *hc;

    (void)state;
    restore_setup(n, false, &hc);
    post_send_to_b(n, 3);
    expect(wait_cqe3(n->cqa, n->ha, n->hb, hc), 3, PVRDMA_WC_SEND,
           PVRDMA_WC_SUCCESS, 4096);
    expect(wait_cqe3(n->cqb, n->ha, n->hb, hc), 3, PVRDMA_WC_RECV,
           PVRDMA_WC_SUCCESS, 4096);
    expect_same(n->ma, VA_A, n->mb, VA_B, 4096);
    post_send_to_a(n, 4);
    expect(wait_cqe3(n->cqb, n->ha, n->hb, hc), 4, PVRDMA_WC_SEND,
           PVRDMA_WC_SUCCESS, 100);
    expect(wait_cqe3(n->cqa, n->ha, n->hb, hc), 4, PVRDMA_WC_RECV,
           PVRDMA_WC_SUCCESS, 100);
    assert_int_equal(fv_qp_state(n->a), PVRDMA_QPS_RTS);
    assert_int_equal(fv_qp_state(n->b), PVRDMA_QPS_RTS);
    restore_free(n, hc);
}

/* The peer stops answering but keeps the socket: the QP's timeout. */
static void test_peer_silent(void **state)
{
    Net *n = net_new(false);
    struct pvrdma_sge s;
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_cqe c;
    unsigned i;

    (void)state;
    n->hb->frozen = true;
    s = sge(n->ma, VA_A, 100);
    h = wqe(1, PVRDMA_WR_SEND, 1);
    fv_post_send(n->a, &h, &s, 1);
    fv_ring_sq(n->a);
    run(n->ha, NULL, 10);
    assert_false(fv_cq_poll(n->cqa, &c));
    /* 1 s: below the floor of the timeout (2 s), still waiting. */
    n->ha->now += 1000000000LL;
    run(n->ha, NULL, 3);
    assert_false(fv_cq_poll(n->cqa, &c));
    for (i = 0; i < 30 && !fv_cq_poll(n->cqa, &c); i++) {
        n->ha->now += 100000000LL;
        run(n->ha, NULL, 1);
    }
    expect(c, 1, PVRDMA_WC_SEND, PVRDMA_WC_RETRY_EXC_ERR, 0);
    assert_int_equal(fv_qp_state(n->a), PVRDMA_QPS_ERR);
    assert_int_equal(fv_async_count(n->fa, PVRDMA_EQE_TYPE_QP_FATAL,
                                    n->a->handle), 1);
    /* A late answer is ignored; the link itself stays up. */
    n->hb->frozen = false;
    run(n->ha, n->hb, 20);
    assert_false(fv_cq_poll(n->cqa, &c));
    assert_int_equal(pvrdma_fabric_links_up(n->ha->fab), 1);
    net_free(n);
}

/* The guest tears down a QP and its MR while its WRITE is streaming. */
static void test_teardown_midstream(void **state)
{
    Net *n = net_new(true);
    struct pvrdma_sge s;
    struct pvrdma_sq_wqe_hdr h;
    unsigned i;

    (void)state;
    s = sge(n->ma, VA_A, 200 * 1024);
    h = wqe(1, PVRDMA_WR_RDMA_WRITE, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = n->mb->rkey;
    fv_post_send(n->a, &h, &s, 1);
    fv_ring_sq(n->a);
    /* b's side has a partial stream; a's MR and QP go away. */
    run(n->ha, n->hb, 1);
    assert_int_equal(fg_destroy_mr(n->fb, n->mb->handle), 0);
    assert_int_equal(fg_destroy_mr(n->fa, n->ma->handle), 0);
    for (i = 0; i < 20; i++) {
        n->ha->now += 10000000LL;
        run(n->ha, n->hb, 1);
    }
    assert_int_equal(fg_destroy_qp(n->fa, n->a->handle), 0);
    assert_int_equal(fg_destroy_qp(n->fb, n->b->handle), 0);
    run(n->ha, n->hb, 20);
    /* The link survived and still works for new QPs. */
    assert_int_equal(pvrdma_fabric_links_up(n->ha->fab), 1);
    assert_int_equal(pvrdma_fabric_links_up(n->hb->fab), 1);
    net_free(n);
}

/*
 * The requester's MR goes away while the READ response is on its way:
 * the READ fails locally, the link (shared with everything else) stays.
 */
static void test_read_mr_gone(void **state)
{
    Net *n = net_new(false);
    struct pvrdma_sge s = sge(n->ma, VA_A, 100000);
    struct pvrdma_sq_wqe_hdr h;
    Host *only_b[1] = { n->hb };
    unsigned i;

    (void)state;
    h = wqe(1, PVRDMA_WR_RDMA_READ, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = n->mb->rkey;
    fv_post_send(n->a, &h, &s, 1);
    fv_ring_sq(n->a);
    n->ha->frozen = true;
    for (i = 0; i < 20; i++) {
        hosts_step(only_b, 1, 1);
    }
    assert_int_equal(fg_destroy_mr(n->fa, n->ma->handle), 0);
    n->ha->frozen = false;
    n->ha->now += 1000000LL;
    expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_RDMA_READ,
           PVRDMA_WC_LOC_PROT_ERR, 0);
    run(n->ha, n->hb, 10);
    assert_int_equal(pvrdma_fabric_links_up(n->ha->fab), 1);
    assert_int_equal(pvrdma_fabric_links_up(n->hb->fab), 1);
    net_free(n);
}

/* ---- a hostile peer ---------------------------------------------------- */

static void put_hdr(uint8_t *p, uint8_t type, uint16_t flags, uint32_t len,
                    uint32_t id)
{
    uint32_t m = GUINT32_TO_LE(PVRDMA_LINK_MAGIC);

    memcpy(p, &m, 4);
    p[4] = PVRDMA_LINK_VERSION;
    p[5] = type;
    flags = GUINT16_TO_LE(flags);
    memcpy(p + 6, &flags, 2);
    len = GUINT32_TO_LE(len);
    memcpy(p + 8, &len, 4);
    id = GUINT32_TO_LE(id);
    memcpy(p + 12, &id, 4);
}

/* A fabric with a guest, and a raw socket that already said HELLO. */
typedef struct Raw {
    Host *h;
    FakeGuest *fg;
    int fd;
} Raw;

static Raw *raw_new(void)
{
    Raw *r = g_new0(Raw, 1);
    uint8_t hello[PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_HELLO_SIZE] = { 0 };
    int sv[2];
    unsigned i;

    r->h = host_new();
    r->fg = host_guest(r->h, 1);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pvrdma_fabric_add_link(r->h->fab, sv[0], false, "raw");
    r->fd = sv[1];
    put_hdr(hello, PVRDMA_LINK_HELLO, 0, PVRDMA_LINK_HELLO_SIZE, 0);
    hello[PVRDMA_LINK_HDR_SIZE] = 0x5a;     /* instance */
    hello[PVRDMA_LINK_HDR_SIZE + 16] = 1;  /* its serial of the link */
    assert_int_equal(write(r->fd, hello, sizeof(hello)), sizeof(hello));
    for (i = 0; i < 5; i++) {
        run(r->h, NULL, 1);
    }
    assert_int_equal(pvrdma_fabric_links_up(r->h->fab), 1);
    fcntl(r->fd, F_SETFL, O_NONBLOCK);
    return r;
}

static void raw_free(Raw *r)
{
    close(r->fd);
    run(r->h, NULL, 3);
    fg_free(r->fg);
    host_free(r->h);
    g_free(r);
}

/* Feed @len bytes; true if the fabric closed the link. */
static bool raw_feed(Raw *r, const void *buf, size_t len)
{
    char sink[65536];
    unsigned i;

    assert_int_equal(write(r->fd, buf, len), (ssize_t)len);
    for (i = 0; i < 5; i++) {
        run(r->h, NULL, 1);
        while (read(r->fd, sink, sizeof(sink)) > 0) {
            /* drain what the fabric sends back */
        }
    }
    return pvrdma_fabric_links_up(r->h->fab) == 0;
}

static void test_hostile_frames(void **state)
{
    struct {
        const char *what;
        uint8_t type;
        uint16_t flags;
        uint32_t len;
        uint32_t id;
        uint8_t body[PVRDMA_LINK_GIDS_MIN];
        uint32_t body_len;
    } cases[] = {
        { "bad type", 99, 0, 0, 0, { 0 }, 0 },
        { "oversized DATA", PVRDMA_LINK_DATA, 0,
          PVRDMA_LINK_MAX_INLINE + 1, 0, { 0 }, 0 },
        { "DATA without a stream", PVRDMA_LINK_DATA, 0, 4, 9, { 1 }, 4 },
        { "second HELLO", PVRDMA_LINK_HELLO, 0, PVRDMA_LINK_HELLO_SIZE, 0,
          { 0 }, PVRDMA_LINK_HELLO_SIZE },
        { "ACK for a request never sent", PVRDMA_LINK_ACK, 0,
          PVRDMA_LINK_ACK_SIZE, 12345, { 0 }, PVRDMA_LINK_ACK_SIZE },
        { "CREDIT on an inline link", PVRDMA_LINK_CREDIT, 0,
          PVRDMA_LINK_CREDIT_SIZE, 0, { 1 }, PVRDMA_LINK_CREDIT_SIZE },
        { "GIDS with a wrong count", PVRDMA_LINK_GIDS, 0, 4, 0,
          { 1, 0, 2, 0 }, 4 },
        { "REQ with a local opcode", PVRDMA_LINK_REQ, 0,
          PVRDMA_LINK_REQ_SIZE, 1, { PVRDMA_WR_LOCAL_INV }, 
          PVRDMA_LINK_REQ_SIZE },
        { "REQ with a 2^40-byte length", PVRDMA_LINK_REQ, 0,
          PVRDMA_LINK_REQ_SIZE, 1,
          { [88] = 0, [93] = 1 }, PVRDMA_LINK_REQ_SIZE },
        { "UD REQ with RDMA_WRITE", PVRDMA_LINK_REQ, 0,
          PVRDMA_LINK_REQ_SIZE, 1,
          { PVRDMA_WR_RDMA_WRITE, [106] = 1 }, PVRDMA_LINK_REQ_SIZE },
        { "UD REQ longer than the MTU", PVRDMA_LINK_REQ, 0,
          PVRDMA_LINK_REQ_SIZE, 1,
          { PVRDMA_WR_SEND, [88] = 1, [89] = 0x10, [106] = 1 },
          PVRDMA_LINK_REQ_SIZE },
        { "UD REQ with a 21-bit flow label", PVRDMA_LINK_REQ, 0,
          PVRDMA_LINK_REQ_SIZE, 1,
          { PVRDMA_WR_SEND, [102] = 0x10, [106] = 1 },
          PVRDMA_LINK_REQ_SIZE },
        { "REQ with transport 4", PVRDMA_LINK_REQ, 0,
          PVRDMA_LINK_REQ_SIZE, 1, { PVRDMA_WR_SEND, [106] = 4 },
          PVRDMA_LINK_REQ_SIZE },
        { "XRC REQ with an SRQ number over 24 bits", PVRDMA_LINK_REQ, 0,
          PVRDMA_LINK_REQ_SIZE, 1, { PVRDMA_WR_SEND, [99] = 1, [106] = 3 },
          PVRDMA_LINK_REQ_SIZE },
        { "UC READ", PVRDMA_LINK_REQ, 0,
          PVRDMA_LINK_REQ_SIZE, 1, { PVRDMA_WR_RDMA_READ, [106] = 2 },
          PVRDMA_LINK_REQ_SIZE },
        { "UC atomic", PVRDMA_LINK_REQ, 0,
          PVRDMA_LINK_REQ_SIZE, 1,
          { PVRDMA_WR_ATOMIC_FETCH_AND_ADD, [106] = 2 },
          PVRDMA_LINK_REQ_SIZE },
        { "RESP never asked for", PVRDMA_LINK_RESP, 0,
          PVRDMA_LINK_RESP_SIZE, 77, { 5 }, PVRDMA_LINK_RESP_SIZE },
        { "RECV_POSTED with a 32-bit QPN", PVRDMA_LINK_RECV_POSTED, 0,
          PVRDMA_LINK_RECV_POSTED_SIZE, 0, { [19] = 0xff },
          PVRDMA_LINK_RECV_POSTED_SIZE },
        { "QUIESCE with a reserved byte set", PVRDMA_LINK_QUIESCE, 0,
          PVRDMA_LINK_QUIESCE_SIZE, 0, { 2, 1 }, PVRDMA_LINK_QUIESCE_SIZE },
        { "QUIESCED of 8 bytes", PVRDMA_LINK_QUIESCED, 0, 8, 0, { 2 }, 8 },
        { "GIDS with an unknown flag", PVRDMA_LINK_GIDS, 0,
          PVRDMA_LINK_GIDS_MIN, 0, { 1, 2, [68] = 1 }, PVRDMA_LINK_GIDS_MIN },
        { "GIDS without a life", PVRDMA_LINK_GIDS, 0,
          PVRDMA_LINK_GIDS_MIN, 0, { 1 }, PVRDMA_LINK_GIDS_MIN },
        { "GIDS with 17 ancestors", PVRDMA_LINK_GIDS, 0,
          PVRDMA_LINK_GIDS_MIN, 0, { 1, [68] = 1, [76] = 17 },
          PVRDMA_LINK_GIDS_MIN },
        { "GIDS with a zero ancestor", PVRDMA_LINK_GIDS, 0,
          PVRDMA_LINK_GIDS_MIN, 0, { 1, [68] = 1, [76] = 1 },
          PVRDMA_LINK_GIDS_MIN },
        { "GIDS with an ancestor past its count", PVRDMA_LINK_GIDS, 0,
          PVRDMA_LINK_GIDS_MIN, 0, { 1, [68] = 1, [88] = 5 },
          PVRDMA_LINK_GIDS_MIN },
        { "REQ with a reserved byte set", PVRDMA_LINK_REQ, 0,
          PVRDMA_LINK_REQ_SIZE, 1, { PVRDMA_WR_SEND, [109] = 1 },
          PVRDMA_LINK_REQ_SIZE },
        { "ACK of a lost connection with a success", PVRDMA_LINK_ACK, 0,
          PVRDMA_LINK_ACK_SIZE, 1, { 0, [6] = 1 }, PVRDMA_LINK_ACK_SIZE },
        { "ACK with an unknown flag", PVRDMA_LINK_ACK, 0,
          PVRDMA_LINK_ACK_SIZE, 1, { 0, [6] = 2 }, PVRDMA_LINK_ACK_SIZE },
        { "PEERS with a count beyond its length", PVRDMA_LINK_PEERS, 0,
          40, 0, { 2, [8] = 1, [32] = 1 }, 40 },
        { "PEERS of 65 members", PVRDMA_LINK_PEERS, 0,
          PVRDMA_LINK_PEERS_MIN, 0, { 65 }, PVRDMA_LINK_PEERS_MIN },
        { "PEERS with a reserved byte set", PVRDMA_LINK_PEERS, 0,
          PVRDMA_LINK_PEERS_MIN, 0, { 0, 0, 1 }, PVRDMA_LINK_PEERS_MIN },
        { "PEERS naming instance 0", PVRDMA_LINK_PEERS, 0, 40, 0,
          { 1, [32] = 1 }, 40 },
        { "PEERS naming port 0", PVRDMA_LINK_PEERS, 0, 40, 0,
          { 1, [8] = 5 }, 40 },
        { "PEERS member with a reserved byte set", PVRDMA_LINK_PEERS, 0, 40,
          0, { 1, [8] = 5, [32] = 1, [39] = 1 }, 40 },
    };
    unsigned i;

    (void)state;
    for (i = 0; i < G_N_ELEMENTS(cases); i++) {
        Raw *r = raw_new();
        uint8_t buf[PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_GIDS_MIN];

        put_hdr(buf, cases[i].type, cases[i].flags, cases[i].len,
                cases[i].id);
        memcpy(buf + PVRDMA_LINK_HDR_SIZE, cases[i].body, cases[i].body_len);
        if (!raw_feed(r, buf, PVRDMA_LINK_HDR_SIZE + cases[i].body_len)) {
            fail_msg("case '%s': the link stayed up", cases[i].what);
        }
        assert_int_equal(r->fg->guest_errors, 0);
        raw_free(r);
    }
}

/*
 * A hostile peer linked to a announces b's GID for b's port and sends a's
 * QP a SEND as if from b's QP, its partner: the announcement is refused
 * (said, counted) and the SEND dropped (counted) without taking a's
 * receive; a's connection with b goes on, data checked both ways.
 */
static void test_gid_hijack(void **state)
{
    Net *n = net_new(false);
    uint8_t hello[PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_HELLO_SIZE] = { 0 };
    uint8_t gids[PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_GIDS_MIN + 16] = { 0 };
    uint8_t req[2 * PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_REQ_SIZE + 8] = { 0 };
    uint8_t *q = req + PVRDMA_LINK_HDR_SIZE;
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_sge s, r;
    PvrdmaFabricCounters c;
    struct pvrdma_cqe e;
    unsigned i;
    int sv[2];

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
                     0);
    pvrdma_fabric_add_link(n->ha->fab, sv[0], false, "hostile");
    put_hdr(hello, PVRDMA_LINK_HELLO, 0, PVRDMA_LINK_HELLO_SIZE, 0);
    hello[PVRDMA_LINK_HDR_SIZE] = 0x66;     /* instance */
    hello[PVRDMA_LINK_HDR_SIZE + 16] = 1;   /* its serial of the link */
    put_hdr(gids, PVRDMA_LINK_GIDS, 0, PVRDMA_LINK_GIDS_MIN + 16, 0);
    gids[PVRDMA_LINK_HDR_SIZE] = 2;         /* b's port */
    gids[PVRDMA_LINK_HDR_SIZE + 2] = 1;
    gids[PVRDMA_LINK_HDR_SIZE + 68] = 7;    /* a life */
    fg_test_gid(0, gids + PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_GIDS_MIN);
    assert_int_equal(write(sv[1], hello, sizeof(hello)), sizeof(hello));
    assert_int_equal(write(sv[1], gids, sizeof(gids)), sizeof(gids));
    for (i = 0; i < 10; i++) {
        run(n->ha, n->hb, 1);
    }
    assert_int_equal(pvrdma_fabric_links_up(n->ha->fab), 2);
    pvrdma_fabric_counters(n->ha->fab, &c);
    assert_int_equal(c.gids_refused, 1);
    assert_int_equal(host_said(n->ha, "which another device of the fabric "
                               "holds: refused"), 1);
    /* a waits for a SEND from b; the hostile peer sends one as b. */
    r = sge(n->ma, VA_A, 64);
    fv_post_recv(n->a, 0xa9, &r, 1);
    fv_ring_rq(n->a);
    put_hdr(req, PVRDMA_LINK_REQ, 0, PVRDMA_LINK_REQ_SIZE, 1);
    q[0] = PVRDMA_WR_SEND;
    memcpy(q + 4, &n->b->qpn, 4);            /* from b's QP */
    memcpy(q + 8, &n->a->qpn, 4);            /* to a's, its partner */
    fg_test_gid(0, q + 12);
    fg_test_gid(0, q + 28);
    q[88] = 8;                               /* length */
    put_hdr(q + PVRDMA_LINK_REQ_SIZE, PVRDMA_LINK_DATA, 0, 8, 1);
    memset(q + PVRDMA_LINK_REQ_SIZE + PVRDMA_LINK_HDR_SIZE, 0xee, 8);
    assert_int_equal(write(sv[1], req, sizeof(req)), sizeof(req));
    for (i = 0; i < 20; i++) {
        run(n->ha, n->hb, 1);
    }
    pvrdma_fabric_counters(n->ha->fab, &c);
    assert_int_equal(c.unowned_dropped, 1);
    assert_false(fv_cq_poll(n->cqa, &e));
    assert_int_equal(pvrdma_fabric_links_up(n->ha->fab), 2);
    /* a's WRITEs still go to b, and b's SEND takes a's receive. */
    fv_mr_fill(n->ma, VA_A + 4096, 64, 3);
    s = sge(n->ma, VA_A + 4096, 64);
    h = wqe(0xa1, PVRDMA_WR_RDMA_WRITE, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = n->mb->rkey;
    fv_post_send(n->a, &h, &s, 1);
    fv_ring_sq(n->a);
    expect(wait_cqe(n, n->cqa), 0xa1, PVRDMA_WC_RDMA_WRITE,
           PVRDMA_WC_SUCCESS, 64);
    assert_true(fv_mr_check(n->mb, VA_B, 64, 3));
    fv_mr_fill(n->mb, VA_B + 4096, 64, 5);
    s = sge(n->mb, VA_B + 4096, 64);
    h = wqe(0xb1, PVRDMA_WR_SEND, 1);
    fv_post_send(n->b, &h, &s, 1);
    fv_ring_sq(n->b);
    expect(wait_cqe(n, n->cqb), 0xb1, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 64);
    e = wait_cqe(n, n->cqa);
    expect(e, 0xa9, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS, 64);
    assert_true(fv_mr_check(n->ma, VA_A, 64, 5));
    close(sv[1]);
    run(n->ha, n->hb, 3);
    net_free(n);
}

static int tcp_port_hold(char *addr, size_t size);

/*
 * A peer's PEERS name 128 members at an address that refuses: at most 64
 * are tried at once, each three times a second apart, then given up with
 * one message each (at most PVRDMA_SAY_BURST of them shown a second);
 * the link, the guest and the fabric go on.
 */
static void test_peers_told_bounded(void **state)
{
    Raw *r = raw_new();
    char addr[32];
    int hold = tcp_port_hold(addr, sizeof(addr));
    uint16_t port = atoi(strchr(addr, ':') + 1);
    uint8_t buf[PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_PEERS_MIN +
                PVRDMA_LINK_MAX_PEERS * PVRDMA_LINK_PEER_SIZE];
    unsigned f, i, reports = r->h->reports;
    PvrdmaFabricCounters c;

    (void)state;
    for (f = 0; f < 2; f++) {
        memset(buf, 0, sizeof(buf));
        put_hdr(buf, PVRDMA_LINK_PEERS, 0, sizeof(buf) -
                PVRDMA_LINK_HDR_SIZE, 0);
        buf[PVRDMA_LINK_HDR_SIZE] = PVRDMA_LINK_MAX_PEERS;
        for (i = 0; i < PVRDMA_LINK_MAX_PEERS; i++) {
            uint8_t *e = buf + PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_PEERS_MIN +
                         i * PVRDMA_LINK_PEER_SIZE;

            e[0] = 0x10 + i;
            e[1] = f + 1;                   /* 128 distinct instances */
            e[18] = e[19] = 0xff;           /* ::ffff:127.0.0.1 */
            e[20] = 127;
            e[23] = 1;
            e[24] = port & 0xff;
            e[25] = port >> 8;
        }
        assert_false(raw_feed(r, buf, sizeof(buf)));
    }
    for (i = 0; i < 50; i++) {
        r->h->now += 100000000LL;
        run(r->h, NULL, 1);
    }
    /*
     * Given up within one second: ten said, the other 54 counted and
     * said in one line when the second is over.
     */
    assert_int_equal(r->h->reports - reports, PVRDMA_SAY_BURST + 1);
    assert_int_equal(host_said(r->h, "told of by a peer, unreachable "
                               "(Connection refused"), PVRDMA_SAY_BURST);
    assert_non_null(strstr(r->h->last_report, "54 more messages about "
                           "unreachable peers in the last second were not "
                           "shown (54 in all;"));
    pvrdma_fabric_counters(r->h->fab, &c);
    assert_int_equal(c.messages_suppressed, 54);
    assert_int_equal(pvrdma_fabric_links_up(r->h->fab), 1);
    assert_int_equal(r->fg->guest_errors, 0);
    close(hold);
    raw_free(r);
}

/*
 * What a REQ carries beyond its request: an RC READ's datagram fields
 * (Q_Key, flow label, traffic class, hop limit) are zero, not whatever
 * the host's heap held; its lives are the port's and none yet.
 */
static void test_req_bytes(void **state)
{
    Raw *r = raw_new();
    uint8_t gids[PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_GIDS_MIN + 16] = { 0 };
    uint8_t in[4096], *req = NULL;
    struct pvrdma_sq_wqe_hdr h = wqe(1, PVRDMA_WR_RDMA_READ, 1);
    struct pvrdma_sge sg;
    uint32_t pd;
    FvCq *cq;
    FvQp *qp;
    FvMr *mr;
    size_t got = 0, off;
    unsigned i;

    (void)state;
    /* The raw peer announces the test GID as its port 2. */
    put_hdr(gids, PVRDMA_LINK_GIDS, 0, PVRDMA_LINK_GIDS_MIN + 16, 0);
    gids[PVRDMA_LINK_HDR_SIZE] = 2;
    gids[PVRDMA_LINK_HDR_SIZE + 2] = 1;
    gids[PVRDMA_LINK_HDR_SIZE + 68] = 7;
    fg_test_gid(0, gids + PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_GIDS_MIN);
    assert_false(raw_feed(r, gids, sizeof(gids)));
    assert_int_equal(fg_create_pd(r->fg, 0, &pd), 0);
    cq = fv_cq_new(r->fg, 0, 16);
    qp = fv_qp_new(r->fg, PVRDMA_QPT_RC, pd, cq, cq, NULL, 4, 1, false);
    mr = fv_mr_new(r->fg, pd, VA_A, 4096, ALL_ACCESS);
    assert_int_equal(fv_qp_rts(qp, 0x20002, 0, &conn_opts), 0);
    sg = sge(mr, VA_A, 64);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = 0x100;
    fv_post_send(qp, &h, &sg, 1);
    fv_ring_sq(qp);
    for (i = 0; i < 20 && !req; i++) {
        ssize_t n;

        run(r->h, NULL, 1);
        n = read(r->fd, in + got, sizeof(in) - got);
        got += n > 0 ? (size_t)n : 0;
        /* Frames: the fabric's own GIDS, then the REQ. */
        for (off = 0; off + PVRDMA_LINK_HDR_SIZE <= got;) {
            uint32_t len = in[off + 8] | in[off + 9] << 8 |
                           in[off + 10] << 16 | (uint32_t)in[off + 11] << 24;

            if (off + PVRDMA_LINK_HDR_SIZE + len > got) {
                break;
            }
            if (in[off + 5] == PVRDMA_LINK_REQ) {
                req = in + off + PVRDMA_LINK_HDR_SIZE;
            }
            off += PVRDMA_LINK_HDR_SIZE + len;
        }
    }
    assert_non_null(req);
    assert_int_equal(req[0], PVRDMA_WR_RDMA_READ);
    for (i = 96; i < 112; i++) {
        if (req[i]) {
            fail_msg("REQ byte %u is 0x%02x, not 0", i, req[i]);
        }
    }
    for (i = 0, off = 0; i < 8; i++) {
        off |= req[112 + i];
    }
    assert_true(off != 0);      /* the requester's life */
    for (i = 120; i < PVRDMA_LINK_REQ_SIZE; i++) {
        assert_int_equal(req[i], 0);    /* nothing heard from the peer */
    }
    fv_qp_modify_state(qp, PVRDMA_QPS_ERR);
    run(r->h, NULL, 3);
    g_free(cq);
    g_free(qp);
    g_free(mr);
    raw_free(r);
}

/* A REQ for a QP that does not exist is answered, not a violation. */
static void test_req_to_nobody(void **state)
{
    Raw *r = raw_new();
    uint8_t buf[PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_REQ_SIZE] = { 0 };
    uint8_t ack[PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_ACK_SIZE];
    unsigned i;
    ssize_t got = 0;

    (void)state;
    put_hdr(buf, PVRDMA_LINK_REQ, 0, PVRDMA_LINK_REQ_SIZE, 3);
    buf[PVRDMA_LINK_HDR_SIZE] = PVRDMA_WR_RDMA_READ;
    buf[PVRDMA_LINK_HDR_SIZE + 8] = 0x33;           /* dst_qpn */
    assert_int_equal(write(r->fd, buf, sizeof(buf)), sizeof(buf));
    /* Skip the GIDS frame the fabric announced at HELLO. */
    for (i = 0; i < 20 && got <= 0; i++) {
        uint8_t frame[PVRDMA_LINK_HDR_SIZE + 4096 + 4];
        uint32_t len;

        run(r->h, NULL, 1);
        while (read(r->fd, frame, PVRDMA_LINK_HDR_SIZE) ==
               PVRDMA_LINK_HDR_SIZE) {
            memcpy(&len, frame + 8, 4);
            len = GUINT32_FROM_LE(len);
            assert_int_equal(read(r->fd, frame + PVRDMA_LINK_HDR_SIZE, len),
                             len);
            if (frame[5] == PVRDMA_LINK_ACK) {
                memcpy(ack, frame, sizeof(ack));
                got = 1;
            }
        }
    }
    assert_int_equal(got, 1);
    assert_int_equal(ack[12], 3);                   /* id */
    assert_int_equal(ack[PVRDMA_LINK_HDR_SIZE], PVRDMA_WC_RETRY_EXC_ERR);
    assert_int_equal(pvrdma_fabric_links_up(r->h->fab), 1);
    raw_free(r);
}

/*
 * A peer that sends requests but never reads the answers: our output
 * grows to its bound (64 KiB in this build) and the link is closed.
 */
static void test_peer_never_reads(void **state)
{
    Raw *r = raw_new();
    uint8_t buf[PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_REQ_SIZE] = { 0 };
    unsigned i, j;

    (void)state;
    buf[PVRDMA_LINK_HDR_SIZE] = PVRDMA_WR_RDMA_READ;
    buf[PVRDMA_LINK_HDR_SIZE + 8] = 0x33;           /* to no QP */
    for (i = 1; i < 100000 && pvrdma_fabric_links_up(r->h->fab); i++) {
        put_hdr(buf, PVRDMA_LINK_REQ, 0, PVRDMA_LINK_REQ_SIZE, i);
        for (j = 0; j < 1000 && write(r->fd, buf, sizeof(buf)) < 0; j++) {
            run(r->h, NULL, 1);
        }
        if (i % 64 == 0) {
            run(r->h, NULL, 1);
        }
    }
    assert_int_equal(pvrdma_fabric_links_up(r->h->fab), 0);
    assert_non_null(strstr(r->h->last_report, "stopped reading"));
    raw_free(r);
}

/* Random bytes after HELLO: the link may close, nothing else happens. */
static void test_random_frames(void **state)
{
    GRand *rnd = g_rand_new_with_seed(12345);
    unsigned round;

    (void)state;
    for (round = 0; round < 200; round++) {
        Raw *r = raw_new();
        uint8_t buf[512];
        unsigned i, k;

        for (k = 0; k < 4; k++) {
            uint32_t len = g_rand_int_range(rnd, 0, 120);

            /* A valid header most of the time, so bodies get parsed. */
            put_hdr(buf, g_rand_int_range(rnd, 1, PVRDMA_LINK_TYPE_MAX + 1),
                    g_rand_int_range(rnd, 0, 2), len,
                    g_rand_int_range(rnd, 0, 4));
            if (g_rand_int_range(rnd, 0, 8) == 0) {
                buf[g_rand_int_range(rnd, 0, 16)] ^= 0xff;
            }
            for (i = 0; i < len; i++) {
                buf[PVRDMA_LINK_HDR_SIZE + i] = g_rand_int(rnd);
            }
            if (raw_feed(r, buf, PVRDMA_LINK_HDR_SIZE + len)) {
                break;
            }
        }
        raw_free(r);
    }
    g_rand_free(rnd);
}

/* HELLO of a shared-ring link without its memfd. */
static void test_shm_hello_without_ring(void **state)
{
    Host *h = host_new();
    uint8_t hello[PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_HELLO_SIZE] = { 0 };
    uint32_t ring = GUINT32_TO_LE(PVRDMA_LINK_RING_SIZE);
    int sv[2];
    unsigned i;

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pvrdma_fabric_add_link(h->fab, sv[0], true, "raw-shm");
    put_hdr(hello, PVRDMA_LINK_HELLO, 0, PVRDMA_LINK_HELLO_SIZE, 0);
    hello[PVRDMA_LINK_HDR_SIZE] = 1;
    hello[PVRDMA_LINK_HDR_SIZE + 16] = 1;
    memcpy(hello + PVRDMA_LINK_HDR_SIZE + 8, &ring, 4);
    assert_int_equal(write(sv[1], hello, sizeof(hello)), sizeof(hello));
    for (i = 0; i < 5; i++) {
        run(h, NULL, 1);
    }
    assert_int_equal(pvrdma_fabric_links_up(h->fab), 0);
    assert_non_null(strstr(h->last_report, "HELLO"));
    close(sv[1]);
    host_free(h);
}

/*
 * A hostile peer on a shm link: its own memfd (data ring, frame ring,
 * counters page as in pvrdma_link.c), passed with HELLO.
 */
typedef struct RawShm {
    Host *h;
    FakeGuest *fg;
    int fd;
    uint8_t *map;
    uint64_t *cnt;              /* frames, peer_frames, poll_until, want */
} RawShm;

static RawShm *raw_shm_new(void)
{
    RawShm *r = g_new0(RawShm, 1);
    uint8_t hello[PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_HELLO_SIZE] = { 0 };
    uint32_t ring = GUINT32_TO_LE(PVRDMA_LINK_RING_SIZE);
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = { .iov_base = hello, .iov_len = sizeof(hello) };
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1,
        .msg_control = u.buf, .msg_controllen = sizeof(u.buf),
    };
    struct cmsghdr *c;
    int sv[2], mfd;
    unsigned i;

    r->h = host_new();
    r->fg = host_guest(r->h, 1);
    mfd = memfd_create("raw-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    assert_true(mfd >= 0);
    assert_int_equal(ftruncate(mfd, PVRDMA_LINK_RING_MAP), 0);
    r->map = mmap(NULL, PVRDMA_LINK_RING_MAP, PROT_READ | PROT_WRITE,
                  MAP_SHARED, mfd, 0);
    assert_true(r->map != MAP_FAILED);
    assert_int_equal(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
    r->cnt = (uint64_t *)(r->map + PVRDMA_LINK_RING_SIZE +
                          PVRDMA_LINK_FRAME_RING);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pvrdma_fabric_add_link(r->h->fab, sv[0], true, "raw-shm");
    r->fd = sv[1];
    put_hdr(hello, PVRDMA_LINK_HELLO, 0, PVRDMA_LINK_HELLO_SIZE, 0);
    hello[PVRDMA_LINK_HDR_SIZE] = 0x5b;     /* instance */
    hello[PVRDMA_LINK_HDR_SIZE + 16] = 1;  /* its serial of the link */
    memcpy(hello + PVRDMA_LINK_HDR_SIZE + 8, &ring, 4);
    memset(&u, 0, sizeof(u));
    c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &mfd, sizeof(int));
    assert_int_equal(sendmsg(r->fd, &msg, 0), sizeof(hello));
    close(mfd);
    for (i = 0; i < 5; i++) {
        run(r->h, NULL, 1);
    }
    assert_int_equal(pvrdma_fabric_links_up(r->h->fab), 1);
    fcntl(r->fd, F_SETFL, O_NONBLOCK);
    return r;
}

static void raw_shm_free(RawShm *r)
{
    close(r->fd);
    run(r->h, NULL, 3);
    fg_free(r->fg);
    host_free(r->h);
    munmap(r->map, PVRDMA_LINK_RING_MAP);
    g_free(r);
}

/* Put @len bytes in the raw peer's frame ring, publish, kick, run. */
static void raw_shm_frames(RawShm *r, const void *buf, size_t len)
{
    uint8_t *ring = r->map + PVRDMA_LINK_RING_SIZE;
    uint8_t kick = 0;
    size_t i;

    for (i = 0; i < len; i++) {
        ring[(r->cnt[0] + i) % PVRDMA_LINK_FRAME_RING] =
            ((const uint8_t *)buf)[i];
    }
    r->cnt[0] += len;
    assert_int_equal(write(r->fd, &kick, 1), 1);
    for (i = 0; i < 5; i++) {
        run(r->h, NULL, 1);
    }
}

/*
 * The frame ring's counters come from the peer: a valid frame through
 * the ring is taken (the fabric consumes it and says so), a producer
 * count beyond the ring, or a consumer count beyond what the fabric
 * wrote, closes the link.
 */
static void test_shm_hostile_counters(void **state)
{
    uint8_t gids[PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_GIDS_MIN] = { 0 };
    RawShm *r;

    (void)state;
    /* A valid empty GIDS frame, through the ring. */
    r = raw_shm_new();
    put_hdr(gids, PVRDMA_LINK_GIDS, 0, PVRDMA_LINK_GIDS_MIN, 0);
    gids[PVRDMA_LINK_HDR_SIZE + 68] = 1;    /* its life */
    raw_shm_frames(r, gids, sizeof(gids));
    assert_int_equal(pvrdma_fabric_links_up(r->h->fab), 1);
    /* The fabric's counters page: it consumed all of ours. */
    assert_int_equal(pvrdma_link_pending_in(r->h->fab->links->data), false);
    /* A producer count past the ring. */
    r->cnt[0] += PVRDMA_LINK_FRAME_RING + 1;
    raw_shm_frames(r, NULL, 0);
    assert_int_equal(pvrdma_fabric_links_up(r->h->fab), 0);
    assert_non_null(strstr(r->h->last_report, "frame ring counter"));
    raw_shm_free(r);

    /* A consumer count past what the fabric wrote (it sent GIDS). */
    r = raw_shm_new();
    r->cnt[1] = 1u << 30;
    assert_int_equal(fg_bind_gid(r->fg, 1), 0);     /* GIDS goes out */
    run(r->h, NULL, 3);
    assert_int_equal(pvrdma_fabric_links_up(r->h->fab), 0);
    assert_non_null(strstr(r->h->last_report, "frame ring counter"));
    raw_shm_free(r);
}

/*
 * Our memfd is not sealed against writes (so that an idle link can give
 * its pages back): a peer may map it writable and scribble on every byte
 * of it.  That spoils only what the peer itself reads: the fabric never
 * reads back its own rings, so its next frames arrive intact, published
 * at its own count, and the link stays up.
 */
static void test_shm_peer_writes_our_ring(void **state)
{
    uint8_t hello[PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_HELLO_SIZE];
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = { .iov_base = hello, .iov_len = sizeof(hello) };
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1,
        .msg_control = u.buf, .msg_controllen = sizeof(u.buf),
    };
    struct cmsghdr *c;
    RawShm *r;
    uint8_t *theirs, *fr, hdr[6];
    uint64_t *cnt, at, start, i;
    int mfd = -1;

    (void)state;
    r = raw_shm_new();
    /* The fabric's HELLO, and its memfd with it. */
    assert_int_equal(recvmsg(r->fd, &msg, 0), sizeof(hello));
    c = CMSG_FIRSTHDR(&msg);
    assert_non_null(c);
    memcpy(&mfd, CMSG_DATA(c), sizeof(int));
    theirs = mmap(NULL, PVRDMA_LINK_RING_MAP, PROT_READ | PROT_WRITE,
                  MAP_SHARED, mfd, 0);
    assert_true(theirs != MAP_FAILED);
    close(mfd);
    cnt = (uint64_t *)(theirs + PVRDMA_LINK_RING_SIZE +
                       PVRDMA_LINK_FRAME_RING);
    start = cnt[0];             /* what it wrote so far (we take none) */
    /* Everything: rings and counters (frames, peer_frames, ..., want). */
    memset(theirs, 0xa5, PVRDMA_LINK_RING_MAP);
    cnt[1] = start;             /* (the one field the fabric reads) */
    /* The fabric announces a GID: its GIDS frame comes out intact. */
    assert_int_equal(fg_bind_gid(r->fg, 1), 0);
    run(r->h, NULL, 3);
    assert_int_equal(pvrdma_fabric_links_up(r->h->fab), 1);
    at = __atomic_load_n(&cnt[0], __ATOMIC_ACQUIRE);
    assert_true(at - start >= PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_GIDS_MIN &&
                at - start <= PVRDMA_LINK_FRAME_RING);
    fr = theirs + PVRDMA_LINK_RING_SIZE;
    for (i = 0; i < 6; i++) {
        hdr[i] = fr[(start + i) % PVRDMA_LINK_FRAME_RING];
    }
    assert_int_equal(hdr[0] | hdr[1] << 8 | hdr[2] << 16 |
                     (uint32_t)hdr[3] << 24, PVRDMA_LINK_MAGIC);
    assert_int_equal(hdr[5], PVRDMA_LINK_GIDS);
    munmap(theirs, PVRDMA_LINK_RING_MAP);
    raw_shm_free(r);
}

/* ---- discovery through a directory ------------------------------------- */

/*
 * A TCP address "127.0.0.1:PORT" in @addr, the port chosen by the kernel
 * and held by the returned socket (bound with SO_REUSEADDR, never
 * listening) until the test closes it: a fabric may listen there (its
 * listener sets SO_REUSEADDR too), no other process may bind it, and no
 * connect takes it as its source port while nothing listens.  A fixed
 * port fails the test when another run of it listens there at the same
 * time, and the TIME_WAIT its earlier runs left (for a minute) delays a
 * refused connect by tens of ms when a new connect's source port meets
 * one: the SYN is answered by the TIME_WAIT's ACK, the RST comes on the
 * SYN's retransmission.
 */
static int tcp_port_hold(char *addr, size_t size)
{
    struct sockaddr_in sin = {
        .sin_family = AF_INET,
        .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
    };
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

    assert_true(fd >= 0);
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
                                sizeof(one)), 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
    g_snprintf(addr, size, "127.0.0.1:%u", ntohs(sin.sin_port));
    return fd;
}

/*
 * Rounds of @a and @b (NULL: @a alone), their clocks still, until @cond
 * holds, for at most 5 s: what the kernel does in its own time (a
 * connect's answer, loopback delivery on a loaded machine) is waited
 * for, not counted in rounds.  What the fabric does on its clock stays
 * on the manual clock, moved by the test.
 */
#define RUN_UNTIL(a, b, cond)                                           \
    do {                                                                \
        gint64 end_ = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;      \
                                                                        \
        while (!(cond) && g_get_monotonic_time() < end_) {              \
            run((a), (b), 1);                                           \
        }                                                               \
    } while (0)

#define LINKED(a, b) (pvrdma_fabric_links_up((a)->fab) == 1 &&          \
                      pvrdma_fabric_links_up((b)->fab) == 1)

/* Both sides listen and name each other as peer: one link, no churn. */
static void test_peers_both_ways(void **state)
{
    Host *a = host_new(), *b = host_new();
    char addr_a[32], addr_b[32], *err = NULL;
    int hold_a = tcp_port_hold(addr_a, sizeof(addr_a));
    int hold_b = tcp_port_hold(addr_b, sizeof(addr_b));
    unsigned i;

    (void)state;
    assert_true(pvrdma_fabric_listen(a->fab, addr_a, &err));
    assert_true(pvrdma_fabric_listen(b->fab, addr_b, &err));
    assert_true(pvrdma_fabric_add_peer(a->fab, addr_b, &err));
    assert_true(pvrdma_fabric_add_peer(b->fab, addr_a, &err));
    for (i = 0; i < 60; i++) {
        a->now += 100000000LL;
        b->now += 100000000LL;
        run(a, b, 2);
    }
    RUN_UNTIL(a, b, LINKED(a, b));
    assert_int_equal(pvrdma_fabric_links_up(a->fab), 1);
    assert_int_equal(pvrdma_fabric_links_up(b->fab), 1);
    /* At most the two first links came up (then one was dropped). */
    assert_true(a->reports <= 2);
    host_free(a);
    host_free(b);
    close(hold_a);
    close(hold_b);
}

/* ---- TLS on TCP links ------------------------------------------------ */

#define PSK_1   "7c1e9a4d2b8f3056e4a1c9d07b2f6e18"
#define PSK_2   "0a9b8c7d6e5f40312a3b4c5d6e7f8091"

/*
 * Two hosts with a fake guest each, a TCP link between them (a socket
 * pair: a accepted it, b made it) with TLS on a's side if @ka and on b's
 * if @kb, run for @rounds rounds.  a's end is made first, unless
 * @b_first.
 */
static Net *net_tls(const char *ka, const char *kb, unsigned rounds,
                    bool b_first)
{
    Net *n = g_new0(Net, 1);

    n->ha = host_new();
    n->hb = host_new();
    n->fa = host_guest(n->ha, 1);
    n->fb = host_guest(n->hb, 2);
    if (ka) {
        host_use_tls(n->ha, ka);
    }
    if (kb) {
        host_use_tls(n->hb, kb);
    }
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
                                n->sv), 0);
    if (b_first) {
        pvrdma_fabric_add_tcp_link(n->hb->fab, n->sv[1], "tls-b", "b.test");
    }
    pvrdma_fabric_add_tcp_link(n->ha->fab, n->sv[0], "tls-a", NULL);
    if (!b_first) {
        pvrdma_fabric_add_tcp_link(n->hb->fab, n->sv[1], "tls-b", "b.test");
    }
    run(n->ha, n->hb, rounds);
    return n;
}

/*
 * One pre-shared key on both ends: the link comes up over TLS and every
 * opcode moves its data, checked (200 KiB messages: many TLS records,
 * and more than the socket holds, so sends block and resume).
 */
static void test_tls_psk(void **state)
{
    Net *n = net_tls(PSK_1, PSK_1, 0, false);
    unsigned i;

    (void)state;
    for (i = 0; i < 200 && (pvrdma_fabric_links_up(n->ha->fab) != 1 ||
                            pvrdma_fabric_links_up(n->hb->fab) != 1); i++) {
        run(n->ha, n->hb, 1);
    }
    run(n->ha, n->hb, 3);
    assert_int_equal(host_said(n->ha, "link tls-a up (TLS)"), 1);
    assert_int_equal(host_said(n->hb, "link tls-b up (TLS)"), 1);
    net_qps(n);
    do_ops_on(n);
    assert_int_equal(host_said(n->ha, "down"), 0);
    assert_int_equal(host_said(n->hb, "down"), 0);
    net_free(n);
}

/*
 * Different keys: the handshake fails on both ends, no link comes up,
 * and a's WRITE to b ends as toward a dead peer (RETRY_EXC_ERR).
 */
static void test_tls_wrong_key(void **state)
{
    Net *n = net_tls(PSK_1, PSK_2, 200, false);

    (void)state;
    assert_int_equal(pvrdma_fabric_links_up(n->ha->fab), 0);
    assert_int_equal(pvrdma_fabric_links_up(n->hb->fab), 0);
    assert_int_equal(host_said(n->ha, " up"), 0);
    assert_int_equal(host_said(n->hb, " up"), 0);
    assert_int_equal(host_said(n->ha, "link tls-a down: TLS handshake "
                               "failed"), 1);
    assert_int_equal(host_said(n->hb, "link tls-b down: TLS handshake "
                               "failed"), 1);
    assert_int_equal(host_said(n->hb, "same key"), 1);
    /* Counted; the same reason again within a minute is not said. */
    {
        PvrdmaFabricCounters c;
        int sv[2];

        pvrdma_fabric_counters(n->ha->fab, &c);
        assert_int_equal(c.refused_tls, 1);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
                                    sv), 0);
        n->ha->now += PVRDMA_LINK_REFUSAL_SAY_NS - 1;
        n->hb->now += PVRDMA_LINK_REFUSAL_SAY_NS - 1;
        pvrdma_fabric_add_tcp_link(n->ha->fab, sv[0], "tls-a", NULL);
        pvrdma_fabric_add_tcp_link(n->hb->fab, sv[1], "tls-b", "b.test");
        run(n->ha, n->hb, 200);
        pvrdma_fabric_counters(n->ha->fab, &c);
        assert_int_equal(c.refused_tls, 2);
        assert_int_equal(host_said(n->ha, "TLS handshake failed"), 1);
        assert_int_equal(host_said(n->hb, "TLS handshake failed"), 1);
    }
    /* The refused peer's QPs are out of reach, as a dead peer's are. */
    {
        struct pvrdma_sge s;
        struct pvrdma_sq_wqe_hdr h;

        net_qps(n);
        s = sge(n->ma, VA_A, 64);
        h = wqe(1, PVRDMA_WR_RDMA_WRITE, 1);
        h.wr.rdma.remote_addr = VA_B;
        h.wr.rdma.rkey = n->mb->rkey;
        fv_post_send(n->a, &h, &s, 1);
        fv_ring_sq(n->a);
        expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_RETRY_EXC_ERR, 0);
    }
    net_free(n);
}

/*
 * TLS on one end only, either way round: refused on both, each end
 * saying which side lacks TLS.
 */
static void test_tls_plain_peer(void **state)
{
    Net *n = net_tls(PSK_1, NULL, 200, false);

    (void)state;
    /* A TLS server, a plain client: its HELLO comes in the clear. */
    assert_int_equal(pvrdma_fabric_links_up(n->ha->fab), 0);
    assert_int_equal(pvrdma_fabric_links_up(n->hb->fab), 0);
    assert_int_equal(host_said(n->ha, "link tls-a down: the peer speaks "
                               "the fabric protocol without TLS: give it "
                               "fabric-tls-creds"), 1);
    assert_int_equal(host_said(n->hb, "link tls-b down: the peer closed "
                               "the link before its HELLO (its log says "
                               "why; a peer with fabric-tls-creds refuses "
                               "one without)"), 1);
    assert_int_equal(host_said(n->hb, " up"), 0);
    net_free(n);

    /*
     * A plain server, a TLS client: each tells what the other lacks (the
     * client's hello is out before the server's HELLO: they cross).
     */
    n = net_tls(NULL, PSK_1, 200, true);
    assert_int_equal(pvrdma_fabric_links_up(n->ha->fab), 0);
    assert_int_equal(pvrdma_fabric_links_up(n->hb->fab), 0);
    assert_int_equal(host_said(n->ha, "link tls-a down: the peer speaks "
                               "TLS: give this QEMU fabric-tls-creds"), 1);
    assert_int_equal(host_said(n->hb, "link tls-b down: the peer speaks "
                               "the fabric protocol without TLS"), 1);
    net_free(n);
}

/* A peer that connects and never starts its handshake goes after 10 s. */
static void test_tls_silent_peer(void **state)
{
    Host *a = host_new();
    int sv[2];

    (void)state;
    host_use_tls(a, PSK_1);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
                     0);
    pvrdma_fabric_add_tcp_link(a->fab, sv[0], "silent", NULL);
    run(a, NULL, 5);
    assert_int_equal(host_said(a, "down"), 0);
    a->now += PVRDMA_LINK_HELLO_NS;
    run(a, NULL, 5);
    assert_int_equal(host_said(a, "link silent down: no TLS handshake from "
                               "the peer within 10 s"), 1);
    close(sv[1]);
    host_free(a);
}

/*
 * The peer's host drops our SYNs (here a listener whose accept queue is
 * full: Linux drops a SYN it has no room for): the connect is given up
 * after 2 s and said, "Connection timed out", and made again, rather than
 * left to the kernel's retransmissions, which back off to a minute.  So
 * once the host answers again (room in the queue), the next try gets in.
 */
static void test_peer_silent_host(void **state)
{
    Host *b = host_new();
    char addr[32], *err = NULL;
    int hold = tcp_port_hold(addr, sizeof(addr)), c1, fd;
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    struct pollfd p;
    unsigned i, reports;

    (void)state;
    assert_int_equal(listen(hold, 0), 0);
    assert_int_equal(getsockname(hold, (struct sockaddr *)&sin, &len), 0);
    c1 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_int_equal(connect(c1, (struct sockaddr *)&sin, sizeof(sin)), 0);
    reports = b->reports;
    assert_true(pvrdma_fabric_add_peer(b->fab, addr, &err));
    for (i = 0; i < 19; i++) {
        b->now += 100000000LL;
        run(b, NULL, 2);
    }
    /* No answer and no refusal yet: nothing to say. */
    assert_int_equal(b->reports, reports);
    assert_int_equal(pvrdma_fabric_links_up(b->fab), 0);
    /* Room again in the queue, then past 2 s: given up, said, retried. */
    fd = accept4(hold, NULL, NULL, SOCK_CLOEXEC);
    assert_true(fd >= 0);
    close(fd);
    for (i = 0; i < 2; i++) {
        b->now += 100000000LL;
        run(b, NULL, 2);
    }
    assert_int_equal(b->reports, reports + 1);
    assert_non_null(strstr(b->last_report, "unreachable (Connection timed "
                           "out"));
    p = (struct pollfd) { .fd = hold, .events = POLLIN };
    assert_int_equal(poll(&p, 1, 2000), 1);
    fd = accept4(hold, NULL, NULL, SOCK_CLOEXEC);
    assert_true(fd >= 0);
    close(fd);
    close(c1);
    host_free(b);
    close(hold);
}

/* A TCP connection to @addr ("127.0.0.1:PORT"), non-blocking. */
static int tcp_client(const char *addr)
{
    struct sockaddr_in sin = {
        .sin_family = AF_INET,
        .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
        .sin_port = htons(atoi(strchr(addr, ':') + 1)),
    };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

/* Live links of @h's fabric, up or waiting for their HELLO. */
static unsigned links_live(Host *h)
{
    return pvrdma_fabric_link_stats(h->fab, NULL, 0);
}

/* Links @h accepted: the live ones and those closed for newer ones. */
static unsigned links_accepted(Host *h)
{
    PvrdmaFabricCounters c;

    pvrdma_fabric_counters(h->fab, &c);
    return links_live(h) + c.half_open_closed;
}

/*
 * A client that connects to fabric-listen in a loop, each time with a
 * HELLO and then a bad frame: every connection comes up and goes down,
 * but the log gets at most PVRDMA_SAY_BURST lines of each a second, and
 * one line each saying how many were not shown; a real peer still links.
 */
#define FLOOD_CONNS 40

static void test_listener_flood_quiet(void **state)
{
    Host *a = host_new(), *b;
    char addr[32], *err = NULL;
    int hold = tcp_port_hold(addr, sizeof(addr));
    PvrdmaFabricCounters c;
    unsigned i;

    (void)state;
    assert_true(pvrdma_fabric_listen(a->fab, addr, &err));
    for (i = 0; i < FLOOD_CONNS; i++) {
        uint8_t buf[2 * PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_HELLO_SIZE] = {
            0 };
        int fd = tcp_client(addr);

        put_hdr(buf, PVRDMA_LINK_HELLO, 0, PVRDMA_LINK_HELLO_SIZE, 0);
        buf[PVRDMA_LINK_HDR_SIZE] = 0x40 + i;       /* its instance */
        buf[PVRDMA_LINK_HDR_SIZE + 16] = 1;        /* its serial */
        put_hdr(buf + PVRDMA_LINK_HDR_SIZE + PVRDMA_LINK_HELLO_SIZE, 99, 0,
                0, 0);
        assert_int_equal(write(fd, buf, sizeof(buf)), sizeof(buf));
        RUN_UNTIL(a, NULL, pvrdma_fabric_links_downed(a->fab) == i + 1);
        assert_int_equal(pvrdma_fabric_links_downed(a->fab), i + 1);
        close(fd);
    }
    /* All within one second of the manual clock. */
    assert_int_equal(host_said(a, " up"), PVRDMA_SAY_BURST);
    assert_int_equal(host_said(a, "down: "), PVRDMA_SAY_BURST);
    pvrdma_fabric_counters(a->fab, &c);
    assert_int_equal(c.messages_suppressed,
                     2 * (FLOOD_CONNS - PVRDMA_SAY_BURST));
    /* The second ends: what was held back is said, once per cause. */
    for (i = 0; i < 12; i++) {
        a->now += 100000000LL;
        run(a, NULL, 1);
    }
    assert_int_equal(host_said(a, "more messages about links up in the "
                               "last second were not shown"), 1);
    assert_int_equal(host_said(a, "30 more messages about links down"), 1);
    assert_int_equal(a->reports, 2 * PVRDMA_SAY_BURST + 2);
    /* A fabric member is not turned away. */
    b = host_new();
    assert_true(pvrdma_fabric_add_peer(b->fab, addr, &err));
    RUN_UNTIL(a, b, LINKED(a, b));
    assert_int_equal(pvrdma_fabric_links_up(a->fab), 1);
    host_free(a);
    host_free(b);
    close(hold);
}

/*
 * Connections that send nothing, or a HELLO's first bytes a byte at a
 * time: at most PVRDMA_FABRIC_MAX_HALF_OPEN are kept (a newer one closes
 * the oldest), each goes after 10 s without a HELLO even while it
 * trickles, and a real peer links all along.
 */
#define SILENT_CONNS (PVRDMA_FABRIC_MAX_HALF_OPEN + 6)

static void test_listener_half_open_bounded(void **state)
{
    Host *a = host_new(), *b = host_new();
    char addr[32], *err = NULL;
    int hold = tcp_port_hold(addr, sizeof(addr));
    int fds[SILENT_CONNS];
    uint8_t hello[PVRDMA_LINK_HDR_SIZE] = { 0 };
    PvrdmaFabricCounters c;
    unsigned i;

    (void)state;
    assert_true(pvrdma_fabric_listen(a->fab, addr, &err));
    for (i = 0; i < SILENT_CONNS; i++) {
        fds[i] = tcp_client(addr);
        RUN_UNTIL(a, NULL, links_accepted(a) == i + 1);
        assert_int_equal(links_accepted(a), i + 1);
    }
    assert_int_equal(links_live(a), PVRDMA_FABRIC_MAX_HALF_OPEN);
    pvrdma_fabric_counters(a->fab, &c);
    assert_int_equal(c.half_open_closed, SILENT_CONNS -
                     PVRDMA_FABRIC_MAX_HALF_OPEN);
    /* The oldest went: their ends read EOF after our HELLO. */
    for (i = 0; i < SILENT_CONNS; i++) {
        char buf[256];
        ssize_t n;

        while ((n = read(fds[i], buf, sizeof(buf))) > 0) {
            /* our HELLO */
        }
        if (i < SILENT_CONNS - PVRDMA_FABRIC_MAX_HALF_OPEN) {
            assert_int_equal(n, 0);
        } else {
            assert_true(n < 0 && errno == EAGAIN);
        }
    }
    /* A member joins while they wait (its link closes one more). */
    assert_true(pvrdma_fabric_add_peer(b->fab, addr, &err));
    RUN_UNTIL(a, b, pvrdma_fabric_links_up(a->fab) == 1 &&
              pvrdma_fabric_links_up(b->fab) == 1);
    assert_int_equal(pvrdma_fabric_links_up(a->fab), 1);
    pvrdma_fabric_counters(a->fab, &c);
    assert_int_equal(c.half_open_closed, SILENT_CONNS -
                     PVRDMA_FABRIC_MAX_HALF_OPEN + 1);
    /* One trickles its HELLO: a byte every second. */
    put_hdr(hello, PVRDMA_LINK_HELLO, 0, PVRDMA_LINK_HELLO_SIZE, 0);
    for (i = 0; i < 11; i++) {
        assert_int_equal(write(fds[SILENT_CONNS - 1], hello + i, 1), 1);
        a->now += 1000000000LL;
        b->now += 1000000000LL;
        run(a, b, 3);
    }
    RUN_UNTIL(a, b, links_live(a) == 1);
    assert_int_equal(links_live(a), 1);
    assert_int_equal(pvrdma_fabric_links_up(a->fab), 1);
    pvrdma_fabric_counters(a->fab, &c);
    assert_int_equal(c.hello_timeouts, PVRDMA_FABRIC_MAX_HALF_OPEN - 1);
    assert_int_equal(host_said(a, "no HELLO from the peer within 10 s"),
                     PVRDMA_SAY_BURST);
    for (i = 0; i < SILENT_CONNS; i++) {
        close(fds[i]);
    }
    host_free(a);
    host_free(b);
    close(hold);
}

/* The listening side restarts: the peer side reconnects by itself. */
static void test_peer_reconnects(void **state)
{
    Host *a = host_new(), *b = host_new(), *a2;
    char addr[32], *err = NULL;
    int hold = tcp_port_hold(addr, sizeof(addr));
    unsigned i;

    (void)state;
    assert_true(pvrdma_fabric_listen(a->fab, addr, &err));
    assert_true(pvrdma_fabric_add_peer(b->fab, addr, &err));
    /* No timer: the connect, the accept and the HELLOs. */
    RUN_UNTIL(a, b, LINKED(a, b));
    assert_int_equal(pvrdma_fabric_links_up(b->fab), 1);
    host_free(a);
    /* No timer either: b reads the end of the link (at 1 s). */
    RUN_UNTIL(b, NULL, pvrdma_fabric_links_up(b->fab) == 0);
    assert_int_equal(pvrdma_fabric_links_up(b->fab), 0);
    /*
     * The retry, due a second later: its connect starts by 2.5 s on the
     * manual clock, the kernel refuses it in its own time.
     */
    for (i = 0; i < 15; i++) {
        b->now += 100000000LL;
        run(b, NULL, 2);
    }
    RUN_UNTIL(b, NULL, strstr(b->last_report, "unreachable"));
    assert_int_equal(pvrdma_fabric_links_up(b->fab), 0);
    assert_non_null(strstr(b->last_report, "unreachable"));
    a2 = host_new();
    assert_true(pvrdma_fabric_listen(a2->fab, addr, &err));
    /* The next retry (by 5.5 s), then the connect and HELLOs. */
    for (i = 0; i < 30; i++) {
        b->now += 100000000LL;
        run(a2, b, 2);
    }
    RUN_UNTIL(a2, b, LINKED(a2, b));
    assert_int_equal(pvrdma_fabric_links_up(a2->fab), 1);
    assert_int_equal(pvrdma_fabric_links_up(b->fab), 1);
    host_free(a2);
    host_free(b);
    close(hold);
}

/* A directory link that closes with both processes alive comes back. */
static void test_dir_link_recovers(void **state)
{
    char *dir = g_dir_make_tmp("pvrdma-fab-XXXXXX", NULL);
    Host *a = host_new(), *b = host_new();
    char *err = NULL;
    unsigned i;

    (void)state;
    assert_true(pvrdma_fabric_join_dir(a->fab, dir, &err));
    assert_true(pvrdma_fabric_join_dir(b->fab, dir, &err));
    run(a, b, 20);
    assert_int_equal(pvrdma_fabric_links_up(a->fab), 1);
    pvrdma_link_close(a->fab->links->data, "test");
    run(a, b, 5);
    assert_int_equal(pvrdma_fabric_links_up(b->fab), 0);
    for (i = 0; i < 30; i++) {
        a->now += 100000000LL;
        b->now += 100000000LL;
        run(a, b, 2);
    }
    assert_int_equal(pvrdma_fabric_links_up(a->fab), 1);
    assert_int_equal(pvrdma_fabric_links_up(b->fab), 1);
    host_free(a);
    host_free(b);
    rmdir(dir);
    g_free(dir);
}

/* The mode bits of @h's socket in @dir. */
static unsigned sock_mode(Host *h, const char *dir)
{
    char *path = g_strdup_printf("%s/%016" G_GINT64_MODIFIER "x.sock", dir,
                                 pvrdma_fabric_instance(h->fab));
    struct stat st;

    assert_int_equal(stat(path, &st), 0);
    g_free(path);
    return st.st_mode & 0777;
}

/*
 * fabric-path admits processes of its own user only, unless others are
 * allowed by uid or group (SO_PEERCRED), on both ends of a link: the
 * accepting side refuses a connecting stranger, the connecting side a
 * stranger's socket; each says what to set.  The test's fabrics take
 * themselves for another user (pvrdma_fabric_set_own_uid), as running
 * them under two uids would need root.
 */
static void test_dir_foreign_uid(void **state)
{
    char *dir = g_dir_make_tmp("pvrdma-fab-XXXXXX", NULL);
    Host *a = host_new(), *b = host_new(), *c, *d;
    char *err = NULL, *me = g_strdup_printf("%u", (unsigned)geteuid());
    char *grp = g_strdup_printf("nosuchgroup-x:%u", (unsigned)getegid());
    PvrdmaFabricCounters ca, cb;

    (void)state;
    /* a is "another user": it refuses b, which connects to it. */
    pvrdma_fabric_set_own_uid(a->fab, geteuid() + 1);
    assert_true(pvrdma_fabric_join_dir(a->fab, dir, &err));
    assert_int_equal(sock_mode(a, dir), 0600);
    assert_true(pvrdma_fabric_join_dir(b->fab, dir, &err));
    run(a, b, 20);
    assert_int_equal(pvrdma_fabric_links_up(a->fab), 0);
    assert_int_equal(pvrdma_fabric_links_up(b->fab), 0);
    pvrdma_fabric_counters(a->fab, &ca);
    pvrdma_fabric_counters(b->fab, &cb);
    assert_int_equal(ca.refused_cred, 1);
    assert_int_equal(cb.refused_cred, 0);
    assert_int_equal(host_said(a, "refused a link on fabric-path"), 1);
    assert_non_null(strstr(a->last_report, "fabric-allow-uid="));
    /* b tries again every second; a says it once. */
    for (unsigned i = 0; i < 30; i++) {
        a->now += 100000000LL;
        b->now += 100000000LL;
        run(a, b, 2);
    }
    pvrdma_fabric_counters(a->fab, &ca);
    assert_true(ca.refused_cred >= 2);
    assert_int_equal(host_said(a, "refused a link on fabric-path"), 1);
    assert_int_equal(pvrdma_fabric_links_up(b->fab), 0);
    host_free(b);
    /* c is "another user" and connects to a: it refuses a's socket. */
    c = host_new();
    pvrdma_fabric_set_own_uid(c->fab, geteuid() + 2);
    assert_true(pvrdma_fabric_join_dir(c->fab, dir, &err));
    run(a, c, 20);
    assert_int_equal(pvrdma_fabric_links_up(c->fab), 0);
    pvrdma_fabric_counters(c->fab, &cb);
    assert_int_equal(cb.refused_cred, 1);
    assert_int_equal(host_said(c, "not linking to"), 1);
    host_free(c);
    /* Allowed by uid: a and d link. */
    d = host_new();
    assert_true(pvrdma_fabric_allow(a->fab, me, NULL, &err));
    assert_true(pvrdma_fabric_join_dir(d->fab, dir, &err));
    RUN_UNTIL(a, d, LINKED(a, d));
    assert_int_equal(pvrdma_fabric_links_up(d->fab), 1);
    host_free(d);
    /* Allowed by group (the list may hold names): a and d link. */
    d = host_new();
    g_free(err);
    err = NULL;
    assert_false(pvrdma_fabric_allow(a->fab, NULL, grp, &err));
    assert_non_null(strstr(err, "'nosuchgroup-x' is not a group of this "
                           "host"));
    g_free(err);
    assert_true(pvrdma_fabric_allow(a->fab, NULL, grp + 14, &err));
    assert_true(pvrdma_fabric_join_dir(d->fab, dir, &err));
    RUN_UNTIL(a, d, pvrdma_fabric_links_up(d->fab) == 1);
    assert_int_equal(pvrdma_fabric_links_up(d->fab), 1);
    host_free(d);
    host_free(a);
    /* Other users allowed: the socket is open to them, SO_PEERCRED rules. */
    a = host_new();
    assert_true(pvrdma_fabric_allow(a->fab, "0:root", NULL, &err));
    assert_true(pvrdma_fabric_join_dir(a->fab, dir, &err));
    assert_int_equal(sock_mode(a, dir), 0666);
    assert_false(pvrdma_fabric_allow(a->fab, "no-such-user-x", NULL, &err));
    assert_non_null(strstr(err, "'no-such-user-x' is not a user of this "
                           "host"));
    g_free(err);
    host_free(a);
    g_free(me);
    g_free(grp);
    rmdir(dir);
    g_free(dir);
}

/* Take free descriptors into @fds[@n..] until none is left; the new @n. */
static unsigned fds_fill(int *fds, unsigned n, unsigned max)
{
    int fd;

    while (n < max && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) {
        fds[n++] = fd;
    }
    assert_true(n < max);
    assert_int_equal(errno, EMFILE);
    return n;
}

/*
 * Hold every free descriptor under a soft RLIMIT_NOFILE a little above the
 * highest one open now, so the next one fails with EMFILE; returns how many
 * were taken (in @fds, at least FDS_SPARE whatever the holes below the
 * highest one), released by fds_release().
 */
#define FDS_SPARE 32
static struct rlimit fds_saved;         /* for fds_teardown() */

static unsigned fds_exhaust(int *fds, unsigned max, struct rlimit *saved)
{
    struct rlimit rl;
    int fd, top = 0;
    unsigned n;

    assert_int_equal(getrlimit(RLIMIT_NOFILE, saved), 0);
    fds_saved = *saved;
    for (fd = 0; fd < 4096; fd++) {
        if (fcntl(fd, F_GETFD) >= 0) {
            top = fd;
        }
    }
    rl = *saved;
    rl.rlim_cur = top + 1 + FDS_SPARE;
    assert_true(rl.rlim_cur <= saved->rlim_max);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    n = fds_fill(fds, 0, max);
    assert_true(n >= FDS_SPARE);
    return n;
}

static void fds_release(int *fds, unsigned n, const struct rlimit *saved)
{
    while (n) {
        close(fds[--n]);
    }
    assert_int_equal(setrlimit(RLIMIT_NOFILE, saved), 0);
}

/* A failed test leaves the limit low: put it back for the next tests. */
static int fds_teardown(void **state)
{
    (void)state;
    if (fds_saved.rlim_max) {
        setrlimit(RLIMIT_NOFILE, &fds_saved);
    }
    return 0;
}

/*
 * Out of file descriptors (RLIMIT_NOFILE): a fabric cannot be joined (the
 * reason and the remedy said); a link's ring cannot be made, reported
 * once however often it is retried; an accept fails, is reported, and the
 * listener is left alone for a second (no busy loop on a socket that
 * stays readable); once descriptors are free again the link comes up by
 * itself, and the next shortage is reported again.
 */
static void test_dir_out_of_fds(void **state)
{
    char *dir = g_dir_make_tmp("pvrdma-fab-XXXXXX", NULL);
    Host *a = host_new(), *b = host_new();
    struct rlimit saved;
    char *err = NULL;
    int fds[4096], sv[2][2];
    unsigned n, i, reports, watches;

    (void)state;
    assert_true(pvrdma_fabric_join_dir(a->fab, dir, &err));
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[0]), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[1]), 0);
    reports = a->reports;
    n = fds_exhaust(fds, G_N_ELEMENTS(fds), &saved);
    /* b cannot even listen: refused with the reason and the remedy. */
    assert_false(pvrdma_fabric_join_dir(b->fab, dir, &err));
    assert_non_null(strstr(err, "Too many open files"));
    assert_non_null(strstr(err, "ulimit -n"));
    g_free(err);
    /* A link whose ring cannot be made: said once, not per attempt. */
    pvrdma_fabric_add_link(a->fab, sv[0][0], true, "x1");
    assert_int_equal(a->reports, reports + 1);
    assert_non_null(strstr(a->last_report, "x1 down: cannot make its "
                           "shared-memory ring: Too many open files; "
                           "QEMU's open files limit"));
    n = fds_fill(fds, n, G_N_ELEMENTS(fds));    /* x1's socket is free */
    pvrdma_fabric_add_link(a->fab, sv[1][0], true, "x2");
    assert_int_equal(a->reports, reports + 1);
    assert_int_equal(pvrdma_fabric_links_up(a->fab), 0);
    close(sv[0][1]);
    close(sv[1][1]);
    run(a, NULL, 2);
    /* Room for b to join and connect; then none for a to accept. */
    for (i = 0; i < 6; i++) {
        close(fds[--n]);
    }
    assert_true(pvrdma_fabric_join_dir(b->fab, dir, &err));
    n = fds_fill(fds, n, G_N_ELEMENTS(fds));
    watches = a->watches->len;
    a->fab->res_err = 0;        /* as if a link had come up meanwhile */
    for (i = 0; i < 20; i++) {
        run(a, b, 1);
    }
    assert_int_equal(pvrdma_fabric_links_up(a->fab), 0);
    assert_int_equal(a->reports, reports + 2);
    assert_non_null(strstr(a->last_report, "cannot accept a link on "
                           "fabric-path: Too many open files"));
    assert_int_equal(a->watches->len, watches - 1);
    fds_release(fds, n, &saved);
    for (i = 0; i < 40 && pvrdma_fabric_links_up(a->fab) == 0; i++) {
        a->now += 100000000LL;
        b->now += 100000000LL;
        run(a, b, 2);
    }
    assert_int_equal(pvrdma_fabric_links_up(a->fab), 1);
    assert_int_equal(pvrdma_fabric_links_up(b->fab), 1);
    assert_int_equal(a->fab->res_err, 0);
    host_free(a);
    host_free(b);
    rmdir(dir);
    g_free(dir);
}

/* Links of @h up, and how many of them are shm links (@shm). */
static unsigned links_of(Host *h, unsigned *shm)
{
    PvrdmaLinkStats st[8];
    unsigned n = pvrdma_fabric_link_stats(h->fab, st, 8), i, up = 0;

    *shm = 0;
    for (i = 0; i < n && i < 8; i++) {
        up += st[i].up;
        *shm += st[i].up && st[i].shm;
    }
    return up;
}

/* Steps of all @n hosts, their clocks moved by 10 ms each, until each
 * has @want links up (at most 5 s of real time). */
static bool mesh_wait(Host **h, unsigned n, unsigned want)
{
    gint64 end = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
    unsigned i, done, shm;

    do {
        for (i = 0; i < n; i++) {
            h[i]->now += 10000000LL;
        }
        hosts_step(h, n, 1);
        for (i = done = 0; i < n; i++) {
            done += links_of(h[i], &shm) == want;
        }
    } while (done < n && g_get_monotonic_time() < end);
    return done == n;
}

/*
 * Two hosts' directories joined over TCP: a and b share one directory, c
 * and d another, all four listen, and only c names a peer (a).  PEERS
 * make the rest: every process links to every other, through its
 * directory where it shares one (shared memory) and over TCP across.
 * Then b and d, whom no one named to the other, run RDMA verified byte
 * for byte; d quits and a new d' joins by its directory alone (c names
 * it to a and b).  Hostile PEERS are refused by the link.
 */
static void test_mesh(void **state)
{
    char *dir[2] = { g_dir_make_tmp("pvrdma-mesh-XXXXXX", NULL),
                     g_dir_make_tmp("pvrdma-mesh-XXXXXX", NULL) };
    Host *h[4];
    char addr[5][32], *err = NULL;
    int hold[5];
    Net *n = g_new0(Net, 1);
    struct pvrdma_sq_wqe_hdr w;
    struct pvrdma_sge sg;
    unsigned i, shm;

    (void)state;
    for (i = 0; i < 4; i++) {
        h[i] = host_new();
        hold[i] = tcp_port_hold(addr[i], sizeof(addr[i]));
        assert_true(pvrdma_fabric_join_dir(h[i]->fab, dir[i / 2], &err));
        assert_true(pvrdma_fabric_listen(h[i]->fab, addr[i], &err));
    }
    n->ha = h[1];
    n->hb = h[3];
    n->fa = host_guest(h[1], 1);
    n->fb = host_guest(h[3], 2);
    assert_true(pvrdma_fabric_add_peer(h[2]->fab, addr[0], &err));
    assert_true(mesh_wait(h, 4, 3));
    for (i = 0; i < 4; i++) {
        assert_int_equal(links_of(h[i], &shm), 3);
        assert_int_equal(shm, 1);       /* its directory's other process */
    }
    for (i = 0; i < 20; i++) {
        hosts_step(h, 4, 1);            /* GIDS */
    }
    net_qps(n);
    fv_mr_fill(n->ma, VA_A, 200000, 3);
    sg = sge(n->ma, VA_A, 200000);
    w = wqe(1, PVRDMA_WR_RDMA_WRITE, 1);
    w.wr.rdma.remote_addr = VA_B + 4096;
    w.wr.rdma.rkey = n->mb->rkey;
    fv_post_send(n->a, &w, &sg, 1);
    fv_ring_sq(n->a);
    expect(wait_cqe(n, n->cqa), 1, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS,
           200000);
    assert_true(fv_mr_check(n->mb, VA_B + 4096, 200000, 3));

    /* d quits; d' comes with its directory and a listener only. */
    fg_free(n->fb);
    host_free(h[3]);
    h[3] = host_new();
    hold[4] = tcp_port_hold(addr[4], sizeof(addr[4]));
    assert_true(pvrdma_fabric_join_dir(h[3]->fab, dir[1], &err));
    assert_true(pvrdma_fabric_listen(h[3]->fab, addr[4], &err));
    assert_true(mesh_wait(h, 4, 3));
    for (i = 0; i < 4; i++) {
        assert_int_equal(links_of(h[i], &shm), 3);
        assert_int_equal(shm, 1);
    }
    n->hb = h[3];
    n->fb = host_guest(h[3], 2);
    g_free(n->cqb);
    g_free(n->b);
    g_free(n->mb);
    g_free(n->cqa);
    g_free(n->a);
    g_free(n->ma);
    for (i = 0; i < 20; i++) {
        hosts_step(h, 4, 1);
    }
    net_qps(n);
    fv_mr_fill(n->mb, VA_B, 100000, 9);
    sg = sge(n->ma, VA_A, 100000);
    w = wqe(2, PVRDMA_WR_RDMA_READ, 1);
    w.wr.rdma.remote_addr = VA_B;
    w.wr.rdma.rkey = n->mb->rkey;
    fv_post_send(n->a, &w, &sg, 1);
    fv_ring_sq(n->a);
    expect(wait_cqe(n, n->cqa), 2, PVRDMA_WC_RDMA_READ, PVRDMA_WC_SUCCESS,
           100000);
    assert_true(fv_mr_check(n->ma, VA_A, 100000, 9));
    net_free(n);                        /* and h[1], h[3] */
    host_free(h[0]);
    host_free(h[2]);
    for (i = 0; i < 5; i++) {
        close(hold[i]);
    }
    for (i = 0; i < 2; i++) {
        g_autoptr(GDir) d = g_dir_open(dir[i], 0, NULL);
        const char *f;

        while (d && (f = g_dir_read_name(d))) {
            g_autofree char *p = g_build_filename(dir[i], f, NULL);

            unlink(p);
        }
        rmdir(dir[i]);
        g_free(dir[i]);
    }
}

static void test_join_dir(void **state)
{
    char *dir = g_dir_make_tmp("pvrdma-fab-XXXXXX", NULL);
    Host *a = host_new(), *b = host_new(), *c;
    char *err = NULL;
    unsigned i;

    (void)state;
    assert_true(pvrdma_fabric_join_dir(a->fab, dir, &err));
    assert_true(pvrdma_fabric_join_dir(b->fab, dir, &err));
    for (i = 0; i < 20; i++) {
        run(a, b, 1);
    }
    assert_int_equal(pvrdma_fabric_links_up(a->fab), 1);
    assert_int_equal(pvrdma_fabric_links_up(b->fab), 1);
    /* b dies; a restarted b finds a again. */
    host_free(b);
    for (i = 0; i < 5; i++) {
        run(a, NULL, 1);
    }
    assert_int_equal(pvrdma_fabric_links_up(a->fab), 0);
    c = host_new();
    assert_true(pvrdma_fabric_join_dir(c->fab, dir, &err));
    for (i = 0; i < 20; i++) {
        run(a, c, 1);
    }
    assert_int_equal(pvrdma_fabric_links_up(a->fab), 1);
    assert_int_equal(pvrdma_fabric_links_up(c->fab), 1);
    host_free(a);
    host_free(c);
    /* Not a directory: a message that says so. */
    {
        Host *d = host_new();

        assert_false(pvrdma_fabric_join_dir(d->fab, "/nonexistent/x",
                                            &err));
        assert_non_null(strstr(err, "not a writable directory"));
        g_free(err);
        host_free(d);
    }
    rmdir(dir);
    g_free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_shm),
        cmocka_unit_test_teardown(test_dir_out_of_fds, fds_teardown),
        cmocka_unit_test(test_ops_inline),
        cmocka_unit_test(test_both_ways_busy),
        cmocka_unit_test(test_remote_errors),
        cmocka_unit_test(test_uc_link),
        cmocka_unit_test(test_rnr_then_recv),
        cmocka_unit_test(test_window_shm),
        cmocka_unit_test(test_kick_once),
        cmocka_unit_test(test_stream_linger),
        cmocka_unit_test(test_stream_linger_window),
        cmocka_unit_test(test_sq_doorbell_hint),
        cmocka_unit_test(test_sq_doorbell_hint_cq_poll),
        cmocka_unit_test(test_cq_poll_promise_more),
        cmocka_unit_test(test_window_inline),
        cmocka_unit_test(test_window_rd_atomic),
        cmocka_unit_test(test_many_out_on_a_link),
        cmocka_unit_test(test_read_stream_shm),
        cmocka_unit_test(test_read_stream_inline),
        cmocka_unit_test(test_read_responses_resume),
        cmocka_unit_test(test_counters_shm),
        cmocka_unit_test(test_ring_shrink),
        cmocka_unit_test(test_counters_inline),
        cmocka_unit_test(test_window_rnr),
        cmocka_unit_test(test_window_error),
        cmocka_unit_test(test_window_error_polled),
        cmocka_unit_test(test_window_teardown),
        cmocka_unit_test(test_window_destroy),
        cmocka_unit_test(test_dropped_waits_timeout),
        cmocka_unit_test(test_dropped_then_ready),
        cmocka_unit_test(test_dropped_local_cancel),
        cmocka_unit_test(test_dropped_move_out),
        cmocka_unit_test(test_address_change),
        cmocka_unit_test(test_doorbell_polls_link),
        cmocka_unit_test(test_ud_link_shm),
        cmocka_unit_test(test_ud_link_inline),
        cmocka_unit_test(test_mcast_link_shm),
        cmocka_unit_test(test_mcast_link_inline),
        cmocka_unit_test(test_cq_poll_takes_in),
        cmocka_unit_test(test_cq_poll_promise_ends),
        cmocka_unit_test(test_peer_dies),
        cmocka_unit_test(test_move_claim),
        cmocka_unit_test(test_move_back),
        cmocka_unit_test(test_move_peer_stopped),
        cmocka_unit_test(test_move_hold_expires),
        cmocka_unit_test(test_restore_parted_peer_sends),
        cmocka_unit_test(test_restore_parted_peer_answers),
        cmocka_unit_test(test_restore_unparted),
        cmocka_unit_test(test_peer_silent),
        cmocka_unit_test(test_teardown_midstream),
        cmocka_unit_test(test_hostile_frames),
        cmocka_unit_test(test_req_to_nobody),
        cmocka_unit_test(test_req_bytes),
        cmocka_unit_test(test_random_frames),
        cmocka_unit_test(test_peer_never_reads),
        cmocka_unit_test(test_shm_hello_without_ring),
        cmocka_unit_test(test_shm_hostile_counters),
        cmocka_unit_test(test_shm_peer_writes_our_ring),
        cmocka_unit_test(test_join_dir),
        cmocka_unit_test(test_mesh),
        cmocka_unit_test(test_peers_told_bounded),
        cmocka_unit_test(test_listener_flood_quiet),
        cmocka_unit_test(test_listener_half_open_bounded),
        cmocka_unit_test(test_dir_foreign_uid),
        cmocka_unit_test(test_gid_hijack),
        cmocka_unit_test(test_peers_both_ways),
        cmocka_unit_test(test_tls_psk),
        cmocka_unit_test(test_tls_wrong_key),
        cmocka_unit_test(test_tls_plain_peer),
        cmocka_unit_test(test_tls_silent_peer),
        cmocka_unit_test(test_dir_link_recovers),
        cmocka_unit_test(test_peer_reconnects),
        cmocka_unit_test(test_peer_silent_host),
        cmocka_unit_test(test_read_mr_gone),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
