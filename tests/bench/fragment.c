/*
 * Fragment a guest's free memory, to measure the device as a guest that
 * has run a while sees it (docs/benchmarks.md, "Large transfers"): takes
 * PERCENT (default 50) of MemAvailable, touches every page, gives back
 * every other page and holds the rest until killed, so that the guest's
 * free lists are single pages and the next buffers (perftest's) come out
 * scattered page by page.  Build it static on the host and copy it in:
 *
 *   gcc -O2 -static -o fragment tests/bench/fragment.c
 *   scripts/vm.sh -a fragment -a run.sh -- sh ./run.sh
 *
 * with run.sh starting `./fragment 50 &` before its perftest rounds.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096ul

int main(int argc, char **argv)
{
    long pct = argc > 1 ? atol(argv[1]) : 50, kb = -1;
    char line[256];
    FILE *f = fopen("/proc/meminfo", "r");
    size_t len, o;
    char *p;

    while (f && fgets(line, sizeof(line), f) &&
           sscanf(line, "MemAvailable: %ld kB", &kb) != 1) {
    }
    if (kb <= 0 || pct <= 0 || pct > 90) {
        fprintf(stderr, "fragment: PERCENT is 1-90 of MemAvailable "
                "(read %ld kB)\n", kb);
        return 2;
    }
    len = (size_t)kb * 1024 / 100 * pct & ~(PAGE - 1);
    p = mmap(NULL, len, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("fragment: mmap");
        return 1;
    }
    madvise(p, len, MADV_NOHUGEPAGE);     /* single pages, not 2 MiB */
    for (o = 0; o < len; o += PAGE) {
        p[o] = 1;
    }
    for (o = 0; o < len; o += 2 * PAGE) {
        madvise(p + o, PAGE, MADV_DONTNEED);
    }
    printf("fragment: %zu MiB touched, every other page given back\n",
           len >> 20);
    fflush(stdout);
    pause();
    return 0;
}
