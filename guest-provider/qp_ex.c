// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * The extended send API (ibv_wr_start, ibv_wr_<opcode>, ibv_wr_set_*,
 * ibv_wr_complete / ibv_wr_abort) of a QP made by ibv_create_qp_ex with
 * IBV_QP_INIT_ATTR_SEND_OPS_FLAGS. It writes the same WQEs as post_send
 * (spec §8.2, §8.3) straight into the SQ ring:
 *
 *  - wr_start takes the SQ lock and notes the producer index; each opcode
 *    call writes the header of the next WQE at a private producer index;
 *    the setters fill in its SGEs, inline bytes or UD address;
 *  - wr_complete publishes every WQE of the batch with one store of
 *    prod_tail and rings one SEND doorbell; wr_abort publishes nothing,
 *    so the device never sees the WQEs written;
 *  - an error in any call (ring full, too many SGEs or inline bytes, an
 *    opcode the QP type does not have, a UD WR without an address, an
 *    XRC_SEND WR to the responder without an SRQ number, a QP not yet in
 *    RTS) is kept and returned by wr_complete, which then posts none of
 *    the batch, as ibverbs specifies.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include <util/util.h>

#include "pvrdma.h"
#include "verbs.h"

/*
 * The opcodes each QP type can build (RC, UC and UD in user space;
 * XRC_SEND as RC, spec §14).
 */
#define PVRDMA_RC_SEND_OPS (IBV_QP_EX_WITH_RDMA_WRITE | \
			    IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
			    IBV_QP_EX_WITH_SEND | \
			    IBV_QP_EX_WITH_SEND_WITH_IMM | \
			    IBV_QP_EX_WITH_RDMA_READ | \
			    IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
			    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | \
			    IBV_QP_EX_WITH_LOCAL_INV | \
			    IBV_QP_EX_WITH_SEND_WITH_INV)
#define PVRDMA_UD_SEND_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)
#define PVRDMA_UC_SEND_OPS (IBV_QP_EX_WITH_RDMA_WRITE | \
			    IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
			    IBV_QP_EX_WITH_SEND | \
			    IBV_QP_EX_WITH_SEND_WITH_IMM | \
			    IBV_QP_EX_WITH_LOCAL_INV | \
			    IBV_QP_EX_WITH_SEND_WITH_INV)

static struct pvrdma_qp *qpx_to_qp(struct ibv_qp_ex *qpx)
{
	return container_of(qpx, struct pvrdma_qp, vqp.qp_ex);
}

static void pvrdma_wr_fail(struct pvrdma_qp *qp, int err)
{
	if (!qp->wr.err)
		qp->wr.err = err;
	qp->wr.cur = NULL;
}

/*
 * A UD WR must have had its address set before the next one starts, an
 * XRC_SEND WR its SRQ number, unless it stays local (LOCAL_INV, BIND_MW).
 */
static bool pvrdma_wr_addr_missing(struct pvrdma_qp *qp)
{
	uint32_t opcode;

	if (!qp->wr.cur || qp->wr.cur_has_addr)
		return false;
	switch (qp->vqp.qp.qp_type) {
	case IBV_QPT_UD:
		return true;
	case IBV_QPT_XRC_SEND:
		opcode = le32toh(qp->wr.cur->opcode);
		return opcode != PVRDMA_WR_LOCAL_INV &&
		       opcode != PVRDMA_WR_BIND_MW;
	default:
		return false;
	}
}

/*
 * Start the next WQE of the batch: the slot at the private producer index,
 * its header filled from the QP's wr_id and wr_flags. NULL (and the batch
 * failed) when the ring is full or the opcode is not one of @allowed.
 */
