// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Queue pairs and shared receive queues of the PVRDMA provider. The work
 * queues live in user memory: posting writes WQEs, publishes them with the
 * ring's producer index and rings one doorbell, without a system call.
 * XRC (spec §14): XRC_SEND QPs post like RC QPs, naming the responder's
 * XRC SRQ in each WQE; XRC_RECV QPs and XRC domains are the kernel's;
 * XRC SRQs take receive WQEs like basic SRQs.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <ccan/minmax.h>
#include <util/util.h>

#include "pvrdma.h"
#include "verbs.h"

/*
 * Size a work queue (spec §8.1): at least one WR and one SGE, the WR count
 * rounded up to a power of two, the WQE (header plus SGEs) rounded up to a
 * power of two. WQEs never straddle a page (spec §4), which bounds the SGE
 * count; buffer sizes travel in 32-bit udata fields (spec §9), which
 * bounds the WR count.
 */
static int pvrdma_wq_init(struct pvrdma_wq *wq, uint32_t max_wr,
			  uint32_t max_sge, size_t hdr_size, bool need_lock)
{
	uint64_t nelems, wqe_size;

	max_wr = max_t(uint32_t, max_wr, 1);
	max_sge = max_t(uint32_t, max_sge, 1);
	if (max_sge > (PVRDMA_PAGE_SIZE - hdr_size) / PVRDMA_SGE_SIZE)
		return EINVAL;

	nelems = roundup_pow_of_two(max_wr);
	wqe_size = roundup_pow_of_two(hdr_size + max_sge * PVRDMA_SGE_SIZE);
	if (nelems * wqe_size > UINT32_MAX / 2)
		return EINVAL;

	wq->nelems = nelems;
	wq->wqe_size = wqe_size;
	wq->max_sge = max_sge;
	return pvrdma_lock_init(&wq->lock, need_lock);
}

static size_t pvrdma_wq_bytes(const struct pvrdma_wq *wq)
{
	return (size_t)wq->nelems * wq->wqe_size;
}

static void *pvrdma_wq_get_wqe(struct pvrdma_wq *wq, uint32_t slot)
{
	return wq->wqes + (size_t)slot * wq->wqe_size;
}

/*
 * The receive CQ of a QP; an XRC_SEND QP, which receives nothing, has
 * none, and its send CQ stands in.
 */
static struct pvrdma_cq *pvrdma_qp_rcq(struct pvrdma_qp *qp)
{
	struct ibv_qp *ibvqp = &qp->vqp.qp;

	return to_pvrdma_cq(ibvqp->recv_cq ? ibvqp->recv_cq : ibvqp->send_cq);
}

/*
 * Both CQs of a QP, locked in cqn order so that two threads handling QPs
 * with swapped send and receive CQs cannot deadlock.
 */
static void pvrdma_lock_cqs(struct pvrdma_qp *qp)
{
	struct pvrdma_cq *scq = to_pvrdma_cq(qp->vqp.qp.send_cq);
	struct pvrdma_cq *rcq = pvrdma_qp_rcq(qp);

	if (scq == rcq) {
		pvrdma_lock(&scq->lock);
	} else if (scq->cqn < rcq->cqn) {
		pvrdma_lock(&scq->lock);
		pvrdma_lock(&rcq->lock);
	} else {
		pvrdma_lock(&rcq->lock);
		pvrdma_lock(&scq->lock);
	}
}

static void pvrdma_unlock_cqs(struct pvrdma_qp *qp)
{
	struct pvrdma_cq *scq = to_pvrdma_cq(qp->vqp.qp.send_cq);
	struct pvrdma_cq *rcq = pvrdma_qp_rcq(qp);

	if (scq != rcq)
		pvrdma_unlock(&rcq->lock);
	pvrdma_unlock(&scq->lock);
}

/* The caller holds the locks of both CQs. */
static void pvrdma_clean_cqs_locked(struct pvrdma_qp *qp)
{
	struct pvrdma_cq *scq = to_pvrdma_cq(qp->vqp.qp.send_cq);
	struct pvrdma_cq *rcq = pvrdma_qp_rcq(qp);

	pvrdma_cq_clean_locked(scq, qp->qp_handle);
	if (rcq != scq)
		pvrdma_cq_clean_locked(rcq, qp->qp_handle);
}

static void pvrdma_qp_caps(const struct pvrdma_qp *qp, struct ibv_qp_cap *cap)
{
	cap->max_send_wr = qp->sq.nelems;
	cap->max_send_sge = qp->sq.max_sge;
	cap->max_recv_wr = qp->rbuf.addr ? qp->rq.nelems : 0;
	cap->max_recv_sge = qp->rbuf.addr ? qp->rq.max_sge : 0;
	cap->max_inline_data = qp->max_inline;
}

/* The inline buffer and its MR (a QP that asked for inline data). */
static int pvrdma_qp_alloc_inline(struct pvrdma_qp *qp, struct ibv_pd *pd,
				  struct pvrdma_device *dev)
{
	int err;

	err = pvrdma_buf_alloc(&qp->inl_buf, dev, qp->pad,
			       PVRDMA_RES_TYPE_INLINE,
			       align((size_t)qp->sq.nelems * PVRDMA_MAX_INLINE,
				     dev->pg_sz));
	if (err)
		return err;
	qp->inl_mr = ibv_reg_mr(pd, qp->inl_buf.addr, qp->inl_buf.size, 0);
	if (!qp->inl_mr) {
		err = errno;
		pvrdma_buf_free(&qp->inl_buf);
		return err;
	}
	return 0;
}

static void pvrdma_qp_free_inline(struct pvrdma_qp *qp)
{
	if (!qp->inl_mr)
		return;
	ibv_dereg_mr(qp->inl_mr);
	pvrdma_buf_free(&qp->inl_buf);
	qp->inl_mr = NULL;
}

/*
 * Size and allocate the SQ buffer (ring-state page, then the SQ) and,
 * without an SRQ, the RQ buffer (spec §8.1); an XRC_SEND QP has no RQ.
 */
