/*
 * The host's single-core memcpy, the limit `make bench` compares every
 * bandwidth with: for each size given, MB/s (10^6 B/s) copying between
 * two buffers of that size (touched first), median of 7 rounds of about
 * 64 MiB each.  Prints the lines of tests/bench/guest-bench.sh:
 *
 *   R host memcpy memcpy SIZE 1 VALUE MB/s
 *
 *   memcpy_bw --serve PORTFILE
 *
 * measures on request, so that a guest can have the host's memcpy taken
 * right beside each of its own runs (while the guest waits): listens on
 * 127.0.0.1 (a port of the kernel's choosing, written to PORTFILE), reads
 * one line "SIZE" per connection and answers "VALUE\n" (MB/s), or
 * "error\n" for a size that is not 1 byte to 64 MiB.  It runs until
 * killed.
 *
 *   memcpy_bw --pages SIZE...
 *
 * copies each SIZE (a multiple of 4 KiB) page by page instead, between
 * pages spread over 1 GiB (no two on one page, none adjacent): the limit
 * for a guest buffer whose pages lie scattered over guest RAM, as in a
 * guest that has run a while (docs/benchmarks.md, "Large transfers").
 * Prints "R host memcpy memcpy_pages SIZE 1 VALUE MB/s".
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define ROUNDS  7
#define MAX_LEN (64u << 20)
#define PAGE    4096u
#define SPREAD  (1ul << 30)

static double now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* MB/s of memcpy of LEN bytes, median of ROUNDS; < 0 when out of memory */
static double measure(size_t len)
{
    char *src = malloc(len), *dst = malloc(len);
    double mbs[ROUNDS];
    size_t n, k;
    int r;

    if (!src || !dst) {
        free(src);
        free(dst);
        return -1;
    }
    memset(src, 1, len);
    memset(dst, 2, len);
    n = (64u << 20) / len;
    n = n < 4 ? 4 : n;
    for (r = 0; r < ROUNDS; r++) {
        double t0 = now_ns();

        for (k = 0; k < n; k++) {
            src[k % len] = (char)k;         /* not optimised away */
            memcpy(dst, src, len);
        }
        mbs[r] = (double)len * n / (now_ns() - t0) * 1e3;
    }
    if (dst[0] != src[0]) {
        abort();
    }
    free(src);
    free(dst);
    qsort(mbs, ROUNDS, sizeof(mbs[0]), cmp);
    return mbs[ROUNDS / 2];
}

/*
 * MB/s of memcpy of LEN bytes in pages from and to pages spread over
 * SPREAD bytes: page i of either side is page (i * 40503) mod the
 * spread's pages (an odd stride, so all distinct), the destination's
 * after the source's.  Median of ROUNDS; < 0 when out of memory.
 */
static double measure_pages(size_t len)
{
    size_t np = len / PAGE, all = SPREAD / PAGE, i, k, n;
    char *m = malloc(SPREAD), **src, **dst;
    double mbs[ROUNDS];
    int r;

    src = calloc(np, sizeof(*src));
    dst = calloc(np, sizeof(*dst));
    if (!m || !src || !dst || 2 * np > all) {
        free(m);
        free(src);
        free(dst);
        return -1;
    }
    memset(m, 1, SPREAD);
    for (i = 0; i < np; i++) {
        src[i] = m + (i * 40503 % all) * PAGE;
        dst[i] = m + ((i + np) * 40503 % all) * PAGE;
    }
    n = (64u << 20) / len;
    n = n < 4 ? 4 : n;
    for (r = 0; r < ROUNDS; r++) {
        double t0 = now_ns();

        for (k = 0; k < n; k++) {
            src[k % np][k % PAGE] = (char)k;
            for (i = 0; i < np; i++) {
                memcpy(dst[i], src[i], PAGE);
            }
        }
        mbs[r] = (double)len * n / (now_ns() - t0) * 1e3;
    }
    if (dst[0][0] != src[0][0]) {
        abort();
    }
    free(m);
    free(src);
    free(dst);
    qsort(mbs, ROUNDS, sizeof(mbs[0]), cmp);
    return mbs[ROUNDS / 2];
}

static int serve(const char *portfile)
{
    struct sockaddr_in a = { .sin_family = AF_INET };
    socklen_t alen = sizeof(a);
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    FILE *f;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        bind(s, (struct sockaddr *)&a, sizeof(a)) || listen(s, 4) ||
        getsockname(s, (struct sockaddr *)&a, &alen)) {
        perror("memcpy_bw: cannot listen on 127.0.0.1");
        return 1;
    }
    f = fopen(portfile, "w");
    if (!f || fprintf(f, "%d\n", ntohs(a.sin_port)) < 0 || fclose(f)) {
        perror(portfile);
        return 1;
    }
    for (;;) {
        char line[32], reply[32];
        int c = accept(s, NULL, NULL);
        ssize_t got = 0, r;
        char *end;
        unsigned long long len;
        double v;

        if (c < 0) {
            continue;
        }
        /* one line of at most 31 bytes */
        while (got < (ssize_t)sizeof(line) - 1 &&
               (r = read(c, line + got, sizeof(line) - 1 - got)) > 0) {
            got += r;
            if (memchr(line, '\n', got)) {
                break;
            }
        }
        line[got > 0 ? got : 0] = 0;
        len = strtoull(line, &end, 10);
        v = -1;
        if (end != line && (*end == '\n' || !*end) && len && len <= MAX_LEN) {
            v = measure(len);
        }
        if (v < 0) {
            snprintf(reply, sizeof(reply), "error\n");
        } else {
            snprintf(reply, sizeof(reply), "%.1f\n", v);
        }
        if (write(c, reply, strlen(reply)) < 0) {
            perror("memcpy_bw: reply");
        }
        close(c);
    }
}

int main(int argc, char **argv)
{
    int i = 1, pages = 0;

    if (argc == 3 && !strcmp(argv[1], "--serve")) {
        return serve(argv[2]);
    }
    if (argc > 1 && !strcmp(argv[1], "--pages")) {
        pages = 1;
        i++;
    }
    for (; i < argc; i++) {
        size_t len = strtoull(argv[i], NULL, 0);
        double v = -1;

        if (len && len <= MAX_LEN && !(pages && len % PAGE)) {
            v = pages ? measure_pages(len) : measure(len);
        }
        if (v < 0) {
            fprintf(stderr, "memcpy_bw: bad size %s (1 byte to 64 MiB%s)\n",
                    argv[i], pages ? ", a multiple of 4 KiB" : "");
            return 2;
        }
        printf("R host memcpy %s %zu 1 %.1f MB/s\n",
               pages ? "memcpy_pages" : "memcpy", len, v);
    }
    return 0;
}
