/*
 * PVRDMA device state for migration and snapshots (docs/migration.md):
 * the core's guest-visible state as a versioned byte string, and back.
 *
 * Saving writes records in dependency order (the configuration, the
 * registers and DSR, GIDs, then UCs, PDs, CQs, SRQs, MRs, QPs, window
 * bindings, the key generations of free MR handles).  Loading treats
 * the string as hostile input: every object is re-created through the
 * command handlers guests use (pvrdma_cmd.c), so the same checks and
 * quotas apply, with the handle, key generation and
 * page list taken from the record instead of the lowest free handle and
 * a page directory; what the command path does not set (ring positions,
 * QP state and attributes, bindings) is checked here.  A record that
 * fails leaves the core reset, and the caller's migration fails with the
 * message.  Nothing runs on the data path until pvrdma_core_state_resume()
 * (the guest runs again): the source had stopped its guest, so posted
 * work waits exactly as it waited there.
 *
 * Format (little-endian): "PVRDMAS1", u32 version, u32 0; then records
 * of u16 type, u16 0, u32 length and the body, in non-decreasing type
 * order, ending with an END record.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pvrdma_abi_le.h"
#include "pvrdma_core_int.h"

#define ST_MAGIC            "PVRDMAS1"
/*
 * 2: lives (QP partner, MOVE); 3: x-sq-db-hint in the configuration;
 * 4: the port's counters; 5: multicast groups, and their limits in the
 * configuration; 6: XRC domains (records renumbered), XRC SRQs and QPs
 */
#define ST_VERSION          6

enum {
    ST_CONFIG = 1,
    ST_DEVICE = 2,
    ST_GID = 3,                 /* before QPs: their AVs name GID indexes */
    ST_UC = 4,
    ST_PD = 5,
    ST_XRCD = 6,                /* before SRQs and QPs, which name them */
    ST_CQ = 7,
    ST_SRQ = 8,
    ST_MR = 9,
    ST_QP = 10,
    ST_MW = 11,
    ST_MR_GEN = 12,
    ST_MOVE = 13,               /* the backend's token for peers */
    ST_COUNTERS = 14,           /* the port's (PVRDMA_EX_CAP_COUNTERS) */
    ST_MCAST = 15,              /* a QP in a group, in attach order */
    ST_END = 0xffff,
};

/* The properties a destination must share, by name (-device pvrdma). */
static const struct {
    const char *prop;
    size_t off;
    uint8_t size;
} st_config[] = {
#define ST_CFG(p, f) { p, offsetof(PvrdmaCoreConfig, f), \
                       sizeof(((PvrdmaCoreConfig *)0)->f) }
    ST_CFG("max-qp", max_qp),
    ST_CFG("max-qp-wr", max_qp_wr),
    ST_CFG("max-sge", max_sge),
    ST_CFG("max-cq", max_cq),
    ST_CFG("max-cqe", max_cqe),
    ST_CFG("max-mr", max_mr),
    ST_CFG("max-pd", max_pd),
    ST_CFG("max-srq", max_srq),
    ST_CFG("max-srq-wr", max_srq_wr),
    ST_CFG("max-srq-sge", max_srq_sge),
    ST_CFG("max-ah", max_ah),
    ST_CFG("max-uc", max_uc),
    ST_CFG("uar-pages", uar_pages),
    ST_CFG("gid-tbl-len", gid_tbl_len),
    ST_CFG("max-mr-size", max_mr_size),
    ST_CFG("max-pinned-pages", max_pinned_pages),
    ST_CFG("mcast-groups", mcast_groups),
    ST_CFG("mcast-qps", mcast_qps),
    ST_CFG("node-guid", node_guid),
    ST_CFG("fw_ver (the device model's version)", fw_ver),
    ST_CFG("fabric-path/-listen/-peer (a fabric or none)", cq_poll_hint),
    ST_CFG("x-rq-db-hint", no_rq_db_hint),
    ST_CFG("x-sq-db-hint", no_sq_db_hint),
#undef ST_CFG
};

static uint64_t st_cfg_get(const PvrdmaCoreConfig *cfg, unsigned i)
{
    const uint8_t *p = (const uint8_t *)cfg + st_config[i].off;
    uint32_t v32;
    uint64_t v64;

    switch (st_config[i].size) {
    case 1:
        return *(const bool *)p;
    case 4:
        memcpy(&v32, p, 4);
        return v32;
    default:
        memcpy(&v64, p, 8);
        return v64;
    }
}

/* ---- writing ------------------------------------------------------------- */

static void put8(GByteArray *b, uint8_t v)
{
    g_byte_array_append(b, &v, 1);
}

static void put16(GByteArray *b, uint16_t v)
{
    v = GUINT16_TO_LE(v);
    g_byte_array_append(b, (const guint8 *)&v, 2);
}

static void put32(GByteArray *b, uint32_t v)
{
    v = GUINT32_TO_LE(v);
    g_byte_array_append(b, (const guint8 *)&v, 4);
}

static void put64(GByteArray *b, uint64_t v)
{
    v = GUINT64_TO_LE(v);
    g_byte_array_append(b, (const guint8 *)&v, 8);
}

static void put_pages(GByteArray *b, const uint64_t *pages, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        put64(b, pages[i]);
    }
}

/* A record's header; its length is filled in by st_end(). */
static guint st_begin(GByteArray *b, uint16_t type)
{
    put16(b, type);
    put16(b, 0);
    put32(b, 0);
    return b->len;
}

static void st_end(GByteArray *b, guint at)
{
    uint32_t len = GUINT32_TO_LE(b->len - at);

    memcpy(b->data + at - 4, &len, 4);
}

/* struct pvrdma_qp_attr as MODIFY_QP carries it (the ABI's converters). */
static void put_qp_attr(GByteArray *b, const struct pvrdma_qp_attr *a)
{
    union pvrdma_cmd_req req;

    memset(&req, 0, sizeof(req));
    req.hdr.cmd = PVRDMA_CMD_MODIFY_QP;
    req.modify_qp.attrs = *a;
    pvrdma_cmd_req_le(&req, false);
    g_byte_array_append(b, (const guint8 *)&req.modify_qp.attrs,
                        sizeof(req.modify_qp.attrs));
}

static void st_save_device(PvrdmaCore *core, GByteArray *b)
{
    struct pvrdma_device_caps caps = core->caps;
    guint at = st_begin(b, ST_DEVICE);

    put32(b, core->dsr_low);
    put32(b, core->dsr_high);
    put32(b, core->err);
    put32(b, core->icr);
    put32(b, core->imr);
    put32(b, core->mac_low);
    put32(b, core->mac_high);
    put8(b, core->dsr_loaded);
    put8(b, core->dma_enabled);
    if (core->dsr_loaded) {
        put32(b, core->driver_version);
        put64(b, core->uar_pfn);
        put64(b, core->cmd_slot);
        put64(b, core->resp_slot);
        put32(b, core->async_npages);
        put32(b, core->async_ring.prod);
        put_pages(b, core->async_pages, core->async_npages);
        put32(b, core->cqn_npages);
        put32(b, core->cqn_ring.prod);
        put_pages(b, core->cqn_pages, core->cqn_npages);
        pvrdma_device_caps_le(&caps);
        g_byte_array_append(b, (const guint8 *)&caps, sizeof(caps));
    }
    st_end(b, at);
}

