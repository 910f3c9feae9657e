/*
 * Unit tests: PVRDMA command channel, non-QP commands (spec §5): dispatch,
 * QUERY_PORT/PKEY, UC, PD, MR, CQ, RESIZE_CQ, BIND, quotas.
 * QP and SRQ commands are in test_core_qp.c.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <glib.h>

#include "fake_guest.h"
#include "pvrdma_core_int.h"

static FakeGuest *new_setup_cfg(const PvrdmaCoreConfig *cfg)
{
    FakeGuest *fg = fg_new(cfg);

    fg_setup(fg);
    return fg;
}

static FakeGuest *new_setup(void)
{
    return new_setup_cfg(NULL);
}

static void assert_resp(const union pvrdma_cmd_resp *r, uint32_t cmd,
                        int err)
{
    assert_int_equal(r->hdr.ack, 0x80000000u + cmd);
    assert_int_equal(r->hdr.err, (uint8_t)-err);
    assert_int_equal(r->hdr.reserved[0] | r->hdr.reserved[1] |
                     r->hdr.reserved[2], 0);
}

/* ---- dispatch --------------------------------------------------------- */

static void test_unknown_commands(void **state)
{
    FakeGuest *fg = new_setup();
    static const uint32_t codes[] = { 21, 23, 0x80000000u, 0xFFFFFFFFu };
    unsigned i, errs;

    (void)state;
    for (i = 0; i < G_N_ELEMENTS(codes); i++) {
        struct pvrdma_cmd_hdr h = { .response = 0xC0FFEE00 + i,
                                    .cmd = codes[i] };
        union pvrdma_cmd_resp r;
        uint8_t stale[PVRDMA_RESP_SLOT_SIZE - 16];

        errs = fg->guest_errors;
        assert_int_equal(fg_cmd(fg, &h, sizeof(h), &r), -EINVAL);
        assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ERR), 0xFFFFFFEA);
        assert_int_equal(r.hdr.response, 0xC0FFEE00 + i);
        assert_int_equal(r.hdr.ack, 0x80000000u + codes[i]);
        assert_int_equal(r.hdr.err, EINVAL);
        /* only the header is written */
        memset(stale, 0x5A, sizeof(stale));
        assert_memory_equal((uint8_t *)&r + 16, stale, sizeof(stale));
        assert_int_equal(fg->guest_errors, errs + 1);
        assert_int_equal(fg->notify[0], i + 1);
    }
    fg_free(fg);
}

static void test_header_reserved_and_stale_bytes(void **state)
{
    FakeGuest *fg = new_setup();
    struct pvrdma_cmd_create_pd c = { .hdr.cmd = PVRDMA_CMD_CREATE_PD };
    union pvrdma_cmd_resp r;

    (void)state;
    /* fg_cmd fills bytes 24..183 with 0xA5: they must be ignored */
    c.hdr.response = 0x1122334455667788ull;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), 0);
    assert_resp(&r, PVRDMA_CMD_CREATE_PD, 0);
    assert_int_equal(r.hdr.response, 0x1122334455667788ull);
    assert_int_equal(r.create_pd_resp.pd_handle, 0);
    assert_int_equal(r.create_pd_resp.reserved[0], 0);

    c.hdr.reserved = 1;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), -EINVAL);
    assert_resp(&r, PVRDMA_CMD_CREATE_PD, -EINVAL);
    assert_int_equal(r.create_pd_resp.pd_handle, 0);
    c.hdr.reserved = 0;
    c.reserved[3] = 1;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), -EINVAL);
    /* failed creates allocated nothing: the next PD is 1 */
    c.reserved[3] = 0;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), 0);
    assert_int_equal(r.create_pd_resp.pd_handle, 1);
    fg_free(fg);
}

static void test_backend_failure(void **state)
{
    FakeGuest *fg = fg_new(NULL);
    FgBackend *be = fg_use_recording_backend(fg);
    union pvrdma_cmd_resp r;
    struct pvrdma_cmd_create_pd c = { .hdr.cmd = PVRDMA_CMD_CREATE_PD };
    uint32_t pd, cq;

    (void)state;
    fg_setup(fg);
    be->fail = -EIO;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), -EIO);
    assert_resp(&r, PVRDMA_CMD_CREATE_PD, -EIO);
    assert_int_equal(fg_create_cq(fg, 0, 64, &cq), -EIO);
    assert_int_equal(fg_bind_gid(fg, 0), -EIO);
    be->fail = 0;
    assert_int_equal(fg_destroy_pd(fg, 0), -EINVAL);
    assert_int_equal(fg_destroy_cq(fg, 0), -EINVAL);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(pd, 0);
    be->fail = -ENOMEM;
    assert_int_equal(fg_create_dma_mr(fg, pd, NULL, NULL), -ENOMEM);
    be->fail = 0;
    assert_int_equal(fg_destroy_pd(fg, pd), 0);
    assert_int_equal(be->pd_create, 2);
    assert_int_equal(be->pd_destroy, 1);
    fg_free(fg);
}

/* ---- port ------------------------------------------------------------- */

