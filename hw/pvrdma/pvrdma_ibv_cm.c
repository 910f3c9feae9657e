/*
 * PVRDMA host verbs backend: RDMA CM for the guest (docs/ibverbs.md,
 * "Connection management").
 *
 * The guest's QPs are host QPs, but its QP1 is not: the host kernel owns
 * the host port's QP1 and its CM.  So the guest's CM messages (MADs the
 * guest sends on its QP1) are not forwarded; they are carried out with the
 * host's RDMA CM (librdmacm), on rdma_cm_ids without QPs of their own
 * that name the guest's QP by number, and what the host's CM hears back
 * becomes CM MADs on the guest's QP1.  The guest's CM and the peer's never
 * see each other's messages, only their effect: the peer sees a host
 * RDMA CM user, the guest a peer CM.
 *
 * Active side (the guest connects): its REQ names the peer's address and
 * port (RDMA CM's private-data header and service ID); the host resolves
 * and connects, and the peer's answer becomes the guest's REP (peer QPN,
 * and the PSN the peer starts at), REJ or a timeout's REJ.  The guest's
 * RTU completes the host's connection.
 * Passive side (a peer connects to the guest): the host listens, for the
 * guest, on each address of the guest the host device owns at the ports of
 * cm-ports=; a connection request becomes a REQ to the guest, whose REP
 * becomes the host's accept (REJ: reject); the peer's RTU becomes the
 * guest's.
 * Either side: DREQ/DREP as disconnect.  The PSN a guest QP sends from is
 * the one the host's CM announced, not the guest's (pvrdma_ibverbs.c
 * replaces it at RTS).
 * UD (RDMA CM's UDP port space): the guest's SIDR_REQ becomes a host
 * rdma_connect() on a UDP id, whose answer (the peer's QPN and Q_Key)
 * becomes the guest's SIDR_REP; a peer's SIDR_REQ to a guest address
 * (the host listens in both port spaces) becomes a SIDR_REQ to the guest,
 * whose SIDR_REP becomes the host's accept or reject.
 *
 * Every MAD from the guest is checked before use: wrong class, version,
 * unknown communication IDs, a QP the guest does not own are dropped or
 * rejected; connections per device are bounded.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>
#include <rdma/rdma_cma.h>

#include "pvrdma_ibv_int.h"

/* Connections a device carries at once (each is a host rdma_cm_id). */
#define PVRDMA_CM_MAX_CONN      1024
/* MADs for the guest waiting for a receive WQE on its QP1. */
#define PVRDMA_CM_MAX_PENDING   64
/* A connection not set up after this long (in us) is given up. */
#define PVRDMA_CM_SETUP_US      (120 * G_USEC_PER_SEC)
/* Host address and route resolution, in ms. */
#define PVRDMA_CM_RESOLVE_MS    5000
#define PVRDMA_CM_MAX_PORTS     16
/* RDMA CM's well-known ports: rping, perftest, NVMe-oF, iSER, NFS. */
#define PVRDMA_CM_DEFAULT_PORTS "7174:18515:4420:3260:20049"

/* Management class, method and attributes of the CM (IBA 12.6). */
#define CM_CLASS                0x07
#define CM_CLASS_VERSION        2
#define CM_METHOD_SEND          0x03
#define CM_ATTR_REQ             0x0010
#define CM_ATTR_MRA             0x0011
#define CM_ATTR_REJ             0x0012
#define CM_ATTR_REP             0x0013
#define CM_ATTR_RTU             0x0014
#define CM_ATTR_DREQ            0x0015
#define CM_ATTR_DREP            0x0016
#define CM_ATTR_SIDR_REQ        0x0017
#define CM_ATTR_SIDR_REP        0x0018
/*
 * REJ reasons (IBA table 109).  A peer the host cannot reach is
 * INVALID_GID (the guest's CM matches a TIMEOUT reject by the ARI, which
 * a REQ's reject has none of).
 */
#define CM_REJ_NO_QP            1
#define CM_REJ_NO_RESOURCES     3
#define CM_REJ_INVALID_GID      12
#define CM_REJ_INVALID_SERVICE  8
#define CM_REJ_INVALID_TRANSPORT 9

/* Message bodies start after the 24-byte MAD header. */
#define M                       24
/* REQ */
#define REQ_LOCAL_ID            (M + 0)
#define REQ_SERVICE_ID          (M + 8)
#define REQ_CA_GUID             (M + 16)
#define REQ_QPN                 (M + 32)   /* 24 bits, then resp. res. */
#define REQ_RESP_RES            (M + 35)
#define REQ_INIT_DEPTH          (M + 39)
#define REQ_TIMEOUT_TYPE_FC     (M + 43)
#define REQ_PSN                 (M + 44)   /* 24 bits */
#define REQ_TIMEOUT_RETRY       (M + 47)
#define REQ_PKEY                (M + 48)
#define REQ_MTU_RNR             (M + 50)
#define REQ_CMRETRY_SRQ         (M + 51)
#define REQ_LOCAL_LID           (M + 52)
#define REQ_REMOTE_LID          (M + 54)
#define REQ_LOCAL_GID           (M + 56)
#define REQ_REMOTE_GID          (M + 72)
#define REQ_FLOW_LABEL          (M + 88)   /* 20 bits */
#define REQ_TCLASS              (M + 92)
#define REQ_HOP_LIMIT           (M + 93)
#define REQ_SL_LOCAL            (M + 94)
#define REQ_ACK_TIMEOUT         (M + 95)
#define REQ_PDATA               (M + 140)
#define REQ_PDATA_LEN           92
/* REP */
#define REP_LOCAL_ID            (M + 0)
#define REP_REMOTE_ID           (M + 4)
#define REP_QPN                 (M + 12)
#define REP_PSN                 (M + 20)
#define REP_RESP_RES            (M + 24)
#define REP_INIT_DEPTH          (M + 25)
#define REP_DELAY_FO_FC         (M + 26)
#define REP_RNR_SRQ             (M + 27)
#define REP_CA_GUID             (M + 28)
#define REP_PDATA               (M + 36)
#define REP_PDATA_LEN           196
/* REJ */
#define REJ_MSG                 (M + 8)
#define REJ_REASON              (M + 10)
#define REJ_PDATA               (M + 84)
#define REJ_PDATA_LEN           148
/* DREQ */
#define DREQ_QPN                (M + 8)
/* SIDR_REQ, SIDR_REP (IBA 12.11.5, 12.11.6) */
#define SIDR_REQ_ID             (M + 0)
#define SIDR_REQ_PKEY           (M + 4)
#define SIDR_REQ_SERVICE_ID     (M + 8)
#define SIDR_REQ_PDATA          (M + 16)
#define SIDR_REQ_PDATA_LEN      216
#define SIDR_REP_ID             (M + 0)
#define SIDR_REP_STATUS         (M + 4)
#define SIDR_REP_QPN            (M + 8)    /* 24 bits */
#define SIDR_REP_SERVICE_ID     (M + 12)
#define SIDR_REP_QKEY           (M + 20)
#define SIDR_REP_PDATA          (M + 96)
#define SIDR_REP_PDATA_LEN      136
/* SIDR_REP status: the QP is valid, no such service, rejected. */
#define SIDR_OK                 0
#define SIDR_UNSUPPORTED        1
#define SIDR_REJECT             2
#define SIDR_NO_QP              3
/* Every message: its two communication IDs. */
#define MSG_LOCAL_ID            (M + 0)
#define MSG_REMOTE_ID           (M + 4)

/* RDMA CM's header in a REQ's private data (its IP port space). */
#define CMA_HDR_LEN             36
#define CMA_PS_TCP              0x0106
#define CMA_PS_UDP              0x0111

