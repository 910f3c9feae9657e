/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * rdma-core provider for the PVRDMA paravirtual RDMA device
 * (PCI 15ad:0820, device interface version 20).
 *
 * Facts are cited from docs/abi.md as "spec §N".
 */
#ifndef __PVRDMA_H__
#define __PVRDMA_H__

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <infiniband/driver.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <util/mmio.h>
#include <util/udma_barrier.h>

#include "pvrdma-abi.h"
#include "pvrdma_dev_abi.h"
#include "pvrdma_ring.h"

/*
 * rdma-core compatibility, keyed on the tree's provider ABI
 * (IBVERBS_PABI_VERSION, passed as PVRDMA_IBV_PABI by CMakeLists.txt).
 * ABI 34 covers rdma-core 44.0 (Debian 12) to 56.1 (Debian 13), which
 * share the provider structs; only 56.1 is build-tested, its 44.0 source
 * being unavailable here. ABI 65 (rdma-core 65.0, sid):
 * ibv_cmd_get_context() takes a struct ibv_fd_arr * before the response,
 * for file descriptors passed to the kernel; ibv_cmd_create_cq_ex() takes
 * a struct verbs_create_cq_prov_attr * after the attributes, for
 * provider-chosen CQ memory. We pass NULL to both (none, default).
 */
#ifndef PVRDMA_IBV_PABI
#error "PVRDMA_IBV_PABI undefined: build inside rdma-core (providers/pvrdma)"
#endif
#if PVRDMA_IBV_PABI >= 65
#define pvrdma_cmd_get_context(ctx, cmd, cmd_size, resp, resp_size) \
	ibv_cmd_get_context(ctx, cmd, cmd_size, NULL, resp, resp_size)
#define pvrdma_cmd_create_cq_ex(ctx, attr, vcq, cmd, cmd_size, resp,	\
				resp_size, flags)			\
	ibv_cmd_create_cq_ex(ctx, attr, NULL, vcq, cmd, cmd_size, resp,	\
			     resp_size, flags)
#else
#define pvrdma_cmd_get_context(ctx, cmd, cmd_size, resp, resp_size) \
	ibv_cmd_get_context(ctx, cmd, cmd_size, resp, resp_size)
#define pvrdma_cmd_create_cq_ex(ctx, attr, vcq, cmd, cmd_size, resp,	\
				resp_size, flags)			\
	ibv_cmd_create_cq_ex(ctx, attr, vcq, cmd, cmd_size, resp,	\
			     resp_size, flags)
#endif

/*
 * The device and the kernel index QPs found in CQEs by the low 16 bits of
 * the QP handle (spec §8.4, §9).
 */
#define PVRDMA_QP_TABLE_INDEX_MASK	0xFFFFu
#define PVRDMA_QP_TABLE_MAX		(PVRDMA_QP_TABLE_INDEX_MASK + 1)

/* QP numbers have 24 bits (IBA 9.2). */
#define PVRDMA_QPN_MASK			0xFFFFFFu

struct pvrdma_device {
	struct verbs_device ibvdev;
	size_t pg_sz;
};

struct pvrdma_context {
	struct verbs_context ibvctx;
	/* This context's UAR (doorbell) page, mapped write-only (spec §7). */
	void *uar;
	size_t uar_size;
	/* QP lookup by qp_handle & 0xFFFF for poll_cq (spec §9). */
	pthread_spinlock_t qp_table_lock;
	struct pvrdma_qp **qp_table;
	uint32_t qp_table_size;
	/* Ring CQ_POLL on every n-th empty poll; 0: never (cq.c). */
	uint32_t cq_poll_every;
	bool db_mov;		/* PVRDMA_DB_MOV: plain doorbell stores */
	/* The device has memory windows (BIND_MW work requests). */
	bool has_mw;
	/* The device writes its clock into CQEs of CQs that ask. */
	bool has_cqe_ts;
	bool rq_db_hint;		/* PVRDMA_UCTX_RQ_DB_HINT */
	bool sq_db_hint;		/* PVRDMA_UCTX_SQ_DB_HINT */
	/* The device clock reads from the UAR page (mapped readable too). */
	bool has_clock;			/* PVRDMA_UCTX_CLOCK */
	bool has_atomic_write;		/* PVRDMA_UCTX_ATOMIC_WRITE */
	bool has_xrc;			/* PVRDMA_UCTX_XRC */
};

