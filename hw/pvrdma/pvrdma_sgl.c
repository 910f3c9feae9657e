/*
 * PVRDMA device core: moving bytes in and out of resolved memory
 * (PvrdmaSgl), one core's guest memory at a time.
 *
 * In process, pvrdma_sgl_copy() moves a payload SGL to SGL: both sides
 * walked together, each through its own core, one memmove per piece both
 * hold contiguously.  pvrdma_sgl_xfer() moves one SGL's bytes to or from
 * a peer that is not an SGL of this process (a link's receive buffer or
 * send ring, a host verbs buffer), piece by piece through a callback.
 * Either reaches guest RAM through a window of the glue (the RAM block,
 * mapped once) where it can, else maps a short-lived chunk (a run of
 * pages, at most 1 MiB) and unmaps it at once, so no mapping outlives
 * the call; where a chunk cannot be mapped (MMIO, or a glue without
 * dma_map) it bounces through a bounded stack buffer with
 * dma_read/dma_write.
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
    return pvrdma_seg_xlate_upto(seg, off, UINT64_MAX, bus, run);
}

bool pvrdma_seg_xlate_upto(const PvrdmaSeg *seg, uint64_t off, uint64_t want,
                           uint64_t *bus, uint64_t *run)
{
    uint64_t rel, page, in_page, end;

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
     * A page address is never 0, so a wrap cannot fake a neighbour.  The
     * run stops once it holds what the caller wants: a caller that takes
     * a page at a time (the other side of the copy is scattered) must not
     * walk the rest of a long run for every page.
     */
    end = MIN(MIN(seg->len - off, want), PVRDMA_SGL_MAP_CHUNK);
    while (*run < end && page + 1 < seg->npages &&
           seg->pages[page + 1] == seg->pages[page] + PVRDMA_PAGE_SIZE) {
        page++;
        *run += PVRDMA_PAGE_SIZE;
    }
    *run = MIN(*run, seg->len - off);
    return true;
}

/* A position in an SGL: walking forward never rescans the segments. */
typedef struct PvrdmaSglCursor {
    const PvrdmaSgl *sgl;
    uint32_t seg;
    uint64_t off;               /* within seg */
} PvrdmaSglCursor;

static void pvrdma_sgl_seek(PvrdmaSglCursor *c, const PvrdmaSgl *sgl,
                            uint64_t off)
{
    c->sgl = sgl;
    for (c->seg = 0; c->seg < sgl->nseg && off >= sgl->seg[c->seg].len;
         c->seg++) {
        off -= sgl->seg[c->seg].len;
    }
    c->off = off;
}

/*
 * Bus address and contiguous run (looked for up to @want bytes) at the
 * cursor; false past the end.
 */
static inline bool pvrdma_sgl_here(PvrdmaSglCursor *c, uint64_t want,
                                   uint64_t *bus, uint64_t *run)
{
    while (c->seg < c->sgl->nseg && c->off >= c->sgl->seg[c->seg].len) {
        c->seg++;
        c->off = 0;
    }
    return c->seg < c->sgl->nseg &&
           pvrdma_seg_xlate_upto(&c->sgl->seg[c->seg], c->off, want, bus,
                                 run);
}

/*
 * A window onto guest RAM for one copy, and the written bytes not yet
 * reported (adjacent writes are reported as one range).  A guest buffer
 * scattered over single pages costs a compare per page here, where a
 * mapping per page cost a translation and a dirty-log call per page.
 */
typedef struct PvrdmaSglWin {
    PvrdmaDmaWindow w;
    uint64_t dirty_bus;
    uint64_t dirty_len;
} PvrdmaSglWin;

static void pvrdma_win_flush(PvrdmaCore *core, PvrdmaSglWin *win)
{
    if (win->dirty_len) {
        core->ops->dma_dirty(core->opaque, win->w.tag, win->dirty_bus,
                             win->dirty_len);
        win->dirty_len = 0;
    }
}

