/*
 * PVRDMA software fabric: finding and keeping links (docs/fabric.md).
 *
 *  - path=DIR: every process of the fabric listens on DIR/<instance>.sock
 *    and, when it starts, connects to every socket already there.  A
 *    socket is bound under a temporary name and renamed once it listens,
 *    so a *.sock that refuses a connection belongs to a dead process and
 *    is removed.  Links through DIR carry bulk data in shared memory.
 *  - listen=HOST:PORT accepts TCP links; peer=HOST:PORT keeps one TCP
 *    link to a remote fabric, reconnecting every second while it is down
 *    (so a restarted peer is found again).
 *  - Members tell each other (PEERS) where they and the peers of their
 *    links accept TCP links, and link to those they have no link to: a
 *    fabric of directories on several hosts, or of many hosts, becomes a
 *    mesh from one fabric-peer each.
 * Sockets are non-blocking; connects finish in the host's event loop.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE             /* memfd_create, accept4 (QEMU sets it) */
#endif
#include <glib.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <pwd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "pvrdma_link.h"

/* Peers and directories are retried this often while a link is down. */
#define PVRDMA_NET_RETRY_NS     (1000 * 1000 * 1000LL)
/*
 * A connect without an answer this long (the peer's host drops our SYNs:
 * down, or a firewall) is given up and made again: the kernel's own SYN
 * retransmissions back off to a minute, and a peer that comes back
 * would wait for the next one.
 */
#define PVRDMA_NET_CONNECT_NS   (2 * 1000 * 1000 * 1000LL)
/*
 * Members we were told of are tried this many times (a second apart), at
 * link-down too, then forgotten until told again; at most this many at
 * once (a peer's PEERS cannot make us hold unbounded sockets).
 */
#define PVRDMA_NET_TOLD_TRIES   3
#define PVRDMA_NET_MAX_TOLD     64

typedef enum {
    PVRDMA_EP_LISTEN_DIR,       /* accepts shm links */
    PVRDMA_EP_LISTEN_TCP,
    PVRDMA_EP_PEER,             /* a TCP address kept connected */
} PvrdmaEpType;

typedef struct PvrdmaFabricEndpoint {
    uint32_t kind;              /* PVRDMA_FABRIC_FD_ENDPOINT */
    PvrdmaEpType type;
    int fd;                     /* listening, or connecting; -1 */
    char *name;                 /* what the user wrote */
    char *path;                 /* LISTEN_DIR: our socket */
    struct sockaddr_storage addr;
    socklen_t addrlen;
    uint64_t link;              /* PEER: serial of its link, 0 if down */
    int64_t next_try;           /* PEER: next connect; LISTEN_DIR: rescan */
    int64_t connect_at;         /* PEER: when the connect in progress began */
    int64_t paused_until;       /* LISTEN_*: not watched until then (0) */
    uint64_t dup_of;            /* PEER: the peer is joined by another link */
    char *last_error;           /* PEER: reported once per change */
    uint64_t told;              /* PEER: a member we were told of, or 0 */
    unsigned tries;             /* told: connects left */
    bool drop;                  /* told: forget it at the next tick */
} PvrdmaFabricEndpoint;

static PvrdmaFabricEndpoint *pvrdma_ep_new(PvrdmaFabric *fab, PvrdmaEpType t,
                                           const char *name)
{
    PvrdmaFabricEndpoint *ep = g_new0(PvrdmaFabricEndpoint, 1);

    ep->kind = PVRDMA_FABRIC_FD_ENDPOINT;
    ep->type = t;
    ep->fd = -1;
    ep->name = g_strdup(name);
    fab->endpoints = g_list_append(fab->endpoints, ep);
    return ep;
}

static void pvrdma_ep_close_fd(PvrdmaFabric *fab, PvrdmaFabricEndpoint *ep)
{
    if (ep->fd >= 0) {
        fab->host.unwatch(fab->host.opaque, ep->fd);
        close(ep->fd);
        ep->fd = -1;
    }
}

static void pvrdma_ep_free(PvrdmaFabric *fab, PvrdmaFabricEndpoint *ep)
{
    pvrdma_ep_close_fd(fab, ep);
    if (ep->path) {
        unlink(ep->path);
    }
    fab->endpoints = g_list_remove(fab->endpoints, ep);
    g_free(ep->path);
    g_free(ep->name);
    g_free(ep->last_error);
    g_free(ep);
}

void pvrdma_fabric_net_free(PvrdmaFabric *fab)
{
    while (fab->endpoints) {
        pvrdma_ep_free(fab, fab->endpoints->data);
    }
}

static const char *const pvrdma_say_what[PVRDMA_SAY__MAX] = {
    [PVRDMA_SAY_LINK_UP] = "links up",
    [PVRDMA_SAY_LINK_DOWN] = "links down",
    [PVRDMA_SAY_UNREACHABLE] = "unreachable peers",
    [PVRDMA_SAY_HOST] = "host resources",
    [PVRDMA_SAY_REFUSED] = "processes of other users",
    [PVRDMA_SAY_GID] = "GIDs held by another device",
};

void pvrdma_fabric_gid_str(const uint8_t gid[16], char out[PVRDMA_GID_STR])
{
    if (!inet_ntop(AF_INET6, gid, out, PVRDMA_GID_STR)) {
        g_strlcpy(out, "?", PVRDMA_GID_STR);
    }
}

