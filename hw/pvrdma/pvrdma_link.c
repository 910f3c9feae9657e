/*
 * PVRDMA software fabric: a link between two fabric objects (processes
 * on one host, or hosts), carrying RC requests and their answers
 * (docs/fabric.md).
 *
 * A link is a connected stream socket plus, between processes of one
 * host, two shared rings (one per direction, memfds exchanged in HELLO)
 * for bulk data.  Frames are a 16-byte header and a bounded body.
 * Payload travels as a *stream*: a REQ (SEND, WRITE) or RESP (READ
 * response) frame opens it, DATA frames carry its bytes in order (inline,
 * or as a count of bytes in the sender's ring), and it ends when all
 * bytes arrived or with an ABORT.  Each direction sends one stream at a
 * time; control frames (ACK, CREDIT, GIDS, ...) go between its frames, so
 * an answer never waits behind a large transfer's credits.
 *
 * The peer is not trusted: every field of every frame is checked before
 * use, ring counts against the credit the peer actually has, stream
 * lengths against what was announced.  A violation closes the link, as
 * if the peer had died; it never reaches the guest other than as
 * RETRY_EXC_ERR on the requests that were outstanding.  A process maps
 * only its own guest's memory, its own ring (read-write) and the peer's
 * ring (read-only, sealed against shrinking).
 *
 * All I/O is non-blocking and happens in the host's event loop under the
 * caller's lock; nothing here ever waits for the peer.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE             /* memfd_create, accept4 (QEMU sets it) */
#endif
#include <glib.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pvrdma_link.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE     0x0010
#endif

/* Stop producing payload while this much output waits for the socket. */
#ifndef PVRDMA_LINK_OBUF_HIGH                   /* tests use a small one */
#define PVRDMA_LINK_OBUF_HIGH   (256u << 10)
#endif
/* A peer that leaves this much of our output unread is dead to us. */
#ifndef PVRDMA_LINK_OBUF_MAX                    /* tests use a small one */
#define PVRDMA_LINK_OBUF_MAX    (64u << 20)
#endif
/* Input buffer: at least two of the largest frames. */
#define PVRDMA_LINK_IBUF_SIZE   (2 * (PVRDMA_LINK_HDR_SIZE + \
                                      PVRDMA_LINK_MAX_INLINE))
#define PVRDMA_LINK_MAX_CTRL    (PVRDMA_LINK_GIDS_MIN + \
                                 PVRDMA_FABRIC_MAX_GIDS * 16)

/* A payload stream this side sends. */
typedef struct PvrdmaLinkTx {
    uint8_t type;               /* PVRDMA_LINK_REQ or _RESP */
    uint32_t id;
    uint64_t len;
    uint64_t sent;
    bool started;               /* its REQ/RESP frame went out */
    PvrdmaFabricReq *req;       /* REQ: our request; NULL if cancelled */
    PvrdmaFabricExec *ex;       /* RESP: the READ being answered */
    GList node;
} PvrdmaLinkTx;

/*
 * The counters page after a memfd's rings (native order: both ends are
 * on one host).  Each side writes only its own page; what it reads in
 * the peer's page is checked (counters) or only decides whether to wake
 * the peer (poll_until, want_space, linger_until: a wrong value only
 * delays what we send to that peer, or costs it kicks).
 */
typedef struct PvrdmaLinkShared {
    uint64_t frames;            /* bytes ever written to this frame ring */
    uint64_t peer_frames;       /* bytes taken from the peer's frame ring */
    int64_t poll_until;         /* host clock: we look without a kick */
    uint64_t want_space;        /* we wait for room in our frame ring */
    int64_t linger_until;       /* host clock: our timer looks (a stream) */
} PvrdmaLinkShared;

struct PvrdmaLink {
    uint32_t kind;              /* PVRDMA_FABRIC_FD_LINK (a host tag) */
    PvrdmaFabric *fab;
    int fd;
    bool shm;
    bool up;                    /* HELLO received */
    bool dead;
    bool initiated;             /* we connected (used for duplicates) */
    bool duplicate;             /* closed: another link joins the peer */
    uint64_t serial;
    uint64_t peer_instance;
    uint64_t peer_serial;       /* the peer's serial of this link (HELLO) */
    PvrdmaNetAddr peer_addr;    /* where the peer accepts TCP links */
    char *name;
    /*
     * When the peer last sent us something, for timeouts (at least
     * PVRDMA_LINK_MIN_TIMEOUT_NS) and stalls: taken at the timer's tick
     * after input was seen (rx_seen), not read from the clock per input.
     */
    int64_t last_rx;
    bool rx_seen;
    int64_t born;               /* made: its HELLO is due by + HELLO_NS */
    /*
     * When the timer next looks for requests past their timeout: every
     * PVRDMA_LINK_SCAN_NS at most (timeouts are seconds), not at every
     * tick of a stream's linger (20 us), as the look is over every
     * request out: 4096 QPs have up to 2^18 (0: at the next tick).
     */
    int64_t scan_at;

    /*
     * TLS (TCP links with fabric-tls-creds): the host's session; no
     * frame goes out or is taken in before its handshake is done.
     */
    void *tls;
    bool tls_done;
    bool tls_want_write;        /* the handshake waits to write */
    bool tls_peeked;            /* the peer's first byte was looked at */

    /* Output: frames not yet written, and a memfd to pass once. */
    GByteArray *obuf;
    size_t opos;
    bool want_write;
    int send_fd;

    /* Input. */
    uint8_t *ibuf;
    size_t ilen;
    int peer_fd;                /* the peer's ring, until HELLO */
    int res_err;                /* a host resource that failed us, or 0 */

    /* Shared rings (shm links). */
    uint8_t *tx_ring;           /* ours, read-write */
    uint64_t tx_head;           /* bytes ever written */
    uint64_t tx_acked;          /* bytes the peer gave back */
    const uint8_t *rx_ring;     /* the peer's, read-only */
    uint64_t rx_tail;           /* bytes ever consumed */
    uint64_t rx_uncredited;
    /* Frame rings (shm links): after HELLO, frames go through them. */
    PvrdmaLinkShared *my;       /* our counters, in our memfd */
    const PvrdmaLinkShared *peer; /* the peer's, read-only, untrusted */
    size_t hello_left;          /* HELLO bytes at the head of obuf */
    uint64_t fr_head;           /* bytes ever put in our frame ring */
    uint64_t fr_done;           /* of those, consumed by the peer (seen) */
    uint64_t fr_tail;           /* bytes ever taken from the peer's */
    /*
     * Our rings hold pages (written since they were last given back to
     * the host), and since when all of it is consumed (0: not yet).  A
     * link quiet for PVRDMA_LINK_SHRINK_NS gives them back, so an idle
     * link costs little more than the two counters pages.
     */
    bool ring_used;
    int64_t ring_quiet;
    /*
     * A request that fills its QP's window (a shallow one,
     * PVRDMA_LINK_KICK_WINDOW) went out: kick even a peer whose stream
     * linger would take it in at its next look (the QP now waits for
     * answers, so no later frame of ours would come sooner);
     * once per look of the peer: not while it has not taken in all we
     * had written at our last kick (kicked_at).
     */
    bool kick_now;
    uint64_t kicked_at;
    int64_t poll_published;     /* our poll_until as last stored */
    /* Being added by pvrdma_link_send_req, whose clock reading it keeps. */
    PvrdmaLinkTx *stamped;

    /*
     * Our requests, by id: slot id & reqs_mask holds the one with that id
     * (ids skip the taken slots; at most half are used, else it doubles).
     * A hash table cost a tenth of a small message's instructions.
     */
    PvrdmaFabricReq **reqs;
    uint32_t reqs_mask;
    uint32_t nreqs;
    uint32_t next_id;

    /* Streams we send: the one sending, then the waiting ones. */
    GQueue txq;
    unsigned txq_len;

    /* The stream we receive. */
    struct {
        bool open;
        uint32_t id;
        uint64_t len;
        uint64_t got;
        PvrdmaFabricExec *ex;   /* a SEND/WRITE executing here */
        PvrdmaFabricReq *req;   /* a READ response for our request */
    } rx;

    PvrdmaLinkRPort *rports[PVRDMA_FABRIC_MAX_PORTS];
    /* The multicast groups each remote port has members in (MGIDS). */
    uint8_t (*mgids[PVRDMA_FABRIC_MAX_PORTS])[16];
    uint32_t nmgids[PVRDMA_FABRIC_MAX_PORTS];
    /*
     * Counters for the device's stats (pvrdma_link_get_stats): frames
     * and their bytes (header, body, and on shm links the payload they
     * stand for in the data ring), and kicks.
     */
    uint64_t frames_out, frames_in;
    uint64_t bytes_out, bytes_in;
    uint64_t kicks_out, kicks_in;
    uint64_t shrinks;           /* times our rings' pages were given back */
    /* Migration (pvrdma_fabric_move.c), one bit per port index: */
    uint32_t owe_quiesced[PVRDMA_FABRIC_MAX_PORTS / 32]; /* to answer */
    uint32_t quiesced[PVRDMA_FABRIC_MAX_PORTS / 32];     /* peer answered */
    uint32_t moved_away[PVRDMA_FABRIC_MAX_PORTS / 32];   /* claimed away */
};

static inline bool bit_get(const uint32_t *map, unsigned i)
{
    return map[i / 32] & (1u << (i % 32));
}

static inline void bit_set(uint32_t *map, unsigned i, bool on)
{
    if (on) {
        map[i / 32] |= 1u << (i % 32);
    } else {
        map[i / 32] &= ~(1u << (i % 32));
    }
}

/* ---- little-endian fields ------------------------------------------------ */

static inline void wr16(uint8_t *p, uint16_t v)
{
    v = GUINT16_TO_LE(v);
    memcpy(p, &v, 2);
}

static inline void wr32(uint8_t *p, uint32_t v)
{
    v = GUINT32_TO_LE(v);
    memcpy(p, &v, 4);
}

static inline void wr64(uint8_t *p, uint64_t v)
{
    v = GUINT64_TO_LE(v);
    memcpy(p, &v, 8);
}

static inline uint16_t rd16(const uint8_t *p)
{
    uint16_t v;

    memcpy(&v, p, 2);
    return GUINT16_FROM_LE(v);
}

static inline uint32_t rd32(const uint8_t *p)
{
    uint32_t v;

    memcpy(&v, p, 4);
    return GUINT32_FROM_LE(v);
}

static inline uint64_t rd64(const uint8_t *p)
{
    uint64_t v;

    memcpy(&v, p, 8);
    return GUINT64_FROM_LE(v);
}

/* ---- output -------------------------------------------------------------- */

/* ---- our requests by id ------------------------------------------------ */

#define PVRDMA_LINK_REQS_MIN    64

/*
 * A window this shallow is kicked for when full (kick_now): deeper, the
 * peer's next look (PVRDMA_FABRIC_LINGER_NS away at most) answers enough
 * of it that the QP does not starve (64 per 20 us: 3.2 M msg/s), and a
 * kick per look would cost the sender's vCPU a system call and a wakeup
 * every 20 us of a stream.
 */
#ifndef PVRDMA_LINK_KICK_WINDOW
#define PVRDMA_LINK_KICK_WINDOW 16
#endif

static PvrdmaFabricReq *pvrdma_link_req_get(PvrdmaLink *l, uint32_t id)
{
    PvrdmaFabricReq *req = l->reqs[id & l->reqs_mask];

    return req && req->id == id ? req : NULL;
}

/* A new id for @req (its slot free) and @req in it. */
static void pvrdma_link_req_put(PvrdmaLink *l, PvrdmaFabricReq *req)
{
    if (l->nreqs + 1 > (l->reqs_mask + 1) / 2) {
        /* Twice the slots: ids apart in the old mask stay apart. */
        uint32_t i, mask = l->reqs_mask * 2 + 1;
        PvrdmaFabricReq **slots = g_new0(PvrdmaFabricReq *, mask + 1);

        for (i = 0; i <= l->reqs_mask; i++) {
            if (l->reqs[i]) {
                slots[l->reqs[i]->id & mask] = l->reqs[i];
            }
        }
        g_free(l->reqs);
        l->reqs = slots;
        l->reqs_mask = mask;
    }
    do {
        l->next_id++;
    } while (!l->next_id || l->reqs[l->next_id & l->reqs_mask]);
    req->id = l->next_id;
    l->reqs[req->id & l->reqs_mask] = req;
    l->nreqs++;
}

static void pvrdma_link_req_del(PvrdmaLink *l, PvrdmaFabricReq *req)
{
    l->reqs[req->id & l->reqs_mask] = NULL;
    l->nreqs--;
}

/* The request in the first used slot from *@i on (*@i then past it). */
static PvrdmaFabricReq *pvrdma_link_req_next(PvrdmaLink *l, uint32_t *i)
{
    while (*i <= l->reqs_mask) {
        PvrdmaFabricReq *req = l->reqs[(*i)++];

        if (req) {
            return req;
        }
    }
    return NULL;
}

/* Each of @l's requests as @req (it may leave the table meanwhile). */
#define PVRDMA_LINK_FOREACH_REQ(l, i, req) \
    for ((i) = 0; ((req) = pvrdma_link_req_next((l), &(i))) != NULL;)

static void pvrdma_link_update_watch(PvrdmaLink *l)
{
    const PvrdmaFabricHost *h = pvrdma_fabric_host(l->fab);
    bool want = l->shm ? l->hello_left > 0 : l->opos < l->obuf->len;

    if (l->tls && !l->tls_done) {
        want = l->tls_want_write;
    }

    if (want != l->want_write && !l->dead) {
        l->want_write = want;
        h->watch(h->opaque, l->fd, want, l);
    }
}

