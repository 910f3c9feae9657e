// SPDX-License-Identifier: GPL-2.0-only
/*
 * PVRDMA verbs: device and port queries, GID table, user contexts,
 * protection domains, and the ib_device_ops tables.
 */
#include <linux/if_vlan.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/vmw_pvrdma-abi.h>

#include "pvrdma.h"

static_assert(PAGE_SIZE == PVRDMA_PAGE_SIZE,
	      "UAR and ring pages are 4 KiB (spec §0)");

/*
 * The device's cap flags that describe the device only; flags that name a
 * verb or WQE feature (XRC, memory windows, SRQ resize, checksum offloads,
 * ...) would make consumers use what this driver does not implement.
 */
#define PVRDMA_DEVICE_CAP_FLAGS_PASSED					\
	(IB_DEVICE_BAD_PKEY_CNTR | IB_DEVICE_BAD_QKEY_CNTR |		\
	 IB_DEVICE_CHANGE_PHY_PORT | IB_DEVICE_UD_AV_PORT_ENFORCE |	\
	 IB_DEVICE_CURR_QP_STATE_MOD | IB_DEVICE_SHUTDOWN_PORT |	\
	 IB_DEVICE_SYS_IMAGE_GUID)

static int pvrdma_cap_int(u32 v)
{
	return min_t(u32, v, INT_MAX);
}

/* -------------------------------------------------------------------- */
/* Device */

static int pvrdma_query_device(struct ib_device *ibdev,
			       struct ib_device_attr *props,
			       struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibdev);
	const struct pvrdma_device_caps *caps = &dev->caps;
	const u8 bmme_all = PVRDMA_BMME_FLAG_LOCAL_INV |
			    PVRDMA_BMME_FLAG_REMOTE_INV |
			    PVRDMA_BMME_FLAG_FAST_REG_WR;

	/* The provider passes no driver data here (spec §9). */
	if (udata && (udata->inlen || udata->outlen))
		return -EINVAL;

	memset(props, 0, sizeof(*props));
	props->fw_ver = caps->fw_ver;
	props->sys_image_guid = (__force __be64)caps->sys_image_guid;
	props->max_mr_size = caps->max_mr_size;
	props->page_size_cap = caps->page_size_cap;
	props->vendor_id = caps->vendor_id;
	props->vendor_part_id = dev->pdev->device;
	props->hw_ver = caps->hw_ver;
	props->max_qp = pvrdma_cap_int(caps->max_qp);
	props->max_qp_wr = pvrdma_cap_int(caps->max_qp_wr);
	props->device_cap_flags =
		(caps->device_cap_flags & PVRDMA_DEVICE_CAP_FLAGS_PASSED) |
		IB_DEVICE_PORT_ACTIVE_EVENT | IB_DEVICE_RC_RNR_NAK_GEN;
	props->max_send_sge = pvrdma_cap_int(caps->max_sge);
	props->max_recv_sge = pvrdma_cap_int(caps->max_sge);
	/* Version 17 devices have no max_sge_rd (spec §5.5). */
	props->max_sge_rd =
		pvrdma_cap_int(dev->version >= PVRDMA_VERSION_ROCEV2 ?
			       caps->max_sge_rd : caps->max_sge);
	props->max_cq = pvrdma_cap_int(caps->max_cq);
	props->max_cqe = pvrdma_cap_int(caps->max_cqe);
	props->max_mr = pvrdma_cap_int(caps->max_mr);
	props->max_pd = pvrdma_cap_int(caps->max_pd);
	props->max_qp_rd_atom = pvrdma_cap_int(caps->max_qp_rd_atom);
	props->max_qp_init_rd_atom = pvrdma_cap_int(caps->max_qp_init_rd_atom);
	if (caps->atomic_ops &
	    (PVRDMA_ATOMIC_OP_COMP_SWAP | PVRDMA_ATOMIC_OP_FETCH_ADD)) {
		props->atomic_cap = IB_ATOMIC_HCA;
		props->masked_atomic_cap = IB_ATOMIC_HCA;
	} else {
		props->atomic_cap = IB_ATOMIC_NONE;
		props->masked_atomic_cap = IB_ATOMIC_NONE;
	}
	props->max_ah = pvrdma_cap_int(caps->max_ah);
	if (caps->ex_comp_mask & PVRDMA_EX_CAP_MCAST) {
		props->max_mcast_grp = pvrdma_cap_int(caps->max_mcast_grp);
		props->max_mcast_qp_attach =
			pvrdma_cap_int(caps->max_mcast_qp_attach);
		props->max_total_mcast_qp_attach =
			pvrdma_cap_int(caps->max_total_mcast_qp_attach);
	}
	props->max_srq = pvrdma_cap_int(caps->max_srq);
	props->max_srq_wr = pvrdma_cap_int(caps->max_srq_wr);
	props->max_srq_sge = pvrdma_cap_int(caps->max_srq_sge);
	props->max_pkeys = caps->max_pkeys;
	props->local_ca_ack_delay = caps->local_ca_ack_delay;
	if ((caps->bmme_flags & bmme_all) == bmme_all) {
		props->device_cap_flags |= IB_DEVICE_MEM_MGT_EXTENSIONS;
		/* The page list is one PDIR table (spec §4: <= 128). */
		props->max_fast_reg_page_list_len =
			dev->version >= PVRDMA_VERSION_ROCEV2 ?
			min_t(u32, caps->max_fast_reg_page_list_len,
			      PVRDMA_MAX_FAST_REG_PAGES) :
			PVRDMA_MAX_FAST_REG_PAGES;
	}
	/* The device's clock in CQEs: ns, 48 bits (spec §14). */
	if (caps->ex_comp_mask & PVRDMA_EX_CAP_CQE_TIMESTAMP) {
		props->timestamp_mask = BIT_ULL(PVRDMA_CQE_TS_BITS) - 1;
		props->hca_core_clock = PVRDMA_CQE_TS_KHZ;
	}
	/* User SRQs take a new ring (spec §14). */
	if (caps->ex_comp_mask & PVRDMA_EX_CAP_RESIZE_SRQ)
		props->device_cap_flags |= IB_DEVICE_SRQ_RESIZE;
	/* Windows live in the device's MR table (spec §14). */
	if (caps->ex_comp_mask & PVRDMA_EX_CAP_MW) {
		props->device_cap_flags |= IB_DEVICE_MEM_WINDOW |
					   IB_DEVICE_MEM_WINDOW_TYPE_2B;
		props->max_mw = props->max_mr;
	}
	/* XRC domains, SRQs and QPs (spec §14). */
	if (pvrdma_has_xrc(dev))
		props->device_cap_flags |= IB_DEVICE_XRC;
	return 0;
}

