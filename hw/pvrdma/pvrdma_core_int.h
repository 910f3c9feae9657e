/*
 * PVRDMA device core: internal state shared by the core's .c files and the
 * data path.  Not for the QEMU glue (which uses pvrdma_core.h only).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_PVRDMA_CORE_INT_H
#define HW_PVRDMA_CORE_INT_H

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "pvrdma_core.h"
#include "pvrdma_dev_abi.h"
#include "pvrdma_backend.h"
#include "pvrdma_ring.h"

/* WQEs, CQEs and SGEs are used in place, like the command structs. */
#if G_BYTE_ORDER != G_LITTLE_ENDIAN
#error "the PVRDMA core assumes a little-endian host"
#endif

/* Send WQE flags (spec §8.2), not spelled out by the uapi header. */
#define PVRDMA_WR_FLAG_FENCE            (1u << 0)
#define PVRDMA_WR_FLAG_SIGNALED         (1u << 1)
#define PVRDMA_WR_FLAG_SOLICITED        (1u << 2)
/* Largest WQE: next_pow2(80 + 16 * 32). */
#define PVRDMA_MAX_WQE                  1024
/* RNR retry count meaning "retry forever" (IBA 9.7.5.2.8). */
#define PVRDMA_RNR_INFINITE             7

/*
 * DSR rings: 2..129 pages including the ring-state page, i.e. at most 128
 * element pages (1 MiB of async events or CQ notifications).  Linux uses 4.
 * 129 entries fit in page table 0, the only table read for these rings.
 */
#define PVRDMA_DSR_RING_MIN_PAGES       2
#define PVRDMA_DSR_RING_MAX_PAGES       129

#define PVRDMA_EQE_SIZE                 8
#define PVRDMA_CQNE_SIZE                4

/* QEMU-independent copies of IB constants used in caps and port attrs. */
#define PVRDMA_IB_DEVICE_CURR_QP_STATE_MOD  (1u << 7)
#define PVRDMA_IB_DEVICE_PORT_ACTIVE_EVENT  (1u << 10)
#define PVRDMA_IB_DEVICE_SYS_IMAGE_GUID     (1u << 11)
#define PVRDMA_IB_DEVICE_RC_RNR_NAK_GEN     (1u << 12)
#define PVRDMA_IB_PORT_CM_SUP               (1u << 16)
#define PVRDMA_IB_PORT_IP_BASED_GIDS        (1u << 26)
#define PVRDMA_IB_WIDTH_4X                  2
#define PVRDMA_IB_SPEED_DDR                 2
#define PVRDMA_IB_PHYS_STATE_LINK_UP        5

/* QUERY_PORT max_msg_sz: the data path fails longer messages. */
#define PVRDMA_PORT_MAX_MSG_SZ          0x80000000u
/* A UD message fits one packet of the port's MTU (active_mtu 4096). */
#define PVRDMA_PORT_UD_MAX_MSG          4096u
/* The GRH (or IPv4 header in its last 20 bytes) before UD payload. */
#define PVRDMA_GRH_SIZE                 40u
/* Wire QPNs are 24 bits. */
#define PVRDMA_QPN_MASK                 0xFFFFFFu

/* Values advertised in caps (see pvrdma_core_fill_caps()). */
#define PVRDMA_CAP_VENDOR_ID            0x15AD
#define PVRDMA_CAP_HW_VER               1
#define PVRDMA_CAP_MAX_RD_ATOM          16
#define PVRDMA_CAP_LOCAL_CA_ACK_DELAY   15
#define PVRDMA_CAP_GID_TYPE             PVRDMA_GID_TYPE_FLAG_ROCE_V2
#define PVRDMA_MAX_INLINE_DATA          0

/* Access bits an MR or QP may carry; bits 20..29 are IB "optional" hints. */
#define PVRDMA_MR_ACCESS_VALID          0x1Fu
#define PVRDMA_QP_ACCESS_VALID          0x0Fu
#define PVRDMA_ACCESS_OPTIONAL_RANGE    0x3FF00000u

/*
 * Doorbell bits (spec §7) as unsigned constants: <rdma/vmw_pvrdma-abi.h>
 * spells bit 31 as (1 << 31), which is undefined behaviour on an int.
 */