/* Append a frame header and room for @len body bytes; returns the body. */
static uint8_t *pvrdma_link_frame(PvrdmaLink *l, uint8_t type, uint16_t flags,
                                  uint32_t id, uint32_t len)
{
    size_t at = l->obuf->len;
    uint8_t *p;

    g_byte_array_set_size(l->obuf, at + PVRDMA_LINK_HDR_SIZE + len);
    l->frames_out++;
    l->bytes_out += PVRDMA_LINK_HDR_SIZE + len;
    p = l->obuf->data + at;
    wr32(p, PVRDMA_LINK_MAGIC);
    p[4] = PVRDMA_LINK_VERSION;
    p[5] = type;
    wr16(p + 6, flags);
    wr32(p + 8, len);
    wr32(p + 12, id);
    return p + PVRDMA_LINK_HDR_SIZE;
}

static size_t pvrdma_link_pending(PvrdmaLink *l)
{
    return l->obuf->len - l->opos;
}

/* Wake the peer's event loop (shm links): one byte on the socket. */
static void pvrdma_link_kick(PvrdmaLink *l)
{
    static const uint8_t zero;

    l->kicks_out++;
    /* A full socket holds kicks already; a dead peer shows on reading. */
    if (send(l->fd, &zero, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
        errno == EINTR) {
        send(l->fd, &zero, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
}

static int64_t pvrdma_link_now(PvrdmaLink *l)
{
    const PvrdmaFabricHost *h = pvrdma_fabric_host(l->fab);

    return h->clock_ns(h->opaque);
}

/*
 * Room in our frame ring, from what the peer says it consumed: a count
 * that goes back or past what we wrote is a protocol violation.
 */
static bool pvrdma_link_fr_room(PvrdmaLink *l, uint64_t *room)
{
    uint64_t done = __atomic_load_n(&l->peer->peer_frames, __ATOMIC_ACQUIRE);

    if (done < l->fr_done || done > l->fr_head) {
        pvrdma_link_close(l, "the peer's frame ring counter is wrong");
        return false;
    }
    l->fr_done = done;
    *room = PVRDMA_LINK_FRAME_RING - (l->fr_head - done);
    return true;
}

/* Move output into our frame ring while it has room; false if dead. */
/* Our rings got bytes: they hold pages until the link is quiet. */
static void pvrdma_link_ring_use(PvrdmaLink *l)
{
    l->ring_quiet = 0;
    if (!l->ring_used) {
        l->ring_used = true;
        /* The timer gives them back (pvrdma_link_shrink). */
        pvrdma_fabric_arm_tick(l->fab, -1);
    }
}

/*
 * Give our rings' pages back to the host once the peer has consumed all
 * of them and the link was quiet for PVRDMA_LINK_SHRINK_NS; true while
 * they are held (the timer must come back).  The peer reads nothing
 * there any more, and a page read after this reads as zeros (the memfd
 * keeps its size: no SIGBUS); our next write takes a fresh page.
 */
static bool pvrdma_link_shrink(PvrdmaLink *l, int64_t now)
{
    if (!l->ring_used || l->dead || !l->peer) {
        return false;
    }
    if (l->tx_head != l->tx_acked || l->opos != l->obuf->len ||
        __atomic_load_n(&l->peer->peer_frames, __ATOMIC_ACQUIRE) !=
        l->fr_head) {
        l->ring_quiet = 0;      /* still in use */
        return true;
    }
    if (!l->ring_quiet) {
        l->ring_quiet = now;
        return true;
    }
    if (now - l->ring_quiet < PVRDMA_LINK_SHRINK_NS) {
        return true;
    }
    /* Whole pages only: the counters page must stay. */
    if (madvise(l->tx_ring, (PVRDMA_LINK_RING_SIZE + PVRDMA_LINK_FRAME_RING) &
                ~(uint64_t)4095, MADV_REMOVE) < 0) {
        /* Not shmem, or refused: keep the pages, stop trying. */
        l->ring_used = false;
        return false;
    }
    l->ring_used = false;
    l->ring_quiet = 0;
    l->shrinks++;
    return false;
}

static bool pvrdma_link_flush_ring(PvrdmaLink *l)
{
    uint8_t *ring = l->tx_ring + PVRDMA_LINK_RING_SIZE;
    uint64_t before = l->fr_head;
    bool wrote = false;

    while (l->opos < l->obuf->len) {
        uint64_t room, n, at, first;

        if (!pvrdma_link_fr_room(l, &room)) {
            return false;
        }
        if (!room) {
            /* Ask for a kick when the peer makes room, then look again. */
            __atomic_store_n(&l->my->want_space, 1, __ATOMIC_SEQ_CST);
            if (!pvrdma_link_fr_room(l, &room)) {
                return false;
            }
            if (!room) {
                break;
            }
        }
        n = MIN(room, l->obuf->len - l->opos);
        at = l->fr_head % PVRDMA_LINK_FRAME_RING;
        first = MIN(n, PVRDMA_LINK_FRAME_RING - at);
        memcpy(ring + at, l->obuf->data + l->opos, first);
        memcpy(ring, l->obuf->data + l->opos + first, n - first);
        l->fr_head += n;
        l->opos += n;
        __atomic_store_n(&l->my->frames, l->fr_head, __ATOMIC_RELEASE);
        wrote = true;
    }
    if (wrote) {
        pvrdma_link_ring_use(l);
    }
    if (l->opos == l->obuf->len && l->my->want_space) {
        __atomic_store_n(&l->my->want_space, 0, __ATOMIC_RELAXED);
    }
    /*
     * Kick unless the peer promised to look on its own (polling, or a
     * stream's linger), or has not yet taken what we wrote before (a kick
     * or a look is under way: its reader loads our counter again after
     * publishing what it took, so it finds these frames too).  A request
     * that filled its QP's (shallow) window is kicked for even then,
     * unless the peer polls or has not yet looked since our last kick:
     * the QP waits for its answers.  The frames are published before the
     * peer's counters are read (a peer that stops polling or lingering
     * looks once more when its promise ends).
     */
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (wrote) {
        uint64_t taken = __atomic_load_n(&l->peer->peer_frames,
                                         __ATOMIC_RELAXED);
        /* kick_now: unless our last kick is not yet answered by a look */
        bool urgent = l->kick_now && taken >= l->kicked_at;

        if (urgent || taken >= before) {
            int64_t now = pvrdma_link_now(l);

            if (__atomic_load_n(&l->peer->poll_until, __ATOMIC_RELAXED) <=
                now &&
                (urgent || __atomic_load_n(&l->peer->linger_until,
                                           __ATOMIC_RELAXED) <= now)) {
                pvrdma_link_kick(l);
                l->kicked_at = l->fr_head;
            }
        }
        l->kick_now = false;
    }
    return true;
}

static bool pvrdma_link_flushed(PvrdmaLink *l);
static void pvrdma_link_refused(PvrdmaLink *l, const char *why, bool tls);

/* A TLS link's flush: through the session, once its handshake is done. */
static bool pvrdma_link_flush_tls(PvrdmaLink *l)
{
    const PvrdmaFabricHost *h = pvrdma_fabric_host(l->fab);

    /*
     * After a send that would block, the session holds the record it
     * made of the bytes at opos and writes that first at the next call:
     * those bytes stay at opos (obuf only grows at its end, and drops
     * only what went out), so the next call is the same as the last,
     * as the TLS library asks.
     */
    while (l->tls_done && l->opos < l->obuf->len) {
        char *err = NULL;
        ssize_t n = h->tls_send(l->tls, l->obuf->data + l->opos,
                                l->obuf->len - l->opos, &err);

        if (n < 0) {
            if (!err) {
                break;          /* the socket is full */
            }
            pvrdma_link_close(l, err);
            g_free(err);
            return false;
        }
        l->opos += n;
    }
    return pvrdma_link_flushed(l);
}

/*
 * Write what the socket takes now (inline links; HELLO on shm links) or
 * what our frame ring has room for; false if the link died.
 */
static bool pvrdma_link_flush(PvrdmaLink *l)
{
    if (l->tls) {
        return pvrdma_link_flush_tls(l);
    }
    while (l->opos < l->obuf->len && (!l->shm || l->hello_left)) {
        struct iovec iov = {
            .iov_base = l->obuf->data + l->opos,
            .iov_len = l->shm ? l->hello_left : l->obuf->len - l->opos,
        };
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } u;
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        ssize_t n;

        if (l->send_fd >= 0) {
            struct cmsghdr *c;

            memset(&u, 0, sizeof(u));
            msg.msg_control = u.buf;
            msg.msg_controllen = sizeof(u.buf);
            c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(c), &l->send_fd, sizeof(int));
        }
        n = sendmsg(l->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                break;
            }
            pvrdma_link_close(l, g_strerror(errno));
            return false;
        }
        if (l->send_fd >= 0) {
            close(l->send_fd);
            l->send_fd = -1;
        }
        l->opos += n;
        if (l->shm) {
            l->hello_left -= n;
        }
    }
    /* Frames after HELLO: once the peer's HELLO gave us its counters. */
    if (l->shm && !l->hello_left && l->peer && !pvrdma_link_flush_ring(l)) {
        return false;
    }
    return pvrdma_link_flushed(l);
}

/* After a flush: drop what went out, bound what did not. */
static bool pvrdma_link_flushed(PvrdmaLink *l)
{
    if (l->opos == l->obuf->len) {
        g_byte_array_set_size(l->obuf, 0);
        l->opos = 0;
    } else if (l->opos >= (1u << 20)) {
        g_byte_array_remove_range(l->obuf, 0, l->opos);
        l->opos = 0;
    }
    if (pvrdma_link_pending(l) > PVRDMA_LINK_OBUF_MAX) {
        pvrdma_link_close(l, "the peer stopped reading");
        return false;
    }
    pvrdma_link_update_watch(l);
    return true;
}

/* ---- payload streams we send --------------------------------------------- */

/* Where a chunk goes: our ring at @pos, or the output buffer at @dst. */
typedef struct PvrdmaLinkSink {
    PvrdmaLink *l;
    uint8_t *dst;               /* inline: the frame body */
    uint64_t pos;               /* shm: ring position of byte 0 */
} PvrdmaLinkSink;

static void pvrdma_link_ring_put(PvrdmaLink *l, uint64_t pos, const void *buf,
                                 uint64_t n)
{
    uint64_t at = pos % PVRDMA_LINK_RING_SIZE;
    uint64_t first = MIN(n, PVRDMA_LINK_RING_SIZE - at);

    memcpy(l->tx_ring + at, buf, first);
    memcpy(l->tx_ring, (const uint8_t *)buf + first, n - first);
}

static void pvrdma_link_ring_get(PvrdmaLink *l, uint64_t pos, void *buf,
                                 uint64_t n)
{
    uint64_t at = pos % PVRDMA_LINK_RING_SIZE;
    uint64_t first = MIN(n, PVRDMA_LINK_RING_SIZE - at);

    memcpy(buf, l->rx_ring + at, first);
    memcpy((uint8_t *)buf + first, l->rx_ring, n - first);
}

/*
 * PvrdmaPeerCopy: our guest's bytes (@buf) into the chunk being sent;
 * @off counts from the chunk's first byte (pvrdma_sgl_xfer()).
 */
static int pvrdma_link_sink_put(void *opaque, uint64_t off, void *buf,
                                uint64_t n)
{
    PvrdmaLinkSink *s = opaque;

    if (s->dst) {
        memcpy(s->dst + off, buf, n);
    } else {
        pvrdma_link_ring_put(s->l, s->pos + off, buf, n);
    }
    return 0;
}

static void pvrdma_link_encode_req(uint8_t *b, const PvrdmaFabricReq *req)
{
    const PvrdmaSendWr *wr = req->wr;

    memset(b, 0, PVRDMA_LINK_REQ_SIZE);
    wr32(b, wr->opcode);
    wr32(b + 4, wr->src_qpn);
    wr32(b + 8, wr->dst_qpn);
    memcpy(b + 12, wr->sgid, 16);
    memcpy(b + 28, wr->dgid, 16);
    b[44] = wr->sl;
    b[45] = wr->solicited;
    wr32(b + 48, wr->imm_data);
    wr32(b + 52, wr->inv_rkey);
    wr32(b + 56, wr->rkey);
    wr32(b + 60, req->gen);
    wr64(b + 64, wr->remote_addr);
    wr64(b + 72, wr->compare_add);
    wr64(b + 80, wr->swap);
    wr64(b + 88, wr->length);
    /* The transport: 0 RC, 1 a datagram, 2 UC, 3 XRC. */
    b[106] = wr->ud ? 1 : wr->uc ? 2 : wr->xrc ? 3 : 0;
    if (wr->xrc) {
        wr32(b + 96, wr->xrc_srqn);     /* where a datagram's Q_Key is */
    }
    if (wr->ud) {
        /* (only a datagram's are set: nothing else leaves the host) */
        wr32(b + 96, wr->qkey);
        wr32(b + 100, wr->flow_label);
        b[104] = wr->tclass;
        b[105] = wr->hop_limit;
    } else {
        /* Who asks, and whom it last heard from (Restored snapshots). */
        wr64(b + 112, req->port->life);
        wr64(b + 120, req->qp->peer_life);
    }
}

static void pvrdma_link_send_ack(PvrdmaLink *l, uint32_t id,
                                 const PvrdmaFabricAck *ack)
{
    uint8_t *b = pvrdma_link_frame(l, PVRDMA_LINK_ACK, 0, id,
                                   PVRDMA_LINK_ACK_SIZE);

    wr32(b, ack->status);
    b[4] = ack->rnr;
    b[5] = ack->rnr_timer;
    b[6] = ack->lost ? PVRDMA_LINK_ACK_LOST : 0;
    b[7] = 0;
    wr64(b + 8, ack->atomic_orig);
    wr64(b + 16, ack->life);
}

/*
 * The answer to a request executed here.  A NAK of an RC request (an
 * error, RNR) leaves the requester's later requests of its generation,
 * already on their way, unexecuted (as a responder drops what follows a
 * NAKed PSN): the requester sends them again under a new generation.
 */
