/*
 * PVRDMA command channel handlers (spec §5): the 21 commands 0..20.
 *
 * Conventions:
 *  - The request is a private copy (184 bytes); only the bytes of the
 *    command's own struct are looked at (the guest leaves stale bytes
 *    after it).  Reserved fields inside the struct must be zero.
 *  - A handler returns 0 or a negative errno; the dispatcher writes the
 *    response header (cookie, ack = 0x80000000 + cmd, err = positive
 *    errno) and the command's response struct (zeroed on failure).
 *  - Unknown command codes (>= 21) get a header-only response with
 *    err = EINVAL and ack = 0x80000000 + code (mod 2^32), ERR = -EINVAL.
 *  - RESIZE_CQ takes the extended request (project extension).
 *  - Errors: EINVAL for bad values and bad or dead handles, ENOMEM for
 *    object-count and pinned-page quotas, EBUSY for destroying an object
 *    still referenced (or taking a taken UAR page / second GSI QP), EFAULT
 *    for guest memory that cannot be read.
 *  - Command structs are used in place: the host is assumed little-endian
 *    like the guest ABI (see the report; the glue must not build this on
 *    a big-endian host until the accessors are converted).
 *
 * Object rules (documented choices):
 *  - Handles are dense, lowest free first.  PD/MR/CQ/SRQ from 0, UC from 1
 *    (0 = kernel), QP from 1 with 1 reserved for the one GSI QP; RC/UD QPs
 *    start at 2 and use qpn = handle; the GSI QP has qpn 1.  QP handles
 *    are handed out next fit (after the last one, wrapping), not lowest
 *    free: a QP number comes back only after all other free ones, so a
 *    peer's CM that still holds a closed connection's QP number in time
 *    wait does not refuse a new one as stale (IB CM reject reason 10).
 *  - A QP's PD, CQs and SRQ must all belong to the same context.
 *  - lkey == rkey == (MR handle << 8) | generation, generation 1..255 per
 *    handle, so keys are never 0 and a reused handle gets a new key.
 *  - MR access: bits 0-4 (LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ,
 *    REMOTE_ATOMIC, MW_BIND) accepted, IB "optional" bits 20-29 ignored,
 *    anything else rejected; REMOTE_WRITE/ATOMIC need LOCAL_WRITE (IBA
 *    10.6.3.1).  DMA MRs: LOCAL_WRITE or nothing.
 *  - Ring page counts: at least what the ring needs and at most twice that
 *    (the provider allocates SRQ buffers twice too large, spec §8.1); all
 *    pages count against cfg.max_pinned_pages.
 *  - PSNs are stored modulo 2^24; dest_qp_num above 2^24 is rejected.
 *  - ALT_PATH is rejected (no automatic path migration is advertised).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "pvrdma_core_int.h"

#define PVRDMA_PSN_MASK                 0xFFFFFFu
#define PVRDMA_FLOW_LABEL_MAX           0xFFFFFu
#define PVRDMA_MAX_SL                   15
#define PVRDMA_VLAN_NONE                0xFFFu


static bool pvrdma_mbz(const void *p, size_t len)
{
    const uint8_t *b = p;
    size_t i;

    for (i = 0; i < len; i++) {
        if (b[i]) {
            return false;
        }
    }
    return true;
}

#define MBZ(field)  pvrdma_mbz(&(field), sizeof(field))

static bool pvrdma_is_pow2(uint64_t v)
{
    return v && !(v & (v - 1));
}

static uint32_t pvrdma_pow2_ceil(uint32_t v)
{
    uint32_t p = 1;

    while (p < v) {
        p <<= 1;
    }
    return p;
}

static uint64_t pvrdma_pages_for(uint64_t bytes)
{
    return (bytes + PVRDMA_PAGE_SIZE - 1) >> PVRDMA_PAGE_SHIFT;
}

/* Ring page count rule: need <= have <= 2 * need. */
static bool pvrdma_ring_pages_ok(uint64_t have, uint64_t need)
{
    return have >= need && have <= 2 * need;
}

/* Context (0 = kernel) or NULL/-EINVAL via *ok. */
static bool pvrdma_lookup_ctx(PvrdmaCore *core, uint32_t ctx_handle,
                              PvrdmaUc **uc)
{
    *uc = NULL;
    if (ctx_handle == 0) {
        return true;
    }
    *uc = pvrdma_table_lookup(&core->uc_tbl, ctx_handle);
    return *uc != NULL;
}

/* ---- object teardown (also used by reset) -------------------------------- */

static void pvrdma_uc_free(PvrdmaCore *core, PvrdmaUc *uc)
{
    core->uar_owner[uc->uar_index] = 0;
    pvrdma_table_remove(&core->uc_tbl, uc->handle);
    g_free(uc);
}

static void pvrdma_pd_free(PvrdmaCore *core, PvrdmaPd *pd)
{
    if (core->be_ops->pd_destroy) {
        core->be_ops->pd_destroy(core->be, pd);
    }
    if (pd->ctx_handle) {
        pvrdma_uc_of(core, pd->ctx_handle)->refs--;
    }
    pvrdma_table_remove(&core->pd_tbl, pd->handle);
    g_free(pd);
}

static void pvrdma_mr_free(PvrdmaCore *core, PvrdmaMr *mr)
{
    if (pvrdma_mr_is_mw(mr)) {
        pvrdma_wq_mw_unbind(core, mr);
    }
    if (core->key_mrs && (mr->lkey >> 8) != mr->handle &&
        g_hash_table_lookup(core->key_mrs,
                            GUINT_TO_POINTER(mr->lkey >> 8)) == mr) {
        g_hash_table_remove(core->key_mrs, GUINT_TO_POINTER(mr->lkey >> 8));
    }
    if (core->be_ops->mr_deregister) {
        core->be_ops->mr_deregister(core->be, mr);
    }
    pvrdma_core_mr_unpin(core, mr);
    g_free(mr->frmr_pages);
    pvrdma_core_uncharge_pages(core, mr->quota_pages);
    pvrdma_pd_of(core, mr->pd_handle)->refs--;
    pvrdma_table_remove(&core->mr_tbl, mr->handle);
    g_free(mr->pages);
    g_free(mr);
}

static void pvrdma_cq_free(PvrdmaCore *core, PvrdmaCq *cq)
{
    pvrdma_wq_cq_poll_end(core, cq);
    if (core->be_ops->cq_destroy) {
        core->be_ops->cq_destroy(core->be, cq);
    }
    pvrdma_core_uncharge_pages(core, cq->npages);
    if (cq->ctx_handle) {
        pvrdma_uc_of(core, cq->ctx_handle)->refs--;
    }
    pvrdma_table_remove(&core->cq_tbl, cq->handle);
    g_free(cq->pages);
    g_free(cq);
}

static void pvrdma_xrcd_free(PvrdmaCore *core, PvrdmaXrcd *xrcd)
{
    pvrdma_table_remove(&core->xrcd_tbl, xrcd->handle);
    g_free(xrcd);
}

static PvrdmaXrcd *pvrdma_xrcd_of(PvrdmaCore *core, uint32_t handle)
{
    return pvrdma_table_lookup(&core->xrcd_tbl, handle);
}

/* XRC_TGT QPs bound to @srq (pvrdma_core_xrc_bind()) forget it. */
static void pvrdma_srq_unbind_xrc(PvrdmaCore *core, PvrdmaSrq *srq)
{
    PvrdmaQp *qp;
    uint32_t h;

    PVRDMA_TABLE_FOREACH(&core->qp_tbl, h, qp) {
        if (qp->type == PVRDMA_QPT_XRC_TGT && qp->has_srq &&
            qp->srq_handle == srq->handle) {
            pvrdma_core_xrc_bind(core, qp, UINT32_MAX);
        }
    }
}

static void pvrdma_srq_free(PvrdmaCore *core, PvrdmaSrq *srq)
{
    if (srq->xrc) {
        pvrdma_srq_unbind_xrc(core, srq);
        pvrdma_xrcd_of(core, srq->xrcd_handle)->refs--;
        ((PvrdmaCq *)pvrdma_table_lookup(&core->cq_tbl,
                                         srq->cq_handle))->refs--;
    }
    if (core->be_ops->srq_destroy) {
        core->be_ops->srq_destroy(core->be, srq);
    }
    pvrdma_core_uncharge_pages(core, srq->npages);
    pvrdma_pd_of(core, srq->pd_handle)->refs--;
    pvrdma_table_remove(&core->srq_tbl, srq->handle);
    g_free(srq->pages);
    g_free(srq);
}

static void pvrdma_mcast_leave_all(PvrdmaCore *core, PvrdmaQp *qp);

static void pvrdma_qp_free(PvrdmaCore *core, PvrdmaQp *qp)
{
    if (qp->mcast_groups) {
        pvrdma_mcast_leave_all(core, qp);
    }
    pvrdma_wq_qp_destroy(core, qp);
    if (core->be_ops->qp_destroy) {
        core->be_ops->qp_destroy(core->be, qp);
    }
    pvrdma_core_uncharge_pages(core, qp->npages);
    if (qp->type == PVRDMA_QPT_XRC_TGT) {
        /* No PD, CQ or SRQ of its own: its binding counts nothing. */
        pvrdma_xrcd_of(core, qp->xrcd_handle)->refs--;
    } else {
        pvrdma_pd_of(core, qp->pd_handle)->refs--;
        pvrdma_qp_send_cq(core, qp)->refs--;
        pvrdma_qp_recv_cq(core, qp)->refs--;
        if (qp->has_srq) {
            pvrdma_qp_srq(core, qp)->refs--;
        }
    }
    pvrdma_table_remove(&core->qp_tbl, qp->handle);
    g_free(qp->pages);
    g_free(qp);
}

static void pvrdma_gid_clear(PvrdmaCore *core, uint32_t index)
{
    if (core->gids[index].bound && core->be_ops->gid_unbind) {
        core->be_ops->gid_unbind(core->be, index);
    }
    memset(&core->gids[index], 0, sizeof(core->gids[index]));
}

void pvrdma_cmd_destroy_all(PvrdmaCore *core)
{
    uint32_t h;
    void *obj;

    /* Children before parents, so every refcount drops to zero. */
    PVRDMA_TABLE_FOREACH(&core->qp_tbl, h, obj) {
        pvrdma_qp_free(core, obj);
    }
    PVRDMA_TABLE_FOREACH(&core->srq_tbl, h, obj) {
        pvrdma_srq_free(core, obj);
    }
    PVRDMA_TABLE_FOREACH(&core->xrcd_tbl, h, obj) {
        pvrdma_xrcd_free(core, obj);
    }
    PVRDMA_TABLE_FOREACH(&core->mr_tbl, h, obj) {
        pvrdma_mr_free(core, obj);
    }
    PVRDMA_TABLE_FOREACH(&core->cq_tbl, h, obj) {
        pvrdma_cq_free(core, obj);
    }
    PVRDMA_TABLE_FOREACH(&core->pd_tbl, h, obj) {
        pvrdma_pd_free(core, obj);
    }
    PVRDMA_TABLE_FOREACH(&core->uc_tbl, h, obj) {
        pvrdma_uc_free(core, obj);
    }
    for (h = 0; h < core->cfg.gid_tbl_len; h++) {
        pvrdma_gid_clear(core, h);
    }
}

/* ---- port ---------------------------------------------------------------- */

static int pvrdma_cmd_query_port(PvrdmaCore *core,
                                 const union pvrdma_cmd_req *req,
                                 union pvrdma_cmd_resp *resp)
{
    const struct pvrdma_cmd_query_port *c = &req->query_port;
    struct pvrdma_port_attr *a = &resp->query_port_resp.attrs;

    if (c->port_num != 1 || !MBZ(c->reserved)) {
        GERR(core, QUERY_PORT_BAD_PORT_RESERVED_BYTES,
             "QUERY_PORT: bad port %u or reserved bytes",
             c->port_num);
        return -EINVAL;
    }
    a->state = PVRDMA_PORT_ACTIVE;
    a->max_mtu = PVRDMA_MTU_4096;
    a->active_mtu = PVRDMA_MTU_4096;
    a->gid_tbl_len = core->cfg.gid_tbl_len;
    a->port_cap_flags = PVRDMA_IB_PORT_IP_BASED_GIDS | PVRDMA_IB_PORT_CM_SUP;
    a->max_msg_sz = PVRDMA_PORT_MAX_MSG_SZ;
    a->pkey_tbl_len = 1;
    a->max_vl_num = 1;
    a->active_width = PVRDMA_IB_WIDTH_4X;
    a->active_speed = PVRDMA_IB_SPEED_DDR;
    a->phys_state = PVRDMA_IB_PHYS_STATE_LINK_UP;
    return 0;
}

static int pvrdma_cmd_query_pkey(PvrdmaCore *core,
                                 const union pvrdma_cmd_req *req,
                                 union pvrdma_cmd_resp *resp)
{
    const struct pvrdma_cmd_query_pkey *c = &req->query_pkey;

