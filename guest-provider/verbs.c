// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Control-path verbs of the PVRDMA provider: each is one uverbs command,
 * the kernel driver does the device work.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <util/util.h>

#include "pvrdma.h"
#include "verbs.h"

/*
 * QUERY_DEVICE carries no udata in either direction (spec §9). The firmware
 * version is major.minor.sub in bits 47:32, 31:16 and 15:0 of fw_ver, shown
 * with a three-digit sub version.
 */
int pvrdma_query_device_ex(struct ibv_context *ibvctx,
			   const struct ibv_query_device_ex_input *input,
			   struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	uint64_t fw_ver;
	int err;

	err = ibv_cmd_query_device_any(ibvctx, input, attr, attr_size, &resp,
				       &resp_size);
	if (err)
		return err;

	/* A project extension the kernel does not know of (spec §14). */
	if (to_pvrdma_ctx(ibvctx)->has_atomic_write &&
	    attr_size >= offsetofend(struct ibv_device_attr_ex,
				     device_cap_flags_ex))
		attr->device_cap_flags_ex |= IB_UVERBS_DEVICE_ATOMIC_WRITE;

	fw_ver = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver),
		 "%u.%u.%03u", (unsigned int)(fw_ver >> 32) & 0xffff,
		 (unsigned int)(fw_ver >> 16) & 0xffff,
		 (unsigned int)fw_ver & 0xffff);

	return 0;
}

int pvrdma_query_port(struct ibv_context *ibvctx, uint8_t port,
		      struct ibv_port_attr *port_attr)
{
	struct ibv_query_port cmd;

	return ibv_cmd_query_port(ibvctx, port, port_attr, &cmd, sizeof(cmd));
}

/*
 * The raw clock is the device's (spec §14), ns in tv_nsec as mlx5 gives
 * its cycles, in the width of the CQE timestamps (48 bits), so that the
 * two compare directly.
 */
int pvrdma_query_rt_values(struct ibv_context *ibvctx,
			   struct ibv_values_ex *values)
{
	struct pvrdma_context *ctx = to_pvrdma_ctx(ibvctx);
	uint32_t comp_mask = 0;

	if (values->comp_mask & ~(uint32_t)IBV_VALUES_MASK_RAW_CLOCK)
		return EINVAL;
	if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
		if (!ctx->has_clock)
			return EOPNOTSUPP;
		values->raw_clock.tv_sec = 0;
		values->raw_clock.tv_nsec = pvrdma_read_clock(ctx) &
					    ((1ull << PVRDMA_CQE_TS_BITS) - 1);
		comp_mask |= IBV_VALUES_MASK_RAW_CLOCK;
	}
	values->comp_mask = comp_mask;
	return 0;
}

struct ibv_pd *pvrdma_alloc_pd(struct ibv_context *ibvctx)
{
	struct pvrdma_ucmd_alloc_pd_resp resp = {};
	struct pvrdma_ucmd_alloc_pd cmd;
	struct pvrdma_pd *pd;
	int err;

	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}

	err = ibv_cmd_alloc_pd(ibvctx, &pd->ibvpd, &cmd.ibv_cmd, sizeof(cmd),
			       &resp.ibv_resp, sizeof(resp));
	if (err) {
		verbs_err(verbs_get_ctx(ibvctx), "ALLOC_PD failed: %d\n", err);
		free(pd);
		errno = err;
		return NULL;
	}

	pd->pdn = resp.pdn;
	atomic_init(&pd->refcount, 1);

	return &pd->ibvpd;
}

int pvrdma_dealloc_pd(struct ibv_pd *ibvpd)
{
	struct pvrdma_pd *pd = to_pvrdma_pd(ibvpd);
	int err;

	if (atomic_load(&pd->refcount) > 1)
		return EBUSY;

	if (pd->protection_domain) {
		atomic_fetch_sub(&pd->protection_domain->refcount, 1);
		if (pd->td)
			atomic_fetch_sub(&pd->td->refcount, 1);
		free(pd);
		return 0;
	}

	err = ibv_cmd_dealloc_pd(ibvpd);
	if (err) {
		verbs_err(verbs_get_ctx(ibvpd->context),
			  "DEALLOC_PD %u failed: %d\n", pd->pdn, err);
		return err;
	}

	free(pd);
	return 0;
}

/* Thread domains are the provider's alone: no command, no attributes. */
struct ibv_td *pvrdma_alloc_td(struct ibv_context *ibvctx,
			       struct ibv_td_init_attr *attr)
{
	struct pvrdma_td *td;

