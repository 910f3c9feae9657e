/*
 * PVRDMA software fabric: the fabric object, its registry of ports and
 * the in-process link (docs/architecture.md).
 *
 * A fabric is an explicit, reference-counted object: every device's port
 * holds a reference, and nothing about the fabric lives in process-wide
 * variables.  Wire QPNs (drivers of interface version >= 20) are
 *   bits 16..23: the port's index (the QEMU glue uses the device's PCI
 *                devfn, which a migration destination shares)
 *   bits  0..15: the device's QP handle
 * so two pvrdma devices of one guest, which pair with the same netdev and
 * therefore bind identical GIDs, still have distinct QPNs.
 *
 * The in-process link runs the responder synchronously on the responder's
 * core (inside pvrdma_core_enter/leave of that core); the payload reads
 * and writes the requester's memory through the requester's core.  Links
 * to other processes and hosts (pvrdma_link.c, docs/fabric.md) carry the
 * same PvrdmaFabricMsg as a REQ frame and its payload as a stream; the
 * requester chooses them when no local port owns the destination.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "pvrdma_link.h"

bool pvrdma_fabric_rnr_any(PvrdmaFabric *fab)
{
    return fab->rnr_waiting > 0;
}

void pvrdma_fabric_rnr_note(PvrdmaFabric *fab, bool waiting)
{
    if (waiting) {
        fab->rnr_waiting++;
    } else {
        g_assert(fab->rnr_waiting > 0);
        fab->rnr_waiting--;
    }
}

PvrdmaFabric *pvrdma_fabric_new(void)
{
    PvrdmaFabric *fab = g_new0(PvrdmaFabric, 1);

    fab->refs = 1;
    fab->timer_at = -1;
    fab->instance = ((uint64_t)g_random_int() << 32) | g_random_int();
    fab->own_uid = geteuid();
    return fab;
}

void pvrdma_fabric_set_own_uid(PvrdmaFabric *fab, uint32_t uid)
{
    fab->own_uid = uid;
}

PvrdmaFabric *pvrdma_fabric_ref(PvrdmaFabric *fab)
{
    fab->refs++;
    return fab;
}

bool pvrdma_fabric_unused(const PvrdmaFabric *fab)
{
    return fab->refs == 1;
}

void pvrdma_fabric_unref(PvrdmaFabric *fab)
{
    GList *e;

    g_assert(fab->refs > 0);
    if (--fab->refs) {
        return;
    }
    /* Closing a link takes it off fab->links (onto fab->dead). */
    while (fab->links) {
        pvrdma_link_close(fab->links->data, NULL);
    }
    for (e = fab->dead; e; e = e->next) {
        pvrdma_link_free(e->data);
    }
    g_list_free(fab->dead);
    pvrdma_fabric_move_free(fab);
    if (fab->has_host) {
        pvrdma_fabric_net_free(fab);
        fab->host.timer_mod(fab->host.opaque, -1);
    }
    if (fab->allow_uid) {
        g_array_free(fab->allow_uid, true);
    }
    if (fab->allow_gid) {
        g_array_free(fab->allow_gid, true);
    }
    for (unsigned i = 0; i < PVRDMA_LINK_REFUSALS; i++) {
        g_free(fab->refusal_said[i].why);
    }
    if (fab->refused_said) {
        g_array_free(fab->refused_said, true);
    }
    g_free(fab);
}

PvrdmaFabricPort *pvrdma_fabric_port_new(PvrdmaFabric *fab, PvrdmaCore *core,
                                         int index, char **errmsg)
{
    PvrdmaFabricPort *port;

    if (index < 0) {
        for (index = 1; index < PVRDMA_FABRIC_MAX_PORTS; index++) {
            if (!fab->ports[index]) {
                break;
            }
        }
    }
    if (index >= PVRDMA_FABRIC_MAX_PORTS || fab->ports[index]) {
        *errmsg = g_strdup_printf("pvrdma: fabric port %d is taken (two "
                                  "pvrdma devices at the same PCI devfn on "
                                  "different buses?): give each device its "
                                  "own slot or function", index);
        return NULL;
    }
    port = g_new0(PvrdmaFabricPort, 1);
    port->fabric = pvrdma_fabric_ref(fab);
    port->core = core;
    port->index = index;
    pvrdma_fabric_new_token(port->token);
    pvrdma_fabric_new_life(port);
    fab->ports[index] = port;
    return port;
}

