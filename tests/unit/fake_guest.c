/*
 * Fake guest for the PVRDMA core unit tests.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>
#include <glib.h>

#include "fake_guest.h"
#include "pvrdma_core_int.h"

static bool fg_in_ram(uint64_t addr, uint64_t len)
{
    return len != 0 && addr >= FG_MEM_BASE && addr + len >= addr &&
           addr + len <= FG_MEM_BASE + FG_MEM_SIZE;
}

static int fg_dma_read(void *opaque, uint64_t addr, void *buf, uint64_t len)
{
    FakeGuest *fg = opaque;

    fg->dma_reads++;
    if (!fg_in_ram(addr, len)) {
        fg->dma_faults++;
        return -EFAULT;
    }
    memcpy(buf, fg->mem + (addr - FG_MEM_BASE), len);
    return 0;
}

static int fg_dma_write(void *opaque, uint64_t addr, const void *buf,
                        uint64_t len)
{
    FakeGuest *fg = opaque;

    fg->dma_writes++;
    if (!fg_in_ram(addr, len) ||
        (fg->ro_page && addr < fg->ro_page + FG_PAGE &&
         addr + len > fg->ro_page)) {
        fg->dma_faults++;
        return -EFAULT;
    }
    memcpy(fg->mem + (addr - FG_MEM_BASE), buf, len);
    return 0;
}

static void *fg_dma_map(void *opaque, uint64_t addr, uint64_t *plen,
                        bool is_write)
{
    FakeGuest *fg = opaque;
    uint64_t len = *plen;

    (void)is_write;
    *plen = 0;
    if (fg->map_refuse || len == 0 || addr < FG_MEM_BASE ||
        addr >= FG_MEM_BASE + FG_MEM_SIZE ||
        (fg->mmio_len && addr < fg->mmio_base + fg->mmio_len &&
         addr + len > fg->mmio_base)) {
        fg->map_fails++;
        return NULL;
    }
    /* Short mappings: the end of RAM, and the test's cap. */
    len = MIN(len, FG_MEM_BASE + FG_MEM_SIZE - addr);
    if (fg->map_max) {
        len = MIN(len, fg->map_max);
    }
    fg->maps++;
    *plen = len;
    return fg->mem + (addr - FG_MEM_BASE);
}

static void fg_dma_unmap(void *opaque, void *ptr, uint64_t len,
                         bool is_write, uint64_t access_len)
{
    FakeGuest *fg = opaque;

    (void)is_write;
    assert_non_null(ptr);
    assert_true(access_len <= len);
    assert_true((uint8_t *)ptr >= fg->mem &&
                (uint8_t *)ptr + len <= fg->mem + FG_MEM_SIZE);
    fg->unmaps++;
}

static bool fg_dma_window(void *opaque, uint64_t addr, PvrdmaDmaWindow *w)
{
    FakeGuest *fg = opaque;
    uint64_t size = fg->win_size ? fg->win_size : FG_MEM_SIZE;
    uint64_t base;

    if (!fg->windows || addr < FG_MEM_BASE ||
        addr >= FG_MEM_BASE + FG_MEM_SIZE) {
        return false;
    }
    base = FG_MEM_BASE + (addr - FG_MEM_BASE) / size * size;
    size = MIN(size, FG_MEM_BASE + FG_MEM_SIZE - base);
    if (fg->mmio_len && base < fg->mmio_base + fg->mmio_len &&
        base + size > fg->mmio_base) {
        return false;
    }
    fg->windows_given++;
    w->base = base;
    w->len = size;
    w->host = fg->mem + (base - FG_MEM_BASE);
    w->tag = (void *)(uintptr_t)(base + 1);
    return true;
}

static void fg_dma_dirty(void *opaque, void *tag, uint64_t addr,
                         uint64_t len)
{
    FakeGuest *fg = opaque;
    uint64_t base = (uintptr_t)tag - 1;
    uint64_t size = fg->win_size ? fg->win_size : FG_MEM_SIZE;

    /* Inside the window the tag names, never empty. */
    assert_true(fg->windows);
    assert_true(len > 0 && addr >= base && addr + len > addr &&
                addr + len <= base + size &&
                addr + len <= FG_MEM_BASE + FG_MEM_SIZE);
    fg->dirty_calls++;
    for (uint64_t pg = (addr - FG_MEM_BASE) / FG_PAGE;
         pg <= (addr + len - 1 - FG_MEM_BASE) / FG_PAGE; pg++) {
        fg->dirty[pg] = 1;
    }
}

static int64_t fg_clock_ns(void *opaque)
{
    return ((FakeGuest *)opaque)->now_ns;
}

static void fg_timer_mod(void *opaque, int64_t expire_ns)
{
    FakeGuest *fg = opaque;

    fg->timer_mods++;
    fg->timer_expire = expire_ns < 0 ? -1 : expire_ns;
}