#define PVRDMA_DB_HANDLE_MASK           0x00FFFFFFu
#define PVRDMA_DB_QP_SEND               0x40000000u
#define PVRDMA_DB_QP_RECV               0x80000000u
#define PVRDMA_DB_CQ_ARM_SOL            0x20000000u
#define PVRDMA_DB_CQ_ARM                0x40000000u
#define PVRDMA_DB_CQ_POLL               0x80000000u
#define PVRDMA_DB_SRQ_RECV              0x40000000u

/* CQ arming (spec §7, IB semantics; both one-shot). */
#define PVRDMA_CQ_ARM_NONE              0
#define PVRDMA_CQ_ARM_SOLICITED         1
#define PVRDMA_CQ_ARM_NEXT              2

/*
 * Handle table: dense handles in [first, limit), lowest free first, at
 * most max_count live entries.  Storage grows on demand so a large limit
 * costs nothing until objects exist.
 */
typedef struct PvrdmaTable {
    void **slots;
    uint32_t alloc;             /* slots allocated (handles < alloc) */
    uint32_t first;             /* lowest valid handle */
    uint32_t insert_first;      /* lowest handle insert() hands out */
    uint32_t limit;             /* handles < limit */
    uint32_t count;             /* live entries */
    uint32_t max_count;         /* quota on live entries */
    uint32_t hint;              /* no free handle below this one */
    /*
     * Next fit instead of lowest free first (QPs): a handle freed is
     * handed out again only after every other free one, as an HCA's QP
     * numbers are, so that a peer's connection manager, which keeps a
     * closed connection's remote QP number in its time-wait list for a
     * while, does not take a new connection for the stale one.  @cursor:
     * where the next search starts.
     */
    bool next_fit;
    uint32_t cursor;
    uint8_t *gen;               /* per-handle generation, 1..255 */
    /*
     * Restoring a saved state (pvrdma_state.c): the next insert takes
     * handle @force (not the lowest free one) with generation @force_gen
     * (0: the next one), then forgetting both; -1: none.
     */
    int64_t force;
    uint8_t force_gen;
} PvrdmaTable;

void pvrdma_table_init(PvrdmaTable *t, uint32_t first, uint32_t limit,
                       uint32_t max_count);
void pvrdma_table_destroy(PvrdmaTable *t);
/* Returns 0 and the handle, or -ENOMEM when the quota or space is used. */
int pvrdma_table_insert(PvrdmaTable *t, void *obj, uint32_t *handle);
/* Inserts at a given free handle; -EBUSY if taken, -EINVAL if out of range */
int pvrdma_table_insert_at(PvrdmaTable *t, void *obj, uint32_t handle);
void *pvrdma_table_lookup(const PvrdmaTable *t, uint32_t handle);
/* Generation of @handle's current (or last) tenant; never 0 once used. */
uint8_t pvrdma_table_gen(const PvrdmaTable *t, uint32_t handle);
void pvrdma_table_remove(PvrdmaTable *t, uint32_t handle);
/* The first live object with a handle >= *@h (updated), or NULL. */
void *pvrdma_table_next(const PvrdmaTable *t, uint32_t *h);
/* Every live object of @t, in handle order; removing @obj is allowed. */
#define PVRDMA_TABLE_FOREACH(t, h, obj) \
    for ((h) = (t)->first; ((obj) = pvrdma_table_next((t), &(h))) != NULL; \
         (h)++)
static inline bool pvrdma_table_full(const PvrdmaTable *t)
{
    return t->count >= t->max_count;
}

typedef struct PvrdmaUc {
    uint32_t handle;            /* 1.., 0 means the kernel */
    uint32_t uar_index;         /* BAR2 page, 1..uar_pages-1 */
    uint32_t refs;              /* PDs and CQs */
} PvrdmaUc;

struct PvrdmaPd {
    uint32_t handle;
    uint32_t ctx_handle;        /* 0: a kernel PD */
    uint32_t refs;              /* MRs, QPs, SRQs */
    void *be;
};