void pvrdma_fabric_port_free(PvrdmaFabricPort *port)
{
    PvrdmaFabric *fab = port->fabric;
    g_autoptr(GList) links = NULL;
    GList *e;

    pvrdma_fabric_port_quiesce(port);
    links = g_list_copy(fab->links);
    for (e = links; e; e = e->next) {
        pvrdma_link_send_gids(e->data, port, true);   /* (not if moving) */
    }
    /* Links still hold the aborted execs: they no longer have a port. */
    while ((e = g_queue_pop_head_link(&port->execs))) {
        PvrdmaFabricExec *ex = e->data;

        ex->port = NULL;
        ex->async = false;
    }
    g_assert(fab->ports[port->index] == port);
    fab->ports[port->index] = NULL;
    g_free(port);
    pvrdma_fabric_unref(fab);
}

static PvrdmaQp *pvrdma_fabric_port_qp(PvrdmaFabricPort *port,
                                       const uint8_t gid[16], uint32_t qpn)
{
    if (!pvrdma_core_has_gid(port->core, gid)) {
        return NULL;
    }
    return pvrdma_core_qp_by_qpn(port->core, qpn,
                                 PVRDMA_FABRIC_QPN_HANDLE_MASK);
}

PvrdmaFabricPort *pvrdma_fabric_lookup(PvrdmaFabric *fab,
                                       const uint8_t gid[16], uint32_t qpn,
                                       PvrdmaQp **qp)
{
    uint32_t index = qpn >> PVRDMA_FABRIC_QPN_INDEX_SHIFT;
    unsigned i;

    if (index >= PVRDMA_FABRIC_MAX_PORTS) {
        return NULL;            /* not a 24-bit QPN */
    }
    if (index) {
        PvrdmaFabricPort *port = fab->ports[index];

        *qp = port ? pvrdma_fabric_port_qp(port, gid, qpn) : NULL;
        return *qp ? port : NULL;
    }
    /* QPN == handle: find the port by GID. */
    for (i = 0; i < PVRDMA_FABRIC_MAX_PORTS; i++) {
        PvrdmaFabricPort *port = fab->ports[i];

        *qp = port ? pvrdma_fabric_port_qp(port, gid, qpn) : NULL;
        if (*qp) {
            return port;
        }
    }
    return NULL;
}

bool pvrdma_fabric_gid_local(PvrdmaFabric *fab, const uint8_t gid[16],
                             uint32_t qpn)
{
    uint32_t index = qpn >> PVRDMA_FABRIC_QPN_INDEX_SHIFT;
    unsigned i;

    for (i = 0; i < PVRDMA_FABRIC_MAX_PORTS; i++) {
        if (fab->ports[i] && (!index || index == i) &&
            pvrdma_core_has_gid(fab->ports[i]->core, gid)) {
            return true;
        }
    }
    return false;
}

void pvrdma_fabric_deliver(PvrdmaFabricPort *port, PvrdmaQp *qp,
                           const PvrdmaFabricMsg *msg,
                           const PvrdmaFabricPayload *payload,
                           PvrdmaFabricAck *ack)
{
    memset(ack, 0, sizeof(*ack));
    ack->status = PVRDMA_WC_RETRY_EXC_ERR;
    if (!port) {
        return;
    }
    pvrdma_core_enter(port->core);
    pvrdma_fabric_rc_respond(port, qp, msg, payload, ack);
    pvrdma_core_leave(port->core);
}

void pvrdma_fabric_recv_posted(PvrdmaFabric *fab, const uint8_t gid[16],
                               uint32_t qpn, const uint8_t dgid[16],
                               uint32_t dqpn)
{
    PvrdmaFabricPort *port;
    PvrdmaQp *peer;

    if (!fab->rnr_waiting) {
        return;
    }
    port = pvrdma_fabric_lookup(fab, dgid, dqpn, &peer);
    if (port && pvrdma_core_rnr_waiting(peer) &&
        peer->attr.dest_qp_num == qpn &&
        !memcmp(peer->attr.ah_attr.grh.dgid, gid, 16)) {
        pvrdma_core_rnr_kick(port->core, peer);
    }
}

/* ---- links --------------------------------------------------------------- */

