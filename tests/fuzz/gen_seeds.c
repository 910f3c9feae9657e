/*
 * Seed corpus of the PVRDMA core fuzzer: action sequences (format in
 * fuzz_actions.h) that set two devices (or one) up like the Linux driver,
 * connect RC QPs and run SEND, RDMA WRITE/READ, atomics, SRQ receives,
 * fast registration and invalidation, memory windows, RNR with the timer,
 * the error flush and user-context doorbells, so coverage starts deep.
 *
 *   gen_seeds DIR      writes DIR/seed-<name>
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_actions.h"

#define SEL_KERNEL  FZ_SEL_KERNEL
#define VA_A        0x7f0000000800ull
#define VA_B        0x7e0000000100ull
#define ALL_ACCESS  0x0F
/* enum pvrdma_qp_state values (spec §5.4) */
#define PVRDMA_QPS_INIT_SEED    1
#define PVRDMA_QPS_RTR_SEED     2

static uint8_t buf[16384];
static size_t len;
static const char *outdir;

static void u8(unsigned v)
{
    if (len < sizeof(buf)) {
        buf[len++] = (uint8_t)v;
    }
}

static void u16(unsigned v)
{
    u8(v);
    u8(v >> 8);
}

static void u32(uint32_t v)
{
    u16(v);
    u16(v >> 16);
}

static void u64(uint64_t v)
{
    u32((uint32_t)v);
    u32((uint32_t)(v >> 32));
}

static void begin(unsigned cfg)
{
    len = 0;
    u8(cfg);
}

static void finish(const char *name)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/seed-%s", outdir, name);
    f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* Linux-like DSR (version 20, 4 + 4 ring pages), IMR = 0, ACTIVATE. */
static void load_dsr(unsigned dev)
{
    u8(FZ_OP_LOAD_DSR); u8(dev); u8(3); u8(2); u8(2); u8(1);
}

static void bind_gid(unsigned dev, unsigned index)
{
    u8(FZ_OP_BIND_GID); u8(dev); u8(index); u8(2);
}

static void create_uc(unsigned dev, unsigned uar)
{
    u8(FZ_OP_CREATE_UC); u8(dev); u8(uar); u8(0);
}

static void create_pd(unsigned dev, unsigned ctx_sel)
{
    u8(FZ_OP_CREATE_PD); u8(dev); u8(ctx_sel); u8(0);
}

static void create_cq(unsigned dev, unsigned ctx_sel, unsigned log2cqe)
{
    u8(FZ_OP_CREATE_CQ); u8(dev); u8(ctx_sel); u8(log2cqe); u8(0); u8(0);
}

static void create_user_mr(unsigned dev, unsigned pd, uint64_t va,
                           unsigned length)
{
    u8(FZ_OP_CREATE_MR); u8(dev); u8(0); u8(pd); u8(ALL_ACCESS);
    u64(va); u16(length); u8(0); u8(0);
}

/* A user MR windows may be bound to (ALL_ACCESS | MW_BIND). */
static void create_bindable_mr(unsigned dev, unsigned pd, uint64_t va,
                               unsigned length)
{
    u8(FZ_OP_CREATE_MR); u8(dev); u8(0); u8(pd); u8(ALL_ACCESS | 0x10);
    u64(va); u16(length); u8(0); u8(0);
}

static void create_mw(unsigned dev, unsigned pd, unsigned type)
{
    u8(FZ_OP_CREATE_MR); u8(dev); u8(type == 2 ? 0xF1 : 0xF0); u8(pd);
    u8(0); u64(0); u16(0); u8(0); u8(0);
}

static void create_frmr(unsigned dev, unsigned pd, unsigned max_sg)
{
    u8(FZ_OP_CREATE_MR); u8(dev); u8(2); u8(pd); u8(0);
    u64(0); u16(max_sg); u8(0); u8(0);
}

static void create_dma_mr(unsigned dev, unsigned pd)
{
    u8(FZ_OP_CREATE_MR); u8(dev); u8(1); u8(pd); u8(1);
    u64(0); u16(0); u8(0); u8(0);
}

/* RC QP, 16 WRs, 4 SGEs, on CQ @cq, optional SRQ selector. */
static void create_qp(unsigned dev, unsigned pd, unsigned cq, unsigned srq)
{
    u8(FZ_OP_CREATE_QP); u8(dev); u8(0); u8(pd); u8(cq); u8(cq); u8(srq);
    u8(4); u8(3); u8(0); u8(0);
}