struct PvrdmaMr {
    uint32_t handle;
    uint32_t pd_handle;
    uint32_t flags;             /* 0, PVRDMA_MR_FLAG_DMA, _FRMR, _MW_* */
    uint32_t access;
    uint32_t lkey;
    uint32_t rkey;
    uint64_t start;             /* user MR: IOVA == user VA */
    uint64_t length;
    uint64_t *pages;            /* user MR: nchunks page addresses */
    uint32_t npages;
    uint32_t max_sg;            /* FRMR: page list capacity */
    uint64_t quota_pages;       /* charged to max_pinned_pages */
    /* Fast-reg MRs: the page list bound by the last REG_MR WQE. */
    bool frmr_valid;            /* registered, not invalidated */
    uint64_t frmr_iova;
    uint64_t frmr_length;
    uint32_t frmr_npages;
    uint64_t *frmr_pages;       /* max_sg entries */
    /*
     * Long-lived pin (pvrdma_core_mr_pin()): host pointer per page; the
     * pages were mapped in runs, pin_run[i] pages at the head of each run
     * (0 elsewhere).
     */
    void **pinned;
    uint32_t *pin_run;
    uint32_t mw_binds;          /* memory windows bound to this MR */
    /*
     * Memory windows (flags PVRDMA_MR_FLAG_MW_TYPE1/2; keys and PD as
     * above, lkey == rkey only for the lookup): the binding.  Remote
     * address a of a zero-based window is mw_va + a in the MR.
     */
    bool mw_bound;
    bool mw_zero_based;
    uint32_t mw_mr_handle;      /* the MR bound to (its mw_binds counts) */
    uint32_t mw_qp_handle;      /* type 2: the QP bound through */
    uint64_t mw_va;
    uint64_t mw_len;
    void *be;
};

static inline bool pvrdma_mr_is_mw(const PvrdmaMr *mr)
{
    return mr->flags & (PVRDMA_MR_FLAG_MW_TYPE1 | PVRDMA_MR_FLAG_MW_TYPE2);
}

struct PvrdmaCq {
    uint32_t handle;
    uint32_t ctx_handle;        /* 0: a kernel CQ */
    uint32_t cqe;
    uint64_t *pages;            /* page 0 ring state, then CQEs */
    uint32_t npages;
    PvrdmaRing ring;            /* CQE ring, state "rx" at +8 */
    uint8_t arm;                /* PVRDMA_CQ_ARM_* */
    bool overrun;               /* CQ_ERR reported, CQEs are dropped */
    bool fault_spared;          /* pvrdma_fault.c: a CQ of the GSI QP */
    bool timestamps;            /* CQEs carry the clock (extension) */
    bool poll_watch;            /* the backend hears when its polling ends */
    uint32_t refs;              /* QPs */
    GQueue skip_qps;            /* its QPs told to skip send doorbells */
    void *be;
};

/*
 * An XRC domain (PVRDMA_EX_CAP_XRC): the device's, shared by the guest's
 * processes; its XRC SRQs and XRC_TGT QPs count in @refs.
 */
typedef struct PvrdmaXrcd {
    uint32_t handle;            /* 1.. */
    uint32_t refs;
} PvrdmaXrcd;

struct PvrdmaSrq {
    uint32_t handle;
    uint32_t ctx_handle;
    uint32_t pd_handle;
    /* An XRC SRQ: its domain and the CQ its receives complete on. */
    bool xrc;
    uint32_t xrcd_handle;
    uint32_t cq_handle;
    uint64_t *pages;
    uint32_t npages;
    PvrdmaRing ring;            /* receive WQEs, state "rx" at +8 */
    uint32_t max_wr;
    uint32_t max_sge;
    uint32_t srq_limit;
    uint32_t wqe_size;
    uint32_t cons;              /* device-owned consumer index */
    bool limit_armed;
    bool failed;                /* SRQ_ERR reported, ring unusable */
    uint32_t refs;              /* QPs */
    void *be;
};

/*
 * A send WQE at the backend: what its CQE needs, and the request (or
 * none: a local operation the backend carries out, PVRDMA_WC_PENDING).
 */
typedef struct PvrdmaWqOut {
    uint64_t wr_id;
    uint32_t opcode;            /* PVRDMA_WR_* */
    bool signaled;
    bool local;                 /* no request: REG_MR, BIND_MW, LOCAL_INV */
    PvrdmaSendWr *req;          /* lazily made, kept for the next one */
} PvrdmaWqOut;

