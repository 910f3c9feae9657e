/*
 * PVRDMA device core, data path: the work queues the guest sees
 * (docs/datapath.md, docs/architecture.md).
 *
 * The core owns every ring of a QP, whatever the backend:
 *  - doorbells: SEND drains the SQ (at most N WQEs per doorbell), RECV /
 *    SRQ make receive WQEs available (and tell the backend, which may
 *    retry a requester stalled on an RNR NAK from this QP at once), CQ
 *    POLL runs due RNR retries;
 *  - WQE fetch and validation: every WQE is copied in before it is
 *    parsed; opcodes, SGE counts, lkeys, PDs, ranges and access are
 *    checked here, local operations (LOCAL_INV, FAST_REG_MR) execute here,
 *    and a backend only ever sees a PvrdmaSendWr with resolved memory;
 *  - ring indexes: the device keeps its own consumer indexes and only
 *    reads the guest's prod_tail, validated before every use (invalid or
 *    more than N ahead: QP to ERR + QP_FATAL, spec §6.1);
 *  - CQEs: written in order, never over a full ring (CQ_ERR, dropped, and
 *    every QP using the CQ goes to ERR), notification per arming;
 *  - the error state: a QP entering ERR is queued on its core's work list
 *    and flushed (WR_FLUSH_ERR for every outstanding WQE) at the outermost
 *    pvrdma_core_leave(), so a flush never races the WQE being executed;
 *  - RNR: O(1) state per QP, one timer per device (PvrdmaCoreOps
 *    timer_mod) armed at the earliest retry deadline.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "pvrdma_core_int.h"
#include "pvrdma_abi_le.h"

/* IBA table 45: RNR NAK timer field encodings, in microseconds. */
static const uint32_t pvrdma_rnr_usec[32] = {
    655360, 10, 20, 30, 40, 60, 80, 120,
    160, 240, 320, 480, 640, 960, 1280, 1920,
    2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
    40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

static void pvrdma_wq_process_sq(PvrdmaCore *core, PvrdmaQp *qp);

#define PVRDMA_QP_FOREACH(core, h, qp) \
    PVRDMA_TABLE_FOREACH(&(core)->qp_tbl, h, qp)

/* ---- deferred work and the enter/leave bracket --------------------------- */

/* A QP's list links carry the QP as data while linked, NULL otherwise. */
static void pvrdma_wq_work_add(PvrdmaCore *core, PvrdmaQp *qp)
{
    if (!qp->wq.work_link.data) {
        qp->wq.work_link.data = qp;
        g_queue_push_tail_link(&core->work_qps, &qp->wq.work_link);
    }
}

static void pvrdma_wq_work_del(PvrdmaCore *core, PvrdmaQp *qp)
{
    if (qp->wq.work_link.data) {
        g_queue_unlink(&core->work_qps, &qp->wq.work_link);
        qp->wq.work_link.data = NULL;
    }
}

static void pvrdma_wq_flush(PvrdmaCore *core, PvrdmaQp *qp);

/* Run the deferred flushes (the outermost leave, with work queued). */
static void pvrdma_wq_run_work(PvrdmaCore *core)
{
    /* Terminates: a QP is queued only when it enters ERR or is doorbelled */
    while (core->work_qps.head) {
        PvrdmaQp *qp = core->work_qps.head->data;

        pvrdma_wq_work_del(core, qp);
        pvrdma_wq_flush(core, qp);
    }
}

/* The core's own entry and exit, inlined on the data path. */
static inline void pvrdma_wq_enter(PvrdmaCore *core)
{
    core->depth++;
}

static inline void pvrdma_wq_leave(PvrdmaCore *core)
{
    g_assert(core->depth > 0);
    if (core->depth == 1 && G_UNLIKELY(core->work_qps.head)) {
        pvrdma_wq_run_work(core);
    }
    core->depth--;
}

void pvrdma_core_enter(PvrdmaCore *core)
{
    pvrdma_wq_enter(core);
}

void pvrdma_core_leave(PvrdmaCore *core)
{
    pvrdma_wq_leave(core);
}

/* ---- RNR timing ---------------------------------------------------------- */

static void pvrdma_wq_trace_rnr(PvrdmaCore *core, PvrdmaQp *qp,
                                PvrdmaRnrEvent event, uint32_t usec)
{
    if (core->ops->trace_rnr) {
        core->ops->trace_rnr(core->opaque, qp->qpn, event, usec);
    }
}

/* Arm the device timer at the earliest deadline (or cancel it). */
void pvrdma_wq_rearm(PvrdmaCore *core)
{
    int64_t first = pvrdma_fault_deadline(core);
    GList *l;

    for (l = core->rnr_qps.head; l; l = l->next) {
        PvrdmaQp *qp = l->data;

        if (first < 0 || qp->wq.rnr_deadline < first) {
            first = qp->wq.rnr_deadline;
        }
    }
    if (first != core->timer_expire) {
        core->timer_expire = first;
        pvrdma_core_timer_mod(core, first);
    }
}

static bool pvrdma_wq_rnr_linked(PvrdmaQp *qp)
{
    return qp->wq.rnr_link.data != NULL;
}

static void pvrdma_wq_rnr_unlink(PvrdmaCore *core, PvrdmaQp *qp)
{
    if (pvrdma_wq_rnr_linked(qp)) {
        g_queue_unlink(&core->rnr_qps, &qp->wq.rnr_link);
        qp->wq.rnr_link.data = NULL;
    }
}

static void pvrdma_wq_rnr_clear(PvrdmaCore *core, PvrdmaQp *qp)
{
    qp->wq.rnr_pending = false;
    pvrdma_wq_rnr_unlink(core, qp);
}

/*
 * The SQ head got an RNR NAK with timer encoding @enc.  Returns true if
 * it waits for a retry, false if the retries are exhausted (IBA
 * 9.7.5.2.8: rnr_retry retries, 7 = forever).  Without a glue timer the
 * wait can only end with a receive being posted, so finite retry counts
 * are exhausted at once.
 */
static bool pvrdma_wq_rnr_stall(PvrdmaCore *core, PvrdmaQp *qp, uint8_t enc)
{
    PvrdmaQpWq *wq = &qp->wq;
    uint8_t retry = qp->attr.rnr_retry;
    uint32_t usec = pvrdma_rnr_usec[enc & 31];

    if (!wq->rnr_pending) {
        wq->rnr_left = retry;
    }
    if (retry != PVRDMA_RNR_INFINITE) {
        if (wq->rnr_left == 0 || !pvrdma_core_has_timer(core)) {
            return false;
        }
        wq->rnr_left--;
    }
    wq->rnr_pending = true;
    pvrdma_wq_trace_rnr(core, qp, PVRDMA_RNR_WAIT, usec);
    if (pvrdma_core_has_timer(core)) {
        wq->rnr_deadline = pvrdma_core_now_ns(core) + (int64_t)usec * 1000;
        if (!pvrdma_wq_rnr_linked(qp)) {
            wq->rnr_link.data = qp;
            g_queue_push_tail_link(&core->rnr_qps, &wq->rnr_link);
        }
        pvrdma_wq_rearm(core);
    }
    return true;
}

bool pvrdma_core_rnr_waiting(PvrdmaQp *qp)
{
    return qp->wq.rnr_pending;
}

/* Retry @qp's RNR-stalled head now. */
void pvrdma_core_rnr_kick(PvrdmaCore *core, PvrdmaQp *qp)
{
    if (!qp->wq.rnr_pending) {
        return;
    }
    pvrdma_wq_enter(core);
    pvrdma_wq_trace_rnr(core, qp, PVRDMA_RNR_KICK, 0);
    pvrdma_wq_rnr_unlink(core, qp);
    pvrdma_wq_process_sq(core, qp);
    pvrdma_wq_leave(core);
}

/* Retry every RNR-stalled QP whose deadline has passed. */
static void pvrdma_wq_run_timers(PvrdmaCore *core)
{
    int64_t now = pvrdma_core_now_ns(core);

    /*
     * Each round takes one due QP off the list; a QP that stalls again is
     * re-linked with a deadline after @now, so this terminates.
     */
    for (;;) {
        PvrdmaQp *due = NULL;
        GList *l;

        for (l = core->rnr_qps.head; l; l = l->next) {
            PvrdmaQp *qp = l->data;

            if (qp->wq.rnr_deadline <= now) {
                due = qp;
                break;
            }
        }
        if (!due) {
            break;
        }
        pvrdma_wq_trace_rnr(core, due, PVRDMA_RNR_TIMER, 0);
        pvrdma_wq_rnr_unlink(core, due);
        pvrdma_wq_process_sq(core, due);
    }
    pvrdma_wq_rearm(core);
}

/* ---- rings --------------------------------------------------------------- */

static int pvrdma_wq_read_prod(PvrdmaCore *core, const PvrdmaRing *ring,
                               uint32_t cons, uint32_t *prod)
{
    uint32_t p;

    if (pvrdma_core_dma_read(core, pvrdma_ring_prod_addr(ring), &p,
                             sizeof(p)) < 0) {
        GERR(core, RING_PROD_TAIL_UNREADABLE,
             "ring prod_tail at 0x%" G_GINT64_MODIFIER "x unreadable",
             pvrdma_ring_prod_addr(ring));
        return -EFAULT;
    }
    p = GUINT32_FROM_LE(p);
    /* Invalid index, or more entries than the ring has: corrupted. */
    if (pvrdma_ring_can_consume(p, cons, ring->n) < 0 ||
        ((p - cons) & ((ring->n << 1) - 1)) > ring->n) {
        GERR(core, RING_PROD_TAIL_INVALID_CONS_N,
             "ring prod_tail 0x%x invalid (cons 0x%x, N=%u)", p, cons,
             ring->n);
        return -EINVAL;
    }
    *prod = p;
    return 0;
}

static void pvrdma_wq_write_cons(PvrdmaCore *core, const PvrdmaRing *ring,
                                 uint32_t cons)
{
    uint32_t c = GUINT32_TO_LE(cons);

    if (pvrdma_core_dma_write(core, pvrdma_ring_cons_addr(ring), &c,
                              sizeof(c)) < 0) {
        GERR(core, RING_CONS_HEAD_UNWRITABLE,
             "ring cons_head at 0x%" G_GINT64_MODIFIER "x unwritable",
             pvrdma_ring_cons_addr(ring));
    }
}

/* ---- errors and completions ---------------------------------------------- */

static void pvrdma_wq_cancel(PvrdmaCore *core, PvrdmaQp *qp)
{
    if (qp->wq.nout) {
        if (core->be_ops->cancel) {
            core->be_ops->cancel(core->be, qp);
        }
        qp->wq.nout = 0;
    }
    qp->wq.resend = 0;
    qp->wq.sq_next = qp->wq.sq_cons;
}

void pvrdma_core_qp_error(PvrdmaCore *core, PvrdmaQp *qp, int event)
{
    if (qp->state == PVRDMA_QPS_ERR) {
        return;
    }
    qp->state = PVRDMA_QPS_ERR;
    /* Posts in ERR must ring: the doorbell flushes them. */
    pvrdma_wq_rq_hint(core, qp, false, false);
    pvrdma_wq_sq_hint(core, qp, false);
    if (event >= 0) {
        pvrdma_core_post_async_event(core, event, qp->handle);
    }
    pvrdma_wq_rnr_clear(core, qp);
    qp->wq.resend = 0;
    qp->wq.sqd_notify = false;
    if (qp->has_srq) {
        /* IBA 11.6.3.1: no more WQEs of the SRQ will be consumed. */
        pvrdma_core_post_async_event(core,
                                     PVRDMA_EQE_TYPE_QP_LAST_WQE_REACHED,
                                     qp->handle);
    }
    pvrdma_wq_work_add(core, qp);
}

void pvrdma_core_cqe_init(struct pvrdma_cqe *cqe, PvrdmaQp *qp,
                          uint64_t wr_id, uint32_t opcode, uint32_t status)
{
    memset(cqe, 0, sizeof(*cqe));
    cqe->wr_id = wr_id;
    cqe->qp = qp->handle;
    if (qp->type == PVRDMA_QPT_XRC_TGT) {
        /* Polled by processes that may not know the QP (docs/abi.md). */
        cqe->qp |= PVRDMA_CQE_QP_XRC |
                   (uint64_t)qp->qpn << PVRDMA_CQE_QP_XRC_QPN_SHIFT;
    }
    cqe->opcode = opcode;
    cqe->status = status;
    cqe->port_num = 1;
}

/*
 * Write @cqe to @cq.  @more: completions of the same QP's send queue are
 * still to come, so a poller of @cq waiting for them goes on polling.
 */
static void pvrdma_wq_post_cqe(PvrdmaCore *core, PvrdmaCq *cq,
                               const struct pvrdma_cqe *cqe, bool solicited,
                               bool more)
{
    struct pvrdma_cqe wire = *cqe;
    int ret;

    switch (cqe->status) {
    case PVRDMA_WC_SUCCESS:
    case PVRDMA_WC_WR_FLUSH_ERR:
        break;
    case PVRDMA_WC_RETRY_EXC_ERR:
        pvrdma_core_count(core, PVRDMA_CTR_RETRY_EXC_ERRS, 1);
        /* fall through */
    default:
        pvrdma_core_count(core, PVRDMA_CTR_COMPLETION_ERRS, 1);
        break;
    case PVRDMA_WC_RNR_RETRY_EXC_ERR:
        pvrdma_core_count(core, PVRDMA_CTR_RNR_RETRY_EXC_ERRS, 1);
        pvrdma_core_count(core, PVRDMA_CTR_COMPLETION_ERRS, 1);
        break;
    }
    if (cq->overrun) {
        return;
    }
    pvrdma_cqe_le(&wire);
    if (cq->timestamps) {
        uint64_t ts = GUINT64_TO_LE((uint64_t)pvrdma_core_now_ns(core));

        /* Its low 48 bits, little-endian, in reserved2 (extension). */
        memcpy((uint8_t *)&wire + PVRDMA_CQE_TS_OFF, &ts,
               PVRDMA_CQE_TS_BITS / 8);
    }
    ret = pvrdma_core_ring_produce(core, &cq->ring, &wire);
    if (ret < 0) {
        /*
         * Overrun (or a ring the guest broke): the CQE is lost, which IB
         * treats as a CQ error (IBA 11.6.3.2): report it once, stop using
         * the CQ and move every QP that completes to it to ERR.
         */
        GERR(core, CQ_CQE_QP_DROPPED_CQ_ERROR,
             "CQ %u %s: CQE of QP %u dropped, CQ in error", cq->handle,
             ret == -ENOSPC ? "overrun" : "ring broken", (uint32_t)cqe->qp);
        pvrdma_wq_cq_fail(core, cq);
        return;
    }
    if (!more) {
        pvrdma_wq_cq_poll_end(core, cq);
    }
    pvrdma_core_notify_cq(core, cq->handle,
                          solicited || cqe->status != PVRDMA_WC_SUCCESS);
}

/* Flush one queue: every outstanding WQE completes with WR_FLUSH_ERR. */
static void pvrdma_wq_flush_ring(PvrdmaCore *core, PvrdmaQp *qp,
                                 PvrdmaRing *ring, uint32_t *cons,
                                 PvrdmaCq *cq, bool sq)
{
    struct pvrdma_sq_wqe_hdr hdr;
    struct pvrdma_cqe cqe;
    uint32_t prod, n;

    if (pvrdma_wq_read_prod(core, ring, *cons, &prod) < 0) {
        return;
    }
    for (n = 0; n < ring->n && *cons != prod; n++) {
        uint32_t len = sq ? sizeof(hdr) : sizeof(struct pvrdma_rq_wqe_hdr);
        uint64_t addr = pvrdma_ring_elem_addr(ring,
                                              pvrdma_ring_slot(*cons,
                                                               ring->n));

        memset(&hdr, 0, sizeof(hdr));
        /* Nothing to read if the CQE would be dropped anyway. */
        if (!cq->overrun &&
            pvrdma_core_dma_read(core, addr, &hdr, len) < 0) {
            GERR(core, QP_WQE_UNREADABLE_WHILE_FLUSHING,
                 "QP %u: WQE at 0x%" G_GINT64_MODIFIER "x unreadable "
                 "while flushing", qp->handle, addr);
        }
        *cons = pvrdma_ring_next(*cons, ring->n);
        pvrdma_wq_write_cons(core, ring, *cons);
        pvrdma_core_cqe_init(&cqe, qp, GUINT64_FROM_LE(hdr.wr_id),
                             sq ? pvrdma_wq_wc_opcode(
                                      GUINT32_FROM_LE(hdr.opcode)) :
                             PVRDMA_WC_RECV, PVRDMA_WC_WR_FLUSH_ERR);
        pvrdma_wq_post_cqe(core, cq, &cqe, false, false);
    }
}

static void pvrdma_wq_flush(PvrdmaCore *core, PvrdmaQp *qp)
{
    if (qp->state != PVRDMA_QPS_ERR && qp->state != PVRDMA_QPS_SQE) {
        return;
    }
    pvrdma_wq_rnr_clear(core, qp);
    pvrdma_wq_cancel(core, qp);
    if (!pvrdma_qp_has_sq(qp)) {
        return;                 /* XRC_TGT: no queue of its own */
    }
    pvrdma_wq_flush_ring(core, qp, &qp->sq, &qp->wq.sq_cons,
                         pvrdma_qp_send_cq(core, qp), true);
    qp->wq.sq_next = qp->wq.sq_cons;
    /* SQE (UD, GSI): only the send queue stops; receives go on. */
    if (qp->state == PVRDMA_QPS_ERR && pvrdma_qp_has_rq(qp)) {
        pvrdma_wq_flush_ring(core, qp, &qp->rq, &qp->wq.rq_cons,
                             pvrdma_qp_recv_cq(core, qp), false);
    }
}

/* ---- keys and memory ----------------------------------------------------- */

/*
 * The MRs whose keys have @key's index (key >> 8, any key byte): the
 * core's keys are handle << 8 | key byte; a backend may choose its own
 * (core->key_mrs), which could share an index with a handle: both are
 * candidates, the callers match the rest.
 */
static void pvrdma_wq_key_index(PvrdmaCore *core, uint32_t key,
                                PvrdmaMr *cand[2])
{
    cand[0] = core->key_mrs ?
              g_hash_table_lookup(core->key_mrs, GUINT_TO_POINTER(key >> 8)) :
              NULL;
    cand[1] = pvrdma_table_lookup(&core->mr_tbl, key >> 8);
    if (cand[1] && (cand[1]->lkey >> 8) != (key >> 8)) {
        cand[1] = NULL;
    }
}

/* The MR a key names exactly (lkey == rkey). */
static PvrdmaMr *pvrdma_wq_key_mr(PvrdmaCore *core, uint32_t key)
{
    PvrdmaMr *cand[2];
    int i;

    pvrdma_wq_key_index(core, key, cand);
    for (i = 0; i < 2; i++) {
        if (cand[i] && cand[i]->lkey == key) {
            return cand[i];
        }
    }
    return NULL;
}

/*
 * A segment [va, va + len) of @mr, len > 0.  DMA MRs take any bus
 * address; user MRs their [start, start + length); fast-reg MRs only
 * while registered, within their [iova, iova + length).
 */
static bool pvrdma_wq_mr_seg(PvrdmaMr *mr, uint64_t va, uint64_t len,
                             PvrdmaSeg *seg)
{
    uint64_t end;

    if (len == 0 || va + len < va) {
        return false;
    }
    end = va + len;             /* may be 2^64 exactly: end == 0 then */
    seg->va = va;
    seg->len = len;
    seg->mr = mr;
    switch (mr->flags) {
    case PVRDMA_MR_FLAG_DMA:
        if (end == 0) {
            return false;
        }
        seg->pages = NULL;
        seg->npages = 0;
        seg->base = 0;
        return true;
    case PVRDMA_MR_FLAG_FRMR:
        if (!mr->frmr_valid || va < mr->frmr_iova ||
            len > mr->frmr_length || va - mr->frmr_iova >
            mr->frmr_length - len) {
            return false;
        }
        seg->pages = mr->frmr_pages;
        seg->npages = mr->frmr_npages;
        seg->base = mr->frmr_iova;
        return true;
    default:
        /* start + length was overflow-checked by CREATE_MR. */
        if (va < mr->start || len > mr->length ||
            va - mr->start > mr->length - len) {
            return false;
        }
        seg->pages = mr->pages;
        seg->npages = mr->npages;
        seg->base = mr->start;
        return true;
    }
}

/*
 * A segment of the MR a bound window @mw lies in: [va, va + len) of the
 * window (from 0 if it is zero-based), through @qp.  Type 2 windows
 * answer only the QP they were bound through.
 */
static bool pvrdma_wq_mw_seg(PvrdmaCore *core, PvrdmaQp *qp, PvrdmaMr *mw,
                             uint64_t va, uint64_t len, PvrdmaSeg *seg)
{
    PvrdmaMr *mr;

    if (!mw->mw_bound || len == 0 ||
        (mw->flags == PVRDMA_MR_FLAG_MW_TYPE2 &&
         mw->mw_qp_handle != qp->handle)) {
        return false;
    }
    if (mw->mw_zero_based) {
        if (va > mw->mw_len) {
            return false;
        }
        va += mw->mw_va;        /* mw_va + mw_len fits (BIND_MW) */
    }
    if (va < mw->mw_va || len > mw->mw_len ||
        va - mw->mw_va > mw->mw_len - len) {
        return false;
    }
    /* The MR cannot go while windows are bound to it (DESTROY_MR). */
    mr = pvrdma_table_lookup(&core->mr_tbl, mw->mw_mr_handle);
    return mr && pvrdma_wq_mr_seg(mr, va, len, seg);
}

bool pvrdma_core_rkey_seg(PvrdmaCore *core, PvrdmaQp *qp, uint32_t rkey,
                          uint64_t va, uint64_t len, uint32_t access,
                          PvrdmaSeg *seg)
{
    PvrdmaMr *mr = pvrdma_wq_key_mr(core, rkey);

    if (!mr || mr->pd_handle != qp->pd_handle || !(mr->access & access) ||
        !(qp->attr.qp_access_flags & access) ||
        (qp->type == PVRDMA_QPT_XRC_TGT && !qp->has_srq)) {
        return false;
    }
    if (pvrdma_mr_is_mw(mr)) {
        return pvrdma_wq_mw_seg(core, qp, mr, va, len, seg);
    }
    return pvrdma_wq_mr_seg(mr, va, len, seg);
}

/*
 * Resolve @n SGEs against @pd into @sgl; zero-length SGEs are skipped
 * (their key is not looked at).  Returns a PVRDMA_WC_* status.
 */
static uint32_t pvrdma_wq_build_sgl(PvrdmaCore *core, uint32_t pd,
                                    const struct pvrdma_sge *sges,
                                    uint32_t n, bool write, PvrdmaSgl *sgl)
{
    uint64_t total = 0;
    uint32_t i;

    sgl->core = core;
    sgl->nseg = 0;
    sgl->total = 0;
    for (i = 0; i < n; i++) {
        /* <= 32 x 2^32: no overflow */
        total += GUINT32_FROM_LE(sges[i].length);
    }
    if (total > PVRDMA_PORT_MAX_MSG_SZ) {
        return PVRDMA_WC_LOC_LEN_ERR;
    }
    for (i = 0; i < n; i++) {
        uint64_t addr = GUINT64_FROM_LE(sges[i].addr);
        uint32_t len = GUINT32_FROM_LE(sges[i].length);
        PvrdmaMr *mr;

        if (len == 0) {
            continue;
        }
        mr = pvrdma_wq_key_mr(core, GUINT32_FROM_LE(sges[i].lkey));
        /* A window's key is an rkey only. */
        if (!mr || pvrdma_mr_is_mw(mr) || mr->pd_handle != pd ||
            (write && !(mr->access & PVRDMA_ACCESS_LOCAL_WRITE)) ||
            !pvrdma_wq_mr_seg(mr, addr, len, &sgl->seg[sgl->nseg])) {
            return PVRDMA_WC_LOC_PROT_ERR;
        }
        sgl->nseg++;
    }
    sgl->total = total;
    return PVRDMA_WC_SUCCESS;
}

/* Same rules as CREATE_MR (IBA 10.6.3.1). */
static bool pvrdma_wq_access_ok(uint32_t access)
{
    if (access & ~PVRDMA_MR_ACCESS_VALID) {
        return false;
    }
    return !((access & (PVRDMA_ACCESS_REMOTE_WRITE |
                        PVRDMA_ACCESS_REMOTE_ATOMIC)) &&
             !(access & PVRDMA_ACCESS_LOCAL_WRITE));
}

/* The fast-reg MR of @qp's PD that @key names (any key byte). */
static PvrdmaMr *pvrdma_wq_frmr(PvrdmaCore *core, PvrdmaQp *qp, uint32_t key)
{
    PvrdmaMr *cand[2];
    int i;

    pvrdma_wq_key_index(core, key, cand);
    for (i = 0; i < 2; i++) {
        if (cand[i] && cand[i]->flags == PVRDMA_MR_FLAG_FRMR &&
            cand[i]->pd_handle == qp->pd_handle) {
            return cand[i];
        }
    }
    return NULL;
}

/* The memory window whose keys have @key's index (any key byte). */
static PvrdmaMr *pvrdma_wq_mw(PvrdmaCore *core, uint32_t key)
{
    PvrdmaMr *cand[2];
    int i;

    pvrdma_wq_key_index(core, key, cand);
    for (i = 0; i < 2; i++) {
        if (cand[i] && pvrdma_mr_is_mw(cand[i])) {
            return cand[i];
        }
    }
    return NULL;
}

/*
 * The type 2 window @rkey names exactly, bound through @qp: the only
 * windows that can be invalidated (IBA 10.6.7.2), locally or remotely.
 */
static PvrdmaMr *pvrdma_wq_inv_mw(PvrdmaCore *core, PvrdmaQp *qp,
                                  uint32_t rkey)
{
    PvrdmaMr *mw = pvrdma_wq_mw(core, rkey);

    if (mw && mw->flags == PVRDMA_MR_FLAG_MW_TYPE2 && mw->mw_bound &&
        mw->rkey == rkey && mw->mw_qp_handle == qp->handle) {
        return mw;
    }
    return NULL;
}

bool pvrdma_core_inv_ok(PvrdmaCore *core, PvrdmaQp *qp, uint32_t rkey)
{
    PvrdmaMr *mr = pvrdma_wq_frmr(core, qp, rkey);

    if ((!mr || mr->rkey != rkey) && !pvrdma_wq_inv_mw(core, qp, rkey)) {
        GERR(core, QP_INVALIDATION_KEY_NO_FAST_REG,
             "QP %u: invalidation of key 0x%x: no fast-reg MR of "
             "this PD, no type 2 window bound through this QP",
             qp->handle, rkey);
        return false;
    }
    return true;
}

void pvrdma_wq_mw_unbind(PvrdmaCore *core, PvrdmaMr *mw)
{
    PvrdmaMr *mr;
    PvrdmaQp *qp;

    if (!mw->mw_bound) {
        return;
    }
    mr = pvrdma_table_lookup(&core->mr_tbl, mw->mw_mr_handle);
    if (mr) {
        mr->mw_binds--;
    }
    if (mw->flags == PVRDMA_MR_FLAG_MW_TYPE2) {
        qp = pvrdma_table_lookup(&core->qp_tbl, mw->mw_qp_handle);
        if (qp) {
            qp->mw_binds--;
        }
    }
    mw->mw_bound = false;
    mw->access = 0;
}

void pvrdma_core_invalidate(PvrdmaCore *core, PvrdmaQp *qp, uint32_t rkey)
{
    PvrdmaMr *mr = pvrdma_wq_inv_mw(core, qp, rkey);

    if (mr) {
        pvrdma_wq_mw_unbind(core, mr);
        return;
    }
    mr = pvrdma_wq_frmr(core, qp, rkey);
    if (mr && mr->rkey == rkey) {
        mr->frmr_valid = false;
    }
}

#define PVRDMA_MW_ACCESS_VALID  (PVRDMA_ACCESS_REMOTE_WRITE | \
                                 PVRDMA_ACCESS_REMOTE_READ | \
                                 PVRDMA_ACCESS_REMOTE_ATOMIC | \
                                 PVRDMA_ACCESS_ZERO_BASED)

