/*
 * PVRDMA backend interface: what the device core asks of a transport, and
 * what a transport may ask of the core (docs/architecture.md).
 *
 * The core owns everything the guest sees: object tables, keys, the QP
 * state machine, the SQ/RQ/SRQ rings (WQE fetch and validation, ring
 * indexes), CQE writing, flushing, RNR timing and async events.  A backend
 * owns only the transport: it gets validated send work with its memory
 * resolved (PvrdmaSendWr), and reports each one back through
 * pvrdma_core_send_done(), which may happen inside submit or later.  On
 * the receiving side it asks the core for the next receive WQE of a QP
 * (pvrdma_core_recv_peek(), already validated and resolved) and hands the
 * finished completion back (pvrdma_core_recv_done()).
 *
 * Rules for every op:
 *  - create/modify/bind ops run after the core has validated the command
 *    completely and before it commits; returning a negative errno fails the
 *    command with that errno and the core undoes its own state.
 *  - destroy ops cannot fail; they run before the core frees the object and
 *    must drop every reference the backend holds to it.
 *  - every op runs under the caller's lock (the BQL in QEMU), and so must
 *    every call a backend makes into the core: a backend with threads of
 *    its own hands its results to a bottom half first.
 *  - every op may be NULL, meaning "nothing to do / accept".
 *  - objects carry a 'be' pointer the backend may set in its create op.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_PVRDMA_BACKEND_H
#define HW_PVRDMA_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "pvrdma_core.h"

typedef struct PvrdmaPd PvrdmaPd;
typedef struct PvrdmaMr PvrdmaMr;
typedef struct PvrdmaCq PvrdmaCq;
typedef struct PvrdmaQp PvrdmaQp;
typedef struct PvrdmaSrq PvrdmaSrq;
struct pvrdma_qp_attr;
struct pvrdma_cqe;

/* SGEs per WQE the data path can hold: PvrdmaCoreConfig max_sge <= 32. */
#define PVRDMA_MAX_SGE                  32

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
    PvrdmaMr *mr;               /* the MR it lies in (its be: the backend's) */
} PvrdmaSeg;

/* Resolved memory: a scatter/gather list in one core's guest memory. */
typedef struct PvrdmaSgl {
    PvrdmaCore *core;
    uint32_t nseg;
    uint64_t total;
    PvrdmaSeg seg[PVRDMA_MAX_SGE];
} PvrdmaSgl;

/* An empty SGL (its segment array left as it is). */
static inline void pvrdma_sgl_clear(PvrdmaSgl *sgl)
{
    sgl->core = NULL;
    sgl->nseg = 0;
    sgl->total = 0;
}

/* What a BIND_MW asks (PvrdmaBackendOps mw_bind). */
typedef struct PvrdmaMwBind {
    PvrdmaMr *mr;
    uint32_t rkey;              /* the window's new key */
    uint64_t addr;
    uint64_t len;               /* 0: unbind (type 1) */
    uint32_t access;            /* PVRDMA_ACCESS_REMOTE_*, _ZERO_BASED */
} PvrdmaMwBind;

/*
 * A validated send work request: on an RC QP, opcode is one of the remote
 * operations (SEND, SEND_WITH_IMM, SEND_WITH_INV, RDMA_WRITE[_WITH_IMM],
 * RDMA_READ, ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD) and the address
 * fields come from the QP's attributes; on a UD or GSI QP (@ud), SEND or
 * SEND_WITH_IMM of at most the MTU, addressed by the WR's address vector.
 * Local operations (LOCAL_INV, FAST_REG_MR) never reach a backend.
 * @local passed the lkey, PD, range and LOCAL_WRITE checks.  The request
 * stays valid until pvrdma_core_send_done() or the backend's cancel op.
 */
