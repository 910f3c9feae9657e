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
 *    (DGID, QPN); links to other processes and hosts (pvrdma_link.c,
 *    pvrdma_fabric_net.c), which the requester uses when no local port
 *    owns the destination (docs/fabric.md).
 * pvrdma_fabric_port.c is the PvrdmaBackendOps of one device's port.
 *
 * A message carries no pointer into another device's state beyond its
 * payload: a fixed header (PvrdmaFabricMsg) plus, in-process, the
 * requester's resolved SGL (PvrdmaFabricPayload), which the responder
 * copies to or from its own SGL piece by piece, each side through its
 * own core (zero staging).  A link across processes feeds the responder
 * the payload chunk by chunk from its receive buffer instead
 * (pvrdma_fabric_rc_data()).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_PVRDMA_FABRIC_H
#define HW_PVRDMA_FABRIC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <glib.h>

#include "pvrdma_core_int.h"

/* Port indexes live in bits 16..23 of wire QPNs. */
#define PVRDMA_FABRIC_MAX_PORTS         256
#define PVRDMA_FABRIC_QPN_INDEX_SHIFT   16
#define PVRDMA_FABRIC_QPN_HANDLE_MASK   0xFFFFu
/* GID table entries of one port (gid-tbl-len is at most 256). */
#define PVRDMA_FABRIC_MAX_GIDS          256

typedef struct PvrdmaFabric PvrdmaFabric;
typedef struct PvrdmaFabricPort PvrdmaFabricPort;
typedef struct PvrdmaLink PvrdmaLink;

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
    bool uc;                    /* from a UC QP: SEND or WRITE only */
    /* From an XRC_INI QP, to the responder's XRC SRQ @xrc_srqn. */
    bool xrc;
    uint32_t xrc_srqn;
    /* A datagram (UD or GSI SEND): no connection, no NAK. */
    bool ud;
    uint32_t qkey;
    uint32_t flow_label;
    uint8_t tclass;
    uint8_t hop_limit;
    /*
     * The requester QP's generation (links only): it moves on whenever
     * that QP's outstanding requests are dropped (an RNR NAK, an error,
     * a cancel), so a responder that NAKed one request of generation g
     * drops the later ones of g still in flight and takes the next g+1.
     */
    uint32_t gen;
    /*
     * Links only (0 in one process): the requester port's life, and the
     * life of the responder's port the requester QP last heard from
     * (0: none yet).
     */
    uint64_t src_life;
    uint64_t dst_life;
} PvrdmaFabricMsg;

/* Does @opcode carry its payload to the responder (SENDs, WRITEs)? */
static inline bool pvrdma_fabric_op_has_payload(uint32_t opcode)
{
    switch (opcode) {
    case PVRDMA_WR_SEND:
    case PVRDMA_WR_SEND_WITH_IMM:
    case PVRDMA_WR_SEND_WITH_INV:
    case PVRDMA_WR_RDMA_WRITE:
    case PVRDMA_WR_RDMA_WRITE_WITH_IMM:
        return true;
    default:
        return false;
    }
}

/* Is @opcode a READ or an atomic (counted against max_rd_atomic)? */
static inline bool pvrdma_fabric_op_reads(uint32_t opcode)
{
    return opcode == PVRDMA_WR_RDMA_READ ||
           opcode == PVRDMA_WR_ATOMIC_CMP_AND_SWP ||
           opcode == PVRDMA_WR_ATOMIC_FETCH_AND_ADD;
}

/* The responder's answer: an ACK, a NAK with a status, or an RNR NAK. */
typedef struct PvrdmaFabricAck {
    bool rnr;                   /* RNR NAK: retry after rnr_timer */
    uint8_t rnr_timer;          /* responder's min_rnr_timer encoding */
    uint32_t status;            /* PVRDMA_WC_* for the requester */
    uint64_t atomic_orig;       /* host order */
    /*
     * Links only: the responder's life (0: no QP took the request), and
     * whether the connection is lost (its two ends are from lives that
     * parted: the requester's QP goes to ERR with QP_FATAL).
     */
    uint64_t life;
    bool lost;
} PvrdmaFabricAck;

/*
 * The data of an in-process request: the requester's SGL (its own core's
 * guest memory), the source of a SEND/WRITE payload and the destination
 * of a READ response (pvrdma_sgl_copy()).
 */
