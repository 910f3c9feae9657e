/*
 * Unit tests: regressions for bugs found by the libFuzzer harness
 * (tests/fuzz).  Each test is named after the reproducer saved in
 * tests/fuzz/regress/ and fails without its fix in hw/pvrdma.
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
#include "pvrdma_fabric.h"

#define ALL_ACCESS  (PVRDMA_ACCESS_LOCAL_WRITE | PVRDMA_ACCESS_REMOTE_WRITE | \
                     PVRDMA_ACCESS_REMOTE_READ | PVRDMA_ACCESS_REMOTE_ATOMIC)
#define VA_A        0x7f0000000800ull
#define VA_B        0x7e0000000100ull

/* One device, RC QPs a and b connected to each other, one MR each. */
typedef struct Loop {
    FakeGuest *fg;
    uint32_t pd;
    FvCq *cq;
    FvQp *a, *b;
    FvMr *ma, *mb;
} Loop;

static Loop *loop_new(uint32_t wr, const FvConnOpts *o)
{
    Loop *l = g_new0(Loop, 1);

    l->fg = fg_new(NULL);
    fg_join_fabric(l->fg);
    fg_setup(l->fg);
    assert_int_equal(fg_bind_gid(l->fg, 0), 0);
    assert_int_equal(fg_create_pd(l->fg, 0, &l->pd), 0);
    l->cq = fv_cq_new(l->fg, 0, 64);
    l->a = fv_qp_new(l->fg, PVRDMA_QPT_RC, l->pd, l->cq, l->cq, NULL, wr, 1,
                     false);
    l->b = fv_qp_new(l->fg, PVRDMA_QPT_RC, l->pd, l->cq, l->cq, NULL, wr, 1,
                     false);
    l->ma = fv_mr_new(l->fg, l->pd, VA_A, 4096, ALL_ACCESS);
    l->mb = fv_mr_new(l->fg, l->pd, VA_B, 4096, ALL_ACCESS);
    fv_connect(l->a, l->b, o);
    return l;
}

static void loop_free(Loop *l)
{
    fg_free(l->fg);
    g_free(l->cq);
    g_free(l->a);
    g_free(l->b);
    g_free(l->ma);
    g_free(l->mb);
    g_free(l);
}

static void post_signaled(FvQp *qp, FvMr *mr, FvMr *rmr, uint64_t id,
                          uint32_t op)
{
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_sge s = { .addr = mr->va, .length = 16, .lkey = mr->lkey };

    memset(&h, 0, sizeof(h));
    h.wr_id = id;
    h.opcode = op;
    h.send_flags = PVRDMA_WR_FLAG_SIGNALED;
    h.num_sge = 1;
    h.wr.rdma.remote_addr = rmr->va;
    h.wr.rdma.rkey = rmr->rkey;
    fv_post_send(qp, &h, &s, 1);
}

/*
 * regress/rnr-stall-sq-emptied: the SQ head is RNR-stalled, then the guest
 * overruns its one-entry SQ so prod_tail == cons_head again (the stalled
 * WQE is gone).  When the RNR timer fired, process_sq found the ring empty
 * and returned with rnr_pending still set but the QP off the timer list:
 * a later SQD kept executing new WQEs and SQ_DRAINED never came.
 */