/*
 * The lock of a CQ or work queue, skipped when one thread uses the object
 * (a thread domain's QPs and SRQs, CQs of a parent domain with a thread
 * domain or created IBV_CREATE_CQ_ATTR_SINGLE_THREADED).
 */
struct pvrdma_lock {
	pthread_spinlock_t lock;
	bool need;
};

static inline int pvrdma_lock_init(struct pvrdma_lock *l, bool need)
{
	l->need = need;
	return pthread_spin_init(&l->lock, PTHREAD_PROCESS_PRIVATE);
}

static inline void pvrdma_lock(struct pvrdma_lock *l)
{
	if (l->need)
		pthread_spin_lock(&l->lock);
}

static inline void pvrdma_unlock(struct pvrdma_lock *l)
{
	if (l->need)
		pthread_spin_unlock(&l->lock);
}

static inline void pvrdma_lock_destroy(struct pvrdma_lock *l)
{
	pthread_spin_destroy(&l->lock);
}

/*
 * A thread domain (ibv_alloc_td): a promise that the QPs, SRQs and CQs of
 * a parent domain holding it are used by one thread at a time, so their
 * locks are skipped. Doorbells need no lock (one 32-bit store each).
 */
struct pvrdma_td {
	struct ibv_td ibvtd;
	atomic_int refcount;		/* 1 + parent domains holding it */
};

/*
 * A PD, or a parent domain (ibv_alloc_parent_domain): a provider object
 * that stands for its PD in every verb (same kernel handle) and adds a
 * thread domain and the application's allocator for the queue buffers.
 * refcount: 1 + the parent domains of a PD; 1 + the CQs, QPs and SRQs of
 * a parent domain. Deallocating either while others count it is EBUSY.
 */
struct pvrdma_pd {
	struct ibv_pd ibvpd;
	uint32_t pdn;
	atomic_int refcount;
	struct pvrdma_pd *protection_domain;	/* NULL: a PD */
	struct pvrdma_td *td;
	void *(*alloc)(struct ibv_pd *pd, void *pd_context, size_t size,
		       size_t alignment, uint64_t resource_type);
	void (*free)(struct ibv_pd *pd, void *pd_context, void *ptr,
		     uint64_t resource_type);
	void *pd_context;
};

/*
 * The resource_type a parent domain's allocator is called with, one per
 * queue buffer (docs/architecture.md, "The guest side"): the ring of a CQ, of a QP's send queue
 * (with the ring-state page), of its receive queue, of an SRQ, and a QP's
 * inline-data buffer. The driver id in the high 32 bits, as mlx5dv does.
 */
#define PVRDMA_RES_TYPE(n)	((uint64_t)RDMA_DRIVER_VMW_PVRDMA << 32 | (n))
#define PVRDMA_RES_TYPE_CQ	PVRDMA_RES_TYPE(1)
#define PVRDMA_RES_TYPE_SQ	PVRDMA_RES_TYPE(2)
#define PVRDMA_RES_TYPE_RQ	PVRDMA_RES_TYPE(3)
#define PVRDMA_RES_TYPE_SRQ	PVRDMA_RES_TYPE(4)
#define PVRDMA_RES_TYPE_INLINE	PVRDMA_RES_TYPE(5)

/*
 * Memory shared with the device: page aligned, zeroed when handed out,
 * kept out of fork() children. From the parent domain's allocator where
 * it has one (pad then says whose, for the free), else an anonymous
 * mapping of the provider's own.
 */
struct pvrdma_buf {
	void *addr;			/* NULL: none */
	size_t size;
	struct pvrdma_pd *pad;
	uint64_t type;
};

/*
 * A CQ lives in user memory (spec §8.1): page 0 holds the ring state (the
 * CQ uses .rx at offset 8), CQEs of 64 bytes follow from page 1. The device
 * produces, poll_cq consumes under the CQ lock.
 */