    if (c->port_num != 1 || c->index != 0 || !MBZ(c->reserved)) {
        GERR(core, QUERY_PKEY_BAD_PORT_INDEX_RESERVED,
             "QUERY_PKEY: bad port %u / index %u or reserved bytes",
             c->port_num, c->index);
        return -EINVAL;
    }
    resp->query_pkey_resp.pkey = 0xFFFF;
    return 0;
}

/* ---- user contexts ------------------------------------------------------- */

static int pvrdma_cmd_create_uc(PvrdmaCore *core,
                                const union pvrdma_cmd_req *req,
                                union pvrdma_cmd_resp *resp)
{
    const struct pvrdma_cmd_create_uc *c = &req->create_uc;
    uint64_t pfn = c->pfn64, base;
    uint32_t idx, handle;
    PvrdmaUc *uc;
    int ret;

    /* Before version 19 the PFN is 32 bits and the rest is reserved. */
    if (core->driver_version < PVRDMA_VERSION_PPN64 && (pfn >> 32) != 0) {
        GERR(core, CREATE_UC_RESERVED_BYTES,
             "CREATE_UC: reserved bytes after the 32-bit pfn");
        return -EINVAL;
    }
    base = core->uar_base_known ? core->uar_base >> PVRDMA_PAGE_SHIFT :
           core->uar_pfn;
    if (pfn < base || pfn - base >= core->cfg.uar_pages || pfn == base) {
        GERR(core, CREATE_UC_PFN_NOT_USER_UAR,
             "CREATE_UC: pfn 0x%" G_GINT64_MODIFIER "x is not a user "
             "UAR page", pfn);
        return -EINVAL;
    }
    idx = pfn - base;
    if (core->uar_owner[idx]) {
        GERR(core, CREATE_UC_UAR_PAGE_ALREADY_OWNED,
             "CREATE_UC: UAR page %u already owned by context %u",
             idx, core->uar_owner[idx]);
        return -EBUSY;
    }
    uc = g_new0(PvrdmaUc, 1);
    ret = pvrdma_table_insert(&core->uc_tbl, uc, &handle);
    if (ret < 0) {
        g_free(uc);
        return ret;
    }
    uc->handle = handle;
    uc->uar_index = idx;
    core->uar_owner[idx] = handle;
    resp->create_uc_resp.ctx_handle = handle;
    return 0;
}

static int pvrdma_cmd_destroy_uc(PvrdmaCore *core,
                                 const union pvrdma_cmd_req *req,
                                 union pvrdma_cmd_resp *resp G_GNUC_UNUSED)
{
    const struct pvrdma_cmd_destroy_uc *c = &req->destroy_uc;
    PvrdmaUc *uc = pvrdma_table_lookup(&core->uc_tbl, c->ctx_handle);

    if (!uc || !MBZ(c->reserved)) {
        GERR(core, DESTROY_UC_BAD_CONTEXT,
             "DESTROY_UC: bad context %u", c->ctx_handle);
        return -EINVAL;
    }
    if (uc->refs) {
        GERR(core, DESTROY_UC_CONTEXT_STILL_OBJECTS,
             "DESTROY_UC: context %u still has %u objects",
             uc->handle, uc->refs);
        return -EBUSY;
    }
    pvrdma_uc_free(core, uc);
    return 0;
}

/* ---- protection domains -------------------------------------------------- */

static int pvrdma_cmd_create_pd(PvrdmaCore *core,
                                const union pvrdma_cmd_req *req,
                                union pvrdma_cmd_resp *resp)
{
    const struct pvrdma_cmd_create_pd *c = &req->create_pd;
    PvrdmaUc *uc;
    PvrdmaPd *pd;
    uint32_t handle;
    int ret;

    if (!MBZ(c->reserved) || !pvrdma_lookup_ctx(core, c->ctx_handle, &uc)) {
        GERR(core, CREATE_PD_BAD_CONTEXT,
             "CREATE_PD: bad context %u", c->ctx_handle);
        return -EINVAL;
    }
    pd = g_new0(PvrdmaPd, 1);
    ret = pvrdma_table_insert(&core->pd_tbl, pd, &handle);
    if (ret < 0) {
        g_free(pd);
        return ret;
    }
    pd->handle = handle;
    pd->ctx_handle = c->ctx_handle;
    if (core->be_ops->pd_create) {
        ret = core->be_ops->pd_create(core->be, pd);
        if (ret < 0) {
            pvrdma_table_remove(&core->pd_tbl, handle);
            g_free(pd);
            return ret;
        }
    }
    if (uc) {
        uc->refs++;
    }
    resp->create_pd_resp.pd_handle = handle;
    return 0;
}

static int pvrdma_cmd_destroy_pd(PvrdmaCore *core,
                                 const union pvrdma_cmd_req *req,
                                 union pvrdma_cmd_resp *resp G_GNUC_UNUSED)
{
    const struct pvrdma_cmd_destroy_pd *c = &req->destroy_pd;
    PvrdmaPd *pd = pvrdma_table_lookup(&core->pd_tbl, c->pd_handle);

    if (!pd || !MBZ(c->reserved)) {
        GERR(core, DESTROY_PD_BAD_PD,
             "DESTROY_PD: bad PD %u", c->pd_handle);
        return -EINVAL;
    }
    if (pd->refs) {
        GERR(core, DESTROY_PD_PD_STILL_OBJECTS,
             "DESTROY_PD: PD %u still has %u objects", pd->handle,
             pd->refs);
        return -EBUSY;
    }
    pvrdma_pd_free(core, pd);
    return 0;
}

/* ---- memory regions ------------------------------------------------------ */

static bool pvrdma_access_ok(uint32_t access, uint32_t valid)
{
    uint32_t a = access & ~PVRDMA_ACCESS_OPTIONAL_RANGE;

    if (a & ~valid) {
        return false;
    }
    if ((a & (PVRDMA_ACCESS_REMOTE_WRITE | PVRDMA_ACCESS_REMOTE_ATOMIC)) &&
        !(a & PVRDMA_ACCESS_LOCAL_WRITE)) {
        return false;
    }
    return true;
}

/* Validates a user MR; fills @npages.  No DMA. */
static int pvrdma_mr_check_user(PvrdmaCore *core,
                                const struct pvrdma_cmd_create_mr *c,
                                uint32_t *npages)
{
    uint64_t pages;

    if (c->length == 0 || c->length > core->cfg.max_mr_size) {
        GERR(core, CREATE_MR_LENGTH_OUT_OF_RANGE,
             "CREATE_MR: length %" G_GUINT64_FORMAT " out of range "
             "1..%" G_GUINT64_FORMAT, (uint64_t)c->length,
             core->cfg.max_mr_size);
        return -EINVAL;
    }
    if (c->length - 1 > UINT64_MAX - c->start) {
        GERR(core, CREATE_MR_START_LENGTH_OVERFLOWS,
             "CREATE_MR: start + length overflows");
        return -EINVAL;
    }
    /* length <= 1 GiB, so no overflow here. */
    pages = ((c->start & (PVRDMA_PAGE_SIZE - 1)) + c->length +
             PVRDMA_PAGE_SIZE - 1) >> PVRDMA_PAGE_SHIFT;
    if (c->nchunks != pages || pages > PVRDMA_PDIR_MAX_PAGES) {
        GERR(core, CREATE_MR_NCHUNKS_RANGE_SPANS_PAGES,
             "CREATE_MR: nchunks %u, range spans %" G_GUINT64_FORMAT
             " pages", c->nchunks, pages);
        return -EINVAL;
    }
    *npages = pages;
    return 0;
}

static int pvrdma_cmd_create_mr(PvrdmaCore *core,
                                const union pvrdma_cmd_req *req,
                                union pvrdma_cmd_resp *resp)
{
    const struct pvrdma_cmd_create_mr *c = &req->create_mr;
    PvrdmaPd *pd = pvrdma_table_lookup(&core->pd_tbl, c->pd_handle);
    uint64_t *pages = NULL, quota = 0;
    uint32_t npages = 0, handle;
    PvrdmaMr *mr;
    int ret;

    if (!pd) {
        GERR(core, CREATE_MR_BAD_PD,
             "CREATE_MR: bad PD %u", c->pd_handle);
        return -EINVAL;
    }
    /* Windows are an extension: unknown flags where it is not offered. */
    if (!(core->caps.ex_comp_mask & PVRDMA_EX_CAP_MW) &&
        (c->flags == PVRDMA_MR_FLAG_MW_TYPE1 ||
         c->flags == PVRDMA_MR_FLAG_MW_TYPE2)) {
        GERR(core, CREATE_MR_UNKNOWN_FLAGS,
             "CREATE_MR: unknown flags 0x%x", c->flags);
        return -EINVAL;
    }
    switch (c->flags) {
    case 0:
        if (!pvrdma_access_ok(c->access_flags, PVRDMA_MR_ACCESS_VALID)) {
            goto bad_access;
        }
        ret = pvrdma_mr_check_user(core, c, &npages);
        if (ret < 0) {
            return ret;
        }
        quota = npages;
        break;
    case PVRDMA_MR_FLAG_DMA:
        if ((c->access_flags & ~PVRDMA_ACCESS_OPTIONAL_RANGE) &
            ~PVRDMA_ACCESS_LOCAL_WRITE) {
            goto bad_access;
        }
        if (c->start || c->length || c->pdir_dma || c->nchunks) {
            GERR(core, CREATE_MR_DMA_MR_START_LENGTH,
                 "CREATE_MR: DMA MR with start/length/pdir/nchunks");
            return -EINVAL;
        }
        break;
    case PVRDMA_MR_FLAG_FRMR:
        if (!pvrdma_access_ok(c->access_flags, PVRDMA_MR_ACCESS_VALID)) {
            goto bad_access;
        }
        if (c->start || c->length || c->pdir_dma || c->nchunks == 0 ||
            c->nchunks > PVRDMA_MAX_FAST_REG_PAGES) {
            GERR(core, CREATE_MR_FAST_REG_MR_MAX,
                 "CREATE_MR: fast-reg MR with max_num_sg %u (1..%u) "
                 "or start/length/pdir set", c->nchunks,
                 PVRDMA_MAX_FAST_REG_PAGES);
            return -EINVAL;
        }
        /* The page list bound later is charged now. */
        quota = c->nchunks;
        break;
    case PVRDMA_MR_FLAG_MW_TYPE1:
    case PVRDMA_MR_FLAG_MW_TYPE2:
        /* A memory window: keys only, bound later (BIND_MW). */
        if (c->start || c->length || c->pdir_dma || c->nchunks ||
            c->access_flags) {
            GERR(core, CREATE_MR_MEMORY_WINDOW_START_LENGTH,
                 "CREATE_MR: memory window with start/length/pdir/"
                 "nchunks/access");
            return -EINVAL;
        }
        break;
    default:
        GERR(core, CREATE_MR_UNKNOWN_FLAGS,
             "CREATE_MR: unknown flags 0x%x", c->flags);
        return -EINVAL;
    }
    if (pvrdma_table_full(&core->mr_tbl)) {
        return -ENOMEM;
    }
    ret = pvrdma_core_charge_pages(core, quota);
    if (ret < 0) {
        return ret;
    }
    if (npages) {
        ret = pvrdma_pdir_read(core, c->pdir_dma, npages, &pages);
        if (ret < 0) {
            pvrdma_core_uncharge_pages(core, quota);
            return ret;
        }
    }
    mr = g_new0(PvrdmaMr, 1);
    ret = pvrdma_table_insert(&core->mr_tbl, mr, &handle);
    if (ret < 0) {
        goto fail_free;
    }
    mr->handle = handle;
    mr->pd_handle = pd->handle;
    mr->flags = c->flags;
    mr->access = c->access_flags & ~PVRDMA_ACCESS_OPTIONAL_RANGE;
    mr->start = c->start;
    mr->length = c->length;
    mr->pages = pages;
    mr->npages = npages;
    mr->max_sg = c->flags == PVRDMA_MR_FLAG_FRMR ? c->nchunks : 0;
    mr->quota_pages = quota;
    if (mr->max_sg) {
        /* max_sg <= PVRDMA_MAX_FAST_REG_PAGES, charged as pinned pages. */
        mr->frmr_pages = g_new0(uint64_t, mr->max_sg);
    }
    mr->lkey = (handle << 8) | pvrdma_table_gen(&core->mr_tbl, handle);
    mr->rkey = mr->lkey;
    if (core->be_ops->mr_register) {
        ret = core->be_ops->mr_register(core->be, mr);
        if (ret < 0) {
            pvrdma_table_remove(&core->mr_tbl, handle);
            g_free(mr->frmr_pages);
            goto fail_free;
        }
    }
    if ((mr->lkey >> 8) != handle) {
        /* The backend chose the keys (they index its own objects). */
        if (!core->key_mrs) {
            core->key_mrs = g_hash_table_new(NULL, NULL);
        }
        g_hash_table_insert(core->key_mrs, GUINT_TO_POINTER(mr->lkey >> 8),
                            mr);
    }
    pd->refs++;
    resp->create_mr_resp.mr_handle = handle;
    /* A window's key is an rkey only (it names no local memory). */
    resp->create_mr_resp.lkey = pvrdma_mr_is_mw(mr) ? 0 : mr->lkey;
    resp->create_mr_resp.rkey = mr->rkey;
    return 0;

fail_free:
    g_free(mr);
    g_free(pages);
    pvrdma_core_uncharge_pages(core, quota);
    return ret;

bad_access:
    GERR(core, CREATE_MR_ACCESS_FLAGS_NOT_ALLOWED,
         "CREATE_MR: access flags 0x%x not allowed for flags %u",
         c->access_flags, c->flags);
    return -EINVAL;
}

