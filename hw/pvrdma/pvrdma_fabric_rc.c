/*
 * PVRDMA software fabric, RC verbs semantics (IBA chapters 9-11, as Linux
 * rxe implements them; the decisions are listed in docs/datapath.md):
 * send WQE parsing, lkey/rkey resolution and access checks, the local
 * operations (LOCAL_INV, REG_MR), the requester and the responder, and
 * the completion statuses both sides see.
 *
 * Requester statuses: LOC_QP_OP_ERR (opcode unknown or unsupported, not an
 * RC QP, bad LOCAL_INV/REG_MR parameters), LOC_LEN_ERR (num_sge above the
 * QP's max_send_sge, message longer than max_msg_sz, atomic buffer < 8
 * bytes), LOC_PROT_ERR (lkey, PD, range or LOCAL_WRITE check, unreadable
 * local memory), and what the responder answers: REM_ACCESS_ERR,
 * REM_INV_REQ_ERR, REM_OP_ERR, RETRY_EXC_ERR (no such peer) or an RNR NAK.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "pvrdma_fabric.h"

#define GERR(core, ...) pvrdma_core_guest_error(core, __VA_ARGS__)

uint32_t pvrdma_fabric_wc_opcode(uint32_t wr_opcode)
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
    case PVRDMA_WR_LSO:
        return PVRDMA_WC_LSO;
    default:
        /* SEND, SEND_WITH_IMM, SEND_WITH_INV and anything unknown. */
        return PVRDMA_WC_SEND;
    }
}

/* ---- keys --------------------------------------------------------------- */

/* The MR a key names: key = handle << 8 | key byte, lkey == rkey. */
static PvrdmaMr *pvrdma_fabric_key_mr(PvrdmaCore *core, uint32_t key)
{
    PvrdmaMr *mr = pvrdma_table_lookup(&core->mr_tbl, key >> 8);

    return mr && mr->lkey == key ? mr : NULL;
}

/*
 * A segment [va, va + len) of @mr, len > 0.  DMA MRs take any bus
 * address; user MRs their [start, start + length); fast-reg MRs only
 * while registered, within their [iova, iova + length).
 */
