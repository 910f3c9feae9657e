/*
 * The host's single-core memcpy, the limit `make bench` compares every
 * bandwidth with: for each size given, MB/s (10^6 B/s) copying between
 * two buffers of that size (touched first), median of 7 rounds of about
 * 64 MiB each.  Prints the lines of tests/bench/guest-bench.sh:
 *
 *   R host memcpy memcpy SIZE 1 VALUE MB/s
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS  7

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

int main(int argc, char **argv)
{
    int i;

    for (i = 1; i < argc; i++) {
        size_t len = strtoull(argv[i], NULL, 0), n, k;
        char *src = malloc(len), *dst = malloc(len);
        double mbs[ROUNDS];
        int r;

        if (!len || !src || !dst) {
            fprintf(stderr, "memcpy_bw: bad size %s\n", argv[i]);
            return 2;
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
            return 1;
        }
        qsort(mbs, ROUNDS, sizeof(mbs[0]), cmp);
        printf("R host memcpy memcpy %zu 1 %.1f MB/s\n", len, mbs[ROUNDS / 2]);
        free(src);
        free(dst);
    }
    return 0;
}