static int pvrdma_cmd_destroy_mr(PvrdmaCore *core,
                                 const union pvrdma_cmd_req *req,
                                 union pvrdma_cmd_resp *resp G_GNUC_UNUSED)
{
    const struct pvrdma_cmd_destroy_mr *c = &req->destroy_mr;
    PvrdmaMr *mr = pvrdma_table_lookup(&core->mr_tbl, c->mr_handle);

    if (!mr || !MBZ(c->reserved)) {
        GERR(core, DESTROY_MR_BAD_MR,
             "DESTROY_MR: bad MR %u", c->mr_handle);
        return -EINVAL;
    }
    /* IBA 11.2.8.4: not while memory windows are bound to it. */
    if (mr->mw_binds) {
        GERR(core, DESTROY_MR_MR_MEMORY_WINDOWS_BOUND,
             "DESTROY_MR: MR %u has %u memory windows bound",
             mr->handle, mr->mw_binds);
        return -EBUSY;
    }
    pvrdma_mr_free(core, mr);
    return 0;
}

/*
 * MODIFY_MR (project extension PVRDMA_EX_CAP_MODIFY_MR): a user MR takes
 * new access flags or another PD of its context in place, keeping its
 * keys and pages, so rkeys already handed to peers stay valid.  Only
 * where the backend keeps no registration of its own (the cap says so).
 */
static int pvrdma_cmd_modify_mr(PvrdmaCore *core,
                                const union pvrdma_cmd_req *req,
                                union pvrdma_cmd_resp *resp G_GNUC_UNUSED)
{
    const struct pvrdma_cmd_modify_mr *c = &req->modify_mr;
    PvrdmaMr *mr = pvrdma_table_lookup(&core->mr_tbl, c->mr_handle);
    PvrdmaPd *old, *pd = NULL;

    if (!(core->caps.ex_comp_mask & PVRDMA_EX_CAP_MODIFY_MR)) {
        GERR(core, UNKNOWN_COMMAND, "unknown command %u",
             PVRDMA_CMD_MODIFY_MR);
        return -EINVAL;
    }
    if (!mr || mr->flags != 0 || !c->flags ||
        (c->flags & ~(PVRDMA_MODIFY_MR_ACCESS | PVRDMA_MODIFY_MR_PD))) {
        GERR(core, MODIFY_MR_BAD_MR_FLAGS,
             "MODIFY_MR: bad user MR %u or flags 0x%x",
             c->mr_handle, c->flags);
        return -EINVAL;
    }
    if ((c->flags & PVRDMA_MODIFY_MR_ACCESS) &&
        !pvrdma_access_ok(c->access_flags, PVRDMA_MR_ACCESS_VALID)) {
        GERR(core, MODIFY_MR_ACCESS_FLAGS_NOT_ALLOWED,
             "MODIFY_MR: access flags 0x%x not allowed", c->access_flags);
        return -EINVAL;
    }
    old = pvrdma_table_lookup(&core->pd_tbl, mr->pd_handle);
    if (c->flags & PVRDMA_MODIFY_MR_PD) {
        pd = pvrdma_table_lookup(&core->pd_tbl, c->pd_handle);
        if (!pd || !old || pd->ctx_handle != old->ctx_handle) {
            GERR(core, MODIFY_MR_BAD_PD,
                 "MODIFY_MR: bad PD %u for MR %u", c->pd_handle, mr->handle);
            return -EINVAL;
        }
    }
    /* As DESTROY_MR (IBA 11.2.8.4): not while windows are bound to it. */
    if (mr->mw_binds) {
        GERR(core, MODIFY_MR_MEMORY_WINDOWS_BOUND,
             "MODIFY_MR: MR %u has %u memory windows bound",
             mr->handle, mr->mw_binds);
        return -EBUSY;
    }
    if (c->flags & PVRDMA_MODIFY_MR_ACCESS) {
        mr->access = c->access_flags & ~PVRDMA_ACCESS_OPTIONAL_RANGE;
    }
    if (pd && pd != old) {
        old->refs--;
        pd->refs++;
        mr->pd_handle = pd->handle;
    }
    return 0;
}

/* ---- multicast ----------------------------------------------------------- */

bool pvrdma_mcast_gid(const uint8_t gid[16])
{
    static const uint8_t v4mapped[12] = {
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
    };

    /* IPv6 multicast, or an IPv4-mapped 224.0.0.0/4 (RoCE v2). */
    return gid[0] == 0xff ||
           (!memcmp(gid, v4mapped, sizeof(v4mapped)) &&
            (gid[12] & 0xf0) == 0xe0);
}

static PvrdmaMcast *pvrdma_mcast_find(PvrdmaCore *core,
                                      const uint8_t mgid[16])
{
    for (uint32_t i = 0; i < core->cfg.mcast_groups; i++) {
        PvrdmaMcast *g = &core->mcast[i];

        if (g->nqps && !memcmp(g->mgid, mgid, 16)) {
            return g;
        }
    }
    return NULL;
}

static int pvrdma_mcast_backend(PvrdmaCore *core, PvrdmaQp *qp,
                                const uint8_t mgid[16], bool join)
{
    return core->be_ops->mcast_attach ?
           core->be_ops->mcast_attach(core->be, qp, mgid, join) : 0;
}

static void pvrdma_mcast_changed(PvrdmaCore *core)
{
    if (core->be_ops->mcast_changed) {
        core->be_ops->mcast_changed(core->be);
    }
}

/* Drop @qp from @g (keeping the others' order); true if @g emptied. */
static bool pvrdma_mcast_drop(PvrdmaMcast *g, PvrdmaQp *qp)
{
    for (uint32_t i = 0; i < g->nqps; i++) {
        if (g->qps[i] == qp->handle) {
            memmove(&g->qps[i], &g->qps[i + 1],
                    (g->nqps - i - 1) * sizeof(g->qps[0]));
            g->nqps--;
            qp->mcast_groups--;
            return g->nqps == 0;
        }
    }
    return false;
}

/* A QP going away leaves its groups. */
static void pvrdma_mcast_leave_all(PvrdmaCore *core, PvrdmaQp *qp)
{
    bool changed = false;

    for (uint32_t i = 0; i < core->cfg.mcast_groups && qp->mcast_groups;
         i++) {
        if (core->mcast[i].nqps) {
            changed |= pvrdma_mcast_drop(&core->mcast[i], qp);
        }
    }
    if (changed) {
        pvrdma_mcast_changed(core);
    }
}

unsigned pvrdma_core_mcast_qps(PvrdmaCore *core, const uint8_t mgid[16],
                               PvrdmaQp **qps, unsigned max)
{
    PvrdmaMcast *g = pvrdma_mcast_find(core, mgid);
    unsigned n = 0;

    for (uint32_t i = 0; g && i < g->nqps && n < max; i++) {
        qps[n] = pvrdma_table_lookup(&core->qp_tbl, g->qps[i]);
        n += qps[n] != NULL;
    }
    return n;
}

unsigned pvrdma_core_mcast_groups(PvrdmaCore *core, uint8_t (*mgids)[16],
                                  unsigned max)
{
    unsigned n = 0;

    for (uint32_t i = 0; i < core->cfg.mcast_groups && n < max; i++) {
        if (core->mcast[i].nqps) {
            memcpy(mgids[n++], core->mcast[i].mgid, 16);
        }
    }
    return n;
}

/*
 * ATTACH_MCAST (project extension PVRDMA_EX_CAP_MCAST): a UD QP joins a
 * group; joining twice is no error (as with rxe).  The device's groups
 * (mcast-groups) and the QPs of one group (mcast-qps) are bounded:
 * beyond them, ENOMEM.
 */
static int pvrdma_cmd_attach_mcast(PvrdmaCore *core,
                                   const union pvrdma_cmd_req *req,
                                   union pvrdma_cmd_resp *resp G_GNUC_UNUSED)
{
    const struct pvrdma_cmd_mcast *c = &req->mcast;
    PvrdmaQp *qp = pvrdma_table_lookup(&core->qp_tbl, c->qp_handle);
    PvrdmaMcast *g, *free_slot = NULL;
    int ret;

    if (!(core->caps.ex_comp_mask & PVRDMA_EX_CAP_MCAST)) {
        GERR(core, UNKNOWN_COMMAND, "unknown command %u",
             PVRDMA_CMD_ATTACH_MCAST);
        return -EINVAL;
    }
    if (!qp || qp->type != PVRDMA_QPT_UD || !MBZ(c->reserved)) {
        GERR(core, ATTACH_MCAST_BAD_QP,
             "ATTACH_MCAST: bad QP %u (a UD QP) or reserved bytes",
             c->qp_handle);
        return -EINVAL;
    }
    if (!pvrdma_mcast_gid(c->mgid)) {
        GERR(core, ATTACH_MCAST_NOT_MULTICAST,
             "ATTACH_MCAST: QP %u: the group's GID is not multicast",
             c->qp_handle);
        return -EINVAL;
    }
    g = pvrdma_mcast_find(core, c->mgid);
    if (g) {
        for (uint32_t i = 0; i < g->nqps; i++) {
            if (g->qps[i] == qp->handle) {
                return 0;
            }
        }
        if (g->nqps >= core->cfg.mcast_qps) {
            GERR(core, ATTACH_MCAST_GROUP_FULL,
                 "ATTACH_MCAST: QP %u: the group has %u QPs (mcast-qps)",
                 qp->handle, g->nqps);
            return -ENOMEM;
        }
        ret = pvrdma_mcast_backend(core, qp, c->mgid, true);
        if (ret < 0) {
            return ret;
        }
        g->qps[g->nqps++] = qp->handle;
        qp->mcast_groups++;
        return 0;
    }
    for (uint32_t i = 0; i < core->cfg.mcast_groups && !free_slot; i++) {
        if (!core->mcast[i].nqps) {
            free_slot = &core->mcast[i];
        }
    }
    if (!free_slot) {
        GERR(core, ATTACH_MCAST_GROUPS_FULL,
             "ATTACH_MCAST: QP %u: all %u groups in use (mcast-groups)",
             qp->handle, core->cfg.mcast_groups);
        return -ENOMEM;
    }
    ret = pvrdma_mcast_backend(core, qp, c->mgid, true);
    if (ret < 0) {
        return ret;
    }
    if (!free_slot->qps) {
        free_slot->qps = g_new(uint32_t, core->cfg.mcast_qps);
    }
    memcpy(free_slot->mgid, c->mgid, 16);
    free_slot->qps[0] = qp->handle;
    free_slot->nqps = 1;
    qp->mcast_groups++;
    pvrdma_mcast_changed(core);
    return 0;
}

static int pvrdma_cmd_detach_mcast(PvrdmaCore *core,
                                   const union pvrdma_cmd_req *req,
                                   union pvrdma_cmd_resp *resp G_GNUC_UNUSED)
{
    const struct pvrdma_cmd_mcast *c = &req->mcast;
    PvrdmaQp *qp = pvrdma_table_lookup(&core->qp_tbl, c->qp_handle);
    PvrdmaMcast *g;
    uint32_t before;

    if (!(core->caps.ex_comp_mask & PVRDMA_EX_CAP_MCAST)) {
        GERR(core, UNKNOWN_COMMAND, "unknown command %u",
             PVRDMA_CMD_DETACH_MCAST);
        return -EINVAL;
    }
    if (!qp || !MBZ(c->reserved)) {
        GERR(core, DETACH_MCAST_BAD_QP,
             "DETACH_MCAST: bad QP %u or reserved bytes", c->qp_handle);
        return -EINVAL;
    }
    g = pvrdma_mcast_find(core, c->mgid);
    before = qp->mcast_groups;
    if (g && pvrdma_mcast_drop(g, qp)) {
        pvrdma_mcast_changed(core);
    }
    if (qp->mcast_groups == before) {
        GERR(core, DETACH_MCAST_NOT_ATTACHED,
             "DETACH_MCAST: QP %u is not attached to that group",
             qp->handle);
        return -EINVAL;
    }
    /* Left here whatever the host says (its QP leaves when destroyed). */
    pvrdma_mcast_backend(core, qp, c->mgid, false);
    return 0;
}

/* ---- counters ------------------------------------------------------------ */

/*
 * QUERY_COUNTERS (project extension PVRDMA_EX_CAP_COUNTERS): up to
 * PVRDMA_CTR_PER_QUERY of the port's counters from index @first; the
 * link counters are the backend's (0 without links).
 */
static int pvrdma_cmd_query_counters(PvrdmaCore *core,
                                     const union pvrdma_cmd_req *req,
                                     union pvrdma_cmd_resp *resp)
{
    const struct pvrdma_cmd_query_counters *c = &req->query_counters;
    struct pvrdma_cmd_query_counters_resp *r = &resp->query_counters_resp;
    uint64_t up = 0, downed = 0;
    uint32_t i;

