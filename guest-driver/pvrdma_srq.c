// SPDX-License-Identifier: GPL-2.0-only
/*
 * Shared receive queues (spec §5.3 CREATE_SRQ..DESTROY_SRQ, §9): user
 * SRQs over the provider's pinned ring, and kernel SRQs over driver-owned
 * pages with post_srq_recv.  Exposed only when caps.max_srq != 0.  User
 * SRQs may also be XRC SRQs (spec §14).
 *
 * The ring is one page directory: the ring-state page (indices at +8),
 * then the receive WQEs.
 */
#include <rdma/uverbs_ioctl.h>
#include <rdma/vmw_pvrdma-abi.h>

#include "pvrdma.h"
#include "pvrdma_ring.h"

static_assert(PVRDMA_SRQT_BASIC == (int)IB_SRQT_BASIC);
static_assert(PVRDMA_SRQT_XRC == (int)IB_SRQT_XRC);

/* Sizing as for a kernel RQ (spec §8.1); rounded values written back. */
static int pvrdma_srq_alloc_kernel(struct pvrdma_dev *dev,
				   struct pvrdma_srq *srq,
				   struct ib_srq_attr *attr,
				   unsigned int *npages)
{
	struct pvrdma_wq *rq = &srq->rq;
	struct pvrdma_ring_state *state;
	int ret;

	ret = pvrdma_wq_size_kernel(rq, attr->max_wr, attr->max_sge,
				    PVRDMA_RQ_WQE_HDR_SIZE,
				    dev->caps.max_srq_wr,
				    dev->caps.max_srq_sge);
	if (ret)
		return ret;
	rq->first_page = 1;

	*npages = 1 + pvrdma_wq_pages(rq);
	ret = pvrdma_pdir_init(dev, &srq->pdir, *npages, true);
	if (ret)
		return ret;
	state = srq->pdir.pages[0];
	rq->ring = &state->rx;

	attr->max_wr = rq->wqe_cnt;
	attr->max_sge = rq->max_sge;
	return 0;
}

static void pvrdma_srq_free_ring(struct pvrdma_dev *dev,
				 struct pvrdma_srq *srq)
{
	pvrdma_pdir_cleanup(dev, &srq->pdir);
	ib_umem_release(srq->umem);
	srq->umem = NULL;
}

static void pvrdma_destroy_srq_cmd(struct pvrdma_dev *dev, u32 srq_handle)
{
	union pvrdma_cmd_req req = {};

	req.destroy_srq.hdr.cmd = PVRDMA_CMD_DESTROY_SRQ;
	req.destroy_srq.srq_handle = srq_handle;
	pvrdma_cmd_post(dev, &req, NULL);
}

/*
 * Take the SRQ out of the handle table, then wait for the async event
 * path to drop its references.
 */
static void pvrdma_srq_tbl_remove(struct pvrdma_dev *dev,
				  struct pvrdma_srq *srq)
{
	unsigned long flags;

	spin_lock_irqsave(&dev->tbl_lock, flags);
	dev->srq_tbl[srq->srq_handle] = NULL;
	spin_unlock_irqrestore(&dev->tbl_lock, flags);
	if (refcount_dec_and_test(&srq->refcnt))
		complete(&srq->free);
	wait_for_completion(&srq->free);
}

/*
 * An XRC SRQ (spec §14): of user space only (no kernel consumer has XRC
 * domains), with the domain and CQ the IB core checked and holds.
 */
static int pvrdma_srq_check_xrc(struct pvrdma_dev *dev,
				struct ib_srq_init_attr *init,
				struct ib_udata *udata)
{
	if (!pvrdma_has_xrc(dev) || !udata)
		return -EOPNOTSUPP;
	if (!init->ext.xrc.xrcd || !init->ext.cq)
		return -EINVAL;
	return 0;
}

/**
 * pvrdma_create_srq() - create a basic SRQ, or a user XRC SRQ
 * @ibsrq: SRQ allocated by the IB core
 * @init: attributes; for kernel SRQs the sizes are written back
 * @udata: user data (struct pvrdma_create_srq), NULL for kernel SRQs
 *
 * An XRC SRQ goes to the device in the extended CREATE_SRQ with its
 * domain and CQ; its handle is also the SRQ number XRC senders name,
 * which uverbs returns to user space from ibsrq->ext.xrc.srq_num.
 *
 * Return: 0 or a negative errno.
 */
