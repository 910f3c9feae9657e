/*
 * Unit tests: PVRDMA core configuration, registers, DSR loading, CTL,
 * interrupts (IMR/ICR), device rings (async, CQ notification), doorbells.
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

#define ERRV(e)     ((uint32_t)-(e))

static FakeGuest *new_setup(void)
{
    FakeGuest *fg = fg_new(NULL);

    fg_setup(fg);
    return fg;
}

/* ---- configuration ------------------------------------------------------- */

static void test_config_defaults(void **state)
{
    PvrdmaCoreConfig cfg;
    char *err = (char *)1;

    (void)state;
    pvrdma_core_default_config(&cfg);
    assert_true(pvrdma_core_check_config(&cfg, &err));
    assert_null(err);
    assert_int_equal(cfg.max_qp, 1024);
    assert_int_equal(cfg.max_qp_wr, 4096);
    assert_int_equal(cfg.max_sge, 32);
    assert_int_equal(cfg.max_cq, 2048);
    assert_int_equal(cfg.max_cqe, 4096);
    assert_int_equal(cfg.max_mr, 4096);
    assert_int_equal(cfg.max_pd, 1024);
    assert_int_equal(cfg.max_srq, 512);
    assert_int_equal(cfg.max_srq_wr, 4096);
    assert_int_equal(cfg.max_srq_sge, 32);
    assert_int_equal(cfg.max_ah, 1024);
    assert_int_equal(cfg.max_uc, 255);
    assert_int_equal(cfg.uar_pages, 256);
    assert_int_equal(cfg.gid_tbl_len, 16);
    assert_int_equal(cfg.max_mr_size, 1ull << 30);
    assert_int_equal(cfg.max_pinned_pages, 1ull << 20);
    assert_int_equal(cfg.node_guid, 0);
    assert_int_equal(cfg.fw_ver, 1ull << 32);
}

static void expect_bad_config(PvrdmaCoreConfig *cfg, const char *msg)
{
    char *err = NULL;

    assert_false(pvrdma_core_check_config(cfg, &err));
    assert_non_null(err);
    assert_string_equal(err, msg);
    g_free(err);
    pvrdma_core_default_config(cfg);
}

static void test_config_ranges(void **state)
{
    PvrdmaCoreConfig cfg;

    (void)state;
    pvrdma_core_default_config(&cfg);
    cfg.max_qp = 70000;
    expect_bad_config(&cfg,
                      "pvrdma: max-qp=70000 is out of range: use 2..65535");
    cfg.max_qp = 1;
    expect_bad_config(&cfg, "pvrdma: max-qp=1 is out of range: use 2..65535");
    cfg.max_cq = 1u << 24;
    expect_bad_config(&cfg, "pvrdma: max-cq=16777216 is out of range: use "
                      "1..16777215");
    cfg.max_cq = 0;
    expect_bad_config(&cfg, "pvrdma: max-cq=0 is out of range: use "
                      "1..16777215");
    cfg.uar_pages = 300;
    expect_bad_config(&cfg, "pvrdma: uar-pages=300 is not a power of two: "
                      "use 2, 4, ..., 2048");
    cfg.uar_pages = 4096;
    expect_bad_config(&cfg, "pvrdma: uar-pages=4096 is out of range: use "
                      "2..2048");
    cfg.gid_tbl_len = 0;
    expect_bad_config(&cfg, "pvrdma: gid-tbl-len=0 is out of range: use "
                      "1..256");
    cfg.gid_tbl_len = 257;
    expect_bad_config(&cfg, "pvrdma: gid-tbl-len=257 is out of range: use "
                      "1..256");
    cfg.max_uc = 256;
    expect_bad_config(&cfg, "pvrdma: max-uc=256 is out of range: use "
                      "0..255");
    cfg.max_mr_size = (1ull << 30) + 1;
    expect_bad_config(&cfg, "pvrdma: max-mr-size=1073741825 is out of "
                      "range: use 4096..1073741824");
    cfg.max_pinned_pages = 0;
    expect_bad_config(&cfg, "pvrdma: max-pinned-pages=0 is out of range: "
                      "use 258..268435456");
    cfg.max_sge = 0;
    expect_bad_config(&cfg, "pvrdma: max-sge=0 is out of range: use 1..32");
    cfg.max_pd = (1u << 24) + 1;
    expect_bad_config(&cfg, "pvrdma: max-pd=16777217 is out of range: use "
                      "1..16777216");
}

/* ---- registers ----------------------------------------------------------- */

static void test_regs_reset_values(void **state)
{
    FakeGuest *fg = fg_new(NULL);
    unsigned errs;

    (void)state;
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_VERSION), 20);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ERR), 0xFFFF);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_IMR), 0xFFFFFFFF);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ICR), 0);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_CTL), 0);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_REQUEST), 0);
    assert_int_equal(fg->guest_errors, 0);

    /* read-only registers */
    fg_reg_write(fg, PVRDMA_REG_VERSION, 17);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_VERSION), 20);
    fg_reg_write(fg, PVRDMA_REG_ERR, 0);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ERR), 0xFFFF);
    fg_reg_write(fg, PVRDMA_REG_ICR, 7);
    /* the kind and its values, as the trace event's fields */
    assert_int_equal(fg->last_gerr, PVRDMA_GERR_WRITE_READ_ONLY_REGISTER);
    assert_int_equal(fg->last_gerr_args[0], 7);
    assert_int_equal(fg->last_gerr_args[1], PVRDMA_REG_ICR);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ICR), 0);
    assert_int_equal(fg->guest_errors, 3);

    /* storage registers */
    fg_reg_write(fg, PVRDMA_REG_MACL, 0x11223344);
    fg_reg_write(fg, PVRDMA_REG_MACH, 0x5566);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_MACL), 0x11223344);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_MACH), 0x5566);
    fg_reg_write(fg, PVRDMA_REG_DSRLOW, 0x1234000);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_DSRLOW), 0x1234000);

    /* undefined offsets read 0, ignore writes, guest error each */
    errs = fg->guest_errors;
    fg_reg_write(fg, 0x28, 0xdeadbeef);
    assert_int_equal(fg_reg_read(fg, 0x28), 0);
    assert_int_equal(fg_reg_read(fg, 0xFC), 0);
    assert_int_equal(fg_reg_read(fg, 0x100), 0);
    assert_int_equal(fg_reg_read(fg, 0x02), 0);
    fg_reg_write(fg, 0x1000, 1);
    assert_int_equal(fg->last_gerr, PVRDMA_GERR_REGISTER_WRITE_BAD_OFFSET);
    assert_int_equal(fg->last_gerr_args[0], 0x1000);
    assert_int_equal(fg->guest_errors, errs + 6);
    assert_int_equal(fg->dma_reads + fg->dma_writes, 0);

    /* qdev reset brings everything back */
    fg_reg_write(fg, PVRDMA_REG_IMR, 0);
    pvrdma_core_reset(fg->core);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_IMR), 0xFFFFFFFF);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_MACL), 0);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_DSRLOW), 0);
    fg_free(fg);
}

