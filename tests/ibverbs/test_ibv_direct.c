/*
 * The host verbs backend (hw/pvrdma/pvrdma_ibverbs.c) driven directly,
 * without QEMU or a guest kernel: two fake guests (tests/unit/fake_*),
 * each a device core on its own backend instance over the same host RDMA
 * device, their RC QPs connected through it.  Runs where a host RDMA
 * device exists: in our test guest with Soft-RoCE (tests/guest/
 * test-ibverbs-direct.sh), since the build machines have none.
 *
 *   test_ibv_direct IBDEV GID_INDEX IPV4_A IPV4_B
 *
 * GID_INDEX: the host port's GID both devices use (gid-index=), and the
 * destination of both QPs (a loopback through the device).  IPV4_A/_B:
 * two more addresses of the device's netdev, the guests' own in the RDMA
 * CM test (test_cm).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>

#include <cmocka.h>
#include <glib.h>
#include <infiniband/verbs.h>

#include "fake_guest.h"
#include "fake_verbs.h"
#include "pvrdma_core_int.h"
#include "pvrdma_ibverbs.h"

#define ALL_ACCESS  (PVRDMA_ACCESS_LOCAL_WRITE | PVRDMA_ACCESS_REMOTE_WRITE | \
                     PVRDMA_ACCESS_REMOTE_READ | PVRDMA_ACCESS_REMOTE_ATOMIC)
#define SIG         PVRDMA_WR_FLAG_SIGNALED
#define VA_A        0x7f0000000800ull   /* not page aligned on purpose */
#define VA_B        0x7e0000000100ull
#define MR_LEN      (5 * 4096ull)
#define VA_W        0x7d0000000300ull   /* B's MR that windows are bound to */
/* How long a completion may take before the test fails (a hang). */
#define WAIT_US     (20 * G_USEC_PER_SEC)

static const char *ibdev;
static int gid_index;
static uint8_t host_gid[16];

typedef struct Dev {
    FakeGuest *fg;
    PvrdmaIbv *ibv;
    uint32_t pd;
    FvCq *cq;
} Dev;

typedef struct Pair {
    Dev a, b;
    FvQp *qa, *qb;
    FvMr *ma, *mb;
} Pair;

static void dev_init(Dev *d)
{
    PvrdmaIbvConfig cfg = {
        .ibdev = ibdev, .ibport = 1, .gid_index = gid_index,
    };
    char *msg = NULL;

    d->fg = fg_new(NULL);
    d->ibv = pvrdma_ibv_open(&cfg, &msg);
    if (!d->ibv) {
        fail_msg("%s", msg);
    }
    if (pvrdma_ibv_attach(d->ibv, d->fg->core, &msg) < 0) {
        fail_msg("%s", msg);
    }
    fg_setup(d->fg);
    assert_int_equal(fg_bind_gid(d->fg, 0), 0);
    assert_int_equal(fg_create_pd(d->fg, 0, &d->pd), 0);
    d->cq = fv_cq_new(d->fg, 0, 64);
}

static Pair *pair_new_type(uint8_t type)
{
    static const FvConnOpts o = {
        .access = ALL_ACCESS, .min_rnr_timer = 1, .rnr_retry = 7,
        .retry_cnt = 7,
    };
    Pair *p = g_new0(Pair, 1);

    dev_init(&p->a);
    dev_init(&p->b);
    p->qa = fv_qp_new(p->a.fg, type, p->a.pd, p->a.cq, p->a.cq, NULL, 16,
                      4, false);
    p->qb = fv_qp_new(p->b.fg, type, p->b.pd, p->b.cq, p->b.cq, NULL, 16,
                      4, false);
    /* The guest's QP number is the host QP's. */
    assert_int_not_equal(p->qa->qpn, p->qa->handle);
    p->ma = fv_mr_new(p->a.fg, p->a.pd, VA_A, MR_LEN, ALL_ACCESS);
    p->mb = fv_mr_new(p->b.fg, p->b.pd, VA_B, MR_LEN, ALL_ACCESS);
    assert_int_equal(fv_qp_rts_gid(p->qa, p->qb->qpn, host_gid, &o), 0);
    assert_int_equal(fv_qp_rts_gid(p->qb, p->qa->qpn, host_gid, &o), 0);
    return p;
}

static Pair *pair_new(void)
{
    return pair_new_type(PVRDMA_QPT_RC);
}

static void pair_free(Pair *p)
{
    Dev *d[2] = { &p->a, &p->b };
    int i;

    for (i = 0; i < 2; i++) {
        fg_free(d[i]->fg);          /* closes the backend too */
        g_free(d[i]->cq);
    }
    g_free(p->qa);
    g_free(p->qb);
    g_free(p->ma);
    g_free(p->mb);
    g_free(p);
}

/* The next CQE of @cq, running both backends until it comes. */
static void wait_cqe(Pair *p, FvCq *cq, struct pvrdma_cqe *cqe)
{
    gint64 end = g_get_monotonic_time() + WAIT_US;

    while (!fv_cq_poll(cq, cqe)) {
        pvrdma_ibv_process(p->a.ibv);
        pvrdma_ibv_process(p->b.ibv);
        if (g_get_monotonic_time() > end) {
            fail_msg("no completion within %d s", WAIT_US / 1000000);
        }
        g_usleep(100);
    }
}

/* The next CQE of @cq must be @wr_id's, with @status. */
static void expect_cqe(Pair *p, FvCq *cq, uint64_t wr_id, uint32_t status)
{
    struct pvrdma_cqe c;

    wait_cqe(p, cq, &c);
    assert_int_equal(c.wr_id, wr_id);
    assert_int_equal(c.status, status);
}

/* Requests of @q the core has out at the backend now. */
static uint32_t qp_outstanding(Dev *d, FvQp *q)
{
    PvrdmaQp *qp = pvrdma_table_lookup(&d->fg->core->qp_tbl, q->handle);

    assert_non_null(qp);
    return qp->wq.nout;
}

/* A context of the host device under test (NULL if it cannot be opened). */
static struct ibv_context *open_ibdev(void)
{
    struct ibv_device **list = ibv_get_device_list(NULL);
    struct ibv_context *ctx = NULL;
    int i;

    for (i = 0; list && list[i] && !ctx; i++) {
        if (!strcmp(ibv_get_device_name(list[i]), ibdev)) {
            ctx = ibv_open_device(list[i]);
        }
    }
    if (list) {
        ibv_free_device_list(list);
    }
    return ctx;
}

/* The guest's CREATE_MR of @n pages at @va (page directory built first). */
static int create_mr(Dev *d, uint64_t va, const uint64_t *pages, uint32_t n,
                     union pvrdma_cmd_resp *r, double *ms)
{
    struct pvrdma_cmd_create_mr c = { .hdr.cmd = PVRDMA_CMD_CREATE_MR };
    gint64 t0;
    int ret;

    c.start = va;
    c.length = (uint64_t)n * 4096;
    c.pdir_dma = fg_build_pdir(d->fg, pages, n);
    c.pd_handle = d->pd;
    c.access_flags = ALL_ACCESS;
    c.nchunks = n;
    t0 = g_get_monotonic_time();
    ret = fg_cmd(d->fg, &c, sizeof(c), r);
    if (ms) {
        *ms = (g_get_monotonic_time() - t0) / 1000.0;
    }
    return ret;
}

/* Copy @len bytes of @mr at @va out (its pages are not contiguous). */
static void mr_read(FvMr *mr, uint64_t va, void *buf, uint64_t len)
{
    uint8_t *out = buf;

    while (len) {
        uint64_t n = MIN(len, 4096 - (va & 4095));

        memcpy(out, fv_mr_ptr(mr, va), n);
        out += n;
        va += n;
        len -= n;
    }
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

/* SEND of 3 SGEs spanning MR pages into 2 receive SGEs, data checked. */
static void test_send(void **state)
{
    Pair *p = pair_new();
    struct pvrdma_sge s[3] = {
        sge(p->ma, VA_A + 100, 3000), sge(p->ma, VA_A + 4000, 5000),
        sge(p->ma, VA_A + 12000, 192),
    };
    struct pvrdma_sge r[2] = {
        sge(p->mb, VA_B, 4096), sge(p->mb, VA_B + 8192, 8192),
    };
    struct pvrdma_sq_wqe_hdr h = wqe(7, PVRDMA_WR_SEND, 3);
    struct pvrdma_cqe c;
    uint8_t *src = g_malloc(8192), *dst = g_malloc(8192);

    (void)state;
    fv_mr_fill(p->ma, VA_A, MR_LEN, 0x31);
    fv_mr_zero(p->mb);
    fv_post_recv(p->qb, 55, r, 2);
    fv_ring_rq(p->qb);
    fv_post_send(p->qa, &h, s, 3);
    fv_ring_sq(p->qa);

    wait_cqe(p, p->a.cq, &c);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.opcode, PVRDMA_WC_SEND);
    assert_int_equal(c.wr_id, 7);
    wait_cqe(p, p->b.cq, &c);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.opcode, PVRDMA_WC_RECV);
    assert_int_equal(c.wr_id, 55);
    assert_int_equal(c.byte_len, 8192);
    assert_int_equal(c.qp, p->qb->handle);
    /* The 8192 bytes gathered, in order, scattered over 4096 + 4096. */
    mr_read(p->ma, VA_A + 100, src, 3000);
    mr_read(p->ma, VA_A + 4000, src + 3000, 5000);
    mr_read(p->ma, VA_A + 12000, src + 8000, 192);
    mr_read(p->mb, VA_B, dst, 4096);
    mr_read(p->mb, VA_B + 8192, dst + 4096, 4096);
    assert_memory_equal(src, dst, 8192);
    g_free(src);
    g_free(dst);
    pair_free(p);
}

/* RDMA WRITE with immediate, then RDMA READ back, data checked. */
static void test_write_imm_read(void **state)
{
    Pair *p = pair_new();
    struct pvrdma_sge s = sge(p->ma, VA_A, 10000);
    struct pvrdma_sge r = sge(p->ma, VA_A + 10000, 10000);
    struct pvrdma_sq_wqe_hdr h = wqe(1, PVRDMA_WR_RDMA_WRITE_WITH_IMM, 1);
    struct pvrdma_cqe c;

    (void)state;
    fv_mr_zero(p->ma);
    fv_mr_fill(p->ma, VA_A, 10000, 0x52);
    fv_mr_zero(p->mb);
    fv_post_recv(p->qb, 9, NULL, 0);
    fv_ring_rq(p->qb);
    h.ex.imm_data = GUINT32_TO_BE(0xdeadbeef);
    h.wr.rdma.remote_addr = VA_B + 300;
    h.wr.rdma.rkey = p->mb->rkey;
    fv_post_send(p->qa, &h, &s, 1);
    fv_ring_sq(p->qa);
    wait_cqe(p, p->a.cq, &c);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.opcode, PVRDMA_WC_RDMA_WRITE);
    wait_cqe(p, p->b.cq, &c);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.opcode, PVRDMA_WC_RECV_RDMA_WITH_IMM);
    assert_int_equal(c.wr_id, 9);
    assert_true(c.wc_flags & PVRDMA_WC_WITH_IMM);
    assert_int_equal(c.imm_data, GUINT32_TO_BE(0xdeadbeef));
    assert_int_equal(c.byte_len, 10000);
    assert_true(fv_mr_check(p->mb, VA_B + 300, 10000, 0x52));

    /* READ it back into the other half of A's MR. */
    assert_false(fv_mr_check(p->ma, VA_A + 10000, 10000, 0x52));
    h = wqe(2, PVRDMA_WR_RDMA_READ, 1);
    h.wr.rdma.remote_addr = VA_B + 300;
    h.wr.rdma.rkey = p->mb->rkey;
    fv_post_send(p->qa, &h, &r, 1);
    fv_ring_sq(p->qa);
    wait_cqe(p, p->a.cq, &c);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.opcode, PVRDMA_WC_RDMA_READ);
    assert_int_equal(c.wr_id, 2);
    assert_true(fv_mr_check(p->ma, VA_A + 10000, 10000, 0x52));
    /*
     * The ports' counters (path MTU 1024): A sent the WRITE (10 packets)
     * and the READ request, and got the READ's 10 packets back; B saw
     * the WRITE with immediate, but not the READ the host device served.
     */
    {
        uint64_t ca[PVRDMA_CTR_NUM], cb[PVRDMA_CTR_NUM];

        fg_counters(p->a.fg, ca);
        fg_counters(p->b.fg, cb);
        assert_int_equal(ca[PVRDMA_CTR_SENT_PKTS], 10 + 1);
        assert_int_equal(ca[PVRDMA_CTR_SENT_BYTES], 10000);
        assert_int_equal(ca[PVRDMA_CTR_RDMA_WRITES], 1);
        assert_int_equal(ca[PVRDMA_CTR_RDMA_READS], 1);
        assert_int_equal(ca[PVRDMA_CTR_RCVD_PKTS], 10);
        assert_int_equal(ca[PVRDMA_CTR_RCVD_BYTES], 10000);
        assert_int_equal(cb[PVRDMA_CTR_RCVD_PKTS], 10);
        assert_int_equal(cb[PVRDMA_CTR_RCVD_BYTES], 10000);
        assert_int_equal(cb[PVRDMA_CTR_RDMA_WRITES_RCVD], 1);
        assert_int_equal(cb[PVRDMA_CTR_RDMA_READS_RCVD], 0);
        assert_int_equal(cb[PVRDMA_CTR_SENT_PKTS], 0);
        assert_int_equal(ca[PVRDMA_CTR_LINKS_UP] + cb[PVRDMA_CTR_LINKS_UP],
                         0);
    }
    pair_free(p);
}

