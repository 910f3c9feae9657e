// SPDX-License-Identifier: GPL-2.0-only
/*
 * Queue pairs: create/modify/query/destroy for RC, UC, UD and GSI QPs,
 * kernel and user (spec §5.3 CREATE_QP..DESTROY_QP, §8.1, §9), and XRC_INI
 * and XRC_TGT QPs (spec §14); and the kernel data path: post_send and
 * post_recv (spec §7, §8.2, §8.3).
 *
 * A QP's memory is one page directory: the ring-state page (SQ indices at
 * +0, RQ indices at +8), the SQ pages, then the RQ pages.  Kernel QPs own
 * their pages; user QPs hand in two buffers (SQ with the ring-state page
 * first, then RQ) that are pinned and described page by page.  An XRC_INI
 * QP (user space only) has no RQ buffer; an XRC_TGT QP has no memory at
 * all: its receives take WQEs from the XRC SRQ each message names.
 */
#include <linux/log2.h>
#include <rdma/ib_cache.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/vmw_pvrdma-abi.h>

#include "pvrdma.h"
#include "pvrdma_ring.h"

/* IB QP types, states and attribute bits are the device's (spec §5.4). */
static_assert(PVRDMA_QPT_GSI == (int)IB_QPT_GSI);
static_assert(PVRDMA_QPT_RC == (int)IB_QPT_RC);
static_assert(PVRDMA_QPT_UC == (int)IB_QPT_UC);
static_assert(PVRDMA_QPT_UD == (int)IB_QPT_UD);
static_assert(PVRDMA_QPT_XRC_INI == (int)IB_QPT_XRC_INI);
static_assert(PVRDMA_QPT_XRC_TGT == (int)IB_QPT_XRC_TGT);
static_assert(PVRDMA_QPS_ERR == (int)IB_QPS_ERR);
static_assert(PVRDMA_QP_DEST_QPN == (u32)IB_QP_DEST_QPN);
static_assert(PVRDMA_QP_CAP == (u32)IB_QP_CAP);

/* UD sends take the QP's Q_Key when bit 31 of the WR's Q_Key is set. */
#define PVRDMA_QKEY_FROM_QP		0x80000000u
#define PVRDMA_SEND_FLAGS_MASK						\
	(IB_SEND_FENCE | IB_SEND_SIGNALED | IB_SEND_SOLICITED |	\
	 IB_SEND_IP_CSUM)

/* A power of two >= @req (and >= 1), but never above @max. */
static u32 pvrdma_round_sge(u32 req, u32 max)
{
	u32 n = roundup_pow_of_two(req ? req : 1);

	return n < max ? n : max;
}

/**
 * pvrdma_wq_size_kernel() - size a kernel SQ, RQ or SRQ ring (spec §8.1)
 * @wq: the ring; wqe_cnt, max_sge and wqe_size are set
 * @max_wr: WRs asked for, rounded up to a power of two
 * @max_sge: SGEs asked for, rounded up to a power of two within the limits
 * @hdr_size: WQE header bytes (PVRDMA_SQ_WQE_HDR_SIZE or _RQ_)
 * @cap_wr: the device's WR limit
 * @cap_sge: the device's SGE limit
 *
 * The caps come from the device: a WQE must still fit in one page (spec
 * §4) and the WR count in a u32 once rounded up.
 *
 * Return: 0, or -EINVAL if the request exceeds a limit.
 */
int pvrdma_wq_size_kernel(struct pvrdma_wq *wq, u32 max_wr, u32 max_sge,
			  u32 hdr_size, u32 cap_wr, u32 cap_sge)
{
	u32 sge_limit = min_t(u32, cap_sge,
			      (PAGE_SIZE - hdr_size) / PVRDMA_SGE_SIZE);

	if (max_wr > cap_wr || max_wr > (1U << 31) || max_sge > sge_limit)
		return -EINVAL;
	wq->wqe_cnt = roundup_pow_of_two(max(max_wr, 1U));
	if (wq->wqe_cnt > cap_wr)
		return -EINVAL;
	wq->max_sge = pvrdma_round_sge(max_sge, sge_limit);
	wq->wqe_size = roundup_pow_of_two(hdr_size +
					  PVRDMA_SGE_SIZE * wq->max_sge);
	return 0;
}

/* Pages of a sized ring: at most 2^31 WQEs of at most one page each. */
u32 pvrdma_wq_pages(const struct pvrdma_wq *wq)
{
	return DIV_ROUND_UP((u64)wq->wqe_cnt * wq->wqe_size, PAGE_SIZE);
}

static void *pvrdma_wq_elem(struct pvrdma_wq *wq, struct pvrdma_pdir *pdir,
			    u32 slot)
{
	return pvrdma_pdir_elem(pdir, wq->first_page, slot, wq->wqe_size);
}

/* -------------------------------------------------------------------- */
/* Creation */

/*
 * Kernel QP sizing (spec §8.1): WR counts rounded up to powers of two,
 * SGE counts too (within caps.max_sge); the rounded values are written
 * back into @cap.
 */
static int pvrdma_qp_size_kernel(struct pvrdma_dev *dev, struct pvrdma_qp *qp,
				 struct ib_qp_cap *cap, bool has_rq)
{
	const struct pvrdma_device_caps *caps = &dev->caps;
	int ret;

	if (cap->max_inline_data)
		return -EINVAL;
	ret = pvrdma_wq_size_kernel(&qp->sq, cap->max_send_wr,
				    cap->max_send_sge, PVRDMA_SQ_WQE_HDR_SIZE,
				    caps->max_qp_wr, caps->max_sge);
	if (ret)
		return ret;
	if (has_rq) {
		ret = pvrdma_wq_size_kernel(&qp->rq, cap->max_recv_wr,
					    cap->max_recv_sge,
					    PVRDMA_RQ_WQE_HDR_SIZE,
					    caps->max_qp_wr, caps->max_sge);
		if (ret)
			return ret;
	}

