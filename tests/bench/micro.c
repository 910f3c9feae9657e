/*
 * Device microbenchmark: what the device core costs per work request on
 * the software fabric, natively (no QEMU, no guest; the fake guest of the
 * unit tests rings the doorbells and polls the CQs).  For each operation:
 * host nanoseconds and CPU nanoseconds per operation, the median of
 * several rounds, and for the large ones the bandwidth next to a
 * single-core memcpy of the same size measured in the same run (the
 * limit a copying device has).  Also: a CQ_POLL doorbell on an empty CQ,
 * and CREATE_MR + DESTROY_MR of 1 GiB (262144 pages).
 *
 *   micro [-s]     -s: smoke mode, a few iterations of each (CI)
 *
 * The operations complete within the doorbell on this path, so the time
 * of one is also its doorbell-to-CQE time.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>

#include "fake_guest.h"
#include "fake_verbs.h"
#include "pvrdma_core_int.h"

#define VA_A        0x10000000ull
#define VA_B        0x20000000ull
#define VA_C        0x30000000ull
#define MR_LEN      (1u << 20)
#define ALL_ACCESS  (PVRDMA_ACCESS_LOCAL_WRITE | PVRDMA_ACCESS_REMOTE_WRITE | \
                     PVRDMA_ACCESS_REMOTE_READ | PVRDMA_ACCESS_REMOTE_ATOMIC)
#define GIB_PAGES   (1u << 18)

typedef struct Bench {
    FakeGuest *fg;
    FvCq *cqa, *cqb;
    FvQp *a, *b;
    FvMr *ma, *mb, *mc;      /* mc: contiguous pages */
    uint32_t pd;
} Bench;

typedef void (*OpFn)(Bench *b, uint32_t len, uint64_t i);

static bool smoke;

