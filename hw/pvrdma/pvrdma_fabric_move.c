/*
 * PVRDMA software fabric: a port that moves to another QEMU process
 * (live migration, snapshots) while peers in other processes keep their
 * connections to it (docs/migration.md, "Switchover between fabric
 * peers").
 *
 * Source: when the guest stops for the save, the port stops submitting,
 * asks every peer to hold its requests to it (QUIESCE), and takes in
 * the answers to its own requests and the peers' requests already on
 * their way, until every peer answered QUIESCED and nothing of the port
 * is in flight.  Nothing is then executed twice or lost: what was
 * executed was answered, and what waits stays in a send queue (ours in
 * the guest's, saved; the peers' parked, below).
 *
 * Peers: requests to a moving port are parked (outstanding, not sent)
 * until its GIDs are announced again: by the source if it runs on (a
 * failed or cancelled migration, a snapshot taken), or by the
 * destination with a proof that it is where they went.  After
 * PVRDMA_FABRIC_HOLD_NS they fail like requests to a dead peer.
 *
 * The proof: each port draws a secret token.  With its GIDs it sends
 * each peer a commitment, SHA-256 of the proof for that peer, the proof
 * being SHA-256 of a label, the token and the peer's instance.  Only the
 * device state carries the token; the destination shows each peer its
 * own proof, which is worth nothing to any other peer, and draws a token
 * of its own.  A source that runs on draws a new token too, so a copy of
 * the state (a snapshot) restored later proves nothing.
 *
 * Lives: whatever runs from a saved state (the destination, a source that
 * runs on after its state was saved) starts a new life of the port,
 * remembering the life saved as its ancestor.  A QP keeps the life of its
 * partner it last heard from; a peer's frame from a life that is neither
 * that one nor a later one of it (a copy of an older state, run later)
 * is refused, and so is a request for a life of ours that is not ours or
 * an earlier one (the partner heard from a run of us that went on
 * elsewhere): docs/fabric.md, "Restored snapshots".
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

#include "pvrdma_link.h"

/* ---- tokens -------------------------------------------------------------- */

void pvrdma_fabric_proof(const uint8_t token[32], uint64_t instance,
                         uint8_t out[32])
{
    static const char label[] = "pvrdma fabric move proof v1";
    GChecksum *c = g_checksum_new(G_CHECKSUM_SHA256);
    uint64_t le = GUINT64_TO_LE(instance);
    gsize len = 32;

    g_checksum_update(c, (const guchar *)label, sizeof(label));
    g_checksum_update(c, token, 32);
    g_checksum_update(c, (const guchar *)&le, sizeof(le));
    g_checksum_get_digest(c, out, &len);
    g_checksum_free(c);
}

void pvrdma_fabric_commitment(const uint8_t token[32], uint64_t instance,
                              uint8_t out[32])
{
    uint8_t proof[32];
    GChecksum *c = g_checksum_new(G_CHECKSUM_SHA256);
    gsize len = 32;

    pvrdma_fabric_proof(token, instance, proof);
    g_checksum_update(c, proof, 32);
    g_checksum_get_digest(c, out, &len);
    g_checksum_free(c);
}

static void pvrdma_fabric_hash(const uint8_t in[32], uint8_t out[32])
{
    GChecksum *c = g_checksum_new(G_CHECKSUM_SHA256);
    gsize len = 32;

    g_checksum_update(c, in, 32);
    g_checksum_get_digest(c, out, &len);
    g_checksum_free(c);
}

void pvrdma_fabric_new_token(uint8_t token[32])
{
    size_t got = 0;

    while (got < 32) {
        ssize_t n = getrandom(token + got, 32 - got, 0);

        if (n > 0) {
            got += n;
        } else if (n < 0 && errno != EINTR) {
            /* No kernel entropy call (never on Linux >= 3.17): GLib's. */
            for (; got < 32; got++) {
                token[got] = g_random_int();
            }
        }
    }
}

bool pvrdma_fabric_port_silent(PvrdmaFabricPort *port)
{
    /*
     * Loading: nothing to announce before the guest runs.  Moving: the
     * source's GIDs are its destination's to announce (a reset or the
     * device going away must not withdraw them from the peers).
     */
    return port->moving || pvrdma_core_loading(port->core);
}

