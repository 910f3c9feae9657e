/*
 * libFuzzer harness of the PVRDMA device core (hw/pvrdma, no QEMU).
 *
 * The input is a sequence of guest actions (format in fuzz_actions.h)
 * against one or two cores whose fake guests (tests/unit/fake_guest.c)
 * share one guest RAM: BAR1 register accesses at any offset, raw writes
 * into guest memory (command slots, PDIRs, rings, WQEs), ring index
 * writes, "well-formed" helpers that issue valid commands with fuzzer
 * chosen fields and patches (DSR load, UC/PD/CQ/MR/QP/SRQ creation,
 * connecting two QPs to RTS), WQE posting, doorbells, timer expiry, device
 * reset, core free + new, and knobs of the fake glue (short or refused
 * mappings, an MMIO window, a page whose DMA writes fail).
 *
 * The fake DMA fails outside guest RAM.  After every action the harness
 * checks cheap invariants: no dma_map outlives an entry point, object
 * tables stay within their quotas, pinned pages within the limit, ICR
 * only holds vector bits, and the live host heap grows by less than
 * FZ_HEAP_CAP over the whole input (counted with sanitizer malloc hooks).
 * Everything the cores allocate is freed at the end of each input, so
 * LeakSanitizer (libFuzzer -detect_leaks) sees any leak.
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

#include <glib.h>
#include <sanitizer/allocator_interface.h>

#include "fake_guest.h"
#include "fuzz_actions.h"
#include "pvrdma_core_int.h"
#include "pvrdma_fabric.h"
#include "pvrdma_ring.h"

#define FZ_NDEV             2
#define FZ_MAX_OBJ          16
#define FZ_MAX_PAGES        64
#define FZ_MAX_ACTIONS      2048
/* Live host heap growth allowed over one input (all quotas together). */
#define FZ_HEAP_CAP         (96ll << 20)
#define FZ_RAM_END          (FG_MEM_BASE + FG_MEM_SIZE)

#define FZ_CHECK(cond)                                                      \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "fuzz_core: invariant failed: %s (%s:%d)\n",    \
                    #cond, __FILE__, __LINE__);                             \
            abort();                                                        \
        }                                                                   \
    } while (0)

/* ---- input --------------------------------------------------------------- */

typedef struct FzIn {
    const uint8_t *p;
    size_t n;
} FzIn;

static uint8_t in_u8(FzIn *in)
{
    if (!in->n) {
        return 0;
    }
    in->n--;
    return *in->p++;
}

static uint16_t in_u16(FzIn *in)
{
    return in_u8(in) | (uint16_t)in_u8(in) << 8;
}

static uint32_t in_u32(FzIn *in)
{
    return in_u16(in) | (uint32_t)in_u16(in) << 16;
}

static uint64_t in_u64(FzIn *in)
{
    return in_u32(in) | (uint64_t)in_u32(in) << 32;
}

/* ---- tracked objects ----------------------------------------------------- */

typedef struct FzUc {
    uint32_t handle;
    uint32_t uar;
} FzUc;

typedef struct FzPd {
    uint32_t handle;
    uint32_t ctx;
} FzPd;

typedef struct FzMr {
    uint32_t handle, lkey, rkey, kind, max_sg;
    uint64_t va, len;           /* user: VA; DMA: bus base; FRMR: IOVA */
    uint64_t pages[FZ_MAX_PAGES];
    uint32_t npages;
    uint64_t pl_pdir;           /* FRMR: page-list PDIR */
} FzMr;

typedef struct FzCq {
    uint32_t handle, n, npages, ctx;
    uint64_t pages[FZ_MAX_PAGES];
} FzCq;

typedef struct FzQp {
    uint32_t handle, qpn, sq_n, rq_n, sq_wqe, rq_wqe, send_chunks, npages;
    uint32_t uar;
    uint8_t type;
    bool has_srq;
    uint64_t pages[FZ_MAX_PAGES];
} FzQp;

typedef struct FzSrq {
    uint32_t handle, n, wqe, npages, uar;
    uint64_t pages[FZ_MAX_PAGES];
} FzSrq;

typedef struct FzDev {
    FakeGuest *fg;
    const PvrdmaCoreOps *ops;
    FzUc uc[FZ_MAX_OBJ];
    FzPd pd[FZ_MAX_OBJ];
    FzMr mr[FZ_MAX_OBJ];
    FzCq cq[FZ_MAX_OBJ];
    FzQp qp[FZ_MAX_OBJ];
    FzSrq srq[FZ_MAX_OBJ];
    unsigned nuc, npd, nmr, ncq, nqp, nsrq;
} FzDev;

static struct {
    bool inited;
    uint8_t *mem;
    uint8_t *dirty;             /* the fake guests' dirty pages, shared */
    FakeGuest *fg_full, *fg_min;
    const PvrdmaCoreOps *ops_full, *ops_min;
    PvrdmaCoreConfig cfg_default, cfg_tiny;
    FzDev dev[FZ_NDEV];
    unsigned ndev;
    uint64_t uar_base;
} fz;

/* Heap accounting through the sanitizer allocator hooks. */
static volatile long long fz_heap_live;
/* FZ_TRACE=1: print every action (reading reproducers). */
static bool fz_trace;

static void fz_malloc_hook(const volatile void *ptr, size_t size)
{
    (void)ptr;
    fz_heap_live += (long long)size;
}

static void fz_free_hook(const volatile void *ptr)
{
    if (ptr && __sanitizer_get_ownership((const void *)ptr)) {
        fz_heap_live -= (long long)
            __sanitizer_get_allocated_size((const void *)ptr);
    }
}

#define TRACK(d, arr, cnt, obj)                                             \
    do {                                                                    \
        if ((d)->cnt < FZ_MAX_OBJ) {                                        \
            (d)->arr[(d)->cnt++] = (obj);                                   \
        } else {                                                            \
            (d)->arr[(obj).handle % FZ_MAX_OBJ] = (obj);                    \
        }                                                                   \
    } while (0)

#define UNTRACK(d, arr, cnt, h)                                             \
    do {                                                                    \
        unsigned i_;                                                        \
        for (i_ = 0; i_ < (d)->cnt; i_++) {                                 \
            if ((d)->arr[i_].handle == (h)) {                               \
                (d)->arr[i_] = (d)->arr[--(d)->cnt];                        \
                break;                                                      \
            }                                                               \
        }                                                                   \
    } while (0)

static void fz_untrack_all(FzDev *d)
{
    d->nuc = d->npd = d->nmr = d->ncq = d->nqp = d->nsrq = 0;
}

static FzDev *in_dev(FzIn *in)
{
    return &fz.dev[(in_u8(in) & 1) % fz.ndev];
}

/*
 * Read an object selector: an index into @cnt tracked objects (returned,
 * *raw untouched), or FZ_SEL_RAW.. (returns -1, *raw = next u32).  With no
 * tracked object, -1 and *raw = the selector byte itself.
 */
static int in_sel(FzIn *in, unsigned cnt, uint32_t *raw)
{
    uint8_t s = in_u8(in);

    if (s >= FZ_SEL_RAW) {
        *raw = in_u32(in);
        return -1;
    }
    if (s == FZ_SEL_KERNEL) {
        *raw = 0;
        return -2;
    }
    if (!cnt) {
        *raw = s;
        return -1;
    }
    return s % cnt;
}

/* ---- guest memory -------------------------------------------------------- */

static bool fz_in_ram(uint64_t addr, uint64_t len)
{
    return len != 0 && addr >= FG_MEM_BASE && addr + len >= addr &&
           addr + len <= FZ_RAM_END;
}

static uint8_t *fz_ptr(uint64_t addr)
{
    return fz.mem + (addr - FG_MEM_BASE);
}

static void fz_put32(uint64_t addr, uint32_t v)
{
    if (fz_in_ram(addr, 4)) {
        memcpy(fz_ptr(addr), &v, 4);
    }
}

static uint32_t fz_get32(uint64_t addr)
{
    uint32_t v = 0;

    if (fz_in_ram(addr, 4)) {
        memcpy(&v, fz_ptr(addr), 4);
    }
    return v;
}

static uint64_t fz_next_free(void)
{
    uint64_t nf = fz.dev[0].fg->next_free;
    unsigned i;

    for (i = 1; i < fz.ndev; i++) {
        nf = MAX(nf, fz.dev[i].fg->next_free);
    }
    return nf;
}

/*
 * The fake guests share one RAM and one bump allocator position; true if
 * @pages more pages fit (the fake allocator asserts otherwise).
 */
static bool fz_room(uint64_t pages)
{
    uint64_t nf = fz_next_free();
    unsigned i;

    for (i = 0; i < fz.ndev; i++) {
        fz.dev[i].fg->next_free = nf;
    }
    return nf + (pages + 4) * FG_PAGE <= FZ_RAM_END;
}

static uint32_t fz_pow2(uint32_t v)
{
    uint32_t p = 1;

    while (p < v) {
        p <<= 1;
    }
    return p;
}

/* ---- commands ------------------------------------------------------------ */

/*
 * One command through the fake driver (fg_cmd), using the slots the core
 * actually loaded (the fuzzer may have loaded a DSR by hand).  -ENODEV
 * without usable slots: nothing is written then.
 */
static int fz_cmd(FzDev *d, const void *req, size_t len,
                  union pvrdma_cmd_resp *resp)
{
    PvrdmaCore *core = d->fg->core;

    if (resp) {
        memset(resp, 0, sizeof(*resp));
    }
    if (!core->dsr_loaded || !fz_in_ram(core->cmd_slot, FG_PAGE) ||
        !fz_in_ram(core->resp_slot, FG_PAGE)) {
        return -ENODEV;
    }
    d->fg->cmd_slot = core->cmd_slot;
    d->fg->resp_slot = core->resp_slot;
    return fg_cmd(d->fg, req, len, resp);
}

/* npatch[1] {off[1] val[4]}*: overwrite up to 4 u32s of a request. */
static void in_patch(FzIn *in, void *req, size_t len)
{
    unsigned n = in_u8(in) % 5, i;

    for (i = 0; i < n; i++) {
        size_t off = in_u8(in) % len;
        uint32_t v = in_u32(in);

        off = MIN(off, len - 4);
        memcpy((uint8_t *)req + off, &v, 4);
    }
}

/*
 * poison[1]: bit 7 set -> replace data page entry (poison % n) of the PDIR
 * at @pdir with an address outside guest RAM (bit 6: the last RAM page,
 * so that a multi-page access runs off the end).
 */
static void fz_pdir_poison(uint64_t pdir, uint32_t n, uint8_t poison)
{
    uint64_t table, addr, bad;
    uint32_t i;

    if (!(poison & 0x80) || !n || !fz_in_ram(pdir, 8)) {
        return;
    }
    memcpy(&table, fz_ptr(pdir), 8);
    i = (poison & 0x3f) % MIN(n, 512u);
    addr = table + 8ull * i;
    bad = (poison & 0x40) ? FZ_RAM_END - FG_PAGE : FG_BAD_ADDR;
    if (fz_in_ram(addr, 8)) {
        memcpy(fz_ptr(addr), &bad, 8);
    }
}

static uint32_t fz_uc_pfn(uint32_t uar)
{
    return (FG_UAR_BASE >> 12) + uar;
}

static void fz_create_uc(FzIn *in, FzDev *d)
{
    struct pvrdma_cmd_create_uc c = { .hdr.cmd = PVRDMA_CMD_CREATE_UC };
    union pvrdma_cmd_resp r;
    uint32_t uar = in_u8(in);

    c.pfn64 = fz_uc_pfn(uar);
    in_patch(in, &c, sizeof(c));
    if (fz_cmd(d, &c, sizeof(c), &r) == 0) {
        FzUc uc = { .handle = r.create_uc_resp.ctx_handle, .uar = uar };

        TRACK(d, uc, nuc, uc);
    }
}