int pvrdma_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		      struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibsrq->device);
	struct pvrdma_srq *srq = to_psrq(ibsrq);
	struct ib_srq_attr *attr = &init->attr;
	struct pvrdma_create_srq_resp uresp = {};
	union pvrdma_cmd_req req = {};
	struct pvrdma_cmd_create_srq *cmd = &req.create_srq_ex.srq;
	union pvrdma_cmd_resp resp;
	unsigned long flags;
	unsigned int npages;
	int ret;

	switch (init->srq_type) {
	case IB_SRQT_BASIC:
		break;
	case IB_SRQT_XRC:
		ret = pvrdma_srq_check_xrc(dev, init, udata);
		if (ret)
			return ret;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (!attr->max_wr || attr->max_wr > dev->caps.max_srq_wr ||
	    attr->max_sge > dev->caps.max_srq_sge ||
	    attr->srq_limit > attr->max_wr)
		return -EINVAL;

	if ((u32)atomic_inc_return(&dev->num_srqs) > dev->caps.max_srq) {
		ret = -ENOMEM;
		goto err_dec_count;
	}

	spin_lock_init(&srq->rq.lock);
	mutex_init(&srq->resize_mutex);
	refcount_set(&srq->refcnt, 1);
	init_completion(&srq->free);

	if (udata) {
		ret = pvrdma_pdir_pin_user_ring(dev, udata, 1, &srq->umem,
						&srq->pdir);
		if (ret > 0) {
			npages = ret;
			ret = 0;
		}
		srq->max_wr = attr->max_wr;
		srq->max_sge = attr->max_sge;
	} else {
		ret = pvrdma_srq_alloc_kernel(dev, srq, attr, &npages);
		srq->max_wr = srq->rq.wqe_cnt;
		srq->max_sge = srq->rq.max_sge;
	}
	if (ret)
		goto err_dec_count;

	cmd->hdr.cmd = PVRDMA_CMD_CREATE_SRQ;
	cmd->pdir_dma = srq->pdir.dir_dma;
	cmd->pd_handle = to_ppd(ibsrq->pd)->pd_handle;
	cmd->nchunks = npages;
	cmd->attrs.max_wr = srq->max_wr;
	cmd->attrs.max_sge = srq->max_sge;
	cmd->attrs.srq_limit = attr->srq_limit;
	cmd->srq_type = init->srq_type;
	if (init->srq_type == IB_SRQT_XRC) {
		req.create_srq_ex.xrcd_handle =
			to_pxrcd(init->ext.xrc.xrcd)->xrcd_handle;
		req.create_srq_ex.cq_handle = to_pcq(init->ext.cq)->cq_handle;
	}
	ret = pvrdma_cmd_post(dev, &req, &resp);
	if (ret)
		goto err_free_ring;
	srq->srq_handle = resp.create_srq_resp.srqn;

	if (srq->srq_handle >= dev->caps.max_srq) {
		pvrdma_err_srq(srq, "device returned an out-of-range handle\n");
		ret = -EIO;
		goto err_destroy_srq;
	}
	if (init->srq_type == IB_SRQT_XRC)
		ibsrq->ext.xrc.srq_num = srq->srq_handle;

	spin_lock_irqsave(&dev->tbl_lock, flags);
	if (dev->srq_tbl[srq->srq_handle]) {
		ret = -EIO;
	} else {
		dev->srq_tbl[srq->srq_handle] = srq;
		ret = 0;
	}
	spin_unlock_irqrestore(&dev->tbl_lock, flags);
	if (ret) {
		pvrdma_err_srq(srq, "device reused a live SRQ handle\n");
		goto err_free_ring;
	}

	if (udata) {
		uresp.srqn = srq->srq_handle;
		ret = ib_copy_to_udata(udata, &uresp,
				       min_t(size_t, udata->outlen,
					     sizeof(uresp)));
		if (ret)
			goto err_remove_srq;
	}

	pvrdma_dbg_srq(srq, "%s, %u WRs x %u SGEs, %u pages (%s)\n",
		       init->srq_type == IB_SRQT_XRC ? "XRC" : "basic",
		       srq->max_wr, srq->max_sge, npages,
		       udata ? "user" : "kernel");
	return 0;

err_remove_srq:
	pvrdma_srq_tbl_remove(dev, srq);
err_destroy_srq:
	pvrdma_destroy_srq_cmd(dev, srq->srq_handle);
err_free_ring:
	pvrdma_srq_free_ring(dev, srq);
err_dec_count:
	atomic_dec(&dev->num_srqs);
	return ret;
}

