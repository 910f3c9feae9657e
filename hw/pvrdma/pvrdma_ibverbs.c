/*
 * PVRDMA host verbs backend (docs/ibverbs.md): opening and checking the
 * host device.  Every failure names the problem and its fix, since the
 * person reading it started QEMU, possibly on a host they did not set up.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE             /* mremap() */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ      22      /* Linux 5.14 */
#endif

#include <glib.h>
#include <infiniband/verbs.h>

#include "pvrdma_core_int.h"
#include "pvrdma_ibv_int.h"

/* Host CQ entries: every host QP of a device completes into one CQ. */
#define PVRDMA_IBV_CQE          4096
/*
 * Host send queue depth, and requests of a guest QP the core lets out at
 * once (memory window binds and invalidations count among them).
 */
#define PVRDMA_IBV_SEND_WR      32

/*
 * Guest DMA MRs (kernel users: SGEs carry guest bus addresses) use host
 * MRs over windows of guest RAM, registered on first use with the guest
 * bus address as IOVA and kept until the PD goes.
 */
#define PVRDMA_IBV_DMA_WIN      (2ull << 20)
/* Host SGEs a WR may grow by when its segments cross windows. */
#define PVRDMA_IBV_SPLIT_SGES   4

typedef struct PvrdmaIbvDmaWin {
    struct ibv_mr *mr;
    void *host;
    uint64_t start;
    uint64_t len;               /* may be short at the end of RAM */
    uint64_t quota_pages;       /* charged to max_pinned_pages */
} PvrdmaIbvDmaWin;

typedef struct PvrdmaIbvPd {
    struct ibv_pd *hpd;
    GHashTable *dma;            /* window index -> GSList of windows */
} PvrdmaIbvPd;

typedef struct PvrdmaIbvMr {
    struct ibv_mr *mr;          /* fast-reg: the current registration's */
    void *alias;                /* the MR's pages, contiguous */
    size_t alias_len;
    /*
     * Fast-reg MRs: a type 2 memory window of the host device, bound on
     * each REG_MR over a host MR of that registration's pages; earlier
     * registrations wait in @old until the window has left them.
     */
    struct ibv_mw *mw;
    GSList *old;
} PvrdmaIbvMr;

/*
 * A guest SRQ on a host SRQ: receive WQEs taken from the guest ring sit
 * in slots until their host completion (any QP, any order) frees them.
 */
typedef struct PvrdmaIbvSrq {
    PvrdmaIbv *ibv;
    PvrdmaSrq *srq;
    struct ibv_srq *hsrq;
    uint32_t gen;               /* in every wr_id posted to it */
    uint32_t n;                 /* slots */
    uint64_t *wr_id;            /* per slot */
    PvrdmaIbvGrhAt *grh;        /* per slot, for UD QPs */
    uint32_t *free;             /* stack of free slots */
    uint32_t nfree;
    uint32_t max_sge;           /* the host SRQ's */
} PvrdmaIbvSrq;

/* wr_id of host work requests: QP tag, receive flag, receive slot. */
/* Send slot of memory window binds and invalidations (fast-reg MRs). */
#define PVRDMA_IBV_SLOT_MW      1
#define PVRDMA_IBV_WRID(gen, recv, slot) \
    (((uint64_t)(gen) << 32) | ((uint64_t)(recv) << 31) | (slot))

static const char *pvrdma_ibv_port_state(enum ibv_port_state s)
{
    switch (s) {
    case IBV_PORT_DOWN:
        return "DOWN";
    case IBV_PORT_INIT:
        return "INIT";
    case IBV_PORT_ARMED:
        return "ARMED";
    case IBV_PORT_ACTIVE:
        return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER:
        return "ACTIVE_DEFER";
    default:
        return "NOP";
    }
}

/* The netdev of a RoCE port (sysfs), for messages; NULL if unknown. */
static char *pvrdma_ibv_netdev(const char *dev, uint32_t port)
{
    char *path = g_strdup_printf("/sys/class/infiniband/%s/ports/%u/"
                                 "gid_attrs/ndevs/0", dev, port);
    char *name = NULL;

    if (!g_file_get_contents(path, &name, NULL, NULL)) {
        name = NULL;
    } else {
        g_strstrip(name);
    }
    g_free(path);
    return name;
}

/* The names of the host's RDMA devices, "a, b", or NULL if none. */
static char *pvrdma_ibv_names(struct ibv_device **list, int n)
{
    GString *s = g_string_new(NULL);
    int i;

    for (i = 0; i < n; i++) {
        g_string_append_printf(s, "%s%s", i ? ", " : "",
                               ibv_get_device_name(list[i]));
    }
    return g_string_free(s, n == 0);
}

static bool pvrdma_ibv_check_port(PvrdmaIbv *ibv, char **msg)
{
    char *ndev;

    if (ibv->port < 1 || ibv->port > ibv->dev_attr.phys_port_cnt) {
        *msg = g_strdup_printf("pvrdma: ibport=%u: host RDMA device %s has "
                               "ports 1 to %u", ibv->port, ibv->name,
                               ibv->dev_attr.phys_port_cnt);
        return false;
    }
    if (ibv_query_port(ibv->ctx, ibv->port, &ibv->port_attr)) {
        *msg = g_strdup_printf("pvrdma: cannot query port %u of host RDMA "
                               "device %s: %s", ibv->port, ibv->name,
                               strerror(errno));
        return false;
    }
    if (ibv->port_attr.state != IBV_PORT_ACTIVE) {
        ndev = pvrdma_ibv_netdev(ibv->name, ibv->port);
        *msg = g_strdup_printf("pvrdma: port %u of host RDMA device %s is "
                               "%s, not ACTIVE: %s%s%s", ibv->port,
                               ibv->name,
                               pvrdma_ibv_port_state(ibv->port_attr.state),
                               ndev ? "bring its network interface up (ip "
                                      "link set " : "check its cable and "
                                      "link partner (rdma link show)",
                               ndev ? ndev : "", ndev ? " up)" : "");
        g_free(ndev);
        return false;
    }
    if (ibv->port_attr.link_layer != IBV_LINK_LAYER_ETHERNET) {
        *msg = g_strdup_printf("pvrdma: port %u of host RDMA device %s is "
                               "not RoCE (Ethernet): the device offers the "
                               "guest RoCE only; use a RoCE port or "
                               "Soft-RoCE (rdma link add rxe0 type rxe "
                               "netdev NIC)", ibv->port, ibv->name);
        return false;
    }
    return true;
}

static bool pvrdma_ibv_check_gid(PvrdmaIbv *ibv, char **msg)
{
    static const union ibv_gid zero;
    union ibv_gid gid;

    if (ibv->gid_index < 0) {
        return true;
    }
    if (ibv->gid_index >= ibv->port_attr.gid_tbl_len) {
        *msg = g_strdup_printf("pvrdma: gid-index=%d: port %u of host RDMA "
                               "device %s has GID indexes 0 to %d",
                               ibv->gid_index, ibv->port, ibv->name,
                               ibv->port_attr.gid_tbl_len - 1);
        return false;
    }
    if (ibv_query_gid(ibv->ctx, ibv->port, ibv->gid_index, &gid) ||
        !memcmp(&gid, &zero, sizeof(gid))) {
        *msg = g_strdup_printf("pvrdma: gid-index=%d: port %u of host RDMA "
                               "device %s has no GID there (an address "
                               "of its netdev makes one; ibv_devinfo -v "
                               "lists them)", ibv->gid_index, ibv->port,
                               ibv->name);
        return false;
    }
    return true;
}

PvrdmaIbv *pvrdma_ibv_open(const PvrdmaIbvConfig *cfg, char **msg)
{
    struct ibv_device **list;
    struct ibv_device *dev = NULL;
    PvrdmaIbv *ibv;
    char *names;
    int i, n = 0;

    *msg = NULL;
    if (!cfg->ibdev || !cfg->ibdev[0]) {
        *msg = g_strdup("pvrdma: backend=ibverbs needs ibdev=NAME, the "
                        "host RDMA device to use (ibv_devices or rdma link "
                        "show lists them)");
        return NULL;
    }
    if (!pvrdma_ibv_cm_ports_ok(cfg->cm_ports, msg)) {
        return NULL;
    }
    list = ibv_get_device_list(&n);
    if (!list || n == 0) {
        *msg = g_strdup_printf("pvrdma: ibdev=%s: this host has no RDMA "
                               "device%s; load the driver of its RDMA NIC, "
                               "or make a Soft-RoCE device on a network "
                               "interface: rdma link add %s type rxe "
                               "netdev NIC", cfg->ibdev,
                               list ? "" : " (no RDMA in the kernel: "
                               "modprobe ib_uverbs)",
                               cfg->ibdev);
        if (list) {
            ibv_free_device_list(list);
        }
        return NULL;
    }
    for (i = 0; i < n; i++) {
        if (!strcmp(ibv_get_device_name(list[i]), cfg->ibdev)) {
            dev = list[i];
        }
    }
    if (!dev) {
        names = pvrdma_ibv_names(list, n);
        *msg = g_strdup_printf("pvrdma: ibdev=%s: no such host RDMA device; "
                               "this host has: %s", cfg->ibdev, names);
        g_free(names);
        ibv_free_device_list(list);
        return NULL;
    }
    ibv = g_new0(PvrdmaIbv, 1);
    ibv->mc_fd4 = ibv->mc_fd6 = -1;
    ibv->name = g_strdup(cfg->ibdev);
    ibv->port = cfg->ibport;
    ibv->gid_index = cfg->gid_index;
    ibv->cm_ports = g_strdup(cfg->cm_ports);
    ibv->ctx = ibv_open_device(dev);
    ibv_free_device_list(list);
    if (!ibv->ctx) {
        *msg = g_strdup_printf("pvrdma: cannot open host RDMA device %s: %s "
                               "(are /dev/infiniband/uverbs* readable and "
                               "writable by this user?)", ibv->name,
                               strerror(errno));
        goto fail;
    }
    if (ibv_query_device(ibv->ctx, &ibv->dev_attr)) {
        *msg = g_strdup_printf("pvrdma: cannot query host RDMA device %s: "
                               "%s", ibv->name, strerror(errno));
        goto fail;
    }
    if (!pvrdma_ibv_check_port(ibv, msg) || !pvrdma_ibv_check_gid(ibv, msg)) {
        goto fail;
    }
    return ibv;

fail:
    pvrdma_ibv_close(ibv);
    return NULL;
}

void pvrdma_ibv_close(PvrdmaIbv *ibv)
{
    if (!ibv) {
        return;
    }
    pvrdma_ibv_cm_free(ibv->cm);
    if (ibv->cq) {
        ibv_destroy_cq(ibv->cq);
    }
    if (ibv->chan) {
        ibv_destroy_comp_channel(ibv->chan);
    }
    if (ibv->qps) {
        g_hash_table_destroy(ibv->qps);
    }
    if (ibv->ctx) {
        ibv_close_device(ibv->ctx);
    }
    if (ibv->mc_fd4 >= 0) {
        close(ibv->mc_fd4);
    }
    if (ibv->mc_fd6 >= 0) {
        close(ibv->mc_fd6);
    }
    g_free(ibv->mc_joined);
    g_free(ibv->name);
    g_free(ibv->cm_ports);
    g_free(ibv);
}