typedef enum {
    PVRDMA_CM_RESOLVING,        /* active: the host resolves, connects */
    PVRDMA_CM_REP_SENT,         /* active: REP given, the guest's RTU due */
    PVRDMA_CM_REQ_SENT,         /* passive: REQ given, the guest's REP due */
    PVRDMA_CM_ACCEPTED,         /* passive: accepted, the peer's RTU due */
    PVRDMA_CM_ESTABLISHED,
    PVRDMA_CM_CLOSING,          /* the guest asked to disconnect */
} PvrdmaCmState;

/* What a host rdma_cm_id's context points to. */
enum { PVRDMA_CM_CONN = 1, PVRDMA_CM_LISTEN };

typedef struct PvrdmaCmConn {
    int kind;                   /* PVRDMA_CM_CONN */
    PvrdmaIbvCm *cm;
    struct rdma_cm_id *id;
    bool active;
    bool sidr;                  /* UD: a service ID resolution, no state */
    bool dead;                  /* destroy once the event is acked */
    PvrdmaCmState state;
    int64_t born;               /* g_get_monotonic_time() */
    uint32_t my_id;             /* the peer's comm ID, as the guest sees it */
    uint32_t guest_id;          /* the guest's own comm ID */
    uint64_t tid;
    uint32_t guest_qpn;
    uint32_t peer_qpn;
    uint8_t guest_gid[16];
    uint8_t peer_gid[16];
    uint64_t service;           /* SIDR: the service ID asked for */
    /* Active: what the guest's REQ asked of the connection. */
    struct rdma_conn_param param;
    uint8_t pdata[SIDR_REQ_PDATA_LEN - CMA_HDR_LEN];
    /* The last MAD given to the guest: sent again if the guest repeats. */
    uint8_t last[PVRDMA_IBV_MAD_SIZE];
    bool have_last;
} PvrdmaCmConn;

typedef struct PvrdmaCmListen {
    int kind;                   /* PVRDMA_CM_LISTEN */
    uint32_t gid_index;         /* the guest's */
    uint16_t port;
    bool udp;                   /* RDMA_PS_UDP: SIDR */
    struct rdma_cm_id *id;
} PvrdmaCmListen;

typedef struct PvrdmaCmMad {
    uint8_t mad[PVRDMA_IBV_MAD_SIZE];
    uint8_t sgid[16];
    uint8_t dgid[16];
} PvrdmaCmMad;

struct PvrdmaIbvCm {
    PvrdmaIbv *ibv;
    struct rdma_event_channel *ch;
    GHashTable *conns;          /* my_id -> PvrdmaCmConn */
    uint32_t next_id;
    uint64_t guid;              /* the CA GUID the guest's peers have */
    uint64_t next_tid;
    uint16_t ports[PVRDMA_CM_MAX_PORTS];
    unsigned nports;
    GSList *listens;            /* PvrdmaCmListen */
    GQueue pending;             /* PvrdmaCmMad for the guest's QP1 */
    GSList *doomed;             /* ids to destroy after the event's ack */
};

/* ---- MAD fields ---------------------------------------------------------- */

static uint32_t cm_get32(const uint8_t *m, unsigned off)
{
    return (uint32_t)m[off] << 24 | (uint32_t)m[off + 1] << 16 |
           (uint32_t)m[off + 2] << 8 | m[off + 3];
}

static uint32_t cm_get24(const uint8_t *m, unsigned off)
{
    return cm_get32(m, off) >> 8;
}

static uint64_t cm_get64(const uint8_t *m, unsigned off)
{
    return (uint64_t)cm_get32(m, off) << 32 | cm_get32(m, off + 4);
}

static void cm_put16(uint8_t *m, unsigned off, uint16_t v)
{
    m[off] = v >> 8;
    m[off + 1] = v;
}

static void cm_put32(uint8_t *m, unsigned off, uint32_t v)
{
    m[off] = v >> 24;
    m[off + 1] = v >> 16;
    m[off + 2] = v >> 8;
    m[off + 3] = v;
}

/* 24 bits at @off, keeping the byte after them. */
static void cm_put24(uint8_t *m, unsigned off, uint32_t v)
{
    m[off] = v >> 16;
    m[off + 1] = v >> 8;
    m[off + 2] = v;
}

static void cm_put64(uint8_t *m, unsigned off, uint64_t v)
{
    cm_put32(m, off, v >> 32);
    cm_put32(m, off + 4, (uint32_t)v);
}

static void cm_header(uint8_t *m, uint16_t attr, uint64_t tid)
{
    memset(m, 0, PVRDMA_IBV_MAD_SIZE);
    m[0] = 1;                   /* base version */
    m[1] = CM_CLASS;
    m[2] = CM_CLASS_VERSION;
    m[3] = CM_METHOD_SEND;
    cm_put64(m, 8, tid);
    cm_put16(m, 16, attr);
}

/* ---- addresses ----------------------------------------------------------- */

static const uint8_t cm_v4mapped[12] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
};

/* A GID as an IP address (RoCE v2: IPv4-mapped or IPv6) and @port. */
static void cm_gid_to_sa(const uint8_t gid[16], uint16_t port,
                         struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (!memcmp(gid, cm_v4mapped, 12)) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;

        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        memcpy(&in->sin_addr, gid + 12, 4);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        memcpy(&in6->sin6_addr, gid, 16);
    }
}

/* An address as a GID, and its port. */
static uint16_t cm_sa_to_gid(const struct sockaddr *sa, uint8_t gid[16])
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

        memcpy(gid, cm_v4mapped, 12);
        memcpy(gid + 12, &in->sin_addr, 4);
        return ntohs(in->sin_port);
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

        memcpy(gid, &in6->sin6_addr, 16);
        return ntohs(in6->sin6_port);
    }
    memset(gid, 0, 16);
    return 0;
}

static char *cm_gid_str(const uint8_t gid[16])
{
    char buf[INET6_ADDRSTRLEN];

    if (!memcmp(gid, cm_v4mapped, 12)) {
        inet_ntop(AF_INET, gid + 12, buf, sizeof(buf));
    } else {
        inet_ntop(AF_INET6, gid, buf, sizeof(buf));
    }
    return g_strdup(buf);
}

/* ---- MADs to the guest --------------------------------------------------- */