static void st_save_objects(PvrdmaCore *core, GByteArray *b)
{
    uint32_t h;
    guint at;
    void *o;

    for (h = 0; h < core->cfg.gid_tbl_len; h++) {
        if (!core->gids[h].bound) {
            continue;
        }
        at = st_begin(b, ST_GID);
        put32(b, h);
        put8(b, core->gids[h].type);
        g_byte_array_append(b, core->gids[h].gid, 16);
        st_end(b, at);
    }
    PVRDMA_TABLE_FOREACH(&core->uc_tbl, h, o) {
        PvrdmaUc *uc = o;

        at = st_begin(b, ST_UC);
        put32(b, uc->handle);
        put32(b, uc->uar_index);
        st_end(b, at);
    }
    PVRDMA_TABLE_FOREACH(&core->pd_tbl, h, o) {
        PvrdmaPd *pd = o;

        at = st_begin(b, ST_PD);
        put32(b, pd->handle);
        put32(b, pd->ctx_handle);
        st_end(b, at);
    }
    PVRDMA_TABLE_FOREACH(&core->xrcd_tbl, h, o) {
        at = st_begin(b, ST_XRCD);
        put32(b, ((PvrdmaXrcd *)o)->handle);
        st_end(b, at);
    }
    PVRDMA_TABLE_FOREACH(&core->cq_tbl, h, o) {
        PvrdmaCq *cq = o;

        at = st_begin(b, ST_CQ);
        put32(b, cq->handle);
        put32(b, cq->ctx_handle);
        put32(b, cq->cqe);
        put8(b, cq->timestamps);
        put8(b, cq->arm);
        put8(b, cq->overrun);
        put32(b, cq->ring.prod);
        put32(b, cq->npages);
        put_pages(b, cq->pages, cq->npages);
        st_end(b, at);
    }
    PVRDMA_TABLE_FOREACH(&core->srq_tbl, h, o) {
        PvrdmaSrq *srq = o;

        at = st_begin(b, ST_SRQ);
        put32(b, srq->handle);
        put32(b, srq->pd_handle);
        put32(b, srq->max_wr);
        put32(b, srq->max_sge);
        put32(b, srq->srq_limit);
        put8(b, srq->limit_armed);
        put8(b, srq->failed);
        put32(b, srq->cons);
        put32(b, srq->npages);
        put_pages(b, srq->pages, srq->npages);
        put8(b, srq->xrc);
        put32(b, srq->xrcd_handle);
        put32(b, srq->cq_handle);
        st_end(b, at);
    }
    PVRDMA_TABLE_FOREACH(&core->mr_tbl, h, o) {
        PvrdmaMr *mr = o;

        at = st_begin(b, ST_MR);
        put32(b, mr->handle);
        put8(b, pvrdma_table_gen(&core->mr_tbl, mr->handle));
        put32(b, mr->lkey);
        put32(b, mr->rkey);
        put32(b, mr->pd_handle);
        put32(b, mr->flags);
        put32(b, mr->access);
        put64(b, mr->start);
        put64(b, mr->length);
        put32(b, mr->max_sg);
        put32(b, mr->npages);
        put_pages(b, mr->pages, mr->npages);
        put8(b, mr->frmr_valid);
        put64(b, mr->frmr_iova);
        put64(b, mr->frmr_length);
        put32(b, mr->frmr_npages);
        put_pages(b, mr->frmr_pages, mr->frmr_npages);
        st_end(b, at);
    }
    PVRDMA_TABLE_FOREACH(&core->qp_tbl, h, o) {
        PvrdmaQp *qp = o;

        at = st_begin(b, ST_QP);
        put32(b, qp->handle);
        put32(b, qp->qpn);
        put8(b, qp->type);
        put32(b, qp->pd_handle);
        put32(b, qp->send_cq_handle);
        put32(b, qp->recv_cq_handle);
        put8(b, qp->has_srq);
        put32(b, qp->srq_handle);
        put8(b, qp->sq_sig_all);
        put32(b, qp->attr.cap.max_send_wr);
        put32(b, qp->attr.cap.max_recv_wr);
        put32(b, qp->attr.cap.max_send_sge);
        put32(b, qp->attr.cap.max_recv_sge);
        put32(b, qp->sq.data_pages);
        put32(b, qp->npages);
        put_pages(b, qp->pages, qp->npages);
        put32(b, qp->state);
        put_qp_attr(b, &qp->attr);
        put32(b, qp->wq.sq_cons);
        put32(b, qp->wq.rq_cons);
        put8(b, qp->rq_db_skip);
        put8(b, qp->wq.comm_est);
        put8(b, qp->wq.sqd_notify);
        put8(b, qp->wq.rnr_pending);
        put8(b, qp->wq.rnr_left);
        put64(b, qp->wq.rnr_pending ? qp->wq.rnr_deadline : 0);
        put64(b, qp->peer_life);
        put32(b, qp->xrcd_handle);
        st_end(b, at);
    }
    PVRDMA_TABLE_FOREACH(&core->mr_tbl, h, o) {
        PvrdmaMr *mw = o;

        if (!pvrdma_mr_is_mw(mw) || !mw->mw_bound) {
            continue;
        }
        at = st_begin(b, ST_MW);
        put32(b, mw->handle);
        put32(b, mw->access);
        put8(b, mw->mw_zero_based);
        put32(b, mw->mw_mr_handle);
        put32(b, mw->mw_qp_handle);
        put64(b, mw->mw_va);
        put64(b, mw->mw_len);
        st_end(b, at);
    }
    /* Generations of free MR handles: later keys differ from old ones. */
    at = st_begin(b, ST_MR_GEN);
    for (h = 0; h < core->mr_tbl.alloc; h++) {
        if (core->mr_tbl.gen[h] && !core->mr_tbl.slots[h]) {
            put32(b, h);
            put8(b, core->mr_tbl.gen[h]);
        }
    }
    st_end(b, at);
    if (core->be_ops->move_save) {
        PvrdmaMoveState ms;

        if (core->loaded && core->has_move_state) {
            /* Not run since its load: still the source's record. */
            ms = core->move_state;
        } else {
            core->be_ops->move_save(core->be, &ms);
        }
        at = st_begin(b, ST_MOVE);
        g_byte_array_append(b, ms.token, sizeof(ms.token));
        put64(b, ms.life);
        put32(b, ms.nancestors);
        for (h = 0; h < ms.nancestors; h++) {
            put64(b, ms.ancestors[h]);
        }
        st_end(b, at);
    }
    /* The link counters are the host's: the destination has its own. */
    at = st_begin(b, ST_COUNTERS);
    put32(b, PVRDMA_CTR_NUM);
    for (h = 0; h < PVRDMA_CTR_NUM; h++) {
        put64(b, core->ctr[h]);
    }
    st_end(b, at);
    /* Multicast membership, replayed as ATTACH_MCAST (order kept). */
    for (h = 0; h < core->cfg.mcast_groups; h++) {
        const PvrdmaMcast *g = &core->mcast[h];

        for (uint32_t i = 0; i < g->nqps; i++) {
            at = st_begin(b, ST_MCAST);
            put32(b, g->qps[i]);
            g_byte_array_append(b, g->mgid, 16);
            st_end(b, at);
        }
    }
}