	qp->max_send_wr = qp->sq.wqe_cnt;
	qp->max_send_sge = qp->sq.max_sge;
	qp->max_recv_wr = has_rq ? qp->rq.wqe_cnt : 0;
	qp->max_recv_sge = has_rq ? qp->rq.max_sge : 0;
	cap->max_send_wr = qp->max_send_wr;
	cap->max_send_sge = qp->max_send_sge;
	cap->max_recv_wr = qp->max_recv_wr;
	cap->max_recv_sge = qp->max_recv_sge;
	return 0;
}

/* Ring-state page, SQ pages, RQ pages, all driver-owned. */
static int pvrdma_qp_alloc_kernel(struct pvrdma_dev *dev, struct pvrdma_qp *qp,
				  bool has_rq, u16 *total_chunks,
				  u16 *send_chunks)
{
	struct pvrdma_ring_state *state;
	u32 sq_pages, rq_pages = 0;
	int ret;

	sq_pages = pvrdma_wq_pages(&qp->sq);
	if (has_rq)
		rq_pages = pvrdma_wq_pages(&qp->rq);
	if (1 + (u64)sq_pages + rq_pages > U16_MAX)
		return -EINVAL;

	ret = pvrdma_pdir_init(dev, &qp->pdir, 1 + sq_pages + rq_pages, true);
	if (ret)
		return ret;

	state = qp->pdir.pages[0];
	qp->sq.ring = &state->tx;
	qp->sq.first_page = 1;
	qp->rq.ring = &state->rx;
	qp->rq.first_page = 1 + sq_pages;
	*total_chunks = 1 + sq_pages + rq_pages;
	*send_chunks = sq_pages;
	return 0;
}

static struct ib_umem *pvrdma_qp_pin(struct pvrdma_dev *dev, u64 addr,
				     u32 size)
{
	if (!size || !PAGE_ALIGNED(addr))
		return ERR_PTR(-EINVAL);
	return ib_umem_get_va(&dev->ibdev, addr, size, IB_ACCESS_LOCAL_WRITE);
}

/*
 * User QP (spec §9): pin the provider's SQ buffer (ring-state page
 * first) and RQ buffer, PDIR = SQ pages then RQ pages.
 */
static int pvrdma_qp_pin_user(struct pvrdma_dev *dev, struct pvrdma_qp *qp,
			      struct ib_udata *udata, bool has_rq,
			      u16 *total_chunks, u16 *send_chunks)
{
	struct pvrdma_create_qp ucmd = {};
	unsigned int spages, rpages = 0;
	int ret;

	ret = pvrdma_udata_copy_in(udata, &ucmd, sizeof(ucmd),
				   offsetofend(typeof(ucmd), sbuf_size));
	if (ret)
		return ret;

	qp->sumem = pvrdma_qp_pin(dev, ucmd.sbuf_addr, ucmd.sbuf_size);
	if (IS_ERR(qp->sumem)) {
		ret = PTR_ERR(qp->sumem);
		qp->sumem = NULL;
		return ret;
	}
	spages = ib_umem_num_dma_blocks(qp->sumem, PAGE_SIZE);

	if (has_rq) {
		qp->rumem = pvrdma_qp_pin(dev, ucmd.rbuf_addr, ucmd.rbuf_size);
		if (IS_ERR(qp->rumem)) {
			ret = PTR_ERR(qp->rumem);
			qp->rumem = NULL;
			goto err_release;
		}
		rpages = ib_umem_num_dma_blocks(qp->rumem, PAGE_SIZE);
	}

	/* The ring-state page plus at least one SQ page. */
	if (spages < 2 || spages + rpages > U16_MAX) {
		ret = -EINVAL;
		goto err_release;
	}

	ret = pvrdma_pdir_init(dev, &qp->pdir, spages + rpages, false);
	if (ret)
		goto err_release;
	ret = pvrdma_pdir_insert_umem(&qp->pdir, qp->sumem, 0);
	if (!ret && qp->rumem)
		ret = pvrdma_pdir_insert_umem(&qp->pdir, qp->rumem, spages);
	if (ret)
		goto err_free_pdir;

	*total_chunks = spages + rpages;
	*send_chunks = spages - 1;
	return 0;

err_free_pdir:
	pvrdma_pdir_cleanup(dev, &qp->pdir);
err_release:
	ib_umem_release(qp->rumem);
	ib_umem_release(qp->sumem);
	qp->rumem = NULL;
	qp->sumem = NULL;
	return ret;
}

static void pvrdma_qp_free_rings(struct pvrdma_dev *dev, struct pvrdma_qp *qp)
{
	pvrdma_pdir_cleanup(dev, &qp->pdir);
	ib_umem_release(qp->rumem);
	ib_umem_release(qp->sumem);
	qp->rumem = NULL;
	qp->sumem = NULL;
}

static void pvrdma_destroy_qp_cmd(struct pvrdma_dev *dev, u32 qp_handle)
{
	union pvrdma_cmd_req req = {};

	req.destroy_qp.hdr.cmd = PVRDMA_CMD_DESTROY_QP;
	req.destroy_qp.qp_handle = qp_handle;
	/* Failures are logged by the command layer; the QP is gone anyway. */
	pvrdma_cmd_post(dev, &req, NULL);
}

/*
 * Take the QP out of the handle table, then wait for the async event path
 * to drop its references.
 */
static void pvrdma_qp_tbl_remove(struct pvrdma_dev *dev, struct pvrdma_qp *qp)
{
	unsigned long flags;

	spin_lock_irqsave(&dev->tbl_lock, flags);
	dev->qp_tbl[qp->qp_handle] = NULL;
	spin_unlock_irqrestore(&dev->tbl_lock, flags);
	if (refcount_dec_and_test(&qp->refcnt))
		complete(&qp->free);
	wait_for_completion(&qp->free);
}

