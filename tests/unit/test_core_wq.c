/*
 * Unit tests of the core's data path against a backend that completes
 * later (pvrdma_wq.c, docs/architecture.md): the core validates and
 * resolves a WQE before a backend sees it, keeps the SQ head until the
 * completion arrives, retries RNR NAKs on its own timer, cancels and
 * flushes outstanding work on ERR, writes atomic results back, and pins
 * MR pages for as long as the MR lives.  No fabric is linked here.
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

/* A backend that keeps every request until the test completes it. */
typedef struct AsyncBe {
    unsigned submits;
    unsigned cancels;
    unsigned recv_posted;
    PvrdmaQp *qp;               /* QP of the outstanding request */
    PvrdmaSendWr wr;            /* copy of the last request */
    bool outstanding;
} AsyncBe;

static int async_submit(void *be, PvrdmaQp *qp, PvrdmaSendWr *wr)
{
    AsyncBe *b = be;

    assert_false(b->outstanding);
    b->submits++;
    b->qp = qp;
    b->wr = *wr;
    b->outstanding = true;
    return 0;
}

static void async_cancel(void *be, PvrdmaQp *qp)
{
    AsyncBe *b = be;

    assert_ptr_equal(qp, b->qp);
    b->cancels++;
    b->outstanding = false;
}

static void async_recv_posted(void *be, PvrdmaQp *qp)
{
    (void)qp;
    ((AsyncBe *)be)->recv_posted++;
}

static void async_free(void *be)
{
    g_free(be);
}

static const PvrdmaBackendOps async_ops = {
    .name = "async-test",
    .free = async_free,
    .submit = async_submit,
    .cancel = async_cancel,
    .recv_posted = async_recv_posted,
};

typedef struct Env {
    FakeGuest *fg;
    AsyncBe *be;
    uint32_t pd;
    FvCq *cq;
    FvQp *qp;
    FvMr *mr;
} Env;

static const FvConnOpts opts = {
    .access = PVRDMA_ACCESS_LOCAL_WRITE | PVRDMA_ACCESS_REMOTE_WRITE |
              PVRDMA_ACCESS_REMOTE_READ | PVRDMA_ACCESS_REMOTE_ATOMIC,
    .min_rnr_timer = 1, .rnr_retry = 7, .retry_cnt = 7,
};

static Env *env_new(bool with_backend)
{
    Env *e = g_new0(Env, 1);

    e->fg = fg_new(NULL);
    if (with_backend) {
        e->be = g_new0(AsyncBe, 1);
        pvrdma_core_set_backend(e->fg->core, &async_ops, e->be);
    }
    fg_setup(e->fg);
    assert_int_equal(fg_bind_gid(e->fg, 0), 0);
    assert_int_equal(fg_create_pd(e->fg, 0, &e->pd), 0);
    e->cq = fv_cq_new(e->fg, 0, 64);
    e->qp = fv_qp_new(e->fg, PVRDMA_QPT_RC, e->pd, e->cq, e->cq, NULL, 16,
                      2, true);
    /* Connected to some peer: the core does not care who. */
    assert_int_equal(fv_qp_rts(e->qp, 0x123456, 0, &opts), 0);
    e->mr = fv_mr_new(e->fg, e->pd, 0x10000000, 3 * 4096,
                      PVRDMA_ACCESS_LOCAL_WRITE);
    return e;
}

static void env_free(Env *e)
{
    fg_free(e->fg);
    g_free(e->cq);
    g_free(e->qp);
    g_free(e->mr);
    g_free(e);
}

static void post(Env *e, uint64_t wr_id, uint32_t op, uint64_t va,
                 uint32_t len)
{
    struct pvrdma_sq_wqe_hdr h = {
        .wr_id = wr_id, .opcode = op, .num_sge = 1,
        .send_flags = 1u << 1,  /* SIGNALED */
    };
    struct pvrdma_sge s = { .addr = va, .length = len, .lkey = e->mr->lkey };

    if (op == PVRDMA_WR_ATOMIC_FETCH_AND_ADD) {
        h.wr.atomic.remote_addr = 0x40;
        h.wr.atomic.rkey = 0x777;
        h.wr.atomic.compare_add = 5;
    } else {
        h.wr.rdma.remote_addr = 0xabc000;
        h.wr.rdma.rkey = 0x555;
    }
    fv_post_send(e->qp, &h, &s, 1);
    fv_ring_sq(e->qp);
}

static void done(Env *e, uint32_t status)
{
    PvrdmaSendResult r = { .status = status };

    assert_true(e->be->outstanding);
    e->be->outstanding = false;
    pvrdma_core_send_done(e->fg->core, e->be->qp, &r);
}

