/*
 * PVRDMA software fabric: links between fabric objects of different
 * processes or hosts (docs/fabric.md has the wire format).
 *
 * Internal to the fabric (pvrdma_fabric*.c); the QEMU glue never sees a
 * link, only the fabric's host callbacks.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_PVRDMA_LINK_H
#define HW_PVRDMA_LINK_H

#include "pvrdma_fabric.h"

/* ---- wire format (little endian) ----------------------------------------- */

#define PVRDMA_LINK_MAGIC           0x46525650u /* "PVRF" */
#define PVRDMA_LINK_VERSION         8
#define PVRDMA_LINK_HDR_SIZE        16

enum {
    PVRDMA_LINK_HELLO = 1,      /* instance, ring size (+ memfd) */
    PVRDMA_LINK_GIDS = 2,       /* a port's bound GIDs (replaces) */
    PVRDMA_LINK_REQ = 3,        /* a request; SEND/WRITE payload follows */
    PVRDMA_LINK_RESP = 4,       /* READ response payload follows */
    PVRDMA_LINK_DATA = 5,       /* payload bytes of the open stream */
    PVRDMA_LINK_ACK = 6,        /* the answer to request @id */
    PVRDMA_LINK_CREDIT = 7,     /* shared-ring bytes consumed */
    PVRDMA_LINK_RECV_POSTED = 8, /* retry an RNR-NAKed requester now */
    PVRDMA_LINK_QUIESCE = 9,    /* a port moves: hold requests to it */
    PVRDMA_LINK_QUIESCED = 10,  /* none of ours are out to that port */
    PVRDMA_LINK_PEERS = 11,     /* TCP addresses of fabric members */
    PVRDMA_LINK_MGIDS = 12,     /* a port's multicast groups (replaces) */
    PVRDMA_LINK_MCAST = 13,     /* a datagram to a multicast group */
    PVRDMA_LINK_TYPE_MAX = 13,
};

/* DATA flags */
#define PVRDMA_LINK_DATA_ABORT      1u  /* the stream ends here, unfinished */

#define PVRDMA_LINK_HELLO_SIZE      24
/* The first byte of a TLS handshake record (a peer that speaks TLS). */
#define PVRDMA_LINK_TLS_HANDSHAKE   0x16
#define PVRDMA_LINK_GIDS_MIN        208 /* + 16 per GID */
#define PVRDMA_LINK_GIDS_CLAIM      1u  /* GIDS flag: taken over by proof */
#define PVRDMA_LINK_REQ_SIZE        128
#define PVRDMA_LINK_RESP_SIZE       8
#define PVRDMA_LINK_SHM_DATA_SIZE   4   /* byte count in the ring */
#define PVRDMA_LINK_ACK_SIZE        24
#define PVRDMA_LINK_ACK_LOST        1u  /* ACK flag: the connection is lost */
#define PVRDMA_LINK_CREDIT_SIZE     4
#define PVRDMA_LINK_RECV_POSTED_SIZE 40
#define PVRDMA_LINK_QUIESCE_SIZE    4
#define PVRDMA_LINK_PEERS_MIN       8   /* + 32 per member */
#define PVRDMA_LINK_PEER_SIZE       32
#define PVRDMA_LINK_MAX_PEERS       64  /* members in one PEERS */
#define PVRDMA_LINK_MGIDS_MIN       8   /* + 16 per group */
/*
 * Datagrams to a group are not sent on a link with this much of our
 * output still unsent: they are lost, as on a congested network.
 */
#define PVRDMA_LINK_MCAST_BACKLOG   (1u << 20)

/* Bounds every peer is held to. */
#define PVRDMA_LINK_MAX_INLINE      (64u << 10)  /* DATA body on a stream */
#ifndef PVRDMA_LINK_RING_SIZE                   /* tests use small ones */
#define PVRDMA_LINK_RING_SIZE       (4u << 20)   /* shared ring, each way */
#define PVRDMA_LINK_SHM_CHUNK       (1u << 20)   /* ring bytes per DATA */
#endif
/*
 * What we put in the ring per DATA frame, and how much of the peer's ring
 * we take in before crediting it back without waiting for the end of a
 * batch: the two copies (into the ring, out of it) then overlap on the
 * two processes' cores instead of taking turns over the whole ring.
 */