    if (c->first >= PVRDMA_CTR_NUM || !MBZ(c->reserved)) {
        GERR(core, QUERY_COUNTERS_BAD_FIRST_RESERVED,
             "QUERY_COUNTERS: bad first counter %u or reserved bytes",
             c->first);
        return -EINVAL;
    }
    if (core->be_ops->link_counts) {
        core->be_ops->link_counts(core->be, &up, &downed);
    }
    core->ctr[PVRDMA_CTR_LINKS_UP] = up;
    core->ctr[PVRDMA_CTR_LINK_DOWNED] = downed;
    r->first = c->first;
    r->total = PVRDMA_CTR_NUM;
    for (i = 0; i < PVRDMA_CTR_PER_QUERY && c->first + i < PVRDMA_CTR_NUM;
         i++) {
        r->value[i] = core->ctr[c->first + i];
    }
    return 0;
}

/* ---- completion queues --------------------------------------------------- */

/*
 * The @nchunks pages a ring's page directory at @pdir_dma lists, charged
 * to the pinned-pages quota and read into *@pages.  On an error nothing
 * stays charged or allocated.
 */
/* ---- XRC domains (project extension PVRDMA_EX_CAP_XRC) ------------------ */

static bool pvrdma_xrc_offered(PvrdmaCore *core)
{
    return core->caps.ex_comp_mask & PVRDMA_EX_CAP_XRC;
}

static int pvrdma_cmd_create_xrcd(PvrdmaCore *core,
                                  const union pvrdma_cmd_req *req,
                                  union pvrdma_cmd_resp *resp)
{
    const struct pvrdma_cmd_create_xrcd *c = &req->create_xrcd;
    PvrdmaXrcd *xrcd;
    uint32_t handle;
    int ret;

    if (!pvrdma_xrc_offered(core)) {
        GERR(core, UNKNOWN_COMMAND, "unknown command %u",
             PVRDMA_CMD_CREATE_XRCD);
        return -EINVAL;
    }
    if (!MBZ(c->reserved)) {
        GERR(core, CREATE_XRCD_RESERVED_BYTES,
             "CREATE_XRCD: reserved bytes not zero");
        return -EINVAL;
    }
    xrcd = g_new0(PvrdmaXrcd, 1);
    ret = pvrdma_table_insert(&core->xrcd_tbl, xrcd, &handle);
    if (ret < 0) {
        g_free(xrcd);
        return ret;
    }
    xrcd->handle = handle;
    resp->create_xrcd_resp.xrcd_handle = handle;
    return 0;
}

static int pvrdma_cmd_destroy_xrcd(PvrdmaCore *core,
                                   const union pvrdma_cmd_req *req,
                                   union pvrdma_cmd_resp *resp G_GNUC_UNUSED)
{
    const struct pvrdma_cmd_destroy_xrcd *c = &req->destroy_xrcd;
    PvrdmaXrcd *xrcd = pvrdma_xrcd_of(core, c->xrcd_handle);

    if (!pvrdma_xrc_offered(core)) {
        GERR(core, UNKNOWN_COMMAND, "unknown command %u",
             PVRDMA_CMD_DESTROY_XRCD);
        return -EINVAL;
    }
    if (!xrcd || !MBZ(c->reserved)) {
        GERR(core, DESTROY_XRCD_BAD_XRCD,
             "DESTROY_XRCD: bad XRC domain %u", c->xrcd_handle);
        return -EINVAL;
    }
    if (xrcd->refs) {
        GERR(core, DESTROY_XRCD_STILL_USED,
             "DESTROY_XRCD: XRC domain %u still has %u SRQs and QPs",
             xrcd->handle, xrcd->refs);
        return -EBUSY;
    }
    pvrdma_xrcd_free(core, xrcd);
    return 0;
}

static int pvrdma_ring_pages_take(PvrdmaCore *core, uint64_t pdir_dma,
                                  uint32_t nchunks, uint64_t **pages)
{
    int ret = pvrdma_core_charge_pages(core, nchunks);

    if (ret < 0) {
        return ret;
    }
    ret = pvrdma_pdir_read(core, pdir_dma, nchunks, pages);
    if (ret < 0) {
        pvrdma_core_uncharge_pages(core, nchunks);
    }
    return ret;
}

/*
 * The ring of a CQ of @cqe entries in the @nchunks pages listed at
 * @pdir_dma (page 0 the ring state, CQEs from page 1), as CREATE_CQ and
 * RESIZE_CQ give it: checked, charged to the pinned-pages quota, its page
 * list read into *@pages and @ring set up.  On an error nothing stays
 * charged or allocated.
 */
static int pvrdma_cq_ring_new(PvrdmaCore *core, bool resize, uint32_t cqe,
                              uint32_t nchunks, uint64_t pdir_dma,
                              uint64_t **pages, PvrdmaRing *ring)
{
    uint64_t need;
    int ret;

    if (!pvrdma_is_pow2(cqe) || cqe > core->cfg.max_cqe) {
        if (resize) {
            GERR(core, RESIZE_CQ_CQE_NOT_POWER_TWO,
                 "RESIZE_CQ: cqe %u not a power of two in 1..%u", cqe,
                 core->cfg.max_cqe);
        } else {
            GERR(core, CREATE_CQ_CQE_NOT_POWER_TWO,
                 "CREATE_CQ: cqe %u not a power of two in 1..%u", cqe,
                 core->cfg.max_cqe);
        }
        return -EINVAL;
    }
    need = pvrdma_pages_for((uint64_t)cqe * PVRDMA_CQE_SIZE);
    if (nchunks < 1 || !pvrdma_ring_pages_ok(nchunks - 1ull, need)) {
        if (resize) {
            GERR(core, RESIZE_CQ_NCHUNKS_CQES_NEED_1,
                 "RESIZE_CQ: nchunks %u for %u CQEs (need 1 + %"
                 G_GUINT64_FORMAT ")", nchunks, cqe, need);
        } else {
            GERR(core, CREATE_CQ_NCHUNKS_CQES_NEED_1,
                 "CREATE_CQ: nchunks %u for %u CQEs (need 1 + %"
                 G_GUINT64_FORMAT ")", nchunks, cqe, need);
        }
        return -EINVAL;
    }
    ret = pvrdma_ring_pages_take(core, pdir_dma, nchunks, pages);
    if (ret < 0) {
        return ret;
    }
    if (!pvrdma_ring_init(ring, *pages, nchunks, 1, nchunks - 1, cqe,
                          PVRDMA_CQE_SIZE, PVRDMA_RING_STATE_RX_OFFSET)) {
        g_free(*pages);
        pvrdma_core_uncharge_pages(core, nchunks);
        return -EINVAL;
    }
    return 0;
}

static int pvrdma_cmd_create_cq(PvrdmaCore *core,
                                const union pvrdma_cmd_req *req,
                                union pvrdma_cmd_resp *resp)
{
    const struct pvrdma_cmd_create_cq *c = &req->create_cq;
    /* reserved[0]: PVRDMA_CQ_FLAG_TIMESTAMP where offered (extension). */
    uint8_t flags_ok = core->caps.ex_comp_mask & PVRDMA_EX_CAP_CQE_TIMESTAMP ?
                       PVRDMA_CQ_FLAG_TIMESTAMP : 0;
    uint32_t handle;
    PvrdmaRing ring;
    PvrdmaUc *uc;
    PvrdmaCq *cq;
    uint64_t *pages;
    int ret;

    if ((c->reserved[0] & ~flags_ok) ||
        !pvrdma_mbz(c->reserved + 1, sizeof(c->reserved) - 1) ||
        !pvrdma_lookup_ctx(core, c->ctx_handle, &uc)) {
        GERR(core, CREATE_CQ_BAD_CONTEXT,
             "CREATE_CQ: bad context %u or flags 0x%x", c->ctx_handle,
             c->reserved[0]);
        return -EINVAL;
    }
    if (pvrdma_table_full(&core->cq_tbl)) {
        return -ENOMEM;
    }
    ret = pvrdma_cq_ring_new(core, false, c->cqe, c->nchunks, c->pdir_dma,
                             &pages, &ring);
    if (ret < 0) {
        return ret;
    }
    cq = g_new0(PvrdmaCq, 1);
    cq->pages = pages;
    cq->npages = c->nchunks;
    cq->ring = ring;
    ret = pvrdma_table_insert(&core->cq_tbl, cq, &handle);
    if (ret < 0) {
        goto fail_free;
    }
    cq->handle = handle;
    cq->ctx_handle = c->ctx_handle;
    cq->cqe = c->cqe;
    cq->timestamps = c->reserved[0] & PVRDMA_CQ_FLAG_TIMESTAMP;
    if (core->be_ops->cq_create) {
        ret = core->be_ops->cq_create(core->be, cq);
        if (ret < 0) {
            pvrdma_table_remove(&core->cq_tbl, handle);
            goto fail_free;
        }
    }
    if (uc) {
        uc->refs++;
    }
    resp->create_cq_resp.cq_handle = handle;
    resp->create_cq_resp.cqe = c->cqe;
    return 0;

fail_free:
    g_free(cq);
    g_free(pages);
    pvrdma_core_uncharge_pages(core, c->nchunks);
    return ret;
}

/*
 * A new ring's indices after @n entries were copied to its slots 0..:
 * cons_head 0, prod_tail @n (RESIZE_CQ, an SRQ resize).
 */
static int pvrdma_ring_publish(PvrdmaCore *core, PvrdmaRing *ring, uint32_t n)
{
    uint32_t zero = 0, prod_le = GUINT32_TO_LE(n);
    int ret;

    ret = pvrdma_core_dma_write(core, pvrdma_ring_cons_addr(ring), &zero,
                                sizeof(zero));
    if (ret == 0) {
        ret = pvrdma_core_dma_write(core, pvrdma_ring_prod_addr(ring),
                                    &prod_le, sizeof(prod_le));
    }
    return ret;
}

/*
 * Copy the CQEs of @cq not yet polled (cons_head .. the device's prod)
 * into slots 0.. of @ring, which has room for @room of them, and publish
 * them there (cons_head 0, prod_tail the count).  Returns the count, or a
 * negative errno (GERR'd) when the guest's cons_head is invalid or they
 * do not fit.
 */
static int pvrdma_cq_move_cqes(PvrdmaCore *core, PvrdmaCq *cq,
                               PvrdmaRing *ring, uint32_t room)
{
    struct pvrdma_cqe cqe;
    uint32_t cons, idx, n = 0;
    int ret;

    ret = pvrdma_core_dma_read(core, pvrdma_ring_cons_addr(&cq->ring),
                               &cons, sizeof(cons));
    if (ret < 0) {
        return ret;
    }
    cons = GUINT32_FROM_LE(cons);
    if (pvrdma_ring_can_consume(cq->ring.prod, cons, cq->ring.n) < 0) {
        GERR(core, RESIZE_CQ_BAD_CONS_HEAD,
             "RESIZE_CQ: CQ %u has an invalid cons_head 0x%x (N=%u)",
             cq->handle, cons, cq->ring.n);
        return -EINVAL;
    }
    for (idx = cons; idx != cq->ring.prod;
         idx = pvrdma_ring_next(idx, cq->ring.n)) {
        if (n == room) {
            GERR(core, RESIZE_CQ_PENDING_DO_NOT_FIT,
                 "RESIZE_CQ: CQ %u has more CQEs to poll than %u",
                 cq->handle, room);
            return -EINVAL;
        }
        ret = pvrdma_core_dma_read(core,
                                   pvrdma_ring_elem_addr(&cq->ring,
                                       pvrdma_ring_slot(idx, cq->ring.n)),
                                   &cqe, sizeof(cqe));
        if (ret < 0) {
            return ret;
        }
        ret = pvrdma_core_dma_write(core, pvrdma_ring_elem_addr(ring, n),
                                    &cqe, sizeof(cqe));
        if (ret < 0) {
            return ret;
        }
        n++;
    }
    ring->prod = n;
    ret = pvrdma_ring_publish(core, ring, n);
    return ret < 0 ? ret : (int)n;
}

/*
 * RESIZE_CQ (project extension, PVRDMA_EX_CAP_RESIZE_CQ): the CQ moves to
 * a new ring the guest laid out as for CREATE_CQ, with the CQEs it has
 * not polled yet first.  The command runs between two CQEs (the device
 * produces CQEs under the same lock), so none is lost or doubled; the
 * guest polls nothing meanwhile.  A VMware-layout request (nchunks 0) is
 * refused as malformed.  On any error the CQ stays on its old ring.
 */
static int pvrdma_cmd_resize_cq(PvrdmaCore *core,
                                const union pvrdma_cmd_req *req,
                                union pvrdma_cmd_resp *resp)
{
    const struct pvrdma_cmd_resize_cq_ex *c = &req->resize_cq_ex;
    PvrdmaCq *cq = pvrdma_table_lookup(&core->cq_tbl, c->cq_handle);
    PvrdmaRing ring;
    uint64_t *pages;
    int ret;

