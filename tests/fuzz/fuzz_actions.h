/*
 * Input format of the PVRDMA core fuzzer (fuzz_core.c), shared with the
 * seed generator (gen_seeds.c).
 *
 * An input is one configuration byte followed by a sequence of actions.
 * Each action is one opcode byte (taken modulo FZ_OP_COUNT) followed by
 * the fields listed below, read in order.  Multi-byte fields are little
 * endian.  A field cut off by the end of the input reads as zero, so any
 * byte string is a valid input.
 *
 * "dev" bytes select the device: bit 0 = device 0 or 1 (device 0 when
 * only one exists).  "sel" bytes pick a tracked object of the harness
 * (handles the device returned for earlier successful creates):
 * sel < 0xF0 -> tracked[sel % count]; otherwise the next u32 field is a
 * raw handle.  Numbers in brackets are field sizes in bytes.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef TESTS_FUZZ_FUZZ_ACTIONS_H
#define TESTS_FUZZ_FUZZ_ACTIONS_H

/* Configuration byte. */
#define FZ_CFG_TWO_DEVICES      0x01    /* a second core shares the RAM */
#define FZ_CFG_TINY0            0x02    /* device 0: tiny object quotas */
#define FZ_CFG_TINY1            0x04    /* device 1: tiny object quotas */
#define FZ_CFG_MINIMAL1         0x08    /* device 1: no dma_map, no timer */
#define FZ_CFG_NO_UAR_BASE      0x10    /* glue does not know BAR2 */

#define FZ_SEL_RAW              0xF0