static struct pvrdma_sq_wqe_hdr *pvrdma_wr_begin(struct ibv_qp_ex *qpx,
						 uint32_t opcode,
						 uint64_t allowed_ops,
						 uint64_t op)
{
	struct pvrdma_qp *qp = qpx_to_qp(qpx);
	struct pvrdma_sq_wqe_hdr *wqe;
	uint32_t cons;

	if (qp->wr.err)
		return NULL;
	if (pvrdma_wr_addr_missing(qp)) {
		pvrdma_wr_fail(qp, EINVAL);
		return NULL;
	}
	if (!(allowed_ops & op)) {
		pvrdma_wr_fail(qp, EINVAL);
		return NULL;
	}

	cons = atomic_load_explicit(pvrdma_ring_atomic(&qp->sq.ring->cons_head),
				    memory_order_acquire);
	if (!pvrdma_ring_idx_valid(cons, qp->sq.nelems)) {
		pvrdma_wr_fail(qp, EIO);
		return NULL;
	}
	if (qp->wr.prod == (cons ^ qp->sq.nelems)) {
		pvrdma_wr_fail(qp, ENOMEM);
		return NULL;
	}

	qp->wr.slot = pvrdma_ring_slot(qp->wr.prod, qp->sq.nelems);
	wqe = (struct pvrdma_sq_wqe_hdr *)(qp->sq.wqes +
					   (size_t)qp->wr.slot *
						   qp->sq.wqe_size);
	pvrdma_sq_wqe_init(wqe, qpx->wr_id, qpx->wr_flags, opcode);
	qp->wr.prod = pvrdma_ring_next(qp->wr.prod, qp->sq.nelems);
	qp->wr.count++;
	qp->wr.cur = wqe;
	qp->wr.cur_has_addr = false;
	return wqe;
}

static void pvrdma_wr_rdma(struct ibv_qp_ex *qpx, uint32_t opcode,
			   uint64_t op, uint32_t rkey, uint64_t remote_addr)
{
	struct pvrdma_sq_wqe_hdr *wqe;

	wqe = pvrdma_wr_begin(qpx, opcode, qpx_to_qp(qpx)->wr.ops, op);
	if (!wqe)
		return;
	wqe->wr.rdma.remote_addr = htole64(remote_addr);
	wqe->wr.rdma.rkey = htole32(rkey);
}

static void pvrdma_wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey,
				 uint64_t remote_addr)
{
	pvrdma_wr_rdma(qpx, PVRDMA_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE,
		       rkey, remote_addr);
}

static void pvrdma_wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey,
				     uint64_t remote_addr, __be32 imm_data)
{
	struct pvrdma_qp *qp = qpx_to_qp(qpx);

	pvrdma_wr_rdma(qpx, PVRDMA_WR_RDMA_WRITE_WITH_IMM,
		       IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, rkey, remote_addr);
	if (qp->wr.cur)
		qp->wr.cur->ex.imm_data = imm_data;
}

static void pvrdma_wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey,
				uint64_t remote_addr)
{
	pvrdma_wr_rdma(qpx, PVRDMA_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ,
		       rkey, remote_addr);
}

static void pvrdma_wr_atomic(struct ibv_qp_ex *qpx, uint32_t opcode,
			     uint64_t op, uint32_t rkey, uint64_t remote_addr,
			     uint64_t compare_add, uint64_t swap)
{
	struct pvrdma_sq_wqe_hdr *wqe;

	wqe = pvrdma_wr_begin(qpx, opcode, qpx_to_qp(qpx)->wr.ops, op);
	if (!wqe)
		return;
	wqe->wr.atomic.remote_addr = htole64(remote_addr);
	wqe->wr.atomic.compare_add = htole64(compare_add);
	wqe->wr.atomic.swap = htole64(swap);
	wqe->wr.atomic.rkey = htole32(rkey);
}

static void pvrdma_wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey,
				     uint64_t remote_addr, uint64_t compare,
				     uint64_t swap)
{
	pvrdma_wr_atomic(qpx, PVRDMA_WR_ATOMIC_CMP_AND_SWP,
			 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, rkey, remote_addr,
			 compare, swap);
}

static void pvrdma_wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey,
				       uint64_t remote_addr, uint64_t add)
{
	pvrdma_wr_atomic(qpx, PVRDMA_WR_ATOMIC_FETCH_AND_ADD,
			 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, rkey,
			 remote_addr, add, 0);
}

/*
 * ATOMIC_WRITE (spec §14): the 8 bytes at @atomic_wr, as they are, in the
 * WQE's swap field; no SGE.
 */
