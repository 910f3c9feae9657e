/*
 * QEMU paravirtual RDMA device (VMware PVRDMA ABI, interface version 20).
 *
 * This file is the thin QEMU glue: PCI identity, BARs, MSI-X, properties,
 * DMA and interrupt callbacks. Everything the guest drives (registers,
 * DSR, commands, objects, rings, doorbells) lives in the QEMU-independent
 * core, pvrdma_core.c, so that it can be unit-tested and fuzzed alone.
 *
 * Usage:
 *
 *   -device pvrdma[,max-qp=N][,max-cq=N][,max-mr=N][,max-pd=N]
 *                 [,max-srq=N][,max-qp-wr=N][,max-cqe=N][,max-sge=N]
 *                 [,max-srq-wr=N][,max-srq-sge=N][,max-ah=N][,max-uc=N]
 *                 [,uar-pages=N][,gid-tbl-len=N][,max-mr-size=BYTES]
 *                 [,max-pinned-pages=N][,node-guid=GUID][,iothread=ID]
 *                 [,backend=fabric][,fabric-path=DIR]
 *                 [,fabric-listen=HOST:PORT][,fabric-peer=HOST:PORT]
 *                 [,fabric-allow-uid=U1:U2...][,fabric-allow-gid=G1:G2...]
 *                 [,fabric-tls-creds=ID][,fabric-tls-authz=ID]
 *   -device pvrdma,backend=ibverbs,ibdev=NAME[,ibport=N][,gid-index=N]
 *                 [,cm-ports=P1:P2...|none]
 *
 * All properties are per-device limits advertised to the guest as the
 * device capabilities; they also bound the host resources a guest can
 * consume. See README.md for the defaults and the allowed ranges.
 * The fabric-* properties join the device to pvrdma devices of other
 * QEMU processes and hosts (pvrdma_fabric_glue.c); without them it
 * reaches the pvrdma devices of this process only.  backend=ibverbs puts
 * the guest's verbs on a host RDMA device (pvrdma_ibverbs.c,
 * docs/ibverbs.md).  iothread= names an -object iothread that runs the
 * doorbells and the fabric's links, so that a doorbell write returns to
 * the guest at once (docs/architecture.md, "Threading").
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/error-report.h"
#include "qemu/log.h"
#include "qemu/main-loop.h"
#include "qemu/module.h"
#include "qemu/queue.h"
#include "qemu/thread.h"
#include "qemu/timer.h"
#include "qapi/error.h"
#include "qapi/visitor.h"
#include "monitor/monitor.h"
#include "hw/boards.h"
#include "hw/pci/pci_device.h"
#include "hw/pci/msi.h"
#include "hw/pci/msix.h"
#include "hw/qdev-properties.h"
#include "migration/blocker.h"
#include "migration/vmstate.h"
#include "system/dma.h"
#include "system/iothread.h"
#include "system/runstate.h"
#include "system/system.h"
#include "trace.h"

#include "pvrdma_core.h"
#include "pvrdma_dev_abi.h"
#include "pvrdma_fabric.h"
#include "pvrdma_fabric_glue.h"
#include "pvrdma_gerr_trace.h"
#include "pvrdma_ibverbs.h"
#include "pvrdma_qemu_compat.h"

/* Guest errors of one kind logged in the current window (below). */
typedef struct PvrdmaGerrRate {
    int64_t start;
    unsigned count;
    unsigned suppressed;
} PvrdmaGerrRate;

/* A doorbell written by the guest, waiting for the IOThread. */
typedef struct PvrdmaDoorbell {
    uint64_t offset;
    uint32_t val;
} PvrdmaDoorbell;

/* Devices whose interrupts an IOThread sends (pvrdma_unlock). */
#define PVRDMA_MAX_DEVICES_IRQ  32

/* Doorbells queued per device before the vCPU runs them itself. */
#define PVRDMA_DBQ_LEN          256
/* Queue drains per run of the IOThread's bottom half before it yields. */
#define PVRDMA_DBQ_ROUNDS       4
/*
 * A doorbell queued this long ago that the IOThread has not started on
 * means the host gives the IOThread no core (more busy threads than
 * cores): the vCPU ringing the next doorbell runs the queue itself.
 */
#define PVRDMA_DBQ_LATE_NS      (50 * SCALE_US)

/*
 * A RAM section of the device's DMA address space, mapped once (below,
 * "guest RAM, mapped once").  A PC guest has a handful.
 */
typedef struct PvrdmaRamRange {
    uint64_t base;
    uint64_t size;
    bool mapped;                /* cache initialised (on first use) */
    bool usable;
    MemoryRegionCache cache;
} PvrdmaRamRange;

#define PVRDMA_RAM_RANGES       16

#define TYPE_PVRDMA "pvrdma"
OBJECT_DECLARE_SIMPLE_TYPE(PvrdmaState, PVRDMA)

struct PvrdmaState {
    PCIDevice parent_obj;

    MemoryRegion msix_bar;
    MemoryRegion reg_bar;
    MemoryRegion uar_bar;

    PvrdmaCoreConfig cfg;
    char *backend;              /* backend= property */
    char *fabric_path;          /* fabric-* properties */
    char *fabric_listen;
    char *fabric_peer;
    char *fabric_allow_uid;     /* other users who may join fabric-path */
    char *fabric_allow_gid;
    char *fabric_tls_creds;     /* TLS on TCP links: an -object's id */
    char *fabric_tls_authz;
    char *ibdev;                /* backend=ibverbs properties */
    uint32_t ibport;
    int32_t gid_index;
    char *cm_ports;
    char *fault_cmds;           /* x-fault-cmds, x-fault-async (lists) */
    char *fault_async;
    int ibv_fd[PVRDMA_IBV_NFDS]; /* completion channel, async, CM; -1 */
    PvrdmaGerrRate gerr_rate[PVRDMA_GERR__MAX];
    PvrdmaCore *core;
    PvrdmaFabric *fabric;       /* backend=fabric: the one it joined */
    QEMUTimer *timer;           /* the core's timer (RNR retries) */
    Error *migration_blocker;
    IOThread *iothread;         /* iothread= property, or NULL */
    QEMUBH *db_bh;              /* runs queued doorbells in the IOThread */
    QemuSpin dbq_lock;          /* dbq, dbq_n, dbq_since */
    PvrdmaDoorbell dbq[PVRDMA_DBQ_LEN];
    unsigned dbq_n;
    int64_t dbq_since;          /* get_clock() when dbq_n became 1 */
    bool db_running;            /* the IOThread is in pvrdma_db_bh */
    uint32_t irq_pending;       /* vectors raised under pvrdma_lock */
    QLIST_ENTRY(PvrdmaState) next;
    bool ram_cache;             /* x-ram-cache property (A/B benchmarks) */
    bool ram_window;            /* x-ram-window: copies walk RAM windows */
    bool rq_db_hint;            /* x-rq-db-hint property (A/B benchmarks) */
    bool sq_db_hint;            /* x-sq-db-hint property (A/B benchmarks) */
    bool db_unlocked;           /* vCPUs let the BQL go for doorbells */
    MemoryListener ram_listener;
    PvrdmaRamRange ram[PVRDMA_RAM_RANGES];      /* under pvrdma_lock */
    unsigned ram_n;
    unsigned ram_last;          /* index of the last range found */
    PvrdmaRamRange ram_next[PVRDMA_RAM_RANGES]; /* being built (BQL) */
    unsigned ram_next_n;
    /* Migration (docs/migration.md): the core's state in the stream. */
    uint8_t *state_buf;
    uint32_t state_len;
    bool resume_pending;        /* loaded: resume when the VM runs */
    bool moved_out;             /* stopped for a save: peers quiesced */
    char *move_err;             /* why that failed (the save is refused) */
    uint64_t move_work;         /* pvrdma_core_move_work() once quiesced */
    VMChangeStateEntry *vm_state;
};

/* ---- one lock for every pvrdma device of the process -------------------- */

/*
 * Cores, fabrics and backends of this process are guarded by one
 * recursive lock: devices reach each other's cores through a fabric (a
 * SEND executes on the responder's core), so one lock per device would
 * need an order among devices.  Without iothread= every caller also holds
 * the BQL and the lock is never contended.  With it, an IOThread runs
 * doorbells and fabric links holding this lock without the BQL, while
 * vCPUs and the main loop take it holding the BQL.  So the order is BQL,
 * then this lock, and a holder without the BQL never waits for it:
 *
 *  - interrupts raised under the lock are sent when its outermost holder
 *    is done: at once by a holder with the BQL, after letting the lock go
 *    by one without (MSI-X reads its table and writes the message under
 *    the BQL);
 *  - DMA without the BQL reaches RAM only (pvrdma_dma_direct): MMIO
 *    would take the BQL.
 *
 * A vCPU that writes a doorbell lets the BQL go before it takes the
 * lock and runs it like an IOThread (pvrdma_db_run()), so that a copy in
 * one vCPU does not hold up the MMIO, interrupts and timers of the others.
 * The UAR's accesses then run in parallel: QEMU's re-entrancy guard (one
 * flag per device, not thread-safe) is off for it and pvrdma_reentered()
 * takes its place.
 */