static int pvrdma_qp_check_init(struct pvrdma_dev *dev,
				struct ib_qp_init_attr *init,
				struct ib_udata *udata)
{
	switch (init->qp_type) {
	case IB_QPT_RC:
	case IB_QPT_UD:
		break;
	case IB_QPT_UC:
		/* A project extension the device announces (spec §14). */
		if (!(dev->caps.ex_comp_mask & PVRDMA_EX_CAP_UC))
			return -EOPNOTSUPP;
		break;
	case IB_QPT_GSI:
		if (udata)
			return -EOPNOTSUPP;
		break;
	case IB_QPT_XRC_INI:
		/* Kernel ULPs have no XRC send WRs: user space only. */
		if (!pvrdma_has_xrc(dev) || !udata)
			return -EOPNOTSUPP;
		if (init->srq)
			return -EINVAL;
		break;
	case IB_QPT_XRC_TGT:
		/*
		 * The IB core creates it without udata, also for user space,
		 * and with a domain in place of a PD and CQs.
		 */
		if (!pvrdma_has_xrc(dev))
			return -EOPNOTSUPP;
		if (!init->xrcd || udata)
			return -EINVAL;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (init->create_flags)
		return -EOPNOTSUPP;
	if (init->srq && !dev->caps.max_srq)
		return -EOPNOTSUPP;
	if (init->port_num > 1)
		return -EINVAL;
	return 0;
}

/* CREATE_QP of a QP with queues, sized and in memory (spec §5.3). */
static void pvrdma_qp_cmd_queues(struct pvrdma_cmd_create_qp *cmd,
				 struct pvrdma_qp *qp,
				 struct ib_qp_init_attr *init, u16 total_chunks,
				 u16 send_chunks)
{
	cmd->hdr.cmd = PVRDMA_CMD_CREATE_QP;
	cmd->pdir_dma = qp->pdir.dir_dma;
	cmd->pd_handle = to_ppd(qp->ibqp.pd)->pd_handle;
	cmd->send_cq_handle = to_pcq(init->send_cq)->cq_handle;
	/* An XRC_INI QP receives nothing: no receive CQ (spec §14). */
	if (init->qp_type != IB_QPT_XRC_INI)
		cmd->recv_cq_handle = to_pcq(init->recv_cq)->cq_handle;
	if (init->srq) {
		cmd->srq_handle = to_psrq(init->srq)->srq_handle;
		cmd->is_srq = 1;
	}
	cmd->max_send_wr = qp->max_send_wr;
	cmd->max_recv_wr = qp->max_recv_wr;
	cmd->max_send_sge = qp->max_send_sge;
	cmd->max_recv_sge = qp->max_recv_sge;
	cmd->max_inline_data = 0;
	cmd->access_flags = IB_ACCESS_LOCAL_WRITE;
	cmd->total_chunks = total_chunks;
	cmd->send_chunks = send_chunks;
	cmd->sq_sig_all = qp->sq_sig_all;
	cmd->qp_type = init->qp_type;
}

/*
 * CREATE_QP of an XRC_TGT QP (spec §14): the extended request naming the
 * domain, and nothing else: no PD, CQ, SRQ, queue or page.
 */
static void pvrdma_qp_cmd_xrc_tgt(union pvrdma_cmd_req *req,
				  struct ib_qp_init_attr *init)
{
	req->create_qp_ex.qp.hdr.cmd = PVRDMA_CMD_CREATE_QP;
	req->create_qp_ex.qp.qp_type = PVRDMA_QPT_XRC_TGT;
	req->create_qp_ex.xrcd_handle = to_pxrcd(init->xrcd)->xrcd_handle;
}

/**
 * pvrdma_create_qp() - create an RC, UC, UD, GSI, XRC_INI or XRC_TGT QP
 * @ibqp: QP allocated by the IB core
 * @init: attributes; for kernel QPs the capabilities are written back
 * @udata: user data (struct pvrdma_create_qp), NULL for kernel QPs and
 *	   for XRC_TGT QPs
 *
 * Return: 0 or a negative errno.
 */
int pvrdma_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		     struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibqp->device);
	struct pvrdma_qp *qp = to_pqp(ibqp);
	struct pvrdma_create_qp_resp uresp = {};
	union pvrdma_cmd_req req = {};
	union pvrdma_cmd_resp resp;
	bool xrc_tgt = init->qp_type == IB_QPT_XRC_TGT;
	bool has_rq = !init->srq && init->qp_type != IB_QPT_XRC_INI;
	u16 total_chunks = 0, send_chunks = 0;
	unsigned long flags;
	u32 qpn;
	int ret;

	ret = pvrdma_qp_check_init(dev, init, udata);
	if (ret)
		return ret;

	if ((u32)atomic_inc_return(&dev->num_qps) > dev->caps.max_qp) {
		ret = -ENOMEM;
		goto err_dec_count;
	}

	mutex_init(&qp->mutex);
	spin_lock_init(&qp->sq.lock);
	spin_lock_init(&qp->rq.lock);
	refcount_set(&qp->refcnt, 1);
	init_completion(&qp->free);
	qp->state = IB_QPS_RESET;
	qp->sq_sig_all = init->sq_sig_type == IB_SIGNAL_ALL_WR;

	/* An XRC_TGT QP has no memory (and never udata). */
	if (udata) {
		/* The provider sized its rings; the device checks them. */
		qp->max_send_wr = init->cap.max_send_wr;
		qp->max_send_sge = init->cap.max_send_sge;
		qp->max_recv_wr = has_rq ? init->cap.max_recv_wr : 0;
		qp->max_recv_sge = has_rq ? init->cap.max_recv_sge : 0;
		/* No inline data (spec §8.3); uverbs reports this back. */
		init->cap.max_inline_data = 0;
		ret = pvrdma_qp_pin_user(dev, qp, udata, has_rq, &total_chunks,
					 &send_chunks);
	} else if (!xrc_tgt) {
		ret = pvrdma_qp_size_kernel(dev, qp, &init->cap, has_rq);
		if (!ret)
			ret = pvrdma_qp_alloc_kernel(dev, qp, has_rq,
						     &total_chunks,
						     &send_chunks);
	}
	if (ret)
		goto err_dec_count;

	if (xrc_tgt)
		pvrdma_qp_cmd_xrc_tgt(&req, init);
	else
		pvrdma_qp_cmd_queues(&req.create_qp, qp, init, total_chunks,
				     send_chunks);

	/* A handle DESTROY_QP frees is reused only once its CQEs are gone. */
	mutex_lock(&dev->qp_handle_lock);
	ret = pvrdma_cmd_post(dev, &req, &resp);
	if (ret) {
		mutex_unlock(&dev->qp_handle_lock);
		goto err_free_rings;
	}
	if (dev->version >= PVRDMA_VERSION_QPHANDLE) {
		qpn = resp.create_qp_resp_v2.qpn;
		qp->qp_handle = resp.create_qp_resp_v2.qp_handle;
	} else {
		qpn = resp.create_qp_resp.qpn;
		qp->qp_handle = qpn;
	}

	ret = -EIO;
	if (qp->qp_handle >= dev->caps.max_qp) {
		mutex_unlock(&dev->qp_handle_lock);
		pvrdma_err_qp(qp, "device returned an out-of-range QP handle\n");
		goto err_destroy_qp;
	}
	/* The IB core and the MAD layer address the GSI QP as QP1. */
	if (init->qp_type == IB_QPT_GSI && qpn != 1) {
		mutex_unlock(&dev->qp_handle_lock);
		pvrdma_err_qp(qp, "device gave the GSI QP number %u\n", qpn);
		goto err_destroy_qp;
	}

	spin_lock_irqsave(&dev->tbl_lock, flags);
	if (!dev->qp_tbl[qp->qp_handle]) {
		dev->qp_tbl[qp->qp_handle] = qp;
		ret = 0;
	}
	spin_unlock_irqrestore(&dev->tbl_lock, flags);
	mutex_unlock(&dev->qp_handle_lock);
	if (ret) {
		pvrdma_err_qp(qp, "device reused a live QP handle\n");
		/* Must not destroy the handle: it belongs to the live QP. */
		goto err_free_rings;
	}
	ibqp->qp_num = qpn;

	if (udata) {
		uresp.qpn = qpn;
		uresp.qp_handle = qp->qp_handle;
		/* An old provider (no qp_handle) works only if they agree. */
		if (qp->qp_handle != qpn &&
		    udata->outlen < offsetofend(typeof(uresp), qp_handle)) {
			ret = -EOPNOTSUPP;
			goto err_remove_qp;
		}
		ret = ib_copy_to_udata(udata, &uresp,
				       min_t(size_t, udata->outlen,
					     sizeof(uresp)));
		if (ret)
			goto err_remove_qp;
	}

	pvrdma_dbg_qp(qp, "type %u qpn %u, %u pages (%u SQ), %s\n",
		      init->qp_type, qpn, total_chunks, send_chunks,
		      udata || xrc_tgt ? "user" : "kernel");
	return 0;

