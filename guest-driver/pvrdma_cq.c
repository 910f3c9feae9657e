// SPDX-License-Identifier: GPL-2.0-only
/*
 * Completion queues: creation and destruction (kernel and user rings),
 * polling and arming of kernel CQs (spec §7, §8.4), the purge of a QP's
 * completions, and the CQ side of the notification and async event rings.
 * User CQs are polled and armed by the provider.
 */
#include <linux/log2.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/vmw_pvrdma-abi.h>

#include "pvrdma.h"
#include "pvrdma_ring.h"

/* The CQE status and flag values are the IB core's (spec §8.4). */
static_assert(PVRDMA_WC_GENERAL_ERR == (int)IB_WC_GENERAL_ERR);
static_assert(PVRDMA_WC_RNR_RETRY_EXC_ERR == (int)IB_WC_RNR_RETRY_EXC_ERR);
static_assert(PVRDMA_WC_GRH == (int)IB_WC_GRH);
static_assert(PVRDMA_WC_WITH_IMM == (int)IB_WC_WITH_IMM);
static_assert(PVRDMA_WC_WITH_INVALIDATE == (int)IB_WC_WITH_INVALIDATE);
static_assert(PVRDMA_WC_IP_CSUM_OK == (int)IB_WC_IP_CSUM_OK);
static_assert(PVRDMA_WC_WITH_SMAC == (int)IB_WC_WITH_SMAC);
static_assert(PVRDMA_WC_WITH_NETWORK_HDR_TYPE ==
	      (int)IB_WC_WITH_NETWORK_HDR_TYPE);

/*
 * CQE flags passed to the IB core.  WITH_VLAN is dropped: the CQE has no
 * VLAN id field to go with it.
 */
#define PVRDMA_WC_FLAGS_SUPPORTED					\
	(IB_WC_GRH | IB_WC_WITH_IMM | IB_WC_WITH_INVALIDATE |		\
	 IB_WC_IP_CSUM_OK | IB_WC_WITH_SMAC | IB_WC_WITH_NETWORK_HDR_TYPE)

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

/*
 * Take the CQ out of the handle table, then wait for the interrupt paths
 * that still use it to drop their references.
 */