void fg_advance(FakeGuest *fg, int64_t ns)
{
    fg->now_ns += ns;
    if (fg->timer_expire >= 0 && fg->timer_expire <= fg->now_ns) {
        fg->timer_expire = -1;
        pvrdma_core_timer_expired(fg->core);
    }
}

static void fg_notify(void *opaque, unsigned vector)
{
    FakeGuest *fg = opaque;

    assert_true(vector < PVRDMA_NUM_VECTORS);
    fg->notify[vector]++;
}

static void fg_guest_error(void *opaque, PvrdmaGerr kind, const char *msg,
                           const PvrdmaGerrArg *args)
{
    FakeGuest *fg = opaque;

    assert_true(kind < PVRDMA_GERR__MAX);
    fg->guest_errors++;
    fg->last_gerr = kind;
    for (unsigned i = 0; i < PVRDMA_GERR_MAX_ARGS; i++) {
        fg->last_gerr_args[i] = args[i].u;
    }
    snprintf(fg->last_error, sizeof(fg->last_error), "%s", msg);
    if (getenv("FG_VERBOSE")) {
        fprintf(stderr, "guest error: %s\n", msg);
    }
}

static void fg_trace_doorbell(void *opaque, uint64_t offset, uint32_t val)
{
    FakeGuest *fg = opaque;
    uint32_t off = offset & (FG_PAGE - 1);

    fg->db_last_handle = val & 0xFFFFFFu;
    if (off == PVRDMA_UAR_QP_OFFSET) {
        fg->db_qp_send += !!(val & PVRDMA_DB_QP_SEND);
        fg->db_qp_recv += !!(val & PVRDMA_DB_QP_RECV);
    } else if (off == PVRDMA_UAR_SRQ_OFFSET) {
        fg->db_srq++;
    } else if (off == PVRDMA_UAR_CQ_OFFSET && (val & PVRDMA_DB_CQ_POLL)) {
        fg->db_cq_poll++;
    }
}

static void fg_trace_rnr(void *opaque, uint32_t qpn, unsigned event,
                         uint32_t usec)
{
    FakeGuest *fg = opaque;

    (void)qpn;
    (void)usec;
    fg->rnr_waits += event == PVRDMA_RNR_WAIT;
    fg->rnr_kicks += event == PVRDMA_RNR_KICK;
    fg->rnr_timeouts += event == PVRDMA_RNR_TIMER;
}

static void fg_trace_cmd(void *opaque, uint32_t cmd, int err)
{
    FakeGuest *fg = opaque;

    (void)cmd;
    (void)err;
    fg->trace_cmds++;
}

static const PvrdmaCoreOps fg_ops = {
    .dma_read = fg_dma_read,
    .dma_write = fg_dma_write,
    .notify = fg_notify,
    .guest_error = fg_guest_error,
    .trace_cmd = fg_trace_cmd,
    .trace_doorbell = fg_trace_doorbell,
    .trace_rnr = fg_trace_rnr,
    .dma_map = fg_dma_map,
    .dma_unmap = fg_dma_unmap,
    .dma_window = fg_dma_window,
    .dma_dirty = fg_dma_dirty,
    .clock_ns = fg_clock_ns,
    .timer_mod = fg_timer_mod,
};

static const PvrdmaCoreOps fg_ops_minimal = {
    .dma_read = fg_dma_read,
    .dma_write = fg_dma_write,
    .notify = fg_notify,
    .guest_error = fg_guest_error,
    .trace_cmd = fg_trace_cmd,
    .trace_doorbell = fg_trace_doorbell,
};