static void pvrdma_get_dev_fw_str(struct ib_device *ibdev, char *str)
{
	u64 fw = to_pvdev(ibdev)->caps.fw_ver;

	snprintf(str, IB_FW_VERSION_NAME_MAX, "%llu.%llu.%llu", fw >> 32,
		 (fw >> 16) & 0xffff, fw & 0xffff);
}

static const struct rdma_stat_desc pvrdma_stat_descs[PVRDMA_NUM_STATS] = {
	[PVRDMA_STAT_CMD_ERR].name = "cmd_errors",
	[PVRDMA_STAT_CMD_TIMEOUT].name = "cmd_timeouts",
	[PVRDMA_STAT_CMD_BAD_RESP].name = "cmd_bad_responses",
	[PVRDMA_STAT_ASYNC_EVENTS].name = "async_events",
	[PVRDMA_STAT_ASYNC_BAD].name = "async_bad_events",
	[PVRDMA_STAT_CQ_NOTIFY].name = "cq_notifications",
	[PVRDMA_STAT_CQ_NOTIFY_BAD].name = "cq_bad_notifications",
	[PVRDMA_STAT_RING_BAD].name = "ring_state_errors",
	[PVRDMA_STAT_CQE_BAD].name = "cqe_unknown_qp",
};

static struct rdma_hw_stats *
pvrdma_alloc_hw_device_stats(struct ib_device *ibdev)
{
	return rdma_alloc_hw_stats_struct(pvrdma_stat_descs,
					  ARRAY_SIZE(pvrdma_stat_descs),
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

/*
 * The port's traffic counters, kept by the device (PVRDMA_EX_CAP_COUNTERS,
 * spec §14); names as Soft-RoCE's where the meaning is the same.
 */
static const struct rdma_stat_desc pvrdma_port_stat_descs[PVRDMA_CTR_NUM] = {
	[PVRDMA_CTR_SENT_PKTS].name = "sent_pkts",
	[PVRDMA_CTR_RCVD_PKTS].name = "rcvd_pkts",
	[PVRDMA_CTR_SENT_BYTES].name = "sent_bytes",
	[PVRDMA_CTR_RCVD_BYTES].name = "rcvd_bytes",
	[PVRDMA_CTR_RDMA_SENDS].name = "rdma_sends",
	[PVRDMA_CTR_RDMA_RECVS].name = "rdma_recvs",
	[PVRDMA_CTR_RDMA_WRITES].name = "rdma_writes",
	[PVRDMA_CTR_RDMA_WRITES_RCVD].name = "rdma_writes_rcvd",
	[PVRDMA_CTR_RDMA_READS].name = "rdma_reads",
	[PVRDMA_CTR_RDMA_READS_RCVD].name = "rdma_reads_rcvd",
	[PVRDMA_CTR_ATOMICS].name = "atomics",
	[PVRDMA_CTR_ATOMICS_RCVD].name = "atomics_rcvd",
	[PVRDMA_CTR_RETRIES].name = "retries",
	[PVRDMA_CTR_RCVD_RNR_NAKS].name = "rcvd_rnr_err",
	[PVRDMA_CTR_SENT_RNR_NAKS].name = "send_rnr_err",
	[PVRDMA_CTR_RETRY_EXC_ERRS].name = "retry_exceeded_err",
	[PVRDMA_CTR_RNR_RETRY_EXC_ERRS].name = "retry_rnr_exceeded_err",
	[PVRDMA_CTR_COMPLETION_ERRS].name = "completion_errors",
	[PVRDMA_CTR_LINK_DOWNED].name = "link_downed",
	[PVRDMA_CTR_LINKS_UP].name = "links_up",
};

static struct rdma_hw_stats *
pvrdma_alloc_hw_port_stats(struct ib_device *ibdev, u32 port_num)
{
	return rdma_alloc_hw_stats_struct(pvrdma_port_stat_descs,
					  ARRAY_SIZE(pvrdma_port_stat_descs),
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

/* QUERY_COUNTERS, PVRDMA_CTR_PER_QUERY at a time, into @value. */
static int pvrdma_query_counters(struct pvrdma_dev *dev, u64 *value)
{
	union pvrdma_cmd_resp resp;
	union pvrdma_cmd_req req;
	u32 first, i;
	int ret;

	for (first = 0; first < PVRDMA_CTR_NUM;
	     first += PVRDMA_CTR_PER_QUERY) {
		memset(&req, 0, sizeof(req));
		req.query_counters.hdr.cmd = PVRDMA_CMD_QUERY_COUNTERS;
		req.query_counters.first = first;
		ret = pvrdma_cmd_post(dev, &req, &resp);
		if (ret)
			return ret;
		if (resp.query_counters_resp.first != first ||
		    resp.query_counters_resp.total < PVRDMA_CTR_NUM) {
			pvrdma_stat_inc(dev, PVRDMA_STAT_CMD_BAD_RESP);
			return -EIO;
		}
		for (i = 0; i < PVRDMA_CTR_PER_QUERY &&
			    first + i < PVRDMA_CTR_NUM; i++)
			value[first + i] = resp.query_counters_resp.value[i];
	}
	return 0;
}

static int pvrdma_get_hw_stats(struct ib_device *ibdev,
			       struct rdma_hw_stats *stats, u32 port, int index)
{
	struct pvrdma_dev *dev = to_pvdev(ibdev);
	int i, ret;

	if (port) {
		ret = pvrdma_query_counters(dev, stats->value);
		return ret ? ret : PVRDMA_CTR_NUM;
	}
	for (i = 0; i < PVRDMA_NUM_STATS; i++)
		stats->value[i] = atomic64_read(&dev->stats[i]);
	return PVRDMA_NUM_STATS;
}

/* -------------------------------------------------------------------- */
/* Port */

/**
 * pvrdma_query_port_attr() - QUERY_PORT for the only port
 * @dev: device
 * @attr: filled with the device's answer, unvalidated
 *
 * Return: 0 or a negative errno.
 */
int pvrdma_query_port_attr(struct pvrdma_dev *dev,
			   struct pvrdma_port_attr *attr)
{
	union pvrdma_cmd_req req = {};
	union pvrdma_cmd_resp resp;
	int ret;

	req.query_port.hdr.cmd = PVRDMA_CMD_QUERY_PORT;
	req.query_port.port_num = PVRDMA_PORT;
	ret = pvrdma_cmd_post(dev, &req, &resp);
	if (ret)
		return ret;
	*attr = resp.query_port_resp.attrs;
	return 0;
}

static enum ib_mtu pvrdma_to_ib_mtu(u32 mtu)
{
	return mtu >= IB_MTU_256 && mtu <= IB_MTU_4096 ? mtu : IB_MTU_256;
}

/*
 * RoCE: the port is as up as its paired netdev, and its active MTU is
 * what an Ethernet frame of the netdev's MTU carries after the RoCE v2
 * headers (as rxe reports it).
 */
static void pvrdma_port_follow_netdev(struct pvrdma_dev *dev,
				      struct ib_port_attr *props)
{
	struct net_device *ndev;

	spin_lock(&dev->netdev_lock);
	ndev = dev->netdev;
	if (ndev)
		dev_hold(ndev);
	spin_unlock(&dev->netdev_lock);
	if (!ndev)
		return;
	if (!netif_running(ndev) || !netif_carrier_ok(ndev)) {
		props->state = IB_PORT_DOWN;
		props->phys_state = IB_PORT_PHYS_STATE_DISABLED;
	}
	props->active_mtu = min(props->active_mtu,
				iboe_get_mtu(READ_ONCE(ndev->mtu)));
	dev_put(ndev);
}

static int pvrdma_query_port(struct ib_device *ibdev, u32 port,
			     struct ib_port_attr *props)
{
	struct pvrdma_dev *dev = to_pvdev(ibdev);
	struct pvrdma_port_attr attr;
	int ret;

	ret = pvrdma_query_port_attr(dev, &attr);
	if (ret)
		return ret;

	props->state = attr.state <= IB_PORT_ACTIVE_DEFER ?
		       attr.state : IB_PORT_NOP;
	props->max_mtu = pvrdma_to_ib_mtu(attr.max_mtu);
	props->active_mtu = pvrdma_to_ib_mtu(attr.active_mtu);
	/* The SGID shadow table has caps.gid_tbl_len entries (spec §5.3). */
	props->gid_tbl_len = pvrdma_cap_int(min(attr.gid_tbl_len,
						dev->caps.gid_tbl_len));
	props->port_cap_flags = attr.port_cap_flags | IB_PORT_CM_SUP;
	/* GIDs derive from the paired netdev's addresses (IP-based GIDs). */
	props->ip_gids = true;
	props->max_msg_sz = attr.max_msg_sz;
	props->bad_pkey_cntr = attr.bad_pkey_cntr;
	props->qkey_viol_cntr = attr.qkey_viol_cntr;
	/* QUERY_PKEY carries an 8-bit index; RoCE needs at least one P_Key. */
	props->pkey_tbl_len = clamp_t(u16, attr.pkey_tbl_len, 1, 256);
	props->lid = attr.lid;
	props->sm_lid = attr.sm_lid;
	props->lmc = attr.lmc;
	props->max_vl_num = attr.max_vl_num;
	props->sm_sl = attr.sm_sl;
	props->subnet_timeout = attr.subnet_timeout;
	props->init_type_reply = attr.init_type_reply;
	props->active_width = attr.active_width;
	props->active_speed = attr.active_speed;
	props->phys_state = attr.phys_state;
	pvrdma_port_follow_netdev(dev, props);
	return 0;
}

static int pvrdma_get_port_immutable(struct ib_device *ibdev, u32 port,
				     struct ib_port_immutable *immutable)
{
	struct pvrdma_dev *dev = to_pvdev(ibdev);
	struct ib_port_attr attr;
	int ret;

	ret = ib_query_port(ibdev, port, &attr);
	if (ret)
		return ret;

	immutable->pkey_tbl_len = attr.pkey_tbl_len;
	immutable->gid_tbl_len = attr.gid_tbl_len;
	immutable->core_cap_flags =
		dev->caps.gid_types == PVRDMA_GID_TYPE_FLAG_ROCE_V2 ?
		RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP : RDMA_CORE_PORT_IBA_ROCE;
	immutable->max_mad_size = IB_MGMT_MAD_SIZE;
	return 0;
}

static enum rdma_link_layer pvrdma_get_link_layer(struct ib_device *ibdev,
						  u32 port)
{
	return IB_LINK_LAYER_ETHERNET;
}

static int pvrdma_query_pkey(struct ib_device *ibdev, u32 port, u16 index,
			     u16 *pkey)
{
	struct pvrdma_dev *dev = to_pvdev(ibdev);
	union pvrdma_cmd_req req = {};
	union pvrdma_cmd_resp resp;
	int ret;

	if (index > U8_MAX)
		return -EINVAL;

	req.query_pkey.hdr.cmd = PVRDMA_CMD_QUERY_PKEY;
	req.query_pkey.port_num = PVRDMA_PORT;
	req.query_pkey.index = index;
	ret = pvrdma_cmd_post(dev, &req, &resp);
	if (ret)
		return ret;
	*pkey = resp.query_pkey_resp.pkey;
	return 0;
}

/*
 * GID table (spec §5.3 CREATE_BIND/DESTROY_BIND).  The IB core's RoCE GID
 * cache calls these for the GIDs it derives from the paired netdev; the
 * shadow table remembers what is bound where, for DESTROY_BIND.
 */
static int pvrdma_add_gid(const struct ib_gid_attr *attr, void **context)
{
	struct pvrdma_dev *dev = to_pvdev(attr->device);
	union pvrdma_cmd_req req = {};
	struct pvrdma_cmd_create_bind *cmd = &req.create_bind;
	u16 vlan_id = 0xffff;
	int ret;

	if (attr->index >= dev->caps.gid_tbl_len)
		return -EINVAL;

	if (rdma_read_gid_l2_fields(attr, &vlan_id, NULL))
		vlan_id = 0xffff;

	cmd->hdr.cmd = PVRDMA_CMD_CREATE_BIND;
	cmd->mtu = PVRDMA_BIND_MTU;
	cmd->vlan = vlan_id < VLAN_N_VID ? vlan_id : PVRDMA_BIND_VLAN_NONE;
	cmd->index = attr->index;
	memcpy(cmd->new_gid, attr->gid.raw, sizeof(cmd->new_gid));
	/* The one GID type the device advertises (spec §3 gid_types). */
	cmd->gid_type = dev->caps.gid_types;

	mutex_lock(&dev->gid_lock);
	ret = pvrdma_cmd_post(dev, &req, NULL);
	if (!ret) {
		dev->sgid_tbl[attr->index].gid = attr->gid;
		dev->sgid_tbl[attr->index].valid = true;
	}
	mutex_unlock(&dev->gid_lock);

	if (ret)
		pvrdma_err(dev, "CREATE_BIND of index %u failed: %d\n",
			   attr->index, ret);
	else
		pvrdma_dbg(dev, "bound GID %pI6 at index %u\n", attr->gid.raw,
			   attr->index);
	return ret;
}

static int pvrdma_del_gid(const struct ib_gid_attr *attr, void **context)
{
	struct pvrdma_dev *dev = to_pvdev(attr->device);
	union pvrdma_cmd_req req = {};
	struct pvrdma_cmd_destroy_bind *cmd = &req.destroy_bind;
	struct pvrdma_sgid *sgid;
	int ret = 0;

	if (attr->index >= dev->caps.gid_tbl_len)
		return -EINVAL;

	mutex_lock(&dev->gid_lock);
	sgid = &dev->sgid_tbl[attr->index];
	if (sgid->valid) {
		cmd->hdr.cmd = PVRDMA_CMD_DESTROY_BIND;
		cmd->index = attr->index;
		memcpy(cmd->dest_gid, sgid->gid.raw, sizeof(cmd->dest_gid));
		ret = pvrdma_cmd_post(dev, &req, NULL);
		/* The entry is gone for the core whatever the device says. */
		memset(sgid, 0, sizeof(*sgid));
	}
	mutex_unlock(&dev->gid_lock);

	if (ret)
		pvrdma_err(dev, "DESTROY_BIND of index %u failed: %d\n",
			   attr->index, ret);
	return ret;
}

/* -------------------------------------------------------------------- */
/* User contexts and UAR pages (spec §7) */

static int pvrdma_uar_alloc(struct pvrdma_dev *dev, u32 *index)
{
	unsigned long idx;

	spin_lock(&dev->uar_lock);
	idx = find_first_zero_bit(dev->uar_map, dev->uar_pages);
	if (idx < dev->uar_pages)
		set_bit(idx, dev->uar_map);
	spin_unlock(&dev->uar_lock);

	if (idx >= dev->uar_pages)
		return -ENOMEM;
	*index = idx;
	return 0;
}

static void pvrdma_uar_free(struct pvrdma_dev *dev, u32 index)
{
	spin_lock(&dev->uar_lock);
	clear_bit(index, dev->uar_map);
	spin_unlock(&dev->uar_lock);
}

static void pvrdma_destroy_uc(struct pvrdma_dev *dev, u32 ctx_handle)
{
	union pvrdma_cmd_req req = {};

	req.destroy_uc.hdr.cmd = PVRDMA_CMD_DESTROY_UC;
	req.destroy_uc.ctx_handle = ctx_handle;
	/* Failures are logged by the command layer; nothing to undo. */
	pvrdma_cmd_post(dev, &req, NULL);
}

static int pvrdma_alloc_ucontext(struct ib_ucontext *ibuctx,
				 struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibuctx->device);
	struct pvrdma_ucontext *uctx = to_puctx(ibuctx);
	struct pvrdma_alloc_ucontext_resp uresp = {};
	union pvrdma_cmd_req req = {};
	union pvrdma_cmd_resp resp;
	int ret;

	if (!READ_ONCE(dev->ib_active))
		return -EAGAIN;
	if (udata->inlen && !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EINVAL;

	ret = pvrdma_uar_alloc(dev, &uctx->uar_index);
	if (ret) {
		pvrdma_err(dev, "no free UAR page (%u usable)\n",
			   dev->uar_pages);
		return ret;
	}
	uctx->uar_pfn = (dev->uar_start >> PAGE_SHIFT) + uctx->uar_index;

	req.create_uc.hdr.cmd = PVRDMA_CMD_CREATE_UC;
	if (dev->version >= PVRDMA_VERSION_PPN64) {
		req.create_uc.pfn64 = uctx->uar_pfn;
	} else if (uctx->uar_pfn <= U32_MAX) {
		req.create_uc.pfn = uctx->uar_pfn;
	} else {
		ret = -EINVAL;
		goto err_free_uar;
	}
	ret = pvrdma_cmd_post(dev, &req, &resp);
	if (ret)
		goto err_free_uar;
	uctx->ctx_handle = resp.create_uc_resp.ctx_handle;

	uresp.qp_tab_size = dev->caps.max_qp;
	if (dev->caps.ex_comp_mask & PVRDMA_EX_CAP_CQ_POLL_HINT)
		uresp.reserved |= PVRDMA_UCTX_CQ_POLL_HINT;
	if (dev->caps.ex_comp_mask & PVRDMA_EX_CAP_MW)
		uresp.reserved |= PVRDMA_UCTX_MW;
	if (dev->caps.ex_comp_mask & PVRDMA_EX_CAP_CQE_TIMESTAMP)
		uresp.reserved |= PVRDMA_UCTX_CQE_TIMESTAMP;
	if (dev->caps.ex_comp_mask & PVRDMA_EX_CAP_RQ_DB_HINT)
		uresp.reserved |= PVRDMA_UCTX_RQ_DB_HINT;
	if (dev->caps.ex_comp_mask & PVRDMA_EX_CAP_SQ_DB_HINT)
		uresp.reserved |= PVRDMA_UCTX_SQ_DB_HINT;
	if (dev->caps.ex_comp_mask & PVRDMA_EX_CAP_CLOCK)
		uresp.reserved |= PVRDMA_UCTX_CLOCK;
	if (dev->caps.ex_comp_mask & PVRDMA_EX_CAP_ATOMIC_WRITE)
		uresp.reserved |= PVRDMA_UCTX_ATOMIC_WRITE;
	if (pvrdma_has_xrc(dev))
		uresp.reserved |= PVRDMA_UCTX_XRC;
	ret = ib_copy_to_udata(udata, &uresp,
			       min_t(size_t, udata->outlen, sizeof(uresp)));
	if (ret)
		goto err_destroy_uc;

	pvrdma_dbg_uctx(uctx, "UAR page %u\n", uctx->uar_index);
	return 0;

err_destroy_uc:
	pvrdma_destroy_uc(dev, uctx->ctx_handle);
err_free_uar:
	pvrdma_uar_free(dev, uctx->uar_index);
	return ret;
}

static void pvrdma_dealloc_ucontext(struct ib_ucontext *ibuctx)
{
	struct pvrdma_dev *dev = to_pvdev(ibuctx->device);
	struct pvrdma_ucontext *uctx = to_puctx(ibuctx);

	pvrdma_dbg_uctx(uctx, "UAR page %u\n", uctx->uar_index);
	pvrdma_destroy_uc(dev, uctx->ctx_handle);
	pvrdma_uar_free(dev, uctx->uar_index);
}

/*
 * Device removal with contexts still open: the core zaps the UAR
 * mappings made through rdma_user_mmap_io() and destroys the objects;
 * there is no extra driver state to detach.
 */
static void pvrdma_disassociate_ucontext(struct ib_ucontext *ibuctx)
{
}

/* The context's UAR page, exactly one page at offset 0 (spec §7). */
static int pvrdma_mmap(struct ib_ucontext *ibuctx, struct vm_area_struct *vma)
{
	struct pvrdma_ucontext *uctx = to_puctx(ibuctx);

	if (vma->vm_end - vma->vm_start != PAGE_SIZE || vma->vm_pgoff) {
		pvrdma_dbg_uctx(uctx, "bad UAR mmap: %lu bytes at page %lu\n",
				vma->vm_end - vma->vm_start, vma->vm_pgoff);
		return -EINVAL;
	}
	vm_flags_set(vma, VM_DONTCOPY | VM_DONTEXPAND);
	return rdma_user_mmap_io(ibuctx, vma, uctx->uar_pfn, PAGE_SIZE,
				 pgprot_noncached(vma->vm_page_prot), NULL);
}

/* -------------------------------------------------------------------- */
/* Protection domains */

static void pvrdma_destroy_pd_cmd(struct pvrdma_dev *dev, u32 pd_handle)
{
	union pvrdma_cmd_req req = {};

	req.destroy_pd.hdr.cmd = PVRDMA_CMD_DESTROY_PD;
	req.destroy_pd.pd_handle = pd_handle;
	pvrdma_cmd_post(dev, &req, NULL);
}

static int pvrdma_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibpd->device);
	struct pvrdma_ucontext *uctx =
		rdma_udata_to_drv_context(udata, struct pvrdma_ucontext,
					  ibucontext);
	struct pvrdma_pd *pd = to_ppd(ibpd);
	struct pvrdma_alloc_pd_resp uresp = {};
	union pvrdma_cmd_req req = {};
	union pvrdma_cmd_resp resp;
	int ret;

	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EINVAL;

	if ((u32)atomic_inc_return(&dev->num_pds) > dev->caps.max_pd) {
		ret = -ENOMEM;
		goto err_dec_count;
	}

	req.create_pd.hdr.cmd = PVRDMA_CMD_CREATE_PD;
	req.create_pd.ctx_handle = uctx ? uctx->ctx_handle : 0;
	ret = pvrdma_cmd_post(dev, &req, &resp);
	if (ret)
		goto err_dec_count;
	pd->pd_handle = resp.create_pd_resp.pd_handle;

	/* Address vectors carry the PD handle in 24 bits (spec §5.6). */
	if (pd->pd_handle > PVRDMA_MAX_PD_HANDLE) {
		pvrdma_err_pd(pd, "device returned an out-of-range PD handle\n");
		ret = -EIO;
		goto err_destroy_pd;
	}

	if (udata) {
		uresp.pdn = pd->pd_handle;
		ret = ib_copy_to_udata(udata, &uresp,
				       min_t(size_t, udata->outlen,
					     sizeof(uresp)));
		if (ret)
			goto err_destroy_pd;
	}

	pvrdma_dbg_pd(pd, "allocated (%s)\n", udata ? "user" : "kernel");
	return 0;

err_destroy_pd:
	pvrdma_destroy_pd_cmd(dev, pd->pd_handle);
err_dec_count:
	atomic_dec(&dev->num_pds);
	return ret;
}

static int pvrdma_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibpd->device);
	struct pvrdma_pd *pd = to_ppd(ibpd);

	pvrdma_dbg_pd(pd, "deallocating\n");
	/* A device failure is logged; the PD is gone for the guest anyway. */
	pvrdma_destroy_pd_cmd(dev, pd->pd_handle);
	atomic_dec(&dev->num_pds);
	return 0;
}