static int pvrdma_qp_alloc_bufs(struct pvrdma_qp *qp,
				struct pvrdma_device *dev,
				const struct ibv_qp_init_attr *attr)
{
	bool need_lock = !pvrdma_pad_single_thread(qp->pad);
	bool has_rq = !attr->srq && attr->qp_type != IBV_QPT_XRC_SEND;
	struct pvrdma_ring_state *ring_state;
	size_t pg_sz = dev->pg_sz;
	int err;

	err = pvrdma_wq_init(&qp->sq, attr->cap.max_send_wr,
			     attr->cap.max_send_sge, PVRDMA_SQ_WQE_HDR_SIZE,
			     need_lock);
	if (err)
		return err;
	/* The RQ lock is taken on RESET even without an RQ. */
	err = pvrdma_wq_init(&qp->rq, has_rq ? attr->cap.max_recv_wr : 1,
			     has_rq ? attr->cap.max_recv_sge : 1,
			     PVRDMA_RQ_WQE_HDR_SIZE, need_lock);
	if (err)
		goto err_destroy_sq_lock;

	err = pvrdma_buf_alloc(&qp->sbuf, dev, qp->pad, PVRDMA_RES_TYPE_SQ,
			       align(pg_sz + pvrdma_wq_bytes(&qp->sq), pg_sz));
	if (err)
		goto err_destroy_rq_lock;
	ring_state = qp->sbuf.addr;
	qp->sq.ring = &ring_state->tx;
	qp->sq.wqes = (uint8_t *)qp->sbuf.addr + pg_sz;
	qp->rq.ring = &ring_state->rx;

	if (has_rq) {
		err = pvrdma_buf_alloc(&qp->rbuf, dev, qp->pad,
				       PVRDMA_RES_TYPE_RQ,
				       align(pvrdma_wq_bytes(&qp->rq), pg_sz));
		if (err)
			goto err_free_sbuf;
		qp->rq.wqes = qp->rbuf.addr;
	}
	return 0;

err_free_sbuf:
	pvrdma_buf_free(&qp->sbuf);
err_destroy_rq_lock:
	pvrdma_lock_destroy(&qp->rq.lock);
err_destroy_sq_lock:
	pvrdma_lock_destroy(&qp->sq.lock);
	return err;
}

static void pvrdma_qp_free_bufs(struct pvrdma_qp *qp)
{
	pvrdma_buf_free(&qp->rbuf);
	pvrdma_buf_free(&qp->sbuf);
	pvrdma_lock_destroy(&qp->rq.lock);
	pvrdma_lock_destroy(&qp->sq.lock);
}

/*
 * Make the QP findable by poll_cq at qp_table[qp_handle & 0xFFFF] (spec
 * §9). A slot that is out of range or taken means the kernel handed out a
 * handle the table cannot hold.
 */
static int pvrdma_qp_table_insert(struct pvrdma_context *ctx,
				  struct pvrdma_qp *qp)
{
	uint32_t idx = qp->qp_handle & PVRDMA_QP_TABLE_INDEX_MASK;
	int err = 0;

	pthread_spin_lock(&ctx->qp_table_lock);
	pvrdma_lock_cqs(qp);
	if (idx >= ctx->qp_table_size || ctx->qp_table[idx])
		err = EIO;
	else
		ctx->qp_table[idx] = qp;
	pvrdma_unlock_cqs(qp);
	pthread_spin_unlock(&ctx->qp_table_lock);
	return err;
}

/* What ibv_create_qp_ex may ask of this device (create flags: none). */
#define PVRDMA_QP_INIT_ATTR_MASK (IBV_QP_INIT_ATTR_PD | \
				  IBV_QP_INIT_ATTR_XRCD | \
				  IBV_QP_INIT_ATTR_CREATE_FLAGS | \
				  IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)

/*
 * An XRC_RECV QP (spec §14) is created by the kernel in the domain,
 * without the provider's udata (the IB core hands the driver none for
 * it), and the device gives it no queue: the command is all there is.
 */
static struct ibv_qp *
pvrdma_create_qp_xrc_recv(struct ibv_context *ibvctx,
			  struct ibv_qp_init_attr_ex *attr)
{
	struct ib_uverbs_create_qp_resp resp = {};
	struct ibv_qp_init_attr_ex attr_ex = {};
	struct ibv_create_qp cmd = {};
	struct pvrdma_qp *qp;
	int err;

	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd ||
	    attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		errno = EINVAL;
		return NULL;
	}

	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}

	attr_ex.qp_context = attr->qp_context;
	attr_ex.qp_type = IBV_QPT_XRC_RECV;
	attr_ex.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	attr_ex.xrcd = attr->xrcd;
	err = ibv_cmd_create_qp_ex(ibvctx, &qp->vqp, &attr_ex, &cmd,
				   sizeof(cmd), &resp, sizeof(resp));
	if (err) {
		verbs_err(verbs_get_ctx(ibvctx), "CREATE_QP failed: %d\n",
			  err);
		free(qp);
		errno = err;
		return NULL;
	}

	qp->state = IBV_QPS_RESET;
	memset(&attr->cap, 0, sizeof(attr->cap));
	return &qp->vqp.qp;
}

struct ibv_qp *pvrdma_create_qp_ex(struct ibv_context *ibvctx,
				   struct ibv_qp_init_attr_ex *attr)
{
	struct pvrdma_context *ctx = to_pvrdma_ctx(ibvctx);
	struct pvrdma_device *dev = to_pvrdma_dev(ibvctx->device);
	struct pvrdma_ucmd_create_qp_resp resp = {};
	struct pvrdma_ucmd_create_qp cmd = {};
	struct ibv_qp_init_attr_ex attr_ex;
	struct ibv_qp_init_attr attr_sz;
	struct pvrdma_qp *qp;
	int err;

