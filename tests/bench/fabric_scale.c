/*
 * Many devices on one fabric directory, without QEMU or guests: N
 * processes each run the device core against a fake guest (one port, a
 * GID of its own) and the fabric's code on the unit tests' host loop
 * (tests/unit/fake_host.c, on the real clock), as N QEMU processes with
 * `-device pvrdma,fabric-path=DIR` would.  They start together; each
 * joins the directory and links to every other.  Prints, for each N
 * given:
 *
 *   - join: the time from the start until the last process had a link
 *     up to every other (ms), the slowest process's;
 *   - fds: descriptors the fabric holds per process once joined (the
 *     largest);
 *   - ring KiB: host memory a process's outgoing rings hold once joined
 *     (shm links, `ring-bytes` of the device's stats; the largest) and
 *     per link;
 *   - all-to-all: each process then has one RC QP connected to each
 *     other process and keeps WINDOW (8) 64-byte RDMA WRITEs outstanding
 *     on every one for 2 s, and when its CQ is empty arms it and sleeps
 *     until a completion (-p: polls it with the CQ_POLL doorbell, as our
 *     provider does, never sleeping): the messages of all processes per
 *     second (every completion must succeed).  The machine's cores are
 *     shared by all N processes, as by N VMs' QEMUs.
 *
 *   fabric_scale [-w WINDOW] [-p] N...   (SCALE_DEBUG=1: the fabrics' messages)
 *   R scale fabric join N 1 VALUE ms
 *   R scale fabric fds N 1 VALUE fds
 *   R scale fabric ring_link N 1 VALUE KiB
 *   R scale fabric alltoall N 1 VALUE Mmsg/s
 *   R scale fabric ring_after N 1 VALUE KiB
 *
 * (ring_after: per link, 1.5 s after the traffic stopped: idle links
 * give their rings' pages back after a second.)
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <dirent.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>
#include <glib/gstdio.h>

#include "fake_guest.h"
#include "fake_host.h"
#include "fake_verbs.h"
#include "pvrdma_fabric.h"

#define JOIN_LIMIT_NS   (10 * 1000000000LL)
#define RATE_NS         (2 * 1000000000LL)
#define VA              0x10000000ull
#define MR_LEN          (64u << 10)
#define ALL_ACCESS      (PVRDMA_ACCESS_LOCAL_WRITE | \
                         PVRDMA_ACCESS_REMOTE_WRITE | \
                         PVRDMA_ACCESS_REMOTE_READ)

static unsigned window = 8;
static bool spin;               /* -p: poll the CQ, never sleep */

/* The phases the parent starts by closing a pipe, in this order. */
enum { P_REPORT, P_READY, P_GO, P_AFTER, P_STOP, P_COUNT };

static int64_t now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static unsigned count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    unsigned n = 0;

    if (!d) {
        return 0;
    }
    while ((e = readdir(d))) {
        n += e->d_name[0] != '.';
    }
    closedir(d);
    return n - 1;               /* the directory's own */
}

/* Process @i's GID. */
static void member_gid(unsigned i, uint8_t gid[16])
{
    fg_test_gid(0, gid);
    gid[13] = 0x5c;
    gid[14] = i >> 8;
    gid[15] = i;
}

/* Has the parent closed the stop pipe? */
static bool stopped(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN };

    return poll(&p, 1, 0) == 1;
}

/*
 * One process of the fabric: join, say when linked to all others, keep
 * serving until told to stop, then report what it holds.
 */
static void say(int out, const char *line)
{
    if (write(out, line, strlen(line)) < 0) {
        _exit(1);
    }
}

/* Run the loop until @fd is closed by the parent. */
static void serve_until(Host *h, int fd)
{
    while (!stopped(fd)) {
        hosts_step(&h, 1, 1);
    }
}

/*
 * All-to-all 64-byte WRITEs for RATE_NS from @go's closing: QP k goes to
 * process k (QP i, our own, idle); every process made its objects in the
 * same order, so QP k's number and the MR's rkey are the same in every
 * process.  Returns the messages completed.
 */