/* -------------------------------------------------------------------- */
/* XRC domains (spec §14) */

static void pvrdma_destroy_xrcd_cmd(struct pvrdma_dev *dev, u32 xrcd_handle)
{
	union pvrdma_cmd_req req = {};

	req.destroy_xrcd.hdr.cmd = PVRDMA_CMD_DESTROY_XRCD;
	req.destroy_xrcd.xrcd_handle = xrcd_handle;
	pvrdma_cmd_post(dev, &req, NULL);
}

/*
 * The IB core calls this once per domain, for the first process that
 * opens it (ibv_open_xrcd by file); the others share the ib_xrcd.  The
 * device's domain belongs to no user context, so CREATE_XRCD names none.
 */
static int pvrdma_alloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibxrcd->device);
	struct pvrdma_xrcd *xrcd = to_pxrcd(ibxrcd);
	union pvrdma_cmd_req req = {};
	union pvrdma_cmd_resp resp;
	int ret;

	if (!pvrdma_has_xrc(dev))
		return -EOPNOTSUPP;
	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EINVAL;

	/* The device allows as many domains as PDs (spec §14). */
	if ((u32)atomic_inc_return(&dev->num_xrcds) > dev->caps.max_pd) {
		ret = -ENOMEM;
		goto err_dec_count;
	}

	req.create_xrcd.hdr.cmd = PVRDMA_CMD_CREATE_XRCD;
	ret = pvrdma_cmd_post(dev, &req, &resp);
	if (ret)
		goto err_dec_count;
	xrcd->xrcd_handle = resp.create_xrcd_resp.xrcd_handle;

	pvrdma_dbg(dev, "XRC domain %u allocated\n", xrcd->xrcd_handle);
	return 0;