/* Before a DSR (no caps announced) the clock offsets of BAR2 read 0. */
static void test_uar_clock_before_dsr(void **state)
{
    FakeGuest *fg = fg_new(NULL);

    (void)state;
    fg->now_ns = 0x123456789ll;
    assert_int_equal(pvrdma_core_uar_read(fg->core,
                                          PVRDMA_UAR_CLOCK_LO_OFFSET), 0);
    assert_int_equal(pvrdma_core_uar_read(fg->core,
                                          PVRDMA_UAR_CLOCK_HI_OFFSET), 0);
    assert_int_equal(fg_load_dsr_ex(fg, 20, 4, 4), 0);
    assert_int_equal(pvrdma_core_uar_read(fg->core,
                                          PVRDMA_UAR_CLOCK_LO_OFFSET),
                     0x23456789);
    assert_int_equal(pvrdma_core_uar_read(fg->core,
                                          PVRDMA_UAR_CLOCK_HI_OFFSET), 1);
    fg_free(fg);
}

/* ---- DSR ----------------------------------------------------------------- */

static void test_dsr_valid_caps(void **state)
{
    PvrdmaCoreConfig cfg;
    FakeGuest *fg;
    const struct pvrdma_device_caps *c;
    struct pvrdma_device_shared_region *dsr;
    uint8_t zero[24] = { 0 };

    (void)state;
    pvrdma_core_default_config(&cfg);
    cfg.node_guid = 0x025056fffe000001ull;
    cfg.fw_ver = (1ull << 32) | (2 << 16) | 3;
    fg = fg_new(&cfg);
    assert_int_equal(fg_load_dsr_ex(fg, 20, 4, 4), 0);
    assert_int_equal(fg->guest_errors, 0);
    c = fg_caps(fg);
    assert_int_equal(c->fw_ver, (1ull << 32) | (2 << 16) | 3);
    assert_int_equal(c->node_guid, GUINT64_TO_BE(0x025056fffe000001ull));
    assert_int_equal(c->sys_image_guid, c->node_guid);
    assert_int_equal(c->max_mr_size, 1ull << 30);
    assert_int_equal(c->page_size_cap, 0x1000);
    assert_int_equal(c->atomic_arg_sizes, 0);
    /*
     * RESIZE_CQ and UC always, windows on a backend whose remote keys the
     * core checks (this one), CQE timestamps with a clock (the fake
     * guest's), MODIFY_MR on a backend that keeps no MRs of its own,
     * RESIZE_SRQ on one that keeps no SRQs of its own, counters always;
     * no CQ_POLL hint without peers elsewhere
     */
    assert_int_equal(c->ex_comp_mask, PVRDMA_EX_CAP_RESIZE_CQ |
                     PVRDMA_EX_CAP_UC | PVRDMA_EX_CAP_MW |
                     PVRDMA_EX_CAP_CQE_TIMESTAMP | PVRDMA_EX_CAP_CLOCK |
                     PVRDMA_EX_CAP_MODIFY_MR |
                     PVRDMA_EX_CAP_RESIZE_SRQ | PVRDMA_EX_CAP_COUNTERS);
    assert_int_equal(c->vendor_id, 0x15AD);
    assert_int_equal(c->vendor_part_id, 0x0820);
    assert_int_equal(c->hw_ver, 1);
    assert_int_equal(c->max_qp, 1024);
    assert_int_equal(c->max_qp_wr, 4096);
    assert_int_equal(c->device_cap_flags,
                     (1u << 7) | (1u << 10) | (1u << 11) | (1u << 12));
    assert_int_equal(c->max_sge, 32);
    assert_int_equal(c->max_sge_rd, 32);
    assert_int_equal(c->max_cq, 2048);
    assert_int_equal(c->max_cqe, 4096);
    assert_int_equal(c->max_mr, 4096);
    assert_int_equal(c->max_pd, 1024);
    assert_int_equal(c->max_qp_rd_atom, 16);
    assert_int_equal(c->max_qp_init_rd_atom, 16);
    assert_int_equal(c->max_res_rd_atom, 1024 * 16);
    assert_int_equal(c->max_ee_rd_atom, 0);
    assert_int_equal(c->max_mw, 0);
    assert_int_equal(c->max_ah, 1024);
    assert_int_equal(c->max_srq, 512);
    assert_int_equal(c->max_srq_wr, 4096);
    assert_int_equal(c->max_srq_sge, 32);
    assert_int_equal(c->max_uar, 256);
    assert_int_equal(c->gid_tbl_len, 16);
    assert_int_equal(c->max_pkeys, 1);
    assert_int_equal(c->local_ca_ack_delay, 15);
    assert_int_equal(c->phys_port_cnt, 1);
    assert_int_equal(c->mode, 0);
    assert_int_equal(c->atomic_ops, 3);
    assert_int_equal(c->bmme_flags, 7);
    assert_int_equal(c->gid_types, 2);
    assert_int_equal(c->max_fast_reg_page_list_len, 128);
    fg_free(fg);
    /* a device with peers in other processes asks for CQ_POLL */
    cfg.cq_poll_hint = true;
    fg = fg_new(&cfg);
    assert_int_equal(fg_load_dsr_ex(fg, 20, 4, 4), 0);
    assert_int_equal(fg_caps(fg)->ex_comp_mask,
                     PVRDMA_EX_CAP_CQ_POLL_HINT | PVRDMA_EX_CAP_RESIZE_CQ |
                     PVRDMA_EX_CAP_UC | PVRDMA_EX_CAP_MW |
                     PVRDMA_EX_CAP_CQE_TIMESTAMP | PVRDMA_EX_CAP_CLOCK |
                     PVRDMA_EX_CAP_MODIFY_MR |
                     PVRDMA_EX_CAP_RESIZE_SRQ | PVRDMA_EX_CAP_COUNTERS);
    /* the driver's fields are untouched */
    dsr = fg_ptr(fg, fg->dsr);
    assert_int_equal(dsr->driver_version, 20);
    assert_int_equal(dsr->cmd_slot_dma, fg->cmd_slot);
    assert_int_equal(dsr->async_ring_pages.num_pages, 4);
    assert_int_equal(dsr->uar_pfn64, FG_UAR_BASE >> 12);
    /* nothing written beyond the 280 bytes */
    assert_memory_equal((uint8_t *)dsr + 280, zero, sizeof(zero));
    /* ACTIVATE succeeds now */
    fg_reg_write(fg, PVRDMA_REG_CTL, PVRDMA_DEVICE_CTL_ACTIVATE);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ERR), 0);
    fg_free(fg);
}