PvrdmaLink *pvrdma_fabric_route(PvrdmaFabric *fab, const uint8_t gid[16],
                                uint32_t qpn)
{
    PvrdmaLink *best = NULL;
    uint64_t order, best_order = 0;
    GList *e;

    /*
     * The oldest announcement: a later one of the same GID by another
     * process does not take it over; a migration's destination does,
     * with proof, and keeps its seniority (pvrdma_fabric_move.c).
     */
    for (e = fab->links; e; e = e->next) {
        if (pvrdma_link_owns(e->data, gid, qpn, &order) &&
            (!best || order < best_order)) {
            best = e->data;
            best_order = order;
        }
    }
    return best;
}

const PvrdmaFabricHost *pvrdma_fabric_host(PvrdmaFabric *fab)
{
    return &fab->host;
}

uint64_t pvrdma_fabric_instance(PvrdmaFabric *fab)
{
    return fab->instance;
}

PvrdmaFabricPort *pvrdma_fabric_port_at(PvrdmaFabric *fab, unsigned index)
{
    return index < PVRDMA_FABRIC_MAX_PORTS ? fab->ports[index] : NULL;
}

void pvrdma_fabric_set_host(PvrdmaFabric *fab, const PvrdmaFabricHost *host)
{
    fab->host = *host;
    fab->has_host = true;
}

static PvrdmaLink *pvrdma_fabric_add(PvrdmaFabric *fab, int fd, bool shm,
                                     const char *name, bool tls,
                                     const char *tls_host)
{
    PvrdmaLink *l;

    g_assert(fab->has_host);
    l = pvrdma_link_new(fab, fd, shm, name, ++fab->next_serial, tls,
                        tls_host);
    if (!pvrdma_link_is_dead(l)) {
        fab->links = g_list_prepend(fab->links, l);
        /* Its HELLO is waited for on the timer (PVRDMA_LINK_HELLO_NS). */
        pvrdma_fabric_arm_tick(fab, -1);
    }
    return l;
}

PvrdmaLink *pvrdma_fabric_add_link(PvrdmaFabric *fab, int fd, bool shm,
                                   const char *name)
{
    return pvrdma_fabric_add(fab, fd, shm, name, false, NULL);
}

PvrdmaLink *pvrdma_fabric_add_tcp_link(PvrdmaFabric *fab, int fd,
                                       const char *name,
                                       const char *tls_host)
{
    return pvrdma_fabric_add(fab, fd, false, name, fab->host.tls_new != NULL,
                             tls_host);
}

/* The instance that opened a link: the same answer on both ends. */
static uint64_t pvrdma_fabric_opener(PvrdmaFabric *fab, PvrdmaLink *l)
{
    return pvrdma_link_initiated(l) ? fab->instance :
                                      pvrdma_link_peer_instance(l);
}

/*
 * Of two links to one peer, keep @a rather than @b?  Both processes
 * answer alike: shared memory first, then the link opened by the
 * smaller instance, then (one process opened both, through the directory
 * and a TCP address it was told, or twice over TCP) its earlier one.
 */
static bool pvrdma_fabric_keep(PvrdmaFabric *fab, PvrdmaLink *a,
                               PvrdmaLink *b)
{
    if (pvrdma_link_shm(a) != pvrdma_link_shm(b)) {
        return pvrdma_link_shm(a);
    }
    if (pvrdma_fabric_opener(fab, a) != pvrdma_fabric_opener(fab, b)) {
        return pvrdma_fabric_opener(fab, a) < pvrdma_fabric_opener(fab, b);
    }
    return pvrdma_link_opener_serial(a) < pvrdma_link_opener_serial(b);
}

