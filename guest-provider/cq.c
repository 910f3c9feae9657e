// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Completion queues of the PVRDMA provider: the CQ ring lives in user
 * memory and is polled without a system call.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <util/util.h>

#include "pvrdma.h"
#include "verbs.h"

/* User CQ buffer: one ring-state page, then nelems CQEs (spec §8.1). */
static size_t pvrdma_cq_buf_size(size_t pg_sz, uint32_t nelems)
{
	return align(pg_sz + (size_t)nelems * sizeof(struct pvrdma_cqe),
		     pg_sz);
}

struct ibv_cq *pvrdma_create_cq(struct ibv_context *ibvctx, int ncqe,
				struct ibv_comp_channel *channel,
				int comp_vector)
{
	struct pvrdma_device *dev = to_pvrdma_dev(ibvctx->device);
	struct pvrdma_ucmd_create_cq_resp resp = {};
	struct pvrdma_ucmd_create_cq cmd = {};
	struct pvrdma_cq *cq;
	uint32_t nelems;
	int err;

	/* CREATE_CQ carries the buffer size in 32 bits (spec §9). */
	if (ncqe < 1 || ncqe > (UINT32_MAX - dev->pg_sz) /
				       (2 * sizeof(struct pvrdma_cqe))) {
		errno = EINVAL;
		return NULL;
	}
	nelems = roundup_pow_of_two(ncqe);

	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}

	err = pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	if (err)
		goto err_free_cq;

	cq->buf_size = pvrdma_cq_buf_size(dev->pg_sz, nelems);
	cq->buf = pvrdma_alloc_ring_buf(cq->buf_size);
	if (!cq->buf) {
		err = errno;
		goto err_destroy_lock;
	}
	cq->ring = &((struct pvrdma_ring_state *)cq->buf)->rx;
	cq->cqes = (struct pvrdma_cqe *)((uint8_t *)cq->buf + dev->pg_sz);

	cmd.buf_addr = (uintptr_t)cq->buf;
	cmd.buf_size = cq->buf_size;
	err = ibv_cmd_create_cq(ibvctx, nelems, channel, comp_vector,
				&cq->ibvcq, &cmd.ibv_cmd, sizeof(cmd),
				&resp.ibv_resp, sizeof(resp));
	if (err) {
		verbs_err(verbs_get_ctx(ibvctx), "CREATE_CQ failed: %d\n",
			  err);
		goto err_free_buf;
	}

	/*
	 * The kernel reports the device's ring size in cqe. poll_cq masks
	 * indices with it, so it must be a power of two that fits the buffer.
	 */
	if (cq->ibvcq.cqe < 1 || (uint32_t)cq->ibvcq.cqe > nelems ||
	    (cq->ibvcq.cqe & (cq->ibvcq.cqe - 1))) {
		verbs_err(verbs_get_ctx(ibvctx),
			  "CREATE_CQ returned a bad ring size %d for %u\n",
			  cq->ibvcq.cqe, nelems);
		err = EIO;
		goto err_destroy_cq;
	}
	cq->nelems = cq->ibvcq.cqe;
	cq->cqn = resp.cqn;

	return &cq->ibvcq;

err_destroy_cq:
	ibv_cmd_destroy_cq(&cq->ibvcq);
err_free_buf:
	pvrdma_free_ring_buf(cq->buf, cq->buf_size);
err_destroy_lock:
	pthread_spin_destroy(&cq->lock);
err_free_cq:
	free(cq);
	errno = err;
	return NULL;
}

int pvrdma_destroy_cq(struct ibv_cq *ibvcq)
{
	struct pvrdma_cq *cq = to_pvrdma_cq(ibvcq);
	int err;

	err = ibv_cmd_destroy_cq(ibvcq);
	if (err)
		return err;

	pvrdma_free_ring_buf(cq->buf, cq->buf_size);
	pthread_spin_destroy(&cq->lock);
	free(cq);
	return 0;
}

/* Completion opcodes (spec §8.4); a plain cast would misplace 6 and 7. */
static enum ibv_wc_opcode pvrdma_to_ibv_wc_opcode(uint32_t opcode)
{
	switch (opcode) {
	case PVRDMA_WC_SEND:
		return IBV_WC_SEND;
	case PVRDMA_WC_RDMA_WRITE:
		return IBV_WC_RDMA_WRITE;
	case PVRDMA_WC_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case PVRDMA_WC_COMP_SWAP:
		return IBV_WC_COMP_SWAP;
	case PVRDMA_WC_FETCH_ADD:
		return IBV_WC_FETCH_ADD;
	case PVRDMA_WC_BIND_MW:
		return IBV_WC_BIND_MW;
	case PVRDMA_WC_LSO:
		return IBV_WC_TSO;
	case PVRDMA_WC_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	case PVRDMA_WC_RECV:
		return IBV_WC_RECV;
	case PVRDMA_WC_RECV_RDMA_WITH_IMM:
		return IBV_WC_RECV_RDMA_WITH_IMM;
	default:
		/* No ibverbs equivalent; the kernel driver reports SEND too. */
		return IBV_WC_SEND;
	}
}