static bool pvrdma_addr_is_own_bar(PvrdmaState *s, uint64_t addr,
                                   uint64_t len);

static QemuRecMutex pvrdma_big_lock;
static __thread unsigned pvrdma_lock_depth;     /* this thread's holds */
static bool pvrdma_irqs_pending;
static QLIST_HEAD(, PvrdmaState) pvrdma_devices =
    QLIST_HEAD_INITIALIZER(pvrdma_devices);

void pvrdma_lock(void)
{
    qemu_rec_mutex_lock(&pvrdma_big_lock);
    pvrdma_lock_depth++;
}

/* An MSI-X message aimed at the device's own BARs would run its handler. */
static void pvrdma_send_irqs(PvrdmaState *s, uint32_t pending)
{
    PCIDevice *pdev = &s->parent_obj;

    for (unsigned v = 0; pending; v++, pending >>= 1) {
        if (!(pending & 1) || !msix_enabled(pdev)) {
            continue;
        }
        if (pvrdma_addr_is_own_bar(s, msix_get_message(pdev, v).address, 4)) {
            qemu_log_mask(LOG_GUEST_ERROR, "pvrdma: MSI-X vector %u points "
                          "into the device's own BARs: not sent\n", v);
            continue;
        }
        trace_pvrdma_irq(v);
        msix_notify(pdev, v);
    }
}

/*
 * A device that left (unrealize) may still have a bottom half running, or
 * interrupts an IOThread noted before it went.
 */
static bool pvrdma_device_live(PvrdmaState *s)
{
    PvrdmaState *d;

    QLIST_FOREACH(d, &pvrdma_devices, next) {
        if (d == s) {
            return true;
        }
    }
    return false;
}

/*
 * Let the lock go.  bql_after: the caller let the BQL go to take the lock
 * and wants it back (pvrdma_db_run()).
 */
static void pvrdma_release(bool bql_after)
{
    struct {
        PvrdmaState *s;
        uint32_t pending;
    } irq[PVRDMA_MAX_DEVICES_IRQ] PVRDMA_UNINIT;
    PvrdmaState *s;
    unsigned n = 0;

    if (pvrdma_lock_depth > 1 || !pvrdma_irqs_pending) {
        pvrdma_lock_depth--;
        qemu_rec_mutex_unlock(&pvrdma_big_lock);
        if (bql_after) {
            bql_lock();
        }
        return;
    }
    pvrdma_irqs_pending = false;
    if (bql_locked()) {
        QLIST_FOREACH(s, &pvrdma_devices, next) {
            uint32_t p = s->irq_pending;

            s->irq_pending = 0;
            pvrdma_send_irqs(s, p);
        }
        pvrdma_lock_depth--;
        qemu_rec_mutex_unlock(&pvrdma_big_lock);
        return;
    }
    /* Without the BQL: note them, let the lock go, then take the BQL. */
    QLIST_FOREACH(s, &pvrdma_devices, next) {
        if (!s->irq_pending) {
            continue;
        }
        if (n == PVRDMA_MAX_DEVICES_IRQ) {
            pvrdma_irqs_pending = true;     /* the next unlock sends them */
            break;
        }
        irq[n].s = s;
        irq[n++].pending = s->irq_pending;
        s->irq_pending = 0;
    }
    pvrdma_lock_depth--;
    qemu_rec_mutex_unlock(&pvrdma_big_lock);
    bql_lock();
    /* Devices come and go under the BQL too. */
    for (unsigned i = 0; i < n; i++) {
        if (pvrdma_device_live(irq[i].s)) {
            pvrdma_send_irqs(irq[i].s, irq[i].pending);
        }
    }
    if (!bql_after) {
        bql_unlock();
    }
}

void pvrdma_unlock(void)
{
    pvrdma_release(false);
}

/*
 * An access to a BAR from this thread while it holds the lock: DMA or an
 * MSI-X message that reached a pvrdma BAR through another device (our own
 * BARs are refused before).  Dropped, as QEMU's re-entrancy guard would.
 */
static bool pvrdma_reentered(const char *what)
{
    if (!pvrdma_lock_depth) {
        return false;
    }
    qemu_log_mask(LOG_GUEST_ERROR, "pvrdma: %s while a pvrdma device was "
                  "at work (DMA or MSI-X re-entering it): dropped\n", what);
    return true;
}

/* ---- callbacks for the core ------------------------------------------- */

/* Refuse DMA that would touch one of our own BARs (re-entrancy). */
static bool pvrdma_addr_is_own_bar(PvrdmaState *s, uint64_t addr,
                                   uint64_t len)
{
    PCIDevice *pdev = &s->parent_obj;   /* data path: no QOM cast */
    int i;

    for (i = PVRDMA_BAR_MSIX; i <= PVRDMA_BAR_UAR; i++) {
        pcibus_t base = pci_get_bar_addr(pdev, i);
        pcibus_t size = pdev->io_regions[i].size;

        if (base == PCI_BAR_UNMAPPED || !size) {
            continue;
        }
        if (addr < base + size && base < addr + len) {
            return true;
        }
    }
    return false;
}

/* ---- guest RAM, mapped once --------------------------------------------- */

/*
 * The data path reads WQEs, writes CQEs and maps payload many times per
 * request; each address_space_map() or pci_dma_*() call translates the
 * address through the flat view and takes a reference on the region.  A
 * memory listener on the device's DMA address space keeps the list of its
 * RAM sections instead, each mapped once (a MemoryRegionCache) when first
 * used: an access inside one is a memcpy, and a write completes with
 * address_space_cache_invalidate() (dirty bitmaps, TCG's translated
 * code), as address_space_unmap() does.  Anything else (MMIO, a range
 * across two sections) takes the slow path.  The list changes under the
 * BQL (memory transactions, bus mastering turned off) and is swapped under
 * pvrdma_lock, so no mapping handed out by pvrdma_dma_map() goes away
 * before its unmap within the same locked operation.
 */
static void pvrdma_ram_begin(MemoryListener *l)
{
    PvrdmaState *s = container_of(l, PvrdmaState, ram_listener);

    s->ram_next_n = 0;
}

static void pvrdma_ram_section(MemoryListener *l, MemoryRegionSection *sec)
{
    PvrdmaState *s = container_of(l, PvrdmaState, ram_listener);
    PvrdmaRamRange *r;

    if (!s->ram_cache || !memory_region_is_ram(sec->mr) ||
        memory_region_is_ram_device(sec->mr) || sec->mr->readonly ||
        memory_region_is_rom(sec->mr) ||
        s->ram_next_n == PVRDMA_RAM_RANGES || !int128_get64(sec->size)) {
        return;                 /* the slow path serves it */
    }
    r = &s->ram_next[s->ram_next_n++];
    memset(r, 0, sizeof(*r));
    r->base = sec->offset_within_address_space;
    r->size = int128_get64(sec->size);
}

static void pvrdma_ram_drop(PvrdmaState *s)
{
    for (unsigned i = 0; i < s->ram_n; i++) {
        if (s->ram[i].mapped) {
            address_space_cache_destroy(&s->ram[i].cache);
        }
    }
    s->ram_n = 0;
}

static void pvrdma_ram_commit(MemoryListener *l)
{
    PvrdmaState *s = container_of(l, PvrdmaState, ram_listener);

    pvrdma_lock();
    pvrdma_ram_drop(s);
    memcpy(s->ram, s->ram_next, s->ram_next_n * sizeof(s->ram[0]));
    s->ram_n = s->ram_next_n;
    pvrdma_unlock();
}

static bool pvrdma_ram_holds(const PvrdmaRamRange *r, uint64_t addr)
{
    return addr >= r->base && addr - r->base < r->size;
}

/*
 * The range holding [addr, addr + len), mapped; NULL: use the slow path.
 * The range of the previous hit is tried first: nearly every access of a
 * work request is to the guest's main RAM.
 */
static PvrdmaRamRange *pvrdma_ram_find(PvrdmaState *s, uint64_t addr,
                                       uint64_t len)
{
    PvrdmaRamRange *r = NULL;

    if (s->ram_last < s->ram_n && pvrdma_ram_holds(&s->ram[s->ram_last],
                                                   addr)) {
        r = &s->ram[s->ram_last];
    } else {
        for (unsigned i = 0; i < s->ram_n && !r; i++) {
            if (pvrdma_ram_holds(&s->ram[i], addr)) {
                r = &s->ram[i];
                s->ram_last = i;
            }
        }
        if (!r) {
            return NULL;
        }
    }
    if (!r->mapped) {
        int64_t got = address_space_cache_init(&r->cache,
                                pci_get_address_space(&s->parent_obj),
                                r->base, r->size, true);

        r->mapped = true;
        r->usable = got > 0 && r->cache.ptr;
        r->size = r->usable ? MIN(r->size, (uint64_t)got) : r->size;
    }
    if (!r->usable || len > r->size - (addr - r->base)) {
        return NULL;
    }
    return r;
}

