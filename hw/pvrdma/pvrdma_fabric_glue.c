/*
 * QEMU glue of the software fabric across processes and hosts
 * (docs/fabric.md): the fabrics named by the fabric-* properties of
 * -device pvrdma, with the fd handlers, timer and messages they need.
 *
 *   -device pvrdma,fabric-path=DIR                 (VMs of one host)
 *   -device pvrdma,fabric-listen=HOST:PORT[,fabric-peer=HOST:PORT]
 *   -device pvrdma,fabric-path=DIR,fabric-listen=...[,fabric-peer=...]
 *                                       (directories on several hosts)
 *
 * Devices of one process with the same fabric-* values share one fabric;
 * different values are different fabrics, which never see each other.
 * (A property rather than an -object: -object types must be listed in
 * QEMU's QAPI schema, which this out-of-tree device does not patch.)
 * The fabric code itself is QEMU-free (pvrdma_fabric*.c, pvrdma_link.c).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/error-report.h"
#include "qemu/main-loop.h"
#include "qemu/timer.h"
#include "block/aio.h"
#include "qapi/error.h"

#include "pvrdma_fabric.h"
#include "pvrdma_fabric_glue.h"

typedef struct PvrdmaFabricGlue {
    char *key;
    PvrdmaFabric *fab;
    AioContext *ctx;            /* an IOThread's, or NULL: main loop */
    QEMUTimer *timer;
    GHashTable *watches;        /* fd -> PvrdmaFabricWatch */
} PvrdmaFabricGlue;

typedef struct PvrdmaFabricWatch {
    PvrdmaFabricGlue *glue;
    void *tag;
} PvrdmaFabricWatch;

/*
 * Fabrics of this process by their properties.  An entry stays for the
 * process's lifetime (a watch may still be dispatched in an IOThread
 * after its fd was unwatched, and finds its glue); its fabric, with the
 * links, rings and sockets, goes when the last device on it leaves
 * (pvrdma_fabric_glue_release) and is made again by the next device.
 */
static GHashTable *pvrdma_fabrics;

static void pvrdma_fabric_glue_set_fd(PvrdmaFabricGlue *g, int fd,
                                      IOHandler *read, IOHandler *write,
                                      void *opaque)
{
    if (g->ctx) {
        aio_set_fd_handler(g->ctx, fd, read, write, NULL, NULL, opaque);
    } else {
        qemu_set_fd_handler(fd, read, write, opaque);
    }
}

static void pvrdma_fabric_glue_read(void *opaque)
{
    PvrdmaFabricWatch *w = opaque;

    pvrdma_lock();
    if (w->tag) {
        pvrdma_fabric_fd_ready(w->glue->fab, w->tag, true, false);
    }
    pvrdma_unlock();
}

static void pvrdma_fabric_glue_write(void *opaque)
{
    PvrdmaFabricWatch *w = opaque;

    pvrdma_lock();
    if (w->tag) {
        pvrdma_fabric_fd_ready(w->glue->fab, w->tag, false, true);
    }
    pvrdma_unlock();
}

static void pvrdma_fabric_glue_watch(void *opaque, int fd, bool write,
                                     void *tag)
{
    PvrdmaFabricGlue *g = opaque;
    PvrdmaFabricWatch *w = g_hash_table_lookup(g->watches,
                                               GINT_TO_POINTER(fd));

    if (!w) {
        w = g_new0(PvrdmaFabricWatch, 1);
        w->glue = g;
        g_hash_table_insert(g->watches, GINT_TO_POINTER(fd), w);
    }
    w->tag = tag;
    pvrdma_fabric_glue_set_fd(g, fd, pvrdma_fabric_glue_read,
                              write ? pvrdma_fabric_glue_write : NULL, w);
}

/*
 * A watch outlives its fd's handler: an IOThread may be dispatching it,
 * waiting for pvrdma_lock, while another thread unwatches; it then finds
 * no tag (or the tag of a later link on the same fd, which only reads
 * nothing).  Watches are kept per fd number, so they stay few.
 */
static void pvrdma_fabric_glue_unwatch(void *opaque, int fd)
{
    PvrdmaFabricGlue *g = opaque;
    PvrdmaFabricWatch *w = g_hash_table_lookup(g->watches,
                                               GINT_TO_POINTER(fd));

    pvrdma_fabric_glue_set_fd(g, fd, NULL, NULL, NULL);
    if (w) {
        w->tag = NULL;
    }
}

