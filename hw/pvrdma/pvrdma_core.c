/*
 * PVRDMA device core: configuration, register file, DSR, interrupts,
 * command channel entry, device rings and doorbells.
 *
 * Register semantics chosen where the spec leaves them open (spec §2, §13):
 *  - VERSION reads 20 and is read-only.  ERR reads 0xFFFF after reset.
 *  - DSRLOW/DSRHIGH read back what was written; CTL and REQUEST read 0.
 *  - Offsets 0x28..0xFC read 0 and ignore writes (guest error), as do
 *    writes to VERSION, ERR and ICR.
 *  - IMR is per vector: bit v set masks vector v (the ICR bit positions).
 *    IMR is all-ones after reset (the driver writes 0 before ACTIVATE).
 *  - A cause raised while its vector is masked is latched in ICR; writing
 *    IMR delivers (and clears) every latched cause it unmasks.  A cause
 *    raised while unmasked goes straight to MSI-X and is not latched.
 *    Reading ICR returns the latched causes and clears them (they are then
 *    not delivered on unmask).
 *  - CTL ACTIVATE: ERR = 0 if a DSR is loaded, else -EINVAL.  UNQUIESCE:
 *    ERR = 0.  RESET: every object is destroyed, the DSR is forgotten, ICR
 *    is cleared, no DMA happens until the next DSR load; ERR = 0.  Other
 *    values: guest error, ERR = -EINVAL.
 *  - A DSRHIGH write first drops every object and any previous DSR (an
 *    implicit device reset), then loads the new DSR.  On failure nothing
 *    stays set up, ERR = the negative errno and DMA stays disabled.
 *  - Every write to REQUEST raises vector 0 exactly once before returning,
 *    whatever the outcome (spec §5.1 point 7), including a non-zero value
 *    (ERR = -EINVAL) and a missing DSR (ERR = -EINVAL, no DMA at all,
 *    CVE-2022-1050).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>

#include "pvrdma_core.h"
#include "pvrdma_dev_abi.h"
#include "pvrdma_core_int.h"
#include "pvrdma_abi_le.h"

#define PVRDMA_ERR_RESET_VALUE          0xFFFFu
#define PVRDMA_IMR_RESET_VALUE          0xFFFFFFFFu
#define PVRDMA_VECTOR_MASK              ((1u << PVRDMA_NUM_VECTORS) - 1)

/* ---- configuration ------------------------------------------------------- */

void pvrdma_core_default_config(PvrdmaCoreConfig *cfg)
{
    /*
     * max_sge 32 as Soft-RoCE offers (UCX asks for 5 send SGEs on RC, 6
     * on UD). max_qp_wr: 4096 WRs of the largest SQ WQE (32 SGEs: 1 KiB)
     * take 1024 pages; rings may span several page tables, so this is
     * reachable. max_cqe 4096 is 64 pages + ring state.
     */
    *cfg = (PvrdmaCoreConfig) {
        .max_qp = PVRDMA_DEFAULT_MAX_QP,
        .max_qp_wr = PVRDMA_DEFAULT_MAX_QP_WR,
        .max_sge = PVRDMA_DEFAULT_MAX_SGE,
        .max_cq = PVRDMA_DEFAULT_MAX_CQ,
        .max_cqe = PVRDMA_DEFAULT_MAX_CQE,
        .max_mr = PVRDMA_DEFAULT_MAX_MR,
        .max_pd = PVRDMA_DEFAULT_MAX_PD,
        .max_srq = PVRDMA_DEFAULT_MAX_SRQ,
        .max_srq_wr = PVRDMA_DEFAULT_MAX_SRQ_WR,
        .max_srq_sge = PVRDMA_DEFAULT_MAX_SRQ_SGE,
        .max_ah = PVRDMA_DEFAULT_MAX_AH,
        .max_uc = PVRDMA_DEFAULT_MAX_UC,
        .uar_pages = PVRDMA_DEFAULT_UAR_PAGES,
        .gid_tbl_len = PVRDMA_DEFAULT_GID_TBL_LEN,
        .max_mr_size = PVRDMA_DEFAULT_MAX_MR_SIZE,
        .max_pinned_pages = PVRDMA_DEFAULT_MAX_PINNED_PAGES,
        .mcast_groups = PVRDMA_DEFAULT_MCAST_GROUPS,
        .mcast_qps = PVRDMA_DEFAULT_MCAST_QPS,
        .fw_ver = PVRDMA_DEFAULT_FW_VER,
    };
}

static bool pvrdma_check_range(const char *name, uint64_t val, uint64_t min,
                               uint64_t max, char **errmsg)
{
    if (val < min || val > max) {
        *errmsg = g_strdup_printf("pvrdma: %s=%" G_GUINT64_FORMAT
                                  " is out of range: use %" G_GUINT64_FORMAT
                                  "..%" G_GUINT64_FORMAT,
                                  name, val, min, max);
        return false;
    }
    return true;
}

bool pvrdma_core_check_config(const PvrdmaCoreConfig *cfg, char **errmsg)
{
    *errmsg = NULL;
    if (!pvrdma_check_range("max-qp", cfg->max_qp, 2, 65535, errmsg) ||
        !pvrdma_check_range("max-qp-wr", cfg->max_qp_wr, 1, 65536, errmsg) ||
        !pvrdma_check_range("max-sge", cfg->max_sge, 1, 32, errmsg) ||
        !pvrdma_check_range("max-cq", cfg->max_cq, 1, (1u << 24) - 1,
                            errmsg) ||
        !pvrdma_check_range("max-cqe", cfg->max_cqe, 1, 1u << 18, errmsg) ||
        !pvrdma_check_range("max-mr", cfg->max_mr, 1, 1u << 24, errmsg) ||
        !pvrdma_check_range("max-pd", cfg->max_pd, 1, 1u << 24, errmsg) ||
        !pvrdma_check_range("max-srq", cfg->max_srq, 0, 65535, errmsg) ||
        !pvrdma_check_range("max-srq-wr", cfg->max_srq_wr, 1, 65536,
                            errmsg) ||
        !pvrdma_check_range("max-srq-sge", cfg->max_srq_sge, 1, 32,
                            errmsg) ||
        !pvrdma_check_range("max-ah", cfg->max_ah, 0, 1u << 24, errmsg) ||
        !pvrdma_check_range("uar-pages", cfg->uar_pages, 2, 2048, errmsg) ||
        !pvrdma_check_range("max-uc", cfg->max_uc, 0, cfg->uar_pages - 1,
                            errmsg) ||
        !pvrdma_check_range("gid-tbl-len", cfg->gid_tbl_len, 1, 256,
                            errmsg) ||
        !pvrdma_check_range("max-mr-size", cfg->max_mr_size,
                            PVRDMA_PAGE_SIZE,
                            (uint64_t)PVRDMA_PDIR_MAX_PAGES *
                            PVRDMA_PAGE_SIZE, errmsg) ||
        !pvrdma_check_range("max-pinned-pages", cfg->max_pinned_pages,
                            2 * PVRDMA_DSR_RING_MAX_PAGES, 1u << 28,
                            errmsg) ||
        !pvrdma_check_range("mcast-groups", cfg->mcast_groups, 0,
                            PVRDMA_MCAST_MAX_GROUPS, errmsg) ||
        !pvrdma_check_range("mcast-qps", cfg->mcast_qps, 1,
                            PVRDMA_MCAST_MAX_QPS, errmsg)) {
        return false;
    }
    /* Fault injection: an errno a driver can be given, sane delays. */
    if ((cfg->fault.fail &&
         !pvrdma_check_range("x-fault-errno", cfg->fault.fail_errno, 1, 133,
                             errmsg)) ||
        (cfg->fault.late &&
         !pvrdma_check_range("x-fault-late-ms", cfg->fault.late_ms, 1,
                             60000, errmsg)) ||
        (cfg->fault.async_ms &&
         !pvrdma_check_range("x-fault-async-ms", cfg->fault.async_ms, 1,
                             3600000, errmsg))) {
        return false;
    }
    if (cfg->uar_pages & (cfg->uar_pages - 1)) {
        *errmsg = g_strdup_printf("pvrdma: uar-pages=%u is not a power of "
                                  "two: use 2, 4, ..., 2048",
                                  cfg->uar_pages);
        return false;
    }
    return true;
}

