/*
 * PVRDMA device core: byte order of the structures the guest and the
 * device exchange through the command slot, the response slot, the DSR
 * and the CQ rings
 * (include/pvrdma_dev_abi.h, every multi-byte field little-endian).
 *
 * A request is converted to host order once, right after it is copied in,
 * and a response or the caps once, right before they are written out; the
 * command handlers work on host-order values only.  One function per
 * structure, field by field in the order of the header (u8 fields and
 * byte arrays have no byte order).  On a little-endian host every
 * conversion is the identity and compiles to nothing; the unit tests
 * build this file with PVRDMA_LE_FORCE_SWAP to check every function.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <stdint.h>

#include "pvrdma_abi_le.h"

#ifdef PVRDMA_LE_FORCE_SWAP
#define PVRDMA_LE16(x)  GUINT16_SWAP_LE_BE(x)
#define PVRDMA_LE32(x)  GUINT32_SWAP_LE_BE(x)
#define PVRDMA_LE64(x)  GUINT64_SWAP_LE_BE(x)
#else
#define PVRDMA_LE16(x)  GUINT16_FROM_LE(x)
#define PVRDMA_LE32(x)  GUINT32_FROM_LE(x)
#define PVRDMA_LE64(x)  GUINT64_FROM_LE(x)
#endif

static void pvrdma_le_device_caps(struct pvrdma_device_caps *p)
{
    p->fw_ver = PVRDMA_LE64(p->fw_ver);
    p->node_guid = PVRDMA_LE64(p->node_guid);
    p->sys_image_guid = PVRDMA_LE64(p->sys_image_guid);
    p->max_mr_size = PVRDMA_LE64(p->max_mr_size);
    p->page_size_cap = PVRDMA_LE64(p->page_size_cap);
    p->atomic_arg_sizes = PVRDMA_LE64(p->atomic_arg_sizes);
    p->ex_comp_mask = PVRDMA_LE32(p->ex_comp_mask);
    p->device_cap_flags2 = PVRDMA_LE32(p->device_cap_flags2);
    p->max_fa_bit_boundary = PVRDMA_LE32(p->max_fa_bit_boundary);
    p->log_max_atomic_inline_arg =
        PVRDMA_LE32(p->log_max_atomic_inline_arg);
    p->vendor_id = PVRDMA_LE32(p->vendor_id);
    p->vendor_part_id = PVRDMA_LE32(p->vendor_part_id);
    p->hw_ver = PVRDMA_LE32(p->hw_ver);
    p->max_qp = PVRDMA_LE32(p->max_qp);
    p->max_qp_wr = PVRDMA_LE32(p->max_qp_wr);
    p->device_cap_flags = PVRDMA_LE32(p->device_cap_flags);
    p->max_sge = PVRDMA_LE32(p->max_sge);
    p->max_sge_rd = PVRDMA_LE32(p->max_sge_rd);
    p->max_cq = PVRDMA_LE32(p->max_cq);
    p->max_cqe = PVRDMA_LE32(p->max_cqe);
    p->max_mr = PVRDMA_LE32(p->max_mr);
    p->max_pd = PVRDMA_LE32(p->max_pd);
    p->max_qp_rd_atom = PVRDMA_LE32(p->max_qp_rd_atom);
    p->max_ee_rd_atom = PVRDMA_LE32(p->max_ee_rd_atom);
    p->max_res_rd_atom = PVRDMA_LE32(p->max_res_rd_atom);
    p->max_qp_init_rd_atom = PVRDMA_LE32(p->max_qp_init_rd_atom);
    p->max_ee_init_rd_atom = PVRDMA_LE32(p->max_ee_init_rd_atom);
    p->max_ee = PVRDMA_LE32(p->max_ee);
    p->max_rdd = PVRDMA_LE32(p->max_rdd);
    p->max_mw = PVRDMA_LE32(p->max_mw);
    p->max_raw_ipv6_qp = PVRDMA_LE32(p->max_raw_ipv6_qp);
    p->max_raw_ethy_qp = PVRDMA_LE32(p->max_raw_ethy_qp);
    p->max_mcast_grp = PVRDMA_LE32(p->max_mcast_grp);
    p->max_mcast_qp_attach = PVRDMA_LE32(p->max_mcast_qp_attach);
    p->max_total_mcast_qp_attach =
        PVRDMA_LE32(p->max_total_mcast_qp_attach);
    p->max_ah = PVRDMA_LE32(p->max_ah);
    p->max_fmr = PVRDMA_LE32(p->max_fmr);
    p->max_map_per_fmr = PVRDMA_LE32(p->max_map_per_fmr);
    p->max_srq = PVRDMA_LE32(p->max_srq);
    p->max_srq_wr = PVRDMA_LE32(p->max_srq_wr);
    p->max_srq_sge = PVRDMA_LE32(p->max_srq_sge);
    p->max_uar = PVRDMA_LE32(p->max_uar);
    p->gid_tbl_len = PVRDMA_LE32(p->gid_tbl_len);
    p->max_pkeys = PVRDMA_LE16(p->max_pkeys);
    p->max_fast_reg_page_list_len =
        PVRDMA_LE32(p->max_fast_reg_page_list_len);
}

static void pvrdma_le_global_route(struct pvrdma_global_route *p)
{
    p->flow_label = PVRDMA_LE32(p->flow_label);
}

static void pvrdma_le_ah_attr(struct pvrdma_ah_attr *p)
{
    pvrdma_le_global_route(&p->grh);
    p->dlid = PVRDMA_LE16(p->dlid);
    p->vlan_id = PVRDMA_LE16(p->vlan_id);
}

static void pvrdma_le_qp_cap(struct pvrdma_qp_cap *p)
{
    p->max_send_wr = PVRDMA_LE32(p->max_send_wr);
    p->max_recv_wr = PVRDMA_LE32(p->max_recv_wr);
    p->max_send_sge = PVRDMA_LE32(p->max_send_sge);
    p->max_recv_sge = PVRDMA_LE32(p->max_recv_sge);
    p->max_inline_data = PVRDMA_LE32(p->max_inline_data);
    p->reserved = PVRDMA_LE32(p->reserved);
}

static void pvrdma_le_qp_attr(struct pvrdma_qp_attr *p)
{
    p->qp_state = PVRDMA_LE32(p->qp_state);
    p->cur_qp_state = PVRDMA_LE32(p->cur_qp_state);
    p->path_mtu = PVRDMA_LE32(p->path_mtu);
    p->path_mig_state = PVRDMA_LE32(p->path_mig_state);
    p->qkey = PVRDMA_LE32(p->qkey);
    p->rq_psn = PVRDMA_LE32(p->rq_psn);
    p->sq_psn = PVRDMA_LE32(p->sq_psn);
    p->dest_qp_num = PVRDMA_LE32(p->dest_qp_num);
    p->qp_access_flags = PVRDMA_LE32(p->qp_access_flags);
    p->pkey_index = PVRDMA_LE16(p->pkey_index);
    p->alt_pkey_index = PVRDMA_LE16(p->alt_pkey_index);
    pvrdma_le_qp_cap(&p->cap);
    pvrdma_le_ah_attr(&p->ah_attr);
    pvrdma_le_ah_attr(&p->alt_ah_attr);
}

static void pvrdma_le_srq_attr(struct pvrdma_srq_attr *p)
{
    p->max_wr = PVRDMA_LE32(p->max_wr);
    p->max_sge = PVRDMA_LE32(p->max_sge);
    p->srq_limit = PVRDMA_LE32(p->srq_limit);
    p->reserved = PVRDMA_LE32(p->reserved);
}

static void pvrdma_le_port_attr(struct pvrdma_port_attr *p)
{
    p->state = PVRDMA_LE32(p->state);
    p->max_mtu = PVRDMA_LE32(p->max_mtu);
    p->active_mtu = PVRDMA_LE32(p->active_mtu);
    p->gid_tbl_len = PVRDMA_LE32(p->gid_tbl_len);
    p->port_cap_flags = PVRDMA_LE32(p->port_cap_flags);
    p->max_msg_sz = PVRDMA_LE32(p->max_msg_sz);
    p->bad_pkey_cntr = PVRDMA_LE32(p->bad_pkey_cntr);
    p->qkey_viol_cntr = PVRDMA_LE32(p->qkey_viol_cntr);
    p->pkey_tbl_len = PVRDMA_LE16(p->pkey_tbl_len);
    p->lid = PVRDMA_LE16(p->lid);
    p->sm_lid = PVRDMA_LE16(p->sm_lid);
}

static void pvrdma_le_cmd_hdr(struct pvrdma_cmd_hdr *p)
{
    p->response = PVRDMA_LE64(p->response);
    p->cmd = PVRDMA_LE32(p->cmd);
    p->reserved = PVRDMA_LE32(p->reserved);
}

static void pvrdma_le_cmd_resp_hdr(struct pvrdma_cmd_resp_hdr *p)
{
    p->response = PVRDMA_LE64(p->response);
    p->ack = PVRDMA_LE32(p->ack);
}

static void pvrdma_le_cmd_query_port(struct pvrdma_cmd_query_port *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
}

static void pvrdma_le_cmd_query_port_resp(struct pvrdma_cmd_query_port_resp *p)
{
    pvrdma_le_cmd_resp_hdr(&p->hdr);
    pvrdma_le_port_attr(&p->attrs);
}

static void pvrdma_le_cmd_query_pkey(struct pvrdma_cmd_query_pkey *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
}

static void pvrdma_le_cmd_query_pkey_resp(struct pvrdma_cmd_query_pkey_resp *p)
{
    pvrdma_le_cmd_resp_hdr(&p->hdr);
    p->pkey = PVRDMA_LE16(p->pkey);
}

static void pvrdma_le_cmd_create_uc(struct pvrdma_cmd_create_uc *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->pfn64 = PVRDMA_LE64(p->pfn64);
}

static void pvrdma_le_cmd_create_uc_resp(struct pvrdma_cmd_create_uc_resp *p)
{
    pvrdma_le_cmd_resp_hdr(&p->hdr);
    p->ctx_handle = PVRDMA_LE32(p->ctx_handle);
}

static void pvrdma_le_cmd_destroy_uc(struct pvrdma_cmd_destroy_uc *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->ctx_handle = PVRDMA_LE32(p->ctx_handle);
}

static void pvrdma_le_cmd_create_pd(struct pvrdma_cmd_create_pd *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->ctx_handle = PVRDMA_LE32(p->ctx_handle);
}

static void pvrdma_le_cmd_create_pd_resp(struct pvrdma_cmd_create_pd_resp *p)
{
    pvrdma_le_cmd_resp_hdr(&p->hdr);
    p->pd_handle = PVRDMA_LE32(p->pd_handle);
}

static void pvrdma_le_cmd_destroy_pd(struct pvrdma_cmd_destroy_pd *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->pd_handle = PVRDMA_LE32(p->pd_handle);
}

static void pvrdma_le_cmd_create_mr(struct pvrdma_cmd_create_mr *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->start = PVRDMA_LE64(p->start);
    p->length = PVRDMA_LE64(p->length);
    p->pdir_dma = PVRDMA_LE64(p->pdir_dma);
    p->pd_handle = PVRDMA_LE32(p->pd_handle);
    p->access_flags = PVRDMA_LE32(p->access_flags);
    p->flags = PVRDMA_LE32(p->flags);
    p->nchunks = PVRDMA_LE32(p->nchunks);
}

static void pvrdma_le_cmd_create_mr_resp(struct pvrdma_cmd_create_mr_resp *p)
{
    pvrdma_le_cmd_resp_hdr(&p->hdr);
    p->mr_handle = PVRDMA_LE32(p->mr_handle);
    p->lkey = PVRDMA_LE32(p->lkey);
    p->rkey = PVRDMA_LE32(p->rkey);
}

static void pvrdma_le_cmd_destroy_mr(struct pvrdma_cmd_destroy_mr *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->mr_handle = PVRDMA_LE32(p->mr_handle);
}

static void pvrdma_le_cmd_mcast(struct pvrdma_cmd_mcast *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->qp_handle = PVRDMA_LE32(p->qp_handle);
}

static void pvrdma_le_cmd_destroy_xrcd(struct pvrdma_cmd_destroy_xrcd *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->xrcd_handle = PVRDMA_LE32(p->xrcd_handle);
}

static void pvrdma_le_cmd_create_xrcd_resp(
    struct pvrdma_cmd_create_xrcd_resp *p)
{
    pvrdma_le_cmd_resp_hdr(&p->hdr);
    p->xrcd_handle = PVRDMA_LE32(p->xrcd_handle);
}

static void pvrdma_le_cmd_modify_mr(struct pvrdma_cmd_modify_mr *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->mr_handle = PVRDMA_LE32(p->mr_handle);
    p->flags = PVRDMA_LE32(p->flags);
    p->access_flags = PVRDMA_LE32(p->access_flags);
    p->pd_handle = PVRDMA_LE32(p->pd_handle);
}

static void pvrdma_le_cmd_query_counters(struct pvrdma_cmd_query_counters *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->first = PVRDMA_LE32(p->first);
}

static void
pvrdma_le_cmd_query_counters_resp(struct pvrdma_cmd_query_counters_resp *p)
{
    unsigned i;

    pvrdma_le_cmd_resp_hdr(&p->hdr);
    p->first = PVRDMA_LE32(p->first);
    p->total = PVRDMA_LE32(p->total);
    for (i = 0; i < PVRDMA_CTR_PER_QUERY; i++) {
        p->value[i] = PVRDMA_LE64(p->value[i]);
    }
}

static void pvrdma_le_cmd_create_cq(struct pvrdma_cmd_create_cq *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->pdir_dma = PVRDMA_LE64(p->pdir_dma);
    p->ctx_handle = PVRDMA_LE32(p->ctx_handle);
    p->cqe = PVRDMA_LE32(p->cqe);
    p->nchunks = PVRDMA_LE32(p->nchunks);
}

static void pvrdma_le_cmd_create_cq_resp(struct pvrdma_cmd_create_cq_resp *p)
{
    pvrdma_le_cmd_resp_hdr(&p->hdr);
    p->cq_handle = PVRDMA_LE32(p->cq_handle);
    p->cqe = PVRDMA_LE32(p->cqe);
}

/* The extended layout: a VMware request has zeros there (a full slot). */
static void pvrdma_le_cmd_resize_cq(struct pvrdma_cmd_resize_cq_ex *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->cq_handle = PVRDMA_LE32(p->cq_handle);
    p->cqe = PVRDMA_LE32(p->cqe);
    p->pdir_dma = PVRDMA_LE64(p->pdir_dma);
    p->nchunks = PVRDMA_LE32(p->nchunks);
}