    if (!cq || !MBZ(c->reserved)) {
        GERR(core, RESIZE_CQ_BAD_CQ, "RESIZE_CQ: bad CQ %u", c->cq_handle);
        return -EINVAL;
    }
    ret = pvrdma_cq_ring_new(core, true, c->cqe, c->nchunks, c->pdir_dma,
                             &pages, &ring);
    if (ret < 0) {
        return ret;
    }
    ret = pvrdma_cq_move_cqes(core, cq, &ring,
                              pvrdma_ring_capacity(c->cqe));
    if (ret < 0) {
        g_free(pages);
        pvrdma_core_uncharge_pages(core, c->nchunks);
        return ret;
    }
    g_free(cq->pages);
    pvrdma_core_uncharge_pages(core, cq->npages);
    cq->pages = pages;
    cq->npages = c->nchunks;
    cq->ring = ring;
    cq->cqe = c->cqe;
    resp->resize_cq_resp.cqe = c->cqe;
    return 0;
}

static int pvrdma_cmd_destroy_cq(PvrdmaCore *core,
                                 const union pvrdma_cmd_req *req,
                                 union pvrdma_cmd_resp *resp G_GNUC_UNUSED)
{
    const struct pvrdma_cmd_destroy_cq *c = &req->destroy_cq;
    PvrdmaCq *cq = pvrdma_table_lookup(&core->cq_tbl, c->cq_handle);

    if (!cq || !MBZ(c->reserved)) {
        GERR(core, DESTROY_CQ_BAD_CQ,
             "DESTROY_CQ: bad CQ %u", c->cq_handle);
        return -EINVAL;
    }
    if (cq->refs) {
        GERR(core, DESTROY_CQ_CQ_STILL_USED_QPS,
             "DESTROY_CQ: CQ %u still used by %u QPs", cq->handle,
             cq->refs);
        return -EBUSY;
    }
    pvrdma_cq_free(core, cq);
    return 0;
}

/* ---- queue pairs --------------------------------------------------------- */

static bool pvrdma_wr_ok(uint32_t wr, uint32_t max)
{
    return pvrdma_is_pow2(wr) && wr <= max;
}

static int pvrdma_qp_check_create(PvrdmaCore *core,
                                  const struct pvrdma_cmd_create_qp *c,
                                  PvrdmaPd **pd, PvrdmaCq **scq,
                                  PvrdmaCq **rcq, PvrdmaSrq **srq)
{
    const PvrdmaCoreConfig *cfg = &core->cfg;
    bool ini = c->qp_type == PVRDMA_QPT_XRC_INI;

    if (!MBZ(c->reserved) || c->sq_sig_all > 1 || c->is_srq > 1) {
        GERR(core, CREATE_QP_BAD_SQ_SIG_SRQ,
             "CREATE_QP: bad sq_sig_all/is_srq or reserved bytes");
        return -EINVAL;
    }
    /* UC and XRC_INI: project extensions (PVRDMA_EX_CAP_UC, _XRC). */
    if (c->qp_type != PVRDMA_QPT_RC && c->qp_type != PVRDMA_QPT_UC &&
        c->qp_type != PVRDMA_QPT_UD && c->qp_type != PVRDMA_QPT_GSI &&
        !(ini && pvrdma_xrc_offered(core))) {
        GERR(core, CREATE_QP_QP_TYPE_NOT_SUPPORTED,
             "CREATE_QP: QP type %u not supported", c->qp_type);
        return -EINVAL;
    }
    if (c->max_inline_data != 0 ||
        !pvrdma_access_ok(c->access_flags, PVRDMA_QP_ACCESS_VALID)) {
        GERR(core, CREATE_QP_MAX_INLINE_DATA_ACCESS,
             "CREATE_QP: max_inline_data %u / access 0x%x",
             c->max_inline_data, c->access_flags);
        return -EINVAL;
    }
    if (ini && (c->recv_cq_handle || c->is_srq || c->srq_handle ||
                c->max_recv_wr || c->max_recv_sge)) {
        GERR(core, CREATE_QP_XRC_INI_RECEIVE_SIDE,
             "CREATE_QP: an XRC_INI QP with a receive side (recv CQ %u, "
             "SRQ %u, max_recv_wr %u)", c->recv_cq_handle, c->srq_handle,
             c->max_recv_wr);
        return -EINVAL;
    }
    *pd = pvrdma_table_lookup(&core->pd_tbl, c->pd_handle);
    *scq = pvrdma_table_lookup(&core->cq_tbl, c->send_cq_handle);
    /* XRC_INI: no receive CQ; its send CQ stands in (counted twice). */
    *rcq = ini ? *scq : pvrdma_table_lookup(&core->cq_tbl,
                                             c->recv_cq_handle);
    if (!*pd || !*scq || !*rcq) {
        GERR(core, CREATE_QP_BAD_PD_SEND_CQ,
             "CREATE_QP: bad PD %u / send CQ %u / recv CQ %u",
             c->pd_handle, c->send_cq_handle, c->recv_cq_handle);
        return -EINVAL;
    }
    if ((*scq)->ctx_handle != (*pd)->ctx_handle ||
        (*rcq)->ctx_handle != (*pd)->ctx_handle) {
        GERR(core, CREATE_QP_PD_CQS_BELONG_DIFFERENT,
             "CREATE_QP: PD and CQs belong to different contexts");
        return -EINVAL;
    }
    if (!pvrdma_wr_ok(c->max_send_wr, cfg->max_qp_wr) ||
        c->max_send_sge < 1 || c->max_send_sge > cfg->max_sge) {
        GERR(core, CREATE_QP_MAX_SEND_WR_MAX,
             "CREATE_QP: max_send_wr %u / max_send_sge %u",
             c->max_send_wr, c->max_send_sge);
        return -EINVAL;
    }
    *srq = NULL;
    if (ini) {
        return 0;
    }
    if (c->is_srq) {
        *srq = pvrdma_table_lookup(&core->srq_tbl, c->srq_handle);
        if (!*srq || (*srq)->ctx_handle != (*pd)->ctx_handle ||
            (*srq)->xrc || c->max_recv_wr != 0 || c->max_recv_sge != 0) {
            GERR(core, CREATE_QP_BAD_SRQ_RECEIVE_QUEUE,
                 "CREATE_QP: bad SRQ %u or receive queue with an SRQ",
                 c->srq_handle);
            return -EINVAL;
        }
    } else if (c->srq_handle != 0 ||
               !pvrdma_wr_ok(c->max_recv_wr, cfg->max_qp_wr) ||
               c->max_recv_sge < 1 || c->max_recv_sge > cfg->max_sge) {
        GERR(core, CREATE_QP_SRQ_HANDLE_MAX_RECV,
             "CREATE_QP: srq_handle %u / max_recv_wr %u / "
             "max_recv_sge %u", c->srq_handle, c->max_recv_wr,
             c->max_recv_sge);
        return -EINVAL;
    }
    return 0;
}

/* The response to a CREATE_QP of @c that made @qp. */
static void pvrdma_create_qp_resp(PvrdmaCore *core,
                                  const struct pvrdma_cmd_create_qp *c,
                                  PvrdmaQp *qp, union pvrdma_cmd_resp *resp)
{
    if (core->driver_version >= PVRDMA_VERSION_QPHANDLE) {
        struct pvrdma_cmd_create_qp_resp_v2 *r = &resp->create_qp_resp_v2;

        r->qpn = qp->qpn;
        r->qp_handle = qp->handle;
        r->max_send_wr = c->max_send_wr;
        r->max_recv_wr = c->max_recv_wr;
        r->max_send_sge = c->max_send_sge;
        r->max_recv_sge = c->max_recv_sge;
        r->max_inline_data = PVRDMA_MAX_INLINE_DATA;
    } else {
        struct pvrdma_cmd_create_qp_resp *r = &resp->create_qp_resp;

        /* v1: the driver uses the qpn as the handle; they are equal. */
        r->qpn = qp->handle;
        r->max_send_wr = c->max_send_wr;
        r->max_recv_wr = c->max_recv_wr;
        r->max_send_sge = c->max_send_sge;
        r->max_recv_sge = c->max_recv_sge;
        r->max_inline_data = PVRDMA_MAX_INLINE_DATA;
    }
}

/*
 * An XRC_TGT QP (PVRDMA_EX_CAP_XRC): no queue, no CQ, no PD, only its
 * domain; every other field of the request is 0.
 */
static int pvrdma_cmd_create_xrc_tgt(PvrdmaCore *core,
                                     const struct pvrdma_cmd_create_qp_ex *x,
                                     union pvrdma_cmd_resp *resp)
{
    const struct pvrdma_cmd_create_qp *c = &x->qp;
    struct pvrdma_cmd_create_qp zero = {
        .hdr = c->hdr, .qp_type = c->qp_type,
        .access_flags = c->access_flags, .sq_sig_all = c->sq_sig_all,
    };
    PvrdmaXrcd *xrcd = pvrdma_xrcd_of(core, x->xrcd_handle);
    uint32_t handle;
    PvrdmaQp *qp;
    int ret;

    if (!xrcd || memcmp(c, &zero, sizeof(zero)) != 0 || !MBZ(x->reserved) ||
        c->sq_sig_all > 1 ||
        !pvrdma_access_ok(c->access_flags, PVRDMA_QP_ACCESS_VALID)) {
        GERR(core, CREATE_QP_XRC_TGT_FIELDS,
             "CREATE_QP: bad XRC domain %u, or an XRC_TGT QP with queues, "
             "CQs, a PD or reserved bytes", x->xrcd_handle);
        return -EINVAL;
    }
    qp = g_new0(PvrdmaQp, 1);
    ret = pvrdma_table_insert(&core->qp_tbl, qp, &handle);
    if (ret < 0) {
        g_free(qp);
        return ret;
    }
    qp->handle = handle;
    qp->qpn = handle;
    qp->type = c->qp_type;
    qp->xrcd_handle = xrcd->handle;
    qp->state = PVRDMA_QPS_RESET;
    qp->max_outstanding = 1;
    if (core->be_ops->qp_create) {
        ret = core->be_ops->qp_create(core->be, qp);
        if (ret < 0) {
            pvrdma_table_remove(&core->qp_tbl, handle);
            g_free(qp);
            return ret;
        }
    }
    /* No send queue: a backend sizing its window by it leaves it 0. */
    qp->max_outstanding = 1;
    xrcd->refs++;
    pvrdma_create_qp_resp(core, c, qp, resp);
    return 0;
}

static int pvrdma_cmd_create_qp(PvrdmaCore *core,
                                const union pvrdma_cmd_req *req,
                                union pvrdma_cmd_resp *resp)
{
    const struct pvrdma_cmd_create_qp *c = &req->create_qp;
    PvrdmaPd *pd;
    PvrdmaCq *scq, *rcq;
    PvrdmaSrq *srq;
    PvrdmaQp *qp;
    uint64_t *pages;
    uint32_t sq_wqe, rq_wqe = 0, rq_pages, handle;
    uint64_t need;
    bool gsi = c->qp_type == PVRDMA_QPT_GSI;
    bool ini = c->qp_type == PVRDMA_QPT_XRC_INI;
    int ret;

