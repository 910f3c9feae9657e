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

#include "pvrdma_link.h"

/* ---- requester ----------------------------------------------------------- */

/* The datagram's bytes out of the sender's SGL into a flat buffer. */
static int pvrdma_fabric_buf_write(void *opaque, uint64_t off, void *buf,
                                   uint64_t n)
{
    memcpy((uint8_t *)opaque + off, buf, n);
    return 0;
}

/*
 * A UD SEND to a multicast GID: into every QP attached to the group in
 * this process (the sender's own included, as rxe does), and one copy on
 * each link whose peer announced members; then it is sent (a datagram
 * completes when it leaves).  A fault of the sender's memory fails it.
 */
static int pvrdma_fabric_mcast_send(PvrdmaFabricPort *port, PvrdmaQp *qp,
                                    PvrdmaSendWr *wr, PvrdmaFabricMsg *msg)
{
    PvrdmaSendResult res = { .status = PVRDMA_WC_SUCCESS };
    uint8_t buf[PVRDMA_PORT_UD_MAX_MSG];
    bool copied = false;
    g_autoptr(GList) links = NULL;
    GList *e;

    memcpy(msg->sgid, wr->sgid, sizeof(msg->sgid));
    memcpy(msg->dgid, wr->dgid, sizeof(msg->dgid));
    pvrdma_fabric_mcast_deliver(port->fabric, msg, &wr->local, NULL);
    links = g_list_copy(port->fabric->links);
    for (e = links; e; e = e->next) {
        if (!pvrdma_link_has_mgid(e->data, wr->dgid)) {
            continue;
        }
        if (!copied) {
            if (pvrdma_sgl_xfer(&wr->local, 0, wr->length, false,
                                pvrdma_fabric_buf_write, buf) !=
                PVRDMA_COPY_OK) {
                res.status = PVRDMA_WC_LOC_PROT_ERR;
                break;
            }
            copied = true;
        }
        pvrdma_link_send_mcast(e->data, wr, buf);
    }
    pvrdma_core_send_done(port->core, qp, &res);
    return 0;
}

void pvrdma_fabric_msg_init(PvrdmaFabricMsg *msg, const PvrdmaSendWr *wr)
{
    *msg = (PvrdmaFabricMsg) {
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
        .uc = wr->uc,
        .xrc = wr->xrc,
        .xrc_srqn = wr->xrc_srqn,
        .ud = wr->ud,
        .qkey = wr->qkey,
        .flow_label = wr->flow_label,
        .tclass = wr->tclass,
        .hop_limit = wr->hop_limit,
    };
    memcpy(msg->sgid, wr->sgid, sizeof(msg->sgid));
    memcpy(msg->dgid, wr->dgid, sizeof(msg->dgid));
}

