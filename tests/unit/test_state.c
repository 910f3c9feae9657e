/*
 * Unit tests: the device state of migration and snapshots
 * (hw/pvrdma/pvrdma_state.c, docs/migration.md).  A device with every
 * kind of object, QPs in every state and traffic on the software fabric
 * is migrated (fg_migrate: saved, torn down, loaded into a new core on a
 * copy of the guest's memory, saved again byte for byte) and the traffic
 * goes on: work posted before the switch completes after it, once;
 * an RNR wait survives it.  The saved state is hostile input: every
 * truncation and every single-byte change is refused or loads a state
 * that saves again, never crashes or leaks (ASan), and a refused load
 * leaves the device as after a reset.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <glib.h>

#include "fake_guest.h"
#include "fake_verbs.h"
#include "pvrdma_core_int.h"

#define ALL_ACCESS  (PVRDMA_ACCESS_LOCAL_WRITE | PVRDMA_ACCESS_REMOTE_WRITE | \
                     PVRDMA_ACCESS_REMOTE_READ | PVRDMA_ACCESS_REMOTE_ATOMIC)
#define SIG         PVRDMA_WR_FLAG_SIGNALED
#define VA_A        0x7f0000000800ull
#define VA_B        0x7e0000000100ull
#define VA_W        0x7d0000000000ull
#define MR_LEN      (5 * 4096ull)

static const FvConnOpts opts = {
    .access = ALL_ACCESS, .min_rnr_timer = 1, .rnr_retry = 7,
    .retry_cnt = 7,
};

/* A device with one of everything (see build()). */
typedef struct Dev {
    FakeGuest *fg;
    uint32_t pd, ctx, upd, ucq;
    FvCq *cqa, *cqb;
    FvSrq *srq;
    FvQp *a, *b;                /* RC, connected, RTS */
    FvQp *c, *d;                /* RC, connected: c's SEND waits on RNR */
    FvQp *ud, *init, *err;
    FvMr *ma, *mb, *mw_mr;
    FvFrmr *frmr;
    uint32_t mw1, mw1_rkey, mw2, mw2_rkey, dma_mr, dma_lkey, frmr_key;
    uint32_t freed_mr;
} Dev;

static void join(FakeGuest *fg)
{
    fg_join_fabric(fg);
}

static struct pvrdma_sge sge(FvMr *mr, uint64_t va, uint32_t len)
{
    struct pvrdma_sge s = { .addr = va, .length = len, .lkey = mr->lkey };

    return s;
}

static struct pvrdma_sq_wqe_hdr wqe(uint64_t id, uint32_t op, uint32_t n)
{
    struct pvrdma_sq_wqe_hdr h;

    memset(&h, 0, sizeof(h));
    h.wr_id = id;
    h.opcode = op;
    h.send_flags = SIG;
    h.num_sge = n;
    return h;
}

static void expect_cqe(FvCq *cq, uint64_t wr_id, uint32_t qp,
                       uint32_t opcode, uint32_t status, uint32_t len)
{
    struct pvrdma_cqe c;

    assert_true(fv_cq_poll(cq, &c));
    if (c.wr_id != wr_id || c.opcode != opcode || c.status != status) {
        print_message("CQE wr_id %llu opcode %u status %u, expected %llu "
                      "%u %u\n", (unsigned long long)c.wr_id, c.opcode,
                      c.status, (unsigned long long)wr_id, opcode, status);
    }
    assert_int_equal(c.wr_id, wr_id);
    assert_int_equal(c.qp, qp);
    assert_int_equal(c.opcode, opcode);
    assert_int_equal(c.status, status);
    assert_int_equal(c.byte_len, len);
}

static void expect_empty(FvCq *cq)
{
    struct pvrdma_cqe c;

    assert_false(fv_cq_poll(cq, &c));
}

static void post_send(FvQp *qp, FvMr *mr, uint64_t id, uint64_t va,
                      uint32_t len)
{
    struct pvrdma_sge s = sge(mr, va, len);
    struct pvrdma_sq_wqe_hdr h = wqe(id, PVRDMA_WR_SEND, 1);

    fv_post_send(qp, &h, &s, 1);
}

static void post_recv(FvQp *qp, FvMr *mr, uint64_t id, uint64_t va,
                      uint32_t len)
{
    struct pvrdma_sge s = sge(mr, va, len);

    fv_post_recv(qp, id, &s, 1);
    fv_ring_rq(qp);
}