static FakeGuest *fg_new_ops(const PvrdmaCoreConfig *cfg,
                             const PvrdmaCoreOps *ops)
{
    FakeGuest *fg = g_new0(FakeGuest, 1);
    char *err = NULL;

    /* Shared, like a shared memory backend: the ibverbs backend aliases it. */
    fg->mem = mmap(NULL, FG_MEM_SIZE, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    assert_true(fg->mem != MAP_FAILED);
    fg->next_free = FG_MEM_BASE;
    fg->dirty = g_new0(uint8_t, FG_MEM_SIZE / FG_PAGE);
    if (cfg) {
        fg->cfg = *cfg;
    } else {
        pvrdma_core_default_config(&fg->cfg);
    }
    assert_true(pvrdma_core_check_config(&fg->cfg, &err));
    assert_null(err);
    fg->timer_expire = -1;
    fg->ops = ops;
    fg->core = pvrdma_core_new(&fg->cfg, ops, fg);
    pvrdma_core_set_uar_base(fg->core, FG_UAR_BASE);
    return fg;
}

FakeGuest *fg_new(const PvrdmaCoreConfig *cfg)
{
    return fg_new_ops(cfg, &fg_ops);
}

FakeGuest *fg_new_minimal(const PvrdmaCoreConfig *cfg)
{
    return fg_new_ops(cfg, &fg_ops_minimal);
}

FgSnapshot *fg_snapshot(FakeGuest *fg)
{
    FgSnapshot *snap = g_new0(FgSnapshot, 1);
    char *err = NULL;

    snap->state = pvrdma_core_state_save(fg->core, &snap->len, &err);
    if (!snap->state) {
        fail_msg("save: %s", err);
    }
    snap->mem = g_memdup2(fg->mem, FG_MEM_SIZE);
    return snap;
}

void fg_snapshot_free(FgSnapshot *snap)
{
    g_free(snap->state);
    g_free(snap->mem);
    g_free(snap);
}

size_t fg_restore(FakeGuest *fg, const FgSnapshot *snap,
                  void (*rejoin)(FakeGuest *fg))
{
    g_autofree uint8_t *again = NULL;
    size_t len = snap->len, len2 = 0;
    const uint8_t *state = snap->state;
    char *err = NULL;

    pvrdma_core_free(fg->core);
    memcpy(fg->mem, snap->mem, FG_MEM_SIZE);
    fg->timer_expire = -1;
    fg->core = pvrdma_core_new(&fg->cfg, fg->ops, fg);
    pvrdma_core_set_uar_base(fg->core, FG_UAR_BASE);
    if (rejoin) {
        rejoin(fg);
    }
    if (!pvrdma_core_state_load(fg->core, state, len, &err)) {
        fail_msg("load: %s", err);
    }
    again = pvrdma_core_state_save(fg->core, &len2, &err);
    assert_non_null(again);
    assert_int_equal(len2, len);
    assert_memory_equal(again, state, len);
    pvrdma_core_state_resume(fg->core);
    return len;
}

size_t fg_migrate(FakeGuest *fg, void (*rejoin)(FakeGuest *fg))
{
    FgSnapshot *snap = fg_snapshot(fg);
    size_t len = fg_restore(fg, snap, rejoin);

    fg_snapshot_free(snap);
    return len;
}

void fg_free(FakeGuest *fg)
{
    pvrdma_core_free(fg->core);
    /* No mapping outlives the entry point that made it. */
    assert_int_equal(fg->maps, fg->unmaps);
    munmap(fg->mem, FG_MEM_SIZE);
    g_free(fg->dirty);
    g_free(fg);
}

void *fg_ptr(FakeGuest *fg, uint64_t addr)
{
    assert_true(fg_in_ram(addr, 1));
    return fg->mem + (addr - FG_MEM_BASE);
}

uint32_t fg_read32(FakeGuest *fg, uint64_t addr)
{
    uint32_t v;

    memcpy(&v, fg_ptr(fg, addr), 4);
    return v;
}

void fg_write32(FakeGuest *fg, uint64_t addr, uint32_t val)
{
    memcpy(fg_ptr(fg, addr), &val, 4);
}

uint64_t fg_alloc_pages(FakeGuest *fg, uint32_t n)
{
    uint64_t a = fg->next_free;

    assert_true(n > 0);
    assert_true(a + (uint64_t)n * FG_PAGE <= FG_MEM_BASE + FG_MEM_SIZE);
    fg->next_free += (uint64_t)n * FG_PAGE;
    return a;
}

uint64_t fg_build_pdir(FakeGuest *fg, const uint64_t *pages, uint32_t n)
{
    uint32_t ntables, t;
    uint64_t dir, *d;

    assert_true(n > 0);
    ntables = ((n - 1) >> 9) + 1;
    dir = fg_alloc_pages(fg, 1);
    d = fg_ptr(fg, dir);
    for (t = 0; t < ntables; t++) {
        uint64_t tbl = fg_alloc_pages(fg, 1);
        uint64_t *p = fg_ptr(fg, tbl);
        uint32_t i;

        d[t] = tbl;
        for (i = 0; i < 512 && t * 512 + i < n; i++) {
            p[i] = pages[t * 512 + i];
        }
    }
    return dir;
}

uint64_t fg_alloc_paged(FakeGuest *fg, uint32_t n, uint64_t *pages)
{
    uint32_t i;

    for (i = 0; i < n; i++) {
        pages[i] = fg_alloc_pages(fg, 2);     /* second page is a gap */
    }
    return fg_build_pdir(fg, pages, n);
}

uint32_t fg_reg_read(FakeGuest *fg, uint32_t off)
{
    return pvrdma_core_reg_read(fg->core, off);
}

void fg_reg_write(FakeGuest *fg, uint32_t off, uint32_t val)
{
    pvrdma_core_reg_write(fg->core, off, val);
}

uint32_t fg_load_dsr_ex(FakeGuest *fg, uint32_t driver_version,
                        uint32_t async_np, uint32_t cq_np)
{
    struct pvrdma_device_shared_region *dsr;
    uint64_t apdir, cpdir;

    fg->dsr = fg_alloc_pages(fg, 1);
    fg->cmd_slot = fg_alloc_pages(fg, 1);
    fg->resp_slot = fg_alloc_pages(fg, 1);
    fg->driver_version = driver_version;
    fg->async_npages = async_np;
    fg->cq_npages = cq_np;
    assert_true(async_np <= PVRDMA_PDIR_ENTRIES && cq_np <= 512);
    apdir = fg_alloc_paged(fg, async_np ? async_np : 1, fg->async_pages);
    cpdir = fg_alloc_paged(fg, cq_np ? cq_np : 1, fg->cq_pages);

    dsr = fg_ptr(fg, fg->dsr);
    dsr->driver_version = driver_version;
    dsr->gos_info.word = 0x46;
    dsr->cmd_slot_dma = fg->cmd_slot;
    dsr->resp_slot_dma = fg->resp_slot;
    dsr->async_ring_pages.num_pages = async_np;
    dsr->async_ring_pages.pdir_dma = apdir;
    dsr->cq_ring_pages.num_pages = cq_np;
    dsr->cq_ring_pages.pdir_dma = cpdir;
    dsr->uar_pfn64 = FG_UAR_BASE >> 12;

    fg_reg_write(fg, PVRDMA_REG_DSRLOW, (uint32_t)fg->dsr);
    fg_reg_write(fg, PVRDMA_REG_DSRHIGH, (uint32_t)(fg->dsr >> 32));
    return fg_reg_read(fg, PVRDMA_REG_ERR);
}

void fg_setup(FakeGuest *fg)
{
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_VERSION), 20);
    assert_int_equal(fg_load_dsr_ex(fg, 20, 4, 4), 0);
    fg_reg_write(fg, PVRDMA_REG_IMR, 0);
    fg_reg_write(fg, PVRDMA_REG_CTL, PVRDMA_DEVICE_CTL_ACTIVATE);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ERR), 0);
}