/* A backend that keeps MRs and SRQs of its own (as backend=ibverbs
 * does): no MODIFY_MR, no RESIZE_SRQ, and a resize is refused. */
static void test_dsr_caps_backend_objects(void **state)
{
    FakeGuest *fg = fg_new(NULL);
    struct pvrdma_cmd_modify_srq_ex m = { .hdr.cmd = PVRDMA_CMD_MODIFY_SRQ };
    uint32_t pd, srq;

    (void)state;
    fg_use_recording_backend(fg);       /* (freed with the device) */
    fg_setup(fg);
    assert_false(fg_caps(fg)->ex_comp_mask &
                 (PVRDMA_EX_CAP_RESIZE_SRQ | PVRDMA_EX_CAP_MODIFY_MR));
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(fg_create_srq(fg, pd, 4, 1, &srq), 0);
    m.srq_handle = srq;
    m.attr_mask = PVRDMA_SRQ_MAX_WR;
    m.attrs.max_wr = 8;
    m.pdir_dma = 0x10000;
    m.nchunks = 2;
    assert_int_equal(fg_cmd(fg, &m, sizeof(m), NULL), -EINVAL);
    fg_free(fg);
}

/* A backend whose remote keys the core does not check: no windows. */
static void test_dsr_caps_no_mw(void **state)
{
    FakeGuest *fg = fg_new(NULL);

    (void)state;
    pvrdma_core_set_backend(fg->core, fg_backend_without_windows(), NULL);
    assert_int_equal(fg_load_dsr_ex(fg, 20, 4, 4), 0);
    assert_int_equal(fg_caps(fg)->ex_comp_mask,
                     PVRDMA_EX_CAP_RESIZE_CQ | PVRDMA_EX_CAP_UC |
                     PVRDMA_EX_CAP_CQE_TIMESTAMP | PVRDMA_EX_CAP_CLOCK |
                     PVRDMA_EX_CAP_MODIFY_MR |
                     PVRDMA_EX_CAP_RESIZE_SRQ | PVRDMA_EX_CAP_COUNTERS);
    fg_free(fg);
}

/*
 * A backend that registers MRs itself (mr_register): no MODIFY_MR, and the
 * command is unknown there.
 */
static void test_dsr_caps_no_modify_mr(void **state)
{
    FakeGuest *fg = fg_new(NULL);

    (void)state;
    fg_use_recording_backend(fg);
    assert_int_equal(fg_load_dsr_ex(fg, 20, 4, 4), 0);
    assert_false(fg_caps(fg)->ex_comp_mask & PVRDMA_EX_CAP_MODIFY_MR);
    fg_reg_write(fg, PVRDMA_REG_CTL, PVRDMA_DEVICE_CTL_ACTIVATE);
    assert_int_equal(fg_modify_mr(fg, 1, PVRDMA_MODIFY_MR_ACCESS, 0, 0),
                     -EINVAL);
    fg_free(fg);
}

/* A failed load leaves no DSR: REQUEST fails without DMA. */
static void assert_no_dsr(FakeGuest *fg)
{
    unsigned r = fg->dma_reads, w = fg->dma_writes;

    fg_reg_write(fg, PVRDMA_REG_REQUEST, 0);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ERR), ERRV(EINVAL));
    assert_int_equal(fg->dma_reads, r);
    assert_int_equal(fg->dma_writes, w);
    assert_int_equal(fg_caps(fg)->gid_types, 0);
    assert_int_equal(pvrdma_core_post_async_event(fg->core, 9, 1), -ENODEV);
}

static void test_dsr_bad_num_pages(void **state)
{
    static const uint32_t bad[] = { 0, 1, 130, 512, 0xFFFFFFFF };
    unsigned i, which;

    (void)state;
    for (which = 0; which < 2; which++) {
        for (i = 0; i < G_N_ELEMENTS(bad); i++) {
            FakeGuest *fg = fg_new(NULL);
            uint32_t np = bad[i] > 512 ? 4 : bad[i];
            struct pvrdma_device_shared_region *dsr;
            uint32_t err;

            err = fg_load_dsr_ex(fg, 20, which ? 4 : np, which ? np : 4);
            if (bad[i] > 512) {
                /* patch the count after building a normal ring */
                dsr = fg_ptr(fg, fg->dsr);
                if (which) {
                    dsr->cq_ring_pages.num_pages = bad[i];
                } else {
                    dsr->async_ring_pages.num_pages = bad[i];
                }
                fg_clear_caps(fg);
                fg_reg_write(fg, PVRDMA_REG_DSRHIGH, 0);
                err = fg_reg_read(fg, PVRDMA_REG_ERR);
            }
            assert_int_equal(err, ERRV(EINVAL));
            assert_true(fg->guest_errors >= 1);
            assert_no_dsr(fg);
            fg_free(fg);
        }
    }
}

static void test_dsr_ring_page_bounds(void **state)
{
    FakeGuest *fg;

    (void)state;
    /* 2 and 129 pages are the documented bounds */
    fg = fg_new(NULL);
    assert_int_equal(fg_load_dsr_ex(fg, 20, 2, 129), 0);
    fg_free(fg);
    fg = fg_new(NULL);
    assert_int_equal(fg_load_dsr_ex(fg, 20, 129, 2), 0);
    fg_free(fg);
}

typedef enum {
    BAD_DSR_ZERO,
    BAD_DSR_UNALIGNED,
    BAD_DSR_OUTSIDE,
    BAD_CMD_SLOT_UNALIGNED,
    BAD_RESP_SLOT_ZERO,
    BAD_PDIR_UNALIGNED,
    BAD_PDIR_OUTSIDE,
    BAD_PDIR_ZERO,
    BAD_TABLE_ZERO,
    BAD_TABLE_OUTSIDE,
    BAD_PAGE_UNALIGNED,
    BAD_PAGE_ZERO,
    BAD_RESERVED,
    BAD_CAPS_UNWRITABLE,
} BadDsr;

