/*
 * PVRDMA software fabric backend (the default): RC data path between QPs
 * of one device and between the pvrdma devices of one QEMU process, with
 * no host RDMA hardware (docs/datapath.md).
 *
 * This file holds the PvrdmaBackendOps and the queue bookkeeping:
 *  - doorbells: SEND drains the SQ (at most N WQEs per doorbell), RECV /
 *    SRQ make receive WQEs available and retry a requester stalled on an
 *    RNR NAK from this QP at once, CQ POLL runs due retries;
 *  - ring indexes: the device keeps its own consumer indexes and only
 *    reads the guest's prod_tail, which is validated before every use
 *    (invalid or more than N ahead: QP to ERR + QP_FATAL, spec §6.1);
 *  - CQEs: written in order, never over a full ring (CQ_ERR, dropped, and
 *    every QP using the CQ goes to ERR), notification per arming;
 *  - the error state: a QP entering ERR is put on a process-wide deferred
 *    work list and flushed (WR_FLUSH_ERR for every outstanding WQE) at the
 *    end of the current entry point, so a flush never races the WQE being
 *    executed;
 *  - RNR: O(1) state per QP, one timer per device (PvrdmaCoreOps
 *    timer_mod) armed at the earliest retry deadline.
 *
 * WQE semantics are in pvrdma_fabric_rc.c, the transport (registry, peer
 * lookup, memory movement) in pvrdma_fabric_port.c.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "pvrdma_fabric.h"

#define GERR(core, ...) pvrdma_core_guest_error(core, __VA_ARGS__)

/* Deferred flushes, across all devices of the process. */
static PvrdmaFabricQp *pvrdma_fabric_work_head;
static bool pvrdma_fabric_work_running;
/* QPs with an RNR-stalled SQ head, across all devices. */
static unsigned pvrdma_fabric_rnr_count;

