/*
 * Unit tests of the byte-order conversions (pvrdma_abi_le.c), built with
 * PVRDMA_LE_FORCE_SWAP so that they swap on this little-endian host too,
 * as they would on a big-endian one: every conversion is its own inverse,
 * multi-byte fields (nested ones included) are swapped, bytes are not
 * (nor a CQE's raw immediate data),
 * and the response layout follows the command (CREATE_QP v1 and v2).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <glib.h>

#include "pvrdma_abi_le.h"

static void fill(void *p, size_t n)
{
    uint8_t *b = p;
    size_t i;

    for (i = 0; i < n; i++) {
        b[i] = (uint8_t)(i * 7 + 3);
    }
}

/* Every request and response layout converts back to what it was. */
static void test_involution(void **state)
{
    union pvrdma_cmd_req req, orig;
    union pvrdma_cmd_resp resp, rorig;
    uint32_t cmd;

    (void)state;
    for (cmd = 0; cmd < PVRDMA_CMD_MAX + 2; cmd++) {
        fill(&orig, sizeof(orig));
        orig.hdr.cmd = GUINT32_SWAP_LE_BE(cmd);   /* as the guest wrote it */
        req = orig;
        pvrdma_cmd_req_le(&req, true);
        assert_int_equal(req.hdr.cmd, cmd);
        pvrdma_cmd_req_le(&req, false);
        assert_memory_equal(&req, &orig, sizeof(req));

        fill(&rorig, sizeof(rorig));
        resp = rorig;
        pvrdma_cmd_resp_le(&resp, cmd, sizeof(resp));
        pvrdma_cmd_resp_le(&resp, cmd, sizeof(resp));
        assert_memory_equal(&resp, &rorig, sizeof(resp));
    }
}

/* Fields at every nesting level are swapped; byte fields are not. */
static void test_request_fields(void **state)
{
    union pvrdma_cmd_req req, w;
    struct pvrdma_cmd_modify_qp *m = &req.modify_qp;
    struct pvrdma_cmd_create_qp *c = &req.create_qp;

    (void)state;
    fill(&w, sizeof(w));
    w.hdr.cmd = GUINT32_SWAP_LE_BE(PVRDMA_CMD_CREATE_QP);
    req = w;
    pvrdma_cmd_req_le(&req, true);
    assert_int_equal(c->hdr.response, GUINT64_SWAP_LE_BE(w.hdr.response));
    assert_int_equal(c->pdir_dma, GUINT64_SWAP_LE_BE(w.create_qp.pdir_dma));
    assert_int_equal(c->pd_handle,
                     GUINT32_SWAP_LE_BE(w.create_qp.pd_handle));
    assert_int_equal(c->access_flags,
                     GUINT32_SWAP_LE_BE(w.create_qp.access_flags));
    assert_int_equal(c->total_chunks,
                     GUINT16_SWAP_LE_BE(w.create_qp.total_chunks));
    assert_int_equal(c->max_atomic_arg,
                     GUINT16_SWAP_LE_BE(w.create_qp.max_atomic_arg));
    assert_int_equal(c->qp_type, w.create_qp.qp_type);
    assert_memory_equal(c->reserved, w.create_qp.reserved,
                        sizeof(c->reserved));

    fill(&w, sizeof(w));
    w.hdr.cmd = GUINT32_SWAP_LE_BE(PVRDMA_CMD_MODIFY_QP);
    req = w;
    pvrdma_cmd_req_le(&req, true);
    assert_int_equal(m->attr_mask, GUINT32_SWAP_LE_BE(w.modify_qp.attr_mask));
    assert_int_equal(m->attrs.dest_qp_num,
                     GUINT32_SWAP_LE_BE(w.modify_qp.attrs.dest_qp_num));
    assert_int_equal(m->attrs.pkey_index,
                     GUINT16_SWAP_LE_BE(w.modify_qp.attrs.pkey_index));
    assert_int_equal(m->attrs.cap.max_inline_data,
                     GUINT32_SWAP_LE_BE(w.modify_qp.attrs.cap.max_inline_data));
    assert_int_equal(m->attrs.ah_attr.dlid,
                     GUINT16_SWAP_LE_BE(w.modify_qp.attrs.ah_attr.dlid));
    assert_int_equal(m->attrs.ah_attr.grh.flow_label,
                     GUINT32_SWAP_LE_BE(
                         w.modify_qp.attrs.ah_attr.grh.flow_label));
    assert_int_equal(m->attrs.alt_ah_attr.vlan_id,
                     GUINT16_SWAP_LE_BE(w.modify_qp.attrs.alt_ah_attr.vlan_id));
    assert_memory_equal(m->attrs.ah_attr.grh.dgid,
                        w.modify_qp.attrs.ah_attr.grh.dgid, 16);
    assert_int_equal(m->attrs.rnr_retry, w.modify_qp.attrs.rnr_retry);

    /* MODIFY_SRQ: the extended layout's ring (PVRDMA_EX_CAP_RESIZE_SRQ) */
    fill(&w, sizeof(w));
    w.hdr.cmd = GUINT32_SWAP_LE_BE(PVRDMA_CMD_MODIFY_SRQ);
    req = w;
    pvrdma_cmd_req_le(&req, true);
    assert_int_equal(req.modify_srq_ex.attrs.max_wr,
                     GUINT32_SWAP_LE_BE(w.modify_srq_ex.attrs.max_wr));
    assert_int_equal(req.modify_srq_ex.pdir_dma,
                     GUINT64_SWAP_LE_BE(w.modify_srq_ex.pdir_dma));
    assert_int_equal(req.modify_srq_ex.nchunks,
                     GUINT32_SWAP_LE_BE(w.modify_srq_ex.nchunks));
    assert_memory_equal(req.modify_srq_ex.reserved, w.modify_srq_ex.reserved,
                        sizeof(req.modify_srq_ex.reserved));

    /* CREATE_UC: the pfn union converts as the 64-bit pfn */
    fill(&w, sizeof(w));
    w.hdr.cmd = GUINT32_SWAP_LE_BE(PVRDMA_CMD_CREATE_UC);
    req = w;
    pvrdma_cmd_req_le(&req, true);
    assert_int_equal(req.create_uc.pfn64,
                     GUINT64_SWAP_LE_BE(w.create_uc.pfn64));

    /* An unknown command: only the header has a layout. */
    fill(&w, sizeof(w));
    w.hdr.cmd = GUINT32_SWAP_LE_BE(PVRDMA_CMD_MAX + 5);
    req = w;
    pvrdma_cmd_req_le(&req, true);
    assert_int_equal(req.hdr.reserved, GUINT32_SWAP_LE_BE(w.hdr.reserved));
    assert_memory_equal((uint8_t *)&req + sizeof(req.hdr),
                        (uint8_t *)&w + sizeof(w.hdr),
                        sizeof(req) - sizeof(req.hdr));
}

