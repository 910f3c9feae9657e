/*
 * PVRDMA ring index arithmetic (spec §6.1, §6.2) and ring geometry.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "pvrdma_dev_abi.h"
#include "pvrdma_ring.h"

static uint32_t pvrdma_ring_idx_mask(uint32_t n)
{
    /* 2N - 1, computed in 32 bits exactly as the driver does. */
    return (n << 1) - 1;
}

bool pvrdma_ring_idx_valid(uint32_t idx, uint32_t n)
{
    return (idx & ~pvrdma_ring_idx_mask(n)) == 0;
}

uint32_t pvrdma_ring_slot(uint32_t idx, uint32_t n)
{
    return idx & (n - 1);
}

uint32_t pvrdma_ring_next(uint32_t idx, uint32_t n)
{
    return (idx + 1) & pvrdma_ring_idx_mask(n);
}

bool pvrdma_ring_full(uint32_t prod, uint32_t cons, uint32_t n)
{
    return prod == (cons ^ n);
}

uint32_t pvrdma_ring_capacity(uint32_t n)
{
    uint32_t m = n - 1;

    if (n == 0) {
        return 0;
    }
    /* Lowest clear bit of N - 1; equals N when N is a power of two. */
    return (~m) & (m + 1);
}

int pvrdma_ring_can_produce(uint32_t prod, uint32_t cons, uint32_t n)
{
    uint32_t cap = pvrdma_ring_capacity(n);

    if (n == 0 || !pvrdma_ring_idx_valid(prod, n) ||
        !pvrdma_ring_idx_valid(cons, n)) {
        return -1;
    }
    if (pvrdma_ring_full(prod, cons, n)) {
        return 0;
    }
    /*
     * The reachable indices cycle with period 2 * capacity (a power of
     * two), so the distance is taken modulo that period with a mask.
     */
    if (((prod - cons) & ((cap << 1) - 1)) >= cap) {
        return 0;
    }
    return 1;
}

int pvrdma_ring_can_consume(uint32_t prod, uint32_t cons, uint32_t n)
{
    if (n == 0 || !pvrdma_ring_idx_valid(prod, n) ||
        !pvrdma_ring_idx_valid(cons, n)) {
        return -1;
    }
    return prod != cons;
}

bool pvrdma_ring_init(PvrdmaRing *ring, const uint64_t *pages,
                      uint32_t npages, uint32_t first_page,
                      uint32_t data_pages, uint32_t n, uint32_t elem_size,
                      uint32_t state_off)
{
    memset(ring, 0, sizeof(*ring));
    if (!pages || n == 0 || n > PVRDMA_RING_MAX_ELEMS ||
        elem_size == 0 || elem_size > PVRDMA_PAGE_SIZE ||
        (elem_size & (elem_size - 1)) != 0 ||
        state_off > PVRDMA_PAGE_SIZE - sizeof(struct pvrdma_ring)) {
        return false;
    }
    if (first_page == 0 || first_page > npages ||
        data_pages > npages - first_page) {
        return false;
    }
    if ((uint64_t)n * elem_size >
        (uint64_t)data_pages << PVRDMA_PAGE_SHIFT) {
        return false;
    }
    ring->pages = pages;
    ring->first_page = first_page;
    ring->data_pages = data_pages;
    ring->n = n;
    ring->elem_size = elem_size;
    ring->state_off = state_off;
    ring->prod = 0;
    return true;
}

uint64_t pvrdma_ring_prod_addr(const PvrdmaRing *ring)
{
    return ring->pages[0] + ring->state_off +
           offsetof(struct pvrdma_ring, prod_tail);
}

uint64_t pvrdma_ring_cons_addr(const PvrdmaRing *ring)
{
    return ring->pages[0] + ring->state_off +
           offsetof(struct pvrdma_ring, cons_head);
}

uint64_t pvrdma_ring_elem_addr(const PvrdmaRing *ring, uint32_t slot)
{
    uint64_t byte = (uint64_t)slot * ring->elem_size;
    uint64_t page = byte >> PVRDMA_PAGE_SHIFT;

    /* slot < n and n * elem_size <= data pages, checked at init */
    g_assert(slot < ring->n && page < ring->data_pages);
    return ring->pages[ring->first_page + page] +
           (byte & (PVRDMA_PAGE_SIZE - 1));
}