static uint32_t load_bad_dsr(BadDsr kind)
{
    FakeGuest *fg = fg_new(NULL);
    struct pvrdma_device_shared_region *dsr;
    uint64_t addr, *dir, *tbl;
    uint32_t err;

    assert_int_equal(fg_load_dsr_ex(fg, 20, 4, 4), 0);
    dsr = fg_ptr(fg, fg->dsr);
    addr = fg->dsr;
    dir = fg_ptr(fg, dsr->cq_ring_pages.pdir_dma);
    tbl = fg_ptr(fg, dir[0]);
    switch (kind) {
    case BAD_DSR_ZERO:
        addr = 0;
        break;
    case BAD_DSR_UNALIGNED:
        addr += 8;
        break;
    case BAD_DSR_OUTSIDE:
        addr = FG_BAD_ADDR;
        break;
    case BAD_CMD_SLOT_UNALIGNED:
        dsr->cmd_slot_dma += 0x10;
        break;
    case BAD_RESP_SLOT_ZERO:
        dsr->resp_slot_dma = 0;
        break;
    case BAD_PDIR_UNALIGNED:
        dsr->cq_ring_pages.pdir_dma += 0x800;
        break;
    case BAD_PDIR_OUTSIDE:
        dsr->cq_ring_pages.pdir_dma = FG_BAD_ADDR;
        break;
    case BAD_PDIR_ZERO:
        dsr->async_ring_pages.pdir_dma = 0;
        break;
    case BAD_TABLE_ZERO:
        dir[0] = 0;
        break;
    case BAD_TABLE_OUTSIDE:
        dir[0] = FG_BAD_ADDR;
        break;
    case BAD_PAGE_UNALIGNED:
        tbl[2] += 4;
        break;
    case BAD_PAGE_ZERO:
        tbl[3] = 0;
        break;
    case BAD_RESERVED:
        dsr->async_ring_pages.reserved = 1;
        break;
    case BAD_CAPS_UNWRITABLE:
        fg->ro_page = fg->dsr;
        break;
    }
    fg_clear_caps(fg);
    fg_reg_write(fg, PVRDMA_REG_DSRLOW, (uint32_t)addr);
    fg_reg_write(fg, PVRDMA_REG_DSRHIGH, (uint32_t)(addr >> 32));
    err = fg_reg_read(fg, PVRDMA_REG_ERR);
    assert_true(fg->guest_errors >= 1);
    assert_no_dsr(fg);
    fg_free(fg);
    return err;
}

static void test_dsr_bad_addresses(void **state)
{
    (void)state;
    assert_int_equal(load_bad_dsr(BAD_DSR_ZERO), ERRV(EINVAL));
    assert_int_equal(load_bad_dsr(BAD_DSR_UNALIGNED), ERRV(EINVAL));
    assert_int_equal(load_bad_dsr(BAD_DSR_OUTSIDE), ERRV(EFAULT));
    assert_int_equal(load_bad_dsr(BAD_CMD_SLOT_UNALIGNED), ERRV(EINVAL));
    assert_int_equal(load_bad_dsr(BAD_RESP_SLOT_ZERO), ERRV(EINVAL));
    assert_int_equal(load_bad_dsr(BAD_PDIR_UNALIGNED), ERRV(EINVAL));
    assert_int_equal(load_bad_dsr(BAD_PDIR_OUTSIDE), ERRV(EFAULT));
    assert_int_equal(load_bad_dsr(BAD_PDIR_ZERO), ERRV(EINVAL));
    assert_int_equal(load_bad_dsr(BAD_TABLE_ZERO), ERRV(EINVAL));
    assert_int_equal(load_bad_dsr(BAD_TABLE_OUTSIDE), ERRV(EFAULT));
    assert_int_equal(load_bad_dsr(BAD_PAGE_UNALIGNED), ERRV(EINVAL));
    assert_int_equal(load_bad_dsr(BAD_PAGE_ZERO), ERRV(EINVAL));
    assert_int_equal(load_bad_dsr(BAD_RESERVED), ERRV(EINVAL));
    assert_int_equal(load_bad_dsr(BAD_CAPS_UNWRITABLE), ERRV(EFAULT));
}

static void test_dsr_pinned_quota(void **state)
{
    PvrdmaCoreConfig cfg;
    FakeGuest *fg;

    (void)state;
    pvrdma_core_default_config(&cfg);
    cfg.max_pinned_pages = 258;
    fg = fg_new(&cfg);
    assert_int_equal(fg_load_dsr_ex(fg, 20, 129, 129), 0);
    fg_free(fg);
    cfg.max_pinned_pages = 259;
    fg = fg_new(&cfg);
    assert_int_equal(fg_load_dsr_ex(fg, 20, 129, 129), 0);
    /* the second load replaced the first, no double charge */
    assert_int_equal(fg_load_dsr_ex(fg, 20, 129, 129), 0);
    fg_free(fg);
}

static void test_dsr_reload_drops_objects(void **state)
{
    FakeGuest *fg = new_setup();
    uint32_t pd, pd2;

    (void)state;
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(pd, 0);
    assert_int_equal(fg_create_pd(fg, 0, &pd2), 0);
    assert_int_equal(pd2, 1);
    fg_setup(fg);
    assert_int_equal(fg_destroy_pd(fg, pd2), -EINVAL);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(pd, 0);
    fg_free(fg);
}

/* ---- command channel entry ----------------------------------------------- */

static void test_request_before_dsr(void **state)
{
    FakeGuest *fg = fg_new(NULL);

    (void)state;
    fg_reg_write(fg, PVRDMA_REG_IMR, 0);
    fg_reg_write(fg, PVRDMA_REG_REQUEST, 0);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ERR), ERRV(EINVAL));
    assert_int_equal(fg->dma_reads, 0);
    assert_int_equal(fg->dma_writes, 0);
    assert_int_equal(fg->notify[0], 1);
    assert_int_equal(fg->guest_errors, 1);
    /* ACTIVATE without DSR fails too */
    fg_reg_write(fg, PVRDMA_REG_CTL, PVRDMA_DEVICE_CTL_ACTIVATE);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ERR), ERRV(EINVAL));
    fg_reg_write(fg, PVRDMA_REG_CTL, PVRDMA_DEVICE_CTL_UNQUIESCE);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ERR), 0);
    fg_reg_write(fg, PVRDMA_REG_CTL, 3);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ERR), ERRV(EINVAL));
    /* doorbells without DSR: ignored, no DMA */
    pvrdma_core_uar_write(fg->core, 4, PVRDMA_DB_CQ_ARM | 0);
    assert_int_equal(fg->dma_reads + fg->dma_writes, 0);
    assert_int_equal(pvrdma_core_notify_cq(fg->core, 0, true), -ENODEV);
    fg_free(fg);
}

