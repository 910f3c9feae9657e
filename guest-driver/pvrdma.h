/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * PVRDMA guest driver: device, object and helper definitions.
 *
 * The device ABI (registers, DSR, commands, rings) is ../include/
 * pvrdma_dev_abi.h; the user ABI is <rdma/vmw_pvrdma-abi.h>.  Section
 * numbers ("spec §N") refer to docs/abi.md.
 */
#ifndef _PVRDMA_H_
#define _PVRDMA_H_

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/io.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/pci.h>
#include <linux/refcount.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <asm/byteorder.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>

#include "pvrdma_compat.h"
#include "pvrdma_dev_abi.h"

/*
 * The shared ABI header spells its fields as host-endian fixed-width
 * integers; the device defines them as little-endian (spec §0).
 */
#ifndef __LITTLE_ENDIAN
#error "pvrdma: the device ABI is little-endian only"
#endif

#define PVRDMA_DRV_NAME			"pvrdma"

/* The only port (spec §3 phys_port_cnt: device and driver assume one). */
#define PVRDMA_PORT			1

/* Command completion timeout (spec §5.1 step 5). */
#define PVRDMA_CMD_TIMEOUT_MS		10000

/* Oldest interface version this driver speaks (spec §5.5). */
#define PVRDMA_MIN_DEVICE_VERSION	PVRDMA_VERSION_ROCEV1

/* Pages of each DSR ring, including the ring-state page (spec §3, §6.2). */
#define PVRDMA_DSR_RING_PAGES		4

/* CREATE_BIND constants (spec §5.3). */
#define PVRDMA_BIND_MTU			1024
#define PVRDMA_BIND_VLAN_NONE		0xFFF

/* Handle spaces (spec §5.6): QP handles index 16-bit tables. */
#define PVRDMA_MAX_QP_HANDLES		65535
/* CQ/SRQ handles travel in the 24-bit doorbell handle field (spec §7). */
#define PVRDMA_MAX_DB_HANDLES		(PVRDMA_UAR_HANDLE_MASK + 1)
#define PVRDMA_MAX_PD_HANDLE		PVRDMA_UAR_HANDLE_MASK
/* Sanity bound for the SGID shadow table. */
#define PVRDMA_MAX_GID_TBL_LEN		65536

/* CQ entries per ring page. */
#define PVRDMA_CQES_PER_PAGE		(PAGE_SIZE / PVRDMA_CQE_SIZE)

/* -------------------------------------------------------------------- */
/* Page directory (spec §4) */

/**
 * struct pvrdma_pdir - two-level page directory handed to the device
 * @dir: directory page, u64 bus addresses of the page tables
 * @dir_dma: bus address of @dir (the "pdir_dma" of commands)
 * @tables: CPU addresses of the page tables
 * @ntables: number of page tables
 * @npages: number of data pages described
 * @pages: CPU addresses of the data pages when the driver owns them
 *	   (kernel rings), NULL for user memory
 */
struct pvrdma_pdir {
	u64 *dir;
	dma_addr_t dir_dma;
	u64 **tables;
	unsigned int ntables;
	unsigned int npages;
	void **pages;
};

/* -------------------------------------------------------------------- */
/* Objects */

struct pvrdma_ucontext {
	struct ib_ucontext ibucontext;
	u32 ctx_handle;
	u32 uar_index;
	unsigned long uar_pfn;
};

struct pvrdma_pd {
	struct ib_pd ibpd;
	u32 pd_handle;
};

/*
 * An XRC domain (extension PVRDMA_EX_CAP_XRC, spec §14): a device object
 * of no user context; the IB core shares it between processes.
 */
struct pvrdma_xrcd {
	struct ib_xrcd ibxrcd;
	u32 xrcd_handle;
};

/**
 * struct pvrdma_cq - completion queue
 * @ibcq: IB core object
 * @cq_handle: device handle (< caps.max_cq, spec §5.6)
 * @ncqe: ring entries, as returned by CREATE_CQ
 * @refcnt: held by the interrupt/event paths while they use the CQ
 * @free: completed when @refcnt drops to zero during destroy
 * @lock: serialises polling of a kernel CQ
 * @pdir: ring-state page then CQE pages
 * @umem: pinned user ring, NULL for kernel CQs
 * @ring_state: kernel CQ ring indices (page 0 of @pdir)
 */
