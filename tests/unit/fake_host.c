/*
 * Test helper: a fabric's host played by a test process (fake_host.h).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE             /* ppoll */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <poll.h>
#include <time.h>

#include <cmocka.h>

#include "fake_host.h"
#include "pvrdma_link.h"

static void h_watch(void *opaque, int fd, bool write, void *tag)
{
    Host *h = opaque;
    Watch w = { fd, write, tag };
    guint i;

    for (i = 0; i < h->watches->len; i++) {
        if (g_array_index(h->watches, Watch, i).fd == fd) {
            g_array_index(h->watches, Watch, i) = w;
            return;
        }
    }
    g_array_append_val(h->watches, w);
}

static void h_unwatch(void *opaque, int fd)
{
    Host *h = opaque;
    guint i;

    for (i = 0; i < h->watches->len; i++) {
        if (g_array_index(h->watches, Watch, i).fd == fd) {
            g_array_remove_index(h->watches, i);
            return;
        }
    }
}

static void h_timer_mod(void *opaque, int64_t at)
{
    ((Host *)opaque)->timer = at;
}

static int64_t h_clock(void *opaque)
{
    Host *h = opaque;
    struct timespec ts;

    if (!h->real_clock) {
        return h->now;
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void h_report(void *opaque, const char *msg)
{
    Host *h = opaque;

    h->reports++;
    g_strlcpy(h->last_report, msg, sizeof(h->last_report));
    g_ptr_array_add(h->said, g_strdup(msg));
}

unsigned host_said(Host *h, const char *needle)
{
    unsigned n = 0;

    for (guint i = 0; i < h->said->len; i++) {
        n += strstr(g_ptr_array_index(h->said, i), needle) != NULL;
    }
    return n;
}

Host *host_new(void)
{
    Host *h = g_new0(Host, 1);
    PvrdmaFabricHost ops = {
        .watch = h_watch, .unwatch = h_unwatch, .timer_mod = h_timer_mod,
        .clock_ns = h_clock, .report = h_report, .opaque = h,
    };

    h->watches = g_array_new(false, false, sizeof(Watch));
    h->said = g_ptr_array_new_with_free_func(g_free);
    h->timer = -1;
    h->now = 1000000000LL;
    h->fab = pvrdma_fabric_new();
    pvrdma_fabric_set_host(h->fab, &ops);
    return h;
}

Host *host_new_real(void)
{
    Host *h = host_new();

    h->real_clock = true;
    return h;
}

void host_free(Host *h)
{
    pvrdma_fabric_unref(h->fab);
    g_assert(h->watches->len == 0);
    g_array_free(h->watches, true);
    g_ptr_array_free(h->said, true);
    g_free(h);
}

/* One round: every ready fd of every host, then due timers. */
/* Watched fds per round, of all hosts (a fabric of 64 processes: 64). */
#define FAKE_HOST_MAX_FDS 512

void hosts_step(Host **hs, unsigned n, int timeout_ms)
{
    struct pollfd pfd[FAKE_HOST_MAX_FDS];
    Host *owner[FAKE_HOST_MAX_FDS];
    void *tag[FAKE_HOST_MAX_FDS];
    int64_t wait_ns = timeout_ms * 1000000LL;
    struct timespec ts;
    unsigned i, k = 0;
    guint j;

    for (i = 0; i < n; i++) {
        if (hs[i]->frozen) {
            continue;
        }
        /* A real clock's timer ends the wait, as in an event loop. */
        if (hs[i]->real_clock && hs[i]->timer >= 0) {
            wait_ns = MIN(wait_ns, MAX(hs[i]->timer - h_clock(hs[i]), 0));
        }
        for (j = 0; j < hs[i]->watches->len && k < FAKE_HOST_MAX_FDS; j++) {
            Watch *w = &g_array_index(hs[i]->watches, Watch, j);

            pfd[k].fd = w->fd;
            pfd[k].events = POLLIN | (w->write ? POLLOUT : 0);
            pfd[k].revents = 0;
            owner[k] = hs[i];
            tag[k++] = w->tag;
        }
    }
    ts.tv_sec = wait_ns / 1000000000LL;
    ts.tv_nsec = wait_ns % 1000000000LL;
    if (k && ppoll(pfd, k, &ts, NULL) > 0) {
        for (i = 0; i < k; i++) {
            short r = pfd[i].revents;
            guint still = 0;

            /* An earlier handler may have closed this fd. */
            for (j = 0; j < owner[i]->watches->len; j++) {
                still |= g_array_index(owner[i]->watches, Watch, j).fd ==
                         pfd[i].fd;
            }
            if (r && still) {
                owner[i]->busy_round = true;
                pvrdma_fabric_fd_ready(owner[i]->fab, tag[i],
                                       r & (POLLIN | POLLHUP | POLLERR),
                                       r & POLLOUT);
            }
        }
    }
    for (i = 0; i < n; i++) {
        /*
         * A host whose fds were quiet this round sleeps until its timer
         * if that is a stream's linger look (the fabric reads its rings
         * again PVRDMA_FABRIC_LINGER_NS on), as a real event loop would:
         * the clock moves on to it.  Other timers wait for the test to
         * move the clock.
         */
        if (!hs[i]->real_clock && !hs[i]->busy_round &&
            hs[i]->timer > hs[i]->now &&
            hs[i]->timer == hs[i]->fab->linger_at) {
            hs[i]->now = hs[i]->timer;
        }
        hs[i]->busy_round = false;
        if (!hs[i]->frozen && hs[i]->timer >= 0 &&
            hs[i]->timer <= h_clock(hs[i])) {
            hs[i]->timer = -1;
            pvrdma_fabric_timer_expired(hs[i]->fab);
        }
    }
}

void run(Host *a, Host *b, unsigned rounds)
{
    Host *hs[2] = { a, b };

    while (rounds--) {
        hosts_step(hs, b ? 2 : 1, 1);
    }
}

FakeGuest *host_guest(Host *h, int index)
{
    FakeGuest *fg = fg_new(NULL);
    PvrdmaFabricPort *port;
    char *msg = NULL;

    port = pvrdma_fabric_port_new(h->fab, fg->core, index, &msg);
    assert_non_null(port);
    pvrdma_core_set_backend(fg->core, &pvrdma_fabric_backend_ops, port);
    fg_setup(fg);
    assert_int_equal(fg_bind_gid(fg, 0), 0);
    return fg;
}
