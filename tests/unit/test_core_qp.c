/*
 * Unit tests: PVRDMA QP and SRQ commands (spec §5.3, §5.4, §8.1):
 * CREATE/MODIFY/QUERY/DESTROY_QP with the IB state machine, and
 * CREATE/MODIFY/QUERY/DESTROY_SRQ.
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
#include "pvrdma_core_int.h"
#include "pvrdma_core_int.h"

typedef struct Env {
    FakeGuest *fg;
    uint32_t pd, cq, cq2, uc, upd, ucq;
} Env;

static Env *env_new_cfg(const PvrdmaCoreConfig *cfg, uint32_t version)
{
    Env *e = g_new0(Env, 1);

    e->fg = fg_new(cfg);
    if (version == 20) {
        fg_setup(e->fg);
    } else {
        assert_int_equal(fg_load_dsr_ex(e->fg, version, 4, 4), 0);
        fg_reg_write(e->fg, PVRDMA_REG_IMR, 0);
    }
    assert_int_equal(fg_create_pd(e->fg, 0, &e->pd), 0);
    assert_int_equal(fg_create_cq(e->fg, 0, 64, &e->cq), 0);
    assert_int_equal(fg_create_cq(e->fg, 0, 64, &e->cq2), 0);
    assert_int_equal(fg_create_uc(e->fg, 2, &e->uc), 0);
    assert_int_equal(fg_create_pd(e->fg, e->uc, &e->upd), 0);
    assert_int_equal(fg_create_cq(e->fg, e->uc, 64, &e->ucq), 0);
    assert_int_equal(fg_bind_gid(e->fg, 0), 0);
    return e;
}

static Env *env_new(void)
{
    return env_new_cfg(NULL, 20);
}

static void env_free(Env *e)
{
    fg_free(e->fg);
    g_free(e);
}

static int create_qp(Env *e, struct pvrdma_cmd_create_qp *c,
                     union pvrdma_cmd_resp *r)
{
    union pvrdma_cmd_resp tmp;
    int ret;

    if (!r) {
        r = &tmp;
    }
    ret = fg_cmd(e->fg, c, sizeof(*c), r);
    assert_int_equal(r->hdr.ack, 0x80000009u);
    assert_int_equal(r->hdr.err, (uint8_t)-ret);
    if (ret) {
        assert_int_equal(r->create_qp_resp_v2.qpn, 0);
        assert_int_equal(r->create_qp_resp_v2.qp_handle, 0);
    }
    return ret;
}

static uint32_t qp_state(Env *e, uint32_t qp)
{
    struct pvrdma_qp_attr a;

    assert_int_equal(fg_query_qp(e->fg, qp, &a), 0);
    assert_int_equal(a.cur_qp_state, a.qp_state);
    return a.qp_state;
}

/* ---- CREATE_QP ------------------------------------------------------- */

static void test_create_qp_v2(void **state)
{
    Env *e = env_new();
    struct pvrdma_cmd_create_qp c;
    union pvrdma_cmd_resp r;
    uint8_t stale[PVRDMA_RESP_SLOT_SIZE - 48];

    (void)state;
    fg_qp_req(e->fg, &c, PVRDMA_QPT_RC, e->pd, e->cq, e->cq2, 64, 2);
    /* 64 x 128 byte SQ WQEs = 2 pages, 64 x 64 byte RQ WQEs = 1 page */
    assert_int_equal(c.send_chunks, 2);
    assert_int_equal(c.total_chunks, 4);
    c.sq_sig_all = 1;
    assert_int_equal(create_qp(e, &c, &r), 0);
    /* wire QPN: the core's default is the handle (backends may prefix it) */
    assert_int_equal(r.create_qp_resp_v2.qpn, 2);
    assert_int_equal(r.create_qp_resp_v2.qp_handle, 2);
    assert_int_equal(r.create_qp_resp_v2.max_send_wr, 64);
    assert_int_equal(r.create_qp_resp_v2.max_recv_wr, 64);
    assert_int_equal(r.create_qp_resp_v2.max_send_sge, 2);
    assert_int_equal(r.create_qp_resp_v2.max_recv_sge, 2);
    assert_int_equal(r.create_qp_resp_v2.max_inline_data, 0);
    assert_int_equal(r.create_qp_resp_v2.reserved, 0);
    memset(stale, 0x5A, sizeof(stale));
    assert_memory_equal((uint8_t *)&r + 48, stale, sizeof(stale));

    /* GSI: handle 1, qpn 1, only one */
    fg_qp_req(e->fg, &c, PVRDMA_QPT_GSI, e->pd, e->cq, e->cq, 16, 1);
    assert_int_equal(create_qp(e, &c, &r), 0);
    assert_int_equal(r.create_qp_resp_v2.qpn, 1);
    assert_int_equal(r.create_qp_resp_v2.qp_handle, 1);
    assert_int_equal(create_qp(e, &c, NULL), -EBUSY);
    /* UD and a user RC QP on the user context */
    fg_qp_req(e->fg, &c, PVRDMA_QPT_UD, e->pd, e->cq, e->cq, 16, 4);
    assert_int_equal(create_qp(e, &c, &r), 0);
    assert_int_equal(r.create_qp_resp_v2.qp_handle, 3);
    fg_qp_req(e->fg, &c, PVRDMA_QPT_RC, e->upd, e->ucq, e->ucq, 1, 1);
    assert_int_equal(create_qp(e, &c, &r), 0);
    assert_int_equal(r.create_qp_resp_v2.qp_handle, 4);
    /* the new QP starts in RESET with its capabilities */
    {
        struct pvrdma_qp_attr a;

        assert_int_equal(fg_query_qp(e->fg, 4, &a), 0);
        assert_int_equal(a.qp_state, PVRDMA_QPS_RESET);
        assert_int_equal(a.cap.max_send_wr, 1);
        assert_int_equal(a.cap.max_recv_wr, 1);
        assert_int_equal(a.cap.max_send_sge, 1);
        assert_int_equal(a.cap.max_recv_sge, 1);
        assert_int_equal(a.cap.max_inline_data, 0);
    }
    /* destroying the GSI QP frees handle 1 for a new GSI QP only */
    assert_int_equal(fg_destroy_qp(e->fg, 1), 0);
    fg_qp_req(e->fg, &c, PVRDMA_QPT_RC, e->pd, e->cq, e->cq, 1, 1);
    assert_int_equal(create_qp(e, &c, &r), 0);
    assert_int_equal(r.create_qp_resp_v2.qp_handle, 5);
    fg_qp_req(e->fg, &c, PVRDMA_QPT_GSI, e->pd, e->cq, e->cq, 1, 1);
    assert_int_equal(create_qp(e, &c, &r), 0);
    assert_int_equal(r.create_qp_resp_v2.qp_handle, 1);
    env_free(e);
}

static void test_create_qp_v1_layout(void **state)
{
    Env *e = env_new_cfg(NULL, 19);
    struct pvrdma_cmd_create_qp c;
    union pvrdma_cmd_resp r;
    uint8_t stale[PVRDMA_RESP_SLOT_SIZE - 40];

    (void)state;
    fg_qp_req(e->fg, &c, PVRDMA_QPT_RC, e->pd, e->cq, e->cq, 8, 3);
    assert_int_equal(create_qp(e, &c, &r), 0);
    /* v1: qpn (== handle) at 16, then the caps at 20.. */
    assert_int_equal(r.create_qp_resp.qpn, 2);
    assert_int_equal(r.create_qp_resp.max_send_wr, 8);
    assert_int_equal(r.create_qp_resp.max_recv_wr, 8);
    assert_int_equal(r.create_qp_resp.max_send_sge, 3);
    assert_int_equal(r.create_qp_resp.max_recv_sge, 3);
    assert_int_equal(r.create_qp_resp.max_inline_data, 0);
    memset(stale, 0x5A, sizeof(stale));
    assert_memory_equal((uint8_t *)&r + 40, stale, sizeof(stale));
    assert_int_equal(qp_state(e, 2), PVRDMA_QPS_RESET);
    env_free(e);
}

typedef void (*QpBreaker)(Env *e, struct pvrdma_cmd_create_qp *c);

