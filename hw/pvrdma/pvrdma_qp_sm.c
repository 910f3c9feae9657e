/*
 * PVRDMA QP state machine: which MODIFY_QP transitions are legal and which
 * attributes each one requires or allows (IBA 10.3.1 / Linux
 * ib_modify_qp_is_ok(), restricted to the QP types the device supports:
 * RC, UC, UD, GSI, and XRC_INI and XRC_TGT with PVRDMA_EX_CAP_XRC).
 *
 * Note for GSI: RESET->INIT requires PKEY_INDEX | QKEY and does NOT allow
 * PORT (QP1 is per port), exactly as Linux's table; the MAD layer's own
 * modify (ib_mad.c) sends STATE | PKEY_INDEX | QKEY.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "pvrdma_core_int.h"

enum {
    PVRDMA_SM_RC,
    PVRDMA_SM_UC,
    PVRDMA_SM_UD,               /* UD and GSI share everything but INIT */
    PVRDMA_SM_GSI,
    PVRDMA_SM_XI,               /* XRC_INI */
    PVRDMA_SM_XT,               /* XRC_TGT */
    PVRDMA_SM_NTYPES,
};

typedef struct PvrdmaQpTransition {
    bool valid;
    uint32_t req[PVRDMA_SM_NTYPES];
    uint32_t opt[PVRDMA_SM_NTYPES];
} PvrdmaQpTransition;

#define S(x)    PVRDMA_QP_##x

#define NQPS    (PVRDMA_QPS_ERR + 1)

