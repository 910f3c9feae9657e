/*
 * mig_gap: the blackout each RC QP sees while its peer VM migrates
 * (tests/bench/migrate-bench.sh, docs/migration.md).
 *
 *   mig_gap [-d DEV] [-g GID_INDEX] [-q NQPS] [-p PORT] [-f FILE]
 *           [-t SECS] [-s SECS] [-c FILE] [SERVER]
 *
 * NQPS connected RC QPs between two processes (two VMs).  The client
 * keeps one 8-byte RDMA WRITE outstanding on every QP, each carrying
 * that QP's next counter value into its own slot of the server's
 * buffer, and notes the time of every completion.  It says
 * "mig_gap: running" once the WRITEs go (also into -c FILE: a guest's
 * console, for a host that times a migration by it), and runs until FILE exists,
 * then -t SECS more (so the measure spans the move that FILE announces),
 * or for -s SECS in all; then it drains, and sends the server each QP's last value; the
 * server checks every slot (data moved by RDMA is verified) and answers.
 * The client prints
 *
 *   mig_gap: QPS qps, WRITES writes, gap per QP: median MED ms, max MAX ms, steady STEADY ms
 *
 * gap per QP being the longest time between two consecutive completions
 * of that QP (the blackout it saw: last completion before the switch to
 * first after), and steady the median interval between completions of a
 * QP over the run (what it sees without a move).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

struct info {
    uint32_t qpn;
    uint32_t rkey;
    uint64_t addr;
    uint8_t gid[16];
};

static const char *dev_name, *stop_file, *note_file;
static int gid_index = 1, port = 18541;
static unsigned nqps = 64, after_s = 2, total_s;

static void die(const char *what)
{
    fprintf(stderr, "mig_gap: %s: %s\n", what,
            errno ? strerror(errno) : "failed");
    exit(1);
}

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int tcp_connect(const char *host)
{
    struct addrinfo hints = { .ai_family = AF_INET,
                              .ai_socktype = SOCK_STREAM };
    struct addrinfo *res;
    char ps[16];
    int fd, tries;

    snprintf(ps, sizeof(ps), "%d", port);
    if (getaddrinfo(host, ps, &hints, &res)) {
        die("cannot resolve the server");
    }
    for (tries = 0; tries < 300; tries++) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd >= 0 && !connect(fd, res->ai_addr, res->ai_addrlen)) {
            freeaddrinfo(res);
            return fd;
        }
        close(fd);
        usleep(100000);
    }
    die("cannot connect to the server");
    return -1;
}

static int tcp_accept(void)
{
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons(port) };
    int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0), fd;

    if (lfd < 0 ||
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 1)) {
        die("cannot listen");
    }
    fd = accept(lfd, NULL, NULL);
    if (fd < 0) {
        die("accept");
    }
    close(lfd);
    return fd;
}

static void xfer(int fd, void *buf, size_t n, int out)
{
    size_t done = 0;

    while (done < n) {
        ssize_t r = out ? write(fd, (char *)buf + done, n - done) :
                          read(fd, (char *)buf + done, n - done);
        if (r <= 0) {
            die(out ? "write to the peer" : "read from the peer");
        }
        done += r;
    }
}

static void connect_qp(struct ibv_qp *qp, const struct info *peer)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT, .port_num = 1,
        .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE,
    };

    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                      IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
        die("INIT");
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = peer->qpn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.grh.sgid_index = gid_index;
    memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
        die("RTR");
    }
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
                      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                      IBV_QP_MAX_QP_RD_ATOMIC)) {
        die("RTS");
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static void post_write(struct ibv_qp *qp, unsigned q, uint64_t *slot,
                       struct ibv_mr *mr, const struct info *peer)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t)slot, .length = 8, .lkey = mr->lkey,
    };
    struct ibv_send_wr wr = {
        .wr_id = q, .sg_list = &sge, .num_sge = 1,
        .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
        .wr.rdma = { .remote_addr = peer->addr + 8ull * q,
                     .rkey = peer->rkey },
    }, *bad;

    if (ibv_post_send(qp, &wr, &bad)) {
        die("post_send");
    }
}

int main(int argc, char **argv)
{
    struct ibv_device **list;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_mr *mr;
    struct ibv_qp **qps;
    struct info *mine, *theirs;
    uint64_t *buf;
    const char *server = NULL;
    int c, fd;
    unsigned q;

    while ((c = getopt(argc, argv, "d:g:q:p:f:t:s:c:")) != -1) {
        switch (c) {
        case 'd': dev_name = optarg; break;
        case 'g': gid_index = atoi(optarg); break;
        case 'q': nqps = atoi(optarg); break;
        case 'p': port = atoi(optarg); break;
        case 'f': stop_file = optarg; break;
        case 't': after_s = atoi(optarg); break;
        case 's': total_s = atoi(optarg); break;
        case 'c': note_file = optarg; break;
        default:
            fprintf(stderr, "usage: mig_gap [-d DEV] [-g GIDX] [-q NQPS] "
                    "[-p PORT] [-f FILE] [-t SECS] [-s SECS] [-c FILE] [SERVER]\n");
            return 2;
        }
    }
    if (optind < argc) {
        server = argv[optind];
    }
    if (!nqps || nqps > 4096 || (server && !stop_file && !total_s)) {
        fprintf(stderr, "mig_gap: 1..4096 QPs; a client needs -f or -s\n");
        return 2;
    }
    list = ibv_get_device_list(NULL);
    if (!list || !list[0]) {
        die("no RDMA device");
    }
    for (c = 0; list[c] && dev_name &&
         strcmp(ibv_get_device_name(list[c]), dev_name); c++) {
    }
    if (!list[c] || !(ctx = ibv_open_device(list[c]))) {
        die("cannot open the device");
    }
    pd = ibv_alloc_pd(ctx);
    cq = pd ? ibv_create_cq(ctx, 2 * nqps, NULL, NULL, 0) : NULL;
    buf = calloc(nqps, 8);
    mr = cq && buf ? ibv_reg_mr(pd, buf, 8ull * nqps,
                                IBV_ACCESS_LOCAL_WRITE |
                                IBV_ACCESS_REMOTE_WRITE) : NULL;
    qps = calloc(nqps, sizeof(*qps));
    mine = calloc(nqps, sizeof(*mine));
    theirs = calloc(nqps, sizeof(*theirs));
    if (!mr || !qps || !mine || !theirs) {
        die("PD, CQ or MR");
    }
    for (q = 0; q < nqps; q++) {
        struct ibv_qp_init_attr ia = {
            .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
            .cap = { .max_send_wr = 2, .max_recv_wr = 1,
                     .max_send_sge = 1, .max_recv_sge = 1 },
        };
        union ibv_gid gid;

        qps[q] = ibv_create_qp(pd, &ia);
        if (!qps[q] || ibv_query_gid(ctx, 1, gid_index, &gid)) {
            die("create QP");
        }
        mine[q].qpn = qps[q]->qp_num;
        mine[q].rkey = mr->rkey;
        mine[q].addr = (uintptr_t)buf;
        memcpy(mine[q].gid, gid.raw, 16);
    }
    fd = server ? tcp_connect(server) : tcp_accept();
    xfer(fd, mine, nqps * sizeof(*mine), 1);
    xfer(fd, theirs, nqps * sizeof(*theirs), 0);
    for (q = 0; q < nqps; q++) {
        connect_qp(qps[q], &theirs[q]);
    }
    if (!server) {
        /* The client's last values, then every slot must hold its own. */
        uint64_t *last = calloc(nqps, 8);
        char ok = 1;

        xfer(fd, &ok, 1, 1);            /* connected */
        xfer(fd, last, 8ull * nqps, 0);
        for (q = 0; q < nqps; q++) {
            if (buf[q] != last[q]) {
                fprintf(stderr, "mig_gap: QP %u's slot holds %llu, not its "
                        "last WRITE's %llu\n", q,
                        (unsigned long long)buf[q],
                        (unsigned long long)last[q]);
                ok = 0;
            }
        }
        xfer(fd, &ok, 1, 1);
        return ok ? 0 : 1;
    } else {
        uint64_t *val = calloc(nqps, 8), *src = buf, writes = 0;
        double *last = calloc(nqps, sizeof(double));
        double *gap = calloc(nqps, sizeof(double));
        double *ivl = calloc(nqps, sizeof(double));
        unsigned *n = calloc(nqps, sizeof(unsigned));
        double t0, stop_at = 0;
        unsigned out = nqps;
        char ok;
        struct stat st;

        xfer(fd, &ok, 1, 0);
        t0 = now_ms();
        for (q = 0; q < nqps; q++) {
            src[q] = val[q] = 1;
            last[q] = t0;
            post_write(qps[q], q, &src[q], mr, &theirs[q]);
        }
        if (total_s) {
            stop_at = t0 + total_s * 1e3;
        }
        printf("mig_gap: running\n");
        fflush(stdout);
        if (note_file) {
            FILE *f = fopen(note_file, "w");

            if (f) {
                fprintf(f, "mig_gap: running %u qps\n", nqps);
                fclose(f);
            }
        }
        while (out) {
            struct ibv_wc wc[64];
            int i, ne = ibv_poll_cq(cq, 64, wc);
            double t = now_ms();

            if (ne < 0) {
                die("poll_cq");
            }
            for (i = 0; i < ne; i++) {
                q = wc[i].wr_id;
                if (wc[i].status != IBV_WC_SUCCESS) {
                    fprintf(stderr, "mig_gap: QP %u: status %s (%d)\n", q,
                            ibv_wc_status_str(wc[i].status), wc[i].status);
                    return 1;
                }
                writes++;
                if (t - last[q] > gap[q]) {
                    gap[q] = t - last[q];
                }
                last[q] = t;
                n[q]++;
                if (stop_at && t >= stop_at) {
                    out--;              /* this QP is done */
                    continue;
                }
                src[q] = ++val[q];
                post_write(qps[q], q, &src[q], mr, &theirs[q]);
            }
            if (!stop_at && stop_file && !stat(stop_file, &st)) {
                stop_at = t + after_s * 1e3;
            }
        }
        xfer(fd, val, 8ull * nqps, 1);
        xfer(fd, &ok, 1, 0);
        if (!ok) {
            fprintf(stderr, "mig_gap: the server found a slot wrong\n");
            return 1;
        }
        for (q = 0; q < nqps; q++) {
            ivl[q] = (last[q] - t0) / (n[q] ? n[q] : 1);
        }
        qsort(gap, nqps, sizeof(double), cmp_double);
        qsort(ivl, nqps, sizeof(double), cmp_double);
        printf("mig_gap: %u qps, %llu writes, gap per QP: median %.1f ms, "
               "max %.1f ms, steady %.3f ms\n", nqps,
               (unsigned long long)writes, gap[nqps / 2], gap[nqps - 1],
               ivl[nqps / 2]);
    }
    return 0;
}