static void pvrdma_cq_tbl_remove(struct pvrdma_dev *dev, struct pvrdma_cq *cq)
{
	unsigned long flags;

	spin_lock_irqsave(&dev->tbl_lock, flags);
	dev->cq_tbl[cq->cq_handle] = NULL;
	spin_unlock_irqrestore(&dev->tbl_lock, flags);
	pvrdma_cq_put(cq);
	wait_for_completion(&cq->free);
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

/* -------------------------------------------------------------------- */
/* Polling and arming of kernel CQs */

static struct pvrdma_cqe *pvrdma_cq_elem(struct pvrdma_cq *cq, u32 slot)
{
	return pvrdma_pdir_elem(&cq->pdir, 1, slot, PVRDMA_CQE_SIZE);
}

/* spec §8.4 completion opcode table; unknown opcodes read as SEND. */
static enum ib_wc_opcode pvrdma_wc_opcode_to_ib(u32 op)
{
	switch (op) {
	case PVRDMA_WC_SEND:
		return IB_WC_SEND;
	case PVRDMA_WC_RDMA_WRITE:
		return IB_WC_RDMA_WRITE;
	case PVRDMA_WC_RDMA_READ:
		return IB_WC_RDMA_READ;
	case PVRDMA_WC_COMP_SWAP:
		return IB_WC_COMP_SWAP;
	case PVRDMA_WC_FETCH_ADD:
		return IB_WC_FETCH_ADD;
	case PVRDMA_WC_LOCAL_INV:
		return IB_WC_LOCAL_INV;
	case PVRDMA_WC_FAST_REG_MR:
		return IB_WC_REG_MR;
	case PVRDMA_WC_MASKED_COMP_SWAP:
		return IB_WC_MASKED_COMP_SWAP;
	case PVRDMA_WC_MASKED_FETCH_ADD:
		return IB_WC_MASKED_FETCH_ADD;
	case PVRDMA_WC_RECV:
		return IB_WC_RECV;
	case PVRDMA_WC_RECV_RDMA_WITH_IMM:
		return IB_WC_RECV_RDMA_WITH_IMM;
	default:
		return IB_WC_SEND;
	}
}

static u8 pvrdma_network_type_to_ib(u8 type)
{
	switch (type) {
	case PVRDMA_NETWORK_ROCE_V1:
		return RDMA_NETWORK_ROCE_V1;
	case PVRDMA_NETWORK_IPV4:
		return RDMA_NETWORK_IPV4;
	default:
		return RDMA_NETWORK_IPV6;
	}
}

/*
 * Translate one CQE (already copied out of the ring) into @wc.
 * Return: 0, or -ENOENT if the CQE names no live QP (a CQE of a QP being
 * destroyed, or a bad handle): the caller drops it.
 *
 * A receive of an XRC SRQ (PVRDMA_CQE_QP_XRC, spec §14) names an XRC_TGT
 * QP, which no kernel consumer has: XRC SRQs are created for user space
 * only, whose CQs the provider polls.  Such a CQE in a kernel CQ is the
 * device's error and is dropped too, without a look at its low bits.
 */
static int pvrdma_cqe_to_wc(struct pvrdma_dev *dev, struct pvrdma_cq *cq,
			    const struct pvrdma_cqe *cqe, struct ib_wc *wc)
{
	struct pvrdma_qp *qp = NULL;
	u64 handle = cqe->qp;
	unsigned long flags;
	u32 wc_flags;

	if (handle & PVRDMA_CQE_QP_XRC) {
		pvrdma_stat_inc(dev, PVRDMA_STAT_CQE_BAD);
		pvrdma_dbg_cq(cq, "dropped XRC CQE %#llx\n", handle);
		return -ENOENT;
	}

	spin_lock_irqsave(&dev->tbl_lock, flags);
	if (handle < dev->caps.max_qp)
		qp = dev->qp_tbl[handle];
	spin_unlock_irqrestore(&dev->tbl_lock, flags);
	/*
	 * No reference is taken: destroying a QP purges its CQEs under
	 * cq->lock, which the caller holds, after it left the table.  That
	 * covers only the QP's own CQs, so a CQE naming a QP of another CQ
	 * is as bad as an unknown handle (its wc->qp could be freed).
	 */
	if (qp && qp->ibqp.send_cq != &cq->ibcq &&
	    qp->ibqp.recv_cq != &cq->ibcq)
		qp = NULL;
	if (!qp) {
		pvrdma_stat_inc(dev, PVRDMA_STAT_CQE_BAD);
		pvrdma_dbg_cq(cq, "dropped CQE of unknown QP handle %llu\n",
			      handle);
		return -ENOENT;
	}

	memset(wc, 0, sizeof(*wc));
	wc->wr_id = cqe->wr_id;
	wc->status = cqe->status <= IB_WC_GENERAL_ERR ?
		     cqe->status : IB_WC_GENERAL_ERR;
	wc->opcode = pvrdma_wc_opcode_to_ib(cqe->opcode);
	wc->vendor_err = cqe->vendor_err;
	wc->byte_len = cqe->byte_len;
	wc->qp = &qp->ibqp;
	wc->src_qp = cqe->src_qp;
	wc_flags = cqe->wc_flags & PVRDMA_WC_FLAGS_SUPPORTED;
	wc->wc_flags = wc_flags;
	/*
	 * Project convention: an invalidated rkey travels in the CQE's
	 * imm_data field as a raw u32.
	 */
	if (wc_flags & IB_WC_WITH_INVALIDATE)
		wc->ex.invalidate_rkey = (__force u32)cqe->imm_data;
	else
		wc->ex.imm_data = cqe->imm_data;
	wc->pkey_index = cqe->pkey_index;
	wc->slid = cqe->slid;
	wc->sl = cqe->sl;
	wc->dlid_path_bits = cqe->dlid_path_bits;
	/* The device has one port (spec §3); do not pass its byte on. */
	wc->port_num = PVRDMA_PORT;
	if (wc_flags & IB_WC_WITH_SMAC)
		memcpy(wc->smac, cqe->smac, ETH_ALEN);
	if (wc_flags & IB_WC_WITH_NETWORK_HDR_TYPE)
		wc->network_hdr_type =
			pvrdma_network_type_to_ib(cqe->network_hdr_type);
	return 0;
}

/**
 * pvrdma_poll_cq() - reap completions of a kernel CQ (spec §8.4)
 * @ibcq: CQ
 * @num_entries: room in @wc
 * @wc: completions out
 *
 * When the ring is found empty the POLL doorbell asks the device to flush
 * completions it may still hold, and the ring is looked at once more.
 *
 * Context: any; takes the CQ lock with interrupts disabled.
 *
 * Return: number of completions, or a negative errno.
 */
int pvrdma_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	struct pvrdma_dev *dev = to_pvdev(ibcq->device);
	struct pvrdma_cq *cq = to_pcq(ibcq);
	struct pvrdma_ring *ring;
	struct pvrdma_cqe cqe;
	bool rang = false;
	unsigned long flags;
	int npolled = 0;
	u32 dropped = 0;
	u32 slot;
	int ret;

	if (!cq->ring_state)
		return -EOPNOTSUPP;

	spin_lock_irqsave(&cq->lock, flags);
	/* Nothing while the device moves the CQEs to a new ring (resize). */
	if (cq->resizing) {
		spin_unlock_irqrestore(&cq->lock, flags);
		return 0;
	}
	ring = &cq->ring_state->rx;
	/*
	 * Dropped CQEs do not count against num_entries, so bound them: a
	 * device that keeps producing CQEs of unknown QPs must not hold this
	 * CPU with interrupts off.
	 */
	while (npolled < num_entries && dropped < cq->ncqe) {
		ret = pvrdma_ring_peek(ring, cq->ncqe, &slot);
		if (ret < 0) {
			pvrdma_stat_inc(dev, PVRDMA_STAT_RING_BAD);
			pvrdma_err_cq(cq, "CQ ring state invalid\n");
			break;
		}
		if (!ret) {
			if (rang || npolled)
				break;
			pvrdma_db_write(dev, PVRDMA_UAR_CQ_OFFSET,
					(u32)PVRDMA_UAR_CQ_POLL | cq->cq_handle);
			rang = true;
			continue;
		}
		/* One copy, so the device cannot change fields under us. */
		memcpy(&cqe, pvrdma_cq_elem(cq, slot), sizeof(cqe));
		pvrdma_ring_consume(ring, cq->ncqe);
		if (!pvrdma_cqe_to_wc(dev, cq, &cqe, &wc[npolled]))
			npolled++;
		else
			dropped++;
	}
	spin_unlock_irqrestore(&cq->lock, flags);
	return npolled;
}

