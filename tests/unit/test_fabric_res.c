/*
 * Host memory refused to the fabric (issue 29 point 4): a memfd that
 * cannot be made and a shared ring that cannot be mapped, as the kernel
 * refuses them when memory runs out or the process reaches
 * vm.max_map_count (mmap: ENOMEM).  That limit is host-wide, so a guest
 * test cannot lower it without changing the whole machine: here the
 * fabric's own memfd_create and mmap calls are wrapped (-Wl,--wrap) and
 * made to fail with the errno the kernel returns.
 *
 * What must hold: the link is left down, QEMU says once (not every
 * retry) what ran out and what to raise, the guest sees RETRY_EXC_ERR for
 * the unreachable peer, its device keeps working within itself, and the
 * link comes up by itself once memory is there again, with verified data.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE             /* memfd_create */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>

#include "fake_guest.h"
#include "fake_host.h"
#include "fake_verbs.h"
#include "pvrdma_link.h"

#define ALL_ACCESS  (PVRDMA_ACCESS_LOCAL_WRITE | PVRDMA_ACCESS_REMOTE_WRITE | \
                     PVRDMA_ACCESS_REMOTE_READ)
#define VA          0x7f0000000800ull
#define MR_LEN      (4 * 4096ull)

/* ---- the injection -------------------------------------------------------- */

static struct {
    int memfd_err;              /* memfd_create fails with this (0: not) */
    int mmap_err;               /* a shared mapping fails with this */
    int mmap_prot;              /* ... of this protection exactly */
    unsigned memfd_refused, mmap_refused;
} inj;

int __real_memfd_create(const char *name, unsigned int flags);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd,
                  off_t off);

int __wrap_memfd_create(const char *name, unsigned int flags)
{
    if (inj.memfd_err) {
        inj.memfd_refused++;
        errno = inj.memfd_err;
        return -1;
    }
    return __real_memfd_create(name, flags);
}

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd,
                  off_t off)
{
    if (inj.mmap_err && (flags & MAP_SHARED) && prot == inj.mmap_prot) {
        inj.mmap_refused++;
        errno = inj.mmap_err;
        return MAP_FAILED;
    }
    return __real_mmap(addr, len, prot, flags, fd, off);
}

static void inj_clear(void)
{
    memset(&inj, 0, sizeof(inj));
}

/* ---- two processes of one fabric directory, a guest in each -------------- */

static const FvConnOpts conn_opts = {
    .access = ALL_ACCESS, .min_rnr_timer = 1, .rnr_retry = 7,
    .retry_cnt = 7,
};

typedef struct Side {
    Host *h;
    FakeGuest *fg;
    uint32_t pd;
    FvCq *cq;
    FvMr *mr;
} Side;

static void side_new(Side *s, int index)
{
    s->h = host_new();
    s->fg = host_guest(s->h, index);
    assert_int_equal(fg_create_pd(s->fg, 0, &s->pd), 0);
    s->cq = fv_cq_new(s->fg, 0, 64);
    s->mr = fv_mr_new(s->fg, s->pd, VA, MR_LEN, ALL_ACCESS);
}

static void side_free(Side *s)
{
    fg_free(s->fg);
    host_free(s->h);
    g_free(s->cq);
    g_free(s->mr);
}

static FvQp *qp_new(Side *s)
{
    return fv_qp_new(s->fg, PVRDMA_QPT_RC, s->pd, s->cq, s->cq, NULL, 8, 1,
                     false);
}

/* Run both hosts, the clock moving @ms each round, for @rounds rounds. */
static void tick(Side *a, Side *b, unsigned rounds, int64_t ms)
{
    while (rounds--) {
        a->h->now += ms * 1000000LL;
        b->h->now += ms * 1000000LL;
        run(a->h, b->h, 2);
    }
}

static bool wait_cqe(Side *a, Side *b, FvCq *cq, struct pvrdma_cqe *c)
{
    unsigned i;

    for (i = 0; i < 2000; i++) {
        if (fv_cq_poll(cq, c)) {
            return true;
        }
        run(a->h, b->h, 1);
    }
    return false;
}

/*
 * @x SENDs 64 bytes to @y (from @sx to @sy); the status of the SEND, and
 * with success the receive's data checked.
 */