static void b_type_smi(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->qp_type = PVRDMA_QPT_SMI;
}
static void b_type_xrc(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->qp_type = 9;             /* XRC_INI */
}
static void b_type_raw(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->qp_type = 8;
}
static void b_pd(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->pd_handle = 77;
}
static void b_scq(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->send_cq_handle = 77;
}
static void b_rcq(Env *e, struct pvrdma_cmd_create_qp *c)
{
    /* a PD handle is not a CQ handle */
    c->recv_cq_handle = e->upd + 10;
}
static void b_ctx_mix(Env *e, struct pvrdma_cmd_create_qp *c)
{
    c->recv_cq_handle = e->ucq;
}
static void b_swr0(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->max_send_wr = 0;
}
static void b_swr_npow2(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->max_send_wr = 12;
}
static void b_swr_big(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->max_send_wr = 8192;
}
static void b_rwr_npow2(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->max_recv_wr = 3;
}
static void b_rwr0(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->max_recv_wr = 0;
}
static void b_ssge0(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->max_send_sge = 0;
}
static void b_ssge_big(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->max_send_sge = 33;     /* max-sge is 32 */
}
static void b_rsge_big(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->max_recv_sge = 0xFFFFFFFF;
}
static void b_send_chunks_small(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->send_chunks--;
    c->total_chunks--;
}
static void b_send_chunks_big(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->send_chunks = 2 * c->send_chunks + 1;
    c->total_chunks = c->send_chunks + 2;
}
static void b_total_small(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->total_chunks = c->send_chunks;
}
static void b_rq_pages_small(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->total_chunks = 1 + c->send_chunks;
}
static void b_total_huge(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->total_chunks = 0xFFFF;
}
static void b_inline(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->max_inline_data = 64;
}
static void b_sig_all(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->sq_sig_all = 2;
}
static void b_is_srq(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->is_srq = 2;
}
static void b_srq_handle(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->srq_handle = 1;
}
static void b_srq_missing(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->is_srq = 1;
    c->srq_handle = 5;
    c->max_recv_wr = 0;
    c->max_recv_sge = 0;
    c->total_chunks = 1 + c->send_chunks;
}
static void b_reserved(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->reserved[1] = 1;
}
static void b_access(Env *e, struct pvrdma_cmd_create_qp *c)
{
    (void)e;
    c->access_flags = 1u << 6;
}

static void test_create_qp_bad(void **state)
{
    static const QpBreaker breakers[] = {
        b_type_smi, b_type_xrc, b_type_raw, b_pd, b_scq, b_rcq, b_ctx_mix,
        b_swr0, b_swr_npow2, b_swr_big, b_rwr_npow2, b_rwr0, b_ssge0,
        b_ssge_big, b_rsge_big, b_send_chunks_small, b_send_chunks_big,
        b_total_small, b_rq_pages_small, b_total_huge, b_inline, b_sig_all,
        b_is_srq, b_srq_handle, b_srq_missing, b_reserved, b_access,
    };
    Env *e = env_new();
    struct pvrdma_cmd_create_qp c;
    unsigned i;

    (void)state;
    for (i = 0; i < G_N_ELEMENTS(breakers); i++) {
        unsigned errs = e->fg->guest_errors;

        fg_qp_req(e->fg, &c, PVRDMA_QPT_RC, e->pd, e->cq, e->cq, 64, 2);
        breakers[i](e, &c);
        assert_int_equal(create_qp(e, &c, NULL), -EINVAL);
        assert_int_equal(e->fg->guest_errors, errs + 1);
    }
    /* page directory outside guest memory */
    fg_qp_req(e->fg, &c, PVRDMA_QPT_RC, e->pd, e->cq, e->cq, 64, 2);
    c.pdir_dma = FG_BAD_ADDR;
    assert_int_equal(create_qp(e, &c, NULL), -EFAULT);
    /* nothing was created: the first real QP still gets handle 2 */
    fg_qp_req(e->fg, &c, PVRDMA_QPT_RC, e->pd, e->cq, e->cq, 64, 2);
    {
        union pvrdma_cmd_resp r;

        assert_int_equal(create_qp(e, &c, &r), 0);
        assert_int_equal(r.create_qp_resp_v2.qp_handle, 2);
    }
    /* the CQs are referenced by it now */
    assert_int_equal(fg_destroy_cq(e->fg, e->cq), -EBUSY);
    env_free(e);
}

static void test_create_qp_sizes(void **state)
{
    Env *e = env_new();
    struct pvrdma_cmd_create_qp c;
    uint64_t pages[5];

    (void)state;
    /* the largest QP the defaults allow: 4096 WRs, 4 SGEs */
    fg_qp_req(e->fg, &c, PVRDMA_QPT_RC, e->pd, e->cq, e->cq, 4096, 4);
    assert_int_equal(c.send_chunks, 256);
    assert_int_equal(c.total_chunks, 1 + 256 + 128);
    assert_int_equal(create_qp(e, &c, NULL), 0);
    /* exactly twice the needed pages is still accepted */
    fg_qp_req(e->fg, &c, PVRDMA_QPT_UD, e->pd, e->cq, e->cq, 1, 1);
    c.pdir_dma = fg_alloc_paged(e->fg, 5, pages);
    c.send_chunks = 2;
    c.total_chunks = 5;
    assert_int_equal(create_qp(e, &c, NULL), 0);
    fg_qp_req(e->fg, &c, PVRDMA_QPT_UD, e->pd, e->cq, e->cq, 1, 1);
    c.pdir_dma = fg_alloc_paged(e->fg, 5, pages);
    c.total_chunks = 5;     /* 3 RQ pages for 1 WR */
    assert_int_equal(create_qp(e, &c, NULL), -EINVAL);
    env_free(e);
}

static void test_qp_quota(void **state)
{
    PvrdmaCoreConfig cfg;
    Env *e;
    struct pvrdma_cmd_create_qp c;
    union pvrdma_cmd_resp r;

    (void)state;
    pvrdma_core_default_config(&cfg);
    cfg.max_qp = 4;             /* handles 1 (GSI), 2, 3 */
    e = env_new_cfg(&cfg, 20);
    fg_qp_req(e->fg, &c, PVRDMA_QPT_RC, e->pd, e->cq, e->cq, 1, 1);
    assert_int_equal(create_qp(e, &c, &r), 0);
    assert_int_equal(r.create_qp_resp_v2.qp_handle, 2);
    fg_qp_req(e->fg, &c, PVRDMA_QPT_UD, e->pd, e->cq, e->cq, 1, 1);
    assert_int_equal(create_qp(e, &c, &r), 0);
    assert_int_equal(r.create_qp_resp_v2.qp_handle, 3);
    fg_qp_req(e->fg, &c, PVRDMA_QPT_RC, e->pd, e->cq, e->cq, 1, 1);
    assert_int_equal(create_qp(e, &c, NULL), -ENOMEM);
    fg_qp_req(e->fg, &c, PVRDMA_QPT_GSI, e->pd, e->cq, e->cq, 1, 1);
    assert_int_equal(create_qp(e, &c, &r), 0);
    assert_int_equal(r.create_qp_resp_v2.qp_handle, 1);
    assert_int_equal(create_qp(e, &c, NULL), -EBUSY);
    assert_int_equal(fg_destroy_qp(e->fg, 3), 0);
    fg_qp_req(e->fg, &c, PVRDMA_QPT_RC, e->pd, e->cq, e->cq, 1, 1);
    assert_int_equal(create_qp(e, &c, &r), 0);
    assert_int_equal(r.create_qp_resp_v2.qp_handle, 3);
    env_free(e);
}

/*
 * QP numbers are handed out next fit: a destroyed QP's number comes back
 * only after the other free ones (a peer's CM may hold it in time wait),
 * and wrapping at max_qp finds the free one.
 */
static void test_qp_next_fit(void **state)
{
    PvrdmaCoreConfig cfg;
    Env *e;
    struct pvrdma_cmd_create_qp c;
    union pvrdma_cmd_resp r;
    uint32_t h;

    (void)state;
    pvrdma_core_default_config(&cfg);
    cfg.max_qp = 6;             /* handles 1 (GSI), 2 .. 5 */
    e = env_new_cfg(&cfg, 20);
    fg_qp_req(e->fg, &c, PVRDMA_QPT_RC, e->pd, e->cq, e->cq, 1, 1);
    assert_int_equal(create_qp(e, &c, &r), 0);
    assert_int_equal(r.create_qp_resp_v2.qp_handle, 2);
    assert_int_equal(r.create_qp_resp_v2.qpn, 2);
    /* destroyed and made again at once: not the same number */
    assert_int_equal(fg_destroy_qp(e->fg, 2), 0);
    for (h = 3; h <= 5; h++) {
        assert_int_equal(create_qp(e, &c, &r), 0);
        assert_int_equal(r.create_qp_resp_v2.qp_handle, h);
        assert_int_equal(r.create_qp_resp_v2.qpn, h);
    }
    /* past max_qp it wraps to the free one */
    assert_int_equal(create_qp(e, &c, &r), 0);
    assert_int_equal(r.create_qp_resp_v2.qp_handle, 2);
    assert_int_equal(create_qp(e, &c, NULL), -ENOMEM);
    assert_int_equal(fg_destroy_qp(e->fg, 4), 0);
    assert_int_equal(fg_destroy_qp(e->fg, 3), 0);
    assert_int_equal(create_qp(e, &c, &r), 0);
    assert_int_equal(r.create_qp_resp_v2.qp_handle, 3);
    assert_int_equal(create_qp(e, &c, &r), 0);
    assert_int_equal(r.create_qp_resp_v2.qp_handle, 4);
    env_free(e);
}

