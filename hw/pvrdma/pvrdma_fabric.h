/*
 * PVRDMA software fabric: internal interfaces (docs/datapath.md).
 *
 * Three layers, each in its own file:
 *  - pvrdma_fabric.c: the PvrdmaBackendOps of the default backend: object
 *    state, doorbells, queue bookkeeping (CQE posting, flushing, the RNR
 *    timer, the deferred work list).
 *  - pvrdma_fabric_rc.c: RC verbs semantics: WQE parsing, keys and access
 *    checks, requester and responder, completions and their statuses.
 *  - pvrdma_fabric_port.c: the transport: the registry of fabric ports
 *    (devices), "deliver this request to (gid, qpn)" and "move bytes
 *    between these two guest memory ranges".  A later multi-process
 *    transport (shared memory, TCP) adds ports of other processes behind
 *    the same lookup; the verbs layer only sees PvrdmaFabricMsg/Ack and
 *    PvrdmaSgl.
 *
 * Everything runs synchronously under the caller's lock (the BQL): no
 * threads, no host allocation per WQE, O(1) state per QP.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_PVRDMA_FABRIC_H
#define HW_PVRDMA_FABRIC_H

#include <stdbool.h>
#include <stdint.h>

#include "pvrdma_core_int.h"

/* WQEs, CQEs and SGEs are used in place, like the command structs. */
#if G_BYTE_ORDER != G_LITTLE_ENDIAN
#error "the PVRDMA fabric assumes a little-endian host"
#endif

/* Send WQE flags (spec §8.2), not spelled out by the uapi header. */
#define PVRDMA_WR_FLAG_FENCE            (1u << 0)
#define PVRDMA_WR_FLAG_SIGNALED         (1u << 1)
#define PVRDMA_WR_FLAG_SOLICITED        (1u << 2)

/* SGEs per WQE the data path can hold: PvrdmaCoreConfig max_sge <= 32. */
#define PVRDMA_FABRIC_MAX_SGE           32
/* Largest WQE: next_pow2(80 + 16 * 32). */
#define PVRDMA_FABRIC_MAX_WQE           1024
/* Fabric device indexes live in bits 16..23 of wire QPNs. */
#define PVRDMA_FABRIC_MAX_PORTS         256
#define PVRDMA_FABRIC_QPN_INDEX_SHIFT   16
#define PVRDMA_FABRIC_QPN_HANDLE_MASK   0xFFFFu
/* RNR retry count meaning "retry forever" (IBA 9.7.5.2.8). */
#define PVRDMA_FABRIC_RNR_INFINITE      7

typedef struct PvrdmaFabric PvrdmaFabric;
typedef struct PvrdmaFabricQp PvrdmaFabricQp;

/* ---- transport: memory ------------------------------------------------- */

/*
 * One contiguous range of an MR as seen by the MR's owner: @va is in the
 * MR's address space; translation to bus addresses uses either identity
 * (DMA MR) or a page array whose page 0 holds byte @base & ~0xfff.
 */
typedef struct PvrdmaSeg {
    uint64_t va;
    uint64_t len;
    const uint64_t *pages;      /* NULL: va is a guest bus address */
    uint32_t npages;
    uint64_t base;              /* va of the MR's first byte */
} PvrdmaSeg;

/* A scatter/gather list in one core's guest memory. */
typedef struct PvrdmaSgl {
    PvrdmaCore *core;
    uint32_t nseg;
    uint64_t total;
    PvrdmaSeg seg[PVRDMA_FABRIC_MAX_SGE];
} PvrdmaSgl;

/* Which side of a copy failed. */
enum {
    PVRDMA_COPY_OK = 0,
    PVRDMA_COPY_SRC_FAULT = 1,
    PVRDMA_COPY_DST_FAULT = 2,
};

/*
 * Move @len bytes from @src to @dst (both lists must hold @len bytes),
 * mapping short-lived chunks of each core's guest memory through its own
 * dma_map and copying host to host; where a chunk cannot be mapped it
 * falls back to a bounded bounce buffer through dma_read/dma_write.
 * Returns PVRDMA_COPY_*.
 */
int pvrdma_fabric_copy(PvrdmaSgl *dst, PvrdmaSgl *src, uint64_t len);
/* Write / read a host buffer into / from an SGL (small payloads). */
int pvrdma_fabric_sgl_write(PvrdmaSgl *dst, const void *buf, uint64_t len);
/* Bus address of byte @off of @seg and how many bytes follow contiguously. */
bool pvrdma_fabric_seg_xlate(const PvrdmaSeg *seg, uint64_t off,
                             uint64_t *bus, uint64_t *run);

/* ---- transport: messages ------------------------------------------------ */

/* A request from a requester QP to a responder QP (one RC message). */
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
    /* Requester memory: source of SEND/WRITE, destination of READ. */
    PvrdmaSgl *local;
} PvrdmaFabricMsg;

/* Responder's answer (an ACK/NAK, with the requester's view of it). */
typedef struct PvrdmaFabricAck {
    bool rnr;                   /* RNR NAK: retry after rnr_timer */
    uint8_t rnr_timer;          /* responder's min_rnr_timer encoding */
    uint32_t status;            /* PVRDMA_WC_* for the requester */
    uint64_t atomic_orig;       /* host order */
} PvrdmaFabricAck;

/*
 * Deliver @msg to the responder (dgid, dst_qpn).  A message that finds no
 * port, no such QP, or a QP that is not an RC QP in RTR/RTS/SQD connected
 * back to the requester is dropped: the requester sees RETRY_EXC_ERR (the
 * retries of a real fabric are not simulated).
 */
void pvrdma_fabric_deliver(PvrdmaFabricMsg *msg, PvrdmaFabricAck *ack);

