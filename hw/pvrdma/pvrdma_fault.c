/*
 * Fault injection for tests of guest drivers (the experimental x-fault-*
 * properties; docs/faults.md).
 *
 * A device that never fails leaves a driver's error paths untested.  With
 * these knobs the device, at a chosen rate:
 *  - refuses commands (ERR and the response's err hold an errno, the
 *    command changes nothing), as a device out of resources would;
 *  - answers commands late: the command runs at once (ERR says so), but
 *    its response reaches the response slot, and vector 0 fires, only
 *    cfg.fault.late_ms later on the virtual clock;
 *  - reports async errors on live objects: a CQ overrun (CQ_ERR, its QPs
 *    to ERR; never a CQ of the GSI QP), a QP fatal error (QP_FATAL, the
 *    QP to ERR; never the GSI QP), an SRQ error (SRQ_ERR, its QPs to
 *    ERR), or a device fatal error (DEVICE_FATAL: every QP to ERR, and
 *    until the next reset only
 *    QUERY_* and DESTROY_* commands work, the rest fail with EIO).  Each
 *    needs a victim when its time comes (device fatal: a QP other than
 *    the GSI QP, not in RESET or ERR); without one, nothing that time.
 * The effects are those of the device's real error paths (pvrdma_wq.c).
 * Choices come from a PRNG seeded by cfg.fault.seed, so a run with the
 * same guest activity injects the same faults.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "pvrdma_core.h"
#include "pvrdma_dev_abi.h"
#include "pvrdma_core_int.h"

#define PVRDMA_NS_PER_MS                1000000

enum {
    PVRDMA_FAULT_COUNT_FAILED,
    PVRDMA_FAULT_COUNT_LATE,
    PVRDMA_FAULT_COUNT_ASYNC,
};

static const char *const pvrdma_fault_cmd_names[PVRDMA_CMD_MAX] = {
    [PVRDMA_CMD_QUERY_PORT] = "query_port",
    [PVRDMA_CMD_QUERY_PKEY] = "query_pkey",
    [PVRDMA_CMD_CREATE_PD] = "create_pd",
    [PVRDMA_CMD_DESTROY_PD] = "destroy_pd",
    [PVRDMA_CMD_CREATE_MR] = "create_mr",
    [PVRDMA_CMD_DESTROY_MR] = "destroy_mr",
    [PVRDMA_CMD_CREATE_CQ] = "create_cq",
    [PVRDMA_CMD_RESIZE_CQ] = "resize_cq",
    [PVRDMA_CMD_DESTROY_CQ] = "destroy_cq",
    [PVRDMA_CMD_CREATE_QP] = "create_qp",
    [PVRDMA_CMD_MODIFY_QP] = "modify_qp",
    [PVRDMA_CMD_QUERY_QP] = "query_qp",
    [PVRDMA_CMD_DESTROY_QP] = "destroy_qp",
    [PVRDMA_CMD_CREATE_UC] = "create_uc",
    [PVRDMA_CMD_DESTROY_UC] = "destroy_uc",
    [PVRDMA_CMD_CREATE_BIND] = "create_bind",
    [PVRDMA_CMD_DESTROY_BIND] = "destroy_bind",
    [PVRDMA_CMD_CREATE_SRQ] = "create_srq",
    [PVRDMA_CMD_MODIFY_SRQ] = "modify_srq",
    [PVRDMA_CMD_QUERY_SRQ] = "query_srq",
    [PVRDMA_CMD_DESTROY_SRQ] = "destroy_srq",
    [PVRDMA_CMD_MODIFY_MR] = "modify_mr",
    [PVRDMA_CMD_QUERY_COUNTERS] = "query_counters",
    [PVRDMA_CMD_ATTACH_MCAST] = "attach_mcast",
    [PVRDMA_CMD_DETACH_MCAST] = "detach_mcast",
    [PVRDMA_CMD_CREATE_XRCD] = "create_xrcd",
    [PVRDMA_CMD_DESTROY_XRCD] = "destroy_xrcd",
};

static const char *const pvrdma_fault_async_names[PVRDMA_FAULT_ASYNC_KINDS] = {
    [PVRDMA_FAULT_ASYNC_CQ_ERR] = "cq-err",
    [PVRDMA_FAULT_ASYNC_QP_FATAL] = "qp-fatal",
    [PVRDMA_FAULT_ASYNC_SRQ_ERR] = "srq-err",
    [PVRDMA_FAULT_ASYNC_DEVICE_FATAL] = "device-fatal",
};

static bool pvrdma_fault_is_destroy(uint32_t cmd)
{
    switch (cmd) {
    case PVRDMA_CMD_DESTROY_PD:
    case PVRDMA_CMD_DESTROY_MR:
    case PVRDMA_CMD_DESTROY_CQ:
    case PVRDMA_CMD_DESTROY_QP:
    case PVRDMA_CMD_DESTROY_UC:
    case PVRDMA_CMD_DESTROY_BIND:
    case PVRDMA_CMD_DESTROY_SRQ:
    case PVRDMA_CMD_DETACH_MCAST:
    case PVRDMA_CMD_DESTROY_XRCD:
        return true;
    default:
        return false;
    }
}

/* ---- configuration ------------------------------------------------------- */