static void test_qp_pinned_quota(void **state)
{
    PvrdmaCoreConfig cfg;
    Env *e;
    struct pvrdma_cmd_create_qp c;

    (void)state;
    pvrdma_core_default_config(&cfg);
    cfg.max_pinned_pages = 258;
    /* 8 DSR pages + 6 CQ pages leave 244 */
    e = env_new_cfg(&cfg, 20);
    fg_qp_req(e->fg, &c, PVRDMA_QPT_RC, e->pd, e->cq, e->cq, 1024, 4);
    assert_int_equal(c.total_chunks, 1 + 64 + 32);
    assert_int_equal(create_qp(e, &c, NULL), 0);
    assert_int_equal(create_qp(e, &c, NULL), 0);
    assert_int_equal(create_qp(e, &c, NULL), -ENOMEM);
    assert_int_equal(fg_destroy_qp(e->fg, 2), 0);
    assert_int_equal(create_qp(e, &c, NULL), 0);
    env_free(e);
}

static void test_qp_references(void **state)
{
    Env *e = env_new();
    uint32_t qp, srq, sqp;
    struct pvrdma_cmd_create_qp c;
    union pvrdma_cmd_resp r;

    (void)state;
    assert_int_equal(fg_create_qp(e->fg, PVRDMA_QPT_RC, e->pd, e->cq, &qp,
                                  NULL), 0);
    assert_int_equal(fg_destroy_cq(e->fg, e->cq), -EBUSY);
    assert_int_equal(fg_destroy_pd(e->fg, e->pd), -EBUSY);
    assert_int_equal(fg_create_srq(e->fg, e->upd, 16, 1, &srq), 0);
    fg_qp_req(e->fg, &c, PVRDMA_QPT_RC, e->upd, e->ucq, e->ucq, 16, 1);
    c.is_srq = 1;
    c.srq_handle = srq;
    c.max_recv_wr = 0;
    c.max_recv_sge = 0;
    c.total_chunks = 1 + c.send_chunks;
    assert_int_equal(create_qp(e, &c, &r), 0);
    sqp = r.create_qp_resp_v2.qp_handle;
    assert_int_equal(fg_destroy_srq(e->fg, srq), -EBUSY);
    assert_int_equal(fg_destroy_pd(e->fg, e->upd), -EBUSY);
    assert_int_equal(fg_destroy_uc(e->fg, e->uc), -EBUSY);
    /* an SRQ QP carrying receive pages is refused */
    c.total_chunks = 2 + c.send_chunks;
    assert_int_equal(create_qp(e, &c, NULL), -EINVAL);
    /* an SRQ of another context is refused */
    fg_qp_req(e->fg, &c, PVRDMA_QPT_RC, e->pd, e->cq, e->cq, 16, 1);
    c.is_srq = 1;
    c.srq_handle = srq;
    c.max_recv_wr = 0;
    c.max_recv_sge = 0;
    c.total_chunks = 1 + c.send_chunks;
    assert_int_equal(create_qp(e, &c, NULL), -EINVAL);

    assert_int_equal(fg_destroy_qp(e->fg, sqp), 0);
    assert_int_equal(fg_destroy_srq(e->fg, srq), 0);
    assert_int_equal(fg_destroy_qp(e->fg, qp), 0);
    assert_int_equal(fg_destroy_qp(e->fg, qp), -EINVAL);
    assert_int_equal(fg_destroy_cq(e->fg, e->cq), 0);
    assert_int_equal(fg_destroy_cq(e->fg, e->ucq), 0);
    assert_int_equal(fg_destroy_pd(e->fg, e->upd), 0);
    assert_int_equal(fg_destroy_uc(e->fg, e->uc), 0);
    env_free(e);
}

static void test_destroy_qp_bad(void **state)
{
    Env *e = env_new();
    struct pvrdma_cmd_destroy_qp c = { .hdr.cmd = PVRDMA_CMD_DESTROY_QP };
    union pvrdma_cmd_resp r;
    uint32_t qp;

    (void)state;
    assert_int_equal(fg_create_qp(e->fg, PVRDMA_QPT_UD, e->pd, e->cq, &qp,
                                  NULL), 0);
    c.qp_handle = qp;
    c.reserved[0] = 1;
    assert_int_equal(fg_cmd(e->fg, &c, sizeof(c), &r), -EINVAL);
    c.reserved[0] = 0;
    assert_int_equal(fg_cmd(e->fg, &c, sizeof(c), &r), 0);
    assert_int_equal(r.hdr.ack, 0x8000000Cu);
    assert_int_equal(r.hdr.err, 0);
    assert_int_equal(r.destroy_qp_resp.events_reported, 0);
    assert_int_equal(fg_destroy_qp(e->fg, 0), -EINVAL);
    assert_int_equal(fg_destroy_qp(e->fg, 1), -EINVAL);
    assert_int_equal(fg_destroy_qp(e->fg, 65535), -EINVAL);
    assert_int_equal(fg_destroy_qp(e->fg, 0xFFFFFFFF), -EINVAL);
    env_free(e);
}

/* ---- MODIFY_QP / QUERY_QP --------------------------------------------- */

static void test_modify_rc_full_path(void **state)
{
    Env *e = env_new();
    struct pvrdma_qp_attr a, q;
    uint8_t dgid[16];
    uint32_t qp;

    (void)state;
    assert_int_equal(fg_create_qp(e->fg, PVRDMA_QPT_RC, e->pd, e->cq, &qp,
                                  NULL), 0);
    assert_int_equal(fg_qp_to_rts(e->fg, qp, PVRDMA_QPT_RC), 0);
    assert_int_equal(fg_query_qp(e->fg, qp, &q), 0);
    assert_int_equal(q.qp_state, PVRDMA_QPS_RTS);
    assert_int_equal(q.cur_qp_state, PVRDMA_QPS_RTS);
    assert_int_equal(q.path_mtu, PVRDMA_MTU_1024);
    assert_int_equal(q.path_mig_state, 0);
    assert_int_equal(q.qkey, 0);
    assert_int_equal(q.rq_psn, 0x1000);
    assert_int_equal(q.sq_psn, 0x2000);
    assert_int_equal(q.dest_qp_num, 0x123);
    assert_int_equal(q.qp_access_flags, PVRDMA_ACCESS_REMOTE_WRITE |
                     PVRDMA_ACCESS_LOCAL_WRITE);
    assert_int_equal(q.pkey_index, 0);
    assert_int_equal(q.en_sqd_async_notify, 0);
    assert_int_equal(q.sq_draining, 0);
    assert_int_equal(q.max_rd_atomic, 4);
    assert_int_equal(q.max_dest_rd_atomic, 4);
    assert_int_equal(q.min_rnr_timer, 12);
    assert_int_equal(q.port_num, 1);
    assert_int_equal(q.timeout, 14);
    assert_int_equal(q.retry_cnt, 7);
    assert_int_equal(q.rnr_retry, 7);
    assert_int_equal(q.cap.max_send_wr, 16);
    assert_int_equal(q.cap.max_recv_wr, 16);
    assert_int_equal(q.cap.max_send_sge, 2);
    assert_int_equal(q.cap.max_recv_sge, 2);
    assert_int_equal(q.cap.max_inline_data, 0);
    fg_test_gid(7, dgid);
    assert_memory_equal(q.ah_attr.grh.dgid, dgid, 16);
    assert_int_equal(q.ah_attr.grh.sgid_index, 0);
    assert_int_equal(q.ah_attr.grh.hop_limit, 64);
    assert_int_equal(q.ah_attr.ah_flags, PVRDMA_AH_FLAG_GRH);
    assert_int_equal(q.ah_attr.port_num, 1);

    /* RTS -> RTS changing optional attributes */
    memset(&a, 0, sizeof(a));
    a.min_rnr_timer = 20;
    a.qp_access_flags = PVRDMA_ACCESS_LOCAL_WRITE;
    assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_MIN_RNR_TIMER |
                                  PVRDMA_QP_ACCESS_FLAGS, &a), 0);
    assert_int_equal(fg_query_qp(e->fg, qp, &q), 0);
    assert_int_equal(q.min_rnr_timer, 20);
    assert_int_equal(q.qp_access_flags, PVRDMA_ACCESS_LOCAL_WRITE);
    assert_int_equal(q.timeout, 14);
    /* RTS -> SQD -> SQD (RC may change the path) -> RTS */
    a.qp_state = PVRDMA_QPS_SQD;
    a.en_sqd_async_notify = 1;
    assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE |
                                  PVRDMA_QP_EN_SQD_ASYNC_NOTIFY, &a), 0);
    assert_int_equal(qp_state(e, qp), PVRDMA_QPS_SQD);
    a.timeout = 20;
    assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE |
                                  PVRDMA_QP_TIMEOUT, &a), 0);
    a.qp_state = PVRDMA_QPS_RTS;
    a.cur_qp_state = PVRDMA_QPS_SQD;
    assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE |
                                  PVRDMA_QP_CUR_STATE, &a), 0);
    assert_int_equal(fg_query_qp(e->fg, qp, &q), 0);
    assert_int_equal(q.qp_state, PVRDMA_QPS_RTS);
    assert_int_equal(q.timeout, 20);
    assert_int_equal(q.en_sqd_async_notify, 1);
    /* -> ERR -> RESET clears everything but the caps */
    a.qp_state = PVRDMA_QPS_ERR;
    assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE, &a), 0);
    assert_int_equal(qp_state(e, qp), PVRDMA_QPS_ERR);
    assert_int_equal(fg_modify_qp(e->fg, qp, 0, &a), 0);   /* ERR -> ERR */
    a.qp_state = PVRDMA_QPS_RESET;
    assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE, &a), 0);
    assert_int_equal(fg_query_qp(e->fg, qp, &q), 0);
    assert_int_equal(q.qp_state, PVRDMA_QPS_RESET);
    assert_int_equal(q.dest_qp_num, 0);
    assert_int_equal(q.timeout, 0);
    assert_int_equal(q.port_num, 0);
    assert_int_equal(q.ah_attr.ah_flags, 0);
    assert_int_equal(q.cap.max_send_wr, 16);
    /* and the whole way up again */
    assert_int_equal(fg_qp_to_rts(e->fg, qp, PVRDMA_QPT_RC), 0);
    env_free(e);
}