/* ctx selector: 0xEF = kernel, tracked UC, or raw. */
static uint32_t in_ctx(FzIn *in, FzDev *d, uint32_t *uar)
{
    uint32_t raw;
    int i = in_sel(in, d->nuc, &raw);

    *uar = 0;
    if (i >= 0) {
        *uar = d->uc[i].uar;
        return d->uc[i].handle;
    }
    return raw;
}

static uint32_t fz_ctx_uar(FzDev *d, uint32_t ctx)
{
    unsigned i;

    for (i = 0; i < d->nuc; i++) {
        if (d->uc[i].handle == ctx) {
            return d->uc[i].uar;
        }
    }
    return 0;
}

static void fz_create_pd(FzIn *in, FzDev *d)
{
    struct pvrdma_cmd_create_pd c = { .hdr.cmd = PVRDMA_CMD_CREATE_PD };
    union pvrdma_cmd_resp r;
    uint32_t uar;

    c.ctx_handle = in_ctx(in, d, &uar);
    in_patch(in, &c, sizeof(c));
    if (fz_cmd(d, &c, sizeof(c), &r) == 0) {
        FzPd pd = { .handle = r.create_pd_resp.pd_handle,
                    .ctx = c.ctx_handle };

        TRACK(d, pd, npd, pd);
    }
}

static uint32_t in_pd(FzIn *in, FzDev *d)
{
    uint32_t raw;
    int i = in_sel(in, d->npd, &raw);

    return i >= 0 ? d->pd[i].handle : raw;
}

static uint32_t fz_pd_ctx(FzDev *d, uint32_t pd)
{
    unsigned i;

    for (i = 0; i < d->npd; i++) {
        if (d->pd[i].handle == pd) {
            return d->pd[i].ctx;
        }
    }
    return 0;
}

static void fz_create_cq(FzIn *in, FzDev *d)
{
    struct pvrdma_cmd_create_cq c = { .hdr.cmd = PVRDMA_CMD_CREATE_CQ };
    union pvrdma_cmd_resp r;
    FzCq cq = { 0 };
    uint32_t uar, alloc;
    int8_t delta;

    c.ctx_handle = in_ctx(in, d, &uar);
    cq.n = 1u << (in_u8(in) % 11);
    delta = (int8_t)in_u8(in);
    c.cqe = cq.n;
    c.nchunks = 1 + (cq.n * 64 + 4095) / 4096 + delta % 4;
    alloc = MIN(MAX(c.nchunks, 1u), (uint32_t)FZ_MAX_PAGES);
    if (!fz_room(2 * alloc + 2)) {
        return;
    }
    c.pdir_dma = fg_alloc_paged(d->fg, alloc, cq.pages);
    cq.npages = alloc;
    fz_pdir_poison(c.pdir_dma, alloc, (uint8_t)delta << 1);
    cq.ctx = c.ctx_handle;
    in_patch(in, &c, sizeof(c));
    if (fz_cmd(d, &c, sizeof(c), &r) == 0) {
        cq.handle = r.create_cq_resp.cq_handle;
        cq.n = r.create_cq_resp.cqe ? r.create_cq_resp.cqe : cq.n;
        TRACK(d, cq, ncq, cq);
    }
}

static void fz_create_mr(FzIn *in, FzDev *d)
{
    struct pvrdma_cmd_create_mr c = { .hdr.cmd = PVRDMA_CMD_CREATE_MR };
    union pvrdma_cmd_resp r;
    FzMr mr = { 0 };
    uint8_t kb = in_u8(in), kind = kb >= 0xF0 ? 3 : kb % 3;
    uint32_t n, alloc;
    int8_t delta;

    c.pd_handle = in_pd(in, d);
    c.access_flags = in_u8(in);
    mr.va = in_u64(in);
    mr.len = in_u16(in);
    delta = (int8_t)in_u8(in);
    mr.kind = kind;
    if (kind == 0) {
        if (mr.va == 0) {
            mr.va = 0x7f0000000800ull;
        }
        n = ((mr.va & 0xfff) + mr.len + 0xfff) >> 12;
        c.start = mr.va;
        c.length = mr.len;
        c.nchunks = n + delta % 3;
        alloc = MIN(MAX(MAX(n, c.nchunks), 1u), (uint32_t)FZ_MAX_PAGES);
        if (!fz_room(2 * alloc + 2)) {
            return;
        }
        c.pdir_dma = fg_alloc_paged(d->fg, alloc, mr.pages);
        mr.npages = alloc;
        fz_pdir_poison(c.pdir_dma, alloc, (uint8_t)delta << 1);
    } else if (kind == 1) {
        c.flags = PVRDMA_MR_FLAG_DMA;
        c.access_flags &= (c.access_flags & 0x80) ? 0xff : 1;
        if (!fz_room(8)) {
            return;
        }
        mr.va = fg_alloc_pages(d->fg, 4);
        mr.len = 4 * FG_PAGE;
    } else if (kind == 3) {
        /* A memory window: type 1 or 2, the rest mostly zero. */
        c.flags = (kb & 1) ? PVRDMA_MR_FLAG_MW_TYPE2 :
                  PVRDMA_MR_FLAG_MW_TYPE1;
        c.access_flags = (c.access_flags & 0x80) ? c.access_flags : 0;
        mr.va = 0;
        mr.len = 0;
    } else {
        c.flags = PVRDMA_MR_FLAG_FRMR;
        c.access_flags = (c.access_flags & 0x80) ? c.access_flags : 0;
        mr.max_sg = mr.len % 130;
        c.nchunks = mr.max_sg;
        alloc = MIN(MAX(mr.max_sg, 1u), 16u);
        if (!fz_room(2 * alloc + 2)) {
            return;
        }
        /* The pdir of the data pages doubles as the REG_MR page list. */
        mr.pl_pdir = fg_alloc_paged(d->fg, alloc, mr.pages);
        mr.npages = alloc;
        mr.va = 0;
        mr.len = 0;
    }
    in_patch(in, &c, sizeof(c));
    if (fz_cmd(d, &c, sizeof(c), &r) == 0) {
        mr.handle = r.create_mr_resp.mr_handle;
        mr.lkey = r.create_mr_resp.lkey;
        mr.rkey = r.create_mr_resp.rkey;
        TRACK(d, mr, nmr, mr);
    }
}

static uint32_t in_cq(FzIn *in, FzDev *d)
{
    uint32_t raw;
    int i = in_sel(in, d->ncq, &raw);

    return i >= 0 ? d->cq[i].handle : raw;
}

/*
 * An XRC_TGT QP: the domain (raw, XRC domains are 1, 2, ...), then the
 * request patched like any other; tracked without pages (no queue).
 */
static void fz_create_xrc_tgt(FzIn *in, FzDev *d)
{
    struct pvrdma_cmd_create_qp_ex c;
    union pvrdma_cmd_resp r;
    FzQp qp = { .type = PVRDMA_QPT_XRC_TGT };

    memset(&c, 0, sizeof(c));
    c.qp.hdr.cmd = PVRDMA_CMD_CREATE_QP;
    c.qp.qp_type = PVRDMA_QPT_XRC_TGT;
    c.xrcd_handle = in_u8(in);
    in_patch(in, &c, sizeof(c));
    if (fz_cmd(d, &c, sizeof(c), &r) == 0) {
        qp.handle = r.create_qp_resp_v2.qp_handle;
        qp.qpn = r.create_qp_resp_v2.qpn;
        if (d->fg->core->driver_version < PVRDMA_VERSION_QPHANDLE) {
            qp.handle = qp.qpn;
        }
        TRACK(d, qp, nqp, qp);
    }
}

static void fz_create_qp(FzIn *in, FzDev *d)
{
    struct pvrdma_cmd_create_qp c = { .hdr.cmd = PVRDMA_CMD_CREATE_QP };
    union pvrdma_cmd_resp r;
    FzQp qp = { 0 };
    uint8_t t = in_u8(in);
    uint32_t raw, sge, sq_pages, rq_pages, total;
    uint8_t poison;
    int s;

    /* 0xF9, 0xFA: XRC_INI and XRC_TGT (PVRDMA_EX_CAP_XRC); 0xF0..: raw. */
    qp.type = t < 0xB0 ? PVRDMA_QPT_RC : t < 0xC0 ? PVRDMA_QPT_UC :
              t < 0xE0 ? PVRDMA_QPT_UD : t < 0xF0 ? PVRDMA_QPT_GSI :
              t == 0xF9 ? PVRDMA_QPT_XRC_INI :
              t == 0xFA ? PVRDMA_QPT_XRC_TGT : t;
    if (qp.type == PVRDMA_QPT_XRC_TGT) {
        fz_create_xrc_tgt(in, d);
        return;
    }
    c.pd_handle = in_pd(in, d);
    c.send_cq_handle = in_cq(in, d);
    c.recv_cq_handle = in_cq(in, d);
    s = in_sel(in, d->nsrq, &raw);
    if (qp.type == PVRDMA_QPT_XRC_INI) {
        c.recv_cq_handle = 0;   /* no receive side (the rest stays 0) */
        qp.has_srq = true;      /* (no RQ of its own, as with an SRQ) */
    } else if (s >= 0 || s == -1) {
        c.is_srq = 1;
        c.srq_handle = s >= 0 ? d->srq[s].handle : raw;
        qp.has_srq = true;
    }
    qp.sq_n = 1u << (in_u8(in) % 9);
    sge = 1 + in_u8(in) % 6;
    poison = in_u8(in);
    c.sq_sig_all = poison & 1;
    qp.rq_n = qp.has_srq ? 0 : qp.sq_n;
    qp.sq_wqe = fz_pow2(80 + 16 * sge);
    qp.rq_wqe = fz_pow2(16 + 16 * sge);
    sq_pages = (qp.sq_n * qp.sq_wqe + 4095) / 4096;
    rq_pages = qp.has_srq ? 0 : (qp.rq_n * qp.rq_wqe + 4095) / 4096;
    total = 1 + sq_pages + rq_pages;
    if (total > FZ_MAX_PAGES || !fz_room(2 * total + 2)) {
        return;
    }
    c.pdir_dma = fg_alloc_paged(d->fg, total, qp.pages);
    qp.npages = total;
    fz_pdir_poison(c.pdir_dma, total, poison & 0xfe);
    qp.send_chunks = sq_pages;
    c.max_send_wr = qp.sq_n;
    c.max_send_sge = sge;
    if (!qp.has_srq) {
        c.max_recv_wr = qp.rq_n;
        c.max_recv_sge = sge;
    }
    qp.has_srq = qp.has_srq && qp.type != PVRDMA_QPT_XRC_INI;
    c.access_flags = PVRDMA_ACCESS_LOCAL_WRITE;
    c.total_chunks = total;
    c.send_chunks = sq_pages;
    c.qp_type = qp.type;
    in_patch(in, &c, sizeof(c));
    if (fz_cmd(d, &c, sizeof(c), &r) == 0) {
        qp.handle = r.create_qp_resp_v2.qp_handle;
        qp.qpn = r.create_qp_resp_v2.qpn;
        if (d->fg->core->driver_version < PVRDMA_VERSION_QPHANDLE) {
            qp.handle = qp.qpn;
        }
        qp.uar = fz_ctx_uar(d, fz_pd_ctx(d, c.pd_handle));
        TRACK(d, qp, nqp, qp);
    }
}