static void pvrdma_le_cmd_resize_cq_resp(struct pvrdma_cmd_resize_cq_resp *p)
{
    pvrdma_le_cmd_resp_hdr(&p->hdr);
    p->cqe = PVRDMA_LE32(p->cqe);
}

static void pvrdma_le_cmd_destroy_cq(struct pvrdma_cmd_destroy_cq *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->cq_handle = PVRDMA_LE32(p->cq_handle);
}

static void pvrdma_le_cmd_create_qp(struct pvrdma_cmd_create_qp_ex *x)
{
    struct pvrdma_cmd_create_qp *p = &x->qp;

    x->xrcd_handle = PVRDMA_LE32(x->xrcd_handle);
    pvrdma_le_cmd_hdr(&p->hdr);
    p->pdir_dma = PVRDMA_LE64(p->pdir_dma);
    p->pd_handle = PVRDMA_LE32(p->pd_handle);
    p->send_cq_handle = PVRDMA_LE32(p->send_cq_handle);
    p->recv_cq_handle = PVRDMA_LE32(p->recv_cq_handle);
    p->srq_handle = PVRDMA_LE32(p->srq_handle);
    p->max_send_wr = PVRDMA_LE32(p->max_send_wr);
    p->max_recv_wr = PVRDMA_LE32(p->max_recv_wr);
    p->max_send_sge = PVRDMA_LE32(p->max_send_sge);
    p->max_recv_sge = PVRDMA_LE32(p->max_recv_sge);
    p->max_inline_data = PVRDMA_LE32(p->max_inline_data);
    p->lkey = PVRDMA_LE32(p->lkey);
    p->access_flags = PVRDMA_LE32(p->access_flags);
    p->total_chunks = PVRDMA_LE16(p->total_chunks);
    p->send_chunks = PVRDMA_LE16(p->send_chunks);
    p->max_atomic_arg = PVRDMA_LE16(p->max_atomic_arg);
}

