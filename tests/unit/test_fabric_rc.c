/*
 * Unit tests: the RC data path of the software fabric (docs/datapath.md):
 * every opcode end to end between two QPs of one device and between two
 * devices (two fake guests, each with its own memory and ops), CQE
 * fields, error statuses, RNR with the timer, flushing, async events,
 * CQ overrun and arming, SRQs, fast registration, hostile WQEs and rings.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <glib.h>

#include "fake_guest.h"
#include "fake_verbs.h"
#include "pvrdma_core_int.h"
#include "pvrdma_fabric.h"

#define ALL_ACCESS  (PVRDMA_ACCESS_LOCAL_WRITE | PVRDMA_ACCESS_REMOTE_WRITE | \
                     PVRDMA_ACCESS_REMOTE_READ | PVRDMA_ACCESS_REMOTE_ATOMIC)
#define SIG         PVRDMA_WR_FLAG_SIGNALED
#define VA_A        0x7f0000000800ull   /* not page aligned on purpose */
#define VA_B        0x7e0000000100ull
#define MR_LEN      (5 * 4096ull)

typedef struct Pair {
    FakeGuest *fa, *fb;
    uint32_t pda, pdb;
    FvCq *cqa, *cqb;
    FvQp *a, *b;
    FvMr *ma, *mb;
} Pair;

static const FvConnOpts default_opts = {
    .access = ALL_ACCESS, .min_rnr_timer = 1, .rnr_retry = 7,
    .retry_cnt = 7,
};

static FakeGuest *dev_new(void)
{
    FakeGuest *fg = fg_new(NULL);

    fg_join_fabric(fg);
    fg_setup(fg);
    assert_int_equal(fg_bind_gid(fg, 0), 0);
    return fg;
}

/*
 * QPs a (on fa, type @ta) and b (on fb, == fa unless @two, type @tb),
 * connected.
 */
static Pair *pair_new_typed(bool two, uint8_t ta, uint8_t tb,
                            const FvConnOpts *o, bool sig_all)
{
    Pair *p = g_new0(Pair, 1);

    p->fa = dev_new();
    p->fb = two ? dev_new() : p->fa;
    assert_int_equal(fg_create_pd(p->fa, 0, &p->pda), 0);
    if (two) {
        assert_int_equal(fg_create_pd(p->fb, 0, &p->pdb), 0);
    } else {
        p->pdb = p->pda;
    }
    p->cqa = fv_cq_new(p->fa, 0, 64);
    p->cqb = fv_cq_new(p->fb, 0, 64);
    p->a = fv_qp_new(p->fa, ta, p->pda, p->cqa, p->cqa, NULL, 16, 4,
                     sig_all);
    p->b = fv_qp_new(p->fb, tb, p->pdb, p->cqb, p->cqb, NULL, 16, 4,
                     sig_all);
    p->ma = fv_mr_new(p->fa, p->pda, VA_A, MR_LEN, ALL_ACCESS);
    p->mb = fv_mr_new(p->fb, p->pdb, VA_B, MR_LEN, ALL_ACCESS);
    fv_connect(p->a, p->b, o);
    return p;
}

static Pair *pair_new_opts(bool two, const FvConnOpts *o, bool sig_all)
{
    return pair_new_typed(two, PVRDMA_QPT_RC, PVRDMA_QPT_RC, o, sig_all);
}

static Pair *pair_new(bool two)
{
    return pair_new_opts(two, &default_opts, false);
}

static void pair_free(Pair *p)
{
    FakeGuest *fb = p->fb;

    fg_free(p->fa);
    if (fb != p->fa) {
        fg_free(fb);
    }
    g_free(p->cqa);
    g_free(p->cqb);
    g_free(p->a);
    g_free(p->b);
    g_free(p->ma);
    g_free(p->mb);
    g_free(p);
}

static struct pvrdma_sge sge(FvMr *mr, uint64_t va, uint32_t len)
{
    struct pvrdma_sge s = { .addr = va, .length = len, .lkey = mr->lkey };

    return s;
}

static struct pvrdma_sq_wqe_hdr wqe(uint64_t id, uint32_t op, uint32_t flags,
                                    uint32_t nsge)
{
    struct pvrdma_sq_wqe_hdr h;

    memset(&h, 0, sizeof(h));
    h.wr_id = id;
    h.opcode = op;
    h.send_flags = flags;
    h.num_sge = nsge;
    return h;
}

static struct pvrdma_cqe expect_cqe(FvCq *cq, uint64_t wr_id, uint32_t qp,
                                    uint32_t opcode, uint32_t status,
                                    uint32_t byte_len)
{
    struct pvrdma_cqe c;

    assert_true(fv_cq_poll(cq, &c));
    assert_int_equal(c.wr_id, wr_id);
    assert_int_equal(c.qp, qp);
    assert_int_equal(c.opcode, opcode);
    assert_int_equal(c.status, status);
    assert_int_equal(c.byte_len, byte_len);
    assert_int_equal(c.vendor_err, 0);
    assert_int_equal(c.port_num, 1);
    return c;
}

/* The requester's own CQE: no receive-only fields. */
static void expect_send_cqe(Pair *p, uint64_t wr_id, uint32_t opcode,
                            uint32_t status, uint32_t byte_len)
{
    struct pvrdma_cqe c = expect_cqe(p->cqa, wr_id, p->a->handle, opcode,
                                     status, byte_len);

    assert_int_equal(c.wc_flags, 0);
    assert_int_equal(c.src_qp, 0);
    assert_int_equal(c.imm_data, 0);
}

/* A successful receive CQE on b from a. */
static struct pvrdma_cqe expect_recv_cqe(Pair *p, uint64_t wr_id,
                                         uint32_t opcode, uint32_t byte_len,
                                         uint32_t flags)
{
    struct pvrdma_cqe c = expect_cqe(p->cqb, wr_id, p->b->handle, opcode,
                                     PVRDMA_WC_SUCCESS, byte_len);

    assert_int_equal(c.src_qp, p->a->qpn);
    assert_int_equal(c.wc_flags,
                     flags | PVRDMA_WC_WITH_NETWORK_HDR_TYPE);
    /* fe80::/64 test GIDs are not IPv4-mapped: RoCE v2 over IPv6. */
    assert_int_equal(c.network_hdr_type, PVRDMA_NETWORK_IPV6);
    assert_int_equal(c.sl, 3);
    return c;
}

/* Byte-wise: MR pages are not contiguous in guest memory. */
static void expect_mr_equal(FvMr *x, uint64_t xva, FvMr *y, uint64_t yva,
                            uint64_t len)
{
    uint64_t i;

    for (i = 0; i < len; i++) {
        assert_int_equal(*fv_mr_ptr(x, xva + i), *fv_mr_ptr(y, yva + i));
    }
}

static void expect_empty(FvCq *cq)
{
    struct pvrdma_cqe c;

    assert_false(fv_cq_poll(cq, &c));
}

/* ---- SEND / RECV ------------------------------------------------------ */

static void do_send_recv(bool two)
{
    Pair *p = pair_new(two);
    struct pvrdma_sge s[3], r[2];
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_cqe c;
    uint32_t len = 100 + 5000 + 700;

    /* Three SGEs crossing page boundaries of non-contiguous pages. */
    fv_mr_fill(p->ma, VA_A + 10, 100, 1);
    fv_mr_fill(p->ma, VA_A + 3000, 5000, 2);
    fv_mr_fill(p->ma, VA_A + 12000, 700, 3);
    s[0] = sge(p->ma, VA_A + 10, 100);
    s[1] = sge(p->ma, VA_A + 3000, 5000);
    s[2] = sge(p->ma, VA_A + 12000, 700);
    r[0] = sge(p->mb, VA_B + 4000, 150);
    r[1] = sge(p->mb, VA_B + 8000, 8000);
    fv_post_recv(p->b, 0xb0b0, r, 2);
    fv_ring_rq(p->b);
    h = wqe(0xa0a0, PVRDMA_WR_SEND, SIG, 3);
    fv_post_send(p->a, &h, s, 3);
    fv_ring_sq(p->a);

    expect_send_cqe(p, 0xa0a0, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, len);
    c = expect_recv_cqe(p, 0xb0b0, PVRDMA_WC_RECV, len, 0);
    assert_int_equal(c.imm_data, 0);
    /* bytes: 100 | 5000 | 700 packed into 150 + 8000 */
    assert_true(fv_mr_check(p->mb, VA_B + 4000, 100, 1));
    expect_mr_equal(p->mb, VA_B + 4100, p->ma, VA_A + 3000, 50);
    {
        uint32_t i;

        for (i = 0; i < 5000; i++) {
            uint64_t dst = i < 50 ? VA_B + 4100 + i : VA_B + 8000 + i - 50;

            assert_int_equal(*fv_mr_ptr(p->mb, dst),
                             *fv_mr_ptr(p->ma, VA_A + 3000 + i));
        }
        for (i = 0; i < 700; i++) {
            assert_int_equal(*fv_mr_ptr(p->mb, VA_B + 8000 + 4950 + i),
                             *fv_mr_ptr(p->ma, VA_A + 12000 + i));
        }
    }
    /* the byte after the message is untouched */
    assert_int_equal(*fv_mr_ptr(p->mb, VA_B + 8000 + 5650), 0);
    assert_int_equal(fv_sq_cons(p->a), 1);

    /* SEND_WITH_IMM, solicited, zero SGEs on the receive side too. */
    fv_post_recv(p->b, 7, NULL, 0);
    fv_ring_rq(p->b);
    h = wqe(8, PVRDMA_WR_SEND_WITH_IMM, SIG | PVRDMA_WR_FLAG_SOLICITED, 0);
    h.ex.imm_data = 0x12345678;
    fv_post_send(p->a, &h, NULL, 0);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 8, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 0);
    c = expect_recv_cqe(p, 7, PVRDMA_WC_RECV, 0, PVRDMA_WC_WITH_IMM);
    assert_int_equal(c.imm_data, 0x12345678);
    expect_empty(p->cqa);
    expect_empty(p->cqb);
    assert_int_equal(p->fa->guest_errors, 0);
    assert_int_equal(p->fb->guest_errors, 0);
    pair_free(p);
}

/* ---- UC (project extension) -------------------------------------------- */

/*
 * UC: SENDs and WRITEs arrive as on RC; what the responder drops (no
 * receive WQE, a bad rkey) the requester never hears of, and the
 * responder goes on; READ is refused locally (SQ Error); a receive too
 * small fails there (class D); a UC message to an RC QP is not taken.
 */
static void do_uc(bool two)
{
    Pair *p = pair_new_typed(two, PVRDMA_QPT_UC, PVRDMA_QPT_UC,
                             &default_opts, false);
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_sge s, r;

    fv_mr_fill(p->ma, VA_A, 8192, 7);
    r = sge(p->mb, VA_B + 16000, 2000);
    fv_post_recv(p->b, 1, &r, 1);
    fv_post_recv(p->b, 2, NULL, 0);
    fv_ring_rq(p->b);
    s = sge(p->ma, VA_A + 5, 1000);
    h = wqe(10, PVRDMA_WR_SEND, SIG, 1);
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 10, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 1000);
    expect_recv_cqe(p, 1, PVRDMA_WC_RECV, 1000, 0);
    expect_mr_equal(p->mb, VA_B + 16000, p->ma, VA_A + 5, 1000);

    s = sge(p->ma, VA_A + 100, 3000);
    h = wqe(11, PVRDMA_WR_RDMA_WRITE, SIG, 1);
    h.wr.rdma.remote_addr = VA_B + 8000;
    h.wr.rdma.rkey = p->mb->rkey;
    fv_post_send(p->a, &h, &s, 1);
    s = sge(p->ma, VA_A + 4000, 100);
    h = wqe(12, PVRDMA_WR_RDMA_WRITE_WITH_IMM, SIG, 1);
    h.wr.rdma.remote_addr = VA_B + 100;
    h.wr.rdma.rkey = p->mb->rkey;
    h.ex.imm_data = 0x55;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 11, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 3000);
    expect_send_cqe(p, 12, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 100);
    expect_recv_cqe(p, 2, PVRDMA_WC_RECV_RDMA_WITH_IMM, 100,
                    PVRDMA_WC_WITH_IMM);
    expect_mr_equal(p->mb, VA_B + 8000, p->ma, VA_A + 100, 3000);
    expect_mr_equal(p->mb, VA_B + 100, p->ma, VA_A + 4000, 100);

    /* No receive WQE: dropped (no RNR); a bad rkey: dropped. */
    s = sge(p->ma, VA_A, 64);
    h = wqe(13, PVRDMA_WR_SEND, SIG, 1);
    fv_post_send(p->a, &h, &s, 1);
    h = wqe(14, PVRDMA_WR_RDMA_WRITE, SIG, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = p->mb->rkey ^ 0x100;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 13, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 64);
    expect_send_cqe(p, 14, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 64);
    expect_empty(p->cqb);
    assert_int_equal(*fv_mr_ptr(p->mb, VA_B), 0);
    assert_int_equal(fv_qp_state(p->b), PVRDMA_QPS_RTS);
    assert_int_equal(fv_qp_state(p->a), PVRDMA_QPS_RTS);

    /* The responder goes on: the next SEND with a receive arrives. */
    r = sge(p->mb, VA_B + 16000, 2000);
    fv_post_recv(p->b, 3, &r, 1);
    fv_ring_rq(p->b);
    s = sge(p->ma, VA_A + 2000, 500);
    h = wqe(15, PVRDMA_WR_SEND, SIG, 1);
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 15, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 500);
    expect_recv_cqe(p, 3, PVRDMA_WC_RECV, 500, 0);
    expect_mr_equal(p->mb, VA_B + 16000, p->ma, VA_A + 2000, 500);

    /* A receive too small: it fails there, the requester hears nothing. */
    r = sge(p->mb, VA_B + 16000, 10);
    fv_post_recv(p->b, 4, &r, 1);
    fv_ring_rq(p->b);
    h = wqe(16, PVRDMA_WR_SEND, SIG, 1);
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 16, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 500);
    expect_cqe(p->cqb, 4, p->b->handle, PVRDMA_WC_RECV,
               PVRDMA_WC_LOC_LEN_ERR, 0);
    assert_int_equal(fv_qp_state(p->b), PVRDMA_QPS_ERR);

    /* READ has no place on UC: refused here, the SQ stops (SQE). */
    assert_int_equal(p->fa->guest_errors, 0);
    s = sge(p->ma, VA_A, 64);
    h = wqe(17, PVRDMA_WR_RDMA_READ, SIG, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = p->mb->rkey;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 17, PVRDMA_WC_RDMA_READ, PVRDMA_WC_LOC_QP_OP_ERR, 0);
    assert_int_equal(fv_qp_state(p->a), PVRDMA_QPS_SQE);
    assert_int_equal(p->fa->guest_errors, 1);
    pair_free(p);

    /* A UC requester and an RC responder do not talk. */
    p = pair_new_typed(two, PVRDMA_QPT_UC, PVRDMA_QPT_RC, &default_opts,
                       false);
    r = sge(p->mb, VA_B, 2000);
    fv_post_recv(p->b, 5, &r, 1);
    fv_ring_rq(p->b);
    s = sge(p->ma, VA_A, 100);
    h = wqe(18, PVRDMA_WR_SEND, SIG, 1);
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 18, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 100);
    expect_empty(p->cqb);
    pair_free(p);
}

static void test_uc_loopback(void **state)
{
    (void)state;
    do_uc(false);
}

static void test_uc_two_devices(void **state)
{
    (void)state;
    do_uc(true);
}

static void test_send_recv_loopback(void **state)
{
    (void)state;
    do_send_recv(false);
}

static void test_send_recv_two_devices(void **state)
{
    (void)state;
    do_send_recv(true);
}

/* ---- RDMA WRITE / READ -------------------------------------------------- */

static void do_write_read(bool two)
{
    Pair *p = pair_new(two);
    struct pvrdma_sge s[2];
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_cqe c;

    fv_mr_fill(p->ma, VA_A, 9000, 9);
    s[0] = sge(p->ma, VA_A, 4000);
    s[1] = sge(p->ma, VA_A + 4000, 5000);
    h = wqe(1, PVRDMA_WR_RDMA_WRITE, SIG, 2);
    h.wr.rdma.remote_addr = VA_B + 1234;
    h.wr.rdma.rkey = p->mb->rkey;
    fv_post_send(p->a, &h, s, 2);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 1, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 9000);
    assert_true(fv_mr_check(p->mb, VA_B + 1234, 9000, 9));
    expect_empty(p->cqb);           /* plain WRITE: nothing on b */

    /* WRITE_WITH_IMM consumes a receive (its SGEs are not used). */
    fv_post_recv(p->b, 77, NULL, 0);
    fv_ring_rq(p->b);
    fv_mr_fill(p->ma, VA_A, 300, 4);
    s[0] = sge(p->ma, VA_A, 300);
    h = wqe(2, PVRDMA_WR_RDMA_WRITE_WITH_IMM, SIG, 1);
    h.ex.imm_data = 0xcafef00d;
    h.wr.rdma.remote_addr = VA_B + 20000;
    h.wr.rdma.rkey = p->mb->rkey;
    fv_post_send(p->a, &h, s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 2, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 300);
    c = expect_recv_cqe(p, 77, PVRDMA_WC_RECV_RDMA_WITH_IMM, 300,
                        PVRDMA_WC_WITH_IMM);
    assert_int_equal(c.imm_data, 0xcafef00d);
    assert_true(fv_mr_check(p->mb, VA_B + 20000, 300, 4));

    /* READ back 6000 bytes into two local SGEs. */
    fv_mr_fill(p->mb, VA_B + 100, 6000, 5);
    s[0] = sge(p->ma, VA_A + 10000, 1000);
    s[1] = sge(p->ma, VA_A + 15000, 5000);
    h = wqe(3, PVRDMA_WR_RDMA_READ, SIG, 2);
    h.wr.rdma.remote_addr = VA_B + 100;
    h.wr.rdma.rkey = p->mb->rkey;
    fv_post_send(p->a, &h, s, 2);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 3, PVRDMA_WC_RDMA_READ, PVRDMA_WC_SUCCESS, 6000);
    expect_mr_equal(p->ma, VA_A + 10000, p->mb, VA_B + 100, 1000);
    {
        uint32_t i;

        for (i = 0; i < 5000; i++) {
            assert_int_equal(*fv_mr_ptr(p->ma, VA_A + 15000 + i),
                             *fv_mr_ptr(p->mb, VA_B + 1100 + i));
        }
    }
    /* zero-length WRITE and READ check no rkey */
    h = wqe(4, PVRDMA_WR_RDMA_WRITE, SIG, 0);
    h.wr.rdma.rkey = 0xdeadbeef;
    fv_post_send(p->a, &h, NULL, 0);
    h = wqe(5, PVRDMA_WR_RDMA_READ, SIG, 0);
    h.wr.rdma.rkey = 0xdeadbeef;
    fv_post_send(p->a, &h, NULL, 0);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 4, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 0);
    expect_send_cqe(p, 5, PVRDMA_WC_RDMA_READ, PVRDMA_WC_SUCCESS, 0);
    expect_empty(p->cqb);
    pair_free(p);
}

static void test_write_read_loopback(void **state)
{
    (void)state;
    do_write_read(false);
}

static void test_write_read_two_devices(void **state)
{
    (void)state;
    do_write_read(true);
}

/* ---- atomics ------------------------------------------------------------ */

static void post_atomic(Pair *p, uint64_t id, uint32_t op, uint64_t raddr,
                        uint64_t cmp_add, uint64_t swap, uint64_t laddr)
{
    struct pvrdma_sge s = sge(p->ma, laddr, 8);
    struct pvrdma_sq_wqe_hdr h = wqe(id, op, SIG, 1);

    h.wr.atomic.remote_addr = raddr;
    h.wr.atomic.rkey = p->mb->rkey;
    h.wr.atomic.compare_add = cmp_add;
    h.wr.atomic.swap = swap;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
}

static void do_atomics(bool two)
{
    Pair *p = pair_new(two);
    uint64_t v = 100, r;

    /* 8 bytes straddling the MR's first page boundary are fine: aligned */
    memcpy(fv_mr_ptr(p->mb, VA_B + 0xf00), &v, 8);
    post_atomic(p, 1, PVRDMA_WR_ATOMIC_FETCH_AND_ADD, VA_B + 0xf00, 23, 0,
                VA_A + 8);
    expect_send_cqe(p, 1, PVRDMA_WC_FETCH_ADD, PVRDMA_WC_SUCCESS, 8);
    memcpy(&r, fv_mr_ptr(p->ma, VA_A + 8), 8);
    assert_int_equal(r, 100);
    memcpy(&v, fv_mr_ptr(p->mb, VA_B + 0xf00), 8);
    assert_int_equal(v, 123);

    /* CAS that matches, then one that does not */
    post_atomic(p, 2, PVRDMA_WR_ATOMIC_CMP_AND_SWP, VA_B + 0xf00, 123,
                0x1111222233334444ull, VA_A + 16);
    expect_send_cqe(p, 2, PVRDMA_WC_COMP_SWAP, PVRDMA_WC_SUCCESS, 8);
    memcpy(&r, fv_mr_ptr(p->ma, VA_A + 16), 8);
    assert_int_equal(r, 123);
    memcpy(&v, fv_mr_ptr(p->mb, VA_B + 0xf00), 8);
    assert_int_equal(v, 0x1111222233334444ull);
    post_atomic(p, 3, PVRDMA_WR_ATOMIC_CMP_AND_SWP, VA_B + 0xf00, 5, 6,
                VA_A + 24);
    expect_send_cqe(p, 3, PVRDMA_WC_COMP_SWAP, PVRDMA_WC_SUCCESS, 8);
    memcpy(&r, fv_mr_ptr(p->ma, VA_A + 24), 8);
    assert_int_equal(r, 0x1111222233334444ull);
    memcpy(&v, fv_mr_ptr(p->mb, VA_B + 0xf00), 8);
    assert_int_equal(v, 0x1111222233334444ull);
    expect_empty(p->cqb);
    assert_int_equal(fv_async_count(p->fb, PVRDMA_EQE_TYPE_QP_REQ_ERR,
                                    p->b->handle), 0);

    /* misaligned: invalid request, responder to ERR with QP_REQ_ERR */
    post_atomic(p, 4, PVRDMA_WR_ATOMIC_FETCH_AND_ADD, VA_B + 0xf04, 1, 0,
                VA_A + 32);
    expect_send_cqe(p, 4, PVRDMA_WC_FETCH_ADD, PVRDMA_WC_REM_INV_REQ_ERR, 0);
    assert_int_equal(fv_qp_state(p->a), PVRDMA_QPS_ERR);
    assert_int_equal(fv_qp_state(p->b), PVRDMA_QPS_ERR);
    assert_int_equal(fv_async_count(p->fb, PVRDMA_EQE_TYPE_QP_REQ_ERR,
                                    p->b->handle), 1);
    memcpy(&r, fv_mr_ptr(p->ma, VA_A + 32), 8);
    assert_int_equal(r, 0);
    pair_free(p);
}

static void test_atomics_loopback(void **state)
{
    (void)state;
    do_atomics(false);
}

static void test_atomics_two_devices(void **state)
{
    (void)state;
    do_atomics(true);
}

static void test_atomic_bad(void **state)
{
    Pair *p;
    struct pvrdma_sge s;
    struct pvrdma_sq_wqe_hdr h;

    (void)state;
    /* local buffer shorter than 8 bytes: LOC_LEN_ERR */
    p = pair_new(false);
    s = sge(p->ma, VA_A, 4);
    h = wqe(1, PVRDMA_WR_ATOMIC_FETCH_AND_ADD, SIG, 1);
    h.wr.atomic.remote_addr = VA_B;
    h.wr.atomic.rkey = p->mb->rkey;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 1, PVRDMA_WC_FETCH_ADD, PVRDMA_WC_LOC_LEN_ERR, 0);
    pair_free(p);

    /* target memory that cannot be mapped: not emulated non-atomically */
    p = pair_new(true);
    p->fb->map_refuse = true;
    post_atomic(p, 2, PVRDMA_WR_ATOMIC_CMP_AND_SWP, VA_B, 0, 1, VA_A);
    expect_send_cqe(p, 2, PVRDMA_WC_COMP_SWAP, PVRDMA_WC_REM_ACCESS_ERR, 0);
    assert_int_equal(fv_async_count(p->fb, PVRDMA_EQE_TYPE_QP_ACCESS_ERR,
                                    p->b->handle), 1);
    pair_free(p);

    /* QP without REMOTE_ATOMIC */
    {
        FvConnOpts o = default_opts;

        o.access = ALL_ACCESS & ~PVRDMA_ACCESS_REMOTE_ATOMIC;
        p = pair_new_opts(false, &o, false);
        post_atomic(p, 3, PVRDMA_WR_ATOMIC_FETCH_AND_ADD, VA_B, 1, 0, VA_A);
        expect_send_cqe(p, 3, PVRDMA_WC_FETCH_ADD, PVRDMA_WC_REM_ACCESS_ERR,
                        0);
        pair_free(p);
    }
}

