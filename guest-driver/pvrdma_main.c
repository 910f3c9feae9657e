// SPDX-License-Identifier: GPL-2.0-only
/*
 * PVRDMA guest driver: PCI probe/remove, the device shared region, the
 * interrupt vectors and the pairing with a guest net_device.
 *
 * Probe and remove are mirror images; every unwind label names what it
 * undoes.
 */
#include <linux/bitmap.h>
#include <linux/dma-mapping.h>
#include <linux/interrupt.h>
#include <linux/if_arp.h>
#include <linux/module.h>
#include <linux/rtnetlink.h>
#include <linux/slab.h>
#include <net/net_namespace.h>

#include "pvrdma.h"
#include "pvrdma_ring.h"

MODULE_DESCRIPTION("Paravirtual RDMA (VMware PVRDMA ABI) guest driver");
MODULE_LICENSE("GPL");

static char *pvrdma_netdev_param;
module_param_named(netdev, pvrdma_netdev_param, charp, 0444);
MODULE_PARM_DESC(netdev,
		 "Name of the net_device whose addresses become the port's GIDs (default: the netdev of PCI function 0 of our slot, else the first Ethernet netdev with a permanent MAC)");

/* Elements of the two DSR rings (spec §6.1, §6.2: not powers of two). */
#define PVRDMA_ASYNC_RING_N						\
	((PVRDMA_DSR_RING_PAGES - 1) * PVRDMA_PAGE_SIZE /		\
	 sizeof(struct pvrdma_eqe))
#define PVRDMA_CQN_RING_N						\
	((PVRDMA_DSR_RING_PAGES - 1) * PVRDMA_PAGE_SIZE /		\
	 sizeof(struct pvrdma_cqne))