/*
 * UC QPs (a project extension) as host UC QPs: SEND and WRITE with
 * immediate arrive, data checked; a WRITE with a bad rkey completes
 * SUCCESS at the requester (UC has no answer) and the responder goes on.
 */
static void test_uc(void **state)
{
    Pair *p = pair_new_type(PVRDMA_QPT_UC);
    struct pvrdma_sge s = sge(p->ma, VA_A + 10, 3000);
    struct pvrdma_sge r = sge(p->mb, VA_B, 4096);
    struct pvrdma_sq_wqe_hdr h = wqe(1, PVRDMA_WR_SEND, 1);
    struct pvrdma_cqe c;

    (void)state;
    fv_mr_fill(p->ma, VA_A + 10, 3000, 0x63);
    fv_mr_zero(p->mb);
    fv_post_recv(p->qb, 11, &r, 1);
    fv_post_recv(p->qb, 12, NULL, 0);
    fv_ring_rq(p->qb);
    fv_post_send(p->qa, &h, &s, 1);
    fv_ring_sq(p->qa);
    wait_cqe(p, p->a.cq, &c);
    assert_int_equal(c.wr_id, 1);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    wait_cqe(p, p->b.cq, &c);
    assert_int_equal(c.wr_id, 11);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.opcode, PVRDMA_WC_RECV);
    assert_int_equal(c.byte_len, 3000);
    assert_true(fv_mr_check(p->mb, VA_B, 3000, 0x63));

    /* A WRITE behind a bad rkey is lost, silently. */
    h = wqe(2, PVRDMA_WR_RDMA_WRITE, 1);
    h.wr.rdma.remote_addr = VA_B + 8192;
    h.wr.rdma.rkey = p->mb->rkey ^ 0x1000;
    fv_post_send(p->qa, &h, &s, 1);
    fv_ring_sq(p->qa);
    expect_cqe(p, p->a.cq, 2, PVRDMA_WC_SUCCESS);

    h = wqe(3, PVRDMA_WR_RDMA_WRITE_WITH_IMM, 1);
    h.ex.imm_data = GUINT32_TO_BE(0x7e57);
    h.wr.rdma.remote_addr = VA_B + 12288;
    h.wr.rdma.rkey = p->mb->rkey;
    fv_post_send(p->qa, &h, &s, 1);
    fv_ring_sq(p->qa);
    expect_cqe(p, p->a.cq, 3, PVRDMA_WC_SUCCESS);
    wait_cqe(p, p->b.cq, &c);
    assert_int_equal(c.wr_id, 12);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.opcode, PVRDMA_WC_RECV_RDMA_WITH_IMM);
    assert_int_equal(c.imm_data, GUINT32_TO_BE(0x7e57));
    assert_true(fv_mr_check(p->mb, VA_B + 12288, 3000, 0x63));
    /* Nothing of the lost WRITE landed. */
    {
        int i;

        for (i = 0; i < 3000; i++) {
            assert_int_equal(*fv_mr_ptr(p->mb, VA_B + 8192 + i), 0);
        }
    }
    pair_free(p);
}

/* Fetch-and-add and compare-and-swap: remote value and original. */
static void test_atomics(void **state)
{
    Pair *p = pair_new();
    struct pvrdma_sge s = sge(p->ma, VA_A + 64, 8);
    struct pvrdma_sq_wqe_hdr h = wqe(3, PVRDMA_WR_ATOMIC_FETCH_AND_ADD, 1);
    struct pvrdma_cqe c;
    uint64_t v = 1000, got;

    (void)state;
    memcpy(fv_mr_ptr(p->mb, VA_B + 0xf00), &v, 8);
    h.wr.atomic.remote_addr = VA_B + 0xf00;
    h.wr.atomic.rkey = p->mb->rkey;
    h.wr.atomic.compare_add = 234;
    fv_post_send(p->qa, &h, &s, 1);
    fv_ring_sq(p->qa);
    wait_cqe(p, p->a.cq, &c);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.opcode, PVRDMA_WC_FETCH_ADD);
    memcpy(&got, fv_mr_ptr(p->ma, VA_A + 64), 8);
    assert_int_equal(got, 1000);
    memcpy(&got, fv_mr_ptr(p->mb, VA_B + 0xf00), 8);
    assert_int_equal(got, 1234);

    h = wqe(4, PVRDMA_WR_ATOMIC_CMP_AND_SWP, 1);
    h.wr.atomic.remote_addr = VA_B + 0xf00;
    h.wr.atomic.rkey = p->mb->rkey;
    h.wr.atomic.compare_add = 1234;
    h.wr.atomic.swap = 77;
    fv_post_send(p->qa, &h, &s, 1);
    fv_ring_sq(p->qa);
    wait_cqe(p, p->a.cq, &c);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.opcode, PVRDMA_WC_COMP_SWAP);
    memcpy(&got, fv_mr_ptr(p->ma, VA_A + 64), 8);
    assert_int_equal(got, 1234);
    memcpy(&got, fv_mr_ptr(p->mb, VA_B + 0xf00), 8);
    assert_int_equal(got, 77);
    pair_free(p);
}

/*
 * A WRITE with a wrong rkey: REM_ACCESS_ERR on the requester, whose QP
 * is in ERR; a WQE posted after it is flushed.  Nothing lands at B.
 */
static void test_remote_access_error(void **state)
{
    Pair *p = pair_new();
    struct pvrdma_sge s = sge(p->ma, VA_A, 512);
    struct pvrdma_sq_wqe_hdr h = wqe(5, PVRDMA_WR_RDMA_WRITE, 1);
    struct pvrdma_cqe c;

    (void)state;
    fv_mr_fill(p->ma, VA_A, 512, 0x77);
    fv_mr_zero(p->mb);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = p->mb->rkey ^ 0x100;
    fv_post_send(p->qa, &h, &s, 1);
    h.wr_id = 6;
    fv_post_send(p->qa, &h, &s, 1);
    fv_ring_sq(p->qa);
    wait_cqe(p, p->a.cq, &c);
    assert_int_equal(c.wr_id, 5);
    assert_int_equal(c.status, PVRDMA_WC_REM_ACCESS_ERR);
    wait_cqe(p, p->a.cq, &c);
    assert_int_equal(c.wr_id, 6);
    assert_int_equal(c.status, PVRDMA_WC_WR_FLUSH_ERR);
    assert_int_equal(fv_qp_state(p->qa), PVRDMA_QPS_ERR);
    assert_false(fv_mr_check(p->mb, VA_B, 512, 0x77));
    pair_free(p);
}

/* Many SENDs in a row, each its own receive: order and data kept. */
static void test_send_stream(void **state)
{
    Pair *p = pair_new();
    struct pvrdma_cqe c;
    int i;

    (void)state;
    fv_mr_fill(p->ma, VA_A, MR_LEN, 0x13);
    fv_mr_zero(p->mb);
    for (i = 0; i < 12; i++) {
        struct pvrdma_sge r = sge(p->mb, VA_B + i * 1024, 1024);

        fv_post_recv(p->qb, 100 + i, &r, 1);
    }
    fv_ring_rq(p->qb);
    for (i = 0; i < 12; i++) {
        struct pvrdma_sge s = sge(p->ma, VA_A + i * 1024, 1000 + i);
        struct pvrdma_sq_wqe_hdr h = wqe(200 + i, PVRDMA_WR_SEND, 1);

        fv_post_send(p->qa, &h, &s, 1);
    }
    fv_ring_sq(p->qa);
    /* One doorbell puts all twelve on the host's send queue at once. */
    assert_int_equal(qp_outstanding(&p->a, p->qa), 12);
    for (i = 0; i < 12; i++) {
        uint8_t sent[1024], got[1024];

        wait_cqe(p, p->b.cq, &c);
        assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
        assert_int_equal(c.wr_id, 100 + i);
        assert_int_equal(c.byte_len, 1000 + i);
        mr_read(p->ma, VA_A + i * 1024, sent, 1000 + i);
        mr_read(p->mb, VA_B + i * 1024, got, 1000 + i);
        assert_memory_equal(sent, got, 1000 + i);
    }
    for (i = 0; i < 12; i++) {
        wait_cqe(p, p->a.cq, &c);
        assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
        assert_int_equal(c.wr_id, 200 + i);
    }
    pair_free(p);
}

/*
 * UD through the host device: a datagram with immediate to the other
 * device's UD QP, with its GRH (RoCE v2 over IPv4: the IPv4 header in the
 * last 20 bytes), source QPN and data checked; one with a wrong Q_Key and
 * one to a QP number nobody has are lost and still complete at the
 * sender; a send larger than the MTU fails locally.
 */