typedef struct PvrdmaFabricPayload {
    const PvrdmaSgl *sgl;
} PvrdmaFabricPayload;

/*
 * A request executed by a responder in steps (a link delivers its payload
 * chunk by chunk): pvrdma_fabric_rc_begin(), pvrdma_fabric_rc_data() per
 * chunk, pvrdma_fabric_rc_end().  Between steps the guest may change the
 * QP, the receive queue or the MRs: the port aborts the exec when it
 * learns of it (pvrdma_fabric_rc_abort()) and every step re-checks.
 */
typedef struct PvrdmaFabricExec {
    PvrdmaFabricPort *port;
    PvrdmaQp *qp;               /* NULL once aborted */
    PvrdmaFabricMsg msg;
    bool async;                 /* spans several calls: re-check state */
    bool recv;                  /* holds the head receive WQE (rwr) */
    PvrdmaRecvWr rwr;
    PvrdmaSgl sgl;              /* WRITE target, READ source */
    PvrdmaSgl *mem;             /* the payload's memory: rwr.sgl or sgl */
    uint64_t mem_off;           /* where in mem the payload goes (GRH) */
    bool done;                  /* ack is final; later data is dropped */
    PvrdmaFabricAck ack;
    GList node;                 /* on port->execs while async */
} PvrdmaFabricExec;

/*
 * What the fabric needs from its host (the QEMU glue, or a test's poll
 * loop); every callback runs under the caller's lock.
 */
typedef struct PvrdmaFabricHost {
    /*
     * Watch @fd for reading and, with @write, writing; call
     * pvrdma_fabric_fd_ready(fab, @tag, ...) when it is ready.  Called
     * again to change @write; unwatch before the fd is closed.
     */
    void (*watch)(void *opaque, int fd, bool write, void *tag);
    void (*unwatch)(void *opaque, int fd);
    /* One timer: pvrdma_fabric_timer_expired() at @expire_ns (<0: off). */
    void (*timer_mod)(void *opaque, int64_t expire_ns);
    /* Monotonic host clock (real time: peers live outside the guest). */
    int64_t (*clock_ns)(void *opaque);
    /* A line for the user: a link came up or went down, and why. */
    void (*report)(void *opaque, const char *msg);
    /*
     * TLS on TCP links (fabric-tls-creds); all NULL: plain TCP.  Links
     * over a directory's sockets never use it.
     *
     * tls_new makes a session over @fd: the server end on a link we
     * accepted, the client end on one we made to @host (the address the
     * peer's certificate must name).  NULL with *errmsg if it cannot.
     */
    void *(*tls_new)(void *opaque, int fd, bool server, const char *host,
                     char **errmsg);
    /*
     * Go on with @sess's handshake: 1 when it is done and the peer's
     * credentials are accepted; 0 when it waits for the socket (*write:
     * to be writable, else readable); -1 when it failed, -2 when it was
     * done but the peer's credentials are refused, with *errmsg (whole,
     * with what to fix, for -2).
     */
    int (*tls_handshake)(void *sess, bool *write, char **errmsg);
    /*
     * Like recv() and send() with MSG_DONTWAIT once the handshake is
     * done: bytes moved, 0 at the peer's end (recv), or -1 with errno
     * EAGAIN when the socket must be waited for, or -1 with *errmsg.
     */
    ssize_t (*tls_recv)(void *sess, void *buf, size_t len, char **errmsg);
    ssize_t (*tls_send)(void *sess, const void *buf, size_t len,
                        char **errmsg);
    void (*tls_free)(void *sess);
    void *opaque;
} PvrdmaFabricHost;

/* ---- the fabric and its links (pvrdma_fabric.c) -------------------------- */

