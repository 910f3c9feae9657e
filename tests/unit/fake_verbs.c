/*
 * Fake guest "verbs" for the data path tests.
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

#include "fake_verbs.h"
#include "pvrdma_core_int.h"
#include "pvrdma_ring.h"

static uint32_t fv_pow2(uint32_t v)
{
    uint32_t p = 1;

    while (p < v) {
        p <<= 1;
    }
    return p;
}

static uint32_t fv_pages_for(uint64_t bytes)
{
    return (bytes + FG_PAGE - 1) / FG_PAGE;
}

/* Byte @off of the concatenation of @pages. */
static uint64_t fv_page_addr(const uint64_t *pages, uint64_t off)
{
    return pages[off / FG_PAGE] + off % FG_PAGE;
}

/* ---- CQ ------------------------------------------------------------------ */

FvCq *fv_cq_new(FakeGuest *fg, uint32_t ctx, uint32_t cqe)
{
    FvCq *cq = g_new0(FvCq, 1);

    cq->fg = fg;
    cq->n = cqe;
    cq->npages = 1 + fv_pages_for((uint64_t)cqe * 64);
    assert_true(cq->npages <= FV_MAX_PAGES);
    assert_int_equal(fg_create_cq_pages(fg, ctx, cqe, cq->npages, cq->pages,
                                        &cq->handle), 0);
    return cq;
}

static uint32_t fv_cq_prod(FvCq *cq)
{
    return fg_read32(cq->fg, cq->pages[0] + 8);
}

static uint32_t fv_cq_cons(FvCq *cq)
{
    return fg_read32(cq->fg, cq->pages[0] + 12);
}

void fv_cq_set_cons(FvCq *cq, uint32_t cons)
{
    fg_write32(cq->fg, cq->pages[0] + 12, cons);
}

uint32_t fv_cq_count(FvCq *cq)
{
    return (fv_cq_prod(cq) - fv_cq_cons(cq)) & (2 * cq->n - 1);
}

bool fv_cq_poll(FvCq *cq, struct pvrdma_cqe *cqe)
{
    uint32_t prod = fv_cq_prod(cq), cons = fv_cq_cons(cq);

    assert_true(pvrdma_ring_idx_valid(prod, cq->n));
    if (prod == cons) {
        return false;
    }
    memcpy(cqe, fg_ptr(cq->fg, cq->pages[1 + pvrdma_ring_slot(cons, cq->n) /
                                         64] +
                       (pvrdma_ring_slot(cons, cq->n) % 64) * 64),
           sizeof(*cqe));
    fv_cq_set_cons(cq, pvrdma_ring_next(cons, cq->n));
    return true;
}

int fv_cq_resize(FvCq *cq, uint32_t cqe)
{
    struct pvrdma_cmd_resize_cq_ex c = { .hdr.cmd = PVRDMA_CMD_RESIZE_CQ };
    uint64_t pages[FV_MAX_PAGES];
    union pvrdma_cmd_resp r;
    uint32_t npages = 1 + fv_pages_for((uint64_t)cqe * 64);
    int ret;

    assert_true(npages <= FV_MAX_PAGES);
    c.cq_handle = cq->handle;
    c.cqe = cqe;
    c.nchunks = npages;
    c.pdir_dma = fg_alloc_paged(cq->fg, npages, pages);
    ret = fg_cmd(cq->fg, &c, sizeof(c), &r);
    if (ret == 0) {
        assert_int_equal(r.resize_cq_resp.cqe, cqe);
        memcpy(cq->pages, pages, sizeof(pages[0]) * npages);
        cq->npages = npages;
        cq->n = cqe;
    }
    return ret;
}

/* ---- SRQ ----------------------------------------------------------------- */