enum {
    /* dev[1] off[2] val[4]: BAR1 write at any offset. */
    FZ_OP_REG_WRITE,
    /* dev[1] off[2]: BAR1 read (ICR is read-to-clear). */
    FZ_OP_REG_READ,
    /* where[1] ... len[1] bytes[len % 65]: raw guest memory write.
     * where: 0 DSR, 1 cmd slot, 2 object page (dev kind sel page[1]),
     * 3 anywhere in the used RAM (u32), 4 device ring page (dev ring[1]
     * page[1]); then off[2] inside that page / area. */
    FZ_OP_MEM_WRITE,
    /* dev[1] ring[1] sel mode[1] val[4]: set a ring index in guest memory.
     * ring: 0 SQ prod, 1 RQ prod, 2 SQ cons, 3 CQ cons, 4 CQ prod,
     * 5 SRQ prod, 6 async cons, 7 CQ-notify cons.  mode bit 0: val is
     * added to the current index modulo 2N, else written raw. */
    FZ_OP_RING_INDEX,
    /* dev[1] ver[1] async_np[1] cq_np[1] flags[1]: build a DSR like Linux
     * and load it (np < 0xC0: 2..9 pages, < 0xE0: 120..151, else raw).
     * flags: bit 0 IMR=0 + ACTIVATE, bit 1 corrupt one
     * field (then off[1] val[4]). */
    FZ_OP_LOAD_DSR,
    /* dev[1] cmd[1] bytes[184]: raw command in the slot, REQUEST. */
    FZ_OP_CMD_RAW,
    /* dev[1] uar[1] npatch[1] {off[1] val[4]}*: CREATE_UC. */
    FZ_OP_CREATE_UC,
    /* dev[1] ctx-sel npatch {..}: CREATE_PD (ctx sel 0xEF = kernel). */
    FZ_OP_CREATE_PD,
    /* dev[1] ctx-sel log2cqe[1] dpages[1] npatch {..}: CREATE_CQ.
     * dpages: page count delta (% 4, signed); bit 6 set: one PDIR entry
     * (bits 0-4) points outside RAM (bit 5: at the last RAM page). */
    FZ_OP_CREATE_CQ,
    /* dev[1] kind[1] pd-sel access[1] va[8] len[2] npages_delta[1] npatch
     * {..}: CREATE_MR; kind 0 user, 1 DMA, 2 FRMR (len = max_sg).
     * npages_delta as dpages of CREATE_CQ (delta % 3). */
    FZ_OP_CREATE_MR,
    /* dev[1] type[1] pd-sel scq-sel rcq-sel srq-sel(0xEF none) log2wr[1]
     * sge[1] sig_all[1] npatch {..}: CREATE_QP.  sig_all: bit 0
     * sq_sig_all; bit 7 set: PDIR entry (bits 1-5) outside RAM (bit 6: at
     * the last RAM page). */
    FZ_OP_CREATE_QP,
    /* dev[1] pd-sel log2wr[1] sge[1] limit[1] npatch {..}: CREATE_SRQ. */
    FZ_OP_CREATE_SRQ,
    /* deva[1] qp-sel devb[1] qp-sel access[1] rnr_timer[1] rnr_retry[1]
     * retry[1] mtu[1]: RESET->INIT->RTR->RTS towards the peer QP. */
    FZ_OP_CONNECT,
    /* dev[1] qp-sel mask[4] state[1] npatch {off[1] val[4]}*: MODIFY_QP
     * with fuzzer attributes (patches apply to the 160-byte attr).  mask
     * bit 31 set: raw mask; else the driver's mask for the target state,
     * bit 5 drops STATE, bit 6 adds bit (mask % 21). */
    FZ_OP_MODIFY_QP,
    /* dev[1] which[1] sel mask[4] val[4]: QUERY_PORT/PKEY/QP/SRQ,
     * MODIFY_SRQ (mask bits 0 and 2: MAX_WR with a new ring, mask's
     * bits 8-23 its size, 16-23 a page count delta, 24-31 poison),
     * RESIZE_CQ (val as that). */
    FZ_OP_QUERY,
    /* dev[1] kind[1] sel: DESTROY_UC/PD/MR/CQ/QP/SRQ/BIND. */
    FZ_OP_DESTROY,
    /* dev[1] index[1] type[1]: CREATE_BIND of the test GID. */
    FZ_OP_BIND_GID,
    /* dev[1] qp-sel op[1] flags[1] nsge[1] {mr-sel off[2] len[2]}* rdev[1]
     * rmr-sel roff[2] a[8] b[8] imm[4] ring[1]: post one send WQE.  An
     * SGE off >= 0xFF00 addresses the last bytes of the MR (DMA MR: of
     * RAM).  SEND: the rkey (a raw rmr-sel) or a QP of rdev is the UD
     * remote QPN, imm the Q_Key, a and b the address vector
     * (fz_post_send). */
    FZ_OP_POST_SEND,
    /* dev[1] qp-sel nsge[1] {mr-sel off[2] len[2]}* ring[1]: receive. */
    FZ_OP_POST_RECV,
    /* dev[1] srq-sel nsge[1] {mr-sel off[2] len[2]}* ring[1]. */
    FZ_OP_POST_SRQ_RECV,
    /* dev[1] page[1] off[1] flags[1] sel: doorbell; off 0 QP, 1 CQ,
     * 2 SRQ, other = raw offset byte. */
    FZ_OP_DOORBELL,
    /* dev[1] scale[1]: advance the clock by 1 << (scale % 40) ns. */
    FZ_OP_TIMER,
    /* dev[1] how[1]: 0 pvrdma_core_reset, 1 CTL RESET, 2 free + new. */
    FZ_OP_RESET,
    /* dev[1] type[4] info[4]: pvrdma_core_post_async_event. */
    FZ_OP_ASYNC_EVENT,
    /* dev[1] what[1] val[4]: fake glue knobs (short maps, refused maps,
     * an MMIO window, a read-only page, UAR base). */
    FZ_OP_GLUE,
    /* dev[1] what[1]: the guest consumes CQs / async / CQ-notify rings. */
    FZ_OP_CONSUME,
    FZ_OP_COUNT
};

/* Kinds for FZ_OP_DESTROY and object-page selection. */
enum {
    FZ_KIND_UC, FZ_KIND_PD, FZ_KIND_MR, FZ_KIND_CQ, FZ_KIND_QP, FZ_KIND_SRQ,
    FZ_KIND_BIND, FZ_KIND_COUNT
};

#define FZ_SEL_KERNEL           0xEF    /* ctx 0 / no SRQ */

#endif /* TESTS_FUZZ_FUZZ_ACTIONS_H */