/* Completion flags (spec §8.4): bits 2 and 3 differ from ibverbs. */
static unsigned int pvrdma_to_ibv_wc_flags(uint32_t flags)
{
	unsigned int wc_flags = 0;

	if (flags & PVRDMA_WC_GRH)
		wc_flags |= IBV_WC_GRH;
	if (flags & PVRDMA_WC_WITH_IMM)
		wc_flags |= IBV_WC_WITH_IMM;
	if (flags & PVRDMA_WC_WITH_INVALIDATE)
		wc_flags |= IBV_WC_WITH_INV;
	if (flags & PVRDMA_WC_IP_CSUM_OK)
		wc_flags |= IBV_WC_IP_CSUM_OK;
	return wc_flags;
}

/* Status values are numerically those of ibverbs (spec §8.4). */
static enum ibv_wc_status pvrdma_to_ibv_wc_status(uint32_t status)
{
	if (status > PVRDMA_WC_GENERAL_ERR)
		return IBV_WC_GENERAL_ERR;
	return (enum ibv_wc_status)status;
}

static struct pvrdma_qp *pvrdma_lookup_qp(struct pvrdma_context *ctx,
					  uint64_t qp_handle)
{
	uint32_t idx = qp_handle & PVRDMA_QP_TABLE_INDEX_MASK;

	if (idx >= ctx->qp_table_size)
		return NULL;
	return ctx->qp_table[idx];
}

/*
 * Take the CQE at cons_head, if any (spec §8.4 poll algorithm). Returns 1
 * when wc was filled, 0 when the ring is empty, -1 when the ring state is
 * invalid. A CQE whose QP this context does not know is consumed and
 * dropped: it can only belong to a QP that is already gone. *drops_left
 * bounds the drops of one poll_cq call, so that a device that keeps
 * producing such CQEs cannot keep the caller spinning.
 */
static int pvrdma_poll_one(struct pvrdma_context *ctx, struct pvrdma_cq *cq,
			   struct ibv_wc *wc, uint32_t *drops_left)
{
	struct pvrdma_cqe cqe;
	struct pvrdma_qp *qp;
	uint32_t slot;
	int ret;

	for (;;) {
		ret = pvrdma_ring_peek(cq->ring, cq->nelems, &slot);
		if (ret <= 0)
			return ret;

		/* Read the CQE only after seeing the producer index. */
		udma_from_device_barrier();
		/* One copy, so the device cannot change fields under us. */
		cqe = cq->cqes[slot];

		qp = pvrdma_lookup_qp(ctx, le64toh(cqe.qp));
		if (qp)
			break;

		verbs_warn_datapath(&ctx->ibvctx,
				    "CQ %u: dropped CQE of unknown QP %#llx\n",
				    cq->cqn,
				    (unsigned long long)le64toh(cqe.qp));
		pvrdma_ring_consume(cq->ring, cq->nelems);
		if (!--*drops_left)
			return 0;
	}

	wc->wr_id = le64toh(cqe.wr_id);
	wc->status = pvrdma_to_ibv_wc_status(le32toh(cqe.status));
	wc->opcode = pvrdma_to_ibv_wc_opcode(le32toh(cqe.opcode));
	wc->vendor_err = le32toh(cqe.vendor_err);
	wc->byte_len = le32toh(cqe.byte_len);
	wc->qp_num = qp->vqp.qp.qp_num;
	wc->src_qp = le32toh(cqe.src_qp);
	wc->wc_flags = pvrdma_to_ibv_wc_flags(le32toh(cqe.wc_flags));
	/*
	 * Project convention: a SEND_WITH_INV receive carries the invalidated
	 * rkey in imm_data as a plain little-endian u32, not in wire order.
	 */
	if (wc->wc_flags & IBV_WC_WITH_INV)
		wc->invalidated_rkey = le32toh((__force uint32_t)cqe.imm_data);
	else
		wc->imm_data = cqe.imm_data;
	wc->pkey_index = le16toh(cqe.pkey_index);
	wc->slid = le16toh(cqe.slid);
	wc->sl = cqe.sl;
	wc->dlid_path_bits = cqe.dlid_path_bits;

