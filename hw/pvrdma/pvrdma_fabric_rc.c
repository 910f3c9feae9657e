/*
 * PVRDMA software fabric, RC verbs semantics (IBA chapters 9-11, as Linux
 * rxe implements them; the decisions are listed in docs/datapath.md):
 * the requester turns a validated PvrdmaSendWr (the core has parsed the
 * WQE, resolved its lkeys and executed local operations) into a message
 * and the responder's answer into a PvrdmaSendResult; the responder
 * checks the rkey and access, takes receive WQEs, moves the payload into
 * or out of its own guest's memory and decides the statuses both sides
 * see.
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

/* ---- requester ----------------------------------------------------------- */

/*
 * The in-process payload: the requester's own SGL, read and written
 * through the requester's own core.  @buf is host memory of the
 * responder (possibly the same guest, hence memmove underneath).
 */
static int pvrdma_fabric_payload_read(void *opaque, uint64_t off, void *buf,
                                      uint64_t n)
{
    return pvrdma_sgl_cursor_copy(opaque, off, buf, n, false);
}

static int pvrdma_fabric_payload_write(void *opaque, uint64_t off, void *buf,
                                       uint64_t n)
{
    return pvrdma_sgl_cursor_copy(opaque, off, buf, n, true);
}

bool pvrdma_fabric_rc_submit(PvrdmaFabricPort *port, PvrdmaQp *qp,
                             PvrdmaSendWr *wr)
{
    PvrdmaSglCursor cursor;
    PvrdmaFabricPayload payload = {
        .read = pvrdma_fabric_payload_read,
        .write = pvrdma_fabric_payload_write,
        .opaque = &cursor,
    };
    PvrdmaFabricMsg msg = {
        .opcode = wr->opcode,
        .src_qpn = wr->src_qpn,
        .dst_qpn = wr->dst_qpn,
        .sl = wr->sl,
        .solicited = wr->solicited,
        .imm_data = wr->imm_data,
        .inv_rkey = wr->inv_rkey,
        .remote_addr = wr->remote_addr,
        .rkey = wr->rkey,
        .compare_add = wr->compare_add,
        .swap = wr->swap,
        .length = wr->length,
    };
    PvrdmaSendResult res;
    PvrdmaFabricAck ack;

    pvrdma_sgl_seek(&cursor, &wr->local, 0);
    memcpy(msg.sgid, wr->sgid, sizeof(msg.sgid));
    memcpy(msg.dgid, wr->dgid, sizeof(msg.dgid));
    pvrdma_fabric_deliver(port->fabric, &msg, &payload, &ack);
    res = (PvrdmaSendResult) {
        .status = ack.status,
        .rnr = ack.rnr,
        .rnr_timer = ack.rnr_timer,
        .atomic_orig = ack.atomic_orig,
    };
    pvrdma_core_send_done(port->core, qp, &res);
    return ack.rnr;
}

/* ---- responder ----------------------------------------------------------- */

static void pvrdma_fabric_nak(PvrdmaCore *core, PvrdmaQp *qp,
                              PvrdmaFabricAck *ack, uint32_t status,
                              int event)
{
    ack->status = status;
    pvrdma_core_qp_error(core, qp, event);
}

/* R_Key violation (IBA 9.7.5.1.x class C): NAK, responder QP to ERR. */
static void pvrdma_fabric_access_err(PvrdmaCore *core, PvrdmaQp *qp,
                                     PvrdmaFabricAck *ack)
{
    pvrdma_fabric_nak(core, qp, ack, PVRDMA_WC_REM_ACCESS_ERR,
                      PVRDMA_EQE_TYPE_QP_ACCESS_ERR);
}