static void create_srq(unsigned dev, unsigned pd, unsigned limit)
{
    u8(FZ_OP_CREATE_SRQ); u8(dev); u8(pd); u8(4); u8(1); u8(limit); u8(0);
}

static void connect_qp(unsigned da, unsigned qa, unsigned db, unsigned qb,
                       unsigned rnr_timer, unsigned rnr_retry)
{
    u8(FZ_OP_CONNECT); u8(da); u8(qa); u8(db); u8(qb);
    u8(ALL_ACCESS); u8(rnr_timer); u8(rnr_retry); u8(7); u8(2);
}

static void post_recv(unsigned dev, unsigned qp, unsigned mr, unsigned off,
                      unsigned length)
{
    u8(FZ_OP_POST_RECV); u8(dev); u8(qp); u8(1);
    u8(mr); u16(off); u16(length);
    u8(1);
}

static void post_srq_recv(unsigned dev, unsigned srq, unsigned mr,
                          unsigned off, unsigned length)
{
    u8(FZ_OP_POST_SRQ_RECV); u8(dev); u8(srq); u8(1);
    u8(mr); u16(off); u16(length);
    u8(1);
}

/* Device 0: a QP 0 receiving from an SRQ (limit 2) with three receives
 * posted, connected to a QP 1 without one. */
static void srq_pair_with_receives(void)
{
    load_dsr(0);
    bind_gid(0, 0);
    create_pd(0, SEL_KERNEL);
    create_cq(0, SEL_KERNEL, 6);
    create_user_mr(0, 0, VA_A, 4 * 4096);
    create_srq(0, 0, 2);
    create_qp(0, 0, 0, 0);
    create_qp(0, 0, 0, SEL_KERNEL);
    connect_qp(0, 0, 0, 1, 1, 7);
    connect_qp(0, 1, 0, 0, 1, 7);
    post_srq_recv(0, 0, 0, 0, 512);
    post_srq_recv(0, 0, 0, 512, 512);
    post_srq_recv(0, 0, 0, 1024, 512);
}

static void post_send(unsigned dev, unsigned qp, unsigned op, unsigned mr,
                      unsigned off, unsigned length, unsigned rdev,
                      unsigned rmr, unsigned roff, uint64_t a, uint64_t b,
                      uint32_t imm)
{
    u8(FZ_OP_POST_SEND); u8(dev); u8(qp); u8(op); u8(2 /* SIGNALED */);
    if (length) {
        u8(1);
        u8(mr); u16(off); u16(length);
    } else {
        u8(0);
    }
    u8(rdev); u8(rmr); u16(roff); u64(a); u64(b); u32(imm);
    u8(1);
}

static void consume(unsigned dev)
{
    u8(FZ_OP_CONSUME); u8(dev); u8(0xF);
}

static void arm_cq(unsigned dev, unsigned cq)
{
    u8(FZ_OP_DOORBELL); u8(dev); u8(0); u8(1); u8(0x40); u8(cq);
}

static void poll_cq(unsigned dev, unsigned cq)
{
    u8(FZ_OP_DOORBELL); u8(dev); u8(0); u8(1); u8(0x80); u8(cq);
}

static void timer(unsigned dev, unsigned scale)
{
    u8(FZ_OP_TIMER); u8(dev); u8(scale);
}

/* Two devices (or one: db == da), PD, CQ, user MR, RC QP each, connected. */
static void pair(unsigned da, unsigned db, unsigned rnr_retry)
{
    load_dsr(da);
    bind_gid(da, 0);
    create_pd(da, SEL_KERNEL);
    create_cq(da, SEL_KERNEL, 6);
    create_user_mr(da, 0, VA_A, 5 * 4096);
    create_qp(da, 0, 0, SEL_KERNEL);
    if (db != da) {
        load_dsr(db);
        bind_gid(db, 0);
        create_pd(db, SEL_KERNEL);
        create_cq(db, SEL_KERNEL, 6);
        create_user_mr(db, 0, VA_B, 5 * 4096);
        create_qp(db, 0, 0, SEL_KERNEL);
        connect_qp(da, 0, db, 0, 1, rnr_retry);
        connect_qp(db, 0, da, 0, 1, rnr_retry);
    } else {
        create_user_mr(da, 0, VA_B, 5 * 4096);
        create_qp(da, 0, 0, SEL_KERNEL);
        connect_qp(da, 0, da, 1, 1, rnr_retry);
        connect_qp(da, 1, da, 0, 1, rnr_retry);
    }
}

