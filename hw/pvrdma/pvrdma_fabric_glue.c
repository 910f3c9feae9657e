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
#include "system/iothread.h"
#include "qapi/error.h"
#include "qom/object_interfaces.h"
#include "authz/base.h"
#include "crypto/tlscreds.h"
#include "crypto/tlscredsanon.h"
#include "crypto/tlscredspsk.h"
#include "crypto/tlscredsx509.h"
#include "crypto/tlssession.h"

#include "pvrdma_fabric.h"
#include "pvrdma_fabric_glue.h"
#include "pvrdma_qemu_compat.h"

typedef struct PvrdmaFabricGlue {
    char *key;
    PvrdmaFabric *fab;
    /*
     * Where its fd handlers and timer run (NULL: the main loop), held
     * while the fabric lives: a device that leaves may take its IOThread
     * with it (object-del) while devices that came later still use the
     * fabric.
     */
    IOThread *iothread;
    QEMUTimer *timer;
    GHashTable *watches;        /* fd -> PvrdmaFabricWatch */
    /*
     * fabric-tls-creds: the user's object and its twin for the other
     * end (a member accepts links as TLS server and makes them as
     * client); fabric-tls-authz.  NULL: plain TCP.
     */
    QCryptoTLSCreds *tls[2];    /* by QCryptoTLSCredsEndpoint */
    char *tls_authz;
} PvrdmaFabricGlue;

/*
 * One TLS session of a link (PvrdmaFabricHost.tls_*), and what it read
 * ahead: GnuTLS asks for a record's 5-byte header, then for its body,
 * and a system call each would cost more than the record's decryption;
 * one read takes in several records.  Bytes left here do not wake the
 * fd handler, but the link reads until the session says EAGAIN, which
 * it says only once these are gone and the socket is empty.
 */