/* The request is validated and resolved; the head waits for its done. */
static void test_async_completion_in_order(void **state)
{
    Env *e = env_new(true);
    struct pvrdma_cqe c;

    (void)state;
    post(e, 1, PVRDMA_WR_RDMA_WRITE, 0x10000000 + 100, 5000);
    assert_int_equal(e->be->submits, 1);
    assert_int_equal(e->be->wr.opcode, PVRDMA_WR_RDMA_WRITE);
    assert_int_equal(e->be->wr.length, 5000);
    assert_int_equal(e->be->wr.remote_addr, 0xabc000);
    assert_int_equal(e->be->wr.rkey, 0x555);
    assert_int_equal(e->be->wr.dst_qpn, 0x123456);
    assert_int_equal(e->be->wr.src_qpn, e->qp->qpn);
    assert_int_equal(e->be->wr.local.nseg, 1);
    assert_int_equal(e->be->wr.local.total, 5000);
    assert_ptr_equal(e->be->wr.local.core, e->fg->core);
    /* Nothing consumed, nothing completed while the request is out. */
    assert_int_equal(fv_sq_cons(e->qp), 0);
    assert_false(fv_cq_poll(e->cq, &c));

    /* A second WQE waits behind the outstanding one. */
    post(e, 2, PVRDMA_WR_SEND, 0x10000000, 10);
    assert_int_equal(e->be->submits, 1);

    /* The completion arrives later: CQE 1, then WQE 2 goes out. */
    done(e, PVRDMA_WC_SUCCESS);
    assert_true(fv_cq_poll(e->cq, &c));
    assert_int_equal(c.wr_id, 1);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.opcode, PVRDMA_WC_RDMA_WRITE);
    assert_int_equal(c.byte_len, 5000);
    assert_int_equal(fv_sq_cons(e->qp), 1);
    assert_int_equal(e->be->submits, 2);
    assert_int_equal(e->be->wr.opcode, PVRDMA_WR_SEND);

    /* An error completion: CQE with the status, QP to ERR, no cancel. */
    done(e, PVRDMA_WC_REM_ACCESS_ERR);
    assert_true(fv_cq_poll(e->cq, &c));
    assert_int_equal(c.wr_id, 2);
    assert_int_equal(c.status, PVRDMA_WC_REM_ACCESS_ERR);
    assert_int_equal(c.byte_len, 0);
    assert_int_equal(fv_qp_state(e->qp), PVRDMA_QPS_ERR);
    assert_int_equal(e->be->cancels, 0);
    env_free(e);
}

/*
 * A backend with a window (qp_create raises max_outstanding): it keeps a
 * FIFO of copies of what it took, refuses on demand and may leave REG_MR
 * to its transport (PVRDMA_WC_PENDING).
 */
typedef struct WinBe {
    uint32_t window;
    unsigned submits;
    unsigned cancels;
    PvrdmaQp *qp;
    PvrdmaSendWr wr[8];         /* outstanding, oldest first */
    unsigned n;
    int refuse;                 /* next submit returns it (0: none) */
    unsigned refusals;          /* ... this many times */
    bool pend_fastreg;
    unsigned fastregs;
} WinBe;

static int win_qp_create(void *be, PvrdmaQp *qp)
{
    qp->max_outstanding = ((WinBe *)be)->window;
    return 0;
}

static int win_submit(void *be, PvrdmaQp *qp, PvrdmaSendWr *wr)
{
    WinBe *b = be;

    b->submits++;
    if (b->refusals) {
        b->refusals--;
        return b->refuse;
    }
    assert_true(b->n < G_N_ELEMENTS(b->wr));
    assert_true(b->n < b->window);
    b->qp = qp;
    b->wr[b->n++] = *wr;
    return 0;
}

static void win_cancel(void *be, PvrdmaQp *qp)
{
    WinBe *b = be;

    (void)qp;
    b->cancels++;
    b->n = 0;
}

static uint32_t win_fastreg(void *be, PvrdmaQp *qp, PvrdmaMr *mr, bool valid)
{
    WinBe *b = be;

    (void)mr;
    (void)valid;
    b->fastregs++;
    if (!b->pend_fastreg) {
        return PVRDMA_WC_SUCCESS;
    }
    /* It takes a place in the FIFO like a request (an empty one). */
    b->qp = qp;
    memset(&b->wr[b->n++], 0, sizeof(b->wr[0]));
    return PVRDMA_WC_PENDING;
}

static const PvrdmaBackendOps win_ops = {
    .name = "window-test",
    .free = async_free,
    .qp_create = win_qp_create,
    .submit = win_submit,
    .cancel = win_cancel,
    .mr_fastreg = win_fastreg,
};

typedef struct WinEnv {
    FakeGuest *fg;
    WinBe *be;
    uint32_t pd;
    FvCq *cq;
    FvQp *qp;
    FvMr *mr;
} WinEnv;

static WinEnv *win_new(uint32_t window)
{
    WinEnv *e = g_new0(WinEnv, 1);

    e->fg = fg_new(NULL);
    e->be = g_new0(WinBe, 1);
    e->be->window = window;
    pvrdma_core_set_backend(e->fg->core, &win_ops, e->be);
    fg_setup(e->fg);
    assert_int_equal(fg_bind_gid(e->fg, 0), 0);
    assert_int_equal(fg_create_pd(e->fg, 0, &e->pd), 0);
    e->cq = fv_cq_new(e->fg, 0, 64);
    e->qp = fv_qp_new(e->fg, PVRDMA_QPT_RC, e->pd, e->cq, e->cq, NULL, 16,
                      2, true);
    assert_int_equal(fv_qp_rts(e->qp, 0x123456, 0, &opts), 0);
    e->mr = fv_mr_new(e->fg, e->pd, 0x10000000, 4096,
                      PVRDMA_ACCESS_LOCAL_WRITE);
    return e;
}

static void win_free(WinEnv *e)
{
    fg_free(e->fg);
    g_free(e->cq);
    g_free(e->qp);
    g_free(e->mr);
    g_free(e);
}

/* Post (no doorbell) a signaled WQE; @lkey 0: the MR's; @flags extra. */
static void win_post(WinEnv *e, uint64_t wr_id, uint32_t op, uint32_t len,
                     uint32_t lkey, uint32_t flags)
{
    struct pvrdma_sq_wqe_hdr h = {
        .wr_id = wr_id, .opcode = op, .num_sge = 1,
        .send_flags = PVRDMA_WR_FLAG_SIGNALED | flags,
    };
    struct pvrdma_sge s = {
        .addr = 0x10000000, .length = len,
        .lkey = lkey ? lkey : e->mr->lkey,
    };

    h.wr.rdma.remote_addr = 0xabc000 + wr_id;
    h.wr.rdma.rkey = 0x555;
    fv_post_send(e->qp, &h, &s, 1);
}