bool pvrdma_fabric_link_up(PvrdmaFabric *fab, PvrdmaLink *l)
{
    uint64_t peer = pvrdma_link_peer_instance(l);
    unsigned i;
    GList *e;

    if (peer == fab->instance) {
        return false;           /* our own socket */
    }
    /* Two processes that found each other twice keep one link. */
    for (e = fab->links; e; e = e->next) {
        PvrdmaLink *o = e->data;

        if (o == l || !pvrdma_link_is_up(o) ||
            pvrdma_link_peer_instance(o) != peer) {
            continue;
        }
        if (!pvrdma_fabric_keep(fab, l, o)) {
            return false;
        }
        pvrdma_link_close(o, NULL);
        break;
    }
    for (i = 0; i < PVRDMA_FABRIC_MAX_PORTS; i++) {
        if (fab->ports[i]) {
            pvrdma_link_send_gids(l, fab->ports[i], false);
            if (fab->ports[i]->moving) {
                pvrdma_link_send_quiesce(l, i);
            }
        }
    }
    pvrdma_fabric_net_announce(fab, l);
    fab->res_err = 0;           /* a shortage ended: say the next one */
    pvrdma_fabric_say(fab, PVRDMA_SAY_LINK_UP, "pvrdma-fabric: link %s up%s",
                      pvrdma_link_name(l),
                      pvrdma_link_tls(l) ? " (TLS)" : "");
    return true;
}

void pvrdma_fabric_link_down(PvrdmaFabric *fab, PvrdmaLink *l)
{
    fab->links = g_list_remove(fab->links, l);
    fab->dead = g_list_prepend(fab->dead, l);
    pvrdma_fabric_net_link_down(fab, l);
    pvrdma_fabric_kick(fab);
}

uint64_t pvrdma_fabric_links_downed(PvrdmaFabric *fab)
{
    return fab->links_downed;
}

void pvrdma_fabric_counters(PvrdmaFabric *fab, PvrdmaFabricCounters *c)
{
    c->messages_suppressed = fab->said_suppressed;
    c->half_open_closed = fab->half_open_closed;
    c->hello_timeouts = fab->hello_timeouts;
    c->refused_cred = fab->refused_cred;
    c->unowned_dropped = fab->unowned_dropped;
    c->gids_refused = fab->gids_refused;
    c->refused_tls = fab->refused_tls;
}

unsigned pvrdma_fabric_links_up(PvrdmaFabric *fab)
{
    unsigned n = 0;
    GList *e;

    for (e = fab->links; e; e = e->next) {
        n += pvrdma_link_is_up(e->data);
    }
    return n;
}

unsigned pvrdma_fabric_link_stats(PvrdmaFabric *fab, PvrdmaLinkStats *st,
                                  unsigned max)
{
    unsigned n = 0;
    GList *e;

    for (e = fab->links; e; e = e->next, n++) {
        if (n < max) {
            pvrdma_link_get_stats(e->data, &st[n]);
        }
    }
    return n;
}

static void pvrdma_fabric_timer_arm(PvrdmaFabric *fab, int64_t at)
{
    if (fab->in_timer || !fab->has_host) {
        /* The timer re-arms itself on the way out. */
        if (fab->in_timer && (fab->timer_at < 0 || at < fab->timer_at)) {
            fab->timer_at = at;
        }
        return;
    }
    if (fab->timer_at < 0 || at < fab->timer_at) {
        fab->timer_at = at;
        fab->host.timer_mod(fab->host.opaque, at);
    }
}

/* Period of the timer while requests wait on links, and peers retry. */
#define PVRDMA_FABRIC_TICK_NS       (100 * 1000 * 1000LL)
#define PVRDMA_FABRIC_RETRY_NS      (1000 * 1000 * 1000LL)

void pvrdma_fabric_arm_tick(PvrdmaFabric *fab, int64_t now)
{
    if (fab->has_host) {
        if (now < 0) {
            now = fab->host.clock_ns(fab->host.opaque);
        }
        pvrdma_fabric_timer_arm(fab, now + PVRDMA_FABRIC_TICK_NS);
    }
}

void pvrdma_fabric_kick(PvrdmaFabric *fab)
{
    if (fab->has_host) {
        pvrdma_fabric_timer_arm(fab, fab->host.clock_ns(fab->host.opaque));
    }
}


/*
 * Tell the shm peers whether a stream's linger is on.  Its promise reaches
 * past the next look by a poll window, so a late timer does not bring the
 * kicks back: that look either renews it or withdraws it (and reads the
 * rings once more).
 */
static void pvrdma_fabric_publish_linger(PvrdmaFabric *fab)
{
    int64_t until = fab->linger_at ?
                    fab->linger_at + PVRDMA_LINK_POLL_WINDOW_NS : 0;
    GList *e;

    for (e = fab->links; e; e = e->next) {
        pvrdma_link_linger(e->data, until);
    }
}

