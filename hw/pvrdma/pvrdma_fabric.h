/*
 * PVRDMA software fabric: the default backend (docs/architecture.md,
 * docs/datapath.md).
 *
 * Two rooms, each with its own files:
 *  - verbs semantics (pvrdma_fabric_rc.c): the RC requester turns a
 *    validated PvrdmaSendWr into a PvrdmaFabricMsg and the answer into a
 *    PvrdmaSendResult; the responder executes a message on its own QP
 *    (keys, access, receive WQEs, atomics, statuses) touching only its own
 *    guest's memory;
 *  - links (pvrdma_fabric.c): the fabric object, its registry of ports and
 *    the in-process link that carries a message to the port owning
 *    (DGID, QPN).  Shared-memory and TCP links join behind the same
 *    pvrdma_fabric_deliver().
 * pvrdma_fabric_port.c is the PvrdmaBackendOps of one device's port.
 *
 * A message carries no pointer into another device's state: it is a
 * fixed header (PvrdmaFabricMsg) plus a payload the link provides as two
 * copy functions (PvrdmaFabricPayload).  In-process, the payload copies
 * straight from or into the requester's guest memory, mapped by the
 * requester's own core (zero staging); a link across processes backs it
 * with its receive buffer.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_PVRDMA_FABRIC_H
#define HW_PVRDMA_FABRIC_H

#include <stdbool.h>
#include <stdint.h>

#include "pvrdma_core_int.h"

/* Port indexes live in bits 16..23 of wire QPNs. */
#define PVRDMA_FABRIC_MAX_PORTS         256
#define PVRDMA_FABRIC_QPN_INDEX_SHIFT   16
#define PVRDMA_FABRIC_QPN_HANDLE_MASK   0xFFFFu

typedef struct PvrdmaFabric PvrdmaFabric;
typedef struct PvrdmaFabricPort PvrdmaFabricPort;

/* ---- messages ------------------------------------------------------------ */

/* One RC request, requester to responder (fields in host order). */
typedef struct PvrdmaFabricMsg {
    uint32_t opcode;            /* PVRDMA_WR_* of a remote operation */
    uint32_t src_qpn;           /* requester's wire QPN */
    uint32_t dst_qpn;
    uint8_t sgid[16];           /* requester's source GID */
    uint8_t dgid[16];
    uint8_t sl;
    bool solicited;
    uint32_t imm_data;          /* raw, as in the WQE */
    uint32_t inv_rkey;          /* SEND_WITH_INV */
    uint64_t remote_addr;       /* RDMA / atomics */
    uint32_t rkey;
    uint64_t compare_add;
    uint64_t swap;
    uint64_t length;            /* payload bytes (8 for atomics) */
} PvrdmaFabricMsg;

/* The responder's answer: an ACK, a NAK with a status, or an RNR NAK. */
typedef struct PvrdmaFabricAck {
    bool rnr;                   /* RNR NAK: retry after rnr_timer */
    uint8_t rnr_timer;          /* responder's min_rnr_timer encoding */
    uint32_t status;            /* PVRDMA_WC_* for the requester */
    uint64_t atomic_orig;       /* host order */
} PvrdmaFabricAck;

/*
 * The data of a request, as the link presents it to the responder:
 * read copies bytes [off, off + n) of a SEND/WRITE payload into the
 * responder's host memory at buf; write copies a READ response from buf
 * into the payload.  Either returns -1 if the payload's memory faulted.
 */
typedef struct PvrdmaFabricPayload {
    PvrdmaPeerCopy read;
    PvrdmaPeerCopy write;
    void *opaque;
} PvrdmaFabricPayload;

/* ---- the fabric and its links (pvrdma_fabric.c) -------------------------- */

struct PvrdmaFabricPort {
    PvrdmaFabric *fabric;
    PvrdmaCore *core;
    int index;                  /* registry slot = QPN bits 16..23 */
};

/* A fabric with no ports; reference counted (each port holds one). */
PvrdmaFabric *pvrdma_fabric_new(void);
PvrdmaFabric *pvrdma_fabric_ref(PvrdmaFabric *fab);
void pvrdma_fabric_unref(PvrdmaFabric *fab);

/*
 * Join @core to @fab as port @index (0..255; the QEMU glue uses the PCI
 * devfn, which is the same on a migration destination), or the lowest
 * free index >= 1 when @index < 0.  NULL with *@errmsg set if taken.
 */
PvrdmaFabricPort *pvrdma_fabric_port_new(PvrdmaFabric *fab, PvrdmaCore *core,
                                         int index, char **errmsg);
void pvrdma_fabric_port_free(PvrdmaFabricPort *port);

/*
 * The port that owns wire QPN @qpn and has @gid bound, and that QP, or
 * NULL.  QPNs without an index byte (drivers older than interface
 * version 20, or port 0) are looked up on every port (first wins).
 */
PvrdmaFabricPort *pvrdma_fabric_lookup(PvrdmaFabric *fab,
                                       const uint8_t gid[16], uint32_t qpn,
                                       PvrdmaQp **qp);

/*
 * Carry @msg and @payload to the responder (dgid, dst_qpn) and fill @ack.
 * No such port or QP: the message is dropped and the requester sees
 * RETRY_EXC_ERR (the retries of a real fabric are not simulated).
 */
void pvrdma_fabric_deliver(PvrdmaFabric *fab, const PvrdmaFabricMsg *msg,
                           const PvrdmaFabricPayload *payload,
                           PvrdmaFabricAck *ack);

/*
 * Receives were posted on the QP (@gid, @qpn) connected to (@dgid,
 * @dqpn): if that requester waits on an RNR NAK, retry it now.
 */
void pvrdma_fabric_recv_posted(PvrdmaFabric *fab, const uint8_t gid[16],
                               uint32_t qpn, const uint8_t dgid[16],
                               uint32_t dqpn);

/* Might a requester on @fab wait on an RNR NAK? */
bool pvrdma_fabric_rnr_any(PvrdmaFabric *fab);
/* One more (@waiting) or one fewer requester stalled on an RNR NAK. */
void pvrdma_fabric_rnr_note(PvrdmaFabric *fab, bool waiting);

/* ---- the port backend (pvrdma_fabric_port.c) ----------------------------- */

/* Per-QP state of the port (qp->be). */
typedef struct PvrdmaFabricQp {
    bool rnr;                   /* counted in the fabric's rnr_waiting */
} PvrdmaFabricQp;

extern const PvrdmaBackendOps pvrdma_fabric_backend_ops;
/* The port index of a core on the fabric backend, for tests. */
int pvrdma_fabric_port_index(void *be);

/* ---- RC verbs (pvrdma_fabric_rc.c) --------------------------------------- */

/*
 * Requester: carry @wr of @qp over the fabric, report the result.
 * Returns true if the answer was an RNR NAK.
 */
bool pvrdma_fabric_rc_submit(PvrdmaFabricPort *port, PvrdmaQp *qp,
                             PvrdmaSendWr *wr);
/* Responder: execute @msg on @qp of @port's core. */
void pvrdma_fabric_rc_respond(PvrdmaFabricPort *port, PvrdmaQp *qp,
                              const PvrdmaFabricMsg *msg,
                              const PvrdmaFabricPayload *payload,
                              PvrdmaFabricAck *ack);

#endif /* HW_PVRDMA_FABRIC_H */