static void test_ud(void **state)
{
    Pair *p = pair_new();
    FvQp *ua = fv_qp_new(p->a.fg, PVRDMA_QPT_UD, p->a.pd, p->a.cq, p->a.cq,
                         NULL, 16, 2, false);
    FvQp *ub = fv_qp_new(p->b.fg, PVRDMA_QPT_UD, p->b.pd, p->b.cq, p->b.cq,
                         NULL, 16, 2, false);
    struct pvrdma_sge sa = sge(p->ma, VA_A, 1000);
    struct pvrdma_sge sb = sge(p->mb, VA_B, 40 + 1000);
    struct pvrdma_sq_wqe_hdr h = wqe(1, PVRDMA_WR_SEND_WITH_IMM, 1);
    struct pvrdma_cqe c;
    uint8_t sent[1000], got[1000];
    gint64 end;
    int i;

    (void)state;
    assert_int_equal(fg_qp_to_rts(p->a.fg, ua->handle, PVRDMA_QPT_UD), 0);
    assert_int_equal(fg_qp_to_rts(p->b.fg, ub->handle, PVRDMA_QPT_UD), 0);
    assert_int_not_equal(ua->qpn, ua->handle);
    fv_mr_fill(p->ma, VA_A, 1000, 0x44);
    fv_mr_zero(p->mb);
    fv_post_recv(ub, 7, &sb, 1);
    fv_post_recv(ub, 8, &sb, 1);
    fv_ring_rq(ub);
    h.ex.imm_data = GUINT32_TO_BE(0x5a5a);
    h.wr.ud.remote_qpn = ub->qpn;
    h.wr.ud.remote_qkey = 0x11111111;       /* fg_qp_to_rts's */
    h.wr.ud.av.hop_limit = 9;
    h.wr.ud.av.port_pd = 1;
    memcpy(h.wr.ud.av.dgid, host_gid, 16);
    fv_post_send(ua, &h, &sa, 1);
    fv_ring_sq(ua);
    wait_cqe(p, p->b.cq, &c);
    assert_int_equal(c.wr_id, 7);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.opcode, PVRDMA_WC_RECV);
    assert_int_equal(c.byte_len, 40 + 1000);
    assert_int_equal(c.qp, ub->handle);
    assert_int_equal(c.src_qp, ua->qpn);
    assert_int_equal(c.imm_data, GUINT32_TO_BE(0x5a5a));
    assert_int_equal(c.wc_flags, PVRDMA_WC_GRH | PVRDMA_WC_WITH_IMM |
                                 PVRDMA_WC_WITH_NETWORK_HDR_TYPE);
    assert_int_equal(c.network_hdr_type, PVRDMA_NETWORK_IPV4);
    assert_int_equal(*fv_mr_ptr(p->mb, VA_B + 20), 0x45);   /* IPv4 */
    mr_read(p->ma, VA_A, sent, 1000);
    mr_read(p->mb, VA_B + 40, got, 1000);
    assert_memory_equal(sent, got, 1000);
    expect_cqe(p, p->a.cq, 1, PVRDMA_WC_SUCCESS);

    /* A wrong Q_Key and an unknown QP: lost, the sender succeeds. */
    h.wr_id = 2;
    h.wr.ud.remote_qkey = 0x22222222;
    fv_post_send(ua, &h, &sa, 1);
    h.wr_id = 3;
    h.wr.ud.remote_qkey = 0x11111111;
    h.wr.ud.remote_qpn = ub->qpn ^ 0x800;
    fv_post_send(ua, &h, &sa, 1);
    fv_ring_sq(ua);
    expect_cqe(p, p->a.cq, 2, PVRDMA_WC_SUCCESS);
    expect_cqe(p, p->a.cq, 3, PVRDMA_WC_SUCCESS);
    end = g_get_monotonic_time() + 200000;
    while (g_get_monotonic_time() < end) {
        pvrdma_ibv_process(p->b.ibv);
        assert_false(fv_cq_poll(p->b.cq, &c));
        g_usleep(1000);
    }

    /*
     * Datagrams to changing address vectors in one doorbell: each new one
     * waits until the sends on the host's previous address handle are
     * done (the core submits it again), all arrive, in order.
     */
    /* The first lands in receive 8 (at VA_B), left from above. */
    for (i = 1; i < 6; i++) {
        struct pvrdma_sge r = sge(p->mb, VA_B + 2048 + i * 128, 40 + 64);

        fv_post_recv(ub, 20 + i, &r, 1);
    }
    fv_ring_rq(ub);
    for (i = 0; i < 6; i++) {
        struct pvrdma_sge s = sge(p->ma, VA_A + i * 64, 64);

        h.wr_id = 10 + i;
        h.wr.ud.remote_qpn = ub->qpn;
        h.wr.ud.av.hop_limit = 9 + i / 2;   /* a new handle every second */
        fv_mr_fill(p->ma, VA_A + i * 64, 64, 0x60 + i);
        fv_post_send(ua, &h, &s, 1);
    }
    fv_ring_sq(ua);
    assert_int_equal(qp_outstanding(&p->a, ua), 2);
    for (i = 0; i < 6; i++) {
        wait_cqe(p, p->b.cq, &c);
        assert_int_equal(c.wr_id, i ? 20 + i : 8);
        assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
        assert_int_equal(c.byte_len, 40 + 64);
        mr_read(p->ma, VA_A + i * 64, sent, 64);
        mr_read(p->mb, (i ? VA_B + 2048 + i * 128 : VA_B) + 40, got, 64);
        assert_memory_equal(sent, got, 64);
    }
    for (i = 0; i < 6; i++) {
        expect_cqe(p, p->a.cq, 10 + i, PVRDMA_WC_SUCCESS);
    }

    /* Larger than the port MTU (1024 here at most 4096): a local error. */
    sa = sge(p->ma, VA_A, 8192);
    h.wr.ud.av.hop_limit = 9;
    h.wr_id = 4;
    h.wr.ud.remote_qpn = ub->qpn;
    fv_post_send(ua, &h, &sa, 1);
    fv_ring_sq(ua);
    wait_cqe(p, p->a.cq, &c);
    assert_int_equal(c.wr_id, 4);
    assert_int_not_equal(c.status, PVRDMA_WC_SUCCESS);
    g_free(ua);
    g_free(ub);
    pair_free(p);
}


/*
 * Multicast on the host device: B's UD QP joins ::ffff:239.5.6.7 on the
 * host (ATTACH_MCAST), A sends to the group (QPN 0xFFFFFF) and B's QP
 * gets it, data checked and the IPv4 destination the group's; after
 * DETACH_MCAST the next one is lost. The device's multicast limits are
 * the host's at most.
 */
static void test_mcast(void **state)
{
    static const uint8_t mgid[16] = { [10] = 0xff, [11] = 0xff,
                                      239, 5, 6, 7 };
    Pair *p = pair_new();
    FvQp *ua = fv_qp_new(p->a.fg, PVRDMA_QPT_UD, p->a.pd, p->a.cq, p->a.cq,
                         NULL, 16, 2, false);
    FvQp *ub = fv_qp_new(p->b.fg, PVRDMA_QPT_UD, p->b.pd, p->b.cq, p->b.cq,
                         NULL, 16, 2, false);
    struct pvrdma_cmd_mcast m = { .hdr.cmd = PVRDMA_CMD_ATTACH_MCAST };
    struct pvrdma_sge sa = sge(p->ma, VA_A, 500);
    struct pvrdma_sge sb = sge(p->mb, VA_B, 40 + 500);
    struct pvrdma_sq_wqe_hdr h = wqe(1, PVRDMA_WR_SEND, 1);
    struct pvrdma_cqe c;
    uint8_t sent[500], got[500];
    gint64 end;

    (void)state;
    assert_true(fg_caps(p->b.fg)->ex_comp_mask & PVRDMA_EX_CAP_MCAST);
    assert_true(fg_caps(p->b.fg)->max_mcast_grp > 0);
    assert_int_equal(fg_qp_to_rts(p->a.fg, ua->handle, PVRDMA_QPT_UD), 0);
    assert_int_equal(fg_qp_to_rts(p->b.fg, ub->handle, PVRDMA_QPT_UD), 0);
    m.qp_handle = ub->handle;
    memcpy(m.mgid, mgid, 16);
    assert_int_equal(fg_cmd(p->b.fg, &m, sizeof(m), NULL), 0);
    fv_mr_fill(p->ma, VA_A, 500, 0x27);
    fv_mr_zero(p->mb);
    fv_post_recv(ub, 7, &sb, 1);
    fv_post_recv(ub, 8, &sb, 1);
    fv_ring_rq(ub);
    h.wr.ud.remote_qpn = PVRDMA_QPN_MULTICAST;
    h.wr.ud.remote_qkey = 0x11111111;
    h.wr.ud.av.hop_limit = 1;
    h.wr.ud.av.port_pd = 1;
    memcpy(h.wr.ud.av.dgid, mgid, 16);
    fv_post_send(ua, &h, &sa, 1);
    fv_ring_sq(ua);
    wait_cqe(p, p->b.cq, &c);
    assert_int_equal(c.wr_id, 7);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.byte_len, 40 + 500);
    assert_int_equal(c.src_qp, ua->qpn);
    assert_memory_equal(fv_mr_ptr(p->mb, VA_B + 36), mgid + 12, 4);
    mr_read(p->ma, VA_A, sent, 500);
    mr_read(p->mb, VA_B + 40, got, 500);
    assert_memory_equal(sent, got, 500);
    expect_cqe(p, p->a.cq, 1, PVRDMA_WC_SUCCESS);

    m.hdr.cmd = PVRDMA_CMD_DETACH_MCAST;
    assert_int_equal(fg_cmd(p->b.fg, &m, sizeof(m), NULL), 0);
    h.wr_id = 2;
    fv_post_send(ua, &h, &sa, 1);
    fv_ring_sq(ua);
    expect_cqe(p, p->a.cq, 2, PVRDMA_WC_SUCCESS);
    end = g_get_monotonic_time() + 200000;
    while (g_get_monotonic_time() < end) {
        pvrdma_ibv_process(p->b.ibv);
        assert_false(fv_cq_poll(p->b.cq, &c));
        g_usleep(1000);
    }
    g_free(ua);
    g_free(ub);
    pair_free(p);
}

/*
 * An SRQ on the host: two QPs of B share it; SENDs on both land in its
 * WQEs (each CQE names its QP, data checked) and when fewer than the
 * armed limit are left the host's SRQ_LIMIT_REACHED reaches the guest
 * as its async event, once.
 */
static void test_srq(void **state)
{
    static const FvConnOpts o = {
        .access = ALL_ACCESS, .min_rnr_timer = 1, .rnr_retry = 7,
        .retry_cnt = 7,
    };
    Pair *p = pair_new();
    FvSrq *srq = fv_srq_new(p->b.fg, p->b.pd, 8, 2, 0);
    FvQp *qa[2], *qb[2];
    struct pvrdma_cqe c;
    bool seen[6] = { false };
    uint32_t type, info;
    gint64 end;
    int i;

    (void)state;
    for (i = 0; i < 2; i++) {
        qa[i] = fv_qp_new(p->a.fg, PVRDMA_QPT_RC, p->a.pd, p->a.cq, p->a.cq,
                          NULL, 16, 2, false);
        qb[i] = fv_qp_new(p->b.fg, PVRDMA_QPT_RC, p->b.pd, p->b.cq, p->b.cq,
                          srq, 16, 2, false);
        assert_int_equal(fv_qp_rts_gid(qa[i], qb[i]->qpn, host_gid, &o), 0);
        assert_int_equal(fv_qp_rts_gid(qb[i], qa[i]->qpn, host_gid, &o), 0);
    }
    fv_mr_fill(p->ma, VA_A, MR_LEN, 0x27);
    fv_mr_zero(p->mb);
    for (i = 0; i < 6; i++) {
        struct pvrdma_sge r = sge(p->mb, VA_B + i * 1024, 1024);

        fv_srq_post(srq, 300 + i, &r, 1);
    }
    fv_srq_ring(srq);
    assert_int_equal(fv_srq_modify_limit(srq, 3), 0);
    for (i = 0; i < 4; i++) {
        /* Message i: 500 + i bytes from offset i * 1024 of A's MR. */
        struct pvrdma_sge s = sge(p->ma, VA_A + i * 1024, 500 + i);
        struct pvrdma_sq_wqe_hdr h = wqe(400 + i, PVRDMA_WR_SEND, 1);

        fv_post_send(qa[i % 2], &h, &s, 1);
        fv_ring_sq(qa[i % 2]);
        wait_cqe(p, p->a.cq, &c);
        assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
        assert_int_equal(c.wr_id, 400 + i);
    }
    for (i = 0; i < 4; i++) {
        uint8_t sent[1024], got[1024];
        unsigned slot;
        int m;

        wait_cqe(p, p->b.cq, &c);
        assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
        assert_in_range(c.wr_id, 300, 305);
        slot = c.wr_id - 300;
        assert_false(seen[slot]);
        seen[slot] = true;
        m = c.byte_len - 500;
        assert_in_range(m, 0, 3);
        assert_int_equal(c.qp, qb[m % 2]->handle);
        mr_read(p->ma, VA_A + m * 1024, sent, 500 + m);
        mr_read(p->mb, VA_B + slot * 1024, got, 500 + m);
        assert_memory_equal(sent, got, 500 + m);
    }
    /* 2 WQEs left, limit 3: the event comes (from the host), once. */
    end = g_get_monotonic_time() + WAIT_US;
    while (!fv_async_next(p->b.fg, &type, &info)) {
        pvrdma_ibv_process(p->b.ibv);
        assert_true(g_get_monotonic_time() < end);
        g_usleep(1000);
    }
    assert_int_equal(type, PVRDMA_EQE_TYPE_SRQ_LIMIT_REACHED);
    assert_int_equal(info, srq->handle);
    pvrdma_ibv_process(p->b.ibv);
    assert_false(fv_async_next(p->b.fg, &type, &info));
    for (i = 0; i < 2; i++) {
        g_free(qa[i]);
        g_free(qb[i]);
    }
    g_free(srq);
    pair_free(p);
}

/* Set (@on) or clear our effective CAP_IPC_LOCK (it stays permitted). */
static void cap_ipc_lock(bool on)
{
    struct __user_cap_header_struct h = {
        .version = _LINUX_CAPABILITY_VERSION_3,
    };
    struct __user_cap_data_struct d[2];

    assert_int_equal(syscall(SYS_capget, &h, d), 0);
    if (on) {
        d[0].effective |= 1u << CAP_IPC_LOCK;
    } else {
        d[0].effective &= ~(1u << CAP_IPC_LOCK);
    }
    assert_int_equal(syscall(SYS_capset, &h, d), 0);
}