/*
 * Resize a user SRQ (project extension PVRDMA_EX_CAP_RESIZE_SRQ): the
 * provider's new ring buffer (@udata: struct pvrdma_resize_cq's layout,
 * ring-state page first, as at creation) goes to the device in the
 * extended MODIFY_SRQ, and the device moves the receive WQEs posted and
 * not yet taken into it, in order. The provider posts nothing meanwhile
 * (it holds its SRQ lock). A kernel SRQ is not resized (no kernel user
 * asks; its posts could not wait for the command). On an error the SRQ
 * stays on its old ring.
 */
static int pvrdma_resize_srq(struct pvrdma_dev *dev, struct pvrdma_srq *srq,
			     struct ib_srq_attr *attr,
			     enum ib_srq_attr_mask attr_mask,
			     struct ib_udata *udata)
{
	union pvrdma_cmd_req req = {};
	struct pvrdma_cmd_modify_srq_ex *cmd = &req.modify_srq_ex;
	struct pvrdma_pdir pdir = {};
	struct ib_umem *umem;
	u32 entries, wqe_size;
	int ret;

	/* (a provider without it, as rdma-core's stock one, sends no ring) */
	if (!(dev->caps.ex_comp_mask & PVRDMA_EX_CAP_RESIZE_SRQ) ||
	    !udata || !srq->umem ||
	    udata->inlen < offsetofend(struct pvrdma_resize_cq, buf_size))
		return -EOPNOTSUPP;
	if (!attr->max_wr || attr->max_wr > dev->caps.max_srq_wr)
		return -EINVAL;
	entries = roundup_pow_of_two(attr->max_wr);
	if (entries > dev->caps.max_srq_wr ||
	    ((attr_mask & IB_SRQ_LIMIT) && attr->srq_limit > entries))
		return -EINVAL;
	wqe_size = roundup_pow_of_two(PVRDMA_RQ_WQE_HDR_SIZE +
				      srq->max_sge * PVRDMA_SGE_SIZE);

	/* Two threads of a process could ask at once: not both replace. */
	mutex_lock(&srq->resize_mutex);
	ret = pvrdma_pdir_pin_user_ring(dev, udata,
					(size_t)entries * wqe_size, &umem,
					&pdir);
	if (ret < 0)
		goto out_unlock;

	cmd->hdr.cmd = PVRDMA_CMD_MODIFY_SRQ;
	cmd->srq_handle = srq->srq_handle;
	cmd->attr_mask = PVRDMA_SRQ_MAX_WR |
			 (attr_mask & IB_SRQ_LIMIT ? PVRDMA_SRQ_LIMIT : 0);
	cmd->attrs.max_wr = entries;
	cmd->attrs.srq_limit = attr->srq_limit;
	cmd->pdir_dma = pdir.dir_dma;
	cmd->nchunks = ret;
	ret = pvrdma_cmd_post(dev, &req, NULL);
	if (ret) {
		pvrdma_pdir_cleanup(dev, &pdir);
		ib_umem_release(umem);
		goto out_unlock;
	}

	pvrdma_srq_free_ring(dev, srq);
	srq->pdir = pdir;
	srq->umem = umem;
	srq->max_wr = entries;
	pvrdma_dbg_srq(srq, "resized to %u WRs\n", entries);
out_unlock:
	mutex_unlock(&srq->resize_mutex);
	return ret;
}

/**
 * pvrdma_modify_srq() - MODIFY_SRQ: the limit, and the size of user SRQs
 * @ibsrq: SRQ
 * @attr: new attributes
 * @attr_mask: IB_SRQ_LIMIT, IB_SRQ_MAX_WR (with PVRDMA_EX_CAP_RESIZE_SRQ)
 * @udata: the new ring for IB_SRQ_MAX_WR, else no driver data
 *
 * Return: 0 or a negative errno.
 */