/* Host pointer to bus address @bus, *@n cut to the window; NULL: map. */
static void *pvrdma_win_ptr(PvrdmaCore *core, PvrdmaSglWin *win,
                            uint64_t bus, uint64_t *n)
{
    if (bus - win->w.base >= win->w.len) {
        pvrdma_win_flush(core, win);
        win->w.len = 0;
        if (!core->ops->dma_window || !core->ops->dma_dirty ||
            !core->dma_enabled ||
            !core->ops->dma_window(core->opaque, bus, &win->w) ||
            bus - win->w.base >= win->w.len) {
            win->w.len = 0;
            return NULL;
        }
    }
    *n = MIN(*n, win->w.len - (bus - win->w.base));
    return win->w.host + (bus - win->w.base);
}

static void pvrdma_win_wrote(PvrdmaCore *core, PvrdmaSglWin *win,
                             uint64_t bus, uint64_t n)
{
    if (win->dirty_len && bus == win->dirty_bus + win->dirty_len) {
        win->dirty_len += n;
        return;
    }
    pvrdma_win_flush(core, win);
    win->dirty_bus = bus;
    win->dirty_len = n;
}

int pvrdma_sgl_xfer(PvrdmaSgl *sgl, uint64_t off, uint64_t len,
                    bool into_sgl, PvrdmaPeerCopy peer, void *opaque)
{
    const int own_fault = into_sgl ? PVRDMA_COPY_DST_FAULT :
                                     PVRDMA_COPY_SRC_FAULT;
    const int peer_fault = into_sgl ? PVRDMA_COPY_SRC_FAULT :
                                      PVRDMA_COPY_DST_FAULT;
    PvrdmaCore *core = sgl->core;
    uint8_t bounce[PVRDMA_SGL_BOUNCE] PVRDMA_UNINIT;
    PvrdmaSglWin win = { 0 };
    PvrdmaSglCursor c;
    uint64_t done = 0;
    int ret = PVRDMA_COPY_OK;

    pvrdma_sgl_seek(&c, sgl, off);
    while (done < len) {
        uint64_t bus, run, n, mlen;
        void *p;

        if (!pvrdma_sgl_here(&c, len - done, &bus, &run)) {
            ret = own_fault;
            break;
        }
        n = MIN(MIN(run, len - done), PVRDMA_SGL_MAP_CHUNK);
        p = pvrdma_win_ptr(core, &win, bus, &n);
        if (p) {
            /* (a peer that faulted may have written part: all reported) */
            if (into_sgl) {
                pvrdma_win_wrote(core, &win, bus, n);
            }
            if (peer(opaque, done, p, n) < 0) {
                ret = peer_fault;
                break;
            }
            done += n;
            c.off += n;
            continue;
        }
        mlen = n;
        p = pvrdma_core_dma_map(core, bus, &mlen, into_sgl);
        if (p) {
            /* A short mapping shrinks the chunk. */
            if (peer(opaque, done, p, mlen) < 0) {
                pvrdma_core_dma_unmap(core, p, mlen, into_sgl,
                                      into_sgl ? mlen : 0);
                ret = peer_fault;
                break;
            }
            pvrdma_core_dma_unmap(core, p, mlen, into_sgl, mlen);
            n = mlen;
        } else {
            /* Not mappable (MMIO, or no dma_map): bounce. */
            n = MIN(n, (uint64_t)sizeof(bounce));
            if (into_sgl) {
                if (peer(opaque, done, bounce, n) < 0) {
                    ret = peer_fault;
                    break;
                }
                if (pvrdma_core_dma_write(core, bus, bounce, n) < 0) {
                    ret = own_fault;
                    break;
                }
            } else {
                if (pvrdma_core_dma_read(core, bus, bounce, n) < 0) {
                    ret = own_fault;
                    break;
                }
                if (peer(opaque, done, bounce, n) < 0) {
                    ret = peer_fault;
                    break;
                }
            }
        }
        done += n;
        c.off += n;
    }
    pvrdma_win_flush(core, &win);
    return ret;
}