/*
 * The event loop took several SENDs or WRITEs from a link at once: a
 * stream is on, more are on their way.  Rather than have the peers kick
 * for each batch, look again at the next linger tick, and promise the
 * peers to; the timer goes on doing so while its looks find SENDs or
 * WRITEs (pvrdma_fabric_timer_expired).
 */
static void pvrdma_fabric_linger(PvrdmaFabric *fab)
{
    int64_t now = fab->host.clock_ns(fab->host.opaque);

    if (fab->linger_at > now) {
        return;                 /* a look is due anyway */
    }
    fab->linger_at = now + PVRDMA_FABRIC_LINGER_NS;
    pvrdma_fabric_publish_linger(fab);
    pvrdma_fabric_timer_arm(fab, fab->linger_at);
}

/* Links whose peer may have written frames without a kick, read again. */
static void pvrdma_fabric_recheck(PvrdmaFabric *fab)
{
    g_autoptr(GList) links = NULL;
    GList *e;

    while (fab->recheck) {
        fab->recheck = false;
        g_clear_pointer(&links, g_list_free);
        links = g_list_copy(fab->links);
        for (e = links; e; e = e->next) {
            if (pvrdma_link_pending_in(e->data)) {
                pvrdma_link_poll(e->data, -1);
            }
        }
    }
}

void pvrdma_fabric_timer_expired(PvrdmaFabric *fab)
{
    int64_t now = fab->host.clock_ns(fab->host.opaque);
    uint64_t sends = fab->sends_in;
    bool busy = false;
    g_autoptr(GList) links = NULL;
    GList *e;

    fab->in_timer = true;
    fab->timer_at = -1;
    links = g_list_copy(fab->links);
    fab->draining++;
    for (e = links; e; e = e->next) {
        /*
         * Frames a kick was spared for: a stream's linger, or a polling
         * guest that stopped.  While a guest still polls (its promise
         * runs), its next poll takes them in: reading them here would
         * only contend with its vCPU for the device and steal a core
         * from the peer.
         */
        if (pvrdma_link_pending_in(e->data) &&
            (fab->poll_until <= now || fab->linger_at)) {
            pvrdma_link_poll(e->data, -1);
        }
        pvrdma_link_tick(e->data, now, &busy);
    }
    fab->draining--;
    if (fab->linger_at && fab->linger_at <= now) {
        /*
         * A linger look: on while it finds SENDs or WRITEs.  Ended, the
         * promise is withdrawn first, then the rings are read once more
         * (a peer that wrote after this look and read the old promise did
         * not kick).
         */
        bool found = fab->sends_in > sends;

        fab->linger_at = found ? now + PVRDMA_FABRIC_LINGER_NS : 0;
        pvrdma_fabric_publish_linger(fab);
        fab->recheck = !found;
    }
    pvrdma_fabric_recheck(fab);
    if (fab->poll_until > now) {
        pvrdma_fabric_timer_arm(fab, fab->poll_until);
    }
    if (fab->linger_at > now) {
        pvrdma_fabric_timer_arm(fab, fab->linger_at);
    }
    while (fab->dead) {
        PvrdmaLink *l = fab->dead->data;

        fab->dead = g_list_delete_link(fab->dead, fab->dead);
        pvrdma_link_free(l);
    }
    if (pvrdma_fabric_move_tick(fab, now)) {
        busy = true;
    }
    if (pvrdma_fabric_say_flush(fab, now)) {
        busy = true;
    }
    if (busy) {
        pvrdma_fabric_timer_arm(fab, now + PVRDMA_FABRIC_TICK_NS);
    }
    if (pvrdma_fabric_net_tick(fab, now)) {
        pvrdma_fabric_timer_arm(fab, now + PVRDMA_FABRIC_RETRY_NS);
    }
    fab->in_timer = false;
    if (fab->timer_at >= 0) {
        int64_t at = fab->timer_at;

        fab->timer_at = -1;
        pvrdma_fabric_timer_arm(fab, at);
    }
}