static void pvrdma_say_raw(PvrdmaFabric *fab, const char *msg)
{
    if (fab->has_host && fab->host.report) {
        fab->host.report(fab->host.opaque, msg);
    }
}

bool pvrdma_fabric_say_flush(PvrdmaFabric *fab, int64_t now)
{
    bool open = false;

    for (unsigned c = 0; c < PVRDMA_SAY__MAX; c++) {
        if (!fab->say[c].count) {
            continue;
        }
        if (now - fab->say[c].start < PVRDMA_SAY_WINDOW_NS) {
            open = true;
            continue;
        }
        if (fab->say[c].suppressed) {
            char *msg = g_strdup_printf("pvrdma-fabric: %u more messages "
                                        "about %s in the last second were "
                                        "not shown (%" PRIu64 " in all; "
                                        "info pvrdma counts them)",
                                        fab->say[c].suppressed,
                                        pvrdma_say_what[c],
                                        fab->said_suppressed);

            pvrdma_say_raw(fab, msg);
            g_free(msg);
        }
        fab->say[c].count = 0;
        fab->say[c].suppressed = 0;
    }
    return open;
}

void pvrdma_fabric_say(PvrdmaFabric *fab, PvrdmaSay cause, const char *fmt,
                       ...)
{
    int64_t now;
    va_list ap;
    char *msg;

    if (!fab->has_host || !fab->host.report || cause >= PVRDMA_SAY__MAX) {
        return;
    }
    now = fab->host.clock_ns(fab->host.opaque);
    pvrdma_fabric_say_flush(fab, now);
    if (fab->say[cause].count >= PVRDMA_SAY_BURST) {
        fab->say[cause].suppressed++;
        fab->said_suppressed++;
        return;
    }
    if (!fab->say[cause].count++) {
        fab->say[cause].start = now;
        /* The timer shows what this window will have suppressed. */
        pvrdma_fabric_arm_tick(fab, now);
    }
    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    pvrdma_say_raw(fab, msg);
    g_free(msg);
}

const char *pvrdma_fabric_errno_hint(int err)
{
    switch (err) {
    case EMFILE:
        return "; QEMU's open files limit is reached: raise it (ulimit -n, "
               "systemd LimitNOFILE=, libvirt max_files)";
    case ENFILE:
        return "; the host's open files table is full: raise fs.file-max";
    case ENOMEM:
        return "; out of memory or of memory mappings: raise "
               "vm.max_map_count or free memory";
    case ENOSPC:
        return "; the file system is full";
    case EROFS:
    case EACCES:
    case EPERM:
        return "; QEMU may not write there: fix the permissions";
    default:
        return "";
    }
}

bool pvrdma_fabric_res_report(PvrdmaFabric *fab, int err)
{
    if (!*pvrdma_fabric_errno_hint(err)) {
        return true;
    }
    if (fab->res_err == err) {
        return false;
    }
    fab->res_err = err;
    return true;
}

/* A host resource failure of @what (@err), reported once per cause. */
static void pvrdma_res_failed(PvrdmaFabric *fab, const char *what, int err)
{
    if (pvrdma_fabric_res_report(fab, err)) {
        pvrdma_fabric_say(fab, PVRDMA_SAY_HOST,
                          "pvrdma-fabric: %s: %s%s; retrying every second",
                          what, g_strerror(err),
                          pvrdma_fabric_errno_hint(err));
    }
}

static void pvrdma_tcp_tune(int fd)
{
    int one = 1;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- path=DIR ------------------------------------------------------------ */

static bool pvrdma_unix_addr(struct sockaddr_un *sun, const char *path)
{
    memset(sun, 0, sizeof(*sun));
    sun->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(sun->sun_path)) {
        return false;
    }
    strcpy(sun->sun_path, path);
    return true;
}

/* ---- who may join through the directory --------------------------------- */

#define PVRDMA_ALLOW_MAX        64

/* One ':'-separated list of users (@group: groups) into a new array. */
static GArray *pvrdma_allow_parse(const char *list, bool group,
                                  const char *prop, char **errmsg)
{
    GArray *a = g_array_new(false, false, sizeof(uint32_t));
    char **names = g_strsplit(list, ":", -1);

    for (char **n = names; *n; n++) {
        guint64 v;
        uint32_t id;

        if (g_ascii_string_to_unsigned(*n, 10, 0, UINT32_MAX - 1, &v,
                                       NULL)) {
            id = v;
        } else if (!group && **n && getpwnam(*n)) {
            id = getpwnam(*n)->pw_uid;
        } else if (group && **n && getgrnam(*n)) {
            id = getgrnam(*n)->gr_gid;
        } else {
            *errmsg = g_strdup_printf("pvrdma: %s=%s: '%s' is not a %s of "
                                      "this host (a name or a number); "
                                      "give them separated by ':' (%s=%s)",
                                      prop, list, *n, group ? "group" :
                                      "user", prop, group ? "kvm:1000" :
                                      "libvirt-qemu:1000");
            break;
        }
        if (a->len == PVRDMA_ALLOW_MAX) {
            *errmsg = g_strdup_printf("pvrdma: %s=%s: at most %u entries",
                                      prop, list, PVRDMA_ALLOW_MAX);
            break;
        }
        g_array_append_val(a, id);
    }
    g_strfreev(names);
    if (*errmsg) {
        g_array_free(a, true);
        return NULL;
    }
    return a;
}