	if ((attr->comp_mask & ~PVRDMA_QP_INIT_ATTR_MASK) ||
	    (attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS &&
	     attr->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/*
	 * User space gets RC and UD QPs (spec §9), UC where the device has
	 * it (spec §14; the kernel refuses it otherwise), and the XRC QPs
	 * where it has XRC (spec §14).
	 */
	switch (attr->qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
		break;
	case IBV_QPT_XRC_SEND:
		if (!ctx->has_xrc) {
			errno = EOPNOTSUPP;
			return NULL;
		}
		break;
	case IBV_QPT_XRC_RECV:
		if (!ctx->has_xrc) {
			errno = EOPNOTSUPP;
			return NULL;
		}
		return pvrdma_create_qp_xrc_recv(ibvctx, attr);
	default:
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->cap.max_inline_data > PVRDMA_MAX_INLINE) {
		errno = EINVAL;
		return NULL;
	}

	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}

	qp->pad = pvrdma_parent_domain(attr->pd);
	memcpy(&attr_sz, attr, sizeof(attr_sz));
	err = pvrdma_qp_alloc_bufs(qp, dev, &attr_sz);
	if (err)
		goto err_free_qp;
	if (attr->cap.max_inline_data) {
		err = pvrdma_qp_alloc_inline(qp, attr->pd, dev);
		if (err)
			goto err_free_bufs;
		qp->max_inline = PVRDMA_MAX_INLINE;
	}

	cmd.sbuf_addr = (uintptr_t)qp->sbuf.addr;
	cmd.sbuf_size = qp->sbuf.size;
	cmd.rbuf_addr = (uintptr_t)qp->rbuf.addr;
	cmd.rbuf_size = qp->rbuf.size;
	cmd.qp_addr = (uintptr_t)qp;

	/*
	 * The device sizes the rings from these caps with the formulas of
	 * spec §8.1, so they must describe the buffers exactly. Inline data
	 * never reaches the device (it gets an SGE into inl_buf): 0 there.
	 * The kernel sees the PD only; the send ops are the provider's.
	 */
	attr_ex = *attr;
	attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	pvrdma_qp_caps(qp, &attr_ex.cap);
	attr_ex.cap.max_inline_data = 0;
	/* An XRC_SEND QP receives nothing: ibverbs ignores these. */
	if (attr->qp_type == IBV_QPT_XRC_SEND) {
		attr_ex.recv_cq = NULL;
		attr_ex.srq = NULL;
	}

	err = ibv_cmd_create_qp_ex(ibvctx, &qp->vqp, &attr_ex, &cmd.ibv_cmd,
				   sizeof(cmd), &resp.ibv_resp, sizeof(resp));
	if (err) {
		verbs_err(&ctx->ibvctx, "CREATE_QP failed: %d\n", err);
		goto err_free_bufs;
	}

	/* Device interface >= 20 returns a handle; 0 means "the qpn". */
	qp->qp_handle = resp.qp_handle ? resp.qp_handle : resp.qpn;
	qp->state = IBV_QPS_RESET;

	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		err = pvrdma_qp_ex_init(qp, attr->send_ops_flags);
		if (err)
			goto err_destroy_qp;
	}

	err = pvrdma_qp_table_insert(ctx, qp);
	if (err) {
		verbs_err(&ctx->ibvctx,
			  "CREATE_QP: handle %#x does not fit the QP table\n",
			  qp->qp_handle);
		goto err_destroy_qp;
	}

	pvrdma_qp_caps(qp, &attr->cap);
	pvrdma_pad_get(qp->pad);
	return &qp->vqp.qp;

err_destroy_qp:
	ibv_cmd_destroy_qp(&qp->vqp.qp);
err_free_bufs:
	pvrdma_qp_free_inline(qp);
	pvrdma_qp_free_bufs(qp);
err_free_qp:
	free(qp);
	errno = err;
	return NULL;
}

struct ibv_qp *pvrdma_create_qp(struct ibv_pd *ibvpd,
				struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex attr_ex = {};
	struct ibv_qp *qp;

	memcpy(&attr_ex, attr, sizeof(*attr));
	attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	attr_ex.pd = ibvpd;
	qp = pvrdma_create_qp_ex(ibvpd->context, &attr_ex);
	if (qp)
		attr->cap = attr_ex.cap;
	return qp;
}

/*
 * Open an XRC_RECV QP that another process created in a domain this one
 * opened too (spec §14): the kernel's, like one created here.
 */
struct ibv_qp *pvrdma_open_qp(struct ibv_context *ibvctx,
			      struct ibv_qp_open_attr *attr)
{
	struct ib_uverbs_create_qp_resp resp = {};
	struct ibv_open_qp cmd = {};
	struct pvrdma_qp *qp;
	int err;

	if (!to_pvrdma_ctx(ibvctx)->has_xrc) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->comp_mask & IBV_QP_OPEN_ATTR_TYPE &&
	    attr->qp_type != IBV_QPT_XRC_RECV) {
		errno = EINVAL;
		return NULL;
	}

	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	err = ibv_cmd_open_qp(ibvctx, &qp->vqp, sizeof(qp->vqp), attr, &cmd,
			      sizeof(cmd), &resp, sizeof(resp));
	if (err) {
		free(qp);
		errno = err;
		return NULL;
	}
	return &qp->vqp.qp;
}

int pvrdma_destroy_qp(struct ibv_qp *ibvqp)
{
	struct pvrdma_context *ctx = to_pvrdma_ctx(ibvqp->context);
	struct pvrdma_qp *qp = to_pvrdma_qp(ibvqp);
	int err;

	/* An XRC_RECV QP has nothing of the provider's but itself. */
	if (ibvqp->qp_type == IBV_QPT_XRC_RECV) {
		err = ibv_cmd_destroy_qp(ibvqp);
		if (err)
			return err;
		free(qp);
		return 0;
	}

	/*
	 * Out of the table first: the handle may be reused as soon as the
	 * kernel has destroyed the QP. Its CQEs go once the device has
	 * stopped producing them; poll_cq drops them in between.
	 */
	pthread_spin_lock(&ctx->qp_table_lock);
	pvrdma_lock_cqs(qp);
	ctx->qp_table[qp->qp_handle & PVRDMA_QP_TABLE_INDEX_MASK] = NULL;
	pvrdma_unlock_cqs(qp);
	pthread_spin_unlock(&ctx->qp_table_lock);

	err = ibv_cmd_destroy_qp(ibvqp);
	if (err) {
		verbs_err(&ctx->ibvctx, "DESTROY_QP %#x failed: %d\n",
			  qp->qp_handle, err);
		/* The QP lives on, so its handle is still ours. */
		pvrdma_qp_table_insert(ctx, qp);
		return err;
	}

	pvrdma_lock_cqs(qp);
	pvrdma_clean_cqs_locked(qp);
	pvrdma_unlock_cqs(qp);

	pvrdma_qp_free_inline(qp);
	pvrdma_qp_free_bufs(qp);
	pvrdma_pad_put(qp->pad);
	free(qp);
	return 0;
}