static void test_modify_ud_gsi(void **state)
{
    Env *e = env_new();
    struct pvrdma_qp_attr a, q;
    uint32_t ud, gsi;

    (void)state;
    assert_int_equal(fg_create_qp(e->fg, PVRDMA_QPT_UD, e->pd, e->cq, &ud,
                                  NULL), 0);
    assert_int_equal(fg_create_qp(e->fg, PVRDMA_QPT_GSI, e->pd, e->cq, &gsi,
                                  NULL), 0);
    assert_int_equal(gsi, 1);
    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_INIT;
    a.port_num = 1;
    a.qkey = 0x80010000;
    /* UD needs PORT, GSI must not get it (ib_modify_qp_is_ok) */
    assert_int_equal(fg_modify_qp(e->fg, ud, PVRDMA_QP_STATE |
                                  PVRDMA_QP_PKEY_INDEX | PVRDMA_QP_QKEY,
                                  &a), -EINVAL);
    assert_int_equal(fg_modify_qp(e->fg, gsi, PVRDMA_QP_STATE |
                                  PVRDMA_QP_PKEY_INDEX | PVRDMA_QP_QKEY |
                                  PVRDMA_QP_PORT, &a), -EINVAL);
    /* UD has no RC attributes */
    assert_int_equal(fg_modify_qp(e->fg, ud, PVRDMA_QP_STATE |
                                  PVRDMA_QP_PKEY_INDEX | PVRDMA_QP_QKEY |
                                  PVRDMA_QP_PORT | PVRDMA_QP_ACCESS_FLAGS,
                                  &a), -EINVAL);
    assert_int_equal(fg_qp_to_rts(e->fg, ud, PVRDMA_QPT_UD), 0);
    assert_int_equal(fg_qp_to_rts(e->fg, gsi, PVRDMA_QPT_GSI), 0);
    assert_int_equal(fg_query_qp(e->fg, ud, &q), 0);
    assert_int_equal(q.qp_state, PVRDMA_QPS_RTS);
    assert_int_equal(q.qkey, 0x11111111);
    assert_int_equal(q.sq_psn, 0x2000);
    assert_int_equal(q.port_num, 1);
    assert_int_equal(fg_query_qp(e->fg, gsi, &q), 0);
    assert_int_equal(q.qp_state, PVRDMA_QPS_RTS);
    assert_int_equal(q.port_num, 0);
    /* RTS -> RTS: QKEY allowed, SQ_PSN not */
    a.qkey = 0x22;
    assert_int_equal(fg_modify_qp(e->fg, ud, PVRDMA_QP_QKEY, &a), 0);
    assert_int_equal(fg_modify_qp(e->fg, ud, PVRDMA_QP_SQ_PSN, &a), -EINVAL);
    /* UD: SQE -> RTS is legal, but SQE is only reachable by the device */
    env_free(e);
}

typedef struct Transition {
    uint32_t from;              /* reached with the standard path */
    uint32_t to;
    uint32_t mask;              /* STATE added when to != from */
} Transition;

static void goto_state(Env *e, uint32_t qp, uint32_t st)
{
    struct pvrdma_qp_attr a;

    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_RESET;
    assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE, &a), 0);
    if (st == PVRDMA_QPS_RESET) {
        return;
    }
    if (st == PVRDMA_QPS_ERR) {
        a.qp_state = PVRDMA_QPS_ERR;
        assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE, &a), 0);
        return;
    }
    assert_int_equal(fg_qp_to_rts(e->fg, qp, PVRDMA_QPT_RC), 0);
    if (st == PVRDMA_QPS_SQD) {
        a.qp_state = PVRDMA_QPS_SQD;
        assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE, &a), 0);
    }
    assert_int_equal(qp_state(e, qp), st);
}

static void test_modify_illegal_transitions(void **state)
{
    static const Transition bad[] = {
        { PVRDMA_QPS_RESET, PVRDMA_QPS_RTR, 0 },
        { PVRDMA_QPS_RESET, PVRDMA_QPS_RTS, 0 },
        { PVRDMA_QPS_RESET, PVRDMA_QPS_SQD, 0 },
        { PVRDMA_QPS_RESET, PVRDMA_QPS_SQE, 0 },
        { PVRDMA_QPS_RTS, PVRDMA_QPS_INIT, 0 },
        { PVRDMA_QPS_RTS, PVRDMA_QPS_RTR, 0 },
        { PVRDMA_QPS_RTS, PVRDMA_QPS_SQE, 0 },
        { PVRDMA_QPS_SQD, PVRDMA_QPS_INIT, 0 },
        { PVRDMA_QPS_ERR, PVRDMA_QPS_RTS, 0 },
        { PVRDMA_QPS_ERR, PVRDMA_QPS_INIT, 0 },
        /* RESET->INIT and ->RESET/ERR with attributes */
        { PVRDMA_QPS_RESET, PVRDMA_QPS_RESET, PVRDMA_QP_QKEY },
        { PVRDMA_QPS_RTS, PVRDMA_QPS_ERR, PVRDMA_QP_TIMEOUT },
        { PVRDMA_QPS_RTS, PVRDMA_QPS_RESET, PVRDMA_QP_SQ_PSN },
        /* RTS -> RTS with a non-optional attribute */
        { PVRDMA_QPS_RTS, PVRDMA_QPS_RTS, PVRDMA_QP_TIMEOUT },
        { PVRDMA_QPS_RTS, PVRDMA_QPS_RTS, PVRDMA_QP_CAP },
        { PVRDMA_QPS_RTS, PVRDMA_QPS_RTS, PVRDMA_QP_DEST_QPN },
        /* unknown mask bits */
        { PVRDMA_QPS_RTS, PVRDMA_QPS_RTS, 1u << 21 },
        { PVRDMA_QPS_RTS, PVRDMA_QPS_RTS, 0x80000000u },
        /* CUR_STATE only from RTR/RTS/SQD/SQE */
        { PVRDMA_QPS_ERR, PVRDMA_QPS_RESET, PVRDMA_QP_CUR_STATE },
    };
    Env *e = env_new();
    uint32_t qp, i;

    (void)state;
    assert_int_equal(fg_create_qp(e->fg, PVRDMA_QPT_RC, e->pd, e->cq, &qp,
                                  NULL), 0);
    for (i = 0; i < G_N_ELEMENTS(bad); i++) {
        struct pvrdma_qp_attr a;
        uint32_t mask = bad[i].mask;

        goto_state(e, qp, bad[i].from);
        memset(&a, 0, sizeof(a));
        a.qp_state = bad[i].to;
        a.cur_qp_state = bad[i].from;
        a.port_num = 1;
        a.timeout = 1;
        if (bad[i].to != bad[i].from || bad[i].mask == 0) {
            mask |= PVRDMA_QP_STATE;
        }
        assert_int_equal(fg_modify_qp(e->fg, qp, mask, &a), -EINVAL);
        assert_int_equal(fg_reg_read(e->fg, PVRDMA_REG_ERR), 0xFFFFFFEA);
        assert_int_equal(qp_state(e, qp), bad[i].from);
    }
    /* a target state beyond ERR */
    {
        struct pvrdma_qp_attr a;

        memset(&a, 0, sizeof(a));
        a.qp_state = 7;
        assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE, &a),
                         -EINVAL);
        a.qp_state = 0xFFFFFFFF;
        assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE, &a),
                         -EINVAL);
    }
    /* RTR -> RTR is not a transition (no "modify in RTR") */
    goto_state(e, qp, PVRDMA_QPS_RESET);
    {
        struct pvrdma_qp_attr a;

        memset(&a, 0, sizeof(a));
        a.qp_state = PVRDMA_QPS_INIT;
        a.port_num = 1;
        assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE |
                                      PVRDMA_QP_PKEY_INDEX | PVRDMA_QP_PORT |
                                      PVRDMA_QP_ACCESS_FLAGS, &a), 0);
        /* INIT -> INIT with optional attributes is fine */
        assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_PKEY_INDEX, &a),
                         0);
    }
    env_free(e);
}

