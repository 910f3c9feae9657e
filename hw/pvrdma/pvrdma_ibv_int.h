/*
 * PVRDMA host verbs backend, shared between its data path
 * (pvrdma_ibverbs.c) and its connection manager proxy (pvrdma_ibv_cm.c).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_PVRDMA_IBV_INT_H
#define HW_PVRDMA_IBV_INT_H

#include <infiniband/verbs.h>

#include "pvrdma_core_int.h"
#include "pvrdma_ibverbs.h"

/* A MAD as GSI QPs carry it. */
#define PVRDMA_IBV_MAD_SIZE     256

typedef struct PvrdmaIbvCm PvrdmaIbvCm;
typedef struct PvrdmaIbvQp PvrdmaIbvQp;

struct PvrdmaIbv {
    char *name;
    uint32_t port;
    int32_t gid_index;
    char *cm_ports;
    struct ibv_context *ctx;
    struct ibv_device_attr dev_attr;
    struct ibv_port_attr port_attr;
    PvrdmaCore *core;           /* after pvrdma_ibv_attach() */
    struct ibv_comp_channel *chan;
    struct ibv_cq *cq;
    GHashTable *qps;            /* host qp_num -> PvrdmaIbvQp */
    uint32_t next_gen;          /* tags work requests per host QP */
    uint32_t unacked_events;
    bool port_down;             /* the last port event was PORT_ERR */
    PvrdmaIbvQp *gsi;           /* the guest's QP1, once created */
    PvrdmaIbvCm *cm;            /* RDMA CM for the guest; NULL: none */
    /*
     * The IP multicast groups this process joined on the host interface
     * of the device, as RDMA CM does for a group on RoCE: the guest's
     * multicast groups (UDP sockets: IPv4, IPv6; -1 until needed).
     */
    int mc_fd4, mc_fd6;
    uint8_t (*mc_joined)[16];
    unsigned mc_njoined;
};

/* The first receive SGE of a UD receive: its MR (by handle) and address. */
typedef struct PvrdmaIbvGrhAt {
    uint32_t mr_handle;
    uint64_t va;
} PvrdmaIbvGrhAt;

struct PvrdmaIbvQp {
    PvrdmaIbv *ibv;
    PvrdmaQp *qp;
    struct ibv_qp *hqp;         /* NULL: GSI (its MADs: pvrdma_ibv_cm.c) */
    uint32_t gen;               /* in every wr_id of this QP */
    uint32_t max_send_sge;      /* the host QP's */
    uint32_t max_recv_sge;
    uint32_t sends_out;         /* the core's requests on the host SQ */
    /* UD: the address handle of the last destination, and its key. */
    struct ibv_ah *ah;
    struct ibv_ah_attr ah_key;
    /* Receive WQEs taken from the guest ring, in ring order. */
    uint64_t *recv_wr_id;
    PvrdmaIbvGrhAt *recv_grh;   /* UD: where each one's GRH lands */
    uint32_t recv_n;            /* slots */
    uint32_t recv_head;         /* oldest taken, not completed */
    uint32_t recv_count;        /* taken, not completed */
    /*
     * The receive PSN the host's CM announced to the peer for the
     * connection it made for this QP (-1: none): it replaces the guest's
     * own at RTR.
     */
    int64_t cm_rq_psn;
    /*
     * Transitions held back (the guest's RTR and RTS of a QP the host's
     * CM has yet to accept a connection for, whose receive PSN is not
     * known yet): replayed by pvrdma_ibv_qp_release().
     */
    struct {
        struct pvrdma_qp_attr attr;
        uint32_t mask;
    } held[4];
    unsigned nheld;
};

/*
 * RDMA CM for the guest (docs/ibverbs.md, "Connection management"): the
 * guest's CM MADs are carried out by the host's RDMA CM on the guest's
 * (host) QPs, and what the host's CM hears becomes MADs on the guest's
 * QP1.  pvrdma_ibv_cm_new() returns NULL, with a message in *@msg, if
 * the host has no RDMA CM (the rdma_ucm module); the device then works
 * without it.
 */
PvrdmaIbvCm *pvrdma_ibv_cm_new(PvrdmaIbv *ibv, const char *ports, char **msg);
void pvrdma_ibv_cm_free(PvrdmaIbvCm *cm);
/* Is @ports a valid cm-ports= value?  If not, why in *@msg. */
bool pvrdma_ibv_cm_ports_ok(const char *ports, char **msg);
int pvrdma_ibv_cm_fd(PvrdmaIbvCm *cm);
/* Host CM events (under the core's lock, inside enter/leave). */
void pvrdma_ibv_cm_process(PvrdmaIbvCm *cm);
/* A MAD the guest sent on QP1 (@len bytes of it, @wr its datagram). */
void pvrdma_ibv_cm_guest_mad(PvrdmaIbvCm *cm, const uint8_t *mad,
                             size_t len, const PvrdmaSendWr *wr);
/* The guest's QP1 has receive WQEs: MADs waiting for one go in. */
void pvrdma_ibv_cm_recv_posted(PvrdmaIbvCm *cm);
/* The guest bound / unbound a GID: listen on its address or stop. */
void pvrdma_ibv_cm_gid(PvrdmaIbvCm *cm, uint32_t index, const uint8_t *gid);
/* The guest's driver reset the device: every connection goes. */
void pvrdma_ibv_cm_reset(PvrdmaIbvCm *cm);
/*
 * Is a guest QP moving to RTR towards (@dest_qpn, @dgid) the one a
 * connection request the device gave the guest is for?  Its transitions
 * are then held until the guest accepts.
 */
bool pvrdma_ibv_cm_claims(PvrdmaIbvCm *cm, uint32_t dest_qpn,
                          const uint8_t *dgid);
/* Carry out the held transitions of @q; 0 or a negative errno. */
int pvrdma_ibv_qp_release(PvrdmaIbvQp *q);
/* The host GID index of a guest GID (-1: not a GID of the host port). */
int pvrdma_ibv_host_gid(PvrdmaIbv *ibv, const uint8_t *gid, bool quiet);

#endif /* HW_PVRDMA_IBV_INT_H */