char *pvrdma_ibv_describe(PvrdmaIbv *ibv)
{
    return g_strdup_printf("%s port %u: %s, MTU %d, %d GIDs, max %d QPs, "
                           "%d MRs", ibv->name, ibv->port,
                           pvrdma_ibv_port_state(ibv->port_attr.state),
                           128 << ibv->port_attr.active_mtu,
                           ibv->port_attr.gid_tbl_len,
                           ibv->dev_attr.max_qp, ibv->dev_attr.max_mr);
}

/* ---- the backend's ops --------------------------------------------------- */

static uint32_t pvrdma_ibv_wc_status(enum ibv_wc_status st)
{
    /* The IBA's order, shared by both enumerations up to GENERAL_ERR. */
    return st <= IBV_WC_GENERAL_ERR ? (uint32_t)st : PVRDMA_WC_GENERAL_ERR;
}

static unsigned pvrdma_ibv_access(uint32_t access)
{
    /* The four IBA access bits have the same values in both ABIs. */
    return access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
}

static struct ibv_pd *pvrdma_ibv_hpd(PvrdmaPd *pd)
{
    return ((PvrdmaIbvPd *)pd->be)->hpd;
}

static int pvrdma_ibv_pd_create(void *be, PvrdmaPd *pd)
{
    PvrdmaIbv *ibv = be;
    struct ibv_pd *hpd = ibv_alloc_pd(ibv->ctx);
    PvrdmaIbvPd *p;

    if (!hpd) {
        return -ENOMEM;
    }
    p = g_new0(PvrdmaIbvPd, 1);
    p->hpd = hpd;
    p->dma = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
                                   NULL);
    pd->be = p;
    return 0;
}

static void pvrdma_ibv_pd_destroy(void *be, PvrdmaPd *pd)
{
    PvrdmaIbv *ibv = be;
    PvrdmaIbvPd *p = pd->be;
    GHashTableIter it;
    GSList *list, *e;

    if (!p) {
        return;
    }
    g_hash_table_iter_init(&it, p->dma);
    while (g_hash_table_iter_next(&it, NULL, (void **)&list)) {
        for (e = list; e; e = e->next) {
            PvrdmaIbvDmaWin *w = e->data;

            ibv_dereg_mr(w->mr);
            pvrdma_core_dma_unmap(ibv->core, w->host, w->len, true, w->len);
            pvrdma_core_uncharge_pages(ibv->core, w->quota_pages);
            g_free(w);
        }
        g_slist_free(list);
    }
    g_hash_table_destroy(p->dma);
    ibv_dealloc_pd(p->hpd);
    g_free(p);
    pd->be = NULL;
}

/*
 * The window of @p's DMA MRs holding guest bus address @addr, or NULL if
 * it is not RAM.  A window is registered from its 2 MiB boundary, or from
 * @addr's page where RAM starts later (pieces of a window are kept in a
 * list under its index).
 */
static PvrdmaIbvDmaWin *pvrdma_ibv_dma_win(PvrdmaIbv *ibv, PvrdmaIbvPd *p,
                                           uint64_t addr)
{
    uint64_t idx = addr / PVRDMA_IBV_DMA_WIN, *key;
    uint64_t end = (idx + 1) * PVRDMA_IBV_DMA_WIN, start, len, npages;
    GSList *list = g_hash_table_lookup(p->dma, &idx), *e;
    PvrdmaIbvDmaWin *w;
    void *host;
    int i;

    for (e = list; e; e = e->next) {
        w = e->data;
        if (addr >= w->start && addr < w->start + w->len) {
            return w;
        }
    }
    for (i = 0; i < 2; i++) {
        start = i ? addr & ~(uint64_t)(PVRDMA_PAGE_SIZE - 1) :
                    idx * PVRDMA_IBV_DMA_WIN;
        len = end - start;
        host = pvrdma_core_dma_map(ibv->core, start, &len, true);
        if (host && addr < start + len) {
            break;
        }
        if (host) {
            pvrdma_core_dma_unmap(ibv->core, host, len, true, 0);
            host = NULL;
        }
    }
    if (!host) {
        return NULL;
    }
    /*
     * Each PD pins its windows again (host MRs are per PD): the pages
     * count against the device's pinned-pages quota like any MR's.
     */
    npages = (len + PVRDMA_PAGE_SIZE - 1) / PVRDMA_PAGE_SIZE;
    if (pvrdma_core_charge_pages(ibv->core, npages) < 0) {
        pvrdma_core_dma_unmap(ibv->core, host, len, true, 0);
        return NULL;
    }
    w = g_new0(PvrdmaIbvDmaWin, 1);
    w->host = host;
    w->start = start;
    w->len = len;
    w->quota_pages = npages;
    w->mr = ibv_reg_mr_iova2(p->hpd, host, len, start,
                             IBV_ACCESS_LOCAL_WRITE);
    if (!w->mr) {
        g_printerr("pvrdma: %s: registering guest RAM at 0x%" G_GINT64_MODIFIER
                   "x for a DMA MR failed: %s\n", ibv->name, start,
                   strerror(errno));
        pvrdma_core_dma_unmap(ibv->core, host, len, true, 0);
        pvrdma_core_uncharge_pages(ibv->core, w->quota_pages);
        g_free(w);
        return NULL;
    }
    if (!list) {
        key = g_new(uint64_t, 1);
        *key = idx;
        g_hash_table_insert(p->dma, key, g_slist_prepend(NULL, w));
    } else {
        /* The list head stays the hash table's value. */
        list->next = g_slist_prepend(list->next, w);
    }
    return w;
}

/*
 * Host SGEs for @sgl (at most @max): a user MR's segment by its host MR,
 * a DMA MR's by the windows it lies in (split where it crosses one).
 * The count, or -1 if a segment has no host memory or @max is too small.
 */
static int pvrdma_ibv_sges(PvrdmaIbv *ibv, const PvrdmaSgl *sgl,
                           struct ibv_sge *out, int max)
{
    int n = 0;
    uint32_t i;

    for (i = 0; i < sgl->nseg; i++) {
        const PvrdmaSeg *seg = &sgl->seg[i];
        PvrdmaIbvMr *m = seg->mr->be;
        uint64_t addr = seg->va, left = seg->len;
        PvrdmaPd *pd;

        if (m) {
            if (n == max || !m->mr) {
                return -1;
            }
            out[n].addr = seg->va;
            out[n].length = seg->len;
            out[n++].lkey = m->mr->lkey;
            continue;
        }
        if (!(seg->mr->flags & PVRDMA_MR_FLAG_DMA)) {
            return -1;
        }
        pd = pvrdma_table_lookup(&ibv->core->pd_tbl, seg->mr->pd_handle);
        do {
            PvrdmaIbvDmaWin *w = pd ? pvrdma_ibv_dma_win(ibv, pd->be, addr)
                                    : NULL;
            uint64_t piece;

            if (!w || n == max) {
                return -1;
            }
            piece = MIN(left, w->start + w->len - addr);
            out[n].addr = addr;
            out[n].length = piece;
            out[n++].lkey = w->mr->lkey;
            addr += piece;
            left -= piece;
        } while (left);
    }
    return n;
}

/* Free the registrations in @m->old that the window has left. */
static void pvrdma_ibv_frmr_reap(PvrdmaIbvMr *m)
{
    GSList *l, *next;
    PvrdmaIbvMr *o;

    for (l = m->old; l; l = next) {
        next = l->next;
        o = l->data;
        if (ibv_dereg_mr(o->mr) == 0) {
            munmap(o->alias, o->alias_len);
            g_free(o);
            m->old = g_slist_delete_link(m->old, l);
        }
    }
}

static void pvrdma_ibv_mr_free(PvrdmaIbvMr *m)
{
    if (m->mw) {
        ibv_dealloc_mw(m->mw);
    }
    if (m->mr) {
        ibv_dereg_mr(m->mr);
    }
    if (m->alias) {
        munmap(m->alias, m->alias_len);
    }
    pvrdma_ibv_frmr_reap(m);
    g_slist_free_full(m->old, g_free);     /* the host refuses: leaked */
    g_free(m);
}

/* Number of pinned pages of @mr from @i on that are contiguous in ours. */
static size_t pvrdma_ibv_run(PvrdmaMr *mr, size_t i)
{
    size_t run = 1;

    while (i + run < mr->npages && (uint8_t *)mr->pinned[i + run] ==
           (uint8_t *)mr->pinned[i] + run * PVRDMA_PAGE_SIZE) {
        run++;
    }
    return run;
}

/*
 * Map the pinned pages of @mr, in order, at one new range of our address
 * space: one mremap() per run of pages that are contiguous already.  The
 * source must be a shared mapping (a shared memory backend: the glue
 * checks it), which old_size 0 duplicates instead of moving.  Each run
 * is a mapping of its own unless it continues the previous one in the
 * backing file, so vm.max_map_count bounds them: *@runs says how many
 * the MR needs.
 */
static void *pvrdma_ibv_alias(PvrdmaMr *mr, size_t *len, size_t *runs)
{
    size_t n = mr->npages, i, run;
    uint8_t *base;
    int err = 0;

    *len = n * PVRDMA_PAGE_SIZE;
    *runs = 0;
    base = mmap(NULL, *len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
                MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        return NULL;
    }
    for (i = 0; i < n; i += run) {
        run = pvrdma_ibv_run(mr, i);
        (*runs)++;
        if (!err && mremap(mr->pinned[i], 0, run * PVRDMA_PAGE_SIZE,
                           MREMAP_MAYMOVE | MREMAP_FIXED,
                           base + i * PVRDMA_PAGE_SIZE) == MAP_FAILED) {
            err = errno;        /* go on counting runs, for the message */
        }
    }
    if (err) {
        munmap(base, *len);
        errno = err;
        return NULL;
    }
    /*
     * The alias has no page tables yet, and registration would fault it
     * in page by page (write faults).  A read population maps the pages
     * many at a time (fault-around), writable since the mapping is a
     * shared one without write notification; failing (older kernels),
     * registration does it.
     */
    madvise(base, *len, MADV_POPULATE_READ);
    return base;
}

/*
 * A fast-reg MR: a type 2 memory window whose rkey (any key byte) the
 * guest uses as its keys, so that peers reach the registrations through
 * the host device.
 */
static int pvrdma_ibv_frmr_create(PvrdmaIbv *ibv, PvrdmaPd *pd, PvrdmaMr *mr)
{
    PvrdmaIbvMr *m = g_new0(PvrdmaIbvMr, 1);

    m->mw = pd ? ibv_alloc_mw(pvrdma_ibv_hpd(pd), IBV_MW_TYPE_2) : NULL;
    if (!m->mw) {
        g_printerr("pvrdma: %s: no memory window for a fast-reg MR of the "
                   "guest (%s): kernel users such as NVMe-oF and NFS over "
                   "RDMA need them, and host devices without type 2 "
                   "memory windows cannot carry them\n", ibv->name,
                   strerror(errno));
        g_free(m);
        return -ENOMEM;
    }
    mr->lkey = mr->rkey = m->mw->rkey;
    mr->be = m;
    return 0;
}

/*
 * The pages of @mr's current registration, in order, at one new range of
 * our address space (as pvrdma_ibv_alias() does for user MRs).
 */