/* The backend completes its oldest with @status. */
static void win_done(WinEnv *e, uint32_t status)
{
    PvrdmaSendResult r = { .status = status };

    assert_true(e->be->n > 0);
    memmove(&e->be->wr[0], &e->be->wr[1],
            --e->be->n * sizeof(e->be->wr[0]));
    pvrdma_core_send_done(e->fg->core, e->be->qp, &r);
}

static void win_expect(WinEnv *e, uint64_t wr_id, uint32_t status)
{
    struct pvrdma_cqe c;

    assert_true(fv_cq_poll(e->cq, &c));
    assert_int_equal(c.wr_id, wr_id);
    assert_int_equal(c.status, status);
}

/*
 * Several requests of a QP are out at once, up to the backend's window,
 * in order; each completion consumes the head, posts its CQE and lets
 * the next WQE out.
 */
static void test_window_pipelines(void **state)
{
    WinEnv *e = win_new(4);
    struct pvrdma_cqe c;
    unsigned i;

    (void)state;
    for (i = 1; i <= 6; i++) {
        win_post(e, i, PVRDMA_WR_RDMA_WRITE, 100 + i, 0, 0);
    }
    fv_ring_sq(e->qp);
    assert_int_equal(e->be->submits, 4);
    for (i = 0; i < 4; i++) {
        assert_int_equal(e->be->wr[i].remote_addr, 0xabc000 + i + 1);
        assert_int_equal(e->be->wr[i].length, 100 + i + 1);
    }
    assert_int_equal(fv_sq_cons(e->qp), 0);
    assert_false(fv_cq_poll(e->cq, &c));
    /* A doorbell with the window full changes nothing. */
    fv_ring_sq(e->qp);
    assert_int_equal(e->be->submits, 4);

    win_done(e, PVRDMA_WC_SUCCESS);
    assert_true(fv_cq_poll(e->cq, &c));
    assert_int_equal(c.wr_id, 1);
    assert_int_equal(c.byte_len, 101);
    assert_int_equal(fv_sq_cons(e->qp), 1);
    assert_int_equal(e->be->submits, 5);
    assert_int_equal(e->be->wr[3].remote_addr, 0xabc000 + 5);
    for (i = 2; i <= 6; i++) {
        win_done(e, PVRDMA_WC_SUCCESS);
        assert_true(fv_cq_poll(e->cq, &c));
        assert_int_equal(c.wr_id, i);
        assert_int_equal(c.byte_len, 100 + i);
    }
    assert_int_equal(e->be->submits, 6);
    assert_int_equal(e->be->n, 0);
    assert_int_equal(fv_sq_cons(e->qp), 6);
    assert_false(fv_cq_poll(e->cq, &c));
    /* The ring wraps (16 slots) with requests out across the wrap. */
    for (i = 7; i <= 40; i++) {
        win_post(e, i, PVRDMA_WR_SEND, 8, 0, 0);
        fv_ring_sq(e->qp);
        if (e->be->n == 4) {
            win_done(e, PVRDMA_WC_SUCCESS);
            win_expect(e, i - 3, PVRDMA_WC_SUCCESS);
        }
    }
    while (e->be->n) {
        win_done(e, PVRDMA_WC_SUCCESS);
    }
    for (i = 38; i <= 40; i++) {
        win_expect(e, i, PVRDMA_WC_SUCCESS);
    }
    assert_int_equal(e->be->submits, 40);
    win_free(e);
}

/*
 * What must not overtake the requests before it waits until they are
 * done: a WQE failing in the core (its error CQE after theirs), a fenced
 * one, and a local operation; an error completion of one request moves
 * the QP to ERR, cancels the rest and flushes them in order.
 */
static void test_window_order_and_errors(void **state)
{
    WinEnv *e = win_new(4);

    (void)state;
    win_post(e, 1, PVRDMA_WR_RDMA_WRITE, 10, 0, 0);
    win_post(e, 2, PVRDMA_WR_RDMA_WRITE, 10, 0, 0);
    win_post(e, 3, PVRDMA_WR_RDMA_WRITE, 10, 0xdead00, 0);   /* bad lkey */
    win_post(e, 4, PVRDMA_WR_RDMA_WRITE, 10, 0, 0);
    fv_ring_sq(e->qp);
    assert_int_equal(e->be->submits, 2);
    win_done(e, PVRDMA_WC_SUCCESS);
    win_expect(e, 1, PVRDMA_WC_SUCCESS);
    assert_int_equal(e->be->submits, 2);
    win_done(e, PVRDMA_WC_SUCCESS);
    win_expect(e, 2, PVRDMA_WC_SUCCESS);
    win_expect(e, 3, PVRDMA_WC_LOC_PROT_ERR);
    win_expect(e, 4, PVRDMA_WC_WR_FLUSH_ERR);
    assert_int_equal(fv_qp_state(e->qp), PVRDMA_QPS_ERR);
    assert_int_equal(e->be->submits, 2);
    win_free(e);

    /* A fenced WQE goes out when the window is empty. */
    e = win_new(4);
    win_post(e, 1, PVRDMA_WR_RDMA_READ, 10, 0, 0);
    win_post(e, 2, PVRDMA_WR_SEND, 10, 0, PVRDMA_WR_FLAG_FENCE);
    win_post(e, 3, PVRDMA_WR_SEND, 10, 0, 0);
    fv_ring_sq(e->qp);
    assert_int_equal(e->be->submits, 1);
    win_done(e, PVRDMA_WC_SUCCESS);
    assert_int_equal(e->be->submits, 3);
    assert_int_equal(e->be->wr[0].opcode, PVRDMA_WR_SEND);

    /* An error on the oldest: ERR, the others cancelled and flushed. */
    win_done(e, PVRDMA_WC_REM_ACCESS_ERR);
    win_expect(e, 1, PVRDMA_WC_SUCCESS);
    win_expect(e, 2, PVRDMA_WC_REM_ACCESS_ERR);
    win_expect(e, 3, PVRDMA_WC_WR_FLUSH_ERR);
    assert_int_equal(e->be->cancels, 1);
    assert_int_equal(e->be->n, 0);
    assert_int_equal(fv_qp_state(e->qp), PVRDMA_QPS_ERR);
    win_free(e);
}