static void pvrdma_link_ack_exec(PvrdmaLink *l, uint32_t id,
                                 PvrdmaFabricExec *ex)
{
    PvrdmaFabricAck ack = ex->ack;

    if (ex->qp && !ex->msg.ud && !ex->msg.uc &&
        (ex->ack.rnr || ex->ack.status != PVRDMA_WC_SUCCESS)) {
        PvrdmaFabricQp *fqp = ex->qp->be;

        fqp->dropping = true;
        fqp->drop_gen = ex->msg.gen;
    }
    /* A QP of ours took it: the requester hears which life we are. */
    ack.life = ex->qp && ex->port && !ex->msg.ud && !ack.lost ?
               ex->port->life : 0;
    pvrdma_link_send_ack(l, id, &ack);
}

static void pvrdma_link_tx_free(PvrdmaLink *l, PvrdmaLinkTx *tx)
{
    g_queue_unlink(&l->txq, &tx->node);
    l->txq_len--;
    if (tx->req) {
        tx->req->tx = NULL;
    }
    if (tx->ex) {
        pvrdma_fabric_exec_free(tx->ex);
    }
    g_free(tx);
}

/* The head stream ended (fully sent or aborted): its trailer goes out. */
static void pvrdma_link_tx_end(PvrdmaLink *l, PvrdmaLinkTx *tx, bool abort)
{
    if (abort && tx->started) {
        pvrdma_link_frame(l, PVRDMA_LINK_DATA, PVRDMA_LINK_DATA_ABORT, tx->id,
                          l->shm ? PVRDMA_LINK_SHM_DATA_SIZE : 0);
        if (l->shm) {
            wr32(l->obuf->data + l->obuf->len - 4, 0);
        }
    }
    if (tx->ex) {
        /* A READ response: the answer follows its data. */
        PvrdmaCore *core = tx->ex->port ? tx->ex->port->core : NULL;

        if (core) {
            pvrdma_core_enter(core);
            pvrdma_fabric_rc_end(tx->ex);
            pvrdma_core_leave(core);
        }
        pvrdma_link_ack_exec(l, tx->id, tx->ex);
    }
    pvrdma_link_tx_free(l, tx);
}

static void pvrdma_link_req_unlink(PvrdmaFabricReq *req);

/* @req is over: off the link, completed in its QP's order. */
static void pvrdma_link_req_finish(PvrdmaFabricReq *req, uint32_t status,
                                   bool fatal)
{
    PvrdmaFabricAck ack = { .status = status };

    pvrdma_link_req_unlink(req);
    pvrdma_fabric_req_answered(req, &ack, fatal);
}

/*
 * Produce frames of the streams while the output has room (inline) or
 * the ring has credit (shm); true if it added output.
 */
static bool pvrdma_link_produce(PvrdmaLink *l)
{
    size_t before = l->obuf->len;

    while (!l->dead && l->up && !g_queue_is_empty(&l->txq) &&
           pvrdma_link_pending(l) < PVRDMA_LINK_OBUF_HIGH) {
        PvrdmaLinkTx *tx = l->txq.head->data;
        PvrdmaLinkSink sink = { .l = l };
        PvrdmaSgl *src = NULL;
        PvrdmaCore *core = NULL;
        uint64_t n;
        int ret;

        if (!tx->started) {
            uint8_t *b;

            if (tx->type == PVRDMA_LINK_REQ) {
                if (!tx->req) {
                    pvrdma_link_tx_free(l, tx);     /* cancelled early */
                    continue;
                }
                b = pvrdma_link_frame(l, PVRDMA_LINK_REQ, 0, tx->id,
                                      PVRDMA_LINK_REQ_SIZE);
                pvrdma_link_encode_req(b, tx->req);
                if (tx != l->stamped) {
                    /* It waited behind others: its time starts now. */
                    tx->req->since = pvrdma_link_now(l);
                }
            } else {
                b = pvrdma_link_frame(l, PVRDMA_LINK_RESP, 0, tx->id,
                                      PVRDMA_LINK_RESP_SIZE);
                wr64(b, tx->len);
            }
            tx->started = true;
        }
        if (tx->type == PVRDMA_LINK_REQ && tx->req && !tx->req->fail) {
            src = &tx->req->wr->local;
            core = tx->req->port->core;
        } else if (tx->type == PVRDMA_LINK_RESP && !tx->ex->done) {
            src = tx->ex->mem;
            core = tx->ex->port->core;
        }
        if (!src) {
            pvrdma_link_tx_end(l, tx, true);
            continue;
        }
        if (tx->sent == tx->len) {
            pvrdma_link_tx_end(l, tx, false);
            continue;
        }
        n = tx->len - tx->sent;
        if (l->shm) {
            uint64_t room = PVRDMA_LINK_RING_SIZE - (l->tx_head - l->tx_acked);

            n = MIN(MIN(n, room), PVRDMA_LINK_SHM_STEP);
            if (!n) {
                break;          /* wait for CREDIT */
            }
            sink.pos = l->tx_head;
        } else {
            n = MIN(n, PVRDMA_LINK_MAX_INLINE);
            sink.dst = pvrdma_link_frame(l, PVRDMA_LINK_DATA, 0, tx->id, n);
        }
        pvrdma_core_enter(core);
        if (tx->type == PVRDMA_LINK_REQ) {
            ret = pvrdma_sgl_xfer(src, tx->sent, n, false,
                                  pvrdma_link_sink_put, &sink);
        } else {
            ret = pvrdma_fabric_rc_data(tx->ex, tx->sent, n,
                                        pvrdma_link_sink_put, &sink);
            if (tx->ex->done) {
                ret = -1;
            }
        }
        pvrdma_core_leave(core);
        if (ret != PVRDMA_COPY_OK) {
            if (!l->shm) {
                /* Take the half-built DATA frame back. */
                g_byte_array_set_size(l->obuf, l->obuf->len - n -
                                      PVRDMA_LINK_HDR_SIZE);
                l->frames_out--;
                l->bytes_out -= PVRDMA_LINK_HDR_SIZE + n;
            }
            if (tx->type == PVRDMA_LINK_REQ) {
                PvrdmaFabricReq *req = tx->req;

                pvrdma_link_tx_end(l, tx, true);
                pvrdma_link_req_finish(req, PVRDMA_WC_LOC_PROT_ERR, false);
            } else {
                pvrdma_link_tx_end(l, tx, true);
            }
            continue;
        }
        if (l->shm) {
            uint8_t *b = pvrdma_link_frame(l, PVRDMA_LINK_DATA, 0, tx->id,
                                           PVRDMA_LINK_SHM_DATA_SIZE);

            wr32(b, n);
            l->tx_head += n;
            l->bytes_out += n;
            pvrdma_link_ring_use(l);
        }
        tx->sent += n;
        if (tx->sent == tx->len) {
            /*
             * Done at once, not at the next round: the output may be
             * full now, and the answer can arrive before we pump again.
             */
            pvrdma_link_tx_end(l, tx, false);
        }
    }
    return l->obuf->len != before;
}

/*
 * Send what the streams have: flush, and while the output has room
 * produce more and flush again.  Flushing first matters: called because
 * the socket became writable after a full output, the flush may empty
 * the output, and the streams must then go on (nothing else would call
 * us: a requester whose READs are all out waits and sends nothing).
 */
static void pvrdma_link_quiesce_answer(PvrdmaLink *l);
static bool pvrdma_link_holds_expire(PvrdmaLink *l, int64_t now);

static void pvrdma_link_pump(PvrdmaLink *l)
{
    if (!l->dead && l->up) {
        pvrdma_link_quiesce_answer(l);
    }
    while (!l->dead && pvrdma_link_flush(l) &&
           pvrdma_link_pending(l) < PVRDMA_LINK_OBUF_HIGH &&
           pvrdma_link_produce(l)) {
        /* room, and more output: flush it */
    }
}

static PvrdmaLinkTx *pvrdma_link_tx_add(PvrdmaLink *l, uint8_t type,
                                        uint32_t id, uint64_t len)
{
    PvrdmaLinkTx *tx = g_new0(PvrdmaLinkTx, 1);

    tx->type = type;
    tx->id = id;
    tx->len = len;
    tx->node.data = tx;
    g_queue_push_tail_link(&l->txq, &tx->node);
    l->txq_len++;
    return tx;
}

/* ---- requester ----------------------------------------------------------- */


/*
 * IBA local ACK timeout: 4.096 us << timeout, times (retry_cnt + 1)
 * tries; 0 waits forever.  A software fabric on a busy host cannot keep
 * sub-second promises, so it waits at least PVRDMA_LINK_MIN_TIMEOUT_NS.
 */
/* An incoming message whose bytes stopped coming this long is dropped. */
#define PVRDMA_LINK_STALL_NS        (5 * 1000 * 1000 * 1000LL)

int64_t pvrdma_link_qp_timeout(PvrdmaQp *qp)
{
    uint32_t t = qp->attr.timeout & 31;
    int64_t ns;

    if (!pvrdma_qp_reliable(qp)) {
        /* A datagram is not retried: past this it counts as lost. */
        return PVRDMA_LINK_MIN_TIMEOUT_NS;
    }
    if (!t) {
        return 0;
    }
    ns = (4096LL << MIN(t, 30)) * ((qp->attr.retry_cnt & 7) + 1);
    return MAX(ns, PVRDMA_LINK_MIN_TIMEOUT_NS);
}

PvrdmaFabricReq *pvrdma_fabric_req_new(PvrdmaFabricPort *port, PvrdmaQp *qp,
                                       PvrdmaSendWr *wr)
{
    PvrdmaFabricQp *fqp = qp->be;
    PvrdmaFabricReq *req = g_new0(PvrdmaFabricReq, 1);

    req->port = port;
    req->qp = qp;
    req->wr = wr;
    req->qnode.data = req;
    g_queue_push_tail_link(&fqp->reqs, &req->qnode);
    if (pvrdma_fabric_op_reads(wr->opcode)) {
        fqp->nrd++;
    }
    return req;
}

void pvrdma_link_send_req(PvrdmaLink *l, PvrdmaFabricReq *req)
{
    const PvrdmaFabricHost *h = pvrdma_fabric_host(l->fab);
    PvrdmaSendWr *wr = req->wr;
    int64_t since = h->clock_ns(h->opaque);

    pvrdma_link_req_put(l, req);
    req->link = l;
    req->timeout_ns = pvrdma_link_qp_timeout(req->qp);
    req->since = since;
    req->gen = ((PvrdmaFabricQp *)req->qp->be)->gen;
    if ((req->qp->wq.nout >= req->qp->max_outstanding &&
         req->qp->max_outstanding <= PVRDMA_LINK_KICK_WINDOW) ||
        (pvrdma_fabric_op_reads(wr->opcode) &&
         ((PvrdmaFabricQp *)req->qp->be)->nrd >=
         MAX(req->qp->attr.max_rd_atomic, 1))) {
        l->kick_now = true;
    }
    if (pvrdma_fabric_op_has_payload(wr->opcode) && wr->length) {
        req->tx = pvrdma_link_tx_add(l, PVRDMA_LINK_REQ, req->id,
                                     wr->length);
        req->tx->req = req;
        l->stamped = req->tx;
        pvrdma_link_pump(l);
        l->stamped = NULL;
    } else {
        uint8_t *b = pvrdma_link_frame(l, PVRDMA_LINK_REQ, 0, req->id,
                                       PVRDMA_LINK_REQ_SIZE);

        pvrdma_link_encode_req(b, req);
        pvrdma_link_flush(l);
    }
    /* Only for its timeout: no main-loop wakeup per request. */
    pvrdma_fabric_arm_tick(l->fab, since);
}

void pvrdma_link_submit(PvrdmaLink *l, PvrdmaFabricPort *port, PvrdmaQp *qp,
                        PvrdmaSendWr *wr)
{
    pvrdma_link_send_req(l, pvrdma_fabric_req_new(port, qp, wr));
}

/* @req leaves the link (answered, failed or cancelled). */
static void pvrdma_link_req_unlink(PvrdmaFabricReq *req)
{
    PvrdmaLink *l = req->link;

    pvrdma_link_req_del(l, req);
    if (req->tx) {
        req->tx->req = NULL;    /* its stream aborts or is dropped */
        req->tx = NULL;
    }
    if (l->rx.req == req) {
        l->rx.req = NULL;       /* the rest of its response is dropped */
    }
}

void pvrdma_link_req_cancel(PvrdmaFabricReq *req)
{
    PvrdmaLink *l = req->link;

    if (!l) {
        pvrdma_fabric_unpark(req);  /* held for a moving peer */
        pvrdma_fabric_req_free(req);
        return;
    }
    pvrdma_link_req_unlink(req);
    pvrdma_fabric_req_free(req);
    pvrdma_link_pump(l);
}

void pvrdma_link_req_fail(PvrdmaFabricReq *req, uint32_t status)
{
    req->fail = status;
    /* The timer completes it, outside the guest's command. */
    req->timeout_ns = 1;
    req->since = 0;
    req->link->scan_at = 0;
    pvrdma_fabric_kick(req->link->fab);
}

/* The answer to one of our requests. */
static void pvrdma_link_answer(PvrdmaLink *l, PvrdmaFabricReq *req,
                               PvrdmaFabricAck *ack)
{
    pvrdma_link_req_unlink(req);
    if (ack->life && !req->wr->ud) {
        /* It took the request as ours: that is the life we talk to. */
        req->qp->peer_life = ack->life;
    }
    if (req->fail) {
        ack->status = req->fail;
        ack->rnr = false;
    } else if (ack->status == PVRDMA_WC_RETRY_EXC_ERR && !ack->lost &&
               !ack->rnr && !req->wr->ud && !req->wr->uc) {
        /* Dropped there: our retries run out first. */
        pvrdma_fabric_drop_wait(req, req->since);
        pvrdma_link_pump(l);
        return;
    }
    /* Lost: as when the partner is gone, retries exhausted, QP fatal. */
    pvrdma_fabric_req_answered(req, ack, ack->lost && !req->fail);
    pvrdma_link_pump(l);
}