#define PVRDMA_TLS_READ_AHEAD   (64u << 10)
typedef struct PvrdmaTls {
    QCryptoTLSSession *sess;
    int fd;
    size_t rpos, rlen;
    uint8_t rbuf[PVRDMA_TLS_READ_AHEAD];
} PvrdmaTls;

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
    if (g->iothread) {
        aio_set_fd_handler(iothread_get_aio_context(g->iothread), fd, read,
                           write, NULL, NULL, opaque);
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

/* ---- TLS on TCP links ---------------------------------------------------- */

static ssize_t pvrdma_tls_push(PvrdmaTlsOutBuf buf, size_t len, void *opaque,
                               Error **errp)
{
    PvrdmaTls *t = opaque;
    ssize_t n;

    do {
        n = send(t->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return QCRYPTO_TLS_SESSION_ERR_BLOCK;
    }
    if (n < 0) {
        error_setg_errno(errp, errno, "cannot write to the link's socket");
    }
    return n;
}

static ssize_t pvrdma_tls_pull(PvrdmaTlsInBuf buf, size_t len, void *opaque,
                               Error **errp)
{
    PvrdmaTls *t = opaque;
    ssize_t n;

    if (t->rpos == t->rlen) {
        do {
            n = recv(t->fd, t->rbuf, sizeof(t->rbuf), MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return QCRYPTO_TLS_SESSION_ERR_BLOCK;
        }
        if (n < 0) {
            error_setg_errno(errp, errno, "cannot read the link's socket");
        }
        if (n <= 0) {
            return n;
        }
        t->rpos = 0;
        t->rlen = n;
    }
    n = MIN(len, t->rlen - t->rpos);
    memcpy(buf, t->rbuf + t->rpos, n);
    t->rpos += n;
    return n;
}

static void pvrdma_tls_free(void *opaque)
{
    PvrdmaTls *t = opaque;

    qcrypto_tls_session_free(t->sess);
    g_free(t);
}

static void *pvrdma_tls_new(void *opaque, int fd, bool server,
                            const char *host, char **errmsg)
{
    PvrdmaFabricGlue *g = opaque;
    QCryptoTLSCredsEndpoint end = server ? QCRYPTO_TLS_CREDS_ENDPOINT_SERVER :
                                           QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT;
    PvrdmaTls *t = g_new0(PvrdmaTls, 1);
    Error *err = NULL;

    t->fd = fd;
    /* The server end checks no name: its clients come from anywhere. */
    t->sess = qcrypto_tls_session_new(g->tls[end], server ? NULL : host,
                                      g->tls_authz, end, &err);
    if (!t->sess) {
        *errmsg = g_strdup(error_get_pretty(err));
        error_free(err);
        g_free(t);
        return NULL;
    }
    qcrypto_tls_session_set_callbacks(t->sess, pvrdma_tls_push,
                                      pvrdma_tls_pull, t);
    return t;
}

static int pvrdma_tls_handshake(void *opaque, bool *write, char **errmsg)
{
    PvrdmaTls *t = opaque;
    Error *err = NULL;
    int ret = qcrypto_tls_session_handshake(t->sess, &err);

    if (ret == QCRYPTO_TLS_HANDSHAKE_SENDING ||
        ret == QCRYPTO_TLS_HANDSHAKE_RECVING) {
        *write = ret == QCRYPTO_TLS_HANDSHAKE_SENDING;
        return 0;
    }
    /* Done: the peer's certificate and the authz object have their say. */
    if (ret == QCRYPTO_TLS_HANDSHAKE_COMPLETE &&
        qcrypto_tls_session_check_credentials(t->sess, &err) == 0) {
        return 1;
    }
    if (ret == QCRYPTO_TLS_HANDSHAKE_COMPLETE) {
        *errmsg = g_strdup_printf("the peer's TLS credentials are refused: "
                                  "%s (its certificate must come from "
                                  "this QEMU's CA, name the address "
                                  "connected to, and be allowed by "
                                  "fabric-tls-authz)",
                                  error_get_pretty(err));
        ret = -2;
    } else {
        *errmsg = g_strdup(error_get_pretty(err));
        ret = -1;
    }
    error_free(err);
    return ret;
}

static ssize_t pvrdma_tls_recv(void *opaque, void *buf, size_t len,
                               char **errmsg)
{
    PvrdmaTls *t = opaque;
    Error *err = NULL;
    ssize_t n = pvrdma_tls_session_read(t->sess, buf, len, &err);

    if (n == QCRYPTO_TLS_SESSION_ERR_BLOCK) {
        errno = EAGAIN;
        return -1;
    }
    if (PVRDMA_TLS_CLOSED(n)) {
        error_free(err);
        return 0;
    }
    if (n < 0) {
        *errmsg = g_strdup(error_get_pretty(err));
        error_free(err);
    }
    return n;
}

static ssize_t pvrdma_tls_send(void *opaque, const void *buf, size_t len,
                               char **errmsg)
{
    PvrdmaTls *t = opaque;
    Error *err = NULL;
    ssize_t n = qcrypto_tls_session_write(t->sess, buf, len, &err);

    if (n == QCRYPTO_TLS_SESSION_ERR_BLOCK) {
        errno = EAGAIN;
        return -1;
    }
    if (n < 0) {
        *errmsg = g_strdup(error_get_pretty(err));
        error_free(err);
    }
    return n;
}

/*
 * The twin of @creds for the other end: same type, directory and
 * settings.  Both are made from the directory at once, so what a member
 * lacks is said when the device is made, not at its first link.
 */
static QCryptoTLSCreds *pvrdma_tls_twin(QCryptoTLSCreds *creds,
                                        const char *id, Error **errp)
{
    Object *o = OBJECT(creds);
    bool x509 = object_dynamic_cast(o, TYPE_QCRYPTO_TLS_CREDS_X509);
    bool to_server = qcrypto_tls_creds_check_endpoint(
                         creds, QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT, NULL);
    static const char *const strs[] = { "dir", "priority", "passwordid",
                                        "username" };
    Object *twin = object_new(object_get_typename(o));
    Error *err = NULL;
    unsigned i;

    object_property_set_str(twin, "endpoint", to_server ? "server" : "client",
                            &error_abort);
    object_property_set_bool(twin, "verify-peer", true, &error_abort);
    if (x509) {
        object_property_set_bool(twin, "sanity-check",
                                 object_property_get_bool(o, "sanity-check",
                                                          NULL), NULL);
    }
    for (i = 0; i < ARRAY_SIZE(strs); i++) {
        g_autofree char *v = NULL;

        /* A server's PSK identity is whoever's key is in the file. */
        if (!object_property_find(o, strs[i]) ||
            (to_server && !strcmp(strs[i], "username"))) {
            continue;
        }
        v = object_property_get_str(o, strs[i], NULL);
        if (v && *v) {
            object_property_set_str(twin, strs[i], v, &error_abort);
        }
    }
    if (!user_creatable_complete(USER_CREATABLE(twin), &err)) {
        error_setg(errp, "pvrdma: fabric-tls-creds=%s: a fabric member "
                   "accepts links (as TLS server) and makes them (as "
                   "client), so its directory must serve both ends: %s "
                   "(tls-creds-x509: server-cert.pem and server-key.pem, "
                   "and client-cert.pem and client-key.pem, which may be "
                   "one certificate made for both uses; tls-creds-psk: "
                   "keys.psk with the key of username, qemu by default)",
                   id, error_get_pretty(err));
        error_free(err);
        object_unref(twin);
        return NULL;
    }
    return QCRYPTO_TLS_CREDS(twin);
}

/*
 * QEMU takes a client's certificate as optional, but every member's
 * server end asks for one (verify-peer): a directory of x509 credentials
 * without it could only be refused by each peer, so it is refused here.
 */
static bool pvrdma_tls_client_cert(Object *o, const char *id, Error **errp)
{
    g_autofree char *dir = NULL;
    static const char *const files[] = { "client-cert.pem",
                                         "client-key.pem" };
    unsigned i;

    if (!object_dynamic_cast(o, TYPE_QCRYPTO_TLS_CREDS_X509)) {
        return true;
    }
    dir = object_property_get_str(o, "dir", NULL);
    for (i = 0; dir && i < ARRAY_SIZE(files); i++) {
        g_autofree char *f = g_build_filename(dir, files[i], NULL);

        if (!g_file_test(f, G_FILE_TEST_EXISTS)) {
            error_setg(errp, "pvrdma: fabric-tls-creds=%s: %s is missing: "
                       "a fabric member makes links too (as TLS client), "
                       "and its peers ask for its certificate, so its "
                       "directory must serve both ends (server-cert.pem "
                       "and server-key.pem, and client-cert.pem and "
                       "client-key.pem, which may be one certificate made "
                       "for both uses)", id, f);
            return false;
        }
    }
    return true;
}

/* Take @creds_id and @authz_id for @g's TCP links, or say what is wrong. */
static bool pvrdma_tls_setup(PvrdmaFabricGlue *g, const char *creds_id,
                             const char *authz_id, PvrdmaFabricHost *host,
                             Error **errp)
{
    Object *root = object_get_objects_root();
    Object *o, *z;
    QCryptoTLSCreds *creds, *twin;
    bool server;

    o = object_resolve_path_component(root, creds_id);
    if (!o || !object_dynamic_cast(o, TYPE_QCRYPTO_TLS_CREDS)) {
        error_setg(errp, "pvrdma: fabric-tls-creds=%s names no TLS "
                   "credentials: add -object tls-creds-psk,id=%s,dir=DIR "
                   "or -object tls-creds-x509,id=%s,dir=DIR", creds_id,
                   creds_id, creds_id);
        return false;
    }
    if (object_dynamic_cast(o, TYPE_QCRYPTO_TLS_CREDS_ANON)) {
        error_setg(errp, "pvrdma: fabric-tls-creds=%s is tls-creds-anon, "
                   "which lets anyone join: use tls-creds-psk or "
                   "tls-creds-x509", creds_id);
        return false;
    }
    if (object_dynamic_cast(o, TYPE_QCRYPTO_TLS_CREDS_X509) &&
        !object_property_get_bool(o, "verify-peer", NULL)) {
        error_setg(errp, "pvrdma: fabric-tls-creds=%s has verify-peer=off, "
                   "so any certificate would do: remove verify-peer=off",
                   creds_id);
        return false;
    }
    if (authz_id) {
        z = object_resolve_path_component(root, authz_id);
        if (!z || !object_dynamic_cast(z, TYPE_QAUTHZ)) {
            error_setg(errp, "pvrdma: fabric-tls-authz=%s names no "
                       "authorization object: add -object authz-simple,"
                       "id=%s,identity=DN (or authz-list, "
                       "authz-list-file)", authz_id, authz_id);
            return false;
        }
        if (!object_dynamic_cast(o, TYPE_QCRYPTO_TLS_CREDS_X509)) {
            error_setg(errp, "pvrdma: fabric-tls-authz checks the names "
                       "of x509 certificates; with tls-creds-psk the key "
                       "file is the list of who may join: remove "
                       "fabric-tls-authz or use tls-creds-x509");
            return false;
        }
    }
    creds = QCRYPTO_TLS_CREDS(o);
    if (!pvrdma_tls_client_cert(o, creds_id, errp)) {
        return false;
    }
    twin = pvrdma_tls_twin(creds, creds_id, errp);
    if (!twin) {
        return false;
    }
    server = qcrypto_tls_creds_check_endpoint(creds,
                                              QCRYPTO_TLS_CREDS_ENDPOINT_SERVER,
                                              NULL);
    object_ref(o);
    g->tls[QCRYPTO_TLS_CREDS_ENDPOINT_SERVER] = server ? creds : twin;
    g->tls[QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT] = server ? twin : creds;
    g->tls_authz = g_strdup(authz_id);
    host->tls_new = pvrdma_tls_new;
    host->tls_handshake = pvrdma_tls_handshake;
    host->tls_recv = pvrdma_tls_recv;
    host->tls_send = pvrdma_tls_send;
    host->tls_free = pvrdma_tls_free;
    return true;
}

/* Drop @g's fabric: its links, sockets and rings go with it. */
static void pvrdma_fabric_glue_stop(PvrdmaFabricGlue *g)
{
    unsigned i;

    pvrdma_fabric_unref(g->fab);
    g->fab = NULL;
    timer_free(g->timer);
    g->timer = NULL;
    if (g->iothread) {
        object_unref(OBJECT(g->iothread));
        g->iothread = NULL;
    }
    for (i = 0; i < ARRAY_SIZE(g->tls); i++) {
        if (g->tls[i]) {
            object_unref(OBJECT(g->tls[i]));
            g->tls[i] = NULL;
        }
    }
    g_free(g->tls_authz);
    g->tls_authz = NULL;
}

/* Make @g's fabric in @iothread and join it as the properties say. */
static bool pvrdma_fabric_glue_start(PvrdmaFabricGlue *g,
                                     const PvrdmaFabricProps *p,
                                     IOThread *iothread, Error **errp)
{
    AioContext *ctx = iothread ? iothread_get_aio_context(iothread) : NULL;
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
    g->iothread = iothread;
    if (iothread) {
        object_ref(OBJECT(iothread));
    }
    g->timer = ctx ? aio_timer_new(ctx, QEMU_CLOCK_REALTIME, SCALE_NS,
                                   pvrdma_fabric_glue_timer_cb, g) :
                     timer_new_ns(QEMU_CLOCK_REALTIME,
                                  pvrdma_fabric_glue_timer_cb, g);
    if (p->tls_creds &&
        !pvrdma_tls_setup(g, p->tls_creds, p->tls_authz, &host, errp)) {
        pvrdma_fabric_glue_stop(g);
        return false;
    }
    pvrdma_fabric_set_host(g->fab, &host);
    if (!pvrdma_fabric_allow(g->fab, p->allow_uid, p->allow_gid, &msg) ||
        (p->path && !pvrdma_fabric_join_dir(g->fab, p->path, &msg)) ||
        (p->listen && !pvrdma_fabric_listen(g->fab, p->listen, &msg)) ||
        (p->peer && !pvrdma_fabric_add_peer(g->fab, p->peer, &msg))) {
        error_setg(errp, "%s", msg);
        g_free(msg);
        pvrdma_fabric_glue_stop(g);
        return false;
    }
    return true;
}

PvrdmaFabric *pvrdma_fabric_glue_get(const PvrdmaFabricProps *p,
                                     IOThread *iothread, Error **errp)
{
    PvrdmaFabricGlue *g;
    char *key;

    key = g_strdup_printf("path=%s,listen=%s,peer=%s,uid=%s,gid=%s,"
                          "tls=%s,authz=%s",
                          p->path ?: "", p->listen ?: "", p->peer ?: "",
                          p->allow_uid ?: "", p->allow_gid ?: "",
                          p->tls_creds ?: "", p->tls_authz ?: "");
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
    return pvrdma_fabric_glue_start(g, p, iothread, errp) ? g->fab : NULL;
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