/* ---- handle tables ------------------------------------------------------- */

void pvrdma_table_init(PvrdmaTable *t, uint32_t first, uint32_t limit,
                       uint32_t max_count)
{
    memset(t, 0, sizeof(*t));
    t->first = first;
    t->insert_first = first;
    t->limit = limit;
    t->max_count = max_count;
    t->hint = first;
    t->force = -1;
}

void pvrdma_table_destroy(PvrdmaTable *t)
{
    g_free(t->slots);
    g_free(t->gen);
    memset(t, 0, sizeof(*t));
}

static void pvrdma_table_grow(PvrdmaTable *t, uint32_t need)
{
    uint32_t n = MAX(MAX(need, 16u), t->alloc > UINT32_MAX / 2 ?
                     UINT32_MAX : t->alloc * 2);

    n = MIN(n, t->limit);
    t->slots = g_renew(void *, t->slots, n);
    t->gen = g_renew(uint8_t, t->gen, n);
    memset(t->slots + t->alloc, 0, (n - t->alloc) * sizeof(void *));
    memset(t->gen + t->alloc, 0, n - t->alloc);
    t->alloc = n;
}

static void pvrdma_table_set(PvrdmaTable *t, void *obj, uint32_t h)
{
    if (h >= t->alloc) {
        pvrdma_table_grow(t, h + 1);
    }
    t->slots[h] = obj;
    t->gen[h] = t->gen[h] == 255 ? 1 : t->gen[h] + 1;
    t->count++;
}

int pvrdma_table_insert(PvrdmaTable *t, void *obj, uint32_t *handle)
{
    uint32_t h;

    if (t->force >= 0) {
        uint8_t gen = t->force_gen;
        int ret;

        h = t->force;
        t->force = -1;
        t->force_gen = 0;
        ret = pvrdma_table_insert_at(t, obj, h);
        if (ret == 0 && gen) {
            t->gen[h] = gen;
        }
        if (ret == 0 && t->next_fit && h >= t->cursor) {
            t->cursor = h + 1;  /* restored: go on after the newest */
        }
        *handle = h;
        return ret;
    }
    if (t->count >= t->max_count) {
        return -ENOMEM;
    }
    if (t->next_fit) {
        uint32_t span = t->limit - t->insert_first, i;

        h = MAX(t->cursor, t->insert_first);
        for (i = 0; i < span; i++, h++) {
            if (h >= t->limit) {
                h = t->insert_first;
            }
            if (h >= t->alloc || !t->slots[h]) {
                break;
            }
        }
        if (i == span) {
            return -ENOMEM;
        }
        pvrdma_table_set(t, obj, h);
        t->cursor = h + 1;
        *handle = h;
        return 0;
    }
    for (h = MAX(t->hint, t->insert_first); h < t->alloc; h++) {
        if (!t->slots[h]) {
            break;
        }
    }
    if (h >= t->limit) {
        return -ENOMEM;
    }
    pvrdma_table_set(t, obj, h);
    t->hint = h + 1;
    *handle = h;
    return 0;
}

int pvrdma_table_insert_at(PvrdmaTable *t, void *obj, uint32_t handle)
{
    if (handle < t->first || handle >= t->limit) {
        return -EINVAL;
    }
    if (t->count >= t->max_count) {
        return -ENOMEM;
    }
    if (handle < t->alloc && t->slots[handle]) {
        return -EBUSY;
    }
    pvrdma_table_set(t, obj, handle);
    return 0;
}

void *pvrdma_table_lookup(const PvrdmaTable *t, uint32_t handle)
{
    if (handle < t->first || handle >= t->alloc) {
        return NULL;
    }
    return t->slots[handle];
}

void *pvrdma_table_next(const PvrdmaTable *t, uint32_t *h)
{
    for (; *h < t->alloc; (*h)++) {
        if (t->slots[*h]) {
            return t->slots[*h];
        }
    }
    return NULL;
}

uint8_t pvrdma_table_gen(const PvrdmaTable *t, uint32_t handle)
{
    return handle < t->alloc ? t->gen[handle] : 0;
}

void pvrdma_table_remove(PvrdmaTable *t, uint32_t handle)
{
    if (handle < t->alloc && t->slots[handle]) {
        t->slots[handle] = NULL;
        t->count--;
        if (handle < t->hint) {
            t->hint = handle;
        }
    }
}

/* ---- helpers ------------------------------------------------------------- */

/*
 * The values of a guest error, in the order of @fmt's conversions: the
 * formats are the core's own literals (integers of int or long size,
 * and strings), so the conversion tells each value's type.
 */
static unsigned pvrdma_gerr_args(const char *fmt, va_list ap,
                                 PvrdmaGerrArg *args)
{
    unsigned n = 0;
    const char *p;

    for (p = fmt; *p; p++) {
        bool is_long = false;

        if (*p != '%') {
            continue;
        }
        p++;
        if (*p == '%') {
            continue;
        }
        while (*p && strchr("-+ #0123456789.", *p)) {
            p++;
        }
        while (*p == 'l' || *p == 'z' || *p == 'j' || *p == 'h') {
            is_long |= *p != 'h';
            p++;
        }
        if (!*p) {
            break;
        }
        g_assert(n < PVRDMA_GERR_MAX_ARGS);
        if (*p == 's') {
            args[n++].s = va_arg(ap, const char *);
        } else if (is_long) {
            args[n++].u = va_arg(ap, unsigned long);
        } else {
            args[n++].u = va_arg(ap, unsigned int);
        }
    }
    return n;
}

