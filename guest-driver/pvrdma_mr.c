// SPDX-License-Identifier: GPL-2.0-only
/*
 * Memory regions (spec §5.3 CREATE_MR): the DMA MR of kernel PDs, user
 * MRs over pinned memory, fast-register MRs whose page list is a
 * driver-owned page directory that REG_MR WQEs point at (spec §8.2), and
 * memory windows where the device offers them (extension
 * PVRDMA_EX_CAP_MW, spec §14): key-only MRs that user space binds with
 * BIND_MW work requests.
 */
#include <linux/slab.h>

#include "pvrdma.h"

/* Access bits the device understands (spec §5.4); others are refused. */
#define PVRDMA_MR_ACCESS_SUPPORTED					\
	(IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |		\
	 IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC |		\
	 IB_ACCESS_MW_BIND)

/* -EBUSY: memory windows are bound to the MR (the MR stays). */
static int pvrdma_destroy_mr_cmd(struct pvrdma_dev *dev, u32 mr_handle)
{
	union pvrdma_cmd_req req = {};

	req.destroy_mr.hdr.cmd = PVRDMA_CMD_DESTROY_MR;
	req.destroy_mr.mr_handle = mr_handle;
	return pvrdma_cmd_post(dev, &req, NULL);
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

/* An MR object, counted against caps.max_mr. */
static struct pvrdma_mr *pvrdma_mr_alloc(struct pvrdma_dev *dev)
{
	struct pvrdma_mr *mr = NULL;

	if ((u32)atomic_inc_return(&dev->num_mrs) <= dev->caps.max_mr)
		mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		atomic_dec(&dev->num_mrs);
	return mr;
}

static void pvrdma_mr_free(struct pvrdma_dev *dev, struct pvrdma_mr *mr)
{
	kfree(mr);
	atomic_dec(&dev->num_mrs);
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

	mr = pvrdma_mr_alloc(dev);
	if (!mr)
		return ERR_PTR(-ENOMEM);

	req.create_mr.pd_handle = to_ppd(ibpd)->pd_handle;
	req.create_mr.access_flags = access_flags;
	req.create_mr.flags = PVRDMA_MR_FLAG_DMA;
	ret = pvrdma_create_mr_cmd(dev, mr, &req);
	if (ret)
		goto err_free_mr;

	/* ibmr.device is set by the IB core only after we return. */
	pvrdma_dbg(dev, "mr#%u: DMA MR, lkey %#x\n", mr->mr_handle,
		   mr->ibmr.lkey);
	return &mr->ibmr;

err_free_mr:
	pvrdma_mr_free(dev, mr);
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

	mr = pvrdma_mr_alloc(dev);
	if (!mr)
		return ERR_PTR(-ENOMEM);

	mr->umem = ib_umem_get_va(ibpd->device, start, length, access_flags);
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
	mr->start = start;
	mr->access = access_flags;
	pvrdma_dbg(dev, "mr#%u: %llu bytes in %u pages, lkey %#x rkey %#x\n",
		   mr->mr_handle, length, npages, mr->ibmr.lkey,
		   mr->ibmr.rkey);
	return &mr->ibmr;

err_free_pdir:
	pvrdma_pdir_cleanup(dev, &mr->pdir);
err_release_umem:
	ib_umem_release(mr->umem);
err_free_mr:
	pvrdma_mr_free(dev, mr);
	return ERR_PTR(ret);
}

/**
 * pvrdma_rereg_user_mr() - change a user MR's pages, access or PD
 * @ibmr: the user MR
 * @flags: IB_MR_REREG_TRANS, _PD, _ACCESS
 * @start: new address (with IB_MR_REREG_TRANS)
 * @length: new length (with IB_MR_REREG_TRANS)
 * @virt_addr: new IOVA (with IB_MR_REREG_TRANS)
 * @access_flags: new access (with IB_MR_REREG_ACCESS)
 * @ibpd: the PD the MR is to be in (the old one without IB_MR_REREG_PD)
 * @udata: none expected
 *
 * A change of access or PD alone is made in place where the device offers
 * MODIFY_MR (extension PVRDMA_EX_CAP_MODIFY_MR) and the pages were pinned
 * writable if the new access writes: the keys stay, so rkeys already
 * handed to peers keep working. Otherwise (new pages, no extension) a new
 * MR is registered with what changes and what stays, and the IB core
 * replaces the old one (DESTROY_MR) under the same user handle: the keys
 * change, as ibverbs allows. On an error the old MR is untouched.
 *
 * Return: NULL (changed in place), the new MR, or an ERR_PTR.
 */
struct ib_mr *pvrdma_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start,
				   u64 length, u64 virt_addr, int access_flags,
				   struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibmr->device);
	struct pvrdma_mr *old = to_pmr(ibmr);

	if (!old->umem)
		return ERR_PTR(-EINVAL);
	if (!(flags & IB_MR_REREG_TRANS) &&
	    (dev->caps.ex_comp_mask & PVRDMA_EX_CAP_MODIFY_MR) &&
	    (!(flags & IB_MR_REREG_ACCESS) || old->umem->writable ||
	     !ib_access_writable(access_flags))) {
		union pvrdma_cmd_req req = {};
		int ret;

		access_flags &= ~IB_ACCESS_OPTIONAL;
		if ((flags & IB_MR_REREG_ACCESS) &&
		    (access_flags & ~PVRDMA_MR_ACCESS_SUPPORTED))
			return ERR_PTR(-EOPNOTSUPP);
		req.modify_mr.hdr.cmd = PVRDMA_CMD_MODIFY_MR;
		req.modify_mr.mr_handle = old->mr_handle;
		if (flags & IB_MR_REREG_ACCESS) {
			req.modify_mr.flags |= PVRDMA_MODIFY_MR_ACCESS;
			req.modify_mr.access_flags = access_flags;
		}
		if (flags & IB_MR_REREG_PD) {
			req.modify_mr.flags |= PVRDMA_MODIFY_MR_PD;
			req.modify_mr.pd_handle = to_ppd(ibpd)->pd_handle;
		}
		ret = pvrdma_cmd_post(dev, &req, NULL);
		if (ret)
			return ERR_PTR(ret);
		if (flags & IB_MR_REREG_ACCESS)
			old->access = access_flags;
		return NULL;
	}
	if (!(flags & IB_MR_REREG_TRANS)) {
		start = old->start;
		virt_addr = old->start;
		length = ibmr->length;
	}
	if (!(flags & IB_MR_REREG_ACCESS))
		access_flags = old->access;
	return pvrdma_reg_user_mr(ibpd, start, length, virt_addr, access_flags,
				  udata);
}