struct PvrdmaFabricPort {
    PvrdmaFabric *fabric;
    PvrdmaCore *core;
    int index;                  /* registry slot = QPN bits 16..23 */
    /* The GIDs the guest bound, as announced to links (gid_bind). */
    bool gid_bound[PVRDMA_FABRIC_MAX_GIDS];
    uint8_t gid[PVRDMA_FABRIC_MAX_GIDS][16];
    /* Requests from links executing on this port in steps. */
    GQueue execs;
    /*
     * Migration (pvrdma_fabric_move.c): a secret only the device state
     * carries; peers get a commitment to it with our GIDs, and the
     * destination proves with it that it is where those GIDs went.
     */
    uint8_t token[32];
    /*
     * Its life and the earlier ones, newest first (PvrdmaMoveState): a
     * new one each time it runs from a saved state.  @saved: the state
     * was saved since the guest stopped (move_back then starts a life).
     */
    uint64_t life;
    uint32_t nancestors;
    uint64_t ancestors[PVRDMA_MOVE_LINEAGE];
    bool saved;
    uint64_t work;              /* execs begun and answers taken in */
    bool moving;                /* quiesced: stopped for a save */
    bool claiming;              /* loaded: announces with claim_token */
    uint8_t claim_token[32];
};

/* ---- migration (pvrdma_fabric_move.c) ----------------------------------- */

/* A fresh secret token (getrandom). */
void pvrdma_fabric_new_token(uint8_t token[32]);
/* The guest stopped for a save: quiesce @port (PvrdmaBackendOps.move_out). */
bool pvrdma_fabric_move_out(PvrdmaFabricPort *port, int64_t timeout_ns,
                            char **errmsg);
/* The guest runs on at the source: announce again, with a new token. */
void pvrdma_fabric_move_back(PvrdmaFabricPort *port);
/* The state is saved: what it carries for @port. */
void pvrdma_fabric_move_save(PvrdmaFabricPort *port, PvrdmaMoveState *ms);
/*
 * The guest runs at the destination: a new life after @ms's, and a claim
 * of the GIDs with its token (@ms NULL: a state without one).
 */
void pvrdma_fabric_move_in(PvrdmaFabricPort *port, const PvrdmaMoveState *ms);
/* A fresh life for @port, after its current one (which may be 0: none). */
void pvrdma_fabric_new_life(PvrdmaFabricPort *port);
/* Is @life @port's or one of its earlier ones? */
bool pvrdma_fabric_life_mine(const PvrdmaFabricPort *port, uint64_t life);
void pvrdma_fabric_move_free(PvrdmaFabric *fab);

/* A fabric with no ports; reference counted (each port holds one). */
PvrdmaFabric *pvrdma_fabric_new(void);
PvrdmaFabric *pvrdma_fabric_ref(PvrdmaFabric *fab);
void pvrdma_fabric_unref(PvrdmaFabric *fab);
/* Does nothing but its maker hold @fab (no port, nothing in flight)? */
bool pvrdma_fabric_unused(const PvrdmaFabric *fab);

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
 * Carry @msg and @payload to @qp of @port (pvrdma_fabric_lookup() of its
 * dgid, dst_qpn) and fill @ack.  No such port (NULL): the message is
 * dropped and the requester sees RETRY_EXC_ERR (the retries of a real
 * fabric are not simulated).
 */
void pvrdma_fabric_deliver(PvrdmaFabricPort *port, PvrdmaQp *qp,
                           const PvrdmaFabricMsg *msg,
                           const PvrdmaFabricPayload *payload,
                           PvrdmaFabricAck *ack);

/*
 * Receives were posted on the QP (@gid, @qpn) connected to (@dgid,
 * @dqpn): if that requester waits on an RNR NAK, retry it now.
 */
void pvrdma_fabric_recv_posted(PvrdmaFabric *fab, const uint8_t gid[16],
                               uint32_t qpn, const uint8_t dgid[16],
                               uint32_t dqpn);

/* ---- links to other processes and hosts (pvrdma_fabric_net.c) ----------- */

/*
 * How often the timer looks at the frame rings while frames stream in
 * without a guest polling: the most a frame then waits to be taken in.
 */
#define PVRDMA_FABRIC_LINGER_NS     (20 * 1000LL)

/* Give @fab a host; needed before any link, listener or peer. */
void pvrdma_fabric_set_host(PvrdmaFabric *fab, const PvrdmaFabricHost *host);
/*
 * Join the fabric of every process using directory @dir: listen on a
 * socket of our own there and connect to the others'.  Links through it
 * carry bulk data in shared memory.  False with *@errmsg on failure.
 */
bool pvrdma_fabric_join_dir(PvrdmaFabric *fab, const char *dir,
                            char **errmsg);
/* Accept TCP links on @addr ("HOST:PORT"). */
bool pvrdma_fabric_listen(PvrdmaFabric *fab, const char *addr, char **errmsg);
/* Keep a TCP link to @addr ("HOST:PORT"), reconnecting while it is down. */
bool pvrdma_fabric_add_peer(PvrdmaFabric *fab, const char *addr,
                            char **errmsg);