typedef struct PvrdmaSendWr {
    uint32_t opcode;            /* PVRDMA_WR_* */
    bool solicited;
    uint32_t imm_data;          /* raw, as in the WQE */
    uint32_t inv_rkey;          /* SEND_WITH_INV */
    uint64_t remote_addr;       /* RDMA / atomics */
    uint32_t rkey;
    uint64_t compare_add;       /* atomics, host order */
    uint64_t swap;
    uint64_t length;            /* payload bytes (8 for atomics) */
    /* Addressing (the QP's attributes). */
    uint32_t src_qpn;
    uint32_t dst_qpn;
    uint8_t sgid[16];
    uint8_t dgid[16];
    uint8_t sl;
    bool uc;                    /* from a UC QP: no answer is awaited */
    /* From an XRC_INI QP: to the responder's XRC SRQ number @xrc_srqn. */
    bool xrc;
    uint32_t xrc_srqn;
    /* UD and GSI: datagram fields (the GRH the receiver sees). */
    bool ud;
    uint32_t qkey;              /* the WR's, or the QP's if bit 31 set */
    uint32_t flow_label;        /* 20 bits */
    uint8_t tclass;
    uint8_t hop_limit;
    /*
     * Last: only its first segments are used as a rule, and the fields
     * above share their cache lines with them (with many QPs each
     * request's record is cold when its WQE is read).
     */
    PvrdmaSgl local;            /* source of SEND/WRITE, sink of READ */
} PvrdmaSendWr;

/*
 * Not a guest status: a backend's mr_fastreg or mw_bind posted the
 * operation to its transport, whose completion comes as for a request
 * (pvrdma_core_send_done(), in the queue's order).
 */
#define PVRDMA_WC_PENDING       0x10000u

/* Upper bound of PvrdmaQp.max_outstanding. */
#define PVRDMA_MAX_OUTSTANDING  64

/* What became of a PvrdmaSendWr (the responder's ACK or NAK). */
typedef struct PvrdmaSendResult {
    uint32_t status;            /* PVRDMA_WC_* for the requester */
    /*
     * RNR NAK of the oldest request: the core retries it later, and the
     * ones after it, which the backend has dropped (no send_done follows
     * for them; the responder did not execute them).
     */
    bool rnr;
    uint8_t rnr_timer;          /* responder's min_rnr_timer encoding */
    uint64_t atomic_orig;       /* host order; the core writes it back */
    bool atomic_written;        /* ... unless the transport did already */
    /*
     * The transport to the peer failed (the link closed, or the peer
     * stopped answering): besides the error CQE the guest gets a
     * QP_FATAL async event.
     */
    bool fatal;
} PvrdmaSendResult;

/* A receive WQE taken by pvrdma_core_recv_peek(). */
typedef struct PvrdmaRecvWr {
    uint64_t wr_id;
    /*
     * PVRDMA_WC_SUCCESS with @sgl resolved (LOCAL_WRITE granted), or the
     * local error the receive completes with: LOC_LEN_ERR (more SGEs than
     * the queue allows), LOC_PROT_ERR (lkey, PD, range or access check).
     */
    uint32_t status;
    PvrdmaSgl sgl;
} PvrdmaRecvWr;

/*
 * What a saved state carries for a backend's port (docs/migration.md):
 * the secret that lets a destination take the GIDs over, and the port's
 * *life*.  A port starts a new life, remembering the older ones, each
 * time it runs from a saved state (a destination, or a source running on
 * after a save), so a copy of a state run later is told from the run that
 * went on (docs/fabric.md, "Restored snapshots").
 */
#define PVRDMA_MOVE_LINEAGE     16
typedef struct PvrdmaMoveState {
    uint8_t token[32];
    uint64_t life;                          /* nonzero */
    uint32_t nancestors;                    /* <= PVRDMA_MOVE_LINEAGE */
    uint64_t ancestors[PVRDMA_MOVE_LINEAGE]; /* newest first, nonzero */
} PvrdmaMoveState;