static void all_opcodes(unsigned da, unsigned qa, unsigned db, unsigned qb,
                        unsigned rmr)
{
    arm_cq(da, 0);
    arm_cq(db, 0);
    post_recv(db, qb, rmr, 0x40, 4096);
    post_send(da, qa, 2 /* SEND */, 0, 0x10, 300, db, rmr, 0, 0, 0, 0);
    post_send(da, qa, 0 /* WRITE */, 0, 0x100, 2000, db, rmr, 0x300, 0, 0,
              0);
    post_recv(db, qb, rmr, 0x40, 64);
    post_send(da, qa, 1 /* WRITE_IMM */, 0, 0x100, 64, db, rmr, 0x1000, 0,
              0, 0x12345678);
    post_send(da, qa, 4 /* READ */, 0, 0x2000, 5000, db, rmr, 0x10, 0, 0,
              0);
    post_send(da, qa, 5 /* CAS */, 0, 0x3000, 8, db, rmr, 0x700, 0,
              0xabcdef, 0);
    post_send(da, qa, 6 /* FAA */, 0, 0x3008, 8, db, rmr, 0x700, 5, 0, 0);
    /* 0xE0: ATOMIC_WRITE (fuzz_core's opcode byte), no SGE. */
    post_send(da, qa, 0xE0, 0, 0, 0, db, rmr, 0x708, 0, 0x1122334455667788,
              0);
    post_recv(db, qb, rmr, 0, 16);
    post_send(da, qa, 3 /* SEND_IMM */, 0, 0, 16, db, rmr, 0, 0, 0, 7);
    poll_cq(da, 0);
    consume(da);
    consume(db);
}

