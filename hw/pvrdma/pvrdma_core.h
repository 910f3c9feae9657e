/*
 * PVRDMA device core: registers, DSR, command channel, object tables, rings.
 *
 * Plain C + GLib; no QEMU header is included here or in the core's .c files.
 * The core reaches guest memory and interrupts only through PvrdmaCoreOps,
 * which the QEMU glue (pvrdma.c) implements with pci_dma_* / msix_notify and
 * the unit tests implement with fake memory.
 *
 * Threading: every entry point is called with the caller's lock held (the
 * BQL in QEMU); the core itself takes no lock.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_PVRDMA_CORE_H
#define HW_PVRDMA_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pvrdma_gerr.h"

/*
 * On a large local that the code fills before it reads it: QEMU builds
 * with -ftrivial-auto-var-init=zero, which would zero it on every call,
 * kilobytes of stores per work request on the data path.  meson.build
 * defines it as the "uninitialized" attribute where the compiler has it.
 */
#ifndef PVRDMA_UNINIT
#define PVRDMA_UNINIT
#endif

typedef struct PvrdmaCore PvrdmaCore;

/* What the trace_rnr hook reports (values of its trace event). */
typedef enum PvrdmaRnrEvent {
    PVRDMA_RNR_WAIT = 0,        /* an RNR NAK: the send queue waits */
    PVRDMA_RNR_KICK = 1,        /* retried: the responder posted a receive */
    PVRDMA_RNR_TIMER = 2,       /* retried: the wait ran out */
} PvrdmaRnrEvent;

/*
 * A window onto guest RAM (PvrdmaCoreOps.dma_window): bus addresses
 * [base, base + len) are host memory at @host, for as long as the entry
 * point that asked for it runs.  @tag is the glue's, for dma_dirty.
 */
typedef struct PvrdmaDmaWindow {
    uint64_t base;
    uint64_t len;
    uint8_t *host;
    void *tag;
} PvrdmaDmaWindow;

typedef struct PvrdmaCoreOps {
    /*
     * Copy @len bytes of guest memory at bus address @addr.  Return 0, or
     * -EFAULT if any part is not plain guest RAM (unmapped, MMIO, the
     * device's own BARs, or address overflow).
     */
    int (*dma_read)(void *opaque, uint64_t addr, void *buf, uint64_t len);
    int (*dma_write)(void *opaque, uint64_t addr, const void *buf,
                     uint64_t len);
    /* Raise MSI-X vector @vector (the core has already applied IMR). */
    void (*notify)(void *opaque, unsigned vector);
    /*
     * A guest protocol violation: its kind (pvrdma_gerr.h), the message
     * already formatted (LOG_GUEST_ERROR), and the message's values in
     * order (the fields of the kind's trace event).  The core reports
     * every one; the glue rate-limits per kind.
     */
    void (*guest_error)(void *opaque, PvrdmaGerr kind, const char *msg,
                        const PvrdmaGerrArg *args);
    /* Trace hook: one line per executed command, may be NULL. */
    void (*trace_cmd)(void *opaque, uint32_t cmd, int err);
    /* Trace hook: a doorbell the core accepted (BAR2 @offset), may be NULL */
    void (*trace_doorbell)(void *opaque, uint64_t offset, uint32_t val);
    /*
     * Trace hook: QP @qpn's send queue waits @usec after an RNR NAK, or
     * is retried (PvrdmaRnrEvent; @usec 0).  May be NULL.
     */
    void (*trace_rnr)(void *opaque, uint32_t qpn, unsigned event,
                      uint32_t usec);

    /*
     * Data path (docs/datapath.md).  All of them are optional.
     *
     * dma_map: a host pointer to guest memory at bus address @addr for
     * at most *@plen bytes; *@plen is set to the length actually mapped
     * (it may come back shorter: callers loop).  NULL if the range is not
     * mappable guest RAM (MMIO, the device's own BARs, unmapped).  A
     * mapping never outlives the doorbell that made it.
     * dma_unmap: release it; @access_len bytes were read or written.
     */
    void *(*dma_map)(void *opaque, uint64_t addr, uint64_t *plen,
                     bool is_write);
    void (*dma_unmap)(void *opaque, void *ptr, uint64_t len, bool is_write,
                      uint64_t access_len);
    /*
     * dma_window (optional, with dma_dirty): the whole block of plain
     * guest RAM holding bus address @addr, so that the payload copy can
     * walk a scattered buffer page by page with arithmetic instead of a
     * dma_map/dma_unmap pair per page.  false: not such RAM (dma_map
     * decides).  The window is only used within the entry point that
     * asked for it, like a mapping.
     * dma_dirty: @len bytes at bus address @addr, inside the window
     * tagged @tag, were written (dirty logging, translated code).
     */
    bool (*dma_window)(void *opaque, uint64_t addr, PvrdmaDmaWindow *w);
    void (*dma_dirty)(void *opaque, void *tag, uint64_t addr, uint64_t len);
    /* Monotonic clock of the glue (QEMU_CLOCK_VIRTUAL), nanoseconds. */
    int64_t (*clock_ns)(void *opaque);
    /*
     * One timer per core: (re)arm it to fire at absolute time @expire_ns
     * of clock_ns, or cancel it when @expire_ns < 0.  On expiry the glue
     * calls pvrdma_core_timer_expired() (under the same lock as every
     * other entry point).
     */
    void (*timer_mod)(void *opaque, int64_t expire_ns);
} PvrdmaCoreOps;

