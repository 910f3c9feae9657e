/*
 * PVRDMA device core: moving bytes in and out of resolved memory
 * (PvrdmaSgl), one core's guest memory at a time.
 *
 * A transfer maps a short-lived chunk of the SGL's guest memory through
 * its own core (a page of a user or fast-reg MR, at most 1 MiB of a DMA
 * MR), lets the peer copy to or from that host memory, and unmaps it at
 * once; no mapping outlives the call.  Where a chunk cannot be mapped
 * (MMIO, or a glue without dma_map) it bounces through a bounded stack
 * buffer with dma_read/dma_write.  The peer is whatever the backend puts
 * on the other side: the other device's SGL in this process (zero
 * staging), a receive buffer of a link, a host verbs buffer.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "pvrdma_core_int.h"

/* Bytes moved per mapping, and the bounce buffer for unmappable memory. */
#define PVRDMA_SGL_MAP_CHUNK            (1u << 20)
#define PVRDMA_SGL_BOUNCE               4096

bool pvrdma_seg_xlate(const PvrdmaSeg *seg, uint64_t off, uint64_t *bus,
                      uint64_t *run)
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
    *run = PVRDMA_PAGE_SIZE - in_page;
    /*
     * Pages that follow each other in guest-physical memory make one run,
     * so one mapping covers them (a guest's buffer often is contiguous).
     * A page address is never 0, so a wrap cannot fake a neighbour.
     */
    while (*run < seg->len - off && *run < PVRDMA_SGL_MAP_CHUNK &&
           page + 1 < seg->npages &&
           seg->pages[page + 1] == seg->pages[page] + PVRDMA_PAGE_SIZE) {
        page++;
        *run += PVRDMA_PAGE_SIZE;
    }
    *run = MIN(*run, seg->len - off);
    return true;
}

void pvrdma_sgl_seek(PvrdmaSglCursor *c, const PvrdmaSgl *sgl,
                            uint64_t off)
{
    c->sgl = sgl;
    c->pos = off;
    for (c->seg = 0; c->seg < sgl->nseg && off >= sgl->seg[c->seg].len;
         c->seg++) {
        off -= sgl->seg[c->seg].len;
    }
    c->off = off;
}

/* Bus address and contiguous run at the cursor; false past the end. */
static inline bool pvrdma_sgl_here(PvrdmaSglCursor *c, uint64_t *bus,
                                   uint64_t *run)
{
    while (c->seg < c->sgl->nseg && c->off >= c->sgl->seg[c->seg].len) {
        c->seg++;
        c->off = 0;
    }
    return c->seg < c->sgl->nseg &&
           pvrdma_seg_xlate(&c->sgl->seg[c->seg], c->off, bus, run);
}

int pvrdma_sgl_xfer(PvrdmaSgl *sgl, uint64_t off, uint64_t len,
                    bool into_sgl, PvrdmaPeerCopy peer, void *opaque)
{
    const int own_fault = into_sgl ? PVRDMA_COPY_DST_FAULT :
                                     PVRDMA_COPY_SRC_FAULT;
    const int peer_fault = into_sgl ? PVRDMA_COPY_SRC_FAULT :
                                      PVRDMA_COPY_DST_FAULT;
    PvrdmaCore *core = sgl->core;
    uint8_t bounce[PVRDMA_SGL_BOUNCE];
    PvrdmaSglCursor c;
    uint64_t done = 0;

    pvrdma_sgl_seek(&c, sgl, off);
    while (done < len) {
        uint64_t bus, run, n, mlen;
        void *p;

        if (!pvrdma_sgl_here(&c, &bus, &run)) {
            return own_fault;
        }
        n = MIN(MIN(run, len - done), PVRDMA_SGL_MAP_CHUNK);
        mlen = n;
        p = pvrdma_core_dma_map(core, bus, &mlen, into_sgl);
        if (p) {
            /* A short mapping shrinks the chunk. */
            if (peer(opaque, done, p, mlen) < 0) {
                pvrdma_core_dma_unmap(core, p, mlen, into_sgl, 0);
                return peer_fault;
            }
            pvrdma_core_dma_unmap(core, p, mlen, into_sgl, mlen);
            n = mlen;
        } else {
            /* Not mappable (MMIO, or no dma_map): bounce. */
            n = MIN(n, (uint64_t)sizeof(bounce));
            if (into_sgl) {
                if (peer(opaque, done, bounce, n) < 0) {
                    return peer_fault;
                }
                if (pvrdma_core_dma_write(core, bus, bounce, n) < 0) {
                    return own_fault;
                }
            } else {
                if (pvrdma_core_dma_read(core, bus, bounce, n) < 0) {
                    return own_fault;
                }
                if (peer(opaque, done, bounce, n) < 0) {
                    return peer_fault;
                }
            }
        }
        done += n;
        c.off += n;
    }
    return PVRDMA_COPY_OK;
}

int pvrdma_sgl_cursor_copy(PvrdmaSglCursor *c, uint64_t off, void *host,
                           uint64_t len, bool to_sgl)
{
    PvrdmaCore *core = c->sgl->core;
    uint8_t *buf = host;
    uint64_t done = 0;

    /* Sequential calls (a payload read chunk by chunk) never re-seek. */
    if (off != c->pos) {
        pvrdma_sgl_seek(c, c->sgl, off);
    }
    c->pos = off + len;
    while (done < len) {
        uint64_t bus, run, n;
        void *p;

        if (!pvrdma_sgl_here(c, &bus, &run)) {
            c->pos = UINT64_MAX;
            return -1;
        }
        n = MIN(MIN(run, len - done), PVRDMA_SGL_MAP_CHUNK);
        p = pvrdma_core_dma_map(core, bus, &n, to_sgl);
        if (p) {
            if (to_sgl) {
                memmove(p, buf + done, n);
            } else {
                memmove(buf + done, p, n);
            }
            pvrdma_core_dma_unmap(core, p, n, to_sgl, n);
        } else {
            n = MIN(MIN(run, len - done), PVRDMA_SGL_MAP_CHUNK);
            if ((to_sgl ? pvrdma_core_dma_write(core, bus, buf + done, n) :
                 pvrdma_core_dma_read(core, bus, buf + done, n)) < 0) {
                c->pos = UINT64_MAX;
                return -1;
            }
        }
        done += n;
        c->off += n;
    }
    return 0;
}

int pvrdma_sgl_write(PvrdmaSgl *sgl, uint64_t off, const void *buf,
                     uint64_t len)
{
    PvrdmaSglCursor c;

    pvrdma_sgl_seek(&c, sgl, off);
    return pvrdma_sgl_cursor_copy(&c, off, (void *)buf, len, true);
}