/* One MAD into the guest's QP1; false if it has no receive WQE yet. */
static bool cm_deliver_one(PvrdmaIbvCm *cm, const PvrdmaCmMad *m)
{
    PvrdmaCore *core = cm->ibv->core;
    PvrdmaIbvQp *gsi = cm->ibv->gsi;
    uint8_t grh[PVRDMA_GRH_SIZE];
    struct pvrdma_cqe cqe;
    PvrdmaRecvWr rwr;
    bool v4;

    if (!gsi || gsi->qp->state < PVRDMA_QPS_RTR ||
        gsi->qp->state > PVRDMA_QPS_SQE ||
        pvrdma_core_recv_peek(core, gsi->qp, &rwr, true) != 1) {
        return false;
    }
    if (rwr.status != PVRDMA_WC_SUCCESS) {
        /* The receive WQE itself is bad: it fails, the QP goes to ERR. */
        pvrdma_core_cqe_init(&cqe, gsi->qp, rwr.wr_id, PVRDMA_WC_RECV,
                             rwr.status);
        pvrdma_core_recv_done(core, gsi->qp, &cqe, false);
        pvrdma_core_qp_error(core, gsi->qp, -1);
        return true;
    }
    if (rwr.sgl.total < PVRDMA_GRH_SIZE + PVRDMA_IBV_MAD_SIZE) {
        /* Does not fit: a datagram is dropped, the WQE stays. */
        return true;
    }
    pvrdma_grh_build(grh, m->sgid, m->dgid, 0, 0, 64, PVRDMA_IBV_MAD_SIZE);
    if (pvrdma_sgl_write(&rwr.sgl, 0, grh, sizeof(grh)) < 0 ||
        pvrdma_sgl_write(&rwr.sgl, PVRDMA_GRH_SIZE, m->mad,
                         PVRDMA_IBV_MAD_SIZE) < 0) {
        pvrdma_core_cqe_init(&cqe, gsi->qp, rwr.wr_id, PVRDMA_WC_RECV,
                             PVRDMA_WC_LOC_PROT_ERR);
        pvrdma_core_recv_done(core, gsi->qp, &cqe, false);
        pvrdma_core_qp_error(core, gsi->qp, -1);
        return true;
    }
    v4 = !memcmp(m->sgid, cm_v4mapped, 12);
    pvrdma_core_cqe_init(&cqe, gsi->qp, rwr.wr_id, PVRDMA_WC_RECV,
                         PVRDMA_WC_SUCCESS);
    cqe.byte_len = PVRDMA_GRH_SIZE + PVRDMA_IBV_MAD_SIZE;
    cqe.src_qp = 1;
    cqe.wc_flags |= PVRDMA_WC_GRH | PVRDMA_WC_WITH_NETWORK_HDR_TYPE;
    cqe.network_hdr_type = v4 ? PVRDMA_NETWORK_IPV4 : PVRDMA_NETWORK_IPV6;
    cqe.sl = 0x8 | (v4 ? 2 : 1);    /* as every datagram (fabric, UD) */
    pvrdma_core_recv_done(core, gsi->qp, &cqe, false);
    return true;
}

static void cm_flush(PvrdmaIbvCm *cm)
{
    PvrdmaCmMad *m;

    while ((m = g_queue_peek_head(&cm->pending)) && cm_deliver_one(cm, m)) {
        g_free(g_queue_pop_head(&cm->pending));
    }
}

/* Give @mad (of @c's connection) to the guest, now or when it can. */
static void cm_to_guest(PvrdmaIbvCm *cm, PvrdmaCmConn *c, const uint8_t *mad)
{
    PvrdmaCmMad *m;

    memcpy(c->last, mad, PVRDMA_IBV_MAD_SIZE);
    c->have_last = true;
    if (g_queue_get_length(&cm->pending) >= PVRDMA_CM_MAX_PENDING) {
        return;                 /* lost, as a datagram may be */
    }
    m = g_new(PvrdmaCmMad, 1);
    memcpy(m->mad, mad, PVRDMA_IBV_MAD_SIZE);
    memcpy(m->sgid, c->peer_gid, 16);
    memcpy(m->dgid, c->guest_gid, 16);
    g_queue_push_tail(&cm->pending, m);
    cm_flush(cm);
}

/* ---- connections --------------------------------------------------------- */

static void cm_conn_free(PvrdmaCmConn *c, bool later);

/*
 * Connections whose setup stopped half-way (a guest that never answers a
 * REQ or a REP, a peer that never answers) go after PVRDMA_CM_SETUP_US.
 */
static void cm_sweep(PvrdmaIbvCm *cm)
{
    int64_t now = g_get_monotonic_time();
    GHashTableIter it;
    PvrdmaCmConn *c;
    GSList *old = NULL;

    g_hash_table_iter_init(&it, cm->conns);
    while (g_hash_table_iter_next(&it, NULL, (gpointer *)&c)) {
        if (c->state != PVRDMA_CM_ESTABLISHED &&
            now - c->born > PVRDMA_CM_SETUP_US) {
            old = g_slist_prepend(old, c);
        }
    }
    while (old) {
        c = old->data;
        old = g_slist_delete_link(old, old);
        if (c->state == PVRDMA_CM_REQ_SENT) {
            rdma_reject(c->id, NULL, 0);
        }
        cm_conn_free(c, true);
    }
}

static PvrdmaCmConn *cm_conn_new(PvrdmaIbvCm *cm, bool active)
{
    PvrdmaCmConn *c;

    cm_sweep(cm);
    if (g_hash_table_size(cm->conns) >= PVRDMA_CM_MAX_CONN) {
        return NULL;
    }
    c = g_new0(PvrdmaCmConn, 1);
    c->kind = PVRDMA_CM_CONN;
    c->cm = cm;
    c->born = g_get_monotonic_time();
    c->active = active;
    do {
        c->my_id = ++cm->next_id;
    } while (!c->my_id || g_hash_table_contains(cm->conns,
                                                GUINT_TO_POINTER(c->my_id)));
    g_hash_table_insert(cm->conns, GUINT_TO_POINTER(c->my_id), c);
    return c;
}

/*
 * Forget @c; its host id is destroyed at once, or (@later, inside the
 * handling of one of its events) once that event is acknowledged.
 */
static void cm_conn_free(PvrdmaCmConn *c, bool later)
{
    PvrdmaIbvCm *cm = c->cm;

    g_hash_table_remove(cm->conns, GUINT_TO_POINTER(c->my_id));
    if (c->id) {
        c->id->context = NULL;
        if (later) {
            cm->doomed = g_slist_prepend(cm->doomed, c->id);
        } else {
            rdma_destroy_id(c->id);
        }
    }
    g_free(c);
}

static PvrdmaCmConn *cm_conn_by_guest(PvrdmaIbvCm *cm, uint32_t guest_id,
                                      const uint8_t *gid)
{
    GHashTableIter it;
    PvrdmaCmConn *c;

    g_hash_table_iter_init(&it, cm->conns);
    while (g_hash_table_iter_next(&it, NULL, (gpointer *)&c)) {
        if (c->active && c->guest_id == guest_id &&
            !memcmp(c->guest_gid, gid, 16)) {
            return c;
        }
    }
    return NULL;
}

/* The guest's QP @qpn, if it is one of its QPs of @type (a host QP). */
static PvrdmaIbvQp *cm_guest_qp(PvrdmaIbvCm *cm, uint32_t qpn, uint8_t type)
{
    PvrdmaIbvQp *q = g_hash_table_lookup(cm->ibv->qps,
                                         GUINT_TO_POINTER(qpn));

    return q && q->qp->type == type ? q : NULL;
}

static PvrdmaIbvQp *cm_guest_rc_qp(PvrdmaIbvCm *cm, uint32_t qpn)
{
    return cm_guest_qp(cm, qpn, PVRDMA_QPT_RC);
}

/*
 * The guest's SIDR_REP for its SIDR_REQ of @c: @status, and with
 * SIDR_OK the peer's QP number and Q_Key.
 */
static void cm_sidr_rep_guest(PvrdmaIbvCm *cm, PvrdmaCmConn *c,
                              uint8_t status, uint32_t qpn, uint32_t qkey,
                              const void *pdata, size_t len)
{
    uint8_t mad[PVRDMA_IBV_MAD_SIZE];

    cm_header(mad, CM_ATTR_SIDR_REP, c->tid);
    cm_put32(mad, SIDR_REP_ID, c->guest_id);
    mad[SIDR_REP_STATUS] = status;
    cm_put24(mad, SIDR_REP_QPN, qpn);
    cm_put64(mad, SIDR_REP_SERVICE_ID, c->service);
    cm_put32(mad, SIDR_REP_QKEY, qkey);
    if (pdata) {
        memcpy(mad + SIDR_REP_PDATA, pdata, MIN(len, SIDR_REP_PDATA_LEN));
    }
    cm_to_guest(cm, c, mad);
}

/*
 * A REJ to the guest for its REQ, or a SIDR_REP with an error for its
 * SIDR_REQ (@c may be gone after: caller frees).
 */
