// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/*
 * Control-path verbs of the PVRDMA provider: each is one uverbs command,
 * the kernel driver does the device work.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

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

	return &pd->ibvpd;
}

int pvrdma_dealloc_pd(struct ibv_pd *ibvpd)
{
	struct pvrdma_pd *pd = to_pvrdma_pd(ibvpd);
	int err;

	err = ibv_cmd_dealloc_pd(ibvpd);
	if (err) {
		verbs_err(verbs_get_ctx(ibvpd->context),
			  "DEALLOC_PD %u failed: %d\n", pd->pdn, err);
		return err;
	}

	free(pd);
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
 * Ring buffers (CQ, and next the QP and SRQ rings) are anonymous mappings:
 * page aligned and zeroed as the device expects for fresh ring state
 * (spec §8.1), and kept out of fork() children so that a child's
 * copy-on-write cannot move pages the device writes into.
 */
void *pvrdma_alloc_ring_buf(size_t size)
{
	void *buf;
	int err;

	buf = mmap(NULL, size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return NULL;

	err = ibv_dontfork_range(buf, size);
	if (err) {
		munmap(buf, size);
		errno = err;
		return NULL;
	}

	return buf;
}

void pvrdma_free_ring_buf(void *buf, size_t size)
{
	ibv_dofork_range(buf, size);
	munmap(buf, size);
}
