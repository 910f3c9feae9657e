/*
 * PVRDMA host verbs backend: guest verbs objects on a host RDMA device
 * opened through libibverbs (docs/ibverbs.md).  QEMU-independent.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_PVRDMA_IBVERBS_H
#define HW_PVRDMA_IBVERBS_H

#include <stdbool.h>
#include <stdint.h>

#include "pvrdma_backend.h"

typedef struct PvrdmaIbvConfig {
    const char *ibdev;          /* host device name (ibdev=) */
    uint32_t ibport;            /* its port (ibport=, from 1) */
    int32_t gid_index;          /* gid-index=, or -1: the guest's GIDs */
    /*
     * cm-ports=: RDMA CM ports (colon-separated) the host listens on for
     * the guest, at each guest address the host device owns; "none": no
     * RDMA CM for the guest; NULL: the default list.
     */
    const char *cm_ports;
} PvrdmaIbvConfig;

typedef struct PvrdmaIbv PvrdmaIbv;

/*
 * Open the host device and check that it can serve a guest: the device
 * exists, the port exists and is ACTIVE, the GID index (if given) holds a
 * GID.  On failure returns NULL and a message for the person who started
 * QEMU in *@msg (g_free it), saying what is wrong and how to fix it.
 */
PvrdmaIbv *pvrdma_ibv_open(const PvrdmaIbvConfig *cfg, char **msg);
void pvrdma_ibv_close(PvrdmaIbv *ibv);

/* One line describing the opened port, for QEMU's log. */
char *pvrdma_ibv_describe(PvrdmaIbv *ibv);

/*
 * Make @ibv the backend of @core (which then owns it: the core's free
 * closes it).  -1 with a message in *@msg if the host CQ cannot be made.
 */
int pvrdma_ibv_attach(PvrdmaIbv *ibv, PvrdmaCore *core, char **msg);
/*
 * The file descriptors that become readable when host completions (0),
 * host async events (1) or host RDMA CM events (2) wait, -1 if there is
 * none; the caller then runs pvrdma_ibv_process() (under the core's
 * lock), which takes all.
 */
#define PVRDMA_IBV_NFDS 3
int pvrdma_ibv_fd(PvrdmaIbv *ibv, unsigned i);
void pvrdma_ibv_process(PvrdmaIbv *ibv);

#endif /* HW_PVRDMA_IBVERBS_H */