/*
 * The host refuses: with QEMU's locked-memory limit at 4 MiB (and no
 * CAP_IPC_LOCK) a guest MR of 64 KiB registers, one of 8 MiB fails with
 * ENOMEM (the guest's CREATE_MR status), nothing of it stays charged or
 * mapped, and the device goes on: the small MR carries an RDMA WRITE.
 * The credentials change before the host device is opened and after it
 * is closed: uverbs refuses commands from a process whose credentials
 * changed since it opened the device (EACCES).
 */
static void test_host_refuses(void **state)
{
    struct rlimit old, lim = { 4 << 20, 4 << 20 };
    Pair *p;
    struct pvrdma_sge s;
    struct pvrdma_sq_wqe_hdr h = wqe(21, PVRDMA_WR_RDMA_WRITE, 1);
    uint64_t pinned, *pages = g_new(uint64_t, 2048), i;
    unsigned maps;
    struct pvrdma_cqe cqe;
    FvMr *small;
    bool landed = false;
    int ret;

    (void)state;
    memset(&cqe, 0xff, sizeof(cqe));
    assert_int_equal(getrlimit(RLIMIT_MEMLOCK, &old), 0);
    cap_ipc_lock(false);
    assert_int_equal(setrlimit(RLIMIT_MEMLOCK, &lim), 0);
    p = pair_new();

    small = fv_mr_new(p->a.fg, p->a.pd, 0x7d0000000000ull, 16 * 4096,
                      ALL_ACCESS);
    pinned = p->a.fg->core->pinned_pages;
    maps = p->a.fg->maps - p->a.fg->unmaps;
    for (i = 0; i < 2048; i++) {
        pages[i] = fg_alloc_pages(p->a.fg, 1);
    }
    ret = create_mr(&p->a, 0x7d1000000000ull, pages, 2048, NULL, NULL);
    if (ret == -ENOMEM) {
        fv_mr_fill(p->mb, VA_B, 4000, 0x19);
        s = sge(p->mb, VA_B, 4000);
        h.wr.rdma.remote_addr = 0x7d0000000000ull + 100;
        h.wr.rdma.rkey = small->rkey;
        fv_post_send(p->qb, &h, &s, 1);
        fv_ring_sq(p->qb);
        wait_cqe(p, p->b.cq, &cqe);
        landed = fv_mr_check(small, 0x7d0000000000ull + 100, 4000, 0x19);
    }
    assert_int_equal(p->a.fg->core->pinned_pages, pinned);
    assert_int_equal(p->a.fg->maps - p->a.fg->unmaps, maps);
    pair_free(p);
    assert_int_equal(setrlimit(RLIMIT_MEMLOCK, &old), 0);
    cap_ipc_lock(true);

    assert_int_equal(ret, -ENOMEM);
    assert_int_equal(cqe.status, PVRDMA_WC_SUCCESS);
    assert_true(landed);
    g_free(small);
    g_free(pages);
}

/*
 * The guest is offered no more than the host device has: limits above
 * the device's are lowered to them when the backend attaches, and the
 * caps the guest reads say so; XRC is not offered (CREATE_XRCD refused).
 */
static void test_clamped_to_host(void **state)
{
    PvrdmaIbvConfig icfg = {
        .ibdev = ibdev, .ibport = 1, .gid_index = gid_index,
    };
    struct ibv_context *ctx = open_ibdev();
    struct ibv_device_attr a;
    PvrdmaCoreConfig cfg;
    const struct pvrdma_device_caps *caps;
    FakeGuest *fg;
    PvrdmaIbv *ibv;
    char *msg = NULL;

    (void)state;
    assert_non_null(ctx);
    assert_int_equal(ibv_query_device(ctx, &a), 0);
    ibv_close_device(ctx);

    pvrdma_core_default_config(&cfg);
    cfg.max_qp_wr = 65536;
    cfg.max_srq_wr = 65536;
    fg = fg_new(&cfg);
    ibv = pvrdma_ibv_open(&icfg, &msg);
    assert_non_null(ibv);
    assert_int_equal(pvrdma_ibv_attach(ibv, fg->core, &msg), 0);
    fg_setup(fg);
    caps = fg_caps(fg);
    assert_int_equal(caps->max_qp_wr, MIN(65536, a.max_qp_wr));
    assert_int_equal(caps->max_srq_wr, MIN(65536, a.max_srq_wr));
    assert_true(caps->max_sge <= (uint32_t)a.max_sge);
    assert_true(caps->max_mr <= (uint32_t)a.max_mr);
    /* XRC is not passed on to a host device: not offered, refused. */
    assert_false(caps->ex_comp_mask & PVRDMA_EX_CAP_XRC);
    {
        struct pvrdma_cmd_create_xrcd x = {
            .hdr.cmd = PVRDMA_CMD_CREATE_XRCD,
        };

        assert_int_equal(fg_cmd(fg, &x, sizeof(x), NULL), -EINVAL);
        assert_int_equal(fg->last_gerr, PVRDMA_GERR_UNKNOWN_COMMAND);
    }
    fg_free(fg);
}

/*
 * A guest DMA MR (kernel users: SGEs carry guest bus addresses): A sends
 * 3000 bytes that straddle a 2 MiB boundary of its RAM (two host
 * windows), receives into a DMA-MR buffer and READs into one; every byte
 * checked in A's guest memory; windows count against the pinned-pages
 * quota.
 */
static void test_dma_mr(void **state)
{
    Pair *p = pair_new();
    uint32_t dma, lkey;
    uint64_t cross, buf, next, pinned;
    struct pvrdma_sge s, r;
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_cqe c;
    uint8_t got[4096];
    unsigned i;

    (void)state;
    assert_int_equal(fg_create_dma_mr(p->a.fg, p->a.pd, &dma, &lkey), 0);
    /* Guest pages up to a 2 MiB boundary, then two across it. */
    next = (p->a.fg->next_free + (2ull << 20)) & ~((2ull << 20) - 1);
    if (next - p->a.fg->next_free > 4096) {
        fg_alloc_pages(p->a.fg, (next - p->a.fg->next_free) / 4096 - 1);
    }
    cross = fg_alloc_pages(p->a.fg, 2) + 4096 - 1000;  /* 1000 before it */
    buf = fg_alloc_pages(p->a.fg, 1);
    for (i = 0; i < 3000; i++) {
        *(uint8_t *)fg_ptr(p->a.fg, cross + i) = i * 7 + 3;
    }

    /* SEND from the straddling buffer. */
    fv_mr_zero(p->mb);
    r = sge(p->mb, VA_B, 4096);
    fv_post_recv(p->qb, 31, &r, 1);
    fv_ring_rq(p->qb);
    s = (struct pvrdma_sge){ .addr = cross, .length = 3000, .lkey = lkey };
    h = wqe(32, PVRDMA_WR_SEND, 1);
    fv_post_send(p->qa, &h, &s, 1);
    fv_ring_sq(p->qa);
    wait_cqe(p, p->a.cq, &c);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    wait_cqe(p, p->b.cq, &c);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.byte_len, 3000);
    mr_read(p->mb, VA_B, got, 3000);
    for (i = 0; i < 3000; i++) {
        assert_int_equal(got[i], (uint8_t)(i * 7 + 3));
    }

    /* B's SEND lands in A's DMA-MR receive buffer. */
    fv_mr_fill(p->mb, VA_B, 2000, 0x3c);
    r = (struct pvrdma_sge){ .addr = buf, .length = 4096, .lkey = lkey };
    fv_post_recv(p->qa, 33, &r, 1);
    fv_ring_rq(p->qa);
    s = sge(p->mb, VA_B, 2000);
    h = wqe(34, PVRDMA_WR_SEND, 1);
    fv_post_send(p->qb, &h, &s, 1);
    fv_ring_sq(p->qb);
    wait_cqe(p, p->a.cq, &c);
    assert_int_equal(c.wr_id, 33);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.byte_len, 2000);
    mr_read(p->mb, VA_B, got, 2000);
    assert_memory_equal(fg_ptr(p->a.fg, buf), got, 2000);
    wait_cqe(p, p->b.cq, &c);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);

    /* A READs B's MR into the straddling buffer. */
    fv_mr_fill(p->mb, VA_B, 3000, 0x5d);
    h = wqe(35, PVRDMA_WR_RDMA_READ, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = p->mb->rkey;
    s = (struct pvrdma_sge){ .addr = cross, .length = 3000, .lkey = lkey };
    fv_post_send(p->qa, &h, &s, 1);
    fv_ring_sq(p->qa);
    wait_cqe(p, p->a.cq, &c);
    assert_int_equal(c.wr_id, 35);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    mr_read(p->mb, VA_B, got, 3000);
    for (i = 0; i < 3000; i++) {
        assert_int_equal(*(uint8_t *)fg_ptr(p->a.fg, cross + i), got[i]);
    }

    /*
     * Windows are pinned memory: with the device's pinned-pages quota
     * used up, a buffer in a window not registered yet fails the WR with
     * LOC_PROT_ERR and nothing more is charged.
     */
    fg_alloc_pages(p->a.fg, 512);
    buf = fg_alloc_pages(p->a.fg, 1);
    pinned = p->a.fg->core->pinned_pages;
    p->a.fg->core->cfg.max_pinned_pages = pinned;
    s = (struct pvrdma_sge){ .addr = buf, .length = 64, .lkey = lkey };
    h = wqe(36, PVRDMA_WR_SEND, 1);
    fv_post_send(p->qa, &h, &s, 1);
    fv_ring_sq(p->qa);
    expect_cqe(p, p->a.cq, 36, PVRDMA_WC_LOC_PROT_ERR);
    assert_int_equal(p->a.fg->last_gerr,
                     PVRDMA_GERR_PINNED_PAGES_QUOTA_EXCEEDED);
    assert_int_equal(p->a.fg->core->pinned_pages, pinned);
    pair_free(p);
}

/* ---- registration of 1 GiB ---------------------------------------------- */

#define GIB         (1ull << 30)
#define GIB_PAGES   (GIB / 4096)
#define VA_BIG      0x7c0000000000ull

static double ms_since(gint64 t0)
{
    return (g_get_monotonic_time() - t0) / 1000.0;
}