static void pvrdma_le_cmd_create_qp_resp(struct pvrdma_cmd_create_qp_resp *p)
{
    pvrdma_le_cmd_resp_hdr(&p->hdr);
    p->qpn = PVRDMA_LE32(p->qpn);
    p->max_send_wr = PVRDMA_LE32(p->max_send_wr);
    p->max_recv_wr = PVRDMA_LE32(p->max_recv_wr);
    p->max_send_sge = PVRDMA_LE32(p->max_send_sge);
    p->max_recv_sge = PVRDMA_LE32(p->max_recv_sge);
    p->max_inline_data = PVRDMA_LE32(p->max_inline_data);
}

static void
pvrdma_le_cmd_create_qp_resp_v2(struct pvrdma_cmd_create_qp_resp_v2 *p)
{
    pvrdma_le_cmd_resp_hdr(&p->hdr);
    p->qpn = PVRDMA_LE32(p->qpn);
    p->qp_handle = PVRDMA_LE32(p->qp_handle);
    p->max_send_wr = PVRDMA_LE32(p->max_send_wr);
    p->max_recv_wr = PVRDMA_LE32(p->max_recv_wr);
    p->max_send_sge = PVRDMA_LE32(p->max_send_sge);
    p->max_recv_sge = PVRDMA_LE32(p->max_recv_sge);
    p->max_inline_data = PVRDMA_LE32(p->max_inline_data);
    p->reserved = PVRDMA_LE32(p->reserved);
}