/* ---- peers: holding requests to a moving port ---------------------------- */

bool pvrdma_fabric_held(PvrdmaFabric *fab, PvrdmaLink *l,
                        const uint8_t gid[16], uint32_t qpn)
{
    uint32_t index = qpn >> PVRDMA_FABRIC_QPN_INDEX_SHIFT;
    GList *e;

    /* A port moving whose link closed still owns its GIDs. */
    for (e = fab->departed; e; e = e->next) {
        PvrdmaFabricDeparted *d = e->data;

        if ((!index || index == d->index) &&
            pvrdma_link_rport_has(d->rport, gid)) {
            return true;
        }
    }
    return l && pvrdma_link_held(l, gid, qpn);
}

/*
 * The move of @rp (port @index) was given up: what waits for it fails as
 * requests to a dead peer do, before anyone else may announce its GIDs.
 */
void pvrdma_fabric_hold_expired(PvrdmaFabric *fab, unsigned index,
                                const PvrdmaLinkRPort *rp)
{
    GList *e, *next;

    for (e = fab->parked.head; e; e = next) {
        PvrdmaFabricReq *req = e->data;
        uint32_t to = req->wr->dst_qpn >> PVRDMA_FABRIC_QPN_INDEX_SHIFT;
        PvrdmaFabricAck ack = { .status = PVRDMA_WC_RETRY_EXC_ERR };

        next = e->next;
        if (req->drop_at || (to && to != index) ||
            !pvrdma_link_rport_has(rp, req->wr->dgid)) {
            continue;
        }
        pvrdma_fabric_unpark(req);
        pvrdma_fabric_req_answered(req, &ack, true);
        /* Completing it may have cancelled others: start again. */
        next = fab->parked.head;
    }
}

void pvrdma_fabric_park(PvrdmaFabricPort *port, PvrdmaQp *qp,
                        PvrdmaSendWr *wr)
{
    PvrdmaFabric *fab = port->fabric;
    PvrdmaFabricReq *req = pvrdma_fabric_req_new(port, qp, wr);

    req->parked = true;
    req->pnode.data = req;
    g_queue_push_tail_link(&fab->parked, &req->pnode);
    pvrdma_fabric_arm_tick(fab, -1);
}

void pvrdma_fabric_drop_wait(PvrdmaFabricReq *req, int64_t since)
{
    PvrdmaFabric *fab = req->port->fabric;
    int64_t t = pvrdma_link_qp_timeout(req->qp);

    req->link = NULL;
    if (!fab->has_host) {
        PvrdmaFabricAck ack = { .status = PVRDMA_WC_RETRY_EXC_ERR };

        pvrdma_fabric_req_answered(req, &ack, false);
        return;
    }
    if (since < 0) {
        since = fab->host.clock_ns(fab->host.opaque);
    }
    /*
     * Timeout 0 retries forever on a real fabric; here the drop is known
     * for sure, so it fails after the shortest timeout instead of never.
     */
    if (!req->drop_deadline) {
        req->drop_deadline = since + (t ? t : PVRDMA_LINK_MIN_TIMEOUT_NS);
    }
    req->drop_at = req->drop_deadline;
    req->parked = true;
    req->pnode.data = req;
    g_queue_push_tail_link(&fab->parked, &req->pnode);
    pvrdma_fabric_arm_tick(fab, -1);
}

/*
 * A dropped request sent again (a retransmission): true if something took
 * it, a QP of this process (answered now) or a link (it is out again).
 */