uint8_t *pvrdma_core_state_save(PvrdmaCore *core, size_t *len, char **errmsg)
{
    GByteArray *b;
    uint32_t h;
    guint at;
    void *o;

    if (core->key_mrs) {
        *errmsg = g_strdup("pvrdma: its backend chose the keys of MRs "
                           "(backend=ibverbs), which a destination "
                           "cannot choose again");
        return NULL;
    }
    PVRDMA_TABLE_FOREACH(&core->qp_tbl, h, o) {
        PvrdmaQp *qp = o;

        if (qp->wq.nout) {
            *errmsg = g_strdup_printf("pvrdma: QP %u has %u requests in "
                                      "flight on a link to another "
                                      "process, which this version cannot "
                                      "move yet", qp->qpn, qp->wq.nout);
            return NULL;
        }
    }
    b = g_byte_array_new();
    g_byte_array_append(b, (const guint8 *)ST_MAGIC, 8);
    put32(b, ST_VERSION);
    put32(b, 0);
    at = st_begin(b, ST_CONFIG);
    put32(b, G_N_ELEMENTS(st_config));
    for (h = 0; h < G_N_ELEMENTS(st_config); h++) {
        put64(b, st_cfg_get(&core->cfg, h));
    }
    st_end(b, at);
    st_save_device(core, b);
    if (core->dsr_loaded) {
        st_save_objects(core, b);
    }
    st_end(b, st_begin(b, ST_END));
    *len = b->len;
    return g_byte_array_free(b, false);
}

/* ---- reading ------------------------------------------------------------- */

typedef struct StR {
    const uint8_t *p;
    size_t len;
    size_t pos;
    bool bad;                   /* read past the end */
} StR;

static const uint8_t *take(StR *r, size_t n)
{
    const uint8_t *p;

    if (r->bad || r->len - r->pos < n) {
        r->bad = true;
        return NULL;
    }
    p = r->p + r->pos;
    r->pos += n;
    return p;
}

static uint8_t get8(StR *r)
{
    const uint8_t *p = take(r, 1);

    return p ? *p : 0;
}

static uint16_t get16(StR *r)
{
    const uint8_t *p = take(r, 2);
    uint16_t v = 0;

    if (p) {
        memcpy(&v, p, 2);
    }
    return GUINT16_FROM_LE(v);
}

static uint32_t get32(StR *r)
{
    const uint8_t *p = take(r, 4);
    uint32_t v = 0;

    if (p) {
        memcpy(&v, p, 4);
    }
    return GUINT32_FROM_LE(v);
}

static uint64_t get64(StR *r)
{
    const uint8_t *p = take(r, 8);
    uint64_t v = 0;

    if (p) {
        memcpy(&v, p, 8);
    }
    return GUINT64_FROM_LE(v);
}

static bool get_bool(StR *r, bool *v)
{
    uint8_t b = get8(r);

    *v = b;
    return b <= 1;
}

/* @n page addresses (n checked against the record's length first). */
static uint64_t *get_pages(StR *r, uint32_t n)
{
    uint64_t *pages;

    if (r->bad || n > PVRDMA_PDIR_MAX_PAGES || (r->len - r->pos) / 8 < n) {
        r->bad = true;
        return NULL;
    }
    pages = g_new(uint64_t, MAX(n, 1));
    for (uint32_t i = 0; i < n; i++) {
        pages[i] = get64(r);
    }
    return pages;
}

typedef struct StLoad {
    PvrdmaCore *core;
    char *err;
} StLoad;

static bool st_fail(StLoad *ld, const char *fmt, ...) G_GNUC_PRINTF(2, 3);

static bool st_fail(StLoad *ld, const char *fmt, ...)
{
    va_list ap;

    if (!ld->err) {
        va_start(ap, fmt);
        ld->err = g_strdup_vprintf(fmt, ap);
        va_end(ap);
    }
    return false;
}

/* Run one command of the guest ABI, as the saved state's replay. */
static bool st_cmd(StLoad *ld, union pvrdma_cmd_req *req, const char *what,
                   uint32_t handle, PvrdmaTable *t, uint8_t gen,
                   const uint64_t *pages, uint32_t npages)
{
    union pvrdma_cmd_resp resp;
    uint32_t resp_len;
    int ret;

    if (t) {
        t->force = handle;
        t->force_gen = gen;
    }
    ld->core->load_pages = pages;
    ld->core->load_npages = npages;
    ret = pvrdma_cmd_execute(ld->core, req, &resp, &resp_len);
    ld->core->load_pages = NULL;
    if (t) {
        t->force = -1;
        t->force_gen = 0;
    }
    if (ret < 0) {
        return st_fail(ld, "%s %u cannot be made again: %s", what, handle,
                       g_strerror(-ret));
    }
    return true;
}

static bool st_load_config(StLoad *ld, StR *r)
{
    uint32_t n = get32(r), i;

    if (n != G_N_ELEMENTS(st_config)) {
        return st_fail(ld, "%u configuration values, not %u", n,
                       (unsigned)G_N_ELEMENTS(st_config));
    }
    for (i = 0; i < n; i++) {
        uint64_t src = get64(r), dst = st_cfg_get(&ld->core->cfg, i);

        if (!r->bad && src != dst) {
            return st_fail(ld, "the destination's property %s is %"
                           G_GUINT64_FORMAT " where the source's is %"
                           G_GUINT64_FORMAT ": start the destination with "
                           "the source's -device pvrdma properties",
                           st_config[i].prop, dst, src);
        }
    }
    return true;
}