/* One device, a UD QP 0 through RTS (Q_Key 0x11111111), an 8 KiB MR. */
static void ud_self(void)
{
    begin(0);
    load_dsr(0);
    bind_gid(0, 0);
    create_pd(0, SEL_KERNEL);
    create_cq(0, SEL_KERNEL, 4);
    create_user_mr(0, 0, VA_A, 8192);
    u8(FZ_OP_CREATE_QP); u8(0); u8(0xC0); u8(0); u8(0); u8(0);
    u8(SEL_KERNEL); u8(3); u8(0); u8(1); u8(0);
    connect_qp(0, 0, 0, 0, 0, 0);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    outdir = argv[1];

    /* Two devices: every RC opcode from device 0 to device 1 and back. */
    begin(FZ_CFG_TWO_DEVICES);
    pair(0, 1, 7);
    all_opcodes(0, 0, 1, 0, 0);
    all_opcodes(1, 0, 0, 0, 0);
    finish("two-devices-rc");

    /* One device, loopback between two QPs. */
    begin(0);
    pair(0, 0, 7);
    all_opcodes(0, 0, 0, 1, 1);
    finish("loopback-rc");

    /* SRQ: two QPs on one SRQ, receives from the SRQ, limit event. */
    begin(0);
    srq_pair_with_receives();
    post_send(0, 1, 2, 0, 0x2000, 100, 0, 0, 0, 0, 0, 0);
    post_send(0, 1, 3, 0, 0x2000, 100, 0, 0, 0, 0, 0, 9);
    consume(0);
    finish("srq");

    /* The same SRQ resized with receives waiting, then used on. */
    begin(0);
    srq_pair_with_receives();
    post_send(0, 1, 2, 0, 0x2000, 100, 0, 0, 0, 0, 0, 0);
    /* MODIFY_SRQ, MAX_WR with a ring of 1 << 6 WQEs (mask bits 0, 2) */
    u8(FZ_OP_QUERY); u8(0); u8(4); u8(0); u32(0x605); u32(0);
    post_srq_recv(0, 0, 0, 1536, 512);
    post_send(0, 1, 2, 0, 0x2000, 100, 0, 0, 0, 0, 0, 0);
    post_send(0, 1, 3, 0, 0x2000, 100, 0, 0, 0, 0, 0, 9);
    consume(0);
    finish("srq-resize");

    /* Fast registration, RDMA into the FRMR, invalidation. */
    begin(FZ_CFG_TWO_DEVICES);
    pair(0, 1, 7);
    create_frmr(0, 0, 8);       /* tracked MR index 1 on device 0 */
    post_send(0, 0, 11 /* FAST_REG_MR */, 0, 0, 0, 0, 1, 0,
              0x5000000, (2ull << 32) | 8192, 0x000F0001);
    post_send(1, 0, 0 /* WRITE */, 0, 0, 1000, 0, 1, 0x10, 0, 0, 0);
    post_send(1, 0, 4 /* READ */, 0, 0x1000, 1000, 0, 1, 0x10, 0, 0, 0);
    post_recv(0, 0, 0, 0, 64);
    post_send(1, 0, 8 /* SEND_WITH_INV */, 0, 0, 16, 0, 1, 0, 0, 0, 0);
    post_send(0, 0, 10 /* LOCAL_INV */, 0, 0, 0, 0, 1, 0, 0, 0, 0);
    consume(0);
    consume(1);
    finish("frmr");

    /*
     * Memory windows on device 0 (MR 1, windows 2 and 3): type 1 bound
     * for WRITE and READ from device 1, type 2 zero-based, invalidated by
     * a SEND_WITH_INV.
     */
    begin(FZ_CFG_TWO_DEVICES);
    pair(0, 1, 7);
    create_bindable_mr(0, 0, 0x7d0000000000ull, 4 * 4096);
    create_mw(0, 0, 1);
    create_mw(0, 0, 2);
    post_send(0, 0, 14 /* BIND_MW */, 1, 0, 8, 0, 2, 0, 0, 8192,
              (0x06u << 16) | 0x11);
    post_send(1, 0, 0 /* WRITE */, 0, 0, 1000, 0, 2, 0x10, 0, 0, 0);
    post_send(1, 0, 4 /* READ */, 0, 0x1000, 1000, 0, 2, 0x10, 0, 0, 0);
    post_send(0, 0, 14 /* BIND_MW */, 1, 0x100, 8, 0, 3, 0, 0, 4096,
              (0x26u << 16) | 0x22);
    post_send(1, 0, 0 /* WRITE */, 0, 0, 100, 0, 3, 0x10, 0, 0, 0);
    post_recv(0, 0, 0, 0, 64);
    post_send(1, 0, 8 /* SEND_WITH_INV */, 0, 0, 16, 0, 3, 0, 0, 0, 0);
    consume(0);
    consume(1);
    finish("mw");

    /* RNR: a SEND with no receive posted, the timer, then a receive. */
    begin(FZ_CFG_TWO_DEVICES);
    pair(0, 1, 3);
    post_send(0, 0, 2, 0, 0, 100, 1, 0, 0, 0, 0, 0);
    timer(0, 14);
    timer(0, 20);
    post_recv(1, 0, 0, 0, 4096);
    timer(0, 30);
    post_send(0, 0, 2, 0, 0, 100, 1, 0, 0, 0, 0, 0);
    timer(0, 39);
    timer(0, 39);
    consume(0);
    consume(1);
    finish("rnr-timer");

    /* Error flush: QP to ERR with outstanding WQEs, then destroy all. */
    begin(0);
    pair(0, 0, 7);
    post_recv(0, 1, 1, 0, 64);
    post_recv(0, 1, 1, 64, 64);
    u8(FZ_OP_MODIFY_QP); u8(0); u8(1); u32(1); u8(6); u8(0);
    post_send(0, 1, 2, 1, 0, 10, 0, 0, 0, 0, 0, 0);
    consume(0);
    u8(FZ_OP_DESTROY); u8(0); u8(FZ_KIND_QP); u8(0);
    u8(FZ_OP_DESTROY); u8(0); u8(FZ_KIND_QP); u8(0);
    u8(FZ_OP_DESTROY); u8(0); u8(FZ_KIND_MR); u8(0);
    u8(FZ_OP_DESTROY); u8(0); u8(FZ_KIND_CQ); u8(0);
    u8(FZ_OP_DESTROY); u8(0); u8(FZ_KIND_PD); u8(0);
    finish("error-flush");

    /* User context: objects on UAR page 1, doorbells there. */
    begin(FZ_CFG_TWO_DEVICES | FZ_CFG_TINY1);
    load_dsr(0);
    bind_gid(0, 0);
    create_uc(0, 1);
    create_pd(0, 0);
    create_cq(0, 0, 5);
    create_user_mr(0, 0, VA_A, 8192);
    create_dma_mr(0, 0);
    create_qp(0, 0, 0, SEL_KERNEL);
    create_qp(0, 0, 0, SEL_KERNEL);
    connect_qp(0, 0, 0, 1, 0, 7);
    connect_qp(0, 1, 0, 0, 0, 7);
    post_recv(0, 1, 1, 0x10, 200);
    post_send(0, 0, 2, 0, 0, 200, 0, 0, 0, 0, 0, 0);
    u8(FZ_OP_DOORBELL); u8(0); u8(0x80); u8(1); u8(0x20); u8(0);
    u8(FZ_OP_QUERY); u8(0); u8(2); u8(0); u32(0x1fffff); u32(0);
    u8(FZ_OP_QUERY); u8(0); u8(0); u8(0); u32(0); u32(1);
    load_dsr(1);
    u8(FZ_OP_RESET); u8(0); u8(2);
    finish("user-context");

    /* Responder only in RTR: COMM_EST on its first message. */
    begin(0);
    load_dsr(0);
    bind_gid(0, 0);
    create_pd(0, SEL_KERNEL);
    create_cq(0, SEL_KERNEL, 6);
    create_user_mr(0, 0, VA_A, 4096);
    create_user_mr(0, 0, VA_B, 4096);
    create_qp(0, 0, 0, SEL_KERNEL);
    create_qp(0, 0, 0, SEL_KERNEL);
    connect_qp(0, 0, 0, 1, 1, 7);
    /* MODIFY_QP of QP 1 with the driver's masks, dest = QP 0 */
    u8(FZ_OP_MODIFY_QP); u8(0); u8(1); u32(0); u8(PVRDMA_QPS_INIT_SEED);
    u8(0);
    u8(FZ_OP_MODIFY_QP); u8(0); u8(1); u32(0); u8(PVRDMA_QPS_RTR_SEED);
    u8(0);
    post_recv(0, 1, 1, 0, 256);
    post_send(0, 0, 2, 0, 0, 100, 0, 1, 0, 0, 0, 0);
    post_recv(0, 1, 1, 0, 256);
    post_send(0, 0, 1, 0, 0, 100, 0, 1, 0, 0, 0, 5);
    consume(0);
    finish("rtr-comm-est");

    /* UD and GSI QPs through RTS, sends from both (to nobody). */
    begin(0);
    load_dsr(0);
    bind_gid(0, 0);
    create_pd(0, SEL_KERNEL);
    create_cq(0, SEL_KERNEL, 4);
    create_user_mr(0, 0, VA_A, 4096);
    u8(FZ_OP_CREATE_QP); u8(0); u8(0xC0); u8(0); u8(0); u8(0);
    u8(SEL_KERNEL); u8(3); u8(0); u8(1); u8(0);
    u8(FZ_OP_CREATE_QP); u8(0); u8(0xE0); u8(0); u8(0); u8(0);
    u8(SEL_KERNEL); u8(3); u8(0); u8(1); u8(0);
    connect_qp(0, 0, 0, 0, 0, 0);
    connect_qp(0, 1, 0, 1, 0, 0);
    post_recv(0, 0, 0, 0, 256);
    post_send(0, 0, 2, 0, 0, 64, 0, 0, 0, 0, 0, 0);
    post_send(0, 1, 3, 0, 0, 64, 0, 0, 0, 0, 0, 0);
    consume(0);
    finish("ud-gsi");

    /*
     * UD datagrams that land: QP 0 (UD, Q_Key 0x11111111 from the
     * connect action) sends to itself, with and without immediate, then
     * with a wrong Q_Key and beyond its receive buffer.
     */
    ud_self();
    post_recv(0, 0, 0, 4096, 40 + 100);
    post_recv(0, 0, 0, 4096, 40 + 100);
    post_recv(0, 0, 0, 4096, 40 + 100);
    {
        static const uint32_t qkey[] = {
            0x11111111, 0x80000000, 0x22222222, 0x11111111
        };
        static const uint8_t op[] = { 2, 3, 2, 2 };    /* SEND, .._IMM */
        static const uint16_t len[] = { 100, 60, 16, 200 };
        unsigned i;

        for (i = 0; i < 4; i++) {
            u8(FZ_OP_POST_SEND); u8(0); u8(0); u8(op[i]); u8(2);
            u8(1); u8(0); u16(0); u16(len[i]);
            u8(0); u8(0);                       /* rdev 0, MR 0 */
            u16(0); u64(64 << 8); u64(1ull << 62); u32(qkey[i]); /* QP 0 */
            u8(1);
        }
    }
    consume(0);
    finish("ud-datagrams");

    /*
     * Multicast: UD QP 0 joins group ff00::...:0 twice (the second a
     * no-op) and a unicast "group" (refused), receives its own SEND to
     * the group (QPN 0xFFFFFF), leaves, and sends again (to nobody).
     */
    ud_self();
    u8(FZ_OP_QUERY); u8(0); u8(0xF0); u8(0); u32(0); u32(0);
    u8(FZ_OP_QUERY); u8(0); u8(0xF0); u8(0); u32(0); u32(0);
    u8(FZ_OP_QUERY); u8(0); u8(0xF0); u8(0); u32(1); u32(3);
    post_recv(0, 0, 0, 4096, 40 + 100);
    post_recv(0, 0, 0, 4096, 40 + 100);
    for (unsigned i = 0; i < 2; i++) {
        if (i) {
            u8(FZ_OP_QUERY); u8(0); u8(0xF1); u8(0); u32(0); u32(0);
        }
        /* dgid ff00:...:8000:0040:: from b and a; QPN raw 0xFFFFFF */
        u8(FZ_OP_POST_SEND); u8(0); u8(0); u8(3); u8(2);
        u8(1); u8(0); u16(0); u16(100);
        u8(0); u8(FZ_SEL_RAW); u32(0xFFFFFF);
        u16(0); u64(64 << 8); u64(0x80000000000000ffull); u32(0x11111111);
        u8(1);
    }
    consume(0);
    finish("mcast");

    /*
     * XRC: domain 1, an XRC SRQ of it (SRQ 0, CQ 0) with two receives,
     * an XRC_TGT QP (QP 0) and an XRC_INI QP (QP 1) connected; a SEND,
     * a WRITE, a READ and a FETCH_ADD naming SRQ 0 (the high half of a),
     * then a SEND naming SRQ 7, which does not exist (a NAK).
     */
    begin(0);
    load_dsr(0);
    bind_gid(0, 0);
    create_pd(0, SEL_KERNEL);
    create_cq(0, SEL_KERNEL, 6);
    create_user_mr(0, 0, VA_A, 4 * 4096);
    u8(FZ_OP_QUERY); u8(0); u8(0xF2); u8(0); u32(0); u32(0);
    u8(FZ_OP_CREATE_SRQ); u8(0); u8(0); u8(4); u8(0x81); u8(0); u8(0);
    u8(FZ_OP_CREATE_QP); u8(0); u8(0xFA); u8(1); u8(0);
    u8(FZ_OP_CREATE_QP); u8(0); u8(0xF9); u8(0); u8(0); u8(0);
    u8(SEL_KERNEL); u8(4); u8(3); u8(0); u8(0);
    connect_qp(0, 1, 0, 0, 1, 7);
    connect_qp(0, 0, 0, 1, 1, 7);
    post_srq_recv(0, 0, 0, 0, 512);
    post_srq_recv(0, 0, 0, 512, 512);
    post_send(0, 1, 2, 0, 2048, 100, 0, 0, 0, 0, 0, 0);
    post_send(0, 1, 0, 0, 2048, 64, 0, 0, 1024, 0, 0, 0);
    post_send(0, 1, 4, 0, 3072, 64, 0, 0, 1024, 0, 0, 0);
    post_send(0, 1, 6, 0, 3200, 8, 0, 0, 1536, 0, 1, 0);
    post_send(0, 1, 2, 0, 2048, 16, 0, 0, 0, 7ull << 32, 0, 0);
    consume(0);
    finish("xrc");

    /* Hostile registers: REQUEST before a DSR, bad CTL, IMR games. */
    begin(FZ_CFG_TWO_DEVICES);
    u8(FZ_OP_REG_WRITE); u8(0); u16(0x10); u32(0);
    u8(FZ_OP_REG_WRITE); u8(0); u16(0x0c); u32(7);
    u8(FZ_OP_REG_WRITE); u8(0); u16(0x1c); u32(0);
    load_dsr(0);
    u8(FZ_OP_REG_WRITE); u8(0); u16(0x1c); u32(0xffffffff);
    u8(FZ_OP_ASYNC_EVENT); u8(0); u32(9); u32(1);
    u8(FZ_OP_REG_READ); u8(0); u16(0x18);
    u8(FZ_OP_REG_WRITE); u8(0); u16(0x1c); u32(0);
    u8(FZ_OP_CMD_RAW); u8(0); u8(2);
    for (int i = 0; i < 184; i++) {
        u8(0);
    }
    finish("registers");
    return 0;
}