int pvrdma_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		      enum ib_srq_attr_mask attr_mask, struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibsrq->device);
	struct pvrdma_srq *srq = to_psrq(ibsrq);
	union pvrdma_cmd_req req = {};

	if (attr_mask & ~(IB_SRQ_LIMIT | IB_SRQ_MAX_WR))
		return -EOPNOTSUPP;
	if (attr_mask & IB_SRQ_MAX_WR)
		return pvrdma_resize_srq(dev, srq, attr, attr_mask, udata);
	if (attr_mask != IB_SRQ_LIMIT)
		return -EOPNOTSUPP;
	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EINVAL;
	if (attr->srq_limit > srq->max_wr)
		return -EINVAL;

	req.modify_srq.hdr.cmd = PVRDMA_CMD_MODIFY_SRQ;
	req.modify_srq.srq_handle = srq->srq_handle;
	req.modify_srq.attr_mask = PVRDMA_SRQ_LIMIT;
	req.modify_srq.attrs.srq_limit = attr->srq_limit;
	return pvrdma_cmd_post(dev, &req, NULL);
}

/**
 * pvrdma_query_srq() - QUERY_SRQ
 * @ibsrq: SRQ
 * @attr: filled with the device's attributes
 *
 * Return: 0 or a negative errno.
 */
int pvrdma_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct pvrdma_dev *dev = to_pvdev(ibsrq->device);
	struct pvrdma_srq *srq = to_psrq(ibsrq);
	union pvrdma_cmd_req req = {};
	union pvrdma_cmd_resp resp;
	int ret;

	req.query_srq.hdr.cmd = PVRDMA_CMD_QUERY_SRQ;
	req.query_srq.srq_handle = srq->srq_handle;
	ret = pvrdma_cmd_post(dev, &req, &resp);
	if (ret)
		return ret;
	attr->max_wr = resp.query_srq_resp.attrs.max_wr;
	attr->max_sge = resp.query_srq_resp.attrs.max_sge;
	attr->srq_limit = resp.query_srq_resp.attrs.srq_limit;
	return 0;
}

/**
 * pvrdma_destroy_srq() - destroy is create in reverse
 * @ibsrq: SRQ, no longer used by any QP
 * @udata: unused
 *
 * Return: 0; a device failure is logged, the SRQ is gone for the guest.
 */
int pvrdma_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibsrq->device);
	struct pvrdma_srq *srq = to_psrq(ibsrq);

	pvrdma_srq_tbl_remove(dev, srq);

	pvrdma_destroy_srq_cmd(dev, srq->srq_handle);
	pvrdma_umem_mark_dead(dev, srq->umem, PVRDMA_RING_STATE_RX_OFFSET +
			      offsetof(struct pvrdma_ring, cons_head));
	pvrdma_srq_free_ring(dev, srq);
	atomic_dec(&dev->num_srqs);
	pvrdma_dbg_srq(srq, "destroyed\n");
	return 0;
}

/**
 * pvrdma_post_srq_recv() - post receive WRs on a kernel SRQ
 * @ibsrq: SRQ
 * @wr: chain of WRs
 * @bad_wr: the first WR not posted, on error
 *
 * Return: 0 or a negative errno.
 */
int pvrdma_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad_wr)
{
	struct pvrdma_dev *dev = to_pvdev(ibsrq->device);
	struct pvrdma_srq *srq = to_psrq(ibsrq);
	unsigned int posted;
	unsigned long flags;
	int ret;

	if (srq->umem) {
		if (bad_wr)
			*bad_wr = wr;
		return -EOPNOTSUPP;
	}

	spin_lock_irqsave(&srq->rq.lock, flags);
	ret = pvrdma_wq_post_recv(&srq->rq, &srq->pdir, wr, bad_wr, &posted);
	if (ret == -EIO) {
		pvrdma_stat_inc(dev, PVRDMA_STAT_RING_BAD);
		pvrdma_err_srq(srq, "SRQ ring state invalid\n");
	}
	if (posted)
		pvrdma_db_write(dev, PVRDMA_UAR_SRQ_OFFSET,
				(u32)PVRDMA_UAR_SRQ_RECV | srq->srq_handle);
	spin_unlock_irqrestore(&srq->rq.lock, flags);
	return ret;
}