static FvSrq *fv_srq_make(FakeGuest *fg, uint32_t pd, uint32_t max_wr,
                          uint32_t max_sge, uint32_t limit, uint32_t xrcd,
                          FvCq *cq)
{
    struct pvrdma_cmd_create_srq_ex x;
    struct pvrdma_cmd_create_srq *c = &x.srq;
    union pvrdma_cmd_resp r;
    FvSrq *srq = g_new0(FvSrq, 1);
    uint32_t n;

    srq->fg = fg;
    srq->n = max_wr;
    srq->wqe = fv_pow2(16 + 16 * max_sge);
    n = 1 + fv_pages_for((uint64_t)max_wr * srq->wqe);
    assert_true(n <= FV_MAX_PAGES);
    memset(&x, 0, sizeof(x));
    c->hdr.cmd = PVRDMA_CMD_CREATE_SRQ;
    c->pdir_dma = fg_alloc_paged(fg, n, srq->pages);
    c->pd_handle = pd;
    c->nchunks = n;
    c->attrs.max_wr = max_wr;
    c->attrs.max_sge = max_sge;
    c->attrs.srq_limit = limit;
    if (cq) {
        c->srq_type = PVRDMA_SRQT_XRC;
        x.xrcd_handle = xrcd;
        x.cq_handle = cq->handle;
    }
    assert_int_equal(fg_cmd(fg, &x, cq ? sizeof(x) : sizeof(*c), &r), 0);
    srq->handle = r.create_srq_resp.srqn;
    return srq;
}

FvSrq *fv_srq_new(FakeGuest *fg, uint32_t pd, uint32_t max_wr,
                  uint32_t max_sge, uint32_t limit)
{
    return fv_srq_make(fg, pd, max_wr, max_sge, limit, 0, NULL);
}

uint32_t fv_xrcd_new(FakeGuest *fg)
{
    struct pvrdma_cmd_create_xrcd c = {
        .hdr.cmd = PVRDMA_CMD_CREATE_XRCD,
    };
    union pvrdma_cmd_resp r;

    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), 0);
    assert_int_not_equal(r.create_xrcd_resp.xrcd_handle, 0);
    return r.create_xrcd_resp.xrcd_handle;
}

FvSrq *fv_xrc_srq_new(FakeGuest *fg, uint32_t pd, uint32_t xrcd, FvCq *cq,
                      uint32_t max_wr, uint32_t max_sge)
{
    return fv_srq_make(fg, pd, max_wr, max_sge, 0, xrcd, cq);
}

FvQp *fv_xrc_tgt_new(FakeGuest *fg, uint32_t xrcd)
{
    struct pvrdma_cmd_create_qp_ex x;
    union pvrdma_cmd_resp r;
    FvQp *qp = g_new0(FvQp, 1);

    memset(&x, 0, sizeof(x));
    x.qp.hdr.cmd = PVRDMA_CMD_CREATE_QP;
    x.qp.qp_type = PVRDMA_QPT_XRC_TGT;
    x.xrcd_handle = xrcd;
    assert_int_equal(fg_cmd(fg, &x, sizeof(x), &r), 0);
    qp->fg = fg;
    qp->type = PVRDMA_QPT_XRC_TGT;
    qp->handle = r.create_qp_resp_v2.qp_handle;
    qp->qpn = r.create_qp_resp_v2.qpn;
    return qp;
}

static uint32_t fv_srq_prod(FvSrq *srq)
{
    return fg_read32(srq->fg, srq->pages[0] + 8);
}

void fv_srq_set_prod(FvSrq *srq, uint32_t prod)
{
    fg_write32(srq->fg, srq->pages[0] + 8, prod);
}

void fv_srq_post(FvSrq *srq, uint64_t wr_id, const struct pvrdma_sge *sge,
                 uint32_t nsge)
{
    uint32_t prod = fv_srq_prod(srq);
    uint64_t off = (uint64_t)pvrdma_ring_slot(prod, srq->n) * srq->wqe;
    struct pvrdma_rq_wqe_hdr *h = fg_ptr(srq->fg,
                                         fv_page_addr(srq->pages + 1, off));

    memset(h, 0, srq->wqe);
    h->wr_id = wr_id;
    h->num_sge = nsge;
    if (nsge) {
        memcpy(h + 1, sge, MIN(nsge, (srq->wqe - 16) / 16) * 16);
    }
    fv_srq_set_prod(srq, pvrdma_ring_next(prod, srq->n));
}