/*
 * Up to @n bytes between bus address @bus of @core and @host, without a
 * window: through a mapping (which may be shorter) or, where nothing maps
 * (MMIO, a glue without dma_map), dma_read/dma_write of all @n.  The
 * bytes moved, or 0 if that memory faulted.
 */
static uint64_t pvrdma_sgl_direct(PvrdmaCore *core, uint64_t bus,
                                  uint64_t n, void *host, bool to_guest)
{
    uint64_t m = n;
    void *p = pvrdma_core_dma_map(core, bus, &m, to_guest);

    if (p) {
        if (to_guest) {
            memmove(p, host, m);
        } else {
            memmove(host, p, m);
        }
        pvrdma_core_dma_unmap(core, p, m, to_guest, m);
        return m;
    }
    if ((to_guest ? pvrdma_core_dma_write(core, bus, host, n) :
         pvrdma_core_dma_read(core, bus, host, n)) < 0) {
        return 0;
    }
    return n;
}

int pvrdma_sgl_write(PvrdmaSgl *sgl, uint64_t off, const void *buf,
                     uint64_t len)
{
    PvrdmaCore *core = sgl->core;
    PvrdmaSglWin win = { 0 };
    PvrdmaSglCursor c;
    uint64_t done = 0;

    pvrdma_sgl_seek(&c, sgl, off);
    while (done < len) {
        uint64_t bus, run, n;
        void *p;

        if (!pvrdma_sgl_here(&c, len - done, &bus, &run)) {
            break;
        }
        n = MIN(MIN(run, len - done), PVRDMA_SGL_MAP_CHUNK);
        p = pvrdma_win_ptr(core, &win, bus, &n);
        if (p) {
            memmove(p, (const uint8_t *)buf + done, n);
            pvrdma_win_wrote(core, &win, bus, n);
        } else {
            n = pvrdma_sgl_direct(core, bus, n, (uint8_t *)buf + done, true);
            if (!n) {
                break;
            }
        }
        done += n;
        c.off += n;
    }
    pvrdma_win_flush(core, &win);
    return done < len ? -1 : 0;
}

int pvrdma_sgl_copy(const PvrdmaSgl *dst, uint64_t dst_off,
                    const PvrdmaSgl *src, uint64_t src_off, uint64_t len)
{
    PvrdmaCore *dcore = dst->core, *score = src->core;
    uint8_t bounce[PVRDMA_SGL_BOUNCE] PVRDMA_UNINIT;
    PvrdmaSglWin dw = { 0 }, sw = { 0 };
    PvrdmaSglCursor d, s;
    uint64_t done = 0, sbus = 0, srun = 0, dbus = 0, drun = 0;
    int ret = PVRDMA_COPY_OK;

    pvrdma_sgl_seek(&d, dst, dst_off);
    pvrdma_sgl_seek(&s, src, src_off);
    while (done < len) {
        uint64_t n, m;
        void *sp, *dp;

        /*
         * Each side's contiguous run is looked up once and used up over
         * as many pieces as the other side needs (a long run against a
         * scattered side is not walked again for every page).
         */
        if (!srun && !pvrdma_sgl_here(&s, len - done, &sbus, &srun)) {
            ret = PVRDMA_COPY_SRC_FAULT;
            break;
        }
        if (!drun && !pvrdma_sgl_here(&d, len - done, &dbus, &drun)) {
            ret = PVRDMA_COPY_DST_FAULT;
            break;
        }
        /* The piece both sides hold contiguously, cut to both windows. */
        n = MIN(MIN(srun, drun), MIN(len - done, PVRDMA_SGL_MAP_CHUNK));
        sp = pvrdma_win_ptr(score, &sw, sbus, &n);
        dp = pvrdma_win_ptr(dcore, &dw, dbus, &n);
        if (sp && dp) {
            memmove(dp, sp, n);
            pvrdma_win_wrote(dcore, &dw, dbus, n);
        } else if (dp) {
            m = pvrdma_sgl_direct(score, sbus, n, dp, false);
            /* (a source that faulted may have written part: all reported) */
            pvrdma_win_wrote(dcore, &dw, dbus, m ? m : n);
            if (!m) {
                ret = PVRDMA_COPY_SRC_FAULT;
                break;
            }
            n = m;
        } else if (sp) {
            n = pvrdma_sgl_direct(dcore, dbus, n, sp, true);
            if (!n) {
                ret = PVRDMA_COPY_DST_FAULT;
                break;
            }
        } else {
            m = pvrdma_sgl_direct(score, sbus, MIN(n, sizeof(bounce)),
                                  bounce, false);
            if (!m) {
                ret = PVRDMA_COPY_SRC_FAULT;
                break;
            }
            n = pvrdma_sgl_direct(dcore, dbus, m, bounce, true);
            if (!n) {
                ret = PVRDMA_COPY_DST_FAULT;
                break;
            }
        }
        done += n;
        s.off += n;
        sbus += n;
        srun -= n;
        d.off += n;
        dbus += n;
        drun -= n;
    }
    pvrdma_win_flush(dcore, &dw);
    return ret;
}