static const struct pci_device_id pvrdma_pci_tbl[] = {
	{ PCI_DEVICE(PVRDMA_PCI_VENDOR_ID, PVRDMA_PCI_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, pvrdma_pci_tbl);

/* -------------------------------------------------------------------- */
/* Events */

static void pvrdma_port_event(struct pvrdma_dev *dev, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = &dev->ibdev,
		.element.port_num = PVRDMA_PORT,
		.event = type,
	};

	ib_dispatch_event(&ev);
}

static void pvrdma_qp_event(struct pvrdma_dev *dev, u32 handle,
			    enum ib_event_type type)
{
	struct pvrdma_qp *qp = NULL;
	struct ib_event ev;

	spin_lock(&dev->tbl_lock);
	if (handle < dev->caps.max_qp) {
		qp = dev->qp_tbl[handle];
		if (qp)
			refcount_inc(&qp->refcnt);
	}
	spin_unlock(&dev->tbl_lock);

	if (!qp) {
		pvrdma_stat_inc(dev, PVRDMA_STAT_ASYNC_BAD);
		pvrdma_err(dev, "event %u for unknown QP handle %u\n", type,
			   handle);
		return;
	}
	if (qp->ibqp.event_handler) {
		ev.device = qp->ibqp.device;
		ev.element.qp = &qp->ibqp;
		ev.event = type;
		qp->ibqp.event_handler(&ev, qp->ibqp.qp_context);
	}
	if (refcount_dec_and_test(&qp->refcnt))
		complete(&qp->free);
}

static void pvrdma_srq_event(struct pvrdma_dev *dev, u32 handle,
			     enum ib_event_type type)
{
	struct pvrdma_srq *srq = NULL;
	struct ib_event ev;

	spin_lock(&dev->tbl_lock);
	if (dev->srq_tbl && handle < dev->caps.max_srq) {
		srq = dev->srq_tbl[handle];
		if (srq)
			refcount_inc(&srq->refcnt);
	}
	spin_unlock(&dev->tbl_lock);

	if (!srq) {
		pvrdma_stat_inc(dev, PVRDMA_STAT_ASYNC_BAD);
		pvrdma_err(dev, "event %u for unknown SRQ handle %u\n", type,
			   handle);
		return;
	}
	if (srq->ibsrq.event_handler) {
		ev.device = srq->ibsrq.device;
		ev.element.srq = &srq->ibsrq;
		ev.event = type;
		srq->ibsrq.event_handler(&ev, srq->ibsrq.srq_context);
	}
	if (refcount_dec_and_test(&srq->refcnt))
		complete(&srq->free);
}

/* One async event ring element (spec §6.3); types equal ib_event_type. */
static void pvrdma_async_event(struct pvrdma_dev *dev, u32 type, u32 info)
{
	switch (type) {
	case PVRDMA_EQE_TYPE_CQ_ERR:
		pvrdma_cq_event(dev, info, IB_EVENT_CQ_ERR);
		break;
	case PVRDMA_EQE_TYPE_QP_FATAL:
	case PVRDMA_EQE_TYPE_QP_REQ_ERR:
	case PVRDMA_EQE_TYPE_QP_ACCESS_ERR:
	case PVRDMA_EQE_TYPE_COMM_EST:
	case PVRDMA_EQE_TYPE_SQ_DRAINED:
	case PVRDMA_EQE_TYPE_PATH_MIG:
	case PVRDMA_EQE_TYPE_PATH_MIG_ERR:
	case PVRDMA_EQE_TYPE_QP_LAST_WQE_REACHED:
		pvrdma_qp_event(dev, info, (enum ib_event_type)type);
		break;
	case PVRDMA_EQE_TYPE_SRQ_ERR:
	case PVRDMA_EQE_TYPE_SRQ_LIMIT_REACHED:
		pvrdma_srq_event(dev, info, (enum ib_event_type)type);
		break;
	case PVRDMA_EQE_TYPE_DEVICE_FATAL:
		pvrdma_port_event(dev, IB_EVENT_DEVICE_FATAL);
		break;
	case PVRDMA_EQE_TYPE_PORT_ACTIVE:
	case PVRDMA_EQE_TYPE_PORT_ERR:
	case PVRDMA_EQE_TYPE_LID_CHANGE:
	case PVRDMA_EQE_TYPE_PKEY_CHANGE:
	case PVRDMA_EQE_TYPE_SM_CHANGE:
	case PVRDMA_EQE_TYPE_CLIENT_REREGISTER:
	case PVRDMA_EQE_TYPE_GID_CHANGE:
		if (info != PVRDMA_PORT) {
			pvrdma_stat_inc(dev, PVRDMA_STAT_ASYNC_BAD);
			pvrdma_err(dev, "event %u for invalid port %u\n",
				   type, info);
			break;
		}
		pvrdma_port_event(dev, (enum ib_event_type)type);
		break;
	default:
		pvrdma_stat_inc(dev, PVRDMA_STAT_ASYNC_BAD);
		pvrdma_err(dev, "unknown async event type %u\n", type);
		break;
	}
}

static_assert(PVRDMA_EQE_TYPE_CQ_ERR == (int)IB_EVENT_CQ_ERR);
static_assert(PVRDMA_EQE_TYPE_QP_LAST_WQE_REACHED ==
	      (int)IB_EVENT_QP_LAST_WQE_REACHED);
static_assert(PVRDMA_EQE_TYPE_SRQ_LIMIT_REACHED ==
	      (int)IB_EVENT_SRQ_LIMIT_REACHED);
static_assert(PVRDMA_EQE_TYPE_GID_CHANGE == (int)IB_EVENT_GID_CHANGE);

static struct pvrdma_ring *pvrdma_dsr_ring(struct pvrdma_pdir *pdir)
{
	struct pvrdma_ring_state *state = pdir->pages[0];

	return &state->rx;
}

/* Vector 0: the device answered the command in the slot (spec §5.1). */
static irqreturn_t pvrdma_cmd_irq(int irq, void *data)
{
	pvrdma_cmd_irq_complete(data);
	return IRQ_HANDLED;
}

/* Vector 1: drain the async event ring (spec §6.3). */
static irqreturn_t pvrdma_async_irq(int irq, void *data)
{
	struct pvrdma_dev *dev = data;
	struct pvrdma_ring *ring = pvrdma_dsr_ring(&dev->async_pdir);
	const u32 n = PVRDMA_ASYNC_RING_N;
	struct pvrdma_eqe *eqe;
	u32 budget, slot, type, info;
	int ret;

	/* Bounded, so a device that keeps producing cannot hold the CPU. */
	for (budget = n; budget; budget--) {
		ret = pvrdma_ring_peek(ring, n, &slot);
		if (ret < 0) {
			pvrdma_stat_inc(dev, PVRDMA_STAT_RING_BAD);
			pvrdma_err(dev, "async event ring state invalid\n");
			break;
		}
		if (!ret)
			break;

		eqe = pvrdma_pdir_elem(&dev->async_pdir, 1, slot, sizeof(*eqe));
		type = READ_ONCE(eqe->type);
		info = READ_ONCE(eqe->info);
		pvrdma_ring_consume(ring, n);

		pvrdma_stat_inc(dev, PVRDMA_STAT_ASYNC_EVENTS);
		/* Nothing can listen before the IB device is registered. */
		if (!READ_ONCE(dev->ib_active)) {
			pvrdma_dbg(dev, "dropped event %u/%u while inactive\n",
				   type, info);
			continue;
		}
		pvrdma_async_event(dev, type, info);
	}
	return IRQ_HANDLED;
}

/* Vector 2: drain the CQ notification ring (spec §6.4). */
static irqreturn_t pvrdma_cqnotify_irq(int irq, void *data)
{
	struct pvrdma_dev *dev = data;
	struct pvrdma_ring *ring = pvrdma_dsr_ring(&dev->cqn_pdir);
	const u32 n = PVRDMA_CQN_RING_N;
	struct pvrdma_cqne *cqne;
	u32 budget, slot, handle;
	int ret;

	for (budget = n; budget; budget--) {
		ret = pvrdma_ring_peek(ring, n, &slot);
		if (ret < 0) {
			pvrdma_stat_inc(dev, PVRDMA_STAT_RING_BAD);
			pvrdma_err(dev, "CQ notification ring state invalid\n");
			break;
		}
		if (!ret)
			break;

		cqne = pvrdma_pdir_elem(&dev->cqn_pdir, 1, slot, sizeof(*cqne));
		handle = READ_ONCE(cqne->info);
		pvrdma_ring_consume(ring, n);

		pvrdma_stat_inc(dev, PVRDMA_STAT_CQ_NOTIFY);
		pvrdma_cq_notify(dev, handle);
	}
	return IRQ_HANDLED;
}

/* -------------------------------------------------------------------- */
/* Interrupts (spec §1): exactly three MSI-X vectors */

static const struct {
	const char *name;
	irq_handler_t handler;
} pvrdma_vectors[PVRDMA_NUM_VECTORS] = {
	[PVRDMA_VECTOR_RESPONSE] = { "cmd", pvrdma_cmd_irq },
	[PVRDMA_VECTOR_ASYNC] = { "async", pvrdma_async_irq },
	[PVRDMA_VECTOR_CQ] = { "cq", pvrdma_cqnotify_irq },
};

static void pvrdma_free_irqs(struct pvrdma_dev *dev, int nr)
{
	while (nr--)
		free_irq(pci_irq_vector(dev->pdev, nr), dev);
	pci_free_irq_vectors(dev->pdev);
}

static int pvrdma_init_irqs(struct pvrdma_dev *dev)
{
	struct pci_dev *pdev = dev->pdev;
	int ret, i;

	ret = pci_alloc_irq_vectors(pdev, PVRDMA_NUM_VECTORS,
				    PVRDMA_NUM_VECTORS, PCI_IRQ_MSIX);
	if (ret < 0) {
		dev_err(&pdev->dev,
			"%d MSI-X vectors are required (command, async events, CQ notifications): %d\n",
			PVRDMA_NUM_VECTORS, ret);
		return ret;
	}

	for (i = 0; i < PVRDMA_NUM_VECTORS; i++) {
		snprintf(dev->irq_name[i], sizeof(dev->irq_name[i]),
			 "pvrdma-%s@pci:%s", pvrdma_vectors[i].name,
			 pci_name(pdev));
		ret = request_irq(pci_irq_vector(pdev, i),
				  pvrdma_vectors[i].handler, 0,
				  dev->irq_name[i], dev);
		if (ret) {
			dev_err(&pdev->dev, "cannot request %s interrupt: %d\n",
				pvrdma_vectors[i].name, ret);
			pvrdma_free_irqs(dev, i);
			return ret;
		}
	}
	return 0;
}

/* -------------------------------------------------------------------- */
/* Device shared region, command slots and DSR rings (spec §3, §4, §6) */

static void pvrdma_free_shared(struct pvrdma_dev *dev)
{
	struct device *dmadev = &dev->pdev->dev;

	pvrdma_pdir_cleanup(dev, &dev->cqn_pdir);
	pvrdma_pdir_cleanup(dev, &dev->async_pdir);
	dma_free_coherent(dmadev, PAGE_SIZE, dev->resp_slot,
			  dev->resp_slot_dma);
	dma_free_coherent(dmadev, PAGE_SIZE, dev->cmd_slot, dev->cmd_slot_dma);
	dma_free_coherent(dmadev, sizeof(*dev->dsr), dev->dsr, dev->dsr_dma);
}

static int pvrdma_alloc_shared(struct pvrdma_dev *dev)
{
	struct device *dmadev = &dev->pdev->dev;
	struct pvrdma_device_shared_region *dsr;
	u64 uar_pfn = dev->uar_start >> PVRDMA_PAGE_SHIFT;
	int ret;

	if (dev->version < PVRDMA_VERSION_PPN64 && uar_pfn > U32_MAX) {
		dev_err(dmadev, "UAR PFN %#llx needs interface version %u\n",
			uar_pfn, PVRDMA_VERSION_PPN64);
		return -EINVAL;
	}

	dev->dsr = dma_alloc_coherent(dmadev, sizeof(*dev->dsr), &dev->dsr_dma,
				      GFP_KERNEL);
	if (!dev->dsr)
		return -ENOMEM;
	dsr = dev->dsr;

	dsr->driver_version = PVRDMA_VERSION;
	dsr->gos_info.word =
		(PVRDMA_GOS_BITS_64 << PVRDMA_GOS_BITS_SHIFT) |
		(PVRDMA_GOS_TYPE_LINUX << PVRDMA_GOS_TYPE_SHIFT) |
		(1 << PVRDMA_GOS_VER_SHIFT);
	if (dev->version >= PVRDMA_VERSION_PPN64)
		dsr->uar_pfn64 = uar_pfn;
	else
		dsr->uar_pfn = (u32)uar_pfn;

	ret = -ENOMEM;
	dev->cmd_slot = dma_alloc_coherent(dmadev, PAGE_SIZE,
					   &dev->cmd_slot_dma, GFP_KERNEL);
	if (!dev->cmd_slot)
		goto err_free_dsr;
	dsr->cmd_slot_dma = dev->cmd_slot_dma;

	dev->resp_slot = dma_alloc_coherent(dmadev, PAGE_SIZE,
					    &dev->resp_slot_dma, GFP_KERNEL);
	if (!dev->resp_slot)
		goto err_free_cmd_slot;
	dsr->resp_slot_dma = dev->resp_slot_dma;

	ret = pvrdma_pdir_init(dev, &dev->async_pdir, PVRDMA_DSR_RING_PAGES,
			       true);
	if (ret)
		goto err_free_resp_slot;
	dsr->async_ring_pages.num_pages = PVRDMA_DSR_RING_PAGES;
	dsr->async_ring_pages.pdir_dma = dev->async_pdir.dir_dma;

	ret = pvrdma_pdir_init(dev, &dev->cqn_pdir, PVRDMA_DSR_RING_PAGES,
			       true);
	if (ret)
		goto err_free_async_ring;
	dsr->cq_ring_pages.num_pages = PVRDMA_DSR_RING_PAGES;
	dsr->cq_ring_pages.pdir_dma = dev->cqn_pdir.dir_dma;

	return 0;

err_free_async_ring:
	pvrdma_pdir_cleanup(dev, &dev->async_pdir);
err_free_resp_slot:
	dma_free_coherent(dmadev, PAGE_SIZE, dev->resp_slot,
			  dev->resp_slot_dma);
err_free_cmd_slot:
	dma_free_coherent(dmadev, PAGE_SIZE, dev->cmd_slot, dev->cmd_slot_dma);
err_free_dsr:
	dma_free_coherent(dmadev, sizeof(*dev->dsr), dev->dsr, dev->dsr_dma);
	return ret;
}

/*
 * Hand the DSR to the device.  The DSRHIGH write makes the device map
 * everything and fill dsr->caps before the write completes (spec §3).
 * The caps are copied once, so later device writes cannot change limits
 * the driver already sized its tables with.
 */
static void pvrdma_load_dsr(struct pvrdma_dev *dev)
{
	pvrdma_reg_write(dev, PVRDMA_REG_DSRLOW, lower_32_bits(dev->dsr_dma));
	pvrdma_reg_write(dev, PVRDMA_REG_DSRHIGH, upper_32_bits(dev->dsr_dma));
	/* Read dsr->caps only after the DSRHIGH write that filled them. */
	mb();
	memcpy(&dev->caps, &dev->dsr->caps, sizeof(dev->caps));
}

static int pvrdma_check_caps(struct pvrdma_dev *dev)
{
	const struct pvrdma_device_caps *caps = &dev->caps;
	struct device *d = &dev->pdev->dev;

	if (caps->mode != PVRDMA_DEVICE_MODE_ROCE) {
		dev_err(d, "unsupported device mode %u (only RoCE)\n",
			caps->mode);
		return -EINVAL;
	}
	if (caps->gid_types != PVRDMA_GID_TYPE_FLAG_ROCE_V1 &&
	    caps->gid_types != PVRDMA_GID_TYPE_FLAG_ROCE_V2) {
		dev_err(d, "gid_types %#x is not exactly RoCE v1 or v2\n",
			caps->gid_types);
		return -EINVAL;
	}
	if (dev->version < PVRDMA_VERSION_ROCEV2 &&
	    caps->gid_types != PVRDMA_GID_TYPE_FLAG_ROCE_V1) {
		dev_err(d, "interface version %u supports RoCE v1 only\n",
			dev->version);
		return -EINVAL;
	}
	if (!caps->max_uar || !is_power_of_2(caps->max_uar)) {
		dev_err(d, "max_uar %u is not a power of two\n",
			caps->max_uar);
		return -EINVAL;
	}
	if (!caps->max_qp || caps->max_qp > PVRDMA_MAX_QP_HANDLES) {
		dev_err(d, "max_qp %u outside 1..%u\n", caps->max_qp,
			PVRDMA_MAX_QP_HANDLES);
		return -EINVAL;
	}
	if (!caps->max_cq || caps->max_cq > PVRDMA_MAX_DB_HANDLES ||
	    caps->max_srq > PVRDMA_MAX_DB_HANDLES) {
		dev_err(d, "max_cq %u / max_srq %u outside the 24-bit handle space\n",
			caps->max_cq, caps->max_srq);
		return -EINVAL;
	}
	if (!caps->gid_tbl_len || caps->gid_tbl_len > PVRDMA_MAX_GID_TBL_LEN) {
		dev_err(d, "gid_tbl_len %u outside 1..%u\n", caps->gid_tbl_len,
			PVRDMA_MAX_GID_TBL_LEN);
		return -EINVAL;
	}
	if (!caps->phys_port_cnt) {
		dev_err(d, "device reports no port\n");
		return -EINVAL;
	}
	if (caps->phys_port_cnt > 1)
		dev_warn(d, "device reports %u ports, using port 1 only\n",
			 caps->phys_port_cnt);
	return 0;
}

/* -------------------------------------------------------------------- */
/* Driver tables sized from the caps */

static void pvrdma_free_tables(struct pvrdma_dev *dev)
{
	kvfree(dev->srq_tbl);
	kvfree(dev->qp_tbl);
	kvfree(dev->cq_tbl);
	kfree(dev->sgid_tbl);
	bitmap_free(dev->uar_map);
}

static int pvrdma_alloc_tables(struct pvrdma_dev *dev)
{
	u32 bar_pages = pci_resource_len(dev->pdev, PVRDMA_BAR_UAR) >>
			PVRDMA_PAGE_SHIFT;

	/* UAR pages beyond BAR2 cannot be mapped, whatever max_uar says. */
	dev->uar_pages = min(dev->caps.max_uar, bar_pages);
	dev->uar_map = bitmap_zalloc(dev->uar_pages, GFP_KERNEL);
	if (!dev->uar_map)
		goto err_free_tables;
	/* UAR 0 is the kernel's (spec §7). */
	set_bit(0, dev->uar_map);

	dev->sgid_tbl = kcalloc(dev->caps.gid_tbl_len, sizeof(*dev->sgid_tbl),
				GFP_KERNEL);
	if (!dev->sgid_tbl)
		goto err_free_tables;

	dev->cq_tbl = kvcalloc(dev->caps.max_cq, sizeof(*dev->cq_tbl),
			       GFP_KERNEL);
	if (!dev->cq_tbl)
		goto err_free_tables;

	dev->qp_tbl = kvcalloc(dev->caps.max_qp, sizeof(*dev->qp_tbl),
			       GFP_KERNEL);
	if (!dev->qp_tbl)
		goto err_free_tables;

	if (dev->caps.max_srq) {
		dev->srq_tbl = kvcalloc(dev->caps.max_srq,
					sizeof(*dev->srq_tbl), GFP_KERNEL);
		if (!dev->srq_tbl)
			goto err_free_tables;
	}
	return 0;

err_free_tables:
	pvrdma_free_tables(dev);
	return -ENOMEM;
}

/* -------------------------------------------------------------------- */
/* Pairing with a guest net_device (all under RTNL) */

static bool pvrdma_netdev_usable(struct net_device *ndev)
{
	return net_eq(dev_net(ndev), &init_net) &&
	       ndev->reg_state == NETREG_REGISTERED &&
	       ndev->type == ARPHRD_ETHER &&
	       !(ndev->flags & IFF_LOOPBACK);
}

static bool pvrdma_netdev_below(struct net_device *ndev, struct device *dev)
{
	struct device *d;

	for (d = ndev->dev.parent; d; d = d->parent)
		if (d == dev)
			return true;
	return false;
}

/* Function 0 of our slot is an Ethernet NIC (e.g. vmxnet3, virtio-net). */
static bool pvrdma_has_fn0_nic(struct pvrdma_dev *dev)
{
	return dev->fn0 &&
	       (dev->fn0->class >> 8) == PCI_CLASS_NETWORK_ETHERNET;
}

/*
 * The pairing rule:
 *  1. the netdev named by the "netdev" module parameter, if given;
 *  2. else, if PCI function 0 of our slot is an Ethernet NIC, the netdev
 *     its driver registered (none yet: wait for it to register);
 *  3. else the first Ethernet, non-loopback netdev of init_net with a
 *     permanent MAC address.
 */
static struct net_device *pvrdma_netdev_select(struct pvrdma_dev *dev)
{
	struct net_device *ndev;

	ASSERT_RTNL();

	if (pvrdma_netdev_param && pvrdma_netdev_param[0]) {
		ndev = __dev_get_by_name(&init_net, pvrdma_netdev_param);
		return ndev && pvrdma_netdev_usable(ndev) ? ndev : NULL;
	}

	if (pvrdma_has_fn0_nic(dev)) {
		for_each_netdev(&init_net, ndev)
			if (pvrdma_netdev_usable(ndev) &&
			    pvrdma_netdev_below(ndev, &dev->fn0->dev))
				return ndev;
		return NULL;
	}

	for_each_netdev(&init_net, ndev)
		if (pvrdma_netdev_usable(ndev) &&
		    ndev->addr_assign_type == NET_ADDR_PERM)
			return ndev;
	return NULL;
}

static void pvrdma_port_up(struct pvrdma_dev *dev)
{
	/* spec §10.1: UNQUIESCE on link up, then report the port active. */
	if (pvrdma_dev_ctl(dev, PVRDMA_DEVICE_CTL_UNQUIESCE)) {
		dev_err(&dev->pdev->dev,
			"device refused to unquiesce on link up of %s\n",
			netdev_name(dev->netdev));
		return;
	}
	pvrdma_port_event(dev, IB_EVENT_PORT_ACTIVE);
}

static void pvrdma_netdev_unpair(struct pvrdma_dev *dev)
{
	struct net_device *ndev = dev->netdev;

	ASSERT_RTNL();

	dev_info(&dev->pdev->dev, "unpaired from %s\n", netdev_name(ndev));
	ib_device_set_netdev(&dev->ibdev, NULL, PVRDMA_PORT);
	spin_lock(&dev->netdev_lock);
	dev->netdev = NULL;
	spin_unlock(&dev->netdev_lock);
	dev_put(ndev);
}

/*
 * Pair with the netdev the rule selects.  Once the IB device is
 * registered the IB core is asked to rebuild the port's GIDs (it only
 * does so by itself at registration), and a netdev that is already up
 * activates the port when @activate says no NETDEV_UP will follow.
 */
static void pvrdma_netdev_try_pair(struct pvrdma_dev *dev, bool activate)
{
	struct net_device *ndev;
	int ret;

	ASSERT_RTNL();

	ndev = pvrdma_netdev_select(dev);
	if (!ndev)
		return;

	ret = ib_device_set_netdev(&dev->ibdev, ndev, PVRDMA_PORT);
	if (ret) {
		dev_err(&dev->pdev->dev, "cannot pair with %s: %d\n",
			netdev_name(ndev), ret);
		return;
	}
	dev_hold(ndev);
	spin_lock(&dev->netdev_lock);
	dev->netdev = ndev;
	spin_unlock(&dev->netdev_lock);
	dev_info(&dev->pdev->dev, "paired with %s\n", netdev_name(ndev));

	if (!READ_ONCE(dev->ib_active))
		return;
	schedule_work(&dev->rescan_work);
	if (activate && netif_running(ndev))
		pvrdma_port_up(dev);
}

/* rdma_roce_rescan_device() takes RTNL, so it cannot run in the notifier. */
static void pvrdma_rescan_work(struct work_struct *work)
{
	struct pvrdma_dev *dev = container_of(work, struct pvrdma_dev,
					      rescan_work);

	rdma_roce_rescan_device(&dev->ibdev);
}

static int pvrdma_netdev_event(struct notifier_block *nb, unsigned long event,
			       void *ptr)
{
	struct pvrdma_dev *dev = container_of(nb, struct pvrdma_dev,
					      netdev_nb);
	struct net_device *ndev = netdev_notifier_info_to_dev(ptr);

	if (!dev->netdev) {
		if (event == NETDEV_REGISTER)
			pvrdma_netdev_try_pair(dev, false);
		else if (event == NETDEV_CHANGENAME)
			pvrdma_netdev_try_pair(dev, true);
		return NOTIFY_DONE;
	}
	if (ndev != dev->netdev)
		return NOTIFY_DONE;

	switch (event) {
	case NETDEV_UP:
		pvrdma_port_up(dev);
		break;
	case NETDEV_DOWN:
		pvrdma_port_event(dev, IB_EVENT_PORT_ERR);
		break;
	case NETDEV_UNREGISTER:
		pvrdma_netdev_unpair(dev);
		break;
	default:
		break;
	}
	return NOTIFY_DONE;
}

/* -------------------------------------------------------------------- */
/* IB device registration */

static void pvrdma_ib_device_remove(struct pvrdma_dev *dev)
{
	unregister_netdevice_notifier(&dev->netdev_nb);
	cancel_work_sync(&dev->rescan_work);

	/* No event may reach the IB core from now on. */
	WRITE_ONCE(dev->ib_active, false);
	synchronize_irq(pci_irq_vector(dev->pdev, PVRDMA_VECTOR_ASYNC));

	ib_unregister_device(&dev->ibdev);

	rtnl_lock();
	if (dev->netdev)
		pvrdma_netdev_unpair(dev);
	rtnl_unlock();
}

static int pvrdma_ib_device_add(struct pvrdma_dev *dev)
{
	struct ib_device *ibdev = &dev->ibdev;
	int ret;

	ibdev->node_type = RDMA_NODE_IB_CA;
	ibdev->phys_port_cnt = PVRDMA_PORT;
	ibdev->num_comp_vectors = 1;
	ibdev->dev.parent = &dev->pdev->dev;
	/* Already big-endian in the DSR (spec §3). */
	ibdev->node_guid = (__force __be64)dev->caps.node_guid;
	ib_set_device_ops(ibdev, &pvrdma_dev_ops);
	if (dev->caps.max_srq)
		ib_set_device_ops(ibdev, &pvrdma_dev_srq_ops);
	if (dev->caps.ex_comp_mask & PVRDMA_EX_CAP_MW)
		ib_set_device_ops(ibdev, &pvrdma_dev_mw_ops);
	if (dev->caps.ex_comp_mask & PVRDMA_EX_CAP_MCAST)
		ib_set_device_ops(ibdev, &pvrdma_dev_mcast_ops);
	if (dev->caps.ex_comp_mask & PVRDMA_EX_CAP_COUNTERS)
		ib_set_device_ops(ibdev, &pvrdma_dev_counter_ops);
	if (pvrdma_has_xrc(dev))
		ib_set_device_ops(ibdev, &pvrdma_dev_xrc_ops);

	/* Pair first, so that registration builds the GID table from it. */
	rtnl_lock();
	pvrdma_netdev_try_pair(dev, false);
	rtnl_unlock();

	ret = ib_register_device(ibdev, "pvrdma%d", &dev->pdev->dev);
	if (ret) {
		dev_err(&dev->pdev->dev, "cannot register IB device: %d\n",
			ret);
		goto err_unpair;
	}
	WRITE_ONCE(dev->ib_active, true);

	/*
	 * Registering the notifier replays NETDEV_REGISTER and NETDEV_UP for
	 * existing netdevs: an unpaired device pairs now, an up one goes
	 * active.
	 */
	dev->netdev_nb.notifier_call = pvrdma_netdev_event;
	ret = register_netdevice_notifier(&dev->netdev_nb);
	if (ret) {
		dev_err(&dev->pdev->dev,
			"cannot register netdevice notifier: %d\n", ret);
		goto err_unregister_ibdev;
	}

	/* The paired netdev may have gone before the notifier was there. */
	rtnl_lock();
	if (dev->netdev && dev->netdev->reg_state != NETREG_REGISTERED)
		pvrdma_netdev_unpair(dev);
	if (!dev->netdev)
		pvrdma_netdev_try_pair(dev, true);
	if (!dev->netdev)
		dev_info(&dev->pdev->dev,
			 "no net_device paired yet; the port has no GIDs until one registers\n");
	rtnl_unlock();
	return 0;

err_unregister_ibdev:
	WRITE_ONCE(dev->ib_active, false);
	synchronize_irq(pci_irq_vector(dev->pdev, PVRDMA_VECTOR_ASYNC));
	ib_unregister_device(ibdev);
err_unpair:
	rtnl_lock();
	if (dev->netdev)
		pvrdma_netdev_unpair(dev);
	rtnl_unlock();
	return ret;
}

/* -------------------------------------------------------------------- */
/* PCI */

static int pvrdma_check_bars(struct pci_dev *pdev)
{
	static const int bars[] = { PVRDMA_BAR_MSIX, PVRDMA_BAR_REG,
				    PVRDMA_BAR_UAR };
	int i;

	for (i = 0; i < ARRAY_SIZE(bars); i++) {
		if (!(pci_resource_flags(pdev, bars[i]) & IORESOURCE_MEM)) {
			dev_err(&pdev->dev, "BAR%d is not a memory BAR\n",
				bars[i]);
			return -ENODEV;
		}
	}
	if (pci_resource_len(pdev, PVRDMA_BAR_REG) <
	    PVRDMA_REG_COUNT * sizeof(u32)) {
		dev_err(&pdev->dev, "register BAR too small\n");
		return -ENODEV;
	}
	if (pci_resource_len(pdev, PVRDMA_BAR_UAR) < PVRDMA_UAR_PAGE_SIZE) {
		dev_err(&pdev->dev, "UAR BAR too small\n");
		return -ENODEV;
	}
	return 0;
}

static struct pci_dev *pvrdma_get_fn0(struct pci_dev *pdev)
{
	if (PCI_FUNC(pdev->devfn) == 0)
		return NULL;
	return pci_get_slot(pdev->bus, PCI_DEVFN(PCI_SLOT(pdev->devfn), 0));
}

static int pvrdma_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct pvrdma_port_attr port;
	struct pvrdma_dev *dev;
	int ret;

	dev = ib_alloc_device(pvrdma_dev, ibdev);
	if (!dev)
		return -ENOMEM;
	dev->pdev = pdev;
	pci_set_drvdata(pdev, dev);
	mutex_init(&dev->cmd_lock);
	init_completion(&dev->cmd_done);
	spin_lock_init(&dev->uar_lock);
	mutex_init(&dev->gid_lock);
	mutex_init(&dev->qp_handle_lock);
	spin_lock_init(&dev->tbl_lock);
	INIT_WORK(&dev->rescan_work, pvrdma_rescan_work);
	spin_lock_init(&dev->netdev_lock);
	dev->fn0 = pvrdma_get_fn0(pdev);

	ret = pci_enable_device(pdev);
	if (ret) {
		dev_err(&pdev->dev, "cannot enable PCI device: %d\n", ret);
		goto err_dealloc_device;
	}

	ret = pvrdma_check_bars(pdev);
	if (ret)
		goto err_disable_device;

	ret = pci_request_regions(pdev, PVRDMA_DRV_NAME);
	if (ret) {
		dev_err(&pdev->dev, "cannot request PCI regions: %d\n", ret);
		goto err_disable_device;
	}

	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret) {
		dev_err(&pdev->dev, "no usable 64-bit DMA: %d\n", ret);
		goto err_release_regions;
	}
	dma_set_max_seg_size(&pdev->dev, UINT_MAX);
	pci_set_master(pdev);

	ret = -ENOMEM;
	dev->regs = pci_iomap(pdev, PVRDMA_BAR_REG, 0);
	if (!dev->regs) {
		dev_err(&pdev->dev, "cannot map the register BAR\n");
		goto err_clear_master;
	}
	dev->uar_start = pci_resource_start(pdev, PVRDMA_BAR_UAR);
	dev->kernel_uar = pci_iomap(pdev, PVRDMA_BAR_UAR, PVRDMA_UAR_PAGE_SIZE);
	if (!dev->kernel_uar) {
		dev_err(&pdev->dev, "cannot map the kernel UAR page\n");
		goto err_unmap_regs;
	}

	dev->version = pvrdma_reg_read(dev, PVRDMA_REG_VERSION);
	if (dev->version < PVRDMA_MIN_DEVICE_VERSION ||
	    dev->version == U32_MAX) {
		dev_err(&pdev->dev, "unsupported interface version %u (need >= %u)\n",
			dev->version, PVRDMA_MIN_DEVICE_VERSION);
		ret = -ENODEV;
		goto err_unmap_uar;
	}

	ret = pvrdma_alloc_shared(dev);
	if (ret)
		goto err_unmap_uar;

	pvrdma_load_dsr(dev);
	ret = pvrdma_check_caps(dev);
	if (ret)
		goto err_reset_device;

	ret = pvrdma_alloc_tables(dev);
	if (ret)
		goto err_reset_device;

	ret = pvrdma_init_irqs(dev);
	if (ret)
		goto err_free_tables;

	/* Unmask all interrupts, then start the device (spec §10.1). */
	pvrdma_reg_write(dev, PVRDMA_REG_IMR, 0);
	ret = pvrdma_dev_ctl(dev, PVRDMA_DEVICE_CTL_ACTIVATE);
	if (ret) {
		dev_err(&pdev->dev, "device activation failed\n");
		goto err_mask_irqs;
	}

	ret = pvrdma_query_port_attr(dev, &port);
	if (ret) {
		dev_err(&pdev->dev, "QUERY_PORT failed: %d\n", ret);
		goto err_mask_irqs;
	}
	if (!port.gid_tbl_len || port.gid_tbl_len > dev->caps.gid_tbl_len) {
		dev_err(&pdev->dev, "port gid_tbl_len %u outside 1..%u (caps)\n",
			port.gid_tbl_len, dev->caps.gid_tbl_len);
		ret = -EINVAL;
		goto err_mask_irqs;
	}

	ret = pvrdma_ib_device_add(dev);
	if (ret)
		goto err_mask_irqs;

	dev_info(&pdev->dev, "%s: interface version %u, fw %llu.%llu.%llu, %s\n",
		 dev_name(&dev->ibdev.dev), dev->version,
		 dev->caps.fw_ver >> 32, (dev->caps.fw_ver >> 16) & 0xffff,
		 dev->caps.fw_ver & 0xffff,
		 dev->caps.gid_types == PVRDMA_GID_TYPE_FLAG_ROCE_V2 ?
		 "RoCE v2" : "RoCE v1");
	return 0;