/* The groups build() puts its UD QP in. */
static const uint8_t mgids[2][16] = {
    { 0xff, 0x12, [15] = 0x42 },
    { [10] = 0xff, [11] = 0xff, 239, 0, 0, 7 },
};

static Dev *build(void)
{
    Dev *d = g_new0(Dev, 1);
    FakeGuest *fg = fg_new(NULL);
    uint32_t h, k;

    d->fg = fg;
    join(fg);
    fg_setup(fg);
    assert_int_equal(fg_bind_gid(fg, 0), 0);
    assert_int_equal(fg_bind_gid(fg, 3), 0);
    assert_int_equal(fg_create_pd(fg, 0, &d->pd), 0);
    /* A user context with a PD and a CQ of its own. */
    assert_int_equal(fg_create_uc(fg, 5, &d->ctx), 0);
    assert_int_equal(fg_create_pd(fg, d->ctx, &d->upd), 0);
    assert_int_equal(fg_create_cq(fg, d->ctx, 16, &d->ucq), 0);
    assert_int_equal(fg_create_dma_mr(fg, d->pd, &d->dma_mr, &d->dma_lkey),
                     0);

    d->cqa = fv_cq_new(fg, 0, 64);
    d->cqb = fv_cq_new(fg, 0, 64);
    d->srq = fv_srq_new(fg, d->pd, 16, 2, 0);
    d->ma = fv_mr_new(fg, d->pd, VA_A, MR_LEN, ALL_ACCESS);
    d->mb = fv_mr_new(fg, d->pd, VA_B, MR_LEN, ALL_ACCESS);
    d->mw_mr = fv_mr_new(fg, d->pd, VA_W, MR_LEN,
                         ALL_ACCESS | PVRDMA_ACCESS_MW_BIND);
    d->a = fv_qp_new(fg, PVRDMA_QPT_RC, d->pd, d->cqa, d->cqa, NULL, 16, 4,
                     false);
    d->b = fv_qp_new(fg, PVRDMA_QPT_RC, d->pd, d->cqb, d->cqb, NULL, 16, 4,
                     false);
    fv_connect(d->a, d->b, &opts);
    d->c = fv_qp_new(fg, PVRDMA_QPT_RC, d->pd, d->cqa, d->cqa, NULL, 16, 4,
                     false);
    d->d = fv_qp_new(fg, PVRDMA_QPT_RC, d->pd, d->cqb, d->cqb, d->srq, 16,
                     4, false);
    fv_connect(d->c, d->d, &opts);
    d->ud = fv_qp_new(fg, PVRDMA_QPT_UD, d->pd, d->cqa, d->cqb, NULL, 8, 2,
                      true);
    assert_int_equal(fg_qp_to_rts(fg, d->ud->handle, PVRDMA_QPT_UD), 0);
    /* In two multicast groups. */
    for (k = 0; k < 2; k++) {
        struct pvrdma_cmd_mcast m = { .hdr.cmd = PVRDMA_CMD_ATTACH_MCAST,
                                      .qp_handle = d->ud->handle };

        memcpy(m.mgid, mgids[k], 16);
        assert_int_equal(fg_cmd(fg, &m, sizeof(m), NULL), 0);
    }
    d->init = fv_qp_new(fg, PVRDMA_QPT_RC, d->pd, d->cqa, d->cqa, NULL, 8,
                        1, false);
    {
        struct pvrdma_qp_attr at;

        memset(&at, 0, sizeof(at));
        at.qp_state = PVRDMA_QPS_INIT;
        at.port_num = 1;
        at.qp_access_flags = PVRDMA_ACCESS_REMOTE_READ;
        assert_int_equal(fg_modify_qp(fg, d->init->handle,
                                      PVRDMA_QP_STATE | PVRDMA_QP_PORT |
                                      PVRDMA_QP_PKEY_INDEX |
                                      PVRDMA_QP_ACCESS_FLAGS, &at), 0);
    }
    d->err = fv_qp_new(fg, PVRDMA_QPT_UC, d->pd, d->cqb, d->cqb, NULL, 8, 1,
                       false);
    assert_int_equal(fv_qp_modify_state(d->err, PVRDMA_QPS_ERR), 0);

    /* A fast-reg MR registered through a, windows bound and unbound. */
    d->frmr = fv_frmr_new(fg, d->pd, 8);
    d->frmr_key = (d->frmr->key & ~0xffu) | 0x22;
    fv_post_reg_mr(d->a, d->frmr, 100, 0x5000000, 3, 3 * 4096 - 10,
                   ALL_ACCESS, d->frmr_key);
    expect_cqe(d->cqa, 100, d->a->handle, PVRDMA_WC_FAST_REG_MR,
               PVRDMA_WC_SUCCESS, 0);
    assert_int_equal(fv_mw_new(fg, d->pd, PVRDMA_MR_FLAG_MW_TYPE1, &d->mw1,
                               &d->mw1_rkey), 0);
    assert_int_equal(fv_mw_new(fg, d->pd, PVRDMA_MR_FLAG_MW_TYPE2, &d->mw2,
                               &d->mw2_rkey), 0);
    d->mw1_rkey = (d->mw1_rkey & ~0xffu) | 0x11;
    fv_post_bind_mw(d->a, 101, d->mw1_rkey, d->mw_mr->lkey, VA_W + 4096,
                    8192, PVRDMA_ACCESS_REMOTE_WRITE);
    expect_cqe(d->cqa, 101, d->a->handle, PVRDMA_WC_BIND_MW,
               PVRDMA_WC_SUCCESS, 0);
    /* An MR destroyed: its handle's next key differs after migration. */
    assert_int_equal(fg_create_user_mr(fg, d->pd, VA_W, 4096, ALL_ACCESS,
                                       &h, &k, &k), 0);
    assert_int_equal(k & 0xff, 1);
    d->freed_mr = h;
    assert_int_equal(fg_destroy_mr(fg, h), 0);
    return d;
}