static void cm_reject_guest(PvrdmaIbvCm *cm, PvrdmaCmConn *c, uint16_t reason,
                            const void *pdata, size_t len)
{
    uint8_t mad[PVRDMA_IBV_MAD_SIZE];

    if (c->sidr) {
        cm_sidr_rep_guest(cm, c, reason == CM_REJ_INVALID_SERVICE ?
                          SIDR_UNSUPPORTED : reason == CM_REJ_NO_QP ?
                          SIDR_NO_QP : SIDR_REJECT, 0, 0, pdata,
                          pdata ? len : 0);
        return;
    }
    cm_header(mad, CM_ATTR_REJ, c->tid);
    cm_put32(mad, MSG_LOCAL_ID, c->my_id);
    cm_put32(mad, MSG_REMOTE_ID, c->guest_id);
    mad[REJ_MSG] = (c->active ? 0 : 1) << 6;    /* REQ / REP rejected */
    cm_put16(mad, REJ_REASON, reason);
    memcpy(mad + REJ_PDATA, pdata, MIN(len, REJ_PDATA_LEN));
    cm_to_guest(cm, c, mad);
}

/* Destroy the ids given up while one of their events was held. */
static void cm_bury(PvrdmaIbvCm *cm)
{
    struct rdma_cm_id *id;

    while (cm->doomed) {
        id = cm->doomed->data;
        cm->doomed = g_slist_delete_link(cm->doomed, cm->doomed);
        rdma_destroy_id(id);
    }
}

/* ---- the guest's messages ------------------------------------------------ */

/*
 * The addresses in RDMA CM's header of a REQ's or SIDR_REQ's private data
 * @pd (the guest's own and the peer's); false if it is not one.
 */
static bool cm_hdr_gids(const uint8_t *pd, uint8_t src[16], uint8_t dst[16])
{
    int v = pd[1] >> 4;

    if (pd[0] != 0 || (v != 4 && v != 6)) {
        return false;
    }
    if (v == 4) {
        memcpy(src, cm_v4mapped, 12);
        memcpy(src + 12, pd + 16, 4);
        memcpy(dst, cm_v4mapped, 12);
        memcpy(dst + 12, pd + 32, 4);
    } else {
        memcpy(src, pd + 4, 16);
        memcpy(dst, pd + 20, 16);
    }
    return true;
}

/*
 * Start @c's host side: an id of port space @ps resolving the peer's
 * address @dst_gid, port @port, from @src_gid (or the host's GID the
 * device was given).  On failure the guest is answered and @c freed.
 */
static void cm_host_connect(PvrdmaIbvCm *cm, PvrdmaCmConn *c,
                            enum rdma_port_space ps, uint8_t *src_gid,
                            const uint8_t *dst_gid, uint16_t port)
{
    PvrdmaIbv *ibv = cm->ibv;
    struct sockaddr_storage src, dst;

    memcpy(c->peer_gid, dst_gid, 16);
    if (ibv->gid_index >= 0) {
        /* The guest's addresses are not the host's: use the named GID. */
        union ibv_gid g;

        if (ibv_query_gid(ibv->ctx, ibv->port, ibv->gid_index, &g) == 0) {
            memcpy(src_gid, g.raw, 16);
        }
    }
    cm_gid_to_sa(src_gid, 0, &src);
    cm_gid_to_sa(dst_gid, port, &dst);
    if (rdma_create_id(cm->ch, &c->id, c, ps) ||
        rdma_resolve_addr(c->id, (struct sockaddr *)&src,
                          (struct sockaddr *)&dst, PVRDMA_CM_RESOLVE_MS)) {
        char *s = cm_gid_str(src_gid), *d = cm_gid_str(dst_gid);

        g_printerr("pvrdma: %s: the host's RDMA CM cannot connect %s to %s "
                   "for the guest: %s\n", ibv->name, s, d, strerror(errno));
        g_free(s);
        g_free(d);
        cm_reject_guest(cm, c, CM_REJ_INVALID_GID, NULL, 0);
        cm_conn_free(c, false);
    }
}

/*
 * A REQ or SIDR_REQ (request @guest_id) of the guest: true if it repeats
 * one we have (our answer, if there is one yet, goes again); else what
 * an answer needs, in @tmp.
 */
static bool cm_guest_request(PvrdmaIbvCm *cm, const uint8_t *mad,
                             const PvrdmaSendWr *wr, uint32_t guest_id,
                             PvrdmaCmConn *tmp)
{
    PvrdmaCmConn *c = cm_conn_by_guest(cm, guest_id, wr->sgid);

    if (c) {
        if (c->have_last) {
            cm_to_guest(cm, c, c->last);
        }
        return true;
    }
    memset(tmp, 0, sizeof(*tmp));
    tmp->active = true;
    tmp->guest_id = guest_id;
    tmp->tid = cm_get64(mad, 8);
    memcpy(tmp->guest_gid, wr->sgid, 16);
    memcpy(tmp->peer_gid, wr->dgid, 16);
    return false;
}

/* A new connection for the guest's request @tmp, or its rejection. */
static PvrdmaCmConn *cm_guest_conn(PvrdmaIbvCm *cm, PvrdmaCmConn *tmp,
                                   uint16_t reason)
{
    PvrdmaCmConn *c = NULL;

    if (!reason) {
        c = cm_conn_new(cm, true);
        reason = c ? 0 : CM_REJ_NO_RESOURCES;
    }
    if (reason) {
        cm_reject_guest(cm, tmp, reason, NULL, 0);
        return NULL;
    }
    c->guest_id = tmp->guest_id;
    c->tid = tmp->tid;
    c->sidr = tmp->sidr;
    c->service = tmp->service;
    memcpy(c->guest_gid, tmp->guest_gid, 16);
    return c;
}

/*
 * The guest connects: its REQ, checked, becomes a host connection that
 * starts with the resolution of the peer's address.
 */
static void cm_guest_req(PvrdmaIbvCm *cm, const uint8_t *mad,
                         const PvrdmaSendWr *wr)
{
    const uint8_t *pd = mad + REQ_PDATA;
    uint64_t service = cm_get64(mad, REQ_SERVICE_ID);
    PvrdmaCmConn tmp, *c;
    uint8_t src_gid[16], dst_gid[16];
    uint16_t reason = 0;

    if (cm_guest_request(cm, mad, wr, cm_get32(mad, REQ_LOCAL_ID), &tmp)) {
        return;
    }
    /* RDMA CM's IP port space over RC is what the host's CM can carry. */
    if ((service >> 16) != CMA_PS_TCP || !cm_hdr_gids(pd, src_gid, dst_gid)) {
        reason = CM_REJ_INVALID_SERVICE;
    } else if (((mad[REQ_TIMEOUT_TYPE_FC] >> 1) & 3) != 0) {
        reason = CM_REJ_INVALID_TRANSPORT;
    } else if (!cm_guest_rc_qp(cm, cm_get24(mad, REQ_QPN))) {
        reason = CM_REJ_NO_QP;
    }
    c = cm_guest_conn(cm, &tmp, reason);
    if (!c) {
        return;
    }
    c->guest_qpn = cm_get24(mad, REQ_QPN);
    c->param.responder_resources = mad[REQ_RESP_RES];
    c->param.initiator_depth = mad[REQ_INIT_DEPTH];
    c->param.flow_control = mad[REQ_TIMEOUT_TYPE_FC] & 1;
    c->param.retry_count = mad[REQ_TIMEOUT_RETRY] & 7;
    c->param.rnr_retry_count = mad[REQ_MTU_RNR] & 7;
    c->param.srq = (mad[REQ_CMRETRY_SRQ] >> 3) & 1;
    c->param.qp_num = c->guest_qpn;
    memcpy(c->pdata, pd + CMA_HDR_LEN, REQ_PDATA_LEN - CMA_HDR_LEN);
    c->param.private_data = c->pdata;
    c->param.private_data_len = REQ_PDATA_LEN - CMA_HDR_LEN;
    cm_host_connect(cm, c, RDMA_PS_TCP, src_gid, dst_gid, service & 0xffff);
}