	if (attr->comp_mask) {
		errno = EINVAL;
		return NULL;
	}
	td = calloc(1, sizeof(*td));
	if (!td) {
		errno = ENOMEM;
		return NULL;
	}
	td->ibvtd.context = ibvctx;
	atomic_init(&td->refcount, 1);
	return &td->ibvtd;
}

int pvrdma_dealloc_td(struct ibv_td *ibvtd)
{
	struct pvrdma_td *td = container_of(ibvtd, struct pvrdma_td, ibvtd);

	if (atomic_load(&td->refcount) > 1)
		return EBUSY;
	free(td);
	return 0;
}

#define PVRDMA_PARENT_DOMAIN_MASK (IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | \
				   IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)

/*
 * A parent domain on a PD of this context (not on another parent domain),
 * with a thread domain of this context or none; allocators come in pairs.
 */
struct ibv_pd *pvrdma_alloc_parent_domain(struct ibv_context *ibvctx,
					  struct ibv_parent_domain_init_attr *attr)
{
	struct pvrdma_pd *pad, *pd;

	if (ibv_check_alloc_parent_domain(attr))
		return NULL;
	pd = to_pvrdma_pd(attr->pd);
	if ((attr->comp_mask & ~PVRDMA_PARENT_DOMAIN_MASK) ||
	    attr->pd->context != ibvctx || pd->protection_domain ||
	    (attr->td && attr->td->context != ibvctx) ||
	    (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS &&
	     (!attr->alloc || !attr->free))) {
		errno = EINVAL;
		return NULL;
	}

	pad = calloc(1, sizeof(*pad));
	if (!pad) {
		errno = ENOMEM;
		return NULL;
	}
	if (attr->td) {
		pad->td = container_of(attr->td, struct pvrdma_td, ibvtd);
		atomic_fetch_add(&pad->td->refcount, 1);
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		pad->alloc = attr->alloc;
		pad->free = attr->free;
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		pad->pd_context = attr->pd_context;
	pad->protection_domain = pd;
	pad->pdn = pd->pdn;
	atomic_fetch_add(&pd->refcount, 1);
	atomic_init(&pad->refcount, 1);
	ibv_initialize_parent_domain(&pad->ibvpd, &pd->ibvpd);
	return &pad->ibvpd;
}

struct pvrdma_pd *pvrdma_parent_domain(struct ibv_pd *ibvpd)
{
	struct pvrdma_pd *pd = to_pvrdma_pd(ibvpd);

	return pd->protection_domain ? pd : NULL;
}

void pvrdma_pad_get(struct pvrdma_pd *pad)
{
	if (pad)
		atomic_fetch_add(&pad->refcount, 1);
}

void pvrdma_pad_put(struct pvrdma_pd *pad)
{
	if (pad)
		atomic_fetch_sub(&pad->refcount, 1);
}

/*
 * XRC domains (spec §14): the kernel's, shared between processes through
 * the file the application names; no provider state and no udata. Only
 * where the device offers XRC (the stock driver has none either).
 */
struct ibv_xrcd *pvrdma_open_xrcd(struct ibv_context *ibvctx,
				  struct ibv_xrcd_init_attr *attr)
{
	struct ib_uverbs_open_xrcd_resp resp;
	struct ibv_open_xrcd cmd;
	struct verbs_xrcd *xrcd;
	int err;

	if (!to_pvrdma_ctx(ibvctx)->has_xrc) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	xrcd = calloc(1, sizeof(*xrcd));
	if (!xrcd) {
		errno = ENOMEM;
		return NULL;
	}
	err = ibv_cmd_open_xrcd(ibvctx, xrcd, sizeof(*xrcd), attr, &cmd,
				sizeof(cmd), &resp, sizeof(resp));
	if (err) {
		free(xrcd);
		errno = err;
		return NULL;
	}
	return &xrcd->xrcd;
}

int pvrdma_close_xrcd(struct ibv_xrcd *ibvxrcd)
{
	struct verbs_xrcd *xrcd = container_of(ibvxrcd, struct verbs_xrcd,
					       xrcd);
	int err;

	err = ibv_cmd_close_xrcd(xrcd);
	if (err)
		return err;
	free(xrcd);
	return 0;
}

/*
 * Register user memory: the kernel pins it and hands the device a page
 * directory; the MR has no provider-private state and no udata (spec §9).
 */
struct ibv_mr *pvrdma_reg_mr(struct ibv_pd *ibvpd, void *addr, size_t length,
			     uint64_t hca_va, int access)
{
	struct ib_uverbs_reg_mr_resp resp;
	struct ibv_reg_mr cmd;
	struct verbs_mr *vmr;
	int err;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr) {
		errno = ENOMEM;
		return NULL;
	}