static bool pvrdma_fabric_mr_seg(PvrdmaMr *mr, uint64_t va, uint64_t len,
                                 PvrdmaSeg *seg)
{
    PvrdmaFabricMr *fmr;
    uint64_t end;

    if (len == 0 || va + len < va) {
        return false;
    }
    end = va + len;             /* may be 2^64 exactly: end == 0 then */
    seg->va = va;
    seg->len = len;
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
        fmr = mr->be;
        if (!fmr || !fmr->valid || va < fmr->iova ||
            len > fmr->length || va - fmr->iova > fmr->length - len) {
            return false;
        }
        seg->pages = fmr->pages;
        seg->npages = fmr->npages;
        seg->base = fmr->iova;
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

/* An rkey of @qp's PD allowing @access on [va, va + len). */
static bool pvrdma_fabric_rkey_seg(PvrdmaCore *core, PvrdmaQp *qp,
                                   uint32_t rkey, uint64_t va, uint64_t len,
                                   uint32_t access, PvrdmaSeg *seg)
{
    PvrdmaMr *mr = pvrdma_fabric_key_mr(core, rkey);

    if (!mr || mr->pd != qp->pd || !(mr->access & access) ||
        !(qp->attr.qp_access_flags & access)) {
        return false;
    }
    return pvrdma_fabric_mr_seg(mr, va, len, seg);
}

/*
 * Resolve @n SGEs against @pd into @sgl; zero-length SGEs are skipped
 * (their key is not looked at).  Returns a PVRDMA_WC_* status.
 */
static uint32_t pvrdma_fabric_build_sgl(PvrdmaCore *core, PvrdmaPd *pd,
                                        const struct pvrdma_sge *sges,
                                        uint32_t n, bool write,
                                        PvrdmaSgl *sgl)
{
    uint64_t total = 0;
    uint32_t i;

    sgl->core = core;
    sgl->nseg = 0;
    sgl->total = 0;
    for (i = 0; i < n; i++) {
        total += sges[i].length;    /* <= 32 x 2^32: no overflow */
    }
    if (total > PVRDMA_PORT_MAX_MSG_SZ) {
        return PVRDMA_WC_LOC_LEN_ERR;
    }
    for (i = 0; i < n; i++) {
        const struct pvrdma_sge *sge = &sges[i];
        PvrdmaMr *mr;

        if (sge->length == 0) {
            continue;
        }
        mr = pvrdma_fabric_key_mr(core, sge->lkey);
        if (!mr || mr->pd != pd ||
            (write && !(mr->access & PVRDMA_ACCESS_LOCAL_WRITE)) ||
            !pvrdma_fabric_mr_seg(mr, sge->addr, sge->length,
                                  &sgl->seg[sgl->nseg])) {
            return PVRDMA_WC_LOC_PROT_ERR;
        }
        sgl->nseg++;
    }
    sgl->total = total;
    return PVRDMA_WC_SUCCESS;
}

/* Same rules as CREATE_MR (IBA 10.6.3.1). */
static bool pvrdma_fabric_access_ok(uint32_t access)
{
    if (access & ~PVRDMA_MR_ACCESS_VALID) {
        return false;
    }
    return !((access & (PVRDMA_ACCESS_REMOTE_WRITE |
                        PVRDMA_ACCESS_REMOTE_ATOMIC)) &&
             !(access & PVRDMA_ACCESS_LOCAL_WRITE));
}

/* ---- local operations --------------------------------------------------- */

/* The fast-reg MR of @qp's PD that @key names (any key byte). */
static PvrdmaMr *pvrdma_fabric_frmr(PvrdmaCore *core, PvrdmaQp *qp,
                                    uint32_t key)
{
    PvrdmaMr *mr = pvrdma_table_lookup(&core->mr_tbl, key >> 8);

    return mr && mr->flags == PVRDMA_MR_FLAG_FRMR && mr->be &&
           mr->pd == qp->pd ? mr : NULL;
}

static uint32_t pvrdma_fabric_local_inv(PvrdmaCore *core, PvrdmaQp *qp,
                                        uint32_t rkey)
{
    PvrdmaMr *mr = pvrdma_fabric_frmr(core, qp, rkey);

    if (!mr || mr->rkey != rkey) {
        GERR(core, "QP %u: LOCAL_INV of key 0x%x: no fast-reg MR of this "
             "PD", qp->handle, rkey);
        return PVRDMA_WC_LOC_QP_OP_ERR;
    }
    ((PvrdmaFabricMr *)mr->be)->valid = false;
    return PVRDMA_WC_SUCCESS;
}

/*
 * REG_MR (FAST_REG_MR): bind a page list to a free fast-reg MR.  The
 * page list is the table of the PDIR at pl_pdir_dma (the driver inserts
 * the MR's page addresses there at post time, spec §8.2).
 */
static uint32_t pvrdma_fabric_reg_mr(PvrdmaCore *core, PvrdmaQp *qp,
                                     const struct pvrdma_sq_wqe_hdr *hdr)
{
    uint64_t iova = hdr->wr.fast_reg.iova_start;
    uint32_t n = hdr->wr.fast_reg.page_list_len;
    uint32_t len = hdr->wr.fast_reg.length;
    uint32_t access = hdr->wr.fast_reg.access_flags;
    uint32_t rkey = hdr->wr.fast_reg.rkey;
    PvrdmaMr *mr = pvrdma_fabric_frmr(core, qp, rkey);
    PvrdmaFabricMr *fmr;
    uint64_t *pages;

    if (!mr || ((PvrdmaFabricMr *)mr->be)->valid) {
        GERR(core, "QP %u: REG_MR key 0x%x: no free fast-reg MR of this PD",
             qp->handle, rkey);
        return PVRDMA_WC_LOC_QP_OP_ERR;
    }
    fmr = mr->be;
    access &= ~PVRDMA_ACCESS_OPTIONAL_RANGE;
    if (hdr->wr.fast_reg.page_shift != PVRDMA_PAGE_SHIFT || n == 0 ||
        n > mr->max_sg || !pvrdma_fabric_access_ok(access) ||
        iova + len < iova ||
        (iova & (PVRDMA_PAGE_SIZE - 1)) + (uint64_t)len >
        (uint64_t)n << PVRDMA_PAGE_SHIFT) {
        GERR(core, "QP %u: REG_MR: page_shift %u, %u pages (max %u), "
             "length %u, iova 0x%" G_GINT64_MODIFIER "x, access 0x%x",
             qp->handle, hdr->wr.fast_reg.page_shift, n, mr->max_sg, len,
             iova, access);
        return PVRDMA_WC_LOC_QP_OP_ERR;
    }
    /* Copies the list in and checks every address (n <= 128). */
    if (pvrdma_pdir_read(core, hdr->wr.fast_reg.pl_pdir_dma, n,
                         &pages) < 0) {
        return PVRDMA_WC_LOC_PROT_ERR;
    }
    memcpy(fmr->pages, pages, n * sizeof(uint64_t));
    g_free(pages);
    fmr->npages = n;
    fmr->iova = iova;
    fmr->length = len;
    fmr->valid = true;
    mr->access = access;
    mr->lkey = rkey;
    mr->rkey = rkey;
    return PVRDMA_WC_SUCCESS;
}

/* ---- requester ---------------------------------------------------------- */

static bool pvrdma_fabric_is_remote_op(uint32_t op)
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
        return true;
    default:
        return false;
    }
}