/* The core's data-path state of a QP (pvrdma_wq.c). */
typedef struct PvrdmaQpWq {
    uint32_t sq_cons;           /* device-owned consumer indexes */
    uint32_t rq_cons;
    bool busy;                  /* SQ being processed (no re-entry) */
    /*
     * Requests at the backend, oldest first: the WQEs from sq_cons on,
     * still in the ring (the head is consumed when it completes).  At
     * most qp->max_outstanding; sq_next is the WQE after the last.
     */
    PvrdmaWqOut *out;           /* max_outstanding entries (lazily made) */
    uint32_t out_head;          /* entry of the oldest */
    uint32_t nout;
    uint32_t sq_next;
    bool hold;                  /* the next WQE waits until nout is 0 */
    bool rnr_pending;           /* SQ head stalled on an RNR NAK */
    uint8_t rnr_left;           /* retries left (rnr_retry != 7) */
    uint32_t resend;            /* requests to submit again (RNR NAK) */
    int64_t rnr_deadline;
    GList rnr_link;             /* on core->rnr_qps while timed */
    GList work_link;            /* on core->work_qps while queued */
    GList skip_link;            /* on its send CQ's skip_qps: sq_db_skip */
    bool comm_est;              /* COMM_EST already reported */
    bool sqd_notify;            /* SQ_DRAINED owed once the SQ drains */
} PvrdmaQpWq;

struct PvrdmaQp {
    uint32_t handle;            /* 1..max_qp-1, 1 = GSI */
    uint32_t qpn;               /* wire QP number (backend's choice) */
    uint8_t type;               /* PVRDMA_QPT_* */
    uint32_t ctx_handle;
    /*
     * Objects name each other by handle, as a saved state can; each
     * reference is counted in the referenced object, so the lookups
     * below (pvrdma_qp_send_cq(), ...) always succeed.
     */
    uint32_t pd_handle;
    uint32_t send_cq_handle;
    uint32_t recv_cq_handle;
    bool has_srq;               /* created with is_srq */
    uint32_t srq_handle;
    /*
     * XRC_TGT QPs: their domain.  Such a QP has no queue, no CQ and no PD
     * of its own: each message names an XRC SRQ of the domain, and
     * pvrdma_core_xrc_bind() points has_srq/srq_handle, pd_handle and
     * recv_cq_handle at it (no reference counted; an SRQ going away
     * unbinds the QPs bound to it).
     */
    uint32_t xrcd_handle;
    uint64_t *pages;            /* ring state, SQ pages, RQ pages */
    uint32_t npages;
    PvrdmaRing sq;              /* state "tx" at +0 */
    PvrdmaRing rq;              /* state "rx" at +8 (unused with an SRQ) */
    uint32_t sq_wqe_size;
    uint32_t rq_wqe_size;
    bool sq_sig_all;
    bool rq_db_skip;            /* the RQ doorbell hint last written */
    bool sq_db_skip;            /* the SQ doorbell hint last written */
    uint32_t state;             /* enum pvrdma_qp_state */
    struct pvrdma_qp_attr attr; /* stored attributes, cap filled at create */
    PvrdmaQpWq wq;
    /*
     * Send requests the backend may hold at once (1 unless its qp_create
     * raises it, up to PVRDMA_MAX_OUTSTANDING).
     */
    uint32_t max_outstanding;
    uint32_t mw_binds;          /* type 2 windows bound through it */
    uint32_t mcast_groups;      /* multicast groups it is attached to */
    /*
     * The life of the port its partner is in, as last heard over a link
     * (PvrdmaMoveState; 0: nothing heard since it connected).  Kept by the
     * backend, saved with the QP.
     */
    uint64_t peer_life;
    void *be;
};

typedef struct PvrdmaGid {
    bool bound;
    uint8_t gid[16];
    uint8_t type;
} PvrdmaGid;

/*
 * A multicast group with members on this device (PVRDMA_EX_CAP_MCAST):
 * its GID and the handles of the UD QPs attached, in attach order (a
 * slot of core->mcast, cfg.mcast_groups of them; nqps 0: free).
 */
typedef struct PvrdmaMcast {
    uint8_t mgid[16];
    uint32_t nqps;
    uint32_t *qps;              /* cfg.mcast_qps entries once used */
} PvrdmaMcast;