/*
 * The guest resolves a UD service (RDMA CM's UDP port space): its
 * SIDR_REQ becomes a host rdma_connect() on a UDP id, answered when the
 * peer's host answers.
 */
static void cm_guest_sidr_req(PvrdmaIbvCm *cm, const uint8_t *mad,
                              const PvrdmaSendWr *wr)
{
    const uint8_t *pd = mad + SIDR_REQ_PDATA;
    uint64_t service = cm_get64(mad, SIDR_REQ_SERVICE_ID);
    PvrdmaCmConn tmp, *c;
    uint8_t src_gid[16], dst_gid[16];
    uint16_t reason = 0;

    if (cm_guest_request(cm, mad, wr, cm_get32(mad, SIDR_REQ_ID), &tmp)) {
        return;
    }
    tmp.sidr = true;
    tmp.service = service;
    if ((service >> 16) != CMA_PS_UDP || !cm_hdr_gids(pd, src_gid, dst_gid)) {
        reason = CM_REJ_INVALID_SERVICE;
    }
    c = cm_guest_conn(cm, &tmp, reason);
    if (!c) {
        return;
    }
    memcpy(c->pdata, pd + CMA_HDR_LEN, SIDR_REQ_PDATA_LEN - CMA_HDR_LEN);
    c->param.private_data = c->pdata;
    c->param.private_data_len = SIDR_REQ_PDATA_LEN - CMA_HDR_LEN;
    cm_host_connect(cm, c, RDMA_PS_UDP, src_gid, dst_gid, service & 0xffff);
}

/*
 * The guest answers a peer's SIDR_REQ: the host accepts with the guest's
 * UD QP (the host's CM announces RDMA CM's Q_Key, which the guest's uses
 * as well) or rejects.
 */
static void cm_guest_sidr_rep(PvrdmaIbvCm *cm, const uint8_t *mad)
{
    PvrdmaCmConn *c = g_hash_table_lookup(cm->conns,
                          GUINT_TO_POINTER(cm_get32(mad, SIDR_REP_ID)));
    struct rdma_conn_param p;
    uint32_t qpn = cm_get24(mad, SIDR_REP_QPN);

    if (!c || !c->sidr || c->active || c->state != PVRDMA_CM_REQ_SENT) {
        return;                 /* a repeat, or not ours to answer */
    }
    memset(&p, 0, sizeof(p));
    p.private_data = mad + SIDR_REP_PDATA;
    p.private_data_len = SIDR_REP_PDATA_LEN;
    p.qp_num = qpn;
    if (mad[SIDR_REP_STATUS] != SIDR_OK ||
        !cm_guest_qp(cm, qpn, PVRDMA_QPT_UD)) {
        rdma_reject(c->id, p.private_data, p.private_data_len);
    } else if (rdma_accept(c->id, &p)) {
        g_printerr("pvrdma: %s: the host's RDMA CM refused to answer a UD "
                   "service request for the guest: %s\n", cm->ibv->name,
                   strerror(errno));
    }
    cm_conn_free(c, false);
}

/* The guest accepts the peer's connection (passive side). */
static void cm_guest_rep(PvrdmaIbvCm *cm, PvrdmaCmConn *c, const uint8_t *mad)
{
    struct rdma_conn_param p;
    struct ibv_qp_attr attr;
    PvrdmaIbvQp *q;
    int mask;

    if (c->active || c->state != PVRDMA_CM_REQ_SENT) {
        return;                 /* a repeat, or not ours to answer */
    }
    c->guest_id = cm_get32(mad, REP_LOCAL_ID);
    c->guest_qpn = cm_get24(mad, REP_QPN);
    q = cm_guest_rc_qp(cm, c->guest_qpn);
    if (!q) {
        cm_reject_guest(cm, c, CM_REJ_NO_QP, NULL, 0);
        rdma_reject(c->id, NULL, 0);
        cm_conn_free(c, false);
        return;
    }
    memset(&p, 0, sizeof(p));
    p.private_data = mad + REP_PDATA;
    p.private_data_len = REP_PDATA_LEN;
    p.responder_resources = mad[REP_RESP_RES];
    p.initiator_depth = mad[REP_INIT_DEPTH];
    p.flow_control = mad[REP_DELAY_FO_FC] & 1;
    p.rnr_retry_count = mad[REP_RNR_SRQ] >> 5;
    p.srq = (mad[REP_RNR_SRQ] >> 4) & 1;
    p.qp_num = c->guest_qpn;
    if (rdma_accept(c->id, &p)) {
        g_printerr("pvrdma: %s: the host's RDMA CM refused to accept a "
                   "connection for the guest: %s\n", cm->ibv->name,
                   strerror(errno));
        cm_reject_guest(cm, c, CM_REJ_NO_RESOURCES, NULL, 0);
        cm_conn_free(c, false);
        return;
    }
    /*
     * The host's REP told the peer a receive PSN of the host CM's choice:
     * the guest's RTR, held until now, takes that one.
     */
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RTR;
    if (rdma_init_qp_attr(c->id, &attr, &mask) == 0) {
        q->cm_rq_psn = attr.rq_psn;
    }
    if (pvrdma_ibv_qp_release(q) < 0) {
        pvrdma_core_qp_error(cm->ibv->core, q->qp, -1);
    }
    c->state = PVRDMA_CM_ACCEPTED;
}

static void cm_guest_drep_to(PvrdmaIbvCm *cm, PvrdmaCmConn *c,
                             uint32_t my_id, uint32_t guest_id, uint64_t tid)
{
    uint8_t mad[PVRDMA_IBV_MAD_SIZE];

    cm_header(mad, CM_ATTR_DREP, tid);
    cm_put32(mad, MSG_LOCAL_ID, my_id);
    cm_put32(mad, MSG_REMOTE_ID, guest_id);
    cm_to_guest(cm, c, mad);
}