/* One DSR ring from the record (its pages charged like a DSR load). */
static bool st_load_dsr_ring(StLoad *ld, StR *r, const char *name,
                             uint32_t elem_size, uint64_t **pages,
                             uint32_t *npages, PvrdmaRing *ring)
{
    PvrdmaCore *core = ld->core;
    uint32_t n = get32(r), prod = get32(r);
    uint64_t *p;

    if (r->bad || n < PVRDMA_DSR_RING_MIN_PAGES ||
        n > PVRDMA_DSR_RING_MAX_PAGES) {
        return st_fail(ld, "%s ring of %u pages", name, n);
    }
    p = get_pages(r, n);
    if (!p) {
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (!p[i] || (p[i] & (PVRDMA_PAGE_SIZE - 1))) {
            st_fail(ld, "%s ring page %u at 0x%" G_GINT64_MODIFIER "x",
                    name, i, p[i]);
            g_free(p);
            return false;
        }
    }
    if (pvrdma_core_charge_pages(core, n) < 0) {
        g_free(p);
        return st_fail(ld, "%s ring: over max-pinned-pages", name);
    }
    *pages = p;
    *npages = n;
    if (!pvrdma_ring_init(ring, p, n, 1, n - 1,
                          (n - 1) * PVRDMA_PAGE_SIZE / elem_size, elem_size,
                          PVRDMA_RING_STATE_RX_OFFSET) ||
        !pvrdma_ring_idx_valid(prod, ring->n)) {
        return st_fail(ld, "%s ring index %u", name, prod);
    }
    ring->prod = prod;
    return true;
}

static bool st_load_device(StLoad *ld, StR *r)
{
    PvrdmaCore *core = ld->core;
    struct pvrdma_device_caps caps;
    bool loaded, dma;

    core->dsr_low = get32(r);
    core->dsr_high = get32(r);
    core->err = get32(r);
    core->icr = get32(r) & ((1u << PVRDMA_NUM_VECTORS) - 1);
    core->imr = get32(r);
    core->mac_low = get32(r);
    core->mac_high = get32(r);
    if (!get_bool(r, &loaded) || !get_bool(r, &dma) || (loaded && !dma)) {
        return st_fail(ld, "bad DSR flags");
    }
    if (!loaded) {
        return true;
    }
    core->driver_version = get32(r);
    core->uar_pfn = get64(r);
    core->cmd_slot = get64(r);
    core->resp_slot = get64(r);
    if (r->bad || !core->cmd_slot || !core->resp_slot ||
        ((core->cmd_slot | core->resp_slot) & (PVRDMA_PAGE_SIZE - 1))) {
        return st_fail(ld, "bad DSR (driver version %u, command slots)",
                       core->driver_version);
    }
    core->dma_enabled = true;
    if (!st_load_dsr_ring(ld, r, "async event", PVRDMA_EQE_SIZE,
                          &core->async_pages, &core->async_npages,
                          &core->async_ring) ||
        !st_load_dsr_ring(ld, r, "CQ notification", PVRDMA_CQNE_SIZE,
                          &core->cqn_pages, &core->cqn_npages,
                          &core->cqn_ring)) {
        return false;
    }
    core->dsr_loaded = true;
    pvrdma_core_fill_caps(core, &core->caps);
    caps = core->caps;
    pvrdma_device_caps_le(&caps);
    {
        const uint8_t *saved = take(r, sizeof(caps));

        if (saved && memcmp(saved, &caps, sizeof(caps))) {
            return st_fail(ld, "the destination's device offers other "
                           "capabilities than the source's (another "
                           "backend, or another build of the device)");
        }
    }
    return true;
}

static bool st_load_uc(StLoad *ld, StR *r)
{
    PvrdmaCore *core = ld->core;
    uint32_t handle = get32(r), idx = get32(r);
    union pvrdma_cmd_req req;
    uint64_t base = core->uar_base_known ?
                    core->uar_base >> PVRDMA_PAGE_SHIFT : core->uar_pfn;

    memset(&req, 0, sizeof(req));
    req.hdr.cmd = PVRDMA_CMD_CREATE_UC;
    req.create_uc.pfn64 = base + idx;
    if (core->driver_version < PVRDMA_VERSION_PPN64) {
        req.create_uc.pfn64 = (uint32_t)(base + idx);
    }
    return !r->bad && idx < core->cfg.uar_pages &&
           st_cmd(ld, &req, "user context", handle, &core->uc_tbl, 0,
                  NULL, 0);
}

static bool st_load_pd(StLoad *ld, StR *r)
{
    uint32_t handle = get32(r), ctx = get32(r);
    union pvrdma_cmd_req req;

    memset(&req, 0, sizeof(req));
    req.hdr.cmd = PVRDMA_CMD_CREATE_PD;
    req.create_pd.ctx_handle = ctx;
    return !r->bad &&
           st_cmd(ld, &req, "PD", handle, &ld->core->pd_tbl, 0, NULL, 0);
}

static bool st_load_xrcd(StLoad *ld, StR *r)
{
    uint32_t handle = get32(r);
    union pvrdma_cmd_req req;

    memset(&req, 0, sizeof(req));
    req.hdr.cmd = PVRDMA_CMD_CREATE_XRCD;
    return !r->bad &&
           st_cmd(ld, &req, "XRC domain", handle, &ld->core->xrcd_tbl, 0,
                  NULL, 0);
}

static bool st_load_cq(StLoad *ld, StR *r)
{
    PvrdmaCore *core = ld->core;
    uint32_t handle = get32(r), ctx = get32(r), cqe = get32(r);
    bool ts, overrun;
    uint8_t arm;
    uint32_t prod, npages;
    g_autofree uint64_t *pages = NULL;
    union pvrdma_cmd_req req;
    PvrdmaCq *cq;

    if (!get_bool(r, &ts)) {
        return st_fail(ld, "CQ %u: bad flags", handle);
    }
    arm = get8(r);
    if (!get_bool(r, &overrun) || arm > PVRDMA_CQ_ARM_NEXT) {
        return st_fail(ld, "CQ %u: bad flags", handle);
    }
    prod = get32(r);
    npages = get32(r);
    pages = get_pages(r, npages);
    if (!pages) {
        return false;
    }
    memset(&req, 0, sizeof(req));
    req.hdr.cmd = PVRDMA_CMD_CREATE_CQ;
    req.create_cq.ctx_handle = ctx;
    req.create_cq.cqe = cqe;
    req.create_cq.nchunks = npages;
    req.create_cq.reserved[0] = ts ? PVRDMA_CQ_FLAG_TIMESTAMP : 0;
    if (!st_cmd(ld, &req, "CQ", handle, &core->cq_tbl, 0, pages, npages)) {
        return false;
    }
    cq = pvrdma_table_lookup(&core->cq_tbl, handle);
    if (!pvrdma_ring_idx_valid(prod, cq->ring.n)) {
        return st_fail(ld, "CQ %u: ring index %u", handle, prod);
    }
    cq->ring.prod = prod;
    cq->arm = arm;
    cq->overrun = overrun;
    return true;
}

