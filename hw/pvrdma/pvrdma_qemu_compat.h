/*
 * Where QEMU's API differs between the versions the glue builds against:
 * 10.0 (Debian 13's, the base) and the newest QEMU in Debian's archive
 * (scripts/build-qemu.sh with QEMU_SERIES=newest; 10.2 when written).
 * Only the QEMU glue includes this; the core includes no QEMU header.
 * QEMU_VERSION_MAJOR/MINOR come from config-host.h (qemu/osdep.h).
 *
 * Met so far:
 * - 10.1: TypeInfo.class_init takes its data as const void *.
 * - 10.1: exec/memory.h became system/memory.h; the glue reaches it only
 *   through system/dma.h, so nothing here.
 * - by 10.2: the TLS session's read and its transport callbacks.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef HW_PVRDMA_QEMU_COMPAT_H
#define HW_PVRDMA_QEMU_COMPAT_H

#define PVRDMA_QEMU_SINCE(major, minor) \
    (QEMU_VERSION_MAJOR > (major) || \
     (QEMU_VERSION_MAJOR == (major) && QEMU_VERSION_MINOR >= (minor)))

/* The type of class_init's data argument. */
#if PVRDMA_QEMU_SINCE(10, 1)
typedef const void *PvrdmaClassData;
#else
typedef void *PvrdmaClassData;
#endif

/*
 * The TLS session's transport callbacks (crypto/tlssession.h): by 10.2
 * their buffers are void * and a read no longer takes the
 * gracefulTermination flag, returning PREMATURE_TERMINATION instead;
 * told apart by that constant, which came with the change.
 */
#ifdef QCRYPTO_TLS_SESSION_PREMATURE_TERMINATION
typedef const void *PvrdmaTlsOutBuf;
typedef void *PvrdmaTlsInBuf;
#define pvrdma_tls_session_read(sess, buf, len, errp) \
    qcrypto_tls_session_read(sess, buf, len, errp)
#define PVRDMA_TLS_CLOSED(ret) \
    ((ret) == 0 || (ret) == QCRYPTO_TLS_SESSION_PREMATURE_TERMINATION)
#else
typedef const char *PvrdmaTlsOutBuf;
typedef char *PvrdmaTlsInBuf;
/* A peer that closes without TLS's goodbye closes all the same. */
#define pvrdma_tls_session_read(sess, buf, len, errp) \
    qcrypto_tls_session_read(sess, buf, len, true, errp)
#define PVRDMA_TLS_CLOSED(ret) ((ret) == 0)
#endif

#endif