/*
 * Backpressure: -EAGAIN takes the WQE back until the next completion;
 * another refusal behind outstanding requests waits until they are all
 * done and completes with its error (LOC_PROT_ERR for -EFAULT) only if
 * the backend refuses it again; refused with nothing out, it completes
 * at once.  Fast-reg operations the backend leaves to its transport
 * (PENDING) complete in their turn, and wait for what is before them.
 */
static void test_window_backpressure_and_pending(void **state)
{
    WinEnv *e = win_new(4);
    struct pvrdma_cqe c;
    FvFrmr *f;

    (void)state;
    win_post(e, 1, PVRDMA_WR_SEND, 10, 0, 0);
    fv_ring_sq(e->qp);
    e->be->refuse = -EAGAIN;
    e->be->refusals = 1;
    win_post(e, 2, PVRDMA_WR_SEND, 10, 0, 0);
    win_post(e, 3, PVRDMA_WR_SEND, 10, 0, 0);
    fv_ring_sq(e->qp);
    assert_int_equal(e->be->submits, 2);    /* 1, and 2 refused */
    assert_int_equal(e->be->n, 1);
    win_done(e, PVRDMA_WC_SUCCESS);
    win_expect(e, 1, PVRDMA_WC_SUCCESS);
    assert_int_equal(e->be->submits, 4);    /* 2 and 3 now */
    assert_int_equal(e->be->n, 2);
    win_done(e, PVRDMA_WC_SUCCESS);
    win_done(e, PVRDMA_WC_SUCCESS);
    win_expect(e, 2, PVRDMA_WC_SUCCESS);
    win_expect(e, 3, PVRDMA_WC_SUCCESS);

    /* -EFAULT behind one out: tried again once it is done, then fails. */
    win_post(e, 4, PVRDMA_WR_SEND, 10, 0, 0);
    fv_ring_sq(e->qp);
    e->be->refuse = -EFAULT;
    e->be->refusals = 2;
    win_post(e, 5, PVRDMA_WR_SEND, 10, 0, 0);
    fv_ring_sq(e->qp);
    assert_int_equal(e->be->submits, 6);
    win_done(e, PVRDMA_WC_SUCCESS);
    win_expect(e, 4, PVRDMA_WC_SUCCESS);
    win_expect(e, 5, PVRDMA_WC_LOC_PROT_ERR);
    assert_int_equal(e->be->submits, 7);
    assert_int_equal(fv_qp_state(e->qp), PVRDMA_QPS_ERR);
    win_free(e);

    /* REG_MR behind a SEND waits, then is out as PENDING; a SEND follows. */
    e = win_new(4);
    e->be->pend_fastreg = true;
    f = fv_frmr_new(e->fg, e->pd, 4);
    win_post(e, 1, PVRDMA_WR_SEND, 10, 0, 0);
    fv_ring_sq(e->qp);
    fv_post_reg_mr(e->qp, f, 2, 0x7000000, 1, 100,
                   PVRDMA_ACCESS_LOCAL_WRITE | PVRDMA_ACCESS_REMOTE_WRITE,
                   (f->key & ~0xffu) | 0x42);
    assert_int_equal(e->be->fastregs, 0);
    win_post(e, 3, PVRDMA_WR_SEND, 10, 0, 0);
    fv_ring_sq(e->qp);
    assert_int_equal(e->be->submits, 1);
    win_done(e, PVRDMA_WC_SUCCESS);
    win_expect(e, 1, PVRDMA_WC_SUCCESS);
    assert_int_equal(e->be->fastregs, 1);
    assert_int_equal(e->be->submits, 2);    /* SEND 3 behind REG_MR */
    assert_int_equal(e->be->n, 2);
    /* Not complete before the transport says so. */
    assert_false(fv_cq_poll(e->cq, &c));
    win_done(e, PVRDMA_WC_SUCCESS);
    assert_true(fv_cq_poll(e->cq, &c));
    assert_int_equal(c.wr_id, 2);
    assert_int_equal(c.opcode, PVRDMA_WC_FAST_REG_MR);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    win_done(e, PVRDMA_WC_SUCCESS);
    win_expect(e, 3, PVRDMA_WC_SUCCESS);
    g_free(f);
    win_free(e);
}

/*
 * RESIZE_CQ (project extension): the CQEs not yet polled move to the new
 * ring in order, new ones follow there; a shrink they do not fit, a broken
 * cons_head, the VMware layout and bad values are refused with the CQ
 * left on its ring; the pinned-pages count follows the ring.
 */