static bool st_load_srq(StLoad *ld, StR *r)
{
    PvrdmaCore *core = ld->core;
    uint32_t handle = get32(r), pd = get32(r), max_wr = get32(r);
    uint32_t max_sge = get32(r), limit = get32(r), cons, npages;
    bool armed, failed, xrc;
    g_autofree uint64_t *pages = NULL;
    union pvrdma_cmd_req req;
    PvrdmaSrq *srq;

    if (!get_bool(r, &armed) || !get_bool(r, &failed)) {
        return st_fail(ld, "SRQ %u: bad flags", handle);
    }
    cons = get32(r);
    npages = get32(r);
    pages = get_pages(r, npages);
    if (!pages) {
        return false;
    }
    memset(&req, 0, sizeof(req));
    if (!get_bool(r, &xrc)) {
        return st_fail(ld, "SRQ %u: bad flags", handle);
    }
    req.create_srq_ex.xrcd_handle = get32(r);
    req.create_srq_ex.cq_handle = get32(r);
    req.create_srq.srq_type = xrc ? PVRDMA_SRQT_XRC : PVRDMA_SRQT_BASIC;
    req.hdr.cmd = PVRDMA_CMD_CREATE_SRQ;
    req.create_srq.pd_handle = pd;
    req.create_srq.nchunks = npages;
    req.create_srq.attrs.max_wr = max_wr;
    req.create_srq.attrs.max_sge = max_sge;
    req.create_srq.attrs.srq_limit = limit;
    if (!st_cmd(ld, &req, "SRQ", handle, &core->srq_tbl, 0, pages, npages)) {
        return false;
    }
    srq = pvrdma_table_lookup(&core->srq_tbl, handle);
    if (!pvrdma_ring_idx_valid(cons, srq->ring.n) ||
        (armed && !srq->srq_limit)) {
        return st_fail(ld, "SRQ %u: ring index %u or limit", handle, cons);
    }
    srq->cons = cons;
    srq->limit_armed = armed;
    srq->failed = failed;
    return true;
}

static bool st_load_mr(StLoad *ld, StR *r)
{
    PvrdmaCore *core = ld->core;
    uint32_t handle = get32(r);
    uint8_t gen = get8(r);
    uint32_t lkey = get32(r), rkey = get32(r);
    uint32_t pd = get32(r), flags = get32(r), access = get32(r);
    uint64_t start = get64(r), length = get64(r);
    uint32_t max_sg = get32(r), npages = get32(r), fr_npages;
    g_autofree uint64_t *pages = NULL;
    g_autofree uint64_t *fr_pages = NULL;
    uint64_t fr_iova, fr_length;
    union pvrdma_cmd_req req;
    bool fr_valid;
    PvrdmaMr *mr;

    if (r->bad) {
        return false;
    }
    if (npages) {
        pages = get_pages(r, npages);
        if (!pages) {
            return false;
        }
    }
    if (!get_bool(r, &fr_valid)) {
        return st_fail(ld, "MR %u: bad flags", handle);
    }
    fr_iova = get64(r);
    fr_length = get64(r);
    fr_npages = get32(r);
    if (fr_npages) {
        fr_pages = get_pages(r, fr_npages);
        if (!fr_pages) {
            return false;
        }
    }
    if (!gen) {
        return st_fail(ld, "MR %u: key generation 0", handle);
    }
    memset(&req, 0, sizeof(req));
    req.hdr.cmd = PVRDMA_CMD_CREATE_MR;
    req.create_mr.pd_handle = pd;
    req.create_mr.flags = flags;
    /* A window's access is its binding's (ST_MW): made unbound. */
    req.create_mr.access_flags = flags == PVRDMA_MR_FLAG_MW_TYPE1 ||
                                 flags == PVRDMA_MR_FLAG_MW_TYPE2 ? 0 : access;
    req.create_mr.start = start;
    req.create_mr.length = length;
    req.create_mr.nchunks = flags == PVRDMA_MR_FLAG_FRMR ? max_sg : npages;
    /* A user MR's pages come from its directory: a dummy address. */
    req.create_mr.pdir_dma = npages ? PVRDMA_PAGE_SIZE : 0;
    if (!st_cmd(ld, &req, "MR", handle, &core->mr_tbl, gen, pages,
                npages)) {
        return false;
    }
    mr = pvrdma_table_lookup(&core->mr_tbl, handle);
    if (mr->npages != npages || mr->max_sg != max_sg) {
        return st_fail(ld, "MR %u: %u pages", handle, npages);
    }
    if (pvrdma_mr_is_mw(mr) || flags == PVRDMA_MR_FLAG_FRMR) {
        /*
         * A window's key gets a new low byte with a bind, a fast-reg
         * MR's with a REG_MR (the guest chooses it).
         */
        if ((rkey >> 8) != handle || !(rkey & 0xff) || lkey != rkey) {
            return st_fail(ld, "MR %u: key 0x%x", handle, rkey);
        }
        mr->lkey = mr->rkey = rkey;
    } else if (mr->lkey != lkey || mr->rkey != rkey) {
        return st_fail(ld, "MR %u: keys 0x%x/0x%x, here 0x%x", handle,
                       lkey, rkey, mr->lkey);
    }
    if (fr_valid || fr_npages || fr_iova || fr_length) {
        /* A fast-reg MR's page list, as a REG_MR WQE left it. */
        if (flags != PVRDMA_MR_FLAG_FRMR || fr_npages > mr->max_sg ||
            fr_length > core->cfg.max_mr_size ||
            fr_length > (uint64_t)fr_npages * PVRDMA_PAGE_SIZE ||
            fr_iova + fr_length < fr_iova) {
            return st_fail(ld, "MR %u: bad fast-reg state", handle);
        }
        for (uint32_t i = 0; i < fr_npages; i++) {
            if (!fr_pages[i] || (fr_pages[i] & (PVRDMA_PAGE_SIZE - 1))) {
                return st_fail(ld, "MR %u: bad fast-reg page", handle);
            }
        }
        if (fr_npages) {
            memcpy(mr->frmr_pages, fr_pages, fr_npages * sizeof(uint64_t));
        }
        mr->frmr_valid = fr_valid;
        mr->frmr_iova = fr_iova;
        mr->frmr_length = fr_length;
        mr->frmr_npages = fr_npages;
    }
    return true;
}

/* One MODIFY_QP of the replay: to @next with the attributes it needs. */
static bool st_qp_step(StLoad *ld, PvrdmaQp *qp, union pvrdma_cmd_req *attr,
                       uint32_t next, uint32_t extra)
{
    attr->modify_qp.qp_handle = qp->handle;
    attr->modify_qp.attr_mask = PVRDMA_QP_STATE | extra |
        pvrdma_qp_transition_required(qp->state, next, qp->type);
    attr->modify_qp.attrs.qp_state = next;
    return st_cmd(ld, attr, "the state of QP", qp->handle, NULL, 0, NULL, 0);
}

/*
 * The QP's state and attributes, through MODIFY_QP's checks: RESET ->
 * INIT -> RTR -> RTS as far as the saved state lies on that path, each
 * step with the attributes it requires (those of the saved state: they
 * are the latest the guest set), then SQD; SQE only the device enters.
 * A QP in ERR may have come from any state with any attributes: it goes
 * there from RESET and keeps the saved ones (nothing but a query and a
 * reset uses them).  The replayed attributes must equal the saved ones.
 */