static void fz_create_srq(FzIn *in, FzDev *d)
{
    struct pvrdma_cmd_create_srq_ex x = {
        .srq.hdr.cmd = PVRDMA_CMD_CREATE_SRQ,
    };
    struct pvrdma_cmd_create_srq *c = &x.srq;
    union pvrdma_cmd_resp r;
    FzSrq srq = { 0 };
    uint32_t sge, n;
    uint8_t lim, sb;

    c->pd_handle = in_pd(in, d);
    srq.n = 1u << (in_u8(in) % 9);
    sb = in_u8(in);
    sge = 1 + (sb & 0x7f) % 6;
    /* sge byte bit 7: an XRC SRQ of domain 1 + bits 4..6, the first CQ. */
    if (sb & 0x80) {
        c->srq_type = PVRDMA_SRQT_XRC;
        x.xrcd_handle = 1 + ((sb >> 4) & 7);
        x.cq_handle = d->ncq ? d->cq[0].handle : 0;
    }
    lim = in_u8(in);
    srq.wqe = fz_pow2(16 + 16 * sge);
    n = (srq.n * srq.wqe + 4095) / 4096;
    /* The provider allocates twice the ring (spec §8.1). */
    n = 1 + ((lim & 0x80) ? 2 * n : n);
    if (n > FZ_MAX_PAGES || !fz_room(2 * n + 2)) {
        return;
    }
    c->pdir_dma = fg_alloc_paged(d->fg, n, srq.pages);
    srq.npages = n;
    c->nchunks = n;
    c->attrs.max_wr = srq.n;
    c->attrs.max_sge = sge;
    c->attrs.srq_limit = lim & 0x7f;
    in_patch(in, &x, sizeof(x));
    if (fz_cmd(d, &x, sizeof(x), &r) == 0) {
        srq.handle = r.create_srq_resp.srqn;
        srq.uar = fz_ctx_uar(d, fz_pd_ctx(d, c->pd_handle));
        TRACK(d, srq, nsrq, srq);
    }
}

static int fz_modify(FzDev *d, uint32_t qp, uint32_t mask,
                     const struct pvrdma_qp_attr *a)
{
    struct pvrdma_cmd_modify_qp c;
    union pvrdma_cmd_resp r;
    int ret;

    memset(&c, 0, sizeof(c));
    c.hdr.cmd = PVRDMA_CMD_MODIFY_QP;
    c.qp_handle = qp;
    c.attr_mask = mask;
    c.attrs = *a;
    ret = fz_cmd(d, &c, sizeof(c), &r);
    if (ret != -ENODEV && d->fg->core->dsr_loaded &&
        d->fg->core->resp_slot != d->fg->core->cmd_slot) {
        /* The response mirrors ERR (spec §5.1). */
        FZ_CHECK(r.hdr.ack == PVRDMA_CMD_ACK(PVRDMA_CMD_MODIFY_QP) ||
                 ret == -EFAULT);
        FZ_CHECK(ret == -EFAULT || r.hdr.err == (uint8_t)-ret);
    }
    return ret;
}

static uint32_t in_qp(FzIn *in, FzDev *d, FzQp **out)
{
    uint32_t raw;
    int i = in_sel(in, d->nqp, &raw);

    *out = i >= 0 ? &d->qp[i] : NULL;
    return i >= 0 ? d->qp[i].handle : raw;
}

/* GID index 0 = the test GID of index 0, identical on both devices. */
static void fz_bind_gid0(FzDev *d)
{
    struct pvrdma_cmd_create_bind c = { .hdr.cmd = PVRDMA_CMD_CREATE_BIND };

    if (d->fg->core->dsr_loaded && !d->fg->core->gids[0].bound) {
        c.mtu = 1024;
        c.vlan = 0xfff;
        c.index = 0;
        fg_test_gid(0, c.new_gid);
        c.gid_type = PVRDMA_GID_TYPE_FLAG_ROCE_V2;
        fz_cmd(d, &c, sizeof(c), NULL);
    }
}

static void fz_connect(FzIn *in)
{
    FzDev *da = in_dev(in), *db;
    FzQp *qa, *qb;
    uint32_t ha = in_qp(in, da, &qa), hb;
    struct pvrdma_qp_attr at;
    uint8_t access, timer, rnr, retry, mtu;

    db = in_dev(in);
    hb = in_qp(in, db, &qb);
    access = in_u8(in);
    timer = in_u8(in);
    rnr = in_u8(in);
    retry = in_u8(in);
    mtu = in_u8(in);
    fz_bind_gid0(da);
    fz_bind_gid0(db);

    memset(&at, 0, sizeof(at));
    at.qp_state = PVRDMA_QPS_INIT;
    at.port_num = 1;
    at.qp_access_flags = access & 0x8f;
    at.qkey = 0x11111111;
    if (qa && qa->type != PVRDMA_QPT_RC && qa->type != PVRDMA_QPT_UC &&
        qa->type != PVRDMA_QPT_XRC_INI && qa->type != PVRDMA_QPT_XRC_TGT) {
        /* UD / GSI: the masks of fg_qp_to_rts(), no connection. */
        if (fz_modify(da, ha, PVRDMA_QP_STATE | PVRDMA_QP_PKEY_INDEX |
                      (qa->type == PVRDMA_QPT_GSI ? 0 : PVRDMA_QP_PORT) |
                      PVRDMA_QP_QKEY, &at)) {
            return;
        }
        at.qp_state = PVRDMA_QPS_RTR;
        if (fz_modify(da, ha, PVRDMA_QP_STATE, &at)) {
            return;
        }
        at.qp_state = PVRDMA_QPS_RTS;
        fz_modify(da, ha, PVRDMA_QP_STATE | PVRDMA_QP_SQ_PSN, &at);
        return;
    }
    if (fz_modify(da, ha, PVRDMA_QP_STATE | PVRDMA_QP_PKEY_INDEX |
                  PVRDMA_QP_PORT | PVRDMA_QP_ACCESS_FLAGS, &at)) {
        return;
    }
    memset(&at, 0, sizeof(at));
    at.qp_state = PVRDMA_QPS_RTR;
    at.path_mtu = 1 + mtu % 5;
    at.dest_qp_num = qb ? qb->qpn : hb;
    at.rq_psn = 0x1000;
    at.max_dest_rd_atomic = 4;
    at.min_rnr_timer = timer % 32;
    at.ah_attr.ah_flags = PVRDMA_AH_FLAG_GRH;
    at.ah_attr.port_num = 1;
    at.ah_attr.grh.hop_limit = 64;
    at.ah_attr.sl = 3;
    fg_test_gid(0, at.ah_attr.grh.dgid);
    /* UC, XRC_INI: no RNR or READ attributes (they would be refused). */
    if (fz_modify(da, ha, PVRDMA_QP_STATE | PVRDMA_QP_AV |
                  PVRDMA_QP_PATH_MTU | PVRDMA_QP_DEST_QPN |
                  PVRDMA_QP_RQ_PSN |
                  (qa && (qa->type == PVRDMA_QPT_UC ||
                          qa->type == PVRDMA_QPT_XRC_INI) ? 0 :
                   PVRDMA_QP_MAX_DEST_RD_ATOMIC | PVRDMA_QP_MIN_RNR_TIMER),
                  &at)) {
        return;
    }
    memset(&at, 0, sizeof(at));
    at.qp_state = PVRDMA_QPS_RTS;
    at.sq_psn = 0x1000;
    at.timeout = 14;
    at.retry_cnt = retry % 8;
    at.rnr_retry = rnr % 8;
    at.max_rd_atomic = 4;
    fz_modify(da, ha, PVRDMA_QP_STATE | PVRDMA_QP_SQ_PSN |
              (qa && qa->type == PVRDMA_QPT_UC ? 0 :
               qa && qa->type == PVRDMA_QPT_XRC_TGT ? PVRDMA_QP_TIMEOUT :
               PVRDMA_QP_TIMEOUT | PVRDMA_QP_RETRY_CNT |
               PVRDMA_QP_RNR_RETRY | PVRDMA_QP_MAX_QP_RD_ATOMIC), &at);
}

static void fz_modify_qp(FzIn *in)
{
    /* The masks the Linux driver sends per target state (RC). */
    static const uint32_t std_mask[8] = {
        [PVRDMA_QPS_RESET] = PVRDMA_QP_STATE,
        [PVRDMA_QPS_INIT] = PVRDMA_QP_STATE | PVRDMA_QP_PKEY_INDEX |
                            PVRDMA_QP_PORT | PVRDMA_QP_ACCESS_FLAGS,
        [PVRDMA_QPS_RTR] = PVRDMA_QP_STATE | PVRDMA_QP_AV |
                           PVRDMA_QP_PATH_MTU | PVRDMA_QP_DEST_QPN |
                           PVRDMA_QP_RQ_PSN | PVRDMA_QP_MAX_DEST_RD_ATOMIC |
                           PVRDMA_QP_MIN_RNR_TIMER,
        [PVRDMA_QPS_RTS] = PVRDMA_QP_STATE | PVRDMA_QP_SQ_PSN |
                           PVRDMA_QP_TIMEOUT | PVRDMA_QP_RETRY_CNT |
                           PVRDMA_QP_RNR_RETRY | PVRDMA_QP_MAX_QP_RD_ATOMIC,
        [PVRDMA_QPS_SQD] = PVRDMA_QP_STATE | PVRDMA_QP_EN_SQD_ASYNC_NOTIFY,
        [PVRDMA_QPS_SQE] = PVRDMA_QP_STATE,
        [PVRDMA_QPS_ERR] = PVRDMA_QP_STATE,
        [7] = 0,
    };
    FzDev *d = in_dev(in);
    FzQp *q;
    uint32_t h = in_qp(in, d, &q);
    uint32_t mask = in_u32(in);
    struct pvrdma_qp_attr at;

    memset(&at, 0, sizeof(at));
    at.qp_state = in_u8(in) % 8;
    if (!(mask & 0x80000000u)) {
        /* mask bits 0-4: one optional extra bit, bit 5: drop STATE */
        uint32_t m = std_mask[at.qp_state];

        if (mask & 0x20) {
            m &= ~PVRDMA_QP_STATE;
        }
        mask = m | ((mask & 0x40) ? 1u << (mask % 21) : 0);
    } else {
        mask &= ~0x80000000u;
    }
    at.en_sqd_async_notify = 1;
    at.rnr_retry = 7;
    at.retry_cnt = 7;
    at.timeout = 14;
    at.min_rnr_timer = 1;
    at.port_num = 1;
    at.path_mtu = PVRDMA_MTU_1024;
    at.dest_qp_num = d->nqp ? d->qp[0].qpn : 2;
    at.ah_attr.ah_flags = PVRDMA_AH_FLAG_GRH;
    at.ah_attr.port_num = 1;
    fg_test_gid(0, at.ah_attr.grh.dgid);
    in_patch(in, &at, sizeof(at));
    fz_modify(d, h, mask, &at);
}

