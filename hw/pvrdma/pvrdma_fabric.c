/*
 * PVRDMA software fabric: the fabric object, its registry of ports and
 * the in-process link (docs/architecture.md).
 *
 * A fabric is an explicit, reference-counted object: every device's port
 * holds a reference, and nothing about the fabric lives in process-wide
 * variables.  Wire QPNs (drivers of interface version >= 20) are
 *   bits 16..23: the port's index (the QEMU glue uses the device's PCI
 *                devfn, which a migration destination shares)
 *   bits  0..15: the device's QP handle
 * so two pvrdma devices of one guest, which pair with the same netdev and
 * therefore bind identical GIDs, still have distinct QPNs.
 *
 * The in-process link runs the responder synchronously on the responder's
 * core (inside pvrdma_core_enter/leave of that core); the payload reads
 * and writes the requester's memory through the requester's core.  Links
 * to other processes (shared memory, TCP) will serialise the same
 * PvrdmaFabricMsg and back the payload with their buffers.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "pvrdma_fabric.h"

struct PvrdmaFabric {
    unsigned refs;
    PvrdmaFabricPort *ports[PVRDMA_FABRIC_MAX_PORTS];
    /*
     * Requesters that got an RNR NAK and have not sent again since (an
     * upper bound: a QP whose retries ran out still counts until it is
     * cancelled, sends again or is destroyed).  While it is zero a posted
     * receive has no one to wake, and costs no lookup.
     */
    unsigned rnr_waiting;
};

bool pvrdma_fabric_rnr_any(PvrdmaFabric *fab)
{
    return fab->rnr_waiting > 0;
}

void pvrdma_fabric_rnr_note(PvrdmaFabric *fab, bool waiting)
{
    if (waiting) {
        fab->rnr_waiting++;
    } else {
        g_assert(fab->rnr_waiting > 0);
        fab->rnr_waiting--;
    }
}

PvrdmaFabric *pvrdma_fabric_new(void)
{
    PvrdmaFabric *fab = g_new0(PvrdmaFabric, 1);

    fab->refs = 1;
    return fab;
}

PvrdmaFabric *pvrdma_fabric_ref(PvrdmaFabric *fab)
{
    fab->refs++;
    return fab;
}

void pvrdma_fabric_unref(PvrdmaFabric *fab)
{
    g_assert(fab->refs > 0);
    if (--fab->refs == 0) {
        g_free(fab);
    }
}

PvrdmaFabricPort *pvrdma_fabric_port_new(PvrdmaFabric *fab, PvrdmaCore *core,
                                         int index, char **errmsg)
{
    PvrdmaFabricPort *port;

    if (index < 0) {
        for (index = 1; index < PVRDMA_FABRIC_MAX_PORTS; index++) {
            if (!fab->ports[index]) {
                break;
            }
        }
    }
    if (index >= PVRDMA_FABRIC_MAX_PORTS || fab->ports[index]) {
        *errmsg = g_strdup_printf("pvrdma: fabric port %d is taken (two "
                                  "pvrdma devices at the same PCI devfn on "
                                  "different buses?): give each device its "
                                  "own slot or function", index);
        return NULL;
    }
    port = g_new0(PvrdmaFabricPort, 1);
    port->fabric = pvrdma_fabric_ref(fab);
    port->core = core;
    port->index = index;
    fab->ports[index] = port;
    return port;
}

void pvrdma_fabric_port_free(PvrdmaFabricPort *port)
{
    PvrdmaFabric *fab = port->fabric;

    g_assert(fab->ports[port->index] == port);
    fab->ports[port->index] = NULL;
    g_free(port);
    pvrdma_fabric_unref(fab);
}

static PvrdmaQp *pvrdma_fabric_port_qp(PvrdmaFabricPort *port,
                                       const uint8_t gid[16], uint32_t qpn)
{
    if (!pvrdma_core_has_gid(port->core, gid)) {
        return NULL;
    }
    return pvrdma_core_qp_by_qpn(port->core, qpn,
                                 PVRDMA_FABRIC_QPN_HANDLE_MASK);
}

PvrdmaFabricPort *pvrdma_fabric_lookup(PvrdmaFabric *fab,
                                       const uint8_t gid[16], uint32_t qpn,
                                       PvrdmaQp **qp)
{
    uint32_t index = qpn >> PVRDMA_FABRIC_QPN_INDEX_SHIFT;
    unsigned i;

    if (index >= PVRDMA_FABRIC_MAX_PORTS) {
        return NULL;            /* not a 24-bit QPN */
    }
    if (index) {
        PvrdmaFabricPort *port = fab->ports[index];

        *qp = port ? pvrdma_fabric_port_qp(port, gid, qpn) : NULL;
        return *qp ? port : NULL;
    }
    /* QPN == handle: find the port by GID. */
    for (i = 0; i < PVRDMA_FABRIC_MAX_PORTS; i++) {
        PvrdmaFabricPort *port = fab->ports[i];

        *qp = port ? pvrdma_fabric_port_qp(port, gid, qpn) : NULL;
        if (*qp) {
            return port;
        }
    }
    return NULL;
}

void pvrdma_fabric_deliver(PvrdmaFabric *fab, const PvrdmaFabricMsg *msg,
                           const PvrdmaFabricPayload *payload,
                           PvrdmaFabricAck *ack)
{
    PvrdmaFabricPort *port;
    PvrdmaQp *qp;

    memset(ack, 0, sizeof(*ack));
    ack->status = PVRDMA_WC_RETRY_EXC_ERR;
    port = pvrdma_fabric_lookup(fab, msg->dgid, msg->dst_qpn, &qp);
    if (!port) {
        return;
    }
    pvrdma_core_enter(port->core);
    pvrdma_fabric_rc_respond(port, qp, msg, payload, ack);
    pvrdma_core_leave(port->core);
}

void pvrdma_fabric_recv_posted(PvrdmaFabric *fab, const uint8_t gid[16],
                               uint32_t qpn, const uint8_t dgid[16],
                               uint32_t dqpn)
{
    PvrdmaFabricPort *port;
    PvrdmaQp *peer;

    if (!fab->rnr_waiting) {
        return;
    }
    port = pvrdma_fabric_lookup(fab, dgid, dqpn, &peer);
    if (port && pvrdma_core_rnr_waiting(peer) &&
        peer->attr.dest_qp_num == qpn &&
        !memcmp(peer->attr.ah_attr.grh.dgid, gid, 16)) {
        pvrdma_core_rnr_kick(port->core, peer);
    }
}