/*
 * Fault injection for tests of guest drivers (the experimental x-fault-*
 * properties, pvrdma_fault.c, docs/faults.md).  All zero: off.
 */
typedef struct PvrdmaFaultConfig {
    uint32_t seed;              /* of the device's own PRNG (reproducible) */
    uint32_t cmd_mask;          /* commands that may fail or answer late */
    uint32_t fail;              /* 1 in @fail of them fails, 0 = none */
    uint32_t fail_errno;        /* with this errno */
    uint32_t late;              /* 1 in @late of them answers late */
    uint32_t late_ms;           /* by this many ms (virtual clock) */
    uint32_t async_ms;          /* an async error every @async_ms, 0 = none */
    uint32_t async_mask;        /* which (1 << PVRDMA_FAULT_ASYNC_*) */
} PvrdmaFaultConfig;

enum {
    PVRDMA_FAULT_ASYNC_CQ_ERR,          /* a CQ overruns */
    PVRDMA_FAULT_ASYNC_QP_FATAL,        /* a QP (not the GSI QP) fails */
    PVRDMA_FAULT_ASYNC_SRQ_ERR,         /* an SRQ fails */
    PVRDMA_FAULT_ASYNC_DEVICE_FATAL,    /* the device fails until reset */
    PVRDMA_FAULT_ASYNC_KINDS,
};

/* The async errors injected by default: all but DEVICE_FATAL. */
#define PVRDMA_FAULT_DEFAULT_ASYNC \
    ((1u << PVRDMA_FAULT_ASYNC_CQ_ERR) | (1u << PVRDMA_FAULT_ASYNC_QP_FATAL) | \
     (1u << PVRDMA_FAULT_ASYNC_SRQ_ERR))

/*
 * Parse the x-fault-cmds list (command names as in docs/abi.md, lower
 * case: "create_qp,modify_qp"; "all"; "" for the default, every command
 * but DESTROY_*) or the x-fault-async list ("cq-err,qp-fatal,srq-err,
 * device-fatal"; "" for the default, all but device-fatal).  false with
 * *@errmsg (g_malloc'ed, naming the property and the accepted words).
 */
bool pvrdma_fault_parse_cmds(const char *list, uint32_t *mask,
                             char **errmsg);
bool pvrdma_fault_parse_async(const char *list, uint32_t *mask,
                              char **errmsg);
/* Is any fault injected? */
bool pvrdma_fault_enabled(const PvrdmaFaultConfig *f);

/*
 * User-tunable limits (the -device properties); validated by
 * pvrdma_core_check_config() before pvrdma_core_new().
 */