static void test_query_port(void **state)
{
    FakeGuest *fg = new_setup();
    struct pvrdma_cmd_query_port c = { .hdr.cmd = PVRDMA_CMD_QUERY_PORT };
    union pvrdma_cmd_resp r;
    const struct pvrdma_port_attr *a = &r.query_port_resp.attrs;

    (void)state;
    c.hdr.response = 42;
    c.port_num = 1;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), 0);
    assert_resp(&r, PVRDMA_CMD_QUERY_PORT, 0);
    assert_int_equal(r.hdr.response, 42);
    assert_int_equal(a->state, PVRDMA_PORT_ACTIVE);
    assert_int_equal(a->max_mtu, PVRDMA_MTU_4096);
    assert_int_equal(a->active_mtu, PVRDMA_MTU_4096);
    assert_int_equal(a->gid_tbl_len, 16);
    assert_int_equal(a->gid_tbl_len, fg_caps(fg)->gid_tbl_len);
    assert_int_equal(a->port_cap_flags, (1u << 26) | (1u << 16));
    assert_int_equal(a->max_msg_sz, 0x80000000u);
    assert_int_equal(a->bad_pkey_cntr, 0);
    assert_int_equal(a->qkey_viol_cntr, 0);
    assert_int_equal(a->pkey_tbl_len, 1);
    assert_int_equal(a->lid, 0);
    assert_int_equal(a->sm_lid, 0);
    assert_int_equal(a->lmc, 0);
    assert_int_equal(a->max_vl_num, 1);
    assert_int_equal(a->sm_sl, 0);
    assert_int_equal(a->subnet_timeout, 0);
    assert_int_equal(a->init_type_reply, 0);
    assert_int_equal(a->active_width, 2);
    assert_int_equal(a->active_speed, 2);
    assert_int_equal(a->phys_state, 5);
    assert_int_equal(a->reserved[0] | a->reserved[1], 0);

    c.port_num = 2;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), -EINVAL);
    assert_resp(&r, PVRDMA_CMD_QUERY_PORT, -EINVAL);
    assert_int_equal(a->state, 0);
    c.port_num = 0;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), -EINVAL);
    c.port_num = 1;
    c.reserved[6] = 1;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), -EINVAL);
    fg_free(fg);
}

static void test_query_pkey(void **state)
{
    FakeGuest *fg = new_setup();
    struct pvrdma_cmd_query_pkey c = { .hdr.cmd = PVRDMA_CMD_QUERY_PKEY };
    union pvrdma_cmd_resp r;

    (void)state;
    c.port_num = 1;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), 0);
    assert_resp(&r, PVRDMA_CMD_QUERY_PKEY, 0);
    assert_int_equal(r.query_pkey_resp.pkey, 0xFFFF);
    assert_int_equal(r.query_pkey_resp.reserved[0], 0);
    c.index = 1;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), -EINVAL);
    assert_resp(&r, PVRDMA_CMD_QUERY_PKEY, -EINVAL);
    assert_int_equal(r.query_pkey_resp.pkey, 0);
    c.index = 255;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), -EINVAL);
    c.index = 0;
    c.port_num = 2;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), -EINVAL);
    c.port_num = 1;
    c.reserved[0] = 9;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), -EINVAL);
    fg_free(fg);
}

/* ---- user contexts ---------------------------------------------------- */

static int create_uc_pfn(FakeGuest *fg, uint64_t pfn, uint32_t *ctx)
{
    struct pvrdma_cmd_create_uc c = { .hdr.cmd = PVRDMA_CMD_CREATE_UC };
    union pvrdma_cmd_resp r;
    int ret;

    c.pfn64 = pfn;
    ret = fg_cmd(fg, &c, sizeof(c), &r);
    assert_resp(&r, PVRDMA_CMD_CREATE_UC, ret);
    if (ctx) {
        *ctx = r.create_uc_resp.ctx_handle;
    }
    return ret;
}

static void test_uc(void **state)
{
    PvrdmaCoreConfig cfg;
    FakeGuest *fg;
    uint64_t base = FG_UAR_BASE >> 12;
    uint32_t uc1, uc2, uc3, pd, cq;

    (void)state;
    pvrdma_core_default_config(&cfg);
    cfg.max_uc = 3;
    fg = new_setup_cfg(&cfg);
    assert_int_equal(create_uc_pfn(fg, base + 1, &uc1), 0);
    assert_int_equal(uc1, 1);
    assert_int_equal(create_uc_pfn(fg, base + 255, &uc2), 0);
    assert_int_equal(uc2, 2);
    /* taken page, kernel page, beyond BAR2, below BAR2 */
    assert_int_equal(create_uc_pfn(fg, base + 1, NULL), -EBUSY);
    assert_int_equal(create_uc_pfn(fg, base, NULL), -EINVAL);
    assert_int_equal(create_uc_pfn(fg, base + 256, NULL), -EINVAL);
    assert_int_equal(create_uc_pfn(fg, base - 1, NULL), -EINVAL);
    assert_int_equal(create_uc_pfn(fg, 0, NULL), -EINVAL);
    assert_int_equal(create_uc_pfn(fg, ~0ull, NULL), -EINVAL);
    assert_int_equal(create_uc_pfn(fg, base + 2, &uc3), 0);
    /* max_uc reached */
    assert_int_equal(create_uc_pfn(fg, base + 3, NULL), -ENOMEM);

    /* a context with objects cannot go */
    assert_int_equal(fg_create_pd(fg, uc1, &pd), 0);
    assert_int_equal(fg_destroy_uc(fg, uc1), -EBUSY);
    assert_int_equal(fg_destroy_pd(fg, pd), 0);
    assert_int_equal(fg_create_cq(fg, uc1, 8, &cq), 0);
    assert_int_equal(fg_destroy_uc(fg, uc1), -EBUSY);
    assert_int_equal(fg_destroy_cq(fg, cq), 0);
    assert_int_equal(fg_destroy_uc(fg, uc1), 0);
    /* dead, kernel and never-made handles */
    assert_int_equal(fg_destroy_uc(fg, uc1), -EINVAL);
    assert_int_equal(fg_destroy_uc(fg, 0), -EINVAL);
    assert_int_equal(fg_destroy_uc(fg, 1000), -EINVAL);
    /* the page is free again, the handle is reused */
    assert_int_equal(create_uc_pfn(fg, base + 1, &uc1), 0);
    assert_int_equal(uc1, 1);
    assert_int_equal(fg_destroy_uc(fg, uc2), 0);
    assert_int_equal(fg_destroy_uc(fg, uc3), 0);
    assert_int_equal(fg_destroy_uc(fg, uc1), 0);
    fg_free(fg);
}