static void test_resize_cq(void **state)
{
    Env *e = env_new(true);
    struct pvrdma_cmd_resize_cq c = { .hdr.cmd = PVRDMA_CMD_RESIZE_CQ };
    union pvrdma_cmd_resp r;
    struct pvrdma_cqe cqe;
    uint64_t pinned;
    uint32_t i;

    (void)state;
    assert_true(fg_caps(e->fg)->ex_comp_mask & PVRDMA_EX_CAP_RESIZE_CQ);
    for (i = 1; i <= 3; i++) {
        post(e, i, PVRDMA_WR_RDMA_WRITE, 0x10000000, 8);
        done(e, PVRDMA_WC_SUCCESS);
    }
    assert_true(fv_cq_poll(e->cq, &cqe));
    assert_int_equal(cqe.wr_id, 1);

    /* Two pending do not fit one slot: refused, nothing moves. */
    pinned = e->fg->core->pinned_pages;
    assert_int_equal(fv_cq_resize(e->cq, 1), -EINVAL);
    assert_int_equal(e->fg->core->pinned_pages, pinned);
    assert_int_equal(fv_cq_count(e->cq), 2);

    /* The VMware layout (no ring), bad handle, bad size: refused. */
    c.cq_handle = e->cq->handle;
    c.cqe = 128;
    assert_int_equal(fg_cmd(e->fg, &c, sizeof(c), &r), -EINVAL);
    assert_int_equal(r.resize_cq_resp.cqe, 0);
    assert_int_equal(fv_cq_count(e->cq), 2);
    {
        FvCq bad = *e->cq;

        bad.handle = 77;
        assert_int_equal(fv_cq_resize(&bad, 128), -EINVAL);
        bad.handle = e->cq->handle;
        assert_int_equal(fv_cq_resize(&bad, 96), -EINVAL);
    }
    {
        struct pvrdma_cmd_resize_cq_ex x = { .hdr.cmd = PVRDMA_CMD_RESIZE_CQ };
        uint64_t pg[2];

        x.cq_handle = e->cq->handle;
        x.cqe = 1u << 30;       /* beyond max_cqe */
        x.nchunks = 2;
        x.pdir_dma = fg_alloc_paged(e->fg, 2, pg);
        assert_int_equal(fg_cmd(e->fg, &x, sizeof(x), &r), -EINVAL);
        x.cqe = 64;             /* 64 CQEs need 1 + 1 pages, not 1 */
        x.nchunks = 1;
        assert_int_equal(fg_cmd(e->fg, &x, sizeof(x), &r), -EINVAL);
        x.nchunks = 2;          /* reserved bytes must be zero */
        x.reserved[0] = 1;
        assert_int_equal(fg_cmd(e->fg, &x, sizeof(x), &r), -EINVAL);
    }
    assert_int_equal(e->fg->core->pinned_pages, pinned);

    /* Grow: CQEs 2 and 3 first in the new ring, then CQE 4. */
    assert_int_equal(fv_cq_resize(e->cq, 256), 0);
    assert_int_equal(e->fg->core->pinned_pages,
                     pinned - 2 + e->cq->npages);
    assert_int_equal(fv_cq_count(e->cq), 2);
    post(e, 4, PVRDMA_WR_SEND, 0x10000000, 8);
    done(e, PVRDMA_WC_SUCCESS);
    for (i = 2; i <= 4; i++) {
        assert_true(fv_cq_poll(e->cq, &cqe));
        assert_int_equal(cqe.wr_id, i);
        assert_int_equal(cqe.status, PVRDMA_WC_SUCCESS);
    }
    assert_false(fv_cq_poll(e->cq, &cqe));

    /* Shrink an empty CQ to one entry; it still takes a CQE. */
    assert_int_equal(fv_cq_resize(e->cq, 1), 0);
    post(e, 5, PVRDMA_WR_SEND, 0x10000000, 8);
    done(e, PVRDMA_WC_SUCCESS);
    assert_true(fv_cq_poll(e->cq, &cqe));
    assert_int_equal(cqe.wr_id, 5);

    /* A cons_head out of range: refused, the CQ stays where it is. */
    fv_cq_set_cons(e->cq, 0xFFFF);
    assert_int_equal(fv_cq_resize(e->cq, 64), -EINVAL);
    assert_int_equal(e->cq->n, 1);
    env_free(e);
}

/* The core, not the backend, times RNR retries and resubmits the head. */
static void test_async_rnr_retry(void **state)
{
    Env *e = env_new(true);
    PvrdmaSendResult rnr = { .rnr = true, .rnr_timer = 1 };   /* 10 us */
    struct pvrdma_cqe c;

    (void)state;
    post(e, 7, PVRDMA_WR_SEND, 0x10000000, 64);
    assert_int_equal(e->be->submits, 1);
    e->be->outstanding = false;
    pvrdma_core_send_done(e->fg->core, e->be->qp, &rnr);
    assert_true(pvrdma_core_rnr_waiting(e->be->qp));
    assert_int_equal(e->fg->timer_expire, e->fg->now_ns + 10000);
    assert_false(fv_cq_poll(e->cq, &c));
    /* Not before the deadline, not because of a SEND doorbell. */
    fv_ring_sq(e->qp);
    fg_advance(e->fg, 9999);
    assert_int_equal(e->be->submits, 1);
    fg_advance(e->fg, 1);
    assert_int_equal(e->be->submits, 2);
    assert_int_equal(e->be->wr.length, 64);
    /* traced: one wait, ended by its time, not by a receive */
    assert_int_equal(e->fg->rnr_waits, 1);
    assert_int_equal(e->fg->rnr_timeouts, 1);
    assert_int_equal(e->fg->rnr_kicks, 0);
    done(e, PVRDMA_WC_SUCCESS);
    assert_true(fv_cq_poll(e->cq, &c));
    assert_int_equal(c.wr_id, 7);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_false(pvrdma_core_rnr_waiting(e->be->qp));
    env_free(e);
}