static void pvrdma_le_cmd_modify_qp(struct pvrdma_cmd_modify_qp *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->qp_handle = PVRDMA_LE32(p->qp_handle);
    p->attr_mask = PVRDMA_LE32(p->attr_mask);
    pvrdma_le_qp_attr(&p->attrs);
}

static void pvrdma_le_cmd_query_qp(struct pvrdma_cmd_query_qp *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->qp_handle = PVRDMA_LE32(p->qp_handle);
    p->attr_mask = PVRDMA_LE32(p->attr_mask);
}

static void pvrdma_le_cmd_query_qp_resp(struct pvrdma_cmd_query_qp_resp *p)
{
    pvrdma_le_cmd_resp_hdr(&p->hdr);
    pvrdma_le_qp_attr(&p->attrs);
}

static void pvrdma_le_cmd_destroy_qp(struct pvrdma_cmd_destroy_qp *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->qp_handle = PVRDMA_LE32(p->qp_handle);
}

static void pvrdma_le_cmd_destroy_qp_resp(struct pvrdma_cmd_destroy_qp_resp *p)
{
    pvrdma_le_cmd_resp_hdr(&p->hdr);
    p->events_reported = PVRDMA_LE32(p->events_reported);
}

static void pvrdma_le_cmd_create_bind(struct pvrdma_cmd_create_bind *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->mtu = PVRDMA_LE32(p->mtu);
    p->vlan = PVRDMA_LE32(p->vlan);
    p->index = PVRDMA_LE32(p->index);
}

