/*
 * Unit tests: ring index arithmetic and geometry (hw/pvrdma/pvrdma_ring.c),
 * spec §6.1 / §6.2.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pvrdma_ring.h"

static void test_pow2_indices(void **state)
{
    uint32_t i;

    (void)state;
    for (i = 0; i < 16; i++) {
        assert_true(pvrdma_ring_idx_valid(i, 8));
    }
    assert_false(pvrdma_ring_idx_valid(16, 8));
    assert_false(pvrdma_ring_idx_valid(17, 8));
    assert_false(pvrdma_ring_idx_valid(0xffffffff, 8));
    assert_int_equal(pvrdma_ring_slot(9, 8), 1);
    assert_int_equal(pvrdma_ring_slot(7, 8), 7);
    assert_int_equal(pvrdma_ring_next(7, 8), 8);
    assert_int_equal(pvrdma_ring_next(15, 8), 0);
    assert_true(pvrdma_ring_full(8, 0, 8));
    assert_true(pvrdma_ring_full(3, 11, 8));
    assert_false(pvrdma_ring_full(7, 0, 8));
    assert_int_equal(pvrdma_ring_capacity(8), 8);
    assert_int_equal(pvrdma_ring_capacity(1), 1);
    /* N = 1: indices 0 and 1, slot always 0 */
    assert_true(pvrdma_ring_idx_valid(1, 1));
    assert_false(pvrdma_ring_idx_valid(2, 1));
    assert_int_equal(pvrdma_ring_next(1, 1), 0);
    assert_int_equal(pvrdma_ring_slot(1, 1), 0);
}

static void test_pow2_produce_consume(void **state)
{
    uint32_t prod = 0, cons = 0, n = 4, i;

    (void)state;
    assert_int_equal(pvrdma_ring_can_consume(prod, cons, n), 0);
    for (i = 0; i < 4; i++) {
        assert_int_equal(pvrdma_ring_can_produce(prod, cons, n), 1);
        prod = pvrdma_ring_next(prod, n);
    }
    assert_int_equal(prod, 4);
    assert_int_equal(pvrdma_ring_can_produce(prod, cons, n), 0);
    assert_int_equal(pvrdma_ring_can_consume(prod, cons, n), 1);
    cons = pvrdma_ring_next(cons, n);
    assert_int_equal(pvrdma_ring_can_produce(prod, cons, n), 1);
    prod = pvrdma_ring_next(prod, n);
    /* wrap of both indices through 2N */
    for (i = 0; i < 20; i++) {
        prod = pvrdma_ring_next(prod, n);
        cons = pvrdma_ring_next(cons, n);
        assert_true(prod < 8 && cons < 8);
        assert_int_equal(pvrdma_ring_can_produce(prod, cons, n), 0);
    }
    assert_int_equal(pvrdma_ring_can_produce(8, 0, n), -1);
    assert_int_equal(pvrdma_ring_can_produce(0, 8, n), -1);
    assert_int_equal(pvrdma_ring_can_consume(0, 0xffffffff, n), -1);
    assert_int_equal(pvrdma_ring_can_produce(1, 1, 0), -1);
}

/* Simulate the producer alone: which indices and slots are reached. */
static void check_nonpow2(uint32_t n, uint32_t mask, uint32_t period,
                          uint32_t slots)
{
    uint8_t *seen = calloc(n, 1);
    uint32_t idx = 0, i, distinct = 0;

    assert_int_equal((n << 1) - 1, mask);
    for (i = 0; i < 3 * period; i++) {
        uint32_t s = pvrdma_ring_slot(idx, n);

        assert_true(idx < period);
        assert_true(pvrdma_ring_idx_valid(idx, n));
        assert_true(s < n);
        if (!seen[s]) {
            seen[s] = 1;
            distinct++;
        }
        assert_false(pvrdma_ring_full(idx, 0, n) && idx != 0);
        idx = pvrdma_ring_next(idx, n);
    }
    assert_int_equal(distinct, slots);
    assert_int_equal(pvrdma_ring_next(period - 1, n), 0);
    assert_int_equal(pvrdma_ring_capacity(n), slots);
    free(seen);
}

static void test_dsr_async_1536(void **state)
{
    (void)state;
    check_nonpow2(1536, 0xBFF, 1024, 512);
    assert_false(pvrdma_ring_idx_valid(0x400, 1536));
    assert_true(pvrdma_ring_idx_valid(0x800, 1536));
    assert_int_equal(pvrdma_ring_slot(0x3FF, 1536), 0x1FF);
    assert_int_equal(pvrdma_ring_slot(0x200, 1536), 0);
    /* capacity, not the (unreachable) spec full test, stops the producer */
    assert_int_equal(pvrdma_ring_can_produce(511, 0, 1536), 1);
    assert_int_equal(pvrdma_ring_can_produce(512, 0, 1536), 0);
    assert_int_equal(pvrdma_ring_can_produce(0x3FF, 0x200, 1536), 1);
    assert_int_equal(pvrdma_ring_can_produce(0x0FF, 0x300, 1536), 1);
    assert_int_equal(pvrdma_ring_can_produce(0x100, 0x300, 1536), 0);
    assert_int_equal(pvrdma_ring_can_produce(0x0FF, 0x100, 1536), 0);
    assert_int_equal(pvrdma_ring_can_produce(0x400, 0, 1536), -1);
}

