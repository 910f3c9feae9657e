/*
 * The cost of a small message between two QEMU processes, without QEMU
 * or guests: two fabrics in this process stand for the two processes
 * (tests/unit/fake_host.c), linked by a socket pair with shared rings as
 * fabric-path makes them (or inline, as over TCP, with -i), one fake
 * guest on each, one connected RC QP pair.  The requester keeps a window
 * of 64-byte RDMA WRITEs (or SENDs, -S) outstanding, as ib_write_bw does,
 * and takes its completions with the CQ_POLL doorbell as our provider
 * does; both processes' loops run in turn in this thread (but see -t).
 *
 *   link_ops [-n N] [-w WINDOW] [-s SIZE] [-S] [-i|-T] [-t [-p]]
 *
 * -s: messages of SIZE bytes (64; at most 256 KiB).  -T: the inline link
 * in TLS with a pre-shared key (tests/unit/fake_tls.c, GnuTLS as QEMU's
 * fabric-tls-creds uses it).
 *
 * -t runs the responder's process on a thread of its own, which sleeps
 * in poll() as QEMU's event loop does: the two sides then run at once
 * on two cores, with the kicks and the cache lines the shared rings move
 * between the cores, as between two VMs; it prints the wall-clock time
 * per message beside the CPU time.  -p: the responder's thread polls
 * without sleeping (an event loop that never waits for a kick).
 *
 * Prints the CPU nanoseconds per message of both sides together (what
 * bounds the message rate between two VMs, each side's share on its own
 * core).  Under `valgrind --tool=callgrind` (make -C tests/bench
 * link-ops) the instructions per message, which repeat exactly and so
 * compare two builds without the noise of these machines.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>

#include "fake_guest.h"
#include "fake_host.h"
#include "fake_tls.h"
#include "fake_verbs.h"
#include "pvrdma_core_int.h"
#include "pvrdma_fabric.h"

#define VA_A        0x10000000ull
#define VA_B        0x20000000ull
#define MR_LEN      (256u << 10)   /* FV_MAX_PAGES */
#define PSK         "5e1f0c9a7b3d2e4f6a8b9c0d1e2f3a4b"
#define ALL_ACCESS  (PVRDMA_ACCESS_LOCAL_WRITE | PVRDMA_ACCESS_REMOTE_WRITE | \
                     PVRDMA_ACCESS_REMOTE_READ | PVRDMA_ACCESS_REMOTE_ATOMIC)

static unsigned n_msgs = 200000, window = 16, msg_size = 64;
static bool use_send, inline_link, tls, two_threads, spin;

static double clock_of(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void post(FvQp *qp, FvMr *mr, uint64_t id, uint32_t rkey)
{
    uint64_t at = msg_size > 64 ? 0 : id % 64 * 64;
    struct pvrdma_sge s = { .addr = VA_A + at, .length = msg_size,
                            .lkey = mr->lkey };
    struct pvrdma_sq_wqe_hdr h = { .wr_id = id, .num_sge = 1,
                                   .send_flags = PVRDMA_WR_FLAG_SIGNALED };

    if (use_send) {
        h.opcode = PVRDMA_WR_SEND;
    } else {
        h.opcode = PVRDMA_WR_RDMA_WRITE;
        h.wr.rdma.remote_addr = VA_B + at;
        h.wr.rdma.rkey = rkey;
    }
    fv_post_send(qp, &h, &s, 1);
}

static void post_recvs(FvQp *qp, FvMr *mr, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; i++) {
        struct pvrdma_sge r = { .addr = VA_B + (msg_size > 64 ? 0 :
                                                i % 64 * 64),
                                .length = msg_size, .lkey = mr->lkey };

        fv_post_recv(qp, i, &r, 1);
    }
    fv_ring_rq(qp);
}

/* The responder's process (-t): its event loop, reposting receives. */
typedef struct {
    Host *h;
    FvCq *cq;
    FvQp *qp;
    FvMr *mr;
    bool stop;
} Responder;

static void *responder(void *opaque)
{
    Responder *r = opaque;
    struct pvrdma_cqe c;

    while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        unsigned k = 0;

        hosts_step(&r->h, 1, spin ? 0 : 20);
        while (use_send && fv_cq_poll(r->cq, &c)) {
            assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
            k++;
        }
        if (k) {
            post_recvs(r->qp, r->mr, k);
        }
    }
    return NULL;
}