/* ERR while a request is out: cancelled, then flushed like any WQE. */
static void test_async_cancel_on_error(void **state)
{
    Env *e = env_new(true);
    struct pvrdma_cqe c;

    (void)state;
    post(e, 1, PVRDMA_WR_SEND, 0x10000000, 8);
    post(e, 2, PVRDMA_WR_SEND, 0x10000000, 8);
    assert_int_equal(e->be->submits, 1);
    assert_int_equal(fv_qp_modify_state(e->qp, PVRDMA_QPS_ERR), 0);
    assert_int_equal(e->be->cancels, 1);
    assert_false(e->be->outstanding);
    assert_true(fv_cq_poll(e->cq, &c));
    assert_int_equal(c.wr_id, 1);
    assert_int_equal(c.status, PVRDMA_WC_WR_FLUSH_ERR);
    assert_true(fv_cq_poll(e->cq, &c));
    assert_int_equal(c.wr_id, 2);
    assert_int_equal(c.status, PVRDMA_WC_WR_FLUSH_ERR);
    assert_false(fv_cq_poll(e->cq, &c));
    /* Destroying a QP with a request out cancels it too. */
    assert_int_equal(fv_qp_modify_state(e->qp, PVRDMA_QPS_RESET), 0);
    fv_qp_zero_indexes(e->qp);
    assert_int_equal(fv_qp_rts(e->qp, 0x123456, 0, &opts), 0);
    post(e, 3, PVRDMA_WR_SEND, 0x10000000, 8);
    assert_int_equal(e->be->submits, 2);
    assert_int_equal(fg_destroy_qp(e->fg, e->qp->handle), 0);
    assert_int_equal(e->be->cancels, 2);
    env_free(e);
}

/* Local errors never reach the backend; atomics get their value back. */
static void test_validation_and_atomic_writeback(void **state)
{
    Env *e = env_new(true);
    PvrdmaSendResult r = { .status = PVRDMA_WC_SUCCESS,
                           .atomic_orig = 0x1122334455667788ull };
    struct pvrdma_sge bad = { .addr = 0x10000000, .length = 8,
                              .lkey = e->mr->lkey ^ 1 };
    struct pvrdma_sq_wqe_hdr h = { .wr_id = 9, .opcode = PVRDMA_WR_SEND,
                                   .num_sge = 1 };
    struct pvrdma_cqe c;
    uint64_t v;

    (void)state;
    fv_post_send(e->qp, &h, &bad, 1);
    fv_ring_sq(e->qp);
    assert_int_equal(e->be->submits, 0);
    assert_true(fv_cq_poll(e->cq, &c));
    assert_int_equal(c.status, PVRDMA_WC_LOC_PROT_ERR);
    assert_int_equal(fv_qp_modify_state(e->qp, PVRDMA_QPS_RESET), 0);
    fv_qp_zero_indexes(e->qp);
    assert_int_equal(fv_qp_rts(e->qp, 0x123456, 0, &opts), 0);
    fv_cq_poll(e->cq, &c);      /* nothing else was queued */

    post(e, 10, PVRDMA_WR_ATOMIC_FETCH_AND_ADD, 0x10000000 + 4096 - 4, 8);
    assert_int_equal(e->be->submits, 1);
    assert_int_equal(e->be->wr.compare_add, 5);
    assert_int_equal(e->be->wr.length, 8);
    /* The local buffer straddles two non-contiguous pages. */
    assert_int_equal(e->be->wr.local.nseg, 1);
    e->be->outstanding = false;
    pvrdma_core_send_done(e->fg->core, e->be->qp, &r);
    assert_true(fv_cq_poll(e->cq, &c));
    assert_int_equal(c.wr_id, 10);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.opcode, PVRDMA_WC_FETCH_ADD);
    assert_int_equal(c.byte_len, 8);
    memcpy(&v, fv_mr_ptr(e->mr, 0x10000000 + 4096 - 4), 4);
    memcpy((uint8_t *)&v + 4, fv_mr_ptr(e->mr, 0x10000000 + 4096), 4);
    assert_int_equal(GUINT64_FROM_LE(v), 0x1122334455667788ull);
    env_free(e);
}

/* Without a backend attached, nothing leaves the port. */
static void test_no_backend(void **state)
{
    Env *e = env_new(false);
    struct pvrdma_cqe c;

    (void)state;
    post(e, 1, PVRDMA_WR_SEND, 0x10000000, 8);
    assert_true(fv_cq_poll(e->cq, &c));
    assert_int_equal(c.wr_id, 1);
    assert_int_equal(c.status, PVRDMA_WC_RETRY_EXC_ERR);
    env_free(e);
}

/* Long-lived pins: every page mapped once, released with the MR. */
static void test_mr_pin(void **state)
{
    Env *e = env_new(true);
    PvrdmaCore *core = e->fg->core;
    PvrdmaMr *mr = pvrdma_table_lookup(&core->mr_tbl, e->mr->handle);
    PvrdmaMr *dma;
    uint32_t dma_handle;
    uint64_t pinned = core->pinned_pages;
    unsigned maps = e->fg->maps, unmaps = e->fg->unmaps;

    (void)state;
    assert_non_null(mr);
    assert_int_equal(pvrdma_core_mr_pin(core, mr), 0);
    assert_int_equal(e->fg->maps, maps + 3);
    /* The pages were charged at CREATE_MR; pinning charges nothing more */
    assert_int_equal(core->pinned_pages, pinned);
    *(volatile uint8_t *)mr->pinned[1] = 0x5a;
    assert_int_equal(*fv_mr_ptr(e->mr, 0x10000000 + 4096), 0x5a);
    /* Pinning twice is one pin. */
    assert_int_equal(pvrdma_core_mr_pin(core, mr), 0);
    assert_int_equal(e->fg->maps, maps + 3);
    /* Deregistration releases it. */
    assert_int_equal(fg_destroy_mr(e->fg, e->mr->handle), 0);
    assert_int_equal(e->fg->unmaps, unmaps + 3);

    /* DMA MRs have no pages to pin. */
    assert_int_equal(fg_create_dma_mr(e->fg, e->pd, &dma_handle, NULL), 0);
    dma = pvrdma_table_lookup(&core->mr_tbl, dma_handle);
    assert_int_equal(pvrdma_core_mr_pin(core, dma), -EINVAL);

    /* A page that is not RAM: refused, nothing stays mapped. */
    g_free(e->mr);
    e->mr = fv_mr_new(e->fg, e->pd, 0x20000000, 2 * 4096,
                      PVRDMA_ACCESS_LOCAL_WRITE);
    mr = pvrdma_table_lookup(&core->mr_tbl, e->mr->handle);
    e->fg->mmio_base = mr->pages[1];
    e->fg->mmio_len = 4096;
    maps = e->fg->maps;
    unmaps = e->fg->unmaps;
    assert_int_equal(pvrdma_core_mr_pin(core, mr), -EFAULT);
    assert_null(mr->pinned);
    assert_int_equal(e->fg->maps - maps, e->fg->unmaps - unmaps);
    e->fg->mmio_len = 0;

    /* Reset releases pins too. */
    assert_int_equal(pvrdma_core_mr_pin(core, mr), 0);
    fg_reg_write(e->fg, PVRDMA_REG_CTL, PVRDMA_DEVICE_CTL_RESET);
    assert_int_equal(e->fg->maps, e->fg->unmaps);
    env_free(e);
}

