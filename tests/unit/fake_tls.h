/*
 * Test helper: TLS for a test host's fabric (PvrdmaFabricHost.tls_*),
 * made with GnuTLS and a pre-shared key, as the QEMU glue makes it with
 * a tls-creds-psk object.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef FAKE_TLS_H
#define FAKE_TLS_H

#include "fake_host.h"

/*
 * Give @h's fabric TLS with the key @psk_hex (hex digits, as in QEMU's
 * keys.psk) under the identity "qemu".  The string must outlive @h.
 */
void host_use_tls(Host *h, const char *psk_hex);

#endif /* FAKE_TLS_H */
