/*
 * Fake guest for the PVRDMA core unit tests: guest RAM, MSI-X counters,
 * a guest-error log, and a tiny "guest driver" that builds DSRs, page
 * directories and commands in that RAM.
 *
 * Guest RAM is FG_MEM_SIZE bytes at bus address FG_MEM_BASE; any DMA that
 * is not entirely inside it fails with -EFAULT (and is counted).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef TESTS_UNIT_FAKE_GUEST_H
#define TESTS_UNIT_FAKE_GUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pvrdma_backend.h"
#include "pvrdma_core.h"
#include "pvrdma_dev_abi.h"

#define FG_MEM_BASE         0x100000ull
#ifndef FG_MEM_SIZE                 /* tests/ibverbs needs more than 1 GiB */
#define FG_MEM_SIZE         (64ull << 20)
#endif
#define FG_PAGE             4096ull
/* An address that is page aligned but outside guest RAM. */
#define FG_BAD_ADDR         0x40000000000ull
/* Where the tests pretend BAR2 is mapped. */
#define FG_UAR_BASE         0xfe000000ull

typedef struct FakeGuest {
    uint8_t *mem;
    uint64_t next_free;         /* bump allocator, bus address */
    PvrdmaCore *core;
    PvrdmaCoreConfig cfg;

    unsigned notify[PVRDMA_NUM_VECTORS];
    unsigned dma_reads;
    unsigned dma_writes;
    unsigned dma_faults;
    unsigned guest_errors;
    char last_error[256];
    PvrdmaGerr last_gerr;       /* kind of the last guest error */
    uint64_t last_gerr_args[PVRDMA_GERR_MAX_ARGS];  /* and its values */
    unsigned trace_cmds;
    /* Doorbells the core accepted, by kind (trace_doorbell hook). */
    unsigned db_qp_send, db_qp_recv, db_srq, db_cq_poll;
    uint32_t db_last_handle;
    /* RNR waits, retries on a posted receive, retries on time (trace). */
    unsigned rnr_waits, rnr_kicks, rnr_timeouts;
    uint64_t ro_page;           /* writes touching this page fail (0: none) */

    /* Data path ops (dma_map, clock, timer). */
    unsigned maps;              /* successful dma_map calls */
    unsigned unmaps;
    unsigned map_fails;
    uint64_t map_max;           /* cap on one mapping's length (0: none) */
    bool map_refuse;            /* dma_map always fails (MMIO-like) */
    uint64_t mmio_base;         /* [base, base+len): dma_map refuses it */
    uint64_t mmio_len;
    /*
     * dma_window: off unless @windows; windows are the aligned blocks of
     * @win_size bytes (0: all of RAM), none over the MMIO range.  Writes
     * reported through dma_dirty mark pages in @dirty (one byte a page).
     */
    bool windows;
    uint64_t win_size;
    unsigned windows_given;
    unsigned dirty_calls;
    uint8_t *dirty;
    int64_t now_ns;             /* manual clock */
    uint8_t cq_flags;           /* CREATE_CQ reserved[0] of the next CQs */
    int64_t timer_expire;       /* armed expiry, -1 = none */
    unsigned timer_mods;

    /* The "driver" state after fg_load_dsr(). */
    uint64_t dsr;
    uint64_t cmd_slot;
    uint64_t resp_slot;
    uint64_t async_pages[PVRDMA_PDIR_ENTRIES];
    uint32_t async_npages;
    uint64_t cq_pages[PVRDMA_PDIR_ENTRIES];
    uint32_t cq_npages;
    uint32_t driver_version;
    const PvrdmaCoreOps *ops;   /* the core's, for fg_migrate() */
} FakeGuest;

/* New guest + core (default config if @cfg is NULL); IMR left at reset. */
FakeGuest *fg_new(const PvrdmaCoreConfig *cfg);
/* Same, with the optional data path ops left out (no map, no timer). */
FakeGuest *fg_new_minimal(const PvrdmaCoreConfig *cfg);
/* Advance the manual clock by @ns and fire the timer if it is due. */
void fg_advance(FakeGuest *fg, int64_t ns);
/*
 * Live migration of the device as QEMU does it: the state saved with the
 * guest stopped, the source core torn down (its teardown does not reach
 * the memory the destination got: a copy taken at the save is put back),
 * a new core made with the same configuration, @rejoin (if not NULL)
 * giving it its backend, the state loaded (asserted to succeed and to
 * save again byte for byte) and resumed.  Returns the state's size.
 */
size_t fg_migrate(FakeGuest *fg, void (*rejoin)(FakeGuest *fg));
/* The same in two steps: a copy of the state and memory, restored later. */
typedef struct FgSnapshot {
    uint8_t *state;
    size_t len;
    uint8_t *mem;
} FgSnapshot;
FgSnapshot *fg_snapshot(FakeGuest *fg);
size_t fg_restore(FakeGuest *fg, const FgSnapshot *snap,
                  void (*rejoin)(FakeGuest *fg));
void fg_snapshot_free(FgSnapshot *snap);
void fg_free(FakeGuest *fg);

/* Host pointer for guest bus address @addr (must be inside RAM). */
void *fg_ptr(FakeGuest *fg, uint64_t addr);
uint32_t fg_read32(FakeGuest *fg, uint64_t addr);
void fg_write32(FakeGuest *fg, uint64_t addr, uint32_t val);

/* @n zeroed contiguous pages; returns the bus address. */
uint64_t fg_alloc_pages(FakeGuest *fg, uint32_t n);
/*
 * @n separate data pages (each allocated on its own, with a gap page in
 * between so they are not contiguous) into @pages; returns a PDIR.
 */