void pvrdma_fabric_fd_ready(PvrdmaFabric *fab, void *tag, bool readable,
                            bool writable)
{
    if (*(uint32_t *)tag == PVRDMA_FABRIC_FD_LINK) {
        uint64_t sends = fab->sends_in;

        fab->draining++;
        pvrdma_link_io(tag, readable, writable);
        fab->draining--;
        /*
         * Two SENDs or WRITEs or more in one wakeup: a stream (a
         * ping-pong brings one at a time, and a linger would only delay
         * it).
         */
        if (pvrdma_link_shm(tag) && fab->sends_in >= sends + 2) {
            pvrdma_fabric_linger(fab);
        }
        if (!fab->draining) {
            pvrdma_fabric_recheck(fab);
        }
    } else {
        pvrdma_fabric_net_ready(fab, tag, readable, writable);
    }
}

bool pvrdma_fabric_sgl_uses(const PvrdmaSgl *sgl, const PvrdmaMr *mr)
{
    uint32_t i;

    for (i = 0; i < sgl->nseg; i++) {
        const uint64_t *pages = sgl->seg[i].pages;

        if (pages && (pages == mr->pages || pages == mr->frmr_pages)) {
            return true;
        }
    }
    return false;
}

void pvrdma_fabric_req_free(PvrdmaFabricReq *req)
{
    PvrdmaFabricQp *fqp = req->qp->be;

    g_queue_unlink(&fqp->reqs, &req->qnode);
    if (pvrdma_fabric_op_reads(req->wr->opcode)) {
        fqp->nrd--;
    }
    g_free(req);
}

void pvrdma_fabric_qp_drop_reqs(PvrdmaQp *qp)
{
    PvrdmaFabricQp *fqp = qp->be;

    while (!g_queue_is_empty(&fqp->reqs)) {
        PvrdmaFabricReq *req = fqp->reqs.head->data;

        if (req->answered) {
            pvrdma_fabric_req_free(req);
        } else {
            pvrdma_link_req_cancel(req);
        }
    }
    fqp->gen++;
}

/* Complete the oldest request of its QP with its answer (the core's). */
static void pvrdma_fabric_req_complete(PvrdmaFabricReq *req)
{
    PvrdmaFabricPort *port = req->port;
    PvrdmaQp *qp = req->qp;
    PvrdmaFabricQp *fqp = qp->be;
    const PvrdmaFabricAck *ack = &req->ack;
    PvrdmaSendResult res = {
        .status = ack->status,
        .rnr = ack->rnr,
        .rnr_timer = ack->rnr_timer,
        .atomic_orig = ack->atomic_orig,
        .fatal = req->fatal,
    };

    if (req->wr->ud) {
        /*
         * A datagram is sent once it left: whatever became of it (no
         * peer, a closed link, no answer) completes it successfully,
         * but for a fault in our own memory.
         */
        res = (PvrdmaSendResult) {
            .status = ack->status == PVRDMA_WC_LOC_PROT_ERR ?
                      ack->status : PVRDMA_WC_SUCCESS,
        };
    }
    pvrdma_fabric_req_free(req);
    if (res.rnr) {
        /*
         * The responder drops what we sent after the NAKed request (its
         * generation): the core sends them again after the retry.
         */
        pvrdma_fabric_qp_drop_reqs(qp);
        if (!fqp->rnr) {
            fqp->rnr = true;
            pvrdma_fabric_rnr_note(port->fabric, true);
        }
    }
    pvrdma_core_enter(port->core);
    pvrdma_core_send_done(port->core, qp, &res);
    pvrdma_core_leave(port->core);
}

void pvrdma_fabric_req_answered(PvrdmaFabricReq *req,
                                const PvrdmaFabricAck *ack, bool fatal)
{
    PvrdmaQp *qp = req->qp;
    PvrdmaFabricQp *fqp = qp->be;
    GList *head;

    req->answered = true;
    req->ack = *ack;
    req->fatal = fatal;
    req->port->work++;
    if (fqp->delivering) {
        return;                 /* the loop below takes it in its turn */
    }
    fqp->delivering = true;
    /* Each completion may submit, or cancel the rest: look again. */
    while ((head = fqp->reqs.head) &&
           ((PvrdmaFabricReq *)head->data)->answered) {
        if (qp->state == PVRDMA_QPS_ERR) {
            /*
             * An error completion moved the QP to ERR; its flush may wait
             * for the core's outermost leave (we may be inside a doorbell
             * that polled the link): what is still out is flushed, not
             * completed with the answers that came for it.
             */
            pvrdma_fabric_qp_drop_reqs(qp);
            break;
        }
        pvrdma_fabric_req_complete(head->data);
    }
    fqp->delivering = false;
}

