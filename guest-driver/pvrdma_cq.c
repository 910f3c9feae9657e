// SPDX-License-Identifier: GPL-2.0-only
/*
 * Completion queues: creation and destruction (kernel and user rings),
 * and the CQ side of the notification and async event rings.
 *
 * Polling and arming of kernel CQs belong to the data path and are not
 * provided yet; user CQs are polled and armed by the provider.
 */
#include <linux/log2.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/vmw_pvrdma-abi.h>

#include "pvrdma.h"

/*
 * Look up a CQ by device handle from interrupt context and take a
 * reference; the handle space is [0, caps.max_cq) (spec §5.6).
 */
static struct pvrdma_cq *pvrdma_cq_get(struct pvrdma_dev *dev, u32 handle)
{
	struct pvrdma_cq *cq;

	if (handle >= dev->caps.max_cq)
		return NULL;

	spin_lock(&dev->tbl_lock);
	cq = dev->cq_tbl[handle];
	if (cq)
		refcount_inc(&cq->refcnt);
	spin_unlock(&dev->tbl_lock);
	return cq;
}

static void pvrdma_cq_put(struct pvrdma_cq *cq)
{
	if (refcount_dec_and_test(&cq->refcnt))
		complete(&cq->free);
}

/**
 * pvrdma_cq_notify() - one CQ notification ring entry (spec §6.4)
 * @dev: device
 * @cq_handle: handle from the ring
 *
 * Context: hard interrupt.
 */
void pvrdma_cq_notify(struct pvrdma_dev *dev, u32 cq_handle)
{
	struct pvrdma_cq *cq = pvrdma_cq_get(dev, cq_handle);

	if (!cq) {
		/* Possible for a CQ being destroyed; a bad handle otherwise. */
		pvrdma_stat_inc(dev, PVRDMA_STAT_CQ_NOTIFY_BAD);
		pvrdma_dbg(dev, "notification for unknown CQ handle %u\n",
			   cq_handle);
		return;
	}
	if (cq->ibcq.comp_handler)
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
	pvrdma_cq_put(cq);
}

/**
 * pvrdma_cq_event() - an async event for a CQ (spec §6.3)
 * @dev: device
 * @cq_handle: handle from the event
 * @type: IB event type
 *
 * Context: hard interrupt.
 */
void pvrdma_cq_event(struct pvrdma_dev *dev, u32 cq_handle,
		     enum ib_event_type type)
{
	struct pvrdma_cq *cq = pvrdma_cq_get(dev, cq_handle);
	struct ib_event ev;

	if (!cq) {
		pvrdma_stat_inc(dev, PVRDMA_STAT_ASYNC_BAD);
		pvrdma_err(dev, "event %u for unknown CQ handle %u\n", type,
			   cq_handle);
		return;
	}
	if (cq->ibcq.event_handler) {
		ev.device = cq->ibcq.device;
		ev.element.cq = &cq->ibcq;
		ev.event = type;
		cq->ibcq.event_handler(&ev, cq->ibcq.cq_context);
	}
	pvrdma_cq_put(cq);
}

static void pvrdma_destroy_cq_cmd(struct pvrdma_dev *dev, u32 cq_handle)
{
	union pvrdma_cmd_req req = {};

	req.destroy_cq.hdr.cmd = PVRDMA_CMD_DESTROY_CQ;
	req.destroy_cq.cq_handle = cq_handle;
	pvrdma_cmd_post(dev, &req, NULL);
}

/* Pin the provider's ring: ring-state page, then the CQEs (spec §8.1). */
static int pvrdma_cq_pin_user(struct pvrdma_dev *dev, struct pvrdma_cq *cq,
			      struct ib_udata *udata, u32 entries,
			      unsigned int *npages)
{
	struct pvrdma_create_cq ucmd;
	size_t ring_bytes = (size_t)entries * PVRDMA_CQE_SIZE;
	int ret;

	if (udata->inlen < offsetofend(struct pvrdma_create_cq, buf_size))
		return -EINVAL;
	if (udata->inlen > sizeof(ucmd) &&
	    !ib_is_udata_cleared(udata, sizeof(ucmd),
				 udata->inlen - sizeof(ucmd)))
		return -EINVAL;
	/*
	 * ucmd.reserved is not checked: the stock rdma-core provider sends
	 * it uninitialised.
	 */
	ret = ib_copy_from_udata(&ucmd, udata,
				 min_t(size_t, udata->inlen, sizeof(ucmd)));
	if (ret)
		return ret;

	if (!ucmd.buf_size || !PAGE_ALIGNED(ucmd.buf_addr))
		return -EINVAL;

	cq->umem = ib_umem_get(&dev->ibdev, ucmd.buf_addr, ucmd.buf_size,
			       IB_ACCESS_LOCAL_WRITE);
	if (IS_ERR(cq->umem)) {
		ret = PTR_ERR(cq->umem);
		cq->umem = NULL;
		return ret;
	}

	*npages = ib_umem_num_dma_blocks(cq->umem, PAGE_SIZE);
	/* The device writes entries * 64 bytes after the ring-state page. */
	if (*npages < 2 || *npages > PVRDMA_PDIR_MAX_PAGES ||
	    ((size_t)*npages - 1) * PAGE_SIZE < ring_bytes) {
		ret = -EINVAL;
		goto err_release_umem;
	}

	ret = pvrdma_pdir_init(dev, &cq->pdir, *npages, false);
	if (ret)
		goto err_release_umem;
	ret = pvrdma_pdir_insert_umem(&cq->pdir, cq->umem, 0);
	if (ret)
		goto err_free_pdir;
	return 0;

err_free_pdir:
	pvrdma_pdir_cleanup(dev, &cq->pdir);
err_release_umem:
	ib_umem_release(cq->umem);
	cq->umem = NULL;
	return ret;
}