/* A backend's answer to a local operation that lets the core commit it. */
static bool pvrdma_wq_st_ok(uint32_t st)
{
    return st == PVRDMA_WC_SUCCESS || st == PVRDMA_WC_PENDING;
}

/*
 * BIND_MW (project extension PVRDMA_EX_CAP_MW): bind a window of @qp's
 * PD to a range of an MR with MW_BIND access (IBA 10.6.7.2).  A type 1
 * window is rebound at will and a length of 0 unbinds it; a type 2 window
 * must be free (never bound, or invalidated) and is then bound through
 * @qp alone.
 */
static uint32_t pvrdma_wq_bind_mw(PvrdmaCore *core, PvrdmaQp *qp,
                                  const uint8_t *wqe)
{
    const struct pvrdma_ex_bind_mw *b =
        (const void *)(wqe + PVRDMA_EX_BIND_MW_OFF);
    uint64_t addr = GUINT64_FROM_LE(b->addr);
    uint64_t len = GUINT64_FROM_LE(b->length);
    uint32_t rkey = GUINT32_FROM_LE(b->rkey);
    uint32_t lkey = GUINT32_FROM_LE(b->mr_lkey);
    /* Local write means nothing for a window: ignored, as IBA lets it be. */
    uint32_t access = GUINT32_FROM_LE(b->access) & ~PVRDMA_ACCESS_LOCAL_WRITE;
    PvrdmaMr *mw = pvrdma_wq_mw(core, rkey);
    PvrdmaMwBind bind = {
        .rkey = rkey, .addr = addr, .len = len, .access = access,
    };
    PvrdmaMr *mr;
    PvrdmaSeg seg;
    bool type2;
    uint32_t st = PVRDMA_WC_SUCCESS;

    if (!mw || mw->pd_handle != qp->pd_handle) {
        GERR(core, QP_BIND_MW_NO_WINDOW,
             "QP %u: BIND_MW key 0x%x: no memory window of this PD",
             qp->handle, rkey);
        return PVRDMA_WC_MW_BIND_ERR;
    }
    type2 = mw->flags == PVRDMA_MR_FLAG_MW_TYPE2;
    if (type2 && mw->mw_bound) {
        GERR(core, QP_BIND_MW_TYPE_2_WINDOW_STILL,
             "QP %u: BIND_MW key 0x%x: type 2 window still bound",
             qp->handle, rkey);
        return PVRDMA_WC_MW_BIND_ERR;
    }
    if (!type2 && len == 0) {
        if (core->be_ops->mw_bind) {
            bind.mr = mw->mw_bound ?
                      pvrdma_table_lookup(&core->mr_tbl, mw->mw_mr_handle) :
                      NULL;
            st = core->be_ops->mw_bind(core->be, qp, mw, &bind);
            if (!pvrdma_wq_st_ok(st)) {
                return st;
            }
        }
        pvrdma_wq_mw_unbind(core, mw);
        mw->lkey = rkey;
        mw->rkey = rkey;
        return st;
    }
    mr = pvrdma_wq_key_mr(core, lkey);
    if (!mr || pvrdma_mr_is_mw(mr) || mr->flags == PVRDMA_MR_FLAG_DMA ||
        mr->pd_handle != qp->pd_handle ||
        !(mr->access & PVRDMA_ACCESS_MW_BIND)) {
        GERR(core, QP_BIND_MW_MR_KEY_NO,
             "QP %u: BIND_MW: MR key 0x%x: no MR of this PD with "
             "MW_BIND access", qp->handle, lkey);
        return PVRDMA_WC_MW_BIND_ERR;
    }
    /* Remote write and atomics need local write on the MR (IBA o10-37). */
    if ((access & ~PVRDMA_MW_ACCESS_VALID) ||
        ((access & PVRDMA_ACCESS_ZERO_BASED) && !type2) ||
        ((access & (PVRDMA_ACCESS_REMOTE_WRITE |
                    PVRDMA_ACCESS_REMOTE_ATOMIC)) &&
         !(mr->access & PVRDMA_ACCESS_LOCAL_WRITE)) ||
        !pvrdma_wq_mr_seg(mr, addr, len, &seg)) {
        GERR(core, QP_BIND_MW_RANGE_ACCESS,
             "QP %u: BIND_MW: range 0x%" G_GINT64_MODIFIER "x+%"
             G_GUINT64_FORMAT " or access 0x%x not within MR key 0x%x",
             qp->handle, addr, len, access, lkey);
        return PVRDMA_WC_MW_BIND_ERR;
    }
    if (core->be_ops->mw_bind) {
        bind.mr = mr;
        st = core->be_ops->mw_bind(core->be, qp, mw, &bind);
        if (!pvrdma_wq_st_ok(st)) {
            return st;
        }
    }
    pvrdma_wq_mw_unbind(core, mw);
    mw->mw_bound = true;
    mw->mw_mr_handle = mr->handle;
    mr->mw_binds++;
    if (type2) {
        mw->mw_qp_handle = qp->handle;
        qp->mw_binds++;
    }
    mw->mw_va = addr;
    mw->mw_len = len;
    mw->mw_zero_based = access & PVRDMA_ACCESS_ZERO_BASED;
    mw->access = access & ~PVRDMA_ACCESS_ZERO_BASED;
    mw->lkey = rkey;
    mw->rkey = rkey;
    return st;
}