static void dev_free(Dev *d)
{
    fg_free(d->fg);
    g_free(d->cqa);
    g_free(d->cqb);
    g_free(d->srq);
    g_free(d->a);
    g_free(d->b);
    g_free(d->c);
    g_free(d->d);
    g_free(d->ud);
    g_free(d->init);
    g_free(d->err);
    g_free(d->ma);
    g_free(d->mb);
    g_free(d->mw_mr);
    g_free(d->frmr);
    g_free(d);
}

/*
 * Traffic before, across and after a migration: a SEND rung before
 * completes once; one posted (WQE written, doorbell not yet rung) is
 * rung after and completes once; c's SEND, stalled on an RNR NAK (d's
 * SRQ is empty), completes after d gets a receive on the destination;
 * WRITE and READ work with the old keys, through the window bound before.
 */
static void test_migrate_traffic(void **state)
{
    Dev *d = build();
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_sge s;
    struct pvrdma_qp_attr at;
    uint64_t v, id;

    (void)state;
    fv_mr_fill(d->ma, VA_A, MR_LEN, 7);
    post_recv(d->b, d->mb, 1, VA_B, 4096);
    post_send(d->a, d->ma, 2, VA_A, 1000);
    fv_ring_sq(d->a);
    expect_cqe(d->cqa, 2, d->a->handle, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS,
               1000);
    expect_cqe(d->cqb, 1, d->b->handle, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS,
               1000);
    /* c -> d: no receive on d's SRQ: c's SEND waits on an RNR NAK. */
    post_send(d->c, d->ma, 3, VA_A + 100, 300);
    fv_ring_sq(d->c);
    expect_empty(d->cqa);
    assert_true(d->fg->timer_expire >= 0);
    /* Posted on both sides, not rung yet. */
    s = sge(d->mb, VA_B + 8192, 2048);
    fv_post_recv(d->b, 4, &s, 1);
    post_send(d->a, d->ma, 5, VA_A + 4000, 2000);

    assert_true(fg_migrate(d->fg, join) > 0);
    /* The multicast groups came along, and can be left. */
    for (int k = 0; k < 2; k++) {
        struct pvrdma_cmd_mcast m = { .hdr.cmd = PVRDMA_CMD_DETACH_MCAST,
                                      .qp_handle = d->ud->handle };
        PvrdmaQp *qp;

        assert_int_equal(pvrdma_core_mcast_qps(d->fg->core, mgids[k], &qp,
                                               1), 1);
        assert_int_equal(qp->handle, d->ud->handle);
        memcpy(m.mgid, mgids[k], 16);
        assert_int_equal(fg_cmd(d->fg, &m, sizeof(m), NULL), 0);
        assert_int_equal(pvrdma_core_mcast_qps(d->fg->core, mgids[k], &qp,
                                               1), 0);
    }

    fv_ring_rq(d->b);
    fv_ring_sq(d->a);
    expect_cqe(d->cqa, 5, d->a->handle, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS,
               2000);
    expect_cqe(d->cqb, 4, d->b->handle, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS,
               2000);
    assert_true(fv_mr_check(d->mb, VA_B + 8192, 2000, 7) ||
                memcmp(fv_mr_ptr(d->mb, VA_B + 8192),
                       fv_mr_ptr(d->ma, VA_A + 4000), 2000) == 0);
    expect_empty(d->cqa);
    /* The RNR wait: a receive on d's SRQ, then its timer. */
    s = sge(d->mb, VA_B + 12288, 1024);
    fv_srq_post(d->srq, 6, &s, 1);
    fv_srq_ring(d->srq);
    fg_advance(d->fg, 1000 * 1000 * 1000LL);
    expect_cqe(d->cqa, 3, d->c->handle, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS,
               300);
    expect_cqe(d->cqb, 6, d->d->handle, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS,
               300);
    assert_int_equal(memcmp(fv_mr_ptr(d->mb, VA_B + 12288),
                            fv_mr_ptr(d->ma, VA_A + 100), 300), 0);
    expect_empty(d->cqa);
    expect_empty(d->cqb);

    /* WRITE through the window bound before, then READ it back. */
    s = sge(d->ma, VA_A + 64, 512);
    h = wqe(7, PVRDMA_WR_RDMA_WRITE, 1);
    h.wr.rdma.remote_addr = VA_W + 4096 + 100;
    h.wr.rdma.rkey = d->mw1_rkey;
    fv_post_send(d->a, &h, &s, 1);
    fv_ring_sq(d->a);
    expect_cqe(d->cqa, 7, d->a->handle, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_SUCCESS, 512);
    s = sge(d->mb, VA_B, 512);
    h = wqe(8, PVRDMA_WR_RDMA_READ, 1);
    h.wr.rdma.remote_addr = VA_W + 4096 + 100;
    h.wr.rdma.rkey = d->mw_mr->rkey;
    fv_post_send(d->b, &h, &s, 1);
    fv_ring_sq(d->b);
    expect_cqe(d->cqb, 8, d->b->handle, PVRDMA_WC_RDMA_READ,
               PVRDMA_WC_SUCCESS, 512);
    assert_int_equal(memcmp(fv_mr_ptr(d->mb, VA_B),
                            fv_mr_ptr(d->ma, VA_A + 64), 512), 0);
    /* The window gives no READ: refused as before the switch (a and b
     * go to ERR: c and d go on). */
    h = wqe(9, PVRDMA_WR_RDMA_READ, 1);
    h.wr.rdma.remote_addr = VA_W + 4096;
    h.wr.rdma.rkey = d->mw1_rkey;
    fv_post_send(d->b, &h, &s, 1);
    fv_ring_sq(d->b);
    expect_cqe(d->cqb, 9, d->b->handle, PVRDMA_WC_RDMA_READ,
               PVRDMA_WC_REM_ACCESS_ERR, 0);
    /* An atomic through the fast-reg MR's old key. */
    memset(fg_ptr(d->fg, d->frmr->pages[1]), 0, 16);
    s = sge(d->ma, VA_A + 8, 8);
    h = wqe(10, PVRDMA_WR_ATOMIC_FETCH_AND_ADD, 1);
    h.wr.atomic.remote_addr = 0x5000000 + 4096;
    h.wr.atomic.rkey = d->frmr_key;
    h.wr.atomic.compare_add = 41;
    fv_post_send(d->c, &h, &s, 1);
    fv_ring_sq(d->c);
    expect_cqe(d->cqa, 10, d->c->handle, PVRDMA_WC_FETCH_ADD,
               PVRDMA_WC_SUCCESS, 8);
    memcpy(&v, fg_ptr(d->fg, d->frmr->pages[1]), 8);
    assert_int_equal(v, 41);
    /* Every QP kept its state and attributes. */
    assert_int_equal(fv_qp_state(d->init), PVRDMA_QPS_INIT);
    assert_int_equal(fv_qp_state(d->err), PVRDMA_QPS_ERR);
    assert_int_equal(fv_qp_state(d->ud), PVRDMA_QPS_RTS);
    assert_int_equal(fg_query_qp(d->fg, d->init->handle, &at), 0);
    assert_int_equal(at.qp_access_flags, PVRDMA_ACCESS_REMOTE_READ);
    /* A new MR in the destroyed one's handle gets a new key. */
    {
        uint32_t h2, lk, rk;

        assert_int_equal(fg_create_user_mr(d->fg, d->pd, VA_W, 4096,
                                           ALL_ACCESS, &h2, &lk, &rk), 0);
        assert_int_equal(h2, d->freed_mr);
        assert_int_equal(lk, (d->freed_mr << 8) | 2);
    }
    assert_int_equal(d->fg->guest_errors, 0);
    assert_int_equal(fv_qp_state(d->a), PVRDMA_QPS_ERR);
    /* And again: a second migration of the same device. */
    fg_migrate(d->fg, join);
    assert_int_equal(fv_qp_state(d->a), PVRDMA_QPS_ERR);
    s = sge(d->mb, VA_B, 100);
    fv_srq_post(d->srq, 11, &s, 1);
    fv_srq_ring(d->srq);
    post_send(d->c, d->ma, 12, VA_A, 100);
    fv_ring_sq(d->c);
    expect_cqe(d->cqa, 12, d->c->handle, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS,
               100);
    expect_cqe(d->cqb, 11, d->d->handle, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS,
               100);
    /* An SRQ resized with receives waiting moves with its new ring, and
     * takes them in order after the switch. */
    s = sge(d->mb, VA_B, 100);
    fv_srq_post(d->srq, 14, &s, 1);
    fv_srq_post(d->srq, 15, &s, 1);
    fv_srq_ring(d->srq);
    assert_int_equal(fv_srq_resize(d->srq, 64), 0);
    assert_true(fg_migrate(d->fg, join) > 0);
    for (id = 14; id < 16; id++) {
        post_send(d->c, d->ma, 100 + id, VA_A, 100);
        fv_ring_sq(d->c);
        expect_cqe(d->cqa, 100 + id, d->c->handle, PVRDMA_WC_SEND,
                   PVRDMA_WC_SUCCESS, 100);
        expect_cqe(d->cqb, id, d->d->handle, PVRDMA_WC_RECV,
                   PVRDMA_WC_SUCCESS, 100);
    }
    /* A QP in ERR flushes what is posted after the switch. */
    post_send(d->a, d->ma, 13, VA_A, 100);
    fv_ring_sq(d->a);
    expect_cqe(d->cqa, 13, d->a->handle, PVRDMA_WC_SEND,
               PVRDMA_WC_WR_FLUSH_ERR, 0);
    dev_free(d);
}