/* Words of @list (comma-separated) looked up in @names[0..@n). */
static bool pvrdma_fault_parse(const char *prop, const char *list,
                               const char *const *names, unsigned n,
                               uint32_t *mask, char **errmsg)
{
    g_auto(GStrv) words = g_strsplit(list, ",", -1);
    GString *known;
    unsigned i, w;

    *mask = 0;
    for (w = 0; words[w]; w++) {
        for (i = 0; i < n; i++) {
            if (names[i] && !strcmp(words[w], names[i])) {
                *mask |= 1u << i;
                break;
            }
        }
        if (i == n) {
            known = g_string_new(NULL);
            for (i = 0; i < n; i++) {
                if (names[i]) {
                    g_string_append_printf(known, "%s%s",
                                           known->len ? ", " : "", names[i]);
                }
            }
            *errmsg = g_strdup_printf("pvrdma: %s: unknown word '%s'; use "
                                      "a comma-separated list of: %s",
                                      prop, words[w], known->str);
            g_string_free(known, true);
            return false;
        }
    }
    return true;
}

bool pvrdma_fault_parse_cmds(const char *list, uint32_t *mask, char **errmsg)
{
    bool all = list && !strcmp(list, "all");
    uint32_t cmd;

    *errmsg = NULL;
    if (!list || !*list || all) {
        *mask = 0;
        for (cmd = 0; cmd < PVRDMA_CMD_MAX; cmd++) {
            if (pvrdma_fault_cmd_names[cmd] &&
                (all || !pvrdma_fault_is_destroy(cmd))) {
                *mask |= 1u << cmd;
            }
        }
        return true;
    }
    return pvrdma_fault_parse("x-fault-cmds (or 'all')", list,
                              pvrdma_fault_cmd_names, PVRDMA_CMD_MAX, mask,
                              errmsg);
}

bool pvrdma_fault_parse_async(const char *list, uint32_t *mask, char **errmsg)
{
    *errmsg = NULL;
    if (!list || !*list) {
        *mask = PVRDMA_FAULT_DEFAULT_ASYNC;
        return true;
    }
    return pvrdma_fault_parse("x-fault-async", list, pvrdma_fault_async_names,
                              PVRDMA_FAULT_ASYNC_KINDS, mask, errmsg);
}

bool pvrdma_fault_enabled(const PvrdmaFaultConfig *f)
{
    return f->fail || f->late || f->async_ms;
}

/* ---- choices ------------------------------------------------------------- */

