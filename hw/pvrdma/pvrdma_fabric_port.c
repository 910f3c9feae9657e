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

#include "pvrdma_fabric.h"

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

    /* Wire QPN: the port index in bits 16..23 (pvrdma_fabric.c). */
    if (port->index && qp->type != PVRDMA_QPT_GSI &&
        pvrdma_core_driver_version(port->core) >= PVRDMA_VERSION_QPHANDLE) {
        qp->qpn = ((uint32_t)port->index << PVRDMA_FABRIC_QPN_INDEX_SHIFT) |
                  qp->handle;
    }
    return 0;
}

static void pvrdma_fabric_qp_destroy(void *be, PvrdmaQp *qp)
{
    pvrdma_fabric_qp_rnr_done(be, qp);
    g_free(qp->be);
    qp->be = NULL;
}

static int pvrdma_fabric_submit(void *be, PvrdmaQp *qp, PvrdmaSendWr *wr)
{
    PvrdmaFabricQp *fqp = qp->be;

    pvrdma_fabric_qp_rnr_done(be, qp);
    if (pvrdma_fabric_rc_submit(be, qp, wr)) {
        fqp->rnr = true;
        pvrdma_fabric_rnr_note(((PvrdmaFabricPort *)be)->fabric, true);
    }
    return 0;
}

static void pvrdma_fabric_cancel(void *be, PvrdmaQp *qp)
{
    pvrdma_fabric_qp_rnr_done(be, qp);
}

static void pvrdma_fabric_recv_posted_op(void *be, PvrdmaQp *qp)
{
    PvrdmaFabricPort *port = be;
    const uint8_t *sgid;
    uint8_t type;

    if (!pvrdma_fabric_rnr_any(port->fabric)) {
        return;                 /* nobody to wake: no lookup at all */
    }
    sgid = pvrdma_core_sgid(port->core, qp->attr.ah_attr.grh.sgid_index,
                            &type);
    if (sgid) {
        pvrdma_fabric_recv_posted(port->fabric, sgid, qp->qpn,
                                  qp->attr.ah_attr.grh.dgid,
                                  qp->attr.dest_qp_num);
    }
}

/*
 * The in-process link answers inside submit, so nothing is ever
 * outstanding when the core cancels; cancel only ends an RNR wait.
 */
const PvrdmaBackendOps pvrdma_fabric_backend_ops = {
    .name = "fabric",
    .free = pvrdma_fabric_port_op_free,
    .qp_create = pvrdma_fabric_qp_create,
    .qp_destroy = pvrdma_fabric_qp_destroy,
    .submit = pvrdma_fabric_submit,
    .cancel = pvrdma_fabric_cancel,
    .recv_posted = pvrdma_fabric_recv_posted_op,
};