static void test_dsr_cq_3072(void **state)
{
    (void)state;
    check_nonpow2(3072, 0x17FF, 2048, 1024);
    assert_false(pvrdma_ring_idx_valid(0x800, 3072));
    assert_true(pvrdma_ring_idx_valid(0x1000, 3072));
    assert_int_equal(pvrdma_ring_can_produce(1023, 0, 3072), 1);
    assert_int_equal(pvrdma_ring_can_produce(1024, 0, 3072), 0);
    assert_int_equal(pvrdma_ring_can_produce(5, 2047, 3072), 1);
}

static void test_huge_indices(void **state)
{
    uint32_t n = 1u << 30;

    (void)state;
    assert_true(pvrdma_ring_idx_valid(0x7fffffff, n));
    assert_false(pvrdma_ring_idx_valid(0x80000000, n));
    assert_false(pvrdma_ring_idx_valid(0xffffffff, n));
    assert_int_equal(pvrdma_ring_next(0x7fffffff, n), 0);
    assert_int_equal(pvrdma_ring_slot(0x7fffffff, n), 0x3fffffff);
    assert_true(pvrdma_ring_full(0x40000000, 0, n));
    assert_int_equal(pvrdma_ring_can_produce(0x7fffffff, 0x3fffffff, n), 0);
    assert_int_equal(pvrdma_ring_can_produce(0x7fffffff, 0x40000000, n), 1);
    assert_int_equal(pvrdma_ring_can_consume(0xffffffff, 0, n), -1);
}

static void test_ring_geometry(void **state)
{
    uint64_t pages[4] = { 0x10000, 0x20000, 0x30000, 0x50000 };
    PvrdmaRing r;

    (void)state;
    /* 3 data pages x 64 CQEs */
    assert_true(pvrdma_ring_init(&r, pages, 4, 1, 3, 128, 64, 8));
    assert_int_equal(pvrdma_ring_prod_addr(&r), 0x10008);
    assert_int_equal(pvrdma_ring_cons_addr(&r), 0x1000c);
    assert_int_equal(pvrdma_ring_elem_addr(&r, 0), 0x20000);
    assert_int_equal(pvrdma_ring_elem_addr(&r, 63), 0x20000 + 63 * 64);
    assert_int_equal(pvrdma_ring_elem_addr(&r, 64), 0x30000);
    assert_int_equal(pvrdma_ring_elem_addr(&r, 127), 0x30000 + 63 * 64);
    /* QP-style: RQ starting after the SQ pages, tx state at 0 */
    assert_true(pvrdma_ring_init(&r, pages, 4, 3, 1, 32, 128, 0));
    assert_int_equal(pvrdma_ring_prod_addr(&r), 0x10000);
    assert_int_equal(pvrdma_ring_elem_addr(&r, 31), 0x50000 + 31 * 128);
    /* DSR async ring with Linux's 4 pages: N = 1536 x 8 bytes */
    assert_true(pvrdma_ring_init(&r, pages, 4, 1, 3, 1536, 8, 8));
    assert_int_equal(pvrdma_ring_elem_addr(&r, 1535), 0x50000 + 511 * 8);

    /* rejected geometries */
    assert_false(pvrdma_ring_init(&r, pages, 4, 1, 3, 193, 64, 8));
    assert_false(pvrdma_ring_init(&r, pages, 4, 1, 3, 0, 64, 8));
    assert_false(pvrdma_ring_init(&r, pages, 4, 1, 3, 8, 48, 8));
    assert_false(pvrdma_ring_init(&r, pages, 4, 1, 3, 8, 8192, 8));
    assert_false(pvrdma_ring_init(&r, pages, 4, 0, 3, 8, 64, 8));
    assert_false(pvrdma_ring_init(&r, pages, 4, 2, 3, 8, 64, 8));
    assert_false(pvrdma_ring_init(&r, pages, 4, 5, 0, 8, 64, 8));
    assert_false(pvrdma_ring_init(&r, pages, 4, 1, 3, 8, 64, 4092));
    assert_false(pvrdma_ring_init(&r, NULL, 4, 1, 3, 8, 64, 8));
    assert_false(pvrdma_ring_init(&r, pages, 4, 1, 3,
                                  PVRDMA_RING_MAX_ELEMS + 1, 1, 8));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pow2_indices),
        cmocka_unit_test(test_pow2_produce_consume),
        cmocka_unit_test(test_dsr_async_1536),
        cmocka_unit_test(test_dsr_cq_3072),
        cmocka_unit_test(test_huge_indices),
        cmocka_unit_test(test_ring_geometry),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