/**
 * pvrdma_req_notify_cq() - arm a kernel CQ (spec §7 CQ doorbell)
 * @ibcq: CQ
 * @flags: IB_CQ_SOLICITED or IB_CQ_NEXT_COMP, maybe REPORT_MISSED_EVENTS
 *
 * Return: 0, or with IB_CQ_REPORT_MISSED_EVENTS 1 if completions are
 * already waiting in the ring.
 */
int pvrdma_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct pvrdma_dev *dev = to_pvdev(ibcq->device);
	struct pvrdma_cq *cq = to_pcq(ibcq);
	unsigned long irqflags;
	u32 val = cq->cq_handle;
	int ret = 0;
	u32 slot;

	if (!cq->ring_state)
		return -EOPNOTSUPP;

	if ((flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED)
		val |= (u32)PVRDMA_UAR_CQ_ARM_SOL;
	else
		val |= (u32)PVRDMA_UAR_CQ_ARM;

	spin_lock_irqsave(&cq->lock, irqflags);
	pvrdma_db_write(dev, PVRDMA_UAR_CQ_OFFSET, val);
	/* A resize calls the handler when it ends with CQEs waiting. */
	if ((flags & IB_CQ_REPORT_MISSED_EVENTS) && !cq->resizing) {
		ret = pvrdma_ring_peek(&cq->ring_state->rx, cq->ncqe, &slot);
		if (ret < 0) {
			pvrdma_stat_inc(dev, PVRDMA_STAT_RING_BAD);
			pvrdma_err_cq(cq, "CQ ring state invalid\n");
			/* Make the caller poll, which reports nothing more. */
			ret = 1;
		}
	}
	spin_unlock_irqrestore(&cq->lock, irqflags);
	return ret;
}