void pvrdma_core_guest_error(PvrdmaCore *core, PvrdmaGerr kind,
                             const char *fmt, ...)
{
    PvrdmaGerrArg args[PVRDMA_GERR_MAX_ARGS] = { { 0 } };
    va_list ap;
    char *msg;

    if (!core->ops->guest_error) {
        return;
    }
    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    va_start(ap, fmt);
    pvrdma_gerr_args(fmt, ap, args);
    va_end(ap);
    core->ops->guest_error(core->opaque, kind, msg, args);
    g_free(msg);
}

static bool pvrdma_core_dma_range_ok(PvrdmaCore *core, uint64_t addr,
                                     uint64_t len)
{
    return core->dma_enabled && len != 0 && addr + len - 1 >= addr;
}

int pvrdma_core_dma_read(PvrdmaCore *core, uint64_t addr, void *buf,
                         uint64_t len)
{
    if (!pvrdma_core_dma_range_ok(core, addr, len)) {
        return -EFAULT;
    }
    return core->ops->dma_read(core->opaque, addr, buf, len) < 0 ?
           -EFAULT : 0;
}

int pvrdma_core_dma_write(PvrdmaCore *core, uint64_t addr, const void *buf,
                          uint64_t len)
{
    if (!pvrdma_core_dma_range_ok(core, addr, len)) {
        return -EFAULT;
    }
    return core->ops->dma_write(core->opaque, addr, buf, len) < 0 ?
           -EFAULT : 0;
}

void *pvrdma_core_dma_map(PvrdmaCore *core, uint64_t addr, uint64_t *plen,
                          bool is_write)
{
    uint64_t want = *plen;
    void *p;

    *plen = 0;
    if (!core->ops->dma_map || !pvrdma_core_dma_range_ok(core, addr, want)) {
        return NULL;
    }
    *plen = want;
    p = core->ops->dma_map(core->opaque, addr, plen, is_write);
    if (!p || *plen == 0 || *plen > want) {
        if (p) {
            pvrdma_core_dma_unmap(core, p, *plen, is_write, 0);
        }
        *plen = 0;
        return NULL;
    }
    return p;
}

void pvrdma_core_dma_unmap(PvrdmaCore *core, void *ptr, uint64_t len,
                           bool is_write, uint64_t access_len)
{
    if (ptr && core->ops->dma_unmap) {
        core->ops->dma_unmap(core->opaque, ptr, len, is_write, access_len);
    }
}

int64_t pvrdma_core_now_ns(PvrdmaCore *core)
{
    return core->ops->clock_ns ? core->ops->clock_ns(core->opaque) : 0;
}

bool pvrdma_core_has_timer(PvrdmaCore *core)
{
    return core->ops->timer_mod && core->ops->clock_ns;
}

void pvrdma_core_timer_mod(PvrdmaCore *core, int64_t expire_ns)
{
    if (pvrdma_core_has_timer(core)) {
        core->ops->timer_mod(core->opaque, expire_ns);
    }
}

void pvrdma_core_timer_expired(PvrdmaCore *core)
{
    pvrdma_wq_timer_expired(core);
}

void pvrdma_core_raise(PvrdmaCore *core, unsigned vector)
{
    uint32_t bit = 1u << vector;

    if (vector >= PVRDMA_NUM_VECTORS) {
        return;
    }
    if (core->imr & bit) {
        core->icr |= bit;
    } else {
        core->ops->notify(core->opaque, vector);
    }
}

int pvrdma_core_charge_pages(PvrdmaCore *core, uint64_t npages)
{
    if (npages > core->cfg.max_pinned_pages - core->pinned_pages) {
        GERR(core, PINNED_PAGES_QUOTA_EXCEEDED,
             "pinned-pages quota exceeded: %"
             G_GUINT64_FORMAT " + %" G_GUINT64_FORMAT
             " > %" G_GUINT64_FORMAT, core->pinned_pages,
             npages, core->cfg.max_pinned_pages);
        return -ENOMEM;
    }
    core->pinned_pages += npages;
    return 0;
}

void pvrdma_core_uncharge_pages(PvrdmaCore *core, uint64_t npages)
{
    g_assert(npages <= core->pinned_pages);
    core->pinned_pages -= npages;
}

/* ---- device rings -------------------------------------------------------- */

int pvrdma_core_ring_produce(PvrdmaCore *core, PvrdmaRing *ring,
                             const void *elem)
{
    uint32_t cons, prod;
    int ret;

    ret = pvrdma_core_dma_read(core, pvrdma_ring_cons_addr(ring), &cons,
                               sizeof(cons));
    if (ret < 0) {
        return ret;
    }
    cons = GUINT32_FROM_LE(cons);
    ret = pvrdma_ring_can_produce(ring->prod, cons, ring->n);
    if (ret < 0) {
        GERR(core, RING_INVALID_CONS_HEAD_N,
             "ring: invalid cons_head 0x%x (N=%u)",
             cons, ring->n);
        return -EINVAL;
    }
    if (ret == 0) {
        return -ENOSPC;
    }
    ret = pvrdma_core_dma_write(core,
                                pvrdma_ring_elem_addr(ring,
                                    pvrdma_ring_slot(ring->prod, ring->n)),
                                elem, ring->elem_size);
    if (ret < 0) {
        return ret;
    }
    /* Element before index: the DMA helpers complete in order. */
    prod = pvrdma_ring_next(ring->prod, ring->n);
    ring->prod = prod;
    prod = GUINT32_TO_LE(prod);
    return pvrdma_core_dma_write(core, pvrdma_ring_prod_addr(ring), &prod,
                                 sizeof(prod));
}

int pvrdma_core_post_async_event(PvrdmaCore *core, uint32_t type,
                                 uint32_t info)
{
    struct pvrdma_eqe eqe = {
        .type = GUINT32_TO_LE(type),
        .info = GUINT32_TO_LE(info),
    };
    int ret;

    if (!core->dsr_loaded) {
        return -ENODEV;
    }
    ret = pvrdma_core_ring_produce(core, &core->async_ring, &eqe);
    if (ret == -ENOSPC) {
        GERR(core, ASYNC_EVENT_RING_FULL_EVENT_INFO,
             "async event ring full: event %u "
             "info %u dropped", type, info);
    }
    if (ret < 0) {
        return ret;
    }
    pvrdma_core_raise(core, PVRDMA_VECTOR_ASYNC);
    return 0;
}