/* ---- ATOMIC_WRITE (PVRDMA_EX_CAP_ATOMIC_WRITE) -------------------------- */

static void post_atomic_write(Pair *p, uint64_t id, uint64_t raddr,
                              uint32_t rkey, uint64_t value)
{
    struct pvrdma_sq_wqe_hdr h = wqe(id, PVRDMA_WR_ATOMIC_WRITE, SIG, 0);

    h.wr.atomic.remote_addr = raddr;
    h.wr.atomic.rkey = rkey;
    h.wr.atomic.swap = value;
    fv_post_send(p->a, &h, NULL, 0);
    fv_ring_sq(p->a);
}

static uint64_t mr_u64(FvMr *m, uint64_t va)
{
    uint64_t v;

    memcpy(&v, fv_mr_ptr(m, va), 8);
    return v;
}

/*
 * The 8 bytes land where asked, nothing around them, no receive WQE
 * taken; after an RDMA WRITE to the same place (in order, the later
 * wins); misaligned: invalid request, both QPs to ERR.
 */
static void do_atomic_write(bool two)
{
    Pair *p = pair_new(two);
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_sge s;
    uint8_t was[32];

    assert_true(p->fa->core->caps.ex_comp_mask & PVRDMA_EX_CAP_ATOMIC_WRITE);
    fv_mr_fill(p->mb, VA_B + 0xff0, 32, 3);
    memcpy(was, fv_mr_ptr(p->mb, VA_B + 0xff0), 32);
    post_atomic_write(p, 1, VA_B + 0xff8, p->mb->rkey,
                      0x0123456789abcdefull);
    expect_send_cqe(p, 1, PVRDMA_WC_ATOMIC_WRITE, PVRDMA_WC_SUCCESS, 8);
    assert_int_equal(mr_u64(p->mb, VA_B + 0xff8), 0x0123456789abcdefull);
    assert_memory_equal(fv_mr_ptr(p->mb, VA_B + 0xff0), was, 8);
    assert_memory_equal(fv_mr_ptr(p->mb, VA_B + 0x1000), was + 16, 16);

    fv_mr_fill(p->ma, VA_A, 64, 9);
    s = sge(p->ma, VA_A, 64);
    h = wqe(2, PVRDMA_WR_RDMA_WRITE, SIG, 1);
    h.wr.rdma.remote_addr = VA_B + 0x100;
    h.wr.rdma.rkey = p->mb->rkey;
    fv_post_send(p->a, &h, &s, 1);
    post_atomic_write(p, 3, VA_B + 0x108, p->mb->rkey, 77);
    expect_send_cqe(p, 2, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 64);
    expect_send_cqe(p, 3, PVRDMA_WC_ATOMIC_WRITE, PVRDMA_WC_SUCCESS, 8);
    assert_int_equal(mr_u64(p->mb, VA_B + 0x108), 77);
    assert_true(fv_mr_check(p->mb, VA_B + 0x100, 8, 9));
    expect_empty(p->cqb);

    post_atomic_write(p, 4, VA_B + 0x204, p->mb->rkey, 1);
    expect_send_cqe(p, 4, PVRDMA_WC_ATOMIC_WRITE, PVRDMA_WC_REM_INV_REQ_ERR,
                    0);
    assert_int_equal(fv_qp_state(p->a), PVRDMA_QPS_ERR);
    assert_int_equal(fv_qp_state(p->b), PVRDMA_QPS_ERR);
    assert_int_equal(mr_u64(p->mb, VA_B + 0x200), 0);
    assert_int_equal(p->fa->guest_errors + p->fb->guest_errors, 0);
    pair_free(p);
}

static void test_atomic_write_loopback(void **state)
{
    (void)state;
    do_atomic_write(false);
}

static void test_atomic_write_two_devices(void **state)
{
    (void)state;
    do_atomic_write(true);
}

/*
 * Refused: a responder QP or an MR without REMOTE_WRITE (REMOTE_ATOMIC is
 * not enough), a target that is not RAM; on a UC QP and on a device that
 * did not announce it, locally (a guest error each).
 */
static void test_atomic_write_bad(void **state)
{
    FvConnOpts o = default_opts;
    FvMr *ro;
    Pair *p;

    (void)state;
    o.access = ALL_ACCESS & ~PVRDMA_ACCESS_REMOTE_WRITE;
    p = pair_new_opts(false, &o, false);
    post_atomic_write(p, 1, VA_B, p->mb->rkey, 7);
    expect_send_cqe(p, 1, PVRDMA_WC_ATOMIC_WRITE, PVRDMA_WC_REM_ACCESS_ERR,
                    0);
    assert_int_equal(mr_u64(p->mb, VA_B), 0);
    pair_free(p);

    p = pair_new(true);
    ro = fv_mr_new(p->fb, p->pdb, VA_B, MR_LEN,
                   ALL_ACCESS & ~PVRDMA_ACCESS_REMOTE_WRITE);
    post_atomic_write(p, 2, VA_B, ro->rkey, 7);
    expect_send_cqe(p, 2, PVRDMA_WC_ATOMIC_WRITE, PVRDMA_WC_REM_ACCESS_ERR,
                    0);
    assert_int_equal(mr_u64(p->mb, VA_B), 0);
    g_free(ro);
    pair_free(p);

    p = pair_new(true);
    p->fb->map_refuse = true;
    post_atomic_write(p, 3, VA_B, p->mb->rkey, 7);
    expect_send_cqe(p, 3, PVRDMA_WC_ATOMIC_WRITE, PVRDMA_WC_REM_ACCESS_ERR,
                    0);
    pair_free(p);

    p = pair_new_typed(false, PVRDMA_QPT_UC, PVRDMA_QPT_UC, &default_opts,
                       false);
    post_atomic_write(p, 4, VA_B, p->mb->rkey, 7);
    expect_send_cqe(p, 4, PVRDMA_WC_ATOMIC_WRITE, PVRDMA_WC_LOC_QP_OP_ERR, 0);
    assert_int_equal(p->fa->guest_errors, 1);
    assert_int_equal(mr_u64(p->mb, VA_B), 0);
    pair_free(p);

    p = pair_new(false);
    p->fa->core->caps.ex_comp_mask &= ~PVRDMA_EX_CAP_ATOMIC_WRITE;
    post_atomic_write(p, 5, VA_B, p->mb->rkey, 7);
    expect_send_cqe(p, 5, PVRDMA_WC_ATOMIC_WRITE, PVRDMA_WC_LOC_QP_OP_ERR, 0);
    assert_int_equal(p->fa->guest_errors, 1);
    assert_int_equal(mr_u64(p->mb, VA_B), 0);
    pair_free(p);
}


/* ---- signaled / unsignaled ---------------------------------------------- */

static void test_unsignaled(void **state)
{
    Pair *p = pair_new(false);
    struct pvrdma_sge s = sge(p->ma, VA_A, 64), r = sge(p->mb, VA_B, 64);
    struct pvrdma_sq_wqe_hdr h;

    (void)state;
    fv_post_recv(p->b, 1, &r, 1);
    fv_post_recv(p->b, 2, &r, 1);
    fv_ring_rq(p->b);
    h = wqe(10, PVRDMA_WR_SEND, 0, 1);
    fv_post_send(p->a, &h, &s, 1);
    h = wqe(11, PVRDMA_WR_SEND, SIG, 1);
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    /* only the signaled one completes, both were consumed */
    expect_send_cqe(p, 11, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 64);
    expect_empty(p->cqa);
    assert_int_equal(fv_sq_cons(p->a), 2);
    expect_recv_cqe(p, 1, PVRDMA_WC_RECV, 64, 0);
    expect_recv_cqe(p, 2, PVRDMA_WC_RECV, 64, 0);
    /* an unsignaled error still completes */
    h = wqe(12, PVRDMA_WR_RDMA_WRITE, 0, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = p->mb->rkey + 1;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 12, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_REM_ACCESS_ERR,
                    0);
    pair_free(p);

    /* sq_sig_all: every WQE completes */
    p = pair_new_opts(false, &default_opts, true);
    s = sge(p->ma, VA_A, 8);
    h = wqe(20, PVRDMA_WR_RDMA_WRITE, 0, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = p->mb->rkey;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 20, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 8);
    pair_free(p);
}

/* ---- local errors ------------------------------------------------------- */

static void send_one(Pair *p, uint64_t id, uint32_t op,
                     const struct pvrdma_sge *s, uint32_t n)
{
    struct pvrdma_sq_wqe_hdr h = wqe(id, op, SIG, n);

    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = p->mb->rkey;
    fv_post_send(p->a, &h, s, n);
    fv_ring_sq(p->a);
}

static void test_loc_prot_err(void **state)
{
    struct {
        uint32_t op;
        int kind;
    } cases[] = {
        { PVRDMA_WR_SEND, 0 },          /* unknown lkey */
        { PVRDMA_WR_SEND, 1 },          /* key of another PD */
        { PVRDMA_WR_SEND, 2 },          /* beyond the MR */
        { PVRDMA_WR_SEND, 3 },          /* before the MR */
        { PVRDMA_WR_RDMA_READ, 4 },     /* READ into an MR w/o LOCAL_WRITE */
        { PVRDMA_WR_RDMA_WRITE, 5 },    /* address overflows */
        { PVRDMA_WR_SEND, 6 },          /* stale key byte */
    };
    unsigned i;

    (void)state;
    for (i = 0; i < G_N_ELEMENTS(cases); i++) {
        Pair *p = pair_new(false);
        struct pvrdma_sge s = sge(p->ma, VA_A, 16);
        uint32_t pd2;
        FvMr *other, *ro;

        switch (cases[i].kind) {
        case 0:
            s.lkey = 0x7f0001;
            break;
        case 1:
            assert_int_equal(fg_create_pd(p->fa, 0, &pd2), 0);
            other = fv_mr_new(p->fa, pd2, VA_A, 4096, ALL_ACCESS);
            s.lkey = other->lkey;
            g_free(other);
            break;
        case 2:
            s.addr = VA_A + MR_LEN - 8;
            break;
        case 3:
            s.addr = VA_A - 1;
            break;
        case 4:
            ro = fv_mr_new(p->fa, p->pda, VA_A, 4096, 0);
            s.lkey = ro->lkey;
            g_free(ro);
            break;
        case 5:
            s.addr = UINT64_MAX - 4;
            break;
        case 6:
            s.lkey ^= 0x80;
            break;
        }
        if (cases[i].op == PVRDMA_WR_SEND) {
            struct pvrdma_sge r = sge(p->mb, VA_B, 64);

            fv_post_recv(p->b, 5, &r, 1);
            fv_ring_rq(p->b);
        }
        send_one(p, 100 + i, cases[i].op, &s, 1);
        expect_send_cqe(p, 100 + i, pvrdma_wq_wc_opcode(cases[i].op),
                        PVRDMA_WC_LOC_PROT_ERR, 0);
        assert_int_equal(fv_qp_state(p->a), PVRDMA_QPS_ERR);
        /* the responder saw nothing and is fine */
        assert_int_equal(fv_qp_state(p->b), PVRDMA_QPS_RTS);
        expect_empty(p->cqb);
        pair_free(p);
    }
}

static void test_loc_len_err(void **state)
{
    Pair *p = pair_new(false);
    struct pvrdma_sge s[5];
    unsigned i;

    (void)state;
    /* num_sge above max_send_sge (4), still inside the 256-byte slot */
    for (i = 0; i < 5; i++) {
        s[i] = sge(p->ma, VA_A, 1);
    }
    send_one(p, 1, PVRDMA_WR_RDMA_WRITE, s, 5);
    expect_send_cqe(p, 1, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_LOC_LEN_ERR, 0);
    assert_int_equal(fv_qp_state(p->a), PVRDMA_QPS_ERR);
    pair_free(p);

    /* a message above max_msg_sz (2^31), u32 lengths summing past 2^32 */
    p = pair_new(false);
    s[0] = sge(p->ma, VA_A, 0x80000000u);
    s[1] = sge(p->ma, VA_A, 0xffffffffu);
    s[2] = sge(p->ma, VA_A, 2);
    send_one(p, 2, PVRDMA_WR_RDMA_WRITE, s, 3);
    expect_send_cqe(p, 2, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_LOC_LEN_ERR, 0);
    pair_free(p);

    /* num_sge far beyond the WQE slot */
    p = pair_new(false);
    {
        struct pvrdma_sq_wqe_hdr h = wqe(3, PVRDMA_WR_SEND, SIG, 0);

        fv_post_send(p->a, &h, NULL, 0);
        /* patch num_sge in guest memory after posting */
        ((struct pvrdma_sq_wqe_hdr *)fg_ptr(p->fa, p->a->pages[1]))->num_sge =
            0xffffffffu;
        fv_ring_sq(p->a);
        expect_send_cqe(p, 3, PVRDMA_WC_SEND, PVRDMA_WC_LOC_LEN_ERR, 0);
    }
    pair_free(p);
}

static void test_bad_opcodes(void **state)
{
    static const uint32_t ops[] = {
        PVRDMA_WR_LSO, PVRDMA_WR_RDMA_READ_WITH_INV,
        PVRDMA_WR_MASKED_ATOMIC_CMP_AND_SWP,
        PVRDMA_WR_MASKED_ATOMIC_FETCH_AND_ADD,
        PVRDMA_WR_REG_SIG_MR, PVRDMA_WR_ERROR, 17, 0x7fffffff, 0xffffffff,
    };
    unsigned i;

    (void)state;
    for (i = 0; i < G_N_ELEMENTS(ops); i++) {
        Pair *p = pair_new(false);
        struct pvrdma_sge s = sge(p->ma, VA_A, 8);
        struct pvrdma_sq_wqe_hdr h = wqe(i, ops[i], 0, 1);

        /* errors complete even unsignaled; later WQEs are flushed */
        fv_post_send(p->a, &h, &s, 1);
        h = wqe(99, PVRDMA_WR_RDMA_WRITE, 0, 0);
        fv_post_send(p->a, &h, NULL, 0);
        fv_ring_sq(p->a);
        expect_send_cqe(p, i, pvrdma_wq_wc_opcode(ops[i]),
                        PVRDMA_WC_LOC_QP_OP_ERR, 0);
        expect_send_cqe(p, 99, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_WR_FLUSH_ERR,
                        0);
        expect_empty(p->cqa);
        assert_int_equal(fv_qp_state(p->a), PVRDMA_QPS_ERR);
        pair_free(p);
    }
}

/* ---- UD and GSI ---------------------------------------------------------- */

typedef struct Ud {
    FakeGuest *fa, *fb;
    uint32_t pda, pdb;
    FvCq *cqa, *cqb;
    FvQp *a, *b;
    FvMr *ma, *mb;
} Ud;

/* UD QPs a (on fa) and b (on fb, == fa unless @two) in RTS, Q_Key 0x11111111. */
static Ud *ud_new(bool two, FvSrq **srq)
{
    Ud *u = g_new0(Ud, 1);

    u->fa = dev_new();
    u->fb = two ? dev_new() : u->fa;
    assert_int_equal(fg_create_pd(u->fa, 0, &u->pda), 0);
    u->pdb = u->pda;
    if (two) {
        assert_int_equal(fg_create_pd(u->fb, 0, &u->pdb), 0);
    }
    u->cqa = fv_cq_new(u->fa, 0, 64);
    u->cqb = fv_cq_new(u->fb, 0, 64);
    if (srq) {
        *srq = fv_srq_new(u->fb, u->pdb, 16, 2, 0);
    }
    u->a = fv_qp_new(u->fa, PVRDMA_QPT_UD, u->pda, u->cqa, u->cqa, NULL, 16,
                     2, false);
    u->b = fv_qp_new(u->fb, PVRDMA_QPT_UD, u->pdb, u->cqb, u->cqb,
                     srq ? *srq : NULL, 16, 2, false);
    assert_int_equal(fg_qp_to_rts(u->fa, u->a->handle, PVRDMA_QPT_UD), 0);
    assert_int_equal(fg_qp_to_rts(u->fb, u->b->handle, PVRDMA_QPT_UD), 0);
    u->ma = fv_mr_new(u->fa, u->pda, VA_A, MR_LEN, ALL_ACCESS);
    u->mb = fv_mr_new(u->fb, u->pdb, VA_B, MR_LEN, ALL_ACCESS);
    return u;
}

static void ud_free(Ud *u)
{
    fg_free(u->fa);
    if (u->fb != u->fa) {
        fg_free(u->fb);
    }
    g_free(u->cqa);
    g_free(u->cqb);
    g_free(u->a);
    g_free(u->b);
    g_free(u->ma);
    g_free(u->mb);
    g_free(u);
}

/* Send @len pattern bytes from a (VA_A) to @qpn, GID index @gid. */
static void ud_send(Ud *u, uint64_t id, uint32_t op, uint32_t len,
                    uint32_t qpn, uint32_t qkey, uint32_t gid)
{
    struct pvrdma_sge s = sge(u->ma, VA_A, len);
    struct pvrdma_sq_wqe_hdr h = wqe(id, op, PVRDMA_WR_FLAG_SIGNALED, 1);
    uint32_t i;

    for (i = 0; i < len; i++) {
        *fv_mr_ptr(u->ma, VA_A + i) = (uint8_t)(i * 13 + id);
    }
    h.ex.imm_data = 0xabcd0000 | (uint32_t)id;
    h.wr.ud.remote_qpn = qpn;
    h.wr.ud.remote_qkey = qkey;
    h.wr.ud.av.port_pd = u->pda | 1u << 24;
    h.wr.ud.av.sl_tclass_flowlabel = 0x12u << 20 | 0x34567;
    h.wr.ud.av.gid_index = gid;
    h.wr.ud.av.hop_limit = 64;
    fg_test_gid(gid, h.wr.ud.av.dgid);
    if (gid == 1) {
        /* ::ffff:10.1.2.3 */
        memset(h.wr.ud.av.dgid, 0, 16);
        h.wr.ud.av.dgid[10] = h.wr.ud.av.dgid[11] = 0xff;
        h.wr.ud.av.dgid[12] = 10;
        h.wr.ud.av.dgid[13] = 1;
        h.wr.ud.av.dgid[14] = 2;
        h.wr.ud.av.dgid[15] = 3;
    }
    fv_post_send(u->a, &h, len ? &s : NULL, len ? 1 : 0);
    fv_ring_sq(u->a);
}

/* SQE -> RTS, as ib_mad.c recovers QP1 (STATE | CUR_STATE). */
static void ud_recover(Ud *u)
{
    struct pvrdma_qp_attr a;

    assert_int_equal(fv_qp_state(u->a), PVRDMA_QPS_SQE);
    memset(&a, 0, sizeof(a));
    a.qp_state = PVRDMA_QPS_RTS;
    a.cur_qp_state = PVRDMA_QPS_SQE;
    assert_int_equal(fg_modify_qp(u->fa, u->a->handle, PVRDMA_QP_STATE |
                                  PVRDMA_QP_CUR_STATE, &a), 0);
    assert_int_equal(fv_qp_state(u->a), PVRDMA_QPS_RTS);
}

/* The sender's successful completion (a datagram is gone once sent). */
static void ud_sent(Ud *u, uint64_t id, uint32_t len)
{
    struct pvrdma_cqe c = expect_cqe(u->cqa, id, u->a->handle,
                                     PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, len);

    assert_int_equal(c.wc_flags, 0);
}

static void ud_post_recv(Ud *u, FvSrq *srq, uint64_t id, uint32_t len)
{
    struct pvrdma_sge s = sge(u->mb, VA_B, len);

    memset(fv_mr_ptr(u->mb, VA_B), 0xee, len);
    if (srq) {
        fv_srq_post(srq, id, &s, 1);
        fv_srq_ring(srq);
    } else {
        fv_post_recv(u->b, id, &s, 1);
        fv_ring_rq(u->b);
    }
}