struct pvrdma_cq {
	struct verbs_cq vcq;		/* ibv_cq, or ibv_cq_ex when extended */
	struct pvrdma_lock lock;
	struct pvrdma_buf buf;
	struct pvrdma_pd *pad;		/* parent domain, or NULL */
	struct pvrdma_ring *ring;
	struct pvrdma_cqe *cqes;
	uint32_t nelems;		/* power of two, from the kernel */
	uint32_t cqn;			/* device CQ handle */
	uint32_t empty_polls;		/* in a row; paces CQ_POLL */
	/*
	 * ibv_start_poll .. ibv_end_poll (under lock): the CQE taken last,
	 * copied out of the ring, and its QP (NULL for a receive of an XRC
	 * SRQ); the ibv_wc_read_* calls read it.
	 */
	struct pvrdma_cqe cur;
	struct pvrdma_qp *cur_qp;
	/*
	 * Wall-clock timestamps: the device clock's reading @dev against
	 * CLOCK_REALTIME @real, both ns, from the CQ's creation on (cq.c).
	 */
	struct {
		uint64_t dev;
		int64_t real;
	} cal;
};

/*
 * A work queue in user memory (spec §8.1): the SQ or RQ of a QP, or an SRQ.
 * nelems WQEs of wqe_size bytes each; the indices are a struct pvrdma_ring
 * in the object's ring-state page. The provider produces, the device
 * consumes; posting holds lock.
 */
struct pvrdma_wq {
	struct pvrdma_lock lock;
	struct pvrdma_ring *ring;
	uint8_t *wqes;
	uint32_t nelems;		/* power of two */
	uint32_t wqe_size;		/* power of two, at most a page */
	uint32_t max_sge;		/* as sent to the device, >= 1 */
};

/*
 * A QP's SQ buffer starts with the ring-state page (SQ indices at offset 0,
 * RQ indices at offset 8), SQ WQEs follow; the RQ has a buffer of its own,
 * absent when the QP receives from an SRQ (spec §8.1). A QP's qp_table
 * slot is written under qp_table_lock and the locks of its CQs, and read by
 * poll_cq under the CQ lock. The cached state and Q_Key are written by
 * modify_qp under both WQ locks and read by the post verbs under theirs.
 *
 * XRC (spec §14): an XRC_SEND QP has the SQ buffer and no RQ, CQ or SRQ
 * to receive with; an XRC_RECV QP (created or opened) is the kernel's
 * alone: no buffer, no lock, no qp_table slot, no CQ (its receives
 * complete on the CQs of the XRC SRQs they take WQEs from).
 */
struct pvrdma_qp {
	struct verbs_qp vqp;
	uint32_t qp_handle;		/* device QP handle (spec §9) */
	enum ibv_qp_state state;
	uint32_t qkey;			/* UD: for WRs that ask for it */
	struct pvrdma_wq sq;
	struct pvrdma_wq rq;		/* unused with an SRQ */
	struct pvrdma_buf sbuf;
	struct pvrdma_buf rbuf;		/* none with an SRQ */
	struct pvrdma_pd *pad;		/* parent domain, or NULL */
	/*
	 * Inline data: the WQE has no room for payload, so an inline WR's
	 * bytes are copied to its SQ slot's PVRDMA_MAX_INLINE bytes of this
	 * buffer (registered, read by the device like any SGE) at post time.
	 */
	uint32_t max_inline;
	struct pvrdma_buf inl_buf;
	struct ibv_mr *inl_mr;
	/*
	 * The ibv_wr_* batch being built (qp_ex.c), under the SQ lock from
	 * wr_start to wr_complete / wr_abort: WQEs are written at the private
	 * producer index prod and published together.
	 */
	struct {
		uint64_t ops;		/* IBV_QP_EX_WITH_* asked for */
		uint32_t prod;
		uint32_t count;		/* WQEs written in this batch */
		uint32_t slot;		/* of the WQE being built */
		int err;		/* first error; nothing is posted */
		struct pvrdma_sq_wqe_hdr *cur;	/* NULL: none being built */
		/* UD: wr_set_ud_addr, XRC_SEND: wr_set_xrc_srqn was called */
		bool cur_has_addr;
	} wr;
};

/* Inline bytes a send WR may carry (and the per-slot buffer stride). */
#define PVRDMA_MAX_INLINE 256