int pvrdma_modify_qp(struct ibv_qp *ibvqp, struct ibv_qp_attr *attr,
		     int attr_mask)
{
	struct pvrdma_qp *qp = to_pvrdma_qp(ibvqp);
	struct ibv_modify_qp cmd;
	bool reset;
	int err;

	err = ibv_cmd_modify_qp(ibvqp, attr, attr_mask, &cmd, sizeof(cmd));
	if (err)
		return err;
	/* An XRC_RECV QP has no ring and no CQ of its own. */
	if (!(attr_mask & (IBV_QP_STATE | IBV_QP_QKEY)) ||
	    ibvqp->qp_type == IBV_QPT_XRC_RECV)
		return 0;

	/*
	 * After RESET the QP starts from empty rings and leaves no CQEs
	 * behind (spec §5.3 MODIFY_QP, §9); the device no longer uses either.
	 */
	reset = (attr_mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET;
	if (reset) {
		pvrdma_lock_cqs(qp);
		pvrdma_clean_cqs_locked(qp);
		pvrdma_unlock_cqs(qp);
	}

	pvrdma_lock(&qp->sq.lock);
	pvrdma_lock(&qp->rq.lock);
	if (attr_mask & IBV_QP_STATE)
		qp->state = attr->qp_state;
	if (attr_mask & IBV_QP_QKEY)
		qp->qkey = attr->qkey;
	if (reset) {
		pvrdma_ring_reset(qp->sq.ring);
		pvrdma_ring_reset(qp->rq.ring);
	}
	pvrdma_unlock(&qp->rq.lock);
	pvrdma_unlock(&qp->sq.lock);
	return 0;
}

/* The ring sizes are the provider's; everything else is the device's. */
int pvrdma_query_qp(struct ibv_qp *ibvqp, struct ibv_qp_attr *attr,
		    int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct pvrdma_qp *qp = to_pvrdma_qp(ibvqp);
	struct ibv_query_qp cmd;
	int err;

	err = ibv_cmd_query_qp(ibvqp, attr, attr_mask, init_attr, &cmd,
			       sizeof(cmd));
	if (err)
		return err;

	pvrdma_qp_caps(qp, &attr->cap);
	init_attr->cap = attr->cap;
	return 0;
}

/*
 * ibverbs opcodes to device opcodes (spec §8.3). The two enums agree only
 * up to 6, so every opcode is translated explicitly; UD QPs only send,
 * UC QPs send and write, XRC_SEND QPs do what RC QPs do (spec §14).
 */
static int pvrdma_wr_opcode(enum ibv_qp_type qp_type,
			    enum ibv_wr_opcode opcode, uint32_t *wqe_opcode)
{
	if (qp_type == IBV_QPT_UD && opcode != IBV_WR_SEND &&
	    opcode != IBV_WR_SEND_WITH_IMM)
		return EINVAL;
	/* UC: no READ and no atomics (IBA 9.8.1). */
	if (qp_type == IBV_QPT_UC &&
	    (opcode == IBV_WR_RDMA_READ ||
	     opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	     opcode == IBV_WR_ATOMIC_FETCH_AND_ADD))
		return EINVAL;

	switch (opcode) {
	case IBV_WR_RDMA_WRITE:
		*wqe_opcode = PVRDMA_WR_RDMA_WRITE;
		return 0;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		*wqe_opcode = PVRDMA_WR_RDMA_WRITE_WITH_IMM;
		return 0;
	case IBV_WR_SEND:
		*wqe_opcode = PVRDMA_WR_SEND;
		return 0;
	case IBV_WR_SEND_WITH_IMM:
		*wqe_opcode = PVRDMA_WR_SEND_WITH_IMM;
		return 0;
	case IBV_WR_RDMA_READ:
		*wqe_opcode = PVRDMA_WR_RDMA_READ;
		return 0;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		*wqe_opcode = PVRDMA_WR_ATOMIC_CMP_AND_SWP;
		return 0;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		*wqe_opcode = PVRDMA_WR_ATOMIC_FETCH_AND_ADD;
		return 0;
	case IBV_WR_LOCAL_INV:
		*wqe_opcode = PVRDMA_WR_LOCAL_INV;
		return 0;
	case IBV_WR_SEND_WITH_INV:
		*wqe_opcode = PVRDMA_WR_SEND_WITH_INV;
		return 0;
	case IBV_WR_BIND_MW:
		*wqe_opcode = PVRDMA_WR_BIND_MW;
		return 0;
	default:
		return EINVAL;
	}
}

/*
 * Check a send WR and work out what its WQE carries; nothing is written to
 * the ring until the whole WR is known to be good.
 */
static int pvrdma_check_send_wr(struct pvrdma_qp *qp,
				const struct ibv_send_wr *wr, bool bind_type1,
				uint32_t *opcode, uint32_t *num_sge)
{
	uint64_t len = 0;
	int i, err;

	err = pvrdma_wr_opcode(qp->vqp.qp.qp_type, wr->opcode, opcode);
	if (err)
		return err;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->sq.max_sge)
		return EINVAL;
	if (qp->vqp.qp.qp_type == IBV_QPT_UD && !wr->wr.ud.ah)
		return EINVAL;
	/* SRQ numbers have 24 bits (spec §14). */
	if (qp->vqp.qp.qp_type == IBV_QPT_XRC_SEND &&
	    wr->qp_type.xrc.remote_srqn > PVRDMA_XRC_SRQN_MASK)
		return EINVAL;

	*num_sge = wr->num_sge;
	if (wr->opcode == IBV_WR_LOCAL_INV)
		*num_sge = 0;
	/* post_send binds type 2 windows; type 1 go through ibv_bind_mw. */
	if (wr->opcode == IBV_WR_BIND_MW) {
		if (!wr->bind_mw.mw ||
		    (wr->bind_mw.mw->type != IBV_MW_TYPE_2 && !bind_type1))
			return EINVAL;
		*num_sge = 0;
		return 0;
	}

	/*
	 * Inline: the bytes go to the slot's inline buffer (one SGE, or none
	 * for an empty WR); the WR's own lkeys need not be valid.
	 */
	if (wr->send_flags & IBV_SEND_INLINE) {
		for (i = 0; i < wr->num_sge; i++)
			len += wr->sg_list[i].length;
		if (len > qp->max_inline)
			return EINVAL;
		*num_sge = len ? 1 : 0;
	}
	return 0;
}