/* Receive @id of @len bytes sent by ud_send(@sid, SEND_WITH_IMM). */
static void ud_expect_recv(Ud *u, uint64_t id, uint64_t sid, uint32_t len,
                           bool ipv4)
{
    struct pvrdma_cqe c = expect_cqe(u->cqb, id, u->b->handle,
                                     PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS,
                                     40 + len);
    uint8_t *g = fv_mr_ptr(u->mb, VA_B);
    uint32_t i, rest = 8 + 12 + 8 + len + 4;

    assert_int_equal(c.src_qp, u->a->qpn);
    assert_int_equal(c.wc_flags, PVRDMA_WC_GRH | PVRDMA_WC_WITH_IMM |
                                 PVRDMA_WC_WITH_NETWORK_HDR_TYPE);
    assert_int_equal(c.imm_data, 0xabcd0000 | (uint32_t)sid);
    assert_int_equal(c.network_hdr_type,
                     ipv4 ? PVRDMA_NETWORK_IPV4 : PVRDMA_NETWORK_IPV6);
    /* RoCE v2 packet type in sl, as ConnectX reports it (UCX reads it) */
    assert_int_equal(c.sl, ipv4 ? 0xa : 0x9);
    if (ipv4) {
        uint32_t sum = 0;

        for (i = 0; i < 20; i++) {
            assert_int_equal(g[i], 0);
        }
        g += 20;
        assert_int_equal(g[0], 0x45);
        assert_int_equal(g[1], 0x12);                   /* tclass */
        assert_int_equal(g[2] << 8 | g[3], 20 + rest);
        assert_int_equal(g[8], 64);
        assert_int_equal(g[9], 17);
        assert_int_equal(g[16], 10);                    /* daddr */
        assert_int_equal(g[19], 3);
        for (i = 0; i < 20; i += 2) {
            sum += g[i] << 8 | g[i + 1];
        }
        while (sum >> 16) {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        assert_int_equal(sum, 0xffff);                  /* checksum */
    } else {
        uint8_t dgid[16];

        assert_int_equal(g[0], 0x61);                   /* 6, tclass 0x1. */
        assert_int_equal(g[1], 0x23);                   /* .2, flow 0x3.. */
        assert_int_equal(g[2] << 8 | g[3], 0x4567);
        assert_int_equal(g[4] << 8 | g[5], rest);
        assert_int_equal(g[6], 17);
        assert_int_equal(g[7], 64);
        fg_test_gid(0, dgid);
        assert_memory_equal(g + 8, dgid, 16);           /* sgid */
        assert_memory_equal(g + 24, dgid, 16);
    }
    for (i = 0; i < len; i++) {
        assert_int_equal(*fv_mr_ptr(u->mb, VA_B + 40 + i),
                         (uint8_t)(i * 13 + sid));
    }
}

static void do_ud(bool two)
{
    Ud *u = ud_new(two, NULL);
    struct pvrdma_cqe c;
    uint32_t qk = 0x11111111;

    /* One MTU of payload, with its GRH. */
    ud_post_recv(u, NULL, 100, 40 + 4096);
    ud_send(u, 1, PVRDMA_WR_SEND_WITH_IMM, 4096, u->b->qpn, qk, 0);
    ud_sent(u, 1, 4096);
    ud_expect_recv(u, 100, 1, 4096, false);
    /* A Q_Key with bit 31 set means the sender QP's own (0x11111111). */
    ud_post_recv(u, NULL, 101, 40 + 64);
    ud_send(u, 2, PVRDMA_WR_SEND_WITH_IMM, 64, u->b->qpn, 0x80000000u, 0);
    ud_sent(u, 2, 64);
    ud_expect_recv(u, 101, 2, 64, false);
    /*
     * Lost datagrams complete successfully at the sender and leave the
     * receive WQE posted: a wrong Q_Key, no such QP, longer than the
     * receive buffer; an empty receive queue is no RNR either.
     */
    ud_post_recv(u, NULL, 102, 40 + 64);
    ud_send(u, 3, PVRDMA_WR_SEND, 16, u->b->qpn, 0x22222222, 0);
    ud_send(u, 4, PVRDMA_WR_SEND, 16, u->b->qpn + 77, qk, 0);
    ud_send(u, 5, PVRDMA_WR_SEND, 65, u->b->qpn, qk, 0);
    ud_send(u, 6, PVRDMA_WR_SEND, 16, u->b->qpn, qk, 5);   /* unbound */
    ud_sent(u, 3, 16);
    ud_sent(u, 4, 16);
    ud_sent(u, 5, 65);
    /*
     * An address vector with an unbound source GID: a local error, and
     * the QP's send queue stops in SQE (IBA 10.3.1): a WQE posted then
     * is flushed, receives go on, MODIFY_QP SQE -> RTS (as the MAD layer
     * sends it, with CUR_STATE) resumes.
     */
    expect_cqe(u->cqa, 6, u->a->handle, PVRDMA_WC_SEND,
               PVRDMA_WC_LOC_QP_OP_ERR, 0);
    assert_false(fv_cq_poll(u->cqb, &c));
    assert_int_equal(fv_qp_state(u->a), PVRDMA_QPS_SQE);
    ud_send(u, 7, PVRDMA_WR_SEND_WITH_IMM, 64, u->b->qpn, qk, 0);
    expect_cqe(u->cqa, 7, u->a->handle, PVRDMA_WC_SEND,
               PVRDMA_WC_WR_FLUSH_ERR, 0);
    ud_recover(u);
    ud_send(u, 8, PVRDMA_WR_SEND_WITH_IMM, 64, u->b->qpn, qk, 0);
    ud_sent(u, 8, 64);
    ud_expect_recv(u, 102, 8, 64, false);
    /* Nothing posted: dropped, no RNR. */
    ud_send(u, 9, PVRDMA_WR_SEND, 64, u->b->qpn, qk, 0);
    ud_sent(u, 9, 64);
    assert_false(fv_cq_poll(u->cqb, &c));
    /* Local errors: longer than the MTU; an opcode UD does not have. */
    ud_send(u, 10, PVRDMA_WR_SEND, 4097, u->b->qpn, qk, 0);
    expect_cqe(u->cqa, 10, u->a->handle, PVRDMA_WC_SEND,
               PVRDMA_WC_LOC_LEN_ERR, 0);
    ud_recover(u);
    ud_send(u, 11, PVRDMA_WR_RDMA_WRITE, 16, u->b->qpn, qk, 0);
    expect_cqe(u->cqa, 11, u->a->handle, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_LOC_QP_OP_ERR, 0);
    ud_recover(u);
    assert_int_equal(u->fa->guest_errors, 1);
    assert_int_equal(fv_qp_state(u->a), PVRDMA_QPS_RTS);
    assert_int_equal(fv_qp_state(u->b), PVRDMA_QPS_RTS);
    ud_free(u);
}

static void test_ud_loopback(void **state)
{
    (void)state;
    do_ud(false);
}

static void test_ud_two_devices(void **state)
{
    (void)state;
    do_ud(true);
}

/* IPv4-mapped GIDs: the IPv4 header in the last 20 bytes of the GRH. */
static void test_ud_ipv4(void **state)
{
    struct pvrdma_cmd_create_bind c = { .hdr.cmd = PVRDMA_CMD_CREATE_BIND };
    Ud *u = ud_new(false, NULL);

    (void)state;
    c.mtu = 1024;
    c.vlan = 0xfff;
    c.index = 1;
    c.new_gid[10] = c.new_gid[11] = 0xff;
    c.new_gid[12] = 10;
    c.new_gid[13] = 1;
    c.new_gid[14] = 2;
    c.new_gid[15] = 3;
    c.gid_type = PVRDMA_GID_TYPE_FLAG_ROCE_V2;
    assert_int_equal(fg_cmd(u->fa, &c, sizeof(c), NULL), 0);
    ud_post_recv(u, NULL, 100, 40 + 300);
    ud_send(u, 1, PVRDMA_WR_SEND_WITH_IMM, 300, u->b->qpn, 0x11111111, 1);
    ud_sent(u, 1, 300);
    ud_expect_recv(u, 100, 1, 300, true);
    ud_free(u);
}

/* UD on an SRQ: a message too long for the WQE fails it (class E). */
static void test_ud_srq(void **state)
{
    FvSrq *srq;
    Ud *u = ud_new(true, &srq);
    struct pvrdma_cqe c;

    (void)state;
    ud_post_recv(u, srq, 100, 40 + 64);
    ud_send(u, 1, PVRDMA_WR_SEND, 65, u->b->qpn, 0x11111111, 0);
    ud_sent(u, 1, 65);
    c = expect_cqe(u->cqb, 100, u->b->handle, PVRDMA_WC_RECV,
                   PVRDMA_WC_REM_INV_REQ_ERR, 0);
    (void)c;
    ud_post_recv(u, srq, 101, 40 + 64);
    ud_send(u, 2, PVRDMA_WR_SEND_WITH_IMM, 64, u->b->qpn, 0x11111111, 0);
    ud_sent(u, 2, 64);
    ud_expect_recv(u, 101, 2, 64, false);
    assert_int_equal(fv_qp_state(u->b), PVRDMA_QPS_RTS);
    ud_free(u);
    g_free(srq);
}

/* ---- remote errors ------------------------------------------------------ */

static void test_rem_access_err(void **state)
{
    unsigned kind;

    (void)state;
    for (kind = 0; kind < 8; kind++) {
        FvConnOpts o = default_opts;
        Pair *p;
        struct pvrdma_sge s;
        struct pvrdma_sq_wqe_hdr h;
        uint32_t op = PVRDMA_WR_RDMA_WRITE;

        if (kind == 3) {
            o.access = PVRDMA_ACCESS_LOCAL_WRITE;   /* QP: no remote */
        }
        p = pair_new_opts(kind == 7, &o, false);
        s = sge(p->ma, VA_A, 16);
        h = wqe(kind, op, SIG, 1);
        h.wr.rdma.remote_addr = VA_B;
        h.wr.rdma.rkey = p->mb->rkey;
        switch (kind) {
        case 0:
            h.wr.rdma.rkey = 0x12345601;        /* no such MR */
            break;
        case 1:
            h.wr.rdma.remote_addr = VA_B + MR_LEN - 15;   /* past the end */
            break;
        case 2: {                               /* MR w/o REMOTE_WRITE */
            FvMr *m = fv_mr_new(p->fb, p->pdb, VA_B, 4096,
                                PVRDMA_ACCESS_LOCAL_WRITE |
                                PVRDMA_ACCESS_REMOTE_READ);

            h.wr.rdma.rkey = m->rkey;
            g_free(m);
            break;
        }
        case 3:
            break;
        case 4:                                 /* READ of a WRITE-only MR */
        {
            FvMr *m = fv_mr_new(p->fb, p->pdb, VA_B, 4096,
                                PVRDMA_ACCESS_LOCAL_WRITE |
                                PVRDMA_ACCESS_REMOTE_WRITE);

            h.opcode = op = PVRDMA_WR_RDMA_READ;
            h.wr.rdma.rkey = m->rkey;
            g_free(m);
            break;
        }
        case 5:                                 /* range overflows */
            h.wr.rdma.remote_addr = UINT64_MAX - 7;
            break;
        case 6: {                               /* rkey of another PD */
            uint32_t pd2;
            FvMr *m;

            assert_int_equal(fg_create_pd(p->fb, 0, &pd2), 0);
            m = fv_mr_new(p->fb, pd2, VA_B, 4096, ALL_ACCESS);
            h.wr.rdma.rkey = m->rkey;
            g_free(m);
            break;
        }
        case 7:                 /* two devices: a's own key means nothing */
            h.wr.rdma.rkey = p->ma->rkey + 0x100;
            break;
        }
        fv_post_send(p->a, &h, &s, 1);
        fv_ring_sq(p->a);
        expect_send_cqe(p, kind, pvrdma_wq_wc_opcode(op),
                        PVRDMA_WC_REM_ACCESS_ERR, 0);
        assert_int_equal(fv_qp_state(p->a), PVRDMA_QPS_ERR);
        assert_int_equal(fv_qp_state(p->b), PVRDMA_QPS_ERR);
        assert_int_equal(fv_async_count(p->fb, PVRDMA_EQE_TYPE_QP_ACCESS_ERR,
                                        p->b->handle), 1);
        /* nothing was written */
        assert_int_equal(*fv_mr_ptr(p->mb, VA_B), 0);
        pair_free(p);
    }
}

static void test_rem_inv_req_recv_too_small(void **state)
{
    Pair *p = pair_new(true);
    struct pvrdma_sge s = sge(p->ma, VA_A, 200), r = sge(p->mb, VA_B, 199);
    struct pvrdma_sq_wqe_hdr h;

    (void)state;
    fv_post_recv(p->b, 1, &r, 1);
    fv_post_recv(p->b, 2, &r, 1);
    fv_ring_rq(p->b);
    h = wqe(5, PVRDMA_WR_SEND, SIG, 1);
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 5, PVRDMA_WC_SEND, PVRDMA_WC_REM_INV_REQ_ERR, 0);
    /* receive: LOC_LEN_ERR, then the second one is flushed */
    expect_cqe(p->cqb, 1, p->b->handle, PVRDMA_WC_RECV,
               PVRDMA_WC_LOC_LEN_ERR, 0);
    expect_cqe(p->cqb, 2, p->b->handle, PVRDMA_WC_RECV,
               PVRDMA_WC_WR_FLUSH_ERR, 0);
    expect_empty(p->cqb);
    assert_int_equal(fv_qp_state(p->b), PVRDMA_QPS_ERR);
    assert_int_equal(fv_async_count(p->fb, PVRDMA_EQE_TYPE_QP_REQ_ERR,
                                    p->b->handle), 1);
    pair_free(p);
}

static void test_recv_wqe_bad(void **state)
{
    unsigned kind;

    (void)state;
    for (kind = 0; kind < 3; kind++) {
        Pair *p = pair_new(false);
        struct pvrdma_sge s = sge(p->ma, VA_A, 16), r[5];
        unsigned i, n = 1;

        for (i = 0; i < 5; i++) {
            r[i] = sge(p->mb, VA_B, 4);
        }
        if (kind == 0) {
            n = 5;              /* num_sge > max_recv_sge */
        } else if (kind == 1) {
            r[0].lkey = 0x999901;
            r[0].length = 16;
        } else {
            FvMr *ro = fv_mr_new(p->fb, p->pdb, VA_B, 4096,
                                 PVRDMA_ACCESS_REMOTE_READ);

            r[0] = sge(ro, VA_B, 16);    /* no LOCAL_WRITE */
            g_free(ro);
        }
        fv_post_recv(p->b, 9, r, n);
        fv_ring_rq(p->b);
        send_one(p, 1, PVRDMA_WR_SEND, &s, 1);
        expect_send_cqe(p, 1, PVRDMA_WC_SEND, PVRDMA_WC_REM_OP_ERR, 0);
        expect_cqe(p->cqb, 9, p->b->handle, PVRDMA_WC_RECV,
                   kind == 0 ? PVRDMA_WC_LOC_LEN_ERR : PVRDMA_WC_LOC_PROT_ERR,
                   0);
        assert_int_equal(fv_qp_state(p->b), PVRDMA_QPS_ERR);
        pair_free(p);
    }
}

static void test_retry_exc_err(void **state)
{
    unsigned kind;

    (void)state;
    for (kind = 0; kind < 6; kind++) {
        Pair *p = pair_new(kind >= 3);
        struct pvrdma_sge s = sge(p->ma, VA_A, 16);
        struct pvrdma_sge r = sge(p->mb, VA_B, 64);
        FvConnOpts o = default_opts;

        fv_post_recv(p->b, 1, &r, 1);
        fv_ring_rq(p->b);
        switch (kind) {
        case 0:                 /* responder back in INIT (via RESET) */
            assert_int_equal(fv_qp_modify_state(p->b, PVRDMA_QPS_RESET), 0);
            break;
        case 1:                 /* nonexistent destination QPN */
            assert_int_equal(fv_qp_modify_state(p->a, PVRDMA_QPS_RESET), 0);
            assert_int_equal(fv_qp_rts(p->a, p->b->qpn + 7, 0, &o), 0);
            break;
        case 2:                 /* responder not connected back */
            assert_int_equal(fv_qp_modify_state(p->b, PVRDMA_QPS_RESET), 0);
            assert_int_equal(fv_qp_rts(p->b, 0x123, 0, &o), 0);
            fv_post_recv(p->b, 1, &r, 1);
            fv_ring_rq(p->b);
            break;
        case 3:                 /* DGID not bound on the peer device */
            assert_int_equal(fv_qp_modify_state(p->a, PVRDMA_QPS_RESET), 0);
            assert_int_equal(fv_qp_rts(p->a, p->b->qpn, 5, &o), 0);
            break;
        case 4:                 /* peer device's QP destroyed */
            assert_int_equal(fg_destroy_qp(p->fb, p->b->handle), 0);
            break;
        case 5:                 /* the source GID was unbound */
        {
            struct pvrdma_cmd_destroy_bind c = {
                .hdr.cmd = PVRDMA_CMD_DESTROY_BIND
            };

            c.index = 0;
            fg_test_gid(0, c.dest_gid);
            assert_int_equal(fg_cmd(p->fa, &c, sizeof(c), NULL), 0);
            break;
        }
        }
        send_one(p, 7, PVRDMA_WR_SEND, &s, 1);
        expect_send_cqe(p, 7, PVRDMA_WC_SEND, PVRDMA_WC_RETRY_EXC_ERR, 0);
        assert_int_equal(fv_qp_state(p->a), PVRDMA_QPS_ERR);
        pair_free(p);
    }
}

/* ---- RNR ----------------------------------------------------------------- */

static void test_rnr_retry_counts(void **state)
{
    uint8_t retry;

    (void)state;
    for (retry = 0; retry < 7; retry++) {
        FvConnOpts o = default_opts;
        Pair *p;
        struct pvrdma_sge s;
        unsigned fired = 0;

        o.rnr_retry = retry;
        o.min_rnr_timer = 14;           /* 1.28 ms */
        p = pair_new_opts(retry & 1, &o, false);
        s = sge(p->ma, VA_A, 32);
        send_one(p, 1, PVRDMA_WR_SEND, &s, 1);
        while (retry && fv_cq_count(p->cqa) == 0) {
            /* the SQ head waits for the responder's RNR timer */
            assert_int_equal(p->fa->timer_expire, p->fa->now_ns + 1280000);
            assert_int_equal(fv_sq_cons(p->a), 0);
            fg_advance(p->fa, 1279999);
            assert_int_equal(fv_cq_count(p->cqa), 0);
            fg_advance(p->fa, 1);
            fired++;
            assert_true(fired <= retry);
        }
        assert_int_equal(fired, retry);
        expect_send_cqe(p, 1, PVRDMA_WC_SEND, PVRDMA_WC_RNR_RETRY_EXC_ERR, 0);
        assert_int_equal(fv_qp_state(p->a), PVRDMA_QPS_ERR);
        assert_int_equal(fv_qp_state(p->b), PVRDMA_QPS_RTS);
        assert_int_equal(p->fa->timer_expire, -1);
        pair_free(p);
    }
}

static void test_rnr_infinite_and_kick(void **state)
{
    FvConnOpts o = default_opts;
    Pair *p;
    struct pvrdma_sge s, r;
    struct pvrdma_sq_wqe_hdr h;
    unsigned i;

    (void)state;
    o.rnr_retry = 7;
    o.min_rnr_timer = 0;                /* 655.36 ms */
    p = pair_new_opts(true, &o, false);
    fv_mr_fill(p->ma, VA_A, 32, 3);
    s = sge(p->ma, VA_A, 32);
    send_one(p, 1, PVRDMA_WR_SEND, &s, 1);
    /* a second WQE stays behind the stalled head (ordering) */
    h = wqe(2, PVRDMA_WR_RDMA_WRITE, SIG, 1);
    h.wr.rdma.remote_addr = VA_B + 4096;
    h.wr.rdma.rkey = p->mb->rkey;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    for (i = 0; i < 20; i++) {
        assert_int_equal(p->fa->timer_expire, p->fa->now_ns + 655360000);
        fg_advance(p->fa, 655360000);
        assert_int_equal(fv_cq_count(p->cqa), 0);
    }
    assert_int_equal(*fv_mr_ptr(p->mb, VA_B + 4096), 0);
    /* posting the receive retries at once, without the timer */
    r = sge(p->mb, VA_B, 64);
    fv_post_recv(p->b, 3, &r, 1);
    fv_ring_rq(p->b);
    expect_send_cqe(p, 1, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 32);
    expect_send_cqe(p, 2, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 32);
    expect_recv_cqe(p, 3, PVRDMA_WC_RECV, 32, 0);
    assert_true(fv_mr_check(p->mb, VA_B, 32, 3));
    assert_true(fv_mr_check(p->mb, VA_B + 4096, 32, 3));
    /* the timer is cancelled or fires into nothing */
    fg_advance(p->fa, 1000000000);
    expect_empty(p->cqa);

    /* WRITE_WITH_IMM RNR, then QP destroyed while stalled */
    h = wqe(4, PVRDMA_WR_RDMA_WRITE_WITH_IMM, SIG, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = p->mb->rkey;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    assert_true(p->fa->timer_expire >= 0);
    assert_int_equal(fg_destroy_qp(p->fa, p->a->handle), 0);
    fg_advance(p->fa, 1000000000);
    /* and the same with the timer left to the core reset */
    pair_free(p);
}

/* ---- counters (PVRDMA_EX_CAP_COUNTERS) ------------------------------------ */

/* Counters of @fg moved from @before by exactly @want (index -> delta). */
static void ctr_expect(FakeGuest *fg, uint64_t *before, const uint64_t *want)
{
    uint64_t now[PVRDMA_CTR_NUM];
    unsigned i;

    fg_counters(fg, now);
    for (i = 0; i < PVRDMA_CTR_NUM; i++) {
        if (now[i] - before[i] != want[i]) {
            fail_msg("counter %u moved by %" G_GUINT64_FORMAT ", not %"
                     G_GUINT64_FORMAT, i,
                     now[i] - before[i], want[i]);
        }
    }
    memcpy(before, now, sizeof(now));
}

/*
 * Known traffic between two devices (path MTU 1024): the requester's
 * device counts what it sends and the READ and atomic responses it gets,
 * the responder's what it takes in and answers; RNR NAKs, retries and
 * error completions on the side that has them.
 */
static void test_counters(void **state)
{
    FvConnOpts o = default_opts;
    uint64_t ca[PVRDMA_CTR_NUM], cb[PVRDMA_CTR_NUM];
    uint64_t wa[PVRDMA_CTR_NUM], wb[PVRDMA_CTR_NUM];
    struct pvrdma_sge s, r;
    struct pvrdma_sq_wqe_hdr h;
    Pair *p;
    int i;

    (void)state;
    o.min_rnr_timer = 14;               /* 1.28 ms */
    p = pair_new_opts(true, &o, false);
    fg_counters(p->fa, ca);
    fg_counters(p->fb, cb);
    for (i = 0; i < PVRDMA_CTR_NUM; i++) {
        assert_int_equal(ca[i] + cb[i], 0);
    }
    /* bad first index or reserved bytes: refused */
    {
        struct pvrdma_cmd_query_counters c = {
            .hdr.cmd = PVRDMA_CMD_QUERY_COUNTERS, .first = PVRDMA_CTR_NUM
        };
        union pvrdma_cmd_resp rr;

        assert_int_equal(fg_cmd(p->fa, &c, sizeof(c), &rr), -EINVAL);
        c.first = 0;
        c.reserved[2] = 1;
        assert_int_equal(fg_cmd(p->fa, &c, sizeof(c), &rr), -EINVAL);
    }

    /* 3 SENDs of 2500 bytes: 3 packets each */
    s = sge(p->ma, VA_A, 2500);
    r = sge(p->mb, VA_B, 4096);
    for (i = 0; i < 3; i++) {
        fv_post_recv(p->b, 10 + i, &r, 1);
        fv_ring_rq(p->b);
        send_one(p, 10 + i, PVRDMA_WR_SEND, &s, 1);
        expect_send_cqe(p, 10 + i, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 2500);
        expect_recv_cqe(p, 10 + i, PVRDMA_WC_RECV, 2500, 0);
    }
    memset(wa, 0, sizeof(wa));
    memset(wb, 0, sizeof(wb));
    wa[PVRDMA_CTR_SENT_PKTS] = 9;
    wa[PVRDMA_CTR_SENT_BYTES] = 7500;
    wa[PVRDMA_CTR_RDMA_SENDS] = 3;
    wb[PVRDMA_CTR_RCVD_PKTS] = 9;
    wb[PVRDMA_CTR_RCVD_BYTES] = 7500;
    wb[PVRDMA_CTR_RDMA_RECVS] = 3;
    ctr_expect(p->fa, ca, wa);
    ctr_expect(p->fb, cb, wb);

    /* a WRITE of 4096 bytes (4 packets), a READ of 1025 (2 packets back) */
    s = sge(p->ma, VA_A, 4096);
    h = wqe(20, PVRDMA_WR_RDMA_WRITE, SIG, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = p->mb->rkey;
    fv_post_send(p->a, &h, &s, 1);
    s = sge(p->ma, VA_A, 1025);
    h = wqe(21, PVRDMA_WR_RDMA_READ, SIG, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = p->mb->rkey;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 20, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 4096);
    expect_send_cqe(p, 21, PVRDMA_WC_RDMA_READ, PVRDMA_WC_SUCCESS, 1025);
    memset(wa, 0, sizeof(wa));
    memset(wb, 0, sizeof(wb));
    wa[PVRDMA_CTR_SENT_PKTS] = 4 + 1;
    wa[PVRDMA_CTR_SENT_BYTES] = 4096;
    wa[PVRDMA_CTR_RDMA_WRITES] = 1;
    wa[PVRDMA_CTR_RDMA_READS] = 1;
    wa[PVRDMA_CTR_RCVD_PKTS] = 2;
    wa[PVRDMA_CTR_RCVD_BYTES] = 1025;
    wb[PVRDMA_CTR_RCVD_PKTS] = 4 + 1;
    wb[PVRDMA_CTR_RCVD_BYTES] = 4096;
    wb[PVRDMA_CTR_RDMA_WRITES_RCVD] = 1;
    wb[PVRDMA_CTR_RDMA_READS_RCVD] = 1;
    wb[PVRDMA_CTR_SENT_PKTS] = 2;
    wb[PVRDMA_CTR_SENT_BYTES] = 1025;
    ctr_expect(p->fa, ca, wa);
    ctr_expect(p->fb, cb, wb);

    /* two atomics: one packet each way, no payload counted */
    post_atomic(p, 30, PVRDMA_WR_ATOMIC_FETCH_AND_ADD, VA_B + 8, 1, 0, VA_A);
    expect_send_cqe(p, 30, PVRDMA_WC_FETCH_ADD, PVRDMA_WC_SUCCESS, 8);
    post_atomic(p, 31, PVRDMA_WR_ATOMIC_CMP_AND_SWP, VA_B + 8, 0, 0, VA_A);
    expect_send_cqe(p, 31, PVRDMA_WC_COMP_SWAP, PVRDMA_WC_SUCCESS, 8);
    memset(wa, 0, sizeof(wa));
    memset(wb, 0, sizeof(wb));
    wa[PVRDMA_CTR_SENT_PKTS] = 2;
    wa[PVRDMA_CTR_RCVD_PKTS] = 2;
    wa[PVRDMA_CTR_ATOMICS] = 2;
    wb[PVRDMA_CTR_RCVD_PKTS] = 2;
    wb[PVRDMA_CTR_SENT_PKTS] = 2;
    wb[PVRDMA_CTR_ATOMICS_RCVD] = 2;
    ctr_expect(p->fa, ca, wa);
    ctr_expect(p->fb, cb, wb);

    /*
     * A SEND with no receive posted, and a WRITE behind it: NAKed twice
     * (the timer retries once), then the receive comes and both go again.
     */
    s = sge(p->ma, VA_A, 100);
    send_one(p, 40, PVRDMA_WR_SEND, &s, 1);
    h = wqe(41, PVRDMA_WR_RDMA_WRITE, SIG, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = p->mb->rkey;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    fg_advance(p->fa, 1280000);
    assert_int_equal(fv_cq_count(p->cqa), 0);
    r = sge(p->mb, VA_B + 8192, 128);
    fv_post_recv(p->b, 40, &r, 1);
    fv_ring_rq(p->b);
    expect_send_cqe(p, 40, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 100);
    expect_send_cqe(p, 41, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 100);
    expect_recv_cqe(p, 40, PVRDMA_WC_RECV, 100, 0);
    memset(wa, 0, sizeof(wa));
    memset(wb, 0, sizeof(wb));
    /* the SEND went 3 times; the WRITE once (the first NAK came first) */
    wa[PVRDMA_CTR_SENT_PKTS] = 3 + 1;
    wa[PVRDMA_CTR_SENT_BYTES] = 400;
    wa[PVRDMA_CTR_RDMA_SENDS] = 1;
    wa[PVRDMA_CTR_RDMA_WRITES] = 1;
    wa[PVRDMA_CTR_RETRIES] = 2;
    wa[PVRDMA_CTR_RCVD_RNR_NAKS] = 2;
    wb[PVRDMA_CTR_RCVD_PKTS] = 3 + 1;
    wb[PVRDMA_CTR_RCVD_BYTES] = 400;
    wb[PVRDMA_CTR_RDMA_RECVS] = 1;
    wb[PVRDMA_CTR_RDMA_WRITES_RCVD] = 1;
    wb[PVRDMA_CTR_SENT_RNR_NAKS] = 2;
    ctr_expect(p->fa, ca, wa);
    ctr_expect(p->fb, cb, wb);

    /*
     * A READ with a bad rkey: REM_ACCESS_ERR (a completion error); the
     * QPs go to ERR, and a WQE posted then is flushed (not an error).
     */
    s = sge(p->ma, VA_A, 64);
    h = wqe(50, PVRDMA_WR_RDMA_READ, SIG, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = p->mb->rkey ^ 0x100;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 50, PVRDMA_WC_RDMA_READ, PVRDMA_WC_REM_ACCESS_ERR, 0);
    send_one(p, 51, PVRDMA_WR_SEND, &s, 1);
    expect_send_cqe(p, 51, PVRDMA_WC_SEND, PVRDMA_WC_WR_FLUSH_ERR, 0);
    memset(wa, 0, sizeof(wa));
    memset(wb, 0, sizeof(wb));
    wa[PVRDMA_CTR_SENT_PKTS] = 1;
    wa[PVRDMA_CTR_RDMA_READS] = 1;
    wa[PVRDMA_CTR_COMPLETION_ERRS] = 1;
    wb[PVRDMA_CTR_RCVD_PKTS] = 1;
    ctr_expect(p->fa, ca, wa);
    ctr_expect(p->fb, cb, wb);
    pair_free(p);

    /* RNR retries run out (one device: both sides count there) */
    o.rnr_retry = 1;
    p = pair_new_opts(false, &o, false);
    fg_counters(p->fa, ca);
    s = sge(p->ma, VA_A, 10);
    send_one(p, 60, PVRDMA_WR_SEND, &s, 1);
    fg_advance(p->fa, 1280000);
    expect_send_cqe(p, 60, PVRDMA_WC_SEND, PVRDMA_WC_RNR_RETRY_EXC_ERR, 0);
    memset(wa, 0, sizeof(wa));
    wa[PVRDMA_CTR_SENT_PKTS] = 2;
    wa[PVRDMA_CTR_SENT_BYTES] = 20;
    wa[PVRDMA_CTR_RDMA_SENDS] = 1;
    wa[PVRDMA_CTR_RETRIES] = 1;
    wa[PVRDMA_CTR_RCVD_RNR_NAKS] = 2;
    wa[PVRDMA_CTR_SENT_RNR_NAKS] = 2;
    wa[PVRDMA_CTR_RCVD_PKTS] = 2;
    wa[PVRDMA_CTR_RCVD_BYTES] = 20;
    wa[PVRDMA_CTR_RNR_RETRY_EXC_ERRS] = 1;
    wa[PVRDMA_CTR_COMPLETION_ERRS] = 1;
    ctr_expect(p->fa, ca, wa);
    pair_free(p);

    /* a QPN nobody has: RETRY_EXC_ERR, nothing arrives anywhere */
    p = pair_new(false);
    fg_counters(p->fa, ca);
    assert_int_equal(fv_qp_modify_state(p->a, PVRDMA_QPS_RESET), 0);
    assert_int_equal(fv_qp_rts(p->a, p->b->qpn + 7, 0, &o), 0);
    s = sge(p->ma, VA_A, 10);
    send_one(p, 61, PVRDMA_WR_SEND, &s, 1);
    expect_send_cqe(p, 61, PVRDMA_WC_SEND, PVRDMA_WC_RETRY_EXC_ERR, 0);
    memset(wa, 0, sizeof(wa));
    wa[PVRDMA_CTR_SENT_PKTS] = 1;
    wa[PVRDMA_CTR_SENT_BYTES] = 10;
    wa[PVRDMA_CTR_RDMA_SENDS] = 1;
    wa[PVRDMA_CTR_RETRY_EXC_ERRS] = 1;
    wa[PVRDMA_CTR_COMPLETION_ERRS] = 1;
    ctr_expect(p->fa, ca, wa);
    pair_free(p);
}

/* ---- receive doorbells on demand (PVRDMA_EX_CAP_RQ_DB_HINT) ------------- */

static uint32_t rq_hint(FvQp *qp)
{
    return fg_read32(qp->fg,
                     qp->pages[0] + PVRDMA_RING_STATE_RQ_DB_HINT_OFFSET);
}

static void test_rq_doorbell_hint(void **state)
{
    Pair *p = pair_new(true);
    struct pvrdma_sge s, r;
    PvrdmaCoreConfig cfg;
    FakeGuest *fg;
    FvCq *cq;
    FvQp *qp;
    uint32_t pd;

    (void)state;
    assert_true(fg_caps(p->fb)->ex_comp_mask & PVRDMA_EX_CAP_RQ_DB_HINT);
    /* written 0 at CREATE_QP: the guest rings until the device says not */
    assert_int_equal(rq_hint(p->b), 0);
    r = sge(p->mb, VA_B, 64);
    fv_post_recv(p->b, 1, &r, 1);
    fv_ring_rq(p->b);
    assert_int_equal(rq_hint(p->b), PVRDMA_RQ_DB_SKIP);
    /* receives posted without a doorbell are taken when SENDs arrive */
    fv_post_recv(p->b, 2, &r, 1);
    fv_mr_fill(p->ma, VA_A, 32, 5);
    s = sge(p->ma, VA_A, 32);
    send_one(p, 10, PVRDMA_WR_SEND, &s, 1);
    send_one(p, 11, PVRDMA_WR_SEND, &s, 1);
    expect_send_cqe(p, 10, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 32);
    expect_send_cqe(p, 11, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 32);
    expect_recv_cqe(p, 1, PVRDMA_WC_RECV, 32, 0);
    expect_recv_cqe(p, 2, PVRDMA_WC_RECV, 32, 0);
    assert_true(fv_mr_check(p->mb, VA_B, 32, 5));
    assert_int_equal(rq_hint(p->b), PVRDMA_RQ_DB_SKIP);
    /* a SEND meeting the empty RQ: RNR NAK, and the next post must ring */
    send_one(p, 12, PVRDMA_WR_SEND, &s, 1);
    expect_empty(p->cqa);
    assert_int_equal(rq_hint(p->b), 0);
    fv_post_recv(p->b, 3, &r, 1);
    fv_ring_rq(p->b);
    expect_send_cqe(p, 12, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 32);
    expect_recv_cqe(p, 3, PVRDMA_WC_RECV, 32, 0);
    assert_int_equal(rq_hint(p->b), PVRDMA_RQ_DB_SKIP);
    /* ERR: a post is flushed by its doorbell, so it must ring */
    fv_post_recv(p->b, 4, &r, 1);
    assert_int_equal(fv_qp_modify_state(p->b, PVRDMA_QPS_ERR), 0);
    assert_int_equal(rq_hint(p->b), 0);
    expect_cqe(p->cqb, 4, p->b->handle, PVRDMA_WC_RECV, PVRDMA_WC_WR_FLUSH_ERR,
               0);
    fv_post_recv(p->b, 5, &r, 1);
    fv_ring_rq(p->b);
    assert_int_equal(rq_hint(p->b), 0);
    expect_cqe(p->cqb, 5, p->b->handle, PVRDMA_WC_RECV, PVRDMA_WC_WR_FLUSH_ERR,
               0);
    pair_free(p);

    /* x-rq-db-hint=off: not announced, never asked */
    pvrdma_core_default_config(&cfg);
    cfg.no_rq_db_hint = true;
    fg = fg_new(&cfg);
    fg_join_fabric(fg);
    fg_setup(fg);
    assert_false(fg_caps(fg)->ex_comp_mask & PVRDMA_EX_CAP_RQ_DB_HINT);
    cq = fv_cq_new(fg, 0, 16);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    qp = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, NULL, 16, 4, false);
    *(uint32_t *)fg_ptr(fg, qp->pages[0] +
                        PVRDMA_RING_STATE_RQ_DB_HINT_OFFSET) = 0xdead;
    fv_post_recv(qp, 1, NULL, 0);
    fv_ring_rq(qp);
    assert_int_equal(rq_hint(qp), 0xdead);
    fg_free(fg);
    g_free(cq);
    g_free(qp);
}

static void test_rnr_without_timer(void **state)
{
    FakeGuest *fg = fg_new_minimal(NULL);
    uint32_t pd;
    FvCq *cq;
    FvQp *a, *b;
    FvMr *m;
    FvConnOpts o = default_opts;
    struct pvrdma_sge s, r;
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_cqe c;

    (void)state;
    fg_join_fabric(fg);
    fg_setup(fg);
    assert_int_equal(fg_bind_gid(fg, 0), 0);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    cq = fv_cq_new(fg, 0, 16);
    a = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, NULL, 4, 1, true);
    b = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, NULL, 4, 1, true);
    m = fv_mr_new(fg, pd, VA_A, 3 * 4096, ALL_ACCESS);
    fv_connect(a, b, &o);
    /* rnr_retry 7 without a timer: waits for the receive */
    fv_mr_fill(m, VA_A, 5000, 6);
    s = sge(m, VA_A, 5000);
    h = wqe(1, PVRDMA_WR_SEND, 0, 1);
    fv_post_send(a, &h, &s, 1);
    fv_ring_sq(a);
    assert_int_equal(fv_cq_count(cq), 0);
    /* no dma_map: the copy bounces through dma_read/dma_write */
    r = (struct pvrdma_sge){ .addr = VA_A + 5000, .length = 6000,
                             .lkey = m->lkey };
    fv_post_recv(b, 2, &r, 1);
    fv_ring_rq(b);
    assert_true(fv_cq_poll(cq, &c));
    assert_int_equal(c.wr_id, 2);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.byte_len, 5000);
    assert_true(fv_cq_poll(cq, &c));
    assert_int_equal(c.wr_id, 1);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    /* the source was filled before: compare with the pattern */
    assert_true(fv_mr_check(m, VA_A + 5000, 5000, 6));
    /* finite rnr_retry without a timer: exhausted at once */
    assert_int_equal(fv_qp_modify_state(a, PVRDMA_QPS_RESET), 0);
    fv_qp_zero_indexes(a);
    o.rnr_retry = 3;
    assert_int_equal(fv_qp_rts(a, b->qpn, 0, &o), 0);
    fv_post_send(a, &h, &s, 1);
    fv_ring_sq(a);
    assert_true(fv_cq_poll(cq, &c));
    assert_int_equal(c.wr_id, 1);
    assert_int_equal(c.status, PVRDMA_WC_RNR_RETRY_EXC_ERR);
    assert_int_equal(fg->maps, 0);
    fg_free(fg);
    g_free(cq);
    g_free(a);
    g_free(b);
    g_free(m);
}