const struct pvrdma_device_caps *fg_caps(FakeGuest *fg)
{
    struct pvrdma_device_shared_region *dsr = fg_ptr(fg, fg->dsr);

    return &dsr->caps;
}

void fg_clear_caps(FakeGuest *fg)
{
    struct pvrdma_device_shared_region *dsr = fg_ptr(fg, fg->dsr);

    memset(&dsr->caps, 0, sizeof(dsr->caps));
}

int fg_cmd(FakeGuest *fg, const void *req, size_t len,
           union pvrdma_cmd_resp *resp)
{
    uint8_t *slot = fg_ptr(fg, fg->cmd_slot);

    assert_true(len <= PVRDMA_CMD_SLOT_SIZE);
    memset(slot, 0xA5, PVRDMA_CMD_SLOT_SIZE);
    memcpy(slot, req, len);
    memset(fg_ptr(fg, fg->resp_slot), 0x5A, PVRDMA_RESP_SLOT_SIZE);
    fg_reg_write(fg, PVRDMA_REG_REQUEST, 0);
    if (resp) {
        memcpy(resp, fg_ptr(fg, fg->resp_slot), sizeof(*resp));
    }
    return (int32_t)fg_reg_read(fg, PVRDMA_REG_ERR);
}

int fg_create_uc(FakeGuest *fg, uint32_t uar_index, uint32_t *ctx)
{
    struct pvrdma_cmd_create_uc c = { .hdr.cmd = PVRDMA_CMD_CREATE_UC };
    union pvrdma_cmd_resp r;
    int ret;

    c.pfn64 = (FG_UAR_BASE >> 12) + uar_index;
    ret = fg_cmd(fg, &c, sizeof(c), &r);
    if (ctx) {
        *ctx = r.create_uc_resp.ctx_handle;
    }
    return ret;
}

int fg_destroy_uc(FakeGuest *fg, uint32_t ctx)
{
    struct pvrdma_cmd_destroy_uc c = { .hdr.cmd = PVRDMA_CMD_DESTROY_UC };

    c.ctx_handle = ctx;
    return fg_cmd(fg, &c, sizeof(c), NULL);
}

int fg_create_pd(FakeGuest *fg, uint32_t ctx, uint32_t *pd)
{
    struct pvrdma_cmd_create_pd c = { .hdr.cmd = PVRDMA_CMD_CREATE_PD };
    union pvrdma_cmd_resp r;
    int ret;

    c.ctx_handle = ctx;
    ret = fg_cmd(fg, &c, sizeof(c), &r);
    if (pd) {
        *pd = r.create_pd_resp.pd_handle;
    }
    return ret;
}

int fg_destroy_pd(FakeGuest *fg, uint32_t pd)
{
    struct pvrdma_cmd_destroy_pd c = { .hdr.cmd = PVRDMA_CMD_DESTROY_PD };

    c.pd_handle = pd;
    return fg_cmd(fg, &c, sizeof(c), NULL);
}

