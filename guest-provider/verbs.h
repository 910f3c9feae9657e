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
int pvrdma_query_rt_values(struct ibv_context *ibvctx,
			   struct ibv_values_ex *values);

struct ibv_pd *pvrdma_alloc_pd(struct ibv_context *ibvctx);
int pvrdma_dealloc_pd(struct ibv_pd *ibvpd);
struct ibv_td *pvrdma_alloc_td(struct ibv_context *ibvctx,
			       struct ibv_td_init_attr *attr);
int pvrdma_dealloc_td(struct ibv_td *ibvtd);
struct ibv_pd *pvrdma_alloc_parent_domain(struct ibv_context *ibvctx,
					  struct ibv_parent_domain_init_attr *attr);
struct ibv_xrcd *pvrdma_open_xrcd(struct ibv_context *ibvctx,
				  struct ibv_xrcd_init_attr *attr);
int pvrdma_close_xrcd(struct ibv_xrcd *ibvxrcd);

struct ibv_mr *pvrdma_reg_mr(struct ibv_pd *ibvpd, void *addr, size_t length,
			     uint64_t hca_va, int access);
int pvrdma_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
		    void *addr, size_t length, int access);
int pvrdma_dereg_mr(struct verbs_mr *vmr);
struct ibv_mw *pvrdma_alloc_mw(struct ibv_pd *ibvpd, enum ibv_mw_type type);
int pvrdma_dealloc_mw(struct ibv_mw *mw);
int pvrdma_bind_mw(struct ibv_qp *ibvqp, struct ibv_mw *mw,
		   struct ibv_mw_bind *mw_bind);

struct ibv_cq *pvrdma_create_cq(struct ibv_context *ibvctx, int ncqe,
				struct ibv_comp_channel *channel,
				int comp_vector);
struct ibv_cq_ex *pvrdma_create_cq_ex(struct ibv_context *ibvctx,
				      struct ibv_cq_init_attr_ex *attr);
int pvrdma_destroy_cq(struct ibv_cq *ibvcq);
int pvrdma_resize_cq(struct ibv_cq *ibvcq, int ncqe);
int pvrdma_poll_cq(struct ibv_cq *ibvcq, int num_entries, struct ibv_wc *wc);
int pvrdma_req_notify_cq(struct ibv_cq *ibvcq, int solicited_only);

struct ibv_qp *pvrdma_create_qp(struct ibv_pd *ibvpd,
				struct ibv_qp_init_attr *attr);
struct ibv_qp *pvrdma_create_qp_ex(struct ibv_context *ibvctx,
				   struct ibv_qp_init_attr_ex *attr);
struct ibv_qp *pvrdma_open_qp(struct ibv_context *ibvctx,
			      struct ibv_qp_open_attr *attr);
int pvrdma_destroy_qp(struct ibv_qp *ibvqp);
int pvrdma_modify_qp(struct ibv_qp *ibvqp, struct ibv_qp_attr *attr,
		     int attr_mask);
int pvrdma_query_qp(struct ibv_qp *ibvqp, struct ibv_qp_attr *attr,
		    int attr_mask, struct ibv_qp_init_attr *init_attr);
int pvrdma_post_send(struct ibv_qp *ibvqp, struct ibv_send_wr *wr,
		     struct ibv_send_wr **bad_wr);
int pvrdma_post_recv(struct ibv_qp *ibvqp, struct ibv_recv_wr *wr,
		     struct ibv_recv_wr **bad_wr);

struct ibv_srq *pvrdma_create_srq(struct ibv_pd *ibvpd,
				  struct ibv_srq_init_attr *attr);
struct ibv_srq *pvrdma_create_srq_ex(struct ibv_context *ibvctx,
				     struct ibv_srq_init_attr_ex *attr);
int pvrdma_get_srq_num(struct ibv_srq *ibvsrq, uint32_t *srq_num);
int pvrdma_destroy_srq(struct ibv_srq *ibvsrq);
int pvrdma_modify_srq(struct ibv_srq *ibvsrq, struct ibv_srq_attr *attr,
		      int attr_mask);
int pvrdma_query_srq(struct ibv_srq *ibvsrq, struct ibv_srq_attr *attr);
int pvrdma_post_srq_recv(struct ibv_srq *ibvsrq, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr);

struct ibv_ah *pvrdma_create_ah(struct ibv_pd *ibvpd, struct ibv_ah_attr *attr);
int pvrdma_attach_mcast(struct ibv_qp *ibvqp, const union ibv_gid *gid,
			uint16_t lid);
int pvrdma_detach_mcast(struct ibv_qp *ibvqp, const union ibv_gid *gid,
			uint16_t lid);
int pvrdma_destroy_ah(struct ibv_ah *ibvah);

#endif /* __PVRDMA_VERBS_H__ */