err_remove_qp:
	pvrdma_qp_tbl_remove(dev, qp);
err_destroy_qp:
	pvrdma_destroy_qp_cmd(dev, qp->qp_handle);
err_free_rings:
	pvrdma_qp_free_rings(dev, qp);
err_dec_count:
	atomic_dec(&dev->num_qps);
	return ret;
}

/* -------------------------------------------------------------------- */
/* Modify, query */

static void pvrdma_ah_attr_to_dev(struct pvrdma_ah_attr *dst,
				  const struct rdma_ah_attr *src)
{
	const struct ib_global_route *grh = rdma_ah_read_grh(src);

	memcpy(dst->grh.dgid, grh->dgid.raw, sizeof(dst->grh.dgid));
	dst->grh.flow_label = grh->flow_label;
	dst->grh.sgid_index = grh->sgid_index;
	dst->grh.hop_limit = grh->hop_limit;
	dst->grh.traffic_class = grh->traffic_class;
	dst->sl = rdma_ah_get_sl(src);
	dst->src_path_bits = rdma_ah_get_path_bits(src);
	dst->static_rate = rdma_ah_get_static_rate(src);
	dst->ah_flags = rdma_ah_get_ah_flags(src) & IB_AH_GRH ?
			PVRDMA_AH_FLAG_GRH : 0;
	dst->port_num = rdma_ah_get_port_num(src);
	if (src->type == RDMA_AH_ATTR_TYPE_ROCE)
		memcpy(dst->dmac, src->roce.dmac, sizeof(dst->dmac));
}

static void pvrdma_ah_attr_from_dev(struct pvrdma_dev *dev,
				    struct rdma_ah_attr *dst,
				    const struct pvrdma_ah_attr *src)
{
	union ib_gid dgid;

	memset(dst, 0, sizeof(*dst));
	dst->type = rdma_ah_find_type(&dev->ibdev, PVRDMA_PORT);
	rdma_ah_set_sl(dst, src->sl);
	rdma_ah_set_static_rate(dst, src->static_rate);
	rdma_ah_set_port_num(dst, src->port_num);
	if (src->ah_flags & PVRDMA_AH_FLAG_GRH) {
		memcpy(dgid.raw, src->grh.dgid, sizeof(dgid.raw));
		rdma_ah_set_grh(dst, &dgid, src->grh.flow_label,
				src->grh.sgid_index, src->grh.hop_limit,
				src->grh.traffic_class);
	}
	if (dst->type == RDMA_AH_ATTR_TYPE_ROCE)
		memcpy(dst->roce.dmac, src->dmac, sizeof(dst->roce.dmac));
}

/*
 * Every attribute the mask names, in the device layout; the others stay
 * zero, which also keeps the reserved fields zero (spec §5.4).
 */