static void pvrdma_le_cmd_destroy_bind(struct pvrdma_cmd_destroy_bind *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->index = PVRDMA_LE32(p->index);
}

static void pvrdma_le_cmd_create_srq(struct pvrdma_cmd_create_srq_ex *x)
{
    struct pvrdma_cmd_create_srq *p = &x->srq;

    x->xrcd_handle = PVRDMA_LE32(x->xrcd_handle);
    x->cq_handle = PVRDMA_LE32(x->cq_handle);
    pvrdma_le_cmd_hdr(&p->hdr);
    p->pdir_dma = PVRDMA_LE64(p->pdir_dma);
    p->pd_handle = PVRDMA_LE32(p->pd_handle);
    p->nchunks = PVRDMA_LE32(p->nchunks);
    pvrdma_le_srq_attr(&p->attrs);
}

static void pvrdma_le_cmd_create_srq_resp(struct pvrdma_cmd_create_srq_resp *p)
{
    pvrdma_le_cmd_resp_hdr(&p->hdr);
    p->srqn = PVRDMA_LE32(p->srqn);
}

static void pvrdma_le_cmd_modify_srq(struct pvrdma_cmd_modify_srq_ex *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->srq_handle = PVRDMA_LE32(p->srq_handle);
    p->attr_mask = PVRDMA_LE32(p->attr_mask);
    pvrdma_le_srq_attr(&p->attrs);
    p->pdir_dma = PVRDMA_LE64(p->pdir_dma);
    p->nchunks = PVRDMA_LE32(p->nchunks);
}