static int pvrdma_cq_alloc_kernel(struct pvrdma_dev *dev,
				  struct pvrdma_cq *cq, u32 entries,
				  unsigned int *npages)
{
	int ret;

	*npages = 1 + DIV_ROUND_UP(entries, PVRDMA_CQES_PER_PAGE);
	ret = pvrdma_pdir_init(dev, &cq->pdir, *npages, true);
	if (ret)
		return ret;
	cq->ring_state = cq->pdir.pages[0];
	return 0;
}

static void pvrdma_cq_free_ring(struct pvrdma_dev *dev, struct pvrdma_cq *cq)
{
	pvrdma_pdir_cleanup(dev, &cq->pdir);
	ib_umem_release(cq->umem);
	cq->umem = NULL;
	cq->ring_state = NULL;
}

int pvrdma_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		     struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibcq->device);
	struct pvrdma_ucontext *uctx =
		rdma_udata_to_drv_context(udata, struct pvrdma_ucontext,
					  ibucontext);
	struct pvrdma_cq *cq = to_pcq(ibcq);
	struct pvrdma_create_cq_resp uresp = {};
	union pvrdma_cmd_req req = {};
	union pvrdma_cmd_resp resp;
	unsigned long flags;
	unsigned int npages;
	u32 entries;
	int ret;

	if (attr->flags)
		return -EOPNOTSUPP;
	if (!attr->cqe || attr->cqe > dev->caps.max_cqe ||
	    attr->cqe > (1U << 31))
		return -EINVAL;
	entries = roundup_pow_of_two(attr->cqe);
	if (entries > dev->caps.max_cqe)
		return -EINVAL;

	if ((u32)atomic_inc_return(&dev->num_cqs) > dev->caps.max_cq) {
		ret = -ENOMEM;
		goto err_dec_count;
	}

	spin_lock_init(&cq->lock);
	refcount_set(&cq->refcnt, 1);
	init_completion(&cq->free);

	if (udata)
		ret = pvrdma_cq_pin_user(dev, cq, udata, entries, &npages);
	else
		ret = pvrdma_cq_alloc_kernel(dev, cq, entries, &npages);
	if (ret)
		goto err_dec_count;

	req.create_cq.hdr.cmd = PVRDMA_CMD_CREATE_CQ;
	req.create_cq.pdir_dma = cq->pdir.dir_dma;
	req.create_cq.ctx_handle = uctx ? uctx->ctx_handle : 0;
	req.create_cq.cqe = entries;
	req.create_cq.nchunks = npages;
	ret = pvrdma_cmd_post(dev, &req, &resp);
	if (ret)
		goto err_free_ring;
	cq->cq_handle = resp.create_cq_resp.cq_handle;
	cq->ncqe = resp.create_cq_resp.cqe;

	/* The ring was sized for 'entries'; a smaller power of two fits. */
	if (cq->cq_handle >= dev->caps.max_cq || !cq->ncqe ||
	    !is_power_of_2(cq->ncqe) || cq->ncqe > entries) {
		pvrdma_err_cq(cq, "device returned handle %u / %u entries for %u\n",
			      cq->cq_handle, cq->ncqe, entries);
		ret = -EIO;
		goto err_destroy_cq;
	}
	ibcq->cqe = cq->ncqe;

	spin_lock_irqsave(&dev->tbl_lock, flags);
	if (dev->cq_tbl[cq->cq_handle]) {
		ret = -EIO;
	} else {
		dev->cq_tbl[cq->cq_handle] = cq;
		ret = 0;
	}
	spin_unlock_irqrestore(&dev->tbl_lock, flags);
	if (ret) {
		pvrdma_err_cq(cq, "device reused a live CQ handle\n");
		/* Must not destroy the handle: it belongs to the live CQ. */
		goto err_free_ring;
	}

	if (udata) {
		uresp.cqn = cq->cq_handle;
		ret = ib_copy_to_udata(udata, &uresp,
				       min_t(size_t, udata->outlen,
					     sizeof(uresp)));
		if (ret)
			goto err_remove_cq;
	}

	pvrdma_dbg_cq(cq, "%u entries, %u pages (%s)\n", cq->ncqe, npages,
		      udata ? "user" : "kernel");
	return 0;

err_remove_cq:
	spin_lock_irqsave(&dev->tbl_lock, flags);
	dev->cq_tbl[cq->cq_handle] = NULL;
	spin_unlock_irqrestore(&dev->tbl_lock, flags);
	pvrdma_cq_put(cq);
	wait_for_completion(&cq->free);
err_destroy_cq:
	pvrdma_destroy_cq_cmd(dev, cq->cq_handle);
err_free_ring:
	pvrdma_cq_free_ring(dev, cq);
err_dec_count:
	atomic_dec(&dev->num_cqs);
	return ret;
}

int pvrdma_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibcq->device);
	struct pvrdma_cq *cq = to_pcq(ibcq);
	unsigned long flags;

	/* Stop interrupt-side lookups, then wait for the ones in flight. */
	spin_lock_irqsave(&dev->tbl_lock, flags);
	dev->cq_tbl[cq->cq_handle] = NULL;
	spin_unlock_irqrestore(&dev->tbl_lock, flags);
	pvrdma_cq_put(cq);
	wait_for_completion(&cq->free);

	/* The device must not touch the ring after this (spec §5.6). */
	pvrdma_destroy_cq_cmd(dev, cq->cq_handle);
	pvrdma_cq_free_ring(dev, cq);
	atomic_dec(&dev->num_cqs);
	pvrdma_dbg_cq(cq, "destroyed\n");
	return 0;
}