void fv_srq_ring(FvSrq *srq)
{
    pvrdma_core_uar_write(srq->fg->core, PVRDMA_UAR_SRQ_OFFSET,
                          PVRDMA_DB_SRQ_RECV | srq->handle);
}

int fv_srq_modify_limit(FvSrq *srq, uint32_t limit)
{
    struct pvrdma_cmd_modify_srq c = { .hdr.cmd = PVRDMA_CMD_MODIFY_SRQ };

    c.srq_handle = srq->handle;
    c.attr_mask = PVRDMA_SRQ_LIMIT;
    c.attrs.srq_limit = limit;
    return fg_cmd(srq->fg, &c, sizeof(c), NULL);
}

int fv_srq_resize_nchunks(FvSrq *srq, uint32_t max_wr, uint32_t limit,
                          uint32_t mask, uint32_t nchunks)
{
    struct pvrdma_cmd_modify_srq_ex c = { .hdr.cmd = PVRDMA_CMD_MODIFY_SRQ };
    uint64_t pages[FV_MAX_PAGES];
    int ret;

    assert_true(nchunks <= FV_MAX_PAGES);
    c.srq_handle = srq->handle;
    c.attr_mask = PVRDMA_SRQ_MAX_WR | mask;
    c.attrs.max_wr = max_wr;
    c.attrs.srq_limit = limit;
    if (nchunks) {
        c.pdir_dma = fg_alloc_paged(srq->fg, nchunks, pages);
        c.nchunks = nchunks;
    }
    ret = fg_cmd(srq->fg, &c, sizeof(c), NULL);
    if (ret == 0) {
        srq->n = max_wr;
        memcpy(srq->pages, pages, nchunks * sizeof(pages[0]));
    }
    return ret;
}

int fv_srq_resize(FvSrq *srq, uint32_t max_wr)
{
    uint64_t n = 1 + fv_pages_for((uint64_t)max_wr * srq->wqe);

    /* (a size too big for the test's pages gets the most it has) */
    return fv_srq_resize_nchunks(srq, max_wr, 0, 0, MIN(n, FV_MAX_PAGES));
}

/* ---- QP ------------------------------------------------------------------ */

FvQp *fv_qp_new(FakeGuest *fg, uint8_t type, uint32_t pd, FvCq *scq,
                FvCq *rcq, FvSrq *srq, uint32_t wr, uint32_t sge,
                bool sig_all)
{
    struct pvrdma_cmd_create_qp c;
    union pvrdma_cmd_resp r;
    FvQp *qp = g_new0(FvQp, 1);
    uint32_t sq_pages, rq_pages, total;
    bool ini = type == PVRDMA_QPT_XRC_INI;

    if (ini) {
        rcq = NULL;             /* no receive side */
        srq = NULL;
    }
    qp->fg = fg;
    qp->type = type;
    qp->sq_n = wr;
    qp->rq_n = srq || ini ? 0 : wr;
    qp->sq_wqe = fv_pow2(80 + 16 * sge);
    qp->rq_wqe = fv_pow2(16 + 16 * sge);
    sq_pages = fv_pages_for((uint64_t)wr * qp->sq_wqe);
    rq_pages = srq || ini ? 0 : fv_pages_for((uint64_t)wr * qp->rq_wqe);
    total = 1 + sq_pages + rq_pages;
    assert_true(total <= FV_MAX_PAGES);
    qp->send_chunks = sq_pages;
    memset(&c, 0, sizeof(c));
    c.hdr.cmd = PVRDMA_CMD_CREATE_QP;
    c.pdir_dma = fg_alloc_paged(fg, total, qp->pages);
    c.pd_handle = pd;
    c.send_cq_handle = scq->handle;
    c.recv_cq_handle = rcq ? rcq->handle : 0;
    c.max_send_wr = wr;
    c.max_send_sge = sge;
    if (srq) {
        c.is_srq = 1;
        c.srq_handle = srq->handle;
    } else if (!ini) {
        c.max_recv_wr = wr;
        c.max_recv_sge = sge;
    }
    c.access_flags = PVRDMA_ACCESS_LOCAL_WRITE;
    c.total_chunks = total;
    c.send_chunks = sq_pages;
    c.sq_sig_all = sig_all;
    c.qp_type = type;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), 0);
    qp->handle = r.create_qp_resp_v2.qp_handle;
    qp->qpn = r.create_qp_resp_v2.qpn;
    return qp;
}