int fg_create_cq_pages(FakeGuest *fg, uint32_t ctx, uint32_t cqe,
                       uint32_t nchunks, uint64_t *pages, uint32_t *cq)
{
    struct pvrdma_cmd_create_cq c = { .hdr.cmd = PVRDMA_CMD_CREATE_CQ };
    union pvrdma_cmd_resp r;
    g_autofree uint64_t *tmp = NULL;
    int ret;

    if (!pages) {
        tmp = g_new0(uint64_t, nchunks);
        pages = tmp;
    }
    c.pdir_dma = fg_alloc_paged(fg, nchunks, pages);
    c.ctx_handle = ctx;
    c.cqe = cqe;
    c.nchunks = nchunks;
    c.reserved[0] = fg->cq_flags;
    ret = fg_cmd(fg, &c, sizeof(c), &r);
    if (cq) {
        *cq = r.create_cq_resp.cq_handle;
    }
    return ret;
}

int fg_create_cq(FakeGuest *fg, uint32_t ctx, uint32_t cqe, uint32_t *cq)
{
    uint32_t nchunks = 1 + (cqe * 64 + 4095) / 4096;

    return fg_create_cq_pages(fg, ctx, cqe, nchunks, NULL, cq);
}

int fg_destroy_cq(FakeGuest *fg, uint32_t cq)
{
    struct pvrdma_cmd_destroy_cq c = { .hdr.cmd = PVRDMA_CMD_DESTROY_CQ };

    c.cq_handle = cq;
    return fg_cmd(fg, &c, sizeof(c), NULL);
}

int fg_create_dma_mr(FakeGuest *fg, uint32_t pd, uint32_t *mr,
                     uint32_t *lkey)
{
    struct pvrdma_cmd_create_mr c = { .hdr.cmd = PVRDMA_CMD_CREATE_MR };
    union pvrdma_cmd_resp r;
    int ret;

    c.pd_handle = pd;
    c.flags = PVRDMA_MR_FLAG_DMA;
    c.access_flags = PVRDMA_ACCESS_LOCAL_WRITE;
    ret = fg_cmd(fg, &c, sizeof(c), &r);
    if (mr) {
        *mr = r.create_mr_resp.mr_handle;
    }
    if (lkey) {
        *lkey = r.create_mr_resp.lkey;
    }
    return ret;
}

int fg_create_user_mr(FakeGuest *fg, uint32_t pd, uint64_t start,
                      uint64_t length, uint32_t access, uint32_t *mr,
                      uint32_t *lkey, uint32_t *rkey)
{
    struct pvrdma_cmd_create_mr c = { .hdr.cmd = PVRDMA_CMD_CREATE_MR };
    union pvrdma_cmd_resp r;
    uint32_t n = ((start & 0xfff) + length + 0xfff) >> 12, i;
    uint32_t np = n ? n : 1;
    g_autofree uint64_t *pages = g_new0(uint64_t, np);
    uint64_t data = fg_alloc_pages(fg, 1);
    int ret;

    /* Every entry names the same page: the device only checks them. */
    for (i = 0; i < np; i++) {
        pages[i] = data;
    }
    c.start = start;
    c.length = length;
    c.pdir_dma = fg_build_pdir(fg, pages, np);
    c.pd_handle = pd;
    c.access_flags = access;
    c.nchunks = n;
    ret = fg_cmd(fg, &c, sizeof(c), &r);
    if (mr) {
        *mr = r.create_mr_resp.mr_handle;
    }
    if (lkey) {
        *lkey = r.create_mr_resp.lkey;
    }
    if (rkey) {
        *rkey = r.create_mr_resp.rkey;
    }
    return ret;
}

int fg_destroy_mr(FakeGuest *fg, uint32_t mr)
{
    struct pvrdma_cmd_destroy_mr c = { .hdr.cmd = PVRDMA_CMD_DESTROY_MR };

    c.mr_handle = mr;
    return fg_cmd(fg, &c, sizeof(c), NULL);
}

int fg_modify_mr(FakeGuest *fg, uint32_t mr, uint32_t flags,
                 uint32_t access, uint32_t pd)
{
    struct pvrdma_cmd_modify_mr c = { .hdr.cmd = PVRDMA_CMD_MODIFY_MR };

    c.mr_handle = mr;
    c.flags = flags;
    c.access_flags = access;
    c.pd_handle = pd;
    return fg_cmd(fg, &c, sizeof(c), NULL);
}