static bool pvrdma_fabric_drop_retry(PvrdmaFabricReq *req, int64_t now)
{
    PvrdmaFabric *fab = req->port->fabric;
    PvrdmaSendWr *wr = req->wr;
    PvrdmaFabricPayload payload = { .sgl = &wr->local };
    PvrdmaFabricPort *rport;
    PvrdmaFabricMsg msg;
    PvrdmaFabricAck ack;
    PvrdmaLink *l;
    PvrdmaQp *rqp;

    rport = pvrdma_fabric_lookup(fab, wr->dgid, wr->dst_qpn, &rqp);
    if (rport) {
        pvrdma_fabric_msg_init(&msg, wr);
        pvrdma_fabric_deliver(rport, rqp, &msg, &payload, &ack);
        if (ack.status == PVRDMA_WC_RETRY_EXC_ERR && !ack.rnr) {
            return false;       /* dropped again */
        }
        pvrdma_fabric_unpark(req);
        req->drop_at = 0;
        pvrdma_fabric_req_answered(req, &ack, false);
        return true;
    }
    l = pvrdma_fabric_route(fab, wr->dgid, wr->dst_qpn);
    if (!l || pvrdma_fabric_held(fab, l, wr->dgid, wr->dst_qpn)) {
        return false;
    }
    /*
     * The responder dropped what followed the first drop (its generation):
     * this tick's retries of the QP go under a new one, in their order.
     */
    if (((PvrdmaFabricQp *)req->qp->be)->gen_at != now) {
        ((PvrdmaFabricQp *)req->qp->be)->gen_at = now;
        ((PvrdmaFabricQp *)req->qp->be)->gen++;
    }
    pvrdma_fabric_unpark(req);
    req->drop_at = 0;
    pvrdma_link_send_req(l, req);
    return true;
}

/*
 * Dropped requests are sent again (oldest first, keeping a QP's order);
 * those whose retries ran out complete.
 */
static void pvrdma_fabric_drops_tick(PvrdmaFabric *fab, int64_t now)
{
    GList *e, *next;

    for (e = fab->parked.head; e; e = next) {
        PvrdmaFabricReq *req = e->data;
        PvrdmaFabricAck ack = { .status = PVRDMA_WC_RETRY_EXC_ERR };

        next = e->next;
        if (!req->drop_at) {
            continue;
        }
        if (now < req->drop_at) {
            if (pvrdma_fabric_drop_retry(req, now)) {
                /* Taken: completions may have changed the list. */
                next = fab->parked.head;
            }
            continue;
        }
        pvrdma_fabric_unpark(req);
        pvrdma_fabric_req_answered(req, &ack, false);
        /* Completing it may have cancelled others: start again. */
        next = fab->parked.head;
    }
}

void pvrdma_fabric_unpark(PvrdmaFabricReq *req)
{
    if (req->parked) {
        g_queue_unlink(&req->port->fabric->parked, &req->pnode);
        req->parked = false;
    }
}

void pvrdma_fabric_release_parked(PvrdmaFabric *fab)
{
    GList *e, *next;

    for (e = fab->parked.head; e; e = next) {
        PvrdmaFabricReq *req = e->data;
        PvrdmaSendWr *wr = req->wr;
        PvrdmaLink *l = pvrdma_fabric_route(fab, wr->dgid, wr->dst_qpn);

        next = e->next;
        if (req->drop_at || pvrdma_fabric_held(fab, l, wr->dgid,
                                               wr->dst_qpn)) {
            continue;
        }
        pvrdma_fabric_unpark(req);
        if (l) {
            pvrdma_link_send_req(l, req);
        } else {
            /* Its port never landed: as a request to a dead peer. */
            PvrdmaFabricAck ack = { .status = PVRDMA_WC_RETRY_EXC_ERR };

            pvrdma_fabric_req_answered(req, &ack, true);
            /* Completing it may have cancelled others: start again. */
            next = fab->parked.head;
        }
    }
}

static void pvrdma_fabric_departed_free(PvrdmaFabric *fab,
                                        PvrdmaFabricDeparted *d)
{
    fab->departed = g_list_remove(fab->departed, d);
    g_free(d->rport);
    g_free(d);
}

/*
 * Ports whose link closed while they moved, kept at most this many (a
 * peer could quiesce and reconnect in a loop): the oldest hold then ends
 * early, as if it had run out.
 */
#define PVRDMA_FABRIC_MAX_DEPARTED  64

void pvrdma_fabric_departed_add(PvrdmaFabric *fab, unsigned index,
                                PvrdmaLinkRPort *rp)
{
    PvrdmaFabricDeparted *d = g_new0(PvrdmaFabricDeparted, 1);

    d->index = index;
    d->rport = rp;
    fab->departed = g_list_prepend(fab->departed, d);
    if (g_list_length(fab->departed) > PVRDMA_FABRIC_MAX_DEPARTED) {
        PvrdmaFabricDeparted *old = g_list_last(fab->departed)->data;

        pvrdma_fabric_hold_expired(fab, old->index, old->rport);
        pvrdma_fabric_departed_free(fab, old);
    }
    pvrdma_fabric_arm_tick(fab, -1);
}