/*
 * REG_MR (FAST_REG_MR): bind a page list to a free fast-reg MR.  The
 * page list is the table of the PDIR at pl_pdir_dma (the driver inserts
 * the MR's page addresses there at post time, spec §8.2).
 */
static uint32_t pvrdma_wq_reg_mr(PvrdmaCore *core, PvrdmaQp *qp,
                                 const struct pvrdma_sq_wqe_hdr *hdr)
{
    uint64_t iova = GUINT64_FROM_LE(hdr->wr.fast_reg.iova_start);
    uint32_t n = GUINT32_FROM_LE(hdr->wr.fast_reg.page_list_len);
    uint32_t len = GUINT32_FROM_LE(hdr->wr.fast_reg.length);
    uint32_t access = GUINT32_FROM_LE(hdr->wr.fast_reg.access_flags);
    uint32_t rkey = GUINT32_FROM_LE(hdr->wr.fast_reg.rkey);
    uint32_t shift = GUINT32_FROM_LE(hdr->wr.fast_reg.page_shift);
    PvrdmaMr *mr = pvrdma_wq_frmr(core, qp, rkey);
    uint64_t *pages;

    if (!mr || mr->frmr_valid) {
        GERR(core, QP_REG_MR_KEY_NO_FREE,
             "QP %u: REG_MR key 0x%x: no free fast-reg MR of this PD",
             qp->handle, rkey);
        return PVRDMA_WC_LOC_QP_OP_ERR;
    }
    access &= ~PVRDMA_ACCESS_OPTIONAL_RANGE;
    if (shift != PVRDMA_PAGE_SHIFT || n == 0 ||
        n > mr->max_sg || !pvrdma_wq_access_ok(access) ||
        iova + len < iova ||
        (iova & (PVRDMA_PAGE_SIZE - 1)) + (uint64_t)len >
        (uint64_t)n << PVRDMA_PAGE_SHIFT) {
        GERR(core, QP_REG_MR_PAGE_SHIFT_PAGES,
             "QP %u: REG_MR: page_shift %u, %u pages (max %u), "
             "length %u, iova 0x%" G_GINT64_MODIFIER "x, access 0x%x",
             qp->handle, shift, n, mr->max_sg, len, iova, access);
        return PVRDMA_WC_LOC_QP_OP_ERR;
    }
    /* Copies the list in and checks every address (n <= 128). */
    if (pvrdma_pdir_read(core, GUINT64_FROM_LE(hdr->wr.fast_reg.pl_pdir_dma),
                         n, &pages) < 0) {
        return PVRDMA_WC_LOC_PROT_ERR;
    }
    memcpy(mr->frmr_pages, pages, n * sizeof(uint64_t));
    g_free(pages);
    mr->frmr_npages = n;
    mr->frmr_iova = iova;
    mr->frmr_length = len;
    mr->frmr_valid = true;
    mr->access = access;
    mr->lkey = rkey;
    mr->rkey = rkey;
    if (core->be_ops->mr_fastreg) {
        uint32_t st = core->be_ops->mr_fastreg(core->be, qp, mr, true);

        if (!pvrdma_wq_st_ok(st)) {
            mr->frmr_valid = false;
        }
        return st;
    }
    return PVRDMA_WC_SUCCESS;
}

