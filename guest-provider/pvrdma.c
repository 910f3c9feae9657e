// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Device discovery and user context of the PVRDMA provider.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ccan/minmax.h>

#include "pvrdma.h"
#include "verbs.h"

static void pvrdma_free_context(struct ibv_context *ibvctx);

/* spec §1, §9: driver id 10, or the VMware PVRDMA PCI function. */
static const struct verbs_match_ent pvrdma_table[] = {
	VERBS_DRIVER_ID(RDMA_DRIVER_VMW_PVRDMA),
	VERBS_PCI_MATCH(PVRDMA_PCI_VENDOR_ID, PVRDMA_PCI_DEVICE_ID, NULL),
	{}
};

static const struct verbs_context_ops pvrdma_ctx_ops = {
	.alloc_mw = pvrdma_alloc_mw,
	.alloc_parent_domain = pvrdma_alloc_parent_domain,
	.alloc_pd = pvrdma_alloc_pd,
	.alloc_td = pvrdma_alloc_td,
	.attach_mcast = pvrdma_attach_mcast,
	.bind_mw = pvrdma_bind_mw,
	.close_xrcd = pvrdma_close_xrcd,
	.create_ah = pvrdma_create_ah,
	.create_cq = pvrdma_create_cq,
	.create_cq_ex = pvrdma_create_cq_ex,
	.create_qp = pvrdma_create_qp,
	.create_qp_ex = pvrdma_create_qp_ex,
	.create_srq = pvrdma_create_srq,
	.create_srq_ex = pvrdma_create_srq_ex,
	.dealloc_mw = pvrdma_dealloc_mw,
	.dealloc_pd = pvrdma_dealloc_pd,
	.dealloc_td = pvrdma_dealloc_td,
	.dereg_mr = pvrdma_dereg_mr,
	.destroy_ah = pvrdma_destroy_ah,
	.destroy_cq = pvrdma_destroy_cq,
	.destroy_qp = pvrdma_destroy_qp,
	.destroy_srq = pvrdma_destroy_srq,
	.detach_mcast = pvrdma_detach_mcast,
	.free_context = pvrdma_free_context,
	.get_srq_num = pvrdma_get_srq_num,
	.modify_qp = pvrdma_modify_qp,
	.modify_srq = pvrdma_modify_srq,
	.open_qp = pvrdma_open_qp,
	.open_xrcd = pvrdma_open_xrcd,
	.poll_cq = pvrdma_poll_cq,
	.post_recv = pvrdma_post_recv,
	.post_send = pvrdma_post_send,
	.post_srq_recv = pvrdma_post_srq_recv,
	.query_device_ex = pvrdma_query_device_ex,
	.query_port = pvrdma_query_port,
	.query_rt_values = pvrdma_query_rt_values,
	.query_qp = pvrdma_query_qp,
	.query_srq = pvrdma_query_srq,
	.reg_mr = pvrdma_reg_mr,
	.rereg_mr = pvrdma_rereg_mr,
	.req_notify_cq = pvrdma_req_notify_cq,
	.resize_cq = pvrdma_resize_cq,
};

/*
 * Map the UAR page the kernel picked for this context: exactly one page at
 * offset 0 of the command fd (our driver accepts no other offset; the
 * stock one ignores it), write-only (spec §7).
 */
/* A decimal environment setting, or @dflt when unset or malformed. */
static uint32_t pvrdma_env_u32(const char *name, uint32_t dflt)
{
	const char *v = getenv(name);
	unsigned long n;
	char *end;

	if (!v || !*v)
		return dflt;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end || n > UINT32_MAX)
		return dflt;
	return n;
}

/* Write-only, but readable where the device clock is there to read. */
static int pvrdma_map_uar(struct pvrdma_context *ctx, size_t pg_sz)
{
	void *uar;

	uar = mmap(NULL, pg_sz, PROT_WRITE | (ctx->has_clock ? PROT_READ : 0),
		   MAP_SHARED, ctx->ibvctx.context.cmd_fd, 0);
	if (uar == MAP_FAILED)
		return errno;

	ctx->uar = uar;
	ctx->uar_size = pg_sz;
	return 0;
}

/*
 * poll_cq finds a CQE's QP at qp_table[qp_handle & 0xFFFF] (spec §9). The
 * kernel reports caps.max_qp as qp_tab_size; handles stay below it, and
 * the 16-bit index never addresses more than 65536 slots, so the table
 * holds min(qp_tab_size, 65536) entries. (Masking the size itself with
 * 0xFFFF, as the stock provider does, would give an empty table for
 * max_qp = 65536.)
 */