static void pvrdma_wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey,
				   uint64_t remote_addr, const void *atomic_wr)
{
	struct pvrdma_sq_wqe_hdr *wqe;

	wqe = pvrdma_wr_begin(qpx, PVRDMA_WR_ATOMIC_WRITE,
			      qpx_to_qp(qpx)->wr.ops,
			      IBV_QP_EX_WITH_ATOMIC_WRITE);
	if (!wqe)
		return;
	wqe->wr.atomic.remote_addr = htole64(remote_addr);
	wqe->wr.atomic.rkey = htole32(rkey);
	memcpy(&wqe->wr.atomic.swap, atomic_wr, sizeof(wqe->wr.atomic.swap));
}

static void pvrdma_wr_send(struct ibv_qp_ex *qpx)
{
	pvrdma_wr_begin(qpx, PVRDMA_WR_SEND, qpx_to_qp(qpx)->wr.ops,
			IBV_QP_EX_WITH_SEND);
}

/* An opcode whose WQE carries one more word: immediate data or a key. */
static void pvrdma_wr_with_ex(struct ibv_qp_ex *qpx, uint32_t opcode,
			      uint64_t op, uint32_t ex_le)
{
	struct pvrdma_sq_wqe_hdr *wqe;

	wqe = pvrdma_wr_begin(qpx, opcode, qpx_to_qp(qpx)->wr.ops, op);
	if (wqe)
		wqe->ex.invalidate_rkey = ex_le;
}

/* Immediate data travels in wire order, as ibverbs hands it over. */
static void pvrdma_wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm_data)
{
	pvrdma_wr_with_ex(qpx, PVRDMA_WR_SEND_WITH_IMM,
			  IBV_QP_EX_WITH_SEND_WITH_IMM,
			  (__force uint32_t)imm_data);
}

static void pvrdma_wr_send_inv(struct ibv_qp_ex *qpx, uint32_t rkey)
{
	pvrdma_wr_with_ex(qpx, PVRDMA_WR_SEND_WITH_INV,
			  IBV_QP_EX_WITH_SEND_WITH_INV, htole32(rkey));
}

static void pvrdma_wr_local_inv(struct ibv_qp_ex *qpx, uint32_t rkey)
{
	pvrdma_wr_with_ex(qpx, PVRDMA_WR_LOCAL_INV, IBV_QP_EX_WITH_LOCAL_INV,
			  htole32(rkey));
}

/* Type 2 windows only, as with ibv_post_send. */
static void pvrdma_wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw,
			      uint32_t rkey,
			      const struct ibv_mw_bind_info *bind_info)
{
	struct pvrdma_sq_wqe_hdr *wqe;

	if (!mw || mw->type != IBV_MW_TYPE_2) {
		pvrdma_wr_fail(qpx_to_qp(qpx), EINVAL);
		return;
	}
	wqe = pvrdma_wr_begin(qpx, PVRDMA_WR_BIND_MW, qpx_to_qp(qpx)->wr.ops,
			      IBV_QP_EX_WITH_BIND_MW);
	if (wqe)
		pvrdma_sq_wqe_bind_mw(wqe, rkey, bind_info);
}

/* An opcode this device has no means for. */
static void pvrdma_wr_send_tso(struct ibv_qp_ex *qpx, void *hdr,
			       uint16_t hdr_sz, uint16_t mss)
{
	pvrdma_wr_fail(qpx_to_qp(qpx), EOPNOTSUPP);
}

/*
 * The responder's XRC SRQ, 24 bits, in the WQE's reserved word (spec
 * §14).
 */
static void pvrdma_wr_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t srqn)
{
	struct pvrdma_qp *qp = qpx_to_qp(qpx);
	struct pvrdma_sq_wqe_hdr *wqe = qp->wr.cur;

	if (!wqe)
		return;
	if (qp->vqp.qp.qp_type != IBV_QPT_XRC_SEND ||
	    srqn > PVRDMA_XRC_SRQN_MASK) {
		pvrdma_wr_fail(qp, EINVAL);
		return;
	}
	wqe->reserved = htole32(srqn);
	qp->wr.cur_has_addr = true;
}