static void pvrdma_le_cmd_query_srq(struct pvrdma_cmd_query_srq *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->srq_handle = PVRDMA_LE32(p->srq_handle);
}

static void pvrdma_le_cmd_query_srq_resp(struct pvrdma_cmd_query_srq_resp *p)
{
    pvrdma_le_cmd_resp_hdr(&p->hdr);
    pvrdma_le_srq_attr(&p->attrs);
}

static void pvrdma_le_cmd_destroy_srq(struct pvrdma_cmd_destroy_srq *p)
{
    pvrdma_le_cmd_hdr(&p->hdr);
    p->srq_handle = PVRDMA_LE32(p->srq_handle);
}

void pvrdma_cmd_req_le(union pvrdma_cmd_req *req, bool to_host)
{
    /* The layout is the command's: its code in host order first. */
    uint32_t cmd = to_host ? PVRDMA_LE32(req->hdr.cmd) : req->hdr.cmd;

    switch (cmd) {
    case PVRDMA_CMD_QUERY_PORT:
        pvrdma_le_cmd_query_port(&req->query_port);
        break;
    case PVRDMA_CMD_QUERY_PKEY:
        pvrdma_le_cmd_query_pkey(&req->query_pkey);
        break;
    case PVRDMA_CMD_CREATE_UC:
        pvrdma_le_cmd_create_uc(&req->create_uc);
        break;
    case PVRDMA_CMD_DESTROY_UC:
        pvrdma_le_cmd_destroy_uc(&req->destroy_uc);
        break;
    case PVRDMA_CMD_CREATE_PD:
        pvrdma_le_cmd_create_pd(&req->create_pd);
        break;
    case PVRDMA_CMD_DESTROY_PD:
        pvrdma_le_cmd_destroy_pd(&req->destroy_pd);
        break;
    case PVRDMA_CMD_CREATE_MR:
        pvrdma_le_cmd_create_mr(&req->create_mr);
        break;
    case PVRDMA_CMD_DESTROY_MR:
        pvrdma_le_cmd_destroy_mr(&req->destroy_mr);
        break;
    case PVRDMA_CMD_MODIFY_MR:
        pvrdma_le_cmd_modify_mr(&req->modify_mr);
        break;
    case PVRDMA_CMD_QUERY_COUNTERS:
        pvrdma_le_cmd_query_counters(&req->query_counters);
        break;
    case PVRDMA_CMD_ATTACH_MCAST:
    case PVRDMA_CMD_DETACH_MCAST:
        pvrdma_le_cmd_mcast(&req->mcast);
        break;
    case PVRDMA_CMD_DESTROY_XRCD:
        pvrdma_le_cmd_destroy_xrcd(&req->destroy_xrcd);
        break;
    case PVRDMA_CMD_CREATE_CQ:
        pvrdma_le_cmd_create_cq(&req->create_cq);
        break;
    case PVRDMA_CMD_RESIZE_CQ:
        pvrdma_le_cmd_resize_cq(&req->resize_cq_ex);
        break;
    case PVRDMA_CMD_DESTROY_CQ:
        pvrdma_le_cmd_destroy_cq(&req->destroy_cq);
        break;
    case PVRDMA_CMD_CREATE_QP:
        pvrdma_le_cmd_create_qp(&req->create_qp_ex);
        break;
    case PVRDMA_CMD_MODIFY_QP:
        pvrdma_le_cmd_modify_qp(&req->modify_qp);
        break;
    case PVRDMA_CMD_QUERY_QP:
        pvrdma_le_cmd_query_qp(&req->query_qp);
        break;
    case PVRDMA_CMD_DESTROY_QP:
        pvrdma_le_cmd_destroy_qp(&req->destroy_qp);
        break;
    case PVRDMA_CMD_CREATE_BIND:
        pvrdma_le_cmd_create_bind(&req->create_bind);
        break;
    case PVRDMA_CMD_DESTROY_BIND:
        pvrdma_le_cmd_destroy_bind(&req->destroy_bind);
        break;
    case PVRDMA_CMD_CREATE_SRQ:
        pvrdma_le_cmd_create_srq(&req->create_srq_ex);
        break;
    case PVRDMA_CMD_MODIFY_SRQ:
        pvrdma_le_cmd_modify_srq(&req->modify_srq_ex);
        break;
    case PVRDMA_CMD_QUERY_SRQ:
        pvrdma_le_cmd_query_srq(&req->query_srq);
        break;
    case PVRDMA_CMD_DESTROY_SRQ:
        pvrdma_le_cmd_destroy_srq(&req->destroy_srq);
        break;
    default:
        pvrdma_le_cmd_hdr(&req->hdr);
        break;
    }
}

