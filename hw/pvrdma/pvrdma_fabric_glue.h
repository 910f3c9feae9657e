/*
 * QEMU glue: fabrics across processes and hosts (pvrdma_fabric_glue.c).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_PVRDMA_FABRIC_GLUE_H
#define HW_PVRDMA_FABRIC_GLUE_H

typedef struct PvrdmaFabric PvrdmaFabric;
typedef struct IOThread IOThread;

/* The fabric-* properties of a device (NULL: not given). */
typedef struct PvrdmaFabricProps {
    const char *path;
    const char *listen;
    const char *peer;
    const char *allow_uid;
    const char *allow_gid;
    const char *tls_creds;      /* an -object tls-creds-psk or -x509 */
    const char *tls_authz;      /* an -object authz-* (x509 peers) */
} PvrdmaFabricProps;

/*
 * The fabric of this process named by the fabric-* properties (made and
 * connected the first time), or NULL with @errp set.  Its links and timer
 * run in @iothread or, if NULL, in the main loop; the device that makes
 * the fabric chooses, and the fabric holds that IOThread until it goes.
 */
PvrdmaFabric *pvrdma_fabric_glue_get(const PvrdmaFabricProps *p,
                                     IOThread *iothread, Error **errp);

/*
 * Drop every fabric of this process that no device uses any more (its
 * links to other processes, sockets and rings; a device that names it
 * again makes it anew).  Under pvrdma_lock, after a device left.
 */
void pvrdma_fabric_glue_release(void);

/*
 * The lock of every pvrdma core, fabric and backend of the process
 * (pvrdma.c): held by whatever calls into them.
 */
void pvrdma_lock(void);
void pvrdma_unlock(void);

#endif /* HW_PVRDMA_FABRIC_GLUE_H */