/* A device without a DSR (driver not loaded) and one just activated. */
static void test_migrate_bare(void **state)
{
    FakeGuest *fg = fg_new(NULL);

    (void)state;
    fg_reg_write(fg, PVRDMA_REG_IMR, 0x5);
    fg_migrate(fg, join);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_IMR), 0x5);
    join(fg);
    fg_setup(fg);
    /* The port's counters go along (the links' are the host's). */
    {
        uint64_t v[PVRDMA_CTR_NUM];

        fg->core->ctr[PVRDMA_CTR_SENT_PKTS] = 12345;
        fg->core->ctr[PVRDMA_CTR_COMPLETION_ERRS] = 7;
        fg_migrate(fg, join);
        fg_counters(fg, v);
        assert_int_equal(v[PVRDMA_CTR_SENT_PKTS], 12345);
        assert_int_equal(v[PVRDMA_CTR_COMPLETION_ERRS], 7);
    }
    assert_int_equal(fg_bind_gid(fg, 0), 0);
    fg_free(fg);
}

static uint8_t *save(FakeGuest *fg, size_t *len)
{
    char *err = NULL;
    uint8_t *s = pvrdma_core_state_save(fg->core, len, &err);

    assert_non_null(s);
    assert_null(err);
    return s;
}

/* The destination refuses the state, says why, and stays as reset. */
static void expect_refused(FakeGuest *dst, const uint8_t *s, size_t len,
                           const uint8_t *bare, size_t bare_len,
                           const char *why)
{
    g_autofree uint8_t *after = NULL;
    char *err = NULL;
    size_t n;

    assert_false(pvrdma_core_state_load(dst->core, s, len, &err));
    assert_non_null(err);
    if (why && !strstr(err, why)) {
        fail_msg("'%s' does not say '%s'", err, why);
    }
    g_free(err);
    after = save(dst, &n);
    assert_int_equal(n, bare_len);
    assert_memory_equal(after, bare, n);
}