struct pvrdma_cq {
	struct ib_cq ibcq;
	u32 cq_handle;
	u32 ncqe;
	refcount_t refcnt;
	struct completion free;
	spinlock_t lock;
	struct mutex resize_mutex;	/* one resize at a time */
	bool resizing;			/* kernel CQ: the device moves CQEs */
	struct pvrdma_pdir pdir;
	struct ib_umem *umem;
	struct pvrdma_ring_state *ring_state;
};

/**
 * struct pvrdma_wq - one kernel work queue (SQ, RQ or SRQ ring)
 * @lock: serialises producers of this queue
 * @ring: ring indices in the object's ring-state page
 * @wqe_cnt: ring entries, a power of two (spec §8.1)
 * @max_sge: SGEs one WQE can carry
 * @wqe_size: bytes per WQE, a power of two
 * @first_page: logical PDIR page of element 0
 */
struct pvrdma_wq {
	spinlock_t lock;
	struct pvrdma_ring *ring;
	u32 wqe_cnt;
	u32 max_sge;
	u32 wqe_size;
	u32 first_page;
};

/**
 * struct pvrdma_qp - queue pair (RC, UC, UD, GSI, XRC_INI or XRC_TGT)
 * @ibqp: IB core object
 * @qp_handle: device handle (< caps.max_qp, spec §5.6)
 * @refcnt: held by the async event path while it uses the QP
 * @free: completed when @refcnt drops to zero during destroy
 * @mutex: serialises modify/query (the cached @state)
 * @state: the QP state as last set or queried (enum ib_qp_state)
 * @qkey: Q_Key substituted in UD sends whose WR Q_Key has bit 31 set
 * @sq_sig_all: every send WR completes (IB_SIGNAL_ALL_WR)
 * @pdir: ring-state page, SQ pages, then RQ pages (spec §4); none for
 *	  an XRC_TGT QP, which has no queue
 * @sumem: pinned user SQ buffer (ring-state page first), NULL for kernel
 * @rumem: pinned user RQ buffer, NULL for kernel QPs, with an SRQ and
 *	   for XRC_INI QPs
 * @sq: kernel send queue (ring NULL for user and XRC_TGT QPs)
 * @rq: kernel receive queue (unused with an SRQ)
 * @max_send_wr: values given to CREATE_QP, reported by query_qp
 * @max_recv_wr: see @max_send_wr
 * @max_send_sge: see @max_send_wr
 * @max_recv_sge: see @max_send_wr
 */
struct pvrdma_qp {
	struct ib_qp ibqp;
	u32 qp_handle;
	refcount_t refcnt;
	struct completion free;
	struct mutex mutex;
	int state;
	u32 qkey;
	bool sq_sig_all;
	struct pvrdma_pdir pdir;
	struct ib_umem *sumem;
	struct ib_umem *rumem;
	struct pvrdma_wq sq;
	struct pvrdma_wq rq;
	u32 max_send_wr;
	u32 max_recv_wr;
	u32 max_send_sge;
	u32 max_recv_sge;
};

/**
 * struct pvrdma_srq - shared receive queue, basic or (user only) XRC
 * @ibsrq: IB core object
 * @srq_handle: device handle (< caps.max_srq)
 * @refcnt: held by the async event path while it uses the SRQ
 * @free: completed when @refcnt drops to zero during destroy
 * @pdir: ring-state page then receive WQE pages
 * @umem: pinned user ring, NULL for kernel SRQs
 * @rq: kernel receive ring
 * @max_wr: ring entries given to CREATE_SRQ (or the last resize)
 * @max_sge: SGEs per WQE given to CREATE_SRQ
 * @resize_mutex: one resize of a user SRQ at a time
 */
struct pvrdma_srq {
	struct ib_srq ibsrq;
	u32 srq_handle;
	refcount_t refcnt;
	struct completion free;
	struct pvrdma_pdir pdir;
	struct ib_umem *umem;
	struct pvrdma_wq rq;
	u32 max_wr;
	u32 max_sge;
	struct mutex resize_mutex;
};

/**
 * struct pvrdma_ah - address handle; the device has no AH object, the
 * address vector travels in every UD send WQE (spec §8.2)
 * @ibah: IB core object
 * @av: address vector copied into UD send WQEs
 */
struct pvrdma_ah {
	struct ib_ah ibah;
	struct pvrdma_av av;
};