	err = ibv_cmd_reg_mr(ibvpd, addr, length, hca_va, access, vmr, &cmd,
			     sizeof(cmd), &resp, sizeof(resp));
	if (err) {
		free(vmr);
		errno = err;
		return NULL;
	}

	return &vmr->ibv_mr;
}

/*
 * The kernel registers a new MR with what changed and what stays, and
 * replaces the old one under the same handle: the keys change.
 */
int pvrdma_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
		    void *addr, size_t length, int access)
{
	struct ib_uverbs_rereg_mr_resp resp;
	struct ibv_rereg_mr cmd;

	return ibv_cmd_rereg_mr(vmr, flags, addr, length, (uintptr_t)addr,
				access, pd, &cmd, sizeof(cmd), &resp,
				sizeof(resp));
}

int pvrdma_dereg_mr(struct verbs_mr *vmr)
{
	int err;

	err = ibv_cmd_dereg_mr(vmr);
	if (err)
		return err;

	free(vmr);
	return 0;
}

/*
 * Memory windows (extension PVRDMA_EX_CAP_MW): the kernel allocates them
 * where the device offers them, EOPNOTSUPP elsewhere.
 */
struct ibv_mw *pvrdma_alloc_mw(struct ibv_pd *ibvpd, enum ibv_mw_type type)
{
	struct ib_uverbs_alloc_mw_resp resp;
	struct ibv_alloc_mw cmd;
	struct ibv_mw *mw;
	int err;

	mw = calloc(1, sizeof(*mw));
	if (!mw) {
		errno = ENOMEM;
		return NULL;
	}
	err = ibv_cmd_alloc_mw(ibvpd, type, mw, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (err) {
		free(mw);
		errno = err;
		return NULL;
	}
	return mw;
}

int pvrdma_dealloc_mw(struct ibv_mw *mw)
{
	int ret = ibv_cmd_dealloc_mw(mw);

	if (ret)
		return ret;
	free(mw);
	return 0;
}

/*
 * Ring buffers (CQ, QP and SRQ rings, inline data) are page aligned and
 * zeroed, as the device expects of fresh ring state (spec §8.1), and kept
 * out of fork() children so that a child's copy-on-write cannot move pages
 * the device writes into: madvise() directly, because ibv_dontfork_range()
 * does nothing unless the application called ibv_fork_init().
 *
 * A parent domain with allocators is asked first, with the page size as
 * the alignment; it may answer IBV_ALLOCATOR_USE_DEFAULT (then the
 * provider maps its own), NULL (ENOMEM), or memory, which must be page
 * aligned (else EINVAL, and it goes back to its free callback). Its memory
 * goes back with MADV_DOFORK, as it came.
 */
int pvrdma_buf_alloc(struct pvrdma_buf *buf, struct pvrdma_device *dev,
		     struct pvrdma_pd *pad, uint64_t type, size_t size)
{
	void *p;
	int err;

	memset(buf, 0, sizeof(*buf));
	if (pad && pad->alloc) {
		p = pad->alloc(&pad->ibvpd, pad->pd_context, size, dev->pg_sz,
			       type);
		if (!p)
			return ENOMEM;
		if (p != IBV_ALLOCATOR_USE_DEFAULT) {
			err = (uintptr_t)p & (dev->pg_sz - 1) ? EINVAL : 0;
			if (!err) {
				memset(p, 0, size);
				if (madvise(p, size, MADV_DONTFORK))
					err = errno;
			}
			if (err) {
				pad->free(&pad->ibvpd, pad->pd_context, p,
					  type);
				return err;
			}
			buf->addr = p;
			buf->size = size;
			buf->pad = pad;
			buf->type = type;
			return 0;
		}
	}

