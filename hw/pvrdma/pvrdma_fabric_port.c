/*
 * PVRDMA software fabric: one device's port, the PvrdmaBackendOps of the
 * default backend (docs/architecture.md).
 *
 * The port keeps no per-object state: the core owns the queues, keys and
 * completions; the port only chooses wire QPNs, hands validated requests
 * to the RC requester and tells the fabric when receives were posted.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "pvrdma_link.h"

int pvrdma_fabric_port_index(void *be)
{
    return ((PvrdmaFabricPort *)be)->index;
}

static void pvrdma_fabric_port_op_free(void *be)
{
    pvrdma_fabric_port_free(be);
}

/* The QP no longer waits on an RNR NAK (if it did). */
static void pvrdma_fabric_qp_rnr_done(PvrdmaFabricPort *port, PvrdmaQp *qp)
{
    PvrdmaFabricQp *fqp = qp->be;

    if (fqp->rnr) {
        fqp->rnr = false;
        pvrdma_fabric_rnr_note(port->fabric, false);
    }
}

static int pvrdma_fabric_qp_create(void *be, PvrdmaQp *qp)
{
    PvrdmaFabricPort *port = be;

    qp->be = g_new0(PvrdmaFabricQp, 1);
    /* Requests on links pipeline up to the send queue's depth. */
    qp->max_outstanding = MIN(qp->attr.cap.max_send_wr, PVRDMA_FABRIC_WINDOW);

    /* Wire QPN: the port index in bits 16..23 (pvrdma_fabric.c). */
    if (port->index && qp->type != PVRDMA_QPT_GSI &&
        pvrdma_core_driver_version(port->core) >= PVRDMA_VERSION_QPHANDLE) {
        qp->qpn = ((uint32_t)port->index << PVRDMA_FABRIC_QPN_INDEX_SHIFT) |
                  qp->handle;
    }
    return 0;
}

static int pvrdma_fabric_qp_modify(void *be, PvrdmaQp *qp,
                                   const struct pvrdma_qp_attr *attr,
                                   uint32_t mask)
{
    /*
     * A message arriving in steps loses its QP state and receive WQE; a
     * QP made anew takes every request of its peer again.
     */
    if ((mask & PVRDMA_QP_STATE) && (attr->qp_state == PVRDMA_QPS_RESET ||
                                      attr->qp_state == PVRDMA_QPS_ERR)) {
        pvrdma_fabric_port_abort(be, qp, NULL);
        ((PvrdmaFabricQp *)qp->be)->dropping = false;
    }
    return 0;
}

static void pvrdma_fabric_qp_destroy(void *be, PvrdmaQp *qp)
{
    PvrdmaFabricQp *fqp = qp->be;

    pvrdma_fabric_qp_rnr_done(be, qp);
    pvrdma_fabric_port_abort(be, qp, NULL);
    pvrdma_fabric_qp_drop_reqs(qp);
    g_free(fqp);
    qp->be = NULL;
}

static void pvrdma_fabric_mr_deregister(void *be, PvrdmaMr *mr)
{
    pvrdma_fabric_port_mr_gone(be, mr);
}

static void pvrdma_fabric_reset(void *be)
{
    pvrdma_fabric_port_quiesce(be);
}

static int pvrdma_fabric_gid_bind(void *be, uint32_t index,
                                  const uint8_t gid[16],
                                  uint8_t gid_type G_GNUC_UNUSED)
{
    PvrdmaFabricPort *port = be;

    if (index < PVRDMA_FABRIC_MAX_GIDS) {
        port->gid_bound[index] = true;
        memcpy(port->gid[index], gid, 16);
        pvrdma_fabric_port_gids_changed(port);
    }
    return 0;
}

static void pvrdma_fabric_gid_unbind(void *be, uint32_t index)
{
    PvrdmaFabricPort *port = be;

    if (index < PVRDMA_FABRIC_MAX_GIDS && port->gid_bound[index]) {
        port->gid_bound[index] = false;
        pvrdma_fabric_port_gids_changed(port);
    }
}

static int pvrdma_fabric_submit(void *be, PvrdmaQp *qp, PvrdmaSendWr *wr)
{
    PvrdmaFabricQp *fqp = qp->be;
    int ret;

    ret = pvrdma_fabric_rc_submit(be, qp, wr);
    if (ret < 0) {
        return ret;
    }
    pvrdma_fabric_qp_rnr_done(be, qp);
    if (ret) {
        fqp->rnr = true;
        pvrdma_fabric_rnr_note(((PvrdmaFabricPort *)be)->fabric, true);
    }
    return 0;
}

static void pvrdma_fabric_cancel(void *be, PvrdmaQp *qp)
{
    pvrdma_fabric_qp_rnr_done(be, qp);
    pvrdma_fabric_qp_drop_reqs(qp);
}