/* ---- datagram headers ---------------------------------------------------- */

static uint16_t pvrdma_ipv4_csum(const uint8_t *h)
{
    uint32_t sum = 0;
    unsigned i;

    for (i = 0; i < 20; i += 2) {
        sum += (uint32_t)h[i] << 8 | h[i + 1];
    }
    while (sum >> 16) {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    return ~sum;
}

/*
 * The 40 bytes a UD receive buffer starts with on RoCE v2 (IBA annex
 * A17): the IPv6 header, or for IPv4-mapped GIDs 20 zero bytes and the
 * IPv4 header, as the packet would have carried them (UDP, BTH, DETH and
 * ICRC counted in the lengths).
 */
void pvrdma_grh_build(uint8_t grh[PVRDMA_GRH_SIZE], const uint8_t sgid[16],
                      const uint8_t dgid[16], uint8_t tclass,
                      uint32_t flow_label, uint8_t hop_limit, uint32_t length)
{
    static const uint8_t v4mapped[12] = {
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff
    };
    uint32_t rest = 8 + 12 + 8 + length + 4;  /* UDP BTH DETH .. ICRC */
    uint16_t csum;

    memset(grh, 0, PVRDMA_GRH_SIZE);
    if (!memcmp(sgid, v4mapped, 12) && !memcmp(dgid, v4mapped, 12)) {
        uint8_t *ip = grh + 20;
        uint32_t total = 20 + rest;

        ip[0] = 0x45;
        ip[1] = tclass;
        ip[2] = total >> 8;
        ip[3] = total;
        ip[6] = 0x40;           /* don't fragment */
        ip[8] = hop_limit;
        ip[9] = 17;             /* UDP */
        memcpy(ip + 12, sgid + 12, 4);
        memcpy(ip + 16, dgid + 12, 4);
        csum = pvrdma_ipv4_csum(ip);
        ip[10] = csum >> 8;
        ip[11] = csum;
        return;
    }
    grh[0] = 0x60 | tclass >> 4;
    grh[1] = (tclass & 0xF) << 4 | (flow_label >> 16 & 0xF);
    grh[2] = flow_label >> 8;
    grh[3] = flow_label;
    grh[4] = rest >> 8;
    grh[5] = rest;
    grh[6] = 17;                /* next header: UDP */
    grh[7] = hop_limit;
    memcpy(grh + 8, sgid, 16);
    memcpy(grh + 24, dgid, 16);
}
