/*
 * Fault injection (hw/pvrdma/pvrdma_fault.c, the x-fault-* properties):
 * the property lists, refused commands at a rate and reproducibly, late
 * responses, and async errors with the state changes of the real error
 * paths (CQ overrun, QP fatal, SRQ error, device fatal until reset).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <glib.h>

#include "fake_guest.h"
#include "fake_verbs.h"
#include "pvrdma_core_int.h"

#define MS      1000000ll

static FakeGuest *fault_guest(const PvrdmaFaultConfig *f)
{
    PvrdmaCoreConfig cfg;
    FakeGuest *fg;

    pvrdma_core_default_config(&cfg);
    cfg.fault = *f;
    fg = fg_new(&cfg);
    fg_setup(fg);
    assert_int_equal(fg_bind_gid(fg, 0), 0);
    return fg;
}

/* One tick: exactly the event @type (@info), or none for @type < 0. */
static void tick(FakeGuest *fg, int type, uint32_t info)
{
    uint32_t t, i;

    fg_advance(fg, 10 * MS);
    if (type < 0) {
        assert_false(fv_async_next(fg, &t, &i));
        return;
    }
    assert_true(fv_async_next(fg, &t, &i));
    assert_int_equal(t, type);
    assert_int_equal(i, info);
    assert_false(fv_async_next(fg, &t, &i));
}

/* A QP of @pd and @cq in RTS. */
static uint32_t rts_qp(FakeGuest *fg, uint32_t pd, uint32_t cq)
{
    uint32_t qp, qpn;

    assert_int_equal(fg_create_qp(fg, PVRDMA_QPT_RC, pd, cq, &qp, &qpn), 0);
    assert_int_equal(fg_qp_to_rts(fg, qp, PVRDMA_QPT_RC), 0);
    return qp;
}

static void test_parse(void **state)
{
    uint32_t m;
    char *msg;

    (void)state;
    assert_true(pvrdma_fault_parse_cmds("", &m, &msg));
    assert_true(m & (1u << PVRDMA_CMD_CREATE_QP));
    assert_true(m & (1u << PVRDMA_CMD_QUERY_PORT));
    assert_false(m & (1u << PVRDMA_CMD_DESTROY_QP));
    assert_false(m & (1u << PVRDMA_CMD_DESTROY_BIND));
    assert_true(pvrdma_fault_parse_cmds(NULL, &m, &msg));
    assert_false(m & (1u << PVRDMA_CMD_DESTROY_PD));
    assert_true(pvrdma_fault_parse_cmds("all", &m, &msg));
    assert_int_equal(m, (1u << PVRDMA_CMD_MAX) - 1);
    assert_true(pvrdma_fault_parse_cmds("create_qp,destroy_cq", &m, &msg));
    assert_int_equal(m, (1u << PVRDMA_CMD_CREATE_QP) |
                        (1u << PVRDMA_CMD_DESTROY_CQ));
    assert_false(pvrdma_fault_parse_cmds("create_qp,bogus", &m, &msg));
    assert_non_null(strstr(msg, "'bogus'"));
    assert_non_null(strstr(msg, "modify_mr"));
    g_free(msg);
    assert_false(pvrdma_fault_parse_cmds("create_qp,", &m, &msg));
    g_free(msg);

    assert_true(pvrdma_fault_parse_async("", &m, &msg));
    assert_int_equal(m, PVRDMA_FAULT_DEFAULT_ASYNC);
    assert_false(m & (1u << PVRDMA_FAULT_ASYNC_DEVICE_FATAL));
    assert_true(pvrdma_fault_parse_async("device-fatal,cq-err", &m, &msg));
    assert_int_equal(m, (1u << PVRDMA_FAULT_ASYNC_DEVICE_FATAL) |
                        (1u << PVRDMA_FAULT_ASYNC_CQ_ERR));
    assert_false(pvrdma_fault_parse_async("qp_fatal", &m, &msg));
    assert_non_null(strstr(msg, "qp-fatal"));
    g_free(msg);
}