/*
 * Pins map guest-physically contiguous pages with one mapping per run
 * (6 pages: 4 contiguous, a gap, 2 contiguous -> 2 maps); a mapping that
 * comes back short (map_max) ends its run early and the rest is mapped
 * on; every page's pointer is right and unpinning pairs every map.
 */
static void test_mr_pin_runs(void **state)
{
    Env *e = env_new(true);
    PvrdmaCore *core = e->fg->core;
    struct pvrdma_cmd_create_mr c = { .hdr.cmd = PVRDMA_CMD_CREATE_MR };
    union pvrdma_cmd_resp r;
    uint64_t pages[6], a = fg_alloc_pages(e->fg, 7);
    unsigned maps, unmaps, i, round;
    PvrdmaMr *mr;

    (void)state;
    for (i = 0; i < 6; i++) {
        pages[i] = a + (i < 4 ? i : i + 1) * 4096ull;
    }
    c.start = 0x30000000;
    c.length = 6 * 4096;
    c.pdir_dma = fg_build_pdir(e->fg, pages, 6);
    c.pd_handle = e->pd;
    c.access_flags = PVRDMA_ACCESS_LOCAL_WRITE;
    c.nchunks = 6;
    assert_int_equal(fg_cmd(e->fg, &c, sizeof(c), &r), 0);
    mr = pvrdma_table_lookup(&core->mr_tbl, r.create_mr_resp.mr_handle);
    assert_non_null(mr);
    for (round = 0; round < 2; round++) {
        /* Round 1: mappings of at most 3 pages: 3 + 1, then 2. */
        e->fg->map_max = round ? 3 * 4096 : 0;
        maps = e->fg->maps;
        unmaps = e->fg->unmaps;
        assert_int_equal(pvrdma_core_mr_pin(core, mr), 0);
        assert_int_equal(e->fg->maps - maps, round ? 3 : 2);
        for (i = 0; i < 6; i++) {
            assert_ptr_equal(mr->pinned[i], fg_ptr(e->fg, pages[i]));
        }
        pvrdma_core_mr_unpin(core, mr);
        assert_null(mr->pinned);
        assert_int_equal(e->fg->unmaps - unmaps, e->fg->maps - maps);
    }
    e->fg->map_max = 0;
    env_free(e);
}

/*
 * Contiguous guest pages make one run; a gap, the end, 1 MiB or what the
 * caller wants stop it.
 */
static void test_seg_runs(void **state)
{
    uint64_t pages[300];
    PvrdmaSeg seg = { .pages = pages, .npages = 300, .base = 0x1800 };
    uint64_t bus, run;
    unsigned i;

    (void)state;
    for (i = 0; i < 300; i++) {
        pages[i] = 0x100000 + i * 4096ull;
    }
    pages[3] = 0x900000;                    /* a gap after page 2 */
    /* MR starts at 0x1800 (offset 0x800 in page 0); 3 pages, then a gap */
    seg.va = 0x1800;
    seg.len = 300 * 4096ull - 0x800;
    assert_true(pvrdma_seg_xlate(&seg, 0, &bus, &run));
    assert_int_equal(bus, 0x100800);
    assert_int_equal(run, 3 * 4096 - 0x800);
    assert_true(pvrdma_seg_xlate(&seg, run, &bus, &run));
    assert_int_equal(bus, 0x900000);
    assert_int_equal(run, 4096);
    /* from page 4 on: contiguous, capped at 1 MiB per run */
    assert_true(pvrdma_seg_xlate(&seg, 4 * 4096 - 0x800, &bus, &run));
    assert_int_equal(bus, 0x100000 + 4 * 4096);
    assert_int_equal(run, 1u << 20);
    /*
     * A caller that wants less stops the walk at the first page that
     * covers it (a run of 1 MiB is not walked for a 4 KiB copy) but
     * never returns less than the page at hand.
     */
    assert_true(pvrdma_seg_xlate_upto(&seg, 4 * 4096 - 0x800, 4096, &bus,
                                      &run));
    assert_int_equal(bus, 0x100000 + 4 * 4096);
    assert_int_equal(run, 4096);
    assert_true(pvrdma_seg_xlate_upto(&seg, 4 * 4096 - 0x800 + 100,
                                      2 * 4096, &bus, &run));
    assert_int_equal(run, 3 * 4096 - 100);
    assert_true(pvrdma_seg_xlate_upto(&seg, 4 * 4096 - 0x800 + 100, 1,
                                      &bus, &run));
    assert_int_equal(run, 4096 - 100);
    /* the segment's end stops a run */
    seg.len = 5 * 4096 - 0x800 - 100;
    assert_true(pvrdma_seg_xlate(&seg, 4 * 4096 - 0x800, &bus, &run));
    assert_int_equal(run, 4096 - 100);
    assert_false(pvrdma_seg_xlate(&seg, seg.len, &bus, &run));
}