static int pvrdma_alloc_qp_table(struct pvrdma_context *ctx,
				 uint32_t qp_tab_size)
{
	ctx->qp_table_size = min_t(uint32_t, qp_tab_size, PVRDMA_QP_TABLE_MAX);
	if (!ctx->qp_table_size)
		return 0;

	ctx->qp_table = calloc(ctx->qp_table_size, sizeof(*ctx->qp_table));
	if (!ctx->qp_table)
		return ENOMEM;

	return 0;
}

static struct verbs_context *pvrdma_alloc_context(struct ibv_device *ibvdev,
						  int cmd_fd,
						  void *private_data)
{
	struct pvrdma_device *dev = to_pvrdma_dev(ibvdev);
	struct pvrdma_ucmd_alloc_ucontext_resp resp = {};
	struct pvrdma_ucmd_alloc_ucontext cmd = {};
	struct pvrdma_context *ctx;
	int err;

	ctx = verbs_init_and_alloc_context(ibvdev, cmd_fd, ctx, ibvctx,
					   RDMA_DRIVER_VMW_PVRDMA);
	if (!ctx)
		return NULL;

	err = pvrdma_cmd_get_context(&ctx->ibvctx, &cmd.ibv_cmd, sizeof(cmd),
				     &resp.ibv_resp, sizeof(resp));
	if (err) {
		verbs_err(&ctx->ibvctx, "ibv_cmd_get_context failed: %d\n",
			  err);
		goto err_free_ctx;
	}

	ctx->has_clock = resp.reserved & PVRDMA_UCTX_CLOCK;
	err = pvrdma_map_uar(ctx, dev->pg_sz);
	if (err) {
		verbs_err(&ctx->ibvctx, "UAR mmap failed: %d\n", err);
		goto err_free_ctx;
	}

	err = pvrdma_alloc_qp_table(ctx, resp.qp_tab_size);
	if (err) {
		verbs_err(&ctx->ibvctx, "QP table allocation failed\n");
		goto err_unmap_uar;
	}

	err = pthread_spin_init(&ctx->qp_table_lock, PTHREAD_PROCESS_PRIVATE);
	if (err)
		goto err_free_qp_table;

	/* The device asks for CQ_POLL when a peer is in another process. */
	ctx->cq_poll_every = pvrdma_env_u32("PVRDMA_CQ_POLL_EVERY",
					    resp.reserved &
					    PVRDMA_UCTX_CQ_POLL_HINT ? 1 : 0);
	ctx->db_mov = pvrdma_env_u32("PVRDMA_DB_MOV", 0);
	ctx->has_mw = resp.reserved & PVRDMA_UCTX_MW;
	ctx->has_cqe_ts = resp.reserved & PVRDMA_UCTX_CQE_TIMESTAMP;
	ctx->rq_db_hint = resp.reserved & PVRDMA_UCTX_RQ_DB_HINT;
	ctx->sq_db_hint = resp.reserved & PVRDMA_UCTX_SQ_DB_HINT;
	ctx->has_atomic_write = resp.reserved & PVRDMA_UCTX_ATOMIC_WRITE;
	ctx->has_xrc = resp.reserved & PVRDMA_UCTX_XRC;
	verbs_set_ops(&ctx->ibvctx, &pvrdma_ctx_ops);

	return &ctx->ibvctx;

err_free_qp_table:
	free(ctx->qp_table);
err_unmap_uar:
	munmap(ctx->uar, ctx->uar_size);
err_free_ctx:
	verbs_uninit_context(&ctx->ibvctx);
	free(ctx);
	errno = err;
	return NULL;
}

static void pvrdma_free_context(struct ibv_context *ibvctx)
{
	struct pvrdma_context *ctx = to_pvrdma_ctx(ibvctx);

	pthread_spin_destroy(&ctx->qp_table_lock);
	free(ctx->qp_table);
	munmap(ctx->uar, ctx->uar_size);
	verbs_uninit_context(&ctx->ibvctx);
	free(ctx);
}

static struct verbs_device *pvrdma_alloc_device(struct verbs_sysfs_dev *sysfs_dev)
{
	struct pvrdma_device *dev;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;

	dev->pg_sz = sysconf(_SC_PAGESIZE);

	return &dev->ibvdev;
}

static void pvrdma_uninit_device(struct verbs_device *verbs_device)
{
	struct pvrdma_device *dev = to_pvrdma_dev(&verbs_device->device);

	free(dev);
}

static const struct verbs_device_ops pvrdma_dev_ops = {
	.name = "pvrdma",
	.match_min_abi_version = PVRDMA_UVERBS_ABI_VERSION,
	.match_max_abi_version = PVRDMA_UVERBS_ABI_VERSION,
	.match_table = pvrdma_table,
	.alloc_device = pvrdma_alloc_device,
	.uninit_device = pvrdma_uninit_device,
	.alloc_context = pvrdma_alloc_context,
};
PROVIDER_DRIVER(pvrdma, pvrdma_dev_ops);
