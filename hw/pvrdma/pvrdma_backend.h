/*
 * PVRDMA backend interface: what the device core asks of a transport.
 *
 * The core owns the guest-visible object model (handles, validation, page
 * arrays, QP state machine, rings); a backend owns the transport: the
 * software fabric (pvrdma_fabric.c, default) or, later, a host libibverbs
 * device.  The core calls the ops below at fixed points and never tests
 * which backend it has.
 *
 * Rules for every op:
 *  - create/modify/bind ops run after the core has validated the command
 *    completely and before it commits; returning a negative errno fails the
 *    command with that errno and the core undoes its own state.
 *  - destroy ops cannot fail; they run before the core frees the object and
 *    must drop every reference the backend holds to it (and its pages).
 *  - doorbell/poll ops run synchronously inside the guest's MMIO write;
 *    they reach guest memory only through pvrdma_core_dma_read/_write and
 *    report completions through the core's ring helpers.
 *  - every op may be NULL, meaning "nothing to do / accept".
 *  - objects carry a 'be' pointer the backend may set in its create op.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_PVRDMA_BACKEND_H
#define HW_PVRDMA_BACKEND_H

#include <stdint.h>

#include "pvrdma_core.h"

typedef struct PvrdmaPd PvrdmaPd;
typedef struct PvrdmaMr PvrdmaMr;
typedef struct PvrdmaCq PvrdmaCq;
typedef struct PvrdmaQp PvrdmaQp;
typedef struct PvrdmaSrq PvrdmaSrq;
struct pvrdma_qp_attr;

typedef struct PvrdmaBackendOps {
    const char *name;

    /* Called from pvrdma_core_reset(): quiesce, drop queued work. */
    void (*reset)(void *be);
    /* Called from pvrdma_core_free() after the last object is gone. */
    void (*free)(void *be);

    int (*pd_create)(void *be, PvrdmaPd *pd);
    void (*pd_destroy)(void *be, PvrdmaPd *pd);

    /* User, DMA and fast-reg MRs (mr->flags says which). */
    int (*mr_register)(void *be, PvrdmaMr *mr);
    void (*mr_deregister)(void *be, PvrdmaMr *mr);

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
    /*
     * Runs after a successful MODIFY_QP was committed (qp->state and
     * qp->attr hold the new values); @old_state is the state before.
     */
    void (*qp_modified)(void *be, PvrdmaQp *qp, uint32_t old_state);
    void (*qp_destroy)(void *be, PvrdmaQp *qp);

    int (*srq_create)(void *be, PvrdmaSrq *srq);
    int (*srq_modify)(void *be, PvrdmaSrq *srq, uint32_t limit);
    void (*srq_destroy)(void *be, PvrdmaSrq *srq);

    /* SGID table entry @index set / cleared (CREATE_BIND / DESTROY_BIND). */
    int (*gid_bind)(void *be, uint32_t index, const uint8_t gid[16],
                    uint8_t gid_type);
    void (*gid_unbind)(void *be, uint32_t index);

    /* Doorbells (spec §7): new WQEs on the SQ / RQ / SRQ. */
    void (*post_send)(void *be, PvrdmaQp *qp);
    void (*post_recv)(void *be, PvrdmaQp *qp);
    void (*srq_post_recv)(void *be, PvrdmaSrq *srq);
    /* CQ POLL doorbell: flush pending completions of @cq now. */
    void (*cq_poll)(void *be, PvrdmaCq *cq);
    /* The core's timer (PvrdmaCoreOps.timer_mod) expired. */
    void (*timer_expired)(void *be);
} PvrdmaBackendOps;

/* The software fabric backend (the default). */
extern const PvrdmaBackendOps pvrdma_fabric_backend_ops;
void *pvrdma_fabric_new(PvrdmaCore *core);

/*
 * Replace the backend of @core (which must have no DSR loaded).  The old
 * backend's free op is called.  @be is handed to every op.
 */
void pvrdma_core_set_backend(PvrdmaCore *core, const PvrdmaBackendOps *ops,
                             void *be);

#endif /* HW_PVRDMA_BACKEND_H */