bool pvrdma_fabric_allow(PvrdmaFabric *fab, const char *uids,
                         const char *gids, char **errmsg)
{
    GArray *u = NULL, *g = NULL;

    *errmsg = NULL;
    if (uids && *uids) {
        u = pvrdma_allow_parse(uids, false, "fabric-allow-uid", errmsg);
        if (!u) {
            return false;
        }
    }
    if (gids && *gids) {
        g = pvrdma_allow_parse(gids, true, "fabric-allow-gid", errmsg);
        if (!g) {
            if (u) {
                g_array_free(u, true);
            }
            return false;
        }
    }
    if (fab->allow_uid) {
        g_array_free(fab->allow_uid, true);
    }
    if (fab->allow_gid) {
        g_array_free(fab->allow_gid, true);
    }
    fab->allow_uid = u;
    fab->allow_gid = g;
    return true;
}

static bool pvrdma_allow_has(const GArray *a, uint32_t id)
{
    for (guint i = 0; a && i < a->len; i++) {
        if (g_array_index(a, uint32_t, i) == id) {
            return true;
        }
    }
    return false;
}

/*
 * May the process at the other end of directory socket @fd join?  Its
 * uid is ours or allowed, or one of its groups is.  When not, it is
 * counted, said (the first time for that uid) with what to set (@path:
 * the socket, @accepted: it connected to us), and false.
 */
static bool pvrdma_dir_cred_ok(PvrdmaFabric *fab, int fd, const char *path,
                               bool accepted)
{
    struct ucred uc;
    socklen_t len = sizeof(uc);
    gid_t groups[256];
    socklen_t glen = sizeof(groups);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0) {
        uc.pid = 0;
        uc.uid = uc.gid = (uint32_t)-1;
    } else if (uc.uid == fab->own_uid ||
               pvrdma_allow_has(fab->allow_uid, uc.uid) ||
               pvrdma_allow_has(fab->allow_gid, uc.gid)) {
        return true;
    } else if (fab->allow_gid &&
               getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups,
                          &glen) == 0) {
        for (unsigned i = 0; i < glen / sizeof(gid_t); i++) {
            if (pvrdma_allow_has(fab->allow_gid, groups[i])) {
                return true;
            }
        }
    }
    fab->refused_cred++;
    /*
     * Said once per uid: a stranger's process retries every second, and
     * so does ours, rescanning the directory.
     */
    if (pvrdma_allow_has(fab->refused_said, uc.uid)) {
        return false;
    }
    if (!fab->refused_said) {
        fab->refused_said = g_array_new(false, false, sizeof(uint32_t));
    }
    if (fab->refused_said->len < PVRDMA_ALLOW_MAX) {
        uint32_t id = uc.uid;

        g_array_append_val(fab->refused_said, id);
    }
    if (accepted) {
        pvrdma_fabric_say(fab, PVRDMA_SAY_REFUSED,
                          "pvrdma-fabric: refused a link on fabric-path %s "
                          "from process %d of uid %d: only this QEMU's "
                          "user (uid %u) may join, or those given with "
                          "fabric-allow-uid= or fabric-allow-gid= on this "
                          "QEMU", path, (int)uc.pid, (int)uc.uid,
                          fab->own_uid);
    } else {
        pvrdma_fabric_say(fab, PVRDMA_SAY_REFUSED,
                          "pvrdma-fabric: not linking to %s: its process "
                          "%d runs as uid %d, not as this QEMU (uid %u); to "
                          "join it, give this QEMU fabric-allow-uid=%d or "
                          "a fabric-allow-gid= of its group", path,
                          (int)uc.pid, (int)uc.uid, fab->own_uid,
                          (int)uc.uid);
    }
    return false;
}

/*
 * Connect to one socket of the directory; a dead one is removed.  False
 * if a host resource ran out (reported): the directory is scanned again.
 */
static bool pvrdma_dir_connect(PvrdmaFabric *fab, const char *path)
{
    struct sockaddr_un sun;
    PvrdmaLink *l;
    int fd, err;

    if (!pvrdma_unix_addr(&sun, path)) {
        return true;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        err = errno;
        pvrdma_res_failed(fab, "cannot make a link of fabric-path", err);
        return false;
    }
    if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        if (errno == ECONNREFUSED) {
            unlink(path);       /* renamed only once listening: dead */
        }
        close(fd);
        return true;
    }
    if (!pvrdma_dir_cred_ok(fab, fd, path, false)) {
        close(fd);
        return true;
    }
    l = pvrdma_fabric_add_link(fab, fd, true, path);
    pvrdma_link_set_initiated(l);
    return true;
}

