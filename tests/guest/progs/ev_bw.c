/*
 * ev_bw: streaming RDMA WRITE or SEND bandwidth between two processes,
 * waiting for completions either by polling the CQ or on a completion
 * channel (-e).  Debian 12's perftest refuses -e for ib_write_bw ("Events
 * feature not available on WRITE verb"), so make bench measures an
 * application that streams WRITEs and sleeps on its completions with
 * this instead (tests/bench/guest-bench.sh).
 *
 *   ev_bw [-d DEV] [-g GID_INDEX] [-s SIZE] [-n ITERS] [-t DEPTH] [-e]
 *         [-S] [-p PORT] [-f FILE] [SERVER]
 *
 * -f (a WRITE client): stream until FILE exists, then ITERS more (a test
 * that moves the VM in between: tests/guest/test-migrate.sh).
 * -b NBLOCKS (WRITE, both sides): the server's buffer is NBLOCKS blocks of
 * SIZE; WRITE i goes to block i % NBLOCKS with bytes of its own (seeded
 * with i), and the server checks that every block holds the bytes of the
 * last WRITE into it: memory the device wrote while a migration copied
 * it must reach the destination.  NBLOCKS must exceed DEPTH (the client's
 * copy of a block is rewritten only once its WRITE completed).
 * -w USEC (client): wait USEC between requests, a slow stream (with -b:
 * blocks written while a migration copied memory stay unwritten after
 * it long enough to be checked).
 * Without SERVER it serves one client.  -S sends instead of writing (the
 * server keeps DEPTH receives posted and waits the same way as the
 * client).  The client signals every 16th request and keeps DEPTH
 * outstanding, as perftest's bandwidth tests do.  The client's bytes
 * follow a pattern seeded per run; the server checks its buffer after the
 * last WRITE (or the first and last messages received) and answers over
 * the TCP connection, so a run whose data did not arrive fails.  The
 * client prints
 *
 *   ev_bw: OP SIZE x ITERS, events|polling: MBPS MB/s
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define SIGNAL_EVERY 16

struct info {
    uint32_t qpn;
    uint32_t psn;
    uint32_t rkey;
    uint32_t seed;
    uint64_t addr;
    uint8_t gid[16];
};

static const char *dev_name, *stop_file;
static int gid_index = 1, use_events, use_send, port = 18531;
static size_t size = 65536;
static unsigned iters = 2000, depth = 128, nblocks, pace_us;

static void die(const char *what)
{
    fprintf(stderr, "ev_bw: %s: %s\n", what, errno ? strerror(errno) : "failed");
    exit(1);
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (uint8_t)((i * 131 + seed) >> 3) ^ (uint8_t)seed;
    }
}

static int check(const uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != (uint8_t)((uint8_t)((i * 131 + seed) >> 3) ^ (uint8_t)seed)) {
            fprintf(stderr, "ev_bw: byte %zu is 0x%02x, not the pattern's\n",
                    i, p[i]);
            return 0;
        }
    }
    return 1;
}

static int tcp_connect(const char *host)
{
    struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
    struct addrinfo *res;
    char ps[16];
    int fd, tries;

    snprintf(ps, sizeof(ps), "%d", port);
    if (getaddrinfo(host, ps, &hints, &res)) {
        die("cannot resolve the server");
    }
    for (tries = 0; tries < 100; tries++) {
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
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
    int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0), fd;

    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
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

static void connect_qp(struct ibv_qp *qp, const struct info *peer,
                       enum ibv_mtu mtu)
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
    a.path_mtu = mtu;
    a.dest_qp_num = peer->qpn;
    a.rq_psn = peer->psn;
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
    a.sq_psn = 0;
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

/* Completions, by polling or after sleeping on the channel. */
static int wait_cq(struct ibv_cq *cq, struct ibv_comp_channel *ch,
                   struct ibv_wc *wc, int n)
{
    for (;;) {
        int ne = ibv_poll_cq(cq, n, wc);
        struct ibv_cq *ecq;
        void *ctx;

        if (ne || !use_events) {
            return ne;
        }
        if (ibv_req_notify_cq(cq, 0)) {
            die("ibv_req_notify_cq");
        }
        ne = ibv_poll_cq(cq, n, wc);        /* one that came before arming */
        if (ne) {
            return ne;
        }
        if (ibv_get_cq_event(ch, &ecq, &ctx)) {
            die("ibv_get_cq_event");
        }
        ibv_ack_cq_events(ecq, 1);
    }
}