bool pvrdma_fabric_move_tick(PvrdmaFabric *fab, int64_t now)
{
    GList *e, *next;
    bool expired = false;

    for (e = fab->departed; e; e = next) {
        PvrdmaFabricDeparted *d = e->data;

        next = e->next;
        if (now - d->rport->held_since >= PVRDMA_FABRIC_HOLD_NS) {
            pvrdma_fabric_hold_expired(fab, d->index, d->rport);
            pvrdma_fabric_departed_free(fab, d);
            expired = true;
            next = fab->departed;
        }
    }
    if (expired) {
        pvrdma_fabric_release_parked(fab);
    }
    pvrdma_fabric_drops_tick(fab, now);
    return fab->departed || !g_queue_is_empty(&fab->parked);
}

void pvrdma_fabric_move_free(PvrdmaFabric *fab)
{
    while (fab->departed) {
        pvrdma_fabric_departed_free(fab, fab->departed->data);
    }
}

uint64_t pvrdma_fabric_next_order(PvrdmaFabric *fab)
{
    return ++fab->order;
}

uint64_t pvrdma_fabric_claim(PvrdmaFabric *fab, PvrdmaLink *l,
                             unsigned index, const uint8_t proof[32])
{
    uint8_t commit[32];
    uint64_t order;
    GList *e;

    pvrdma_fabric_hash(proof, commit);
    for (e = fab->departed; e; e = e->next) {
        PvrdmaFabricDeparted *d = e->data;

        if (d->index == index && !memcmp(d->rport->commit, commit, 32)) {
            order = d->rport->order;
            pvrdma_fabric_departed_free(fab, d);
            return order;
        }
    }
    for (e = fab->links; e; e = e->next) {
        order = e->data != l ?
                pvrdma_link_take_rport(e->data, index, commit) : 0;
        if (order) {
            return order;
        }
    }
    return 0;
}

/* ---- the moving port ----------------------------------------------------- */

/* Has @port anything in flight on links: requests, or execs of peers'? */
static bool pvrdma_fabric_port_busy(PvrdmaFabricPort *port)
{
    PvrdmaFabric *fab = port->fabric;
    GList *e;

    if (!g_queue_is_empty(&port->execs)) {
        return true;
    }
    for (e = fab->links; e; e = e->next) {
        if (pvrdma_link_port_busy(e->data, port)) {
            return true;
        }
    }
    for (e = fab->parked.head; e; e = e->next) {
        if (((PvrdmaFabricReq *)e->data)->port == port) {
            return true;
        }
    }
    return false;
}

/* The link that has not answered QUIESCE yet, or NULL. */
static PvrdmaLink *pvrdma_fabric_unquiesced(PvrdmaFabricPort *port)
{
    GList *e;

    for (e = port->fabric->links; e; e = e->next) {
        if (!pvrdma_link_peer_quiesced(e->data, port->index)) {
            return e->data;
        }
    }
    return NULL;
}