typedef struct PvrdmaBackendOps {
    const char *name;
    /*
     * The backend moves receive WQEs off a guest SRQ's ring as they are
     * posted and reports SRQ_LIMIT_REACHED itself (pvrdma_core_srq_limit_
     * reached()); the core's count of the ring would be wrong.
     */
    bool srq_limit_by_backend;
    /*
     * The backend reads a QP's receive queue only when a message arrives
     * (pvrdma_core_recv_peek()); receive doorbells matter to it only to
     * wake a requester that met an empty queue.  The core then offers
     * PVRDMA_EX_CAP_RQ_DB_HINT (docs/abi.md, "Receive doorbells on
     * demand").
     */
    bool rq_read_on_arrival;
    /*
     * Every answer to a request submitted here comes back through
     * pvrdma_core_req_done, which reads the send queue again: a send
     * doorbell behind outstanding requests may be left out
     * (PVRDMA_EX_CAP_SQ_DB_HINT).
     */
    bool sq_read_on_answer;
    /*
     * The backend executes PVRDMA_WR_ATOMIC_WRITE requests: the core then
     * offers PVRDMA_EX_CAP_ATOMIC_WRITE and lets them through.
     */
    bool atomic_write;
    /*
     * The backend delivers UD SENDs to multicast GIDs to the QPs attached
     * to the group (pvrdma_core_mcast_qps()): the core then offers
     * PVRDMA_EX_CAP_MCAST.  mcast_changed: a group got its first member
     * on this device or lost its last (pvrdma_core_mcast_groups()).
     */
    bool mcast;
    void (*mcast_changed)(void *be);
    /*
     * The backend carries XRC: requests of XRC_INI QPs (PvrdmaSendWr
     * xrc, xrc_srqn) to XRC_TGT QPs, which take their receive WQEs from
     * the SRQ each message names (pvrdma_core_xrc_bind()).  The core then
     * offers PVRDMA_EX_CAP_XRC.
     */
    bool xrc;
    /*
     * A backend whose device keeps groups itself (a host device): @qp
     * joins (@join) or leaves @mgid there; a negative errno refuses the
     * command.  The core keeps its own table as well.
     */
    int (*mcast_attach)(void *be, PvrdmaQp *qp, const uint8_t mgid[16],
                        bool join);

    /* Called from pvrdma_core_reset(): quiesce, drop queued work. */
    void (*reset)(void *be);
    /* Called from pvrdma_core_free() after the last object is gone. */
    void (*free)(void *be);

    int (*pd_create)(void *be, PvrdmaPd *pd);
    void (*pd_destroy)(void *be, PvrdmaPd *pd);

    /*
     * User, DMA and fast-reg MRs (mr->flags says which).  A backend that
     * needs host pointers to the MR's pages for longer than one call
     * (zero-copy registration) pins them with pvrdma_core_mr_pin().
     */
    int (*mr_register)(void *be, PvrdmaMr *mr);
    void (*mr_deregister)(void *be, PvrdmaMr *mr);
    /*
     * A fast-reg MR was registered (REG_MR, @valid: its frmr_* fields and
     * keys are the new ones) or invalidated (LOCAL_INV of a registered
     * one) by a send WQE of @qp, in that queue's order.  Returns the
     * WQE's status (PVRDMA_WC_SUCCESS, or the error it completes with),
     * or PVRDMA_WC_PENDING: it completes later, as a request does.
     * A backend may choose an MR's keys in mr_register (lkey == rkey;
     * REG_MR changes only their low byte).
     */
    uint32_t (*mr_fastreg)(void *be, PvrdmaQp *qp, PvrdmaMr *mr, bool valid);
    /*
     * Memory windows (mr->flags PVRDMA_MR_FLAG_MW_TYPE1/2; mr_register
     * and mr_deregister see them too).  mw_offered: whether the guest may
     * have them (NULL: yes; remote accesses then go through
     * pvrdma_core_rkey_seg(), which knows them).  mw_bind: a BIND_MW of
     * @qp, validated, before the core commits it (@b; for a type 1
     * unbind b->mr is the MR the window was bound to, NULL if none), or
     * a LOCAL_INV of a type 2 window (@b NULL), in the queue's order.
     * Returns the WQE's status, or PVRDMA_WC_PENDING (as mr_fastreg).
     */
    bool (*mw_offered)(void *be);
    uint32_t (*mw_bind)(void *be, PvrdmaQp *qp, PvrdmaMr *mw,
                        const PvrdmaMwBind *b);

    int (*cq_create)(void *be, PvrdmaCq *cq);
    void (*cq_destroy)(void *be, PvrdmaCq *cq);

    /*
     * qp->qpn holds the core's default wire QP number (the handle; 1 for
     * GSI).  With a driver of interface version >= 20 (QPHANDLE) the
     * backend may replace it by a 24-bit number unique on its transport;
     * older drivers use the qpn as the handle, so it must stay.
     */
    int (*qp_create)(void *be, PvrdmaQp *qp);
    /*
     * Runs after the transition and the attribute values were validated,
     * before the core stores them: @attr/@mask are the guest's request,
     * qp->state still holds the current state.
     */
    int (*qp_modify)(void *be, PvrdmaQp *qp,
                     const struct pvrdma_qp_attr *attr, uint32_t mask);
    void (*qp_destroy)(void *be, PvrdmaQp *qp);

    int (*srq_create)(void *be, PvrdmaSrq *srq);
    int (*srq_modify)(void *be, PvrdmaSrq *srq, uint32_t limit);
    void (*srq_destroy)(void *be, PvrdmaSrq *srq);

    /* SGID table entry @index set / cleared (CREATE_BIND / DESTROY_BIND). */
    int (*gid_bind)(void *be, uint32_t index, const uint8_t gid[16],
                    uint8_t gid_type);
    void (*gid_unbind)(void *be, uint32_t index);

    /*
     * Data path.  submit: carry @wr of @qp to its responder; 0 if taken
     * (pvrdma_core_send_done() follows: requests of a QP complete in the
     * order they were submitted, and a backend completes one before
     * submit returns only if it is the only one out), -EAGAIN if it
     * cannot be taken before an outstanding one completes (the core
     * submits it again then), another negative errno if refused (the
     * WQE completes with LOC_PROT_ERR for -EFAULT, else LOC_QP_OP_ERR,
     * after the ones before it).  The core has at most
     * qp->max_outstanding requests of a QP out, and keeps @wr unchanged
     * until its completion.
     */
    int (*submit)(void *be, PvrdmaQp *qp, PvrdmaSendWr *wr);
    /*
     * Forget the outstanding requests of @qp (the QP leaves RTS/SQD for
     * ERR or RESET, or is destroyed): no send_done may follow.
     */
    void (*cancel)(void *be, PvrdmaQp *qp);
    /*
     * Receive WQEs were posted on @qp (its RQ, or the SRQ it uses), a QP
     * of any type in RTR, RTS or SQD: a requester waiting on an RNR NAK
     * from @qp may be retried now, a backend that hands receives to a
     * host queue takes them.
     */
    void (*recv_posted)(void *be, PvrdmaQp *qp);
    /*
     * Take now what may already be waiting for this device (in a socket
     * the event loop has not read yet), so that the guest need not wait
     * for the event loop to be scheduled.  @qp: a send doorbell found the
     * previous request of @qp still outstanding.  NULL: the guest polled
     * an empty CQ (CQ_POLL doorbell); anything may arrive.  @cq: that CQ
     * when it is not armed, so its poller goes on polling until a CQE
     * comes (the backend may count on it for a while and set
     * cq->poll_watch to hear of the end, poll_end); NULL otherwise.
     */
    void (*poll)(void *be, PvrdmaQp *qp, PvrdmaCq *cq);
    /*
     * The polling of @cq that poll() watched has ended: a CQE was written
     * to it, it was armed, or it goes away.  The core clears
     * cq->poll_watch before the call.
     */
    void (*poll_end)(void *be, PvrdmaCq *cq);

    /*
     * Migration and snapshots with peers in other processes (optional;
     * docs/migration.md).  move_out: the guest stopped for a save; the
     * core submits nothing until move_back or the destination's move_in.
     * Peers are asked to hold their requests, and what is in flight ends,
     * within @timeout_ns; false (with @errmsg) if it did not: the save is
     * refused.  move_save: what the state carries for the port
     * (PvrdmaMoveState); move_in (destination, the guest runs): announce
     * the GIDs with it (NULL: a state without one).  move_work: a count
     * that moves whenever the port executed a peer's request or got an
     * answer (the save checks none came in too late).
     */
    bool (*move_out)(void *be, int64_t timeout_ns, char **errmsg);
    void (*move_back)(void *be);
    void (*move_save)(void *be, PvrdmaMoveState *ms);
    void (*move_in)(void *be, const PvrdmaMoveState *ms);
    uint64_t (*move_work)(void *be);

    /*
     * The links of the port (optional): how many are up now, and how
     * many went down after they were up (PVRDMA_CTR_LINKS_UP,
     * _LINK_DOWNED).
     */
    void (*link_counts)(void *be, uint64_t *up, uint64_t *downed);
} PvrdmaBackendOps;