/* ---- ports (registry) --------------------------------------------------- */

/* Register @fab; returns its index 1..255, or 0 if all are taken. */
uint8_t pvrdma_fabric_port_add(PvrdmaFabric *fab);
void pvrdma_fabric_port_del(PvrdmaFabric *fab);
/*
 * The port that owns wire QPN @qpn and has @gid bound, or NULL.  QPNs of
 * drivers older than interface version 20 carry no index: then every
 * port with @gid bound and such a QP is a candidate (first wins).
 */
PvrdmaFabric *pvrdma_fabric_port_lookup(const uint8_t gid[16], uint32_t qpn);
/* The device index of @be (a fabric backend), for tests and the docs. */
uint8_t pvrdma_fabric_index(void *be);

/* ---- per-object fabric state ------------------------------------------- */

struct PvrdmaFabric {
    PvrdmaCore *core;
    uint8_t index;              /* 1..255, 0 = not on the fabric */
    PvrdmaFabricQp *rnr_head;   /* QPs waiting for an RNR retry */
    int64_t timer_expire;       /* armed expiry, -1 = not armed */
};

struct PvrdmaFabricQp {
    PvrdmaQp *qp;
    PvrdmaFabric *fab;
    uint32_t sq_cons;           /* device-owned consumer indexes */
    uint32_t rq_cons;
    bool busy;                  /* SQ being processed (no re-entry) */
    bool rnr_pending;           /* SQ head stalled on an RNR NAK */
    uint8_t rnr_left;           /* retries left (rnr_retry != 7) */
    int64_t rnr_deadline;
    PvrdmaFabricQp *rnr_prev, *rnr_next;
    bool on_work;               /* on the deferred flush list */
    PvrdmaFabricQp *work_prev, *work_next;
    bool comm_est;              /* COMM_EST already reported */
    bool sqd_notify;            /* SQ_DRAINED owed once the SQ drains */
};

typedef struct PvrdmaFabricCq {
    bool overrun;               /* CQ_ERR reported, CQEs are dropped */
} PvrdmaFabricCq;

typedef struct PvrdmaFabricSrq {
    uint32_t cons;
    bool limit_armed;
    bool failed;                /* SRQ_ERR reported, ring unusable */
} PvrdmaFabricSrq;

/* Fast-register MRs only (user and DMA MRs have no fabric state). */
typedef struct PvrdmaFabricMr {
    bool valid;                 /* registered by REG_MR, not invalidated */
    uint64_t iova;
    uint64_t length;
    uint32_t npages;
    uint64_t pages[];           /* max_sg entries */
} PvrdmaFabricMr;

static inline PvrdmaFabricQp *pvrdma_fqp(PvrdmaQp *qp)
{
    return qp->be;
}

/* ---- queue bookkeeping (pvrdma_fabric.c) -------------------------------- */

/* Fill the fields every CQE of @qp carries. */
void pvrdma_fabric_cqe_init(struct pvrdma_cqe *cqe, PvrdmaQp *qp,
                            uint64_t wr_id, uint32_t opcode,
                            uint32_t status);
/*
 * Append @cqe to @cq and notify per the CQ's arming (@solicited: a
 * solicited receive; errors always count).  On overrun the CQE is
 * dropped, CQ_ERR is posted once and every QP using @cq goes to ERR.
 */
void pvrdma_fabric_post_cqe(PvrdmaCore *core, PvrdmaCq *cq,
                            const struct pvrdma_cqe *cqe, bool solicited);
/* QP to ERR (flush deferred to the end of the entry point), events. */
void pvrdma_fabric_qp_error(PvrdmaQp *qp, int event);
/* Guest ring indexes: read prod_tail of @ring, write cons_head. */
int pvrdma_fabric_read_prod(PvrdmaCore *core, const PvrdmaRing *ring,
                            uint32_t cons, uint32_t *prod);
void pvrdma_fabric_write_cons(PvrdmaCore *core, const PvrdmaRing *ring,
                              uint32_t cons);

/*
 * Take the next receive WQE of @qp (its RQ or SRQ), copied into @buf
 * (@bufsz >= the WQE size).  Returns 1 and sets *@max_sge, 0 if there is
 * none (RNR), -1 if the queue is broken (the QP/SRQ was failed).  The
 * WQE is consumed by pvrdma_fabric_recv_consume().
 */
int pvrdma_fabric_recv_peek(PvrdmaQp *qp, void *buf, uint32_t bufsz,
                            uint32_t *max_sge);
void pvrdma_fabric_recv_consume(PvrdmaQp *qp);

/* ---- RC verbs (pvrdma_fabric_rc.c) -------------------------------------- */

enum {
    PVRDMA_SQ_DONE,             /* WQE finished (completion as given) */
    PVRDMA_SQ_STALL,            /* RNR: leave at the SQ head */
};

/*
 * Execute the send WQE in @wqe (a private copy of one SQ slot) on @qp.
 * Fills @cqe (status, opcode, byte_len); returns PVRDMA_SQ_*.  On an RNR
 * NAK *@rnr_timer is the responder's timer encoding.
 */
int pvrdma_fabric_rc_execute(PvrdmaQp *qp, const uint8_t *wqe,
                             uint32_t wqe_size, struct pvrdma_cqe *cqe,
                             uint8_t *rnr_timer);
/* Responder side of pvrdma_fabric_deliver() for a local QP. */
void pvrdma_fabric_rc_respond(PvrdmaFabric *fab, PvrdmaQp *qp,
                              PvrdmaFabricMsg *msg, PvrdmaFabricAck *ack);
/* Completion opcode of a send WQE opcode. */
uint32_t pvrdma_fabric_wc_opcode(uint32_t wr_opcode);

#endif /* HW_PVRDMA_FABRIC_H */