bool pvrdma_fabric_move_out(PvrdmaFabricPort *port, int64_t timeout_ns,
                            char **errmsg)
{
    PvrdmaFabric *fab = port->fabric;
    const PvrdmaFabricHost *h = &fab->host;
    int64_t deadline;
    PvrdmaLink *late;
    GList *e;

    if (!fab->has_host) {
        port->moving = true;
        return true;            /* no links: nothing is in flight */
    }
    deadline = h->clock_ns(h->opaque) + timeout_ns;
    /*
     * Requests of ours a destination dropped fail anyway: now, rather
     * than hold the move for up to their QP's timeout.
     */
    for (e = fab->parked.head; e; e = e->next) {
        PvrdmaFabricReq *req = e->data;

        if (req->drop_at && req->port == port) {
            req->drop_at = 1;
        }
    }
    if (!port->moving) {
        port->moving = true;
        for (e = fab->links; e; e = e->next) {
            pvrdma_link_send_quiesce(e->data, port->index);
        }
    }
    for (;;) {
        g_autoptr(GList) links = g_list_copy(fab->links);
        struct pollfd *fds;
        unsigned n = 0;

        /* What the main loop would do: read, write, complete. */
        fab->draining++;
        for (e = links; e; e = e->next) {
            pvrdma_link_poll(e->data, -1);
            pvrdma_link_io(e->data, true, true);
        }
        fab->draining--;
        pvrdma_fabric_timer_expired(fab);
        late = pvrdma_fabric_unquiesced(port);
        if (!late && !pvrdma_fabric_port_busy(port)) {
            return true;
        }
        if (h->clock_ns(h->opaque) >= deadline) {
            break;
        }
        g_clear_pointer(&links, g_list_free);
        links = g_list_copy(fab->links);
        fds = g_new0(struct pollfd, g_list_length(links) + 1);
        for (e = links; e; e = e->next) {
            int fd = pvrdma_link_fd(e->data);

            if (fd >= 0) {
                fds[n].fd = fd;
                fds[n++].events = POLLIN;
            }
        }
        poll(fds, n, 1);
        g_free(fds);
    }
    *errmsg = late ?
        g_strdup_printf("pvrdma: the fabric peer behind link %s did not "
                        "answer within %lld ms when asked to hold its "
                        "requests for the move; it may be stopped or "
                        "overloaded: try again, or stop it",
                        pvrdma_link_name(late),
                        (long long)(timeout_ns / 1000000)) :
        g_strdup_printf("pvrdma: requests to or from fabric peers were "
                        "still in flight after %lld ms; try again when "
                        "the traffic is lighter",
                        (long long)(timeout_ns / 1000000));
    return false;
}

/* Announce @port's GIDs on every link (with a claim while @claiming). */
static void pvrdma_fabric_announce(PvrdmaFabricPort *port)
{
    g_autoptr(GList) links = g_list_copy(port->fabric->links);
    GList *e;

    for (e = links; e; e = e->next) {
        pvrdma_link_send_gids(e->data, port, false);
    }
}

void pvrdma_fabric_new_life(PvrdmaFabricPort *port)
{
    uint64_t life;

    if (port->life) {
        memmove(port->ancestors + 1, port->ancestors,
                (PVRDMA_MOVE_LINEAGE - 1) * sizeof(port->ancestors[0]));
        port->ancestors[0] = port->life;
        port->nancestors = MIN(port->nancestors + 1, PVRDMA_MOVE_LINEAGE);
    }
    do {
        uint8_t r[32];

        pvrdma_fabric_new_token(r);
        memcpy(&life, r, sizeof(life));
    } while (!life || pvrdma_fabric_life_mine(port, life));
    port->life = life;
}

bool pvrdma_fabric_life_mine(const PvrdmaFabricPort *port, uint64_t life)
{
    uint32_t i;

    if (life == port->life) {
        return true;
    }
    for (i = 0; i < port->nancestors; i++) {
        if (port->ancestors[i] == life) {
            return true;
        }
    }
    return false;
}

void pvrdma_fabric_move_save(PvrdmaFabricPort *port, PvrdmaMoveState *ms)
{
    memcpy(ms->token, port->token, 32);
    ms->life = port->life;
    ms->nancestors = port->nancestors;
    memcpy(ms->ancestors, port->ancestors, sizeof(ms->ancestors));
    port->saved = true;
}

void pvrdma_fabric_move_back(PvrdmaFabricPort *port)
{
    if (!port->moving) {
        return;
    }
    port->moving = false;
    /* The state saved meanwhile (a snapshot) proves nothing any more. */
    pvrdma_fabric_new_token(port->token);
    if (port->saved) {
        /* ... and what it goes on to do is not that copy's. */
        pvrdma_fabric_new_life(port);
        port->saved = false;
    }
    pvrdma_fabric_announce(port);
}

void pvrdma_fabric_move_in(PvrdmaFabricPort *port, const PvrdmaMoveState *ms)
{
    port->moving = false;
    port->saved = false;
    if (ms) {
        memcpy(port->claim_token, ms->token, 32);
        port->claiming = true;
        port->life = ms->life;
        port->nancestors = MIN(ms->nancestors, PVRDMA_MOVE_LINEAGE);
        memcpy(port->ancestors, ms->ancestors, sizeof(port->ancestors));
        /* This run from the saved state is one of possibly several. */
        pvrdma_fabric_new_life(port);
    }
    pvrdma_fabric_new_token(port->token);
    pvrdma_fabric_announce(port);
}