static void test_modify_missing_required(void **state)
{
    Env *e = env_new();
    struct pvrdma_qp_attr a;
    uint32_t rc, ud;
    uint32_t rc_init = PVRDMA_QP_STATE | PVRDMA_QP_PKEY_INDEX |
                       PVRDMA_QP_PORT | PVRDMA_QP_ACCESS_FLAGS;
    uint32_t rc_rtr = PVRDMA_QP_STATE | PVRDMA_QP_AV | PVRDMA_QP_PATH_MTU |
                      PVRDMA_QP_DEST_QPN | PVRDMA_QP_RQ_PSN |
                      PVRDMA_QP_MAX_DEST_RD_ATOMIC | PVRDMA_QP_MIN_RNR_TIMER;
    uint32_t rc_rts = PVRDMA_QP_STATE | PVRDMA_QP_SQ_PSN |
                      PVRDMA_QP_TIMEOUT | PVRDMA_QP_RETRY_CNT |
                      PVRDMA_QP_RNR_RETRY | PVRDMA_QP_MAX_QP_RD_ATOMIC;
    uint32_t bit;

    (void)state;
    assert_int_equal(fg_create_qp(e->fg, PVRDMA_QPT_RC, e->pd, e->cq, &rc,
                                  NULL), 0);
    assert_int_equal(fg_create_qp(e->fg, PVRDMA_QPT_UD, e->pd, e->cq, &ud,
                                  NULL), 0);
    memset(&a, 0, sizeof(a));
    a.port_num = 1;
    a.path_mtu = PVRDMA_MTU_4096;
    a.ah_attr.ah_flags = PVRDMA_AH_FLAG_GRH;
    a.ah_attr.port_num = 1;

    /* each required RESET->INIT bit missing in turn */
    a.qp_state = PVRDMA_QPS_INIT;
    for (bit = 1; bit < (1u << 21); bit <<= 1) {
        if ((rc_init & bit) && bit != PVRDMA_QP_STATE) {
            assert_int_equal(fg_modify_qp(e->fg, rc, rc_init & ~bit, &a),
                             -EINVAL);
        }
    }
    /* not allowed in RESET->INIT */
    assert_int_equal(fg_modify_qp(e->fg, rc, rc_init | PVRDMA_QP_PATH_MTU,
                                  &a), -EINVAL);
    assert_int_equal(fg_modify_qp(e->fg, rc, rc_init | PVRDMA_QP_QKEY, &a),
                     -EINVAL);
    assert_int_equal(qp_state(e, rc), PVRDMA_QPS_RESET);
    assert_int_equal(fg_modify_qp(e->fg, rc, rc_init, &a), 0);

    a.qp_state = PVRDMA_QPS_RTR;
    for (bit = 1; bit < (1u << 21); bit <<= 1) {
        if ((rc_rtr & bit) && bit != PVRDMA_QP_STATE) {
            assert_int_equal(fg_modify_qp(e->fg, rc, rc_rtr & ~bit, &a),
                             -EINVAL);
        }
    }
    assert_int_equal(fg_modify_qp(e->fg, rc, rc_rtr | PVRDMA_QP_SQ_PSN, &a),
                     -EINVAL);
    assert_int_equal(qp_state(e, rc), PVRDMA_QPS_INIT);
    assert_int_equal(fg_modify_qp(e->fg, rc, rc_rtr, &a), 0);

    a.qp_state = PVRDMA_QPS_RTS;
    for (bit = 1; bit < (1u << 21); bit <<= 1) {
        if ((rc_rts & bit) && bit != PVRDMA_QP_STATE) {
            assert_int_equal(fg_modify_qp(e->fg, rc, rc_rts & ~bit, &a),
                             -EINVAL);
        }
    }
    assert_int_equal(fg_modify_qp(e->fg, rc, rc_rts | PVRDMA_QP_RQ_PSN, &a),
                     -EINVAL);
    assert_int_equal(qp_state(e, rc), PVRDMA_QPS_RTR);
    assert_int_equal(fg_modify_qp(e->fg, rc, rc_rts, &a), 0);
    assert_int_equal(qp_state(e, rc), PVRDMA_QPS_RTS);

    /* UD: QKEY required for INIT, SQ_PSN for RTS */
    a.qp_state = PVRDMA_QPS_INIT;
    assert_int_equal(fg_modify_qp(e->fg, ud, PVRDMA_QP_STATE |
                                  PVRDMA_QP_PKEY_INDEX | PVRDMA_QP_PORT,
                                  &a), -EINVAL);
    assert_int_equal(fg_modify_qp(e->fg, ud, PVRDMA_QP_STATE |
                                  PVRDMA_QP_PKEY_INDEX | PVRDMA_QP_PORT |
                                  PVRDMA_QP_QKEY, &a), 0);
    a.qp_state = PVRDMA_QPS_RTR;
    assert_int_equal(fg_modify_qp(e->fg, ud, PVRDMA_QP_STATE, &a), 0);
    a.qp_state = PVRDMA_QPS_RTS;
    assert_int_equal(fg_modify_qp(e->fg, ud, PVRDMA_QP_STATE, &a), -EINVAL);
    assert_int_equal(qp_state(e, ud), PVRDMA_QPS_RTR);
    env_free(e);
}

static void test_modify_cur_state(void **state)
{
    Env *e = env_new();
    struct pvrdma_qp_attr a;
    uint32_t qp;

    (void)state;
    assert_int_equal(fg_create_qp(e->fg, PVRDMA_QPT_RC, e->pd, e->cq, &qp,
                                  NULL), 0);
    assert_int_equal(fg_qp_to_rts(e->fg, qp, PVRDMA_QPT_RC), 0);
    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_RTS;
    a.cur_qp_state = PVRDMA_QPS_RTS;
    assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE |
                                  PVRDMA_QP_CUR_STATE, &a), 0);
    a.cur_qp_state = PVRDMA_QPS_RTR;
    assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE |
                                  PVRDMA_QP_CUR_STATE, &a), -EINVAL);
    a.cur_qp_state = 9;
    assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_CUR_STATE, &a),
                     -EINVAL);
    /* cur_qp_state is ignored without the CUR_STATE bit */
    a.cur_qp_state = PVRDMA_QPS_INIT;
    assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE, &a), 0);
    env_free(e);
}

typedef void (*AttrBreaker)(struct pvrdma_qp_attr *a);

static void v_port(struct pvrdma_qp_attr *a) { a->port_num = 2; }
static void v_port0(struct pvrdma_qp_attr *a) { a->port_num = 0; }
static void v_pkey(struct pvrdma_qp_attr *a) { a->pkey_index = 1; }
static void v_reserved(struct pvrdma_qp_attr *a) { a->reserved[4] = 1; }

