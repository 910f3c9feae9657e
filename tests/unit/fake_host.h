/*
 * Test helper: a fabric's host (docs/fabric.md, PvrdmaFabricHost) as a
 * test process plays it: watched fds, one timer and a clock, and a poll
 * loop over several hosts, which stand for several QEMU processes in one
 * test process.  The clock is manual (Host.now, moved by the test) unless
 * the host is made with host_new_real() (benchmarks).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef FAKE_HOST_H
#define FAKE_HOST_H

#include <stdbool.h>
#include <stdint.h>

#include <glib.h>

#include "fake_guest.h"
#include "pvrdma_fabric.h"

typedef struct Watch {
    int fd;
    bool write;
    void *tag;
} Watch;

typedef struct Host {
    PvrdmaFabric *fab;
    GArray *watches;
    int64_t now;
    int64_t timer;
    bool real_clock;            /* CLOCK_MONOTONIC instead of @now */
    unsigned reports;
    char last_report[256];
    GPtrArray *said;            /* every report, in order */
    bool frozen;                /* a stopped process: handles nothing */
    bool busy_round;            /* an fd of it was handled this round */
} Host;

/* Reports of @h that contain @needle. */
unsigned host_said(Host *h, const char *needle);
/* A host with its own fabric; its manual clock starts at 1 s. */
Host *host_new(void);
/* The same on the monotonic clock. */
Host *host_new_real(void);
void host_free(Host *h);
/*
 * One round: poll every fd of the hosts (up to @timeout_ms), hand the
 * ready ones to their fabrics, then fire due timers.
 */
void hosts_step(Host **hs, unsigned n, int timeout_ms);
/* @rounds rounds of @a and @b (NULL: @a alone), 1 ms poll each. */
void run(Host *a, Host *b, unsigned rounds);
/*
 * A fake guest whose device is port @index of @h's fabric, its DSR
 * loaded and the test GID 0 bound.
 */
FakeGuest *host_guest(Host *h, int index);

#endif /* FAKE_HOST_H */
