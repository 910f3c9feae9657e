/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Ring index arithmetic shared with the device (spec §6.1).
 *
 * A ring of N elements keeps prod_tail and cons_head in [0, 2N): the low
 * bits select the slot, the next bit is the wrap bit.  The two rings in
 * the DSR have a non-power-of-two N (spec §6.2); the device applies
 * exactly these masks to them, so the driver must too (never use '%').
 *
 * The indices live in memory the device writes as well, so every value
 * read back is validated before use.
 */
#ifndef _PVRDMA_RING_H_
#define _PVRDMA_RING_H_

#include <linux/compiler.h>
#include <linux/errno.h>
#include <linux/types.h>
#include <asm/barrier.h>

#include "pvrdma_dev_abi.h"

static inline bool pvrdma_idx_valid(u32 idx, u32 n)
{
	return (idx & ~(2 * n - 1)) == 0;
}

static inline u32 pvrdma_idx_slot(u32 idx, u32 n)
{
	return idx & (n - 1);
}

static inline u32 pvrdma_idx_next(u32 idx, u32 n)
{
	return (idx + 1) & (2 * n - 1);
}

/**
 * pvrdma_ring_peek() - find the next element a consumer may read
 * @r: ring indices in shared memory
 * @n: number of ring elements
 * @slot: set to the slot of the next element
 *
 * Orders the element read after the prod_tail read (dma_rmb()).
 *
 * Return: 1 if an element is available, 0 if the ring is empty,
 * -EINVAL if either index is out of range (corrupt ring state).
 */
static inline int pvrdma_ring_peek(const struct pvrdma_ring *r, u32 n,
				   u32 *slot)
{
	u32 prod = READ_ONCE(r->prod_tail);
	u32 cons = READ_ONCE(r->cons_head);

	if (!pvrdma_idx_valid(prod, n) || !pvrdma_idx_valid(cons, n))
		return -EINVAL;
	if (prod == cons)
		return 0;
	*slot = pvrdma_idx_slot(cons, n);
	/* Read the element only after seeing the producer's index. */
	dma_rmb();
	return 1;
}

/**
 * pvrdma_ring_consume() - hand the element at cons_head back to the producer
 * @r: ring indices in shared memory
 * @n: number of ring elements
 *
 * Callers have validated cons_head with pvrdma_ring_peek().
 */
static inline void pvrdma_ring_consume(struct pvrdma_ring *r, u32 n)
{
	u32 cons = READ_ONCE(r->cons_head);

	/* Finish reading the element before the producer may reuse it. */
	dma_mb();
	WRITE_ONCE(r->cons_head, pvrdma_idx_next(cons, n));
}

/**
 * pvrdma_ring_space() - find the slot a producer may write next
 * @r: ring indices in shared memory
 * @n: number of ring elements (a power of two for producer rings)
 * @slot: set to the slot to fill
 *
 * Return: 1 if a slot is free, 0 if the ring is full, -EINVAL if the
 * ring state is corrupt.
 */
static inline int pvrdma_ring_space(const struct pvrdma_ring *r, u32 n,
				    u32 *slot)
{
	u32 prod = READ_ONCE(r->prod_tail);
	u32 cons = READ_ONCE(r->cons_head);

	if (!pvrdma_idx_valid(prod, n) || !pvrdma_idx_valid(cons, n))
		return -EINVAL;
	if (prod == (cons ^ n))
		return 0;
	*slot = pvrdma_idx_slot(prod, n);
	return 1;
}

/**
 * pvrdma_ring_produce() - publish the element written at prod_tail
 * @r: ring indices in shared memory
 * @n: number of ring elements
 */
static inline void pvrdma_ring_produce(struct pvrdma_ring *r, u32 n)
{
	u32 prod = READ_ONCE(r->prod_tail);

	/* The element must be visible before the index that publishes it. */
	dma_wmb();
	WRITE_ONCE(r->prod_tail, pvrdma_idx_next(prod, n));
}

#endif /* _PVRDMA_RING_H_ */