static void test_modify_values_init(void **state)
{
    static const AttrBreaker breakers[] = {
        v_port, v_port0, v_pkey, v_reserved,
    };
    Env *e = env_new();
    uint32_t qp, i;
    uint32_t mask = PVRDMA_QP_STATE | PVRDMA_QP_PKEY_INDEX | PVRDMA_QP_PORT |
                    PVRDMA_QP_ACCESS_FLAGS;

    (void)state;
    assert_int_equal(fg_create_qp(e->fg, PVRDMA_QPT_RC, e->pd, e->cq, &qp,
                                  NULL), 0);
    for (i = 0; i < G_N_ELEMENTS(breakers); i++) {
        struct pvrdma_qp_attr a;

        memset(&a, 0, sizeof(a));
        a.qp_state = PVRDMA_QPS_INIT;
        a.port_num = 1;
        breakers[i](&a);
        assert_int_equal(fg_modify_qp(e->fg, qp, mask, &a), -EINVAL);
        assert_int_equal(qp_state(e, qp), PVRDMA_QPS_RESET);
    }
    env_free(e);
}

/*
 * Access bits the device does not implement (MW_BIND, ibverbs' FLUSH_GLOBAL
 * and FLUSH_PERSISTENT, the optional range) are dropped, not refused: the
 * QP keeps remote write/read/atomic.
 */
static void test_modify_access_extra_bits(void **state)
{
    Env *e = env_new();
    struct pvrdma_qp_attr a, q;
    uint32_t qp;

    (void)state;
    assert_int_equal(fg_create_qp(e->fg, PVRDMA_QPT_RC, e->pd, e->cq, &qp,
                                  NULL), 0);
    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = 0x30e | PVRDMA_ACCESS_MW_BIND | (1u << 20);
    assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE |
                                  PVRDMA_QP_PKEY_INDEX | PVRDMA_QP_PORT |
                                  PVRDMA_QP_ACCESS_FLAGS, &a), 0);
    assert_int_equal(qp_state(e, qp), PVRDMA_QPS_INIT);
    assert_int_equal(fg_query_qp(e->fg, qp, &q), 0);
    assert_int_equal(q.qp_access_flags, PVRDMA_ACCESS_REMOTE_WRITE |
                     PVRDMA_ACCESS_REMOTE_READ | PVRDMA_ACCESS_REMOTE_ATOMIC);
    env_free(e);
}

static void r_mtu0(struct pvrdma_qp_attr *a) { a->path_mtu = 0; }
static void r_mtu6(struct pvrdma_qp_attr *a) { a->path_mtu = 6; }
static void r_rnr(struct pvrdma_qp_attr *a) { a->min_rnr_timer = 32; }
static void r_dest_rd(struct pvrdma_qp_attr *a)
{
    a->max_dest_rd_atomic = 17;
}
static void r_qpn(struct pvrdma_qp_attr *a) { a->dest_qp_num = 1u << 24; }
static void r_sgid_range(struct pvrdma_qp_attr *a)
{
    a->ah_attr.grh.sgid_index = 16;
}
static void r_sgid_unbound(struct pvrdma_qp_attr *a)
{
    a->ah_attr.grh.sgid_index = 1;
}
static void r_no_grh(struct pvrdma_qp_attr *a) { a->ah_attr.ah_flags = 0; }
static void r_ah_port(struct pvrdma_qp_attr *a) { a->ah_attr.port_num = 2; }
static void r_sl(struct pvrdma_qp_attr *a) { a->ah_attr.sl = 16; }
static void r_ah_reserved(struct pvrdma_qp_attr *a)
{
    a->ah_attr.reserved = 1;
}

static void test_modify_values_rtr_rts(void **state)
{
    static const AttrBreaker rtr_breakers[] = {
        r_mtu0, r_mtu6, r_rnr, r_dest_rd, r_qpn, r_sgid_range,
        r_sgid_unbound, r_no_grh, r_ah_port, r_sl, r_ah_reserved,
    };
    Env *e = env_new();
    struct pvrdma_qp_attr a, q;
    uint32_t qp, i;
    uint32_t rtr = PVRDMA_QP_STATE | PVRDMA_QP_AV | PVRDMA_QP_PATH_MTU |
                   PVRDMA_QP_DEST_QPN | PVRDMA_QP_RQ_PSN |
                   PVRDMA_QP_MAX_DEST_RD_ATOMIC | PVRDMA_QP_MIN_RNR_TIMER;
    uint32_t rts = PVRDMA_QP_STATE | PVRDMA_QP_SQ_PSN | PVRDMA_QP_TIMEOUT |
                   PVRDMA_QP_RETRY_CNT | PVRDMA_QP_RNR_RETRY |
                   PVRDMA_QP_MAX_QP_RD_ATOMIC;

    (void)state;
    assert_int_equal(fg_create_qp(e->fg, PVRDMA_QPT_RC, e->pd, e->cq, &qp,
                                  NULL), 0);
    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_INIT;
    a.port_num = 1;
    assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE |
                                  PVRDMA_QP_PKEY_INDEX | PVRDMA_QP_PORT |
                                  PVRDMA_QP_ACCESS_FLAGS, &a), 0);
    for (i = 0; i < G_N_ELEMENTS(rtr_breakers); i++) {
        memset(&a, 0, sizeof(a));
        a.qp_state = PVRDMA_QPS_RTR;
        a.path_mtu = PVRDMA_MTU_4096;
        a.max_dest_rd_atomic = 16;
        a.min_rnr_timer = 31;
        a.dest_qp_num = 0xFFFFFF;
        a.ah_attr.ah_flags = PVRDMA_AH_FLAG_GRH;
        a.ah_attr.port_num = 1;
        a.ah_attr.grh.flow_label = 0xFFFFF;
        a.ah_attr.sl = 15;
        rtr_breakers[i](&a);
        assert_int_equal(fg_modify_qp(e->fg, qp, rtr, &a), -EINVAL);
        assert_int_equal(qp_state(e, qp), PVRDMA_QPS_INIT);
    }
    /* ALT_PATH is refused (no APM) */
    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_RTR;
    a.path_mtu = PVRDMA_MTU_4096;
    a.ah_attr.ah_flags = PVRDMA_AH_FLAG_GRH;
    a.ah_attr.port_num = 1;
    a.rq_psn = 0xFF123456;
    a.ah_attr.grh.flow_label = 0xFFFFFFFF;      /* as UCX sets it */
    assert_int_equal(fg_modify_qp(e->fg, qp, rtr | PVRDMA_QP_ALT_PATH, &a),
                     -EINVAL);
    /* PSNs are kept modulo 2^24, flow labels modulo 2^20 */
    assert_int_equal(fg_modify_qp(e->fg, qp, rtr, &a), 0);
    assert_int_equal(fg_query_qp(e->fg, qp, &q), 0);
    assert_int_equal(q.rq_psn, 0x123456);
    assert_int_equal(q.ah_attr.grh.flow_label, 0xFFFFF);

    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_RTS;
    a.timeout = 32;
    assert_int_equal(fg_modify_qp(e->fg, qp, rts, &a), -EINVAL);
    a.timeout = 31;
    a.retry_cnt = 8;
    assert_int_equal(fg_modify_qp(e->fg, qp, rts, &a), -EINVAL);
    a.retry_cnt = 7;
    a.rnr_retry = 8;
    assert_int_equal(fg_modify_qp(e->fg, qp, rts, &a), -EINVAL);
    a.rnr_retry = 7;
    a.max_rd_atomic = 17;
    assert_int_equal(fg_modify_qp(e->fg, qp, rts, &a), -EINVAL);
    a.max_rd_atomic = 16;
    a.path_mig_state = 3;
    assert_int_equal(fg_modify_qp(e->fg, qp, rts | PVRDMA_QP_PATH_MIG_STATE,
                                  &a), -EINVAL);
    assert_int_equal(qp_state(e, qp), PVRDMA_QPS_RTR);
    a.path_mig_state = PVRDMA_MIG_MIGRATED;
    a.sq_psn = 0x01FFFFFF;
    assert_int_equal(fg_modify_qp(e->fg, qp, rts | PVRDMA_QP_PATH_MIG_STATE,
                                  &a), 0);
    assert_int_equal(fg_query_qp(e->fg, qp, &q), 0);
    assert_int_equal(q.sq_psn, 0xFFFFFF);
    assert_int_equal(q.max_rd_atomic, 16);
    assert_int_equal(q.timeout, 31);
    /* RTS -> SQD with a bad en_sqd_async_notify value */
    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_SQD;
    a.en_sqd_async_notify = 2;
    assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE |
                                  PVRDMA_QP_EN_SQD_ASYNC_NOTIFY, &a),
                     -EINVAL);
    env_free(e);
}