static uint64_t alltoall(Host *h, FakeGuest *fg, unsigned i, unsigned n,
                         int out, int go)
{
    const FvConnOpts o = { .access = ALL_ACCESS, .min_rnr_timer = 1,
                           .rnr_retry = 7, .retry_cnt = 7 };
    uint32_t pd, *outq = g_new0(uint32_t, n);
    FvQp **qp = g_new0(FvQp *, n);
    uint64_t done = 0;
    struct pvrdma_cqe c;
    int64_t end;
    FvCq *cq;
    FvMr *mr;
    unsigned k;

    if (fg_create_pd(fg, 0, &pd)) {
        _exit(1);
    }
    cq = fv_cq_new(fg, 0, MAX(64, n * window * 2));
    for (k = 0; k < n; k++) {
        qp[k] = fv_qp_new(fg, PVRDMA_QPT_RC, pd, cq, cq, NULL, window, 1,
                          true);
    }
    mr = fv_mr_new(fg, pd, VA, MR_LEN, ALL_ACCESS);
    for (k = 0; k < n; k++) {
        uint8_t gid[16];

        member_gid(k, gid);
        if (k != i && fv_qp_rts_gid(qp[k], qp[i]->qpn, gid, &o)) {
            fprintf(stderr, "fabric_scale: process %u: QP to %u\n", i, k);
            _exit(1);
        }
    }
    {
        char line[64];

        snprintf(line, sizeof(line), "ready %u\n", i);
        say(out, line);
    }
    serve_until(h, go);
    end = now_ns() + RATE_NS;
    while (now_ns() < end) {
        bool empty = true;

        for (k = 0; k < n; k++) {
            if (k == i || outq[k] >= window) {
                continue;
            }
            while (outq[k] < window) {
                struct pvrdma_sge sg = {
                    .addr = VA + k % 256 * 64, .length = 64,
                    .lkey = mr->lkey,
                };
                struct pvrdma_sq_wqe_hdr hd = {
                    .wr_id = k, .num_sge = 1,
                    .send_flags = PVRDMA_WR_FLAG_SIGNALED,
                    .opcode = PVRDMA_WR_RDMA_WRITE,
                };

                hd.wr.rdma.remote_addr = VA + MR_LEN / 2 + i % 256 * 64;
                hd.wr.rdma.rkey = mr->rkey;
                fv_post_send(qp[k], &hd, &sg, 1);
                outq[k]++;
            }
            fv_ring_sq(qp[k]);
        }
        hosts_step(&h, 1, 0);
        while (fv_cq_poll(cq, &c)) {
            if (c.status != PVRDMA_WC_SUCCESS || c.wr_id >= n) {
                fprintf(stderr, "fabric_scale: process %u: WRITE to %u: "
                        "status %u\n", i, (unsigned)c.wr_id, c.status);
                _exit(1);
            }
            outq[c.wr_id]--;
            done++;
            empty = false;
        }
        if (empty && spin) {
            fv_cq_poll_doorbell(cq);
        } else if (empty) {
            /* Asleep until a completion: armed, woken by a kick. */
            pvrdma_core_uar_write(fg->core, PVRDMA_UAR_CQ_OFFSET,
                                  PVRDMA_DB_CQ_ARM | cq->handle);
            if (!fv_cq_count(cq)) {
                hosts_step(&h, 1, 1);
            }
        }
    }
    g_free(outq);
    g_free(qp);
    return done;
}

static uint64_t ring_held(Host *h, PvrdmaLinkStats *st, unsigned n,
                          unsigned *links)
{
    uint64_t ring = 0;
    unsigned k;

    *links = pvrdma_fabric_link_stats(h->fab, st, n);
    for (k = 0; k < MIN(*links, n); k++) {
        ring += st[k].ring_bytes;
    }
    return ring;
}