bool pvrdma_fabric_join_dir(PvrdmaFabric *fab, const char *dir,
                            char **errmsg)
{
    char *tmp, *path;
    struct sockaddr_un sun;
    PvrdmaFabricEndpoint *ep;
    const struct dirent *de;
    struct stat st;
    DIR *d;
    int fd, err = 0;

    if (stat(dir, &st) < 0) {
        err = errno;
    } else if (!S_ISDIR(st.st_mode)) {
        err = ENOTDIR;
    } else if (access(dir, W_OK | X_OK) < 0) {
        err = errno;
    }
    if (err) {
        const char *fix;

        if (err == EROFS) {
            fix = "mount its file system read-write, or choose a directory "
                  "on another";
        } else if (err == EACCES || err == EPERM) {
            fix = "let QEMU's user write there (chmod, chown, or the "
                  "group), or choose another directory";
        } else if (err == ENOENT) {
            fix = "create it (mkdir -p)";
        } else {
            fix = "choose a directory QEMU can write to";
        }
        *errmsg = g_strdup_printf("pvrdma: fabric-path=%s is not a writable "
                                  "directory (%s): %s, and give every QEMU "
                                  "of the fabric the same path", dir,
                                  g_strerror(err), fix);
        return false;
    }
    path = g_strdup_printf("%s/%016" G_GINT64_MODIFIER "x.sock", dir,
                           fab->instance);
    tmp = g_strdup_printf("%s/%016" G_GINT64_MODIFIER "x.tmp", dir,
                          fab->instance);
    if (!pvrdma_unix_addr(&sun, tmp)) {
        *errmsg = g_strdup_printf("pvrdma: fabric-path=%s is too long for a "
                                  "unix socket (at most %zu characters "
                                  "with the socket's name): use a shorter "
                                  "directory", dir,
                                  sizeof(sun.sun_path) - 23);
        g_free(path);
        g_free(tmp);
        return false;
    }
    /*
     * The socket is ours alone unless other users may join: then anyone
     * may connect, and SO_PEERCRED decides (pvrdma_dir_cred_ok).  It is
     * made under a temporary name and renamed once it has its mode and
     * listens.
     */
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
        chmod(tmp, fab->allow_uid || fab->allow_gid ? 0666 : 0600) < 0 ||
        listen(fd, 64) < 0 || rename(tmp, path) < 0) {
        err = errno;
        *errmsg = g_strdup_printf("pvrdma: fabric-path: cannot listen on "
                                  "%s: %s%s", path, g_strerror(err),
                                  pvrdma_fabric_errno_hint(err));
        if (fd >= 0) {
            close(fd);
        }
        unlink(tmp);
        g_free(path);
        g_free(tmp);
        return false;
    }
    g_free(tmp);
    ep = pvrdma_ep_new(fab, PVRDMA_EP_LISTEN_DIR, dir);
    ep->fd = fd;
    ep->path = path;
    fab->host.watch(fab->host.opaque, fd, false, ep);

    d = opendir(dir);
    while (d && (de = readdir(d))) {
        char *other;

        if (!g_str_has_suffix(de->d_name, ".sock")) {
            continue;
        }
        other = g_strdup_printf("%s/%s", dir, de->d_name);
        if (strcmp(other, path) != 0 && !pvrdma_dir_connect(fab, other)) {
            ep->next_try = fab->host.clock_ns(fab->host.opaque) +
                           PVRDMA_NET_RETRY_NS;
        }
        g_free(other);
    }
    if (d) {
        closedir(d);
    }
    if (ep->next_try) {
        pvrdma_fabric_kick(fab);
    }
    return true;
}

/* ---- TCP ----------------------------------------------------------------- */

/* "HOST:PORT" (HOST may be [v6]) into @ep's address. */
static bool pvrdma_tcp_resolve(PvrdmaFabricEndpoint *ep, const char *addr,
                               bool passive, char **errmsg)
{
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC,
        .ai_socktype = SOCK_STREAM,
        .ai_flags = passive ? AI_PASSIVE : 0,
    };
    struct addrinfo *res = NULL;
    const char *colon = strrchr(addr, ':');
    char *host;
    int ret;

    if (!colon || !colon[1]) {
        *errmsg = g_strdup_printf("pvrdma: fabric address '%s' is not "
                                  "HOST:PORT (e.g. 192.0.2.1:7471)", addr);
        return false;
    }
    host = g_strndup(addr, colon - addr);
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host) - 2);
        host[strlen(host) - 2] = 0;
    }
    ret = getaddrinfo(*host ? host : NULL, colon + 1, &hints, &res);
    g_free(host);
    if (ret || !res) {
        *errmsg = g_strdup_printf("pvrdma: cannot resolve fabric address "
                                  "'%s': %s", addr, gai_strerror(ret));
        return false;
    }
    memcpy(&ep->addr, res->ai_addr, res->ai_addrlen);
    ep->addrlen = res->ai_addrlen;
    freeaddrinfo(res);
    return true;
}

bool pvrdma_fabric_listen(PvrdmaFabric *fab, const char *addr, char **errmsg)
{
    PvrdmaFabricEndpoint tmp = { 0 };
    PvrdmaFabricEndpoint *ep;
    int fd, one = 1;

    if (!pvrdma_tcp_resolve(&tmp, addr, true, errmsg)) {
        return false;
    }
    fd = socket(tmp.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC |
                SOCK_NONBLOCK, 0);
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    }
    if (fd < 0 || bind(fd, (struct sockaddr *)&tmp.addr, tmp.addrlen) < 0 ||
        listen(fd, 16) < 0) {
        int err = errno;

        *errmsg = g_strdup_printf("pvrdma: cannot listen on "
                                  "fabric-listen=%s: %s%s", addr,
                                  g_strerror(err),
                                  *pvrdma_fabric_errno_hint(err) ?
                                  pvrdma_fabric_errno_hint(err) :
                                  " (is the address local, and the port "
                                  "free?)");
        if (fd >= 0) {
            close(fd);
        }
        return false;
    }
    ep = pvrdma_ep_new(fab, PVRDMA_EP_LISTEN_TCP, addr);
    ep->fd = fd;
    fab->host.watch(fab->host.opaque, fd, false, ep);
    return true;
}