/* The range a pointer from pvrdma_dma_map() came from, or NULL. */
static PvrdmaRamRange *pvrdma_ram_of(PvrdmaState *s, void *ptr)
{
    for (unsigned i = 0; i < s->ram_n; i++) {
        PvrdmaRamRange *r = &s->ram[i];

        if (r->usable && (uint8_t *)ptr >= r->cache.ptr &&
            (uint8_t *)ptr < r->cache.ptr + r->size) {
            return r;
        }
    }
    return NULL;
}

/*
 * True if [addr, addr + len) is RAM the device may access directly.  Only
 * asked without the BQL (an IOThread), where MMIO is refused: its handler
 * would take the BQL (see pvrdma_lock()).
 */
static bool pvrdma_dma_direct(PvrdmaState *s, uint64_t addr, uint64_t len,
                              bool is_write)
{
    AddressSpace *as = pci_get_address_space(&s->parent_obj);

    RCU_READ_LOCK_GUARD();
    while (len) {
        hwaddr xlat, l = len;
        MemoryRegion *mr = address_space_translate(as, addr, &xlat, &l,
                                                   is_write,
                                                   MEMTXATTRS_UNSPECIFIED);

        if (!l || !memory_access_is_direct(mr, is_write,
                                           MEMTXATTRS_UNSPECIFIED)) {
            return false;
        }
        addr += l;
        len -= l;
    }
    return true;
}

static int pvrdma_dma_check(PvrdmaState *s, uint64_t addr, uint64_t len,
                            bool is_write)
{
    if (len == 0) {
        return 0;
    }
    if (addr + len < addr || pvrdma_addr_is_own_bar(s, addr, len) ||
        (!bql_locked() && !pvrdma_dma_direct(s, addr, len, is_write))) {
        trace_pvrdma_dma_refused(addr, len);
        return -EFAULT;
    }
    return 0;
}

static int pvrdma_dma_read(void *opaque, uint64_t addr, void *buf,
                           uint64_t len)
{
    PvrdmaState *s = opaque;
    PvrdmaRamRange *r = pvrdma_ram_find(s, addr, len);
    int ret;

    if (r && len) {
        memcpy(buf, r->cache.ptr + (addr - r->base), len);
        return 0;
    }
    ret = pvrdma_dma_check(s, addr, len, false);
    if (ret) {
        return ret;
    }
    if (pci_dma_read(&s->parent_obj, addr, buf, len) != MEMTX_OK) {
        trace_pvrdma_dma_failed(addr, len);
        return -EFAULT;
    }
    return 0;
}

static int pvrdma_dma_write(void *opaque, uint64_t addr, const void *buf,
                            uint64_t len)
{
    PvrdmaState *s = opaque;
    PvrdmaRamRange *r = pvrdma_ram_find(s, addr, len);
    int ret;

    if (r && len) {
        memcpy(r->cache.ptr + (addr - r->base), buf, len);
        address_space_cache_invalidate(&r->cache, addr - r->base, len);
        return 0;
    }
    ret = pvrdma_dma_check(s, addr, len, true);
    if (ret) {
        return ret;
    }
    if (pci_dma_write(&s->parent_obj, addr, buf, len) != MEMTX_OK) {
        trace_pvrdma_dma_failed(addr, len);
        return -EFAULT;
    }
    return 0;
}

/*
 * Data path: short-lived host mappings of guest RAM for zero-copy moves
 * between two guests' memory, refused for our own BARs like dma_read.
 */
static void *pvrdma_dma_map(void *opaque, uint64_t addr, uint64_t *plen,
                            bool is_write)
{
    PvrdmaState *s = opaque;
    DMADirection dir = is_write ? DMA_DIRECTION_FROM_DEVICE :
                                  DMA_DIRECTION_TO_DEVICE;
    dma_addr_t len = *plen;
    PvrdmaRamRange *r;
    void *p;

    *plen = 0;
    if (len == 0) {
        return NULL;
    }
    r = pvrdma_ram_find(s, addr, 1);
    if (r) {
        /* Like address_space_map(): as far as the section goes. */
        *plen = MIN(len, r->size - (addr - r->base));
        return r->cache.ptr + (addr - r->base);
    }
    if (pvrdma_dma_check(s, addr, len, is_write)) {
        return NULL;
    }
    p = dma_memory_map(pci_get_address_space(&s->parent_obj), addr, &len,
                       dir, MEMTXATTRS_UNSPECIFIED);
    if (!p) {
        trace_pvrdma_dma_failed(addr, *plen);
        return NULL;
    }
    if (pvrdma_ram_of(s, p)) {
        /* An alias of mapped RAM: pvrdma_dma_unmap() will see it as such. */
        dma_memory_unmap(pci_get_address_space(&s->parent_obj), p, len, dir,
                         0);
    }
    *plen = len;
    return p;
}

static void pvrdma_dma_unmap(void *opaque, void *ptr, uint64_t len,
                             bool is_write, uint64_t access_len)
{
    PvrdmaState *s = opaque;
    PvrdmaRamRange *r = pvrdma_ram_of(s, ptr);

    if (r) {
        if (is_write && access_len) {
            address_space_cache_invalidate(&r->cache,
                                           (uint8_t *)ptr - r->cache.ptr,
                                           access_len);
        }
        return;
    }
    dma_memory_unmap(pci_get_address_space(&s->parent_obj), ptr, len,
                     is_write ? DMA_DIRECTION_FROM_DEVICE :
                     DMA_DIRECTION_TO_DEVICE, access_len);
}

/* The mapped RAM range holding @addr, whole (see pvrdma_ram_find()). */
static bool pvrdma_dma_window(void *opaque, uint64_t addr,
                              PvrdmaDmaWindow *w)
{
    PvrdmaState *s = opaque;
    PvrdmaRamRange *r = s->ram_window ? pvrdma_ram_find(s, addr, 1) : NULL;

    if (!r) {
        return false;
    }
    w->base = r->base;
    w->len = r->size;
    w->host = r->cache.ptr;
    w->tag = r;
    return true;
}

static void pvrdma_dma_dirty(void *opaque, void *tag, uint64_t addr,
                             uint64_t len)
{
    PvrdmaRamRange *r = tag;

    address_space_cache_invalidate(&r->cache, addr - r->base, len);
}

static int64_t pvrdma_clock_ns(void *opaque)
{
    return qemu_clock_get_ns(QEMU_CLOCK_VIRTUAL);
}

static void pvrdma_timer_mod(void *opaque, int64_t expire_ns)
{
    PvrdmaState *s = opaque;

    if (!s->timer) {
        return;                 /* unrealize: the timer is already gone */
    }
    if (expire_ns < 0) {
        timer_del(s->timer);
    } else {
        timer_mod(s->timer, expire_ns);
    }
}

static void pvrdma_timer_cb(void *opaque)
{
    PvrdmaState *s = opaque;

    pvrdma_lock();
    pvrdma_core_timer_expired(s->core);
    pvrdma_unlock();
}

/* Sent by pvrdma_unlock(). */
static void pvrdma_notify(void *opaque, unsigned vector)
{
    PvrdmaState *s = opaque;

    s->irq_pending |= 1u << vector;
    pvrdma_irqs_pending = true;
}

/*
 * A guest can hit one check millions of times a minute (a register storm
 * wrote ~7 million lines a minute with -d guest_errors): each kind of
 * guest error is logged at most PVRDMA_GERR_BURST times per second, and
 * the next report after a quiet second says how many were suppressed.
 */
#define PVRDMA_GERR_BURST       10
#define PVRDMA_GERR_WINDOW_NS   NANOSECONDS_PER_SECOND

static void pvrdma_guest_error(void *opaque, PvrdmaGerr kind,
                               const char *msg, const PvrdmaGerrArg *args)
{
    PvrdmaState *s = opaque;
    int64_t now = qemu_clock_get_ns(QEMU_CLOCK_REALTIME);
    PvrdmaGerrRate *r;

    if (kind >= PVRDMA_GERR__MAX) {
        return;
    }
    r = &s->gerr_rate[kind];
    if (now - r->start >= PVRDMA_GERR_WINDOW_NS) {
        if (r->suppressed) {
            qemu_log_mask(LOG_GUEST_ERROR, "pvrdma: %u more guest errors "
                          "like the next one were not logged\n",
                          r->suppressed);
        }
        r->start = now;
        r->count = 0;
        r->suppressed = 0;
    }
    if (r->count >= PVRDMA_GERR_BURST) {
        r->suppressed++;
        return;
    }
    r->count++;
    pvrdma_trace_guest_error(kind, args);
    qemu_log_mask(LOG_GUEST_ERROR, "pvrdma: %s\n", msg);
}

static void pvrdma_trace_cmd(void *opaque, uint32_t cmd, int err)
{
    trace_pvrdma_cmd(cmd, err);
}

static void pvrdma_trace_doorbell(void *opaque, uint64_t offset, uint32_t val)
{
    trace_pvrdma_doorbell(offset, val);
}

static void pvrdma_trace_rnr(void *opaque, uint32_t qpn, unsigned event,
                             uint32_t usec)
{
    trace_pvrdma_rnr(qpn, event, usec);
}