struct PvrdmaCore {
    PvrdmaCoreConfig cfg;
    const PvrdmaCoreOps *ops;
    void *opaque;
    const PvrdmaBackendOps *be_ops;
    void *be;

    /* Registers (spec §2). */
    uint32_t dsr_low;
    uint32_t dsr_high;
    uint32_t err;
    uint32_t icr;               /* latched causes of masked vectors */
    uint32_t imr;
    uint32_t mac_low;
    uint32_t mac_high;

    /* UAR (BAR2) bus address, if the glue told us. */
    bool uar_base_known;
    uint64_t uar_base;

    /* DSR state; dma_enabled is false whenever no DSR is (being) loaded. */
    bool dma_enabled;
    bool dsr_loaded;
    uint32_t driver_version;
    uint64_t uar_pfn;           /* from the DSR: PFN of UAR page 0 */
    uint64_t cmd_slot;
    uint64_t resp_slot;
    uint64_t *async_pages;
    uint32_t async_npages;
    PvrdmaRing async_ring;
    uint64_t *cqn_pages;
    uint32_t cqn_npages;
    PvrdmaRing cqn_ring;
    struct pvrdma_device_caps caps;

    /* Objects. */
    PvrdmaTable uc_tbl;
    PvrdmaTable pd_tbl;
    PvrdmaTable mr_tbl;
    /*
     * MRs whose keys the backend chose (fast-reg MRs on a host device's
     * memory windows): key >> 8 -> PvrdmaMr; NULL until the first.
     */
    GHashTable *key_mrs;
    PvrdmaTable cq_tbl;
    PvrdmaTable qp_tbl;
    PvrdmaTable srq_tbl;
    PvrdmaTable xrcd_tbl;       /* PVRDMA_EX_CAP_XRC; max_pd of them */
    uint32_t *uar_owner;        /* UC handle per UAR page, 0 = none */
    PvrdmaGid *gids;
    PvrdmaMcast *mcast;         /* cfg.mcast_groups slots */
    uint64_t pinned_pages;      /* charged against cfg.max_pinned_pages */
    /* The port's counters (PVRDMA_EX_CAP_COUNTERS); links are the backend's. */
    uint64_t ctr[PVRDMA_CTR_NUM];

    /*
     * Restoring a saved state (pvrdma_state.c): the page list the next
     * page directory read hands out instead of reading guest memory, and
     * whether the data path is held (MODIFY_QP then changes no queue:
     * pvrdma_core_state_resume() runs what the transitions would have).
     */
    const uint64_t *load_pages;
    uint32_t load_npages;
    bool loading;
    bool loaded;                /* loaded, the guest not running yet */
    /* The loaded state's record for the backend's move_in (ST_MOVE). */
    bool has_move_state;
    PvrdmaMoveState move_state;
    /* Stopped for a save (move_out): send queues submit nothing. */
    bool paused;

    /* Data path (pvrdma_wq.c). */
    unsigned depth;             /* nesting of enter/leave */
    GQueue work_qps;            /* QPs to flush at the outermost leave */
    GQueue rnr_qps;             /* QPs waiting for a timed RNR retry */
    int64_t timer_expire;       /* armed expiry, -1 = not armed */

    /* Fault injection (pvrdma_fault.c); not migrated (it blocks that). */
    uint64_t fault_rng;
    bool fatal;                 /* DEVICE_FATAL reported: until reset */
    union pvrdma_cmd_resp fault_resp;   /* a late response, wire order */
    uint32_t fault_resp_len;
    int64_t fault_resp_at;      /* its delivery, -1 = none held */
    int64_t fault_async_at;     /* the next async error, -1 = none */
    uint64_t fault_count[3];    /* failed, late, async errors injected */
};

/* The objects a QP, MR or SRQ refers to (kept alive by its reference). */
static inline PvrdmaCq *pvrdma_qp_send_cq(PvrdmaCore *core, PvrdmaQp *qp)
{
    return pvrdma_table_lookup(&core->cq_tbl, qp->send_cq_handle);
}

