/*
 * PVRDMA ring index arithmetic (spec §6.1, §6.2) and ring geometry.
 *
 * Every ring shared with the guest (the two DSR rings, CQs, QP send and
 * receive queues, SRQs) uses the same formulas as the Linux driver and the
 * rdma-core provider: indices live in [0, 2N), the slot is idx & (N - 1),
 * the next index is (idx + 1) & (2N - 1).  N need not be a power of two
 * (the DSR rings have N = 1536 and 3072), so the masks are applied exactly
 * as written and never replaced by '%'.
 *
 * The index helpers are pure functions; the element addressing helpers only
 * compute bus addresses from a copied-in page array, they never touch guest
 * memory.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_PVRDMA_RING_H
#define HW_PVRDMA_RING_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Largest element count any ring may have: 2N - 1 must fit in 32 bits with
 * a clear top bit so that 0xffffffff is always an invalid index.
 */
#define PVRDMA_RING_MAX_ELEMS           (1u << 30)

/* True if @idx is a valid index of a ring with @n elements (spec §6.1). */
bool pvrdma_ring_idx_valid(uint32_t idx, uint32_t n);
/* Slot of index @idx: idx & (n - 1). */
uint32_t pvrdma_ring_slot(uint32_t idx, uint32_t n);
/* Index after @idx: (idx + 1) & (2n - 1). */
uint32_t pvrdma_ring_next(uint32_t idx, uint32_t n);
/* Spec "full" test: prod == cons ^ n. */
bool pvrdma_ring_full(uint32_t prod, uint32_t cons, uint32_t n);

/*
 * Entries the producer can have outstanding before the consumer catches up.
 * For a power-of-two N this is N.  For other N the index sequence wraps
 * early (spec §6.2): the capacity is the lowest clear bit of N - 1 (512 for
 * N = 1536, 1024 for N = 3072) and running further ahead would overwrite
 * unread entries without the "full" test ever firing.
 */
uint32_t pvrdma_ring_capacity(uint32_t n);

/*
 * Producer check.  Returns -1 if either index is invalid, 0 if the ring is
 * full (spec test, or capacity reached), 1 if one element may be written at
 * pvrdma_ring_slot(prod, n).
 */
int pvrdma_ring_can_produce(uint32_t prod, uint32_t cons, uint32_t n);

/*
 * Consumer check.  Returns -1 if either index is invalid, 0 if empty, 1 if
 * the element at pvrdma_ring_slot(cons, n) may be read.
 */
int pvrdma_ring_can_consume(uint32_t prod, uint32_t cons, uint32_t n);

/*
 * A ring laid out in an object's page array (spec §4): page 0 holds the
 * ring state, elements start at page @first_page.  @pages belongs to the
 * owning object; the ring only borrows it.
 */
typedef struct PvrdmaRing {
    const uint64_t *pages;      /* bus addresses of the object's pages */
    uint32_t first_page;        /* page of element 0 */
    uint32_t data_pages;        /* pages holding elements */
    uint32_t n;                 /* element count (N) */
    uint32_t elem_size;         /* power of two, <= 4096 */
    uint32_t state_off;         /* struct pvrdma_ring inside page 0 */
    uint32_t prod;              /* device-owned index (device producers) */
} PvrdmaRing;

/*
 * Set up @ring.  Returns false (and leaves @ring unusable) if the geometry
 * is inconsistent: n outside 1..PVRDMA_RING_MAX_ELEMS, elem_size not a
 * power of two in 1..4096, n * elem_size larger than the data pages, or
 * the data pages beyond @npages.
 */
bool pvrdma_ring_init(PvrdmaRing *ring, const uint64_t *pages,
                      uint32_t npages, uint32_t first_page,
                      uint32_t data_pages, uint32_t n, uint32_t elem_size,
                      uint32_t state_off);

/* Bus addresses of the ring's prod_tail and cons_head. */
uint64_t pvrdma_ring_prod_addr(const PvrdmaRing *ring);
uint64_t pvrdma_ring_cons_addr(const PvrdmaRing *ring);

/* Bus address of element @slot (< n). */
uint64_t pvrdma_ring_elem_addr(const PvrdmaRing *ring, uint32_t slot);

#endif /* HW_PVRDMA_RING_H */