static void *pvrdma_ibv_frmr_alias(PvrdmaIbv *ibv, PvrdmaMr *mr, size_t *len)
{
    uint32_t n = mr->frmr_npages, i, run;
    uint8_t *base;

    *len = (size_t)n * PVRDMA_PAGE_SIZE;
    base = mmap(NULL, *len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
                MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) {
        return NULL;
    }
    for (i = 0; i < n; i += run) {
        uint64_t want, got;
        void *host;
        bool ok;

        run = 1;
        while (i + run < n && mr->frmr_pages[i + run] ==
               mr->frmr_pages[i] + (uint64_t)run * PVRDMA_PAGE_SIZE) {
            run++;
        }
        want = got = (uint64_t)run * PVRDMA_PAGE_SIZE;
        host = pvrdma_core_dma_map(ibv->core, mr->frmr_pages[i], &got, true);
        ok = host && got == want &&
             mremap(host, 0, want, MREMAP_MAYMOVE | MREMAP_FIXED,
                    base + (size_t)i * PVRDMA_PAGE_SIZE) != MAP_FAILED;
        if (host) {
            pvrdma_core_dma_unmap(ibv->core, host, got, true, 0);
        }
        if (!ok) {
            munmap(base, *len);
            return NULL;
        }
    }
    madvise(base, *len, MADV_POPULATE_READ);    /* as pvrdma_ibv_alias() */
    return base;
}

