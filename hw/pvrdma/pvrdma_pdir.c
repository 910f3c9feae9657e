/*
 * PVRDMA page directories (spec §4): copy the directory and the needed page
 * tables in, validate every entry, hand back a flat page array.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <errno.h>
#include <stdint.h>

#include "pvrdma_core_int.h"

static bool pvrdma_pdir_addr_ok(uint64_t addr)
{
    return addr != 0 && (addr & (PVRDMA_PAGE_SIZE - 1)) == 0;
}

int pvrdma_pdir_read(PvrdmaCore *core, uint64_t pdir_dma, uint32_t npages,
                     uint64_t **pages)
{
    uint64_t dir[PVRDMA_PDIR_ENTRIES];
    uint32_t ntables, t, i;
    uint64_t *p;
    int ret;

    *pages = NULL;
    if (core->load_pages) {
        /* A saved state's list (pvrdma_state.c), checked as one read. */
        const uint64_t *src = core->load_pages;

        core->load_pages = NULL;
        if (npages != core->load_npages || npages == 0 ||
            npages > PVRDMA_PDIR_MAX_PAGES) {
            return -EINVAL;
        }
        for (i = 0; i < npages; i++) {
            if (!pvrdma_pdir_addr_ok(src[i])) {
                return -EINVAL;
            }
        }
        *pages = g_memdup2(src, (gsize)npages * sizeof(uint64_t));
        return 0;
    }
    if (npages == 0 || npages > PVRDMA_PDIR_MAX_PAGES) {
        GERR(core, PDIR_PAGES_OUT_OF_RANGE,
             "pdir: %u pages out of range 1..%u",
             npages, PVRDMA_PDIR_MAX_PAGES);
        return -EINVAL;
    }
    if (!pvrdma_pdir_addr_ok(pdir_dma)) {
        GERR(core, PDIR_BAD_DIRECTORY_ADDRESS,
             "pdir: bad directory address 0x%"
             G_GINT64_MODIFIER "x", pdir_dma);
        return -EINVAL;
    }
    ntables = ((npages - 1) >> PVRDMA_PDIR_TABLE_SHIFT) + 1;
    ret = pvrdma_core_dma_read(core, pdir_dma, dir,
                               (uint64_t)ntables * sizeof(uint64_t));
    if (ret < 0) {
        GERR(core, PDIR_DIRECTORY_UNREADABLE,
             "pdir: directory 0x%" G_GINT64_MODIFIER
             "x unreadable", pdir_dma);
        return ret;
    }

    /* Bounded by PVRDMA_PDIR_MAX_PAGES (2 MiB) and the caller's quota. */
    p = g_try_new(uint64_t, npages);
    if (!p) {
        return -ENOMEM;
    }
    for (t = 0; t < ntables; t++) {
        uint32_t first = t << PVRDMA_PDIR_TABLE_SHIFT;
        uint32_t count = MIN(npages - first, (uint32_t)PVRDMA_PDIR_ENTRIES);
        uint64_t table = GUINT64_FROM_LE(dir[t]);

        if (!pvrdma_pdir_addr_ok(table)) {
            GERR(core, PDIR_BAD_PAGE_TABLE_ADDRESS,
                 "pdir: bad page table %u address 0x%"
                 G_GINT64_MODIFIER "x", t, table);
            g_free(p);
            return -EINVAL;
        }
        ret = pvrdma_core_dma_read(core, table, p + first,
                                   (uint64_t)count * sizeof(uint64_t));
        if (ret < 0) {
            GERR(core, PDIR_PAGE_TABLE_UNREADABLE,
                 "pdir: page table %u at 0x%"
                 G_GINT64_MODIFIER "x unreadable",
                 t, table);
            g_free(p);
            return ret;
        }
    }
    for (i = 0; i < npages; i++) {
        p[i] = GUINT64_FROM_LE(p[i]);
        if (!pvrdma_pdir_addr_ok(p[i])) {
            GERR(core, PDIR_BAD_PAGE_ADDRESS,
                 "pdir: bad page %u address 0x%"
                 G_GINT64_MODIFIER "x", i, p[i]);
            g_free(p);
            return -EINVAL;
        }
    }
    *pages = p;
    return 0;
}