err_mask_irqs:
	pvrdma_reg_write(dev, PVRDMA_REG_IMR, ~0U);
	pvrdma_free_irqs(dev, PVRDMA_NUM_VECTORS);
err_free_tables:
	pvrdma_free_tables(dev);
err_reset_device:
	/* The device has mapped the DSR: stop it before freeing memory. */
	pvrdma_dev_ctl(dev, PVRDMA_DEVICE_CTL_RESET);
	pvrdma_free_shared(dev);
err_unmap_uar:
	pci_iounmap(pdev, dev->kernel_uar);
err_unmap_regs:
	pci_iounmap(pdev, dev->regs);
err_clear_master:
	pci_clear_master(pdev);
err_release_regions:
	pci_release_regions(pdev);
err_disable_device:
	pci_disable_device(pdev);
err_dealloc_device:
	pci_dev_put(dev->fn0);
	ib_dealloc_device(&dev->ibdev);
	return ret;
}

/*
 * After unregistering, the RDMA core has destroyed every object: a count
 * left over is an object the driver lost track of (a bug worth a line in
 * the log; the device frees its side at the reset that follows).
 */
static void pvrdma_check_leaks(struct pvrdma_dev *dev)
{
	const struct {
		const char *name;
		atomic_t *count;
	} objs[] = {
		{ "PDs", &dev->num_pds }, { "CQs", &dev->num_cqs },
		{ "MRs", &dev->num_mrs }, { "QPs", &dev->num_qps },
		{ "SRQs", &dev->num_srqs }, { "AHs", &dev->num_ahs },
		{ "XRC domains", &dev->num_xrcds },
	};
	int i, n;

	for (i = 0; i < ARRAY_SIZE(objs); i++) {
		n = atomic_read(objs[i].count);
		if (n)
			dev_err(&dev->pdev->dev, "%d %s left at removal\n", n,
				objs[i].name);
	}
}