static const PvrdmaQpTransition pvrdma_qp_sm[NQPS][NQPS] = {
    [PVRDMA_QPS_RESET] = {
        [PVRDMA_QPS_RESET] = { .valid = true },
        [PVRDMA_QPS_ERR] = { .valid = true },
        [PVRDMA_QPS_INIT] = {
            .valid = true,
            .req = {
                [PVRDMA_SM_RC] = S(PKEY_INDEX) | S(PORT) | S(ACCESS_FLAGS),
                [PVRDMA_SM_UC] = S(PKEY_INDEX) | S(PORT) | S(ACCESS_FLAGS),
                [PVRDMA_SM_UD] = S(PKEY_INDEX) | S(PORT) | S(QKEY),
                [PVRDMA_SM_GSI] = S(PKEY_INDEX) | S(QKEY),
                [PVRDMA_SM_XI] = S(PKEY_INDEX) | S(PORT) | S(ACCESS_FLAGS),
                [PVRDMA_SM_XT] = S(PKEY_INDEX) | S(PORT) | S(ACCESS_FLAGS),
            },
        },
    },
    [PVRDMA_QPS_INIT] = {
        [PVRDMA_QPS_RESET] = { .valid = true },
        [PVRDMA_QPS_ERR] = { .valid = true },
        [PVRDMA_QPS_INIT] = {
            .valid = true,
            .opt = {
                [PVRDMA_SM_RC] = S(PKEY_INDEX) | S(PORT) | S(ACCESS_FLAGS),
                [PVRDMA_SM_UC] = S(PKEY_INDEX) | S(PORT) | S(ACCESS_FLAGS),
                [PVRDMA_SM_UD] = S(PKEY_INDEX) | S(PORT) | S(QKEY),
                [PVRDMA_SM_GSI] = S(PKEY_INDEX) | S(QKEY),
                [PVRDMA_SM_XI] = S(PKEY_INDEX) | S(PORT) | S(ACCESS_FLAGS),
                [PVRDMA_SM_XT] = S(PKEY_INDEX) | S(PORT) | S(ACCESS_FLAGS),
            },
        },
        [PVRDMA_QPS_RTR] = {
            .valid = true,
            .req = {
                [PVRDMA_SM_RC] = S(AV) | S(PATH_MTU) | S(DEST_QPN) |
                                 S(RQ_PSN) | S(MAX_DEST_RD_ATOMIC) |
                                 S(MIN_RNR_TIMER),
                [PVRDMA_SM_UC] = S(AV) | S(PATH_MTU) | S(DEST_QPN) |
                                 S(RQ_PSN),
                [PVRDMA_SM_XI] = S(AV) | S(PATH_MTU) | S(DEST_QPN) |
                                 S(RQ_PSN),
                [PVRDMA_SM_XT] = S(AV) | S(PATH_MTU) | S(DEST_QPN) |
                                 S(RQ_PSN) | S(MAX_DEST_RD_ATOMIC) |
                                 S(MIN_RNR_TIMER),
            },
            .opt = {
                [PVRDMA_SM_RC] = S(ALT_PATH) | S(ACCESS_FLAGS) |
                                 S(PKEY_INDEX),
                [PVRDMA_SM_UC] = S(ALT_PATH) | S(ACCESS_FLAGS) |
                                 S(PKEY_INDEX),
                [PVRDMA_SM_XI] = S(ALT_PATH) | S(ACCESS_FLAGS) |
                                 S(PKEY_INDEX),
                [PVRDMA_SM_XT] = S(ALT_PATH) | S(ACCESS_FLAGS) |
                                 S(PKEY_INDEX),
                [PVRDMA_SM_UD] = S(PKEY_INDEX) | S(QKEY),
                [PVRDMA_SM_GSI] = S(PKEY_INDEX) | S(QKEY),
            },
        },
    },
    [PVRDMA_QPS_RTR] = {
        [PVRDMA_QPS_RESET] = { .valid = true },
        [PVRDMA_QPS_ERR] = { .valid = true },
        [PVRDMA_QPS_RTS] = {
            .valid = true,
            .req = {
                [PVRDMA_SM_RC] = S(TIMEOUT) | S(RETRY_CNT) | S(RNR_RETRY) |
                                 S(SQ_PSN) | S(MAX_QP_RD_ATOMIC),
                [PVRDMA_SM_UC] = S(SQ_PSN),
                [PVRDMA_SM_UD] = S(SQ_PSN),
                [PVRDMA_SM_GSI] = S(SQ_PSN),
                [PVRDMA_SM_XI] = S(TIMEOUT) | S(RETRY_CNT) | S(RNR_RETRY) |
                                 S(SQ_PSN) | S(MAX_QP_RD_ATOMIC),
                [PVRDMA_SM_XT] = S(TIMEOUT) | S(SQ_PSN),
            },
            .opt = {
                [PVRDMA_SM_RC] = S(CUR_STATE) | S(ALT_PATH) |
                                 S(ACCESS_FLAGS) | S(MIN_RNR_TIMER) |
                                 S(PATH_MIG_STATE),
                [PVRDMA_SM_UC] = S(CUR_STATE) | S(ALT_PATH) |
                                 S(ACCESS_FLAGS) | S(PATH_MIG_STATE),
                [PVRDMA_SM_XI] = S(CUR_STATE) | S(ALT_PATH) |
                                 S(ACCESS_FLAGS) | S(PATH_MIG_STATE),
                [PVRDMA_SM_XT] = S(CUR_STATE) | S(ALT_PATH) |
                                 S(ACCESS_FLAGS) | S(MIN_RNR_TIMER) |
                                 S(PATH_MIG_STATE),
                [PVRDMA_SM_UD] = S(CUR_STATE) | S(QKEY),
                [PVRDMA_SM_GSI] = S(CUR_STATE) | S(QKEY),
            },
        },
    },
    [PVRDMA_QPS_RTS] = {
        [PVRDMA_QPS_RESET] = { .valid = true },
        [PVRDMA_QPS_ERR] = { .valid = true },
        [PVRDMA_QPS_RTS] = {
            .valid = true,
            .opt = {
                [PVRDMA_SM_RC] = S(CUR_STATE) | S(ACCESS_FLAGS) |
                                 S(ALT_PATH) | S(PATH_MIG_STATE) |
                                 S(MIN_RNR_TIMER),
                [PVRDMA_SM_UC] = S(CUR_STATE) | S(ACCESS_FLAGS) |
                                 S(ALT_PATH) | S(PATH_MIG_STATE),
                [PVRDMA_SM_UD] = S(CUR_STATE) | S(QKEY),
                [PVRDMA_SM_GSI] = S(CUR_STATE) | S(QKEY),
                [PVRDMA_SM_XI] = S(CUR_STATE) | S(ACCESS_FLAGS) |
                                 S(ALT_PATH) | S(PATH_MIG_STATE),
                [PVRDMA_SM_XT] = S(CUR_STATE) | S(ACCESS_FLAGS) |
                                 S(ALT_PATH) | S(PATH_MIG_STATE) |
                                 S(MIN_RNR_TIMER),
            },
        },
        [PVRDMA_QPS_SQD] = {
            .valid = true,
            .opt = {
                [PVRDMA_SM_RC] = S(EN_SQD_ASYNC_NOTIFY),
                [PVRDMA_SM_UC] = S(EN_SQD_ASYNC_NOTIFY),
                [PVRDMA_SM_UD] = S(EN_SQD_ASYNC_NOTIFY),
                [PVRDMA_SM_GSI] = S(EN_SQD_ASYNC_NOTIFY),
                [PVRDMA_SM_XI] = S(EN_SQD_ASYNC_NOTIFY),
                [PVRDMA_SM_XT] = S(EN_SQD_ASYNC_NOTIFY),
            },
        },
    },
    [PVRDMA_QPS_SQD] = {
        [PVRDMA_QPS_RESET] = { .valid = true },
        [PVRDMA_QPS_ERR] = { .valid = true },
        [PVRDMA_QPS_RTS] = {
            .valid = true,
            .opt = {
                [PVRDMA_SM_RC] = S(CUR_STATE) | S(ALT_PATH) |
                                 S(ACCESS_FLAGS) | S(MIN_RNR_TIMER) |
                                 S(PATH_MIG_STATE),
                [PVRDMA_SM_UC] = S(CUR_STATE) | S(ALT_PATH) |
                                 S(ACCESS_FLAGS) | S(PATH_MIG_STATE),
                [PVRDMA_SM_UD] = S(CUR_STATE) | S(QKEY),
                [PVRDMA_SM_GSI] = S(CUR_STATE) | S(QKEY),
                [PVRDMA_SM_XI] = S(CUR_STATE) | S(ALT_PATH) |
                                 S(ACCESS_FLAGS) | S(PATH_MIG_STATE),
                [PVRDMA_SM_XT] = S(CUR_STATE) | S(ALT_PATH) |
                                 S(ACCESS_FLAGS) | S(MIN_RNR_TIMER) |
                                 S(PATH_MIG_STATE),
            },
        },
        [PVRDMA_QPS_SQD] = {
            .valid = true,
            .opt = {
                [PVRDMA_SM_RC] = S(PORT) | S(AV) | S(TIMEOUT) |
                                 S(RETRY_CNT) | S(RNR_RETRY) |
                                 S(MAX_QP_RD_ATOMIC) |
                                 S(MAX_DEST_RD_ATOMIC) | S(ALT_PATH) |
                                 S(ACCESS_FLAGS) | S(PKEY_INDEX) |
                                 S(MIN_RNR_TIMER) | S(PATH_MIG_STATE),
                [PVRDMA_SM_UC] = S(AV) | S(ALT_PATH) | S(ACCESS_FLAGS) |
                                 S(PKEY_INDEX) | S(PATH_MIG_STATE),
                [PVRDMA_SM_UD] = S(PKEY_INDEX) | S(QKEY),
                [PVRDMA_SM_GSI] = S(PKEY_INDEX) | S(QKEY),
                [PVRDMA_SM_XI] = S(PORT) | S(AV) | S(TIMEOUT) |
                                 S(RETRY_CNT) | S(RNR_RETRY) |
                                 S(MAX_QP_RD_ATOMIC) | S(ALT_PATH) |
                                 S(ACCESS_FLAGS) | S(PKEY_INDEX) |
                                 S(PATH_MIG_STATE),
                [PVRDMA_SM_XT] = S(PORT) | S(AV) | S(TIMEOUT) |
                                 S(MAX_DEST_RD_ATOMIC) | S(ALT_PATH) |
                                 S(ACCESS_FLAGS) | S(PKEY_INDEX) |
                                 S(MIN_RNR_TIMER) | S(PATH_MIG_STATE),
            },
        },
    },
    [PVRDMA_QPS_SQE] = {
        [PVRDMA_QPS_RESET] = { .valid = true },
        [PVRDMA_QPS_ERR] = { .valid = true },
        [PVRDMA_QPS_RTS] = {
            .valid = true,
            .opt = {
                /* RC never enters SQE (errors go to ERR): no options. */
                [PVRDMA_SM_UC] = S(CUR_STATE) | S(ACCESS_FLAGS),
                [PVRDMA_SM_UD] = S(CUR_STATE) | S(QKEY),
                [PVRDMA_SM_GSI] = S(CUR_STATE) | S(QKEY),
            },
        },
    },
    [PVRDMA_QPS_ERR] = {
        [PVRDMA_QPS_RESET] = { .valid = true },
        [PVRDMA_QPS_ERR] = { .valid = true },
    },
};