/* A native ibv_reg_mr of 1 GiB of touched shared memory (like guest RAM). */
static double reg_native(void)
{
    struct ibv_context *ctx = open_ibdev();
    struct ibv_pd *pd;
    struct ibv_mr *mr;
    uint8_t *buf;
    gint64 t0;
    double ms;

    assert_non_null(ctx);
    pd = ibv_alloc_pd(ctx);
    assert_non_null(pd);
    buf = mmap(NULL, GIB, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
               -1, 0);
    assert_true(buf != MAP_FAILED);
    memset(buf, 1, GIB);
    t0 = g_get_monotonic_time();
    mr = ibv_reg_mr(pd, buf, GIB, IBV_ACCESS_LOCAL_WRITE |
                    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    ms = ms_since(t0);
    assert_non_null(mr);
    assert_int_equal(ibv_dereg_mr(mr), 0);
    munmap(buf, GIB);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
    return ms;
}

/* Set vm.max_map_count (we run as root in a test guest); the old value. */
static long max_map_count(long v)
{
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r+");
    long old = 0;

    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld", &old), 1);
    rewind(f);
    assert_true(fprintf(f, "%ld\n", v) > 0);
    assert_int_equal(fclose(f), 0);
    return old;
}

static int reg_guest_status(Dev *d, const uint64_t *pages)
{
    return create_mr(d, VA_BIG, pages, GIB_PAGES, NULL, NULL);
}

/* The guest's CREATE_MR of 1 GiB at VA_BIG over @pages; milliseconds. */
static double reg_guest(Dev *d, const uint64_t *pages, FvMr *mr)
{
    union pvrdma_cmd_resp r;
    double ms;

    assert_int_equal(create_mr(d, VA_BIG, pages, GIB_PAGES, &r, &ms), 0);
    mr->fg = d->fg;
    mr->handle = r.create_mr_resp.mr_handle;
    mr->lkey = r.create_mr_resp.lkey;
    mr->rkey = r.create_mr_resp.rkey;
    return ms;
}

static double dereg_guest(Dev *d, FvMr *mr)
{
    struct pvrdma_cmd_destroy_mr c = { .hdr.cmd = PVRDMA_CMD_DESTROY_MR };
    union pvrdma_cmd_resp r;
    gint64 t0 = g_get_monotonic_time();

    c.mr_handle = mr->handle;
    assert_int_equal(fg_cmd(d->fg, &c, sizeof(c), &r), 0);
    return ms_since(t0);
}

/*
 * B writes 6000 bytes into the big MR of A at @off, across a page
 * boundary, then reads 6000 other bytes of it: the bytes are those of
 * A's guest pages @pages (the host device works on them, zero-copy).
 */
static void big_mr_check(Pair *p, FvMr *big, const uint64_t *pages,
                         uint64_t off)
{
    struct pvrdma_sge s = sge(p->mb, VA_B, 6000);
    struct pvrdma_sq_wqe_hdr h = wqe(11, PVRDMA_WR_RDMA_WRITE, 1);
    struct pvrdma_cqe c;
    uint8_t want[6000], got[6000];
    uint64_t i;

    fv_mr_fill(p->mb, VA_B, 6000, 0x61);
    mr_read(p->mb, VA_B, want, 6000);
    h.wr.rdma.remote_addr = VA_BIG + off;
    h.wr.rdma.rkey = big->rkey;
    fv_post_send(p->qb, &h, &s, 1);
    fv_ring_sq(p->qb);
    wait_cqe(p, p->b.cq, &c);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    for (i = 0; i < 6000; i++) {
        uint64_t o = off + i;

        got[i] = *(uint8_t *)fg_ptr(p->a.fg, pages[o >> 12] + (o & 4095));
    }
    assert_memory_equal(want, got, 6000);

    /* And READ back what A's guest wrote to its pages at @off / 2. */
    for (i = 0; i < 6000; i++) {
        uint64_t o = off / 2 + i;

        *(uint8_t *)fg_ptr(p->a.fg, pages[o >> 12] + (o & 4095)) =
            want[i] ^ 0x5a;
    }
    h = wqe(12, PVRDMA_WR_RDMA_READ, 1);
    h.wr.rdma.remote_addr = VA_BIG + off / 2;
    h.wr.rdma.rkey = big->rkey;
    fv_post_send(p->qb, &h, &s, 1);
    fv_ring_sq(p->qb);
    wait_cqe(p, p->b.cq, &c);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    mr_read(p->mb, VA_B, got, 6000);
    for (i = 0; i < 6000; i++) {
        assert_int_equal(got[i], want[i] ^ 0x5a);
    }
}

/*
 * Registration of a 1 GiB guest MR through the backend (pin, alias,
 * ibv_reg_mr_iova2), timed next to a native ibv_reg_mr of 1 GiB: over
 * guest pages that are contiguous (as with huge pages), over 2 MiB
 * pieces no two of which are adjacent (transparent huge pages), and over
 * 4 KiB pages in an order where no two are adjacent (the worst case: one
 * mremap per page).  Each MR is used afterwards, data checked.
 */
static void test_reg_1gib(void **state)
{
    Pair *p = pair_new();
    uint64_t *pages = g_new(uint64_t, GIB_PAGES), base, i;
    double native, contig, huge, scat, dcontig, dhuge, dscat;
    FvMr big = { 0 };
    uint64_t pinned;
    unsigned maps_before;
    long old_max;

    (void)state;
    native = reg_native();
    base = fg_alloc_pages(p->a.fg, GIB_PAGES);
    memset(fg_ptr(p->a.fg, base), 0, GIB);     /* guest RAM in use */

    for (i = 0; i < GIB_PAGES; i++) {
        pages[i] = base + i * 4096;
    }
    contig = reg_guest(&p->a, pages, &big);
    big_mr_check(p, &big, pages, GIB - 9000);
    dcontig = dereg_guest(&p->a, &big);

    /*
     * 2 MiB pieces, no two adjacent (what a guest with transparent huge
     * pages hands out): 512 mappings.
     */
    for (i = 0; i < GIB_PAGES; i++) {
        pages[i] = base + (((i / 512) ^ 1) * 512 + i % 512) * 4096;
    }
    huge = reg_guest(&p->a, pages, &big);
    big_mr_check(p, &big, pages, 3 * (2ull << 20) - 3000);
    dhuge = dereg_guest(&p->a, &big);
    maps_before = p->a.fg->maps - p->a.fg->unmaps;

    /*
     * Scattered: 262144 mappings.  Refused with -ENOMEM (QEMU says which
     * sysctl to raise) under Linux's default vm.max_map_count, accepted
     * above it; nothing of the failed attempt stays pinned or mapped.
     */
    for (i = 0; i < GIB_PAGES; i++) {
        pages[i] = base + (i ^ 1) * 4096;      /* 1, 0, 3, 2, ... */
    }
    pinned = p->a.fg->core->pinned_pages;
    old_max = max_map_count(65530);
    assert_int_equal(reg_guest_status(&p->a, pages), -ENOMEM);
    assert_int_equal(p->a.fg->core->pinned_pages, pinned);
    assert_int_equal(p->a.fg->maps, p->a.fg->unmaps + maps_before);
    max_map_count(GIB_PAGES * 2);
    scat = reg_guest(&p->a, pages, &big);
    max_map_count(old_max);
    big_mr_check(p, &big, pages, GIB / 2 + 4000);
    dscat = dereg_guest(&p->a, &big);
    assert_int_equal(p->a.fg->core->pinned_pages, pinned);

    printf("REG-1GIB native %.1f ms; guest MR contiguous %.1f ms "
           "(%.2fx native, dereg %.1f ms); scattered 2 MiB pieces %.1f ms "
           "(%.2fx native, dereg %.1f ms); scattered 4 KiB pages %.1f ms "
           "(%.2fx native, dereg %.1f ms)\n", native, contig,
           contig / native, dcontig, huge, huge / native, dhuge, scat,
           scat / native, dscat);
    g_free(pages);
    pair_free(p);
}

/* ---- fast-reg MRs (memory windows of the host device) -------------------- */

/* Byte @off of @f's registration at page offset @first. */
static uint8_t *frmr_byte(Dev *d, FvFrmr *f, uint64_t first, uint64_t off)
{
    uint64_t rel = first + off;

    return fg_ptr(d->fg, f->pages[rel >> 12] + (rel & 0xfff));
}

/* A's WRITE or READ of @len bytes at @va of B's fast-reg MR via @rkey. */
static void frmr_rdma(Pair *p, uint64_t id, uint32_t op, uint64_t va,
                      uint32_t len, uint32_t rkey, uint32_t status)
{
    struct pvrdma_sge s = sge(p->ma, op == PVRDMA_WR_RDMA_READ ?
                                     VA_A + 3 * 4096 : VA_A, len);
    struct pvrdma_sq_wqe_hdr h = wqe(id, op, 1);

    h.wr.rdma.remote_addr = va;
    h.wr.rdma.rkey = rkey;
    fv_post_send(p->qa, &h, &s, 1);
    fv_ring_sq(p->qa);
    expect_cqe(p, p->a.cq, id, status);
}

/*
 * A's SEND_WITH_INV of @key (WR @send_id) into B's receive @recv_id: B's
 * completion says the key was invalidated.
 */
static void send_with_inv(Pair *p, uint64_t recv_id, uint64_t send_id,
                          uint32_t key)
{
    struct pvrdma_sge rs = sge(p->mb, VA_B, 64), ss = sge(p->ma, VA_A, 64);
    struct pvrdma_sq_wqe_hdr h = wqe(send_id, PVRDMA_WR_SEND_WITH_INV, 1);
    struct pvrdma_cqe c;

    fv_post_recv(p->qb, recv_id, &rs, 1);
    fv_ring_rq(p->qb);
    h.ex.invalidate_rkey = key;
    fv_post_send(p->qa, &h, &ss, 1);
    fv_ring_sq(p->qa);
    expect_cqe(p, p->a.cq, send_id, PVRDMA_WC_SUCCESS);
    wait_cqe(p, p->b.cq, &c);
    assert_int_equal(c.wr_id, recv_id);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    if (!(c.wc_flags & PVRDMA_WC_WITH_INVALIDATE)) {
        fail_msg("receive of a SEND_WITH_INV: wc_flags 0x%x, opcode %u, "
                 "byte_len %u", c.wc_flags, c.opcode, c.byte_len);
    }
    assert_int_equal(GUINT32_FROM_LE(c.imm_data), key);
}

/*
 * Kernel ULPs' memory registration: B's fast-reg MR registered over
 * scattered pages with a key byte of its choice (REG_MR), written and
 * read by A through that rkey (bytes checked in B's pages), invalidated
 * by B (LOCAL_INV: A's WRITE then fails), registered again, invalidated
 * by A's SEND_WITH_INV (B's CQE says which key; B can register it once
 * more and A write through it).
 */
static void test_frmr(void **state)
{
    Pair *p = pair_new();
    FvFrmr *f = fv_frmr_new(p->b.fg, p->b.pd, 4);
    uint64_t iova = 0x10000000a00ull;
    uint32_t len = 3 * 4096 - 0xa00 - 100, key, i;
    struct pvrdma_sq_wqe_hdr h;

    (void)state;
    /* The guest's keys are the host window's: peers use them as they are. */
    assert_int_not_equal(f->key >> 8, f->handle);
    key = (f->key & ~0xffu) | 0x42;
    fv_post_reg_mr(p->qb, f, 1, iova, 3, len, ALL_ACCESS, key);
    expect_cqe(p, p->b.cq, 1, PVRDMA_WC_SUCCESS);
    fv_mr_fill(p->ma, VA_A, 6000, 0x17);
    frmr_rdma(p, 2, PVRDMA_WR_RDMA_WRITE, iova + 0x100, 6000, key,
              PVRDMA_WC_SUCCESS);
    for (i = 0; i < 6000; i++) {
        assert_int_equal(*frmr_byte(&p->b, f, 0xa00 + 0x100, i),
                         *fv_mr_ptr(p->ma, VA_A + i));
    }
    for (i = 0; i < 5000; i++) {
        *frmr_byte(&p->b, f, 0xa00, i) = (uint8_t)(i * 7 + 3);
    }
    frmr_rdma(p, 3, PVRDMA_WR_RDMA_READ, iova, 5000, key, PVRDMA_WC_SUCCESS);
    for (i = 0; i < 5000; i++) {
        assert_int_equal(*fv_mr_ptr(p->ma, VA_A + 3 * 4096 + i),
                         (uint8_t)(i * 7 + 3));
    }
    /* LOCAL_INV by B: the key is dead for A. */
    h = wqe(4, PVRDMA_WR_LOCAL_INV, 0);
    h.ex.invalidate_rkey = key;
    fv_post_send(p->qb, &h, NULL, 0);
    fv_ring_sq(p->qb);
    expect_cqe(p, p->b.cq, 4, PVRDMA_WC_SUCCESS);
    frmr_rdma(p, 5, PVRDMA_WR_RDMA_WRITE, iova, 100, key,
              PVRDMA_WC_REM_ACCESS_ERR);
    pair_free(p);
    g_free(f);

    /* Registered again (another key byte), A's SEND_WITH_INV ends it. */
    p = pair_new();
    f = fv_frmr_new(p->b.fg, p->b.pd, 4);
    key = (f->key & ~0xffu) | 0x43;
    fv_post_reg_mr(p->qb, f, 1, iova, 1, 4096 - 0xa00, ALL_ACCESS, key);
    expect_cqe(p, p->b.cq, 1, PVRDMA_WC_SUCCESS);
    send_with_inv(p, 2, 3, key);
    /* Invalid now, so B may register it again; A writes through it. */
    key = (f->key & ~0xffu) | 0x44;
    fv_post_reg_mr(p->qb, f, 4, iova, 2, 4096, ALL_ACCESS, key);
    expect_cqe(p, p->b.cq, 4, PVRDMA_WC_SUCCESS);
    fv_mr_fill(p->ma, VA_A, 4096, 0x29);
    frmr_rdma(p, 6, PVRDMA_WR_RDMA_WRITE, iova, 4096, key,
              PVRDMA_WC_SUCCESS);
    for (i = 0; i < 4096; i++) {
        assert_int_equal(*frmr_byte(&p->b, f, 0xa00, i),
                         *fv_mr_ptr(p->ma, VA_A + i));
    }
    /* The old key byte does not reach it. */
    frmr_rdma(p, 7, PVRDMA_WR_RDMA_WRITE, iova, 100, key ^ 0x3,
              PVRDMA_WC_REM_ACCESS_ERR);
    pair_free(p);
    g_free(f);
}

/* ---- RDMA CM (pvrdma_ibv_cm.c) ------------------------------------------- */

/*
 * Two fake guests whose GIDs are two addresses of the host device's
 * netdev (argv[3], argv[4]), each with a GSI QP: the test plays the
 * guests' CM, writing and reading CM MADs, and the devices carry them out
 * with the host's RDMA CM.  B listens on CM_PORT.
 */
#define CM_PORT     7400
#define CM_MAD_VA   VA_A            /* the MAD a GSI QP sends */
#define CM_RECV_VA  (VA_A + 4096)   /* its receive buffers (GRH + MAD) */
#define CM_DATA_VA  (VA_A + 2 * 4096)
#define MAD_LEN     256
#define M           24              /* CM message body in a MAD */

static uint8_t cm_gid[2][16];

typedef struct CmDev {
    Dev d;
    FvQp *gsi, *rc;
    FvCq *gcq, *gscq;           /* QP1's receive and send CQs */
    FvMr *mr;
    uint64_t next_id;
} CmDev;

static void put16(uint8_t *m, unsigned off, uint16_t v)
{
    m[off] = v >> 8;
    m[off + 1] = v;
}

static void put24(uint8_t *m, unsigned off, uint32_t v)
{
    m[off] = v >> 16;
    m[off + 1] = v >> 8;
    m[off + 2] = v;
}

static void put32(uint8_t *m, unsigned off, uint32_t v)
{
    put16(m, off, v >> 16);
    put16(m, off + 2, v);
}

static uint32_t get32(const uint8_t *m, unsigned off)
{
    return (uint32_t)m[off] << 24 | m[off + 1] << 16 | m[off + 2] << 8 |
           m[off + 3];
}

static void cm_mad(uint8_t *m, uint16_t attr, uint32_t tid)
{
    memset(m, 0, MAD_LEN);
    m[0] = 1;
    m[1] = 0x07;                    /* CM class, version 2, SEND */
    m[2] = 2;
    m[3] = 3;
    put32(m, 12, tid);
    put16(m, 16, attr);
}

static void cm_post_recv(CmDev *c, unsigned slot)
{
    struct pvrdma_sge g = sge(c->mr, CM_RECV_VA + slot * 512, 40 + MAD_LEN);

    fv_post_recv(c->gsi, slot, &g, 1);
    fv_ring_rq(c->gsi);
}

static void cm_dev_init(CmDev *c, const uint8_t gid[16])
{
    PvrdmaIbvConfig cfg = {
        .ibdev = ibdev, .ibport = 1, .gid_index = -1, .cm_ports = "7400",
    };
    struct pvrdma_cmd_create_bind b = { .hdr.cmd = PVRDMA_CMD_CREATE_BIND };
    struct pvrdma_qp_attr a;
    char *msg = NULL;
    unsigned i;

    c->d.fg = fg_new(NULL);
    c->d.ibv = pvrdma_ibv_open(&cfg, &msg);
    if (!c->d.ibv || pvrdma_ibv_attach(c->d.ibv, c->d.fg->core, &msg) < 0) {
        fail_msg("%s", msg);
    }
    fg_setup(c->d.fg);
    /* The guest's GID is an address the host device owns: B listens. */
    b.mtu = 1024;
    b.vlan = 0xfff;
    memcpy(b.new_gid, gid, 16);
    b.gid_type = PVRDMA_GID_TYPE_FLAG_ROCE_V2;
    assert_int_equal(fg_cmd(c->d.fg, &b, sizeof(b), NULL), 0);
    assert_int_equal(fg_create_pd(c->d.fg, 0, &c->d.pd), 0);
    c->d.cq = fv_cq_new(c->d.fg, 0, 64);
    c->gcq = fv_cq_new(c->d.fg, 0, 64);
    c->gscq = fv_cq_new(c->d.fg, 0, 64);
    c->gsi = fv_qp_new(c->d.fg, PVRDMA_QPT_GSI, c->d.pd, c->gscq, c->gcq,
                       NULL, 16, 2, false);
    assert_int_equal(fg_qp_to_rts(c->d.fg, c->gsi->handle, PVRDMA_QPT_GSI),
                     0);
    c->rc = fv_qp_new(c->d.fg, PVRDMA_QPT_RC, c->d.pd, c->d.cq, c->d.cq,
                      NULL, 16, 2, false);
    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = ALL_ACCESS;
    assert_int_equal(fg_modify_qp(c->d.fg, c->rc->handle, PVRDMA_QP_STATE |
                                  PVRDMA_QP_PKEY_INDEX | PVRDMA_QP_PORT |
                                  PVRDMA_QP_ACCESS_FLAGS, &a), 0);
    c->mr = fv_mr_new(c->d.fg, c->d.pd, VA_A, MR_LEN, ALL_ACCESS);
    for (i = 0; i < 4; i++) {
        cm_post_recv(c, i);
    }
}

static void cm_dev_free(CmDev *c)
{
    fg_free(c->d.fg);
    g_free(c->d.cq);
    g_free(c->gcq);
    g_free(c->gscq);
    g_free(c->gsi);
    g_free(c->rc);
    g_free(c->mr);
}

/* Run both devices (host CM events, completions) for a while. */
static void cm_run(CmDev *c, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; i++) {
        pvrdma_ibv_process(c[i].d.ibv);
    }
}