/* REG_MR: a host MR of the new page list, the window bound over it. */
static uint32_t pvrdma_ibv_frmr_bind(PvrdmaIbv *ibv, PvrdmaIbvQp *q,
                                     PvrdmaMr *mr, struct ibv_send_wr *wr)
{
    PvrdmaPd *pd = pvrdma_table_lookup(&ibv->core->pd_tbl, mr->pd_handle);
    PvrdmaIbvMr *m = mr->be;

    if (m->mr) {
        PvrdmaIbvMr *o = g_new0(PvrdmaIbvMr, 1);

        o->mr = m->mr;
        o->alias = m->alias;
        o->alias_len = m->alias_len;
        m->old = g_slist_prepend(m->old, o);
        m->mr = NULL;
        m->alias = NULL;
    }
    pvrdma_ibv_frmr_reap(m);
    m->alias = pvrdma_ibv_frmr_alias(ibv, mr, &m->alias_len);
    if (!m->alias || !pd) {
        g_printerr("pvrdma: %s: cannot map the pages of fast-reg MR %u: "
                   "%s\n", ibv->name, mr->handle, strerror(errno));
        return PVRDMA_WC_LOC_PROT_ERR;
    }
    m->mr = ibv_reg_mr_iova2(pvrdma_ibv_hpd(pd), (uint8_t *)m->alias +
                             (mr->frmr_iova & (PVRDMA_PAGE_SIZE - 1)),
                             mr->frmr_length, mr->frmr_iova,
                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    if (!m->mr) {
        g_printerr("pvrdma: %s: registering fast-reg MR %u (%" G_GUINT64_FORMAT
                   " bytes) failed: %s\n", ibv->name, mr->handle,
                   (uint64_t)mr->frmr_length, strerror(errno));
        munmap(m->alias, m->alias_len);
        m->alias = NULL;
        return PVRDMA_WC_LOC_PROT_ERR;
    }
    wr->opcode = IBV_WR_BIND_MW;
    wr->bind_mw.mw = m->mw;
    wr->bind_mw.rkey = mr->rkey;
    wr->bind_mw.bind_info.mr = m->mr;
    wr->bind_mw.bind_info.addr = mr->frmr_iova;
    wr->bind_mw.bind_info.length = mr->frmr_length;
    wr->bind_mw.bind_info.mw_access_flags =
        pvrdma_ibv_access(mr->access) & (IBV_ACCESS_REMOTE_WRITE |
                                         IBV_ACCESS_REMOTE_READ |
                                         IBV_ACCESS_REMOTE_ATOMIC);
    (void)q;
    return PVRDMA_WC_SUCCESS;
}

/*
 * REG_MR and LOCAL_INV of a fast-reg MR, on the host QP in the guest
 * QP's order: bind the window over the new registration, or invalidate
 * it.  The guest's WQE completes when the host's does; what follows it
 * on that QP runs after it on the host.
 */
static uint32_t pvrdma_ibv_mr_fastreg(void *be, PvrdmaQp *qp, PvrdmaMr *mr,
                                      bool valid)
{
    PvrdmaIbv *ibv = be;
    PvrdmaIbvQp *q = qp->be;
    PvrdmaIbvMr *m = mr->be;
    struct ibv_send_wr wr, *bad;
    uint32_t st;

    if (!q || !q->hqp || !m || !m->mw) {
        return PVRDMA_WC_LOC_QP_OP_ERR;
    }
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = PVRDMA_IBV_WRID(q->gen, 0, PVRDMA_IBV_SLOT_MW);
    wr.send_flags = IBV_SEND_SIGNALED;
    if (valid) {
        st = pvrdma_ibv_frmr_bind(ibv, q, mr, &wr);
        if (st != PVRDMA_WC_SUCCESS) {
            return st;
        }
    } else {
        wr.opcode = IBV_WR_LOCAL_INV;
        wr.invalidate_rkey = mr->rkey;
    }
    if (ibv_post_send(q->hqp, &wr, &bad)) {
        g_printerr("pvrdma: %s refused to %s a memory window for QP 0x%x: "
                   "%s\n", ibv->name, valid ? "bind" : "invalidate",
                   qp->qpn, strerror(errno));
        return PVRDMA_WC_LOC_QP_OP_ERR;
    }
    if (valid) {
        /*
         * A bind by work request leaves the window's rkey to us: the next
         * bind names the window by the key it has then.
         */
        m->mw->rkey = mr->rkey;
    }
    /* The guest's WQE completes with the host's bind or invalidation. */
    q->sends_out++;
    return PVRDMA_WC_PENDING;
}

/*
 * Guest memory windows are host windows of the same type: the guest's
 * rkey is the host's, and peers reach the memory through the host
 * device, which checks their accesses.
 */
static bool pvrdma_ibv_mw_offered(void *be)
{
    PvrdmaIbv *ibv = be;
    unsigned need = IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;

    return (ibv->dev_attr.device_cap_flags & need) == need;
}

static int pvrdma_ibv_mw_create(PvrdmaIbv *ibv, PvrdmaPd *pd, PvrdmaMr *mr)
{
    PvrdmaIbvMr *m = g_new0(PvrdmaIbvMr, 1);

    m->mw = pd ? ibv_alloc_mw(pvrdma_ibv_hpd(pd),
                              mr->flags == PVRDMA_MR_FLAG_MW_TYPE2 ?
                              IBV_MW_TYPE_2 : IBV_MW_TYPE_1) : NULL;
    if (!m->mw) {
        g_printerr("pvrdma: %s: no memory window for the guest: %s\n",
                   ibv->name, strerror(errno));
        g_free(m);
        return -ENOMEM;
    }
    mr->lkey = mr->rkey = m->mw->rkey;
    mr->be = m;
    return 0;
}

/*
 * BIND_MW and LOCAL_INV of a guest window, on the host QP in the guest
 * QP's order (completing to the guest with the host's, as fast-reg MRs
 * do).  A
 * type 1 window is bound with ibv_bind_mw, whose next key (the low byte
 * plus one) the guest's provider chose as well; a type 2 window takes
 * the guest's key.
 */
static uint32_t pvrdma_ibv_mw_bind(void *be, PvrdmaQp *qp, PvrdmaMr *mw,
                                   const PvrdmaMwBind *b)
{
    PvrdmaIbv *ibv = be;
    PvrdmaIbvQp *q = qp->be;
    PvrdmaIbvMr *m = mw->be, *t = b && b->mr ? b->mr->be : NULL;
    struct ibv_send_wr wr, *bad;
    struct ibv_mw_bind mb;
    int err;

    if (!q || !q->hqp || !m || !m->mw) {
        return PVRDMA_WC_LOC_QP_OP_ERR;
    }
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = PVRDMA_IBV_WRID(q->gen, 0, PVRDMA_IBV_SLOT_MW);
    wr.send_flags = IBV_SEND_SIGNALED;
    if (!b) {
        wr.opcode = IBV_WR_LOCAL_INV;
        wr.invalidate_rkey = mw->rkey;
        err = ibv_post_send(q->hqp, &wr, &bad) ? errno : 0;
    } else if (!t || !t->mr) {
        /* A type 1 unbind of a window that is not bound, or a DMA MR. */
        g_printerr("pvrdma: %s: QP 0x%x: a bind of window 0x%x without a "
                   "host MR is not carried\n", ibv->name, qp->qpn,
                   mw->rkey);
        return PVRDMA_WC_MW_BIND_ERR;
    } else {
        memset(&mb, 0, sizeof(mb));
        mb.bind_info.mr = t->mr;
        mb.bind_info.addr = b->addr;
        mb.bind_info.length = b->len;
        mb.bind_info.mw_access_flags = b->access;  /* IB values */
        if (mw->flags == PVRDMA_MR_FLAG_MW_TYPE1) {
            if (ibv_inc_rkey(m->mw->rkey) != b->rkey) {
                g_printerr("pvrdma: %s: QP 0x%x: window key 0x%x asked, "
                           "the host's next is 0x%x\n", ibv->name, qp->qpn,
                           b->rkey, ibv_inc_rkey(m->mw->rkey));
                return PVRDMA_WC_MW_BIND_ERR;
            }
            mb.wr_id = wr.wr_id;
            mb.send_flags = wr.send_flags;
            err = ibv_bind_mw(q->hqp, m->mw, &mb);
        } else {
            wr.opcode = IBV_WR_BIND_MW;
            wr.bind_mw.mw = m->mw;
            wr.bind_mw.rkey = b->rkey;
            wr.bind_mw.bind_info = mb.bind_info;
            err = ibv_post_send(q->hqp, &wr, &bad) ? errno : 0;
            if (!err) {
                /* As for fast-reg MRs: the next bind names this key. */
                m->mw->rkey = b->rkey;
            }
        }
    }
    if (err) {
        g_printerr("pvrdma: %s refused to %s memory window 0x%x for QP "
                   "0x%x: %s\n", ibv->name, b ? "bind" : "invalidate",
                   mw->rkey, qp->qpn, strerror(err));
        return b ? PVRDMA_WC_MW_BIND_ERR : PVRDMA_WC_LOC_QP_OP_ERR;
    }
    q->sends_out++;
    return PVRDMA_WC_PENDING;
}

static int pvrdma_ibv_mr_register(void *be, PvrdmaMr *mr)
{
    PvrdmaIbv *ibv = be;
    PvrdmaPd *pd = pvrdma_table_lookup(&ibv->core->pd_tbl, mr->pd_handle);
    PvrdmaIbvMr *m;
    size_t runs = 0;
    void *base;
    int ret;

    if (mr->flags == PVRDMA_MR_FLAG_FRMR) {
        return pvrdma_ibv_frmr_create(ibv, pd, mr);
    }
    if (pvrdma_mr_is_mw(mr)) {
        return pvrdma_ibv_mw_create(ibv, pd, mr);
    }
    if (mr->flags != 0) {
        /* DMA MRs: host MRs over windows of guest RAM, made on use. */
        return 0;
    }
    ret = pvrdma_core_mr_pin(ibv->core, mr);
    if (ret < 0) {
        return ret;
    }
    m = g_new0(PvrdmaIbvMr, 1);
    if (pvrdma_ibv_run(mr, 0) == mr->npages) {
        /*
         * One piece of our mapping of guest RAM already: register it in
         * place (no alias to fault in page by page).
         */
        base = mr->pinned[0];
    } else {
        base = m->alias = pvrdma_ibv_alias(mr, &m->alias_len, &runs);
    }
    if (!base) {
        if (errno == ENOMEM) {
            /* Each run of pages is a mapping: vm.max_map_count caps them. */
            g_printerr("pvrdma: %s: cannot map the %u pages of MR %u "
                       "contiguously: it takes %zu mappings and the host "
                       "allows fewer (raise the limit: sysctl -w "
                       "vm.max_map_count=%zu)\n", ibv->name, mr->npages,
                       mr->handle, runs, MAX(runs * 2, (size_t)262144));
            ret = -ENOMEM;
        } else {
            g_printerr("pvrdma: %s: cannot map guest pages of MR %u "
                       "contiguously: %s (is guest RAM a shared memory "
                       "backend?)\n", ibv->name, mr->handle,
                       strerror(errno));
            ret = -EFAULT;
        }
        goto fail;
    }
    /* Windows are bound to it on the host (MW_BIND has its IB value). */
    m->mr = ibv_reg_mr_iova2(pvrdma_ibv_hpd(pd), (uint8_t *)base +
                             (mr->start & (PVRDMA_PAGE_SIZE - 1)),
                             mr->length, mr->start,
                             pvrdma_ibv_access(mr->access) |
                             (mr->access & IBV_ACCESS_MW_BIND));
    if (!m->mr) {
        ret = -errno;
        if (ret == -EPERM || ret == -ENOMEM) {
            /* Most often RLIMIT_MEMLOCK: registered pages are locked. */
            g_printerr("pvrdma: %s: registering %" G_GUINT64_FORMAT
                       " bytes of guest memory failed: %s (the host "
                       "device's resources or QEMU's locked-memory limit "
                       "are exhausted: raise it with ulimit -l or "
                       "LimitMEMLOCK=, or give QEMU CAP_IPC_LOCK)\n",
                       ibv->name, mr->length, strerror(-ret));
            ret = -ENOMEM;
        } else {
            g_printerr("pvrdma: %s: registering %" G_GUINT64_FORMAT
                       " bytes of guest memory failed: %s\n", ibv->name,
                       mr->length, strerror(-ret));
            ret = -EFAULT;
        }
        goto fail;
    }
    /* Peers reach the MR through the host device: its rkey is the MR's. */
    mr->rkey = m->mr->rkey;
    mr->be = m;
    return 0;

fail:
    pvrdma_ibv_mr_free(m);
    pvrdma_core_mr_unpin(ibv->core, mr);
    return ret;
}

static void pvrdma_ibv_mr_deregister(void *be G_GNUC_UNUSED, PvrdmaMr *mr)
{
    if (mr->be) {
        pvrdma_ibv_mr_free(mr->be);
        mr->be = NULL;
    }
}

static int pvrdma_ibv_qp_create(void *be, PvrdmaQp *qp)
{
    PvrdmaIbv *ibv = be;
    PvrdmaPd *pd = pvrdma_table_lookup(&ibv->core->pd_tbl, qp->pd_handle);
    struct ibv_qp_init_attr init = {
        .send_cq = ibv->cq,
        .recv_cq = ibv->cq,
        .cap = {
            .max_send_wr = PVRDMA_IBV_SEND_WR,
            .max_recv_wr = MAX(qp->attr.cap.max_recv_wr, 1),
            .max_send_sge = MIN(MAX(qp->attr.cap.max_send_sge, 1) +
                                PVRDMA_IBV_SPLIT_SGES,
                                (uint32_t)ibv->dev_attr.max_sge),
            .max_recv_sge = MIN(MAX(qp->attr.cap.max_recv_sge, 1) +
                                PVRDMA_IBV_SPLIT_SGES,
                                (uint32_t)ibv->dev_attr.max_sge),
        },
        .qp_type = IBV_QPT_RC,
    };
    PvrdmaIbvQp *q;

    if (qp->type == PVRDMA_QPT_GSI) {
        /* No host QP: its CM MADs go through the host's RDMA CM. */
        q = g_new0(PvrdmaIbvQp, 1);
        q->ibv = ibv;
        q->qp = qp;
        q->cm_rq_psn = -1;
        qp->be = q;
        ibv->gsi = q;
        return 0;
    }
    if (qp->type != PVRDMA_QPT_RC && qp->type != PVRDMA_QPT_UC &&
        qp->type != PVRDMA_QPT_UD) {
        return -EOPNOTSUPP;
    }
    if (qp->has_srq) {
        PvrdmaSrq *srq = pvrdma_qp_srq(ibv->core, qp);

        if (!srq || !srq->be) {
            return -EINVAL;
        }
        init.srq = ((PvrdmaIbvSrq *)srq->be)->hsrq;
    }
    if (qp->type == PVRDMA_QPT_UD) {
        init.qp_type = IBV_QPT_UD;
    } else if (qp->type == PVRDMA_QPT_UC) {
        init.qp_type = IBV_QPT_UC;
    }
    if (pvrdma_core_driver_version(ibv->core) < 20) {
        /* Older drivers use the handle as the QP number. */
        return -EOPNOTSUPP;
    }
    q = g_new0(PvrdmaIbvQp, 1);
    q->ibv = ibv;
    q->qp = qp;
    q->cm_rq_psn = -1;
    q->hqp = ibv_create_qp(pvrdma_ibv_hpd(pd), &init);
    if (!q->hqp) {
        g_printerr("pvrdma: %s refused a QP (%u send, %u receive WQEs, "
                   "%u/%u SGEs): %s\n", ibv->name, init.cap.max_send_wr,
                   init.cap.max_recv_wr, init.cap.max_send_sge,
                   init.cap.max_recv_sge, strerror(errno));
        g_free(q);
        return -ENOMEM;
    }
    q->gen = ++ibv->next_gen;
    qp->max_outstanding = MIN(init.cap.max_send_wr, PVRDMA_IBV_SEND_WR);
    q->max_send_sge = init.cap.max_send_sge;
    q->max_recv_sge = init.cap.max_recv_sge;
    q->recv_n = init.cap.max_recv_wr;
    q->recv_wr_id = g_new0(uint64_t, q->recv_n);
    if (qp->type == PVRDMA_QPT_UD) {
        q->recv_grh = g_new0(PvrdmaIbvGrhAt, q->recv_n);
    }
    qp->qpn = q->hqp->qp_num;
    qp->be = q;
    g_hash_table_insert(ibv->qps, GUINT_TO_POINTER(q->hqp->qp_num), q);
    return 0;
}

/*
 * The host GID index for the guest's @gid, or -1: the host's RoCE v2
 * entry of the same GID (the guest's port is RoCE v2).  Not @quiet: say
 * what to do when there is none.
 */
int pvrdma_ibv_host_gid(PvrdmaIbv *ibv, const uint8_t *gid, bool quiet)
{
    struct ibv_gid_entry e;
    int i;

    if (ibv->gid_index >= 0) {
        return ibv->gid_index;
    }
    for (i = 0; i < ibv->port_attr.gid_tbl_len; i++) {
        if (ibv_query_gid_ex(ibv->ctx, ibv->port, i, &e, 0) == 0 &&
            e.gid_type == IBV_GID_TYPE_ROCE_V2 &&
            !memcmp(e.gid.raw, gid, 16)) {
            return i;
        }
    }
    if (quiet) {
        return -1;
    }
    g_printerr("pvrdma: %s: the guest's GID "
               "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:"
               "%02x%02x:%02x%02x is not a GID of port %u: give the "
               "guest's address to the host interface of %s too (ip addr "
               "add ADDRESS dev NIC), or name one host GID with "
               "gid-index=N\n", ibv->name, gid[0], gid[1], gid[2], gid[3],
               gid[4], gid[5], gid[6], gid[7], gid[8], gid[9], gid[10],
               gid[11], gid[12], gid[13], gid[14], gid[15], ibv->port,
               ibv->name);
    return -1;
}

static int pvrdma_ibv_sgid(PvrdmaIbv *ibv, uint32_t sgid_index)
{
    const uint8_t *gid;
    uint8_t type;

    if (ibv->gid_index >= 0) {
        return ibv->gid_index;
    }
    gid = pvrdma_core_sgid(ibv->core, sgid_index, &type);
    if (!gid) {
        g_printerr("pvrdma: %s: the guest named source GID index %u, "
                   "which it never set\n", ibv->name, sgid_index);
        return -1;
    }
    return pvrdma_ibv_host_gid(ibv, gid, false);
}

/*
 * Take the guest's posted receive WQEs onto the host: the QP's receive
 * queue, or the host SRQ of the guest SRQ it uses (while it has slots).
 */
static void pvrdma_ibv_take_recvs(PvrdmaIbvQp *q)
{
    PvrdmaCore *core = q->ibv->core;
    PvrdmaSrq *srq = pvrdma_qp_srq(core, q->qp);
    PvrdmaIbvSrq *s = srq ? srq->be : NULL;
    struct ibv_sge sge[PVRDMA_MAX_SGE + PVRDMA_IBV_SPLIT_SGES];
    struct ibv_recv_wr wr, *bad;
    PvrdmaIbvGrhAt *at;
    struct pvrdma_cqe cqe;
    PvrdmaRecvWr rwr;
    uint32_t slot;
    int ret, nsge;

    while (q->hqp && (s ? s->nfree > 0 : q->recv_count < q->recv_n) &&
           pvrdma_core_recv_take(core, q->qp, &rwr) == 1) {
        if (rwr.status != PVRDMA_WC_SUCCESS) {
            /* A local error of the WQE itself: it fails the QP. */
            pvrdma_core_cqe_init(&cqe, q->qp, rwr.wr_id, PVRDMA_WC_RECV,
                                 rwr.status);
            pvrdma_core_recv_complete(core, q->qp, &cqe, false);
            pvrdma_core_qp_error(core, q->qp, -1);
            return;
        }
        nsge = pvrdma_ibv_sges(q->ibv, &rwr.sgl, sge,
                               MIN(s ? s->max_sge : q->max_recv_sge,
                                   G_N_ELEMENTS(sge)));
        if (nsge < 0) {
            pvrdma_core_cqe_init(&cqe, q->qp, rwr.wr_id, PVRDMA_WC_RECV,
                                 PVRDMA_WC_LOC_PROT_ERR);
            pvrdma_core_recv_complete(core, q->qp, &cqe, false);
            pvrdma_core_qp_error(core, q->qp, -1);
            return;
        }
        memset(&wr, 0, sizeof(wr));
        wr.sg_list = sge;
        wr.num_sge = nsge;
        if (s) {
            slot = s->free[--s->nfree];
            s->wr_id[slot] = rwr.wr_id;
            at = &s->grh[slot];
            wr.wr_id = PVRDMA_IBV_WRID(s->gen, 1, slot);
            ret = ibv_post_srq_recv(s->hsrq, &wr, &bad);
            if (ret) {
                s->free[s->nfree++] = slot;
            }
        } else {
            slot = (q->recv_head + q->recv_count) % q->recv_n;
            q->recv_wr_id[slot] = rwr.wr_id;
            at = q->recv_grh ? &q->recv_grh[slot] : NULL;
            wr.wr_id = PVRDMA_IBV_WRID(q->gen, 1, slot);
            ret = ibv_post_recv(q->hqp, &wr, &bad);
            if (!ret) {
                q->recv_count++;
            }
        }
        if (ret) {
            pvrdma_core_cqe_init(&cqe, q->qp, rwr.wr_id, PVRDMA_WC_RECV,
                                 PVRDMA_WC_LOC_QP_OP_ERR);
            pvrdma_core_recv_complete(core, q->qp, &cqe, false);
            pvrdma_core_qp_error(core, q->qp, -1);
            return;
        }
        if (at && rwr.sgl.nseg) {
            at->mr_handle = rwr.sgl.seg[0].mr->handle;
            at->va = rwr.sgl.seg[0].va;
        }
    }
}

/* Complete every taken receive WQE with WR_FLUSH_ERR, oldest first. */
static void pvrdma_ibv_flush_recvs(PvrdmaIbvQp *q)
{
    struct pvrdma_cqe cqe;

    while (q->recv_count) {
        pvrdma_core_cqe_init(&cqe, q->qp, q->recv_wr_id[q->recv_head],
                             PVRDMA_WC_RECV, PVRDMA_WC_WR_FLUSH_ERR);
        pvrdma_core_recv_complete(q->ibv->core, q->qp, &cqe, false);
        q->recv_head = (q->recv_head + 1) % q->recv_n;
        q->recv_count--;
    }
}

/* A guest transition on the host QP. */
static int pvrdma_ibv_qp_apply(PvrdmaIbvQp *q, const struct pvrdma_qp_attr *a,
                               uint32_t mask)
{
    PvrdmaIbv *ibv = q->ibv;
    PvrdmaQp *qp = q->qp;
    struct ibv_qp_attr h;
    int hmask = 0, sgid;

    memset(&h, 0, sizeof(h));
    if (mask & PVRDMA_QP_STATE) {
        h.qp_state = (enum ibv_qp_state)a->qp_state;
        hmask |= IBV_QP_STATE;
    }
    if (mask & PVRDMA_QP_ACCESS_FLAGS) {
        h.qp_access_flags = pvrdma_ibv_access(a->qp_access_flags);
        hmask |= IBV_QP_ACCESS_FLAGS;
    }
    if (mask & PVRDMA_QP_PKEY_INDEX) {
        h.pkey_index = 0;
        hmask |= IBV_QP_PKEY_INDEX;
    }
    if (mask & PVRDMA_QP_PORT) {
        h.port_num = ibv->port;
        hmask |= IBV_QP_PORT;
    }
    if (mask & PVRDMA_QP_AV) {
        sgid = pvrdma_ibv_sgid(ibv, a->ah_attr.grh.sgid_index);
        if (sgid < 0) {
            return -EINVAL;
        }
        h.ah_attr.is_global = 1;
        memcpy(h.ah_attr.grh.dgid.raw, a->ah_attr.grh.dgid, 16);
        h.ah_attr.grh.flow_label = a->ah_attr.grh.flow_label & 0xfffff;
        h.ah_attr.grh.sgid_index = sgid;
        h.ah_attr.grh.hop_limit = a->ah_attr.grh.hop_limit;
        h.ah_attr.grh.traffic_class = a->ah_attr.grh.traffic_class;
        h.ah_attr.sl = a->ah_attr.sl;
        h.ah_attr.port_num = ibv->port;
        hmask |= IBV_QP_AV;
    }
    if (mask & PVRDMA_QP_PATH_MTU) {
        h.path_mtu = MIN((enum ibv_mtu)a->path_mtu,
                         ibv->port_attr.active_mtu);
        hmask |= IBV_QP_PATH_MTU;
    }
#define PVRDMA_IBV_COPY(pmask, hm, field) \
    do { \
        if (mask & (pmask)) { \
            h.field = a->field; \
            hmask |= (hm); \
        } \
    } while (0)
    PVRDMA_IBV_COPY(PVRDMA_QP_TIMEOUT, IBV_QP_TIMEOUT, timeout);
    PVRDMA_IBV_COPY(PVRDMA_QP_RETRY_CNT, IBV_QP_RETRY_CNT, retry_cnt);
    PVRDMA_IBV_COPY(PVRDMA_QP_RNR_RETRY, IBV_QP_RNR_RETRY, rnr_retry);
    PVRDMA_IBV_COPY(PVRDMA_QP_RQ_PSN, IBV_QP_RQ_PSN, rq_psn);
    if ((mask & PVRDMA_QP_RQ_PSN) && q->cm_rq_psn >= 0) {
        /* The peer sends from what the host's CM told it (_ibv_cm.c). */
        h.rq_psn = q->cm_rq_psn;
    }
    PVRDMA_IBV_COPY(PVRDMA_QP_MAX_QP_RD_ATOMIC, IBV_QP_MAX_QP_RD_ATOMIC,
                    max_rd_atomic);
    PVRDMA_IBV_COPY(PVRDMA_QP_MIN_RNR_TIMER, IBV_QP_MIN_RNR_TIMER,
                    min_rnr_timer);
    PVRDMA_IBV_COPY(PVRDMA_QP_SQ_PSN, IBV_QP_SQ_PSN, sq_psn);
    PVRDMA_IBV_COPY(PVRDMA_QP_MAX_DEST_RD_ATOMIC,
                    IBV_QP_MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
    PVRDMA_IBV_COPY(PVRDMA_QP_DEST_QPN, IBV_QP_DEST_QPN, dest_qp_num);
    PVRDMA_IBV_COPY(PVRDMA_QP_QKEY, IBV_QP_QKEY, qkey);
#undef PVRDMA_IBV_COPY
    if (ibv_modify_qp(q->hqp, &h, hmask)) {
        int err = errno;

        g_printerr("pvrdma: %s refused to modify QP 0x%x (state %u, "
                   "attribute mask 0x%x): %s\n", ibv->name, qp->qpn,
                   (mask & PVRDMA_QP_STATE) ? a->qp_state : qp->state,
                   hmask, strerror(err));
        return -err;
    }
    if (!(mask & PVRDMA_QP_STATE)) {
        return 0;
    }
    switch (a->qp_state) {
    case PVRDMA_QPS_RTR:
    case PVRDMA_QPS_RTS:
        /* Receives posted in INIT wait on the guest's ring until now. */
        pvrdma_ibv_take_recvs(q);
        break;
    case PVRDMA_QPS_ERR:
        pvrdma_ibv_flush_recvs(q);
        break;
    case PVRDMA_QPS_RESET:
        /* The host dropped its receive queue; the guest's ring restarts. */
        q->recv_head = q->recv_count = 0;
        q->sends_out = 0;
        q->cm_rq_psn = -1;
        q->gen = ++ibv->next_gen;
        break;
    }
    return 0;
}

static int pvrdma_ibv_qp_modify(void *be, PvrdmaQp *qp,
                                const struct pvrdma_qp_attr *a, uint32_t mask)
{
    PvrdmaIbv *ibv = be;
    PvrdmaIbvQp *q = qp->be;
    bool leaving = (mask & PVRDMA_QP_STATE) &&
                   (a->qp_state == PVRDMA_QPS_RESET ||
                    a->qp_state == PVRDMA_QPS_ERR);

    if (!q->hqp) {
        return 0;
    }
    /*
     * The guest accepting a connection the host's CM has not accepted yet
     * (pvrdma_ibv_cm.c): the receive PSN the peer will use is known only
     * then, so RTR (and what follows) waits for the guest's REP.
     */
    if (!leaving &&
        (q->nheld || ((mask & PVRDMA_QP_STATE) &&
                      a->qp_state == PVRDMA_QPS_RTR && ibv->cm &&
                      (mask & PVRDMA_QP_DEST_QPN) &&
                      pvrdma_ibv_cm_claims(ibv->cm, a->dest_qp_num,
                                           a->ah_attr.grh.dgid)))) {
        if (q->nheld == G_N_ELEMENTS(q->held)) {
            return -EINVAL;
        }
        q->held[q->nheld].attr = *a;
        q->held[q->nheld].mask = mask;
        q->nheld++;
        return 0;
    }
    q->nheld = 0;
    return pvrdma_ibv_qp_apply(q, a, mask);
}

int pvrdma_ibv_qp_release(PvrdmaIbvQp *q)
{
    unsigned i, n = q->nheld;
    int ret = 0;

    q->nheld = 0;
    for (i = 0; i < n && ret == 0; i++) {
        ret = pvrdma_ibv_qp_apply(q, &q->held[i].attr, q->held[i].mask);
    }
    return ret;
}

static void pvrdma_ibv_qp_destroy(void *be, PvrdmaQp *qp)
{
    PvrdmaIbv *ibv = be;
    PvrdmaIbvQp *q = qp->be;

    if (!q) {
        return;
    }
    if (ibv->gsi == q) {
        ibv->gsi = NULL;
    }
    if (q->hqp) {
        g_hash_table_remove(ibv->qps, GUINT_TO_POINTER(q->hqp->qp_num));
        ibv_destroy_qp(q->hqp);
    }
    if (q->ah) {
        ibv_destroy_ah(q->ah);
    }
    g_free(q->recv_wr_id);
    g_free(q->recv_grh);
    g_free(q);
    qp->be = NULL;
}

static enum ibv_wr_opcode pvrdma_ibv_wr_opcode(uint32_t op)
{
    switch (op) {
    case PVRDMA_WR_RDMA_WRITE:
        return IBV_WR_RDMA_WRITE;
    case PVRDMA_WR_RDMA_WRITE_WITH_IMM:
        return IBV_WR_RDMA_WRITE_WITH_IMM;
    case PVRDMA_WR_SEND_WITH_IMM:
        return IBV_WR_SEND_WITH_IMM;
    case PVRDMA_WR_RDMA_READ:
        return IBV_WR_RDMA_READ;
    case PVRDMA_WR_ATOMIC_CMP_AND_SWP:
        return IBV_WR_ATOMIC_CMP_AND_SWP;
    case PVRDMA_WR_ATOMIC_FETCH_AND_ADD:
        return IBV_WR_ATOMIC_FETCH_AND_ADD;
    case PVRDMA_WR_SEND_WITH_INV:
        return IBV_WR_SEND_WITH_INV;
    default:
        return IBV_WR_SEND;
    }
}

/*
 * The host address handle for a datagram of @req: the QP's last one if
 * the destination is the same, else a new one.  NULL if the host
 * refuses it (*@err -EINVAL: the send completes with an error), or if
 * the last one is still used by sends on the host (*@err -EAGAIN: the
 * core tries again when they completed).
 */
static struct ibv_ah *pvrdma_ibv_ah(PvrdmaIbvQp *q, const PvrdmaSendWr *req,
                                    int *err)
{
    PvrdmaIbv *ibv = q->ibv;
    PvrdmaPd *pd = pvrdma_table_lookup(&ibv->core->pd_tbl,
                                       q->qp->pd_handle);
    struct ibv_ah_attr a;
    struct ibv_ah *ah;
    int sgid;

    *err = -EINVAL;
    sgid = pvrdma_ibv_host_gid(ibv, req->sgid, false);
    if (sgid < 0 || !pd) {
        return NULL;
    }
    memset(&a, 0, sizeof(a));
    a.is_global = 1;
    memcpy(a.grh.dgid.raw, req->dgid, 16);
    a.grh.flow_label = req->flow_label & 0xfffff;
    a.grh.sgid_index = sgid;
    a.grh.hop_limit = req->hop_limit;
    a.grh.traffic_class = req->tclass;
    a.sl = req->sl;
    a.port_num = ibv->port;
    if (q->ah && !memcmp(&a, &q->ah_key, sizeof(a))) {
        return q->ah;
    }
    if (q->ah && q->sends_out) {
        *err = -EAGAIN;
        return NULL;
    }
    *err = -EINVAL;
    ah = ibv_create_ah(pvrdma_ibv_hpd(pd), &a);
    if (!ah) {
        g_printerr("pvrdma: %s refused an address handle for a datagram "
                   "of QP 0x%x: %s\n", ibv->name, q->qp->qpn,
                   strerror(errno));
        return NULL;
    }
    /* No sends are out: the old handle has no users left. */
    if (q->ah) {
        ibv_destroy_ah(q->ah);
    }
    q->ah = ah;
    q->ah_key = a;
    return ah;
}

/* Bytes of a guest MAD, out of its send SGL. */
static int pvrdma_ibv_take_mad(void *opaque, uint64_t off, void *buf,
                               uint64_t n)
{
    memcpy((uint8_t *)opaque + off, buf, n);
    return 0;
}

static int pvrdma_ibv_submit(void *be G_GNUC_UNUSED, PvrdmaQp *qp,
                             PvrdmaSendWr *req)
{
    PvrdmaIbvQp *q = qp->be;
    struct ibv_sge sge[PVRDMA_MAX_SGE + PVRDMA_IBV_SPLIT_SGES];
    struct ibv_send_wr wr, *bad;
    int nsge;

    if (!q->hqp) {
        /*
         * GSI: CM MADs go to the host's RDMA CM; the rest, which nobody
         * carries, is lost as a datagram may be.
         */
        PvrdmaSendResult res = { .status = PVRDMA_WC_SUCCESS };
        uint8_t mad[PVRDMA_IBV_MAD_SIZE];
        size_t len = MIN(req->length, sizeof(mad));

        if (q->ibv->cm &&
            pvrdma_sgl_xfer(&req->local, 0, len, false, pvrdma_ibv_take_mad,
                            mad) == PVRDMA_COPY_OK) {
            pvrdma_ibv_cm_guest_mad(q->ibv->cm, mad, len, req);
        }
        pvrdma_core_send_done(q->ibv->core, qp, &res);
        return 0;
    }
    nsge = pvrdma_ibv_sges(q->ibv, &req->local, sge,
                           MIN(q->max_send_sge, G_N_ELEMENTS(sge)));
    if (nsge < 0) {
        return -EFAULT;         /* LOC_PROT_ERR */
    }
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = PVRDMA_IBV_WRID(q->gen, 0, 0);
    wr.sg_list = sge;
    wr.num_sge = nsge;
    wr.opcode = pvrdma_ibv_wr_opcode(req->opcode);
    wr.send_flags = IBV_SEND_SIGNALED |
                    (req->solicited ? IBV_SEND_SOLICITED : 0);
    switch (wr.opcode) {
    case IBV_WR_SEND_WITH_IMM:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
        wr.imm_data = req->imm_data;        /* raw, network order */
        break;
    case IBV_WR_SEND_WITH_INV:
        wr.invalidate_rkey = req->inv_rkey;
        break;
    default:
        break;
    }
    switch (wr.opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
        wr.wr.rdma.remote_addr = req->remote_addr;
        wr.wr.rdma.rkey = req->rkey;
        break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
        wr.wr.atomic.remote_addr = req->remote_addr;
        wr.wr.atomic.rkey = req->rkey;
        wr.wr.atomic.compare_add = req->compare_add;
        wr.wr.atomic.swap = req->swap;
        break;
    default:
        break;
    }
    if (req->ud) {
        int err;

        wr.wr.ud.ah = pvrdma_ibv_ah(q, req, &err);
        if (!wr.wr.ud.ah) {
            return err;
        }
        wr.wr.ud.remote_qpn = req->dst_qpn;
        wr.wr.ud.remote_qkey = req->qkey;
    }
    if (ibv_post_send(q->hqp, &wr, &bad)) {
        int err = errno;

        g_printerr("pvrdma: %s refused a work request (opcode %u, %u SGEs) "
                   "of QP 0x%x: %s\n", q->ibv->name, wr.opcode, wr.num_sge,
                   qp->qpn, strerror(err));
        return -err;
    }
    q->sends_out++;
    return 0;
}

static void pvrdma_ibv_cancel(void *be G_GNUC_UNUSED, PvrdmaQp *qp)
{
    PvrdmaIbvQp *q = qp->be;

    /* Their host completions (flushes) are dropped by the tag check. */
    if (q && q->sends_out) {
        q->sends_out = 0;
        q->gen = ++q->ibv->next_gen;
    }
}

static void pvrdma_ibv_recv_posted(void *be, PvrdmaQp *qp)
{
    PvrdmaIbv *ibv = be;

    if (qp->be && qp->be == ibv->gsi) {
        if (ibv->cm) {
            pvrdma_ibv_cm_recv_posted(ibv->cm);
        }
    } else if (qp->be) {
        pvrdma_ibv_take_recvs(qp->be);
    }
}

static int pvrdma_ibv_gid_bind(void *be, uint32_t index,
                               const uint8_t gid[16],
                               uint8_t gid_type G_GNUC_UNUSED)
{
    PvrdmaIbv *ibv = be;

    if (ibv->cm) {
        pvrdma_ibv_cm_gid(ibv->cm, index, gid);
    }
    return 0;
}

static void pvrdma_ibv_gid_unbind(void *be, uint32_t index)
{
    PvrdmaIbv *ibv = be;

    if (ibv->cm) {
        pvrdma_ibv_cm_gid(ibv->cm, index, NULL);
    }
}

static void pvrdma_ibv_reset(void *be)
{
    PvrdmaIbv *ibv = be;

    if (ibv->cm) {
        pvrdma_ibv_cm_reset(ibv->cm);
    }
}

/*
 * Byte @off of the GRH area of a UD receive, read through the MR's pin if
 * the MR is still there (-1 if not): the host device wrote it.
 */
static int pvrdma_ibv_grh_byte(PvrdmaIbvQp *q, const PvrdmaIbvGrhAt *at,
                               uint64_t off)
{
    PvrdmaMr *mr = pvrdma_table_lookup(&q->ibv->core->mr_tbl,
                                       at->mr_handle);
    uint64_t rel;
    uint8_t b;

    if (mr && (mr->flags & PVRDMA_MR_FLAG_DMA)) {
        /* A kernel user's buffer: va is a guest bus address. */
        return pvrdma_core_dma_read(q->ibv->core, at->va + off, &b, 1) < 0 ?
               -1 : b;
    }
    if (!mr || !mr->pinned || at->va + off < mr->start ||
        at->va + off >= mr->start + mr->length) {
        return -1;
    }
    rel = at->va + off - mr->start + (mr->start & (PVRDMA_PAGE_SIZE - 1));
    return ((uint8_t *)mr->pinned[rel / PVRDMA_PAGE_SIZE])
           [rel % PVRDMA_PAGE_SIZE];
}

/*
 * Datagram fields of a UD receive: the GRH is in the buffer (a RoCE v2
 * IPv4 header sits in its last 20 bytes), the sl says UDP and the L3
 * header as the software fabric does (pvrdma_fabric_end_ud).
 */
static void pvrdma_ibv_ud_cqe(PvrdmaIbvQp *q, const PvrdmaIbvGrhAt *at,
                              struct pvrdma_cqe *cqe)
{
    bool v4 = (pvrdma_ibv_grh_byte(q, at, 20) >> 4) == 4 &&
              pvrdma_ibv_grh_byte(q, at, 0) == 0;

    cqe->wc_flags |= PVRDMA_WC_GRH | PVRDMA_WC_WITH_NETWORK_HDR_TYPE;
    cqe->network_hdr_type = v4 ? PVRDMA_NETWORK_IPV4 : PVRDMA_NETWORK_IPV6;
    cqe->sl = 0x8 | (v4 ? 2 : 1);
}

/*
 * The port's counters for a message the host device placed (what the
 * guest can see of the host's responder: SENDs and WRITEs with
 * immediate; plain WRITEs, READs and atomics leave no trace here).
 */
static void pvrdma_ibv_count_recv(PvrdmaIbvQp *q, const struct ibv_wc *wc)
{
    PvrdmaCore *core = q->ibv->core;
    uint64_t len = wc->byte_len;

    if (q->qp->type == PVRDMA_QPT_UD || q->qp->type == PVRDMA_QPT_GSI) {
        len = len > PVRDMA_GRH_SIZE ? len - PVRDMA_GRH_SIZE : 0;
    }
    pvrdma_core_count(core, PVRDMA_CTR_RCVD_PKTS,
                      pvrdma_core_pkts(q->qp, len));
    pvrdma_core_count(core, PVRDMA_CTR_RCVD_BYTES, len);
    pvrdma_core_count(core, wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM ?
                      PVRDMA_CTR_RDMA_WRITES_RCVD : PVRDMA_CTR_RDMA_RECVS, 1);
}

/* The guest CQE of a host receive completion of the guest's @wr_id. */
static void pvrdma_ibv_recv_cqe(PvrdmaIbvQp *q, uint64_t wr_id,
                                const PvrdmaIbvGrhAt *at,
                                const struct ibv_wc *wc)
{
    struct pvrdma_cqe cqe;

    pvrdma_core_cqe_init(&cqe, q->qp, wr_id,
                         wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM ?
                         PVRDMA_WC_RECV_RDMA_WITH_IMM : PVRDMA_WC_RECV,
                         pvrdma_ibv_wc_status(wc->status));
    if (wc->status == IBV_WC_SUCCESS) {
        cqe.byte_len = wc->byte_len;
        cqe.src_qp = wc->src_qp;
        if (wc->wc_flags & IBV_WC_WITH_IMM) {
            cqe.imm_data = wc->imm_data;
            cqe.wc_flags |= PVRDMA_WC_WITH_IMM;
        }
        /*
         * Soft-RoCE hands user space the kernel's flag bits, where
         * invalidation is bit 2 (IBV_WC_IP_CSUM_OK to libibverbs, which
         * means nothing for an RC receive).
         */
        if ((wc->wc_flags & IBV_WC_WITH_INV) ||
            (q->qp->type == PVRDMA_QPT_RC && wc->opcode == IBV_WC_RECV &&
             (wc->wc_flags & IBV_WC_IP_CSUM_OK))) {
            /* The host invalidated the window; the guest's MR follows. */
            pvrdma_core_invalidate(q->ibv->core, q->qp,
                                   wc->invalidated_rkey);
            cqe.imm_data = GUINT32_TO_LE(wc->invalidated_rkey);
            cqe.wc_flags |= PVRDMA_WC_WITH_INVALIDATE;
        }
        if (q->qp->type == PVRDMA_QPT_UD) {
            pvrdma_ibv_ud_cqe(q, at, &cqe);
        } else {
            pvrdma_core_qp_comm_est(q->ibv->core, q->qp);
        }
        pvrdma_ibv_count_recv(q, wc);
    }
    /*
     * libibverbs does not say whether the sender solicited an event:
     * count every receive as solicited, so a guest waiting for solicited
     * events only is woken (at worst once too often), never missed.
     */
    pvrdma_core_recv_complete(q->ibv->core, q->qp, &cqe, true);
    if (wc->status != IBV_WC_SUCCESS) {
        pvrdma_core_qp_error(q->ibv->core, q->qp, -1);
    }
}

static void pvrdma_ibv_recv_wc(PvrdmaIbvQp *q, const struct ibv_wc *wc)
{
    uint32_t slot = q->recv_head;

    if (!q->recv_count) {
        return;
    }
    q->recv_head = (q->recv_head + 1) % q->recv_n;
    q->recv_count--;
    pvrdma_ibv_recv_cqe(q, q->recv_wr_id[slot],
                        q->recv_grh ? &q->recv_grh[slot] : NULL, wc);
}

/* A receive of @q's SRQ completed: its slot is free for the next WQE. */
static void pvrdma_ibv_srq_recv_wc(PvrdmaIbvQp *q, PvrdmaIbvSrq *s,
                                   const struct ibv_wc *wc)
{
    uint32_t slot = (uint32_t)wc->wr_id & 0x7fffffffu;

    if (slot >= s->n) {
        return;
    }
    s->free[s->nfree++] = slot;
    pvrdma_ibv_recv_cqe(q, s->wr_id[slot], &s->grh[slot], wc);
    pvrdma_ibv_take_recvs(q);
}

/*
 * A host send completion: the oldest request of the guest QP (host send
 * queues complete in order, each of ours is signaled).
 */
static void pvrdma_ibv_send_wc(PvrdmaIbvQp *q, const struct ibv_wc *wc)
{
    PvrdmaSendResult res = {
        .status = pvrdma_ibv_wc_status(wc->status),
        /* The host wrote an atomic's result into guest memory itself. */
        .atomic_written = true,
        .fatal = wc->status == IBV_WC_RETRY_EXC_ERR,
    };

    if (!q->sends_out) {
        return;
    }
    q->sends_out--;
    pvrdma_core_send_done(q->ibv->core, q->qp, &res);
}

static void pvrdma_ibv_dispatch(PvrdmaIbv *ibv, const struct ibv_wc *wc)
{
    PvrdmaIbvQp *q = g_hash_table_lookup(ibv->qps,
                                         GUINT_TO_POINTER(wc->qp_num));

    uint32_t tag = wc->wr_id >> 32;
    PvrdmaSrq *srq;

    if (!q) {
        return;
    }
    if ((wc->wr_id & (1ull << 31)) && q->qp->has_srq) {
        srq = pvrdma_qp_srq(ibv->core, q->qp);
        if (srq && srq->be && tag == ((PvrdmaIbvSrq *)srq->be)->gen) {
            pvrdma_ibv_srq_recv_wc(q, srq->be, wc);
        }
        return;
    }
    /* A QP destroyed or reset since: its tag no longer matches. */
    if (tag != q->gen) {
        return;
    }
    if (wc->wr_id & (1ull << 31)) {
        pvrdma_ibv_recv_wc(q, wc);
    } else {
        if ((wc->wr_id & 0x7fffffffu) == PVRDMA_IBV_SLOT_MW &&
            wc->status != IBV_WC_SUCCESS) {
            g_printerr("pvrdma: %s: a memory window operation of QP 0x%x "
                       "failed: %s\n", ibv->name, q->qp->qpn,
                       ibv_wc_status_str(wc->status));
        }
        /* A request, or a window bind or invalidation: in order. */
        pvrdma_ibv_send_wc(q, wc);
    }
}

/*
 * Host async events: what concerns a guest object becomes the guest's
 * event (or the QP's error); the rest is logged.
 */
static void pvrdma_ibv_async(PvrdmaIbv *ibv)
{
    struct ibv_async_event ev;
    PvrdmaIbvQp *q = NULL;
    PvrdmaIbvSrq *s;

    while (ibv_get_async_event(ibv->ctx, &ev) == 0) {
        switch (ev.event_type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
        case IBV_EVENT_QP_LAST_WQE_REACHED:
            q = g_hash_table_lookup(ibv->qps,
                                    GUINT_TO_POINTER(ev.element.qp->qp_num));
            break;
        default:
            break;
        }
        switch (ev.event_type) {
        case IBV_EVENT_QP_FATAL:
        case IBV_EVENT_QP_REQ_ERR:
        case IBV_EVENT_QP_ACCESS_ERR:
            if (q) {
                pvrdma_core_qp_error(ibv->core, q->qp,
                    ev.event_type == IBV_EVENT_QP_FATAL ?
                    PVRDMA_EQE_TYPE_QP_FATAL :
                    ev.event_type == IBV_EVENT_QP_REQ_ERR ?
                    PVRDMA_EQE_TYPE_QP_REQ_ERR :
                    PVRDMA_EQE_TYPE_QP_ACCESS_ERR);
            }
            break;
        case IBV_EVENT_QP_LAST_WQE_REACHED:
            if (q) {
                pvrdma_core_post_async_event(ibv->core,
                    PVRDMA_EQE_TYPE_QP_LAST_WQE_REACHED, q->qp->handle);
            }
            break;
        case IBV_EVENT_SRQ_LIMIT_REACHED:
            s = ev.element.srq->srq_context;
            pvrdma_core_srq_limit_reached(ibv->core, s->srq);
            break;
        case IBV_EVENT_SRQ_ERR:
            s = ev.element.srq->srq_context;
            pvrdma_core_post_async_event(ibv->core, PVRDMA_EQE_TYPE_SRQ_ERR,
                                         s->srq->handle);
            break;
        case IBV_EVENT_PORT_ACTIVE:
        case IBV_EVENT_PORT_ERR:
            if (ev.element.port_num == (int)ibv->port &&
                ibv->port_down != (ev.event_type == IBV_EVENT_PORT_ERR)) {
                bool up = ev.event_type == IBV_EVENT_PORT_ACTIVE;

                ibv->port_down = !up;
                g_printerr("pvrdma: %s port %u is %s\n", ibv->name,
                           ibv->port, up ? "ACTIVE again" :
                           "down: guest RDMA stops until it is up");
                pvrdma_core_post_async_event(ibv->core, up ?
                    PVRDMA_EQE_TYPE_PORT_ACTIVE : PVRDMA_EQE_TYPE_PORT_ERR,
                    1);
            }
            break;
        case IBV_EVENT_DEVICE_FATAL:
            g_printerr("pvrdma: host RDMA device %s failed (fatal event): "
                       "guest RDMA stops\n", ibv->name);
            pvrdma_core_post_async_event(ibv->core,
                                         PVRDMA_EQE_TYPE_DEVICE_FATAL, 0);
            break;
        default:
            break;
        }
        ibv_ack_async_event(&ev);
    }
}

void pvrdma_ibv_process(PvrdmaIbv *ibv)
{
    struct ibv_wc wc[32];
    struct ibv_cq *ev_cq;
    void *ev_ctx;
    int n, i;
    bool armed = false;

    while (ibv_get_cq_event(ibv->chan, &ev_cq, &ev_ctx) == 0) {
        ibv->unacked_events++;
    }
    if (ibv->unacked_events) {
        ibv_ack_cq_events(ibv->cq, ibv->unacked_events);
        ibv->unacked_events = 0;
    }
    pvrdma_core_enter(ibv->core);
    pvrdma_ibv_async(ibv);
    if (ibv->cm) {
        pvrdma_ibv_cm_process(ibv->cm);
    }
    for (;;) {
        n = ibv_poll_cq(ibv->cq, G_N_ELEMENTS(wc), wc);
        for (i = 0; i < n; i++) {
            pvrdma_ibv_dispatch(ibv, &wc[i]);
        }
        if (n > 0) {
            continue;
        }
        if (armed) {
            break;
        }
        /* Arm, then poll once more: nothing slips between the two. */
        ibv_req_notify_cq(ibv->cq, 0);
        armed = true;
    }
    pvrdma_core_leave(ibv->core);
}

static int pvrdma_ibv_srq_create(void *be, PvrdmaSrq *srq)
{
    PvrdmaIbv *ibv = be;
    PvrdmaPd *pd = pvrdma_table_lookup(&ibv->core->pd_tbl, srq->pd_handle);
    struct ibv_srq_init_attr init = {
        .attr = {
            .max_wr = MAX(srq->max_wr, 1),
            .max_sge = MIN(MAX(srq->max_sge, 1) + PVRDMA_IBV_SPLIT_SGES,
                           (uint32_t)ibv->dev_attr.max_srq_sge),
            .srq_limit = srq->srq_limit,
        },
    };
    PvrdmaIbvSrq *s;
    uint32_t i;

    s = g_new0(PvrdmaIbvSrq, 1);
    init.srq_context = s;
    s->hsrq = ibv_create_srq(pvrdma_ibv_hpd(pd), &init);
    if (!s->hsrq) {
        g_printerr("pvrdma: %s refused an SRQ of %u WQEs: %s\n", ibv->name,
                   srq->max_wr, strerror(errno));
        g_free(s);
        return -ENOMEM;
    }
    s->ibv = ibv;
    s->srq = srq;
    s->gen = ++ibv->next_gen;
    s->n = init.attr.max_wr;
    s->max_sge = init.attr.max_sge;
    s->wr_id = g_new0(uint64_t, s->n);
    s->grh = g_new0(PvrdmaIbvGrhAt, s->n);
    s->free = g_new(uint32_t, s->n);
    for (i = 0; i < s->n; i++) {
        s->free[s->nfree++] = s->n - 1 - i;
    }
    srq->be = s;
    return 0;
}

/* The host SRQ counts its WQEs and raises the limit event (async fd). */
static int pvrdma_ibv_srq_modify(void *be G_GNUC_UNUSED, PvrdmaSrq *srq,
                                 uint32_t limit)
{
    PvrdmaIbvSrq *s = srq->be;
    struct ibv_srq_attr a = { .srq_limit = limit };

    return ibv_modify_srq(s->hsrq, &a, IBV_SRQ_LIMIT) ? -errno : 0;
}

static void pvrdma_ibv_srq_destroy(void *be G_GNUC_UNUSED, PvrdmaSrq *srq)
{
    PvrdmaIbvSrq *s = srq->be;

    if (!s) {
        return;
    }
    ibv_destroy_srq(s->hsrq);
    g_free(s->wr_id);
    g_free(s->grh);
    g_free(s->free);
    g_free(s);
    srq->be = NULL;
}

static void pvrdma_ibv_poll(void *be, PvrdmaQp *qp G_GNUC_UNUSED,
                            PvrdmaCq *cq G_GNUC_UNUSED)
{
    pvrdma_ibv_process(be);
}

static void pvrdma_ibv_free(void *be)
{
    pvrdma_ibv_close(be);
}

/*
 * Multicast on the host device: the guest's UD QP is a host UD QP, which
 * joins the group there; the host delivers datagrams to it, and sends to
 * the group through an address handle like any other.
 */
static int pvrdma_ibv_mcast_attach(void *be G_GNUC_UNUSED, PvrdmaQp *qp,
                                   const uint8_t mgid[16], bool join)
{
    PvrdmaIbvQp *q = qp->be;
    union ibv_gid gid;
    int ret;

    if (!q || !q->hqp) {
        return -EINVAL;
    }
    memcpy(gid.raw, mgid, sizeof(gid.raw));
    ret = join ? ibv_attach_mcast(q->hqp, &gid, 0) :
                 ibv_detach_mcast(q->hqp, &gid, 0);
    if (ret) {
        g_printerr("pvrdma: %s refused to %s QP 0x%x %s a multicast group: "
                   "%s\n", q->ibv->name, join ? "attach" : "detach",
                   qp->qpn, join ? "to" : "from", strerror(ret));
        return -ret;
    }
    return 0;
}

/* The host interface of the device's port (its first GID's), or 0. */
static int pvrdma_ibv_mc_ifindex(PvrdmaIbv *ibv)
{
    struct ibv_gid_entry e;

    for (int i = ibv->gid_index >= 0 ? ibv->gid_index : 0;
         i < ibv->port_attr.gid_tbl_len; i++) {
        if (ibv_query_gid_ex(ibv->ctx, ibv->port, i, &e, 0) == 0 &&
            e.ndev_ifindex) {
            return e.ndev_ifindex;
        }
    }
    return 0;
}

/* Join (@join) or leave group @mgid on the host's interface. */
static void pvrdma_ibv_mc_ip(PvrdmaIbv *ibv, const uint8_t mgid[16],
                             bool join)
{
    static const uint8_t v4mapped[12] = {
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
    };
    bool v4 = !memcmp(mgid, v4mapped, sizeof(v4mapped));
    int *fd = v4 ? &ibv->mc_fd4 : &ibv->mc_fd6;
    int ret;

    if (*fd < 0) {
        *fd = socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (*fd < 0) {
            return;
        }
    }
    if (v4) {
        struct ip_mreqn m = { .imr_ifindex = pvrdma_ibv_mc_ifindex(ibv) };

        memcpy(&m.imr_multiaddr, mgid + 12, 4);
        ret = setsockopt(*fd, IPPROTO_IP, join ? IP_ADD_MEMBERSHIP :
                         IP_DROP_MEMBERSHIP, &m, sizeof(m));
    } else {
        struct ipv6_mreq m = {
            .ipv6mr_interface = pvrdma_ibv_mc_ifindex(ibv)
        };

        memcpy(&m.ipv6mr_multiaddr, mgid, 16);
        ret = setsockopt(*fd, IPPROTO_IPV6, join ? IPV6_ADD_MEMBERSHIP :
                         IPV6_DROP_MEMBERSHIP, &m, sizeof(m));
    }
    if (ret && join) {
        g_printerr("pvrdma: %s: cannot join a multicast group on the host "
                   "interface: %s (its datagrams may not come in)\n",
                   ibv->name, strerror(errno));
    }
}

static bool pvrdma_ibv_mc_in(uint8_t (*set)[16], unsigned n,
                             const uint8_t mgid[16])
{
    for (unsigned i = 0; i < n; i++) {
        if (!memcmp(set[i], mgid, 16)) {
            return true;
        }
    }
    return false;
}

/*
 * The guest's set of groups changed: the host interface joins the new
 * ones and leaves the old, so that the host's network layer hands their
 * datagrams to the device (RoCE v2 is UDP over IP).
 */
static void pvrdma_ibv_mcast_changed(void *be)
{
    PvrdmaIbv *ibv = be;
    uint8_t (*cur)[16] = g_malloc(PVRDMA_MCAST_MAX_GROUPS * 16);
    unsigned n = pvrdma_core_mcast_groups(ibv->core, cur,
                                          PVRDMA_MCAST_MAX_GROUPS);
    unsigned i, j;

    for (i = 0; i < ibv->mc_njoined; i++) {
        if (!pvrdma_ibv_mc_in(cur, n, ibv->mc_joined[i])) {
            pvrdma_ibv_mc_ip(ibv, ibv->mc_joined[i], false);
        }
    }
    for (j = 0; j < n; j++) {
        if (!pvrdma_ibv_mc_in(ibv->mc_joined, ibv->mc_njoined, cur[j])) {
            pvrdma_ibv_mc_ip(ibv, cur[j], true);
        }
    }
    g_free(ibv->mc_joined);
    ibv->mc_joined = g_memdup2(cur, n * 16);
    ibv->mc_njoined = n;
    g_free(cur);
}

const PvrdmaBackendOps pvrdma_ibv_backend_ops = {
    .name = "ibverbs",
    .reset = pvrdma_ibv_reset,
    .free = pvrdma_ibv_free,
    .pd_create = pvrdma_ibv_pd_create,
    .pd_destroy = pvrdma_ibv_pd_destroy,
    .mr_register = pvrdma_ibv_mr_register,
    .mr_deregister = pvrdma_ibv_mr_deregister,
    .mr_fastreg = pvrdma_ibv_mr_fastreg,
    .mw_offered = pvrdma_ibv_mw_offered,
    .mw_bind = pvrdma_ibv_mw_bind,
    .qp_create = pvrdma_ibv_qp_create,
    .qp_modify = pvrdma_ibv_qp_modify,
    .qp_destroy = pvrdma_ibv_qp_destroy,
    .srq_create = pvrdma_ibv_srq_create,
    .srq_modify = pvrdma_ibv_srq_modify,
    .srq_destroy = pvrdma_ibv_srq_destroy,
    .srq_limit_by_backend = true,
    .submit = pvrdma_ibv_submit,
    .cancel = pvrdma_ibv_cancel,
    .recv_posted = pvrdma_ibv_recv_posted,
    .gid_bind = pvrdma_ibv_gid_bind,
    .gid_unbind = pvrdma_ibv_gid_unbind,
    .poll = pvrdma_ibv_poll,
    .mcast = true,
    .mcast_changed = pvrdma_ibv_mcast_changed,
    .mcast_attach = pvrdma_ibv_mcast_attach,
};

/*
 * What the guest is offered cannot exceed what the host device has: each
 * guest object is a host one.  Lowers @cfg's limits to the device's
 * attributes, saying which.
 */
static void pvrdma_ibv_clamp(PvrdmaIbv *ibv, PvrdmaCore *core)
{
    const struct ibv_device_attr *a = &ibv->dev_attr;
    PvrdmaCoreConfig *cfg = &core->cfg;
    struct {
        const char *name;
        uint32_t *val;
        int host;
    } lim[] = {
        /* The GSI QP has no host QP: max-qp counts it too. */
        { "max-qp", &cfg->max_qp, a->max_qp > 0 ? a->max_qp + 1 : 0 },
        { "max-qp-wr", &cfg->max_qp_wr, a->max_qp_wr },
        { "max-sge", &cfg->max_sge, a->max_sge },
        { "max-mr", &cfg->max_mr, a->max_mr },
        { "max-pd", &cfg->max_pd, a->max_pd },
        { "max-srq", &cfg->max_srq, a->max_srq },
        { "max-srq-wr", &cfg->max_srq_wr, a->max_srq_wr },
        { "max-srq-sge", &cfg->max_srq_sge, a->max_srq_sge },
    };
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(lim); i++) {
        if (lim[i].host > 0 && *lim[i].val > (uint32_t)lim[i].host) {
            g_printerr("pvrdma: %s=%u lowered to %d, what host RDMA device "
                       "%s has\n", lim[i].name, *lim[i].val, lim[i].host,
                       ibv->name);
            *lim[i].val = lim[i].host;
        }
    }
    /* Multicast: what the host device keeps (none: not offered). */
    if (cfg->mcast_groups > (uint32_t)MAX(a->max_mcast_grp, 0) ||
        cfg->mcast_qps > (uint32_t)MAX(a->max_mcast_qp_attach, 1)) {
        g_printerr("pvrdma: mcast-groups=%u and mcast-qps=%u lowered to "
                   "%d and %d, what host RDMA device %s has\n",
                   cfg->mcast_groups, cfg->mcast_qps,
                   MIN((int)cfg->mcast_groups, MAX(a->max_mcast_grp, 0)),
                   MIN((int)cfg->mcast_qps, MAX(a->max_mcast_qp_attach, 1)),
                   ibv->name);
        cfg->mcast_groups = MIN(cfg->mcast_groups,
                                (uint32_t)MAX(a->max_mcast_grp, 0));
        cfg->mcast_qps = MIN(cfg->mcast_qps,
                             (uint32_t)MAX(a->max_mcast_qp_attach, 1));
    }
    /*
     * XRC (PVRDMA_EX_CAP_XRC) is not carried to a host device: the guest
     * sees no IBV_DEVICE_XRC and ibv_open_xrcd fails with EOPNOTSUPP.
     * Soft-RoCE has no XRC anyway; a host device that has it is told.
     */
    if (a->device_cap_flags & IBV_DEVICE_XRC) {
        g_printerr("pvrdma: host RDMA device %s has XRC, which "
                   "backend=ibverbs does not pass on: the guest gets no "
                   "XRC (backend=fabric has it)\n", ibv->name);
    }
    if (a->max_mr_size && cfg->max_mr_size > a->max_mr_size) {
        g_printerr("pvrdma: max-mr-size=%" G_GUINT64_FORMAT " lowered to %"
                   G_GUINT64_FORMAT ", what host RDMA device %s has\n",
                   cfg->max_mr_size, (uint64_t)a->max_mr_size, ibv->name);
        cfg->max_mr_size = a->max_mr_size;
    }
    /* No objects exist yet: the tables' quotas follow. */
    core->qp_tbl.max_count = MIN(core->qp_tbl.max_count, cfg->max_qp - 1);
    core->pd_tbl.max_count = MIN(core->pd_tbl.max_count, cfg->max_pd);
    core->mr_tbl.max_count = MIN(core->mr_tbl.max_count, cfg->max_mr);
    core->srq_tbl.max_count = MIN(core->srq_tbl.max_count, cfg->max_srq);
}

int pvrdma_ibv_attach(PvrdmaIbv *ibv, PvrdmaCore *core, char **msg)
{
    int flags;

    ibv->core = core;
    pvrdma_ibv_clamp(ibv, core);
    ibv->qps = g_hash_table_new(NULL, NULL);
    ibv->chan = ibv_create_comp_channel(ibv->ctx);
    if (ibv->chan) {
        ibv->cq = ibv_create_cq(ibv->ctx, MIN(PVRDMA_IBV_CQE,
                                              ibv->dev_attr.max_cqe),
                                NULL, ibv->chan, 0);
    }
    if (!ibv->chan || !ibv->cq) {
        *msg = g_strdup_printf("pvrdma: cannot make a completion queue on "
                               "host RDMA device %s: %s", ibv->name,
                               strerror(errno));
        return -1;
    }
    flags = fcntl(ibv->chan->fd, F_GETFL);
    fcntl(ibv->chan->fd, F_SETFL, flags | O_NONBLOCK);
    flags = fcntl(ibv->ctx->async_fd, F_GETFL);
    fcntl(ibv->ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
    ibv_req_notify_cq(ibv->cq, 0);
    pvrdma_core_set_backend(core, &pvrdma_ibv_backend_ops, ibv);
    if (g_strcmp0(ibv->cm_ports, "none") != 0) {
        char *why = NULL;

        ibv->cm = pvrdma_ibv_cm_new(ibv, ibv->cm_ports, &why);
        if (!ibv->cm) {
            g_printerr("%s\n", why);
            g_free(why);
        }
    }
    return 0;
}

int pvrdma_ibv_fd(PvrdmaIbv *ibv, unsigned i)
{
    switch (i) {
    case 0:
        return ibv->chan->fd;
    case 1:
        return ibv->ctx->async_fd;
    case 2:
        return ibv->cm ? pvrdma_ibv_cm_fd(ibv->cm) : -1;
    default:
        return -1;
    }
}