#undef S

static int pvrdma_qp_sm_type(uint8_t type)
{
    switch (type) {
    case PVRDMA_QPT_RC:
        return PVRDMA_SM_RC;
    case PVRDMA_QPT_UC:
        return PVRDMA_SM_UC;
    case PVRDMA_QPT_UD:
        return PVRDMA_SM_UD;
    case PVRDMA_QPT_GSI:
        return PVRDMA_SM_GSI;
    case PVRDMA_QPT_XRC_INI:
        return PVRDMA_SM_XI;
    case PVRDMA_QPT_XRC_TGT:
        return PVRDMA_SM_XT;
    default:
        return -1;
    }
}

uint32_t pvrdma_qp_transition_required(uint32_t cur, uint32_t next,
                                       uint8_t type)
{
    int t = pvrdma_qp_sm_type(type);

    if (cur >= NQPS || next >= NQPS || t < 0) {
        return 0;
    }
    return pvrdma_qp_sm[cur][next].req[t];
}

/*
 * @cur is the QP's state; @next is the requested state (the caller passes
 * @cur when STATE is not in @mask).  Mirrors ib_modify_qp_is_ok().
 */
bool pvrdma_qp_transition_ok(uint32_t cur, uint32_t next, uint8_t type,
                             uint32_t mask)
{
    const PvrdmaQpTransition *tr;
    uint32_t req, opt;
    int t;

    if (cur >= NQPS || next >= NQPS) {
        return false;
    }
    t = pvrdma_qp_sm_type(type);
    if (t < 0) {
        return false;
    }
    if ((mask & PVRDMA_QP_CUR_STATE) &&
        cur != PVRDMA_QPS_RTR && cur != PVRDMA_QPS_RTS &&
        cur != PVRDMA_QPS_SQD && cur != PVRDMA_QPS_SQE) {
        return false;
    }
    tr = &pvrdma_qp_sm[cur][next];
    if (!tr->valid) {
        return false;
    }
    req = tr->req[t];
    opt = tr->opt[t];
    if ((mask & req) != req) {
        return false;
    }
    if (mask & ~(req | opt | PVRDMA_QP_STATE)) {
        return false;
    }
    return true;
}