static void test_state_hostile(void **state)
{
    Dev *d = build();
    FakeGuest *dst;
    g_autofree uint8_t *s = NULL, *bare = NULL;
    size_t len, bare_len, i, loaded = 0;
    GRand *rnd = g_rand_new_with_seed(27);

    (void)state;
    s = save(d->fg, &len);
    /* The destination takes the source's fabric port (its QP numbers). */
    dev_free(d);
    dst = fg_new(NULL);
    join(dst);
    bare = save(dst, &bare_len);
    /* Every truncation. */
    for (i = 0; i < len; i++) {
        expect_refused(dst, s, i, bare, bare_len, NULL);
    }
    /* Bytes after the end. */
    {
        g_autofree uint8_t *more = g_malloc0(len + 1);

        memcpy(more, s, len);
        expect_refused(dst, more, len + 1, bare, bare_len, "after the end");
    }
    /* Every byte changed, once each, to a random other value. */
    for (i = 0; i < len; i++) {
        g_autofree uint8_t *bad = g_memdup2(s, len);
        char *err = NULL;

        bad[i] ^= 1 + g_rand_int_range(rnd, 0, 255);
        if (pvrdma_core_state_load(dst->core, bad, len, &err)) {
            /* Some bytes are data (a GID, an address): loaded, it saves. */
            g_autofree uint8_t *again = NULL;
            size_t n;

            again = save(dst, &n);
            assert_true(n > 0);
            pvrdma_core_reset(dst->core);
            loaded++;
        } else {
            assert_non_null(err);
            g_free(err);
        }
    }
    /* Most changes are caught; the rest are values a guest may choose. */
    print_message("state of %zu bytes: %zu single-byte changes loaded\n",
                  len, loaded);
    assert_true(loaded < len / 2);
    g_rand_free(rnd);
    fg_free(dst);
}