/*
 * An SRQ buffer is the ring-state page (indices at offset 8) followed by
 * the receive WQEs (spec §4, §8.1). A basic or an XRC SRQ (spec §14); the
 * latter's SRQ number, which XRC senders name, is vsrq.srq_num.
 */
struct pvrdma_srq {
	struct verbs_srq vsrq;
	struct pvrdma_wq wq;
	struct pvrdma_buf buf;
	struct pvrdma_pd *pad;		/* parent domain, or NULL */
	uint32_t srqn;			/* device SRQ handle */
};

/* An AH is the address vector UD send WQEs carry (spec §8.2). */
struct pvrdma_ah {
	struct ibv_ah ibvah;
	struct pvrdma_av av;
};

static inline struct pvrdma_device *to_pvrdma_dev(struct ibv_device *ibvdev)
{
	return container_of(ibvdev, struct pvrdma_device, ibvdev.device);
}

static inline struct pvrdma_context *to_pvrdma_ctx(struct ibv_context *ibvctx)
{
	return container_of(ibvctx, struct pvrdma_context, ibvctx.context);
}

static inline struct pvrdma_pd *to_pvrdma_pd(struct ibv_pd *ibvpd)
{
	return container_of(ibvpd, struct pvrdma_pd, ibvpd);
}

static inline struct pvrdma_cq *to_pvrdma_cq(struct ibv_cq *ibvcq)
{
	return container_of(ibvcq, struct pvrdma_cq, vcq.cq);
}

static inline struct pvrdma_qp *to_pvrdma_qp(struct ibv_qp *ibvqp)
{
	return container_of(ibvqp, struct pvrdma_qp, vqp.qp);
}

static inline struct pvrdma_srq *to_pvrdma_srq(struct ibv_srq *ibvsrq)
{
	return container_of(ibvsrq, struct pvrdma_srq, vsrq.srq);
}

static inline struct pvrdma_ah *to_pvrdma_ah(struct ibv_ah *ibvah)
{
	return container_of(ibvah, struct pvrdma_ah, ibvah);
}

/*
 * Ring a doorbell of this context's UAR page: one 32-bit little-endian
 * store, handle in the low 24 bits, operation flags above (spec §7). The
 * caller issues udma_to_device_barrier() first when the doorbell publishes
 * ring contents.
 *
 * On x86-64 the store is a `rep stosl` of one element: QEMU's TCG ends a
 * translation block after a string instruction, and an MMIO store that is
 * the last instruction of its block is done as it stands, where a plain
 * `mov` in the middle of a block makes TCG unwind and retranslate that
 * one instruction on every doorbell (about 170 ns; ib_write_bw 64 B went
 * from 1.05 to 1.29 M messages/s, docs/benchmarks.md).  A hypervisor
 * decodes either (KVM emulates both); PVRDMA_DB_MOV=1 in the environment
 * selects the plain store.
 */
static inline void pvrdma_uar_write(struct pvrdma_context *ctx,
				    unsigned int offset, uint32_t flags,
				    uint32_t handle)
{
	uint32_t v = flags | (handle & PVRDMA_UAR_HANDLE_MASK);

#if defined(__x86_64__)
	if (!ctx->db_mov) {
		void *dst = (uint8_t *)ctx->uar + offset;
		unsigned long cnt = 1;

		asm volatile("rep stosl"
			     : "+D"(dst), "+c"(cnt)
			     : "a"(v)
			     : "memory");
		return;
	}
#endif
	mmio_write32((uint8_t *)ctx->uar + offset, v);
}

/*
 * The device clock (PVRDMA_UCTX_CLOCK, spec §14), ns: two 32-bit loads of
 * the UAR page, the high half read again until it agrees (the low half
 * wraps every 4.3 s). Each load is a trap to the device model.
 */
static inline uint64_t pvrdma_read_clock(struct pvrdma_context *ctx)
{
	const uint8_t *uar = ctx->uar;
	uint32_t hi, lo, hi2;

	hi = mmio_read32(uar + PVRDMA_UAR_CLOCK_HI_OFFSET);
	for (;;) {
		lo = mmio_read32(uar + PVRDMA_UAR_CLOCK_LO_OFFSET);
		hi2 = mmio_read32(uar + PVRDMA_UAR_CLOCK_HI_OFFSET);
		if (hi2 == hi)
			return (uint64_t)hi << 32 | lo;
		hi = hi2;
	}
}