int pvrdma_core_notify_cq(PvrdmaCore *core, uint32_t cq_handle,
                          bool solicited)
{
    struct pvrdma_cqne cqne = { .info = GUINT32_TO_LE(cq_handle) };
    PvrdmaCq *cq;
    int ret;

    if (!core->dsr_loaded) {
        return -ENODEV;
    }
    cq = pvrdma_table_lookup(&core->cq_tbl, cq_handle);
    if (!cq) {
        return -EINVAL;
    }
    if (cq->arm == PVRDMA_CQ_ARM_NONE ||
        (cq->arm == PVRDMA_CQ_ARM_SOLICITED && !solicited)) {
        return 0;
    }
    cq->arm = PVRDMA_CQ_ARM_NONE;
    ret = pvrdma_core_ring_produce(core, &core->cqn_ring, &cqne);
    if (ret == -ENOSPC) {
        GERR(core, CQ_NOTIFICATION_RING_FULL,
             "CQ notification ring full: CQ %u "
             "notification dropped", cq_handle);
    }
    if (ret < 0) {
        return ret;
    }
    pvrdma_core_raise(core, PVRDMA_VECTOR_CQ);
    return 1;
}

/* ---- lifecycle ----------------------------------------------------------- */

/* Until the glue attaches one: no transport, every send fails. */
static const PvrdmaBackendOps pvrdma_null_backend_ops = {
    .name = "none",
};

static void pvrdma_core_init_tables(PvrdmaCore *core)
{
    const PvrdmaCoreConfig *cfg = &core->cfg;

    /* UC handles 1..max_uc: 0 means "kernel" in CREATE_PD/CREATE_CQ. */
    pvrdma_table_init(&core->uc_tbl, 1, cfg->max_uc + 1, cfg->max_uc);
    pvrdma_table_init(&core->pd_tbl, 0, cfg->max_pd, cfg->max_pd);
    pvrdma_table_init(&core->mr_tbl, 0, cfg->max_mr, cfg->max_mr);
    pvrdma_table_init(&core->cq_tbl, 0, cfg->max_cq, cfg->max_cq);
    /* QP handles 1..max_qp-1 (spec §5.6: never 0); 1 is the GSI QP's. */
    pvrdma_table_init(&core->qp_tbl, 1, cfg->max_qp, cfg->max_qp - 1);
    core->qp_tbl.insert_first = 2;
    core->qp_tbl.next_fit = true;
    pvrdma_table_init(&core->srq_tbl, 0, cfg->max_srq, cfg->max_srq);
    /* XRC domains (extension): handles 1.., as many as PDs. */
    pvrdma_table_init(&core->xrcd_tbl, 1, cfg->max_pd + 1, cfg->max_pd);
}

static void pvrdma_core_free_dsr_rings(PvrdmaCore *core)
{
    if (core->async_pages) {
        pvrdma_core_uncharge_pages(core, core->async_npages);
    }
    if (core->cqn_pages) {
        pvrdma_core_uncharge_pages(core, core->cqn_npages);
    }
    g_free(core->async_pages);
    g_free(core->cqn_pages);
    core->async_pages = NULL;
    core->cqn_pages = NULL;
    core->async_npages = 0;
    core->cqn_npages = 0;
    memset(&core->async_ring, 0, sizeof(core->async_ring));
    memset(&core->cqn_ring, 0, sizeof(core->cqn_ring));
}

/* Destroy every object, forget the DSR, stop DMA. */
static void pvrdma_core_drop_state(PvrdmaCore *core)
{
    pvrdma_cmd_destroy_all(core);
    pvrdma_fault_reset(core);
    pvrdma_wq_reset(core);
    if (core->be_ops->reset) {
        core->be_ops->reset(core->be);
    }
    pvrdma_core_free_dsr_rings(core);
    core->dsr_loaded = false;
    core->dma_enabled = false;
    core->driver_version = 0;
    core->uar_pfn = 0;
    core->cmd_slot = 0;
    core->resp_slot = 0;
    memset(&core->caps, 0, sizeof(core->caps));
}

PvrdmaCore *pvrdma_core_new(const PvrdmaCoreConfig *cfg,
                            const PvrdmaCoreOps *ops, void *opaque)
{
    PvrdmaCore *core = g_new0(PvrdmaCore, 1);

    core->cfg = *cfg;
    core->ops = ops;
    core->opaque = opaque;
    core->be_ops = &pvrdma_null_backend_ops;
    core->be = NULL;
    core->timer_expire = -1;
    pvrdma_fault_reset(core);
    core->uar_owner = g_new0(uint32_t, cfg->uar_pages);
    core->gids = g_new0(PvrdmaGid, cfg->gid_tbl_len);
    core->mcast = g_new0(PvrdmaMcast, cfg->mcast_groups);
    pvrdma_core_init_tables(core);
    pvrdma_core_reset(core);
    return core;
}

void pvrdma_core_free(PvrdmaCore *core)
{
    if (!core) {
        return;
    }
    pvrdma_core_drop_state(core);
    if (core->be_ops->free) {
        core->be_ops->free(core->be);
    }
    pvrdma_table_destroy(&core->uc_tbl);
    pvrdma_table_destroy(&core->pd_tbl);
    pvrdma_table_destroy(&core->mr_tbl);
    if (core->key_mrs) {
        g_hash_table_destroy(core->key_mrs);
    }
    pvrdma_table_destroy(&core->cq_tbl);
    pvrdma_table_destroy(&core->qp_tbl);
    pvrdma_table_destroy(&core->srq_tbl);
    pvrdma_table_destroy(&core->xrcd_tbl);
    g_free(core->uar_owner);
    g_free(core->gids);
    for (uint32_t i = 0; i < core->cfg.mcast_groups; i++) {
        g_free(core->mcast[i].qps);
    }
    g_free(core->mcast);
    g_free(core);
}

void pvrdma_core_set_backend(PvrdmaCore *core, const PvrdmaBackendOps *ops,
                             void *be)
{
    pvrdma_core_drop_state(core);
    if (core->be_ops->free) {
        core->be_ops->free(core->be);
    }
    core->be_ops = ops;
    core->be = be;
}

void pvrdma_core_reset(PvrdmaCore *core)
{
    pvrdma_core_drop_state(core);
    core->dsr_low = 0;
    core->dsr_high = 0;
    core->err = PVRDMA_ERR_RESET_VALUE;
    core->icr = 0;
    core->imr = PVRDMA_IMR_RESET_VALUE;
    core->mac_low = 0;
    core->mac_high = 0;
}

void pvrdma_core_set_uar_base(PvrdmaCore *core, uint64_t bus_addr)
{
    core->uar_base_known = bus_addr != PVRDMA_CORE_UAR_UNMAPPED;
    core->uar_base = core->uar_base_known ? bus_addr : 0;
}