static void fz_query(FzIn *in)
{
    FzDev *d = in_dev(in);
    uint8_t wb = in_u8(in);
    /*
     * 0xF0, 0xF1: ATTACH_MCAST, DETACH_MCAST; 0xF2, 0xF3: CREATE_XRCD,
     * DESTROY_XRCD (of val); 0xF4..: as 0xF0..0xF3.
     */
    uint8_t which = wb >= 0xF0 ? 6 + (wb & 3) : wb % 6;
    uint32_t raw, h = 0, mask, val, alloc = 0;
    bool ok;
    uint64_t pages[FZ_MAX_PAGES];
    union pvrdma_cmd_req c;
    union pvrdma_cmd_resp r;
    int i = -1;

    memset(&c, 0, sizeof(c));
    switch (which) {
    case 2:
    case 6:
    case 7:
        i = in_sel(in, d->nqp, &raw);
        h = i >= 0 ? d->qp[i].handle : raw;
        break;
    case 3:
    case 4:
        i = in_sel(in, d->nsrq, &raw);
        h = i >= 0 ? d->srq[i].handle : raw;
        break;
    case 5:
        h = in_cq(in, d);
        break;
    default:
        in_sel(in, 0, &raw);
        break;
    }
    mask = in_u32(in);
    val = in_u32(in);
    switch (which) {
    case 0:
        c.query_port.hdr.cmd = PVRDMA_CMD_QUERY_PORT;
        c.query_port.port_num = val;
        break;
    case 1:
        c.query_pkey.hdr.cmd = PVRDMA_CMD_QUERY_PKEY;
        c.query_pkey.port_num = val;
        c.query_pkey.index = val >> 8;
        break;
    case 2:
        c.query_qp.hdr.cmd = PVRDMA_CMD_QUERY_QP;
        c.query_qp.qp_handle = h;
        c.query_qp.attr_mask = mask;
        break;
    case 3:
        c.query_srq.hdr.cmd = PVRDMA_CMD_QUERY_SRQ;
        c.query_srq.srq_handle = h;
        break;
    case 8:
        c.create_xrcd.hdr.cmd = PVRDMA_CMD_CREATE_XRCD;
        c.create_xrcd.reserved[0] = (mask & 0x100) != 0;
        break;
    case 9:
        c.destroy_xrcd.hdr.cmd = PVRDMA_CMD_DESTROY_XRCD;
        c.destroy_xrcd.xrcd_handle = val;
        break;
    case 6:
    case 7:
        /* One of 8 groups (mask bit 0: a unicast GID instead). */
        c.mcast.hdr.cmd = which == 6 ? PVRDMA_CMD_ATTACH_MCAST :
                                       PVRDMA_CMD_DETACH_MCAST;
        c.mcast.qp_handle = h;
        c.mcast.mgid[0] = mask & 1 ? 0xfe : 0xff;
        c.mcast.mgid[15] = val % 8;
        c.mcast.reserved[0] = (mask & 0x100) != 0;
        break;
    case 4:
        c.modify_srq_ex.hdr.cmd = PVRDMA_CMD_MODIFY_SRQ;
        c.modify_srq_ex.srq_handle = h;
        c.modify_srq_ex.attr_mask = mask & 3;
        c.modify_srq_ex.attrs.srq_limit = val;
        if ((mask & 5) != 5) {
            break;
        }
        /* MAX_WR with a new ring (PVRDMA_EX_CAP_RESIZE_SRQ), sized by
         * mask's bits 8-23 as RESIZE_CQ's by val, for a tracked SRQ's
         * WQE size (else 64 bytes). */
        c.modify_srq_ex.attrs.max_wr = mask & 0x100 ? mask >> 8 :
                                       1u << ((mask >> 8) % 11);
        c.modify_srq_ex.nchunks =
            1 + ((uint64_t)(c.modify_srq_ex.attrs.max_wr & 0x7ff) *
                 (i >= 0 ? d->srq[i].wqe : 64) + 4095) / 4096 +
            (int8_t)(mask >> 16) % 4;
        alloc = MIN(MAX(c.modify_srq_ex.nchunks, 1u), (uint32_t)FZ_MAX_PAGES);
        if (!fz_room(2 * alloc + 2)) {
            return;
        }
        c.modify_srq_ex.pdir_dma = fg_alloc_paged(d->fg, alloc, pages);
        fz_pdir_poison(c.modify_srq_ex.pdir_dma, alloc, (uint8_t)(mask >> 24));
        break;
    default:
        /* RESIZE_CQ to a new ring; the low bits of val size it. */
        c.resize_cq_ex.hdr.cmd = PVRDMA_CMD_RESIZE_CQ;
        c.resize_cq_ex.cq_handle = h;
        c.resize_cq_ex.cqe = val & 0x100 ? val : 1u << (val % 11);
        c.resize_cq_ex.nchunks =
            1 + (((uint64_t)c.resize_cq_ex.cqe & 0x7ff) * 64 + 4095) / 4096 +
            (int8_t)(val >> 16) % 4;
        alloc = MIN(MAX(c.resize_cq_ex.nchunks, 1u), (uint32_t)FZ_MAX_PAGES);
        if (!fz_room(2 * alloc + 2)) {
            return;
        }
        c.resize_cq_ex.pdir_dma = fg_alloc_paged(d->fg, alloc, pages);
        fz_pdir_poison(c.resize_cq_ex.pdir_dma, alloc, (uint8_t)(val >> 23));
        break;
    }
    ok = fz_cmd(d, &c, sizeof(c), &r) == 0;
    if (ok && which == 4 && i >= 0 && (mask & 5) == 5) {
        /* The harness posts to the SRQ's new ring. */
        memcpy(d->srq[i].pages, pages, sizeof(pages[0]) * alloc);
        d->srq[i].npages = alloc;
        d->srq[i].n = c.modify_srq_ex.attrs.max_wr;
    } else if (ok && which == 5) {
        /* The harness polls the CQ where the device now writes. */
        for (i = 0; i < (int)d->ncq; i++) {
            if (d->cq[i].handle == h) {
                memcpy(d->cq[i].pages, pages, sizeof(pages[0]) * alloc);
                d->cq[i].npages = alloc;
                d->cq[i].n = r.resize_cq_resp.cqe;
            }
        }
    }
}

static void fz_destroy(FzIn *in)
{
    FzDev *d = in_dev(in);
    uint8_t kind = in_u8(in) % FZ_KIND_COUNT;
    union pvrdma_cmd_req c;
    unsigned cnt[] = { d->nuc, d->npd, d->nmr, d->ncq, d->nqp, d->nsrq, 0 };
    uint32_t raw, h;
    int i = in_sel(in, cnt[kind], &raw);

    memset(&c, 0, sizeof(c));
    switch (kind) {
    case FZ_KIND_UC:
        h = i >= 0 ? d->uc[i].handle : raw;
        c.destroy_uc.hdr.cmd = PVRDMA_CMD_DESTROY_UC;
        c.destroy_uc.ctx_handle = h;
        break;
    case FZ_KIND_PD:
        h = i >= 0 ? d->pd[i].handle : raw;
        c.destroy_pd.hdr.cmd = PVRDMA_CMD_DESTROY_PD;
        c.destroy_pd.pd_handle = h;
        break;
    case FZ_KIND_MR:
        h = i >= 0 ? d->mr[i].handle : raw;
        c.destroy_mr.hdr.cmd = PVRDMA_CMD_DESTROY_MR;
        c.destroy_mr.mr_handle = h;
        break;
    case FZ_KIND_CQ:
        h = i >= 0 ? d->cq[i].handle : raw;
        c.destroy_cq.hdr.cmd = PVRDMA_CMD_DESTROY_CQ;
        c.destroy_cq.cq_handle = h;
        break;
    case FZ_KIND_QP:
        h = i >= 0 ? d->qp[i].handle : raw;
        c.destroy_qp.hdr.cmd = PVRDMA_CMD_DESTROY_QP;
        c.destroy_qp.qp_handle = h;
        break;
    case FZ_KIND_SRQ:
        h = i >= 0 ? d->srq[i].handle : raw;
        c.destroy_srq.hdr.cmd = PVRDMA_CMD_DESTROY_SRQ;
        c.destroy_srq.srq_handle = h;
        break;
    default:
        h = raw;
        c.destroy_bind.hdr.cmd = PVRDMA_CMD_DESTROY_BIND;
        c.destroy_bind.index = h;
        fg_test_gid(h, c.destroy_bind.dest_gid);
        break;
    }
    if (fz_cmd(d, &c, sizeof(c), NULL) != 0) {
        return;
    }
    switch (kind) {
    case FZ_KIND_UC:
        UNTRACK(d, uc, nuc, h);
        break;
    case FZ_KIND_PD:
        UNTRACK(d, pd, npd, h);
        break;
    case FZ_KIND_MR:
        UNTRACK(d, mr, nmr, h);
        break;
    case FZ_KIND_CQ:
        UNTRACK(d, cq, ncq, h);
        break;
    case FZ_KIND_QP:
        UNTRACK(d, qp, nqp, h);
        break;
    case FZ_KIND_SRQ:
        UNTRACK(d, srq, nsrq, h);
        break;
    default:
        break;
    }
}

static void fz_bind_gid(FzIn *in)
{
    FzDev *d = in_dev(in);
    struct pvrdma_cmd_create_bind c = { .hdr.cmd = PVRDMA_CMD_CREATE_BIND };
    uint8_t index = in_u8(in), type = in_u8(in);

    c.mtu = 1024;
    c.vlan = (type & 0x80) ? type : 0xfff;
    c.index = index;
    /* Index 0x80.. bind the GID of index 0 again (duplicate GIDs). */
    fg_test_gid(index & 0x7f, c.new_gid);
    c.gid_type = (type & 3) ? (type & 3) : PVRDMA_GID_TYPE_FLAG_ROCE_V2;
    fz_cmd(d, &c, sizeof(c), NULL);
}

/* ---- work requests ------------------------------------------------------- */

/* Byte @off of an object's page concatenation, 0 if beyond what exists. */
static uint64_t fz_page_addr(const uint64_t *pages, uint32_t npages,
                             uint64_t off)
{
    return off / FG_PAGE < npages ? pages[off / FG_PAGE] + off % FG_PAGE : 0;
}

/* mr-sel off[2] len[2] -> one SGE on device @d. */
static void in_sge(FzIn *in, FzDev *d, struct pvrdma_sge *s)
{
    uint32_t raw;
    int i = in_sel(in, d->nmr, &raw);
    uint16_t off = in_u16(in), len = in_u16(in);

    memset(s, 0, sizeof(*s));
    s->length = len;
    if (i < 0) {
        s->lkey = raw;
        s->addr = FG_MEM_BASE + off;
        return;
    }
    s->lkey = d->mr[i].lkey;
    if (off >= 0xFF00 && d->mr[i].kind == 1) {
        /* DMA MR: bus addresses running off the end of RAM. */
        s->addr = FZ_RAM_END - (0x10000 - off);
    } else if (off >= 0xFF00) {
        /* Just before / at the end of the MR (and wrapping VAs). */
        s->addr = d->mr[i].va + d->mr[i].len - (0x10000 - off);
    } else {
        s->addr = d->mr[i].va +
                  (d->mr[i].len ? off % (d->mr[i].len + 1) : off);
    }
}

