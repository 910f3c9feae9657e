/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * PVRDMA guest driver: device, object and helper definitions.
 *
 * The device ABI (registers, DSR, commands, rings) is ../include/
 * pvrdma_dev_abi.h; the user ABI is <rdma/vmw_pvrdma-abi.h>.  Section
 * numbers ("spec §N") refer to shared/spec/pvrdma-abi.md.
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
	struct pvrdma_pdir pdir;
	struct ib_umem *umem;
	struct pvrdma_ring_state *ring_state;
};

/*
 * QPs and SRQs are not created by this version of the driver yet; the
 * structures exist so the device tables and event dispatch are in place.
 */
struct pvrdma_qp {
	struct ib_qp ibqp;
	u32 qp_handle;
	refcount_t refcnt;
	struct completion free;
};

struct pvrdma_srq {
	struct ib_srq ibsrq;
	u32 srq_handle;
	refcount_t refcnt;
	struct completion free;
};

struct pvrdma_mr {
	struct ib_mr ibmr;
	u32 mr_handle;
	struct ib_umem *umem;
	struct pvrdma_pdir pdir;
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
 * @tbl_lock: protects @cq_tbl, @qp_tbl and @srq_tbl
 * @cq_tbl: CQs indexed by device handle, caps.max_cq entries
 * @qp_tbl: QPs indexed by device handle, caps.max_qp entries
 * @srq_tbl: SRQs indexed by device handle, caps.max_srq entries or NULL
 * @num_pds: PDs allocated, against caps.max_pd
 * @num_cqs: CQs allocated, against caps.max_cq
 * @num_mrs: MRs allocated, against caps.max_mr
 * @ib_active: the IB device is registered; events may be dispatched
 * @fn0: PCI function 0 of our slot, if that is another function
 * @netdev: paired net_device (RTNL), referenced while paired
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

	spinlock_t tbl_lock;
	struct pvrdma_cq **cq_tbl;
	struct pvrdma_qp **qp_tbl;
	struct pvrdma_srq **srq_tbl;

	atomic_t num_pds;
	atomic_t num_cqs;
	atomic_t num_mrs;

	bool ib_active;

	struct pci_dev *fn0;
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

static inline struct pvrdma_cq *to_pcq(struct ib_cq *ibcq)
{
	return container_of(ibcq, struct pvrdma_cq, ibcq);
}

static inline struct pvrdma_mr *to_pmr(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct pvrdma_mr, ibmr);
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
int pvrdma_pdir_insert_umem(struct pvrdma_pdir *pdir, struct ib_umem *umem,
			    unsigned int first);
void *pvrdma_pdir_elem(struct pvrdma_pdir *pdir, unsigned int first_page,
		       u32 slot, size_t elem_size);

/* pvrdma_verbs.c */

extern const struct ib_device_ops pvrdma_dev_ops;
int pvrdma_query_port_attr(struct pvrdma_dev *dev,
			   struct pvrdma_port_attr *attr);

/* pvrdma_cq.c */

int pvrdma_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		     struct ib_udata *udata);
int pvrdma_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
void pvrdma_cq_notify(struct pvrdma_dev *dev, u32 cq_handle);
void pvrdma_cq_event(struct pvrdma_dev *dev, u32 cq_handle,
		     enum ib_event_type type);

/* pvrdma_mr.c */

struct ib_mr *pvrdma_get_dma_mr(struct ib_pd *ibpd, int access_flags);
struct ib_mr *pvrdma_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				 u64 virt_addr, int access_flags,
				 struct ib_udata *udata);
int pvrdma_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);

#endif /* _PVRDMA_H_ */