/* A paged segment over @pages (MR at va 0x10000), bytes [off, off + len). */
static PvrdmaSeg paged_seg(const uint64_t *pages, uint32_t npages,
                           uint64_t off, uint64_t len)
{
    return (PvrdmaSeg){ .va = 0x10000 + off, .len = len, .pages = pages,
                        .npages = npages, .base = 0x10000 };
}

static uint8_t sgl_byte(uint64_t i)
{
    return (uint8_t)(i * 7 + (i >> 12) + 1);
}

/*
 * pvrdma_sgl_copy between two scattered SGLs of one guest (a paged
 * segment then a DMA-MR segment, against one paged segment at another
 * page offset): whole-RAM windows, 8 KiB windows, no windows with short
 * mappings, nothing mappable (bounced).  Every byte arrives and nothing
 * around it changes; with windows, exactly the destination's pages are
 * reported dirty.  Then each side faulting: past its end, and in memory
 * that is not RAM (with and without windows on the other side), which
 * names that side.
 */
static void test_sgl_copy(void **state)
{
    const uint64_t len = 9 * 4096 + 300;
    uint64_t spages[6], dpages[12], dma;
    unsigned mode;

    (void)state;
    for (mode = 0; mode < 4; mode++) {
        FakeGuest *fg = fg_new(NULL);
        PvrdmaSgl src = { .core = fg->core, .nseg = 2 };
        PvrdmaSgl dst = { .core = fg->core, .nseg = 1 };
        uint8_t *d;
        uint64_t i;

        fg_setup(fg);
        fg->windows = mode < 2;
        fg->win_size = mode == 1 ? 8192 : 0;
        fg->map_max = mode == 2 ? 77 : 0;
        fg->map_refuse = mode == 3;
        fg_alloc_paged(fg, 6, spages);
        fg_alloc_paged(fg, 12, dpages);
        dma = fg_alloc_pages(fg, 5);
        /* source: 5 pages from offset 0x123, then the DMA pages */
        src.seg[0] = paged_seg(spages, 6, 0x123, 5 * 4096);
        src.seg[1] = (PvrdmaSeg){ .va = dma + 10, .len = 5 * 4096 - 10 };
        src.total = src.seg[0].len + src.seg[1].len;
        dst.seg[0] = paged_seg(dpages, 12, 0x800, 11 * 4096);
        dst.total = dst.seg[0].len;
        for (i = 0; i < len + 64; i++) {
            uint64_t o = 0x123 + i, bus;

            bus = i < src.seg[0].len ? spages[o >> 12] + (o & 4095) :
                  dma + 10 + (i - src.seg[0].len);
            *(uint8_t *)fg_ptr(fg, bus) = sgl_byte(i);
        }
        for (i = 0; i < 12; i++) {
            memset(fg_ptr(fg, dpages[i]), 0xee, 4096);
        }
        memset(fg->dirty, 0, FG_MEM_SIZE / FG_PAGE);
        /* source byte 64 on, to destination byte 1000 on */
        assert_int_equal(pvrdma_sgl_copy(&dst, 1000, &src, 64, len),
                         PVRDMA_COPY_OK);
        for (i = 0; i < 11 * 4096 + 0x800; i++) {
            uint64_t o = i >= 0x800 + 1000 && i < 0x800 + 1000 + len ?
                         i - (0x800 + 1000) + 64 : UINT64_MAX;

            d = fg_ptr(fg, dpages[i >> 12] + (i & 4095));
            assert_int_equal(*d, o == UINT64_MAX ? 0xee : sgl_byte(o));
        }
        for (i = 0; i < FG_MEM_SIZE / FG_PAGE; i++) {
            uint64_t pg = FG_MEM_BASE + i * FG_PAGE;
            bool want = false;

            for (unsigned k = 0; k < 12 && fg->windows; k++) {
                uint64_t lo = k * 4096, hi = lo + 4096;

                want |= dpages[k] == pg && hi > 0x800 + 1000 &&
                        lo < 0x800 + 1000 + len;
            }
            assert_int_equal(fg->dirty[i], want);
        }

        /* past either end */
        assert_int_equal(pvrdma_sgl_copy(&dst, 0, &src, src.total - 100,
                                         200), PVRDMA_COPY_SRC_FAULT);
        assert_int_equal(pvrdma_sgl_copy(&dst, dst.total - 100, &src, 0,
                                         200), PVRDMA_COPY_DST_FAULT);
        /* memory that is not RAM on one side */
        src.seg[1].va = FG_BAD_ADDR;
        assert_int_equal(pvrdma_sgl_copy(&dst, 0, &src, 0, src.total),
                         PVRDMA_COPY_SRC_FAULT);
        dst.seg[0] = (PvrdmaSeg){ .va = FG_BAD_ADDR, .len = 4096 };
        dst.total = 4096;
        assert_int_equal(pvrdma_sgl_copy(&dst, 0, &src, 0, 4096),
                         PVRDMA_COPY_DST_FAULT);
        fg_free(fg);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_async_completion_in_order),
        cmocka_unit_test(test_window_pipelines),
        cmocka_unit_test(test_window_order_and_errors),
        cmocka_unit_test(test_window_backpressure_and_pending),
        cmocka_unit_test(test_resize_cq),
        cmocka_unit_test(test_async_rnr_retry),
        cmocka_unit_test(test_async_cancel_on_error),
        cmocka_unit_test(test_validation_and_atomic_writeback),
        cmocka_unit_test(test_no_backend),
        cmocka_unit_test(test_mr_pin),
        cmocka_unit_test(test_mr_pin_runs),
        cmocka_unit_test(test_seg_runs),
        cmocka_unit_test(test_sgl_copy),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