int fv_qp_rts(FvQp *a, uint32_t dqpn, uint32_t dgid_index,
              const FvConnOpts *o)
{
    uint8_t dgid[16];

    fg_test_gid(dgid_index, dgid);
    return fv_qp_rts_gid(a, dqpn, dgid, o);
}

int fv_qp_rts_gid(FvQp *a, uint32_t dqpn, const uint8_t dgid[16],
                  const FvConnOpts *o)
{
    struct pvrdma_qp_attr at;
    int ret;

    memset(&at, 0, sizeof(at));
    at.qp_state = PVRDMA_QPS_INIT;
    at.port_num = 1;
    at.qp_access_flags = o->access;
    ret = fg_modify_qp(a->fg, a->handle, PVRDMA_QP_STATE |
                       PVRDMA_QP_PKEY_INDEX | PVRDMA_QP_PORT |
                       PVRDMA_QP_ACCESS_FLAGS, &at);
    if (ret) {
        return ret;
    }
    memset(&at, 0, sizeof(at));
    at.qp_state = PVRDMA_QPS_RTR;
    at.path_mtu = PVRDMA_MTU_1024;
    at.dest_qp_num = dqpn;
    at.rq_psn = 0x1000;
    at.max_dest_rd_atomic = 4;
    at.min_rnr_timer = o->min_rnr_timer;
    at.ah_attr.ah_flags = PVRDMA_AH_FLAG_GRH;
    at.ah_attr.port_num = 1;
    at.ah_attr.grh.sgid_index = 0;
    at.ah_attr.grh.hop_limit = 64;
    at.ah_attr.sl = 3;
    memcpy(at.ah_attr.grh.dgid, dgid, 16);
    /* UC has no RNR and no READ: those attributes are not allowed. */
    ret = fg_modify_qp(a->fg, a->handle, PVRDMA_QP_STATE | PVRDMA_QP_AV |
                       PVRDMA_QP_PATH_MTU | PVRDMA_QP_DEST_QPN |
                       PVRDMA_QP_RQ_PSN |
                       (a->type == PVRDMA_QPT_UC ||
                        a->type == PVRDMA_QPT_XRC_INI ? 0 :
                        PVRDMA_QP_MAX_DEST_RD_ATOMIC |
                        PVRDMA_QP_MIN_RNR_TIMER), &at);
    if (ret) {
        return ret;
    }
    memset(&at, 0, sizeof(at));
    at.qp_state = PVRDMA_QPS_RTS;
    at.sq_psn = 0x1000;
    at.timeout = 14;
    at.retry_cnt = o->retry_cnt;
    at.rnr_retry = o->rnr_retry;
    at.max_rd_atomic = 4;
    return fg_modify_qp(a->fg, a->handle, PVRDMA_QP_STATE |
                        PVRDMA_QP_SQ_PSN |
                        (a->type == PVRDMA_QPT_UC ? 0 :
                         a->type == PVRDMA_QPT_XRC_TGT ? PVRDMA_QP_TIMEOUT :
                         PVRDMA_QP_TIMEOUT | PVRDMA_QP_RETRY_CNT |
                         PVRDMA_QP_RNR_RETRY | PVRDMA_QP_MAX_QP_RD_ATOMIC),
                        &at);
}

void fv_connect(FvQp *a, FvQp *b, const FvConnOpts *o)
{
    assert_int_equal(fv_qp_rts(a, b->qpn, 0, o), 0);
    if (a != b) {
        assert_int_equal(fv_qp_rts(b, a->qpn, 0, o), 0);
    }
}

int fv_qp_modify_state(FvQp *qp, uint32_t state)
{
    struct pvrdma_qp_attr at;

    memset(&at, 0, sizeof(at));
    at.qp_state = state;
    return fg_modify_qp(qp->fg, qp->handle, PVRDMA_QP_STATE, &at);
}