static bool st_load_qp_state(StLoad *ld, PvrdmaQp *qp,
                             union pvrdma_cmd_req *attr, uint32_t state)
{
    struct pvrdma_qp_attr saved = attr->modify_qp.attrs, got;
    uint32_t reach = state == PVRDMA_QPS_SQD || state == PVRDMA_QPS_SQE ?
                     PVRDMA_QPS_RTS : state;

    if (state == PVRDMA_QPS_ERR) {
        if (!st_qp_step(ld, qp, attr, PVRDMA_QPS_ERR, 0)) {
            return false;
        }
        saved.cap = qp->attr.cap;
        qp->attr = saved;
        return true;
    }
    if (state != PVRDMA_QPS_RESET &&
        (!st_qp_step(ld, qp, attr, PVRDMA_QPS_INIT, 0) ||
         (reach != PVRDMA_QPS_INIT &&
          !st_qp_step(ld, qp, attr, PVRDMA_QPS_RTR, 0)) ||
         (reach == PVRDMA_QPS_RTS &&
          !st_qp_step(ld, qp, attr, PVRDMA_QPS_RTS, 0)))) {
        return false;
    }
    if (state == PVRDMA_QPS_SQD &&
        !st_qp_step(ld, qp, attr, PVRDMA_QPS_SQD,
                    saved.en_sqd_async_notify ?
                    PVRDMA_QP_EN_SQD_ASYNC_NOTIFY : 0)) {
        return false;
    }
    if (state == PVRDMA_QPS_SQE) {
        qp->state = PVRDMA_QPS_SQE;
    }
    got = qp->attr;
    got.qp_state = saved.qp_state;
    got.cur_qp_state = saved.cur_qp_state;
    got.path_mig_state = saved.path_mig_state;
    got.sq_draining = saved.sq_draining;
    got.en_sqd_async_notify = saved.en_sqd_async_notify;
    if (qp->state != state || memcmp(&got, &saved, sizeof(got))) {
        return st_fail(ld, "QP %u: its saved attributes do not replay",
                       qp->handle);
    }
    qp->attr = got;
    return true;
}

static bool st_load_qp(StLoad *ld, StR *r)
{
    PvrdmaCore *core = ld->core;
    uint32_t handle = get32(r), qpn = get32(r);
    uint8_t type = get8(r);
    uint32_t pd = get32(r), scq = get32(r), rcq = get32(r);
    bool has_srq, sig_all, db_skip, comm_est, sqd_notify, rnr;
    uint32_t srq, swr, rwr, ssge, rsge, send_chunks, npages, state;
    uint32_t sq_cons, rq_cons, xrcd;
    uint8_t rnr_left;
    int64_t rnr_deadline, now;
    uint64_t peer_life;
    g_autofree uint64_t *pages = NULL;
    union pvrdma_cmd_req req, attr;
    const uint8_t *raw;
    PvrdmaQp *qp;

    if (!get_bool(r, &has_srq)) {
        return st_fail(ld, "QP %u: bad flags", handle);
    }
    srq = get32(r);
    if (!get_bool(r, &sig_all)) {
        return st_fail(ld, "QP %u: bad flags", handle);
    }
    swr = get32(r);
    rwr = get32(r);
    ssge = get32(r);
    rsge = get32(r);
    send_chunks = get32(r);
    npages = get32(r);
    pages = get_pages(r, npages);
    if (!pages) {
        return false;
    }
    state = get32(r);
    memset(&attr, 0, sizeof(attr));
    attr.hdr.cmd = PVRDMA_CMD_MODIFY_QP;
    raw = take(r, sizeof(attr.modify_qp.attrs));
    if (!raw) {
        return false;
    }
    memcpy(&attr.modify_qp.attrs, raw, sizeof(attr.modify_qp.attrs));
    pvrdma_cmd_req_le(&attr, true);
    attr.hdr.cmd = PVRDMA_CMD_MODIFY_QP;
    sq_cons = get32(r);
    rq_cons = get32(r);
    if (!get_bool(r, &db_skip) || !get_bool(r, &comm_est) ||
        !get_bool(r, &sqd_notify) || !get_bool(r, &rnr)) {
        return st_fail(ld, "QP %u: bad flags", handle);
    }
    rnr_left = get8(r);
    rnr_deadline = (int64_t)get64(r);
    peer_life = get64(r);
    xrcd = get32(r);
    if (r->bad) {
        return false;
    }
    if (npages > UINT16_MAX || send_chunks > UINT16_MAX ||
        state > PVRDMA_QPS_ERR ||
        (type == PVRDMA_QPT_GSI) != (handle == 1)) {
        return st_fail(ld, "QP %u: bad pages, state or type", handle);
    }
    memset(&req, 0, sizeof(req));
    req.hdr.cmd = PVRDMA_CMD_CREATE_QP;
    req.create_qp.pd_handle = pd;
    req.create_qp.send_cq_handle = scq;
    req.create_qp.recv_cq_handle = rcq;
    req.create_qp.srq_handle = srq;
    req.create_qp.is_srq = has_srq;
    req.create_qp.max_send_wr = swr;
    req.create_qp.max_recv_wr = rwr;
    req.create_qp.max_send_sge = ssge;
    req.create_qp.max_recv_sge = rsge;
    req.create_qp.total_chunks = npages;
    req.create_qp.send_chunks = send_chunks;
    req.create_qp.sq_sig_all = sig_all;
    req.create_qp.qp_type = type;
    req.create_qp.pdir_dma = PVRDMA_PAGE_SIZE;
    if (type == PVRDMA_QPT_XRC_INI) {
        req.create_qp.recv_cq_handle = 0;   /* its send CQ stands in */
    } else if (type == PVRDMA_QPT_XRC_TGT) {
        /* Only its domain: the rest is the binding of its last message. */
        memset(&req.create_qp, 0, sizeof(req.create_qp));
        req.hdr.cmd = PVRDMA_CMD_CREATE_QP;
        req.create_qp.qp_type = type;
        req.create_qp.sq_sig_all = sig_all;
        req.create_qp_ex.xrcd_handle = xrcd;
    }
    if (!st_cmd(ld, &req, "QP", handle,
                type == PVRDMA_QPT_GSI ? NULL : &core->qp_tbl, 0,
                pages, npages)) {
        return false;
    }
    qp = pvrdma_table_lookup(&core->qp_tbl, handle);
    if (!qp || qp->qpn != qpn) {
        return st_fail(ld, "QP %u: number %u on the source, %u here (a "
                       "destination device at another PCI address?)",
                       handle, qpn, qp ? qp->qpn : 0);
    }
    if (!st_load_qp_state(ld, qp, &attr, state)) {
        return false;
    }
    if (type == PVRDMA_QPT_XRC_TGT) {
        /* Bound as its last message left it, or not at all. */
        if (qp->state != state ||
            (has_srq && !pvrdma_core_xrc_bind(core, qp, srq)) ||
            sq_cons || rq_cons || rnr || db_skip) {
            return st_fail(ld, "XRC_TGT QP %u: SRQ %u, or queue state",
                           handle, srq);
        }
        qp->wq.comm_est = comm_est;
        qp->peer_life = peer_life;
        return true;
    }
    if (qp->state != state ||
        !pvrdma_ring_idx_valid(sq_cons, qp->sq.n) ||
        (pvrdma_qp_has_rq(qp) && !pvrdma_ring_idx_valid(rq_cons, qp->rq.n)) ||
        (!pvrdma_qp_has_rq(qp) && rq_cons) ||
        (rnr && state != PVRDMA_QPS_RTS && state != PVRDMA_QPS_SQD)) {
        return st_fail(ld, "QP %u: state %u or ring indexes %u/%u", handle,
                       state, sq_cons, rq_cons);
    }
    qp->wq.sq_cons = sq_cons;
    qp->wq.sq_next = sq_cons;
    qp->wq.rq_cons = rq_cons;
    pvrdma_wq_rq_hint(core, qp, db_skip, true);
    /* Not saved: 0 here, and the resume reads every running SQ again. */
    pvrdma_wq_sq_hint(core, qp, true);
    qp->wq.comm_est = comm_est;
    qp->wq.sqd_notify = sqd_notify;
    qp->wq.rnr_pending = rnr;
    qp->wq.rnr_left = rnr_left;
    /*
     * The longest RNR timer is 655 ms: a deadline further out than that
     * from now (a hostile stream) would park the QP; it retries at once.
     */
    now = pvrdma_core_now_ns(core);
    if (rnr && (rnr_deadline < 0 || rnr_deadline - now > 1000000000LL)) {
        rnr_deadline = now;
    }
    qp->wq.rnr_deadline = rnr ? rnr_deadline : 0;
    /* Any value: it only decides which peer frames the QP takes. */
    qp->peer_life = peer_life;
    return true;
}