int pvrdma_fabric_rc_execute(PvrdmaQp *qp, const uint8_t *wqe,
                             uint32_t wqe_size, struct pvrdma_cqe *cqe,
                             uint8_t *rnr_timer)
{
    PvrdmaCore *core = pvrdma_fqp(qp)->fab->core;
    const struct pvrdma_sq_wqe_hdr *hdr = (const void *)wqe;
    const struct pvrdma_sge *sges =
        (const void *)(wqe + sizeof(struct pvrdma_sq_wqe_hdr));
    uint32_t op = hdr->opcode, nsge = hdr->num_sge;
    bool atomic = op == PVRDMA_WR_ATOMIC_CMP_AND_SWP ||
                  op == PVRDMA_WR_ATOMIC_FETCH_AND_ADD;
    const PvrdmaGid *sgid;
    PvrdmaFabricMsg msg;
    PvrdmaFabricAck ack;
    PvrdmaSgl sgl;
    uint32_t st;

    cqe->byte_len = 0;
    if (qp->type != PVRDMA_QPT_RC) {
        /* UD/GSI sends are a later issue. */
        GERR(core, "QP %u: send on a QP of type %u is not supported yet",
             qp->handle, qp->type);
        cqe->status = PVRDMA_WC_LOC_QP_OP_ERR;
        return PVRDMA_SQ_DONE;
    }
    if (op == PVRDMA_WR_LOCAL_INV) {
        cqe->status = pvrdma_fabric_local_inv(core, qp,
                                              hdr->ex.invalidate_rkey);
        return PVRDMA_SQ_DONE;
    }
    if (op == PVRDMA_WR_FAST_REG_MR) {
        cqe->status = pvrdma_fabric_reg_mr(core, qp, hdr);
        return PVRDMA_SQ_DONE;
    }
    if (!pvrdma_fabric_is_remote_op(op)) {
        GERR(core, "QP %u: send opcode %u not supported", qp->handle, op);
        cqe->status = PVRDMA_WC_LOC_QP_OP_ERR;
        return PVRDMA_SQ_DONE;
    }
    /* The SGEs must fit the QP's limit, hence the WQE slot. */
    if (nsge > qp->attr.cap.max_send_sge ||
        nsge > (wqe_size - sizeof(*hdr)) / sizeof(struct pvrdma_sge)) {
        GERR(core, "QP %u: send WQE with %u SGEs (max %u)", qp->handle,
             nsge, qp->attr.cap.max_send_sge);
        cqe->status = PVRDMA_WC_LOC_LEN_ERR;
        return PVRDMA_SQ_DONE;
    }
    st = pvrdma_fabric_build_sgl(core, qp->pd, sges, nsge,
                                 op == PVRDMA_WR_RDMA_READ || atomic, &sgl);
    if (st == PVRDMA_WC_SUCCESS && atomic && sgl.total < sizeof(uint64_t)) {
        st = PVRDMA_WC_LOC_LEN_ERR;
    }
    if (st != PVRDMA_WC_SUCCESS) {
        cqe->status = st;
        return PVRDMA_SQ_DONE;
    }

    memset(&msg, 0, sizeof(msg));
    msg.opcode = op;
    msg.src_qpn = qp->qpn;
    msg.dst_qpn = qp->attr.dest_qp_num;
    memcpy(msg.dgid, qp->attr.ah_attr.grh.dgid, sizeof(msg.dgid));
    msg.sl = qp->attr.ah_attr.sl;
    msg.solicited = hdr->send_flags & PVRDMA_WR_FLAG_SOLICITED;
    msg.imm_data = hdr->ex.imm_data;
    msg.inv_rkey = hdr->ex.invalidate_rkey;
    if (atomic) {
        msg.remote_addr = hdr->wr.atomic.remote_addr;
        msg.rkey = hdr->wr.atomic.rkey;
        msg.compare_add = hdr->wr.atomic.compare_add;
        msg.swap = hdr->wr.atomic.swap;
        msg.length = sizeof(uint64_t);
    } else {
        msg.remote_addr = hdr->wr.rdma.remote_addr;
        msg.rkey = hdr->wr.rdma.rkey;
        msg.length = sgl.total;
    }
    msg.local = &sgl;

    /* No source address: nothing leaves the port, the retries run out. */
    sgid = qp->attr.ah_attr.grh.sgid_index < core->cfg.gid_tbl_len ?
           &core->gids[qp->attr.ah_attr.grh.sgid_index] : NULL;
    if (!sgid || !sgid->bound) {
        cqe->status = PVRDMA_WC_RETRY_EXC_ERR;
        return PVRDMA_SQ_DONE;
    }
    memcpy(msg.sgid, sgid->gid, sizeof(msg.sgid));

    pvrdma_fabric_deliver(&msg, &ack);
    if (ack.rnr) {
        *rnr_timer = ack.rnr_timer;
        return PVRDMA_SQ_STALL;
    }
    if (ack.status == PVRDMA_WC_SUCCESS && atomic) {
        uint64_t orig = GUINT64_TO_LE(ack.atomic_orig);

        if (pvrdma_fabric_sgl_write(&sgl, &orig, sizeof(orig)) !=
            PVRDMA_COPY_OK) {
            ack.status = PVRDMA_WC_LOC_PROT_ERR;
        }
    }
    cqe->status = ack.status;
    if (ack.status == PVRDMA_WC_SUCCESS) {
        cqe->byte_len = msg.length;
    }
    return PVRDMA_SQ_DONE;
}

