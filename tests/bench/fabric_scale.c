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
 *   - fds: descriptors open per process once joined (the largest);
 *   - ring KiB: host memory a process's outgoing rings hold once joined
 *     (shm links, `ring-bytes` of the device's stats; the largest) and
 *     per link;
 *
 *   fabric_scale N...
 *   R scale fabric join N 1 VALUE ms
 *   R scale fabric fds N 1 VALUE fds
 *   R scale fabric ring_link N 1 VALUE KiB
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <glib.h>
#include <glib/gstdio.h>

#include "fake_guest.h"
#include "fake_host.h"
#include "pvrdma_fabric.h"

#define JOIN_LIMIT_NS   (10 * 1000000000LL)

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
static void member(unsigned i, unsigned n, const char *dir, int64_t t0,
                   int out, int report, int stop)
{
    Host *h = host_new_real();
    FakeGuest *fg = host_guest(h, 1);
    PvrdmaLinkStats *st = g_new0(PvrdmaLinkStats, n);
    char *err = NULL, line[160];
    uint64_t ring = 0;
    int64_t joined = -1;
    unsigned links, k, fds;

    struct pvrdma_cmd_create_bind c = { .hdr.cmd = PVRDMA_CMD_CREATE_BIND };

    /* A GID of its own at index 1 (every fake guest has test GID 0). */
    c.mtu = 1024;
    c.vlan = 0xfff;
    c.index = 1;
    fg_test_gid(1, c.new_gid);
    c.new_gid[13] = i >> 8;
    c.new_gid[14] = i;
    c.gid_type = PVRDMA_GID_TYPE_FLAG_ROCE_V2;
    if (fg_cmd(fg, &c, sizeof(c), NULL)) {
        fprintf(stderr, "fabric_scale: process %u: bind failed\n", i);
        _exit(1);
    }
    if (!pvrdma_fabric_join_dir(h->fab, dir, &err)) {
        fprintf(stderr, "fabric_scale: process %u: %s\n", i, err);
        _exit(1);
    }
    unsigned seen = 0;

    while (!stopped(report)) {
        hosts_step(&h, 1, 1);
        if (getenv("SCALE_DEBUG") && h->reports != seen) {
            seen = h->reports;
            fprintf(stderr, "%.3f %u: %s\n", (now_ns() - t0) / 1e6, i,
                    h->last_report);
        }
        if (joined < 0 && pvrdma_fabric_links_up(h->fab) == n - 1) {
            joined = now_ns() - t0;
            snprintf(line, sizeof(line), "joined %u %lld\n", i,
                     (long long)joined);
            if (write(out, line, strlen(line)) < 0) {
                _exit(1);
            }
        }
        if (joined < 0 && now_ns() - t0 > JOIN_LIMIT_NS) {
            fprintf(stderr, "fabric_scale: process %u: %u of %u links "
                    "after 10 s (%u reports, the last: %s)\n", i,
                    pvrdma_fabric_links_up(h->fab), n - 1, h->reports,
                    h->last_report);
            _exit(1);
        }
    }
    links = pvrdma_fabric_link_stats(h->fab, st, n);
    for (k = 0; k < MIN(links, n); k++) {
        ring += st[k].ring_bytes;
    }
    fds = count_fds();
    snprintf(line, sizeof(line), "held %u %u %u %llu\n", i, links, fds,
             (unsigned long long)ring);
    if (write(out, line, strlen(line)) < 0) {
        _exit(1);
    }
    /* Serve the others until all have reported too. */
    while (!stopped(stop)) {
        hosts_step(&h, 1, 1);
    }
    _exit(0);
}

static bool run_n(unsigned n)
{
    char *dir = g_dir_make_tmp("pvrdma-scale-XXXXXX", NULL);
    int res[2], report[2], stop[2];
    int64_t t0, join_max = 0;
    unsigned joined = 0, held = 0, fds_max = 0, i;
    uint64_t ring_max = 0, links_min = n;
    pid_t *pids = g_new0(pid_t, n);
    GString *buf = g_string_new(NULL);
    bool ok = true;

    if (!dir || pipe(res) || pipe(report) || pipe(stop)) {
        perror("fabric_scale");
        return false;
    }
    t0 = now_ns();
    for (i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            close(res[0]);
            close(report[1]);
            close(stop[1]);
            member(i, n, dir, t0, res[1], report[0], stop[0]);
        }
    }
    close(res[1]);
    close(report[0]);
    close(stop[0]);
    /* Lines "joined I NS" from every process, then "held ...". */
    while (held < n) {
        char chunk[4096], *nl;
        ssize_t r = read(res[0], chunk, sizeof(chunk));

        if (r <= 0) {
            fprintf(stderr, "fabric_scale: N=%u: %u joined, %u reported, "
                    "then the processes went\n", n, joined, held);
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
                    close(report[1]);
                }
            } else if (sscanf(buf->str, "held %u %u %u %llu", &a, &b, &c,
                              &rb) == 4) {
                held++;
                links_min = MIN(links_min, b);
                fds_max = MAX(fds_max, c);
                ring_max = MAX(ring_max, rb);
            }
            g_string_erase(buf, 0, nl + 1 - buf->str);
        }
    }
    close(res[0]);
    if (joined < n) {
        close(report[1]);
    }
    close(stop[1]);
    for (i = 0; i < n; i++) {
        int status;

        if (held < n) {
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
               n > 1 ? ring_max / 1024.0 / (n - 1) : 0.0);
        printf("# N=%u: every process linked to the %u others in %.1f ms;"
               " at most %u fds and %.0f KiB of rings per process\n", n,
               (unsigned)links_min, join_max / 1e6, fds_max,
               ring_max / 1024.0);
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

    if (argc < 2) {
        fprintf(stderr, "usage: fabric_scale N...\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (i = 1; i < argc; i++) {
        unsigned n = strtoul(argv[i], NULL, 0);

        if (n < 2 || n > 256 || !run_n(n)) {
            fprintf(stderr, "fabric_scale: N=%s failed\n", argv[i]);
            return 1;
        }
    }
    return 0;
}