static void test_uc_old_driver_and_unknown_bar(void **state)
{
    FakeGuest *fg = fg_new(NULL);
    struct pvrdma_device_shared_region *dsr;
    uint64_t base = FG_UAR_BASE >> 12;
    uint32_t uc;

    (void)state;
    /* BAR2 address unknown: the DSR's uar_pfn is the base */
    pvrdma_core_set_uar_base(fg->core, PVRDMA_CORE_UAR_UNMAPPED);
    assert_int_equal(fg_load_dsr_ex(fg, 18, 4, 4), 0);
    fg_reg_write(fg, PVRDMA_REG_IMR, 0);
    assert_int_equal(create_uc_pfn(fg, base + 5, &uc), 0);
    /* version 18: 32-bit pfn, the upper half is reserved */
    assert_int_equal(create_uc_pfn(fg, (1ull << 32) | (base + 6), NULL),
                     -EINVAL);
    /* a DSR pointing elsewhere moves the base (BAR still unknown) */
    dsr = fg_ptr(fg, fg->dsr);
    dsr->uar_pfn64 = 0x12345;
    fg_reg_write(fg, PVRDMA_REG_DSRHIGH, 0);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ERR), 0);
    assert_int_equal(create_uc_pfn(fg, base + 5, NULL), -EINVAL);
    assert_int_equal(create_uc_pfn(fg, 0x12345 + 5, NULL), 0);
    /* once BAR2 is known it wins over the DSR (guest error logged) */
    pvrdma_core_set_uar_base(fg->core, FG_UAR_BASE);
    fg->guest_errors = 0;
    fg_reg_write(fg, PVRDMA_REG_DSRHIGH, 0);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ERR), 0);
    assert_int_equal(fg->guest_errors, 1);
    assert_int_equal(create_uc_pfn(fg, base + 5, NULL), 0);
    fg_free(fg);
}

/* ---- protection domains ------------------------------------------------ */

static void test_pd(void **state)
{
    PvrdmaCoreConfig cfg;
    FakeGuest *fg;
    uint32_t pd[4], x, uc, i;

    (void)state;
    pvrdma_core_default_config(&cfg);
    cfg.max_pd = 4;
    fg = new_setup_cfg(&cfg);
    assert_int_equal(fg_create_uc(fg, 1, &uc), 0);
    for (i = 0; i < 4; i++) {
        assert_int_equal(fg_create_pd(fg, i == 3 ? uc : 0, &pd[i]), 0);
        assert_int_equal(pd[i], i);
    }
    /* max_pd reached */
    assert_int_equal(fg_create_pd(fg, 0, &x), -ENOMEM);
    assert_int_equal(fg_destroy_pd(fg, pd[1]), 0);
    assert_int_equal(fg_create_pd(fg, 0, &x), 0);
    assert_int_equal(x, 1);
    /* bad contexts */
    assert_int_equal(fg_destroy_pd(fg, pd[3]), 0);
    assert_int_equal(fg_create_pd(fg, uc + 1, &x), -EINVAL);
    assert_int_equal(fg_create_pd(fg, 0xFFFFFFFF, &x), -EINVAL);
    /* bad destroys */
    assert_int_equal(fg_destroy_pd(fg, pd[3]), -EINVAL);
    assert_int_equal(fg_destroy_pd(fg, 4), -EINVAL);
    assert_int_equal(fg_destroy_pd(fg, 0xFFFFFFFF), -EINVAL);
    fg_free(fg);
}

/* ---- memory regions ----------------------------------------------------- */

static int create_mr(FakeGuest *fg, struct pvrdma_cmd_create_mr *c,
                     union pvrdma_cmd_resp *r)
{
    union pvrdma_cmd_resp tmp;
    int ret;

    c->hdr.cmd = PVRDMA_CMD_CREATE_MR;
    ret = fg_cmd(fg, c, sizeof(*c), r ? r : &tmp);
    assert_resp(r ? r : &tmp, PVRDMA_CMD_CREATE_MR, ret);
    return ret;
}

