/*
 * QEMU glue: the trace event of each kind of guest error (pvrdma_gerr.h),
 * with the error's values as its fields.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "trace.h"

#include "pvrdma_gerr.h"
#include "pvrdma_gerr_trace.h"

void pvrdma_trace_guest_error(PvrdmaGerr kind, const PvrdmaGerrArg *a)
{
    switch (kind) {
    case PVRDMA_GERR_QUERY_PORT_BAD_PORT_RESERVED_BYTES:
        trace_pvrdma_err_query_port_bad_port_reserved_bytes(a[0].u);
        break;
    case PVRDMA_GERR_QUERY_PKEY_BAD_PORT_INDEX_RESERVED:
        trace_pvrdma_err_query_pkey_bad_port_index_reserved(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_CREATE_UC_RESERVED_BYTES:
        trace_pvrdma_err_create_uc_reserved_bytes();
        break;
    case PVRDMA_GERR_CREATE_UC_PFN_NOT_USER_UAR:
        trace_pvrdma_err_create_uc_pfn_not_user_uar(a[0].u);
        break;
    case PVRDMA_GERR_CREATE_UC_UAR_PAGE_ALREADY_OWNED:
        trace_pvrdma_err_create_uc_uar_page_already_owned(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_DESTROY_UC_BAD_CONTEXT:
        trace_pvrdma_err_destroy_uc_bad_context(a[0].u);
        break;
    case PVRDMA_GERR_DESTROY_UC_CONTEXT_STILL_OBJECTS:
        trace_pvrdma_err_destroy_uc_context_still_objects(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_CREATE_PD_BAD_CONTEXT:
        trace_pvrdma_err_create_pd_bad_context(a[0].u);
        break;
    case PVRDMA_GERR_DESTROY_PD_BAD_PD:
        trace_pvrdma_err_destroy_pd_bad_pd(a[0].u);
        break;
    case PVRDMA_GERR_DESTROY_PD_PD_STILL_OBJECTS:
        trace_pvrdma_err_destroy_pd_pd_still_objects(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_CREATE_MR_LENGTH_OUT_OF_RANGE:
        trace_pvrdma_err_create_mr_length_out_of_range(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_CREATE_MR_START_LENGTH_OVERFLOWS:
        trace_pvrdma_err_create_mr_start_length_overflows();
        break;
    case PVRDMA_GERR_CREATE_MR_NCHUNKS_RANGE_SPANS_PAGES:
        trace_pvrdma_err_create_mr_nchunks_range_spans_pages(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_CREATE_MR_BAD_PD:
        trace_pvrdma_err_create_mr_bad_pd(a[0].u);
        break;
    case PVRDMA_GERR_CREATE_MR_DMA_MR_START_LENGTH:
        trace_pvrdma_err_create_mr_dma_mr_start_length();
        break;
    case PVRDMA_GERR_CREATE_MR_FAST_REG_MR_MAX:
        trace_pvrdma_err_create_mr_fast_reg_mr_max(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_CREATE_MR_UNKNOWN_FLAGS:
        trace_pvrdma_err_create_mr_unknown_flags(a[0].u);
        break;
    case PVRDMA_GERR_CREATE_MR_ACCESS_FLAGS_NOT_ALLOWED:
        trace_pvrdma_err_create_mr_access_flags_not_allowed(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_CREATE_MR_MEMORY_WINDOW_START_LENGTH:
        trace_pvrdma_err_create_mr_memory_window_start_length();
        break;
    case PVRDMA_GERR_DESTROY_MR_BAD_MR:
        trace_pvrdma_err_destroy_mr_bad_mr(a[0].u);
        break;
    case PVRDMA_GERR_DESTROY_MR_MR_MEMORY_WINDOWS_BOUND:
        trace_pvrdma_err_destroy_mr_mr_memory_windows_bound(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_MODIFY_MR_BAD_MR_FLAGS:
        trace_pvrdma_err_modify_mr_bad_mr_flags(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_MODIFY_MR_ACCESS_FLAGS_NOT_ALLOWED:
        trace_pvrdma_err_modify_mr_access_flags_not_allowed(a[0].u);
        break;
    case PVRDMA_GERR_MODIFY_MR_BAD_PD:
        trace_pvrdma_err_modify_mr_bad_pd(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_MODIFY_MR_MEMORY_WINDOWS_BOUND:
        trace_pvrdma_err_modify_mr_memory_windows_bound(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_QUERY_COUNTERS_BAD_FIRST_RESERVED:
        trace_pvrdma_err_query_counters_bad_first_reserved(a[0].u);
        break;
    case PVRDMA_GERR_ATTACH_MCAST_BAD_QP:
        trace_pvrdma_err_attach_mcast_bad_qp(a[0].u);
        break;
    case PVRDMA_GERR_ATTACH_MCAST_NOT_MULTICAST:
        trace_pvrdma_err_attach_mcast_not_multicast(a[0].u);
        break;
    case PVRDMA_GERR_ATTACH_MCAST_GROUP_FULL:
        trace_pvrdma_err_attach_mcast_group_full(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_ATTACH_MCAST_GROUPS_FULL:
        trace_pvrdma_err_attach_mcast_groups_full(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_DETACH_MCAST_BAD_QP:
        trace_pvrdma_err_detach_mcast_bad_qp(a[0].u);
        break;
    case PVRDMA_GERR_DETACH_MCAST_NOT_ATTACHED:
        trace_pvrdma_err_detach_mcast_not_attached(a[0].u);
        break;
    case PVRDMA_GERR_CREATE_XRCD_RESERVED_BYTES:
        trace_pvrdma_err_create_xrcd_reserved_bytes();
        break;
    case PVRDMA_GERR_DESTROY_XRCD_BAD_XRCD:
        trace_pvrdma_err_destroy_xrcd_bad_xrcd(a[0].u);
        break;
    case PVRDMA_GERR_DESTROY_XRCD_STILL_USED:
        trace_pvrdma_err_destroy_xrcd_still_used(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_CREATE_CQ_BAD_CONTEXT:
        trace_pvrdma_err_create_cq_bad_context(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_CREATE_CQ_CQE_NOT_POWER_TWO:
        trace_pvrdma_err_create_cq_cqe_not_power_two(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_CREATE_CQ_NCHUNKS_CQES_NEED_1:
        trace_pvrdma_err_create_cq_nchunks_cqes_need_1(a[0].u, a[1].u, a[2].u);
        break;
    case PVRDMA_GERR_RESIZE_CQ_BAD_CQ:
        trace_pvrdma_err_resize_cq_bad_cq(a[0].u);
        break;
    case PVRDMA_GERR_RESIZE_CQ_CQE_NOT_POWER_TWO:
        trace_pvrdma_err_resize_cq_cqe_not_power_two(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_RESIZE_CQ_NCHUNKS_CQES_NEED_1:
        trace_pvrdma_err_resize_cq_nchunks_cqes_need_1(a[0].u, a[1].u,
                                                        a[2].u);
        break;
    case PVRDMA_GERR_RESIZE_CQ_BAD_CONS_HEAD:
        trace_pvrdma_err_resize_cq_bad_cons_head(a[0].u, a[1].u, a[2].u);
        break;
    case PVRDMA_GERR_RESIZE_CQ_PENDING_DO_NOT_FIT:
        trace_pvrdma_err_resize_cq_pending_do_not_fit(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_DESTROY_CQ_BAD_CQ:
        trace_pvrdma_err_destroy_cq_bad_cq(a[0].u);
        break;
    case PVRDMA_GERR_DESTROY_CQ_CQ_STILL_USED_QPS:
        trace_pvrdma_err_destroy_cq_cq_still_used_qps(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_CREATE_QP_BAD_SQ_SIG_SRQ:
        trace_pvrdma_err_create_qp_bad_sq_sig_srq();
        break;
    case PVRDMA_GERR_CREATE_QP_XRC_INI_RECEIVE_SIDE:
        trace_pvrdma_err_create_qp_xrc_ini_receive_side(a[0].u, a[1].u, a[2].u);
        break;
    case PVRDMA_GERR_CREATE_QP_XRC_TGT_FIELDS:
        trace_pvrdma_err_create_qp_xrc_tgt_fields(a[0].u);
        break;
    case PVRDMA_GERR_CREATE_QP_QP_TYPE_NOT_SUPPORTED:
        trace_pvrdma_err_create_qp_qp_type_not_supported(a[0].u);
        break;
    case PVRDMA_GERR_CREATE_QP_MAX_INLINE_DATA_ACCESS:
        trace_pvrdma_err_create_qp_max_inline_data_access(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_CREATE_QP_BAD_PD_SEND_CQ:
        trace_pvrdma_err_create_qp_bad_pd_send_cq(a[0].u, a[1].u, a[2].u);
        break;
    case PVRDMA_GERR_CREATE_QP_PD_CQS_BELONG_DIFFERENT:
        trace_pvrdma_err_create_qp_pd_cqs_belong_different();
        break;
    case PVRDMA_GERR_CREATE_QP_MAX_SEND_WR_MAX:
        trace_pvrdma_err_create_qp_max_send_wr_max(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_CREATE_QP_BAD_SRQ_RECEIVE_QUEUE:
        trace_pvrdma_err_create_qp_bad_srq_receive_queue(a[0].u);
        break;
    case PVRDMA_GERR_CREATE_QP_SRQ_HANDLE_MAX_RECV:
        trace_pvrdma_err_create_qp_srq_handle_max_recv(a[0].u, a[1].u, a[2].u);
        break;
    case PVRDMA_GERR_CREATE_QP_SEND_CHUNKS_TOTAL_CHUNKS:
        trace_pvrdma_err_create_qp_send_chunks_total_chunks(a[0].u, a[1].u,
                                                            a[2].u, a[3].u);
        break;
    case PVRDMA_GERR_CREATE_QP_RECEIVE_PAGES_SRQ:
        trace_pvrdma_err_create_qp_receive_pages_srq(a[0].u);
        break;
    case PVRDMA_GERR_CREATE_QP_RECEIVE_PAGES_X_BYTE:
        trace_pvrdma_err_create_qp_receive_pages_x_byte(a[0].u, a[1].u, a[2].u);
        break;
    case PVRDMA_GERR_CREATE_QP_GSI_QP_ALREADY_EXISTS:
        trace_pvrdma_err_create_qp_gsi_qp_already_exists();
        break;
    case PVRDMA_GERR_MODIFY_QP_BAD_QP:
        trace_pvrdma_err_modify_qp_bad_qp(a[0].u);
        break;
    case PVRDMA_GERR_MODIFY_QP_UNKNOWN_ATTR_MASK_BITS:
        trace_pvrdma_err_modify_qp_unknown_attr_mask_bits(a[0].u);
        break;
    case PVRDMA_GERR_MODIFY_QP_BAD_TARGET_STATE:
        trace_pvrdma_err_modify_qp_bad_target_state(a[0].u);
        break;
    case PVRDMA_GERR_MODIFY_QP_CUR_STATE_MISMATCH:
        trace_pvrdma_err_modify_qp_cur_state_mismatch(a[0].u, a[1].u, a[2].u);
        break;
    case PVRDMA_GERR_MODIFY_QP_TRANSITION_NOT_ALLOWED:
        trace_pvrdma_err_modify_qp_transition_not_allowed(a[0].u, a[1].u,
                                                          a[2].u, a[3].u,
                                                          a[4].u);
        break;
    case PVRDMA_GERR_MODIFY_QP_QP_ATTRIBUTE_VALUE_OUT:
        trace_pvrdma_err_modify_qp_qp_attribute_value_out(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_QUERY_QP_BAD_QP_MASK:
        trace_pvrdma_err_query_qp_bad_qp_mask(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_DESTROY_QP_BAD_QP:
        trace_pvrdma_err_destroy_qp_bad_qp(a[0].u);
        break;
    case PVRDMA_GERR_CREATE_BIND_BAD_INDEX_GID_TYPE:
        trace_pvrdma_err_create_bind_bad_index_gid_type(a[0].u, a[1].u, a[2].u,
                                                        a[3].u);
        break;
    case PVRDMA_GERR_DESTROY_BIND_INDEX_NOT_BOUND_GID:
        trace_pvrdma_err_destroy_bind_index_not_bound_gid(a[0].u);
        break;
    case PVRDMA_GERR_CREATE_SRQ_BAD_PD_TYPE_RESERVED:
        trace_pvrdma_err_create_srq_bad_pd_type_reserved(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_CREATE_SRQ_BAD_XRCD_CQ:
        trace_pvrdma_err_create_srq_bad_xrcd_cq(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_CREATE_SRQ_MAX_WR_MAX_SGE:
        trace_pvrdma_err_create_srq_max_wr_max_sge(a[0].u, a[1].u, a[2].u);
        break;
    case PVRDMA_GERR_CREATE_SRQ_NCHUNKS_X_BYTE_WQES:
        trace_pvrdma_err_create_srq_nchunks_x_byte_wqes(a[0].u, a[1].u, a[2].u);
        break;
    case PVRDMA_GERR_MODIFY_SRQ_BAD_SRQ_MASK:
        trace_pvrdma_err_modify_srq_bad_srq_mask(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_MODIFY_SRQ_RESIZING_SRQ_NOT_SUPPORTED:
        trace_pvrdma_err_modify_srq_resizing_srq_not_supported();
        break;
    case PVRDMA_GERR_MODIFY_SRQ_RESIZE_MAX_WR:
        trace_pvrdma_err_modify_srq_resize_max_wr(a[0].u, a[1].u, a[2].u);
        break;
    case PVRDMA_GERR_MODIFY_SRQ_RESIZE_NCHUNKS:
        trace_pvrdma_err_modify_srq_resize_nchunks(a[0].u, a[1].u, a[2].u);
        break;
    case PVRDMA_GERR_MODIFY_SRQ_RESIZE_POSTED_DO_NOT_FIT:
        trace_pvrdma_err_modify_srq_resize_posted_do_not_fit(a[0].u, a[1].u,
                                                             a[2].u);
        break;
    case PVRDMA_GERR_MODIFY_SRQ_LIMIT_MAX_WR:
        trace_pvrdma_err_modify_srq_limit_max_wr(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_QUERY_SRQ_BAD_SRQ:
        trace_pvrdma_err_query_srq_bad_srq(a[0].u);
        break;
    case PVRDMA_GERR_DESTROY_SRQ_BAD_SRQ:
        trace_pvrdma_err_destroy_srq_bad_srq(a[0].u);
        break;
    case PVRDMA_GERR_DESTROY_SRQ_SRQ_STILL_USED_QPS:
        trace_pvrdma_err_destroy_srq_srq_still_used_qps(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_UNKNOWN_COMMAND:
        trace_pvrdma_err_unknown_command(a[0].u);
        break;
    case PVRDMA_GERR_COMMAND_RESERVED_HEADER_FIELD_NOT_ZERO:
        trace_pvrdma_err_command_reserved_header_field_not_zero(a[0].u);
        break;
    case PVRDMA_GERR_PINNED_PAGES_QUOTA_EXCEEDED:
        trace_pvrdma_err_pinned_pages_quota_exceeded(a[0].u, a[1].u, a[2].u);
        break;
    case PVRDMA_GERR_RING_INVALID_CONS_HEAD_N:
        trace_pvrdma_err_ring_invalid_cons_head_n(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_ASYNC_EVENT_RING_FULL_EVENT_INFO:
        trace_pvrdma_err_async_event_ring_full_event_info(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_CQ_NOTIFICATION_RING_FULL:
        trace_pvrdma_err_cq_notification_ring_full(a[0].u);
        break;
    case PVRDMA_GERR_DSR_RING_RESERVED_FIELD_NOT_ZERO:
        trace_pvrdma_err_dsr_ring_reserved_field_not_zero(a[0].s);
        break;
    case PVRDMA_GERR_DSR_RING_NUM_PAGES_OUT_RANGE:
        trace_pvrdma_err_dsr_ring_num_pages_out_range(a[0].s, a[1].u, a[2].u,
                                                      a[3].u);
        break;
    case PVRDMA_GERR_DSR_ADDRESS_ZERO_NOT_PAGE_ALIGNED:
        trace_pvrdma_err_dsr_address_zero_not_page_aligned(a[0].u);
        break;
    case PVRDMA_GERR_DSR_UNREADABLE:
        trace_pvrdma_err_dsr_unreadable(a[0].u);
        break;
    case PVRDMA_GERR_DSR_RESERVED_FIELD_NOT_ZERO:
        trace_pvrdma_err_dsr_reserved_field_not_zero();
        break;
    case PVRDMA_GERR_DSR_COMMAND_RESPONSE_SLOT_ADDRESS_ZERO:
        trace_pvrdma_err_dsr_command_response_slot_address_zero();
        break;
    case PVRDMA_GERR_DSR_UAR_PFN_NOT_BAR2:
        trace_pvrdma_err_dsr_uar_pfn_not_bar2(a[0].u);
        break;
    case PVRDMA_GERR_DSR_CANNOT_WRITE_CAPS:
        trace_pvrdma_err_dsr_cannot_write_caps();
        break;
    case PVRDMA_GERR_REQUEST_WRITTEN_NOT_0:
        trace_pvrdma_err_request_written_not_0(a[0].u);
        break;
    case PVRDMA_GERR_REQUEST_WITHOUT_LOADED_DSR:
        trace_pvrdma_err_request_without_loaded_dsr();
        break;
    case PVRDMA_GERR_COMMAND_SLOT_UNREADABLE:
        trace_pvrdma_err_command_slot_unreadable();
        break;
    case PVRDMA_GERR_RESPONSE_SLOT_UNWRITABLE:
        trace_pvrdma_err_response_slot_unwritable();
        break;
    case PVRDMA_GERR_ACTIVATE_WITHOUT_LOADED_DSR:
        trace_pvrdma_err_activate_without_loaded_dsr();
        break;
    case PVRDMA_GERR_CTL_UNKNOWN_CODE:
        trace_pvrdma_err_ctl_unknown_code(a[0].u);
        break;
    case PVRDMA_GERR_REGISTER_READ_BAD_OFFSET:
        trace_pvrdma_err_register_read_bad_offset(a[0].u);
        break;
    case PVRDMA_GERR_READ_UNDEFINED_REGISTER:
        trace_pvrdma_err_read_undefined_register(a[0].u);
        break;
    case PVRDMA_GERR_REGISTER_WRITE_BAD_OFFSET:
        trace_pvrdma_err_register_write_bad_offset(a[0].u);
        break;
    case PVRDMA_GERR_WRITE_READ_ONLY_REGISTER:
        trace_pvrdma_err_write_read_only_register(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_WRITE_UNDEFINED_REGISTER:
        trace_pvrdma_err_write_undefined_register(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_DOORBELL_WITHOUT_LOADED_DSR:
        trace_pvrdma_err_doorbell_without_loaded_dsr(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_DOORBELL_BAD_OFFSET:
        trace_pvrdma_err_doorbell_bad_offset(a[0].u);
        break;
    case PVRDMA_GERR_DOORBELL_UNOWNED_UAR_PAGE:
        trace_pvrdma_err_doorbell_unowned_uar_page(a[0].u);
        break;
    case PVRDMA_GERR_BAD_QP_DOORBELL_UAR_PAGE:
        trace_pvrdma_err_bad_qp_doorbell_uar_page(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_BAD_CQ_DOORBELL_UAR_PAGE:
        trace_pvrdma_err_bad_cq_doorbell_uar_page(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_BAD_SRQ_DOORBELL_UAR_PAGE:
        trace_pvrdma_err_bad_srq_doorbell_uar_page(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_DOORBELL_UNDEFINED_OFFSET:
        trace_pvrdma_err_doorbell_undefined_offset(a[0].u);
        break;
    case PVRDMA_GERR_QP_ATOMIC_TARGET_NOT_MAPPABLE_RAM:
        trace_pvrdma_err_qp_atomic_target_not_mappable_ram(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_PDIR_PAGES_OUT_OF_RANGE:
        trace_pvrdma_err_pdir_pages_out_of_range(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_PDIR_BAD_DIRECTORY_ADDRESS:
        trace_pvrdma_err_pdir_bad_directory_address(a[0].u);
        break;
    case PVRDMA_GERR_PDIR_DIRECTORY_UNREADABLE:
        trace_pvrdma_err_pdir_directory_unreadable(a[0].u);
        break;
    case PVRDMA_GERR_PDIR_BAD_PAGE_TABLE_ADDRESS:
        trace_pvrdma_err_pdir_bad_page_table_address(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_PDIR_PAGE_TABLE_UNREADABLE:
        trace_pvrdma_err_pdir_page_table_unreadable(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_PDIR_BAD_PAGE_ADDRESS:
        trace_pvrdma_err_pdir_bad_page_address(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_RING_PROD_TAIL_UNREADABLE:
        trace_pvrdma_err_ring_prod_tail_unreadable(a[0].u);
        break;
    case PVRDMA_GERR_RING_PROD_TAIL_INVALID_CONS_N:
        trace_pvrdma_err_ring_prod_tail_invalid_cons_n(a[0].u, a[1].u, a[2].u);
        break;
    case PVRDMA_GERR_RING_CONS_HEAD_UNWRITABLE:
        trace_pvrdma_err_ring_cons_head_unwritable(a[0].u);
        break;
    case PVRDMA_GERR_CQ_CQE_QP_DROPPED_CQ_ERROR:
        trace_pvrdma_err_cq_cqe_qp_dropped_cq_error(a[0].u, a[1].s, a[2].u);
        break;
    case PVRDMA_GERR_QP_WQE_UNREADABLE_WHILE_FLUSHING:
        trace_pvrdma_err_qp_wqe_unreadable_while_flushing(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_QP_INVALIDATION_KEY_NO_FAST_REG:
        trace_pvrdma_err_qp_invalidation_key_no_fast_reg(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_QP_REG_MR_KEY_NO_FREE:
        trace_pvrdma_err_qp_reg_mr_key_no_free(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_QP_REG_MR_PAGE_SHIFT_PAGES:
        trace_pvrdma_err_qp_reg_mr_page_shift_pages(a[0].u, a[1].u, a[2].u,
                                                    a[3].u, a[4].u, a[5].u,
                                                    a[6].u);
        break;
    case PVRDMA_GERR_QP_BIND_MW_NO_WINDOW:
        trace_pvrdma_err_qp_bind_mw_no_window(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_QP_BIND_MW_TYPE_2_WINDOW_STILL:
        trace_pvrdma_err_qp_bind_mw_type_2_window_still(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_QP_BIND_MW_MR_KEY_NO:
        trace_pvrdma_err_qp_bind_mw_mr_key_no(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_QP_BIND_MW_RANGE_ACCESS:
        trace_pvrdma_err_qp_bind_mw_range_access(a[0].u, a[1].u, a[2].u,
                                                 a[3].u, a[4].u);
        break;
    case PVRDMA_GERR_MR_PAGE_NOT_RAM_CANNOT_PIN:
        trace_pvrdma_err_mr_page_not_ram_cannot_pin(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_QP_RECEIVE_WQE_UNREADABLE:
        trace_pvrdma_err_qp_receive_wqe_unreadable(a[0].u);
        break;
    case PVRDMA_GERR_QP_RECEIVE_WQE_SGES_MAX:
        trace_pvrdma_err_qp_receive_wqe_sges_max(a[0].u, a[1].u, a[2].u);
        break;
    case PVRDMA_GERR_QP_SEND_UD_OPCODE:
        trace_pvrdma_err_qp_send_ud_opcode(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_QP_SEND_OPCODE_NOT_SUPPORTED:
        trace_pvrdma_err_qp_send_opcode_not_supported(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_QP_SEND_WQE_SGES_MAX:
        trace_pvrdma_err_qp_send_wqe_sges_max(a[0].u, a[1].u, a[2].u);
        break;
    case PVRDMA_GERR_QP_SEND_WQE_UNREADABLE:
        trace_pvrdma_err_qp_send_wqe_unreadable(a[0].u);
        break;
    case PVRDMA_GERR_QP_SEND_DOORBELL_STATE_WQES_WAIT:
        trace_pvrdma_err_qp_send_doorbell_state_wqes_wait(a[0].u, a[1].u);
        break;
    case PVRDMA_GERR_SRQ_DOORBELL_FAILED_SRQ:
        trace_pvrdma_err_srq_doorbell_failed_srq(a[0].u);
        break;
    default:
        break;
    }
}