static const PvrdmaCoreOps pvrdma_core_ops = {
    .dma_read = pvrdma_dma_read,
    .dma_write = pvrdma_dma_write,
    .notify = pvrdma_notify,
    .guest_error = pvrdma_guest_error,
    .trace_cmd = pvrdma_trace_cmd,
    .trace_doorbell = pvrdma_trace_doorbell,
    .trace_rnr = pvrdma_trace_rnr,
    .dma_map = pvrdma_dma_map,
    .dma_unmap = pvrdma_dma_unmap,
    .dma_window = pvrdma_dma_window,
    .dma_dirty = pvrdma_dma_dirty,
    .clock_ns = pvrdma_clock_ns,
    .timer_mod = pvrdma_timer_mod,
};

/* ---- BARs ------------------------------------------------------------- */

/*
 * Run the doorbells the IOThread has not run yet, in the order the guest
 * wrote them (pvrdma_lock held).  Returns false if more may be waiting.
 */
static bool pvrdma_db_drain(PvrdmaState *s, unsigned rounds)
{
    PvrdmaDoorbell batch[PVRDMA_DBQ_LEN] PVRDMA_UNINIT;
    unsigned n;

    while (rounds--) {
        qemu_spin_lock(&s->dbq_lock);
        n = s->dbq_n;
        memcpy(batch, s->dbq, n * sizeof(batch[0]));
        s->dbq_n = 0;
        qemu_spin_unlock(&s->dbq_lock);
        if (!n) {
            return true;
        }
        for (unsigned i = 0; i < n; i++) {
            pvrdma_core_uar_write(s->core, batch[i].offset, batch[i].val);
        }
    }
    return false;
}

/* IOThread: the guest rang doorbells. */
static void pvrdma_db_bh(void *opaque)
{
    PvrdmaState *s = opaque;

    qatomic_set(&s->db_running, true);
    pvrdma_lock();
    if (pvrdma_device_live(s) && !pvrdma_db_drain(s, PVRDMA_DBQ_ROUNDS)) {
        qemu_bh_schedule(s->db_bh);     /* let the thread's other work in */
    }
    pvrdma_unlock();
    qatomic_set(&s->db_running, false);
}

/*
 * Whether a doorbell may be queued for the IOThread (dbq_lock held): not
 * when the queue is full, nor when its oldest doorbell has waited
 * PVRDMA_DBQ_LATE_NS for an IOThread that has not started on it.
 */
static bool pvrdma_db_may_queue(PvrdmaState *s)
{
    if (!s->dbq_n) {
        s->dbq_since = get_clock();
        return true;
    }
    return s->dbq_n < PVRDMA_DBQ_LEN &&
           (qatomic_read(&s->db_running) ||
            get_clock() - s->dbq_since < PVRDMA_DBQ_LATE_NS);
}

static uint64_t pvrdma_reg_read(void *opaque, hwaddr addr, unsigned size)
{
    PvrdmaState *s = opaque;
    uint64_t val;

    if (pvrdma_reentered("register read")) {
        return 0;
    }
    pvrdma_lock();
    val = pvrdma_core_reg_read(s->core, addr);
    pvrdma_unlock();
    return val;
}

static void pvrdma_reg_write(void *opaque, hwaddr addr, uint64_t val,
                             unsigned size)
{
    PvrdmaState *s = opaque;

    if (pvrdma_reentered("register write")) {
        return;
    }
    pvrdma_lock();
    /* A command sees the doorbells written before it, as without IOThread. */
    if (s->iothread) {
        pvrdma_db_drain(s, UINT_MAX);
    }
    pvrdma_core_reg_write(s->core, addr, val);
    pvrdma_unlock();
}

static const MemoryRegionOps pvrdma_reg_ops = {
    .read = pvrdma_reg_read,
    .write = pvrdma_reg_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = { .min_access_size = 4, .max_access_size = 4 },
    .impl = { .min_access_size = 4, .max_access_size = 4 },
};

/* Doorbell pages read 0, but for the clock (pvrdma_core_uar_read()). */
static uint64_t pvrdma_uar_read(void *opaque, hwaddr addr, unsigned size)
{
    PvrdmaState *s = opaque;

    return pvrdma_core_uar_read(s->core, addr);
}

/*
 * Run a doorbell, and those queued before it, in the vCPU that wrote it.
 * With db_unlocked the vCPU lets the BQL go meanwhile, as an IOThread
 * runs them (DMA to RAM only, interrupts sent with the BQL taken back);
 * QEMU keeps the device alive (RCU) but it may have been unrealized.
 */
static void pvrdma_db_run(PvrdmaState *s, hwaddr addr, uint64_t val)
{
    bool unlocked = s->db_unlocked && bql_locked();

    if (unlocked) {
        bql_unlock();
    }
    pvrdma_lock();
    if (!unlocked || pvrdma_device_live(s)) {
        if (s->iothread) {
            pvrdma_db_drain(s, UINT_MAX);
        }
        pvrdma_core_uar_write(s->core, addr, val);
    }
    pvrdma_release(unlocked);
}

/*
 * With an IOThread the doorbell is queued and the vCPU returns to the
 * guest; when the IOThread is PVRDMA_DBQ_LEN doorbells behind, or has
 * not started on the queue for PVRDMA_DBQ_LATE_NS, the vCPU runs the
 * queue itself (bounded memory and delay, order kept).  A CQ arm runs at
 * once, after what is queued (pvrdma_core_doorbell_arms_cq()).
 */
static void pvrdma_uar_write(void *opaque, hwaddr addr, uint64_t val,
                             unsigned size)
{
    PvrdmaState *s = opaque;
    unsigned n;

    if (pvrdma_reentered("doorbell")) {
        return;
    }
    if (s->iothread && !pvrdma_core_doorbell_arms_cq(addr, val)) {
        qemu_spin_lock(&s->dbq_lock);
        if (pvrdma_db_may_queue(s)) {
            s->dbq[s->dbq_n].offset = addr;
            s->dbq[s->dbq_n].val = val;
            n = ++s->dbq_n;
            qemu_spin_unlock(&s->dbq_lock);
            trace_pvrdma_doorbell_queued(addr, val, n);
            qemu_bh_schedule(s->db_bh);
            return;
        }
        qemu_spin_unlock(&s->dbq_lock);
    }
    pvrdma_db_run(s, addr, val);
}

static const MemoryRegionOps pvrdma_uar_ops = {
    .read = pvrdma_uar_read,
    .write = pvrdma_uar_write,
    .endianness = DEVICE_LITTLE_ENDIAN,
    .valid = { .min_access_size = 4, .max_access_size = 4 },
    .impl = { .min_access_size = 4, .max_access_size = 4 },
};

/* CREATE_UC names UAR pages by bus PFN: keep the core told where BAR2 is. */
/* The device's state back to power-on (a reset, or bus mastering off). */
static void pvrdma_reset_state(PvrdmaState *s)
{
    pvrdma_lock();
    qemu_spin_lock(&s->dbq_lock);
    s->dbq_n = 0;                       /* doorbells die with the state */
    qemu_spin_unlock(&s->dbq_lock);
    pvrdma_core_reset(s->core);
    pvrdma_unlock();
}

static void pvrdma_write_config(PCIDevice *pdev, uint32_t addr, uint32_t val,
                                int len)
{
    PvrdmaState *s = PVRDMA(pdev);
    bool master = pci_get_word(pdev->config + PCI_COMMAND) &
                  PCI_COMMAND_MASTER;
    pcibus_t base;

    pci_default_write_config(pdev, addr, val, len);
    /*
     * Bus mastering turned off: the device may not touch guest memory, so
     * it can neither deliver a completion nor take a peer's request, and
     * nothing it holds can go on: it resets.  Linux does this to every
     * device before kexec, so a driver without a shutdown hook (the
     * upstream one) leaves no device writing into the next kernel.
     */
    if (master && !(pci_get_word(pdev->config + PCI_COMMAND) &
                    PCI_COMMAND_MASTER)) {
        trace_pvrdma_bus_master_off();
        pvrdma_reset_state(s);
    }
    base = pci_get_bar_addr(pdev, PVRDMA_BAR_UAR);
    pvrdma_lock();
    pvrdma_core_set_uar_base(s->core, base == PCI_BAR_UNMAPPED ?
                             PVRDMA_CORE_UAR_UNMAPPED : base);
    pvrdma_unlock();
}

/* ---- realize / unrealize ------------------------------------------------ */

static bool pvrdma_check_params(PvrdmaState *s, Error **errp)
{
    PvrdmaFaultConfig *f = &s->cfg.fault;
    char *msg = NULL;

    if (!pvrdma_fault_parse_cmds(s->fault_cmds, &f->cmd_mask, &msg) ||
        !pvrdma_fault_parse_async(s->fault_async, &f->async_mask, &msg) ||
        !pvrdma_core_check_config(&s->cfg, &msg)) {
        error_setg(errp, "%s", msg);
        g_free(msg);
        return false;
    }
    if (f->async_ms && s->backend && !strcmp(s->backend, "ibverbs")) {
        error_setg(errp, "pvrdma: x-fault-async-ms is for the software "
                   "fabric: with backend=ibverbs the host device's queue "
                   "pairs would not follow; remove it or the backend");
        return false;
    }
    return true;
}