/* ---- responder ---------------------------------------------------------- */

static void pvrdma_fabric_nak(PvrdmaQp *qp, PvrdmaFabricAck *ack,
                              uint32_t status, int event)
{
    ack->status = status;
    pvrdma_fabric_qp_error(qp, event);
}

/* R_Key violation (IBA 9.7.5.1.x class C): NAK, responder QP to ERR. */
static void pvrdma_fabric_access_err(PvrdmaQp *qp, PvrdmaFabricAck *ack)
{
    pvrdma_fabric_nak(qp, ack, PVRDMA_WC_REM_ACCESS_ERR,
                      PVRDMA_EQE_TYPE_QP_ACCESS_ERR);
}

/* Invalid request: NAK, responder QP to ERR. */
static void pvrdma_fabric_inv_req(PvrdmaQp *qp, PvrdmaFabricAck *ack)
{
    pvrdma_fabric_nak(qp, ack, PVRDMA_WC_REM_INV_REQ_ERR,
                      PVRDMA_EQE_TYPE_QP_REQ_ERR);
}

/*
 * The receive WQE fails locally: it completes with @status, the QP goes
 * to ERR and the requester gets @nak (with @event on the responder).
 */
static void pvrdma_fabric_recv_fail(PvrdmaCore *core, PvrdmaQp *qp,
                                    struct pvrdma_cqe *cqe, uint32_t status,
                                    PvrdmaFabricAck *ack, uint32_t nak,
                                    int event)
{
    cqe->status = status;
    cqe->byte_len = 0;
    pvrdma_fabric_recv_consume(qp);
    pvrdma_fabric_post_cqe(core, qp->recv_cq, cqe, false);
    pvrdma_fabric_nak(qp, ack, nak, event);
}