/**
 * struct pvrdma_mr - memory region (DMA, user or fast-register)
 * @ibmr: IB core object
 * @mr_handle: device handle
 * @umem: pinned user memory, NULL otherwise
 * @pdir: user MR: its pages; fast-register MR: the page list that REG_MR
 *	  WQEs point at (spec §8.2 wr.fast_reg.pl_pdir_dma)
 * @max_pages: fast-register MR: capacity of the page list
 * @npages: fast-register MR: pages set by the last map_mr_sg
 */
struct pvrdma_mr {
	struct ib_mr ibmr;
	u32 mr_handle;
	struct ib_umem *umem;
	u64 start;		/* user MR: address, access (for rereg) */
	int access;
	struct pvrdma_pdir pdir;
	u32 max_pages;
	u32 npages;
};

/* A memory window (extension PVRDMA_EX_CAP_MW): a key-only device MR. */
struct pvrdma_mw {
	struct ib_mw ibmw;
	u32 mr_handle;
};

/* -------------------------------------------------------------------- */
/* Device */

enum pvrdma_stat {
	PVRDMA_STAT_CMD_ERR,
	PVRDMA_STAT_CMD_TIMEOUT,
	PVRDMA_STAT_CMD_BAD_RESP,
	PVRDMA_STAT_ASYNC_EVENTS,
	PVRDMA_STAT_ASYNC_BAD,
	PVRDMA_STAT_CQ_NOTIFY,
	PVRDMA_STAT_CQ_NOTIFY_BAD,
	PVRDMA_STAT_RING_BAD,
	PVRDMA_STAT_CQE_BAD,
	PVRDMA_NUM_STATS,
};

struct pvrdma_sgid {
	union ib_gid gid;
	bool valid;
};

/**
 * struct pvrdma_dev - one PVRDMA PCI function
 * @ibdev: IB core device, first so ib_alloc_device() can embed it
 * @pdev: PCI function
 * @regs: BAR1 register file
 * @kernel_uar: UAR page 0 in BAR2 (kernel doorbells)
 * @uar_start: bus address of BAR2
 * @uar_pages: UAR pages usable for contexts: min(caps.max_uar, BAR2 pages)
 * @version: VERSION register (device interface version)
 * @dsr: device shared region
 * @dsr_dma: bus address of @dsr
 * @caps: snapshot of dsr->caps taken right after the DSR load
 * @cmd_lock: one command (or control operation) at a time (spec §5.1)
 * @cmd_slot: command page
 * @cmd_slot_dma: bus address of @cmd_slot
 * @resp_slot: response page
 * @resp_slot_dma: bus address of @resp_slot
 * @cmd_done: completed by the response interrupt (vector 0)
 * @cmd_cookie: last cookie sent; the device echoes it in the response
 * @async_pdir: async event ring (spec §6.3)
 * @cqn_pdir: CQ notification ring (spec §6.4)
 * @irq_name: per-vector names for /proc/interrupts
 * @uar_lock: protects @uar_map
 * @uar_map: allocated UAR pages; bit 0 is the kernel's
 * @gid_lock: protects @sgid_tbl
 * @sgid_tbl: shadow of the device SGID table, caps.gid_tbl_len entries
 * @qp_handle_lock: a QP handle freed by DESTROY_QP is reused only after
 *		    its CQEs were purged (held around CREATE_QP and
 *		    DESTROY_QP plus the purge)
 * @tbl_lock: protects @cq_tbl, @qp_tbl and @srq_tbl
 * @cq_tbl: CQs indexed by device handle, caps.max_cq entries
 * @qp_tbl: QPs indexed by device handle, caps.max_qp entries
 * @srq_tbl: SRQs indexed by device handle, caps.max_srq entries or NULL
 * @num_pds: PDs allocated, against caps.max_pd
 * @num_xrcds: XRC domains allocated, against caps.max_pd (spec §14)
 * @num_cqs: CQs allocated, against caps.max_cq
 * @num_mrs: MRs allocated, against caps.max_mr
 * @num_qps: QPs allocated, against caps.max_qp
 * @num_srqs: SRQs allocated, against caps.max_srq
 * @num_ahs: AHs allocated, against caps.max_ah
 * @ib_active: the IB device is registered; events may be dispatched
 * @fn0: PCI function 0 of our slot, if that is another function
 * @netdev_lock: taken to change @netdev, and by readers without RTNL
 * @netdev: paired net_device (changed under RTNL and @netdev_lock),
 *          referenced while paired
 * @netdev_nb: netdevice notifier
 * @rescan_work: asks the IB core to rebuild GIDs after a late pairing
 * @stats: error and event counters (rdma_hw_stats)
 */