uint64_t fg_alloc_paged(FakeGuest *fg, uint32_t n, uint64_t *pages);
/* PDIR (directory + tables) describing @pages[0..n). */
uint64_t fg_build_pdir(FakeGuest *fg, const uint64_t *pages, uint32_t n);

uint32_t fg_reg_read(FakeGuest *fg, uint32_t off);
void fg_reg_write(FakeGuest *fg, uint32_t off, uint32_t val);

/*
 * Build a DSR like Linux (slots, two rings of @async_np / @cq_np pages),
 * write DSRLOW/DSRHIGH; returns the ERR register.
 */
uint32_t fg_load_dsr_ex(FakeGuest *fg, uint32_t driver_version,
                        uint32_t async_np, uint32_t cq_np);
/* Linux defaults (version 20, 4 + 4 pages), IMR = 0, ACTIVATE; asserts. */
void fg_setup(FakeGuest *fg);
/* The caps the device wrote into the DSR. */
const struct pvrdma_device_caps *fg_caps(FakeGuest *fg);
void fg_clear_caps(FakeGuest *fg);

/*
 * Issue one command: the slot is first filled with 0xA5 "stale" bytes,
 * then @req (@len bytes) is copied in, REQUEST is written.  Copies the
 * response slot to @resp (176 bytes, may be NULL).  Returns ERR as a
 * signed value (0 or -errno).
 */
int fg_cmd(FakeGuest *fg, const void *req, size_t len,
           union pvrdma_cmd_resp *resp);

/* Convenience wrappers; each returns ERR (0 or -errno). */
int fg_create_uc(FakeGuest *fg, uint32_t uar_index, uint32_t *ctx);
int fg_destroy_uc(FakeGuest *fg, uint32_t ctx);
int fg_create_pd(FakeGuest *fg, uint32_t ctx, uint32_t *pd);
int fg_destroy_pd(FakeGuest *fg, uint32_t pd);
/* A CQ of @cqe entries with the exact page count; pdir kept in *pdir. */
int fg_create_cq(FakeGuest *fg, uint32_t ctx, uint32_t cqe, uint32_t *cq);
int fg_create_cq_pages(FakeGuest *fg, uint32_t ctx, uint32_t cqe,
                       uint32_t nchunks, uint64_t *pages, uint32_t *cq);
int fg_destroy_cq(FakeGuest *fg, uint32_t cq);
int fg_create_dma_mr(FakeGuest *fg, uint32_t pd, uint32_t *mr,
                     uint32_t *lkey);
int fg_create_user_mr(FakeGuest *fg, uint32_t pd, uint64_t start,
                      uint64_t length, uint32_t access, uint32_t *mr,
                      uint32_t *lkey, uint32_t *rkey);
int fg_destroy_mr(FakeGuest *fg, uint32_t mr);
/* MODIFY_MR (PVRDMA_EX_CAP_MODIFY_MR): PVRDMA_MODIFY_MR_* @flags. */
int fg_modify_mr(FakeGuest *fg, uint32_t mr, uint32_t flags,
                 uint32_t access, uint32_t pd);
/* Every counter (PVRDMA_CTR_NUM of them) through QUERY_COUNTERS. */
void fg_counters(FakeGuest *fg, uint64_t *v);

/* CREATE_QP request with consistent sizes, ready to tweak. */
void fg_qp_req(FakeGuest *fg, struct pvrdma_cmd_create_qp *c, uint8_t type,
               uint32_t pd, uint32_t scq, uint32_t rcq, uint32_t wr,
               uint32_t sge);
int fg_create_qp(FakeGuest *fg, uint8_t type, uint32_t pd, uint32_t cq,
                 uint32_t *qp, uint32_t *qpn);
int fg_destroy_qp(FakeGuest *fg, uint32_t qp);
int fg_modify_qp(FakeGuest *fg, uint32_t qp, uint32_t mask,
                 const struct pvrdma_qp_attr *attr);
int fg_query_qp(FakeGuest *fg, uint32_t qp, struct pvrdma_qp_attr *attr);
/* Bind GID index @index to a fixed test GID (byte 15 = @index). */
int fg_bind_gid(FakeGuest *fg, uint32_t index);
void fg_test_gid(uint32_t index, uint8_t gid[16]);
/* RC QP through RESET->INIT->RTR->RTS with standard masks; returns ERR. */
int fg_qp_to_rts(FakeGuest *fg, uint32_t qp, uint8_t type);

void fg_srq_req(FakeGuest *fg, struct pvrdma_cmd_create_srq *c, uint32_t pd,
                uint32_t max_wr, uint32_t max_sge);
int fg_create_srq(FakeGuest *fg, uint32_t pd, uint32_t max_wr,
                  uint32_t max_sge, uint32_t *srq);
int fg_destroy_srq(FakeGuest *fg, uint32_t srq);

/*
 * Recording backend: counts every op; when 'fail' is non-zero, every
 * create/modify/bind op returns it (a negative errno).
 */
typedef struct FgBackend {
    unsigned pd_create, pd_destroy, mr_register, mr_deregister;
    unsigned cq_create, cq_destroy, qp_create, qp_modify, qp_destroy;
    unsigned srq_create, srq_modify, srq_destroy, gid_bind, gid_unbind;
    unsigned submit, recv_posted, reset;
    uint32_t last_handle;
    int fail;
} FgBackend;

/* A backend that offers no memory windows (and does nothing else). */
const PvrdmaBackendOps *fg_backend_without_windows(void);

/* Replace the core's backend (call before fg_setup()); freed by the core. */
FgBackend *fg_use_recording_backend(FakeGuest *fg);

/*
 * Attach the software fabric (fake_fabric.c, fabric tests only): every
 * guest joined shares one fabric, like the devices of one QEMU process.
 */
void fg_join_fabric(FakeGuest *fg);

#endif /* TESTS_UNIT_FAKE_GUEST_H */