void pvrdma_core_objects(PvrdmaCore *core, PvrdmaCoreObjects *o)
{
    o->uc = core->uc_tbl.count;
    o->pd = core->pd_tbl.count;
    o->mr = core->mr_tbl.count;
    o->cq = core->cq_tbl.count;
    o->qp = core->qp_tbl.count;
    o->srq = core->srq_tbl.count;
    o->pinned_pages = core->pinned_pages;
}

/* ---- what backends may ask ---------------------------------------------- */

bool pvrdma_core_has_gid(PvrdmaCore *core, const uint8_t gid[16])
{
    uint32_t i;

    if (!core->dsr_loaded) {
        return false;
    }
    for (i = 0; i < core->cfg.gid_tbl_len; i++) {
        if (core->gids[i].bound && !memcmp(core->gids[i].gid, gid, 16)) {
            return true;
        }
    }
    return false;
}

const uint8_t *pvrdma_core_sgid(PvrdmaCore *core, uint32_t index,
                                uint8_t *type)
{
    if (index >= core->cfg.gid_tbl_len || !core->gids[index].bound) {
        return NULL;
    }
    *type = core->gids[index].type;
    return core->gids[index].gid;
}

PvrdmaQp *pvrdma_core_qp_by_qpn(PvrdmaCore *core, uint32_t qpn,
                                uint32_t handle_mask)
{
    PvrdmaQp *qp = pvrdma_table_lookup(&core->qp_tbl, qpn & handle_mask);

    return qp && qp->qpn == qpn ? qp : NULL;
}

uint32_t pvrdma_core_driver_version(PvrdmaCore *core)
{
    return core->driver_version;
}

/* ---- DSR ----------------------------------------------------------------- */

void pvrdma_core_fill_caps(PvrdmaCore *core, struct pvrdma_device_caps *c)
{
    const PvrdmaCoreConfig *cfg = &core->cfg;

    memset(c, 0, sizeof(*c));
    c->fw_ver = cfg->fw_ver;
    /*
     * GUIDs travel as big-endian bytes in a field the ABI calls LE u64:
     * the host value whose little-endian bytes are the GUID's BE bytes.
     */
    c->node_guid = GUINT64_SWAP_LE_BE(cfg->node_guid);
    c->sys_image_guid = c->node_guid;
    c->max_mr_size = cfg->max_mr_size;
    c->page_size_cap = PVRDMA_PAGE_SIZE;
    /* What ESXi guests report as vendor_id (the PCI vendor, not an OUI). */
    c->vendor_id = PVRDMA_CAP_VENDOR_ID;
    c->vendor_part_id = PVRDMA_PCI_DEVICE_ID;
    c->hw_ver = PVRDMA_CAP_HW_VER;
    c->ex_comp_mask = PVRDMA_EX_CAP_RESIZE_CQ | PVRDMA_EX_CAP_UC |
                      (!core->be_ops->mw_offered ||
                       core->be_ops->mw_offered(core->be) ?
                       PVRDMA_EX_CAP_MW : 0) |
                      (core->ops->clock_ns ? PVRDMA_EX_CAP_CQE_TIMESTAMP |
                       PVRDMA_EX_CAP_CLOCK : 0) |
                      (cfg->cq_poll_hint ? PVRDMA_EX_CAP_CQ_POLL_HINT : 0) |
                      (core->be_ops->rq_read_on_arrival &&
                       !cfg->no_rq_db_hint ? PVRDMA_EX_CAP_RQ_DB_HINT : 0) |
                      (core->be_ops->sq_read_on_answer &&
                       !cfg->no_sq_db_hint ? PVRDMA_EX_CAP_SQ_DB_HINT : 0) |
                      /* MR access and PD are then the core's alone. */
                      (!core->be_ops->mr_register ? PVRDMA_EX_CAP_MODIFY_MR :
                       0) |
                      /* SRQ rings are then the core's alone. */
                      (!core->be_ops->srq_create ? PVRDMA_EX_CAP_RESIZE_SRQ :
                       0) |
                      (core->be_ops->atomic_write ?
                       PVRDMA_EX_CAP_ATOMIC_WRITE : 0) |
                      (core->be_ops->mcast && cfg->mcast_groups ?
                       PVRDMA_EX_CAP_MCAST : 0) |
                      /* Not in device_cap_flags: a stock driver has none. */
                      (core->be_ops->xrc && cfg->max_srq ?
                       PVRDMA_EX_CAP_XRC : 0) |
                      PVRDMA_EX_CAP_COUNTERS;
    c->max_qp = cfg->max_qp;
    c->max_qp_wr = cfg->max_qp_wr;
    /* Only what the core and the coming data path honour. */
    c->device_cap_flags = PVRDMA_IB_DEVICE_CURR_QP_STATE_MOD |
                          PVRDMA_IB_DEVICE_PORT_ACTIVE_EVENT |
                          PVRDMA_IB_DEVICE_SYS_IMAGE_GUID |
                          PVRDMA_IB_DEVICE_RC_RNR_NAK_GEN;
    c->max_sge = cfg->max_sge;
    c->max_sge_rd = cfg->max_sge;
    c->max_cq = cfg->max_cq;
    c->max_cqe = cfg->max_cqe;
    c->max_mr = cfg->max_mr;
    c->max_pd = cfg->max_pd;
    c->max_qp_rd_atom = PVRDMA_CAP_MAX_RD_ATOM;
    c->max_qp_init_rd_atom = PVRDMA_CAP_MAX_RD_ATOM;
    c->max_res_rd_atom = cfg->max_qp * PVRDMA_CAP_MAX_RD_ATOM;
    c->max_ah = cfg->max_ah;
    if (c->ex_comp_mask & PVRDMA_EX_CAP_MCAST) {
        c->max_mcast_grp = cfg->mcast_groups;
        c->max_mcast_qp_attach = cfg->mcast_qps;
        c->max_total_mcast_qp_attach = cfg->mcast_groups * cfg->mcast_qps;
    }
    c->max_srq = cfg->max_srq;
    c->max_srq_wr = cfg->max_srq_wr;
    c->max_srq_sge = cfg->max_srq_sge;
    c->max_uar = cfg->uar_pages;
    c->gid_tbl_len = cfg->gid_tbl_len;
    c->max_pkeys = 1;
    c->local_ca_ack_delay = PVRDMA_CAP_LOCAL_CA_ACK_DELAY;
    c->phys_port_cnt = 1;
    c->mode = PVRDMA_DEVICE_MODE_ROCE;
    c->atomic_ops = PVRDMA_ATOMIC_OP_COMP_SWAP | PVRDMA_ATOMIC_OP_FETCH_ADD;
    c->bmme_flags = PVRDMA_BMME_FLAG_LOCAL_INV | PVRDMA_BMME_FLAG_REMOTE_INV |
                    PVRDMA_BMME_FLAG_FAST_REG_WR;
    c->gid_types = PVRDMA_CAP_GID_TYPE;
    c->max_fast_reg_page_list_len = PVRDMA_MAX_FAST_REG_PAGES;
}