#define PVRDMA_LINK_SHM_STEP        PVRDMA_LINK_SHM_CHUNK
#define PVRDMA_LINK_MAX_QUEUED      4096         /* streams waiting to send */
/*
 * A DATA of a request moving this many ring bytes or more counts as one
 * more request of a stream (PvrdmaFabric.sends_in): one large WRITE per
 * wakeup is a stream too, and lingers.
 */
#define PVRDMA_LINK_STREAM_PIECE    (64u << 10)
/*
 * A shm link's memfd, one per direction, written by one side: the data
 * ring, then a ring of frames (everything after HELLO travels there, not
 * through the socket), then one page of counters (PvrdmaLinkShared).
 */
#ifndef PVRDMA_LINK_FRAME_RING                  /* tests use a small one */
#define PVRDMA_LINK_FRAME_RING      (256u << 10)
#endif
#define PVRDMA_LINK_RING_TAIL       4096
/* A shm link quiet this long gives its rings' pages back to the host. */
#ifndef PVRDMA_LINK_SHRINK_NS
#define PVRDMA_LINK_SHRINK_NS       (1000 * 1000 * 1000LL)
#endif
#define PVRDMA_LINK_RING_MAP        (PVRDMA_LINK_RING_SIZE + \
                                     PVRDMA_LINK_FRAME_RING + \
                                     PVRDMA_LINK_RING_TAIL)
/*
 * How long a guest's poll of an empty CQ promises to look again, at most:
 * the promise ends sooner when that CQ gets a CQE or is armed.
 */
#define PVRDMA_LINK_POLL_WINDOW_NS  (1000 * 1000LL)
/* CQs whose pollers a process's promise counts on (the latest ones). */
#define PVRDMA_FABRIC_POLLED_CQS    8

/*
 * How long requests to a moving port wait for it to come back or show up
 * at its destination (the switchover of a migration), at most.
 */
#define PVRDMA_FABRIC_HOLD_NS       (10 * 1000 * 1000 * 1000LL)

/*
 * A peer that never sends its HELLO (or only part of it) is closed after
 * this long; and at most PVRDMA_FABRIC_MAX_HALF_OPEN links accepted by
 * our listeners wait for theirs at once: a newer connection closes the
 * oldest of them (an honest peer sends its HELLO as it connects, so only
 * a slow or silent one waits long enough to be the oldest).
 */
#define PVRDMA_LINK_HELLO_NS        (10 * 1000 * 1000 * 1000LL)
#define PVRDMA_LINK_REFUSAL_SAY_NS  (60 * 1000 * 1000 * 1000LL)
#define PVRDMA_LINK_REFUSALS        4
#define PVRDMA_FABRIC_MAX_HALF_OPEN 64

/* What a message to people is about: each is rate-limited on its own. */
typedef enum PvrdmaSay {
    PVRDMA_SAY_LINK_UP,
    PVRDMA_SAY_LINK_DOWN,
    PVRDMA_SAY_UNREACHABLE,     /* a fabric-peer or told member */
    PVRDMA_SAY_HOST,            /* a host resource failed us */
    PVRDMA_SAY_REFUSED,         /* a process of another user */
    PVRDMA_SAY_GID,             /* a GID another device holds */
    PVRDMA_SAY__MAX
} PvrdmaSay;
#define PVRDMA_SAY_BURST            10
#define PVRDMA_SAY_WINDOW_NS        (1000 * 1000 * 1000LL)

/*
 * Where a fabric member accepts TCP links (PEERS): an IPv6 address (IPv4
 * as ::ffff:a.b.c.d), all zeros for "the host of whoever told us".
 */
typedef struct PvrdmaNetAddr {
    uint8_t ip[16];
    uint16_t port;              /* 0: not known */
} PvrdmaNetAddr;