static void test_request_bad_value(void **state)
{
    FakeGuest *fg = new_setup();
    unsigned r = fg->dma_reads;

    (void)state;
    fg_reg_write(fg, PVRDMA_REG_REQUEST, 1);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ERR), ERRV(EINVAL));
    assert_int_equal(fg->dma_reads, r);
    assert_int_equal(fg->notify[0], 1);
    fg_free(fg);
}

static void test_vector0_once_per_request(void **state)
{
    FakeGuest *fg = new_setup();
    struct pvrdma_cmd_hdr unknown = { .cmd = 21 };
    struct pvrdma_cmd_query_pkey bad = { .hdr.cmd = PVRDMA_CMD_QUERY_PKEY };
    uint32_t pd;

    (void)state;
    assert_int_equal(fg->notify[0], 0);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(fg->notify[0], 1);
    assert_int_equal(fg_cmd(fg, &unknown, sizeof(unknown), NULL), -EINVAL);
    assert_int_equal(fg->notify[0], 2);
    assert_int_equal(fg_cmd(fg, &bad, sizeof(bad), NULL), -EINVAL);
    assert_int_equal(fg->notify[0], 3);
    assert_int_equal(fg_destroy_pd(fg, pd), 0);
    assert_int_equal(fg->notify[0], 4);
    assert_int_equal(fg->notify[1] + fg->notify[2], 0);
    assert_int_equal(fg->trace_cmds, 4);
    fg_free(fg);
}

static void test_response_unwritable_rolls_back(void **state)
{
    FakeGuest *fg = fg_new(NULL);
    FgBackend *be = fg_use_recording_backend(fg);
    struct pvrdma_device_shared_region *dsr;
    struct pvrdma_cmd_create_pd c = { .hdr.cmd = PVRDMA_CMD_CREATE_PD };

    (void)state;
    assert_int_equal(fg_load_dsr_ex(fg, 20, 4, 4), 0);
    (void)dsr;
    fg->ro_page = fg->resp_slot;
    memcpy(fg_ptr(fg, fg->cmd_slot), &c, sizeof(c));
    fg_reg_write(fg, PVRDMA_REG_REQUEST, 0);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ERR), ERRV(EFAULT));
    assert_int_equal(be->pd_create, 1);
    assert_int_equal(be->pd_destroy, 1);
    fg_free(fg);
}

/* ---- CTL RESET ----------------------------------------------------------- */

static void test_ctl_reset_destroys_everything(void **state)
{
    FakeGuest *fg = fg_new(NULL);
    FgBackend *be = fg_use_recording_backend(fg);
    uint32_t uc, pd, upd, cq, mr, qp, srq, r, w;

    (void)state;
    fg_setup(fg);
    assert_int_equal(fg_create_uc(fg, 1, &uc), 0);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(fg_create_pd(fg, uc, &upd), 0);
    assert_int_equal(fg_create_cq(fg, 0, 64, &cq), 0);
    assert_int_equal(fg_create_dma_mr(fg, pd, &mr, NULL), 0);
    assert_int_equal(fg_create_qp(fg, PVRDMA_QPT_RC, pd, cq, &qp, NULL), 0);
    assert_int_equal(fg_create_srq(fg, upd, 16, 1, &srq), 0);
    assert_int_equal(fg_bind_gid(fg, 0), 0);

    fg_reg_write(fg, PVRDMA_REG_CTL, PVRDMA_DEVICE_CTL_RESET);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ERR), 0);
    assert_int_equal(be->qp_destroy, 1);
    assert_int_equal(be->srq_destroy, 1);
    assert_int_equal(be->mr_deregister, 1);
    assert_int_equal(be->cq_destroy, 1);
    assert_int_equal(be->pd_destroy, 2);
    assert_int_equal(be->gid_unbind, 1);
    assert_true(be->reset >= 1);

    /* no DMA at all afterwards */
    r = fg->dma_reads;
    w = fg->dma_writes;
    fg_reg_write(fg, PVRDMA_REG_REQUEST, 0);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ERR), ERRV(EINVAL));
    pvrdma_core_uar_write(fg->core, 4, PVRDMA_DB_CQ_ARM | cq);
    pvrdma_core_uar_write(fg->core, 0, PVRDMA_DB_QP_SEND | qp);
    assert_int_equal(pvrdma_core_post_async_event(fg->core, 9, 1), -ENODEV);
    assert_int_equal(pvrdma_core_notify_cq(fg->core, cq, true), -ENODEV);
    assert_int_equal(fg->dma_reads, r);
    assert_int_equal(fg->dma_writes, w);
    assert_int_equal(fg->db_qp_send, 0);
    assert_int_equal(be->submit, 0);

    /* a new DSR starts from scratch: old handles are dead */
    fg_setup(fg);
    assert_int_equal(fg_destroy_qp(fg, qp), -EINVAL);
    assert_int_equal(fg_destroy_cq(fg, cq), -EINVAL);
    assert_int_equal(fg_destroy_mr(fg, mr), -EINVAL);
    assert_int_equal(fg_destroy_srq(fg, srq), -EINVAL);
    assert_int_equal(fg_destroy_pd(fg, pd), -EINVAL);
    assert_int_equal(fg_destroy_uc(fg, uc), -EINVAL);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(pd, 0);
    fg_free(fg);
}

/* ---- interrupts ---------------------------------------------------------- */