void pvrdma_link_tick(PvrdmaLink *l, int64_t now, bool *busy)
{
    PvrdmaFabricReq *req;
    GSList *expired = NULL, *e;
    uint32_t i;

    if (l->rx_seen) {
        l->rx_seen = false;
        l->last_rx = now;
    }
    if (!l->up && !l->dead) {
        /* A peer that connects and stays silent (or trickles) goes. */
        if (now - l->born >= PVRDMA_LINK_HELLO_NS) {
            l->fab->hello_timeouts++;
            pvrdma_link_close(l, l->tls && !l->tls_done ?
                              "no TLS handshake from the peer within 10 s "
                              "(not a pvrdma fabric member, or a stalled "
                              "one)" :
                              "no HELLO from the peer within 10 s (not "
                              "a pvrdma fabric member, or a stalled one)");
            return;
        }
        *busy = true;
    }
    if (now < l->scan_at) {
        *busy |= l->nreqs > 0;
    } else {
        l->scan_at = now + PVRDMA_LINK_SCAN_NS;
        PVRDMA_LINK_FOREACH_REQ(l, i, req) {
            int64_t since = MAX(req->since, req->fail ? 0 : l->last_rx);

            if (req->timeout_ns && now - since >= req->timeout_ns) {
                expired = g_slist_prepend(expired,
                                          GUINT_TO_POINTER(req->id));
            } else {
                *busy = true;
            }
        }
    }
    /* By id: completing one may cancel others of its QP. */
    for (e = expired; e; e = e->next) {
        req = pvrdma_link_req_get(l, GPOINTER_TO_UINT(e->data));

        /* A peer that went silent: retries exhausted, QP fatal. */
        if (req) {
            pvrdma_link_req_finish(req, req->fail ? req->fail :
                                   PVRDMA_WC_RETRY_EXC_ERR, !req->fail);
        }
    }
    g_slist_free(expired);
    /*
     * A peer that stopped in the middle of a message must not hold our
     * receive WQE (and with an SRQ, every other QP's) forever: the
     * message is dropped, its remaining bytes discarded.
     */
    if (l->rx.open && l->rx.ex && !l->rx.ex->done &&
        now - l->last_rx >= PVRDMA_LINK_STALL_NS) {
        pvrdma_fabric_rc_abort(l->rx.ex);
    }
    if (l->rx.open && l->rx.ex && !l->rx.ex->done) {
        *busy = true;
    }
    if (pvrdma_link_holds_expire(l, now)) {
        *busy = true;
    }
    if (!l->dead) {
        pvrdma_link_pump(l);
    }
    if (pvrdma_link_shrink(l, now)) {
        *busy = true;
    }
}

/* ---- control frames we send ---------------------------------------------- */

void pvrdma_link_send_gids(PvrdmaLink *l, PvrdmaFabricPort *port,
                           bool leaving)
{
    uint32_t i, n = 0;
    uint8_t *b;

    if (l->dead || !l->up || pvrdma_fabric_port_silent(port)) {
        return;
    }
    for (i = 0; i < PVRDMA_FABRIC_MAX_GIDS && !leaving; i++) {
        n += port->gid_bound[i];
    }
    b = pvrdma_link_frame(l, PVRDMA_LINK_GIDS, 0, 0,
                          PVRDMA_LINK_GIDS_MIN + n * 16);
    b[0] = port->index;
    b[1] = port->claiming ? PVRDMA_LINK_GIDS_CLAIM : 0;
    wr16(b + 2, n);
    /* Its life and the earlier ones (Restored snapshots). */
    memset(b + 68, 0, PVRDMA_LINK_GIDS_MIN - 68);
    wr64(b + 68, port->life);
    b[76] = port->nancestors;
    for (i = 0; i < port->nancestors; i++) {
        wr64(b + 80 + 8 * i, port->ancestors[i]);
    }
    /* What proves the next move of these GIDs, for this peer only. */
    pvrdma_fabric_commitment(port->token, l->peer_instance, b + 4);
    if (port->claiming) {
        /* The proof the source committed to: we are where it went. */
        pvrdma_fabric_proof(port->claim_token, l->peer_instance, b + 36);
    } else {
        memset(b + 36, 0, 32);
    }
    for (i = 0, b += PVRDMA_LINK_GIDS_MIN; n && i < PVRDMA_FABRIC_MAX_GIDS;
         i++) {
        if (port->gid_bound[i]) {
            memcpy(b, port->gid[i], 16);
            b += 16;
        }
    }
    pvrdma_link_send_mgids(l, port, leaving);
}

void pvrdma_link_send_mgids(PvrdmaLink *l, PvrdmaFabricPort *port,
                            bool leaving)
{
    uint8_t mgids[PVRDMA_MCAST_MAX_GROUPS][16];
    unsigned n = 0;
    uint8_t *b;

    if (l->dead || !l->up || pvrdma_fabric_port_silent(port)) {
        return;
    }
    if (!leaving) {
        n = pvrdma_core_mcast_groups(port->core, mgids,
                                     PVRDMA_MCAST_MAX_GROUPS);
    }
    b = pvrdma_link_frame(l, PVRDMA_LINK_MGIDS, 0, 0,
                          PVRDMA_LINK_MGIDS_MIN + n * 16);
    memset(b, 0, PVRDMA_LINK_MGIDS_MIN);
    b[0] = port->index;
    wr16(b + 2, n);
    memcpy(b + PVRDMA_LINK_MGIDS_MIN, mgids, n * 16);
    pvrdma_link_flush(l);
}

bool pvrdma_link_has_mgid(PvrdmaLink *l, const uint8_t mgid[16])
{
    if (l->dead || !l->up) {
        return false;
    }
    for (unsigned i = 0; i < PVRDMA_FABRIC_MAX_PORTS; i++) {
        for (uint32_t j = 0; j < l->nmgids[i]; j++) {
            if (!memcmp(l->mgids[i][j], mgid, 16)) {
                return true;
            }
        }
    }
    return false;
}

void pvrdma_link_send_mcast(PvrdmaLink *l, const PvrdmaSendWr *wr,
                            const void *payload)
{
    PvrdmaFabricReq req = { .wr = (PvrdmaSendWr *)wr };
    uint8_t *b;

    if (l->dead || !l->up) {
        return;
    }
    if (pvrdma_link_pending(l) >= PVRDMA_LINK_MCAST_BACKLOG) {
        return;                 /* lost, as on a congested network */
    }
    b = pvrdma_link_frame(l, PVRDMA_LINK_MCAST, 0, 0,
                          PVRDMA_LINK_REQ_SIZE + wr->length);
    pvrdma_link_encode_req(b, &req);
    memcpy(b + PVRDMA_LINK_REQ_SIZE, payload, wr->length);
    pvrdma_link_flush(l);
}

void pvrdma_link_send_peers(PvrdmaLink *l, const uint64_t *instance,
                            const PvrdmaNetAddr *addr, unsigned n)
{
    uint8_t *b;
    unsigned i;

    if (l->dead || !l->up) {
        return;
    }
    n = MIN(n, PVRDMA_LINK_MAX_PEERS);
    b = pvrdma_link_frame(l, PVRDMA_LINK_PEERS, 0, 0,
                          PVRDMA_LINK_PEERS_MIN + n * PVRDMA_LINK_PEER_SIZE);
    memset(b, 0, PVRDMA_LINK_PEERS_MIN + n * PVRDMA_LINK_PEER_SIZE);
    wr16(b, n);
    for (i = 0; i < n; i++) {
        uint8_t *e = b + PVRDMA_LINK_PEERS_MIN + i * PVRDMA_LINK_PEER_SIZE;

        wr64(e, instance[i]);
        memcpy(e + 8, addr[i].ip, 16);
        wr16(e + 24, addr[i].port);
    }
    pvrdma_link_flush(l);
}

/* QUIESCE or QUIESCED for port @index. */
static void pvrdma_link_send_port_frame(PvrdmaLink *l, uint8_t type,
                                        unsigned index)
{
    uint8_t *b = pvrdma_link_frame(l, type, 0, 0, PVRDMA_LINK_QUIESCE_SIZE);

    memset(b, 0, PVRDMA_LINK_QUIESCE_SIZE);
    b[0] = index;
    pvrdma_link_flush(l);
}

/* Ask the peer to hold its requests to @index (that port moves). */
void pvrdma_link_send_quiesce(PvrdmaLink *l, unsigned index)
{
    if (l->dead || !l->up) {
        return;
    }
    bit_set(l->quiesced, index, false);
    pvrdma_link_send_port_frame(l, PVRDMA_LINK_QUIESCE, index);
}

bool pvrdma_link_peer_quiesced(PvrdmaLink *l, unsigned index)
{
    return !pvrdma_link_is_up(l) || bit_get(l->quiesced, index);
}

/* Does one of our requests on @l still wait for port @index's answer? */
static bool pvrdma_link_reqs_to(PvrdmaLink *l, unsigned index)
{
    const PvrdmaLinkRPort *rp = l->rports[index];
    PvrdmaFabricReq *req;
    uint32_t i;

    PVRDMA_LINK_FOREACH_REQ(l, i, req) {
        const PvrdmaSendWr *wr = req->wr;
        uint32_t to = wr->dst_qpn >> PVRDMA_FABRIC_QPN_INDEX_SHIFT;

        if (to == index || (!to && pvrdma_link_rport_has(rp, wr->dgid))) {
            return true;
        }
    }
    return false;
}

/* Answer QUIESCE once nothing of ours is out to that port any more. */
static void pvrdma_link_quiesce_answer(PvrdmaLink *l)
{
    unsigned i, owed = 0;

    for (i = 0; i < G_N_ELEMENTS(l->owe_quiesced); i++) {
        owed |= l->owe_quiesced[i];
    }
    for (i = 0; owed && i < PVRDMA_FABRIC_MAX_PORTS && !l->dead; i++) {
        if (!bit_get(l->owe_quiesced, i) || pvrdma_link_reqs_to(l, i)) {
            continue;
        }
        bit_set(l->owe_quiesced, i, false);
        pvrdma_link_send_port_frame(l, PVRDMA_LINK_QUIESCED, i);
    }
}

/* Is the port behind @l that owns (@gid, @qpn) moving (requests wait)? */
bool pvrdma_link_held(PvrdmaLink *l, const uint8_t gid[16], uint32_t qpn)
{
    uint32_t index = qpn >> PVRDMA_FABRIC_QPN_INDEX_SHIFT;
    unsigned i;

    if (index) {
        return index < PVRDMA_FABRIC_MAX_PORTS && l->rports[index] &&
               l->rports[index]->held;
    }
    for (i = 0; i < PVRDMA_FABRIC_MAX_PORTS; i++) {
        if (pvrdma_link_rport_has(l->rports[i], gid)) {
            return l->rports[i]->held;
        }
    }
    return false;
}

/*
 * Holds that lasted PVRDMA_FABRIC_HOLD_NS: the port never came back
 * (its migration failed without a word, its destination never came),
 * so its GIDs are forgotten and what waited for it fails like a request
 * to a dead peer.
 */
static bool pvrdma_link_holds_expire(PvrdmaLink *l, int64_t now)
{
    bool any = false, held = false;
    unsigned i;

    for (i = 0; i < PVRDMA_FABRIC_MAX_PORTS; i++) {
        PvrdmaLinkRPort *rp = l->rports[i];

        if (rp && rp->held) {
            if (now - rp->held_since >= PVRDMA_FABRIC_HOLD_NS) {
                pvrdma_fabric_hold_expired(l->fab, i, rp);
                g_free(rp);
                l->rports[i] = NULL;
                any = true;
            } else {
                held = true;
            }
        }
    }
    if (any) {
        pvrdma_fabric_release_parked(l->fab);
    }
    return held;
}

void pvrdma_link_send_recv_posted(PvrdmaLink *l, const uint8_t gid[16],
                                  uint32_t qpn, const uint8_t dgid[16],
                                  uint32_t dqpn)
{
    uint8_t *b;

    if (l->dead || !l->up) {
        return;
    }
    b = pvrdma_link_frame(l, PVRDMA_LINK_RECV_POSTED, 0, 0,
                          PVRDMA_LINK_RECV_POSTED_SIZE);
    memcpy(b, gid, 16);
    wr32(b + 16, qpn);
    memcpy(b + 20, dgid, 16);
    wr32(b + 36, dqpn);
    pvrdma_link_flush(l);
}

/* ---- frames we receive --------------------------------------------------- */

static bool pvrdma_link_hello(PvrdmaLink *l, const uint8_t *b)
{
    uint32_t ring = rd32(b + 8);
    struct stat st;
    int seals;
    void *p;

    l->peer_instance = rd64(b);
    l->peer_serial = rd64(b + 16);
    if (!l->peer_serial || rd32(b + 12)) {
        return false;
    }
    if (!l->shm) {
        return ring == 0;
    }
    if (ring != PVRDMA_LINK_RING_SIZE || l->peer_fd < 0 ||
        fstat(l->peer_fd, &st) < 0 || st.st_size != PVRDMA_LINK_RING_MAP) {
        return false;
    }
    /* A ring the peer could shrink would fault (SIGBUS) in our reads. */
    seals = fcntl(l->peer_fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
        return false;
    }
    p = mmap(NULL, PVRDMA_LINK_RING_MAP, PROT_READ, MAP_SHARED, l->peer_fd,
             0);
    if (p == MAP_FAILED) {
        l->res_err = errno;
    }
    close(l->peer_fd);
    l->peer_fd = -1;
    if (p == MAP_FAILED) {
        return false;
    }
    l->rx_ring = p;
    l->peer = (const PvrdmaLinkShared *)(l->rx_ring + PVRDMA_LINK_RING_SIZE +
                                         PVRDMA_LINK_FRAME_RING);
    return true;
}