/* Send flags that mean the same to the device as to ibverbs (spec §8.3). */
#define PVRDMA_SEND_FLAGS (IBV_SEND_FENCE | IBV_SEND_SIGNALED | \
			   IBV_SEND_SOLICITED | IBV_SEND_IP_CSUM)

/* IBA: a UD WR's Q_Key with the high bit set stands for the QP's Q_Key. */
#define PVRDMA_QKEY_USE_QP 0x80000000u

static inline uint32_t pvrdma_ud_qkey(const struct pvrdma_qp *qp,
				      uint32_t qkey)
{
	return qkey & PVRDMA_QKEY_USE_QP ? qp->qkey : qkey;
}

/*
 * Start a send WQE: stale union members of an earlier WQE in the slot
 * must not leak through, so the header is cleared first (spec §8.2).
 */
static inline void pvrdma_sq_wqe_init(struct pvrdma_sq_wqe_hdr *wqe,
				      uint64_t wr_id, unsigned int send_flags,
				      uint32_t opcode)
{
	memset(wqe, 0, sizeof(*wqe));
	wqe->wr_id = htole64(wr_id);
	wqe->opcode = htole32(opcode);
	wqe->send_flags = htole32(send_flags & PVRDMA_SEND_FLAGS);
}

/*
 * The BIND_MW payload (extension PVRDMA_EX_CAP_MW, spec §14) in place of
 * the WQE's wr union: the window's new @rkey onto @bi's MR range.
 */
static inline void pvrdma_sq_wqe_bind_mw(struct pvrdma_sq_wqe_hdr *wqe,
					 uint32_t rkey,
					 const struct ibv_mw_bind_info *bi)
{
	struct pvrdma_ex_bind_mw b = {
		.addr = htole64(bi->addr),
		.length = htole64(bi->length),
		.rkey = htole32(rkey),
		.mr_lkey = htole32(bi->mr ? bi->mr->lkey : 0),
		.access = htole32(bi->mw_access_flags),
	};

	memcpy((uint8_t *)wqe + PVRDMA_EX_BIND_MW_OFF, &b, sizeof(b));
}

static inline void pvrdma_write_sges(struct pvrdma_sge *dst,
				     const struct ibv_sge *src,
				     uint32_t num_sge)
{
	uint32_t i;

	for (i = 0; i < num_sge; i++) {
		dst[i].addr = htole64(src[i].addr);
		dst[i].length = htole32(src[i].length);
		dst[i].lkey = htole32(src[i].lkey);
	}
}

/* A parent domain's PD, or NULL for a PD (verbs.c). */
struct pvrdma_pd *pvrdma_parent_domain(struct ibv_pd *ibvpd);
/* Whether a parent domain (or NULL) makes its objects single-threaded. */
static inline bool pvrdma_pad_single_thread(const struct pvrdma_pd *pad)
{
	return pad && pad->td;
}
/* Count an object of parent domain @pad (NULL: none) in or out. */
void pvrdma_pad_get(struct pvrdma_pd *pad);
void pvrdma_pad_put(struct pvrdma_pd *pad);
/* A buffer of @size bytes for resource @type, from @pad's allocator. */
int pvrdma_buf_alloc(struct pvrdma_buf *buf, struct pvrdma_device *dev,
		     struct pvrdma_pd *pad, uint64_t type, size_t size);
void pvrdma_buf_free(struct pvrdma_buf *buf);

/* Whether a post's send doorbell is needed (PVRDMA_UCTX_SQ_DB_HINT). */
bool pvrdma_sq_doorbell_needed(struct pvrdma_context *ctx,
			       struct pvrdma_qp *qp);

/* Install the ibv_wr_* calls for @send_ops_flags (qp_ex.c). */
int pvrdma_qp_ex_init(struct pvrdma_qp *qp, uint64_t send_ops_flags);

/* Drop a QP's CQEs from a CQ; the caller holds cq->lock. */
void pvrdma_cq_clean_locked(struct pvrdma_cq *cq, uint32_t qp_handle);

#endif /* __PVRDMA_H__ */
