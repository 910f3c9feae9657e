/*
 * libFuzzer harness: the device state a migration stream carries
 * (hw/pvrdma/pvrdma_state.c) loaded into a fresh device on the software
 * fabric.  A load either fails (the device left as after a reset) or
 * gives a device whose state saves again; nothing may crash, hang, leak
 * or trip a sanitizer.  Built with -DFUZZ_STATE_SEEDS it writes seeds
 * instead: the saved states of devices with every kind of object.
 *
 *   make -C tests/fuzz run-state SECONDS=N
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fake_guest.h"
#include "fake_verbs.h"
#include "pvrdma_core_int.h"
#include "pvrdma_fabric.h"

#define ALL_ACCESS  (PVRDMA_ACCESS_LOCAL_WRITE | PVRDMA_ACCESS_REMOTE_WRITE | \
                     PVRDMA_ACCESS_REMOTE_READ | PVRDMA_ACCESS_REMOTE_ATOMIC)

/* One device for the whole run, port 1 of its own fabric. */
static FakeGuest *fs_device(void)
{
    static FakeGuest *fg;
    PvrdmaFabricPort *port;
    char *msg = NULL;

    if (!fg) {
        fg = fg_new(NULL);
        port = pvrdma_fabric_port_new(pvrdma_fabric_new(), fg->core, 1,
                                      &msg);
        g_assert(port);
        pvrdma_core_set_backend(fg->core, &pvrdma_fabric_backend_ops, port);
    }
    return fg;
}

#ifdef FUZZ_STATE_SEEDS

static void write_seed(const char *dir, const char *name, FakeGuest *fg)
{
    char *err = NULL, *path = g_strdup_printf("%s/%s", dir, name);
    size_t len;
    uint8_t *s = pvrdma_core_state_save(fg->core, &len, &err);

    g_assert(s);
    g_assert(g_file_set_contents(path, (const char *)s, len, NULL));
    g_free(s);
    g_free(path);
}

int main(int argc, char **argv)
{
    static const FvConnOpts opts = {
        .access = ALL_ACCESS, .min_rnr_timer = 1, .rnr_retry = 7,
        .retry_cnt = 7,
    };
    FakeGuest *fg = fs_device();
    uint32_t pd, ctx, upd, ucq, mw, mwkey;
    FvCq *cq;
    FvQp *a, *b, *ud, *ini, *tgt;
    FvMr *mr;
    FvFrmr *f;
    FvSrq *srq, *xsrq;
    struct pvrdma_sq_wqe_hdr h = { .wr_id = 9, .opcode = PVRDMA_WR_SEND };
    struct pvrdma_sge sg;
    uint32_t xrcd;

    if (argc != 2) {
        fprintf(stderr, "usage: gen_state_seeds DIR\n");
        return 2;
    }
    write_seed(argv[1], "bare", fg);
    fg_setup(fg);
    write_seed(argv[1], "dsr", fg);
    g_assert(fg_bind_gid(fg, 0) == 0);
    g_assert(fg_create_pd(fg, 0, &pd) == 0);
    g_assert(fg_create_uc(fg, 3, &ctx) == 0);
    g_assert(fg_create_pd(fg, ctx, &upd) == 0);
    g_assert(fg_create_cq(fg, ctx, 8, &ucq) == 0);
    cq = fv_cq_new(fg, 0, 64);
    srq = fv_srq_new(fg, pd, 16, 2, 4);
    mr = fv_mr_new(fg, pd, 0x7f0000000000ull, 3 * 4096,
                   ALL_ACCESS | PVRDMA_ACCESS_MW_BIND);
    a = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, NULL, 16, 4, false);
    b = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, srq, 16, 4, false);
    fv_connect(a, b, &opts);
    ud = fv_qp_new(fg, PVRDMA_QPT_UD, pd, cq, cq, NULL, 8, 2, true);
    g_assert(fg_qp_to_rts(fg, ud->handle, PVRDMA_QPT_UD) == 0);
    write_seed(argv[1], "objects", fg);
    /* XRC: a domain, its SRQ, a TGT QP bound to it by one SEND. */
    xrcd = fv_xrcd_new(fg);
    xsrq = fv_xrc_srq_new(fg, pd, xrcd, cq, 8, 1);
    tgt = fv_xrc_tgt_new(fg, xrcd);
    ini = fv_qp_new(fg, PVRDMA_QPT_XRC_INI, pd, cq, NULL, NULL, 8, 1, false);
    g_assert(fv_qp_rts(ini, tgt->qpn, 0, &opts) == 0);
    g_assert(fv_qp_rts(tgt, ini->qpn, 0, &opts) == 0);
    sg = (struct pvrdma_sge) { .addr = 0x7f0000000000ull, .length = 64,
                               .lkey = mr->lkey };
    fv_srq_post(xsrq, 8, &sg, 1);
    fv_srq_ring(xsrq);
    h.num_sge = 1;
    h.reserved = xsrq->handle;
    fv_post_send(ini, &h, &sg, 1);
    fv_ring_sq(ini);
    write_seed(argv[1], "xrc", fg);
    f = fv_frmr_new(fg, pd, 4);
    fv_post_reg_mr(a, f, 1, 0x5000000, 2, 8000, ALL_ACCESS,
                   (f->key & ~0xffu) | 0x33);
    g_assert(fv_mw_new(fg, pd, PVRDMA_MR_FLAG_MW_TYPE1, &mw, &mwkey) == 0);
    fv_post_bind_mw(a, 2, (mwkey & ~0xffu) | 0x44, mr->lkey,
                    0x7f0000000000ull + 100, 4000,
                    PVRDMA_ACCESS_REMOTE_WRITE);
    g_assert(fv_qp_modify_state(ud, PVRDMA_QPS_ERR) == 0);
    write_seed(argv[1], "bound", fg);
    g_free(cq);
    g_free(srq);
    g_free(mr);
    g_free(a);
    g_free(b);
    g_free(ud);
    g_free(f);
    g_free(xsrq);
    g_free(ini);
    g_free(tgt);
    return 0;
}

#else

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FakeGuest *fg = fs_device();
    char *err = NULL;

    if (pvrdma_core_state_load(fg->core, data, size, &err)) {
        size_t len;
        uint8_t *again = pvrdma_core_state_save(fg->core, &len, &err);

        g_assert(again);
        g_free(again);
        /* What a resumed guest would run first (rings are fake memory). */
        pvrdma_core_state_resume(fg->core);
    } else {
        g_assert(err);
    }
    g_free(err);
    pvrdma_core_reset(fg->core);
    return 0;
}

#endif