static void test_modify_query_bad_handles(void **state)
{
    Env *e = env_new();
    struct pvrdma_qp_attr a;
    struct pvrdma_cmd_query_qp c = { .hdr.cmd = PVRDMA_CMD_QUERY_QP };
    union pvrdma_cmd_resp r;
    uint32_t qp;

    (void)state;
    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_ERR;
    assert_int_equal(fg_modify_qp(e->fg, 0, PVRDMA_QP_STATE, &a), -EINVAL);
    assert_int_equal(fg_modify_qp(e->fg, 2, PVRDMA_QP_STATE, &a), -EINVAL);
    assert_int_equal(fg_modify_qp(e->fg, 0xFFFFFFFF, PVRDMA_QP_STATE, &a),
                     -EINVAL);
    assert_int_equal(fg_query_qp(e->fg, 0, NULL), -EINVAL);
    assert_int_equal(fg_query_qp(e->fg, e->cq, NULL), -EINVAL);
    assert_int_equal(fg_create_qp(e->fg, PVRDMA_QPT_RC, e->pd, e->cq, &qp,
                                  NULL), 0);
    c.qp_handle = qp;
    c.attr_mask = 1u << 21;
    assert_int_equal(fg_cmd(e->fg, &c, sizeof(c), &r), -EINVAL);
    assert_int_equal(r.hdr.ack, 0x8000000Bu);
    assert_int_equal(r.hdr.err, EINVAL);
    assert_int_equal(r.query_qp_resp.attrs.cap.max_send_wr, 0);
    c.attr_mask = 0;
    assert_int_equal(fg_cmd(e->fg, &c, sizeof(c), &r), 0);
    assert_int_equal(r.query_qp_resp.attrs.cap.max_send_wr, 16);
    assert_int_equal(fg_destroy_qp(e->fg, qp), 0);
    assert_int_equal(fg_modify_qp(e->fg, qp, PVRDMA_QP_STATE, &a), -EINVAL);
    assert_int_equal(fg_query_qp(e->fg, qp, NULL), -EINVAL);
    env_free(e);
}

static void test_modify_backend_failure(void **state)
{
    FakeGuest *fg = fg_new(NULL);
    FgBackend *be = fg_use_recording_backend(fg);
    struct pvrdma_qp_attr a;
    uint32_t pd, cq, qp;

    (void)state;
    fg_setup(fg);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(fg_create_cq(fg, 0, 64, &cq), 0);
    assert_int_equal(fg_create_qp(fg, PVRDMA_QPT_UD, pd, cq, &qp, NULL), 0);
    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_INIT;
    a.port_num = 1;
    a.qkey = 5;
    be->fail = -EIO;
    assert_int_equal(fg_modify_qp(fg, qp, PVRDMA_QP_STATE |
                                  PVRDMA_QP_PKEY_INDEX | PVRDMA_QP_PORT |
                                  PVRDMA_QP_QKEY, &a), -EIO);
    assert_int_equal(be->qp_modify, 1);
    be->fail = 0;
    assert_int_equal(fg_query_qp(fg, qp, &a), 0);
    assert_int_equal(a.qp_state, PVRDMA_QPS_RESET);
    assert_int_equal(a.qkey, 0);
    /* an invalid request never reaches the backend */
    a.qp_state = PVRDMA_QPS_RTS;
    assert_int_equal(fg_modify_qp(fg, qp, PVRDMA_QP_STATE, &a), -EINVAL);
    assert_int_equal(be->qp_modify, 1);
    fg_free(fg);
}

static void test_state_table(void **state)
{
    static const uint8_t types[] = {
        PVRDMA_QPT_RC, PVRDMA_QPT_UC, PVRDMA_QPT_UD, PVRDMA_QPT_GSI,
    };
    uint32_t s, t;

    (void)state;
    for (t = 0; t < G_N_ELEMENTS(types); t++) {
        for (s = PVRDMA_QPS_RESET; s <= PVRDMA_QPS_ERR; s++) {
            /* any state -> RESET / ERR with STATE alone */
            assert_true(pvrdma_qp_transition_ok(s, PVRDMA_QPS_RESET,
                                                types[t], PVRDMA_QP_STATE));
            assert_true(pvrdma_qp_transition_ok(s, PVRDMA_QPS_ERR,
                                                types[t], PVRDMA_QP_STATE));
            assert_false(pvrdma_qp_transition_ok(s, PVRDMA_QPS_ERR,
                                                 types[t], PVRDMA_QP_STATE |
                                                 PVRDMA_QP_QKEY));
            assert_false(pvrdma_qp_transition_ok(s, 7, types[t],
                                                 PVRDMA_QP_STATE));
        }
    }
    /* UC (project extension): RC's table without RNR, READ or retries */
    assert_true(pvrdma_qp_transition_ok(PVRDMA_QPS_RESET, PVRDMA_QPS_INIT,
                                        PVRDMA_QPT_UC, PVRDMA_QP_STATE |
                                        PVRDMA_QP_PKEY_INDEX |
                                        PVRDMA_QP_PORT |
                                        PVRDMA_QP_ACCESS_FLAGS));
    assert_true(pvrdma_qp_transition_ok(PVRDMA_QPS_INIT, PVRDMA_QPS_RTR,
                                        PVRDMA_QPT_UC, PVRDMA_QP_STATE |
                                        PVRDMA_QP_AV | PVRDMA_QP_PATH_MTU |
                                        PVRDMA_QP_DEST_QPN |
                                        PVRDMA_QP_RQ_PSN));
    assert_false(pvrdma_qp_transition_ok(PVRDMA_QPS_INIT, PVRDMA_QPS_RTR,
                                         PVRDMA_QPT_UC, PVRDMA_QP_STATE |
                                         PVRDMA_QP_AV | PVRDMA_QP_PATH_MTU |
                                         PVRDMA_QP_DEST_QPN |
                                         PVRDMA_QP_RQ_PSN |
                                         PVRDMA_QP_MIN_RNR_TIMER));
    assert_false(pvrdma_qp_transition_ok(PVRDMA_QPS_INIT, PVRDMA_QPS_RTR,
                                         PVRDMA_QPT_UC, PVRDMA_QP_STATE |
                                         PVRDMA_QP_AV | PVRDMA_QP_PATH_MTU |
                                         PVRDMA_QP_DEST_QPN));
    assert_true(pvrdma_qp_transition_ok(PVRDMA_QPS_RTR, PVRDMA_QPS_RTS,
                                        PVRDMA_QPT_UC, PVRDMA_QP_STATE |
                                        PVRDMA_QP_SQ_PSN));
    assert_false(pvrdma_qp_transition_ok(PVRDMA_QPS_RTR, PVRDMA_QPS_RTS,
                                         PVRDMA_QPT_UC, PVRDMA_QP_STATE |
                                         PVRDMA_QP_SQ_PSN |
                                         PVRDMA_QP_TIMEOUT));
    assert_true(pvrdma_qp_transition_ok(PVRDMA_QPS_SQE, PVRDMA_QPS_RTS,
                                        PVRDMA_QPT_UC, PVRDMA_QP_STATE |
                                        PVRDMA_QP_CUR_STATE |
                                        PVRDMA_QP_ACCESS_FLAGS));
    assert_false(pvrdma_qp_transition_ok(PVRDMA_QPS_RESET, PVRDMA_QPS_INIT,
                                         PVRDMA_QPT_SMI, PVRDMA_QP_STATE |
                                         PVRDMA_QP_PKEY_INDEX |
                                         PVRDMA_QP_QKEY));
    /* SQE -> RTS: UD/GSI may pass CUR_STATE/QKEY, RC nothing (as Linux) */
    assert_true(pvrdma_qp_transition_ok(PVRDMA_QPS_SQE, PVRDMA_QPS_RTS,
                                        PVRDMA_QPT_UD, PVRDMA_QP_STATE |
                                        PVRDMA_QP_CUR_STATE));
    assert_true(pvrdma_qp_transition_ok(PVRDMA_QPS_SQE, PVRDMA_QPS_RTS,
                                        PVRDMA_QPT_RC, PVRDMA_QP_STATE));
    assert_false(pvrdma_qp_transition_ok(PVRDMA_QPS_SQE, PVRDMA_QPS_RTS,
                                         PVRDMA_QPT_RC, PVRDMA_QP_STATE |
                                         PVRDMA_QP_CUR_STATE));
    /* SQD -> SQD: RC may load the primary path, UD only pkey/qkey */
    assert_true(pvrdma_qp_transition_ok(PVRDMA_QPS_SQD, PVRDMA_QPS_SQD,
                                        PVRDMA_QPT_RC, PVRDMA_QP_AV |
                                        PVRDMA_QP_PORT));
    assert_false(pvrdma_qp_transition_ok(PVRDMA_QPS_SQD, PVRDMA_QPS_SQD,
                                         PVRDMA_QPT_UD, PVRDMA_QP_AV));
    /* RTR -> RTR does not exist */
    assert_false(pvrdma_qp_transition_ok(PVRDMA_QPS_RTR, PVRDMA_QPS_RTR,
                                         PVRDMA_QPT_RC, 0));
    assert_true(pvrdma_qp_transition_ok(PVRDMA_QPS_RESET, PVRDMA_QPS_RESET,
                                        PVRDMA_QPT_RC, 0));
}