/*
 * Make a link over a connected stream socket @fd (owned from now on):
 * with @shm the bulk data travels in shared memory (a unix socket, both
 * ends on one host), else inline in the stream.
 */
PvrdmaLink *pvrdma_fabric_add_link(PvrdmaFabric *fab, int fd, bool shm,
                                   const char *name);
/*
 * The same for a TCP link (inline data), over TLS when the host has it:
 * @tls_host NULL for a link we accepted (the TLS server end), else the
 * address we connected to (the client end checks the peer by it).
 */
PvrdmaLink *pvrdma_fabric_add_tcp_link(PvrdmaFabric *fab, int fd,
                                       const char *name,
                                       const char *tls_host);
/* Host callbacks. */
void pvrdma_fabric_fd_ready(PvrdmaFabric *fab, void *tag, bool readable,
                            bool writable);
void pvrdma_fabric_timer_expired(PvrdmaFabric *fab);
/*
 * Who else may join through fabric-path besides processes of our own uid
 * (the uid the process at the other end of a directory socket had when
 * it made its socket, SO_PEERCRED): @uids and @gids are lists of user and
 * group names or numbers separated by ':' (NULL or "": none); a process
 * with one of those groups, primary or supplementary, may join.  Call
 * before pvrdma_fabric_join_dir().  False with @errmsg if a name is not
 * known or a list is too long (at most 64 each).
 */
bool pvrdma_fabric_allow(PvrdmaFabric *fab, const char *uids,
                         const char *gids, char **errmsg);
/* Tests: the uid taken as ours (default: the effective uid). */
void pvrdma_fabric_set_own_uid(PvrdmaFabric *fab, uint32_t uid);
/* Links that are up (HELLO exchanged), for tests and status. */
unsigned pvrdma_fabric_links_up(PvrdmaFabric *fab);
/* Links that went down after they were up, since the fabric began. */
uint64_t pvrdma_fabric_links_downed(PvrdmaFabric *fab);

/*
 * What the fabric turned away or kept quiet about since it began (the
 * stats property and `info pvrdma`; docs/fabric.md, "Counters").
 */
typedef struct PvrdmaFabricCounters {
    uint64_t messages_suppressed;       /* over PVRDMA_SAY_BURST a second */
    uint64_t half_open_closed;  /* accepted, closed for newer ones */
    uint64_t hello_timeouts;    /* closed without the peer's HELLO */
    uint64_t refused_cred;      /* fabric-path links of another user */
    uint64_t unowned_dropped;   /* frames from GIDs the sender does not own */
    uint64_t gids_refused;      /* GIDs announced while another held them */
    uint64_t refused_tls;       /* TCP links whose TLS did not agree */
} PvrdmaFabricCounters;
void pvrdma_fabric_counters(PvrdmaFabric *fab, PvrdmaFabricCounters *c);

/*
 * A link as the device's stats show it (the stats property and `info
 * pvrdma`; docs/fabric.md, "Counters").  Counters start at 0 when the
 * link is made and are not migrated.
 */
typedef struct PvrdmaLinkStats {
    char name[96];
    bool shm;                   /* a process of this host: shared rings */
    bool tls;                   /* TCP with fabric-tls-creds */
    bool up;                    /* HELLO exchanged, not closed */
    uint64_t frames_out, frames_in;
    /* frame headers and bodies, and on shm links ring payload */
    uint64_t bytes_out, bytes_in;
    uint64_t kicks_out, kicks_in;       /* shm links: wakeups */
    uint32_t requests_out;      /* our requests not answered yet */
    uint32_t streams_out;       /* payload streams waiting to be sent */
    /* shm links: bytes of host memory our outgoing rings hold now */
    uint64_t ring_bytes;
    uint64_t shrinks;           /* times an idle link gave them back */
} PvrdmaLinkStats;

/* The fabric's live links into @st (at most @max); returns how many live. */
unsigned pvrdma_fabric_link_stats(PvrdmaFabric *fab, PvrdmaLinkStats *st,
                                  unsigned max);