static uint32_t pvrdma_wq_local_inv(PvrdmaCore *core, PvrdmaQp *qp,
                                    uint32_t rkey)
{
    uint32_t st = PVRDMA_WC_SUCCESS;
    PvrdmaMr *mr;

    if (!pvrdma_core_inv_ok(core, qp, rkey)) {
        return PVRDMA_WC_LOC_QP_OP_ERR;
    }
    mr = pvrdma_wq_inv_mw(core, qp, rkey);
    if (mr && core->be_ops->mw_bind) {
        st = core->be_ops->mw_bind(core->be, qp, mr, NULL);
    }
    mr = mr ? NULL : pvrdma_wq_frmr(core, qp, rkey);
    if (mr && mr->rkey == rkey && mr->frmr_valid &&
        core->be_ops->mr_fastreg) {
        st = core->be_ops->mr_fastreg(core->be, qp, mr, false);
    }
    if (!pvrdma_wq_st_ok(st)) {
        return st;
    }
    pvrdma_core_invalidate(core, qp, rkey);
    return st;
}

int pvrdma_core_mr_pin(PvrdmaCore *core, PvrdmaMr *mr)
{
    uint32_t i, n;

    if (mr->flags != 0 || !mr->npages) {
        return -EINVAL;
    }
    if (mr->pinned) {
        return 0;
    }
    mr->pinned = g_new0(void *, mr->npages);
    mr->pin_run = g_new0(uint32_t, mr->npages);
    /* One mapping per run of guest-physically contiguous pages. */
    for (i = 0; i < mr->npages; i += n) {
        uint64_t len;
        uint8_t *p;
        uint32_t j;

        n = 1;
        while (i + n < mr->npages &&
               mr->pages[i + n] == mr->pages[i] + n * PVRDMA_PAGE_SIZE) {
            n++;
        }
        len = (uint64_t)n * PVRDMA_PAGE_SIZE;
        p = pvrdma_core_dma_map(core, mr->pages[i], &len, true);
        if (p && len < PVRDMA_PAGE_SIZE) {
            pvrdma_core_dma_unmap(core, p, len, true, 0);
            p = NULL;
        }
        if (!p) {
            GERR(core, MR_PAGE_NOT_RAM_CANNOT_PIN,
                 "MR %u: page 0x%" G_GINT64_MODIFIER "x is not RAM, "
                 "cannot pin", mr->handle, mr->pages[i]);
            pvrdma_core_mr_unpin(core, mr);
            return -EFAULT;
        }
        /* A short mapping (a RAM block ends) keeps its whole pages. */
        n = MIN(n, len / PVRDMA_PAGE_SIZE);
        mr->pin_run[i] = n;
        for (j = 0; j < n; j++) {
            mr->pinned[i + j] = p + (uint64_t)j * PVRDMA_PAGE_SIZE;
        }
    }
    return 0;
}

void pvrdma_core_mr_unpin(PvrdmaCore *core, PvrdmaMr *mr)
{
    uint32_t i;

    if (!mr->pinned) {
        return;
    }
    for (i = 0; i < mr->npages; i++) {
        uint64_t len = (uint64_t)mr->pin_run[i] * PVRDMA_PAGE_SIZE;

        if (mr->pin_run[i]) {
            /* Whatever the guest wrote to it through RDMA is dirty. */
            pvrdma_core_dma_unmap(core, mr->pinned[i], len, true, len);
        }
    }
    g_free(mr->pinned);
    g_free(mr->pin_run);
    mr->pinned = NULL;
    mr->pin_run = NULL;
}

/* ---- receive queues ------------------------------------------------------ */

void pvrdma_wq_cq_fail(PvrdmaCore *core, PvrdmaCq *cq)
{
    PvrdmaQp *qp;
    uint32_t h;

    if (cq->overrun) {
        return;
    }
    cq->overrun = true;
    pvrdma_core_post_async_event(core, PVRDMA_EQE_TYPE_CQ_ERR, cq->handle);
    PVRDMA_QP_FOREACH(core, h, qp) {
        /* An XRC_TGT QP has a CQ only while bound: its SRQ's. */
        bool uses = qp->type == PVRDMA_QPT_XRC_TGT ?
                    qp->has_srq && qp->recv_cq_handle == cq->handle :
                    qp->send_cq_handle == cq->handle ||
                    qp->recv_cq_handle == cq->handle;

        if (uses) {
            pvrdma_core_qp_error(core, qp, -1);
        }
    }
}

void pvrdma_wq_srq_fail(PvrdmaCore *core, PvrdmaSrq *srq)
{
    PvrdmaQp *qp;
    uint32_t h;

    if (srq->failed) {
        return;
    }
    srq->failed = true;
    pvrdma_core_post_async_event(core, PVRDMA_EQE_TYPE_SRQ_ERR, srq->handle);
    PVRDMA_QP_FOREACH(core, h, qp) {
        if (qp->has_srq && qp->srq_handle == srq->handle) {
            pvrdma_core_qp_error(core, qp, -1);
        }
    }
}

int pvrdma_core_recv_peek(PvrdmaCore *core, PvrdmaQp *qp, PvrdmaRecvWr *rwr,
                          bool resolve)
{
    uint64_t wqe[PVRDMA_MAX_WQE / sizeof(uint64_t)] PVRDMA_UNINIT;
    const struct pvrdma_rq_wqe_hdr *hdr = (const void *)wqe;
    PvrdmaSrq *srq = pvrdma_qp_srq(core, qp);
    PvrdmaRing *ring;
    uint32_t cons, prod, size, max_sge, nsge;

    if (srq) {
        if (srq->failed) {
            return -1;
        }
        ring = &srq->ring;
        cons = srq->cons;
        size = srq->wqe_size;
        max_sge = srq->max_sge;
    } else {
        ring = &qp->rq;
        cons = qp->wq.rq_cons;
        size = qp->rq_wqe_size;
        max_sge = qp->attr.cap.max_recv_sge;
    }
    g_assert(size <= sizeof(wqe));
    if (pvrdma_wq_read_prod(core, ring, cons, &prod) < 0) {
        goto broken;
    }
    if (prod == cons && !srq && qp->rq_db_skip) {
        /* Ask for the next doorbell, then look again (the hint's race). */
        pvrdma_wq_rq_hint(core, qp, false, false);
        if (pvrdma_wq_read_prod(core, ring, cons, &prod) < 0) {
            goto broken;
        }
    }
    if (prod == cons) {
        return 0;
    }
    if (pvrdma_core_dma_read(core,
                             pvrdma_ring_elem_addr(ring,
                                 pvrdma_ring_slot(cons, ring->n)),
                             wqe, size) < 0) {
        GERR(core, QP_RECEIVE_WQE_UNREADABLE,
             "QP %u: receive WQE unreadable", qp->handle);
        goto broken;
    }
    rwr->wr_id = GUINT64_FROM_LE(hdr->wr_id);
    rwr->status = PVRDMA_WC_SUCCESS;
    rwr->sgl.nseg = 0;
    rwr->sgl.total = 0;
    if (!resolve) {
        return 1;
    }
    nsge = GUINT32_FROM_LE(hdr->num_sge);
    /* The SRQ's or RQ's max_sge bounds the WQE slot too. */
    if (nsge > max_sge) {
        GERR(core, QP_RECEIVE_WQE_SGES_MAX,
             "QP %u: receive WQE with %u SGEs (max %u)", qp->handle,
             nsge, max_sge);
        rwr->status = PVRDMA_WC_LOC_LEN_ERR;
        return 1;
    }
    rwr->status = pvrdma_wq_build_sgl(core, srq ? srq->pd_handle :
                                      qp->pd_handle,
                                      (const void *)(hdr + 1), nsge, true,
                                      &rwr->sgl);
    if (rwr->status != PVRDMA_WC_SUCCESS) {
        rwr->status = PVRDMA_WC_LOC_PROT_ERR;
    }
    return 1;

broken:
    if (srq) {
        pvrdma_wq_srq_fail(core, srq);
    } else {
        pvrdma_core_qp_error(core, qp, PVRDMA_EQE_TYPE_QP_FATAL);
    }
    return -1;
}

static void pvrdma_wq_recv_consume(PvrdmaCore *core, PvrdmaQp *qp)
{
    PvrdmaSrq *srq = pvrdma_qp_srq(core, qp);

    if (srq) {
        uint32_t prod;

        srq->cons = pvrdma_ring_next(srq->cons, srq->ring.n);
        pvrdma_wq_write_cons(core, &srq->ring, srq->cons);
        /* IBA 10.2.9.5: one event when the level drops below the limit. */
        if (srq->limit_armed && !core->be_ops->srq_limit_by_backend &&
            pvrdma_wq_read_prod(core, &srq->ring, srq->cons, &prod) == 0 &&
            ((prod - srq->cons) & ((srq->ring.n << 1) - 1)) <
            srq->srq_limit) {
            pvrdma_core_srq_limit_reached(core, srq);
        }
    } else {
        qp->wq.rq_cons = pvrdma_ring_next(qp->wq.rq_cons, qp->rq.n);
        pvrdma_wq_write_cons(core, &qp->rq, qp->wq.rq_cons);
    }
}

