/*
 * PVRDMA software fabric backend (default).
 *
 * For now it accepts every object the core has validated and does nothing
 * on doorbells: the data path (WQE execution, loopback between QPs of this
 * device and, later, between devices) comes with the next issue and will
 * live here behind the same PvrdmaBackendOps.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>

#include "pvrdma_core_int.h"

typedef struct PvrdmaFabric {
    PvrdmaCore *core;
} PvrdmaFabric;

void *pvrdma_fabric_new(PvrdmaCore *core)
{
    PvrdmaFabric *fab = g_new0(PvrdmaFabric, 1);

    fab->core = core;
    return fab;
}

static void pvrdma_fabric_free(void *be)
{
    g_free(be);
}

const PvrdmaBackendOps pvrdma_fabric_backend_ops = {
    .name = "fabric",
    .free = pvrdma_fabric_free,
};