/* Refusals: only the chosen commands, at about the rate, nothing made. */
static unsigned refusals(uint32_t seed, uint32_t rate, uint8_t *pattern)
{
    PvrdmaFaultConfig f = { .seed = seed, .fail = rate,
                            .fail_errno = EAGAIN,
                            .cmd_mask = 1u << PVRDMA_CMD_CREATE_PD };
    FakeGuest *fg = fault_guest(&f);
    union pvrdma_cmd_resp r;
    unsigned i, failed = 0;
    uint32_t cq;
    int ret;

    for (i = 0; i < 300; i++) {
        struct pvrdma_cmd_create_pd c = { .hdr.cmd = PVRDMA_CMD_CREATE_PD };

        ret = fg_cmd(fg, &c, sizeof(c), &r);
        assert_int_equal(r.hdr.ack, PVRDMA_CMD_ACK(PVRDMA_CMD_CREATE_PD));
        if (ret) {
            assert_int_equal(ret, -EAGAIN);
            assert_int_equal(r.hdr.err, EAGAIN);
            assert_int_equal(r.create_pd_resp.pd_handle, 0);
            failed++;
        } else {
            assert_int_equal(r.hdr.err, 0);
            assert_int_equal(fg_destroy_pd(fg, r.create_pd_resp.pd_handle),
                             0);
        }
        pattern[i] = ret != 0;
        /* Not chosen: never refused. */
        assert_int_equal(fg_create_cq(fg, 0, 16, &cq), 0);
        assert_int_equal(fg_destroy_cq(fg, cq), 0);
    }
    /* Every refused PD left nothing behind: all handles are free. */
    assert_int_equal(fg->core->pd_tbl.count, 0);
    assert_int_equal(fg->core->fault_count[0], failed);
    fg_free(fg);
    return failed;
}

static void test_refuse(void **state)
{
    uint8_t a[300], b[300], c[300];
    unsigned n;

    (void)state;
    n = refusals(7, 3, a);
    /* About one in three of 300 (binomial: 100 +- 8.2). */
    assert_in_range(n, 60, 140);
    /* The same seed, the same choices; another seed, others. */
    assert_int_equal(refusals(7, 3, b), n);
    assert_memory_equal(a, b, sizeof(a));
    refusals(8, 3, c);
    assert_memory_not_equal(a, c, sizeof(a));
    /* Rate 1: every time. */
    assert_int_equal(refusals(1, 1, a), 300);
}

/* A late answer: done at once (ERR), slot and vector 0 only later. */
static void test_late(void **state)
{
    PvrdmaFaultConfig f = { .seed = 1, .late = 1, .late_ms = 5,
                            .cmd_mask = 1u << PVRDMA_CMD_CREATE_PD };
    FakeGuest *fg = fault_guest(&f);
    struct pvrdma_cmd_create_pd c = { .hdr.cmd = PVRDMA_CMD_CREATE_PD };
    struct pvrdma_cmd_resp_hdr *slot = fg_ptr(fg, fg->resp_slot);
    union pvrdma_cmd_resp r;
    unsigned irq = fg->notify[PVRDMA_VECTOR_RESPONSE];
    uint32_t cq;

    (void)state;
    c.hdr.response = 0x1234;
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), 0);
    assert_int_equal(fg->core->pd_tbl.count, 1);
    assert_int_equal(fg->notify[PVRDMA_VECTOR_RESPONSE], irq);
    assert_int_not_equal(slot->ack, PVRDMA_CMD_ACK(PVRDMA_CMD_CREATE_PD));
    fg_advance(fg, 4 * MS);
    assert_int_equal(fg->notify[PVRDMA_VECTOR_RESPONSE], irq);
    fg_advance(fg, 1 * MS);
    assert_int_equal(fg->notify[PVRDMA_VECTOR_RESPONSE], irq + 1);
    assert_int_equal(slot->ack, PVRDMA_CMD_ACK(PVRDMA_CMD_CREATE_PD));
    assert_int_equal(slot->response, 0x1234);
    assert_int_equal(slot->err, 0);

    /* A new request drops a response still held (the guest gave up). */
    assert_int_equal(fg_cmd(fg, &c, sizeof(c), &r), 0);
    assert_int_equal(fg_create_cq(fg, 0, 16, &cq), 0);    /* not chosen */
    assert_int_equal(fg->notify[PVRDMA_VECTOR_RESPONSE], irq + 2);
    fg_advance(fg, 10 * MS);
    assert_int_equal(fg->notify[PVRDMA_VECTOR_RESPONSE], irq + 2);
    assert_int_equal(fg->core->pd_tbl.count, 2);
    assert_int_equal(fg->timer_expire, -1);
    fg_free(fg);
}