void pvrdma_core_recv_done(PvrdmaCore *core, PvrdmaQp *qp,
                           const struct pvrdma_cqe *cqe, bool solicited)
{
    pvrdma_wq_recv_consume(core, qp);
    pvrdma_wq_post_cqe(core, pvrdma_qp_recv_cq(core, qp), cqe, solicited,
                       false);
}

int pvrdma_core_recv_take(PvrdmaCore *core, PvrdmaQp *qp, PvrdmaRecvWr *rwr)
{
    int ret = pvrdma_core_recv_peek(core, qp, rwr, true);

    if (ret == 1) {
        pvrdma_wq_recv_consume(core, qp);
    }
    return ret;
}

void pvrdma_core_recv_complete(PvrdmaCore *core, PvrdmaQp *qp,
                               const struct pvrdma_cqe *cqe, bool solicited)
{
    pvrdma_wq_post_cqe(core, pvrdma_qp_recv_cq(core, qp), cqe, solicited,
                       false);
}

bool pvrdma_core_xrc_bind(PvrdmaCore *core, PvrdmaQp *qp, uint32_t srqn)
{
    PvrdmaSrq *srq = srqn <= PVRDMA_XRC_SRQN_MASK ?
                     pvrdma_table_lookup(&core->srq_tbl, srqn) : NULL;

    g_assert(qp->type == PVRDMA_QPT_XRC_TGT);
    if (!srq || !srq->xrc || srq->xrcd_handle != qp->xrcd_handle) {
        qp->has_srq = false;
        qp->srq_handle = 0;
        qp->pd_handle = 0;
        qp->recv_cq_handle = 0;
        return false;
    }
    /* IBA 11.5.4: keys are checked against the SRQ's PD. */
    qp->has_srq = true;
    qp->srq_handle = srq->handle;
    qp->pd_handle = srq->pd_handle;
    qp->recv_cq_handle = srq->cq_handle;
    return true;
}

void pvrdma_core_qp_comm_est(PvrdmaCore *core, PvrdmaQp *qp)
{
    if (qp->state == PVRDMA_QPS_RTR && !qp->wq.comm_est) {
        qp->wq.comm_est = true;
        pvrdma_core_post_async_event(core, PVRDMA_EQE_TYPE_COMM_EST,
                                     qp->handle);
    }
}

void pvrdma_core_srq_limit_reached(PvrdmaCore *core, PvrdmaSrq *srq)
{
    if (srq->limit_armed) {
        srq->limit_armed = false;
        srq->srq_limit = 0;
        pvrdma_core_post_async_event(core, PVRDMA_EQE_TYPE_SRQ_LIMIT_REACHED,
                                     srq->handle);
    }
}

void pvrdma_wq_srq_limit_set(PvrdmaSrq *srq)
{
    srq->limit_armed = srq->srq_limit > 0;
}

int pvrdma_wq_srq_posted(PvrdmaCore *core, PvrdmaSrq *srq, uint32_t *prod)
{
    return pvrdma_wq_read_prod(core, &srq->ring, srq->cons, prod);
}

/* ---- send queue ---------------------------------------------------------- */

uint32_t pvrdma_wq_wc_opcode(uint32_t wr_opcode)
{
    switch (wr_opcode) {
    case PVRDMA_WR_RDMA_WRITE:
    case PVRDMA_WR_RDMA_WRITE_WITH_IMM:
        return PVRDMA_WC_RDMA_WRITE;
    case PVRDMA_WR_RDMA_READ:
        return PVRDMA_WC_RDMA_READ;
    case PVRDMA_WR_ATOMIC_CMP_AND_SWP:
        return PVRDMA_WC_COMP_SWAP;
    case PVRDMA_WR_ATOMIC_FETCH_AND_ADD:
        return PVRDMA_WC_FETCH_ADD;
    case PVRDMA_WR_LOCAL_INV:
        return PVRDMA_WC_LOCAL_INV;
    case PVRDMA_WR_FAST_REG_MR:
        return PVRDMA_WC_FAST_REG_MR;
    case PVRDMA_WR_MASKED_ATOMIC_CMP_AND_SWP:
        return PVRDMA_WC_MASKED_COMP_SWAP;
    case PVRDMA_WR_MASKED_ATOMIC_FETCH_AND_ADD:
        return PVRDMA_WC_MASKED_FETCH_ADD;
    case PVRDMA_WR_BIND_MW:
        return PVRDMA_WC_BIND_MW;
    case PVRDMA_WR_ATOMIC_WRITE:
        return PVRDMA_WC_ATOMIC_WRITE;
    case PVRDMA_WR_LSO:
        return PVRDMA_WC_LSO;
    default:
        /* SEND, SEND_WITH_IMM, SEND_WITH_INV and anything unknown. */
        return PVRDMA_WC_SEND;
    }
}

static bool pvrdma_wq_is_remote_op(uint32_t op)
{
    switch (op) {
    case PVRDMA_WR_SEND:
    case PVRDMA_WR_SEND_WITH_IMM:
    case PVRDMA_WR_SEND_WITH_INV:
    case PVRDMA_WR_RDMA_WRITE:
    case PVRDMA_WR_RDMA_WRITE_WITH_IMM:
    case PVRDMA_WR_RDMA_READ:
    case PVRDMA_WR_ATOMIC_CMP_AND_SWP:
    case PVRDMA_WR_ATOMIC_FETCH_AND_ADD:
    case PVRDMA_WR_ATOMIC_WRITE:
        return true;
    default:
        return false;
    }
}

static bool pvrdma_wq_is_atomic(uint32_t op)
{
    return op == PVRDMA_WR_ATOMIC_CMP_AND_SWP ||
           op == PVRDMA_WR_ATOMIC_FETCH_AND_ADD;
}

/* The SGEs of a send WQE must fit the QP's limit, hence the WQE slot. */
static bool pvrdma_wq_send_sges_ok(PvrdmaCore *core, PvrdmaQp *qp,
                                   uint32_t nsge, uint32_t *status)
{
    if (nsge > qp->attr.cap.max_send_sge ||
        nsge > (qp->sq_wqe_size - sizeof(struct pvrdma_sq_wqe_hdr)) /
               sizeof(struct pvrdma_sge)) {
        GERR(core, QP_SEND_WQE_SGES_MAX,
             "QP %u: send WQE with %u SGEs (max %u)", qp->handle,
             nsge, qp->attr.cap.max_send_sge);
        *status = PVRDMA_WC_LOC_LEN_ERR;
        return false;
    }
    return true;
}

/*
 * The send WQE of a UD or GSI QP: SEND or SEND_WITH_IMM of at most the
 * port MTU (UD has no segmentation), to the WR's address vector.
 */
static bool pvrdma_wq_prepare_ud(PvrdmaCore *core, PvrdmaQp *qp,
                                 const uint8_t *wqe, PvrdmaSendWr *wr,
                                 uint32_t *status)
{
    const struct pvrdma_sq_wqe_hdr *hdr = (const void *)wqe;
    const struct pvrdma_sge *sges =
        (const void *)(wqe + sizeof(struct pvrdma_sq_wqe_hdr));
    uint32_t op = GUINT32_FROM_LE(hdr->opcode);
    uint32_t nsge = GUINT32_FROM_LE(hdr->num_sge);
    uint32_t stf = GUINT32_FROM_LE(hdr->wr.ud.av.sl_tclass_flowlabel);
    const uint8_t *sgid;
    uint8_t gid_type;
    uint32_t st;

    if (op != PVRDMA_WR_SEND && op != PVRDMA_WR_SEND_WITH_IMM) {
        GERR(core, QP_SEND_UD_OPCODE,
             "QP %u: opcode %u on a UD/GSI QP (SEND and SEND_WITH_IMM "
             "only)", qp->handle, op);
        *status = PVRDMA_WC_LOC_QP_OP_ERR;
        return false;
    }
    if (!pvrdma_wq_send_sges_ok(core, qp, nsge, status)) {
        return false;
    }
    st = pvrdma_wq_build_sgl(core, qp->pd_handle, sges, nsge, false,
                             &wr->local);
    if (st == PVRDMA_WC_SUCCESS &&
        wr->local.total > PVRDMA_PORT_UD_MAX_MSG) {
        st = PVRDMA_WC_LOC_LEN_ERR;
    }
    if (st != PVRDMA_WC_SUCCESS) {
        *status = st;
        return false;
    }
    /* An address vector whose source GID is not bound cannot be sent. */
    sgid = pvrdma_core_sgid(core, hdr->wr.ud.av.gid_index, &gid_type);
    if (!sgid) {
        *status = PVRDMA_WC_LOC_QP_OP_ERR;
        return false;
    }
    memset(wr, 0, offsetof(PvrdmaSendWr, local));
    wr->opcode = op;
    wr->solicited = GUINT32_FROM_LE(hdr->send_flags) &
                    PVRDMA_WR_FLAG_SOLICITED;
    wr->imm_data = hdr->ex.imm_data;
    wr->length = wr->local.total;
    wr->src_qpn = qp->qpn;
    wr->dst_qpn = GUINT32_FROM_LE(hdr->wr.ud.remote_qpn) &
                  PVRDMA_QPN_MASK;
    memcpy(wr->sgid, sgid, sizeof(wr->sgid));
    memcpy(wr->dgid, hdr->wr.ud.av.dgid, sizeof(wr->dgid));
    wr->sl = 0;                 /* the AV does not carry it (spec §8.2) */
    wr->ud = true;
    wr->uc = false;
    /* IBA 10.2.5: a WR Q_Key with bit 31 set means the QP's own. */
    wr->qkey = GUINT32_FROM_LE(hdr->wr.ud.remote_qkey);
    if (wr->qkey & 0x80000000u) {
        wr->qkey = qp->attr.qkey;
    }
    wr->flow_label = stf & 0xFFFFF;
    wr->tclass = (stf >> 20) & 0xFF;
    wr->hop_limit = hdr->wr.ud.av.hop_limit;
    return true;
}

/*
 * Validate the send WQE in @wqe (a private copy of one SQ slot) of @qp.
 * Local operations and every local error finish here: returns false with
 * *@status set.  Otherwise fills @wr for the backend and returns true.
 */