/* Invalid request: NAK, responder QP to ERR. */
static void pvrdma_fabric_inv_req(PvrdmaCore *core, PvrdmaQp *qp,
                                  PvrdmaFabricAck *ack)
{
    pvrdma_fabric_nak(core, qp, ack, PVRDMA_WC_REM_INV_REQ_ERR,
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
    pvrdma_core_recv_done(core, qp, cqe, false);
    pvrdma_fabric_nak(core, qp, ack, nak, event);
}

/*
 * The receive WQE a message consumes (its buffers resolved when the
 * message fills them); false with an RNR NAK when there is none, or
 * REM_OP_ERR when the queue is broken.
 */
static bool pvrdma_fabric_take_recv(PvrdmaCore *core, PvrdmaQp *qp,
                                    PvrdmaRecvWr *rwr, bool resolve,
                                    PvrdmaFabricAck *ack)
{
    int ret = pvrdma_core_recv_peek(core, qp, rwr, resolve);

    if (ret < 0) {
        ack->status = PVRDMA_WC_REM_OP_ERR;
        return false;
    }
    if (ret == 0) {
        ack->rnr = true;
        ack->rnr_timer = qp->attr.min_rnr_timer;
        return false;
    }
    return true;
}

/* Fields of a receive completion of @msg. */
static void pvrdma_fabric_recv_cqe(PvrdmaCore *core, PvrdmaQp *qp,
                                   const PvrdmaFabricMsg *msg,
                                   struct pvrdma_cqe *cqe)
{
    static const uint8_t v4mapped[12] = {
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
    };
    uint8_t type = 0;

    pvrdma_core_sgid(core, qp->attr.ah_attr.grh.sgid_index, &type);
    cqe->src_qp = msg->src_qpn;
    cqe->sl = msg->sl;
    cqe->wc_flags |= PVRDMA_WC_WITH_NETWORK_HDR_TYPE;
    if (type == PVRDMA_GID_TYPE_FLAG_ROCE_V2) {
        cqe->network_hdr_type = memcmp(msg->sgid, v4mapped, 12) ?
                                PVRDMA_NETWORK_IPV6 : PVRDMA_NETWORK_IPV4;
    } else {
        cqe->network_hdr_type = PVRDMA_NETWORK_ROCE_V1;
    }
}

static void pvrdma_fabric_respond_send(PvrdmaCore *core, PvrdmaQp *qp,
                                       const PvrdmaFabricMsg *msg,
                                       const PvrdmaFabricPayload *payload,
                                       PvrdmaFabricAck *ack)
{
    bool inv = msg->opcode == PVRDMA_WR_SEND_WITH_INV;
    struct pvrdma_cqe cqe;
    PvrdmaRecvWr rwr;

    /* Checked before anything is placed: an R_Key violation. */
    if (inv && !pvrdma_core_inv_ok(core, qp, msg->inv_rkey)) {
        pvrdma_fabric_access_err(core, qp, ack);
        return;
    }
    if (!pvrdma_fabric_take_recv(core, qp, &rwr, true, ack)) {
        return;
    }
    pvrdma_core_cqe_init(&cqe, qp, rwr.wr_id, PVRDMA_WC_RECV,
                         PVRDMA_WC_SUCCESS);
    if (rwr.status != PVRDMA_WC_SUCCESS) {
        /* The receive WQE itself is bad (SGE count, lkey, range). */
        pvrdma_fabric_recv_fail(core, qp, &cqe, rwr.status, ack,
                                PVRDMA_WC_REM_OP_ERR, -1);
        return;
    }
    if (msg->length > rwr.sgl.total) {
        /* rxe class C: the receive sees LOC_LEN_ERR, the sender a NAK. */
        pvrdma_fabric_recv_fail(core, qp, &cqe, PVRDMA_WC_LOC_LEN_ERR, ack,
                                PVRDMA_WC_REM_INV_REQ_ERR,
                                PVRDMA_EQE_TYPE_QP_REQ_ERR);
        return;
    }
    switch (pvrdma_sgl_xfer(&rwr.sgl, 0, msg->length, true, payload->read,
                            payload->opaque)) {
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
        pvrdma_core_invalidate(core, qp, msg->inv_rkey);
        cqe.wc_flags |= PVRDMA_WC_WITH_INVALIDATE;
        cqe.imm_data = GUINT32_TO_LE(msg->inv_rkey);
    }
    pvrdma_core_recv_done(core, qp, &cqe, msg->solicited);
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
           pvrdma_core_rkey_seg(core, qp, msg->rkey, msg->remote_addr,
                                msg->length, access, &sgl->seg[sgl->nseg++]);
}

static void pvrdma_fabric_respond_write(PvrdmaCore *core, PvrdmaQp *qp,
                                        const PvrdmaFabricMsg *msg,
                                        const PvrdmaFabricPayload *payload,
                                        PvrdmaFabricAck *ack)
{
    bool imm = msg->opcode == PVRDMA_WR_RDMA_WRITE_WITH_IMM;
    struct pvrdma_cqe cqe;
    PvrdmaRecvWr rwr;
    PvrdmaSgl sgl;

    /* Resources before keys, as rxe: an empty RQ is an RNR NAK. */
    if (imm && !pvrdma_fabric_take_recv(core, qp, &rwr, false, ack)) {
        return;
    }
    if (!pvrdma_fabric_remote_sgl(core, qp, msg, PVRDMA_ACCESS_REMOTE_WRITE,
                                  &sgl)) {
        pvrdma_fabric_access_err(core, qp, ack);
        return;
    }
    switch (pvrdma_sgl_xfer(&sgl, 0, msg->length, true, payload->read,
                            payload->opaque)) {
    case PVRDMA_COPY_SRC_FAULT:
        ack->status = PVRDMA_WC_LOC_PROT_ERR;
        return;
    case PVRDMA_COPY_DST_FAULT:
        pvrdma_fabric_access_err(core, qp, ack);
        return;
    default:
        break;
    }
    if (imm) {
        /* The receive WQE's buffers are not used: no SGE is checked. */
        pvrdma_core_cqe_init(&cqe, qp, rwr.wr_id,
                             PVRDMA_WC_RECV_RDMA_WITH_IMM,
                             PVRDMA_WC_SUCCESS);
        pvrdma_fabric_recv_cqe(core, qp, msg, &cqe);
        cqe.byte_len = msg->length;
        cqe.wc_flags |= PVRDMA_WC_WITH_IMM;
        cqe.imm_data = msg->imm_data;
        pvrdma_core_recv_done(core, qp, &cqe, msg->solicited);
    }
    ack->status = PVRDMA_WC_SUCCESS;
}

static void pvrdma_fabric_respond_read(PvrdmaCore *core, PvrdmaQp *qp,
                                       const PvrdmaFabricMsg *msg,
                                       const PvrdmaFabricPayload *payload,
                                       PvrdmaFabricAck *ack)
{
    PvrdmaSgl sgl;

    if (!pvrdma_fabric_remote_sgl(core, qp, msg, PVRDMA_ACCESS_REMOTE_READ,
                                  &sgl)) {
        pvrdma_fabric_access_err(core, qp, ack);
        return;
    }
    switch (pvrdma_sgl_xfer(&sgl, 0, msg->length, false, payload->write,
                            payload->opaque)) {
    case PVRDMA_COPY_DST_FAULT:
        ack->status = PVRDMA_WC_LOC_PROT_ERR;
        return;
    case PVRDMA_COPY_SRC_FAULT:
        pvrdma_fabric_access_err(core, qp, ack);
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
                                         const PvrdmaFabricMsg *msg,
                                         PvrdmaFabricAck *ack)
{
    uint64_t bus, run, len = sizeof(uint64_t);
    PvrdmaSeg seg;
    uint64_t *p;

    if (msg->remote_addr & (sizeof(uint64_t) - 1)) {
        pvrdma_fabric_inv_req(core, qp, ack);
        return;
    }
    if (!(qp->attr.qp_access_flags & PVRDMA_ACCESS_REMOTE_ATOMIC) ||
        !pvrdma_core_rkey_seg(core, qp, msg->rkey, msg->remote_addr,
                              sizeof(uint64_t), PVRDMA_ACCESS_REMOTE_ATOMIC,
                              &seg) ||
        !pvrdma_seg_xlate(&seg, 0, &bus, &run) ||
        run < sizeof(uint64_t)) {
        pvrdma_fabric_access_err(core, qp, ack);
        return;
    }
    p = pvrdma_core_dma_map(core, bus, &len, true);
    if (!p || len < sizeof(uint64_t) || ((uintptr_t)p & 7)) {
        pvrdma_core_dma_unmap(core, p, len, true, 0);
        GERR(core, QP_ATOMIC_TARGET_NOT_MAPPABLE_RAM,
             "QP %u: atomic target 0x%" G_GINT64_MODIFIER "x is not "
             "mappable RAM", qp->handle, bus);
        pvrdma_fabric_access_err(core, qp, ack);
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

void pvrdma_fabric_rc_respond(PvrdmaFabricPort *port, PvrdmaQp *qp,
                              const PvrdmaFabricMsg *msg,
                              const PvrdmaFabricPayload *payload,
                              PvrdmaFabricAck *ack)
{
    PvrdmaCore *core = port->core;
    const uint8_t *gid;
    uint8_t type;

    /*
     * Not an RC QP able to receive, or not connected back to the sender
     * (IBA 9.6.1.5 checks, rxe check_addr): silently dropped, so the
     * requester runs out of retries.
     */
    ack->status = PVRDMA_WC_RETRY_EXC_ERR;
    if (qp->type != PVRDMA_QPT_RC || qp->state < PVRDMA_QPS_RTR ||
        qp->state > PVRDMA_QPS_SQD || qp->attr.dest_qp_num != msg->src_qpn ||
        memcmp(qp->attr.ah_attr.grh.dgid, msg->sgid, 16) != 0) {
        return;
    }
    gid = pvrdma_core_sgid(core, qp->attr.ah_attr.grh.sgid_index, &type);
    if (!gid || memcmp(gid, msg->dgid, 16) != 0) {
        return;
    }
    pvrdma_core_qp_comm_est(core, qp);
    switch (msg->opcode) {
    case PVRDMA_WR_SEND:
    case PVRDMA_WR_SEND_WITH_IMM:
    case PVRDMA_WR_SEND_WITH_INV:
        pvrdma_fabric_respond_send(core, qp, msg, payload, ack);
        break;
    case PVRDMA_WR_RDMA_WRITE:
    case PVRDMA_WR_RDMA_WRITE_WITH_IMM:
        pvrdma_fabric_respond_write(core, qp, msg, payload, ack);
        break;
    case PVRDMA_WR_RDMA_READ:
        pvrdma_fabric_respond_read(core, qp, msg, payload, ack);
        break;
    case PVRDMA_WR_ATOMIC_CMP_AND_SWP:
    case PVRDMA_WR_ATOMIC_FETCH_AND_ADD:
        pvrdma_fabric_respond_atomic(core, qp, msg, ack);
        break;
    default:
        pvrdma_fabric_inv_req(core, qp, ack);
        break;
    }
}