static void member(unsigned i, unsigned n, const char *dir, int64_t t0,
                   int out, const int *ph)
{
    Host *h = host_new_real();
    FakeGuest *fg = fg_new(NULL);
    PvrdmaLinkStats *st = g_new0(PvrdmaLinkStats, n);
    char *err = NULL, line[160];
    uint64_t ring = 0;
    int64_t joined = -1;
    unsigned links, fds, seen = 0, base = count_fds();
    bool debug = getenv("SCALE_DEBUG") != NULL;
    struct pvrdma_cmd_create_bind c = { .hdr.cmd = PVRDMA_CMD_CREATE_BIND };
    PvrdmaFabricPort *port;
    char *msg = NULL;

    /* Port 1 of its fabric, as host_guest(), but a GID of its own. */
    port = pvrdma_fabric_port_new(h->fab, fg->core, 1, &msg);
    if (!port) {
        fprintf(stderr, "fabric_scale: process %u: %s\n", i, msg);
        _exit(1);
    }
    pvrdma_core_set_backend(fg->core, &pvrdma_fabric_backend_ops, port);
    fg_setup(fg);
    c.mtu = 1024;
    c.vlan = 0xfff;
    c.index = 0;
    member_gid(i, c.new_gid);
    c.gid_type = PVRDMA_GID_TYPE_FLAG_ROCE_V2;
    if (fg_cmd(fg, &c, sizeof(c), NULL)) {
        fprintf(stderr, "fabric_scale: process %u: bind failed\n", i);
        _exit(1);
    }
    if (!pvrdma_fabric_join_dir(h->fab, dir, &err)) {
        fprintf(stderr, "fabric_scale: process %u: %s\n", i, err);
        _exit(1);
    }
    while (!stopped(ph[P_REPORT])) {
        hosts_step(&h, 1, 1);
        if (debug && h->reports != seen) {
            seen = h->reports;
            fprintf(stderr, "%.3f %u: %s\n", (now_ns() - t0) / 1e6, i,
                    h->last_report);
        }
        if (joined < 0 && pvrdma_fabric_links_up(h->fab) == n - 1) {
            joined = now_ns() - t0;
            snprintf(line, sizeof(line), "joined %u %lld\n", i,
                     (long long)joined);
            say(out, line);
        }
        if (joined < 0 && now_ns() - t0 > JOIN_LIMIT_NS) {
            fprintf(stderr, "fabric_scale: process %u: %u of %u links "
                    "after 10 s (%u reports, the last: %s)\n", i,
                    pvrdma_fabric_links_up(h->fab), n - 1, h->reports,
                    h->last_report);
            _exit(1);
        }
    }
    ring = ring_held(h, st, n, &links);
    fds = count_fds() - base;  /* the fabric's, not this harness's */
    snprintf(line, sizeof(line), "held %u %u %u %llu\n", i, links, fds,
             (unsigned long long)ring);
    say(out, line);
    /* Until all have reported too, then the traffic. */
    serve_until(h, ph[P_READY]);
    snprintf(line, sizeof(line), "rate %u %llu\n", i,
             (unsigned long long)alltoall(h, fg, i, n, out, ph[P_GO]));
    say(out, line);
    /* The rings' memory once the traffic has stopped for a while. */
    serve_until(h, ph[P_AFTER]);
    ring = ring_held(h, st, n, &links);
    snprintf(line, sizeof(line), "after %u %llu\n", i,
             (unsigned long long)ring);
    say(out, line);
    serve_until(h, ph[P_STOP]);
    _exit(0);
}