static bool pvrdma_page_addr_ok(uint64_t addr)
{
    return addr != 0 && (addr & (PVRDMA_PAGE_SIZE - 1)) == 0;
}

/*
 * One DSR ring (spec §3, §6.2): page 0 ring state ("rx" at +8), elements
 * from page 1, N = (num_pages - 1) * 4096 / elem_size.  Only page table 0
 * is read, which is why num_pages is capped at PVRDMA_DSR_RING_MAX_PAGES.
 */
static int pvrdma_core_setup_dsr_ring(PvrdmaCore *core, const char *name,
                                      const struct pvrdma_ring_page_info *pi,
                                      uint32_t elem_size, uint64_t **pages,
                                      uint32_t *npages, PvrdmaRing *ring)
{
    uint32_t num_pages = GUINT32_FROM_LE(pi->num_pages);
    uint64_t pdir = GUINT64_FROM_LE(pi->pdir_dma);
    uint32_t n;
    int ret;

    if (pi->reserved != 0) {
        GERR(core, DSR_RING_RESERVED_FIELD_NOT_ZERO,
             "DSR %s ring: reserved field not zero",
             name);
        return -EINVAL;
    }
    if (num_pages < PVRDMA_DSR_RING_MIN_PAGES ||
        num_pages > PVRDMA_DSR_RING_MAX_PAGES) {
        GERR(core, DSR_RING_NUM_PAGES_OUT_RANGE,
             "DSR %s ring: num_pages %u out of "
             "range %u..%u", name, num_pages,
             PVRDMA_DSR_RING_MIN_PAGES,
             PVRDMA_DSR_RING_MAX_PAGES);
        return -EINVAL;
    }
    ret = pvrdma_core_charge_pages(core, num_pages);
    if (ret < 0) {
        return ret;
    }
    ret = pvrdma_pdir_read(core, pdir, num_pages, pages);
    if (ret < 0) {
        pvrdma_core_uncharge_pages(core, num_pages);
        return ret;
    }
    *npages = num_pages;
    n = (num_pages - 1) * PVRDMA_PAGE_SIZE / elem_size;
    if (!pvrdma_ring_init(ring, *pages, num_pages, 1, num_pages - 1, n,
                          elem_size, PVRDMA_RING_STATE_RX_OFFSET)) {
        /* Cannot happen with the bounds above; fail safe anyway. */
        return -EINVAL;
    }
    return 0;
}

static int pvrdma_core_load_dsr(PvrdmaCore *core)
{
    struct pvrdma_device_shared_region dsr;
    struct pvrdma_device_caps caps;
    struct pvrdma_ring_page_info ring_info;
    uint64_t addr = ((uint64_t)core->dsr_high << 32) | core->dsr_low;
    int ret;

    if (!pvrdma_page_addr_ok(addr)) {
        GERR(core, DSR_ADDRESS_ZERO_NOT_PAGE_ALIGNED,
             "DSR address 0x%" G_GINT64_MODIFIER
             "x is zero or not page aligned", addr);
        return -EINVAL;
    }
    core->dma_enabled = true;
    ret = pvrdma_core_dma_read(core, addr, &dsr, sizeof(dsr));
    if (ret < 0) {
        GERR(core, DSR_UNREADABLE,
             "DSR at 0x%" G_GINT64_MODIFIER
             "x unreadable", addr);
        return ret;
    }
    core->driver_version = GUINT32_FROM_LE(dsr.driver_version);
    core->cmd_slot = GUINT64_FROM_LE(dsr.cmd_slot_dma);
    core->resp_slot = GUINT64_FROM_LE(dsr.resp_slot_dma);
    if (dsr.pad != 0 || dsr.gos_info.pad != 0) {
        GERR(core, DSR_RESERVED_FIELD_NOT_ZERO,
             "DSR: reserved field not zero");
        return -EINVAL;
    }
    if (!pvrdma_page_addr_ok(core->cmd_slot) ||
        !pvrdma_page_addr_ok(core->resp_slot)) {
        GERR(core, DSR_COMMAND_RESPONSE_SLOT_ADDRESS_ZERO,
             "DSR: command/response slot address "
             "zero or not page aligned");
        return -EINVAL;
    }
    /* The PFN is 32 bits wide before interface version 19 (spec §5.5). */
    core->uar_pfn = core->driver_version >= PVRDMA_VERSION_PPN64 ?
                    GUINT64_FROM_LE(dsr.uar_pfn64) :
                    GUINT32_FROM_LE(dsr.uar_pfn);
    if (core->uar_base_known &&
        core->uar_pfn != core->uar_base >> PVRDMA_PAGE_SHIFT) {
        GERR(core, DSR_UAR_PFN_NOT_BAR2,
             "DSR: uar_pfn 0x%" G_GINT64_MODIFIER
             "x is not BAR2; using BAR2", core->uar_pfn);
    }
    ring_info = dsr.async_ring_pages;
    ret = pvrdma_core_setup_dsr_ring(core, "async", &ring_info,
                                     PVRDMA_EQE_SIZE, &core->async_pages,
                                     &core->async_npages, &core->async_ring);
    if (ret < 0) {
        return ret;
    }
    ring_info = dsr.cq_ring_pages;
    ret = pvrdma_core_setup_dsr_ring(core, "CQ notification",
                                     &ring_info, PVRDMA_CQNE_SIZE,
                                     &core->cqn_pages, &core->cqn_npages,
                                     &core->cqn_ring);
    if (ret < 0) {
        return ret;
    }
    pvrdma_core_fill_caps(core, &core->caps);
    caps = core->caps;
    pvrdma_device_caps_le(&caps);
    ret = pvrdma_core_dma_write(core, addr + PVRDMA_DSR_CAPS_OFFSET,
                                &caps, sizeof(caps));
    if (ret < 0) {
        GERR(core, DSR_CANNOT_WRITE_CAPS,
             "DSR: cannot write caps");
        return ret;
    }
    core->dsr_loaded = true;
    pvrdma_fault_start(core);
    return 0;
}

/* ---- command channel ----------------------------------------------------- */