static void test_imr_masking_and_latch(void **state)
{
    FakeGuest *fg = fg_new(NULL);
    uint32_t pd;

    (void)state;
    assert_int_equal(fg_load_dsr_ex(fg, 20, 4, 4), 0);
    /* IMR is all-ones after reset: the response is latched, not sent */
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(fg->notify[0], 0);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ICR), PVRDMA_ICR_RESPONSE);
    /* read-to-clear: nothing left to deliver */
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ICR), 0);
    fg_reg_write(fg, PVRDMA_REG_IMR, 0);
    assert_int_equal(fg->notify[0], 0);

    /* latched while masked, delivered once on unmask */
    fg_reg_write(fg, PVRDMA_REG_IMR, PVRDMA_ICR_RESPONSE);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(fg->notify[0], 0);
    fg_reg_write(fg, PVRDMA_REG_IMR, 0);
    assert_int_equal(fg->notify[0], 1);
    assert_int_equal(fg_reg_read(fg, PVRDMA_REG_ICR), 0);

    /* per-vector: masking async does not mask responses */
    fg_reg_write(fg, PVRDMA_REG_IMR, PVRDMA_ICR_ASYNC);
    assert_int_equal(pvrdma_core_post_async_event(fg->core,
                         PVRDMA_EQE_TYPE_PORT_ACTIVE, 1), 0);
    assert_int_equal(fg->notify[1], 0);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(fg->notify[0], 2);
    /* unmasking an unrelated bit delivers nothing */
    fg_reg_write(fg, PVRDMA_REG_IMR, PVRDMA_ICR_ASYNC | PVRDMA_ICR_CQ);
    assert_int_equal(fg->notify[1], 0);
    fg_reg_write(fg, PVRDMA_REG_IMR, 0xFFFFFFF8);
    assert_int_equal(fg->notify[1], 1);
    assert_int_equal(fg->notify[2], 0);
    fg_free(fg);
}

/* ---- async event ring ---------------------------------------------------- */

static uint64_t async_slot_addr(FakeGuest *fg, uint32_t slot)
{
    return fg->async_pages[1 + slot * 8 / 4096] + (slot * 8) % 4096;
}

static void test_async_ring_wrap(void **state)
{
    FakeGuest *fg = new_setup();
    uint64_t st = fg->async_pages[0];
    uint32_t i;

    (void)state;
    /* Linux geometry: N = 1536, only 512 slots usable, indices 0..1023 */
    for (i = 0; i < 512; i++) {
        assert_int_equal(pvrdma_core_post_async_event(fg->core, 1, i), 0);
    }
    assert_int_equal(fg_read32(fg, st + 8), 512);
    assert_int_equal(fg->notify[1], 512);
    assert_int_equal(pvrdma_core_post_async_event(fg->core, 1, 999),
                     -ENOSPC);
    assert_int_equal(fg->notify[1], 512);
    for (i = 0; i < 512; i++) {
        struct pvrdma_eqe *e = fg_ptr(fg, async_slot_addr(fg, i));

        assert_int_equal(e->type, 1);
        assert_int_equal(e->info, i);
    }
    /* nothing beyond the first element page */
    assert_int_equal(fg_read32(fg, fg->async_pages[2]), 0);

    /* consumer catches up; the next 512 land in slots 0..511 again */
    fg_write32(fg, st + 12, 512);
    for (i = 0; i < 512; i++) {
        assert_int_equal(pvrdma_core_post_async_event(fg->core, 2,
                                                      1000 + i), 0);
    }
    /* index 1023 + 1 wraps to 0 */
    assert_int_equal(fg_read32(fg, st + 8), 0);
    for (i = 0; i < 512; i++) {
        struct pvrdma_eqe *e = fg_ptr(fg, async_slot_addr(fg, i));

        assert_int_equal(e->type, 2);
        assert_int_equal(e->info, 1000 + i);
    }
    assert_int_equal(pvrdma_core_post_async_event(fg->core, 1, 1),
                     -ENOSPC);
    fg_write32(fg, st + 12, 0);
    assert_int_equal(pvrdma_core_post_async_event(fg->core, 3, 77), 0);
    assert_int_equal(fg_read32(fg, st + 8), 1);
    assert_int_equal(((struct pvrdma_eqe *)
                      fg_ptr(fg, async_slot_addr(fg, 0)))->info, 77);
    assert_int_equal(fg->notify[1], 1025);

    /* a hostile cons_head is refused, not followed */
    fg_write32(fg, st + 12, 0xFFFFFFFF);
    assert_int_equal(pvrdma_core_post_async_event(fg->core, 1, 1), -EINVAL);
    fg_write32(fg, st + 12, 0x400);
    assert_int_equal(pvrdma_core_post_async_event(fg->core, 1, 1), -EINVAL);
    assert_int_equal(fg->notify[1], 1025);
    fg_free(fg);
}

static void test_async_ring_pow2(void **state)
{
    FakeGuest *fg = fg_new(NULL);
    uint64_t st;
    uint32_t i;

    (void)state;
    /* 3 pages: N = 1024 (power of two), capacity N, indices 0..2047 */
    assert_int_equal(fg_load_dsr_ex(fg, 20, 3, 4), 0);
    fg_reg_write(fg, PVRDMA_REG_IMR, 0);
    st = fg->async_pages[0];
    for (i = 0; i < 1024; i++) {
        assert_int_equal(pvrdma_core_post_async_event(fg->core, 4, i), 0);
    }
    assert_int_equal(fg_read32(fg, st + 8), 1024);
    assert_int_equal(pvrdma_core_post_async_event(fg->core, 4, 0), -ENOSPC);
    assert_int_equal(((struct pvrdma_eqe *)
                      fg_ptr(fg, fg->async_pages[2] + 4088))->info, 1023);
    fg_write32(fg, st + 12, 1024);
    for (i = 0; i < 1024; i++) {
        assert_int_equal(pvrdma_core_post_async_event(fg->core, 4, i), 0);
    }
    assert_int_equal(fg_read32(fg, st + 8), 0);
    fg_free(fg);
}

/* ---- CQ notification ring and CQ doorbells ------------------------------- */

static void cq_doorbell(FakeGuest *fg, uint32_t page, uint32_t val)
{
    pvrdma_core_uar_write(fg->core, (uint64_t)page * 4096 + 4, val);
}