static void pvrdma_fabric_glue_timer_mod(void *opaque, int64_t expire_ns)
{
    PvrdmaFabricGlue *g = opaque;

    if (expire_ns < 0) {
        timer_del(g->timer);
    } else {
        timer_mod(g->timer, expire_ns);
    }
}

/* Peers live outside this guest: real time, not the guest's clock. */
static int64_t pvrdma_fabric_glue_clock(void *opaque)
{
    return qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
}

static void pvrdma_fabric_glue_report(void *opaque, const char *msg)
{
    info_report("%s", msg);
}

static void pvrdma_fabric_glue_timer_cb(void *opaque)
{
    PvrdmaFabricGlue *g = opaque;

    pvrdma_lock();
    if (g->fab) {
        pvrdma_fabric_timer_expired(g->fab);
    }
    pvrdma_unlock();
}

/* Drop @g's fabric: its links, sockets and rings go with it. */
static void pvrdma_fabric_glue_stop(PvrdmaFabricGlue *g)
{
    pvrdma_fabric_unref(g->fab);
    g->fab = NULL;
    timer_free(g->timer);
    g->timer = NULL;
}

/* Make @g's fabric in @ctx and join it as the properties say. */
static bool pvrdma_fabric_glue_start(PvrdmaFabricGlue *g, const char *path,
                                     const char *listen, const char *peer,
                                     const char *allow_uid,
                                     const char *allow_gid,
                                     AioContext *ctx, Error **errp)
{
    PvrdmaFabricHost host = {
        .watch = pvrdma_fabric_glue_watch,
        .unwatch = pvrdma_fabric_glue_unwatch,
        .timer_mod = pvrdma_fabric_glue_timer_mod,
        .clock_ns = pvrdma_fabric_glue_clock,
        .report = pvrdma_fabric_glue_report,
        .opaque = g,
    };
    char *msg = NULL;

    g->fab = pvrdma_fabric_new();
    g->ctx = ctx;
    g->timer = ctx ? aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_NS,
                                   pvrdma_fabric_glue_timer_cb, g) :
                     timer_new_ns(QEMU_CLOCK_REALTIME,
                                  pvrdma_fabric_glue_timer_cb, g);
    pvrdma_fabric_set_host(g->fab, &host);
    if (!pvrdma_fabric_allow(g->fab, allow_uid, allow_gid, &msg) ||
        (path && !pvrdma_fabric_join_dir(g->fab, path, &msg)) ||
        (listen && !pvrdma_fabric_listen(g->fab, listen, &msg)) ||
        (peer && !pvrdma_fabric_add_peer(g->fab, peer, &msg))) {
        error_setg(errp, "%s", msg);
        g_free(msg);
        pvrdma_fabric_glue_stop(g);
        return false;
    }
    return true;
}

PvrdmaFabric *pvrdma_fabric_glue_get(const char *path, const char *listen,
                                     const char *peer, const char *allow_uid,
                                     const char *allow_gid, AioContext *ctx,
                                     Error **errp)
{
    PvrdmaFabricGlue *g;
    char *key;

    key = g_strdup_printf("path=%s,listen=%s,peer=%s,uid=%s,gid=%s",
                          path ?: "", listen ?: "", peer ?: "",
                          allow_uid ?: "", allow_gid ?: "");
    if (!pvrdma_fabrics) {
        pvrdma_fabrics = g_hash_table_new(g_str_hash, g_str_equal);
    }
    g = g_hash_table_lookup(pvrdma_fabrics, key);
    if (g) {
        g_free(key);
        if (g->fab) {
            return g->fab;
        }
    } else {
        g = g_new0(PvrdmaFabricGlue, 1);
        g->key = key;
        g->watches = g_hash_table_new_full(NULL, NULL, NULL, g_free);
        g_hash_table_insert(pvrdma_fabrics, g->key, g);
    }
    return pvrdma_fabric_glue_start(g, path, listen, peer, allow_uid,
                                    allow_gid, ctx, errp) ? g->fab : NULL;
}

void pvrdma_fabric_glue_release(void)
{
    GHashTableIter it;
    PvrdmaFabricGlue *g;

    if (!pvrdma_fabrics) {
        return;
    }
    g_hash_table_iter_init(&it, pvrdma_fabrics);
    while (g_hash_table_iter_next(&it, NULL, (void **)&g)) {
        if (g->fab && pvrdma_fabric_unused(g->fab)) {
            pvrdma_fabric_glue_stop(g);
        }
    }
}