typedef struct PvrdmaCoreConfig {
    uint32_t max_qp;            /* 2..65535 */
    uint32_t max_qp_wr;
    uint32_t max_sge;
    uint32_t max_cq;
    uint32_t max_cqe;
    uint32_t max_mr;
    uint32_t max_pd;
    uint32_t max_srq;
    uint32_t max_srq_wr;
    uint32_t max_srq_sge;
    uint32_t max_ah;
    uint32_t max_uc;            /* user contexts */
    uint32_t uar_pages;         /* BAR2 pages, power of two */
    uint32_t gid_tbl_len;
    uint64_t max_mr_size;
    uint64_t max_pinned_pages;  /* pages all MRs and rings may describe */
    uint32_t mcast_groups;      /* multicast groups; 0: no multicast */
    uint32_t mcast_qps;         /* QPs attached to one group */
    uint64_t node_guid;         /* host order; written BE into caps */
    uint64_t fw_ver;
    bool cq_poll_hint;          /* caps: PVRDMA_EX_CAP_CQ_POLL_HINT */
    bool no_rq_db_hint;         /* no PVRDMA_EX_CAP_RQ_DB_HINT (A/B) */
    bool no_sq_db_hint;         /* no PVRDMA_EX_CAP_SQ_DB_HINT (A/B) */
    PvrdmaFaultConfig fault;
} PvrdmaCoreConfig;

/* Defaults of the -device pvrdma properties (PvrdmaCoreConfig fields). */
#define PVRDMA_DEFAULT_MAX_QP               1024
#define PVRDMA_DEFAULT_MAX_QP_WR            4096
#define PVRDMA_DEFAULT_MAX_SGE              32
#define PVRDMA_DEFAULT_MAX_CQ               2048
#define PVRDMA_DEFAULT_MAX_CQE              4096
#define PVRDMA_DEFAULT_MAX_MR               4096
#define PVRDMA_DEFAULT_MAX_PD               1024
#define PVRDMA_DEFAULT_MAX_SRQ              512
#define PVRDMA_DEFAULT_MAX_SRQ_WR           4096
#define PVRDMA_DEFAULT_MAX_SRQ_SGE          32
#define PVRDMA_DEFAULT_MAX_AH               1024
#define PVRDMA_DEFAULT_MAX_UC               255
#define PVRDMA_DEFAULT_UAR_PAGES            256
#define PVRDMA_DEFAULT_GID_TBL_LEN          16
#define PVRDMA_DEFAULT_MAX_MR_SIZE          (1ull << 30)
#define PVRDMA_DEFAULT_MAX_PINNED_PAGES     (1ull << 20)
#define PVRDMA_DEFAULT_MCAST_GROUPS         64
#define PVRDMA_DEFAULT_MCAST_QPS            16
/* Bounds of mcast-groups and mcast-qps (a few MiB of tables at most). */
#define PVRDMA_MCAST_MAX_GROUPS             1024
#define PVRDMA_MCAST_MAX_QPS                256
#define PVRDMA_DEFAULT_FW_VER               (1ull << 32)

/* Fills @cfg with the defaults of the -device pvrdma properties. */
void pvrdma_core_default_config(PvrdmaCoreConfig *cfg);

/*
 * Returns true if @cfg is usable; otherwise false with *@errmsg set to a
 * g_malloc'ed message saying which property is wrong and what is allowed.
 */
bool pvrdma_core_check_config(const PvrdmaCoreConfig *cfg, char **errmsg);

PvrdmaCore *pvrdma_core_new(const PvrdmaCoreConfig *cfg,
                            const PvrdmaCoreOps *ops, void *opaque);
void pvrdma_core_free(PvrdmaCore *core);

/*
 * Device reset (power on, qdev reset, CTL RESET): destroys every object and
 * forgets the DSR; no DMA happens afterwards until the next DSR load.
 */
void pvrdma_core_reset(PvrdmaCore *core);

/* BAR1: @offset < PVRDMA_REG_BAR_SIZE, 4-byte aligned, 32-bit accesses. */
uint32_t pvrdma_core_reg_read(PvrdmaCore *core, uint64_t offset);
void pvrdma_core_reg_write(PvrdmaCore *core, uint64_t offset, uint32_t val);

