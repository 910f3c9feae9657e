/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * PVRDMA guest driver: differences between the kernels it builds against
 * (Debian's 6.1, 6.12 and 7.x).
 *
 * Kbuild probes the kernel's headers and defines PVRDMA_HAVE_<API> for
 * each newer API it finds; the versions named below are where each change
 * appeared upstream. The driver is written against the newer helper
 * names, which this header maps onto the older ones when they are
 * missing. Device operations whose prototype changed get a small adapter
 * next to the operations table (pvrdma_verbs.c), so that the driver's own
 * functions keep one prototype for every kernel:
 *
 * PVRDMA_HAVE_CREATE_CQ_ATTRS (6.11): .create_cq receives the uverbs
 *	attribute bundle, which holds the driver udata (NULL bundle for a
 *	CQ of a kernel consumer), instead of the udata itself.
 * PVRDMA_HAVE_REG_USER_MR_DMAH (6.17): .reg_user_mr takes a DMA handle
 *	(struct ib_dmah), NULL unless the driver offers .alloc_dmah.
 * PVRDMA_HAVE_RESIZE_USER_CQ (7.1): .resize_cq became .resize_user_cq,
 *	for user CQs only, with an unsigned entry count.
 */
#ifndef _PVRDMA_COMPAT_H_
#define _PVRDMA_COMPAT_H_

#include <linux/mm.h>
#include <rdma/ib_umem.h>

#ifndef PVRDMA_COMPAT_PROBED
#error "pvrdma: build through guest-driver/Kbuild (it probes the kernel API)"
#endif

/*
 * 6.3 made vma->vm_flags read-only outside the mm code: drivers change it
 * with vm_flags_set(). Older kernels let the field be written directly.
 */
#ifndef PVRDMA_HAVE_VM_FLAGS_SET
static inline void vm_flags_set(struct vm_area_struct *vma, vm_flags_t flags)
{
	vma->vm_flags |= flags;
}
#endif

/* 7.2 renamed ib_umem_get() to ib_umem_get_va(), arguments unchanged. */
#ifndef PVRDMA_HAVE_IB_UMEM_GET_VA
static inline struct ib_umem *ib_umem_get_va(struct ib_device *device,
					     unsigned long addr, size_t size,
					     int access)
{
	return ib_umem_get(device, addr, size, access);
}
#endif

#endif /* _PVRDMA_COMPAT_H_ */
