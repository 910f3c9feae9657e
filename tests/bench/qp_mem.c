/*
 * Host memory the device holds per connected QP, without QEMU: a fake
 * guest (tests/unit/fake_guest.c) on the software fabric with 2N RC QPs
 * (send and receive queues of WR work requests of one SGE: perftest's
 * ib_write_bw -q N -t WR on each side), connected in pairs, and a 64-byte
 * WRITE completed on each so that every QP has carried traffic.  The host heap (glibc's mallinfo2: in-use chunks and mmapped
 * blocks) before the QPs and after, less the test's own per-QP records,
 * divided by the 2N QPs:
 *
 *   qp_mem [-n N] [-w WR]
 *   R scale device qp_heap N 1 VALUE B      (bytes of host heap per QP)
 *   R scale device qp_rings N 1 VALUE B     (guest memory of its rings)
 *
 * The rings themselves live in guest RAM (the guest's pages, mapped by
 * the device, not copied): the second line says how much of that a QP of
 * this shape takes, for scale.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <inttypes.h>
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>

#include "fake_guest.h"
#include "fake_verbs.h"
#include "pvrdma_core_int.h"

static size_t heap_now(void)
{
    struct mallinfo2 mi = mallinfo2();

    return mi.uordblks + mi.hblkhd;
}

static FakeGuest *guest(uint32_t n, uint32_t wr)
{
    PvrdmaCoreConfig cfg;
    FakeGuest *fg;

    pvrdma_core_default_config(&cfg);
    cfg.max_qp = MAX(2 * n + 2, 64);
    cfg.max_cqe = MAX(n * wr, 4096);
    fg = fg_new(&cfg);
    fg_join_fabric(fg);
    fg_setup(fg);
    g_assert(fg_bind_gid(fg, 0) == 0);
    return fg;
}

int main(int argc, char **argv)
{
    static const FvConnOpts opts = {
        .access = PVRDMA_ACCESS_LOCAL_WRITE | PVRDMA_ACCESS_REMOTE_WRITE,
        .min_rnr_timer = 1, .rnr_retry = 7, .retry_cnt = 7,
    };
    uint32_t n = 4096, wr = 32, i, pd;
    uint64_t rate_msgs = 0;
    FakeGuest *fg;
    FvCq *cqa, *cqb;
    FvMr *ma, *mb;
    FvQp **qa, **qb;
    uint64_t rings;
    size_t before, after;
    int opt;

    while ((opt = getopt(argc, argv, "n:w:r:")) != -1) {
        switch (opt) {
        case 'r':
            rate_msgs = strtoull(optarg, NULL, 0);
            break;
        case 'n':
            n = strtoul(optarg, NULL, 0);
            break;
        case 'w':
            wr = strtoul(optarg, NULL, 0);
            break;
        default:
            fprintf(stderr, "usage: qp_mem [-n QPS] [-w WR]\n");
            return 2;
        }
    }
    if (n < 1 || n > 16384 || wr < 1 || wr > 256) {
        fprintf(stderr, "qp_mem: -n 1..16384, -w 1..256\n");
        return 2;
    }
    fg = guest(n, wr);
    g_assert(fg_create_pd(fg, 0, &pd) == 0);
    cqa = fv_cq_new(fg, 0, n * wr);  /* perftest: tx-depth x QPs */
    cqb = fv_cq_new(fg, 0, 256);     /* polled after each WRITE */
    ma = fv_mr_new(fg, pd, 0x10000000ull, 4096, opts.access);
    mb = fv_mr_new(fg, pd, 0x20000000ull, 4096, opts.access);
    qa = g_new0(FvQp *, n);
    qb = g_new0(FvQp *, n);
    before = heap_now();
    for (i = 0; i < n; i++) {
        qa[i] = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cqa, cqa, NULL, wr, 1,
                          false);
        qb[i] = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cqb, cqb, NULL, wr, 1,
                          false);
        fv_connect(qa[i], qb[i], &opts);
    }
    /* One WRITE on every QP, each way, all completed. */
    for (i = 0; i < 2 * n; i++) {
        FvQp *q = i < n ? qa[i] : qb[i - n];
        FvMr *src = i < n ? ma : mb, *dst = i < n ? mb : ma;
        struct pvrdma_sge sg = { .addr = src->va, .length = 64,
                                 .lkey = src->lkey };
        struct pvrdma_sq_wqe_hdr h;
        struct pvrdma_cqe c;

        memset(&h, 0, sizeof(h));
        h.wr_id = i;
        h.opcode = PVRDMA_WR_RDMA_WRITE;
        h.send_flags = PVRDMA_WR_FLAG_SIGNALED;
        h.num_sge = 1;
        h.wr.rdma.remote_addr = dst->va + 64;
        h.wr.rdma.rkey = dst->rkey;
        fv_post_send(q, &h, &sg, 1);
        fv_ring_sq(q);
        if (!fv_cq_poll(i < n ? cqa : cqb, &c) || c.status != 0 ||
            c.wr_id != i) {
            fprintf(stderr, "qp_mem: WRITE %u did not complete\n", i);
            return 1;
        }
    }
    after = heap_now();
    if (rate_msgs) {
        /*
         * The device's own cost per message as QPs multiply: 64-byte
         * WRITEs posted round robin over the first q QPs (8 each, then
         * a doorbell, as perftest posts), every 8th signaled, completed
         * before the next round.
         */
        uint32_t qs[] = { 1, n }, k, j, w;

        for (k = 0; k < 2; k++) {
            uint64_t done = 0;
            gint64 t0 = g_get_monotonic_time();

            while (done < rate_msgs) {
                for (j = 0; j < qs[k]; j++) {
                    for (w = 0; w < 8; w++) {
                        struct pvrdma_sge sg = { .addr = ma->va, .length = 64,
                                                 .lkey = ma->lkey };
                        struct pvrdma_sq_wqe_hdr h;

                        memset(&h, 0, sizeof(h));
                        h.wr_id = w;
                        h.opcode = PVRDMA_WR_RDMA_WRITE;
                        h.send_flags = w == 7 ? PVRDMA_WR_FLAG_SIGNALED : 0;
                        h.num_sge = 1;
                        h.wr.rdma.remote_addr = mb->va + 64;
                        h.wr.rdma.rkey = mb->rkey;
                        fv_post_send(qa[j], &h, &sg, 1);
                    }
                    fv_ring_sq(qa[j]);
                    for (;;) {
                        struct pvrdma_cqe c;

                        if (fv_cq_poll(cqa, &c)) {
                            g_assert(c.status == 0);
                            break;
                        }
                    }
                    done += 8;
                }
            }
            printf("qp_mem: %u QPs round robin: %.2f M WRITEs/s\n", qs[k],
                   done / (double)(g_get_monotonic_time() - t0));
        }
    }
    /* The ring state page, then the send and receive rings. */
    rings = 4096 * (1 + (qa[0]->sq_n * qa[0]->sq_wqe + 4095) / 4096 +
                    (qa[0]->rq_n * qa[0]->rq_wqe + 4095) / 4096);
    /* The test's own records of its QPs (fake_verbs.c) are not the device's. */
    after -= 2 * (size_t)n * (sizeof(FvQp) + 16);
    printf("qp_mem: %u connected RC QP pairs, %u WRs each queue: %zu bytes of "
           "host heap per QP; its rings %" PRIu64 " bytes of guest memory\n",
           n, wr, (after - before) / (2 * n),
           rings);
    printf("R scale device qp_heap %u 1 %zu B\n", n,
           (after - before) / (2 * n));
    printf("R scale device qp_rings %u 1 %" PRIu64 " B\n", n,
           rings);
    for (i = 0; i < n; i++) {
        g_free(qa[i]);
        g_free(qb[i]);
    }
    g_free(qa);
    g_free(qb);
    g_free(cqa);
    g_free(cqb);
    g_free(ma);
    g_free(mb);
    fg_free(fg);
    return 0;
}