/* xorshift64*: small, fast, and the same sequence on every host. */
static uint64_t pvrdma_fault_next(PvrdmaCore *core)
{
    uint64_t x = core->fault_rng;

    if (!x) {
        x = 0x9e3779b97f4a7c15ull ^ core->cfg.fault.seed;
    }
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    core->fault_rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* A number in 0..@n-1 (@n > 0). */
static uint32_t pvrdma_fault_pick(PvrdmaCore *core, uint32_t n)
{
    return (uint32_t)((pvrdma_fault_next(core) >> 32) % n);
}

/* True once in @one_in (never for 0). */
static bool pvrdma_fault_roll(PvrdmaCore *core, uint32_t one_in)
{
    return one_in && pvrdma_fault_pick(core, one_in) == 0;
}

/* ---- commands ------------------------------------------------------------ */

PvrdmaFaultCmd pvrdma_fault_cmd(PvrdmaCore *core, uint32_t cmd, int *err)
{
    const PvrdmaFaultConfig *f = &core->cfg.fault;

    if (core->fatal && cmd < PVRDMA_CMD_MAX &&
        !pvrdma_fault_is_destroy(cmd) && cmd != PVRDMA_CMD_QUERY_PORT &&
        cmd != PVRDMA_CMD_QUERY_PKEY && cmd != PVRDMA_CMD_QUERY_QP &&
        cmd != PVRDMA_CMD_QUERY_SRQ) {
        *err = -EIO;
        return PVRDMA_FAULT_FAIL;
    }
    if (cmd >= PVRDMA_CMD_MAX || !(f->cmd_mask & (1u << cmd))) {
        return PVRDMA_FAULT_NONE;
    }
    if (pvrdma_fault_roll(core, f->fail)) {
        core->fault_count[PVRDMA_FAULT_COUNT_FAILED]++;
        *err = -(int)f->fail_errno;
        return PVRDMA_FAULT_FAIL;
    }
    if (pvrdma_fault_roll(core, f->late) && pvrdma_core_has_timer(core)) {
        core->fault_count[PVRDMA_FAULT_COUNT_LATE]++;
        return PVRDMA_FAULT_LATE;
    }
    return PVRDMA_FAULT_NONE;
}

void pvrdma_fault_hold(PvrdmaCore *core, const union pvrdma_cmd_resp *wire,
                       uint32_t len)
{
    core->fault_resp = *wire;
    core->fault_resp_len = len;
    core->fault_resp_at = pvrdma_core_now_ns(core) +
                          (int64_t)core->cfg.fault.late_ms * PVRDMA_NS_PER_MS;
    pvrdma_wq_rearm(core);
}

void pvrdma_fault_drop_held(PvrdmaCore *core)
{
    if (core->fault_resp_at >= 0) {
        core->fault_resp_at = -1;
        pvrdma_wq_rearm(core);
    }
}

/* ---- timer --------------------------------------------------------------- */

int64_t pvrdma_fault_deadline(PvrdmaCore *core)
{
    int64_t a = core->fault_resp_at, b = core->fault_async_at;

    if (a < 0) {
        return b;
    }
    return b < 0 || a < b ? a : b;
}

void pvrdma_fault_start(PvrdmaCore *core)
{
    if (core->cfg.fault.async_ms && pvrdma_core_has_timer(core)) {
        core->fault_async_at = pvrdma_core_now_ns(core) +
            (int64_t)core->cfg.fault.async_ms * PVRDMA_NS_PER_MS;
        pvrdma_wq_rearm(core);
    }
}

void pvrdma_fault_reset(PvrdmaCore *core)
{
    core->fatal = false;
    core->fault_resp_at = -1;
    core->fault_async_at = -1;
}

static bool pvrdma_fault_qp_live(PvrdmaQp *qp)
{
    return qp->type != PVRDMA_QPT_GSI && qp->state != PVRDMA_QPS_RESET &&
           qp->state != PVRDMA_QPS_ERR;
}

/* The @k-th object of @t that @ok accepts, k counted by the first pass. */
static void *pvrdma_fault_choose(PvrdmaCore *core, PvrdmaTable *t,
                                 bool (*ok)(void *obj))
{
    uint32_t n = 0, k, h;
    void *obj;

    PVRDMA_TABLE_FOREACH(t, h, obj) {
        n += ok(obj);
    }
    if (!n) {
        return NULL;
    }
    k = pvrdma_fault_pick(core, n);
    PVRDMA_TABLE_FOREACH(t, h, obj) {
        if (ok(obj) && k-- == 0) {
            return obj;
        }
    }
    return NULL;
}

static bool pvrdma_fault_cq_ok(void *obj)
{
    PvrdmaCq *cq = obj;

    return !cq->overrun && !cq->fault_spared;
}

/*
 * The GSI QP and its CQs are spared: a guest kernel's MAD layer has no way
 * back from them (Linux's waits forever for the completions of MADs sent
 * on an overrun CQ, and every RDMA CM user of the port with it).
 */
static void pvrdma_fault_spare_gsi(PvrdmaCore *core)
{
    PvrdmaQp *qp;
    PvrdmaCq *cq;
    uint32_t h;

    PVRDMA_TABLE_FOREACH(&core->cq_tbl, h, cq) {
        cq->fault_spared = false;
    }
    PVRDMA_TABLE_FOREACH(&core->qp_tbl, h, qp) {
        if (qp->type != PVRDMA_QPT_GSI) {
            continue;
        }
        cq = pvrdma_qp_send_cq(core, qp);
        if (cq) {
            cq->fault_spared = true;
        }
        cq = pvrdma_qp_recv_cq(core, qp);
        if (cq) {
            cq->fault_spared = true;
        }
    }
}

static bool pvrdma_fault_qp_ok(void *obj)
{
    return pvrdma_fault_qp_live(obj);
}

static bool pvrdma_fault_srq_ok(void *obj)
{
    return !((PvrdmaSrq *)obj)->failed;
}

/*
 * One async error of a kind cfg.fault.async_mask allows, if it finds a
 * victim (a kind with nothing to hit injects nothing this time).
 */
static void pvrdma_fault_async(PvrdmaCore *core)
{
    uint32_t kinds[PVRDMA_FAULT_ASYNC_KINDS], n = 0, i, h;
    void *obj;

    for (i = 0; i < PVRDMA_FAULT_ASYNC_KINDS; i++) {
        if (core->cfg.fault.async_mask & (1u << i)) {
            kinds[n++] = i;
        }
    }
    if (!n || core->fatal) {
        return;
    }
    switch (kinds[pvrdma_fault_pick(core, n)]) {
    case PVRDMA_FAULT_ASYNC_CQ_ERR:
        pvrdma_fault_spare_gsi(core);
        obj = pvrdma_fault_choose(core, &core->cq_tbl, pvrdma_fault_cq_ok);
        if (obj) {
            pvrdma_wq_cq_fail(core, obj);
        }
        break;
    case PVRDMA_FAULT_ASYNC_QP_FATAL:
        obj = pvrdma_fault_choose(core, &core->qp_tbl, pvrdma_fault_qp_ok);
        if (obj) {
            pvrdma_core_qp_error(core, obj, PVRDMA_EQE_TYPE_QP_FATAL);
        }
        break;
    case PVRDMA_FAULT_ASYNC_SRQ_ERR:
        obj = pvrdma_fault_choose(core, &core->srq_tbl, pvrdma_fault_srq_ok);
        if (obj) {
            pvrdma_wq_srq_fail(core, obj);
        }
        break;
    default:
        /* Like the others, it waits for a victim: a QP that runs. */
        if (!pvrdma_fault_choose(core, &core->qp_tbl, pvrdma_fault_qp_ok)) {
            obj = NULL;
            break;
        }
        core->fatal = true;
        pvrdma_core_post_async_event(core, PVRDMA_EQE_TYPE_DEVICE_FATAL, 0);
        PVRDMA_TABLE_FOREACH(&core->qp_tbl, h, obj) {
            pvrdma_core_qp_error(core, obj, -1);
        }
        obj = core;
        break;
    }
    if (obj) {
        core->fault_count[PVRDMA_FAULT_COUNT_ASYNC]++;
    }
}

void pvrdma_fault_timer(PvrdmaCore *core)
{
    int64_t now = pvrdma_core_now_ns(core);

    if (core->fault_resp_at >= 0 && core->fault_resp_at <= now) {
        core->fault_resp_at = -1;
        if (pvrdma_core_dma_write(core, core->resp_slot, &core->fault_resp,
                                  core->fault_resp_len) < 0) {
            GERR(core, RESPONSE_SLOT_UNWRITABLE, "response slot unwritable");
        }
        pvrdma_core_raise(core, PVRDMA_VECTOR_RESPONSE);
    }
    if (core->fault_async_at >= 0 && core->fault_async_at <= now) {
        core->fault_async_at = now +
            (int64_t)core->cfg.fault.async_ms * PVRDMA_NS_PER_MS;
        if (core->dsr_loaded) {
            pvrdma_fault_async(core);
        }
    }
}
