/*
 * parted: what the connected QPs of a VM restored from a snapshot do when
 * their peer went on talking with the VM's later run (docs/migration.md,
 * "Snapshots restored after the peers moved on"; tests/guest/test-xvm-restore.sh).
 *
 *   parted [-d DEV] [-g GIDX] [-p PORT] -s          (the peer, P)
 *   parted [-d DEV] [-g GIDX] [-p PORT] -f FILE P   (the VM snapshotted, M)
 *
 * Two connected RC QPs, X and Y, between the two processes, each side
 * always with one receive posted on each.  M drives over TCP (a new
 * connection per step, so that a restored M needs none of its old ones):
 *
 *   round 1   a SEND each way on X and on Y, data checked; M then says
 *             "parted: snapshot now" and waits until FILE holds a word;
 *   "live"    (the run that goes on after the snapshot) round 2, the same;
 *             M then waits to be killed;
 *   "restored" (the snapshot restored in a new QEMU, P having heard from
 *             the later run):
 *     X: M SENDs first.  Its SEND completes with RETRY_EXC_ERR (12), its
 *        QP is in ERR and it gets IBV_EVENT_QP_FATAL; P's receive does
 *        not take it: P's own SEND then fails and P's receive is flushed
 *        (WR_FLUSH_ERR), never completed with M's bytes.
 *     Y: P SENDs first.  It completes with RETRY_EXC_ERR and QP_FATAL;
 *        M's QP goes to ERR with QP_FATAL and its receive is flushed.
 *
 * Each side exits 0 when everything it checks held, else prints why and
 * exits 1.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define MSG     64
#define WAIT_MS 60000

struct info {
    uint32_t qpn[2];
    uint8_t gid[16];
};

/* One control message, both ways: a word and, for hello, QP numbers. */
struct ctl {
    char word[16];
    uint32_t round;
    struct info info;
};

static const char *dev_name = NULL, *go_file;
static int gid_index = 1, port = 18700;
static struct ibv_context *ctx;
static struct ibv_qp *qp[2];
static struct ibv_cq *cq[2];
static struct ibv_mr *mr;
static uint8_t *buf;            /* per QP: send slot, receive slot */
static const char *side = "M";

static void die(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "parted %s: ", side);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s%s\n", errno ? ": " : "", errno ? strerror(errno) : "");
    exit(1);
}

static uint8_t *slot(int q, int recv)
{
    return buf + (2 * q + recv) * MSG;
}

static int listen_fd = -1;

static int tcp_connect(const char *host)
{
    struct addrinfo hints = { .ai_family = AF_INET,
                              .ai_socktype = SOCK_STREAM };
    struct addrinfo *res;
    char ps[16];
    int fd, tries;

    snprintf(ps, sizeof(ps), "%d", port);
    if (getaddrinfo(host, ps, &hints, &res)) {
        die("cannot resolve %s", host);
    }
    /* The peer may still be booting: up to 5 minutes. */
    for (tries = 0; tries < 3000; tries++) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd >= 0 && !connect(fd, res->ai_addr, res->ai_addrlen)) {
            freeaddrinfo(res);
            return fd;
        }
        close(fd);
        usleep(100000);
    }
    die("cannot connect to %s port %d", host, port);
    return -1;
}

static int tcp_accept(void)
{
    int fd;

    if (listen_fd < 0) {
        struct sockaddr_in a = { .sin_family = AF_INET,
                                 .sin_port = htons(port) };
        int one = 1;

        listen_fd = socket(AF_INET, SOCK_STREAM, 0);
        if (listen_fd < 0 ||
            setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one,
                       sizeof(one)) ||
            bind(listen_fd, (struct sockaddr *)&a, sizeof(a)) ||
            listen(listen_fd, 4)) {
            die("cannot listen on port %d", port);
        }
    }
    fd = accept(listen_fd, NULL, NULL);
    if (fd < 0) {
        die("accept");
    }
    return fd;
}

static void xfer(int fd, struct ctl *c, int out)
{
    size_t done = 0, n = sizeof(*c);

    while (done < n) {
        ssize_t r = out ? write(fd, (char *)c + done, n - done) :
                          read(fd, (char *)c + done, n - done);
        if (r <= 0) {
            die(out ? "write to the peer" : "read from the peer");
        }
        done += r;
    }
}

static void say(int fd, const char *word, uint32_t round)
{
    struct ctl c;

    memset(&c, 0, sizeof(c));
    snprintf(c.word, sizeof(c.word), "%s", word);
    c.round = round;
    xfer(fd, &c, 1);
}

static struct ctl hear(int fd, const char *want)
{
    struct ctl c;