static uint32_t send_one(Side *sx, FvQp *x, Side *sy, FvQp *y, Side *other,
                         uint8_t seed)
{
    struct pvrdma_sge s = { .addr = VA, .length = 64, .lkey = sx->mr->lkey };
    struct pvrdma_sge r = { .addr = VA + 4096, .length = 64,
                            .lkey = sy->mr->lkey };
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_cqe c;

    memset(&h, 0, sizeof(h));
    h.wr_id = seed;
    h.opcode = PVRDMA_WR_SEND;
    h.send_flags = PVRDMA_WR_FLAG_SIGNALED;
    h.num_sge = 1;
    fv_mr_fill(sx->mr, VA, 64, seed);
    fv_post_recv(y, seed, &r, 1);
    fv_ring_rq(y);
    fv_post_send(x, &h, &s, 1);
    fv_ring_sq(x);
    assert_true(wait_cqe(sx, other, sx->cq, &c));
    assert_int_equal(c.wr_id, seed);
    if (c.status == PVRDMA_WC_SUCCESS) {
        assert_true(wait_cqe(sx, other, sy->cq, &c));
        assert_int_equal(c.wr_id, seed);
        assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
        assert_int_equal(c.byte_len, 64);
        assert_true(fv_mr_check(sy->mr, VA + 4096, 64, seed));
    }
    return c.status;
}

/*
 * a's memfd (@memfd) or a's mapping of b's ring (@map_peer) is refused
 * when b joins the directory a is in.
 */
static void refused_then_recovers(bool memfd, const char *what)
{
    char *dir = g_dir_make_tmp("pvrdma-res-XXXXXX", NULL);
    Side a, b;
    char *err = NULL;
    unsigned reports, i;
    FvQp *qa, *qb, *l1, *l2;

    assert_non_null(dir);
    side_new(&a, 1);
    side_new(&b, 2);
    assert_true(pvrdma_fabric_join_dir(a.h->fab, dir, &err));
    reports = a.h->reports;
    /* b joins (its own ring made), then a's side is refused. */
    assert_true(pvrdma_fabric_join_dir(b.h->fab, dir, &err));
    if (memfd) {
        inj.memfd_err = ENOMEM;
    } else {
        inj.mmap_err = ENOMEM;
        inj.mmap_prot = PROT_READ;
    }
    /* 10 s of retries, every second: said once, the link stays down. */
    tick(&a, &b, 100, 100);
    assert_true(inj.memfd_refused + inj.mmap_refused >= 2);
    assert_int_equal(pvrdma_fabric_links_up(a.h->fab), 0);
    assert_int_equal(pvrdma_fabric_links_up(b.h->fab), 0);
    assert_int_equal(a.h->reports, reports + 1);
    assert_non_null(strstr(a.h->last_report, what));
    assert_non_null(strstr(a.h->last_report, "Cannot allocate memory"));
    assert_non_null(strstr(a.h->last_report, "raise vm.max_map_count"));

    /* The guest: its peer is unreachable, RETRY_EXC_ERR at once. */
    qa = qp_new(&a);
    qb = qp_new(&b);
    fv_connect(qa, qb, &conn_opts);
    assert_int_equal(send_one(&a, qa, &b, qb, &b, 1),
                     PVRDMA_WC_RETRY_EXC_ERR);
    assert_int_equal(fv_qp_state(qa), PVRDMA_QPS_ERR);
    /* Within its own device it keeps working. */
    l1 = qp_new(&a);
    l2 = qp_new(&a);
    fv_connect(l1, l2, &conn_opts);
    assert_int_equal(send_one(&a, l1, &a, l2, &b, 2), PVRDMA_WC_SUCCESS);

    /* Memory again: the link comes up by itself, a new pair works. */
    inj_clear();
    for (i = 0; i < 40 && (pvrdma_fabric_links_up(a.h->fab) != 1 ||
                           pvrdma_fabric_links_up(b.h->fab) != 1); i++) {
        tick(&a, &b, 1, 100);
    }
    tick(&a, &b, 3, 0);         /* GIDS frames */
    assert_int_equal(pvrdma_fabric_links_up(a.h->fab), 1);
    assert_int_equal(pvrdma_fabric_links_up(b.h->fab), 1);
    g_free(qa);
    qa = qp_new(&a);
    assert_int_equal(fv_qp_modify_state(qb, PVRDMA_QPS_RESET), 0);
    fv_qp_zero_indexes(qb);
    fv_connect(qa, qb, &conn_opts);
    assert_int_equal(send_one(&a, qa, &b, qb, &b, 3), PVRDMA_WC_SUCCESS);
    assert_int_equal(send_one(&b, qb, &a, qa, &a, 4), PVRDMA_WC_SUCCESS);

    g_free(qa);
    g_free(qb);
    g_free(l1);
    g_free(l2);
    side_free(&a);
    side_free(&b);
    rmdir(dir);
    g_free(dir);
}

static void test_memfd_refused(void **state)
{
    (void)state;
    refused_then_recovers(true, "cannot make its shared-memory ring");
}

static void test_peer_ring_map_refused(void **state)
{
    (void)state;
    refused_then_recovers(false, "cannot map the peer's shared-memory ring");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memfd_refused),
        cmocka_unit_test(test_peer_ring_map_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