static void pvrdma_write_send_wqe(struct pvrdma_qp *qp,
				  struct pvrdma_sq_wqe_hdr *wqe,
				  const struct ibv_send_wr *wr,
				  const struct ibv_sge *sgl,
				  uint32_t opcode, uint32_t num_sge)
{
	const struct pvrdma_ah *ah;

	pvrdma_sq_wqe_init(wqe, wr->wr_id, wr->send_flags, opcode);
	wqe->num_sge = htole32(num_sge);

	switch (wr->opcode) {
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		wqe->ex.imm_data = wr->imm_data;
		break;
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_LOCAL_INV:
		wqe->ex.invalidate_rkey = htole32(wr->invalidate_rkey);
		break;
	default:
		break;
	}

	if (qp->vqp.qp.qp_type == IBV_QPT_UD) {
		ah = to_pvrdma_ah(wr->wr.ud.ah);
		wqe->wr.ud.remote_qpn = htole32(wr->wr.ud.remote_qpn);
		wqe->wr.ud.remote_qkey =
			htole32(pvrdma_ud_qkey(qp, wr->wr.ud.remote_qkey));
		wqe->wr.ud.av = ah->av;
	} else {
		/* The responder's XRC SRQ (spec §14). */
		if (qp->vqp.qp.qp_type == IBV_QPT_XRC_SEND)
			wqe->reserved = htole32(wr->qp_type.xrc.remote_srqn);
		switch (wr->opcode) {
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_WRITE_WITH_IMM:
		case IBV_WR_RDMA_READ:
			wqe->wr.rdma.remote_addr =
				htole64(wr->wr.rdma.remote_addr);
			wqe->wr.rdma.rkey = htole32(wr->wr.rdma.rkey);
			break;
		case IBV_WR_ATOMIC_CMP_AND_SWP:
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			wqe->wr.atomic.remote_addr =
				htole64(wr->wr.atomic.remote_addr);
			wqe->wr.atomic.compare_add =
				htole64(wr->wr.atomic.compare_add);
			wqe->wr.atomic.swap = htole64(wr->wr.atomic.swap);
			wqe->wr.atomic.rkey = htole32(wr->wr.atomic.rkey);
			break;
		case IBV_WR_BIND_MW:
			pvrdma_sq_wqe_bind_mw(wqe, wr->bind_mw.rkey,
					      &wr->bind_mw.bind_info);
			break;
		default:
			break;
		}
	}

	pvrdma_write_sges((struct pvrdma_sge *)(wqe + 1), sgl, num_sge);
}

/* Copy an inline WR's bytes to @slot's inline buffer: its one SGE. */
static void pvrdma_inline_sge(struct pvrdma_qp *qp, uint32_t slot,
			      const struct ibv_send_wr *wr,
			      struct ibv_sge *sge)
{
	uint8_t *dst = (uint8_t *)qp->inl_buf.addr +
		       (size_t)slot * PVRDMA_MAX_INLINE;
	uint32_t len = 0;
	int i;

	for (i = 0; i < wr->num_sge; i++) {
		memcpy(dst + len, (void *)(uintptr_t)wr->sg_list[i].addr,
		       wr->sg_list[i].length);
		len += wr->sg_list[i].length;
	}
	sge->addr = (uintptr_t)dst;
	sge->length = len;
	sge->lkey = qp->inl_mr->lkey;
}

_Static_assert(PVRDMA_RQ_DB_SKIP == PVRDMA_SQ_DB_SKIP, "one SKIP value");

/*
 * Whether WQEs just published need a doorbell, given the device's hint
 * word at @offset of the QP's ring-state page (when @hinted: the device
 * announced it): not while it reads SKIP.  The full barrier orders our
 * prod_tail before the hint's read, as the device orders its clearing of
 * the hint before its next read of prod_tail: one of us sees the other.
 */
static bool pvrdma_doorbell_needed(bool hinted, struct pvrdma_qp *qp,
				   size_t offset)
{
	const volatile uint32_t *hint;

	if (!hinted)
		return true;
	hint = (const volatile uint32_t *)((uint8_t *)qp->sbuf.addr + offset);
	atomic_thread_fence(memory_order_seq_cst);
	return le32toh(*hint) != PVRDMA_RQ_DB_SKIP;
}

/*
 * Send WQEs: the device reads the send queue again when an answer to the
 * QP's outstanding requests arrives (PVRDMA_UCTX_SQ_DB_HINT).
 */
bool pvrdma_sq_doorbell_needed(struct pvrdma_context *ctx,
			       struct pvrdma_qp *qp)
{
	return pvrdma_doorbell_needed(ctx->sq_db_hint, qp,
				      PVRDMA_RING_STATE_SQ_DB_HINT_OFFSET);
}


/*
 * Post send WRs (spec §8.5 send path): each WQE is written at
 * slot(prod_tail) and published by advancing prod_tail; one SEND doorbell
 * per call tells the device. On an error the WRs before *bad_wr are
 * posted.
 */
