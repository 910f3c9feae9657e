/*
 * Device-side cost of the RC data path, without QEMU or a guest: one
 * fake guest, two connected RC QPs on the software fabric, N SEND/RECV
 * ping-pongs of 4 KiB and N RDMA WRITEs of 256 KiB through the doorbells.
 * Run it under `valgrind --tool=callgrind` and compare the instruction
 * counts of two builds (tests/bench/Makefile, target core-ops-ab): unlike
 * wall time on these machines, instruction counts repeat exactly.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>
#include <glib.h>

#include "fake_guest.h"
#include "fake_verbs.h"

#define VA_A        0x10000000ull
#define VA_B        0x20000000ull
#define MR_LEN      (256u << 10)
#define ALL_ACCESS  (PVRDMA_ACCESS_LOCAL_WRITE | PVRDMA_ACCESS_REMOTE_WRITE | \
                     PVRDMA_ACCESS_REMOTE_READ | PVRDMA_ACCESS_REMOTE_ATOMIC)

static void run(void **state)
{
    const FvConnOpts o = { .access = ALL_ACCESS, .min_rnr_timer = 1,
                           .rnr_retry = 7, .retry_cnt = 7 };
    int n = atoi(getenv("BENCH_N") ? getenv("BENCH_N") : "2000");
    int w = getenv("BENCH_W") ? atoi(getenv("BENCH_W")) : n / 10;
    FakeGuest *fg = fg_new(NULL);
    uint32_t pd;
    FvCq *cqa, *cqb;
    FvQp *a, *b;
    FvMr *ma, *mb;
    struct pvrdma_cqe c;
    int i;

    (void)state;
#ifdef BENCH_JOIN_FABRIC
    fg_join_fabric(fg);
#endif
    fg_setup(fg);
    assert_int_equal(fg_bind_gid(fg, 0), 0);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    cqa = fv_cq_new(fg, 0, 64);
    cqb = fv_cq_new(fg, 0, 64);
    a = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cqa, cqa, NULL, 16, 4, true);
    b = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cqb, cqb, NULL, 16, 4, true);
    ma = fv_mr_new(fg, pd, VA_A, MR_LEN, ALL_ACCESS);
    mb = fv_mr_new(fg, pd, VA_B, MR_LEN, ALL_ACCESS);
    fv_connect(a, b, &o);
    fv_mr_fill(ma, VA_A, MR_LEN, 7);

    for (i = 0; i < n; i++) {
        struct pvrdma_sge s = { .addr = VA_A, .length = 4096,
                                .lkey = ma->lkey };
        struct pvrdma_sge r = { .addr = VA_B, .length = 4096,
                                .lkey = mb->lkey };
        struct pvrdma_sq_wqe_hdr h = { .wr_id = i, .num_sge = 1,
                                       .opcode = PVRDMA_WR_SEND };

        fv_post_recv(b, i, &r, 1);
        fv_ring_rq(b);
        fv_post_send(a, &h, &s, 1);
        fv_ring_sq(a);
        assert_true(fv_cq_poll(cqa, &c));
        assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
        assert_true(fv_cq_poll(cqb, &c));
        assert_int_equal(c.byte_len, 4096);
    }
    for (i = 0; i < w; i++) {
        struct pvrdma_sge s = { .addr = VA_A, .length = MR_LEN,
                                .lkey = ma->lkey };
        struct pvrdma_sq_wqe_hdr h = { .wr_id = i, .num_sge = 1,
                                       .opcode = PVRDMA_WR_RDMA_WRITE };

        h.wr.rdma.remote_addr = VA_B;
        h.wr.rdma.rkey = mb->rkey;
        fv_post_send(a, &h, &s, 1);
        fv_ring_sq(a);
        assert_true(fv_cq_poll(cqa, &c));
        assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    }
    assert_true(fv_mr_check(mb, VA_B, w ? MR_LEN : 4096, 7));
    printf("%d SEND/RECV of 4 KiB, %d RDMA WRITE of 256 KiB\n", n, w);
    fg_free(fg);
    g_free(cqa);
    g_free(cqb);
    g_free(a);
    g_free(b);
    g_free(ma);
    g_free(mb);
}

int main(void)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(run) };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
