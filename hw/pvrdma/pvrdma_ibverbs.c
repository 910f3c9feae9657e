/*
 * PVRDMA host verbs backend (docs/ibverbs.md): opening and checking the
 * host device.  Every failure names the problem and its fix, since the
 * person reading it started QEMU, possibly on a host they did not set up.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <glib.h>
#include <infiniband/verbs.h>

#include "pvrdma_ibverbs.h"

struct PvrdmaIbv {
    char *name;
    uint32_t port;
    int32_t gid_index;
    struct ibv_context *ctx;
    struct ibv_device_attr dev_attr;
    struct ibv_port_attr port_attr;
};

static const char *pvrdma_ibv_port_state(enum ibv_port_state s)
{
    switch (s) {
    case IBV_PORT_DOWN:
        return "DOWN";
    case IBV_PORT_INIT:
        return "INIT";
    case IBV_PORT_ARMED:
        return "ARMED";
    case IBV_PORT_ACTIVE:
        return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER:
        return "ACTIVE_DEFER";
    default:
        return "NOP";
    }
}

/* The netdev of a RoCE port (sysfs), for messages; NULL if unknown. */
static char *pvrdma_ibv_netdev(const char *dev, uint32_t port)
{
    char *path = g_strdup_printf("/sys/class/infiniband/%s/ports/%u/"
                                 "gid_attrs/ndevs/0", dev, port);
    char *name = NULL;

    if (!g_file_get_contents(path, &name, NULL, NULL)) {
        name = NULL;
    } else {
        g_strstrip(name);
    }
    g_free(path);
    return name;
}

/* The names of the host's RDMA devices, "a, b", or NULL if none. */
static char *pvrdma_ibv_names(struct ibv_device **list, int n)
{
    GString *s = g_string_new(NULL);
    int i;

    for (i = 0; i < n; i++) {
        g_string_append_printf(s, "%s%s", i ? ", " : "",
                               ibv_get_device_name(list[i]));
    }
    return g_string_free(s, n == 0);
}

static bool pvrdma_ibv_check_port(PvrdmaIbv *ibv, char **msg)
{
    char *ndev;

    if (ibv->port < 1 || ibv->port > ibv->dev_attr.phys_port_cnt) {
        *msg = g_strdup_printf("pvrdma: ibport=%u: host RDMA device %s has "
                               "ports 1 to %u", ibv->port, ibv->name,
                               ibv->dev_attr.phys_port_cnt);
        return false;
    }
    if (ibv_query_port(ibv->ctx, ibv->port, &ibv->port_attr)) {
        *msg = g_strdup_printf("pvrdma: cannot query port %u of host RDMA "
                               "device %s: %s", ibv->port, ibv->name,
                               strerror(errno));
        return false;
    }
    if (ibv->port_attr.state != IBV_PORT_ACTIVE) {
        ndev = pvrdma_ibv_netdev(ibv->name, ibv->port);
        *msg = g_strdup_printf("pvrdma: port %u of host RDMA device %s is "
                               "%s, not ACTIVE: %s%s%s", ibv->port,
                               ibv->name,
                               pvrdma_ibv_port_state(ibv->port_attr.state),
                               ndev ? "bring its network interface up (ip "
                                      "link set " : "check its cable and "
                                      "link partner (rdma link show)",
                               ndev ? ndev : "", ndev ? " up)" : "");
        g_free(ndev);
        return false;
    }
    if (ibv->port_attr.link_layer != IBV_LINK_LAYER_ETHERNET) {
        *msg = g_strdup_printf("pvrdma: port %u of host RDMA device %s is "
                               "not RoCE (Ethernet): the device offers the "
                               "guest RoCE only; use a RoCE port or "
                               "Soft-RoCE (rdma link add rxe0 type rxe "
                               "netdev NIC)", ibv->port, ibv->name);
        return false;
    }
    return true;
}