/*
 * Attach a backend to @core (which must have no DSR loaded); the previous
 * backend's free op is called.  @be is handed to every op.  A core starts
 * with the "none" backend, on which every send fails with RETRY_EXC_ERR.
 */
void pvrdma_core_set_backend(PvrdmaCore *core, const PvrdmaBackendOps *ops,
                             void *be);

/* ---- what a backend may call (under the caller's lock) ----------------- */

/*
 * The core is entered from outside its own entry points (a responder
 * working on this core for another device's request, a completion from a
 * bottom half): deferred work (flushes) runs at the outermost leave.
 */
void pvrdma_core_enter(PvrdmaCore *core);
void pvrdma_core_leave(PvrdmaCore *core);

/* Completion of the oldest outstanding request (or PENDING op) of @qp. */
void pvrdma_core_send_done(PvrdmaCore *core, PvrdmaQp *qp,
                           const PvrdmaSendResult *res);

/*
 * The next receive WQE of @qp (its RQ or SRQ), copied in into @rwr and,
 * with @resolve, its SGEs validated and resolved (a WRITE_WITH_IMM uses
 * only the wr_id).  Returns 1 (taken, rwr->status says whether it is
 * usable), 0 if there is none (RNR), -1 if the queue is broken (the QP or
 * SRQ was failed).  The WQE stays at the head until
 * pvrdma_core_recv_done().
 */