static int pvrdma_post_send_wrs(struct ibv_qp *ibvqp, struct ibv_send_wr *wr,
				struct ibv_send_wr **bad_wr, bool bind_type1)
{
	struct pvrdma_context *ctx = to_pvrdma_ctx(ibvqp->context);
	struct pvrdma_qp *qp = to_pvrdma_qp(ibvqp);
	uint32_t opcode, num_sge, slot;
	unsigned int nposted = 0;
	int ret, err = 0;

	/* An XRC_RECV QP has no send queue (spec §14). */
	if (ibvqp->qp_type == IBV_QPT_XRC_RECV) {
		*bad_wr = wr;
		return EINVAL;
	}

	pvrdma_lock(&qp->sq.lock);

	/* IBA: the send queue takes WRs from RTS on (SQD, SQE, ERR too). */
	if (qp->state < IBV_QPS_RTS) {
		err = EINVAL;
		goto out;
	}

	for (; wr; wr = wr->next) {
		err = pvrdma_check_send_wr(qp, wr, bind_type1, &opcode,
					   &num_sge);
		if (err)
			break;

		ret = pvrdma_ring_reserve(qp->sq.ring, qp->sq.nelems, &slot);
		if (ret <= 0) {
			err = ret ? EIO : ENOMEM;
			break;
		}

		if (wr->send_flags & IBV_SEND_INLINE) {
			struct ibv_sge sge = {};

			if (num_sge)
				pvrdma_inline_sge(qp, slot, wr, &sge);
			pvrdma_write_send_wqe(qp,
					      pvrdma_wq_get_wqe(&qp->sq, slot),
					      wr, &sge, opcode, num_sge);
		} else {
			pvrdma_write_send_wqe(qp,
					      pvrdma_wq_get_wqe(&qp->sq, slot),
					      wr, wr->sg_list, opcode, num_sge);
		}
		udma_to_device_barrier();
		pvrdma_ring_publish(qp->sq.ring, qp->sq.nelems);
		nposted++;
	}

	if (nposted && pvrdma_sq_doorbell_needed(ctx, qp)) {
		udma_to_device_barrier();
		pvrdma_uar_write(ctx, PVRDMA_UAR_QP_OFFSET, PVRDMA_UAR_QP_SEND,
				 qp->qp_handle);
	}
out:
	pvrdma_unlock(&qp->sq.lock);
	if (err)
		*bad_wr = wr;
	return err;
}

int pvrdma_post_send(struct ibv_qp *ibvqp, struct ibv_send_wr *wr,
		     struct ibv_send_wr **bad_wr)
{
	return pvrdma_post_send_wrs(ibvqp, wr, bad_wr, false);
}

/*
 * ibv_bind_mw (type 1 windows): a BIND_MW WQE on @ibvqp with the window's
 * next key, which the window takes once the WQE is posted (ibverbs
 * semantics: the caller uses mw->rkey right away).
 */
int pvrdma_bind_mw(struct ibv_qp *ibvqp, struct ibv_mw *mw,
		   struct ibv_mw_bind *mw_bind)
{
	struct ibv_send_wr wr = {}, *bad;
	int ret;

	wr.wr_id = mw_bind->wr_id;
	wr.send_flags = mw_bind->send_flags;
	wr.opcode = IBV_WR_BIND_MW;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = mw_bind->bind_info;
	ret = pvrdma_post_send_wrs(ibvqp, &wr, &bad, true);
	if (!ret)
		mw->rkey = wr.bind_mw.rkey;
	return ret;
}

/* Write receive WRs to a receive ring; returns the count posted. */
static unsigned int pvrdma_post_recv_wrs(struct pvrdma_wq *wq,
					 struct ibv_recv_wr *wr,
					 struct ibv_recv_wr **bad_wr, int *err)
{
	struct pvrdma_rq_wqe_hdr *wqe;
	unsigned int nposted = 0;
	uint32_t slot;
	int ret;

	*err = 0;
	for (; wr; wr = wr->next) {
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > wq->max_sge) {
			*err = EINVAL;
			break;
		}

		ret = pvrdma_ring_reserve(wq->ring, wq->nelems, &slot);
		if (ret <= 0) {
			*err = ret ? EIO : ENOMEM;
			break;
		}

		wqe = pvrdma_wq_get_wqe(wq, slot);
		wqe->wr_id = htole64(wr->wr_id);
		wqe->num_sge = htole32(wr->num_sge);
		wqe->total_len = 0;
		pvrdma_write_sges((struct pvrdma_sge *)(wqe + 1), wr->sg_list,
				  wr->num_sge);
		udma_to_device_barrier();
		pvrdma_ring_publish(wq->ring, wq->nelems);
		nposted++;
	}

	if (*err)
		*bad_wr = wr;
	return nposted;
}

/*
 * Receive WQEs: the device reads the RQ itself when messages arrive
 * (PVRDMA_UCTX_RQ_DB_HINT).
 */
static bool pvrdma_rq_doorbell_needed(struct pvrdma_context *ctx,
				      struct pvrdma_qp *qp)
{
	return pvrdma_doorbell_needed(ctx->rq_db_hint, qp,
				      PVRDMA_RING_STATE_RQ_DB_HINT_OFFSET);
}

int pvrdma_post_recv(struct ibv_qp *ibvqp, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad_wr)
{
	struct pvrdma_context *ctx = to_pvrdma_ctx(ibvqp->context);
	struct pvrdma_qp *qp = to_pvrdma_qp(ibvqp);
	int err;

	/* A QP on an SRQ, and an XRC QP, has no receive queue of its own. */
	if (!qp->rbuf.addr) {
		*bad_wr = wr;
		return EINVAL;
	}

	pvrdma_lock(&qp->rq.lock);
	/* IBA: the receive queue takes WRs in every state but RESET. */
	if (qp->state == IBV_QPS_RESET) {
		*bad_wr = wr;
		err = EINVAL;
	} else if (pvrdma_post_recv_wrs(&qp->rq, wr, bad_wr, &err) &&
		   pvrdma_rq_doorbell_needed(ctx, qp)) {
		/* The WQEs and prod_tail reach memory before the doorbell. */
		udma_to_device_barrier();
		pvrdma_uar_write(ctx, PVRDMA_UAR_QP_OFFSET, PVRDMA_UAR_QP_RECV,
				 qp->qp_handle);
	}
	pvrdma_unlock(&qp->rq.lock);
	return err;
}