static void test_cq_arm_one_shot(void **state)
{
    FakeGuest *fg = new_setup();
    uint64_t st = fg->cq_pages[0];
    uint32_t cq, cq2;

    (void)state;
    assert_int_equal(fg_create_cq(fg, 0, 64, &cq), 0);
    assert_int_equal(fg_create_cq(fg, 0, 64, &cq2), 0);
    /* not armed: no notification */
    assert_int_equal(pvrdma_core_notify_cq(fg->core, cq, false), 0);
    assert_int_equal(fg->notify[2], 0);

    cq_doorbell(fg, 0, PVRDMA_DB_CQ_ARM | cq);
    assert_int_equal(pvrdma_core_notify_cq(fg->core, cq, false), 1);
    assert_int_equal(fg->notify[2], 1);
    assert_int_equal(fg_read32(fg, st + 8), 1);
    assert_int_equal(fg_read32(fg, fg->cq_pages[1]), cq);
    /* one shot */
    assert_int_equal(pvrdma_core_notify_cq(fg->core, cq, false), 0);
    assert_int_equal(pvrdma_core_notify_cq(fg->core, cq, true), 0);
    assert_int_equal(fg->notify[2], 1);

    /* ARM_SOL: only solicited (or error) completions */
    cq_doorbell(fg, 0, PVRDMA_DB_CQ_ARM_SOL | cq2);
    assert_int_equal(pvrdma_core_notify_cq(fg->core, cq2, false), 0);
    assert_int_equal(pvrdma_core_notify_cq(fg->core, cq2, true), 1);
    assert_int_equal(fg_read32(fg, fg->cq_pages[1] + 4), cq2);
    assert_int_equal(pvrdma_core_notify_cq(fg->core, cq2, true), 0);

    /* ARM then ARM_SOL keeps the wider ARM */
    cq_doorbell(fg, 0, PVRDMA_DB_CQ_ARM | cq);
    cq_doorbell(fg, 0, PVRDMA_DB_CQ_ARM_SOL | cq);
    assert_int_equal(pvrdma_core_notify_cq(fg->core, cq, false), 1);

    /* POLL alone does not arm */
    cq_doorbell(fg, 0, PVRDMA_DB_CQ_POLL | cq);
    assert_int_equal(pvrdma_core_notify_cq(fg->core, cq, true), 0);
    assert_int_equal(fg->notify[2], 3);
    assert_int_equal(fg_read32(fg, st + 8), 3);

    /* bad CQ doorbells are guest errors and arm nothing */
    fg->guest_errors = 0;
    cq_doorbell(fg, 0, PVRDMA_DB_CQ_ARM | 77);
    cq_doorbell(fg, 0, cq);
    cq_doorbell(fg, 0, (1u << 24) | PVRDMA_DB_CQ_ARM | cq);
    assert_int_equal(fg->guest_errors, 3);
    assert_int_equal(pvrdma_core_notify_cq(fg->core, cq, true), 0);
    assert_int_equal(pvrdma_core_notify_cq(fg->core, 77, true), -EINVAL);
    /* destroyed CQ */
    assert_int_equal(fg_destroy_cq(fg, cq2), 0);
    cq_doorbell(fg, 0, PVRDMA_DB_CQ_ARM | cq2);
    assert_int_equal(fg->guest_errors, 4);
    fg_free(fg);
}

/* Arms are what a glue with deferred doorbells must run at once. */
static void test_doorbell_arms_cq(void **state)
{
    (void)state;
    assert_true(pvrdma_core_doorbell_arms_cq(4, PVRDMA_DB_CQ_ARM | 3));
    assert_true(pvrdma_core_doorbell_arms_cq(2 * 4096 + 4,
                                             PVRDMA_DB_CQ_ARM_SOL | 3));
    assert_true(pvrdma_core_doorbell_arms_cq(4, PVRDMA_DB_CQ_POLL |
                                                PVRDMA_DB_CQ_ARM | 3));
    assert_false(pvrdma_core_doorbell_arms_cq(4, PVRDMA_DB_CQ_POLL | 3));
    /* the same bits on the QP and SRQ doorbells mean SEND / RECV */
    assert_false(pvrdma_core_doorbell_arms_cq(0, PVRDMA_DB_QP_SEND | 3));
    assert_false(pvrdma_core_doorbell_arms_cq(8, PVRDMA_DB_SRQ_RECV | 3));
}

static void test_cq_notify_ring_wrap(void **state)
{
    FakeGuest *fg = new_setup();
    uint64_t st = fg->cq_pages[0];
    uint32_t cq, i, prod = 0;

    (void)state;
    assert_int_equal(fg_create_cq(fg, 0, 1, &cq), 0);
    /* N = 3072: indices 0..2047, slots 0..1023 (first element page) */
    for (i = 0; i < 2048 + 3; i++) {
        uint32_t slot = prod & 0xBFF;

        cq_doorbell(fg, 0, PVRDMA_DB_CQ_ARM | cq);
        assert_int_equal(pvrdma_core_notify_cq(fg->core, cq, false), 1);
        assert_true(slot < 1024);
        assert_int_equal(fg_read32(fg, fg->cq_pages[1] + slot * 4), cq);
        prod = (prod + 1) & 0x17FF;
        assert_int_equal(fg_read32(fg, st + 8), prod);
        if (i == 2047) {
            assert_int_equal(prod, 0);
        }
        fg_write32(fg, st + 12, prod);      /* consumer keeps up */
    }
    assert_int_equal(fg->notify[2], 2048 + 3);

    /* consumer stalls: 1024 outstanding fill it */
    for (i = 0; i < 1024; i++) {
        cq_doorbell(fg, 0, PVRDMA_DB_CQ_ARM | cq);
        assert_int_equal(pvrdma_core_notify_cq(fg->core, cq, false), 1);
    }
    cq_doorbell(fg, 0, PVRDMA_DB_CQ_ARM | cq);
    assert_int_equal(pvrdma_core_notify_cq(fg->core, cq, false), -ENOSPC);
    assert_int_equal(fg->notify[2], 2048 + 3 + 1024);
    fg_free(fg);
}

static void test_cq_notify_masked(void **state)
{
    FakeGuest *fg = new_setup();
    uint32_t cq;

    (void)state;
    assert_int_equal(fg_create_cq(fg, 0, 1, &cq), 0);
    fg_reg_write(fg, PVRDMA_REG_IMR, PVRDMA_ICR_CQ);
    cq_doorbell(fg, 0, PVRDMA_DB_CQ_ARM | cq);
    assert_int_equal(pvrdma_core_notify_cq(fg->core, cq, false), 1);
    assert_int_equal(fg->notify[2], 0);
    assert_int_equal(fg_read32(fg, fg->cq_pages[1]), cq);
    fg_reg_write(fg, PVRDMA_REG_IMR, 0);
    assert_int_equal(fg->notify[2], 1);
    fg_free(fg);
}

/* ---- QP / SRQ doorbells and context isolation ---------------------------- */

