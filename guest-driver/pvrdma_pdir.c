// SPDX-License-Identifier: GPL-2.0-only
/*
 * Page directories (spec §4): a directory page of u64 bus addresses of
 * page tables, each table holding the u64 bus addresses of up to 512
 * data pages.  Page i sits in table i >> 9, slot i & 0x1FF.
 */
#include <linux/dma-mapping.h>
#include <linux/highmem.h>
#include <linux/slab.h>
#include <rdma/iter.h>

#include "pvrdma.h"

static inline u64 *pvrdma_pdir_entry(struct pvrdma_pdir *pdir,
				     unsigned int idx)
{
	unsigned int table = (idx >> PVRDMA_PDIR_TABLE_SHIFT) &
			     PVRDMA_PDIR_TABLE_MASK;

	return &pdir->tables[table][idx & PVRDMA_PDIR_SLOT_MASK];
}

/**
 * pvrdma_pdir_init() - allocate a page directory for @npages data pages
 * @dev: device
 * @pdir: directory to initialise
 * @npages: data pages to describe, 1..PVRDMA_PDIR_MAX_PAGES
 * @alloc_pages: also allocate the data pages (kernel-owned rings);
 *		 otherwise the caller fills the entries
 *
 * All memory comes from dma_alloc_coherent(), so unused entries are zero.
 *
 * Return: 0 or a negative errno.
 */
int pvrdma_pdir_init(struct pvrdma_dev *dev, struct pvrdma_pdir *pdir,
		     unsigned int npages, bool alloc_pages)
{
	struct device *dmadev = &dev->pdev->dev;
	dma_addr_t dma;
	unsigned int i;

	if (!npages || npages > PVRDMA_PDIR_MAX_PAGES)
		return -EINVAL;

	memset(pdir, 0, sizeof(*pdir));
	pdir->dir = dma_alloc_coherent(dmadev, PAGE_SIZE, &pdir->dir_dma,
				       GFP_KERNEL);
	if (!pdir->dir)
		return -ENOMEM;

	pdir->ntables = ((npages - 1) >> PVRDMA_PDIR_TABLE_SHIFT) + 1;
	pdir->tables = kcalloc(pdir->ntables, sizeof(*pdir->tables),
			       GFP_KERNEL);
	if (!pdir->tables)
		goto err_free;

	for (i = 0; i < pdir->ntables; i++) {
		pdir->tables[i] = dma_alloc_coherent(dmadev, PAGE_SIZE, &dma,
						     GFP_KERNEL);
		if (!pdir->tables[i])
			goto err_free;
		pdir->dir[i] = dma;
	}
	pdir->npages = npages;

	if (!alloc_pages)
		return 0;

	pdir->pages = kcalloc(npages, sizeof(*pdir->pages), GFP_KERNEL);
	if (!pdir->pages)
		goto err_free;

	for (i = 0; i < npages; i++) {
		pdir->pages[i] = dma_alloc_coherent(dmadev, PAGE_SIZE, &dma,
						    GFP_KERNEL);
		if (!pdir->pages[i])
			goto err_free;
		*pvrdma_pdir_entry(pdir, i) = dma;
	}
	return 0;

err_free:
	pvrdma_pdir_cleanup(dev, pdir);
	return -ENOMEM;
}

/**
 * pvrdma_pdir_cleanup() - free a page directory and any pages it owns
 * @dev: device
 * @pdir: directory, possibly partially initialised or already cleaned up
 */
void pvrdma_pdir_cleanup(struct pvrdma_dev *dev, struct pvrdma_pdir *pdir)
{
	struct device *dmadev = &dev->pdev->dev;
	unsigned int i;

	if (pdir->pages) {
		for (i = 0; i < pdir->npages; i++)
			if (pdir->pages[i])
				dma_free_coherent(dmadev, PAGE_SIZE,
						  pdir->pages[i],
						  *pvrdma_pdir_entry(pdir, i));
		kfree(pdir->pages);
	}
	if (pdir->tables) {
		for (i = 0; i < pdir->ntables; i++)
			if (pdir->tables[i])
				dma_free_coherent(dmadev, PAGE_SIZE,
						  pdir->tables[i],
						  pdir->dir[i]);
		kfree(pdir->tables);
	}
	if (pdir->dir)
		dma_free_coherent(dmadev, PAGE_SIZE, pdir->dir, pdir->dir_dma);
	memset(pdir, 0, sizeof(*pdir));
}

/**
 * pvrdma_pdir_set_page() - store the bus address of data page @idx
 * @pdir: directory
 * @idx: logical page index, < pdir->npages
 * @dma: page-aligned bus address
 */
void pvrdma_pdir_set_page(struct pvrdma_pdir *pdir, unsigned int idx,
			  dma_addr_t dma)
{
	if (WARN_ON_ONCE(idx >= pdir->npages))
		return;
	*pvrdma_pdir_entry(pdir, idx) = dma;
}

/**
 * pvrdma_pdir_insert_umem() - describe pinned user memory, page by page
 * @pdir: directory
 * @umem: pinned memory
 * @first: logical index of the first page to fill
 *
 * Return: 0, or -EINVAL if @umem does not fit in the directory.
 */