static void pvrdma_wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah,
				  uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct pvrdma_qp *qp = qpx_to_qp(qpx);
	struct pvrdma_sq_wqe_hdr *wqe = qp->wr.cur;

	if (!wqe)
		return;
	if (qp->vqp.qp.qp_type != IBV_QPT_UD || !ah) {
		pvrdma_wr_fail(qp, EINVAL);
		return;
	}
	wqe->wr.ud.remote_qpn = htole32(remote_qpn);
	wqe->wr.ud.remote_qkey = htole32(pvrdma_ud_qkey(qp, remote_qkey));
	wqe->wr.ud.av = to_pvrdma_ah(ah)->av;
	qp->wr.cur_has_addr = true;
}

static void pvrdma_wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
				   const struct ibv_sge *sg_list)
{
	struct pvrdma_qp *qp = qpx_to_qp(qpx);
	struct pvrdma_sq_wqe_hdr *wqe = qp->wr.cur;

	if (!wqe)
		return;
	if (num_sge > qp->sq.max_sge) {
		pvrdma_wr_fail(qp, EINVAL);
		return;
	}
	/* LOCAL_INV moves no data: its SGEs are not given to the device. */
	if (le32toh(wqe->opcode) == PVRDMA_WR_LOCAL_INV)
		return;
	pvrdma_write_sges((struct pvrdma_sge *)(wqe + 1), sg_list, num_sge);
	wqe->num_sge = htole32(num_sge);
}

static void pvrdma_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey,
			      uint64_t addr, uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	pvrdma_wr_set_sge_list(qpx, 1, &sge);
}

/*
 * Inline bytes go to the slot's part of the QP's inline buffer, which the
 * WQE names with one SGE (see struct pvrdma_qp); an empty list, none.
 */
static void pvrdma_wr_set_inline_data_list(struct ibv_qp_ex *qpx,
					   size_t num_buf,
					   const struct ibv_data_buf *buf_list)
{
	struct pvrdma_qp *qp = qpx_to_qp(qpx);
	struct pvrdma_sq_wqe_hdr *wqe = qp->wr.cur;
	struct ibv_sge sge;
	uint8_t *dst;
	size_t i, len = 0;

	if (!wqe)
		return;
	for (i = 0; i < num_buf; i++) {
		len += buf_list[i].length;
		if (len > qp->max_inline) {
			pvrdma_wr_fail(qp, EINVAL);
			return;
		}
	}

	dst = (uint8_t *)qp->inl_buf.addr + (size_t)qp->wr.slot * PVRDMA_MAX_INLINE;
	sge.addr = (uintptr_t)dst;
	sge.length = len;
	sge.lkey = len ? qp->inl_mr->lkey : 0;
	for (i = 0; i < num_buf; i++) {
		memcpy(dst, buf_list[i].addr, buf_list[i].length);
		dst += buf_list[i].length;
	}
	pvrdma_write_sges((struct pvrdma_sge *)(wqe + 1), &sge, len ? 1 : 0);
	wqe->num_sge = htole32(len ? 1 : 0);
}

static void pvrdma_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr,
				      size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	pvrdma_wr_set_inline_data_list(qpx, 1, &buf);
}

static void pvrdma_wr_start(struct ibv_qp_ex *qpx)
{
	struct pvrdma_qp *qp = qpx_to_qp(qpx);

	pvrdma_lock(&qp->sq.lock);
	qp->wr.prod = atomic_load_explicit(
		pvrdma_ring_atomic(&qp->sq.ring->prod_tail),
		memory_order_relaxed);
	qp->wr.count = 0;
	qp->wr.cur = NULL;
	/* IBA: the send queue takes WRs from RTS on (SQD, SQE, ERR too). */
	qp->wr.err = qp->state < IBV_QPS_RTS ? EINVAL : 0;
	if (!pvrdma_ring_idx_valid(qp->wr.prod, qp->sq.nelems))
		qp->wr.err = EIO;
}