static void test_mr_dma_and_frmr(void **state)
{
    FakeGuest *fg = new_setup();
    struct pvrdma_cmd_create_mr c;
    union pvrdma_cmd_resp r;
    uint32_t pd, mr;

    (void)state;
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    memset(&c, 0, sizeof(c));
    c.pd_handle = pd;
    c.flags = PVRDMA_MR_FLAG_DMA;
    c.access_flags = PVRDMA_ACCESS_LOCAL_WRITE;
    assert_int_equal(create_mr(fg, &c, &r), 0);
    assert_int_equal(r.create_mr_resp.mr_handle, 0);
    assert_int_equal(r.create_mr_resp.lkey, (0 << 8) | 1);
    assert_int_equal(r.create_mr_resp.rkey, r.create_mr_resp.lkey);
    c.access_flags = 0;
    assert_int_equal(create_mr(fg, &c, &r), 0);
    assert_int_equal(r.create_mr_resp.lkey, (1 << 8) | 1);
    /* DMA MR: only LOCAL_WRITE, nothing else set */
    c.access_flags = PVRDMA_ACCESS_LOCAL_WRITE | PVRDMA_ACCESS_REMOTE_READ;
    assert_int_equal(create_mr(fg, &c, &r), -EINVAL);
    assert_int_equal(r.create_mr_resp.lkey, 0);
    c.access_flags = PVRDMA_ACCESS_LOCAL_WRITE;
    c.length = 4096;
    assert_int_equal(create_mr(fg, &c, NULL), -EINVAL);
    c.length = 0;
    c.nchunks = 1;
    assert_int_equal(create_mr(fg, &c, NULL), -EINVAL);
    c.nchunks = 0;
    c.pd_handle = pd + 1;
    assert_int_equal(create_mr(fg, &c, NULL), -EINVAL);
    c.pd_handle = pd;

    /* fast-reg: 1..128 entries, no pages */
    c.flags = PVRDMA_MR_FLAG_FRMR;
    c.access_flags = 0;
    c.nchunks = 128;
    assert_int_equal(create_mr(fg, &c, &r), 0);
    mr = r.create_mr_resp.mr_handle;
    assert_int_equal(mr, 2);
    assert_int_equal(r.create_mr_resp.lkey, (2 << 8) | 1);
    c.nchunks = 129;
    assert_int_equal(create_mr(fg, &c, NULL), -EINVAL);
    c.nchunks = 0;
    assert_int_equal(create_mr(fg, &c, NULL), -EINVAL);
    c.nchunks = 1;
    c.pdir_dma = 0x200000;
    assert_int_equal(create_mr(fg, &c, NULL), -EINVAL);
    c.pdir_dma = 0;
    /* unknown flags values */
    c.flags = 3;
    assert_int_equal(create_mr(fg, &c, NULL), -EINVAL);
    c.flags = 4;
    assert_int_equal(create_mr(fg, &c, NULL), -EINVAL);
    assert_int_equal(fg_destroy_mr(fg, mr), 0);
    assert_int_equal(fg_destroy_mr(fg, mr), -EINVAL);
    assert_int_equal(fg_destroy_mr(fg, 1000), -EINVAL);
    fg_free(fg);
}

static void test_mr_user(void **state)
{
    FakeGuest *fg = new_setup();
    uint32_t pd, mr, lkey, rkey;
    uint32_t lw = PVRDMA_ACCESS_LOCAL_WRITE;

    (void)state;
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    /* aligned, one page */
    assert_int_equal(fg_create_user_mr(fg, pd, 0x7f0000000000ull, 4096, lw,
                                       &mr, &lkey, &rkey), 0);
    assert_int_equal(mr, 0);
    assert_int_equal(lkey, 1);
    assert_int_equal(rkey, 1);
    /* unaligned start spanning two pages for 32 bytes */
    assert_int_equal(fg_create_user_mr(fg, pd, 0x7f0000000ff0ull, 32, lw,
                                       &mr, NULL, NULL), 0);
    /* several page tables: 600 pages */
    assert_int_equal(fg_create_user_mr(fg, pd, 0x10000, 600 * 4096,
                                       lw | PVRDMA_ACCESS_REMOTE_WRITE |
                                       PVRDMA_ACCESS_REMOTE_READ |
                                       PVRDMA_ACCESS_REMOTE_ATOMIC |
                                       PVRDMA_ACCESS_MW_BIND, &mr, NULL,
                                       NULL), 0);
    /* IB "optional" bits are ignored */
    assert_int_equal(fg_create_user_mr(fg, pd, 0x10000, 4096,
                                       lw | (1u << 20), NULL, NULL, NULL),
                     0);
    /* max_mr_size (1 GiB) at an aligned start is fine */
    assert_int_equal(fg_create_user_mr(fg, pd, 0x40000000, 1ull << 30, lw,
                                       &mr, NULL, NULL), 0);
    assert_int_equal(fg_destroy_mr(fg, mr), 0);

    /* lengths */
    assert_int_equal(fg_create_user_mr(fg, pd, 0x10000, 0, lw, NULL, NULL,
                                       NULL), -EINVAL);
    assert_int_equal(fg_create_user_mr(fg, pd, 0x10000, (1ull << 30) + 1, lw,
                                       NULL, NULL, NULL), -EINVAL);
    /* unknown / inconsistent access bits */
    assert_int_equal(fg_create_user_mr(fg, pd, 0x10000, 4096,
                                       lw | PVRDMA_ACCESS_ZERO_BASED, NULL,
                                       NULL, NULL), -EINVAL);
    assert_int_equal(fg_create_user_mr(fg, pd, 0x10000, 4096,
                                       lw | PVRDMA_ACCESS_ON_DEMAND, NULL,
                                       NULL, NULL), -EINVAL);
    assert_int_equal(fg_create_user_mr(fg, pd, 0x10000, 4096, lw | (1u << 7),
                                       NULL, NULL, NULL), -EINVAL);
    assert_int_equal(fg_create_user_mr(fg, pd, 0x10000, 4096,
                                       lw | 0x80000000u, NULL, NULL, NULL),
                     -EINVAL);
    assert_int_equal(fg_create_user_mr(fg, pd, 0x10000, 4096,
                                       PVRDMA_ACCESS_REMOTE_WRITE, NULL,
                                       NULL, NULL), -EINVAL);
    assert_int_equal(fg_create_user_mr(fg, pd, 0x10000, 4096,
                                       PVRDMA_ACCESS_REMOTE_ATOMIC, NULL,
                                       NULL, NULL), -EINVAL);
    assert_int_equal(fg_create_user_mr(fg, pd + 1, 0x10000, 4096, lw, NULL,
                                       NULL, NULL), -EINVAL);
    fg_free(fg);
}