/* The GIDs a remote port announced. */
typedef struct PvrdmaLinkRPort {
    uint64_t order;             /* seniority: the oldest announcer owns */
    bool held;                  /* moving (QUIESCE): requests wait */
    int64_t held_since;
    uint8_t commit[32];         /* what a proof of its move must hash to */
    uint64_t life;              /* PvrdmaMoveState, as announced */
    uint32_t nancestors;
    uint64_t ancestors[PVRDMA_MOVE_LINEAGE];
    uint32_t n;
    uint8_t gid[][16];
} PvrdmaLinkRPort;

/* Is @gid among @rp's (NULL: none)? */
bool pvrdma_link_rport_has(const PvrdmaLinkRPort *rp, const uint8_t gid[16]);

/* ---- the fabric object (shared by pvrdma_fabric*.c and the links) ------- */

/* What a host tag points at: its first field says (pvrdma_fabric_fd_ready). */
enum {
    PVRDMA_FABRIC_FD_LINK = 0x4c4e4b31,
    PVRDMA_FABRIC_FD_ENDPOINT = 0x45505431,
};

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

    /*
     * Messages to people (PvrdmaSay): each cause at most PVRDMA_SAY_BURST
     * in a window of PVRDMA_SAY_WINDOW_NS, the rest counted.
     */
    struct {
        int64_t start;          /* of the window */
        unsigned count;         /* shown in it; 0: no window open */
        unsigned suppressed;    /* not shown in it */
    } say[PVRDMA_SAY__MAX];
    uint64_t said_suppressed;   /* messages not shown, ever */
    uint64_t half_open_closed;  /* accepted links closed for newer ones */
    uint64_t hello_timeouts;    /* links closed without the peer's HELLO */
    /*
     * Who may join through fabric-path (SO_PEERCRED of the process at the
     * other end): our own uid, or one of these uids or groups.
     */
    uint32_t own_uid;
    GArray *allow_uid;          /* uint32_t; NULL: none */
    GArray *allow_gid;
    uint64_t refused_cred;      /* directory links refused for their uid */
    uint64_t unowned_dropped;   /* frames from GIDs their sender does not own */
    uint64_t gids_refused;      /* GIDs announced while another held them */
    GArray *refused_said;       /* uids whose refusal was said (once) */
    /*
     * TCP links closed because their TLS did not agree; the latest
     * reasons said, and when: a peer retries every second, and the same
     * reason is said once a minute (PVRDMA_LINK_REFUSAL_SAY_NS).  Two
     * peers that disagree may give us either of two reasons in turn.
     */
    uint64_t refused_tls;
    struct {
        char *why;
        int64_t at;
    } refusal_said[PVRDMA_LINK_REFUSALS];

    /* Links to other processes (none until a host is set). */
    bool has_host;
    PvrdmaFabricHost host;
    uint64_t instance;          /* random: tells peers apart */
    uint64_t next_serial;
    GList *links;               /* live links */
    GList *dead;                /* closed, freed by the timer */
    uint64_t links_downed;      /* links that were up and closed */
    GList *endpoints;           /* listeners and peers (fabric_net.c) */
    int res_err;                /* host resource failure last reported */
    int64_t timer_at;           /* armed expiry, -1 = not armed */
    bool in_timer;
    int64_t poll_until;         /* latest promise to peers to look */
    /*
     * The CQs whose polling the promise stands on: until a CQE lands in
     * one, it is armed or gone (poll_end), or its time runs out.  The
     * promise on the links is the latest time left among them.
     */
    struct {
        PvrdmaCq *cq;
        int64_t until;
    } polled[PVRDMA_FABRIC_POLLED_CQS];
    /*
     * While frames stream in through shm links and no guest polls, the
     * timer looks at the rings every PVRDMA_FABRIC_LINGER_NS instead of
     * peers kicking for each batch: the time of the next such look, 0
     * when no stream is on (pvrdma_fabric_linger).
     */
    int64_t linger_at;
    /*
     * Requests with payload (SEND, WRITE) ever taken in from links, and
     * large pieces of their payload (PVRDMA_LINK_STREAM_PIECE): what a
     * stream is made of.  READs and atomics are not counted: a QP has
     * only a few out, each waiting for its answer, so lingering would
     * delay them.
     */
    uint64_t sends_in;
    unsigned draining;          /* inside a pass over the links */
    bool recheck;               /* a promise ended during that pass */
    /* Migration (pvrdma_fabric_move.c). */
    GQueue parked;              /* requests held for moving ports */
    uint64_t order;             /* announcements so far (seniority) */
    GList *departed;            /* PvrdmaFabricDeparted: moving, link gone */
};