err_dec_count:
	atomic_dec(&dev->num_xrcds);
	return ret;
}

static int pvrdma_dealloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata)
{
	struct pvrdma_dev *dev = to_pvdev(ibxrcd->device);
	struct pvrdma_xrcd *xrcd = to_pxrcd(ibxrcd);

	pvrdma_dbg(dev, "deallocating XRC domain %u\n", xrcd->xrcd_handle);
	/*
	 * The IB core destroys the domain's SRQs and QPs first.  A device
	 * failure is logged; the domain is gone for the guest anyway.
	 */
	pvrdma_destroy_xrcd_cmd(dev, xrcd->xrcd_handle);
	atomic_dec(&dev->num_xrcds);
	return 0;
}

/* -------------------------------------------------------------------- */
/* Adapters for operations whose prototype depends on the kernel version */

#ifdef PVRDMA_HAVE_CREATE_CQ_ATTRS
static int pvrdma_create_cq_attrs(struct ib_cq *ibcq,
				  const struct ib_cq_init_attr *attr,
				  struct uverbs_attr_bundle *attrs)
{
	return pvrdma_create_cq(ibcq, attr,
				attrs ? &attrs->driver_udata : NULL);
}
#endif

#ifdef PVRDMA_HAVE_REG_USER_MR_DMAH
static struct ib_mr *pvrdma_reg_user_mr_dmah(struct ib_pd *ibpd, u64 start,
					     u64 length, u64 virt_addr,
					     int access_flags,
					     struct ib_dmah *dmah,
					     struct ib_udata *udata)
{
	/* The device knows no DMA handles (no alloc_dmah either). */
	if (dmah)
		return ERR_PTR(-EOPNOTSUPP);
	return pvrdma_reg_user_mr(ibpd, start, length, virt_addr,
				  access_flags, udata);
}
#endif