/* @c's guest sends @m on QP1 to @dgid's QP1; the send completes. */
static void cm_send(CmDev *c, const uint8_t *m, size_t len,
                    const uint8_t dgid[16])
{
    struct pvrdma_sge g = sge(c->mr, CM_MAD_VA, len);
    struct pvrdma_sq_wqe_hdr h = wqe(++c->next_id, PVRDMA_WR_SEND, 1);
    struct pvrdma_cqe cqe;

    memcpy(fv_mr_ptr(c->mr, CM_MAD_VA), m, len);
    h.wr.ud.remote_qpn = 1;
    h.wr.ud.remote_qkey = 0x80010000;
    h.wr.ud.av.hop_limit = 64;
    h.wr.ud.av.port_pd = 1;
    memcpy(h.wr.ud.av.dgid, dgid, 16);
    fv_post_send(c->gsi, &h, &g, 1);
    fv_ring_sq(c->gsi);
    assert_true(fv_cq_poll(c->gscq, &cqe));
    assert_int_equal(cqe.wr_id, c->next_id);
    assert_int_equal(cqe.status, PVRDMA_WC_SUCCESS);
}

/*
 * The next MAD @c's guest receives on QP1 within @us (false if none),
 * with the GRH of a datagram from @sgid checked; its buffer is posted
 * again.
 */
static bool cm_recv(CmDev *all, CmDev *c, uint8_t *m, const uint8_t *sgid,
                    gint64 us)
{
    gint64 end = g_get_monotonic_time() + us;
    struct pvrdma_cqe cqe;
    uint64_t va;

    while (!fv_cq_poll(c->gcq, &cqe)) {
        cm_run(all, 2);
        if (g_get_monotonic_time() > end) {
            return false;
        }
        g_usleep(200);
    }
    assert_int_equal(cqe.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(cqe.opcode, PVRDMA_WC_RECV);
    assert_int_equal(cqe.qp, c->gsi->handle);
    assert_int_equal(cqe.src_qp, 1);
    assert_int_equal(cqe.byte_len, 40 + MAD_LEN);
    assert_int_equal(cqe.network_hdr_type, PVRDMA_NETWORK_IPV4);
    assert_true(cqe.wc_flags & PVRDMA_WC_GRH);
    va = CM_RECV_VA + cqe.wr_id * 512;
    /* The GRH: an IPv4 header from the peer's address to ours. */
    assert_int_equal(*fv_mr_ptr(c->mr, va + 20), 0x45);
    if (sgid) {
        assert_memory_equal(fv_mr_ptr(c->mr, va + 20 + 12), sgid + 12, 4);
    }
    mr_read(c->mr, va + 40, m, MAD_LEN);
    cm_post_recv(c, cqe.wr_id);
    return true;
}

static void cm_expect(CmDev *all, CmDev *c, uint8_t *m, uint16_t attr,
                      const uint8_t *sgid)
{
    if (!cm_recv(all, c, m, sgid, WAIT_US)) {
        fail_msg("no CM MAD 0x%x within %d s", attr, WAIT_US / 1000000);
    }
    if ((m[16] << 8 | m[17]) != attr) {
        fail_msg("CM MAD 0x%x where 0x%x was due", m[16] << 8 | m[17], attr);
    }
    assert_int_equal(m[1], 0x07);
    assert_int_equal(m[2], 2);
    assert_int_equal(m[3], 3);
}

/* A REQ of @c's guest to @dst's address, port @port. */
static void cm_req(uint8_t *m, CmDev *c, uint32_t comm_id, uint16_t ps,
                   uint16_t port, uint32_t qpn, const uint8_t *src,
                   const uint8_t *dst)
{
    uint8_t *pd = m + M + 140;

    cm_mad(m, 0x10, comm_id);
    put32(m, M + 0, comm_id);
    put32(m, M + 8, 0);
    put32(m, M + 12, (uint32_t)ps << 16 | port);
    put24(m, M + 32, qpn);
    m[M + 35] = 3;                  /* responder resources */
    m[M + 39] = 2;                  /* initiator depth */
    m[M + 43] = 20 << 3;            /* RC */
    put24(m, M + 44, 0x123456);     /* the guest's PSN: not used */
    m[M + 47] = 20 << 3 | 7;
    put16(m, M + 48, 0xffff);
    m[M + 50] = 3 << 4 | 7;
    m[M + 51] = 15 << 4;
    memcpy(m + M + 56, src, 16);
    memcpy(m + M + 72, dst, 16);
    m[M + 93] = 64;
    pd[1] = 4 << 4;                 /* RDMA CM header, IPv4 */
    put16(pd, 2, 5555);
    memcpy(pd + 16, src + 12, 4);
    memcpy(pd + 32, dst + 12, 4);
    memcpy(pd + 36, "hello-cm", 8);
    (void)c;
}

static void cm_qp_rtr_rts(CmDev *c, uint32_t dqpn, const uint8_t *dgid,
                          uint32_t rq_psn, uint32_t sq_psn)
{
    struct pvrdma_qp_attr a;

    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_RTR;
    a.path_mtu = PVRDMA_MTU_1024;
    a.dest_qp_num = dqpn;
    a.rq_psn = rq_psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.ah_flags = PVRDMA_AH_FLAG_GRH;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.hop_limit = 64;
    memcpy(a.ah_attr.grh.dgid, dgid, 16);
    assert_int_equal(fg_modify_qp(c->d.fg, c->rc->handle, PVRDMA_QP_STATE |
                                  PVRDMA_QP_AV | PVRDMA_QP_PATH_MTU |
                                  PVRDMA_QP_DEST_QPN | PVRDMA_QP_RQ_PSN |
                                  PVRDMA_QP_MAX_DEST_RD_ATOMIC |
                                  PVRDMA_QP_MIN_RNR_TIMER, &a), 0);
    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_RTS;
    a.sq_psn = sq_psn;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    assert_int_equal(fg_modify_qp(c->d.fg, c->rc->handle, PVRDMA_QP_STATE |
                                  PVRDMA_QP_SQ_PSN | PVRDMA_QP_TIMEOUT |
                                  PVRDMA_QP_RETRY_CNT | PVRDMA_QP_RNR_RETRY |
                                  PVRDMA_QP_MAX_QP_RD_ATOMIC, &a), 0);
}

/* @from's RC QP SENDs @len bytes to @to's; the bytes arrive intact. */
static void cm_rc_send(CmDev *all, CmDev *from, CmDev *to, uint32_t len,
                       uint8_t seed)
{
    struct pvrdma_sge gs = sge(from->mr, CM_DATA_VA, len);
    struct pvrdma_sge gr = sge(to->mr, CM_DATA_VA, len);
    struct pvrdma_sq_wqe_hdr h = wqe(0x5e, PVRDMA_WR_SEND, 1);
    gint64 end = g_get_monotonic_time() + WAIT_US;
    struct pvrdma_cqe c;

    fv_mr_fill(from->mr, CM_DATA_VA, len, seed);
    memset(fv_mr_ptr(to->mr, CM_DATA_VA), 0, len);
    fv_post_recv(to->rc, 0x7e, &gr, 1);
    fv_ring_rq(to->rc);
    h.send_flags = SIG;
    fv_post_send(from->rc, &h, &gs, 1);
    fv_ring_sq(from->rc);
    while (!fv_cq_poll(to->d.cq, &c)) {
        cm_run(all, 2);
        if (g_get_monotonic_time() > end) {
            fail_msg("the SEND did not arrive: PSNs wrong?");
        }
        g_usleep(200);
    }
    assert_int_equal(c.wr_id, 0x7e);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.byte_len, len);
    assert_true(fv_mr_check(to->mr, CM_DATA_VA, len, seed));
    while (!fv_cq_poll(from->d.cq, &c)) {
        cm_run(all, 2);
        assert_true(g_get_monotonic_time() < end);
        g_usleep(200);
    }
    assert_int_equal(c.wr_id, 0x5e);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
}