/*
 * Loops over links run on a copy of fab->links (g_autoptr(GList)): their
 * body may close links, which takes them off the list (they are freed
 * only by the timer, and a closed link ignores what is asked of it).
 */

/* A listening socket, or a peer address kept connected (fabric_net.c). */
void pvrdma_fabric_net_ready(PvrdmaFabric *fab, void *tag, bool readable,
                             bool writable);
/* Retry peers that are down; true if one still waits. */
bool pvrdma_fabric_net_tick(PvrdmaFabric *fab, int64_t now);
void pvrdma_fabric_net_free(PvrdmaFabric *fab);
/* @l of @fab closed: reconnect its peer endpoint, or rescan the path. */
void pvrdma_fabric_net_link_down(PvrdmaFabric *fab, PvrdmaLink *l);
/*
 * Tell @only (NULL: every link) where the members we know accept TCP
 * links: ourselves and the peers of our links (the mesh, docs/fabric.md).
 */
void pvrdma_fabric_net_announce(PvrdmaFabric *fab, PvrdmaLink *only);
/*
 * The peer of @l says @n members accept TCP links at @addr (checked
 * by the link): link to those we have no link to.
 */
void pvrdma_fabric_net_peers_in(PvrdmaFabric *fab, PvrdmaLink *l,
                                const uint64_t *instance,
                                const PvrdmaNetAddr *addr, unsigned n);
/*
 * Show a message (printf-style) of @cause through the host's report,
 * unless PVRDMA_SAY_BURST of that cause were shown in the current window
 * (a peer that connects and sends garbage in a loop must not fill the
 * host's log): then it is counted, and the count is shown when the
 * window ends (pvrdma_fabric_say_flush).
 */
void pvrdma_fabric_say(PvrdmaFabric *fab, PvrdmaSay cause, const char *fmt,
                       ...) G_GNUC_PRINTF(3, 4);
/* @gid as IPv6 text (a RoCE GID is one) into @out. */
#define PVRDMA_GID_STR              48
void pvrdma_fabric_gid_str(const uint8_t gid[16], char out[PVRDMA_GID_STR]);
/* End the windows that ran out by @now; true while one is open. */
bool pvrdma_fabric_say_flush(PvrdmaFabric *fab, int64_t now);
/*
 * A host resource ran out (@err: EMFILE, ENFILE, ENOMEM, ENOSPC, ...):
 * what the user should raise or fix, as "; ..." to append to a message
 * (empty for other errors).
 */
const char *pvrdma_fabric_errno_hint(int err);
/*
 * Should a failure for want of @err be reported?  Once per cause until a
 * link comes up again (a failure retried every second must not fill the
 * log); true for errors that are not about host resources.
 */
bool pvrdma_fabric_res_report(PvrdmaFabric *fab, int err);

/* ---- links (pvrdma_link.c) ----------------------------------------------- */