/**
 * pvrdma_alloc_mr() - a fast-register MR (CREATE_MR with the FRMR flag)
 * @ibpd: PD
 * @mr_type: IB_MR_TYPE_MEM_REG only
 * @max_num_sg: page-list capacity, 1..max_fast_reg_page_list_len
 *
 * The page list (one directory page and one table page) is allocated
 * here; map_mr_sg fills it and a REG_MR WQE hands it to the device.
 *
 * Return: the MR or an ERR_PTR.
 */
struct ib_mr *pvrdma_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type mr_type,
			      u32 max_num_sg)
{
	struct pvrdma_dev *dev = to_pvdev(ibpd->device);
	union pvrdma_cmd_req req = {};
	struct pvrdma_mr *mr;
	int ret;

	if (mr_type != IB_MR_TYPE_MEM_REG)
		return ERR_PTR(-EOPNOTSUPP);
	if (!(dev->ibdev.attrs.device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS))
		return ERR_PTR(-EOPNOTSUPP);
	if (!max_num_sg ||
	    max_num_sg > dev->ibdev.attrs.max_fast_reg_page_list_len)
		return ERR_PTR(-EINVAL);

	mr = pvrdma_mr_alloc(dev);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->max_pages = max_num_sg;

	ret = pvrdma_pdir_init(dev, &mr->pdir, max_num_sg, false);
	if (ret)
		goto err_free_mr;

	req.create_mr.pd_handle = to_ppd(ibpd)->pd_handle;
	req.create_mr.flags = PVRDMA_MR_FLAG_FRMR;
	req.create_mr.nchunks = max_num_sg;
	ret = pvrdma_create_mr_cmd(dev, mr, &req);
	if (ret)
		goto err_free_pdir;

	pvrdma_dbg(dev, "mr#%u: fast-reg MR of %u pages, lkey %#x rkey %#x\n",
		   mr->mr_handle, max_num_sg, mr->ibmr.lkey, mr->ibmr.rkey);
	return &mr->ibmr;

err_free_pdir:
	pvrdma_pdir_cleanup(dev, &mr->pdir);
err_free_mr:
	pvrdma_mr_free(dev, mr);
	return ERR_PTR(ret);
}