static void fz_post_send(FzIn *in)
{
    FzDev *d = in_dev(in), *rd;
    FzQp *q;
    uint32_t h = in_qp(in, d, &q), raw, prod, nsge, i, rkey = 0;
    uint8_t opb = in_u8(in), flags = in_u8(in), nb = in_u8(in);
    struct pvrdma_sq_wqe_hdr w;
    struct pvrdma_sge sg[4];
    uint64_t raddr = 0, a, b, addr;
    uint32_t imm;
    int ri;
    FzMr *rmr = NULL;

    memset(&w, 0, sizeof(w));
    w.wr_id = 0x1000 + nb;
    /* 0xE0..0xEF: the extension opcode ATOMIC_WRITE; 0xF0..: raw. */
    w.opcode = opb < 0xE0 ? opb % 16 :
               opb < 0xF0 ? PVRDMA_WR_ATOMIC_WRITE : opb;
    w.send_flags = flags & 0x80 ? flags : flags & 0x7;
    w.num_sge = nb < 0xF0 ? nb % 5 : nb;
    nsge = MIN(w.num_sge, 4u);
    for (i = 0; i < nsge; i++) {
        in_sge(in, d, &sg[i]);
    }
    rd = in_dev(in);
    ri = in_sel(in, rd->nmr, &raw);
    if (ri >= 0) {
        rmr = &rd->mr[ri];
        rkey = rmr->rkey;
        raddr = rmr->va;
    } else {
        rkey = raw;
    }
    raddr += in_u16(in);
    a = in_u64(in);
    b = in_u64(in);
    imm = in_u32(in);
    switch (w.opcode) {
    case PVRDMA_WR_RDMA_WRITE:
    case PVRDMA_WR_RDMA_WRITE_WITH_IMM:
    case PVRDMA_WR_RDMA_READ:
        w.wr.rdma.remote_addr = raddr;
        w.wr.rdma.rkey = rkey;
        w.ex.imm_data = imm;
        break;
    case PVRDMA_WR_ATOMIC_CMP_AND_SWP:
    case PVRDMA_WR_ATOMIC_FETCH_AND_ADD:
    case PVRDMA_WR_ATOMIC_WRITE:
        w.wr.atomic.remote_addr = (imm & 1) ? raddr : raddr & ~7ull;
        w.wr.atomic.compare_add = a;
        w.wr.atomic.swap = b;
        w.wr.atomic.rkey = rkey;
        break;
    case PVRDMA_WR_SEND_WITH_INV:
    case PVRDMA_WR_LOCAL_INV:
        w.ex.invalidate_rkey = (imm & 0x100) ? imm : rkey;
        break;
    case PVRDMA_WR_FAST_REG_MR:
        w.wr.fast_reg.iova_start = a;
        w.wr.fast_reg.pl_pdir_dma = rmr ? rmr->pl_pdir : b;
        w.wr.fast_reg.page_shift = (imm & 0x100) ? (imm >> 24) : 12;
        w.wr.fast_reg.page_list_len = (uint32_t)(b >> 32) & 0xff;
        w.wr.fast_reg.length = (uint32_t)b & 0xfffff;
        w.wr.fast_reg.access_flags = (imm >> 16) & 0xff;
        w.wr.fast_reg.rkey = (rkey & ~0xffu) | (imm & 0xff);
        if (rmr && rmr->kind == 2 && rd == d) {
            /* Optimistic: later SGEs and rkeys use the new binding. */
            rmr->va = a;
            rmr->len = w.wr.fast_reg.length;
            rmr->lkey = rmr->rkey = w.wr.fast_reg.rkey;
        }
        break;
    case PVRDMA_WR_BIND_MW: {
        /* A window (rkey, new byte) onto the first SGE's MR and range. */
        struct pvrdma_ex_bind_mw bw = {
            .rkey = (rkey & ~0xffu) | (imm & 0xff),
            .mr_lkey = nsge ? sg[0].lkey : (uint32_t)b,
            .addr = nsge ? sg[0].addr + (a & 0xff) : a,
            .length = (imm & 0x200) ? b : (b & 0xffff),
            .access = (imm >> 16) & 0x3f,
        };

        memcpy((uint8_t *)&w + PVRDMA_EX_BIND_MW_OFF, &bw, sizeof(bw));
        if (rmr && rmr->kind == 3 && rd == d) {
            /* Optimistic: later rkeys use the new binding. */
            rmr->va = (bw.access & PVRDMA_ACCESS_ZERO_BASED) ? 0 : bw.addr;
            /* Bounded: SGE offsets are taken modulo len + 1. */
            rmr->len = MIN(bw.length, (uint64_t)UINT32_MAX);
            rmr->rkey = bw.rkey;
        }
        w.num_sge = 0;
        nsge = 0;
        break;
    }
    default:
        /*
         * SEND on any QP; on UD/GSI the address vector: a = flow/tclass
         * (high half), hop limit, gid_index; b with bit 63 clear names a
         * test GID (b % 256), else b and a are the DGID's bytes; b's bits
         * 63..62 = 01: the remote QPN is that of rdev's QP (b >> 8) % 256.
         */
        w.ex.imm_data = imm;
        w.wr.ud.remote_qpn = rkey;
        w.wr.ud.remote_qkey = imm;
        w.wr.ud.av.gid_index = a & 0xff;
        w.wr.ud.av.hop_limit = a >> 8;
        w.wr.ud.av.sl_tclass_flowlabel = a >> 32;
        if (b >> 63) {
            memcpy(w.wr.ud.av.dgid, &b, 8);
            memcpy(w.wr.ud.av.dgid + 8, &a, 8);
        } else {
            fg_test_gid(b & 0xff, w.wr.ud.av.dgid);
        }
        if ((b >> 62) == 1 && ((b >> 8) & 0xff) < rd->nqp) {
            w.wr.ud.remote_qpn = rd->qp[(b >> 8) & 0xff].qpn;
        }
        break;
    }
    /* XRC_INI: the responder's SRQ number, a's high half (any value). */
    if (q && q->type == PVRDMA_QPT_XRC_INI) {
        w.reserved = a >> 32;
    }
    if (!q || !q->npages) {
        if (in_u8(in) & 1) {
            pvrdma_core_uar_write(d->fg->core, 0, PVRDMA_DB_QP_SEND | h);
        }
        return;
    }
    prod = fz_get32(q->pages[0]);
    addr = fz_page_addr(q->pages + 1, q->npages - 1,
                        (uint64_t)(prod & (q->sq_n - 1)) * q->sq_wqe);
    if (addr && fz_in_ram(addr, q->sq_wqe)) {
        memset(fz_ptr(addr), 0, q->sq_wqe);
        memcpy(fz_ptr(addr), &w, sizeof(w));
        memcpy(fz_ptr(addr) + sizeof(w), sg,
               MIN(nsge, (q->sq_wqe - 80) / 16) * 16);
    }
    fz_put32(q->pages[0], (prod + 1) & (2 * q->sq_n - 1));
    if (in_u8(in) & 1) {
        pvrdma_core_uar_write(d->fg->core, (uint64_t)q->uar << 12,
                              PVRDMA_DB_QP_SEND | h);
    }
}

/* Write a receive WQE at @prod_addr's slot of a ring in @pages. */
static void fz_put_recv(FzIn *in, FzDev *d, const uint64_t *pages,
                        uint32_t npages, uint64_t state_addr, uint32_t n,
                        uint32_t wqe)
{
    uint8_t nb = in_u8(in);
    struct pvrdma_rq_wqe_hdr h = { .wr_id = 0x2000 + nb };
    struct pvrdma_sge sg[4];
    uint32_t prod, nsge, i;
    uint64_t addr;

    h.num_sge = nb < 0xF0 ? nb % 5 : nb;
    nsge = MIN(h.num_sge, 4u);
    for (i = 0; i < nsge; i++) {
        in_sge(in, d, &sg[i]);
    }
    prod = fz_get32(state_addr);
    addr = fz_page_addr(pages, npages, (uint64_t)(prod & (n - 1)) * wqe);
    if (addr && fz_in_ram(addr, wqe)) {
        memset(fz_ptr(addr), 0, wqe);
        memcpy(fz_ptr(addr), &h, sizeof(h));
        memcpy(fz_ptr(addr) + sizeof(h), sg, MIN(nsge, (wqe - 16) / 16) * 16);
    }
    fz_put32(state_addr, (prod + 1) & (2 * n - 1));
}

static void fz_post_recv(FzIn *in)
{
    FzDev *d = in_dev(in);
    FzQp *q;
    uint32_t h = in_qp(in, d, &q);

    if (q && q->rq_n) {
        fz_put_recv(in, d, q->pages + 1 + q->send_chunks,
                    q->npages - 1 - q->send_chunks, q->pages[0] + 8,
                    q->rq_n, q->rq_wqe);
    }
    if (in_u8(in) & 1) {
        pvrdma_core_uar_write(d->fg->core, q ? (uint64_t)q->uar << 12 : 0,
                              PVRDMA_DB_QP_RECV | h);
    }
}

static void fz_post_srq_recv(FzIn *in)
{
    FzDev *d = in_dev(in);
    uint32_t raw, h;
    int i = in_sel(in, d->nsrq, &raw);
    FzSrq *s = i >= 0 ? &d->srq[i] : NULL;

    h = s ? s->handle : raw;
    if (s) {
        fz_put_recv(in, d, s->pages + 1, s->npages - 1, s->pages[0] + 8,
                    s->n, s->wqe);
    }
    if (in_u8(in) & 1) {
        pvrdma_core_uar_write(d->fg->core,
                              (s ? (uint64_t)s->uar << 12 : 0) +
                              PVRDMA_UAR_SRQ_OFFSET, PVRDMA_DB_SRQ_RECV | h);
    }
}

static void fz_doorbell(FzIn *in)
{
    FzDev *d = in_dev(in);
    uint8_t pb = in_u8(in), ob = in_u8(in), fb = in_u8(in);
    uint64_t page, off;
    uint32_t flags = (uint32_t)(fb & 0xE0) << 24, raw, h;
    int i;

    if (fb & 1) {
        flags = (uint32_t)fb << 24;
    }
    page = (pb & 0x80) && d->nuc ? d->uc[pb % d->nuc].uar : pb & 0x7f;
    switch (ob % 4) {
    case 0:
        off = PVRDMA_UAR_QP_OFFSET;
        i = in_sel(in, d->nqp, &raw);
        h = i >= 0 ? d->qp[i].handle : raw;
        break;
    case 1:
        off = PVRDMA_UAR_CQ_OFFSET;
        h = in_cq(in, d);
        break;
    case 2:
        off = PVRDMA_UAR_SRQ_OFFSET;
        i = in_sel(in, d->nsrq, &raw);
        h = i >= 0 ? d->srq[i].handle : raw;
        break;
    default:
        /* 0x80..: aligned undefined offsets, else misaligned ones */
        off = (ob & 0x80) ? (ob & 0x7c) + 12 : ob;
        h = in_u32(in);
        flags = 0;
        break;
    }
    pvrdma_core_uar_write(d->fg->core, (page << 12) + off,
                          flags | (h & PVRDMA_DB_HANDLE_MASK));
}

/* ---- raw memory and rings ------------------------------------------------ */

static void fz_mem_write(FzIn *in)
{
    uint8_t where = in_u8(in) % 5;
    uint64_t base = 0, off;
    uint8_t buf[64];
    unsigned len;
    FzDev *d;

    switch (where) {
    case 0:
        d = in_dev(in);
        base = d->fg->dsr;
        break;
    case 1:
        d = in_dev(in);
        base = d->fg->core->cmd_slot;
        break;
    case 2: {
        uint8_t kind, s, pg;

        d = in_dev(in);
        kind = in_u8(in) % 5;
        s = in_u8(in);
        pg = in_u8(in);
        if (kind == 0 && d->nmr) {
            FzMr *m = &d->mr[s % d->nmr];

            base = m->npages ? m->pages[pg % m->npages] : m->va;
        } else if (kind == 1 && d->ncq) {
            FzCq *c = &d->cq[s % d->ncq];

            base = c->pages[pg % c->npages];
        } else if (kind == 2 && d->nqp) {
            FzQp *q = &d->qp[s % d->nqp];

            /* (an XRC_TGT QP has no pages) */
            base = q->npages ? q->pages[pg % q->npages] : 0;
        } else if (kind == 3 && d->nsrq) {
            FzSrq *q = &d->srq[s % d->nsrq];

            base = q->pages[pg % q->npages];
        }
        break;
    }
    case 3:
        base = FG_MEM_BASE + in_u32(in) % (fz_next_free() - FG_MEM_BASE + 1);
        break;
    default: {
        PvrdmaCore *core;
        uint8_t ring, pg;

        d = in_dev(in);
        core = d->fg->core;
        ring = in_u8(in);
        pg = in_u8(in);
        if ((ring & 1) && core->cqn_pages) {
            base = core->cqn_pages[pg % core->cqn_npages];
        } else if (core->async_pages) {
            base = core->async_pages[pg % core->async_npages];
        }
        break;
    }
    }
    off = in_u16(in) & 0x1fff;
    len = in_u8(in) % 65;
    memset(buf, 0, sizeof(buf));
    if (len) {
        unsigned i;

        for (i = 0; i < len; i++) {
            buf[i] = in_u8(in);
        }
        if (fz_in_ram(base + off, len)) {
            memcpy(fz_ptr(base + off), buf, len);
        }
    }
}