	pvrdma_ring_consume(cq->ring, cq->nelems);
	return 1;
}

/*
 * The device writes CQEs on its own; only what a peer in another VM or
 * host sent may wait in the device's socket until its event loop runs
 * (docs/fabric.md, "Latency"). A device with such peers says so (the
 * CQ_POLL hint of the ucontext response), and then an empty poll rings
 * CQ_POLL (spec §7), and the device takes in what waits before the
 * second look. Without the hint nothing is rung: each ring is a VM exit
 * that takes the device's lock, which slows the doorbells of the other
 * vCPUs of the same VM. PVRDMA_CQ_POLL_EVERY=n in the environment
 * overrides: ring on the first and every n-th empty poll in a row (0:
 * never).
 */
int pvrdma_poll_cq(struct ibv_cq *ibvcq, int num_entries, struct ibv_wc *wc)
{
	struct pvrdma_context *ctx = to_pvrdma_ctx(ibvcq->context);
	struct pvrdma_cq *cq = to_pvrdma_cq(ibvcq);
	uint32_t drops_left = cq->nelems;
	bool rang = false;
	int npolled;
	int ret = 0;

	pthread_spin_lock(&cq->lock);
	for (npolled = 0; npolled < num_entries; npolled++) {
		ret = pvrdma_poll_one(ctx, cq, &wc[npolled], &drops_left);
		if (ret == 0 && !rang && ctx->cq_poll_every &&
		    cq->empty_polls++ % ctx->cq_poll_every == 0) {
			/* Consumed CQEs first: the device may reuse slots. */
			udma_to_device_barrier();
			pvrdma_uar_write(ctx, PVRDMA_UAR_CQ_OFFSET,
					 PVRDMA_UAR_CQ_POLL, cq->cqn);
			rang = true;
			ret = pvrdma_poll_one(ctx, cq, &wc[npolled],
					      &drops_left);
		}
		if (ret <= 0)
			break;
		cq->empty_polls = 0;
	}
	pthread_spin_unlock(&cq->lock);

	if (ret < 0 && !npolled) {
		verbs_err_datapath(&ctx->ibvctx, "CQ %u: ring state invalid\n",
				   cq->cqn);
		return -EIO;
	}
	return npolled;
}

/*
 * A QP that goes to RESET or away leaves no CQEs behind (spec §9): walk
 * the occupied part of the ring from the newest entry back, drop the QP's
 * CQEs, slide the others toward the producer end, and hand the freed slots
 * at the consumer end back. The device only appends at prod_tail, beyond
 * the range walked here, and no longer completes work of this QP.
 */
void pvrdma_cq_clean_locked(struct pvrdma_cq *cq, uint32_t qp_handle)
{
	uint32_t mask = 2 * cq->nelems - 1;
	uint32_t cons, prod, idx, removed = 0;
	const struct pvrdma_cqe *cqe;

	if (pvrdma_ring_used(cq->ring, cq->nelems, &cons, &prod))
		return;
	udma_from_device_barrier();

	for (idx = prod; idx != cons;) {
		idx = (idx - 1) & mask;
		cqe = &cq->cqes[pvrdma_ring_slot(idx, cq->nelems)];
		if ((le64toh(cqe->qp) & PVRDMA_QP_TABLE_INDEX_MASK) ==
		    (qp_handle & PVRDMA_QP_TABLE_INDEX_MASK))
			removed++;
		else if (removed)
			cq->cqes[pvrdma_ring_slot(idx + removed, cq->nelems)] =
				*cqe;
	}

	if (removed)
		pvrdma_ring_consume_n(cq->ring, cq->nelems, removed);
}

/* Arm the CQ for the next (solicited) completion (spec §7). */
int pvrdma_req_notify_cq(struct ibv_cq *ibvcq, int solicited_only)
{
	struct pvrdma_context *ctx = to_pvrdma_ctx(ibvcq->context);
	struct pvrdma_cq *cq = to_pvrdma_cq(ibvcq);

	/* The device must see the consumed CQEs before the arm request. */
	udma_to_device_barrier();
	pvrdma_uar_write(ctx, PVRDMA_UAR_CQ_OFFSET,
			 solicited_only ? PVRDMA_UAR_CQ_ARM_SOL :
					  PVRDMA_UAR_CQ_ARM,
			 cq->cqn);
	return 0;
}