#ifdef PVRDMA_HAVE_RESIZE_USER_CQ
static int pvrdma_resize_user_cq(struct ib_cq *ibcq, unsigned int cqe,
				 struct ib_udata *udata)
{
	if (cqe > INT_MAX)
		return -EINVAL;
	return pvrdma_resize_cq(ibcq, cqe, udata);
}
#endif

const struct ib_device_ops pvrdma_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_VMW_PVRDMA,
	.uverbs_abi_ver = PVRDMA_UVERBS_ABI_VERSION,

	.add_gid = pvrdma_add_gid,
	.alloc_hw_device_stats = pvrdma_alloc_hw_device_stats,
	.alloc_mr = pvrdma_alloc_mr,
	.alloc_pd = pvrdma_alloc_pd,
	.alloc_ucontext = pvrdma_alloc_ucontext,
	.create_ah = pvrdma_create_ah,
#ifdef PVRDMA_HAVE_CREATE_CQ_ATTRS
	.create_cq = pvrdma_create_cq_attrs,
#else
	.create_cq = pvrdma_create_cq,
#endif
	.create_qp = pvrdma_create_qp,
	.dealloc_pd = pvrdma_dealloc_pd,
	.dealloc_ucontext = pvrdma_dealloc_ucontext,
	.del_gid = pvrdma_del_gid,
	.dereg_mr = pvrdma_dereg_mr,
	.destroy_ah = pvrdma_destroy_ah,
	.destroy_cq = pvrdma_destroy_cq,
	.destroy_qp = pvrdma_destroy_qp,
	.disassociate_ucontext = pvrdma_disassociate_ucontext,
	.get_dev_fw_str = pvrdma_get_dev_fw_str,
	.get_dma_mr = pvrdma_get_dma_mr,
	.get_hw_stats = pvrdma_get_hw_stats,
	.get_link_layer = pvrdma_get_link_layer,
	.get_port_immutable = pvrdma_get_port_immutable,
	.map_mr_sg = pvrdma_map_mr_sg,
	.mmap = pvrdma_mmap,
	.modify_qp = pvrdma_modify_qp,
	.poll_cq = pvrdma_poll_cq,
	.post_recv = pvrdma_post_recv,
	.post_send = pvrdma_post_send,
	.query_device = pvrdma_query_device,
	.query_pkey = pvrdma_query_pkey,
	.query_port = pvrdma_query_port,
	.query_qp = pvrdma_query_qp,
