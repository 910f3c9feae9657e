// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Completion queues of the PVRDMA provider: the CQ ring lives in user
 * memory and is polled without a system call.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <util/util.h>

#include "pvrdma.h"
#include "verbs.h"

/* User CQ buffer: one ring-state page, then nelems CQEs (spec §8.1). */
static size_t pvrdma_cq_buf_size(size_t pg_sz, uint32_t nelems)
{
	return align(pg_sz + (size_t)nelems * sizeof(struct pvrdma_cqe),
		     pg_sz);
}

static void pvrdma_cq_ex_init(struct pvrdma_cq *cq, uint64_t wc_flags);

/* The wc_flags that make the device write timestamps into the CQEs. */
#define PVRDMA_WC_TIMESTAMPS (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | \
			      IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)

/*
 * Wall-clock completion timestamps (spec §14): the device clock is read
 * between two readings of CLOCK_REALTIME, PVRDMA_CAL_SAMPLES times, and
 * the tightest sample ties the two clocks (error: half its window). A
 * CQE's timestamp is then that sample's real time plus the device time
 * since; a timestamp more than PVRDMA_CAL_AGE_NS from the sample takes a
 * new one first, which bounds the drift between the clocks, and follows
 * steps of the real-time clock (settimeofday, a VM stopped and resumed).
 */
#define PVRDMA_CAL_SAMPLES	4
#define PVRDMA_CAL_AGE_NS	1000000000ll

static int64_t pvrdma_realtime_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void pvrdma_clock_calibrate(struct pvrdma_context *ctx,
				   struct pvrdma_cq *cq)
{
	int64_t r0, r1, best = INT64_MAX;
	uint64_t d;
	int i;

	for (i = 0; i < PVRDMA_CAL_SAMPLES; i++) {
		r0 = pvrdma_realtime_ns();
		d = pvrdma_read_clock(ctx);
		r1 = pvrdma_realtime_ns();
		if (r1 - r0 < best) {
			best = r1 - r0;
			cq->cal.dev = d;
			cq->cal.real = r0 + best / 2;
		}
	}
}

/* What ibv_create_cq_ex may ask of this device. */
#define PVRDMA_CQ_WC_FLAGS IBV_WC_STANDARD_FLAGS
#define PVRDMA_CQ_INIT_ATTR_MASK (IBV_CQ_INIT_ATTR_MASK_FLAGS | \
				  IBV_CQ_INIT_ATTR_MASK_PD)
#define PVRDMA_CQ_CREATE_FLAGS IBV_CREATE_CQ_ATTR_SINGLE_THREADED

/*
 * Create a CQ for ibv_create_cq (@ex false) or ibv_create_cq_ex. Completion
 * timestamps are the device's clock where it offers them (a project
 * extension: the kernel asks the device for them), not wall-clock time. A
 * CQ of a parent domain (IBV_CQ_INIT_ATTR_MASK_PD) takes its ring from the
 * domain's allocator, and skips its lock when the domain has a thread
 * domain, as a single threaded CQ does.
 */