static bool run_n(unsigned n)
{
    char *dir = g_dir_make_tmp("pvrdma-scale-XXXXXX", NULL);
    int res[2], ph[P_COUNT][2], p;
    int64_t t0, join_max = 0;
    unsigned joined = 0, held = 0, ready = 0, rated = 0, after = 0;
    unsigned fds_max = 0, i;
    uint64_t ring_max = 0, links_min = n, msgs = 0, busy_max = 0;
    pid_t *pids = g_new0(pid_t, n);
    GString *buf = g_string_new(NULL);
    bool ok = true;

    if (!dir || pipe(res)) {
        perror("fabric_scale");
        return false;
    }
    for (p = 0; p < P_COUNT; p++) {
        if (pipe(ph[p])) {
            perror("fabric_scale");
            return false;
        }
    }
    t0 = now_ns();
    for (i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            close(res[0]);
            for (p = 0; p < P_COUNT; p++) {
                close(ph[p][1]);
            }
            int mine[P_COUNT];

            for (p = 0; p < P_COUNT; p++) {
                mine[p] = ph[p][0];
            }
            member(i, n, dir, t0, res[1], mine);
        }
    }
    close(res[1]);
    for (p = 0; p < P_COUNT; p++) {
        close(ph[p][0]);
    }
    /* "joined I NS", "held I LINKS FDS RING", "ready I", "rate I MSGS" */
    while (after < n) {
        char chunk[4096], *nl;
        ssize_t r = read(res[0], chunk, sizeof(chunk));

        if (r <= 0) {
            fprintf(stderr, "fabric_scale: N=%u: %u joined, %u reported, "
                    "%u ready, %u ran, %u after, then the processes "
                    "went\n", n, joined, held, ready, rated, after);
            ok = false;
            break;
        }
        g_string_append_len(buf, chunk, r);
        while ((nl = strchr(buf->str, '\n'))) {
            unsigned a, b, c;
            long long v;
            unsigned long long rb;

            *nl = 0;
            if (sscanf(buf->str, "joined %u %lld", &a, &v) == 2) {
                join_max = MAX(join_max, v);
                if (++joined == n) {
                    /* all linked: let them settle, then ask */
                    usleep(200 * 1000);
                    close(ph[P_REPORT][1]);
                }
            } else if (sscanf(buf->str, "held %u %u %u %llu", &a, &b, &c,
                              &rb) == 4) {
                links_min = MIN(links_min, b);
                fds_max = MAX(fds_max, c);
                ring_max = MAX(ring_max, rb);
                if (++held == n) {
                    close(ph[P_READY][1]);
                }
            } else if (sscanf(buf->str, "ready %u", &a) == 1) {
                if (++ready == n) {
                    close(ph[P_GO][1]);
                }
            } else if (sscanf(buf->str, "rate %u %llu", &a, &rb) == 2) {
                msgs += rb;
                if (++rated == n) {
                    /* quiet for longer than PVRDMA_LINK_SHRINK_NS */
                    usleep(1500 * 1000);
                    close(ph[P_AFTER][1]);
                }
            } else if (sscanf(buf->str, "after %u %llu", &a, &rb) == 2) {
                busy_max = MAX(busy_max, rb);
                after++;
            }
            g_string_erase(buf, 0, nl + 1 - buf->str);
        }
    }
    close(res[0]);
    for (p = 0; p < P_COUNT; p++) {
        close(ph[p][1]);        /* (those not closed yet: EBADF) */
    }
    for (i = 0; i < n; i++) {
        int status;

        if (!ok) {
            kill(pids[i], SIGKILL);
        }
        if (waitpid(pids[i], &status, 0) < 0 || !WIFEXITED(status) ||
            WEXITSTATUS(status)) {
            ok = false;
        }
    }
    if (ok) {
        printf("R scale fabric join %u 1 %.1f ms\n", n, join_max / 1e6);
        printf("R scale fabric fds %u 1 %u fds\n", n, fds_max);
        printf("R scale fabric ring_link %u 1 %.1f KiB\n", n,
               ring_max / 1024.0 / (n - 1));
        printf("R scale fabric alltoall %u 1 %.3f Mmsg/s\n", n,
               msgs / (RATE_NS / 1e9) / 1e6);
        printf("R scale fabric ring_after %u 1 %.1f KiB\n", n,
               busy_max / 1024.0 / (n - 1));
        printf("# N=%u: every process linked to the %u others in %.1f ms;"
               " at most %u fds and %.0f KiB of rings per process;"
               " all-to-all %.3f M msg/s; 1.5 s after it %.0f KiB of rings"
               " per process\n", n, (unsigned)links_min,
               join_max / 1e6, fds_max, ring_max / 1024.0,
               msgs / (RATE_NS / 1e9) / 1e6, busy_max / 1024.0);
    }
    g_string_free(buf, true);
    g_free(pids);
    /* The sockets of processes that exited without leaving. */
    {
        GDir *d = g_dir_open(dir, 0, NULL);
        const char *e;

        while (d && (e = g_dir_read_name(d))) {
            g_autofree char *f = g_build_filename(dir, e, NULL);

            g_unlink(f);
        }
        if (d) {
            g_dir_close(d);
        }
    }
    g_rmdir(dir);
    g_free(dir);
    return ok;
}

int main(int argc, char **argv)
{
    int i;

    i = 1;
    for (;;) {
        if (argc > i + 1 && !strcmp(argv[i], "-w")) {
            window = strtoul(argv[i + 1], NULL, 0);
            i += 2;
        } else if (argc > i && !strcmp(argv[i], "-p")) {
            spin = true;
            i++;
        } else {
            break;
        }
    }
    if (argc <= i || !window || window > 64) {
        fprintf(stderr, "usage: fabric_scale [-w WINDOW(1-64)] [-p] N...\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* As QEMU's timers (util/qemu-timer.c): a timer wakes on time. */
    prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
    signal(SIGPIPE, SIG_IGN);
    for (; i < argc; i++) {
        unsigned n = strtoul(argv[i], NULL, 0);

        if (n < 2 || n > 256 || !run_n(n)) {
            fprintf(stderr, "fabric_scale: N=%s failed\n", argv[i]);
            return 1;
        }
    }
    return 0;
}