int pvrdma_fabric_rc_submit(PvrdmaFabricPort *port, PvrdmaQp *qp,
                            PvrdmaSendWr *wr)
{
    PvrdmaFabricQp *fqp = qp->be;
    const PvrdmaFabricReq *last = fqp->reqs.tail ? fqp->reqs.tail->data :
                                  NULL;
    PvrdmaFabricPayload payload = { .sgl = &wr->local };
    PvrdmaFabricMsg msg;
    PvrdmaFabricPort *rport;
    PvrdmaSendResult res;
    PvrdmaFabricAck ack;

    pvrdma_fabric_msg_init(&msg, wr);
    if (wr->ud && wr->dst_qpn == PVRDMA_QPN_MULTICAST &&
        pvrdma_mcast_gid(wr->dgid)) {
        /* Answered at once (below): only with nothing else out. */
        return last ? -EAGAIN : pvrdma_fabric_mcast_send(port, qp, wr, &msg);
    }
    PvrdmaQp *rqp;

    /* A port of this process first, then the links (one lookup each). */
    rport = pvrdma_fabric_lookup(port->fabric, wr->dgid, wr->dst_qpn, &rqp);
    if (!rport) {
        PvrdmaLink *l = pvrdma_fabric_route(port->fabric, wr->dgid,
                                            wr->dst_qpn);

        if (pvrdma_fabric_held(port->fabric, l, wr->dgid, wr->dst_qpn)) {
            /*
             * Its port is moving to another QEMU: wait, outstanding,
             * until it lands (one request per QP, the others behind it).
             */
            if (last) {
                return -EAGAIN;
            }
            pvrdma_fabric_park(port, qp, wr);
            return 0;
        }
        if (l && last) {
            /*
             * Behind requests still out, on the same link only (it keeps
             * their order); READs and atomics within max_rd_atomic; and
             * a request without payload goes out as a control frame at
             * once, so not while an earlier payload of the QP is still
             * being sent (those are the newest ones).
             */
            if (last->link != l ||
                (pvrdma_fabric_op_reads(wr->opcode) &&
                 fqp->nrd >= MAX(qp->attr.max_rd_atomic, 1)) ||
                (last->tx && !(pvrdma_fabric_op_has_payload(wr->opcode) &&
                               wr->length))) {
                return -EAGAIN;
            }
        }
        if (l) {
            /* Another process: the answer comes with the link's ACK. */
            pvrdma_link_submit(l, port, qp, wr);
            return 0;
        }
    }
    if (last) {
        /* Answered at once: only with nothing else out. */
        return -EAGAIN;
    }
    pvrdma_fabric_deliver(rport, rqp, &msg, &payload, &ack);
    if (ack.status == PVRDMA_WC_RETRY_EXC_ERR && !ack.rnr && !wr->ud &&
        !wr->uc && (rport || pvrdma_fabric_gid_local(port->fabric, wr->dgid,
                                                     wr->dst_qpn))) {
        /* Dropped there (no such QP): our retries run out first. */
        pvrdma_fabric_drop_wait(pvrdma_fabric_req_new(port, qp, wr), -1);
        return 0;
    }
    res = (PvrdmaSendResult) {
        .status = ack.status,
        .rnr = ack.rnr,
        .rnr_timer = ack.rnr_timer,
        .atomic_orig = ack.atomic_orig,
    };
    if (wr->ud) {
        /* A datagram is sent once it leaves; only local faults count. */
        res = (PvrdmaSendResult) {
            .status = ack.status == PVRDMA_WC_LOC_PROT_ERR ?
                      ack.status : PVRDMA_WC_SUCCESS,
        };
        ack.rnr = false;
    }
    pvrdma_core_send_done(port->core, qp, &res);
    return ack.rnr ? 1 : 0;
}

/* ---- responder ----------------------------------------------------------- */

static void pvrdma_fabric_nak(PvrdmaFabricExec *ex, uint32_t status, int event)
{
    ex->ack.status = status;
    ex->done = true;
    pvrdma_core_qp_error(ex->port->core, ex->qp, event);
}

/* The answer is known without moving (more) data. */
static void pvrdma_fabric_answer(PvrdmaFabricExec *ex, uint32_t status)
{
    ex->ack.status = status;
    ex->done = true;
}

/*
 * R_Key violation (IBA 9.7.5.1.x class C): NAK, responder QP to ERR.  A
 * UC responder drops the message and goes on (rxe does the same).
 */
static void pvrdma_fabric_access_err(PvrdmaFabricExec *ex)
{
    if (ex->qp->type == PVRDMA_QPT_UC) {
        pvrdma_fabric_answer(ex, PVRDMA_WC_REM_ACCESS_ERR);
        return;
    }
    pvrdma_fabric_nak(ex, PVRDMA_WC_REM_ACCESS_ERR,
                      PVRDMA_EQE_TYPE_QP_ACCESS_ERR);
}

/* Invalid request: NAK, responder QP to ERR; UC: dropped. */
static void pvrdma_fabric_inv_req(PvrdmaFabricExec *ex)
{
    if (ex->qp->type == PVRDMA_QPT_UC) {
        pvrdma_fabric_answer(ex, PVRDMA_WC_REM_INV_REQ_ERR);
        return;
    }
    pvrdma_fabric_nak(ex, PVRDMA_WC_REM_INV_REQ_ERR,
                      PVRDMA_EQE_TYPE_QP_REQ_ERR);
}

/*
 * The receive WQE fails locally: it completes with @status, the QP goes
 * to ERR and the requester gets @nak (with @event on the responder).
 */
static void pvrdma_fabric_recv_fail(PvrdmaFabricExec *ex, uint32_t status,
                                    uint32_t nak, int event)
{
    struct pvrdma_cqe cqe;

    pvrdma_core_cqe_init(&cqe, ex->qp, ex->rwr.wr_id, PVRDMA_WC_RECV,
                         status);
    pvrdma_core_recv_done(ex->port->core, ex->qp, &cqe, false);
    ex->recv = false;
    pvrdma_fabric_nak(ex, nak, event);
}