static bool pvrdma_wq_prepare(PvrdmaCore *core, PvrdmaQp *qp,
                              const uint8_t *wqe, PvrdmaSendWr *wr,
                              uint32_t *status)
{
    const struct pvrdma_sq_wqe_hdr *hdr = (const void *)wqe;
    const struct pvrdma_sge *sges =
        (const void *)(wqe + sizeof(struct pvrdma_sq_wqe_hdr));
    uint32_t op = GUINT32_FROM_LE(hdr->opcode);
    uint32_t nsge = GUINT32_FROM_LE(hdr->num_sge);
    bool atomic = pvrdma_wq_is_atomic(op);
    const uint8_t *sgid;
    uint8_t gid_type;
    uint32_t st;

    if (!pvrdma_qp_connected(qp)) {
        return pvrdma_wq_prepare_ud(core, qp, wqe, wr, status);
    }
    if (op == PVRDMA_WR_LOCAL_INV) {
        *status = pvrdma_wq_local_inv(core, qp,
                                      GUINT32_FROM_LE(
                                          hdr->ex.invalidate_rkey));
        return false;
    }
    if (op == PVRDMA_WR_FAST_REG_MR) {
        *status = pvrdma_wq_reg_mr(core, qp, hdr);
        return false;
    }
    if (op == PVRDMA_WR_BIND_MW) {
        *status = pvrdma_wq_bind_mw(core, qp, wqe);
        return false;
    }
    /*
     * UC has SENDs and WRITEs only (IBA 9.8.1): no READ, no atomics;
     * ATOMIC_WRITE is RC's, and only where the device announced it.
     */
    if (!pvrdma_wq_is_remote_op(op) ||
        (qp->type == PVRDMA_QPT_UC &&
         (op == PVRDMA_WR_RDMA_READ || atomic ||
          op == PVRDMA_WR_ATOMIC_WRITE)) ||
        (op == PVRDMA_WR_ATOMIC_WRITE &&
         !(core->caps.ex_comp_mask & PVRDMA_EX_CAP_ATOMIC_WRITE))) {
        GERR(core, QP_SEND_OPCODE_NOT_SUPPORTED,
             "QP %u: send opcode %u not supported", qp->handle, op);
        *status = PVRDMA_WC_LOC_QP_OP_ERR;
        return false;
    }
    if (op == PVRDMA_WR_ATOMIC_WRITE) {
        /* Its 8 bytes are in the WQE: no local SGE is read. */
        nsge = 0;
    }
    if (!pvrdma_wq_send_sges_ok(core, qp, nsge, status)) {
        return false;
    }
    st = pvrdma_wq_build_sgl(core, qp->pd_handle, sges, nsge,
                             op == PVRDMA_WR_RDMA_READ || atomic,
                             &wr->local);
    if (st == PVRDMA_WC_SUCCESS && atomic &&
        wr->local.total < sizeof(uint64_t)) {
        st = PVRDMA_WC_LOC_LEN_ERR;
    }
    if (st != PVRDMA_WC_SUCCESS) {
        *status = st;
        return false;
    }
    /* No source address: nothing leaves the port, the retries run out. */
    sgid = pvrdma_core_sgid(core, qp->attr.ah_attr.grh.sgid_index,
                            &gid_type);
    if (!sgid) {
        *status = PVRDMA_WC_RETRY_EXC_ERR;
        return false;
    }

    wr->opcode = op;
    wr->solicited = GUINT32_FROM_LE(hdr->send_flags) &
                    PVRDMA_WR_FLAG_SOLICITED;
    wr->imm_data = hdr->ex.imm_data;
    wr->inv_rkey = GUINT32_FROM_LE(hdr->ex.invalidate_rkey);
    if (atomic || op == PVRDMA_WR_ATOMIC_WRITE) {
        wr->remote_addr = GUINT64_FROM_LE(hdr->wr.atomic.remote_addr);
        wr->rkey = GUINT32_FROM_LE(hdr->wr.atomic.rkey);
        wr->compare_add = atomic ?
                          GUINT64_FROM_LE(hdr->wr.atomic.compare_add) : 0;
        wr->swap = GUINT64_FROM_LE(hdr->wr.atomic.swap);
        wr->length = sizeof(uint64_t);
    } else {
        wr->remote_addr = GUINT64_FROM_LE(hdr->wr.rdma.remote_addr);
        wr->rkey = GUINT32_FROM_LE(hdr->wr.rdma.rkey);
        wr->compare_add = 0;
        wr->swap = 0;
        wr->length = wr->local.total;
    }
    wr->src_qpn = qp->qpn;
    wr->dst_qpn = qp->attr.dest_qp_num;
    memcpy(wr->sgid, sgid, sizeof(wr->sgid));
    memcpy(wr->dgid, qp->attr.ah_attr.grh.dgid, sizeof(wr->dgid));
    wr->sl = qp->attr.ah_attr.sl;
    wr->ud = false;
    wr->uc = qp->type == PVRDMA_QPT_UC;
    wr->xrc = qp->type == PVRDMA_QPT_XRC_INI;
    /* The upper bits are MBZ, and no SRQ number has them: refused there. */
    wr->xrc_srqn = wr->xrc ? GUINT32_FROM_LE(hdr->reserved) : 0;
    return true;
}

static bool pvrdma_wq_sq_runs(PvrdmaQp *qp)
{
    uint32_t s = qp->state;

    /* SQD lets the WQE in progress (an RNR-stalled head) finish. */
    return s == PVRDMA_QPS_RTS ||
           (s == PVRDMA_QPS_SQD && qp->wq.rnr_pending);
}

static void pvrdma_wq_sq_drained(PvrdmaCore *core, PvrdmaQp *qp)
{
    if (qp->wq.sqd_notify && qp->state == PVRDMA_QPS_SQD &&
        !qp->wq.rnr_pending && !qp->wq.nout) {
        qp->wq.sqd_notify = false;
        pvrdma_core_post_async_event(core, PVRDMA_EQE_TYPE_SQ_DRAINED,
                                     qp->handle);
    }
}

/* The SQ head is done with @cqe: consume it, complete it, handle errors. */
static void pvrdma_wq_sq_finish(PvrdmaCore *core, PvrdmaQp *qp,
                                struct pvrdma_cqe *cqe, bool signaled)
{
    pvrdma_wq_rnr_clear(core, qp);
    qp->wq.sq_cons = pvrdma_ring_next(qp->wq.sq_cons, qp->sq.n);
    pvrdma_wq_write_cons(core, &qp->sq, qp->wq.sq_cons);
    if (!qp->wq.nout) {
        qp->wq.sq_next = qp->wq.sq_cons;
    }
    if (cqe->status != PVRDMA_WC_SUCCESS || qp->sq_sig_all || signaled) {
        pvrdma_wq_post_cqe(core, pvrdma_qp_send_cq(core, qp), cqe, false,
                           qp->wq.nout != 0);
    }
    pvrdma_wq_sq_drained(core, qp);
    if (cqe->status == PVRDMA_WC_SUCCESS) {
        return;
    }
    if (pvrdma_qp_reliable(qp)) {
        /* IBA 10.8.3.3: a requester error moves the QP to ERR. */
        pvrdma_core_qp_error(core, qp, -1);
    } else if (qp->state == PVRDMA_QPS_RTS || qp->state == PVRDMA_QPS_SQD) {
        /*
         * UD/GSI (IBA 10.3.1): the send queue stops in SQ Error, later
         * WQEs are flushed, receives go on; MODIFY_QP SQE -> RTS resumes
         * (the MAD layer recovers QP1 so).
         */
        qp->state = PVRDMA_QPS_SQE;
        pvrdma_wq_rnr_clear(core, qp);
        pvrdma_wq_work_add(core, qp);
    }
}

/*
 * UC (IBA 9.8): the responder sends nothing back, so the requester never
 * learns what became of a message that left: lost, dropped for a bad
 * key or for want of a receive WQE, it completed successfully.  Only
 * what happened here counts.
 */
static uint32_t pvrdma_wq_uc_status(uint32_t status)
{
    switch (status) {
    case PVRDMA_WC_REM_ACCESS_ERR:
    case PVRDMA_WC_REM_INV_REQ_ERR:
    case PVRDMA_WC_REM_OP_ERR:
    case PVRDMA_WC_REM_ABORT_ERR:
    case PVRDMA_WC_RETRY_EXC_ERR:
    case PVRDMA_WC_RNR_RETRY_EXC_ERR:
    case PVRDMA_WC_BAD_RESP_ERR:
        return PVRDMA_WC_SUCCESS;
    default:
        return status;
    }
}

/* The oldest request at the backend. */
static PvrdmaWqOut *pvrdma_wq_oldest(PvrdmaQp *qp)
{
    return &qp->wq.out[qp->wq.out_head];
}

/* Complete the oldest request with @status (res: what the backend said). */
static void pvrdma_wq_retire(PvrdmaCore *core, PvrdmaQp *qp, uint32_t status,
                             const PvrdmaSendResult *res)
{
    PvrdmaQpWq *wq = &qp->wq;
    PvrdmaWqOut *o = pvrdma_wq_oldest(qp);
    struct pvrdma_cqe cqe;

    wq->out_head = (wq->out_head + 1) % qp->max_outstanding;
    wq->nout--;
    if (status == PVRDMA_WC_SUCCESS && !o->local &&
        pvrdma_wq_is_atomic(o->opcode) && !res->atomic_written) {
        uint64_t orig = GUINT64_TO_LE(res->atomic_orig);

        if (pvrdma_sgl_write(&o->req->local, 0, &orig, sizeof(orig)) < 0) {
            status = PVRDMA_WC_LOC_PROT_ERR;
        }
    }
    pvrdma_core_cqe_init(&cqe, qp, o->wr_id, pvrdma_wq_wc_opcode(o->opcode),
                         status);
    if (status == PVRDMA_WC_SUCCESS && !o->local) {
        cqe.byte_len = o->req->length;
        if (o->opcode == PVRDMA_WR_RDMA_READ) {
            pvrdma_core_count(core, PVRDMA_CTR_RCVD_PKTS,
                              pvrdma_core_pkts(qp, o->req->length));
            pvrdma_core_count(core, PVRDMA_CTR_RCVD_BYTES, o->req->length);
        } else if (pvrdma_wq_is_atomic(o->opcode)) {
            pvrdma_core_count(core, PVRDMA_CTR_RCVD_PKTS, 1);
        }
    } else if (status != PVRDMA_WC_SUCCESS && res->fatal) {
        pvrdma_core_qp_error(core, qp, PVRDMA_EQE_TYPE_QP_FATAL);
    }
    pvrdma_wq_sq_finish(core, qp, &cqe, o->signaled);
}

void pvrdma_core_send_done(PvrdmaCore *core, PvrdmaQp *qp,
                           const PvrdmaSendResult *res)
{
    PvrdmaQpWq *wq = &qp->wq;
    uint32_t status = res->status;

    if (!wq->nout) {
        /* A backend bug, not a guest's: the request was cancelled. */
        g_warn_if_reached();
        return;
    }
    pvrdma_wq_enter(core);
    if (qp->type == PVRDMA_QPT_UC) {
        status = pvrdma_wq_uc_status(status);
    } else if (res->rnr) {
        /*
         * The backend dropped the requests after the NAKed one (the
         * responder does not execute them): the head stays, the timer or
         * a peer's receive retries it, and they follow it again.
         */
        pvrdma_core_count(core, PVRDMA_CTR_RCVD_RNR_NAKS, 1);
        if (pvrdma_wq_rnr_stall(core, qp, res->rnr_timer)) {
            wq->resend = wq->nout;
            wq->nout = 0;
            wq->sq_next = wq->sq_cons;
            goto out;
        }
        status = PVRDMA_WC_RNR_RETRY_EXC_ERR;
    }
    pvrdma_wq_retire(core, qp, status, res);
    /* Completed from outside the SQ loop: carry on with the next WQEs. */
    if (!wq->busy) {
        pvrdma_wq_process_sq(core, qp);
    }
out:
    pvrdma_wq_leave(core);
}

/*
 * Must the WQE with @hdr wait until every request before it completed?
 * Local operations (the core changes keys at once), fenced WQEs, and
 * the ones that complete in the core with an error (their CQE comes
 * after the ones before it).
 */
static bool pvrdma_wq_needs_drain(const struct pvrdma_sq_wqe_hdr *hdr)
{
    uint32_t op = GUINT32_FROM_LE(hdr->opcode);

    return (GUINT32_FROM_LE(hdr->send_flags) & PVRDMA_WR_FLAG_FENCE) ||
           op == PVRDMA_WR_LOCAL_INV || op == PVRDMA_WR_FAST_REG_MR ||
           op == PVRDMA_WR_BIND_MW;
}