/* Members' TCP addresses: n, zeros, then (instance, IPv6, port, zeros). */
static bool pvrdma_link_peers(PvrdmaLink *l, const uint8_t *b, uint32_t len)
{
    uint64_t instance[PVRDMA_LINK_MAX_PEERS];
    PvrdmaNetAddr addr[PVRDMA_LINK_MAX_PEERS];
    uint32_t n = rd16(b), i, k;

    if (n > PVRDMA_LINK_MAX_PEERS ||
        len != PVRDMA_LINK_PEERS_MIN + n * PVRDMA_LINK_PEER_SIZE) {
        return false;
    }
    for (k = 2; k < PVRDMA_LINK_PEERS_MIN; k++) {
        if (b[k]) {
            return false;
        }
    }
    for (i = 0; i < n; i++) {
        const uint8_t *e = b + PVRDMA_LINK_PEERS_MIN +
                           i * PVRDMA_LINK_PEER_SIZE;

        instance[i] = rd64(e);
        memcpy(addr[i].ip, e + 8, 16);
        addr[i].port = rd16(e + 24);
        if (!instance[i] || !addr[i].port) {
            return false;
        }
        for (k = 26; k < PVRDMA_LINK_PEER_SIZE; k++) {
            if (e[k]) {
                return false;
            }
        }
    }
    pvrdma_fabric_net_peers_in(l->fab, l, instance, addr, n);
    return true;
}

static bool pvrdma_link_sender_owns(PvrdmaLink *l, const uint8_t gid[16],
                                    uint32_t qpn);

static bool pvrdma_link_gids(PvrdmaLink *l, const uint8_t *b, uint32_t len)
{
    uint32_t index = b[0], n = rd16(b + 2), i, nanc = b[76];
    uint64_t order = 0;
    PvrdmaLinkRPort *rp;

    if ((b[1] & ~PVRDMA_LINK_GIDS_CLAIM) || n > PVRDMA_FABRIC_MAX_GIDS ||
        len != PVRDMA_LINK_GIDS_MIN + n * 16 || !rd64(b + 68) ||
        nanc > PVRDMA_MOVE_LINEAGE || b[77] || b[78] || b[79]) {
        return false;
    }
    for (i = 0; i < PVRDMA_MOVE_LINEAGE; i++) {
        if (!rd64(b + 80 + 8 * i) != (i >= nanc)) {
            return false;       /* ancestors nonzero, the rest zero */
        }
    }
    if (bit_get(l->moved_away, index)) {
        /* That port moved to another link with proof: not this one's. */
        return true;
    }
    if (b[1] & PVRDMA_LINK_GIDS_CLAIM) {
        /*
         * A migration's destination: the holder it proves it follows
         * gives its GIDs up (no match: an ordinary announcement).
         */
        order = pvrdma_fabric_claim(l->fab, l, index, b + 36);
    }
    if (!order && l->rports[index]) {
        order = l->rports[index]->order;    /* the same port, again */
    }
    g_free(l->rports[index]);
    l->rports[index] = NULL;
    if (n) {
        rp = g_malloc0(sizeof(*rp) + n * 16);
        rp->order = order ? order : pvrdma_fabric_next_order(l->fab);
        rp->n = n;
        memcpy(rp->commit, b + 4, 32);
        rp->life = rd64(b + 68);
        rp->nancestors = nanc;
        for (i = 0; i < nanc; i++) {
            rp->ancestors[i] = rd64(b + 80 + 8 * i);
        }
        memcpy(rp->gid, b + PVRDMA_LINK_GIDS_MIN, n * 16);
        l->rports[index] = rp;
        for (i = 0; i < n; i++) {
            uint32_t qpn = index << PVRDMA_FABRIC_QPN_INDEX_SHIFT;

            if (!pvrdma_link_sender_owns(l, rp->gid[i], qpn)) {
                /* Kept, but the first holder keeps it (routing). */
                char g[PVRDMA_GID_STR];

                l->fab->gids_refused++;
                pvrdma_fabric_gid_str(rp->gid[i], g);
                pvrdma_fabric_say(l->fab, PVRDMA_SAY_GID, "pvrdma-fabric: "
                                  "link %s announced GID %s, which another "
                                  "device of the fabric holds: refused "
                                  "(two VMs with one MAC or IP address, or "
                                  "a peer claiming another's GID)",
                                  l->name, g);
            }
        }
    }
    /* A hold of this port ended (it came back, or arrived here). */
    pvrdma_fabric_release_parked(l->fab);
    return true;
}

/*
 * The peer's port @index moves: hold our requests to it, answer when
 * none is out any more.
 */
static bool pvrdma_link_quiesce(PvrdmaLink *l, const uint8_t *b)
{
    const PvrdmaFabricHost *h = pvrdma_fabric_host(l->fab);
    PvrdmaLinkRPort *rp = l->rports[b[0]];

    if (b[1] || b[2] || b[3]) {
        return false;
    }
    if (rp && !rp->held) {
        rp->held = true;
        rp->held_since = h->clock_ns(h->opaque);
        pvrdma_fabric_arm_tick(l->fab, rp->held_since);
    }
    bit_set(l->owe_quiesced, b[0], true);
    pvrdma_link_quiesce_answer(l);
    return true;
}

/* A claim proved @l's port @index (committed to @commit) moved away. */
uint64_t pvrdma_link_take_rport(PvrdmaLink *l, unsigned index,
                                const uint8_t commit[32])
{
    PvrdmaLinkRPort *rp = l->rports[index];
    uint64_t order;

    if (!rp || memcmp(rp->commit, commit, 32)) {
        return 0;
    }
    order = rp->order;
    g_free(rp);
    l->rports[index] = NULL;
    bit_set(l->moved_away, index, true);
    return order;
}

static bool pvrdma_link_decode_req(const uint8_t *b, PvrdmaFabricMsg *msg)
{
    memset(msg, 0, sizeof(*msg));
    msg->opcode = rd32(b);
    msg->src_qpn = rd32(b + 4);
    msg->dst_qpn = rd32(b + 8);
    memcpy(msg->sgid, b + 12, 16);
    memcpy(msg->dgid, b + 28, 16);
    msg->sl = b[44];
    msg->solicited = b[45] != 0;
    msg->imm_data = rd32(b + 48);
    msg->inv_rkey = rd32(b + 52);
    msg->rkey = rd32(b + 56);
    msg->gen = rd32(b + 60);
    msg->remote_addr = rd64(b + 64);
    msg->compare_add = rd64(b + 72);
    msg->swap = rd64(b + 80);
    msg->length = rd64(b + 88);
    msg->qkey = rd32(b + 96);
    msg->flow_label = rd32(b + 100);
    msg->tclass = b[104];
    msg->hop_limit = b[105];
    msg->ud = b[106] == 1;
    msg->uc = b[106] == 2;
    msg->xrc = b[106] == 3;
    msg->xrc_srqn = msg->xrc ? msg->qkey : 0;
    msg->src_life = rd64(b + 112);
    msg->dst_life = rd64(b + 120);
    if (b[107] || b[108] || b[109] || b[110] || b[111]) {
        return false;
    }
    /* UC: SENDs and WRITEs only. */
    if (msg->uc && (msg->opcode == PVRDMA_WR_RDMA_READ ||
                    msg->opcode == PVRDMA_WR_ATOMIC_CMP_AND_SWP ||
                    msg->opcode == PVRDMA_WR_ATOMIC_FETCH_AND_ADD ||
                    msg->opcode == PVRDMA_WR_ATOMIC_WRITE)) {
        return false;
    }
    /* A datagram: SEND or SEND_WITH_IMM of at most one MTU. */
    if (b[106] > 3 || msg->xrc_srqn > PVRDMA_XRC_SRQN_MASK || (msg->ud &&
        ((msg->opcode != PVRDMA_WR_SEND &&
          msg->opcode != PVRDMA_WR_SEND_WITH_IMM) ||
         msg->length > PVRDMA_PORT_UD_MAX_MSG ||
         msg->flow_label > 0xFFFFF))) {
        return false;
    }
    /* Remote operations only, 24-bit QPNs, lengths a port accepts. */
    switch (msg->opcode) {
    case PVRDMA_WR_SEND:
    case PVRDMA_WR_SEND_WITH_IMM:
    case PVRDMA_WR_SEND_WITH_INV:
    case PVRDMA_WR_RDMA_WRITE:
    case PVRDMA_WR_RDMA_WRITE_WITH_IMM:
    case PVRDMA_WR_RDMA_READ:
        break;
    case PVRDMA_WR_ATOMIC_CMP_AND_SWP:
    case PVRDMA_WR_ATOMIC_FETCH_AND_ADD:
    case PVRDMA_WR_ATOMIC_WRITE:
        if (msg->length != sizeof(uint64_t)) {
            return false;
        }
        break;
    default:
        return false;
    }
    return msg->src_qpn < (1u << 24) && msg->dst_qpn < (1u << 24) &&
           msg->length <= PVRDMA_PORT_MAX_MSG_SZ;
}

/* The port behind @l that owns (@gid, @qpn), as announced, or NULL. */
static const PvrdmaLinkRPort *pvrdma_link_rport_of(PvrdmaLink *l,
                                                   const uint8_t gid[16],
                                                   uint32_t qpn)
{
    uint32_t index = qpn >> PVRDMA_FABRIC_QPN_INDEX_SHIFT;
    unsigned i;

    if (index) {
        return pvrdma_link_rport_has(l->rports[index], gid) ?
               l->rports[index] : NULL;
    }
    for (i = 0; i < PVRDMA_FABRIC_MAX_PORTS; i++) {
        if (pvrdma_link_rport_has(l->rports[i], gid)) {
            return l->rports[i];
        }
    }
    return NULL;
}

/*
 * Does the peer behind @l own @gid for @qpn's port: it announced it, no
 * port of this process has it, and no other member announced it first?
 * (Its own older link, a duplicate about to close, counts as it.)  What
 * a peer sends from a GID it does not own is dropped: it would be
 * another device's connections it spoke for (docs/fabric.md, "Hostile
 * input").
 */
static bool pvrdma_link_sender_owns(PvrdmaLink *l, const uint8_t gid[16],
                                    uint32_t qpn)
{
    uint32_t index = qpn >> PVRDMA_FABRIC_QPN_INDEX_SHIFT;
    PvrdmaLink *owner;
    unsigned i;

    if (!pvrdma_link_rport_of(l, gid, qpn)) {
        return false;
    }
    for (i = 0; i < PVRDMA_FABRIC_MAX_PORTS; i++) {
        PvrdmaFabricPort *port = l->fab->ports[i];

        /* (a port of ours moving out: its destination takes it over) */
        if (port && !port->moving && (!index || index == i) &&
            pvrdma_core_has_gid(port->core, gid)) {
            return false;
        }
    }
    owner = pvrdma_fabric_route(l->fab, gid, qpn);
    return owner == l ||
           (owner && owner->peer_instance == l->peer_instance);
}

/* Count and say what was dropped for pvrdma_link_sender_owns(). */
static void pvrdma_link_unowned(PvrdmaLink *l, const char *what,
                                const uint8_t gid[16])
{
    char g[PVRDMA_GID_STR];

    l->fab->unowned_dropped++;
    pvrdma_fabric_gid_str(gid, g);
    pvrdma_fabric_say(l->fab, PVRDMA_SAY_GID, "pvrdma-fabric: link %s: "
                      "dropped a %s from GID %s, which that peer does not "
                      "hold (another device announced it first, or it is "
                      "this process's): a GID belongs to one device of a "
                      "fabric at a time", l->name, what, g);
}

enum {
    PVRDMA_LINK_LIFE_OK,
    PVRDMA_LINK_LIFE_PEER_PARTED,   /* the requester is not the run we knew */
    PVRDMA_LINK_LIFE_WE_PARTED,     /* we are not the run it knew */
};

/*
 * Restored snapshots (docs/fabric.md): a request from the partner @qp is
 * connected to is taken if it comes from the life of the partner's port
 * that @qp last heard from, or a later one (that life among the
 * ancestors its port announced), and is meant for a life of ours (or
 * nobody in particular yet).  Taken, @qp now knows the requester's life.
 */
static int pvrdma_link_life_check(PvrdmaLink *l, PvrdmaFabricPort *port,
                                  PvrdmaQp *qp, const PvrdmaFabricMsg *msg)
{
    const PvrdmaLinkRPort *rp;
    uint32_t i;

    if (qp->attr.dest_qp_num != msg->src_qpn ||
        memcmp(qp->attr.ah_attr.grh.dgid, msg->sgid, 16) ||
        qp->state < PVRDMA_QPS_RTR || qp->state > PVRDMA_QPS_SQD) {
        return PVRDMA_LINK_LIFE_OK;     /* not its partner: rc_begin drops */
    }
    if (msg->dst_life && !pvrdma_fabric_life_mine(port, msg->dst_life)) {
        return PVRDMA_LINK_LIFE_WE_PARTED;
    }
    if (qp->peer_life && qp->peer_life != msg->src_life) {
        rp = msg->src_life ?
             pvrdma_link_rport_of(l, msg->sgid, msg->src_qpn) : NULL;
        if (!rp || rp->life != msg->src_life) {
            return PVRDMA_LINK_LIFE_PEER_PARTED;
        }
        for (i = 0; i < rp->nancestors; i++) {
            if (rp->ancestors[i] == qp->peer_life) {
                break;
            }
        }
        if (i == rp->nancestors) {
            return PVRDMA_LINK_LIFE_PEER_PARTED;
        }
    }
    if (msg->src_life) {
        qp->peer_life = msg->src_life;
    }
    return PVRDMA_LINK_LIFE_OK;
}