static inline PvrdmaCq *pvrdma_qp_recv_cq(PvrdmaCore *core, PvrdmaQp *qp)
{
    return pvrdma_table_lookup(&core->cq_tbl, qp->recv_cq_handle);
}

/* NULL unless the QP was created with an SRQ (or XRC_TGT: is bound). */
static inline PvrdmaSrq *pvrdma_qp_srq(PvrdmaCore *core, PvrdmaQp *qp)
{
    return qp->has_srq ? pvrdma_table_lookup(&core->srq_tbl, qp->srq_handle)
                       : NULL;
}

/* XRC QPs (PVRDMA_EX_CAP_XRC): the send side and the receive side. */
static inline bool pvrdma_qp_is_xrc(const PvrdmaQp *qp)
{
    return qp->type == PVRDMA_QPT_XRC_INI || qp->type == PVRDMA_QPT_XRC_TGT;
}

/* Has @qp a send queue (all but XRC_TGT)? */
static inline bool pvrdma_qp_has_sq(const PvrdmaQp *qp)
{
    return qp->type != PVRDMA_QPT_XRC_TGT;
}

/* Has @qp a receive queue of its own (no SRQ, not XRC)? */
static inline bool pvrdma_qp_has_rq(const PvrdmaQp *qp)
{
    return !qp->has_srq && !pvrdma_qp_is_xrc(qp);
}

/* A connected QP (RC, UC, XRC): its requests follow its attributes. */
static inline bool pvrdma_qp_connected(const PvrdmaQp *qp)
{
    return qp->type == PVRDMA_QPT_RC || qp->type == PVRDMA_QPT_UC ||
           pvrdma_qp_is_xrc(qp);
}

/* A reliable connected QP (RC, XRC): ACKs, NAKs, READs and atomics. */
static inline bool pvrdma_qp_reliable(const PvrdmaQp *qp)
{
    return qp->type == PVRDMA_QPT_RC || pvrdma_qp_is_xrc(qp);
}

static inline PvrdmaPd *pvrdma_pd_of(PvrdmaCore *core, uint32_t handle)
{
    return pvrdma_table_lookup(&core->pd_tbl, handle);
}

/* The user context of @ctx_handle, NULL for the kernel (0). */
static inline PvrdmaUc *pvrdma_uc_of(PvrdmaCore *core, uint32_t ctx_handle)
{
    return ctx_handle ? pvrdma_table_lookup(&core->uc_tbl, ctx_handle) : NULL;
}

/* Guest memory; -EFAULT when no DSR is loaded or the range is bad. */
int pvrdma_core_dma_read(PvrdmaCore *core, uint64_t addr, void *buf,
                         uint64_t len);
int pvrdma_core_dma_write(PvrdmaCore *core, uint64_t addr, const void *buf,
                          uint64_t len);

/*
 * Short-lived host mapping of guest memory (PvrdmaCoreOps.dma_map); NULL
 * when no DSR is loaded, the glue has no dma_map or refuses the range.
 * Every successful map is paired with pvrdma_core_dma_unmap() before the
 * entry point returns.
 */
void *pvrdma_core_dma_map(PvrdmaCore *core, uint64_t addr, uint64_t *plen,
                          bool is_write);
void pvrdma_core_dma_unmap(PvrdmaCore *core, void *ptr, uint64_t len,
                           bool is_write, uint64_t access_len);
/* Glue clock (0 without clock_ns) and timer (no-op without timer_mod). */
int64_t pvrdma_core_now_ns(PvrdmaCore *core);
bool pvrdma_core_has_timer(PvrdmaCore *core);
void pvrdma_core_timer_mod(PvrdmaCore *core, int64_t expire_ns);

void pvrdma_core_guest_error(PvrdmaCore *core, PvrdmaGerr kind,
                             const char *fmt, ...) G_GNUC_PRINTF(3, 4);
/*
 * The one short form of it, for the core's and the backends' files:
 * GERR(core, KIND, fmt, ...) with KIND a PvrdmaGerr without its prefix.
 * Values of a format are int- or long-sized integers, or strings.
 */