/* A connect to a peer failed with @err: tell the user when it changes. */
static void pvrdma_peer_failed(PvrdmaFabric *fab, PvrdmaFabricEndpoint *ep,
                               int err)
{
    if (ep->told) {
        if (ep->tries && --ep->tries) {
            return;
        }
        ep->drop = true;
        pvrdma_fabric_say(fab, PVRDMA_SAY_UNREACHABLE,
                          "pvrdma-fabric: fabric member %016" PRIx64 " at "
                          "%s, told of by a peer, unreachable (%s%s); not "
                          "tried again until told again", ep->told,
                          ep->name, g_strerror(err),
                          pvrdma_fabric_errno_hint(err));
        return;
    }
    if (ep->last_error && !strcmp(ep->last_error, g_strerror(err))) {
        return;
    }
    g_free(ep->last_error);
    ep->last_error = g_strdup(g_strerror(err));
    pvrdma_fabric_say(fab, PVRDMA_SAY_UNREACHABLE,
                      "pvrdma-fabric: fabric-peer=%s unreachable (%s%s); "
                      "retrying every second", ep->name, ep->last_error,
                      pvrdma_fabric_errno_hint(err));
}

/* Start a non-blocking connect of a peer endpoint. */
static void pvrdma_peer_try(PvrdmaFabric *fab, PvrdmaFabricEndpoint *ep,
                            int64_t now)
{
    int fd = socket(ep->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC |
                    SOCK_NONBLOCK, 0);

    ep->next_try = now + PVRDMA_NET_RETRY_NS;
    if (fd < 0) {
        pvrdma_peer_failed(fab, ep, errno);
        return;
    }
    if (connect(fd, (struct sockaddr *)&ep->addr, ep->addrlen) < 0 &&
        errno != EINPROGRESS) {
        int err = errno;

        close(fd);
        pvrdma_peer_failed(fab, ep, err);
        return;
    }
    ep->fd = fd;
    ep->connect_at = now;
    fab->host.watch(fab->host.opaque, fd, true, ep);
}

bool pvrdma_fabric_add_peer(PvrdmaFabric *fab, const char *addr,
                            char **errmsg)
{
    PvrdmaFabricEndpoint tmp = { 0 };
    PvrdmaFabricEndpoint *ep;

    if (!pvrdma_tcp_resolve(&tmp, addr, false, errmsg)) {
        return false;
    }
    ep = pvrdma_ep_new(fab, PVRDMA_EP_PEER, addr);
    memcpy(&ep->addr, &tmp.addr, tmp.addrlen);
    ep->addrlen = tmp.addrlen;
    pvrdma_peer_try(fab, ep, fab->host.clock_ns(fab->host.opaque));
    pvrdma_fabric_kick(fab);
    return true;
}

/* ---- events -------------------------------------------------------------- */

/*
 * Room for one more accepted link waiting for its HELLO: with
 * PVRDMA_FABRIC_MAX_HALF_OPEN of them, the oldest is closed.
 */
static void pvrdma_half_open_room(PvrdmaFabric *fab)
{
    PvrdmaLink *oldest = NULL;
    unsigned n = 0;
    GList *e;

    for (e = fab->links; e; e = e->next) {
        PvrdmaLink *l = e->data;

        if (pvrdma_link_is_up(l) || pvrdma_link_initiated(l) ||
            pvrdma_link_is_dead(l)) {
            continue;
        }
        n++;
        if (!oldest || pvrdma_link_serial(l) < pvrdma_link_serial(oldest)) {
            oldest = l;
        }
    }
    if (n >= PVRDMA_FABRIC_MAX_HALF_OPEN) {
        fab->half_open_closed++;
        pvrdma_link_close(oldest, "closed for a newer connection before "
                          "its HELLO: " G_STRINGIFY(PVRDMA_FABRIC_MAX_HALF_OPEN)
                          " accepted links were waiting for theirs (a slow "
                          "or silent peer holds connections)");
    }
}

