/*
 * The host's limit for the shared-memory link's data path: two threads
 * (as the two QEMU processes of a fabric) move messages of SIZE bytes
 * from a buffer of the first into a buffer of the second through a ring
 * of RING bytes, in steps of STEP bytes, each side publishing how far it
 * got (the producer after each step, the consumer after each step it
 * copied out).  Two copies of every byte, on two cores at once: the
 * limit of the fabric's default data path between two VMs, which
 * `make bench` prints beside them.  Prints MB/s (10^6 B/s), the median
 * of 5 rounds of about 4 GiB each, as a line of results.txt, and one
 * thread's memcpy of SIZE measured alternately with it:
 *
 *   pipe_bw SIZE RING STEP
 *   R host pipe pipe SIZE 1 VALUE MB/s
 *   # ring RING step STEP: memcpy VALUE MB/s, ratio R
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS  5
#define VOLUME  (4ull << 30)

static size_t size, ring_sz, step;
static uint8_t *ring, *src, *dst;
static uint64_t msgs;
static _Alignas(64) uint64_t head;     /* bytes ever produced */
static _Alignas(64) uint64_t tail;     /* bytes ever consumed */

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Copy n bytes between a linear buffer and the ring at pos. */
static void ring_io(uint8_t *buf, uint64_t pos, size_t n, int put)
{
    size_t at = pos % ring_sz, first = n < ring_sz - at ? n : ring_sz - at;

    if (put) {
        memcpy(ring + at, buf, first);
        memcpy(ring, buf + first, n - first);
    } else {
        memcpy(buf, ring + at, first);
        memcpy(buf + first, ring, n - first);
    }
}

static void *consumer(void *arg)
{
    uint64_t pos = 0, end = msgs * size;

    (void)arg;
    while (pos < end) {
        uint64_t h = __atomic_load_n(&head, __ATOMIC_ACQUIRE);

        while (pos < h) {
            size_t off = pos % size, n = h - pos;

            n = n < size - off ? n : size - off;
            n = n < step ? n : step;
            ring_io(dst + off, pos, n, 0);
            pos += n;
            __atomic_store_n(&tail, pos, __ATOMIC_RELEASE);
        }
    }
    return NULL;
}

static double pipe_round(void)
{
    uint64_t pos = 0, end = msgs * size;
    pthread_t t;
    double t0;

    head = tail = 0;
    t0 = now();
    pthread_create(&t, NULL, consumer, NULL);
    while (pos < end) {
        size_t off = pos % size, n = size - off;

        n = n < step ? n : step;
        while (pos + n - __atomic_load_n(&tail, __ATOMIC_ACQUIRE) > ring_sz) {
            /* wait for room */
        }
        ring_io(src + off, pos, n, 1);
        pos += n;
        __atomic_store_n(&head, pos, __ATOMIC_RELEASE);
    }
    pthread_join(t, NULL);
    if (memcmp(src, dst, size)) {
        fprintf(stderr, "pipe_bw: data differs\n");
        exit(1);
    }
    return end / (now() - t0) / 1e6;
}

static double memcpy_round(void)
{
    double t0 = now();

    for (uint64_t i = 0; i < msgs; i++) {
        memcpy(dst, src, size);
        __asm__ volatile("" ::: "memory");
    }
    return msgs * size / (now() - t0) / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    double p[ROUNDS], m[ROUNDS];

    if (argc != 4) {
        fprintf(stderr, "usage: pipe_bw SIZE RING STEP\n");
        return 2;
    }
    size = strtoull(argv[1], NULL, 0);
    ring_sz = strtoull(argv[2], NULL, 0);
    step = strtoull(argv[3], NULL, 0);
    if (!size || !step || step > ring_sz) {
        fprintf(stderr, "pipe_bw: want SIZE > 0 and 0 < STEP <= RING\n");
        return 2;
    }
    msgs = VOLUME / size ? VOLUME / size : 1;
    ring = aligned_alloc(4096, ring_sz);
    src = aligned_alloc(4096, size);
    dst = aligned_alloc(4096, size);
    memset(ring, 0, ring_sz);
    for (size_t i = 0; i < size; i++) {
        src[i] = i * 7 + 1;
    }
    memset(dst, 0, size);
    for (int r = 0; r < ROUNDS; r++) {
        p[r] = pipe_round();
        m[r] = memcpy_round();
    }
    qsort(p, ROUNDS, sizeof(p[0]), cmp);
    qsort(m, ROUNDS, sizeof(m[0]), cmp);
    printf("R host pipe pipe %zu 1 %.0f MB/s\n", size, p[ROUNDS / 2]);
    printf("# ring %zu step %zu: memcpy %.0f MB/s, ratio %.2f\n", ring_sz,
           step, m[ROUNDS / 2], p[ROUNDS / 2] / m[ROUNDS / 2]);
    return 0;
}