/* Fields of a receive completion of @msg. */
static void pvrdma_fabric_recv_cqe(PvrdmaCore *core, PvrdmaQp *qp,
                                   const PvrdmaFabricMsg *msg,
                                   struct pvrdma_cqe *cqe)
{
    static const uint8_t v4mapped[12] = {
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
    };
    const PvrdmaGid *g = &core->gids[qp->attr.ah_attr.grh.sgid_index];

    cqe->src_qp = msg->src_qpn;
    cqe->sl = msg->sl;
    cqe->wc_flags |= PVRDMA_WC_WITH_NETWORK_HDR_TYPE;
    if (g->type == PVRDMA_GID_TYPE_FLAG_ROCE_V2) {
        cqe->network_hdr_type = memcmp(msg->sgid, v4mapped, 12) ?
                                PVRDMA_NETWORK_IPV6 : PVRDMA_NETWORK_IPV4;
    } else {
        cqe->network_hdr_type = PVRDMA_NETWORK_ROCE_V1;
    }
}

static void pvrdma_fabric_respond_send(PvrdmaCore *core, PvrdmaQp *qp,
                                       PvrdmaFabricMsg *msg,
                                       PvrdmaFabricAck *ack)
{
    uint64_t wqe[PVRDMA_FABRIC_MAX_WQE / sizeof(uint64_t)];
    const struct pvrdma_rq_wqe_hdr *hdr = (const void *)wqe;
    const struct pvrdma_sge *sges = (const void *)(hdr + 1);
    PvrdmaMr *inv = NULL;
    struct pvrdma_cqe cqe;
    uint32_t max_sge, st;
    PvrdmaSgl sgl;
    int ret;

    if (msg->opcode == PVRDMA_WR_SEND_WITH_INV) {
        /* Checked before anything is placed: an R_Key violation. */
        inv = pvrdma_fabric_frmr(core, qp, msg->inv_rkey);
        if (!inv || inv->rkey != msg->inv_rkey) {
            GERR(core, "QP %u: SEND_WITH_INV of key 0x%x: no fast-reg MR "
                 "of this PD", qp->handle, msg->inv_rkey);
            pvrdma_fabric_access_err(qp, ack);
            return;
        }
    }
    ret = pvrdma_fabric_recv_peek(qp, wqe, sizeof(wqe), &max_sge);
    if (ret < 0) {
        ack->status = PVRDMA_WC_REM_OP_ERR;
        return;
    }
    if (ret == 0) {
        ack->rnr = true;
        ack->rnr_timer = qp->attr.min_rnr_timer;
        return;
    }
    pvrdma_fabric_cqe_init(&cqe, qp, hdr->wr_id, PVRDMA_WC_RECV,
                           PVRDMA_WC_SUCCESS);
    if (hdr->num_sge > max_sge) {
        GERR(core, "QP %u: receive WQE with %u SGEs (max %u)", qp->handle,
             hdr->num_sge, max_sge);
        pvrdma_fabric_recv_fail(core, qp, &cqe, PVRDMA_WC_LOC_LEN_ERR, ack,
                                PVRDMA_WC_REM_OP_ERR, -1);
        return;
    }
    st = pvrdma_fabric_build_sgl(core, qp->srq ? qp->srq->pd : qp->pd,
                                 sges, hdr->num_sge, true, &sgl);
    if (st != PVRDMA_WC_SUCCESS) {
        pvrdma_fabric_recv_fail(core, qp, &cqe, PVRDMA_WC_LOC_PROT_ERR, ack,
                                PVRDMA_WC_REM_OP_ERR, -1);
        return;
    }
    if (msg->length > sgl.total) {
        /* rxe class C: the receive sees LOC_LEN_ERR, the sender a NAK. */
        pvrdma_fabric_recv_fail(core, qp, &cqe, PVRDMA_WC_LOC_LEN_ERR, ack,
                                PVRDMA_WC_REM_INV_REQ_ERR,
                                PVRDMA_EQE_TYPE_QP_REQ_ERR);
        return;
    }
    switch (pvrdma_fabric_copy(&sgl, msg->local, msg->length)) {
    case PVRDMA_COPY_SRC_FAULT:
        /* The requester's memory: nothing was sent, the WQE stays. */
        ack->status = PVRDMA_WC_LOC_PROT_ERR;
        return;
    case PVRDMA_COPY_DST_FAULT:
        pvrdma_fabric_recv_fail(core, qp, &cqe, PVRDMA_WC_LOC_PROT_ERR, ack,
                                PVRDMA_WC_REM_OP_ERR, -1);
        return;
    default:
        break;
    }
    pvrdma_fabric_recv_cqe(core, qp, msg, &cqe);
    cqe.byte_len = msg->length;
    if (msg->opcode == PVRDMA_WR_SEND_WITH_IMM) {
        cqe.wc_flags |= PVRDMA_WC_WITH_IMM;
        cqe.imm_data = msg->imm_data;
    } else if (inv) {
        /* ib_wc keeps invalidate_rkey where imm_data is (our convention) */
        ((PvrdmaFabricMr *)inv->be)->valid = false;
        cqe.wc_flags |= PVRDMA_WC_WITH_INVALIDATE;
        cqe.imm_data = msg->inv_rkey;
    }
    pvrdma_fabric_recv_consume(qp);
    pvrdma_fabric_post_cqe(core, qp->recv_cq, &cqe, msg->solicited);
    ack->status = PVRDMA_WC_SUCCESS;
}