static bool pvrdma_link_req(PvrdmaLink *l, uint32_t id, const uint8_t *b)
{
    PvrdmaFabricExec *ex;
    PvrdmaFabricPort *port;
    PvrdmaFabricMsg msg;
    PvrdmaQp *qp;
    bool payload, moves = false, lost = false;

    if (!pvrdma_link_decode_req(b, &msg)) {
        return false;
    }
    payload = pvrdma_fabric_op_has_payload(msg.opcode) && msg.length;
    if (payload && l->rx.open) {
        return false;           /* one stream at a time */
    }
    l->fab->sends_in += payload;
    /* (made empty by rc_begin, or below) */
    ex = g_new(PvrdmaFabricExec, 1);
    if (pvrdma_link_sender_owns(l, msg.sgid, msg.src_qpn)) {
        port = pvrdma_fabric_lookup(l->fab, msg.dgid, msg.dst_qpn, &qp);
    } else {
        /* Dropped, as for a QP not here; its payload is read and lost. */
        pvrdma_link_unowned(l, "request", msg.sgid);
        port = NULL;
    }
    if (port && !msg.ud) {
        PvrdmaFabricQp *fqp = qp->be;
        int life = pvrdma_link_life_check(l, port, qp, &msg);

        if (life == PVRDMA_LINK_LIFE_WE_PARTED) {
            /* A copy of an older state of ours: this connection is over. */
            pvrdma_core_enter(port->core);
            pvrdma_core_qp_error(port->core, qp, PVRDMA_EQE_TYPE_QP_FATAL);
            pvrdma_core_leave(port->core);
        }
        if (life != PVRDMA_LINK_LIFE_OK) {
            port = NULL;
            lost = true;
        } else if (fqp->dropping && msg.gen == fqp->drop_gen) {
            port = NULL;        /* after a NAK of its generation */
        } else {
            fqp->dropping = false;
        }
    }
    if (port) {
        pvrdma_core_enter(port->core);
        moves = pvrdma_fabric_rc_begin(port, qp, &msg, ex);
        pvrdma_core_leave(port->core);
    } else {
        /* No such QP here: dropped, the requester runs out of retries. */
        pvrdma_fabric_exec_clear(ex);
        ex->ack.lost = lost;
        ex->msg = msg;
        ex->done = true;
        ex->ack.status = PVRDMA_WC_RETRY_EXC_ERR;
    }
    if (ex->ack.rnr && port) {
        ((PvrdmaFabricQp *)qp->be)->rnr_link = l->serial;
    }
    if (moves && msg.length) {
        ex->async = true;
        ex->node.data = ex;
        g_queue_push_tail_link(&port->execs, &ex->node);
    } else if (moves) {
        /* Zero bytes: nothing to wait for. */
        pvrdma_core_enter(port->core);
        pvrdma_fabric_rc_end(ex);
        pvrdma_core_leave(port->core);
    }
    if (payload) {
        /* Its bytes follow whatever the outcome; the answer after them. */
        l->rx.open = true;
        l->rx.id = id;
        l->rx.len = msg.length;
        l->rx.got = 0;
        l->rx.ex = ex;
        l->rx.req = NULL;
        return true;
    }
    if (msg.opcode == PVRDMA_WR_RDMA_READ && moves && msg.length) {
        PvrdmaLinkTx *tx;

        if (l->txq_len >= PVRDMA_LINK_MAX_QUEUED) {
            /* More READs than any honest peer has QPs: drop it. */
            pvrdma_fabric_rc_abort(ex);
            pvrdma_link_ack_exec(l, id, ex);
            pvrdma_fabric_exec_free(ex);
            return true;
        }
        tx = pvrdma_link_tx_add(l, PVRDMA_LINK_RESP, id, msg.length);
        tx->ex = ex;
        return true;
    }
    pvrdma_link_ack_exec(l, id, ex);
    pvrdma_fabric_exec_free(ex);
    return true;
}

static bool pvrdma_link_resp(PvrdmaLink *l, uint32_t id, const uint8_t *b)
{
    PvrdmaFabricReq *req = pvrdma_link_req_get(l, id);
    uint64_t len = rd64(b);

    if (l->rx.open || !len || len > PVRDMA_PORT_MAX_MSG_SZ) {
        return false;
    }
    if (req && (req->wr->opcode != PVRDMA_WR_RDMA_READ ||
                len != req->wr->length || req->resp_open || req->got)) {
        return false;
    }
    if (!req && (id == 0 || (int32_t)(id - l->next_id) > 0)) {
        return false;           /* never asked for */
    }
    l->rx.open = true;
    l->rx.id = id;
    l->rx.len = len;
    l->rx.got = 0;
    l->rx.ex = NULL;
    l->rx.req = req;            /* NULL: timed out, its bytes are dropped */
    if (req) {
        req->resp_open = true;
    }
    return true;
}

/* PvrdmaPeerCopy from the bytes of a DATA frame (inline or in the ring). */
typedef struct PvrdmaLinkSource {
    PvrdmaLink *l;
    const uint8_t *src;         /* inline */
    uint64_t pos;               /* ring */
} PvrdmaLinkSource;

static int pvrdma_link_source_get(void *opaque, uint64_t off, void *buf,
                                  uint64_t n)
{
    PvrdmaLinkSource *s = opaque;

    if (s->src) {
        memcpy(buf, s->src + off, n);
    } else {
        pvrdma_link_ring_get(s->l, s->pos + off, buf, n);
    }
    return 0;
}

/* The receive stream ended (all bytes, or aborted by the sender). */
static void pvrdma_link_rx_end(PvrdmaLink *l, bool aborted)
{
    PvrdmaFabricExec *ex = l->rx.ex;

    l->rx.open = false;
    if (l->rx.req) {
        l->rx.req->resp_open = false;
        l->rx.req = NULL;
    }
    if (!ex) {
        return;
    }
    l->rx.ex = NULL;
    if (aborted) {
        /* The requester gave up: no answer, the receive WQE stays. */
        pvrdma_fabric_exec_free(ex);
        return;
    }
    if (ex->port) {
        pvrdma_core_enter(ex->port->core);
        pvrdma_fabric_rc_end(ex);
        pvrdma_core_leave(ex->port->core);
    }
    pvrdma_link_ack_exec(l, l->rx.id, ex);
    pvrdma_fabric_exec_free(ex);
}

/* Hand the peer's ring bytes we took in back to it (shm links). */
static void pvrdma_link_give_credit(PvrdmaLink *l)
{
    if (l->rx_uncredited) {
        uint8_t *b = pvrdma_link_frame(l, PVRDMA_LINK_CREDIT, 0, 0,
                                       PVRDMA_LINK_CREDIT_SIZE);

        wr32(b, l->rx_uncredited);
        l->rx_uncredited = 0;
    }
}

static bool pvrdma_link_data(PvrdmaLink *l, uint32_t id, uint16_t flags,
                             const uint8_t *b, uint32_t len)
{
    PvrdmaLinkSource src = { .l = l };
    uint64_t n;

    if (!l->rx.open || id != l->rx.id || (flags & ~PVRDMA_LINK_DATA_ABORT)) {
        return false;
    }
    if (l->shm) {
        if (len != PVRDMA_LINK_SHM_DATA_SIZE) {
            return false;
        }
        n = rd32(b);
        /* Only bytes the peer could have written under its credit. */
        if (n > PVRDMA_LINK_SHM_CHUNK ||
            l->rx_uncredited + n > PVRDMA_LINK_RING_SIZE) {
            return false;
        }
        src.pos = l->rx_tail;
    } else {
        n = len;
        src.src = b;
    }
    if (flags & PVRDMA_LINK_DATA_ABORT) {
        if (n) {
            return false;
        }
        pvrdma_link_rx_end(l, true);
        return true;
    }
    if (!n || n > l->rx.len - l->rx.got) {
        return false;
    }
    if (l->rx.ex && l->rx.ex->port) {
        PvrdmaFabricExec *ex = l->rx.ex;

        pvrdma_core_enter(ex->port->core);
        pvrdma_fabric_rc_data(ex, l->rx.got, n, pvrdma_link_source_get, &src);
        pvrdma_core_leave(ex->port->core);
    } else if (l->rx.req) {
        PvrdmaFabricReq *req = l->rx.req;

        /* Memory gone (req->fail): the bytes are counted, not placed. */
        if (!req->fail) {
            pvrdma_core_enter(req->port->core);
            if (pvrdma_sgl_xfer(&req->wr->local, l->rx.got, n, true,
                                pvrdma_link_source_get,
                                &src) != PVRDMA_COPY_OK) {
                req->fail = PVRDMA_WC_LOC_PROT_ERR;
            }
            pvrdma_core_leave(req->port->core);
        }
        req->got += n;
    }
    if (l->shm) {
        l->rx_tail += n;
        l->rx_uncredited += n;
        l->bytes_in += n;
        if (l->rx.ex && n >= PVRDMA_LINK_STREAM_PIECE) {
            /* A large piece of a request streams like a request. */
            l->fab->sends_in++;
        }
    }
    l->rx.got += n;
    if (l->rx.got == l->rx.len) {
        pvrdma_link_rx_end(l, false);
    }
    if (l->rx_uncredited >= PVRDMA_LINK_SHM_STEP) {
        /* The sender may be waiting for this room now. */
        pvrdma_link_give_credit(l);
        pvrdma_link_flush(l);
    }
    return true;
}

static bool pvrdma_link_ack(PvrdmaLink *l, uint32_t id, const uint8_t *b)
{
    PvrdmaFabricReq *req = pvrdma_link_req_get(l, id);
    PvrdmaFabricAck ack = {
        .status = rd32(b),
        .rnr = b[4] != 0,
        .rnr_timer = b[5] & 31,
        .atomic_orig = rd64(b + 8),
        .lost = b[6] & PVRDMA_LINK_ACK_LOST,
        .life = rd64(b + 16),
    };

    if ((b[6] & ~PVRDMA_LINK_ACK_LOST) || b[7] ||
        (ack.lost && (ack.status != PVRDMA_WC_RETRY_EXC_ERR || ack.rnr ||
                      ack.life))) {
        return false;
    }
    if (!req) {
        /* Timed out or cancelled already; one never sent is a lie. */
        return id != 0 && (int32_t)(id - l->next_id) <= 0;
    }
    if (req->tx || req->resp_open || ack.status > PVRDMA_WC_GENERAL_ERR) {
        return false;           /* answered before its data went/came */
    }
    if (ack.status == PVRDMA_WC_SUCCESS && !ack.rnr &&
        req->wr->opcode == PVRDMA_WR_RDMA_READ &&
        req->got != req->wr->length) {
        return false;           /* claims a READ it did not deliver */
    }
    pvrdma_link_answer(l, req, &ack);
    return true;
}

static bool pvrdma_link_credit(PvrdmaLink *l, const uint8_t *b)
{
    uint32_t n = rd32(b);

    if (!l->shm || n > l->tx_head - l->tx_acked) {
        return false;
    }
    l->tx_acked += n;
    return true;
}

static bool pvrdma_link_recv_posted(PvrdmaLink *l, const uint8_t *b)
{
    uint32_t qpn = rd32(b + 16), dqpn = rd32(b + 36);

    if (qpn >= (1u << 24) || dqpn >= (1u << 24)) {
        return false;
    }
    if (!pvrdma_link_sender_owns(l, b, qpn)) {
        pvrdma_link_unowned(l, "RECV_POSTED", b);
        return true;
    }
    pvrdma_fabric_recv_posted(l->fab, b, qpn, b + 20, dqpn);
    return true;
}

/* A port's multicast groups (replacing what it announced before). */
static bool pvrdma_link_mgids(PvrdmaLink *l, const uint8_t *b, uint32_t len)
{
    uint32_t index = b[0], n = rd16(b + 2);

    if (index >= PVRDMA_FABRIC_MAX_PORTS || b[1] || rd32(b + 4) ||
        n > PVRDMA_MCAST_MAX_GROUPS || len != PVRDMA_LINK_MGIDS_MIN + n * 16) {
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (!pvrdma_mcast_gid(b + PVRDMA_LINK_MGIDS_MIN + i * 16)) {
            return false;
        }
    }
    g_free(l->mgids[index]);
    l->mgids[index] = n ? g_memdup2(b + PVRDMA_LINK_MGIDS_MIN, n * 16) : NULL;
    l->nmgids[index] = n;
    return true;
}

/*
 * A datagram to a group: a SEND or SEND_WITH_IMM of a UD QP of the
 * sender's to QPN 0xFFFFFF at a multicast GID, its payload inline.
 */
static bool pvrdma_link_mcast(PvrdmaLink *l, const uint8_t *b, uint32_t len)
{
    PvrdmaFabricMsg msg;

    if (!pvrdma_link_decode_req(b, &msg) || !msg.ud ||
        msg.dst_qpn != PVRDMA_QPN_MULTICAST || !pvrdma_mcast_gid(msg.dgid) ||
        msg.length != len - PVRDMA_LINK_REQ_SIZE) {
        return false;
    }
    if (!pvrdma_link_sender_owns(l, msg.sgid, msg.src_qpn)) {
        pvrdma_link_unowned(l, "multicast datagram", msg.sgid);
        return true;
    }
    pvrdma_fabric_mcast_deliver(l->fab, &msg, NULL,
                                b + PVRDMA_LINK_REQ_SIZE);
    return true;
}

/* Body sizes: exact for fixed frames, bounds for the others. */
static bool pvrdma_link_len_ok(PvrdmaLink *l, uint8_t type, uint32_t len)
{
    switch (type) {
    case PVRDMA_LINK_HELLO:
        return len == PVRDMA_LINK_HELLO_SIZE;
    case PVRDMA_LINK_GIDS:
        return len >= PVRDMA_LINK_GIDS_MIN && len <= PVRDMA_LINK_MAX_CTRL;
    case PVRDMA_LINK_REQ:
        return len == PVRDMA_LINK_REQ_SIZE;
    case PVRDMA_LINK_RESP:
        return len == PVRDMA_LINK_RESP_SIZE;
    case PVRDMA_LINK_DATA:
        return l->shm ? len == PVRDMA_LINK_SHM_DATA_SIZE :
                        len <= PVRDMA_LINK_MAX_INLINE;
    case PVRDMA_LINK_ACK:
        return len == PVRDMA_LINK_ACK_SIZE;
    case PVRDMA_LINK_CREDIT:
        return len == PVRDMA_LINK_CREDIT_SIZE;
    case PVRDMA_LINK_RECV_POSTED:
        return len == PVRDMA_LINK_RECV_POSTED_SIZE;
    case PVRDMA_LINK_QUIESCE:
    case PVRDMA_LINK_QUIESCED:
        return len == PVRDMA_LINK_QUIESCE_SIZE;
    case PVRDMA_LINK_PEERS:
        return len >= PVRDMA_LINK_PEERS_MIN &&
               len <= PVRDMA_LINK_PEERS_MIN +
                      PVRDMA_LINK_MAX_PEERS * PVRDMA_LINK_PEER_SIZE;
    case PVRDMA_LINK_MGIDS:
        return len >= PVRDMA_LINK_MGIDS_MIN &&
               len <= PVRDMA_LINK_MGIDS_MIN + PVRDMA_MCAST_MAX_GROUPS * 16;
    case PVRDMA_LINK_MCAST:
        return len >= PVRDMA_LINK_REQ_SIZE &&
               len <= PVRDMA_LINK_REQ_SIZE + PVRDMA_PORT_UD_MAX_MSG;
    default:
        return false;
    }
}