static void test_state_refusals(void **state)
{
    Dev *d = build();
    PvrdmaCoreConfig cfg;
    FakeGuest *dst;
    g_autofree uint8_t *s = NULL, *bare = NULL;
    size_t len, bare_len;

    (void)state;
    s = save(d->fg, &len);
    dev_free(d);
    /* Another -device property: named. */
    pvrdma_core_default_config(&cfg);
    cfg.max_qp = 512;
    dst = fg_new(&cfg);
    join(dst);
    bare = save(dst, &bare_len);
    expect_refused(dst, s, len, bare, bare_len, "max-qp");
    fg_free(dst);
    g_free(bare);

    dst = fg_new(NULL);
    join(dst);
    bare = save(dst, &bare_len);
    /* Another format version, or not a state at all. */
    {
        uint8_t v = s[8];
        g_autofree char *why = g_strdup_printf("version %u", v + 1);

        s[8] = v + 1;
        expect_refused(dst, s, len, bare, bare_len, why);
        s[8] = v;
    }
    s[0] = 'X';
    expect_refused(dst, s, len, bare, bare_len, "not a pvrdma device state");
    s[0] = 'P';
    /*
     * The counters come last but for the two multicast records (header 8,
     * QP handle 4, group 16) and the 8-byte end record: record header
     * (8), their number (4), the values; before them the fabric's move
     * record: ..., life (8), ancestor count (4), no ancestors here.
     */
    {
        size_t mc = len - 8 - 2 * 28, ctr = mc - 4 - 8 * PVRDMA_CTR_NUM;
        size_t mv = ctr - 8;
        uint8_t life[8];

        memcpy(life, s + mv - 12, 8);
        memset(s + mv - 12, 0, 8);
        expect_refused(dst, s, len, bare, bare_len, "bad move record");
        memcpy(s + mv - 12, life, 8);
        s[mv - 4] = PVRDMA_MOVE_LINEAGE + 1;
        expect_refused(dst, s, len, bare, bare_len, "17 ancestors");
        s[mv - 4] = 0;
        assert_int_equal(s[ctr], PVRDMA_CTR_NUM);
        s[ctr]++;
        expect_refused(dst, s, len, bare, bare_len, "bad counters record");
        s[ctr]--;
        /* A multicast record naming another QP, or a unicast group. */
        assert_int_equal(s[mc], 15);
        s[mc + 8] ^= 0x40;
        expect_refused(dst, s, len, bare, bare_len,
                       "multicast membership of QP");
        s[mc + 8] ^= 0x40;
        s[mc + 12] = 0;
        expect_refused(dst, s, len, bare, bare_len,
                       "multicast membership of QP");
        s[mc + 12] = 0xff;
    }
    /* The real one loads into that device. */
    {
        char *err = NULL;

        assert_true(pvrdma_core_state_load(dst->core, s, len, &err));
    }
    fg_free(dst);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_migrate_traffic),
        cmocka_unit_test(test_migrate_bare),
        cmocka_unit_test(test_state_hostile),
        cmocka_unit_test(test_state_refusals),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