/*
 * The responder's side of an RDMA WRITE or READ: @access must be enabled
 * on the QP and the rkey must grant it over the whole range. A zero-length
 * request checks no key (IBA 9.4.3) and leaves @sgl empty.
 */
static bool pvrdma_fabric_remote_sgl(PvrdmaCore *core, PvrdmaQp *qp,
                                     const PvrdmaFabricMsg *msg,
                                     uint32_t access, PvrdmaSgl *sgl)
{
    if (!(qp->attr.qp_access_flags & access)) {
        return false;
    }
    sgl->core = core;
    sgl->nseg = 0;
    sgl->total = msg->length;
    return !msg->length ||
           pvrdma_fabric_rkey_seg(core, qp, msg->rkey, msg->remote_addr,
                                  msg->length, access, &sgl->seg[sgl->nseg++]);
}

static void pvrdma_fabric_respond_write(PvrdmaCore *core, PvrdmaQp *qp,
                                        PvrdmaFabricMsg *msg,
                                        PvrdmaFabricAck *ack)
{
    uint64_t wqe[PVRDMA_FABRIC_MAX_WQE / sizeof(uint64_t)];
    const struct pvrdma_rq_wqe_hdr *hdr = (const void *)wqe;
    bool imm = msg->opcode == PVRDMA_WR_RDMA_WRITE_WITH_IMM;
    struct pvrdma_cqe cqe;
    uint32_t max_sge;
    PvrdmaSgl sgl;

    if (imm) {
        /* Resources before keys, as rxe: an empty RQ is an RNR NAK. */
        int ret = pvrdma_fabric_recv_peek(qp, wqe, sizeof(wqe), &max_sge);

        if (ret < 0) {
            ack->status = PVRDMA_WC_REM_OP_ERR;
            return;
        }
        if (ret == 0) {
            ack->rnr = true;
            ack->rnr_timer = qp->attr.min_rnr_timer;
            return;
        }
    }
    if (!pvrdma_fabric_remote_sgl(core, qp, msg, PVRDMA_ACCESS_REMOTE_WRITE,
                                  &sgl)) {
        pvrdma_fabric_access_err(qp, ack);
        return;
    }
    switch (pvrdma_fabric_copy(&sgl, msg->local, msg->length)) {
    case PVRDMA_COPY_SRC_FAULT:
        ack->status = PVRDMA_WC_LOC_PROT_ERR;
        return;
    case PVRDMA_COPY_DST_FAULT:
        pvrdma_fabric_access_err(qp, ack);
        return;
    default:
        break;
    }
    if (imm) {
        pvrdma_fabric_cqe_init(&cqe, qp, hdr->wr_id,
                               PVRDMA_WC_RECV_RDMA_WITH_IMM,
                               PVRDMA_WC_SUCCESS);
        pvrdma_fabric_recv_cqe(core, qp, msg, &cqe);
        cqe.byte_len = msg->length;
        cqe.wc_flags |= PVRDMA_WC_WITH_IMM;
        cqe.imm_data = msg->imm_data;
        pvrdma_fabric_recv_consume(qp);
        pvrdma_fabric_post_cqe(core, qp->recv_cq, &cqe, msg->solicited);
    }
    ack->status = PVRDMA_WC_SUCCESS;
}