/* A request of a local QP outstanding on a link (fqp->req). */
struct PvrdmaFabricReq {
    PvrdmaLink *link;
    uint32_t id;
    PvrdmaFabricPort *port;
    PvrdmaQp *qp;
    PvrdmaSendWr *wr;
    int64_t timeout_ns;         /* without an answer; 0: wait forever */
    int64_t since;              /* sent, or last heard of the link */
    uint32_t fail;              /* status decided here (memory gone), or 0 */
    uint64_t got;               /* READ response bytes placed */
    bool resp_open;             /* its READ response stream is open */
    struct PvrdmaLinkTx *tx;    /* its payload stream, queued or sending */
    uint32_t gen;               /* its QP's generation when sent */
    GList qnode;                /* on its QP's fqp->reqs */
    /*
     * Answered (or failed, timed out) and off the link, but completed only
     * once every earlier request of its QP is: the core completes a QP's
     * requests in order, and a READ's answer may follow later ones'.
     */
    bool answered;
    bool fatal;
    PvrdmaFabricAck ack;
    /*
     * Held (no link yet) while its destination's port moves, or (drop_at
     * set) because the destination dropped it: no such QP, or not one
     * connected to us.  A real requester retries until its local ACK
     * timeout runs out; so does this one, then RETRY_EXC_ERR.
     */
    bool parked;
    GList pnode;                /* on fab->parked */
    int64_t drop_at;
    /*
     * When its retries run out, from the first drop on (it is sent again
     * on each tick meanwhile, as a real requester retransmits after each
     * local ACK timeout: the QP it is for may come to RTR).
     */
    int64_t drop_deadline;
};

/*
 * A link over @fd; with @tls (TCP links), over a TLS session of the
 * host's, the server end if @tls_host is NULL (pvrdma_fabric_add_tcp_link).
 */
PvrdmaLink *pvrdma_link_new(PvrdmaFabric *fab, int fd, bool shm,
                            const char *name, uint64_t serial, bool tls,
                            const char *tls_host);
/* @l was closed because another link joins the same peer. */
bool pvrdma_link_duplicate(PvrdmaLink *l);
/* @l carries bulk data in shared memory (one host, fabric-path). */
bool pvrdma_link_shm(PvrdmaLink *l);
/* @l runs over TLS (fabric-tls-creds). */
bool pvrdma_link_tls(PvrdmaLink *l);
/* Requests of ours are outstanding on @l. */
bool pvrdma_link_busy(PvrdmaLink *l);
/* Frames wait in the peer's frame ring (shm links only). */
bool pvrdma_link_pending_in(PvrdmaLink *l);
/*
 * A guest polls: take in what waits in the frame ring without a system
 * call and, if @until >= 0, tell the peer that until then (host clock) we
 * look without being woken (shm links; an inline link reads its socket).
 */
void pvrdma_link_poll(PvrdmaLink *l, int64_t until);
/* Tell the peer of a shm link until when we look without a kick (0: no). */
void pvrdma_link_promise(PvrdmaLink *l, int64_t until);
/*
 * Tell the peer of a shm link until when our timer looks at its frames
 * (a stream's linger, 0: none): it kicks only for a request that fills
 * its QP's window.
 */
void pvrdma_link_linger(PvrdmaLink *l, int64_t until);
/* The fd of @l is ready. */
void pvrdma_link_io(PvrdmaLink *l, bool readable, bool writable);
/* Close @l (the peer is gone or broke the protocol): fail its requests. */
void pvrdma_link_close(PvrdmaLink *l, const char *why);
void pvrdma_link_free(PvrdmaLink *l);
bool pvrdma_link_is_up(PvrdmaLink *l);
const char *pvrdma_link_name(PvrdmaLink *l);
void pvrdma_link_get_stats(PvrdmaLink *l, PvrdmaLinkStats *st);
bool pvrdma_link_is_dead(PvrdmaLink *l);
uint64_t pvrdma_link_serial(PvrdmaLink *l);
uint64_t pvrdma_link_peer_instance(PvrdmaLink *l);
bool pvrdma_link_initiated(PvrdmaLink *l);
void pvrdma_link_set_initiated(PvrdmaLink *l);
/*
 * The serial its opener gave @l (ours if we connected, else the peer's
 * from HELLO): ties between duplicate links opened by one process.
 */