uint32_t fv_qp_state(FvQp *qp)
{
    struct pvrdma_qp_attr at;

    assert_int_equal(fg_query_qp(qp->fg, qp->handle, &at), 0);
    return at.qp_state;
}

uint32_t fv_sq_prod(FvQp *qp)
{
    return fg_read32(qp->fg, qp->pages[0] + 0);
}

uint32_t fv_sq_cons(FvQp *qp)
{
    return fg_read32(qp->fg, qp->pages[0] + 4);
}

void fv_sq_set_prod(FvQp *qp, uint32_t prod)
{
    fg_write32(qp->fg, qp->pages[0] + 0, prod);
}

void fv_rq_set_prod(FvQp *qp, uint32_t prod)
{
    fg_write32(qp->fg, qp->pages[0] + 8, prod);
}

void fv_qp_zero_indexes(FvQp *qp)
{
    memset(fg_ptr(qp->fg, qp->pages[0]), 0, 16);
}

void fv_post_send(FvQp *qp, const struct pvrdma_sq_wqe_hdr *hdr,
                  const struct pvrdma_sge *sge, uint32_t nsge)
{
    uint32_t prod = fv_sq_prod(qp);
    uint64_t off = (uint64_t)pvrdma_ring_slot(prod, qp->sq_n) * qp->sq_wqe;
    uint8_t *w = fg_ptr(qp->fg, fv_page_addr(qp->pages + 1, off));

    memset(w, 0, qp->sq_wqe);
    memcpy(w, hdr, sizeof(*hdr));
    if (nsge) {
        memcpy(w + sizeof(*hdr), sge,
               MIN(nsge, (qp->sq_wqe - 80) / 16) * 16);
    }
    fv_sq_set_prod(qp, pvrdma_ring_next(prod, qp->sq_n));
}

void fv_ring_sq(FvQp *qp)
{
    pvrdma_core_uar_write(qp->fg->core, PVRDMA_UAR_QP_OFFSET,
                          PVRDMA_DB_QP_SEND | qp->handle);
}

void fv_cq_poll_doorbell(FvCq *cq)
{
    pvrdma_core_uar_write(cq->fg->core, PVRDMA_UAR_CQ_OFFSET,
                          PVRDMA_DB_CQ_POLL | cq->handle);
}

void fv_post_recv(FvQp *qp, uint64_t wr_id, const struct pvrdma_sge *sge,
                  uint32_t nsge)
{
    uint32_t prod = fg_read32(qp->fg, qp->pages[0] + 8);
    uint64_t off = (uint64_t)pvrdma_ring_slot(prod, qp->rq_n) * qp->rq_wqe;
    struct pvrdma_rq_wqe_hdr *h =
        fg_ptr(qp->fg, fv_page_addr(qp->pages + 1 + qp->send_chunks, off));

    memset(h, 0, qp->rq_wqe);
    h->wr_id = wr_id;
    h->num_sge = nsge;
    if (nsge) {
        memcpy(h + 1, sge, MIN(nsge, (qp->rq_wqe - 16) / 16) * 16);
    }
    fv_rq_set_prod(qp, pvrdma_ring_next(prod, qp->rq_n));
}

void fv_ring_rq(FvQp *qp)
{
    pvrdma_core_uar_write(qp->fg->core, PVRDMA_UAR_QP_OFFSET,
                          PVRDMA_DB_QP_RECV | qp->handle);
}

/* ---- MRs ----------------------------------------------------------------- */

