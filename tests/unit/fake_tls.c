/*
 * Test helper: the fabric's TLS host callbacks made with GnuTLS and a
 * pre-shared key (fake_tls.h).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <gnutls/gnutls.h>

#include "fake_tls.h"
#include "pvrdma_link.h"

#define FT_USER     "qemu"
#define FT_PRIORITY "NORMAL:-CHACHA20-POLY1305:+ECDHE-PSK:+DHE-PSK:+PSK"

typedef struct FtSession {
    gnutls_session_t s;
    int fd;
    size_t rpos, rlen;
    uint8_t rbuf[64 << 10];     /* read ahead, as the QEMU glue does */
    gnutls_psk_client_credentials_t cc;
    gnutls_psk_server_credentials_t sc;
} FtSession;

/* Host opaque -> key: one test process plays several hosts. */
static GHashTable *ft_keys;

static int ft_server_key(gnutls_session_t s, const char *user,
                         gnutls_datum_t *key)
{
    const char *hex = gnutls_session_get_ptr(s);
    gnutls_datum_t in = { (unsigned char *)hex, strlen(hex) };
    size_t len = in.size / 2;

    if (strcmp(user, FT_USER)) {
        return -1;
    }
    key->data = gnutls_malloc(len);
    key->size = len;
    if (gnutls_hex_decode(&in, key->data, &len) < 0) {
        gnutls_free(key->data);
        return -1;
    }
    return 0;
}

static ssize_t ft_pull(gnutls_transport_ptr_t p, void *buf, size_t len)
{
    FtSession *t = p;
    ssize_t n;

    if (t->rpos == t->rlen) {
        n = recv(t->fd, t->rbuf, sizeof(t->rbuf), MSG_DONTWAIT);
        if (n <= 0) {
            if (n < 0) {
                gnutls_transport_set_errno(t->s, errno);
            }
            return n;
        }
        t->rpos = 0;
        t->rlen = n;
    }
    n = MIN(len, t->rlen - t->rpos);
    memcpy(buf, t->rbuf + t->rpos, n);
    t->rpos += n;
    return n;
}

static ssize_t ft_push(gnutls_transport_ptr_t p, const void *buf, size_t len)
{
    FtSession *t = p;
    ssize_t n = send(t->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);

    if (n < 0) {
        gnutls_transport_set_errno(t->s, errno);
    }
    return n;
}

static void ft_free(void *sess)
{
    FtSession *t = sess;

    gnutls_deinit(t->s);
    if (t->cc) {
        gnutls_psk_free_client_credentials(t->cc);
    }
    if (t->sc) {
        gnutls_psk_free_server_credentials(t->sc);
    }
    g_free(t);
}

static void *ft_new(void *opaque, int fd, bool server, const char *host,
                    char **errmsg)
{
    const char *hex = g_hash_table_lookup(ft_keys, opaque);
    gnutls_datum_t key = { (unsigned char *)hex, strlen(hex) };
    FtSession *t = g_new0(FtSession, 1);
    int ret;

    (void)host;
    gnutls_init(&t->s, (server ? GNUTLS_SERVER : GNUTLS_CLIENT) |
                GNUTLS_NONBLOCK | GNUTLS_NO_SIGNAL);
    gnutls_priority_set_direct(t->s, FT_PRIORITY, NULL);
    if (server) {
        gnutls_psk_allocate_server_credentials(&t->sc);
        gnutls_psk_set_server_credentials_function(t->sc, ft_server_key);
        gnutls_session_set_ptr(t->s, (void *)hex);
        ret = gnutls_credentials_set(t->s, GNUTLS_CRD_PSK, t->sc);
    } else {
        gnutls_psk_allocate_client_credentials(&t->cc);
        gnutls_psk_set_client_credentials(t->cc, FT_USER, &key,
                                          GNUTLS_PSK_KEY_HEX);
        ret = gnutls_credentials_set(t->s, GNUTLS_CRD_PSK, t->cc);
    }
    if (ret < 0) {
        *errmsg = g_strdup(gnutls_strerror(ret));
        ft_free(t);
        return NULL;
    }
    t->fd = fd;
    gnutls_transport_set_ptr(t->s, t);
    gnutls_transport_set_pull_function(t->s, ft_pull);
    gnutls_transport_set_push_function(t->s, ft_push);
    return t;
}

static int ft_handshake(void *sess, bool *write, char **errmsg)
{
    FtSession *t = sess;
    int ret = gnutls_handshake(t->s);

    if (ret == 0) {
        return 1;
    }
    if (ret == GNUTLS_E_AGAIN || ret == GNUTLS_E_INTERRUPTED) {
        *write = gnutls_record_get_direction(t->s);
        return 0;
    }
    *errmsg = g_strdup_printf("TLS handshake failed: %s",
                              gnutls_strerror(ret));
    return -1;
}

static ssize_t ft_io_result(ssize_t ret, const char *what, char **errmsg)
{
    if (ret >= 0) {
        return ret;
    }
    if (ret == GNUTLS_E_AGAIN || ret == GNUTLS_E_INTERRUPTED) {
        errno = EAGAIN;
        return -1;
    }
    if (ret == GNUTLS_E_PREMATURE_TERMINATION) {
        return 0;
    }
    *errmsg = g_strdup_printf("cannot %s TLS: %s", what,
                              gnutls_strerror(ret));
    return -1;
}

static ssize_t ft_recv(void *sess, void *buf, size_t len, char **errmsg)
{
    return ft_io_result(gnutls_record_recv(((FtSession *)sess)->s, buf, len),
                        "read", errmsg);
}

static ssize_t ft_send(void *sess, const void *buf, size_t len,
                       char **errmsg)
{
    return ft_io_result(gnutls_record_send(((FtSession *)sess)->s, buf, len),
                        "write", errmsg);
}

void host_use_tls(Host *h, const char *psk_hex)
{
    PvrdmaFabricHost host = *pvrdma_fabric_host(h->fab);

    if (!ft_keys) {
        ft_keys = g_hash_table_new(NULL, NULL);
    }
    g_hash_table_insert(ft_keys, host.opaque, (void *)psk_hex);
    host.tls_new = ft_new;
    host.tls_handshake = ft_handshake;
    host.tls_recv = ft_recv;
    host.tls_send = ft_send;
    host.tls_free = ft_free;
    pvrdma_fabric_set_host(h->fab, &host);
}