#define GERR(core, kind, ...) \
    pvrdma_core_guest_error(core, PVRDMA_GERR_##kind, __VA_ARGS__)

/* Raise @vector subject to IMR (latched in ICR while masked). */
void pvrdma_core_raise(PvrdmaCore *core, unsigned vector);

/*
 * Append one element to a ring the device produces (async, CQ-notify,
 * CQs).  Reads cons_head, checks the spec "full" test and the effective
 * capacity, writes @elem at slot(prod), then publishes prod_tail.
 * Returns 0, -ENOSPC when full, -EINVAL on an invalid guest index,
 * -EFAULT on a DMA error.
 */
int pvrdma_core_ring_produce(PvrdmaCore *core, PvrdmaRing *ring,
                             const void *elem);

/*
 * Called by the data path after writing a CQE into @cq_handle's ring.
 * If the CQ is armed for it (ARM: any completion; ARM_SOL: @solicited or
 * error completions) it is disarmed, the handle is appended to the
 * CQ-notification ring and vector 2 is raised.  Returns 1 if notified,
 * 0 if the CQ was not armed, negative errno on failure.
 */
int pvrdma_core_notify_cq(PvrdmaCore *core, uint32_t cq_handle,
                          bool solicited);

/* Pinned-pages quota (spec: cfg.max_pinned_pages); -ENOMEM if exceeded. */
/* Add @n to the port's counter @c (PVRDMA_CTR_*). */
static inline void pvrdma_core_count(PvrdmaCore *core, unsigned c, uint64_t n)
{
    core->ctr[c] += n;
}

/* Packets a message of @len bytes takes on @qp's path (at least one). */
uint64_t pvrdma_core_pkts(PvrdmaQp *qp, uint64_t len);

int pvrdma_core_charge_pages(PvrdmaCore *core, uint64_t npages);
void pvrdma_core_uncharge_pages(PvrdmaCore *core, uint64_t npages);

/* Command channel (pvrdma_cmd.c). */
/*
 * Execute the request in @req (184 bytes copied in) and fill @resp.
 * Returns 0 or a negative errno; *@resp_len is how many bytes of @resp
 * to write back (0: none).
 */
int pvrdma_cmd_execute(PvrdmaCore *core, const union pvrdma_cmd_req *req,
                       union pvrdma_cmd_resp *resp, uint32_t *resp_len);
/* Undo a create whose response could not be delivered. */
void pvrdma_cmd_rollback(PvrdmaCore *core, const union pvrdma_cmd_req *req,
                         const union pvrdma_cmd_resp *resp);
/* Destroy every object (reset). */
void pvrdma_cmd_destroy_all(PvrdmaCore *core);
void pvrdma_core_fill_caps(PvrdmaCore *core, struct pvrdma_device_caps *c);

/* Data path (pvrdma_wq.c, docs/datapath.md). */
/* Doorbells (spec §7). */
void pvrdma_wq_post_send(PvrdmaCore *core, PvrdmaQp *qp);
void pvrdma_wq_post_recv(PvrdmaCore *core, PvrdmaQp *qp);
/* Write @qp's receive doorbell hint (@init: whatever was written before). */
void pvrdma_wq_rq_hint(PvrdmaCore *core, PvrdmaQp *qp, bool skip, bool init);
/*
 * Write @qp's send doorbell hint as its state and requests out say (@init:
 * 0, whatever was written before); true if it went to 0.
 */
bool pvrdma_wq_sq_hint(PvrdmaCore *core, PvrdmaQp *qp, bool init);
void pvrdma_wq_srq_post_recv(PvrdmaCore *core, PvrdmaSrq *srq);
void pvrdma_wq_cq_poll(PvrdmaCore *core, PvrdmaCq *cq, bool armed);
/* The polling of @cq the backend watched ended (CQE, arm, destroy). */
void pvrdma_wq_cq_poll_end(PvrdmaCore *core, PvrdmaCq *cq);
void pvrdma_wq_timer_expired(PvrdmaCore *core);
/* Object life: after a committed MODIFY_QP (@old: state before). */
void pvrdma_wq_qp_modified(PvrdmaCore *core, PvrdmaQp *qp, uint32_t old);
/*
 * After a saved state was loaded (pvrdma_state.c), once the guest runs:
 * what @qp's queues had waiting (RTS: run the send queue or time its RNR
 * wait; ERR, SQE: flush).
 */
void pvrdma_wq_qp_resumed(PvrdmaCore *core, PvrdmaQp *qp);
/* Before the QP is freed: no flush, no more DMA, backend cancelled. */
void pvrdma_wq_qp_destroy(PvrdmaCore *core, PvrdmaQp *qp);
/* Unbind memory window @mw (type 2: invalidate it), if it is bound. */
void pvrdma_wq_mw_unbind(PvrdmaCore *core, PvrdmaMr *mw);
/* After the SRQ's limit was (re)set by CREATE_SRQ / MODIFY_SRQ. */
void pvrdma_wq_srq_limit_set(PvrdmaSrq *srq);
/*
 * The guest's prod_tail of @srq's ring, checked against the device's
 * cons (GERR'd and negative when invalid).
 */
int pvrdma_wq_srq_posted(PvrdmaCore *core, PvrdmaSrq *srq, uint32_t *prod);
/* Every object is gone: cancel the timer. */
void pvrdma_wq_reset(PvrdmaCore *core);
/* (Re)arm the core's timer at its earliest deadline (RNR waits, faults). */
void pvrdma_wq_rearm(PvrdmaCore *core);
/* @cq lost a CQE (IBA 11.6.3.2): CQ_ERR once, its QPs to ERR. */
void pvrdma_wq_cq_fail(PvrdmaCore *core, PvrdmaCq *cq);
/* @srq cannot be used any more: SRQ_ERR once, its QPs to ERR. */
void pvrdma_wq_srq_fail(PvrdmaCore *core, PvrdmaSrq *srq);

/* Fault injection (pvrdma_fault.c, docs/faults.md). */
typedef enum PvrdmaFaultCmd {
    PVRDMA_FAULT_NONE,
    PVRDMA_FAULT_FAIL,          /* refuse it with cfg.fault.fail_errno */
    PVRDMA_FAULT_LATE,          /* run it, answer cfg.fault.late_ms later */
} PvrdmaFaultCmd;
/* What to do with command @cmd (may refuse: device fatal). */
PvrdmaFaultCmd pvrdma_fault_cmd(PvrdmaCore *core, uint32_t cmd, int *err);
/* Hold this response (wire order, @len bytes) for late delivery. */
void pvrdma_fault_hold(PvrdmaCore *core, const union pvrdma_cmd_resp *wire,
                       uint32_t len);
/* A new request: a response still held is dropped (the guest gave up). */
void pvrdma_fault_drop_held(PvrdmaCore *core);
/* The earliest fault deadline, or -1. */
int64_t pvrdma_fault_deadline(PvrdmaCore *core);
/* A DSR was loaded (async errors start) / the device reset (all stop). */
void pvrdma_fault_start(PvrdmaCore *core);
void pvrdma_fault_reset(PvrdmaCore *core);
/* The core's timer expired: deliver what is due (inside enter/leave). */
void pvrdma_fault_timer(PvrdmaCore *core);
/* Refuse command @req with -@err (the response as execute would make). */
int pvrdma_cmd_refuse(PvrdmaCore *core, const union pvrdma_cmd_req *req,
                      union pvrdma_cmd_resp *resp, uint32_t *resp_len,
                      int err);
/* Completion opcode of a send WQE opcode. */
uint32_t pvrdma_wq_wc_opcode(uint32_t wr_opcode);

/* QP state machine (pvrdma_qp_sm.c); see there for the table. */
bool pvrdma_qp_transition_ok(uint32_t cur, uint32_t next, uint8_t type,
                             uint32_t mask);
/* The attributes @cur -> @next needs for @type (0 if not a transition). */
uint32_t pvrdma_qp_transition_required(uint32_t cur, uint32_t next,
                                       uint8_t type);

/* Page directories (pvrdma_pdir.c, spec §4). */
/*
 * Copy in the directory at @pdir_dma and the page tables describing
 * @npages data pages (1..PVRDMA_PDIR_MAX_PAGES), validate every address
 * (non-zero, page aligned) and return a g_malloc'ed array of @npages bus
 * addresses.  Returns 0, -EINVAL (bad address/count) or -EFAULT (DMA).
 */
int pvrdma_pdir_read(PvrdmaCore *core, uint64_t pdir_dma, uint32_t npages,
                     uint64_t **pages);

#endif /* HW_PVRDMA_CORE_INT_H */