static void pvrdma_accept(PvrdmaFabric *fab, PvrdmaFabricEndpoint *ep)
{
    for (;;) {
        struct sockaddr_storage sa;
        socklen_t len = sizeof(sa);
        char *name;
        int fd = accept4(ep->fd, (struct sockaddr *)&sa, &len,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);

        if (fd < 0 && errno != EAGAIN && errno != EINTR &&
            errno != ECONNABORTED) {
            /*
             * Out of descriptors (or worse): the connection stays queued
             * and the socket readable; stop watching it for a second
             * rather than spin, and say what to raise.
             */
            pvrdma_res_failed(fab, ep->type == PVRDMA_EP_LISTEN_TCP ?
                              "cannot accept a link on fabric-listen" :
                              "cannot accept a link on fabric-path", errno);
            fab->host.unwatch(fab->host.opaque, ep->fd);
            ep->paused_until = fab->host.clock_ns(fab->host.opaque) +
                               PVRDMA_NET_RETRY_NS;
            pvrdma_fabric_kick(fab);
            return;
        }
        if (fd < 0) {
            if (errno == EAGAIN) {
                return;
            }
            continue;
        }
        if (ep->type == PVRDMA_EP_LISTEN_TCP) {
            char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";

            pvrdma_tcp_tune(fd);
            getnameinfo((struct sockaddr *)&sa, len, host, sizeof(host),
                        port, sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
            name = g_strdup_printf("tcp:%s:%s (accepted on %s)", host, port,
                                   ep->name);
        } else {
            if (!pvrdma_dir_cred_ok(fab, fd, ep->path, true)) {
                close(fd);
                continue;
            }
            name = g_strdup_printf("unix:%s (accepted)", ep->path);
        }
        pvrdma_half_open_room(fab);
        if (ep->type == PVRDMA_EP_LISTEN_DIR) {
            pvrdma_fabric_add_link(fab, fd, true, name);
        } else {
            pvrdma_fabric_add_tcp_link(fab, fd, name, NULL);
        }
        g_free(name);
    }
}

/*
 * The host of a peer's "HOST:PORT" (brackets of an IPv6 address off):
 * what its TLS certificate must name.
 */
static char *pvrdma_ep_host(PvrdmaFabricEndpoint *ep)
{
    const char *colon = strrchr(ep->name, ':');
    size_t len = colon ? (size_t)(colon - ep->name) : strlen(ep->name);

    if (len >= 2 && ep->name[0] == '[' && ep->name[len - 1] == ']') {
        return g_strndup(ep->name + 1, len - 2);
    }
    return g_strndup(ep->name, len);
}

static void pvrdma_peer_connected(PvrdmaFabric *fab, PvrdmaFabricEndpoint *ep)
{
    int err = 0, fd = ep->fd;
    socklen_t len = sizeof(err);
    PvrdmaLink *l;
    char *name, *host;

    fab->host.unwatch(fab->host.opaque, fd);
    ep->fd = -1;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
        close(fd);
        pvrdma_peer_failed(fab, ep, err ? err : errno);
        pvrdma_fabric_kick(fab);
        return;
    }
    g_free(ep->last_error);
    ep->last_error = NULL;
    pvrdma_tcp_tune(fd);
    name = g_strdup_printf(ep->told ? "tcp:%s (told)" : "tcp:%s", ep->name);
    host = pvrdma_ep_host(ep);
    l = pvrdma_fabric_add_tcp_link(fab, fd, name, host);
    g_free(host);
    g_free(name);
    pvrdma_link_set_initiated(l);
    ep->link = pvrdma_link_is_dead(l) ? 0 : pvrdma_link_serial(l);
    if (!ep->link) {
        pvrdma_fabric_kick(fab);
    }
}

void pvrdma_fabric_net_ready(PvrdmaFabric *fab, void *tag, bool readable,
                             bool writable)
{
    PvrdmaFabricEndpoint *ep = tag;

    if (ep->type == PVRDMA_EP_PEER) {
        if (ep->fd >= 0 && (readable || writable)) {
            pvrdma_peer_connected(fab, ep);
        }
    } else if (readable) {
        pvrdma_accept(fab, ep);
    }
}

static bool pvrdma_fabric_joined(PvrdmaFabric *fab, uint64_t instance)
{
    GList *e;

    for (e = fab->links; e; e = e->next) {
        if (pvrdma_link_is_up(e->data) &&
            pvrdma_link_peer_instance(e->data) == instance) {
            return true;
        }
    }
    return false;
}

void pvrdma_fabric_net_link_down(PvrdmaFabric *fab, PvrdmaLink *l)
{
    int64_t now = fab->host.clock_ns(fab->host.opaque);
    uint64_t peer = pvrdma_link_peer_instance(l);
    GList *e;

    for (e = fab->endpoints; e; e = e->next) {
        PvrdmaFabricEndpoint *ep = e->data;

        if (ep->type == PVRDMA_EP_PEER && ep->told &&
            ep->link == pvrdma_link_serial(l)) {
            /* A few more tries, unless another link joins it. */
            ep->link = 0;
            ep->drop = pvrdma_link_duplicate(l);
            ep->tries = PVRDMA_NET_TOLD_TRIES;
            ep->next_try = now + PVRDMA_NET_RETRY_NS;
        } else if (ep->type == PVRDMA_EP_PEER &&
                   ep->link == pvrdma_link_serial(l)) {
            /* Reconnect, unless another link already joins that peer. */
            ep->link = 0;
            ep->dup_of = pvrdma_link_duplicate(l) ? peer : 0;
            ep->next_try = now + PVRDMA_NET_RETRY_NS;
        } else if (ep->type == PVRDMA_EP_PEER && ep->dup_of == peer && peer &&
                   !pvrdma_link_duplicate(l)) {
            /* The link that joined it went down: ours is needed again. */
            ep->dup_of = 0;
            ep->next_try = now;
        } else if (ep->type == PVRDMA_EP_LISTEN_DIR && pvrdma_link_shm(l) &&
                   !pvrdma_link_duplicate(l)) {
            /* Both processes may be alive: look for the peer again. */
            ep->next_try = now + PVRDMA_NET_RETRY_NS;
        }
    }
}

/* Connect to every socket of the directory not joined by a link. */
static void pvrdma_dir_rescan(PvrdmaFabric *fab, PvrdmaFabricEndpoint *ep)
{
    const struct dirent *de;
    DIR *d = opendir(ep->name);

    while (d && (de = readdir(d))) {
        uint64_t instance;
        char *other;

        if (strlen(de->d_name) != 21 ||
            !g_str_has_suffix(de->d_name, ".sock") ||
            sscanf(de->d_name, "%16" SCNx64, &instance) != 1 ||
            instance == fab->instance ||
            pvrdma_fabric_joined(fab, instance)) {
            continue;
        }
        other = g_strdup_printf("%s/%s", ep->name, de->d_name);
        if (!pvrdma_dir_connect(fab, other)) {
            ep->next_try = fab->host.clock_ns(fab->host.opaque) +
                           PVRDMA_NET_RETRY_NS;
        }
        g_free(other);
    }
    if (d) {
        closedir(d);
    } else {
        pvrdma_res_failed(fab, "cannot read the fabric-path directory",
                          errno);
        ep->next_try = fab->host.clock_ns(fab->host.opaque) +
                       PVRDMA_NET_RETRY_NS;
    }
}

