// SPDX-License-Identifier: GPL-2.0-only
/*
 * Address handles.  The device has no AH object: a kernel AH is the
 * address vector (spec §8.2 struct pvrdma_av) that UD and GSI sends copy
 * into their WQEs.  User AHs are built by the provider in user space and
 * never reach the driver.
 */
#include <rdma/ib_addr.h>

#include "pvrdma.h"

/* AV bits 0-23 carry the PD handle, 24-31 the port (spec §8.2). */
#define PVRDMA_AV_PORT_SHIFT		24
#define PVRDMA_AV_TCLASS_SHIFT		20
#define PVRDMA_AV_FLOW_LABEL_MASK	0xFFFFF
#define PVRDMA_AV_PATH_BITS_FLAG	0x80

/**
 * pvrdma_create_ah() - build the address vector of a kernel AH
 * @ibah: AH allocated by the IB core
 * @init: attributes; RoCE with a GRH and a unicast destination GID
 * @udata: NULL (user AHs are the provider's)
 *
 * Context: may be called in atomic context; does not sleep.
 *
 * Return: 0 or a negative errno.
 */
int pvrdma_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init,
		     struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibah->device);
	const struct rdma_ah_attr *attr = init->ah_attr;
	const struct ib_global_route *grh;
	struct pvrdma_ah *ah = to_pah(ibah);
	u32 port = rdma_ah_get_port_num(attr);

	if (!(rdma_ah_get_ah_flags(attr) & IB_AH_GRH) ||
	    attr->type != RDMA_AH_ATTR_TYPE_ROCE || port != PVRDMA_PORT)
		return -EINVAL;
	grh = rdma_ah_read_grh(attr);
	if (rdma_is_multicast_addr((struct in6_addr *)grh->dgid.raw))
		return -EINVAL;

	if ((u32)atomic_inc_return(&dev->num_ahs) > dev->caps.max_ah) {
		atomic_dec(&dev->num_ahs);
		return -ENOMEM;
	}

	ah->av.port_pd = to_ppd(ibah->pd)->pd_handle |
			 port << PVRDMA_AV_PORT_SHIFT;
	ah->av.sl_tclass_flowlabel =
		(u32)grh->traffic_class << PVRDMA_AV_TCLASS_SHIFT |
		(grh->flow_label & PVRDMA_AV_FLOW_LABEL_MASK);
	memcpy(ah->av.dgid, grh->dgid.raw, sizeof(ah->av.dgid));
	ah->av.src_path_bits = rdma_ah_get_path_bits(attr) |
			       PVRDMA_AV_PATH_BITS_FLAG;
	ah->av.gid_index = grh->sgid_index;
	ah->av.stat_rate = 0;
	ah->av.hop_limit = grh->hop_limit;
	memcpy(ah->av.dmac, attr->roce.dmac, sizeof(ah->av.dmac));
	return 0;
}

/**
 * pvrdma_destroy_ah() - release an AH
 * @ibah: AH
 * @flags: RDMA_DESTROY_AH_* (nothing sleeps here anyway)
 *
 * Return: 0.
 */
int pvrdma_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	atomic_dec(&to_pvdev(ibah->device)->num_ahs);
	return 0;
}