/* One frame; false if the peer broke the protocol. */
static bool pvrdma_link_frame_in(PvrdmaLink *l, const uint8_t *h,
                                 const uint8_t *b, const char **why)
{
    uint8_t type = h[5];
    uint16_t flags = rd16(h + 6);
    uint32_t len = rd32(h + 8), id = rd32(h + 12);

    if (!l->up) {
        if (type != PVRDMA_LINK_HELLO || !pvrdma_link_hello(l, b)) {
            *why = l->res_err ? "cannot map the peer's shared-memory ring" :
                   "bad HELLO (not a pvrdma fabric peer of this version, or "
                   "its shared ring is unusable)";
            return false;
        }
        l->up = true;
        if (!pvrdma_fabric_link_up(l->fab, l)) {
            *why = NULL;        /* a duplicate: closed quietly */
            l->duplicate = true;
            return false;
        }
        return true;
    }
    switch (type) {
    case PVRDMA_LINK_GIDS:
        return pvrdma_link_gids(l, b, len) || (*why = "bad GIDS", false);
    case PVRDMA_LINK_REQ:
        return pvrdma_link_req(l, id, b) || (*why = "bad REQ", false);
    case PVRDMA_LINK_RESP:
        return pvrdma_link_resp(l, id, b) || (*why = "bad RESP", false);
    case PVRDMA_LINK_DATA:
        return pvrdma_link_data(l, id, flags, b, len) ||
               (*why = "bad DATA", false);
    case PVRDMA_LINK_ACK:
        return pvrdma_link_ack(l, id, b) || (*why = "bad ACK", false);
    case PVRDMA_LINK_CREDIT:
        return pvrdma_link_credit(l, b) || (*why = "bad CREDIT", false);
    case PVRDMA_LINK_RECV_POSTED:
        return pvrdma_link_recv_posted(l, b) ||
               (*why = "bad RECV_POSTED", false);
    case PVRDMA_LINK_QUIESCE:
        return pvrdma_link_quiesce(l, b) || (*why = "bad QUIESCE", false);
    case PVRDMA_LINK_QUIESCED:
        if (b[1] || b[2] || b[3]) {
            *why = "bad QUIESCED";
            return false;
        }
        bit_set(l->quiesced, b[0], true);
        return true;
    case PVRDMA_LINK_PEERS:
        return pvrdma_link_peers(l, b, len) || (*why = "bad PEERS", false);
    case PVRDMA_LINK_MGIDS:
        return pvrdma_link_mgids(l, b, len) || (*why = "bad MGIDS", false);
    case PVRDMA_LINK_MCAST:
        return pvrdma_link_mcast(l, b, len) || (*why = "bad MCAST", false);
    default:
        *why = "a second HELLO";
        return false;
    }
}

/* Read what the socket has into @buf; the fd passed with HELLO is kept. */
static ssize_t pvrdma_link_read(PvrdmaLink *l, void *buf, size_t size)
{
    struct iovec iov = { .iov_base = buf, .iov_len = size };
    union {
        char buf[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } u;
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1,
        .msg_control = u.buf, .msg_controllen = sizeof(u.buf),
    };
    struct cmsghdr *c;
    ssize_t n;

    if (l->tls) {
        const PvrdmaFabricHost *h = pvrdma_fabric_host(l->fab);
        char *err = NULL;

        n = h->tls_recv(l->tls, buf, size, &err);
        if (n < 0 && err && !l->up) {
            /* Most likely it refused us when the handshake was done. */
            char *why = g_strdup_printf("the peer broke the link after the "
                                        "TLS handshake, before its HELLO "
                                        "(%s): it did not accept this "
                                        "QEMU's TLS credentials (its log "
                                        "says why)", err);

            pvrdma_link_refused(l, why, true);
            g_free(why);
        } else if (n < 0 && err) {
            pvrdma_link_close(l, err);
        }
        if (n < 0 && err) {
            g_free(err);
            errno = EPROTO;
        }
        return n;
    }
    do {
        n = recvmsg(l->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
        return n;
    }
    if ((msg.msg_flags & MSG_CTRUNC) && !l->up && l->shm) {
        /* The kernel could not give us the peer's ring: out of fds. */
        l->res_err = EMFILE;
    }
    for (c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        int fds[4];
        size_t k, nfd;

        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
            continue;
        }
        nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        nfd = MIN(nfd, G_N_ELEMENTS(fds));
        memcpy(fds, CMSG_DATA(c), nfd * sizeof(int));
        for (k = 0; k < nfd; k++) {
            /* Only the first fd before HELLO is ours to keep. */
            if (!l->up && l->shm && l->peer_fd < 0 && k == 0) {
                l->peer_fd = fds[k];
            } else {
                close(fds[k]);
            }
        }
    }
    return n;
}

/* Handle the whole frames in ibuf; false if the link died. */
static bool pvrdma_link_parse(PvrdmaLink *l)
{
    const char *why = NULL;
    size_t pos = 0;

    while (l->ilen - pos >= PVRDMA_LINK_HDR_SIZE && !l->dead) {
        const uint8_t *hdr = l->ibuf + pos;
        uint32_t len = rd32(hdr + 8);
        bool was_up = l->up;

        if (rd32(hdr) == PVRDMA_LINK_MAGIC &&
            hdr[4] != PVRDMA_LINK_VERSION) {
            pvrdma_link_close(l, "the peer speaks another version of "
                              "the fabric protocol: run the same "
                              "pvrdma build on both sides");
            return false;
        }
        if (!l->up && hdr[0] == PVRDMA_LINK_TLS_HANDSHAKE && hdr[1] == 3) {
            pvrdma_link_refused(l, "the peer speaks TLS: give this QEMU "
                                "fabric-tls-creds as well (or drop the "
                                "peer's)", true);
            return false;
        }
        if (rd32(hdr) != PVRDMA_LINK_MAGIC ||
            !pvrdma_link_len_ok(l, hdr[5], len)) {
            pvrdma_link_close(l, "malformed frame header from the peer");
            return false;
        }
        if (l->ilen - pos < PVRDMA_LINK_HDR_SIZE + len) {
            break;
        }
        l->frames_in++;
        l->bytes_in += PVRDMA_LINK_HDR_SIZE + len;
        if (!pvrdma_link_frame_in(l, hdr, hdr + PVRDMA_LINK_HDR_SIZE,
                                  &why)) {
            pvrdma_link_close(l, why);
            return false;
        }
        pos += PVRDMA_LINK_HDR_SIZE + len;
        if (l->shm && !was_up) {
            /* After HELLO the socket carries only kicks. */
            pos = l->ilen;
        }
    }
    if (l->dead) {
        return false;
    }
    memmove(l->ibuf, l->ibuf + pos, l->ilen - pos);
    l->ilen -= pos;
    return true;
}

/* Take in what the peer's frame ring holds (shm links, once up). */
static void pvrdma_link_drain(PvrdmaLink *l)
{
    const uint8_t *ring;

    if (!l->peer) {
        return;                 /* an inline link, or not up yet */
    }
    ring = l->rx_ring + PVRDMA_LINK_RING_SIZE;
    while (!l->dead) {
        uint64_t head = __atomic_load_n(&l->peer->frames, __ATOMIC_ACQUIRE);
        uint64_t avail = head - l->fr_tail, n, at, first;

        if (avail > PVRDMA_LINK_FRAME_RING) {
            pvrdma_link_close(l, "the peer's frame ring counter is wrong");
            return;
        }
        n = MIN(avail, PVRDMA_LINK_IBUF_SIZE - l->ilen);
        if (!n) {
            break;
        }
        /* A copy: the peer may write its ring under us. */
        at = l->fr_tail % PVRDMA_LINK_FRAME_RING;
        first = MIN(n, PVRDMA_LINK_FRAME_RING - at);
        memcpy(l->ibuf + l->ilen, ring + at, first);
        memcpy(l->ibuf + l->ilen + first, ring, n - first);
        l->ilen += n;
        l->fr_tail += n;
        __atomic_store_n(&l->my->peer_frames, l->fr_tail, __ATOMIC_RELEASE);
        l->rx_seen = true;
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (__atomic_load_n(&l->peer->want_space, __ATOMIC_RELAXED)) {
            pvrdma_link_kick(l);
        }
        if (!pvrdma_link_parse(l)) {
            return;
        }
    }
}

/* After input: give back ring credit, send what became possible. */
static void pvrdma_link_input_done(PvrdmaLink *l)
{
    if (l->dead) {
        return;
    }
    pvrdma_link_give_credit(l);
    pvrdma_link_pump(l);
}

static void pvrdma_link_input(PvrdmaLink *l)
{
    for (;;) {
        uint8_t kicks[256];
        bool frames = !l->shm || !l->up;
        size_t want = frames ? PVRDMA_LINK_IBUF_SIZE - l->ilen : sizeof(kicks);
        ssize_t n = pvrdma_link_read(l, frames ? l->ibuf + l->ilen : kicks,
                                     want);

        if ((n == 0 || (n < 0 && errno == ECONNRESET)) && !l->up) {
            pvrdma_link_refused(l, l->tls ?
                                "the peer closed the link after the TLS "
                                "handshake, before its HELLO: it did not "
                                "accept this QEMU's TLS credentials (its "
                                "log says why)" :
                                "the peer closed the link before its "
                                "HELLO (its log says why; a peer with "
                                "fabric-tls-creds refuses one without)",
                                l->tls);
            return;
        }
        if (n == 0) {
            pvrdma_link_close(l, "the peer closed the link");
            return;
        }
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                pvrdma_link_close(l, g_strerror(errno));
                return;
            }
            break;
        }
        if (!frames) {
            l->kicks_in += n;
        } else {
            l->rx_seen = true;
            l->ilen += n;
            if (!pvrdma_link_parse(l)) {
                return;
            }
        }
        /*
         * A short read emptied the socket: reading until EAGAIN would
         * cost a system call per wakeup for nothing (the fd handler is
         * level-triggered, so bytes arriving after it call us again).
         * Not with TLS: a read gives one record, and the socket may hold
         * more.
         */
        if ((size_t)n < want && !l->tls) {
            break;
        }
    }
    pvrdma_link_drain(l);
    pvrdma_link_input_done(l);
}

void pvrdma_link_poll(PvrdmaLink *l, int64_t until)
{
    if (l->dead || !l->up) {
        return;
    }
    if (!l->shm) {
        pvrdma_link_input(l);
        return;
    }
    /*
     * A promise still good for most of a window is left as it is: a
     * guest polling in a loop would otherwise store (and fence) on every
     * poll, and the peer would reload the line each time.  Until the
     * published end, which is still ahead, its frames need no kick.
     */
    if (until >= 0 &&
        until - l->poll_published >= PVRDMA_LINK_POLL_WINDOW_NS / 8) {
        __atomic_store_n(&l->my->poll_until, until, __ATOMIC_SEQ_CST);
        l->poll_published = until;
    }
    pvrdma_link_drain(l);
    pvrdma_link_input_done(l);
}

void pvrdma_link_promise(PvrdmaLink *l, int64_t until)
{
    if (!l->dead && l->up && l->shm) {
        __atomic_store_n(&l->my->poll_until, until, __ATOMIC_SEQ_CST);
        l->poll_published = until;
    }
}

void pvrdma_link_linger(PvrdmaLink *l, int64_t until)
{
    if (!l->dead && l->up && l->shm) {
        __atomic_store_n(&l->my->linger_until, until, __ATOMIC_SEQ_CST);
    }
}

/*
 * Close @l, refused by the peer or by us before it came up (@tls: for
 * want of TLS agreement, counted).  A peer retries every second: the
 * same reason is said once a minute.
 */
static void pvrdma_link_refused(PvrdmaLink *l, const char *why, bool tls)
{
    PvrdmaFabric *fab = l->fab;
    const PvrdmaFabricHost *h = pvrdma_fabric_host(fab);
    int64_t now = h->clock_ns(h->opaque);
    unsigned i, oldest = 0;

    fab->refused_tls += tls;
    for (i = 0; i < PVRDMA_LINK_REFUSALS; i++) {
        if (fab->refusal_said[i].why &&
            !strcmp(fab->refusal_said[i].why, why)) {
            if (now - fab->refusal_said[i].at < PVRDMA_LINK_REFUSAL_SAY_NS) {
                pvrdma_link_close(l, NULL);
                return;
            }
            oldest = i;
            break;
        }
        if (fab->refusal_said[i].at < fab->refusal_said[oldest].at) {
            oldest = i;
        }
    }
    g_free(fab->refusal_said[oldest].why);
    fab->refusal_said[oldest].why = g_strdup(why);
    fab->refusal_said[oldest].at = now;
    pvrdma_link_close(l, why);
}

/* Where a TLS handshake failed, what the user can do about it. */
#define PVRDMA_LINK_TLS_HINT \
    " (both ends need fabric-tls-creds of one kind: tls-creds-psk with the " \
    "same key, or tls-creds-x509 with certificates the other end's CA " \
    "signed)"

/*
 * Take a TLS link's handshake as far as the socket lets it; when it is
 * done, our HELLO (waiting in obuf) goes out and what the peer sent is
 * taken in.  False if the link died.
 */