static bool st_load_mw(StLoad *ld, StR *r)
{
    PvrdmaCore *core = ld->core;
    uint32_t handle = get32(r), access = get32(r);
    bool zero_based;
    uint32_t mr_handle, qp_handle;
    uint64_t va, len;
    PvrdmaMr *mw, *mr;
    PvrdmaQp *qp = NULL;

    if (!get_bool(r, &zero_based)) {
        return st_fail(ld, "window %u: bad flags", handle);
    }
    mr_handle = get32(r);
    qp_handle = get32(r);
    va = get64(r);
    len = get64(r);
    if (r->bad) {
        return false;
    }
    mw = pvrdma_table_lookup(&core->mr_tbl, handle);
    mr = pvrdma_table_lookup(&core->mr_tbl, mr_handle);
    if (mw && mw->flags == PVRDMA_MR_FLAG_MW_TYPE2) {
        qp = pvrdma_table_lookup(&core->qp_tbl, qp_handle);
    }
    /* As a bind checks it (pvrdma_wq.c): the MR's PD, range and access. */
    if (!mw || !pvrdma_mr_is_mw(mw) || mw->mw_bound || !mr ||
        pvrdma_mr_is_mw(mr) || mr->flags == PVRDMA_MR_FLAG_DMA ||
        mr->pd_handle != mw->pd_handle ||
        !(mr->access & PVRDMA_ACCESS_MW_BIND) ||
        (mw->flags == PVRDMA_MR_FLAG_MW_TYPE2 &&
         (!qp || qp->pd_handle != mw->pd_handle)) ||
        (access & ~(PVRDMA_ACCESS_REMOTE_WRITE | PVRDMA_ACCESS_REMOTE_READ |
                    PVRDMA_ACCESS_REMOTE_ATOMIC)) ||
        ((access & (PVRDMA_ACCESS_REMOTE_WRITE |
                    PVRDMA_ACCESS_REMOTE_ATOMIC)) &&
         !(mr->access & PVRDMA_ACCESS_LOCAL_WRITE)) ||
        va + len < va || va < mr->start ||
        va + len > mr->start + mr->length) {
        return st_fail(ld, "window %u: bad binding", handle);
    }
    mw->access = access;
    mw->mw_bound = true;
    mw->mw_zero_based = zero_based;
    mw->mw_mr_handle = mr_handle;
    mw->mw_qp_handle = qp ? qp_handle : 0;
    mw->mw_va = va;
    mw->mw_len = len;
    mr->mw_binds++;
    if (qp) {
        qp->mw_binds++;
    }
    return true;
}

static bool st_load_gid(StLoad *ld, StR *r)
{
    uint32_t index = get32(r);
    uint8_t type = get8(r);
    const uint8_t *gid = take(r, 16);
    union pvrdma_cmd_req req;

    if (!gid) {
        return false;
    }
    memset(&req, 0, sizeof(req));
    req.hdr.cmd = PVRDMA_CMD_CREATE_BIND;
    req.create_bind.mtu = 1024;
    req.create_bind.vlan = 0xfff;
    req.create_bind.index = index;
    req.create_bind.gid_type = type;
    memcpy(req.create_bind.new_gid, gid, 16);
    return st_cmd(ld, &req, "GID", index, NULL, 0, NULL, 0);
}

static bool st_load_mcast(StLoad *ld, StR *r)
{
    uint32_t qp_handle = get32(r);
    const uint8_t *mgid = take(r, 16);
    union pvrdma_cmd_req req;

    if (!mgid) {
        return false;
    }
    memset(&req, 0, sizeof(req));
    req.hdr.cmd = PVRDMA_CMD_ATTACH_MCAST;
    req.mcast.qp_handle = qp_handle;
    memcpy(req.mcast.mgid, mgid, 16);
    return st_cmd(ld, &req, "multicast membership of QP", qp_handle, NULL,
                  0, NULL, 0);
}

static bool st_load_mr_gen(StLoad *ld, StR *r)
{
    PvrdmaTable *t = &ld->core->mr_tbl;

    while (r->pos < r->len) {
        uint32_t h = get32(r);
        uint8_t gen = get8(r);

        if (r->bad || h < t->first || h >= t->limit || !gen ||
            pvrdma_table_lookup(t, h)) {
            return st_fail(ld, "bad MR key generation record");
        }
        if (h >= t->alloc) {
            /* Grows the table as an insert would, then frees it again. */
            if (pvrdma_table_insert_at(t, t, h) < 0) {
                return st_fail(ld, "bad MR key generation record");
            }
            pvrdma_table_remove(t, h);
        }
        t->gen[h] = gen;
    }
    return true;
}