static void pvrdma_qp_attr_to_dev(struct pvrdma_qp_attr *dst,
				  const struct ib_qp_attr *src, int mask)
{
	if (mask & IB_QP_STATE)
		dst->qp_state = src->qp_state;
	if (mask & IB_QP_CUR_STATE)
		dst->cur_qp_state = src->cur_qp_state;
	if (mask & IB_QP_EN_SQD_ASYNC_NOTIFY)
		dst->en_sqd_async_notify = src->en_sqd_async_notify;
	if (mask & IB_QP_ACCESS_FLAGS)
		dst->qp_access_flags = src->qp_access_flags;
	if (mask & IB_QP_PKEY_INDEX)
		dst->pkey_index = src->pkey_index;
	if (mask & IB_QP_PORT)
		dst->port_num = src->port_num;
	if (mask & IB_QP_QKEY)
		dst->qkey = src->qkey;
	if (mask & IB_QP_AV)
		pvrdma_ah_attr_to_dev(&dst->ah_attr, &src->ah_attr);
	if (mask & IB_QP_PATH_MTU)
		dst->path_mtu = src->path_mtu;
	if (mask & IB_QP_TIMEOUT)
		dst->timeout = src->timeout;
	if (mask & IB_QP_RETRY_CNT)
		dst->retry_cnt = src->retry_cnt;
	if (mask & IB_QP_RNR_RETRY)
		dst->rnr_retry = src->rnr_retry;
	if (mask & IB_QP_RQ_PSN)
		dst->rq_psn = src->rq_psn;
	if (mask & IB_QP_MAX_QP_RD_ATOMIC)
		dst->max_rd_atomic = src->max_rd_atomic;
	if (mask & IB_QP_ALT_PATH) {
		pvrdma_ah_attr_to_dev(&dst->alt_ah_attr, &src->alt_ah_attr);
		dst->alt_pkey_index = src->alt_pkey_index;
		dst->alt_port_num = src->alt_port_num;
		dst->alt_timeout = src->alt_timeout;
	}
	if (mask & IB_QP_MIN_RNR_TIMER)
		dst->min_rnr_timer = src->min_rnr_timer;
	if (mask & IB_QP_SQ_PSN)
		dst->sq_psn = src->sq_psn;
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC)
		dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	if (mask & IB_QP_PATH_MIG_STATE)
		dst->path_mig_state = src->path_mig_state;
	if (mask & IB_QP_CAP) {
		dst->cap.max_send_wr = src->cap.max_send_wr;
		dst->cap.max_recv_wr = src->cap.max_recv_wr;
		dst->cap.max_send_sge = src->cap.max_send_sge;
		dst->cap.max_recv_sge = src->cap.max_recv_sge;
		dst->cap.max_inline_data = src->cap.max_inline_data;
	}
	if (mask & IB_QP_DEST_QPN)
		dst->dest_qp_num = src->dest_qp_num;
}

/*
 * After a transition to RESET the QP's queues are empty (spec §5.3
 * MODIFY_QP): the completions it left in kernel CQs go, and the indices
 * of a kernel QP's rings restart at zero.  A user QP's rings are the
 * provider's; an XRC_TGT QP has none (nor CQs).
 */
static void pvrdma_qp_reset_rings(struct pvrdma_qp *qp)
{
	struct pvrdma_wq *wqs[] = { &qp->sq, &qp->rq };
	unsigned long flags;
	int i;

	if (qp->ibqp.send_cq)
		pvrdma_cq_purge_qp(to_pcq(qp->ibqp.send_cq), qp->qp_handle);
	if (qp->ibqp.recv_cq && qp->ibqp.recv_cq != qp->ibqp.send_cq)
		pvrdma_cq_purge_qp(to_pcq(qp->ibqp.recv_cq), qp->qp_handle);

	if (!qp->sq.ring)
		return;
	for (i = 0; i < ARRAY_SIZE(wqs); i++) {
		spin_lock_irqsave(&wqs[i]->lock, flags);
		WRITE_ONCE(wqs[i]->ring->prod_tail, 0);
		WRITE_ONCE(wqs[i]->ring->cons_head, 0);
		spin_unlock_irqrestore(&wqs[i]->lock, flags);
	}
}

static int pvrdma_modify_qp_check(struct pvrdma_dev *dev,
				  struct pvrdma_qp *qp,
				  const struct ib_qp_attr *attr, int mask,
				  enum ib_qp_state cur, enum ib_qp_state next)
{
	if (mask & ~PVRDMA_QP_ATTR_MASK_MAX)
		return -EOPNOTSUPP;
	if (!ib_modify_qp_is_ok(cur, next, qp->ibqp.qp_type, mask)) {
		pvrdma_dbg_qp(qp, "invalid transition %d -> %d, mask %#x\n",
			      cur, next, mask);
		return -EINVAL;
	}
	/* The driver drives port 1 only, whatever phys_port_cnt says. */
	if ((mask & IB_QP_PORT) && attr->port_num != PVRDMA_PORT)
		return -EINVAL;
	if ((mask & IB_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31)
		return -EINVAL;
	if ((mask & IB_QP_PKEY_INDEX) &&
	    attr->pkey_index >= dev->caps.max_pkeys)
		return -EINVAL;
	if ((mask & IB_QP_AV) &&
	    !(rdma_ah_get_ah_flags(&attr->ah_attr) & IB_AH_GRH))
		return -EINVAL;
	return 0;
}

/**
 * pvrdma_modify_qp() - MODIFY_QP (spec §5.3)
 * @ibqp: QP
 * @attr: attributes
 * @attr_mask: IB_QP_* bits naming the valid attributes
 * @udata: must carry no driver data
 *
 * Return: 0 or a negative errno.
 */
int pvrdma_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
		     int attr_mask, struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibqp->device);
	struct pvrdma_qp *qp = to_pqp(ibqp);
	union pvrdma_cmd_req req = {};
	union pvrdma_cmd_resp resp;
	enum ib_qp_state cur, next;
	int ret;

	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EINVAL;

	mutex_lock(&qp->mutex);
	cur = attr_mask & IB_QP_CUR_STATE ? attr->cur_qp_state : qp->state;
	next = attr_mask & IB_QP_STATE ? attr->qp_state : cur;

	ret = pvrdma_modify_qp_check(dev, qp, attr, attr_mask, cur, next);
	if (ret)
		goto out_unlock;

	/* RESET to RESET changes nothing the device would see. */
	if (cur == IB_QPS_RESET && next == IB_QPS_RESET)
		goto out_unlock;

	req.modify_qp.hdr.cmd = PVRDMA_CMD_MODIFY_QP;
	req.modify_qp.qp_handle = qp->qp_handle;
	req.modify_qp.attr_mask = attr_mask;
	pvrdma_qp_attr_to_dev(&req.modify_qp.attrs, attr, attr_mask);
	ret = pvrdma_cmd_post(dev, &req, &resp);
	if (!ret && resp.hdr.err) {
		pvrdma_stat_inc(dev, PVRDMA_STAT_CMD_ERR);
		pvrdma_err_qp(qp, "device refused %d -> %d (mask %#x): error %u\n",
			      cur, next, attr_mask, resp.hdr.err);
		ret = -EINVAL;
	}
	if (ret)
		goto out_unlock;

	WRITE_ONCE(qp->state, next);
	if (attr_mask & IB_QP_QKEY)
		qp->qkey = attr->qkey;
	if (next == IB_QPS_RESET)
		pvrdma_qp_reset_rings(qp);
	pvrdma_dbg_qp(qp, "%d -> %d, mask %#x\n", cur, next, attr_mask);