/*
 * The receive WQE a message consumes (its buffers resolved when the
 * message fills them); false with an RNR NAK when there is none (or
 * another message of this port is filling the same queue's head), or
 * REM_OP_ERR when the queue is broken.  UC has no RNR NAK: the message
 * is dropped (IBA 9.7.5.1.5, class D).
 */
static bool pvrdma_fabric_take_recv(PvrdmaFabricExec *ex, bool resolve)
{
    PvrdmaCore *core = ex->port->core;
    int ret = pvrdma_fabric_port_rq_busy(ex->port, ex->qp) ? 0 :
              pvrdma_core_recv_peek(core, ex->qp, &ex->rwr, resolve);

    if (ret < 0) {
        pvrdma_fabric_answer(ex, PVRDMA_WC_REM_OP_ERR);
        return false;
    }
    if (ret == 0 && ex->qp->type == PVRDMA_QPT_UC) {
        pvrdma_fabric_answer(ex, PVRDMA_WC_RNR_RETRY_EXC_ERR);
        return false;
    }
    if (ret == 0) {
        /* The guest's next receive doorbell wakes the requester. */
        pvrdma_core_rq_doorbell_wanted(core, ex->qp);
        if (!ex->msg.ud) {
            pvrdma_core_count(core, PVRDMA_CTR_SENT_RNR_NAKS, 1);
        }
        ex->ack.rnr = true;
        ex->ack.rnr_timer = ex->qp->attr.min_rnr_timer;
        ex->done = true;
        return false;
    }
    ex->recv = true;
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

static bool pvrdma_fabric_begin_send(PvrdmaFabricExec *ex)
{
    const PvrdmaFabricMsg *msg = &ex->msg;

    /* Checked before anything is placed: an R_Key violation. */
    if (msg->opcode == PVRDMA_WR_SEND_WITH_INV &&
        !pvrdma_core_inv_ok(ex->port->core, ex->qp, msg->inv_rkey)) {
        pvrdma_fabric_access_err(ex);
        return false;
    }
    if (!pvrdma_fabric_take_recv(ex, true)) {
        return false;
    }
    if (ex->rwr.status != PVRDMA_WC_SUCCESS) {
        /* The receive WQE itself is bad (SGE count, lkey, range). */
        pvrdma_fabric_recv_fail(ex, ex->rwr.status, PVRDMA_WC_REM_OP_ERR, -1);
        return false;
    }
    if (msg->length > ex->rwr.sgl.total) {
        /* rxe class C: the receive sees LOC_LEN_ERR, the sender a NAK. */
        pvrdma_fabric_recv_fail(ex, PVRDMA_WC_LOC_LEN_ERR,
                                PVRDMA_WC_REM_INV_REQ_ERR,
                                PVRDMA_EQE_TYPE_QP_REQ_ERR);
        return false;
    }
    ex->mem = &ex->rwr.sgl;
    return true;
}

static void pvrdma_fabric_end_send(PvrdmaFabricExec *ex)
{
    PvrdmaCore *core = ex->port->core;
    const PvrdmaFabricMsg *msg = &ex->msg;
    struct pvrdma_cqe cqe;

    pvrdma_core_cqe_init(&cqe, ex->qp, ex->rwr.wr_id, PVRDMA_WC_RECV,
                         PVRDMA_WC_SUCCESS);
    pvrdma_fabric_recv_cqe(core, ex->qp, msg, &cqe);
    cqe.byte_len = msg->length;
    if (msg->opcode == PVRDMA_WR_SEND_WITH_IMM) {
        cqe.wc_flags |= PVRDMA_WC_WITH_IMM;
        cqe.imm_data = msg->imm_data;
    } else if (msg->opcode == PVRDMA_WR_SEND_WITH_INV) {
        /* ib_wc keeps invalidate_rkey where imm_data is (our convention) */
        pvrdma_core_invalidate(core, ex->qp, msg->inv_rkey);
        cqe.wc_flags |= PVRDMA_WC_WITH_INVALIDATE;
        cqe.imm_data = GUINT32_TO_LE(msg->inv_rkey);
    }
    pvrdma_core_recv_done(core, ex->qp, &cqe, msg->solicited);
    ex->recv = false;
}

/*
 * The responder's side of an RDMA WRITE or READ: @access must be enabled
 * on the QP and the rkey must grant it over the whole range. A zero-length
 * request checks no key (IBA 9.4.3) and leaves the SGL empty.
 */
static bool pvrdma_fabric_remote_sgl(PvrdmaFabricExec *ex, uint32_t access)
{
    const PvrdmaFabricMsg *msg = &ex->msg;
    PvrdmaSgl *sgl = &ex->sgl;

    if (!(ex->qp->attr.qp_access_flags & access)) {
        return false;
    }
    sgl->core = ex->port->core;
    sgl->nseg = 0;
    sgl->total = msg->length;
    ex->mem = sgl;
    return !msg->length ||
           pvrdma_core_rkey_seg(sgl->core, ex->qp, msg->rkey,
                                msg->remote_addr, msg->length, access,
                                &sgl->seg[sgl->nseg++]);
}

static bool pvrdma_fabric_begin_write(PvrdmaFabricExec *ex)
{
    /* Resources before keys, as rxe: an empty RQ is an RNR NAK. */
    if (ex->msg.opcode == PVRDMA_WR_RDMA_WRITE_WITH_IMM &&
        !pvrdma_fabric_take_recv(ex, false)) {
        return false;
    }
    if (!pvrdma_fabric_remote_sgl(ex, PVRDMA_ACCESS_REMOTE_WRITE)) {
        pvrdma_fabric_access_err(ex);
        return false;
    }
    return true;
}

static void pvrdma_fabric_end_write(PvrdmaFabricExec *ex)
{
    PvrdmaCore *core = ex->port->core;
    struct pvrdma_cqe cqe;

    if (!ex->recv) {
        return;
    }
    /* The receive WQE's buffers are not used: no SGE is checked. */
    pvrdma_core_cqe_init(&cqe, ex->qp, ex->rwr.wr_id,
                         PVRDMA_WC_RECV_RDMA_WITH_IMM, PVRDMA_WC_SUCCESS);
    pvrdma_fabric_recv_cqe(core, ex->qp, &ex->msg, &cqe);
    cqe.byte_len = ex->msg.length;
    cqe.wc_flags |= PVRDMA_WC_WITH_IMM;
    cqe.imm_data = ex->msg.imm_data;
    pvrdma_core_recv_done(core, ex->qp, &cqe, ex->msg.solicited);
    ex->recv = false;
}

/*
 * The 8 aligned bytes an atomic request names, mapped (its length in
 * *@len, for the unmap), with @access on the QP and the rkey; NULL once
 * answered: misaligned (invalid request), no access (R_Key violation),
 * or a target that cannot be mapped as RAM (refused as an R_Key
 * violation rather than emulated non-atomically).
 */
static uint64_t *pvrdma_fabric_atomic_target(PvrdmaFabricExec *ex,
                                             uint32_t access, uint64_t *len)
{
    PvrdmaCore *core = ex->port->core;
    const PvrdmaFabricMsg *msg = &ex->msg;
    uint64_t bus, run;
    PvrdmaSeg seg;
    uint64_t *p;

    if (msg->remote_addr & (sizeof(uint64_t) - 1)) {
        pvrdma_fabric_inv_req(ex);
        return NULL;
    }
    if (!(ex->qp->attr.qp_access_flags & access) ||
        !pvrdma_core_rkey_seg(core, ex->qp, msg->rkey, msg->remote_addr,
                              sizeof(uint64_t), access, &seg) ||
        !pvrdma_seg_xlate(&seg, 0, &bus, &run) ||
        run < sizeof(uint64_t)) {
        pvrdma_fabric_access_err(ex);
        return NULL;
    }
    *len = sizeof(uint64_t);
    p = pvrdma_core_dma_map(core, bus, len, true);
    if (!p || *len < sizeof(uint64_t) || ((uintptr_t)p & 7)) {
        pvrdma_core_dma_unmap(core, p, *len, true, 0);
        GERR(core, QP_ATOMIC_TARGET_NOT_MAPPABLE_RAM,
             "QP %u: atomic target 0x%" G_GINT64_MODIFIER "x is not "
             "mappable RAM", ex->qp->handle, bus);
        pvrdma_fabric_access_err(ex);
        return NULL;
    }
    return p;
}

/*
 * CMP_AND_SWP / FETCH_AND_ADD, and ATOMIC_WRITE (the request's 8 bytes in
 * one store, after the QP's earlier requests, which the fabric executes
 * in order; REMOTE_WRITE access as for an RDMA WRITE), atomic with
 * respect to the guest's vCPUs: the target is changed with __atomic
 * builtins.
 */
static void pvrdma_fabric_atomic(PvrdmaFabricExec *ex)
{
    PvrdmaCore *core = ex->port->core;
    const PvrdmaFabricMsg *msg = &ex->msg;
    bool write = msg->opcode == PVRDMA_WR_ATOMIC_WRITE;
    uint64_t len, *p;

    p = pvrdma_fabric_atomic_target(ex, write ? PVRDMA_ACCESS_REMOTE_WRITE :
                                    PVRDMA_ACCESS_REMOTE_ATOMIC, &len);
    if (!p) {
        return;
    }
    if (write) {
        __atomic_store_n(p, GUINT64_TO_LE(msg->swap), __ATOMIC_SEQ_CST);
    } else if (msg->opcode == PVRDMA_WR_ATOMIC_CMP_AND_SWP) {
        uint64_t expected = GUINT64_TO_LE(msg->compare_add);

        /* On failure 'expected' receives the current value. */
        __atomic_compare_exchange_n(p, &expected,
                                    GUINT64_TO_LE(msg->swap), false,
                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        ex->ack.atomic_orig = GUINT64_FROM_LE(expected);
    } else {
        ex->ack.atomic_orig = __atomic_fetch_add(p, msg->compare_add,
                                                 __ATOMIC_SEQ_CST);
    }
    pvrdma_core_dma_unmap(core, p, len, true, sizeof(uint64_t));
    pvrdma_core_count(core, PVRDMA_CTR_ATOMICS_RCVD, 1);
    pvrdma_core_count(core, PVRDMA_CTR_SENT_PKTS, 1);
    pvrdma_fabric_answer(ex, PVRDMA_WC_SUCCESS);
}

/* ---- datagrams (UD, GSI) ------------------------------------------------- */

int pvrdma_fabric_buf_read(void *opaque, uint64_t off, void *buf,
                           uint64_t n)
{
    memcpy(buf, (const uint8_t *)opaque + off, n);
    return 0;
}

/*
 * A datagram for @ex->qp: every outcome answers SUCCESS (a datagram has no
 * NAK); what does not fit is dropped, as rxe does (IBA classes D and E).
 */
static bool pvrdma_fabric_begin_ud(PvrdmaFabricExec *ex)
{
    const PvrdmaFabricMsg *msg = &ex->msg;
    PvrdmaQp *qp = ex->qp;
    uint8_t grh[PVRDMA_GRH_SIZE];
    struct pvrdma_cqe cqe;
    int ret;

    pvrdma_fabric_answer(ex, PVRDMA_WC_SUCCESS);
    /* Q_Key violation, wrong QP type or state: silently dropped. */
    if ((qp->type != PVRDMA_QPT_UD && qp->type != PVRDMA_QPT_GSI) ||
        qp->state < PVRDMA_QPS_RTR || qp->state > PVRDMA_QPS_SQE ||
        msg->qkey != qp->attr.qkey ||
        (msg->opcode != PVRDMA_WR_SEND &&
         msg->opcode != PVRDMA_WR_SEND_WITH_IMM) ||
        msg->length > PVRDMA_PORT_UD_MAX_MSG) {
        return false;
    }
    ex->done = false;
    if (!pvrdma_fabric_take_recv(ex, true)) {
        /* No receive WQE: no RNR for datagrams, the message is lost. */
        pvrdma_fabric_answer(ex, PVRDMA_WC_SUCCESS);
        ex->ack.rnr = false;
        return false;
    }
    if (ex->rwr.status != PVRDMA_WC_SUCCESS) {
        /* The receive WQE itself is bad: it fails, the QP goes to ERR. */
        pvrdma_fabric_recv_fail(ex, ex->rwr.status, PVRDMA_WC_SUCCESS, -1);
        return false;
    }
    if (PVRDMA_GRH_SIZE + msg->length > ex->rwr.sgl.total) {
        ex->recv = false;
        if (qp->has_srq) {
            /* Class E: the SRQ's WQE completes in error, the QP lives. */
            pvrdma_core_cqe_init(&cqe, qp, ex->rwr.wr_id, PVRDMA_WC_RECV,
                                 PVRDMA_WC_REM_INV_REQ_ERR);
            pvrdma_core_recv_done(ex->port->core, qp, &cqe, false);
        }
        /* Class D: dropped, the WQE stays. */
        pvrdma_fabric_answer(ex, PVRDMA_WC_SUCCESS);
        return false;
    }
    pvrdma_grh_build(grh, msg->sgid, msg->dgid, msg->tclass, msg->flow_label,
                     msg->hop_limit, msg->length);
    ret = pvrdma_sgl_xfer(&ex->rwr.sgl, 0, PVRDMA_GRH_SIZE, true,
                          pvrdma_fabric_buf_read, grh);
    if (ret != PVRDMA_COPY_OK) {
        pvrdma_fabric_recv_fail(ex, PVRDMA_WC_LOC_PROT_ERR,
                                PVRDMA_WC_SUCCESS, -1);
        return false;
    }
    ex->mem = &ex->rwr.sgl;
    ex->mem_off = PVRDMA_GRH_SIZE;
    return true;
}

static void pvrdma_fabric_end_ud(PvrdmaFabricExec *ex)
{
    const PvrdmaFabricMsg *msg = &ex->msg;
    struct pvrdma_cqe cqe;

    pvrdma_core_cqe_init(&cqe, ex->qp, ex->rwr.wr_id, PVRDMA_WC_RECV,
                         PVRDMA_WC_SUCCESS);
    pvrdma_fabric_recv_cqe(ex->port->core, ex->qp, msg, &cqe);
    cqe.byte_len = PVRDMA_GRH_SIZE + msg->length;
    cqe.wc_flags |= PVRDMA_WC_GRH;
    /*
     * RoCE has no SL; like ConnectX (which UCX's UD transport relies on
     * to find the DGID in the GRH), a RoCE v2 datagram's sl says UDP
     * (bit 3) and the L3 header: 1 IPv6, 2 IPv4.
     */
    cqe.sl = 0x8 | (cqe.network_hdr_type == PVRDMA_NETWORK_IPV4 ? 2 : 1);
    if (msg->opcode == PVRDMA_WR_SEND_WITH_IMM) {
        cqe.wc_flags |= PVRDMA_WC_WITH_IMM;
        cqe.imm_data = msg->imm_data;
    }
    pvrdma_core_recv_done(ex->port->core, ex->qp, &cqe, msg->solicited);
    ex->recv = false;
}

/* (rc_begin()'s partial clearing relies on this order) */
_Static_assert(offsetof(PvrdmaFabricExec, rwr) <
               offsetof(PvrdmaFabricExec, sgl) &&
               offsetof(PvrdmaFabricExec, sgl) <
               offsetof(PvrdmaFabricExec, mem), "PvrdmaFabricExec order");

void pvrdma_fabric_exec_clear(PvrdmaFabricExec *ex)
{
    /* All but the segment arrays (3 KiB; only the first nseg are read). */
    memset(ex, 0, offsetof(PvrdmaFabricExec, rwr));
    ex->rwr.wr_id = 0;
    ex->rwr.status = 0;
    pvrdma_sgl_clear(&ex->rwr.sgl);
    pvrdma_sgl_clear(&ex->sgl);
    memset(&ex->mem, 0, sizeof(*ex) - offsetof(PvrdmaFabricExec, mem));
}

bool pvrdma_fabric_rc_begin(PvrdmaFabricPort *port, PvrdmaQp *qp,
                            const PvrdmaFabricMsg *msg, PvrdmaFabricExec *ex)
{
    PvrdmaCore *core = port->core;
    uint64_t len = pvrdma_fabric_op_has_payload(msg->opcode) ? msg->length : 0;
    const uint8_t *gid;
    uint8_t type;

    port->work++;
    pvrdma_fabric_exec_clear(ex);
    ex->port = port;
    ex->qp = qp;
    ex->msg = *msg;
    pvrdma_core_count(core, PVRDMA_CTR_RCVD_PKTS, pvrdma_core_pkts(qp, len));
    pvrdma_core_count(core, PVRDMA_CTR_RCVD_BYTES, len);
    if (msg->ud) {
        return pvrdma_fabric_begin_ud(ex);
    }
    /*
     * Not a connected QP of the sender's transport (RC or UC) able to
     * receive, or not connected back to the sender (IBA 9.6.1.5 checks,
     * rxe check_addr): silently dropped, so the requester runs out of
     * retries.
     */
    pvrdma_fabric_answer(ex, PVRDMA_WC_RETRY_EXC_ERR);
    if (qp->type != (msg->uc ? PVRDMA_QPT_UC :
                     msg->xrc ? PVRDMA_QPT_XRC_TGT : PVRDMA_QPT_RC) ||
        qp->state < PVRDMA_QPS_RTR ||
        qp->state > PVRDMA_QPS_SQD || qp->attr.dest_qp_num != msg->src_qpn ||
        memcmp(qp->attr.ah_attr.grh.dgid, msg->sgid, 16) != 0) {
        return false;
    }
    gid = pvrdma_core_sgid(core, qp->attr.ah_attr.grh.sgid_index, &type);
    if (!gid || memcmp(gid, msg->dgid, 16) != 0) {
        return false;
    }
    ex->done = false;
    pvrdma_core_qp_comm_est(core, qp);
    if (msg->xrc && !pvrdma_core_xrc_bind(core, qp, msg->xrc_srqn)) {
        /* No XRC SRQ of the QP's domain: an XRC domain violation. */
        pvrdma_fabric_inv_req(ex);
        return false;
    }
    switch (msg->opcode) {
    case PVRDMA_WR_SEND:
    case PVRDMA_WR_SEND_WITH_IMM:
    case PVRDMA_WR_SEND_WITH_INV:
        return pvrdma_fabric_begin_send(ex);
    case PVRDMA_WR_RDMA_WRITE:
    case PVRDMA_WR_RDMA_WRITE_WITH_IMM:
        return pvrdma_fabric_begin_write(ex);
    case PVRDMA_WR_RDMA_READ:
        if (!pvrdma_fabric_remote_sgl(ex, PVRDMA_ACCESS_REMOTE_READ)) {
            pvrdma_fabric_access_err(ex);
            return false;
        }
        pvrdma_core_count(core, PVRDMA_CTR_RDMA_READS_RCVD, 1);
        pvrdma_core_count(core, PVRDMA_CTR_SENT_PKTS,
                          pvrdma_core_pkts(qp, msg->length));
        pvrdma_core_count(core, PVRDMA_CTR_SENT_BYTES, msg->length);
        return true;
    case PVRDMA_WR_ATOMIC_CMP_AND_SWP:
    case PVRDMA_WR_ATOMIC_FETCH_AND_ADD:
    case PVRDMA_WR_ATOMIC_WRITE:
        pvrdma_fabric_atomic(ex);
        return false;
    default:
        pvrdma_fabric_inv_req(ex);
        return false;
    }
}

bool pvrdma_fabric_rc_out(const PvrdmaFabricMsg *msg)
{
    return msg->opcode == PVRDMA_WR_RDMA_READ;
}

/*
 * Is the exec still entitled to its QP and receive WQE?  The QP may have
 * been failed by the core in between (its RQ flushed), or the WQE taken
 * back by the guest: then the message is dropped, as a responder that
 * lost its state would.
 */
static bool pvrdma_fabric_exec_valid(PvrdmaFabricExec *ex)
{
    PvrdmaRecvWr rwr PVRDMA_UNINIT;    /* (recv_peek sets what is read) */

    if (!ex->qp || ex->qp->state < PVRDMA_QPS_RTR ||
        ex->qp->state > PVRDMA_QPS_SQD ||
        (ex->msg.xrc &&
         !pvrdma_core_xrc_bind(ex->port->core, ex->qp, ex->msg.xrc_srqn))) {
        return false;
    }
    return !ex->recv ||
           (pvrdma_core_recv_peek(ex->port->core, ex->qp, &rwr, false) == 1 &&
            rwr.wr_id == ex->rwr.wr_id);
}

void pvrdma_fabric_rc_abort(PvrdmaFabricExec *ex)
{
    ex->qp = NULL;
    ex->recv = false;
    pvrdma_fabric_answer(ex, PVRDMA_WC_RETRY_EXC_ERR);
}

/*
 * Bytes [off, off + n) of the payload between the responder's memory and
 * the requester's: its SGL @psgl in this process, else the link's @peer.
 */
static int pvrdma_fabric_rc_move(PvrdmaFabricExec *ex, uint64_t off,
                                 uint64_t n, const PvrdmaSgl *psgl,
                                 PvrdmaPeerCopy peer, void *opaque)
{
    bool out = pvrdma_fabric_rc_out(&ex->msg);
    int ret;

    if (ex->done) {
        return PVRDMA_COPY_OK;  /* the answer is known: discard */
    }
    if (ex->async && !pvrdma_fabric_exec_valid(ex)) {
        pvrdma_fabric_rc_abort(ex);
        return PVRDMA_COPY_OK;
    }
    if (!psgl) {
        ret = pvrdma_sgl_xfer(ex->mem, ex->mem_off + off, n, !out, peer,
                              opaque);
    } else if (out) {
        ret = pvrdma_sgl_copy(psgl, off, ex->mem, ex->mem_off + off, n);
    } else {
        ret = pvrdma_sgl_copy(ex->mem, ex->mem_off + off, psgl, off, n);
    }
    if (ret == (out ? PVRDMA_COPY_DST_FAULT : PVRDMA_COPY_SRC_FAULT)) {
        /* The requester's memory: nothing was placed, the WQE stays. */
        pvrdma_fabric_answer(ex, PVRDMA_WC_LOC_PROT_ERR);
        ex->recv = false;
    } else if (ret != PVRDMA_COPY_OK) {
        if (ex->msg.opcode == PVRDMA_WR_SEND ||
            ex->msg.opcode == PVRDMA_WR_SEND_WITH_IMM ||
            ex->msg.opcode == PVRDMA_WR_SEND_WITH_INV) {
            pvrdma_fabric_recv_fail(ex, PVRDMA_WC_LOC_PROT_ERR,
                                    PVRDMA_WC_REM_OP_ERR, -1);
        } else {
            pvrdma_fabric_access_err(ex);
        }
    }
    return ret;
}

int pvrdma_fabric_rc_data(PvrdmaFabricExec *ex, uint64_t off, uint64_t n,
                          PvrdmaPeerCopy peer, void *opaque)
{
    return pvrdma_fabric_rc_move(ex, off, n, NULL, peer, opaque);
}

void pvrdma_fabric_rc_end(PvrdmaFabricExec *ex)
{
    if (ex->done) {
        return;
    }
    if (ex->async && !pvrdma_fabric_exec_valid(ex)) {
        pvrdma_fabric_rc_abort(ex);
        return;
    }
    switch (ex->msg.ud ? -1 : (int)ex->msg.opcode) {
    case -1:
        pvrdma_fabric_end_ud(ex);
        pvrdma_core_count(ex->port->core, PVRDMA_CTR_RDMA_RECVS, 1);
        break;
    case PVRDMA_WR_SEND:
    case PVRDMA_WR_SEND_WITH_IMM:
    case PVRDMA_WR_SEND_WITH_INV:
        pvrdma_fabric_end_send(ex);
        pvrdma_core_count(ex->port->core, PVRDMA_CTR_RDMA_RECVS, 1);
        break;
    case PVRDMA_WR_RDMA_WRITE:
    case PVRDMA_WR_RDMA_WRITE_WITH_IMM:
        pvrdma_fabric_end_write(ex);
        pvrdma_core_count(ex->port->core, PVRDMA_CTR_RDMA_WRITES_RCVD, 1);
        break;
    default:
        break;
    }
    pvrdma_fabric_answer(ex, PVRDMA_WC_SUCCESS);
}

void pvrdma_fabric_rc_respond(PvrdmaFabricPort *port, PvrdmaQp *qp,
                              const PvrdmaFabricMsg *msg,
                              const PvrdmaFabricPayload *payload,
                              PvrdmaFabricAck *ack)
{
    PvrdmaFabricExec ex PVRDMA_UNINIT;     /* rc_begin() sets it up */

    if (pvrdma_fabric_rc_begin(port, qp, msg, &ex)) {
        pvrdma_fabric_rc_move(&ex, 0, msg->length, payload->sgl, NULL,
                              NULL);
        pvrdma_fabric_rc_end(&ex);
    }
    *ack = ex.ack;
}