    if (c->qp_type == PVRDMA_QPT_XRC_TGT && pvrdma_xrc_offered(core)) {
        return pvrdma_cmd_create_xrc_tgt(core, &req->create_qp_ex, resp);
    }
    ret = pvrdma_qp_check_create(core, c, &pd, &scq, &rcq, &srq);
    if (ret < 0) {
        return ret;
    }
    /* WQE sizes of spec §8.1; sge counts are bounded by cfg (<= 32). */
    sq_wqe = pvrdma_pow2_ceil(PVRDMA_SQ_WQE_HDR_SIZE +
                              PVRDMA_SGE_SIZE * c->max_send_sge);
    need = pvrdma_pages_for((uint64_t)c->max_send_wr * sq_wqe);
    if (c->total_chunks < 1u + c->send_chunks ||
        !pvrdma_ring_pages_ok(c->send_chunks, need)) {
        GERR(core, CREATE_QP_SEND_CHUNKS_TOTAL_CHUNKS,
             "CREATE_QP: send_chunks %u / total_chunks %u for %u x %u "
             "byte WQEs", c->send_chunks, c->total_chunks, c->max_send_wr,
             sq_wqe);
        return -EINVAL;
    }
    rq_pages = c->total_chunks - 1u - c->send_chunks;
    if (srq || ini) {
        if (rq_pages != 0) {
            GERR(core, CREATE_QP_RECEIVE_PAGES_SRQ,
                 "CREATE_QP: %u receive pages with an SRQ", rq_pages);
            return -EINVAL;
        }
    } else {
        rq_wqe = pvrdma_pow2_ceil(PVRDMA_RQ_WQE_HDR_SIZE +
                                  PVRDMA_SGE_SIZE * c->max_recv_sge);
        need = pvrdma_pages_for((uint64_t)c->max_recv_wr * rq_wqe);
        if (!pvrdma_ring_pages_ok(rq_pages, need)) {
            GERR(core, CREATE_QP_RECEIVE_PAGES_X_BYTE,
                 "CREATE_QP: %u receive pages for %u x %u byte WQEs",
                 rq_pages, c->max_recv_wr, rq_wqe);
            return -EINVAL;
        }
    }
    if (gsi && pvrdma_table_lookup(&core->qp_tbl, 1)) {
        GERR(core, CREATE_QP_GSI_QP_ALREADY_EXISTS,
             "CREATE_QP: a GSI QP already exists");
        return -EBUSY;
    }
    if (pvrdma_table_full(&core->qp_tbl)) {
        return -ENOMEM;
    }
    ret = pvrdma_ring_pages_take(core, c->pdir_dma, c->total_chunks, &pages);
    if (ret < 0) {
        return ret;
    }
    qp = g_new0(PvrdmaQp, 1);
    qp->pages = pages;
    qp->npages = c->total_chunks;
    if (!pvrdma_ring_init(&qp->sq, pages, qp->npages, 1, c->send_chunks,
                          c->max_send_wr, sq_wqe,
                          PVRDMA_RING_STATE_TX_OFFSET) ||
        (!srq && !ini && !pvrdma_ring_init(&qp->rq, pages, qp->npages,
                                   1 + c->send_chunks, rq_pages,
                                   c->max_recv_wr, rq_wqe,
                                   PVRDMA_RING_STATE_RX_OFFSET))) {
        ret = -EINVAL;
        goto fail_free;
    }
    ret = gsi ? pvrdma_table_insert_at(&core->qp_tbl, qp, 1) :
          pvrdma_table_insert(&core->qp_tbl, qp, &handle);
    if (ret < 0) {
        goto fail_free;
    }
    if (gsi) {
        handle = 1;
    }
    qp->handle = handle;
    qp->qpn = gsi ? 1 : handle;
    qp->type = c->qp_type;
    qp->ctx_handle = pd->ctx_handle;
    qp->pd_handle = pd->handle;
    qp->send_cq_handle = scq->handle;
    qp->recv_cq_handle = rcq->handle;
    qp->has_srq = srq != NULL;
    qp->srq_handle = srq ? srq->handle : 0;
    qp->sq_wqe_size = sq_wqe;
    qp->rq_wqe_size = rq_wqe;
    qp->sq_sig_all = c->sq_sig_all;
    qp->state = PVRDMA_QPS_RESET;
    qp->attr.cap.max_send_wr = c->max_send_wr;
    qp->attr.cap.max_recv_wr = c->max_recv_wr;
    qp->attr.cap.max_send_sge = c->max_send_sge;
    qp->attr.cap.max_recv_sge = c->max_recv_sge;
    qp->attr.cap.max_inline_data = PVRDMA_MAX_INLINE_DATA;
    qp->max_outstanding = 1;
    pvrdma_wq_rq_hint(core, qp, false, true);
    pvrdma_wq_sq_hint(core, qp, true);
    if (core->be_ops->qp_create) {
        ret = core->be_ops->qp_create(core->be, qp);
        if (ret < 0) {
            pvrdma_table_remove(&core->qp_tbl, handle);
            goto fail_free;
        }
    }
    qp->max_outstanding = CLAMP(qp->max_outstanding, 1,
                                PVRDMA_MAX_OUTSTANDING);
    pd->refs++;
    scq->refs++;
    rcq->refs++;
    if (srq) {
        srq->refs++;
    }
    pvrdma_create_qp_resp(core, c, qp, resp);
    return 0;

fail_free:
    g_free(qp);
    g_free(pages);
    pvrdma_core_uncharge_pages(core, c->total_chunks);
    return ret;
}

static bool pvrdma_gid_index_bound(PvrdmaCore *core, uint32_t index)
{
    return index < core->cfg.gid_tbl_len && core->gids[index].bound;
}

static bool pvrdma_ah_attr_ok(PvrdmaCore *core,
                              const struct pvrdma_ah_attr *ah)
{
    /*
     * The flow label is a 20-bit field; like real RoCE devices we keep
     * the low 20 bits of what we are given (UCX passes 0xffffffff).
     */
    return ah->ah_flags == PVRDMA_AH_FLAG_GRH && ah->port_num == 1 &&
           pvrdma_gid_index_bound(core, ah->grh.sgid_index) &&
           ah->sl <= PVRDMA_MAX_SL && ah->grh.reserved == 0 &&
           ah->reserved == 0;
}