static void test_mr_user_bad_layout(void **state)
{
    FakeGuest *fg = new_setup();
    struct pvrdma_cmd_create_mr c;
    uint64_t pages[3], *tbl;
    uint32_t pd;

    (void)state;
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    memset(&c, 0, sizeof(c));
    c.pd_handle = pd;
    c.access_flags = PVRDMA_ACCESS_LOCAL_WRITE;
    c.start = 0x7000000800ull;
    c.length = 8192;                      /* spans 3 pages */
    c.pdir_dma = fg_alloc_paged(fg, 3, pages);
    c.nchunks = 3;
    assert_int_equal(create_mr(fg, &c, NULL), 0);
    /* nchunks must be exactly the spanned page count */
    c.nchunks = 2;
    assert_int_equal(create_mr(fg, &c, NULL), -EINVAL);
    c.nchunks = 4;
    assert_int_equal(create_mr(fg, &c, NULL), -EINVAL);
    c.nchunks = 3;
    /* start + length wraps */
    c.start = 0xFFFFFFFFFFFFF000ull;
    c.length = 0x2000;
    c.nchunks = 2;
    assert_int_equal(create_mr(fg, &c, NULL), -EINVAL);
    /* ... but ending exactly at 2^64 is fine */
    c.length = 0x1000;
    c.nchunks = 1;
    assert_int_equal(create_mr(fg, &c, NULL), 0);
    c.start = 0x7000000800ull;
    c.length = 8192;
    c.nchunks = 3;
    /* page directory problems */
    c.pdir_dma += 8;
    assert_int_equal(create_mr(fg, &c, NULL), -EINVAL);
    c.pdir_dma = 0;
    assert_int_equal(create_mr(fg, &c, NULL), -EINVAL);
    c.pdir_dma = FG_BAD_ADDR;
    assert_int_equal(create_mr(fg, &c, NULL), -EFAULT);
    c.pdir_dma = fg_build_pdir(fg, pages, 3);
    tbl = fg_ptr(fg, ((uint64_t *)fg_ptr(fg, c.pdir_dma))[0]);
    tbl[1] = 0;
    assert_int_equal(create_mr(fg, &c, NULL), -EINVAL);
    tbl[1] = pages[1] + 0x10;
    assert_int_equal(create_mr(fg, &c, NULL), -EINVAL);
    tbl[1] = pages[1];
    ((uint64_t *)fg_ptr(fg, c.pdir_dma))[0] = FG_BAD_ADDR;
    assert_int_equal(create_mr(fg, &c, NULL), -EFAULT);
    ((uint64_t *)fg_ptr(fg, c.pdir_dma))[0] = 0;
    assert_int_equal(create_mr(fg, &c, NULL), -EINVAL);
    fg_free(fg);
}