int pvrdma_core_recv_peek(PvrdmaCore *core, PvrdmaQp *qp,
                          PvrdmaRecvWr *rwr, bool resolve);
/* Consume the peeked WQE and post @cqe (see pvrdma_core_cqe_init()). */
void pvrdma_core_recv_done(PvrdmaCore *core, PvrdmaQp *qp,
                           const struct pvrdma_cqe *cqe, bool solicited);
/*
 * For a backend whose transport holds receive WQEs of its own (a host
 * device's receive queue): take the next receive WQE of @qp off its ring
 * at once (resolved, as pvrdma_core_recv_peek() with @resolve; same
 * return values), and later post its completion with
 * pvrdma_core_recv_complete().  The backend completes every WQE it took,
 * in the order the QP's own receive queue requires.
 */
int pvrdma_core_recv_take(PvrdmaCore *core, PvrdmaQp *qp, PvrdmaRecvWr *rwr);
void pvrdma_core_recv_complete(PvrdmaCore *core, PvrdmaQp *qp,
                               const struct pvrdma_cqe *cqe, bool solicited);
/* Fill the fields every CQE of @qp carries. */
void pvrdma_core_cqe_init(struct pvrdma_cqe *cqe, PvrdmaQp *qp,
                          uint64_t wr_id, uint32_t opcode, uint32_t status);