static void pvrdma_fabric_respond_read(PvrdmaCore *core, PvrdmaQp *qp,
                                       PvrdmaFabricMsg *msg,
                                       PvrdmaFabricAck *ack)
{
    PvrdmaSgl sgl;

    if (!pvrdma_fabric_remote_sgl(core, qp, msg, PVRDMA_ACCESS_REMOTE_READ,
                                  &sgl)) {
        pvrdma_fabric_access_err(qp, ack);
        return;
    }
    switch (pvrdma_fabric_copy(msg->local, &sgl, msg->length)) {
    case PVRDMA_COPY_DST_FAULT:
        ack->status = PVRDMA_WC_LOC_PROT_ERR;
        return;
    case PVRDMA_COPY_SRC_FAULT:
        pvrdma_fabric_access_err(qp, ack);
        return;
    default:
        break;
    }
    ack->status = PVRDMA_WC_SUCCESS;
}

/*
 * CMP_AND_SWP / FETCH_AND_ADD on 8 aligned bytes, atomic with respect to
 * the guest's vCPUs: the target is mapped and changed with __atomic
 * builtins.  A target that cannot be mapped as RAM is refused as an
 * R_Key violation rather than emulated non-atomically.
 */
static void pvrdma_fabric_respond_atomic(PvrdmaCore *core, PvrdmaQp *qp,
                                         PvrdmaFabricMsg *msg,
                                         PvrdmaFabricAck *ack)
{
    uint64_t bus, run, len = sizeof(uint64_t);
    PvrdmaSeg seg;
    uint64_t *p;

    if (msg->remote_addr & (sizeof(uint64_t) - 1)) {
        pvrdma_fabric_inv_req(qp, ack);
        return;
    }
    if (!(qp->attr.qp_access_flags & PVRDMA_ACCESS_REMOTE_ATOMIC) ||
        !pvrdma_fabric_rkey_seg(core, qp, msg->rkey, msg->remote_addr,
                                sizeof(uint64_t), PVRDMA_ACCESS_REMOTE_ATOMIC,
                                &seg) ||
        !pvrdma_fabric_seg_xlate(&seg, 0, &bus, &run) ||
        run < sizeof(uint64_t)) {
        pvrdma_fabric_access_err(qp, ack);
        return;
    }
    p = pvrdma_core_dma_map(core, bus, &len, true);
    if (!p || len < sizeof(uint64_t) || ((uintptr_t)p & 7)) {
        pvrdma_core_dma_unmap(core, p, len, true, 0);
        GERR(core, "QP %u: atomic target 0x%" G_GINT64_MODIFIER "x is not "
             "mappable RAM", qp->handle, bus);
        pvrdma_fabric_access_err(qp, ack);
        return;
    }
    if (msg->opcode == PVRDMA_WR_ATOMIC_CMP_AND_SWP) {
        uint64_t expected = GUINT64_TO_LE(msg->compare_add);

        /* On failure 'expected' receives the current value. */
        __atomic_compare_exchange_n(p, &expected,
                                    GUINT64_TO_LE(msg->swap), false,
                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        ack->atomic_orig = GUINT64_FROM_LE(expected);
    } else {
        ack->atomic_orig = __atomic_fetch_add(p, msg->compare_add,
                                              __ATOMIC_SEQ_CST);
    }
    pvrdma_core_dma_unmap(core, p, len, true, sizeof(uint64_t));
    ack->status = PVRDMA_WC_SUCCESS;
}

void pvrdma_fabric_rc_respond(PvrdmaFabric *fab, PvrdmaQp *qp,
                              PvrdmaFabricMsg *msg, PvrdmaFabricAck *ack)
{
    PvrdmaCore *core = fab->core;
    PvrdmaFabricQp *fqp = pvrdma_fqp(qp);
    const PvrdmaGid *g;

    /*
     * Not an RC QP able to receive, or not connected back to the sender
     * (IBA 9.6.1.5 checks, rxe check_addr): silently dropped, so the
     * requester runs out of retries.
     */
    ack->status = PVRDMA_WC_RETRY_EXC_ERR;
    if (qp->type != PVRDMA_QPT_RC || qp->state < PVRDMA_QPS_RTR ||
        qp->state > PVRDMA_QPS_SQD || qp->attr.dest_qp_num != msg->src_qpn ||
        memcmp(qp->attr.ah_attr.grh.dgid, msg->sgid, 16) != 0 ||
        qp->attr.ah_attr.grh.sgid_index >= core->cfg.gid_tbl_len) {
        return;
    }
    g = &core->gids[qp->attr.ah_attr.grh.sgid_index];
    if (!g->bound || memcmp(g->gid, msg->dgid, 16) != 0) {
        return;
    }
    if (qp->state == PVRDMA_QPS_RTR && !fqp->comm_est) {
        fqp->comm_est = true;
        pvrdma_core_post_async_event(core, PVRDMA_EQE_TYPE_COMM_EST,
                                     qp->handle);
    }
    switch (msg->opcode) {
    case PVRDMA_WR_SEND:
    case PVRDMA_WR_SEND_WITH_IMM:
    case PVRDMA_WR_SEND_WITH_INV:
        pvrdma_fabric_respond_send(core, qp, msg, ack);
        break;
    case PVRDMA_WR_RDMA_WRITE:
    case PVRDMA_WR_RDMA_WRITE_WITH_IMM:
        pvrdma_fabric_respond_write(core, qp, msg, ack);
        break;
    case PVRDMA_WR_RDMA_READ:
        pvrdma_fabric_respond_read(core, qp, msg, ack);
        break;
    case PVRDMA_WR_ATOMIC_CMP_AND_SWP:
    case PVRDMA_WR_ATOMIC_FETCH_AND_ADD:
        pvrdma_fabric_respond_atomic(core, qp, msg, ack);
        break;
    default:
        pvrdma_fabric_inv_req(qp, ack);
        break;
    }
}