out_unlock:
	mutex_unlock(&qp->mutex);
	return ret;
}

static void pvrdma_qp_attr_from_dev(struct pvrdma_dev *dev,
				    struct ib_qp_attr *dst,
				    const struct pvrdma_qp_attr *src)
{
	dst->qp_state = src->qp_state;
	dst->cur_qp_state = src->cur_qp_state;
	dst->path_mtu = src->path_mtu >= IB_MTU_256 &&
			src->path_mtu <= IB_MTU_4096 ? src->path_mtu : 0;
	dst->path_mig_state = src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = src->qp_access_flags & PVRDMA_ACCESS_FLAGS_MASK;
	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
	pvrdma_ah_attr_from_dev(dev, &dst->ah_attr, &src->ah_attr);
	pvrdma_ah_attr_from_dev(dev, &dst->alt_ah_attr, &src->alt_ah_attr);
}

/**
 * pvrdma_query_qp() - QUERY_QP (spec §5.3); the device's attributes
 * @ibqp: QP
 * @attr: filled with the device's attributes
 * @attr_mask: attributes asked for (the device returns all of them)
 * @init: filled with the creation attributes
 *
 * Return: 0 or a negative errno.
 */
int pvrdma_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
		    int attr_mask, struct ib_qp_init_attr *init)
{
	struct pvrdma_dev *dev = to_pvdev(ibqp->device);
	struct pvrdma_qp *qp = to_pqp(ibqp);
	union pvrdma_cmd_req req = {};
	union pvrdma_cmd_resp resp;
	int ret = 0;

	memset(attr, 0, sizeof(*attr));
	memset(init, 0, sizeof(*init));

	mutex_lock(&qp->mutex);
	if (qp->state == IB_QPS_RESET) {
		/* A QP in RESET has no attributes to ask for. */
		attr->qp_state = IB_QPS_RESET;
		attr->cur_qp_state = IB_QPS_RESET;
	} else {
		req.query_qp.hdr.cmd = PVRDMA_CMD_QUERY_QP;
		req.query_qp.qp_handle = qp->qp_handle;
		req.query_qp.attr_mask = attr_mask & PVRDMA_QP_ATTR_MASK_MAX;
		ret = pvrdma_cmd_post(dev, &req, &resp);
		if (ret)
			goto out_unlock;
		if (resp.query_qp_resp.attrs.qp_state > IB_QPS_ERR) {
			pvrdma_err_qp(qp, "device reports state %u\n",
				      resp.query_qp_resp.attrs.qp_state);
			ret = -EIO;
			goto out_unlock;
		}
		pvrdma_qp_attr_from_dev(dev, attr, &resp.query_qp_resp.attrs);
		WRITE_ONCE(qp->state, attr->qp_state);
	}

	attr->cap.max_send_wr = qp->max_send_wr;
	attr->cap.max_recv_wr = qp->max_recv_wr;
	attr->cap.max_send_sge = qp->max_send_sge;
	attr->cap.max_recv_sge = qp->max_recv_sge;
	attr->cap.max_inline_data = 0;

	init->event_handler = ibqp->event_handler;
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->xrcd = ibqp->xrcd;
	init->cap = attr->cap;
	init->sq_sig_type = qp->sq_sig_all ? IB_SIGNAL_ALL_WR :
					     IB_SIGNAL_REQ_WR;
	init->qp_type = ibqp->qp_type;
	init->port_num = ibqp->port;

out_unlock:
	mutex_unlock(&qp->mutex);
	return ret;
}

/* -------------------------------------------------------------------- */
/* Destruction */

/**
 * pvrdma_destroy_qp() - destroy is create in reverse
 * @ibqp: QP
 * @udata: unused
 *
 * Return: 0; a device failure is logged, the QP is gone for the guest.
 */
int pvrdma_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibqp->device);
	struct pvrdma_qp *qp = to_pqp(ibqp);

	pvrdma_qp_tbl_remove(dev, qp);

	mutex_lock(&dev->qp_handle_lock);
	/* The device must not touch the rings after this (spec §5.6). */
	pvrdma_destroy_qp_cmd(dev, qp->qp_handle);
	if (ibqp->send_cq)
		pvrdma_cq_purge_qp(to_pcq(ibqp->send_cq), qp->qp_handle);
	if (ibqp->recv_cq && ibqp->recv_cq != ibqp->send_cq)
		pvrdma_cq_purge_qp(to_pcq(ibqp->recv_cq), qp->qp_handle);
	mutex_unlock(&dev->qp_handle_lock);

	pvrdma_umem_mark_dead(dev, qp->sumem, PVRDMA_RING_STATE_TX_OFFSET +
			      offsetof(struct pvrdma_ring, cons_head));
	pvrdma_umem_mark_dead(dev, qp->sumem, PVRDMA_RING_STATE_RX_OFFSET +
			      offsetof(struct pvrdma_ring, cons_head));
	pvrdma_qp_free_rings(dev, qp);
	atomic_dec(&dev->num_qps);
	pvrdma_dbg_qp(qp, "destroyed\n");
	return 0;
}

/* -------------------------------------------------------------------- */
/* Kernel data path */