void pvrdma_fabric_exec_free(PvrdmaFabricExec *ex)
{
    if (ex->async && ex->port) {
        g_queue_unlink(&ex->port->execs, &ex->node);
    }
    g_free(ex);
}

/* ---- what the port backend asks ------------------------------------------ */

bool pvrdma_fabric_port_rq_busy(PvrdmaFabricPort *port, PvrdmaQp *qp)
{
    GList *e;

    for (e = port->execs.head; e; e = e->next) {
        PvrdmaFabricExec *ex = e->data;

        if (ex->recv && ex->qp &&
            (ex->qp == qp || (qp->has_srq && ex->qp->has_srq &&
                              ex->qp->srq_handle == qp->srq_handle))) {
            return true;
        }
    }
    return false;
}

/* Abort the port's execs on @qp (NULL: all), or using @mr. */
void pvrdma_fabric_port_abort(PvrdmaFabricPort *port, PvrdmaQp *qp,
                              const PvrdmaMr *mr)
{
    GList *e;

    for (e = port->execs.head; e; e = e->next) {
        PvrdmaFabricExec *ex = e->data;

        if (!ex->qp || (qp && ex->qp != qp) ||
            (mr && !pvrdma_fabric_sgl_uses(ex->mem ? ex->mem : &ex->sgl,
                                           mr))) {
            continue;
        }
        pvrdma_fabric_rc_abort(ex);
    }
}

void pvrdma_fabric_port_mr_gone(PvrdmaFabricPort *port, const PvrdmaMr *mr)
{
    g_autoptr(GList) links = NULL;
    GList *e;

    pvrdma_fabric_port_abort(port, NULL, mr);
    links = g_list_copy(port->fabric->links);
    for (e = links; e; e = e->next) {
        pvrdma_link_mr_gone(e->data, port, mr);
    }
}

/* Reset or removal: every exec and every link request of @port ends. */
void pvrdma_fabric_port_quiesce(PvrdmaFabricPort *port)
{
    g_autoptr(GList) links = NULL;
    GList *e;

    pvrdma_fabric_port_abort(port, NULL, NULL);
    links = g_list_copy(port->fabric->links);
    for (e = links; e; e = e->next) {
        pvrdma_link_port_gone(e->data, port);
    }
    for (e = port->fabric->parked.head; e;) {
        PvrdmaFabricReq *req = e->data;

        e = e->next;
        if (req->port == port) {
            pvrdma_fabric_unpark(req);
            pvrdma_fabric_req_free(req);
        }
    }
}

/*
 * Take in what the links may hold for us, in the caller's (a vCPU's)
 * thread.  @incoming (a guest polled an empty CQ): every link, and the
 * shm links' peers are told that for a while we look without a kick (the
 * timer looks once more when that ends); otherwise (a send doorbell
 * behind an outstanding request) only the links with requests of ours.
 */
/*
 * @cq's poller is counted on until @until: its entry, or a free or
 * expired one, or the one that ends first.
 */
static void pvrdma_fabric_poll_note(PvrdmaFabric *fab, PvrdmaCq *cq,
                                    int64_t until)
{
    unsigned i, pick = 0;

    for (i = 0; i < PVRDMA_FABRIC_POLLED_CQS; i++) {
        if (fab->polled[i].cq == cq) {
            pick = i;
            break;
        }
        if (fab->polled[i].until < fab->polled[pick].until ||
            (!fab->polled[i].cq && fab->polled[pick].cq)) {
            pick = i;
        }
    }
    if (fab->polled[pick].cq && fab->polled[pick].cq != cq) {
        /* Evicted: its end no longer matters. */
        fab->polled[pick].cq->poll_watch = false;
    }
    fab->polled[pick].cq = cq;
    fab->polled[pick].until = until;
    cq->poll_watch = true;
}