void fg_counters(FakeGuest *fg, uint64_t *v)
{
    uint32_t first;

    for (first = 0; first < PVRDMA_CTR_NUM; first += PVRDMA_CTR_PER_QUERY) {
        struct pvrdma_cmd_query_counters c = {
            .hdr.cmd = PVRDMA_CMD_QUERY_COUNTERS, .first = first
        };
        union pvrdma_cmd_resp r;
        uint32_t i;

        assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), 0);
        assert_int_equal(r.hdr.ack, PVRDMA_CMD_ACK(PVRDMA_CMD_QUERY_COUNTERS));
        assert_int_equal(r.query_counters_resp.first, first);
        assert_int_equal(r.query_counters_resp.total, PVRDMA_CTR_NUM);
        for (i = 0; i < PVRDMA_CTR_PER_QUERY; i++) {
            if (first + i < PVRDMA_CTR_NUM) {
                v[first + i] = r.query_counters_resp.value[i];
            } else {
                assert_int_equal(r.query_counters_resp.value[i], 0);
            }
        }
    }
}

static uint32_t fg_pow2_ceil(uint32_t v)
{
    uint32_t p = 1;

    while (p < v) {
        p <<= 1;
    }
    return p;
}

void fg_qp_req(FakeGuest *fg, struct pvrdma_cmd_create_qp *c, uint8_t type,
               uint32_t pd, uint32_t scq, uint32_t rcq, uint32_t wr,
               uint32_t sge)
{
    uint32_t sq_wqe = fg_pow2_ceil(80 + 16 * sge);
    uint32_t rq_wqe = fg_pow2_ceil(16 + 16 * sge);
    uint32_t sq_pages = (wr * sq_wqe + 4095) / 4096;
    uint32_t rq_pages = (wr * rq_wqe + 4095) / 4096;
    uint32_t total = 1 + sq_pages + rq_pages;
    g_autofree uint64_t *pages = g_new0(uint64_t, total);

    memset(c, 0, sizeof(*c));
    c->hdr.cmd = PVRDMA_CMD_CREATE_QP;
    c->pdir_dma = fg_alloc_paged(fg, total, pages);
    c->pd_handle = pd;
    c->send_cq_handle = scq;
    c->recv_cq_handle = rcq;
    c->max_send_wr = wr;
    c->max_recv_wr = wr;
    c->max_send_sge = sge;
    c->max_recv_sge = sge;
    c->access_flags = PVRDMA_ACCESS_LOCAL_WRITE;
    c->total_chunks = total;
    c->send_chunks = sq_pages;
    c->sq_sig_all = 0;
    c->qp_type = type;
}

int fg_create_qp(FakeGuest *fg, uint8_t type, uint32_t pd, uint32_t cq,
                 uint32_t *qp, uint32_t *qpn)
{
    struct pvrdma_cmd_create_qp c;
    union pvrdma_cmd_resp r;
    int ret;

    fg_qp_req(fg, &c, type, pd, cq, cq, 16, 2);
    ret = fg_cmd(fg, &c, sizeof(c), &r);
    if (qp) {
        *qp = r.create_qp_resp_v2.qp_handle;
    }
    if (qpn) {
        *qpn = r.create_qp_resp_v2.qpn;
    }
    return ret;
}

int fg_destroy_qp(FakeGuest *fg, uint32_t qp)
{
    struct pvrdma_cmd_destroy_qp c = { .hdr.cmd = PVRDMA_CMD_DESTROY_QP };

    c.qp_handle = qp;
    return fg_cmd(fg, &c, sizeof(c), NULL);
}

int fg_modify_qp(FakeGuest *fg, uint32_t qp, uint32_t mask,
                 const struct pvrdma_qp_attr *attr)
{
    struct pvrdma_cmd_modify_qp c;
    union pvrdma_cmd_resp r;
    int ret;

    memset(&c, 0, sizeof(c));
    c.hdr.cmd = PVRDMA_CMD_MODIFY_QP;
    c.qp_handle = qp;
    c.attr_mask = mask;
    c.attrs = *attr;
    ret = fg_cmd(fg, &c, sizeof(c), &r);
    assert_int_equal(r.hdr.ack, PVRDMA_CMD_ACK(PVRDMA_CMD_MODIFY_QP));
    assert_int_equal(r.hdr.err, (uint8_t)-ret);
    return ret;
}

int fg_query_qp(FakeGuest *fg, uint32_t qp, struct pvrdma_qp_attr *attr)
{
    struct pvrdma_cmd_query_qp c = { .hdr.cmd = PVRDMA_CMD_QUERY_QP };
    union pvrdma_cmd_resp r;
    int ret;

    c.qp_handle = qp;
    c.attr_mask = 0x1FFFFF;
    ret = fg_cmd(fg, &c, sizeof(c), &r);
    if (attr) {
        *attr = r.query_qp_resp.attrs;
    }
    return ret;
}

void fg_test_gid(uint32_t index, uint8_t gid[16])
{
    static const uint8_t base[16] = {
        0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x50, 0x56, 0xff, 0xfe, 0, 0, 0
    };

    memcpy(gid, base, 16);
    gid[15] = (uint8_t)index;
}