/* Value checks for every attribute in @mask (the transition is legal). */
static bool pvrdma_qp_attr_values_ok(PvrdmaCore *core,
                                     const struct pvrdma_qp_attr *a,
                                     uint32_t mask)
{
    if (!MBZ(a->reserved)) {
        return false;
    }
    if ((mask & PVRDMA_QP_PORT) && a->port_num != 1) {
        return false;
    }
    if ((mask & PVRDMA_QP_PKEY_INDEX) && a->pkey_index >= 1) {
        return false;
    }
    if ((mask & PVRDMA_QP_EN_SQD_ASYNC_NOTIFY) && a->en_sqd_async_notify > 1) {
        return false;
    }
    if ((mask & PVRDMA_QP_AV) && !pvrdma_ah_attr_ok(core, &a->ah_attr)) {
        return false;
    }
    if ((mask & PVRDMA_QP_PATH_MTU) &&
        (a->path_mtu < PVRDMA_MTU_256 || a->path_mtu > PVRDMA_MTU_4096)) {
        return false;
    }
    if ((mask & PVRDMA_QP_TIMEOUT) && a->timeout > 31) {
        return false;
    }
    if ((mask & PVRDMA_QP_RETRY_CNT) && a->retry_cnt > 7) {
        return false;
    }
    if ((mask & PVRDMA_QP_RNR_RETRY) && a->rnr_retry > 7) {
        return false;
    }
    if ((mask & PVRDMA_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31) {
        return false;
    }
    if ((mask & PVRDMA_QP_MAX_QP_RD_ATOMIC) &&
        a->max_rd_atomic > PVRDMA_CAP_MAX_RD_ATOM) {
        return false;
    }
    if ((mask & PVRDMA_QP_MAX_DEST_RD_ATOMIC) &&
        a->max_dest_rd_atomic > PVRDMA_CAP_MAX_RD_ATOM) {
        return false;
    }
    if ((mask & PVRDMA_QP_PATH_MIG_STATE) &&
        a->path_mig_state > PVRDMA_MIG_ARMED) {
        return false;
    }
    if ((mask & PVRDMA_QP_DEST_QPN) && a->dest_qp_num > PVRDMA_QPN_MASK) {
        return false;
    }
    /* No APM: alternate paths cannot be loaded. */
    if (mask & PVRDMA_QP_ALT_PATH) {
        return false;
    }
    return true;
}

static void pvrdma_qp_attr_store(PvrdmaQp *qp, const struct pvrdma_qp_attr *a,
                                 uint32_t mask)
{
    struct pvrdma_qp_attr *s = &qp->attr;

    if (mask & PVRDMA_QP_EN_SQD_ASYNC_NOTIFY) {
        s->en_sqd_async_notify = a->en_sqd_async_notify;
    }
    /*
     * Bits beyond remote write/read/atomic (flush, relaxed ordering, ...)
     * grant nothing this device does: applications set them freely, so
     * they are dropped, not refused.
     */
    if (mask & PVRDMA_QP_ACCESS_FLAGS) {
        s->qp_access_flags = a->qp_access_flags & PVRDMA_QP_ACCESS_VALID;
    }
    if (mask & PVRDMA_QP_PKEY_INDEX) {
        s->pkey_index = a->pkey_index;
    }
    if (mask & PVRDMA_QP_PORT) {
        s->port_num = a->port_num;
    }
    if (mask & PVRDMA_QP_QKEY) {
        s->qkey = a->qkey;
    }
    if (mask & PVRDMA_QP_AV) {
        s->ah_attr = a->ah_attr;
        s->ah_attr.grh.flow_label &= PVRDMA_FLOW_LABEL_MAX;
    }
    if (mask & PVRDMA_QP_PATH_MTU) {
        s->path_mtu = a->path_mtu;
    }
    if (mask & PVRDMA_QP_TIMEOUT) {
        s->timeout = a->timeout;
    }
    if (mask & PVRDMA_QP_RETRY_CNT) {
        s->retry_cnt = a->retry_cnt;
    }
    if (mask & PVRDMA_QP_RNR_RETRY) {
        s->rnr_retry = a->rnr_retry;
    }
    if (mask & PVRDMA_QP_RQ_PSN) {
        s->rq_psn = a->rq_psn & PVRDMA_PSN_MASK;
    }
    if (mask & PVRDMA_QP_MAX_QP_RD_ATOMIC) {
        s->max_rd_atomic = a->max_rd_atomic;
    }
    if (mask & PVRDMA_QP_MIN_RNR_TIMER) {
        s->min_rnr_timer = a->min_rnr_timer;
    }
    if (mask & PVRDMA_QP_SQ_PSN) {
        s->sq_psn = a->sq_psn & PVRDMA_PSN_MASK;
    }
    if (mask & PVRDMA_QP_MAX_DEST_RD_ATOMIC) {
        s->max_dest_rd_atomic = a->max_dest_rd_atomic;
    }
    if (mask & PVRDMA_QP_PATH_MIG_STATE) {
        s->path_mig_state = a->path_mig_state;
    }
    if (mask & PVRDMA_QP_DEST_QPN) {
        s->dest_qp_num = a->dest_qp_num;
    }
}

static int pvrdma_cmd_modify_qp(PvrdmaCore *core,
                                const union pvrdma_cmd_req *req,
                                union pvrdma_cmd_resp *resp G_GNUC_UNUSED)
{
    const struct pvrdma_cmd_modify_qp *c = &req->modify_qp;
    const struct pvrdma_qp_attr *a = &c->attrs;
    PvrdmaQp *qp = pvrdma_table_lookup(&core->qp_tbl, c->qp_handle);
    uint32_t mask = c->attr_mask, next, old;
    int ret;

    if (!qp) {
        GERR(core, MODIFY_QP_BAD_QP,
             "MODIFY_QP: bad QP %u", c->qp_handle);
        return -EINVAL;
    }
    if (mask & ~PVRDMA_QP_ATTR_MASK_MAX) {
        GERR(core, MODIFY_QP_UNKNOWN_ATTR_MASK_BITS,
             "MODIFY_QP: unknown attr_mask bits 0x%x", mask);
        return -EINVAL;
    }
    if ((mask & PVRDMA_QP_STATE) && a->qp_state > PVRDMA_QPS_ERR) {
        GERR(core, MODIFY_QP_BAD_TARGET_STATE,
             "MODIFY_QP: bad target state %u", a->qp_state);
        return -EINVAL;
    }
    next = (mask & PVRDMA_QP_STATE) ? a->qp_state : qp->state;
    if ((mask & PVRDMA_QP_CUR_STATE) && a->cur_qp_state != qp->state) {
        GERR(core, MODIFY_QP_CUR_STATE_MISMATCH,
             "MODIFY_QP: QP %u is in state %u, not %u", qp->handle,
             qp->state, a->cur_qp_state);
        return -EINVAL;
    }
    if (!pvrdma_qp_transition_ok(qp->state, next, qp->type, mask)) {
        GERR(core, MODIFY_QP_TRANSITION_NOT_ALLOWED,
             "MODIFY_QP: QP %u type %u: %u -> %u with mask 0x%x is "
             "not allowed", qp->handle, qp->type, qp->state, next, mask);
        return -EINVAL;
    }
    if (!pvrdma_qp_attr_values_ok(core, a, mask)) {
        GERR(core, MODIFY_QP_QP_ATTRIBUTE_VALUE_OUT,
             "MODIFY_QP: QP %u: attribute value out of range (mask "
             "0x%x)", qp->handle, mask);
        return -EINVAL;
    }
    if (core->be_ops->qp_modify) {
        ret = core->be_ops->qp_modify(core->be, qp, a, mask);
        if (ret < 0) {
            return ret;
        }
    }
    if (next == PVRDMA_QPS_RESET) {
        /* A QP in RESET has no attributes but its capabilities. */
        struct pvrdma_qp_cap cap = qp->attr.cap;

        memset(&qp->attr, 0, sizeof(qp->attr));
        qp->attr.cap = cap;
    } else {
        pvrdma_qp_attr_store(qp, a, mask);
    }
    old = qp->state;
    qp->state = next;
    if (next == PVRDMA_QPS_RESET ||
        (old == PVRDMA_QPS_INIT && next == PVRDMA_QPS_RTR)) {
        qp->peer_life = 0;      /* a new connection: no partner heard */
    }
    if (!core->loading) {
        pvrdma_wq_qp_modified(core, qp, old);
    }
    return 0;
}

static int pvrdma_cmd_query_qp(PvrdmaCore *core,
                               const union pvrdma_cmd_req *req,
                               union pvrdma_cmd_resp *resp)
{
    const struct pvrdma_cmd_query_qp *c = &req->query_qp;
    PvrdmaQp *qp = pvrdma_table_lookup(&core->qp_tbl, c->qp_handle);
    struct pvrdma_qp_attr *a = &resp->query_qp_resp.attrs;

    if (!qp || (c->attr_mask & ~PVRDMA_QP_ATTR_MASK_MAX)) {
        GERR(core, QUERY_QP_BAD_QP_MASK,
             "QUERY_QP: bad QP %u or mask 0x%x", c->qp_handle,
             c->attr_mask);
        return -EINVAL;
    }
    /* Everything is returned whatever the mask asks for. */
    *a = qp->attr;
    a->qp_state = qp->state;
    a->cur_qp_state = qp->state;
    a->sq_draining = 0;
    return 0;
}

static int pvrdma_cmd_destroy_qp(PvrdmaCore *core,
                                 const union pvrdma_cmd_req *req,
                                 union pvrdma_cmd_resp *resp)
{
    const struct pvrdma_cmd_destroy_qp *c = &req->destroy_qp;
    PvrdmaQp *qp = pvrdma_table_lookup(&core->qp_tbl, c->qp_handle);

    if (!qp || !MBZ(c->reserved)) {
        GERR(core, DESTROY_QP_BAD_QP,
             "DESTROY_QP: bad QP %u", c->qp_handle);
        return -EINVAL;
    }
    pvrdma_qp_free(core, qp);
    resp->destroy_qp_resp.events_reported = 0;
    return 0;
}

/* ---- GID table ----------------------------------------------------------- */

static int pvrdma_cmd_create_bind(PvrdmaCore *core,
                                  const union pvrdma_cmd_req *req,
                                  union pvrdma_cmd_resp *resp G_GNUC_UNUSED)
{
    const struct pvrdma_cmd_create_bind *c = &req->create_bind;
    PvrdmaGid *g;
    int ret;

    if (c->index >= core->cfg.gid_tbl_len || !MBZ(c->reserved) ||
        c->gid_type != PVRDMA_CAP_GID_TYPE || MBZ(c->new_gid) ||
        c->vlan > PVRDMA_VLAN_NONE ||
        (c->mtu != 256 && c->mtu != 512 && c->mtu != 1024 &&
         c->mtu != 2048 && c->mtu != 4096)) {
        GERR(core, CREATE_BIND_BAD_INDEX_GID_TYPE,
             "CREATE_BIND: bad index %u / gid type %u / zero GID / "
             "vlan %u / mtu %u", c->index, c->gid_type, c->vlan, c->mtu);
        return -EINVAL;
    }
    g = &core->gids[c->index];
    /* Rebinding replaces (a failed DESTROY_BIND leaves the driver free). */
    pvrdma_gid_clear(core, c->index);
    if (core->be_ops->gid_bind) {
        ret = core->be_ops->gid_bind(core->be, c->index, c->new_gid,
                                     c->gid_type);
        if (ret < 0) {
            return ret;
        }
    }
    g->bound = true;
    memcpy(g->gid, c->new_gid, sizeof(g->gid));
    g->type = c->gid_type;
    return 0;
}

static int pvrdma_cmd_destroy_bind(PvrdmaCore *core,
                                   const union pvrdma_cmd_req *req,
                                   union pvrdma_cmd_resp *resp G_GNUC_UNUSED)
{
    const struct pvrdma_cmd_destroy_bind *c = &req->destroy_bind;

    if (!MBZ(c->reserved) || !pvrdma_gid_index_bound(core, c->index) ||
        memcmp(core->gids[c->index].gid, c->dest_gid, 16) != 0) {
        GERR(core, DESTROY_BIND_INDEX_NOT_BOUND_GID,
             "DESTROY_BIND: index %u is not bound to that GID",
             c->index);
        return -EINVAL;
    }
    pvrdma_gid_clear(core, c->index);
    return 0;
}

/* ---- shared receive queues ----------------------------------------------- */

static int pvrdma_cmd_create_srq(PvrdmaCore *core,
                                 const union pvrdma_cmd_req *req,
                                 union pvrdma_cmd_resp *resp)
{
    const struct pvrdma_cmd_create_srq_ex *x = &req->create_srq_ex;
    const struct pvrdma_cmd_create_srq *c = &req->create_srq;
    const struct pvrdma_srq_attr *a = &c->attrs;
    PvrdmaPd *pd = pvrdma_table_lookup(&core->pd_tbl, c->pd_handle);
    bool xrc = c->srq_type == PVRDMA_SRQT_XRC && pvrdma_xrc_offered(core);
    PvrdmaXrcd *xrcd = NULL;
    PvrdmaCq *cq = NULL;
    uint32_t wqe, handle;
    uint64_t need, *pages;
    PvrdmaSrq *srq;
    int ret;

    if (!pd || !MBZ(c->reserved) || a->reserved != 0 ||
        (c->srq_type != PVRDMA_SRQT_BASIC && !xrc)) {
        GERR(core, CREATE_SRQ_BAD_PD_TYPE_RESERVED,
             "CREATE_SRQ: bad PD %u / type %u or reserved bytes",
             c->pd_handle, c->srq_type);
        return -EINVAL;
    }
    /* XRC (extension): bytes 56..63 name the domain and the CQ. */
    if (xrc) {
        xrcd = pvrdma_xrcd_of(core, x->xrcd_handle);
        cq = pvrdma_table_lookup(&core->cq_tbl, x->cq_handle);
        if (!xrcd || !cq || cq->ctx_handle != pd->ctx_handle) {
            GERR(core, CREATE_SRQ_BAD_XRCD_CQ,
                 "CREATE_SRQ: bad XRC domain %u or CQ %u (of the PD's "
                 "context)", x->xrcd_handle, x->cq_handle);
            return -EINVAL;
        }
    }
    if (!pvrdma_wr_ok(a->max_wr, core->cfg.max_srq_wr) || a->max_sge < 1 ||
        a->max_sge > core->cfg.max_srq_sge || a->srq_limit > a->max_wr) {
        GERR(core, CREATE_SRQ_MAX_WR_MAX_SGE,
             "CREATE_SRQ: max_wr %u / max_sge %u / limit %u",
             a->max_wr, a->max_sge, a->srq_limit);
        return -EINVAL;
    }
    wqe = pvrdma_pow2_ceil(PVRDMA_RQ_WQE_HDR_SIZE +
                           PVRDMA_SGE_SIZE * a->max_sge);
    need = pvrdma_pages_for((uint64_t)a->max_wr * wqe);
    if (c->nchunks < 1 || !pvrdma_ring_pages_ok(c->nchunks - 1ull, need)) {
        GERR(core, CREATE_SRQ_NCHUNKS_X_BYTE_WQES,
             "CREATE_SRQ: nchunks %u for %u x %u byte WQEs",
             c->nchunks, a->max_wr, wqe);
        return -EINVAL;
    }
    if (pvrdma_table_full(&core->srq_tbl)) {
        return -ENOMEM;
    }
    ret = pvrdma_ring_pages_take(core, c->pdir_dma, c->nchunks, &pages);
    if (ret < 0) {
        return ret;
    }
    srq = g_new0(PvrdmaSrq, 1);
    srq->pages = pages;
    srq->npages = c->nchunks;
    if (!pvrdma_ring_init(&srq->ring, pages, c->nchunks, 1, c->nchunks - 1,
                          a->max_wr, wqe, PVRDMA_RING_STATE_RX_OFFSET)) {
        ret = -EINVAL;
        goto fail_free;
    }
    ret = pvrdma_table_insert(&core->srq_tbl, srq, &handle);
    if (ret < 0) {
        goto fail_free;
    }
    srq->handle = handle;
    srq->ctx_handle = pd->ctx_handle;
    srq->pd_handle = pd->handle;
    srq->max_wr = a->max_wr;
    srq->max_sge = a->max_sge;
    srq->srq_limit = a->srq_limit;
    srq->wqe_size = wqe;
    srq->xrc = xrc;
    srq->xrcd_handle = xrc ? xrcd->handle : 0;
    srq->cq_handle = xrc ? cq->handle : 0;
    pvrdma_wq_srq_limit_set(srq);
    if (core->be_ops->srq_create) {
        ret = core->be_ops->srq_create(core->be, srq);
        if (ret < 0) {
            pvrdma_table_remove(&core->srq_tbl, handle);
            goto fail_free;
        }
    }
    pd->refs++;
    if (xrc) {
        xrcd->refs++;
        cq->refs++;
    }
    resp->create_srq_resp.srqn = handle;
    return 0;

fail_free:
    g_free(srq);
    g_free(pages);
    pvrdma_core_uncharge_pages(core, c->nchunks);
    return ret;
}

/*
 * MODIFY_SRQ with MAX_WR (project extension PVRDMA_EX_CAP_RESIZE_SRQ):
 * the SRQ moves to the new ring of @c, laid out as CREATE_SRQ's for the
 * SRQ's max_sge.  The receive WQEs the guest posted and the device has
 * not taken yet (the device's cons .. the guest's prod_tail) are copied
 * to slots 0, 1, ... of it, in order, and the new ring's indices set to
 * match (cons_head 0, prod_tail their count), from where the guest goes
 * on posting.  Runs under the device lock like every receive, so no WQE
 * is taken twice or lost; the guest posts nothing meanwhile.  The new
 * size must hold the WQEs posted and the limit (the new one, if LIMIT is
 * set too).  On any error the SRQ stays on its old ring.
 */
static int pvrdma_srq_resize(PvrdmaCore *core, PvrdmaSrq *srq,
                             const struct pvrdma_cmd_modify_srq_ex *c)
{
    uint64_t wqe[PVRDMA_MAX_WQE / sizeof(uint64_t)] PVRDMA_UNINIT;
    uint32_t max_wr = c->attrs.max_wr, prod, n, i;
    uint32_t limit = c->attr_mask & PVRDMA_SRQ_LIMIT ? c->attrs.srq_limit :
                     srq->srq_limit;
    uint64_t need, *pages;
    PvrdmaRing ring;
    int ret;

    if (!(core->caps.ex_comp_mask & PVRDMA_EX_CAP_RESIZE_SRQ)) {
        GERR(core, MODIFY_SRQ_RESIZING_SRQ_NOT_SUPPORTED,
             "MODIFY_SRQ: resizing an SRQ is not supported");
        return -EINVAL;
    }
    if (!pvrdma_wr_ok(max_wr, core->cfg.max_srq_wr) || limit > max_wr ||
        !MBZ(c->reserved)) {
        GERR(core, MODIFY_SRQ_RESIZE_MAX_WR,
             "MODIFY_SRQ: SRQ %u: new max_wr %u (a power of two up to %u, "
             "at least the limit)", srq->handle, max_wr,
             core->cfg.max_srq_wr);
        return -EINVAL;
    }
    need = pvrdma_pages_for((uint64_t)max_wr * srq->wqe_size);
    if (c->nchunks < 1 || !pvrdma_ring_pages_ok(c->nchunks - 1ull, need)) {
        GERR(core, MODIFY_SRQ_RESIZE_NCHUNKS,
             "MODIFY_SRQ: nchunks %u for %u x %u byte WQEs", c->nchunks,
             max_wr, srq->wqe_size);
        return -EINVAL;
    }
    ret = pvrdma_wq_srq_posted(core, srq, &prod);
    if (ret < 0) {
        return ret;
    }
    n = (prod - srq->cons) & ((srq->ring.n << 1) - 1);
    if (n > pvrdma_ring_capacity(max_wr)) {
        GERR(core, MODIFY_SRQ_RESIZE_POSTED_DO_NOT_FIT,
             "MODIFY_SRQ: SRQ %u has %u receive WQEs posted, more than %u",
             srq->handle, n, max_wr);
        return -EINVAL;
    }
    ret = pvrdma_ring_pages_take(core, c->pdir_dma, c->nchunks, &pages);
    if (ret < 0) {
        return ret;
    }
    if (!pvrdma_ring_init(&ring, pages, c->nchunks, 1, c->nchunks - 1,
                          max_wr, srq->wqe_size, PVRDMA_RING_STATE_RX_OFFSET)) {
        ret = -EINVAL;
        goto fail;
    }
    for (i = 0; i < n; i++) {
        uint32_t from = pvrdma_ring_slot(srq->cons + i, srq->ring.n);

        ret = pvrdma_core_dma_read(core, pvrdma_ring_elem_addr(&srq->ring,
                                                               from),
                                   wqe, srq->wqe_size);
        if (ret == 0) {
            ret = pvrdma_core_dma_write(core, pvrdma_ring_elem_addr(&ring, i),
                                        wqe, srq->wqe_size);
        }
        if (ret < 0) {
            goto fail;
        }
    }
    ret = pvrdma_ring_publish(core, &ring, n);
    if (ret < 0) {
        goto fail;
    }
    g_free(srq->pages);
    pvrdma_core_uncharge_pages(core, srq->npages);
    srq->pages = pages;
    srq->npages = c->nchunks;
    srq->ring = ring;
    srq->max_wr = max_wr;
    srq->cons = 0;
    return 0;

fail:
    g_free(pages);
    pvrdma_core_uncharge_pages(core, c->nchunks);
    return ret;
}

static int pvrdma_cmd_modify_srq(PvrdmaCore *core,
                                 const union pvrdma_cmd_req *req,
                                 union pvrdma_cmd_resp *resp G_GNUC_UNUSED)
{
    const struct pvrdma_cmd_modify_srq_ex *c = &req->modify_srq_ex;
    PvrdmaSrq *srq = pvrdma_table_lookup(&core->srq_tbl, c->srq_handle);
    int ret;

    if (!srq || c->attrs.reserved != 0 ||
        (c->attr_mask & ~(PVRDMA_SRQ_MAX_WR | PVRDMA_SRQ_LIMIT))) {
        GERR(core, MODIFY_SRQ_BAD_SRQ_MASK,
             "MODIFY_SRQ: bad SRQ %u / mask 0x%x", c->srq_handle,
             c->attr_mask);
        return -EINVAL;
    }
    if (c->attr_mask & PVRDMA_SRQ_MAX_WR) {
        ret = pvrdma_srq_resize(core, srq, c);
        if (ret < 0) {
            return ret;
        }
    }
    if (!(c->attr_mask & PVRDMA_SRQ_LIMIT)) {
        return 0;
    }
    if (c->attrs.srq_limit > srq->max_wr) {
        GERR(core, MODIFY_SRQ_LIMIT_MAX_WR,
             "MODIFY_SRQ: limit %u > max_wr %u", c->attrs.srq_limit,
             srq->max_wr);
        return -EINVAL;
    }
    if (core->be_ops->srq_modify) {
        ret = core->be_ops->srq_modify(core->be, srq, c->attrs.srq_limit);
        if (ret < 0) {
            return ret;
        }
    }
    srq->srq_limit = c->attrs.srq_limit;
    pvrdma_wq_srq_limit_set(srq);
    return 0;
}

static int pvrdma_cmd_query_srq(PvrdmaCore *core,
                                const union pvrdma_cmd_req *req,
                                union pvrdma_cmd_resp *resp)
{
    const struct pvrdma_cmd_query_srq *c = &req->query_srq;
    PvrdmaSrq *srq = pvrdma_table_lookup(&core->srq_tbl, c->srq_handle);
    struct pvrdma_srq_attr *a = &resp->query_srq_resp.attrs;

    if (!srq || !MBZ(c->reserved)) {
        GERR(core, QUERY_SRQ_BAD_SRQ,
             "QUERY_SRQ: bad SRQ %u", c->srq_handle);
        return -EINVAL;
    }
    a->max_wr = srq->max_wr;
    a->max_sge = srq->max_sge;
    a->srq_limit = srq->srq_limit;
    return 0;
}

static int pvrdma_cmd_destroy_srq(PvrdmaCore *core,
                                  const union pvrdma_cmd_req *req,
                                  union pvrdma_cmd_resp *resp G_GNUC_UNUSED)
{
    const struct pvrdma_cmd_destroy_srq *c = &req->destroy_srq;
    PvrdmaSrq *srq = pvrdma_table_lookup(&core->srq_tbl, c->srq_handle);

    if (!srq || !MBZ(c->reserved)) {
        GERR(core, DESTROY_SRQ_BAD_SRQ,
             "DESTROY_SRQ: bad SRQ %u", c->srq_handle);
        return -EINVAL;
    }
    if (srq->refs) {
        GERR(core, DESTROY_SRQ_SRQ_STILL_USED_QPS,
             "DESTROY_SRQ: SRQ %u still used by %u QPs", srq->handle,
             srq->refs);
        return -EBUSY;
    }
    pvrdma_srq_free(core, srq);
    return 0;
}

/* ---- dispatch ------------------------------------------------------------ */

typedef int (*PvrdmaCmdHandler)(PvrdmaCore *core,
                                const union pvrdma_cmd_req *req,
                                union pvrdma_cmd_resp *resp);

typedef struct PvrdmaCmdDesc {
    PvrdmaCmdHandler handler;
    uint32_t resp_size;         /* bytes of the response written back */
} PvrdmaCmdDesc;

#define RESP_HDR    sizeof(struct pvrdma_cmd_resp_hdr)

/* Indexed by command code; 18 is MODIFY_SRQ and 19 QUERY_SRQ (spec §11). */
static const PvrdmaCmdDesc pvrdma_cmd_table[PVRDMA_CMD_MAX] = {
    [PVRDMA_CMD_QUERY_PORT] = {
        pvrdma_cmd_query_port, sizeof(struct pvrdma_cmd_query_port_resp) },
    [PVRDMA_CMD_QUERY_PKEY] = {
        pvrdma_cmd_query_pkey, sizeof(struct pvrdma_cmd_query_pkey_resp) },
    [PVRDMA_CMD_CREATE_PD] = {
        pvrdma_cmd_create_pd, sizeof(struct pvrdma_cmd_create_pd_resp) },
    [PVRDMA_CMD_DESTROY_PD] = { pvrdma_cmd_destroy_pd, RESP_HDR },
    [PVRDMA_CMD_CREATE_MR] = {
        pvrdma_cmd_create_mr, sizeof(struct pvrdma_cmd_create_mr_resp) },
    [PVRDMA_CMD_DESTROY_MR] = { pvrdma_cmd_destroy_mr, RESP_HDR },
    [PVRDMA_CMD_CREATE_CQ] = {
        pvrdma_cmd_create_cq, sizeof(struct pvrdma_cmd_create_cq_resp) },
    [PVRDMA_CMD_RESIZE_CQ] = {
        pvrdma_cmd_resize_cq, sizeof(struct pvrdma_cmd_resize_cq_resp) },
    [PVRDMA_CMD_DESTROY_CQ] = { pvrdma_cmd_destroy_cq, RESP_HDR },
    /* CREATE_QP: size depends on the driver version, see below. */
    [PVRDMA_CMD_CREATE_QP] = {
        pvrdma_cmd_create_qp, sizeof(struct pvrdma_cmd_create_qp_resp) },
    [PVRDMA_CMD_MODIFY_QP] = { pvrdma_cmd_modify_qp, RESP_HDR },
    [PVRDMA_CMD_QUERY_QP] = {
        pvrdma_cmd_query_qp, sizeof(struct pvrdma_cmd_query_qp_resp) },
    [PVRDMA_CMD_DESTROY_QP] = {
        pvrdma_cmd_destroy_qp, sizeof(struct pvrdma_cmd_destroy_qp_resp) },
    [PVRDMA_CMD_CREATE_UC] = {
        pvrdma_cmd_create_uc, sizeof(struct pvrdma_cmd_create_uc_resp) },
    [PVRDMA_CMD_DESTROY_UC] = { pvrdma_cmd_destroy_uc, RESP_HDR },
    [PVRDMA_CMD_CREATE_BIND] = { pvrdma_cmd_create_bind, RESP_HDR },
    [PVRDMA_CMD_DESTROY_BIND] = { pvrdma_cmd_destroy_bind, RESP_HDR },
    [PVRDMA_CMD_CREATE_SRQ] = {
        pvrdma_cmd_create_srq, sizeof(struct pvrdma_cmd_create_srq_resp) },
    [PVRDMA_CMD_MODIFY_SRQ] = { pvrdma_cmd_modify_srq, RESP_HDR },
    [PVRDMA_CMD_QUERY_SRQ] = {
        pvrdma_cmd_query_srq, sizeof(struct pvrdma_cmd_query_srq_resp) },
    [PVRDMA_CMD_DESTROY_SRQ] = { pvrdma_cmd_destroy_srq, RESP_HDR },
    [PVRDMA_CMD_MODIFY_MR] = { pvrdma_cmd_modify_mr, RESP_HDR },
    [PVRDMA_CMD_QUERY_COUNTERS] = {
        pvrdma_cmd_query_counters,
        sizeof(struct pvrdma_cmd_query_counters_resp) },
    [PVRDMA_CMD_ATTACH_MCAST] = { pvrdma_cmd_attach_mcast, RESP_HDR },
    [PVRDMA_CMD_DETACH_MCAST] = { pvrdma_cmd_detach_mcast, RESP_HDR },
    [PVRDMA_CMD_CREATE_XRCD] = {
        pvrdma_cmd_create_xrcd, sizeof(struct pvrdma_cmd_create_xrcd_resp) },
    [PVRDMA_CMD_DESTROY_XRCD] = { pvrdma_cmd_destroy_xrcd, RESP_HDR },
};

/* The response header for @req, and how many bytes its response has. */
static void pvrdma_cmd_resp_init(PvrdmaCore *core,
                                 const union pvrdma_cmd_req *req,
                                 union pvrdma_cmd_resp *resp,
                                 uint32_t *resp_len)
{
    uint32_t cmd = req->hdr.cmd;

    memset(resp, 0, sizeof(*resp));
    resp->hdr.response = req->hdr.response;
    resp->hdr.ack = PVRDMA_CMD_ACK(cmd);
    if (cmd >= PVRDMA_CMD_MAX) {
        *resp_len = RESP_HDR;
    } else if (cmd == PVRDMA_CMD_CREATE_QP &&
               core->driver_version >= PVRDMA_VERSION_QPHANDLE) {
        *resp_len = sizeof(struct pvrdma_cmd_create_qp_resp_v2);
    } else {
        *resp_len = pvrdma_cmd_table[cmd].resp_size;
    }
}

int pvrdma_cmd_refuse(PvrdmaCore *core, const union pvrdma_cmd_req *req,
                      union pvrdma_cmd_resp *resp, uint32_t *resp_len,
                      int err)
{
    pvrdma_cmd_resp_init(core, req, resp, resp_len);
    resp->hdr.err = (uint8_t)-err;
    return err;
}

int pvrdma_cmd_execute(PvrdmaCore *core, const union pvrdma_cmd_req *req,
                       union pvrdma_cmd_resp *resp, uint32_t *resp_len)
{
    uint32_t cmd = req->hdr.cmd;
    const PvrdmaCmdDesc *d;
    int ret;

    pvrdma_cmd_resp_init(core, req, resp, resp_len);
    if (cmd >= PVRDMA_CMD_MAX) {
        GERR(core, UNKNOWN_COMMAND,
             "unknown command %u", cmd);
        ret = -EINVAL;
    } else {
        d = &pvrdma_cmd_table[cmd];
        if (req->hdr.reserved != 0) {
            GERR(core, COMMAND_RESERVED_HEADER_FIELD_NOT_ZERO,
                 "command %u: reserved header field not zero", cmd);
            ret = -EINVAL;
        } else {
            ret = d->handler(core, req, resp);
        }
        if (ret < 0) {
            /* Never hand out half-filled responses. */
            memset((uint8_t *)resp + RESP_HDR, 0, sizeof(*resp) - RESP_HDR);
        }
    }
    resp->hdr.err = (uint8_t)-ret;
    return ret;
}

void pvrdma_cmd_rollback(PvrdmaCore *core, const union pvrdma_cmd_req *req,
                         const union pvrdma_cmd_resp *resp)
{
    void *obj;

    switch (req->hdr.cmd) {
    case PVRDMA_CMD_CREATE_PD:
        obj = pvrdma_table_lookup(&core->pd_tbl,
                                  resp->create_pd_resp.pd_handle);
        if (obj) {
            pvrdma_pd_free(core, obj);
        }
        break;
    case PVRDMA_CMD_CREATE_MR:
        obj = pvrdma_table_lookup(&core->mr_tbl,
                                  resp->create_mr_resp.mr_handle);
        if (obj) {
            pvrdma_mr_free(core, obj);
        }
        break;
    case PVRDMA_CMD_CREATE_CQ:
        obj = pvrdma_table_lookup(&core->cq_tbl,
                                  resp->create_cq_resp.cq_handle);
        if (obj) {
            pvrdma_cq_free(core, obj);
        }
        break;
    case PVRDMA_CMD_CREATE_QP:
        /* v1 and v2 both start with qpn, and qpn == handle but for GSI. */
        obj = pvrdma_table_lookup(&core->qp_tbl,
                                  core->driver_version >=
                                  PVRDMA_VERSION_QPHANDLE ?
                                  resp->create_qp_resp_v2.qp_handle :
                                  resp->create_qp_resp.qpn);
        if (obj) {
            pvrdma_qp_free(core, obj);
        }
        break;
    case PVRDMA_CMD_CREATE_UC:
        obj = pvrdma_table_lookup(&core->uc_tbl,
                                  resp->create_uc_resp.ctx_handle);
        if (obj) {
            pvrdma_uc_free(core, obj);
        }
        break;
    case PVRDMA_CMD_CREATE_SRQ:
        obj = pvrdma_table_lookup(&core->srq_tbl,
                                  resp->create_srq_resp.srqn);
        if (obj) {
            pvrdma_srq_free(core, obj);
        }
        break;
    case PVRDMA_CMD_CREATE_XRCD:
        obj = pvrdma_xrcd_of(core, resp->create_xrcd_resp.xrcd_handle);
        if (obj && !((PvrdmaXrcd *)obj)->refs) {
            pvrdma_xrcd_free(core, obj);
        }
        break;
    case PVRDMA_CMD_CREATE_BIND:
        if (req->create_bind.index < core->cfg.gid_tbl_len) {
            pvrdma_gid_clear(core, req->create_bind.index);
        }
        break;
    default:
        /* Destroy/modify/query: nothing to undo that the guest relies on. */
        break;
    }
}