#ifdef PVRDMA_HAVE_REG_USER_MR_DMAH
	.reg_user_mr = pvrdma_reg_user_mr_dmah,
#else
	.reg_user_mr = pvrdma_reg_user_mr,
#endif
	.rereg_user_mr = pvrdma_rereg_user_mr,
	.req_notify_cq = pvrdma_req_notify_cq,
#ifdef PVRDMA_HAVE_RESIZE_USER_CQ
	.resize_user_cq = pvrdma_resize_user_cq,
#else
	.resize_cq = pvrdma_resize_cq,
#endif

	INIT_RDMA_OBJ_SIZE(ib_ah, pvrdma_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, pvrdma_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_pd, pvrdma_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, pvrdma_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, pvrdma_ucontext, ibucontext),
};

/*
 * Multicast (spec §14): a UD QP joins or leaves a group on the device,
 * which bounds the groups and the QPs of one (ENOMEM beyond).
 */
static int pvrdma_mcast_cmd(struct ib_qp *ibqp, union ib_gid *gid, u32 cmd)
{
	union pvrdma_cmd_resp resp;
	union pvrdma_cmd_req req;

	memset(&req, 0, sizeof(req));
	req.mcast.hdr.cmd = cmd;
	req.mcast.qp_handle = to_pqp(ibqp)->qp_handle;
	memcpy(req.mcast.mgid, gid->raw, sizeof(req.mcast.mgid));
	return pvrdma_cmd_post(to_pvdev(ibqp->device), &req, &resp);
}