/* Async errors: the event, and the object's state as the real path. */
static void test_async(void **state)
{
    PvrdmaFaultConfig f = { .seed = 3, .async_ms = 10,
                            .async_mask = 1u << PVRDMA_FAULT_ASYNC_QP_FATAL };
    FakeGuest *fg = fault_guest(&f);
    struct pvrdma_qp_attr a;
    uint32_t pd, cq, qp, gsi, gsin;
    FvSrq *srq;

    (void)state;
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(fg_create_cq(fg, 0, 64, &cq), 0);
    assert_int_equal(fg_create_qp(fg, PVRDMA_QPT_GSI, pd, cq, &gsi, &gsin),
                     0);
    assert_int_equal(fg_qp_to_rts(fg, gsi, PVRDMA_QPT_GSI), 0);
    /* Only the GSI QP is live: nothing to hit. */
    tick(fg, -1, 0);
    qp = rts_qp(fg, pd, cq);
    tick(fg, PVRDMA_EQE_TYPE_QP_FATAL, qp);
    assert_int_equal(fg_query_qp(fg, qp, &a), 0);
    assert_int_equal(a.qp_state, PVRDMA_QPS_ERR);
    assert_int_equal(fg_query_qp(fg, gsi, &a), 0);
    assert_int_equal(a.qp_state, PVRDMA_QPS_RTS);
    assert_int_equal(fg->core->fault_count[2], 1);
    fg_free(fg);

    /* A CQ overrun: CQ_ERR, its QPs to ERR; an SRQ error the same. */
    f.async_mask = 1u << PVRDMA_FAULT_ASYNC_CQ_ERR;
    fg = fault_guest(&f);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    /* The GSI QP's CQ is spared (a kernel's MAD layer would hang). */
    assert_int_equal(fg_create_cq(fg, 0, 64, &cq), 0);
    assert_int_equal(fg_create_qp(fg, PVRDMA_QPT_GSI, pd, cq, &gsi, &gsin),
                     0);
    tick(fg, -1, 0);
    assert_int_equal(fg_create_cq(fg, 0, 64, &cq), 0);
    qp = rts_qp(fg, pd, cq);
    tick(fg, PVRDMA_EQE_TYPE_CQ_ERR, cq);
    assert_int_equal(fg_query_qp(fg, qp, &a), 0);
    assert_int_equal(a.qp_state, PVRDMA_QPS_ERR);
    /* The one CQ is in error already: nothing more to hit. */
    tick(fg, -1, 0);
    fg_free(fg);

    f.async_mask = 1u << PVRDMA_FAULT_ASYNC_SRQ_ERR;
    fg = fault_guest(&f);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    srq = fv_srq_new(fg, pd, 16, 1, 0);
    tick(fg, PVRDMA_EQE_TYPE_SRQ_ERR, srq->handle);
    g_free(srq);
    fg_free(fg);
}

/* Device fatal: every QP to ERR; only queries and destroys until reset. */
static void test_device_fatal(void **state)
{
    PvrdmaFaultConfig f = { .seed = 1, .async_ms = 10,
                            .async_mask =
                                1u << PVRDMA_FAULT_ASYNC_DEVICE_FATAL };
    FakeGuest *fg = fault_guest(&f);
    struct pvrdma_qp_attr a;
    uint32_t pd, pd2, cq, qp, qpn;

    (void)state;
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(fg_create_cq(fg, 0, 64, &cq), 0);
    assert_int_equal(fg_create_qp(fg, PVRDMA_QPT_RC, pd, cq, &qp, &qpn), 0);
    /* A QP in RESET is no victim: nothing yet. */
    tick(fg, -1, 0);
    assert_int_equal(fg_qp_to_rts(fg, qp, PVRDMA_QPT_RC), 0);
    tick(fg, PVRDMA_EQE_TYPE_DEVICE_FATAL, 0);
    assert_int_equal(fg_query_qp(fg, qp, &a), 0);
    assert_int_equal(a.qp_state, PVRDMA_QPS_ERR);
    assert_int_equal(fg_create_pd(fg, 0, &pd2), -EIO);
    assert_int_equal(fg_modify_qp(fg, qp, PVRDMA_QP_STATE, &a), -EIO);
    /* No second fatal event. */
    tick(fg, -1, 0);
    assert_int_equal(fg_destroy_qp(fg, qp), 0);
    assert_int_equal(fg_destroy_cq(fg, cq), 0);
    assert_int_equal(fg_destroy_pd(fg, pd), 0);
    /* A reset (the driver reloaded) makes it work again. */
    fg_reg_write(fg, PVRDMA_REG_CTL, PVRDMA_DEVICE_CTL_RESET);
    assert_int_equal(fg->timer_expire, -1);
    fg_setup(fg);
    assert_int_equal(fg_create_pd(fg, 0, &pd), 0);
    assert_int_equal(fg->core->fault_count[2], 1);
    fg_free(fg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_refuse),
        cmocka_unit_test(test_late),
        cmocka_unit_test(test_async),
        cmocka_unit_test(test_device_fatal),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