static bool st_load_move(StLoad *ld, StR *r)
{
    PvrdmaMoveState *ms = &ld->core->move_state;
    const uint8_t *token = take(r, 32);
    uint32_t i;

    if (!token || ld->core->has_move_state) {
        return st_fail(ld, "bad move record");
    }
    memcpy(ms->token, token, 32);
    ms->life = get64(r);
    ms->nancestors = get32(r);
    if (r->bad || !ms->life || ms->nancestors > PVRDMA_MOVE_LINEAGE) {
        return st_fail(ld, "bad move record (life, %u ancestors)",
                       ms->nancestors);
    }
    for (i = 0; i < ms->nancestors; i++) {
        ms->ancestors[i] = get64(r);
        if (!ms->ancestors[i]) {
            return st_fail(ld, "bad move record (ancestor %u)", i);
        }
    }
    ld->core->has_move_state = true;
    return true;
}

static bool st_load_counters(StLoad *ld, StR *r)
{
    uint32_t i, n = get32(r);

    if (r->bad || n != PVRDMA_CTR_NUM) {
        return st_fail(ld, "bad counters record (%u counters)", n);
    }
    for (i = 0; i < n; i++) {
        ld->core->ctr[i] = get64(r);
    }
    return true;
}

static bool st_load_record(StLoad *ld, uint16_t type, StR *r)
{
    switch (type) {
    case ST_CONFIG:
        return st_load_config(ld, r);
    case ST_DEVICE:
        return st_load_device(ld, r);
    case ST_UC:
        return st_load_uc(ld, r);
    case ST_PD:
        return st_load_pd(ld, r);
    case ST_XRCD:
        return st_load_xrcd(ld, r);
    case ST_CQ:
        return st_load_cq(ld, r);
    case ST_SRQ:
        return st_load_srq(ld, r);
    case ST_MR:
        return st_load_mr(ld, r);
    case ST_QP:
        return st_load_qp(ld, r);
    case ST_MW:
        return st_load_mw(ld, r);
    case ST_GID:
        return st_load_gid(ld, r);
    case ST_MR_GEN:
        return st_load_mr_gen(ld, r);
    case ST_MOVE:
        return st_load_move(ld, r);
    case ST_COUNTERS:
        return st_load_counters(ld, r);
    case ST_MCAST:
        return st_load_mcast(ld, r);
    default:
        return st_fail(ld, "unknown record type %u", type);
    }
}

bool pvrdma_core_state_load(PvrdmaCore *core, const uint8_t *buf, size_t len,
                            char **errmsg)
{
    StLoad ld = { .core = core };
    StR r = { .p = buf, .len = len };
    const uint8_t *magic = take(&r, 8);
    uint32_t version = get32(&r), type, last = 0;
    bool ok = true, ended = false;

    if (!magic || memcmp(magic, ST_MAGIC, 8) || get32(&r) != 0) {
        ok = st_fail(&ld, "not a pvrdma device state");
    } else if (version != ST_VERSION) {
        ok = st_fail(&ld, "device state version %u, this QEMU reads %u",
                     version, ST_VERSION);
    }
    core->loading = true;
    core->has_move_state = false;
    while (ok && !ended) {
        uint32_t rlen;
        StR rec;

        type = get16(&r);
        if (get16(&r) != 0) {
            ok = st_fail(&ld, "bad record header");
            break;
        }
        rlen = get32(&r);
        rec.p = take(&r, rlen);
        rec.len = rlen;
        rec.pos = 0;
        rec.bad = false;
        if (r.bad || !rec.p) {
            ok = st_fail(&ld, "truncated");
            break;
        }
        if (type < last || (last < ST_DEVICE && type != last + 1 &&
                            type != ST_END) ||
            ((type == ST_CONFIG || type == ST_DEVICE) && type == last)) {
            ok = st_fail(&ld, "record %u out of order", type);
            break;
        }
        if (type > ST_DEVICE && type != ST_END && !core->dsr_loaded) {
            ok = st_fail(&ld, "objects without a DSR");
            break;
        }
        if (type == ST_END) {
            ended = last >= ST_DEVICE && rlen == 0;
            ok = ended || st_fail(&ld, "ends early");
            break;
        }
        last = type;
        ok = st_load_record(&ld, type, &rec);
        if (ok && (rec.bad || rec.pos != rec.len)) {
            ok = st_fail(&ld, "record %u of %u bytes: %s", type, rlen,
                         rec.bad ? "too short" : "too long");
        }
    }
    if (ok && r.pos != r.len) {
        ok = st_fail(&ld, "%zu bytes after the end", r.len - r.pos);
    }
    core->loading = false;
    core->load_pages = NULL;
    if (!ok) {
        /* Nothing half-built stays: the guest sees a device after reset. */
        pvrdma_core_reset(core);
        *errmsg = g_strdup_printf("pvrdma: the saved device state is "
                                  "invalid: %s", ld.err ? ld.err : "?");
        g_free(ld.err);
        return false;
    }
    core->loaded = true;
    return true;
}

void pvrdma_core_state_resume(PvrdmaCore *core)
{
    uint32_t h;
    void *o;

    /*
     * What the source would have done next: send queues in RTS run what
     * was posted, queues of QPs in error flush, RNR waits are timed.
     */
    pvrdma_core_enter(core);
    core->paused = false;
    core->loaded = false;
    if (core->be_ops->move_in) {
        /* Peers learn where the GIDs went before our requests reach them. */
        core->be_ops->move_in(core->be, core->has_move_state ?
                                        &core->move_state : NULL);
    }
    core->has_move_state = false;
    PVRDMA_TABLE_FOREACH(&core->qp_tbl, h, o) {
        pvrdma_wq_qp_resumed(core, o);
    }
    pvrdma_core_leave(core);
}

bool pvrdma_core_move_out(PvrdmaCore *core, int64_t timeout_ns,
                          char **errmsg)
{
    bool ok = true;

    pvrdma_core_enter(core);
    core->paused = true;
    if (core->be_ops->move_out) {
        ok = core->be_ops->move_out(core->be, timeout_ns, errmsg);
    }
    pvrdma_core_leave(core);
    return ok;
}

void pvrdma_core_move_back(PvrdmaCore *core)
{
    uint32_t h;
    void *o;

    if (!core->paused) {
        return;
    }
    pvrdma_core_enter(core);
    core->paused = false;
    if (core->be_ops->move_back) {
        core->be_ops->move_back(core->be);
    }
    /* What waited while stopped goes on, as after a load. */
    PVRDMA_TABLE_FOREACH(&core->qp_tbl, h, o) {
        pvrdma_wq_qp_resumed(core, o);
    }
    pvrdma_core_leave(core);
}

uint64_t pvrdma_core_move_work(PvrdmaCore *core)
{
    return core->be_ops->move_work ? core->be_ops->move_work(core->be) : 0;
}

bool pvrdma_core_loading(PvrdmaCore *core)
{
    return core->loading || core->loaded;
}