static bool pvrdma_init_pci(PvrdmaState *s, Error **errp)
{
    PCIDevice *pdev = PCI_DEVICE(s);
    unsigned i;

    /* MSI-X only: INTx is not wired, so no pin is advertised. */
    pdev->config[PCI_INTERRUPT_PIN] = 0;

    memory_region_init(&s->msix_bar, OBJECT(s), "pvrdma-msix",
                       PVRDMA_MSIX_BAR_SIZE);
    pci_register_bar(pdev, PVRDMA_BAR_MSIX, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->msix_bar);

    memory_region_init_io(&s->reg_bar, OBJECT(s), &pvrdma_reg_ops, s,
                          "pvrdma-regs", PVRDMA_REG_BAR_SIZE);
    pci_register_bar(pdev, PVRDMA_BAR_REG, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->reg_bar);

    memory_region_init_io(&s->uar_bar, OBJECT(s), &pvrdma_uar_ops, s,
                          "pvrdma-uar",
                          (uint64_t)s->cfg.uar_pages * PVRDMA_UAR_PAGE_SIZE);
    s->uar_bar.disable_reentrancy_guard = true;    /* pvrdma_reentered() */
    pci_register_bar(pdev, PVRDMA_BAR_UAR, PCI_BASE_ADDRESS_SPACE_MEMORY,
                     &s->uar_bar);

    if (msix_init(pdev, PVRDMA_NUM_VECTORS,
                  &s->msix_bar, PVRDMA_BAR_MSIX, PVRDMA_MSIX_TABLE_OFFSET,
                  &s->msix_bar, PVRDMA_BAR_MSIX, PVRDMA_MSIX_PBA_OFFSET,
                  0, errp) < 0) {
        return false;
    }
    for (i = 0; i < PVRDMA_NUM_VECTORS; i++) {
        msix_vector_use(pdev, i);
    }
    return true;
}

static void pvrdma_exit_pci(PvrdmaState *s)
{
    PCIDevice *pdev = PCI_DEVICE(s);

    msix_unuse_all_vectors(pdev);
    msix_uninit(pdev, &s->msix_bar, &s->msix_bar);
}

static bool pvrdma_init_core(PvrdmaState *s, Error **errp)
{
    PCIDevice *pdev = PCI_DEVICE(s);
    uint8_t vm = 0;
    size_t i;

    if (!s->cfg.node_guid) {
        /*
         * EUI-64 under QEMU's OUI from what a migration destination shares
         * (the -uuid, the PCI address), never from the order of realize:
         * unique per device of this VM, and per VM when -uuid differs.
         */
        for (i = 0; qemu_uuid_set && i < sizeof(qemu_uuid.data); i++) {
            vm ^= qemu_uuid.data[i];
        }
        s->cfg.node_guid = 0x525400fffe000000ULL | ((uint64_t)vm << 16) |
                           ((uint64_t)pci_dev_bus_num(pdev) << 8) |
                           pdev->devfn;
    }
    s->timer = timer_new_ns(QEMU_CLOCK_VIRTUAL, pvrdma_timer_cb, s);
    s->core = pvrdma_core_new(&s->cfg, &pvrdma_core_ops, s);
    qemu_spin_init(&s->dbq_lock);
    if (s->iothread) {
        s->db_bh = aio_bh_new(iothread_get_aio_context(s->iothread),
                              pvrdma_db_bh, s);
    }
    QLIST_INSERT_HEAD(&pvrdma_devices, s, next);
    s->ram_listener = (MemoryListener) {
        .name = "pvrdma-ram",
        .begin = pvrdma_ram_begin,
        .region_add = pvrdma_ram_section,
        .region_nop = pvrdma_ram_section,
        .commit = pvrdma_ram_commit,
    };
    memory_listener_register(&s->ram_listener,
                             pci_get_address_space(&s->parent_obj));
    return true;
}

/* Host completions or async events wait (main loop, BQL held). */
static void pvrdma_ibv_ready(void *opaque)
{
    pvrdma_lock();
    pvrdma_ibv_process(opaque);
    pvrdma_unlock();
}

/*
 * backend=ibverbs: the host device registers guest RAM by aliasing its
 * pages (docs/ibverbs.md), which needs RAM with a file descriptor.
 */
static bool pvrdma_init_ibverbs(PvrdmaState *s, Error **errp)
{
    MachineState *ms = MACHINE(qdev_get_machine());
    PvrdmaIbvConfig cfg = {
        .ibdev = s->ibdev, .ibport = s->ibport, .gid_index = s->gid_index,
        .cm_ports = s->cm_ports,
    };
    PvrdmaIbv *ibv;
    char *msg = NULL;

    if (s->fabric_path || s->fabric_listen || s->fabric_peer ||
        s->fabric_allow_uid || s->fabric_allow_gid || s->fabric_tls_creds ||
        s->fabric_tls_authz) {
        error_setg(errp, "pvrdma: the fabric-* properties belong to "
                   "backend=fabric; backend=ibverbs reaches other VMs and "
                   "hosts through the host RDMA device");
        return false;
    }
    if (s->iothread) {
        error_setg(errp, "pvrdma: iothread= is not supported with "
                   "backend=ibverbs yet (its host completions run in the "
                   "main loop); remove iothread=");
        return false;
    }
    if (!s->ibdev) {
        error_setg(errp, "pvrdma: backend=ibverbs needs ibdev=NAME, the "
                   "host RDMA device to use (ibv_devices or rdma link show "
                   "lists them)");
        return false;
    }
    if (!ms->ram || memory_region_get_fd(ms->ram) < 0) {
        error_setg(errp, "pvrdma: backend=ibverbs registers guest RAM with "
                   "the host RDMA device and needs it shared: add -object "
                   "memory-backend-memfd,id=ram,size=SIZE,share=on "
                   "-machine memory-backend=ram (SIZE as -m)");
        return false;
    }
    ibv = pvrdma_ibv_open(&cfg, &msg);
    if (!ibv) {
        error_setg(errp, "%s", msg);
        g_free(msg);
        return false;
    }
    if (pvrdma_ibv_attach(ibv, s->core, &msg) < 0) {
        error_setg(errp, "%s", msg);
        g_free(msg);
        pvrdma_ibv_close(ibv);
        return false;
    }
    /* The core owns the backend now; host completions, events wake us. */
    for (int i = 0; i < PVRDMA_IBV_NFDS; i++) {
        s->ibv_fd[i] = pvrdma_ibv_fd(ibv, i);
        if (s->ibv_fd[i] >= 0) {
            qemu_set_fd_handler(s->ibv_fd[i], pvrdma_ibv_ready, NULL, ibv);
        }
    }
    msg = pvrdma_ibv_describe(ibv);
    info_report("pvrdma: backend=ibverbs on %s", msg);
    g_free(msg);
    return true;
}

/* The one place that knows backends by name; the core never does. */
static bool pvrdma_init_backend(PvrdmaState *s, Error **errp)
{
    PvrdmaFabricProps props = {
        .path = s->fabric_path, .listen = s->fabric_listen,
        .peer = s->fabric_peer, .allow_uid = s->fabric_allow_uid,
        .allow_gid = s->fabric_allow_gid,
        .tls_creds = s->fabric_tls_creds,
        .tls_authz = s->fabric_tls_authz,
    };
    const char *name = s->backend ? s->backend : "fabric";
    PvrdmaFabricPort *port;
    PvrdmaFabric *fab;
    char *msg = NULL;

    if (strcmp(name, "ibverbs") == 0) {
        return pvrdma_init_ibverbs(s, errp);
    }
    if (strcmp(name, "fabric") != 0) {
        error_setg(errp, "pvrdma: backend=%s is not known: use "
                   "backend=fabric (the built-in software fabric) or "
                   "backend=ibverbs (a host RDMA device)", name);
        return false;
    }
    if (s->ibdev || s->ibport != 1 || s->gid_index != -1 || s->cm_ports) {
        error_setg(errp, "pvrdma: ibdev, ibport, gid-index and cm-ports "
                   "belong to backend=ibverbs; backend=fabric needs none "
                   "of them");
        return false;
    }
    if ((s->fabric_tls_creds || s->fabric_tls_authz) &&
        (!s->fabric_tls_creds || (!s->fabric_listen && !s->fabric_peer))) {
        error_setg(errp, "pvrdma: fabric-tls-creds protects TCP links: "
                   "give it with fabric-listen or fabric-peer (and "
                   "fabric-tls-authz only with fabric-tls-creds)");
        return false;
    }
    if ((s->fabric_allow_uid || s->fabric_allow_gid) && !s->fabric_path) {
        error_setg(errp, "pvrdma: fabric-allow-uid and fabric-allow-gid "
                   "say which other users' QEMUs may join through "
                   "fabric-path=DIR: give fabric-path too (TCP links are "
                   "not checked by user)");
        return false;
    }
    /*
     * Without fabric-path, -listen or -peer: the fabric of this process's
     * devices only.  It has a timer too, which retransmits requests a
     * not-yet-ready QP of this process dropped.
     */
    fab = pvrdma_fabric_glue_get(&props, s->iothread, errp);
    if (!fab) {
        return false;
    }
    /* The devfn is the same on a migration destination: stable QPNs. */
    port = pvrdma_fabric_port_new(fab, s->core, PCI_DEVICE(s)->devfn, &msg);
    if (!port) {
        error_setg(errp, "%s", msg);
        g_free(msg);
        return false;
    }
    pvrdma_core_set_backend(s->core, &pvrdma_fabric_backend_ops, port);
    s->fabric = fab;
    return true;
}