static int pvrdma_wr_opcode_to_dev(enum ib_wr_opcode op)
{
	switch (op) {
	case IB_WR_RDMA_WRITE:
		return PVRDMA_WR_RDMA_WRITE;
	case IB_WR_RDMA_WRITE_WITH_IMM:
		return PVRDMA_WR_RDMA_WRITE_WITH_IMM;
	case IB_WR_SEND:
		return PVRDMA_WR_SEND;
	case IB_WR_SEND_WITH_IMM:
		return PVRDMA_WR_SEND_WITH_IMM;
	case IB_WR_RDMA_READ:
		return PVRDMA_WR_RDMA_READ;
	case IB_WR_ATOMIC_CMP_AND_SWP:
		return PVRDMA_WR_ATOMIC_CMP_AND_SWP;
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		return PVRDMA_WR_ATOMIC_FETCH_AND_ADD;
	case IB_WR_SEND_WITH_INV:
		return PVRDMA_WR_SEND_WITH_INV;
	case IB_WR_LOCAL_INV:
		return PVRDMA_WR_LOCAL_INV;
	case IB_WR_REG_MR:
		return PVRDMA_WR_FAST_REG_MR;
	default:
		return -EINVAL;
	}
}

static u8 pvrdma_atomic_cap(enum ib_wr_opcode op)
{
	return op == IB_WR_ATOMIC_CMP_AND_SWP ? PVRDMA_ATOMIC_OP_COMP_SWAP :
						PVRDMA_ATOMIC_OP_FETCH_ADD;
}