/* Nothing reaches either guest's QP1 for a while. */
static void cm_quiet(CmDev *c)
{
    uint8_t m[MAD_LEN];

    assert_false(cm_recv(c, &c[0], m, NULL, 300000));
    assert_false(cm_recv(c, &c[1], m, NULL, 1000));
}

/* A's WRITE or READ of @len bytes at (@rkey, @raddr) from/to VA_A + @off. */
static void mw_rdma(Pair *p, uint64_t id, uint32_t op, uint32_t rkey,
                    uint64_t raddr, uint64_t off, uint32_t len,
                    uint32_t status)
{
    struct pvrdma_sge s = sge(p->ma, VA_A + off, len);
    struct pvrdma_sq_wqe_hdr h = wqe(id, op, 1);

    h.wr.rdma.remote_addr = raddr;
    h.wr.rdma.rkey = rkey;
    fv_post_send(p->qa, &h, &s, 1);
    fv_ring_sq(p->qa);
    expect_cqe(p, p->a.cq, id, status);
}

/* B's window key @k with its next key byte. */
static uint32_t next_key(uint32_t k)
{
    return (k & ~0xffu) | ((k + 1) & 0xff);
}

/*
 * Memory windows on the host's: B binds a type 1 window (the host's next
 * key) and a zero-based type 2 window over its MR; A writes and reads
 * through them (bytes checked in B's pages); the MR stays while bound;
 * LOCAL_INV, a new bind and A's SEND_WITH_INV of the type 2 window; a
 * type 1 unbind; the invalidated key refused by the host.
 */
static void test_mw(void **state)
{
    Pair *p = pair_new();
    FvMr *w = fv_mr_new(p->b.fg, p->b.pd, VA_W, MR_LEN,
                        ALL_ACCESS | PVRDMA_ACCESS_MW_BIND);
    uint32_t h1, h2, k1, k2, i;
    struct pvrdma_sq_wqe_hdr h;

    (void)state;
    assert_true(fg_caps(p->b.fg)->ex_comp_mask & PVRDMA_EX_CAP_MW);
    assert_int_equal(fv_mw_new(p->b.fg, p->b.pd, PVRDMA_MR_FLAG_MW_TYPE1,
                               &h1, &k1), 0);
    assert_int_equal(fv_mw_new(p->b.fg, p->b.pd, PVRDMA_MR_FLAG_MW_TYPE2,
                               &h2, &k2), 0);
    /* The guest's keys are the host windows'. */
    assert_int_not_equal(k1 >> 8, h1);
    fv_mr_fill(p->ma, VA_A, 8192, 0x5a);
    k1 = next_key(k1);
    fv_post_bind_mw(p->qb, 1, k1, w->lkey, VA_W + 0x100, 8000,
                    PVRDMA_ACCESS_REMOTE_WRITE | PVRDMA_ACCESS_REMOTE_READ);
    expect_cqe(p, p->b.cq, 1, PVRDMA_WC_SUCCESS);
    mw_rdma(p, 2, PVRDMA_WR_RDMA_WRITE, k1, VA_W + 0x200, 0, 3000,
            PVRDMA_WC_SUCCESS);
    for (i = 0; i < 3000; i++) {
        assert_int_equal(*fv_mr_ptr(w, VA_W + 0x200 + i),
                         *fv_mr_ptr(p->ma, VA_A + i));
    }
    mw_rdma(p, 3, PVRDMA_WR_RDMA_READ, k1, VA_W + 0x1000, 4096, 500,
            PVRDMA_WC_SUCCESS);
    for (i = 0; i < 500; i++) {
        assert_int_equal(*fv_mr_ptr(p->ma, VA_A + 4096 + i),
                         *fv_mr_ptr(w, VA_W + 0x1000 + i));
    }
    /* Type 2, zero-based: remote address 0x10 is the window's byte 0x10. */
    k2 = next_key(k2);
    fv_post_bind_mw(p->qb, 4, k2, w->lkey, VA_W + 0x3000, 4096,
                    PVRDMA_ACCESS_REMOTE_WRITE | PVRDMA_ACCESS_ZERO_BASED);
    expect_cqe(p, p->b.cq, 4, PVRDMA_WC_SUCCESS);
    mw_rdma(p, 5, PVRDMA_WR_RDMA_WRITE, k2, 0x10, 100, 100,
            PVRDMA_WC_SUCCESS);
    for (i = 0; i < 100; i++) {
        assert_int_equal(*fv_mr_ptr(w, VA_W + 0x3010 + i),
                         *fv_mr_ptr(p->ma, VA_A + 100 + i));
    }
    assert_int_equal(fg_destroy_mr(p->b.fg, w->handle), -EBUSY);
    /* LOCAL_INV, bound again, then A's SEND_WITH_INV ends it. */
    h = wqe(6, PVRDMA_WR_LOCAL_INV, 0);
    h.ex.invalidate_rkey = k2;
    fv_post_send(p->qb, &h, NULL, 0);
    fv_ring_sq(p->qb);
    expect_cqe(p, p->b.cq, 6, PVRDMA_WC_SUCCESS);
    k2 = next_key(k2);
    fv_post_bind_mw(p->qb, 7, k2, w->lkey, VA_W, 64,
                    PVRDMA_ACCESS_REMOTE_READ);
    expect_cqe(p, p->b.cq, 7, PVRDMA_WC_SUCCESS);
    mw_rdma(p, 8, PVRDMA_WR_RDMA_READ, k2, VA_W + 8, 4096, 56,
            PVRDMA_WC_SUCCESS);
    for (i = 0; i < 56; i++) {
        assert_int_equal(*fv_mr_ptr(p->ma, VA_A + 4096 + i),
                         *fv_mr_ptr(w, VA_W + 8 + i));
    }
    send_with_inv(p, 9, 10, k2);
    /* Type 1 unbound: the MR can go. */
    k1 = next_key(k1);
    fv_post_bind_mw(p->qb, 11, k1, 0, 0, 0, 0);
    expect_cqe(p, p->b.cq, 11, PVRDMA_WC_SUCCESS);
    assert_int_equal(fg_destroy_mr(p->b.fg, w->handle), 0);
    /* The host invalidated window 2: A's READ through it is refused. */
    mw_rdma(p, 12, PVRDMA_WR_RDMA_READ, k2, VA_W, 4096, 8,
            PVRDMA_WC_REM_ACCESS_ERR);
    pair_free(p);
    g_free(w);
}

static void test_cm(void **state)
{
    CmDev c[2], *a = &c[0], *b = &c[1];
    uint8_t m[MAD_LEN], r[MAD_LEN];
    uint32_t a_id = 0x1111, b_id = 0x2222, a_peer, b_peer, psn;

    (void)state;
    memset(c, 0, sizeof(c));
    cm_dev_init(a, cm_gid[0]);
    cm_dev_init(b, cm_gid[1]);

    /* A connects to B's port: B's guest gets the REQ. */
    cm_req(m, a, a_id, 0x0106, CM_PORT, a->rc->qpn, cm_gid[0], cm_gid[1]);
    cm_send(a, m, MAD_LEN, cm_gid[1]);
    cm_expect(c, b, r, 0x10, cm_gid[0]);
    b_peer = get32(r, M + 0);
    assert_int_equal(get32(r, M + 12), 0x01060000u | CM_PORT);
    assert_int_equal(get32(r, M + 32) >> 8, a->rc->qpn);
    assert_int_equal(r[M + 43] & 6, 0);                     /* RC */
    assert_memory_equal(r + M + 56, cm_gid[0], 16);
    assert_memory_equal(r + M + 72, cm_gid[1], 16);
    assert_int_equal(r[M + 140 + 1], 4 << 4);
    assert_memory_equal(r + M + 140 + 16, cm_gid[0] + 12, 4);
    assert_memory_equal(r + M + 140 + 32, cm_gid[1] + 12, 4);
    assert_memory_equal(r + M + 140 + 36, "hello-cm", 8);
    /* RDMA read credits as A's guest stated them (the sender's view). */
    assert_int_equal(r[M + 35], 3);
    assert_int_equal(r[M + 39], 2);
    psn = get32(r, M + 44) >> 8;

    /* B's guest accepts: its QP goes RTR/RTS first (as librdmacm does). */
    cm_qp_rtr_rts(b, a->rc->qpn, cm_gid[0], 0x654321, psn);
    assert_int_equal(fv_qp_state(b->rc), PVRDMA_QPS_RTS);
    cm_mad(m, 0x13, 0x99);
    put32(m, M + 0, b_id);
    put32(m, M + 4, b_peer);
    put24(m, M + 12, b->rc->qpn);
    put24(m, M + 20, 0x654321);     /* the guest's PSN: not used */
    m[M + 24] = 2;                  /* responder resources (<= A's depth) */
    m[M + 25] = 3;                  /* initiator depth (<= A's resources) */
    m[M + 27] = 7 << 5;
    memcpy(m + M + 36, "hi-back", 7);
    cm_send(b, m, MAD_LEN, cm_gid[0]);

    /* A's guest gets the REP, connects its QP, sends the RTU. */
    cm_expect(c, a, r, 0x13, cm_gid[1]);
    assert_int_equal(get32(r, M + 4), a_id);
    assert_int_equal(get32(r, M + 12) >> 8, b->rc->qpn);
    assert_memory_equal(r + M + 36, "hi-back", 7);
    assert_int_equal(r[M + 24], 2);
    assert_int_equal(r[M + 25], 3);
    a_peer = get32(r, M + 0);
    cm_qp_rtr_rts(a, b->rc->qpn, cm_gid[1], 0x123456, get32(r, M + 20) >> 8);
    cm_mad(m, 0x14, 0x98);
    put32(m, M + 0, a_id);
    put32(m, M + 4, a_peer);
    cm_send(a, m, MAD_LEN, cm_gid[1]);
    cm_expect(c, b, r, 0x14, cm_gid[0]);
    assert_int_equal(get32(r, M + 0), b_peer);
    assert_int_equal(get32(r, M + 4), b_id);

    /* The QPs talk both ways: every PSN is what the other side expects. */
    cm_rc_send(c, a, b, 3000, 0x31);
    cm_rc_send(c, b, a, 2000, 0x32);
    cm_rc_send(c, a, b, 100, 0x33);

    /* A disconnects: its DREP at once, B's guest gets a DREQ. */
    cm_mad(m, 0x15, 0x97);
    put32(m, M + 0, a_id);
    put32(m, M + 4, a_peer);
    put24(m, M + 8, b->rc->qpn);
    cm_send(a, m, MAD_LEN, cm_gid[1]);
    cm_expect(c, a, r, 0x16, NULL);
    assert_int_equal(get32(r, M + 4), a_id);
    cm_expect(c, b, r, 0x15, cm_gid[0]);
    assert_int_equal(get32(r, M + 4), b_id);
    assert_int_equal(get32(r, M + 8) >> 8, b->rc->qpn);

    /* Refused at once: another port space, a QP that is not A's. */
    cm_req(m, a, 0x3333, 0x013f, CM_PORT, a->rc->qpn, cm_gid[0], cm_gid[1]);
    cm_send(a, m, MAD_LEN, cm_gid[1]);
    cm_expect(c, a, r, 0x12, NULL);
    assert_int_equal(get32(r, M + 4), 0x3333);
    assert_int_equal(r[M + 10] << 8 | r[M + 11], 8);    /* service ID */
    cm_req(m, a, 0x4444, 0x0106, CM_PORT, a->rc->qpn ^ 0x100, cm_gid[0],
           cm_gid[1]);
    cm_send(a, m, MAD_LEN, cm_gid[1]);
    cm_expect(c, a, r, 0x12, NULL);
    assert_int_equal(get32(r, M + 4), 0x4444);
    assert_int_equal(r[M + 10] << 8 | r[M + 11], 1);    /* no QP */
    /* A port nobody listens on: the host's CM rejects (service ID). */
    cm_req(m, a, 0x5555, 0x0106, CM_PORT + 1, a->rc->qpn, cm_gid[0],
           cm_gid[1]);
    cm_send(a, m, MAD_LEN, cm_gid[1]);
    cm_expect(c, a, r, 0x12, NULL);
    assert_int_equal(get32(r, M + 4), 0x5555);
    assert_int_equal(r[M + 10] << 8 | r[M + 11], 8);
    /* A DREQ for no connection still gets its DREP. */
    cm_mad(m, 0x15, 0x96);
    put32(m, M + 0, 0x6666);
    put32(m, M + 4, 0xdead);
    cm_send(a, m, MAD_LEN, cm_gid[1]);
    cm_expect(c, a, r, 0x16, NULL);
    assert_int_equal(get32(r, M + 4), 0x6666);

    /*
     * Hostile or foreign MADs change nothing and answer nothing: REP and
     * RTU naming no connection, a short MAD, another class, garbage.
     */
    cm_mad(m, 0x13, 0x95);
    put32(m, M + 4, a_peer ^ 0x5a5a);
    cm_send(a, m, MAD_LEN, cm_gid[1]);
    cm_mad(m, 0x14, 0x94);
    put32(m, M + 4, b_peer);            /* B's ID, sent by A */
    cm_send(a, m, MAD_LEN, cm_gid[1]);
    cm_req(m, a, 0x7777, 0x0106, CM_PORT, a->rc->qpn, cm_gid[0], cm_gid[1]);
    cm_send(a, m, 100, cm_gid[1]);
    m[1] = 0x04;                        /* performance management */
    cm_send(a, m, MAD_LEN, cm_gid[1]);
    for (unsigned i = 0; i < MAD_LEN; i++) {
        m[i] = g_random_int();
    }
    m[0] = 1;
    m[1] = 0x07;
    m[2] = 2;
    m[3] = 3;
    /* Any message but DREQ, which is answered whatever its IDs. */
    put16(m, 16, (const uint16_t[]){ 0x11, 0x12, 0x13, 0x14, 0x16 }
                 [g_random_int_range(0, 5)]);
    cm_send(a, m, MAD_LEN, cm_gid[1]);
    cm_quiet(c);

    cm_dev_free(a);
    cm_dev_free(b);
}

