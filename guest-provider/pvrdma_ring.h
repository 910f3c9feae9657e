/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * Ring index arithmetic shared with the device (spec §6.1).
 *
 * A ring of N entries (N a power of two) has two 32-bit indices in shared
 * memory, struct pvrdma_ring: prod_tail, written only by the producer, and
 * cons_head, written only by the consumer. Index values live in [0, 2N):
 * the low log2(N) bits select the slot, the next bit is a wrap bit, so a
 * full ring (prod == cons ^ N) is told apart from an empty one
 * (prod == cons).
 *
 * The other side's index is loaded with acquire semantics and our own index
 * is published with release semantics, so that entry contents are ordered
 * against the index that hands them over. The device is a DMA master, not
 * a CPU thread, so callers also issue the named udma barriers
 * (util/udma_barrier.h) at the hand-over points; on x86-64 these are a
 * compiler barrier (to device) and an lfence (from device).
 */
#ifndef __PVRDMA_RING_H__
#define __PVRDMA_RING_H__

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "pvrdma_dev_abi.h"

static inline _Atomic(uint32_t) *pvrdma_ring_atomic(uint32_t *idx)
{
	return (_Atomic(uint32_t) *)idx;
}

/* An index is valid when it lies in [0, 2N). */
static inline bool pvrdma_ring_idx_valid(uint32_t idx, uint32_t nelems)
{
	return !(idx & ~(2 * nelems - 1));
}

static inline uint32_t pvrdma_ring_slot(uint32_t idx, uint32_t nelems)
{
	return idx & (nelems - 1);
}

static inline uint32_t pvrdma_ring_next(uint32_t idx, uint32_t nelems)
{
	return (idx + 1) & (2 * nelems - 1);
}

/*
 * Consumer side: the slot at cons_head if the ring holds an entry. Returns
 * 1 and sets *slot when an entry is available, 0 when the ring is empty,
 * -1 when an index is out of range (ring state invalid). On 1, the entry
 * may be read after udma_from_device_barrier().
 */
static inline int pvrdma_ring_peek(struct pvrdma_ring *ring, uint32_t nelems,
				   uint32_t *slot)
{
	uint32_t prod = atomic_load_explicit(
		pvrdma_ring_atomic(&ring->prod_tail), memory_order_acquire);
	uint32_t cons = atomic_load_explicit(
		pvrdma_ring_atomic(&ring->cons_head), memory_order_relaxed);

	if (!pvrdma_ring_idx_valid(prod, nelems) ||
	    !pvrdma_ring_idx_valid(cons, nelems))
		return -1;
	if (prod == cons)
		return 0;

	*slot = pvrdma_ring_slot(cons, nelems);
	return 1;
}

/*
 * Consumer side, for a consumer that walks several entries before handing
 * them back: the indices of the occupied range [*cons, *prod). Returns 0,
 * or -1 when an index is out of range. The entries may be read after
 * udma_from_device_barrier().
 */
static inline int pvrdma_ring_used(struct pvrdma_ring *ring, uint32_t nelems,
				   uint32_t *cons, uint32_t *prod)
{
	*prod = atomic_load_explicit(pvrdma_ring_atomic(&ring->prod_tail),
				     memory_order_acquire);
	*cons = atomic_load_explicit(pvrdma_ring_atomic(&ring->cons_head),
				     memory_order_relaxed);

	if (!pvrdma_ring_idx_valid(*prod, nelems) ||
	    !pvrdma_ring_idx_valid(*cons, nelems))
		return -1;
	return 0;
}

/* Consumer side: hand n entries from cons_head back to the producer. */
static inline void pvrdma_ring_consume_n(struct pvrdma_ring *ring,
					 uint32_t nelems, uint32_t n)
{
	uint32_t cons = atomic_load_explicit(
		pvrdma_ring_atomic(&ring->cons_head), memory_order_relaxed);

	atomic_store_explicit(pvrdma_ring_atomic(&ring->cons_head),
			      (cons + n) & (2 * nelems - 1),
			      memory_order_release);
}

/* Consumer side: hand the entry at cons_head back to the producer. */
static inline void pvrdma_ring_consume(struct pvrdma_ring *ring,
				       uint32_t nelems)
{
	pvrdma_ring_consume_n(ring, nelems, 1);
}

/*
 * Producer side: the free slot at prod_tail. Returns 1 and sets *slot when
 * there is room, 0 when the ring is full, -1 when an index is out of range.
 */
static inline int pvrdma_ring_reserve(struct pvrdma_ring *ring,
				      uint32_t nelems, uint32_t *slot)
{
	uint32_t prod = atomic_load_explicit(
		pvrdma_ring_atomic(&ring->prod_tail), memory_order_relaxed);
	uint32_t cons = atomic_load_explicit(
		pvrdma_ring_atomic(&ring->cons_head), memory_order_acquire);

	if (!pvrdma_ring_idx_valid(prod, nelems) ||
	    !pvrdma_ring_idx_valid(cons, nelems))
		return -1;
	if (prod == (cons ^ nelems))
		return 0;

	*slot = pvrdma_ring_slot(prod, nelems);
	return 1;
}

/*
 * Producer side: publish the entry at prod_tail. The caller has issued
 * udma_to_device_barrier() after writing the entry.
 */
static inline void pvrdma_ring_publish(struct pvrdma_ring *ring,
				       uint32_t nelems)
{
	uint32_t prod = atomic_load_explicit(
		pvrdma_ring_atomic(&ring->prod_tail), memory_order_relaxed);

	atomic_store_explicit(pvrdma_ring_atomic(&ring->prod_tail),
			      pvrdma_ring_next(prod, nelems),
			      memory_order_release);
}

/* Both indices back to 0 (a new ring, or a QP moved to RESET). */
static inline void pvrdma_ring_reset(struct pvrdma_ring *ring)
{
	atomic_store_explicit(pvrdma_ring_atomic(&ring->prod_tail), 0,
			      memory_order_relaxed);
	atomic_store_explicit(pvrdma_ring_atomic(&ring->cons_head), 0,
			      memory_order_relaxed);
}

#endif /* __PVRDMA_RING_H__ */
