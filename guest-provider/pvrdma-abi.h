/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * uverbs command wrappers for the PVRDMA user<->kernel udata ABI
 * (docs/abi.md §9). The udata structs themselves come from the
 * kernel's <rdma/vmw_pvrdma-abi.h>; this file only binds them to the uverbs
 * commands that carry them. Names use "ucmd" so that they cannot clash with
 * the uapi structs (pvrdma_create_cq, ...) or with the device command
 * structs of pvrdma_dev_abi.h (pvrdma_cmd_*).
 */
#ifndef __PVRDMA_ABI_H__
#define __PVRDMA_ABI_H__

#include <infiniband/kern-abi.h>
#include <rdma/vmw_pvrdma-abi.h>
#include <kernel-abi/vmw_pvrdma-abi.h>

DECLARE_DRV_CMD(pvrdma_ucmd_alloc_ucontext, IB_USER_VERBS_CMD_GET_CONTEXT,
		empty, pvrdma_alloc_ucontext_resp);
DECLARE_DRV_CMD(pvrdma_ucmd_alloc_pd, IB_USER_VERBS_CMD_ALLOC_PD,
		empty, pvrdma_alloc_pd_resp);
DECLARE_DRV_CMD(pvrdma_ucmd_create_cq, IB_USER_VERBS_CMD_CREATE_CQ,
		pvrdma_create_cq, pvrdma_create_cq_resp);
DECLARE_DRV_CMD(pvrdma_ucmd_create_cq_ex, IB_USER_VERBS_EX_CMD_CREATE_CQ,
		pvrdma_create_cq, pvrdma_create_cq_resp);
DECLARE_DRV_CMD(pvrdma_ucmd_resize_cq, IB_USER_VERBS_CMD_RESIZE_CQ,
		pvrdma_resize_cq, empty);
DECLARE_DRV_CMD(pvrdma_ucmd_create_qp, IB_USER_VERBS_CMD_CREATE_QP,
		pvrdma_create_qp, pvrdma_create_qp_resp);
DECLARE_DRV_CMD(pvrdma_ucmd_create_srq, IB_USER_VERBS_CMD_CREATE_SRQ,
		pvrdma_create_srq, pvrdma_create_srq_resp);
/* An XRC SRQ (project extension PVRDMA_EX_CAP_XRC): the same ring. */
DECLARE_DRV_CMD(pvrdma_ucmd_create_xsrq, IB_USER_VERBS_CMD_CREATE_XSRQ,
		pvrdma_create_srq, pvrdma_create_srq_resp);
/* A resize (IBV_SRQ_MAX_WR, project extension PVRDMA_EX_CAP_RESIZE_SRQ)
 * names the new ring as a CQ resize does. */
DECLARE_DRV_CMD(pvrdma_ucmd_modify_srq, IB_USER_VERBS_CMD_MODIFY_SRQ,
		pvrdma_resize_cq, empty);

#endif /* __PVRDMA_ABI_H__ */