void pvrdma_cmd_resp_le(union pvrdma_cmd_resp *resp, uint32_t cmd,
                        uint32_t resp_len)
{
    switch (cmd) {
    case PVRDMA_CMD_QUERY_PORT:
        pvrdma_le_cmd_query_port_resp(&resp->query_port_resp);
        return;
    case PVRDMA_CMD_QUERY_PKEY:
        pvrdma_le_cmd_query_pkey_resp(&resp->query_pkey_resp);
        return;
    case PVRDMA_CMD_CREATE_UC:
        pvrdma_le_cmd_create_uc_resp(&resp->create_uc_resp);
        return;
    case PVRDMA_CMD_CREATE_PD:
        pvrdma_le_cmd_create_pd_resp(&resp->create_pd_resp);
        return;
    case PVRDMA_CMD_CREATE_MR:
        pvrdma_le_cmd_create_mr_resp(&resp->create_mr_resp);
        return;
    case PVRDMA_CMD_CREATE_CQ:
        pvrdma_le_cmd_create_cq_resp(&resp->create_cq_resp);
        return;
    case PVRDMA_CMD_RESIZE_CQ:
        pvrdma_le_cmd_resize_cq_resp(&resp->resize_cq_resp);
        return;
    case PVRDMA_CMD_QUERY_QP:
        pvrdma_le_cmd_query_qp_resp(&resp->query_qp_resp);
        return;
    case PVRDMA_CMD_DESTROY_QP:
        pvrdma_le_cmd_destroy_qp_resp(&resp->destroy_qp_resp);
        return;
    case PVRDMA_CMD_CREATE_SRQ:
        pvrdma_le_cmd_create_srq_resp(&resp->create_srq_resp);
        return;
    case PVRDMA_CMD_QUERY_SRQ:
        pvrdma_le_cmd_query_srq_resp(&resp->query_srq_resp);
        return;
    case PVRDMA_CMD_QUERY_COUNTERS:
        pvrdma_le_cmd_query_counters_resp(&resp->query_counters_resp);
        return;
    case PVRDMA_CMD_CREATE_XRCD:
        pvrdma_le_cmd_create_xrcd_resp(&resp->create_xrcd_resp);
        return;
    case PVRDMA_CMD_CREATE_QP:
        if (resp_len == sizeof(struct pvrdma_cmd_create_qp_resp_v2)) {
            pvrdma_le_cmd_create_qp_resp_v2(&resp->create_qp_resp_v2);
        } else {
            pvrdma_le_cmd_create_qp_resp(&resp->create_qp_resp);
        }
        return;
    default:
        pvrdma_le_cmd_resp_hdr(&resp->hdr);
        return;
    }
}

void pvrdma_cqe_le(struct pvrdma_cqe *c)
{
    /* imm_data travels as raw bytes (big-endian IB immediate data). */
    c->wr_id = PVRDMA_LE64(c->wr_id);
    c->qp = PVRDMA_LE64(c->qp);
    c->opcode = PVRDMA_LE32(c->opcode);
    c->status = PVRDMA_LE32(c->status);
    c->byte_len = PVRDMA_LE32(c->byte_len);
    c->src_qp = PVRDMA_LE32(c->src_qp);
    c->wc_flags = PVRDMA_LE32(c->wc_flags);
    c->vendor_err = PVRDMA_LE32(c->vendor_err);
    c->pkey_index = PVRDMA_LE16(c->pkey_index);
    c->slid = PVRDMA_LE16(c->slid);
}

void pvrdma_device_caps_le(struct pvrdma_device_caps *caps)
{
    pvrdma_le_device_caps(caps);
}