static void test_rnr_stall_sq_emptied(void **state)
{
    FvConnOpts o = {
        .access = ALL_ACCESS, .min_rnr_timer = 1 /* 10 us */,
        .rnr_retry = 7, .retry_cnt = 7,
    };
    Loop *l = loop_new(1, &o);
    struct pvrdma_qp_attr at;

    (void)state;
    /* SEND with no receive posted at b: RNR, retried by the timer */
    post_signaled(l->a, l->ma, l->mb, 1, PVRDMA_WR_SEND);
    fv_ring_sq(l->a);
    assert_true(pvrdma_core_rnr_waiting(
                    pvrdma_table_lookup(&l->fg->core->qp_tbl, l->a->handle)));
    assert_int_equal(l->fg->timer_expire, l->fg->now_ns + 10000);
    /* a second WQE on the 1-entry ring: prod_tail wraps to cons_head */
    post_signaled(l->a, l->ma, l->mb, 2, PVRDMA_WR_SEND);
    assert_int_equal(fv_sq_prod(l->a), 0);
    assert_int_equal(fv_sq_cons(l->a), 0);
    fg_advance(l->fg, 10000);
    assert_int_equal(fv_cq_count(l->cq), 0);
    assert_false(pvrdma_core_rnr_waiting(
                     pvrdma_table_lookup(&l->fg->core->qp_tbl, l->a->handle)));

    /* SQD now means drained: the event comes at once ... */
    memset(&at, 0, sizeof(at));
    at.qp_state = PVRDMA_QPS_SQD;
    at.en_sqd_async_notify = 1;
    assert_int_equal(fg_modify_qp(l->fg, l->a->handle, PVRDMA_QP_STATE |
                                  PVRDMA_QP_EN_SQD_ASYNC_NOTIFY, &at), 0);
    assert_int_equal(fv_async_count(l->fg, PVRDMA_EQE_TYPE_SQ_DRAINED,
                                    l->a->handle), 1);
    /* ... and a WQE posted in SQD waits for RTS */
    post_signaled(l->a, l->ma, l->mb, 3, PVRDMA_WR_RDMA_WRITE);
    fv_ring_sq(l->a);
    assert_int_equal(fv_sq_cons(l->a), 0);
    assert_int_equal(fv_cq_count(l->cq), 0);
    assert_int_equal(fv_qp_modify_state(l->a, PVRDMA_QPS_RTS), 0);
    assert_int_equal(fv_sq_cons(l->a), 1);
    assert_int_equal(fv_cq_count(l->cq), 1);
    loop_free(l);
}

/*
 * regress/rnr-retry-on-doorbell: a SEND doorbell (more WQEs posted behind
 * an RNR-stalled head) retried the head at once instead of leaving it to
 * the RNR timer, using up one rnr_retry attempt per doorbell: with
 * rnr_retry 2, two more posts ended in RNR_RETRY_EXC_ERR without the
 * responder's timer ever running.
 */
static void test_rnr_retry_on_doorbell(void **state)
{
    FvConnOpts o = {
        .access = ALL_ACCESS, .min_rnr_timer = 14 /* 1.28 ms */,
        .rnr_retry = 2, .retry_cnt = 7,
    };
    Loop *l = loop_new(16, &o);
    struct pvrdma_cqe c;
    int64_t deadline;

    (void)state;
    post_signaled(l->a, l->ma, l->mb, 1, PVRDMA_WR_SEND);
    fv_ring_sq(l->a);
    deadline = l->fg->now_ns + 1280000;
    assert_int_equal(l->fg->timer_expire, deadline);
    /* more WQEs behind the stalled head: they wait, nothing is retried */
    post_signaled(l->a, l->ma, l->mb, 2, PVRDMA_WR_SEND);
    fv_ring_sq(l->a);
    post_signaled(l->a, l->ma, l->mb, 3, PVRDMA_WR_RDMA_WRITE);
    fv_ring_sq(l->a);
    fv_ring_sq(l->a);
    assert_int_equal(fv_cq_count(l->cq), 0);
    assert_int_equal(fv_sq_cons(l->a), 0);
    assert_int_equal(fv_qp_state(l->a), PVRDMA_QPS_RTS);
    assert_int_equal(l->fg->timer_expire, deadline);
    /* first retry at the timer: stalls again, one attempt left */
    fg_advance(l->fg, 1280000);
    assert_int_equal(fv_cq_count(l->cq), 0);
    assert_int_equal(l->fg->timer_expire, l->fg->now_ns + 1280000);
    /* second retry: exhausted, then the rest is flushed */
    fg_advance(l->fg, 1280000);
    assert_true(fv_cq_poll(l->cq, &c));
    assert_int_equal(c.wr_id, 1);
    assert_int_equal(c.status, PVRDMA_WC_RNR_RETRY_EXC_ERR);
    assert_true(fv_cq_poll(l->cq, &c));
    assert_int_equal(c.wr_id, 2);
    assert_int_equal(c.status, PVRDMA_WC_WR_FLUSH_ERR);
    assert_true(fv_cq_poll(l->cq, &c));
    assert_int_equal(c.wr_id, 3);
    assert_int_equal(c.status, PVRDMA_WC_WR_FLUSH_ERR);
    assert_int_equal(fv_qp_state(l->a), PVRDMA_QPS_ERR);
    loop_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rnr_stall_sq_emptied),
        cmocka_unit_test(test_rnr_retry_on_doorbell),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