/* Fill the opcode-specific part of an RC send WQE (spec §8.2). */
static int pvrdma_fill_rc_wqe(struct pvrdma_dev *dev,
			      struct pvrdma_sq_wqe_hdr *hdr,
			      const struct ib_send_wr *wr)
{
	const struct ib_reg_wr *reg;
	struct pvrdma_mr *mr;

	switch (wr->opcode) {
	case IB_WR_SEND:
		break;
	case IB_WR_SEND_WITH_IMM:
		hdr->ex.imm_data = wr->ex.imm_data;
		break;
	case IB_WR_SEND_WITH_INV:
	case IB_WR_LOCAL_INV:
		hdr->ex.invalidate_rkey = wr->ex.invalidate_rkey;
		break;
	case IB_WR_RDMA_WRITE_WITH_IMM:
		hdr->ex.imm_data = wr->ex.imm_data;
		fallthrough;
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_READ:
		hdr->wr.rdma.remote_addr = rdma_wr(wr)->remote_addr;
		hdr->wr.rdma.rkey = rdma_wr(wr)->rkey;
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		if (!(dev->caps.atomic_ops & pvrdma_atomic_cap(wr->opcode)))
			return -EOPNOTSUPP;
		hdr->wr.atomic.remote_addr = atomic_wr(wr)->remote_addr;
		hdr->wr.atomic.rkey = atomic_wr(wr)->rkey;
		hdr->wr.atomic.compare_add = atomic_wr(wr)->compare_add;
		if (wr->opcode == IB_WR_ATOMIC_CMP_AND_SWP)
			hdr->wr.atomic.swap = atomic_wr(wr)->swap;
		break;
	case IB_WR_REG_MR:
		reg = reg_wr(wr);
		mr = to_pmr(reg->mr);
		if (!mr->max_pages || mr->ibmr.length > U32_MAX)
			return -EINVAL;
		hdr->wr.fast_reg.iova_start = mr->ibmr.iova;
		hdr->wr.fast_reg.pl_pdir_dma = mr->pdir.dir_dma;
		hdr->wr.fast_reg.page_shift = ilog2(mr->ibmr.page_size);
		hdr->wr.fast_reg.page_list_len = mr->npages;
		hdr->wr.fast_reg.length = mr->ibmr.length;
		hdr->wr.fast_reg.access_flags = reg->access &
						~IB_ACCESS_OPTIONAL;
		hdr->wr.fast_reg.rkey = reg->key;
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

/* UD and GSI QPs send SEND / SEND_WITH_IMM with an address vector. */
static int pvrdma_fill_ud_wqe(struct pvrdma_qp *qp,
			      struct pvrdma_sq_wqe_hdr *hdr,
			      const struct ib_send_wr *wr)
{
	const struct ib_ud_wr *ud = ud_wr(wr);

	if (wr->opcode != IB_WR_SEND && wr->opcode != IB_WR_SEND_WITH_IMM)
		return -EINVAL;
	if (!ud->ah)
		return -EINVAL;
	if (wr->opcode == IB_WR_SEND_WITH_IMM)
		hdr->ex.imm_data = wr->ex.imm_data;
	hdr->wr.ud.remote_qpn = ud->remote_qpn;
	hdr->wr.ud.remote_qkey = ud->remote_qkey & PVRDMA_QKEY_FROM_QP ?
				 qp->qkey : ud->remote_qkey;
	hdr->wr.ud.av = to_pah(ud->ah)->av;
	return 0;
}

static int pvrdma_write_send_wqe(struct pvrdma_dev *dev, struct pvrdma_qp *qp,
				 void *wqe, const struct ib_send_wr *wr)
{
	struct pvrdma_sq_wqe_hdr *hdr = wqe;
	struct pvrdma_sge *sge = wqe + sizeof(*hdr);
	int opcode, ret, i;

	if (wr->num_sge < 0 || wr->num_sge > qp->sq.max_sge)
		return -EINVAL;
	/* No inline data: SGE addresses are bus addresses (spec §8.3). */
	if (wr->send_flags & IB_SEND_INLINE)
		return -EINVAL;
	opcode = pvrdma_wr_opcode_to_dev(wr->opcode);
	if (opcode < 0)
		return opcode;

	memset(hdr, 0, sizeof(*hdr));
	hdr->wr_id = wr->wr_id;
	hdr->num_sge = wr->num_sge;
	hdr->opcode = opcode;
	hdr->send_flags = wr->send_flags & PVRDMA_SEND_FLAGS_MASK;
	if (qp->ibqp.qp_type != IB_QPT_UD && qp->ibqp.qp_type != IB_QPT_GSI)
		ret = pvrdma_fill_rc_wqe(dev, hdr, wr);
	else
		ret = pvrdma_fill_ud_wqe(qp, hdr, wr);
	if (ret)
		return ret;

	for (i = 0; i < wr->num_sge; i++) {
		sge[i].addr = wr->sg_list[i].addr;
		sge[i].length = wr->sg_list[i].length;
		sge[i].lkey = wr->sg_list[i].lkey;
	}
	return 0;
}

/**
 * pvrdma_post_send() - post send WRs on a kernel QP (spec §8.2)
 * @ibqp: QP, in RTS or later (SQD, SQE, ERR: the device flushes)
 * @wr: chain of WRs
 * @bad_wr: the first WR not posted, on error
 *
 * The WQEs are published with one doorbell for all that were posted,
 * also when a later WR fails.
 *
 * Return: 0 or a negative errno.
 */
int pvrdma_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		     const struct ib_send_wr **bad_wr)
{
	struct pvrdma_dev *dev = to_pvdev(ibqp->device);
	struct pvrdma_qp *qp = to_pqp(ibqp);
	struct pvrdma_wq *sq = &qp->sq;
	unsigned int posted = 0;
	unsigned long flags;
	int ret = 0;
	u32 slot;

	/* User QPs post through the provider; XRC_TGT QPs do not send. */
	if (!sq->ring) {
		if (bad_wr)
			*bad_wr = wr;
		return -EOPNOTSUPP;
	}

	spin_lock_irqsave(&sq->lock, flags);
	if (READ_ONCE(qp->state) < IB_QPS_RTS) {
		ret = -EINVAL;
		goto out;
	}
	for (; wr; wr = wr->next) {
		ret = pvrdma_ring_space(sq->ring, sq->wqe_cnt, &slot);
		if (ret <= 0) {
			if (ret < 0) {
				pvrdma_stat_inc(dev, PVRDMA_STAT_RING_BAD);
				pvrdma_err_qp(qp, "SQ ring state invalid\n");
			}
			ret = ret < 0 ? -EIO : -ENOMEM;
			break;
		}
		ret = pvrdma_write_send_wqe(dev, qp,
					    pvrdma_wq_elem(sq, &qp->pdir, slot),
					    wr);
		if (ret)
			break;
		pvrdma_ring_produce(sq->ring, sq->wqe_cnt);
		posted++;
	}
	if (posted)
		pvrdma_db_write(dev, PVRDMA_UAR_QP_OFFSET,
				(u32)PVRDMA_UAR_QP_SEND | qp->qp_handle);
out:
	spin_unlock_irqrestore(&sq->lock, flags);
	if (ret && bad_wr)
		*bad_wr = wr;
	return ret;
}

/**
 * pvrdma_wq_post_recv() - write receive WQEs into a kernel RQ or SRQ ring
 * @wq: the ring, locked by the caller
 * @pdir: the object's page directory
 * @wr: chain of WRs
 * @bad_wr: the first WR not posted, on error
 * @posted: number of WQEs published
 *
 * Return: 0 or a negative errno.
 */
int pvrdma_wq_post_recv(struct pvrdma_wq *wq, struct pvrdma_pdir *pdir,
			const struct ib_recv_wr *wr,
			const struct ib_recv_wr **bad_wr, unsigned int *posted)
{
	struct pvrdma_rq_wqe_hdr *hdr;
	struct pvrdma_sge *sge;
	u32 slot;
	int ret = 0, i;

	*posted = 0;
	for (; wr; wr = wr->next) {
		ret = pvrdma_ring_space(wq->ring, wq->wqe_cnt, &slot);
		if (ret <= 0) {
			ret = ret < 0 ? -EIO : -ENOMEM;
			break;
		}
		ret = 0;
		if (wr->num_sge < 0 || wr->num_sge > wq->max_sge) {
			ret = -EINVAL;
			break;
		}
		hdr = pvrdma_wq_elem(wq, pdir, slot);
		sge = (void *)hdr + sizeof(*hdr);
		hdr->wr_id = wr->wr_id;
		hdr->num_sge = wr->num_sge;
		hdr->total_len = 0;
		for (i = 0; i < wr->num_sge; i++) {
			sge[i].addr = wr->sg_list[i].addr;
			sge[i].length = wr->sg_list[i].length;
			sge[i].lkey = wr->sg_list[i].lkey;
		}
		pvrdma_ring_produce(wq->ring, wq->wqe_cnt);
		(*posted)++;
	}
	if (ret && bad_wr)
		*bad_wr = wr;
	return ret;
}

/**
 * pvrdma_post_recv() - post receive WRs on a kernel QP (spec §8.3)
 * @ibqp: QP, not in RESET and not attached to an SRQ
 * @wr: chain of WRs
 * @bad_wr: the first WR not posted, on error
 *
 * Return: 0 or a negative errno.
 */
int pvrdma_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		     const struct ib_recv_wr **bad_wr)
{
	struct pvrdma_dev *dev = to_pvdev(ibqp->device);
	struct pvrdma_qp *qp = to_pqp(ibqp);
	struct pvrdma_wq *rq = &qp->rq;
	unsigned int posted = 0;
	unsigned long flags;
	int ret;

	/* Also no RQ: user QPs (the provider's), XRC QPs. */
	if (!rq->ring || ibqp->srq) {
		if (bad_wr)
			*bad_wr = wr;
		return -EINVAL;
	}

	spin_lock_irqsave(&rq->lock, flags);
	if (READ_ONCE(qp->state) == IB_QPS_RESET) {
		ret = -EINVAL;
		if (bad_wr)
			*bad_wr = wr;
	} else {
		ret = pvrdma_wq_post_recv(rq, &qp->pdir, wr, bad_wr, &posted);
		if (ret == -EIO) {
			pvrdma_stat_inc(dev, PVRDMA_STAT_RING_BAD);
			pvrdma_err_qp(qp, "RQ ring state invalid\n");
		}
	}
	if (posted)
		pvrdma_db_write(dev, PVRDMA_UAR_QP_OFFSET,
				(u32)PVRDMA_UAR_QP_RECV | qp->qp_handle);
	spin_unlock_irqrestore(&rq->lock, flags);
	return ret;
}