uint64_t pvrdma_link_opener_serial(PvrdmaLink *l);
/* Where the peer of @l accepts TCP links (port 0: it did not say). */
const PvrdmaNetAddr *pvrdma_link_peer_addr(PvrdmaLink *l);
void pvrdma_link_set_peer_addr(PvrdmaLink *l, const PvrdmaNetAddr *a);
/* Tell the peer of @l where @n members accept TCP links. */
void pvrdma_link_send_peers(PvrdmaLink *l, const uint64_t *instance,
                            const PvrdmaNetAddr *addr, unsigned n);
/*
 * Did the peer behind @l announce (@gid, @qpn)?  With @order, the
 * seniority of that announcement (pvrdma_fabric_route() takes the oldest).
 */
bool pvrdma_link_owns(PvrdmaLink *l, const uint8_t gid[16], uint32_t qpn,
                      uint64_t *order);

/* Requester: carry @wr of @qp to the peer; the answer comes later. */
void pvrdma_link_submit(PvrdmaLink *l, PvrdmaFabricPort *port, PvrdmaQp *qp,
                        PvrdmaSendWr *wr);
/* A request of @qp, outstanding but not on a link yet. */
PvrdmaFabricReq *pvrdma_fabric_req_new(PvrdmaFabricPort *port, PvrdmaQp *qp,
                                       PvrdmaSendWr *wr);
/* Send @req (made by pvrdma_fabric_req_new()) on @l. */
void pvrdma_link_send_req(PvrdmaLink *l, PvrdmaFabricReq *req);
/* Requests of @port on @l, or execs of it fed by @l, are in flight. */
bool pvrdma_link_port_busy(PvrdmaLink *l, PvrdmaFabricPort *port);
/* The socket of @l, or -1 once closed. */
int pvrdma_link_fd(PvrdmaLink *l);
/* Migration: ask the peer to hold requests to port @index. */
void pvrdma_link_send_quiesce(PvrdmaLink *l, unsigned index);
/* The peer answered that QUIESCE (or @l is down). */
bool pvrdma_link_peer_quiesced(PvrdmaLink *l, unsigned index);
/* Requests to (@gid, @qpn), owned by the peer behind @l, must wait. */
bool pvrdma_link_held(PvrdmaLink *l, const uint8_t gid[16], uint32_t qpn);
/*
 * Port @index of @l committed to @commit: it moved away; forget it and
 * return its seniority (0: no such port).
 */
uint64_t pvrdma_link_take_rport(PvrdmaLink *l, unsigned index,
                                const uint8_t commit[32]);
/* Forget @req (cancelled): no completion follows. */
void pvrdma_link_req_cancel(PvrdmaFabricReq *req);
/* Forget every request @qp has outstanding; its generation moves on. */
void pvrdma_fabric_qp_drop_reqs(PvrdmaQp *qp);
/* @req's memory went away: it completes with @status soon. */
void pvrdma_link_req_fail(PvrdmaFabricReq *req, uint32_t status);
/* Fail requests whose peer has been silent past their timeout. */
void pvrdma_link_tick(PvrdmaLink *l, int64_t now, bool *busy);
/*
 * Multicast: announce @port's groups (none if it is leaving); did the
 * peer announce members of @mgid; send it a datagram to a group (@wr's
 * header, @payload its wr->length bytes), or lose it on a backlog.
 */
void pvrdma_link_send_mgids(PvrdmaLink *l, PvrdmaFabricPort *port,
                            bool leaving);
bool pvrdma_link_has_mgid(PvrdmaLink *l, const uint8_t mgid[16]);
void pvrdma_link_send_mcast(PvrdmaLink *l, const PvrdmaSendWr *wr,
                            const void *payload);
/* Announce @port's GIDs (none if it is leaving). */
void pvrdma_link_send_gids(PvrdmaLink *l, PvrdmaFabricPort *port,
                           bool leaving);
/* Receives were posted on (@gid, @qpn) for requester (@dgid, @dqpn). */
void pvrdma_link_send_recv_posted(PvrdmaLink *l, const uint8_t gid[16],
                                  uint32_t qpn, const uint8_t dgid[16],
                                  uint32_t dqpn);
