/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
#ifndef __PVRDMA_VERBS_H__
#define __PVRDMA_VERBS_H__

#include <infiniband/driver.h>
#include <infiniband/verbs.h>

int pvrdma_query_device_ex(struct ibv_context *ibvctx,
			   const struct ibv_query_device_ex_input *input,
			   struct ibv_device_attr_ex *attr, size_t attr_size);
int pvrdma_query_port(struct ibv_context *ibvctx, uint8_t port,
		      struct ibv_port_attr *port_attr);

struct ibv_pd *pvrdma_alloc_pd(struct ibv_context *ibvctx);
int pvrdma_dealloc_pd(struct ibv_pd *ibvpd);

struct ibv_mr *pvrdma_reg_mr(struct ibv_pd *ibvpd, void *addr, size_t length,
			     uint64_t hca_va, int access);
int pvrdma_dereg_mr(struct verbs_mr *vmr);

struct ibv_cq *pvrdma_create_cq(struct ibv_context *ibvctx, int ncqe,
				struct ibv_comp_channel *channel,
				int comp_vector);
int pvrdma_destroy_cq(struct ibv_cq *ibvcq);
int pvrdma_poll_cq(struct ibv_cq *ibvcq, int num_entries, struct ibv_wc *wc);
int pvrdma_req_notify_cq(struct ibv_cq *ibvcq, int solicited_only);

#endif /* __PVRDMA_VERBS_H__ */