/* ---- flush, error state and RESET --------------------------------------- */

static void test_flush(void **state)
{
    Pair *p = pair_new(false);
    struct pvrdma_sge s = sge(p->ma, VA_A, 16), r = sge(p->mb, VA_B, 16);
    struct pvrdma_sq_wqe_hdr h;
    static const uint32_t ops[] = {
        PVRDMA_WR_SEND, PVRDMA_WR_RDMA_READ, PVRDMA_WR_ATOMIC_CMP_AND_SWP,
        PVRDMA_WR_LOCAL_INV, PVRDMA_WR_FAST_REG_MR,
    };
    static const uint32_t wcs[] = {
        PVRDMA_WC_SEND, PVRDMA_WC_RDMA_READ, PVRDMA_WC_COMP_SWAP,
        PVRDMA_WC_LOCAL_INV, PVRDMA_WC_FAST_REG_MR,
    };
    unsigned i;

    (void)state;
    /* receives on a, sends on a (not rung), then modify a to ERR */
    fv_post_recv(p->a, 50, &r, 1);
    fv_post_recv(p->a, 51, &r, 1);
    for (i = 0; i < G_N_ELEMENTS(ops); i++) {
        h = wqe(i, ops[i], 0, 1);
        fv_post_send(p->a, &h, &s, 1);
    }
    fv_mr_fill(p->ma, VA_A, 16, 1);
    assert_int_equal(fv_qp_modify_state(p->a, PVRDMA_QPS_ERR), 0);
    for (i = 0; i < G_N_ELEMENTS(ops); i++) {
        expect_send_cqe(p, i, wcs[i], PVRDMA_WC_WR_FLUSH_ERR, 0);
    }
    expect_cqe(p->cqa, 50, p->a->handle, PVRDMA_WC_RECV,
               PVRDMA_WC_WR_FLUSH_ERR, 0);
    expect_cqe(p->cqa, 51, p->a->handle, PVRDMA_WC_RECV,
               PVRDMA_WC_WR_FLUSH_ERR, 0);
    expect_empty(p->cqa);
    /* later posts are flushed at their doorbell; buffers untouched */
    h = wqe(9, PVRDMA_WR_RDMA_WRITE, 0, 1);
    h.wr.rdma.remote_addr = VA_B;
    h.wr.rdma.rkey = p->mb->rkey;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 9, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_WR_FLUSH_ERR, 0);
    fv_post_recv(p->a, 52, &r, 1);
    fv_ring_rq(p->a);
    expect_cqe(p->cqa, 52, p->a->handle, PVRDMA_WC_RECV,
               PVRDMA_WC_WR_FLUSH_ERR, 0);
    assert_int_equal(*fv_mr_ptr(p->mb, VA_B), 0);
    assert_true(fv_mr_check(p->ma, VA_A, 16, 1));

    /* RESET: positions forgotten, the guest zeroes its indexes */
    assert_int_equal(fv_qp_modify_state(p->a, PVRDMA_QPS_RESET), 0);
    fv_qp_zero_indexes(p->a);
    assert_int_equal(fv_qp_rts(p->a, p->b->qpn, 0, &default_opts), 0);
    fv_post_recv(p->b, 60, &r, 1);
    fv_ring_rq(p->b);
    h = wqe(61, PVRDMA_WR_SEND, SIG, 1);
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    assert_int_equal(fv_sq_cons(p->a), 1);
    expect_send_cqe(p, 61, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 16);
    expect_recv_cqe(p, 60, PVRDMA_WC_RECV, 16, 0);
    assert_true(fv_mr_check(p->mb, VA_B, 16, 1));
    pair_free(p);
}

/* ---- async events ------------------------------------------------------- */

static void test_comm_est(void **state)
{
    FakeGuest *fg = dev_new();
    uint32_t pd, t, info;
    FvCq *cq;
    FvQp *a, *b;
    FvMr *m;
    struct pvrdma_sge s, r;
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_qp_attr at;
    struct pvrdma_cqe c;

    (void)state;
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    cq = fv_cq_new(fg, 0, 16);
    a = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, NULL, 4, 1, true);
    b = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, NULL, 4, 1, true);
    m = fv_mr_new(fg, pd, VA_A, 8192, ALL_ACCESS);
    assert_int_equal(fv_qp_rts(a, b->qpn, 0, &default_opts), 0);
    /* b only up to RTR */
    assert_int_equal(fv_qp_rts(b, a->qpn, 0, &default_opts), 0);
    assert_int_equal(fv_qp_modify_state(b, PVRDMA_QPS_RESET), 0);
    memset(&at, 0, sizeof(at));
    at.qp_state = PVRDMA_QPS_INIT;
    at.port_num = 1;
    at.qp_access_flags = ALL_ACCESS;
    assert_int_equal(fg_modify_qp(fg, b->handle, PVRDMA_QP_STATE |
                                  PVRDMA_QP_PKEY_INDEX | PVRDMA_QP_PORT |
                                  PVRDMA_QP_ACCESS_FLAGS, &at), 0);
    memset(&at, 0, sizeof(at));
    at.qp_state = PVRDMA_QPS_RTR;
    at.path_mtu = PVRDMA_MTU_1024;
    at.dest_qp_num = a->qpn;
    at.ah_attr.ah_flags = PVRDMA_AH_FLAG_GRH;
    at.ah_attr.port_num = 1;
    fg_test_gid(0, at.ah_attr.grh.dgid);
    assert_int_equal(fg_modify_qp(fg, b->handle, PVRDMA_QP_STATE |
                                  PVRDMA_QP_AV | PVRDMA_QP_PATH_MTU |
                                  PVRDMA_QP_DEST_QPN | PVRDMA_QP_RQ_PSN |
                                  PVRDMA_QP_MAX_DEST_RD_ATOMIC |
                                  PVRDMA_QP_MIN_RNR_TIMER, &at), 0);
    while (fv_async_next(fg, &t, &info)) {
    }
    s = sge(m, VA_A, 8);
    r = sge(m, VA_A + 100, 8);
    fv_post_recv(b, 1, &r, 1);
    fv_post_recv(b, 2, &r, 1);
    fv_ring_rq(b);
    h = wqe(3, PVRDMA_WR_SEND, 0, 1);
    fv_post_send(a, &h, &s, 1);
    fv_post_send(a, &h, &s, 1);
    fv_ring_sq(a);
    /* exactly one COMM_EST for b */
    assert_true(fv_async_next(fg, &t, &info));
    assert_int_equal(t, PVRDMA_EQE_TYPE_COMM_EST);
    assert_int_equal(info, b->handle);
    assert_false(fv_async_next(fg, &t, &info));
    assert_int_equal(fg->notify[PVRDMA_VECTOR_ASYNC] > 0, 1);
    while (fv_cq_poll(cq, &c)) {
        assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    }
    fg_free(fg);
    g_free(cq);
    g_free(a);
    g_free(b);
    g_free(m);
}

static void test_cq_overrun(void **state)
{
    FakeGuest *fg = dev_new();
    uint32_t pd;
    FvCq *small, *big;
    FvQp *a, *b, *c2;
    FvMr *m;
    struct pvrdma_sge s;
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_cqe c;
    unsigned i;

    (void)state;
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    small = fv_cq_new(fg, 0, 4);
    big = fv_cq_new(fg, 0, 64);
    a = fv_qp_new(fg, PVRDMA_QPT_RC, pd, small, big, NULL, 8, 1, true);
    b = fv_qp_new(fg, PVRDMA_QPT_RC, pd, big, big, NULL, 8, 1, true);
    /* another QP that uses the small CQ for receives only */
    c2 = fv_qp_new(fg, PVRDMA_QPT_RC, pd, big, small, NULL, 8, 1, true);
    m = fv_mr_new(fg, pd, VA_A, 8192, ALL_ACCESS);
    fv_connect(a, b, &default_opts);
    assert_int_equal(fv_qp_rts(c2, b->qpn, 0, &default_opts), 0);
    s = sge(m, VA_A, 8);
    for (i = 0; i < 6; i++) {
        h = wqe(i, PVRDMA_WR_RDMA_WRITE, SIG, 1);
        h.wr.rdma.remote_addr = VA_A + 4096;
        h.wr.rdma.rkey = m->rkey;
        fv_post_send(a, &h, &s, 1);
    }
    fv_ring_sq(a);
    /* 4 CQEs fit, the 5th is dropped: CQ_ERR, a and c2 to ERR */
    for (i = 0; i < 4; i++) {
        assert_true(fv_cq_poll(small, &c));
        assert_int_equal(c.wr_id, i);
        assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    }
    assert_false(fv_cq_poll(small, &c));
    assert_int_equal(fv_async_count(fg, PVRDMA_EQE_TYPE_CQ_ERR,
                                    small->handle), 1);
    assert_int_equal(fv_qp_state(a), PVRDMA_QPS_ERR);
    assert_int_equal(fv_qp_state(c2), PVRDMA_QPS_ERR);
    assert_int_equal(fv_qp_state(b), PVRDMA_QPS_RTS);
    /* the CQ stays in error: nothing more is written to it */
    fv_post_send(a, &h, &s, 1);
    fv_ring_sq(a);
    assert_false(fv_cq_poll(small, &c));
    assert_true(fg->guest_errors > 0);
    fg_free(fg);
    g_free(small);
    g_free(big);
    g_free(a);
    g_free(b);
    g_free(c2);
    g_free(m);
}

static void test_cq_arm(void **state)
{
    Pair *p = pair_new(false);
    struct pvrdma_sge s = sge(p->ma, VA_A, 8), r = sge(p->mb, VA_B, 8);
    struct pvrdma_sq_wqe_hdr h;
    uint32_t cqh;
    unsigned v2;

    (void)state;
    /* ARM: the next completion notifies once */
    pvrdma_core_uar_write(p->fa->core, PVRDMA_UAR_CQ_OFFSET,
                          PVRDMA_DB_CQ_ARM | p->cqb->handle);
    v2 = p->fa->notify[PVRDMA_VECTOR_CQ];
    fv_post_recv(p->b, 1, &r, 1);
    fv_post_recv(p->b, 2, &r, 1);
    fv_ring_rq(p->b);
    send_one(p, 3, PVRDMA_WR_SEND, &s, 1);
    send_one(p, 4, PVRDMA_WR_SEND, &s, 1);
    assert_int_equal(p->fa->notify[PVRDMA_VECTOR_CQ], v2 + 1);
    assert_true(fv_cqn_next(p->fa, &cqh));
    assert_int_equal(cqh, p->cqb->handle);
    assert_false(fv_cqn_next(p->fa, &cqh));
    expect_recv_cqe(p, 1, PVRDMA_WC_RECV, 8, 0);
    expect_recv_cqe(p, 2, PVRDMA_WC_RECV, 8, 0);

    /* ARM_SOL: an unsolicited receive does not notify, a solicited does */
    pvrdma_core_uar_write(p->fa->core, PVRDMA_UAR_CQ_OFFSET,
                          PVRDMA_DB_CQ_ARM_SOL | p->cqb->handle);
    fv_post_recv(p->b, 5, &r, 1);
    fv_post_recv(p->b, 6, &r, 1);
    fv_ring_rq(p->b);
    send_one(p, 7, PVRDMA_WR_SEND, &s, 1);
    assert_false(fv_cqn_next(p->fa, &cqh));
    h = wqe(8, PVRDMA_WR_SEND, SIG | PVRDMA_WR_FLAG_SOLICITED, 1);
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    assert_true(fv_cqn_next(p->fa, &cqh));
    assert_int_equal(cqh, p->cqb->handle);
    assert_false(fv_cqn_next(p->fa, &cqh));

    /* ARM_SOL: an error completion notifies too */
    pvrdma_core_uar_write(p->fa->core, PVRDMA_UAR_CQ_OFFSET,
                          PVRDMA_DB_CQ_ARM_SOL | p->cqa->handle);
    while (fv_cq_poll(p->cqa, &(struct pvrdma_cqe){ 0 })) {
    }
    send_one(p, 9, PVRDMA_WR_SEND, &s, 1);     /* no receive: RNR ... */
    assert_false(fv_cqn_next(p->fa, &cqh));
    h = wqe(10, 0x77, 0, 0);
    assert_int_equal(fv_qp_modify_state(p->a, PVRDMA_QPS_ERR), 0);
    assert_true(fv_cqn_next(p->fa, &cqh));
    assert_int_equal(cqh, p->cqa->handle);
    assert_false(fv_cqn_next(p->fa, &cqh));
    (void)h;
    pair_free(p);
}

/* ---- SRQ ----------------------------------------------------------------- */

static void test_srq(void **state)
{
    FakeGuest *fg = dev_new();
    uint32_t pd;
    FvCq *cq;
    FvSrq *srq;
    FvQp *a, *b1, *b2, *a2;
    FvMr *m;
    struct pvrdma_sge s, r;
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_cqe c;
    unsigned i;

    (void)state;
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    cq = fv_cq_new(fg, 0, 64);
    srq = fv_srq_new(fg, pd, 8, 2, 3);
    a = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, NULL, 8, 1, true);
    a2 = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, NULL, 8, 1, true);
    b1 = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, srq, 8, 1, true);
    b2 = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, srq, 8, 1, true);
    m = fv_mr_new(fg, pd, VA_A, 3 * 4096, ALL_ACCESS);
    fv_connect(a, b1, &default_opts);
    fv_connect(a2, b2, &default_opts);
    for (i = 0; i < 5; i++) {
        r = sge(m, VA_A + 4096 + i * 100, 100);
        fv_srq_post(srq, 100 + i, &r, 1);
    }
    fv_srq_ring(srq);
    fv_mr_fill(m, VA_A, 50, 8);
    s = sge(m, VA_A, 50);
    /* 5 posted, limit 3: the event when the count drops to 2 */
    for (i = 0; i < 3; i++) {
        h = wqe(i, PVRDMA_WR_SEND, 0, 1);
        fv_post_send(i & 1 ? a2 : a, &h, &s, 1);
        fv_ring_sq(i & 1 ? a2 : a);
        /* the responder's CQE is written before the requester's */
        assert_true(fv_cq_poll(cq, &c));
        assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
        assert_int_equal(c.opcode, PVRDMA_WC_RECV);
        assert_int_equal(c.wr_id, 100 + i);
        assert_int_equal(c.byte_len, 50);
        assert_int_equal(c.qp, i & 1 ? b2->handle : b1->handle);
        assert_int_equal(c.src_qp, i & 1 ? a2->qpn : a->qpn);
        assert_true(fv_cq_poll(cq, &c));
        assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
        assert_int_equal(c.opcode, PVRDMA_WC_SEND);
        assert_int_equal(c.qp, i & 1 ? a2->handle : a->handle);
        assert_true(fv_mr_check(m, VA_A + 4096 + i * 100, 50, 8));
        assert_int_equal(fv_async_count(fg,
                                        PVRDMA_EQE_TYPE_SRQ_LIMIT_REACHED,
                                        srq->handle), i == 2 ? 1 : 0);
    }
    /* disarmed: no second event; re-arm with MODIFY_SRQ */
    h = wqe(9, PVRDMA_WR_SEND, 0, 1);
    fv_post_send(a, &h, &s, 1);
    fv_ring_sq(a);
    assert_int_equal(fv_async_count(fg, PVRDMA_EQE_TYPE_SRQ_LIMIT_REACHED,
                                    srq->handle), 0);
    assert_int_equal(fv_srq_modify_limit(srq, 2), 0);
    fv_post_send(a, &h, &s, 1);
    fv_ring_sq(a);
    assert_int_equal(fv_async_count(fg, PVRDMA_EQE_TYPE_SRQ_LIMIT_REACHED,
                                    srq->handle), 1);
    while (fv_cq_poll(cq, &c)) {
        assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    }
    /* SRQ empty: RNR, then a post on the SRQ kicks the requester */
    fv_post_send(a2, &h, &s, 1);
    fv_ring_sq(a2);
    assert_false(fv_cq_poll(cq, &c));
    r = sge(m, VA_A + 8192, 100);
    fv_srq_post(srq, 200, &r, 1);
    fv_srq_ring(srq);
    assert_true(fv_cq_poll(cq, &c));
    assert_int_equal(c.wr_id, 200);
    assert_int_equal(c.qp, b2->handle);
    assert_true(fv_cq_poll(cq, &c));
    assert_int_equal(c.qp, a2->handle);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    /* a QP with an SRQ going to ERR: LAST_WQE_REACHED */
    assert_int_equal(fv_qp_modify_state(b1, PVRDMA_QPS_ERR), 0);
    assert_int_equal(fv_async_count(fg, PVRDMA_EQE_TYPE_QP_LAST_WQE_REACHED,
                                    b1->handle), 1);
    /* a corrupted SRQ prod_tail: SRQ_ERR, its QPs to ERR */
    fv_srq_set_prod(srq, 0xffff);
    fv_srq_ring(srq);
    assert_int_equal(fv_qp_state(b2), PVRDMA_QPS_ERR);
    assert_int_equal(fv_async_count(fg, PVRDMA_EQE_TYPE_SRQ_ERR,
                                    srq->handle), 1);
    /* a failed SRQ ignores its doorbell */
    fv_srq_ring(srq);
    assert_int_equal(fv_async_count(fg, PVRDMA_EQE_TYPE_SRQ_ERR,
                                    srq->handle), 0);
    fg_free(fg);
    g_free(cq);
    g_free(srq);
    g_free(a);
    g_free(a2);
    g_free(b1);
    g_free(b2);
    g_free(m);
}

