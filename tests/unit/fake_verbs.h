/*
 * Fake guest "verbs" for the data path tests: CQs, QPs and SRQs whose
 * rings the test reads and writes like the Linux driver / provider
 * (spec §8), MRs over real fake-guest pages, and readers for the async
 * event and CQ notification rings.  Built on fake_guest.[ch].
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef TESTS_UNIT_FAKE_VERBS_H
#define TESTS_UNIT_FAKE_VERBS_H

#include <stdbool.h>
#include <stdint.h>

#include "fake_guest.h"

#ifndef FV_MAX_PAGES                /* a benchmark may want bigger MRs */
#define FV_MAX_PAGES        64
#endif

typedef struct FvCq {
    FakeGuest *fg;
    uint32_t handle;
    uint32_t n;
    uint64_t pages[FV_MAX_PAGES];
    uint32_t npages;
} FvCq;

typedef struct FvSrq {
    FakeGuest *fg;
    uint32_t handle;
    uint32_t n;
    uint32_t wqe;
    uint64_t pages[FV_MAX_PAGES];
} FvSrq;

typedef struct FvQp {
    FakeGuest *fg;
    uint32_t handle;
    uint32_t qpn;
    uint8_t type;
    uint32_t sq_n, rq_n;
    uint32_t sq_wqe, rq_wqe;
    uint32_t send_chunks;
    uint64_t pages[FV_MAX_PAGES];
} FvQp;

/* A user MR over separate (non-contiguous) guest pages, VA based. */
typedef struct FvMr {
    FakeGuest *fg;
    uint32_t handle;
    uint32_t lkey;
    uint32_t rkey;
    uint64_t va;
    uint64_t len;
    uint64_t pages[FV_MAX_PAGES];
    uint32_t npages;
} FvMr;

/* Options of fv_connect(). */
typedef struct FvConnOpts {
    uint32_t access;            /* qp_access_flags of both QPs */
    uint8_t min_rnr_timer;
    uint8_t rnr_retry;
    uint8_t retry_cnt;
} FvConnOpts;

FvCq *fv_cq_new(FakeGuest *fg, uint32_t ctx, uint32_t cqe);
/* Next CQE (advancing cons_head), false if the CQ is empty. */
bool fv_cq_poll(FvCq *cq, struct pvrdma_cqe *cqe);
/* RESIZE_CQ (extended request) to a fresh ring of @cqe entries; on
 * success the CQ is polled there.  Returns the command's result. */
int fv_cq_resize(FvCq *cq, uint32_t cqe);
/* Ring CQ_POLL, as a guest's poll of an empty CQ does. */
void fv_cq_poll_doorbell(FvCq *cq);
uint32_t fv_cq_count(FvCq *cq);
/* Set cons_head directly (hostile-guest tests). */
void fv_cq_set_cons(FvCq *cq, uint32_t cons);

FvSrq *fv_srq_new(FakeGuest *fg, uint32_t pd, uint32_t max_wr,
                  uint32_t max_sge, uint32_t limit);
void fv_srq_post(FvSrq *srq, uint64_t wr_id, const struct pvrdma_sge *sge,
                 uint32_t nsge);
void fv_srq_ring(FvSrq *srq);
void fv_srq_set_prod(FvSrq *srq, uint32_t prod);
int fv_srq_modify_limit(FvSrq *srq, uint32_t limit);
/* MODIFY_SRQ with MAX_WR (PVRDMA_EX_CAP_RESIZE_SRQ): a new ring of
 * @max_wr WQEs, in @nchunks fresh pages (0: the VMware layout, none);
 * @mask adds PVRDMA_SRQ_LIMIT (@limit).  On success @srq is on it. */
int fv_srq_resize_nchunks(FvSrq *srq, uint32_t max_wr, uint32_t limit,
                          uint32_t mask, uint32_t nchunks);
int fv_srq_resize(FvSrq *srq, uint32_t max_wr);

/*
 * XRC (PVRDMA_EX_CAP_XRC): a domain (its handle), an XRC SRQ of it whose
 * receives complete on @cq, and an XRC_TGT QP of it (no queue: its
 * handle and number only).  An XRC_INI QP is made by fv_qp_new()
 * (@rcq and @srq ignored); its sends name the SRQ in hdr.reserved.
 */
uint32_t fv_xrcd_new(FakeGuest *fg);
FvSrq *fv_xrc_srq_new(FakeGuest *fg, uint32_t pd, uint32_t xrcd, FvCq *cq,
                      uint32_t max_wr, uint32_t max_sge);
FvQp *fv_xrc_tgt_new(FakeGuest *fg, uint32_t xrcd);