static void test_response_fields(void **state)
{
    union pvrdma_cmd_resp r, w;
    struct pvrdma_device_caps caps, wc;
    struct pvrdma_cqe cqe, wq;

    (void)state;
    fill(&w, sizeof(w));
    r = w;
    pvrdma_cmd_resp_le(&r, PVRDMA_CMD_QUERY_PORT, sizeof(r));
    assert_int_equal(r.hdr.ack, GUINT32_SWAP_LE_BE(w.hdr.ack));
    assert_int_equal(r.hdr.err, w.hdr.err);
    assert_int_equal(r.query_port_resp.attrs.gid_tbl_len,
                     GUINT32_SWAP_LE_BE(w.query_port_resp.attrs.gid_tbl_len));
    assert_int_equal(r.query_port_resp.attrs.max_mtu,
                     GUINT32_SWAP_LE_BE(w.query_port_resp.attrs.max_mtu));

    /* CREATE_QP: v2 (QP handle and QPN) or v1 by the response length */
    r = w;
    pvrdma_cmd_resp_le(&r, PVRDMA_CMD_CREATE_QP,
                       sizeof(struct pvrdma_cmd_create_qp_resp_v2));
    assert_int_equal(r.create_qp_resp_v2.qp_handle,
                     GUINT32_SWAP_LE_BE(w.create_qp_resp_v2.qp_handle));
    r = w;
    pvrdma_cmd_resp_le(&r, PVRDMA_CMD_CREATE_QP,
                       sizeof(struct pvrdma_cmd_create_qp_resp));
    assert_int_equal(r.create_qp_resp.max_inline_data,
                     GUINT32_SWAP_LE_BE(w.create_qp_resp.max_inline_data));

    fill(&wq, sizeof(wq));
    cqe = wq;
    pvrdma_cqe_le(&cqe);
    assert_int_equal(cqe.wr_id, GUINT64_SWAP_LE_BE(wq.wr_id));
    assert_int_equal(cqe.byte_len, GUINT32_SWAP_LE_BE(wq.byte_len));
    assert_int_equal(cqe.slid, GUINT16_SWAP_LE_BE(wq.slid));
    assert_int_equal(cqe.imm_data, wq.imm_data);     /* raw bytes */
    assert_int_equal(cqe.network_hdr_type, wq.network_hdr_type);
    pvrdma_cqe_le(&cqe);
    assert_memory_equal(&cqe, &wq, sizeof(cqe));

    fill(&wc, sizeof(wc));
    caps = wc;
    pvrdma_device_caps_le(&caps);
    assert_int_equal(caps.max_qp, GUINT32_SWAP_LE_BE(wc.max_qp));
    assert_int_equal(caps.node_guid, GUINT64_SWAP_LE_BE(wc.node_guid));
    assert_int_equal(caps.max_pkeys, GUINT16_SWAP_LE_BE(wc.max_pkeys));
    pvrdma_device_caps_le(&caps);
    assert_memory_equal(&caps, &wc, sizeof(caps));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_involution),
        cmocka_unit_test(test_request_fields),
        cmocka_unit_test(test_response_fields),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