/* Might a requester on @fab wait on an RNR NAK? */
bool pvrdma_fabric_rnr_any(PvrdmaFabric *fab);
/* One more (@waiting) or one fewer requester stalled on an RNR NAK. */
void pvrdma_fabric_rnr_note(PvrdmaFabric *fab, bool waiting);

/* ---- the port backend (pvrdma_fabric_port.c) ----------------------------- */

typedef struct PvrdmaFabricReq PvrdmaFabricReq;

/* Per-QP state of the port (qp->be). */
typedef struct PvrdmaFabricQp {
    bool rnr;                   /* counted in the fabric's rnr_waiting */
    uint64_t rnr_link;          /* serial of a link we RNR-NAKed, or 0 */
    /* Requester: requests outstanding on links, oldest first. */
    GQueue reqs;
    unsigned nrd;               /* of them READs and atomics */
    uint32_t gen;               /* PvrdmaFabricMsg.gen of the next ones */
    int64_t gen_at;             /* the tick that last moved gen (retries) */
    bool delivering;            /* completing answered requests in order */
    /* Responder: after a NAK of generation drop_gen, its later ones. */
    bool dropping;
    uint32_t drop_gen;
} PvrdmaFabricQp;

/*
 * Requests a QP may have outstanding on links: its send queue's depth, at
 * most this (the core's window, PVRDMA_MAX_OUTSTANDING).
 */
#define PVRDMA_FABRIC_WINDOW            PVRDMA_MAX_OUTSTANDING

extern const PvrdmaBackendOps pvrdma_fabric_backend_ops;
/* The port index of a core on the fabric backend, for tests. */
int pvrdma_fabric_port_index(void *be);

/* ---- RC verbs (pvrdma_fabric_rc.c) --------------------------------------- */

/* The message that carries @wr (its fields, the GIDs). */
void pvrdma_fabric_msg_init(PvrdmaFabricMsg *msg, const PvrdmaSendWr *wr);
/*
 * Requester: carry @wr of @qp over the fabric, report the result.
 * Returns 1 if the answer was an RNR NAK (a port of this process answers
 * at once), 0, or -EAGAIN if @wr must wait until the requests of @qp
 * outstanding on a link complete (a destination in this process, or an
 * order the link cannot keep otherwise).
 */
int pvrdma_fabric_rc_submit(PvrdmaFabricPort *port, PvrdmaQp *qp,
                            PvrdmaSendWr *wr);
/*
 * An exec made empty, but for its segment arrays (which only their nseg
 * first entries are read of): cheaper than zeroing 3 KiB per request.
 */
void pvrdma_fabric_exec_clear(PvrdmaFabricExec *ex);
/* Responder in steps (PvrdmaFabricExec); begin: true if payload moves. */
bool pvrdma_fabric_rc_begin(PvrdmaFabricPort *port, PvrdmaQp *qp,
                            const PvrdmaFabricMsg *msg, PvrdmaFabricExec *ex);
/* Does the payload of @msg travel back to the requester (READ)? */
bool pvrdma_fabric_rc_out(const PvrdmaFabricMsg *msg);
/* Move bytes [off, off + n) of the payload; a PVRDMA_COPY_* status. */
int pvrdma_fabric_rc_data(PvrdmaFabricExec *ex, uint64_t off, uint64_t n,
                          PvrdmaPeerCopy peer, void *opaque);
/* All bytes moved: complete the receive side, set ex->ack. */
void pvrdma_fabric_rc_end(PvrdmaFabricExec *ex);
/* The QP or memory went away: drop it (RETRY_EXC_ERR when it ends). */
void pvrdma_fabric_rc_abort(PvrdmaFabricExec *ex);
/* Does an async exec of @port hold the head of @qp's RQ or SRQ? */
bool pvrdma_fabric_port_rq_busy(PvrdmaFabricPort *port, PvrdmaQp *qp);

/* A PvrdmaPeerCopy that reads bytes from the flat buffer @opaque. */
int pvrdma_fabric_buf_read(void *opaque, uint64_t off, void *buf,
                           uint64_t n);

/* Responder: execute @msg on @qp of @port's core. */
void pvrdma_fabric_rc_respond(PvrdmaFabricPort *port, PvrdmaQp *qp,
                              const PvrdmaFabricMsg *msg,
                              const PvrdmaFabricPayload *payload,
                              PvrdmaFabricAck *ack);

#endif /* HW_PVRDMA_FABRIC_H */