/* Drop everything of @port (it is reset or leaving). */
void pvrdma_link_port_gone(PvrdmaLink *l, PvrdmaFabricPort *port);
/* @mr is being deregistered on @port: nothing may touch it after. */
void pvrdma_link_mr_gone(PvrdmaLink *l, PvrdmaFabricPort *port,
                         const PvrdmaMr *mr);

/* ---- what links ask of the fabric (pvrdma_fabric.c) ---------------------- */

const PvrdmaFabricHost *pvrdma_fabric_host(PvrdmaFabric *fab);
uint64_t pvrdma_fabric_instance(PvrdmaFabric *fab);
PvrdmaFabricPort *pvrdma_fabric_port_at(PvrdmaFabric *fab, unsigned index);
/* The HELLO of @l arrived: keep it (true) or close it as a duplicate. */
bool pvrdma_fabric_link_up(PvrdmaFabric *fab, PvrdmaLink *l);
/* @l closed: forget it, free it later, reconnect if it was a peer. */
void pvrdma_fabric_link_down(PvrdmaFabric *fab, PvrdmaLink *l);
/* Run the timer soon (deferred completions, dead links). */
void pvrdma_fabric_kick(PvrdmaFabric *fab);
/*
 * Make sure the timer checks for timeouts within a tick of @now (the
 * host clock the caller just read; -1: read it).
 */
void pvrdma_fabric_arm_tick(PvrdmaFabric *fab, int64_t now);
/* Is @mr's memory part of @sgl? */
bool pvrdma_fabric_sgl_uses(const PvrdmaSgl *sgl, const PvrdmaMr *mr);
/*
 * @req (off its link) has its answer: complete it, and the answered
 * requests of its QP after it, once the ones before it are complete.
 */
void pvrdma_fabric_req_answered(PvrdmaFabricReq *req,
                                const PvrdmaFabricAck *ack, bool fatal);
/* @req leaves its QP's list and is freed (it is off its link). */
void pvrdma_fabric_req_free(PvrdmaFabricReq *req);
/* A link exec ended: off its port's list. */
void pvrdma_fabric_exec_free(PvrdmaFabricExec *ex);
/* The link whose peer owns (@gid, @qpn), or NULL. */
PvrdmaLink *pvrdma_fabric_route(PvrdmaFabric *fab, const uint8_t gid[16],
                                uint32_t qpn);

/* ---- migration (pvrdma_fabric_move.c, docs/migration.md) ----------------- */

/* A moving port whose link closed before its destination claimed it. */
typedef struct PvrdmaFabricDeparted {
    unsigned index;
    PvrdmaLinkRPort *rport;
} PvrdmaFabricDeparted;

/* SHA-256 of the proof of a move of @token's GIDs, for peer @instance. */
void pvrdma_fabric_commitment(const uint8_t token[32], uint64_t instance,
                              uint8_t out[32]);
/* The proof itself: shown by the destination to that peer only. */
void pvrdma_fabric_proof(const uint8_t token[32], uint64_t instance,
                         uint8_t out[32]);
/* Loading: the port announces nothing until it runs. */
bool pvrdma_fabric_port_silent(PvrdmaFabricPort *port);
/*
 * @l claims port @index with @proof: the holder it proves gives it up;
 * its seniority (0 if no holder matched: a plain announcement).
 */
uint64_t pvrdma_fabric_claim(PvrdmaFabric *fab, PvrdmaLink *l,
                             unsigned index, const uint8_t proof[32]);
/* Seniority for a new announcement. */
uint64_t pvrdma_fabric_next_order(PvrdmaFabric *fab);
/* @l closes while its port @index moves: keep @rp until claimed. */
void pvrdma_fabric_departed_add(PvrdmaFabric *fab, unsigned index,
                                PvrdmaLinkRPort *rp);