    xfer(fd, &c, 0);
    c.word[sizeof(c.word) - 1] = 0;
    if (want && strcmp(c.word, want)) {
        errno = 0;
        die("the peer said \"%s\", not \"%s\"", c.word, want);
    }
    return c;
}

static void fill(uint8_t *p, unsigned tag)
{
    unsigned i;

    for (i = 0; i < MSG; i++) {
        p[i] = (uint8_t)(tag * 31 + i);
    }
}

static void post_recv(int q)
{
    struct ibv_sge s = { .addr = (uintptr_t)slot(q, 1), .length = MSG,
                         .lkey = mr->lkey };
    struct ibv_recv_wr wr = { .wr_id = 100 + q, .sg_list = &s,
                              .num_sge = 1 }, *bad;

    memset(slot(q, 1), 0, MSG);
    if (ibv_post_recv(qp[q], &wr, &bad)) {
        die("post_recv on %c", 'X' + q);
    }
}

static void post_send(int q, unsigned tag)
{
    struct ibv_sge s = { .addr = (uintptr_t)slot(q, 0), .length = MSG,
                         .lkey = mr->lkey };
    struct ibv_send_wr wr = { .wr_id = 200 + q, .sg_list = &s,
                              .num_sge = 1, .opcode = IBV_WR_SEND,
                              .send_flags = IBV_SEND_SIGNALED }, *bad;

    fill(slot(q, 0), tag);
    if (ibv_post_send(qp[q], &wr, &bad)) {
        die("post_send on %c", 'X' + q);
    }
}

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The next completion of QP @q (its own CQ). */
static struct ibv_wc next_wc(int q)
{
    double end = now_ms() + WAIT_MS;
    struct ibv_wc wc;
    int n;

    while ((n = ibv_poll_cq(cq[q], 1, &wc)) == 0) {
        if (now_ms() > end) {
            errno = 0;
            die("no completion on %c in %d s", 'X' + q, WAIT_MS / 1000);
        }
        usleep(1000);
    }
    if (n < 0) {
        die("poll_cq");
    }
    return wc;
}

static void expect_wc(int q, int recv, enum ibv_wc_status status)
{
    struct ibv_wc wc = next_wc(q);

    errno = 0;
    if (wc.wr_id != (uint64_t)(recv ? 100 + q : 200 + q)) {
        die("%c: a %s completion came first (status %s)", 'X' + q,
            wc.wr_id >= 200 ? "send" : "receive",
            ibv_wc_status_str(wc.status));
    }
    if (wc.status != status) {
        die("%c: %s completed with %s (%d), not %s", 'X' + q,
            recv ? "the receive" : "the SEND", ibv_wc_status_str(wc.status),
            wc.status, ibv_wc_status_str(status));
    }
}

/* A completion of QP @q's SEND and one of its receive, in either order. */
static void expect_pair(int q, enum ibv_wc_status send_status,
                        enum ibv_wc_status recv_status)
{
    int seen[2] = { 0, 0 }, i;