int fg_bind_gid(FakeGuest *fg, uint32_t index)
{
    struct pvrdma_cmd_create_bind c = { .hdr.cmd = PVRDMA_CMD_CREATE_BIND };

    c.mtu = 1024;
    c.vlan = 0xfff;
    c.index = index;
    fg_test_gid(index, c.new_gid);
    c.gid_type = PVRDMA_GID_TYPE_FLAG_ROCE_V2;
    return fg_cmd(fg, &c, sizeof(c), NULL);
}

int fg_qp_to_rts(FakeGuest *fg, uint32_t qp, uint8_t type)
{
    struct pvrdma_qp_attr a;
    int ret;

    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_INIT;
    a.port_num = 1;
    a.qkey = 0x11111111;
    a.qp_access_flags = PVRDMA_ACCESS_REMOTE_WRITE |
                        PVRDMA_ACCESS_LOCAL_WRITE;
    ret = fg_modify_qp(fg, qp, PVRDMA_QP_STATE | PVRDMA_QP_PKEY_INDEX |
                       (type == PVRDMA_QPT_GSI ? 0 : PVRDMA_QP_PORT) |
                       (type == PVRDMA_QPT_RC ? PVRDMA_QP_ACCESS_FLAGS :
                        PVRDMA_QP_QKEY), &a);
    if (ret) {
        return ret;
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_RTR;
    if (type == PVRDMA_QPT_RC) {
        a.path_mtu = PVRDMA_MTU_1024;
        a.dest_qp_num = 0x123;
        a.rq_psn = 0x1000;
        a.max_dest_rd_atomic = 4;
        a.min_rnr_timer = 12;
        a.ah_attr.ah_flags = PVRDMA_AH_FLAG_GRH;
        a.ah_attr.port_num = 1;
        a.ah_attr.grh.sgid_index = 0;
        a.ah_attr.grh.hop_limit = 64;
        fg_test_gid(7, a.ah_attr.grh.dgid);
        ret = fg_modify_qp(fg, qp, PVRDMA_QP_STATE | PVRDMA_QP_AV |
                           PVRDMA_QP_PATH_MTU | PVRDMA_QP_DEST_QPN |
                           PVRDMA_QP_RQ_PSN | PVRDMA_QP_MAX_DEST_RD_ATOMIC |
                           PVRDMA_QP_MIN_RNR_TIMER, &a);
    } else {
        ret = fg_modify_qp(fg, qp, PVRDMA_QP_STATE, &a);
    }
    if (ret) {
        return ret;
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_RTS;
    a.sq_psn = 0x2000;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    return fg_modify_qp(fg, qp, PVRDMA_QP_STATE | PVRDMA_QP_SQ_PSN |
                        (type == PVRDMA_QPT_RC ?
                         PVRDMA_QP_TIMEOUT | PVRDMA_QP_RETRY_CNT |
                         PVRDMA_QP_RNR_RETRY | PVRDMA_QP_MAX_QP_RD_ATOMIC :
                         0), &a);
}

void fg_srq_req(FakeGuest *fg, struct pvrdma_cmd_create_srq *c, uint32_t pd,
                uint32_t max_wr, uint32_t max_sge)
{
    uint32_t wqe = fg_pow2_ceil(16 + 16 * max_sge);
    /* The provider allocates twice the ring (spec §8.1). */
    uint32_t n = 1 + 2 * ((max_wr * wqe + 4095) / 4096);
    g_autofree uint64_t *pages = g_new0(uint64_t, n);

    memset(c, 0, sizeof(*c));
    c->hdr.cmd = PVRDMA_CMD_CREATE_SRQ;
    c->pdir_dma = fg_alloc_paged(fg, n, pages);
    c->pd_handle = pd;
    c->nchunks = n;
    c->attrs.max_wr = max_wr;
    c->attrs.max_sge = max_sge;
    c->attrs.srq_limit = 0;
}

int fg_create_srq(FakeGuest *fg, uint32_t pd, uint32_t max_wr,
                  uint32_t max_sge, uint32_t *srq)
{
    struct pvrdma_cmd_create_srq c;
    union pvrdma_cmd_resp r;
    int ret;

    fg_srq_req(fg, &c, pd, max_wr, max_sge);
    ret = fg_cmd(fg, &c, sizeof(c), &r);
    if (srq) {
        *srq = r.create_srq_resp.srqn;
    }
    return ret;
}

int fg_destroy_srq(FakeGuest *fg, uint32_t srq)
{
    struct pvrdma_cmd_destroy_srq c = { .hdr.cmd = PVRDMA_CMD_DESTROY_SRQ };

    c.srq_handle = srq;
    return fg_cmd(fg, &c, sizeof(c), NULL);
}

/* ---- recording backend --------------------------------------------------- */

static void rec_reset(void *be)
{
    ((FgBackend *)be)->reset++;
}

static void rec_free(void *be)
{
    g_free(be);
}

static int rec_pd_create(void *be, PvrdmaPd *pd)
{
    FgBackend *b = be;

    b->pd_create++;
    b->last_handle = pd->handle;
    return b->fail;
}

static void rec_pd_destroy(void *be, PvrdmaPd *pd)
{
    (void)pd;
    ((FgBackend *)be)->pd_destroy++;
}

static int rec_mr_register(void *be, PvrdmaMr *mr)
{
    FgBackend *b = be;

    b->mr_register++;
    b->last_handle = mr->handle;
    return b->fail;
}

static void rec_mr_deregister(void *be, PvrdmaMr *mr)
{
    (void)mr;
    ((FgBackend *)be)->mr_deregister++;
}

static int rec_cq_create(void *be, PvrdmaCq *cq)
{
    FgBackend *b = be;

    b->cq_create++;
    b->last_handle = cq->handle;
    return b->fail;
}

static void rec_cq_destroy(void *be, PvrdmaCq *cq)
{
    (void)cq;
    ((FgBackend *)be)->cq_destroy++;
}

static int rec_qp_create(void *be, PvrdmaQp *qp)
{
    FgBackend *b = be;

    b->qp_create++;
    b->last_handle = qp->handle;
    return b->fail;
}

static int rec_qp_modify(void *be, PvrdmaQp *qp,
                         const struct pvrdma_qp_attr *attr, uint32_t mask)
{
    FgBackend *b = be;

    (void)attr;
    (void)mask;
    b->qp_modify++;
    b->last_handle = qp->handle;
    return b->fail;
}

static void rec_qp_destroy(void *be, PvrdmaQp *qp)
{
    (void)qp;
    ((FgBackend *)be)->qp_destroy++;
}

static int rec_srq_create(void *be, PvrdmaSrq *srq)
{
    FgBackend *b = be;

    b->srq_create++;
    b->last_handle = srq->handle;
    return b->fail;
}

static int rec_srq_modify(void *be, PvrdmaSrq *srq, uint32_t limit)
{
    FgBackend *b = be;

    (void)limit;
    b->srq_modify++;
    b->last_handle = srq->handle;
    return b->fail;
}

static void rec_srq_destroy(void *be, PvrdmaSrq *srq)
{
    (void)srq;
    ((FgBackend *)be)->srq_destroy++;
}

static int rec_gid_bind(void *be, uint32_t index, const uint8_t gid[16],
                        uint8_t gid_type)
{
    FgBackend *b = be;

    (void)gid;
    (void)gid_type;
    b->gid_bind++;
    b->last_handle = index;
    return b->fail;
}

static void rec_gid_unbind(void *be, uint32_t index)
{
    (void)index;
    ((FgBackend *)be)->gid_unbind++;
}

/* Refuses every request: the WQE completes with LOC_QP_OP_ERR. */
static int rec_submit(void *be, PvrdmaQp *qp, PvrdmaSendWr *wr)
{
    FgBackend *b = be;

    (void)wr;
    b->submit++;
    b->last_handle = qp->handle;
    return -EOPNOTSUPP;
}

static void rec_recv_posted(void *be, PvrdmaQp *qp)
{
    FgBackend *b = be;

    b->recv_posted++;
    b->last_handle = qp->handle;
}

static const PvrdmaBackendOps rec_ops = {
    .name = "recording",
    .reset = rec_reset,
    .free = rec_free,
    .pd_create = rec_pd_create,
    .pd_destroy = rec_pd_destroy,
    .mr_register = rec_mr_register,
    .mr_deregister = rec_mr_deregister,
    .cq_create = rec_cq_create,
    .cq_destroy = rec_cq_destroy,
    .qp_create = rec_qp_create,
    .qp_modify = rec_qp_modify,
    .qp_destroy = rec_qp_destroy,
    .srq_create = rec_srq_create,
    .srq_modify = rec_srq_modify,
    .srq_destroy = rec_srq_destroy,
    .gid_bind = rec_gid_bind,
    .gid_unbind = rec_gid_unbind,
    .submit = rec_submit,
    .recv_posted = rec_recv_posted,
};

FgBackend *fg_use_recording_backend(FakeGuest *fg)
{
    FgBackend *b = g_new0(FgBackend, 1);

    pvrdma_core_set_backend(fg->core, &rec_ops, b);
    b->reset = 0;
    return b;
}

static bool fg_no_windows(void *be)
{
    (void)be;
    return false;
}

const PvrdmaBackendOps *fg_backend_without_windows(void)
{
    static const PvrdmaBackendOps ops = {
        .name = "no-windows",
        .mw_offered = fg_no_windows,
    };

    return &ops;
}
