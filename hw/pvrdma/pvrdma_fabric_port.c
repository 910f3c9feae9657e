/*
 * PVRDMA software fabric, transport layer: the registry of fabric ports
 * (one per device of this process), peer lookup by (GID, QPN), message
 * delivery and zero-staging memory movement between two guests.
 *
 * Wire QPNs (drivers of interface version >= 20) are
 *   bits 16..23: the device's fabric index (1..255)
 *   bits  0..15: the device's QP handle
 * so two pvrdma devices of one guest, which pair with the same netdev and
 * therefore bind identical GIDs, still have distinct QPNs.  The GID then
 * only has to be one the indexed device has bound.
 *
 * A later transport for devices of other processes (shared memory, TCP)
 * adds remote ports behind pvrdma_fabric_port_lookup()/deliver(): it
 * serialises PvrdmaFabricMsg, reads or writes msg->local through the
 * requester's core, and returns a PvrdmaFabricAck.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "pvrdma_fabric.h"

/* Index 0 is never used: it marks QPNs without an index. */
static PvrdmaFabric *pvrdma_fabric_ports[PVRDMA_FABRIC_MAX_PORTS];

/* Bytes moved per mapping, and the bounce buffer for unmappable memory. */
#define PVRDMA_FABRIC_MAP_CHUNK         (1u << 20)
#define PVRDMA_FABRIC_BOUNCE            4096

uint8_t pvrdma_fabric_port_add(PvrdmaFabric *fab)
{
    unsigned i;

    for (i = 1; i < PVRDMA_FABRIC_MAX_PORTS; i++) {
        if (!pvrdma_fabric_ports[i]) {
            pvrdma_fabric_ports[i] = fab;
            return i;
        }
    }
    return 0;
}

void pvrdma_fabric_port_del(PvrdmaFabric *fab)
{
    if (fab->index && pvrdma_fabric_ports[fab->index] == fab) {
        pvrdma_fabric_ports[fab->index] = NULL;
    }
    fab->index = 0;
}

uint8_t pvrdma_fabric_index(void *be)
{
    return ((PvrdmaFabric *)be)->index;
}

static bool pvrdma_fabric_port_has_gid(PvrdmaFabric *fab,
                                       const uint8_t gid[16])
{
    PvrdmaCore *core = fab->core;
    uint32_t i;

    if (!core->dsr_loaded) {
        return false;
    }
    for (i = 0; i < core->cfg.gid_tbl_len; i++) {
        if (core->gids[i].bound && !memcmp(core->gids[i].gid, gid, 16)) {
            return true;
        }
    }
    return false;
}

static PvrdmaQp *pvrdma_fabric_port_qp(PvrdmaFabric *fab, uint32_t qpn)
{
    PvrdmaQp *qp = pvrdma_table_lookup(&fab->core->qp_tbl,
                                       qpn & PVRDMA_FABRIC_QPN_HANDLE_MASK);

    return qp && qp->qpn == qpn && qp->be ? qp : NULL;
}

PvrdmaFabric *pvrdma_fabric_port_lookup(const uint8_t gid[16], uint32_t qpn)
{
    uint32_t index = qpn >> PVRDMA_FABRIC_QPN_INDEX_SHIFT;
    PvrdmaFabric *fab;
    unsigned i;

    if (index >= PVRDMA_FABRIC_MAX_PORTS) {
        return NULL;            /* not a 24-bit QPN */
    }
    if (index) {
        fab = pvrdma_fabric_ports[index];
        return fab && pvrdma_fabric_port_has_gid(fab, gid) &&
               pvrdma_fabric_port_qp(fab, qpn) ? fab : NULL;
    }
    /* Pre-v20 driver: QPN == handle, find the device by GID. */
    for (i = 1; i < PVRDMA_FABRIC_MAX_PORTS; i++) {
        fab = pvrdma_fabric_ports[i];
        if (fab && pvrdma_fabric_port_has_gid(fab, gid) &&
            pvrdma_fabric_port_qp(fab, qpn)) {
            return fab;
        }
    }
    return NULL;
}

void pvrdma_fabric_deliver(PvrdmaFabricMsg *msg, PvrdmaFabricAck *ack)
{
    PvrdmaFabric *fab;

    memset(ack, 0, sizeof(*ack));
    ack->status = PVRDMA_WC_RETRY_EXC_ERR;
    fab = pvrdma_fabric_port_lookup(msg->dgid, msg->dst_qpn);
    if (!fab) {
        return;
    }
    pvrdma_fabric_rc_respond(fab, pvrdma_fabric_port_qp(fab, msg->dst_qpn),
                             msg, ack);
}

