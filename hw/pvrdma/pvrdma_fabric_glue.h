/*
 * QEMU glue: fabrics across processes and hosts (pvrdma_fabric_glue.c).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_PVRDMA_FABRIC_GLUE_H
#define HW_PVRDMA_FABRIC_GLUE_H

typedef struct PvrdmaFabric PvrdmaFabric;

/*
 * The fabric of this process named by the fabric-* properties (made and
 * connected the first time), or NULL with @errp set.
 */
PvrdmaFabric *pvrdma_fabric_glue_get(const char *path, const char *listen,
                                     const char *peer, Error **errp);

#endif /* HW_PVRDMA_FABRIC_GLUE_H */