/*
 * A new SRQ of @ibvpd (a PD or a parent domain) and its ring: @attr's
 * sizes rounded up (spec §8.1), the ring-state page, then the WQEs.
 */
static struct pvrdma_srq *pvrdma_srq_alloc(struct ibv_pd *ibvpd,
					   const struct ibv_srq_attr *attr)
{
	struct pvrdma_device *dev = to_pvrdma_dev(ibvpd->context->device);
	struct pvrdma_srq *srq;
	int err;

	srq = calloc(1, sizeof(*srq));
	if (!srq) {
		errno = ENOMEM;
		return NULL;
	}

	srq->pad = pvrdma_parent_domain(ibvpd);
	err = pvrdma_wq_init(&srq->wq, attr->max_wr, attr->max_sge,
			     PVRDMA_RQ_WQE_HDR_SIZE,
			     !pvrdma_pad_single_thread(srq->pad));
	if (err)
		goto err_free_srq;

	err = pvrdma_buf_alloc(&srq->buf, dev, srq->pad, PVRDMA_RES_TYPE_SRQ,
			       dev->pg_sz + align(pvrdma_wq_bytes(&srq->wq),
						  dev->pg_sz));
	if (err)
		goto err_destroy_lock;
	srq->wq.ring = &((struct pvrdma_ring_state *)srq->buf.addr)->rx;
	srq->wq.wqes = (uint8_t *)srq->buf.addr + dev->pg_sz;
	return srq;

err_destroy_lock:
	pvrdma_lock_destroy(&srq->wq.lock);
err_free_srq:
	free(srq);
	errno = err;
	return NULL;
}

static void pvrdma_srq_free(struct pvrdma_srq *srq)
{
	pvrdma_buf_free(&srq->buf);
	pvrdma_lock_destroy(&srq->wq.lock);
	free(srq);
}

/*
 * The kernel made the SRQ: the sizes it has, and its parent domain. The
 * context and PD are what ibv_create_srq sets after us, and what the
 * ibv_create_srq_ex paths have nobody else to set.
 */
static void pvrdma_srq_created(struct pvrdma_srq *srq, struct ibv_pd *ibvpd,
			       void *srq_context, struct ibv_srq_attr *attr)
{
	srq->vsrq.srq.srq_context = srq_context;
	srq->vsrq.srq.pd = ibvpd;
	attr->max_wr = srq->wq.nelems;
	attr->max_sge = srq->wq.max_sge;
	pvrdma_pad_get(srq->pad);
}

struct ibv_srq *pvrdma_create_srq(struct ibv_pd *ibvpd,
				  struct ibv_srq_init_attr *attr)
{
	struct pvrdma_ucmd_create_srq_resp resp = {};
	struct pvrdma_ucmd_create_srq cmd = {};
	struct ibv_srq_init_attr cmd_attr = *attr;
	struct pvrdma_srq *srq;
	int err;

	srq = pvrdma_srq_alloc(ibvpd, &attr->attr);
	if (!srq)
		return NULL;

	cmd.buf_addr = (uintptr_t)srq->buf.addr;
	cmd.buf_size = srq->buf.size;
	cmd_attr.attr.max_wr = srq->wq.nelems;
	cmd_attr.attr.max_sge = srq->wq.max_sge;
	err = ibv_cmd_create_srq(ibvpd, &srq->vsrq.srq, &cmd_attr,
				 &cmd.ibv_cmd, sizeof(cmd), &resp.ibv_resp,
				 sizeof(resp));
	if (err) {
		verbs_err(verbs_get_ctx(ibvpd->context),
			  "CREATE_SRQ failed: %d\n", err);
		pvrdma_srq_free(srq);
		errno = err;
		return NULL;
	}
	srq->srqn = resp.srqn;
	pvrdma_srq_created(srq, ibvpd, attr->srq_context, &attr->attr);
	return &srq->vsrq.srq;
}

/* What ibv_create_srq_ex may ask of this device. */
#define PVRDMA_SRQ_INIT_ATTR_MASK (IBV_SRQ_INIT_ATTR_TYPE | \
				   IBV_SRQ_INIT_ATTR_PD | \
				   IBV_SRQ_INIT_ATTR_XRCD | \
				   IBV_SRQ_INIT_ATTR_CQ)

/*
 * A basic SRQ, or an XRC SRQ where the device has XRC (spec §14): the
 * same ring in user memory, plus the domain and the CQ its receives
 * complete on. Its handle is also the SRQ number XRC senders name.
 */
struct ibv_srq *pvrdma_create_srq_ex(struct ibv_context *ibvctx,
				     struct ibv_srq_init_attr_ex *attr)
{
	struct pvrdma_ucmd_create_xsrq_resp resp = {};
	struct pvrdma_ucmd_create_xsrq cmd = {};
	struct ibv_srq_init_attr_ex cmd_attr;
	struct ibv_srq_init_attr basic;
	enum ibv_srq_type type;
	struct pvrdma_srq *srq;
	struct ibv_srq *ibvsrq;
	int err;