void pvrdma_ibv_cm_guest_mad(PvrdmaIbvCm *cm, const uint8_t *mad,
                             size_t len, const PvrdmaSendWr *wr)
{
    uint16_t attr;
    PvrdmaCmConn *c, tmp;

    if (len < PVRDMA_IBV_MAD_SIZE || mad[0] != 1 || mad[1] != CM_CLASS ||
        mad[2] != CM_CLASS_VERSION || mad[3] != CM_METHOD_SEND) {
        return;                 /* not a CM message we carry: lost */
    }
    attr = (uint16_t)(mad[16] << 8 | mad[17]);
    if (attr == CM_ATTR_REQ || attr == CM_ATTR_SIDR_REQ) {
        if (attr == CM_ATTR_REQ) {
            cm_guest_req(cm, mad, wr);
        } else {
            cm_guest_sidr_req(cm, mad, wr);
        }
        cm_bury(cm);            /* what its sweep gave up */
        return;
    }
    if (attr == CM_ATTR_SIDR_REP) {
        cm_guest_sidr_rep(cm, mad);
        return;
    }
    c = g_hash_table_lookup(cm->conns,
                            GUINT_TO_POINTER(cm_get32(mad, MSG_REMOTE_ID)));
    if (c && ((c->guest_id && c->guest_id != cm_get32(mad, MSG_LOCAL_ID)) ||
              c->sidr)) {
        c = NULL;     /* another connection of the guest's, or no connection */
    }
    switch (attr) {
    case CM_ATTR_REP:
        if (c) {
            cm_guest_rep(cm, c, mad);
        }
        break;
    case CM_ATTR_RTU:
        if (c && c->active && c->state == PVRDMA_CM_REP_SENT) {
            if (rdma_establish(c->id)) {
                g_printerr("pvrdma: %s: the host's RDMA CM could not "
                           "complete a connection for the guest: %s\n",
                           cm->ibv->name, strerror(errno));
            }
            c->state = PVRDMA_CM_ESTABLISHED;
        }
        break;
    case CM_ATTR_REJ:
        if (c && (c->state == PVRDMA_CM_REQ_SENT ||
                  c->state == PVRDMA_CM_REP_SENT)) {
            rdma_reject(c->id, mad + REJ_PDATA, REJ_PDATA_LEN);
            cm_conn_free(c, false);
        }
        break;
    case CM_ATTR_DREQ:
        if (c && c->state != PVRDMA_CM_CLOSING) {
            c->state = PVRDMA_CM_CLOSING;
            c->born = g_get_monotonic_time();
            if (rdma_disconnect(c->id)) {
                /* Not connected on the host: no event will follow. */
                cm_conn_free(c, false);
                c = NULL;
            }
        }
        /* Answered here, the host's CM talks to the peer. */
        memset(&tmp, 0, sizeof(tmp));
        memcpy(tmp.guest_gid, wr->sgid, 16);
        memcpy(tmp.peer_gid, wr->dgid, 16);
        cm_guest_drep_to(cm, c ? c : &tmp, cm_get32(mad, MSG_REMOTE_ID),
                         cm_get32(mad, MSG_LOCAL_ID), cm_get64(mad, 8));
        break;
    default:
        /* MRA (more time: the host's CM keeps its own), DREP, LAP. */
        break;
    }
}

/* ---- the host's events --------------------------------------------------- */

/* The peer accepted the guest's REQ: the guest's REP. */
static void cm_host_rep(PvrdmaIbvCm *cm, PvrdmaCmConn *c,
                        const struct rdma_conn_param *p)
{
    uint8_t mad[PVRDMA_IBV_MAD_SIZE];
    struct ibv_qp_attr rtr, rts;
    PvrdmaIbvQp *q = cm_guest_rc_qp(cm, c->guest_qpn);
    int mask;

    memset(&rtr, 0, sizeof(rtr));
    memset(&rts, 0, sizeof(rts));
    rtr.qp_state = IBV_QPS_RTR;
    rts.qp_state = IBV_QPS_RTS;
    if (!q || rdma_init_qp_attr(c->id, &rtr, &mask) ||
        rdma_init_qp_attr(c->id, &rts, &mask)) {
        rdma_reject(c->id, NULL, 0);
        cm_reject_guest(cm, c, CM_REJ_NO_QP, NULL, 0);
        c->dead = true;
        return;
    }
    /*
     * Linux's CM (both ends): a REQ's starting PSN is what the passive
     * side sends from, a REP's what the active side sends from.  The peer
     * sends from the host REQ's PSN, so the guest receives from it; the
     * guest sends from the peer REP's, which the REP below carries.
     */
    q->cm_rq_psn = rtr.rq_psn;
    cm_header(mad, CM_ATTR_REP, c->tid);
    cm_put32(mad, REP_LOCAL_ID, c->my_id);
    cm_put32(mad, REP_REMOTE_ID, c->guest_id);
    cm_put24(mad, REP_QPN, p->qp_num);
    cm_put24(mad, REP_PSN, rts.sq_psn);
    /* The event's counts are ours, the message's the sender's. */
    mad[REP_RESP_RES] = p->initiator_depth;
    mad[REP_INIT_DEPTH] = p->responder_resources;
    mad[REP_DELAY_FO_FC] = 15 << 3 | 2 << 1 | (p->flow_control & 1);
    mad[REP_RNR_SRQ] = (p->rnr_retry_count & 7) << 5 | (p->srq & 1) << 4;
    cm_put64(mad, REP_CA_GUID, cm->guid);
    if (p->private_data) {
        memcpy(mad + REP_PDATA, p->private_data,
               MIN(p->private_data_len, REP_PDATA_LEN));
    }
    c->state = PVRDMA_CM_REP_SENT;
    cm_to_guest(cm, c, mad);
}

/* RDMA CM's header of a message from the peer to the guest (at @pd). */
static void cm_hdr_put(uint8_t *pd, const PvrdmaCmConn *c, uint16_t peer_port)
{
    pd[1] = (memcmp(c->peer_gid, cm_v4mapped, 12) ? 6 : 4) << 4;
    cm_put16(pd, 2, peer_port);
    if (pd[1] == 4 << 4) {
        memcpy(pd + 16, c->peer_gid + 12, 4);
        memcpy(pd + 32, c->guest_gid + 12, 4);
    } else {
        memcpy(pd + 4, c->peer_gid, 16);
        memcpy(pd + 20, c->guest_gid, 16);
    }
}

/* A peer connects to the guest: the guest's REQ. */
static void cm_host_req(PvrdmaIbvCm *cm, PvrdmaCmListen *l,
                        struct rdma_cm_event *ev)
{
    const struct rdma_conn_param *p = &ev->param.conn;
    uint8_t mad[PVRDMA_IBV_MAD_SIZE], *pd = mad + REQ_PDATA;
    struct ibv_qp_attr rtr, rts;
    PvrdmaCmConn *c = NULL;
    uint16_t peer_port;
    int mask;

    memset(&rtr, 0, sizeof(rtr));
    memset(&rts, 0, sizeof(rts));
    rtr.qp_state = IBV_QPS_RTR;
    rts.qp_state = IBV_QPS_RTS;
    if (cm->ibv->gsi && rdma_init_qp_attr(ev->id, &rtr, &mask) == 0 &&
        rdma_init_qp_attr(ev->id, &rts, &mask) == 0) {
        c = cm_conn_new(cm, false);
    }
    if (!c) {
        rdma_reject(ev->id, NULL, 0);
        cm->doomed = g_slist_prepend(cm->doomed, ev->id);
        return;
    }
    c->id = ev->id;
    c->id->context = c;
    c->peer_qpn = p->qp_num;
    c->tid = ++cm->next_tid;
    cm_sa_to_gid(rdma_get_local_addr(c->id), c->guest_gid);
    peer_port = cm_sa_to_gid(rdma_get_peer_addr(c->id), c->peer_gid);
    c->state = PVRDMA_CM_REQ_SENT;