static void pvrdma_exit_core(PvrdmaState *s)
{
    memory_listener_unregister(&s->ram_listener);
    pvrdma_ram_drop(s);
    QLIST_REMOVE(s, next);
    if (s->db_bh) {
        qemu_bh_delete(s->db_bh);
        s->db_bh = NULL;
    }
    s->irq_pending = 0;
    /* The timer goes first so that it can never fire into a freed core. */
    timer_free(s->timer);
    s->timer = NULL;
    for (int i = 0; i < PVRDMA_IBV_NFDS; i++) {
        if (s->ibv_fd[i] >= 0) {
            qemu_set_fd_handler(s->ibv_fd[i], NULL, NULL, NULL);
            s->ibv_fd[i] = -1;
        }
    }
    s->fabric = NULL;
    pvrdma_core_free(s->core);
    s->core = NULL;
}

/* ---- migration and snapshots (docs/migration.md) ----------------------- */

/* The most a device state may take in the stream (hostile input). */
#define PVRDMA_STATE_MAX        (256u << 20)

/* How long peers get to hold their requests and finish what is in flight. */
#define PVRDMA_MOVE_TIMEOUT_NS  (5 * NANOSECONDS_PER_SECOND)

/* Doorbells an IOThread had not run yet run first, in their order. */
static void pvrdma_db_drain_all(PvrdmaState *s)
{
    while (!pvrdma_db_drain(s, PVRDMA_DBQ_ROUNDS)) {
        /* again */
    }
}

/*
 * Stopped for a save: fabric peers hold their requests to this device
 * and what is in flight ends, before the last copy of RAM (the answers
 * write guest memory).  Under the lock.
 */
static void pvrdma_move_out(PvrdmaState *s)
{
    int64_t start = qemu_clock_get_us(QEMU_CLOCK_REALTIME);
    char *err = NULL;

    pvrdma_db_drain_all(s);
    g_clear_pointer(&s->move_err, g_free);
    if (!pvrdma_core_move_out(s->core, PVRDMA_MOVE_TIMEOUT_NS, &err)) {
        s->move_err = err;
    }
    trace_pvrdma_move_out(!s->move_err,
                          qemu_clock_get_us(QEMU_CLOCK_REALTIME) - start);
    s->moved_out = true;
    s->move_work = pvrdma_core_move_work(s->core);
}

static int pvrdma_pre_save(void *opaque)
{
    PvrdmaState *s = opaque;
    char *err = NULL;
    size_t len = 0;
    uint64_t work;

    pvrdma_lock();
    if (!s->moved_out || s->move_err) {
        /*
         * The VM was stopped before the save began (no state change to
         * quiesce in): quiesce now; if a peer's request or answer still
         * came in, it may have written RAM already copied.
         */
        work = pvrdma_core_move_work(s->core);
        pvrdma_move_out(s);
        if (!s->move_err && s->move_work != work) {
            s->move_err = g_strdup("pvrdma: RDMA traffic of fabric peers "
                                   "reached this stopped VM while its "
                                   "memory was being saved; save it again "
                                   "(its peers now hold their requests)");
        }
    }
    pvrdma_db_drain_all(s);
    if (!s->move_err && pvrdma_core_move_work(s->core) != s->move_work) {
        s->move_err = g_strdup("pvrdma: a fabric peer's request or answer "
                               "reached the device after it was quiesced");
    }
    g_free(s->state_buf);
    s->state_buf = s->move_err ? NULL :
                   pvrdma_core_state_save(s->core, &len, &err);
    pvrdma_unlock();
    if (s->move_err) {
        error_report("%s", s->move_err);
        s->state_len = 0;
        return -EBUSY;
    }
    if (!s->state_buf || len > PVRDMA_STATE_MAX) {
        error_report("%s", err ? err : "pvrdma: the device state is too "
                     "large to migrate");
        g_free(err);
        g_clear_pointer(&s->state_buf, g_free);
        s->state_len = 0;
        return -EBUSY;
    }
    s->state_len = len;
    return 0;
}

static int pvrdma_post_save(void *opaque)
{
    PvrdmaState *s = opaque;

    g_clear_pointer(&s->state_buf, g_free);
    return 0;
}

/* Checked before the buffer of that size is allocated. */
static bool pvrdma_state_len_ok(void *opaque, int version_id)
{
    PvrdmaState *s = opaque;

    if (s->state_len > PVRDMA_STATE_MAX) {
        error_report("pvrdma: incoming device state of %u bytes (at most %u)",
                     s->state_len, PVRDMA_STATE_MAX);
        return false;
    }
    return true;
}

static int pvrdma_post_load(void *opaque, int version_id)
{
    PvrdmaState *s = opaque;
    PCIDevice *pdev = PCI_DEVICE(s);
    pcibus_t base = pci_get_bar_addr(pdev, PVRDMA_BAR_UAR);
    char *err = NULL;
    bool ok;

    pvrdma_lock();
    pvrdma_core_reset(s->core);
    pvrdma_core_set_uar_base(s->core, base == PCI_BAR_UNMAPPED ?
                             PVRDMA_CORE_UAR_UNMAPPED : base);
    ok = s->state_buf &&
         pvrdma_core_state_load(s->core, s->state_buf, s->state_len, &err);
    pvrdma_unlock();
    g_clear_pointer(&s->state_buf, g_free);
    if (!ok) {
        error_report("%s", err ? err : "pvrdma: no device state");
        g_free(err);
        return -EINVAL;
    }
    s->resume_pending = true;
    return 0;
}

/*
 * Stopping for a save quiesces the fabric peers; running again resumes
 * a loaded device, or lets a source that stays (failed or cancelled
 * migration, snapshot taken) go on with its peers.
 */
static void pvrdma_vm_state_change(void *opaque, bool running, RunState st)
{
    PvrdmaState *s = opaque;

    if (!running) {
        if (st == RUN_STATE_FINISH_MIGRATE || st == RUN_STATE_SAVE_VM) {
            pvrdma_lock();
            pvrdma_move_out(s);
            pvrdma_unlock();
        }
        return;
    }
    pvrdma_lock();
    if (s->resume_pending) {
        s->resume_pending = false;
        pvrdma_core_state_resume(s->core);
    } else if (s->moved_out) {
        pvrdma_core_move_back(s->core);
    }
    s->moved_out = false;
    g_clear_pointer(&s->move_err, g_free);
    pvrdma_unlock();
}

static const VMStateDescription vmstate_pvrdma = {
    .name = "pvrdma",
    .version_id = 1,
    .minimum_version_id = 1,
    .pre_save = pvrdma_pre_save,
    .post_save = pvrdma_post_save,
    .post_load = pvrdma_post_load,
    .fields = (const VMStateField[]) {
        VMSTATE_PCI_DEVICE(parent_obj, PvrdmaState),
        VMSTATE_MSIX(parent_obj, PvrdmaState),
        VMSTATE_UINT32(state_len, PvrdmaState),
        VMSTATE_VALIDATE("pvrdma state size", pvrdma_state_len_ok),
        VMSTATE_VBUFFER_ALLOC_UINT32(state_buf, PvrdmaState, 0, NULL,
                                     state_len),
        VMSTATE_END_OF_LIST()
    },
};

static bool pvrdma_init_migration(PvrdmaState *s, Error **errp)
{
    if (pvrdma_fault_enabled(&s->cfg.fault) && s->ibv_fd[0] < 0) {
        error_setg(&s->migration_blocker,
                   "pvrdma: x-fault-* properties (fault injection for "
                   "driver tests) are set; start the VM without them to "
                   "migrate it");
        if (migrate_add_blocker(&s->migration_blocker, errp) < 0) {
            return false;
        }
    }
    if (s->ibv_fd[0] >= 0) {
        error_setg(&s->migration_blocker,
                   "pvrdma: backend=ibverbs: the VM's RDMA objects live in "
                   "host RDMA device %s and cannot move with it; remove "
                   "the pvrdma device to migrate this VM", s->ibdev);
        return migrate_add_blocker(&s->migration_blocker, errp) == 0;
    }
    s->vm_state = qemu_add_vm_change_state_handler(pvrdma_vm_state_change,
                                                   s);
    return true;
}