static double clock_ns(clockid_t id)
{
    struct timespec t;

    clock_gettime(id, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void expect(FvCq *cq, uint32_t status, uint32_t len)
{
    struct pvrdma_cqe c;

    assert_true(fv_cq_poll(cq, &c));
    assert_int_equal(c.status, status);
    assert_int_equal(c.byte_len, len);
}

static struct pvrdma_sge sge(FvMr *mr, uint64_t va, uint32_t len)
{
    struct pvrdma_sge s = { .addr = va, .length = len, .lkey = mr->lkey };

    return s;
}

/* SEND of @len into a receive posted just before: both CQEs polled. */
static void op_send(Bench *b, uint32_t len, uint64_t i)
{
    struct pvrdma_sge s = sge(b->ma, VA_A, len), r = sge(b->mb, VA_B, len);
    struct pvrdma_sq_wqe_hdr h = { .wr_id = i, .num_sge = 1,
                                   .opcode = PVRDMA_WR_SEND,
                                   .send_flags = PVRDMA_WR_FLAG_SIGNALED };

    fv_post_recv(b->b, i, &r, 1);
    fv_ring_rq(b->b);
    fv_post_send(b->a, &h, &s, 1);
    fv_ring_sq(b->a);
    expect(b->cqa, PVRDMA_WC_SUCCESS, len);
    expect(b->cqb, PVRDMA_WC_SUCCESS, len);
}

/* RDMA @op of @len bytes between local @mr at @va and the scattered mb. */
static void op_rdma_at(Bench *b, uint32_t op, FvMr *mr, uint64_t va,
                       uint32_t len, uint64_t i)
{
    struct pvrdma_sge s = sge(mr, va, len);
    struct pvrdma_sq_wqe_hdr h = { .wr_id = i, .num_sge = 1, .opcode = op,
                                   .send_flags = PVRDMA_WR_FLAG_SIGNALED };

    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = b->mb->rkey;
    fv_post_send(b->a, &h, &s, 1);
    fv_ring_sq(b->a);
    expect(b->cqa, PVRDMA_WC_SUCCESS, len);
}

static void op_rdma(Bench *b, uint32_t op, uint32_t len, uint64_t i)
{
    op_rdma_at(b, op, b->ma, VA_A, len, i);
}

/*
 * 1 MiB between a contiguous buffer and a scattered one (one page at a
 * time on that side, a single run on the other): WRITE from the
 * contiguous MR, READ into it.
 */
static void op_mixed(Bench *b, uint32_t op, uint64_t i)
{
    op_rdma_at(b, op, b->mc, VA_C, MR_LEN, i);
}

static void op_write_mixed(Bench *b, uint32_t len, uint64_t i)
{
    (void)len;
    op_mixed(b, PVRDMA_WR_RDMA_WRITE, i);
}

static void op_read_mixed(Bench *b, uint32_t len, uint64_t i)
{
    (void)len;
    op_mixed(b, PVRDMA_WR_RDMA_READ, i);
}

static void op_write(Bench *b, uint32_t len, uint64_t i)
{
    op_rdma(b, PVRDMA_WR_RDMA_WRITE, len, i);
}

static void op_read(Bench *b, uint32_t len, uint64_t i)
{
    op_rdma(b, PVRDMA_WR_RDMA_READ, len, i);
}

static void op_atomic(Bench *b, uint32_t op, uint64_t i)
{
    struct pvrdma_sge s = sge(b->ma, VA_A, 8);
    struct pvrdma_sq_wqe_hdr h = { .wr_id = i, .num_sge = 1, .opcode = op,
                                   .send_flags = PVRDMA_WR_FLAG_SIGNALED };

    h.wr.atomic.remote_addr = VA_B;
    h.wr.atomic.rkey = b->mb->rkey;
    h.wr.atomic.compare_add = 1;
    h.wr.atomic.swap = i;
    fv_post_send(b->a, &h, &s, 1);
    fv_ring_sq(b->a);
    expect(b->cqa, PVRDMA_WC_SUCCESS, 8);
}

static void op_fetch_add(Bench *b, uint32_t len, uint64_t i)
{
    (void)len;
    op_atomic(b, PVRDMA_WR_ATOMIC_FETCH_AND_ADD, i);
}

static void op_cmp_swap(Bench *b, uint32_t len, uint64_t i)
{
    (void)len;
    op_atomic(b, PVRDMA_WR_ATOMIC_CMP_AND_SWP, i);
}

/* A poller's CQ_POLL doorbell on an empty CQ. */
static void op_empty_poll(Bench *b, uint32_t len, uint64_t i)
{
    (void)len;
    (void)i;
    fv_cq_poll_doorbell(b->cqa);
}

/* CREATE_MR + DESTROY_MR of 1 GiB: @pdir lists GIB_PAGES pages. */
static uint64_t gib_pdir;

static void op_reg_gib(Bench *b, uint32_t len, uint64_t i)
{
    struct pvrdma_cmd_create_mr c = { .hdr.cmd = PVRDMA_CMD_CREATE_MR };
    union pvrdma_cmd_resp r;

    (void)len;
    c.start = 0x40000000ull * (1 + i % 4);
    c.length = (uint64_t)GIB_PAGES << 12;
    c.pdir_dma = gib_pdir;
    c.pd_handle = b->pd;
    c.access_flags = ALL_ACCESS;
    c.nchunks = GIB_PAGES;
    assert_int_equal(fg_cmd(b->fg, &c, sizeof(c), &r), 0);
    assert_int_equal(fg_destroy_mr(b->fg, r.create_mr_resp.mr_handle), 0);
}

/*
 * The pinning a zero-copy backend (host verbs) does for a user MR: every
 * page of 1 GiB of contiguous guest memory mapped and recorded, then
 * released.  @gib_mr is the MR's handle.
 */
static uint32_t gib_mr;

static void op_pin_gib(Bench *b, uint32_t len, uint64_t i)
{
    PvrdmaMr *mr = pvrdma_table_lookup(&b->fg->core->mr_tbl, gib_mr);

    (void)len;
    (void)i;
    assert_int_equal(pvrdma_core_mr_pin(b->fg->core, mr), 0);
    pvrdma_core_mr_unpin(b->fg->core, mr);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;

    return a < b ? -1 : a > b;
}

/* Median over @reps rounds of @n calls of wall and CPU ns per call. */
static void measure(Bench *b, OpFn fn, uint32_t len, int n, int reps,
                    double *wall, double *cpu)
{
    double w[16], c[16];
    int r, i;

    g_assert(reps <= 16);
    for (i = 0; i < n / 10 + 1; i++) {
        fn(b, len, i);                      /* warm up */
    }
    for (r = 0; r < reps; r++) {
        double w0 = clock_ns(CLOCK_MONOTONIC);
        double c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);

        for (i = 0; i < n; i++) {
            fn(b, len, i);
        }
        w[r] = (clock_ns(CLOCK_MONOTONIC) - w0) / n;
        c[r] = (clock_ns(CLOCK_PROCESS_CPUTIME_ID) - c0) / n;
    }
    qsort(w, reps, sizeof(double), cmp_double);
    qsort(c, reps, sizeof(double), cmp_double);
    *wall = w[reps / 2];
    *cpu = c[reps / 2];
}

/* Single-core memcpy of @len bytes: ns per copy (median). */
static double memcpy_ns(uint32_t len, int n, int reps)
{
    uint8_t *src = g_malloc(len), *dst = g_malloc(len);
    double w[16];
    int r, i;

    memset(src, 0x5a, len);
    memset(dst, 0, len);
    for (r = 0; r < reps; r++) {
        double w0 = clock_ns(CLOCK_MONOTONIC);

        for (i = 0; i < n; i++) {
            memcpy(dst, src, len);
            __asm__ volatile("" : : "r"(dst) : "memory");
        }
        w[r] = (clock_ns(CLOCK_MONOTONIC) - w0) / n;
    }
    g_assert(dst[len - 1] == 0x5a);
    g_free(src);
    g_free(dst);
    qsort(w, reps, sizeof(double), cmp_double);
    return w[reps / 2];
}

static void report(const char *name, uint32_t len, double wall, double cpu,
                   double copy)
{
    printf("%-26s %10.0f ns %10.0f ns", name, wall, cpu);
    if (len >= 4096) {
        printf(" %8.2f GB/s", len / wall);
        if (copy > 0) {
            printf(" %5.0f%% of memcpy", 100.0 * copy / wall);
        }
    }
    printf("\n");
}

static void run(void **state)
{
    const FvConnOpts o = { .access = ALL_ACCESS, .min_rnr_timer = 1,
                           .rnr_retry = 7, .retry_cnt = 7 };
    static const struct {
        const char *name;
        OpFn fn;
        uint32_t len;
        int n;                  /* iterations per round */
    } ops[] = {
        { "SEND 64 B", op_send, 64, 20000 },
        { "SEND 4 KiB", op_send, 4096, 20000 },
        { "RDMA WRITE 64 B", op_write, 64, 20000 },
        { "RDMA WRITE 4 KiB", op_write, 4096, 20000 },
        { "RDMA WRITE 1 MiB", op_write, MR_LEN, 500 },
        { "RDMA READ 4 KiB", op_read, 4096, 20000 },
        { "RDMA READ 1 MiB", op_read, MR_LEN, 500 },
        { "RDMA WRITE 1 MiB contig", op_write_mixed, MR_LEN, 500 },
        { "RDMA READ 1 MiB contig", op_read_mixed, MR_LEN, 500 },
        { "ATOMIC FETCH_ADD", op_fetch_add, 0, 20000 },
        { "ATOMIC CMP_SWAP", op_cmp_swap, 0, 20000 },
        { "empty CQ_POLL doorbell", op_empty_poll, 0, 50000 },
        { "MR 1 GiB create+destroy", op_reg_gib, 0, 3 },
        { "MR 1 GiB pin+unpin", op_pin_gib, 0, 3 },
    };
    int reps = smoke ? 1 : 7;
    double copy_4k = memcpy_ns(4096, smoke ? 10 : 20000, reps);
    double copy_1m = memcpy_ns(MR_LEN, smoke ? 2 : 500, reps);
    Bench b = { 0 };
    uint64_t *pages;
    unsigned i;

    (void)state;
    b.fg = fg_new(NULL);
    b.fg->windows = true;      /* as QEMU's glue offers (dma_window) */
    fg_join_fabric(b.fg);
    fg_setup(b.fg);
    assert_int_equal(fg_bind_gid(b.fg, 0), 0);
    assert_int_equal(fg_create_pd(b.fg, 0, &b.pd), 0);
    b.cqa = fv_cq_new(b.fg, 0, 64);
    b.cqb = fv_cq_new(b.fg, 0, 64);
    b.a = fv_qp_new(b.fg, PVRDMA_QPT_RC, b.pd, b.cqa, b.cqa, NULL, 16, 4,
                    false);
    b.b = fv_qp_new(b.fg, PVRDMA_QPT_RC, b.pd, b.cqb, b.cqb, NULL, 16, 4,
                    false);
    b.ma = fv_mr_new(b.fg, b.pd, VA_A, MR_LEN, ALL_ACCESS);
    b.mb = fv_mr_new(b.fg, b.pd, VA_B, MR_LEN, ALL_ACCESS);
    b.mc = fv_mr_new_contig(b.fg, b.pd, VA_C, MR_LEN, ALL_ACCESS);
    fv_connect(b.a, b.b, &o);
    fv_mr_fill(b.ma, VA_A, MR_LEN, 7);
    /* The 1 GiB MR: every entry the same few pages (only the list is read). */
    pages = g_new(uint64_t, GIB_PAGES);
    for (i = 0; i < GIB_PAGES; i++) {
        pages[i] = b.ma->pages[i % b.ma->npages];
    }
    gib_pdir = fg_build_pdir(b.fg, pages, GIB_PAGES);
    /* And 1 GiB of contiguous guest memory in an MR, to pin. */
    pages[0] = fg_alloc_pages(b.fg, GIB_PAGES);
    for (i = 1; i < GIB_PAGES; i++) {
        pages[i] = pages[0] + (uint64_t)i * 4096;
    }
    {
        struct pvrdma_cmd_create_mr c = { .hdr.cmd = PVRDMA_CMD_CREATE_MR };
        union pvrdma_cmd_resp r;

        c.start = 0x7000000000ull;
        c.length = (uint64_t)GIB_PAGES << 12;
        c.pdir_dma = fg_build_pdir(b.fg, pages, GIB_PAGES);
        c.pd_handle = b.pd;
        c.access_flags = ALL_ACCESS;
        c.nchunks = GIB_PAGES;
        assert_int_equal(fg_cmd(b.fg, &c, sizeof(c), &r), 0);
        gib_mr = r.create_mr_resp.mr_handle;
    }
    g_free(pages);

    printf("# device core on the software fabric, %s; median of %d\n",
           smoke ? "smoke mode" : "full run", reps);
    printf("%-26s %13s %13s\n", "operation", "host time", "CPU time");
    for (i = 0; i < G_N_ELEMENTS(ops); i++) {
        double wall, cpu;
        int n = smoke ? (ops[i].len >= MR_LEN ? 2 : 10) : ops[i].n;

        measure(&b, ops[i].fn, ops[i].len, n, reps, &wall, &cpu);
        if (ops[i].fn == op_write && ops[i].len == MR_LEN) {
            /* What was written arrived. */
            assert_true(fv_mr_check(b.mb, VA_B, MR_LEN, 7));
        }
        report(ops[i].name, ops[i].len, wall, cpu,
               ops[i].len == MR_LEN ? copy_1m :
               ops[i].len == 4096 ? copy_4k : 0);
    }
    report("memcpy 4 KiB (one core)", 4096, copy_4k, copy_4k, 0);
    report("memcpy 1 MiB (one core)", MR_LEN, copy_1m, copy_1m, 0);
    fg_free(b.fg);
    g_free(b.cqa);
    g_free(b.cqb);
    g_free(b.a);
    g_free(b.b);
    g_free(b.ma);
    g_free(b.mb);
    g_free(b.mc);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(run) };

    smoke = argc > 1 && !strcmp(argv[1], "-s");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