/*
 * One 50-byte SEND from @a into the SRQ of @b: the receive completes with
 * @want (wr_id) and the bytes land where that WQE points (VA_A + 4096 +
 * (@want % 100) * 60, filled with @want's low byte).
 */
static void srq_send_one(FvQp *a, FvQp *b, FvCq *cq, FvMr *m, uint64_t want)
{
    struct pvrdma_sq_wqe_hdr h = wqe(want, PVRDMA_WR_SEND, 0, 1);
    struct pvrdma_sge s = sge(m, VA_A, 50);
    struct pvrdma_cqe c;

    fv_mr_fill(m, VA_A, 50, (uint8_t)want);
    fv_post_send(a, &h, &s, 1);
    fv_ring_sq(a);
    assert_true(fv_cq_poll(cq, &c));
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.opcode, PVRDMA_WC_RECV);
    assert_int_equal(c.qp, b->handle);
    assert_int_equal(c.wr_id, want);
    assert_int_equal(c.byte_len, 50);
    assert_true(fv_mr_check(m, VA_A + 4096 + (want % 100) * 60, 50,
                            (uint8_t)want));
    assert_true(fv_cq_poll(cq, &c));
    assert_int_equal(c.opcode, PVRDMA_WC_SEND);
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
}

static void srq_post_ids(FvSrq *srq, FvMr *m, uint64_t first, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; i++) {
        struct pvrdma_sge r = sge(m, VA_A + 4096 + ((first + i) % 100) * 60,
                                  60);

        fv_srq_post(srq, first + i, &r, 1);
    }
    fv_srq_ring(srq);
}

/*
 * MODIFY_SRQ with MAX_WR (PVRDMA_EX_CAP_RESIZE_SRQ): the receive WQEs
 * posted and not taken move to the new ring in order, also across the
 * old ring's wrap; what does not fit, a bad size, ring or index is
 * refused and the SRQ goes on on its old ring.
 */
static void test_srq_resize(void **state)
{
    FakeGuest *fg = dev_new();
    uint32_t pd;
    FvCq *cq;
    FvSrq *srq;
    FvQp *a, *b;
    FvMr *m;
    unsigned i;
    uint64_t id;
    uint32_t prod;

    (void)state;
    assert_true(fg_caps(fg)->ex_comp_mask & PVRDMA_EX_CAP_RESIZE_SRQ);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    cq = fv_cq_new(fg, 0, 64);
    srq = fv_srq_new(fg, pd, 8, 1, 0);
    a = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, NULL, 8, 1, true);
    b = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, srq, 8, 1, true);
    m = fv_mr_new(fg, pd, VA_A, 3 * 4096, ALL_ACCESS);
    fv_connect(a, b, &default_opts);
    /* 8 posted, 6 taken, 6 more posted: the ring has wrapped (cons 6) */
    srq_post_ids(srq, m, 0, 8);
    for (id = 0; id < 6; id++) {
        srq_send_one(a, b, cq, m, id);
    }
    srq_post_ids(srq, m, 8, 6);
    /* refused, the SRQ untouched: 8 posted do not fit in 4 */
    assert_int_equal(fv_srq_resize(srq, 4), -EINVAL);
    /* not a power of two; over max_srq_wr; below the limit asked */
    assert_int_equal(fv_srq_resize(srq, 24), -EINVAL);
    assert_int_equal(fv_srq_resize(srq, fg_caps(fg)->max_srq_wr * 2), -EINVAL);
    assert_int_equal(fv_srq_resize_nchunks(srq, 16, 17, PVRDMA_SRQ_LIMIT, 2),
                     -EINVAL);
    /* the VMware layout (no ring), and a ring of too few pages */
    assert_int_equal(fv_srq_resize_nchunks(srq, 16, 0, 0, 0), -EINVAL);
    assert_int_equal(fv_srq_resize_nchunks(srq, 256, 0, 0, 1), -EINVAL);
    srq_send_one(a, b, cq, m, 6);
    /* resized with a limit: 7 .. 13 move to slots 0 .. 6 */
    assert_int_equal(fv_srq_resize_nchunks(srq, 32, 4, PVRDMA_SRQ_LIMIT, 2),
                     0);
    assert_int_equal(fg_read32(fg, srq->pages[0] + 8), 7);
    srq_post_ids(srq, m, 14, 20);
    for (id = 7; id < 12; id++) {
        srq_send_one(a, b, cq, m, id);
    }
    /* and back down: 22 posted (12 .. 33) fit in 32 */
    assert_int_equal(fv_srq_resize(srq, 32), 0);
    for (id = 12; id < 30; id++) {
        srq_send_one(a, b, cq, m, id);
    }
    /* 4 left, the limit 4: the next SEND takes it below (one event) */
    assert_int_equal(fv_async_count(fg, PVRDMA_EQE_TYPE_SRQ_LIMIT_REACHED,
                                    srq->handle), 0);
    srq_send_one(a, b, cq, m, 30);
    assert_int_equal(fv_async_count(fg, PVRDMA_EQE_TYPE_SRQ_LIMIT_REACHED,
                                    srq->handle), 1);
    for (id = 31; id < 34; id++) {
        srq_send_one(a, b, cq, m, id);
    }
    /* a corrupted prod_tail: refused, nothing moved */
    prod = fg_read32(fg, srq->pages[0] + 8);
    fv_srq_set_prod(srq, 0xffff);
    assert_int_equal(fv_srq_resize(srq, 64), -EINVAL);
    fv_srq_set_prod(srq, prod);
    /* many resizes in a row with WQEs waiting: none lost, none doubled */
    srq_post_ids(srq, m, 34, 10);
    for (i = 0; i < 6; i++) {
        assert_int_equal(fv_srq_resize(srq, i & 1 ? 16 : 64), 0);
    }
    for (id = 34; id < 44; id++) {
        srq_send_one(a, b, cq, m, id);
    }
    assert_false(fv_cq_poll(cq, &(struct pvrdma_cqe){ 0 }));
    fg_free(fg);
    g_free(cq);
    g_free(srq);
    g_free(a);
    g_free(b);
    g_free(m);
}

/* ---- fast registration and invalidation ---------------------------------- */

static void post_reg_mr(Pair *p, FvFrmr *f, uint64_t id, uint64_t iova,
                        uint32_t npages, uint32_t len, uint32_t access,
                        uint32_t key)
{
    fv_post_reg_mr(p->b, f, id, iova, npages, len, access, key);
}

static void do_fast_reg(bool two)
{
    Pair *p = pair_new(two);
    FvFrmr *f = fv_frmr_new(p->fb, p->pdb, 4);
    uint64_t iova = 0x10000000a00ull;
    uint32_t key = (f->key & ~0xffu) | 0x42;
    struct pvrdma_sge s = sge(p->ma, VA_A, 6000), r;
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_cqe c;
    unsigned i;

    /* before registration the key is unusable */
    h = wqe(1, PVRDMA_WR_RDMA_WRITE, SIG, 1);
    h.wr.rdma.remote_addr = iova;
    h.wr.rdma.rkey = f->key;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 1, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_REM_ACCESS_ERR, 0);
    pair_free(p);

    p = pair_new(two);
    g_free(f);
    f = fv_frmr_new(p->fb, p->pdb, 4);
    key = (f->key & ~0xffu) | 0x42;
    post_reg_mr(p, f, 2, iova, 3, 3 * 4096 - 0xa00 - 100,
                PVRDMA_ACCESS_LOCAL_WRITE | PVRDMA_ACCESS_REMOTE_WRITE, key);
    c = expect_cqe(p->cqb, 2, p->b->handle, PVRDMA_WC_FAST_REG_MR,
                   PVRDMA_WC_SUCCESS, 0);
    /* WRITE 6000 bytes at iova + 0x100 through the new key */
    fv_mr_fill(p->ma, VA_A, 6000, 7);
    h = wqe(3, PVRDMA_WR_RDMA_WRITE, SIG, 1);
    h.wr.rdma.remote_addr = iova + 0x100;
    h.wr.rdma.rkey = key;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 3, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 6000);
    for (i = 0; i < 6000; i++) {
        uint64_t rel = 0xa00 + 0x100 + i;
        uint8_t *b = fg_ptr(p->fb, f->pages[rel >> 12] + (rel & 0xfff));

        assert_int_equal(*b, *fv_mr_ptr(p->ma, VA_A + i));
    }
    /* the old key byte no longer works; nor past the length */
    h.wr.rdma.rkey = f->key;
    h.wr_id = 4;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 4, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_REM_ACCESS_ERR, 0);
    pair_free(p);

    /* LOCAL_INV, then SEND_WITH_INV on a re-registered MR */
    p = pair_new(two);
    g_free(f);
    f = fv_frmr_new(p->fb, p->pdb, 4);
    key = (f->key & ~0xffu) | 0x43;
    post_reg_mr(p, f, 5, iova, 1, 4096 - 0xa00, ALL_ACCESS, key);
    expect_cqe(p->cqb, 5, p->b->handle, PVRDMA_WC_FAST_REG_MR,
               PVRDMA_WC_SUCCESS, 0);
    /* registering a valid MR again is refused */
    post_reg_mr(p, f, 6, iova, 1, 100, ALL_ACCESS, key);
    expect_cqe(p->cqb, 6, p->b->handle, PVRDMA_WC_FAST_REG_MR,
               PVRDMA_WC_LOC_QP_OP_ERR, 0);
    assert_int_equal(fv_qp_state(p->b), PVRDMA_QPS_ERR);
    pair_free(p);

    p = pair_new(two);
    g_free(f);
    f = fv_frmr_new(p->fb, p->pdb, 4);
    key = (f->key & ~0xffu) | 0x44;
    post_reg_mr(p, f, 7, iova, 1, 1024, ALL_ACCESS, key);
    expect_cqe(p->cqb, 7, p->b->handle, PVRDMA_WC_FAST_REG_MR,
               PVRDMA_WC_SUCCESS, 0);
    h = wqe(8, PVRDMA_WR_LOCAL_INV, SIG, 0);
    h.ex.invalidate_rkey = key;
    fv_post_send(p->b, &h, NULL, 0);
    fv_ring_sq(p->b);
    expect_cqe(p->cqb, 8, p->b->handle, PVRDMA_WC_LOCAL_INV,
               PVRDMA_WC_SUCCESS, 0);
    /* re-register (the MR is free again), then SEND_WITH_INV from a */
    key = (key & ~0xffu) | 0x45;
    post_reg_mr(p, f, 9, iova, 1, 1024, ALL_ACCESS, key);
    expect_cqe(p->cqb, 9, p->b->handle, PVRDMA_WC_FAST_REG_MR,
               PVRDMA_WC_SUCCESS, 0);
    r = sge(p->mb, VA_B, 64);
    fv_post_recv(p->b, 10, &r, 1);
    fv_ring_rq(p->b);
    s = sge(p->ma, VA_A, 64);
    h = wqe(11, PVRDMA_WR_SEND_WITH_INV, SIG, 1);
    h.ex.invalidate_rkey = key;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 11, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 64);
    c = expect_recv_cqe(p, 10, PVRDMA_WC_RECV, 64,
                        PVRDMA_WC_WITH_INVALIDATE);
    assert_int_equal(c.imm_data, key);
    /* invalidated: a WRITE with it fails */
    h = wqe(12, PVRDMA_WR_RDMA_WRITE, SIG, 1);
    h.wr.rdma.remote_addr = iova;
    h.wr.rdma.rkey = key;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 12, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_REM_ACCESS_ERR, 0);
    pair_free(p);
    g_free(f);
}

static void test_fast_reg_loopback(void **state)
{
    (void)state;
    do_fast_reg(false);
}

static void test_fast_reg_two_devices(void **state)
{
    (void)state;
    do_fast_reg(true);
}

static void test_fast_reg_bad(void **state)
{
    unsigned kind;

    (void)state;
    for (kind = 0; kind < 9; kind++) {
        Pair *p = pair_new(false);
        FvFrmr *f = fv_frmr_new(p->fb, p->pdb, 4);
        uint32_t key = f->key, n = 1, len = 100, access = ALL_ACCESS;
        uint64_t iova = 0x5000;
        uint32_t status = PVRDMA_WC_LOC_QP_OP_ERR;
        struct pvrdma_sq_wqe_hdr h;

        switch (kind) {
        case 0:
            n = 5;                          /* > max_num_sg */
            break;
        case 1:
            key += 0x100;                   /* another handle */
            break;
        case 2:
            len = 4097;                     /* longer than the pages */
            break;
        case 3:
            access = PVRDMA_ACCESS_REMOTE_WRITE;   /* w/o LOCAL_WRITE */
            break;
        case 4:
            n = 0;
            break;
        case 5:
            iova = UINT64_MAX - 10;         /* iova + length overflows */
            break;
        case 6:                             /* bad page address */
            f->pages[0] = 0x1234;
            status = PVRDMA_WC_LOC_PROT_ERR;
            break;
        case 7: {                           /* LOCAL_INV of a user MR */
            h = wqe(1, PVRDMA_WR_LOCAL_INV, SIG, 0);
            h.ex.invalidate_rkey = p->mb->rkey;
            fv_post_send(p->b, &h, NULL, 0);
            fv_ring_sq(p->b);
            expect_cqe(p->cqb, 1, p->b->handle, PVRDMA_WC_LOCAL_INV,
                       PVRDMA_WC_LOC_QP_OP_ERR, 0);
            pair_free(p);
            g_free(f);
            continue;
        }
        case 8: {                           /* SEND_WITH_INV of a bad key */
            struct pvrdma_sge r = sge(p->mb, VA_B, 64);
            struct pvrdma_sge s = sge(p->ma, VA_A, 64);

            fv_post_recv(p->b, 2, &r, 1);
            fv_ring_rq(p->b);
            h = wqe(3, PVRDMA_WR_SEND_WITH_INV, SIG, 1);
            h.ex.invalidate_rkey = p->mb->rkey;   /* not a fast-reg MR */
            fv_post_send(p->a, &h, &s, 1);
            fv_ring_sq(p->a);
            expect_send_cqe(p, 3, PVRDMA_WC_SEND, PVRDMA_WC_REM_ACCESS_ERR,
                            0);
            /* the receive was not consumed: flushed */
            expect_cqe(p->cqb, 2, p->b->handle, PVRDMA_WC_RECV,
                       PVRDMA_WC_WR_FLUSH_ERR, 0);
            pair_free(p);
            g_free(f);
            continue;
        }
        }
        post_reg_mr(p, f, 1, iova, n, len, access, key);
        expect_cqe(p->cqb, 1, p->b->handle, PVRDMA_WC_FAST_REG_MR, status, 0);
        pair_free(p);
        g_free(f);
    }
}

/* ---- memory windows (PVRDMA_EX_CAP_MW) ----------------------------------- */

#define VA_W        0x7d0000000300ull
#define MW_ACCESS   (ALL_ACCESS | PVRDMA_ACCESS_MW_BIND)

/* WRITE or READ of @len bytes at VA_A + @off on a, @raddr/@rkey on b. */
static void mw_rdma(Pair *p, uint64_t id, uint32_t op, uint32_t rkey,
                    uint64_t raddr, uint64_t off, uint32_t len)
{
    struct pvrdma_sge s = sge(p->ma, VA_A + off, len);
    struct pvrdma_sq_wqe_hdr h = wqe(id, op, SIG, 1);

    h.wr.rdma.remote_addr = raddr;
    h.wr.rdma.rkey = rkey;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
}

static void mw_bind_ok(Pair *p, uint64_t id, uint32_t rkey, FvMr *mr,
                       uint64_t addr, uint64_t len, uint32_t access)
{
    fv_post_bind_mw(p->b, id, rkey, mr->lkey, addr, len, access);
    expect_cqe(p->cqb, id, p->b->handle, PVRDMA_WC_BIND_MW,
               PVRDMA_WC_SUCCESS, 0);
}

static void do_mw(bool two)
{
    Pair *p = pair_new(two);
    FvMr *w = fv_mr_new(p->fb, p->pdb, VA_W, MR_LEN, MW_ACCESS);
    uint32_t h1, h2, k1, k2;
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_sge s, r;
    struct pvrdma_cqe c;

    assert_int_equal(fv_mw_new(p->fb, p->pdb, PVRDMA_MR_FLAG_MW_TYPE1,
                               &h1, &k1), 0);
    assert_int_equal(fv_mw_new(p->fb, p->pdb, PVRDMA_MR_FLAG_MW_TYPE2,
                               &h2, &k2), 0);
    /* type 1: WRITE and READ inside the window, at the MR's addresses */
    k1 = (k1 & ~0xffu) | 0x11;
    mw_bind_ok(p, 1, k1, w, VA_W + 0x100, 8000,
               PVRDMA_ACCESS_REMOTE_WRITE | PVRDMA_ACCESS_REMOTE_READ);
    fv_mr_fill(p->ma, VA_A, 6000, 21);
    mw_rdma(p, 2, PVRDMA_WR_RDMA_WRITE, k1, VA_W + 0x200, 0, 6000);
    expect_send_cqe(p, 2, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 6000);
    assert_true(fv_mr_check(w, VA_W + 0x200, 6000, 21));
    fv_mr_fill(w, VA_W + 0x1f00, 100, 22);
    mw_rdma(p, 3, PVRDMA_WR_RDMA_READ, k1, VA_W + 0x1f00, 8000, 100);
    expect_send_cqe(p, 3, PVRDMA_WC_RDMA_READ, PVRDMA_WC_SUCCESS, 100);
    assert_true(fv_mr_check(p->ma, VA_A + 8000, 100, 22));
    /* type 2, zero-based: remote address 0x10 is the window's byte 0x10 */
    k2 = (k2 & ~0xffu) | 0x22;
    mw_bind_ok(p, 4, k2, w, VA_W + 0x3000, 4096,
               PVRDMA_ACCESS_REMOTE_WRITE | PVRDMA_ACCESS_ZERO_BASED);
    fv_mr_fill(p->ma, VA_A + 100, 100, 23);
    mw_rdma(p, 5, PVRDMA_WR_RDMA_WRITE, k2, 0x10, 100, 100);
    expect_send_cqe(p, 5, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 100);
    assert_true(fv_mr_check(w, VA_W + 0x3010, 100, 23));
    /* the MR cannot go while windows are bound to it */
    assert_int_equal(fg_destroy_mr(p->fb, w->handle), -EBUSY);
    /* LOCAL_INV of the type 2 window; bound again, SEND_WITH_INV */
    h = wqe(6, PVRDMA_WR_LOCAL_INV, SIG, 0);
    h.ex.invalidate_rkey = k2;
    fv_post_send(p->b, &h, NULL, 0);
    fv_ring_sq(p->b);
    expect_cqe(p->cqb, 6, p->b->handle, PVRDMA_WC_LOCAL_INV,
               PVRDMA_WC_SUCCESS, 0);
    k2 = (k2 & ~0xffu) | 0x23;
    mw_bind_ok(p, 7, k2, w, VA_W, 64, PVRDMA_ACCESS_REMOTE_READ);
    r = sge(p->mb, VA_B, 64);
    fv_post_recv(p->b, 8, &r, 1);
    fv_ring_rq(p->b);
    s = sge(p->ma, VA_A, 64);
    h = wqe(9, PVRDMA_WR_SEND_WITH_INV, SIG, 1);
    h.ex.invalidate_rkey = k2;
    fv_post_send(p->a, &h, &s, 1);
    fv_ring_sq(p->a);
    expect_send_cqe(p, 9, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 64);
    c = expect_recv_cqe(p, 8, PVRDMA_WC_RECV, 64, PVRDMA_WC_WITH_INVALIDATE);
    assert_int_equal(c.imm_data, k2);
    /* type 1: a zero-length bind unbinds; then the MR can go */
    mw_bind_ok(p, 10, (k1 & ~0xffu) | 0x12, w, 0, 0, 0);
    assert_int_equal(fg_destroy_mr(p->fb, w->handle), 0);
    /* the invalidated type 2 key no longer reads */
    mw_rdma(p, 11, PVRDMA_WR_RDMA_READ, k2, VA_W, 0, 8);
    expect_send_cqe(p, 11, PVRDMA_WC_RDMA_READ, PVRDMA_WC_REM_ACCESS_ERR, 0);
    pair_free(p);
    g_free(w);
}

/*
 * Local write asked of a window is ignored (it grants nothing there): the
 * bind succeeds, READ works, and a WRITE without REMOTE_WRITE is refused.
 */
static void test_mw_local_write_ignored(void **state)
{
    Pair *p = pair_new(true);
    FvMr *w = fv_mr_new(p->fb, p->pdb, VA_W, MR_LEN, MW_ACCESS);
    uint32_t h1, k1;

    (void)state;
    assert_int_equal(fv_mw_new(p->fb, p->pdb, PVRDMA_MR_FLAG_MW_TYPE1,
                               &h1, &k1), 0);
    k1 = (k1 & ~0xffu) | 0x31;
    mw_bind_ok(p, 1, k1, w, VA_W, 4096,
               PVRDMA_ACCESS_LOCAL_WRITE | PVRDMA_ACCESS_REMOTE_READ);
    fv_mr_fill(w, VA_W + 0x80, 200, 41);
    mw_rdma(p, 2, PVRDMA_WR_RDMA_READ, k1, VA_W + 0x80, 0, 200);
    expect_send_cqe(p, 2, PVRDMA_WC_RDMA_READ, PVRDMA_WC_SUCCESS, 200);
    assert_true(fv_mr_check(p->ma, VA_A, 200, 41));
    fv_mr_fill(p->ma, VA_A, 100, 42);
    mw_rdma(p, 3, PVRDMA_WR_RDMA_WRITE, k1, VA_W + 0x80, 0, 100);
    expect_send_cqe(p, 3, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_REM_ACCESS_ERR, 0);
    assert_true(fv_mr_check(w, VA_W + 0x80, 200, 41));
    pair_free(p);
    g_free(w);
}

static void test_mw_loopback(void **state)
{
    (void)state;
    do_mw(false);
}

static void test_mw_two_devices(void **state)
{
    (void)state;
    do_mw(true);
}