/* Make the next window entry for the WQE in @hdr; its request. */
static PvrdmaWqOut *pvrdma_wq_out_new(PvrdmaQp *qp,
                                      const struct pvrdma_sq_wqe_hdr *hdr)
{
    PvrdmaQpWq *wq = &qp->wq;
    PvrdmaWqOut *o;

    if (!wq->out) {
        wq->out = g_new0(PvrdmaWqOut, qp->max_outstanding);
    }
    o = &wq->out[(wq->out_head + wq->nout) % qp->max_outstanding];
    if (!o->req) {
        o->req = g_new(PvrdmaSendWr, 1);
    }
    o->wr_id = GUINT64_FROM_LE(hdr->wr_id);
    o->opcode = GUINT32_FROM_LE(hdr->opcode);
    o->signaled = GUINT32_FROM_LE(hdr->send_flags) & PVRDMA_WR_FLAG_SIGNALED;
    o->local = false;
    return o;
}

uint64_t pvrdma_core_pkts(PvrdmaQp *qp, uint64_t len)
{
    uint32_t m = qp->attr.path_mtu;
    uint64_t mtu = m >= PVRDMA_MTU_256 && m <= PVRDMA_MTU_4096 ?
                   128u << m : PVRDMA_PORT_UD_MAX_MSG;

    if (!pvrdma_qp_connected(qp)) {
        return 1;               /* datagrams fit one packet */
    }
    return len ? (len + mtu - 1) / mtu : 1;
}

/*
 * Count the request of @o, which left for the backend: its packets and
 * payload, and its operation, or a retry (@retry: it went before and met
 * an RNR NAK).
 */
static void pvrdma_wq_count_sent(PvrdmaCore *core, PvrdmaQp *qp,
                                 const PvrdmaWqOut *o, bool retry)
{
    uint64_t len = 0;
    unsigned op;

    switch (o->opcode) {
    case PVRDMA_WR_SEND:
    case PVRDMA_WR_SEND_WITH_IMM:
    case PVRDMA_WR_SEND_WITH_INV:
        op = PVRDMA_CTR_RDMA_SENDS;
        len = o->req->length;
        break;
    case PVRDMA_WR_RDMA_WRITE:
    case PVRDMA_WR_RDMA_WRITE_WITH_IMM:
        op = PVRDMA_CTR_RDMA_WRITES;
        len = o->req->length;
        break;
    case PVRDMA_WR_RDMA_READ:
        op = PVRDMA_CTR_RDMA_READS;
        break;
    default:
        op = PVRDMA_CTR_ATOMICS;
        break;
    }
    pvrdma_core_count(core, PVRDMA_CTR_SENT_PKTS, pvrdma_core_pkts(qp, len));
    pvrdma_core_count(core, PVRDMA_CTR_SENT_BYTES, len);
    pvrdma_core_count(core, retry ? PVRDMA_CTR_RETRIES : op, 1);
}

/* The entry pvrdma_wq_out_new() made is at the backend now. */
static void pvrdma_wq_out_add(PvrdmaQp *qp)
{
    qp->wq.nout++;
    qp->wq.sq_next = pvrdma_ring_next(qp->wq.sq_next, qp->sq.n);
}

/*
 * Execute SQ WQEs in order, at most N per call (the doorbell must not
 * hang the vCPU), with up to qp->max_outstanding of them at the backend
 * at once.  Each WQE is copied in before it is parsed; the head is
 * consumed when it completes, so requests outstanding at the backend
 * keep the SQ where they are.
 */
static void pvrdma_wq_run_sq(PvrdmaCore *core, PvrdmaQp *qp)
{
    uint64_t wqe[PVRDMA_MAX_WQE / sizeof(uint64_t)] PVRDMA_UNINIT;
    const struct pvrdma_sq_wqe_hdr *hdr = (const void *)wqe;
    PvrdmaQpWq *wq = &qp->wq;
    uint32_t budget, prod;

    if (qp->state == PVRDMA_QPS_ERR || qp->state == PVRDMA_QPS_SQE) {
        pvrdma_wq_work_add(core, qp);
        return;
    }
    /*
     * A head stalled on an RNR NAK and waiting on the timer list is
     * retried only by its RNR timer or by a receive posted at the
     * responder (both unlink it first), not by a SEND doorbell or a
     * modify back to RTS.  Every retry uses up one of the rnr_retry
     * attempts (IBA 9.7.5.2.8), so a guest posting more WQEs behind the
     * stalled head got RNR_RETRY_EXC_ERR long before the timer (found by
     * tests/fuzz, regress/rnr-retry-on-doorbell).
     */
    if (wq->rnr_pending && pvrdma_wq_rnr_linked(qp)) {
        return;
    }
    if (wq->busy || !pvrdma_wq_sq_runs(qp) || core->paused) {
        return;                 /* paused: stopped for a save */
    }
    g_assert(qp->sq_wqe_size <= sizeof(wqe));
    wq->busy = true;
    for (budget = qp->sq.n; budget && pvrdma_wq_sq_runs(qp); budget--) {
        PvrdmaWqOut *o;
        struct pvrdma_cqe cqe;
        uint32_t status;
        int ret;

        if (wq->nout >= qp->max_outstanding || (wq->nout && wq->hold)) {
            break;
        }
        wq->hold = false;
        if (pvrdma_wq_read_prod(core, &qp->sq, wq->sq_cons, &prod) < 0) {
            pvrdma_core_qp_error(core, qp, PVRDMA_EQE_TYPE_QP_FATAL);
            break;
        }
        /* Nothing beyond what is out (a guest may take WQEs back). */
        if (((prod - wq->sq_cons) & ((qp->sq.n << 1) - 1)) <= wq->nout) {
            /*
             * If the head was RNR-stalled, the guest took it back (its
             * prod_tail is our cons_head again, e.g. after overrunning
             * the ring): the stall is over.  Leaving rnr_pending set with
             * the QP off the timer list would let SQD keep executing new
             * WQEs, never post SQ_DRAINED, and carry a stale retry count
             * into the next RNR (found by tests/fuzz,
             * regress/rnr-stall-sq-emptied).
             */
            if (wq->rnr_pending && !wq->nout) {
                pvrdma_wq_rnr_clear(core, qp);
                pvrdma_wq_sq_drained(core, qp);
            }
            break;
        }
        if (pvrdma_core_dma_read(core,
                                 pvrdma_ring_elem_addr(&qp->sq,
                                     pvrdma_ring_slot(wq->sq_next,
                                                      qp->sq.n)),
                                 wqe, qp->sq_wqe_size) < 0) {
            GERR(core, QP_SEND_WQE_UNREADABLE,
                 "QP %u: send WQE unreadable", qp->handle);
            pvrdma_core_qp_error(core, qp, PVRDMA_EQE_TYPE_QP_FATAL);
            break;
        }
        if (wq->nout && pvrdma_wq_needs_drain(hdr)) {
            wq->hold = true;        /* until every request out is done */
            break;
        }
        o = pvrdma_wq_out_new(qp, hdr);
        if (!pvrdma_wq_prepare(core, qp, (const uint8_t *)wqe, o->req,
                               &status)) {
            if (status == PVRDMA_WC_PENDING) {
                /* A local operation the backend completes later. */
                o->local = true;
                pvrdma_wq_out_add(qp);
                continue;
            }
            if (wq->nout) {
                /* Its error CQE follows the ones before it. */
                wq->hold = true;
                break;
            }
            pvrdma_core_cqe_init(&cqe, qp, o->wr_id,
                                 pvrdma_wq_wc_opcode(o->opcode), status);
            pvrdma_wq_sq_finish(core, qp, &cqe, o->signaled);
        } else if (!core->be_ops->submit) {
            /* No transport: nothing leaves the port. */
            pvrdma_core_cqe_init(&cqe, qp, o->wr_id,
                                 pvrdma_wq_wc_opcode(o->opcode),
                                 PVRDMA_WC_RETRY_EXC_ERR);
            pvrdma_wq_sq_finish(core, qp, &cqe, o->signaled);
        } else {
            uint32_t next = wq->sq_next;
            /* (An answer inside submit may set resend again.) */
            bool retry = wq->resend > 0;

            wq->resend -= retry;
            pvrdma_wq_out_add(qp);
            ret = core->be_ops->submit(core->be, qp, o->req);
            if (ret >= 0) {
                pvrdma_wq_count_sent(core, qp, o, retry);
            } else if (retry) {
                wq->resend++;   /* it goes again later */
            }
            if (ret < 0) {
                /* Taken back: it was the newest, and nothing completed it. */
                wq->nout--;
                wq->sq_next = next;
                if (wq->nout) {
                    /* Again after the next completion, or after all. */
                    wq->hold = ret != -EAGAIN;
                    break;
                }
                pvrdma_core_cqe_init(&cqe, qp, o->wr_id,
                                     pvrdma_wq_wc_opcode(o->opcode),
                                     ret == -EFAULT ? PVRDMA_WC_LOC_PROT_ERR :
                                     PVRDMA_WC_LOC_QP_OP_ERR);
                pvrdma_wq_sq_finish(core, qp, &cqe, o->signaled);
            }
        }
        if (qp->state == PVRDMA_QPS_ERR || qp->state == PVRDMA_QPS_SQE ||
            wq->rnr_pending) {
            break;
        }
    }
    wq->busy = false;
}

/*
 * The send doorbell hint (PVRDMA_EX_CAP_SQ_DB_HINT, docs/abi.md):
 * PVRDMA_SQ_DB_SKIP while requests of an RC QP in RTS or SQD are out at a
 * backend whose answers all come back through pvrdma_core_req_done (it
 * reads the send queue again), else 0, so that the guest's next post
 * rings.  A full barrier follows the write: whoever clears it reads
 * prod_tail next, as the guest publishes prod_tail before it reads the
 * hint; one of the two then sees the other's write.  UD and UC QPs have
 * no hint: a datagram's answer may take seconds to come, and the WQEs
 * behind it must not wait for it.
 */
static void pvrdma_wq_skip_del(PvrdmaCore *core, PvrdmaQp *qp)
{
    if (qp->wq.skip_link.data) {
        g_queue_unlink(&pvrdma_qp_send_cq(core, qp)->skip_qps,
                       &qp->wq.skip_link);
        qp->wq.skip_link.data = NULL;
    }
}

bool pvrdma_wq_sq_hint(PvrdmaCore *core, PvrdmaQp *qp, bool init)
{
    bool skip = !init && pvrdma_qp_reliable(qp) && qp->wq.nout &&
                (qp->state == PVRDMA_QPS_RTS || qp->state == PVRDMA_QPS_SQD);
    uint32_t v = GUINT32_TO_LE(skip ? PVRDMA_SQ_DB_SKIP : 0);

    if (!(core->caps.ex_comp_mask & PVRDMA_EX_CAP_SQ_DB_HINT) ||
        !pvrdma_qp_has_sq(qp) || (!init && qp->sq_db_skip == skip)) {
        return false;
    }
    qp->sq_db_skip = skip;
    if (skip) {
        qp->wq.skip_link.data = qp;
        g_queue_push_tail_link(&pvrdma_qp_send_cq(core, qp)->skip_qps,
                               &qp->wq.skip_link);
    } else {
        pvrdma_wq_skip_del(core, qp);
    }
    /* Unwritable: the guest rings or not, its own QP's business. */
    pvrdma_core_dma_write(core, qp->pages[0] +
                          PVRDMA_RING_STATE_SQ_DB_HINT_OFFSET, &v, sizeof(v));
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return !skip;
}

/* WQEs in @qp's send queue beyond those out at the backend. */
static bool pvrdma_wq_sq_unread(PvrdmaCore *core, PvrdmaQp *qp)
{
    uint32_t prod;

    return pvrdma_wq_read_prod(core, &qp->sq, qp->wq.sq_cons, &prod) == 0 &&
           ((prod - qp->wq.sq_cons) & ((qp->sq.n << 1) - 1)) > qp->wq.nout;
}