	if (attr->comp_mask & ~PVRDMA_SRQ_INIT_ATTR_MASK) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd ||
	    attr->pd->context != ibvctx) {
		errno = EINVAL;
		return NULL;
	}
	type = attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE ? attr->srq_type :
							   IBV_SRQT_BASIC;
	if (type == IBV_SRQT_BASIC) {
		basic.srq_context = attr->srq_context;
		basic.attr = attr->attr;
		ibvsrq = pvrdma_create_srq(attr->pd, &basic);
		if (ibvsrq)
			attr->attr = basic.attr;
		return ibvsrq;
	}
	if (type != IBV_SRQT_XRC || !to_pvrdma_ctx(ibvctx)->has_xrc) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd ||
	    !(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
		errno = EINVAL;
		return NULL;
	}

	srq = pvrdma_srq_alloc(attr->pd, &attr->attr);
	if (!srq)
		return NULL;

	cmd.buf_addr = (uintptr_t)srq->buf.addr;
	cmd.buf_size = srq->buf.size;
	cmd_attr = *attr;
	cmd_attr.attr.max_wr = srq->wq.nelems;
	cmd_attr.attr.max_sge = srq->wq.max_sge;
	err = ibv_cmd_create_srq_ex(ibvctx, &srq->vsrq, &cmd_attr,
				    &cmd.ibv_cmd, sizeof(cmd), &resp.ibv_resp,
				    sizeof(resp));
	if (err) {
		verbs_err(verbs_get_ctx(ibvctx), "CREATE_XSRQ failed: %d\n",
			  err);
		pvrdma_srq_free(srq);
		errno = err;
		return NULL;
	}
	srq->srqn = resp.srqn;
	pvrdma_srq_created(srq, attr->pd, attr->srq_context, &attr->attr);
	return &srq->vsrq.srq;
}

/* The number XRC senders name: an XRC SRQ's alone (spec §14). */
int pvrdma_get_srq_num(struct ibv_srq *ibvsrq, uint32_t *srq_num)
{
	struct pvrdma_srq *srq = to_pvrdma_srq(ibvsrq);

	if (srq->vsrq.srq_type != IBV_SRQT_XRC)
		return EINVAL;
	*srq_num = srq->vsrq.srq_num;
	return 0;
}

int pvrdma_destroy_srq(struct ibv_srq *ibvsrq)
{
	struct pvrdma_srq *srq = to_pvrdma_srq(ibvsrq);
	int err;

	err = ibv_cmd_destroy_srq(ibvsrq);
	if (err)
		return err;

	pvrdma_pad_put(srq->pad);
	pvrdma_srq_free(srq);
	return 0;
}

/*
 * The limit changes in place. A resize (IBV_SRQ_MAX_WR) hands the kernel
 * a new ring buffer laid out as at creation, and the device moves the
 * receive WQEs posted and not yet taken into it, in order (project
 * extension PVRDMA_EX_CAP_RESIZE_SRQ; without it, or under the stock
 * driver, the kernel refuses and the SRQ stays as it was). The SRQ lock
 * is held across the command, so that nothing is posted to the old ring
 * once the device has moved it.
 */
int pvrdma_modify_srq(struct ibv_srq *ibvsrq, struct ibv_srq_attr *attr,
		      int attr_mask)
{
	struct pvrdma_device *dev = to_pvrdma_dev(ibvsrq->context->device);
	struct pvrdma_srq *srq = to_pvrdma_srq(ibvsrq);
	struct pvrdma_ucmd_modify_srq cmd = {};
	struct ibv_modify_srq plain;
	struct ibv_srq_attr a = *attr;
	struct pvrdma_buf buf;
	uint32_t nelems;
	int err;

	if (attr_mask & ~(IBV_SRQ_LIMIT | IBV_SRQ_MAX_WR))
		return EINVAL;
	if (!(attr_mask & IBV_SRQ_MAX_WR))
		return ibv_cmd_modify_srq(ibvsrq, attr, attr_mask, &plain,
					  sizeof(plain));
	if (!attr->max_wr ||
	    attr->max_wr > (UINT32_MAX / 2) / srq->wq.wqe_size)
		return EINVAL;
	nelems = roundup_pow_of_two(attr->max_wr);
	err = pvrdma_buf_alloc(&buf, dev, srq->pad, PVRDMA_RES_TYPE_SRQ,
			       dev->pg_sz +
			       align((size_t)nelems * srq->wq.wqe_size,
				     dev->pg_sz));
	if (err)
		return err;
	a.max_wr = nelems;
	cmd.buf_addr = (uintptr_t)buf.addr;
	cmd.buf_size = buf.size;

	pvrdma_lock(&srq->wq.lock);
	err = ibv_cmd_modify_srq(ibvsrq, &a, attr_mask, &cmd.ibv_cmd,
				 sizeof(cmd));
	if (err) {
		pvrdma_unlock(&srq->wq.lock);
		pvrdma_buf_free(&buf);
		return err;
	}
	pvrdma_buf_free(&srq->buf);
	srq->buf = buf;
	srq->wq.ring = &((struct pvrdma_ring_state *)buf.addr)->rx;
	srq->wq.wqes = (uint8_t *)buf.addr + dev->pg_sz;
	srq->wq.nelems = nelems;
	pvrdma_unlock(&srq->wq.lock);
	return 0;
}

int pvrdma_query_srq(struct ibv_srq *ibvsrq, struct ibv_srq_attr *attr)
{
	struct pvrdma_srq *srq = to_pvrdma_srq(ibvsrq);
	struct ibv_query_srq cmd;
	int err;

	err = ibv_cmd_query_srq(ibvsrq, attr, &cmd, sizeof(cmd));
	if (err)
		return err;

	attr->max_wr = srq->wq.nelems;
	attr->max_sge = srq->wq.max_sge;
	return 0;
}

int pvrdma_post_srq_recv(struct ibv_srq *ibvsrq, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr)
{
	struct pvrdma_context *ctx = to_pvrdma_ctx(ibvsrq->context);
	struct pvrdma_srq *srq = to_pvrdma_srq(ibvsrq);
	int err;

	pvrdma_lock(&srq->wq.lock);
	if (pvrdma_post_recv_wrs(&srq->wq, wr, bad_wr, &err)) {
		/* The WQEs and prod_tail reach memory before the doorbell. */
		udma_to_device_barrier();
		pvrdma_uar_write(ctx, PVRDMA_UAR_SRQ_OFFSET,
				 PVRDMA_UAR_SRQ_RECV, srq->srqn);
	}
	pvrdma_unlock(&srq->wq.lock);
	return err;
}