/*
 * A requester will wait for a receive WQE of @qp (an RNR NAK not found
 * by pvrdma_core_recv_peek(), which asks by itself): the guest's next
 * receive doorbell must come (PVRDMA_EX_CAP_RQ_DB_HINT).
 */
void pvrdma_core_rq_doorbell_wanted(PvrdmaCore *core, PvrdmaQp *qp);

/* Move @qp to ERR (flush deferred to the leave), post @event if >= 0. */
void pvrdma_core_qp_error(PvrdmaCore *core, PvrdmaQp *qp, int event);
/* The backend's count of @srq's WQEs fell below its limit: the one event. */
void pvrdma_core_srq_limit_reached(PvrdmaCore *core, PvrdmaSrq *srq);
/*
 * XRC_TGT @qp takes a message for XRC SRQ number @srqn: true, with @qp's
 * receive side pointed at that SRQ (receive WQEs, PD for keys, CQ), if
 * @srqn is an XRC SRQ of @qp's domain; false (a NAK: invalid request)
 * otherwise.
 */
bool pvrdma_core_xrc_bind(PvrdmaCore *core, PvrdmaQp *qp, uint32_t srqn);
/* First message received in RTR: COMM_EST, once. */
void pvrdma_core_qp_comm_est(PvrdmaCore *core, PvrdmaQp *qp);
/* @qp's SQ head waits on an RNR NAK: retry it now. */
void pvrdma_core_rnr_kick(PvrdmaCore *core, PvrdmaQp *qp);
bool pvrdma_core_rnr_waiting(PvrdmaQp *qp);

/*
 * Resolve an rkey of @qp's PD granting @access over [va, va + len)
 * (len > 0) into one segment of @sgl.  False on any key, PD, access or
 * range violation.
 */
bool pvrdma_core_rkey_seg(PvrdmaCore *core, PvrdmaQp *qp, uint32_t rkey,
                          uint64_t va, uint64_t len, uint32_t access,
                          PvrdmaSeg *seg);
/* SEND_WITH_INV: does @rkey name a valid fast-reg MR of @qp's PD? */
bool pvrdma_core_inv_ok(PvrdmaCore *core, PvrdmaQp *qp, uint32_t rkey);
void pvrdma_core_invalidate(PvrdmaCore *core, PvrdmaQp *qp, uint32_t rkey);

/* The QP with wire number @qpn, or NULL. */
PvrdmaQp *pvrdma_core_qp_by_qpn(PvrdmaCore *core, uint32_t qpn,
                                uint32_t handle_mask);
/* True if @gid is bound in @core's GID table (and a DSR is loaded). */
bool pvrdma_core_has_gid(PvrdmaCore *core, const uint8_t gid[16]);
/* The GID bound at @index (NULL if none) and its type. */
const uint8_t *pvrdma_core_sgid(PvrdmaCore *core, uint32_t index,
                                uint8_t *type);
uint32_t pvrdma_core_driver_version(PvrdmaCore *core);

/*
 * Long-lived pin of every page of a user MR (zero-copy registration):
 * host pointers that stay valid until pvrdma_core_mr_unpin(), which the
 * core also calls on deregistration, reset and device removal.  The
 * pages were charged to the pinned-pages quota when the MR was created.
 * Returns 0, -EINVAL (not a user MR), -EFAULT (a page is not RAM).
 */
int pvrdma_core_mr_pin(PvrdmaCore *core, PvrdmaMr *mr);
void pvrdma_core_mr_unpin(PvrdmaCore *core, PvrdmaMr *mr);