struct pvrdma_dev {
	struct ib_device ibdev;
	struct pci_dev *pdev;
	void __iomem *regs;
	void __iomem *kernel_uar;
	resource_size_t uar_start;
	u32 uar_pages;
	u32 version;

	struct pvrdma_device_shared_region *dsr;
	dma_addr_t dsr_dma;
	struct pvrdma_device_caps caps;

	struct mutex cmd_lock;
	void *cmd_slot;
	dma_addr_t cmd_slot_dma;
	void *resp_slot;
	dma_addr_t resp_slot_dma;
	struct completion cmd_done;
	u64 cmd_cookie;

	struct pvrdma_pdir async_pdir;
	struct pvrdma_pdir cqn_pdir;

	char irq_name[PVRDMA_NUM_VECTORS][32];

	spinlock_t uar_lock;
	unsigned long *uar_map;

	struct mutex gid_lock;
	struct pvrdma_sgid *sgid_tbl;

	struct mutex qp_handle_lock;
	spinlock_t tbl_lock;
	struct pvrdma_cq **cq_tbl;
	struct pvrdma_qp **qp_tbl;
	struct pvrdma_srq **srq_tbl;

	atomic_t num_pds;
	atomic_t num_xrcds;
	atomic_t num_cqs;
	atomic_t num_mrs;
	atomic_t num_qps;
	atomic_t num_srqs;
	atomic_t num_ahs;

	bool ib_active;

	struct pci_dev *fn0;
	spinlock_t netdev_lock;
	struct net_device *netdev;
	struct notifier_block netdev_nb;
	struct work_struct rescan_work;

	atomic64_t stats[PVRDMA_NUM_STATS];
};

static inline struct pvrdma_dev *to_pvdev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct pvrdma_dev, ibdev);
}

static inline struct pvrdma_ucontext *to_puctx(struct ib_ucontext *ibuctx)
{
	return container_of(ibuctx, struct pvrdma_ucontext, ibucontext);
}

static inline struct pvrdma_pd *to_ppd(struct ib_pd *ibpd)
{
	return container_of(ibpd, struct pvrdma_pd, ibpd);
}

static inline struct pvrdma_xrcd *to_pxrcd(struct ib_xrcd *ibxrcd)
{
	return container_of(ibxrcd, struct pvrdma_xrcd, ibxrcd);
}

static inline struct pvrdma_cq *to_pcq(struct ib_cq *ibcq)
{
	return container_of(ibcq, struct pvrdma_cq, ibcq);
}

static inline struct pvrdma_mr *to_pmr(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct pvrdma_mr, ibmr);
}

static inline struct pvrdma_mw *to_pmw(struct ib_mw *ibmw)
{
	return container_of(ibmw, struct pvrdma_mw, ibmw);
}

static inline struct pvrdma_qp *to_pqp(struct ib_qp *ibqp)
{
	return container_of(ibqp, struct pvrdma_qp, ibqp);
}

static inline struct pvrdma_srq *to_psrq(struct ib_srq *ibsrq)
{
	return container_of(ibsrq, struct pvrdma_srq, ibsrq);
}

static inline struct pvrdma_ah *to_pah(struct ib_ah *ibah)
{
	return container_of(ibah, struct pvrdma_ah, ibah);
}

/*
 * XRC (extension PVRDMA_EX_CAP_XRC, spec §14): its receives go to SRQs,
 * so a device without SRQs has no use for it.
 */
static inline bool pvrdma_has_xrc(const struct pvrdma_dev *dev)
{
	return (dev->caps.ex_comp_mask & PVRDMA_EX_CAP_XRC) &&
	       dev->caps.max_srq;
}

static inline void pvrdma_stat_inc(struct pvrdma_dev *dev, enum pvrdma_stat s)
{
	atomic64_inc(&dev->stats[s]);
}

/* Registers: 32-bit little-endian MMIO only (spec §2). */
static inline u32 pvrdma_reg_read(struct pvrdma_dev *dev, u32 reg)
{
	return readl(dev->regs + reg);
}

static inline void pvrdma_reg_write(struct pvrdma_dev *dev, u32 reg, u32 val)
{
	writel(val, dev->regs + reg);
}

/*
 * Kernel doorbells (spec §7): one 32-bit store to UAR page 0.  writel()
 * orders the ring and index stores before it.  The uapi header spells
 * bit 31 as (1 << 31), hence the u32 conversions at the call sites.
 */