static void test_mr_keys_and_quota(void **state)
{
    PvrdmaCoreConfig cfg;
    FakeGuest *fg;
    uint32_t pd, mr[3], key[3], k2, i;
    uint32_t lw = PVRDMA_ACCESS_LOCAL_WRITE;

    (void)state;
    pvrdma_core_default_config(&cfg);
    cfg.max_mr = 3;
    cfg.max_pinned_pages = 300;
    fg = new_setup_cfg(&cfg);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    for (i = 0; i < 3; i++) {
        assert_int_equal(fg_create_dma_mr(fg, pd, &mr[i], &key[i]), 0);
        assert_int_not_equal(key[i], 0);
        assert_int_equal(key[i] >> 8, mr[i]);
    }
    assert_int_not_equal(key[0], key[1]);
    assert_int_not_equal(key[1], key[2]);
    /* max_mr reached */
    assert_int_equal(fg_create_dma_mr(fg, pd, NULL, NULL), -ENOMEM);
    /* a reused handle gets a new key */
    assert_int_equal(fg_destroy_mr(fg, mr[1]), 0);
    assert_int_equal(fg_create_dma_mr(fg, pd, &i, &k2), 0);
    assert_int_equal(i, mr[1]);
    assert_int_not_equal(k2, key[1]);
    assert_int_equal(k2, (mr[1] << 8) | 2);
    for (i = 0; i < 300; i++) {
        assert_int_equal(fg_destroy_mr(fg, mr[1]), 0);
        assert_int_equal(fg_create_dma_mr(fg, pd, &mr[1], &k2), 0);
        assert_int_not_equal(k2 & 0xFF, 0);
    }
    assert_int_equal(fg_destroy_mr(fg, mr[0]), 0);
    assert_int_equal(fg_destroy_mr(fg, mr[1]), 0);
    assert_int_equal(fg_destroy_mr(fg, mr[2]), 0);

    /* pinned pages: 8 used by the DSR rings, 292 left */
    assert_int_equal(fg_create_user_mr(fg, pd, 0, 292 * 4096, lw, &mr[0],
                                       NULL, NULL), 0);
    assert_int_equal(fg_create_user_mr(fg, pd, 0, 1 * 4096, lw, &mr[1],
                                       NULL, NULL), -ENOMEM);
    /* fast-reg MRs charge their page list too */
    {
        struct pvrdma_cmd_create_mr c;

        memset(&c, 0, sizeof(c));
        c.pd_handle = pd;
        c.flags = PVRDMA_MR_FLAG_FRMR;
        c.nchunks = 1;
        assert_int_equal(create_mr(fg, &c, NULL), -ENOMEM);
    }
    assert_int_equal(fg_destroy_mr(fg, mr[0]), 0);
    assert_int_equal(fg_create_user_mr(fg, pd, 0, 291 * 4096, lw, &mr[0],
                                       NULL, NULL), 0);
    /* the CQ of 2 pages does not fit any more */
    assert_int_equal(fg_create_cq(fg, 0, 64, NULL), -ENOMEM);
    assert_int_equal(fg_destroy_mr(fg, mr[0]), 0);
    assert_int_equal(fg_create_cq(fg, 0, 64, NULL), 0);
    fg_free(fg);
}

static void test_pd_busy_with_mr(void **state)
{
    FakeGuest *fg = new_setup();
    uint32_t pd, mr;

    (void)state;
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(fg_create_dma_mr(fg, pd, &mr, NULL), 0);
    assert_int_equal(fg_destroy_pd(fg, pd), -EBUSY);
    assert_int_equal(fg_destroy_mr(fg, mr), 0);
    assert_int_equal(fg_destroy_pd(fg, pd), 0);
    fg_free(fg);
}

/* ---- completion queues --------------------------------------------------- */

static int create_cq_raw(FakeGuest *fg, uint32_t ctx, uint32_t cqe,
                         uint32_t nchunks, uint64_t pdir,
                         union pvrdma_cmd_resp *r)
{
    struct pvrdma_cmd_create_cq c = { .hdr.cmd = PVRDMA_CMD_CREATE_CQ };
    union pvrdma_cmd_resp tmp;
    int ret;

    c.pdir_dma = pdir;
    c.ctx_handle = ctx;
    c.cqe = cqe;
    c.nchunks = nchunks;
    ret = fg_cmd(fg, &c, sizeof(c), r ? r : &tmp);
    assert_resp(r ? r : &tmp, PVRDMA_CMD_CREATE_CQ, ret);
    return ret;
}