static void pvrdma_core_request(PvrdmaCore *core, uint32_t val)
{
    union pvrdma_cmd_req req;
    union pvrdma_cmd_resp resp;
    uint32_t resp_len = 0;
    PvrdmaFaultCmd fault;
    int ret;

    if (val != 0) {
        GERR(core, REQUEST_WRITTEN_NOT_0,
             "REQUEST written with 0x%x, not 0",
             val);
        core->err = (uint32_t)-EINVAL;
        goto out;
    }
    if (!core->dsr_loaded) {
        /* CVE-2022-1050: no slots to read from without a DSR. */
        GERR(core, REQUEST_WITHOUT_LOADED_DSR,
             "REQUEST without a loaded DSR");
        core->err = (uint32_t)-EINVAL;
        goto out;
    }
    ret = pvrdma_core_dma_read(core, core->cmd_slot, &req, sizeof(req));
    if (ret < 0) {
        GERR(core, COMMAND_SLOT_UNREADABLE,
             "command slot unreadable");
        core->err = (uint32_t)ret;
        goto out;
    }
    pvrdma_cmd_req_le(&req, true);
    memset(&resp, 0, sizeof(resp));
    pvrdma_fault_drop_held(core);
    fault = pvrdma_fault_cmd(core, req.hdr.cmd, &ret);
    if (fault == PVRDMA_FAULT_FAIL) {
        ret = pvrdma_cmd_refuse(core, &req, &resp, &resp_len, ret);
    } else {
        ret = pvrdma_cmd_execute(core, &req, &resp, &resp_len);
    }
    if (resp_len) {
        union pvrdma_cmd_resp wire = resp;
        int wret;

        pvrdma_cmd_resp_le(&wire, req.hdr.cmd, resp_len);
        if (fault == PVRDMA_FAULT_LATE) {
            /* Done, ERR says so; the answer comes late (pvrdma_fault.c). */
            pvrdma_fault_hold(core, &wire, resp_len);
            goto done;
        }
        wret = pvrdma_core_dma_write(core, core->resp_slot, &wire, resp_len);
        if (wret < 0) {
            GERR(core, RESPONSE_SLOT_UNWRITABLE,
                 "response slot unwritable");
            if (ret == 0) {
                pvrdma_cmd_rollback(core, &req, &resp);
            }
            ret = wret;
        }
    }
done:
    core->err = (uint32_t)ret;
    if (core->ops->trace_cmd) {
        core->ops->trace_cmd(core->opaque, req.hdr.cmd, ret);
    }
    if (fault == PVRDMA_FAULT_LATE && resp_len) {
        return;
    }
out:
    pvrdma_core_raise(core, PVRDMA_VECTOR_RESPONSE);
}

/* ---- registers ----------------------------------------------------------- */

static void pvrdma_core_ctl(PvrdmaCore *core, uint32_t val)
{
    switch (val) {
    case PVRDMA_DEVICE_CTL_ACTIVATE:
        if (!core->dsr_loaded) {
            GERR(core, ACTIVATE_WITHOUT_LOADED_DSR,
                 "ACTIVATE without a loaded DSR");
            core->err = (uint32_t)-EINVAL;
        } else {
            core->err = 0;
        }
        break;
    case PVRDMA_DEVICE_CTL_UNQUIESCE:
        core->err = 0;
        break;
    case PVRDMA_DEVICE_CTL_RESET:
        pvrdma_core_drop_state(core);
        core->icr = 0;
        core->err = 0;
        break;
    default:
        GERR(core, CTL_UNKNOWN_CODE,
             "CTL: unknown code %u", val);
        core->err = (uint32_t)-EINVAL;
        break;
    }
}

static void pvrdma_core_write_imr(PvrdmaCore *core, uint32_t val)
{
    uint32_t deliver;
    unsigned v;

    core->imr = val;
    deliver = core->icr & ~val & PVRDMA_VECTOR_MASK;
    core->icr &= ~deliver;
    for (v = 0; v < PVRDMA_NUM_VECTORS; v++) {
        if (deliver & (1u << v)) {
            core->ops->notify(core->opaque, v);
        }
    }
}

uint32_t pvrdma_core_reg_read(PvrdmaCore *core, uint64_t offset)
{
    uint32_t val;

    if (offset >= PVRDMA_REG_BAR_SIZE || (offset & 3)) {
        GERR(core, REGISTER_READ_BAD_OFFSET,
             "register read at bad offset 0x%"
             G_GINT64_MODIFIER "x", offset);
        return 0;
    }
    switch (offset) {
    case PVRDMA_REG_VERSION:
        return PVRDMA_VERSION;
    case PVRDMA_REG_DSRLOW:
        return core->dsr_low;
    case PVRDMA_REG_DSRHIGH:
        return core->dsr_high;
    case PVRDMA_REG_CTL:
    case PVRDMA_REG_REQUEST:
        return 0;
    case PVRDMA_REG_ERR:
        return core->err;
    case PVRDMA_REG_ICR:
        val = core->icr;
        core->icr = 0;
        return val;
    case PVRDMA_REG_IMR:
        return core->imr;
    case PVRDMA_REG_MACL:
        return core->mac_low;
    case PVRDMA_REG_MACH:
        return core->mac_high;
    default:
        GERR(core, READ_UNDEFINED_REGISTER,
             "read of undefined register 0x%"
             G_GINT64_MODIFIER "x", offset);
        return 0;
    }
}

void pvrdma_core_reg_write(PvrdmaCore *core, uint64_t offset, uint32_t val)
{
    if (offset >= PVRDMA_REG_BAR_SIZE || (offset & 3)) {
        GERR(core, REGISTER_WRITE_BAD_OFFSET,
             "register write at bad offset 0x%"
             G_GINT64_MODIFIER "x", offset);
        return;
    }
    switch (offset) {
    case PVRDMA_REG_DSRLOW:
        core->dsr_low = val;
        break;
    case PVRDMA_REG_DSRHIGH: {
        int ret;

        core->dsr_high = val;
        pvrdma_core_drop_state(core);
        ret = pvrdma_core_load_dsr(core);
        if (ret < 0) {
            pvrdma_core_drop_state(core);
            core->err = (uint32_t)ret;
        } else {
            core->err = 0;
        }
        break;
    }
    case PVRDMA_REG_CTL:
        pvrdma_core_ctl(core, val);
        break;
    case PVRDMA_REG_REQUEST:
        pvrdma_core_request(core, val);
        break;
    case PVRDMA_REG_IMR:
        pvrdma_core_write_imr(core, val);
        break;
    case PVRDMA_REG_MACL:
        core->mac_low = val;
        break;
    case PVRDMA_REG_MACH:
        core->mac_high = val;
        break;
    case PVRDMA_REG_VERSION:
    case PVRDMA_REG_ERR:
    case PVRDMA_REG_ICR:
        GERR(core, WRITE_READ_ONLY_REGISTER,
             "write 0x%x to read-only register 0x%"
             G_GINT64_MODIFIER "x", val, offset);
        break;
    default:
        GERR(core, WRITE_UNDEFINED_REGISTER,
             "write 0x%x to undefined register 0x%"
             G_GINT64_MODIFIER "x", val, offset);
        break;
    }
}