static inline void pvrdma_db_write(struct pvrdma_dev *dev, u32 offset, u32 val)
{
	writel(val, dev->kernel_uar + offset);
}

/*
 * Copy a provider's request in: at least @min_size bytes (up to the last
 * mandatory field), any tail beyond @size zero.  Fields a shorter request
 * does not carry keep the caller's (zero) initialisation.
 */
static inline int pvrdma_udata_copy_in(struct ib_udata *udata, void *req,
				       size_t size, size_t min_size)
{
	if (udata->inlen < min_size)
		return -EINVAL;
	if (udata->inlen > size &&
	    !ib_is_udata_cleared(udata, size, udata->inlen - size))
		return -EINVAL;
	return ib_copy_from_udata(req, udata, min(udata->inlen, size));
}

/* -------------------------------------------------------------------- */
/* Logging: debug per object over ibdev_dbg, errors rate-limited */

#define pvrdma_dbg(dev, fmt, ...)					\
	ibdev_dbg(&(dev)->ibdev, "%s: " fmt, __func__, ##__VA_ARGS__)
#define pvrdma_err(dev, fmt, ...)					\
	ibdev_err_ratelimited(&(dev)->ibdev, "%s: " fmt, __func__,	\
			      ##__VA_ARGS__)

#define pvrdma_dbg_uctx(uctx, fmt, ...)					\
	ibdev_dbg((uctx)->ibucontext.device, "uctx#%u %s: " fmt,	\
		  (uctx)->ctx_handle, __func__, ##__VA_ARGS__)
#define pvrdma_err_uctx(uctx, fmt, ...)					\
	ibdev_err_ratelimited((uctx)->ibucontext.device,		\
			      "uctx#%u %s: " fmt, (uctx)->ctx_handle,	\
			      __func__, ##__VA_ARGS__)

#define pvrdma_dbg_pd(pd, fmt, ...)					\
	ibdev_dbg((pd)->ibpd.device, "pd#%u %s: " fmt, (pd)->pd_handle,	\
		  __func__, ##__VA_ARGS__)
#define pvrdma_err_pd(pd, fmt, ...)					\
	ibdev_err_ratelimited((pd)->ibpd.device, "pd#%u %s: " fmt,	\
			      (pd)->pd_handle, __func__, ##__VA_ARGS__)

#define pvrdma_dbg_cq(cq, fmt, ...)					\
	ibdev_dbg((cq)->ibcq.device, "cq#%u %s: " fmt, (cq)->cq_handle,	\
		  __func__, ##__VA_ARGS__)
#define pvrdma_err_cq(cq, fmt, ...)					\
	ibdev_err_ratelimited((cq)->ibcq.device, "cq#%u %s: " fmt,	\
			      (cq)->cq_handle, __func__, ##__VA_ARGS__)

#define pvrdma_dbg_mr(mr, fmt, ...)					\
	ibdev_dbg((mr)->ibmr.device, "mr#%u %s: " fmt, (mr)->mr_handle,	\
		  __func__, ##__VA_ARGS__)
#define pvrdma_err_mr(mr, fmt, ...)					\
	ibdev_err_ratelimited((mr)->ibmr.device, "mr#%u %s: " fmt,	\
			      (mr)->mr_handle, __func__, ##__VA_ARGS__)

#define pvrdma_dbg_qp(qp, fmt, ...)					\
	ibdev_dbg((qp)->ibqp.device, "qp#%u %s: " fmt, (qp)->qp_handle,	\
		  __func__, ##__VA_ARGS__)
#define pvrdma_err_qp(qp, fmt, ...)					\
	ibdev_err_ratelimited((qp)->ibqp.device, "qp#%u %s: " fmt,	\
			      (qp)->qp_handle, __func__, ##__VA_ARGS__)

#define pvrdma_dbg_srq(srq, fmt, ...)					\
	ibdev_dbg((srq)->ibsrq.device, "srq#%u %s: " fmt,		\
		  (srq)->srq_handle, __func__, ##__VA_ARGS__)
#define pvrdma_err_srq(srq, fmt, ...)					\
	ibdev_err_ratelimited((srq)->ibsrq.device, "srq#%u %s: " fmt,	\
			      (srq)->srq_handle, __func__, ##__VA_ARGS__)

/* -------------------------------------------------------------------- */
/* pvrdma_cmd.c */

int pvrdma_cmd_post(struct pvrdma_dev *dev, union pvrdma_cmd_req *req,
		    union pvrdma_cmd_resp *resp);
int pvrdma_dev_ctl(struct pvrdma_dev *dev, u32 ctl);
void pvrdma_cmd_irq_complete(struct pvrdma_dev *dev);

/* pvrdma_pdir.c */

int pvrdma_pdir_init(struct pvrdma_dev *dev, struct pvrdma_pdir *pdir,
		     unsigned int npages, bool alloc_pages);
void pvrdma_pdir_cleanup(struct pvrdma_dev *dev, struct pvrdma_pdir *pdir);
void pvrdma_pdir_set_page(struct pvrdma_pdir *pdir, unsigned int idx,
			  dma_addr_t dma);
int pvrdma_pdir_pin_user_ring(struct pvrdma_dev *dev, struct ib_udata *udata,
			      size_t ring_bytes, struct ib_umem **umem,
			      struct pvrdma_pdir *pdir);
void pvrdma_umem_mark_dead(struct pvrdma_dev *dev, struct ib_umem *umem,
			   unsigned int offset);
int pvrdma_pdir_insert_umem(struct pvrdma_pdir *pdir, struct ib_umem *umem,
			    unsigned int first);
void *pvrdma_pdir_elem(struct pvrdma_pdir *pdir, unsigned int first_page,
		       u32 slot, size_t elem_size);

/* pvrdma_verbs.c */

extern const struct ib_device_ops pvrdma_dev_ops;
extern const struct ib_device_ops pvrdma_dev_srq_ops;
extern const struct ib_device_ops pvrdma_dev_mw_ops;
extern const struct ib_device_ops pvrdma_dev_mcast_ops;
extern const struct ib_device_ops pvrdma_dev_counter_ops;
extern const struct ib_device_ops pvrdma_dev_xrc_ops;
int pvrdma_query_port_attr(struct pvrdma_dev *dev,
			   struct pvrdma_port_attr *attr);

/* pvrdma_cq.c */

int pvrdma_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		     struct ib_udata *udata);
int pvrdma_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int pvrdma_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata);
void pvrdma_cq_notify(struct pvrdma_dev *dev, u32 cq_handle);
void pvrdma_cq_event(struct pvrdma_dev *dev, u32 cq_handle,
		     enum ib_event_type type);
int pvrdma_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc);
int pvrdma_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
void pvrdma_cq_purge_qp(struct pvrdma_cq *cq, u32 qp_handle);

/* pvrdma_qp.c */

int pvrdma_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		     struct ib_udata *udata);
int pvrdma_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
		     int attr_mask, struct ib_udata *udata);
int pvrdma_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
		    int attr_mask, struct ib_qp_init_attr *init);
int pvrdma_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
int pvrdma_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		     const struct ib_send_wr **bad_wr);
int pvrdma_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		     const struct ib_recv_wr **bad_wr);
int pvrdma_wq_size_kernel(struct pvrdma_wq *wq, u32 max_wr, u32 max_sge,
			  u32 hdr_size, u32 cap_wr, u32 cap_sge);
u32 pvrdma_wq_pages(const struct pvrdma_wq *wq);
int pvrdma_wq_post_recv(struct pvrdma_wq *wq, struct pvrdma_pdir *pdir,
			const struct ib_recv_wr *wr,
			const struct ib_recv_wr **bad_wr, unsigned int *posted);

/* pvrdma_srq.c */

int pvrdma_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		      struct ib_udata *udata);
int pvrdma_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		      enum ib_srq_attr_mask attr_mask, struct ib_udata *udata);
int pvrdma_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int pvrdma_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);
int pvrdma_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad_wr);

/* pvrdma_ah.c */

int pvrdma_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init,
		     struct ib_udata *udata);
int pvrdma_destroy_ah(struct ib_ah *ibah, u32 flags);

/* pvrdma_mr.c */

struct ib_mr *pvrdma_get_dma_mr(struct ib_pd *ibpd, int access_flags);
struct ib_mr *pvrdma_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start,
				   u64 length, u64 virt_addr, int access_flags,
				   struct ib_pd *ibpd, struct ib_udata *udata);
struct ib_mr *pvrdma_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				 u64 virt_addr, int access_flags,
				 struct ib_udata *udata);
int pvrdma_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);
struct ib_mr *pvrdma_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type mr_type,
			      u32 max_num_sg);
int pvrdma_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		     unsigned int *sg_offset);
int pvrdma_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata);
int pvrdma_dealloc_mw(struct ib_mw *ibmw);

#endif /* _PVRDMA_H_ */