    cm_header(mad, CM_ATTR_REQ, c->tid);
    cm_put32(mad, REQ_LOCAL_ID, c->my_id);
    cm_put64(mad, REQ_SERVICE_ID, (uint64_t)CMA_PS_TCP << 16 | l->port);
    cm_put64(mad, REQ_CA_GUID, cm->guid);
    cm_put24(mad, REQ_QPN, p->qp_num);
    /* The event's counts are ours, the message's the sender's. */
    mad[REQ_RESP_RES] = p->initiator_depth;
    mad[REQ_INIT_DEPTH] = p->responder_resources;
    /* 4 s response timeouts, RC, the peer's flow control. */
    mad[REQ_TIMEOUT_TYPE_FC] = 20 << 3 | (p->flow_control & 1);
    cm_put24(mad, REQ_PSN, rts.sq_psn);     /* what the guest sends from */
    mad[REQ_TIMEOUT_RETRY] = 20 << 3 | (p->retry_count & 7);
    cm_put16(mad, REQ_PKEY, 0xffff);
    mad[REQ_MTU_RNR] = (rtr.path_mtu & 0xf) << 4 | (p->rnr_retry_count & 7);
    mad[REQ_CMRETRY_SRQ] = 15 << 4 | (p->srq & 1) << 3;
    cm_put16(mad, REQ_LOCAL_LID, 0xffff);
    cm_put16(mad, REQ_REMOTE_LID, 0xffff);
    memcpy(mad + REQ_LOCAL_GID, c->peer_gid, 16);
    memcpy(mad + REQ_REMOTE_GID, c->guest_gid, 16);
    mad[REQ_TCLASS] = rtr.ah_attr.grh.traffic_class;
    mad[REQ_HOP_LIMIT] = rtr.ah_attr.grh.hop_limit ?
                         rtr.ah_attr.grh.hop_limit : 64;
    mad[REQ_SL_LOCAL] = 1 << 3;                 /* subnet local */
    mad[REQ_ACK_TIMEOUT] = (rts.timeout ? rts.timeout : 14) << 3;
    /* RDMA CM's header, then the peer's private data. */
    cm_hdr_put(pd, c, peer_port);
    if (p->private_data) {
        memcpy(pd + CMA_HDR_LEN, p->private_data,
               MIN(p->private_data_len, REQ_PDATA_LEN - CMA_HDR_LEN));
    }
    cm_to_guest(cm, c, mad);
}

/* A peer resolves a UD service at the guest's address: its SIDR_REQ. */
static void cm_host_sidr_req(PvrdmaIbvCm *cm, PvrdmaCmListen *l,
                             struct rdma_cm_event *ev)
{
    const struct rdma_ud_param *p = &ev->param.ud;
    uint8_t mad[PVRDMA_IBV_MAD_SIZE];
    PvrdmaCmConn *c = cm->ibv->gsi ? cm_conn_new(cm, false) : NULL;
    uint16_t peer_port;

    if (!c) {
        rdma_reject(ev->id, NULL, 0);
        cm->doomed = g_slist_prepend(cm->doomed, ev->id);
        return;
    }
    c->id = ev->id;
    c->id->context = c;
    c->sidr = true;
    c->service = (uint64_t)CMA_PS_UDP << 16 | l->port;
    c->tid = ++cm->next_tid;
    cm_sa_to_gid(rdma_get_local_addr(c->id), c->guest_gid);
    peer_port = cm_sa_to_gid(rdma_get_peer_addr(c->id), c->peer_gid);
    c->state = PVRDMA_CM_REQ_SENT;

    cm_header(mad, CM_ATTR_SIDR_REQ, c->tid);
    cm_put32(mad, SIDR_REQ_ID, c->my_id);
    cm_put16(mad, SIDR_REQ_PKEY, 0xffff);
    cm_put64(mad, SIDR_REQ_SERVICE_ID, c->service);
    cm_hdr_put(mad + SIDR_REQ_PDATA, c, peer_port);
    if (p->private_data) {
        memcpy(mad + SIDR_REQ_PDATA + CMA_HDR_LEN, p->private_data,
               MIN(p->private_data_len, SIDR_REQ_PDATA_LEN - CMA_HDR_LEN));
    }
    cm_to_guest(cm, c, mad);
}

/* The peer disconnected: the guest's DREQ (its DREP needs no answer). */
static void cm_host_disconnected(PvrdmaIbvCm *cm, PvrdmaCmConn *c)
{
    uint8_t mad[PVRDMA_IBV_MAD_SIZE];

    if (c->state != PVRDMA_CM_CLOSING && c->guest_id) {
        cm_header(mad, CM_ATTR_DREQ, ++cm->next_tid);
        cm_put32(mad, MSG_LOCAL_ID, c->my_id);
        cm_put32(mad, MSG_REMOTE_ID, c->guest_id);
        cm_put24(mad, DREQ_QPN, c->guest_qpn);
        cm_to_guest(cm, c, mad);
    }
    c->dead = true;
}

static void cm_host_event(PvrdmaIbvCm *cm, struct rdma_cm_event *ev)
{
    int *kind = ev->listen_id ? ev->listen_id->context : ev->id->context;
    PvrdmaCmConn *c;

    if (!kind) {
        /* A connection we already gave up (its id waits to go). */
        if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            rdma_reject(ev->id, NULL, 0);
            cm->doomed = g_slist_prepend(cm->doomed, ev->id);
        }
        return;
    }
    if (*kind == PVRDMA_CM_LISTEN) {
        PvrdmaCmListen *l = (PvrdmaCmListen *)kind;

        if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && l->udp) {
            cm_host_sidr_req(cm, l, ev);
        } else if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
            cm_host_req(cm, l, ev);
        }
        return;
    }
    c = (PvrdmaCmConn *)kind;
    switch (ev->event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
        if (rdma_resolve_route(c->id, PVRDMA_CM_RESOLVE_MS) == 0) {
            break;
        }
        /* fall through */
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR: {
        char *d = cm_gid_str(c->peer_gid);

        g_printerr("pvrdma: %s: the host's RDMA CM could not reach %s for "
                   "the guest: %s\n", cm->ibv->name, d,
                   rdma_event_str(ev->event));
        g_free(d);
        if (c->state != PVRDMA_CM_CLOSING) {
            cm_reject_guest(cm, c, CM_REJ_INVALID_GID, NULL, 0);
        }
        c->dead = true;
        break;
    }
    case RDMA_CM_EVENT_ROUTE_RESOLVED:
        if (strcmp(ibv_get_device_name(c->id->verbs->device),
                   cm->ibv->name) != 0) {
            char *d = cm_gid_str(c->peer_gid);

            g_printerr("pvrdma: %s: the host reaches %s through RDMA device "
                       "%s, not %s: the guest cannot connect there\n",
                       cm->ibv->name, d,
                       ibv_get_device_name(c->id->verbs->device),
                       cm->ibv->name);
            g_free(d);
            cm_reject_guest(cm, c, CM_REJ_INVALID_GID, NULL, 0);
            c->dead = true;
        } else if (rdma_connect(c->id, &c->param)) {
            g_printerr("pvrdma: %s: the host's RDMA CM refused to connect "
                       "for the guest: %s\n", cm->ibv->name, strerror(errno));
            cm_reject_guest(cm, c, CM_REJ_NO_RESOURCES, NULL, 0);
            c->dead = true;
        }
        break;
    case RDMA_CM_EVENT_CONNECT_RESPONSE:
        cm_host_rep(cm, c, &ev->param.conn);
        break;
    case RDMA_CM_EVENT_REJECTED:
        if (c->state == PVRDMA_CM_RESOLVING ||
            c->state == PVRDMA_CM_ACCEPTED) {
            cm_reject_guest(cm, c, ev->status > 0 ? ev->status :
                            CM_REJ_INVALID_GID, ev->param.conn.private_data,
                            ev->param.conn.private_data_len);
        }
        c->dead = true;
        break;
    case RDMA_CM_EVENT_ESTABLISHED:
        if (c->sidr && c->active) {
            /* The peer's QP number and Q_Key: the guest's SIDR_REP. */
            cm_sidr_rep_guest(cm, c, SIDR_OK, ev->param.ud.qp_num,
                              ev->param.ud.qkey, ev->param.ud.private_data,
                              ev->param.ud.private_data_len);
            c->dead = true;
        } else if (!c->active && c->state == PVRDMA_CM_ACCEPTED) {
            uint8_t mad[PVRDMA_IBV_MAD_SIZE];

            cm_header(mad, CM_ATTR_RTU, c->tid);
            cm_put32(mad, MSG_LOCAL_ID, c->my_id);
            cm_put32(mad, MSG_REMOTE_ID, c->guest_id);
            c->state = PVRDMA_CM_ESTABLISHED;
            cm_to_guest(cm, c, mad);
        }
        break;
    case RDMA_CM_EVENT_DISCONNECTED:
        cm_host_disconnected(cm, c);
        break;
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
        cm_host_disconnected(cm, c);
        break;
    default:
        break;
    }
}