void pvrdma_fabric_poll_end(PvrdmaFabric *fab, PvrdmaCq *cq)
{
    int64_t now, left = 0;
    bool pending = false;
    unsigned i;
    GList *e;

    now = fab->has_host ? fab->host.clock_ns(fab->host.opaque) : 0;
    for (i = 0; i < PVRDMA_FABRIC_POLLED_CQS; i++) {
        if (fab->polled[i].cq == cq) {
            fab->polled[i].cq = NULL;
            fab->polled[i].until = 0;
        } else if (fab->polled[i].cq && fab->polled[i].until > now) {
            left = MAX(left, fab->polled[i].until);
        }
    }
    if (left >= fab->poll_until) {
        return;
    }
    /*
     * The promise shrinks to what other pollers still hold (none: 0).
     * A peer that wrote frames and then read the old promise did not
     * kick: after the new one is published, look at the rings again.
     */
    fab->poll_until = left;
    for (e = fab->links; e; e = e->next) {
        pvrdma_link_promise(e->data, left);
    }
    if (fab->draining) {
        fab->recheck = true;
        return;
    }
    for (e = fab->links; e && !pending; e = e->next) {
        pending = pvrdma_link_pending_in(e->data);
    }
    if (pending) {
        pvrdma_fabric_kick(fab);
    }
}

void pvrdma_fabric_poll_links(PvrdmaFabric *fab, bool incoming, PvrdmaCq *cq)
{
    int64_t until = -1;
    GList *busy = NULL, *e;

    if (incoming && cq && fab->has_host && fab->links) {
        /* A promise to the peers (none: nobody to spare kicks). */
        until = fab->host.clock_ns(fab->host.opaque) +
                PVRDMA_LINK_POLL_WINDOW_NS;
        pvrdma_fabric_poll_note(fab, cq, until);
        fab->poll_until = until;
        /* Re-arms only if no earlier expiry is armed: once per window. */
        pvrdma_fabric_timer_arm(fab, until);
    }
    /* A copy: reading may close a link (and take it off fab->links). */
    for (e = fab->links; e; e = e->next) {
        if (incoming || pvrdma_link_busy(e->data)) {
            busy = g_list_prepend(busy, e->data);
        }
    }
    fab->draining++;
    for (e = busy; e; e = e->next) {
        pvrdma_link_poll(e->data, until);
    }
    fab->draining--;
    g_list_free(busy);
    if (!fab->draining) {
        pvrdma_fabric_recheck(fab);
    }
}

/* Tell every link what @port has now, with @send (GIDS, MGIDS). */
static void pvrdma_fabric_port_tell(PvrdmaFabricPort *port,
                                    void (*send)(PvrdmaLink *l,
                                                 PvrdmaFabricPort *port,
                                                 bool leaving))
{
    g_autoptr(GList) links = NULL;
    GList *e;

    links = g_list_copy(port->fabric->links);
    for (e = links; e; e = e->next) {
        send(e->data, port, false);
    }
}

void pvrdma_fabric_port_mgids_changed(PvrdmaFabricPort *port)
{
    pvrdma_fabric_port_tell(port, pvrdma_link_send_mgids);
}

void pvrdma_fabric_mcast_deliver(PvrdmaFabric *fab,
                                 const PvrdmaFabricMsg *msg,
                                 const PvrdmaSgl *sgl, const void *buf)
{
    PvrdmaQp *qps[PVRDMA_MCAST_MAX_QPS];
    PvrdmaFabricPayload payload = { .sgl = sgl };
    PvrdmaFabricAck ack;

    for (unsigned i = 0; i < PVRDMA_FABRIC_MAX_PORTS; i++) {
        PvrdmaFabricPort *port = fab->ports[i];
        unsigned n;

        if (!port || port->moving) {
            continue;
        }
        pvrdma_core_enter(port->core);
        n = pvrdma_core_mcast_qps(port->core, msg->dgid, qps,
                                  PVRDMA_MCAST_MAX_QPS);
        for (unsigned j = 0; j < n; j++) {
            if (sgl) {
                pvrdma_fabric_rc_respond(port, qps[j], msg, &payload, &ack);
            } else {
                PvrdmaFabricExec ex PVRDMA_UNINIT;

                if (pvrdma_fabric_rc_begin(port, qps[j], msg, &ex)) {
                    pvrdma_fabric_rc_data(&ex, 0, msg->length,
                                          pvrdma_fabric_buf_read,
                                          (void *)buf);
                    pvrdma_fabric_rc_end(&ex);
                }
            }
        }
        pvrdma_core_leave(port->core);
    }
}

void pvrdma_fabric_port_gids_changed(PvrdmaFabricPort *port)
{
    pvrdma_fabric_port_tell(port, pvrdma_link_send_gids);
}