/**
 * pvrdma_cq_purge_qp() - remove a QP's completions from a kernel CQ
 * @cq: CQ; user CQs are purged by the provider and are left alone
 * @qp_handle: device handle of the QP being reset or destroyed
 *
 * The entries between cons_head and prod_tail are compacted towards
 * prod_tail, keeping their order, and cons_head skips the freed slots
 * (spec §12 item 9).  The device only ever writes at prod_tail, so it
 * cannot race with this.  The whole 64-bit qp field is compared: an XRC
 * CQE (PVRDMA_CQE_QP_XRC, spec §14) never matches a handle.
 */
void pvrdma_cq_purge_qp(struct pvrdma_cq *cq, u32 qp_handle)
{
	struct pvrdma_dev *dev = to_pvdev(cq->ibcq.device);
	struct pvrdma_ring *ring;
	unsigned long flags;
	u32 head, tail, src, dst, removed = 0, n, mask;
	struct pvrdma_cqe *s;

	if (!cq->ring_state)
		return;

	spin_lock_irqsave(&cq->lock, flags);
	/*
	 * During a resize the CQEs are the device's: any of the QP's left
	 * behind are dropped when polled (their QP is gone by then).
	 */
	if (cq->resizing)
		goto out_unlock;
	ring = &cq->ring_state->rx;
	n = cq->ncqe;
	mask = 2 * n - 1;
	head = READ_ONCE(ring->cons_head);
	tail = READ_ONCE(ring->prod_tail);
	if (!pvrdma_idx_valid(head, n) || !pvrdma_idx_valid(tail, n)) {
		pvrdma_stat_inc(dev, PVRDMA_STAT_RING_BAD);
		pvrdma_err_cq(cq, "CQ ring state invalid\n");
		goto out_unlock;
	}
	dma_rmb();

	/* Walk from the newest entry back to the oldest. */
	for (src = tail, dst = tail; src != head;) {
		src = (src - 1) & mask;
		s = pvrdma_cq_elem(cq, pvrdma_idx_slot(src, n));
		if (READ_ONCE(s->qp) == qp_handle) {
			removed++;
			continue;
		}
		dst = (dst - 1) & mask;
		if (dst != src)
			memcpy(pvrdma_cq_elem(cq, pvrdma_idx_slot(dst, n)), s,
			       sizeof(*s));
	}
	if (removed) {
		/* The moved entries must be in place before the index. */
		dma_mb();
		WRITE_ONCE(ring->cons_head, dst);
		pvrdma_dbg_cq(cq, "purged %u CQEs of QP %u\n", removed,
			      qp_handle);
	}
out_unlock:
	spin_unlock_irqrestore(&cq->lock, flags);
}

/* -------------------------------------------------------------------- */
/* Creation and destruction */