static int pvrdma_set_page(struct ib_mr *ibmr, u64 addr)
{
	struct pvrdma_mr *mr = to_pmr(ibmr);

	if (mr->npages >= mr->max_pages)
		return -ENOMEM;
	pvrdma_pdir_set_page(&mr->pdir, mr->npages++, addr);
	return 0;
}

/**
 * pvrdma_map_mr_sg() - write a fast-register MR's page list
 * @ibmr: MR from pvrdma_alloc_mr()
 * @sg: DMA-mapped scatterlist
 * @sg_nents: entries in @sg
 * @sg_offset: offset into the first entry, updated
 *
 * The device reads the page list when it executes the REG_MR WQE, so the
 * MR must not be mapped again before that WQE completed.
 *
 * Return: number of @sg entries mapped, or a negative errno.
 */
int pvrdma_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		     unsigned int *sg_offset)
{
	struct pvrdma_mr *mr = to_pmr(ibmr);

	if (!mr->max_pages)
		return -EINVAL;
	mr->npages = 0;
	return ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, pvrdma_set_page);
}

int pvrdma_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibmr->device);
	struct pvrdma_mr *mr = to_pmr(ibmr);

	int ret;

	pvrdma_dbg_mr(mr, "deregistering\n");
	/*
	 * The device must not use the pages after this (spec §5.6). It
	 * refuses while memory windows are bound to the MR (IBA 11.2.8.4):
	 * the MR stays and its user sees EBUSY. Any other failure means
	 * the device is gone; the pages are released anyway.
	 */
	ret = pvrdma_destroy_mr_cmd(dev, mr->mr_handle);
	if (ret == -EBUSY)
		return ret;
	pvrdma_pdir_cleanup(dev, &mr->pdir);
	ib_umem_release(mr->umem);
	pvrdma_mr_free(dev, mr);
	return 0;
}

/**
 * pvrdma_alloc_mw() - a memory window (CREATE_MR with an MW flag)
 * @ibmw: the window, its type and PD set by the IB core
 * @udata: from user space (windows are a user-space verb)
 *
 * Windows count against caps.max_mr: the device keeps them in its MR
 * table. Binding and invalidation are work requests the provider posts.
 *
 * Return: 0 or a negative errno.
 */
int pvrdma_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibmw->device);
	struct pvrdma_mw *mw = to_pmw(ibmw);
	union pvrdma_cmd_req req = {};
	union pvrdma_cmd_resp resp;
	int ret;

	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EINVAL;
	if ((u32)atomic_inc_return(&dev->num_mrs) > dev->caps.max_mr) {
		ret = -ENOMEM;
		goto err_count;
	}
	req.create_mr.hdr.cmd = PVRDMA_CMD_CREATE_MR;
	req.create_mr.pd_handle = to_ppd(ibmw->pd)->pd_handle;
	req.create_mr.flags = ibmw->type == IB_MW_TYPE_2 ?
			      PVRDMA_MR_FLAG_MW_TYPE2 : PVRDMA_MR_FLAG_MW_TYPE1;
	ret = pvrdma_cmd_post(dev, &req, &resp);
	if (ret)
		goto err_count;
	mw->mr_handle = resp.create_mr_resp.mr_handle;
	ibmw->rkey = resp.create_mr_resp.rkey;
	pvrdma_dbg(dev, "mr#%u: type %d memory window, rkey %#x\n",
		   mw->mr_handle, ibmw->type, ibmw->rkey);
	return 0;

err_count:
	atomic_dec(&dev->num_mrs);
	return ret;
}

int pvrdma_dealloc_mw(struct ib_mw *ibmw)
{
	struct pvrdma_dev *dev = to_pvdev(ibmw->device);

	/* Unbinds (invalidates) the window; the device never refuses it. */
	pvrdma_destroy_mr_cmd(dev, to_pmw(ibmw)->mr_handle);
	atomic_dec(&dev->num_mrs);
	return 0;
}