static struct pvrdma_cq *pvrdma_cq_create(struct ibv_context *ibvctx,
					  struct ibv_cq_init_attr_ex *attr,
					  bool ex)
{
	struct pvrdma_device *dev = to_pvrdma_dev(ibvctx->device);
	struct pvrdma_context *ctx = to_pvrdma_ctx(ibvctx);
	uint64_t wc_ok = PVRDMA_CQ_WC_FLAGS |
			 (ctx->has_cqe_ts ?
			  IBV_WC_EX_WITH_COMPLETION_TIMESTAMP : 0) |
			 (ctx->has_cqe_ts && ctx->has_clock ?
			  IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK : 0);
	struct pvrdma_ucmd_create_cq_ex_resp resp_ex = {};
	struct pvrdma_ucmd_create_cq_ex cmd_ex = {};
	struct pvrdma_ucmd_create_cq_resp resp = {};
	struct pvrdma_ucmd_create_cq cmd = {};
	struct pvrdma_pd *pad = NULL;
	struct pvrdma_cq *cq;
	uint32_t nelems;
	bool single;
	int err;

	if (ex && ((attr->comp_mask & ~PVRDMA_CQ_INIT_ATTR_MASK) ||
		   (attr->wc_flags & ~wc_ok) ||
		   (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS &&
		    attr->flags & ~PVRDMA_CQ_CREATE_FLAGS))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (ex && attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) {
		pad = attr->parent_domain &&
		      attr->parent_domain->context == ibvctx ?
		      pvrdma_parent_domain(attr->parent_domain) : NULL;
		if (!pad) {
			errno = EINVAL;
			return NULL;
		}
	}
	single = pvrdma_pad_single_thread(pad) ||
		 (ex && attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS &&
		  attr->flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
	/* CREATE_CQ carries the buffer size in 32 bits (spec §9). */
	if (attr->cqe < 1 || attr->cqe > (UINT32_MAX - dev->pg_sz) /
					       (2 * sizeof(struct pvrdma_cqe))) {
		errno = EINVAL;
		return NULL;
	}
	nelems = roundup_pow_of_two(attr->cqe);

	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}

	err = pvrdma_lock_init(&cq->lock, !single);
	if (err)
		goto err_free_cq;

	cq->pad = pad;
	err = pvrdma_buf_alloc(&cq->buf, dev, pad, PVRDMA_RES_TYPE_CQ,
			       pvrdma_cq_buf_size(dev->pg_sz, nelems));
	if (err)
		goto err_destroy_lock;
	cq->ring = &((struct pvrdma_ring_state *)cq->buf.addr)->rx;
	cq->cqes = (struct pvrdma_cqe *)((uint8_t *)cq->buf.addr + dev->pg_sz);

	if (ex) {
		struct ibv_cq_init_attr_ex cmd_attr = *attr;

		cmd_ex.buf_addr = (uintptr_t)cq->buf.addr;
		cmd_ex.buf_size = cq->buf.size;
		cmd_attr.cqe = nelems;
		/* Of the extras only timestamps concern the kernel. */
		cmd_attr.wc_flags &= PVRDMA_WC_TIMESTAMPS;
		cmd_attr.comp_mask = 0;
		err = pvrdma_cmd_create_cq_ex(ibvctx, &cmd_attr, &cq->vcq,
					      &cmd_ex.ibv_cmd, sizeof(cmd_ex),
					      &resp_ex.ibv_resp,
					      sizeof(resp_ex), 0);
	} else {
		cmd.buf_addr = (uintptr_t)cq->buf.addr;
		cmd.buf_size = cq->buf.size;
		err = ibv_cmd_create_cq(ibvctx, nelems, attr->channel,
					attr->comp_vector, &cq->vcq.cq,
					&cmd.ibv_cmd, sizeof(cmd),
					&resp.ibv_resp, sizeof(resp));
	}
	if (err) {
		verbs_err(verbs_get_ctx(ibvctx), "CREATE_CQ failed: %d\n",
			  err);
		goto err_free_buf;
	}

	/*
	 * The kernel reports the device's ring size in cqe. poll_cq masks
	 * indices with it, so it must be a power of two that fits the buffer.
	 */
	if (cq->vcq.cq.cqe < 1 || (uint32_t)cq->vcq.cq.cqe > nelems ||
	    (cq->vcq.cq.cqe & (cq->vcq.cq.cqe - 1))) {
		verbs_err(verbs_get_ctx(ibvctx),
			  "CREATE_CQ returned a bad ring size %d for %u\n",
			  cq->vcq.cq.cqe, nelems);
		err = EIO;
		goto err_destroy_cq;
	}
	cq->nelems = cq->vcq.cq.cqe;
	cq->cqn = ex ? resp_ex.cqn : resp.cqn;
	if (ex)
		pvrdma_cq_ex_init(cq, attr->wc_flags);
	if (ex && attr->wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		pvrdma_clock_calibrate(ctx, cq);
	pvrdma_pad_get(pad);
	return cq;

err_destroy_cq:
	ibv_cmd_destroy_cq(&cq->vcq.cq);
err_free_buf:
	pvrdma_buf_free(&cq->buf);
err_destroy_lock:
	pvrdma_lock_destroy(&cq->lock);
err_free_cq:
	free(cq);
	errno = err;
	return NULL;
}

struct ibv_cq *pvrdma_create_cq(struct ibv_context *ibvctx, int ncqe,
				struct ibv_comp_channel *channel,
				int comp_vector)
{
	struct ibv_cq_init_attr_ex attr = {
		.cqe = ncqe < 0 ? 0 : ncqe,
		.channel = channel,
		.comp_vector = comp_vector,
	};
	struct pvrdma_cq *cq = pvrdma_cq_create(ibvctx, &attr, false);

	return cq ? &cq->vcq.cq : NULL;
}

struct ibv_cq_ex *pvrdma_create_cq_ex(struct ibv_context *ibvctx,
				      struct ibv_cq_init_attr_ex *attr)
{
	struct pvrdma_cq *cq = pvrdma_cq_create(ibvctx, attr, true);

	return cq ? &cq->vcq.cq_ex : NULL;
}

int pvrdma_destroy_cq(struct ibv_cq *ibvcq)
{
	struct pvrdma_cq *cq = to_pvrdma_cq(ibvcq);
	int err;

	err = ibv_cmd_destroy_cq(ibvcq);
	if (err)
		return err;

	pvrdma_buf_free(&cq->buf);
	pvrdma_lock_destroy(&cq->lock);
	pvrdma_pad_put(cq->pad);
	free(cq);
	return 0;
}

/*
 * Move the CQ to a ring of another size (a project extension: the device
 * copies the CQEs not yet polled to the start of the new ring and sets
 * its indices). Polling waits on the CQ lock meanwhile; on an error the
 * CQ stays on its ring. A device without the extension: EOPNOTSUPP from
 * the kernel.
 */
int pvrdma_resize_cq(struct ibv_cq *ibvcq, int ncqe)
{
	struct pvrdma_device *dev = to_pvrdma_dev(ibvcq->context->device);
	struct pvrdma_cq *cq = to_pvrdma_cq(ibvcq);
	struct ib_uverbs_resize_cq_resp resp = {};
	struct pvrdma_ucmd_resize_cq cmd = {};
	struct pvrdma_buf buf;
	uint32_t nelems;
	int err;

	if (ncqe < 1 || (size_t)ncqe > (UINT32_MAX - dev->pg_sz) /
					       (2 * sizeof(struct pvrdma_cqe)))
		return EINVAL;
	nelems = roundup_pow_of_two(ncqe);
	err = pvrdma_buf_alloc(&buf, dev, cq->pad, PVRDMA_RES_TYPE_CQ,
			       pvrdma_cq_buf_size(dev->pg_sz, nelems));
	if (err)
		return err;

	pvrdma_lock(&cq->lock);
	cmd.buf_addr = (uintptr_t)buf.addr;
	cmd.buf_size = buf.size;
	err = ibv_cmd_resize_cq(ibvcq, nelems, &cmd.ibv_cmd, sizeof(cmd),
				&resp, sizeof(resp));
	if (!err && resp.cqe != nelems)
		err = EIO;	/* the kernel and the ring disagree: give up */
	if (err) {
		pvrdma_unlock(&cq->lock);
		pvrdma_buf_free(&buf);
		return err;
	}
	pvrdma_buf_free(&cq->buf);
	cq->buf = buf;
	cq->ring = &((struct pvrdma_ring_state *)buf.addr)->rx;
	cq->cqes = (struct pvrdma_cqe *)((uint8_t *)buf.addr + dev->pg_sz);
	cq->nelems = nelems;
	pvrdma_unlock(&cq->lock);
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
	case PVRDMA_WC_ATOMIC_WRITE:
		return IBV_WC_ATOMIC_WRITE;
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
 * Take the CQE at cons_head, if any (spec §8.4 poll algorithm): copy it to
 * *cqe and consume it. Returns 1 when a CQE was taken, 0 when the ring is
 * empty, -1 when the ring state is invalid. A CQE whose QP this context
 * does not know is consumed and dropped: it can only belong to a QP that
 * is already gone. *drops_left bounds the drops of one call, so that a
 * device that keeps producing such CQEs cannot keep the caller spinning.
 *
 * A receive of an XRC SRQ (PVRDMA_CQE_QP_XRC, spec §14) names an XRC_RECV
 * QP, which may be another process's, or one this process opened: it is
 * taken with *qp NULL, and the CQE itself gives the QP number.
 */
static int pvrdma_take_cqe(struct pvrdma_context *ctx, struct pvrdma_cq *cq,
			   struct pvrdma_cqe *cqe, struct pvrdma_qp **qp,
			   uint32_t *drops_left)
{
	uint32_t slot;
	int ret;

	for (;;) {
		ret = pvrdma_ring_peek(cq->ring, cq->nelems, &slot);
		if (ret <= 0)
			return ret;

		/* Read the CQE only after seeing the producer index. */
		udma_from_device_barrier();
		/* One copy, so the device cannot change fields under us. */
		*cqe = cq->cqes[slot];
		pvrdma_ring_consume(cq->ring, cq->nelems);

		if (le64toh(cqe->qp) & PVRDMA_CQE_QP_XRC) {
			*qp = NULL;
			return 1;
		}
		*qp = pvrdma_lookup_qp(ctx, le64toh(cqe->qp));
		if (*qp)
			return 1;

		verbs_warn_datapath(&ctx->ibvctx,
				    "CQ %u: dropped CQE of unknown QP %#llx\n",
				    cq->cqn,
				    (unsigned long long)le64toh(cqe->qp));
		if (!--*drops_left)
			return 0;
	}
}

/*
 * Project convention: a SEND_WITH_INV receive carries the invalidated
 * rkey in imm_data as a plain little-endian u32, not in wire order.
 */
static uint32_t pvrdma_cqe_inv_rkey(const struct pvrdma_cqe *cqe)
{
	return le32toh((__force uint32_t)cqe->imm_data);
}

/* The CQE's QP number: its QP's, or the XRC_RECV QP's it carries. */
static uint32_t pvrdma_cqe_qp_num(const struct pvrdma_cqe *cqe,
				  const struct pvrdma_qp *qp)
{
	if (qp)
		return qp->vqp.qp.qp_num;
	return (le64toh(cqe->qp) >> PVRDMA_CQE_QP_XRC_QPN_SHIFT) &
	       PVRDMA_QPN_MASK;
}

static void pvrdma_cqe_to_wc(const struct pvrdma_cqe *cqe,
			     const struct pvrdma_qp *qp, struct ibv_wc *wc)
{
	wc->wr_id = le64toh(cqe->wr_id);
	wc->status = pvrdma_to_ibv_wc_status(le32toh(cqe->status));
	wc->opcode = pvrdma_to_ibv_wc_opcode(le32toh(cqe->opcode));
	wc->vendor_err = le32toh(cqe->vendor_err);
	wc->byte_len = le32toh(cqe->byte_len);
	wc->qp_num = pvrdma_cqe_qp_num(cqe, qp);
	wc->src_qp = le32toh(cqe->src_qp);
	wc->wc_flags = pvrdma_to_ibv_wc_flags(le32toh(cqe->wc_flags));
	if (wc->wc_flags & IBV_WC_WITH_INV)
		wc->invalidated_rkey = pvrdma_cqe_inv_rkey(cqe);
	else
		wc->imm_data = cqe->imm_data;
	wc->pkey_index = le16toh(cqe->pkey_index);
	wc->slid = le16toh(cqe->slid);
	wc->sl = cqe->sl;
	wc->dlid_path_bits = cqe->dlid_path_bits;
}

/*
 * A poll found the ring's indices out of range: the device corrupted
 * them, or our driver marked the CQ dead because the device was removed
 * with this context open (PVRDMA_RING_DEAD).
 */
static void pvrdma_cq_invalid(struct pvrdma_context *ctx,
			      struct pvrdma_cq *cq)
{
	if (le32toh(cq->ring->prod_tail) == PVRDMA_RING_DEAD)
		verbs_err_datapath(&ctx->ibvctx,
				   "CQ %u: the device was removed\n", cq->cqn);
	else
		verbs_err_datapath(&ctx->ibvctx,
				   "CQ %u: ring state invalid\n", cq->cqn);
}

/*
 * Take one CQE; on an empty ring, ring CQ_POLL first if it is time (see
 * pvrdma_poll_cq) and look once more. *rang: CQ_POLL was rung already.
 */
static int pvrdma_poll_one(struct pvrdma_context *ctx, struct pvrdma_cq *cq,
			   struct pvrdma_cqe *cqe, struct pvrdma_qp **qp,
			   uint32_t *drops_left, bool *rang)
{
	int ret = pvrdma_take_cqe(ctx, cq, cqe, qp, drops_left);

	if (ret == 0 && !*rang && ctx->cq_poll_every &&
	    cq->empty_polls++ % ctx->cq_poll_every == 0) {
		/* Consumed CQEs first: the device may reuse slots. */
		udma_to_device_barrier();
		pvrdma_uar_write(ctx, PVRDMA_UAR_CQ_OFFSET, PVRDMA_UAR_CQ_POLL,
				 cq->cqn);
		*rang = true;
		ret = pvrdma_take_cqe(ctx, cq, cqe, qp, drops_left);
	}
	if (ret > 0)
		cq->empty_polls = 0;
	return ret;
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
	struct pvrdma_cqe cqe;
	struct pvrdma_qp *qp;
	bool rang = false;
	uint32_t slot;
	int npolled;
	int ret = 0;

	/*
	 * An empty ring is answered without the lock when there is nothing
	 * to ring: looking changes no state, and busy pollers mostly find
	 * their CQ empty (the lock is an atomic read-modify-write, which
	 * costs a helper call per poll under binary translation).
	 */
	if (!ctx->cq_poll_every && pvrdma_ring_peek(cq->ring, cq->nelems,
						    &slot) == 0)
		return 0;

	pvrdma_lock(&cq->lock);
	for (npolled = 0; npolled < num_entries; npolled++) {
		ret = pvrdma_poll_one(ctx, cq, &cqe, &qp, &drops_left, &rang);
		if (ret <= 0)
			break;
		pvrdma_cqe_to_wc(&cqe, qp, &wc[npolled]);
	}
	pvrdma_unlock(&cq->lock);

	if (ret < 0 && !npolled) {
		pvrdma_cq_invalid(ctx, cq);
		return -EIO;
	}
	return npolled;
}

/*
 * The extended poll API: start_poll takes the CQ lock and the first CQE,
 * next_poll the following ones, end_poll drops the lock; the readers look
 * at the CQE taken last (a copy: its ring slot is already the device's).
 * start_poll keeps the lock only when it returns 0, as ibverbs requires.
 */
static struct pvrdma_cq *cqx_to_cq(struct ibv_cq_ex *cqx)
{
	return container_of(cqx, struct pvrdma_cq, vcq.cq_ex);
}

static int pvrdma_cqx_take(struct pvrdma_cq *cq, bool *rang)
{
	struct pvrdma_context *ctx = to_pvrdma_ctx(cq->vcq.cq.context);
	uint32_t drops_left = cq->nelems;
	int ret;

	ret = pvrdma_poll_one(ctx, cq, &cq->cur, &cq->cur_qp, &drops_left,
			      rang);
	if (ret < 0) {
		pvrdma_cq_invalid(ctx, cq);
		return EIO;
	}
	if (!ret)
		return ENOENT;
	cq->vcq.cq_ex.wr_id = le64toh(cq->cur.wr_id);
	cq->vcq.cq_ex.status = pvrdma_to_ibv_wc_status(le32toh(cq->cur.status));
	return 0;
}

static int pvrdma_start_poll(struct ibv_cq_ex *cqx,
			     struct ibv_poll_cq_attr *attr)
{
	struct pvrdma_cq *cq = cqx_to_cq(cqx);
	bool rang = false;
	int err;

	if (attr->comp_mask)
		return EINVAL;
	pvrdma_lock(&cq->lock);
	err = pvrdma_cqx_take(cq, &rang);
	if (err)
		pvrdma_unlock(&cq->lock);
	return err;
}

static int pvrdma_next_poll(struct ibv_cq_ex *cqx)
{
	/* One CQ_POLL per start_poll at most: the device was just asked. */
	bool rang = true;

	return pvrdma_cqx_take(cqx_to_cq(cqx), &rang);
}

static void pvrdma_end_poll(struct ibv_cq_ex *cqx)
{
	pvrdma_unlock(&cqx_to_cq(cqx)->lock);
}

static enum ibv_wc_opcode pvrdma_read_opcode(struct ibv_cq_ex *cqx)
{
	return pvrdma_to_ibv_wc_opcode(le32toh(cqx_to_cq(cqx)->cur.opcode));
}

static uint32_t pvrdma_read_vendor_err(struct ibv_cq_ex *cqx)
{
	return le32toh(cqx_to_cq(cqx)->cur.vendor_err);
}

static uint32_t pvrdma_read_byte_len(struct ibv_cq_ex *cqx)
{
	return le32toh(cqx_to_cq(cqx)->cur.byte_len);
}

/*
 * ibv_wc_read_invalidated_rkey() reads this too, and takes the key as it
 * comes, in host order.
 */
static __be32 pvrdma_read_imm_data(struct ibv_cq_ex *cqx)
{
	const struct pvrdma_cqe *cqe = &cqx_to_cq(cqx)->cur;

	if (le32toh(cqe->wc_flags) & PVRDMA_WC_WITH_INVALIDATE)
		return (__force __be32)pvrdma_cqe_inv_rkey(cqe);
	return cqe->imm_data;
}

static uint32_t pvrdma_read_qp_num(struct ibv_cq_ex *cqx)
{
	struct pvrdma_cq *cq = cqx_to_cq(cqx);

	return pvrdma_cqe_qp_num(&cq->cur, cq->cur_qp);
}

static uint32_t pvrdma_read_src_qp(struct ibv_cq_ex *cqx)
{
	return le32toh(cqx_to_cq(cqx)->cur.src_qp);
}

static unsigned int pvrdma_read_wc_flags(struct ibv_cq_ex *cqx)
{
	return pvrdma_to_ibv_wc_flags(le32toh(cqx_to_cq(cqx)->cur.wc_flags));
}

static uint32_t pvrdma_read_slid(struct ibv_cq_ex *cqx)
{
	return le16toh(cqx_to_cq(cqx)->cur.slid);
}

static uint8_t pvrdma_read_sl(struct ibv_cq_ex *cqx)
{
	return cqx_to_cq(cqx)->cur.sl;
}

static uint8_t pvrdma_read_dlid_path_bits(struct ibv_cq_ex *cqx)
{
	return cqx_to_cq(cqx)->cur.dlid_path_bits;
}

/* The device clock in the CQE's reserved bytes (spec §14): 48 bits of ns. */
static uint64_t pvrdma_read_completion_ts(struct ibv_cq_ex *cqx)
{
	uint64_t ts = 0;

	memcpy(&ts, (const uint8_t *)&cqx_to_cq(cqx)->cur + PVRDMA_CQE_TS_OFF,
	       PVRDMA_CQE_TS_BITS / 8);
	return le64toh(ts);
}

/* The 48-bit distance from the calibration's device time, signed. */
static int64_t pvrdma_cal_delta(const struct pvrdma_cq *cq, uint64_t ts)
{
	return (int64_t)((ts - cq->cal.dev) << (64 - PVRDMA_CQE_TS_BITS)) >>
	       (64 - PVRDMA_CQE_TS_BITS);
}

static uint64_t pvrdma_read_completion_wallclock_ns(struct ibv_cq_ex *cqx)
{
	struct pvrdma_cq *cq = cqx_to_cq(cqx);
	uint64_t ts = pvrdma_read_completion_ts(cqx);
	int64_t delta = pvrdma_cal_delta(cq, ts);

	if (delta > PVRDMA_CAL_AGE_NS || delta < -PVRDMA_CAL_AGE_NS) {
		pvrdma_clock_calibrate(to_pvrdma_ctx(cqx->context), cq);
		delta = pvrdma_cal_delta(cq, ts);
	}
	return cq->cal.real + delta;
}

/* The readers of the fields asked for (pvrdma_cq_create refused others). */
static void pvrdma_cq_ex_init(struct pvrdma_cq *cq, uint64_t wc_flags)
{
	struct ibv_cq_ex *cqx = &cq->vcq.cq_ex;

	cqx->start_poll = pvrdma_start_poll;
	cqx->next_poll = pvrdma_next_poll;
	cqx->end_poll = pvrdma_end_poll;
	cqx->read_opcode = pvrdma_read_opcode;
	cqx->read_vendor_err = pvrdma_read_vendor_err;
	cqx->read_wc_flags = pvrdma_read_wc_flags;
	if (wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		cqx->read_byte_len = pvrdma_read_byte_len;
	if (wc_flags & IBV_WC_EX_WITH_IMM)
		cqx->read_imm_data = pvrdma_read_imm_data;
	if (wc_flags & IBV_WC_EX_WITH_QP_NUM)
		cqx->read_qp_num = pvrdma_read_qp_num;
	if (wc_flags & IBV_WC_EX_WITH_SRC_QP)
		cqx->read_src_qp = pvrdma_read_src_qp;
	if (wc_flags & IBV_WC_EX_WITH_SLID)
		cqx->read_slid = pvrdma_read_slid;
	if (wc_flags & IBV_WC_EX_WITH_SL)
		cqx->read_sl = pvrdma_read_sl;
	if (wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		cqx->read_dlid_path_bits = pvrdma_read_dlid_path_bits;
	if (wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		cqx->read_completion_ts = pvrdma_read_completion_ts;
	if (wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		cqx->read_completion_wallclock_ns =
			pvrdma_read_completion_wallclock_ns;
}

/*
 * A QP that goes to RESET or away leaves no CQEs behind (spec §9): walk
 * the occupied part of the ring from the newest entry back, drop the QP's
 * CQEs, slide the others toward the producer end, and hand the freed slots
 * at the consumer end back. The device only appends at prod_tail, beyond
 * the range walked here, and no longer completes work of this QP. The
 * receives of XRC SRQs stay (spec §14): their handle bits are an XRC_RECV
 * QP's, never those of the QP that goes.
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
		if (!(le64toh(cqe->qp) & PVRDMA_CQE_QP_XRC) &&
		    (le64toh(cqe->qp) & PVRDMA_QP_TABLE_INDEX_MASK) ==
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