static void pvrdma_fabric_recv_posted_op(void *be, PvrdmaQp *qp)
{
    PvrdmaFabricPort *port = be;
    PvrdmaFabricQp *fqp = qp->be;
    const uint8_t *sgid;
    uint8_t type;
    g_autoptr(GList) links = NULL;
    GList *e;

    if ((qp->type != PVRDMA_QPT_RC && qp->type != PVRDMA_QPT_XRC_TGT) ||
        (!fqp->rnr_link && !pvrdma_fabric_rnr_any(port->fabric))) {
        return;                 /* nobody to wake: no lookup at all */
    }
    sgid = pvrdma_core_sgid(port->core, qp->attr.ah_attr.grh.sgid_index,
                            &type);
    if (!sgid) {
        return;
    }
    if (fqp->rnr_link) {
        /* A requester behind a link got an RNR NAK from this QP. */
        links = g_list_copy(port->fabric->links);
        for (e = links; e; e = e->next) {
            if (pvrdma_link_serial(e->data) == fqp->rnr_link) {
                pvrdma_link_send_recv_posted(e->data, sgid, qp->qpn,
                                             qp->attr.ah_attr.grh.dgid,
                                             qp->attr.dest_qp_num);
            }
        }
        fqp->rnr_link = 0;
    }
    pvrdma_fabric_recv_posted(port->fabric, sgid, qp->qpn,
                              qp->attr.ah_attr.grh.dgid,
                              qp->attr.dest_qp_num);
}

static void pvrdma_fabric_poll(void *be, PvrdmaQp *qp, PvrdmaCq *cq)
{
    PvrdmaFabricPort *port = be;

    if (!qp) {
        pvrdma_fabric_poll_links(port->fabric, true, cq);
    } else if (!g_queue_is_empty(&((PvrdmaFabricQp *)qp->be)->reqs)) {
        pvrdma_fabric_poll_links(port->fabric, false, NULL);
    }
}

static void pvrdma_fabric_poll_end_op(void *be, PvrdmaCq *cq)
{
    pvrdma_fabric_poll_end(((PvrdmaFabricPort *)be)->fabric, cq);
}

static bool pvrdma_fabric_move_out_op(void *be, int64_t timeout_ns,
                                      char **errmsg)
{
    return pvrdma_fabric_move_out(be, timeout_ns, errmsg);
}

static void pvrdma_fabric_move_back_op(void *be)
{
    pvrdma_fabric_move_back(be);
}

static void pvrdma_fabric_move_save_op(void *be, PvrdmaMoveState *ms)
{
    pvrdma_fabric_move_save(be, ms);
}

static void pvrdma_fabric_move_in_op(void *be, const PvrdmaMoveState *ms)
{
    pvrdma_fabric_move_in(be, ms);
}

static uint64_t pvrdma_fabric_move_work_op(void *be)
{
    return ((PvrdmaFabricPort *)be)->work;
}

static void pvrdma_fabric_mcast_changed(void *be)
{
    pvrdma_fabric_port_mgids_changed(be);
}

static void pvrdma_fabric_link_counts_op(void *be, uint64_t *up,
                                         uint64_t *downed)
{
    PvrdmaFabric *fab = ((PvrdmaFabricPort *)be)->fabric;

    *up = pvrdma_fabric_links_up(fab);
    *downed = pvrdma_fabric_links_downed(fab);
}

/*
 * The in-process link answers inside submit; a request on a link to
 * another process is outstanding until its ACK, and cancel forgets it.
 */
const PvrdmaBackendOps pvrdma_fabric_backend_ops = {
    .name = "fabric",
    .rq_read_on_arrival = true,
    .sq_read_on_answer = true,
    .atomic_write = true,
    .mcast = true,
    .xrc = true,
    .mcast_changed = pvrdma_fabric_mcast_changed,
    .reset = pvrdma_fabric_reset,
    .free = pvrdma_fabric_port_op_free,
    .mr_deregister = pvrdma_fabric_mr_deregister,
    .qp_create = pvrdma_fabric_qp_create,
    .qp_modify = pvrdma_fabric_qp_modify,
    .qp_destroy = pvrdma_fabric_qp_destroy,
    .gid_bind = pvrdma_fabric_gid_bind,
    .gid_unbind = pvrdma_fabric_gid_unbind,
    .submit = pvrdma_fabric_submit,
    .cancel = pvrdma_fabric_cancel,
    .recv_posted = pvrdma_fabric_recv_posted_op,
    .poll = pvrdma_fabric_poll,
    .poll_end = pvrdma_fabric_poll_end_op,
    .move_out = pvrdma_fabric_move_out_op,
    .move_back = pvrdma_fabric_move_back_op,
    .move_save = pvrdma_fabric_move_save_op,
    .move_in = pvrdma_fabric_move_in_op,
    .move_work = pvrdma_fabric_move_work_op,
    .link_counts = pvrdma_fabric_link_counts_op,
};