/* ---- doorbells (spec §7) ---------------------------------------------- */

static void pvrdma_core_trace_doorbell(PvrdmaCore *core, uint64_t offset,
                                       uint32_t val)
{
    if (core->ops->trace_doorbell) {
        core->ops->trace_doorbell(core->opaque, offset, val);
    }
}

/*
 * Doorbell pages hold nothing to read (CVE-2018-20191 was a read handler
 * that followed a NULL pointer): 0, but for the clock of
 * PVRDMA_EX_CAP_CLOCK at its two offsets of every page. No state and no
 * lock: the clock is the host's.
 */
uint32_t pvrdma_core_uar_read(PvrdmaCore *core, uint64_t offset)
{
    uint64_t now;

    if (!(core->caps.ex_comp_mask & PVRDMA_EX_CAP_CLOCK)) {
        return 0;
    }
    switch (offset & (PVRDMA_UAR_PAGE_SIZE - 1)) {
    case PVRDMA_UAR_CLOCK_LO_OFFSET:
        now = pvrdma_core_now_ns(core);
        return (uint32_t)now;
    case PVRDMA_UAR_CLOCK_HI_OFFSET:
        now = pvrdma_core_now_ns(core);
        return (uint32_t)(now >> 32);
    default:
        return 0;
    }
}

bool pvrdma_core_doorbell_arms_cq(uint64_t offset, uint32_t val)
{
    return (offset & (PVRDMA_PAGE_SIZE - 1)) == PVRDMA_UAR_CQ_OFFSET &&
           (val & (PVRDMA_DB_CQ_ARM | PVRDMA_DB_CQ_ARM_SOL));
}

void pvrdma_core_uar_write(PvrdmaCore *core, uint64_t offset, uint32_t val)
{
    uint64_t page = offset >> PVRDMA_PAGE_SHIFT;
    uint32_t off = offset & (PVRDMA_PAGE_SIZE - 1);
    uint32_t handle = val & PVRDMA_DB_HANDLE_MASK;
    uint32_t flags = val & ~PVRDMA_DB_HANDLE_MASK;
    uint32_t ctx;

    if (!core->dsr_loaded) {
        GERR(core, DOORBELL_WITHOUT_LOADED_DSR,
             "doorbell 0x%x at 0x%" G_GINT64_MODIFIER
             "x without a loaded DSR", val, offset);
        return;
    }
    if (page >= core->cfg.uar_pages || (off & 3)) {
        GERR(core, DOORBELL_BAD_OFFSET,
             "doorbell at bad offset 0x%"
             G_GINT64_MODIFIER "x", offset);
        return;
    }
    /* Page 0 is the kernel's (ctx 0); others belong to at most one UC. */
    ctx = page == 0 ? 0 : core->uar_owner[page];
    if (page != 0 && ctx == 0) {
        GERR(core, DOORBELL_UNOWNED_UAR_PAGE,
             "doorbell on unowned UAR page %u",
             (unsigned)page);
        return;
    }

    switch (off) {
    case PVRDMA_UAR_QP_OFFSET: {
        PvrdmaQp *qp = pvrdma_table_lookup(&core->qp_tbl, handle);
        uint32_t ok = PVRDMA_DB_QP_SEND | PVRDMA_DB_QP_RECV;

        if (!qp || qp->ctx_handle != ctx || !flags || (flags & ~ok) ||
            ((flags & PVRDMA_DB_QP_RECV) && !pvrdma_qp_has_rq(qp)) ||
            ((flags & PVRDMA_DB_QP_SEND) && !pvrdma_qp_has_sq(qp))) {
            GERR(core, BAD_QP_DOORBELL_UAR_PAGE,
                 "bad QP doorbell 0x%x on UAR page "
                 "%u", val, (unsigned)page);
            return;
        }
        pvrdma_core_trace_doorbell(core, offset, val);
        if (flags & PVRDMA_DB_QP_SEND) {
            pvrdma_wq_post_send(core, qp);
        }
        if (flags & PVRDMA_DB_QP_RECV) {
            pvrdma_wq_post_recv(core, qp);
        }
        break;
    }
    case PVRDMA_UAR_CQ_OFFSET: {
        PvrdmaCq *cq = pvrdma_table_lookup(&core->cq_tbl, handle);
        uint32_t ok = PVRDMA_DB_CQ_ARM_SOL | PVRDMA_DB_CQ_ARM |
                      PVRDMA_DB_CQ_POLL;

        if (!cq || cq->ctx_handle != ctx || !flags || (flags & ~ok)) {
            GERR(core, BAD_CQ_DOORBELL_UAR_PAGE,
                 "bad CQ doorbell 0x%x on UAR page "
                 "%u", val, (unsigned)page);
            return;
        }
        pvrdma_core_trace_doorbell(core, offset, val);
        /* Flush first, so completions already made don't use the arm. */
        if (flags & PVRDMA_DB_CQ_POLL) {
            pvrdma_wq_cq_poll(core, cq, cq->arm != PVRDMA_CQ_ARM_NONE ||
                                        (flags & (PVRDMA_DB_CQ_ARM |
                                                  PVRDMA_DB_CQ_ARM_SOL)));
        }
        if (flags & (PVRDMA_DB_CQ_ARM | PVRDMA_DB_CQ_ARM_SOL)) {
            pvrdma_wq_cq_poll_end(core, cq);
        }
        if (flags & PVRDMA_DB_CQ_ARM) {
            cq->arm = PVRDMA_CQ_ARM_NEXT;
        } else if ((flags & PVRDMA_DB_CQ_ARM_SOL) &&
                   cq->arm != PVRDMA_CQ_ARM_NEXT) {
            cq->arm = PVRDMA_CQ_ARM_SOLICITED;
        }
        break;
    }
    case PVRDMA_UAR_SRQ_OFFSET: {
        PvrdmaSrq *srq = pvrdma_table_lookup(&core->srq_tbl, handle);

        if (!srq || srq->ctx_handle != ctx ||
            flags != PVRDMA_DB_SRQ_RECV) {
            GERR(core, BAD_SRQ_DOORBELL_UAR_PAGE,
                 "bad SRQ doorbell 0x%x on UAR page "
                 "%u", val, (unsigned)page);
            return;
        }
        pvrdma_core_trace_doorbell(core, offset, val);
        pvrdma_wq_srq_post_recv(core, srq);
        break;
    }
    default:
        GERR(core, DOORBELL_UNDEFINED_OFFSET,
             "doorbell at undefined offset 0x%x",
             off);
        break;
    }
}