static int pvrdma_wr_complete(struct ibv_qp_ex *qpx)
{
	struct pvrdma_context *ctx = to_pvrdma_ctx(qpx->qp_base.context);
	struct pvrdma_qp *qp = qpx_to_qp(qpx);
	int err;

	if (pvrdma_wr_addr_missing(qp))
		pvrdma_wr_fail(qp, EINVAL);
	err = qp->wr.err;
	if (!err && qp->wr.count) {
		/* The WQEs reach memory before prod_tail, both before the bell. */
		udma_to_device_barrier();
		atomic_store_explicit(pvrdma_ring_atomic(&qp->sq.ring->prod_tail),
				      qp->wr.prod, memory_order_release);
		if (pvrdma_sq_doorbell_needed(ctx, qp)) {
			udma_to_device_barrier();
			pvrdma_uar_write(ctx, PVRDMA_UAR_QP_OFFSET,
					 PVRDMA_UAR_QP_SEND, qp->qp_handle);
		}
	}
	qp->wr.cur = NULL;
	pvrdma_unlock(&qp->sq.lock);
	return err;
}

static void pvrdma_wr_abort(struct ibv_qp_ex *qpx)
{
	struct pvrdma_qp *qp = qpx_to_qp(qpx);

	qp->wr.cur = NULL;
	pvrdma_unlock(&qp->sq.lock);
}

/*
 * Offer the extended send API for the opcodes asked for; EOPNOTSUPP when
 * one of them is not this QP type's.
 */
int pvrdma_qp_ex_init(struct pvrdma_qp *qp, uint64_t send_ops_flags)
{
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;
	uint64_t supported;

	switch (qp->vqp.qp.qp_type) {
	case IBV_QPT_UD:
		supported = PVRDMA_UD_SEND_OPS;
		break;
	case IBV_QPT_UC:
		supported = PVRDMA_UC_SEND_OPS;
		break;
	default:
		supported = PVRDMA_RC_SEND_OPS;
		break;
	}
	if (qp->vqp.qp.qp_type != IBV_QPT_UD &&
	    to_pvrdma_ctx(qp->vqp.qp.context)->has_mw)
		supported |= IBV_QP_EX_WITH_BIND_MW;
	if ((qp->vqp.qp.qp_type == IBV_QPT_RC ||
	     qp->vqp.qp.qp_type == IBV_QPT_XRC_SEND) &&
	    to_pvrdma_ctx(qp->vqp.qp.context)->has_atomic_write)
		supported |= IBV_QP_EX_WITH_ATOMIC_WRITE;

	if (send_ops_flags & ~supported)
		return EOPNOTSUPP;

	qp->wr.ops = send_ops_flags;
	qpx->wr_atomic_cmp_swp = pvrdma_wr_atomic_cmp_swp;
	qpx->wr_atomic_fetch_add = pvrdma_wr_atomic_fetch_add;
	qpx->wr_atomic_write = pvrdma_wr_atomic_write;
	qpx->wr_bind_mw = pvrdma_wr_bind_mw;
	qpx->wr_local_inv = pvrdma_wr_local_inv;
	qpx->wr_rdma_read = pvrdma_wr_rdma_read;
	qpx->wr_rdma_write = pvrdma_wr_rdma_write;
	qpx->wr_rdma_write_imm = pvrdma_wr_rdma_write_imm;
	qpx->wr_send = pvrdma_wr_send;
	qpx->wr_send_imm = pvrdma_wr_send_imm;
	qpx->wr_send_inv = pvrdma_wr_send_inv;
	qpx->wr_send_tso = pvrdma_wr_send_tso;
	qpx->wr_set_ud_addr = pvrdma_wr_set_ud_addr;
	qpx->wr_set_xrc_srqn = pvrdma_wr_set_xrc_srqn;
	qpx->wr_set_inline_data = pvrdma_wr_set_inline_data;
	qpx->wr_set_inline_data_list = pvrdma_wr_set_inline_data_list;
	qpx->wr_set_sge = pvrdma_wr_set_sge;
	qpx->wr_set_sge_list = pvrdma_wr_set_sge_list;
	qpx->wr_start = pvrdma_wr_start;
	qpx->wr_complete = pvrdma_wr_complete;
	qpx->wr_abort = pvrdma_wr_abort;
	qp->vqp.comp_mask |= VERBS_QP_EX;
	return 0;
}