static void pvrdma_destroy_cq_cmd(struct pvrdma_dev *dev, u32 cq_handle)
{
	union pvrdma_cmd_req req = {};

	req.destroy_cq.hdr.cmd = PVRDMA_CMD_DESTROY_CQ;
	req.destroy_cq.cq_handle = cq_handle;
	pvrdma_cmd_post(dev, &req, NULL);
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

	/* Completion timestamps: a project extension (spec §14). */
	if ((attr->flags & ~IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION) ||
	    ((attr->flags & IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION) &&
	     !(dev->caps.ex_comp_mask & PVRDMA_EX_CAP_CQE_TIMESTAMP)))
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
	mutex_init(&cq->resize_mutex);
	refcount_set(&cq->refcnt, 1);
	init_completion(&cq->free);

	if (udata) {
		/* The provider's ring: ring-state page, then the CQEs (§8.1). */
		ret = pvrdma_pdir_pin_user_ring(dev, udata,
						(size_t)entries * PVRDMA_CQE_SIZE,
						&cq->umem, &cq->pdir);
		if (ret > 0) {
			npages = ret;
			ret = 0;
		}
	} else {
		ret = pvrdma_cq_alloc_kernel(dev, cq, entries, &npages);
	}
	if (ret)
		goto err_dec_count;

	req.create_cq.hdr.cmd = PVRDMA_CMD_CREATE_CQ;
	req.create_cq.pdir_dma = cq->pdir.dir_dma;
	req.create_cq.ctx_handle = uctx ? uctx->ctx_handle : 0;
	req.create_cq.cqe = entries;
	req.create_cq.nchunks = npages;
	if (attr->flags & IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION)
		req.create_cq.reserved[0] = PVRDMA_CQ_FLAG_TIMESTAMP;
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
	pvrdma_cq_tbl_remove(dev, cq);
err_destroy_cq:
	pvrdma_destroy_cq_cmd(dev, cq->cq_handle);
err_free_ring:
	pvrdma_cq_free_ring(dev, cq);
err_dec_count:
	atomic_dec(&dev->num_cqs);
	return ret;
}

/* RESIZE_CQ (extended) of @cq to the ring in @pdir of @npages pages. */
static int pvrdma_resize_cq_cmd(struct pvrdma_dev *dev, struct pvrdma_cq *cq,
				struct pvrdma_pdir *pdir, u32 entries,
				unsigned int npages)
{
	union pvrdma_cmd_req req = {};
	union pvrdma_cmd_resp resp;
	int ret;

	req.resize_cq_ex.hdr.cmd = PVRDMA_CMD_RESIZE_CQ;
	req.resize_cq_ex.cq_handle = cq->cq_handle;
	req.resize_cq_ex.cqe = entries;
	req.resize_cq_ex.pdir_dma = pdir->dir_dma;
	req.resize_cq_ex.nchunks = npages;
	ret = pvrdma_cmd_post(dev, &req, &resp);
	if (!ret && resp.resize_cq_resp.cqe != entries) {
		pvrdma_err_cq(cq, "device resized to %u entries, not %u\n",
			      resp.resize_cq_resp.cqe, entries);
		ret = -EIO;
	}
	return ret;
}

/*
 * A kernel CQ: a new driver ring; pollers find the CQ empty while the
 * device moves the pending CQEs (cq->resizing), and the completion
 * handler runs afterwards if some are waiting, for those who armed the
 * CQ meanwhile.
 */
static int pvrdma_resize_kernel_cq(struct pvrdma_dev *dev,
				   struct pvrdma_cq *cq, u32 entries)
{
	unsigned int npages = 1 + DIV_ROUND_UP(entries, PVRDMA_CQES_PER_PAGE);
	struct pvrdma_pdir pdir = {}, old;
	unsigned long flags;
	bool waiting = false;
	u32 slot;
	int ret;

	ret = pvrdma_pdir_init(dev, &pdir, npages, true);
	if (ret)
		return ret;
	mutex_lock(&cq->resize_mutex);
	spin_lock_irqsave(&cq->lock, flags);
	cq->resizing = true;
	spin_unlock_irqrestore(&cq->lock, flags);