/* A QP; @srq may be NULL.  sq_sig_all as given. */
FvQp *fv_qp_new(FakeGuest *fg, uint8_t type, uint32_t pd, FvCq *scq,
                FvCq *rcq, FvSrq *srq, uint32_t wr, uint32_t sge,
                bool sig_all);
/*
 * RC QP @a to RTS, connected to @dqpn at @dgid_index's GID of the fake
 * GID set (fg_test_gid).  Returns the modify's ERR.
 */
int fv_qp_rts(FvQp *a, uint32_t dqpn, uint32_t dgid_index,
              const FvConnOpts *o);
/* The same towards the GID @dgid itself (a real device's). */
int fv_qp_rts_gid(FvQp *a, uint32_t dqpn, const uint8_t dgid[16],
                  const FvConnOpts *o);
/* Both ways; both devices must have GID index 0 bound. */
void fv_connect(FvQp *a, FvQp *b, const FvConnOpts *o);
int fv_qp_modify_state(FvQp *qp, uint32_t state);
uint32_t fv_qp_state(FvQp *qp);

/* Write a send WQE at the SQ prod_tail and advance it (no doorbell). */
void fv_post_send(FvQp *qp, const struct pvrdma_sq_wqe_hdr *hdr,
                  const struct pvrdma_sge *sge, uint32_t nsge);
void fv_ring_sq(FvQp *qp);
void fv_post_recv(FvQp *qp, uint64_t wr_id, const struct pvrdma_sge *sge,
                  uint32_t nsge);
void fv_ring_rq(FvQp *qp);
uint32_t fv_sq_prod(FvQp *qp);
uint32_t fv_sq_cons(FvQp *qp);
void fv_sq_set_prod(FvQp *qp, uint32_t prod);
void fv_rq_set_prod(FvQp *qp, uint32_t prod);
/* Zero the guest's ring indexes (what the driver does on RESET). */
void fv_qp_zero_indexes(FvQp *qp);

/* An MR over pages with a gap after each (no two pages contiguous). */
FvMr *fv_mr_new(FakeGuest *fg, uint32_t pd, uint64_t va, uint64_t len,
                uint32_t access);
/* An MR over guest-physically contiguous pages. */
FvMr *fv_mr_new_contig(FakeGuest *fg, uint32_t pd, uint64_t va,
                       uint64_t len, uint32_t access);
/* Host pointer of byte @va of @mr (must be inside). */
uint8_t *fv_mr_ptr(FvMr *mr, uint64_t va);
/* Fill / compare @len bytes at @va with a pattern seeded by @seed. */
void fv_mr_fill(FvMr *mr, uint64_t va, uint64_t len, uint8_t seed);
bool fv_mr_check(FvMr *mr, uint64_t va, uint64_t len, uint8_t seed);
void fv_mr_zero(FvMr *mr);

/* Async event ring: next event, false if none. */
bool fv_async_next(FakeGuest *fg, uint32_t *type, uint32_t *info);
/* Number of pending async events of @type for @info (consumes all). */
unsigned fv_async_count(FakeGuest *fg, uint32_t type, uint32_t info);
/* CQ notification ring: next CQ handle, false if none. */
bool fv_cqn_next(FakeGuest *fg, uint32_t *cq);

/* A fast-reg MR (alloc_mr) and its page list PDIR. */
typedef struct FvFrmr {
    FakeGuest *fg;
    uint32_t handle;
    uint32_t key;
    uint32_t max_sg;
    uint64_t pl_pdir;           /* directory; the table holds the pages */
    uint64_t *pl_table;         /* host pointer of the table page */
    uint64_t pages[FV_MAX_PAGES];
} FvFrmr;

FvFrmr *fv_frmr_new(FakeGuest *fg, uint32_t pd, uint32_t max_sg);
/*
 * Post and ring a signaled REG_MR of @f on @qp: its first @npages pages
 * at @iova, @len bytes, key @key (its byte the new one).
 */
void fv_post_reg_mr(FvQp *qp, FvFrmr *f, uint64_t id, uint64_t iova,
                    uint32_t npages, uint32_t len, uint32_t access,
                    uint32_t key);

/*
 * A memory window (CREATE_MR with PVRDMA_MR_FLAG_MW_TYPE1/2): returns the
 * command's result, the handle and rkey in *@handle / *@rkey.
 */
int fv_mw_new(FakeGuest *fg, uint32_t pd, uint32_t flags, uint32_t *handle,
              uint32_t *rkey);
/*
 * Post and ring a signaled BIND_MW on @qp: window key @rkey (its byte the
 * new one) onto [@addr, @addr + @len) of the MR of @mr_lkey.
 */
void fv_post_bind_mw(FvQp *qp, uint64_t id, uint32_t rkey, uint32_t mr_lkey,
                     uint64_t addr, uint64_t len, uint32_t access);
#endif /* TESTS_UNIT_FAKE_VERBS_H */