void pvrdma_ibv_cm_process(PvrdmaIbvCm *cm)
{
    struct rdma_cm_event *ev;
    PvrdmaCmConn *c;

    while (rdma_get_cm_event(cm->ch, &ev) == 0) {
        c = NULL;
        cm_host_event(cm, ev);
        if (!ev->listen_id && ev->id->context &&
            *(int *)ev->id->context == PVRDMA_CM_CONN) {
            c = ev->id->context;
        }
        rdma_ack_cm_event(ev);
        if (c && c->dead) {
            cm_conn_free(c, false);
        }
        cm_bury(cm);
    }
}

bool pvrdma_ibv_cm_claims(PvrdmaIbvCm *cm, uint32_t dest_qpn,
                          const uint8_t *dgid)
{
    GHashTableIter it;
    PvrdmaCmConn *c;

    g_hash_table_iter_init(&it, cm->conns);
    while (g_hash_table_iter_next(&it, NULL, (gpointer *)&c)) {
        if (!c->active && c->state == PVRDMA_CM_REQ_SENT &&
            c->peer_qpn == dest_qpn && !memcmp(c->peer_gid, dgid, 16)) {
            return true;
        }
    }
    return false;
}

/* ---- listening for the guest --------------------------------------------- */

static void cm_unlisten(PvrdmaIbvCm *cm, int64_t index)
{
    GSList *l = cm->listens, *next;
    PvrdmaCmListen *ln;

    for (; l; l = next) {
        next = l->next;
        ln = l->data;
        if (index < 0 || ln->gid_index == index) {
            ln->id->context = NULL;
            rdma_destroy_id(ln->id);
            g_free(ln);
            cm->listens = g_slist_delete_link(cm->listens, l);
        }
    }
}

void pvrdma_ibv_cm_gid(PvrdmaIbvCm *cm, uint32_t index, const uint8_t *gid)
{
    struct sockaddr_storage sa;
    PvrdmaCmListen *ln;
    unsigned i;

    cm_unlisten(cm, index);
    /*
     * Only at addresses the host device owns for the guest: with
     * gid-index=N the guest shares the host's address, whose ports are
     * the host's own.  Not at IPv6 link-local ones, which need an
     * interface to be named (and a guest's may well equal the host's).
     */
    if (!gid || cm->ibv->gid_index >= 0 ||
        (gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80) ||
        pvrdma_ibv_host_gid(cm->ibv, gid, true) < 0) {
        return;
    }
    for (i = 0; i < 2 * cm->nports; i++) {
        ln = g_new0(PvrdmaCmListen, 1);
        ln->kind = PVRDMA_CM_LISTEN;
        ln->gid_index = index;
        ln->port = cm->ports[i / 2];
        ln->udp = i & 1;
        cm_gid_to_sa(gid, ln->port, &sa);
        if (rdma_create_id(cm->ch, &ln->id, ln,
                           ln->udp ? RDMA_PS_UDP : RDMA_PS_TCP) ||
            rdma_bind_addr(ln->id, (struct sockaddr *)&sa) ||
            rdma_listen(ln->id, 64)) {
            char *a = cm_gid_str(gid);

            g_printerr("pvrdma: %s: cannot listen at %s %s port %u for the "
                       "guest (%s): peers cannot connect to the guest there%s"
                       "\n", cm->ibv->name, a, ln->udp ? "UDP" : "TCP",
                       ln->port, strerror(errno),
                       errno == EADDRINUSE ? "; a host program listens on "
                       "that RDMA CM port for every address: bind it to the "
                       "host's own address, or leave the port out of "
                       "cm-ports=" : "");
            g_free(a);
            if (ln->id) {
                rdma_destroy_id(ln->id);
            }
            g_free(ln);
            continue;
        }
        cm->listens = g_slist_prepend(cm->listens, ln);
    }
}

/* ---- life ---------------------------------------------------------------- */

void pvrdma_ibv_cm_recv_posted(PvrdmaIbvCm *cm)
{
    cm_flush(cm);
}

void pvrdma_ibv_cm_reset(PvrdmaIbvCm *cm)
{
    GHashTableIter it;
    PvrdmaCmConn *c;

    g_hash_table_iter_init(&it, cm->conns);
    while (g_hash_table_iter_next(&it, NULL, (gpointer *)&c)) {
        g_hash_table_iter_steal(&it);
        if (c->id) {
            c->id->context = NULL;
            rdma_destroy_id(c->id);
        }
        g_free(c);
    }
    cm_unlisten(cm, -1);
    cm_bury(cm);
    g_queue_clear_full(&cm->pending, g_free);
}

static bool cm_parse_ports(PvrdmaIbvCm *cm, const char *ports, char **msg)
{
    char **v = g_strsplit(ports, ":", -1);
    guint64 p;
    unsigned i;

    for (i = 0; v[i]; i++) {
        if (!g_ascii_string_to_unsigned(v[i], 10, 1, 65535, &p, NULL) ||
            cm->nports == PVRDMA_CM_MAX_PORTS) {
            *msg = g_strdup_printf("pvrdma: cm-ports=%s: give up to %u "
                                   "port numbers separated by ':' "
                                   "(cm-ports=7174:4420), or cm-ports=none",
                                   ports, PVRDMA_CM_MAX_PORTS);
            g_strfreev(v);
            return false;
        }
        cm->ports[cm->nports++] = p;
    }
    g_strfreev(v);
    return true;
}

bool pvrdma_ibv_cm_ports_ok(const char *ports, char **msg)
{
    PvrdmaIbvCm tmp;

    memset(&tmp, 0, sizeof(tmp));
    return !ports || !strcmp(ports, "none") ||
           cm_parse_ports(&tmp, ports, msg);
}

PvrdmaIbvCm *pvrdma_ibv_cm_new(PvrdmaIbv *ibv, const char *ports, char **msg)
{
    PvrdmaIbvCm *cm = g_new0(PvrdmaIbvCm, 1);
    int flags;

    cm->ibv = ibv;
    if (!cm_parse_ports(cm, ports ? ports : PVRDMA_CM_DEFAULT_PORTS, msg)) {
        g_free(cm);
        return NULL;
    }
    cm->ch = rdma_create_event_channel();
    if (!cm->ch) {
        *msg = g_strdup_printf("pvrdma: %s: no RDMA CM on this host (%s): "
                               "guest programs that connect with RDMA CM "
                               "(rping, NVMe-oF, perftest -R) will not "
                               "connect; load it with modprobe rdma_ucm",
                               ibv->name, strerror(errno));
        g_free(cm);
        return NULL;
    }
    flags = fcntl(cm->ch->fd, F_GETFL);
    fcntl(cm->ch->fd, F_SETFL, flags | O_NONBLOCK);
    cm->conns = g_hash_table_new(NULL, NULL);
    g_queue_init(&cm->pending);
    cm->guid = (uint64_t)g_random_int() << 32 | g_random_int();
    cm->next_id = g_random_int();
    cm->next_tid = (uint64_t)g_random_int() << 16;
    return cm;
}

void pvrdma_ibv_cm_free(PvrdmaIbvCm *cm)
{
    if (!cm) {
        return;
    }
    pvrdma_ibv_cm_reset(cm);
    g_hash_table_destroy(cm->conns);
    rdma_destroy_event_channel(cm->ch);
    g_free(cm);
}

int pvrdma_ibv_cm_fd(PvrdmaIbvCm *cm)
{
    return cm->ch->fd;
}