static void bench(void **state)
{
    const FvConnOpts o = { .access = ALL_ACCESS, .min_rnr_timer = 1,
                           .rnr_retry = 7, .retry_cnt = 7 };
    Host *ha = host_new_real(), *hb = host_new_real(), *hs[2] = { ha, hb };
    FakeGuest *fa = host_guest(ha, 1), *fb = host_guest(hb, 2);
    uint32_t pda, pdb;
    FvCq *cqa, *cqb;
    FvQp *a, *b;
    FvMr *ma, *mb;
    struct pvrdma_cqe c;
    unsigned posted = 0, done = 0, got = 0, i;
    double t0, t1, w0, w1;
    int sv[2];
    Responder rs = { 0 };
    pthread_t th;

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
                     0);
    if (tls) {
        host_use_tls(ha, PSK);
        host_use_tls(hb, PSK);
        pvrdma_fabric_add_tcp_link(ha->fab, sv[0], "bench-a", NULL);
        pvrdma_fabric_add_tcp_link(hb->fab, sv[1], "bench-b", "bench");
    } else {
        pvrdma_fabric_add_link(ha->fab, sv[0], !inline_link, "bench-a");
        pvrdma_fabric_add_link(hb->fab, sv[1], !inline_link, "bench-b");
    }
    for (i = 0; i < 100 && !pvrdma_fabric_links_up(ha->fab); i++) {
        hosts_step(hs, 2, 1);
    }
    assert_int_equal(pvrdma_fabric_links_up(ha->fab), 1);
    assert_int_equal(fg_create_pd(fa, 0, &pda), 0);
    assert_int_equal(fg_create_pd(fb, 0, &pdb), 0);
    cqa = fv_cq_new(fa, 0, 1024);
    cqb = fv_cq_new(fb, 0, 1024);
    a = fv_qp_new(fa, PVRDMA_QPT_RC, pda, cqa, cqa, NULL, window, 1, true);
    b = fv_qp_new(fb, PVRDMA_QPT_RC, pdb, cqb, cqb, NULL, 256, 1, true);
    ma = fv_mr_new(fa, pda, VA_A, MR_LEN, ALL_ACCESS);
    mb = fv_mr_new(fb, pdb, VA_B, MR_LEN, ALL_ACCESS);
    fv_connect(a, b, &o);
    for (i = 0; i < 50; i++) {
        hosts_step(hs, 2, 0);    /* the GIDs reach both sides */
    }
    if (use_send) {
        post_recvs(b, mb, 256);
    }
    if (two_threads) {
        rs = (Responder) { .h = hb, .cq = cqb, .qp = b, .mr = mb };
        assert_int_equal(pthread_create(&th, NULL, responder, &rs), 0);
    }
    t0 = clock_of(CLOCK_PROCESS_CPUTIME_ID);
    w0 = clock_of(CLOCK_MONOTONIC);
    while (done < n_msgs) {
        if (posted - done < window && posted < n_msgs) {
            while (posted - done < window && posted < n_msgs) {
                post(a, ma, posted++, mb->rkey);
            }
            fv_ring_sq(a);
        }
        hosts_step(hs, two_threads ? 1 : 2, 0);
        while (fv_cq_poll(cqa, &c)) {
            assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
            done++;
        }
        fv_cq_poll_doorbell(cqa);
        if (use_send && !two_threads) {
            unsigned k = 0;

            while (fv_cq_poll(cqb, &c)) {
                assert_int_equal(c.status, PVRDMA_WC_SUCCESS);
                k++;
            }
            got += k;
            if (k) {
                post_recvs(b, mb, k);
            }
        }
    }
    t1 = clock_of(CLOCK_PROCESS_CPUTIME_ID);
    w1 = clock_of(CLOCK_MONOTONIC);
    if (two_threads) {
        __atomic_store_n(&rs.stop, true, __ATOMIC_RELEASE);
        pthread_join(th, NULL);
    }
    printf("link_ops: %u %s of %u B over a%s link, window %u%s: %.0f ns of "
           "CPU per message (both processes)", n_msgs,
           use_send ? "SENDs" : "WRITEs", msg_size,
           tls ? " TLS" : inline_link ? "n inline" : " shm",
           window, !two_threads ? "" : spin ? ", two threads, polling" :
           ", two threads", (t1 - t0) / n_msgs);
    if (two_threads) {
        printf(", %.0f ns of wall clock (%.2f M messages/s, %.0f MB/s)",
               (w1 - w0) / n_msgs, n_msgs / (w1 - w0) * 1e3,
               (double)n_msgs * msg_size / (w1 - w0) * 1e3);
    }
    printf("\n");
    fg_free(fa);
    fg_free(fb);
    host_free(ha);
    host_free(hb);
    g_free(cqa);
    g_free(cqb);
    g_free(a);
    g_free(b);
    g_free(ma);
    g_free(mb);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = { cmocka_unit_test(bench) };
    int c;

    /* As QEMU's timers (util/qemu-timer.c): a timer wakes on time. */
    prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);

    while ((c = getopt(argc, argv, "n:w:s:SiTtp")) != -1) {
        switch (c) {
        case 'n': n_msgs = atoi(optarg); break;
        case 'w': window = atoi(optarg); break;
        case 's': msg_size = atoi(optarg); break;
        case 'S': use_send = true; break;
        case 'i': inline_link = true; break;
        case 'T': tls = inline_link = true; break;
        case 't': two_threads = true; break;
        case 'p': spin = true; break;
        default:
            fprintf(stderr, "usage: link_ops [-n N] [-w WINDOW] [-s SIZE] "
                    "[-S] [-i|-T] [-t [-p]]\n");
            return 2;
        }
    }
    if (!msg_size || msg_size > MR_LEN) {
        fprintf(stderr, "link_ops: a size of 1 B to 256 KiB\n");
        return 2;
    }
    if (!window || window > 64) {
        fprintf(stderr, "link_ops: a window of 1 to 64\n");
        return 2;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