static void test_cq(void **state)
{
    FakeGuest *fg = new_setup();
    uint64_t pages[130], pdir;
    union pvrdma_cmd_resp r;
    uint8_t pattern[4096];
    uint32_t uc, i;

    (void)state;
    pdir = fg_alloc_paged(fg, 130, pages);
    for (i = 0; i < 130; i++) {
        memset(fg_ptr(fg, pages[i]), 0xEE, 4096);
    }
    memset(pattern, 0xEE, sizeof(pattern));
    /* 64 CQEs = 1 page + ring state */
    assert_int_equal(create_cq_raw(fg, 0, 64, 2, pdir, &r), 0);
    assert_int_equal(r.create_cq_resp.cq_handle, 0);
    assert_int_equal(r.create_cq_resp.cqe, 64);
    /* the device zeroes nothing in guest memory */
    assert_memory_equal(fg_ptr(fg, pages[0]), pattern, 4096);
    assert_memory_equal(fg_ptr(fg, pages[1]), pattern, 4096);
    /* 1 CQE still needs a page; 4096 CQEs = 64 pages (+ up to 2x) */
    assert_int_equal(create_cq_raw(fg, 0, 1, 2, pdir, &r), 0);
    assert_int_equal(r.create_cq_resp.cq_handle, 1);
    assert_int_equal(r.create_cq_resp.cqe, 1);
    assert_int_equal(create_cq_raw(fg, 0, 4096, 65, pdir, NULL), 0);
    assert_int_equal(create_cq_raw(fg, 0, 4096, 129, pdir, NULL), 0);
    assert_int_equal(create_cq_raw(fg, 0, 4096, 130, pdir, NULL), -EINVAL);
    assert_int_equal(create_cq_raw(fg, 0, 4096, 64, pdir, NULL), -EINVAL);
    /* cqe must be a power of two within max_cqe */
    assert_int_equal(create_cq_raw(fg, 0, 0, 2, pdir, NULL), -EINVAL);
    assert_int_equal(create_cq_raw(fg, 0, 48, 2, pdir, NULL), -EINVAL);
    assert_int_equal(create_cq_raw(fg, 0, 8192, 129, pdir, NULL), -EINVAL);
    assert_int_equal(create_cq_raw(fg, 0, 0x80000000u, 2, pdir, NULL),
                     -EINVAL);
    /* page counts */
    assert_int_equal(create_cq_raw(fg, 0, 64, 0, pdir, NULL), -EINVAL);
    assert_int_equal(create_cq_raw(fg, 0, 64, 1, pdir, NULL), -EINVAL);
    assert_int_equal(create_cq_raw(fg, 0, 64, 4, pdir, NULL), -EINVAL);
    assert_int_equal(create_cq_raw(fg, 0, 64, 0xFFFFFFFF, pdir, NULL),
                     -EINVAL);
    /* contexts and directories */
    assert_int_equal(create_cq_raw(fg, 5, 64, 2, pdir, NULL), -EINVAL);
    assert_int_equal(create_cq_raw(fg, 0, 64, 2, FG_BAD_ADDR, NULL),
                     -EFAULT);
    assert_int_equal(create_cq_raw(fg, 0, 64, 2, pdir + 64, NULL), -EINVAL);
    assert_int_equal(fg_create_uc(fg, 9, &uc), 0);
    assert_int_equal(create_cq_raw(fg, uc, 64, 2, pdir, &r), 0);
    assert_int_equal(r.create_cq_resp.cq_handle, 4);
    /* RESIZE_CQ in the VMware layout (no new ring): malformed */
    {
        struct pvrdma_cmd_resize_cq c = { .hdr.cmd = PVRDMA_CMD_RESIZE_CQ };

        c.cq_handle = 0;
        c.cqe = 128;
        assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), -EINVAL);
        assert_resp(&r, PVRDMA_CMD_RESIZE_CQ, -EINVAL);
        assert_int_equal(r.resize_cq_resp.cqe, 0);
        assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ERR),
                         (uint32_t)-EINVAL);
    }
    for (i = 0; i < 5; i++) {
        assert_int_equal(fg_destroy_cq(fg, i), 0);
    }
    assert_int_equal(fg_destroy_cq(fg, 0), -EINVAL);
    assert_int_equal(fg_destroy_cq(fg, 0xFFFFFF), -EINVAL);
    fg_free(fg);
}

static void test_cq_quota(void **state)
{
    PvrdmaCoreConfig cfg;
    FakeGuest *fg;
    uint32_t cq, i;

    (void)state;
    pvrdma_core_default_config(&cfg);
    cfg.max_cq = 5;
    fg = new_setup_cfg(&cfg);
    for (i = 0; i < 5; i++) {
        assert_int_equal(fg_create_cq(fg, 0, 1, &cq), 0);
        assert_int_equal(cq, i);
    }
    assert_int_equal(fg_create_cq(fg, 0, 1, &cq), -ENOMEM);
    assert_int_equal(fg_destroy_cq(fg, 2), 0);
    assert_int_equal(fg_create_cq(fg, 0, 1, &cq), 0);
    assert_int_equal(cq, 2);
    fg_free(fg);
}

/* ---- what the device holds (x-objects) ---------------------------------- */

static void assert_objects(FakeGuest *fg, uint32_t uc, uint32_t pd,
                           uint32_t mr, uint32_t cq, uint32_t qp, uint32_t srq)
{
    PvrdmaCoreObjects o;

    pvrdma_core_objects(fg->core, &o);
    assert_int_equal(o.uc, uc);
    assert_int_equal(o.pd, pd);
    assert_int_equal(o.mr, mr);
    assert_int_equal(o.cq, cq);
    assert_int_equal(o.qp, qp);
    assert_int_equal(o.srq, srq);
}

static void test_objects(void **state)
{
    FakeGuest *fg = new_setup();
    uint32_t uc, pd, mr, cq, qp, qpn, srq;
    PvrdmaCoreObjects o;
    uint64_t idle;

    (void)state;
    pvrdma_core_objects(fg->core, &o);
    idle = o.pinned_pages;              /* the DSR's rings */
    assert_objects(fg, 0, 0, 0, 0, 0, 0);
    assert_int_equal(fg_create_uc(fg, 3, &uc), 0);
    assert_int_equal(fg_create_pd(fg, uc, &pd), 0);
    assert_int_equal(fg_create_dma_mr(fg, pd, &mr, NULL), 0);
    assert_int_equal(fg_create_cq(fg, uc, 64, &cq), 0);
    assert_int_equal(fg_create_qp(fg, PVRDMA_QPT_RC, pd, cq, &qp, &qpn), 0);
    assert_int_equal(fg_create_srq(fg, pd, 16, 1, &srq), 0);
    assert_objects(fg, 1, 1, 1, 1, 1, 1);
    pvrdma_core_objects(fg->core, &o);
    assert_true(o.pinned_pages > idle); /* the rings of the CQ, QP, SRQ */
    assert_int_equal(fg_destroy_srq(fg, srq), 0);
    assert_int_equal(fg_destroy_qp(fg, qp), 0);
    assert_int_equal(fg_destroy_cq(fg, cq), 0);
    assert_int_equal(fg_destroy_mr(fg, mr), 0);
    assert_int_equal(fg_destroy_pd(fg, pd), 0);
    assert_int_equal(fg_destroy_uc(fg, uc), 0);
    assert_objects(fg, 0, 0, 0, 0, 0, 0);
    pvrdma_core_objects(fg->core, &o);
    assert_int_equal(o.pinned_pages, idle);
    fg_free(fg);
}