int pvrdma_pdir_insert_umem(struct pvrdma_pdir *pdir, struct ib_umem *umem,
			    unsigned int first)
{
	struct ib_block_iter biter;
	unsigned int i = first;

	rdma_umem_for_each_dma_block(umem, &biter, PAGE_SIZE) {
		if (i >= pdir->npages)
			return -EINVAL;
		*pvrdma_pdir_entry(pdir, i++) =
			rdma_block_iter_dma_address(&biter);
	}
	return 0;
}

/**
 * pvrdma_pdir_elem() - CPU address of a ring element in driver-owned pages
 * @pdir: directory with driver-owned pages
 * @first_page: logical page where the element array starts
 * @slot: element index
 * @elem_size: element size, a power of two <= PAGE_SIZE
 *
 * Return: the element's address, or NULL if it lies outside @pdir.
 */
void *pvrdma_pdir_elem(struct pvrdma_pdir *pdir, unsigned int first_page,
		       u32 slot, size_t elem_size)
{
	u64 off = (u64)slot * elem_size;
	u64 page = first_page + (off >> PAGE_SHIFT);

	if (!pdir->pages || page >= pdir->npages)
		return NULL;
	return pdir->pages[page] + (off & ~PAGE_MASK);
}

/*
 * struct pvrdma_create_cq and struct pvrdma_create_srq (the uapi requests
 * of a provider-owned ring) have one layout: {buf_addr, buf_size, reserved}.
 */
static_assert(sizeof(struct pvrdma_create_cq) ==
	      sizeof(struct pvrdma_create_srq));
static_assert(offsetof(struct pvrdma_create_cq, buf_size) ==
	      offsetof(struct pvrdma_create_srq, buf_size));

/**
 * pvrdma_pdir_pin_user_ring() - pin a provider's ring buffer and describe it
 * @dev: the device
 * @udata: a CQ or SRQ creation request (ring-state page, then entries)
 * @ring_bytes: bytes the device uses after the ring-state page
 * @umem: set to the pinned buffer
 * @pdir: set up to describe it, ring-state page first
 *
 * The request's reserved field is not checked: rdma-core's stock
 * vmw_pvrdma provider leaves it uninitialised.
 *
 * Return: the number of pages described, or a negative errno.
 */
int pvrdma_pdir_pin_user_ring(struct pvrdma_dev *dev, struct ib_udata *udata,
			      size_t ring_bytes, struct ib_umem **umem,
			      struct pvrdma_pdir *pdir)
{
	struct pvrdma_create_cq ucmd = {};
	unsigned int npages;
	int ret;

	ret = pvrdma_udata_copy_in(udata, &ucmd, sizeof(ucmd),
				   offsetofend(typeof(ucmd), buf_size));
	if (ret)
		return ret;
	if (!ucmd.buf_size || !PAGE_ALIGNED(ucmd.buf_addr))
		return -EINVAL;

	*umem = ib_umem_get_va(&dev->ibdev, ucmd.buf_addr, ucmd.buf_size,
			       IB_ACCESS_LOCAL_WRITE);
	if (IS_ERR(*umem)) {
		ret = PTR_ERR(*umem);
		*umem = NULL;
		return ret;
	}
	npages = ib_umem_num_dma_blocks(*umem, PAGE_SIZE);
	if (npages < 2 || npages > PVRDMA_PDIR_MAX_PAGES ||
	    ((size_t)npages - 1) * PAGE_SIZE < ring_bytes) {
		ret = -EINVAL;
		goto err_release_umem;
	}
	ret = pvrdma_pdir_init(dev, pdir, npages, false);
	if (ret)
		goto err_release_umem;
	ret = pvrdma_pdir_insert_umem(pdir, *umem, 0);
	if (ret)
		goto err_free_pdir;
	return npages;

err_free_pdir:
	pvrdma_pdir_cleanup(dev, pdir);
err_release_umem:
	ib_umem_release(*umem);
	*umem = NULL;
	return ret;
}

/**
 * pvrdma_umem_mark_dead() - mark a user ring index dead after removal
 * @dev: the device, being removed (ib_active false)
 * @umem: the pinned user buffer whose first page is the ring state
 * @offset: byte offset of the u32 index in that page
 *
 * Called when the IB core destroys a user object because the device is
 * going away with the object's context still open (its process runs on,
 * polling or posting, and the device will never touch the ring again).
 * The index becomes PVRDMA_RING_DEAD in the process's own memory, so the
 * provider's next poll or post fails instead of spinning forever.  Does
 * nothing while the device is registered (a process destroying its own
 * objects) or for a buffer that does not start on a page boundary.
 */
void pvrdma_umem_mark_dead(struct pvrdma_dev *dev, struct ib_umem *umem,
			   unsigned int offset)
{
	struct page *page;
	__le32 *index;
	void *va;

	if (READ_ONCE(dev->ib_active) || !umem || ib_umem_offset(umem) ||
	    offset > PAGE_SIZE - sizeof(u32) || !umem->sgt_append.sgt.sgl)
		return;
	page = sg_page(umem->sgt_append.sgt.sgl);
	va = kmap_local_page(page);
	index = va + offset;
	WRITE_ONCE(*index, cpu_to_le32(PVRDMA_RING_DEAD));
	kunmap_local(va);
}