	ret = pvrdma_resize_cq_cmd(dev, cq, &pdir, entries, npages);

	spin_lock_irqsave(&cq->lock, flags);
	if (!ret) {
		old = cq->pdir;
		cq->pdir = pdir;
		cq->ring_state = pdir.pages[0];
		cq->ncqe = entries;
		cq->ibcq.cqe = entries;
		waiting = pvrdma_ring_peek(&cq->ring_state->rx, cq->ncqe,
					   &slot) != 0;
	}
	cq->resizing = false;
	spin_unlock_irqrestore(&cq->lock, flags);
	mutex_unlock(&cq->resize_mutex);

	pvrdma_pdir_cleanup(dev, ret ? &pdir : &old);
	if (waiting && cq->ibcq.comp_handler)
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
	if (!ret)
		pvrdma_dbg_cq(cq, "resized to %u entries\n", entries);
	return ret;
}

/**
 * pvrdma_resize_cq() - move a user CQ to a ring of another size
 * @ibcq: the CQ
 * @cqe: entries wanted, rounded up to a power of two
 * @udata: the provider's new ring buffer (struct pvrdma_resize_cq, laid
 *	   out as for CREATE_CQ)
 *
 * A project extension (PVRDMA_EX_CAP_RESIZE_CQ): RESIZE_CQ hands the
 * device the new ring, and the device moves the CQEs not yet polled into
 * it. The provider polls nothing meanwhile (it holds its CQ lock); a
 * kernel CQ polls empty meanwhile (pvrdma_resize_kernel_cq()). On an
 * error the CQ stays on its old ring.
 *
 * Return: 0 or a negative errno.
 */
int pvrdma_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibcq->device);
	struct pvrdma_cq *cq = to_pcq(ibcq);
	struct pvrdma_pdir pdir = {};
	struct ib_umem *umem;
	u32 entries;
	int ret;

	if (!(dev->caps.ex_comp_mask & PVRDMA_EX_CAP_RESIZE_CQ) ||
	    (udata && !cq->umem))
		return -EOPNOTSUPP;
	if (cqe < 1 || cqe > dev->caps.max_cqe)
		return -EINVAL;
	entries = roundup_pow_of_two(cqe);
	if (entries > dev->caps.max_cqe)
		return -EINVAL;
	if (!udata)
		return pvrdma_resize_kernel_cq(dev, cq, entries);

	/* Two threads of a process could ask at once: not both replace. */
	mutex_lock(&cq->resize_mutex);
	ret = pvrdma_pdir_pin_user_ring(dev, udata,
					(size_t)entries * PVRDMA_CQE_SIZE,
					&umem, &pdir);
	if (ret < 0)
		goto out_unlock;

	ret = pvrdma_resize_cq_cmd(dev, cq, &pdir, entries, ret);
	if (ret) {
		pvrdma_pdir_cleanup(dev, &pdir);
		ib_umem_release(umem);
		goto out_unlock;
	}

	pvrdma_cq_free_ring(dev, cq);
	cq->pdir = pdir;
	cq->umem = umem;
	cq->ncqe = entries;
	ibcq->cqe = entries;
	pvrdma_dbg_cq(cq, "resized to %u entries\n", entries);
out_unlock:
	mutex_unlock(&cq->resize_mutex);
	return ret;
}

int pvrdma_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibcq->device);
	struct pvrdma_cq *cq = to_pcq(ibcq);

	pvrdma_cq_tbl_remove(dev, cq);

	/* The device must not touch the ring after this (spec §5.6). */
	pvrdma_destroy_cq_cmd(dev, cq->cq_handle);
	pvrdma_umem_mark_dead(dev, cq->umem, PVRDMA_RING_STATE_RX_OFFSET +
			      offsetof(struct pvrdma_ring, prod_tail));
	pvrdma_cq_free_ring(dev, cq);
	atomic_dec(&dev->num_cqs);
	pvrdma_dbg_cq(cq, "destroyed\n");
	return 0;
}