/* ---- GID table ----------------------------------------------------------- */

static int bind(FakeGuest *fg, struct pvrdma_cmd_create_bind *c)
{
    union pvrdma_cmd_resp r;
    int ret;

    c->hdr.cmd = PVRDMA_CMD_CREATE_BIND;
    ret = fg_cmd(fg, c, sizeof(*c), &r);
    assert_resp(&r, PVRDMA_CMD_CREATE_BIND, ret);
    return ret;
}

static int unbind(FakeGuest *fg, uint32_t index, const uint8_t gid[16])
{
    struct pvrdma_cmd_destroy_bind c = { .hdr.cmd = PVRDMA_CMD_DESTROY_BIND };
    union pvrdma_cmd_resp r;
    int ret;

    c.index = index;
    memcpy(c.dest_gid, gid, 16);
    ret = fg_cmd(fg, &c, sizeof(c), &r);
    assert_resp(&r, PVRDMA_CMD_DESTROY_BIND, ret);
    return ret;
}

static void test_bind(void **state)
{
    FakeGuest *fg = fg_new(NULL);
    FgBackend *be = fg_use_recording_backend(fg);
    struct pvrdma_cmd_create_bind c, good;
    uint8_t gid[16], other[16];

    (void)state;
    fg_setup(fg);
    memset(&good, 0, sizeof(good));
    good.mtu = 1024;
    good.vlan = 0xFFF;
    good.index = 15;
    fg_test_gid(15, good.new_gid);
    good.gid_type = PVRDMA_GID_TYPE_FLAG_ROCE_V2;
    c = good;
    assert_int_equal(bind(fg, &c), 0);
    assert_int_equal(be->gid_bind, 1);
    assert_int_equal(be->last_handle, 15);

    c = good;
    c.index = 16;
    assert_int_equal(bind(fg, &c), -EINVAL);
    c.index = 0xFFFFFFFF;
    assert_int_equal(bind(fg, &c), -EINVAL);
    c = good;
    c.gid_type = PVRDMA_GID_TYPE_FLAG_ROCE_V1;
    assert_int_equal(bind(fg, &c), -EINVAL);
    c.gid_type = 3;
    assert_int_equal(bind(fg, &c), -EINVAL);
    c = good;
    memset(c.new_gid, 0, 16);
    assert_int_equal(bind(fg, &c), -EINVAL);
    c = good;
    c.reserved[2] = 1;
    assert_int_equal(bind(fg, &c), -EINVAL);
    c = good;
    c.vlan = 0x1000;
    assert_int_equal(bind(fg, &c), -EINVAL);
    c = good;
    c.mtu = 1500;
    assert_int_equal(bind(fg, &c), -EINVAL);
    assert_int_equal(be->gid_bind, 1);

    /* DESTROY_BIND must name the bound GID */
    fg_test_gid(15, gid);
    fg_test_gid(14, other);
    assert_int_equal(unbind(fg, 15, other), -EINVAL);
    assert_int_equal(unbind(fg, 14, other), -EINVAL);
    assert_int_equal(unbind(fg, 16, gid), -EINVAL);
    assert_int_equal(unbind(fg, 15, gid), 0);
    assert_int_equal(be->gid_unbind, 1);
    assert_int_equal(unbind(fg, 15, gid), -EINVAL);

    /* rebinding an index replaces the old GID */
    assert_int_equal(fg_bind_gid(fg, 3), 0);
    c = good;
    c.index = 3;
    assert_int_equal(bind(fg, &c), 0);
    fg_test_gid(3, other);
    assert_int_equal(unbind(fg, 3, other), -EINVAL);
    assert_int_equal(unbind(fg, 3, gid), 0);
    fg_free(fg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_commands),
        cmocka_unit_test(test_header_reserved_and_stale_bytes),
        cmocka_unit_test(test_backend_failure),
        cmocka_unit_test(test_query_port),
        cmocka_unit_test(test_query_pkey),
        cmocka_unit_test(test_uc),
        cmocka_unit_test(test_uc_old_driver_and_unknown_bar),
        cmocka_unit_test(test_pd),
        cmocka_unit_test(test_mr_dma_and_frmr),
        cmocka_unit_test(test_mr_user),
        cmocka_unit_test(test_mr_user_bad_layout),
        cmocka_unit_test(test_mr_keys_and_quota),
        cmocka_unit_test(test_pd_busy_with_mr),
        cmocka_unit_test(test_cq),
        cmocka_unit_test(test_cq_quota),
        cmocka_unit_test(test_bind),
        cmocka_unit_test(test_objects),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