/* Port @index (@rp) did not come back in time: fail what waits for it. */
void pvrdma_fabric_hold_expired(PvrdmaFabric *fab, unsigned index,
                                const PvrdmaLinkRPort *rp);
/* Is (@gid, @qpn) a port of this process (whether it has that QP or not)? */
bool pvrdma_fabric_gid_local(PvrdmaFabric *fab, const uint8_t gid[16],
                             uint32_t qpn);
/* Send what waited for moving ports that ended their move. */
void pvrdma_fabric_release_parked(PvrdmaFabric *fab);
/*
 * Is (@gid, @qpn) a moving port's (behind @l, the route, or whose link
 * closed: NULL)?  Requests to it wait (pvrdma_fabric_park()).
 */
bool pvrdma_fabric_held(PvrdmaFabric *fab, PvrdmaLink *l,
                        const uint8_t gid[16], uint32_t qpn);
/* @wr of @qp waits, outstanding, until its destination port lands. */
void pvrdma_fabric_park(PvrdmaFabricPort *port, PvrdmaQp *qp,
                        PvrdmaSendWr *wr);
/* @req (parked) is cancelled. */
void pvrdma_fabric_unpark(PvrdmaFabricReq *req);
/*
 * The destination dropped @req (RC; sent at @since, -1: now): it is sent
 * again on each fabric tick, as a real requester retransmits, and taken
 * by the first QP ready for it; it completes with RETRY_EXC_ERR when the
 * QP's local ACK timeout has run out since the first drop, not at once.
 * Without a clock (has_host false) at once.
 */
void pvrdma_fabric_drop_wait(PvrdmaFabricReq *req, int64_t since);
/*
 * IBA local ACK timeout of @qp for the fabric (ns; 0: forever), at least
 * PVRDMA_LINK_MIN_TIMEOUT_NS (a busy host keeps no sub-second promises).
 */
#define PVRDMA_LINK_MIN_TIMEOUT_NS  (2 * 1000 * 1000 * 1000LL)
/* Requests past their timeout are looked for this often, at most. */
#define PVRDMA_LINK_SCAN_NS         (100 * 1000 * 1000LL)
int64_t pvrdma_link_qp_timeout(PvrdmaQp *qp);
/* Timer: departed ports that never came back; true while some wait. */
bool pvrdma_fabric_move_tick(PvrdmaFabric *fab, int64_t now);

/* ---- the port's part (pvrdma_fabric.c, for pvrdma_fabric_port.c) --------- */

/* Abort the port's link execs on @qp (NULL: any) or using @mr (NULL: any). */
void pvrdma_fabric_port_abort(PvrdmaFabricPort *port, PvrdmaQp *qp,
                              const PvrdmaMr *mr);
void pvrdma_fabric_port_mr_gone(PvrdmaFabricPort *port, const PvrdmaMr *mr);
/* Reset or removal: every exec and link request of @port ends. */
void pvrdma_fabric_port_quiesce(PvrdmaFabricPort *port);
void pvrdma_fabric_port_gids_changed(PvrdmaFabricPort *port);
/* The port's multicast groups changed: tell every link. */
void pvrdma_fabric_port_mgids_changed(PvrdmaFabricPort *port);
/*
 * A datagram to the group @msg->dgid: into every QP of this process's
 * ports attached to it, the payload from @sgl (a sender here) or @buf.
 */
void pvrdma_fabric_mcast_deliver(PvrdmaFabric *fab,
                                 const PvrdmaFabricMsg *msg,
                                 const PvrdmaSgl *sgl, const void *buf);
/*
 * Read what the links with requests outstanding have received; @incoming
 * (a guest polled an empty CQ): every link, and if @cq (not armed) its
 * poller is counted on to look again until a CQE comes.
 */
void pvrdma_fabric_poll_links(PvrdmaFabric *fab, bool incoming,
                              PvrdmaCq *cq);
/* The polling of @cq ended: the promise it held is taken back. */
void pvrdma_fabric_poll_end(PvrdmaFabric *fab, PvrdmaCq *cq);


#endif /* HW_PVRDMA_LINK_H */