static void fz_ring_index(FzIn *in)
{
    FzDev *d = in_dev(in);
    PvrdmaCore *core = d->fg->core;
    uint8_t ring = in_u8(in) % 8, mode;
    uint32_t raw, n = 0, val;
    uint64_t addr = 0;
    int i;

    switch (ring) {
    case 0:
    case 1:
    case 2:
        i = in_sel(in, d->nqp, &raw);
        if (i >= 0) {
            FzQp *q = &d->qp[i];

            addr = !q->npages ? 0 :
                   q->pages[0] + (ring == 0 ? 0 : ring == 1 ? 8 : 4);
            n = ring == 1 ? q->rq_n : q->sq_n;
        }
        break;
    case 3:
    case 4:
        i = in_sel(in, d->ncq, &raw);
        if (i >= 0) {
            addr = d->cq[i].pages[0] + (ring == 3 ? 12 : 8);
            n = d->cq[i].n;
        }
        break;
    case 5:
        i = in_sel(in, d->nsrq, &raw);
        if (i >= 0) {
            addr = d->srq[i].pages[0] + 8;
            n = d->srq[i].n;
        }
        break;
    case 6:
        if (core->async_pages) {
            addr = pvrdma_ring_cons_addr(&core->async_ring);
            n = core->async_ring.n;
        }
        break;
    default:
        if (core->cqn_pages) {
            addr = pvrdma_ring_cons_addr(&core->cqn_ring);
            n = core->cqn_ring.n;
        }
        break;
    }
    mode = in_u8(in);
    val = in_u32(in);
    if (!addr) {
        return;
    }
    if ((mode & 1) && n) {
        val = (fz_get32(addr) + val) & (2 * n - 1);
    }
    fz_put32(addr, val);
}

/* ---- DSR, reset, glue ---------------------------------------------------- */

static void fz_load_dsr(FzIn *in)
{
    FzDev *d = in_dev(in);
    uint8_t ver = in_u8(in), anp = in_u8(in), cnp = in_u8(in);
    uint8_t flags = in_u8(in);
    uint32_t version;

    version = ver < 0xF0 ? 17 + ver % 4 : ver;
    /* small; around the 129-page limit; raw */
    anp = anp < 0xC0 ? 2 + anp % 8 : anp < 0xE0 ? 120 + (anp & 0x1f) : anp;
    cnp = cnp < 0xC0 ? 2 + cnp % 8 : cnp < 0xE0 ? 120 + (cnp & 0x1f) : cnp;
    if (!fz_room(2 * ((uint64_t)anp + cnp) + 16)) {
        return;
    }
    fz_untrack_all(d);
    fg_load_dsr_ex(d->fg, version, anp, cnp);
    if (flags & 2) {
        uint8_t off = in_u8(in);
        uint32_t v = in_u32(in);
        uint64_t a = d->fg->dsr + MIN((uint32_t)off,
                     (uint32_t)sizeof(struct pvrdma_device_shared_region) - 4);

        /* Corrupt one field and load the same DSR again. */
        fz_put32(a, v);
        fg_reg_write(d->fg, PVRDMA_REG_DSRHIGH, (uint32_t)(d->fg->dsr >> 32));
    }
    if (flags & 1) {
        fg_reg_write(d->fg, PVRDMA_REG_IMR, 0);
        fg_reg_write(d->fg, PVRDMA_REG_CTL, PVRDMA_DEVICE_CTL_ACTIVATE);
    }
}

static void fz_cmd_raw(FzIn *in)
{
    FzDev *d = in_dev(in);
    PvrdmaCore *core = d->fg->core;
    uint8_t cmd = in_u8(in);
    uint8_t buf[PVRDMA_CMD_SLOT_SIZE];
    unsigned i;

    for (i = 0; i < sizeof(buf); i++) {
        buf[i] = in_u8(in);
    }
    memset(buf, 0, 8);
    ((struct pvrdma_cmd_hdr *)buf)->cmd = cmd < 0xF0 ? cmd % PVRDMA_CMD_MAX :
                                          (uint32_t)cmd << 24;
    if (fz_in_ram(core->cmd_slot, sizeof(buf))) {
        memcpy(fz_ptr(core->cmd_slot), buf, sizeof(buf));
    }
    pvrdma_core_reg_write(core, PVRDMA_REG_REQUEST, 0);
}

static void fz_core_new(FzDev *d)
{
    d->fg->core = pvrdma_core_new(&d->fg->cfg, d->ops, d->fg);
    fg_join_fabric(d->fg);
    pvrdma_core_set_uar_base(d->fg->core, fz.uar_base);
}

static void fz_core_free(FzDev *d)
{
    pvrdma_core_free(d->fg->core);
    d->fg->core = NULL;
    /* No mapping outlives the entry point that made it. */
    FZ_CHECK(d->fg->maps == d->fg->unmaps);
}

static void fz_reset(FzIn *in)
{
    FzDev *d = in_dev(in);
    uint8_t how = in_u8(in) % 3;

    fz_untrack_all(d);
    if (how == 0) {
        pvrdma_core_reset(d->fg->core);
    } else if (how == 1) {
        fg_reg_write(d->fg, PVRDMA_REG_CTL, PVRDMA_DEVICE_CTL_RESET);
    } else {
        fz_core_free(d);
        fz_core_new(d);
    }
}

static void fz_glue(FzIn *in)
{
    FzDev *d = in_dev(in);
    uint8_t what = in_u8(in) % 6;
    uint32_t v = in_u32(in);
    uint64_t used = fz_next_free() - FG_MEM_BASE + FG_PAGE;

    switch (what) {
    case 0:
        d->fg->map_max = v % 9000;
        /* and RAM windows (dma_window), up to 7 pages or all of RAM */
        d->fg->windows = v >> 31;
        d->fg->win_size = ((v >> 16) & 7) * FG_PAGE;
        break;
    case 1:
        d->fg->map_refuse = v & 1;
        break;
    case 2:
        d->fg->mmio_base = FG_MEM_BASE + ((v % used) & ~(FG_PAGE - 1));
        d->fg->mmio_len = (v >> 28) * FG_PAGE;
        break;
    case 3:
        /* DMA writes to this page fail: the response slot, the DSR, or
         * any page (create rollback, caps write, ring index writes). */
        d->fg->ro_page = (v & 0x80000000u) ? d->fg->core->resp_slot :
                         (v & 0x40000000u) ? d->fg->dsr :
                         v ? FG_MEM_BASE + ((v % used) & ~(FG_PAGE - 1)) :
                         0;
        break;
    case 4:
        pvrdma_core_set_uar_base(d->fg->core,
                                 (v & 1) ? PVRDMA_CORE_UAR_UNMAPPED :
                                 (v & 2) ? (uint64_t)v << 12 : FG_UAR_BASE);
        break;
    default:
        pvrdma_core_timer_expired(d->fg->core);
        break;
    }
}

static void fz_consume_ring(PvrdmaRing *r)
{
    if (r->pages) {
        fz_put32(pvrdma_ring_cons_addr(r),
                 fz_get32(pvrdma_ring_prod_addr(r)));
    }
}

static void fz_consume(FzIn *in)
{
    FzDev *d = in_dev(in);
    uint8_t what = in_u8(in);
    unsigned i;

    if (what & 1) {
        for (i = 0; i < d->ncq; i++) {
            fz_put32(d->cq[i].pages[0] + 12, fz_get32(d->cq[i].pages[0] + 8));
        }
    }
    if (what & 2) {
        fz_consume_ring(&d->fg->core->async_ring);
    }
    if (what & 4) {
        fz_consume_ring(&d->fg->core->cqn_ring);
    }
    if (what & 8) {
        fg_reg_read(d->fg, PVRDMA_REG_ICR);
    }
}

/* ---- invariants ---------------------------------------------------------- */

static void fz_check_table(const PvrdmaTable *t)
{
    FZ_CHECK(t->count <= t->max_count);
    FZ_CHECK(t->count <= t->alloc);
    FZ_CHECK(t->alloc <= t->limit);
}

/*
 * Object graph of one core: every reference points at a live object of
 * the right table, and every refcount equals the references that exist
 * (a wrong count is a later use-after-free or a leak).
 */