bool pvrdma_fabric_net_tick(PvrdmaFabric *fab, int64_t now)
{
    bool waiting = false;
    GList *e, *next;

    for (e = fab->endpoints; e; e = next) {
        PvrdmaFabricEndpoint *ep = e->data;

        next = e->next;
        if (ep->told && !ep->link &&
            (ep->drop || pvrdma_fabric_joined(fab, ep->told))) {
            pvrdma_ep_free(fab, ep);     /* joined otherwise, or gone */
            continue;
        }
        if (ep->paused_until) {
            if (now >= ep->paused_until) {
                ep->paused_until = 0;
                fab->host.watch(fab->host.opaque, ep->fd, false, ep);
            } else {
                waiting = true;
            }
        }
        if (ep->type == PVRDMA_EP_LISTEN_DIR) {
            if (ep->next_try && now >= ep->next_try) {
                ep->next_try = 0;
                pvrdma_dir_rescan(fab, ep);
            }
            waiting |= ep->next_try != 0;
            continue;
        }
        if (ep->type != PVRDMA_EP_PEER || ep->link) {
            continue;
        }
        if (ep->dup_of && pvrdma_fabric_joined(fab, ep->dup_of)) {
            continue;           /* joined by the peer's own link */
        }
        ep->dup_of = 0;
        if (ep->fd >= 0 && now - ep->connect_at >= PVRDMA_NET_CONNECT_NS) {
            fab->host.unwatch(fab->host.opaque, ep->fd);
            close(ep->fd);
            ep->fd = -1;
            pvrdma_peer_failed(fab, ep, ETIMEDOUT);
        }
        if (ep->fd < 0 && now >= ep->next_try) {
            pvrdma_peer_try(fab, ep, now);
        }
        waiting = true;
    }
    return waiting;
}

/* ---- the mesh (PEERS) ---------------------------------------------------- */

/* @sa's address (and port, if @port) as a PvrdmaNetAddr. */
static void pvrdma_net_addr_of(const struct sockaddr_storage *sa,
                               PvrdmaNetAddr *a, bool port)
{
    static const uint8_t any6[16];

    memset(a, 0, sizeof(*a));
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;

        if (sin->sin_addr.s_addr != htonl(INADDR_ANY)) {
            a->ip[10] = a->ip[11] = 0xff;
            memcpy(a->ip + 12, &sin->sin_addr, 4);
        }
        a->port = port ? ntohs(sin->sin_port) : 0;
    } else if (sa->ss_family == AF_INET6) {
        const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;

        if (memcmp(&sin6->sin6_addr, any6, 16)) {
            memcpy(a->ip, &sin6->sin6_addr, 16);
        }
        a->port = port ? ntohs(sin6->sin6_port) : 0;
    }
}

static bool pvrdma_net_addr_zero(const PvrdmaNetAddr *a)
{
    static const uint8_t zero[16];

    return !memcmp(a->ip, zero, 16);
}

/* Where we accept TCP links (our first fabric-listen); false if nowhere. */
static bool pvrdma_net_own_addr(PvrdmaFabric *fab, PvrdmaNetAddr *a)
{
    GList *e;

    for (e = fab->endpoints; e; e = e->next) {
        PvrdmaFabricEndpoint *ep = e->data;
        struct sockaddr_storage sa;
        socklen_t len = sizeof(sa);

        if (ep->type == PVRDMA_EP_LISTEN_TCP && ep->fd >= 0 &&
            getsockname(ep->fd, (struct sockaddr *)&sa, &len) == 0) {
            pvrdma_net_addr_of(&sa, a, true);
            return a->port != 0;
        }
    }
    return false;
}

static void pvrdma_net_announce_to(PvrdmaFabric *fab, PvrdmaLink *to)
{
    uint64_t instance[PVRDMA_LINK_MAX_PEERS];
    PvrdmaNetAddr addr[PVRDMA_LINK_MAX_PEERS];
    unsigned n = 0;
    GList *e;

    if (!pvrdma_link_is_up(to)) {
        return;
    }
    if (pvrdma_net_own_addr(fab, &addr[n])) {
        instance[n++] = fab->instance;
    }
    for (e = fab->links; e && n < PVRDMA_LINK_MAX_PEERS; e = e->next) {
        PvrdmaLink *o = e->data;

        if (o != to && pvrdma_link_is_up(o) &&
            pvrdma_link_peer_addr(o)->port &&
            pvrdma_link_peer_instance(o) != pvrdma_link_peer_instance(to)) {
            instance[n] = pvrdma_link_peer_instance(o);
            addr[n++] = *pvrdma_link_peer_addr(o);
        }
    }
    if (n) {
        pvrdma_link_send_peers(to, instance, addr, n);
    }
}