/* ---- memory ------------------------------------------------------------- */

bool pvrdma_fabric_seg_xlate(const PvrdmaSeg *seg, uint64_t off,
                             uint64_t *bus, uint64_t *run)
{
    uint64_t rel, page, in_page;

    if (off >= seg->len) {
        return false;
    }
    if (!seg->pages) {
        /* DMA MR: bus addresses; va + len was overflow-checked. */
        *bus = seg->va + off;
        *run = seg->len - off;
        return true;
    }
    /* va >= base and va + len <= base + MR length: checked at build. */
    rel = (seg->va - seg->base) + off + (seg->base & (PVRDMA_PAGE_SIZE - 1));
    page = rel >> PVRDMA_PAGE_SHIFT;
    in_page = rel & (PVRDMA_PAGE_SIZE - 1);
    if (page >= seg->npages) {
        return false;
    }
    *bus = seg->pages[page] + in_page;
    *run = MIN(PVRDMA_PAGE_SIZE - in_page, seg->len - off);
    return true;
}

typedef struct PvrdmaSglCursor {
    const PvrdmaSgl *sgl;
    uint32_t i;
    uint64_t off;
} PvrdmaSglCursor;

static bool pvrdma_sgl_cursor_get(PvrdmaSglCursor *c, uint64_t *bus,
                                  uint64_t *run)
{
    while (c->i < c->sgl->nseg && c->off >= c->sgl->seg[c->i].len) {
        c->i++;
        c->off = 0;
    }
    if (c->i >= c->sgl->nseg) {
        return false;
    }
    return pvrdma_fabric_seg_xlate(&c->sgl->seg[c->i], c->off, bus, run);
}

int pvrdma_fabric_copy(PvrdmaSgl *dst, PvrdmaSgl *src, uint64_t len)
{
    PvrdmaSglCursor d = { .sgl = dst }, s = { .sgl = src };
    uint8_t bounce[PVRDMA_FABRIC_BOUNCE];

    while (len) {
        uint64_t dbus, drun, sbus, srun, n, sl, dl;
        void *sp, *dp;

        if (!pvrdma_sgl_cursor_get(&d, &dbus, &drun)) {
            return PVRDMA_COPY_DST_FAULT;
        }
        if (!pvrdma_sgl_cursor_get(&s, &sbus, &srun)) {
            return PVRDMA_COPY_SRC_FAULT;
        }
        n = MIN(MIN(drun, srun), MIN(len, PVRDMA_FABRIC_MAP_CHUNK));

        /* Map both sides for this chunk only; a short mapping shrinks it. */
        sl = n;
        sp = pvrdma_core_dma_map(src->core, sbus, &sl, false);
        if (sp) {
            dl = sl;
            dp = pvrdma_core_dma_map(dst->core, dbus, &dl, true);
            if (dp) {
                /* Same guest, overlapping ranges: memmove. */
                memmove(dp, sp, dl);
                pvrdma_core_dma_unmap(dst->core, dp, dl, true, dl);
                pvrdma_core_dma_unmap(src->core, sp, sl, false, dl);
                n = dl;
                goto advance;
            }
            pvrdma_core_dma_unmap(src->core, sp, sl, false, 0);
        }
        /* Not mappable (MMIO, or no dma_map): bounce through dma_read. */
        n = MIN(n, (uint64_t)sizeof(bounce));
        if (pvrdma_core_dma_read(src->core, sbus, bounce, n) < 0) {
            return PVRDMA_COPY_SRC_FAULT;
        }
        if (pvrdma_core_dma_write(dst->core, dbus, bounce, n) < 0) {
            return PVRDMA_COPY_DST_FAULT;
        }
advance:
        d.off += n;
        s.off += n;
        len -= n;
    }
    return PVRDMA_COPY_OK;
}

int pvrdma_fabric_sgl_write(PvrdmaSgl *dst, const void *buf, uint64_t len)
{
    PvrdmaSglCursor d = { .sgl = dst };
    const uint8_t *p = buf;

    while (len) {
        uint64_t bus, run, n;

        if (!pvrdma_sgl_cursor_get(&d, &bus, &run)) {
            return PVRDMA_COPY_DST_FAULT;
        }
        n = MIN(run, len);
        if (pvrdma_core_dma_write(dst->core, bus, p, n) < 0) {
            return PVRDMA_COPY_DST_FAULT;
        }
        d.off += n;
        p += n;
        len -= n;
    }
    return PVRDMA_COPY_OK;
}