/* A SIDR_REQ of @c's guest (request @id) to @dst's port @port. */
static void cm_sidr_req(uint8_t *m, uint32_t id, uint16_t ps, uint16_t port,
                        const uint8_t *src, const uint8_t *dst)
{
    uint8_t *pd = m + M + 16;

    cm_mad(m, 0x17, id);
    put32(m, M + 0, id);
    put16(m, M + 4, 0xffff);
    put32(m, M + 8, 0);
    put32(m, M + 12, (uint32_t)ps << 16 | port);
    pd[1] = 4 << 4;                 /* RDMA CM header, IPv4 */
    put16(pd, 2, 5556);
    memcpy(pd + 16, src + 12, 4);
    memcpy(pd + 32, dst + 12, 4);
    memcpy(pd + 36, "hi-sidr", 7);
}

/* A UD QP of @c's guest in RTS with RDMA CM's Q_Key. */
static FvQp *cm_ud_qp(CmDev *c)
{
    FvQp *q = fv_qp_new(c->d.fg, PVRDMA_QPT_UD, c->d.pd, c->d.cq, c->d.cq,
                        NULL, 16, 2, false);
    struct pvrdma_qp_attr a;

    assert_int_equal(fg_qp_to_rts(c->d.fg, q->handle, PVRDMA_QPT_UD), 0);
    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_RTS;
    a.qkey = 0x01234567;
    assert_int_equal(fg_modify_qp(c->d.fg, q->handle, PVRDMA_QP_STATE |
                                  PVRDMA_QP_QKEY, &a), 0);
    return q;
}

/*
 * UD services through RDMA CM (SIDR): A's guest asks for B's port in the
 * UDP port space, B's guest gets the SIDR_REQ (service, addresses,
 * private data) and answers with its UD QP; A's guest gets the QP number
 * and Q_Key and a datagram to it arrives, data checked.  B's guest
 * rejecting, a port nobody listens on, another port space and a reply
 * naming a QP that is not UD all end in a SIDR_REP that is not OK.
 */
static void test_cm_sidr(void **state)
{
    CmDev c[2], *a = &c[0], *b = &c[1];
    uint8_t m[MAD_LEN], r[MAD_LEN];
    FvQp *ua, *ub;
    struct pvrdma_sge sa, sb;
    struct pvrdma_sq_wqe_hdr h = wqe(0x51, PVRDMA_WR_SEND, 1);
    struct pvrdma_cqe cqe;
    uint32_t req_id, qkey, qpn;
    uint8_t sent[512], got[512];
    unsigned i;

    (void)state;
    memset(c, 0, sizeof(c));
    cm_dev_init(a, cm_gid[0]);
    cm_dev_init(b, cm_gid[1]);
    ua = cm_ud_qp(a);
    ub = cm_ud_qp(b);

    cm_sidr_req(m, 0x8888, 0x0111, CM_PORT, cm_gid[0], cm_gid[1]);
    cm_send(a, m, MAD_LEN, cm_gid[1]);
    cm_expect(c, b, r, 0x17, cm_gid[0]);
    req_id = get32(r, M + 0);
    assert_int_equal(get32(r, M + 12), 0x01110000u | CM_PORT);
    assert_int_equal(r[M + 16 + 1], 4 << 4);
    assert_memory_equal(r + M + 16 + 16, cm_gid[0] + 12, 4);
    assert_memory_equal(r + M + 16 + 32, cm_gid[1] + 12, 4);
    assert_memory_equal(r + M + 16 + 36, "hi-sidr", 7);

    cm_mad(m, 0x18, 0x77);
    put32(m, M + 0, req_id);
    m[M + 4] = 0;                   /* the QP is valid */
    put24(m, M + 8, ub->qpn);
    put32(m, M + 20, 0x01234567);
    memcpy(m + M + 96, "ok-sidr", 7);
    cm_send(b, m, MAD_LEN, cm_gid[0]);
    cm_expect(c, a, r, 0x18, cm_gid[1]);
    assert_int_equal(get32(r, M + 0), 0x8888);
    assert_int_equal(r[M + 4], 0);
    qpn = get32(r, M + 8) >> 8;
    qkey = get32(r, M + 20);
    assert_int_equal(qpn, ub->qpn);
    assert_int_equal(qkey, 0x01234567);
    assert_int_equal(get32(r, M + 16), 0x01110000u | CM_PORT);
    assert_memory_equal(r + M + 96, "ok-sidr", 7);

    /* A datagram to what the SIDR_REP named arrives. */
    for (i = 0; i < sizeof(sent); i++) {
        *fv_mr_ptr(a->mr, CM_DATA_VA + i) = i * 7 + 3;
    }
    sb = sge(b->mr, CM_DATA_VA, 40 + sizeof(sent));
    fv_post_recv(ub, 0x61, &sb, 1);
    fv_ring_rq(ub);
    sa = sge(a->mr, CM_DATA_VA, sizeof(sent));
    h.wr.ud.remote_qpn = qpn;
    h.wr.ud.remote_qkey = qkey;
    h.wr.ud.av.hop_limit = 64;
    h.wr.ud.av.port_pd = 1;
    memcpy(h.wr.ud.av.dgid, cm_gid[1], 16);
    fv_post_send(ua, &h, &sa, 1);
    fv_ring_sq(ua);
    {
        gint64 end = g_get_monotonic_time() + WAIT_US;

        while (!fv_cq_poll(b->d.cq, &cqe)) {
            cm_run(c, 2);
            assert_true(g_get_monotonic_time() < end);
            g_usleep(200);
        }
    }
    assert_int_equal(cqe.wr_id, 0x61);
    assert_int_equal(cqe.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(cqe.src_qp, ua->qpn);
    mr_read(a->mr, CM_DATA_VA, sent, sizeof(sent));
    mr_read(b->mr, CM_DATA_VA + 40, got, sizeof(got));
    assert_memory_equal(sent, got, sizeof(sent));

    /* B's guest rejects: A's guest hears it is not OK. */
    cm_sidr_req(m, 0x8889, 0x0111, CM_PORT, cm_gid[0], cm_gid[1]);
    cm_send(a, m, MAD_LEN, cm_gid[1]);
    cm_expect(c, b, r, 0x17, cm_gid[0]);
    req_id = get32(r, M + 0);
    cm_mad(m, 0x18, 0x76);
    put32(m, M + 0, req_id);
    m[M + 4] = 2;                   /* rejected */
    cm_send(b, m, MAD_LEN, cm_gid[0]);
    cm_expect(c, a, r, 0x18, NULL);
    assert_int_equal(get32(r, M + 0), 0x8889);
    assert_int_not_equal(r[M + 4], 0);
    /* B's guest names its RC QP: the host rejects for it. */
    cm_sidr_req(m, 0x888a, 0x0111, CM_PORT, cm_gid[0], cm_gid[1]);
    cm_send(a, m, MAD_LEN, cm_gid[1]);
    cm_expect(c, b, r, 0x17, cm_gid[0]);
    req_id = get32(r, M + 0);
    cm_mad(m, 0x18, 0x75);
    put32(m, M + 0, req_id);
    put24(m, M + 8, b->rc->qpn);
    put32(m, M + 20, 0x01234567);
    cm_send(b, m, MAD_LEN, cm_gid[0]);
    cm_expect(c, a, r, 0x18, NULL);
    assert_int_equal(get32(r, M + 0), 0x888a);
    assert_int_not_equal(r[M + 4], 0);
    /* A port nobody listens on. */
    cm_sidr_req(m, 0x888b, 0x0111, CM_PORT + 1, cm_gid[0], cm_gid[1]);
    cm_send(a, m, MAD_LEN, cm_gid[1]);
    cm_expect(c, a, r, 0x18, NULL);
    assert_int_equal(get32(r, M + 0), 0x888b);
    assert_int_not_equal(r[M + 4], 0);
    /* Another port space: refused at once, no such service. */
    cm_sidr_req(m, 0x888c, 0x0106, CM_PORT, cm_gid[0], cm_gid[1]);
    cm_send(a, m, MAD_LEN, cm_gid[1]);
    cm_expect(c, a, r, 0x18, NULL);
    assert_int_equal(get32(r, M + 0), 0x888c);
    assert_int_equal(r[M + 4], 1);
    /* A SIDR_REP naming nothing: nothing. */
    cm_mad(m, 0x18, 0x74);
    put32(m, M + 0, 0xdeadbeef);
    cm_send(b, m, MAD_LEN, cm_gid[0]);
    cm_quiet(c);

    g_free(ua);
    g_free(ub);
    cm_dev_free(a);
    cm_dev_free(b);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_send),
        cmocka_unit_test(test_write_imm_read),
        cmocka_unit_test(test_uc),
        cmocka_unit_test(test_atomics),
        cmocka_unit_test(test_remote_access_error),
        cmocka_unit_test(test_send_stream),
        cmocka_unit_test(test_ud),
        cmocka_unit_test(test_mcast),
        cmocka_unit_test(test_srq),
        cmocka_unit_test(test_dma_mr),
        cmocka_unit_test(test_host_refuses),
        cmocka_unit_test(test_clamped_to_host),
        cmocka_unit_test(test_reg_1gib),
        cmocka_unit_test(test_frmr),
        cmocka_unit_test(test_mw),
        cmocka_unit_test(test_cm),
        cmocka_unit_test(test_cm_sidr),
    };
    struct ibv_context *ctx;
    union ibv_gid gid;

    if (argc != 5) {
        fprintf(stderr, "usage: %s IBDEV GID_INDEX IPV4_A IPV4_B\n",
                argv[0]);
        return 2;
    }
    ibdev = argv[1];
    gid_index = atoi(argv[2]);
    for (int i = 0; i < 2; i++) {
        cm_gid[i][10] = cm_gid[i][11] = 0xff;
        if (inet_pton(AF_INET, argv[3 + i], cm_gid[i] + 12) != 1) {
            fprintf(stderr, "%s: %s is not an IPv4 address\n", argv[0],
                    argv[3 + i]);
            return 2;
        }
    }
    ctx = open_ibdev();
    if (!ctx || ibv_query_gid(ctx, 1, gid_index, &gid)) {
        fprintf(stderr, "%s: no GID %d on %s\n", argv[0], gid_index, ibdev);
        return 2;
    }
    memcpy(host_gid, gid.raw, 16);
    ibv_close_device(ctx);
    if (getenv("TEST_FILTER")) {
        /* One test (or a pattern): TEST_FILTER=test_cm */
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