/* BAR2: a 32-bit doorbell store at @offset (page = offset >> 12). */
void pvrdma_core_uar_write(PvrdmaCore *core, uint64_t offset, uint32_t val);
/* BAR2: a 32-bit load at @offset: a half of the clock, else 0. */
uint32_t pvrdma_core_uar_read(PvrdmaCore *core, uint64_t offset);
/*
 * True if a doorbell write arms a CQ.  A glue that runs doorbells after
 * the guest's write returned must run these at once: the guest checks
 * for missed completions right after arming, and a completion made
 * between that check and a late arm would never be notified.
 */
bool pvrdma_core_doorbell_arms_cq(uint64_t offset, uint32_t val);

/*
 * Added for the glue: tell the core where BAR2 (the UAR pages) is mapped
 * on the bus, or PVRDMA_CORE_UAR_UNMAPPED (== QEMU's PCI_BAR_UNMAPPED) when
 * it is not.  CREATE_UC converts the guest's PFN to a UAR page index with
 * it; while unknown, the PFN of UAR page 0 written in the DSR is used.
 */
#define PVRDMA_CORE_UAR_UNMAPPED    UINT64_MAX
void pvrdma_core_set_uar_base(PvrdmaCore *core, uint64_t bus_addr);

/*
 * Added for the glue and the data path: append an async event
 * (PVRDMA_EQE_TYPE_*, spec §6.3) and raise vector 1 subject to IMR.
 * Returns 0, -ENODEV without a DSR, -ENOSPC if the ring is full (event
 * dropped, logged as a guest error), -EINVAL/-EFAULT on a bad ring.
 * E.g. the glue posts PORT_ACTIVE / PORT_ERR (info = 1) on link changes.
 */
int pvrdma_core_post_async_event(PvrdmaCore *core, uint32_t type,
                                 uint32_t info);

/* The timer armed through PvrdmaCoreOps.timer_mod has expired. */
void pvrdma_core_timer_expired(PvrdmaCore *core);

/*
 * Device state for migration and snapshots (pvrdma_state.c,
 * docs/migration.md).  Save: the state as a g_malloc'ed byte string of
 * *@len bytes, or NULL with *@errmsg when it cannot be saved now.  Load:
 * into a core that was just made or reset with the same configuration
 * and backend; false with *@errmsg on any invalid input, the core then
 * reset.  Resume: after a load, once the guest runs again, the work its
 * queues had waiting at the source goes on.
 */
uint8_t *pvrdma_core_state_save(PvrdmaCore *core, size_t *len,
                                char **errmsg);
bool pvrdma_core_state_load(PvrdmaCore *core, const uint8_t *buf, size_t len,
                            char **errmsg);
void pvrdma_core_state_resume(PvrdmaCore *core);

/*
 * The guest stopped for a save (migration, snapshot): submit nothing more
 * and let the backend quiesce its peers (PvrdmaBackendOps.move_out);
 * false with *@errmsg if what was in flight did not end within
 * @timeout_ns.  Move back: the guest runs on here (a failed or cancelled
 * migration, a snapshot taken).  Work: a count that moves whenever a peer
 * reached this device or answered it (a save checks it stood still).
 */
bool pvrdma_core_move_out(PvrdmaCore *core, int64_t timeout_ns,
                          char **errmsg);
void pvrdma_core_move_back(PvrdmaCore *core);
uint64_t pvrdma_core_move_work(PvrdmaCore *core);
/* A saved state is being loaded (backends announce nothing meanwhile). */
bool pvrdma_core_loading(PvrdmaCore *core);

/*
 * What the device holds for its guest now: live objects per kind and the
 * guest pages its MRs and rings describe (the x-objects property; a soak
 * watches them stay flat).
 */
typedef struct PvrdmaCoreObjects {
    uint32_t uc, pd, mr, cq, qp, srq;
    uint64_t pinned_pages;
} PvrdmaCoreObjects;

void pvrdma_core_objects(PvrdmaCore *core, PvrdmaCoreObjects *o);

#endif /* HW_PVRDMA_CORE_H */