/* ---- SRQ --------------------------------------------------------------- */

static int srq_cmd(Env *e, const void *c, size_t len, uint32_t cmd,
                   union pvrdma_cmd_resp *r)
{
    union pvrdma_cmd_resp tmp;
    int ret;

    if (!r) {
        r = &tmp;
    }
    ret = fg_cmd(e->fg, c, len, r);
    assert_int_equal(r->hdr.ack, 0x80000000u + cmd);
    assert_int_equal(r->hdr.err, (uint8_t)-ret);
    return ret;
}

static int modify_srq(Env *e, uint32_t srq, uint32_t mask, uint32_t limit)
{
    struct pvrdma_cmd_modify_srq c = { .hdr.cmd = 18 };

    c.srq_handle = srq;
    c.attr_mask = mask;
    c.attrs.srq_limit = limit;
    c.attrs.max_wr = 99;        /* ignored without MAX_WR */
    return srq_cmd(e, &c, sizeof(c), 18, NULL);
}

static int query_srq(Env *e, uint32_t srq, struct pvrdma_srq_attr *a)
{
    struct pvrdma_cmd_query_srq c = { .hdr.cmd = 19 };
    union pvrdma_cmd_resp r;
    int ret;

    c.srq_handle = srq;
    ret = srq_cmd(e, &c, sizeof(c), 19, &r);
    if (a) {
        *a = r.query_srq_resp.attrs;
    }
    return ret;
}

static void test_srq(void **state)
{
    Env *e = env_new();
    struct pvrdma_cmd_create_srq c;
    struct pvrdma_srq_attr a;
    union pvrdma_cmd_resp r;
    uint32_t srq;

    (void)state;
    fg_srq_req(e->fg, &c, e->upd, 64, 3);
    c.attrs.srq_limit = 10;
    assert_int_equal(srq_cmd(e, &c, sizeof(c), 17, &r), 0);
    srq = r.create_srq_resp.srqn;
    assert_int_equal(srq, 0);
    assert_int_equal(r.create_srq_resp.reserved[0], 0);
    /* 19 is QUERY_SRQ, 18 is MODIFY_SRQ (QEMU 7.2 swapped them) */
    assert_int_equal(query_srq(e, srq, &a), 0);
    assert_int_equal(a.max_wr, 64);
    assert_int_equal(a.max_sge, 3);
    assert_int_equal(a.srq_limit, 10);
    assert_int_equal(a.reserved, 0);
    assert_int_equal(modify_srq(e, srq, PVRDMA_SRQ_LIMIT, 64), 0);
    assert_int_equal(query_srq(e, srq, &a), 0);
    assert_int_equal(a.srq_limit, 64);
    assert_int_equal(a.max_wr, 64);
    /* no resize in the VMware layout (no new ring: test_fabric_rc's
     * test_srq_resize has the extension), limit within max_wr, known
     * mask bits only */
    assert_int_equal(modify_srq(e, srq, PVRDMA_SRQ_MAX_WR, 0), -EINVAL);
    assert_int_equal(modify_srq(e, srq, PVRDMA_SRQ_MAX_WR | PVRDMA_SRQ_LIMIT,
                                1), -EINVAL);
    assert_int_equal(modify_srq(e, srq, PVRDMA_SRQ_LIMIT, 65), -EINVAL);
    assert_int_equal(modify_srq(e, srq, 4, 1), -EINVAL);
    assert_int_equal(modify_srq(e, srq, 0, 1), 0);
    assert_int_equal(query_srq(e, srq, &a), 0);
    assert_int_equal(a.srq_limit, 64);
    assert_int_equal(modify_srq(e, srq + 1, PVRDMA_SRQ_LIMIT, 1), -EINVAL);
    assert_int_equal(query_srq(e, srq + 1, NULL), -EINVAL);
    {
        struct pvrdma_cmd_query_srq q = { .hdr.cmd = 19 };

        q.srq_handle = srq;
        q.reserved[2] = 1;
        assert_int_equal(srq_cmd(e, &q, sizeof(q), 19, NULL), -EINVAL);
    }
    /* kernel SRQ on the kernel PD works too */
    assert_int_equal(fg_create_srq(e->fg, e->pd, 1, 1, &srq), 0);
    assert_int_equal(srq, 1);
    assert_int_equal(fg_destroy_srq(e->fg, 1), 0);
    assert_int_equal(fg_destroy_srq(e->fg, 1), -EINVAL);
    assert_int_equal(fg_destroy_srq(e->fg, 0), 0);
    assert_int_equal(fg_destroy_srq(e->fg, 0), -EINVAL);
    env_free(e);
}

static void test_srq_bad_create(void **state)
{
    Env *e = env_new();
    struct pvrdma_cmd_create_srq c;
    int i;

    (void)state;
    for (i = 0; i < 13; i++) {
        fg_srq_req(e->fg, &c, e->upd, 64, 3);
        switch (i) {
        case 0: c.attrs.max_wr = 0; break;
        case 1: c.attrs.max_wr = 48; break;
        case 2: c.attrs.max_wr = 8192; break;
        case 3: c.attrs.max_sge = 0; break;
        case 4: c.attrs.max_sge = 33; break;
        case 5: c.attrs.srq_limit = 65; break;
        case 6: c.srq_type = 1; break;
        case 7: c.reserved[6] = 1; break;
        case 8: c.attrs.reserved = 1; break;
        case 9: c.pd_handle = 99; break;
        case 10: c.nchunks = 1; break;     /* need 1 page (64 x 64) */
        case 11: c.nchunks = 1 + 3; break;
        case 12: c.nchunks = 0; break;
        }
        assert_int_equal(srq_cmd(e, &c, sizeof(c), 17, NULL), -EINVAL);
    }
    fg_srq_req(e->fg, &c, e->upd, 64, 3);
    c.pdir_dma = FG_BAD_ADDR;
    assert_int_equal(srq_cmd(e, &c, sizeof(c), 17, NULL), -EFAULT);
    /* the exact need (no provider doubling) is fine too */
    fg_srq_req(e->fg, &c, e->upd, 64, 3);
    c.nchunks = 1 + 1;
    assert_int_equal(srq_cmd(e, &c, sizeof(c), 17, NULL), 0);
    env_free(e);
}

static void test_srq_quota(void **state)
{
    PvrdmaCoreConfig cfg;
    Env *e;
    uint32_t srq;

    (void)state;
    pvrdma_core_default_config(&cfg);
    cfg.max_srq = 2;
    e = env_new_cfg(&cfg, 20);
    assert_int_equal(fg_create_srq(e->fg, e->pd, 16, 1, &srq), 0);
    assert_int_equal(fg_create_srq(e->fg, e->pd, 16, 1, &srq), 0);
    assert_int_equal(srq, 1);
    assert_int_equal(fg_create_srq(e->fg, e->pd, 16, 1, &srq), -ENOMEM);
    assert_int_equal(fg_destroy_pd(e->fg, e->pd), -EBUSY);
    env_free(e);

    cfg.max_srq = 0;
    e = env_new_cfg(&cfg, 20);
    assert_int_equal(fg_create_srq(e->fg, e->pd, 16, 1, &srq), -ENOMEM);
    env_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_qp_v2),
        cmocka_unit_test(test_create_qp_v1_layout),
        cmocka_unit_test(test_create_qp_bad),
        cmocka_unit_test(test_create_qp_sizes),
        cmocka_unit_test(test_qp_quota),
        cmocka_unit_test(test_qp_next_fit),
        cmocka_unit_test(test_qp_pinned_quota),
        cmocka_unit_test(test_qp_references),
        cmocka_unit_test(test_destroy_qp_bad),
        cmocka_unit_test(test_modify_rc_full_path),
        cmocka_unit_test(test_modify_ud_gsi),
        cmocka_unit_test(test_modify_illegal_transitions),
        cmocka_unit_test(test_modify_missing_required),
        cmocka_unit_test(test_modify_cur_state),
        cmocka_unit_test(test_modify_values_init),
        cmocka_unit_test(test_modify_access_extra_bits),
        cmocka_unit_test(test_modify_values_rtr_rts),
        cmocka_unit_test(test_modify_query_bad_handles),
        cmocka_unit_test(test_modify_backend_failure),
        cmocka_unit_test(test_state_table),
        cmocka_unit_test(test_srq),
        cmocka_unit_test(test_srq_bad_create),
        cmocka_unit_test(test_srq_quota),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