/* Remote accesses a window refuses: REM_ACCESS_ERR, nothing written. */
static void test_mw_remote_refused(void **state)
{
    unsigned kind;

    (void)state;
    for (kind = 0; kind < 6; kind++) {
        Pair *p = pair_new(true);
        uint64_t i;
        FvMr *w = fv_mr_new(p->fb, p->pdb, VA_W, MR_LEN, MW_ACCESS);
        uint32_t hw, k, op = PVRDMA_WR_RDMA_WRITE, flags;
        uint64_t raddr = VA_W + 0x100;
        uint32_t len = 64;
        FvQp *c2 = NULL, *d2 = NULL;

        flags = kind == 4 ? PVRDMA_MR_FLAG_MW_TYPE2 : PVRDMA_MR_FLAG_MW_TYPE1;
        assert_int_equal(fv_mw_new(p->fb, p->pdb, flags, &hw, &k), 0);
        fv_mr_zero(w);
        fv_mr_fill(p->ma, VA_A, 4096, 31);
        switch (kind) {
        case 0:                             /* never bound */
            break;
        case 1:                             /* the key byte before a bind */
            mw_bind_ok(p, 1, (k & ~0xffu) | 0x51, w, VA_W, 4096,
                       PVRDMA_ACCESS_REMOTE_WRITE);
            break;
        case 2:                             /* past the window's end */
            k = (k & ~0xffu) | 0x52;
            mw_bind_ok(p, 1, k, w, VA_W, 4096, PVRDMA_ACCESS_REMOTE_WRITE);
            raddr = VA_W + 4096 - 32;
            break;
        case 3:                             /* READ on a write-only window */
            k = (k & ~0xffu) | 0x53;
            mw_bind_ok(p, 1, k, w, VA_W, 4096, PVRDMA_ACCESS_REMOTE_WRITE);
            op = PVRDMA_WR_RDMA_READ;
            break;
        case 4:                             /* type 2 through another QP */
            k = (k & ~0xffu) | 0x54;
            mw_bind_ok(p, 1, k, w, VA_W, 4096, PVRDMA_ACCESS_REMOTE_WRITE);
            c2 = fv_qp_new(p->fa, PVRDMA_QPT_RC, p->pda, p->cqa, p->cqa,
                           NULL, 16, 4, false);
            d2 = fv_qp_new(p->fb, PVRDMA_QPT_RC, p->pdb, p->cqb, p->cqb,
                           NULL, 16, 4, false);
            fv_connect(c2, d2, &default_opts);
            break;
        case 5:                             /* unbound by a zero length */
            k = (k & ~0xffu) | 0x55;
            mw_bind_ok(p, 1, k, w, VA_W, 4096, PVRDMA_ACCESS_REMOTE_WRITE);
            mw_bind_ok(p, 3, k, w, 0, 0, 0);
            break;
        }
        if (c2) {
            struct pvrdma_sge s = sge(p->ma, VA_A, len);
            struct pvrdma_sq_wqe_hdr h = wqe(2, op, SIG, 1);

            h.wr.rdma.remote_addr = raddr;
            h.wr.rdma.rkey = k;
            fv_post_send(c2, &h, &s, 1);
            fv_ring_sq(c2);
            expect_cqe(p->cqa, 2, c2->handle, PVRDMA_WC_RDMA_WRITE,
                       PVRDMA_WC_REM_ACCESS_ERR, 0);
        } else {
            mw_rdma(p, 2, op, k, raddr, 0, len);
            expect_send_cqe(p, 2, pvrdma_wq_wc_opcode(op),
                            PVRDMA_WC_REM_ACCESS_ERR, 0);
        }
        for (i = 0; i < MR_LEN; i++) {
            assert_int_equal(*fv_mr_ptr(w, VA_W + i), 0);
        }
        pair_free(p);
        g_free(w);
        g_free(c2);
        g_free(d2);
    }
}

/*
 * A window's key is no lkey; type 1 windows are not invalidated; a type 2
 * window's binding ends with the QP it was bound through.
 */
static void test_mw_local(void **state)
{
    unsigned kind;

    (void)state;
    for (kind = 0; kind < 3; kind++) {
        Pair *p = pair_new(false);
        FvMr *w = fv_mr_new(p->fb, p->pdb, VA_W, MR_LEN, MW_ACCESS);
        uint32_t hw, k;
        struct pvrdma_sq_wqe_hdr h;
        struct pvrdma_sge s;

        assert_int_equal(fv_mw_new(p->fb, p->pdb, kind == 2 ?
                                   PVRDMA_MR_FLAG_MW_TYPE2 :
                                   PVRDMA_MR_FLAG_MW_TYPE1, &hw, &k), 0);
        mw_bind_ok(p, 1, k, w, VA_W, 4096, PVRDMA_ACCESS_REMOTE_READ);
        switch (kind) {
        case 0:                             /* window key as an lkey */
            s = (struct pvrdma_sge){ .addr = VA_W, .length = 8, .lkey = k };
            h = wqe(2, PVRDMA_WR_SEND, SIG, 1);
            fv_post_send(p->b, &h, &s, 1);
            fv_ring_sq(p->b);
            expect_cqe(p->cqb, 2, p->b->handle, PVRDMA_WC_SEND,
                       PVRDMA_WC_LOC_PROT_ERR, 0);
            break;
        case 1:                             /* LOCAL_INV of type 1 */
            h = wqe(2, PVRDMA_WR_LOCAL_INV, SIG, 0);
            h.ex.invalidate_rkey = k;
            fv_post_send(p->b, &h, NULL, 0);
            fv_ring_sq(p->b);
            expect_cqe(p->cqb, 2, p->b->handle, PVRDMA_WC_LOCAL_INV,
                       PVRDMA_WC_LOC_QP_OP_ERR, 0);
            break;
        case 2:                             /* the QP goes, the binding too */
            assert_int_equal(fg_destroy_mr(p->fb, w->handle), -EBUSY);
            assert_int_equal(fg_destroy_qp(p->fb, p->b->handle), 0);
            break;
        }
        /* a bound type 1 window still holds its MR */
        assert_int_equal(fg_destroy_mr(p->fb, w->handle),
                         kind == 2 ? 0 : -EBUSY);
        assert_int_equal(fg_destroy_mr(p->fb, hw), 0);
        pair_free(p);
        g_free(w);
    }
}

/* Windows only where offered, and made of nothing but a PD and a type. */
static void test_mw_create(void **state)
{
    struct pvrdma_cmd_create_mr c = { .hdr.cmd = PVRDMA_CMD_CREATE_MR };
    union pvrdma_cmd_resp r;
    FakeGuest *fg = dev_new();
    uint32_t pd, h, k;
    unsigned i;

    (void)state;
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    c.pd_handle = pd;
    for (i = 0; i < 5; i++) {
        c.flags = PVRDMA_MR_FLAG_MW_TYPE2;
        c.start = i == 0;
        c.length = i == 1;
        c.pdir_dma = i == 2 ? 4096 : 0;
        c.nchunks = i == 3;
        c.access_flags = i == 4 ? PVRDMA_ACCESS_REMOTE_READ : 0;
        assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), -EINVAL);
    }
    c = (struct pvrdma_cmd_create_mr){ .hdr.cmd = PVRDMA_CMD_CREATE_MR,
                                       .pd_handle = pd,
                                       .flags = PVRDMA_MR_FLAG_MW_TYPE1 |
                                                PVRDMA_MR_FLAG_MW_TYPE2 };
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), -EINVAL);
    assert_int_equal(fv_mw_new(fg, pd + 1, PVRDMA_MR_FLAG_MW_TYPE1, &h, &k),
                     -EINVAL);
    assert_int_equal(fv_mw_new(fg, pd, PVRDMA_MR_FLAG_MW_TYPE1, &h, &k), 0);
    /* the window holds its PD */
    assert_int_equal(fg_destroy_pd(fg, pd), -EBUSY);
    assert_int_equal(fg_destroy_mr(fg, h), 0);
    fg_free(fg);
    /* a backend that does not offer them: the flags are unknown */
    fg = fg_new(NULL);
    pvrdma_core_set_backend(fg->core, fg_backend_without_windows(), NULL);
    fg_setup(fg);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(fv_mw_new(fg, pd, PVRDMA_MR_FLAG_MW_TYPE1, &h, &k),
                     -EINVAL);
    assert_int_equal(fv_mw_new(fg, pd, PVRDMA_MR_FLAG_MW_TYPE2, &h, &k),
                     -EINVAL);
    fg_free(fg);
}

/* Binds the device refuses: MW_BIND_ERR, the QP in error. */
static void test_mw_bind_refused(void **state)
{
    unsigned kind;

    (void)state;
    for (kind = 0; kind < 7; kind++) {
        Pair *p = pair_new(false);
        FvMr *w = fv_mr_new(p->fb, p->pdb, VA_W, MR_LEN, MW_ACCESS);
        FvMr *ro = fv_mr_new(p->fb, p->pdb, VA_W + MR_LEN + 4096, 4096,
                             PVRDMA_ACCESS_REMOTE_READ |
                             PVRDMA_ACCESS_MW_BIND);
        uint32_t h1, h2, k1, k2, key, lkey = w->lkey;
        uint32_t access = PVRDMA_ACCESS_REMOTE_WRITE;
        uint64_t addr = VA_W, len = 4096;

        assert_int_equal(fv_mw_new(p->fb, p->pdb, PVRDMA_MR_FLAG_MW_TYPE1,
                                   &h1, &k1), 0);
        assert_int_equal(fv_mw_new(p->fb, p->pdb, PVRDMA_MR_FLAG_MW_TYPE2,
                                   &h2, &k2), 0);
        key = k1;
        switch (kind) {
        case 0:
            key = p->mb->rkey;              /* an MR's key, not a window's */
            break;
        case 1:                             /* type 2 still bound */
            mw_bind_ok(p, 1, k2, w, VA_W, 64, PVRDMA_ACCESS_REMOTE_READ);
            key = k2;
            break;
        case 2:
            lkey = p->mb->lkey;             /* MR without MW_BIND */
            break;
        case 3:
            access |= PVRDMA_ACCESS_ZERO_BASED;   /* on a type 1 window */
            break;
        case 4:
            len = MR_LEN + 1;               /* beyond the MR */
            break;
        case 5:                             /* remote write, no LOCAL_WRITE */
            lkey = ro->lkey;
            addr = VA_W + MR_LEN + 4096;
            break;
        case 6:                             /* type 2: length 0 */
            key = k2;
            len = 0;
            break;
        }
        fv_post_bind_mw(p->b, 2, key, lkey, addr, len, access);
        expect_cqe(p->cqb, 2, p->b->handle, PVRDMA_WC_BIND_MW,
                   PVRDMA_WC_MW_BIND_ERR, 0);
        assert_int_equal(fv_qp_state(p->b), PVRDMA_QPS_ERR);
        pair_free(p);
        g_free(w);
        g_free(ro);
    }
}

/* ---- MODIFY_MR (PVRDMA_EX_CAP_MODIFY_MR) --------------------------------- */

/*
 * An MR's access and PD change in place: the rkey a peer holds keeps
 * working with the new rights (and only those), and the PD follows.
 */
static void test_modify_mr_in_place(void **state)
{
    Pair *p = pair_new(true);
    FvMr *w = fv_mr_new(p->fb, p->pdb, VA_W, MR_LEN,
                        PVRDMA_ACCESS_LOCAL_WRITE);
    uint32_t pd2, ctx, pdx, rkey = w->rkey;

    (void)state;
    assert_true(p->fb->core->caps.ex_comp_mask & PVRDMA_EX_CAP_MODIFY_MR);
    /* local-only, then remote write: the same rkey writes */
    assert_int_equal(fg_modify_mr(p->fb, w->handle, PVRDMA_MODIFY_MR_ACCESS,
                                  ALL_ACCESS, 0), 0);
    fv_mr_fill(p->ma, VA_A, 3000, 51);
    mw_rdma(p, 1, PVRDMA_WR_RDMA_WRITE, rkey, VA_W + 0x40, 0, 3000);
    expect_send_cqe(p, 1, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 3000);
    assert_true(fv_mr_check(w, VA_W + 0x40, 3000, 51));
    /* read-only now: READ works with it, WRITE does not */
    assert_int_equal(fg_modify_mr(p->fb, w->handle, PVRDMA_MODIFY_MR_ACCESS,
                                  PVRDMA_ACCESS_REMOTE_READ, 0), 0);
    mw_rdma(p, 2, PVRDMA_WR_RDMA_READ, rkey, VA_W + 0x40, 4000, 3000);
    expect_send_cqe(p, 2, PVRDMA_WC_RDMA_READ, PVRDMA_WC_SUCCESS, 3000);
    assert_true(fv_mr_check(p->ma, VA_A + 4000, 3000, 51));

    /* refused: each leaves the MR as it was */
    assert_int_equal(fg_modify_mr(p->fb, 0xdead, PVRDMA_MODIFY_MR_ACCESS,
                                  ALL_ACCESS, 0), -EINVAL);
    assert_int_equal(fg_modify_mr(p->fb, w->handle, 0, ALL_ACCESS, 0),
                     -EINVAL);
    assert_int_equal(fg_modify_mr(p->fb, w->handle, 4, ALL_ACCESS, 0),
                     -EINVAL);
    assert_int_equal(fg_modify_mr(p->fb, w->handle, PVRDMA_MODIFY_MR_ACCESS,
                                  PVRDMA_ACCESS_REMOTE_WRITE, 0), -EINVAL);
    assert_int_equal(fg_modify_mr(p->fb, w->handle, PVRDMA_MODIFY_MR_PD,
                                  0, 0xbeef), -EINVAL);
    assert_int_equal(fg_create_uc(p->fb, 3, &ctx), 0);
    assert_int_equal(fg_create_pd(p->fb, ctx, &pdx), 0);
    assert_int_equal(fg_modify_mr(p->fb, w->handle, PVRDMA_MODIFY_MR_PD,
                                  0, pdx), -EINVAL);    /* other context */
    assert_int_equal(fg_modify_mr(p->fb, p->mb->handle + 0x100,
                                  PVRDMA_MODIFY_MR_ACCESS, ALL_ACCESS, 0),
                     -EINVAL);
    mw_rdma(p, 3, PVRDMA_WR_RDMA_READ, rkey, VA_W + 0x40, 8000, 100);
    expect_send_cqe(p, 3, PVRDMA_WC_RDMA_READ, PVRDMA_WC_SUCCESS, 100);

    /* another PD: the old one can go, the QP's PD no longer matches */
    assert_int_equal(fg_create_pd(p->fb, 0, &pd2), 0);
    assert_int_equal(fg_modify_mr(p->fb, w->handle, PVRDMA_MODIFY_MR_PD |
                                  PVRDMA_MODIFY_MR_ACCESS, ALL_ACCESS, pd2),
                     0);
    assert_int_equal(fg_destroy_pd(p->fb, pd2), -EBUSY);
    mw_rdma(p, 4, PVRDMA_WR_RDMA_READ, rkey, VA_W + 0x40, 8000, 100);
    expect_send_cqe(p, 4, PVRDMA_WC_RDMA_READ, PVRDMA_WC_REM_ACCESS_ERR, 0);
    assert_int_equal(fg_destroy_mr(p->fb, w->handle), 0);
    assert_int_equal(fg_destroy_pd(p->fb, pd2), 0);
    pair_free(p);
    g_free(w);
}

/* Not while windows are bound to the MR, nor on MRs that are not user MRs. */
static void test_modify_mr_refused(void **state)
{
    Pair *p = pair_new(false);
    FvMr *w = fv_mr_new(p->fb, p->pdb, VA_W, MR_LEN, MW_ACCESS);
    uint32_t h1, k1, dma, lkey;

    (void)state;
    assert_int_equal(fv_mw_new(p->fb, p->pdb, PVRDMA_MR_FLAG_MW_TYPE1,
                               &h1, &k1), 0);
    k1 = (k1 & ~0xffu) | 0x41;
    mw_bind_ok(p, 1, k1, w, VA_W, 4096, PVRDMA_ACCESS_REMOTE_READ);
    assert_int_equal(fg_modify_mr(p->fb, w->handle, PVRDMA_MODIFY_MR_ACCESS,
                                  ALL_ACCESS, 0), -EBUSY);
    assert_int_equal(fg_modify_mr(p->fb, h1, PVRDMA_MODIFY_MR_ACCESS,
                                  ALL_ACCESS, 0), -EINVAL);   /* a window */
    assert_int_equal(fg_create_dma_mr(p->fb, p->pdb, &dma, &lkey), 0);
    assert_int_equal(fg_modify_mr(p->fb, dma, PVRDMA_MODIFY_MR_ACCESS,
                                  PVRDMA_ACCESS_LOCAL_WRITE, 0), -EINVAL);
    pair_free(p);
    g_free(w);
}

/* ---- CQE timestamps (PVRDMA_EX_CAP_CQE_TIMESTAMP) ------------------------ */

/* The 48-bit clock of a CQE of a timestamp CQ. */
static uint64_t cqe_ts(const struct pvrdma_cqe *c)
{
    uint64_t ts = 0;

    memcpy(&ts, (const uint8_t *)c + PVRDMA_CQE_TS_OFF,
           PVRDMA_CQE_TS_BITS / 8);
    return GUINT64_FROM_LE(ts);
}

/*
 * A CQ created with PVRDMA_CQ_FLAG_TIMESTAMP gets the device clock in
 * each CQE (success and error); other CQs keep zeros; unknown flags are
 * refused.
 */
static void test_cqe_timestamps(void **state)
{
    FakeGuest *fg = dev_new();
    uint64_t t0 = 0x0123456789abcdefull, mask = (1ull << 48) - 1;
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_sge s, r;
    struct pvrdma_cqe c;
    FvCq *ts, *plain;
    FvQp *a, *b;
    FvMr *m;
    uint32_t pd, cq;

    (void)state;
    assert_true(fg_caps(fg)->ex_comp_mask & PVRDMA_EX_CAP_CQE_TIMESTAMP);
    fg->cq_flags = 0x02;
    assert_int_equal(fg_create_cq(fg, 0, 64, &cq), -EINVAL);
    fg->cq_flags = PVRDMA_CQ_FLAG_TIMESTAMP;
    ts = fv_cq_new(fg, 0, 64);
    fg->cq_flags = 0;
    plain = fv_cq_new(fg, 0, 64);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    a = fv_qp_new(fg, PVRDMA_QPT_RC, pd, ts, ts, NULL, 16, 4, false);
    b = fv_qp_new(fg, PVRDMA_QPT_RC, pd, plain, plain, NULL, 16, 4, false);
    m = fv_mr_new(fg, pd, VA_A, MR_LEN, ALL_ACCESS);
    fv_connect(a, b, &default_opts);
    fg->now_ns = (int64_t)t0;
    r = sge(m, VA_A + 4096, 100);
    fv_post_recv(b, 1, &r, 1);
    fv_ring_rq(b);
    s = sge(m, VA_A, 100);
    h = wqe(2, PVRDMA_WR_SEND, SIG, 1);
    fv_post_send(a, &h, &s, 1);
    fv_ring_sq(a);
    c = expect_cqe(ts, 2, a->handle, PVRDMA_WC_SEND, PVRDMA_WC_SUCCESS, 100);
    assert_int_equal(cqe_ts(&c), t0 & mask);
    c = expect_cqe(plain, 1, b->handle, PVRDMA_WC_RECV, PVRDMA_WC_SUCCESS,
                   100);
    assert_int_equal(cqe_ts(&c), 0);
    /* Later, and an error completion: stamped too. */
    fg->now_ns += 1500;
    h = wqe(3, PVRDMA_WR_RDMA_WRITE, SIG, 1);
    h.wr.rdma.remote_addr = VA_A;
    h.wr.rdma.rkey = m->rkey ^ 0x100;
    fv_post_send(a, &h, &s, 1);
    fv_ring_sq(a);
    c = expect_cqe(ts, 3, a->handle, PVRDMA_WC_RDMA_WRITE,
                   PVRDMA_WC_REM_ACCESS_ERR, 0);
    assert_int_equal(cqe_ts(&c), (t0 + 1500) & mask);
    /*
     * The same clock reads from every UAR page (PVRDMA_EX_CAP_CLOCK), in
     * two halves; the rest of a page reads 0.
     */
    assert_true(fg_caps(fg)->ex_comp_mask & PVRDMA_EX_CAP_CLOCK);
    for (unsigned page = 0; page < 3; page++) {
        uint64_t base = (uint64_t)page * PVRDMA_UAR_PAGE_SIZE;

        assert_int_equal(pvrdma_core_uar_read(fg->core, base +
                                              PVRDMA_UAR_CLOCK_LO_OFFSET),
                         (uint32_t)(t0 + 1500));
        assert_int_equal(pvrdma_core_uar_read(fg->core, base +
                                              PVRDMA_UAR_CLOCK_HI_OFFSET),
                         (uint32_t)((t0 + 1500) >> 32));
        assert_int_equal(pvrdma_core_uar_read(fg->core, base), 0);
        assert_int_equal(pvrdma_core_uar_read(fg->core, base + 0x18), 0);
    }
    fg_free(fg);
    g_free(ts);
    g_free(plain);
    g_free(a);
    g_free(b);
    g_free(m);
}

/* ---- multicast (PVRDMA_EX_CAP_MCAST) ------------------------------------ */

/* ff0e::1:2:3 and ::ffff:239.1.2.3 (RoCE v2 from IPv4), and a unicast. */
static const uint8_t mgid6[16] = { 0xff, 0x0e, [11] = 1, [13] = 2, [15] = 3 };
static const uint8_t mgid4[16] = { [10] = 0xff, [11] = 0xff, 239, 1, 2, 3 };

static int mcast_cmd(FakeGuest *fg, uint32_t cmd, uint32_t qp,
                     const uint8_t mgid[16])
{
    struct pvrdma_cmd_mcast m = { .hdr.cmd = cmd, .qp_handle = qp };

    memcpy(m.mgid, mgid, 16);
    return fg_cmd(fg, &m, sizeof(m), NULL);
}

/* A SEND_WITH_IMM of @len pattern bytes from u->a to the group @mgid. */
static void mcast_send(Ud *u, uint64_t id, uint32_t len,
                       const uint8_t mgid[16], uint32_t qkey)
{
    struct pvrdma_sge s = sge(u->ma, VA_A, len);
    struct pvrdma_sq_wqe_hdr h = wqe(id, PVRDMA_WR_SEND_WITH_IMM,
                                     PVRDMA_WR_FLAG_SIGNALED, 1);

    for (uint32_t i = 0; i < len; i++) {
        *fv_mr_ptr(u->ma, VA_A + i) = (uint8_t)(i * 7 + id);
    }
    h.ex.imm_data = 0x5eed0000 | (uint32_t)id;
    h.wr.ud.remote_qpn = PVRDMA_QPN_MULTICAST;
    h.wr.ud.remote_qkey = qkey;
    h.wr.ud.av.port_pd = u->pda | 1u << 24;
    h.wr.ud.av.hop_limit = 1;
    memcpy(h.wr.ud.av.dgid, mgid, 16);
    fv_post_send(u->a, &h, &s, 1);
    fv_ring_sq(u->a);
}

/* A receive of @len bytes at @va of @m for @qp. */
static void mcast_recv(FvQp *qp, FvMr *m, uint64_t va, uint64_t id)
{
    struct pvrdma_sge s = sge(m, va, 40 + 256);

    memset(fv_mr_ptr(m, va), 0xee, 40 + 256);
    fv_post_recv(qp, id, &s, 1);
    fv_ring_rq(qp);
}

/* @qp got send @sid of @len bytes to @mgid from u->a into @va of @m. */
static void mcast_got(Ud *u, FvCq *cq, FvQp *qp, FvMr *m, uint64_t va,
                      uint64_t id, uint64_t sid, uint32_t len,
                      const uint8_t mgid[16])
{
    struct pvrdma_cqe c = expect_cqe(cq, id, qp->handle, PVRDMA_WC_RECV,
                                     PVRDMA_WC_SUCCESS, 40 + len);
    const uint8_t *g = fv_mr_ptr(m, va);

    assert_int_equal(c.src_qp, u->a->qpn);
    assert_int_equal(c.imm_data, 0x5eed0000 | (uint32_t)sid);
    /* the GRH's destination is the group's GID (IPv6 GRH: bytes 24..39) */
    assert_memory_equal(g + 24, mgid, 16);
    for (uint32_t i = 0; i < len; i++) {
        assert_int_equal(g[40 + i], (uint8_t)(i * 7 + sid));
    }
}

/*
 * Two devices of one process: a datagram to a group reaches every QP
 * attached to it (one on the sender's device, one on the other), none
 * that is not; after a detach, a Q_Key mismatch, and a destroyed member.
 */