static FvMr *fv_mr_new_pages(FakeGuest *fg, uint32_t pd, uint64_t va,
                             uint64_t len, uint32_t access, bool contig)
{
    struct pvrdma_cmd_create_mr c = { .hdr.cmd = PVRDMA_CMD_CREATE_MR };
    union pvrdma_cmd_resp r;
    FvMr *mr = g_new0(FvMr, 1);

    mr->fg = fg;
    mr->va = va;
    mr->len = len;
    mr->npages = ((va & 0xfff) + len + 0xfff) >> 12;
    assert_true(mr->npages <= FV_MAX_PAGES);
    c.start = va;
    c.length = len;
    if (contig) {
        uint64_t a = fg_alloc_pages(fg, mr->npages);

        for (uint32_t i = 0; i < mr->npages; i++) {
            mr->pages[i] = a + (uint64_t)i * FG_PAGE;
        }
        c.pdir_dma = fg_build_pdir(fg, mr->pages, mr->npages);
    } else {
        c.pdir_dma = fg_alloc_paged(fg, mr->npages, mr->pages);
    }
    c.pd_handle = pd;
    c.access_flags = access;
    c.nchunks = mr->npages;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), 0);
    mr->handle = r.create_mr_resp.mr_handle;
    mr->lkey = r.create_mr_resp.lkey;
    mr->rkey = r.create_mr_resp.rkey;
    return mr;
}

FvMr *fv_mr_new(FakeGuest *fg, uint32_t pd, uint64_t va, uint64_t len,
                uint32_t access)
{
    return fv_mr_new_pages(fg, pd, va, len, access, false);
}

FvMr *fv_mr_new_contig(FakeGuest *fg, uint32_t pd, uint64_t va,
                       uint64_t len, uint32_t access)
{
    return fv_mr_new_pages(fg, pd, va, len, access, true);
}

uint8_t *fv_mr_ptr(FvMr *mr, uint64_t va)
{
    uint64_t rel;

    assert_true(va >= mr->va && va < mr->va + mr->len);
    rel = va - mr->va + (mr->va & 0xfff);
    return fg_ptr(mr->fg, mr->pages[rel >> 12] + (rel & 0xfff));
}

static uint8_t fv_pattern(uint64_t i, uint8_t seed)
{
    return (uint8_t)(i * 131 + seed * 7 + (i >> 8));
}

void fv_mr_fill(FvMr *mr, uint64_t va, uint64_t len, uint8_t seed)
{
    uint64_t i;

    for (i = 0; i < len; i++) {
        *fv_mr_ptr(mr, va + i) = fv_pattern(i, seed);
    }
}

bool fv_mr_check(FvMr *mr, uint64_t va, uint64_t len, uint8_t seed)
{
    uint64_t i;

    for (i = 0; i < len; i++) {
        if (*fv_mr_ptr(mr, va + i) != fv_pattern(i, seed)) {
            return false;
        }
    }
    return true;
}

void fv_mr_zero(FvMr *mr)
{
    uint32_t i;

    for (i = 0; i < mr->npages; i++) {
        memset(fg_ptr(mr->fg, mr->pages[i]), 0, FG_PAGE);
    }
}

FvFrmr *fv_frmr_new(FakeGuest *fg, uint32_t pd, uint32_t max_sg)
{
    struct pvrdma_cmd_create_mr c = { .hdr.cmd = PVRDMA_CMD_CREATE_MR };
    union pvrdma_cmd_resp r;
    FvFrmr *f = g_new0(FvFrmr, 1);
    uint64_t table;
    uint32_t i;

    f->fg = fg;
    f->max_sg = max_sg;
    assert_true(max_sg <= FV_MAX_PAGES);
    c.pd_handle = pd;
    c.flags = PVRDMA_MR_FLAG_FRMR;
    c.nchunks = max_sg;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), 0);
    f->handle = r.create_mr_resp.mr_handle;
    f->key = r.create_mr_resp.rkey;
    assert_int_equal(f->key, r.create_mr_resp.lkey);
    /* Like the driver: a directory and one table, filled at post time. */
    f->pl_pdir = fg_alloc_pages(fg, 1);
    table = fg_alloc_pages(fg, 1);
    *(uint64_t *)fg_ptr(fg, f->pl_pdir) = table;
    f->pl_table = fg_ptr(fg, table);
    for (i = 0; i < max_sg; i++) {
        f->pages[i] = fg_alloc_pages(fg, 2);
    }
    return f;
}