static int pvrdma_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid,
			       u16 lid)
{
	return pvrdma_mcast_cmd(ibqp, gid, PVRDMA_CMD_ATTACH_MCAST);
}

static int pvrdma_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid,
			       u16 lid)
{
	return pvrdma_mcast_cmd(ibqp, gid, PVRDMA_CMD_DETACH_MCAST);
}

/* Added only when the device has multicast. */
const struct ib_device_ops pvrdma_dev_mcast_ops = {
	.attach_mcast = pvrdma_attach_mcast,
	.detach_mcast = pvrdma_detach_mcast,
};

/* Memory windows, added only when the device offers them (spec §14). */
const struct ib_device_ops pvrdma_dev_mw_ops = {
	.alloc_mw = pvrdma_alloc_mw,
	.dealloc_mw = pvrdma_dealloc_mw,

	INIT_RDMA_OBJ_SIZE(ib_mw, pvrdma_mw, ibmw),
};

/* Port counters, added only when the device keeps them (spec §14). */
const struct ib_device_ops pvrdma_dev_counter_ops = {
	.alloc_hw_port_stats = pvrdma_alloc_hw_port_stats,
};

/*
 * XRC domains, added only when the device offers XRC and has SRQs (spec
 * §14); XRC SRQs and QPs go through the SRQ and QP verbs.
 */
const struct ib_device_ops pvrdma_dev_xrc_ops = {
	.alloc_xrcd = pvrdma_alloc_xrcd,
	.dealloc_xrcd = pvrdma_dealloc_xrcd,

	INIT_RDMA_OBJ_SIZE(ib_xrcd, pvrdma_xrcd, ibxrcd),
};

/* SRQ verbs, added only when the device has SRQs (caps.max_srq != 0). */
const struct ib_device_ops pvrdma_dev_srq_ops = {
	.create_srq = pvrdma_create_srq,
	.destroy_srq = pvrdma_destroy_srq,
	.modify_srq = pvrdma_modify_srq,
	.post_srq_recv = pvrdma_post_srq_recv,
	.query_srq = pvrdma_query_srq,

	INIT_RDMA_OBJ_SIZE(ib_srq, pvrdma_srq, ibsrq),
};