static void post_recv(struct ibv_qp *qp, struct ibv_mr *mr, uint8_t *buf,
                      unsigned slot)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t)(buf + (size_t)slot * size),
        .length = size, .lkey = mr->lkey,
    };
    struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 };
    struct ibv_recv_wr *bad;

    if (ibv_post_recv(qp, &wr, &bad)) {
        die("ibv_post_recv");
    }
}

int main(int argc, char **argv)
{
    struct ibv_device **list;
    struct ibv_context *ctx;
    struct ibv_comp_channel *ch = NULL;
    struct ibv_port_attr pa;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    struct ibv_wc wc[16];
    struct info me = { 0 }, peer;
    struct timespec t0, t1;
    const char *server = NULL;
    uint8_t *buf, verdict;
    size_t buflen;
    unsigned posted = 0, done = 0, total, i;
    union ibv_gid gid;
    int c, fd, ok = 1;

    while ((c = getopt(argc, argv, "d:g:s:n:t:eSp:f:b:w:")) != -1) {
        switch (c) {
        case 'd': dev_name = optarg; break;
        case 'g': gid_index = atoi(optarg); break;
        case 's': size = strtoul(optarg, NULL, 0); break;
        case 'n': iters = strtoul(optarg, NULL, 0); break;
        case 't': depth = strtoul(optarg, NULL, 0); break;
        case 'e': use_events = 1; break;
        case 'S': use_send = 1; break;
        case 'p': port = atoi(optarg); break;
        case 'f': stop_file = optarg; break;
        case 'b': nblocks = strtoul(optarg, NULL, 0); break;
        case 'w': pace_us = strtoul(optarg, NULL, 0); break;
        default:
            fprintf(stderr, "usage: ev_bw [-d DEV] [-g GID_INDEX] [-s SIZE] "
                    "[-n ITERS] [-t DEPTH] [-e] [-S] [-p PORT] [-f FILE] "
                    "[-b NBLOCKS] [-w USEC] [SERVER]\n");
            return 2;
        }
    }
    if (optind < argc) {
        server = argv[optind];
    }
    if (!size || !iters || !depth || depth > 1024 ||
        ((stop_file || nblocks) && use_send) ||
        (nblocks && (nblocks <= depth || nblocks > 65536))) {
        fprintf(stderr, "ev_bw: SIZE and ITERS must be > 0, DEPTH 1-1024, "
                "-f and -b only with WRITE, NBLOCKS above DEPTH\n");
        return 2;
    }
    list = ibv_get_device_list(NULL);
    if (!list || !list[0]) {
        die("no RDMA device");
    }
    for (i = 0; list[i] && dev_name &&
         strcmp(ibv_get_device_name(list[i]), dev_name); i++) {
    }
    if (!list[i]) {
        die("no such device");
    }
    ctx = ibv_open_device(list[i]);
    if (!ctx || ibv_query_port(ctx, 1, &pa) ||
        ibv_query_gid(ctx, 1, gid_index, &gid)) {
        die("opening the device");
    }
    pd = ibv_alloc_pd(ctx);
    if (use_events && !(ch = ibv_create_comp_channel(ctx))) {
        die("ibv_create_comp_channel");
    }
    cq = ibv_create_cq(ctx, 2 * depth, NULL, ch, 0);
    /* The server's SEND buffers: one per receive slot. */
    buflen = nblocks ? size * nblocks : server || !use_send ? size :
             size * depth;
    buf = aligned_alloc(4096, (buflen + 4095) & ~(size_t)4095);
    if (!pd || !cq || !buf) {
        die("resources");
    }
    memset(buf, 0, buflen);
    mr = ibv_reg_mr(pd, buf, buflen, IBV_ACCESS_LOCAL_WRITE |
                    IBV_ACCESS_REMOTE_WRITE);
    {
        struct ibv_qp_init_attr qa = {
            .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
            .cap = { .max_send_wr = depth, .max_recv_wr = depth,
                     .max_send_sge = 1, .max_recv_sge = 1 },
        };
        qp = mr ? ibv_create_qp(pd, &qa) : NULL;
    }
    if (!qp) {
        die("ibv_reg_mr / ibv_create_qp");
    }
    me.qpn = qp->qp_num;
    me.psn = 0;
    me.rkey = mr->rkey;
    me.addr = (uintptr_t)buf;
    me.seed = (uint32_t)time(NULL) ^ (uint32_t)getpid() << 8;
    memcpy(me.gid, gid.raw, 16);

    fd = server ? tcp_connect(server) : tcp_accept();
    xfer(fd, &me, sizeof(me), 1);
    xfer(fd, &peer, sizeof(peer), 0);
    connect_qp(qp, &peer, pa.active_mtu);
    if (!server && use_send) {
        for (i = 0; i < depth; i++) {
            post_recv(qp, mr, buf, i);
        }
    }
    /* Both QPs are ready before the first request. */
    xfer(fd, &me.qpn, 1, 1);
    xfer(fd, &verdict, 1, 0);

    if (!server) {
        unsigned got = 0, first = 1;

        if (use_send) {
            while (got < iters) {
                int ne = wait_cq(cq, ch, wc, 16);

                if (ne < 0) {
                    die("ibv_poll_cq");
                }
                for (c = 0; c < ne; c++) {
                    if (wc[c].status != IBV_WC_SUCCESS) {
                        fprintf(stderr, "ev_bw: receive completed with %s\n",
                                ibv_wc_status_str(wc[c].status));
                        return 1;
                    }
                    got++;
                    if (first || got == iters) {
                        ok &= check(buf + wc[c].wr_id * size, size,
                                    peer.seed);
                        first = 0;
                    }
                    post_recv(qp, mr, buf, wc[c].wr_id);
                }
            }
        }
        /* The client is done sending (WRITE: nothing came here). */
        xfer(fd, &total, sizeof(total), 0);
        if (!use_send && nblocks) {
            for (unsigned b = 0; b < nblocks && b < total; b++) {
                /* The last WRITE into block b. */
                unsigned last = b + (total - 1 - b) / nblocks * nblocks;

                if (!check(buf + (size_t)b * size, size, peer.seed + last)) {
                    fprintf(stderr, "ev_bw: block %u does not hold WRITE "
                            "%u's bytes\n", b, last);
                    ok = 0;
                    break;
                }
            }
        } else if (!use_send) {
            ok = check(buf, size, peer.seed);
        }
        verdict = ok;
        xfer(fd, &verdict, 1, 1);
        return ok ? 0 : 1;
    }

    fill(buf, size, me.seed);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    total = stop_file ? UINT32_MAX : iters;
    while (done < total) {
        if (stop_file && total == UINT32_MAX && access(stop_file, F_OK) == 0) {
            total = posted + iters;
        }
        while (posted < total && posted - done < depth) {
            uint8_t *src = nblocks ? buf + (size_t)(posted % nblocks) * size :
                           buf;
            struct ibv_sge sge = {
                .addr = (uintptr_t)src, .length = size, .lkey = mr->lkey,
            };
            struct ibv_send_wr wr = {
                .wr_id = posted, .sg_list = &sge, .num_sge = 1,
                .opcode = use_send ? IBV_WR_SEND : IBV_WR_RDMA_WRITE,
            }, *bad;

            if ((posted + 1) % SIGNAL_EVERY == 0 || posted + 1 == total ||
                posted + 1 - done == depth) {
                wr.send_flags = IBV_SEND_SIGNALED;
            }
            wr.wr.rdma.remote_addr = peer.addr;
            if (nblocks) {
                /* Bytes of its own; the block's last WRITE completed. */
                fill(src, size, me.seed + posted);
                wr.wr.rdma.remote_addr += (uint64_t)(posted % nblocks) * size;
            }
            wr.wr.rdma.rkey = peer.rkey;
            if (ibv_post_send(qp, &wr, &bad)) {
                die("ibv_post_send");
            }
            posted++;
            if (pace_us) {
                usleep(pace_us);
            }
        }
        c = wait_cq(cq, ch, wc, 16);
        if (c < 0) {
            die("ibv_poll_cq");
        }
        for (i = 0; i < (unsigned)c; i++) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                fprintf(stderr, "ev_bw: request %" PRIu64 " completed with %s\n",
                        wc[i].wr_id, ibv_wc_status_str(wc[i].status));
                return 1;
            }
            done = wc[i].wr_id + 1;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    xfer(fd, &total, sizeof(total), 1);
    xfer(fd, &verdict, 1, 0);
    if (!verdict) {
        fprintf(stderr, "ev_bw: the server found other bytes than sent\n");
        return 1;
    }
    printf("ev_bw: %s %zu x %u, %s: %.2f MB/s\n",
           use_send ? "SEND" : "WRITE", size, total,
           use_events ? "events" : "polling",
           (double)size * total /
           ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) * 1e3);
    return 0;
}
