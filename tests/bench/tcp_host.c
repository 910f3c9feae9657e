/*
 * Plain TCP between two host processes, the yardstick of the fabric's TCP
 * links: `make bench` runs it over the veth pair of its 2tcp setup, the
 * same path the two QEMUs' link takes (docs/benchmarks.md).
 *
 *   tcp_host serve ADDR PORT
 *       accepts connections until killed; each starts with one byte:
 *       's' a stream (read until the peer shuts down its side, then
 *       answer the byte count as 8 bytes), 'p' a ping-pong (echo every
 *       2-byte message until EOF), 'P' the same spinning on the socket
 *       instead of sleeping in read()
 *   tcp_host stream ADDR PORT SIZE BYTES
 *       sends BYTES in writes of SIZE, waits for the server's count and
 *       prints MB/s (10^6 B/s) from the first write to the answer
 *   tcp_host rtt ADDR PORT ITERS [spin]
 *       TCP_NODELAY ping-pong of 2 bytes; prints the median round trip
 *       in usec of ITERS: both sides block in read, as an event loop
 *       sleeping in poll does, or with `spin` both poll the socket
 *       without sleeping, as a polling RDMA application does its CQ
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int spin;                /* reads poll the socket, never sleep */

static void full(int fd, void *buf, size_t n, int out)
{
    uint8_t *p = buf;

    while (n) {
        ssize_t r = out ? write(fd, p, n) :
                    recv(fd, p, n, spin ? MSG_DONTWAIT : 0);

        if (r < 0 && !out && spin && errno == EAGAIN) {
            continue;
        }
        if (r <= 0) {
            fprintf(stderr, "tcp_host: %s: %s\n", out ? "write" : "read",
                    r ? strerror(errno) : "the peer closed the connection");
            exit(1);
        }
        p += r;
        n -= r;
    }
}

static struct sockaddr_in addr_of(const char *host, const char *port)
{
    struct sockaddr_in a = { .sin_family = AF_INET };

    a.sin_port = htons(atoi(port));
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
        fprintf(stderr, "tcp_host: not an IPv4 address: %s\n", host);
        exit(2);
    }
    return a;
}

static void serve_one(int fd)
{
    static uint8_t buf[1 << 20];
    uint64_t total = 0;
    uint8_t mode;
    ssize_t r;

    full(fd, &mode, 1, 0);
    if (mode == 's') {
        while ((r = read(fd, buf, sizeof(buf))) > 0) {
            total += r;
        }
        full(fd, &total, sizeof(total), 1);
    } else if (mode == 'p' || mode == 'P') {
        spin = mode == 'P';
        for (;;) {
            r = recv(fd, buf, 2, spin ? MSG_DONTWAIT : 0);
            if (r < 0 && spin && errno == EAGAIN) {
                continue;
            }
            if (r <= 0) {
                break;
            }
            if (r == 1) {
                full(fd, buf + 1, 1, 0);
            }
            full(fd, buf, 2, 1);
        }
    }
    close(fd);
}

static int serve(const char *host, const char *port)
{
    struct sockaddr_in a = addr_of(host, port);
    int one = 1, s = socket(AF_INET, SOCK_STREAM, 0);

    signal(SIGCHLD, SIG_IGN);
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 8)) {
        die("tcp_host: bind");
    }
    for (;;) {
        int fd = accept(s, NULL, NULL);

        if (fd < 0) {
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (fork() == 0) {
            close(s);
            serve_one(fd);
            _exit(0);
        }
        close(fd);
    }
}

static int dial(const char *host, const char *port, uint8_t mode)
{
    struct sockaddr_in a = addr_of(host, port);
    int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);

    for (int i = 0; connect(fd, (struct sockaddr *)&a, sizeof(a)); i++) {
        if (i == 50) {
            die("tcp_host: connect");
        }
        usleep(100000);         /* the server may still be starting */
        close(fd);
        fd = socket(AF_INET, SOCK_STREAM, 0);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    full(fd, &mode, 1, 1);
    return fd;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "serve")) {
        return serve(argv[2], argv[3]);
    }
    if (argc == 6 && !strcmp(argv[1], "stream")) {
        size_t size = strtoull(argv[4], NULL, 0);
        uint64_t bytes = strtoull(argv[5], NULL, 0), sent = 0, got = 0;
        uint8_t *buf = malloc(size);
        int fd = dial(argv[2], argv[3], 's');
        double t0 = now();

        if (!buf || !size) {
            return 2;
        }
        memset(buf, 0x5a, size);
        while (sent < bytes) {
            size_t n = bytes - sent < size ? bytes - sent : size;

            full(fd, buf, n, 1);
            sent += n;
        }
        shutdown(fd, SHUT_WR);
        full(fd, &got, sizeof(got), 0);
        if (got != sent) {
            fprintf(stderr, "tcp_host: sent %llu bytes, %llu arrived\n",
                    (unsigned long long)sent, (unsigned long long)got);
            return 1;
        }
        printf("%.1f\n", sent / (now() - t0) / 1e6);
        return 0;
    }
    if ((argc == 5 || (argc == 6 && !strcmp(argv[5], "spin"))) &&
        !strcmp(argv[1], "rtt")) {
        int iters = atoi(argv[4]);
        int fd = dial(argv[2], argv[3], argc == 6 ? 'P' : 'p');
        double *t = calloc(iters > 0 ? iters : 1, sizeof(*t));
        uint8_t msg[2] = { 1, 2 }, back[2];

        for (int i = 0; i < iters; i++) {
            double t0 = now();

            spin = argc == 6;
            full(fd, msg, 2, 1);
            full(fd, back, 2, 0);
            t[i] = (now() - t0) * 1e6;
        }
        qsort(t, iters, sizeof(*t), cmp);
        printf("%.2f\n", iters > 0 ? t[iters / 2] : 0.0);
        return 0;
    }
    fprintf(stderr, "usage: tcp_host serve ADDR PORT | stream ADDR PORT "
            "SIZE BYTES | rtt ADDR PORT ITERS [spin]\n");
    return 2;
}