static void test_doorbells_and_isolation(void **state)
{
    FakeGuest *fg = fg_new(NULL);
    uint32_t pd, cq, qp, uc, upd, ucq, uqp, srq, sqp;
    struct pvrdma_cmd_create_qp c;
    union pvrdma_cmd_resp r;

    (void)state;
    fg_setup(fg);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(fg_create_cq(fg, 0, 64, &cq), 0);
    assert_int_equal(fg_create_qp(fg, PVRDMA_QPT_RC, pd, cq, &qp, NULL), 0);
    assert_int_equal(fg_create_uc(fg, 3, &uc), 0);
    assert_int_equal(fg_create_pd(fg, uc, &upd), 0);
    assert_int_equal(fg_create_cq(fg, uc, 64, &ucq), 0);
    assert_int_equal(fg_create_qp(fg, PVRDMA_QPT_UD, upd, ucq, &uqp, NULL),
                     0);
    assert_int_equal(fg_create_srq(fg, upd, 16, 2, &srq), 0);
    fg_qp_req(fg, &c, PVRDMA_QPT_RC, upd, ucq, ucq, 16, 2);
    c.is_srq = 1;
    c.srq_handle = srq;
    c.max_recv_wr = 0;
    c.max_recv_sge = 0;
    c.total_chunks = 1 + c.send_chunks;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), 0);
    sqp = r.create_qp_resp_v2.qp_handle;
    fg->guest_errors = 0;

    /*
     * kernel QP on the kernel page (a SEND doorbell in RESET is accepted
     * and logged: its WQEs wait for RTS)
     */
    pvrdma_core_uar_write(fg->core, 0, PVRDMA_DB_QP_SEND | qp);
    assert_int_equal(fg->db_qp_send, 1);
    assert_int_equal(fg->db_last_handle, qp);
    pvrdma_core_uar_write(fg->core, 0, PVRDMA_DB_QP_RECV | qp);
    assert_int_equal(fg->db_qp_recv, 1);
    pvrdma_core_uar_write(fg->core, 0, PVRDMA_DB_QP_RECV |
                          PVRDMA_DB_QP_SEND | qp);
    assert_int_equal(fg->db_qp_send, 2);
    assert_int_equal(fg->db_qp_recv, 2);
    /* user QP on its context's page */
    pvrdma_core_uar_write(fg->core, 3 * 4096, PVRDMA_DB_QP_SEND | uqp);
    assert_int_equal(fg->db_qp_send, 3);
    assert_int_equal(fg->db_last_handle, uqp);
    pvrdma_core_uar_write(fg->core, 3 * 4096 + 8, PVRDMA_DB_SRQ_RECV | srq);
    assert_int_equal(fg->db_srq, 1);
    cq_doorbell(fg, 3, PVRDMA_DB_CQ_POLL | ucq);
    assert_int_equal(fg->db_cq_poll, 1);
    /* the three SEND doorbells on QPs in RESET */
    assert_int_equal(fg->guest_errors, 3);
    fg->guest_errors = 0;

    /* everything below is refused with a guest error */
    pvrdma_core_uar_write(fg->core, 0, PVRDMA_DB_QP_SEND | uqp);
    pvrdma_core_uar_write(fg->core, 3 * 4096, PVRDMA_DB_QP_SEND | qp);
    pvrdma_core_uar_write(fg->core, 4 * 4096, PVRDMA_DB_QP_SEND | uqp);
    pvrdma_core_uar_write(fg->core, 3 * 4096, uqp);
    pvrdma_core_uar_write(fg->core, 3 * 4096, (1u << 29) | uqp);
    pvrdma_core_uar_write(fg->core, 3 * 4096, PVRDMA_DB_QP_RECV | sqp);
    pvrdma_core_uar_write(fg->core, 0, PVRDMA_DB_QP_SEND | 999);
    pvrdma_core_uar_write(fg->core, 8, PVRDMA_DB_SRQ_RECV | srq);
    pvrdma_core_uar_write(fg->core, 3 * 4096 + 8, srq);
    cq_doorbell(fg, 0, PVRDMA_DB_CQ_POLL | ucq);
    pvrdma_core_uar_write(fg->core, 0xC, PVRDMA_DB_QP_SEND | qp);
    pvrdma_core_uar_write(fg->core, 2, PVRDMA_DB_QP_SEND | qp);
    pvrdma_core_uar_write(fg->core, 256 * 4096, PVRDMA_DB_QP_SEND | qp);
    pvrdma_core_uar_write(fg->core, ~0ull, PVRDMA_DB_QP_SEND | qp);
    assert_int_equal(fg->guest_errors, 14);
    assert_int_equal(fg->db_qp_send, 3);
    assert_int_equal(fg->db_qp_recv, 2);
    assert_int_equal(fg->db_srq, 1);
    assert_int_equal(fg->db_cq_poll, 1);
    /* the SRQ QP may still ring SEND (in RESET: accepted and logged) */
    pvrdma_core_uar_write(fg->core, 3 * 4096, PVRDMA_DB_QP_SEND | sqp);
    assert_int_equal(fg->db_qp_send, 4);
    assert_int_equal(fg->guest_errors, 15);

    /* destroyed QP */
    assert_int_equal(fg_destroy_qp(fg, qp), 0);
    pvrdma_core_uar_write(fg->core, 0, PVRDMA_DB_QP_SEND | qp);
    assert_int_equal(fg->db_qp_send, 4);
    assert_int_equal(fg->guest_errors, 16);
    fg_free(fg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_defaults),
        cmocka_unit_test(test_config_ranges),
        cmocka_unit_test(test_regs_reset_values),
        cmocka_unit_test(test_uar_clock_before_dsr),
        cmocka_unit_test(test_dsr_valid_caps),
        cmocka_unit_test(test_dsr_caps_no_mw),
        cmocka_unit_test(test_dsr_caps_backend_objects),
        cmocka_unit_test(test_dsr_caps_no_modify_mr),
        cmocka_unit_test(test_dsr_bad_num_pages),
        cmocka_unit_test(test_dsr_ring_page_bounds),
        cmocka_unit_test(test_dsr_bad_addresses),
        cmocka_unit_test(test_dsr_pinned_quota),
        cmocka_unit_test(test_dsr_reload_drops_objects),
        cmocka_unit_test(test_request_before_dsr),
        cmocka_unit_test(test_request_bad_value),
        cmocka_unit_test(test_vector0_once_per_request),
        cmocka_unit_test(test_response_unwritable_rolls_back),
        cmocka_unit_test(test_ctl_reset_destroys_everything),
        cmocka_unit_test(test_imr_masking_and_latch),
        cmocka_unit_test(test_async_ring_wrap),
        cmocka_unit_test(test_async_ring_pow2),
        cmocka_unit_test(test_cq_arm_one_shot),
        cmocka_unit_test(test_doorbell_arms_cq),
        cmocka_unit_test(test_cq_notify_ring_wrap),
        cmocka_unit_test(test_cq_notify_masked),
        cmocka_unit_test(test_doorbells_and_isolation),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