	p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return errno;
	if (madvise(p, size, MADV_DONTFORK)) {
		err = errno;
		munmap(p, size);
		return err;
	}
	buf->addr = p;
	buf->size = size;
	return 0;
}

void pvrdma_buf_free(struct pvrdma_buf *buf)
{
	struct pvrdma_pd *pad = buf->pad;

	if (!buf->addr)
		return;
	if (pad) {
		madvise(buf->addr, buf->size, MADV_DOFORK);
		pad->free(&pad->ibvpd, pad->pd_context, buf->addr, buf->type);
	} else {
		munmap(buf->addr, buf->size);
	}
	buf->addr = NULL;
}

/*
 * The destination MAC of a RoCE AH. With IP-based GIDs (the kernel driver
 * sets them) the kernel's neighbour table knows it; otherwise only
 * link-local and multicast GIDs map to a MAC by themselves.
 */
static int pvrdma_resolve_dmac(struct ibv_context *ibvctx,
			       struct ibv_ah_attr *attr,
			       const struct ibv_port_attr *port_attr,
			       uint8_t dmac[ETHERNET_LL_SIZE])
{
	const uint8_t *gid = attr->grh.dgid.raw;
	static const uint8_t link_local[8] = { 0xfe, 0x80 };
	int err;

	if (port_attr->port_cap_flags & IBV_PORT_IP_BASED_GIDS) {
		err = ibv_resolve_eth_l2_from_gid(ibvctx, attr, dmac, NULL);
		return err < 0 ? -err : err;
	}

	if (!memcmp(gid, link_local, sizeof(link_local))) {
		/* EUI-64 interface id back to the MAC (RFC 4291 app. A). */
		dmac[0] = gid[8] ^ 0x02;
		dmac[1] = gid[9];
		dmac[2] = gid[10];
		dmac[3] = gid[13];
		dmac[4] = gid[14];
		dmac[5] = gid[15];
		return 0;
	}
	if (gid[0] == 0xff) {
		/* IPv6 multicast MAC (RFC 2464 §7). */
		dmac[0] = 0x33;
		dmac[1] = 0x33;
		memcpy(&dmac[2], &gid[12], 4);
		return 0;
	}
	return EINVAL;
}

/*
 * AHs are provider objects: the address vector is built here and copied
 * into every UD send WQE (spec §8.2 AV construction); no system call
 * other than the port and neighbour queries.
 */
struct ibv_ah *pvrdma_create_ah(struct ibv_pd *ibvpd, struct ibv_ah_attr *attr)
{
	struct pvrdma_pd *pd = to_pvrdma_pd(ibvpd);
	struct ibv_port_attr port_attr;
	struct pvrdma_ah *ah;
	int err;

	/* RoCE addresses by GID only (spec §8.2). */
	if (!attr->is_global) {
		errno = EINVAL;
		return NULL;
	}

	err = ibv_query_port(ibvpd->context, attr->port_num, &port_attr);
	if (err) {
		errno = err;
		return NULL;
	}
	if (port_attr.link_layer != IBV_LINK_LAYER_ETHERNET) {
		errno = EINVAL;
		return NULL;
	}

	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}

	err = pvrdma_resolve_dmac(ibvpd->context, attr, &port_attr,
				  ah->av.dmac);
	if (err) {
		free(ah);
		errno = err;
		return NULL;
	}

	ah->av.port_pd = htole32((pd->pdn & 0xFFFFFF) |
				 ((uint32_t)attr->port_num << 24));
	/* The device has no use for the SL (spec §8.2). */
	ah->av.sl_tclass_flowlabel =
		htole32(((uint32_t)attr->grh.traffic_class << 20) |
			(attr->grh.flow_label & 0xFFFFF));
	memcpy(ah->av.dgid, attr->grh.dgid.raw, sizeof(ah->av.dgid));
	ah->av.src_path_bits = attr->src_path_bits | 0x80;
	ah->av.gid_index = attr->grh.sgid_index;
	ah->av.hop_limit = attr->grh.hop_limit;

	return &ah->ibvah;
}

int pvrdma_destroy_ah(struct ibv_ah *ibvah)
{
	free(to_pvrdma_ah(ibvah));
	return 0;
}

/*
 * Multicast groups: the kernel asks the device (spec §14), which refuses
 * where it has no multicast; datagrams to a group then reach the QP.
 */
int pvrdma_attach_mcast(struct ibv_qp *ibvqp, const union ibv_gid *gid,
			uint16_t lid)
{
	return ibv_cmd_attach_mcast(ibvqp, gid, lid);
}

int pvrdma_detach_mcast(struct ibv_qp *ibvqp, const union ibv_gid *gid,
			uint16_t lid)
{
	return ibv_cmd_detach_mcast(ibvqp, gid, lid);
}