static bool pvrdma_ibv_check_gid(PvrdmaIbv *ibv, char **msg)
{
    static const union ibv_gid zero;
    union ibv_gid gid;

    if (ibv->gid_index < 0) {
        return true;
    }
    if (ibv->gid_index >= ibv->port_attr.gid_tbl_len) {
        *msg = g_strdup_printf("pvrdma: gid-index=%d: port %u of host RDMA "
                               "device %s has GID indexes 0 to %d",
                               ibv->gid_index, ibv->port, ibv->name,
                               ibv->port_attr.gid_tbl_len - 1);
        return false;
    }
    if (ibv_query_gid(ibv->ctx, ibv->port, ibv->gid_index, &gid) ||
        !memcmp(&gid, &zero, sizeof(gid))) {
        *msg = g_strdup_printf("pvrdma: gid-index=%d: port %u of host RDMA "
                               "device %s has no GID there (an address "
                               "of its netdev makes one; ibv_devinfo -v "
                               "lists them)", ibv->gid_index, ibv->port,
                               ibv->name);
        return false;
    }
    return true;
}

PvrdmaIbv *pvrdma_ibv_open(const PvrdmaIbvConfig *cfg, char **msg)
{
    struct ibv_device **list;
    struct ibv_device *dev = NULL;
    PvrdmaIbv *ibv;
    char *names;
    int i, n = 0;

    *msg = NULL;
    if (!cfg->ibdev || !cfg->ibdev[0]) {
        *msg = g_strdup("pvrdma: backend=ibverbs needs ibdev=NAME, the "
                        "host RDMA device to use (ibv_devices or rdma link "
                        "show lists them)");
        return NULL;
    }
    list = ibv_get_device_list(&n);
    if (!list || n == 0) {
        *msg = g_strdup_printf("pvrdma: ibdev=%s: this host has no RDMA "
                               "device%s; load the driver of its RDMA NIC, "
                               "or make a Soft-RoCE device on a network "
                               "interface: rdma link add %s type rxe "
                               "netdev NIC", cfg->ibdev,
                               list ? "" : " (no RDMA in the kernel: "
                               "modprobe ib_uverbs)",
                               cfg->ibdev);
        if (list) {
            ibv_free_device_list(list);
        }
        return NULL;
    }
    for (i = 0; i < n; i++) {
        if (!strcmp(ibv_get_device_name(list[i]), cfg->ibdev)) {
            dev = list[i];
        }
    }
    if (!dev) {
        names = pvrdma_ibv_names(list, n);
        *msg = g_strdup_printf("pvrdma: ibdev=%s: no such host RDMA device; "
                               "this host has: %s", cfg->ibdev, names);
        g_free(names);
        ibv_free_device_list(list);
        return NULL;
    }
    ibv = g_new0(PvrdmaIbv, 1);
    ibv->name = g_strdup(cfg->ibdev);
    ibv->port = cfg->ibport;
    ibv->gid_index = cfg->gid_index;
    ibv->ctx = ibv_open_device(dev);
    ibv_free_device_list(list);
    if (!ibv->ctx) {
        *msg = g_strdup_printf("pvrdma: cannot open host RDMA device %s: %s "
                               "(are /dev/infiniband/uverbs* readable and "
                               "writable by this user?)", ibv->name,
                               strerror(errno));
        goto fail;
    }
    if (ibv_query_device(ibv->ctx, &ibv->dev_attr)) {
        *msg = g_strdup_printf("pvrdma: cannot query host RDMA device %s: "
                               "%s", ibv->name, strerror(errno));
        goto fail;
    }
    if (!pvrdma_ibv_check_port(ibv, msg) || !pvrdma_ibv_check_gid(ibv, msg)) {
        goto fail;
    }
    return ibv;

fail:
    pvrdma_ibv_close(ibv);
    return NULL;
}

void pvrdma_ibv_close(PvrdmaIbv *ibv)
{
    if (!ibv) {
        return;
    }
    if (ibv->ctx) {
        ibv_close_device(ibv->ctx);
    }
    g_free(ibv->name);
    g_free(ibv);
}

char *pvrdma_ibv_describe(PvrdmaIbv *ibv)
{
    return g_strdup_printf("%s port %u: %s, MTU %d, %d GIDs, max %d QPs, "
                           "%d MRs", ibv->name, ibv->port,
                           pvrdma_ibv_port_state(ibv->port_attr.state),
                           128 << ibv->port_attr.active_mtu,
                           ibv->port_attr.gid_tbl_len,
                           ibv->dev_attr.max_qp, ibv->dev_attr.max_mr);
}