static bool pvrdma_link_handshake(PvrdmaLink *l)
{
    const PvrdmaFabricHost *h = pvrdma_fabric_host(l->fab);
    char *err = NULL, *why;
    bool write = false;
    uint8_t first;
    int r;

    /*
     * A peer without TLS sends its HELLO at once, in the clear: its first
     * byte tells (a TLS record's is a content type, 20 to 24), and the
     * user learns that rather than what the handshake makes of it.
     */
    if (!l->tls_peeked &&
        recv(l->fd, &first, 1, MSG_PEEK | MSG_DONTWAIT) == 1) {
        l->tls_peeked = true;
        if (first == (PVRDMA_LINK_MAGIC & 0xff)) {
            pvrdma_link_refused(l, "the peer speaks the fabric protocol "
                                "without TLS: give it fabric-tls-creds as "
                                "well (or drop this QEMU's)", true);
            return false;
        }
    }
    r = h->tls_handshake(l->tls, &write, &err);
    if (r < 0) {
        why = g_strdup_printf("%s%s", err ? err : "TLS handshake failed",
                              r == -1 ? PVRDMA_LINK_TLS_HINT : "");
        pvrdma_link_refused(l, why, true);
        g_free(why);
        g_free(err);
        return false;
    }
    if (r == 0) {
        l->tls_want_write = write;
        pvrdma_link_update_watch(l);
        return true;
    }
    l->tls_done = true;
    if (!pvrdma_link_flush(l)) {
        return false;
    }
    /* The peer's first frames may wait in the session already. */
    pvrdma_link_input(l);
    return !l->dead;
}

void pvrdma_link_io(PvrdmaLink *l, bool readable, bool writable)
{
    if (l->tls && !l->tls_done) {
        if (!l->dead) {
            pvrdma_link_handshake(l);
        }
        return;
    }
    if (readable && !l->dead) {
        pvrdma_link_input(l);
    }
    if (writable && !l->dead) {
        pvrdma_link_pump(l);
    }
}

/* ---- life ---------------------------------------------------------------- */

static int pvrdma_link_make_ring(PvrdmaLink *l)
{
    int fd = memfd_create("pvrdma-link", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    void *p;

    if (fd < 0) {
        return -1;
    }
    if (ftruncate(fd, PVRDMA_LINK_RING_MAP) < 0) {
        close(fd);
        return -1;
    }
    p = mmap(NULL, PVRDMA_LINK_RING_MAP, PROT_READ | PROT_WRITE, MAP_SHARED,
             fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return -1;
    }
    /*
     * The peer can never resize it under us.  It is not sealed against
     * writes (F_SEAL_FUTURE_WRITE would also refuse us MADV_REMOVE, which
     * gives an idle link's pages back): a peer that writes into it spoils
     * only what it reads itself, as we never read back what we wrote
     * (the counters page's want_space aside, which only clears).
     */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW |
              F_SEAL_SEAL) < 0) {
        munmap(p, PVRDMA_LINK_RING_MAP);
        close(fd);
        return -1;
    }
    l->tx_ring = p;
    l->my = (PvrdmaLinkShared *)(l->tx_ring + PVRDMA_LINK_RING_SIZE +
                                 PVRDMA_LINK_FRAME_RING);
    return fd;
}

PvrdmaLink *pvrdma_link_new(PvrdmaFabric *fab, int fd, bool shm,
                            const char *name, uint64_t serial, bool tls,
                            const char *tls_host)
{
    const PvrdmaFabricHost *h = pvrdma_fabric_host(fab);
    PvrdmaLink *l = g_new0(PvrdmaLink, 1);
    uint8_t *b;

    l->kind = PVRDMA_FABRIC_FD_LINK;
    l->fab = fab;
    l->fd = fd;
    l->shm = shm;
    l->serial = serial;
    l->name = g_strdup(name);
    l->obuf = g_byte_array_new();
    l->ibuf = g_malloc(PVRDMA_LINK_IBUF_SIZE);
    l->send_fd = -1;
    l->peer_fd = -1;
    l->reqs_mask = PVRDMA_LINK_REQS_MIN - 1;
    l->reqs = g_new0(PvrdmaFabricReq *, PVRDMA_LINK_REQS_MIN);
    l->last_rx = h->clock_ns(h->opaque);
    l->born = l->last_rx;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    if (shm) {
        l->send_fd = pvrdma_link_make_ring(l);
        l->res_err = l->send_fd < 0 ? errno : 0;
    }
    b = pvrdma_link_frame(l, PVRDMA_LINK_HELLO, 0, 0,
                          PVRDMA_LINK_HELLO_SIZE);
    memset(b, 0, PVRDMA_LINK_HELLO_SIZE);
    wr64(b, pvrdma_fabric_instance(fab));
    wr32(b + 8, l->tx_ring ? PVRDMA_LINK_RING_SIZE : 0);
    wr64(b + 16, serial);
    l->hello_left = shm ? l->obuf->len : 0;
    h->watch(h->opaque, fd, false, l);
    if (shm && !l->tx_ring) {
        pvrdma_link_close(l, "cannot make its shared-memory ring");
        return l;
    }
    if (tls && !shm) {
        char *err = NULL;

        l->tls = h->tls_new(h->opaque, fd, !tls_host, tls_host, &err);
        if (!l->tls) {
            pvrdma_link_close(l, err ? err : "cannot start TLS");
            g_free(err);
            return l;
        }
        pvrdma_link_handshake(l);
        return l;
    }
    pvrdma_link_flush(l);
    return l;
}

void pvrdma_link_close(PvrdmaLink *l, const char *why)
{
    const PvrdmaFabricHost *h = pvrdma_fabric_host(l->fab);
    unsigned i;

    if (l->dead) {
        return;
    }
    l->fab->links_downed += l->up;
    l->dead = true;
    /* Failures for want of host resources: what to raise, said once. */
    if (why && l->res_err && !pvrdma_fabric_res_report(l->fab, l->res_err)) {
        why = NULL;
    }
    if (why) {
        pvrdma_fabric_say(l->fab, l->res_err ? PVRDMA_SAY_HOST :
                          PVRDMA_SAY_LINK_DOWN,
                          "pvrdma-fabric: link %s down: %s%s%s%s", l->name,
                          why, l->res_err ? ": " : "",
                          l->res_err ? g_strerror(l->res_err) : "",
                          pvrdma_fabric_errno_hint(l->res_err));
    }
    h->unwatch(h->opaque, l->fd);
    if (l->tls) {
        h->tls_free(l->tls);
        l->tls = NULL;
    }
    close(l->fd);
    l->fd = -1;
    for (i = 0; i < PVRDMA_FABRIC_MAX_PORTS; i++) {
        if (l->rports[i] && l->rports[i]->held) {
            /* Moving: its process may quit before the destination shows. */
            pvrdma_fabric_departed_add(l->fab, i, l->rports[i]);
        } else {
            g_free(l->rports[i]);
        }
        l->rports[i] = NULL;
        g_free(l->mgids[i]);
        l->mgids[i] = NULL;
        l->nmgids[i] = 0;
    }
    pvrdma_fabric_link_down(l->fab, l);
    /* Streams: the responder side's execs end with no answer. */
    if (l->rx.ex) {
        pvrdma_fabric_exec_free(l->rx.ex);
        l->rx.ex = NULL;
    }
    l->rx.open = false;
    l->rx.req = NULL;
    while (!g_queue_is_empty(&l->txq)) {
        pvrdma_link_tx_free(l, l->txq.head->data);
    }
    /*
     * Our requests: RETRY_EXC_ERR, as when a real peer stops answering.
     * One at a time: completing one may cancel others of its QP.
     */
    while (l->nreqs) {
        PvrdmaFabricReq *req = NULL;
        uint32_t k;

        PVRDMA_LINK_FOREACH_REQ(l, k, req) {
            break;
        }
        pvrdma_link_req_finish(req, req->fail ? req->fail :
                               PVRDMA_WC_RETRY_EXC_ERR, !req->fail);
    }
    pvrdma_fabric_kick(l->fab);
}

void pvrdma_link_free(PvrdmaLink *l)
{
    g_assert(l->dead);
    g_assert(l->nreqs == 0);
    if (l->send_fd >= 0) {
        close(l->send_fd);
    }
    if (l->peer_fd >= 0) {
        close(l->peer_fd);
    }
    if (l->tx_ring) {
        munmap(l->tx_ring, PVRDMA_LINK_RING_MAP);
    }
    if (l->rx_ring) {
        munmap((void *)l->rx_ring, PVRDMA_LINK_RING_MAP);
    }
    g_free(l->reqs);
    g_byte_array_free(l->obuf, true);
    g_free(l->ibuf);
    g_free(l->name);
    g_free(l);
}

bool pvrdma_link_is_up(PvrdmaLink *l)
{
    return l->up && !l->dead;
}

bool pvrdma_link_duplicate(PvrdmaLink *l)
{
    return l->duplicate;
}

bool pvrdma_link_shm(PvrdmaLink *l)
{
    return l->shm;
}

bool pvrdma_link_tls(PvrdmaLink *l)
{
    return l->tls != NULL;
}

bool pvrdma_link_busy(PvrdmaLink *l)
{
    return !l->dead && l->nreqs > 0;
}

bool pvrdma_link_pending_in(PvrdmaLink *l)
{
    return !l->dead && l->peer &&
           __atomic_load_n(&l->peer->frames, __ATOMIC_ACQUIRE) != l->fr_tail;
}

const char *pvrdma_link_name(PvrdmaLink *l)
{
    return l->name;
}

void pvrdma_link_get_stats(PvrdmaLink *l, PvrdmaLinkStats *st)
{
    memset(st, 0, sizeof(*st));
    g_strlcpy(st->name, l->name ? l->name : "", sizeof(st->name));
    st->shm = l->shm;
    st->tls = l->tls != NULL;
    st->up = l->up && !l->dead;
    st->frames_out = l->frames_out;
    st->frames_in = l->frames_in;
    st->bytes_out = l->bytes_out;
    st->bytes_in = l->bytes_in;
    st->kicks_out = l->kicks_out;
    st->kicks_in = l->kicks_in;
    st->requests_out = l->nreqs;
    st->streams_out = l->txq_len;
    st->shrinks = l->shrinks;
    if (l->tx_ring) {
        size_t pages = (PVRDMA_LINK_RING_MAP + 4095) / 4096;
        g_autofree unsigned char *vec = g_malloc(pages);

        /* Pages of our memfd the host holds now (shmem: in its cache). */
        if (mincore(l->tx_ring, PVRDMA_LINK_RING_MAP, vec) == 0) {
            for (size_t i = 0; i < pages; i++) {
                st->ring_bytes += (vec[i] & 1) * 4096;
            }
        }
    }
}

bool pvrdma_link_is_dead(PvrdmaLink *l)
{
    return l->dead;
}

uint64_t pvrdma_link_serial(PvrdmaLink *l)
{
    return l->serial;
}

uint64_t pvrdma_link_peer_instance(PvrdmaLink *l)
{
    return l->peer_instance;
}

bool pvrdma_link_initiated(PvrdmaLink *l)
{
    return l->initiated;
}

void pvrdma_link_set_initiated(PvrdmaLink *l)
{
    l->initiated = true;
}

uint64_t pvrdma_link_opener_serial(PvrdmaLink *l)
{
    return l->initiated ? l->serial : l->peer_serial;
}

const PvrdmaNetAddr *pvrdma_link_peer_addr(PvrdmaLink *l)
{
    return &l->peer_addr;
}

void pvrdma_link_set_peer_addr(PvrdmaLink *l, const PvrdmaNetAddr *a)
{
    l->peer_addr = *a;
}

bool pvrdma_link_rport_has(const PvrdmaLinkRPort *rp, const uint8_t gid[16])
{
    uint32_t i;

    for (i = 0; rp && i < rp->n; i++) {
        if (!memcmp(rp->gid[i], gid, 16)) {
            return true;
        }
    }
    return false;
}

bool pvrdma_link_port_busy(PvrdmaLink *l, PvrdmaFabricPort *port)
{
    PvrdmaFabricReq *req;
    uint32_t i;

    if (l->rx.open && l->rx.ex && l->rx.ex->port == port) {
        return true;
    }
    PVRDMA_LINK_FOREACH_REQ(l, i, req) {
        if (req->port == port) {
            return true;
        }
    }
    return false;
}

int pvrdma_link_fd(PvrdmaLink *l)
{
    return l->dead ? -1 : l->fd;
}

bool pvrdma_link_owns(PvrdmaLink *l, const uint8_t gid[16], uint32_t qpn,
                      uint64_t *order)
{
    uint32_t index = qpn >> PVRDMA_FABRIC_QPN_INDEX_SHIFT;
    unsigned i;

    if (!pvrdma_link_is_up(l) || index >= PVRDMA_FABRIC_MAX_PORTS) {
        return false;
    }
    for (i = index ? index : 0; i < (index ? index + 1 :
                                     PVRDMA_FABRIC_MAX_PORTS); i++) {
        if (pvrdma_link_rport_has(l->rports[i], gid)) {
            if (order) {
                *order = l->rports[i]->order;
            }
            return true;
        }
    }
    return false;
}

/* ---- the guest changed something under a stream -------------------------- */

void pvrdma_link_port_gone(PvrdmaLink *l, PvrdmaFabricPort *port)
{
    PvrdmaFabricReq *req;
    GList *reqs = NULL, *e;
    uint32_t i;

    /* Execs of the port were aborted by the port; requests are dropped. */
    PVRDMA_LINK_FOREACH_REQ(l, i, req) {
        if (req->port == port) {
            reqs = g_list_prepend(reqs, req);
        }
    }
    for (e = reqs; e; e = e->next) {
        pvrdma_link_req_unlink(e->data);
        pvrdma_fabric_req_free(e->data);
    }
    g_list_free(reqs);
    if (!l->dead) {
        pvrdma_link_pump(l);
    }
}

void pvrdma_link_mr_gone(PvrdmaLink *l, PvrdmaFabricPort *port,
                         const PvrdmaMr *mr)
{
    PvrdmaFabricReq *req;
    uint32_t i;

    PVRDMA_LINK_FOREACH_REQ(l, i, req) {
        if (req->port == port && !req->fail &&
            pvrdma_fabric_sgl_uses(&req->wr->local, mr)) {
            pvrdma_link_req_fail(req, PVRDMA_WC_LOC_PROT_ERR);
        }
    }
}