    for (i = 0; i < 2; i++) {
        struct ibv_wc wc = next_wc(q);
        int recv = wc.wr_id == (uint64_t)(100 + q);
        enum ibv_wc_status want = recv ? recv_status : send_status;

        errno = 0;
        if ((!recv && wc.wr_id != (uint64_t)(200 + q)) || seen[recv]) {
            die("%c: unexpected completion %llu (%s)", 'X' + q,
                (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
        }
        seen[recv] = 1;
        if (wc.status != want) {
            die("%c: %s completed with %s (%d), not %s", 'X' + q,
                recv ? "the receive" : "the SEND",
                ibv_wc_status_str(wc.status), wc.status,
                ibv_wc_status_str(want));
        }
    }
}

static void expect_data(int q, unsigned tag)
{
    uint8_t want[MSG];

    fill(want, tag);
    errno = 0;
    if (memcmp(slot(q, 1), want, MSG)) {
        die("%c: received bytes are wrong", 'X' + q);
    }
}

static void expect_err_state(int q)
{
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;

    if (ibv_query_qp(qp[q], &a, IBV_QP_STATE, &ia)) {
        die("query_qp %c", 'X' + q);
    }
    errno = 0;
    if (a.qp_state != IBV_QPS_ERR) {
        die("%c is in state %d, not ERR", 'X' + q, a.qp_state);
    }
}

/* IBV_EVENT_QP_FATAL for QP @q within WAIT_MS (others are passed over). */
static void expect_fatal(int q)
{
    double end = now_ms() + WAIT_MS;
    struct ibv_async_event ev;

    for (;;) {
        struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
        int left = (int)(end - now_ms());

        errno = 0;
        if (left <= 0 || poll(&p, 1, left) <= 0) {
            die("no IBV_EVENT_QP_FATAL for %c", 'X' + q);
        }
        if (ibv_get_async_event(ctx, &ev)) {
            continue;
        }
        ibv_ack_async_event(&ev);
        if (ev.event_type == IBV_EVENT_QP_FATAL && ev.element.qp == qp[q]) {
            return;
        }
        printf("parted %s: async event %s passed over\n", side,
               ibv_event_type_str(ev.event_type));
    }
}

static void connect_qp(int q, const struct info *peer)
{
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT, .port_num = 1,
        .qp_access_flags = IBV_ACCESS_LOCAL_WRITE,
    };

    if (ibv_modify_qp(qp[q], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                      IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
        die("INIT");
    }
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = peer->qpn[q];
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = 1;
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.grh.sgid_index = gid_index;
    memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
    if (ibv_modify_qp(qp[q], &a, IBV_QP_STATE | IBV_QP_AV |
                      IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
        die("RTR");
    }
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp(qp[q], &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
                      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                      IBV_QP_MAX_QP_RD_ATOMIC)) {
        die("RTS");
    }
    post_recv(q);
}

static void setup(struct info *mine)
{
    struct ibv_device **list = ibv_get_device_list(NULL);
    union ibv_gid gid;
    struct ibv_pd *pd;
    int i, q;

    for (i = 0; list && list[i] && dev_name &&
         strcmp(ibv_get_device_name(list[i]), dev_name); i++) {
    }
    if (!list || !list[i] || !(ctx = ibv_open_device(list[i]))) {
        die("cannot open the device");
    }
    if (fcntl(ctx->async_fd, F_SETFL,
              fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK)) {
        die("async fd");
    }
    pd = ibv_alloc_pd(ctx);
    buf = calloc(4, MSG);
    mr = pd && buf ? ibv_reg_mr(pd, buf, 4 * MSG,
                                IBV_ACCESS_LOCAL_WRITE) : NULL;
    if (!mr || ibv_query_gid(ctx, 1, gid_index, &gid)) {
        die("PD, MR or GID");
    }
    memset(mine, 0, sizeof(*mine));
    memcpy(mine->gid, gid.raw, 16);
    for (q = 0; q < 2; q++) {
        struct ibv_qp_init_attr ia = {
            .qp_type = IBV_QPT_RC,
            .cap = { .max_send_wr = 2, .max_recv_wr = 2,
                     .max_send_sge = 1, .max_recv_sge = 1 },
        };

        cq[q] = ibv_create_cq(ctx, 8, NULL, NULL, 0);
        ia.send_cq = ia.recv_cq = cq[q];
        qp[q] = cq[q] ? ibv_create_qp(pd, &ia) : NULL;
        if (!qp[q]) {
            die("create QP");
        }
        mine->qpn[q] = qp[q]->qp_num;
    }
}

/* Tags: round r, QP q, M's (0) or P's (1) message. */
static unsigned tag(unsigned r, int q, int from_p)
{
    return r * 4 + q * 2 + from_p;
}

/* ---- P -------------------------------------------------------------------- */

static int serve(void)
{
    struct info mine;
    int x_done = 0, y_done = 0, q;

    side = "P";
    setup(&mine);
    for (;;) {
        int fd = tcp_accept();
        struct ctl c = hear(fd, NULL);

        if (!strcmp(c.word, "hello")) {
            struct ctl r;

            memset(&r, 0, sizeof(r));
            strcpy(r.word, "hello");
            r.info = mine;
            xfer(fd, &r, 1);
            for (q = 0; q < 2; q++) {
                connect_qp(q, &c.info);
            }
        } else if (!strcmp(c.word, "round")) {
            say(fd, "ready", c.round);
            for (q = 0; q < 2; q++) {
                expect_wc(q, 1, IBV_WC_SUCCESS);
                expect_data(q, tag(c.round, q, 0));
                post_recv(q);
                post_send(q, tag(c.round, q, 1));
                expect_wc(q, 0, IBV_WC_SUCCESS);
            }
            say(fd, "ok", c.round);
            printf("parted P: round %u ok\n", c.round);
        } else if (!strcmp(c.word, "x-first")) {
            say(fd, "ready", 0);
            hear(fd, "sent");
            /* M's SEND must not have been taken: ours fails, ours flushes. */
            post_send(0, tag(9, 0, 1));
            expect_pair(0, IBV_WC_RETRY_EXC_ERR, IBV_WC_WR_FLUSH_ERR);
            expect_err_state(0);
            say(fd, "ok", 0);
            printf("parted P: X refused the restored M's SEND\n");
            x_done = 1;
        } else if (!strcmp(c.word, "y-first")) {
            post_send(1, tag(9, 1, 1));
            expect_pair(1, IBV_WC_RETRY_EXC_ERR, IBV_WC_WR_FLUSH_ERR);
            expect_fatal(1);
            expect_err_state(1);
            say(fd, "sent", 0);
            hear(fd, "ok");
            printf("parted P: Y's SEND to the restored M failed, QP fatal\n");
            y_done = 1;
        } else if (!strcmp(c.word, "bye")) {
            say(fd, "bye", 0);
            close(fd);
            errno = 0;
            if (!x_done || !y_done) {
                die("M left before both checks");
            }
            printf("parted P: ok\n");
            return 0;
        } else {
            errno = 0;
            die("unknown step \"%s\"", c.word);
        }
        close(fd);
    }
}

/* ---- M -------------------------------------------------------------------- */

static void round_trip(const char *peer, unsigned r)
{
    int fd = tcp_connect(peer), q;

    say(fd, "round", r);
    hear(fd, "ready");
    for (q = 0; q < 2; q++) {
        post_send(q, tag(r, q, 0));
        expect_pair(q, IBV_WC_SUCCESS, IBV_WC_SUCCESS);
        expect_data(q, tag(r, q, 1));
        post_recv(q);
    }
    hear(fd, "ok");
    close(fd);
    printf("parted M: round %u ok\n", r);
}

static void restored(const char *peer)
{
    int fd;

    /* X: we SEND first, to a peer that heard from our later run. */
    fd = tcp_connect(peer);
    say(fd, "x-first", 0);
    hear(fd, "ready");
    post_send(0, tag(9, 0, 0));
    expect_pair(0, IBV_WC_RETRY_EXC_ERR, IBV_WC_WR_FLUSH_ERR);
    expect_err_state(0);
    expect_fatal(0);
    say(fd, "sent", 0);
    hear(fd, "ok");
    close(fd);
    printf("parted M: X: our SEND failed with RETRY_EXC_ERR, QP fatal\n");
    /* Y: the peer SENDs first, for our later run. */
    fd = tcp_connect(peer);
    say(fd, "y-first", 0);
    hear(fd, "sent");
    expect_wc(1, 1, IBV_WC_WR_FLUSH_ERR);
    expect_err_state(1);
    expect_fatal(1);
    say(fd, "ok", 0);
    close(fd);
    printf("parted M: Y: the peer's SEND ended our QP (fatal, flushed)\n");
    fd = tcp_connect(peer);
    say(fd, "bye", 0);
    hear(fd, "bye");
    close(fd);
}

static int drive(const char *peer)
{
    struct info mine;
    struct ctl c;
    char word[16] = "";
    int fd, q;

    setup(&mine);
    fd = tcp_connect(peer);
    memset(&c, 0, sizeof(c));
    strcpy(c.word, "hello");
    c.info = mine;
    xfer(fd, &c, 1);
    c = hear(fd, "hello");
    close(fd);
    for (q = 0; q < 2; q++) {
        connect_qp(q, &c.info);
    }
    round_trip(peer, 1);
    printf("parted: snapshot now\n");
    fflush(stdout);
    for (;;) {
        FILE *f = fopen(go_file, "r");

        if (f && fscanf(f, "%15s", word) == 1) {
            fclose(f);
            break;
        }
        if (f) {
            fclose(f);
        }
        usleep(100000);
    }
    if (!strcmp(word, "live")) {
        round_trip(peer, 2);
        printf("parted M: live round ok\n");
        fflush(stdout);
        for (;;) {
            pause();            /* this run ends with its QEMU */
        }
    }
    errno = 0;
    if (strcmp(word, "restored")) {
        die("%s says \"%s\", not live or restored", go_file, word);
    }
    restored(peer);
    printf("parted M: ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    int c, server = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    while ((c = getopt(argc, argv, "d:g:p:sf:")) != -1) {
        switch (c) {
        case 'd': dev_name = optarg; break;
        case 'g': gid_index = atoi(optarg); break;
        case 'p': port = atoi(optarg); break;
        case 's': server = 1; break;
        case 'f': go_file = optarg; break;
        default:
            goto usage;
        }
    }
    if (server && optind == argc) {
        return serve();
    }
    if (!server && go_file && optind == argc - 1) {
        return drive(argv[optind]);
    }
usage:
    fprintf(stderr, "usage: parted [-d DEV] [-g GIDX] [-p PORT] -s\n"
                    "       parted [-d DEV] [-g GIDX] [-p PORT] -f FILE SERVER\n");
    return 2;
}