/* IBA table 45: RNR NAK timer field encodings, in microseconds. */
static const uint32_t pvrdma_fabric_rnr_usec[32] = {
    655360, 10, 20, 30, 40, 60, 80, 120,
    160, 240, 320, 480, 640, 960, 1280, 1920,
    2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
    40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

static void pvrdma_fabric_process_sq(PvrdmaFabricQp *fqp);

/* ---- lists -------------------------------------------------------------- */

static void pvrdma_fabric_work_add(PvrdmaFabricQp *fqp)
{
    if (fqp->on_work) {
        return;
    }
    fqp->on_work = true;
    fqp->work_prev = NULL;
    fqp->work_next = pvrdma_fabric_work_head;
    if (pvrdma_fabric_work_head) {
        pvrdma_fabric_work_head->work_prev = fqp;
    }
    pvrdma_fabric_work_head = fqp;
}

static void pvrdma_fabric_work_del(PvrdmaFabricQp *fqp)
{
    if (!fqp->on_work) {
        return;
    }
    if (fqp->work_prev) {
        fqp->work_prev->work_next = fqp->work_next;
    } else {
        pvrdma_fabric_work_head = fqp->work_next;
    }
    if (fqp->work_next) {
        fqp->work_next->work_prev = fqp->work_prev;
    }
    fqp->on_work = false;
    fqp->work_prev = fqp->work_next = NULL;
}

static bool pvrdma_fabric_rnr_linked(PvrdmaFabricQp *fqp)
{
    return fqp->rnr_prev || fqp->fab->rnr_head == fqp;
}

static void pvrdma_fabric_rnr_unlink(PvrdmaFabricQp *fqp)
{
    PvrdmaFabric *fab = fqp->fab;

    if (!pvrdma_fabric_rnr_linked(fqp)) {
        return;
    }
    if (fqp->rnr_prev) {
        fqp->rnr_prev->rnr_next = fqp->rnr_next;
    } else {
        fab->rnr_head = fqp->rnr_next;
    }
    if (fqp->rnr_next) {
        fqp->rnr_next->rnr_prev = fqp->rnr_prev;
    }
    fqp->rnr_prev = fqp->rnr_next = NULL;
}

static void pvrdma_fabric_rnr_link(PvrdmaFabricQp *fqp)
{
    PvrdmaFabric *fab = fqp->fab;

    if (pvrdma_fabric_rnr_linked(fqp)) {
        return;
    }
    fqp->rnr_prev = NULL;
    fqp->rnr_next = fab->rnr_head;
    if (fab->rnr_head) {
        fab->rnr_head->rnr_prev = fqp;
    }
    fab->rnr_head = fqp;
}

/* Arm the device timer at the earliest RNR deadline (or cancel it). */
static void pvrdma_fabric_rearm(PvrdmaFabric *fab)
{
    int64_t first = -1;
    PvrdmaFabricQp *f;

    for (f = fab->rnr_head; f; f = f->rnr_next) {
        if (first < 0 || f->rnr_deadline < first) {
            first = f->rnr_deadline;
        }
    }
    if (first != fab->timer_expire) {
        fab->timer_expire = first;
        pvrdma_core_timer_mod(fab->core, first);
    }
}

static void pvrdma_fabric_rnr_clear(PvrdmaFabricQp *fqp)
{
    if (fqp->rnr_pending) {
        fqp->rnr_pending = false;
        g_assert(pvrdma_fabric_rnr_count > 0);
        pvrdma_fabric_rnr_count--;
    }
    pvrdma_fabric_rnr_unlink(fqp);
}

/*
 * The SQ head got an RNR NAK with timer encoding @enc.  Returns true if
 * it waits for a retry, false if the retries are exhausted (IBA
 * 9.7.5.2.8: rnr_retry retries, 7 = forever).  Without a glue timer the
 * wait can only end with a receive being posted, so finite retry counts
 * are exhausted at once.
 */
static bool pvrdma_fabric_rnr_stall(PvrdmaFabricQp *fqp, uint8_t enc)
{
    PvrdmaQp *qp = fqp->qp;
    PvrdmaCore *core = fqp->fab->core;
    uint8_t retry = qp->attr.rnr_retry;

    if (!fqp->rnr_pending) {
        fqp->rnr_left = retry;
    }
    if (retry != PVRDMA_FABRIC_RNR_INFINITE) {
        if (fqp->rnr_left == 0 || !pvrdma_core_has_timer(core)) {
            return false;
        }
        fqp->rnr_left--;
    }
    if (!fqp->rnr_pending) {
        fqp->rnr_pending = true;
        pvrdma_fabric_rnr_count++;
    }
    if (pvrdma_core_has_timer(core)) {
        fqp->rnr_deadline = pvrdma_core_now_ns(core) +
                            (int64_t)pvrdma_fabric_rnr_usec[enc & 31] * 1000;
        pvrdma_fabric_rnr_link(fqp);
        pvrdma_fabric_rearm(fqp->fab);
    }
    return true;
}

/* ---- rings -------------------------------------------------------------- */

int pvrdma_fabric_read_prod(PvrdmaCore *core, const PvrdmaRing *ring,
                            uint32_t cons, uint32_t *prod)
{
    uint32_t p;

    if (pvrdma_core_dma_read(core, pvrdma_ring_prod_addr(ring), &p,
                             sizeof(p)) < 0) {
        GERR(core, "ring prod_tail at 0x%" G_GINT64_MODIFIER "x unreadable",
             pvrdma_ring_prod_addr(ring));
        return -EFAULT;
    }
    p = GUINT32_FROM_LE(p);
    /* Invalid index, or more entries than the ring has: corrupted. */
    if (pvrdma_ring_can_consume(p, cons, ring->n) < 0 ||
        ((p - cons) & ((ring->n << 1) - 1)) > ring->n) {
        GERR(core, "ring prod_tail 0x%x invalid (cons 0x%x, N=%u)", p, cons,
             ring->n);
        return -EINVAL;
    }
    *prod = p;
    return 0;
}

void pvrdma_fabric_write_cons(PvrdmaCore *core, const PvrdmaRing *ring,
                              uint32_t cons)
{
    uint32_t c = GUINT32_TO_LE(cons);

    if (pvrdma_core_dma_write(core, pvrdma_ring_cons_addr(ring), &c,
                              sizeof(c)) < 0) {
        GERR(core, "ring cons_head at 0x%" G_GINT64_MODIFIER "x unwritable",
             pvrdma_ring_cons_addr(ring));
    }
}

/* ---- errors and completions --------------------------------------------- */

void pvrdma_fabric_qp_error(PvrdmaQp *qp, int event)
{
    PvrdmaFabricQp *fqp = pvrdma_fqp(qp);
    PvrdmaCore *core = fqp->fab->core;

    if (qp->state == PVRDMA_QPS_ERR) {
        return;
    }
    qp->state = PVRDMA_QPS_ERR;
    if (event >= 0) {
        pvrdma_core_post_async_event(core, event, qp->handle);
    }
    pvrdma_fabric_rnr_clear(fqp);
    fqp->sqd_notify = false;
    if (qp->srq) {
        /* IBA 11.6.3.1: no more WQEs of the SRQ will be consumed. */
        pvrdma_core_post_async_event(core,
                                     PVRDMA_EQE_TYPE_QP_LAST_WQE_REACHED,
                                     qp->handle);
    }
    pvrdma_fabric_work_add(fqp);
}

#define PVRDMA_QP_FOREACH(core, h, qp) \
    for ((h) = (core)->qp_tbl.first; (h) < (core)->qp_tbl.alloc; (h)++) \
        if (((qp) = (core)->qp_tbl.slots[(h)]) != NULL && (qp)->be)

void pvrdma_fabric_cqe_init(struct pvrdma_cqe *cqe, PvrdmaQp *qp,
                            uint64_t wr_id, uint32_t opcode,
                            uint32_t status)
{
    memset(cqe, 0, sizeof(*cqe));
    cqe->wr_id = wr_id;
    cqe->qp = qp->handle;
    cqe->opcode = opcode;
    cqe->status = status;
    cqe->port_num = 1;
}

void pvrdma_fabric_post_cqe(PvrdmaCore *core, PvrdmaCq *cq,
                            const struct pvrdma_cqe *cqe, bool solicited)
{
    PvrdmaFabricCq *fcq = cq->be;
    PvrdmaQp *qp;
    uint32_t h;
    int ret;

    if (fcq->overrun) {
        return;
    }
    ret = pvrdma_core_ring_produce(core, &cq->ring, cqe);
    if (ret < 0) {
        /*
         * Overrun (or a ring the guest broke): the CQE is lost, which IB
         * treats as a CQ error (IBA 11.6.3.2): report it once, stop using
         * the CQ and move every QP that completes to it to ERR.
         */
        GERR(core, "CQ %u %s: CQE of QP %u dropped, CQ in error", cq->handle,
             ret == -ENOSPC ? "overrun" : "ring broken", (uint32_t)cqe->qp);
        fcq->overrun = true;
        pvrdma_core_post_async_event(core, PVRDMA_EQE_TYPE_CQ_ERR,
                                     cq->handle);
        PVRDMA_QP_FOREACH(core, h, qp) {
            if (qp->send_cq == cq || qp->recv_cq == cq) {
                pvrdma_fabric_qp_error(qp, -1);
            }
        }
        return;
    }
    pvrdma_core_notify_cq(core, cq->handle,
                          solicited || cqe->status != PVRDMA_WC_SUCCESS);
}

/* Flush one queue: every outstanding WQE completes with WR_FLUSH_ERR. */
static void pvrdma_fabric_flush_ring(PvrdmaQp *qp, PvrdmaRing *ring,
                                     uint32_t *cons, PvrdmaCq *cq, bool sq)
{
    PvrdmaCore *core = pvrdma_fqp(qp)->fab->core;
    PvrdmaFabricCq *fcq = cq->be;
    struct pvrdma_sq_wqe_hdr hdr;
    struct pvrdma_cqe cqe;
    uint32_t prod, n;

    if (pvrdma_fabric_read_prod(core, ring, *cons, &prod) < 0) {
        return;
    }
    for (n = 0; n < ring->n && *cons != prod; n++) {
        uint32_t len = sq ? sizeof(hdr) : sizeof(struct pvrdma_rq_wqe_hdr);
        uint64_t addr = pvrdma_ring_elem_addr(ring,
                                              pvrdma_ring_slot(*cons,
                                                               ring->n));

        memset(&hdr, 0, sizeof(hdr));
        /* Nothing to read if the CQE would be dropped anyway. */
        if (!fcq->overrun &&
            pvrdma_core_dma_read(core, addr, &hdr, len) < 0) {
            GERR(core, "QP %u: WQE at 0x%" G_GINT64_MODIFIER "x unreadable "
                 "while flushing", qp->handle, addr);
        }
        *cons = pvrdma_ring_next(*cons, ring->n);
        pvrdma_fabric_write_cons(core, ring, *cons);
        pvrdma_fabric_cqe_init(&cqe, qp, hdr.wr_id,
                               sq ? pvrdma_fabric_wc_opcode(hdr.opcode) :
                               PVRDMA_WC_RECV, PVRDMA_WC_WR_FLUSH_ERR);
        pvrdma_fabric_post_cqe(core, cq, &cqe, false);
    }
}

static void pvrdma_fabric_flush(PvrdmaFabricQp *fqp)
{
    PvrdmaQp *qp = fqp->qp;

    if (qp->state != PVRDMA_QPS_ERR) {
        return;
    }
    pvrdma_fabric_rnr_clear(fqp);
    pvrdma_fabric_flush_ring(qp, &qp->sq, &fqp->sq_cons, qp->send_cq, true);
    if (!qp->srq) {
        pvrdma_fabric_flush_ring(qp, &qp->rq, &fqp->rq_cons, qp->recv_cq,
                                 false);
    }
}

/* Run the deferred flushes; called at the end of every entry point. */
static void pvrdma_fabric_run_work(void)
{
    PvrdmaFabricQp *fqp;

    if (pvrdma_fabric_work_running) {
        return;
    }
    pvrdma_fabric_work_running = true;
    /* Terminates: a QP is queued only when it enters ERR or is doorbelled */
    while ((fqp = pvrdma_fabric_work_head) != NULL) {
        pvrdma_fabric_work_del(fqp);
        pvrdma_fabric_flush(fqp);
    }
    pvrdma_fabric_work_running = false;
}

/* ---- receive queues ----------------------------------------------------- */

static void pvrdma_fabric_srq_fail(PvrdmaCore *core, PvrdmaSrq *srq)
{
    PvrdmaFabricSrq *fsrq = srq->be;
    PvrdmaQp *qp;
    uint32_t h;

    if (fsrq->failed) {
        return;
    }
    fsrq->failed = true;
    pvrdma_core_post_async_event(core, PVRDMA_EQE_TYPE_SRQ_ERR, srq->handle);
    PVRDMA_QP_FOREACH(core, h, qp) {
        if (qp->srq == srq) {
            pvrdma_fabric_qp_error(qp, -1);
        }
    }
}

int pvrdma_fabric_recv_peek(PvrdmaQp *qp, void *buf, uint32_t bufsz,
                            uint32_t *max_sge)
{
    PvrdmaFabricQp *fqp = pvrdma_fqp(qp);
    PvrdmaCore *core = fqp->fab->core;
    PvrdmaRing *ring;
    uint32_t cons, prod, size;

    if (qp->srq) {
        PvrdmaFabricSrq *fsrq = qp->srq->be;

        if (fsrq->failed) {
            return -1;
        }
        ring = &qp->srq->ring;
        cons = fsrq->cons;
        size = qp->srq->wqe_size;
        *max_sge = qp->srq->max_sge;
    } else {
        ring = &qp->rq;
        cons = fqp->rq_cons;
        size = qp->rq_wqe_size;
        *max_sge = qp->attr.cap.max_recv_sge;
    }
    g_assert(size <= bufsz);
    if (pvrdma_fabric_read_prod(core, ring, cons, &prod) < 0) {
        goto broken;
    }
    if (prod == cons) {
        return 0;
    }
    if (pvrdma_core_dma_read(core,
                             pvrdma_ring_elem_addr(ring,
                                 pvrdma_ring_slot(cons, ring->n)),
                             buf, size) < 0) {
        GERR(core, "QP %u: receive WQE unreadable", qp->handle);
        goto broken;
    }
    return 1;

broken:
    if (qp->srq) {
        pvrdma_fabric_srq_fail(core, qp->srq);
    } else {
        pvrdma_fabric_qp_error(qp, PVRDMA_EQE_TYPE_QP_FATAL);
    }
    return -1;
}

void pvrdma_fabric_recv_consume(PvrdmaQp *qp)
{
    PvrdmaFabricQp *fqp = pvrdma_fqp(qp);
    PvrdmaCore *core = fqp->fab->core;

    if (qp->srq) {
        PvrdmaSrq *srq = qp->srq;
        PvrdmaFabricSrq *fsrq = srq->be;
        uint32_t prod;

        fsrq->cons = pvrdma_ring_next(fsrq->cons, srq->ring.n);
        pvrdma_fabric_write_cons(core, &srq->ring, fsrq->cons);
        /* IBA 10.2.9.5: one event when the level drops below the limit. */
        if (fsrq->limit_armed &&
            pvrdma_fabric_read_prod(core, &srq->ring, fsrq->cons,
                                    &prod) == 0 &&
            ((prod - fsrq->cons) & ((srq->ring.n << 1) - 1)) <
            srq->srq_limit) {
            fsrq->limit_armed = false;
            srq->srq_limit = 0;
            pvrdma_core_post_async_event(core,
                                         PVRDMA_EQE_TYPE_SRQ_LIMIT_REACHED,
                                         srq->handle);
        }
    } else {
        fqp->rq_cons = pvrdma_ring_next(fqp->rq_cons, qp->rq.n);
        pvrdma_fabric_write_cons(core, &qp->rq, fqp->rq_cons);
    }
}

/* ---- send queue --------------------------------------------------------- */

static bool pvrdma_fabric_sq_runs(PvrdmaFabricQp *fqp)
{
    uint32_t s = fqp->qp->state;

    /* SQD lets the WQE in progress (an RNR-stalled head) finish. */
    return s == PVRDMA_QPS_RTS || (s == PVRDMA_QPS_SQD && fqp->rnr_pending);
}

static void pvrdma_fabric_sq_drained(PvrdmaFabricQp *fqp)
{
    if (fqp->sqd_notify && fqp->qp->state == PVRDMA_QPS_SQD &&
        !fqp->rnr_pending) {
        fqp->sqd_notify = false;
        pvrdma_core_post_async_event(fqp->fab->core,
                                     PVRDMA_EQE_TYPE_SQ_DRAINED,
                                     fqp->qp->handle);
    }
}

/*
 * Execute SQ WQEs in order, at most N per call (the doorbell must not
 * hang the vCPU).  Each WQE is copied in before it is parsed.
 */
static void pvrdma_fabric_process_sq(PvrdmaFabricQp *fqp)
{
    PvrdmaQp *qp = fqp->qp;
    PvrdmaCore *core = fqp->fab->core;
    uint64_t wqe[PVRDMA_FABRIC_MAX_WQE / sizeof(uint64_t)];
    const struct pvrdma_sq_wqe_hdr *hdr = (const void *)wqe;
    struct pvrdma_cqe cqe;
    uint32_t budget, prod;

    if (qp->state == PVRDMA_QPS_ERR) {
        pvrdma_fabric_work_add(fqp);
        return;
    }
    /*
     * A head stalled on an RNR NAK and waiting on the timer list is
     * retried only by its RNR timer or by a receive posted at the
     * responder (both unlink it first: pvrdma_fabric_rnr_retry()), not by
     * a SEND doorbell or a modify back to RTS.  Every retry uses up one of
     * the rnr_retry attempts (IBA 9.7.5.2.8), so a guest posting more
     * WQEs behind the stalled head got RNR_RETRY_EXC_ERR long before the
     * timer (found by tests/fuzz, regress/rnr-retry-on-doorbell).
     */
    if (fqp->rnr_pending && pvrdma_fabric_rnr_linked(fqp)) {
        return;
    }
    if (fqp->busy || !pvrdma_fabric_sq_runs(fqp)) {
        return;
    }
    g_assert(qp->sq_wqe_size <= sizeof(wqe));
    fqp->busy = true;
    for (budget = qp->sq.n; budget && pvrdma_fabric_sq_runs(fqp); budget--) {
        uint8_t rnr_timer = 0;
        int ret;

        if (pvrdma_fabric_read_prod(core, &qp->sq, fqp->sq_cons, &prod) < 0) {
            pvrdma_fabric_qp_error(qp, PVRDMA_EQE_TYPE_QP_FATAL);
            break;
        }
        if (prod == fqp->sq_cons) {
            /*
             * Nothing left to execute.  If the head was RNR-stalled, the
             * guest took it back (its prod_tail is our cons_head again,
             * e.g. after overrunning the ring): the stall is over.
             * Leaving rnr_pending set with the QP off the timer list
             * would let SQD keep executing new WQEs, never post
             * SQ_DRAINED, and carry a stale retry count into the next
             * RNR (found by tests/fuzz, regress/rnr-stall-sq-emptied).
             */
            if (fqp->rnr_pending) {
                pvrdma_fabric_rnr_clear(fqp);
                pvrdma_fabric_sq_drained(fqp);
            }
            break;
        }
        if (pvrdma_core_dma_read(core,
                                 pvrdma_ring_elem_addr(&qp->sq,
                                     pvrdma_ring_slot(fqp->sq_cons,
                                                      qp->sq.n)),
                                 wqe, qp->sq_wqe_size) < 0) {
            GERR(core, "QP %u: send WQE unreadable", qp->handle);
            pvrdma_fabric_qp_error(qp, PVRDMA_EQE_TYPE_QP_FATAL);
            break;
        }
        pvrdma_fabric_cqe_init(&cqe, qp, hdr->wr_id,
                               pvrdma_fabric_wc_opcode(hdr->opcode),
                               PVRDMA_WC_SUCCESS);
        ret = pvrdma_fabric_rc_execute(qp, (const uint8_t *)wqe,
                                       qp->sq_wqe_size, &cqe, &rnr_timer);
        if (ret == PVRDMA_SQ_STALL) {
            if (pvrdma_fabric_rnr_stall(fqp, rnr_timer)) {
                break;
            }
            cqe.status = PVRDMA_WC_RNR_RETRY_EXC_ERR;
            cqe.byte_len = 0;
        }
        pvrdma_fabric_rnr_clear(fqp);
        fqp->sq_cons = pvrdma_ring_next(fqp->sq_cons, qp->sq.n);
        pvrdma_fabric_write_cons(core, &qp->sq, fqp->sq_cons);
        if (cqe.status != PVRDMA_WC_SUCCESS || qp->sq_sig_all ||
            (hdr->send_flags & PVRDMA_WR_FLAG_SIGNALED)) {
            pvrdma_fabric_post_cqe(core, qp->send_cq, &cqe, false);
        }
        pvrdma_fabric_sq_drained(fqp);
        if (cqe.status != PVRDMA_WC_SUCCESS && qp->type == PVRDMA_QPT_RC) {
            /* IBA 10.8.3.3: a requester error moves the QP to ERR. */
            pvrdma_fabric_qp_error(qp, -1);
            break;
        }
    }
    fqp->busy = false;
}

/* Retry @fqp's RNR-stalled head now. */
static void pvrdma_fabric_rnr_retry(PvrdmaFabricQp *fqp)
{
    pvrdma_fabric_rnr_unlink(fqp);
    pvrdma_fabric_process_sq(fqp);
}

/*
 * Receives were posted on @qp: if its peer (the requester connected to
 * it) is stalled on an RNR NAK, retry at once rather than at the timer.
 */
static void pvrdma_fabric_kick_peer(PvrdmaQp *qp)
{
    const uint8_t *dgid = qp->attr.ah_attr.grh.dgid;
    PvrdmaFabric *peer;
    PvrdmaQp *pqp;

    if (!pvrdma_fabric_rnr_count || qp->type != PVRDMA_QPT_RC ||
        qp->state < PVRDMA_QPS_RTR || qp->state > PVRDMA_QPS_SQD) {
        return;
    }
    peer = pvrdma_fabric_port_lookup(dgid, qp->attr.dest_qp_num);
    if (!peer) {
        return;
    }
    pqp = pvrdma_table_lookup(&peer->core->qp_tbl, qp->attr.dest_qp_num &
                              PVRDMA_FABRIC_QPN_HANDLE_MASK);
    if (pqp && pqp->be && pvrdma_fqp(pqp)->rnr_pending &&
        pqp->attr.dest_qp_num == qp->qpn) {
        pvrdma_fabric_rnr_retry(pvrdma_fqp(pqp));
    }
}

/* Retry every RNR-stalled QP of @fab whose deadline has passed. */
static void pvrdma_fabric_run_timers(PvrdmaFabric *fab)
{
    int64_t now = pvrdma_core_now_ns(fab->core);
    PvrdmaFabricQp *f;

    /*
     * Each round takes one due QP off the list; a QP that stalls again is
     * re-linked with a deadline after @now, so this terminates.
     */
    for (;;) {
        for (f = fab->rnr_head; f; f = f->rnr_next) {
            if (f->rnr_deadline <= now) {
                break;
            }
        }
        if (!f) {
            break;
        }
        pvrdma_fabric_rnr_retry(f);
    }
    pvrdma_fabric_rearm(fab);
}

/* ---- backend ops -------------------------------------------------------- */

void *pvrdma_fabric_new(PvrdmaCore *core)
{
    PvrdmaFabric *fab = g_new0(PvrdmaFabric, 1);

    fab->core = core;
    fab->timer_expire = -1;
    fab->index = pvrdma_fabric_port_add(fab);
    if (!fab->index) {
        /* 255 devices in one process: this one stays off the fabric. */
        GERR(core, "fabric: no free device index, RC QPs of this device "
             "cannot reach any peer");
    }
    return fab;
}

static void pvrdma_fabric_free(void *be)
{
    PvrdmaFabric *fab = be;

    g_assert(!fab->rnr_head);
    pvrdma_fabric_port_del(fab);
    g_free(fab);
}

static void pvrdma_fabric_reset(void *be)
{
    PvrdmaFabric *fab = be;

    /* Every QP was destroyed (and unlinked) before. */
    g_assert(!fab->rnr_head);
    if (fab->timer_expire >= 0) {
        fab->timer_expire = -1;
        pvrdma_core_timer_mod(fab->core, -1);
    }
}

static int pvrdma_fabric_mr_register(void *be G_GNUC_UNUSED, PvrdmaMr *mr)
{
    PvrdmaFabricMr *fmr;

    if (mr->flags != PVRDMA_MR_FLAG_FRMR) {
        return 0;
    }
    /* max_sg <= PVRDMA_MAX_FAST_REG_PAGES, charged as pinned pages. */
    fmr = g_malloc0(sizeof(*fmr) + mr->max_sg * sizeof(uint64_t));
    mr->be = fmr;
    return 0;
}

static void pvrdma_fabric_mr_deregister(void *be G_GNUC_UNUSED, PvrdmaMr *mr)
{
    g_free(mr->be);
    mr->be = NULL;
}

static int pvrdma_fabric_cq_create(void *be G_GNUC_UNUSED, PvrdmaCq *cq)
{
    cq->be = g_new0(PvrdmaFabricCq, 1);
    return 0;
}

static void pvrdma_fabric_cq_destroy(void *be G_GNUC_UNUSED, PvrdmaCq *cq)
{
    g_free(cq->be);
    cq->be = NULL;
}

static int pvrdma_fabric_qp_create(void *be, PvrdmaQp *qp)
{
    PvrdmaFabric *fab = be;
    PvrdmaFabricQp *fqp = g_new0(PvrdmaFabricQp, 1);

    fqp->qp = qp;
    fqp->fab = fab;
    qp->be = fqp;
    /* Wire QPN: device index in bits 16..23 (pvrdma_fabric_port.c). */
    if (fab->index && qp->type != PVRDMA_QPT_GSI &&
        fab->core->driver_version >= PVRDMA_VERSION_QPHANDLE) {
        qp->qpn = ((uint32_t)fab->index << PVRDMA_FABRIC_QPN_INDEX_SHIFT) |
                  qp->handle;
    }
    return 0;
}

static void pvrdma_fabric_qp_destroy(void *be G_GNUC_UNUSED, PvrdmaQp *qp)
{
    PvrdmaFabricQp *fqp = pvrdma_fqp(qp);

    /* The guest frees the rings right after: no flush, no more DMA. */
    pvrdma_fabric_rnr_clear(fqp);
    pvrdma_fabric_work_del(fqp);
    g_free(fqp);
    qp->be = NULL;
}

static void pvrdma_fabric_qp_modified(void *be G_GNUC_UNUSED, PvrdmaQp *qp,
                                      uint32_t old)
{
    PvrdmaFabricQp *fqp = pvrdma_fqp(qp);

    switch (qp->state) {
    case PVRDMA_QPS_RESET:
        /* The guest zeroes its ring indexes (spec §5.3 MODIFY_QP). */
        pvrdma_fabric_rnr_clear(fqp);
        pvrdma_fabric_work_del(fqp);
        fqp->sq_cons = 0;
        fqp->rq_cons = 0;
        fqp->comm_est = false;
        fqp->sqd_notify = false;
        break;
    case PVRDMA_QPS_RTR:
        if (old != PVRDMA_QPS_RTR) {
            fqp->comm_est = false;
        }
        break;
    case PVRDMA_QPS_RTS:
        /* Resume (SQD) or start (WQEs posted early) the send queue. */
        if (old != PVRDMA_QPS_RTS) {
            pvrdma_fabric_process_sq(fqp);
        }
        break;
    case PVRDMA_QPS_SQD:
        if (old != PVRDMA_QPS_SQD && qp->attr.en_sqd_async_notify) {
            fqp->sqd_notify = true;
            pvrdma_fabric_sq_drained(fqp);
        }
        break;
    case PVRDMA_QPS_ERR:
        if (old != PVRDMA_QPS_ERR) {
            /* The core already stored ERR: do what qp_error() does. */
            qp->state = old;
            pvrdma_fabric_qp_error(qp, -1);
        } else {
            pvrdma_fabric_work_add(fqp);
        }
        break;
    default:
        break;
    }
    pvrdma_fabric_run_work();
}

static int pvrdma_fabric_srq_create(void *be G_GNUC_UNUSED, PvrdmaSrq *srq)
{
    PvrdmaFabricSrq *fsrq = g_new0(PvrdmaFabricSrq, 1);

    fsrq->limit_armed = srq->srq_limit > 0;
    srq->be = fsrq;
    return 0;
}

static int pvrdma_fabric_srq_modify(void *be G_GNUC_UNUSED, PvrdmaSrq *srq, uint32_t limit)
{
    PvrdmaFabricSrq *fsrq = srq->be;

    fsrq->limit_armed = limit > 0;
    return 0;
}

static void pvrdma_fabric_srq_destroy(void *be G_GNUC_UNUSED, PvrdmaSrq *srq)
{
    g_free(srq->be);
    srq->be = NULL;
}

static void pvrdma_fabric_post_send(void *be G_GNUC_UNUSED, PvrdmaQp *qp)
{
    PvrdmaFabricQp *fqp = pvrdma_fqp(qp);

    if (qp->state == PVRDMA_QPS_RESET || qp->state == PVRDMA_QPS_INIT ||
        qp->state == PVRDMA_QPS_RTR) {
        GERR(fqp->fab->core, "QP %u: send doorbell in state %u (WQEs wait "
             "for RTS)", qp->handle, qp->state);
    }
    pvrdma_fabric_process_sq(fqp);
    pvrdma_fabric_run_work();
}

static void pvrdma_fabric_post_recv(void *be G_GNUC_UNUSED, PvrdmaQp *qp)
{
    PvrdmaFabricQp *fqp = pvrdma_fqp(qp);
    PvrdmaCore *core = fqp->fab->core;
    uint32_t prod;

    if (qp->state == PVRDMA_QPS_ERR) {
        pvrdma_fabric_work_add(fqp);
    } else if (qp->state != PVRDMA_QPS_RESET) {
        if (pvrdma_fabric_read_prod(core, &qp->rq, fqp->rq_cons,
                                    &prod) < 0) {
            pvrdma_fabric_qp_error(qp, PVRDMA_EQE_TYPE_QP_FATAL);
        } else {
            pvrdma_fabric_kick_peer(qp);
        }
    }
    pvrdma_fabric_run_work();
}

static void pvrdma_fabric_srq_post_recv(void *be, PvrdmaSrq *srq)
{
    PvrdmaFabric *fab = be;
    PvrdmaFabricSrq *fsrq = srq->be;
    PvrdmaCore *core = fab->core;
    PvrdmaQp *qp;
    uint32_t prod, h;

    if (fsrq->failed) {
        GERR(core, "SRQ %u: doorbell on a failed SRQ", srq->handle);
    } else if (pvrdma_fabric_read_prod(core, &srq->ring, fsrq->cons,
                                       &prod) < 0) {
        pvrdma_fabric_srq_fail(core, srq);
    } else if (pvrdma_fabric_rnr_count) {
        PVRDMA_QP_FOREACH(core, h, qp) {
            if (qp->srq == srq) {
                pvrdma_fabric_kick_peer(qp);
            }
        }
    }
    pvrdma_fabric_run_work();
}

static void pvrdma_fabric_cq_poll(void *be, PvrdmaCq *cq G_GNUC_UNUSED)
{
    PvrdmaFabric *fab = be;

    /* Completions are written synchronously; only due retries remain. */
    if (fab->rnr_head) {
        pvrdma_fabric_run_timers(fab);
    }
    pvrdma_fabric_run_work();
}

static void pvrdma_fabric_timer_expired(void *be)
{
    PvrdmaFabric *fab = be;

    fab->timer_expire = -1;
    pvrdma_fabric_run_timers(fab);
    pvrdma_fabric_run_work();
}

const PvrdmaBackendOps pvrdma_fabric_backend_ops = {
    .name = "fabric",
    .reset = pvrdma_fabric_reset,
    .free = pvrdma_fabric_free,
    .mr_register = pvrdma_fabric_mr_register,
    .mr_deregister = pvrdma_fabric_mr_deregister,
    .cq_create = pvrdma_fabric_cq_create,
    .cq_destroy = pvrdma_fabric_cq_destroy,
    .qp_create = pvrdma_fabric_qp_create,
    .qp_modified = pvrdma_fabric_qp_modified,
    .qp_destroy = pvrdma_fabric_qp_destroy,
    .srq_create = pvrdma_fabric_srq_create,
    .srq_modify = pvrdma_fabric_srq_modify,
    .srq_destroy = pvrdma_fabric_srq_destroy,
    .post_send = pvrdma_fabric_post_send,
    .post_recv = pvrdma_fabric_post_recv,
    .srq_post_recv = pvrdma_fabric_srq_post_recv,
    .cq_poll = pvrdma_fabric_cq_poll,
    .timer_expired = pvrdma_fabric_timer_expired,
};