void pvrdma_fabric_net_announce(PvrdmaFabric *fab, PvrdmaLink *only)
{
    g_autoptr(GList) links = NULL;
    GList *e;

    if (only) {
        pvrdma_net_announce_to(fab, only);
        return;
    }
    links = g_list_copy(fab->links);
    for (e = links; e; e = e->next) {
        pvrdma_net_announce_to(fab, e->data);
    }
}

/* Has a directory of ours a socket of @instance (linked through it)? */
static bool pvrdma_net_in_dir(PvrdmaFabric *fab, uint64_t instance)
{
    GList *e;

    for (e = fab->endpoints; e; e = e->next) {
        PvrdmaFabricEndpoint *ep = e->data;
        char *path;
        bool there;

        if (ep->type != PVRDMA_EP_LISTEN_DIR) {
            continue;
        }
        path = g_strdup_printf("%s/%016" G_GINT64_MODIFIER "x.sock",
                               ep->name, instance);
        there = access(path, F_OK) == 0;
        g_free(path);
        if (there) {
            return true;
        }
    }
    return false;
}

/* Link to member @instance at @a (told by a peer) unless we have one. */
static void pvrdma_net_learn(PvrdmaFabric *fab, uint64_t instance,
                             const PvrdmaNetAddr *a)
{
    char host[INET6_ADDRSTRLEN], *name;
    PvrdmaFabricEndpoint *ep;
    unsigned told = 0;
    GList *e;

    if (instance == fab->instance || pvrdma_fabric_joined(fab, instance) ||
        pvrdma_net_in_dir(fab, instance)) {
        return;
    }
    for (e = fab->endpoints; e; e = e->next) {
        ep = e->data;
        if (ep->told == instance) {
            return;             /* being tried */
        }
        told += ep->told != 0;
    }
    if (told >= PVRDMA_NET_MAX_TOLD) {
        return;
    }
    ep = pvrdma_ep_new(fab, PVRDMA_EP_PEER, "");
    if (a->ip[10] == 0xff && a->ip[11] == 0xff &&
        !memcmp(a->ip, "\0\0\0\0\0\0\0\0\0\0", 10)) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&ep->addr;

        sin->sin_family = AF_INET;
        memcpy(&sin->sin_addr, a->ip + 12, 4);
        sin->sin_port = htons(a->port);
        ep->addrlen = sizeof(*sin);
        inet_ntop(AF_INET, a->ip + 12, host, sizeof(host));
        name = g_strdup_printf("%s:%u", host, a->port);
    } else {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ep->addr;

        sin6->sin6_family = AF_INET6;
        memcpy(&sin6->sin6_addr, a->ip, 16);
        sin6->sin6_port = htons(a->port);
        ep->addrlen = sizeof(*sin6);
        inet_ntop(AF_INET6, a->ip, host, sizeof(host));
        name = g_strdup_printf("[%s]:%u", host, a->port);
    }
    g_free(ep->name);
    ep->name = name;
    ep->told = instance;
    ep->tries = PVRDMA_NET_TOLD_TRIES;
    /*
     * Both are usually told of each other at once: the smaller instance
     * connects, the other waits a second for it before it tries itself
     * (a link both ways would be one too many, dropped at HELLO).
     */
    if (instance > fab->instance) {
        pvrdma_peer_try(fab, ep, fab->host.clock_ns(fab->host.opaque));
    } else {
        ep->next_try = fab->host.clock_ns(fab->host.opaque) +
                       PVRDMA_NET_RETRY_NS;
    }
    pvrdma_fabric_kick(fab);
}

void pvrdma_fabric_net_peers_in(PvrdmaFabric *fab, PvrdmaLink *l,
                                const uint64_t *instance,
                                const PvrdmaNetAddr *addr, unsigned n)
{
    PvrdmaNetAddr from = { { 0 }, 0 };
    bool changed = false;
    unsigned i;

    if (!pvrdma_link_shm(l)) {
        struct sockaddr_storage sa;
        socklen_t len = sizeof(sa);

        if (getpeername(pvrdma_link_fd(l), (struct sockaddr *)&sa,
                        &len) < 0) {
            return;
        }
        pvrdma_net_addr_of(&sa, &from, false);
    } else {
        from.ip[10] = from.ip[11] = 0xff;   /* this host: 127.0.0.1 */
        from.ip[12] = 127;
        from.ip[15] = 1;
    }
    for (i = 0; i < n; i++) {
        PvrdmaNetAddr a = addr[i];

        if (instance[i] == pvrdma_link_peer_instance(l)) {
            /*
             * The peer itself.  Kept as told over shm ("this host": zero
             * stays zero, for whoever we tell); over TCP a zero address
             * becomes the one the peer's frames come from.
             */
            if (pvrdma_net_addr_zero(&a) && !pvrdma_link_shm(l)) {
                memcpy(a.ip, from.ip, 16);
            }
            if (memcmp(&a, pvrdma_link_peer_addr(l), sizeof(a))) {
                pvrdma_link_set_peer_addr(l, &a);
                changed = true;
            }
            continue;
        }
        if (pvrdma_net_addr_zero(&a)) {
            memcpy(a.ip, from.ip, 16);      /* on the teller's host */
        }
        pvrdma_net_learn(fab, instance[i], &a);
    }
    if (changed) {
        g_autoptr(GList) links = g_list_copy(fab->links);
        GList *e;

        for (e = links; e; e = e->next) {
            if (e->data != l) {
                pvrdma_net_announce_to(fab, e->data);
            }
        }
    }
}