void fv_post_reg_mr(FvQp *qp, FvFrmr *f, uint64_t id, uint64_t iova,
                    uint32_t npages, uint32_t len, uint32_t access,
                    uint32_t key)
{
    struct pvrdma_sq_wqe_hdr h;
    uint32_t i;

    memset(&h, 0, sizeof(h));
    h.wr_id = id;
    h.opcode = PVRDMA_WR_FAST_REG_MR;
    h.send_flags = PVRDMA_WR_FLAG_SIGNALED;
    for (i = 0; i < npages && i < FV_MAX_PAGES; i++) {
        f->pl_table[i] = f->pages[i];
    }
    h.wr.fast_reg.iova_start = iova;
    h.wr.fast_reg.pl_pdir_dma = f->pl_pdir;
    h.wr.fast_reg.page_shift = 12;
    h.wr.fast_reg.page_list_len = npages;
    h.wr.fast_reg.length = len;
    h.wr.fast_reg.access_flags = access;
    h.wr.fast_reg.rkey = key;
    fv_post_send(qp, &h, NULL, 0);
    fv_ring_sq(qp);
}

int fv_mw_new(FakeGuest *fg, uint32_t pd, uint32_t flags, uint32_t *handle,
              uint32_t *rkey)
{
    struct pvrdma_cmd_create_mr c = { .hdr.cmd = PVRDMA_CMD_CREATE_MR };
    union pvrdma_cmd_resp r;
    int ret;

    c.pd_handle = pd;
    c.flags = flags;
    ret = fg_cmd(fg, &c, sizeof(c), &r);
    if (ret == 0) {
        *handle = r.create_mr_resp.mr_handle;
        *rkey = r.create_mr_resp.rkey;
        /* a window names no local memory */
        assert_int_equal(r.create_mr_resp.lkey, 0);
    }
    return ret;
}

void fv_post_bind_mw(FvQp *qp, uint64_t id, uint32_t rkey, uint32_t mr_lkey,
                     uint64_t addr, uint64_t len, uint32_t access)
{
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_ex_bind_mw b = {
        .addr = addr, .length = len, .rkey = rkey, .mr_lkey = mr_lkey,
        .access = access,
    };

    memset(&h, 0, sizeof(h));
    h.wr_id = id;
    h.opcode = PVRDMA_WR_BIND_MW;
    h.send_flags = PVRDMA_WR_FLAG_SIGNALED;
    memcpy((uint8_t *)&h + PVRDMA_EX_BIND_MW_OFF, &b, sizeof(b));
    fv_post_send(qp, &h, NULL, 0);
    fv_ring_sq(qp);
}

/* ---- device rings -------------------------------------------------------- */

bool fv_async_next(FakeGuest *fg, uint32_t *type, uint32_t *info)
{
    uint32_t n = (fg->async_npages - 1) * 4096 / 8;
    uint32_t prod = fg_read32(fg, fg->async_pages[0] + 8);
    uint32_t cons = fg_read32(fg, fg->async_pages[0] + 12);
    uint32_t slot = pvrdma_ring_slot(cons, n);
    struct pvrdma_eqe *e;

    if (prod == cons) {
        return false;
    }
    e = fg_ptr(fg, fg->async_pages[1 + slot / 512] + (slot % 512) * 8);
    *type = e->type;
    *info = e->info;
    fg_write32(fg, fg->async_pages[0] + 12, pvrdma_ring_next(cons, n));
    return true;
}

unsigned fv_async_count(FakeGuest *fg, uint32_t type, uint32_t info)
{
    uint32_t t, i;
    unsigned count = 0;

    while (fv_async_next(fg, &t, &i)) {
        if (t == type && i == info) {
            count++;
        }
    }
    return count;
}

bool fv_cqn_next(FakeGuest *fg, uint32_t *cq)
{
    uint32_t n = (fg->cq_npages - 1) * 4096 / 4;
    uint32_t prod = fg_read32(fg, fg->cq_pages[0] + 8);
    uint32_t cons = fg_read32(fg, fg->cq_pages[0] + 12);
    uint32_t slot = pvrdma_ring_slot(cons, n);

    if (prod == cons) {
        return false;
    }
    *cq = fg_read32(fg, fg->cq_pages[1 + slot / 1024] + (slot % 1024) * 4);
    fg_write32(fg, fg->cq_pages[0] + 12, pvrdma_ring_next(cons, n));
    return true;
}