static void fz_check_objects(PvrdmaCore *core)
{
    g_autofree uint32_t *pd_refs = g_new0(uint32_t, core->pd_tbl.alloc + 1);
    g_autofree uint32_t *cq_refs = g_new0(uint32_t, core->cq_tbl.alloc + 1);
    g_autofree uint32_t *srq_refs = g_new0(uint32_t,
                                           core->srq_tbl.alloc + 1);
    g_autofree uint32_t *uc_refs = g_new0(uint32_t, core->uc_tbl.alloc + 1);
    g_autofree uint32_t *xrcd_refs = g_new0(uint32_t,
                                            core->xrcd_tbl.alloc + 1);
    uint32_t h;

    for (h = 0; h < core->mr_tbl.alloc; h++) {
        PvrdmaMr *mr = core->mr_tbl.slots[h];

        if (mr) {
            FZ_CHECK(mr->handle == h);
            FZ_CHECK(pvrdma_pd_of(core, mr->pd_handle));
            pd_refs[mr->pd_handle]++;
        }
    }
    for (h = 0; h < core->srq_tbl.alloc; h++) {
        PvrdmaSrq *srq = core->srq_tbl.slots[h];

        if (srq) {
            FZ_CHECK(srq->handle == h);
            FZ_CHECK(pvrdma_pd_of(core, srq->pd_handle));
            pd_refs[srq->pd_handle]++;
            if (srq->xrc) {
                /* An XRC SRQ counts in its domain and its CQ. */
                FZ_CHECK(pvrdma_table_lookup(&core->xrcd_tbl,
                                             srq->xrcd_handle));
                FZ_CHECK(pvrdma_table_lookup(&core->cq_tbl, srq->cq_handle));
                xrcd_refs[srq->xrcd_handle]++;
                cq_refs[srq->cq_handle]++;
            }
        }
    }
    for (h = 0; h < core->qp_tbl.alloc; h++) {
        PvrdmaQp *qp = core->qp_tbl.slots[h];

        if (qp && qp->type == PVRDMA_QPT_XRC_TGT) {
            /* Only its domain counts; bound, to an XRC SRQ of it. */
            PvrdmaSrq *srq = pvrdma_qp_srq(core, qp);

            FZ_CHECK(qp->handle == h);
            FZ_CHECK(pvrdma_table_lookup(&core->xrcd_tbl, qp->xrcd_handle));
            xrcd_refs[qp->xrcd_handle]++;
            FZ_CHECK(!qp->has_srq ||
                     (srq && srq->xrc && srq->xrcd_handle == qp->xrcd_handle &&
                      qp->pd_handle == srq->pd_handle &&
                      qp->recv_cq_handle == srq->cq_handle));
            FZ_CHECK(qp->state <= PVRDMA_QPS_ERR && !qp->wq.nout);
        } else if (qp) {
            FZ_CHECK(qp->handle == h);
            FZ_CHECK(pvrdma_pd_of(core, qp->pd_handle));
            FZ_CHECK(pvrdma_qp_send_cq(core, qp));
            FZ_CHECK(pvrdma_qp_recv_cq(core, qp));
            pd_refs[qp->pd_handle]++;
            cq_refs[qp->send_cq_handle]++;
            cq_refs[qp->recv_cq_handle]++;
            if (qp->has_srq) {
                FZ_CHECK(pvrdma_qp_srq(core, qp));
                srq_refs[qp->srq_handle]++;
            }
            FZ_CHECK(qp->state <= PVRDMA_QPS_ERR);
        }
    }
    for (h = 0; h < core->pd_tbl.alloc; h++) {
        PvrdmaPd *pd = core->pd_tbl.slots[h];

        if (pd) {
            FZ_CHECK(pd->handle == h);
            FZ_CHECK(pd->refs == pd_refs[h]);
            if (pd->ctx_handle) {
                FZ_CHECK(pvrdma_uc_of(core, pd->ctx_handle));
                uc_refs[pd->ctx_handle]++;
            }
        }
    }
    for (h = 0; h < core->cq_tbl.alloc; h++) {
        PvrdmaCq *cq = core->cq_tbl.slots[h];

        if (cq) {
            FZ_CHECK(cq->handle == h);
            FZ_CHECK(cq->ring.n && cq->ring.prod < 2 * cq->ring.n);
            FZ_CHECK(cq->refs == cq_refs[h]);
            if (cq->ctx_handle) {
                FZ_CHECK(pvrdma_uc_of(core, cq->ctx_handle));
                uc_refs[cq->ctx_handle]++;
            }
        }
    }
    for (h = 0; h < core->srq_tbl.alloc; h++) {
        PvrdmaSrq *srq = core->srq_tbl.slots[h];

        if (srq) {
            FZ_CHECK(srq->refs == srq_refs[h]);
        }
    }
    for (h = 0; h < core->xrcd_tbl.alloc; h++) {
        PvrdmaXrcd *x = core->xrcd_tbl.slots[h];

        if (x) {
            FZ_CHECK(x->handle == h && x->refs == xrcd_refs[h]);
        }
    }
    /* Pinned-page quota: exactly what the live objects describe. */
    {
        uint64_t pinned = core->async_npages + core->cqn_npages;

        FZ_CHECK(!core->async_pages == !core->async_npages);
        FZ_CHECK(!core->cqn_pages == !core->cqn_npages);
        for (h = 0; h < core->mr_tbl.alloc; h++) {
            PvrdmaMr *mr = core->mr_tbl.slots[h];

            pinned += mr ? mr->quota_pages : 0;
            if (mr && pvrdma_mr_is_mw(mr)) {
                /* Windows: no pages; a binding names a live MR. */
                FZ_CHECK(mr->quota_pages == 0 && mr->mw_binds == 0);
                FZ_CHECK(mr->mw_bound || mr->access == 0);
                if (mr->mw_bound) {
                    PvrdmaMr *to = pvrdma_table_lookup(&core->mr_tbl,
                                                       mr->mw_mr_handle);

                    FZ_CHECK(to && !pvrdma_mr_is_mw(to) && to->mw_binds);
                    FZ_CHECK(mr->flags == PVRDMA_MR_FLAG_MW_TYPE1 ||
                             pvrdma_table_lookup(&core->qp_tbl,
                                                 mr->mw_qp_handle));
                }
            }
            if (mr && mr->flags == PVRDMA_MR_FLAG_FRMR) {
                FZ_CHECK(mr->frmr_pages);
                FZ_CHECK(!mr->frmr_valid ||
                         (mr->frmr_npages <= mr->max_sg &&
                          (mr->frmr_iova & (PVRDMA_PAGE_SIZE - 1)) +
                          mr->frmr_length <=
                          (uint64_t)mr->frmr_npages << PVRDMA_PAGE_SHIFT));
            }
        }
        for (h = 0; h < core->cq_tbl.alloc; h++) {
            PvrdmaCq *cq = core->cq_tbl.slots[h];

            pinned += cq ? cq->npages : 0;
        }
        for (h = 0; h < core->qp_tbl.alloc; h++) {
            PvrdmaQp *qp = core->qp_tbl.slots[h];

            pinned += qp ? qp->npages : 0;
        }
        for (h = 0; h < core->srq_tbl.alloc; h++) {
            PvrdmaSrq *srq = core->srq_tbl.slots[h];

            pinned += srq ? srq->npages : 0;
            if (srq) {
                /* SRQ limit: armed exactly while a limit is set. */
                FZ_CHECK(srq->limit_armed == (srq->srq_limit > 0));
            }
        }
        FZ_CHECK(pinned == core->pinned_pages);
    }
    /* Window bindings: counted in the MR and (type 2) the QP. */
    {
        uint32_t *mr_binds = g_new0(uint32_t, core->mr_tbl.alloc);
        uint32_t *qp_binds = g_new0(uint32_t, core->qp_tbl.alloc);

        for (h = 0; h < core->mr_tbl.alloc; h++) {
            PvrdmaMr *mw = core->mr_tbl.slots[h];

            if (mw && pvrdma_mr_is_mw(mw) && mw->mw_bound) {
                FZ_CHECK(mw->mw_mr_handle < core->mr_tbl.alloc);
                mr_binds[mw->mw_mr_handle]++;
                if (mw->flags == PVRDMA_MR_FLAG_MW_TYPE2) {
                    FZ_CHECK(mw->mw_qp_handle < core->qp_tbl.alloc);
                    qp_binds[mw->mw_qp_handle]++;
                }
            }
        }
        for (h = 0; h < core->mr_tbl.alloc; h++) {
            PvrdmaMr *mr = core->mr_tbl.slots[h];

            FZ_CHECK(mr ? mr->mw_binds == mr_binds[h] : !mr_binds[h]);
        }
        for (h = 0; h < core->qp_tbl.alloc; h++) {
            PvrdmaQp *qp = core->qp_tbl.slots[h];

            FZ_CHECK(qp ? qp->mw_binds == qp_binds[h] : !qp_binds[h]);
        }
        g_free(mr_binds);
        g_free(qp_binds);
    }
    for (h = 0; h < core->uc_tbl.alloc; h++) {
        PvrdmaUc *uc = core->uc_tbl.slots[h];

        if (uc) {
            FZ_CHECK(uc->handle == h);
            FZ_CHECK(uc->refs == uc_refs[h]);
            FZ_CHECK(uc->uar_index < core->cfg.uar_pages &&
                     core->uar_owner[uc->uar_index] == h);
        }
    }
}

/*
 * Data-path state between entry points (pvrdma_wq.c): no QP is
 * mid-processing, outstanding at the backend (the in-process fabric
 * answers at once) or left on the deferred work list, device-owned ring
 * indexes are valid, and an RNR-stalled QP always has the glue timer
 * armed no later than its deadline (else its SQ would stall forever).
 */
static void fz_check_wq(FakeGuest *fg)
{
    PvrdmaCore *core = fg->core;
    int64_t first = -1;
    uint32_t h;
    GList *l;

    FZ_CHECK(core->depth == 0);
    FZ_CHECK(g_queue_is_empty(&core->work_qps));
    for (h = 0; h < core->qp_tbl.alloc; h++) {
        PvrdmaQp *qp = core->qp_tbl.slots[h];
        PvrdmaQpWq *w;

        if (!qp) {
            continue;
        }
        w = &qp->wq;
        FZ_CHECK(!w->busy);
        /* The fuzzer's backends complete before submit returns. */
        FZ_CHECK(!w->nout);
        FZ_CHECK(w->sq_next == w->sq_cons);
        FZ_CHECK(qp->max_outstanding >= 1 &&
                 qp->max_outstanding <= PVRDMA_MAX_OUTSTANDING);
        FZ_CHECK(!w->work_link.data);
        FZ_CHECK(!qp->sq.n || w->sq_cons < 2 * qp->sq.n);
        FZ_CHECK(!qp->rq.n || w->rq_cons < 2 * qp->rq.n);
        if (w->rnr_pending && pvrdma_core_has_timer(core)) {
            FZ_CHECK(w->rnr_link.data == qp);
        }
        /* ERR and RESET end any stall; RESET forgets ring positions. */
        FZ_CHECK(qp->state != PVRDMA_QPS_ERR || !w->rnr_pending);
        FZ_CHECK(qp->state != PVRDMA_QPS_RESET ||
                 (!w->rnr_pending && !w->sq_cons && !w->rq_cons));
        /* SQD with nothing in progress has posted its SQ_DRAINED. */
        FZ_CHECK(qp->state != PVRDMA_QPS_SQD || !w->sqd_notify ||
                 w->rnr_pending);
    }
    for (l = core->rnr_qps.head; l; l = l->next) {
        PvrdmaQp *qp = l->data;

        FZ_CHECK(pvrdma_table_lookup(&core->qp_tbl, qp->handle) == qp);
        FZ_CHECK(qp->wq.rnr_pending);
        if (first < 0 || qp->wq.rnr_deadline < first) {
            first = qp->wq.rnr_deadline;
        }
    }
    if (first >= 0) {
        FZ_CHECK(fg->timer_expire >= 0 && fg->timer_expire <= first);
    }
}

static void fz_check(long long heap_base)
{
    unsigned i;

    for (i = 0; i < fz.ndev; i++) {
        FakeGuest *fg = fz.dev[i].fg;
        PvrdmaCore *core = fg->core;

        FZ_CHECK(fg->maps == fg->unmaps);
        fz_check_table(&core->uc_tbl);
        fz_check_table(&core->pd_tbl);
        fz_check_table(&core->mr_tbl);
        fz_check_table(&core->cq_tbl);
        fz_check_table(&core->qp_tbl);
        fz_check_table(&core->srq_tbl);
        FZ_CHECK(core->pinned_pages <= core->cfg.max_pinned_pages);
        FZ_CHECK((core->icr & ~7u) == 0);
        FZ_CHECK(!core->dsr_loaded || core->dma_enabled);
        FZ_CHECK(core->dsr_loaded || (core->uc_tbl.count == 0 &&
                 core->pd_tbl.count == 0 && core->qp_tbl.count == 0));
        fz_check_objects(core);
        fz_check_wq(fg);
        FZ_CHECK(!core->async_ring.n ||
                 core->async_ring.prod < 2 * core->async_ring.n);
        FZ_CHECK(!core->cqn_ring.n ||
                 core->cqn_ring.prod < 2 * core->cqn_ring.n);
    }
    FZ_CHECK(fz_heap_live - heap_base < FZ_HEAP_CAP);
}

/*
 * CVE-2022-1050 class: a core without a DSR (before the action and after
 * it) does no DMA at all, whatever the guest writes, unless the action
 * tried to load a DSR (reading the DSR is the point of that write).
 */
static struct {
    bool had_dsr[FZ_NDEV];
    unsigned ops[FZ_NDEV];
    PvrdmaCore *core[FZ_NDEV];
} fz_dma_before;

static unsigned fz_dma_ops(FakeGuest *fg)
{
    return fg->dma_reads + fg->dma_writes + fg->maps + fg->map_fails;
}

/*
 * RNR (IBA 9.7.5.2.8): a head stalled on an RNR NAK is retried when its
 * RNR timer expires or when the responder posts a receive, never because
 * the requester rang its own SEND doorbell or was modified: each retry
 * uses up one of the rnr_retry attempts.
 */
#define FZ_RNR_SNAP 64
static struct {
    unsigned n;
    struct {
        PvrdmaCore *core;
        PvrdmaQp *qp;
        uint8_t left;
    } e[FZ_RNR_SNAP];
} fz_rnr_before;