static void test_mcast_deliver(void **state)
{
    Ud *u = ud_new(true, NULL);
    const struct pvrdma_device_caps *caps = fg_caps(u->fa);
    FvCq *cqc = fv_cq_new(u->fa, 0, 64);
    FvQp *c, *d;

    (void)state;
    assert_true(caps->ex_comp_mask & PVRDMA_EX_CAP_MCAST);
    assert_int_equal(caps->max_mcast_grp, PVRDMA_DEFAULT_MCAST_GROUPS);
    assert_int_equal(caps->max_mcast_qp_attach, PVRDMA_DEFAULT_MCAST_QPS);
    assert_int_equal(caps->max_total_mcast_qp_attach,
                     PVRDMA_DEFAULT_MCAST_GROUPS * PVRDMA_DEFAULT_MCAST_QPS);
    c = fv_qp_new(u->fa, PVRDMA_QPT_UD, u->pda, cqc, cqc, NULL, 16, 2, false);
    d = fv_qp_new(u->fb, PVRDMA_QPT_UD, u->pdb, u->cqb, u->cqb, NULL, 16, 2,
                  false);
    assert_int_equal(fg_qp_to_rts(u->fa, c->handle, PVRDMA_QPT_UD), 0);
    assert_int_equal(fg_qp_to_rts(u->fb, d->handle, PVRDMA_QPT_UD), 0);
    assert_int_equal(mcast_cmd(u->fb, PVRDMA_CMD_ATTACH_MCAST, u->b->handle,
                               mgid4), 0);
    assert_int_equal(mcast_cmd(u->fa, PVRDMA_CMD_ATTACH_MCAST, c->handle,
                               mgid4), 0);
    assert_int_equal(mcast_cmd(u->fb, PVRDMA_CMD_ATTACH_MCAST, d->handle,
                               mgid6), 0);
    mcast_recv(u->b, u->mb, VA_B, 1);
    mcast_recv(c, u->ma, VA_A + 0x2000, 2);
    mcast_recv(d, u->mb, VA_B + 0x2000, 3);
    mcast_send(u, 10, 200, mgid4, 0x11111111);
    ud_sent(u, 10, 200);
    mcast_got(u, u->cqb, u->b, u->mb, VA_B, 1, 10, 200, mgid4);
    mcast_got(u, cqc, c, u->ma, VA_A + 0x2000, 2, 10, 200, mgid4);
    expect_empty(u->cqa);
    expect_empty(cqc);
    expect_empty(u->cqb);           /* d is in the other group */

    /* b leaves: only c; a wrong Q_Key reaches nobody. */
    assert_int_equal(mcast_cmd(u->fb, PVRDMA_CMD_DETACH_MCAST, u->b->handle,
                               mgid4), 0);
    mcast_recv(u->b, u->mb, VA_B, 4);
    mcast_recv(c, u->ma, VA_A + 0x2000, 5);
    mcast_send(u, 11, 64, mgid4, 0x22222222);
    ud_sent(u, 11, 64);
    expect_empty(cqc);
    expect_empty(u->cqb);
    mcast_send(u, 12, 64, mgid4, 0x11111111);
    ud_sent(u, 12, 64);
    mcast_got(u, cqc, c, u->ma, VA_A + 0x2000, 5, 12, 64, mgid4);
    expect_empty(u->cqb);

    /* The other group, then its only member destroyed: sent to nobody. */
    mcast_send(u, 13, 1, mgid6, 0x11111111);
    ud_sent(u, 13, 1);
    mcast_got(u, u->cqb, d, u->mb, VA_B + 0x2000, 3, 13, 1, mgid6);
    assert_int_equal(fg_destroy_qp(u->fb, d->handle), 0);
    mcast_send(u, 14, 8, mgid6, 0x11111111);
    ud_sent(u, 14, 8);
    expect_empty(u->cqb);
    assert_int_equal(u->fa->guest_errors + u->fb->guest_errors, 0);
    g_free(c);
    g_free(d);
    g_free(cqc);
    ud_free(u);
}


/* ---- XRC (PVRDMA_EX_CAP_XRC) --------------------------------------------- */

/*
 * An XRC_INI QP on a, connected to an XRC_TGT QP on b (== a unless
 * two); on b one domain with SRQs s1 (PD pdb, CQ cq1) and s2 (PD pdb2,
 * CQ cq2), and an SRQ of another domain (other).
 */
typedef struct Xrc {
    FakeGuest *fa, *fb;
    uint32_t pda, pdb, pdb2, xrcd, xrcd2;
    FvCq *cqa, *cq1, *cq2;
    FvQp *ini, *tgt;
    FvSrq *s1, *s2, *other;
    FvMr *ma, *mb, *mb2;
} Xrc;

#define VA_B2       0x7d0000000200ull

static Xrc *xrc_new(bool two)
{
    Xrc *x = g_new0(Xrc, 1);

    x->fa = dev_new();
    x->fb = two ? dev_new() : x->fa;
    assert_true(fg_caps(x->fb)->ex_comp_mask & PVRDMA_EX_CAP_XRC);
    assert_int_equal(fg_create_pd(x->fa, 0, &x->pda), 0);
    assert_int_equal(fg_create_pd(x->fb, 0, &x->pdb), 0);
    assert_int_equal(fg_create_pd(x->fb, 0, &x->pdb2), 0);
    x->xrcd = fv_xrcd_new(x->fb);
    x->xrcd2 = fv_xrcd_new(x->fb);
    x->cqa = fv_cq_new(x->fa, 0, 64);
    x->cq1 = fv_cq_new(x->fb, 0, 64);
    x->cq2 = fv_cq_new(x->fb, 0, 64);
    x->s1 = fv_xrc_srq_new(x->fb, x->pdb, x->xrcd, x->cq1, 8, 2);
    x->s2 = fv_xrc_srq_new(x->fb, x->pdb2, x->xrcd, x->cq2, 8, 2);
    x->other = fv_xrc_srq_new(x->fb, x->pdb, x->xrcd2, x->cq1, 8, 2);
    x->tgt = fv_xrc_tgt_new(x->fb, x->xrcd);
    x->ini = fv_qp_new(x->fa, PVRDMA_QPT_XRC_INI, x->pda, x->cqa, NULL,
                       NULL, 16, 4, true);
    x->ma = fv_mr_new(x->fa, x->pda, VA_A, MR_LEN, ALL_ACCESS);
    x->mb = fv_mr_new(x->fb, x->pdb, VA_B, MR_LEN, ALL_ACCESS);
    x->mb2 = fv_mr_new(x->fb, x->pdb2, VA_B2, MR_LEN, ALL_ACCESS);
    assert_int_equal(fv_qp_rts(x->ini, x->tgt->qpn, 0, &default_opts), 0);
    assert_int_equal(fv_qp_rts(x->tgt, x->ini->qpn, 0, &default_opts), 0);
    return x;
}

static void xrc_free(Xrc *x)
{
    fg_free(x->fa);
    if (x->fb != x->fa) {
        fg_free(x->fb);
    }
    g_free(x->cqa);
    g_free(x->cq1);
    g_free(x->cq2);
    g_free(x->ini);
    g_free(x->tgt);
    g_free(x->s1);
    g_free(x->s2);
    g_free(x->other);
    g_free(x->ma);
    g_free(x->mb);
    g_free(x->mb2);
    g_free(x);
}

/* An XRC request of the INI QP to SRQ @srqn; rdma fields as given. */
static void xrc_post(Xrc *x, uint64_t id, uint32_t op, uint32_t srqn,
                     const struct pvrdma_sge *s, uint32_t nsge,
                     uint64_t raddr, uint32_t rkey)
{
    struct pvrdma_sq_wqe_hdr h = wqe(id, op, 0, nsge);

    h.reserved = srqn;
    if (op == PVRDMA_WR_ATOMIC_FETCH_AND_ADD) {
        h.wr.atomic.remote_addr = raddr;
        h.wr.atomic.rkey = rkey;
        h.wr.atomic.compare_add = 5;
    } else {
        h.wr.rdma.remote_addr = raddr;
        h.wr.rdma.rkey = rkey;
    }
    if (op == PVRDMA_WR_SEND_WITH_IMM ||
        op == PVRDMA_WR_RDMA_WRITE_WITH_IMM) {
        h.ex.imm_data = 0x11223344;
    }
    fv_post_send(x->ini, &h, s, nsge);
    fv_ring_sq(x->ini);
}

/* What an XRC receive CQE carries in its qp field. */
static uint64_t xrc_cqe_qp(FvQp *tgt)
{
    return tgt->handle | (uint64_t)tgt->qpn << PVRDMA_CQE_QP_XRC_QPN_SHIFT |
           PVRDMA_CQE_QP_XRC;
}

static void xrc_expect_recv(Xrc *x, FvCq *cq, uint64_t id, uint32_t opcode,
                            uint32_t len)
{
    struct pvrdma_cqe c;

    assert_true(fv_cq_poll(cq, &c));
    assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    assert_int_equal(c.wr_id, id);
    assert_int_equal(c.opcode, opcode);
    assert_int_equal(c.byte_len, len);
    assert_true(c.qp == xrc_cqe_qp(x->tgt));
    assert_int_equal(c.src_qp, x->ini->qpn);
}

/* Every XRC opcode, each SRQ's PD and CQ; a migration in one process. */
static void do_xrc(bool two)
{
    Xrc *x = xrc_new(two);
    struct pvrdma_sge s, r;
    struct pvrdma_cqe c;
    uint64_t v;

    r = sge(x->mb, VA_B + 4096, 100);
    fv_srq_post(x->s1, 100, &r, 1);
    r = sge(x->mb, VA_B + 4096 + 100, 100);
    fv_srq_post(x->s1, 101, &r, 1);
    fv_srq_ring(x->s1);
    r = sge(x->mb2, VA_B2 + 4096, 100);
    fv_srq_post(x->s2, 200, &r, 1);
    fv_srq_ring(x->s2);

    /* SEND to s1: its CQ, its buffer, marked for a process without TGT. */
    fv_mr_fill(x->ma, VA_A, 50, 7);
    s = sge(x->ma, VA_A, 50);
    xrc_post(x, 1, PVRDMA_WR_SEND, x->s1->handle, &s, 1, 0, 0);
    xrc_expect_recv(x, x->cq1, 100, PVRDMA_WC_RECV, 50);
    assert_true(fv_mr_check(x->mb, VA_B + 4096, 50, 7));
    expect_cqe(x->cqa, 1, x->ini->handle, PVRDMA_WC_SEND,
               PVRDMA_WC_SUCCESS, 50);
    expect_empty(x->cq2);
    /* SEND_WITH_IMM to s2 of the same TGT QP: the other CQ and PD. */
    fv_mr_fill(x->ma, VA_A, 60, 9);
    s = sge(x->ma, VA_A, 60);
    xrc_post(x, 2, PVRDMA_WR_SEND_WITH_IMM, x->s2->handle, &s, 1, 0, 0);
    xrc_expect_recv(x, x->cq2, 200, PVRDMA_WC_RECV, 60);
    assert_true(fv_mr_check(x->mb2, VA_B2 + 4096, 60, 9));
    expect_cqe(x->cqa, 2, x->ini->handle, PVRDMA_WC_SEND,
               PVRDMA_WC_SUCCESS, 60);
    /* WRITE and READ with s1: keys of s1's PD. */
    fv_mr_fill(x->ma, VA_A, 3000, 11);
    s = sge(x->ma, VA_A, 3000);
    xrc_post(x, 3, PVRDMA_WR_RDMA_WRITE, x->s1->handle, &s, 1,
             VA_B + 8192, x->mb->rkey);
    expect_cqe(x->cqa, 3, x->ini->handle, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_SUCCESS, 3000);
    assert_true(fv_mr_check(x->mb, VA_B + 8192, 3000, 11));
    fv_mr_fill(x->mb, VA_B + 12000, 2000, 13);
    s = sge(x->ma, VA_A + 8192, 2000);
    xrc_post(x, 4, PVRDMA_WR_RDMA_READ, x->s1->handle, &s, 1,
             VA_B + 12000, x->mb->rkey);
    expect_cqe(x->cqa, 4, x->ini->handle, PVRDMA_WC_RDMA_READ,
               PVRDMA_WC_SUCCESS, 2000);
    assert_true(fv_mr_check(x->ma, VA_A + 8192, 2000, 13));
    /* FETCH_ADD on s1's PD; WRITE_WITH_IMM takes s1's next receive. */
    memset(fv_mr_ptr(x->mb, VA_B + 64), 0, 8);
    *fv_mr_ptr(x->mb, VA_B + 64) = 40;
    s = sge(x->ma, VA_A + 16384, 8);
    xrc_post(x, 5, PVRDMA_WR_ATOMIC_FETCH_AND_ADD, x->s1->handle, &s, 1,
             VA_B + 64, x->mb->rkey);
    expect_cqe(x->cqa, 5, x->ini->handle, PVRDMA_WC_FETCH_ADD,
               PVRDMA_WC_SUCCESS, 8);
    memcpy(&v, fv_mr_ptr(x->ma, VA_A + 16384), 8);
    assert_int_equal(v, 40);
    assert_int_equal(*fv_mr_ptr(x->mb, VA_B + 64), 45);
    s = sge(x->ma, VA_A, 10);
    xrc_post(x, 6, PVRDMA_WR_RDMA_WRITE_WITH_IMM, x->s1->handle, &s, 1,
             VA_B + 100, x->mb->rkey);
    xrc_expect_recv(x, x->cq1, 101, PVRDMA_WC_RECV_RDMA_WITH_IMM, 10);
    expect_cqe(x->cqa, 6, x->ini->handle, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_SUCCESS, 10);

    if (!two) {
        /* Domains, XRC SRQs and both QPs come along; TGT stays bound. */
        fg_migrate(x->fa, fg_join_fabric);
        r = sge(x->mb, VA_B + 4096 + 200, 100);
        fv_srq_post(x->s1, 102, &r, 1);
        fv_srq_ring(x->s1);
        fv_mr_fill(x->ma, VA_A, 70, 17);
        s = sge(x->ma, VA_A, 70);
        xrc_post(x, 7, PVRDMA_WR_SEND, x->s1->handle, &s, 1, 0, 0);
        xrc_expect_recv(x, x->cq1, 102, PVRDMA_WC_RECV, 70);
        assert_true(fv_mr_check(x->mb, VA_B + 4096 + 200, 70, 17));
        expect_cqe(x->cqa, 7, x->ini->handle, PVRDMA_WC_SEND,
                   PVRDMA_WC_SUCCESS, 70);
    }

    /* An SRQ of another domain: invalid request, the TGT QP to ERR. */
    r = sge(x->mb, VA_B + 4096, 100);
    fv_srq_post(x->other, 300, &r, 1);
    fv_srq_ring(x->other);
    s = sge(x->ma, VA_A, 10);
    xrc_post(x, 8, PVRDMA_WR_SEND, x->other->handle, &s, 1, 0, 0);
    expect_cqe(x->cqa, 8, x->ini->handle, PVRDMA_WC_SEND,
               PVRDMA_WC_REM_INV_REQ_ERR, 0);
    assert_int_equal(fv_qp_state(x->tgt), PVRDMA_QPS_ERR);
    assert_int_equal(fv_qp_state(x->ini), PVRDMA_QPS_ERR);
    expect_empty(x->cq1);
    /* Again, after a reset: a key of s1's PD through s2 is refused. */
    assert_int_equal(fv_qp_modify_state(x->ini, PVRDMA_QPS_RESET), 0);
    assert_int_equal(fv_qp_modify_state(x->tgt, PVRDMA_QPS_RESET), 0);
    fv_qp_zero_indexes(x->ini);
    assert_int_equal(fv_qp_rts(x->ini, x->tgt->qpn, 0, &default_opts), 0);
    assert_int_equal(fv_qp_rts(x->tgt, x->ini->qpn, 0, &default_opts), 0);
    xrc_post(x, 9, PVRDMA_WR_RDMA_WRITE, x->s2->handle, &s, 1,
             VA_B + 8192, x->mb->rkey);
    expect_cqe(x->cqa, 9, x->ini->handle, PVRDMA_WC_RDMA_WRITE,
               PVRDMA_WC_REM_ACCESS_ERR, 0);
    /* A number that is no SRQ at all. */
    assert_int_equal(fv_qp_modify_state(x->ini, PVRDMA_QPS_RESET), 0);
    assert_int_equal(fv_qp_modify_state(x->tgt, PVRDMA_QPS_RESET), 0);
    fv_qp_zero_indexes(x->ini);
    assert_int_equal(fv_qp_rts(x->ini, x->tgt->qpn, 0, &default_opts), 0);
    assert_int_equal(fv_qp_rts(x->tgt, x->ini->qpn, 0, &default_opts), 0);
    xrc_post(x, 10, PVRDMA_WR_SEND, 0xABCDEF, &s, 1, 0, 0);
    expect_cqe(x->cqa, 10, x->ini->handle, PVRDMA_WC_SEND,
               PVRDMA_WC_REM_INV_REQ_ERR, 0);
    (void)c;
    xrc_free(x);
}

static void test_xrc_loopback(void **state)
{
    (void)state;
    do_xrc(false);
}

static void test_xrc_two_devices(void **state)
{
    (void)state;
    do_xrc(true);
}

/*
 * What the device refuses around XRC: malformed creates, doorbells of
 * queues an XRC QP does not have, a domain in use; an SRQ that goes away
 * unbinds the TGT QP bound to it.
 */
static void test_xrc_refusals(void **state)
{
    Xrc *x = xrc_new(false);
    FakeGuest *fg = x->fa;
    struct pvrdma_cmd_create_qp_ex q;
    struct pvrdma_cmd_create_srq_ex sr;
    struct pvrdma_cmd_destroy_xrcd d = { .hdr.cmd = PVRDMA_CMD_DESTROY_XRCD };
    struct pvrdma_cmd_destroy_srq ds = { .hdr.cmd = PVRDMA_CMD_DESTROY_SRQ };
    struct pvrdma_sge s = sge(x->ma, VA_A, 10), r;
    unsigned errs;

    (void)state;
    /* XRC_TGT with a PD, a CQ, a queue, or no domain. */
    memset(&q, 0, sizeof(q));
    q.qp.hdr.cmd = PVRDMA_CMD_CREATE_QP;
    q.qp.qp_type = PVRDMA_QPT_XRC_TGT;
    q.xrcd_handle = x->xrcd;
    q.qp.pd_handle = x->pda + 1;
    assert_int_equal(fg_cmd(fg, &q, sizeof(q), NULL), -EINVAL);
    assert_int_equal(fg->last_gerr, PVRDMA_GERR_CREATE_QP_XRC_TGT_FIELDS);
    q.qp.pd_handle = 0;
    q.qp.max_send_wr = 1;
    assert_int_equal(fg_cmd(fg, &q, sizeof(q), NULL), -EINVAL);
    q.qp.max_send_wr = 0;
    q.xrcd_handle = 77;
    assert_int_equal(fg_cmd(fg, &q, sizeof(q), NULL), -EINVAL);
    q.xrcd_handle = x->xrcd;
    q.reserved[0] = 1;
    assert_int_equal(fg_cmd(fg, &q, sizeof(q), NULL), -EINVAL);
    /* XRC_INI with any receive side. */
    fg_qp_req(fg, &q.qp, PVRDMA_QPT_XRC_INI, x->pda, x->cqa->handle,
              x->cqa->handle, 8, 1);
    assert_int_equal(fg_cmd(fg, &q.qp, sizeof(q.qp), NULL), -EINVAL);
    assert_int_equal(fg->last_gerr, PVRDMA_GERR_CREATE_QP_XRC_INI_RECEIVE_SIDE);
    /* XRC SRQ: no such domain, or no such CQ; a basic SRQ as an RC's. */
    fg_srq_req(fg, &sr.srq, x->pda, 8, 1);
    sr.srq.srq_type = PVRDMA_SRQT_XRC;
    sr.xrcd_handle = 99;
    sr.cq_handle = x->cq1->handle;
    assert_int_equal(fg_cmd(fg, &sr, sizeof(sr), NULL), -EINVAL);
    assert_int_equal(fg->last_gerr, PVRDMA_GERR_CREATE_SRQ_BAD_XRCD_CQ);
    sr.xrcd_handle = x->xrcd;
    sr.cq_handle = 999;
    assert_int_equal(fg_cmd(fg, &sr, sizeof(sr), NULL), -EINVAL);
    fg_qp_req(fg, &q.qp, PVRDMA_QPT_RC, x->pda, x->cqa->handle,
              x->cqa->handle, 8, 1);
    q.qp.is_srq = 1;
    q.qp.srq_handle = x->s1->handle;
    q.qp.max_recv_wr = 0;
    q.qp.max_recv_sge = 0;
    q.qp.total_chunks = 1 + q.qp.send_chunks;
    assert_int_equal(fg_cmd(fg, &q.qp, sizeof(q.qp), NULL), -EINVAL);
    /* A receive doorbell of the INI QP, any doorbell of the TGT QP. */
    errs = fg->guest_errors;
    pvrdma_core_uar_write(fg->core, PVRDMA_UAR_QP_OFFSET,
                          PVRDMA_DB_QP_RECV | x->ini->handle);
    pvrdma_core_uar_write(fg->core, PVRDMA_UAR_QP_OFFSET,
                          PVRDMA_DB_QP_SEND | x->tgt->handle);
    pvrdma_core_uar_write(fg->core, PVRDMA_UAR_QP_OFFSET,
                          PVRDMA_DB_QP_RECV | x->tgt->handle);
    assert_int_equal(fg->guest_errors, errs + 3);
    /* The domain is in use: EBUSY. */
    d.xrcd_handle = x->xrcd;
    assert_int_equal(fg_cmd(fg, &d, sizeof(d), NULL), -EBUSY);
    assert_int_equal(fg->last_gerr, PVRDMA_GERR_DESTROY_XRCD_STILL_USED);
    /* s1 goes while the TGT QP is bound to it: the next SEND is refused. */
    r = sge(x->mb, VA_B + 4096, 100);
    fv_srq_post(x->s1, 100, &r, 1);
    fv_srq_ring(x->s1);
    xrc_post(x, 1, PVRDMA_WR_SEND, x->s1->handle, &s, 1, 0, 0);
    xrc_expect_recv(x, x->cq1, 100, PVRDMA_WC_RECV, 10);
    expect_cqe(x->cqa, 1, x->ini->handle, PVRDMA_WC_SEND,
               PVRDMA_WC_SUCCESS, 10);
    ds.srq_handle = x->s1->handle;
    assert_int_equal(fg_cmd(fg, &ds, sizeof(ds), NULL), 0);
    assert_false(((PvrdmaQp *)pvrdma_table_lookup(&fg->core->qp_tbl,
                                                  x->tgt->handle))->has_srq);
    xrc_post(x, 2, PVRDMA_WR_SEND, x->s1->handle, &s, 1, 0, 0);
    expect_cqe(x->cqa, 2, x->ini->handle, PVRDMA_WC_SEND,
               PVRDMA_WC_REM_INV_REQ_ERR, 0);
    /* Everything of the domain gone: it can go too. */
    assert_int_equal(fg_destroy_qp(fg, x->tgt->handle), 0);
    ds.srq_handle = x->s2->handle;
    assert_int_equal(fg_cmd(fg, &ds, sizeof(ds), NULL), 0);
    assert_int_equal(fg_cmd(fg, &d, sizeof(d), NULL), 0);
    assert_int_equal(fg_cmd(fg, &d, sizeof(d), NULL), -EINVAL);
    assert_int_equal(fg->last_gerr, PVRDMA_GERR_DESTROY_XRCD_BAD_XRCD);
    xrc_free(x);
}

/* Without the extension's backend support, none of it is there. */
/*
 * A CQ overrun moves to ERR the QPs that use the CQ.  An XRC_TGT QP uses
 * one only through the SRQ it is bound to, never through the zeros of its
 * unused CQ fields: CQ 0 here is an INI QP's send CQ.
 */
static void test_xrc_cq_overrun(void **state)
{
    FakeGuest *fg = dev_new();
    uint32_t pd, xrcd;
    FvCq *cq0, *small, *big;
    FvQp *ini, *tgt, *ini2, *tgt2;
    FvSrq *srq;
    FvMr *m;
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_sge s, r;
    struct pvrdma_cqe c;
    unsigned i;

    (void)state;
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    xrcd = fv_xrcd_new(fg);
    cq0 = fv_cq_new(fg, 0, 4);
    assert_int_equal(cq0->handle, 0);
    small = fv_cq_new(fg, 0, 4);
    big = fv_cq_new(fg, 0, 64);
    srq = fv_xrc_srq_new(fg, pd, xrcd, small, 8, 1);
    m = fv_mr_new(fg, pd, VA_A, 8192, ALL_ACCESS);
    tgt = fv_xrc_tgt_new(fg, xrcd);
    ini = fv_qp_new(fg, PVRDMA_QPT_XRC_INI, pd, cq0, NULL, NULL, 16, 1, true);
    assert_int_equal(fv_qp_rts(ini, tgt->qpn, 0, &default_opts), 0);
    assert_int_equal(fv_qp_rts(tgt, ini->qpn, 0, &default_opts), 0);
    tgt2 = fv_xrc_tgt_new(fg, xrcd);
    ini2 = fv_qp_new(fg, PVRDMA_QPT_XRC_INI, pd, big, NULL, NULL, 16, 1,
                     true);
    assert_int_equal(fv_qp_rts(ini2, tgt2->qpn, 0, &default_opts), 0);
    assert_int_equal(fv_qp_rts(tgt2, ini2->qpn, 0, &default_opts), 0);

    /* Five WRITEs through tgt (bound to srq): CQ 0 overruns on the 5th. */
    s = sge(m, VA_A, 8);
    for (i = 0; i < 5; i++) {
        h = wqe(i, PVRDMA_WR_RDMA_WRITE, SIG, 1);
        h.reserved = srq->handle;
        h.wr.rdma.remote_addr = VA_A + 4096;
        h.wr.rdma.rkey = m->rkey;
        fv_post_send(ini, &h, &s, 1);
    }
    fv_ring_sq(ini);
    for (i = 0; i < 4; i++) {
        expect_cqe(cq0, i, ini->handle, PVRDMA_WC_RDMA_WRITE,
                   PVRDMA_WC_SUCCESS, 8);
    }
    expect_empty(cq0);
    assert_int_equal(fv_async_count(fg, PVRDMA_EQE_TYPE_CQ_ERR, 0), 1);
    assert_int_equal(fv_qp_state(ini), PVRDMA_QPS_ERR);
    assert_int_equal(fv_qp_state(tgt), PVRDMA_QPS_RTS);
    assert_int_equal(fv_qp_state(tgt2), PVRDMA_QPS_RTS);
    assert_int_equal(fv_qp_state(ini2), PVRDMA_QPS_RTS);

    /* Five SENDs through tgt2 into srq: its CQ overruns on the 5th. */
    for (i = 0; i < 6; i++) {
        r = sge(m, VA_A + 4096 + 8 * i, 8);
        fv_srq_post(srq, 100 + i, &r, 1);
    }
    fv_srq_ring(srq);
    for (i = 0; i < 5; i++) {
        h = wqe(10 + i, PVRDMA_WR_SEND, SIG, 1);
        h.reserved = srq->handle;
        fv_post_send(ini2, &h, &s, 1);
    }
    fv_ring_sq(ini2);
    for (i = 0; i < 4; i++) {
        assert_true(fv_cq_poll(small, &c));
        assert_int_equal(c.wr_id, 100 + i);
        assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
    }
    assert_false(fv_cq_poll(small, &c));
    assert_int_equal(fv_async_count(fg, PVRDMA_EQE_TYPE_CQ_ERR,
                                    small->handle), 1);
    /* Both target QPs were bound to srq: both fail with its CQ. */
    assert_int_equal(fv_qp_state(tgt2), PVRDMA_QPS_ERR);
    assert_int_equal(fv_qp_state(tgt), PVRDMA_QPS_ERR);
    fg_free(fg);
    g_free(cq0);
    g_free(small);
    g_free(big);
    g_free(ini);
    g_free(tgt);
    g_free(ini2);
    g_free(tgt2);
    g_free(srq);
    g_free(m);
}

