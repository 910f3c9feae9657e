// SPDX-License-Identifier: GPL-2.0-only
/*
 * Memory regions (spec §5.3 CREATE_MR): the DMA MR of kernel PDs and
 * user MRs over pinned memory.  Fast-register MRs belong to the data
 * path and are not provided yet.
 */
#include <linux/slab.h>

#include "pvrdma.h"

/* Access bits the device understands (spec §5.4); others are refused. */
#define PVRDMA_MR_ACCESS_SUPPORTED					\
	(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |		\
	 IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC |		\
	 IB_ACCESS_MW_BIND)

static void pvrdma_destroy_mr_cmd(struct pvrdma_dev *dev, u32 mr_handle)
{
	union pvrdma_cmd_req req = {};

	req.destroy_mr.hdr.cmd = PVRDMA_CMD_DESTROY_MR;
	req.destroy_mr.mr_handle = mr_handle;
	pvrdma_cmd_post(dev, &req, NULL);
}

static int pvrdma_create_mr_cmd(struct pvrdma_dev *dev, struct pvrdma_mr *mr,
				union pvrdma_cmd_req *req)
{
	union pvrdma_cmd_resp resp;
	int ret;

	req->create_mr.hdr.cmd = PVRDMA_CMD_CREATE_MR;
	ret = pvrdma_cmd_post(dev, req, &resp);
	if (ret)
		return ret;
	mr->mr_handle = resp.create_mr_resp.mr_handle;
	mr->ibmr.lkey = resp.create_mr_resp.lkey;
	mr->ibmr.rkey = resp.create_mr_resp.rkey;
	return 0;
}

struct ib_mr *pvrdma_get_dma_mr(struct ib_pd *ibpd, int access_flags)
{
	struct pvrdma_dev *dev = to_pvdev(ibpd->device);
	union pvrdma_cmd_req req = {};
	struct pvrdma_mr *mr;
	int ret;

	/* The DMA MR is local-only (spec §5.3 MR variants). */
	if (access_flags & ~IB_ACCESS_LOCAL_WRITE) {
		pvrdma_dbg(dev, "unsupported DMA MR access %#x\n",
			   access_flags);
		return ERR_PTR(-EOPNOTSUPP);
	}

	if ((u32)atomic_inc_return(&dev->num_mrs) > dev->caps.max_mr) {
		ret = -ENOMEM;
		goto err_dec_count;
	}

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr) {
		ret = -ENOMEM;
		goto err_dec_count;
	}

	req.create_mr.pd_handle = to_ppd(ibpd)->pd_handle;
	req.create_mr.access_flags = access_flags;
	req.create_mr.flags = PVRDMA_MR_FLAG_DMA;
	ret = pvrdma_create_mr_cmd(dev, mr, &req);
	if (ret)
		goto err_free_mr;

	pvrdma_dbg_mr(mr, "DMA MR, lkey %#x\n", mr->ibmr.lkey);
	return &mr->ibmr;

err_free_mr:
	kfree(mr);
err_dec_count:
	atomic_dec(&dev->num_mrs);
	return ERR_PTR(ret);
}

struct ib_mr *pvrdma_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				 u64 virt_addr, int access_flags,
				 struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibpd->device);
	union pvrdma_cmd_req req = {};
	struct pvrdma_mr *mr;
	unsigned int npages;
	int ret;

	access_flags &= ~IB_ACCESS_OPTIONAL;
	if (access_flags & ~PVRDMA_MR_ACCESS_SUPPORTED) {
		pvrdma_dbg(dev, "unsupported MR access %#x\n", access_flags);
		return ERR_PTR(-EOPNOTSUPP);
	}
	if (!length || length > dev->caps.max_mr_size)
		return ERR_PTR(-EINVAL);
	/*
	 * CREATE_MR carries no IOVA: the device addresses the MR by the
	 * user virtual address (spec §5.3), so only IOVA == start works.
	 */
	if (virt_addr != start) {
		pvrdma_dbg(dev, "IOVA %#llx differs from address %#llx\n",
			   virt_addr, start);
		return ERR_PTR(-EOPNOTSUPP);
	}
	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return ERR_PTR(-EINVAL);

	if ((u32)atomic_inc_return(&dev->num_mrs) > dev->caps.max_mr) {
		ret = -ENOMEM;
		goto err_dec_count;
	}

	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr) {
		ret = -ENOMEM;
		goto err_dec_count;
	}

	mr->umem = ib_umem_get(ibpd->device, start, length, access_flags);
	if (IS_ERR(mr->umem)) {
		ret = PTR_ERR(mr->umem);
		goto err_free_mr;
	}

	npages = ib_umem_num_dma_blocks(mr->umem, PAGE_SIZE);
	ret = pvrdma_pdir_init(dev, &mr->pdir, npages, false);
	if (ret)
		goto err_release_umem;
	ret = pvrdma_pdir_insert_umem(&mr->pdir, mr->umem, 0);
	if (ret)
		goto err_free_pdir;

	req.create_mr.start = start;
	req.create_mr.length = length;
	req.create_mr.pdir_dma = mr->pdir.dir_dma;
	req.create_mr.pd_handle = to_ppd(ibpd)->pd_handle;
	req.create_mr.access_flags = access_flags;
	req.create_mr.flags = 0;
	req.create_mr.nchunks = npages;
	ret = pvrdma_create_mr_cmd(dev, mr, &req);
	if (ret)
		goto err_free_pdir;

	mr->ibmr.length = length;
	pvrdma_dbg_mr(mr, "%llu bytes in %u pages, lkey %#x rkey %#x\n",
		      length, npages, mr->ibmr.lkey, mr->ibmr.rkey);
	return &mr->ibmr;

err_free_pdir:
	pvrdma_pdir_cleanup(dev, &mr->pdir);
err_release_umem:
	ib_umem_release(mr->umem);
err_free_mr:
	kfree(mr);
err_dec_count:
	atomic_dec(&dev->num_mrs);
	return ERR_PTR(ret);
}

int pvrdma_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibmr->device);
	struct pvrdma_mr *mr = to_pmr(ibmr);

	pvrdma_dbg_mr(mr, "deregistering\n");
	/* The device must not use the pages after this (spec §5.6). */
	pvrdma_destroy_mr_cmd(dev, mr->mr_handle);
	pvrdma_pdir_cleanup(dev, &mr->pdir);
	ib_umem_release(mr->umem);
	kfree(mr);
	atomic_dec(&dev->num_mrs);
	return 0;
}