static void fz_rnr_snapshot(void)
{
    unsigned i;

    fz_rnr_before.n = 0;
    for (i = 0; i < fz.ndev; i++) {
        PvrdmaCore *core = fz.dev[i].fg->core;
        GList *l;

        for (l = core->rnr_qps.head; l && fz_rnr_before.n < FZ_RNR_SNAP;
             l = l->next) {
            PvrdmaQp *qp = l->data;

            if (qp->attr.rnr_retry != PVRDMA_RNR_INFINITE &&
                pvrdma_core_now_ns(core) < qp->wq.rnr_deadline) {
                fz_rnr_before.e[fz_rnr_before.n].core = core;
                fz_rnr_before.e[fz_rnr_before.n].qp = qp;
                fz_rnr_before.e[fz_rnr_before.n].left = qp->wq.rnr_left;
                fz_rnr_before.n++;
            }
        }
    }
}

static void fz_check_rnr(uint8_t op)
{
    unsigned i;

    if (op != FZ_OP_POST_SEND && op != FZ_OP_MODIFY_QP &&
        op != FZ_OP_CONNECT) {
        return;
    }
    for (i = 0; i < fz_rnr_before.n; i++) {
        PvrdmaCore *core = fz_rnr_before.e[i].core;
        PvrdmaQp *qp = fz_rnr_before.e[i].qp;
        unsigned d;
        bool live = false;

        for (d = 0; d < fz.ndev; d++) {
            live |= fz.dev[d].fg->core == core;
        }
        if (!live || pvrdma_table_lookup(&core->qp_tbl, qp->handle) != qp ||
            qp->state == PVRDMA_QPS_ERR || qp->state == PVRDMA_QPS_RESET) {
            continue;
        }
        FZ_CHECK(!qp->wq.rnr_pending ||
                 qp->wq.rnr_left >= fz_rnr_before.e[i].left);
    }
}

static void fz_dma_snapshot(void)
{
    unsigned i;

    for (i = 0; i < fz.ndev; i++) {
        fz_dma_before.had_dsr[i] = fz.dev[i].fg->core->dsr_loaded;
        fz_dma_before.ops[i] = fz_dma_ops(fz.dev[i].fg);
        fz_dma_before.core[i] = fz.dev[i].fg->core;
    }
}

static void fz_check_dma_without_dsr(uint8_t op)
{
    unsigned i;

    if (op == FZ_OP_LOAD_DSR || op == FZ_OP_REG_WRITE) {
        return;     /* a DSRHIGH write reads the DSR */
    }
    for (i = 0; i < fz.ndev; i++) {
        FakeGuest *fg = fz.dev[i].fg;

        if (!fz_dma_before.had_dsr[i] && !fg->core->dsr_loaded &&
            fz_dma_before.core[i] == fg->core) {
            FZ_CHECK(fz_dma_ops(fg) == fz_dma_before.ops[i]);
        }
    }
}

/* ---- setup --------------------------------------------------------------- */

static void fz_init(void)
{
    char *err = NULL;

    __sanitizer_install_malloc_and_free_hooks(fz_malloc_hook, fz_free_hook);
    fz.mem = mmap(NULL, FG_MEM_SIZE, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    FZ_CHECK(fz.mem != MAP_FAILED);

    pvrdma_core_default_config(&fz.cfg_default);
    fz.cfg_tiny = fz.cfg_default;
    fz.cfg_tiny.max_qp = 4;
    fz.cfg_tiny.max_qp_wr = 64;
    fz.cfg_tiny.max_sge = 2;
    fz.cfg_tiny.max_cq = 3;
    fz.cfg_tiny.max_cqe = 128;
    fz.cfg_tiny.max_mr = 4;
    fz.cfg_tiny.max_pd = 3;
    fz.cfg_tiny.max_srq = 2;
    fz.cfg_tiny.max_srq_wr = 64;
    fz.cfg_tiny.max_srq_sge = 2;
    fz.cfg_tiny.max_ah = 2;
    fz.cfg_tiny.max_uc = 2;
    fz.cfg_tiny.uar_pages = 4;
    fz.cfg_tiny.gid_tbl_len = 2;
    fz.cfg_tiny.max_mr_size = 1 << 16;
    /* The minimum: two full DSR rings leave 16 pages for objects. */
    fz.cfg_tiny.max_pinned_pages = 2 * PVRDMA_DSR_RING_MAX_PAGES + 16;
    FZ_CHECK(pvrdma_core_check_config(&fz.cfg_tiny, &err));

    /*
     * Two fake guests, created once: their ops tables (full, and without
     * the optional data path ops) are reused for every core; their own
     * RAM is replaced by the shared mapping, zeroed between inputs.
     */
    fz.fg_full = fg_new(NULL);
    fz.fg_min = fg_new_minimal(NULL);
    fz.ops_full = fz.fg_full->core->ops;
    fz.ops_min = fz.fg_min->core->ops;
    pvrdma_core_free(fz.fg_full->core);
    pvrdma_core_free(fz.fg_min->core);
    munmap(fz.fg_full->mem, FG_MEM_SIZE);
    munmap(fz.fg_min->mem, FG_MEM_SIZE);
    g_free(fz.fg_full->dirty);
    g_free(fz.fg_min->dirty);
    fz.dirty = g_new0(uint8_t, FG_MEM_SIZE / FG_PAGE);
    fz.dev[0].fg = fz.fg_full;
    fz.dev[1].fg = fz.fg_min;
    fz.inited = true;
}

static void fz_begin(uint8_t cfg)
{
    unsigned i;

    madvise(fz.mem, FG_MEM_SIZE, MADV_DONTNEED);
    fz.ndev = (cfg & FZ_CFG_TWO_DEVICES) ? 2 : 1;
    fz.uar_base = (cfg & FZ_CFG_NO_UAR_BASE) ? PVRDMA_CORE_UAR_UNMAPPED :
                  FG_UAR_BASE;
    for (i = 0; i < FZ_NDEV; i++) {
        FzDev *d = &fz.dev[i];
        FakeGuest *fg = d->fg;
        bool tiny = cfg & (i ? FZ_CFG_TINY1 : FZ_CFG_TINY0);

        memset(fg, 0, sizeof(*fg));
        fg->mem = fz.mem;
        fg->dirty = fz.dirty;
        fg->next_free = FG_MEM_BASE;
        fg->timer_expire = -1;
        fg->cfg = tiny ? fz.cfg_tiny : fz.cfg_default;
        d->ops = (i == 1 && (cfg & FZ_CFG_MINIMAL1)) ? fz.ops_min :
                 fz.ops_full;
        fz_untrack_all(d);
    }
    for (i = 0; i < fz.ndev; i++) {
        fz_core_new(&fz.dev[i]);
    }
}

/* FZ_DEBUG=1: print the CQEs of every tracked CQ (checking seeds). */
static void fz_debug_dump(void)
{
    unsigned i, j, k;

    for (i = 0; i < fz.ndev; i++) {
        FzDev *d = &fz.dev[i];

        for (j = 0; j < d->ncq; j++) {
            FzCq *c = &d->cq[j];
            uint32_t prod = fz_get32(c->pages[0] + 8);

            fprintf(stderr, "dev %u cq %u: prod %u\n", i, c->handle, prod);
            for (k = 0; k < MIN(prod, c->n) && k < 64; k++) {
                struct pvrdma_cqe e;

                memcpy(&e, fz_ptr(c->pages[1 + k / 64] + (k % 64) * 64),
                       sizeof(e));
                fprintf(stderr, "  wr_id 0x%llx qp %llu op %u status %u "
                        "len %u\n", (unsigned long long)e.wr_id,
                        (unsigned long long)e.qp, e.opcode, e.status,
                        e.byte_len);
            }
        }
    }
}

static void fz_end(void)
{
    unsigned i;

    if (getenv("FZ_DEBUG")) {
        fz_debug_dump();
    }

    for (i = 0; i < fz.ndev; i++) {
        fz_core_free(&fz.dev[i]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FzIn in = { data, size };
    long long heap_base;
    unsigned steps = 0;

    if (!fz.inited) {
        fz_init();
        fz_trace = getenv("FZ_TRACE") != NULL;
    }
    fz_begin(in_u8(&in));
    heap_base = fz_heap_live;
    while (in.n && steps++ < FZ_MAX_ACTIONS) {
        uint8_t op = in_u8(&in) % FZ_OP_COUNT;
        FzDev *d;

        fz_dma_snapshot();
        fz_rnr_snapshot();
        if (fz_trace) {
            fprintf(stderr, "action %u: op %u at byte %zu\n", steps, op,
                    size - in.n - 1);
        }

        switch (op) {
        case FZ_OP_REG_WRITE: {
            uint16_t off;

            d = in_dev(&in);
            off = in_u16(&in);
            pvrdma_core_reg_write(d->fg->core, off < 0x8000 ? off & 0xff :
                                  off, in_u32(&in));
            break;
        }
        case FZ_OP_REG_READ: {
            uint16_t off;

            d = in_dev(&in);
            off = in_u16(&in);
            pvrdma_core_reg_read(d->fg->core, off < 0x8000 ? off & 0xff :
                                 off);
            break;
        }
        case FZ_OP_MEM_WRITE:
            fz_mem_write(&in);
            break;
        case FZ_OP_RING_INDEX:
            fz_ring_index(&in);
            break;
        case FZ_OP_LOAD_DSR:
            fz_load_dsr(&in);
            break;
        case FZ_OP_CMD_RAW:
            fz_cmd_raw(&in);
            break;
        case FZ_OP_CREATE_UC:
            fz_create_uc(&in, in_dev(&in));
            break;
        case FZ_OP_CREATE_PD:
            fz_create_pd(&in, in_dev(&in));
            break;
        case FZ_OP_CREATE_CQ:
            fz_create_cq(&in, in_dev(&in));
            break;
        case FZ_OP_CREATE_MR:
            fz_create_mr(&in, in_dev(&in));
            break;
        case FZ_OP_CREATE_QP:
            fz_create_qp(&in, in_dev(&in));
            break;
        case FZ_OP_CREATE_SRQ:
            fz_create_srq(&in, in_dev(&in));
            break;
        case FZ_OP_CONNECT:
            fz_connect(&in);
            break;
        case FZ_OP_MODIFY_QP:
            fz_modify_qp(&in);
            break;
        case FZ_OP_QUERY:
            fz_query(&in);
            break;
        case FZ_OP_DESTROY:
            fz_destroy(&in);
            break;
        case FZ_OP_BIND_GID:
            fz_bind_gid(&in);
            break;
        case FZ_OP_POST_SEND:
            fz_post_send(&in);
            break;
        case FZ_OP_POST_RECV:
            fz_post_recv(&in);
            break;
        case FZ_OP_POST_SRQ_RECV:
            fz_post_srq_recv(&in);
            break;
        case FZ_OP_DOORBELL:
            fz_doorbell(&in);
            break;
        case FZ_OP_TIMER: {
            uint8_t scale;

            d = in_dev(&in);
            scale = in_u8(&in);
            fg_advance(d->fg, 1ll << (scale % 40));
            break;
        }
        case FZ_OP_RESET:
            fz_reset(&in);
            break;
        case FZ_OP_ASYNC_EVENT: {
            uint32_t type, info;

            d = in_dev(&in);
            type = in_u32(&in);
            info = in_u32(&in);
            pvrdma_core_post_async_event(d->fg->core, type, info);
            break;
        }
        case FZ_OP_GLUE:
            fz_glue(&in);
            break;
        default:
            fz_consume(&in);
            break;
        }
        fz_check(heap_base);
        fz_check_dma_without_dsr(op);
        fz_check_rnr(op);
    }
    fz_end();
    return 0;
}