/* ---- memory movement (pvrdma_sgl.c) ------------------------------------ */

/* Which side of a copy failed. */
enum {
    PVRDMA_COPY_OK = 0,
    PVRDMA_COPY_SRC_FAULT = 1,
    PVRDMA_COPY_DST_FAULT = 2,
};

/* Bus address of byte @off of @seg and how many bytes follow contiguously. */
bool pvrdma_seg_xlate(const PvrdmaSeg *seg, uint64_t off, uint64_t *bus,
                      uint64_t *run);
/* The same, the run looked for no further than @want bytes (at least 1). */
bool pvrdma_seg_xlate_upto(const PvrdmaSeg *seg, uint64_t off, uint64_t want,
                           uint64_t *bus, uint64_t *run);

/*
 * The other side of a transfer: moves @n bytes at offset @off of a
 * payload from or to host memory at @buf.  Returns 0, or -1 if the
 * payload's own memory faulted.
 */
typedef int (*PvrdmaPeerCopy)(void *opaque, uint64_t off, void *buf,
                              uint64_t n);

/*
 * Move @len bytes between @sgl (its own core's guest memory, mapped
 * chunk by chunk through that core) and a peer: into the SGL from
 * @peer when @into_sgl, else out of the SGL into @peer.  Returns
 * PVRDMA_COPY_OK, PVRDMA_COPY_DST_FAULT or PVRDMA_COPY_SRC_FAULT (the
 * SGL's side is the destination when @into_sgl).
 */
int pvrdma_sgl_xfer(PvrdmaSgl *sgl, uint64_t off, uint64_t len,
                    bool into_sgl, PvrdmaPeerCopy peer, void *opaque);
/*
 * Move @len bytes from @src at byte @src_off to @dst at byte @dst_off,
 * both SGLs of this process (each through its own core, possibly one
 * guest): one memmove per piece both sides hold contiguously, with no
 * staging and no peer callback.  PVRDMA_COPY_OK, PVRDMA_COPY_SRC_FAULT
 * or PVRDMA_COPY_DST_FAULT.
 */
int pvrdma_sgl_copy(const PvrdmaSgl *dst, uint64_t dst_off,
                    const PvrdmaSgl *src, uint64_t src_off, uint64_t len);
/* Host buffer into an SGL at byte @off; 0 or -1 on a fault. */
int pvrdma_sgl_write(PvrdmaSgl *sgl, uint64_t off, const void *buf,
                     uint64_t len);

/*
 * The 40 bytes a UD/GSI receive buffer starts with on RoCE v2, for a
 * datagram of @length payload bytes from @sgid to @dgid.
 */
void pvrdma_grh_build(uint8_t grh[40], const uint8_t sgid[16],
                      const uint8_t dgid[16], uint8_t tclass,
                      uint32_t flow_label, uint8_t hop_limit, uint32_t length);

/*
 * Multicast (PVRDMA_EX_CAP_MCAST).  pvrdma_mcast_gid: is @gid a multicast
 * GID (ff00::/8, or IPv4-mapped 224.0.0.0/4)?  pvrdma_core_mcast_qps: the
 * QPs of this device attached to @mgid, at most @max into @qps; returns
 * how many.  pvrdma_core_mcast_groups: the groups with members here, at
 * most @max GIDs into @mgids; returns how many.
 */
bool pvrdma_mcast_gid(const uint8_t gid[16]);
/* The destination QPN of a datagram to a multicast group (IBA 10.5.1.2). */
#define PVRDMA_QPN_MULTICAST    0xFFFFFFu
unsigned pvrdma_core_mcast_qps(PvrdmaCore *core, const uint8_t mgid[16],
                               PvrdmaQp **qps, unsigned max);
unsigned pvrdma_core_mcast_groups(PvrdmaCore *core, uint8_t (*mgids)[16],
                                  unsigned max);

#endif /* HW_PVRDMA_BACKEND_H */