static void pvrdma_realize(PCIDevice *pdev, Error **errp)
{
    PvrdmaState *s = PVRDMA(pdev);

    s->cfg.fw_ver = PVRDMA_DEFAULT_FW_VER;
    for (int i = 0; i < PVRDMA_IBV_NFDS; i++) {
        s->ibv_fd[i] = -1;
    }
    /*
     * Peers in other processes or a host device: guests' empty polls
     * should ring CQ_POLL (the device then takes completions at once).
     */
    s->cfg.cq_poll_hint = s->fabric_path || s->fabric_listen ||
                          s->fabric_peer ||
                          (s->backend && !strcmp(s->backend, "ibverbs"));
    s->cfg.no_rq_db_hint = !s->rq_db_hint;
    s->cfg.no_sq_db_hint = !s->sq_db_hint;
    if (!pvrdma_check_params(s, errp)) {
        return;
    }
    if (!pvrdma_init_pci(s, errp)) {
        return;
    }
    pvrdma_lock();
    if (!pvrdma_init_core(s, errp)) {
        goto err_exit_pci;
    }
    if (!pvrdma_init_backend(s, errp)) {
        goto err_free_core;
    }
    if (!pvrdma_init_migration(s, errp)) {
        goto err_free_core;
    }
    pvrdma_unlock();
    trace_pvrdma_realize(s->cfg.max_qp, s->cfg.max_cq, s->cfg.uar_pages);
    return;

err_free_core:
    pvrdma_exit_core(s);
    pvrdma_fabric_glue_release();       /* a fabric made for nothing */
err_exit_pci:
    pvrdma_unlock();
    pvrdma_exit_pci(s);
}

static void pvrdma_exit(PCIDevice *pdev)
{
    PvrdmaState *s = PVRDMA(pdev);

    migrate_del_blocker(&s->migration_blocker);
    if (s->vm_state) {
        qemu_del_vm_change_state_handler(s->vm_state);
        g_clear_pointer(&s->move_err, g_free);
        s->vm_state = NULL;
    }
    g_clear_pointer(&s->state_buf, g_free);
    pvrdma_lock();
    pvrdma_exit_core(s);
    pvrdma_fabric_glue_release();
    pvrdma_unlock();
    pvrdma_exit_pci(s);
}

static void pvrdma_qdev_reset(DeviceState *dev)
{
    PvrdmaState *s = PVRDMA(dev);

    trace_pvrdma_reset();
    pvrdma_reset_state(s);
}