/*
 * Run @qp's send queue, then set its doorbell hint; when the hint goes
 * to 0 the guest may have published WQEs without ringing while it read
 * SKIP: run again for those (at most once more per change of the hint).
 */
static void pvrdma_wq_process_sq(PvrdmaCore *core, PvrdmaQp *qp)
{
    if (!pvrdma_qp_has_sq(qp)) {
        return;
    }
    do {
        pvrdma_wq_run_sq(core, qp);
        if (qp->wq.busy || core->paused) {
            return;             /* the outer run, or the resume, sets it */
        }
    } while (pvrdma_wq_sq_hint(core, qp, false) &&
             pvrdma_wq_sq_unread(core, qp));
}

/* ---- entry points from the core ------------------------------------------ */

void pvrdma_wq_post_send(PvrdmaCore *core, PvrdmaQp *qp)
{
    if (qp->state == PVRDMA_QPS_RESET || qp->state == PVRDMA_QPS_INIT ||
        qp->state == PVRDMA_QPS_RTR) {
        GERR(core, QP_SEND_DOORBELL_STATE_WQES_WAIT,
             "QP %u: send doorbell in state %u (WQEs wait for RTS)",
             qp->handle, qp->state);
    }
    pvrdma_wq_enter(core);
    if (qp->wq.nout && core->be_ops->poll) {
        core->be_ops->poll(core->be, qp, NULL);
    }
    pvrdma_wq_process_sq(core, qp);
    pvrdma_wq_leave(core);
}

/*
 * The receive doorbell hint (PVRDMA_EX_CAP_RQ_DB_HINT, docs/abi.md):
 * PVRDMA_RQ_DB_SKIP while the backend takes @qp's receive WQEs when
 * messages arrive and nobody waits for one, else 0, so that the guest's
 * next post rings (to wake a requester, or to flush in ERR).  A full
 * barrier follows the write: whoever clears it reads prod_tail next,
 * as the guest publishes prod_tail before it reads the hint; one of the
 * two then sees the other's write.
 */
void pvrdma_wq_rq_hint(PvrdmaCore *core, PvrdmaQp *qp, bool skip, bool init)
{
    uint32_t v = GUINT32_TO_LE(skip ? PVRDMA_RQ_DB_SKIP : 0);

    if (!(core->caps.ex_comp_mask & PVRDMA_EX_CAP_RQ_DB_HINT) ||
        !pvrdma_qp_has_rq(qp) || (!init && qp->rq_db_skip == skip)) {
        return;
    }
    qp->rq_db_skip = skip;
    /* Unwritable: the guest rings or not, its own QP's business. */
    pvrdma_core_dma_write(core, qp->pages[0] +
                          PVRDMA_RING_STATE_RQ_DB_HINT_OFFSET, &v, sizeof(v));
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

void pvrdma_core_rq_doorbell_wanted(PvrdmaCore *core, PvrdmaQp *qp)
{
    pvrdma_wq_rq_hint(core, qp, false, false);
}

static void pvrdma_wq_recv_posted(PvrdmaCore *core, PvrdmaQp *qp)
{
    if (core->be_ops->recv_posted &&
        qp->state >= PVRDMA_QPS_RTR && qp->state <= PVRDMA_QPS_SQD) {
        core->be_ops->recv_posted(core->be, qp);
    }
}

void pvrdma_wq_post_recv(PvrdmaCore *core, PvrdmaQp *qp)
{
    uint32_t prod;

    pvrdma_wq_enter(core);
    if (qp->state == PVRDMA_QPS_ERR) {
        pvrdma_wq_work_add(core, qp);
    } else if (qp->state != PVRDMA_QPS_RESET) {
        if (pvrdma_wq_read_prod(core, &qp->rq, qp->wq.rq_cons, &prod) < 0) {
            pvrdma_core_qp_error(core, qp, PVRDMA_EQE_TYPE_QP_FATAL);
        } else {
            /* First, so that a requester woken below may clear it. */
            if (qp->state >= PVRDMA_QPS_RTR && qp->state <= PVRDMA_QPS_SQD) {
                pvrdma_wq_rq_hint(core, qp, true, false);
            }
            pvrdma_wq_recv_posted(core, qp);
        }
    }
    pvrdma_wq_leave(core);
}

void pvrdma_wq_srq_post_recv(PvrdmaCore *core, PvrdmaSrq *srq)
{
    PvrdmaQp *qp;
    uint32_t prod, h;

    pvrdma_wq_enter(core);
    if (srq->failed) {
        GERR(core, SRQ_DOORBELL_FAILED_SRQ,
             "SRQ %u: doorbell on a failed SRQ", srq->handle);
    } else if (pvrdma_wq_read_prod(core, &srq->ring, srq->cons,
                                   &prod) < 0) {
        pvrdma_wq_srq_fail(core, srq);
    } else if (core->be_ops->recv_posted) {
        PVRDMA_QP_FOREACH(core, h, qp) {
            if (qp->has_srq && qp->srq_handle == srq->handle) {
                pvrdma_wq_recv_posted(core, qp);
            }
        }
    }
    pvrdma_wq_leave(core);
}

/*
 * WQEs the guest posted without a doorbell (SKIP) wait for an answer to
 * the QP's requests, which comes at the peer's next look: after a burst
 * begun by a post that rang (nothing was out), the rest of the burst
 * would wait a round trip.  A poll of the QP's send CQ is the guest
 * waiting for that burst: read those send queues now.  The CQ lists its
 * QPs whose hint is SKIP; a QP that leaves the list while another runs
 * (an error) ends the walk early, and its WQEs go with its next answer.
 */
static void pvrdma_wq_skipped(PvrdmaCore *core, PvrdmaCq *cq)
{
    GList *l, *next;

    for (l = cq->skip_qps.head; l; l = next) {
        PvrdmaQp *qp = l->data;

        next = l->next;
        if (qp && pvrdma_wq_sq_unread(core, qp)) {
            pvrdma_wq_process_sq(core, qp);
        }
    }
}

void pvrdma_wq_cq_poll(PvrdmaCore *core, PvrdmaCq *cq, bool armed)
{
    /*
     * Completions are written as they happen; what remains is what the
     * backend has not taken in yet, and due retries.  A poller that arms
     * the CQ is about to sleep, not to poll on.
     */
    pvrdma_wq_enter(core);
    if (core->be_ops->poll) {
        core->be_ops->poll(core->be, NULL, armed ? NULL : cq);
    }
    if (core->rnr_qps.length) {
        pvrdma_wq_run_timers(core);
    }
    pvrdma_wq_skipped(core, cq);
    pvrdma_wq_leave(core);
}

void pvrdma_wq_cq_poll_end(PvrdmaCore *core, PvrdmaCq *cq)
{
    if (cq->poll_watch) {
        cq->poll_watch = false;
        core->be_ops->poll_end(core->be, cq);
    }
}

void pvrdma_wq_timer_expired(PvrdmaCore *core)
{
    pvrdma_wq_enter(core);
    core->timer_expire = -1;
    pvrdma_fault_timer(core);
    pvrdma_wq_run_timers(core);
    pvrdma_wq_leave(core);
}

void pvrdma_wq_qp_modified(PvrdmaCore *core, PvrdmaQp *qp, uint32_t old)
{
    PvrdmaQpWq *wq = &qp->wq;

    pvrdma_wq_enter(core);
    switch (qp->state) {
    case PVRDMA_QPS_RESET:
        /* The guest zeroes its ring indexes (spec §5.3 MODIFY_QP). */
        pvrdma_wq_rq_hint(core, qp, false, false);
        pvrdma_wq_rnr_clear(core, qp);
        pvrdma_wq_cancel(core, qp);
        pvrdma_wq_sq_hint(core, qp, false);
        pvrdma_wq_work_del(core, qp);
        wq->sq_cons = 0;
        wq->sq_next = 0;
        wq->rq_cons = 0;
        wq->comm_est = false;
        wq->sqd_notify = false;
        break;
    case PVRDMA_QPS_RTR:
        if (old != PVRDMA_QPS_RTR) {
            wq->comm_est = false;
        }
        break;
    case PVRDMA_QPS_RTS:
        /* Resume (SQD) or start (WQEs posted early) the send queue. */
        if (old != PVRDMA_QPS_RTS) {
            pvrdma_wq_process_sq(core, qp);
        }
        break;
    case PVRDMA_QPS_SQD:
        if (old != PVRDMA_QPS_SQD && qp->attr.en_sqd_async_notify) {
            wq->sqd_notify = true;
            pvrdma_wq_sq_drained(core, qp);
        }
        break;
    case PVRDMA_QPS_ERR:
        if (old != PVRDMA_QPS_ERR) {
            /* The core already stored ERR: do what qp_error() does. */
            qp->state = old;
            pvrdma_core_qp_error(core, qp, -1);
        } else {
            pvrdma_wq_work_add(core, qp);
        }
        break;
    default:
        break;
    }
    pvrdma_wq_leave(core);
}

void pvrdma_wq_qp_resumed(PvrdmaCore *core, PvrdmaQp *qp)
{
    PvrdmaQpWq *wq = &qp->wq;

    pvrdma_wq_enter(core);
    switch (qp->state) {
    case PVRDMA_QPS_RTS:
    case PVRDMA_QPS_SQD:
        if (wq->rnr_pending && pvrdma_core_has_timer(core)) {
            /* The guest's clock moved with it: the deadline stands. */
            if (!pvrdma_wq_rnr_linked(qp)) {
                wq->rnr_link.data = qp;
                g_queue_push_tail_link(&core->rnr_qps, &wq->rnr_link);
            }
            pvrdma_wq_rearm(core);
        } else if (qp->state == PVRDMA_QPS_RTS) {
            wq->rnr_pending = false;
            pvrdma_wq_process_sq(core, qp);
        }
        break;
    case PVRDMA_QPS_ERR:
    case PVRDMA_QPS_SQE:
        pvrdma_wq_work_add(core, qp);
        break;
    default:
        break;
    }
    pvrdma_wq_leave(core);
}

void pvrdma_wq_qp_destroy(PvrdmaCore *core, PvrdmaQp *qp)
{
    uint32_t h;
    void *obj;

    /* The guest frees the rings right after: no flush, no more DMA. */
    pvrdma_wq_rnr_clear(core, qp);
    pvrdma_wq_cancel(core, qp);
    pvrdma_wq_work_del(core, qp);
    pvrdma_wq_skip_del(core, qp);
    if (qp->wq.out) {
        uint32_t i;

        for (i = 0; i < qp->max_outstanding; i++) {
            g_free(qp->wq.out[i].req);
        }
        g_free(qp->wq.out);
        qp->wq.out = NULL;
    }
    /* Type 2 windows bound through the QP are invalidated (IBA 10.6.7.2). */
    if (qp->mw_binds) {
        PVRDMA_TABLE_FOREACH(&core->mr_tbl, h, obj) {
            PvrdmaMr *mw = obj;

            if (mw->flags == PVRDMA_MR_FLAG_MW_TYPE2 && mw->mw_bound &&
                mw->mw_qp_handle == qp->handle) {
                pvrdma_wq_mw_unbind(core, mw);
            }
        }
    }
}

void pvrdma_wq_reset(PvrdmaCore *core)
{
    /* Every QP was destroyed (and unlinked) before. */
    g_assert(g_queue_is_empty(&core->rnr_qps));
    g_assert(g_queue_is_empty(&core->work_qps));
    if (core->timer_expire >= 0) {
        core->timer_expire = -1;
        pvrdma_core_timer_mod(core, -1);
    }
}