static void pvrdma_remove(struct pci_dev *pdev)
{
	struct pvrdma_dev *dev = pci_get_drvdata(pdev);

	pvrdma_ib_device_remove(dev);
	pvrdma_check_leaks(dev);

	/* spec §10.2: mask, free the vectors, reset, then free memory. */
	pvrdma_reg_write(dev, PVRDMA_REG_IMR, ~0U);
	pvrdma_free_irqs(dev, PVRDMA_NUM_VECTORS);
	pvrdma_free_tables(dev);
	pvrdma_dev_ctl(dev, PVRDMA_DEVICE_CTL_RESET);
	pvrdma_free_shared(dev);
	pci_iounmap(pdev, dev->kernel_uar);
	pci_iounmap(pdev, dev->regs);
	pci_clear_master(pdev);
	pci_release_regions(pdev);
	pci_disable_device(pdev);
	pci_dev_put(dev->fn0);
	ib_dealloc_device(&dev->ibdev);
}

/*
 * Reboot or kexec: the device must stop writing into memory the next
 * kernel will own, and stop interrupting; nothing is freed (the system
 * is going down).  The reset also ends the QPs, so that peers see this
 * side gone (RETRY_EXC_ERR) at once rather than when the next kernel's
 * driver takes the device.  Written straight to CTL: a command may hold
 * cmd_lock on another CPU.
 */
static void pvrdma_shutdown(struct pci_dev *pdev)
{
	struct pvrdma_dev *dev = pci_get_drvdata(pdev);

	if (!dev)
		return;
	pvrdma_reg_write(dev, PVRDMA_REG_IMR, ~0U);
	pvrdma_reg_write(dev, PVRDMA_REG_CTL, PVRDMA_DEVICE_CTL_RESET);
	pci_clear_master(pdev);
}

static struct pci_driver pvrdma_driver = {
	.name = PVRDMA_DRV_NAME,
	.id_table = pvrdma_pci_tbl,
	.probe = pvrdma_probe,
	.remove = pvrdma_remove,
	.shutdown = pvrdma_shutdown,
};

module_pci_driver(pvrdma_driver);