#define PVRDMA_PROP_U32(name, field, def) \
    DEFINE_PROP_UINT32(name, PvrdmaState, cfg.field, PVRDMA_DEFAULT_##def)
#define PVRDMA_PROP_U64(name, field, def) \
    DEFINE_PROP_UINT64(name, PvrdmaState, cfg.field, PVRDMA_DEFAULT_##def)

/* Defaults live in pvrdma_core.h; node-guid 0 means "derive one". */
static const Property pvrdma_props[] = {
    PVRDMA_PROP_U32("max-qp", max_qp, MAX_QP),
    PVRDMA_PROP_U32("max-qp-wr", max_qp_wr, MAX_QP_WR),
    PVRDMA_PROP_U32("max-sge", max_sge, MAX_SGE),
    PVRDMA_PROP_U32("max-cq", max_cq, MAX_CQ),
    PVRDMA_PROP_U32("max-cqe", max_cqe, MAX_CQE),
    PVRDMA_PROP_U32("max-mr", max_mr, MAX_MR),
    PVRDMA_PROP_U32("max-pd", max_pd, MAX_PD),
    PVRDMA_PROP_U32("max-srq", max_srq, MAX_SRQ),
    PVRDMA_PROP_U32("max-srq-wr", max_srq_wr, MAX_SRQ_WR),
    PVRDMA_PROP_U32("max-srq-sge", max_srq_sge, MAX_SRQ_SGE),
    PVRDMA_PROP_U32("max-ah", max_ah, MAX_AH),
    PVRDMA_PROP_U32("max-uc", max_uc, MAX_UC),
    PVRDMA_PROP_U32("uar-pages", uar_pages, UAR_PAGES),
    PVRDMA_PROP_U32("gid-tbl-len", gid_tbl_len, GID_TBL_LEN),
    PVRDMA_PROP_U64("max-mr-size", max_mr_size, MAX_MR_SIZE),
    PVRDMA_PROP_U64("max-pinned-pages", max_pinned_pages, MAX_PINNED_PAGES),
    PVRDMA_PROP_U32("mcast-groups", mcast_groups, MCAST_GROUPS),
    PVRDMA_PROP_U32("mcast-qps", mcast_qps, MCAST_QPS),
    DEFINE_PROP_UINT64("node-guid", PvrdmaState, cfg.node_guid, 0),
    DEFINE_PROP_STRING("backend", PvrdmaState, backend),
    DEFINE_PROP_STRING("fabric-path", PvrdmaState, fabric_path),
    DEFINE_PROP_STRING("fabric-listen", PvrdmaState, fabric_listen),
    DEFINE_PROP_STRING("fabric-peer", PvrdmaState, fabric_peer),
    DEFINE_PROP_STRING("fabric-allow-uid", PvrdmaState, fabric_allow_uid),
    DEFINE_PROP_STRING("fabric-allow-gid", PvrdmaState, fabric_allow_gid),
    DEFINE_PROP_STRING("fabric-tls-creds", PvrdmaState, fabric_tls_creds),
    DEFINE_PROP_STRING("fabric-tls-authz", PvrdmaState, fabric_tls_authz),
    DEFINE_PROP_STRING("ibdev", PvrdmaState, ibdev),
    DEFINE_PROP_UINT32("ibport", PvrdmaState, ibport, 1),
    DEFINE_PROP_INT32("gid-index", PvrdmaState, gid_index, -1),
    DEFINE_PROP_STRING("cm-ports", PvrdmaState, cm_ports),
    DEFINE_PROP_LINK("iothread", PvrdmaState, iothread, TYPE_IOTHREAD,
                     IOThread *),
    /* Off: every DMA through the memory API (the cache's A/B baseline). */
    DEFINE_PROP_BOOL("x-ram-cache", PvrdmaState, ram_cache, true),
    /* Off: payload copies map and unmap page by page (A/B baseline). */
    DEFINE_PROP_BOOL("x-ram-window", PvrdmaState, ram_window, true),
    /* Off: guests ring every receive doorbell (the hint's A/B baseline). */
    DEFINE_PROP_BOOL("x-rq-db-hint", PvrdmaState, rq_db_hint, true),
    DEFINE_PROP_BOOL("x-sq-db-hint", PvrdmaState, sq_db_hint, true),
    /* Off: vCPUs run doorbells holding the BQL (the A/B baseline). */
    DEFINE_PROP_BOOL("x-db-unlocked", PvrdmaState, db_unlocked, true),
    /* Fault injection for driver tests (docs/faults.md); all off. */
    DEFINE_PROP_UINT32("x-fault-seed", PvrdmaState, cfg.fault.seed, 1),
    DEFINE_PROP_STRING("x-fault-cmds", PvrdmaState, fault_cmds),
    DEFINE_PROP_UINT32("x-fault-fail", PvrdmaState, cfg.fault.fail, 0),
    DEFINE_PROP_UINT32("x-fault-errno", PvrdmaState, cfg.fault.fail_errno,
                       ENOMEM),
    DEFINE_PROP_UINT32("x-fault-late", PvrdmaState, cfg.fault.late, 0),
    DEFINE_PROP_UINT32("x-fault-late-ms", PvrdmaState, cfg.fault.late_ms,
                       100),
    DEFINE_PROP_UINT32("x-fault-async-ms", PvrdmaState, cfg.fault.async_ms,
                       0),
    DEFINE_PROP_STRING("x-fault-async", PvrdmaState, fault_async),
};

/*
 * What the device holds against its limits, and its fabric's links with
 * their counters (docs/fabric.md, "Counters"): a snapshot taken under
 * the device lock, for the stats property and `info pvrdma`.
 */
typedef struct PvrdmaStats {
    PvrdmaCoreObjects o;
    PvrdmaLinkStats *links;
    unsigned nlinks;
    PvrdmaFabricCounters fc;
} PvrdmaStats;

static void pvrdma_stats_get(PvrdmaState *s, PvrdmaStats *st)
{
    memset(st, 0, sizeof(*st));
    pvrdma_lock();
    if (s->core) {
        pvrdma_core_objects(s->core, &st->o);
    }
    if (s->fabric) {
        st->nlinks = pvrdma_fabric_link_stats(s->fabric, NULL, 0);
        st->links = g_new0(PvrdmaLinkStats, MAX(st->nlinks, 1));
        pvrdma_fabric_link_stats(s->fabric, st->links, st->nlinks);
        pvrdma_fabric_counters(s->fabric, &st->fc);
    }
    pvrdma_unlock();
}

/* One kind of object: "NAME": { "used": USED, "max": MAX }. */
static bool pvrdma_visit_use(Visitor *v, const char *name, uint64_t used,
                             uint64_t max, Error **errp)
{
    bool ok;

    if (!visit_start_struct(v, name, NULL, 0, errp)) {
        return false;
    }
    ok = visit_type_uint64(v, "used", &used, errp) &&
         visit_type_uint64(v, "max", &max, errp);
    visit_end_struct(v, NULL);
    return ok;
}

/* What carries a link: shared memory, TCP, or TLS over TCP. */
static const char *pvrdma_link_kind(const PvrdmaLinkStats *l)
{
    return l->shm ? "shm" : l->tls ? "tls" : "tcp";
}

static bool pvrdma_visit_link(Visitor *v, PvrdmaLinkStats *l, Error **errp)
{
    char *name = l->name;
    char *kind = (char *)pvrdma_link_kind(l);
    uint64_t n[] = {
        l->frames_out, l->frames_in, l->bytes_out, l->bytes_in,
        l->kicks_out, l->kicks_in, l->requests_out, l->streams_out,
        l->ring_bytes, l->shrinks,
    };
    static const char *const names[] = {
        "frames-out", "frames-in", "bytes-out", "bytes-in",
        "kicks-out", "kicks-in", "requests-out", "streams-out",
        "ring-bytes", "shrinks",
    };
    bool ok;

    if (!visit_start_struct(v, NULL, NULL, 0, errp)) {
        return false;
    }
    ok = visit_type_str(v, "name", &name, errp) &&
         visit_type_str(v, "kind", &kind, errp) &&
         visit_type_bool(v, "up", &l->up, errp);
    for (size_t i = 0; ok && i < ARRAY_SIZE(n); i++) {
        ok = visit_type_uint64(v, names[i], &n[i], errp);
    }
    visit_end_struct(v, NULL);
    return ok;
}

static void pvrdma_get_stats(Object *obj, Visitor *v, const char *name,
                             void *opaque, Error **errp)
{
    PvrdmaState *s = PVRDMA(obj);
    const PvrdmaCoreConfig *c = &s->cfg;
    PvrdmaStats st;
    bool ok;

    pvrdma_stats_get(s, &st);
    if (!visit_start_struct(v, name, NULL, 0, errp)) {
        g_free(st.links);
        return;
    }
    ok = pvrdma_visit_use(v, "uc", st.o.uc, c->max_uc, errp) &&
         pvrdma_visit_use(v, "pd", st.o.pd, c->max_pd, errp) &&
         pvrdma_visit_use(v, "mr", st.o.mr, c->max_mr, errp) &&
         pvrdma_visit_use(v, "cq", st.o.cq, c->max_cq, errp) &&
         pvrdma_visit_use(v, "qp", st.o.qp, c->max_qp, errp) &&
         pvrdma_visit_use(v, "srq", st.o.srq, c->max_srq, errp) &&
         pvrdma_visit_use(v, "pinned-pages", st.o.pinned_pages,
                          c->max_pinned_pages, errp) &&
         visit_type_uint64(v, "messages-suppressed",
                           &st.fc.messages_suppressed, errp) &&
         visit_type_uint64(v, "links-closed-half-open",
                           &st.fc.half_open_closed, errp) &&
         visit_type_uint64(v, "links-hello-timeout", &st.fc.hello_timeouts,
                           errp) &&
         visit_type_uint64(v, "links-refused-uid", &st.fc.refused_cred,
                           errp) &&
         visit_type_uint64(v, "frames-dropped-unowned",
                           &st.fc.unowned_dropped, errp) &&
         visit_type_uint64(v, "gids-refused", &st.fc.gids_refused, errp) &&
         visit_type_uint64(v, "links-refused-tls", &st.fc.refused_tls,
                           errp) &&
         visit_start_list(v, "links", NULL, 0, errp);
    if (ok) {
        for (unsigned i = 0; ok && i < st.nlinks; i++) {
            ok = pvrdma_visit_link(v, &st.links[i], errp);
        }
        visit_end_list(v, NULL);
    }
    visit_end_struct(v, NULL);
    g_free(st.links);
}

/* info pvrdma: the stats of every device, for people. */
static void hmp_info_pvrdma(Monitor *mon, const QDict *qdict)
{
    PvrdmaState *s;

    QLIST_FOREACH(s, &pvrdma_devices, next) {
        const PvrdmaCoreConfig *c = &s->cfg;
        PvrdmaStats st;

        pvrdma_stats_get(s, &st);
        monitor_printf(mon, "%s (%02x.%x): backend %s\n",
                       DEVICE(s)->id ? DEVICE(s)->id : "pvrdma",
                       PCI_SLOT(PCI_DEVICE(s)->devfn),
                       PCI_FUNC(PCI_DEVICE(s)->devfn),
                       s->backend ? s->backend : "fabric");
        monitor_printf(mon, "  in use: uc %u/%u, pd %u/%u, mr %u/%u, "
                       "cq %u/%u, qp %u/%u, srq %u/%u, pinned pages %"
                       PRIu64 "/%" PRIu64 "\n",
                       st.o.uc, c->max_uc, st.o.pd, c->max_pd, st.o.mr,
                       c->max_mr, st.o.cq, c->max_cq, st.o.qp, c->max_qp,
                       st.o.srq, c->max_srq, st.o.pinned_pages,
                       c->max_pinned_pages);
        for (unsigned i = 0; i < st.nlinks; i++) {
            const PvrdmaLinkStats *l = &st.links[i];

            monitor_printf(mon, "  link %s: %s, %s, frames out %" PRIu64
                           " in %" PRIu64 ", bytes out %" PRIu64 " in %"
                           PRIu64 ", kicks out %" PRIu64 " in %" PRIu64
                           ", requests out %u, streams out %u, ring %"
                           PRIu64 " KiB, shrinks %" PRIu64 "\n",
                           l->name, pvrdma_link_kind(l),
                           l->up ? "up" : "down", l->frames_out,
                           l->frames_in, l->bytes_out, l->bytes_in,
                           l->kicks_out, l->kicks_in, l->requests_out,
                           l->streams_out, l->ring_bytes >> 10,
                           l->shrinks);
        }
        if (s->fabric && !st.nlinks) {
            monitor_printf(mon, "  no links\n");
        }
        if (s->fabric) {
            monitor_printf(mon, "  fabric: messages not shown %" PRIu64
                           ", links closed before their HELLO: %" PRIu64
                           " for newer ones, %" PRIu64 " after 10 s, "
                           "links refused for their user: %" PRIu64
                           ", for their TLS: %" PRIu64
                           ", GIDs refused: %" PRIu64 ", frames dropped "
                           "from GIDs their sender does not hold: %" PRIu64
                           "\n", st.fc.messages_suppressed,
                           st.fc.half_open_closed, st.fc.hello_timeouts,
                           st.fc.refused_cred, st.fc.refused_tls,
                           st.fc.gids_refused, st.fc.unowned_dropped);
        }
        g_free(st.links);
    }
}

/* x-objects: what the device holds for its guest (qom-get; a soak). */
static char *pvrdma_get_objects(Object *obj, Error **errp)
{
    PvrdmaState *s = PVRDMA(obj);
    PvrdmaCoreObjects o = { 0 };

    pvrdma_lock();
    if (s->core) {
        pvrdma_core_objects(s->core, &o);
    }
    pvrdma_unlock();
    return g_strdup_printf("uc=%u pd=%u mr=%u cq=%u qp=%u srq=%u "
                           "pinned-pages=%" PRIu64, o.uc, o.pd, o.mr, o.cq,
                           o.qp, o.srq, o.pinned_pages);
}

static void pvrdma_class_init(ObjectClass *klass, PvrdmaClassData data)
{
    DeviceClass *dc = DEVICE_CLASS(klass);
    PCIDeviceClass *k = PCI_DEVICE_CLASS(klass);

    qemu_rec_mutex_init(&pvrdma_big_lock);
    k->realize = pvrdma_realize;
    k->exit = pvrdma_exit;
    k->config_write = pvrdma_write_config;
    k->vendor_id = PVRDMA_PCI_VENDOR_ID;
    k->device_id = PVRDMA_PCI_DEVICE_ID;
    k->revision = 0x00;
    k->class_id = PVRDMA_PCI_CLASS;
    dc->desc = "Paravirtual RDMA (VMware PVRDMA ABI)";
    device_class_set_legacy_reset(dc, pvrdma_qdev_reset);
    device_class_set_props(dc, pvrdma_props);
    dc->vmsd = &vmstate_pvrdma;
    set_bit(DEVICE_CATEGORY_NETWORK, dc->categories);
    object_class_property_add_str(klass, "x-objects", pvrdma_get_objects,
                                  NULL);
    object_class_property_set_description(klass, "x-objects",
        "objects the device holds for its guest now (read only)");
    object_class_property_add(klass, "stats", "PvrdmaStats",
                              pvrdma_get_stats, NULL, NULL, NULL);
    object_class_property_set_description(klass, "stats",
        "objects in use against their limits, pinned pages, and the "
        "fabric's links with their counters (read only)");
}

static const TypeInfo pvrdma_types[] = {
    {
        .name = TYPE_PVRDMA,
        .parent = TYPE_PCI_DEVICE,
        .instance_size = sizeof(PvrdmaState),
        .class_init = pvrdma_class_init,
        .interfaces = (InterfaceInfo[]) {
            { INTERFACE_CONVENTIONAL_PCI_DEVICE },
            { }
        },
    },
};

static void pvrdma_register_types(void)
{
    type_register_static_array(pvrdma_types, ARRAY_SIZE(pvrdma_types));
    /* Its entry: hmp-commands-info.hx (scripts/qemu/pvrdma-hooks.patch). */
    monitor_register_hmp("pvrdma", true, hmp_info_pvrdma);
}

type_init(pvrdma_register_types)
