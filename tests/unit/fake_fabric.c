/*
 * Fake guests on the software fabric: every FakeGuest joined here shares
 * one PvrdmaFabric, as the pvrdma devices of one QEMU process do.  Linked
 * only into the tests of the fabric (and the fuzz harness).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>

#include "fake_guest.h"
#include "pvrdma_fabric.h"

/* The test process's fabric (a reference held for the whole run). */
static PvrdmaFabric *fg_fabric;

void fg_join_fabric(FakeGuest *fg)
{
    PvrdmaFabricPort *port;
    char *msg = NULL;

    if (!fg_fabric) {
        fg_fabric = pvrdma_fabric_new();
    }
    port = pvrdma_fabric_port_new(fg_fabric, fg->core, -1, &msg);
    g_assert(port);
    pvrdma_core_set_backend(fg->core, &pvrdma_fabric_backend_ops, port);
}