static void test_xrc_not_offered(void **state)
{
    FakeGuest *fg = fg_new(NULL);
    struct pvrdma_cmd_create_xrcd c = { .hdr.cmd = PVRDMA_CMD_CREATE_XRCD };
    struct pvrdma_cmd_create_qp_ex q;
    uint32_t pd;
    FvCq *cq;

    (void)state;
    fg_use_recording_backend(fg);
    fg_setup(fg);
    assert_false(fg_caps(fg)->ex_comp_mask & PVRDMA_EX_CAP_XRC);
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), NULL), -EINVAL);
    assert_int_equal(fg->last_gerr, PVRDMA_GERR_UNKNOWN_COMMAND);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    cq = fv_cq_new(fg, 0, 64);
    memset(&q, 0, sizeof(q));
    fg_qp_req(fg, &q.qp, PVRDMA_QPT_XRC_INI, pd, cq->handle, 0, 8, 1);
    q.qp.max_recv_wr = 0;
    q.qp.max_recv_sge = 0;
    q.qp.total_chunks = 1 + q.qp.send_chunks;
    assert_int_equal(fg_cmd(fg, &q.qp, sizeof(q.qp), NULL), -EINVAL);
    assert_int_equal(fg->last_gerr, PVRDMA_GERR_CREATE_QP_QP_TYPE_NOT_SUPPORTED);
    q.qp.qp_type = PVRDMA_QPT_XRC_TGT;
    assert_int_equal(fg_cmd(fg, &q, sizeof(q), NULL), -EINVAL);
    fg_free(fg);
    g_free(cq);
}

/*
 * ATTACH_MCAST and DETACH_MCAST refusals, each a guest error: not a UD
 * QP, a unicast GID, reserved bytes, a full group, all groups in use, a
 * QP not in the group; twice the same join is no error; a destroyed QP
 * leaves its groups (the slot is used again); no extension, no command.
 */
static void test_mcast_refusals(void **state)
{
    PvrdmaCoreConfig cfg;
    struct pvrdma_cmd_mcast m = { .hdr.cmd = PVRDMA_CMD_ATTACH_MCAST };
    uint8_t g3[16];
    uint32_t pd, q[4], rc;
    FakeGuest *fg;
    FvCq *cq;
    char *err;

    (void)state;
    pvrdma_core_default_config(&cfg);
    cfg.mcast_groups = 1025;
    assert_false(pvrdma_core_check_config(&cfg, &err));
    assert_non_null(strstr(err, "mcast-groups"));
    g_free(err);
    cfg.mcast_groups = 2;
    cfg.mcast_qps = 0;
    assert_false(pvrdma_core_check_config(&cfg, &err));
    g_free(err);
    cfg.mcast_qps = 2;
    fg = fg_new(&cfg);
    fg_join_fabric(fg);
    fg_setup(fg);
    assert_int_equal(fg_caps(fg)->max_total_mcast_qp_attach, 4);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    cq = fv_cq_new(fg, 0, 64);
    for (int i = 0; i < 4; i++) {
        FvQp *qp = fv_qp_new(fg, i == 3 ? PVRDMA_QPT_RC : PVRDMA_QPT_UD, pd,
                             cq, cq, NULL, 4, 1, false);

        q[i] = qp->handle;
        g_free(qp);
    }
    memcpy(g3, mgid6, 16);
    g3[15] = 9;
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_ATTACH_MCAST, q[3], mgid6),
                     -EINVAL);                  /* RC */
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_ATTACH_MCAST, 77, mgid6),
                     -EINVAL);                  /* no such QP */
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_ATTACH_MCAST, q[0], g3), 0);
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_DETACH_MCAST, q[0], g3), 0);
    {
        uint8_t uni[16];

        fg_test_gid(0, uni);
        assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_ATTACH_MCAST, q[0], uni),
                         -EINVAL);              /* unicast */
    }
    m.qp_handle = q[0];
    memcpy(m.mgid, mgid6, 16);
    m.reserved[2] = 1;
    assert_int_equal(fg_cmd(fg, &m, sizeof(m), NULL), -EINVAL);
    assert_int_equal(fg->guest_errors, 4);
    rc = fg->guest_errors;
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_ATTACH_MCAST, q[0], mgid6), 0);
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_ATTACH_MCAST, q[0], mgid6), 0);
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_ATTACH_MCAST, q[1], mgid6), 0);
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_ATTACH_MCAST, q[2], mgid6),
                     -ENOMEM);                  /* the group is full */
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_ATTACH_MCAST, q[0], mgid4), 0);
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_ATTACH_MCAST, q[0], g3),
                     -ENOMEM);                  /* no group left */
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_DETACH_MCAST, q[0], g3),
                     -EINVAL);                  /* not in it */
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_DETACH_MCAST, q[2], mgid6),
                     -EINVAL);
    assert_int_equal(fg->guest_errors, rc + 4);
    /* mgid4's only member goes: the group's slot is free again */
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_DETACH_MCAST, q[0], mgid4), 0);
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_ATTACH_MCAST, q[2], g3), 0);
    assert_int_equal(fg_destroy_qp(fg, q[2]), 0);
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_ATTACH_MCAST, q[1], mgid4), 0);
    /* q[0] and q[1] in mgid6, q[1] in mgid4; q[1] destroyed leaves both */
    assert_int_equal(fg_destroy_qp(fg, q[1]), 0);
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_ATTACH_MCAST, q[0], g3), 0);
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_DETACH_MCAST, q[0], mgid6), 0);
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_DETACH_MCAST, q[0], g3), 0);
    g_free(cq);
    fg_free(fg);

    /* A device without multicast: the commands are unknown. */
    cfg.mcast_groups = 0;
    fg = fg_new(&cfg);
    fg_join_fabric(fg);
    fg_setup(fg);
    assert_false(fg_caps(fg)->ex_comp_mask & PVRDMA_EX_CAP_MCAST);
    assert_int_equal(fg_caps(fg)->max_mcast_grp, 0);
    assert_int_equal(mcast_cmd(fg, PVRDMA_CMD_ATTACH_MCAST, 1, mgid6),
                     -EINVAL);
    fg_free(fg);
}


/* ---- memory movement ---------------------------------------------------- */

static void test_short_mappings_and_bounce(void **state)
{
    unsigned mode;

    (void)state;
    for (mode = 0; mode < 3; mode++) {
        Pair *p = pair_new(true);
        struct pvrdma_sge s = sge(p->ma, VA_A + 1, 15000);

        if (mode == 0) {
            p->fa->map_max = 100;       /* short mappings on one side */
            p->fb->map_max = 77;
        } else if (mode == 1) {
            p->fb->map_refuse = true;   /* MMIO-like: bounce */
        } else {
            p->fa->map_refuse = true;
            p->fb->map_max = 13;
        }
        fv_mr_fill(p->ma, VA_A + 1, 15000, 11);
        send_one(p, 1, PVRDMA_WR_RDMA_WRITE, &s, 1);
        expect_send_cqe(p, 1, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 15000);
        assert_true(fv_mr_check(p->mb, VA_B, 15000, 11));
        s = sge(p->ma, VA_A + 5, 15000);
        send_one(p, 2, PVRDMA_WR_RDMA_READ, &s, 1);
        expect_send_cqe(p, 2, PVRDMA_WC_RDMA_READ, PVRDMA_WC_SUCCESS, 15000);
        assert_true(fv_mr_check(p->ma, VA_A + 5, 15000, 11));
        pair_free(p);
    }
}

/* Are all pages under [va, va + len) of @mr marked dirty in its guest? */
static bool mr_dirty(FvMr *mr, uint64_t va, uint64_t len)
{
    for (uint64_t v = va & ~0xfffull; v < va + len; v += 4096) {
        uint64_t bus = mr->pages[(v - (mr->va & ~0xfffull)) >> 12];

        if (!mr->fg->dirty[(bus - FG_MEM_BASE) / FG_PAGE]) {
            return false;
        }
    }
    return true;
}

static bool none_dirty(FakeGuest *fg)
{
    for (uint64_t i = 0; i < FG_MEM_SIZE / FG_PAGE; i++) {
        if (fg->dirty[i]) {
            return false;
        }
    }
    return true;
}

/*
 * Payload copies through RAM windows (dma_window, dma_dirty): the MRs'
 * pages are scattered (a gap after each); windows of 8 KiB make the copy
 * change window every other page, whole-RAM windows never; in modes 2
 * and 3 one side maps (short mappings) or bounces instead, in mode 4
 * both do (pvrdma_sgl_copy's four ways of moving a piece).  The data
 * arrives, every page written is reported dirty and no page only read
 * is, and a side that gives windows maps no payload page.
 */
static void test_ram_windows(void **state)
{
    unsigned mode;

    (void)state;
    for (mode = 0; mode < 5; mode++) {
        Pair *p = pair_new(true);
        struct pvrdma_sge s = sge(p->ma, VA_A + 1, 15000);
        unsigned maps_a, maps_b, dirty_calls;

        p->fa->windows = mode != 3 && mode != 4;
        p->fb->windows = mode != 2 && mode != 4;
        p->fa->win_size = p->fb->win_size = mode == 1 ? 8192 : 0;
        p->fb->map_max = mode == 2 || mode == 4 ? 77 : 0;
        p->fa->map_refuse = mode == 3 || mode == 4;
        fv_mr_fill(p->ma, VA_A + 1, 15000, 21);
        maps_a = p->fa->maps;
        maps_b = p->fb->maps;
        dirty_calls = p->fb->dirty_calls;
        send_one(p, 1, PVRDMA_WR_RDMA_WRITE, &s, 1);
        expect_send_cqe(p, 1, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 15000);
        assert_true(fv_mr_check(p->mb, VA_B, 15000, 21));
        assert_true(none_dirty(p->fa));
        if (p->fb->windows) {
            assert_true(mr_dirty(p->mb, VA_B, 15000));
            assert_int_equal(p->fb->maps, maps_b);
            /* one report per page: the pages are not adjacent */
            assert_int_equal(p->fb->dirty_calls - dirty_calls, 4);
        } else {
            assert_true(none_dirty(p->fb));
        }
        if (p->fa->windows) {
            assert_int_equal(p->fa->maps, maps_a);
        }

        /* READ back into A at another offset. */
        memset(p->fb->dirty, 0, FG_MEM_SIZE / FG_PAGE);
        s = sge(p->ma, VA_A + 5, 15000);
        maps_a = p->fa->maps;
        maps_b = p->fb->maps;
        send_one(p, 2, PVRDMA_WR_RDMA_READ, &s, 1);
        expect_send_cqe(p, 2, PVRDMA_WC_RDMA_READ, PVRDMA_WC_SUCCESS, 15000);
        assert_true(fv_mr_check(p->ma, VA_A + 5, 15000, 21));
        assert_true(none_dirty(p->fb));
        if (p->fa->windows) {
            assert_true(mr_dirty(p->ma, VA_A + 5, 15000));
            assert_int_equal(p->fa->maps, maps_a);
        } else {
            assert_true(none_dirty(p->fa));
        }
        if (p->fb->windows) {
            assert_int_equal(p->fb->maps, maps_b);
        }
        assert_int_equal(p->fa->windows_given + p->fb->windows_given > 0,
                         mode != 4);
        pair_free(p);
    }
}

static void test_dma_faults(void **state)
{
    FakeGuest *fg = dev_new();
    uint32_t pd, dma_lkey;
    FvCq *cq;
    FvQp *a, *b;
    struct pvrdma_sge s, r;
    struct pvrdma_sq_wqe_hdr h;
    struct pvrdma_cqe c;
    uint64_t buf = fg_alloc_pages(fg, 1);

    (void)state;
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(fg_create_dma_mr(fg, pd, NULL, &dma_lkey), 0);
    cq = fv_cq_new(fg, 0, 16);
    a = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, NULL, 4, 1, true);
    b = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, NULL, 4, 1, true);
    fv_connect(a, b, &default_opts);
    /* DMA MR: bus addresses; the source is outside guest RAM */
    s = (struct pvrdma_sge){ .addr = FG_BAD_ADDR, .length = 64,
                             .lkey = dma_lkey };
    r = (struct pvrdma_sge){ .addr = buf, .length = 64, .lkey = dma_lkey };
    fv_post_recv(b, 1, &r, 1);
    fv_ring_rq(b);
    h = wqe(2, PVRDMA_WR_SEND, 0, 1);
    fv_post_send(a, &h, &s, 1);
    fv_ring_sq(a);
    assert_true(fv_cq_poll(cq, &c));
    assert_int_equal(c.wr_id, 2);
    assert_int_equal(c.status, PVRDMA_WC_LOC_PROT_ERR);
    /* the receive was not consumed */
    assert_int_equal(fv_qp_state(b), PVRDMA_QPS_RTS);
    assert_false(fv_cq_poll(cq, &c));
    /* now the destination faults: the receive fails, REM_OP_ERR */
    assert_int_equal(fv_qp_modify_state(a, PVRDMA_QPS_RESET), 0);
    fv_qp_zero_indexes(a);
    assert_int_equal(fv_qp_rts(a, b->qpn, 0, &default_opts), 0);
    fg_write32(fg, b->pages[0] + 8, 0);
    assert_int_equal(fv_qp_modify_state(b, PVRDMA_QPS_RESET), 0);
    fv_qp_zero_indexes(b);
    assert_int_equal(fv_qp_rts(b, a->qpn, 0, &default_opts), 0);
    r.addr = FG_BAD_ADDR;
    fv_post_recv(b, 3, &r, 1);
    fv_ring_rq(b);
    s.addr = buf;
    fv_post_send(a, &h, &s, 1);
    fv_ring_sq(a);
    assert_true(fv_cq_poll(cq, &c));
    assert_int_equal(c.wr_id, 3);
    assert_int_equal(c.status, PVRDMA_WC_LOC_PROT_ERR);
    assert_true(fv_cq_poll(cq, &c));
    assert_int_equal(c.wr_id, 2);
    assert_int_equal(c.status, PVRDMA_WC_REM_OP_ERR);
    fg_free(fg);
    g_free(cq);
    g_free(a);
    g_free(b);
}

/* ---- hostile rings and doorbells ----------------------------------------- */

static void test_corrupted_sq_index(void **state)
{
    static const uint32_t bad[] = { 32, 0xffffffffu, 17 + 16, 16 + 1 };
    unsigned i;

    (void)state;
    for (i = 0; i < G_N_ELEMENTS(bad); i++) {
        Pair *p = pair_new(false);
        struct pvrdma_sge r = sge(p->mb, VA_B, 8);
        struct pvrdma_cqe c;

        if (i == 3) {
            /* valid index but 17 entries ahead of cons on a 16-entry SQ */
            fv_sq_set_prod(p->a, 17);
        } else {
            fv_sq_set_prod(p->a, bad[i]);
        }
        fv_ring_sq(p->a);
        assert_int_equal(fv_qp_state(p->a), PVRDMA_QPS_ERR);
        assert_int_equal(fv_async_count(p->fa, PVRDMA_EQE_TYPE_QP_FATAL,
                                        p->a->handle), 1);
        assert_false(fv_cq_poll(p->cqa, &c));
        /* again: no loop, no second event */
        fv_ring_sq(p->a);
        assert_int_equal(fv_async_count(p->fa, PVRDMA_EQE_TYPE_QP_FATAL,
                                        p->a->handle), 0);
        /* RQ of b corrupted */
        fv_post_recv(p->b, 1, &r, 1);
        fv_rq_set_prod(p->b, 0x80000000u);
        fv_ring_rq(p->b);
        assert_int_equal(fv_qp_state(p->b), PVRDMA_QPS_ERR);
        assert_int_equal(fv_async_count(p->fb, PVRDMA_EQE_TYPE_QP_FATAL,
                                        p->b->handle), 1);
        pair_free(p);
    }
}

static void test_corrupted_cq_cons(void **state)
{
    Pair *p = pair_new(false);
    struct pvrdma_sge s = sge(p->ma, VA_A, 8);

    (void)state;
    fv_cq_set_cons(p->cqa, 0x7777);
    send_one(p, 1, PVRDMA_WR_RDMA_WRITE, &s, 1);
    assert_int_equal(fv_async_count(p->fa, PVRDMA_EQE_TYPE_CQ_ERR,
                                    p->cqa->handle), 1);
    assert_int_equal(fv_qp_state(p->a), PVRDMA_QPS_ERR);
    pair_free(p);
}

static void test_doorbell_destroyed_qp(void **state)
{
    Pair *p = pair_new(false);
    struct pvrdma_sge s = sge(p->ma, VA_A, 8);
    struct pvrdma_sq_wqe_hdr h = wqe(1, PVRDMA_WR_SEND, SIG, 1);
    unsigned errs;
    uint32_t uc, ucq, upd;
    FvCq *cq;
    FvQp *uqp;

    (void)state;
    fv_post_send(p->a, &h, &s, 1);
    assert_int_equal(fg_destroy_qp(p->fa, p->a->handle), 0);
    errs = p->fa->guest_errors;
    fv_ring_sq(p->a);
    fv_ring_rq(p->a);
    assert_int_equal(p->fa->guest_errors, errs + 2);
    assert_int_equal(fv_cq_count(p->cqa), 0);
    /* a user context's QP rung from the kernel UAR page: ignored */
    assert_int_equal(fg_create_uc(p->fa, 3, &uc), 0);
    assert_int_equal(fg_create_pd(p->fa, uc, &upd), 0);
    cq = fv_cq_new(p->fa, uc, 16);
    ucq = cq->handle;
    uqp = fv_qp_new(p->fa, PVRDMA_QPT_RC, upd, cq, cq, NULL, 4, 1, true);
    fv_post_send(uqp, &h, &s, 1);
    fv_ring_sq(uqp);
    assert_int_equal(p->fa->guest_errors, errs + 3);
    assert_int_equal(fv_sq_cons(uqp), 0);
    (void)ucq;
    g_free(cq);
    g_free(uqp);
    pair_free(p);
}

static void test_budget_bounded(void **state)
{
    Pair *p = pair_new(false);
    struct pvrdma_sge s = sge(p->ma, VA_A, 8);
    struct pvrdma_sq_wqe_hdr h;
    unsigned i;

    (void)state;
    /* 16 WQEs fill the 16-entry SQ; all run in one doorbell, in order */
    for (i = 0; i < 16; i++) {
        h = wqe(i, PVRDMA_WR_RDMA_WRITE, SIG, 1);
        h.wr.rdma.remote_addr = VA_B + i * 8;
        h.wr.rdma.rkey = p->mb->rkey;
        fv_post_send(p->a, &h, &s, 1);
    }
    fv_ring_sq(p->a);
    for (i = 0; i < 16; i++) {
        expect_send_cqe(p, i, PVRDMA_WC_RDMA_WRITE, PVRDMA_WC_SUCCESS, 8);
    }
    /* wrap-around of the indexes: another 40 in batches of 10 */
    for (i = 0; i < 40; i++) {
        h = wqe(100 + i, PVRDMA_WR_RDMA_WRITE, SIG, 1);
        h.wr.rdma.remote_addr = VA_B;
        h.wr.rdma.rkey = p->mb->rkey;
        fv_post_send(p->a, &h, &s, 1);
        if (i % 10 == 9) {
            unsigned j;

            fv_ring_sq(p->a);
            for (j = i - 9; j <= i; j++) {
                expect_send_cqe(p, 100 + j, PVRDMA_WC_RDMA_WRITE,
                                PVRDMA_WC_SUCCESS, 8);
            }
        }
    }
    assert_int_equal(fv_sq_cons(p->a), (16 + 40) & 31);
    pair_free(p);
}

static void test_qpn_layout_two_devices(void **state)
{
    Pair *p = pair_new(true);
    uint8_t ia = pvrdma_fabric_port_index(p->fa->core->be);
    uint8_t ib = pvrdma_fabric_port_index(p->fb->core->be);

    (void)state;
    assert_true(ia != 0 && ib != 0 && ia != ib);
    assert_int_equal(p->a->qpn, ((uint32_t)ia << 16) | p->a->handle);
    assert_int_equal(p->b->qpn, ((uint32_t)ib << 16) | p->b->handle);
    /* identical GIDs, identical handles, distinct QPNs */
    assert_int_equal(p->a->handle, p->b->handle);
    pair_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_send_recv_loopback),
        cmocka_unit_test(test_send_recv_two_devices),
        cmocka_unit_test(test_write_read_loopback),
        cmocka_unit_test(test_write_read_two_devices),
        cmocka_unit_test(test_atomics_loopback),
        cmocka_unit_test(test_counters),
        cmocka_unit_test(test_atomics_two_devices),
        cmocka_unit_test(test_atomic_bad),
        cmocka_unit_test(test_atomic_write_loopback),
        cmocka_unit_test(test_atomic_write_two_devices),
        cmocka_unit_test(test_atomic_write_bad),
        cmocka_unit_test(test_mcast_deliver),
        cmocka_unit_test(test_mcast_refusals),
        cmocka_unit_test(test_xrc_loopback),
        cmocka_unit_test(test_xrc_two_devices),
        cmocka_unit_test(test_xrc_refusals),
        cmocka_unit_test(test_xrc_cq_overrun),
        cmocka_unit_test(test_xrc_not_offered),
        cmocka_unit_test(test_unsignaled),
        cmocka_unit_test(test_loc_prot_err),
        cmocka_unit_test(test_loc_len_err),
        cmocka_unit_test(test_bad_opcodes),
        cmocka_unit_test(test_ud_loopback),
        cmocka_unit_test(test_ud_two_devices),
        cmocka_unit_test(test_ud_ipv4),
        cmocka_unit_test(test_ud_srq),
        cmocka_unit_test(test_rem_access_err),
        cmocka_unit_test(test_rem_inv_req_recv_too_small),
        cmocka_unit_test(test_recv_wqe_bad),
        cmocka_unit_test(test_retry_exc_err),
        cmocka_unit_test(test_rnr_retry_counts),
        cmocka_unit_test(test_rnr_infinite_and_kick),
        cmocka_unit_test(test_rq_doorbell_hint),
        cmocka_unit_test(test_rnr_without_timer),
        cmocka_unit_test(test_flush),
        cmocka_unit_test(test_uc_loopback),
        cmocka_unit_test(test_uc_two_devices),
        cmocka_unit_test(test_comm_est),
        cmocka_unit_test(test_cq_overrun),
        cmocka_unit_test(test_cq_arm),
        cmocka_unit_test(test_srq),
        cmocka_unit_test(test_srq_resize),
        cmocka_unit_test(test_fast_reg_loopback),
        cmocka_unit_test(test_fast_reg_two_devices),
        cmocka_unit_test(test_fast_reg_bad),
        cmocka_unit_test(test_mw_loopback),
        cmocka_unit_test(test_mw_two_devices),
        cmocka_unit_test(test_mw_local_write_ignored),
        cmocka_unit_test(test_modify_mr_in_place),
        cmocka_unit_test(test_modify_mr_refused),
        cmocka_unit_test(test_mw_remote_refused),
        cmocka_unit_test(test_mw_bind_refused),
        cmocka_unit_test(test_mw_local),
        cmocka_unit_test(test_mw_create),
        cmocka_unit_test(test_cqe_timestamps),
        cmocka_unit_test(test_short_mappings_and_bounce),
        cmocka_unit_test(test_ram_windows),
        cmocka_unit_test(test_dma_faults),
        cmocka_unit_test(test_corrupted_sq_index),
        cmocka_unit_test(test_corrupted_cq_cons),
        cmocka_unit_test(test_doorbell_destroyed_qp),
        cmocka_unit_test(test_budget_bounded),
        cmocka_unit_test(test_qpn_layout_two_devices),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
